/* reals.c -- the reals this cellapp creates and destroys: creating cell
 * entities at a baseapp's request (forwarding the request to the cellapp
 * whose cell holds the spawn point, refusing what cannot be made), the
 * answer each base gets, the end of a real, and the request to drop a
 * client that broke the rules. Owns nothing but its context. */
#include "reals.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "clock.h"
#include "log.h"
#include "mailbox.h"
#include "movement.h"
#include "peer_message.h"
#include "property_codec.h"
#include "random_unit.h"
#include "witness.h"

struct reals {
    reals_context context;
};

reals *reals_create(const reals_context *context) {
    reals *r = xcalloc(1, sizeof *r);
    r->context = *context;
    return r;
}

void reals_free(reals *r) { free(r); }

void reals_drop_client(reals *r, const cell_entity *entity, Tessera__Client__ErrorCode code, const char *reason) {
    log_warn("entity %" PRIu64 ": dropping its client: %s", entity->id, reason);
    if (!entity->real) return; /* a ghost has no client of its own here */
    Tessera__Cluster__DropClient drop = TESSERA__CLUSTER__DROP_CLIENT__INIT;
    drop.entity_id = entity->id;
    drop.code = code;
    drop.reason = (char *)reason;
    peer_send_drop_client(r->context.peers, entity->real->baseapp_id, &drop);
}

cell_entity *reals_create_real(reals *r, cell *c, uint64_t id, const entity_def_class *cls, float x, float y, float z,
                               float yaw, uint64_t baseapp_id) {
    if (spaces_find_entity(r->context.spaces, id)) return NULL;
    cell_entity *entity = cell_add(c, id, CELL_ENTITY_REAL, cls, x, y, z);
    if (!entity) return NULL;
    entity->incarnation = 1;
    entity->real->baseapp_id = baseapp_id;
    entity->yaw = isfinite(yaw) ? yaw : 0.0f;
    entity->move_stamp_us = clock_wall_us();
    movement_reset(&r->context.settings->movement, entity, clock_monotonic_us());
    ghost_order_set_real(r->context.ghost_order, id, 1, r->context.self->process_id);
    mailbox_directory_set(r->context.redis, r->context.cluster_name, id, r->context.self->process_id, 1);
    entity->real->snapshot_due = true; /* backed up from its first tick */
    return entity;
}

void reals_destroy(reals *r, cell_entity *entity) {
    if (entity->destroyed || entity->kind != CELL_ENTITY_REAL) return;
    r->context.hooks->destroyed(r->context.hooks->host, entity);
    haunt_destroyed(r->context.haunts, entity);
    mailbox_directory_remove(r->context.redis, r->context.cluster_name, entity->id, r->context.self->process_id,
                             entity->incarnation);
    ghost_order_forget(r->context.ghost_order, entity->id, clock_monotonic_us());
    if (r->context.snapshots) cell_snapshots_forget(r->context.snapshots, entity);
    cell_destroy(entity->home, entity);
}

void reals_reply_created(reals *r, uint64_t baseapp_id, uint64_t entity_id, const cell_entity *entity,
                         const char *error) {
    const cellapp_settings *settings = r->context.settings;
    Tessera__Cluster__CellEntityCreated reply = TESSERA__CLUSTER__CELL_ENTITY_CREATED__INIT;
    Tessera__Client__Vector3 position = TESSERA__CLIENT__VECTOR3__INIT;
    Tessera__Client__Vector3 world_min = TESSERA__CLIENT__VECTOR3__INIT;
    Tessera__Client__Vector3 world_max = TESSERA__CLIENT__VECTOR3__INIT;
    reply.entity_id = entity_id;
    reply.ok = entity != NULL;
    reply.error = (char *)(error ? error : "");
    if (entity) {
        const cell *c = entity->home;
        position.x = entity->x;
        position.y = entity->y;
        position.z = entity->z;
        reply.position = &position;
        reply.yaw = entity->yaw;
        reply.view_radius = (float)settings->witness.view_radius;
        reply.view_hysteresis = (float)settings->witness.view_hysteresis;
        reply.max_speed = (float)settings->movement.max_speed;
        reply.tick_hz = (uint32_t)settings->tick_hz;
        reply.space_name = (char *)c->space_name;
        reply.max_aliases = (uint32_t)settings->witness.max_aliases;
        reply.position_precision = c->volatile_config.precision;
        world_min.x = (float)c->volatile_config.min[0];
        world_min.y = (float)c->volatile_config.min[1];
        world_min.z = (float)c->volatile_config.min[2];
        world_max.x = (float)c->volatile_config.max[0];
        world_max.y = (float)c->volatile_config.max[1];
        world_max.z = (float)c->volatile_config.max[2];
        reply.world_min = &world_min;
        reply.world_max = &world_max;
        reply.yaw_steps = c->volatile_config.yaw_steps;
        reply.detail_near_distance = (float)settings->witness.detail_near_distance;
        reply.detail_medium_distance = (float)settings->witness.detail_medium_distance;
        reply.alias_cooldown_ms = (uint32_t)settings->witness.alias_cooldown_ms;
        reply.detail_hysteresis = (float)settings->witness.detail_hysteresis;
        reply.incarnation = entity->incarnation;
        reply.client_binding = entity->real->client_binding;
    }
    peer_send_cell_entity_created(r->context.peers, baseapp_id, &reply);
}

void reals_on_create(reals *r, uint64_t from, const Tessera__Cluster__CreateCellEntity *request) {
    const cellapp_settings *settings = r->context.settings;
    uint64_t baseapp_id = request->baseapp_id;
    const char *space_name =
        request->space_name && request->space_name[0] ? request->space_name : settings->default_space;
    const space_layout *layout = spaces_layout(r->context.spaces, space_name);
    if (!layout && request->hops == 0) {
        /* Just started (or rejoined), this cellapp may not have read the
         * layouts yet: a cellapp that knows the space makes it. */
        size_t cursor = 0;
        uint64_t peer;
        while ((peer = peer_set_next_up(r->context.peers, PEER_ROLE_CELLAPP, &cursor)) != 0) {
            if (!spaces_peer_epoch(r->context.spaces, peer, space_name)) continue;
            Tessera__Cluster__CreateCellEntity forward = *request;
            forward.hops = request->hops + 1;
            Tessera__Cluster__CellItem item = TESSERA__CLUSTER__CELL_ITEM__INIT;
            item.body_case = TESSERA__CLUSTER__CELL_ITEM__BODY_CREATE;
            item.create = &forward;
            outbox_to_cellapp(r->context.outbox, peer, &item);
            return;
        }
    }
    if (!layout) {
        reals_reply_created(r, baseapp_id, request->entity_id, NULL, "unknown space");
        return;
    }
    const entity_def_class *cls =
        request->entity_type ? entity_def_registry_find_class(r->context.definitions, request->entity_type) : NULL;
    if (!cls) {
        log_warn("process %" PRIu64 " asked for entity %" PRIu64 " of type '%s', which the definitions lack", from,
                 request->entity_id, request->entity_type ? request->entity_type : "");
        reals_reply_created(r, baseapp_id, request->entity_id, NULL, "unknown entity type");
        return;
    }
    float x, y = 0, z;
    if (request->has_position && request->position) {
        x = request->position->x;
        y = request->position->y;
        z = request->position->z;
        if (!isfinite(x) || !isfinite(y) || !isfinite(z) || x < layout->min[0] || x > layout->max[0] ||
            y < layout->min[1] || y > layout->max[1] || z < layout->min[2] || z > layout->max[2]) {
            reals_reply_created(r, baseapp_id, request->entity_id, NULL, "position outside every cell of the space");
            return;
        }
    } else {
        /* Uniform over the space's spawn disc. */
        double angle = random_unit(r->context.random_state) * 2.0 * M_PI;
        double distance = sqrt(random_unit(r->context.random_state)) * layout->spawn_radius;
        x = (float)(layout->spawn_x + distance * cos(angle));
        z = (float)(layout->spawn_z + distance * sin(angle));
    }
    /* The cellapp whose cell holds the point creates it; while that one
     * cannot (not up, or without the space yet), this one does, and the
     * real moves there when it can. */
    const space_layout_node *node = space_layout_cell_at(layout, x, z);
    if (node && node->cellapp_id != r->context.self->process_id && request->hops == 0 &&
        peer_set_is_up(r->context.peers, node->cellapp_id) &&
        spaces_peer_epoch(r->context.spaces, node->cellapp_id, space_name) != 0) {
        Tessera__Cluster__CreateCellEntity forward = *request;
        Tessera__Client__Vector3 position = TESSERA__CLIENT__VECTOR3__INIT;
        position.x = x;
        position.y = y;
        position.z = z;
        forward.position = &position;
        forward.has_position = true;
        forward.space_name = (char *)space_name;
        forward.hops = request->hops + 1;
        Tessera__Cluster__CellItem item = TESSERA__CLUSTER__CELL_ITEM__INIT;
        item.body_case = TESSERA__CLUSTER__CELL_ITEM__BODY_CREATE;
        item.create = &forward;
        outbox_to_cellapp(r->context.outbox, node->cellapp_id, &item);
        return;
    }
    cell *c = spaces_cell(r->context.spaces, space_name, true);
    if (!c || (int64_t)spaces_real_count(r->context.spaces) >= settings->max_entities) {
        reals_reply_created(r, baseapp_id, request->entity_id, NULL, c ? "cellapp is full" : "unknown space");
        return;
    }
    cell_entity *entity = reals_create_real(r, c, request->entity_id, cls, x, y, z, request->yaw, baseapp_id);
    if (!entity) {
        log_warn("process %" PRIu64 " asked for entity %" PRIu64 ", which already exists here", from,
                 request->entity_id);
        reals_reply_created(r, baseapp_id, request->entity_id, NULL, "entity id already exists");
        return;
    }
    /* The base's starting values of the cell properties (its cellData). */
    if (request->cell_properties.len) {
        entity_state_mask on_cell = {{0}};
        for (size_t p = 0; p < cls->property_count; p++)
            if (cls->properties[p].audience.on_cell) entity_state_mask_add(&on_cell, (uint16_t)p);
        bit_reader reader;
        bit_reader_init(&reader, request->cell_properties.data, request->cell_properties.len);
        int rc = property_codec_decode_changes(&reader, entity->state, &on_cell, NULL);
        if (rc != 0) {
            log_warn("process %" PRIu64 ": entity %" PRIu64 "'s cell properties do not decode: %s", from,
                     request->entity_id, property_codec_strerror(rc));
            reals_destroy(r, entity);
            reals_reply_created(r, baseapp_id, request->entity_id, NULL, "malformed cell properties");
            return;
        }
    }
    if (request->has_client) {
        entity->real->client_binding = request->client_binding;
        witness_attach(c, entity);
    }
    r->context.hooks->created(r->context.hooks->host, entity);
    if (cell_entity_witness(entity)) r->context.hooks->witness(r->context.hooks->host, entity, true);
    log_debug("created %s %" PRIu64 " for baseapp %" PRIu64 " in space '%s' at (%.1f, %.1f)", cls->name, entity->id,
              baseapp_id, c->space_name, (double)x, (double)z);
    reals_reply_created(r, baseapp_id, request->entity_id, entity, NULL);
}

/* The real's client was on a baseapp that died: its witness goes (the game
 * hears it), and a client that comes back gets a fresh one. */
static void reals_drop_witness(reals *r, cell_entity *entity) {
    if (!cell_entity_witness(entity)) return;
    witness_detach(entity->home, entity);
    r->context.hooks->witness(r->context.hooks->host, entity, false);
}

/* The real's base is gone with its baseapp: it starts waiting for its base
 * to come back, without a client. */
static void reals_lose_base(reals *r, cell_entity *entity, uint64_t now_us) {
    entity->real->base_lost_us = now_us ? now_us : 1;
    reals_drop_witness(r, entity);
}

size_t reals_lose_bases_of(reals *r, uint64_t baseapp_id, uint64_t now_us) {
    size_t waiting = 0, cursor = 0;
    cell *c;
    while ((c = spaces_next_cell(r->context.spaces, &cursor)) != NULL) {
        for (size_t i = 0; i < c->count; i++) {
            cell_entity *entity = c->by_index[i];
            if (entity->kind != CELL_ENTITY_REAL || entity->destroyed || entity->real->baseapp_id != baseapp_id ||
                entity->real->base_lost_us)
                continue;
            reals_lose_base(r, entity, now_us);
            waiting++;
        }
    }
    return waiting;
}

size_t reals_sweep_lost_bases(reals *r, uint64_t now_us) {
    uint64_t wait_us = (uint64_t)r->context.settings->base_restore_wait_ms * 1000;
    size_t destroyed = 0, cursor = 0;
    cell *c;
    while ((c = spaces_next_cell(r->context.spaces, &cursor)) != NULL) {
        for (size_t i = 0; i < c->count; i++) {
            cell_entity *entity = c->by_index[i];
            if (entity->kind != CELL_ENTITY_REAL || entity->destroyed || !entity->real->baseapp_id) continue;
            if (!entity->real->base_lost_us) {
                /* Arrived by offload from a cellapp where it was waiting
                 * already, or the death was heard before it came. */
                if (peer_set_liveness(r->context.peers, entity->real->baseapp_id) == PEER_DEAD)
                    reals_lose_base(r, entity, now_us);
                continue;
            }
            if (now_us - entity->real->base_lost_us < wait_us) continue;
            log_warn("entity %" PRIu64 ": its base on dead baseapp %" PRIu64 " was not restored within %" PRId64
                     " ms: destroyed",
                     entity->id, entity->real->baseapp_id, r->context.settings->base_restore_wait_ms);
            reals_destroy(r, entity);
            destroyed++;
        }
    }
    return destroyed;
}

int reals_base_moved(reals *r, cell_entity *entity, uint64_t dead_baseapp_id, uint64_t new_baseapp_id, char *why,
                     size_t why_size) {
    cell_real *real = entity->real;
    if (real->baseapp_id != new_baseapp_id) {
        if (real->baseapp_id != dead_baseapp_id) {
            snprintf(why, why_size, "its base is on baseapp %" PRIu64 ", not on %" PRIu64, real->baseapp_id,
                     dead_baseapp_id);
            return -1;
        }
        if (peer_set_is_up(r->context.peers, dead_baseapp_id) &&
            peer_set_liveness(r->context.peers, dead_baseapp_id) != PEER_DEAD) {
            snprintf(why, why_size, "baseapp %" PRIu64 " is alive and connected here", dead_baseapp_id);
            return -1;
        }
        log_info("entity %" PRIu64 ": its base moved from dead baseapp %" PRIu64 " to baseapp %" PRIu64 " (%s)",
                 entity->id, dead_baseapp_id, new_baseapp_id,
                 real->base_lost_us ? "restored from its backup" : "before this cellapp heard of the death");
        real->baseapp_id = new_baseapp_id;
        real->base_lost_us = 0;
        real->client_binding = 0;
        /* Its client was on the dead baseapp: it comes back through the new
         * one with a new binding and a fresh view. */
        reals_drop_witness(r, entity);
    }
    /* The answer a new cell part gives: the base becomes whole with it
     * (and its client, when it reconnects, gets its view from it). */
    reals_reply_created(r, new_baseapp_id, entity->id, entity, NULL);
    real->snapshot_due = true;
    cell_note_changed(entity->home, entity);
    return 0;
}
