/* coord_watcher.c -- watchers: views and traps that ride on an entity. Owns
 * each watcher's pair table (which entities are inside its trigger now, and
 * which it was told about at the last flush), the pairs touched since then,
 * and coord_flush, which turns them into the net enter/leave events of
 * coord.h. The axes and crossings are coord.c's.
 *
 * A trap has one trigger of its extent r: inside is in view. A view with
 * hysteresis h also has ONE trigger, of extent r + h: it says exactly when
 * an entity leaves. Whether an entity inside it has come within r (and so
 * enters) is decided at the flush by comparing coordinates, for the pairs
 * inside the trigger but not yet in view -- the "candidates", a thin band
 * of the view. A second trigger at r would find the same answer by moving
 * twice as many nodes every tick.
 *
 * A round trap (a circle or a sphere) keeps the trigger of its square and
 * lists every pair inside it the same way: at the flush each one whose
 * entity (or whose trap's owner) moved is tested by distance, and enters
 * or leaves on the answer -- coming within r, or straying into a corner,
 * crosses no trigger boundary. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "coord_internal.h"
#include "log.h"

/* A flush repeats while callbacks keep causing new events (a callback that
 * moves entities makes new pairs); this bounds a feedback loop in game code
 * without losing anything: what is left is delivered by the next flush. */
#define COORD_FLUSH_ROUNDS 16

/* ---- pair tables ------------------------------------------------------------ */

/* A watcher's pairs live in one of two tables. A sparse one for the usual
 * view of tens to hundreds: open addressing, an entry (entity + 1) << 5 |
 * bits, 0 for an empty slot. A dense one for a crowd's view of thousands:
 * a byte of bits per entity id, indexed directly, with no probing; it is
 * the smaller of the two once the sparse table would take more bytes than
 * there are ids. A table turns dense when it would grow past that, and
 * sparse again when it holds fewer than one id in COORD_PAIR_SPARSE_AGAIN,
 * so that a view at the border does not flap between the two.
 *
 * Pairs are named by their SLOT: the sparse table's index, or the entity id
 * itself in a dense table. A slot is good until the next addition (which
 * may grow or convert the table). A pair with no bits is no pair: the
 * dense table cannot tell it from an empty slot, and the sparse one
 * deletes it at the flush. */
#define COORD_PAIR_SHIFT 5
#define COORD_PAIR_KEY(entry) ((entry) >> COORD_PAIR_SHIFT)
#define COORD_PAIR_ALL_BITS ((1u << COORD_PAIR_SHIFT) - 1u)
/* An entry with none of these is deleted. */
#define COORD_PAIR_BITS_MASK (COORD_PAIR_INNER | COORD_PAIR_OUTER | COORD_PAIR_VIEW | COORD_PAIR_TOUCHED)
#define COORD_PAIR_NO_SLOT UINT32_MAX
#define COORD_PAIR_SPARSE_AGAIN 32u

static inline uint32_t coord_pair_slot(uint32_t key, uint32_t capacity) {
    return (key * 2654435761u) & (capacity - 1u);
}

/* Whether the pairs are in the dense table (dense_length is its size, 0
 * when there is none). */
static inline bool coord_pair_is_dense(const coord_watcher_record *w) { return w->dense_length != 0; }

/* Asks the cache for the slot where (w, entity) is or would go: a run of
 * flips fetches all its slots before the first probe waits for one.
 * always_inline: a function that only prefetches writes nothing, and gcc
 * would otherwise drop its calls as those of a pure function. */
__attribute__((always_inline)) static inline void coord_pair_prefetch(const coord_watcher_record *w, uint32_t entity) {
    if (coord_pair_is_dense(w)) {
        if (entity < w->dense_length) __builtin_prefetch(&w->dense[entity], 1);
    } else if (w->table_capacity) {
        __builtin_prefetch(&w->table[coord_pair_slot(entity + 1, w->table_capacity)], 1);
    }
}

static inline uint32_t coord_pair_bits(const coord_watcher_record *w, uint32_t slot) {
    return coord_pair_is_dense(w) ? w->dense[slot] : (w->table[slot] & COORD_PAIR_ALL_BITS);
}

static inline void coord_pair_set_bits(coord_watcher_record *w, uint32_t slot, uint32_t bits) {
    if (coord_pair_is_dense(w)) {
        uint8_t old = w->dense[slot];
        w->table_used += (uint32_t)(old == 0 && bits != 0);
        w->table_used -= (uint32_t)(old != 0 && bits == 0);
        w->dense[slot] = (uint8_t)bits;
    } else {
        w->table[slot] = (w->table[slot] & ~COORD_PAIR_ALL_BITS) | bits;
    }
}

/* Slots to walk to see every pair, whether `slot` holds one, and whose. */
static inline uint32_t coord_pair_slot_count(const coord_watcher_record *w) {
    return coord_pair_is_dense(w) ? w->dense_length : w->table_capacity;
}
static inline bool coord_pair_occupied(const coord_watcher_record *w, uint32_t slot) {
    return coord_pair_is_dense(w) ? w->dense[slot] != 0 : w->table[slot] != 0;
}
static inline uint32_t coord_pair_entity(const coord_watcher_record *w, uint32_t slot) {
    return coord_pair_is_dense(w) ? slot : COORD_PAIR_KEY(w->table[slot]) - 1;
}

/* The slot of (w, entity), or COORD_PAIR_NO_SLOT. */
static uint32_t coord_pair_find(const coord_watcher_record *w, uint32_t entity) {
    if (coord_pair_is_dense(w)) return entity < w->dense_length && w->dense[entity] ? entity : COORD_PAIR_NO_SLOT;
    if (w->table_capacity == 0) return COORD_PAIR_NO_SLOT;
    uint32_t mask = w->table_capacity - 1, key = entity + 1;
    for (uint32_t i = coord_pair_slot(key, w->table_capacity);; i = (i + 1) & mask) {
        uint32_t entry = w->table[i];
        if (entry == 0) return COORD_PAIR_NO_SLOT;
        if (COORD_PAIR_KEY(entry) == key) return i;
    }
}

static uint32_t coord_pair_sparse_insert(uint32_t *table, uint32_t capacity, uint32_t entry) {
    uint32_t mask = capacity - 1;
    uint32_t slot = coord_pair_slot(COORD_PAIR_KEY(entry), capacity);
    while (table[slot]) slot = (slot + 1) & mask;
    table[slot] = entry;
    return slot;
}

/* Rebuilds the sparse table at `capacity` slots from the sparse or the
 * dense one. */
static void coord_pair_make_sparse(coord_watcher_record *w, uint32_t capacity) {
    uint32_t *table = xcalloc(capacity, sizeof *table);
    if (coord_pair_is_dense(w)) {
        for (uint32_t id = 0; id < w->dense_length; id++)
            if (w->dense[id]) coord_pair_sparse_insert(table, capacity, ((id + 1) << COORD_PAIR_SHIFT) | w->dense[id]);
        free(w->dense);
        w->dense = NULL;
        w->dense_length = 0;
    } else {
        for (uint32_t i = 0; i < w->table_capacity; i++)
            if (w->table[i]) coord_pair_sparse_insert(table, capacity, w->table[i]);
    }
    free(w->table);
    w->table = table;
    w->table_capacity = capacity;
}

/* Turns the sparse table dense, covering at least `length` ids. */
static void coord_pair_make_dense(coord_watcher_record *w, uint32_t length) {
    uint32_t used = 0;
    for (uint32_t i = 0; i < w->table_capacity; i++)
        if (w->table[i] && COORD_PAIR_KEY(w->table[i]) > length) length = COORD_PAIR_KEY(w->table[i]);
    if (length == 0) length = 1;
    uint8_t *dense = xcalloc(length, 1);
    for (uint32_t i = 0; i < w->table_capacity; i++) {
        uint32_t entry = w->table[i];
        if (!entry || !(entry & COORD_PAIR_ALL_BITS)) continue;
        dense[COORD_PAIR_KEY(entry) - 1] = (uint8_t)(entry & COORD_PAIR_ALL_BITS);
        used++;
    }
    free(w->table);
    w->table = NULL;
    w->table_capacity = 0;
    w->table_used = used;
    w->dense = dense;
    w->dense_length = length;
}

/* Makes room for `extra` more pairs in a system of `id_count` entity ids:
 * grows a sparse table, or turns it dense when the grown one would take
 * more bytes than a dense one. A dense table grows by itself. Returns
 * whether the table is dense. */
static bool coord_pair_reserve(coord_watcher_record *w, size_t extra, uint32_t id_count) {
    if (coord_pair_is_dense(w)) return true;
    size_t needed = (size_t)w->table_used + extra;
    if (needed * 4 <= (size_t)w->table_capacity * 3) return false;
    size_t capacity = w->table_capacity ? w->table_capacity : 16;
    while (needed * 4 > capacity * 3) capacity *= 2;
    if (capacity * sizeof(uint32_t) > id_count) {
        coord_pair_make_dense(w, id_count);
        return true;
    }
    coord_pair_make_sparse(w, (uint32_t)capacity);
    return false;
}

/* The slot of (w, entity), made if missing (with no bits yet: the caller
 * sets some). */
static uint32_t coord_pair_find_or_add(coord_watcher_record *w, uint32_t entity, uint32_t id_count) {
    if (!coord_pair_is_dense(w)) {
        uint32_t key = entity + 1;
        if (w->table_capacity) {
            uint32_t mask = w->table_capacity - 1;
            for (uint32_t i = coord_pair_slot(key, w->table_capacity);; i = (i + 1) & mask) {
                uint32_t entry = w->table[i];
                if (entry == 0) break;
                if (COORD_PAIR_KEY(entry) == key) return i;
            }
        }
        /* At most three quarters full: linear probes stay a few slots
         * long, and a view of ~100 fits 128 slots (512 bytes). */
        if (!coord_pair_reserve(w, 1, id_count)) {
            w->table_used++;
            return coord_pair_sparse_insert(w->table, w->table_capacity, key << COORD_PAIR_SHIFT);
        }
    }
    if (entity >= w->dense_length) {
        /* Ids are coord's own, below COORD_MAX_ENTITIES: no overflow. */
        if (entity >= COORD_MAX_ENTITIES) log_panic("coord: entity id %u out of range", entity);
        uint32_t length = w->dense_length * 2;
        if (length < id_count) length = id_count;
        if (length <= entity) length = entity + 1;
        w->dense = xrealloc(w->dense, length);
        memset(w->dense + w->dense_length, 0, length - w->dense_length);
        w->dense_length = length;
    }
    return entity;
}

/* Deletes a pair; the sparse table shifts back, so it has no tombstones. */
static void coord_pair_delete(coord_watcher_record *w, uint32_t slot) {
    if (coord_pair_is_dense(w)) {
        coord_pair_set_bits(w, slot, 0);
        return;
    }
    uint32_t mask = w->table_capacity - 1;
    uint32_t hole = slot;
    uint32_t i = hole;
    for (;;) {
        i = (i + 1) & mask;
        uint32_t next = w->table[i];
        if (!next) break;
        uint32_t home = coord_pair_slot(COORD_PAIR_KEY(next), w->table_capacity);
        /* `next` stays unless the hole lies cyclically in [home, i). */
        bool stays = hole <= i ? (home > hole && home <= i) : (home > hole || home <= i);
        if (stays) continue;
        w->table[hole] = next;
        hole = i;
    }
    w->table[hole] = 0;
    w->table_used--;
}

/* A dense table that holds few pairs now turns sparse again. */
static void coord_pair_shrink(coord_watcher_record *w) {
    if (!coord_pair_is_dense(w) || (size_t)w->table_used * COORD_PAIR_SPARSE_AGAIN >= w->dense_length) return;
    uint32_t capacity = 16;
    while ((size_t)(w->table_used + 1) * 4 > (size_t)capacity * 3) capacity *= 2;
    coord_pair_make_sparse(w, capacity);
}

size_t coord__watcher_table_bytes(const coord_system *cs) {
    size_t bytes = (cs->flip_capacity * 2) * sizeof(coord_flip) + cs->flip_bucket_capacity * sizeof(uint32_t);
    for (uint32_t w = 0; w < cs->watcher_count; w++)
        bytes += (size_t)cs->watchers[w].table_capacity * sizeof(uint32_t) + cs->watchers[w].dense_length +
                 (size_t)cs->watchers[w].touched_capacity * sizeof(uint32_t) +
                 (size_t)cs->watchers[w].candidate_capacity * sizeof(uint32_t);
    return bytes;
}

/* ---- flips ---------------------------------------------------------------- */

/* Whether a pair is one the flush checks by coordinates: inside the
 * trigger and not yet in view (hysteresis), or inside the square at all
 * (a round shape). */
static inline bool coord_is_candidate(const coord_watcher_record *record, uint32_t entry) {
    if (!(entry & COORD_PAIR_OUTER)) return false;
    return record->shape != COORD_SHAPE_BOX || !(entry & COORD_PAIR_VIEW);
}

/* Whether a watcher has candidates at all. */
static inline bool coord_checks_candidates(const coord_watcher_record *record) {
    return record->dual || record->shape != COORD_SHAPE_BOX;
}

/* Puts a pair on its watcher's candidate list, once. */
static void coord_list_candidate(coord_watcher_record *record, uint32_t slot, uint32_t entity) {
    uint32_t bits = coord_pair_bits(record, slot);
    if (bits & COORD_PAIR_LISTED) return;
    coord_pair_set_bits(record, slot, bits | COORD_PAIR_LISTED);
    if (record->candidate_count == record->candidate_capacity) {
        record->candidate_capacity = record->candidate_capacity ? record->candidate_capacity * 2 : 16;
        record->candidates = xrealloc(record->candidates, record->candidate_capacity * sizeof *record->candidates);
    }
    record->candidates[record->candidate_count++] = entity;
}

static void coord_queue_watcher(coord_system *cs, uint32_t w) {
    coord_watcher_record *record = &cs->watchers[w];
    if (record->queued) return;
    record->queued = 1;
    if (cs->touched_watcher_count == cs->touched_watcher_capacity) {
        cs->touched_watcher_capacity = cs->touched_watcher_capacity ? cs->touched_watcher_capacity * 2 : 64;
        cs->touched_watchers =
            xrealloc(cs->touched_watchers, cs->touched_watcher_capacity * sizeof *cs->touched_watchers);
    }
    cs->touched_watchers[cs->touched_watcher_count++] = w;
}

/* Flips the pair's bits in `toggle` and lists it, once, for re-examination at
 * the next flush. */
static void coord_touch(coord_system *cs, uint32_t w, uint32_t slot, uint32_t entity, uint32_t toggle) {
    coord_watcher_record *record = &cs->watchers[w];
    uint32_t bits = coord_pair_bits(record, slot);
    coord_pair_set_bits(record, slot, (bits ^ toggle) | COORD_PAIR_TOUCHED);
    if (bits & COORD_PAIR_TOUCHED) return;
    if (record->touched_count == record->touched_capacity) {
        record->touched_capacity = record->touched_capacity ? record->touched_capacity * 2 : 16;
        record->touched = xrealloc(record->touched, record->touched_capacity * sizeof *record->touched);
    }
    record->touched[record->touched_count++] = entity;
    coord_queue_watcher(cs, w);
}

static size_t coord_flush_watcher(coord_system *cs, uint32_t w, bool check_candidates);

/* Applies the logged flips. A counting sort groups them by watcher, so each
 * watcher's table is brought into the cache once rather than once per
 * crossing; flips of the same pair cancel in the XOR whatever their order.
 * Inside a flush (`resolve`), each watcher's pairs are also resolved right
 * after its flips, while its table is still in the cache; the callbacks
 * that runs may log new flips or even apply them (a range change), so the
 * sorted run and its index are taken out of the system for the duration
 * and a nested call works on buffers of its own. Returns events delivered. */
static size_t coord_apply_flips_resolving(coord_system *cs, bool resolve, bool check_candidates) {
    size_t count = cs->flip_count;
    if (count == 0) return 0;
    if (count > cs->flip_recent_peak) cs->flip_recent_peak = count;
    uint32_t watcher_count = cs->watcher_count;
    size_t buckets = (size_t)watcher_count + 1;
    uint32_t *start = cs->flip_bucket;
    size_t start_capacity = cs->flip_bucket_capacity;
    coord_flip *sorted = cs->flips_sorted;
    size_t sorted_capacity = cs->flips_sorted_capacity;
    cs->flip_bucket = NULL;
    cs->flip_bucket_capacity = 0;
    cs->flips_sorted = NULL;
    cs->flips_sorted_capacity = 0;
    if (start_capacity < buckets) {
        start_capacity = buckets;
        start = xrealloc(start, start_capacity * sizeof *start);
    }
    if (sorted_capacity < count) {
        sorted_capacity = cs->flip_capacity;
        sorted = xrealloc(sorted, sorted_capacity * sizeof *sorted);
    }
    memset(start, 0, buckets * sizeof *start);
    const coord_flip *log = cs->flips;
    for (size_t i = 0; i < count; i++) start[(log[i].trigger >> 1) + 1]++;
    for (size_t w = 1; w < buckets; w++) start[w] += start[w - 1];
    for (size_t i = 0; i < count; i++) sorted[start[log[i].trigger >> 1]++] = log[i];
    cs->flip_count = 0;

    /* start[w] now marks the end of watcher w's run. */
    size_t delivered = 0, begin = 0;
    for (uint32_t w = 0; w < watcher_count; w++) {
        size_t end = start[w];
        coord_watcher_record *record = &cs->watchers[w];
        if (begin == end || !record->live) {
            begin = end;
            continue;
        }
        bool dual = record->dual;
        uint32_t owner = record->owner;
        /* A bulk load brings hundreds of new pairs at once: size the table
         * for them up front rather than rehashing them again and again. An
         * ordinary tick's few flips mostly hit pairs already there. */
        uint32_t id_count = cs->entity_count;
        if (end - begin > record->table_used) coord_pair_reserve(record, end - begin, id_count);
        uint32_t flipped = dual ? COORD_PAIR_OUTER : (COORD_PAIR_INNER | COORD_PAIR_OUTER);
        for (size_t i = begin; i < end && i < begin + 64; i++) coord_pair_prefetch(record, sorted[i].entity);
        for (size_t i = begin; i < end; i++) {
            if (i + 64 < end) coord_pair_prefetch(record, sorted[i + 64].entity);
            const coord_flip *flip = &sorted[i];
            if (flip->entity == owner) continue;
            uint32_t slot = coord_pair_find_or_add(record, flip->entity, id_count);
            coord_touch(cs, w, slot, flip->entity, flipped);
            record = &cs->watchers[w];
        }
        begin = end;
        if (resolve && record->queued && record->live) {
            record->queued = 0;
            delivered += coord_flush_watcher(cs, w, check_candidates);
        }
    }

    /* Hand the buffers back, unless a nested call made new ones. */
    if (!cs->flip_bucket) {
        cs->flip_bucket = start;
        cs->flip_bucket_capacity = start_capacity;
    } else {
        free(start);
    }
    if (!cs->flips_sorted) {
        cs->flips_sorted = sorted;
        cs->flips_sorted_capacity = sorted_capacity;
    } else {
        free(sorted);
    }
    return delivered;
}

void coord__apply_flips(coord_system *cs) { coord_apply_flips_resolving(cs, false, false); }

/* ---- placing, adding, removing -------------------------------------------- */

/* Where the watcher's owner is -- or is going, if its move is deferred: a
 * trigger queued now goes in at the owner's destination. */
static void coord_watcher_centre(const coord_system *cs, uint32_t w, float *centre) {
    uint32_t owner = cs->watchers[w].owner;
    float *const *coordinates = cs->entities[owner].dirty ? cs->entity_target : cs->entity_coord;
    for (int a = 0; a < COORD_MAX_AXES; a++) centre[a] = a < cs->axis_count ? coordinates[a][owner] : 0.0f;
}

static void coord_set_trigger_bounds(coord_system *cs, uint32_t t, const float *centre, float extent) {
    /* axis_count is 2 or 3; the bound tells the analyzer centre[a] is in
     * its COORD_MAX_AXES. */
    for (int a = 0; a < cs->axis_count && a < COORD_MAX_AXES; a++) {
        cs->trigger_low[a][t] = centre[a] - extent;
        cs->trigger_high[a][t] = centre[a] + extent;
        cs->trigger_hint[a][(size_t)2 * t] = cs->trigger_hint[a][(size_t)2 * t + 1] = 0;
    }
}

/* Puts a trigger around `centre`: slides it if it is in the axes, or just
 * rewrites the bounds of one still queued. */
static void coord_place_one(coord_system *cs, uint32_t t, const float *centre, float extent) {
    if (cs->trigger_flags[t] & COORD_TRIGGER_PENDING) {
        coord_set_trigger_bounds(cs, t, centre, extent);
        for (int a = 0; a < cs->axis_count; a++) {
            float span = cs->trigger_high[a][t] - cs->trigger_low[a][t];
            if (span > cs->max_trigger_span[a]) cs->max_trigger_span[a] = span;
        }
    } else {
        coord__place_trigger(cs, t, centre, extent);
    }
}

void coord__place_watcher(coord_system *cs, uint32_t w) {
    float centre[COORD_MAX_AXES];
    coord_watcher_centre(cs, w, centre);
    const coord_watcher_record *record = &cs->watchers[w];
    coord_place_one(cs, 2 * w, centre, record->dual ? record->extent + record->hysteresis : record->extent);
}

static bool coord_valid_range(float extent, float hysteresis) {
    return isfinite(extent) && isfinite(hysteresis) && extent >= 0 && hysteresis >= 0 && isfinite(extent + hysteresis);
}

uint32_t coord_add_watcher(coord_system *cs, uint32_t owner, float extent, float hysteresis,
                           const coord_watcher_callbacks *callbacks, void *user_data) {
    if (owner >= cs->entity_count || !cs->entities[owner].live || !coord_valid_range(extent, hysteresis))
        return COORD_NONE;
    uint32_t w;
    if (cs->free_watchers_head != COORD_NONE) {
        w = cs->free_watchers_head;
        cs->free_watchers_head = cs->watchers[w].next_free;
    } else {
        if ((uint64_t)cs->watcher_count * 2 + 2 > COORD_INDEX_MASK) return COORD_NONE;
        coord__reserve_watchers(cs, cs->watcher_count + 1);
        w = cs->watcher_count++;
    }
    coord_watcher_record *record = &cs->watchers[w];
    memset(record, 0, sizeof *record);
    record->live = 1;
    record->owner = owner;
    record->extent = extent;
    record->hysteresis = hysteresis;
    if (callbacks) record->callbacks = *callbacks;
    record->user_data = user_data;
    cs->watcher_links[w].next_owned = cs->entity_first_watcher[owner];
    cs->watcher_links[w].reach = hysteresis > 0 ? extent + hysteresis : extent;
    cs->entity_first_watcher[owner] = w;
    cs->trigger_flags[(size_t)2 * w] = cs->trigger_flags[(size_t)2 * w + 1] = 0;

    record->dual = hysteresis > 0;
    record->shape = COORD_SHAPE_BOX;
    if (cs->scanning) {
        /* Its first scan finds what is inside, from an empty square. */
        for (int a = 0; a < cs->axis_count; a++) {
            cs->trigger_low[a][(size_t)2 * w] = INFINITY;
            cs->trigger_high[a][(size_t)2 * w] = -INFINITY;
        }
        cs->trigger_flags[(size_t)2 * w] = COORD_TRIGGER_ACTIVE;
        cs->geometry_changed = 1;
    } else {
        float centre[COORD_MAX_AXES];
        coord_watcher_centre(cs, w, centre);
        coord_set_trigger_bounds(cs, 2 * w, centre, record->dual ? extent + hysteresis : extent);
        coord__queue_trigger(cs, 2 * w);
    }
    cs->live_watchers++;
    return w;
}

static bool coord_watcher_valid(const coord_system *cs, uint32_t w) {
    return w < cs->watcher_count && cs->watchers[w].live;
}

int coord_watcher_seed(coord_system *cs, uint32_t w, uint32_t entity) {
    if (!coord_watcher_valid(cs, w) || entity >= cs->entity_count || !cs->entities[entity].live) return -1;
    coord_watcher_record *record = &cs->watchers[w];
    if (entity == record->owner) return -1;
    uint32_t slot = coord_pair_find_or_add(record, entity, cs->entity_count);
    uint32_t bits = coord_pair_bits(record, slot);
    if (bits & COORD_PAIR_VIEW) return 0;
    record->view_count++;
    /* The next flush applies the view rule to it like to any touched pair:
     * inside the outer extent it stays, outside it leaves. */
    coord_touch(cs, w, slot, entity, COORD_PAIR_VIEW);
    return 0;
}

int coord_remove_watcher(coord_system *cs, uint32_t w) {
    if (!coord_watcher_valid(cs, w)) return -1;
    coord_watcher_record *record = &cs->watchers[w];
    for (uint32_t *link = &cs->entity_first_watcher[record->owner]; *link != COORD_NONE;
         link = &cs->watcher_links[*link].next_owned) {
        if (*link == w) {
            *link = cs->watcher_links[w].next_owned;
            break;
        }
    }
    coord__delete_trigger_nodes(cs, 2 * w);
    coord__delete_trigger_nodes(cs, 2 * w + 1);
    record->live = 0;
    cs->live_watchers--;
    if (cs->dead_watcher_count == cs->dead_watcher_capacity) {
        cs->dead_watcher_capacity = cs->dead_watcher_capacity ? cs->dead_watcher_capacity * 2 : 64;
        cs->dead_watchers = xrealloc(cs->dead_watchers, cs->dead_watcher_capacity * sizeof *cs->dead_watchers);
    }
    cs->dead_watchers[cs->dead_watcher_count++] = w;
    return 0;
}

void coord__watcher_release(coord_system *cs, uint32_t w) {
    coord_watcher_record *record = &cs->watchers[w];
    free(record->table);
    free(record->dense);
    free(record->touched);
    free(record->candidates);
    record->table = NULL;
    record->dense = NULL;
    record->dense_length = 0;
    record->touched = NULL;
    record->candidates = NULL;
    record->candidate_count = record->candidate_capacity = 0;
    record->table_capacity = record->table_used = record->view_count = 0;
    record->touched_count = record->touched_capacity = 0;
}

/* Marks every pair of a watcher for re-evaluation at the next flush. */
static void coord_touch_all(coord_system *cs, uint32_t w) {
    coord_watcher_record *record = &cs->watchers[w];
    for (uint32_t slot = 0; slot < coord_pair_slot_count(record); slot++) {
        if (!coord_pair_occupied(record, slot)) continue;
        coord_touch(cs, w, slot, coord_pair_entity(record, slot), 0);
        record = &cs->watchers[w];
    }
}

/* Empties the candidate list, its LISTED bits with it. */
static void coord_forget_candidates(coord_watcher_record *record) {
    for (uint32_t slot = 0; slot < coord_pair_slot_count(record); slot++)
        if (coord_pair_occupied(record, slot))
            coord_pair_set_bits(record, slot, coord_pair_bits(record, slot) & ~(uint32_t)COORD_PAIR_LISTED);
    record->candidate_count = 0;
}

int coord_set_watcher_range(coord_system *cs, uint32_t w, float extent, float hysteresis) {
    if (!coord_watcher_valid(cs, w) || !coord_valid_range(extent, hysteresis)) return -1;
    if (hysteresis > 0 && cs->watchers[w].shape != COORD_SHAPE_BOX) return -1;
    coord__settle(cs);
    /* Logged flips were logged under the current mode: apply them before
     * the mode can change. */
    coord__apply_flips(cs);
    coord_watcher_record *record = &cs->watchers[w];
    bool was_dual = record->dual, dual = hysteresis > 0;
    if (was_dual && !dual) {
        /* A trap keeps INNER equal to OUTER; the trigger's move to the new
         * extent then flips both. */
        for (uint32_t slot = 0; slot < coord_pair_slot_count(record); slot++) {
            if (!coord_pair_occupied(record, slot)) continue;
            uint32_t old = coord_pair_bits(record, slot);
            uint32_t bits = old & ~(uint32_t)(COORD_PAIR_INNER | COORD_PAIR_LISTED);
            coord_pair_set_bits(record, slot, bits | ((old & COORD_PAIR_OUTER) ? COORD_PAIR_INNER : 0));
        }
        record->candidate_count = 0; /* a trap has none */
    }
    if (was_dual != dual) {
        record->dual = dual;
        coord_touch_all(cs, w);
        record = &cs->watchers[w];
    }
    record->extent = extent;
    record->hysteresis = hysteresis;
    cs->watcher_links[w].reach = dual ? extent + hysteresis : extent;
    float centre[COORD_MAX_AXES];
    coord_watcher_centre(cs, w, centre);
    coord__place_trigger(cs, 2 * w, centre, dual ? extent + hysteresis : extent);
    coord__apply_flips(cs);
    /* The inner extent changed: every candidate is re-examined. */
    cs->watchers[w].candidate_epoch = 0;
    cs->geometry_changed = 1;
    return 0;
}

int coord_set_watcher_shape(coord_system *cs, uint32_t w, coord_shape shape) {
    if (!coord_watcher_valid(cs, w) || (unsigned)shape > COORD_SHAPE_SPHERE) return -1;
    coord_watcher_record *record = &cs->watchers[w];
    if (shape != COORD_SHAPE_BOX && record->dual) return -1;
    if (record->shape == shape) return 0;
    /* Flips logged so far are applied by the rule they were logged under;
     * then every pair is judged afresh at the next flush, and listed again
     * as the new shape wants. */
    coord__settle(cs);
    coord__apply_flips(cs);
    record = &cs->watchers[w];
    record->shape = (uint8_t)shape;
    coord_forget_candidates(record);
    coord_touch_all(cs, w);
    cs->watchers[w].candidate_epoch = 0;
    cs->geometry_changed = 1;
    return 0;
}

/* ---- reading views ---------------------------------------------------------- */

bool coord_watcher_sees(const coord_system *cs, uint32_t w, uint32_t entity) {
    if (!coord_watcher_valid(cs, w)) return false;
    const coord_watcher_record *record = &cs->watchers[w];
    uint32_t slot = coord_pair_find(record, entity);
    return slot != COORD_PAIR_NO_SLOT && (coord_pair_bits(record, slot) & COORD_PAIR_VIEW);
}

size_t coord_watcher_view_size(const coord_system *cs, uint32_t w) {
    return coord_watcher_valid(cs, w) ? cs->watchers[w].view_count : 0;
}

uint32_t coord_watcher_next(const coord_system *cs, uint32_t w, size_t *cursor) {
    if (!coord_watcher_valid(cs, w)) return COORD_NONE;
    const coord_watcher_record *record = &cs->watchers[w];
    while (*cursor < coord_pair_slot_count(record)) {
        uint32_t slot = (uint32_t)(*cursor)++;
        if (coord_pair_occupied(record, slot) && (coord_pair_bits(record, slot) & COORD_PAIR_VIEW))
            return coord_pair_entity(record, slot);
    }
    return COORD_NONE;
}

size_t coord_watcher_count(const coord_system *cs) { return cs->live_watchers; }

/* ---- flush ---------------------------------------------------------------- */

/* Whether entity e lies in the inner square (extent r) of watcher w, by
 * the committed coordinates: the enter test of a view with hysteresis,
 * computed exactly as coord.h states the rule. */
static bool coord_inside_inner(const coord_system *cs, const coord_watcher_record *record, uint32_t e) {
    uint32_t owner = record->owner;
    float extent = record->extent;
    for (int a = 0; a < cs->axis_count; a++) {
        float centre = cs->entity_coord[a][owner], c = cs->entity_coord[a][e];
        if (c < centre - extent || c > centre + extent) return false;
    }
    return true;
}

/* Whether entity e lies in the round shape of watcher w, by the committed
 * coordinates (the square is the pair bits' business). */
static bool coord_inside_round(const coord_system *cs, const coord_watcher_record *record, uint32_t e) {
    float centre[3], position[3];
    coord__settled_position(cs, record->owner, centre);
    coord__settled_position(cs, e, position);
    return coord__within_round((coord_shape)record->shape, centre, position, record->extent);
}

/* Counts a change of the view (`entity` now in it, or not) and tells the
 * watcher, unless an earlier callback of this flush cancelled it: then it
 * hears nothing more. Returns the events delivered (0 or 1). */
static size_t coord_report(coord_system *cs, uint32_t w, uint32_t entity, bool now) {
    coord_watcher_record *record = &cs->watchers[w];
    if (now)
        record->view_count++;
    else
        record->view_count--;
    if (!record->live) return 0;
    coord_watcher_callbacks callbacks = record->callbacks;
    void *user_data = record->user_data;
    if (now && callbacks.on_enter) callbacks.on_enter(cs, w, entity, user_data);
    if (!now && callbacks.on_leave) callbacks.on_leave(cs, w, entity, user_data);
    return 1;
}

/* Resolves one watcher's touched pairs: the view rule applied to the bits
 * as they stand, against the view as last reported. Returns events sent. */
static size_t coord_flush_watcher(coord_system *cs, uint32_t w, bool check_candidates) {
    size_t delivered = 0;
    for (uint32_t i = 0; i < cs->watchers[w].touched_count; i++) {
        coord_watcher_record *record = &cs->watchers[w]; /* callbacks may move the array */
        uint32_t entity = record->touched[i];
        uint32_t slot = coord_pair_find(record, entity);
        if (slot == COORD_PAIR_NO_SLOT) continue;
        uint32_t bits = coord_pair_bits(record, slot) & ~(uint32_t)COORD_PAIR_TOUCHED;
        bool was = bits & COORD_PAIR_VIEW;
        bool now;
        if (record->dual)
            now = (bits & COORD_PAIR_OUTER) && (was || coord_inside_inner(cs, record, entity));
        else if (record->shape != COORD_SHAPE_BOX)
            now = (bits & COORD_PAIR_INNER) && coord_inside_round(cs, record, entity);
        else
            now = (bits & COORD_PAIR_INNER) || (was && (bits & COORD_PAIR_OUTER));
        if (now)
            bits |= COORD_PAIR_VIEW;
        else
            bits &= ~(uint32_t)COORD_PAIR_VIEW;
        if ((bits & COORD_PAIR_BITS_MASK) == 0) {
            coord_pair_delete(record, slot);
        } else {
            coord_pair_set_bits(record, slot, bits);
            if (coord_checks_candidates(record) && coord_is_candidate(record, bits))
                coord_list_candidate(record, slot, entity);
        }
        if (now == was) {
            cs->stats.cancelled++;
            continue;
        }
        delivered += coord_report(cs, w, entity, now);
    }
    cs->watchers[w].touched_count = 0;
    coord_pair_shrink(&cs->watchers[w]);
    if (!check_candidates || !coord_checks_candidates(&cs->watchers[w])) return delivered;

    /* Candidates: inside the trigger, not in view (hysteresis), or inside
     * the square at all (round). Entering needs no crossing -- only coming
     * within the inner extent or the radius -- and neither does leaving a
     * round shape, so each is checked by coordinates. Stale ids (entered
     * with hysteresis, left the trigger, or deleted) drop out. */
    uint32_t since = cs->watchers[w].candidate_epoch;
    bool owner_moved = cs->entity_moved_epoch[cs->watchers[w].owner] > since;
    cs->watchers[w].candidate_epoch = cs->move_epoch;
    for (uint32_t i = 0; i < cs->watchers[w].candidate_count;) {
        coord_watcher_record *record = &cs->watchers[w];
        uint32_t entity = record->candidates[i];
        /* Neither end moved since the last check: nothing can have changed.
         * (Most of the band, when most entities stand still.) */
        if (!owner_moved && cs->entity_moved_epoch[entity] <= since) {
            i++;
            continue;
        }
        uint32_t slot = coord_pair_find(record, entity);
        uint32_t bits = slot == COORD_PAIR_NO_SLOT ? 0 : coord_pair_bits(record, slot);
        if (!(bits & COORD_PAIR_LISTED) || !coord_is_candidate(record, bits)) {
            if (slot != COORD_PAIR_NO_SLOT) coord_pair_set_bits(record, slot, bits & ~(uint32_t)COORD_PAIR_LISTED);
            record->candidates[i] = record->candidates[--record->candidate_count];
            continue;
        }
        if (record->shape != COORD_SHAPE_BOX) {
            /* Round: stays listed while in the square, in view or not. */
            i++;
            bool was = bits & COORD_PAIR_VIEW, now = coord_inside_round(cs, record, entity);
            if (now == was) continue;
            coord_pair_set_bits(record, slot, bits ^ COORD_PAIR_VIEW);
            delivered += coord_report(cs, w, entity, now);
            continue;
        }
        if (!coord_inside_inner(cs, record, entity)) {
            i++;
            continue;
        }
        coord_pair_set_bits(record, slot, (bits | COORD_PAIR_VIEW) & ~(uint32_t)COORD_PAIR_LISTED);
        record->candidates[i] = record->candidates[--record->candidate_count];
        delivered += coord_report(cs, w, entity, true);
    }
    return delivered;
}

/* A bulk load logs a flip per initial pair (a million at 10,000 watchers);
 * a tick logs a few per mover. Give back what only the bulk load needed. */
#define COORD_FLIP_LOG_KEEP 65536

static void coord_trim_flip_log(coord_system *cs) {
    /* Room for twice this flush's flips, plus the spare a slide reserves. */
    size_t largest_axis = 0;
    for (int a = 0; a < cs->axis_count; a++)
        if (cs->axes[a].count > largest_axis) largest_axis = cs->axes[a].count;
    size_t target = 2 * cs->flip_recent_peak + largest_axis;
    if (target < COORD_FLIP_LOG_KEEP) target = COORD_FLIP_LOG_KEEP;
    cs->flip_recent_peak = 0;
    if (cs->flip_count != 0 || cs->flip_capacity <= 4 * target) return;
    cs->flip_capacity = target;
    cs->flips = xrealloc(cs->flips, cs->flip_capacity * sizeof *cs->flips);
    free(cs->flips_sorted);
    cs->flips_sorted = NULL;
    cs->flips_sorted_capacity = 0;
}

static void coord_recycle_watchers(coord_system *cs) {
    for (size_t i = 0; i < cs->dead_watcher_count; i++) {
        uint32_t w = cs->dead_watchers[i];
        coord__watcher_release(cs, w);
        cs->watchers[w].queued = 0;
        cs->watchers[w].next_free = cs->free_watchers_head;
        cs->free_watchers_head = w;
    }
    cs->dead_watcher_count = 0;
}

size_t coord_flush(coord_system *cs) {
    if (cs->flushing) return 0; /* a callback asked to flush: the running flush covers it */
    cs->flushing = 1;
    size_t delivered = 0;
    for (int round = 0; round < COORD_FLUSH_ROUNDS; round++) {
        coord__settle(cs);
        bool check_candidates = cs->geometry_changed;
        cs->geometry_changed = 0;
        if (cs->scanning && check_candidates) coord__scan(cs);
        if (check_candidates) {
            /* Things moved: a candidate may have come within the inner
             * extent without crossing any trigger boundary. */
            for (uint32_t w = 0; w < cs->watcher_count; w++)
                if (cs->watchers[w].live && cs->watchers[w].candidate_count) coord_queue_watcher(cs, w);
        }
        if (cs->flip_count == 0 && cs->touched_watcher_count == 0) break;
        delivered += coord_apply_flips_resolving(cs, true, check_candidates);
        /* Watchers queued but not resolved above: candidates without flips,
         * pairs touched by a range change, or by this round's callbacks. */
        size_t count = cs->touched_watcher_count;
        if (cs->flush_watcher_capacity < count) {
            cs->flush_watcher_capacity = count;
            cs->flush_watchers = xrealloc(cs->flush_watchers, count * sizeof *cs->flush_watchers);
        }
        if (count) memcpy(cs->flush_watchers, cs->touched_watchers, count * sizeof *cs->flush_watchers);
        cs->touched_watcher_count = 0;
        for (size_t i = 0; i < count; i++) {
            uint32_t w = cs->flush_watchers[i];
            coord_watcher_record *record = &cs->watchers[w];
            if (!record->queued) continue; /* resolved already */
            record->queued = 0;
            if (!record->live) {
                record->touched_count = 0;
                continue;
            }
            delivered += coord_flush_watcher(cs, w, check_candidates);
        }
    }
    cs->flushing = 0;
    coord__recycle_entities(cs);
    coord_recycle_watchers(cs);
    coord_trim_flip_log(cs);
    cs->stats.events += delivered;
    coord__choose_mode(cs);
    return delivered;
}
