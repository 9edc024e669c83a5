/* bench_witness.c -- the whole per-client replication pipeline of a real
 * cell (cellapp/space, coord, witness, witness_budget, replication,
 * volatile_codec), with the demo game's Avatar (demo/entities): 2,000
 * entities walking, 500 of them with a client seeing ~100 others, 20 % of
 * properties changing per tick.
 *
 *   bench-witness [--json] [--ticks N] [--definitions DIR]
 *
 * It runs the same workload (same seed) twice in one process: with each
 * client's budget at client_bytes_per_second = 4096 and the distance curve
 * (the defaults), and unbudgeted (every change every tick, whatever the
 * distance) as the baseline. For each it
 * prints the cell's time per tick, bytes per client per second, how fresh
 * the clients are kept (the longest gap between two updates of an entity
 * in view), and, decoding witness 0's stream with the real decoder, the
 * size of MOVE records (position+yaw) and of all an entity's records in a
 * tick (UPDATE and MOVE). Witness 0's client state is checked
 * against the cell's at the end: what the budget holds back is late, not
 * lost.
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_args.h"
#include "cell.h"
#include "movement.h"
#include "witness.h"
#include "cell_real.h"
#include "log.h"
#include "tessera_client.h"
#include "property_codec.h"

#ifndef TESSERA_SOURCE_DIR
#define TESSERA_SOURCE_DIR "."
#endif

#define ENTITIES 2000
#define WITNESSES 500
/* A square world where 2,000 uniform entities put ~100 in a 100 m view:
 * density 0.01 per m^2, 200,000 m^2. */
#define HALF_SIDE 224.0
#define SPEED 5.0 /* metres per second */
#define TICK_HZ 10
#define MAX_ALIASES 1024

/* Heap allocations made while `counting` by the code linked in statically:
 * the SDK and common/ (whose arena serves protobuf-c's unpacking). The
 * linker sends this executable's calls to malloc, calloc and realloc to
 * __wrap_malloc, ... and its calls to __real_malloc, ... to glibc's
 * (-Wl,--wrap in bench/meson.build): no malloc or free is defined here, and
 * no other program's allocator changes. The asm labels give the functions
 * the symbol names the linker wants under names C does not reserve. */
void *bench_real_malloc(size_t size) __asm__("__real_malloc");
void *bench_real_calloc(size_t count, size_t size) __asm__("__real_calloc");
void *bench_real_realloc(void *pointer, size_t size) __asm__("__real_realloc");
void *bench_wrap_malloc(size_t size) __asm__("__wrap_malloc");
void *bench_wrap_calloc(size_t count, size_t size) __asm__("__wrap_calloc");
void *bench_wrap_realloc(void *pointer, size_t size) __asm__("__wrap_realloc");
static uint64_t bench_allocations;
static bool bench_counting;
void *bench_wrap_malloc(size_t size) {
    if (bench_counting) bench_allocations++;
    return bench_real_malloc(size);
}
void *bench_wrap_calloc(size_t count, size_t size) {
    if (bench_counting) bench_allocations++;
    return bench_real_calloc(count, size);
}
void *bench_wrap_realloc(void *pointer, size_t size) {
    if (bench_counting) bench_allocations++;
    return bench_real_realloc(pointer, size);
}

static uint64_t rng_state;
static uint64_t rng(void) {
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1dULL;
}
static double unit(void) { return (double)(rng() >> 11) / 9007199254740992.0; }

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A random legal value for value `index` of property `p`. */
static void randomize_value(entity_state *state, const entity_def_class *cls, uint16_t p, uint32_t index) {
    const entity_def_type *type = entity_state_value_type(cls, p, index);
    switch (type->kind) {
        case ENTITY_DEF_INT8:
        case ENTITY_DEF_INT16:
        case ENTITY_DEF_INT32:
        case ENTITY_DEF_INT64: {
            uint64_t span = (uint64_t)type->int_max - (uint64_t)type->int_min;
            if (span > 1000) span = 1000;
            entity_state_set_int(state, p, index, type->int_min + (int64_t)(rng() % (span + 1)));
            break;
        }
        case ENTITY_DEF_UINT8:
        case ENTITY_DEF_UINT16:
        case ENTITY_DEF_UINT32:
        case ENTITY_DEF_UINT64:
            entity_state_set_uint(state, p, index, rng() % (type->int_max < 1000 ? type->int_max + 1 : 1000));
            break;
        case ENTITY_DEF_FLOAT:
        case ENTITY_DEF_DOUBLE:
            entity_state_set_float(state, p, index,
                                   type->quantized ? type->quant_min + unit() * (type->quant_max - type->quant_min)
                                                   : unit() * 100.0);
            break;
        case ENTITY_DEF_BOOL:
            entity_state_set_bool(state, p, index, rng() & 1);
            break;
        case ENTITY_DEF_STRING:
        case ENTITY_DEF_BYTES: {
            char text[24];
            size_t n = 4 + rng() % 12;
            if (n > type->max_length) n = type->max_length;
            for (size_t i = 0; i < n; i++) text[i] = (char)('a' + rng() % 26);
            if (type->kind == ENTITY_DEF_STRING)
                entity_state_set_string(state, p, index, text, n);
            else
                entity_state_set_bytes(state, p, index, text, n);
            break;
        }
        case ENTITY_DEF_VECTOR2:
            entity_state_set_vector2(state, p, index, unit(), unit());
            break;
        case ENTITY_DEF_VECTOR3:
            entity_state_set_vector3(state, p, index, unit(), unit(), unit());
            break;
        case ENTITY_DEF_ENTITY:
            entity_state_set_entity(state, p, index, 1 + rng() % ENTITIES);
            break;
        default:
            break;
    }
}

static void randomize_property(entity_state *state, const entity_def_class *cls, uint16_t p) {
    uint32_t values = cls->properties[p].type.value_count;
    randomize_value(state, cls, p, (uint32_t)(rng() % values));
}

/* Witness 0's client: states by alias, and what its stream measures. */
typedef struct probe {
    const volatile_codec_config *config;
    unsigned alias_bits;
    entity_state *states[MAX_ALIASES];
    bool owner[MAX_ALIASES];
    volatile_track tracks[MAX_ALIASES];
    uint64_t entity_of[MAX_ALIASES];
    uint32_t last_tick[MAX_ALIASES]; /* tick of the last record for the alias */
    uint32_t tick;
    uint64_t move_records, move_bits;
    uint64_t move_hist[512];           /* MOVE records by size in bits */
    uint32_t entity_bits[MAX_ALIASES]; /* this stream: MOVE bits per alias */
    uint8_t entity_kinds[MAX_ALIASES]; /* this stream: 1 update, 2 move, 4 enter */
    uint64_t touched, touched_bits;    /* entities updated in a stream, and the stream's bits for them */
    uint32_t longest_gap;              /* ticks between two records of an alias in view */
} probe;

static void probe_note(probe *c, uint32_t alias) {
    uint32_t gap = c->tick - c->last_tick[alias];
    if (gap > c->longest_gap) c->longest_gap = gap;
    c->last_tick[alias] = c->tick;
}

static entity_state *probe_enter(void *ctx, uint32_t alias, uint64_t entity_id, const entity_def_class *cls,
                                 bool is_owner) {
    probe *c = ctx;
    entity_state_free(c->states[alias]);
    c->states[alias] = entity_state_create(cls);
    c->owner[alias] = is_owner;
    c->entity_of[alias] = entity_id;
    volatile_track_init(&c->tracks[alias]);
    c->last_tick[alias] = c->tick;
    c->entity_kinds[alias] |= 4;
    return c->states[alias];
}

static entity_state *probe_find(void *ctx, uint32_t alias, bool *is_owner) {
    probe *c = ctx;
    if (alias >= MAX_ALIASES || !c->states[alias]) return NULL;
    *is_owner = c->owner[alias];
    c->entity_kinds[alias] |= 1;
    probe_note(c, alias);
    return c->states[alias];
}

static int probe_move(void *ctx, uint32_t alias, bit_reader *r) {
    probe *c = ctx;
    if (alias >= MAX_ALIASES || !c->states[alias]) return volatile_codec_skip(r, c->config);
    size_t before = bit_reader_position(r);
    float x, y, z, yaw;
    int rc = volatile_codec_decode(r, &c->tracks[alias], c->config, &x, &y, &z, &yaw);
    if (rc < 0) return rc;
    size_t bits = bit_reader_position(r) - before + 2 + c->alias_bits;
    c->move_records++;
    c->move_bits += bits;
    c->move_hist[bits < 511 ? bits : 511]++;
    c->entity_bits[alias] += (uint32_t)bits;
    c->entity_kinds[alias] |= 2;
    probe_note(c, alias);
    return 1;
}

static void probe_leave(void *ctx, uint32_t alias) {
    probe *c = ctx;
    if (alias >= MAX_ALIASES) return;
    entity_state_free(c->states[alias]);
    c->states[alias] = NULL;
}

static void probe_changed(void *ctx, uint32_t alias, entity_state *state, const entity_state_mask *changed) {
    (void)ctx, (void)alias, (void)state, (void)changed;
}

static const replication_decode_callbacks probe_callbacks = {
    .enter = probe_enter,
    .find = probe_find,
    .move = probe_move,
    .leave = probe_leave,
    .changed = probe_changed,
};

/* Decodes one ViewUpdate of witness 0, with the per-record sizes. UPDATE
 * records are measured as the bits the decoder consumed between the
 * callbacks around them. */
static int probe_stream(probe *c, const uint8_t *payload, size_t length, const replication_schema *schema) {
    Tessera__Client__ServerToClient *message = tessera__client__server_to_client__unpack(NULL, length, payload);
    if (!message || message->body_case != TESSERA__CLIENT__SERVER_TO_CLIENT__BODY_VIEW) return -1;
    memset(c->entity_bits, 0, sizeof c->entity_bits);
    memset(c->entity_kinds, 0, sizeof c->entity_kinds);
    bit_reader r;
    bit_reader_init(&r, message->view->stream.data, message->view->stream.len);
    replication_decode_stats stats;
    int rc = replication_decode_stream(&r, schema, c->alias_bits, &probe_callbacks, c, &stats);
    /* A typical entity update: the stream's bits (without END and its
     * padding) over the entities it updated, in streams that enter and
     * leave nothing. */
    if (rc == 0 && stats.enters == 0 && stats.leaves == 0 && stats.discarded == 0) {
        uint64_t touched = 0;
        for (uint32_t a = 0; a < MAX_ALIASES; a++) touched += c->entity_kinds[a] != 0;
        if (touched) {
            c->touched += touched;
            c->touched_bits += message->view->stream.len * 8 - 4;
        }
    }
    tessera__client__server_to_client__free_unpacked(message, NULL);
    return rc;
}

/* The SDK client that witness 0's packets are fed to. */
typedef struct sdk_probe {
    uv_loop_t loop;
    tessera_client *client;
    uint64_t packets, decode_ns, allocations, max_allocations;
} sdk_probe;

static void sdk_on_closed(tessera_client *client, tessera_client_close_cause cause, const char *reason) {
    (void)client;
    if (cause != TESSERA_CLIENT_CLOSED_BY_CALLER) fprintf(stderr, "bench-witness: the SDK closed: %s\n", reason);
}

static void sdk_frame(tessera_client *client, const Tessera__Client__ServerToClient *message) {
    size_t length = tessera__client__server_to_client__get_packed_size(message);
    uint8_t *body = malloc(length);
    tessera__client__server_to_client__pack(message, body);
    if (tessera_client_process_frame(client, body, length) != 0) {
        fprintf(stderr, "bench-witness: the SDK refused the login frames\n");
        exit(1);
    }
    free(body);
}

/* A client logged in to `app` as its first entity, without a socket. */
static void sdk_open(sdk_probe *sdk, cell *c, const cell_entity *player) {
    const cellapp_settings *settings = c->shared->settings;
    uv_loop_init(&sdk->loop);
    static const tessera_client_callbacks callbacks = {.on_closed = sdk_on_closed};
    sdk->client = tessera_client_create(&sdk->loop, &callbacks, sdk);
    Tessera__Client__ServerHello hello = TESSERA__CLIENT__SERVER_HELLO__INIT;
    hello.protocol_version = TESSERA__CLIENT__PROTOCOL_VERSION__PROTOCOL_VERSION;
    hello.server_name = "bench";
    Tessera__Client__ServerToClient message = TESSERA__CLIENT__SERVER_TO_CLIENT__INIT;
    message.body_case = TESSERA__CLIENT__SERVER_TO_CLIENT__BODY_HELLO;
    message.hello = &hello;
    sdk_frame(sdk->client, &message);
    Tessera__Client__LoginReply login = TESSERA__CLIENT__LOGIN_REPLY__INIT;
    Tessera__Client__Vector3 position = TESSERA__CLIENT__VECTOR3__INIT, lo = TESSERA__CLIENT__VECTOR3__INIT,
                             hi = TESSERA__CLIENT__VECTOR3__INIT;
    position.x = player->x;
    position.z = player->z;
    lo.x = (float)c->volatile_config.min[0], lo.y = (float)c->volatile_config.min[1];
    lo.z = (float)c->volatile_config.min[2];
    hi.x = (float)c->volatile_config.max[0], hi.y = (float)c->volatile_config.max[1];
    hi.z = (float)c->volatile_config.max[2];
    char *text = entity_def_registry_describe(c->shared->definitions);
    login.entity_id = player->id;
    login.position = &position;
    login.view_radius = (float)settings->witness.view_radius;
    login.view_hysteresis = (float)settings->witness.view_hysteresis;
    login.max_speed = 10;
    login.tick_hz = TICK_HZ;
    login.space_name = "bench";
    login.definitions = text;
    login.definitions_digest = (char *)entity_def_registry_digest_hex(c->shared->definitions);
    login.max_aliases = MAX_ALIASES;
    login.position_precision = c->volatile_config.precision;
    login.world_min = &lo;
    login.world_max = &hi;
    login.yaw_steps = c->volatile_config.yaw_steps;
    login.detail_near_distance = (float)settings->witness.detail_near_distance;
    login.detail_medium_distance = (float)settings->witness.detail_medium_distance;
    message.body_case = TESSERA__CLIENT__SERVER_TO_CLIENT__BODY_LOGIN_REPLY;
    message.login_reply = &login;
    sdk_frame(sdk->client, &message);
    free(text);
}

/* Feeds one packet, timed, its allocations counted. */
static void sdk_feed(sdk_probe *sdk, const uint8_t *payload, size_t length, bool measure) {
    uint64_t before = bench_allocations;
    bench_counting = true;
    uint64_t start = now_ns();
    int rc = tessera_client_process_frame(sdk->client, payload, length);
    uint64_t elapsed = now_ns() - start;
    bench_counting = false;
    if (rc != 0) {
        fprintf(stderr, "bench-witness: the SDK refused a packet\n");
        exit(1);
    }
    if (!measure) return;
    uint64_t made = bench_allocations - before;
    sdk->packets++;
    sdk->decode_ns += elapsed;
    sdk->allocations += made;
    if (made > sdk->max_allocations) sdk->max_allocations = made;
}

static void sdk_close(sdk_probe *sdk) {
    tessera_client_close(sdk->client);
    uv_run(&sdk->loop, UV_RUN_DEFAULT);
    uv_loop_close(&sdk->loop);
}

typedef struct run_result {
    double tick_ms;
    double bytes_per_client_second;
    uint32_t longest_gap_ticks;
    double move_bytes_mean, move_bytes_median;
    double update_bytes_mean;
    uint64_t records_held;
    bool state_matches;
    uint64_t payloads;
    double sdk_decode_us;         /* per packet */
    double sdk_allocations;       /* per packet, mean */
    uint64_t sdk_max_allocations; /* in one packet */
    double packet_bytes;          /* witness 0's mean packet */
} run_result;

/* One run of the workload at `bytes_per_second` per client. */
static int run(const char *definitions, bool budgeted, int ticks, run_result *out) {
    static cellapp_settings settings;
    static cell_shared shared;
    memset(&settings, 0, sizeof settings);
    memset(&shared, 0, sizeof shared);
    settings.tick_hz = TICK_HZ;
    settings.position_precision = 1.0 / 64;
    settings.yaw_steps = 256;
    witness_config *s = &settings.witness;
    s->tick_hz = TICK_HZ;
    s->view_radius = 50;
    s->view_hysteresis = 5;
    /* The baseline sends every change every tick: no byte budget and no
     * distance curve. */
    s->client_bytes_per_second = budgeted ? 4096 : 100000000;
    s->max_aliases = MAX_ALIASES;
    s->alias_cooldown_ms = 1000;
    s->detail_near_distance = 15;
    s->detail_medium_distance = 30;
    s->detail_hysteresis = 1;
    s->update_near_distance = budgeted ? 10 : 1e5;
    s->update_far_distance = budgeted ? 40 : 2e5;
    char err[512];
    shared.settings = &settings;
    shared.self_id = 1;
    static entity_timer_ids timer_ids = {1, 0};
    shared.timer_ids = &timer_ids;
    cell_real_install_hooks(&shared);
    if (entity_def_load_directory(definitions, &shared.definitions, err, sizeof err) != 0) {
        fprintf(stderr, "bench-witness: %s\n", err);
        return -1;
    }
    const entity_def_class *cls = entity_def_registry_find_class(shared.definitions, "Avatar");
    if (!cls) {
        fprintf(stderr, "bench-witness: no Avatar class in %s\n", definitions);
        return -1;
    }
    const double min[3] = {-HALF_SIDE, -100, -HALF_SIDE}, max[3] = {HALF_SIDE, 100, HALF_SIDE};
    shared.schema = replication_schema_create(shared.definitions);
    shared.replication = replication_create(shared.schema);
    bit_writer_init(&shared.stream);
    space_layout *layout = space_layout_create("bench", min, max, false, 1);
    cell *c = cell_create(&shared, layout);

    rng_state = 0x9E3779B97F4A7C15ull;
    static cell_entity *entities[ENTITIES];
    static double heading[ENTITIES];
    for (int e = 0; e < ENTITIES; e++) {
        float x = (float)((unit() * 2 - 1) * (HALF_SIDE - 1)), z = (float)((unit() * 2 - 1) * (HALF_SIDE - 1));
        entities[e] = cell_add(c, 1 + (uint64_t)e, CELL_ENTITY_REAL, cls, x, 0, z);
        heading[e] = unit() * 2 * M_PI;
        for (uint16_t p = 0; p < cls->property_count; p++) randomize_property(entities[e]->state, cls, p);
        if (e < WITNESSES) witness_attach(c, entities[e]);
    }

    sdk_probe sdk;
    memset(&sdk, 0, sizeof sdk);
    sdk_open(&sdk, c, entities[0]);
    uint64_t mine_bytes = 0;
    probe *client = calloc(1, sizeof *client);
    client->config = &c->volatile_config;
    client->alias_bits = replication_alias_bits(MAX_ALIASES);
    uint64_t tick_ns = 0, bytes = 0, payloads = 0;
    int warmup = TICK_HZ * 2; /* the first enters of every view are not steady state */
    for (int t = 0; t < ticks + warmup; t++) {
        /* The game (untimed): everyone walks, 20 % of properties change. */
        for (int e = 0; e < ENTITIES; e++) {
            cell_entity *entity = entities[e];
            /* Players walk straight and turn now and then (every 3 s on
             * average), as the bots do. */
            if (rng() % ((uint64_t)3 * TICK_HZ) == 0) heading[e] = unit() * 2 * M_PI;
            double step = SPEED / TICK_HZ;
            double x = entity->x + cos(heading[e]) * step, z = entity->z + sin(heading[e]) * step;
            if (fabs(x) > HALF_SIDE - 1 || fabs(z) > HALF_SIDE - 1) {
                heading[e] += M_PI;
                x = entity->x;
                z = entity->z;
            }
            cell_move(c, entity, (float)x, 0, (float)z, (float)heading[e]);
            for (uint16_t p = 0; p < cls->property_count; p++)
                if (rng() % 5 == 0) randomize_property(entity->state, cls, p);
        }
        /* The cell's tick, as cellapp_tick runs it. */
        uint64_t start = now_ns();
        coord_flush(c->coord);
        replication_begin_tick(shared.replication, ++shared.replication_tick);
        cell_pack(c);
        witness_notify_changes(c);
        /* Witness 0's payload stays in its buffer until its next update. */
        const uint8_t *mine = NULL;
        size_t mine_length = 0;
        uint64_t tick_bytes = 0;
        for (int e = 0; e < WITNESSES; e++) {
            const uint8_t *payload;
            size_t length = witness_update(entities[e]->real->witness, c, entities[e], &payload);
            tick_bytes += length;
            if (e == 0) {
                mine = payload;
                mine_length = length;
            }
        }
        for (int e = 0; e < ENTITIES; e++) entity_state_clear_dirty(entities[e]->state);
        cell_end_tick(c);
        uint64_t elapsed = now_ns() - start;
        client->tick = (uint32_t)t;
        if (mine_length && probe_stream(client, mine, mine_length, shared.schema) != 0) {
            fprintf(stderr, "bench-witness: witness 0's stream does not decode at tick %d\n", t);
            return -1;
        }
        if (mine_length) {
            sdk_feed(&sdk, mine, mine_length, t >= warmup);
            if (t >= warmup) mine_bytes += mine_length;
        }
        if (t < warmup) {
            client->longest_gap = 0;
            continue;
        }
        tick_ns += elapsed;
        bytes += tick_bytes;
        payloads += WITNESSES;
    }
    /* The cell's state, for witness 0's audiences, is what its client holds
     * for every entity still in view (what is late arrives within a
     * second, so compare after a second of ticks with no changes). */
    for (int t = 0; t < TICK_HZ + 2; t++) {
        coord_flush(c->coord);
        replication_begin_tick(shared.replication, ++shared.replication_tick);
        for (int e = 0; e < ENTITIES; e++) entities[e]->packed = false;
        witness_notify_changes(c);
        const uint8_t *payload;
        size_t length = witness_update(entities[0]->real->witness, c, entities[0], &payload);
        client->tick = (uint32_t)(ticks + warmup + t);
        if (length && probe_stream(client, payload, length, shared.schema) != 0) return -1;
        cell_end_tick(c);
    }
    bool matches = true;
    bit_writer a, b;
    bit_writer_init(&a);
    bit_writer_init(&b);
    for (uint32_t alias = 0; alias < MAX_ALIASES; alias++) {
        if (!client->states[alias]) continue;
        cell_entity *entity = cell_find(c, client->entity_of[alias]);
        if (!entity) continue;
        bool owner = client->owner[alias];
        float d = fmaxf(fabsf(entity->x - entities[0]->x), fabsf(entity->z - entities[0]->z));
        entity_def_detail detail = d <= s->detail_near_distance     ? ENTITY_DEF_DETAIL_NEAR
                                   : d <= s->detail_medium_distance ? ENTITY_DEF_DETAIL_MEDIUM
                                                                    : ENTITY_DEF_DETAIL_FAR;
        const entity_state_mask *mask =
            replication_schema_mask(shared.schema, cls->id, replication_audience_for(owner, detail));
        bit_writer_reset(&a);
        bit_writer_reset(&b);
        property_codec_encode_changes(&a, entity->state, mask);
        property_codec_encode_changes(&b, client->states[alias], mask);
        if (bit_writer_bits(&a) != bit_writer_bits(&b) ||
            memcmp(bit_writer_data(&a), bit_writer_data(&b), bit_writer_bytes(&a)) != 0)
            matches = false;
    }
    bit_writer_close(&a);
    bit_writer_close(&b);

    out->tick_ms = (double)tick_ns / 1e6 / ticks;
    out->bytes_per_client_second = (double)bytes / WITNESSES / ((double)ticks / TICK_HZ);
    out->longest_gap_ticks = client->longest_gap;
    out->move_bytes_mean = client->move_records ? (double)client->move_bits / 8.0 / (double)client->move_records : 0;
    uint64_t seen = 0;
    out->move_bytes_median = 0;
    for (int bits = 0; bits < 512; bits++) {
        seen += client->move_hist[bits];
        if (seen * 2 >= client->move_records) {
            out->move_bytes_median = bits / 8.0;
            break;
        }
    }
    out->update_bytes_mean = client->touched ? (double)client->touched_bits / 8.0 / (double)client->touched : 0;
    out->records_held = shared.witness_totals.records_held;
    out->sdk_decode_us = sdk.packets ? (double)sdk.decode_ns / 1e3 / (double)sdk.packets : 0;
    out->sdk_allocations = sdk.packets ? (double)sdk.allocations / (double)sdk.packets : 0;
    out->sdk_max_allocations = sdk.max_allocations;
    out->packet_bytes = sdk.packets ? (double)mine_bytes / (double)sdk.packets : 0;
    sdk_close(&sdk);
    out->state_matches = matches;
    out->payloads = payloads;

    for (uint32_t alias = 0; alias < MAX_ALIASES; alias++) entity_state_free(client->states[alias]);
    free(client);
    cell_free(c);
    space_layout_free(layout);
    bit_writer_close(&shared.stream);
    replication_free(shared.replication);
    replication_schema_free(shared.schema);
    entity_def_registry_free(shared.definitions);
    return 0;
}

int main(int argc, char **argv) {
    bool json = false;
    int ticks = 100;
    const char *definitions = TESSERA_SOURCE_DIR "/demo/entities";
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            json = true;
        else if (strcmp(argv[i], "--ticks") == 0 && i + 1 < argc)
            ticks = bench_int_arg(argv[++i], 100);
        else if (strcmp(argv[i], "--definitions") == 0 && i + 1 < argc)
            definitions = argv[++i];
        else {
            fprintf(stderr, "usage: bench-witness [--json] [--ticks N] [--definitions DIR]\n");
            return 2;
        }
    }
    log_set_level(LOG_LEVEL_WARN);
    run_result budgeted, unbudgeted;
    if (run(definitions, true, ticks, &budgeted) != 0 || run(definitions, false, ticks, &unbudgeted) != 0) return 1;
    if (json) {
        const run_result *runs[2] = {&budgeted, &unbudgeted};
        const char *names[2] = {"budgeted", "unbudgeted"};
        printf("{");
        for (int i = 0; i < 2; i++) {
            const run_result *r = runs[i];
            printf("%s\"%s\": {\"tick_ms\": %.3f, \"bytes_per_client_second\": %.1f, \"longest_gap_ticks\": %u, "
                   "\"move_bytes_mean\": %.2f, \"move_bytes_median\": %.2f, \"entity_records_bytes_mean\": %.2f, "
                   "\"state_matches\": %s, \"sdk_decode_us\": %.2f, \"sdk_allocations_per_packet\": %.3f, "
                   "\"sdk_max_allocations\": %llu}",
                   i ? ", " : "", names[i], r->tick_ms, r->bytes_per_client_second, r->longest_gap_ticks,
                   r->move_bytes_mean, r->move_bytes_median, r->update_bytes_mean, r->state_matches ? "true" : "false",
                   r->sdk_decode_us, r->sdk_allocations, (unsigned long long)r->sdk_max_allocations);
        }
        printf("}\n");
        return budgeted.state_matches && unbudgeted.state_matches ? 0 : 1;
    }
    printf("bench-witness: %d Avatars walking at %.0f m/s, %d clients with ~100 in view, 20 %% of properties "
           "changing, %d ticks at %d Hz\n",
           ENTITIES, SPEED, WITNESSES, ticks, TICK_HZ);
    printf("                                  budget 4096 B/s   unbudgeted   ratio\n");
    printf("  cell tick                       %8.2f ms      %8.2f ms   %.2f x\n", budgeted.tick_ms, unbudgeted.tick_ms,
           unbudgeted.tick_ms / budgeted.tick_ms);
    printf("  per client                      %8.0f B/s     %8.0f B/s  %.2f x  (target <= 4096 B/s: %s)\n",
           budgeted.bytes_per_client_second, unbudgeted.bytes_per_client_second,
           unbudgeted.bytes_per_client_second / budgeted.bytes_per_client_second,
           budgeted.bytes_per_client_second <= 4096 ? "ok" : "MISSED");
    printf("  longest gap between updates     %8.1f s       %8.1f s    (target <= 1 s)\n",
           budgeted.longest_gap_ticks / (double)TICK_HZ, unbudgeted.longest_gap_ticks / (double)TICK_HZ);
    printf("  MOVE record (position+yaw)      %8.2f B       %8.2f B    mean (KBEngine 7 B)\n", budgeted.move_bytes_mean,
           unbudgeted.move_bytes_mean);
    printf("                                  %8.2f B       %8.2f B    median (target <= 5 B: %s)\n",
           budgeted.move_bytes_median, unbudgeted.move_bytes_median, budgeted.move_bytes_median <= 5 ? "ok" : "MISSED");
    printf("  one entity's records in a tick  %8.2f B       %8.2f B    mean (properties and movement)\n",
           budgeted.update_bytes_mean, unbudgeted.update_bytes_mean);
    printf("  witness 0 holds the cell's state   %s             %s\n", budgeted.state_matches ? "yes" : "NO",
           unbudgeted.state_matches ? "yes" : "NO");
    printf("  client SDK decode               %8.1f us      %8.1f us   per packet (%.0f B / %.0f B)\n",
           budgeted.sdk_decode_us, unbudgeted.sdk_decode_us, budgeted.packet_bytes, unbudgeted.packet_bytes);
    printf("  client SDK allocations          %8.2f         %8.2f      per packet, mean (target <= 2: %s); "
           "most in one: %llu / %llu\n",
           budgeted.sdk_allocations, unbudgeted.sdk_allocations,
           budgeted.sdk_allocations <= 2 && unbudgeted.sdk_allocations <= 2 ? "ok" : "MISSED",
           (unsigned long long)budgeted.sdk_max_allocations, (unsigned long long)unbudgeted.sdk_max_allocations);
    return budgeted.state_matches && unbudgeted.state_matches ? 0 : 1;
}
