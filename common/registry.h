/* registry.h -- the cluster's process registry in Redis.
 *
 * Keys (prefix P = "tessera:<cluster_name>:", named in redis_keys.h):
 *   P next_process_id   INCR'd once by each starting process for its id
 *   P processes         SET of the ids of processes that registered
 *   P process:<id>      HASH role, host, port, pid, started_ms, and the
 *                       numbers the process publishes (load, clients, ...);
 *                       PEXPIRE'd to ttl_ms on every heartbeat: its lease
 *   P dead              ZSET the ids declared dead (registry_declare_dead)
 *
 * A process holds its lease while its hash exists. Each heartbeat (every
 * heartbeat_ms) rewrites the hash and renews the TTL in one script that
 * refuses an id in P dead: a process declared dead learns it at its next
 * heartbeat (the revoked callback) and must rejoin as a new process. The
 * heartbeat then reads every member of P processes and reports them to the
 * owner: the listed ones (hash present), the lapsed ones (still a member,
 * hash expired: not renewed for ttl_ms, which is not death), and the dead
 * set. A lapsed member stays in P processes until it renews again, leaves
 * or is declared dead. Redis's own clock decides expiry, so the processes'
 * clocks need not agree.
 *
 * The lease as this process sees it: a renewal sent at monotonic time t
 * and acknowledged holds the lease until t + ttl_ms at the latest (Redis
 * set the TTL after t), so registry_lease_valid never says yes for longer
 * than Redis keeps the hash.
 */
#ifndef TESSERA_REGISTRY_H
#define TESSERA_REGISTRY_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

#include "redis_client.h"

/* Figures a process publishes (the cellapp has 70 or so with its Lua
 * figures): a fixed array, sized with room. */
#define REGISTRY_MAX_STATS 96

typedef struct registry_stat {
    char name[24];
    int64_t value;
} registry_stat;

typedef struct registry_peer {
    uint64_t process_id;
    char role[16];
    char host[64];
    int port;
    int64_t load;
    char client_host[64]; /* baseapps: where clients connect ("" for others) */
    int client_port;      /* ... its stat client_port */
    int websocket_port;   /* ... its stat websocket_port (0: none) */
    bool draining;        /* its stat draining is non-zero */
} registry_peer;

typedef struct registry registry;

/* What one scan of the registry found (everything valid during the
 * callback only): the processes other than this one whose lease is held,
 * those whose lease lapsed, and the ids declared dead in the last hour. */
typedef struct registry_view {
    const registry_peer *peers;
    size_t count;
    const uint64_t *lapsed;
    size_t lapsed_count;
    const uint64_t *dead;
    size_t dead_count;
} registry_view;

/* The process has its id (first successful registration only). */
typedef void (*registry_registered_callback)(registry *reg, uint64_t process_id, void *user_data);
/* The registry as the last scan found it, after each heartbeat. */
typedef void (*registry_peers_callback)(registry *reg, const registry_view *view, void *user_data);
/* This process was declared dead: its renewal was refused. It must stop
 * acting for what it held and rejoin as a new process. Called once. */
typedef void (*registry_revoked_callback)(registry *reg, void *user_data);

typedef struct registry_options {
    const char *cluster_name;
    const char *role; /* "baseapp", "cellapp" */
    const char *host; /* where peers reach this process */
    int port;
    const char *client_host; /* baseapps: where clients reach it (NULL: none) */
    unsigned heartbeat_ms;
    unsigned ttl_ms;
    registry_registered_callback on_registered;
    registry_peers_callback on_peers;
    registry_revoked_callback on_revoked; /* NULL: none */
    void *user_data;
} registry_options;

/* Creates the registry; it starts when redis connects (call
 * registry_on_redis_state from the redis state callback). */
registry *registry_create(uv_loop_t *loop, redis_client *redis, const registry_options *options);
/* Removes this process's entry if Redis is reachable, stops the heartbeat
 * and frees the registry after the loop runs once more. */
void registry_free(registry *reg);

/* Feed the redis client's state changes here. */
void registry_on_redis_state(registry *reg, int connected);

/* Publishes a number in this process's hash from the next heartbeat on
 * (load, clients, entities, frames_in, ...). At most REGISTRY_MAX_STATS. */
void registry_set_stat(registry *reg, const char *name, int64_t value);

uint64_t registry_process_id(const registry *reg);

/* Whether this process holds its lease at monotonic time `now_us`: a
 * renewal sent less than ttl_ms before it was acknowledged. False before
 * the first renewal and after a revocation. */
bool registry_lease_valid(const registry *reg, uint64_t now_us);

/* Declares process `process_id` dead, once, for the holder of the lease
 * `lease_value` (the "<id>:<fence>" of P balancer_lease, lease.h): in one
 * script, only while that lease is still the current one, the id goes into
 * P dead and out of P processes, and its hash is deleted. `done` (may be
 * NULL) hears whether this call made the decision (true) or it was refused
 * (the lease moved on, Redis did not answer, the id was dead already, or
 * the registry is being freed): it is called exactly once, and the caller
 * may free `context` in it. Returns 0, or -1 when Redis is not connected
 * (no callback). */
typedef void (*registry_declared_callback)(uint64_t process_id, bool declared, void *context);
int registry_declare_dead(registry *reg, uint64_t process_id, const char *lease_value, registry_declared_callback done,
                          void *context);

#endif
