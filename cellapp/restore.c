/* restore.c -- a dead cellapp's reals brought back here (restore.h): the
 * requests waiting for their position's owner, the claims in the cell
 * directory, the restore itself (over an orphan ghost or from nothing),
 * and the orphans' wait. It owns the requests (each with its decoded
 * state) and the dead cellapps' last signs of life. */
#include "restore.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "entity_state.h"
#include "id_map.h"
#include "log.h"
#include "mailbox.h"
#include "peer_message.h"
#include "redis_keys.h"
#include "witness.h"

/* A request that finds no live owner for this long is given up (logged):
 * the layout never moved the dead cellapp's cell to anyone. */
#define RESTORE_GIVE_UP_US ((uint64_t)30 * 1000 * 1000)
/* A request passed on more often than this (cellapps that disagree about
 * the layout) waits where it is. */
#define RESTORE_MAX_HOPS 8
/* A restored real's message streams go on from what comes next for this
 * long (mailbox_inbox_resync): their senders' messages to the dead
 * cellapp since its backup are lost. */
#define RESTORE_RESYNC_US ((uint64_t)10 * 1000 * 1000)
/* A dead cellapp's backups of reals without a base are kept this long in
 * Redis, and read again at each later death within it. */
#define RESTORE_BACKUPS_KEPT_US ((uint64_t)600 * 1000 * 1000)

typedef struct restore_request {
    uint64_t entity_id;
    uint64_t dead;                            /* the cellapp it died with */
    Tessera__Cluster__CellEntityState *state; /* decoded; owned */
    uint32_t hops;
    bool local_only; /* from the dead cellapp's backups in Redis: every survivor read them, the owner restores */
    bool claiming;   /* a claim is in Redis */
    uint64_t since_us;
    bool recreate; /* its base vouches for it: a missing directory entry is made (RestoreCellEntity.recreate) */
} restore_request;

struct restores {
    restores_context context;
    id_map requests;   /* entity id -> restore_request */
    id_map last_heard; /* dead cellapp id -> its last sign of life, monotonic us (boxed) */
    size_t claims_this_tick;
    uint64_t last_sweep_us;
    /* Redis answers still to come (claims, reads): a freed set waits for
     * them, closed, and the last one frees it. */
    size_t in_flight;
    bool closed;
};

/* An answer came back: false when the set was freed meanwhile (and is
 * gone now if that was the last). */
static bool restores_answered(restores *r) {
    r->in_flight--;
    if (!r->closed) return true;
    if (r->in_flight == 0) free(r);
    return false;
}

restores *restores_create(const restores_context *context) {
    restores *r = xcalloc(1, sizeof *r);
    r->context = *context;
    id_map_init(&r->requests);
    id_map_init(&r->last_heard);
    return r;
}

static void restore_request_free(restore_request *request) {
    if (!request) return;
    if (request->state) tessera__cluster__cell_entity_state__free_unpacked(request->state, NULL);
    free(request);
}

void restores_free(restores *r) {
    if (!r) return;
    size_t cursor = 0;
    uint64_t id;
    void *value;
    while (id_map_next(&r->requests, &cursor, &id, &value)) restore_request_free(value);
    id_map_close(&r->requests);
    cursor = 0;
    while (id_map_next(&r->last_heard, &cursor, &id, &value)) free(value);
    id_map_close(&r->last_heard);
    if (r->in_flight) {
        r->closed = true;
        return;
    }
    free(r);
}

size_t restores_pending(const restores *r) { return id_map_count(&r->requests); }

/* Keeps a request (a newer state of the same entity replaces an older). */
static void restores_keep(restores *r, uint64_t dead, const uint8_t *bytes, size_t length, uint32_t hops,
                          bool local_only, bool recreate, uint64_t from) {
    Tessera__Cluster__CellEntityState *state = tessera__cluster__cell_entity_state__unpack(NULL, length, bytes);
    if (!state || !state->entity_id || !state->space_name || !state->position) {
        log_warn("process %" PRIu64 ": a restore of a real of cellapp %" PRIu64 " whose state does not decode: dropped",
                 from, dead);
        if (state) tessera__cluster__cell_entity_state__free_unpacked(state, NULL);
        r->context.counters->restores_failed++;
        return;
    }
    restore_request *old = id_map_get(&r->requests, state->entity_id);
    if (old && (old->claiming || old->state->incarnation > state->incarnation ||
                (old->state->incarnation == state->incarnation && old->state->sent_wall_us >= state->sent_wall_us))) {
        tessera__cluster__cell_entity_state__free_unpacked(state, NULL);
        return;
    }
    restore_request *request = xcalloc(1, sizeof *request);
    *request =
        (restore_request){state->entity_id, dead, state, hops, local_only, false, clock_monotonic_us(), recreate};
    if (old) restore_request_free(id_map_remove(&r->requests, state->entity_id));
    id_map_put(&r->requests, state->entity_id, request);
}

void restores_on_request(restores *r, uint64_t from, const Tessera__Cluster__RestoreCellEntity *request) {
    if (!request->state.len) {
        log_warn("process %" PRIu64 ": a restore of entity %" PRIu64 " without a state: dropped", from,
                 request->entity_id);
        r->context.counters->restores_failed++;
        return;
    }
    restores_keep(r, request->dead_cellapp_id, request->state.data, request->state.len, request->hops, false,
                  request->recreate, from);
}

/* ---- a dead cellapp ---------------------------------------------------------- */

static void restores_on_backups(redis_client *redis, redisReply *reply, void *user_data);

typedef struct restores_fetch {
    restores *r;
    uint64_t dead;
} restores_fetch;

/* Asks Redis for the backups of reals without a base that cellapp `dead`
 * kept. */
static void restores_read_backups(restores *r, uint64_t dead) {
    char key[REDIS_KEY_MAX];
    redis_key_cell_backups(key, r->context.cluster_name, dead);
    restores_fetch *fetch = xmalloc(sizeof *fetch);
    *fetch = (restores_fetch){r, dead};
    if (redis_client_command(r->context.redis, restores_on_backups, fetch, "HGETALL %s", key) != 0)
        free(fetch);
    else
        r->in_flight++;
}

/* The backups of cellapps that died before `dead` are read again: a real
 * restored from them on `dead` whose first backup there was not written
 * yet is still in them (its claim in the directory names `dead`, so it is
 * restored once). Deaths older than the hashes' expiry are forgotten. */
static void restores_read_earlier_backups(restores *r, uint64_t dead, uint64_t now_us) {
    size_t count = id_map_count(&r->last_heard), n = 0, cursor = 0;
    uint64_t *earlier = xcalloc(count ? count : 1, sizeof *earlier);
    uint64_t id;
    void *value;
    while (id_map_next(&r->last_heard, &cursor, &id, &value) && n < count) earlier[n++] = id;
    for (size_t i = 0; i < n; i++) {
        if (earlier[i] == dead) continue;
        const uint64_t *heard = id_map_get(&r->last_heard, earlier[i]);
        if (now_us - *heard > RESTORE_BACKUPS_KEPT_US) {
            free(id_map_remove(&r->last_heard, earlier[i]));
            continue;
        }
        restores_read_backups(r, earlier[i]);
    }
    free(earlier);
}

void restores_on_cellapp_dead(restores *r, uint64_t dead) {
    uint64_t now_us = clock_monotonic_us();
    uint64_t *heard = xmalloc(sizeof *heard);
    /* Its last sign of life: its last message, or when its link closed. */
    uint64_t silence = peer_set_silence_us(r->context.peers, dead, now_us);
    uint64_t down_since = peer_set_down_since_us(r->context.peers, dead);
    *heard = silence != UINT64_MAX ? now_us - silence : down_since && down_since <= now_us ? down_since : now_us;
    free(id_map_remove(&r->last_heard, dead));
    id_map_put(&r->last_heard, dead, heard);
    size_t orphans = 0, cursor = 0;
    cell *c;
    while ((c = spaces_next_cell(r->context.spaces, &cursor)) != NULL) {
        for (size_t i = 0; i < c->count; i++) {
            cell_entity *entity = c->by_index[i];
            if (entity->kind != CELL_ENTITY_GHOST || entity->destroyed || entity->owner_cellapp != dead) continue;
            entity->orphaned_us = now_us;
            orphans++;
        }
    }
    if (orphans) log_info("cellapp %" PRIu64 " dead: %zu of its ghosts here wait for their reals", dead, orphans);
    redis_client *redis = r->context.redis;
    if (!redis || !redis_client_is_connected(redis)) {
        log_warn("cellapp %" PRIu64 " dead: Redis is out of reach, its reals without a base are not restored here",
                 dead);
        return;
    }
    restores_read_backups(r, dead);
    restores_read_earlier_backups(r, dead, now_us);
    /* Nobody writes it again; the survivors read it, and again if one of
     * them dies before its restores are backed up. */
    char key[REDIS_KEY_MAX];
    redis_key_cell_backups(key, r->context.cluster_name, dead);
    redis_client_command(redis, NULL, NULL, "EXPIRE %s %" PRIu64, key, RESTORE_BACKUPS_KEPT_US / 1000000);
}

static void restores_on_backups(redis_client *redis, redisReply *reply, void *user_data) {
    (void)redis;
    restores_fetch *fetch = user_data;
    restores *r = fetch->r;
    uint64_t dead = fetch->dead;
    free(fetch);
    if (!restores_answered(r) || r->context.self->stopping) return;
    if (!reply || reply->type != REDIS_REPLY_ARRAY) {
        log_warn("cellapp %" PRIu64 " dead: its backups could not be read (%s)", dead,
                 reply && reply->type == REDIS_REPLY_ERROR ? reply->str : "no reply");
        return;
    }
    for (size_t i = 0; i + 1 < reply->elements; i += 2) {
        const redisReply *value = reply->element[i + 1];
        if (value->type != REDIS_REPLY_STRING) continue;
        restores_keep(r, dead, (const uint8_t *)value->str, value->len, 0, true, false, r->context.self->process_id);
    }
    if (reply->elements)
        log_info("cellapp %" PRIu64 " dead: %zu backups of reals without a base read", dead, reply->elements / 2);
}

/* ---- restoring ---------------------------------------------------------------- */

/* How old the state is against the dead cellapp's last sign of life: what
 * of the entity's history is lost. */
static uint32_t restores_state_age_ms(const restores *r, const restore_request *request, const cell_entity *ghost,
                                      uint64_t now_us) {
    const uint64_t *heard = id_map_get(&r->last_heard, request->dead);
    uint64_t last_us = heard ? *heard : now_us;
    uint64_t age_us;
    if (ghost) {
        age_us = last_us > ghost->ghost_heard_us ? last_us - ghost->ghost_heard_us : 0;
    } else {
        uint64_t wall = clock_wall_us();
        uint64_t since_saved = wall > request->state->sent_wall_us ? wall - request->state->sent_wall_us : 0;
        uint64_t since_heard = now_us > last_us ? now_us - last_us : 0;
        age_us = since_saved > since_heard ? since_saved - since_heard : 0;
    }
    return (uint32_t)(age_us / 1000);
}

/* Tells the client of a restored real, in its stream, before its view
 * starts again. */
static void restores_tell_client(restores *r, const cell_entity *entity, uint32_t age_ms, bool from_ghost) {
    if (!entity->real->baseapp_id || !cell_entity_witness(entity)) return;
    Tessera__Client__Vector3 position = TESSERA__CLIENT__VECTOR3__INIT;
    position.x = entity->x;
    position.y = entity->y;
    position.z = entity->z;
    Tessera__Client__EntityRestored restored = TESSERA__CLIENT__ENTITY_RESTORED__INIT;
    restored.entity_id = entity->id;
    restored.state_age_ms = age_ms;
    restored.from_ghost = from_ghost;
    restored.position = &position;
    restored.yaw = entity->yaw;
    Tessera__Client__ServerToClient message = TESSERA__CLIENT__SERVER_TO_CLIENT__INIT;
    message.body_case = TESSERA__CLIENT__SERVER_TO_CLIENT__BODY_RESTORED;
    message.restored = &restored;
    outbox_message_to_client(r->context.outbox, entity, &message);
}

/* The ghost's view of the entity over the backup's: position, yaw, change
 * counters now; the ghosted values are kept in `kept` and put back after
 * the restore. */
static entity_state *restores_take_from_ghost(const cell_entity *ghost, Tessera__Cluster__CellEntityState *state) {
    state->position->x = ghost->x;
    state->position->y = ghost->y;
    state->position->z = ghost->z;
    state->yaw = ghost->yaw;
    state->stamp_us = ghost->move_stamp_us;
    state->move_count = ghost->move_count;
    state->property_count = ghost->property_count;
    entity_state *kept = entity_state_create(ghost->cls);
    for (uint16_t p = 0; p < ghost->cls->property_count; p++)
        if (ghost->cls->properties[p].audience.to_ghosts) entity_state_copy_property(kept, ghost->state, p);
    return kept;
}

/* The real's base learns where it is now. */
static void restores_tell_base(restores *r, const cell_entity *entity, uint32_t incarnation) {
    if (!entity->real->baseapp_id) return;
    Tessera__Cluster__CellAddress address = TESSERA__CLUSTER__CELL_ADDRESS__INIT;
    address.entity_id = entity->id;
    address.incarnation = incarnation;
    peer_send_cell_address(r->context.peers, entity->real->baseapp_id, &address);
}

/* Restores the claimed entity here as `incarnation`. Returns whether it
 * came back. */
static bool restores_apply(restores *r, restore_request *request, uint32_t incarnation, uint64_t now_us) {
    Tessera__Cluster__CellEntityState *state = request->state;
    uint64_t id = request->entity_id;
    cell *c = spaces_cell(r->context.spaces, state->space_name, true);
    if (!c) {
        log_error("entity %" PRIu64 ": cannot be restored: this cellapp does not know space '%s'", id,
                  state->space_name);
        return false;
    }
    cell_entity *existing = spaces_find_entity(r->context.spaces, id);
    if (existing && existing->kind == CELL_ENTITY_REAL) {
        log_warn("entity %" PRIu64 ": real here already; its restore is dropped", id);
        return false;
    }
    if (existing && (existing->home != c || existing->destroyed)) {
        cell_destroy(existing->home, existing);
        existing = NULL;
    }
    if (existing && !existing->orphaned_us) {
        /* A live cellapp feeds this ghost: its real is there, whatever the
         * directory said a moment ago. */
        log_warn("entity %" PRIu64 ": its ghost here is fed by live cellapp %" PRIu64 ": not restored", id,
                 existing->owner_cellapp);
        return false;
    }
    bool from_ghost = existing != NULL;
    uint32_t age_ms = restores_state_age_ms(r, request, existing, now_us);
    entity_state *kept = from_ghost ? restores_take_from_ghost(existing, state) : NULL;
    state->incarnation = incarnation;
    char err[256];
    if (cell_entity_restore(r->context.codec, c, existing, state, err, sizeof err) != 0) {
        log_error("entity %" PRIu64 ": cannot be restored: %s", id, err);
        if (kept) entity_state_free(kept);
        return false;
    }
    cell_entity *entity = cell_find(c, id);
    if (kept) {
        for (uint16_t p = 0; p < entity->cls->property_count; p++)
            if (entity->cls->properties[p].audience.to_ghosts) entity_state_copy_property(entity->state, kept, p);
        entity_state_free(kept);
    }
    entity->orphaned_us = 0;
    if (!entity->real->inbox) entity->real->inbox = mailbox_inbox_create();
    mailbox_inbox_resync(entity->real->inbox, now_us + RESTORE_RESYNC_US);
    entity->real->haunt_count = 0;
    entity->real->haunts_stale = true;
    entity->real->snapshot_due = true;
    cell_note_changed(entity->home, entity);
    ghost_order_set_real(r->context.ghost_order, id, incarnation, r->context.self->process_id);
    ghost_route_remove(r->context.route, id);
    restores_tell_base(r, entity, incarnation);
    if (state->had_witness && !cell_entity_witness(entity)) witness_attach(c, entity);
    if (cell_entity_witness(entity)) {
        /* What the backup's witness believed the client had is not what
         * the client has now: both start the view again. */
        witness_reset(c, entity);
        restores_tell_client(r, entity, age_ms, from_ghost);
    }
    if (from_ghost)
        r->context.counters->restores_from_ghost++;
    else
        r->context.counters->restores_from_backup++;
    latency_histogram_add(&r->context.counters->restore_state_age, (uint64_t)age_ms * 1000);
    log_info("entity %" PRIu64 " (%s) restored as incarnation %u from %s (%u ms old), %s %" PRIu64, id,
             entity->cls->name, incarnation, from_ghost ? "its ghost" : "its backup", age_ms,
             request->recreate
                 ? "made again for its restored base (its dead baseapp had destroyed it); it was on cellapp"
                 : "its cellapp dead:",
             request->dead);
    r->context.hooks->restored(r->context.hooks->host, entity, age_ms, from_ghost);
    return true;
}

typedef struct restores_claim {
    restores *r;
} restores_claim;

/* A restore asked of us for an entity whose real is here already (it
 * arrived by an offload the dead cellapp, or its base, did not know of):
 * its base is told where it is, since whoever asked believed it was on
 * the dead cellapp. */
static void restores_tell_base_held(restores *r, uint64_t entity_id) {
    cell_entity *entity = spaces_find_entity(r->context.spaces, entity_id);
    if (!entity || !entity->real) return;
    log_info("entity %" PRIu64 ": its real is here (incarnation %u): nothing to restore; its base is told", entity_id,
             entity->incarnation);
    restores_tell_base(r, entity, entity->incarnation);
}

static void restores_on_claimed(uint64_t entity_id, bool claimed, bool failed, uint32_t incarnation, uint64_t holder,
                                void *context) {
    restores_claim *claim = context;
    restores *r = claim->r;
    free(claim);
    if (!restores_answered(r) || r->context.self->stopping) return;
    restore_request *request = id_map_get(&r->requests, entity_id);
    if (!request) return;
    request->claiming = false;
    if (failed) return; /* tried again next tick */
    id_map_remove(&r->requests, entity_id);
    if (!claimed) {
        r->context.counters->restores_refused++;
        if (holder == r->context.self->process_id)
            restores_tell_base_held(r, entity_id);
        else if (holder)
            log_info("entity %" PRIu64 ": cellapp %" PRIu64 " holds it (incarnation %u): nothing to restore", entity_id,
                     holder, incarnation);
        else
            log_info("entity %" PRIu64 ": the cell directory has no entry (it was destroyed): not restored", entity_id);
        restore_request_free(request);
        return;
    }
    if (!restores_apply(r, request, incarnation, clock_monotonic_us())) {
        r->context.counters->restores_failed++;
    } else if (request->local_only) {
        /* Its entry in the dead cellapp's hash goes once its first backup
         * here is written (cell_snapshot.c). */
        cell_entity *entity = spaces_find_entity(r->context.spaces, entity_id);
        if (entity && entity->real && !entity->real->baseapp_id) entity->real->restored_from_cellapp = request->dead;
    }
    restore_request_free(request);
}

/* Whether cellapp `id` can own a position now. */
static bool restores_owner_alive(const restores *r, uint64_t id) {
    if (id == r->context.self->process_id) return true;
    return peer_set_liveness(r->context.peers, id) != PEER_DEAD && peer_set_is_up(r->context.peers, id);
}

/* What to do with one request now. Returns true when it is done with
 * (passed on, dropped): the caller frees it. */
static bool restores_route(restores *r, restore_request *request, uint64_t now_us) {
    const Tessera__Cluster__CellEntityState *state = request->state;
    const space_layout *layout = spaces_layout(r->context.spaces, state->space_name);
    const space_layout_node *node =
        layout ? space_layout_cell_at(layout, state->position->x, state->position->z) : NULL;
    if (!node || !restores_owner_alive(r, node->cellapp_id) || request->claiming ||
        (r->context.fenced && *r->context.fenced)) {
        if (!request->claiming && now_us - request->since_us > RESTORE_GIVE_UP_US) {
            log_error("entity %" PRIu64 ": no live cellapp took the cell at (%.1f, %.1f) of space '%s' within %" PRIu64
                      " s: not restored",
                      request->entity_id, (double)state->position->x, (double)state->position->z, state->space_name,
                      RESTORE_GIVE_UP_US / 1000000);
            r->context.counters->restores_failed++;
            return true;
        }
        return false; /* the layout has not moved the dead cellapp's cell yet */
    }
    if (node->cellapp_id != r->context.self->process_id) {
        if (request->local_only) return true; /* its owner read the same backups */
        if (request->hops >= RESTORE_MAX_HOPS) return false;
        size_t length = tessera__cluster__cell_entity_state__get_packed_size(state);
        uint8_t *bytes = xmalloc(length ? length : 1);
        tessera__cluster__cell_entity_state__pack(state, bytes);
        Tessera__Cluster__RestoreCellEntity forward = TESSERA__CLUSTER__RESTORE_CELL_ENTITY__INIT;
        forward.entity_id = request->entity_id;
        forward.dead_cellapp_id = request->dead;
        forward.state.data = bytes;
        forward.state.len = length;
        forward.saved_wall_us = state->sent_wall_us;
        forward.hops = request->hops + 1;
        forward.recreate = request->recreate;
        int sent = peer_send_restore_cell_entity(r->context.peers, node->cellapp_id, &forward);
        free(bytes);
        if (sent != 0) return false;
        r->context.counters->restores_forwarded++;
        return true;
    }
    if (r->claims_this_tick >= RESTORE_CLAIMS_PER_TICK) return false;
    uint32_t at_least = state->incarnation + 1;
    uint32_t ghost_incarnation;
    if (ghost_order_lookup(r->context.ghost_order, request->entity_id, &ghost_incarnation, NULL) &&
        ghost_incarnation + 1 > at_least)
        at_least = ghost_incarnation + 1;
    restores_claim *claim = xmalloc(sizeof *claim);
    claim->r = r;
    if (mailbox_directory_claim(r->context.redis, r->context.cluster_name, request->entity_id,
                                r->context.self->process_id, at_least, false, request->recreate, restores_on_claimed,
                                claim) != 0) {
        free(claim);
        return false; /* Redis is out of reach: next tick */
    }
    request->claiming = true;
    r->in_flight++;
    r->claims_this_tick++;
    return false;
}

/* Orphans that waited longer than restore_orphan_ms for a real that never
 * made a ghost here: the entity is elsewhere, far, or lost. */
static void restores_sweep_orphans(restores *r, uint64_t now_us) {
    uint64_t wait_us = (uint64_t)r->context.settings->restore_orphan_ms * 1000;
    size_t cursor = 0;
    cell *c;
    while ((c = spaces_next_cell(r->context.spaces, &cursor)) != NULL) {
        for (size_t i = 0; i < c->count; i++) {
            cell_entity *entity = c->by_index[i];
            if (entity->kind != CELL_ENTITY_GHOST || entity->destroyed || !entity->orphaned_us) continue;
            if (peer_set_liveness(r->context.peers, entity->owner_cellapp) != PEER_DEAD) {
                entity->orphaned_us = 0; /* a live real took it over */
                continue;
            }
            if (now_us - entity->orphaned_us < wait_us) continue;
            log_debug("ghost %" PRIu64 ": its real of dead cellapp %" PRIu64 " was not restored near here: dropped",
                      entity->id, entity->owner_cellapp);
            ghost_order_forget(r->context.ghost_order, entity->id, now_us);
            cell_destroy(c, entity);
            r->context.counters->orphans_dropped++;
        }
    }
}

void restores_tick(restores *r, uint64_t now_us) {
    r->claims_this_tick = 0;
    if (id_map_count(&r->requests)) {
        size_t count = id_map_count(&r->requests), n = 0, cursor = 0;
        uint64_t *ids = xcalloc(count, sizeof *ids);
        uint64_t id;
        void *value;
        while (id_map_next(&r->requests, &cursor, &id, &value) && n < count) ids[n++] = id;
        for (size_t i = 0; i < n; i++) {
            restore_request *request = id_map_get(&r->requests, ids[i]);
            if (request && restores_route(r, request, now_us))
                restore_request_free(id_map_remove(&r->requests, ids[i]));
        }
        free(ids);
    }
    if (now_us - r->last_sweep_us >= (uint64_t)1000 * 1000) {
        r->last_sweep_us = now_us;
        restores_sweep_orphans(r, now_us);
    }
}
