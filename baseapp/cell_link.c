/* cell_link.c -- the baseapp's side of its cellapps (cell_link.h): choosing
 * where a new cell part goes, asking for it, messages to cell parts, the
 * cell addresses the cellapps report, and the cell parts lost when a
 * cellapp goes away. It owns the loads it chooses by; the bases are
 * base_entity.c's, their clients proxy.c's. */
#include "cell_link.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "id_map.h"
#include "log.h"
#include "peer_message.h"

/* How long a restore may take before it is asked again. */
#define CELL_LINK_RESTORE_RETRY_US ((uint64_t)3 * 1000 * 1000)
/* Adoptions (one a second) a restored base's cell part on a live cellapp
 * may leave unanswered before it is made again from the backup: none
 * answers when the dead baseapp destroyed it on its way out. */
#define CELL_LINK_ADOPT_ASKS_BEFORE_RECREATE 2

struct cell_links {
    cell_links_context context;
    id_map assignments; /* cellapp id -> cell parts asked of it since the last registry report */
};

cell_links *cell_links_create(const cell_links_context *context) {
    cell_links *links = xcalloc(1, sizeof *links);
    links->context = *context;
    id_map_init(&links->assignments);
    return links;
}

void cell_links_free(cell_links *links) {
    if (!links) return;
    id_map_close(&links->assignments);
    free(links);
}

/* The registry's load (reals per cellapp) is a heartbeat old; cell parts
 * asked for since then are added so that a burst of logins spreads out
 * instead of all landing on whichever cellapp looked emptiest a second
 * ago. */
uint64_t cell_links_choose(cell_links *links) {
    size_t cursor = 0;
    uint64_t cellapp_id, best = 0;
    int64_t best_load = 0;
    while ((cellapp_id = peer_set_next_up(links->context.peers, PEER_ROLE_CELLAPP, &cursor)) != 0) {
        int64_t load = peer_set_load(links->context.peers, cellapp_id) +
                       (int64_t)(uintptr_t)id_map_get(&links->assignments, cellapp_id);
        if (!best || load < best_load) {
            best = cellapp_id;
            best_load = load;
        }
    }
    if (best) {
        uintptr_t assigned = (uintptr_t)id_map_get(&links->assignments, best);
        id_map_put(&links->assignments, best, (void *)(assigned + 1));
    }
    return best;
}

void cell_links_on_registry(cell_links *links) {
    id_map_close(&links->assignments);
    id_map_init(&links->assignments);
}

int cell_link_create(cell_links *links, base_entity *base, bool with_client, uint32_t binding) {
    uint64_t cellapp_id = cell_links_choose(links);
    if (!cellapp_id) return -1;
    /* The cellapp asked; the address comes with its answer. */
    cell_address_init(&base->cell, cellapp_id, 0);
    bit_writer cell_properties;
    bit_writer_init(&cell_properties);
    base_entity_cell_properties(base, &cell_properties);
    const base_persistence *saved = &base->persistence;
    Tessera__Client__Vector3 position = TESSERA__CLIENT__VECTOR3__INIT;
    Tessera__Cluster__CreateCellEntity create = TESSERA__CLUSTER__CREATE_CELL_ENTITY__INIT;
    create.entity_id = base->entity_id;
    create.baseapp_id = links->context.self->process_id;
    create.entity_type = (char *)base->cls->name;
    create.space_name = (char *)saved->space_name;
    if (saved->has_position) {
        position.x = (float)saved->position[0];
        position.y = (float)saved->position[1];
        position.z = (float)saved->position[2];
        create.position = &position;
        create.has_position = true;
        create.yaw = saved->yaw;
    }
    create.has_client = with_client;
    create.client_binding = binding;
    create.cell_properties.data = (uint8_t *)bit_writer_data(&cell_properties);
    create.cell_properties.len = bit_writer_bytes(&cell_properties);
    peer_send_create_cell_entity(links->context.peers, cellapp_id, &create);
    bit_writer_close(&cell_properties);
    log_debug("entity %" PRIu64 " (%s '%s'): its cell part asked of cellapp %" PRIu64 "%s", base->entity_id,
              base->cls->name, base->name, cellapp_id, saved->loaded ? " (restored)" : "");
    return 0;
}

int cell_link_send(cell_links *links, base_entity *base, Tessera__Cluster__CellMessage *message) {
    if (!base->cell.cellapp_id || !base->entity_id || links->context.self->stopping) return -1;
    message->entity_id = base->entity_id;
    mailbox_send_cell(links->context.mailbox, message, base->cell.cellapp_id, clock_monotonic_us() / 1000);
    return 0;
}

int cell_link_adopt(cell_links *links, base_entity *base, uint64_t dead_baseapp_id) {
    if (links->context.self->stopping) return -1;
    Tessera__Cluster__BaseMoved moved = TESSERA__CLUSTER__BASE_MOVED__INIT;
    moved.dead_baseapp_id = dead_baseapp_id;
    Tessera__Cluster__CellMessage message = TESSERA__CLUSTER__CELL_MESSAGE__INIT;
    message.entity_id = base->entity_id;
    message.body_case = TESSERA__CLUSTER__CELL_MESSAGE__BODY_BASE_MOVED;
    message.base_moved = &moved;
    mailbox_send_cell(links->context.mailbox, &message, 0, clock_monotonic_us() / 1000);
    return 0;
}

/* A cellapp holds a stream until it is declared dead: one that is only
 * unreachable (busy, cut off) may come back with it, and nothing is given
 * up on it before the cluster decides. */
static bool cell_links_is_up(uint64_t cellapp_id, void *context) {
    return peer_set_liveness(((cell_links *)context)->context.peers, cellapp_id) != PEER_DEAD;
}

static bool cell_links_ask_restore(cell_links *links, base_entity *base, uint64_t dead, bool recreate);

bool cell_link_restore_adopted(cell_links *links, base_entity *base) {
    if (base->state != BASE_ENTITY_CREATING_CELL || !base->adopting_dead_baseapp || !base->adopting_cellapp ||
        !base->backup.state || links->context.self->stopping)
        return false;
    bool cellapp_dead = !cell_links_is_up(base->adopting_cellapp, links);
    if (!cellapp_dead && base->adopt_asks < CELL_LINK_ADOPT_ASKS_BEFORE_RECREATE) return false;
    uint64_t now_us = clock_monotonic_us();
    if (base->backup.restore_asked_us && now_us - base->backup.restore_asked_us < CELL_LINK_RESTORE_RETRY_US)
        return false;
    if (!cell_links_ask_restore(links, base, base->adopting_cellapp, true)) return false;
    log_info("entity %" PRIu64 " (%s '%s'): %s: its cell part is restored from the base's backup", base->entity_id,
             base->cls->name, base->name,
             cellapp_dead ? "its base and its cell part both died" : "its cell part does not answer its adoption");
    return true;
}

/* Destroys a cell part that nobody will use (its base went while it was
 * being made), at the cellapp that made it. */
static void cell_links_destroy_orphan(cell_links *links, uint64_t cellapp_id, uint64_t entity_id) {
    Tessera__Cluster__DestroyCellEntity destroy = TESSERA__CLUSTER__DESTROY_CELL_ENTITY__INIT;
    Tessera__Cluster__CellMessage message = TESSERA__CLUSTER__CELL_MESSAGE__INIT;
    message.entity_id = entity_id;
    message.body_case = TESSERA__CLUSTER__CELL_MESSAGE__BODY_DESTROY;
    message.destroy = &destroy;
    mailbox_send_cell(links->context.mailbox, &message, cellapp_id, clock_monotonic_us() / 1000);
}

base_entity *cell_links_on_created(cell_links *links, uint64_t cellapp_id,
                                   const Tessera__Cluster__CellEntityCreated *reply) {
    base_entity *base = base_entities_find(links->context.bases, reply->entity_id);
    /* The cellapp asked may have passed the request to the one whose cell
     * holds the spawn point: the answer comes from where the real is. */
    if (!base || (base->state == BASE_ENTITY_DESTROYING && base->cell.incarnation == 0)) {
        /* The base went while the cell part was being made: undo it. */
        if (reply->ok) cell_links_destroy_orphan(links, cellapp_id, reply->entity_id);
        return NULL;
    }
    return base;
}

static void cell_links_release(cell_links *links, base_entity *base) {
    const cell_link_callbacks *callbacks = &links->context.callbacks;
    if (callbacks->release) callbacks->release(callbacks->owner, base);
}

void cell_links_on_handoff(cell_links *links, uint64_t cellapp_id, const Tessera__Cluster__CellHandoff *handoff) {
    base_entity *base = base_entities_find(links->context.bases, handoff->entity_id);
    if (!base || base->state != BASE_ENTITY_LIVE) return;
    cell_address_on_handoff(&base->cell, cellapp_id, handoff->incarnation, handoff->next_cellapp_id);
    cell_address_check(&base->cell, cell_links_is_up, links, clock_monotonic_us());
    cell_links_release(links, base);
}

void cell_links_on_address(cell_links *links, uint64_t cellapp_id, const Tessera__Cluster__CellAddress *address) {
    base_entity *base = base_entities_find(links->context.bases, address->entity_id);
    if (!base || base->state != BASE_ENTITY_LIVE) return;
    bool changed = cell_links_is_up(base->cell.cellapp_id, links)
                       ? cell_address_on_address(&base->cell, cellapp_id, address->incarnation)
                       : cell_address_take_over(&base->cell, cellapp_id, address->incarnation);
    if (changed)
        log_debug("entity %" PRIu64 ": its cell is on cellapp %" PRIu64 " now (incarnation %u)", address->entity_id,
                  cellapp_id, address->incarnation);
    cell_address_check(&base->cell, cell_links_is_up, links, clock_monotonic_us());
    cell_links_release(links, base);
}

static void cell_links_lost(cell_links *links, base_entity *base, uint64_t cellapp_id, bool while_making,
                            const char *reason) {
    cell_address_clear(&base->cell);
    const cell_link_callbacks *callbacks = &links->context.callbacks;
    if (callbacks->lost) callbacks->lost(callbacks->owner, base, cellapp_id, while_making, reason);
}

/* Asks a live cellapp to bring back the real of `base` from its backup
 * (it passes the request on to the cellapp that owns the position).
 * Returns whether it was sent. */
static bool cell_links_ask_restore(cell_links *links, base_entity *base, uint64_t dead, bool recreate) {
    uint64_t cellapp_id = cell_links_choose(links);
    if (!cellapp_id || !base->backup.state) return false;
    Tessera__Cluster__RestoreCellEntity restore = TESSERA__CLUSTER__RESTORE_CELL_ENTITY__INIT;
    restore.entity_id = base->entity_id;
    restore.dead_cellapp_id = dead;
    restore.state.data = base->backup.state;
    restore.state.len = base->backup.length;
    restore.saved_wall_us = base->backup.saved_wall_us;
    restore.recreate = recreate;
    if (peer_send_restore_cell_entity(links->context.peers, cellapp_id, &restore) != 0) return false;
    base->backup.restore_asked_us = clock_monotonic_us();
    base->backup.restore_dead = dead;
    return true;
}

void cell_links_on_cellapp_down(cell_links *links, uint64_t cellapp_id, const char *reason) {
    /* The cellapp was declared dead. A cell part that was on it, or on its
     * way to or from it, is restored from the base's backup on the cellapp
     * that owns its position now (which claims it in the cell directory,
     * so one that arrived elsewhere, or was taken back by the cellapp it
     * was leaving, is not restored twice); the client waits for the new
     * address, connected. A cell part still being made there is lost at
     * once. */
    size_t restoring = 0, without_backup = 0, dropped = 0;
    uint32_t cursor = 0;
    base_entity *base;
    uint64_t now_us = clock_monotonic_us();
    while ((base = base_entities_next(links->context.bases, &cursor)) != NULL) {
        if (base->state == BASE_ENTITY_CREATING_CELL && base->adopting_dead_baseapp &&
            base->adopting_cellapp == cellapp_id) {
            /* Restored from a dead baseapp, its cell part on this one. */
            if (cell_link_restore_adopted(links, base) || base->backup.restore_asked_us)
                restoring++;
            else
                without_backup++;
            continue;
        }
        if (base->state == BASE_ENTITY_CREATING_CELL && base->cell.cellapp_id == cellapp_id) {
            cell_links_lost(links, base, cellapp_id, true, reason);
            dropped++;
            continue;
        }
        if (base->state != BASE_ENTITY_LIVE) continue;
        if (base->cell.cellapp_id == cellapp_id || base->cell.stream_cellapp == cellapp_id) {
            if (cell_links_ask_restore(links, base, cellapp_id, false))
                restoring++;
            else
                without_backup++;
        }
        cell_address_check(&base->cell, cell_links_is_up, links, now_us);
        cell_links_release(links, base);
    }
    id_map_remove(&links->assignments, cellapp_id);
    size_t left = peer_set_count_up(links->context.peers, PEER_ROLE_CELLAPP);
    if (left && peer_set_is_up(links->context.peers, cellapp_id)) left--; /* its link is not closed yet */
    log_warn("cellapp %" PRIu64 " dead (%s): %zu cell parts being restored, %zu without a backup wait, %zu dropped, "
             "%zu cellapps left",
             cellapp_id, reason, restoring, without_backup, dropped, left);
}

void cell_links_sweep(cell_links *links) {
    uint64_t now_us = clock_monotonic_us();
    uint64_t grace_us = (uint64_t)links->context.settings->cell_lost_grace_ms * 1000u;
    uint32_t cursor = 0;
    base_entity *base;
    while ((base = base_entities_next(links->context.bases, &cursor)) != NULL) {
        if (base->state != BASE_ENTITY_LIVE || !base->cell.lost_since_us) continue;
        if (!cell_address_check(&base->cell, cell_links_is_up, links, now_us)) {
            base->backup.restore_asked_us = 0;
            cell_links_release(links, base);
            continue;
        }
        /* A restore unanswered (the cellapp asked died too, or its claim
         * could not be made): ask again, perhaps another. */
        if (base->backup.restore_asked_us && now_us - base->backup.restore_asked_us >= CELL_LINK_RESTORE_RETRY_US)
            cell_links_ask_restore(links, base, base->backup.restore_dead, false);
        if (now_us - base->cell.lost_since_us < grace_us) continue;
        cell_links_lost(links, base, base->cell.cellapp_id, false, "no other cellapp took it back");
    }
}
