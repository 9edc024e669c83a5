/* process.c -- start-up chores shared by the server programs: argv parsing
 * and loading and checking the settings every process has. */
#include "process.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <signal.h>
#include <uv.h>

#include "admin_guard.h"
#include "log.h"
#include "secret_file.h"

int process_parse_arguments(int argc, char **argv, process_arguments *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    out->overrides = xcalloc((size_t)argc + 1, sizeof *out->overrides);
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            out->help = 1;
        } else if (strcmp(arg, "--check") == 0) {
            out->check = 1;
        } else if (strcmp(arg, "--config") == 0 || strcmp(arg, "--set") == 0) {
            if (i + 1 >= argc) {
                snprintf(err, errlen, "%s needs a value", arg);
                return -1;
            }
            if (arg[2] == 'c')
                out->config_path = argv[++i];
            else
                out->overrides[out->override_count++] = argv[++i];
        } else if (strncmp(arg, "--config=", 9) == 0) {
            out->config_path = arg + 9;
        } else if (strncmp(arg, "--set=", 6) == 0) {
            out->overrides[out->override_count++] = (char *)arg + 6;
        } else {
            snprintf(err, errlen, "unknown argument '%s' (usage: --config FILE [--set key=value]... [--check])", arg);
            return -1;
        }
    }
    return 0;
}

void process_arguments_free(process_arguments *arguments) {
    free(arguments->overrides);
    arguments->overrides = NULL;
}

/* Reads the secrets the settings name (process_load_settings). */
static int process_read_secrets(process_settings *common, char *err, size_t errlen) {
    if (common->redis_password_file[0]) {
        if (common->redis_password[0]) {
            snprintf(err, errlen, "redis_password and redis_password_file are both set: keep one (the file)");
            return -1;
        }
        if (secret_file_read("redis_password_file", common->redis_password_file, 1, common->redis_password,
                             sizeof common->redis_password, err, errlen) != 0)
            return -1;
    }
    if (common->admin_port >= 0 && common->admin_token_file[0]) {
        char token[ADMIN_GUARD_TOKEN_MAX + 1];
        int rc = admin_guard_read_token_file(common->admin_token_file, token, sizeof token, err, errlen);
        sodium_memzero(token, sizeof token);
        if (rc != 0) return -1;
    }
    return 0;
}

int process_load_settings(const char *program, const config_key *keys, size_t key_count, void *settings,
                          process_settings *common, const process_arguments *arguments) {
    char err[512];
    if (config_load(keys, key_count, settings, arguments->config_path, arguments->overrides, arguments->override_count,
                    err, sizeof err) != 0) {
        fprintf(stderr, "%s: configuration error: %s\n", program, err);
        return -1;
    }
    log_level level;
    if (log_parse_level(common->log_level, &level) != 0) {
        fprintf(stderr, "%s: configuration error: log_level '%s' is not one of debug, info, warn, error\n", program,
                common->log_level);
        return -1;
    }
    log_set_level(level);
    log_format format;
    if (log_parse_format(common->log_format, &format) != 0) {
        fprintf(stderr, "%s: configuration error: log_format '%s' is not text or json\n", program, common->log_format);
        return -1;
    }
    log_set_format(format);
    if (common->registry_ttl_ms <= common->heartbeat_ms) {
        fprintf(stderr,
                "%s: configuration error: registry_ttl_ms (%lld) must be longer than heartbeat_ms (%lld), or every "
                "process would expire between two heartbeats\n",
                program, (long long)common->registry_ttl_ms, (long long)common->heartbeat_ms);
        return -1;
    }
    if (process_read_secrets(common, err, sizeof err) != 0) {
        fprintf(stderr, "%s: configuration error: %s\n", program, err);
        return -1;
    }
    return 0;
}

int process_configure(const char *program, const char *role, int argc, char **argv, const config_key *keys,
                      size_t key_count, void *settings, process_settings *common, process_settings_check check) {
    char err[512];
    process_arguments arguments;
    /* A write to a vanished peer is an error to handle, not death. */
    if (signal(SIGPIPE, SIG_IGN) == SIG_ERR) fprintf(stderr, "%s: cannot ignore SIGPIPE\n", program);
    log_set_identity(role, 0);
    if (process_parse_arguments(argc, argv, &arguments, err, sizeof err) != 0) {
        fprintf(stderr, "%s: %s\n", program, err);
        process_arguments_free(&arguments);
        return 2;
    }
    if (arguments.help) {
        printf("usage: %s --config FILE [--set key=value]...\nsettings (with their defaults):\n", program);
        config_load(keys, key_count, settings, NULL, NULL, 0, err, sizeof err);
        config_print(keys, key_count, settings, stdout);
        process_arguments_free(&arguments);
        return 0;
    }
    int loaded = process_load_settings(program, keys, key_count, settings, common, &arguments);
    int check_only = arguments.check;
    process_arguments_free(&arguments);
    if (loaded != 0) return 1;
    char problem[512];
    if (check && check(settings, problem, sizeof problem) != 0) {
        fprintf(stderr, "%s: configuration error: %s\n", program, problem);
        return 1;
    }
    if (check_only) {
        printf("%s: the settings load and check out\n", program);
        return 0;
    }
    return PROCESS_CONTINUE;
}

bool process_redis_should_give_up(const process_settings *common, uint64_t process_id, unsigned failed_attempts) {
    if (process_id != 0 || failed_attempts < (unsigned)common->redis_connect_attempts) return false;
    log_error("cannot reach Redis at %s:%lld after %u attempts: giving up", common->redis_host,
              (long long)common->redis_port, failed_attempts);
    return true;
}

static void process_close_walk(uv_handle_t *handle, void *arg) {
    (void)arg;
    if (!uv_is_closing(handle)) uv_close(handle, NULL);
}

void process_drain_loop(uv_loop_t *loop) {
    uv_run(loop, UV_RUN_DEFAULT);
    uv_walk(loop, process_close_walk, NULL);
    uv_run(loop, UV_RUN_DEFAULT);
    uv_loop_close(loop);
}

int process_reload_logging(const char *program, int argc, char **argv, const config_key *keys, size_t key_count,
                           size_t settings_size, size_t common_offset) {
    char err[512];
    process_arguments arguments;
    if (process_parse_arguments(argc, argv, &arguments, err, sizeof err) != 0) {
        log_warn("reload: %s", err);
        process_arguments_free(&arguments);
        return -1;
    }
    void *settings = xcalloc(1, settings_size);
    const process_settings *common = (const process_settings *)((const char *)settings + common_offset);
    int rc = config_load(keys, key_count, settings, arguments.config_path, arguments.overrides,
                         arguments.override_count, err, sizeof err);
    process_arguments_free(&arguments);
    log_level level;
    log_format format;
    if (rc != 0) {
        log_warn("reload: %s: configuration error: %s (logging unchanged)", program, err);
    } else if (log_parse_level(common->log_level, &level) != 0 || log_parse_format(common->log_format, &format) != 0) {
        log_warn("reload: log_level '%s' or log_format '%s' is not valid (logging unchanged)", common->log_level,
                 common->log_format);
        rc = -1;
    } else {
        log_set_level(level);
        log_set_format(format);
        log_info("reload: log_level %s, log_format %s", common->log_level, common->log_format);
    }
    free(settings);
    return rc;
}
