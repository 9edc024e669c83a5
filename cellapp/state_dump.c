/* state_dump.c -- writes the cellapp's reals and their properties to a JSON
 * file on request (SIGUSR1), for operators chasing a bug and for the
 * integration test that checks what clients hold against what cells hold.
 * json_file_write renames it into place whole. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "cellapp.h"
#include "entity_state_json.h"
#include "json_file.h"
#include "log.h"

int state_dump_write(const cellapp *app) {
    const char *path = app->settings.state_dump_path;
    if (!path[0]) {
        log_warn("state dump requested, but state_dump_path is not set");
        return -1;
    }
    const space *sp = &app->space;
    cJSON *root = cJSON_CreateObject();
    cJSON_AddNumberToObject(root, "process_id", (double)app->process_id);
    cJSON_AddNumberToObject(root, "tick", sp->tick);
    cJSON *entities = cJSON_AddArrayToObject(root, "entities");
    for (size_t i = 0; i < sp->count; i++) {
        const cell_entity *entity = sp->by_index[i];
        if (entity->kind != CELL_ENTITY_REAL || entity->destroyed) continue;
        cJSON *item = cJSON_CreateObject();
        cJSON_AddNumberToObject(item, "id", (double)entity->id);
        cJSON_AddStringToObject(item, "class", entity->cls->name);
        cJSON_AddNumberToObject(item, "x", entity->x);
        cJSON_AddNumberToObject(item, "y", entity->y);
        cJSON_AddNumberToObject(item, "z", entity->z);
        cJSON_AddItemToObject(item, "properties", entity_state_to_json(entity->state, NULL));
        cJSON_AddItemToArray(entities, item);
    }
    char problem[512];
    int rc = json_file_write(path, root, problem, sizeof problem);
    cJSON_Delete(root);
    if (rc != 0) {
        log_warn("state dump: %s", problem);
        return -1;
    }
    log_info("state dump: %zu reals written to '%s'", (size_t)sp->real_count, path);
    return 0;
}
