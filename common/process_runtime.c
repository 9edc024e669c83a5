/* process_runtime.c -- the bootstrap and teardown every server process
 * shares (process_runtime.h): the peer listener, peers, Redis and the
 * registry wired together, the figures' timer, the signals, and the order
 * in which they close. It owns these handles and nothing of the program's. */
#include "process_runtime.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

#define RUNTIME_HOOK(rt, hook, ...) \
    ((rt)->options.hooks.hook ? (rt)->options.hooks.hook((rt)->options.hooks.owner, ##__VA_ARGS__) : (void)0)

static void process_runtime_on_registered(registry *reg, uint64_t process_id, void *user_data) {
    process_runtime *rt = user_data;
    (void)reg;
    rt->self.process_id = process_id;
    peer_set_set_process_id(rt->peers, process_id);
    RUNTIME_HOOK(rt, registered, process_id);
}

static void process_runtime_on_peers(registry *reg, const registry_view *view, void *user_data) {
    process_runtime *rt = user_data;
    (void)reg;
    if (rt->self.stopping) return;
    peer_set_on_registry(rt->peers, view);
    RUNTIME_HOOK(rt, peers, view);
}

static void process_runtime_on_revoked(registry *reg, void *user_data) {
    process_runtime *rt = user_data;
    (void)reg;
    if (rt->self.stopping) return;
    if (rt->options.hooks.revoked)
        RUNTIME_HOOK(rt, revoked);
    else
        process_runtime_rejoin(rt, "the cluster declared this process dead");
}

static void process_runtime_on_redis_state(redis_client *client, int connected, unsigned failed_attempts,
                                           void *user_data) {
    process_runtime *rt = user_data;
    (void)client;
    if (connected) {
        if (rt->registry) registry_on_redis_state(rt->registry, 1);
        RUNTIME_HOOK(rt, redis_connected);
        return;
    }
    if (process_redis_should_give_up(rt->options.settings, rt->self.process_id, failed_attempts)) {
        rt->exit_code = 1;
        uv_stop(rt->loop);
    }
}

static void process_runtime_on_peer_connection(uv_stream_t *listener, int status) {
    process_runtime *rt = listener->data;
    if (status < 0) {
        log_warn("peer listener: %s", uv_strerror(status));
        return;
    }
    if (!rt->self.stopping) peer_set_accept(rt->peers, listener);
}

int process_runtime_open(process_runtime *rt, const process_runtime_options *options, char *err, size_t errlen) {
    rt->options = *options;
    if (!rt->loop) rt->loop = uv_default_loop();
    const process_settings *settings = options->settings;
    char why[400];
    if (channel_listen(rt->loop, &rt->peer_listener, settings->internal_host, (int)settings->internal_port,
                       process_runtime_on_peer_connection, why, sizeof why) != 0) {
        snprintf(err, errlen, "peer listener: %s", why);
        return -1;
    }
    rt->listening = true;
    rt->peer_listener.data = rt;
    rt->peer_port = channel_listener_port(&rt->peer_listener);
    rt->peers = peer_set_create(rt->loop, options->peer_role, settings->cluster_name, options->peer_callbacks,
                                options->peer_user_data, &rt->peer_totals);
    rt->redis = redis_client_create(rt->loop, settings->redis_host, (int)settings->redis_port,
                                    (unsigned)settings->redis_retry_ms, process_runtime_on_redis_state, rt);
    if (!rt->redis) {
        snprintf(err, errlen, "configuration error: redis_host '%s' is not usable", settings->redis_host);
        return -1;
    }
    redis_client_set_password(rt->redis, settings->redis_password);
    return 0;
}

void process_runtime_register(process_runtime *rt, const char *client_host) {
    const process_settings *settings = rt->options.settings;
    registry_options registry_settings = {
        .cluster_name = settings->cluster_name,
        .role = rt->options.role,
        .host = settings->internal_host,
        .port = rt->peer_port,
        .client_host = client_host,
        .heartbeat_ms = (unsigned)settings->heartbeat_ms,
        .ttl_ms = (unsigned)settings->registry_ttl_ms,
        .on_registered = process_runtime_on_registered,
        .on_peers = process_runtime_on_peers,
        .on_revoked = process_runtime_on_revoked,
        .user_data = rt,
    };
    rt->registry = registry_create(rt->loop, rt->redis, &registry_settings);
}

static void process_runtime_on_figures_timer(uv_timer_t *timer) {
    process_runtime *rt = timer->data;
    if (!rt->self.stopping) RUNTIME_HOOK(rt, figures);
}

static void process_runtime_on_signal(uv_signal_t *handle, int signum) {
    process_runtime *rt = handle->data;
    switch (signum) {
        case SIGTERM:
            log_info("received signal %d (SIGTERM)", signum);
            if (rt->options.hooks.terminate)
                RUNTIME_HOOK(rt, terminate);
            else
                uv_stop(rt->loop);
            break;
        case SIGINT:
            log_info("received signal %d (SIGINT)", signum);
            if (rt->options.hooks.interrupt)
                RUNTIME_HOOK(rt, interrupt);
            else
                uv_stop(rt->loop);
            break;
        case SIGUSR1:
            RUNTIME_HOOK(rt, dump);
            break;
        case SIGHUP: {
            const process_runtime_options *o = &rt->options;
            process_reload_logging(o->program, o->argc, o->argv, o->keys, o->key_count, o->settings_size,
                                   o->common_offset);
            RUNTIME_HOOK(rt, reload);
            break;
        }
        default:
            break;
    }
}

static void process_runtime_signal(process_runtime *rt, uv_signal_t *handle, int signum) {
    uv_signal_init(rt->loop, handle);
    handle->data = rt;
    uv_signal_start(handle, process_runtime_on_signal, signum);
}

int process_runtime_run(process_runtime *rt) {
    rt->running = true;
    uv_timer_init(rt->loop, &rt->figures_timer);
    rt->figures_timer.data = rt;
    unsigned period = rt->options.figures_ms ? rt->options.figures_ms : 200;
    uv_timer_start(&rt->figures_timer, process_runtime_on_figures_timer, period, period);
    process_runtime_signal(rt, &rt->sigint, SIGINT);
    process_runtime_signal(rt, &rt->sigterm, SIGTERM);
    process_runtime_signal(rt, &rt->sigusr1, SIGUSR1);
    process_runtime_signal(rt, &rt->sighup, SIGHUP);
    redis_client_start(rt->redis);
    uv_run(rt->loop, UV_RUN_DEFAULT);
    return rt->exit_code;
}

void process_runtime_stop(process_runtime *rt) {
    if (rt->stopped) return;
    rt->stopped = true;
    rt->self.stopping = true;
    if (rt->running) {
        uv_timer_stop(&rt->figures_timer);
        uv_close((uv_handle_t *)&rt->figures_timer, NULL);
        uv_close((uv_handle_t *)&rt->sigint, NULL);
        uv_close((uv_handle_t *)&rt->sigterm, NULL);
        uv_close((uv_handle_t *)&rt->sigusr1, NULL);
        uv_close((uv_handle_t *)&rt->sighup, NULL);
    }
    if (rt->listening) uv_close((uv_handle_t *)&rt->peer_listener, NULL);
    rt->listening = false;
    registry_free(rt->registry);
    rt->registry = NULL;
    peer_set_free(rt->peers);
    rt->peers = NULL;
    redis_client_free(rt->redis);
    rt->redis = NULL;
}

void process_runtime_close(process_runtime *rt) {
    process_runtime_stop(rt);
    if (rt->loop) process_drain_loop(rt->loop);
}

bool process_runtime_fenced(const process_runtime *rt, uint64_t now_us) {
    if (!rt->registry || !rt->peers || rt->self.process_id == 0) return false;
    if (registry_lease_valid(rt->registry, now_us)) return false;
    return !peer_set_vouched(rt->peers, PEER_ROLE_CELLAPP, now_us);
}

/* Every descriptor but the standard three closes on exec (libuv's already
 * do; a library's may not). */
static void process_runtime_close_on_exec(void) {
    DIR *dir = opendir("/proc/self/fd");
    if (!dir) return;
    int own = dirfd(dir);
    const struct dirent *entry;
    while ((entry = readdir(dir)) != NULL) {
        char *end;
        long fd = strtol(entry->d_name, &end, 10);
        if (*end != '\0' || fd <= 2 || fd == own) continue;
        int flags = fcntl((int)fd, F_GETFD);
        if (flags >= 0) (void)fcntl((int)fd, F_SETFD, flags | FD_CLOEXEC);
    }
    closedir(dir);
}

void process_runtime_rejoin(process_runtime *rt, const char *why) {
    log_warn("rejoining the cluster as a new process: %s (what this process held is the cluster's now)", why);
    process_runtime_close_on_exec();
    char *const *argv = rt->options.argv;
    if (argv && argv[0]) execv("/proc/self/exe", argv);
    log_error("rejoin: exec of /proc/self/exe failed: %s; exiting", strerror(errno));
    exit(1);
}
