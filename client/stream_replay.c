/* stream_replay.c -- tessera-stream-replay: decodes a recorded session (the
 * frames one client received, as tessera-bots --record-file writes them)
 * with the C SDK and prints what the client ended up knowing, as JSON. It
 * is the reference the TypeScript SDK's golden tests compare with
 * (tests/golden/streams/), and, with --repeat, the C side of the decoding
 * benchmark.
 *
 *   tessera-stream-replay FILE [--repeat N]
 *
 * FILE holds frames as on a TCP connection: a 4-byte big-endian length,
 * then a ServerToClient body, from the server's hello on. Each is given to
 * tessera_client_process_frame, the SDK's seam for a client without a
 * socket. The output:
 *
 *   {"player": <the player's entity id>,
 *    "entities": [{"id", "class", "owner", "x", "y", "z", "yaw",
 *                  "properties": {...}}, ...],        sorted by id
 *    "events": [{"event", "source", "fields": {...}}, ...],   in order
 *    "calls": [{"entity", "method", "args": {...}}, ...]}     in order
 *
 * properties, fields and args in entity_state_json.h's shape; positions
 * and yaw as the float the SDK holds ("%.9g"). A frame the SDK refuses
 * (it closes the client) is an error: exit 1, naming the frame. With
 * --repeat N the file is decoded N times (a fresh client each) and the time
 * per frame goes to stderr (over the whole session, and over the frames
 * after the login reply: the world's stream without the definitions); the
 * JSON is the last decoding's. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <uv.h>

#include "clock.h"
#include "entity_state_json.h"
#include "frame.h"
#include "log.h"
#include "tessera_client.h"

/* What one decoding collected besides the view table. */
typedef struct replay {
    cJSON *events;
    cJSON *calls;
    bool closed;
    char close_reason[256];
    bool logged_in;      /* the login reply was taken */
    uint64_t world_us;   /* time spent on the frames after it (--repeat's second figure) */
    size_t world_frames; /* ... and how many */
} replay;

static void replay_add_id(cJSON *object, const char *name, uint64_t id) {
    char text[24];
    snprintf(text, sizeof text, "%" PRIu64, id);
    if (!cJSON_AddRawToObject(object, name, text)) log_panic("out of memory building the replay's JSON");
}

static void replay_add_float(cJSON *object, const char *name, float value) {
    char text[32];
    snprintf(text, sizeof text, "%.9g", (double)value);
    if (!cJSON_AddRawToObject(object, name, text)) log_panic("out of memory building the replay's JSON");
}

static void replay_on_event(tessera_client *client, const entity_def_method *event, uint64_t source_id,
                            const entity_state *fields) {
    replay *r = tessera_client_user_data(client);
    cJSON *item = cJSON_CreateObject();
    if (!item || !cJSON_AddStringToObject(item, "event", event->name))
        log_panic("out of memory building the replay's JSON");
    replay_add_id(item, "source", source_id);
    cJSON_AddItemToObject(item, "fields", entity_state_to_json(fields, NULL));
    cJSON_AddItemToArray(r->events, item);
}

static void replay_on_client_call(tessera_client *client, const tessera_client_entity *entity,
                                  const entity_def_method *method, const entity_state *args) {
    replay *r = tessera_client_user_data(client);
    cJSON *item = cJSON_CreateObject();
    if (!item) log_panic("out of memory building the replay's JSON");
    replay_add_id(item, "entity", entity->id);
    if (!cJSON_AddStringToObject(item, "method", method->name)) log_panic("out of memory building the replay's JSON");
    cJSON_AddItemToObject(item, "args", entity_state_to_json(args, NULL));
    cJSON_AddItemToArray(r->calls, item);
}

static void replay_on_closed(tessera_client *client, tessera_client_close_cause cause, const char *reason) {
    replay *r = tessera_client_user_data(client);
    (void)cause;
    r->closed = true;
    snprintf(r->close_reason, sizeof r->close_reason, "%s", reason ? reason : "");
}

static void replay_on_logged_in(tessera_client *client, const tessera_client_login_info *info) {
    replay *r = tessera_client_user_data(client);
    (void)info;
    r->logged_in = true;
}

static const tessera_client_callbacks replay_callbacks = {
    .on_logged_in = replay_on_logged_in,
    .on_client_call = replay_on_client_call,
    .on_event = replay_on_event,
    .on_closed = replay_on_closed,
};

static int replay_compare_ids(const void *a, const void *b) {
    uint64_t x = (*(const tessera_client_entity *const *)a)->id, y = (*(const tessera_client_entity *const *)b)->id;
    return x < y ? -1 : x > y;
}

/* The view table, sorted by id. */
static cJSON *replay_entities(const tessera_client *client) {
    size_t count = tessera_client_entity_count(client), cursor = 0, n = 0;
    /* An array of pointers to the SDK's entities. */
    typedef const tessera_client_entity *entity_pointer;
    entity_pointer *sorted = xcalloc(count ? count : 1, sizeof(entity_pointer));
    const tessera_client_entity *entity;
    while ((entity = tessera_client_entity_next(client, &cursor)) != NULL && n < count) sorted[n++] = entity;
    qsort(sorted, n, sizeof(entity_pointer), replay_compare_ids);
    cJSON *entities = cJSON_CreateArray();
    if (!entities) log_panic("out of memory building the replay's JSON");
    for (size_t i = 0; i < n; i++) {
        cJSON *item = cJSON_CreateObject();
        if (!item) log_panic("out of memory building the replay's JSON");
        replay_add_id(item, "id", sorted[i]->id);
        if (!cJSON_AddStringToObject(item, "class", sorted[i]->type) ||
            !cJSON_AddBoolToObject(item, "owner", sorted[i]->is_owner))
            log_panic("out of memory building the replay's JSON");
        replay_add_float(item, "x", sorted[i]->x);
        replay_add_float(item, "y", sorted[i]->y);
        replay_add_float(item, "z", sorted[i]->z);
        replay_add_float(item, "yaw", sorted[i]->yaw);
        cJSON_AddItemToObject(item, "properties", entity_state_to_json(sorted[i]->state, NULL));
        cJSON_AddItemToArray(entities, item);
    }
    free(sorted);
    return entities;
}

/* Decodes the frames once. Returns the JSON (when `json`), or NULL on a
 * frame the SDK refused (said on stderr). *frames: how many were given. */
static cJSON *replay_run(uv_loop_t *loop, const uint8_t *data, size_t size, bool json, size_t *frames,
                         uint64_t *world_us, size_t *world_frames) {
    replay r = {cJSON_CreateArray(), cJSON_CreateArray(), false, "", false, 0, 0};
    if (!r.events || !r.calls) log_panic("out of memory building the replay's JSON");
    tessera_client *client = tessera_client_create(loop, &replay_callbacks, &r);
    cJSON *root = NULL;
    size_t offset = 0;
    bool failed = false;
    *frames = 0;
    while (offset < size) {
        if (size - offset < FRAME_HEADER_BYTES) {
            fprintf(stderr, "tessera-stream-replay: %zu bytes after frame %zu: not a whole length\n", size - offset,
                    *frames);
            failed = true;
            break;
        }
        const uint8_t *h = data + offset;
        size_t length = (size_t)h[0] << 24 | (size_t)h[1] << 16 | (size_t)h[2] << 8 | h[3];
        if (length > size - offset - FRAME_HEADER_BYTES) {
            fprintf(stderr, "tessera-stream-replay: frame %zu says %zu bytes; %zu are left\n", *frames, length,
                    size - offset - FRAME_HEADER_BYTES);
            failed = true;
            break;
        }
        bool in_world = r.logged_in;
        uint64_t frame_started = in_world ? clock_monotonic_us() : 0;
        int processed = tessera_client_process_frame(client, h + FRAME_HEADER_BYTES, length);
        if (in_world) {
            r.world_us += clock_monotonic_us() - frame_started;
            r.world_frames++;
        }
        if (processed != 0) {
            /* It is closing: on_closed says why, and the client is freed
             * when it returns. */
            while (!r.closed) uv_run(loop, UV_RUN_ONCE);
            fprintf(stderr, "tessera-stream-replay: frame %zu (%zu bytes at offset %zu) closed the client: %s\n",
                    *frames, length, offset, r.close_reason[0] ? r.close_reason : "(no reason)");
            failed = true;
            break;
        }
        offset += FRAME_HEADER_BYTES + length;
        (*frames)++;
    }
    if (!failed && json) {
        root = cJSON_CreateObject();
        if (!root) log_panic("out of memory building the replay's JSON");
        const tessera_client_login_info *info = tessera_client_login_info_get(client);
        replay_add_id(root, "player", info ? info->entity_id : 0);
        cJSON_AddItemToObject(root, "entities", replay_entities(client));
        cJSON_AddItemToObject(root, "events", r.events);
        cJSON_AddItemToObject(root, "calls", r.calls);
        r.events = r.calls = NULL;
    }
    if (!r.closed) tessera_client_close(client);
    while (!r.closed) uv_run(loop, UV_RUN_ONCE);
    cJSON_Delete(r.events);
    cJSON_Delete(r.calls);
    *world_us += r.world_us;
    *world_frames += r.world_frames;
    if (failed) return NULL;
    return json ? root : cJSON_CreateNull();
}

static uint8_t *replay_read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "tessera-stream-replay: %s: %s\n", path, strerror(errno));
        return NULL;
    }
    size_t capacity = 1 << 16, length = 0;
    uint8_t *data = xmalloc(capacity);
    size_t n;
    while ((n = fread(data + length, 1, capacity - length, f)) > 0) {
        length += n;
        if (length == capacity) data = xrealloc(data, capacity *= 2);
    }
    bool error = ferror(f) != 0;
    if (fclose(f) != 0) error = true;
    if (error) {
        fprintf(stderr, "tessera-stream-replay: cannot read %s\n", path);
        free(data);
        return NULL;
    }
    *size = length;
    return data;
}

int main(int argc, char **argv) {
    const char *path = NULL;
    long repeat = 1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--repeat") == 0 && i + 1 < argc) {
            char *end;
            repeat = strtol(argv[++i], &end, 10);
            if (*end || repeat < 1 || repeat > 1000000) {
                fprintf(stderr, "tessera-stream-replay: --repeat wants 1..1000000, not '%s'\n", argv[i]);
                return 2;
            }
        } else if (argv[i][0] == '-' || path) {
            fprintf(stderr, "usage: tessera-stream-replay FILE [--repeat N]\n");
            return 2;
        } else {
            path = argv[i];
        }
    }
    if (!path) {
        fprintf(stderr, "usage: tessera-stream-replay FILE [--repeat N]\n");
        return 2;
    }
    log_set_level(LOG_LEVEL_ERROR);
    size_t size = 0;
    uint8_t *data = replay_read_file(path, &size);
    if (!data) return 1;
    uv_loop_t loop;
    if (uv_loop_init(&loop) != 0) {
        free(data);
        return 1;
    }
    cJSON *root = NULL;
    size_t frames = 0, world_frames = 0;
    uint64_t world_us = 0;
    uint64_t started = clock_monotonic_us();
    for (long i = 0; i < repeat; i++) {
        cJSON_Delete(root);
        root = replay_run(&loop, data, size, i == repeat - 1, &frames, &world_us, &world_frames);
        if (!root) break;
    }
    uint64_t elapsed = clock_monotonic_us() - started;
    int rc = 1;
    if (root) {
        char *text = cJSON_PrintUnformatted(root);
        if (!text) log_panic("out of memory printing the replay's JSON");
        printf("%s\n", text);
        free(text);
        if (repeat > 1)
            fprintf(stderr,
                    "tessera-stream-replay: %ld decodings of %zu frames (%zu bytes): %.3f us a frame; "
                    "%.3f us a frame after the login reply\n",
                    repeat, frames, size, (double)elapsed / ((double)repeat * (double)(frames ? frames : 1)),
                    (double)world_us / (double)(world_frames ? world_frames : 1));
        rc = 0;
    }
    cJSON_Delete(root);
    uv_run(&loop, UV_RUN_DEFAULT);
    if (uv_loop_close(&loop) != 0) fprintf(stderr, "tessera-stream-replay: the loop did not close\n");
    free(data);
    return rc;
}
