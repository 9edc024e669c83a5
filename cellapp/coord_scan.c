/* coord_scan.c -- the coordinate system's second way of finding what is
 * inside each trigger (coord.h, "Modes"), and the advice on which to use.
 *
 * Crossing mode (coord.c) keeps every trigger's boundaries in the axes, and
 * a membership changes where an entity and a boundary pass each other. Its
 * cost follows the swaps: when everyone moves, or in a crowd, millions a
 * tick, each of which may log a flip that later cancels.
 *
 * Scan mode keeps only the entities in the axes. At each flush that follows
 * a change of geometry, every watcher walks the stretch of the X axis its
 * square covers, eight entities at a time, and tests each one twice: inside
 * the square now (the owner's settled position, this flush's positions), and
 * inside the square of the last scan (the trigger's stored bounds, the
 * positions of the last scan). Where the two answers differ it logs a flip,
 * exactly as a crossing would have, and the pair tables, candidates and
 * callbacks of coord_watcher.c go on unchanged. The invariant both modes
 * keep: a pair's trigger bit is "inside the trigger's stored bounds at the
 * entity's position of the last scan (crossing mode: its committed one)",
 * plus the flips logged and not yet applied.
 *
 * The stretch also covers the last scan's square widened by the furthest any
 * entity moved since (on X), so an entity that left it is still seen. An
 * entity added since the last scan has no old position (NaN: outside every
 * old square); a watcher added since has an empty old square. A long move
 * (a teleport: several times the mean move) would widen every stretch to
 * its length, so it is taken apart: the entity flips out of every old
 * square that held it, one test per watcher, and is scanned as a newcomer.
 *
 * The advice (COORD_MODE_AUTO) compares, at each flush that moved things,
 * the work the current mode did with an estimate of the other's, and asks
 * for the other when it would be clearly cheaper for a few flushes running;
 * coord.c makes the change. This file calls none of the other coord files. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "coord_internal.h"
#include "log.h"

/* The scan's kernel tests entities in blocks of COORD_SCAN_LANES; the
 * scratch arrays are padded with that many NaN (inside nothing). */
#define COORD_SCAN_LANES 8

/* The choice's cost model, in the time of one entity test of a scan: a
 * crossing-mode swap (its share of the flips and the pair tables included)
 * costs this many, measured with bench-aoi at 10,000 entities. */
#define COORD_SCAN_SWAP_COST 5.0
/* The other mode must look this much cheaper ... */
#define COORD_SCAN_MARGIN 1.5
/* ... for this many flushes that moved things, one after another. */
#define COORD_SCAN_PATIENCE 2
/* Below this many entities, both modes are cheap: crossing mode stays. */
#define COORD_SCAN_MIN_ENTITIES 256
/* A move on X longer than this many times the mean of this scan's moves,
 * and than COORD_SCAN_LONG_MOVE_MIN, is a long one (a teleport): handled
 * apart, so one does not widen every watcher's stretch to its length. */
#define COORD_SCAN_LONG_MOVE_FACTOR 4.0f
#define COORD_SCAN_LONG_MOVE_MIN 1.0f

/* ---- the scratch arrays: the entities in X order, as lanes ---------------- */

static void coord_scan_reserve(coord_system *cs, size_t wanted) {
    if (cs->scan_capacity >= wanted) return;
    size_t capacity = cs->scan_capacity ? cs->scan_capacity : 256;
    while (capacity < wanted) capacity *= 2;
    for (int a = 0; a < COORD_MAX_AXES; a++) {
        cs->scan_now[a] = xrealloc(cs->scan_now[a], capacity * sizeof(float));
        cs->scan_was[a] = xrealloc(cs->scan_was[a], capacity * sizeof(float));
    }
    cs->scan_id = xrealloc(cs->scan_id, capacity * sizeof *cs->scan_id);
    cs->scan_changed = xrealloc(cs->scan_changed, capacity * sizeof *cs->scan_changed);
    cs->scan_capacity = capacity;
}

/* Logs a flip of entity e out of every trigger whose square at the last
 * scan held `position` (where e was then). */
static void coord_scan_flip_out(coord_system *cs, uint32_t e, const float *position) {
    for (uint32_t w = 0; w < cs->watcher_count; w++) {
        uint32_t t = 2 * w;
        if (!cs->watchers[w].live || !(cs->trigger_flags[t] & COORD_TRIGGER_ACTIVE)) continue;
        bool inside = true;
        for (int a = 0; a < cs->axis_count && a < COORD_MAX_AXES && inside; a++)
            inside = position[a] >= cs->trigger_low[a][t] && position[a] <= cs->trigger_high[a][t];
        if (inside) coord__log_flip(cs, t, e);
    }
}

/* Copies the entities of axis X, in its order, into the scratch arrays (now
 * and at the last scan, per axis), pads them to whole lanes with NaN (inside
 * nothing), and returns how many there are. A long mover flips out of the
 * squares that held it and is scanned as a newcomer (no old position), so
 * the watchers it is inside of now flip it back in: exact, and its move
 * does not count in *moved_most, the furthest any other entity moved on X
 * since the last scan. */
static size_t coord_scan_gather(coord_system *cs, float *moved_most) {
    const coord_axis *axis = &cs->axes[0];
    size_t n = axis->count;
    coord_scan_reserve(cs, n + COORD_SCAN_LANES);
    double moved_sum = 0;
    size_t moved_count = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t e = (uint32_t)(axis->nodes[i].key & COORD_INDEX_MASK);
        cs->scan_id[i] = e;
        for (int a = 0; a < cs->axis_count; a++) {
            cs->scan_now[a][i] = cs->entity_coord[a][e];
            cs->scan_was[a][i] = cs->entity_scanned[a][e];
        }
        float moved = fabsf(cs->scan_now[0][i] - cs->scan_was[0][i]);
        if (moved > 0) { /* NaN (no old position) never is */
            moved_sum += moved;
            moved_count++;
        }
    }
    float long_move = moved_count ? COORD_SCAN_LONG_MOVE_FACTOR * (float)(moved_sum / (double)moved_count) : 0.0f;
    if (long_move < COORD_SCAN_LONG_MOVE_MIN) long_move = COORD_SCAN_LONG_MOVE_MIN;
    float most = 0.0f;
    for (size_t i = 0; i < n; i++) {
        float moved = fabsf(cs->scan_now[0][i] - cs->scan_was[0][i]);
        if (!(moved > long_move)) {
            if (moved > most) most = moved;
            continue;
        }
        float was[COORD_MAX_AXES] = {0};
        for (int a = 0; a < cs->axis_count && a < COORD_MAX_AXES; a++) {
            was[a] = cs->scan_was[a][i];
            cs->scan_was[a][i] = NAN;
        }
        coord_scan_flip_out(cs, cs->scan_id[i], was);
        cs->stats.long_moves++;
    }
    for (size_t i = n; i < n + COORD_SCAN_LANES; i++) {
        cs->scan_id[i] = COORD_NONE;
        for (int a = 0; a < cs->axis_count; a++) cs->scan_now[a][i] = cs->scan_was[a][i] = NAN;
    }
    *moved_most = most;
    return n;
}

/* First position of the scratch X array whose coordinate is >= value. */
static size_t coord_scan_lower_bound(const coord_system *cs, size_t n, float value) {
    const float *x = cs->scan_now[0];
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (x[mid] < value)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* ---- the kernels: which entities of a stretch changed sides ---------------- */

/* A stretch to test: the coordinate arrays (now and at the last scan, per
 * axis), where to start, where X ends, and both boxes. */
struct coord_scan_job {
    float *const *now, *const *was;
    int axis_count;
    size_t begin, n;
    float to;
    float now_low[COORD_MAX_AXES], now_high[COORD_MAX_AXES];
    float was_low[COORD_MAX_AXES], was_high[COORD_MAX_AXES];
};
typedef struct coord_scan_job coord_scan_job;

/* Each kernel writes to `changed` the positions of the stretch whose entity
 * is inside one box and not the other, and returns how many it tested (a
 * multiple of the lanes). `changed` has room for the whole stretch. */
typedef size_t (*coord_scan_kernel)(const coord_scan_job *job, uint32_t *changed, size_t *changed_count);

static inline bool coord_scan_inside_one(const coord_scan_job *job, float *const *points, const float *low,
                                         const float *high, size_t i) {
    bool inside = true;
    for (int a = 0; a < job->axis_count; a++) inside &= points[a][i] >= low[a] && points[a][i] <= high[a];
    return inside;
}

/* Any target: one entity at a time. */
static size_t coord_scan_kernel_plain(const coord_scan_job *job, uint32_t *changed, size_t *changed_count) {
    size_t count = 0, i = job->begin;
    for (; i < job->n && job->now[0][i] <= job->to; i += COORD_SCAN_LANES) {
        for (size_t k = i; k < i + COORD_SCAN_LANES; k++) {
            bool now = coord_scan_inside_one(job, job->now, job->now_low, job->now_high, k);
            bool was = coord_scan_inside_one(job, job->was, job->was_low, job->was_high, k);
            changed[count] = (uint32_t)k;
            count += now != was;
        }
    }
    *changed_count = count;
    return i - job->begin;
}

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

/* Eight lanes a step: a mask of the lanes inside a box on every axis. */
#define COORD_SCAN_AVX2_INSIDE(points, low, high, i, axes)                                                        \
    ({                                                                                                            \
        __m256 inside_ = _mm256_and_ps(_mm256_cmp_ps(_mm256_loadu_ps((points)[0] + (i)), (low)[0], _CMP_GE_OQ),   \
                                       _mm256_cmp_ps(_mm256_loadu_ps((points)[0] + (i)), (high)[0], _CMP_LE_OQ)); \
        for (int a_ = 1; a_ < (axes); a_++) {                                                                     \
            __m256 c_ = _mm256_loadu_ps((points)[a_] + (i));                                                      \
            inside_ = _mm256_and_ps(inside_, _mm256_and_ps(_mm256_cmp_ps(c_, (low)[a_], _CMP_GE_OQ),              \
                                                           _mm256_cmp_ps(c_, (high)[a_], _CMP_LE_OQ)));           \
        }                                                                                                         \
        inside_;                                                                                                  \
    })

__attribute__((target("avx2"))) static size_t coord_scan_kernel_avx2(const coord_scan_job *job, uint32_t *changed,
                                                                     size_t *changed_count) {
    __m256 now_low[COORD_MAX_AXES], now_high[COORD_MAX_AXES], was_low[COORD_MAX_AXES], was_high[COORD_MAX_AXES];
    for (int a = 0; a < job->axis_count; a++) {
        now_low[a] = _mm256_set1_ps(job->now_low[a]);
        now_high[a] = _mm256_set1_ps(job->now_high[a]);
        was_low[a] = _mm256_set1_ps(job->was_low[a]);
        was_high[a] = _mm256_set1_ps(job->was_high[a]);
    }
    int axes = job->axis_count;
    size_t count = 0, i = job->begin;
    const float *x = job->now[0];
    for (; i < job->n && x[i] <= job->to; i += COORD_SCAN_LANES) {
        __m256 now = COORD_SCAN_AVX2_INSIDE(job->now, now_low, now_high, i, axes);
        __m256 was = COORD_SCAN_AVX2_INSIDE(job->was, was_low, was_high, i, axes);
        unsigned mask = (unsigned)_mm256_movemask_ps(_mm256_xor_ps(now, was));
        while (mask) {
            changed[count++] = (uint32_t)(i + (size_t)__builtin_ctz(mask));
            mask &= mask - 1;
        }
    }
    *changed_count = count;
    return i - job->begin;
}
#endif

/* The best kernel this CPU runs. */
static coord_scan_kernel coord_scan_pick_kernel(void) {
#if defined(__x86_64__) || defined(__i386__)
    if (__builtin_cpu_supports("avx2")) return coord_scan_kernel_avx2;
#endif
    return coord_scan_kernel_plain;
}

/* Scans the stretch of watcher w's trigger; returns the entities tested. */
static size_t coord_scan_watcher(coord_system *cs, uint32_t w, size_t n, float moved_most) {
    uint32_t t = 2 * w;
    uint32_t owner = cs->watchers[w].owner;
    float reach = cs->watcher_links[w].reach;
    coord_scan_job job = {.now = cs->scan_now, .was = cs->scan_was, .axis_count = cs->axis_count, .n = n};
    for (int a = 0; a < cs->axis_count; a++) {
        /* The same operations as crossing mode's, so the same bounds. */
        float centre = cs->entity_coord[a][owner];
        job.now_low[a] = centre - reach;
        job.now_high[a] = centre + reach;
        job.was_low[a] = cs->trigger_low[a][t];
        job.was_high[a] = cs->trigger_high[a][t];
    }
    float from = job.now_low[0], to = job.now_high[0];
    float was_low = job.was_low[0], was_high = job.was_high[0];
    if (was_low <= was_high) { /* an empty old square holds nothing */
        /* Widened by the rounding of the subtraction and of moved_most, so
         * an entity exactly moved_most away is inside the stretch. */
        float slack = 2.0f * FLT_EPSILON * (fabsf(was_low) + fabsf(was_high) + moved_most);
        if (was_low - moved_most - slack < from) from = was_low - moved_most - slack;
        if (was_high + moved_most + slack > to) to = was_high + moved_most + slack;
    }
    job.begin = coord_scan_lower_bound(cs, n, from);
    job.to = to;
    size_t changed = 0;
    size_t tested = cs->scan_kernel(&job, cs->scan_changed, &changed);
    for (size_t k = 0; k < changed; k++) coord__log_flip(cs, t, cs->scan_id[cs->scan_changed[k]]);
    for (int a = 0; a < cs->axis_count; a++) {
        cs->trigger_low[a][t] = job.now_low[a];
        cs->trigger_high[a][t] = job.now_high[a];
    }
    return tested;
}

void coord__scan(coord_system *cs) {
    if (!cs->scan_kernel) cs->scan_kernel = coord_scan_pick_kernel();
    float moved_most;
    size_t n = coord_scan_gather(cs, &moved_most);
    size_t tested = 0;
    for (uint32_t w = 0; w < cs->watcher_count; w++) {
        if (!cs->watchers[w].live || !(cs->trigger_flags[(size_t)2 * w] & COORD_TRIGGER_ACTIVE)) continue;
        tested += coord_scan_watcher(cs, w, n, moved_most);
    }
    /* This scan's positions are the next one's old ones. */
    for (size_t i = 0; i < n; i++)
        for (int a = 0; a < cs->axis_count; a++) cs->entity_scanned[a][cs->scan_id[i]] = cs->scan_now[a][i];
    cs->stats.scanned += tested;
}

void coord__scan_forget_entity(coord_system *cs, uint32_t e) {
    float position[COORD_MAX_AXES];
    for (int a = 0; a < COORD_MAX_AXES; a++) position[a] = cs->entity_scanned[a][e];
    coord_scan_flip_out(cs, e, position);
    for (int a = 0; a < COORD_MAX_AXES; a++) cs->entity_scanned[a][e] = NAN;
}

/* ---- the choice ------------------------------------------------------------- */

/* Nodes between watcher w's two boundaries on X, by their hints (exact for
 * a trigger that moved this tick, close for one that did not). */
static size_t coord_scan_hinted_stretch(const coord_system *cs, uint32_t w) {
    const uint32_t *hint = &cs->trigger_hint[0][(size_t)4 * w];
    return hint[1] > hint[0] ? hint[1] - hint[0] : 0;
}

/* The work the other mode would have done since the last choice, and the
 * work this one did, both in entity tests. */
static void coord_scan_costs(const coord_system *cs, uint64_t swaps, uint64_t tested, double *current, double *other) {
    size_t watchers = cs->live_watchers; /* each has its trigger, queued or placed */
    double entities = (double)cs->live_entities;
    if (cs->scanning) {
        /* The swaps were between entities alone. With the boundaries back,
         * each mover would pass 1 + 2W/N times as many nodes, and its
         * triggers' 2W/N boundaries per entity would move too. */
        double denser = 1.0 + 2.0 * (double)watchers / entities;
        *current = (double)tested + (double)swaps;
        *other = (double)swaps * denser * denser * COORD_SCAN_SWAP_COST;
    } else {
        /* Each watcher would test the entities of its stretch, a share of
         * the nodes between its boundaries. */
        double stretch = 0;
        for (uint32_t w = 0; w < cs->watcher_count; w++)
            if (cs->watchers[w].live && (cs->trigger_flags[(size_t)2 * w] & COORD_TRIGGER_ACTIVE))
                stretch += (double)coord_scan_hinted_stretch(cs, w);
        double share = cs->axes[0].count ? entities / (double)cs->axes[0].count : 1.0;
        double denser = 1.0 + 2.0 * (double)watchers / entities;
        *current = (double)swaps * COORD_SCAN_SWAP_COST;
        *other = stretch * share + (double)swaps / (denser * denser);
    }
}

coord_mode coord__scan_advice(coord_system *cs, uint64_t swaps, uint64_t tested) {
    if (cs->live_entities < COORD_SCAN_MIN_ENTITIES) return COORD_MODE_CROSSING;
    double current, other;
    coord_scan_costs(cs, swaps, tested, &current, &other);
    cs->choice_streak = other * COORD_SCAN_MARGIN < current ? cs->choice_streak + 1 : 0;
    if (cs->choice_streak < COORD_SCAN_PATIENCE) return COORD_MODE_AUTO;
    return cs->scanning ? COORD_MODE_CROSSING : COORD_MODE_SCAN;
}

int coord_mode_from_name(const char *name, coord_mode *mode) {
    static const char *const names[] = {"auto", "crossing", "scan"};
    for (int m = 0; m <= COORD_MODE_SCAN; m++) {
        if (name && strcmp(name, names[m]) == 0) {
            *mode = (coord_mode)m;
            return 0;
        }
    }
    return -1;
}

void coord__scan_free(coord_system *cs) {
    for (int a = 0; a < COORD_MAX_AXES; a++) {
        free(cs->scan_now[a]);
        free(cs->scan_was[a]);
        free(cs->entity_scanned[a]);
    }
    free(cs->scan_id);
    free(cs->scan_changed);
}
