/* admin_http.c -- the admin HTTP listener (admin_http.h): connections and
 * their budget, the request line and the three headers it reads (Host,
 * Origin, Authorization) parsed by http_parser, routing behind the guard
 * (admin_guard.h), answers, and server-sent event streams.
 *
 * A connection reads until http_parser says the request is complete (the
 * parser is then paused: nothing after it is read), routes it, and either
 * writes the answer and closes once it is written, or, for an event
 * stream, writes the stream's header and stays open until the client goes,
 * stops reading, or outlives the stream lifetime.
 * The server is freed once its listener and its last connection are
 * closed. */
#include "admin_http.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <http_parser.h>

#include "admin_guard.h"
#include "log.h"

/* Past this much unwritten to an event stream, its client is not reading. */
#define ADMIN_HTTP_STREAM_BACKLOG (1u << 20)
#define ADMIN_HTTP_URL_MAX 2048
/* Host and Origin are names and ports: longer ones are refused (400). */
#define ADMIN_HTTP_HEADER_MAX 256
/* "Bearer " and the longest token, with room for spaces. */
#define ADMIN_HTTP_AUTHORIZATION_MAX (ADMIN_GUARD_TOKEN_MAX + 32)

/* The headers a connection keeps (others are parsed and dropped). */
typedef enum admin_http_header {
    ADMIN_HTTP_HEADER_OTHER,
    ADMIN_HTTP_HEADER_HOST,
    ADMIN_HTTP_HEADER_ORIGIN,
    ADMIN_HTTP_HEADER_AUTHORIZATION,
} admin_http_header;

typedef struct admin_http_route_entry {
    char method[8];
    char *path;
    admin_http_handler handler;
    void *user_data;
    bool open; /* a probe: no token, Host or Origin check */
} admin_http_route_entry;

typedef struct admin_http_connection {
    uv_tcp_t tcp; /* first: handle data points back here */
    uv_timer_t timeout;
    admin_http *server;
    struct admin_http_connection *previous, *next;
    http_parser parser;
    char url[ADMIN_HTTP_URL_MAX];
    size_t url_length;
    size_t received;
    bool complete; /* the whole request is in */
    bool answered; /* a reply (or the stream header) was written */
    bool streaming;
    bool rendered; /* admin_http_broadcast: this round's event is written */
    bool closing;
    char stream_query[ADMIN_HTTP_URL_MAX];
    size_t unwritten;
    admin_http_request *pending; /* routed, not yet answered */
    int open_handles;
    struct sockaddr_storage peer; /* the client's address (its port ignored) */
    char local_ip[64];            /* the address the client connected to */
    /* The headers kept, NUL-terminated; header_seen has bit 1 << kind. */
    char host[ADMIN_HTTP_HEADER_MAX];
    char origin[ADMIN_HTTP_HEADER_MAX];
    char authorization[ADMIN_HTTP_AUTHORIZATION_MAX];
    char field[32]; /* the header name being read */
    size_t field_length;
    bool field_done; /* its value has started */
    admin_http_header header_kind;
    unsigned header_seen;
    bool header_bad;          /* a kept header repeated or too long: 400 */
    bool origin_allowed;      /* an Origin was sent and the guard allows it: echoed */
    uint64_t stream_progress; /* uv_now when a stream's writes last drained or began */
} admin_http_connection;

struct admin_http_request {
    admin_http_connection *connection; /* NULL once its client has gone */
    char method[8];
    char path[ADMIN_HTTP_URL_MAX];
    char query[ADMIN_HTTP_URL_MAX];
};

struct admin_http {
    uv_loop_t *loop;
    uv_tcp_t listener;
    bool listener_open;
    int port;
    admin_http_route_entry *routes;
    size_t route_count, route_capacity;
    admin_http_connection *connections;
    size_t connection_count;
    bool closing;
    admin_http_stats stats;
    admin_guard guard;
    uint64_t stream_lifetime_ms;
};

typedef struct admin_http_write {
    uv_write_t request;
    admin_http_connection *connection;
    size_t length;
    char data[];
} admin_http_write;

/* ---- lifetime ---------------------------------------------------------------- */

static void admin_http_maybe_free(admin_http *server) {
    if (!server->closing || server->listener_open || server->connection_count) return;
    for (size_t i = 0; i < server->route_count; i++) free(server->routes[i].path);
    free(server->routes);
    sodium_memzero(&server->guard, sizeof server->guard);
    free(server);
}

static void admin_http_on_connection_closed(uv_handle_t *handle) {
    admin_http_connection *connection = handle->data;
    if (--connection->open_handles > 0) return;
    admin_http *server = connection->server;
    if (connection->previous)
        connection->previous->next = connection->next;
    else
        server->connections = connection->next;
    if (connection->next) connection->next->previous = connection->previous;
    server->connection_count--;
    sodium_memzero(connection->authorization, sizeof connection->authorization);
    free(connection);
    admin_http_maybe_free(server);
}

static void admin_http_close(admin_http_connection *connection) {
    if (connection->closing) return;
    connection->closing = true;
    if (connection->pending) {
        connection->pending->connection = NULL;
        connection->pending = NULL;
    }
    uv_timer_stop(&connection->timeout);
    uv_close((uv_handle_t *)&connection->timeout, admin_http_on_connection_closed);
    uv_close((uv_handle_t *)&connection->tcp, admin_http_on_connection_closed);
}

static void admin_http_on_listener_closed(uv_handle_t *handle) {
    admin_http *server = handle->data;
    server->listener_open = false;
    admin_http_maybe_free(server);
}

void admin_http_free(admin_http *server) {
    if (!server || server->closing) return;
    server->closing = true;
    admin_http_connection *connection = server->connections;
    while (connection) {
        admin_http_connection *next = connection->next;
        admin_http_close(connection);
        connection = next;
    }
    if (server->listener_open)
        uv_close((uv_handle_t *)&server->listener, admin_http_on_listener_closed);
    else
        admin_http_maybe_free(server);
}

/* ---- writing ------------------------------------------------------------------- */

static void admin_http_on_written(uv_write_t *request, int status) {
    admin_http_write *write = (admin_http_write *)request;
    admin_http_connection *connection = write->connection;
    connection->unwritten -= write->length;
    connection->stream_progress = uv_now(connection->server->loop);
    free(write);
    if (connection->closing) return;
    if (status < 0 || (!connection->streaming && connection->unwritten == 0)) admin_http_close(connection);
}

static void admin_http_write_bytes(admin_http_connection *connection, const char *data, size_t length) {
    if (connection->closing || length == 0) return;
    if (connection->unwritten == 0) connection->stream_progress = uv_now(connection->server->loop);
    admin_http_write *write = xmalloc(sizeof *write + length);
    write->connection = connection;
    write->length = length;
    memcpy(write->data, data, length);
    uv_buf_t buffer = uv_buf_init(write->data, (unsigned)length);
    connection->unwritten += length;
    if (uv_write(&write->request, (uv_stream_t *)&connection->tcp, &buffer, 1, admin_http_on_written) != 0) {
        connection->unwritten -= length;
        free(write);
        admin_http_close(connection);
    }
}

static const char *admin_http_status_text(int status) {
    switch (status) {
        case 200:
            return "OK";
        case 202:
            return "Accepted";
        case 400:
            return "Bad Request";
        case 401:
            return "Unauthorized";
        case 403:
            return "Forbidden";
        case 404:
            return "Not Found";
        case 405:
            return "Method Not Allowed";
        case 409:
            return "Conflict";
        case 413:
            return "Payload Too Large";
        case 500:
            return "Internal Server Error";
        case 503:
            return "Service Unavailable";
        default:
            return "Status";
    }
}

/* The CORS headers of an answer: the Origin echoed when the guard allows
 * it (never "*"), else nothing. */
static void admin_http_cors(const admin_http_connection *connection, char *out, size_t size) {
    if (connection->origin_allowed)
        snprintf(out, size, "Access-Control-Allow-Origin: %s\r\nVary: Origin\r\n", connection->origin);
    else
        snprintf(out, size, "Vary: Origin\r\n");
}

static void admin_http_write_reply(admin_http_connection *connection, int status, const char *content_type,
                                   const char *body, size_t length) {
    if (connection->answered) return;
    connection->answered = true;
    char head[512 + ADMIN_HTTP_HEADER_MAX], cors[64 + ADMIN_HTTP_HEADER_MAX];
    admin_http_cors(connection, cors, sizeof cors);
    int head_length = snprintf(head, sizeof head,
                               "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s%s"
                               "Cache-Control: no-store\r\nConnection: close\r\n\r\n",
                               status, admin_http_status_text(status), content_type, length, cors,
                               status == 401 ? "WWW-Authenticate: Bearer realm=\"tessera-admin\"\r\n" : "");
    admin_http_write_bytes(connection, head, (size_t)head_length);
    admin_http_write_bytes(connection, body, length);
    uv_read_stop((uv_stream_t *)&connection->tcp);
    uv_timer_stop(&connection->timeout);
}

/* ---- requests ---------------------------------------------------------------- */

const char *admin_http_request_method(const admin_http_request *request) { return request->method; }
const char *admin_http_request_path(const admin_http_request *request) { return request->path; }

static int admin_http_hex(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    c = tolower(c);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

bool admin_http_query(const admin_http_request *request, const char *name, char *out, size_t size) {
    size_t name_length = strlen(name);
    const char *p = request->query;
    while (*p) {
        const char *end = strchr(p, '&');
        if (!end) end = p + strlen(p);
        if ((size_t)(end - p) > name_length && strncmp(p, name, name_length) == 0 && p[name_length] == '=') {
            size_t n = 0;
            for (const char *c = p + name_length + 1; c < end; c++) {
                int value = (unsigned char)*c;
                if (value == '+')
                    value = ' ';
                else if (value == '%' && end - c > 2 && admin_http_hex(c[1]) >= 0 && admin_http_hex(c[2]) >= 0) {
                    value = admin_http_hex(c[1]) * 16 + admin_http_hex(c[2]);
                    c += 2;
                }
                if (n + 1 >= size) return false;
                out[n++] = (char)value;
            }
            out[n] = '\0';
            return true;
        }
        p = *end ? end + 1 : end;
    }
    return false;
}

void admin_http_reply(admin_http_request *request, int status, const char *content_type, const char *body,
                      size_t length) {
    admin_http_connection *connection = request->connection;
    if (connection) {
        connection->pending = NULL;
        admin_http_write_reply(connection, status, content_type, body, length);
    }
    free(request);
}

void admin_http_reply_text(admin_http_request *request, int status, const char *text) {
    admin_http_reply(request, status, "text/plain; charset=utf-8", text, strlen(text));
}

/* query with its token=... parameters left out, into out (at least as
 * large as query): a stream keeps its query for as long as it lives, and
 * its render callback has no use for the token. */
static void admin_http_query_without_token(const char *query, char *out, size_t size) {
    size_t n = 0;
    out[0] = '\0';
    for (const char *p = query; *p;) {
        const char *end = strchr(p, '&');
        if (!end) end = p + strlen(p);
        size_t length = (size_t)(end - p);
        if (strncmp(p, "token=", 6) != 0 && length > 0 && n + length + 2 <= size) {
            if (n) out[n++] = '&';
            memcpy(out + n, p, length);
            n += length;
            out[n] = '\0';
        }
        p = *end ? end + 1 : end;
    }
}

static void admin_http_on_stream_timeout(uv_timer_t *timer) {
    admin_http_connection *connection = timer->data;
    /* EventSource opens a new stream after `retry`. */
    admin_http_close(connection);
}

void admin_http_start_stream(admin_http_request *request) {
    admin_http_connection *connection = request->connection;
    if (connection && !connection->answered) {
        admin_http *server = connection->server;
        if (admin_http_stream_count(server) >= ADMIN_HTTP_MAX_STREAMS) {
            server->stats.refused_streams++;
            admin_http_reply_text(request, 503, "too many event streams are open on this listener\n");
            return;
        }
        connection->pending = NULL;
        connection->answered = true;
        connection->streaming = true;
        admin_http_query_without_token(request->query, connection->stream_query, sizeof connection->stream_query);
        char head[256 + ADMIN_HTTP_HEADER_MAX], cors[64 + ADMIN_HTTP_HEADER_MAX];
        admin_http_cors(connection, cors, sizeof cors);
        int length = snprintf(head, sizeof head,
                              "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n%s"
                              "Cache-Control: no-store\r\n\r\nretry: 1000\n\n",
                              cors);
        admin_http_write_bytes(connection, head, (size_t)length);
        uv_timer_stop(&connection->timeout);
        uv_timer_start(&connection->timeout, admin_http_on_stream_timeout, server->stream_lifetime_ms, 0);
        /* Reading goes on, to see the client close. */
    }
    free(request);
}

size_t admin_http_stream_count(const admin_http *server) {
    size_t count = 0;
    for (const admin_http_connection *c = server->connections; c; c = c->next) count += c->streaming && !c->closing;
    return count;
}

void admin_http_broadcast(admin_http *server, admin_http_render render, void *user_data) {
    /* One render per distinct query: most streams ask the same. */
    for (admin_http_connection *c = server->connections; c; c = c->next) c->rendered = false;
    for (admin_http_connection *c = server->connections; c; c = c->next) {
        if (!c->streaming || c->closing || c->rendered) continue;
        char *data = render(c->stream_query, user_data);
        for (admin_http_connection *d = c; d; d = d->next) {
            if (!d->streaming || d->closing || d->rendered || strcmp(d->stream_query, c->stream_query) != 0) continue;
            d->rendered = true;
            if (!data) continue;
            if (d->unwritten > ADMIN_HTTP_STREAM_BACKLOG ||
                (d->unwritten > 0 && uv_now(server->loop) - d->stream_progress > ADMIN_HTTP_STREAM_STALL_MS)) {
                log_info("admin http: an event stream's client is not reading (%zu bytes unwritten): closed",
                         d->unwritten);
                admin_http_close(d);
                continue;
            }
            admin_http_write_bytes(d, "data: ", 6);
            admin_http_write_bytes(d, data, strlen(data));
            admin_http_write_bytes(d, "\n\n", 2);
        }
        free(data);
    }
}

admin_http_stats admin_http_get_stats(const admin_http *server) { return server->stats; }

/* ---- parsing and routing ------------------------------------------------------- */

/* Appends at[0..length) to buffer (holding *used bytes and a NUL) when it
 * fits with its NUL; false (buffer unchanged) when it does not. */
static bool admin_http_append(char *buffer, size_t size, size_t *used, const char *at, size_t length) {
    if (*used + length >= size) return false;
    memcpy(buffer + *used, at, length);
    *used += length;
    buffer[*used] = '\0';
    return true;
}

static int admin_http_on_url(http_parser *parser, const char *at, size_t length) {
    admin_http_connection *connection = parser->data;
    return admin_http_append(connection->url, sizeof connection->url, &connection->url_length, at, length) ? 0 : 1;
}

static int admin_http_on_header_field(http_parser *parser, const char *at, size_t length) {
    admin_http_connection *connection = parser->data;
    if (connection->field_done) {
        connection->field_done = false;
        connection->field_length = 0;
        connection->field[0] = '\0';
    }
    /* A name too long for the buffer is none of the three kept: it is
     * marked with a byte no header name holds. */
    if (!admin_http_append(connection->field, sizeof connection->field, &connection->field_length, at, length)) {
        connection->field[0] = '\n';
        connection->field_length = sizeof connection->field - 1;
    }
    return 0;
}

/* Where a kept header's value goes (and its size), or NULL for the others. */
static char *admin_http_header_buffer(admin_http_connection *connection, admin_http_header kind, size_t *size) {
    switch (kind) {
        case ADMIN_HTTP_HEADER_HOST:
            *size = sizeof connection->host;
            return connection->host;
        case ADMIN_HTTP_HEADER_ORIGIN:
            *size = sizeof connection->origin;
            return connection->origin;
        case ADMIN_HTTP_HEADER_AUTHORIZATION:
            *size = sizeof connection->authorization;
            return connection->authorization;
        case ADMIN_HTTP_HEADER_OTHER:
            break;
    }
    *size = 0;
    return NULL;
}

static int admin_http_on_header_value(http_parser *parser, const char *at, size_t length) {
    admin_http_connection *connection = parser->data;
    if (!connection->field_done) {
        connection->field_done = true;
        connection->header_kind = ADMIN_HTTP_HEADER_OTHER;
        if (strcasecmp(connection->field, "Host") == 0)
            connection->header_kind = ADMIN_HTTP_HEADER_HOST;
        else if (strcasecmp(connection->field, "Origin") == 0)
            connection->header_kind = ADMIN_HTTP_HEADER_ORIGIN;
        else if (strcasecmp(connection->field, "Authorization") == 0)
            connection->header_kind = ADMIN_HTTP_HEADER_AUTHORIZATION;
        if (connection->header_kind != ADMIN_HTTP_HEADER_OTHER) {
            unsigned bit = 1u << connection->header_kind;
            if (connection->header_seen & bit) connection->header_bad = true; /* which one would count? */
            connection->header_seen |= bit;
        }
    }
    size_t size;
    char *value = admin_http_header_buffer(connection, connection->header_kind, &size);
    if (!value) return 0;
    size_t used = strlen(value);
    if (!admin_http_append(value, size, &used, at, length)) connection->header_bad = true;
    return 0;
}

static int admin_http_on_complete(http_parser *parser) {
    admin_http_connection *connection = parser->data;
    connection->complete = true;
    http_parser_pause(parser, 1);
    return 0;
}

static const http_parser_settings admin_http_parser_settings = {
    .on_url = admin_http_on_url,
    .on_header_field = admin_http_on_header_field,
    .on_header_value = admin_http_on_header_value,
    .on_message_complete = admin_http_on_complete,
};

/* A kept header's value, or NULL when the request did not send it. */
static const char *admin_http_header_value(admin_http_connection *connection, admin_http_header kind) {
    size_t size;
    if ((connection->header_seen & (1u << kind)) == 0) return NULL;
    return admin_http_header_buffer(connection, kind, &size);
}

/* The guard in front of a protected route: true when the request may go
 * on, else it has been answered (403 or 401) and freed. */
static bool admin_http_admit(admin_http_connection *connection, admin_http_request *request) {
    admin_http *server = connection->server;
    const char *host = admin_http_header_value(connection, ADMIN_HTTP_HEADER_HOST);
    if (!admin_guard_host_ok(&server->guard, host, connection->local_ip)) {
        server->stats.refused_requests++;
        admin_http_reply_text(request, 403,
                              "forbidden: the Host header names neither this listener's address nor an entry of "
                              "admin_allowed_hosts\n");
        return false;
    }
    if (admin_http_header_value(connection, ADMIN_HTTP_HEADER_ORIGIN) && !connection->origin_allowed) {
        server->stats.refused_requests++;
        admin_http_reply_text(request, 403,
                              "forbidden: the Origin is neither this listener nor in admin_allowed_origins\n");
        return false;
    }
    if (!server->guard.has_token) {
        server->stats.refused_requests++;
        admin_http_reply_text(request, 403,
                              "forbidden: admin_token_file is not set, so this listener serves only /healthz, "
                              "/readyz and /metrics\n");
        return false;
    }
    /* A browser's EventSource cannot send a header: a GET may carry the
     * token in its query. A POST may not, so no page can post a form or a
     * text/plain body that carries it. */
    char query_token[ADMIN_GUARD_TOKEN_MAX + 1];
    bool has_query =
        strcmp(request->method, "GET") == 0 && admin_http_query(request, "token", query_token, sizeof query_token);
    const char *authorization = admin_http_header_value(connection, ADMIN_HTTP_HEADER_AUTHORIZATION);
    bool ok = admin_guard_token_ok(&server->guard, authorization, has_query ? query_token : NULL);
    sodium_memzero(query_token, sizeof query_token);
    if (!ok) {
        server->stats.unauthorized_requests++;
        admin_http_reply_text(request, 401,
                              "unauthorized: send the admin token as \"Authorization: Bearer <token>\"\n");
        return false;
    }
    return true;
}

static void admin_http_route_request(admin_http_connection *connection) {
    admin_http *server = connection->server;
    server->stats.requests++;
    admin_http_request *request = xcalloc(1, sizeof *request);
    request->connection = connection;
    snprintf(request->method, sizeof request->method, "%s",
             http_method_str((enum http_method)connection->parser.method));
    struct http_parser_url url;
    http_parser_url_init(&url);
    if (http_parser_parse_url(connection->url, connection->url_length, 0, &url) != 0 ||
        !(url.field_set & (1 << UF_PATH))) {
        server->stats.bad_requests++;
        connection->pending = request;
        admin_http_reply_text(request, 400, "bad request: the URL does not parse\n");
        return;
    }
    snprintf(request->path, sizeof request->path, "%.*s", (int)url.field_data[UF_PATH].len,
             connection->url + url.field_data[UF_PATH].off);
    if (url.field_set & (1 << UF_QUERY))
        snprintf(request->query, sizeof request->query, "%.*s", (int)url.field_data[UF_QUERY].len,
                 connection->url + url.field_data[UF_QUERY].off);
    connection->pending = request;
    if (connection->header_bad) {
        server->stats.bad_requests++;
        admin_http_reply_text(request, 400, "bad request: Host, Origin or Authorization repeated or too long\n");
        return;
    }
    const char *origin = admin_http_header_value(connection, ADMIN_HTTP_HEADER_ORIGIN);
    connection->origin_allowed = origin && admin_guard_origin_ok(&server->guard, origin, connection->local_ip);
    bool path_known = false;
    for (size_t i = 0; i < server->route_count; i++) {
        const admin_http_route_entry *route = &server->routes[i];
        if (strcmp(route->path, request->path) != 0) continue;
        path_known = true;
        if (strcmp(route->method, request->method) != 0) continue;
        if (!route->open && !admin_http_admit(connection, request)) return;
        route->handler(request, route->user_data);
        return;
    }
    if (path_known)
        admin_http_reply_text(request, 405, "method not allowed\n");
    else
        admin_http_reply_text(request, 404, "not found\n");
}

static void admin_http_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buf) {
    (void)handle;
    (void)suggested;
    static char buffer[4096]; /* the loop reads one connection at a time; parsed at once */
    *buf = uv_buf_init(buffer, sizeof buffer);
}

static void admin_http_on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf) {
    admin_http_connection *connection = stream->data;
    if (nread < 0) {
        admin_http_close(connection);
        return;
    }
    if (nread == 0 || connection->closing || connection->complete || connection->answered) return;
    connection->received += (size_t)nread;
    if (connection->received > ADMIN_HTTP_MAX_REQUEST) {
        connection->server->stats.bad_requests++;
        admin_http_write_reply(connection, 413, "text/plain", "request too large\n", 18);
        return;
    }
    http_parser_execute(&connection->parser, &admin_http_parser_settings, buf->base, (size_t)nread);
    enum http_errno error = HTTP_PARSER_ERRNO(&connection->parser);
    if (error != HPE_OK && error != HPE_PAUSED) {
        connection->server->stats.bad_requests++;
        char text[160];
        int length = snprintf(text, sizeof text, "bad request: %s\n", http_errno_description(error));
        admin_http_write_reply(connection, 400, "text/plain", text, (size_t)length);
        return;
    }
    if (connection->complete) admin_http_route_request(connection);
}

static void admin_http_on_timeout(uv_timer_t *timer) {
    admin_http_connection *connection = timer->data;
    if (!connection->complete) admin_http_close(connection);
}

/* Fills the connection's peer and local addresses. */
static void admin_http_addresses(admin_http_connection *connection) {
    int length = sizeof connection->peer;
    if (uv_tcp_getpeername(&connection->tcp, (struct sockaddr *)&connection->peer, &length) != 0)
        memset(&connection->peer, 0, sizeof connection->peer);
    struct sockaddr_storage local;
    length = sizeof local;
    connection->local_ip[0] = '\0';
    if (uv_tcp_getsockname(&connection->tcp, (struct sockaddr *)&local, &length) == 0) {
        if (local.ss_family == AF_INET6)
            uv_ip6_name((struct sockaddr_in6 *)&local, connection->local_ip, sizeof connection->local_ip);
        else if (local.ss_family == AF_INET)
            uv_ip4_name((struct sockaddr_in *)&local, connection->local_ip, sizeof connection->local_ip);
    }
}

static bool admin_http_same_peer(const struct sockaddr_storage *a, const struct sockaddr_storage *b) {
    if (a->ss_family != b->ss_family) return false;
    if (a->ss_family == AF_INET)
        return ((const struct sockaddr_in *)a)->sin_addr.s_addr == ((const struct sockaddr_in *)b)->sin_addr.s_addr;
    if (a->ss_family == AF_INET6)
        return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr, &((const struct sockaddr_in6 *)b)->sin6_addr,
                      sizeof(struct in6_addr)) == 0;
    return false;
}

/* A connection that has not yet sent its whole request: the kind that
 * gives way to a newcomer (see the budget in admin_http.h). */
static bool admin_http_still_sending(const admin_http_connection *c) {
    return !c->closing && !c->complete && !c->answered;
}

/* The budget, applied when `fresh` (already counted, at the head of the
 * list) is accepted: its peer may have ADMIN_HTTP_MAX_SENDING_PER_PEER
 * connections still sending, and the listener ADMIN_HTTP_MAX_CONNECTIONS
 * open; past either, the oldest connection still sending (of that peer,
 * or of anyone) is closed to make room. False when there is none to close:
 * fresh is then refused. */
static bool admin_http_make_room(admin_http *server, admin_http_connection *fresh) {
    size_t open = 0, sending_here = 0;
    admin_http_connection *oldest_here = NULL, *oldest = NULL;
    for (admin_http_connection *c = fresh->next; c; c = c->next) {
        if (c->closing) continue;
        open++;
        if (!admin_http_still_sending(c)) continue;
        oldest = c; /* the list runs newest first */
        if (admin_http_same_peer(&c->peer, &fresh->peer)) {
            sending_here++;
            oldest_here = c;
        }
    }
    if (sending_here >= ADMIN_HTTP_MAX_SENDING_PER_PEER) {
        server->stats.evicted_connections++;
        admin_http_close(oldest_here);
        if (oldest == oldest_here) oldest = NULL;
        open--;
    }
    if (open < ADMIN_HTTP_MAX_CONNECTIONS) return true;
    if (!oldest) return false;
    server->stats.evicted_connections++;
    admin_http_close(oldest);
    return true;
}

static void admin_http_on_connection(uv_stream_t *listener, int status) {
    admin_http *server = listener->data;
    if (status < 0 || server->closing) return;
    admin_http_connection *connection = xcalloc(1, sizeof *connection);
    connection->server = server;
    uv_tcp_init(server->loop, &connection->tcp);
    uv_timer_init(server->loop, &connection->timeout);
    connection->tcp.data = connection->timeout.data = connection;
    connection->open_handles = 2;
    connection->next = server->connections;
    if (server->connections) server->connections->previous = connection;
    server->connections = connection;
    server->connection_count++;
    if (uv_accept(listener, (uv_stream_t *)&connection->tcp) != 0) {
        admin_http_close(connection);
        return;
    }
    admin_http_addresses(connection);
    if (!admin_http_make_room(server, connection)) {
        server->stats.refused_connections++;
        admin_http_close(connection);
        return;
    }
    http_parser_init(&connection->parser, HTTP_REQUEST);
    connection->parser.data = connection;
    uv_timer_start(&connection->timeout, admin_http_on_timeout, ADMIN_HTTP_REQUEST_TIMEOUT_MS, 0);
    uv_read_start((uv_stream_t *)&connection->tcp, admin_http_alloc, admin_http_on_read);
}

admin_http *admin_http_create(uv_loop_t *loop, const char *host, int port, const admin_http_options *options, char *err,
                              size_t errlen) {
    struct sockaddr_storage address;
    if (uv_ip4_addr(host, port, (struct sockaddr_in *)&address) != 0 &&
        uv_ip6_addr(host, port, (struct sockaddr_in6 *)&address) != 0) {
        snprintf(err, errlen, "admin_host '%s' is not an IP address", host);
        return NULL;
    }
    admin_http *server = xcalloc(1, sizeof *server);
    server->loop = loop;
    uv_tcp_init(loop, &server->listener);
    server->listener.data = server;
    server->listener_open = true;
    int rc = uv_tcp_bind(&server->listener, (const struct sockaddr *)&address, 0);
    if (rc == 0) rc = uv_listen((uv_stream_t *)&server->listener, 64, admin_http_on_connection);
    if (rc != 0) {
        snprintf(err, errlen, "admin listener on %s:%d: %s", host, port, uv_strerror(rc));
        admin_http_free(server);
        return NULL;
    }
    struct sockaddr_storage bound;
    int length = sizeof bound;
    uv_tcp_getsockname(&server->listener, (struct sockaddr *)&bound, &length);
    server->port = bound.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&bound)->sin6_port)
                                               : ntohs(((struct sockaddr_in *)&bound)->sin_port);
    static const admin_http_options defaults = {0};
    if (!options) options = &defaults;
    server->stream_lifetime_ms =
        options->stream_lifetime_ms ? options->stream_lifetime_ms : ADMIN_HTTP_STREAM_LIFETIME_MS;
    if (admin_guard_init(&server->guard, options->token, host, server->port, options->allowed_hosts,
                         options->allowed_origins, err, errlen) != 0) {
        admin_http_free(server);
        return NULL;
    }
    return server;
}

int admin_http_port(const admin_http *server) { return server->port; }

static void admin_http_add_route(admin_http *server, const char *method, const char *path, admin_http_handler handler,
                                 void *user_data, bool open) {
    if (server->route_count == server->route_capacity) {
        server->route_capacity = server->route_capacity ? server->route_capacity * 2 : 16;
        server->routes = xrealloc(server->routes, server->route_capacity * sizeof *server->routes);
    }
    admin_http_route_entry *route = &server->routes[server->route_count++];
    snprintf(route->method, sizeof route->method, "%s", method);
    route->path = xstrdup(path);
    route->handler = handler;
    route->user_data = user_data;
    route->open = open;
}

void admin_http_route(admin_http *server, const char *method, const char *path, admin_http_handler handler,
                      void *user_data) {
    admin_http_add_route(server, method, path, handler, user_data, false);
}

void admin_http_route_probe(admin_http *server, const char *path, admin_http_handler handler, void *user_data) {
    admin_http_add_route(server, "GET", path, handler, user_data, true);
}
