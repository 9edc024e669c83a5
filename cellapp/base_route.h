/* base_route.h -- calls from this cellapp to entities' bases (base_route.c):
 * game code on a real calls a base or client method of any entity by id;
 * the call finds the entity's baseapp (a real here knows its own, the base
 * directory in Redis knows the rest) and a call that cannot be delivered
 * comes back, counted and logged.
 */
#ifndef TESSERA_BASE_ROUTE_H
#define TESSERA_BASE_ROUTE_H

#include <stdint.h>

#include "base_mailbox.h"
#include "cellapp_counters.h"
#include "cluster.pb-c.h"
#include "entity_def.h"
#include "entity_state.h"
#include "peer_set.h"
#include "redis_client.h"
#include "spaces.h"

typedef struct base_route base_route;

/* What the route borrows (each outlives it). */
typedef struct base_route_context {
    redis_client *redis; /* the base directory */
    const char *cluster_name;
    peer_set *peers;
    spaces *spaces;
    const entity_def_registry *definitions;
    cellapp_counters *counters;
} base_route_context;

base_route *base_route_create(const base_route_context *context);
void base_route_free(base_route *route);
/* Once registered: calls from here name this process as their sender. */
void base_route_set_self(base_route *route, uint64_t process_id);
/* Calls method `method_name` (of class `class_name`, part BASE, or CLIENT:
 * through the base to its client) of entity `target_id`'s base, wherever it
 * is, for `caller_id`, with `args` (a state of the method's args_class;
 * NULL: none). Returns 0 (a failure comes back, logged and counted), or -1
 * when there is no such method. */
int base_route_call(base_route *route, uint64_t caller_id, uint64_t target_id, const char *class_name,
                    entity_def_part part, const char *method_name, const entity_state *args);
/* An EntityCallFailed for a call made here. */
void base_route_on_failed(base_route *route, const Tessera__Cluster__EntityCallFailed *failed);

#endif
