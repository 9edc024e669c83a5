/* process_runtime.h -- what every Tessera server process runs on, once: the
 * loop, who the process is (process_self), the peer listener and the peer
 * set, the Redis connection, the registry entry, the figures' timer, the
 * signals, and an orderly teardown.
 *
 * A program's main fills process_runtime_options (its name and role, its
 * settings and key table for SIGHUP, what its peers' messages go to, and
 * the hooks below) and then:
 *
 *   process_runtime_open      the peer listener, the peer set, Redis (not
 *                             connected yet); the program builds its
 *                             modules on rt->redis and rt->peers;
 *   process_runtime_register  the registry entry (where peers and clients
 *                             reach this process);
 *   process_runtime_run       the figures' timer and the signals start,
 *                             Redis connects, the loop runs until a hook
 *                             or a fatal Redis failure stops it;
 *   process_runtime_stop      idempotent: sets self.stopping (so modules
 *                             that are still called back do nothing) and
 *                             closes what talks to the outside (timer,
 *                             signals, listener, registry, peers, Redis).
 *                             A program sets self.stopping itself when its
 *                             own teardown must run first (its mailboxes
 *                             go before Redis does);
 *   process_runtime_close     after the program's own teardown: drains the
 *                             loop until libuv released every handle.
 *
 * The runtime owns none of the program's modules and calls none of them:
 * it calls the hooks, in which the program reaches its modules.
 */
#ifndef TESSERA_PROCESS_RUNTIME_H
#define TESSERA_PROCESS_RUNTIME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "channel.h"
#include "config.h"
#include "peer_set.h"
#include "process.h"
#include "process_self.h"
#include "redis_client.h"
#include "registry.h"

/* What the runtime tells the program. Every hook may be NULL. */
typedef struct process_runtime_hooks {
    void *owner;
    /* The registry gave this process its id (self.process_id and the peer
     * set already have it). */
    void (*registered)(void *owner, uint64_t process_id);
    /* A registry report (the peer set has already dialled, dropped and
     * marked the dead from it). */
    void (*peers)(void *owner, const registry_view *view);
    /* The cluster declared this process dead. NULL: the runtime rejoins
     * (process_runtime_rejoin). */
    void (*revoked)(void *owner);
    /* Redis is connected (again). */
    void (*redis_connected)(void *owner);
    /* The figures' period: publish what changed. */
    void (*figures)(void *owner);
    /* SIGTERM: drain and stop. */
    void (*terminate)(void *owner);
    /* SIGINT: stop (a program may drain on it too). */
    void (*interrupt)(void *owner);
    /* SIGUSR1: write the state dump. */
    void (*dump)(void *owner);
    /* SIGHUP, after log_level and log_format are read again: reload what
     * else reloads live (the game's Lua scripts). */
    void (*reload)(void *owner);
} process_runtime_hooks;

typedef struct process_runtime_options {
    const char *program; /* "tessera-baseapp": log lines, SIGHUP's reload */
    const char *role;    /* "baseapp" or "cellapp": the registry entry */
    peer_role peer_role;
    /* The program's settings, for SIGHUP's reload of log_level and
     * log_format (process_reload_logging). */
    const process_settings *settings;
    const config_key *keys;
    size_t key_count;
    size_t settings_size;
    size_t common_offset;
    int argc;
    char **argv;
    /* What the peers' messages and comings and goings go to. */
    const peer_set_callbacks *peer_callbacks;
    void *peer_user_data;
    unsigned figures_ms; /* the figures' period */
    process_runtime_hooks hooks;
} process_runtime_options;

typedef struct process_runtime {
    uv_loop_t *loop;
    process_self self;
    process_runtime_options options;
    redis_client *redis;
    registry *registry;
    peer_set *peers;
    channel_stats peer_totals; /* every peer channel's traffic */
    uv_tcp_t peer_listener;
    int peer_port;
    uv_timer_t figures_timer;
    uv_signal_t sigint, sigterm, sigusr1, sighup;
    bool listening; /* the peer listener is open */
    bool running;   /* the timer and the signals are started */
    bool stopped;   /* process_runtime_stop ran */
    int exit_code;  /* what main returns */
} process_runtime;

/* Opens the peer listener on internal_host:internal_port, the peer set and
 * the Redis client (connected by process_runtime_run). Returns 0, or -1
 * with why in err; process_runtime_stop and _close still apply. */
int process_runtime_open(process_runtime *rt, const process_runtime_options *options, char *err, size_t errlen);

/* The registry entry: peers reach this process at the listener, clients at
 * `client_host` (NULL: none). */
void process_runtime_register(process_runtime *rt, const char *client_host);

/* Starts the figures' timer and the signals, connects Redis and runs the
 * loop until it is stopped. Returns rt->exit_code. */
int process_runtime_run(process_runtime *rt);

/* Stops talking to the outside (see the top). Idempotent. */
void process_runtime_stop(process_runtime *rt);

/* Runs the loop until libuv has released every handle, then closes it. */
void process_runtime_close(process_runtime *rt);

/* Whether this process must not act as an owner now (self-fencing): it has
 * registered, its lease lapsed (registry_lease_valid), and some cellapp
 * that could declare it dead has not heard it lately (peer_set_vouched).
 * Redis out of reach for everyone fences nobody: no lease holder can
 * decide, and every cellapp still hears every other. */
bool process_runtime_fenced(const process_runtime *rt, uint64_t now_us);

/* Rejoins the cluster as a new process: what this one held is the
 * cluster's now, so it is dropped whole by running the program again
 * (exec, same arguments and pid). Does not return unless the exec failed
 * (logged; the process then exits with 1). */
void process_runtime_rejoin(process_runtime *rt, const char *why);

#endif
