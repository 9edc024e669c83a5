/* coord.c -- the coordinate system's axes: sorted node arrays, moving
 * nodes by swapping them past their neighbours, turning each crossing of an
 * entity and a trigger boundary into a membership flip, and putting
 * entities and triggers in and out (in batches, so that a thousand
 * additions cost one merge). Watchers' pair tables and the flush live in
 * coord_watcher.c; queries in coord_query.c. The contract is coord.h.
 *
 * A node is one uint64 in an axis array:
 *
 *    63            32 31  30 29                   0
 *   +----------------+------+----------------------+
 *   | coordinate     | kind | index                |
 *   +----------------+------+----------------------+
 *
 * The coordinate is the float's bits mapped so that unsigned order is
 * numeric order; kind is 0 lower boundary, 1 entity, 2 upper boundary;
 * index is the entity id or the trigger id. Comparing two nodes is
 * comparing two integers, and that single comparison is the total order
 * (coordinate, kind, index) the tie rules need. Arrays are plain sorted
 * uint64 arrays: moving a node is an insertion-sort step over contiguous
 * memory, far kinder to the cache than linked nodes.
 *
 * A node's position is found from a hint (where it was after its own last
 * move) by exponential search: other nodes passing it shift it only a few
 * places per tick, so this costs a handful of nearby probes and the swaps
 * themselves never write bookkeeping.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "coord_internal.h"
#include "log.h"

/* ---- keys ----------------------------------------------------------------- */

static inline uint32_t coord_sortable(float value) {
    uint32_t bits;
    value += 0.0f; /* -0 becomes +0: one zero, one position */
    memcpy(&bits, &value, sizeof bits);
    return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}

uint64_t coord__key(float value, unsigned kind, uint32_t index) {
    return ((uint64_t)coord_sortable(value) << 32) | ((uint64_t)kind << 30) | (uint64_t)index;
}

/* ---- arrays and growth ---------------------------------------------------- */

static void coord_axis_reserve(coord_axis *axis, size_t wanted) {
    if (axis->capacity >= wanted) return;
    size_t capacity = axis->capacity ? axis->capacity : 256;
    while (capacity < wanted) capacity *= 2;
    axis->keys = xrealloc(axis->keys, capacity * sizeof *axis->keys);
    axis->capacity = capacity;
}

static void coord_reserve_entities(coord_system *cs, uint32_t wanted) {
    if (cs->entity_capacity >= wanted) return;
    uint32_t capacity = cs->entity_capacity ? cs->entity_capacity : 256;
    while (capacity < wanted) capacity *= 2;
    cs->entities = xrealloc(cs->entities, capacity * sizeof *cs->entities);
    for (int a = 0; a < COORD_MAX_AXES; a++) {
        cs->entity_coord[a] = xrealloc(cs->entity_coord[a], capacity * sizeof(float));
        cs->entity_hint[a] = xrealloc(cs->entity_hint[a], capacity * sizeof(uint32_t));
    }
    cs->entity_capacity = capacity;
}

void coord__reserve_watchers(coord_system *cs, uint32_t wanted) {
    if (cs->watcher_capacity >= wanted) return;
    uint32_t capacity = cs->watcher_capacity ? cs->watcher_capacity : 64;
    while (capacity < wanted) capacity *= 2;
    cs->watchers = xrealloc(cs->watchers, capacity * sizeof *cs->watchers);
    size_t triggers = (size_t)capacity * 2;
    for (int a = 0; a < COORD_MAX_AXES; a++) {
        cs->trigger_low[a] = xrealloc(cs->trigger_low[a], triggers * sizeof(float));
        cs->trigger_high[a] = xrealloc(cs->trigger_high[a], triggers * sizeof(float));
        cs->trigger_hint[a] = xrealloc(cs->trigger_hint[a], triggers * 2 * sizeof(uint32_t));
    }
    cs->trigger_flags = xrealloc(cs->trigger_flags, triggers);
    memset(cs->trigger_flags + (size_t)cs->watcher_capacity * 2, 0, triggers - (size_t)cs->watcher_capacity * 2);
    cs->watcher_capacity = capacity;
}

coord_system *coord_create(bool three_d) {
    coord_system *cs = xcalloc(1, sizeof *cs);
    cs->axis_count = three_d ? 3 : 2;
    cs->free_entities_head = COORD_NONE;
    cs->free_watchers_head = COORD_NONE;
    return cs;
}

void coord_free(coord_system *cs) {
    if (!cs) return;
    for (uint32_t w = 0; w < cs->watcher_count; w++) coord__watcher_release(cs, w);
    for (int a = 0; a < COORD_MAX_AXES; a++) {
        free(cs->axes[a].keys);
        free(cs->entity_coord[a]);
        free(cs->entity_hint[a]);
        free(cs->trigger_low[a]);
        free(cs->trigger_high[a]);
        free(cs->trigger_hint[a]);
        free(cs->pending_keys[a]);
    }
    free(cs->entities);
    free(cs->watchers);
    free(cs->trigger_flags);
    free(cs->pending_entities);
    free(cs->pending_triggers);
    free(cs->dead_entities);
    free(cs->dead_watchers);
    free(cs->touched_watchers);
    free(cs->flush_watchers);
    free(cs->sweep_open);
    free(cs->sweep_open_position);
    free(cs);
}

/* ---- locating a node ------------------------------------------------------ */

/* Returns the position of `key` in axis `a`, searching outward from `hint`.
 * The key must be present: a missing key is a broken invariant. */
uint32_t coord__locate(const coord_system *cs, int a, uint64_t key, uint32_t hint) {
    const coord_axis *axis = &cs->axes[a];
    size_t n = axis->count;
    const uint64_t *keys = axis->keys;
    if (hint >= n) hint = (uint32_t)(n - 1);
    if (keys[hint] == key) return hint;
    size_t lo, hi; /* the key lies in keys[lo..hi] */
    if (keys[hint] < key) {
        size_t step = 1;
        lo = hint + 1;
        while (lo + step - 1 < n && keys[lo + step - 1] < key) {
            lo += step;
            step *= 2;
        }
        hi = lo + step - 1 < n ? lo + step - 1 : n - 1;
    } else {
        size_t step = 1;
        hi = hint - 1;
        while (hi >= step - 1 + 0 && hi + 1 >= step && keys[hi + 1 - step] > key) {
            hi -= step;
            step *= 2;
            if (hi + 1 < step) break;
        }
        lo = hi + 1 >= step ? hi + 1 - step : 0;
    }
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (keys[mid] < key) lo = mid + 1;
        else hi = mid;
    }
    if (lo >= n || keys[lo] != key) log_panic("coord: node %016llx missing from axis %d", (unsigned long long)key, a);
    return (uint32_t)lo;
}

/* First position whose key is >= key (binary search). */
size_t coord__lower_bound(const coord_system *cs, int a, uint64_t key) {
    const coord_axis *axis = &cs->axes[a];
    size_t lo = 0, hi = axis->count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (axis->keys[mid] < key) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* ---- crossings ------------------------------------------------------------ */

/* Whether entity e lies within trigger t on every axis but `skip`. */
static inline bool coord_overlaps_except(const coord_system *cs, uint32_t t, uint32_t e, int skip) {
    for (int b = 0; b < cs->axis_count; b++) {
        if (b == skip) continue;
        float c = cs->entity_coord[b][e];
        if (c < cs->trigger_low[b][t] || c > cs->trigger_high[b][t]) return false;
    }
    return true;
}

/* An entity node and a boundary node of trigger t swapped on axis a: the
 * pair's overlap on this axis has just changed (begun or ended, depending
 * on the side and the boundary's kind). If the pair overlaps on every
 * other axis, its membership therefore changes too, and the bit flips; if
 * not, it was outside and stays outside. A flip is exact because every
 * other axis is consistently sorted at this moment and the bit was right
 * before the swap -- the invariant every move preserves. */
static inline void coord_cross(coord_system *cs, int a, uint64_t entity_key, uint64_t boundary_key) {
    uint32_t e = (uint32_t)(entity_key & COORD_INDEX_MASK);
    uint32_t t = (uint32_t)(boundary_key & COORD_INDEX_MASK);
    cs->stats.crossings++;
    if (cs->watchers[t >> 1].owner == e) return;
    if (!coord_overlaps_except(cs, t, e, a)) return;
    coord__flip(cs, t, e);
}

#define COORD_KIND_OF(key) ((unsigned)((key) >> 30) & 3u)

/* Moves the node at position `from` of axis a to its place for `new_key`,
 * flipping memberships at each entity/boundary crossing. Returns the final
 * position. */
static uint32_t coord_slide(coord_system *cs, int a, uint32_t from, uint64_t new_key) {
    coord_axis *axis = &cs->axes[a];
    uint64_t *keys = axis->keys;
    size_t n = axis->count;
    size_t p = from;
    bool moving_entity = COORD_KIND_OF(new_key) == COORD_KIND_ENTITY;
    uint64_t swaps = 0;
    if (p + 1 < n && keys[p + 1] < new_key) {
        while (p + 1 < n && keys[p + 1] < new_key) {
            uint64_t neighbour = keys[p + 1];
            keys[p] = neighbour;
            p++;
            swaps++;
            bool neighbour_entity = COORD_KIND_OF(neighbour) == COORD_KIND_ENTITY;
            if (moving_entity != neighbour_entity) {
                /* Moving up: the mover ends after the neighbour. */
                if (moving_entity) coord_cross(cs, a, new_key, neighbour);
                else coord_cross(cs, a, neighbour, new_key);
            }
        }
    } else {
        while (p > 0 && keys[p - 1] > new_key) {
            uint64_t neighbour = keys[p - 1];
            keys[p] = neighbour;
            p--;
            swaps++;
            bool neighbour_entity = COORD_KIND_OF(neighbour) == COORD_KIND_ENTITY;
            if (moving_entity != neighbour_entity) {
                if (moving_entity) coord_cross(cs, a, new_key, neighbour);
                else coord_cross(cs, a, neighbour, new_key);
            }
        }
    }
    keys[p] = new_key;
    cs->stats.swaps += swaps;
    return (uint32_t)p;
}

/* ---- moving entities and triggers ------------------------------------------ */

static void coord_move_entity_axis(coord_system *cs, uint32_t e, int a, float value) {
    float old = cs->entity_coord[a][e];
    if (old == value) return;
    uint64_t old_key = coord__key(old, COORD_KIND_ENTITY, e);
    uint32_t position = coord__locate(cs, a, old_key, cs->entity_hint[a][e]);
    uint64_t new_key = coord__key(value, COORD_KIND_ENTITY, e);
    cs->entity_hint[a][e] = coord_slide(cs, a, position, new_key);
    cs->entity_coord[a][e] = value;
}

static void coord_move_boundary(coord_system *cs, uint32_t t, int a, unsigned kind, float value) {
    float *bounds = kind == COORD_KIND_LOWER ? cs->trigger_low[a] : cs->trigger_high[a];
    float old = bounds[t];
    if (old == value) return;
    uint32_t *hint = &cs->trigger_hint[a][t * 2 + (kind == COORD_KIND_UPPER)];
    uint32_t position = coord__locate(cs, a, coord__key(old, kind, t), *hint);
    *hint = coord_slide(cs, a, position, coord__key(value, kind, t));
    bounds[t] = value;
}

/* Moves trigger t's boundaries on every axis to [centre - extent, centre +
 * extent]. On each axis the boundary moving outward-first goes first (the
 * upper when moving up, the lower when moving down), so the interval never
 * turns inside out mid-move. */
void coord__place_trigger(coord_system *cs, uint32_t t, const float *centre, float extent) {
    for (int a = 0; a < cs->axis_count; a++) {
        float low = centre[a] - extent, high = centre[a] + extent;
        if (high > cs->trigger_high[a][t] || low > cs->trigger_low[a][t]) {
            if (high >= cs->trigger_high[a][t]) {
                coord_move_boundary(cs, t, a, COORD_KIND_UPPER, high);
                coord_move_boundary(cs, t, a, COORD_KIND_LOWER, low);
            } else {
                coord_move_boundary(cs, t, a, COORD_KIND_LOWER, low);
                coord_move_boundary(cs, t, a, COORD_KIND_UPPER, high);
            }
        } else {
            coord_move_boundary(cs, t, a, COORD_KIND_LOWER, low);
            coord_move_boundary(cs, t, a, COORD_KIND_UPPER, high);
        }
        float span = high - low;
        if (span > cs->max_trigger_span[a]) cs->max_trigger_span[a] = span;
    }
}

static bool coord_finite(float x, float y, float z) { return isfinite(x) && isfinite(y) && isfinite(z); }

static void coord_to_axes(const coord_system *cs, float x, float y, float z, float *out) {
    out[0] = x;
    out[1] = z;
    out[2] = cs->axis_count == 3 ? y : 0.0f;
}

int coord_move_entity(coord_system *cs, uint32_t entity, float x, float y, float z) {
    if (entity >= cs->entity_count || !cs->entities[entity].live || !coord_finite(x, y, z)) return -1;
    coord__apply_pending(cs);
    float position[3];
    coord_to_axes(cs, x, y, z, position);
    cs->entities[entity].y = y;
    for (int a = 0; a < cs->axis_count; a++) coord_move_entity_axis(cs, entity, a, position[a]);
    for (uint32_t w = cs->entities[entity].first_watcher; w != COORD_NONE; w = cs->watchers[w].next_owned)
        coord__place_watcher(cs, w);
    return 0;
}

int coord_entity_position(const coord_system *cs, uint32_t entity, float *x, float *y, float *z) {
    if (entity >= cs->entity_count || !cs->entities[entity].live) return -1;
    if (x) *x = cs->entity_coord[0][entity];
    if (z) *z = cs->entity_coord[1][entity];
    if (y) *y = cs->axis_count == 3 ? cs->entity_coord[2][entity] : cs->entities[entity].y;
    return 0;
}

void *coord_entity_user_data(const coord_system *cs, uint32_t entity) {
    if (entity >= cs->entity_count || !cs->entities[entity].live) return NULL;
    return cs->entities[entity].user_data;
}

void coord_set_entity_filter(coord_system *cs, uint32_t entity, uint32_t type, uint32_t flags) {
    if (entity >= cs->entity_count || !cs->entities[entity].live) return;
    cs->entities[entity].type = type;
    cs->entities[entity].flags = flags;
}

size_t coord_entity_count(const coord_system *cs) { return cs->live_entities; }

/* ---- adding: batched ------------------------------------------------------ */

uint32_t coord_add_entity(coord_system *cs, float x, float y, float z, uint32_t type, uint32_t flags,
                          void *user_data) {
    if (!coord_finite(x, y, z)) return COORD_NONE;
    uint32_t e;
    if (cs->free_entities_head != COORD_NONE) {
        e = cs->free_entities_head;
        cs->free_entities_head = cs->entities[e].next_free;
    } else {
        if (cs->entity_count >= COORD_INDEX_MASK) return COORD_NONE;
        coord_reserve_entities(cs, cs->entity_count + 1);
        e = cs->entity_count++;
    }
    coord_entity_record *record = &cs->entities[e];
    memset(record, 0, sizeof *record);
    record->live = 1;
    record->pending = 1;
    record->type = type;
    record->flags = flags;
    record->user_data = user_data;
    record->y = y;
    record->first_watcher = COORD_NONE;
    float position[3];
    coord_to_axes(cs, x, y, z, position);
    for (int a = 0; a < COORD_MAX_AXES; a++) {
        cs->entity_coord[a][e] = position[a];
        cs->entity_hint[a][e] = 0;
    }
    if (cs->pending_entity_count == cs->pending_entity_capacity) {
        cs->pending_entity_capacity = cs->pending_entity_capacity ? cs->pending_entity_capacity * 2 : 64;
        cs->pending_entities =
            xrealloc(cs->pending_entities, cs->pending_entity_capacity * sizeof *cs->pending_entities);
    }
    cs->pending_entities[cs->pending_entity_count++] = e;
    cs->live_entities++;
    return e;
}

/* Queues trigger t (its bounds already set) for the next batch. */
void coord__queue_trigger(coord_system *cs, uint32_t t) {
    cs->trigger_flags[t] |= COORD_TRIGGER_PENDING | COORD_TRIGGER_ACTIVE;
    if (cs->pending_trigger_count == cs->pending_trigger_capacity) {
        cs->pending_trigger_capacity = cs->pending_trigger_capacity ? cs->pending_trigger_capacity * 2 : 64;
        cs->pending_triggers =
            xrealloc(cs->pending_triggers, cs->pending_trigger_capacity * sizeof *cs->pending_triggers);
    }
    cs->pending_triggers[cs->pending_trigger_count++] = t;
    for (int a = 0; a < cs->axis_count; a++) {
        float span = cs->trigger_high[a][t] - cs->trigger_low[a][t];
        if (span > cs->max_trigger_span[a]) cs->max_trigger_span[a] = span;
    }
}

static int coord_compare_keys(const void *left, const void *right) {
    uint64_t a = *(const uint64_t *)left, b = *(const uint64_t *)right;
    return a < b ? -1 : a > b;
}

/* Merges the sorted `incoming` keys into axis a in one backward pass. */
static void coord_merge(coord_system *cs, int a, uint64_t *incoming, size_t count) {
    coord_axis *axis = &cs->axes[a];
    coord_axis_reserve(axis, axis->count + count);
    uint64_t *keys = axis->keys;
    size_t i = axis->count, j = count, k = axis->count + count;
    while (j > 0) {
        if (i > 0 && keys[i - 1] > incoming[j - 1]) keys[--k] = keys[--i];
        else keys[--k] = incoming[--j];
    }
    axis->count += count;
}

/* Sweeps axis X once to find the pairs the batch creates: every new entity
 * against every trigger whose X interval is open at its node, and every old
 * entity against the new triggers open there. The open sets are kept as
 * dense arrays (swap-remove), so the inner loop is a scan of floats. */
static void coord_sweep_new_pairs(coord_system *cs) {
    size_t triggers = (size_t)cs->watcher_count * 2;
    if (cs->sweep_capacity < triggers) {
        cs->sweep_capacity = triggers;
        cs->sweep_open = xrealloc(cs->sweep_open, 2 * triggers * sizeof *cs->sweep_open);
        cs->sweep_open_position = xrealloc(cs->sweep_open_position, triggers * sizeof *cs->sweep_open_position);
    }
    uint32_t *open_all = cs->sweep_open;          /* every open trigger */
    uint32_t *open_new = cs->sweep_open + triggers; /* open triggers of this batch */
    size_t all_count = 0, new_count = 0;
    const coord_axis *axis = &cs->axes[0];
    for (size_t i = 0; i < axis->count; i++) {
        uint64_t key = axis->keys[i];
        uint32_t index = (uint32_t)(key & COORD_INDEX_MASK);
        unsigned kind = COORD_KIND_OF(key);
        if (kind == COORD_KIND_LOWER) {
            bool fresh = cs->trigger_flags[index] & COORD_TRIGGER_PENDING;
            cs->sweep_open_position[index] = (uint32_t)all_count;
            open_all[all_count++] = index;
            if (fresh) open_new[new_count++] = index;
        } else if (kind == COORD_KIND_UPPER) {
            uint32_t where = cs->sweep_open_position[index];
            uint32_t last = open_all[--all_count];
            open_all[where] = last;
            cs->sweep_open_position[last] = where;
            if (cs->trigger_flags[index] & COORD_TRIGGER_PENDING) {
                for (size_t k = 0; k < new_count; k++) {
                    if (open_new[k] == index) {
                        open_new[k] = open_new[--new_count];
                        break;
                    }
                }
            }
        } else {
            bool fresh = cs->entities[index].pending;
            const uint32_t *candidates = fresh ? open_all : open_new;
            size_t candidate_count = fresh ? all_count : new_count;
            for (size_t k = 0; k < candidate_count; k++) {
                uint32_t t = candidates[k];
                if (cs->watchers[t >> 1].owner == index) continue;
                if (coord_overlaps_except(cs, t, index, 0)) coord__flip(cs, t, index);
            }
        }
    }
}

/* Puts every queued entity and trigger into the axes: sorts the new nodes,
 * merges them in, and sweeps once for the pairs they form. Called before
 * anything that reads the axes. */
void coord__apply_pending(coord_system *cs) {
    size_t entity_count = cs->pending_entity_count, trigger_count = cs->pending_trigger_count;
    if (entity_count == 0 && trigger_count == 0) return;
    size_t nodes = entity_count + 2 * trigger_count;
    for (int a = 0; a < cs->axis_count; a++) {
        if (cs->pending_key_capacity[a] < nodes) {
            cs->pending_key_capacity[a] = nodes;
            cs->pending_keys[a] = xrealloc(cs->pending_keys[a], nodes * sizeof(uint64_t));
        }
        uint64_t *incoming = cs->pending_keys[a];
        size_t n = 0;
        for (size_t i = 0; i < entity_count; i++) {
            uint32_t e = cs->pending_entities[i];
            if (!cs->entities[e].live) continue;
            incoming[n++] = coord__key(cs->entity_coord[a][e], COORD_KIND_ENTITY, e);
        }
        for (size_t i = 0; i < trigger_count; i++) {
            uint32_t t = cs->pending_triggers[i];
            if (!(cs->trigger_flags[t] & COORD_TRIGGER_PENDING)) continue;
            incoming[n++] = coord__key(cs->trigger_low[a][t], COORD_KIND_LOWER, t);
            incoming[n++] = coord__key(cs->trigger_high[a][t], COORD_KIND_UPPER, t);
        }
        qsort(incoming, n, sizeof *incoming, coord_compare_keys);
        coord_merge(cs, a, incoming, n);
    }
    coord_sweep_new_pairs(cs);
    for (size_t i = 0; i < entity_count; i++) cs->entities[cs->pending_entities[i]].pending = 0;
    for (size_t i = 0; i < trigger_count; i++) cs->trigger_flags[cs->pending_triggers[i]] &= ~COORD_TRIGGER_PENDING;
    cs->pending_entity_count = 0;
    cs->pending_trigger_count = 0;
}

/* ---- removing ------------------------------------------------------------- */

static void coord_delete_node(coord_system *cs, int a, uint64_t key, uint32_t hint) {
    coord_axis *axis = &cs->axes[a];
    uint32_t position = coord__locate(cs, a, key, hint);
    memmove(axis->keys + position, axis->keys + position + 1, (axis->count - position - 1) * sizeof *axis->keys);
    axis->count--;
}

/* Removes trigger t's nodes from the axes (no membership changes). */
void coord__delete_trigger_nodes(coord_system *cs, uint32_t t) {
    uint8_t flags = cs->trigger_flags[t];
    if (!(flags & COORD_TRIGGER_ACTIVE)) return;
    cs->trigger_flags[t] = 0;
    if (flags & COORD_TRIGGER_PENDING) return; /* never made it into the axes; apply skips it */
    for (int a = 0; a < cs->axis_count; a++) {
        coord_delete_node(cs, a, coord__key(cs->trigger_low[a][t], COORD_KIND_LOWER, t),
                          cs->trigger_hint[a][t * 2]);
        coord_delete_node(cs, a, coord__key(cs->trigger_high[a][t], COORD_KIND_UPPER, t),
                          cs->trigger_hint[a][t * 2 + 1]);
    }
}

/* Clears entity e's membership in every trigger that contains it: walks X
 * leftwards from e over the nodes a containing trigger's lower bound could
 * be among (no trigger is wider than max_trigger_span). */
static void coord_leave_all_triggers(coord_system *cs, uint32_t e, uint32_t position) {
    const coord_axis *axis = &cs->axes[0];
    float x = cs->entity_coord[0][e];
    /* Nodes sorting before this key lie further left than any trigger that
     * could contain e can start. */
    uint64_t reach = coord__key(x - cs->max_trigger_span[0], COORD_KIND_LOWER, 0);
    for (size_t i = position; i-- > 0;) {
        uint64_t key = axis->keys[i];
        if (key < reach) break;
        if (COORD_KIND_OF(key) != COORD_KIND_LOWER) continue;
        uint32_t t = (uint32_t)(key & COORD_INDEX_MASK);
        if (cs->watchers[t >> 1].owner == e) continue;
        if (cs->trigger_high[0][t] >= x && coord_overlaps_except(cs, t, e, 0)) coord__flip(cs, t, e);
    }
}

int coord_remove_entity(coord_system *cs, uint32_t entity) {
    if (entity >= cs->entity_count || !cs->entities[entity].live) return -1;
    coord_entity_record *record = &cs->entities[entity];
    /* Its own watchers go first, silently. */
    while (record->first_watcher != COORD_NONE) coord_remove_watcher(cs, record->first_watcher);
    if (record->pending) {
        /* Never entered the axes: nobody has seen it. */
        record->live = 0;
    } else {
        coord__apply_pending(cs);
        uint64_t key = coord__key(cs->entity_coord[0][entity], COORD_KIND_ENTITY, entity);
        uint32_t position = coord__locate(cs, 0, key, cs->entity_hint[0][entity]);
        coord_leave_all_triggers(cs, entity, position);
        for (int a = 0; a < cs->axis_count; a++)
            coord_delete_node(cs, a, coord__key(cs->entity_coord[a][entity], COORD_KIND_ENTITY, entity),
                              cs->entity_hint[a][entity]);
        record->live = 0;
    }
    cs->live_entities--;
    /* The id is reused only after the next flush has reported the leaves. */
    if (cs->dead_entity_count == cs->dead_entity_capacity) {
        cs->dead_entity_capacity = cs->dead_entity_capacity ? cs->dead_entity_capacity * 2 : 64;
        cs->dead_entities = xrealloc(cs->dead_entities, cs->dead_entity_capacity * sizeof *cs->dead_entities);
    }
    cs->dead_entities[cs->dead_entity_count++] = entity;
    return 0;
}

/* After a flush: dead ids become reusable. */
void coord__recycle_entities(coord_system *cs) {
    for (size_t i = 0; i < cs->dead_entity_count; i++) {
        uint32_t e = cs->dead_entities[i];
        cs->entities[e].next_free = cs->free_entities_head;
        cs->free_entities_head = e;
    }
    cs->dead_entity_count = 0;
}

void coord_get_stats(const coord_system *cs, coord_stats *out) {
    *out = cs->stats;
    size_t bytes = sizeof *cs;
    for (int a = 0; a < COORD_MAX_AXES; a++) bytes += cs->axes[a].capacity * sizeof(uint64_t);
    bytes += (size_t)cs->entity_capacity * (sizeof *cs->entities + COORD_MAX_AXES * (sizeof(float) + sizeof(uint32_t)));
    bytes += (size_t)cs->watcher_capacity *
             (sizeof *cs->watchers + 2 * (COORD_MAX_AXES * (2 * sizeof(float) + 2 * sizeof(uint32_t)) + 1));
    bytes += coord__watcher_table_bytes(cs);
    out->bytes = bytes;
}
