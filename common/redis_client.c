/* redis_client.c -- owns the hiredis async context, its libuv attachment and
 * the retry timer. It turns hiredis's connect/disconnect callbacks into one
 * state callback and keeps every command callback firing exactly once. */
#include "redis_client.h"

#include "clock.h"

#include <hiredis/async.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "redis_libuv.h"

struct redis_client {
    uv_loop_t *loop;
    uv_timer_t retry_timer;
    redisAsyncContext *context; /* NULL while disconnected */
    int connected;
    int freeing;
    int timer_closed; /* freeing: the retry timer is released */
    unsigned failed_attempts;
    unsigned retry_ms;
    char host[64];
    int port;
    char address[80];
    redis_state_callback on_state;
    void *user_data;
    latency_histogram latency; /* command round trips, for /metrics */
    char *password;            /* NULL: no AUTH; wiped and freed with the client */
};

typedef struct redis_request {
    redis_client *client;
    redis_reply_callback callback;
    void *user_data;
    uint64_t sent_us; /* monotonic */
} redis_request;

static void redis_client_connect_now(redis_client *client);

/* How long one connection attempt may take. A firewall that drops SYNs
 * never answers at all; the deadline turns that into an ordinary failed
 * attempt. */
#define REDIS_CONNECT_TIMEOUT_MS 1000

static void redis_client_schedule_retry(redis_client *client);
static void redis_client_report(redis_client *client);

/* The retry timer does double duty: while an attempt is in flight it is the
 * attempt's deadline; otherwise it is the pause before the next attempt. */
static void redis_client_on_retry(uv_timer_t *timer) {
    redis_client *client = timer->data;
    if (client->context && !client->connected) {
        redisAsyncContext *context = client->context;
        client->context = NULL;
        redisAsyncFree(context);
        client->failed_attempts++;
        log_warn("redis %s: connect attempt %u failed: no answer within %d ms; retrying in %u ms", client->address,
                 client->failed_attempts, REDIS_CONNECT_TIMEOUT_MS, client->retry_ms);
        redis_client_report(client);
        redis_client_schedule_retry(client);
        return;
    }
    redis_client_connect_now(client);
}

static void redis_client_schedule_retry(redis_client *client) {
    if (client->freeing) return;
    uv_timer_start(&client->retry_timer, redis_client_on_retry, client->retry_ms, 0);
}

static void redis_client_report(redis_client *client) {
    if (!client->freeing && client->on_state)
        client->on_state(client, client->connected, client->failed_attempts, client->user_data);
}

/* While freeing, the struct outlives both the retry timer and the hiredis
 * context; whichever is released last frees it. */
static void redis_client_release_if_done(redis_client *client) {
    if (client->freeing && client->timer_closed && !client->context) {
        latency_histogram_close(&client->latency);
        if (client->password) {
            sodium_memzero(client->password, strlen(client->password));
            free(client->password);
        }
        free(client);
    }
}

static void redis_client_now_connected(redis_client *client) {
    client->connected = 1;
    client->failed_attempts = 0;
    log_info("redis %s: connected", client->address);
    redis_client_report(client);
}

/* AUTH's answer: connected, or a failed attempt (the connection is dropped
 * and its disconnect callback schedules the retry). NULL: the connection
 * went first; its disconnect callback sees to it. */
static void redis_client_on_auth(redisAsyncContext *context, void *reply_pointer, void *privdata) {
    redis_client *client = privdata;
    const redisReply *reply = reply_pointer;
    if (!reply || client->freeing || client->context != context) return;
    if (reply->type == REDIS_REPLY_STATUS && strcmp(reply->str, "OK") == 0) {
        redis_client_now_connected(client);
        return;
    }
    client->failed_attempts++;
    log_warn("redis %s: connect attempt %u failed: AUTH refused (%s); retrying in %u ms", client->address,
             client->failed_attempts, reply->type == REDIS_REPLY_ERROR ? reply->str : "an unexpected reply",
             client->retry_ms);
    redis_client_report(client);
    redisAsyncDisconnect(context);
}

static void redis_client_on_connect(const redisAsyncContext *context, int status) {
    redis_client *client = context->data;
    if (!client || client->context != context) return;
    if (status != REDIS_OK) {
        /* hiredis frees the context after this callback. */
        client->context = NULL;
        uv_timer_stop(&client->retry_timer);
        if (client->freeing) {
            redis_client_release_if_done(client);
            return;
        }
        client->failed_attempts++;
        log_warn("redis %s: connect attempt %u failed: %s; retrying in %u ms", client->address, client->failed_attempts,
                 context->errstr, client->retry_ms);
        redis_client_report(client);
        redis_client_schedule_retry(client);
        return;
    }
    uv_timer_stop(&client->retry_timer);
    if (client->password) {
        /* Nothing else is sent before the answer: commands wait for connected. */
        redisAsyncContext *mutable_context = client->context;
        if (redisAsyncCommand(mutable_context, redis_client_on_auth, client, "AUTH %s", client->password) != REDIS_OK)
            redisAsyncDisconnect(mutable_context);
        return;
    }
    redis_client_now_connected(client);
}

static void redis_client_on_disconnect(const redisAsyncContext *context, int status) {
    redis_client *client = context->data;
    if (!client || client->context != context) return;
    client->context = NULL;
    int was_connected = client->connected;
    client->connected = 0;
    if (client->freeing) {
        redis_client_release_if_done(client);
        return;
    }
    if (!was_connected) {
        /* Dropped before AUTH was accepted: that attempt is already counted
         * (a refusal) or counts now (the link went during AUTH). */
        if (status != REDIS_OK) {
            client->failed_attempts++;
            log_warn("redis %s: connect attempt %u failed during AUTH: %s; retrying in %u ms", client->address,
                     client->failed_attempts, context->errstr, client->retry_ms);
            redis_client_report(client);
        }
        redis_client_schedule_retry(client);
        return;
    }
    log_warn("redis %s: connection lost (%s); reconnecting every %u ms", client->address,
             status == REDIS_OK ? "closed" : context->errstr, client->retry_ms);
    redis_client_report(client);
    redis_client_schedule_retry(client);
}

static void redis_client_connect_now(redis_client *client) {
    if (client->freeing || client->context) return;
    redisAsyncContext *context = redisAsyncConnect(client->host, client->port);
    if (!context || context->err) {
        client->failed_attempts++;
        log_warn("redis %s: connect attempt %u failed: %s; retrying in %u ms", client->address, client->failed_attempts,
                 context ? context->errstr : "out of memory", client->retry_ms);
        if (context) redisAsyncFree(context);
        redis_client_report(client);
        redis_client_schedule_retry(client);
        return;
    }
    context->data = client;
    if (redis_libuv_attach(context, client->loop) != 0) {
        client->failed_attempts++;
        log_warn("redis %s: connect attempt %u failed: cannot watch its socket; retrying in %u ms", client->address,
                 client->failed_attempts, client->retry_ms);
        redisAsyncFree(context);
        redis_client_report(client);
        redis_client_schedule_retry(client);
        return;
    }
    redisAsyncSetConnectCallback(context, redis_client_on_connect);
    redisAsyncSetDisconnectCallback(context, redis_client_on_disconnect);
    client->context = context;
    uv_timer_start(&client->retry_timer, redis_client_on_retry, REDIS_CONNECT_TIMEOUT_MS, 0);
}

redis_client *redis_client_create(uv_loop_t *loop, const char *host, int port, unsigned retry_ms,
                                  redis_state_callback on_state, void *user_data) {
    if (!host || strlen(host) >= 64 || port <= 0 || port > 65535) return NULL;
    redis_client *client = xcalloc(1, sizeof *client);
    client->loop = loop;
    snprintf(client->host, sizeof client->host, "%s", host);
    client->port = port;
    snprintf(client->address, sizeof client->address, "%s:%d", host, port);
    client->retry_ms = retry_ms ? retry_ms : 1;
    client->on_state = on_state;
    client->user_data = user_data;
    /* 100 us buckets up to 2 s: a local Redis answers in tens of us, a
     * distant or busy one in milliseconds. */
    if (latency_histogram_init(&client->latency, 100, 2000000) != 0) log_panic("redis latency histogram layout");
    uv_timer_init(loop, &client->retry_timer);
    client->retry_timer.data = client;
    return client;
}

void redis_client_start(redis_client *client) { redis_client_connect_now(client); }

void redis_client_set_password(redis_client *client, const char *password) {
    if (client->password) {
        sodium_memzero(client->password, strlen(client->password));
        free(client->password);
        client->password = NULL;
    }
    if (password && password[0]) client->password = xstrdup(password);
}

static void redis_client_on_timer_closed(uv_handle_t *handle) {
    redis_client *client = handle->data;
    client->timer_closed = 1;
    redis_client_release_if_done(client);
}

void redis_client_free(redis_client *client) {
    if (!client || client->freeing) return;
    client->freeing = 1;
    uv_timer_stop(&client->retry_timer);
    if (client->context && client->connected) {
        /* A graceful disconnect: commands already sent (a registry entry's
         * removal at shutdown) still complete; the disconnect callback
         * then releases the context. */
        client->connected = 0;
        redisAsyncDisconnect(client->context);
    } else if (client->context) {
        /* Still connecting: nothing to flush. */
        redisAsyncContext *context = client->context;
        client->context = NULL;
        redisAsyncFree(context);
    }
    uv_close((uv_handle_t *)&client->retry_timer, redis_client_on_timer_closed);
}

int redis_client_is_connected(const redis_client *client) { return client->connected; }
const latency_histogram *redis_client_latency(const redis_client *client) { return &client->latency; }
const char *redis_client_address(const redis_client *client) { return client->address; }

static void redis_client_on_reply(redisAsyncContext *context, void *reply, void *privdata) {
    redis_request *request = privdata;
    (void)context;
    if (reply) latency_histogram_add(&request->client->latency, clock_monotonic_us() - request->sent_us);
    if (request->callback) request->callback(request->client, reply, request->user_data);
    free(request);
}

int redis_client_command(redis_client *client, redis_reply_callback callback, void *user_data, const char *format,
                         ...) {
    if (!client->connected || !client->context) return -1;
    redis_request *request = xmalloc(sizeof *request);
    request->client = client;
    request->callback = callback;
    request->user_data = user_data;
    request->sent_us = clock_monotonic_us();
    va_list args;
    va_start(args, format);
    int rc = redisvAsyncCommand(client->context, redis_client_on_reply, request, format, args);
    va_end(args);
    if (rc != REDIS_OK) {
        free(request);
        return -1;
    }
    return 0;
}

int redis_client_command_argv(redis_client *client, redis_reply_callback callback, void *user_data, int argc,
                              const char **argv, const size_t *argv_lengths) {
    if (!client->connected || !client->context) return -1;
    redis_request *request = xmalloc(sizeof *request);
    request->client = client;
    request->callback = callback;
    request->user_data = user_data;
    request->sent_us = clock_monotonic_us();
    if (redisAsyncCommandArgv(client->context, redis_client_on_reply, request, argc, argv, argv_lengths) != REDIS_OK) {
        free(request);
        return -1;
    }
    return 0;
}
