/* ghost_order.c -- the books of which incarnation of each entity a cellapp
 * listens to, and the messages it holds for later ones (the rules are in
 * ghost_order.h). One record per entity the cellapp has heard of, in an
 * id_map; a record's held messages are a small array in arrival order,
 * since a hold is rare and short (the overtaken real's last messages are
 * one network hop behind). */
#include "ghost_order.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "id_map.h"
#include "log.h"

typedef enum ghost_order_state {
    GHOST_ORDER_ABSENT,    /* no copy here, never was (or forgotten): only holds */
    GHOST_ORDER_PRESENT,   /* a copy is here: a ghost of `owner`, or the real if owner is us */
    GHOST_ORDER_TOMBSTONE, /* the copy was deleted at `incarnation` */
} ghost_order_state;

typedef struct ghost_order_hold {
    ghost_order_message message;
    uint64_t since_us;
} ghost_order_hold;

typedef struct ghost_order_record {
    ghost_order_state state;
    bool lost_pending; /* its feeder died with nothing later held: report LOST */
    bool orphan;       /* its feeder was declared dead with nothing later held: the copy waits for a restore */
    uint32_t incarnation;
    uint64_t owner;
    uint64_t since_us; /* TOMBSTONE: when it was deleted */
    ghost_order_hold *holds;
    uint32_t hold_count, hold_capacity;
} ghost_order_record;

struct ghost_order {
    id_map records;    /* entity id -> ghost_order_record */
    id_map dead_peers; /* cellapp id -> GHOST_ORDER_DEAD_DROP or GHOST_ORDER_DEAD_KEEP */
    void (*free_payload)(void *payload, void *context);
    void *context;
    uint64_t now_us; /* the latest time a caller told us */
    size_t held;
    ghost_order_stats stats;
};

const char *ghost_order_kind_name(ghost_order_kind kind) {
    switch (kind) {
        case GHOST_ORDER_CREATE:
            return "create";
        case GHOST_ORDER_UPDATE:
            return "update";
        case GHOST_ORDER_DELETE:
            return "delete";
        case GHOST_ORDER_SET_REAL:
            return "set_real";
        case GHOST_ORDER_OFFLOAD:
            return "offload";
    }
    return "?";
}

ghost_order *ghost_order_create(void (*free_payload)(void *payload, void *context), void *context) {
    ghost_order *order = xcalloc(1, sizeof *order);
    id_map_init(&order->records);
    id_map_init(&order->dead_peers);
    order->free_payload = free_payload;
    order->context = context;
    return order;
}

static void ghost_order_drop_payload(ghost_order *order, void *payload) {
    if (payload && order->free_payload) order->free_payload(payload, order->context);
}

static void ghost_order_free_record(ghost_order *order, ghost_order_record *record) {
    for (uint32_t i = 0; i < record->hold_count; i++) ghost_order_drop_payload(order, record->holds[i].message.payload);
    order->held -= record->hold_count;
    free(record->holds);
    free(record);
}

void ghost_order_free(ghost_order *order) {
    if (!order) return;
    size_t cursor = 0;
    uint64_t id;
    void *value;
    while (id_map_next(&order->records, &cursor, &id, &value)) ghost_order_free_record(order, value);
    id_map_close(&order->records);
    id_map_close(&order->dead_peers);
    free(order);
}

/* How a dead peer's copies end with nothing later held. */
#define GHOST_ORDER_DEAD_DROP ((void *)1) /* lost: the caller destroys them */
#define GHOST_ORDER_DEAD_KEEP ((void *)2) /* orphans: kept for a restore */

static ghost_order_record *ghost_order_record_for(ghost_order *order, uint64_t entity_id) {
    ghost_order_record *record = id_map_get(&order->records, entity_id);
    if (!record) {
        record = xcalloc(1, sizeof *record);
        record->state = GHOST_ORDER_ABSENT;
        if (id_map_put(&order->records, entity_id, record) != 0) log_panic("ghost order: cannot index entity");
    }
    return record;
}

/* Removes a record that no longer says anything. */
static void ghost_order_prune(ghost_order *order, uint64_t entity_id, ghost_order_record *record) {
    if (record->state == GHOST_ORDER_ABSENT && record->hold_count == 0 && !record->lost_pending) {
        id_map_remove(&order->records, entity_id);
        ghost_order_free_record(order, record);
    }
}

static ghost_order_verdict ghost_order_judge(const ghost_order_record *record, const ghost_order_message *m) {
    uint32_t k = m->incarnation;
    switch (record->state) {
        case GHOST_ORDER_ABSENT:
            /* An offload carries the whole entity: like a create, it needs no
         * copy before it (a teleport into another space makes none). */
            return m->kind == GHOST_ORDER_CREATE || m->kind == GHOST_ORDER_OFFLOAD ? GHOST_ORDER_APPLY
                                                                                   : GHOST_ORDER_HOLD;
        case GHOST_ORDER_PRESENT:
            if (k < record->incarnation) return GHOST_ORDER_STALE;
            /* An orphan (its feeder died, nothing later known): the first
             * later real to make a ghost here takes it over, in place. */
            if (k > record->incarnation && record->orphan &&
                (m->kind == GHOST_ORDER_CREATE || m->kind == GHOST_ORDER_OFFLOAD))
                return GHOST_ORDER_APPLY;
            return k > record->incarnation ? GHOST_ORDER_HOLD : GHOST_ORDER_APPLY;
        case GHOST_ORDER_TOMBSTONE:
            if (k < record->incarnation) return GHOST_ORDER_STALE;
            if (m->kind == GHOST_ORDER_CREATE || m->kind == GHOST_ORDER_OFFLOAD) return GHOST_ORDER_APPLY;
            return k == record->incarnation ? GHOST_ORDER_STALE : GHOST_ORDER_HOLD;
    }
    return GHOST_ORDER_STALE;
}

/* The record's feeder is gone: move on to the earliest later incarnation
 * held, or mark the copy lost. */
static void ghost_order_resolve_dead(ghost_order *order, ghost_order_record *record) {
    for (;;) {
        void *dead = record->state == GHOST_ORDER_PRESENT ? id_map_get(&order->dead_peers, record->owner) : NULL;
        if (!dead) return;
        const ghost_order_hold *earliest = NULL;
        for (uint32_t i = 0; i < record->hold_count; i++) {
            const ghost_order_hold *hold = &record->holds[i];
            if (hold->message.incarnation > record->incarnation &&
                (!earliest || hold->message.incarnation < earliest->message.incarnation))
                earliest = hold;
        }
        if (!earliest) {
            if (dead == GHOST_ORDER_DEAD_KEEP)
                record->orphan = true;
            else
                record->lost_pending = true;
            return;
        }
        record->incarnation = earliest->message.incarnation;
        record->owner = earliest->message.sender;
    }
}

/* The books after applying `m`. */
static void ghost_order_account(ghost_order *order, ghost_order_record *record, const ghost_order_message *m) {
    order->stats.applied++;
    record->orphan = false;
    switch (m->kind) {
        case GHOST_ORDER_CREATE:
            record->state = GHOST_ORDER_PRESENT;
            record->incarnation = m->incarnation;
            record->owner = m->sender;
            break;
        case GHOST_ORDER_UPDATE:
            break;
        case GHOST_ORDER_DELETE:
            record->state = GHOST_ORDER_TOMBSTONE;
            record->incarnation = m->incarnation;
            record->since_us = order->now_us;
            break;
        case GHOST_ORDER_SET_REAL:
        case GHOST_ORDER_OFFLOAD:
            record->state = GHOST_ORDER_PRESENT;
            record->incarnation = m->incarnation + 1;
            record->owner = m->next_owner;
            break;
    }
    ghost_order_resolve_dead(order, record);
}

ghost_order_verdict ghost_order_offer(ghost_order *order, uint64_t entity_id, const ghost_order_message *message,
                                      uint64_t now_us) {
    if (now_us > order->now_us) order->now_us = now_us;
    ghost_order_record *record = ghost_order_record_for(order, entity_id);
    ghost_order_verdict verdict = ghost_order_judge(record, message);
    if (verdict == GHOST_ORDER_APPLY) {
        ghost_order_account(order, record, message);
    } else if (verdict == GHOST_ORDER_HOLD) {
        if (record->hold_count == record->hold_capacity) {
            record->hold_capacity = record->hold_capacity ? record->hold_capacity * 2 : 4;
            record->holds = xrealloc(record->holds, record->hold_capacity * sizeof *record->holds);
        }
        record->holds[record->hold_count++] = (ghost_order_hold){*message, now_us};
        order->held++;
        order->stats.held++;
    } else {
        order->stats.stale++;
        ghost_order_prune(order, entity_id, record);
    }
    return verdict;
}

void ghost_order_hold_payload(ghost_order *order, uint64_t entity_id, void *payload) {
    ghost_order_record *record = id_map_get(&order->records, entity_id);
    if (!record || record->hold_count == 0) {
        ghost_order_drop_payload(order, payload);
        return;
    }
    record->holds[record->hold_count - 1].message.payload = payload;
}

ghost_order_event ghost_order_next(ghost_order *order, uint64_t entity_id, ghost_order_message *out) {
    ghost_order_record *record = id_map_get(&order->records, entity_id);
    if (!record) return GHOST_ORDER_NONE;
    if (record->lost_pending) {
        record->lost_pending = false;
        record->state = GHOST_ORDER_TOMBSTONE;
        record->since_us = order->now_us;
        order->stats.lost++;
        return GHOST_ORDER_LOST;
    }
    for (uint32_t i = 0; i < record->hold_count;) {
        ghost_order_verdict verdict = ghost_order_judge(record, &record->holds[i].message);
        if (verdict == GHOST_ORDER_HOLD) {
            i++;
            continue;
        }
        ghost_order_message message = record->holds[i].message;
        memmove(&record->holds[i], &record->holds[i + 1], (record->hold_count - i - 1) * sizeof *record->holds);
        record->hold_count--;
        order->held--;
        if (verdict == GHOST_ORDER_STALE) {
            order->stats.stale++;
            ghost_order_drop_payload(order, message.payload);
            continue;
        }
        order->stats.replayed++;
        ghost_order_account(order, record, &message);
        *out = message;
        return GHOST_ORDER_READY;
    }
    ghost_order_prune(order, entity_id, record);
    return GHOST_ORDER_NONE;
}

bool ghost_order_lookup(const ghost_order *order, uint64_t entity_id, uint32_t *incarnation, uint64_t *owner) {
    const ghost_order_record *record = id_map_get(&order->records, entity_id);
    if (!record || record->state != GHOST_ORDER_PRESENT) return false;
    if (incarnation) *incarnation = record->incarnation;
    if (owner) *owner = record->owner;
    return true;
}

void ghost_order_set_real(ghost_order *order, uint64_t entity_id, uint32_t incarnation, uint64_t self) {
    ghost_order_record *record = ghost_order_record_for(order, entity_id);
    record->orphan = false;
    record->state = GHOST_ORDER_PRESENT;
    record->incarnation = incarnation;
    record->owner = self;
    record->lost_pending = false;
}

void ghost_order_set_ghost(ghost_order *order, uint64_t entity_id, uint32_t incarnation, uint64_t owner) {
    ghost_order_record *record = ghost_order_record_for(order, entity_id);
    record->orphan = false;
    record->state = GHOST_ORDER_PRESENT;
    record->incarnation = incarnation;
    record->owner = owner;
    record->lost_pending = false;
    ghost_order_resolve_dead(order, record);
}

void ghost_order_forget(ghost_order *order, uint64_t entity_id, uint64_t now_us) {
    if (now_us > order->now_us) order->now_us = now_us;
    ghost_order_record *record = id_map_get(&order->records, entity_id);
    if (!record) return;
    if (record->state == GHOST_ORDER_PRESENT) {
        record->state = GHOST_ORDER_TOMBSTONE;
        record->since_us = order->now_us;
    }
    record->lost_pending = false;
}

static size_t ghost_order_peer_ends(ghost_order *order, uint64_t peer, void *how, uint64_t *out, size_t cap) {
    id_map_remove(&order->dead_peers, peer);
    id_map_put(&order->dead_peers, peer, how);
    size_t found = 0, cursor = 0;
    uint64_t id;
    void *value;
    while (id_map_next(&order->records, &cursor, &id, &value)) {
        ghost_order_record *record = value;
        if (record->state != GHOST_ORDER_PRESENT || record->owner != peer) continue;
        ghost_order_resolve_dead(order, record);
        if (found < cap) out[found] = id;
        found++;
    }
    return found;
}

size_t ghost_order_peer_down(ghost_order *order, uint64_t peer, uint64_t *out, size_t cap) {
    return ghost_order_peer_ends(order, peer, GHOST_ORDER_DEAD_DROP, out, cap);
}

size_t ghost_order_peer_orphans(ghost_order *order, uint64_t peer, uint64_t *out, size_t cap) {
    return ghost_order_peer_ends(order, peer, GHOST_ORDER_DEAD_KEEP, out, cap);
}

bool ghost_order_is_orphan(const ghost_order *order, uint64_t entity_id) {
    const ghost_order_record *record = id_map_get(&order->records, entity_id);
    return record && record->state == GHOST_ORDER_PRESENT && record->orphan;
}

/* How long ago `since_us` was at `now_us`: 0 if it is later (a caller's
 * clock need not be monotonic, and the books keep the latest time seen). */
static uint64_t ghost_order_age(uint64_t now_us, uint64_t since_us) {
    return now_us > since_us ? now_us - since_us : 0;
}

size_t ghost_order_expire(ghost_order *order, uint64_t now_us, uint64_t max_age_us, uint64_t tombstone_us) {
    if (now_us > order->now_us) order->now_us = now_us;
    size_t dropped = 0, cursor = 0;
    uint64_t id;
    void *value;
    /* Removal during iteration is not allowed: collect first. */
    uint64_t *empty = NULL;
    size_t empty_count = 0, empty_capacity = 0;
    while (id_map_next(&order->records, &cursor, &id, &value)) {
        ghost_order_record *record = value;
        for (uint32_t i = 0; i < record->hold_count;) {
            ghost_order_hold *hold = &record->holds[i];
            uint64_t age_us = ghost_order_age(now_us, hold->since_us);
            if (age_us <= max_age_us) {
                i++;
                continue;
            }
            log_warn("entity %" PRIu64 ": a %s of incarnation %u from cellapp %" PRIu64 " waited %" PRIu64
                     " ms for an earlier real that never finished: dropped",
                     id, ghost_order_kind_name(hold->message.kind), hold->message.incarnation, hold->message.sender,
                     age_us / 1000);
            ghost_order_drop_payload(order, hold->message.payload);
            memmove(hold, hold + 1, (record->hold_count - i - 1) * sizeof *hold);
            record->hold_count--;
            order->held--;
            order->stats.expired++;
            dropped++;
        }
        if (record->state == GHOST_ORDER_TOMBSTONE && record->hold_count == 0 &&
            ghost_order_age(now_us, record->since_us) > tombstone_us)
            record->state = GHOST_ORDER_ABSENT;
        if (record->state == GHOST_ORDER_ABSENT && record->hold_count == 0 && !record->lost_pending) {
            if (empty_count == empty_capacity) {
                empty_capacity = empty_capacity ? empty_capacity * 2 : 16;
                empty = xrealloc(empty, empty_capacity * sizeof *empty);
            }
            empty[empty_count++] = id;
        }
    }
    for (size_t i = 0; i < empty_count; i++) ghost_order_free_record(order, id_map_remove(&order->records, empty[i]));
    free(empty);
    return dropped;
}

size_t ghost_order_held_count(const ghost_order *order) { return order->held; }

size_t ghost_order_size(const ghost_order *order) { return id_map_count(&order->records); }

void ghost_order_get_stats(const ghost_order *order, ghost_order_stats *out) { *out = order->stats; }
