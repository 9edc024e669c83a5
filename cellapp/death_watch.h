/* death_watch.h -- the cluster's one decider of deaths: the cellapp that
 * holds the balancer lease watches every process it knows and declares one
 * dead, in Redis and to every peer, when
 *
 *   - its connection closed and it did not come back within
 *     PEER_SET_DEATH_RESET_MS (a crash: the kernel resets its connections
 *     at once; a process that is in fact alive finds itself revoked and
 *     rejoins as a new one), or
 *   - its registry lease lapsed and it has been silent for
 *     PEER_SET_DEATH_SILENCE_MS (stopped, stalled or cut off), or
 *   - it left the registry and has no connection (a stop that did not hand
 *     its work over).
 *
 * A peer that is only busy keeps talking (its pings, its traffic) and is
 * never declared dead on a lapsed lease alone. Nothing else in the cluster
 * decides: the other processes act on the decision (peer_set.h).
 */
#ifndef TESSERA_DEATH_WATCH_H
#define TESSERA_DEATH_WATCH_H

#include <stdint.h>

#include "balancer.h"
#include "process_runtime.h"

typedef struct death_watch death_watch;

typedef struct death_watch_context {
    process_runtime *runtime; /* the peers, the registry */
    balancer *balancer;       /* the lease (a crashed holder's is taken back) */
} death_watch_context;

death_watch *death_watch_create(const death_watch_context *context);
void death_watch_free(death_watch *watch);
/* Once a tick: while this cellapp leads, declares the deaths that are due;
 * while another leads and has crashed, takes the lease back (death_watch.c). */
void death_watch_tick(death_watch *watch, uint64_t now_us);
/* Deaths this cellapp declared. */
uint64_t death_watch_declared(const death_watch *watch);

#endif
