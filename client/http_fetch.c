/* http_fetch.c -- a blocking HTTP request over a plain socket, its response
 * parsed by http_parser (http_fetch.h). Bodies are bounded (16 MiB). */
#include "http_fetch.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <http_parser.h>

#define HTTP_FETCH_MAX_BODY (16u << 20)

typedef struct http_fetch_state {
    char *body;
    size_t length, capacity;
    int complete;
    int too_large;
} http_fetch_state;

static int http_fetch_on_body(http_parser *parser, const char *at, size_t length) {
    http_fetch_state *state = parser->data;
    if (state->length + length > HTTP_FETCH_MAX_BODY) {
        state->too_large = 1;
        return 1;
    }
    if (state->length + length + 1 > state->capacity) {
        state->capacity = (state->length + length + 1) * 2;
        char *grown = realloc(state->body, state->capacity);
        if (!grown) return 1;
        state->body = grown;
    }
    memcpy(state->body + state->length, at, length);
    state->length += length;
    return 0;
}

static int http_fetch_on_complete(http_parser *parser) {
    ((http_fetch_state *)parser->data)->complete = 1;
    return 0;
}

static long long http_fetch_now_ms(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

int http_fetch(const char *method, const char *host, int port, const char *path, const char *token, int timeout_ms,
               int *status, char **body, size_t *length, char *err, size_t errlen) {
    struct sockaddr_in address = {0};
    address.sin_family = AF_INET;
    address.sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, host, &address.sin_addr) != 1) {
        snprintf(err, errlen, "%s is not an IPv4 address", host);
        return -1;
    }
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(err, errlen, "socket: %s", strerror(errno));
        return -1;
    }
    struct timeval tv = {timeout_ms / 1000, (suseconds_t)(timeout_ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (connect(fd, (struct sockaddr *)&address, sizeof address) != 0) {
        snprintf(err, errlen, "connect to %s:%d: %s", host, port, strerror(errno));
        close(fd);
        return -1;
    }
    char request[1536];
    int n = snprintf(request, sizeof request,
                     "%s %s HTTP/1.1\r\nHost: %s:%d\r\n%s%s%sConnection: close\r\nContent-Length: 0\r\n\r\n", method,
                     path, host, port, token ? "Authorization: Bearer " : "", token ? token : "", token ? "\r\n" : "");
    if (n < 0 || (size_t)n >= sizeof request || send(fd, request, (size_t)n, MSG_NOSIGNAL) != n) {
        snprintf(err, errlen, "sending to %s:%d failed", host, port);
        close(fd);
        return -1;
    }
    http_parser parser;
    http_parser_init(&parser, HTTP_RESPONSE);
    http_fetch_state state = {0};
    parser.data = &state;
    http_parser_settings settings;
    http_parser_settings_init(&settings);
    settings.on_body = http_fetch_on_body;
    settings.on_message_complete = http_fetch_on_complete;
    long long deadline = http_fetch_now_ms() + timeout_ms;
    char buffer[8192];
    int rc = -1;
    while (!state.complete) {
        long long left = deadline - http_fetch_now_ms();
        struct pollfd p = {fd, POLLIN, 0};
        if (left <= 0 || poll(&p, 1, (int)left) <= 0) {
            snprintf(err, errlen, "%s:%d did not answer within %d ms", host, port, timeout_ms);
            goto done;
        }
        ssize_t got = recv(fd, buffer, sizeof buffer, 0);
        if (got < 0) {
            snprintf(err, errlen, "reading from %s:%d: %s", host, port, strerror(errno));
            goto done;
        }
        /* 0 bytes tells the parser the connection ended (a body until close). */
        http_parser_execute(&parser, &settings, buffer, (size_t)got);
        if (HTTP_PARSER_ERRNO(&parser) != HPE_OK) {
            snprintf(err, errlen, "%s:%d sent %s: %s", host, port,
                     state.too_large ? "too large a body" : "a bad response",
                     http_errno_description(HTTP_PARSER_ERRNO(&parser)));
            goto done;
        }
        if (got == 0 && !state.complete) {
            snprintf(err, errlen, "%s:%d closed the connection before the response ended", host, port);
            goto done;
        }
    }
    if (!state.body)
        state.body = calloc(1, 1);
    else
        state.body[state.length] = '\0';
    *status = (int)parser.status_code;
    *body = state.body;
    if (length) *length = state.length;
    state.body = NULL;
    rc = 0;
done:
    free(state.body);
    close(fd);
    return rc;
}
