/* id_map.h -- a hash map from 64-bit ids to pointers.
 *
 * Open addressing with linear probing and backward-shift deletion (no
 * tombstones), so lookups stay short under churn. Keys are any uint64_t
 * except 0, which marks an empty bucket. The map does not own the values.
 */
#ifndef TESSERA_ID_MAP_H
#define TESSERA_ID_MAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct id_map {
    uint64_t *keys;
    void **values;
    size_t capacity; /* power of two, or 0 before the first insert */
    size_t count;
} id_map;

void id_map_init(id_map *map);
/* Frees the buckets (not the values). The map may be reused after init. */
void id_map_close(id_map *map);

/* Inserts or replaces. Returns 0, or -1 for key 0 / out of memory. */
int id_map_put(id_map *map, uint64_t key, void *value);
/* Returns the value or NULL. */
void *id_map_get(const id_map *map, uint64_t key);
/* Removes the key and returns its value, or NULL if absent. */
void *id_map_remove(id_map *map, uint64_t key);
size_t id_map_count(const id_map *map);

/* Iteration: *cursor = 0 to start; returns 1 and fills key/value for each
 * entry, 0 at the end. The map must not change during iteration. */
int id_map_next(const id_map *map, size_t *cursor, uint64_t *key, void **value);

#endif
