/* alias_table.c -- hands out a client's entity aliases: lowest free first,
 * so aliases stay small and pack in few bits; a released alias waits out
 * its cooldown in a FIFO (released in time order, so the head is always
 * the first to cool) before it joins the free set, a min-heap. */
#include "alias_table.h"

#include <stdlib.h>
#include <string.h>

#include "id_map.h"
#include "log.h"

typedef struct alias_cooling {
    uint32_t alias;
    uint64_t free_at_ms;
} alias_cooling;

struct alias_table {
    uint32_t max_aliases;
    /* The arrays below hold `capacity` entries, grown up to max_aliases as
     * next_unused reaches it: aliases are handed out lowest first, and a
     * client usually sees a few dozen entities, not max_aliases. */
    uint32_t capacity;
    uint64_t cooldown_ms;
    uint64_t *entity_of;  /* alias -> entity id, 0 when free or cooling */
    uint32_t next_unused; /* aliases at or above this were never handed out */
    uint32_t *free_heap;  /* min-heap of cooled, free aliases */
    uint32_t free_count;
    alias_cooling *cooling; /* ring buffer, oldest first */
    uint32_t cooling_head, cooling_count;
    id_map alias_of; /* entity id -> alias + 1 */
    uint32_t in_use;
};

/* Why 64: about twice the entities a client of a uniform crowd sees. */
#define ALIAS_TABLE_FIRST_CAPACITY 64u

/* Makes room for aliases below `needed` (at most max_aliases). */
static void alias_table_reserve(alias_table *table, uint32_t needed) {
    if (needed <= table->capacity) return;
    uint32_t capacity = table->capacity;
    while (capacity < needed) capacity = capacity > table->max_aliases / 2 ? table->max_aliases : capacity * 2;
    table->entity_of = xrealloc(table->entity_of, capacity * sizeof *table->entity_of);
    memset(table->entity_of + table->capacity, 0, (capacity - table->capacity) * sizeof *table->entity_of);
    table->free_heap = xrealloc(table->free_heap, capacity * sizeof *table->free_heap);
    /* The cooling ring, unwrapped into the new array oldest first. */
    alias_cooling *cooling = xmalloc(capacity * sizeof *cooling);
    for (uint32_t i = 0; i < table->cooling_count; i++)
        cooling[i] = table->cooling[(table->cooling_head + i) % table->capacity];
    free(table->cooling);
    table->cooling = cooling;
    table->cooling_head = 0;
    table->capacity = capacity;
}

alias_table *alias_table_create(uint32_t max_aliases, uint64_t cooldown_ms) {
    if (max_aliases == 0 || max_aliases == ALIAS_NONE) return NULL;
    alias_table *table = xcalloc(1, sizeof *table);
    table->max_aliases = max_aliases;
    table->cooldown_ms = cooldown_ms;
    table->capacity = max_aliases < ALIAS_TABLE_FIRST_CAPACITY ? max_aliases : ALIAS_TABLE_FIRST_CAPACITY;
    table->entity_of = xcalloc(table->capacity, sizeof *table->entity_of);
    table->free_heap = xmalloc(table->capacity * sizeof *table->free_heap);
    table->cooling = xmalloc(table->capacity * sizeof *table->cooling);
    id_map_init(&table->alias_of);
    return table;
}

void alias_table_free(alias_table *table) {
    if (!table) return;
    free(table->entity_of);
    free(table->free_heap);
    free(table->cooling);
    id_map_close(&table->alias_of);
    free(table);
}

static void alias_heap_push(alias_table *table, uint32_t alias) {
    uint32_t i = table->free_count++;
    while (i > 0) {
        uint32_t parent = (i - 1) / 2;
        if (table->free_heap[parent] <= alias) break;
        table->free_heap[i] = table->free_heap[parent];
        i = parent;
    }
    table->free_heap[i] = alias;
}

static uint32_t alias_heap_pop(alias_table *table) {
    uint32_t top = table->free_heap[0];
    uint32_t last = table->free_heap[--table->free_count];
    uint32_t i = 0;
    for (;;) {
        uint32_t child = 2 * i + 1;
        if (child >= table->free_count) break;
        if (child + 1 < table->free_count && table->free_heap[child + 1] < table->free_heap[child]) child++;
        if (table->free_heap[child] >= last) break;
        table->free_heap[i] = table->free_heap[child];
        i = child;
    }
    if (table->free_count > 0) table->free_heap[i] = last;
    return top;
}

/* Moves every alias whose cooldown has passed into the free set. */
static void alias_table_cool(alias_table *table, uint64_t now_ms) {
    while (table->cooling_count > 0 && table->cooling[table->cooling_head].free_at_ms <= now_ms) {
        alias_heap_push(table, table->cooling[table->cooling_head].alias);
        table->cooling_head = (table->cooling_head + 1) % table->capacity;
        table->cooling_count--;
    }
}

uint32_t alias_table_find(const alias_table *table, uint64_t entity_id) {
    uintptr_t stored = (uintptr_t)id_map_get(&table->alias_of, entity_id);
    return stored ? (uint32_t)(stored - 1) : ALIAS_NONE;
}

uint32_t alias_table_assign(alias_table *table, uint64_t entity_id, uint64_t now_ms) {
    if (entity_id == 0) return ALIAS_NONE;
    uint32_t existing = alias_table_find(table, entity_id);
    if (existing != ALIAS_NONE) return existing;
    alias_table_cool(table, now_ms);
    uint32_t alias;
    /* Every cooled alias is below next_unused, so the heap comes first. */
    if (table->free_count > 0)
        alias = alias_heap_pop(table);
    else if (table->next_unused < table->max_aliases) {
        alias_table_reserve(table, table->next_unused + 1);
        alias = table->next_unused++;
    } else {
        return ALIAS_NONE;
    }
    table->entity_of[alias] = entity_id;
    id_map_put(&table->alias_of, entity_id, (void *)(uintptr_t)(alias + 1));
    table->in_use++;
    return alias;
}

uint32_t alias_table_release(alias_table *table, uint64_t entity_id, uint64_t now_ms) {
    uintptr_t stored = (uintptr_t)id_map_remove(&table->alias_of, entity_id);
    if (!stored) return ALIAS_NONE;
    uint32_t alias = (uint32_t)(stored - 1);
    table->entity_of[alias] = 0;
    uint32_t tail = (table->cooling_head + table->cooling_count) % table->capacity;
    table->cooling[tail].alias = alias;
    table->cooling[tail].free_at_ms = now_ms + table->cooldown_ms;
    table->cooling_count++;
    table->in_use--;
    return alias;
}

uint64_t alias_table_entity(const alias_table *table, uint32_t alias) {
    return alias < table->next_unused ? table->entity_of[alias] : 0;
}

uint32_t alias_table_in_use(const alias_table *table) { return table->in_use; }

uint32_t alias_table_next_unused(const alias_table *table) { return table->next_unused; }

uint32_t alias_table_cooling(const alias_table *table, uint64_t now_ms, alias_table_cooling_entry *out, uint32_t cap) {
    for (uint32_t i = 0; i < table->cooling_count && i < cap; i++) {
        const alias_cooling *c = &table->cooling[(table->cooling_head + i) % table->capacity];
        out[i].alias = c->alias;
        out[i].remaining_ms = c->free_at_ms > now_ms ? c->free_at_ms - now_ms : 0;
    }
    return table->cooling_count;
}

alias_table *alias_table_restore(uint32_t max_aliases, uint64_t cooldown_ms, uint32_t next_unused,
                                 const uint64_t *entity_of, const alias_table_cooling_entry *cooling,
                                 uint32_t cooling_count, uint64_t now_ms) {
    if (next_unused > max_aliases || cooling_count > next_unused) return NULL;
    alias_table *table = alias_table_create(max_aliases, cooldown_ms);
    if (!table) return NULL;
    alias_table_reserve(table, next_unused);
    table->next_unused = next_unused;
    /* 1: in use, 2: cooling; what is neither is free. */
    uint8_t *taken = xcalloc(next_unused ? next_unused : 1, 1);
    for (uint32_t alias = 0; alias < next_unused; alias++) {
        if (!entity_of[alias]) continue;
        if (alias_table_find(table, entity_of[alias]) != ALIAS_NONE) goto fail;
        table->entity_of[alias] = entity_of[alias];
        id_map_put(&table->alias_of, entity_of[alias], (void *)(uintptr_t)(alias + 1));
        table->in_use++;
        taken[alias] = 1;
    }
    uint64_t previous_free_at = 0;
    for (uint32_t i = 0; i < cooling_count; i++) {
        uint32_t alias = cooling[i].alias;
        if (alias >= next_unused || taken[alias]) goto fail;
        taken[alias] = 2;
        /* Oldest first: a later entry never frees sooner. */
        uint64_t free_at = now_ms + cooling[i].remaining_ms;
        if (free_at < previous_free_at) free_at = previous_free_at;
        previous_free_at = free_at;
        table->cooling[i] = (alias_cooling){alias, free_at};
    }
    table->cooling_head = 0;
    table->cooling_count = cooling_count;
    for (uint32_t alias = 0; alias < next_unused; alias++)
        if (!taken[alias]) alias_heap_push(table, alias);
    free(taken);
    return table;
fail:
    free(taken);
    alias_table_free(table);
    return NULL;
}
