/* offload.c -- reals moving between cellapps.
 *
 * A real whose position lies outside its cell's region by more than
 * offload_margin moves to the cell that holds the point, on the cellapp
 * that owns it (after this tick's client messages have gone):
 *
 *   1. the destination gets a ghost first if it holds none (same space);
 *   2. every other haunt is told the next real (GhostSetReal: the last
 *      message of this incarnation to it);
 *   3. the whole cell state goes in one Offload (cell_entity_codec.c), as
 *      incarnation + 1, with the list of haunts;
 *   4. the base is told this incarnation has ended (CellHandoff), and the
 *      copy here becomes a ghost of the new real; the ghost route
 *      remembers where it went;
 *   5. the destination restores it, acknowledges, announces itself to the
 *      base (CellAddress) and the cell directory, and takes over the
 *      haunts.
 *
 * Until the acknowledgement comes the sender keeps the state. If the
 * destination refuses (it cannot take the entity) or goes away first, the
 * sender takes the real back as a new incarnation and re-creates its
 * ghosts, so an entity is never lost in transit and never real twice.
 *
 * A teleport into another space goes the same way, with the old space's
 * ghosts deleted instead of told, and the client given a fresh view.
 */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "offload.h"

#include "clock.h"
#include "id_map.h"
#include "log.h"
#include "mailbox.h"
#include "movement.h"
#include "peer_message.h"
#include "witness.h"

/* An offload sent and not yet acknowledged. */
typedef struct offload_pending {
    uint64_t target;
    uint32_t incarnation; /* offered to the target */
    uint8_t *state;       /* the encoded CellEntityState to take back */
    size_t length;
    uint64_t *haunts; /* the haunts handed over */
    size_t haunt_count;
    uint64_t sent_us; /* monotonic */
    bool claiming;    /* reclaiming: the claim is in Redis */
} offload_pending;

struct offloads {
    offloads_context context;
    id_map pending;    /* entity id -> offload_pending */
    id_map reclaiming; /* entity id -> offload_pending whose target went: waiting for the directory */
    size_t claims_in_flight;
    bool closed; /* freed while claims were in Redis: the last answer frees it */
};

static void offload_pending_free(offload_pending *pending) {
    if (!pending) return;
    free(pending->state);
    free(pending->haunts);
    free(pending);
}

offloads *offload_create(const offloads_context *context) {
    offloads *o = xcalloc(1, sizeof *o);
    o->context = *context;
    id_map_init(&o->pending);
    id_map_init(&o->reclaiming);
    return o;
}

void offload_free(offloads *o) {
    if (!o) return;
    size_t cursor = 0;
    uint64_t id;
    void *value;
    while (id_map_next(&o->pending, &cursor, &id, &value)) offload_pending_free(value);
    id_map_close(&o->pending);
    cursor = 0;
    while (id_map_next(&o->reclaiming, &cursor, &id, &value)) offload_pending_free(value);
    id_map_close(&o->reclaiming);
    if (o->claims_in_flight) {
        o->closed = true;
        return;
    }
    free(o);
}

size_t offload_pending_count(const offloads *o) { return id_map_count(&o->pending) + id_map_count(&o->reclaiming); }

static void offload_send_set_real(offloads *o, uint64_t peer, uint64_t entity_id, uint32_t incarnation, uint64_t next) {
    Tessera__Cluster__GhostSetReal set_real = TESSERA__CLUSTER__GHOST_SET_REAL__INIT;
    set_real.next_cellapp_id = next;
    Tessera__Cluster__GhostMessage message = TESSERA__CLUSTER__GHOST_MESSAGE__INIT;
    message.entity_id = entity_id;
    message.incarnation = incarnation;
    message.body_case = TESSERA__CLUSTER__GHOST_MESSAGE__BODY_SET_REAL;
    message.set_real = &set_real;
    haunt_send(o->context.haunts, peer, &message);
}

static void offload_send_ack(offloads *o, uint64_t peer, uint64_t entity_id, uint32_t incarnation,
                             const char *refused) {
    Tessera__Cluster__OffloadAck ack = TESSERA__CLUSTER__OFFLOAD_ACK__INIT;
    ack.entity_id = entity_id;
    ack.incarnation = incarnation;
    ack.refused = refused != NULL;
    ack.reason = (char *)(refused ? refused : "");
    Tessera__Cluster__CellItem item = TESSERA__CLUSTER__CELL_ITEM__INIT;
    item.body_case = TESSERA__CLUSTER__CELL_ITEM__BODY_OFFLOAD_ACK;
    item.offload_ack = &ack;
    outbox_to_cellapp(o->context.outbox, peer, &item);
}

static void offload_tell_base_handoff(offloads *o, uint64_t baseapp_id, uint64_t entity_id, uint32_t incarnation,
                                      uint64_t next) {
    if (!baseapp_id) return;
    Tessera__Cluster__CellHandoff handoff = TESSERA__CLUSTER__CELL_HANDOFF__INIT;
    handoff.entity_id = entity_id;
    handoff.incarnation = incarnation;
    handoff.next_cellapp_id = next;
    peer_send_cell_handoff(o->context.peers, baseapp_id, &handoff);
}

static void offload_tell_base_address(offloads *o, uint64_t baseapp_id, uint64_t entity_id, uint32_t incarnation) {
    if (!baseapp_id) return;
    Tessera__Cluster__CellAddress address = TESSERA__CLUSTER__CELL_ADDRESS__INIT;
    address.entity_id = entity_id;
    address.incarnation = incarnation;
    peer_send_cell_address(o->context.peers, baseapp_id, &address);
}

/* The client learns it was teleported: where to, and with a new space the
 * quantization of the new one. Goes in the entity's client stream. */
static void offload_tell_client_teleported(offloads *o, const cell_entity *entity, bool space_changed) {
    if (!entity->real->baseapp_id || !cell_entity_witness(entity)) return;
    const cell *c = entity->home;
    Tessera__Client__Vector3 position = TESSERA__CLIENT__VECTOR3__INIT, low = TESSERA__CLIENT__VECTOR3__INIT,
                             high = TESSERA__CLIENT__VECTOR3__INIT;
    position.x = entity->x;
    position.y = entity->y;
    position.z = entity->z;
    Tessera__Client__Teleported teleported = TESSERA__CLIENT__TELEPORTED__INIT;
    teleported.position = &position;
    teleported.yaw = entity->yaw;
    teleported.space_changed = space_changed;
    teleported.space_name = (char *)c->space_name;
    if (space_changed) {
        low.x = (float)c->volatile_config.min[0];
        low.y = (float)c->volatile_config.min[1];
        low.z = (float)c->volatile_config.min[2];
        high.x = (float)c->volatile_config.max[0];
        high.y = (float)c->volatile_config.max[1];
        high.z = (float)c->volatile_config.max[2];
        teleported.position_precision = c->volatile_config.precision;
        teleported.world_min = &low;
        teleported.world_max = &high;
        teleported.yaw_steps = c->volatile_config.yaw_steps;
    }
    Tessera__Client__ServerToClient message = TESSERA__CLIENT__SERVER_TO_CLIENT__INIT;
    message.body_case = TESSERA__CLIENT__SERVER_TO_CLIENT__BODY_TELEPORTED;
    message.teleported = &teleported;
    outbox_message_to_client(o->context.outbox, entity, &message);
}

/* Packs a state for keeping. */
static uint8_t *offload_pack_state(const Tessera__Cluster__CellEntityState *state, size_t *length) {
    *length = tessera__cluster__cell_entity_state__get_packed_size(state);
    uint8_t *bytes = xmalloc(*length ? *length : 1);
    tessera__cluster__cell_entity_state__pack(state, bytes);
    return bytes;
}

/* Sends `entity` (a real here, incarnation k) to `target` as k + 1, with
 * `state` (saved from it, possibly edited for a teleport) and `kept` (the
 * state to take back if it does not arrive). `space_changed`: the old
 * space's ghosts are deleted rather than told. */
static void offload_dispatch(offloads *o, cell_entity *entity, uint64_t target,
                             Tessera__Cluster__CellEntityState *state, uint8_t *kept, size_t kept_length,
                             bool space_changed) {
    cell *c = entity->home;
    uint32_t k = entity->incarnation;
    if (!peer_set_is_up(o->context.peers, target)) {
        /* Nothing would bring it back if it went: it stays real here. */
        log_warn("entity %" PRIu64 ": cellapp %" PRIu64 " went away before the offload: it stays", entity->id, target);
        free(kept);
        return;
    }
    if (!space_changed) {
        bool has_ghost = false;
        for (uint32_t i = 0; i < entity->real->haunt_count; i++)
            has_ghost |= entity->real->haunts[i].cellapp_id == target;
        if (!has_ghost) haunt_add(o->context.haunts, entity, target);
    }
    /* The haunts the new real takes over: all but itself, plus us (the copy
     * here becomes its ghost). */
    uint64_t *haunts = xcalloc(entity->real->haunt_count + 1, sizeof *haunts);
    size_t n_haunts = 0;
    for (uint32_t i = 0; i < entity->real->haunt_count; i++) {
        uint64_t peer = entity->real->haunts[i].cellapp_id;
        if (peer == target) continue;
        if (space_changed) {
            haunt_send_delete(o->context.haunts, entity, peer, false);
            continue;
        }
        offload_send_set_real(o, peer, entity->id, k, target);
        haunts[n_haunts++] = peer;
    }
    /* (Into another space, the target's ghost in the old one goes when the
     * real arrives in the new one: offload_apply.) */
    if (!space_changed) haunts[n_haunts++] = o->context.self->process_id;

    state->incarnation = k + 1;
    state->offloads = entity->real->offloads + 1;
    state->space_changed = space_changed;
    Tessera__Cluster__Offload offload = TESSERA__CLUSTER__OFFLOAD__INIT;
    offload.entity = state;
    offload.haunts = haunts;
    offload.n_haunts = n_haunts;
    Tessera__Cluster__CellItem item = TESSERA__CLUSTER__CELL_ITEM__INIT;
    item.body_case = TESSERA__CLUSTER__CELL_ITEM__BODY_OFFLOAD;
    item.offload = &offload;
    outbox_to_cellapp(o->context.outbox, target, &item);

    offload_tell_base_handoff(o, entity->real->baseapp_id, entity->id, k, target);
    if (o->context.snapshots) cell_snapshots_forget(o->context.snapshots, entity);
    offload_pending *pending = xcalloc(1, sizeof *pending);
    pending->target = target;
    pending->incarnation = k + 1;
    pending->state = kept;
    pending->length = kept_length;
    pending->haunts = haunts;
    pending->haunt_count = n_haunts;
    pending->sent_us = clock_monotonic_us();
    offload_pending_free(id_map_remove(&o->pending, entity->id));
    id_map_put(&o->pending, entity->id, pending);
    ghost_route_add(o->context.route, entity->id, target,
                    clock_monotonic_us() / 1000 + (uint64_t)o->context.settings->ghost_route_ms);
    o->context.counters->offloads_out++;
    log_debug("entity %" PRIu64 ": offloaded to cellapp %" PRIu64 " as incarnation %u%s", entity->id, target, k + 1,
              space_changed ? " (into another space)" : "");
    if (space_changed) {
        ghost_order_forget(o->context.ghost_order, entity->id, clock_monotonic_us());
        cell_destroy(c, entity);
    } else {
        ghost_order_set_ghost(o->context.ghost_order, entity->id, k + 1, target);
        cell_make_ghost(c, entity, target, k + 1);
    }
}

void offload_send(offloads *o, cell_entity *entity, uint64_t target) {
    o->context.hooks->leaving(o->context.hooks->host, entity);
    Tessera__Cluster__CellEntityState state;
    cell_entity_save(o->context.codec, entity, &state);
    state.incarnation = entity->incarnation + 1;
    size_t kept_length;
    uint8_t *kept = offload_pack_state(&state, &kept_length);
    offload_dispatch(o, entity, target, &state, kept, kept_length, false);
    cell_entity_saved_free(&state);
}

static int offload_arrive(offloads *o, cell *c, cell_entity *existing, const Tessera__Cluster__CellEntityState *state,
                          const uint64_t *haunts, size_t haunt_count, uint64_t from, char *err, size_t errlen);
static void offload_claim_reclaims(offloads *o);

/* A teleport into another space, now that this tick's client messages
 * have gone: to the cellapp that owns the point (possibly this one). */
static void offload_teleport_now(offloads *o, cell_entity *entity) {
    entity->real->teleport_pending = false;
    const space_layout *layout = spaces_layout(o->context.spaces, entity->real->teleport_space);
    const space_layout_node *node =
        layout ? space_layout_cell_at(layout, entity->real->teleport_x, entity->real->teleport_z) : NULL;
    if (!node || (node->cellapp_id != o->context.self->process_id &&
                  (!peer_set_is_up(o->context.peers, node->cellapp_id) ||
                   !spaces_peer_epoch(o->context.spaces, node->cellapp_id, entity->real->teleport_space)))) {
        log_warn("entity %" PRIu64 ": its teleport into space '%s' found no cell up there: it stays", entity->id,
                 entity->real->teleport_space);
        return;
    }
    o->context.hooks->leaving(o->context.hooks->host, entity);
    Tessera__Cluster__CellEntityState state;
    cell_entity_save(o->context.codec, entity, &state);
    size_t kept_length;
    uint8_t *kept = offload_pack_state(&state, &kept_length);
    /* Where it goes: the same entity, somewhere else. */
    Tessera__Client__Vector3 *position = state.position;
    position->x = entity->real->teleport_x;
    position->y = entity->real->teleport_y;
    position->z = entity->real->teleport_z;
    state.yaw = entity->real->teleport_yaw;
    state.space_name = entity->real->teleport_space;
    state.teleported = true;
    o->context.counters->teleports++;
    if (node->cellapp_id != o->context.self->process_id) {
        offload_dispatch(o, entity, node->cellapp_id, &state, kept, kept_length, true);
        cell_entity_saved_free(&state);
        return;
    }
    /* Into a cell of this cellapp: the old space forgets it, the new one
     * gets it as the next incarnation, like an offload to ourselves. */
    free(kept);
    uint32_t k = entity->incarnation;
    uint64_t baseapp_id = entity->real->baseapp_id;
    state.incarnation = k + 1;
    state.space_changed = true;
    state.offloads = entity->real->offloads;
    haunt_destroyed(o->context.haunts, entity);
    offload_tell_base_handoff(o, baseapp_id, entity->id, k, o->context.self->process_id);
    cell_destroy(entity->home, entity);
    cell *c = spaces_cell(o->context.spaces, entity->real->teleport_space, true);
    char err[256];
    if (!c || offload_arrive(o, c, NULL, &state, NULL, 0, o->context.self->process_id, err, sizeof err) != 0)
        log_warn("entity %" PRIu64 ": teleport into space '%s' failed on arrival: %s", state.entity_id,
                 entity->real->teleport_space, c ? err : "no cell");
    cell_entity_saved_free(&state);
}

void offload_tick(offloads *o, cell *c) {
    if (id_map_count(&o->reclaiming)) offload_claim_reclaims(o);
    /* A cellapp that knows a later layout than ours has seen lines move
     * that we have not: moving reals by our old one could send them the
     * wrong way, so they wait the tick or two until we have it. */
    if (!c->layout || spaces_newest_peer_epoch(o->context.spaces, c->space_name) > c->layout->epoch) return;
    double margin = o->context.settings->haunt.offload_margin;
    /* A real with a teleport waiting, or outside its region, is on the
     * cell's changed list (it stays there until it goes: cell_end_tick);
     * only a new layout, which moves the region under every real, makes
     * every entity worth a look. */
    bool every = c->layout_changed;
    size_t count = every ? c->count : c->changed_count;
    /* Indexed afresh each time: a destruction or a make_real on the way
     * lists an entity, and may move the changed list. */
    for (size_t i = 0; i < count; i++) {
        cell_entity *entity = every ? c->by_index[i] : c->changed[i];
        if (entity->kind != CELL_ENTITY_REAL || entity->destroyed) continue;
        if (entity->real->teleport_pending) {
            offload_teleport_now(o, entity);
            continue;
        }
        if (cell_region_holds(c, entity->x, entity->z, margin)) continue;
        const space_layout_node *node = space_layout_cell_at(c->layout, entity->x, entity->z);
        if (!node || node->cellapp_id == o->context.self->process_id) continue;
        /* It waits here until that cellapp is up and knows the space, so it
         * arrives where it can be placed. */
        if (!peer_set_is_up(o->context.peers, node->cellapp_id) ||
            !spaces_peer_epoch(o->context.spaces, node->cellapp_id, c->space_name))
            continue;
        uint64_t began = cell_load_transient_begin(); /* moving reals is transient load */
        offload_send(o, entity, node->cellapp_id);
        cell_load_transient_end(o->context.load, began);
    }
}

/* ---- arriving ---------------------------------------------------------------- */

static int offload_arrive(offloads *o, cell *c, cell_entity *existing, const Tessera__Cluster__CellEntityState *state,
                          const uint64_t *haunts, size_t haunt_count, uint64_t from, char *err, size_t errlen) {
    if (cell_entity_restore(o->context.codec, c, existing, state, err, errlen) != 0) return -1;
    cell_entity *entity = cell_find(c, state->entity_id);
    uint64_t now_us = clock_monotonic_us();
    entity->real->haunt_count = 0;
    for (size_t i = 0; i < haunt_count; i++) {
        if (haunts[i] == o->context.self->process_id || !peer_set_is_up(o->context.peers, haunts[i])) continue;
        if (entity->real->haunt_count == entity->real->haunt_capacity) {
            entity->real->haunt_capacity = entity->real->haunt_capacity ? entity->real->haunt_capacity * 2 : 4;
            entity->real->haunts =
                xrealloc(entity->real->haunts, entity->real->haunt_capacity * sizeof *entity->real->haunts);
        }
        entity->real->haunts[entity->real->haunt_count++] = (cell_haunt){haunts[i], now_us};
    }
    entity->real->haunts_stale = true;
    entity->real->snapshot_due = true; /* its base's backup names this cellapp now */
    cell_note_changed(c, entity);
    ghost_order_set_real(o->context.ghost_order, entity->id, entity->incarnation, o->context.self->process_id);
    ghost_route_remove(o->context.route, entity->id);
    offload_tell_base_address(o, entity->real->baseapp_id, entity->id, entity->incarnation);
    mailbox_directory_set(o->context.redis, o->context.cluster_name, entity->id, o->context.self->process_id,
                          entity->incarnation);
    if (state->space_changed) {
        entity->real->space_changed = true;
        cell_note_changed(c, entity);
        if (cell_entity_witness(entity)) witness_reset(c, entity);
        offload_tell_client_teleported(o, entity, true);
    }
    (void)from;
    o->context.hooks->arrived(o->context.hooks->host, entity);
    if (state->space_changed) o->context.hooks->teleported(o->context.hooks->host, entity, true);
    return 0;
}

/* The refusal's duties: the haunts and the base must not wait for an
 * incarnation that will never run. */
void offload_refuse(offloads *o, uint64_t peer, const Tessera__Cluster__Offload *offload, const char *reason) {
    const Tessera__Cluster__CellEntityState *state = offload->entity;
    uint32_t refused = state->incarnation;
    log_warn("entity %" PRIu64 ": offload from cellapp %" PRIu64 " refused: %s", state->entity_id, peer, reason);
    for (size_t i = 0; i < offload->n_haunts; i++)
        if (offload->haunts[i] != peer && offload->haunts[i] != o->context.self->process_id &&
            peer_set_is_up(o->context.peers, offload->haunts[i]))
            offload_send_set_real(o, offload->haunts[i], state->entity_id, refused, peer);
    offload_send_ack(o, peer, state->entity_id, refused, reason);
    offload_tell_base_handoff(o, state->baseapp_id, state->entity_id, refused, peer);
    ghost_order_set_ghost(o->context.ghost_order, state->entity_id, refused + 1, peer);
    o->context.counters->offloads_refused++;
}

void offload_apply(offloads *o, uint64_t peer, const Tessera__Cluster__Offload *offload) {
    const Tessera__Cluster__CellEntityState *state = offload->entity;
    if (o->context.fenced && *o->context.fenced) {
        /* It may be declared dead any moment: the sender keeps its real. */
        offload_refuse(o, peer, offload, "this cellapp is fenced (its lease lapsed)");
        return;
    }
    cell *c = spaces_cell(o->context.spaces, state->space_name, true);
    if (!c) {
        offload_refuse(o, peer, offload, "this cellapp does not know the space");
        return;
    }
    if ((int64_t)spaces_real_count(o->context.spaces) >= o->context.settings->max_entities) {
        offload_refuse(o, peer, offload, "this cellapp is full (max_entities)");
        return;
    }
    cell_entity *existing = spaces_find_entity(o->context.spaces, state->entity_id);
    if (existing && existing->kind == CELL_ENTITY_REAL) {
        offload_refuse(o, peer, offload, "the entity is real here already");
        return;
    }
    if (existing && existing->home != c) {
        cell_destroy(existing->home, existing); /* a ghost in the space it left */
        existing = NULL;
    }
    char err[256];
    if (offload_arrive(o, c, existing, state, offload->haunts, offload->n_haunts, peer, err, sizeof err) != 0) {
        offload_refuse(o, peer, offload, err);
        return;
    }
    offload_send_ack(o, peer, state->entity_id, state->incarnation, NULL);
    o->context.counters->offloads_in++;
    log_debug("entity %" PRIu64 ": arrived from cellapp %" PRIu64 " as incarnation %u", state->entity_id, peer,
              state->incarnation);
}

/* ---- taking a real back ------------------------------------------------------ */

static void offload_reclaim(offloads *o, uint64_t entity_id, offload_pending *pending, uint32_t incarnation,
                            const char *why) {
    Tessera__Cluster__CellEntityState *state =
        tessera__cluster__cell_entity_state__unpack(NULL, pending->length, pending->state);
    if (!state) log_panic("entity %" PRIu64 ": the state kept for its offload does not decode", entity_id);
    state->incarnation = incarnation;
    cell *c = spaces_cell(o->context.spaces, state->space_name, true);
    cell_entity *existing = spaces_find_entity(o->context.spaces, entity_id);
    if (existing && existing->kind == CELL_ENTITY_REAL) {
        log_warn("entity %" PRIu64 ": real here already; the kept state is dropped", entity_id);
        tessera__cluster__cell_entity_state__free_unpacked(state, NULL);
        return;
    }
    if (existing && existing->home != c) {
        cell_destroy(existing->home, existing);
        existing = NULL;
    }
    char err[256];
    if (!c || offload_arrive(o, c, existing, state, NULL, 0, o->context.self->process_id, err, sizeof err) != 0) {
        log_error("entity %" PRIu64 ": cannot take back its real (%s): it is lost", entity_id,
                  c ? err : "its space is gone");
        tessera__cluster__cell_entity_state__free_unpacked(state, NULL);
        return;
    }
    cell_entity *entity = cell_find(c, entity_id);
    /* Every cellapp that may hold its ghost gets a fresh create: it applies
     * once the refused or dead incarnation has ended there. */
    for (size_t i = 0; i < pending->haunt_count; i++) {
        uint64_t peer = pending->haunts[i];
        if (peer != o->context.self->process_id && peer_set_is_up(o->context.peers, peer))
            haunt_add(o->context.haunts, entity, peer);
    }
    if (peer_set_is_up(o->context.peers, pending->target)) haunt_add(o->context.haunts, entity, pending->target);
    o->context.counters->offloads_reclaimed++;
    log_warn("entity %" PRIu64 ": taken back from cellapp %" PRIu64 " (%s) as incarnation %u", entity_id,
             pending->target, why, incarnation);
    tessera__cluster__cell_entity_state__free_unpacked(state, NULL);
}

void offload_on_ack(offloads *o, uint64_t peer, const Tessera__Cluster__OffloadAck *ack) {
    offload_pending *pending = id_map_get(&o->pending, ack->entity_id);
    if (!pending || pending->target != peer || pending->incarnation != ack->incarnation) {
        log_debug("cellapp %" PRIu64 ": an acknowledgement of entity %" PRIu64 " that no offload waits for", peer,
                  ack->entity_id);
        return;
    }
    id_map_remove(&o->pending, ack->entity_id);
    if (ack->refused)
        offload_reclaim(o, ack->entity_id, pending, pending->incarnation + 1, ack->reason ? ack->reason : "refused");
    else
        latency_histogram_add(&o->context.counters->offload_latency, clock_monotonic_us() - pending->sent_us);
    offload_pending_free(pending);
}

/* An offload whose target went away before acknowledging: it may have
 * restored the real (and told the directory) or not. The directory
 * decides: the real comes back here only if the directory still names
 * this cellapp, or names the target and the target is dead (then nobody
 * else restores it: the claim is atomic). */
static void offload_on_reclaim_claimed(uint64_t entity_id, bool claimed, bool failed, uint32_t incarnation,
                                       uint64_t holder, void *context) {
    offloads *o = context;
    o->claims_in_flight--;
    if (o->closed) {
        if (o->claims_in_flight == 0) free(o);
        return;
    }
    offload_pending *pending = id_map_get(&o->reclaiming, entity_id);
    if (!pending) return;
    if (failed) {
        pending->claiming = false; /* tried again next tick */
        return;
    }
    id_map_remove(&o->reclaiming, entity_id);
    if (claimed)
        offload_reclaim(o, entity_id, pending, incarnation, "it went away before acknowledging");
    else if (holder)
        log_info("entity %" PRIu64 ": cellapp %" PRIu64 " holds it as incarnation %u: the state kept for its offload "
                 "there is dropped",
                 entity_id, holder, incarnation);
    else
        log_info("entity %" PRIu64 ": the cell directory has no entry (destroyed): the kept state is dropped",
                 entity_id);
    offload_pending_free(pending);
}

/* Claims the reclaims waiting (those Redis has not answered). */
static void offload_claim_reclaims(offloads *o) {
    size_t cursor = 0;
    uint64_t id;
    void *value;
    while (id_map_next(&o->reclaiming, &cursor, &id, &value)) {
        offload_pending *pending = value;
        if (pending->claiming) continue;
        if (mailbox_directory_claim(o->context.redis, o->context.cluster_name, id, o->context.self->process_id,
                                    pending->incarnation + 1, true, false, offload_on_reclaim_claimed, o) != 0)
            return; /* Redis is out of reach: next tick */
        pending->claiming = true;
        o->claims_in_flight++;
    }
}

void offload_peer_down(offloads *o, uint64_t peer) {
    size_t cursor = 0;
    uint64_t id;
    void *value;
    uint64_t *lost = NULL;
    size_t lost_count = 0, lost_capacity = 0;
    while (id_map_next(&o->pending, &cursor, &id, &value)) {
        if (((offload_pending *)value)->target != peer) continue;
        if (lost_count == lost_capacity) {
            lost_capacity = lost_capacity ? lost_capacity * 2 : 16;
            lost = xrealloc(lost, lost_capacity * sizeof *lost);
        }
        lost[lost_count++] = id;
    }
    for (size_t i = 0; i < lost_count; i++) {
        offload_pending *pending = id_map_remove(&o->pending, lost[i]);
        offload_pending_free(id_map_remove(&o->reclaiming, lost[i]));
        id_map_put(&o->reclaiming, lost[i], pending);
    }
    free(lost);
    if (lost_count)
        log_warn("cellapp %" PRIu64 " gone with %zu offloads unacknowledged: the directory decides which come back",
                 peer, lost_count);
    offload_claim_reclaims(o);
}

/* ---- teleports ---------------------------------------------------------------- */

int offload_teleport(offloads *o, cell_entity *entity, const char *space_name, float x, float y, float z, float yaw,
                     char *err, size_t errlen) {
    if (entity->kind != CELL_ENTITY_REAL || entity->destroyed) {
        snprintf(err, errlen, "entity %" PRIu64 " is not a real here", entity->id);
        return -1;
    }
    cell *c = entity->home;
    const char *target = space_name && space_name[0] ? space_name : c->space_name;
    const space_layout *layout = spaces_layout(o->context.spaces, target);
    if (!layout) {
        snprintf(err, errlen, "there is no space '%s'", target);
        return -1;
    }
    if (!isfinite(x) || !isfinite(y) || !isfinite(z) || !isfinite(yaw) || x < layout->min[0] || x > layout->max[0] ||
        y < layout->min[1] || y > layout->max[1] || z < layout->min[2] || z > layout->max[2]) {
        snprintf(err, errlen, "(%.1f, %.1f, %.1f) lies outside every cell of space '%s'", (double)x, (double)y,
                 (double)z, target);
        return -1;
    }
    const space_layout_node *node = space_layout_cell_at(layout, x, z);
    if (!node || (node->cellapp_id != o->context.self->process_id &&
                  (!peer_set_is_up(o->context.peers, node->cellapp_id) ||
                   !spaces_peer_epoch(o->context.spaces, node->cellapp_id, target)))) {
        snprintf(err, errlen, "the cell of space '%s' at (%.1f, %.1f) is on cellapp %" PRIu64 ", which is not ready",
                 target, (double)x, (double)z, node ? node->cellapp_id : 0);
        return -1;
    }
    if (strcmp(target, c->space_name) != 0) {
        entity->real->teleport_pending = true;
        cell_note_changed(c, entity);
        snprintf(entity->real->teleport_space, sizeof entity->real->teleport_space, "%s", target);
        entity->real->teleport_x = x;
        entity->real->teleport_y = y;
        entity->real->teleport_z = z;
        entity->real->teleport_yaw = yaw;
        return 0;
    }
    /* Within the space: it moves now; if the point is another cellapp's,
     * the offload follows at the end of the tick, like any crossing. */
    cell_move(c, entity, x, y, z, yaw);
    entity->move_stamp_us = clock_wall_us();
    entity->real->teleported = true;
    cell_note_changed(c, entity);
    movement_reset(&o->context.settings->movement, entity, clock_monotonic_us());
    offload_tell_client_teleported(o, entity, false);
    entity->real->snapshot_due = true;
    o->context.counters->teleports++;
    o->context.hooks->teleported(o->context.hooks->host, entity, false);
    return 0;
}
