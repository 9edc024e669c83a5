/* client_link.c -- client connections (client_link.h): the state machine
 * from hello to the world, checking every client message against the state
 * it may arrive in and the limits on what a client sends (frame time, moves
 * and calls a second, failed logins), and the single exit path
 * (client_link_fail / channel close) that tells the layer above a bound
 * link let go of its proxy. It owns the connections and their decode
 * arena; it owns no entity (proxies do) and checks no password (login.c
 * does). */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client_link.h"

#include "account_name.h"
#include "arena.h"
#include "clock.h"
#include "log.h"

const char *client_link_state_name(client_link_state state) {
    switch (state) {
        case CLIENT_LINK_AWAITING_HELLO:
            return "awaiting hello";
        case CLIENT_LINK_AWAITING_LOGIN:
            return "awaiting login";
        case CLIENT_LINK_AUTHENTICATING:
            return "authenticating";
        case CLIENT_LINK_ENTERING:
            return "entering";
        case CLIENT_LINK_IN_WORLD:
            return "in world";
        case CLIENT_LINK_HANDING_OFF:
            return "handing off";
        case CLIENT_LINK_CLOSING:
            return "closing";
    }
    return "?";
}

struct client_links {
    client_links_context context;
    entity_list *list;
    /* Client messages are decoded here and released after their handler:
     * no allocation per move. */
    arena decode;
    client_link_counters counters;
};

#define CLIENT_LINK_HANDLER(link, name, ...)                                           \
    do {                                                                               \
        const client_link_handlers *handlers_ = &(link)->set->context.handlers;        \
        if (handlers_->name) handlers_->name(handlers_->owner, (link), ##__VA_ARGS__); \
    } while (0)

void client_link_send(client_link *link, const Tessera__Client__ServerToClient *message) {
    channel_send_message(link->ch, &message->base);
}

void client_link_set_congested(client_link *link, bool congested) {
    if (link->congested == congested) return;
    link->congested = congested;
    client_link_counters *counters = &link->set->counters;
    if (congested) {
        counters->congested++;
        counters->congestion_events++;
    } else {
        counters->congested--;
    }
}

void client_link_bind(client_link *link, proxy *player, uint64_t entity_id) {
    link->proxy = player;
    link->entity_id = entity_id;
    link->state = CLIENT_LINK_ENTERING;
}

void client_link_release(client_link *link) {
    client_link_set_congested(link, false);
    link->proxy = NULL;
    link->entity_id = 0;
}

/* Unbinds the link from its proxy, which learns its client is gone. */
static void client_link_unbind(client_link *link) {
    proxy *player = link->proxy;
    if (!player) return;
    client_link_release(link);
    CLIENT_LINK_HANDLER(link, unbound, player);
}

/* Refuses a login whose account or address has no attempts left. */
static void client_link_fail_throttled(client_link *link, const char *account, uint64_t wait_ms) {
    link->set->counters.logins_throttled++;
    client_link_fail(link, TESSERA__CLIENT__ERROR_CODE__ERROR_RATE_LIMITED,
                     "too many failed logins for account '%s' or from this address: try again in %llu ms", account,
                     (unsigned long long)wait_ms);
}

void client_link_refund_login(client_link *link) {
    login_throttle_refund(link->set->context.throttle, link->account, channel_peer_name(link->ch),
                          clock_monotonic_us());
}

void client_link_count_failed_token(client_link *link) {
    login_throttle_failed(link->set->context.throttle, NULL, channel_peer_name(link->ch), clock_monotonic_us());
}

static void client_link_vfail(client_link *link, Tessera__Client__ErrorCode code, uint32_t retry_after_ms,
                              const char *public_text, const char *format, va_list args) {
    if (link->state == CLIENT_LINK_CLOSING) return;
    client_links *set = link->set;
    char text[256];
    vsnprintf(text, sizeof text, format, args);
    log_info("client %s (account '%s', entity %" PRIu64 ", %s): dropped: %s", channel_peer_name(link->ch),
             link->account, link->entity_id, client_link_state_name(link->state), text);
    Tessera__Client__Error error = TESSERA__CLIENT__ERROR__INIT;
    error.code = code;
    error.message = (char *)(public_text ? public_text : text);
    if (code == TESSERA__CLIENT__ERROR_CODE__ERROR_SERVER_SHUTDOWN)
        error.retry_after_ms = (uint32_t)set->context.settings->shutdown_retry_ms;
    if (retry_after_ms) error.retry_after_ms = retry_after_ms;
    size_t slots = sizeof set->counters.errors_sent / sizeof set->counters.errors_sent[0];
    set->counters.errors_sent[(size_t)code < slots ? (size_t)code : slots - 1]++;
    if (code == TESSERA__CLIENT__ERROR_CODE__ERROR_BAD_CREDENTIALS) set->counters.login_failures++;
    Tessera__Client__ServerToClient message = TESSERA__CLIENT__SERVER_TO_CLIENT__INIT;
    message.body_case = TESSERA__CLIENT__SERVER_TO_CLIENT__BODY_ERROR;
    message.error = &error;
    client_link_send(link, &message);
    link->state = CLIENT_LINK_CLOSING;
    client_link_unbind(link);
    channel_close_after_flush(link->ch, text);
}

void client_link_fail_retry(client_link *link, Tessera__Client__ErrorCode code, uint32_t retry_after_ms,
                            const char *format, ...) {
    va_list args;
    va_start(args, format);
    client_link_vfail(link, code, retry_after_ms, NULL, format, args);
    va_end(args);
}

void client_link_fail(client_link *link, Tessera__Client__ErrorCode code, const char *format, ...) {
    va_list args;
    va_start(args, format);
    client_link_vfail(link, code, 0, NULL, format, args);
    va_end(args);
}

void client_link_fail_quietly(client_link *link, Tessera__Client__ErrorCode code, const char *public_text,
                              const char *format, ...) {
    va_list args;
    va_start(args, format);
    client_link_vfail(link, code, 0, public_text, format, args);
    va_end(args);
}

void client_link_close_quietly(client_link *link, const char *reason) {
    if (link->state == CLIENT_LINK_CLOSING) return;
    link->state = CLIENT_LINK_CLOSING;
    client_link_unbind(link);
    channel_close_after_flush(link->ch, reason);
}

static void client_link_on_close(channel *ch, const char *reason) {
    client_link *link = channel_user_data(ch);
    if (link->state != CLIENT_LINK_CLOSING)
        log_info("client %s (account '%s', entity %" PRIu64 ") disconnected: %s", channel_peer_name(ch), link->account,
                 link->entity_id, reason);
    link->state = CLIENT_LINK_CLOSING;
    client_link_unbind(link);
    entity_list_remove(link->set->list, link->handle);
    free(link);
}

static void client_link_on_hello(client_link *link, const Tessera__Client__Hello *hello) {
    if (link->state != CLIENT_LINK_AWAITING_HELLO) {
        client_link_fail(link, TESSERA__CLIENT__ERROR_CODE__ERROR_OUT_OF_ORDER, "hello sent twice");
        return;
    }
    size_t name_length = hello->client_name ? strlen(hello->client_name) : 0;
    if (name_length > CLIENT_LINK_NAME_MAX) {
        client_link_fail(link, TESSERA__CLIENT__ERROR_CODE__ERROR_INVALID_ARGUMENT,
                         "client_name is %zu bytes; at most %d", name_length, CLIENT_LINK_NAME_MAX);
        return;
    }
    log_info("client %s says it is '%s'", channel_peer_name(link->ch), name_length ? hello->client_name : "");
    uint32_t ours = TESSERA__CLIENT__PROTOCOL_VERSION__PROTOCOL_VERSION;
    if (hello->protocol_version != ours) {
        client_link_fail(link, TESSERA__CLIENT__ERROR_CODE__ERROR_PROTOCOL_VERSION_MISMATCH,
                         "protocol version mismatch: client speaks %u, server speaks %u", hello->protocol_version,
                         ours);
        return;
    }
    Tessera__Client__ServerHello reply = TESSERA__CLIENT__SERVER_HELLO__INIT;
    reply.protocol_version = ours;
    reply.server_name = "tessera-baseapp";
    Tessera__Client__ServerToClient message = TESSERA__CLIENT__SERVER_TO_CLIENT__INIT;
    message.body_case = TESSERA__CLIENT__SERVER_TO_CLIENT__BODY_HELLO;
    message.hello = &reply;
    client_link_send(link, &message);
    link->state = CLIENT_LINK_AWAITING_LOGIN;
}

/* What a login and a reconnect check alike before anything is looked up:
 * the order, the account name, a draining baseapp, the throttle. Returns
 * false when the link was failed. */
static bool client_link_may_log_in(client_link *link, const char *what, const char *account) {
    client_links *set = link->set;
    if (link->state == CLIENT_LINK_AWAITING_HELLO) {
        client_link_fail(link, TESSERA__CLIENT__ERROR_CODE__ERROR_OUT_OF_ORDER, "%s before hello", what);
        return false;
    }
    if (link->state != CLIENT_LINK_AWAITING_LOGIN) {
        client_link_fail(link, TESSERA__CLIENT__ERROR_CODE__ERROR_OUT_OF_ORDER, "%s after a login or reconnect", what);
        return false;
    }
    const char *problem = account_name_check(account);
    if (problem) {
        client_link_fail(link, TESSERA__CLIENT__ERROR_CODE__ERROR_INVALID_ARGUMENT, "account name %s", problem);
        return false;
    }
    if (*set->context.draining) {
        client_link_fail(link, TESSERA__CLIENT__ERROR_CODE__ERROR_SERVER_SHUTDOWN,
                         "this baseapp is stopping: log in again in a moment (another baseapp will take you)");
        return false;
    }
    uint64_t wait_ms =
        login_throttle_check(set->context.throttle, account, channel_peer_name(link->ch), clock_monotonic_us());
    if (wait_ms) {
        client_link_fail_throttled(link, account, wait_ms);
        return false;
    }
    return true;
}

bool client_link_charge_login(client_link *link) {
    uint64_t wait_ms = login_throttle_admit(link->set->context.throttle, link->account, channel_peer_name(link->ch),
                                            clock_monotonic_us());
    if (wait_ms) client_link_fail_throttled(link, link->account, wait_ms);
    return wait_ms == 0;
}

static void client_link_on_login(client_link *link, const Tessera__Client__LoginRequest *login) {
    if (!client_link_may_log_in(link, "login", login->account)) return;
    size_t password_length = login->password ? strlen(login->password) : 0;
    if (password_length < 1 || password_length > 128) {
        client_link_fail(link, TESSERA__CLIENT__ERROR_CODE__ERROR_INVALID_ARGUMENT,
                         "password must be 1 to 128 bytes, got %zu", password_length);
        return;
    }
    snprintf(link->account, sizeof link->account, "%s", login->account);
    link->has_definitions = login->known_definitions_digest &&
                            strcmp(login->known_definitions_digest, link->set->context.definitions_digest) == 0;
    link->state = CLIENT_LINK_AUTHENTICATING;
    CLIENT_LINK_HANDLER(link, login, login->password);
}

static void client_link_on_reconnect(client_link *link, const Tessera__Client__Reconnect *reconnect) {
    if (!client_link_may_log_in(link, "reconnect", reconnect->account)) return;
    snprintf(link->account, sizeof link->account, "%s", reconnect->account);
    link->has_definitions = reconnect->known_definitions_digest &&
                            strcmp(reconnect->known_definitions_digest, link->set->context.definitions_digest) == 0;
    link->reconnecting = true;
    link->state = CLIENT_LINK_AUTHENTICATING;
    CLIENT_LINK_HANDLER(link, reconnect, reconnect->session_token ? reconnect->session_token : "");
}

static void client_link_on_token_login(client_link *link, const Tessera__Client__TokenLogin *login) {
    if (!client_link_may_log_in(link, "token login", login->account)) return;
    snprintf(link->account, sizeof link->account, "%s", login->account);
    link->has_definitions = login->known_definitions_digest &&
                            strcmp(login->known_definitions_digest, link->set->context.definitions_digest) == 0;
    link->state = CLIENT_LINK_AUTHENTICATING;
    CLIENT_LINK_HANDLER(link, token_login, login->token ? login->token : "");
}

static void client_link_on_move(client_link *link, const Tessera__Client__Move *move) {
    if (!move->position || !isfinite(move->position->x) || !isfinite(move->position->y) ||
        !isfinite(move->position->z) || !isfinite(move->yaw)) {
        client_link_fail(link, TESSERA__CLIENT__ERROR_CODE__ERROR_INVALID_ARGUMENT,
                         "move without a finite position and yaw");
        return;
    }
    /* A flood of moves is not a speed hack (the cell checks distance), but
     * it would cost the cell and the cluster link: beyond the client's rate
     * moves are dropped -- the next one carries the latest position. */
    const baseapp_settings *settings = link->set->context.settings;
    uint64_t now = clock_monotonic_us();
    double bank = settings->client_moves_per_second / 2.0;
    link->move_tokens += (double)(now - link->move_tokens_us) / 1e6 * settings->client_moves_per_second;
    if (link->move_tokens > bank) link->move_tokens = bank;
    link->move_tokens_us = now;
    if (link->move_tokens < 1.0) {
        link->set->counters.moves_dropped++;
        return;
    }
    link->move_tokens -= 1.0;
    CLIENT_LINK_HANDLER(link, move, move);
}

void client_link_start_limits(client_link *link) {
    const baseapp_settings *settings = link->set->context.settings;
    link->move_tokens = settings->client_moves_per_second / 2.0;
    link->move_tokens_us = clock_monotonic_us();
    link->call_tokens = settings->client_calls_per_second;
    link->call_tokens_us = link->move_tokens_us;
    link->call_strikes = 0;
}

/* Method calls are held to client_calls_per_second (a bank of one second's
 * worth): excess calls are dropped and counted, and a client that keeps it
 * up, with more dropped than client_calls_per_second x
 * CLIENT_LINK_CALL_STRIKE_SECONDS within a decaying window, is
 * disconnected. Returns whether this call goes. */
#define CLIENT_LINK_CALL_STRIKE_SECONDS 3.0
static bool client_link_take_call_token(client_link *link) {
    client_links *set = link->set;
    double rate = set->context.settings->client_calls_per_second;
    uint64_t now = clock_monotonic_us();
    double elapsed = (double)(now - link->call_tokens_us) / 1e6;
    link->call_tokens_us = now;
    link->call_tokens += elapsed * rate;
    if (link->call_tokens > rate) link->call_tokens = rate;
    /* Strikes drain at the allowed rate too: an occasional burst is forgiven. */
    link->call_strikes -= elapsed * rate;
    if (link->call_strikes < 0) link->call_strikes = 0;
    if (link->call_tokens >= 1.0) {
        link->call_tokens -= 1.0;
        return true;
    }
    set->counters.calls_dropped++;
    link->call_strikes += 1.0;
    if (link->call_strikes > rate * CLIENT_LINK_CALL_STRIKE_SECONDS)
        client_link_fail(link, TESSERA__CLIENT__ERROR_CODE__ERROR_RATE_LIMITED,
                         "method calls faster than %g a second, kept up: %.0f dropped lately", rate,
                         link->call_strikes);
    return false;
}

static bool client_link_before_world(const client_link *link) {
    return link->state == CLIENT_LINK_AWAITING_HELLO || link->state == CLIENT_LINK_AWAITING_LOGIN ||
           link->state == CLIENT_LINK_AUTHENTICATING;
}

static void client_link_on_frame(channel *ch, const uint8_t *frame, size_t length) {
    client_link *link = channel_user_data(ch);
    if (link->state == CLIENT_LINK_CLOSING || link->state == CLIENT_LINK_HANDING_OFF) return;
    arena *decode = &link->set->decode;
    arena_mark mark = arena_save(decode);
    Tessera__Client__ClientToServer *message =
        tessera__client__client_to_server__unpack(arena_protobuf(decode), length, frame);
    if (!message) {
        arena_release(decode, mark);
        client_link_fail(link, TESSERA__CLIENT__ERROR_CODE__ERROR_MALFORMED_FRAME,
                         "a %zu-byte frame is not a valid ClientToServer message", length);
        return;
    }
    switch (message->body_case) {
        case TESSERA__CLIENT__CLIENT_TO_SERVER__BODY_HELLO:
            client_link_on_hello(link, message->hello);
            break;
        case TESSERA__CLIENT__CLIENT_TO_SERVER__BODY_LOGIN:
            client_link_on_login(link, message->login);
            break;
        case TESSERA__CLIENT__CLIENT_TO_SERVER__BODY_RECONNECT:
            client_link_on_reconnect(link, message->reconnect);
            break;
        case TESSERA__CLIENT__CLIENT_TO_SERVER__BODY_TOKEN_LOGIN:
            client_link_on_token_login(link, message->token_login);
            break;
        case TESSERA__CLIENT__CLIENT_TO_SERVER__BODY_MOVE:
            if (client_link_before_world(link))
                client_link_fail(link, TESSERA__CLIENT__ERROR_CODE__ERROR_NOT_LOGGED_IN, "move before login");
            else if (link->state == CLIENT_LINK_IN_WORLD)
                client_link_on_move(link, message->move);
            /* While the player enters the world a move has nowhere to go yet. */
            break;
        case TESSERA__CLIENT__CLIENT_TO_SERVER__BODY_CALL:
            if (link->state == CLIENT_LINK_IN_WORLD) {
                if (client_link_take_call_token(link)) CLIENT_LINK_HANDLER(link, call, message->call);
            } else if (client_link_before_world(link)) {
                client_link_fail(link, TESSERA__CLIENT__ERROR_CODE__ERROR_NOT_LOGGED_IN, "method call before login");
            } else {
                client_link_fail(link, TESSERA__CLIENT__ERROR_CODE__ERROR_OUT_OF_ORDER,
                                 "method call before the login reply");
            }
            break;
        default:
            client_link_fail(link, TESSERA__CLIENT__ERROR_CODE__ERROR_UNKNOWN_MESSAGE,
                             "unknown message type (no known field set in ClientToServer)");
            break;
    }
    arena_release(decode, mark);
}

static void client_link_on_oversized_frame(channel *ch, uint32_t declared_length) {
    client_link *link = channel_user_data(ch);
    client_link_fail(link, TESSERA__CLIENT__ERROR_CODE__ERROR_FRAME_TOO_LARGE,
                     "frame of %u bytes exceeds the limit of %lld bytes", declared_length,
                     (long long)link->set->context.settings->client_max_frame_bytes);
}

static const channel_callbacks client_link_channel_callbacks = {
    .on_frame = client_link_on_frame,
    .on_connect = NULL,
    .on_oversized_frame = client_link_on_oversized_frame,
    .on_close = client_link_on_close,
};

client_links *client_links_create(const client_links_context *context, uint32_t max_links) {
    client_links *set = xcalloc(1, sizeof *set);
    set->context = *context;
    /* 32 serial bits: a slot is reused 2^32 times before a stale handle (a
     * login step that outlived its client) could name a new link. */
    set->list = entity_list_create(max_links, 32);
    arena_init(&set->decode);
    return set;
}

void client_links_free(client_links *set) {
    if (!set) return;
    entity_list_free(set->list);
    arena_close(&set->decode);
    free(set);
}

client_link *client_links_get(const client_links *set, entity_handle handle) {
    return entity_list_get(set->list, handle);
}

client_link *client_links_next(const client_links *set, uint32_t *cursor) {
    return entity_list_next(set->list, cursor, NULL);
}

void client_links_release(client_links *set) {
    uint32_t cursor = 0;
    client_link *link;
    while ((link = client_links_next(set, &cursor)) != NULL)
        if (link->ch) channel_resume(link->ch);
}

size_t client_links_count(const client_links *set) { return entity_list_count(set->list); }

const client_link_counters *client_links_counters(const client_links *set) { return &set->counters; }

void client_links_accept(client_links *set, uv_stream_t *listener, bool websocket) {
    const baseapp_settings *settings = set->context.settings;
    channel_options options = {
        .max_frame_bytes = (size_t)settings->client_max_frame_bytes,
        .write_high_water_bytes = (size_t)settings->client_write_high_water_bytes,
        .write_limit_bytes = (size_t)settings->client_write_limit_bytes,
        .totals = &set->counters.totals,
        .socket_send_buffer_bytes = (size_t)settings->client_send_buffer_bytes,
        .may_dispatch = set->context.may_dispatch,
        .gate_data = set->context.gate_data,
        /* The WebSocket port speaks TLS only with websocket_tls. */
        .tls = websocket && !settings->websocket_tls ? NULL : set->context.tls,
        .websocket = websocket,
        .websocket_resources = websocket ? set->context.websocket_files : NULL,
        .websocket_resource_count = websocket ? set->context.websocket_file_count : 0,
    };
    client_link *link = xcalloc(1, sizeof *link);
    link->set = set;
    link->websocket = websocket;
    link->state = CLIENT_LINK_AWAITING_HELLO;
    link->connected_us = clock_monotonic_us();
    link->ch = channel_accept(listener, &options, &client_link_channel_callbacks, link);
    if (!link->ch) {
        free(link);
        return;
    }
    link->handle = entity_list_add(set->list, link);
    if (link->handle == ENTITY_HANDLE_NONE || set->context.self->stopping ||
        (int64_t)entity_list_count(set->list) > settings->max_clients) {
        /* The close path copes with a link the full list left out. */
        client_link_fail(link, TESSERA__CLIENT__ERROR_CODE__ERROR_UNAVAILABLE, "server full, try another baseapp");
        return;
    }
    log_debug("client %s connected", channel_peer_name(link->ch));
}

void client_links_sweep(client_links *set) {
    const baseapp_settings *settings = set->context.settings;
    uint64_t now = clock_monotonic_us();
    uint64_t timeout_us = (uint64_t)settings->login_timeout_ms * 1000u;
    uint64_t frame_timeout_us = (uint64_t)settings->client_frame_timeout_ms * 1000u;
    uint32_t cursor = 0;
    client_link *link;
    while ((link = entity_list_next(set->list, &cursor, NULL)) != NULL) {
        if (link->state == CLIENT_LINK_CLOSING || link->state == CLIENT_LINK_HANDING_OFF) continue;
        uint64_t since = channel_incomplete_frame_since_us(link->ch);
        if (since && now > since && now - since > frame_timeout_us) {
            client_link_fail(link, TESSERA__CLIENT__ERROR_CODE__ERROR_MALFORMED_FRAME,
                             "a frame begun %llu ms ago is still incomplete (client_frame_timeout_ms %lld)",
                             (unsigned long long)((now - since) / 1000), (long long)settings->client_frame_timeout_ms);
            continue;
        }
        if (link->state == CLIENT_LINK_IN_WORLD) continue;
        if (now - link->connected_us > timeout_us)
            client_link_fail(link, TESSERA__CLIENT__ERROR_CODE__ERROR_UNAVAILABLE, "login not completed within %lld ms",
                             (long long)settings->login_timeout_ms);
    }
}

void client_links_close_all(client_links *set, Tessera__Client__ErrorCode code, const char *reason) {
    uint32_t cursor = 0;
    client_link *link;
    while ((link = entity_list_next(set->list, &cursor, NULL)) != NULL) client_link_fail(link, code, "%s", reason);
}
