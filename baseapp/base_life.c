/* base_life.c -- bases from made to freed (base_life.h). It owns nothing
 * but the order of a base's life: the set is base_entity.c's, the cell
 * parts cell_link.c's, the writes persistence.c's, the clients proxy.c's. */
#include "base_life.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "clock.h"
#include "log.h"

struct base_life {
    base_life_context context;
};

static void base_life_client_gone(base_life *life, base_entity *base, const char *message);

base_life *base_life_create(const base_life_context *context) {
    base_life *life = xcalloc(1, sizeof *life);
    life->context = *context;
    return life;
}

void base_life_free_module(base_life *life) { free(life); }

int base_life_take_id(base_life *life, uint64_t *entity_id) { return id_block_take(life->context.ids, entity_id); }

base_entity *base_life_make(base_life *life, const entity_def_class *cls, const char *name, const cJSON *stored,
                            char *why, size_t why_size) {
    uint64_t entity_id;
    if (base_life_take_id(life, &entity_id) != 0) {
        snprintf(why, why_size, "no entity ids available, try again");
        return NULL;
    }
    return base_life_make_as(life, entity_id, cls, name, stored, why, why_size);
}

base_entity *base_life_make_as(base_life *life, uint64_t entity_id, const entity_def_class *cls, const char *name,
                               const cJSON *stored, char *why, size_t why_size) {
    if (base_entities_find(life->context.bases, entity_id)) {
        snprintf(why, why_size, "entity %" PRIu64 " is here already", entity_id);
        return NULL;
    }
    base_entity *base = base_entities_add(life->context.bases, entity_id, cls, name);
    if (!base) {
        snprintf(why, why_size, "server full, try another baseapp");
        return NULL;
    }
    persistence_restore(life->context.store, base, stored);
    base_mailbox_claim(life->context.addresses, entity_id);
    base_hooks_created(life->context.hooks, base);
    return base;
}

base_entity *base_life_restore(base_life *life, const entity_def_class *cls, const Tessera__Cluster__BaseBackup *backup,
                               uint64_t dead_baseapp_id, char *why, size_t why_size) {
    if (base_entities_find(life->context.bases, backup->entity_id)) {
        snprintf(why, why_size, "entity %" PRIu64 " is here already", backup->entity_id);
        return NULL;
    }
    base_entity *base =
        base_entities_add(life->context.bases, backup->entity_id, cls, backup->name ? backup->name : "");
    if (!base) {
        snprintf(why, why_size, "this baseapp is full");
        return NULL;
    }
    bit_reader reader;
    bit_reader_init(&reader, backup->properties.data, backup->properties.len);
    int rc = entity_state_decode_all(base->properties, &reader);
    if (rc != 0) {
        snprintf(why, why_size, "its properties do not decode (%s)", entity_state_strerror(rc));
        base_entities_remove(life->context.bases, base);
        return NULL;
    }
    entity_state_clear_dirty(base->properties);
    persistence_restore(life->context.store, base, NULL);
    base->persistence.loaded = backup->loaded;
    if (backup->cell_backup) base_entity_keep_backup(base, backup->cell_backup);
    base_mailbox_claim(life->context.addresses, base->entity_id);
    if (!base_entity_class_has_cell(cls)) {
        base->state = BASE_ENTITY_LIVE;
    } else if (backup->cellapp_id) {
        /* Its cell part lives on: it answers to this baseapp once asked. */
        base->state = BASE_ENTITY_CREATING_CELL;
        base->adopting_dead_baseapp = dead_baseapp_id;
        base->adopting_cellapp = backup->cellapp_id;
        base->adopt_asked_us = clock_monotonic_us();
        base->adopt_asks = 1;
        cell_link_adopt(life->context.cells, base, dead_baseapp_id);
        /* Its cellapp may have died with its baseapp. */
        cell_link_restore_adopted(life->context.cells, base);
    } else if (base_life_create_cell(life, base, false, 0) != 0) {
        /* It had none yet: one is made, without a client (it comes back
         * with a reconnect). No cellapp up: it stays without one. */
        log_warn("entity %" PRIu64 " (%s '%s'): restored without a cell part: no cellapp is up", base->entity_id,
                 cls->name, base->name);
        base->state = BASE_ENTITY_LIVE;
    }
    return base;
}

/* A restored base whose cell part has not answered: asked again, or given
 * up on (the base is written from its cell backup and goes: returns true,
 * and the base may be gone). */
static bool base_life_adopt_again(base_life *life, base_entity *base, uint64_t now_us) {
    if (base->state != BASE_ENTITY_CREATING_CELL || !base->adopting_dead_baseapp) return false;
    if (now_us - base->adopt_asked_us < 1000000) return false;
    /* A cell part restored from the backup (both halves died) may wait for
     * the dead cellapp's cell to be given to a live one: it gets longer. */
    uint32_t asks = base->backup.restore_asked_us ? 2 * BASE_LIFE_ADOPT_ASKS : BASE_LIFE_ADOPT_ASKS;
    if (base->adopt_asks >= asks) {
        log_warn("entity %" PRIu64 " (%s '%s'): its cell part did not answer after %u asks: given up", base->entity_id,
                 base->cls->name, base->name, base->adopt_asks);
        base->adopting_dead_baseapp = 0;
        base_life_client_gone(life, base, "your entity could not be restored after its baseapp died; log in again");
        base_life_destroy(life, base, true, "its cell part did not answer its restore");
        return true;
    }
    base->adopt_asked_us = now_us;
    base->adopt_asks++;
    cell_link_adopt(life->context.cells, base, base->adopting_dead_baseapp);
    cell_link_restore_adopted(life->context.cells, base);
    return false;
}

int base_life_create_cell(base_life *life, base_entity *base, bool with_client, uint32_t binding) {
    return cell_link_create(life->context.cells, base, with_client, binding);
}

static void base_life_client_gone(base_life *life, base_entity *base, const char *message) {
    const base_life_callbacks *callbacks = &life->context.callbacks;
    if (callbacks->client_gone) callbacks->client_gone(callbacks->owner, base, message);
}

void base_life_destroy(base_life *life, base_entity *base, bool save, const char *reason) {
    if (base->state == BASE_ENTITY_DESTROYING) return;
    log_debug("entity %" PRIu64 " (%s '%s'): destroyed%s: %s", base->entity_id, base->cls->name, base->name,
              save ? " with a save" : "", reason);
    base_entity_state was = base->state;
    base->state = BASE_ENTITY_DESTROYING;
    char message[256];
    snprintf(message, sizeof message, "your entity is gone: %s", reason);
    base_life_client_gone(life, base, message);
    if (was == BASE_ENTITY_LIVE) {
        if (save && persistence_destroy_cell(life->context.store, base) == 0) return;
        if (!save) {
            Tessera__Cluster__DestroyCellEntity destroy = TESSERA__CLUSTER__DESTROY_CELL_ENTITY__INIT;
            Tessera__Cluster__CellMessage cell_message = TESSERA__CLUSTER__CELL_MESSAGE__INIT;
            cell_message.body_case = TESSERA__CLUSTER__CELL_MESSAGE__BODY_DESTROY;
            cell_message.destroy = &destroy;
            cell_link_send(life->context.cells, base, &cell_message);
        }
    }
    /* A cell part still being made is undone when its answer comes
     * (cell_links_on_created). */
    if (save) {
        persistence_write(life->context.store, base);
        return;
    }
    base_life_free(life, base);
}

void base_life_free(base_life *life, base_entity *base) {
    base_hooks_destroyed(life->context.hooks, base);
    base_mailbox_release(life->context.addresses, base->entity_id);
    const base_life_callbacks *callbacks = &life->context.callbacks;
    if (callbacks->freed) callbacks->freed(callbacks->owner, base);
    if (base->proxy && callbacks->client_part_free) callbacks->client_part_free(callbacks->owner, base);
    base_entities_remove(life->context.bases, base);
}

void base_life_on_cell_created(base_life *life, base_entity *base, uint64_t cellapp_id,
                               const Tessera__Cluster__CellEntityCreated *reply) {
    const base_life_callbacks *callbacks = &life->context.callbacks;
    if (base->state == BASE_ENTITY_CREATING_CELL) {
        cell_address_clear(&base->cell);
        if (base->adopting_dead_baseapp && reply->ok)
            log_info("entity %" PRIu64 " (%s '%s'): its cell part on cellapp %" PRIu64 " answers here now",
                     base->entity_id, base->cls->name, base->name, cellapp_id);
        base->adopting_dead_baseapp = 0;
        base->adopting_cellapp = 0;
        base->backup.restore_asked_us = 0;
        if (!reply->ok) {
            char message[256];
            snprintf(message, sizeof message, "cellapp %" PRIu64 " refused the entity: %s", cellapp_id,
                     reply->error ? reply->error : "");
            base_life_client_gone(life, base, message);
            base_life_destroy(life, base, false, "its cell part was refused");
            return;
        }
        cell_address_init(&base->cell, cellapp_id, reply->incarnation ? reply->incarnation : 1);
        base->state = BASE_ENTITY_LIVE;
        if (callbacks->cell_ready) callbacks->cell_ready(callbacks->owner, base, reply, true);
        return;
    }
    if (base->state != BASE_ENTITY_LIVE) return;
    if (callbacks->cell_ready) callbacks->cell_ready(callbacks->owner, base, reply, false);
}

void base_life_on_cell_lost(base_life *life, base_entity *base, uint64_t cellapp_id, bool while_making,
                            const char *reason) {
    char message[256];
    if (while_making) {
        snprintf(message, sizeof message, "cellapp %" PRIu64 " creating your entity is gone (%s); log in again",
                 cellapp_id, reason);
        base_life_client_gone(life, base, message);
        base_life_destroy(life, base, false, "the cellapp making its cell part went away");
        return;
    }
    snprintf(message, sizeof message,
             "cellapp %" PRIu64 " holding your entity is gone, and no other took it; log in again", cellapp_id);
    base_life_client_gone(life, base, message);
    /* What it last backed up is written: progress since is lost with the
     * cellapp. */
    base_life_destroy(life, base, true, "its cell part was lost with its cellapp");
}

void base_life_sweep(base_life *life) {
    uint64_t now = clock_monotonic_us();
    uint32_t cursor = 0;
    base_entity *base;
    while ((base = base_entities_next(life->context.bases, &cursor)) != NULL) {
        if (base_life_adopt_again(life, base, now)) continue; /* it may be gone */
        persistence_sweep(life->context.store, base, now);
    }
}

void base_life_free_all(base_life *life) {
    size_t unwritten = 0;
    uint32_t cursor = 0;
    base_entity *base;
    while ((base = base_entities_next(life->context.bases, &cursor)) != NULL) {
        if (persistence_unwritten(base)) {
            unwritten++;
            log_error("entity %" PRIu64 " (%s '%s'): stopping with its latest state unwritten", base->entity_id,
                      base->cls->name, base->name);
        }
        base_life_free(life, base);
    }
    if (unwritten) log_error("%zu entities stopped without their latest state written", unwritten);
}
