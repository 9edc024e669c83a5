/* tessera_client.c -- one game client's side of the client wire: the hello
 * and login exchange, outgoing moves, and the table of entities in view kept
 * up to date from the server's ViewUpdates. It owns its channel and the
 * entities in its table; it does not own the loop, the player's walk, or
 * anything about reconnecting.
 *
 * The wire itself is documented once, in proto/client.proto. Input from the
 * server is never trusted: a frame that does not decode, carries no known
 * body, arrives in the wrong state or holds a non-finite number closes the
 * client with CLOSED_PROTOCOL; it never stops the process.
 */
#include "tessera_client.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "channel.h"
#include "client.pb-c.h"
#include "entity_def.h"
#include "frame.h"
#include "id_map.h"
#include "log.h"

/* Channel sizes for one player's connection. A ViewUpdate for a crowded
 * view (a few thousand enters) is well under 4 MiB; 1 MiB of unsent moves
 * means the server stopped reading, and 64 MiB means it is gone. */
#define TESSERA_CLIENT_MAX_FRAME_BYTES (4u << 20)
#define TESSERA_CLIENT_HIGH_WATER_BYTES (1u << 20)
#define TESSERA_CLIENT_WRITE_LIMIT_BYTES (64u << 20)

/* Field limits from client.proto. */
#define TESSERA_CLIENT_ACCOUNT_MAX 64
#define TESSERA_CLIENT_PASSWORD_MAX 128
#define TESSERA_CLIENT_HELLO_NAME_MAX 64

struct tessera_client {
    uv_loop_t *loop;
    tessera_client_callbacks callbacks;
    void *user_data;
    tessera_client_state state;
    channel *ch;                    /* NULL until connect succeeds; the channel frees itself */
    int connected;                  /* the TCP connection was established */
    /* Closed in place of a channel when the client has none, so on_closed
     * still fires from the loop rather than inside tessera_client_close. */
    uv_timer_t deferred_close;
    int cause_set;                  /* close_cause was decided by us, not guessed from the channel */
    tessera_client_close_cause close_cause;
    char close_reason[192];
    char name[TESSERA_CLIENT_HELLO_NAME_MAX + 1];
    int login_requested;
    char account[TESSERA_CLIENT_ACCOUNT_MAX + 1];
    char password[TESSERA_CLIENT_PASSWORD_MAX + 1];
    uint32_t sequence;              /* of the last move sent */
    tessera_client_login_info login;
    char server_name[TESSERA_CLIENT_NAME_BYTES];
    id_map entities;                /* entity id -> tessera_client_entity*, owned */
    entity_def_registry *definitions; /* received at login, owned */
    tessera_client_stats stats;
};

/* ---- names ---------------------------------------------------------------- */

const char *tessera_client_state_name(tessera_client_state state) {
    switch (state) {
    case TESSERA_CLIENT_DISCONNECTED: return "disconnected";
    case TESSERA_CLIENT_CONNECTING: return "connecting";
    case TESSERA_CLIENT_HELLO_SENT: return "hello_sent";
    case TESSERA_CLIENT_AWAITING_LOGIN: return "awaiting_login";
    case TESSERA_CLIENT_LOGIN_SENT: return "login_sent";
    case TESSERA_CLIENT_IN_WORLD: return "in_world";
    case TESSERA_CLIENT_CLOSING: return "closing";
    case TESSERA_CLIENT_CLOSED: return "closed";
    }
    return "unknown";
}

const char *tessera_client_error_name(int code) {
    static const char *const names[] = {
        "none",          "malformed_frame",  "frame_too_large",
        "unknown_message", "not_logged_in",  "protocol_version_mismatch",
        "bad_credentials", "unavailable",    "out_of_order",
        "invalid_argument", "replaced",      "slow_consumer",
        "server_shutdown",
    };
    if (code < 0 || (size_t)code >= sizeof names / sizeof names[0]) return "unknown";
    return names[code];
}

const char *tessera_client_close_cause_name(tessera_client_close_cause cause) {
    switch (cause) {
    case TESSERA_CLIENT_CLOSED_BY_CALLER: return "closed_by_caller";
    case TESSERA_CLIENT_CLOSED_CONNECT_FAILED: return "connect_failed";
    case TESSERA_CLIENT_CLOSED_SERVER_ERROR: return "server_error";
    case TESSERA_CLIENT_CLOSED_PROTOCOL: return "protocol";
    case TESSERA_CLIENT_CLOSED_DISCONNECTED: return "disconnected";
    }
    return "unknown";
}

/* ---- lifecycle ------------------------------------------------------------ */

/* The state as callers see it: a channel that started closing on its own
 * (peer gone, I/O error) makes the client CLOSING before on_closed. */
static tessera_client_state tessera_client__state(const tessera_client *client) {
    if (client->state != TESSERA_CLIENT_CLOSING && client->state != TESSERA_CLIENT_CLOSED && client->ch &&
        channel_get_state(client->ch) == CHANNEL_CLOSING)
        return TESSERA_CLIENT_CLOSING;
    return client->state;
}

static int tessera_client__is_open(const tessera_client *client) {
    tessera_client_state state = tessera_client__state(client);
    return state != TESSERA_CLIENT_CLOSING && state != TESSERA_CLIENT_CLOSED;
}

tessera_client *tessera_client_create(uv_loop_t *loop, const tessera_client_callbacks *callbacks, void *user_data) {
    tessera_client *client = xcalloc(1, sizeof *client);
    client->loop = loop;
    if (callbacks) client->callbacks = *callbacks;
    client->user_data = user_data;
    client->state = TESSERA_CLIENT_DISCONNECTED;
    snprintf(client->name, sizeof client->name, "tessera-client");
    id_map_init(&client->entities);
    return client;
}

/* Fires on_closed and releases everything. Runs from a libuv close callback
 * (the channel's or deferred_close's), never inside a client callback. */
static void tessera_client__finish(tessera_client *client, const char *reason) {
    tessera_client_close_cause cause = client->close_cause;
    if (!client->cause_set) {
        /* The channel ended on its own. Before the connection was up that is
         * a failed dial; afterwards the peer or the socket went away. */
        cause = client->connected ? TESSERA_CLIENT_CLOSED_DISCONNECTED : TESSERA_CLIENT_CLOSED_CONNECT_FAILED;
        snprintf(client->close_reason, sizeof client->close_reason, "%s", reason ? reason : "closed");
    }
    client->state = TESSERA_CLIENT_CLOSED;
    client->ch = NULL;
    if (client->callbacks.on_closed) client->callbacks.on_closed(client, cause, client->close_reason);

    size_t cursor = 0;
    uint64_t id;
    void *value;
    while (id_map_next(&client->entities, &cursor, &id, &value)) free(value);
    id_map_close(&client->entities);
    entity_def_registry_free(client->definitions);
    free(client);
}

static void tessera_client__on_channel_close(channel *ch, const char *reason) {
    tessera_client *client = channel_user_data(ch);
    tessera_client__finish(client, reason);
}

static void tessera_client__on_deferred_closed(uv_handle_t *handle) {
    tessera_client *client = handle->data;
    tessera_client__finish(client, client->close_reason);
}

/* Closes with a cause we decided. The first cause wins, like the channel's
 * first reason: if the channel is already closing on its own, its reason
 * stands and tessera_client__finish names the cause. */
static void tessera_client__close_with(tessera_client *client, tessera_client_close_cause cause, const char *reason) {
    if (client->state == TESSERA_CLIENT_CLOSING || client->state == TESSERA_CLIENT_CLOSED) return;
    if (client->ch && channel_get_state(client->ch) == CHANNEL_CLOSING) {
        client->state = TESSERA_CLIENT_CLOSING;
        return;
    }
    client->cause_set = 1;
    client->close_cause = cause;
    snprintf(client->close_reason, sizeof client->close_reason, "%s", reason);
    client->state = TESSERA_CLIENT_CLOSING;
    if (client->ch) {
        channel_close(client->ch, client->close_reason);
    } else {
        /* No channel to wait for: a timer that is closed without ever being
         * started still gets its close callback on the next loop turn. */
        uv_timer_init(client->loop, &client->deferred_close);
        client->deferred_close.data = client;
        uv_close((uv_handle_t *)&client->deferred_close, tessera_client__on_deferred_closed);
    }
}

void tessera_client_close(tessera_client *client) {
    if (!client) return;
    tessera_client__close_with(client, TESSERA_CLIENT_CLOSED_BY_CALLER, "closed by the client");
}

/* A protocol violation by the server: log it and close. */
static void tessera_client__protocol_error(tessera_client *client, const char *what) {
    char reason[192];
    snprintf(reason, sizeof reason, "protocol error: %s", what);
    log_debug("client %s: %s (state %s)", client->ch ? channel_peer_name(client->ch) : "?", reason,
             tessera_client_state_name(client->state));
    tessera_client__close_with(client, TESSERA_CLIENT_CLOSED_PROTOCOL, reason);
}

/* ---- sending -------------------------------------------------------------- */

static int tessera_client__send(tessera_client *client, const Tessera__Client__ClientToServer *message) {
    size_t length = tessera__client__client_to_server__get_packed_size(message);
    if (channel_send_message(client->ch, &message->base) != 0) return -1;
    client->stats.frames_out++;
    client->stats.bytes_out += length + FRAME_HEADER_BYTES;
    return 0;
}

static void tessera_client__send_hello(tessera_client *client) {
    Tessera__Client__Hello hello = TESSERA__CLIENT__HELLO__INIT;
    hello.protocol_version = TESSERA__CLIENT__PROTOCOL_VERSION__PROTOCOL_VERSION;
    hello.client_name = client->name;
    Tessera__Client__ClientToServer message = TESSERA__CLIENT__CLIENT_TO_SERVER__INIT;
    message.body_case = TESSERA__CLIENT__CLIENT_TO_SERVER__BODY_HELLO;
    message.hello = &hello;
    client->state = TESSERA_CLIENT_HELLO_SENT;
    /* A failed send closes the channel, and its on_close reports why. */
    tessera_client__send(client, &message);
}

static void tessera_client__send_login(tessera_client *client) {
    Tessera__Client__LoginRequest login = TESSERA__CLIENT__LOGIN_REQUEST__INIT;
    login.account = client->account;
    login.password = client->password;
    Tessera__Client__ClientToServer message = TESSERA__CLIENT__CLIENT_TO_SERVER__INIT;
    message.body_case = TESSERA__CLIENT__CLIENT_TO_SERVER__BODY_LOGIN;
    message.login = &login;
    client->state = TESSERA_CLIENT_LOGIN_SENT;
    tessera_client__send(client, &message);
    /* The password is not needed any more; do not keep it in memory. */
    memset(client->password, 0, sizeof client->password);
}

int tessera_client_send_move(tessera_client *client, float x, float y, float z, float yaw) {
    if (tessera_client__state(client) != TESSERA_CLIENT_IN_WORLD) return -1;
    if (!isfinite(x) || !isfinite(y) || !isfinite(z) || !isfinite(yaw)) return -1;
    Tessera__Client__Vector3 position = TESSERA__CLIENT__VECTOR3__INIT;
    position.x = x;
    position.y = y;
    position.z = z;
    Tessera__Client__Move move = TESSERA__CLIENT__MOVE__INIT;
    move.position = &position;
    move.yaw = yaw;
    move.sequence = client->sequence + 1;
    Tessera__Client__ClientToServer message = TESSERA__CLIENT__CLIENT_TO_SERVER__INIT;
    message.body_case = TESSERA__CLIENT__CLIENT_TO_SERVER__BODY_MOVE;
    message.move = &move;
    if (tessera_client__send(client, &message) != 0) return -1;
    client->sequence = move.sequence;
    return 0;
}

uint32_t tessera_client_last_sequence(const tessera_client *client) { return client->sequence; }

/* ---- receiving ------------------------------------------------------------ */

/* Reads an optional Vector3 (absent means the origin, as proto3 defaults
 * say). Returns 0, or -1 if a coordinate is not finite. */
static int tessera_client__read_vector(const Tessera__Client__Vector3 *v, float *x, float *y, float *z) {
    if (!v) {
        *x = *y = *z = 0.0f;
        return 0;
    }
    if (!isfinite(v->x) || !isfinite(v->y) || !isfinite(v->z)) return -1;
    *x = v->x;
    *y = v->y;
    *z = v->z;
    return 0;
}


static void tessera_client__on_server_hello(tessera_client *client, const Tessera__Client__ServerHello *hello) {
    if (client->state != TESSERA_CLIENT_HELLO_SENT) {
        tessera_client__protocol_error(client, "server hello out of order");
        return;
    }
    if (hello->protocol_version != TESSERA__CLIENT__PROTOCOL_VERSION__PROTOCOL_VERSION) {
        char what[128];
        snprintf(what, sizeof what, "server speaks protocol version %u, this client speaks %u",
                 (unsigned)hello->protocol_version, (unsigned)TESSERA__CLIENT__PROTOCOL_VERSION__PROTOCOL_VERSION);
        tessera_client__protocol_error(client, what);
        return;
    }
    snprintf(client->server_name, sizeof client->server_name, "%s", hello->server_name ? hello->server_name : "");
    client->state = TESSERA_CLIENT_AWAITING_LOGIN;
    if (client->login_requested) tessera_client__send_login(client);
}

static void tessera_client__on_login_reply(tessera_client *client, const Tessera__Client__LoginReply *reply) {
    if (client->state != TESSERA_CLIENT_LOGIN_SENT) {
        tessera_client__protocol_error(client, "login reply out of order");
        return;
    }
    tessera_client_login_info info;
    memset(&info, 0, sizeof info);
    if (reply->entity_id == 0) {
        tessera_client__protocol_error(client, "login reply without an entity id");
        return;
    }
    if (tessera_client__read_vector(reply->position, &info.x, &info.y, &info.z) != 0 || !isfinite(reply->yaw) ||
        !isfinite(reply->view_radius) || reply->view_radius < 0 || !isfinite(reply->view_hysteresis) ||
        reply->view_hysteresis < 0 || !isfinite(reply->max_speed)) {
        tessera_client__protocol_error(client, "login reply with a non-finite or negative number");
        return;
    }
    info.entity_id = reply->entity_id;
    info.yaw = reply->yaw;
    info.view_radius = reply->view_radius;
    info.view_hysteresis = reply->view_hysteresis;
    info.max_speed = reply->max_speed;
    info.tick_hz = reply->tick_hz;
    snprintf(info.space_name, sizeof info.space_name, "%s", reply->space_name ? reply->space_name : "");
    /* The definitions let this client decode any game; their digest must
     * be theirs, or something in between mangled them. */
    if (!reply->definitions || !reply->definitions[0]) {
        tessera_client__protocol_error(client, "login reply without entity definitions");
        return;
    }
    char err[256];
    entity_def_registry *definitions = NULL;
    if (entity_def_load_string(reply->definitions, "login reply", &definitions, err, sizeof err) != 0) {
        char what[320];
        snprintf(what, sizeof what, "entity definitions do not load: %s", err);
        tessera_client__protocol_error(client, what);
        return;
    }
    const char *digest = entity_def_registry_digest_hex(definitions);
    if (!reply->definitions_digest || strcmp(digest, reply->definitions_digest) != 0) {
        entity_def_registry_free(definitions);
        tessera_client__protocol_error(client, "entity definitions do not match their digest");
        return;
    }
    snprintf(info.definitions_digest, sizeof info.definitions_digest, "%s", digest);
    info.definition_classes = entity_def_registry_class_count(definitions);
    entity_def_registry_free(client->definitions);
    client->definitions = definitions;
    client->login = info;
    client->state = TESSERA_CLIENT_IN_WORLD;
    if (client->callbacks.on_logged_in) client->callbacks.on_logged_in(client, &client->login);
}

/* Applies one ViewUpdate: leaves, then enters, then moves, as the wire
 * orders them. Stops as soon as a callback closes the client. */
static void tessera_client__on_view(tessera_client *client, const Tessera__Client__ViewUpdate *view) {
    if (client->state != TESSERA_CLIENT_IN_WORLD) {
        tessera_client__protocol_error(client, "view update before login completed");
        return;
    }
    /* Validate everything first so a bad update is refused whole rather
     * than half applied. */
    for (size_t i = 0; i < view->n_enters; i++) {
        const Tessera__Client__EntityEnter *enter = view->enters[i];
        float x, y, z;
        if (!enter || enter->entity_id == 0 || tessera_client__read_vector(enter->position, &x, &y, &z) != 0 ||
            !isfinite(enter->yaw)) {
            tessera_client__protocol_error(client, "entity enter with id 0 or a non-finite number");
            return;
        }
    }
    for (size_t i = 0; i < view->n_moves; i++) {
        const Tessera__Client__EntityMove *move = view->moves[i];
        float x, y, z;
        if (!move || tessera_client__read_vector(move->position, &x, &y, &z) != 0 || !isfinite(move->yaw)) {
            tessera_client__protocol_error(client, "entity move with a non-finite number");
            return;
        }
    }

    uint32_t tick = view->tick;
    client->stats.view_updates++;
    if (client->callbacks.on_frame_begin) {
        client->callbacks.on_frame_begin(client, tick);
        if (tessera_client__state(client) != TESSERA_CLIENT_IN_WORLD) return;
    }

    for (size_t i = 0; i < view->n_leaves; i++) {
        uint64_t id = view->leaves[i];
        tessera_client_entity *entity = id ? id_map_remove(&client->entities, id) : NULL;
        if (!entity) {
            client->stats.stale_leaves++;
            continue;
        }
        client->stats.leaves++;
        if (client->callbacks.on_leave) client->callbacks.on_leave(client, id);
        free(entity);
        if (tessera_client__state(client) != TESSERA_CLIENT_IN_WORLD) return;
    }

    for (size_t i = 0; i < view->n_enters; i++) {
        const Tessera__Client__EntityEnter *enter = view->enters[i];
        tessera_client_entity *entity = id_map_get(&client->entities, enter->entity_id);
        int fresh = entity == NULL;
        if (fresh) {
            entity = xcalloc(1, sizeof *entity);
            entity->id = enter->entity_id;
            if (id_map_put(&client->entities, entity->id, entity) != 0) log_panic("id_map_put failed");
        } else {
            client->stats.duplicate_enters++;
        }
        tessera_client__read_vector(enter->position, &entity->x, &entity->y, &entity->z);
        entity->yaw = enter->yaw;
        snprintf(entity->type, sizeof entity->type, "%s", enter->entity_type ? enter->entity_type : "");
        entity->last_tick = tick;
        if (!fresh) continue;
        client->stats.enters++;
        if (client->callbacks.on_enter) {
            client->callbacks.on_enter(client, entity);
            if (tessera_client__state(client) != TESSERA_CLIENT_IN_WORLD) return;
        }
    }

    for (size_t i = 0; i < view->n_moves; i++) {
        const Tessera__Client__EntityMove *move = view->moves[i];
        tessera_client_entity *entity = move->entity_id ? id_map_get(&client->entities, move->entity_id) : NULL;
        if (!entity) {
            client->stats.stale_moves++;
            continue;
        }
        client->stats.moves++;
        tessera_client__read_vector(move->position, &entity->x, &entity->y, &entity->z);
        entity->yaw = move->yaw;
        entity->last_move_stamp_us = move->stamp_us;
        entity->last_tick = tick;
        if (client->callbacks.on_move) {
            client->callbacks.on_move(client, entity, move->stamp_us);
            if (tessera_client__state(client) != TESSERA_CLIENT_IN_WORLD) return;
        }
    }

    if (client->callbacks.on_frame_end) client->callbacks.on_frame_end(client, tick);
}

static void tessera_client__on_correction(tessera_client *client, const Tessera__Client__Correction *message) {
    if (client->state != TESSERA_CLIENT_IN_WORLD) {
        tessera_client__protocol_error(client, "correction before login completed");
        return;
    }
    tessera_client_correction correction;
    if (tessera_client__read_vector(message->position, &correction.x, &correction.y, &correction.z) != 0 ||
        !isfinite(message->yaw)) {
        tessera_client__protocol_error(client, "correction with a non-finite number");
        return;
    }
    correction.yaw = message->yaw;
    correction.sequence = message->sequence;
    correction.reason = message->reason ? message->reason : "";
    client->stats.corrections++;
    if (client->callbacks.on_correction) client->callbacks.on_correction(client, &correction);
}

static void tessera_client__on_server_error(tessera_client *client, const Tessera__Client__Error *error) {
    int code = (int)error->code;
    const char *text = error->message ? error->message : "";
    client->stats.errors++;
    int before_world = client->state != TESSERA_CLIENT_IN_WORLD;
    if (client->callbacks.on_error) {
        client->callbacks.on_error(client, code, text);
        if (!tessera_client__is_open(client)) return;
    }
    if (before_world) {
        /* Without a login there is nothing left to do on this connection. */
        char reason[192];
        snprintf(reason, sizeof reason, "server error %s: %s", tessera_client_error_name(code), text);
        tessera_client__close_with(client, TESSERA_CLIENT_CLOSED_SERVER_ERROR, reason);
    }
}

static void tessera_client__on_frame(channel *ch, const uint8_t *frame, size_t length) {
    tessera_client *client = channel_user_data(ch);
    if (!tessera_client__is_open(client)) return;
    client->stats.frames_in++;
    client->stats.bytes_in += length + FRAME_HEADER_BYTES;

    Tessera__Client__ServerToClient *message = tessera__client__server_to_client__unpack(NULL, length, frame);
    if (!message) {
        tessera_client__protocol_error(client, "a frame that does not decode as ServerToClient");
        return;
    }
    switch (message->body_case) {
    case TESSERA__CLIENT__SERVER_TO_CLIENT__BODY_HELLO:
        tessera_client__on_server_hello(client, message->hello);
        break;
    case TESSERA__CLIENT__SERVER_TO_CLIENT__BODY_LOGIN_REPLY:
        tessera_client__on_login_reply(client, message->login_reply);
        break;
    case TESSERA__CLIENT__SERVER_TO_CLIENT__BODY_VIEW:
        tessera_client__on_view(client, message->view);
        break;
    case TESSERA__CLIENT__SERVER_TO_CLIENT__BODY_CORRECTION:
        tessera_client__on_correction(client, message->correction);
        break;
    case TESSERA__CLIENT__SERVER_TO_CLIENT__BODY_ERROR:
        tessera_client__on_server_error(client, message->error);
        break;
    default:
        tessera_client__protocol_error(client, "a frame with no body this client knows");
        break;
    }
    tessera__client__server_to_client__free_unpacked(message, NULL);
}

static void tessera_client__on_connect(channel *ch, int status) {
    tessera_client *client = channel_user_data(ch);
    if (status != 0 || client->state != TESSERA_CLIENT_CONNECTING) return; /* on_close follows a failure */
    client->connected = 1;
    tessera_client__send_hello(client);
}

/* ---- requests ------------------------------------------------------------- */

int tessera_client_set_name(tessera_client *client, const char *name) {
    if (client->state != TESSERA_CLIENT_DISCONNECTED || !name) return -1;
    if (strlen(name) > TESSERA_CLIENT_HELLO_NAME_MAX) return -1;
    snprintf(client->name, sizeof client->name, "%s", name);
    return 0;
}

int tessera_client_connect(tessera_client *client, const char *host, int port) {
    if (client->state != TESSERA_CLIENT_DISCONNECTED || !host || port <= 0 || port > 65535) return -1;
    channel_options options = {
        .max_frame_bytes = TESSERA_CLIENT_MAX_FRAME_BYTES,
        .write_high_water_bytes = TESSERA_CLIENT_HIGH_WATER_BYTES,
        .write_limit_bytes = TESSERA_CLIENT_WRITE_LIMIT_BYTES,
        .totals = NULL,
    };
    channel_callbacks callbacks = {
        .on_frame = tessera_client__on_frame,
        .on_connect = tessera_client__on_connect,
        .on_close = tessera_client__on_channel_close,
    };
    channel *ch = channel_connect(client->loop, host, port, &options, &callbacks, client);
    if (!ch) return -1;
    client->ch = ch;
    client->state = TESSERA_CLIENT_CONNECTING;
    return 0;
}

/* 1..64 bytes of [A-Za-z0-9_.-], as client.proto asks. */
static int tessera_client__valid_account(const char *account) {
    size_t length = strlen(account);
    if (length == 0 || length > TESSERA_CLIENT_ACCOUNT_MAX) return 0;
    for (size_t i = 0; i < length; i++) {
        char c = account[i];
        int ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
                 c == '.' || c == '-';
        if (!ok) return 0;
    }
    return 1;
}

int tessera_client_login(tessera_client *client, const char *account, const char *password) {
    if (client->login_requested || !tessera_client__is_open(client)) return -1;
    if (!account || !password || !tessera_client__valid_account(account)) return -1;
    size_t password_length = strlen(password);
    if (password_length == 0 || password_length > TESSERA_CLIENT_PASSWORD_MAX) return -1;
    snprintf(client->account, sizeof client->account, "%s", account);
    snprintf(client->password, sizeof client->password, "%s", password);
    client->login_requested = 1;
    if (client->state == TESSERA_CLIENT_AWAITING_LOGIN) tessera_client__send_login(client);
    return 0;
}

/* ---- queries -------------------------------------------------------------- */

tessera_client_state tessera_client_get_state(const tessera_client *client) { return tessera_client__state(client); }
void *tessera_client_user_data(const tessera_client *client) { return client->user_data; }
void tessera_client_set_user_data(tessera_client *client, void *user_data) { client->user_data = user_data; }

const entity_def_registry *tessera_client_definitions(const tessera_client *client) { return client->definitions; }

const tessera_client_login_info *tessera_client_login_info_get(const tessera_client *client) {
    return client->login.entity_id != 0 ? &client->login : NULL;
}

const char *tessera_client_server_name(const tessera_client *client) { return client->server_name; }

const tessera_client_entity *tessera_client_entity_find(const tessera_client *client, uint64_t entity_id) {
    if (entity_id == 0) return NULL;
    return id_map_get(&client->entities, entity_id);
}

size_t tessera_client_entity_count(const tessera_client *client) { return id_map_count(&client->entities); }

const tessera_client_entity *tessera_client_entity_next(const tessera_client *client, size_t *cursor) {
    uint64_t id;
    void *value;
    if (!id_map_next(&client->entities, cursor, &id, &value)) return NULL;
    return value;
}

void tessera_client_get_stats(const tessera_client *client, tessera_client_stats *out) { *out = client->stats; }
