/* bench_aoi.c -- bench-aoi: the coordinate system (cellapp/coord.h) against
 * a uniform grid (aoi_grid.c), a SIMD brute force (aoi_brute_simd.c) and a
 * brute-force oracle, on one workload, in one run, with every view
 * cross-checked after every tick.
 *
 * Workload (fixed seed): N entities in a 1000 x 1000 world; every entity
 * is a watcher of extent 50; each tick every entity takes a random step
 * uniform in a disc of radius 5 (clamped to the world). "uniform" spreads
 * the entities over the world; "clustered" puts 80 % of them in a
 * 100 x 100 hotspot at the centre (reflected at its edges) and 20 %
 * uniform; "sparse" places them as "uniform" does but moves only a random
 * 10 % of them each tick (--sparse-movers), the idle-NPC case. All
 * positions are generated before any timing starts, so the timed regions
 * hold only AOI work: coord_move_entity for every mover then coord_flush;
 * aoi_grid_move_entity for every mover then aoi_grid_update;
 * aoi_brute_simd_move_entity for every mover then aoi_brute_simd_update;
 * the oracle's O(N^2) pass. Each runs with hysteresis 0 ("plain triggers") and 5
 * ("witness with hysteresis"). Besides the build (entities, watchers,
 * first flush), the time to insert the N entities alone into an empty
 * system and flush is measured.
 *
 * The oracle follows every watcher when N <= --oracle-full-max; above that
 * it follows a fixed random sample of watchers, still every tick (so it is
 * exact with hysteresis), and its time per tick is scaled up to all N
 * watchers. The event callbacks only count.
 *
 * This file owns the workload, timing, checking and reporting; it owns no
 * AOI logic beyond the oracle's few lines.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "aoi_brute_simd.h"
#include "aoi_grid.h"
#include "coord.h"
#include "log.h"

/* The workload's constants, fixed by the benchmark's definition. */
#define BENCH_WORLD 1000.0f
#define BENCH_EXTENT 50.0f
#define BENCH_HYSTERESIS 5.0f
#define BENCH_STEP 5.0f
#define BENCH_HOTSPOT 100.0f
/* Entities with index % 5 != 0 live in the hotspot: 80 %, interleaved so
 * that id order says nothing about where an entity is. */
#define BENCH_HOTSPOT_MODULO 5

#define BENCH_MAX_SIZES 32
/* Mismatches printed in detail per run; the count is always complete. */
#define BENCH_MISMATCH_DETAILS 8

/* The default share of entities that move each tick in the sparse case:
 * on an MMO server most NPCs idle most of the time. */
#define BENCH_SPARSE_MOVERS_PERCENT 10

typedef enum bench_case {
    BENCH_CASE_UNIFORM = 0,
    BENCH_CASE_CLUSTERED = 1,
    BENCH_CASE_SPARSE = 2,
    BENCH_CASE_COUNT = 3,
} bench_case;

static const char *const bench_case_names[BENCH_CASE_COUNT] = {"uniform", "clustered", "sparse"};

typedef struct bench_options {
    uint32_t sizes[BENCH_MAX_SIZES];
    size_t size_count;
    int ticks;                      /* uniform and sparse cases */
    int clustered_ticks;            /* clustered case; -1: min(ticks, 20) */
    uint32_t sparse_movers_percent; /* sparse case: share of entities moved per tick */
    uint32_t teleports;             /* uniform and clustered: entities a tick that jump anywhere */
    uint64_t seed;
    bool json;
    bool cases[BENCH_CASE_COUNT];
    int check_every;          /* compare views every k ticks (1: every tick) */
    uint32_t oracle_sample;   /* watchers the oracle follows above oracle_full_max */
    uint32_t oracle_full_max; /* largest N where the oracle follows every watcher */
    float grid_cell;
    float quantize;           /* >0: positions rounded to multiples of it, so ties on bounds are common */
    const char *brute_kernel; /* brute-simd's kernel by name; NULL: the best the CPU runs */
    coord_mode coord_mode;    /* coord's mode: AUTO (its own choice), or fixed */
} bench_options;

/* Positions of every entity at every tick: tick t is x[t * n .. t * n + n). */
typedef struct bench_workload {
    bench_case kind;
    uint32_t n;
    int ticks;
    float *x, *z;
    uint32_t movers; /* entities moved per tick (n unless sparse) */
    /* Sparse: tick t's movers (t >= 1), ascending, are
     * mover[(t - 1) * movers .. t * movers); NULL when every entity moves. */
    uint32_t *mover;
} bench_workload;

typedef struct bench_counter {
    uint64_t enters;
    uint64_t leaves;
} bench_counter;

/* One implementation's figures for one run. */
typedef struct bench_impl {
    double median_ms, worst_ms, total_ms; /* per tick, ticks 1..T */
    double build_ms;                      /* add N entities + watchers + first update; <0: n/a */
    double insert_ms;                     /* add N entities alone (no watchers) + flush/update; <0: n/a */
    uint64_t initial;                     /* enters delivered by the first update */
    uint64_t enters, leaves;              /* ticks 1..T */
    size_t bytes;                         /* after the last tick */
} bench_impl;

/* One (case, N, hysteresis) run. */
typedef struct bench_run {
    float hysteresis;
    bench_impl coord, grid, brute, oracle;
    /* coord's, grid's and brute-simd's counts restricted to the oracle's watchers. */
    uint64_t coord_on_oracle_enters, coord_on_oracle_leaves;
    uint64_t grid_on_oracle_enters, grid_on_oracle_leaves;
    uint64_t brute_on_oracle_enters, brute_on_oracle_leaves;
    uint64_t mismatch_coord_grid, mismatch_coord_oracle, mismatch_grid_oracle;
    uint64_t mismatch_brute_grid, mismatch_brute_oracle;
    int checked_ticks;
    double check_ms;         /* time spent checking (not part of any figure) */
    double mean_view;        /* mean view size after the last tick */
    double grid_recomputed;  /* views the grid recomputed in full per tick, mean over ticks 1..T */
    coord_stats stats_build; /* after the first flush */
    coord_stats stats_end;   /* after the last tick */
} bench_run;

typedef struct bench_result {
    bench_case kind;
    uint32_t n;
    int ticks;
    uint32_t movers; /* per tick */
    uint32_t oracle_watchers;
    bench_run run[2]; /* [0]: hysteresis 0, [1]: hysteresis 5 */
} bench_result;

/* ---- utilities ----------------------------------------------------------- */

static uint64_t bench_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * UINT64_C(1000000000) + (uint64_t)ts.tv_nsec;
}

static double bench_ms_since(uint64_t start) { return (double)(bench_now_ns() - start) / 1e6; }

/* splitmix64: deterministic, seedable, good enough for positions. */
static uint64_t bench_rand(uint64_t *state) {
    uint64_t z = (*state += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

/* Uniform in [0, 1). */
static double bench_uniform(uint64_t *state) { return (double)(bench_rand(state) >> 11) * (1.0 / 9007199254740992.0); }

static int bench_compare_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int bench_compare_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

static void bench_summarise(double *samples, int count, bench_impl *out) {
    out->total_ms = 0;
    out->worst_ms = 0;
    for (int i = 0; i < count; i++) {
        out->total_ms += samples[i];
        if (samples[i] > out->worst_ms) out->worst_ms = samples[i];
    }
    qsort(samples, (size_t)count, sizeof *samples, bench_compare_double);
    if (count == 0)
        out->median_ms = 0;
    else if (count % 2)
        out->median_ms = samples[count / 2];
    else
        out->median_ms = (samples[count / 2 - 1] + samples[count / 2]) / 2;
}

/* ---- workload ------------------------------------------------------------ */

static float bench_clamp(float v, float lo, float hi) { return v < lo ? lo : (v > hi ? hi : v); }

/* Reflects v into [lo, hi]; a step (<= 5) is far shorter than the range. */
static float bench_reflect(float v, float lo, float hi) {
    if (v < lo) v = 2 * lo - v;
    if (v > hi) v = 2 * hi - v;
    return bench_clamp(v, lo, hi);
}

/* Rounds to a multiple of q (q > 0), the stress mode where entities sit
 * exactly on square bounds; identity for q == 0. */
static float bench_quantize(float v, float q) { return q > 0 ? roundf(v / q) * q : v; }

/* Generates every position of every tick. `movers` is used by the sparse
 * case only: how many entities move each tick. In the cases where all
 * move, `teleports` of them a tick jump anywhere in their area instead. */
static void bench_workload_generate(bench_workload *w, bench_case kind, uint32_t n, int ticks, uint32_t movers,
                                    uint32_t teleports, uint64_t seed, float quantize) {
    w->kind = kind;
    w->n = n;
    w->ticks = ticks;
    w->movers = kind == BENCH_CASE_SPARSE ? (movers < n ? movers : n) : n;
    w->mover = NULL;
    size_t total = (size_t)(ticks + 1) * n;
    w->x = xmalloc(total * sizeof *w->x);
    w->z = xmalloc(total * sizeof *w->z);
    /* Sparse draws from uniform's stream: same seed, same placement, so
     * the two cases differ only in who moves. */
    bench_case stream = kind == BENCH_CASE_SPARSE ? BENCH_CASE_UNIFORM : kind;
    uint64_t state = seed ^ ((uint64_t)n * UINT64_C(0x9e3779b97f4a7c15)) ^ ((uint64_t)(stream + 1) << 56);
    uint32_t *order = NULL; /* sparse: a permutation of the entities, reshuffled in part each tick */
    if (kind == BENCH_CASE_SPARSE) {
        w->mover = xmalloc(((size_t)ticks * w->movers + 1) * sizeof *w->mover);
        order = xmalloc((size_t)n * sizeof *order);
        for (uint32_t i = 0; i < n; i++) order[i] = i;
    }
    const float hot_lo = (BENCH_WORLD - BENCH_HOTSPOT) / 2, hot_hi = (BENCH_WORLD + BENCH_HOTSPOT) / 2;

    for (uint32_t i = 0; i < n; i++) {
        bool hot = kind == BENCH_CASE_CLUSTERED && i % BENCH_HOTSPOT_MODULO != 0;
        if (hot) {
            w->x[i] = hot_lo + (float)(bench_uniform(&state) * BENCH_HOTSPOT);
            w->z[i] = hot_lo + (float)(bench_uniform(&state) * BENCH_HOTSPOT);
        } else {
            w->x[i] = (float)(bench_uniform(&state) * BENCH_WORLD);
            w->z[i] = (float)(bench_uniform(&state) * BENCH_WORLD);
        }
        w->x[i] = bench_quantize(w->x[i], quantize);
        w->z[i] = bench_quantize(w->z[i], quantize);
    }
    for (int t = 1; t <= ticks; t++) {
        const float *px = w->x + (size_t)(t - 1) * n, *pz = w->z + (size_t)(t - 1) * n;
        float *nx = w->x + (size_t)t * n, *nz = w->z + (size_t)t * n;
        uint32_t *chosen = NULL;
        if (order) {
            /* This tick's movers: a fresh uniform random subset (partial
             * Fisher-Yates), issued in ascending order as a server walking
             * its entity table would; the others keep their position. */
            chosen = w->mover + (size_t)(t - 1) * w->movers;
            for (uint32_t k = 0; k < w->movers && k < n; k++) { /* movers <= n: n - k > 0 */
                uint32_t j = k + (uint32_t)(bench_rand(&state) % (n - k));
                uint32_t swap = order[k];
                order[k] = order[j];
                order[j] = swap;
                chosen[k] = order[k];
            }
            qsort(chosen, w->movers, sizeof *chosen, bench_compare_u32);
            memcpy(nx, px, (size_t)n * sizeof *nx);
            memcpy(nz, pz, (size_t)n * sizeof *nz);
        }
        for (uint32_t k = 0; k < w->movers; k++) {
            uint32_t i = chosen ? chosen[k] : k;
            double dx, dz;
            do { /* uniform in the disc of radius BENCH_STEP, by rejection */
                dx = (bench_uniform(&state) * 2 - 1) * BENCH_STEP;
                dz = (bench_uniform(&state) * 2 - 1) * BENCH_STEP;
            } while (dx * dx + dz * dz > (double)BENCH_STEP * BENCH_STEP);
            float x = px[i] + (float)dx, z = pz[i] + (float)dz;
            if (kind == BENCH_CASE_CLUSTERED && i % BENCH_HOTSPOT_MODULO != 0) {
                nx[i] = bench_reflect(x, hot_lo, hot_hi);
                nz[i] = bench_reflect(z, hot_lo, hot_hi);
            } else {
                nx[i] = bench_clamp(x, 0, BENCH_WORLD);
                nz[i] = bench_clamp(z, 0, BENCH_WORLD);
            }
            nx[i] = bench_quantize(nx[i], quantize);
            nz[i] = bench_quantize(nz[i], quantize);
        }
        for (uint32_t k = 0; k < teleports && n > 0 && kind != BENCH_CASE_SPARSE; k++) {
            uint32_t i = (uint32_t)(bench_rand(&state) % n);
            bool hot = kind == BENCH_CASE_CLUSTERED && i % BENCH_HOTSPOT_MODULO != 0;
            float low = hot ? hot_lo : 0, span = hot ? BENCH_HOTSPOT : BENCH_WORLD;
            nx[i] = bench_quantize(low + (float)(bench_uniform(&state) * span), quantize);
            nz[i] = bench_quantize(low + (float)(bench_uniform(&state) * span), quantize);
        }
    }
    free(order);
}

static void bench_workload_free(bench_workload *w) {
    free(w->x);
    free(w->z);
    free(w->mover);
}

/* ---- the oracle ---------------------------------------------------------- */

/* The rule of coord.h in its plainest form, every entity against every
 * followed watcher, views as bitmaps over entity indices. */
typedef struct bench_oracle {
    uint32_t n;
    uint32_t count;   /* watchers followed */
    uint32_t *owners; /* their entity indices */
    int32_t *slot_of; /* by entity index: slot in owners, or -1 */
    uint64_t *bits;   /* count x words */
    size_t words;
    uint32_t *view_size;   /* by slot */
    bench_counter *counts; /* by slot */
    float extent, outer;
} bench_oracle;

static void bench_oracle_init(bench_oracle *o, uint32_t n, uint32_t sample, bool all, float extent, float hysteresis,
                              uint64_t seed) {
    o->n = n;
    o->count = all || sample >= n ? n : sample;
    o->owners = xmalloc((size_t)n * sizeof *o->owners);
    o->slot_of = xmalloc((size_t)n * sizeof *o->slot_of);
    for (uint32_t i = 0; i < n; i++) o->owners[i] = i;
    if (o->count < n) { /* a fixed random sample: partial Fisher-Yates, then sorted */
        uint64_t state = seed ^ UINT64_C(0x6f7261636c65);
        for (uint32_t i = 0; i < o->count; i++) {
            uint32_t j = i + (uint32_t)(bench_rand(&state) % (n - i));
            uint32_t t = o->owners[i];
            o->owners[i] = o->owners[j];
            o->owners[j] = t;
        }
        /* insertion sort: the sample is small */
        for (uint32_t i = 1; i < o->count; i++)
            for (uint32_t j = i; j > 0 && o->owners[j - 1] > o->owners[j]; j--) {
                uint32_t t = o->owners[j];
                o->owners[j] = o->owners[j - 1];
                o->owners[j - 1] = t;
            }
    }
    for (uint32_t i = 0; i < n; i++) o->slot_of[i] = -1;
    for (uint32_t k = 0; k < o->count; k++) o->slot_of[o->owners[k]] = (int32_t)k;
    o->words = (n + 63) / 64;
    o->bits = xcalloc((size_t)o->count * o->words, sizeof *o->bits);
    o->view_size = xcalloc(o->count, sizeof *o->view_size);
    o->counts = xcalloc(o->count, sizeof *o->counts);
    o->extent = extent;
    o->outer = extent + hysteresis;
}

static void bench_oracle_free(bench_oracle *o) {
    free(o->owners);
    free(o->slot_of);
    free(o->bits);
    free(o->view_size);
    free(o->counts);
}

static inline bool bench_oracle_has(const bench_oracle *o, uint32_t slot, uint32_t entity) {
    return (o->bits[(size_t)slot * o->words + entity / 64] >> (entity % 64)) & 1;
}

static void bench_oracle_step(bench_oracle *o, const float *x, const float *z) {
    const float r = o->extent, big_r = o->outer;
    for (uint32_t k = 0; k < o->count; k++) {
        uint32_t w = o->owners[k];
        uint64_t *bits = o->bits + (size_t)k * o->words;
        float ox = x[w], oz = z[w];
        float lo_x = ox - r, hi_x = ox + r, lo_z = oz - r, hi_z = oz + r;
        float big_lo_x = ox - big_r, big_hi_x = ox + big_r, big_lo_z = oz - big_r, big_hi_z = oz + big_r;
        for (uint32_t e = 0; e < o->n; e++) {
            if (e == w) continue; /* an owner never sees itself */
            float ex = x[e], ez = z[e];
            bool inside_inner = lo_x <= ex && ex <= hi_x && lo_z <= ez && ez <= hi_z;
            bool inside_outer = big_lo_x <= ex && ex <= big_hi_x && big_lo_z <= ez && ez <= big_hi_z;
            uint64_t bit = UINT64_C(1) << (e % 64);
            bool old_view = (bits[e / 64] & bit) != 0;
            bool new_view = inside_inner ? true : (inside_outer ? old_view : false);
            if (new_view == old_view) continue;
            bits[e / 64] ^= bit;
            if (new_view) {
                o->counts[k].enters++;
                o->view_size[k]++;
            } else {
                o->counts[k].leaves++;
                o->view_size[k]--;
            }
        }
    }
}

/* ---- callbacks: they count, nothing else --------------------------------- */

static void bench_coord_on_enter(coord_system *system, uint32_t watcher, uint32_t entity, void *user_data) {
    (void)system, (void)watcher, (void)entity;
    ((bench_counter *)user_data)->enters++;
}

static void bench_coord_on_leave(coord_system *system, uint32_t watcher, uint32_t entity, void *user_data) {
    (void)system, (void)watcher, (void)entity;
    ((bench_counter *)user_data)->leaves++;
}

static void bench_grid_on_enter(uint32_t watcher, uint32_t entity, void *user_data) {
    (void)entity;
    ((bench_counter *)user_data)[watcher].enters++;
}

static void bench_grid_on_leave(uint32_t watcher, uint32_t entity, void *user_data) {
    (void)entity;
    ((bench_counter *)user_data)[watcher].leaves++;
}

static const coord_watcher_callbacks bench_coord_callbacks = {bench_coord_on_enter, bench_coord_on_leave};
static const aoi_grid_callbacks bench_grid_callbacks = {bench_grid_on_enter, bench_grid_on_leave};
/* brute-simd names watchers and entities as the grid does: the same counters. */
static const aoi_brute_simd_callbacks bench_brute_callbacks = {bench_grid_on_enter, bench_grid_on_leave};

/* ---- checking ------------------------------------------------------------ */

/* What the checker needs to compare views: the systems and the id maps. */
typedef struct bench_check {
    coord_system *coord;
    const uint32_t *entity_id;  /* entity index -> coord entity id */
    const uint32_t *watcher_id; /* entity index -> coord watcher id */
    aoi_grid *grid;
    const aoi_brute_simd *brute;
    const bench_oracle *oracle;
    uint32_t n;
    uint32_t *mark; /* by entity index, stamped with epoch */
    uint32_t epoch;
    int details; /* mismatches printed so far */
    const char *label;
} bench_check;

static uint32_t bench_coord_index(const bench_check *c, uint32_t id) {
    uintptr_t tag = (uintptr_t)coord_entity_user_data(c->coord, id);
    return tag == 0 || tag > c->n ? UINT32_MAX : (uint32_t)(tag - 1);
}

static void bench_check_detail(bench_check *c, int tick, uint32_t w, uint32_t e, const char *what) {
    if (c->details >= BENCH_MISMATCH_DETAILS) return;
    c->details++;
    if (e == COORD_NONE)
        fprintf(stderr, "bench-aoi: MISMATCH %s tick %d watcher %" PRIu32 ": %s\n", c->label, tick, w, what);
    else
        fprintf(stderr, "bench-aoi: MISMATCH %s tick %d watcher %" PRIu32 " entity %" PRIu32 ": %s\n", c->label, tick,
                w, e, what);
}

static uint32_t bench_check_stamp(bench_check *c) {
    if (++c->epoch == 0) {
        memset(c->mark, 0, (size_t)c->n * sizeof *c->mark);
        c->epoch = 1;
    }
    return c->epoch;
}

/* brute-simd's view of watcher w against the grid's and, when the oracle
 * follows w (slot >= 0), against the oracle's: both symmetric differences,
 * counted exactly from the bitset (its kept size is checked too). */
static void bench_check_brute(bench_check *c, int tick, uint32_t w, const uint32_t *grid_view, size_t grid_count,
                              int32_t slot, bench_run *run) {
    size_t words;
    const uint64_t *bits = aoi_brute_simd_view_bits(c->brute, w, &words);
    uint64_t brute_count = 0;
    for (size_t k = 0; k < words; k++) brute_count += (uint64_t)__builtin_popcountll(bits[k]);
    uint64_t kept = aoi_brute_simd_view_size(c->brute, w);
    if (kept != brute_count) {
        bench_check_detail(c, tick, w, COORD_NONE, "brute-simd view size != its bitset");
        run->mismatch_brute_grid += kept > brute_count ? kept - brute_count : brute_count - kept;
    }
    uint64_t in_both = 0;
    for (size_t k = 0; k < grid_count; k++) {
        uint32_t e = grid_view[k];
        if (e / 64 < words && (bits[e / 64] >> (e % 64)) & 1)
            in_both++;
        else
            bench_check_detail(c, tick, w, e, "grid sees it, brute-simd does not");
    }
    if (brute_count > in_both) bench_check_detail(c, tick, w, COORD_NONE, "brute-simd sees more than the grid");
    run->mismatch_brute_grid += brute_count + grid_count - 2 * in_both;
    if (slot < 0) return;

    const uint64_t *oracle_bits = c->oracle->bits + (size_t)slot * c->oracle->words;
    uint64_t off = 0;
    for (size_t k = 0; k < c->oracle->words || k < words; k++) {
        uint64_t mine = k < words ? bits[k] : 0, theirs = k < c->oracle->words ? oracle_bits[k] : 0;
        off += (uint64_t)__builtin_popcountll(mine ^ theirs);
    }
    if (off) bench_check_detail(c, tick, w, COORD_NONE, "brute-simd view differs from the oracle's");
    run->mismatch_brute_oracle += off;
}

/* Compares views after `tick` and adds mismatching (watcher, entity) pairs
 * to the run's counters. */
static void bench_check_views(bench_check *c, int tick, bench_run *run) {
    for (uint32_t w = 0; w < c->n; w++) {
        size_t grid_count;
        const uint32_t *grid_view = aoi_grid_view(c->grid, w, &grid_count);
        uint32_t cw = c->watcher_id[w];
        size_t coord_count = coord_watcher_view_size(c->coord, cw);
        int32_t slot = c->oracle->slot_of[w];
        bench_check_brute(c, tick, w, grid_view, grid_count, slot, run);

        /* coord against grid: grid within coord and equal sizes is equality. */
        uint64_t missing = 0;
        for (size_t k = 0; k < grid_count; k++)
            if (!coord_watcher_sees(c->coord, cw, c->entity_id[grid_view[k]])) {
                missing++;
                bench_check_detail(c, tick, w, grid_view[k], "grid sees it, coord does not");
            }
        bool coord_scan = missing || coord_count != grid_count || slot >= 0;
        if (!coord_scan) continue;

        uint32_t stamp = bench_check_stamp(c);
        for (size_t k = 0; k < grid_count; k++) c->mark[grid_view[k]] = stamp;
        uint64_t extra = 0, coord_in_oracle = 0, coord_walked = 0;
        size_t cursor = 0;
        uint32_t id;
        while ((id = coord_watcher_next(c->coord, cw, &cursor)) != COORD_NONE) {
            coord_walked++;
            uint32_t e = bench_coord_index(c, id);
            if (e == UINT32_MAX || c->mark[e] != stamp) {
                extra++;
                bench_check_detail(c, tick, w, e, "coord sees it, grid does not");
            }
            if (slot >= 0 && e != UINT32_MAX && bench_oracle_has(c->oracle, (uint32_t)slot, e)) coord_in_oracle++;
            if (coord_walked > coord_count + c->n) break; /* a broken iterator must not hang the bench */
        }
        if (coord_walked != coord_count) bench_check_detail(c, tick, w, COORD_NONE, "coord view size != iterated");
        run->mismatch_coord_grid += missing + extra;
        if (slot < 0) continue;

        /* Both against the oracle: |A| + |O| - 2 |A and O|. */
        uint64_t oracle_count = c->oracle->view_size[slot];
        uint64_t grid_in_oracle = 0;
        for (size_t k = 0; k < grid_count; k++)
            if (bench_oracle_has(c->oracle, (uint32_t)slot, grid_view[k])) grid_in_oracle++;
        uint64_t grid_off = grid_count + oracle_count - 2 * grid_in_oracle;
        uint64_t coord_off = coord_walked + oracle_count - 2 * coord_in_oracle;
        if (grid_off) bench_check_detail(c, tick, w, COORD_NONE, "grid view differs from the oracle's");
        if (coord_off) bench_check_detail(c, tick, w, COORD_NONE, "coord view differs from the oracle's");
        run->mismatch_grid_oracle += grid_off;
        run->mismatch_coord_oracle += coord_off;
    }
    run->checked_ticks++;
}

/* ---- one run ------------------------------------------------------------- */

static void bench_sum_counters(const bench_counter *counts, uint32_t n, uint64_t *enters, uint64_t *leaves) {
    *enters = *leaves = 0;
    for (uint32_t i = 0; i < n; i++) {
        *enters += counts[i].enters;
        *leaves += counts[i].leaves;
    }
}

static void bench_run_one(const bench_options *opt, const bench_workload *wl, float hysteresis, bench_run *run,
                          uint32_t *oracle_watchers) {
    const uint32_t n = wl->n;
    const int ticks = wl->ticks;
    memset(run, 0, sizeof *run);
    run->hysteresis = hysteresis;
    char label[64];
    snprintf(label, sizeof label, "%s n=%" PRIu32 " h=%g", bench_case_names[wl->kind], n, (double)hysteresis);

    uint32_t *entity_id = xmalloc((size_t)n * sizeof *entity_id);
    uint32_t *watcher_id = xmalloc((size_t)n * sizeof *watcher_id);
    bench_counter *coord_counts = xcalloc(n, sizeof *coord_counts);
    bench_counter *grid_counts = xcalloc(n, sizeof *grid_counts);
    bench_counter *brute_counts = xcalloc(n, sizeof *brute_counts);
    double *coord_ms = xmalloc((size_t)(ticks + 1) * sizeof *coord_ms);
    double *grid_ms = xmalloc((size_t)(ticks + 1) * sizeof *grid_ms);
    double *brute_ms = xmalloc((size_t)(ticks + 1) * sizeof *brute_ms);
    double *oracle_ms = xmalloc((size_t)(ticks + 1) * sizeof *oracle_ms);

    /* Insertion: N entities, N watchers, first flush (initial views). */
    uint64_t start = bench_now_ns();
    coord_system *coord = coord_create(false);
    if (!coord) log_panic("coord_create failed");
    coord_set_mode(coord, opt->coord_mode);
    for (uint32_t i = 0; i < n; i++) {
        entity_id[i] = coord_add_entity(coord, wl->x[i], 0, wl->z[i], 0, 0, (void *)(uintptr_t)(i + 1));
        if (entity_id[i] == COORD_NONE) log_panic("coord_add_entity failed for entity %" PRIu32, i);
    }
    for (uint32_t i = 0; i < n; i++) {
        watcher_id[i] =
            coord_add_watcher(coord, entity_id[i], BENCH_EXTENT, hysteresis, &bench_coord_callbacks, &coord_counts[i]);
        if (watcher_id[i] == COORD_NONE) log_panic("coord_add_watcher failed for entity %" PRIu32, i);
    }
    coord_flush(coord);
    run->coord.build_ms = bench_ms_since(start);
    coord_get_stats(coord, &run->stats_build);

    start = bench_now_ns();
    aoi_grid *grid = aoi_grid_create(0, 0, BENCH_WORLD, BENCH_WORLD, opt->grid_cell);
    if (!grid) log_panic("aoi_grid_create failed");
    for (uint32_t i = 0; i < n; i++) aoi_grid_add_entity(grid, wl->x[i], wl->z[i]);
    for (uint32_t i = 0; i < n; i++) aoi_grid_set_watcher(grid, i, BENCH_EXTENT, hysteresis);
    aoi_grid_update(grid, &bench_grid_callbacks, grid_counts);
    run->grid.build_ms = bench_ms_since(start);

    start = bench_now_ns();
    aoi_brute_simd *brute = aoi_brute_simd_create(n, opt->brute_kernel);
    if (!brute) log_panic("aoi_brute_simd_create failed (kernel %s)", opt->brute_kernel ? opt->brute_kernel : "best");
    for (uint32_t i = 0; i < n; i++)
        if (aoi_brute_simd_add_entity(brute, wl->x[i], wl->z[i]) == AOI_BRUTE_SIMD_NONE)
            log_panic("aoi_brute_simd_add_entity failed for entity %" PRIu32, i);
    for (uint32_t i = 0; i < n; i++) aoi_brute_simd_set_watcher(brute, i, BENCH_EXTENT, hysteresis);
    aoi_brute_simd_update(brute, &bench_brute_callbacks, brute_counts);
    run->brute.build_ms = bench_ms_since(start);

    /* Insertion alone: N entities into an empty system, no watchers, one
     * flush. Measured while the built systems are alive, so it draws on
     * fresh memory as the build did; freeing is not timed. */
    start = bench_now_ns();
    coord_system *bare = coord_create(false);
    if (!bare) log_panic("coord_create failed");
    for (uint32_t i = 0; i < n; i++)
        if (coord_add_entity(bare, wl->x[i], 0, wl->z[i], 0, 0, NULL) == COORD_NONE)
            log_panic("coord_add_entity failed for entity %" PRIu32, i);
    coord_flush(bare);
    run->coord.insert_ms = bench_ms_since(start);
    coord_free(bare);
    start = bench_now_ns();
    aoi_grid *bare_grid = aoi_grid_create(0, 0, BENCH_WORLD, BENCH_WORLD, opt->grid_cell);
    if (!bare_grid) log_panic("aoi_grid_create failed");
    for (uint32_t i = 0; i < n; i++) aoi_grid_add_entity(bare_grid, wl->x[i], wl->z[i]);
    aoi_grid_update(bare_grid, NULL, NULL);
    run->grid.insert_ms = bench_ms_since(start);
    aoi_grid_free(bare_grid);
    start = bench_now_ns();
    aoi_brute_simd *bare_brute = aoi_brute_simd_create(n, opt->brute_kernel);
    if (!bare_brute) log_panic("aoi_brute_simd_create failed");
    for (uint32_t i = 0; i < n; i++) aoi_brute_simd_add_entity(bare_brute, wl->x[i], wl->z[i]);
    aoi_brute_simd_update(bare_brute, NULL, NULL);
    run->brute.insert_ms = bench_ms_since(start);
    aoi_brute_simd_free(bare_brute);

    bench_oracle oracle;
    bench_oracle_init(&oracle, n, opt->oracle_sample, n <= opt->oracle_full_max, BENCH_EXTENT, hysteresis,
                      opt->seed ^ n);
    *oracle_watchers = oracle.count;
    const double oracle_scale = (double)n / (double)oracle.count;
    start = bench_now_ns();
    bench_oracle_step(&oracle, wl->x, wl->z);
    run->oracle.build_ms = bench_ms_since(start) * oracle_scale;
    run->oracle.insert_ms = -1; /* it has no structure to insert into */

    bench_check check = {
        .coord = coord,
        .entity_id = entity_id,
        .watcher_id = watcher_id,
        .grid = grid,
        .brute = brute,
        .oracle = &oracle,
        .n = n,
        .mark = xcalloc(n, sizeof(uint32_t)),
        .label = label,
    };
    bench_check_views(&check, 0, run);

    uint64_t unused;
    bench_sum_counters(coord_counts, n, &run->coord.initial, &unused);
    bench_sum_counters(grid_counts, n, &run->grid.initial, &unused);
    bench_sum_counters(brute_counts, n, &run->brute.initial, &unused);
    bench_sum_counters(oracle.counts, oracle.count, &run->oracle.initial, &unused);
    memset(coord_counts, 0, (size_t)n * sizeof *coord_counts);
    memset(grid_counts, 0, (size_t)n * sizeof *grid_counts);
    memset(brute_counts, 0, (size_t)n * sizeof *brute_counts);
    memset(oracle.counts, 0, (size_t)oracle.count * sizeof *oracle.counts);

    uint64_t grid_recomputed = 0;
    for (int t = 1; t <= ticks; t++) {
        const float *x = wl->x + (size_t)t * n, *z = wl->z + (size_t)t * n;
        /* NULL: every entity moves; else this tick's movers, ascending. */
        const uint32_t *movers = wl->mover ? wl->mover + (size_t)(t - 1) * wl->movers : NULL;
        const uint32_t mover_count = wl->movers;
        /* Rotate which of coord, grid and brute-simd runs first, so none
         * always finds the caches another (or the checker) left behind. */
        for (int turn = 0; turn < 3; turn++) {
            int which = (turn + t) % 3;
            if (which == 0) {
                start = bench_now_ns();
                for (uint32_t k = 0; k < mover_count; k++) {
                    uint32_t i = movers ? movers[k] : k;
                    if (coord_move_entity(coord, entity_id[i], x[i], 0, z[i]) != 0)
                        log_panic("coord_move_entity failed for entity %" PRIu32, i);
                }
                coord_flush(coord);
                coord_ms[t - 1] = bench_ms_since(start);
            } else if (which == 1) {
                start = bench_now_ns();
                for (uint32_t k = 0; k < mover_count; k++) {
                    uint32_t i = movers ? movers[k] : k;
                    aoi_grid_move_entity(grid, i, x[i], z[i]);
                }
                aoi_grid_update(grid, &bench_grid_callbacks, grid_counts);
                grid_ms[t - 1] = bench_ms_since(start);
                grid_recomputed += aoi_grid_recomputed(grid);
            } else {
                start = bench_now_ns();
                for (uint32_t k = 0; k < mover_count; k++) {
                    uint32_t i = movers ? movers[k] : k;
                    aoi_brute_simd_move_entity(brute, i, x[i], z[i]);
                }
                aoi_brute_simd_update(brute, &bench_brute_callbacks, brute_counts);
                brute_ms[t - 1] = bench_ms_since(start);
            }
        }
        start = bench_now_ns();
        bench_oracle_step(&oracle, x, z);
        oracle_ms[t - 1] = bench_ms_since(start) * oracle_scale;

        if (t % opt->check_every == 0 || t == ticks) {
            start = bench_now_ns();
            bench_check_views(&check, t, run);
            run->check_ms += bench_ms_since(start);
        }
    }

    bench_summarise(coord_ms, ticks, &run->coord);
    bench_summarise(grid_ms, ticks, &run->grid);
    bench_summarise(brute_ms, ticks, &run->brute);
    bench_summarise(oracle_ms, ticks, &run->oracle);
    bench_sum_counters(coord_counts, n, &run->coord.enters, &run->coord.leaves);
    bench_sum_counters(grid_counts, n, &run->grid.enters, &run->grid.leaves);
    bench_sum_counters(brute_counts, n, &run->brute.enters, &run->brute.leaves);
    bench_sum_counters(oracle.counts, oracle.count, &run->oracle.enters, &run->oracle.leaves);
    for (uint32_t k = 0; k < oracle.count; k++) {
        uint32_t w = oracle.owners[k];
        run->coord_on_oracle_enters += coord_counts[w].enters;
        run->coord_on_oracle_leaves += coord_counts[w].leaves;
        run->grid_on_oracle_enters += grid_counts[w].enters;
        run->grid_on_oracle_leaves += grid_counts[w].leaves;
        run->brute_on_oracle_enters += brute_counts[w].enters;
        run->brute_on_oracle_leaves += brute_counts[w].leaves;
    }
    coord_get_stats(coord, &run->stats_end);
    run->coord.bytes = run->stats_end.bytes;
    run->grid.bytes = aoi_grid_bytes(grid);
    run->brute.bytes = aoi_brute_simd_bytes(brute);
    run->oracle.bytes = (size_t)oracle.count * oracle.words * sizeof(uint64_t) +
                        (size_t)n * (sizeof *oracle.owners + sizeof *oracle.slot_of);
    uint64_t view_total = 0;
    for (uint32_t w = 0; w < n; w++) {
        size_t count;
        aoi_grid_view(grid, w, &count);
        view_total += count;
    }
    run->mean_view = n ? (double)view_total / n : 0;
    run->grid_recomputed = ticks > 0 ? (double)grid_recomputed / ticks : 0;

    free(check.mark);
    bench_oracle_free(&oracle);
    aoi_brute_simd_free(brute);
    aoi_grid_free(grid);
    coord_free(coord);
    free(entity_id);
    free(watcher_id);
    free(coord_counts);
    free(grid_counts);
    free(brute_counts);
    free(coord_ms);
    free(grid_ms);
    free(brute_ms);
    free(oracle_ms);
}

/* ---- reporting ----------------------------------------------------------- */

static double bench_ratio(double a, double b) { return b > 0 ? a / b : 0; }

static uint64_t bench_mismatches(const bench_run *run) {
    return run->mismatch_coord_grid + run->mismatch_coord_oracle + run->mismatch_grid_oracle +
           run->mismatch_brute_grid + run->mismatch_brute_oracle;
}

/* Every implementation reported the same events (on the oracle's watchers
 * for the oracle). */
static bool bench_events_agree(const bench_run *run) {
    return run->coord.initial == run->grid.initial && run->coord.enters == run->grid.enters &&
           run->coord.leaves == run->grid.leaves && run->oracle.enters == run->coord_on_oracle_enters &&
           run->oracle.leaves == run->coord_on_oracle_leaves && run->oracle.enters == run->grid_on_oracle_enters &&
           run->oracle.leaves == run->grid_on_oracle_leaves && run->brute.initial == run->grid.initial &&
           run->brute.enters == run->grid.enters && run->brute.leaves == run->grid.leaves &&
           run->oracle.enters == run->brute_on_oracle_enters && run->oracle.leaves == run->brute_on_oracle_leaves;
}

/* A milliseconds figure, or "-" where it does not apply (< 0). */
static const char *bench_format_ms(char *buffer, size_t size, double ms) {
    if (ms >= 0)
        snprintf(buffer, size, "%.2f", ms);
    else
        snprintf(buffer, size, "-");
    return buffer;
}

static void bench_print_impl_row(const char *name, const bench_run *run, const bench_impl *impl, uint32_t n,
                                 bool scaled) {
    char build[32], insert[32];
    printf("  %-7s %4g %10.3f %10.3f %10s %14s %10.1f %12" PRIu64 " %12" PRIu64 " %10" PRIu64 "%s\n", name,
           (double)run->hysteresis, impl->median_ms, impl->worst_ms,
           bench_format_ms(build, sizeof build, impl->build_ms),
           bench_format_ms(insert, sizeof insert, impl->insert_ms), (double)impl->bytes / n, impl->enters, impl->leaves,
           impl->initial, scaled ? "  (*)" : "");
}

static void bench_print_result(const bench_result *r) {
    bool sampled = r->oracle_watchers < r->n;
    printf("\n%s N=%" PRIu32 ", %d ticks, %" PRIu32 " movers/tick; oracle follows %s%" PRIu32 " of %" PRIu32
           " watchers\n",
           bench_case_names[r->kind], r->n, r->ticks, r->movers, sampled ? "a fixed random sample of " : "all ",
           r->oracle_watchers, r->n);
    printf("  %-7s %4s %10s %10s %10s %14s %10s %12s %12s %10s\n", "impl", "H", "med ms", "worst ms", "build ms",
           "ins-only ms", "bytes/ent", "enters", "leaves", "initial");
    for (int h = 0; h < 2; h++) {
        const bench_run *run = &r->run[h];
        bench_print_impl_row("coord", run, &run->coord, r->n, false);
        bench_print_impl_row("grid", run, &run->grid, r->n, false);
        bench_print_impl_row("brute", run, &run->brute, r->n, false);
        bench_print_impl_row("oracle", run, &run->oracle, r->n, sampled);
    }
    if (sampled)
        printf("  (*) oracle: ms scaled by %" PRIu32 "/%" PRIu32 " to all watchers; events, initial and bytes are"
               " its sample's\n",
               r->n, r->oracle_watchers);
    for (int h = 0; h < 2; h++) {
        const bench_run *run = &r->run[h];
        uint64_t ticks = (uint64_t)(r->ticks > 0 ? r->ticks : 1);
        printf("  H=%g: coord/grid %.2f  coord/brute %.2f  grid/coord %.2f  oracle/coord %.2f  | mean view %.1f,"
               " coord swaps/tick %.3g, crossings/tick %.3g, scanned/tick %.3g, cancelled %" PRIu64
               ", mode changes %" PRIu64 ", grid views recomputed/tick %.0f (%.1f %%)\n",
               (double)run->hysteresis, bench_ratio(run->coord.median_ms, run->grid.median_ms),
               bench_ratio(run->coord.median_ms, run->brute.median_ms),
               bench_ratio(run->grid.median_ms, run->coord.median_ms),
               bench_ratio(run->oracle.median_ms, run->coord.median_ms), run->mean_view,
               (double)(run->stats_end.swaps - run->stats_build.swaps) / (double)ticks,
               (double)(run->stats_end.crossings - run->stats_build.crossings) / (double)ticks,
               (double)(run->stats_end.scanned - run->stats_build.scanned) / (double)ticks,
               run->stats_end.cancelled - run->stats_build.cancelled, run->stats_end.mode_changes, run->grid_recomputed,
               100.0 * run->grid_recomputed / r->n);
        printf("        events %s (oracle's watchers: oracle %" PRIu64 "/%" PRIu64 ", coord %" PRIu64 "/%" PRIu64
               ", grid %" PRIu64 "/%" PRIu64 ", brute %" PRIu64 "/%" PRIu64 ");"
               " mismatched pairs over %d checked ticks: coord~grid %" PRIu64 ", coord~oracle %" PRIu64
               ", grid~oracle %" PRIu64 ", brute~grid %" PRIu64 ", brute~oracle %" PRIu64 "\n",
               bench_events_agree(run) ? "agree" : "DISAGREE", run->oracle.enters, run->oracle.leaves,
               run->coord_on_oracle_enters, run->coord_on_oracle_leaves, run->grid_on_oracle_enters,
               run->grid_on_oracle_leaves, run->brute_on_oracle_enters, run->brute_on_oracle_leaves, run->checked_ticks,
               run->mismatch_coord_grid, run->mismatch_coord_oracle, run->mismatch_grid_oracle,
               run->mismatch_brute_grid, run->mismatch_brute_oracle);
    }
    printf("  coord hysteresis/plain %.2f   grid hysteresis/plain %.2f   brute hysteresis/plain %.2f\n",
           bench_ratio(r->run[1].coord.median_ms, r->run[0].coord.median_ms),
           bench_ratio(r->run[1].grid.median_ms, r->run[0].grid.median_ms),
           bench_ratio(r->run[1].brute.median_ms, r->run[0].brute.median_ms));
}

static void bench_print_summary(const bench_result *results, size_t count) {
    printf("\nsummary (median ms per tick; c/g, c/b: coord over grid, over brute-simd (below 1: coord is faster);"
           " mismatches = all pairs, both H; c build / c ins: coord's build and entities-only insert ms, the H0"
           " run's; B/ent: bytes per entity, the H5 run's)\n");
    printf("%-9s %6s %5s %7s %9s %9s %9s %9s %9s %9s %10s %10s %6s %6s %6s %6s %6s %9s %9s %9s %9s %9s %5s\n", "case",
           "N", "ticks", "movers", "coord H0", "coord H5", "grid H0", "grid H5", "brute H0", "brute H5", "oracle H0",
           "oracle H5", "c/g H0", "c/g H5", "c/b H0", "c/b H5", "c5/c0", "c build", "c ins", "c B/ent", "g B/ent",
           "b B/ent", "mism");
    for (size_t i = 0; i < count; i++) {
        const bench_result *r = &results[i];
        const bench_run *p = &r->run[0], *h = &r->run[1];
        printf("%-9s %6" PRIu32 " %5d %7" PRIu32 " %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f %10.3f %10.3f %6.2f %6.2f"
               " %6.2f %6.2f %6.2f %9.2f %9.2f %9.0f %9.0f %9.0f %5" PRIu64 "\n",
               bench_case_names[r->kind], r->n, r->ticks, r->movers, p->coord.median_ms, h->coord.median_ms,
               p->grid.median_ms, h->grid.median_ms, p->brute.median_ms, h->brute.median_ms, p->oracle.median_ms,
               h->oracle.median_ms, bench_ratio(p->coord.median_ms, p->grid.median_ms),
               bench_ratio(h->coord.median_ms, h->grid.median_ms), bench_ratio(p->coord.median_ms, p->brute.median_ms),
               bench_ratio(h->coord.median_ms, h->brute.median_ms), bench_ratio(h->coord.median_ms, p->coord.median_ms),
               p->coord.build_ms, p->coord.insert_ms, (double)h->coord.bytes / r->n, (double)h->grid.bytes / r->n,
               (double)h->brute.bytes / r->n, bench_mismatches(p) + bench_mismatches(h));
    }
}

static void bench_json_impl(const char *name, const bench_impl *impl, uint32_t n, bool last) {
    char insert[32] = "null";
    if (impl->insert_ms >= 0) snprintf(insert, sizeof insert, "%.6f", impl->insert_ms);
    printf("\"%s\":{\"median_ms\":%.6f,\"worst_ms\":%.6f,\"total_ms\":%.6f,\"build_ms\":%.6f,"
           "\"insert_only_ms\":%s,\"initial_enters\":%" PRIu64 ",\"enters\":%" PRIu64 ",\"leaves\":%" PRIu64
           ",\"bytes\":%zu,\"bytes_per_entity\":%.3f}%s",
           name, impl->median_ms, impl->worst_ms, impl->total_ms, impl->build_ms, insert, impl->initial, impl->enters,
           impl->leaves, impl->bytes, (double)impl->bytes / n, last ? "" : ",");
}

static void bench_print_json(const bench_options *opt, const bench_result *results, size_t count) {
    printf("{\"bench\":\"aoi\",\"seed\":%" PRIu64 ",\"world\":%g,\"extent\":%g,\"hysteresis\":%g,\"step\":%g,"
           "\"hotspot\":%g,\"sparse_movers_percent\":%" PRIu32 ",\"grid_cell\":%g,\"quantize\":%g,"
           "\"oracle_sample\":%" PRIu32 ",\"oracle_full_max\":%" PRIu32
           ",\"check_every\":%d,\"brute_simd_kernel\":\"%s\",\"results\":[",
           opt->seed, (double)BENCH_WORLD, (double)BENCH_EXTENT, (double)BENCH_HYSTERESIS, (double)BENCH_STEP,
           (double)BENCH_HOTSPOT, opt->sparse_movers_percent, (double)opt->grid_cell, (double)opt->quantize,
           opt->oracle_sample, opt->oracle_full_max, opt->check_every, opt->brute_kernel);
    for (size_t i = 0; i < count; i++) {
        const bench_result *r = &results[i];
        printf("%s{\"case\":\"%s\",\"n\":%" PRIu32 ",\"ticks\":%d,\"movers_per_tick\":%" PRIu32
               ",\"oracle_watchers\":%" PRIu32
               ",\"oracle_scaled\":%s,\"coord_hysteresis_over_plain\":%.4f,\"grid_hysteresis_over_plain\":%.4f,"
               "\"runs\":[",
               i ? "," : "", bench_case_names[r->kind], r->n, r->ticks, r->movers, r->oracle_watchers,
               r->oracle_watchers < r->n ? "true" : "false",
               bench_ratio(r->run[1].coord.median_ms, r->run[0].coord.median_ms),
               bench_ratio(r->run[1].grid.median_ms, r->run[0].grid.median_ms));
        for (int h = 0; h < 2; h++) {
            const bench_run *run = &r->run[h];
            uint64_t ticks = (uint64_t)(r->ticks > 0 ? r->ticks : 1);
            printf("%s{\"hysteresis\":%g,", h ? "," : "", (double)run->hysteresis);
            bench_json_impl("coord", &run->coord, r->n, false);
            bench_json_impl("grid", &run->grid, r->n, false);
            bench_json_impl("brute_simd", &run->brute, r->n, false);
            bench_json_impl("oracle", &run->oracle, r->n, false);
            printf("\"ratios\":{\"grid_over_coord\":%.4f,\"oracle_over_coord\":%.4f,\"coord_over_grid\":%.4f,"
                   "\"coord_over_brute_simd\":%.4f,\"brute_simd_over_coord\":%.4f},",
                   bench_ratio(run->grid.median_ms, run->coord.median_ms),
                   bench_ratio(run->oracle.median_ms, run->coord.median_ms),
                   bench_ratio(run->coord.median_ms, run->grid.median_ms),
                   bench_ratio(run->coord.median_ms, run->brute.median_ms),
                   bench_ratio(run->brute.median_ms, run->coord.median_ms));
            printf("\"on_oracle_watchers\":{\"coord_enters\":%" PRIu64 ",\"coord_leaves\":%" PRIu64
                   ",\"grid_enters\":%" PRIu64 ",\"grid_leaves\":%" PRIu64 ",\"brute_simd_enters\":%" PRIu64
                   ",\"brute_simd_leaves\":%" PRIu64 "},",
                   run->coord_on_oracle_enters, run->coord_on_oracle_leaves, run->grid_on_oracle_enters,
                   run->grid_on_oracle_leaves, run->brute_on_oracle_enters, run->brute_on_oracle_leaves);
            printf("\"events_agree\":%s,\"checked_ticks\":%d,\"mismatches\":{\"coord_grid\":%" PRIu64
                   ",\"coord_oracle\":%" PRIu64 ",\"grid_oracle\":%" PRIu64 ",\"brute_simd_grid\":%" PRIu64
                   ",\"brute_simd_oracle\":%" PRIu64 "},",
                   bench_events_agree(run) ? "true" : "false", run->checked_ticks, run->mismatch_coord_grid,
                   run->mismatch_coord_oracle, run->mismatch_grid_oracle, run->mismatch_brute_grid,
                   run->mismatch_brute_oracle);
            printf("\"mean_view\":%.3f,\"grid_recomputed_per_tick\":%.1f,"
                   "\"coord_stats\":{\"swaps_per_tick\":%.1f,\"crossings_per_tick\":%.1f,\"scanned_per_tick\":%.1f,"
                   "\"mode_changes\":%" PRIu64 ","
                   "\"cancelled\":%" PRIu64 ",\"events\":%" PRIu64 ",\"build_swaps\":%" PRIu64 "}}",
                   run->mean_view, run->grid_recomputed,
                   (double)(run->stats_end.swaps - run->stats_build.swaps) / (double)ticks,
                   (double)(run->stats_end.crossings - run->stats_build.crossings) / (double)ticks,
                   (double)(run->stats_end.scanned - run->stats_build.scanned) / (double)ticks,
                   run->stats_end.mode_changes, run->stats_end.cancelled - run->stats_build.cancelled,
                   run->stats_end.events, run->stats_build.swaps);
        }
        printf("]}");
    }
    printf("]}\n");
}

/* ---- options ------------------------------------------------------------- */

static void bench_usage(FILE *out) {
    fprintf(out,
            "usage: bench-aoi [--json] [--sizes 1000,5000,10000,20000] [--ticks 100] [--clustered-ticks N]\n"
            "                 [--seed S] [--cases uniform,clustered,sparse] [--sparse-movers 10] [--check-every K]\n"
            "                 [--oracle-sample 200] [--oracle-full-max 5000] [--grid-cell 50] [--quantize Q]\n"
            "                 [--brute-kernel avx2|sse2|scalar] [--coord-mode auto|crossing|scan] [--teleports N]\n"
            "  --ticks            ticks of the uniform and sparse cases (default 100)\n"
            "  --clustered-ticks  ticks of the clustered case (default: the smaller of --ticks and 20)\n"
            "  --sparse-movers    percent of the entities that move each tick in the sparse case (default 10)\n"
            "  --check-every      compare all views every K ticks (default 1; the last tick always)\n"
            "  --oracle-sample    watchers the oracle follows when N > --oracle-full-max\n"
            "  --quantize         round positions to multiples of Q: entities land exactly on view\n"
            "                     bounds, a correctness stress (figures are then not the workload's)\n"
            "  --brute-kernel     the kernel brute-simd runs (default: the best this CPU supports)\n"
            "  --coord-mode       coord's mode (cellapp/coord.h, \"Modes\"): its own choice (auto, the default),\n"
            "                     or fixed to crossings or scans\n"
            "  --teleports        in the uniform and clustered cases, N entities a tick jump anywhere in\n"
            "                     their area instead of stepping (default 0)\n"
            "  exit status: 0 when every AOI agrees with the others and the oracle, 1 on any mismatch, 2 on bad"
            " options\n");
}

static int bench_parse_u64(const char *text, uint64_t min, uint64_t max, uint64_t *out) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 0);
    if (errno || end == text || *end || text[0] == '-' || v < min || v > max) return -1;
    *out = v;
    return 0;
}

static int bench_parse_options(int argc, char **argv, bench_options *opt) {
    *opt = (bench_options){
        .sizes = {1000, 5000, 10000, 20000},
        .size_count = 4,
        .ticks = 100,
        .clustered_ticks = -1,
        .sparse_movers_percent = BENCH_SPARSE_MOVERS_PERCENT,
        .seed = 20240601,
        .cases = {true, true, true},
        .check_every = 1,
        .oracle_sample = 200,
        .oracle_full_max = 5000,
        .grid_cell = BENCH_EXTENT,
    };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *value = i + 1 < argc ? argv[i + 1] : NULL;
        uint64_t v;
        if (!strcmp(a, "--json")) {
            opt->json = true;
            continue;
        }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            bench_usage(stdout);
            exit(0);
        }
        if (!value) {
            fprintf(stderr, "bench-aoi: unknown option or missing value: %s\n", a);
            return -1;
        }
        i++;
        if (!strcmp(a, "--sizes")) {
            opt->size_count = 0;
            char *copy = xstrdup(value), *save = NULL;
            for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                if (opt->size_count == BENCH_MAX_SIZES || bench_parse_u64(tok, 2, 10000000, &v)) {
                    fprintf(stderr, "bench-aoi: bad --sizes entry: %s\n", tok);
                    free(copy);
                    return -1;
                }
                opt->sizes[opt->size_count++] = (uint32_t)v;
            }
            free(copy);
            if (!opt->size_count) return -1;
        } else if (!strcmp(a, "--ticks")) {
            if (bench_parse_u64(value, 1, 1000000, &v)) return -1;
            opt->ticks = (int)v;
        } else if (!strcmp(a, "--clustered-ticks")) {
            if (bench_parse_u64(value, 1, 1000000, &v)) return -1;
            opt->clustered_ticks = (int)v;
        } else if (!strcmp(a, "--teleports")) {
            if (bench_parse_u64(value, 0, 1000000, &v)) return -1;
            opt->teleports = (uint32_t)v;
        } else if (!strcmp(a, "--sparse-movers")) {
            if (bench_parse_u64(value, 0, 100, &v)) return -1;
            opt->sparse_movers_percent = (uint32_t)v;
        } else if (!strcmp(a, "--seed")) {
            if (bench_parse_u64(value, 0, UINT64_MAX, &v)) return -1;
            opt->seed = v;
        } else if (!strcmp(a, "--check-every")) {
            if (bench_parse_u64(value, 1, 1000000, &v)) return -1;
            opt->check_every = (int)v;
        } else if (!strcmp(a, "--oracle-sample")) {
            if (bench_parse_u64(value, 1, 10000000, &v)) return -1;
            opt->oracle_sample = (uint32_t)v;
        } else if (!strcmp(a, "--oracle-full-max")) {
            if (bench_parse_u64(value, 0, 10000000, &v)) return -1;
            opt->oracle_full_max = (uint32_t)v;
        } else if (!strcmp(a, "--grid-cell")) {
            char *end;
            float cell = strtof(value, &end);
            if (*end || !(cell >= 1) || !(cell <= BENCH_WORLD)) return -1;
            opt->grid_cell = cell;
        } else if (!strcmp(a, "--quantize")) {
            char *end;
            float q = strtof(value, &end);
            if (*end || !(q >= 0) || !(q <= BENCH_HOTSPOT)) return -1;
            opt->quantize = q;
        } else if (!strcmp(a, "--coord-mode")) {
            if (coord_mode_from_name(value, &opt->coord_mode) != 0) return -1;
        } else if (!strcmp(a, "--brute-kernel")) {
            opt->brute_kernel = value; /* checked in main, against the CPU */
        } else if (!strcmp(a, "--cases")) {
            for (int k = 0; k < BENCH_CASE_COUNT; k++) opt->cases[k] = false;
            char *copy = xstrdup(value), *save = NULL;
            for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                int k;
                for (k = 0; k < BENCH_CASE_COUNT && strcmp(tok, bench_case_names[k]) != 0; k++) {
                }
                if (k == BENCH_CASE_COUNT) {
                    fprintf(stderr, "bench-aoi: unknown case: %s\n", tok);
                    free(copy);
                    return -1;
                }
                opt->cases[k] = true;
            }
            free(copy);
        } else {
            fprintf(stderr, "bench-aoi: unknown option: %s\n", a);
            return -1;
        }
    }
    if (opt->clustered_ticks < 0) opt->clustered_ticks = opt->ticks < 20 ? opt->ticks : 20;
    return 0;
}

int main(int argc, char **argv) {
    bench_options opt;
    if (bench_parse_options(argc, argv, &opt) != 0) {
        bench_usage(stderr);
        return 2;
    }
    /* Resolve brute-simd's kernel once: an unknown one, or one this CPU
     * cannot run, is a bad option; the name is then printed with the figures. */
    aoi_brute_simd *probe = aoi_brute_simd_create(1, opt.brute_kernel);
    if (!probe) {
        fprintf(stderr, "bench-aoi: brute-simd kernel %s is unknown or not supported by this CPU\n", opt.brute_kernel);
        return 2;
    }
    opt.brute_kernel = aoi_brute_simd_kernel(probe);
    aoi_brute_simd_free(probe);
    bench_result *results = xcalloc(BENCH_CASE_COUNT * opt.size_count, sizeof *results);
    size_t count = 0;
    uint64_t bad = 0;
    if (!opt.json) {
        printf("bench-aoi: world %gx%g, extent %g, hysteresis 0 and %g, step <= %g, grid cell %g, brute-simd kernel"
               " %s, seed %" PRIu64 "; views checked every %d tick(s)%s\n",
               (double)BENCH_WORLD, (double)BENCH_WORLD, (double)BENCH_EXTENT, (double)BENCH_HYSTERESIS,
               (double)BENCH_STEP, (double)opt.grid_cell, opt.brute_kernel, opt.seed, opt.check_every,
               opt.quantize > 0 ? "; positions QUANTIZED (tie stress, not the benchmark workload)" : "");
        printf("build ms: N entities + N watchers + first flush/update; ins-only ms: N entities alone, no watchers,"
               " + first flush/update (coord: coord_add_entity x N + coord_flush); sparse: %" PRIu32 " %% of the"
               " entities move each tick\n",
               opt.sparse_movers_percent);
    }
    for (int kind = 0; kind < BENCH_CASE_COUNT; kind++) {
        if (!opt.cases[kind]) continue;
        int ticks = kind == BENCH_CASE_CLUSTERED ? opt.clustered_ticks : opt.ticks;
        for (size_t s = 0; s < opt.size_count; s++) {
            bench_result *r = &results[count++];
            r->kind = (bench_case)kind;
            r->n = opt.sizes[s];
            r->ticks = ticks;
            uint32_t sparse_movers = (uint32_t)((uint64_t)r->n * opt.sparse_movers_percent / 100);
            bench_workload wl;
            bench_workload_generate(&wl, r->kind, r->n, ticks, sparse_movers, opt.teleports, opt.seed, opt.quantize);
            r->movers = wl.movers;
            for (int h = 0; h < 2; h++) {
                uint64_t start = bench_now_ns();
                bench_run_one(&opt, &wl, h ? BENCH_HYSTERESIS : 0.0f, &r->run[h], &r->oracle_watchers);
                fprintf(stderr,
                        "bench-aoi: %s n=%" PRIu32 " h=%g: %d ticks in %.1f s (checking %.1f s), mismatches %" PRIu64
                        "\n",
                        bench_case_names[kind], r->n, h ? (double)BENCH_HYSTERESIS : 0.0, ticks,
                        bench_ms_since(start) / 1000, r->run[h].check_ms / 1000, bench_mismatches(&r->run[h]));
                bad += bench_mismatches(&r->run[h]) + !bench_events_agree(&r->run[h]);
            }
            bench_workload_free(&wl);
            if (!opt.json) {
                bench_print_result(r);
                (void)fflush(stdout); /* progress only: nothing to do if stdout is gone */
            }
        }
    }
    if (opt.json)
        bench_print_json(&opt, results, count);
    else
        bench_print_summary(results, count);
    free(results);
    return bad ? 1 : 0;
}
