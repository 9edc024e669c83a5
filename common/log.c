/* log.c -- the process logger: formats lines with time, level, role and id
 * and writes them to stderr. It also holds the allocation helpers that turn
 * out-of-memory into a logged abort. */
#include "log.h"

#include <stdarg.h>
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
} log_identity = {"tessera", 0, LOG_LEVEL_INFO};

static const char *const log_level_names[] = {"DEBUG", "INFO ", "WARN ", "ERROR"};

void log_set_identity(const char *role, uint64_t process_id) {
    snprintf(log_identity.role, sizeof log_identity.role, "%s", role);
    log_identity.process_id = process_id;
}

void log_set_level(log_level level) { log_identity.level = level; }

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

static void log_vwrite(const char *level_name, const char *format, va_list args) {
    struct timespec now;
    struct tm utc;
    char stamp[32];
    char line[2048];

    clock_gettime(CLOCK_REALTIME, &now);
    gmtime_r(&now.tv_sec, &utc);
    strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &utc);
    int prefix = snprintf(line, sizeof line, "%s.%03ldZ %s[%llu] %s ", stamp, now.tv_nsec / 1000000L,
                          log_identity.role, (unsigned long long)log_identity.process_id, level_name);
    if (prefix < 0 || (size_t)prefix >= sizeof line) prefix = 0;
    vsnprintf(line + prefix, sizeof line - (size_t)prefix, format, args);
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
    fflush(stderr);
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
