/* map_entities.c -- claims each mapped space's entities for this cellapp
 * and spawns them (map_entities.h): the claim in Redis, reading the map's
 * "entities", the two spawn passes, and the errors. It owns the per-space
 * claim state of each mapped space. */
#include "map_entities.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "clock.h"
#include "entity_state_json.h"
#include "json_file.h"
#include "map_keyvalues.h"
#include "log.h"
#include "redis_keys.h"

/* Where a space's map stands on this cellapp. */
typedef enum map_claim_state {
    MAP_CLAIM_NONE,     /* not asked yet */
    MAP_CLAIM_ASKING,   /* the SET NX is in flight */
    MAP_CLAIM_OURS,     /* ours to spawn (spawned, or waiting for ids) */
    MAP_CLAIM_DONE,     /* spawned, by us or a live cellapp: we renew it */
    MAP_CLAIM_WAITING,  /* held by a cellapp not (yet) seen alive: it lapses, or its holder shows up */
    MAP_CLAIM_CHECKING, /* the GET of the holder is in flight */
} map_claim_state;

struct map_claim {
    char space[SPACE_LAYOUT_NAME_MAX];
    map_claim_state state;
    uint64_t renewed_ms; /* monotonic, the claim's last renewal from here */
};

struct map_entities {
    map_entities_context context;
    struct map_claim *claims; /* one per mapped space, in the order of maps */
    size_t claim_count;       /* those named so far */
};

/* One entity of the map while it spawns. */
typedef struct map_entity {
    const cJSON *json;
    const entity_def_class *cls;
    const char *name, *parent;
    uint64_t id; /* once created */
    bool spawned;
} map_entity;

static const char *map_entities_string(const cJSON *object, const char *key) {
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(object, key);
    return cJSON_IsString(item) ? item->valuestring : NULL;
}

/* Checks one entity: its class and keyvalues. Returns 0, or -1 with why. */
static int map_entities_check(map_entities *m, map_entity *e, char *why, size_t why_size) {
    const char *classname = map_entities_string(e->json, "classname");
    e->cls = classname ? entity_def_registry_find_class(m->context.definitions, classname) : NULL;
    if (!classname) {
        snprintf(why, why_size, "it has no \"classname\"");
        return -1;
    }
    if (!e->cls) {
        snprintf(why, why_size, "class '%s' is not in the entity definitions", classname);
        return -1;
    }
    e->name = map_entities_string(e->json, "name");
    e->parent = map_entities_string(e->json, "parent");
    if (e->name && strlen(e->name) >= ENTITY_IO_NAME_MAX) {
        snprintf(why, why_size, "its name is longer than %d bytes", ENTITY_IO_NAME_MAX - 1);
        return -1;
    }
    const cJSON *origin = cJSON_GetObjectItemCaseSensitive(e->json, "origin");
    if (origin && (!cJSON_IsArray(origin) || cJSON_GetArraySize(origin) != 3)) {
        snprintf(why, why_size, "key 'origin' is not [x, y, z]");
        return -1;
    }
    const cJSON *keyvalues = cJSON_GetObjectItemCaseSensitive(e->json, "keyvalues");
    if (keyvalues && map_keyvalues_check(m->context.game, e->cls, keyvalues, why, why_size) != 0) return -1;
    const cJSON *outputs = cJSON_GetObjectItemCaseSensitive(e->json, "outputs");
    const cJSON *output;
    size_t index = 0;
    if (outputs && !cJSON_IsArray(outputs)) {
        snprintf(why, why_size, "\"outputs\" is not an array");
        return -1;
    }
    cJSON_ArrayForEach(output, outputs) {
        const cJSON *delay = cJSON_GetObjectItemCaseSensitive(output, "delay");
        const cJSON *times = cJSON_GetObjectItemCaseSensitive(output, "times");
        entity_io_outputs check = {0};
        int rc = entity_io_connect(&check, map_entities_string(output, "output"), map_entities_string(output, "target"),
                                   map_entities_string(output, "input"), map_entities_string(output, "parameter"), 0,
                                   times && cJSON_IsNumber(times) ? (int32_t)times->valuedouble : -1);
        entity_io_outputs_free(&check);
        if (rc != 0 || (delay && (!cJSON_IsNumber(delay) || !(delay->valuedouble >= 0))) ||
            (times && !cJSON_IsNumber(times))) {
            snprintf(why, why_size,
                     "outputs[%zu] needs \"output\", \"target\" and \"input\" names, a delay in seconds "
                     "of 0 or more and times -1 or above 0",
                     index);
            return -1;
        }
        index++;
    }
    return 0;
}

/* Pass 1 for one entity: the real, its name, keyvalues and outputs. */
static int map_entities_create_one(map_entities *m, cell *c, map_entity *e) {
    uint64_t id;
    if (id_block_take(m->context.ids, &id) != 0) return -1;
    float origin[3] = {0, 0, 0};
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(e->json, "origin");
    for (int k = 0; o && k < 3; k++) {
        const cJSON *v = cJSON_GetArrayItem(o, k);
        origin[k] = cJSON_IsNumber(v) ? (float)v->valuedouble : 0;
    }
    const cJSON *yaw = cJSON_GetObjectItemCaseSensitive(e->json, "yaw");
    cell_entity *entity = reals_create_real(m->context.reals, c, id, e->cls, origin[0], origin[1], origin[2],
                                            cJSON_IsNumber(yaw) ? (float)yaw->valuedouble : 0, 0);
    if (!entity) log_panic("map entity %" PRIu64 ": a fresh id is taken", id);
    if (e->name) snprintf(entity->real->name, sizeof entity->real->name, "%s", e->name);
    const cJSON *keyvalues = cJSON_GetObjectItemCaseSensitive(e->json, "keyvalues");
    if (keyvalues) map_keyvalues_apply(m->context.game, entity, keyvalues);
    const cJSON *output;
    cJSON_ArrayForEach(output, cJSON_GetObjectItemCaseSensitive(e->json, "outputs")) {
        const cJSON *delay = cJSON_GetObjectItemCaseSensitive(output, "delay");
        const cJSON *times = cJSON_GetObjectItemCaseSensitive(output, "times");
        entity_io_connect(
            &entity->real->outputs, map_entities_string(output, "output"), map_entities_string(output, "target"),
            map_entities_string(output, "input"), map_entities_string(output, "parameter"),
            delay ? (uint32_t)llround(delay->valuedouble * 1000.0) : 0, times ? (int32_t)times->valuedouble : -1);
    }
    e->id = id;
    return 0;
}

/* Pass 2, parents first: an entity's created hook runs once its parent's
 * has (a parent the map does not name is reported, and counts as none). */
static void map_entities_spawn_order(map_entities *m, map_entity *entities, size_t count, const char *path) {
    size_t spawned = 0, created = 0;
    for (size_t i = 0; i < count; i++) created += entities[i].id != 0; /* the skipped ones never spawn */
    while (spawned < created) {
        size_t progress = 0;
        for (size_t i = 0; i < count; i++) {
            map_entity *e = &entities[i];
            if (e->spawned || !e->id) continue;
            bool parent_waits = false;
            for (size_t k = 0; e->parent && k < count && !parent_waits; k++)
                parent_waits = k != i && entities[k].name && entities[k].id && !entities[k].spawned &&
                               strcmp(entities[k].name, e->parent) == 0;
            if (parent_waits) continue;
            e->spawned = true;
            cell_entity *real = spaces_find_entity(m->context.spaces, e->id);
            if (real) game_host_created(m->context.game, real);
            progress++;
            spawned++;
        }
        if (progress == 0) {
            /* A cycle of parents: the rest spawn in map order. */
            log_warn("map %s: its entities' parents form a cycle: the rest spawn in the map's order", path);
            for (size_t i = 0; i < count; i++)
                if (!entities[i].spawned && entities[i].id) {
                    entities[i].spawned = true;
                    cell_entity *real = spaces_find_entity(m->context.spaces, entities[i].id);
                    if (real) game_host_created(m->context.game, real);
                    spawned++;
                }
            break;
        }
    }
}

/* Spawns the map of `space`. Returns 0 when done, -1 to try again next
 * tick (not enough entity ids yet). */
static int map_entities_spawn(map_entities *m, const char *space, const char *path) {
    cell *c = spaces_cell(m->context.spaces, space, true);
    if (!c || !m->context.ids) return -1;
    size_t length;
    char problem[256];
    char *text = json_file_read(path, &length, problem, sizeof problem);
    cJSON *root = text ? json_file_parse(text, length, problem, sizeof problem) : NULL;
    free(text);
    if (!root) {
        log_warn("map %s: %s: no entities spawned", path, problem);
        return 0;
    }
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(root, "entities");
    size_t count = cJSON_IsArray(list) ? (size_t)cJSON_GetArraySize(list) : 0;
    map_entity *entities = xcalloc(count ? count : 1, sizeof *entities);
    size_t i = 0, skipped = 0, created = 0;
    const cJSON *item;
    cJSON_ArrayForEach(item, list) {
        map_entity *e = &entities[i];
        e->json = item;
        char why[320];
        if (!cJSON_IsObject(item) || map_entities_check(m, e, why, sizeof why) != 0) {
            const char *name = cJSON_IsObject(item) ? map_entities_string(item, "name") : NULL;
            log_warn("map %s: entity %zu%s%s%s: %s: skipped", path, i, name ? " ('" : "", name ? name : "",
                     name ? "')" : "", cJSON_IsObject(item) ? why : "it is not an object");
            e->cls = NULL;
            skipped++;
        } else if (map_entities_create_one(m, c, e) != 0) {
            /* Out of ids: what was made goes; all of it again next tick. */
            for (size_t k = 0; k < i; k++)
                if (entities[k].id) {
                    cell_entity *made = spaces_find_entity(m->context.spaces, entities[k].id);
                    if (made) reals_destroy(m->context.reals, made);
                }
            id_block_refill(m->context.ids);
            free(entities);
            cJSON_Delete(root);
            return -1;
        } else {
            created++;
        }
        i++;
    }
    id_block_refill(m->context.ids);
    map_entities_spawn_order(m, entities, count, path);
    log_info("map %s: %zu entities spawned in space '%s', %zu skipped", path, created, space, skipped);
    free(entities);
    cJSON_Delete(root);
    return 0;
}

/* A claim command in flight, for the space it concerns. */
typedef struct map_claim_request {
    map_entities *maps;
    char space[SPACE_LAYOUT_NAME_MAX];
} map_claim_request;

static struct map_claim *map_entities_claim_of(map_entities *m, const char *space, map_claim_state state) {
    for (size_t i = 0; i < m->claim_count; i++)
        if (strcmp(m->claims[i].space, space) == 0 && m->claims[i].state == state) return &m->claims[i];
    return NULL;
}

static void map_entities_on_claim(redis_client *redis, redisReply *reply, void *user_data) {
    (void)redis;
    map_claim_request *request = user_data;
    struct map_claim *claim = map_entities_claim_of(request->maps, request->space, MAP_CLAIM_ASKING);
    if (claim) {
        if (!reply || reply->type == REDIS_REPLY_ERROR)
            claim->state = MAP_CLAIM_NONE; /* ask again */
        else
            claim->state = reply->type == REDIS_REPLY_STATUS ? MAP_CLAIM_OURS : MAP_CLAIM_WAITING;
    }
    free(request);
}

/* Who holds a claim we did not get: a live cellapp (this cluster's: its
 * entities live, we renew it with it), nobody any more (we claim it), or a
 * process not alive (a stopped cluster's: we let it lapse). */
static void map_entities_on_holder(redis_client *redis, redisReply *reply, void *user_data) {
    (void)redis;
    map_claim_request *request = user_data;
    map_entities *m = request->maps;
    struct map_claim *claim = map_entities_claim_of(m, request->space, MAP_CLAIM_CHECKING);
    if (claim) {
        if (reply && reply->type == REDIS_REPLY_NIL) {
            claim->state = MAP_CLAIM_NONE;
        } else if (reply && reply->type == REDIS_REPLY_STRING) {
            uint64_t holder = strtoull(reply->str, NULL, 10);
            bool alive =
                holder == m->context.self->process_id || (m->context.peers && peer_set_is_up(m->context.peers, holder));
            claim->state = alive ? MAP_CLAIM_DONE : MAP_CLAIM_WAITING;
            if (!alive) {
                log_debug("space '%s': its map was claimed by process %" PRIu64 ", not alive: waiting for the claim "
                          "to lapse",
                          claim->space, holder);
                /* A claim without a lease (an older Tessera's) would never
                 * lapse: it gets one now. */
                char key[REDIS_KEY_MAX];
                redis_key_space_map(key, m->context.cluster_name, claim->space);
                redis_client_command(m->context.redis, NULL, NULL, "PEXPIRE %s %d NX", key, MAP_CLAIM_TTL_MS);
            }
        } else {
            claim->state = MAP_CLAIM_WAITING;
        }
    }
    free(request);
}

map_entities *map_entities_create(const map_entities_context *context) {
    map_entities *m = xcalloc(1, sizeof *m);
    m->context = *context;
    m->claims = xcalloc(context->maps->count ? context->maps->count : 1, sizeof *m->claims);
    return m;
}

void map_entities_tick(map_entities *m) {
    const config_group *maps = m->context.maps;
    if (!m->context.self->process_id || !m->context.redis) return;
    for (size_t i = 0; i < maps->count; i++) {
        struct map_claim *claim = &m->claims[i];
        const char *space = maps->items[i].name, *path = maps->items[i].value;
        if (!claim->space[0]) {
            snprintf(claim->space, sizeof claim->space, "%s", space);
            m->claim_count = i + 1;
        }
        if (claim->state == MAP_CLAIM_OURS) {
            if (map_entities_spawn(m, space, path) == 0) claim->state = MAP_CLAIM_DONE;
            continue;
        }
        if (claim->state == MAP_CLAIM_ASKING || claim->state == MAP_CLAIM_CHECKING) continue;
        /* Only a cellapp with a cell of the space claims it, or renews it. */
        cell *c = spaces_cell(m->context.spaces, space, false);
        if (!c || !c->has_region) continue;
        char key[REDIS_KEY_MAX], holder[24];
        redis_key_space_map(key, m->context.cluster_name, space);
        snprintf(holder, sizeof holder, "%" PRIu64, m->context.self->process_id);
        uint64_t now_ms = clock_monotonic_us() / 1000;
        if (claim->state == MAP_CLAIM_DONE) {
            /* The map's entities live while the space's cellapps do: they
             * keep the claim alive together. */
            if (now_ms - claim->renewed_ms < MAP_CLAIM_RENEW_MS) continue;
            claim->renewed_ms = now_ms;
            redis_client_command(m->context.redis, NULL, NULL, "SET %s %s PX %d", key, holder, MAP_CLAIM_TTL_MS);
            continue;
        }
        if (claim->state == MAP_CLAIM_WAITING && now_ms - claim->renewed_ms < MAP_CLAIM_RENEW_MS) continue;
        claim->renewed_ms = now_ms;
        map_claim_request *request = xmalloc(sizeof *request);
        request->maps = m;
        snprintf(request->space, sizeof request->space, "%s", space);
        if (claim->state == MAP_CLAIM_WAITING) {
            if (redis_client_command(m->context.redis, map_entities_on_holder, request, "GET %s", key) != 0) {
                free(request);
                continue;
            }
            claim->state = MAP_CLAIM_CHECKING;
            continue;
        }
        if (redis_client_command(m->context.redis, map_entities_on_claim, request, "SET %s %s NX PX %d", key, holder,
                                 MAP_CLAIM_TTL_MS) != 0) {
            free(request);
            continue;
        }
        claim->state = MAP_CLAIM_ASKING;
    }
}

void map_entities_free(map_entities *m) {
    if (!m) return;
    free(m->claims);
    free(m);
}
