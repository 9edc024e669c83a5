/* make_corpus.c -- writes the binary seed inputs of fuzz/corpus/ with
 * Tessera's real encoders: framed client and peer messages, an entity
 * stream a witness would send, change lists, volatile records, method
 * calls, packed cell states and layouts, all over the demo definitions
 * and the demo's maps. fuzz/make_corpus runs it (and copies the JSON
 * seeds, which are the repository's own files); its output is checked in.
 *
 * Usage: make_corpus SOURCE_ROOT CORPUS_DIR. Each seed is written to
 * CORPUS_DIR/<target>/<name>. Exit 1 when a file cannot be written or a
 * map does not load. The definitions and the arena's volatile config are
 * fuzz_support.c's, the very ones the targets decode against. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cJSON.h>

#include "client.pb-c.h"
#include "cluster.pb-c.h"
#include "entity_def.h"
#include "entity_state.h"
#include "entity_state_json.h"
#include "frame.h"
#include "fuzz_support.h"
#include "json_file.h"
#include "log.h"
#include "method_call.h"
#include "property_codec.h"
#include "replication.h"
#include "space_layout.h"
#include "volatile_codec.h"

static const char *corpus_dir;
static const entity_def_registry *definitions;
static int failures;

/* Writes one seed. */
static void seed(const char *target, const char *name, const void *data, size_t length) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", corpus_dir, target);
    if (mkdir(path, 0755) != 0 && errno != EEXIST) {
        perror(path);
        failures++;
        return;
    }
    snprintf(path, sizeof path, "%s/%s/%s", corpus_dir, target, name);
    FILE *f = fopen(path, "wb");
    if (!f || (length > 0 && fwrite(data, 1, length, f) != length) || fclose(f) != 0) {
        perror(path);
        failures++;
    }
}

/* Bytes of a buffer another owns. */
typedef struct span {
    const uint8_t *data;
    size_t length;
} span;

/* One seed made of `count` spans one after another. */
static void seed_spans(const char *target, const char *name, const span *spans, size_t count) {
    size_t length = 0;
    for (size_t i = 0; i < count; i++) length += spans[i].length;
    uint8_t *data = xmalloc(length ? length : 1), *at = data;
    for (size_t i = 0; i < count; i++) {
        memcpy(at, spans[i].data, spans[i].length);
        at += spans[i].length;
    }
    seed(target, name, data, length);
    free(data);
}

/* ---- framed protobuf messages ------------------------------------------ */

/* A growing buffer of frames, as a connection carries them. */
typedef struct frames {
    uint8_t *data;
    size_t length;
} frames;

static void frames_add(frames *f, const ProtobufCMessage *message) {
    size_t length = protobuf_c_message_get_packed_size(message);
    f->data = xrealloc(f->data, f->length + FRAME_HEADER_BYTES + length);
    frame_write_header(f->data + f->length, (uint32_t)length);
    protobuf_c_message_pack(message, f->data + f->length + FRAME_HEADER_BYTES);
    f->length += FRAME_HEADER_BYTES + length;
}

/* One message alone (framed) as its own seed, and added to `session`. */
static void seed_message(const char *target, const char *name, const ProtobufCMessage *message, frames *session) {
    frames one = {0};
    frames_add(&one, message);
    seed(target, name, one.data, one.length);
    free(one.data);
    frames_add(session, message);
}

/* The first exposed base method of a class with arguments, encoded. */
static const entity_def_method *exposed_method(const entity_def_class *cls, entity_def_part part, uint32_t *id) {
    for (uint32_t m = 0; m < cls->method_count[part]; m++) {
        if (cls->methods[part][m].exposed) {
            *id = m;
            return &cls->methods[part][m];
        }
    }
    return NULL;
}

/* One client message of body `field` (kind `kind`) as a seed of
 * fuzz_client_message, framed, and appended to `session`. */
#define SEED_CLIENT(name, kind, field, body, session)                                       \
    do {                                                                                    \
        Tessera__Client__ClientToServer message_ = TESSERA__CLIENT__CLIENT_TO_SERVER__INIT; \
        message_.body_case = TESSERA__CLIENT__CLIENT_TO_SERVER__BODY_##kind;                \
        message_.field = (body);                                                            \
        seed_message("fuzz_client_message", (name), &message_.base, (session));             \
    } while (0)

/* The same for a peer message, a seed of fuzz_peer_message. */
#define SEED_PEER(name, kind, field, body, session)                                    \
    do {                                                                               \
        Tessera__Cluster__PeerMessage message_ = TESSERA__CLUSTER__PEER_MESSAGE__INIT; \
        message_.body_case = TESSERA__CLUSTER__PEER_MESSAGE__BODY_##kind;              \
        message_.field = (body);                                                       \
        seed_message("fuzz_peer_message", (name), &message_.base, (session));          \
    } while (0)

static void client_seeds(void) {
    frames session = {0};
    Tessera__Client__Hello hello = TESSERA__CLIENT__HELLO__INIT;
    hello.protocol_version = TESSERA__CLIENT__PROTOCOL_VERSION__PROTOCOL_VERSION;
    hello.client_name = "tessera-bots";
    SEED_CLIENT("hello", HELLO, hello, &hello, &session);
    size_t hello_end = session.length;

    Tessera__Client__LoginRequest login = TESSERA__CLIENT__LOGIN_REQUEST__INIT;
    login.account = "player_1";
    login.password = "secret";
    login.known_definitions_digest = (char *)entity_def_registry_digest_hex(definitions);
    SEED_CLIENT("login", LOGIN, login, &login, &session);
    size_t login_end = session.length;

    Tessera__Client__Vector3 position = TESSERA__CLIENT__VECTOR3__INIT;
    position.x = 12.5f;
    position.z = -40.25f;
    Tessera__Client__Move move = TESSERA__CLIENT__MOVE__INIT;
    move.position = &position;
    move.yaw = 1.5f;
    move.sequence = 7;
    SEED_CLIENT("move", MOVE, move, &move, &session);
    size_t move_end = session.length;

    const entity_def_class *avatar = entity_def_registry_find_class(definitions, "Avatar");
    static const entity_def_part parts[] = {ENTITY_DEF_PART_BASE, ENTITY_DEF_PART_CELL};
    for (size_t p = 0; avatar && p < 2; p++) {
        uint32_t id;
        const entity_def_method *method = exposed_method(avatar, parts[p], &id);
        if (!method) continue;
        entity_state *args = method_call_args_create(method);
        bit_writer w;
        bit_writer_init(&w);
        method_call_encode(args, &w);
        Tessera__Client__EntityCall call = TESSERA__CLIENT__ENTITY_CALL__INIT;
        call.entity_id = avatar->id; /* fuzz_client_message picks the class by entity id */
        call.part = parts[p] == ENTITY_DEF_PART_BASE ? TESSERA__CLIENT__METHOD_PART__METHOD_PART_BASE
                                                     : TESSERA__CLIENT__METHOD_PART__METHOD_PART_CELL;
        call.method_id = id;
        call.args.data = (uint8_t *)bit_writer_data(&w);
        call.args.len = bit_writer_bytes(&w);
        SEED_CLIENT(p == 0 ? "call_base" : "call_cell", CALL, call, &call, &session);
        bit_writer_close(&w);
        entity_state_free(args);
    }

    size_t calls_end = session.length;

    Tessera__Client__Reconnect reconnect = TESSERA__CLIENT__RECONNECT__INIT;
    reconnect.account = "player_1";
    reconnect.session_token = "0123456789abcdef0123456789abcdef";
    SEED_CLIENT("reconnect", RECONNECT, reconnect, &reconnect, &session);
    size_t reconnect_end = session.length;

    Tessera__Client__TokenLogin token = TESSERA__CLIENT__TOKEN_LOGIN__INIT;
    token.account = "player_1";
    token.token = "fedcba9876543210fedcba9876543210";
    SEED_CLIENT("token_login", TOKEN_LOGIN, token_login, &token, &session);

    seed("fuzz_client_message", "session", session.data, session.length);
    /* fuzz_client_link: one connection each, its frames in order. */
    seed("fuzz_client_link", "login_move_calls", session.data, calls_end);
    seed("fuzz_client_link", "everything", session.data, session.length);
    const span hello_frame = {session.data, hello_end}, move_frame = {session.data + login_end, move_end - login_end};
    const span reconnect_frame = {session.data + calls_end, reconnect_end - calls_end};
    const span token_frame = {session.data + reconnect_end, session.length - reconnect_end};
    seed_spans("fuzz_client_link", "reconnect_move", (span[]){hello_frame, reconnect_frame, move_frame}, 3);
    seed_spans("fuzz_client_link", "token_login_move", (span[]){hello_frame, token_frame, move_frame}, 3);
    seed("fuzz_frame", "session", session.data, session.length);
    /* A prefix past the client limit (64 KiB): refused from the prefix. */
    static const uint8_t too_large[] = {0x00, 0x01, 0x00, 0x01, 0x08, 0x01};
    seed("fuzz_frame", "too_large", too_large, sizeof too_large);
    /* A frame cut short: left pending. */
    seed("fuzz_frame", "truncated", session.data, session.length > 9 ? 9 : session.length);
    free(session.data);
}

/* ---- cell state ---------------------------------------------------------- */

/* A packed CellEntityState of a fresh entity of `cls` (malloc'd). */
static uint8_t *cell_state(const entity_def_class *cls, uint64_t entity_id, size_t *length) {
    entity_state *state = entity_state_create(cls);
    bit_writer w;
    bit_writer_init(&w);
    entity_state_encode_all(state, &w);
    Tessera__Client__Vector3 position = TESSERA__CLIENT__VECTOR3__INIT;
    position.x = 10;
    position.z = -20;
    Tessera__Cluster__CellEntityState saved = TESSERA__CLUSTER__CELL_ENTITY_STATE__INIT;
    saved.entity_id = entity_id;
    saved.incarnation = 1;
    saved.entity_type = (char *)cls->name;
    saved.space_name = "arena";
    saved.position = &position;
    saved.yaw = 0.5f;
    saved.baseapp_id = 3;
    saved.properties.data = (uint8_t *)bit_writer_data(&w);
    saved.properties.len = bit_writer_bytes(&w);
    saved.entity_name = "gate";
    *length = tessera__cluster__cell_entity_state__get_packed_size(&saved);
    uint8_t *packed = xmalloc(*length ? *length : 1);
    tessera__cluster__cell_entity_state__pack(&saved, packed);
    bit_writer_close(&w);
    entity_state_free(state);
    return packed;
}

/* An Avatar's state with something in every part a restore rebuilds:
 * movement, timers, a trap, controllers, an I/O connection, a witness
 * with a view, the inbox of a stream with a message held. */
static uint8_t *cell_state_everything(size_t *length) {
    const entity_def_class *avatar = entity_def_registry_find_class(definitions, "Avatar");
    size_t plain_length;
    uint8_t *plain = cell_state(avatar, FUZZ_PLAYER_ID, &plain_length);
    Tessera__Cluster__CellEntityState *state = tessera__cluster__cell_entity_state__unpack(NULL, plain_length, plain);
    free(plain);

    Tessera__Cluster__MovementState movement = TESSERA__CLUSTER__MOVEMENT_STATE__INIT;
    movement.allowance = 4.5;
    movement.age_us = 20000;
    movement.last_sequence = 17;
    Tessera__Cluster__TimerState repeat = TESSERA__CLUSTER__TIMER_STATE__INIT,
                                 once = TESSERA__CLUSTER__TIMER_STATE__INIT;
    repeat.timer_id = 1u << 20 | 1;
    repeat.remaining_us = 250000;
    repeat.interval_us = 1000000;
    repeat.tag = 3;
    once.timer_id = 1u << 20 | 2;
    once.remaining_us = 5000000;
    once.tag = 4;
    once.user_data = 99;
    Tessera__Cluster__TimerState *timers[] = {&repeat, &once};
    uint64_t members[] = {2001};
    Tessera__Cluster__TrapState trap = TESSERA__CLUSTER__TRAP_STATE__INIT;
    trap.tag = 77;
    trap.radius = 12;
    trap.members = members;
    trap.n_members = 1;
    trap.controller_id = 1;
    Tessera__Cluster__TrapState *traps[] = {&trap};
    float destination[] = {40, 0, -20};
    Tessera__Cluster__ControllerMove move = TESSERA__CLUSTER__CONTROLLER_MOVE__INIT;
    move.id = 2;
    move.kind = 1;
    move.destination = destination;
    move.n_destination = 3;
    move.speed = 3;
    move.face = true;
    Tessera__Cluster__ControllerTurn turn = TESSERA__CLUSTER__CONTROLLER_TURN__INIT;
    turn.id = 3;
    turn.yaw = 1.25f;
    turn.speed = 2;
    Tessera__Cluster__ControllerState controllers = TESSERA__CLUSTER__CONTROLLER_STATE__INIT;
    controllers.next_id = 4;
    controllers.move = &move;
    controllers.turn = &turn;
    Tessera__Cluster__IoConnection connection = TESSERA__CLUSTER__IO_CONNECTION__INIT;
    connection.output = "OnTrigger";
    connection.target = "gate";
    connection.input = "Open";
    connection.parameter = "";
    connection.delay_ms = 500;
    connection.times = -1;
    Tessera__Cluster__IoConnection *connections[] = {&connection};
    uint64_t pending[] = {3};
    Tessera__Cluster__WitnessAlias seen = TESSERA__CLUSTER__WITNESS_ALIAS__INIT;
    seen.alias = 1;
    seen.entity_id = 2001;
    seen.detail = 0;
    seen.pending = pending;
    seen.n_pending = 1;
    seen.track_valid = true;
    seen.track_x = 32000;
    seen.track_z = 30000;
    seen.has_sent = true;
    seen.last_sent = 5;
    Tessera__Cluster__WitnessAlias *aliases[] = {&seen};
    Tessera__Cluster__AliasCooling cooling = TESSERA__CLUSTER__ALIAS_COOLING__INIT;
    cooling.alias = 2;
    cooling.remaining_ms = 400;
    Tessera__Cluster__AliasCooling *coolings[] = {&cooling};
    uint64_t left[] = {2002};
    Tessera__Cluster__WitnessState witness = TESSERA__CLUSTER__WITNESS_STATE__INIT;
    witness.aliases = aliases;
    witness.n_aliases = 1;
    witness.cooling = coolings;
    witness.n_cooling = 1;
    witness.next_unused_alias = 3;
    witness.budget_tick = 5;
    witness.budget_credit = 512;
    witness.left = left;
    witness.n_left = 1;
    Tessera__Cluster__CellCall call = TESSERA__CLUSTER__CELL_CALL__INIT;
    call.caller_id = 2001;
    call.target_id = FUZZ_PLAYER_ID;
    Tessera__Cluster__CellMessage held_message = TESSERA__CLUSTER__CELL_MESSAGE__INIT;
    held_message.entity_id = FUZZ_PLAYER_ID;
    held_message.sender_id = 2;
    held_message.stream = 1;
    held_message.sequence = 3;
    held_message.body_case = TESSERA__CLUSTER__CELL_MESSAGE__BODY_CALL;
    held_message.call = &call;
    size_t held_length = tessera__cluster__cell_message__get_packed_size(&held_message);
    uint8_t *held_bytes = xmalloc(held_length);
    tessera__cluster__cell_message__pack(&held_message, held_bytes);
    ProtobufCBinaryData held[] = {{held_length, held_bytes}};
    uint64_t held_sequence[] = {3};
    Tessera__Cluster__InboxStream inbox = TESSERA__CLUSTER__INBOX_STREAM__INIT;
    inbox.sender_id = 2;
    inbox.stream = 1;
    inbox.next_sequence = 2;
    inbox.held_sequence = held_sequence;
    inbox.n_held_sequence = 1;
    inbox.held = held;
    inbox.n_held = 1;
    inbox.gap_age_us = 1000;
    Tessera__Cluster__InboxStream *inboxes[] = {&inbox};

    state->movement = &movement;
    state->timers = timers;
    state->n_timers = 2;
    state->traps = traps;
    state->n_traps = 1;
    state->controllers = &controllers;
    state->connections = connections;
    state->n_connections = 1;
    state->witness = &witness;
    state->had_witness = true;
    state->inbox = inboxes;
    state->n_inbox = 1;
    state->client_binding = 1;
    *length = tessera__cluster__cell_entity_state__get_packed_size(state);
    uint8_t *packed = xmalloc(*length);
    tessera__cluster__cell_entity_state__pack(state, packed);
    /* The parts above are this function's: detach them before the free. */
    state->movement = NULL;
    state->timers = NULL;
    state->n_timers = 0;
    state->traps = NULL;
    state->n_traps = 0;
    state->controllers = NULL;
    state->connections = NULL;
    state->n_connections = 0;
    state->witness = NULL;
    state->inbox = NULL;
    state->n_inbox = 0;
    tessera__cluster__cell_entity_state__free_unpacked(state, NULL);
    free(held_bytes);
    return packed;
}

static void cell_state_seeds(void) {
    for (size_t c = 0; c < entity_def_registry_class_count(definitions); c++) {
        const entity_def_class *cls = entity_def_registry_class(definitions, (uint16_t)c);
        size_t length;
        uint8_t *packed = cell_state(cls, 1000 + c, &length);
        seed("fuzz_cell_state", cls->name, packed, length);
        seed("fuzz_cell_restore", cls->name, packed, length);
        free(packed);
    }
    size_t length;
    uint8_t *packed = cell_state_everything(&length);
    seed("fuzz_cell_state", "Avatar_everything", packed, length);
    seed("fuzz_cell_restore", "Avatar_everything", packed, length);
    free(packed);
}

/* ---- peer messages ------------------------------------------------------- */

static void peer_seeds(void) {
    frames session = {0};

    Tessera__Cluster__PeerHello hello = TESSERA__CLUSTER__PEER_HELLO__INIT;
    hello.cluster_version = TESSERA__CLUSTER__CLUSTER_VERSION__CLUSTER_VERSION;
    hello.role = TESSERA__CLUSTER__ROLE__ROLE_CELLAPP;
    hello.process_id = 2;
    hello.cluster_name = "tessera";
    SEED_PEER("hello", HELLO, hello, &hello, &session);

    Tessera__Cluster__PeerPing ping = TESSERA__CLUSTER__PEER_PING__INIT;
    ping.sequence = 5;
    ping.echo = 4;
    SEED_PEER("ping", PING, ping, &ping, &session);

    Tessera__Cluster__CellCall call = TESSERA__CLUSTER__CELL_CALL__INIT;
    call.caller_id = 1000;
    call.target_id = 1001;
    call.method_id = 0;
    call.from_client = true;
    Tessera__Cluster__CellMessage cell_message = TESSERA__CLUSTER__CELL_MESSAGE__INIT;
    cell_message.entity_id = 1001;
    cell_message.sender_id = 1;
    cell_message.stream = 1;
    cell_message.sequence = 1;
    cell_message.body_case = TESSERA__CLUSTER__CELL_MESSAGE__BODY_CALL;
    cell_message.call = &call;
    SEED_PEER("cell_message", CELL_MESSAGE, cell_message, &cell_message, &session);

    Tessera__Cluster__CellItem item = TESSERA__CLUSTER__CELL_ITEM__INIT;
    item.body_case = TESSERA__CLUSTER__CELL_ITEM__BODY_MESSAGE;
    item.message = &cell_message;
    size_t item_length = tessera__cluster__cell_item__get_packed_size(&item);
    uint8_t *item_bytes = xmalloc(item_length);
    tessera__cluster__cell_item__pack(&item, item_bytes);
    ProtobufCBinaryData items[2] = {{item_length, item_bytes}, {item_length, item_bytes}};
    Tessera__Cluster__CellBatch batch = TESSERA__CLUSTER__CELL_BATCH__INIT;
    batch.n_items = 2;
    batch.items = items;
    SEED_PEER("cell_batch", CELL_BATCH, cell_batch, &batch, &session);
    free(item_bytes);

    Tessera__Cluster__BaseCall base_call = TESSERA__CLUSTER__BASE_CALL__INIT;
    base_call.entity_id = 1000;
    base_call.caller_id = 1001;
    base_call.method_id = 0;
    base_call.sender_id = 2;
    base_call.class_name = "Avatar";
    SEED_PEER("base_call", BASE_CALL, base_call, &base_call, &session);

    const entity_def_class *avatar = entity_def_registry_find_class(definitions, "Avatar");
    size_t state_length;
    uint8_t *state = cell_state(avatar ? avatar : entity_def_registry_class(definitions, 0), 1000, &state_length);
    Tessera__Cluster__CellSnapshot snapshot = TESSERA__CLUSTER__CELL_SNAPSHOT__INIT;
    snapshot.entity_id = 1000;
    snapshot.incarnation = 1;
    snapshot.state.data = state;
    snapshot.state.len = state_length;
    SEED_PEER("cell_snapshot", CELL_SNAPSHOT, cell_snapshot, &snapshot, &session);

    Tessera__Cluster__RestoreCellEntity restore = TESSERA__CLUSTER__RESTORE_CELL_ENTITY__INIT;
    restore.entity_id = 1000;
    restore.dead_cellapp_id = 4;
    restore.state.data = state;
    restore.state.len = state_length;
    SEED_PEER("restore_cell_entity", RESTORE_CELL_ENTITY, restore_cell_entity, &restore, &session);
    free(state);

    Tessera__Cluster__PeerDeath death = TESSERA__CLUSTER__PEER_DEATH__INIT;
    death.process_id = 4;
    death.reason = "lease expired";
    SEED_PEER("death", DEATH, death, &death, &session);

    seed("fuzz_peer_message", "session", session.data, session.length);
    /* fuzz_peer_link: a baseapp's hello, then every message. */
    seed("fuzz_peer_link", "session", session.data, session.length);
    free(session.data);
}

/* ---- bit streams --------------------------------------------------------- */

static void volatile_seeds(void) {
    const volatile_codec_config *config = fuzz_arena_config();
    volatile_track track;
    volatile_track_init(&track);
    bit_writer w;
    bit_writer_init(&w);
    /* A walk (small deltas), then a teleport (absolute). */
    for (int step = 0; step < 8; step++)
        volatile_codec_encode(&w, &track, config, 10.0f + (float)step * 0.4f, 0, -20.0f + (float)step * 0.1f,
                              (float)step * 0.2f);
    volatile_codec_encode(&w, &track, config, -300, 5, 250, -3.0f);
    seed("fuzz_volatile", "walk_teleport", bit_writer_data(&w), bit_writer_bytes(&w));
    bit_writer_close(&w);
}

/* A state of `cls` whose every property is dirty (its defaults). */
static entity_state *dirty_state(const entity_def_class *cls) {
    entity_state *state = entity_state_create(cls);
    for (uint16_t p = 0; p < cls->property_count; p++) entity_state_mark_dirty(state, p);
    return state;
}

static void property_change_seeds(void) {
    for (size_t c = 0; c < entity_def_registry_class_count(definitions); c++) {
        const entity_def_class *cls = entity_def_registry_class(definitions, (uint16_t)c);
        entity_state *state = dirty_state(cls);
        entity_state_mask all;
        entity_state_mask_all(&all, cls->property_count);
        bit_writer w;
        bit_writer_init(&w);
        /* The first byte: the class, and "accept all" (bit 0 clear). */
        bit_writer_write(&w, (uint64_t)(c << 1), 8);
        property_codec_encode_changes(&w, state, &all);
        seed("fuzz_property_changes", cls->name, bit_writer_data(&w), bit_writer_bytes(&w));
        bit_writer_close(&w);
        entity_state_free(state);
    }
}

static void method_call_seeds(void) {
    for (size_t c = 0; c < entity_def_registry_class_count(definitions); c++) {
        const entity_def_class *cls = entity_def_registry_class(definitions, (uint16_t)c);
        for (int part = 0; part < ENTITY_DEF_PART_COUNT; part++) {
            for (uint32_t m = 0; m < cls->method_count[part] && m < 256; m++) {
                const entity_def_method *method = &cls->methods[part][m];
                entity_state *args = method_call_args_create(method);
                bit_writer w;
                bit_writer_init(&w);
                bit_writer_write(&w, c, 8);
                bit_writer_write(&w, (uint64_t)part, 8);
                bit_writer_write(&w, m, 8);
                method_call_encode(args, &w);
                char name[160];
                snprintf(name, sizeof name, "%s.%s.%s", cls->name, entity_def_part_name((entity_def_part)part),
                         method->name);
                seed("fuzz_method_call", name, bit_writer_data(&w), bit_writer_bytes(&w));
                bit_writer_close(&w);
                entity_state_free(args);
            }
        }
    }
}

/* Appends the stream in `w` after its 2-byte length, as fuzz_entity_stream
 * reads each. */
static uint8_t *stream_append(uint8_t *input, size_t *length, const bit_writer *w) {
    size_t bytes = bit_writer_bytes(w);
    input = xrealloc(input, *length + 2 + bytes);
    input[*length] = (uint8_t)(bytes >> 8);
    input[*length + 1] = (uint8_t)bytes;
    memcpy(input + *length + 2, bit_writer_data(w), bytes);
    *length += 2 + bytes;
    return input;
}

/* A witness's streams: every class entered (the owner first), then an
 * update, a move and a leave, as tessera_client reads them. */
/* A ViewUpdate carrying the stream in `w`, as a frame appended to `f`. */
static void frames_add_view(frames *f, uint32_t tick, const bit_writer *w) {
    Tessera__Client__ViewUpdate view = TESSERA__CLIENT__VIEW_UPDATE__INIT;
    view.tick = tick;
    view.stream.data = (uint8_t *)bit_writer_data(w);
    view.stream.len = bit_writer_bytes(w);
    view.stamp_us = (uint64_t)tick * 1000000u;
    Tessera__Client__ServerToClient message = TESSERA__CLIENT__SERVER_TO_CLIENT__INIT;
    message.body_case = TESSERA__CLIENT__SERVER_TO_CLIENT__BODY_VIEW;
    message.view = &view;
    frames_add(f, &message.base);
}

/* A witness's two ticks: every class entered with an absolute MOVE (the
 * player's Avatar owned, as fuzz_login_reply says), then an update of
 * each, a delta MOVE and a LEAVE; for fuzz_entity_stream as length-prefixed
 * streams, and for fuzz_client_sdk as ViewUpdates after the real login
 * (first byte odd) or after a login reply of the input's own (even). */
static void entity_stream_seeds(void) {
    replication_schema *schema = replication_schema_create(definitions);
    replication *rep = replication_create(schema);
    const volatile_codec_config *config = fuzz_arena_config();
    size_t count = entity_def_registry_class_count(definitions);
    const entity_def_class *avatar = entity_def_registry_find_class(definitions, "Avatar");
    /* Each class's entity: its state, the packer's record of it, its
     * tracker. */
    struct stream_entity {
        entity_state *state;
        replication_entity record;
        volatile_track track;
    } *entities = xcalloc(count, sizeof *entities);
    /* FUZZ_MAX_ALIASES (256) aliases: fuzz_entity_stream takes
     * 1 << (19 % 11) (and 19 % 4 is not 0). */
    const uint8_t alias_choice = 19;
    unsigned alias_bits = replication_alias_bits(FUZZ_MAX_ALIASES);
    bit_writer w;
    bit_writer_init(&w);
    uint8_t *input = xmalloc(1);
    size_t length = 1;
    input[0] = alias_choice;
    frames views = {0};

    replication_begin_tick(rep, 1);
    for (size_t c = 0; c < count; c++) {
        const entity_def_class *cls = entity_def_registry_class(definitions, (uint16_t)c);
        bool owner = cls == avatar;
        entities[c].state = dirty_state(cls);
        replication_entity_init(&entities[c].record, entities[c].state, owner ? FUZZ_PLAYER_ID : 2000 + c);
        volatile_track_init(&entities[c].track);
        replication_pack(rep, &entities[c].record);
        replication_append_enter(rep, &entities[c].record, &w, (uint32_t)c, alias_bits, owner, ENTITY_DEF_DETAIL_NEAR);
        replication_append_move_header(&w, (uint32_t)c, alias_bits);
        volatile_codec_encode(&w, &entities[c].track, config, 10.0f + (float)c, 0, -20.0f, 0.5f);
    }
    replication_append_end(&w);
    input = stream_append(input, &length, &w);
    frames_add_view(&views, 1, &w);

    bit_writer_reset(&w);
    replication_begin_tick(rep, 2);
    for (size_t c = 0; c < count; c++) {
        bool owner = entity_def_registry_class(definitions, (uint16_t)c) == avatar;
        replication_pack(rep, &entities[c].record);
        replication_append_update(rep, &entities[c].record, &w, (uint32_t)c, alias_bits, owner, ENTITY_DEF_DETAIL_NEAR);
    }
    size_t mover = avatar && avatar->id == 0 ? 1 : 0; /* not the player: the server does not move it */
    replication_append_move_header(&w, (uint32_t)mover, alias_bits);
    volatile_codec_encode(&w, &entities[mover].track, config, 10.5f + (float)mover, 0, -19.5f, 0.6f);
    replication_append_leave(&w, (uint32_t)(count - 1), alias_bits);
    replication_append_end(&w);
    input = stream_append(input, &length, &w);
    frames_add_view(&views, 2, &w);
    seed("fuzz_entity_stream", "enter_update_move_leave", input, length);

    /* fuzz_client_sdk: after the harness's login (odd), or the input's own. */
    const fuzz_bytes *login = fuzz_login_reply();
    uint8_t *session = xmalloc(1 + FRAME_HEADER_BYTES + login->length + views.length);
    session[0] = 1;
    memcpy(session + 1, views.data, views.length);
    seed("fuzz_client_sdk", "views", session, 1 + views.length);
    session[0] = 0;
    frame_write_header(session + 1, (uint32_t)login->length);
    memcpy(session + 1 + FRAME_HEADER_BYTES, login->data, login->length);
    memcpy(session + 1 + FRAME_HEADER_BYTES + login->length, views.data, views.length);
    seed("fuzz_client_sdk", "login_views", session, 1 + FRAME_HEADER_BYTES + login->length + views.length);
    free(session);

    free(views.data);
    free(input);
    bit_writer_close(&w);
    for (size_t c = 0; c < count; c++) entity_state_free(entities[c].state);
    free(entities);
    replication_free(rep);
    replication_schema_free(schema);
}

/* ---- JSON from the encoders and the maps ---------------------------------- */

static void layout_seeds(void) {
    const double min[3] = {-500, -32, -500}, max[3] = {500, 32, 500};
    const uint64_t cellapps[] = {2, 3, 4};
    space_layout *one = space_layout_create("arena", min, max, false, 2);
    space_layout *grid = space_layout_create_grid("arena", min, max, false, 2, 2, cellapps, 3);
    space_layout *deep = space_layout_create_grid("world", min, max, true, 3, 1, cellapps, 3);
    char err[256];
    if (deep && space_layout_split_cell(deep, 1, SPACE_LAYOUT_AXIS_Z, 100, 5, err, sizeof err) != 0)
        fprintf(stderr, "make_corpus: %s\n", err);
    space_layout *layouts[] = {one, grid, deep};
    const char *names[] = {"one_cell", "grid_2x2", "split_3x1"};
    for (size_t i = 0; i < 3; i++) {
        if (!layouts[i]) {
            failures++;
            continue;
        }
        char *json = space_layout_to_json(layouts[i]);
        seed("fuzz_space_layout", names[i], json, strlen(json));
        free(json);
        space_layout_free(layouts[i]);
    }
}

/* Each map entity's keyvalues, after a byte naming its class. */
static void keyvalue_seeds(const char *root) {
    static const char *maps[] = {"demo/maps/arena.json", "tests/maps/parents.json", "tests/maps/split.json"};
    for (size_t m = 0; m < sizeof maps / sizeof maps[0]; m++) {
        char path[1024], problem[256];
        snprintf(path, sizeof path, "%s/%s", root, maps[m]);
        size_t length;
        char *text = json_file_read(path, &length, problem, sizeof problem);
        cJSON *map = text ? json_file_parse(text, length, problem, sizeof problem) : NULL;
        free(text);
        if (!map) {
            fprintf(stderr, "make_corpus: %s: %s\n", path, problem);
            failures++;
            continue;
        }
        const cJSON *entity;
        cJSON_ArrayForEach(entity, cJSON_GetObjectItemCaseSensitive(map, "entities")) {
            const cJSON *classname = cJSON_GetObjectItemCaseSensitive(entity, "classname");
            const cJSON *name = cJSON_GetObjectItemCaseSensitive(entity, "name");
            const cJSON *keyvalues = cJSON_GetObjectItemCaseSensitive(entity, "keyvalues");
            const entity_def_class *cls =
                cJSON_IsString(classname) ? entity_def_registry_find_class(definitions, classname->valuestring) : NULL;
            if (!cls || !keyvalues || !cJSON_IsString(name)) continue;
            char *printed = cJSON_PrintUnformatted(keyvalues);
            size_t printed_length = strlen(printed);
            uint8_t *input = xmalloc(printed_length + 2);
            input[0] = (uint8_t)cls->id;
            memcpy(input + 1, printed, printed_length + 1);
            char seed_name[160];
            snprintf(seed_name, sizeof seed_name, "%zu_%s", m, name->valuestring);
            seed("fuzz_map_keyvalues", seed_name, input, printed_length + 1);
            free(input);
            free(printed);
        }
        cJSON_Delete(map);
    }
    /* Every class's defaults in the JSON form. */
    for (size_t c = 0; c < entity_def_registry_class_count(definitions); c++) {
        const entity_def_class *cls = entity_def_registry_class(definitions, (uint16_t)c);
        entity_state *state = entity_state_create(cls);
        char *json = entity_state_to_json_string(state, NULL);
        size_t json_length = strlen(json);
        uint8_t *input = xmalloc(json_length + 2);
        input[0] = (uint8_t)c;
        memcpy(input + 1, json, json_length + 1);
        char seed_name[160];
        snprintf(seed_name, sizeof seed_name, "defaults_%s", cls->name);
        seed("fuzz_map_keyvalues", seed_name, input, json_length + 1);
        free(input);
        free(json);
        entity_state_free(state);
    }
}

/* fuzz_every_type's four forms of Thing (fuzz/definitions/every_type.json),
 * its defaults and a state with a value in most properties. */
static void every_type_seeds(void) {
    const entity_def_class *thing = entity_def_registry_find_class(fuzz_every_type(), "Thing");
    cJSON *values = cJSON_Parse(
        "{\"i8\": -5, \"u64\": 123456789012, \"i16_12\": -2000, \"q\": 2.5, \"qd\": 12.345, \"b\": true, "
        "\"s\": \"h\u00e9y\", \"by\": \"00ff10\", \"v3\": [1, 2, 3], \"qv3\": [-1.5, 0, 999.99], \"e\": 42, "
        "\"arr\": [1, -2, 3, -4], \"stats\": {\"hp\": 7, \"pos\": [1.5, -2, 3], \"tag\": \"ab\"}, "
        "\"strs\": [\"a\", \"bc\"], \"grid\": [[1, 2, 3], [4, 5, 6]]}");
    for (int valued = 0; valued < 2; valued++) {
        entity_state *state = dirty_state(thing);
        if (valued && entity_state_from_json(state, values, NULL, NULL, NULL) <= 0) failures++;
        entity_state_mask all;
        entity_state_mask_all(&all, thing->property_count);
        const char *suffix = valued ? "values" : "defaults";
        char name[64];
        bit_writer w;
        bit_writer_init(&w);
        bit_writer_write(&w, 0, 8);
        property_codec_encode_changes(&w, state, &all);
        snprintf(name, sizeof name, "changes_%s", suffix);
        seed("fuzz_every_type", name, bit_writer_data(&w), bit_writer_bytes(&w));
        bit_writer_reset(&w);
        bit_writer_write(&w, 1, 8);
        entity_state_encode_all(state, &w);
        snprintf(name, sizeof name, "state_%s", suffix);
        seed("fuzz_every_type", name, bit_writer_data(&w), bit_writer_bytes(&w));
        bit_writer_close(&w);
        char *json = entity_state_to_json_string(state, NULL);
        size_t json_length = strlen(json);
        uint8_t *input = xmalloc(json_length + 2);
        input[0] = 3;
        memcpy(input + 1, json, json_length + 1);
        snprintf(name, sizeof name, "json_%s", suffix);
        seed("fuzz_every_type", name, input, json_length + 1);
        free(input);
        free(json);
        entity_state_free(state);
    }
    cJSON_Delete(values);
    const entity_def_method *method = entity_def_class_method(thing, ENTITY_DEF_PART_BASE, 0);
    entity_state *args = method_call_args_create(method);
    bit_writer w;
    bit_writer_init(&w);
    bit_writer_write(&w, 2, 8);
    method_call_encode(args, &w);
    seed("fuzz_every_type", "method_args", bit_writer_data(&w), bit_writer_bytes(&w));
    bit_writer_close(&w);
    entity_state_free(args);
}

/* Requests a process's admin listener gets: a probe, a protected GET with
 * the token in its query and an allowed Origin, a POST with the token in
 * its header, one without a token, one cut short. The token and hosts are
 * fuzz_admin_http.c's. */
static void admin_http_seeds(void) {
    static const struct {
        const char *name, *text;
    } requests[] = {
        {"probe", "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"},
        {"get_query_token",
         "GET /api/entity?id=1234&space=arena%20one&token=fuzz-admin-token-0123456789abcdef HTTP/1.1\r\n"
         "Host: tessera.example:8080\r\nOrigin: http://tessera.example:8080\r\n\r\n"},
        {"post_bearer", "POST /admin/save HTTP/1.1\r\nHost: tessera.example\r\n"
                        "Authorization: Bearer fuzz-admin-token-0123456789abcdef\r\nContent-Length: 2\r\n\r\n{}"},
        {"no_token", "POST /admin/save HTTP/1.1\r\nHost: tessera.example\r\nContent-Length: 0\r\n\r\n"},
        {"cut_short", "GET /api/entity?id=1 HTTP/1.1\r\nHost: tess"},
    };
    for (size_t i = 0; i < sizeof requests / sizeof requests[0]; i++)
        seed("fuzz_admin_http", requests[i].name, requests[i].text, strlen(requests[i].text));
}

/* A client's WebSocket frame, masked as clients must, appended to out at
 * *length. */
static void websocket_frame(uint8_t *out, size_t *length, int fin, uint8_t opcode, const void *payload,
                            size_t payload_length) {
    static const uint8_t mask[4] = {0x11, 0x22, 0x33, 0x44};
    uint8_t *at = out + *length;
    *at++ = (uint8_t)((fin ? 0x80 : 0) | opcode);
    if (payload_length < 126) {
        *at++ = (uint8_t)(0x80 | payload_length);
    } else {
        *at++ = 0x80 | 126;
        *at++ = (uint8_t)(payload_length >> 8);
        *at++ = (uint8_t)payload_length;
    }
    memcpy(at, mask, 4);
    at += 4;
    const uint8_t *bytes = payload;
    for (size_t i = 0; i < payload_length; i++) *at++ = bytes[i] ^ mask[i % 4];
    *length = (size_t)(at - out);
}

/* fuzz_websocket.c's inputs: a first byte (its low bit: a valid upgrade
 * goes first; the rest: the chunk size), then an upgrade request or
 * frames: binary, fragmented around a ping, a Close, text, one cut short
 * past the limit. */
static void websocket_seeds(void) {
    static const char upgrade[] = "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                                  "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";
    static uint8_t input[8192];
    static const uint8_t zeros[5000];
    size_t length = 0;
    input[length++] = 0x10;
    memcpy(input + length, upgrade, sizeof upgrade - 1);
    length += sizeof upgrade - 1;
    seed("fuzz_websocket", "handshake", input, length);
    input[0] = 0x20;
    websocket_frame(input, &length, 1, 0x2, "\x0a\x05hello", 7);
    seed("fuzz_websocket", "handshake-then-frame", input, length);
    static const char plain_get[] = "\x08GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    seed("fuzz_websocket", "plain-get", plain_get, sizeof plain_get - 1);
    static const char get_play[] = "\x08GET /play?auto=10 HTTP/1.1\r\nHost: x\r\n\r\n";
    seed("fuzz_websocket", "get-play", get_play, sizeof get_play - 1);
    struct {
        const char *name;
        uint8_t first;
    } framed[] = {{"binary", 0x01}, {"fragments-and-ping", 0x03}, {"medium", 0x05}, {"close", 0x07},
                  {"text", 0x09},   {"oversized", 0x0b}};
    for (size_t i = 0; i < sizeof framed / sizeof framed[0]; i++) {
        length = 0;
        input[length++] = framed[i].first;
        switch (i) {
            case 0:
                websocket_frame(input, &length, 1, 0x2, "\x0a\x12\x08\x01\x12\x0eintegration", 18);
                break;
            case 1:
                websocket_frame(input, &length, 0, 0x2, "abc", 3);
                websocket_frame(input, &length, 1, 0x9, "ping", 4);
                websocket_frame(input, &length, 0, 0x0, "def", 3);
                websocket_frame(input, &length, 1, 0x0, "ghi", 3);
                break;
            case 2:
                websocket_frame(input, &length, 1, 0x2, zeros, 300);
                break;
            case 3:
                websocket_frame(input, &length, 1, 0x8,
                                "\x03\xe8"
                                "bye",
                                5);
                break;
            case 4:
                websocket_frame(input, &length, 1, 0x1, "text", 4);
                break;
            default:
                websocket_frame(input, &length, 1, 0x2, zeros, 5000);
                length = 200;
                break;
        }
        seed("fuzz_websocket", framed[i].name, input, length);
    }
}

static void definition_seeds(void) {
    char *description = entity_def_registry_describe(definitions);
    seed("fuzz_entity_def", "demo_described", description, strlen(description));
    free(description);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: make_corpus SOURCE_ROOT CORPUS_DIR\n");
        return 2;
    }
    corpus_dir = argv[2];
    if (mkdir(corpus_dir, 0755) != 0 && errno != EEXIST) {
        perror(corpus_dir);
        return 1;
    }
    definitions = fuzz_definitions();
    client_seeds();
    peer_seeds();
    cell_state_seeds();
    volatile_seeds();
    property_change_seeds();
    method_call_seeds();
    entity_stream_seeds();
    layout_seeds();
    keyvalue_seeds(argv[1]);
    definition_seeds();
    admin_http_seeds();
    websocket_seeds();
    every_type_seeds();
    return failures ? 1 : 0;
}
