/* admin_http.h -- every process's admin HTTP listener: /metrics, /healthz,
 * /readyz, the live map and its JSON, operator actions.
 *
 * A small HTTP/1.1 server on the process's libuv loop. Requests are parsed
 * by Joyent's http_parser (libhttp-parser), never by hand. Each request is
 * answered once and the connection closed (Connection: close), except a
 * server-sent event stream, which stays open and gets whatever the process
 * pushes with admin_http_broadcast. Every response allows any origin
 * (Access-Control-Allow-Origin: *), so the map page served by one process
 * can read the event streams of the others.
 *
 * Routes are exact paths. A handler gets the request and answers it with
 * admin_http_reply, then or later (after a Redis reply, say); the request
 * stays valid until answered, even if its client has gone meanwhile (the
 * answer is then dropped). A handler may instead turn the request into an
 * event stream (admin_http_start_stream).
 *
 * Limits: requests of at most ADMIN_HTTP_MAX_REQUEST bytes (headers and
 * body), at most ADMIN_HTTP_MAX_CONNECTIONS open at once (more are closed
 * on accept), ADMIN_HTTP_REQUEST_TIMEOUT_MS to send a whole request. A
 * malformed request gets 400, an unknown path 404, a known path with
 * another method 405.
 */
#ifndef TESSERA_ADMIN_HTTP_H
#define TESSERA_ADMIN_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#define ADMIN_HTTP_MAX_REQUEST ((size_t)16 * 1024)
#define ADMIN_HTTP_MAX_CONNECTIONS 128
#define ADMIN_HTTP_REQUEST_TIMEOUT_MS 10000

typedef struct admin_http admin_http;
typedef struct admin_http_request admin_http_request;

typedef void (*admin_http_handler)(admin_http_request *request, void *user_data);

/* Listens on host:port (port 0: any free one). Returns NULL with err. */
admin_http *admin_http_create(uv_loop_t *loop, const char *host, int port, char *err, size_t errlen);
/* The port it listens on. */
int admin_http_port(const admin_http *server);
/* Closes the listener and every connection; requests still unanswered are
 * freed when answered. Safe with NULL. */
void admin_http_free(admin_http *server);

/* `method` "GET" or "POST". Copies the path. */
void admin_http_route(admin_http *server, const char *method, const char *path, admin_http_handler handler,
                      void *user_data);

const char *admin_http_request_method(const admin_http_request *request);
const char *admin_http_request_path(const admin_http_request *request);
/* The value of query parameter `name` (percent-decoded) into out; false if
 * it is absent or does not fit. */
bool admin_http_query(const admin_http_request *request, const char *name, char *out, size_t size);

/* Answers (copies body) and frees the request. */
void admin_http_reply(admin_http_request *request, int status, const char *content_type, const char *body,
                      size_t length);
/* admin_http_reply with a NUL-terminated text/plain body. */
void admin_http_reply_text(admin_http_request *request, int status, const char *text);

/* Turns the request into a server-sent event stream and frees the request;
 * the stream remembers its query string, which admin_http_broadcast hands
 * to its render callback. */
void admin_http_start_stream(admin_http_request *request);
/* How many streams are open. */
size_t admin_http_stream_count(const admin_http *server);

/* Writes one event to every stream: `render` is called per stream with its
 * query string and returns the event's data (malloc'd, NUL-terminated, one
 * line: no newline), or NULL to send nothing to that stream. Equal queries
 * get one render call. A stream whose client is too slow (more than 1 MiB
 * unwritten) is closed. */
typedef char *(*admin_http_render)(const char *query, void *user_data);
void admin_http_broadcast(admin_http *server, admin_http_render render, void *user_data);

/* What the listener has done, for /metrics. */
typedef struct admin_http_stats {
    unsigned long long requests, bad_requests, refused_connections;
} admin_http_stats;
admin_http_stats admin_http_get_stats(const admin_http *server);

#endif
