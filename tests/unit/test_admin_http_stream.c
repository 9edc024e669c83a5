/* test_admin_http_stream.c -- admin_http's event streams against clients
 * that stop reading, over real sockets on 127.0.0.1 and a real uv loop.
 *
 * Two streams of one listener get the same events, 64 KiB each: one
 * client reads everything, the other never reads (a small receive
 * buffer). Once the stalled one's unwritten bytes pass the backlog
 * (1 MiB), the listener closes it and only it: the reader keeps getting
 * events, the listener keeps answering requests, and the stalled client
 * finds its connection ended. A bound on the rounds fails the test instead
 * of hanging it. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "admin_http.h"
#include "log.h"

#define TOKEN "stream-test-token-0123456789abcdef"
#define EVENT_BYTES ((size_t)64 * 1024)
/* 64 KiB a round: far past the backlog plus both kernels' buffers. */
#define MAX_ROUNDS 4000

static void on_events(admin_http_request *request, void *user_data) {
    (void)user_data;
    admin_http_start_stream(request);
}

static void on_ping(admin_http_request *request, void *user_data) {
    (void)user_data;
    admin_http_reply_text(request, 200, "pong\n");
}

static char *render_event(const char *query, void *user_data) {
    (void)query;
    (void)user_data;
    char *data = malloc(EVENT_BYTES + 1);
    if (!data) return NULL;
    memset(data, 'e', EVENT_BYTES);
    data[EVENT_BYTES] = '\0';
    return data;
}

/* A blocking connection to 127.0.0.1:port with the given receive buffer
 * (0: the default) that has sent `request`; made non-blocking after. */
static int connect_and_send(int port, int receive_buffer, const char *request) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    if (receive_buffer > 0)
        assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof receive_buffer), 0);
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&address, sizeof address), 0);
    size_t length = strlen(request);
    assert_int_equal(send(fd, request, length, 0), (ssize_t)length);
    assert_int_equal(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK), 0);
    return fd;
}

/* Reads whatever is there; returns the bytes read, or -1 once the peer
 * has ended the connection (EOF or reset). */
static long long drain(int fd) {
    char buffer[65536];
    long long total = 0;
    for (;;) {
        ssize_t n = recv(fd, buffer, sizeof buffer, 0);
        if (n > 0) {
            total += n;
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return total;
        if (n < 0 && errno == EINTR) continue;
        return -1;
    }
}

static void run_a_little(uv_loop_t *loop) {
    for (int i = 0; i < 4; i++) uv_run(loop, UV_RUN_NOWAIT);
}

static void test_stalled_stream_closed_reader_kept(void **state) {
    (void)state;
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    char err[256];
    admin_http_options options = {.token = TOKEN};
    admin_http *server = admin_http_create(&loop, "127.0.0.1", 0, &options, err, sizeof err);
    assert_non_null(server);
    admin_http_route(server, "GET", "/api/events", on_events, NULL);
    admin_http_route(server, "GET", "/ping", on_ping, NULL);
    int port = admin_http_port(server);
    char request[512];
    snprintf(request, sizeof request,
             "GET /api/events HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nAuthorization: Bearer " TOKEN "\r\n\r\n", port);

    int reader = connect_and_send(port, 0, request);
    int stalled = connect_and_send(port, 4096, request);
    for (int i = 0; i < 1000 && admin_http_stream_count(server) < 2; i++) {
        uv_run(&loop, UV_RUN_NOWAIT);
        usleep(1000);
    }
    assert_int_equal(admin_http_stream_count(server), 2);

    long long read_total = 0;
    int rounds = 0;
    for (; rounds < MAX_ROUNDS && admin_http_stream_count(server) == 2; rounds++) {
        admin_http_broadcast(server, render_event, NULL);
        run_a_little(&loop);
        long long got = drain(reader);
        assert_true(got >= 0); /* the reader is never closed */
        read_total += got;
    }
    assert_int_equal(admin_http_stream_count(server), 1);
    /* More than the backlog was sent before the close. */
    assert_true((long long)rounds * (long long)EVENT_BYTES > (1LL << 20));

    /* The reader still gets events, and the listener still answers. */
    long long before = read_total;
    for (int i = 0; i < 20; i++) {
        admin_http_broadcast(server, render_event, NULL);
        run_a_little(&loop);
        long long got = drain(reader);
        assert_true(got >= 0);
        read_total += got;
    }
    assert_true(read_total - before >= 10LL * (long long)EVENT_BYTES);
    char ping[256];
    snprintf(ping, sizeof ping, "GET /ping HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nAuthorization: Bearer " TOKEN "\r\n\r\n",
             port);
    int operator= connect_and_send(port, 0, ping);
    char answer[512] = "";
    ssize_t got = 0;
    for (int i = 0; i < 1000 && got <= 0; i++) {
        run_a_little(&loop);
        got = recv(operator, answer, sizeof answer - 1, 0);
        if (got <= 0) usleep(1000);
    }
    assert_true(got > 0);
    assert_non_null(strstr(answer, "200"));

    /* The stalled client, reading at last, finds its stream ended. */
    long long stalled_result = 0;
    for (int i = 0; i < 2000 && stalled_result >= 0; i++) {
        run_a_little(&loop);
        stalled_result = drain(stalled);
        if (stalled_result >= 0) usleep(1000);
    }
    assert_int_equal(stalled_result, -1);

    close(reader);
    close(stalled);
    close(operator);
    admin_http_free(server);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&loop), 0);
}

int main(void) {
    log_set_level(LOG_LEVEL_WARN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stalled_stream_closed_reader_kept),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
