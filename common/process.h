/* process.h -- what every Tessera server process shares at start-up: the
 * common settings, command-line parsing, and the Redis connection policy.
 *
 * Command line:  <program> --config FILE [--set key=value]... [--check] [--help]
 *
 * --check loads and checks the settings (every key known, in range, the
 * common rules) and exits 0 without starting: for operators to validate a
 * config before they roll it out.
 *
 * A program embeds process_settings in its own settings struct and lists
 * PROCESS_CONFIG_KEYS(its struct, its field) at the head of its key table,
 * so each common key is still declared once.
 */
#ifndef TESSERA_PROCESS_H
#define TESSERA_PROCESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"

typedef struct process_settings {
    char cluster_name[64];
    char redis_host[64];
    int64_t redis_port;
    char redis_password[256];
    char redis_password_file[256];
    int64_t redis_connect_attempts;
    int64_t redis_retry_ms;
    char log_level[16];
    int64_t heartbeat_ms;
    int64_t registry_ttl_ms;
    char internal_host[64];
    int64_t internal_port;
    char admin_host[64];
    int64_t admin_port;
    char admin_token_file[256];
    char admin_allowed_hosts[512];
    char admin_allowed_origins[2048];
    int64_t admin_stream_lifetime_ms;
    char log_format[8];
} process_settings;

/* NOLINTBEGIN(bugprone-macro-parentheses): `type` and `field` go to offsetof
 * and sizeof, where a type and a member designator cannot be parenthesised. */
#define PROCESS_CONFIG_KEYS(type, field)                                                                            \
    {"cluster_name",                                                                                                \
     CONFIG_STRING,                                                                                                 \
     offsetof(type, field.cluster_name),                                                                            \
     sizeof(((type *)0)->field.cluster_name),                                                                       \
     0,                                                                                                             \
     0,                                                                                                             \
     "tessera",                                                                                                     \
     "names the cluster; every Redis key is prefixed tessera:<cluster_name>:"},                                     \
        {"redis_host",                                                                                              \
         CONFIG_STRING,                                                                                             \
         offsetof(type, field.redis_host),                                                                          \
         sizeof(((type *)0)->field.redis_host),                                                                     \
         0,                                                                                                         \
         0,                                                                                                         \
         "127.0.0.1",                                                                                               \
         "IP address of the Redis server (control plane and database)"},                                            \
        {"redis_port", CONFIG_INT, offsetof(type, field.redis_port), 0, 1, 65535, "6379", "Redis TCP port"},        \
        {"redis_password",                                                                                          \
         CONFIG_STRING,                                                                                             \
         offsetof(type, field.redis_password),                                                                      \
         sizeof(((type *)0)->field.redis_password),                                                                 \
         0,                                                                                                         \
         0,                                                                                                         \
         "",                                                                                                        \
         "password every Redis connection sends with AUTH (empty: none); never logged"},                            \
        {"redis_password_file",                                                                                     \
         CONFIG_STRING,                                                                                             \
         offsetof(type, field.redis_password_file),                                                                 \
         sizeof(((type *)0)->field.redis_password_file),                                                            \
         0,                                                                                                         \
         0,                                                                                                         \
         "",                                                                                                        \
         "file holding redis_password (owner/group-readable only), instead of redis_password: keeps it off the "    \
         "command line"},                                                                                           \
        {"redis_connect_attempts",                                                                                  \
         CONFIG_INT,                                                                                                \
         offsetof(type, field.redis_connect_attempts),                                                              \
         0,                                                                                                         \
         1,                                                                                                         \
         100000,                                                                                                    \
         "20",                                                                                                      \
         "failed connection attempts at start-up before the process gives up"},                                     \
        {"redis_retry_ms",                                                                                          \
         CONFIG_INT,                                                                                                \
         offsetof(type, field.redis_retry_ms),                                                                      \
         0,                                                                                                         \
         10,                                                                                                        \
         60000,                                                                                                     \
         "500",                                                                                                     \
         "pause between Redis connection attempts"},                                                                \
        {"log_level", CONFIG_STRING, offsetof(type, field.log_level), sizeof(((type *)0)->field.log_level), 0,      \
         0,           "info",        "debug, info, warn or error"},                                                 \
        {"heartbeat_ms",                                                                                            \
         CONFIG_INT,                                                                                                \
         offsetof(type, field.heartbeat_ms),                                                                        \
         0,                                                                                                         \
         50,                                                                                                        \
         60000,                                                                                                     \
         "1000",                                                                                                    \
         "how often the process renews its registry entry and rescans its peers"},                                  \
        {"registry_ttl_ms",                                                                                         \
         CONFIG_INT,                                                                                                \
         offsetof(type, field.registry_ttl_ms),                                                                     \
         0,                                                                                                         \
         100,                                                                                                       \
         600000,                                                                                                    \
         "3000",                                                                                                    \
         "a process whose entry is not renewed for this long is gone"},                                             \
        {"internal_host",                                                                                           \
         CONFIG_STRING,                                                                                             \
         offsetof(type, field.internal_host),                                                                       \
         sizeof(((type *)0)->field.internal_host),                                                                  \
         0,                                                                                                         \
         0,                                                                                                         \
         "127.0.0.1",                                                                                               \
         "IP address this process listens on for other Tessera processes"},                                         \
        {"internal_port",                                                                                           \
         CONFIG_INT,                                                                                                \
         offsetof(type, field.internal_port),                                                                       \
         0,                                                                                                         \
         0,                                                                                                         \
         65535,                                                                                                     \
         "0",                                                                                                       \
         "TCP port for other Tessera processes (0: any free port, published in the registry)"},                     \
        {"admin_host",                                                                                              \
         CONFIG_STRING,                                                                                             \
         offsetof(type, field.admin_host),                                                                          \
         sizeof(((type *)0)->field.admin_host),                                                                     \
         0,                                                                                                         \
         0,                                                                                                         \
         "127.0.0.1",                                                                                               \
         "IP address of the admin HTTP listener (/metrics, /healthz, /readyz, the live map)"},                      \
        {"admin_port",                                                                                              \
         CONFIG_INT,                                                                                                \
         offsetof(type, field.admin_port),                                                                          \
         0,                                                                                                         \
         -1,                                                                                                        \
         65535,                                                                                                     \
         "0",                                                                                                       \
         "TCP port of the admin HTTP listener (0: any free port, published in the registry as admin_port; "         \
         "-1: none)"},                                                                                              \
        {"admin_token_file",                                                                                        \
         CONFIG_STRING,                                                                                             \
         offsetof(type, field.admin_token_file),                                                                    \
         sizeof(((type *)0)->field.admin_token_file),                                                               \
         0,                                                                                                         \
         0,                                                                                                         \
         "",                                                                                                        \
         "file holding the admin token (mode 600 or 640): every admin route but /healthz, /readyz and /metrics "    \
         "wants it as Authorization: Bearer (GETs also ?token=); unset: those routes answer 403"},                  \
        {"admin_allowed_hosts",                                                                                     \
         CONFIG_STRING,                                                                                             \
         offsetof(type, field.admin_allowed_hosts),                                                                 \
         sizeof(((type *)0)->field.admin_allowed_hosts),                                                            \
         0,                                                                                                         \
         0,                                                                                                         \
         "",                                                                                                        \
         "Host names the admin listener answers to besides its own address (comma-separated; name or name:port)"},  \
        {"admin_allowed_origins",                                                                                   \
         CONFIG_STRING,                                                                                             \
         offsetof(type, field.admin_allowed_origins),                                                               \
         sizeof(((type *)0)->field.admin_allowed_origins),                                                          \
         0,                                                                                                         \
         0,                                                                                                         \
         "",                                                                                                        \
         "web origins besides its own whose pages may use the admin listener (comma-separated, "                    \
         "http://host:port or http://host:* for any port); the others' processes serving the live map"},            \
        {"admin_stream_lifetime_ms",                                                                                \
         CONFIG_INT,                                                                                                \
         offsetof(type, field.admin_stream_lifetime_ms),                                                            \
         0,                                                                                                         \
         500,                                                                                                       \
         86400000,                                                                                                  \
         "300000",                                                                                                  \
         "an admin event stream is closed after this long (the browser reconnects by itself)"},                     \
    {                                                                                                               \
        "log_format", CONFIG_STRING, offsetof(type, field.log_format), sizeof(((type *)0)->field.log_format), 0, 0, \
            "text", "text (one readable line per entry) or json (one JSON object per line)"                         \
    }

/* NOLINTEND(bugprone-macro-parentheses) */

typedef struct process_arguments {
    const char *config_path; /* NULL: defaults only */
    char **overrides;        /* the --set values, pointing into argv */
    size_t override_count;
    int help;
    int check; /* --check: load the settings, report, exit */
} process_arguments;

/* Parses argv. Returns 0, or -1 with a message in err. `overrides` is
 * allocated; free it with process_arguments_free. */
int process_parse_arguments(int argc, char **argv, process_arguments *out, char *err, size_t errlen);
void process_arguments_free(process_arguments *arguments);

/* Loads settings (see config_load) and checks the common ones (log level,
 * ttl longer than the heartbeat), then reads the secrets they name:
 * redis_password_file into common->redis_password (setting both is an
 * error), and admin_token_file, when the admin listener is on, only to
 * check it (process_admin_start reads it again). On failure prints the
 * error to stderr, prefixed with the program name, and returns -1. */
int process_load_settings(const char *program, const config_key *keys, size_t key_count, void *settings,
                          process_settings *common, const process_arguments *arguments);

/* The program's own rules over its settings (keys that only make sense
 * together): 0, or -1 with the problem in err, naming the keys. */
typedef int (*process_settings_check)(const void *settings, char *err, size_t errlen);

/* Everything a server's main does before it builds its loop: ignores
 * SIGPIPE, names the logger, parses argv, prints --help (with the defaults)
 * or loads and checks the settings (the common rules, then `check` when
 * not NULL). Returns PROCESS_CONTINUE when the program should go on,
 * otherwise the exit status to return (0 after --help or a passed --check,
 * 1 for a configuration error, 2 for a usage error); every error is
 * printed to stderr prefixed with `program`. */
#define PROCESS_CONTINUE (-1)
int process_configure(const char *program, const char *role, int argc, char **argv, const config_key *keys,
                      size_t key_count, void *settings, process_settings *common, process_settings_check check);

/* SIGHUP: loads the settings again as at start-up (argv as given to
 * main) into a scratch copy and applies log_level and log_format; the rest
 * takes a restart. Logs what it did. Returns 0, or -1 (logging unchanged). */
int process_reload_logging(const char *program, int argc, char **argv, const config_key *keys, size_t key_count,
                           size_t settings_size, size_t common_offset);

/* At start-up, before the process has registered, a failed Redis attempt
 * counts against redis_connect_attempts. Returns true (after logging why)
 * when the process should give up and exit. */
bool process_redis_should_give_up(const process_settings *common, uint64_t process_id, unsigned failed_attempts);

/* After the loop has stopped: closes every handle still open and runs the
 * loop until libuv has released them, then closes it. */
struct uv_loop_s;
void process_drain_loop(struct uv_loop_s *loop);

#endif
