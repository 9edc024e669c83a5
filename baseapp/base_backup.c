/* base_backup.c -- base backups sent to other baseapps, held for them, and
 * turned into live bases when their baseapp dies (base_backup.h). It owns
 * the backups it holds (packed BaseBackups by entity id), the walk over
 * this baseapp's bases and the drops not yet sent. */
#include "base_backup.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bit_stream.h"
#include "clock.h"
#include "entity_state.h"
#include "id_map.h"
#include "log.h"
#include "peer_message.h"
#include "proxy.h"

/* More baseapps than a cluster runs; past it the rest are not candidates. */
#define BASE_BACKUP_MAX_HOLDERS 64
/* A held backup not refreshed for this many periods, while its baseapp is
 * alive and sending, belongs to a base that went or now backs up
 * elsewhere (its new holder has had two full periods to get it). */
#define BASE_BACKUP_STALE_PERIODS 3

typedef struct base_backup_held {
    uint64_t origin; /* the baseapp whose base it is */
    uint8_t *packed; /* a packed BaseBackup */
    size_t length;
    uint64_t received_us; /* monotonic */
} base_backup_held;

struct base_backups {
    base_backups_context context;
    id_map held;       /* entity id -> base_backup_held * */
    id_map last_heard; /* origin baseapp id -> when its last backups came (monotonic us, as a pointer) */
    uint32_t cursor;
    uint64_t last_tick_us;
    uint64_t last_expiry_us;
    double owed; /* bases owed a backup, carried from tick to tick */
    uint64_t *drops;
    size_t drop_count, drop_capacity;
    base_backup_counters counters;
    bool warned_alone;
};

base_backups *base_backups_create(const base_backups_context *context) {
    base_backups *backups = xcalloc(1, sizeof *backups);
    backups->context = *context;
    id_map_init(&backups->held);
    id_map_init(&backups->last_heard);
    return backups;
}

static void base_backup_held_free(base_backup_held *held) {
    if (!held) return;
    free(held->packed);
    free(held);
}

void base_backups_free(base_backups *backups) {
    if (!backups) return;
    size_t cursor = 0;
    uint64_t key;
    void *value;
    while (id_map_next(&backups->held, &cursor, &key, &value)) base_backup_held_free(value);
    id_map_close(&backups->held);
    id_map_close(&backups->last_heard);
    free(backups->drops);
    free(backups);
}

void base_backups_figures(const base_backups *backups, base_backup_counters *out) {
    *out = backups->counters;
    out->held = id_map_count(&backups->held);
}

/* ---- the holder ---------------------------------------------------------------- */

/* splitmix64's finaliser: every input bit reaches every output bit. */
static uint64_t base_backup_mix(uint64_t x) {
    x ^= x >> 30;
    x *= UINT64_C(0xbf58476d1ce4e5b9);
    x ^= x >> 27;
    x *= UINT64_C(0x94d049bb133111eb);
    x ^= x >> 31;
    return x;
}

uint64_t base_backup_holder(uint64_t entity_id, const uint64_t *candidates, size_t count) {
    uint64_t best = 0, best_score = 0;
    for (size_t i = 0; i < count; i++) {
        uint64_t score = base_backup_mix(entity_id ^ base_backup_mix(candidates[i] + UINT64_C(0x9e3779b97f4a7c15)));
        if (!best || score > best_score || (score == best_score && candidates[i] < best)) {
            best = candidates[i];
            best_score = score;
        }
    }
    return best;
}

/* The other baseapps a backup may go to: connected, and not lapsed or dead
 * (one that is may be about to be declared dead with what it holds). */
static size_t base_backups_candidates(const base_backups *backups, uint64_t *out) {
    const peer_set *peers = backups->context.peers;
    size_t count = 0, cursor = 0;
    uint64_t peer;
    while ((peer = peer_set_next_up(peers, PEER_ROLE_BASEAPP, &cursor)) != 0 && count < BASE_BACKUP_MAX_HOLDERS) {
        if (peer == backups->context.self->process_id) continue;
        peer_liveness liveness = peer_set_liveness(peers, peer);
        if (liveness == PEER_LAPSED || liveness == PEER_DEAD) continue;
        out[count++] = peer;
    }
    return count;
}

/* ---- sending ------------------------------------------------------------------- */

/* One backup being built: the message and what it points into. */
typedef struct base_backup_slot {
    Tessera__Cluster__BaseBackup message;
    Tessera__Cluster__CellSnapshot cell;
    bit_writer properties;
    Tessera__Cluster__TimerState **timers; /* its base's pending timers (NULL: none) */
    size_t timer_count;
    uint64_t holder;
} base_backup_slot;

static void base_backup_slot_close(base_backup_slot *slot) {
    bit_writer_close(&slot->properties);
    entity_timers_wire_free(slot->timers, slot->timer_count);
}

static void base_backup_fill(base_backup_slot *slot, const base_entity *base, uint64_t holder,
                             const base_timers *timers) {
    slot->holder = holder;
    Tessera__Cluster__BaseBackup *message = &slot->message;
    tessera__cluster__base_backup__init(message);
    bit_writer_init(&slot->properties);
    entity_state_encode_all(base->properties, &slot->properties);
    bit_writer_align(&slot->properties);
    message->entity_id = base->entity_id;
    message->class_name = (char *)base->cls->name;
    message->name = (char *)base->name;
    message->properties.data = (uint8_t *)bit_writer_data(&slot->properties);
    message->properties.len = bit_writer_bytes(&slot->properties);
    message->cellapp_id = base->cell.cellapp_id;
    message->cell_incarnation = base->cell.incarnation;
    if (base->backup.state) {
        tessera__cluster__cell_snapshot__init(&slot->cell);
        slot->cell.entity_id = base->entity_id;
        slot->cell.incarnation = base->backup.incarnation;
        slot->cell.state.data = base->backup.state;
        slot->cell.state.len = base->backup.length;
        slot->cell.saved_wall_us = base->backup.saved_wall_us;
        message->cell_backup = &slot->cell;
    }
    /* Only the base that holds its account's client, attached or waiting
     * for a reconnect (one that gave its client away holds none). */
    if (base->proxy && (base->proxy->link || base->proxy->detached_us)) {
        message->has_proxy = true;
        message->account = (char *)base->proxy->account;
        message->session_token = (char *)base->proxy->session_token;
        message->client_binding = base->proxy->client_binding;
    }
    if (timers) {
        base_timers_save(timers, base->entity_id, &slot->timers, &slot->timer_count);
        message->timers = slot->timers;
        message->n_timers = slot->timer_count;
    }
    message->saved_wall_us = clock_wall_us();
    message->loaded = base->persistence.loaded;
}

/* Sends the slots of `holder` in one message. */
static void base_backups_send_to(base_backups *backups, uint64_t holder, base_backup_slot *slots, size_t count) {
    if (!count) return;
    Tessera__Cluster__BaseBackup **list = xmalloc(count * sizeof(Tessera__Cluster__BaseBackup *));
    size_t n = 0;
    for (size_t i = 0; i < count; i++)
        if (slots[i].holder == holder) list[n++] = &slots[i].message;
    Tessera__Cluster__BaseBackups batch = TESSERA__CLUSTER__BASE_BACKUPS__INIT;
    batch.backups = list;
    batch.n_backups = n;
    if (n && peer_send_base_backups(backups->context.peers, holder, &batch) == 0) {
        backups->counters.sent += n;
        backups->counters.sent_bytes += tessera__cluster__base_backups__get_packed_size(&batch);
    }
    free(list);
}

/* This tick's share of the period: the next bases of the walk, each to its
 * holder, one message per holder. */
static void base_backups_send_share(base_backups *backups, uint64_t now_us) {
    /* Nine tenths of the period: with the timer's jitter and bases coming
     * and going under the walk, every base's latest backup stays within
     * the period. */
    uint64_t period_us = (uint64_t)backups->context.settings->base_backup_period_ms * 900;
    uint64_t elapsed = backups->last_tick_us && now_us > backups->last_tick_us ? now_us - backups->last_tick_us : 0;
    backups->last_tick_us = now_us;
    if (!period_us) return;
    size_t total = base_entities_count(backups->context.bases);
    backups->owed += (double)total * (double)elapsed / (double)period_us;
    if (backups->owed > (double)total) backups->owed = (double)total;
    size_t due = (size_t)floor(backups->owed);
    if (!due) return;
    backups->owed -= (double)due;
    uint64_t candidates[BASE_BACKUP_MAX_HOLDERS];
    size_t candidate_count = base_backups_candidates(backups, candidates);
    if (!candidate_count) {
        if (!backups->warned_alone)
            log_warn("base backups: no other baseapp is up: %zu bases here have no backup until one is", total);
        backups->warned_alone = true;
        return;
    }
    backups->warned_alone = false;
    uint64_t began_us = clock_monotonic_us();
    base_backup_slot *slots = xcalloc(due, sizeof *slots);
    size_t filled = 0;
    bool wrapped = false;
    while (filled < due) {
        base_entity *base = base_entities_next(backups->context.bases, &backups->cursor);
        if (!base) {
            if (wrapped) break; /* fewer bases than due: each once */
            wrapped = true;
            backups->cursor = 0;
            continue;
        }
        if (base->state == BASE_ENTITY_DESTROYING) continue;
        base_backup_fill(&slots[filled], base, base_backup_holder(base->entity_id, candidates, candidate_count),
                         backups->context.timers);
        filled++;
    }
    for (size_t c = 0; c < candidate_count; c++) base_backups_send_to(backups, candidates[c], slots, filled);
    for (size_t i = 0; i < filled; i++) base_backup_slot_close(&slots[i]);
    free(slots);
    backups->counters.send_us += clock_monotonic_us() - began_us;
}

void base_backups_forget(base_backups *backups, uint64_t entity_id) {
    if (backups->context.self->stopping) return;
    if (backups->drop_count == backups->drop_capacity) {
        backups->drop_capacity = backups->drop_capacity ? 2 * backups->drop_capacity : 64;
        backups->drops = xrealloc(backups->drops, backups->drop_capacity * sizeof *backups->drops);
    }
    backups->drops[backups->drop_count++] = entity_id;
}

/* The drops queued since the last tick, to every other baseapp (a base's
 * backup may be held by its old holder as well as its new one). */
static void base_backups_send_drops(base_backups *backups) {
    if (!backups->drop_count) return;
    Tessera__Cluster__BaseBackupDrop drop = TESSERA__CLUSTER__BASE_BACKUP_DROP__INIT;
    drop.entity_ids = backups->drops;
    drop.n_entity_ids = backups->drop_count;
    size_t cursor = 0;
    uint64_t peer;
    while ((peer = peer_set_next_up(backups->context.peers, PEER_ROLE_BASEAPP, &cursor)) != 0)
        if (peer != backups->context.self->process_id)
            (void)peer_send_base_backup_drop(backups->context.peers, peer, &drop);
    backups->drop_count = 0;
}

/* Held backups whose baseapp is alive and sending (it sent backups within
 * the last period) but has not refreshed them for BASE_BACKUP_STALE_PERIODS
 * periods, and those of a baseapp that left the registry (stopped and
 * handed its work over), are forgotten. A baseapp that sends nothing --
 * stalled, stopped, cut off -- keeps all its backups here: they are what
 * its bases come back from if it is declared dead. */
static void base_backups_expire(base_backups *backups, uint64_t now_us) {
    uint64_t period_us = (uint64_t)backups->context.settings->base_backup_period_ms * 1000;
    uint64_t stale_us = BASE_BACKUP_STALE_PERIODS * (period_us ? period_us : 1000000);
    const peer_set *peers = backups->context.peers;
    size_t cursor = 0, count = 0;
    uint64_t key;
    void *value;
    uint64_t *expired = xmalloc((id_map_count(&backups->held) + 1) * sizeof *expired);
    while (id_map_next(&backups->held, &cursor, &key, &value)) {
        const base_backup_held *held = value;
        peer_liveness liveness = peer_set_liveness(peers, held->origin);
        bool up = peer_set_is_up(peers, held->origin);
        uint64_t heard_us = (uint64_t)(uintptr_t)id_map_get(&backups->last_heard, held->origin);
        bool sending = heard_us && now_us - heard_us <= (period_us ? period_us : 1000000);
        bool stale = up && sending && liveness == PEER_LISTED && now_us - held->received_us > stale_us;
        bool left = !up && liveness == PEER_GONE;
        if (!stale && !left) continue;
        expired[count++] = key;
    }
    for (size_t i = 0; i < count; i++) base_backup_held_free(id_map_remove(&backups->held, expired[i]));
    backups->counters.dropped += count;
    free(expired);
}

void base_backups_tick(base_backups *backups, uint64_t now_us) {
    const process_self *self = backups->context.self;
    if (self->stopping || !self->process_id) return;
    base_backups_send_drops(backups);
    if (now_us - backups->last_expiry_us >= 1000000) {
        backups->last_expiry_us = now_us;
        base_backups_expire(backups, now_us);
    }
    base_backups_send_share(backups, now_us);
}

/* ---- holding ------------------------------------------------------------------- */

void base_backups_on_backups(base_backups *backups, uint64_t sender, const Tessera__Cluster__BaseBackups *message) {
    uint64_t now_us = clock_monotonic_us();
    for (size_t i = 0; i < message->n_backups; i++) {
        const Tessera__Cluster__BaseBackup *backup = message->backups[i];
        if (!backup || !backup->entity_id) continue;
        base_backup_held *held = id_map_get(&backups->held, backup->entity_id);
        if (!held) {
            held = xcalloc(1, sizeof *held);
            id_map_put(&backups->held, backup->entity_id, held);
        }
        free(held->packed);
        held->length = tessera__cluster__base_backup__get_packed_size(backup);
        held->packed = xmalloc(held->length ? held->length : 1);
        tessera__cluster__base_backup__pack(backup, held->packed);
        held->origin = sender;
        held->received_us = now_us;
    }
    if (message->n_backups) id_map_put(&backups->last_heard, sender, (void *)(uintptr_t)now_us);
}

void base_backups_on_drop(base_backups *backups, uint64_t sender, const Tessera__Cluster__BaseBackupDrop *message) {
    for (size_t i = 0; i < message->n_entity_ids; i++) {
        base_backup_held *held = id_map_get(&backups->held, message->entity_ids[i]);
        if (!held || held->origin != sender) continue;
        base_backup_held_free(id_map_remove(&backups->held, message->entity_ids[i]));
        backups->counters.dropped++;
    }
}

/* ---- restoring ----------------------------------------------------------------- */

void base_backups_on_baseapp_dead(base_backups *backups, uint64_t baseapp_id) {
    id_map_remove(&backups->last_heard, baseapp_id);
    size_t cursor = 0, count = 0;
    uint64_t key;
    void *value;
    uint64_t *mine = xmalloc((id_map_count(&backups->held) + 1) * sizeof *mine);
    while (id_map_next(&backups->held, &cursor, &key, &value)) {
        if (((const base_backup_held *)value)->origin != baseapp_id) continue;
        mine[count++] = key;
    }
    uint64_t began_us = clock_monotonic_us(), now_wall = clock_wall_us(), oldest_ms = 0;
    size_t restored = 0;
    for (size_t i = 0; i < count; i++) {
        base_backup_held *held = id_map_remove(&backups->held, mine[i]);
        Tessera__Cluster__BaseBackup *backup = tessera__cluster__base_backup__unpack(NULL, held->length, held->packed);
        char why[200] = "";
        if (!backup) {
            backups->counters.restore_failed++;
            log_error("entity %" PRIu64 " of dead baseapp %" PRIu64 ": its backup does not decode: not restored",
                      mine[i], baseapp_id);
        } else if (backups->context.restore(backups->context.owner, backup, baseapp_id, why, sizeof why) != 0) {
            backups->counters.restore_failed++;
            log_warn("entity %" PRIu64 " of dead baseapp %" PRIu64 " not restored: %s", mine[i], baseapp_id, why);
        } else {
            restored++;
            uint64_t age_ms = now_wall > backup->saved_wall_us ? (now_wall - backup->saved_wall_us) / 1000 : 0;
            if (age_ms > oldest_ms) oldest_ms = age_ms;
        }
        if (backup) tessera__cluster__base_backup__free_unpacked(backup, NULL);
        base_backup_held_free(held);
    }
    free(mine);
    backups->counters.restored += restored;
    if (count)
        log_warn("dead baseapp %" PRIu64 ": %zu of its %zu bases held here restored in %" PRIu64
                 " ms (backups at most %" PRIu64 " ms old)",
                 baseapp_id, restored, count, (clock_monotonic_us() - began_us) / 1000, oldest_ms);
}
