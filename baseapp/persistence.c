/* persistence.c -- players' entities in Redis (writeToDB).
 *
 * The stored form is one JSON string per entity, at
 * tessera:<cluster>:entity:<class>:<account> (redis_keys.h):
 *
 *   {"format": 1, "class": "Avatar", "entity_id": 1234, "saved_ms": <wall ms>,
 *    "space": "default", "position": [x, y, z], "yaw": 0.5,
 *    "properties": {<persistent property name>: value, ...}}
 *
 * Properties are stored by name (common/entity_state_json.h), so the
 * stored form survives changes to the definitions: a property added since
 * takes its default, and one removed (or no longer persistent) is dropped
 * with a log line. The persistent cell properties and the position come
 * from the cell part: a save first asks it for a CellBackup (BackupRequest,
 * or DestroyCellEntity with backup at the end), then writes; a backup that
 * does not come within backup_timeout_ms is written from the last one.
 *
 * Writes are never silently lost: one write per proxy is in flight at a
 * time (a save asked meanwhile follows it), a failed write is reported to
 * the game (base_game_written) and retried every write_retry_ms with
 * the latest state, and a proxy that is going is freed only once its last
 * write is acknowledged. Redis itself keeps acknowledged writes across a
 * restart when it runs with appendonly and appendfsync always (the scripts'
 * Redis does). */
#include <inttypes.h>
#include <math.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baseapp.h"
#include "clock.h"
#include "entity_state_json.h"
#include "log.h"
#include "property_codec.h"
#include "redis_keys.h"

#define PERSISTENCE_FORMAT 1

static char *persistence_key(char *out, const baseapp *app, const char *class_name, const char *account) {
    return redis_key_stored_entity(out, app->settings.process.cluster_name, class_name, account);
}

/* The persistent properties of `cls` (only_cell: those the cell holds). */
static entity_state_mask persistence_mask(const entity_def_class *cls, bool only_cell) {
    entity_state_mask mask = {{0}};
    for (size_t p = 0; p < cls->property_count; p++) {
        const entity_def_property *property = &cls->properties[p];
        if (property->persistent && (!only_cell || property->audience.on_cell))
            entity_state_mask_add(&mask, property->id);
    }
    return mask;
}

/* ---- loading ---------------------------------------------------------------- */

typedef struct persistence_load_request {
    baseapp *app;
    char class_name[ENTITY_DEF_NAME_MAX + 1];
    char name[72];
    persistence_loaded callback;
    void *context;
} persistence_load_request;

static void persistence_on_loaded(redis_client *redis, redisReply *reply, void *user_data) {
    persistence_load_request *request = user_data;
    (void)redis;
    if (!reply || (reply->type != REDIS_REPLY_STRING && reply->type != REDIS_REPLY_NIL)) {
        request->callback(request->app, PERSISTENCE_UNAVAILABLE, NULL, request->context);
        free(request);
        return;
    }
    if (reply->type == REDIS_REPLY_NIL) {
        request->callback(request->app, PERSISTENCE_NONE, NULL, request->context);
        free(request);
        return;
    }
    cJSON *stored = cJSON_ParseWithLength(reply->str, reply->len);
    const cJSON *class_name = stored ? cJSON_GetObjectItemCaseSensitive(stored, "class") : NULL;
    const cJSON *properties = stored ? cJSON_GetObjectItemCaseSensitive(stored, "properties") : NULL;
    if (!cJSON_IsObject(stored) || !cJSON_IsString(class_name) || !cJSON_IsObject(properties) ||
        strcmp(class_name->valuestring, request->class_name) != 0) {
        log_error("the stored %s '%s' (%zu bytes) does not read as one: refused, and the record left as it is",
                  request->class_name, request->name, (size_t)reply->len);
        request->callback(request->app, PERSISTENCE_DAMAGED, NULL, request->context);
    } else {
        request->callback(request->app, PERSISTENCE_FOUND, stored, request->context);
    }
    cJSON_Delete(stored);
    free(request);
}

int persistence_load(baseapp *app, const char *class_name, const char *name, persistence_loaded callback,
                     void *context) {
    char key[REDIS_KEY_MAX];
    persistence_key(key, app, class_name, name);
    persistence_load_request *request = xcalloc(1, sizeof *request);
    request->app = app;
    snprintf(request->class_name, sizeof request->class_name, "%s", class_name);
    snprintf(request->name, sizeof request->name, "%s", name);
    request->callback = callback;
    request->context = context;
    if (redis_client_command(app->redis, persistence_on_loaded, request, "GET %s", key) != 0) {
        free(request);
        return -1;
    }
    return 0;
}

typedef struct persistence_problem_context {
    const proxy *player;
} persistence_problem_context;

static void persistence_on_problem(const char *name, const char *why, void *context) {
    const proxy *player = ((persistence_problem_context *)context)->player;
    log_warn("entity %" PRIu64 " (account '%s'): stored property '%s' %s: dropped", player->entity_id, player->account,
             name, why);
}

static bool persistence_read_position(const cJSON *item, double out[3]) {
    if (!cJSON_IsArray(item) || cJSON_GetArraySize(item) != 3) return false;
    for (int i = 0; i < 3; i++) {
        const cJSON *value = cJSON_GetArrayItem(item, i);
        if (!cJSON_IsNumber(value) || !isfinite(value->valuedouble)) return false;
        out[i] = value->valuedouble;
    }
    return true;
}

void persistence_restore(proxy *player, const cJSON *stored) {
    baseapp *app = player->app;
    struct proxy_persistence *saved = &player->persistence;
    uint64_t interval_us = (uint64_t)app->settings.autosave_interval_ms * 1000u;
    /* Spread the autosaves over the interval, so a crowd that logged in
     * together does not write together. */
    saved->next_autosave_us =
        clock_monotonic_us() + interval_us / 2 + (uint64_t)(randombytes_uniform(1000)) * (interval_us / 2 / 1000 + 1);
    if (!stored) return;
    saved->loaded = true;
    entity_state_mask persistent = persistence_mask(player->cls, false);
    persistence_problem_context context = {player};
    int restored = entity_state_from_json(player->properties, cJSON_GetObjectItemCaseSensitive(stored, "properties"),
                                          &persistent, persistence_on_problem, &context);
    const cJSON *space = cJSON_GetObjectItemCaseSensitive(stored, "space");
    if (cJSON_IsString(space) && strlen(space->valuestring) < sizeof saved->space_name)
        snprintf(saved->space_name, sizeof saved->space_name, "%s", space->valuestring);
    saved->has_position =
        persistence_read_position(cJSON_GetObjectItemCaseSensitive(stored, "position"), saved->position);
    const cJSON *yaw = cJSON_GetObjectItemCaseSensitive(stored, "yaw");
    saved->yaw = cJSON_IsNumber(yaw) && isfinite(yaw->valuedouble) ? (float)yaw->valuedouble : 0.0f;
    log_debug("entity %" PRIu64 " (account '%s'): restored %d properties%s", player->entity_id, player->account,
              restored, saved->has_position ? " and its position" : "");
}

/* ---- saving ----------------------------------------------------------------- */

void persistence_save(proxy *player) {
    baseapp *app = player->app;
    struct proxy_persistence *saved = &player->persistence;
    if (player->state != PROXY_LIVE) {
        persistence_write(player);
        return;
    }
    if (saved->backup_request) return; /* the write follows the backup asked for */
    Tessera__Cluster__BackupRequest backup = TESSERA__CLUSTER__BACKUP_REQUEST__INIT;
    backup.request = ++app->next_backup_request;
    Tessera__Cluster__CellMessage message = TESSERA__CLUSTER__CELL_MESSAGE__INIT;
    message.body_case = TESSERA__CLUSTER__CELL_MESSAGE__BODY_BACKUP;
    message.backup = &backup;
    if (cell_link_send(player, &message) != 0) {
        persistence_write(player);
        return;
    }
    saved->backup_request = backup.request;
    saved->backup_deadline_us = clock_monotonic_us() + (uint64_t)app->settings.backup_timeout_ms * 1000u;
}

void persistence_on_backup(proxy *player, const Tessera__Cluster__CellBackup *backup) {
    struct proxy_persistence *saved = &player->persistence;
    if (!saved->backup_request || backup->request != saved->backup_request) return; /* one given up on */
    saved->backup_request = 0;
    entity_state_mask on_cell = persistence_mask(player->cls, true);
    bit_reader reader;
    bit_reader_init(&reader, backup->properties.data, backup->properties.len);
    int rc = property_codec_decode_changes(&reader, player->properties, &on_cell, NULL);
    if (rc != 0)
        log_warn("entity %" PRIu64 " (account '%s'): its cell backup does not decode (%s): the last one is kept",
                 player->entity_id, player->account, property_codec_strerror(rc));
    if (backup->space_name && strlen(backup->space_name) < sizeof saved->space_name)
        snprintf(saved->space_name, sizeof saved->space_name, "%s", backup->space_name);
    if (backup->position && isfinite(backup->position->x) && isfinite(backup->position->y) &&
        isfinite(backup->position->z)) {
        saved->position[0] = backup->position->x;
        saved->position[1] = backup->position->y;
        saved->position[2] = backup->position->z;
        saved->yaw = isfinite(backup->yaw) ? backup->yaw : 0.0f;
        saved->has_position = true;
    }
    if (backup->destroyed) cell_address_clear(&player->cell);
    persistence_write(player);
}

/* The proxy's state as the stored form, printed (caller frees). */
static char *persistence_encode(const proxy *player) {
    const struct proxy_persistence *saved = &player->persistence;
    entity_state_mask persistent = persistence_mask(player->cls, false);
    cJSON *root = cJSON_CreateObject();
    cJSON_AddNumberToObject(root, "format", PERSISTENCE_FORMAT);
    cJSON_AddStringToObject(root, "class", player->cls->name);
    cJSON_AddNumberToObject(root, "entity_id", (double)player->entity_id);
    cJSON_AddNumberToObject(root, "saved_ms", (double)(clock_wall_us() / 1000));
    cJSON_AddStringToObject(root, "space", saved->space_name);
    if (saved->has_position) {
        cJSON *position = cJSON_AddArrayToObject(root, "position");
        for (int i = 0; i < 3; i++) cJSON_AddItemToArray(position, cJSON_CreateNumber(saved->position[i]));
        cJSON_AddNumberToObject(root, "yaw", saved->yaw);
    }
    cJSON_AddItemToObject(root, "properties", entity_state_to_json(player->properties, &persistent));
    char *printed = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!printed) log_panic("persistence: out of memory printing an entity");
    return printed;
}

typedef struct persistence_write_request {
    baseapp *app;
    entity_handle proxy_handle;
    uint64_t sent_us;
} persistence_write_request;

static void persistence_write_failed(proxy *player, const char *detail) {
    baseapp *app = player->app;
    struct proxy_persistence *saved = &player->persistence;
    saved->write_failures++;
    saved->retry_at_us = clock_monotonic_us() + (uint64_t)app->settings.write_retry_ms * 1000u;
    app->write_failures++;
    log_warn("entity %" PRIu64 " (account '%s'): write %u failed (%s): retrying in %lld ms", player->entity_id,
             player->account, saved->write_failures, detail, (long long)app->settings.write_retry_ms);
    base_game_written(player->app->game, player, false, detail);
}

static void persistence_on_written(redis_client *redis, redisReply *reply, void *user_data) {
    persistence_write_request *request = user_data;
    (void)redis;
    baseapp *app = request->app;
    proxy *player = entity_list_get(app->proxies, request->proxy_handle);
    uint64_t took_us = clock_monotonic_us() - request->sent_us;
    free(request);
    if (!player) return;
    struct proxy_persistence *saved = &player->persistence;
    saved->write_in_flight = false;
    if (!reply || reply->type != REDIS_REPLY_STATUS) {
        persistence_write_failed(player, !reply                             ? "the connection to Redis was lost"
                                         : reply->type == REDIS_REPLY_ERROR ? reply->str
                                                                            : "an unexpected reply");
        return;
    }
    saved->write_failures = 0;
    saved->writes++;
    app->writes++;
    latency_histogram_add(&app->write_latency, took_us);
    base_game_written(player->app->game, player, true, NULL);
    if (saved->write_again) {
        saved->write_again = false;
        persistence_write(player);
        return;
    }
    if (player->state == PROXY_DESTROYING && !saved->backup_request) proxy_free(player);
}

void persistence_write(proxy *player) {
    baseapp *app = player->app;
    struct proxy_persistence *saved = &player->persistence;
    if (saved->write_in_flight) {
        saved->write_again = true;
        return;
    }
    char key[REDIS_KEY_MAX];
    persistence_key(key, app, player->cls->name, player->account);
    char *value = persistence_encode(player);
    persistence_write_request *request = xcalloc(1, sizeof *request);
    request->app = app;
    request->proxy_handle = player->handle;
    request->sent_us = clock_monotonic_us();
    const char *argv[3] = {"SET", key, value};
    size_t lengths[3] = {3, strlen(key), strlen(value)};
    int rc = redis_client_command_argv(app->redis, persistence_on_written, request, 3, argv, lengths);
    free(value);
    if (rc != 0) {
        free(request);
        persistence_write_failed(player, "Redis is not connected");
        return;
    }
    saved->write_in_flight = true;
}

void persistence_sweep(proxy *player, uint64_t now_us) {
    baseapp *app = player->app;
    struct proxy_persistence *saved = &player->persistence;
    if (saved->backup_request && now_us >= saved->backup_deadline_us) {
        log_warn("entity %" PRIu64 " (account '%s'): no backup from its cell part within %lld ms: writing the last "
                 "one it sent",
                 player->entity_id, player->account, (long long)app->settings.backup_timeout_ms);
        saved->backup_request = 0;
        if (player->state == PROXY_DESTROYING) cell_address_clear(&player->cell);
        persistence_write(player);
        return;
    }
    if (saved->write_failures && !saved->write_in_flight && now_us >= saved->retry_at_us) {
        persistence_write(player);
        return;
    }
    if (app->settings.autosave_interval_ms > 0 && player->state == PROXY_LIVE && now_us >= saved->next_autosave_us) {
        saved->next_autosave_us = now_us + (uint64_t)app->settings.autosave_interval_ms * 1000u;
        persistence_save(player);
    }
}
