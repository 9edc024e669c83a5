/* io_route.c -- owns entity I/O's paths between cellapps (io_route.h): the
 * name directory's writes and look-ups in Redis, the IoInput messages sent
 * through the mailbox, and their delivery to the target's input. */
#include "io_route.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "log.h"
#include "redis_keys.h"

struct io_route {
    io_route_context context;
};

io_route *io_route_create(const io_route_context *context) {
    io_route *route = xcalloc(1, sizeof *route);
    route->context = *context;
    return route;
}

void io_route_free(io_route *route) { free(route); }

void io_route_named(io_route *route, const cell_entity *entity, const char *old_name) {
    if (!route->context.redis) return;
    char key[REDIS_KEY_MAX], id[24];
    snprintf(id, sizeof id, "%" PRIu64, entity->id);
    if (old_name && old_name[0]) {
        redis_key_entity_name(key, route->context.cluster_name, old_name);
        redis_client_command(route->context.redis, NULL, NULL, "SREM %s %s", key, id);
    }
    if (entity->real->name[0]) {
        redis_key_entity_name(key, route->context.cluster_name, entity->real->name);
        redis_client_command(route->context.redis, NULL, NULL, "SADD %s %s", key, id);
    }
}

void io_route_unnamed(io_route *route, const cell_entity *entity) {
    if (!entity->real->name[0] || !route->context.redis) return;
    char key[REDIS_KEY_MAX], id[24];
    snprintf(id, sizeof id, "%" PRIu64, entity->id);
    redis_key_entity_name(key, route->context.cluster_name, entity->real->name);
    redis_client_command(route->context.redis, NULL, NULL, "SREM %s %s", key, id);
}

void io_route_to_entity(io_route *route, uint64_t entity_id, uint64_t activator_id, uint64_t caller_id,
                        const char *input, const char *parameter) {
    cell_entity *entity = spaces_find_entity(route->context.spaces, entity_id);
    if (entity && entity->kind == CELL_ENTITY_REAL) {
        route->context.hooks->io_input(route->context.hooks->host, entity, activator_id, caller_id, input, parameter);
        return;
    }
    Tessera__Cluster__IoInput body = TESSERA__CLUSTER__IO_INPUT__INIT;
    body.input = (char *)input;
    body.parameter = (char *)(parameter ? parameter : "");
    body.activator_id = activator_id;
    body.caller_id = caller_id;
    Tessera__Cluster__CellMessage message = TESSERA__CLUSTER__CELL_MESSAGE__INIT;
    message.entity_id = entity_id;
    message.body_case = TESSERA__CLUSTER__CELL_MESSAGE__BODY_IO_INPUT;
    message.io_input = &body;
    /* A ghost here knows its real's cellapp; otherwise the directory does. */
    mailbox_send_cell(route->context.mailbox, &message, entity ? entity->owner_cellapp : 0,
                      clock_monotonic_us() / 1000);
}

/* A name look-up in flight: what to send, and to whom it went already. */
typedef struct io_route_lookup {
    io_route *route;
    char name[ENTITY_IO_NAME_MAX];
    uint64_t activator_id, caller_id;
    char *input, *parameter;
    uint64_t *delivered;
    size_t delivered_count;
} io_route_lookup;

static void io_route_lookup_free(io_route_lookup *lookup) {
    free(lookup->input);
    free(lookup->parameter);
    free(lookup->delivered);
    free(lookup);
}

static void io_route_on_lookup(redis_client *redis, redisReply *reply, void *user_data) {
    (void)redis;
    io_route_lookup *lookup = user_data;
    io_route *route = lookup->route;
    if (!reply || reply->type != REDIS_REPLY_ARRAY) {
        log_warn("entity I/O: the name directory did not answer for '%s': '%s' reached only this cellapp's",
                 lookup->name, lookup->input);
        io_route_lookup_free(lookup);
        return;
    }
    if (route->context.self->stopping) {
        io_route_lookup_free(lookup);
        return;
    }
    for (size_t i = 0; i < reply->elements; i++) {
        const redisReply *element = reply->element[i];
        if (element->type != REDIS_REPLY_STRING) continue;
        uint64_t id = strtoull(element->str, NULL, 10);
        bool done = id == 0;
        for (size_t k = 0; k < lookup->delivered_count && !done; k++) done = lookup->delivered[k] == id;
        if (!done)
            io_route_to_entity(route, id, lookup->activator_id, lookup->caller_id, lookup->input, lookup->parameter);
    }
    io_route_lookup_free(lookup);
}

void io_route_to_name(io_route *route, const char *name, const uint64_t *delivered, size_t delivered_count,
                      uint64_t activator_id, uint64_t caller_id, const char *input, const char *parameter) {
    if (!route->context.redis || !route->context.peers ||
        peer_set_count_up(route->context.peers, PEER_ROLE_CELLAPP) == 0)
        return;
    io_route_lookup *lookup = xcalloc(1, sizeof *lookup);
    lookup->route = route;
    snprintf(lookup->name, sizeof lookup->name, "%s", name);
    lookup->activator_id = activator_id;
    lookup->caller_id = caller_id;
    lookup->input = xstrdup(input);
    lookup->parameter = xstrdup(parameter ? parameter : "");
    if (delivered_count) {
        lookup->delivered = xmalloc(delivered_count * sizeof *lookup->delivered);
        memcpy(lookup->delivered, delivered, delivered_count * sizeof *lookup->delivered);
        lookup->delivered_count = delivered_count;
    }
    char key[REDIS_KEY_MAX];
    redis_key_entity_name(key, route->context.cluster_name, name);
    if (redis_client_command(route->context.redis, io_route_on_lookup, lookup, "SMEMBERS %s", key) != 0) {
        log_warn("entity I/O: Redis is not connected: '%s' for '%s' reached only this cellapp's", input, name);
        io_route_lookup_free(lookup);
    }
}

void io_route_on_message(io_route *route, cell_entity *target, const Tessera__Cluster__IoInput *input) {
    if (!input->input || !input->input[0]) return;
    route->context.hooks->io_input(route->context.hooks->host, target, input->activator_id, input->caller_id,
                                   input->input, input->parameter ? input->parameter : "");
}
