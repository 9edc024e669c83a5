/* admin_http.h -- every process's admin HTTP listener: /metrics, /healthz,
 * /readyz, the live map and its JSON, operator actions.
 *
 * A small HTTP/1.1 server on the process's libuv loop. Requests are parsed
 * by Joyent's http_parser (libhttp-parser), never by hand. Each request is
 * answered once and the connection closed (Connection: close), except a
 * server-sent event stream, which stays open and gets whatever the process
 * pushes with admin_http_broadcast.
 *
 * Who may ask. Routes are protected unless registered with
 * admin_http_route_probe (/healthz, /readyz, /metrics: open to whatever
 * reaches the port, so a kubelet or Prometheus needs nothing). A request
 * to a protected route goes through the guard (admin_guard.h), in order:
 *   - its Host must name this listener (admin_host, or the address the
 *     client connected to, with the listener's port) or an entry of
 *     admin_allowed_hosts, else 403: a DNS-rebound page names its own host;
 *   - its Origin, when sent, must be this listener's own or in
 *     admin_allowed_origins, else 403: no other site's page gets an answer;
 *   - with no token configured (admin_token_file unset) it gets 403 saying
 *     so; the listener then serves only the probes;
 *   - it must carry the token: "Authorization: Bearer <token>", or, for a
 *     GET only, ?token=<token> in the query (a browser's EventSource and a
 *     link to the map cannot set a header). A POST takes the header alone,
 *     which no cross-site form or text/plain post can send. Else 401.
 * No answer says "Access-Control-Allow-Origin: *": an allowed Origin is
 * echoed (with Vary: Origin), any other gets no CORS header, so the map
 * page served by one process reads the others' JSON and event streams only
 * when its origin is in their admin_allowed_origins. The token is never
 * logged.
 *
 * Budget (so that probes cannot be locked out). A connection that has not
 * yet sent its whole request is "still sending"; probes send theirs at
 * once and are answered at once, so they never hold a slot for long.
 *   - each peer address may have ADMIN_HTTP_MAX_SENDING_PER_PEER
 *     connections still sending; its next one closes its oldest such
 *     connection (a trickling client only ever displaces itself, and a
 *     probe from that same address still gets in: its request arrives
 *     with its connection, long before 16 newer ones could push it out);
 *   - at most ADMIN_HTTP_MAX_CONNECTIONS are open; past it the oldest
 *     connection still sending, whoever's, is closed, and only when every
 *     open connection has sent its request (answers pending, streams) is
 *     the newcomer refused;
 *   - at most ADMIN_HTTP_MAX_STREAMS event streams (beyond: 503), so
 *     streams never fill the connection budget; a stream is closed after
 *     the stream lifetime (admin_stream_lifetime_ms; EventSource reconnects
 *     by itself after its retry of 1 s), when its client leaves more than
 *     1 MiB unread, or when what it was sent has
 *     not drained for ADMIN_HTTP_STREAM_STALL_MS;
 *   - ADMIN_HTTP_REQUEST_TIMEOUT_MS to send a whole request.
 *
 * Routes are exact paths. A handler gets the request and answers it with
 * admin_http_reply, then or later (after a Redis reply, say); the request
 * stays valid until answered, even if its client has gone meanwhile (the
 * answer is then dropped). A handler may instead turn the request into an
 * event stream (admin_http_start_stream).
 *
 * Requests are of at most ADMIN_HTTP_MAX_REQUEST bytes (headers and
 * body). A malformed request gets 400 (also a Host, Origin or
 * Authorization header sent twice or too long), an unknown path 404, a
 * known path with another method 405.
 */
#ifndef TESSERA_ADMIN_HTTP_H
#define TESSERA_ADMIN_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#define ADMIN_HTTP_MAX_REQUEST ((size_t)16 * 1024)
/* Open connections: well under a process's descriptor limit, and room for
 * every stream and many operators at once. */
#define ADMIN_HTTP_MAX_CONNECTIONS 256
/* Connections one address may hold half-sent: an operator's browser opens
 * six at most per host, a tool one. */
#define ADMIN_HTTP_MAX_SENDING_PER_PEER 16
/* Event streams: a map page opens one per cellapp; a few operators' pages. */
#define ADMIN_HTTP_MAX_STREAMS 32
#define ADMIN_HTTP_REQUEST_TIMEOUT_MS 10000
/* The default stream lifetime: EventSource reconnects, so a stream that
 * lives for minutes costs the map nothing and bounds a forgotten tab. */
#define ADMIN_HTTP_STREAM_LIFETIME_MS 300000
/* A stream whose unwritten bytes have not drained for this long has a
 * client that stopped reading (events come several times a second). */
#define ADMIN_HTTP_STREAM_STALL_MS 15000

typedef struct admin_http admin_http;
typedef struct admin_http_request admin_http_request;

typedef void (*admin_http_handler)(admin_http_request *request, void *user_data);

/* What the guard and streams follow; every field may be NULL / 0. */
typedef struct admin_http_options {
    const char *token;           /* NULL or "": protected routes answer 403 */
    const char *allowed_hosts;   /* comma-separated, see admin_guard.h */
    const char *allowed_origins; /* comma-separated, see admin_guard.h */
    uint64_t stream_lifetime_ms; /* 0: ADMIN_HTTP_STREAM_LIFETIME_MS */
} admin_http_options;

/* Listens on host:port (port 0: any free one) with options (NULL: no
 * token, no lists). Copies what it keeps of options (the token only as its
 * hash). Returns NULL with err. */
admin_http *admin_http_create(uv_loop_t *loop, const char *host, int port, const admin_http_options *options, char *err,
                              size_t errlen);
/* The port it listens on. */
int admin_http_port(const admin_http *server);
/* Closes the listener and every connection; requests still unanswered are
 * freed when answered. Safe with NULL. */
void admin_http_free(admin_http *server);

/* A protected route (the guard above). `method` "GET" or "POST". Copies
 * the path. */
void admin_http_route(admin_http *server, const char *method, const char *path, admin_http_handler handler,
                      void *user_data);
/* An open GET route: a probe (/healthz, /readyz, /metrics), past no guard. */
void admin_http_route_probe(admin_http *server, const char *path, admin_http_handler handler, void *user_data);

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
 * to its render callback. With ADMIN_HTTP_MAX_STREAMS open already, it
 * answers 503 instead. */
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
    unsigned long long requests, bad_requests;
    unsigned long long refused_connections;   /* closed on accept: nothing to make room */
    unsigned long long evicted_connections;   /* still sending, closed to make room */
    unsigned long long refused_streams;       /* 503: ADMIN_HTTP_MAX_STREAMS open */
    unsigned long long refused_requests;      /* 403: Host, Origin, or no token configured */
    unsigned long long unauthorized_requests; /* 401 */
} admin_http_stats;
admin_http_stats admin_http_get_stats(const admin_http *server);

#endif
