/* lease.h -- one process of a cluster holds a named duty (the balancer) at a
 * time, through a Redis key with a time to live.
 *
 * The key (P balancer_lease, redis_keys.h) holds "<holder id>:<fence>".
 * Every period each candidate runs one Lua script: if the key is free it
 * takes it for ttl_ms with a new fence (INCR of P balancer_fence, so fences
 * only grow), if it is its own it renews it, otherwise it learns who holds
 * it. When the holder dies its key expires and another candidate takes it
 * within ttl_ms plus one period.
 *
 * Fencing. A holder that stalls (a long pause, a cut-off network) may still
 * believe it leads after its key expired and a successor took over. So
 * whatever it writes carries its fence, and the writes check it against
 * the newest (space_store.h refuses layouts of older fences). Locally, a
 * holder also stops counting itself the holder once ttl_ms have passed
 * since the request of its last successful renewal.
 *
 * Pure client of redis_client: one request in flight at a time, replies on
 * the loop. Lost connection: the lease counts as not held.
 */
#ifndef TESSERA_LEASE_H
#define TESSERA_LEASE_H

#include <stdbool.h>
#include <stdint.h>

#include "redis_client.h"

extern const char LEASE_ACQUIRE_SCRIPT[];
extern const char LEASE_RELEASE_SCRIPT[];
extern const char LEASE_TAKE_BACK_SCRIPT[];

typedef struct lease lease;

/* Called when this process gains the lease (fence > 0) or loses it (0). */
typedef void (*lease_change_callback)(lease *l, uint64_t fence, void *user_data);

/* A candidate `holder_id` (its process id, not 0) for the cluster's lease.
 * Nothing is sent until lease_tick. */
lease *lease_create(redis_client *redis, const char *cluster, uint64_t holder_id, uint64_t ttl_ms,
                    lease_change_callback on_change, void *user_data);
/* Frees it without releasing (the key then expires by itself). A reply
 * still in flight is dropped safely. */
void lease_free(lease *l);

/* Asks to take or renew the lease, unless a request is already in flight
 * or the lease is given up. Call once a period (well below ttl_ms). */
void lease_tick(lease *l, uint64_t now_us);
/* The fence while this process holds the lease, else 0. */
uint64_t lease_fence(const lease *l, uint64_t now_us);
/* The holder last seen (this process or another; 0: none known). */
uint64_t lease_holder(const lease *l);
/* Takes the lease back from a holder that crashed, so that a successor
 * need not wait ttl_ms for its key to expire: deletes the key if it still
 * names `holder_id` and that holder's registry hash (`holder_registry_key`,
 * renewed to `registry_ttl_ms` at each of its heartbeats) was not renewed
 * for at least `quiet_ms`, i.e. not since the caller saw its connections
 * reset. Then this candidate asks for the lease at once. The caller has
 * the evidence (death_watch.c); fences make it safe even if the holder
 * lives: whatever it writes after this carries an old fence. `done` (may be
 * NULL) hears 1 taken back, 0 not (held by another, or renewed since), -1
 * no answer. Returns 0, or -1 when a take-back is in flight already or
 * Redis is not connected (no callback). */
typedef void (*lease_take_back_callback)(int result, void *context);
int lease_take_back(lease *l, uint64_t holder_id, const char *holder_registry_key, uint64_t registry_ttl_ms,
                    uint64_t quiet_ms, lease_take_back_callback done, void *context);
/* Gives the lease up for good (a process that is stopping): deletes the key
 * if it is still ours, so a successor need not wait for it to expire, and
 * never asks again. */
void lease_release(lease *l);

#endif
