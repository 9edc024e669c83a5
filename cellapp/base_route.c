/* base_route.c -- calls from this cellapp to entities' bases: owns the
 * cellapp's base mailbox (common/base_mailbox.h), which finds each target's
 * baseapp and keeps the calls in order, and counts the calls made and
 * those that came back failed. */
#include "base_route.h"

#include <inttypes.h>
#include <stdlib.h>

#include "log.h"
#include "peer_message.h"

struct base_route {
    base_route_context context;
    base_mailbox *bases;
};

static int base_route_send(uint64_t baseapp_id, const Tessera__Cluster__BaseCall *call, void *user_data) {
    base_route *route = user_data;
    return peer_send_base_call(route->context.peers, baseapp_id, call);
}

static void base_route_failed(const Tessera__Cluster__EntityCallFailed *failed, void *user_data) {
    base_route *route = user_data;
    route->context.counters->base_calls_failed++;
    log_info("a call of entity %" PRIu64 "'s base (by entity %" PRIu64 ") failed: %s", failed->entity_id,
             failed->caller_id, failed->reason ? failed->reason : "");
}

base_route *base_route_create(const base_route_context *context) {
    base_route *route = xcalloc(1, sizeof *route);
    route->context = *context;
    route->bases =
        base_mailbox_create(context->redis, context->cluster_name, base_route_send, base_route_failed, route);
    return route;
}

void base_route_free(base_route *route) {
    if (!route) return;
    base_mailbox_free(route->bases);
    free(route);
}

void base_route_set_self(base_route *route, uint64_t process_id) { base_mailbox_set_self(route->bases, process_id); }

int base_route_call(base_route *route, uint64_t caller_id, uint64_t target_id, const char *class_name,
                    entity_def_part part, const char *method_name, const entity_state *args) {
    const entity_def_class *cls = entity_def_registry_find_class(route->context.definitions, class_name);
    const entity_def_method *method = cls ? entity_def_class_find_method(cls, part, method_name) : NULL;
    if (!method || (part != ENTITY_DEF_PART_BASE && part != ENTITY_DEF_PART_CLIENT)) return -1;
    /* A real here knows its own base's baseapp: no lookup. */
    cell_entity *target = spaces_find_entity(route->context.spaces, target_id);
    if (target && target->kind == CELL_ENTITY_REAL && target->real->baseapp_id)
        base_mailbox_learn(route->bases, target_id, target->real->baseapp_id);
    route->context.counters->base_calls++;
    return base_mailbox_call(route->bases, caller_id, target_id, class_name, method, args);
}

void base_route_on_failed(base_route *route, const Tessera__Cluster__EntityCallFailed *failed) {
    base_mailbox_on_failed(route->bases, failed);
}
