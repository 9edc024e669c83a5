/* registry.h -- the cluster's process registry in Redis.
 *
 * Keys (prefix P = "tessera:<cluster_name>:", named in redis_keys.h):
 *   P next_process_id   INCR'd once by each starting process for its id
 *   P processes         SET of the ids of processes that registered
 *   P process:<id>      HASH role, host, port, pid, started_ms, and the
 *                       numbers the process publishes (load, clients, ...);
 *                       PEXPIRE'd to ttl_ms on every heartbeat
 *
 * A process is alive while its hash exists: the TTL is the heartbeat. Each
 * heartbeat (every heartbeat_ms) rewrites the hash, renews the TTL, then
 * reads every member of P processes and reports the live ones to the owner.
 * A member whose hash has expired has missed its heartbeats: it is dropped
 * from the set and is simply absent from the report, which is how peers
 * learn that a process is gone. Redis's own clock decides expiry, so the
 * processes' clocks need not agree.
 */
#ifndef TESSERA_REGISTRY_H
#define TESSERA_REGISTRY_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

#include "redis_client.h"

/* Figures a process publishes (the cellapp has 40 or so): a fixed array, sized with room. */
#define REGISTRY_MAX_STATS 64

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
    bool draining;        /* its stat draining is non-zero */
} registry_peer;

typedef struct registry registry;

/* The process has its id (first successful registration only). */
typedef void (*registry_registered_callback)(registry *reg, uint64_t process_id, void *user_data);
/* The live processes other than this one, after each heartbeat. `peers` is
 * valid during the call only. */
typedef void (*registry_peers_callback)(registry *reg, const registry_peer *peers, size_t count, void *user_data);

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

#endif
