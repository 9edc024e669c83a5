/* log.c -- the process logger: formats lines with time, level, role and id
 * and writes them to stderr. It also holds the allocation helpers that turn
 * out-of-memory into a logged abort. */
#include "log.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* Set once before the loop starts and read-only afterwards. */
static struct {
    char role[16];
    uint64_t process_id;
    log_level level;
    log_format format;
} log_identity = {"tessera", 0, LOG_LEVEL_INFO, LOG_FORMAT_TEXT};

static const char *const log_level_names[] = {"DEBUG", "INFO ", "WARN ", "ERROR"};

void log_set_identity(const char *role, uint64_t process_id) {
    snprintf(log_identity.role, sizeof log_identity.role, "%s", role);
    log_identity.process_id = process_id;
}

void log_set_level(log_level level) { log_identity.level = level; }
void log_set_format(log_format format) { log_identity.format = format; }

int log_parse_format(const char *text, log_format *out) {
    if (strcasecmp(text, "text") == 0)
        *out = LOG_FORMAT_TEXT;
    else if (strcasecmp(text, "json") == 0)
        *out = LOG_FORMAT_JSON;
    else
        return -1;
    return 0;
}

/* Appends `text` to out as the inside of a JSON string. */
static size_t log_json_escape(char *out, size_t at, size_t size, const char *text) {
    for (const unsigned char *c = (const unsigned char *)text; *c && at + 7 < size; c++) {
        if (*c == '"' || *c == '\\') {
            out[at++] = '\\';
            out[at++] = (char)*c;
        } else if (*c == '\n') {
            out[at++] = '\\';
            out[at++] = 'n';
        } else if (*c < 0x20) {
            at += (size_t)snprintf(out + at, size - at, "\\u%04x", *c);
        } else {
            out[at++] = (char)*c;
        }
    }
    out[at] = '\0';
    return at;
}

/* The first number after `word ` in text (0 if none). */
static unsigned long long log_number_after(const char *text, const char *word, const char **where) {
    size_t length = strlen(word);
    for (const char *p = strstr(text, word); p; p = strstr(p + 1, word)) {
        if (p != text && (p[-1] >= 'a' && p[-1] <= 'z')) continue;
        if (p[length] != ' ' || p[length + 1] < '0' || p[length + 1] > '9') continue;
        if (where) *where = p;
        return strtoull(p + length + 1, NULL, 10);
    }
    return 0;
}

static void log_write_json(const char *stamp, long milliseconds, const char *level_name, const char *message) {
    char line[4096];
    size_t at = (size_t)snprintf(line, sizeof line, "{\"ts\":\"%s.%03ldZ\",\"level\":\"", stamp, milliseconds);
    for (const char *c = level_name; *c && *c != ' '; c++) line[at++] = (char)(*c - 'A' + 'a');
    at += (size_t)snprintf(line + at, sizeof line - at, "\",\"role\":\"%s\",\"process\":%llu,\"msg\":\"",
                           log_identity.role, (unsigned long long)log_identity.process_id);
    at = log_json_escape(line, at, sizeof line - 64, message);
    at += (size_t)snprintf(line + at, sizeof line - at, "\"");
    unsigned long long entity = log_number_after(message, "entity", NULL);
    if (entity) at += (size_t)snprintf(line + at, sizeof line - at, ",\"entity\":%llu", entity);
    /* The peer: a process named by role and id, else a client's address. */
    static const char *const roles[] = {"cellapp", "baseapp"};
    bool peer_found = false;
    for (int r = 0; r < 2 && !peer_found; r++) {
        unsigned long long peer = log_number_after(message, roles[r], NULL);
        if (peer) {
            at += (size_t)snprintf(line + at, sizeof line - at, ",\"peer\":\"%s %llu\"", roles[r], peer);
            peer_found = true;
        }
    }
    const char *client = strstr(message, "client ");
    if (!peer_found && client && client[7] >= '0' && client[7] <= '9') {
        char address[64];
        size_t n = 0;
        for (const char *c = client + 7; *c && *c != ' ' && *c != ')' && *c != ',' && n + 1 < sizeof address; c++)
            address[n++] = *c;
        address[n] = '\0';
        at += (size_t)snprintf(line + at, sizeof line - at, ",\"peer\":\"client %s\"", address);
    }
    if (at + 3 > sizeof line) at = sizeof line - 3;
    line[at++] = '}';
    line[at++] = '\n';
    line[at] = '\0';
    fputs(line, stderr);
}

int log_parse_level(const char *text, log_level *out) {
    static const char *const names[] = {"debug", "info", "warn", "error"};
    for (int i = 0; i < 4; i++) {
        if (strcasecmp(text, names[i]) == 0) {
            *out = (log_level)i;
            return 0;
        }
    }
    return -1;
}

/* Copies `text` into out (size bytes, always terminated) with every
 * control character written as an escape (\n, \r, \t, else \xNN): a
 * line in the text log is one line, whatever a client put in a name or a
 * message it sent, so nothing can forge a line of its own (a newline and
 * a fake "ERROR"), or reach the terminal as an escape sequence. */
static void log_escape_controls(const char *text, char *out, size_t size) {
    size_t at = 0;
    for (const unsigned char *c = (const unsigned char *)text; *c && at + 5 < size; c++) {
        if (*c >= 0x20 && *c != 0x7f) {
            out[at++] = (char)*c;
        } else if (*c == '\n' || *c == '\r' || *c == '\t') {
            char letter = 't';
            if (*c == '\n')
                letter = 'n';
            else if (*c == '\r')
                letter = 'r';
            out[at++] = '\\';
            out[at++] = letter;
        } else {
            at += (size_t)snprintf(out + at, size - at, "\\x%02x", *c);
        }
    }
    out[at] = '\0';
}

static void log_vwrite(const char *level_name, const char *format, va_list args) {
    struct timespec now;
    struct tm utc;
    char stamp[32];
    char line[2048];

    clock_gettime(CLOCK_REALTIME, &now);
    gmtime_r(&now.tv_sec, &utc);
    if (strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &utc) == 0) stamp[0] = '\0'; /* 19 bytes: never */
    if (log_identity.format == LOG_FORMAT_JSON) {
        char message[2048];
        vsnprintf(message, sizeof message, format, args);
        log_write_json(stamp, now.tv_nsec / 1000000L, level_name, message);
        return;
    }
    int prefix = snprintf(line, sizeof line, "%s.%03ldZ %s[%llu] %s ", stamp, now.tv_nsec / 1000000L, log_identity.role,
                          (unsigned long long)log_identity.process_id, level_name);
    if (prefix < 0 || (size_t)prefix >= sizeof line) prefix = 0;
    char message[2048];
    vsnprintf(message, sizeof message, format, args);
    log_escape_controls(message, line + prefix, sizeof line - (size_t)prefix);
    /* One fputs of a whole line keeps lines whole when several processes
     * share a terminal. */
    size_t length = strlen(line);
    if (length + 1 < sizeof line) {
        line[length] = '\n';
        line[length + 1] = '\0';
    }
    fputs(line, stderr);
}

void log_write(log_level level, const char *format, ...) {
    if (level < log_identity.level) return;
    va_list args;
    va_start(args, format);
    log_vwrite(log_level_names[level], format, args);
    va_end(args);
}

void log_panic_at(const char *file, int line, const char *format, ...) {
    char message[1024];
    va_list args;
    va_start(args, format);
    vsnprintf(message, sizeof message, format, args);
    va_end(args);
    log_write(LOG_LEVEL_ERROR, "PANIC at %s:%d: %s", file, line, message);
    (void)fflush(stderr); /* about to abort: nowhere left to report a failure */
    abort();
}

void *xmalloc(size_t size) {
    void *pointer = malloc(size ? size : 1);
    if (!pointer) log_panic("out of memory allocating %zu bytes", size);
    return pointer;
}

void *xcalloc(size_t count, size_t size) {
    void *pointer = calloc(count ? count : 1, size ? size : 1);
    if (!pointer) log_panic("out of memory allocating %zu x %zu bytes", count, size);
    return pointer;
}

void *xrealloc(void *pointer, size_t size) {
    void *resized = realloc(pointer, size ? size : 1);
    if (!resized) log_panic("out of memory reallocating to %zu bytes", size);
    return resized;
}

char *xstrdup(const char *text) {
    char *copy = strdup(text);
    if (!copy) log_panic("out of memory copying a string");
    return copy;
}
