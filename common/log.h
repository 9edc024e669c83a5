/* log.h -- one line per event, with time, level, process role and id.
 *
 *   2026-11-30T05:40:00.123Z cellapp[3] INFO  space 'default': 200 reals
 *
 * Lines go to stderr (the launcher redirects them to a file per process).
 * The role and id are set once at start-up, before the loop runs, and only
 * read afterwards: they are the one piece of state the logger keeps.
 */
#ifndef TESSERA_LOG_H
#define TESSERA_LOG_H

#include <stddef.h>
#include <stdint.h>

typedef enum log_level {
    LOG_LEVEL_DEBUG = 0,
    LOG_LEVEL_INFO = 1,
    LOG_LEVEL_WARN = 2,
    LOG_LEVEL_ERROR = 3,
} log_level;

/* Names the process in every line (the role is copied, at most 15 bytes). */
void log_set_identity(const char *role, uint64_t process_id);
void log_set_level(log_level level);

typedef enum log_format {
    LOG_FORMAT_TEXT, /* 2026-12-01T15:00:00.000Z cellapp[3] INFO  message */
    /* {"ts":"...","level":"info","role":"cellapp","process":3,"msg":"...",
     * "entity":1234,"peer":"cellapp 4"}: entity and peer are taken from the
     * message when it names them ("entity N"; "cellapp N", "baseapp N" or
     * "client HOST:PORT"), so a log pipeline can filter on them. */
    LOG_FORMAT_JSON,
} log_format;
void log_set_format(log_format format);
/* Parses "text" or "json". Returns 0, or -1 if unknown. */
int log_parse_format(const char *text, log_format *out);
/* Parses "debug", "info", "warn" or "error". Returns 0, or -1 if unknown. */
int log_parse_level(const char *text, log_level *out);

void log_write(log_level level, const char *format, ...) __attribute__((format(printf, 2, 3)));

#define log_debug(...) log_write(LOG_LEVEL_DEBUG, __VA_ARGS__)
#define log_info(...) log_write(LOG_LEVEL_INFO, __VA_ARGS__)
#define log_warn(...) log_write(LOG_LEVEL_WARN, __VA_ARGS__)
#define log_error(...) log_write(LOG_LEVEL_ERROR, __VA_ARGS__)

/* Invariant broken or out of memory: log file and line, then abort. Never
 * used for input that came from outside the process. */
#define log_panic(...) log_panic_at(__FILE__, __LINE__, __VA_ARGS__)
void log_panic_at(const char *file, int line, const char *format, ...) __attribute__((format(printf, 3, 4), noreturn));

/* Allocation helpers that panic on out-of-memory (the only sane reaction in
 * a game server: a half-applied state is worse than a restart). */
void *xmalloc(size_t size);
void *xcalloc(size_t count, size_t size);
void *xrealloc(void *pointer, size_t size);
char *xstrdup(const char *text);

#endif
