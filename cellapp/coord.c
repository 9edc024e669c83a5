/* coord.c -- the coordinate system's axes: sorted node arrays, moving
 * nodes by swapping them past their neighbours, turning each crossing of an
 * entity and a trigger boundary into a membership flip, and putting
 * entities and triggers in and out (in batches, so that a thousand
 * additions cost one merge), and the change between crossing mode and scan
 * mode, which takes the boundaries out of the axes or puts them back
 * (coord.h, "Modes"). Watchers' pair tables and the flush live in
 * coord_watcher.c; the scans, and their advice on the mode, in coord_scan.c;
 * queries in coord_query.c. The contract is coord.h.
 *
 A node's sort key is one uint64:
 *
 *    63            32 31  30 29                   0
 *   +----------------+------+----------------------+
 *   | coordinate     | kind | index                |
 *   +----------------+------+----------------------+
 *
 * The coordinate is the float's bits mapped so that unsigned order is
 * numeric order; kind is 0 lower boundary, 1 entity, 2 upper boundary;
 * index is the entity id or the trigger id. Comparing two keys is comparing
 * two integers, and that single comparison is the total order (coordinate,
 * kind, index) the tie rules need. Beside the key a node carries its range
 * on the partner axis (coord_internal.h), so deciding a crossing reads only
 * the two nodes. Axes are plain sorted arrays of 16-byte nodes: moving a
 * node is an insertion-sort step over contiguous memory, far kinder to the
 * cache than linked nodes. Crossings log flips; coord_watcher.c applies
 * them grouped by watcher.
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
    axis->nodes = xrealloc(axis->nodes, capacity * sizeof *axis->nodes);
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
        cs->entity_target[a] = xrealloc(cs->entity_target[a], capacity * sizeof(float));
        cs->entity_scanned[a] = xrealloc(cs->entity_scanned[a], capacity * sizeof(float));
    }
    cs->entity_moved_epoch = xrealloc(cs->entity_moved_epoch, capacity * sizeof *cs->entity_moved_epoch);
    cs->entity_first_watcher = xrealloc(cs->entity_first_watcher, capacity * sizeof *cs->entity_first_watcher);
    cs->entity_capacity = capacity;
}

void coord__reserve_watchers(coord_system *cs, uint32_t wanted) {
    if (cs->watcher_capacity >= wanted) return;
    uint32_t capacity = cs->watcher_capacity ? cs->watcher_capacity : 64;
    while (capacity < wanted) capacity *= 2;
    cs->watchers = xrealloc(cs->watchers, capacity * sizeof *cs->watchers);
    cs->watcher_links = xrealloc(cs->watcher_links, capacity * sizeof *cs->watcher_links);
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
        free(cs->axes[a].nodes);
        free(cs->entity_coord[a]);
        free(cs->entity_hint[a]);
        free(cs->entity_target[a]);
        free(cs->trigger_low[a]);
        free(cs->trigger_high[a]);
        free(cs->trigger_hint[a]);
        free(cs->pending_keys[a]);
    }
    free(cs->entities);
    free(cs->entity_first_watcher);
    free(cs->entity_moved_epoch);
    free(cs->watchers);
    free(cs->watcher_links);
    free(cs->trigger_flags);
    free(cs->pending_entities);
    free(cs->pending_triggers);
    free(cs->dead_entities);
    free(cs->dead_watchers);
    free(cs->touched_watchers);
    free(cs->flush_watchers);
    free(cs->sweep_open);
    free(cs->sweep_open_position);
    free(cs->flips);
    free(cs->flips_sorted);
    free(cs->dirty);
    free(cs->dirty_order);
    free(cs->flip_bucket);
    coord__scan_free(cs);
    free(cs);
}

/* The axis whose range a node on axis a carries. */
static inline int coord_partner(int a) { return a == 0 ? 1 : 0; }

/* ---- locating a node ------------------------------------------------------ */

/* Returns the position of `key` in axis `a`, searching outward from `hint`.
 * The key must be present: a missing key is a broken invariant. */
uint32_t coord__locate(const coord_system *cs, int a, uint64_t key, uint32_t hint) {
    const coord_axis *axis = &cs->axes[a];
    size_t n = axis->count;
    const coord_node *nodes = axis->nodes;
    if (n == 0) log_panic("coord: locating a node on empty axis %d", a);
    if (hint >= n) hint = (uint32_t)(n - 1);
    if (nodes[hint].key == key) return hint;
    size_t lo, hi; /* after the gallop, the key lies in nodes[lo..hi] */
    if (nodes[hint].key < key) {
        size_t step = 1, last = hint; /* nodes[last] < key */
        while (last + step < n && nodes[last + step].key < key) {
            last += step;
            step *= 2;
        }
        lo = last + 1;
        hi = last + step < n ? last + step : n - 1;
    } else {
        size_t step = 1, first = hint; /* nodes[first] > key */
        while (first >= step && nodes[first - step].key > key) {
            first -= step;
            step *= 2;
        }
        hi = first - 1;
        lo = first >= step ? first - step : 0;
    }
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (nodes[mid].key < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo >= n || nodes[lo].key != key)
        log_panic("coord: node %016llx missing from axis %d", (unsigned long long)key, a);
    return (uint32_t)lo;
}

/* First position whose key is >= key (binary search). */
size_t coord__lower_bound(const coord_system *cs, int a, uint64_t key) {
    const coord_axis *axis = &cs->axes[a];
    size_t lo = 0, hi = axis->count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (axis->nodes[mid].key < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* ---- crossings ------------------------------------------------------------ */

/* In a 3D system, the axis that is neither a nor its partner. */
static inline int coord_third_axis(int a) { return a == 2 ? 1 : 2; }

/* An entity node and a boundary node swapped on axis a: the pair's overlap
 * on this axis has just changed (begun or ended, depending on the side and
 * the boundary's kind). If the pair overlaps on every other axis, its
 * membership therefore changes too and is logged as a flip; if not, it was
 * outside and stays outside. A flip is exact because every other axis is
 * consistently sorted at this moment and the membership was right before
 * the swap -- the invariant every move preserves. The partner axis is read
 * from the nodes; a 3D system's third axis from the records. */
static inline void coord_cross(coord_system *cs, int a, const coord_node *entity, const coord_node *boundary) {
    if (entity->low < boundary->low || entity->low > boundary->high) return;
    uint32_t e = (uint32_t)(entity->key & COORD_INDEX_MASK);
    uint32_t t = (uint32_t)(boundary->key & COORD_INDEX_MASK);
    if (cs->axis_count == 3) {
        int b = coord_third_axis(a);
        float c = cs->entity_coord[b][e];
        if (c < cs->trigger_low[b][t] || c > cs->trigger_high[b][t]) return;
    }
    coord__log_flip(cs, t, e);
}

#define COORD_KIND_OF(key) ((unsigned)((key) >> 30) & 3u)

/* Flips held before they are applied mid-batch (8 bytes each). */
#define COORD_FLIP_LOG_CHUNK 262144

/* Moves the node at position `from` of axis a to its place for `moving`
 * (new key and partner range), logging a flip at each entity/boundary
 * crossing that changes a membership. Returns the final position.
 *
 * This loop is the AOI's hot path: millions of swaps a tick at 10,000
 * entities. In 2D it is branch-free per swap: every neighbour is written to
 * the flip log, and the log's end advances only when the neighbour is of
 * the other kind and overlaps on the partner axis. A 3D system also checks
 * the third axis and takes the plain path. */
static uint32_t coord_slide(coord_system *cs, int a, uint32_t from, coord_node moving) {
    coord_axis *axis = &cs->axes[a];
    coord_node *nodes = axis->nodes;
    size_t n = axis->count;
    size_t p = from;
    uint64_t key = moving.key;
    uint32_t moving_index = (uint32_t)(key & COORD_INDEX_MASK);
    bool moving_entity = COORD_KIND_OF(key) == COORD_KIND_ENTITY;
    bool up = p + 1 < n && nodes[p + 1].key < key;
    uint64_t crossings = 0;

    if (cs->axis_count == 3) {
        if (up) {
            while (p + 1 < n && nodes[p + 1].key < key) {
                coord_node neighbour = nodes[p + 1];
                nodes[p++] = neighbour;
                if (moving_entity != (COORD_KIND_OF(neighbour.key) == COORD_KIND_ENTITY)) {
                    crossings++;
                    if (moving_entity)
                        coord_cross(cs, a, &moving, &neighbour);
                    else
                        coord_cross(cs, a, &neighbour, &moving);
                }
            }
        } else {
            while (p > 0 && nodes[p - 1].key > key) {
                coord_node neighbour = nodes[p - 1];
                nodes[p--] = neighbour;
                if (moving_entity != (COORD_KIND_OF(neighbour.key) == COORD_KIND_ENTITY)) {
                    crossings++;
                    if (moving_entity)
                        coord_cross(cs, a, &moving, &neighbour);
                    else
                        coord_cross(cs, a, &neighbour, &moving);
                }
            }
        }
    } else {
        /* Every swap may log one flip: make room for the worst case once. */
        if (cs->flip_capacity - cs->flip_count < n) {
            while (cs->flip_capacity - cs->flip_count < n) coord__grow_flip_log(cs);
        }
        coord_flip *log = cs->flips;
        size_t logged = cs->flip_count;
        if (moving_entity) {
            /* The mover is an entity: flips with boundaries whose partner
             * range holds its partner coordinate. */
            float c = moving.low;
            if (up) {
                while (p + 1 < n && nodes[p + 1].key < key) {
                    coord_node neighbour = nodes[p + 1];
                    nodes[p++] = neighbour;
                    unsigned other = COORD_KIND_OF(neighbour.key) != COORD_KIND_ENTITY;
                    crossings += other;
                    log[logged].trigger = (uint32_t)(neighbour.key & COORD_INDEX_MASK);
                    log[logged].entity = moving_index;
                    logged += other & (c >= neighbour.low) & (c <= neighbour.high);
                }
            } else {
                while (p > 0 && nodes[p - 1].key > key) {
                    coord_node neighbour = nodes[p - 1];
                    nodes[p--] = neighbour;
                    unsigned other = COORD_KIND_OF(neighbour.key) != COORD_KIND_ENTITY;
                    crossings += other;
                    log[logged].trigger = (uint32_t)(neighbour.key & COORD_INDEX_MASK);
                    log[logged].entity = moving_index;
                    logged += other & (c >= neighbour.low) & (c <= neighbour.high);
                }
            }
        } else {
            /* The mover is a boundary: flips with entities whose partner
             * coordinate lies in its partner range. */
            float low = moving.low, high = moving.high;
            if (up) {
                while (p + 1 < n && nodes[p + 1].key < key) {
                    coord_node neighbour = nodes[p + 1];
                    nodes[p++] = neighbour;
                    unsigned other = COORD_KIND_OF(neighbour.key) == COORD_KIND_ENTITY;
                    crossings += other;
                    log[logged].trigger = moving_index;
                    log[logged].entity = (uint32_t)(neighbour.key & COORD_INDEX_MASK);
                    logged += other & (neighbour.low >= low) & (neighbour.low <= high);
                }
            } else {
                while (p > 0 && nodes[p - 1].key > key) {
                    coord_node neighbour = nodes[p - 1];
                    nodes[p--] = neighbour;
                    unsigned other = COORD_KIND_OF(neighbour.key) == COORD_KIND_ENTITY;
                    crossings += other;
                    log[logged].trigger = moving_index;
                    log[logged].entity = (uint32_t)(neighbour.key & COORD_INDEX_MASK);
                    logged += other & (neighbour.low >= low) & (neighbour.low <= high);
                }
            }
        }
        cs->flip_count = logged;
    }
    nodes[p] = moving;
    cs->stats.swaps += p > from ? p - from : from - p;
    cs->stats.crossings += crossings;
    /* A tick of moves can log hundreds of thousands of flips; applying them
     * in chunks keeps the log (and its sorted copy) small. Flips commute, so
     * when they are applied does not change the result. */
    if (cs->flip_count > COORD_FLIP_LOG_CHUNK) coord__apply_flips(cs);
    return (uint32_t)p;
}

/* ---- moving entities and triggers ------------------------------------------ */

static bool coord_finite(float x, float y, float z) { return isfinite(x) && isfinite(y) && isfinite(z); }

/* Axis order X, Z, Y. A 2D system has no Y axis, but keeps Y in the third
 * coordinate all the same: what coord_entity_position and the sphere tests
 * read (nothing else looks past axis_count). */
static void coord_to_axes(float x, float y, float z, float *out) {
    out[0] = x;
    out[1] = z;
    out[2] = y;
}

/* Moves one boundary of trigger t on axis a to `value`, carrying the
 * trigger's committed partner range. */
static void coord_move_boundary(coord_system *cs, uint32_t t, int a, unsigned kind, float value) {
    float *bounds = kind == COORD_KIND_LOWER ? cs->trigger_low[a] : cs->trigger_high[a];
    int partner = coord_partner(a);
    uint32_t *hint = &cs->trigger_hint[a][t * 2 + (kind == COORD_KIND_UPPER)];
    uint32_t position = coord__locate(cs, a, coord__key(bounds[t], kind, t), *hint);
    coord_node moving = {coord__key(value, kind, t), cs->trigger_low[partner][t], cs->trigger_high[partner][t]};
    if (bounds[t] != value)
        *hint = coord_slide(cs, a, position, moving);
    else
        cs->axes[a].nodes[position] = moving, *hint = position;
    bounds[t] = value;
}

/* Refreshes the partner range carried by trigger t's two nodes on axis a. */
static void coord_refresh_boundaries(coord_system *cs, uint32_t t, int a) {
    int partner = coord_partner(a);
    for (unsigned side = 0; side < 2; side++) {
        unsigned kind = side ? COORD_KIND_UPPER : COORD_KIND_LOWER;
        float value = side ? cs->trigger_high[a][t] : cs->trigger_low[a][t];
        uint32_t *hint = &cs->trigger_hint[a][t * 2 + side];
        uint32_t position = coord__locate(cs, a, coord__key(value, kind, t), *hint);
        cs->axes[a].nodes[position].low = cs->trigger_low[partner][t];
        cs->axes[a].nodes[position].high = cs->trigger_high[partner][t];
        *hint = position;
    }
}

/* Slides trigger t's two nodes on axis a to [low, high], the one on the
 * side of the motion first so the interval never turns inside out. */
static void coord_slide_trigger_axis(coord_system *cs, uint32_t t, int a, float low, float high) {
    if (low == cs->trigger_low[a][t] && high == cs->trigger_high[a][t]) return;
    if (high >= cs->trigger_high[a][t]) {
        coord_move_boundary(cs, t, a, COORD_KIND_UPPER, high);
        coord_move_boundary(cs, t, a, COORD_KIND_LOWER, low);
    } else {
        coord_move_boundary(cs, t, a, COORD_KIND_LOWER, low);
        coord_move_boundary(cs, t, a, COORD_KIND_UPPER, high);
    }
    float span = high - low;
    if (span > cs->max_trigger_span[a]) cs->max_trigger_span[a] = span;
}

/* Moves trigger t's boundaries on every axis to [centre - extent, centre +
 * extent]. On each axis the boundary on the side of the motion goes first
 * (the upper when moving up, the lower when moving down), so the interval
 * never turns inside out mid-move. */
void coord__place_trigger(coord_system *cs, uint32_t t, const float *centre, float extent) {
    /* Scan mode: the bounds stay the last scan's; the next scan moves them. */
    if (cs->scanning) return;
    bool x_changed = false, z_changed = false;
    for (int a = 0; a < cs->axis_count; a++) {
        float low = centre[a] - extent, high = centre[a] + extent;
        if (low == cs->trigger_low[a][t] && high == cs->trigger_high[a][t]) {
            /* Unmoved here, but the nodes carry the X range: refresh it. */
            if (a > 0 && x_changed) coord_refresh_boundaries(cs, t, a);
            continue;
        }
        coord_slide_trigger_axis(cs, t, a, low, high);
        if (a == 0) x_changed = true;
        if (a == 1) z_changed = true;
    }
    /* The X nodes carry the Z range, which has just changed. */
    if (z_changed) coord_refresh_boundaries(cs, t, 0);
}

/* Moves are deferred: the entity records where it is going and its nodes
 * follow at the next settle (a flush, a query, a structural change), all
 * moved entities together, one axis at a time. Several moves between two
 * settles cost one; the batch walks each axis while it is hot in the
 * cache; and each node's partner range is refreshed once per batch. */
int coord_move_entity(coord_system *cs, uint32_t entity, float x, float y, float z) {
    if (entity >= cs->entity_count || !cs->entities[entity].live || !coord_finite(x, y, z)) return -1;
    coord_entity_record *record = &cs->entities[entity];
    float position[COORD_MAX_AXES];
    coord_to_axes(x, y, z, position);
    if (record->pending) {
        /* Not in the axes yet: its nodes (and its watchers' queued
         * triggers) are made from these coordinates when it goes in. */
        for (int a = 0; a < COORD_MAX_AXES; a++) cs->entity_coord[a][entity] = position[a];
        for (uint32_t w = cs->entity_first_watcher[entity]; w != COORD_NONE; w = cs->watcher_links[w].next_owned)
            coord__place_watcher(cs, w);
        return 0;
    }
    for (int a = 0; a < COORD_MAX_AXES; a++) cs->entity_target[a][entity] = position[a];
    if (!record->dirty) {
        record->dirty = 1;
        if (cs->dirty_count == cs->dirty_capacity) {
            cs->dirty_capacity = cs->dirty_capacity ? cs->dirty_capacity * 2 : 256;
            cs->dirty = xrealloc(cs->dirty, cs->dirty_capacity * sizeof *cs->dirty);
            cs->dirty_order = xrealloc(cs->dirty_order, cs->dirty_capacity * sizeof *cs->dirty_order);
        }
        cs->dirty[cs->dirty_count++] = entity;
    }
    return 0;
}

/* Slides entity e's node on axis a to `value`, carrying its committed
 * partner coordinate. */
static void coord_slide_entity_axis(coord_system *cs, uint32_t e, int a, float value) {
    float old = cs->entity_coord[a][e];
    if (old == value) return;
    uint32_t position = coord__locate(cs, a, coord__key(old, COORD_KIND_ENTITY, e), cs->entity_hint[a][e]);
    float partner = cs->entity_coord[coord_partner(a)][e];
    coord_node moving = {coord__key(value, COORD_KIND_ENTITY, e), partner, partner};
    cs->entity_hint[a][e] = coord_slide(cs, a, position, moving);
    cs->entity_coord[a][e] = value;
}

/* Rewrites the partner range every node of axis a carries, from the
 * records: one linear pass after the partner axis has moved. */
static void coord_refresh_partner(coord_system *cs, int a) {
    int partner = coord_partner(a);
    coord_node *nodes = cs->axes[a].nodes;
    const float *coordinate = cs->entity_coord[partner];
    const float *low = cs->trigger_low[partner], *high = cs->trigger_high[partner];
    for (size_t i = 0, n = cs->axes[a].count; i < n; i++) {
        uint32_t index = (uint32_t)(nodes[i].key & COORD_INDEX_MASK);
        if (COORD_KIND_OF(nodes[i].key) == COORD_KIND_ENTITY) {
            nodes[i].low = nodes[i].high = coordinate[index];
        } else {
            nodes[i].low = low[index];
            nodes[i].high = high[index];
        }
    }
}

/* Lists the dirty entities in the order their nodes sit on axis a, so the
 * batch walks the axis from one end to the other. */
static size_t coord_dirty_in_axis_order(coord_system *cs, int a) {
    size_t count = 0;
    const coord_node *nodes = cs->axes[a].nodes;
    for (size_t i = 0, n = cs->axes[a].count; i < n && count < cs->dirty_count; i++) {
        if (COORD_KIND_OF(nodes[i].key) != COORD_KIND_ENTITY) continue;
        uint32_t e = (uint32_t)(nodes[i].key & COORD_INDEX_MASK);
        if (cs->entities[e].dirty) cs->dirty_order[count++] = e;
    }
    return count;
}

/* Applies every deferred move: all X slides (nodes carry the old, still
 * consistent Z), then the Z nodes learn the new X, then all Z slides (and
 * Y in 3D), then the X nodes learn the new Z. Each slide is still one node
 * passing its neighbours in a consistent picture, so every flip is exact. */
static void coord_apply_moves(coord_system *cs) {
    if (cs->dirty_count == 0) return;
    /* Sparse batches skip the ordering pass: it walks the whole axis. */
    bool ordered = cs->dirty_count * 8 >= cs->axes[0].count;
    for (int a = 0; a < cs->axis_count; a++) {
        size_t count = cs->dirty_count;
        const uint32_t *order = cs->dirty;
        if (ordered) {
            count = coord_dirty_in_axis_order(cs, a);
            order = cs->dirty_order;
        }
        for (size_t i = 0; i < count; i++) {
            uint32_t e = order[i];
            float value = cs->entity_target[a][e];
            coord_slide_entity_axis(cs, e, a, value);
            if (cs->scanning) continue; /* no boundaries in the axes */
            for (uint32_t w = cs->entity_first_watcher[e]; w != COORD_NONE; w = cs->watcher_links[w].next_owned) {
                if (cs->trigger_flags[(size_t)2 * w] & COORD_TRIGGER_PENDING) continue;
                float reach = cs->watcher_links[w].reach;
                coord_slide_trigger_axis(cs, 2 * w, a, value - reach, value + reach);
            }
        }
        if (a == 0) {
            for (int b = 1; b < cs->axis_count; b++) coord_refresh_partner(cs, b);
        }
    }
    coord_refresh_partner(cs, 0);
    cs->move_epoch++;
    for (size_t i = 0; i < cs->dirty_count; i++) {
        uint32_t e = cs->dirty[i];
        cs->entities[e].dirty = 0;
        /* A 2D system's Y, which no axis carries, is settled here. */
        if (cs->axis_count < 3) cs->entity_coord[2][e] = cs->entity_target[2][e];
        cs->entity_moved_epoch[e] = cs->move_epoch;
    }
    cs->dirty_count = 0;
    cs->geometry_changed = 1;
}

void coord__settle(coord_system *cs) {
    coord__apply_pending(cs);
    coord_apply_moves(cs);
}

int coord_entity_position(const coord_system *cs, uint32_t entity, float *x, float *y, float *z) {
    if (entity >= cs->entity_count || !cs->entities[entity].live) return -1;
    float *const *coordinates = cs->entities[entity].dirty ? cs->entity_target : cs->entity_coord;
    if (x) *x = coordinates[0][entity];
    if (z) *z = coordinates[1][entity];
    if (y) *y = coordinates[2][entity];
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

uint32_t coord_add_entity(coord_system *cs, float x, float y, float z, uint32_t type, uint32_t flags, void *user_data) {
    if (!coord_finite(x, y, z)) return COORD_NONE;
    uint32_t e;
    if (cs->free_entities_head != COORD_NONE) {
        e = cs->free_entities_head;
        cs->free_entities_head = cs->entities[e].next_free;
    } else {
        if (cs->entity_count >= COORD_MAX_ENTITIES) return COORD_NONE;
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
    cs->entity_first_watcher[e] = COORD_NONE;
    float position[3];
    coord_to_axes(x, y, z, position);
    for (int a = 0; a < COORD_MAX_AXES; a++) {
        cs->entity_coord[a][e] = position[a];
        cs->entity_hint[a][e] = 0;
        cs->entity_scanned[a][e] = NAN; /* no scan has seen it */
    }
    cs->entity_moved_epoch[e] = cs->move_epoch + 1; /* counts as moved at the next check */
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

static int coord_compare_nodes(const void *left, const void *right) {
    uint64_t a = ((const coord_node *)left)->key, b = ((const coord_node *)right)->key;
    return a < b ? -1 : a > b;
}

/* Merges the sorted `incoming` nodes into axis a in one backward pass. */
static void coord_merge(coord_system *cs, int a, const coord_node *incoming, size_t count) {
    coord_axis *axis = &cs->axes[a];
    coord_axis_reserve(axis, axis->count + count);
    coord_node *nodes = axis->nodes;
    size_t i = axis->count, j = count, k = axis->count + count;
    while (j > 0) {
        if (i > 0 && nodes[i - 1].key > incoming[j - 1].key)
            nodes[--k] = nodes[--i];
        else
            nodes[--k] = incoming[--j];
    }
    axis->count += count;
}

/* Whether entity e lies within trigger t on axis b (the records' view). */
static inline bool coord_inside_on(const coord_system *cs, uint32_t t, uint32_t e, int b) {
    float c = cs->entity_coord[b][e];
    return c >= cs->trigger_low[b][t] && c <= cs->trigger_high[b][t];
}

/* The triggers whose X interval is open at the sweep's position, with their
 * Z range inline so the inner loop reads one contiguous array. */
typedef struct coord_open_trigger {
    float low_z, high_z;
    uint32_t trigger;
} coord_open_trigger;

static void coord_open_add(coord_open_trigger *set, size_t *count, uint32_t *position, uint32_t t, float low,
                           float high) {
    position[t] = (uint32_t)*count;
    coord_open_trigger entry = {low, high, t};
    set[(*count)++] = entry;
}

static void coord_open_remove(coord_open_trigger *set, size_t *count, uint32_t *position, uint32_t t) {
    uint32_t where = position[t];
    coord_open_trigger last = set[--*count];
    set[where] = last;
    position[last.trigger] = where;
}

/* Sweeps axis X once to find the pairs the batch creates: every new entity
 * against every trigger whose X interval is open at its node, and every old
 * entity against the new triggers open there. */
static void coord_sweep_new_pairs(coord_system *cs) {
    size_t triggers = (size_t)cs->watcher_count * 2;
    if (cs->sweep_capacity < triggers) {
        cs->sweep_capacity = triggers;
        cs->sweep_open = xrealloc(cs->sweep_open, 2 * triggers * sizeof(coord_open_trigger));
        cs->sweep_open_position = xrealloc(cs->sweep_open_position, 2 * triggers * sizeof *cs->sweep_open_position);
    }
    coord_open_trigger *open_all = cs->sweep_open;      /* every open trigger */
    coord_open_trigger *open_new = open_all + triggers; /* open triggers of this batch */
    uint32_t *position_all = cs->sweep_open_position, *position_new = position_all + triggers;
    size_t all_count = 0, new_count = 0;
    const coord_axis *axis = &cs->axes[0];
    for (size_t i = 0; i < axis->count; i++) {
        const coord_node *node = &axis->nodes[i];
        uint32_t index = (uint32_t)(node->key & COORD_INDEX_MASK);
        unsigned kind = COORD_KIND_OF(node->key);
        if (kind == COORD_KIND_LOWER) {
            coord_open_add(open_all, &all_count, position_all, index, node->low, node->high);
            if (cs->trigger_flags[index] & COORD_TRIGGER_PENDING)
                coord_open_add(open_new, &new_count, position_new, index, node->low, node->high);
        } else if (kind == COORD_KIND_UPPER) {
            coord_open_remove(open_all, &all_count, position_all, index);
            if (cs->trigger_flags[index] & COORD_TRIGGER_PENDING)
                coord_open_remove(open_new, &new_count, position_new, index);
        } else {
            bool fresh = cs->entities[index].pending;
            const coord_open_trigger *candidates = fresh ? open_all : open_new;
            size_t candidate_count = fresh ? all_count : new_count;
            float z = node->low;
            for (size_t k = 0; k < candidate_count; k++) {
                if (z < candidates[k].low_z || z > candidates[k].high_z) continue;
                uint32_t t = candidates[k].trigger;
                if (cs->axis_count == 3 && !coord_inside_on(cs, t, index, 2)) continue;
                coord__log_flip(cs, t, index);
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
    size_t wanted = entity_count + 2 * trigger_count;
    for (int a = 0; a < cs->axis_count; a++) {
        int partner = coord_partner(a);
        if (cs->pending_key_capacity[a] < wanted) {
            cs->pending_key_capacity[a] = wanted;
            cs->pending_keys[a] = xrealloc(cs->pending_keys[a], wanted * sizeof(coord_node));
        }
        coord_node *incoming = cs->pending_keys[a];
        size_t n = 0;
        for (size_t i = 0; i < entity_count; i++) {
            uint32_t e = cs->pending_entities[i];
            if (!cs->entities[e].live || !cs->entities[e].pending) continue;
            float partner_value = cs->entity_coord[partner][e];
            coord_node node = {coord__key(cs->entity_coord[a][e], COORD_KIND_ENTITY, e), partner_value, partner_value};
            incoming[n++] = node;
        }
        for (size_t i = 0; i < trigger_count; i++) {
            uint32_t t = cs->pending_triggers[i];
            if (!(cs->trigger_flags[t] & COORD_TRIGGER_PENDING)) continue;
            float low = cs->trigger_low[partner][t], high = cs->trigger_high[partner][t];
            coord_node lower = {coord__key(cs->trigger_low[a][t], COORD_KIND_LOWER, t), low, high};
            coord_node upper = {coord__key(cs->trigger_high[a][t], COORD_KIND_UPPER, t), low, high};
            incoming[n++] = lower;
            incoming[n++] = upper;
        }
        qsort(incoming, n, sizeof *incoming, coord_compare_nodes);
        coord_merge(cs, a, incoming, n);
    }
    coord_sweep_new_pairs(cs);
    /* Scan mode: the next scan finds the newcomers' pairs. */
    if (cs->scanning && entity_count) cs->geometry_changed = 1;
    for (size_t i = 0; i < entity_count; i++) cs->entities[cs->pending_entities[i]].pending = 0;
    for (size_t i = 0; i < trigger_count; i++) cs->trigger_flags[cs->pending_triggers[i]] &= ~COORD_TRIGGER_PENDING;
    cs->pending_entity_count = 0;
    cs->pending_trigger_count = 0;
}

/* ---- removing ------------------------------------------------------------- */

static void coord_delete_node(coord_system *cs, int a, uint64_t key, uint32_t hint) {
    coord_axis *axis = &cs->axes[a];
    uint32_t position = coord__locate(cs, a, key, hint);
    memmove(axis->nodes + position, axis->nodes + position + 1, (axis->count - position - 1) * sizeof *axis->nodes);
    axis->count--;
}

/* Removes trigger t's nodes from the axes (no membership changes). */
void coord__delete_trigger_nodes(coord_system *cs, uint32_t t) {
    uint8_t flags = cs->trigger_flags[t];
    if (!(flags & COORD_TRIGGER_ACTIVE)) return;
    cs->trigger_flags[t] = 0;
    if (flags & COORD_TRIGGER_PENDING) return; /* never made it into the axes; apply skips it */
    if (cs->scanning) return;                  /* scan mode keeps no boundaries in the axes */
    for (int a = 0; a < cs->axis_count; a++) {
        coord_delete_node(cs, a, coord__key(cs->trigger_low[a][t], COORD_KIND_LOWER, t),
                          cs->trigger_hint[a][(size_t)t * 2]);
        coord_delete_node(cs, a, coord__key(cs->trigger_high[a][t], COORD_KIND_UPPER, t),
                          cs->trigger_hint[a][(size_t)t * 2 + 1]);
    }
}

/* Logs a flip for every trigger that contains entity e, taking e out of
 * them: walks X leftwards from e over the nodes among which a containing
 * trigger's lower bound can be (no trigger is wider than max_trigger_span). */
static void coord_leave_all_triggers(coord_system *cs, uint32_t e, uint32_t position) {
    const coord_axis *axis = &cs->axes[0];
    float x = cs->entity_coord[0][e], z = cs->entity_coord[1][e];
    /* Nodes sorting before this key lie further left than any trigger that
     * could contain e can start. */
    uint64_t reach = coord__key(x - cs->max_trigger_span[0], COORD_KIND_LOWER, 0);
    for (size_t i = position; i-- > 0;) {
        const coord_node *node = &axis->nodes[i];
        if (node->key < reach) break;
        if (COORD_KIND_OF(node->key) != COORD_KIND_LOWER) continue;
        if (z < node->low || z > node->high) continue;
        uint32_t t = (uint32_t)(node->key & COORD_INDEX_MASK);
        if (cs->trigger_high[0][t] < x) continue;
        if (cs->axis_count == 3 && !coord_inside_on(cs, t, e, 2)) continue;
        coord__log_flip(cs, t, e);
    }
}

int coord_remove_entity(coord_system *cs, uint32_t entity) {
    if (entity >= cs->entity_count || !cs->entities[entity].live) return -1;
    coord_entity_record *record = &cs->entities[entity];
    /* Its own watchers go first, silently. */
    while (cs->entity_first_watcher[entity] != COORD_NONE) coord_remove_watcher(cs, cs->entity_first_watcher[entity]);
    if (record->pending) {
        /* Never entered the axes: nobody has seen it. */
        record->live = 0;
    } else {
        coord__settle(cs);
        uint64_t key = coord__key(cs->entity_coord[0][entity], COORD_KIND_ENTITY, entity);
        uint32_t position = coord__locate(cs, 0, key, cs->entity_hint[0][entity]);
        cs->entity_hint[0][entity] = position;
        if (cs->scanning)
            coord__scan_forget_entity(cs, entity);
        else
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

/* ---- changing mode (coord.h, "Modes"; the scans are coord_scan.c's) ------- */

/* To scan mode: the boundaries leave the axes. The trigger bits hold for the
 * committed positions and bounds (everything settled, flips applied or
 * logged), which become the first scan's old ones. */
static void coord_enter_scan_mode(coord_system *cs) {
    coord__settle(cs);
    for (int a = 0; a < cs->axis_count; a++) {
        coord_axis *axis = &cs->axes[a];
        size_t kept = 0;
        for (size_t i = 0; i < axis->count; i++) {
            coord_node node = axis->nodes[i];
            if (COORD_KIND_OF(node.key) != COORD_KIND_ENTITY) continue;
            uint32_t e = (uint32_t)(node.key & COORD_INDEX_MASK);
            cs->entity_hint[a][e] = (uint32_t)kept;
            axis->nodes[kept++] = node;
        }
        axis->count = kept;
    }
    for (uint32_t e = 0; e < cs->entity_count; e++) {
        bool placed = cs->entities[e].live && !cs->entities[e].pending;
        for (int a = 0; a < COORD_MAX_AXES; a++) cs->entity_scanned[a][e] = placed ? cs->entity_coord[a][e] : NAN;
    }
    cs->scanning = 1;
    cs->stats.mode_changes++;
}

/* To crossing mode: a last scan brings every trigger's bounds to its owner's
 * committed position, then the boundaries go back into the axes there. */
static void coord_leave_scan_mode(coord_system *cs) {
    coord__settle(cs);
    coord__scan(cs);
    size_t triggers = 0;
    for (uint32_t w = 0; w < cs->watcher_count; w++)
        if (cs->watchers[w].live && (cs->trigger_flags[(size_t)2 * w] & COORD_TRIGGER_ACTIVE)) triggers++;
    coord_node *incoming = xmalloc((2 * triggers + 1) * sizeof *incoming);
    for (int a = 0; a < cs->axis_count; a++) {
        int partner = a == 0 ? 1 : 0;
        size_t count = 0;
        for (uint32_t w = 0; w < cs->watcher_count; w++) {
            uint32_t t = 2 * w;
            if (!cs->watchers[w].live || !(cs->trigger_flags[t] & COORD_TRIGGER_ACTIVE)) continue;
            float low = cs->trigger_low[partner][t], high = cs->trigger_high[partner][t];
            incoming[count++] = (coord_node){coord__key(cs->trigger_low[a][t], COORD_KIND_LOWER, t), low, high};
            incoming[count++] = (coord_node){coord__key(cs->trigger_high[a][t], COORD_KIND_UPPER, t), low, high};
            float span = cs->trigger_high[a][t] - cs->trigger_low[a][t];
            if (span > cs->max_trigger_span[a]) cs->max_trigger_span[a] = span;
            cs->trigger_hint[a][(size_t)2 * t] = cs->trigger_hint[a][(size_t)2 * t + 1] = 0;
        }
        qsort(incoming, count, sizeof *incoming, coord_compare_nodes);
        coord_merge(cs, a, incoming, count);
    }
    free(incoming);
    cs->scanning = 0;
    cs->stats.mode_changes++;
}

void coord__choose_mode(coord_system *cs) {
    coord_mode wanted = cs->mode_setting;
    uint64_t swaps = cs->stats.swaps - cs->choice_swaps, tested = cs->stats.scanned - cs->choice_scanned;
    cs->choice_swaps = cs->stats.swaps;
    cs->choice_scanned = cs->stats.scanned;
    if (wanted == COORD_MODE_AUTO) {
        if (swaps == 0 && tested == 0) return; /* nothing moved: nothing learnt */
        wanted = coord__scan_advice(cs, swaps, tested);
        if (wanted == COORD_MODE_AUTO) return;
    }
    bool scan = wanted == COORD_MODE_SCAN;
    if (scan == (bool)cs->scanning) return;
    cs->choice_streak = 0;
    if (scan)
        coord_enter_scan_mode(cs);
    else
        coord_leave_scan_mode(cs);
    cs->choice_swaps = cs->stats.swaps;
    cs->choice_scanned = cs->stats.scanned;
}

void coord_set_mode(coord_system *cs, coord_mode mode) {
    if ((unsigned)mode > COORD_MODE_SCAN) return;
    cs->mode_setting = mode;
    cs->choice_streak = 0;
    if (mode != COORD_MODE_AUTO && !cs->flushing) coord__choose_mode(cs);
}

coord_mode coord_current_mode(const coord_system *cs) { return cs->scanning ? COORD_MODE_SCAN : COORD_MODE_CROSSING; }

void coord_get_stats(const coord_system *cs, coord_stats *out) {
    *out = cs->stats;
    size_t bytes = sizeof *cs;
    for (int a = 0; a < COORD_MAX_AXES; a++) bytes += cs->axes[a].capacity * sizeof(coord_node);
    bytes += (size_t)cs->entity_capacity * (sizeof *cs->entities + COORD_MAX_AXES * (sizeof(float) + sizeof(uint32_t)));
    bytes += (size_t)cs->watcher_capacity *
             (sizeof *cs->watchers + 2 * (COORD_MAX_AXES * (2 * sizeof(float) + 2 * sizeof(uint32_t)) + 1));
    bytes += coord__watcher_table_bytes(cs);
    out->bytes = bytes;
}

/* Whether `point` is inside `shape` of `radius` around `centre` (the round
 * shapes' narrow phase, shared by the watchers and the queries). */
bool coord__within_round(coord_shape shape, const float *centre, const float *point, float radius) {
    if (shape == COORD_SHAPE_BOX) return true;
    /* Double precision: the differences of two floats and their squares
     * are exact or nearly, so "exactly r away" is inside, as coord.h says. */
    double dx = (double)point[0] - centre[0], dz = (double)point[2] - centre[2];
    double distance_squared = dx * dx + dz * dz;
    if (shape == COORD_SHAPE_SPHERE) {
        double dy = (double)point[1] - centre[1];
        distance_squared += dy * dy;
    }
    return distance_squared <= (double)radius * radius;
}
