/* state_dump.c -- writes the cellapp's reals and their properties to a JSON
 * file on request (SIGUSR1), with the ghosts it holds and its cells, for
 * operators chasing a bug and for the integration tests that check what
 * clients hold against what cells hold, and that every entity is real
 * exactly once.
 * json_file_write renames it into place whole. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "state_dump.h"
#include "clock.h"
#include "entity_state_json.h"
#include "json_file.h"
#include "log.h"

int state_dump_write(const spaces *s, const char *path, uint64_t process_id) {
    if (!path[0]) {
        log_warn("state dump requested, but state_dump_path is not set");
        return -1;
    }
    cJSON *root = cJSON_CreateObject();
    uint64_t wall_ms = clock_wall_us() / 1000; /* whole milliseconds */
    cJSON_AddNumberToObject(root, "process_id", (double)process_id);
    cJSON_AddNumberToObject(root, "wall_ms", (double)wall_ms);
    cJSON *entities = cJSON_AddArrayToObject(root, "entities");
    cJSON *ghosts = cJSON_AddArrayToObject(root, "ghosts");
    cJSON *cells = cJSON_AddArrayToObject(root, "cells");
    uint64_t now_us = clock_monotonic_us();
    size_t reals = 0, cursor = 0;
    const cell *c;
    while ((c = spaces_next_cell(s, &cursor)) != NULL) {
        cJSON *info = cJSON_CreateObject();
        cJSON_AddStringToObject(info, "space", c->space_name);
        cJSON_AddNumberToObject(info, "cell", c->cell_id);
        cJSON_AddBoolToObject(info, "has_region", c->has_region);
        if (c->has_region) {
            cJSON_AddNumberToObject(info, "min_x", c->region.min_x);
            cJSON_AddNumberToObject(info, "max_x", c->region.max_x);
            cJSON_AddNumberToObject(info, "min_z", c->region.min_z);
            cJSON_AddNumberToObject(info, "max_z", c->region.max_z);
        }
        cJSON_AddNumberToObject(info, "tick", c->tick);
        cJSON_AddNumberToObject(info, "reals", (double)c->real_count);
        cJSON_AddNumberToObject(info, "ghosts", (double)c->ghost_count);
        cJSON_AddItemToArray(cells, info);
        for (size_t i = 0; i < c->count; i++) {
            const cell_entity *entity = c->by_index[i];
            if (entity->destroyed) continue;
            if (entity->kind == CELL_ENTITY_GHOST) {
                cJSON *ghost = cJSON_CreateObject();
                cJSON_AddNumberToObject(ghost, "id", (double)entity->id);
                cJSON_AddNumberToObject(ghost, "owner", (double)entity->owner_cellapp);
                cJSON_AddNumberToObject(ghost, "incarnation", entity->incarnation);
                cJSON_AddNumberToObject(ghost, "x", entity->x);
                cJSON_AddNumberToObject(ghost, "z", entity->z);
                cJSON_AddItemToArray(ghosts, ghost);
                continue;
            }
            cJSON *item = cJSON_CreateObject();
            cJSON_AddNumberToObject(item, "id", (double)entity->id);
            cJSON_AddStringToObject(item, "class", entity->cls->name);
            if (entity->real->name[0]) cJSON_AddStringToObject(item, "name", entity->real->name);
            cJSON_AddStringToObject(item, "space", c->space_name);
            cJSON_AddNumberToObject(item, "x", entity->x);
            cJSON_AddNumberToObject(item, "y", entity->y);
            cJSON_AddNumberToObject(item, "z", entity->z);
            cJSON_AddNumberToObject(item, "incarnation", entity->incarnation);
            cJSON_AddNumberToObject(item, "offloads", entity->real->offloads);
            cJSON_AddNumberToObject(item, "haunts", entity->real->haunt_count);
            cJSON_AddNumberToObject(item, "baseapp", (double)entity->real->baseapp_id);
            entity_timer_state timers[8];
            size_t timer_count = entity_timers_of(c->timers, entity->id, now_us, timers, 8);
            cJSON *timer_list = cJSON_AddArrayToObject(item, "timers");
            for (size_t t = 0; t < timer_count && t < 8; t++) {
                cJSON *timer = cJSON_CreateObject();
                cJSON_AddNumberToObject(timer, "tag", timers[t].tag);
                cJSON_AddNumberToObject(timer, "remaining_us", (double)timers[t].remaining_us);
                cJSON_AddNumberToObject(timer, "interval_us", (double)timers[t].interval_us);
                cJSON_AddItemToArray(timer_list, timer);
            }
            cJSON_AddItemToObject(item, "properties", entity_state_to_json(entity->state, NULL));
            cJSON_AddItemToArray(entities, item);
            reals++;
        }
    }
    char problem[512];
    int rc = json_file_write(path, root, problem, sizeof problem);
    cJSON_Delete(root);
    if (rc != 0) {
        log_warn("state dump: %s", problem);
        return -1;
    }
    log_info("state dump: %zu reals written to '%s'", reals, path);
    return 0;
}
