/* persistence.c -- bases in Redis (writeToDB): it owns the loads and
 * writes in flight and the write figures; the bases are base_entity.c's.
 *
 * The stored form is one JSON string per entity, at
 * tessera:<cluster>:entity:<class>:<name> (redis_keys.h):
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
 * Writes are never silently lost: one write per base is in flight at a
 * time (a save asked meanwhile follows it), a failed write is reported to
 * the game (the written hook) and retried every write_retry_ms with the
 * latest state, and a base that is going is freed only once its last write
 * is acknowledged (the finished callback). A write is fenced in Redis: it
 * is refused once the cluster declared the writing process dead (its id in
 * P dead), so a baseapp that stalled, was declared dead and whose bases
 * were restored elsewhere cannot overwrite their newer state with what it
 * sent before it knew. Redis itself keeps acknowledged writes across a
 * restart when it runs with appendonly and appendfsync always (the scripts'
 * Redis does). */
#include <inttypes.h>
#include <math.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "persistence.h"

#include "clock.h"
#include "entity_state_json.h"
#include "log.h"
#include "property_codec.h"
#include "redis_keys.h"

#define PERSISTENCE_FORMAT 1

struct persistence {
    persistence_context context;
    persistence_counters counters;
    uint64_t next_backup_request;
};

static char *persistence_key(char *out, const persistence *store, const char *class_name, const char *name) {
    return redis_key_stored_entity(out, store->context.settings->process.cluster_name, class_name, name);
}

persistence *persistence_create(const persistence_context *context) {
    persistence *store = xcalloc(1, sizeof *store);
    store->context = *context;
    latency_histogram_init(&store->counters.write_latency, 100, 10000000);
    return store;
}

void persistence_free(persistence *store) {
    if (!store) return;
    latency_histogram_close(&store->counters.write_latency);
    free(store);
}

const persistence_counters *persistence_figures(const persistence *store) { return &store->counters; }

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
    char class_name[ENTITY_DEF_NAME_MAX + 1];
    char name[72];
    persistence_loaded callback;
    void *context;
} persistence_load_request;

static void persistence_on_loaded(redis_client *redis, redisReply *reply, void *user_data) {
    persistence_load_request *request = user_data;
    (void)redis;
    if (!reply || (reply->type != REDIS_REPLY_STRING && reply->type != REDIS_REPLY_NIL)) {
        request->callback(PERSISTENCE_UNAVAILABLE, NULL, request->context);
        free(request);
        return;
    }
    if (reply->type == REDIS_REPLY_NIL) {
        request->callback(PERSISTENCE_NONE, NULL, request->context);
        free(request);
        return;
    }
    cJSON *stored = cJSON_ParseWithLength(reply->str, reply->len);
    const char *class_name = stored ? cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(stored, "class")) : NULL;
    const cJSON *properties = stored ? cJSON_GetObjectItemCaseSensitive(stored, "properties") : NULL;
    if (!cJSON_IsObject(stored) || !class_name || !cJSON_IsObject(properties) ||
        strcmp(class_name, request->class_name) != 0) {
        log_error("the stored %s '%s' (%zu bytes) does not read as one: refused, and the record left as it is",
                  request->class_name, request->name, (size_t)reply->len);
        request->callback(PERSISTENCE_DAMAGED, NULL, request->context);
    } else {
        request->callback(PERSISTENCE_FOUND, stored, request->context);
    }
    cJSON_Delete(stored);
    free(request);
}

int persistence_load(persistence *store, const char *class_name, const char *name, persistence_loaded callback,
                     void *context) {
    char key[REDIS_KEY_MAX];
    persistence_key(key, store, class_name, name);
    persistence_load_request *request = xcalloc(1, sizeof *request);
    snprintf(request->class_name, sizeof request->class_name, "%s", class_name);
    snprintf(request->name, sizeof request->name, "%s", name);
    request->callback = callback;
    request->context = context;
    if (redis_client_command(store->context.redis, persistence_on_loaded, request, "GET %s", key) != 0) {
        free(request);
        return -1;
    }
    return 0;
}

typedef struct persistence_problem_context {
    const base_entity *base;
} persistence_problem_context;

static void persistence_on_problem(const char *name, const char *why, void *context) {
    const base_entity *base = ((persistence_problem_context *)context)->base;
    log_warn("entity %" PRIu64 " (%s '%s'): stored property '%s' %s: dropped", base->entity_id, base->cls->name,
             base->name, name, why);
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

void persistence_restore(persistence *store, base_entity *base, const cJSON *stored) {
    base_persistence *saved = &base->persistence;
    uint64_t interval_us = (uint64_t)store->context.settings->autosave_interval_ms * 1000u;
    /* Spread the autosaves over the interval, so a crowd that logged in
     * together does not write together. */
    saved->next_autosave_us =
        clock_monotonic_us() + interval_us / 2 + (uint64_t)(randombytes_uniform(1000)) * (interval_us / 2 / 1000 + 1);
    if (!stored) return;
    saved->loaded = true;
    entity_state_mask persistent = persistence_mask(base->cls, false);
    persistence_problem_context context = {base};
    int restored = entity_state_from_json(base->properties, cJSON_GetObjectItemCaseSensitive(stored, "properties"),
                                          &persistent, persistence_on_problem, &context);
    const cJSON *space = cJSON_GetObjectItemCaseSensitive(stored, "space");
    if (cJSON_IsString(space) && strlen(space->valuestring) < sizeof saved->space_name)
        snprintf(saved->space_name, sizeof saved->space_name, "%s", space->valuestring);
    saved->has_position =
        persistence_read_position(cJSON_GetObjectItemCaseSensitive(stored, "position"), saved->position);
    const cJSON *yaw = cJSON_GetObjectItemCaseSensitive(stored, "yaw");
    saved->yaw = cJSON_IsNumber(yaw) && isfinite(yaw->valuedouble) ? (float)yaw->valuedouble : 0.0f;
    log_debug("entity %" PRIu64 " (%s '%s'): restored %d properties%s", base->entity_id, base->cls->name, base->name,
              restored, saved->has_position ? " and its position" : "");
}

/* ---- saving ----------------------------------------------------------------- */

/* Takes the persistent cell properties and the position from the base's
 * latest cell backup (CellSnapshot, at most cell_backup_period_ms old):
 * what is written when the cell part cannot answer (its cellapp died and
 * it is being restored, or it did not answer in time). Returns whether
 * there was one that decoded. */
static bool persistence_from_cell_backup(base_entity *base) {
    if (!base->backup.state) return false;
    Tessera__Cluster__CellEntityState *state =
        tessera__cluster__cell_entity_state__unpack(NULL, base->backup.length, base->backup.state);
    if (!state) return false;
    entity_state *cell = entity_state_create(base->cls);
    bit_reader reader;
    bit_reader_init(&reader, state->properties.data, state->properties.len);
    int rc = entity_state_decode_all(cell, &reader);
    if (rc == 0) {
        entity_state_mask on_cell = persistence_mask(base->cls, true);
        for (uint16_t p = 0; p < base->cls->property_count; p++)
            if (entity_state_mask_has(&on_cell, p)) entity_state_copy_property(base->properties, cell, p);
        base_persistence *saved = &base->persistence;
        if (state->space_name && strlen(state->space_name) < sizeof saved->space_name)
            snprintf(saved->space_name, sizeof saved->space_name, "%s", state->space_name);
        if (state->position && isfinite(state->position->x) && isfinite(state->position->y) &&
            isfinite(state->position->z)) {
            saved->position[0] = state->position->x;
            saved->position[1] = state->position->y;
            saved->position[2] = state->position->z;
            saved->yaw = isfinite(state->yaw) ? state->yaw : 0.0f;
            saved->has_position = true;
        }
    } else {
        log_warn("entity %" PRIu64 " (%s '%s'): its cell backup's properties do not decode (%s)", base->entity_id,
                 base->cls->name, base->name, entity_state_strerror(rc));
    }
    entity_state_free(cell);
    tessera__cluster__cell_entity_state__free_unpacked(state, NULL);
    return rc == 0;
}

void persistence_save(persistence *store, base_entity *base) {
    base_persistence *saved = &base->persistence;
    if (base->state != BASE_ENTITY_LIVE) {
        persistence_write(store, base);
        return;
    }
    if (base->cell.lost_since_us) {
        /* Its cellapp was declared dead and the cell part is being
         * restored: the backup is what there is. */
        persistence_from_cell_backup(base);
        persistence_write(store, base);
        return;
    }
    if (saved->backup_request) return; /* the write follows the backup asked for */
    Tessera__Cluster__BackupRequest backup = TESSERA__CLUSTER__BACKUP_REQUEST__INIT;
    backup.request = ++store->next_backup_request;
    Tessera__Cluster__CellMessage message = TESSERA__CLUSTER__CELL_MESSAGE__INIT;
    message.body_case = TESSERA__CLUSTER__CELL_MESSAGE__BODY_BACKUP;
    message.backup = &backup;
    if (cell_link_send(store->context.cells, base, &message) != 0) {
        persistence_write(store, base);
        return;
    }
    saved->backup_request = backup.request;
    saved->backup_deadline_us = clock_monotonic_us() + (uint64_t)store->context.settings->backup_timeout_ms * 1000u;
}

int persistence_destroy_cell(persistence *store, base_entity *base) {
    Tessera__Cluster__DestroyCellEntity destroy = TESSERA__CLUSTER__DESTROY_CELL_ENTITY__INIT;
    destroy.backup = true;
    destroy.request = ++store->next_backup_request;
    Tessera__Cluster__CellMessage message = TESSERA__CLUSTER__CELL_MESSAGE__INIT;
    message.body_case = TESSERA__CLUSTER__CELL_MESSAGE__BODY_DESTROY;
    message.destroy = &destroy;
    if (cell_link_send(store->context.cells, base, &message) != 0) return -1;
    /* The write follows the last backup (persistence_on_backup), or the
     * deadline (persistence_sweep). */
    base->persistence.backup_request = destroy.request;
    base->persistence.backup_deadline_us =
        clock_monotonic_us() + (uint64_t)store->context.settings->backup_timeout_ms * 1000u;
    return 0;
}

void persistence_on_backup(persistence *store, base_entity *base, const Tessera__Cluster__CellBackup *backup) {
    base_persistence *saved = &base->persistence;
    if (!saved->backup_request || backup->request != saved->backup_request) return; /* one given up on */
    saved->backup_request = 0;
    entity_state_mask on_cell = persistence_mask(base->cls, true);
    bit_reader reader;
    bit_reader_init(&reader, backup->properties.data, backup->properties.len);
    int rc = property_codec_decode_changes(&reader, base->properties, &on_cell, NULL);
    if (rc != 0)
        log_warn("entity %" PRIu64 " (%s '%s'): its cell backup does not decode (%s): the last one is kept",
                 base->entity_id, base->cls->name, base->name, property_codec_strerror(rc));
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
    if (backup->destroyed) cell_address_clear(&base->cell);
    persistence_write(store, base);
}

/* The base's state as the stored form, printed (caller frees). */
static char *persistence_encode(const base_entity *base) {
    const base_persistence *saved = &base->persistence;
    entity_state_mask persistent = persistence_mask(base->cls, false);
    cJSON *root = cJSON_CreateObject();
    cJSON_AddNumberToObject(root, "format", PERSISTENCE_FORMAT);
    cJSON_AddStringToObject(root, "class", base->cls->name);
    cJSON_AddNumberToObject(root, "entity_id", (double)base->entity_id);
    uint64_t saved_ms = clock_wall_us() / 1000;
    cJSON_AddNumberToObject(root, "saved_ms", (double)saved_ms);
    cJSON_AddStringToObject(root, "space", saved->space_name);
    if (saved->has_position) {
        cJSON *position = cJSON_AddArrayToObject(root, "position");
        for (int i = 0; i < 3; i++) cJSON_AddItemToArray(position, cJSON_CreateNumber(saved->position[i]));
        cJSON_AddNumberToObject(root, "yaw", saved->yaw);
    }
    cJSON_AddItemToObject(root, "properties", entity_state_to_json(base->properties, &persistent));
    char *printed = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!printed) log_panic("persistence: out of memory printing an entity");
    return printed;
}

typedef struct persistence_write_request {
    persistence *store;
    entity_handle base_handle;
    uint64_t sent_us;
} persistence_write_request;

static void persistence_write_failed(persistence *store, base_entity *base, const char *detail) {
    base_persistence *saved = &base->persistence;
    const baseapp_settings *settings = store->context.settings;
    saved->write_failures++;
    saved->retry_at_us = clock_monotonic_us() + (uint64_t)settings->write_retry_ms * 1000u;
    store->counters.write_failures++;
    log_warn("entity %" PRIu64 " (%s '%s'): write %u failed (%s): retrying in %lld ms", base->entity_id,
             base->cls->name, base->name, saved->write_failures, detail, (long long)settings->write_retry_ms);
    base_hooks_written(store->context.hooks, base, false, detail);
}

static void persistence_on_written(redis_client *redis, redisReply *reply, void *user_data) {
    persistence_write_request *request = user_data;
    (void)redis;
    persistence *store = request->store;
    base_entity *base = base_entities_get(store->context.bases, request->base_handle);
    uint64_t took_us = clock_monotonic_us() - request->sent_us;
    free(request);
    if (!base) return;
    base_persistence *saved = &base->persistence;
    saved->write_in_flight = false;
    if (!reply || reply->type != REDIS_REPLY_STATUS) {
        persistence_write_failed(store, base,
                                 !reply                             ? "the connection to Redis was lost"
                                 : reply->type == REDIS_REPLY_ERROR ? reply->str
                                                                    : "an unexpected reply");
        return;
    }
    saved->write_failures = 0;
    saved->writes++;
    store->counters.writes++;
    latency_histogram_add(&store->counters.write_latency, took_us);
    base_hooks_written(store->context.hooks, base, true, NULL);
    if (saved->write_again) {
        saved->write_again = false;
        persistence_write(store, base);
        return;
    }
    if (base->state == BASE_ENTITY_DESTROYING && !saved->backup_request && store->context.finished)
        store->context.finished(store->context.owner, base);
}

/* The write, unless the writer is in P dead. KEYS: the entity's key,
 * P dead. ARGV: the stored form, the writer's process id. */
static const char PERSISTENCE_WRITE_SCRIPT[] =
    "if redis.call('ZSCORE', KEYS[2], ARGV[2]) then\n"
    "  return redis.error_reply('FENCED this baseapp was declared dead: its bases live on another')\n"
    "end\n"
    "return redis.call('SET', KEYS[1], ARGV[1])\n";

void persistence_write(persistence *store, base_entity *base) {
    base_persistence *saved = &base->persistence;
    if (saved->write_in_flight) {
        saved->write_again = true;
        return;
    }
    char key[REDIS_KEY_MAX], dead_key[REDIS_KEY_MAX], writer[24];
    persistence_key(key, store, base->cls->name, base->name);
    redis_key_dead(dead_key, store->context.settings->process.cluster_name);
    snprintf(writer, sizeof writer, "%" PRIu64, store->context.self->process_id);
    char *value = persistence_encode(base);
    persistence_write_request *request = xcalloc(1, sizeof *request);
    request->store = store;
    request->base_handle = base->handle;
    request->sent_us = clock_monotonic_us();
    const char *argv[7] = {"EVAL", PERSISTENCE_WRITE_SCRIPT, "2", key, dead_key, value, writer};
    size_t lengths[7];
    for (size_t i = 0; i < 7; i++) lengths[i] = strlen(argv[i]);
    int rc = redis_client_command_argv(store->context.redis, persistence_on_written, request, 7, argv, lengths);
    free(value);
    if (rc != 0) {
        free(request);
        persistence_write_failed(store, base, "Redis is not connected");
        return;
    }
    saved->write_in_flight = true;
}

bool persistence_unwritten(const base_entity *base) {
    const base_persistence *saved = &base->persistence;
    return saved->write_in_flight || saved->write_failures || saved->backup_request ||
           base->state != BASE_ENTITY_DESTROYING;
}

void persistence_sweep(persistence *store, base_entity *base, uint64_t now_us) {
    const baseapp_settings *settings = store->context.settings;
    base_persistence *saved = &base->persistence;
    if (saved->backup_request && now_us >= saved->backup_deadline_us) {
        log_warn("entity %" PRIu64 " (%s '%s'): no backup from its cell part within %lld ms: writing what it has",
                 base->entity_id, base->cls->name, base->name, (long long)settings->backup_timeout_ms);
        saved->backup_request = 0;
        if (persistence_from_cell_backup(base))
            log_info("entity %" PRIu64 " (%s '%s'): written from its latest cell backup instead", base->entity_id,
                     base->cls->name, base->name);
        if (base->state == BASE_ENTITY_DESTROYING) cell_address_clear(&base->cell);
        persistence_write(store, base);
        return;
    }
    if (saved->write_failures && !saved->write_in_flight && now_us >= saved->retry_at_us) {
        persistence_write(store, base);
        return;
    }
    if (settings->autosave_interval_ms > 0 && base->state == BASE_ENTITY_LIVE && now_us >= saved->next_autosave_us) {
        saved->next_autosave_us = now_us + (uint64_t)settings->autosave_interval_ms * 1000u;
        persistence_save(store, base);
    }
}
