/* id_map.c -- a hash map from 64-bit ids to pointers: the buckets, the hash,
 * probing, growth and backward-shift deletion.
 *
 * It owns the bucket arrays only, never the values. Keys are spread with the
 * splitmix64 finalizer (ids are often sequential, which a plain mask would
 * cluster), then probed linearly. Deletion shifts later entries of the same
 * run back instead of leaving tombstones, so a long-lived map under churn
 * keeps probe runs as short as a fresh one.
 */
#include "id_map.h"

#include <stdlib.h>

/* First bucket count: a power of two (the index is hash & (capacity - 1)). */
#define ID_MAP__INITIAL_CAPACITY 16u

/* Grow when count would exceed 7/10 of capacity: linear probing degrades
 * quickly past ~70-75% load, and 70% keeps the expected probe length of a
 * miss under about six buckets. */
#define ID_MAP__LOAD_NUM 7u
#define ID_MAP__LOAD_DEN 10u

/* splitmix64's finalizer: every input bit affects every output bit, so
 * sequential or strided ids land in unrelated buckets. */
static uint64_t id_map__hash(uint64_t key) {
    key ^= key >> 30;
    key *= UINT64_C(0xbf58476d1ce4e5b9);
    key ^= key >> 27;
    key *= UINT64_C(0x94d049bb133111eb);
    key ^= key >> 31;
    return key;
}

/* Returns the bucket holding `key`, or the empty bucket where it would go.
 * The map must have capacity > count, so an empty bucket always exists. */
static size_t id_map__find(const id_map *map, uint64_t key) {
    size_t mask = map->capacity - 1;
    size_t i = (size_t)id_map__hash(key) & mask;
    while (map->keys[i] != 0 && map->keys[i] != key) i = (i + 1) & mask;
    return i;
}

void id_map_init(id_map *map) {
    map->keys = NULL;
    map->values = NULL;
    map->capacity = 0;
    map->count = 0;
}

void id_map_close(id_map *map) {
    free(map->keys);
    free(map->values);
    id_map_init(map);
}

/* Rehashes every entry into `capacity` buckets. Returns 0, or -1 out of
 * memory (the map is then unchanged). */
static int id_map__resize(id_map *map, size_t capacity) {
    uint64_t *keys = calloc(capacity, sizeof(*keys));
    void **values = calloc(capacity, sizeof(*values));
    if (keys == NULL || values == NULL) {
        free(keys);
        free(values);
        return -1;
    }
    id_map old = *map;
    map->keys = keys;
    map->values = values;
    map->capacity = capacity;
    for (size_t i = 0; i < old.capacity; i++) {
        if (old.keys[i] == 0) continue;
        size_t j = id_map__find(map, old.keys[i]);
        map->keys[j] = old.keys[i];
        map->values[j] = old.values[i];
    }
    free(old.keys);
    free(old.values);
    return 0;
}

int id_map_put(id_map *map, uint64_t key, void *value) {
    if (key == 0) return -1;
    if (map->capacity != 0) {
        size_t i = id_map__find(map, key);
        if (map->keys[i] == key) {
            map->values[i] = value;
            return 0;
        }
    }
    if ((map->count + 1) * ID_MAP__LOAD_DEN > map->capacity * ID_MAP__LOAD_NUM) {
        size_t capacity = map->capacity == 0 ? ID_MAP__INITIAL_CAPACITY : map->capacity * 2;
        if (capacity < map->capacity || capacity > SIZE_MAX / sizeof(uint64_t)) return -1;
        if (id_map__resize(map, capacity) != 0) return -1;
    }
    size_t i = id_map__find(map, key);
    map->keys[i] = key;
    map->values[i] = value;
    map->count++;
    return 0;
}

void *id_map_get(const id_map *map, uint64_t key) {
    if (key == 0 || map->capacity == 0) return NULL;
    size_t i = id_map__find(map, key);
    return map->keys[i] == key ? map->values[i] : NULL;
}

/* Backward-shift deletion: after emptying bucket `hole`, walk the rest of
 * the probe run; an entry whose home bucket is not cyclically within
 * (hole, j] would become unreachable past the hole, so it moves into the
 * hole and its old bucket becomes the new hole. The run ends at the first
 * empty bucket. */
void *id_map_remove(id_map *map, uint64_t key) {
    if (key == 0 || map->capacity == 0) return NULL;
    size_t hole = id_map__find(map, key);
    if (map->keys[hole] != key) return NULL;
    void *value = map->values[hole];
    size_t mask = map->capacity - 1;
    for (size_t j = (hole + 1) & mask; map->keys[j] != 0; j = (j + 1) & mask) {
        size_t home = (size_t)id_map__hash(map->keys[j]) & mask;
        /* Distances measured forward from the hole: the entry may stay only
         * if its home lies after the hole and no later than j. */
        size_t dist_home = (home - hole) & mask;
        size_t dist_j = (j - hole) & mask;
        if (dist_home != 0 && dist_home <= dist_j) continue;
        map->keys[hole] = map->keys[j];
        map->values[hole] = map->values[j];
        hole = j;
    }
    map->keys[hole] = 0;
    map->values[hole] = NULL;
    map->count--;
    return value;
}

size_t id_map_count(const id_map *map) { return map->count; }

/* The cursor is the next bucket index to look at. */
int id_map_next(const id_map *map, size_t *cursor, uint64_t *key, void **value) {
    for (size_t i = *cursor; i < map->capacity; i++) {
        if (map->keys[i] == 0) continue;
        *cursor = i + 1;
        if (key != NULL) *key = map->keys[i];
        if (value != NULL) *value = map->values[i];
        return 1;
    }
    *cursor = map->capacity;
    return 0;
}
