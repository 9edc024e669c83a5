/* ghost_route.c -- where the reals that left this cellapp went, for
 * ghost_route_ms after they left: a message for one of them that arrives
 * here (sent before its sender learnt the new address) is forwarded there
 * rather than lost. While this cellapp holds a ghost of the entity the
 * ghost's owner says the same; the route covers the time after the ghost
 * is gone. Entries expire in the order they were made, so expiry walks a
 * FIFO and stops at the first live one. */
#include <stdlib.h>

#include "ghost_route.h"

#include "id_map.h"
#include "log.h"

typedef struct ghost_route_entry {
    uint64_t cellapp_id;
    uint64_t until_ms;
} ghost_route_entry;

/* FIFO of (entity, until) for expiry; a stale element (the entity's entry
 * was replaced or removed since) is skipped. */
typedef struct ghost_route_fifo_item {
    uint64_t entity_id;
    uint64_t until_ms;
} ghost_route_fifo_item;

struct ghost_route {
    id_map entries; /* entity id -> ghost_route_entry */
    ghost_route_fifo_item *fifo;
    size_t head, count, capacity; /* ring buffer */
};

ghost_route *ghost_route_create(void) {
    ghost_route *route = xcalloc(1, sizeof *route);
    id_map_init(&route->entries);
    return route;
}

void ghost_route_free(ghost_route *route) {
    if (!route) return;
    size_t cursor = 0;
    uint64_t id;
    void *value;
    while (id_map_next(&route->entries, &cursor, &id, &value)) free(value);
    id_map_close(&route->entries);
    free(route->fifo);
    free(route);
}

static void ghost_route_push(ghost_route *route, uint64_t entity_id, uint64_t until_ms) {
    if (route->count == route->capacity) {
        size_t capacity = route->capacity ? route->capacity * 2 : 64;
        ghost_route_fifo_item *fifo = xmalloc(capacity * sizeof *fifo);
        for (size_t i = 0; i < route->count; i++) fifo[i] = route->fifo[(route->head + i) % route->capacity];
        free(route->fifo);
        route->fifo = fifo;
        route->head = 0;
        route->capacity = capacity;
    }
    route->fifo[(route->head + route->count++) % route->capacity] = (ghost_route_fifo_item){entity_id, until_ms};
}

void ghost_route_add(ghost_route *route, uint64_t entity_id, uint64_t cellapp_id, uint64_t until_ms) {
    ghost_route_entry *entry = id_map_get(&route->entries, entity_id);
    if (!entry) {
        entry = xmalloc(sizeof *entry);
        id_map_put(&route->entries, entity_id, entry);
    }
    entry->cellapp_id = cellapp_id;
    entry->until_ms = until_ms;
    ghost_route_push(route, entity_id, until_ms);
}

uint64_t ghost_route_find(ghost_route *route, uint64_t entity_id, uint64_t now_ms) {
    ghost_route_entry *entry = id_map_get(&route->entries, entity_id);
    return entry && entry->until_ms > now_ms ? entry->cellapp_id : 0;
}

void ghost_route_remove(ghost_route *route, uint64_t entity_id) { free(id_map_remove(&route->entries, entity_id)); }

void ghost_route_expire(ghost_route *route, uint64_t now_ms) {
    while (route->count && route->fifo[route->head].until_ms <= now_ms) {
        ghost_route_fifo_item item = route->fifo[route->head];
        route->head = (route->head + 1) % route->capacity;
        route->count--;
        ghost_route_entry *entry = id_map_get(&route->entries, item.entity_id);
        /* Only the entry this item was made for: a later add renewed it. */
        if (entry && entry->until_ms == item.until_ms) free(id_map_remove(&route->entries, item.entity_id));
    }
}

size_t ghost_route_count(const ghost_route *route) { return id_map_count(&route->entries); }
