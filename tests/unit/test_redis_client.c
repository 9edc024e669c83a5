/* test_redis_client.c -- unit tests for redis_client.h's connection
 * handling over real TCP sockets on 127.0.0.1 and a real uv_loop_t.
 *
 * The peer is a raw uv_tcp_t listener standing where Redis would, because
 * what is tested is a failure a healthy redis-server does not produce on
 * demand: the server vanishing with a command unanswered and the kernel
 * resetting the connection (the integration tests kill a real Redis, and
 * hit this only when the timing falls that way). A reset must reach the
 * client as a lost connection: the command in flight calls back once with
 * no reply, the state callback says disconnected, and the client connects
 * again by itself. A watchdog fails the test instead of hanging it. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "log.h"
#include "redis_client.h"

#define WATCHDOG_MS 10000

typedef struct test_ctx {
    uv_loop_t loop;
    uv_tcp_t listener;
    uv_tcp_t accepted[4];
    int accepts;
    int port;
    uv_timer_t watchdog;
    int watchdog_fired;
    uv_timer_t finish; /* stops everything outside hiredis's callbacks */
    redis_client *client;
    int connects, disconnects;
    int replies, null_replies;
    int bytes_before_reset; /* what the peer read of the command */
} test_ctx;

static void on_closed(uv_handle_t *handle) { (void)handle; }

static void stop_everything(test_ctx *ctx) {
    if (ctx->client) {
        redis_client_free(ctx->client);
        ctx->client = NULL;
    }
    if (!uv_is_closing((uv_handle_t *)&ctx->listener)) uv_close((uv_handle_t *)&ctx->listener, on_closed);
    for (int i = 0; i < ctx->accepts; i++)
        if (!uv_is_closing((uv_handle_t *)&ctx->accepted[i])) uv_close((uv_handle_t *)&ctx->accepted[i], on_closed);
    if (!uv_is_closing((uv_handle_t *)&ctx->watchdog)) uv_close((uv_handle_t *)&ctx->watchdog, on_closed);
    if (!uv_is_closing((uv_handle_t *)&ctx->finish)) uv_close((uv_handle_t *)&ctx->finish, on_closed);
}

static void on_finish(uv_timer_t *timer) { stop_everything(timer->data); }

static void on_watchdog(uv_timer_t *timer) {
    test_ctx *ctx = timer->data;
    ctx->watchdog_fired = 1;
    stop_everything(ctx);
}

// cppcheck-suppress constParameter ; a redis_client reply callback: its type is redis_client.h's
static void on_reply(redis_client *client, redisReply *reply, void *user_data) {
    test_ctx *ctx = user_data;
    (void)client;
    ctx->replies++;
    if (!reply) ctx->null_replies++;
}

static void on_state(redis_client *client, int connected, unsigned failed_attempts, void *user_data) {
    test_ctx *ctx = user_data;
    (void)failed_attempts;
    if (connected) {
        ctx->connects++;
        /* The first connection gets a command, which the peer answers with
         * a reset; the second proves the client came back by itself. */
        if (ctx->connects == 1) assert_int_equal(redis_client_command(client, on_reply, ctx, "PING"), 0);
        if (ctx->connects == 2) uv_timer_start(&ctx->finish, on_finish, 0, 0);
    } else {
        ctx->disconnects++;
    }
}

static void alloc_buffer(uv_handle_t *handle, size_t suggested, uv_buf_t *buf) {
    (void)handle;
    static char storage[4096]; /* the peer only counts what it reads */
    (void)suggested;
    *buf = uv_buf_init(storage, sizeof storage);
}

/* The peer reads the command, then closes with SO_LINGER 0: the kernel
 * drops the connection with a reset instead of a FIN. */
static void on_peer_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf) {
    test_ctx *ctx = stream->data;
    (void)buf;
    if (nread <= 0) return;
    ctx->bytes_before_reset += (int)nread;
    uv_os_fd_t fd;
    assert_int_equal(uv_fileno((uv_handle_t *)stream, &fd), 0);
    struct linger linger = {.l_onoff = 1, .l_linger = 0};
    assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, sizeof linger), 0);
    uv_read_stop(stream);
    uv_close((uv_handle_t *)stream, on_closed);
}

static void on_connection(uv_stream_t *server, int status) {
    test_ctx *ctx = server->data;
    assert_int_equal(status, 0);
    assert_true(ctx->accepts < 4);
    uv_tcp_t *peer = &ctx->accepted[ctx->accepts++];
    uv_tcp_init(&ctx->loop, peer);
    peer->data = ctx;
    assert_int_equal(uv_accept(server, (uv_stream_t *)peer), 0);
    if (ctx->accepts == 1) uv_read_start((uv_stream_t *)peer, alloc_buffer, on_peer_read);
}

static void listen_on_free_port(test_ctx *ctx) {
    struct sockaddr_in address;
    uv_ip4_addr("127.0.0.1", 0, &address);
    uv_tcp_init(&ctx->loop, &ctx->listener);
    ctx->listener.data = ctx;
    assert_int_equal(uv_tcp_bind(&ctx->listener, (const struct sockaddr *)&address, 0), 0);
    assert_int_equal(uv_listen((uv_stream_t *)&ctx->listener, 8, on_connection), 0);
    struct sockaddr_storage bound;
    int length = sizeof bound;
    assert_int_equal(uv_tcp_getsockname(&ctx->listener, (struct sockaddr *)&bound, &length), 0);
    ctx->port = ntohs(((struct sockaddr_in *)&bound)->sin_port);
}

static void test_a_reset_with_a_command_in_flight_is_a_lost_connection(void **state) {
    (void)state;
    test_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    assert_int_equal(uv_loop_init(&ctx.loop), 0);
    listen_on_free_port(&ctx);
    uv_timer_init(&ctx.loop, &ctx.watchdog);
    ctx.watchdog.data = &ctx;
    uv_timer_start(&ctx.watchdog, on_watchdog, WATCHDOG_MS, 0);
    uv_timer_init(&ctx.loop, &ctx.finish);
    ctx.finish.data = &ctx;
    ctx.client = redis_client_create(&ctx.loop, "127.0.0.1", ctx.port, 50, on_state, &ctx);
    assert_non_null(ctx.client);
    redis_client_start(ctx.client);
    uv_run(&ctx.loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&ctx.loop), 0);

    assert_false(ctx.watchdog_fired);
    assert_true(ctx.bytes_before_reset > 0);
    assert_int_equal(ctx.replies, 1);      /* exactly once */
    assert_int_equal(ctx.null_replies, 1); /* and with no reply */
    assert_int_equal(ctx.disconnects, 1);
    assert_int_equal(ctx.connects, 2); /* and it came back */
}

int main(void) {
    log_set_level(LOG_LEVEL_WARN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_reset_with_a_command_in_flight_is_a_lost_connection),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
