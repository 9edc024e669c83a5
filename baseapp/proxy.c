/* proxy.c -- one client connection and its proxy: the state machine from
 * hello to the world, checking every client message against the state it
 * may arrive in, relaying movement to the cell, and the single exit path
 * (proxy_fail / channel close) that tells the cell the player is gone.
 * Password checking is login.c's; cellapp traffic is cell_link.c's. */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baseapp.h"
#include "clock.h"
#include "log.h"
#include "peer_message.h"

static const char *proxy_state_name(proxy_state state) {
    switch (state) {
    case PROXY_AWAITING_HELLO: return "awaiting hello";
    case PROXY_AWAITING_LOGIN: return "awaiting login";
    case PROXY_AUTHENTICATING: return "authenticating";
    case PROXY_CREATING_CELL: return "creating cell";
    case PROXY_IN_WORLD: return "in world";
    case PROXY_CLOSING: return "closing";
    }
    return "?";
}

uint64_t baseapp_text_key(const char *text, size_t length) {
    uint64_t hash = 14695981039346656037ull; /* FNV-1a */
    for (size_t i = 0; i < length; i++) {
        hash ^= (unsigned char)text[i];
        hash *= 1099511628211ull;
    }
    return hash ? hash : 1;
}

uint64_t baseapp_account_key(const char *account) { return baseapp_text_key(account, strlen(account)); }

void proxy_set_known_digest(proxy *client, const char *digest) {
    client->has_definitions =
        digest && strcmp(digest, entity_def_registry_digest_hex(client->app->definitions)) == 0;
}

proxy *proxy_find_by_entity(const baseapp *app, uint64_t entity_id) {
    return id_map_get(&app->proxies_by_entity, entity_id);
}

static void proxy_send(proxy *client, const Tessera__Client__ServerToClient *message) {
    channel_send_message(client->ch, &message->base);
}

/* Tells the player's cell entity, wherever it is, to go. A proxy still
 * waiting for its cell to be created (incarnation 0) leaves that to the
 * reply, which undoes it (cell_link.c). */
static void proxy_release_cell(proxy *client) {
    if (client->cell.incarnation != 0) {
        Tessera__Cluster__DestroyCellEntity destroy = TESSERA__CLUSTER__DESTROY_CELL_ENTITY__INIT;
        Tessera__Cluster__CellMessage message = TESSERA__CLUSTER__CELL_MESSAGE__INIT;
        message.body_case = TESSERA__CLUSTER__CELL_MESSAGE__BODY_DESTROY;
        message.destroy = &destroy;
        cell_link_send(client, &message);
    }
    cell_address_clear(&client->cell);
}

/* Removes the proxy from every index. After this nothing can reach it but
 * its channel, which is closing. */
static void proxy_unlink(proxy *client) {
    baseapp *app = client->app;
    if (client->congested) {
        client->congested = false;
        app->congested_clients--;
    }
    proxy_release_cell(client);
    if (client->entity_id && id_map_get(&app->proxies_by_entity, client->entity_id) == client)
        id_map_remove(&app->proxies_by_entity, client->entity_id);
    if (client->account[0]) {
        uint64_t key = baseapp_account_key(client->account);
        if (id_map_get(&app->proxies_by_account, key) == client) id_map_remove(&app->proxies_by_account, key);
    }
}

static void proxy_vfail(proxy *client, Tessera__Client__ErrorCode code, const char *public_text, const char *format,
                        va_list args) {
    if (client->state == PROXY_CLOSING) return;
    char text[256];
    vsnprintf(text, sizeof text, format, args);
    log_info("client %s (account '%s', entity %" PRIu64 ", %s): dropped: %s", channel_peer_name(client->ch),
             client->account, client->entity_id, proxy_state_name(client->state), text);
    Tessera__Client__Error error = TESSERA__CLIENT__ERROR__INIT;
    error.code = code;
    error.message = (char *)(public_text ? public_text : text);
    if (code == TESSERA__CLIENT__ERROR_CODE__ERROR_SERVER_SHUTDOWN)
        error.retry_after_ms = (uint32_t)client->app->settings.shutdown_retry_ms;
    size_t slots = sizeof client->app->errors_sent / sizeof client->app->errors_sent[0];
    client->app->errors_sent[(size_t)code < slots ? (size_t)code : slots - 1]++;
    if (code == TESSERA__CLIENT__ERROR_CODE__ERROR_BAD_CREDENTIALS) client->app->login_failures++;
    Tessera__Client__ServerToClient message = TESSERA__CLIENT__SERVER_TO_CLIENT__INIT;
    message.body_case = TESSERA__CLIENT__SERVER_TO_CLIENT__BODY_ERROR;
    message.error = &error;
    proxy_send(client, &message);
    client->state = PROXY_CLOSING;
    proxy_unlink(client);
    channel_close_after_flush(client->ch, text);
}

void proxy_fail(proxy *client, Tessera__Client__ErrorCode code, const char *format, ...) {
    va_list args;
    va_start(args, format);
    proxy_vfail(client, code, NULL, format, args);
    va_end(args);
}

void proxy_fail_quietly(proxy *client, Tessera__Client__ErrorCode code, const char *public_text, const char *format,
                        ...) {
    va_list args;
    va_start(args, format);
    proxy_vfail(client, code, public_text, format, args);
    va_end(args);
}

static void proxy_on_close(channel *ch, const char *reason) {
    proxy *client = channel_user_data(ch);
    baseapp *app = client->app;
    if (client->state != PROXY_CLOSING)
        log_info("client %s (account '%s', entity %" PRIu64 ") disconnected: %s", channel_peer_name(ch),
                 client->account, client->entity_id, reason);
    proxy_unlink(client);
    entity_list_remove(app->proxies, client->handle);
    base_entity_free(client);
    free(client);
}

static void proxy_on_hello(proxy *client, const Tessera__Client__Hello *hello) {
    if (client->state != PROXY_AWAITING_HELLO) {
        proxy_fail(client, TESSERA__CLIENT__ERROR_CODE__ERROR_OUT_OF_ORDER, "hello sent twice");
        return;
    }
    size_t name_length = hello->client_name ? strlen(hello->client_name) : 0;
    if (name_length > PROXY_CLIENT_NAME_MAX) {
        proxy_fail(client, TESSERA__CLIENT__ERROR_CODE__ERROR_INVALID_ARGUMENT,
                   "client_name is %zu bytes; at most %d", name_length, PROXY_CLIENT_NAME_MAX);
        return;
    }
    log_info("client %s says it is '%s'", channel_peer_name(client->ch), name_length ? hello->client_name : "");
    uint32_t ours = TESSERA__CLIENT__PROTOCOL_VERSION__PROTOCOL_VERSION;
    if (hello->protocol_version != ours) {
        proxy_fail(client, TESSERA__CLIENT__ERROR_CODE__ERROR_PROTOCOL_VERSION_MISMATCH,
                   "protocol version mismatch: client speaks %u, server speaks %u", hello->protocol_version, ours);
        return;
    }
    Tessera__Client__ServerHello reply = TESSERA__CLIENT__SERVER_HELLO__INIT;
    reply.protocol_version = ours;
    reply.server_name = "tessera-baseapp";
    Tessera__Client__ServerToClient message = TESSERA__CLIENT__SERVER_TO_CLIENT__INIT;
    message.body_case = TESSERA__CLIENT__SERVER_TO_CLIENT__BODY_HELLO;
    message.hello = &reply;
    proxy_send(client, &message);
    client->state = PROXY_AWAITING_LOGIN;
}

static void proxy_on_login(proxy *client, const Tessera__Client__LoginRequest *login) {
    if (client->state == PROXY_AWAITING_HELLO) {
        proxy_fail(client, TESSERA__CLIENT__ERROR_CODE__ERROR_OUT_OF_ORDER, "login before hello");
        return;
    }
    if (client->state != PROXY_AWAITING_LOGIN) {
        proxy_fail(client, TESSERA__CLIENT__ERROR_CODE__ERROR_OUT_OF_ORDER, "login sent twice");
        return;
    }
    const char *problem = login_check_account_name(login->account);
    if (problem) {
        proxy_fail(client, TESSERA__CLIENT__ERROR_CODE__ERROR_INVALID_ARGUMENT, "account name %s", problem);
        return;
    }
    size_t password_length = login->password ? strlen(login->password) : 0;
    if (password_length < 1 || password_length > 128) {
        proxy_fail(client, TESSERA__CLIENT__ERROR_CODE__ERROR_INVALID_ARGUMENT,
                   "password must be 1 to 128 bytes, got %zu", password_length);
        return;
    }
    if (client->app->draining) {
        proxy_fail(client, TESSERA__CLIENT__ERROR_CODE__ERROR_SERVER_SHUTDOWN,
                   "this baseapp is stopping: log in again in a moment (another baseapp will take you)");
        return;
    }
    uint64_t wait_ms =
        login_throttle_check(&client->app->throttle, login->account, channel_peer_name(client->ch), clock_monotonic_us());
    if (wait_ms) {
        client->app->logins_throttled++;
        proxy_fail(client, TESSERA__CLIENT__ERROR_CODE__ERROR_RATE_LIMITED,
                   "too many failed logins for account '%s' or from this address: try again in %llu ms",
                   login->account, (unsigned long long)wait_ms);
        return;
    }
    snprintf(client->account, sizeof client->account, "%s", login->account);
    proxy_set_known_digest(client, login->known_definitions_digest);
    client->state = PROXY_AUTHENTICATING;
    login_start(client, login->account, login->password);
}

static void proxy_on_move(proxy *client, const Tessera__Client__Move *move) {
    if (client->state != PROXY_IN_WORLD) {
        proxy_fail(client, TESSERA__CLIENT__ERROR_CODE__ERROR_NOT_LOGGED_IN, "move before login completed (%s)",
                   proxy_state_name(client->state));
        return;
    }
    if (!move->position || !isfinite(move->position->x) || !isfinite(move->position->y) ||
        !isfinite(move->position->z) || !isfinite(move->yaw)) {
        proxy_fail(client, TESSERA__CLIENT__ERROR_CODE__ERROR_INVALID_ARGUMENT,
                   "move without a finite position and yaw");
        return;
    }
    /* A flood of moves is not a speed hack (the cell checks distance), but
     * it would cost the cell and the cluster link: beyond the client's rate
     * moves are dropped -- the next one carries the latest position. */
    const baseapp_settings *settings = &client->app->settings;
    uint64_t now = clock_monotonic_us();
    double bank = settings->client_moves_per_second / 2.0;
    client->move_tokens += (double)(now - client->move_tokens_us) / 1e6 * settings->client_moves_per_second;
    if (client->move_tokens > bank) client->move_tokens = bank;
    client->move_tokens_us = now;
    if (client->move_tokens < 1.0) {
        client->app->moves_dropped++;
        return;
    }
    client->move_tokens -= 1.0;
    Tessera__Cluster__ClientMove relay = TESSERA__CLUSTER__CLIENT_MOVE__INIT;
    relay.move = (Tessera__Client__Move *)move;
    Tessera__Cluster__CellMessage message = TESSERA__CLUSTER__CELL_MESSAGE__INIT;
    message.body_case = TESSERA__CLUSTER__CELL_MESSAGE__BODY_CLIENT_MOVE;
    message.client_move = &relay;
    cell_link_send(client, &message);
}

/* Method calls are held to client_calls_per_second (a bank of one second's
 * worth): excess calls are dropped and counted, and a client that keeps it
 * up, with more dropped than client_calls_per_second x PROXY_CALL_STRIKE_SECONDS
 * within a decaying window, is disconnected. Returns whether this call goes. */
#define PROXY_CALL_STRIKE_SECONDS 3.0
static bool proxy_take_call_token(proxy *client) {
    baseapp *app = client->app;
    double rate = app->settings.client_calls_per_second;
    uint64_t now = clock_monotonic_us();
    double elapsed = (double)(now - client->call_tokens_us) / 1e6;
    client->call_tokens_us = now;
    client->call_tokens += elapsed * rate;
    if (client->call_tokens > rate) client->call_tokens = rate;
    /* Strikes drain at the allowed rate too: an occasional burst is forgiven. */
    client->call_strikes -= elapsed * rate;
    if (client->call_strikes < 0) client->call_strikes = 0;
    if (client->call_tokens >= 1.0) {
        client->call_tokens -= 1.0;
        return true;
    }
    app->calls_dropped++;
    client->call_strikes += 1.0;
    if (client->call_strikes > rate * PROXY_CALL_STRIKE_SECONDS)
        proxy_fail(client, TESSERA__CLIENT__ERROR_CODE__ERROR_RATE_LIMITED,
                   "method calls faster than %g a second, kept up: %.0f dropped lately", rate, client->call_strikes);
    return false;
}

static void proxy_on_frame(channel *ch, const uint8_t *frame, size_t length) {
    proxy *client = channel_user_data(ch);
    if (client->state == PROXY_CLOSING) return;
    Tessera__Client__ClientToServer *message = tessera__client__client_to_server__unpack(NULL, length, frame);
    if (!message) {
        proxy_fail(client, TESSERA__CLIENT__ERROR_CODE__ERROR_MALFORMED_FRAME,
                   "a %zu-byte frame is not a valid ClientToServer message", length);
        return;
    }
    switch (message->body_case) {
    case TESSERA__CLIENT__CLIENT_TO_SERVER__BODY_HELLO: proxy_on_hello(client, message->hello); break;
    case TESSERA__CLIENT__CLIENT_TO_SERVER__BODY_LOGIN: proxy_on_login(client, message->login); break;
    case TESSERA__CLIENT__CLIENT_TO_SERVER__BODY_MOVE:
        if (client->state == PROXY_AWAITING_HELLO || client->state == PROXY_AWAITING_LOGIN ||
            client->state == PROXY_AUTHENTICATING)
            proxy_fail(client, TESSERA__CLIENT__ERROR_CODE__ERROR_NOT_LOGGED_IN, "move before login");
        else if (client->state == PROXY_IN_WORLD)
            proxy_on_move(client, message->move);
        /* While the cell is being created a move has nowhere to go yet. */
        break;
    case TESSERA__CLIENT__CLIENT_TO_SERVER__BODY_CALL:
        if (client->state == PROXY_IN_WORLD) {
            if (proxy_take_call_token(client)) base_entity_on_call(client, message->call);
        }
        else if (client->state != PROXY_CREATING_CELL)
            proxy_fail(client, TESSERA__CLIENT__ERROR_CODE__ERROR_NOT_LOGGED_IN, "method call before login");
        else
            proxy_fail(client, TESSERA__CLIENT__ERROR_CODE__ERROR_OUT_OF_ORDER,
                       "method call before the login reply");
        break;
    default:
        proxy_fail(client, TESSERA__CLIENT__ERROR_CODE__ERROR_UNKNOWN_MESSAGE,
                   "unknown message type (no known field set in ClientToServer)");
        break;
    }
    tessera__client__client_to_server__free_unpacked(message, NULL);
}

static void proxy_on_oversized_frame(channel *ch, uint32_t declared_length) {
    proxy *client = channel_user_data(ch);
    proxy_fail(client, TESSERA__CLIENT__ERROR_CODE__ERROR_FRAME_TOO_LARGE,
               "frame of %u bytes exceeds the limit of %lld bytes", declared_length,
               (long long)client->app->settings.client_max_frame_bytes);
}

static const channel_callbacks proxy_channel_callbacks = {
    .on_frame = proxy_on_frame,
    .on_connect = NULL,
    .on_oversized_frame = proxy_on_oversized_frame,
    .on_close = proxy_on_close,
};

void proxy_accept(baseapp *app, uv_stream_t *listener) {
    const baseapp_settings *settings = &app->settings;
    channel_options options = {
        .max_frame_bytes = (size_t)settings->client_max_frame_bytes,
        .write_high_water_bytes = (size_t)settings->client_write_high_water_bytes,
        .write_limit_bytes = (size_t)settings->client_write_limit_bytes,
        .totals = &app->client_totals,
        .socket_send_buffer_bytes = (size_t)settings->client_send_buffer_bytes,
    };
    proxy *client = xcalloc(1, sizeof *client);
    client->app = app;
    client->state = PROXY_AWAITING_HELLO;
    client->connected_us = clock_monotonic_us();
    client->ch = channel_accept(listener, &options, &proxy_channel_callbacks, client);
    if (!client->ch) {
        free(client);
        return;
    }
    client->handle = entity_list_add(app->proxies, client);
    if (client->handle == ENTITY_HANDLE_NONE || app->shutting_down ||
        (int64_t)entity_list_count(app->proxies) > settings->max_clients) {
        /* The proxy must be in the list for its close callback to find it;
         * a full list leaves it out and the close path copes with that. */
        proxy_fail(client, TESSERA__CLIENT__ERROR_CODE__ERROR_UNAVAILABLE, "server full, try another baseapp");
        return;
    }
    log_debug("client %s connected", channel_peer_name(client->ch));
}

void proxy_login_succeeded(proxy *client) {
    baseapp *app = client->app;
    if (client->state != PROXY_AUTHENTICATING) return;
    app->logins++;

    /* One session per account on this baseapp: the newer login wins, as a
     * player who reconnects from a new device expects. */
    uint64_t account_key = baseapp_account_key(client->account);
    proxy *previous = id_map_get(&app->proxies_by_account, account_key);
    if (previous && previous != client && strcmp(previous->account, client->account) == 0)
        proxy_fail(previous, TESSERA__CLIENT__ERROR_CODE__ERROR_REPLACED, "account '%s' logged in from %s",
                   client->account, channel_peer_name(client->ch));
    id_map_put(&app->proxies_by_account, account_key, client);

    uint64_t entity_id;
    if (id_block_take(app->entity_ids, &entity_id) != 0) {
        proxy_fail(client, TESSERA__CLIENT__ERROR_CODE__ERROR_UNAVAILABLE, "no entity ids available, try again");
        return;
    }
    uint64_t cellapp_id = cell_link_choose(app);
    if (!cellapp_id) {
        proxy_fail(client, TESSERA__CLIENT__ERROR_CODE__ERROR_UNAVAILABLE, "no cellapp available, try again");
        return;
    }
    client->entity_id = entity_id;
    /* The cellapp asked; the address comes with its answer. */
    cell_address_init(&client->cell, cellapp_id, 0);
    id_map_put(&app->proxies_by_entity, entity_id, client);
    base_entity_create(client);
    bit_writer cell_properties;
    bit_writer_init(&cell_properties);
    base_entity_cell_properties(client, &cell_properties);

    Tessera__Cluster__CreateCellEntity create = TESSERA__CLUSTER__CREATE_CELL_ENTITY__INIT;
    create.entity_id = entity_id;
    create.baseapp_id = app->process_id;
    create.entity_type = app->settings.player_entity_type;
    create.space_name = "";
    create.has_client = true;
    create.cell_properties.data = (uint8_t *)bit_writer_data(&cell_properties);
    create.cell_properties.len = bit_writer_bytes(&cell_properties);
    peer_send_create_cell_entity(app->peers, cellapp_id, &create);
    bit_writer_close(&cell_properties);
    client->state = PROXY_CREATING_CELL;
    log_debug("account '%s' logged in as entity %" PRIu64 " on cellapp %" PRIu64, client->account, entity_id,
              cellapp_id);
}

void proxy_sweep(baseapp *app) {
    uint64_t now = clock_monotonic_us();
    uint64_t timeout_us = (uint64_t)app->settings.login_timeout_ms * 1000u;
    uint32_t cursor = 0;
    proxy *client;
    uint64_t frame_timeout_us = (uint64_t)app->settings.client_frame_timeout_ms * 1000u;
    while ((client = entity_list_next(app->proxies, &cursor, NULL)) != NULL) {
        if (client->state == PROXY_CLOSING) continue;
        uint64_t since = channel_incomplete_frame_since_us(client->ch);
        if (since && now > since && now - since > frame_timeout_us) {
            proxy_fail(client, TESSERA__CLIENT__ERROR_CODE__ERROR_MALFORMED_FRAME,
                       "a frame begun %llu ms ago is still incomplete (client_frame_timeout_ms %lld)",
                       (unsigned long long)((now - since) / 1000), (long long)app->settings.client_frame_timeout_ms);
            continue;
        }
        if (client->state == PROXY_IN_WORLD) continue;
        if (now - client->connected_us > timeout_us)
            proxy_fail(client, TESSERA__CLIENT__ERROR_CODE__ERROR_UNAVAILABLE, "login not completed within %lld ms",
                       (long long)app->settings.login_timeout_ms);
    }
}

void proxy_close_all(baseapp *app, const char *reason) {
    uint32_t cursor = 0;
    proxy *client;
    while ((client = entity_list_next(app->proxies, &cursor, NULL)) != NULL)
        proxy_fail(client, TESSERA__CLIENT__ERROR_CODE__ERROR_SERVER_SHUTDOWN, "%s", reason);
}
