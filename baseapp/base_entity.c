/* base_entity.c -- the bases of a baseapp (base_entity.h): the set that
 * holds them by handle and by entity id, each base's properties from birth
 * to its free, its index by class, the cell properties it starts its cell part with, the
 * properties it owes its own client, and the state dump. What a base does
 * is the game's (base_game.c); its client is its proxy part's (proxy.c);
 * its storage is persistence.c's. */
#include "base_entity.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "entity_state_json.h"
#include "id_map.h"
#include "json_file.h"
#include "log.h"
#include "property_codec.h"

struct base_entities {
    entity_list *list; /* by handle */
    id_map by_entity;  /* entity id -> base_entity */
    id_map *by_class;  /* by entity_def_class id: entity id -> base_entity */
    size_t class_slots;
    void *host; /* base_entities_set_host */
};

/* Handles carry this many serial bits: a slot is reused 2^32 times before
 * a stale handle could name a new base. */
#define BASE_ENTITY_SERIAL_BITS 32

base_entities *base_entities_create(uint32_t max_bases) {
    base_entities *set = xcalloc(1, sizeof *set);
    set->list = entity_list_create(max_bases, BASE_ENTITY_SERIAL_BITS);
    id_map_init(&set->by_entity);
    return set;
}

void base_entities_free(base_entities *set) {
    if (!set) return;
    for (size_t i = 0; i < set->class_slots; i++) id_map_close(&set->by_class[i]);
    free(set->by_class);
    id_map_close(&set->by_entity);
    entity_list_free(set->list);
    free(set);
}

base_entity *base_entities_add(base_entities *set, uint64_t entity_id, const entity_def_class *cls, const char *name) {
    base_entity *base = xcalloc(1, sizeof *base);
    base->set = set;
    base->handle = entity_list_add(set->list, base);
    if (base->handle == ENTITY_HANDLE_NONE) {
        free(base);
        return NULL;
    }
    base->state = base_entity_class_has_cell(cls) ? BASE_ENTITY_CREATING_CELL : BASE_ENTITY_LIVE;
    base->entity_id = entity_id;
    snprintf(base->name, sizeof base->name, "%s", name);
    base->cls = cls;
    /* The key (a player's account name) is never copied into a property:
     * properties reach clients, and an account name is a login credential
     * half. A game names its players itself (the demo: a display name). */
    base->properties = entity_state_create(cls);
    id_map_put(&set->by_entity, entity_id, base);
    if (cls->id >= set->class_slots) {
        size_t slots = (size_t)cls->id + 1;
        set->by_class = xrealloc(set->by_class, slots * sizeof *set->by_class);
        for (size_t i = set->class_slots; i < slots; i++) id_map_init(&set->by_class[i]);
        set->class_slots = slots;
    }
    id_map_put(&set->by_class[cls->id], entity_id, base);
    return base;
}

void base_entities_remove(base_entities *set, base_entity *base) {
    if (id_map_get(&set->by_entity, base->entity_id) == base) id_map_remove(&set->by_entity, base->entity_id);
    id_map *of_class = &set->by_class[base->cls->id];
    if (id_map_get(of_class, base->entity_id) == base) id_map_remove(of_class, base->entity_id);
    entity_list_remove(set->list, base->handle);
    cell_address_clear(&base->cell);
    entity_state_free(base->properties);
    free(base->backup.state);
    free(base);
}

bool base_entity_keep_backup(base_entity *base, const Tessera__Cluster__CellSnapshot *snapshot) {
    struct base_cell_backup *backup = &base->backup;
    if (backup->state &&
        (snapshot->incarnation < backup->incarnation ||
         (snapshot->incarnation == backup->incarnation && snapshot->saved_wall_us <= backup->saved_wall_us)))
        return false;
    uint8_t *copy = xmalloc(snapshot->state.len ? snapshot->state.len : 1);
    if (snapshot->state.len) memcpy(copy, snapshot->state.data, snapshot->state.len);
    free(backup->state);
    backup->state = copy;
    backup->length = snapshot->state.len;
    backup->incarnation = snapshot->incarnation;
    backup->saved_wall_us = snapshot->saved_wall_us;
    return true;
}

void base_entities_set_host(base_entities *set, void *host) { set->host = host; }

void *base_entities_host(const base_entities *set) { return set->host; }

base_entity *base_entities_find(const base_entities *set, uint64_t entity_id) {
    return id_map_get(&set->by_entity, entity_id);
}

base_entity *base_entities_get(const base_entities *set, entity_handle handle) {
    return entity_list_get(set->list, handle);
}

base_entity *base_entities_next(const base_entities *set, uint32_t *cursor) {
    return entity_list_next(set->list, cursor, NULL);
}

size_t base_entities_count(const base_entities *set) { return entity_list_count(set->list); }

size_t base_entities_of_class(const base_entities *set, const entity_def_class *cls, uint64_t *out, size_t max) {
    if (!cls || cls->id >= set->class_slots) return 0;
    size_t found = 0, cursor = 0;
    uint64_t id;
    void *value;
    while (id_map_next(&set->by_class[cls->id], &cursor, &id, &value)) {
        if (!base_entity_is_live(value)) continue;
        if (out && found < max) out[found] = id;
        found++;
    }
    return found;
}

bool base_entity_class_has_cell(const entity_def_class *cls) {
    if (cls->method_count[ENTITY_DEF_PART_CELL] > 0) return true;
    for (size_t p = 0; p < cls->property_count; p++)
        if (cls->properties[p].audience.on_cell) return true;
    return false;
}

void base_entity_cell_properties(const base_entity *base, bit_writer *w) {
    /* The cell part starts with what the base set of the cell's properties
     * (a player's display name, stored ones); the cell keeps defaults for
     * the rest. */
    entity_state_mask cell = {{0}};
    for (size_t p = 0; p < base->cls->property_count; p++) {
        const entity_def_property *property = &base->cls->properties[p];
        if (property->audience.on_cell && entity_state_is_dirty(base->properties, property->id))
            entity_state_mask_add(&cell, property->id);
    }
    property_codec_encode_changes(w, base->properties, &cell);
    bit_writer_align(w);
}

bool base_entity_client_properties(base_entity *base, bool all, bit_writer *w) {
    entity_state_mask to_client = {{0}};
    for (size_t p = 0; p < base->cls->property_count; p++) {
        const entity_def_property *property = &base->cls->properties[p];
        if (property->audience.on_base && property->audience.to_own_client &&
            (all || entity_state_is_dirty(base->properties, property->id)))
            entity_state_mask_add(&to_client, property->id);
    }
    entity_state_clear_dirty(base->properties);
    if (entity_state_mask_empty(&to_client)) return false;
    property_codec_encode_changes(w, base->properties, &to_client);
    bit_writer_align(w);
    return true;
}

int base_entity_dump(const base_entities *set, const char *path, uint64_t process_id) {
    if (!path[0]) {
        log_warn("state dump requested, but state_dump_path is not set");
        return -1;
    }
    cJSON *root = cJSON_CreateObject();
    cJSON_AddNumberToObject(root, "process_id", (double)process_id);
    cJSON *entities = cJSON_AddArrayToObject(root, "entities");
    uint32_t cursor = 0;
    base_entity *base;
    size_t count = 0;
    while ((base = base_entities_next(set, &cursor)) != NULL) {
        if (base->properties == NULL || base->entity_id == 0) continue;
        /* Only what the base holds. */
        entity_state_mask on_base = {{0}};
        for (size_t p = 0; p < base->cls->property_count; p++)
            if (base->cls->properties[p].audience.on_base) entity_state_mask_add(&on_base, (uint16_t)p);
        cJSON *item = cJSON_CreateObject();
        cJSON_AddNumberToObject(item, "id", (double)base->entity_id);
        cJSON_AddStringToObject(item, "account", base->name);
        cJSON_AddStringToObject(item, "class", base->cls->name);
        cJSON_AddItemToObject(item, "properties", entity_state_to_json(base->properties, &on_base));
        cJSON_AddItemToArray(entities, item);
        count++;
    }
    char problem[512];
    int rc = json_file_write(path, root, problem, sizeof problem);
    cJSON_Delete(root);
    if (rc != 0) {
        log_warn("state dump: %s", problem);
        return -1;
    }
    log_info("state dump: %zu bases written to '%s'", count, path);
    return 0;
}
