/* fuzz_admin_http.c -- fuzzes the admin HTTP listener (common/admin_http.c
 * over http_parser, with its guard, common/admin_guard.c) through its
 * public API only: the input is written as one client's request bytes to a
 * loopback connection of a listener made with admin_http_create, with a
 * token and allowed hosts and origins set, a probe route and two protected
 * routes (a GET whose handler reads query parameters with admin_http_query,
 * a POST), as a process registers them. admin_http.c is not changed for
 * it.
 *
 * Checks: every connection is answered or closed once the client has sent
 * everything and gone (the harness waits for the listener to let it go); a
 * handler runs only for a request that passed the guard: a probe, or a
 * protected route whose request carried the token; what admin_http_query
 * returns fits its buffer and is NUL-terminated; no crash, no leak. */
#include <string.h>
#include <uv.h>

#include "admin_http.h"
#include "fuzz_support.h"

#define FUZZ_ADMIN_TOKEN "fuzz-admin-token-0123456789abcdef"

static struct fuzz_admin_world {
    uv_loop_t loop;
    admin_http *server;
    int port;
    int handled;
} world;

static void fuzz_admin_probe(admin_http_request *request, void *user_data) {
    (void)user_data;
    world.handled++;
    admin_http_reply_text(request, 200, "ok\n");
}

static void fuzz_admin_entity(admin_http_request *request, void *user_data) {
    (void)user_data;
    world.handled++;
    static const char *const names[] = {"id", "space", "token", "detail", ""};
    char value[64];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        memset(value, 'x', sizeof value);
        if (admin_http_query(request, names[i], value, sizeof value))
            fuzz_check(memchr(value, '\0', sizeof value) != NULL, "a query value not NUL-terminated in its buffer");
    }
    admin_http_reply(request, 200, "application/json", "{}", 2);
}

static void fuzz_admin_post(admin_http_request *request, void *user_data) {
    (void)user_data;
    world.handled++;
    fuzz_check(strcmp(admin_http_request_method(request), "POST") == 0, "a POST route ran for another method");
    admin_http_reply_text(request, 202, "saving\n");
}

static void fuzz_admin_setup(void) {
    char err[256];
    fuzz_check(uv_loop_init(&world.loop) == 0, "no loop");
    admin_http_options options = {
        .token = FUZZ_ADMIN_TOKEN,
        .allowed_hosts = "tessera.example,tessera.example:8080",
        .allowed_origins = "http://tessera.example:8080",
    };
    world.server = admin_http_create(&world.loop, "127.0.0.1", 0, &options, err, sizeof err);
    fuzz_check(world.server != NULL, "the admin listener does not start");
    world.port = admin_http_port(world.server);
    admin_http_route_probe(world.server, "/healthz", fuzz_admin_probe, NULL);
    admin_http_route(world.server, "GET", "/api/entity", fuzz_admin_entity, NULL);
    admin_http_route(world.server, "POST", "/admin/save", fuzz_admin_post, NULL);
}

static void fuzz_admin_count_tcp(uv_handle_t *handle, void *count) {
    if (handle->type == UV_TCP && !uv_is_closing(handle)) (*(size_t *)count)++;
}

/* The listener and the connections it holds. */
static size_t fuzz_admin_tcp_handles(void) {
    size_t count = 0;
    uv_walk(&world.loop, fuzz_admin_count_tcp, &count);
    return count;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!world.server) fuzz_admin_setup();
    world.handled = 0;
    int fd = fuzz_loopback_send(world.port, data, size);
    fuzz_loopback_finish(&world.loop, fd, NULL, 0);
    /* The listener's side of the connection goes too: the listener is
     * the one TCP handle left. */
    while (fuzz_admin_tcp_handles() > 1) uv_run(&world.loop, UV_RUN_ONCE);
    fuzz_check(world.handled <= 1, "one connection's request was handled twice");
    if (world.handled && !memmem(data, size, "/healthz", 8))
        fuzz_check(memmem(data, size, FUZZ_ADMIN_TOKEN, strlen(FUZZ_ADMIN_TOKEN)) != NULL,
                   "a protected route ran for a request without the token");
    return 0;
}
