/* test_tessera_client.c -- the SDK's receiving side, fed frames through
 * tessera_client_process_frame on a client that never connects: the login
 * reply's checks, the entity stream (enters, moves, property updates,
 * leaves, stale aliases), BaseProperties before and after the player's
 * entity entered, client calls, the order of the callbacks, what closes the
 * client with CLOSED_PROTOCOL, game events (in a ViewUpdate after the calls,
 * and alone; an unknown id or fields not of the declared types close the
 * client), the other baseapps a login reply lists, and the number of heap
 * allocations per
 * ViewUpdate (malloc, calloc and realloc are wrapped at link time, which
 * counts every allocation of the SDK and of common/, both linked statically).
 *
 * The server side of each frame is built with the same modules the cellapp
 * uses (replication's packer, volatile_codec, property_codec, method_call).
 *
 * The reconnect tests talk to fake baseapps over real sockets on 127.0.0.1
 * (a listener and channels, as the baseapp has): a Reconnect redirected
 * without a token goes on to the baseapp named, a LoginRequest redirected
 * so is refused, and ERROR_UNAVAILABLE's retry_after_ms reaches the caller.
 */
#include <inttypes.h>
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bit_stream.h"
#include "channel.h"
#include "client.pb-c.h"
#include "entity_def.h"
#include "entity_state.h"
#include "method_call.h"
#include "property_codec.h"
#include "replication.h"
#include "tessera_client.h"
#include "volatile_codec.h"

/* ---- counting allocations ------------------------------------------------- */

/* The linker's --wrap=malloc (tests/meson.build) sends malloc to
 * __wrap_malloc and names the real one __real_malloc: the names are the
 * linker's, reserved or not. */
/* NOLINTBEGIN(bugprone-reserved-identifier,cert-dcl37-c,cert-dcl51-cpp) */
void *__real_malloc(size_t size);
void *__real_calloc(size_t count, size_t size);
void *__real_realloc(void *pointer, size_t size);
static unsigned long allocations;
void *__wrap_malloc(size_t size) {
    allocations++;
    return __real_malloc(size);
}
void *__wrap_calloc(size_t count, size_t size) {
    allocations++;
    return __real_calloc(count, size);
}
void *__wrap_realloc(void *pointer, size_t size) {
    allocations++;
    return __real_realloc(pointer, size);
}
/* NOLINTEND(bugprone-reserved-identifier,cert-dcl37-c,cert-dcl51-cpp) */

/* ---- the game ------------------------------------------------------------- */

/* The fixture's classes: the inside of "entities". */
#define FIXTURE_ENTITIES                                                                                 \
    "{\"name\":\"Avatar\",\"properties\":["                                                              \
    "{\"name\":\"name\",\"type\":\"string\",\"max_length\":32,\"flags\":\"ALL_CLIENTS\"},"               \
    "{\"name\":\"health\",\"type\":\"int16\",\"flags\":\"CELL_PUBLIC_AND_OWN\",\"default\":100},"        \
    "{\"name\":\"gold\",\"type\":\"uint32\",\"flags\":\"BASE_AND_CLIENT\"},"                             \
    "{\"name\":\"secret\",\"type\":\"uint8\",\"flags\":\"BASE\"}],"                                      \
    "\"base_methods\":[{\"name\":\"chat\",\"exposed\":true,"                                             \
    "\"args\":[{\"name\":\"text\",\"type\":\"string\",\"max_length\":200}]}],"                           \
    "\"cell_methods\":[{\"name\":\"castSpell\",\"exposed\":true,\"args\":["                              \
    "{\"name\":\"spell_id\",\"type\":\"uint16\"},{\"name\":\"target\",\"type\":\"entity\"}]},"           \
    "{\"name\":\"hidden\",\"args\":[]}],"                                                                \
    "\"client_methods\":[{\"name\":\"onDamage\",\"args\":[{\"name\":\"amount\",\"type\":\"int16\"}]}]}," \
    "{\"name\":\"Npc\",\"properties\":["                                                                 \
    "{\"name\":\"name\",\"type\":\"string\",\"max_length\":32,\"flags\":\"ALL_CLIENTS\"},"               \
    "{\"name\":\"mood\",\"type\":\"uint8\",\"flags\":\"OTHER_CLIENTS\"}]}"

static const char *const DEFINITIONS = "{\"format\":1,\"entities\":[" FIXTURE_ENTITIES "]}";

/* The same classes with game events, for the tests of on_event (setup_events). */
static const char *const EVENT_DEFINITIONS =
    "{\"format\":1,\"entities\":[" FIXTURE_ENTITIES "],"
    "\"events\":["
    "{\"name\":\"spell_hit\",\"args\":[{\"name\":\"caster\",\"type\":\"entity\"},"
    "{\"name\":\"spell_id\",\"type\":\"uint16\"},{\"name\":\"amount\",\"type\":\"int16\",\"bits\":12}]},"
    "{\"name\":\"announce\",\"args\":[{\"name\":\"text\",\"type\":\"string\",\"max_length\":32}]},"
    "{\"name\":\"round_over\"}"
    "]}";

enum { EVENT_SPELL_HIT = 0, EVENT_ANNOUNCE = 1, EVENT_ROUND_OVER = 2, EVENT_COUNT = 3 };

#define PLAYER_ID 7
#define NPC_ID 9000
#define MAX_ALIASES 100
#define PRECISION (1.0 / 64.0)
#define YAW_STEPS 1024

enum { AVATAR_NAME = 0, AVATAR_HEALTH = 1, AVATAR_GOLD = 2, NPC_NAME = 0, NPC_MOOD = 1 };

/* One game event as on_event saw it: its fields printed "name=value,...". */
typedef struct seen_event {
    char name[64];
    uint16_t id;
    uint64_t source;
    char fields[160];
} seen_event;

#define MAX_SEEN_EVENTS 8

/* What the callbacks saw, in order: one letter per callback. */
typedef struct seen {
    char order[256];
    size_t length;
    int logged_in, enters, leaves, moves, changes, calls, frames_begun, frames_ended, closed;
    tessera_client_close_cause cause;
    char reason[192];
    char redirect_token[80]; /* tessera_client_redirect_token inside on_closed */
    uint64_t last_leave;
    uint64_t last_stamp;
    entity_state_mask last_changed;
    uint64_t last_changed_id;
    int64_t last_damage;
    uint64_t gold_at_enter;
    int close_in_enter; /* tessera_client_close inside on_enter */
    int events;         /* on_event calls; the first MAX_SEEN_EVENTS in event_log */
    seen_event event_log[MAX_SEEN_EVENTS];
    int errors, last_error;        /* on_error calls and the last code */
    uint32_t error_retry_after_ms; /* tessera_client_error_retry_after_ms inside the last on_error */
    int redirected;                /* on_redirected calls */
    int ticks_restarts;            /* frames begun with tessera_client_frame_ticks_restart */
} seen;

static void note(seen *s, char c) {
    if (s->length + 1 < sizeof s->order) {
        s->order[s->length++] = c;
        s->order[s->length] = '\0';
    }
}

static void on_logged_in(tessera_client *client, const tessera_client_login_info *info) {
    seen *s = tessera_client_user_data(client);
    s->logged_in++;
    assert_int_equal(info->max_aliases, MAX_ALIASES);
    assert_int_equal(info->yaw_steps, YAW_STEPS);
}
static void on_frame_begin(tessera_client *client, uint32_t tick) {
    seen *s = tessera_client_user_data(client);
    s->frames_begun++;
    if (tessera_client_frame_ticks_restart(client)) s->ticks_restarts++;
    note(s, '[');
}
static void on_frame_end(tessera_client *client, uint32_t tick) {
    seen *s = tessera_client_user_data(client);
    s->frames_ended++;
    note(s, ']');
}
static void on_enter(tessera_client *client, const tessera_client_entity *entity) {
    seen *s = tessera_client_user_data(client);
    s->enters++;
    note(s, 'E');
    if (entity->id == PLAYER_ID) {
        uint64_t gold;
        assert_int_equal(entity_state_get_uint(entity->state, AVATAR_GOLD, 0, &gold), 0);
        s->gold_at_enter = gold;
    }
    if (s->close_in_enter) tessera_client_close(client);
}
static void on_leave(tessera_client *client, uint64_t entity_id) {
    seen *s = tessera_client_user_data(client);
    s->leaves++;
    s->last_leave = entity_id;
    note(s, 'L');
    assert_null(tessera_client_entity_find(client, entity_id));
}
static void on_move(tessera_client *client, const tessera_client_entity *entity, uint64_t stamp_us) {
    seen *s = tessera_client_user_data(client);
    s->moves++;
    s->last_stamp = stamp_us;
    note(s, 'M');
}
static void on_properties_changed(tessera_client *client, const tessera_client_entity *entity,
                                  const entity_state_mask *changed) {
    seen *s = tessera_client_user_data(client);
    s->changes++;
    s->last_changed = *changed;
    s->last_changed_id = entity->id;
    note(s, 'P');
}
static void on_client_call(tessera_client *client, const tessera_client_entity *entity, const entity_def_method *method,
                           const entity_state *args) {
    seen *s = tessera_client_user_data(client);
    s->calls++;
    note(s, 'C');
    assert_string_equal(method->name, "onDamage");
    assert_int_equal(entity_state_get_int(args, 0, 0, &s->last_damage), 0);
}
static void on_event(tessera_client *client, const entity_def_method *event, uint64_t source_id,
                     const entity_state *fields) {
    seen *s = tessera_client_user_data(client);
    note(s, 'V');
    assert_ptr_equal(entity_state_class(fields), &event->args_class);
    assert_ptr_equal(entity_def_registry_event(tessera_client_definitions(client), event->id), event);
    if (s->events < MAX_SEEN_EVENTS) {
        seen_event *e = &s->event_log[s->events];
        snprintf(e->name, sizeof e->name, "%s", event->name);
        e->id = event->id;
        e->source = source_id;
        size_t at = 0;
        e->fields[0] = '\0';
        for (uint16_t a = 0; a < event->arg_count; a++) {
            char value[80];
            uint64_t u;
            int64_t i;
            const char *text;
            switch (event->args[a].type.kind) {
                case ENTITY_DEF_ENTITY:
                    assert_int_equal(entity_state_get_entity(fields, a, 0, &u), 0);
                    snprintf(value, sizeof value, "#%" PRIu64, u);
                    break;
                case ENTITY_DEF_UINT8:
                case ENTITY_DEF_UINT16:
                case ENTITY_DEF_UINT32:
                case ENTITY_DEF_UINT64:
                    assert_int_equal(entity_state_get_uint(fields, a, 0, &u), 0);
                    snprintf(value, sizeof value, "%" PRIu64, u);
                    break;
                case ENTITY_DEF_INT8:
                case ENTITY_DEF_INT16:
                case ENTITY_DEF_INT32:
                case ENTITY_DEF_INT64:
                    assert_int_equal(entity_state_get_int(fields, a, 0, &i), 0);
                    snprintf(value, sizeof value, "%" PRId64, i);
                    break;
                case ENTITY_DEF_STRING:
                    assert_int_equal(entity_state_get_string(fields, a, 0, &text, NULL), 0);
                    snprintf(value, sizeof value, "'%s'", text);
                    break;
                default:
                    snprintf(value, sizeof value, "?");
                    break;
            }
            at += (size_t)snprintf(e->fields + at, sizeof e->fields - at, "%s%s=%s", a > 0 ? "," : "",
                                   event->args[a].name, value);
            assert_true(at < sizeof e->fields);
        }
    }
    s->events++;
}
static void on_error(tessera_client *client, int code, const char *message) {
    (void)message;
    seen *s = tessera_client_user_data(client);
    s->errors++;
    s->last_error = code;
    s->error_retry_after_ms = tessera_client_error_retry_after_ms(client);
}
static void on_redirected(tessera_client *client, const char *reason) {
    (void)reason;
    seen *s = tessera_client_user_data(client);
    s->redirected++;
}
static void on_closed(tessera_client *client, tessera_client_close_cause cause, const char *reason) {
    seen *s = tessera_client_user_data(client);
    s->closed++;
    s->cause = cause;
    snprintf(s->reason, sizeof s->reason, "%s", reason);
    snprintf(s->redirect_token, sizeof s->redirect_token, "%s", tessera_client_redirect_token(client));
}

static const tessera_client_callbacks callbacks = {
    .on_logged_in = on_logged_in,
    .on_frame_begin = on_frame_begin,
    .on_frame_end = on_frame_end,
    .on_enter = on_enter,
    .on_leave = on_leave,
    .on_move = on_move,
    .on_properties_changed = on_properties_changed,
    .on_client_call = on_client_call,
    .on_event = on_event,
    .on_error = on_error,
    .on_redirected = on_redirected,
    .on_closed = on_closed,
};

/* ---- the server's side ---------------------------------------------------- */

struct fake_baseapp;

/* The most fake baseapps one test starts. */
#define MAX_FAKES 4

typedef struct fixture {
    uv_loop_t loop;
    seen seen;
    tessera_client *client;
    entity_def_registry *registry;
    replication_schema *schema;
    replication *rep;
    uint64_t tick;
    bool ticks_restart; /* the next ViewUpdate says its tick starts a new count */
    volatile_codec_config config;
    entity_state *player, *npc;
    replication_entity player_rep, npc_rep;
    volatile_track player_track, npc_track;
    bit_writer stream;
    uint8_t frame[1 << 16];
    size_t frame_length;
    /* Fake baseapps over sockets (the reconnect tests), owned: the
     * teardown stops and frees them, whatever a test did. */
    struct fake_baseapp *fakes[MAX_FAKES];
    int fake_count;
} fixture;

static void pack(fixture *fx, const Tessera__Client__ServerToClient *message) {
    fx->frame_length = tessera__client__server_to_client__get_packed_size(message);
    assert_true(fx->frame_length <= sizeof fx->frame);
    tessera__client__server_to_client__pack(message, fx->frame);
}

static int feed(fixture *fx) { return tessera_client_process_frame(fx->client, fx->frame, fx->frame_length); }

static void pack_hello(fixture *fx) {
    Tessera__Client__ServerHello hello = TESSERA__CLIENT__SERVER_HELLO__INIT;
    hello.protocol_version = TESSERA__CLIENT__PROTOCOL_VERSION__PROTOCOL_VERSION;
    hello.server_name = "test";
    Tessera__Client__ServerToClient message = TESSERA__CLIENT__SERVER_TO_CLIENT__INIT;
    message.body_case = TESSERA__CLIENT__SERVER_TO_CLIENT__BODY_HELLO;
    message.hello = &hello;
    pack(fx, &message);
}

/* A LoginReply; `baseapps` (n_baseapps of them, NULL for none) are the
 * other baseapps it lists, and `reconnected` says it answers a Reconnect. */
static void pack_login_with(fixture *fx, uint32_t max_aliases, double precision, const char *const *baseapps,
                            size_t n_baseapps, bool reconnected) {
    char *definitions = entity_def_registry_describe(fx->registry);
    Tessera__Client__Vector3 position = TESSERA__CLIENT__VECTOR3__INIT;
    Tessera__Client__Vector3 world_min = TESSERA__CLIENT__VECTOR3__INIT;
    Tessera__Client__Vector3 world_max = TESSERA__CLIENT__VECTOR3__INIT;
    world_min.x = world_min.y = world_min.z = -1000;
    world_max.x = world_max.y = world_max.z = 1000;
    Tessera__Client__LoginReply reply = TESSERA__CLIENT__LOGIN_REPLY__INIT;
    reply.entity_id = PLAYER_ID;
    reply.position = &position;
    reply.view_radius = 50;
    reply.view_hysteresis = 5;
    reply.max_speed = 10;
    reply.tick_hz = 10;
    reply.space_name = "test";
    reply.definitions = definitions;
    reply.definitions_digest = (char *)entity_def_registry_digest_hex(fx->registry);
    reply.max_aliases = max_aliases;
    reply.position_precision = precision;
    reply.world_min = &world_min;
    reply.world_max = &world_max;
    reply.yaw_steps = YAW_STEPS;
    reply.detail_near_distance = 10;
    reply.detail_medium_distance = 30;
    reply.session_token = "fresh0token";
    reply.reconnected = reconnected;
    reply.baseapps = (char **)baseapps;
    reply.n_baseapps = n_baseapps;
    Tessera__Client__ServerToClient message = TESSERA__CLIENT__SERVER_TO_CLIENT__INIT;
    message.body_case = TESSERA__CLIENT__SERVER_TO_CLIENT__BODY_LOGIN_REPLY;
    message.login_reply = &reply;
    pack(fx, &message);
    free(definitions);
}

static void pack_login(fixture *fx, uint32_t max_aliases, double precision) {
    pack_login_with(fx, max_aliases, precision, NULL, 0, false);
}

/* A ViewUpdate of the stream built so far (END appended here unless
 * `no_end`), `calls` and `events`. */
static void pack_view_full(fixture *fx, uint64_t stamp_us, Tessera__Client__ClientCall **calls, size_t n_calls,
                           Tessera__Client__GameEvent **events, size_t n_events, int no_end) {
    if (!no_end) replication_append_end(&fx->stream);
    Tessera__Client__ViewUpdate view = TESSERA__CLIENT__VIEW_UPDATE__INIT;
    view.tick = (uint32_t)fx->tick;
    view.ticks_restart = fx->ticks_restart;
    view.stream.data = (uint8_t *)bit_writer_data(&fx->stream);
    view.stream.len = bit_writer_bytes(&fx->stream);
    view.stamp_us = stamp_us;
    view.calls = calls;
    view.n_calls = n_calls;
    view.events = events;
    view.n_events = n_events;
    Tessera__Client__ServerToClient message = TESSERA__CLIENT__SERVER_TO_CLIENT__INIT;
    message.body_case = TESSERA__CLIENT__SERVER_TO_CLIENT__BODY_VIEW;
    message.view = &view;
    pack(fx, &message);
}

/* A ViewUpdate of the stream built so far (END appended here unless
 * `no_end`) and `calls`. */
static void pack_view_raw(fixture *fx, uint64_t stamp_us, Tessera__Client__ClientCall **calls, size_t n_calls,
                          int no_end) {
    pack_view_full(fx, stamp_us, calls, n_calls, NULL, 0, no_end);
}

static void pack_view(fixture *fx, uint64_t stamp_us, Tessera__Client__ClientCall **calls, size_t n_calls) {
    pack_view_raw(fx, stamp_us, calls, n_calls, 0);
}

/* Starts a tick: packs whatever is dirty, empties the stream. */
static void begin_tick(fixture *fx) {
    replication_begin_tick(fx->rep, ++fx->tick);
    if (!entity_state_mask_empty(entity_state_dirty(fx->player))) replication_pack(fx->rep, &fx->player_rep);
    if (!entity_state_mask_empty(entity_state_dirty(fx->npc))) replication_pack(fx->rep, &fx->npc_rep);
    bit_writer_reset(&fx->stream);
}

static void end_tick(fixture *fx) {
    entity_state_clear_dirty(fx->player);
    entity_state_clear_dirty(fx->npc);
}

static void append_move(fixture *fx, uint32_t alias, volatile_track *track, float x, float y, float z, float yaw) {
    replication_append_move_header(&fx->stream, alias, replication_alias_bits(MAX_ALIASES));
    assert_true(volatile_codec_encode(&fx->stream, track, &fx->config, x, y, z, yaw) > 0);
}

static void pack_base_properties(fixture *fx, uint64_t entity_id, uint32_t gold) {
    entity_state *state = entity_state_create(entity_def_registry_find_class(fx->registry, "Avatar"));
    assert_int_equal(entity_state_set_uint(state, AVATAR_GOLD, 0, gold), 0);
    entity_state_mask props = {{0}};
    entity_state_mask_add(&props, AVATAR_GOLD);
    bit_writer w;
    bit_writer_init(&w);
    assert_int_equal(property_codec_encode_changes(&w, state, &props), 0);
    Tessera__Client__BaseProperties base = TESSERA__CLIENT__BASE_PROPERTIES__INIT;
    base.entity_id = entity_id;
    base.changes.data = (uint8_t *)bit_writer_data(&w);
    base.changes.len = bit_writer_bytes(&w);
    Tessera__Client__ServerToClient message = TESSERA__CLIENT__SERVER_TO_CLIENT__INIT;
    message.body_case = TESSERA__CLIENT__SERVER_TO_CLIENT__BODY_BASE_PROPERTIES;
    message.base_properties = &base;
    pack(fx, &message);
    bit_writer_close(&w);
    entity_state_free(state);
}

static int setup_with(void **state, const char *definitions) {
    fixture *fx = calloc(1, sizeof *fx);
    char err[256];
    if (entity_def_load_string(definitions, "test", &fx->registry, err, sizeof err) != 0) fail_msg("%s", err);
    assert_int_equal(uv_loop_init(&fx->loop), 0);
    fx->client = tessera_client_create(&fx->loop, &callbacks, &fx->seen);
    fx->schema = replication_schema_create(fx->registry);
    fx->rep = replication_create(fx->schema);
    double min[3] = {-1000, -1000, -1000}, max[3] = {1000, 1000, 1000};
    assert_int_equal(volatile_codec_config_init(&fx->config, PRECISION, min, max, YAW_STEPS), 0);
    fx->player = entity_state_create(entity_def_registry_find_class(fx->registry, "Avatar"));
    fx->npc = entity_state_create(entity_def_registry_find_class(fx->registry, "Npc"));
    assert_int_equal(entity_state_set_string(fx->player, AVATAR_NAME, 0, "hero", 4), 0);
    assert_int_equal(entity_state_set_string(fx->npc, NPC_NAME, 0, "goblin", 6), 0);
    replication_entity_init(&fx->player_rep, fx->player, PLAYER_ID);
    replication_entity_init(&fx->npc_rep, fx->npc, NPC_ID);
    volatile_track_init(&fx->player_track);
    volatile_track_init(&fx->npc_track);
    bit_writer_init(&fx->stream);
    *state = fx;
    return 0;
}

static int setup(void **state) { return setup_with(state, DEFINITIONS); }

/* The fixture with game events in its definitions. */
static int setup_events(void **state) { return setup_with(state, EVENT_DEFINITIONS); }

/* Runs the loop until the client's on_closed ran (it fires from the loop). */
static void close_and_drain(fixture *fx) {
    if (!fx->seen.closed) tessera_client_close(fx->client);
    uv_run(&fx->loop, UV_RUN_DEFAULT);
    assert_int_equal(fx->seen.closed, 1);
}

static void fake_stop(struct fake_baseapp *fake);

static int teardown(void **state) {
    fixture *fx = *state;
    for (int i = 0; i < fx->fake_count; i++) fake_stop(fx->fakes[i]);
    close_and_drain(fx);
    for (int i = 0; i < fx->fake_count; i++) free(fx->fakes[i]);
    assert_int_equal(uv_loop_close(&fx->loop), 0);
    entity_state_free(fx->player);
    entity_state_free(fx->npc);
    bit_writer_close(&fx->stream);
    replication_free(fx->rep);
    replication_schema_free(fx->schema);
    entity_def_registry_free(fx->registry);
    free(fx);
    return 0;
}

static void log_in(fixture *fx) {
    pack_hello(fx);
    assert_int_equal(feed(fx), 0);
    assert_int_equal(tessera_client_get_state(fx->client), TESSERA_CLIENT_AWAITING_LOGIN);
    pack_login(fx, MAX_ALIASES, PRECISION);
    assert_int_equal(feed(fx), 0);
    assert_int_equal(tessera_client_get_state(fx->client), TESSERA_CLIENT_IN_WORLD);
    assert_int_equal(fx->seen.logged_in, 1);
}

/* Player at alias 0 (owned), the npc at alias 5, both with a first move;
 * returns what tessera_client_process_frame did. */
static int feed_enter_both(fixture *fx) {
    begin_tick(fx);
    unsigned bits = replication_alias_bits(MAX_ALIASES);
    replication_append_enter(fx->rep, &fx->player_rep, &fx->stream, 0, bits, true, ENTITY_DEF_DETAIL_NEAR);
    append_move(fx, 0, &fx->player_track, 1.0f, 2.0f, 3.0f, 0.5f);
    replication_append_enter(fx->rep, &fx->npc_rep, &fx->stream, 5, bits, false, ENTITY_DEF_DETAIL_NEAR);
    append_move(fx, 5, &fx->npc_track, 10.0f, 0.0f, -10.0f, 0.0f);
    pack_view(fx, 1111, NULL, 0);
    end_tick(fx);
    return feed(fx);
}

static void enter_both(fixture *fx) {
    unsigned long before = allocations;
    assert_int_equal(feed_enter_both(fx), 0);
    assert_true(allocations > before); /* the wrapping counts: entering allocates */
}

/* ---- tests ---------------------------------------------------------------- */

static void test_login_checks(void **state) {
    fixture *fx = *state;
    pack_hello(fx);
    assert_int_equal(feed(fx), 0);
    pack_login(fx, 0, PRECISION); /* max_aliases 0 */
    assert_int_equal(feed(fx), -1);
    close_and_drain(fx);
    assert_int_equal(fx->seen.cause, TESSERA_CLIENT_CLOSED_PROTOCOL);
    assert_non_null(strstr(fx->seen.reason, "max_aliases"));
}

static void test_login_bad_precision(void **state) {
    fixture *fx = *state;
    pack_hello(fx);
    assert_int_equal(feed(fx), 0);
    pack_login(fx, MAX_ALIASES, 0.0);
    assert_int_equal(feed(fx), -1);
    close_and_drain(fx);
    assert_int_equal(fx->seen.cause, TESSERA_CLIENT_CLOSED_PROTOCOL);
}

static void test_view_before_login(void **state) {
    fixture *fx = *state;
    begin_tick(fx);
    pack_view(fx, 1, NULL, 0);
    assert_int_equal(feed(fx), -1);
    close_and_drain(fx);
    assert_int_equal(fx->seen.cause, TESSERA_CLIENT_CLOSED_PROTOCOL);
}

/* A ViewUpdate that starts a new tick count says so from on_frame_begin to
 * on_frame_end, and only then. */
static void test_ticks_restart(void **state) {
    fixture *fx = *state;
    log_in(fx);
    for (int restart = 1; restart >= 0; restart--) {
        begin_tick(fx);
        fx->ticks_restart = restart;
        pack_view(fx, 1, NULL, 0);
        assert_int_equal(feed(fx), 0);
        end_tick(fx);
        assert_false(tessera_client_frame_ticks_restart(fx->client));
    }
    assert_int_equal(fx->seen.frames_begun, 2);
    assert_int_equal(fx->seen.ticks_restarts, 1);
}

static void test_enter_move_update_leave(void **state) {
    fixture *fx = *state;
    log_in(fx);
    /* BaseProperties before the player's entity entered: kept, applied at
     * its ENTER, seen by on_enter, no on_properties_changed. */
    pack_base_properties(fx, PLAYER_ID, 250);
    assert_int_equal(feed(fx), 0);
    enter_both(fx);
    assert_string_equal(fx->seen.order, "[EE]");
    assert_int_equal(fx->seen.gold_at_enter, 250);
    assert_int_equal(tessera_client_entity_count(fx->client), 2);

    const tessera_client_entity *player = tessera_client_entity_find(fx->client, PLAYER_ID);
    const tessera_client_entity *npc = tessera_client_entity_find(fx->client, NPC_ID);
    assert_non_null(player);
    assert_non_null(npc);
    assert_true(player->is_owner);
    assert_false(npc->is_owner);
    assert_string_equal(player->type, "Avatar");
    assert_string_equal(npc->type, "Npc");
    assert_int_equal(npc->alias, 5);
    assert_ptr_equal(tessera_client_entity_by_alias(fx->client, 5), npc);
    assert_true(fabs(player->x - 1.0) <= PRECISION && fabs(player->z - 3.0) <= PRECISION);
    assert_true(fabs(npc->x - 10.0) <= PRECISION && fabs(npc->z + 10.0) <= PRECISION);
    const char *name;
    assert_int_equal(entity_state_get_string(npc->state, NPC_NAME, 0, &name, NULL), 0);
    assert_string_equal(name, "goblin");
    int64_t health;
    assert_int_equal(entity_state_get_int(player->state, AVATAR_HEALTH, 0, &health), 0);
    assert_int_equal(health, 100);

    /* Base properties once in: reported at once. */
    pack_base_properties(fx, PLAYER_ID, 300);
    fx->seen.length = 0;
    assert_int_equal(feed(fx), 0);
    assert_string_equal(fx->seen.order, "P");
    assert_true(entity_state_mask_has(&fx->seen.last_changed, AVATAR_GOLD));

    /* A move, a property update and a client call in one update, in that
     * order of callbacks whatever the stream's order. */
    assert_int_equal(entity_state_set_uint(fx->npc, NPC_MOOD, 0, 3), 0);
    begin_tick(fx);
    unsigned bits = replication_alias_bits(MAX_ALIASES);
    assert_true(replication_append_update(fx->rep, &fx->npc_rep, &fx->stream, 5, bits, false, ENTITY_DEF_DETAIL_NEAR) >
                0);
    append_move(fx, 5, &fx->npc_track, 11.0f, 0.0f, -10.0f, 1.0f);
    append_move(fx, 42, &(volatile_track){0}, 1.0f, 1.0f, 1.0f, 0.0f); /* a stale alias: skipped */
    bit_writer args_writer;
    bit_writer_init(&args_writer);
    const entity_def_method *damage = entity_def_class_find_method(
        entity_def_registry_find_class(fx->registry, "Avatar"), ENTITY_DEF_PART_CLIENT, "onDamage");
    entity_state *args = method_call_args_create(damage);
    assert_int_equal(entity_state_set_int(args, 0, 0, -17), 0);
    method_call_encode(args, &args_writer);
    Tessera__Client__ClientCall call = TESSERA__CLIENT__CLIENT_CALL__INIT;
    call.entity_id = PLAYER_ID;
    call.method_id = damage->id;
    call.args.data = (uint8_t *)bit_writer_data(&args_writer);
    call.args.len = bit_writer_bytes(&args_writer);
    Tessera__Client__ClientCall *calls[] = {&call};
    pack_view(fx, 2222, calls, 1);
    end_tick(fx);
    fx->seen.length = 0;
    assert_int_equal(feed(fx), 0);
    assert_string_equal(fx->seen.order, "[MPC]");
    assert_int_equal(fx->seen.last_stamp, 2222);
    assert_int_equal(fx->seen.last_changed_id, NPC_ID);
    assert_true(entity_state_mask_has(&fx->seen.last_changed, NPC_MOOD));
    assert_int_equal(fx->seen.last_damage, -17);
    npc = tessera_client_entity_find(fx->client, NPC_ID);
    assert_true(fabs(npc->x - 11.0) <= PRECISION);
    assert_int_equal(npc->last_move_stamp_us, 2222);
    uint64_t mood;
    assert_int_equal(entity_state_get_uint(npc->state, NPC_MOOD, 0, &mood), 0);
    assert_int_equal(mood, 3);

    /* Steady state: the same kind of update allocates nothing. */
    for (int round = 0; round < 3; round++) {
        assert_int_equal(entity_state_set_uint(fx->npc, NPC_MOOD, 0, 4 + (uint64_t)round), 0);
        begin_tick(fx);
        replication_append_update(fx->rep, &fx->npc_rep, &fx->stream, 5, bits, false, ENTITY_DEF_DETAIL_NEAR);
        append_move(fx, 5, &fx->npc_track, 12.0f + (float)round, 0.0f, -10.0f, 1.0f);
        pack_view(fx, 3333, calls, 1);
        end_tick(fx);
        unsigned long before = allocations;
        assert_int_equal(feed(fx), 0);
        if (round > 0)
            assert_int_equal(allocations - before, 0);
        else
            assert_true(allocations - before <= 2);
    }

    /* Leave: gone from both maps; on_leave before anything else. A call
     * for the entity that left in the same update is stale: dropped. */
    begin_tick(fx);
    replication_append_leave(&fx->stream, 5, bits);
    replication_append_leave(&fx->stream, 77, bits); /* stale */
    Tessera__Client__ClientCall late = TESSERA__CLIENT__CLIENT_CALL__INIT;
    late.entity_id = NPC_ID;
    late.method_id = 3;
    Tessera__Client__ClientCall *late_calls[] = {&late};
    pack_view(fx, 4444, late_calls, 1);
    end_tick(fx);
    fx->seen.length = 0;
    assert_int_equal(feed(fx), 0);
    assert_string_equal(fx->seen.order, "[L]");
    assert_int_equal(fx->seen.last_leave, NPC_ID);
    assert_null(tessera_client_entity_find(fx->client, NPC_ID));
    assert_null(tessera_client_entity_by_alias(fx->client, 5));
    tessera_client_stats stats;
    tessera_client_get_stats(fx->client, &stats);
    assert_int_equal(stats.enters, 2);
    assert_int_equal(stats.leaves, 1);
    assert_int_equal(stats.stale_leaves, 1);
    assert_int_equal(stats.discarded_records, 1);
    assert_int_equal(stats.client_calls, 4);
    assert_int_equal(stats.stale_calls, 1);
    assert_int_equal(stats.base_property_updates, 2);
    assert_int_equal(stats.property_updates, 4);

    bit_writer_close(&args_writer);
    entity_state_free(args);
}

static void test_duplicate_alias(void **state) {
    fixture *fx = *state;
    log_in(fx);
    enter_both(fx);
    begin_tick(fx);
    replication_append_enter(fx->rep, &fx->npc_rep, &fx->stream, 0, replication_alias_bits(MAX_ALIASES), false,
                             ENTITY_DEF_DETAIL_NEAR);
    pack_view(fx, 1, NULL, 0);
    fx->seen.length = 0;
    assert_int_equal(feed(fx), -1);
    assert_string_equal(fx->seen.order, "[");
    close_and_drain(fx);
    assert_int_equal(fx->seen.cause, TESSERA_CLIENT_CLOSED_PROTOCOL);
    assert_non_null(strstr(fx->seen.reason, "alias 0"));
}

static void test_broken_stream(void **state) {
    fixture *fx = *state;
    log_in(fx);
    begin_tick(fx);
    bit_writer_write(&fx->stream, 3, 2); /* EXT */
    bit_writer_write(&fx->stream, 2, 2); /* a reserved extended kind */
    pack_view_raw(fx, 1, NULL, 0, 1);
    assert_int_equal(feed(fx), -1);
    close_and_drain(fx);
    assert_int_equal(fx->seen.cause, TESSERA_CLIENT_CLOSED_PROTOCOL);
    assert_non_null(strstr(fx->seen.reason, "entity stream"));
}

static void test_base_properties_of_another(void **state) {
    fixture *fx = *state;
    log_in(fx);
    pack_base_properties(fx, NPC_ID, 1);
    assert_int_equal(feed(fx), -1);
    close_and_drain(fx);
    assert_int_equal(fx->seen.cause, TESSERA_CLIENT_CLOSED_PROTOCOL);
}

static void test_bad_client_call(void **state) {
    fixture *fx = *state;
    log_in(fx);
    enter_both(fx);
    begin_tick(fx);
    Tessera__Client__ClientCall call = TESSERA__CLIENT__CLIENT_CALL__INIT;
    call.entity_id = PLAYER_ID;
    call.method_id = 1; /* Avatar has one client method */
    Tessera__Client__ClientCall *calls[] = {&call};
    pack_view(fx, 1, calls, 1);
    fx->seen.length = 0;
    assert_int_equal(feed(fx), -1);
    assert_string_equal(fx->seen.order, "[");
    close_and_drain(fx);
    assert_int_equal(fx->seen.cause, TESSERA_CLIENT_CLOSED_PROTOCOL);
}

static void test_close_in_callback(void **state) {
    fixture *fx = *state;
    log_in(fx);
    fx->seen.close_in_enter = 1;
    assert_int_equal(feed_enter_both(fx), -1);
    assert_string_equal(fx->seen.order, "[E");
    assert_int_equal(tessera_client_process_frame(fx->client, fx->frame, fx->frame_length), -1);
    close_and_drain(fx);
    assert_int_equal(fx->seen.cause, TESSERA_CLIENT_CLOSED_BY_CALLER);
}

/* The server echoes no own moves: a correction places the own entity. */
static void test_correction_places_own(void **state) {
    fixture *fx = *state;
    log_in(fx);
    enter_both(fx);
    Tessera__Client__Vector3 position = TESSERA__CLIENT__VECTOR3__INIT;
    position.x = 42.5f;
    position.z = -3.25f;
    Tessera__Client__Correction correction = TESSERA__CLIENT__CORRECTION__INIT;
    correction.position = &position;
    correction.reason = "too fast";
    Tessera__Client__ServerToClient message = TESSERA__CLIENT__SERVER_TO_CLIENT__INIT;
    message.body_case = TESSERA__CLIENT__SERVER_TO_CLIENT__BODY_CORRECTION;
    message.correction = &correction;
    pack(fx, &message);
    assert_int_equal(feed(fx), 0);
    const tessera_client_entity *player = tessera_client_entity_find(fx->client, PLAYER_ID);
    assert_true(player->x == 42.5f && player->z == -3.25f);
}

/* A teleport within the space moves the own entity and keeps the view; one
 * into another space forgets every entity (on_leave for each, the own
 * included), takes the new space's settings, and lets the new stream
 * enter entities under the aliases of the new space, from scratch. */
static void test_teleports(void **state) {
    fixture *fx = *state;
    log_in(fx);
    enter_both(fx);
    Tessera__Client__Vector3 position = TESSERA__CLIENT__VECTOR3__INIT;
    position.x = 120.0f;
    position.z = 7.0f;
    Tessera__Client__Teleported teleported = TESSERA__CLIENT__TELEPORTED__INIT;
    teleported.position = &position;
    teleported.space_name = "test";
    Tessera__Client__ServerToClient message = TESSERA__CLIENT__SERVER_TO_CLIENT__INIT;
    message.body_case = TESSERA__CLIENT__SERVER_TO_CLIENT__BODY_TELEPORTED;
    message.teleported = &teleported;
    pack(fx, &message);
    int leaves = fx->seen.leaves;
    assert_int_equal(feed(fx), 0);
    const tessera_client_entity *player = tessera_client_entity_find(fx->client, PLAYER_ID);
    assert_non_null(player);
    assert_true(player->x == 120.0f && player->z == 7.0f);
    assert_int_equal(fx->seen.leaves, leaves);
    assert_int_equal(tessera_client_entity_count(fx->client), 2);

    /* Into another space, with bounds of its own. */
    Tessera__Client__Vector3 low = TESSERA__CLIENT__VECTOR3__INIT, high = TESSERA__CLIENT__VECTOR3__INIT;
    low.x = low.z = -100.0f;
    low.y = -10.0f;
    high.x = high.z = 100.0f;
    high.y = 10.0f;
    position.x = 5.0f;
    position.z = 5.0f;
    teleported.space_changed = true;
    teleported.space_name = "dungeon";
    teleported.position_precision = PRECISION;
    teleported.world_min = &low;
    teleported.world_max = &high;
    teleported.yaw_steps = YAW_STEPS;
    pack(fx, &message);
    assert_int_equal(feed(fx), 0);
    assert_int_equal(fx->seen.leaves, leaves + 2); /* the npc and the player's own entity */
    assert_int_equal(tessera_client_entity_count(fx->client), 0);
    const tessera_client_login_info *info = tessera_client_login_info_get(fx->client);
    assert_string_equal(info->space_name, "dungeon");
    assert_true(info->world_max[0] == 100.0f && info->world_min[1] == -10.0f);
    tessera_client_stats stats;
    tessera_client_get_stats(fx->client, &stats);
    assert_int_equal(stats.teleports, 2);

    /* The new space's stream: the player's own entity enters first, under
     * alias 3 (nothing of the old space's aliases carries over). */
    fx->config = (volatile_codec_config){0};
    const double min[3] = {-100, -10, -100}, max[3] = {100, 10, 100};
    assert_int_equal(volatile_codec_config_init(&fx->config, PRECISION, min, max, YAW_STEPS), 0);
    volatile_track_init(&fx->player_track);
    begin_tick(fx);
    replication_append_enter(fx->rep, &fx->player_rep, &fx->stream, 3, replication_alias_bits(MAX_ALIASES), true,
                             ENTITY_DEF_DETAIL_NEAR);
    append_move(fx, 3, &fx->player_track, 5.0f, 0.0f, 5.0f, 0.0f);
    pack_view(fx, 2222, NULL, 0);
    end_tick(fx);
    assert_int_equal(feed(fx), 0);
    player = tessera_client_entity_find(fx->client, PLAYER_ID);
    assert_non_null(player);
    assert_int_equal(player->alias, 3);
    assert_true(fabsf(player->x - 5.0f) < 0.1f);
    assert_null(tessera_client_entity_by_alias(fx->client, 5));

    /* A teleport into a space the stream cannot quantize is a protocol error. */
    teleported.position_precision = 0;
    pack(fx, &message);
    assert_int_equal(feed(fx), -1);
    close_and_drain(fx);
    assert_int_equal(fx->seen.cause, TESSERA_CLIENT_CLOSED_PROTOCOL);
}

static void test_unknown_entity_call(void **state) {
    fixture *fx = *state;
    log_in(fx);
    enter_both(fx);
    begin_tick(fx);
    Tessera__Client__ClientCall call = TESSERA__CLIENT__CLIENT_CALL__INIT;
    call.entity_id = 123456; /* never in view */
    Tessera__Client__ClientCall *calls[] = {&call};
    pack_view(fx, 1, calls, 1);
    assert_int_equal(feed(fx), -1);
    close_and_drain(fx);
    assert_int_equal(fx->seen.cause, TESSERA_CLIENT_CLOSED_PROTOCOL);
    assert_non_null(strstr(fx->seen.reason, "not in view"));
}

static void test_calls_without_channel(void **state) {
    fixture *fx = *state;
    log_in(fx);
    enter_both(fx);
    /* Checks pass, but there is no channel: nothing is sent. */
    assert_int_equal(tessera_client_call(fx->client, PLAYER_ID, ENTITY_DEF_PART_BASE, "chat", NULL), -1);
    assert_int_equal(tessera_client_call_raw(fx->client, PLAYER_ID, 0, 0, NULL, 0), -1);
    assert_int_equal(tessera_client_send_move(fx->client, 0, 0, 0, 0), -1);
    tessera_client_stats stats;
    tessera_client_get_stats(fx->client, &stats);
    assert_int_equal(stats.calls_out, 0);
}

/* Flipped bits anywhere in an update (stream, calls, protobuf framing):
 * the client applies it or closes with CLOSED_PROTOCOL, never crashes. Run
 * under valgrind or ASan to mean much. */
static void test_garbled_updates(void **state) {
    fixture *fx = *state;
    uint64_t rng = 0x9e3779b97f4a7c15u;
    close_and_drain(fx); /* the fixture's own client: each round makes one */
    for (int round = 0; round < 300; round++) {
        seen fresh;
        memset(&fresh, 0, sizeof fresh);
        fx->seen = fresh;
        fx->client = tessera_client_create(&fx->loop, &callbacks, &fx->seen);
        log_in(fx);
        volatile_track_init(&fx->player_track);
        volatile_track_init(&fx->npc_track);
        begin_tick(fx);
        unsigned bits = replication_alias_bits(MAX_ALIASES);
        replication_append_enter(fx->rep, &fx->player_rep, &fx->stream, 0, bits, true, ENTITY_DEF_DETAIL_NEAR);
        append_move(fx, 0, &fx->player_track, 1.0f, 2.0f, 3.0f, 0.5f);
        replication_append_enter(fx->rep, &fx->npc_rep, &fx->stream, 5, bits, false, ENTITY_DEF_DETAIL_NEAR);
        append_move(fx, 5, &fx->npc_track, 10.0f, 0.0f, -10.0f, 0.0f);
        Tessera__Client__ClientCall call = TESSERA__CLIENT__CLIENT_CALL__INIT;
        uint8_t args[2] = {0x11, 0x00};
        call.entity_id = PLAYER_ID;
        call.args.data = args;
        call.args.len = sizeof args;
        Tessera__Client__ClientCall *calls[] = {&call};
        pack_view(fx, 1, calls, 1);
        for (int flips = 1 + round % 4; flips > 0; flips--) {
            rng = rng * 6364136223846793005u + 1442695040888963407u;
            size_t bit = (size_t)(rng >> 33) % (fx->frame_length * 8);
            fx->frame[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        }
        int rc = feed(fx);
        if (rc != 0) {
            uv_run(&fx->loop, UV_RUN_DEFAULT);
            assert_int_equal(fx->seen.closed, 1);
            assert_int_equal(fx->seen.cause, TESSERA_CLIENT_CLOSED_PROTOCOL);
        } else {
            close_and_drain(fx);
        }
    }
    /* The teardown closes the fixture's client: give it a fresh one. */
    memset(&fx->seen, 0, sizeof fx->seen);
    fx->client = tessera_client_create(&fx->loop, &callbacks, &fx->seen);
}

/* ---- game events ---------------------------------------------------------- */

/* One GameEvent as the server codes it: its message and the bits of its
 * fields, which the message points at. */
typedef struct coded_event {
    Tessera__Client__GameEvent message;
    bit_writer args;
} coded_event;

/* A state for the fields of the fixture's event `name`, at their defaults. */
static entity_state *event_fields(fixture *fx, const char *name) {
    const entity_def_method *event = entity_def_registry_find_event(fx->registry, name);
    assert_non_null(event);
    return method_call_args_create(event);
}

/* Codes `fields` (a state of event `name`'s fields; NULL: the defaults) as
 * a GameEvent of `name` from `source_id`, as the cellapp does. */
static void code_event(fixture *fx, coded_event *out, const char *name, uint64_t source_id,
                       const entity_state *fields) {
    const entity_def_method *event = entity_def_registry_find_event(fx->registry, name);
    assert_non_null(event);
    entity_state *defaults = fields ? NULL : method_call_args_create(event);
    bit_writer_init(&out->args);
    method_call_encode(fields ? fields : defaults, &out->args);
    entity_state_free(defaults);
    out->message = (Tessera__Client__GameEvent)TESSERA__CLIENT__GAME_EVENT__INIT;
    out->message.event_id = event->id;
    out->message.source_id = source_id;
    out->message.args.data = (uint8_t *)bit_writer_data(&out->args);
    out->message.args.len = bit_writer_bytes(&out->args);
}

static void coded_event_free(coded_event *coded) { bit_writer_close(&coded->args); }

static void code_spell_hit(fixture *fx, coded_event *out, uint64_t source_id, uint64_t caster, uint64_t spell_id,
                           int64_t amount) {
    entity_state *fields = event_fields(fx, "spell_hit");
    assert_int_equal(entity_state_set_entity(fields, 0, 0, caster), 0);
    assert_int_equal(entity_state_set_uint(fields, 1, 0, spell_id), 0);
    assert_int_equal(entity_state_set_int(fields, 2, 0, amount), 0);
    code_event(fx, out, "spell_hit", source_id, fields);
    entity_state_free(fields);
}

static void code_announce(fixture *fx, coded_event *out, uint64_t source_id, const char *text) {
    entity_state *fields = event_fields(fx, "announce");
    assert_int_equal(entity_state_set_string(fields, 0, 0, text, strlen(text)), 0);
    code_event(fx, out, "announce", source_id, fields);
    entity_state_free(fields);
}

/* A ServerToClient holding `event` alone (field 13). */
static void pack_lone_event(fixture *fx, Tessera__Client__GameEvent *event) {
    Tessera__Client__ServerToClient message = TESSERA__CLIENT__SERVER_TO_CLIENT__INIT;
    message.body_case = TESSERA__CLIENT__SERVER_TO_CLIENT__BODY_EVENT;
    message.event = event;
    pack(fx, &message);
}

static uint64_t game_events_counted(fixture *fx) {
    tessera_client_stats stats;
    tessera_client_get_stats(fx->client, &stats);
    return stats.game_events;
}

/* Closes the fixture's client (unless it is closing already), runs the
 * loop until it is gone, and gives the fixture a fresh one, not logged in. */
static void fresh_client(fixture *fx) {
    close_and_drain(fx);
    memset(&fx->seen, 0, sizeof fx->seen);
    fx->client = tessera_client_create(&fx->loop, &callbacks, &fx->seen);
}

/* The client closed for a protocol error whose reason holds every needle. */
static void expect_protocol_close(fixture *fx, const char *needle1, const char *needle2) {
    close_and_drain(fx);
    assert_int_equal(fx->seen.cause, TESSERA_CLIENT_CLOSED_PROTOCOL);
    if (needle1 && !strstr(fx->seen.reason, needle1))
        fail_msg("reason \"%s\" does not contain \"%s\"", fx->seen.reason, needle1);
    if (needle2 && !strstr(fx->seen.reason, needle2))
        fail_msg("reason \"%s\" does not contain \"%s\"", fx->seen.reason, needle2);
}

/* The events of a ViewUpdate come after its moves, property updates and
 * calls, in their order, with their fields decoded; the source may be an
 * entity the client does not see, or 0. */
static void test_game_events_in_view(void **state) {
    fixture *fx = *state;
    log_in(fx);
    enter_both(fx);
    assert_int_equal(game_events_counted(fx), 0);

    assert_int_equal(entity_state_set_uint(fx->npc, NPC_MOOD, 0, 6), 0);
    begin_tick(fx);
    unsigned bits = replication_alias_bits(MAX_ALIASES);
    assert_true(replication_append_update(fx->rep, &fx->npc_rep, &fx->stream, 5, bits, false, ENTITY_DEF_DETAIL_NEAR) >
                0);
    append_move(fx, 5, &fx->npc_track, 11.0f, 0.0f, -10.0f, 1.0f);
    const entity_def_method *damage = entity_def_class_find_method(
        entity_def_registry_find_class(fx->registry, "Avatar"), ENTITY_DEF_PART_CLIENT, "onDamage");
    entity_state *args = method_call_args_create(damage);
    assert_int_equal(entity_state_set_int(args, 0, 0, -5), 0);
    bit_writer args_writer;
    bit_writer_init(&args_writer);
    method_call_encode(args, &args_writer);
    Tessera__Client__ClientCall call = TESSERA__CLIENT__CLIENT_CALL__INIT;
    call.entity_id = PLAYER_ID;
    call.method_id = damage->id;
    call.args.data = (uint8_t *)bit_writer_data(&args_writer);
    call.args.len = bit_writer_bytes(&args_writer);
    Tessera__Client__ClientCall *calls[] = {&call};
    coded_event hit, said, over;
    code_spell_hit(fx, &hit, NPC_ID, NPC_ID, 1234, -2000);
    code_announce(fx, &said, 424242, "the gate opens"); /* a source out of view */
    code_event(fx, &over, "round_over", 0, NULL);
    Tessera__Client__GameEvent *events[] = {&hit.message, &said.message, &over.message};
    pack_view_full(fx, 5555, calls, 1, events, 3, 0);
    end_tick(fx);
    fx->seen.length = 0;
    assert_int_equal(feed(fx), 0);
    assert_string_equal(fx->seen.order, "[MPCVVV]");
    assert_int_equal(fx->seen.last_damage, -5);
    assert_int_equal(fx->seen.events, 3);
    const seen_event *log = fx->seen.event_log;
    assert_string_equal(log[0].name, "spell_hit");
    assert_int_equal(log[0].id, EVENT_SPELL_HIT);
    assert_int_equal(log[0].source, NPC_ID);
    assert_string_equal(log[0].fields, "caster=#9000,spell_id=1234,amount=-2000");
    assert_string_equal(log[1].name, "announce");
    assert_int_equal(log[1].id, EVENT_ANNOUNCE);
    assert_int_equal(log[1].source, 424242);
    assert_string_equal(log[1].fields, "text='the gate opens'");
    assert_string_equal(log[2].name, "round_over");
    assert_int_equal(log[2].id, EVENT_ROUND_OVER);
    assert_int_equal(log[2].source, 0);
    assert_string_equal(log[2].fields, "");
    assert_int_equal(game_events_counted(fx), 3);
    uint64_t mood;
    assert_int_equal(entity_state_get_uint(tessera_client_entity_find(fx->client, NPC_ID)->state, NPC_MOOD, 0, &mood),
                     0);
    assert_int_equal(mood, 6);

    /* An update of events only; the same event twice, in order. */
    coded_event second;
    code_spell_hit(fx, &second, PLAYER_ID, PLAYER_ID, 7, 2047);
    Tessera__Client__GameEvent *more[] = {&second.message, &hit.message};
    begin_tick(fx);
    pack_view_full(fx, 6666, NULL, 0, more, 2, 0);
    end_tick(fx);
    fx->seen.length = 0;
    assert_int_equal(feed(fx), 0);
    assert_string_equal(fx->seen.order, "[VV]");
    assert_int_equal(fx->seen.events, 5);
    assert_int_equal(log[3].source, PLAYER_ID);
    assert_string_equal(log[3].fields, "caster=#7,spell_id=7,amount=2047");
    assert_string_equal(log[4].fields, "caster=#9000,spell_id=1234,amount=-2000");
    tessera_client_stats stats;
    tessera_client_get_stats(fx->client, &stats);
    assert_int_equal(stats.game_events, 5);
    assert_int_equal(stats.client_calls, 1);

    coded_event_free(&hit);
    coded_event_free(&said);
    coded_event_free(&over);
    coded_event_free(&second);
    bit_writer_close(&args_writer);
    entity_state_free(args);
}

/* A lone ServerToClient.event: delivered at once, outside any frame, even
 * before the player's own entity entered. */
static void test_game_event_alone(void **state) {
    fixture *fx = *state;
    log_in(fx);
    coded_event said;
    code_announce(fx, &said, 0, "server restarts soon");
    pack_lone_event(fx, &said.message);
    fx->seen.length = 0;
    assert_int_equal(feed(fx), 0);
    assert_string_equal(fx->seen.order, "V");
    assert_int_equal(fx->seen.events, 1);
    assert_string_equal(fx->seen.event_log[0].name, "announce");
    assert_int_equal(fx->seen.event_log[0].source, 0);
    assert_string_equal(fx->seen.event_log[0].fields, "text='server restarts soon'");
    assert_int_equal(game_events_counted(fx), 1);

    enter_both(fx);
    coded_event hit;
    code_spell_hit(fx, &hit, PLAYER_ID, NPC_ID, 3, -1);
    pack_lone_event(fx, &hit.message);
    fx->seen.length = 0;
    assert_int_equal(feed(fx), 0);
    assert_string_equal(fx->seen.order, "V");
    assert_int_equal(fx->seen.events, 2);
    assert_int_equal(fx->seen.event_log[1].id, EVENT_SPELL_HIT);
    assert_int_equal(fx->seen.event_log[1].source, PLAYER_ID);
    assert_string_equal(fx->seen.event_log[1].fields, "caster=#9000,spell_id=3,amount=-1");
    assert_int_equal(game_events_counted(fx), 2);
    assert_int_equal(tessera_client_get_state(fx->client), TESSERA_CLIENT_IN_WORLD);
    coded_event_free(&said);
    coded_event_free(&hit);
}

/* Before the login reply a lone event is a protocol error. */
static void test_game_event_before_login(void **state) {
    fixture *fx = *state;
    pack_hello(fx);
    assert_int_equal(feed(fx), 0);
    coded_event over;
    code_event(fx, &over, "round_over", 0, NULL);
    pack_lone_event(fx, &over.message);
    assert_int_equal(feed(fx), -1);
    assert_int_equal(fx->seen.events, 0);
    expect_protocol_close(fx, "game event", NULL);
    coded_event_free(&over);
}

/* An event id the definitions do not declare, in a ViewUpdate (refused
 * before any of its callbacks, the client call included) and alone. */
static void test_game_event_unknown(void **state) {
    fixture *fx = *state;
    log_in(fx);
    enter_both(fx);
    const entity_def_method *damage = entity_def_class_find_method(
        entity_def_registry_find_class(fx->registry, "Avatar"), ENTITY_DEF_PART_CLIENT, "onDamage");
    entity_state *args = method_call_args_create(damage);
    bit_writer args_writer;
    bit_writer_init(&args_writer);
    method_call_encode(args, &args_writer);
    Tessera__Client__ClientCall call = TESSERA__CLIENT__CLIENT_CALL__INIT;
    call.entity_id = PLAYER_ID;
    call.method_id = damage->id;
    call.args.data = (uint8_t *)bit_writer_data(&args_writer);
    call.args.len = bit_writer_bytes(&args_writer);
    Tessera__Client__ClientCall *calls[] = {&call};
    coded_event good, bad;
    code_spell_hit(fx, &good, NPC_ID, NPC_ID, 1, 1);
    code_event(fx, &bad, "round_over", 0, NULL);
    bad.message.event_id = EVENT_COUNT; /* one past the last */
    Tessera__Client__GameEvent *events[] = {&good.message, &bad.message};
    begin_tick(fx);
    pack_view_full(fx, 1, calls, 1, events, 2, 0);
    fx->seen.length = 0;
    assert_int_equal(feed(fx), -1);
    assert_string_equal(fx->seen.order, "[");
    assert_int_equal(fx->seen.calls, 0);
    assert_int_equal(fx->seen.events, 0);
    assert_int_equal(game_events_counted(fx), 0);
    expect_protocol_close(fx, "game event 3", "3 events");

    /* alone, and far out of range (not taken modulo anything) */
    static const uint32_t ids[] = {EVENT_COUNT, 65536 + EVENT_ANNOUNCE, UINT32_MAX};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        fresh_client(fx);
        log_in(fx);
        bad.message.event_id = ids[i];
        pack_lone_event(fx, &bad.message);
        assert_int_equal(feed(fx), -1);
        assert_int_equal(fx->seen.events, 0);
        char needle[32];
        snprintf(needle, sizeof needle, "game event %" PRIu32 ",", ids[i]);
        expect_protocol_close(fx, needle, "do not declare");
    }
    coded_event_free(&good);
    coded_event_free(&bad);
    bit_writer_close(&args_writer);
    entity_state_free(args);
}

/* Fields that are not the declared types: too short, trailing bytes,
 * another event's fields. In a ViewUpdate nothing of it is delivered (not
 * even the good event before the bad one); alone it closes the client too. */
static void test_game_event_bad_fields(void **state) {
    fixture *fx = *state;
    coded_event hit, said, over;
    code_spell_hit(fx, &hit, NPC_ID, NPC_ID, 9, 9);
    code_announce(fx, &said, 0, "hi");
    code_event(fx, &over, "round_over", 0, NULL);
    assert_int_equal(over.message.args.len, 0);
    uint8_t trailing[64];
    assert_true(said.message.args.len + 1 <= sizeof trailing);
    memcpy(trailing, said.message.args.data, said.message.args.len);
    trailing[said.message.args.len] = 0xff;
    uint8_t one_byte[1] = {0x01};
    static const char *const names[] = {"spell_hit", "announce", "round_over", "spell_hit"};
    struct {
        uint32_t event_id;
        const uint8_t *data;
        size_t length;
    } cases[] = {
        {EVENT_SPELL_HIT, hit.message.args.data, hit.message.args.len - 1}, /* truncated */
        {EVENT_ANNOUNCE, trailing, said.message.args.len + 1},              /* a byte too many */
        {EVENT_ROUND_OVER, one_byte, 1},                                    /* fields where none are */
        {EVENT_SPELL_HIT, said.message.args.data, said.message.args.len},   /* announce's fields */
    };
    for (size_t lone = 0; lone < 2; lone++) {
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            if (lone || i > 0) fresh_client(fx);
            log_in(fx);
            Tessera__Client__GameEvent bad = TESSERA__CLIENT__GAME_EVENT__INIT;
            bad.event_id = cases[i].event_id;
            bad.args.data = (uint8_t *)cases[i].data;
            bad.args.len = cases[i].length;
            if (lone) {
                pack_lone_event(fx, &bad);
            } else {
                Tessera__Client__GameEvent *events[] = {&over.message, &bad};
                begin_tick(fx);
                pack_view_full(fx, 1, NULL, 0, events, 2, 0);
            }
            fx->seen.length = 0;
            assert_int_equal(feed(fx), -1);
            assert_string_equal(fx->seen.order, lone ? "" : "[");
            assert_int_equal(fx->seen.events, 0);
            assert_int_equal(game_events_counted(fx), 0);
            expect_protocol_close(fx, names[i], "not its declared types");
        }
    }
    /* the same fields, whole, are fine */
    fresh_client(fx);
    log_in(fx);
    pack_lone_event(fx, &hit.message);
    assert_int_equal(feed(fx), 0);
    assert_string_equal(fx->seen.event_log[0].fields, "caster=#9000,spell_id=9,amount=9");
    coded_event_free(&hit);
    coded_event_free(&said);
    coded_event_free(&over);
}

/* Definitions without events: any event is unknown. */
static void test_game_event_without_events(void **state) {
    fixture *fx = *state;
    log_in(fx);
    assert_int_equal(entity_def_registry_event_count(tessera_client_definitions(fx->client)), 0);
    Tessera__Client__GameEvent event = TESSERA__CLIENT__GAME_EVENT__INIT;
    Tessera__Client__GameEvent *events[] = {&event};
    begin_tick(fx);
    pack_view_full(fx, 1, NULL, 0, events, 1, 0);
    assert_int_equal(feed(fx), -1);
    assert_int_equal(fx->seen.events, 0);
    expect_protocol_close(fx, "game event 0", "0 events");
}

/* ---- the other baseapps a login reply lists --------------------------------- */

/* The usable addresses are kept, in order; an entry that is no IP literal
 * with a port is skipped. */
static void test_login_reply_baseapps(void **state) {
    fixture *fx = *state;
    pack_hello(fx);
    assert_int_equal(feed(fx), 0);
    const char *const baseapps[] = {
        "127.0.0.1:7001", "not-an-address:7002", "[::1]:7003", "10.0.0.1:99999", "10.0.0.2", "10.0.0.3:7004",
    };
    pack_login_with(fx, MAX_ALIASES, PRECISION, baseapps, sizeof baseapps / sizeof baseapps[0], false);
    assert_int_equal(feed(fx), 0);
    const tessera_client_login_info *info = tessera_client_login_info_get(fx->client);
    assert_non_null(info);
    assert_int_equal(info->baseapp_count, 3);
    assert_string_equal(info->baseapps[0], "127.0.0.1:7001");
    assert_string_equal(info->baseapps[1], "[::1]:7003");
    assert_string_equal(info->baseapps[2], "10.0.0.3:7004");
    assert_string_equal(info->session_token, "fresh0token");
}

/* ---- fake baseapps over real sockets ---------------------------------------- */

/* How a fake baseapp answers a login or reconnect. */
typedef enum fake_answer {
    FAKE_REDIRECT_NO_TOKEN, /* a LoginRedirect without a token, to redirect_port */
    FAKE_LOGIN_REPLY,       /* a LoginReply (reconnected for a Reconnect) listing two other baseapps */
    FAKE_UNAVAILABLE,       /* Error ERROR_UNAVAILABLE with retry_after_ms FAKE_RETRY_AFTER_MS */
} fake_answer;

#define FAKE_RETRY_AFTER_MS 750
/* The most connections one test makes to one fake baseapp. */
#define FAKE_MAX_CHANNELS 8

/* One fake baseapp: a listener on 127.0.0.1 and the channels it accepted.
 * It says hello, records what each login message carried and answers it
 * as `answer` says. */
typedef struct fake_baseapp {
    fixture *fx; /* packs the LoginReply */
    uv_tcp_t listener;
    int port;
    fake_answer answer;
    int redirect_port;
    channel *channels[FAKE_MAX_CHANNELS]; /* open ones; NULL once closed */
    bool stopped;                         /* fake_stop ran */
    int connections;
    int hellos, logins, reconnects, token_logins; /* messages received */
    char account[80], token[80];                  /* of the last Reconnect or TokenLogin */
} fake_baseapp;

static void fake_on_frame(channel *ch, const uint8_t *frame, size_t length) {
    fake_baseapp *fake = channel_user_data(ch);
    Tessera__Client__ClientToServer *message = tessera__client__client_to_server__unpack(NULL, length, frame);
    assert_non_null(message);
    Tessera__Client__ServerToClient answer = TESSERA__CLIENT__SERVER_TO_CLIENT__INIT;
    Tessera__Client__ServerHello hello = TESSERA__CLIENT__SERVER_HELLO__INIT;
    Tessera__Client__LoginRedirect redirect = TESSERA__CLIENT__LOGIN_REDIRECT__INIT;
    Tessera__Client__Error error = TESSERA__CLIENT__ERROR__INIT;
    bool reconnect = message->body_case == TESSERA__CLIENT__CLIENT_TO_SERVER__BODY_RECONNECT;
    switch (message->body_case) {
        case TESSERA__CLIENT__CLIENT_TO_SERVER__BODY_HELLO:
            fake->hellos++;
            hello.protocol_version = TESSERA__CLIENT__PROTOCOL_VERSION__PROTOCOL_VERSION;
            hello.server_name = "fake";
            answer.body_case = TESSERA__CLIENT__SERVER_TO_CLIENT__BODY_HELLO;
            answer.hello = &hello;
            assert_int_equal(channel_send_message(ch, &answer.base), 0);
            break;
        case TESSERA__CLIENT__CLIENT_TO_SERVER__BODY_RECONNECT:
        case TESSERA__CLIENT__CLIENT_TO_SERVER__BODY_LOGIN:
            if (reconnect) {
                fake->reconnects++;
                snprintf(fake->account, sizeof fake->account, "%s", message->reconnect->account);
                snprintf(fake->token, sizeof fake->token, "%s", message->reconnect->session_token);
            } else {
                fake->logins++;
            }
            if (fake->answer == FAKE_REDIRECT_NO_TOKEN) {
                redirect.host = "127.0.0.1";
                redirect.port = (uint32_t)fake->redirect_port;
                redirect.token = "";
                redirect.reason = "your entity is there";
                answer.body_case = TESSERA__CLIENT__SERVER_TO_CLIENT__BODY_LOGIN_REDIRECT;
                answer.login_redirect = &redirect;
                assert_int_equal(channel_send_message(ch, &answer.base), 0);
            } else if (fake->answer == FAKE_UNAVAILABLE) {
                error.code = TESSERA__CLIENT__ERROR_CODE__ERROR_UNAVAILABLE;
                error.message = "its baseapp died: being restored";
                error.retry_after_ms = FAKE_RETRY_AFTER_MS;
                answer.body_case = TESSERA__CLIENT__SERVER_TO_CLIENT__BODY_ERROR;
                answer.error = &error;
                assert_int_equal(channel_send_message(ch, &answer.base), 0);
            } else {
                const char *const others[] = {"127.0.0.1:7101", "127.0.0.1:7102"};
                pack_login_with(fake->fx, MAX_ALIASES, PRECISION, others, 2, reconnect);
                assert_int_equal(channel_send(ch, fake->fx->frame, fake->fx->frame_length), 0);
            }
            break;
        case TESSERA__CLIENT__CLIENT_TO_SERVER__BODY_TOKEN_LOGIN:
            fake->token_logins++;
            snprintf(fake->account, sizeof fake->account, "%s", message->token_login->account);
            snprintf(fake->token, sizeof fake->token, "%s", message->token_login->token);
            pack_login_with(fake->fx, MAX_ALIASES, PRECISION, NULL, 0, false);
            assert_int_equal(channel_send(ch, fake->fx->frame, fake->fx->frame_length), 0);
            break;
        default:
            fail_msg("the fake baseapp got an unexpected message (body %d)", (int)message->body_case);
    }
    tessera__client__client_to_server__free_unpacked(message, NULL);
}

static void fake_on_close(channel *ch, const char *reason) {
    (void)reason;
    fake_baseapp *fake = channel_user_data(ch);
    for (int i = 0; i < FAKE_MAX_CHANNELS; i++)
        if (fake->channels[i] == ch) fake->channels[i] = NULL;
}

static void fake_on_connection(uv_stream_t *listener, int status) {
    fake_baseapp *fake = listener->data;
    assert_int_equal(status, 0);
    assert_true(fake->connections < FAKE_MAX_CHANNELS);
    channel_options options = channel_default_peer_options();
    channel_callbacks server_callbacks = {.on_frame = fake_on_frame, .on_close = fake_on_close};
    channel *ch = channel_accept(listener, &options, &server_callbacks, fake);
    assert_non_null(ch);
    fake->channels[fake->connections++] = ch;
}

/* A fake baseapp listening on 127.0.0.1 (a port of the kernel's choice),
 * owned by the fixture. */
static fake_baseapp *fake_start(fixture *fx, fake_answer answer) {
    assert_true(fx->fake_count < MAX_FAKES);
    fake_baseapp *fake = calloc(1, sizeof *fake);
    assert_non_null(fake);
    fx->fakes[fx->fake_count++] = fake;
    fake->fx = fx;
    fake->answer = answer;
    char err[256];
    if (channel_listen(&fx->loop, &fake->listener, "127.0.0.1", 0, fake_on_connection, err, sizeof err) != 0)
        fail_msg("%s", err);
    fake->listener.data = fake;
    fake->port = channel_listener_port(&fake->listener);
    assert_true(fake->port > 0);
    return fake;
}

/* Closes what is left of the fake: its channels and its listener (the
 * teardown's loop run releases them, then the fake is freed). Idempotent. */
static void fake_stop(fake_baseapp *fake) {
    if (fake->stopped) return;
    fake->stopped = true;
    for (int i = 0; i < FAKE_MAX_CHANNELS; i++)
        if (fake->channels[i]) channel_close(fake->channels[i], "test over");
    uv_close((uv_handle_t *)&fake->listener, NULL);
}

/* A watchdog on the stack of run_until: it expires, and it is released
 * before that function returns. */
typedef struct watchdog {
    uv_timer_t timer;
    int expired, closed;
} watchdog;

static void watchdog_expired(uv_timer_t *timer) {
    watchdog *w = timer->data;
    w->expired = 1;
}

static void watchdog_closed(uv_handle_t *handle) {
    watchdog *w = handle->data;
    w->closed = 1;
}

/* Runs the loop until `done` holds or the client closed, within 5 s (a
 * local exchange takes milliseconds). */
static void run_until(fixture *fx, bool (*done)(const fixture *, const fake_baseapp *), const fake_baseapp *fake) {
    watchdog w = {.expired = 0, .closed = 0};
    uv_timer_init(&fx->loop, &w.timer);
    w.timer.data = &w;
    uv_timer_start(&w.timer, watchdog_expired, 5000, 0);
    while (!w.expired && !fx->seen.closed && !done(fx, fake)) uv_run(&fx->loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&w.timer, watchdog_closed);
    while (!w.closed) uv_run(&fx->loop, UV_RUN_ONCE);
    if (w.expired) fail_msg("the client neither got there nor closed within 5 s");
}

static bool in_world(const fixture *fx, const fake_baseapp *fake) {
    (void)fake;
    return tessera_client_get_state(fx->client) == TESSERA_CLIENT_IN_WORLD;
}

/* Runs the loop until the client is in the world or closed. */
static void run_until_settled(fixture *fx) { run_until(fx, in_world, NULL); }

/* A Reconnect at a baseapp that does not hold the session is redirected
 * without a token; the SDK sends the same Reconnect to the baseapp named,
 * which takes the player back. */
static void test_reconnect_follows_redirect_without_token(void **state) {
    fixture *fx = *state;
    fake_baseapp *first = fake_start(fx, FAKE_REDIRECT_NO_TOKEN);
    fake_baseapp *holder = fake_start(fx, FAKE_LOGIN_REPLY);
    first->redirect_port = holder->port;
    assert_int_equal(tessera_client_reconnect(fx->client, "alice", "0123abcd"), 0);
    assert_int_equal(tessera_client_connect(fx->client, "127.0.0.1", first->port), 0);
    run_until_settled(fx);

    assert_int_equal(fx->seen.closed, 0);
    assert_int_equal(tessera_client_get_state(fx->client), TESSERA_CLIENT_IN_WORLD);
    assert_int_equal(first->reconnects, 1);
    assert_string_equal(first->account, "alice");
    assert_string_equal(first->token, "0123abcd");
    assert_int_equal(holder->connections, 1);
    assert_int_equal(holder->reconnects, 1);
    assert_int_equal(holder->logins, 0);
    assert_string_equal(holder->account, "alice");
    assert_string_equal(holder->token, "0123abcd");
    assert_int_equal(fx->seen.redirected, 1);

    const tessera_client_login_info *info = tessera_client_login_info_get(fx->client);
    assert_non_null(info);
    assert_true(info->reconnected);
    assert_int_equal(info->baseapp_count, 2);
    assert_string_equal(info->baseapps[0], "127.0.0.1:7101");
    assert_string_equal(info->baseapps[1], "127.0.0.1:7102");
    char expected[64];
    snprintf(expected, sizeof expected, "127.0.0.1:%d", holder->port);
    assert_string_equal(tessera_client_address(fx->client), expected);
    tessera_client_stats stats;
    tessera_client_get_stats(fx->client, &stats);
    assert_int_equal(stats.redirects, 1);
    assert_int_equal(stats.reconnect_requests, 2);
    assert_int_equal(stats.password_logins, 0);
}

/* Sends a LoginRedirect from the fake's first connection. */
static void fake_redirect(fake_baseapp *fake, int port, const char *token) {
    Tessera__Client__LoginRedirect redirect = TESSERA__CLIENT__LOGIN_REDIRECT__INIT;
    redirect.host = "127.0.0.1";
    redirect.port = (uint32_t)port;
    redirect.token = (char *)token;
    redirect.reason = "go there";
    Tessera__Client__ServerToClient answer = TESSERA__CLIENT__SERVER_TO_CLIENT__INIT;
    answer.body_case = TESSERA__CLIENT__SERVER_TO_CLIENT__BODY_LOGIN_REDIRECT;
    answer.login_redirect = &redirect;
    assert_non_null(fake->channels[0]);
    assert_int_equal(channel_send_message(fake->channels[0], &answer.base), 0);
}

static bool back_in_world_at(const fixture *fx, const fake_baseapp *holder) {
    return holder->reconnects == 1 && tessera_client_get_state(fx->client) == TESSERA_CLIENT_IN_WORLD;
}

/* In the world, a LoginRedirect without a token: the baseapp was declared
 * dead and the player's session lives at the address named. The SDK sends
 * a Reconnect there with the session token of its login reply. */
static void test_in_world_redirect_without_token_reconnects(void **state) {
    fixture *fx = *state;
    fake_baseapp *dead = fake_start(fx, FAKE_LOGIN_REPLY);
    fake_baseapp *holder = fake_start(fx, FAKE_LOGIN_REPLY);
    assert_int_equal(tessera_client_login(fx->client, "alice", "password"), 0);
    assert_int_equal(tessera_client_connect(fx->client, "127.0.0.1", dead->port), 0);
    run_until_settled(fx);
    assert_int_equal(tessera_client_get_state(fx->client), TESSERA_CLIENT_IN_WORLD);

    fake_redirect(dead, holder->port, "");
    run_until(fx, back_in_world_at, holder);
    assert_int_equal(fx->seen.closed, 0);
    assert_int_equal(fx->seen.redirected, 1);
    assert_int_equal(holder->reconnects, 1);
    assert_int_equal(holder->logins, 0);
    assert_string_equal(holder->account, "alice");
    assert_string_equal(holder->token, "fresh0token");
    assert_true(tessera_client_login_info_get(fx->client)->reconnected);
}

static bool never(const fixture *fx, const fake_baseapp *fake) {
    (void)fx;
    (void)fake;
    return false;
}

static bool token_login_answered(const fixture *fx, const fake_baseapp *fake) {
    return fake->token_logins == 1 && tessera_client_get_state(fx->client) == TESSERA_CLIENT_IN_WORLD;
}

/* A redirect with a token to a baseapp that cannot be dialled (it died
 * after accepting the client): on_closed can read the token, and a new
 * client shows it elsewhere with tessera_client_token_login. */
static void test_undialled_redirect_keeps_its_token(void **state) {
    fixture *fx = *state;
    fake_baseapp *first = fake_start(fx, FAKE_LOGIN_REPLY);
    fake_baseapp *gone = fake_start(fx, FAKE_LOGIN_REPLY);
    int gone_port = gone->port;
    fake_stop(gone); /* nothing listens there any more */
    assert_int_equal(tessera_client_login(fx->client, "alice", "password"), 0);
    assert_int_equal(tessera_client_connect(fx->client, "127.0.0.1", first->port), 0);
    run_until_settled(fx);
    fake_redirect(first, gone_port, "handover0token");
    run_until(fx, never, first);
    assert_int_equal(fx->seen.closed, 1);
    assert_int_equal(fx->seen.cause, TESSERA_CLIENT_CLOSED_CONNECT_FAILED);
    assert_string_equal(fx->seen.redirect_token, "handover0token");

    /* Elsewhere, on a new client. */
    fake_baseapp *survivor = fake_start(fx, FAKE_LOGIN_REPLY);
    memset(&fx->seen, 0, sizeof fx->seen);
    fx->client = tessera_client_create(&fx->loop, &callbacks, &fx->seen);
    assert_non_null(fx->client);
    assert_int_equal(tessera_client_token_login(fx->client, "alice", ""), -1);
    assert_int_equal(tessera_client_token_login(fx->client, "alice", "handover0token"), 0);
    assert_int_equal(tessera_client_token_login(fx->client, "alice", "handover0token"), -1); /* one request */
    assert_int_equal(tessera_client_connect(fx->client, "127.0.0.1", survivor->port), 0);
    run_until(fx, token_login_answered, survivor);
    assert_int_equal(survivor->token_logins, 1);
    assert_string_equal(survivor->account, "alice");
    assert_string_equal(survivor->token, "handover0token");
    assert_int_equal(tessera_client_get_state(fx->client), TESSERA_CLIENT_IN_WORLD);
    assert_string_equal(tessera_client_redirect_token(fx->client), "");
}

/* A token-less redirect stands for nothing when the client sent its
 * password: a protocol error, and nobody is dialled. */
static void test_login_redirect_without_token_refused(void **state) {
    fixture *fx = *state;
    fake_baseapp *first = fake_start(fx, FAKE_REDIRECT_NO_TOKEN);
    fake_baseapp *other = fake_start(fx, FAKE_LOGIN_REPLY);
    first->redirect_port = other->port;
    assert_int_equal(tessera_client_login(fx->client, "alice", "password"), 0);
    assert_int_equal(tessera_client_connect(fx->client, "127.0.0.1", first->port), 0);
    run_until_settled(fx);

    assert_int_equal(fx->seen.closed, 1);
    assert_int_equal(fx->seen.cause, TESSERA_CLIENT_CLOSED_PROTOCOL);
    assert_non_null(strstr(fx->seen.reason, "without a token"));
    assert_int_equal(first->logins, 1);
    assert_int_equal(other->connections, 0);
    assert_int_equal(fx->seen.redirected, 0);
}

/* A Reconnect bounced between baseapps follows at most
 * TESSERA_CLIENT_MAX_REDIRECTS (4) redirects, as a login does. */
static void test_reconnect_redirect_limit(void **state) {
    fixture *fx = *state;
    fake_baseapp *loop_back = fake_start(fx, FAKE_REDIRECT_NO_TOKEN);
    loop_back->redirect_port = loop_back->port; /* back to itself, every time */
    assert_int_equal(tessera_client_reconnect(fx->client, "alice", "0123abcd"), 0);
    assert_int_equal(tessera_client_connect(fx->client, "127.0.0.1", loop_back->port), 0);
    run_until_settled(fx);

    assert_int_equal(fx->seen.closed, 1);
    assert_int_equal(fx->seen.cause, TESSERA_CLIENT_CLOSED_PROTOCOL);
    assert_non_null(strstr(fx->seen.reason, "redirected too often"));
    assert_int_equal(loop_back->connections, 5);
    assert_int_equal(loop_back->reconnects, 5);
    assert_int_equal(fx->seen.redirected, 4);
}

/* ERROR_UNAVAILABLE answering a Reconnect (the session's baseapp died and
 * is being restored) reaches the caller with its retry_after_ms. */
static void test_reconnect_unavailable_retry_after(void **state) {
    fixture *fx = *state;
    fake_baseapp *restoring = fake_start(fx, FAKE_UNAVAILABLE);
    assert_int_equal(tessera_client_reconnect(fx->client, "alice", "0123abcd"), 0);
    assert_int_equal(tessera_client_connect(fx->client, "127.0.0.1", restoring->port), 0);
    run_until_settled(fx);

    assert_int_equal(fx->seen.errors, 1);
    assert_int_equal(fx->seen.last_error, TESSERA_CLIENT_ERROR_UNAVAILABLE);
    assert_int_equal(fx->seen.error_retry_after_ms, FAKE_RETRY_AFTER_MS);
    assert_int_equal(fx->seen.closed, 1);
    assert_int_equal(fx->seen.cause, TESSERA_CLIENT_CLOSED_SERVER_ERROR);
    assert_int_equal(restoring->reconnects, 1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_login_checks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_login_bad_precision, setup, teardown),
        cmocka_unit_test_setup_teardown(test_view_before_login, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ticks_restart, setup, teardown),
        cmocka_unit_test_setup_teardown(test_enter_move_update_leave, setup, teardown),
        cmocka_unit_test_setup_teardown(test_duplicate_alias, setup, teardown),
        cmocka_unit_test_setup_teardown(test_broken_stream, setup, teardown),
        cmocka_unit_test_setup_teardown(test_base_properties_of_another, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_client_call, setup, teardown),
        cmocka_unit_test_setup_teardown(test_close_in_callback, setup, teardown),
        cmocka_unit_test_setup_teardown(test_calls_without_channel, setup, teardown),
        cmocka_unit_test_setup_teardown(test_correction_places_own, setup, teardown),
        cmocka_unit_test_setup_teardown(test_teleports, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unknown_entity_call, setup, teardown),
        cmocka_unit_test_setup_teardown(test_garbled_updates, setup, teardown),
        cmocka_unit_test_setup_teardown(test_game_events_in_view, setup_events, teardown),
        cmocka_unit_test_setup_teardown(test_game_event_alone, setup_events, teardown),
        cmocka_unit_test_setup_teardown(test_game_event_before_login, setup_events, teardown),
        cmocka_unit_test_setup_teardown(test_game_event_unknown, setup_events, teardown),
        cmocka_unit_test_setup_teardown(test_game_event_bad_fields, setup_events, teardown),
        cmocka_unit_test_setup_teardown(test_game_event_without_events, setup, teardown),
        cmocka_unit_test_setup_teardown(test_login_reply_baseapps, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reconnect_follows_redirect_without_token, setup, teardown),
        cmocka_unit_test_setup_teardown(test_in_world_redirect_without_token_reconnects, setup, teardown),
        cmocka_unit_test_setup_teardown(test_undialled_redirect_keeps_its_token, setup, teardown),
        cmocka_unit_test_setup_teardown(test_login_redirect_without_token_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reconnect_redirect_limit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reconnect_unavailable_retry_after, setup, teardown),
    };
    /* The fake baseapps write to sockets the client may have closed: a
     * SIGPIPE would kill the test instead of failing a write. */
    if (signal(SIGPIPE, SIG_IGN) == SIG_ERR) {
        perror("test_tessera_client: ignoring SIGPIPE");
        return 1;
    }
    return cmocka_run_group_tests(tests, NULL, NULL);
}
