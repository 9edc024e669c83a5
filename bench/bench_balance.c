/* bench_balance.c -- the load balancer's algorithm (cellapp/balance.c) on a
 * simulated cluster, each figure against a baseline run in the same
 * process.
 *
 *   bench-balance [--seed N]
 *
 * The simulation: reals are points with a load each (a fraction of a
 * core); the cluster puts each real in the cell whose region holds it
 * (space_layout_cell_at), and each cell reports the sum of its reals' loads
 * and their bound levels (balance_compute_bounds), one cell per cellapp, as
 * the cellapps would after applying a layout. One pass is one balancer
 * period (1 s); reals stand still, so only the lines move.
 *
 * (a) Convergence after a step change. 16 cells (a 4x4 grid) over
 *     1000 x 1000 m, 20,000 reals of equal load, 6.4 cores in all (0.4 a
 *     cellapp). Uniform first, balanced until every cell is within +-5 %
 *     of the average; then 70 % of the reals go to the 250 m corner at the
 *     origin (the step). Passes are counted until every cell is within
 *     +-10 % and +-5 %. Baseline: the static layout (no balancer), whose
 *     spread (largest cell / average) stays what the step made it.
 * (b) Offloads per line move, over the same convergence: reals that
 *     change cell in a pass over the lines moved in it. Baseline: moving
 *     every line straight to its ideal position once (top down, the
 *     weighted median of the load of its region along its axis, found by
 *     sorting every real of the region: the median, as every split of the
 *     grid has as many cells on each side).
 * (c) Cost of one balance_pass over 64 cells (an 8x8 grid; 64,000 reals,
 *     half of them in one corner so the lines have work to do) with the
 *     reports computed beforehand. Baseline: a brute-force pass written
 *     here that takes the same decisions from raw data: at each split it
 *     finds each side's load by scanning every cell and the line's new
 *     position by scanning every real and sorting those of the shrinking
 *     side. And the cost of balance_compute_bounds for one cell of 2,000
 *     reals against a quadratic oracle (every level re-summed from every
 *     real), whose output must be identical.
 *
 * Times are the best of several runs, clock_gettime(CLOCK_MONOTONIC)
 * around the measured call only.
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "balance.h"
#include "space_layout.h"

/* Passes allowed to converge after the step: an hour of one pass a second. */
#define CONVERGE_CAP 3600
/* The two tolerances reported: within 10 % and within 5 % of the average. */
#define LOOSE_TOLERANCE 0.10
#define TIGHT_TOLERANCE 0.05
/* balance.c's: two reals this close are one step, and a line goes this far
 * past the last real to take it (copied so the oracles agree with it). */
#define SAME_PLACE 0.01
#define PAST_LAST 0.1

/* ---- utilities -------------------------------------------------------------- */

static uint64_t random_state = 20240601;

/* xorshift64*, uniform in [0, 1). */
static double random_unit(void) {
    random_state ^= random_state >> 12;
    random_state ^= random_state << 25;
    random_state ^= random_state >> 27;
    return (double)((random_state * UINT64_C(2685821657736338717)) >> 11) / 9007199254740992.0;
}

static double now_microseconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static void *checked_calloc(size_t count, size_t size) {
    void *p = calloc(count ? count : 1, size);
    if (!p) {
        fprintf(stderr, "bench-balance: out of memory\n");
        exit(1);
    }
    return p;
}

/* ---- the simulated cluster ------------------------------------------------- */

typedef struct cluster {
    balance_entity *entities;
    size_t entity_count;
    uint32_t *cell_of;            /* each real's cell after the last measure (0: none yet) */
    balance_cell_report *reports; /* by cell id */
    bool *reported;
    uint32_t max_cell_id;
    size_t *bucket_start;   /* by cell id: where its reals start in `sorted` */
    balance_entity *sorted; /* reals grouped by cell */
    balance_config config;
} cluster;

static void cluster_init(cluster *c, size_t entity_count, uint32_t max_cell_id) {
    memset(c, 0, sizeof *c);
    c->entities = checked_calloc(entity_count, sizeof *c->entities);
    c->entity_count = entity_count;
    c->cell_of = checked_calloc(entity_count, sizeof *c->cell_of);
    c->reports = checked_calloc(max_cell_id + 1, sizeof *c->reports);
    c->reported = checked_calloc(max_cell_id + 1, sizeof *c->reported);
    c->max_cell_id = max_cell_id;
    c->bucket_start = checked_calloc(max_cell_id + 2, sizeof *c->bucket_start);
    c->sorted = checked_calloc(entity_count, sizeof *c->sorted);
    c->config = balance_default_config();
}

static void cluster_close(cluster *c) {
    free(c->entities);
    free(c->cell_of);
    free(c->reports);
    free(c->reported);
    free(c->bucket_start);
    free(c->sorted);
}

/* Every cellapp applies `layout` and reports. Returns how many reals
 * changed cell since the last measure (the offloads it caused). */
static size_t cluster_measure(cluster *c, const space_layout *layout) {
    size_t offloads = 0;
    memset(c->bucket_start, 0, (c->max_cell_id + 2) * sizeof *c->bucket_start);
    for (size_t i = 0; i < c->entity_count; i++) {
        uint32_t cell = space_layout_cell_at(layout, c->entities[i].x, c->entities[i].z)->cell_id;
        if (cell > c->max_cell_id) {
            fprintf(stderr, "bench-balance: cell %u beyond the cluster\n", cell);
            exit(1);
        }
        if (c->cell_of[i] && c->cell_of[i] != cell) offloads++;
        c->cell_of[i] = cell;
        c->bucket_start[cell + 1]++;
    }
    for (uint32_t cell = 1; cell <= c->max_cell_id + 1; cell++) c->bucket_start[cell] += c->bucket_start[cell - 1];
    size_t *fill = checked_calloc(c->max_cell_id + 1, sizeof *fill);
    for (size_t i = 0; i < c->entity_count; i++) {
        uint32_t cell = c->cell_of[i];
        c->sorted[c->bucket_start[cell] + fill[cell]++] = c->entities[i];
    }
    free(fill);
    memset(c->reported, 0, (c->max_cell_id + 1) * sizeof *c->reported);
    for (int32_t n = 0; n < layout->node_count; n++) {
        const space_layout_node *node = &layout->nodes[n];
        if (!node->leaf) continue;
        uint32_t cell = node->cell_id;
        size_t first = c->bucket_start[cell], count = c->bucket_start[cell + 1] - first;
        balance_cell_report *report = &c->reports[cell];
        memset(report, 0, sizeof *report);
        report->cell_id = cell;
        report->cellapp_id = node->cellapp_id;
        for (size_t i = 0; i < count; i++) report->load += c->sorted[first + i].load;
        report->cellapp_load = report->load;
        report->reals = (uint32_t)count;
        report->epoch = layout->epoch;
        balance_compute_bounds(&c->sorted[first], count, &c->config, &report->bounds);
        c->reported[cell] = true;
    }
    return offloads;
}

static const balance_cell_report *cluster_lookup(uint32_t cell_id, void *context) {
    const cluster *c = context;
    if (cell_id > c->max_cell_id || !c->reported[cell_id]) return NULL;
    return &c->reports[cell_id];
}

typedef struct spread {
    double worst_deviation; /* largest |cell - average| / average */
    double max_over_average;
} spread;

static spread cluster_spread(const cluster *c, const space_layout *layout) {
    double total = 0, highest = 0, lowest = INFINITY;
    size_t cells = 0;
    for (int32_t n = 0; n < layout->node_count; n++) {
        const space_layout_node *node = &layout->nodes[n];
        if (!node->leaf) continue;
        double load = c->reports[node->cell_id].load;
        total += load;
        highest = fmax(highest, load);
        lowest = fmin(lowest, load);
        cells++;
    }
    double average = total / (double)cells;
    return (spread){fmax(highest - average, average - lowest) / average, highest / average};
}

static space_layout *grid_layout(uint32_t columns, uint32_t rows, double side) {
    const double min[3] = {0, -100, 0}, max[3] = {side, 100, side};
    uint64_t cellapps[64];
    for (uint32_t i = 0; i < columns * rows; i++) cellapps[i] = i + 1;
    space_layout *layout =
        space_layout_create_grid("bench", min, max, false, columns, rows, cellapps, (size_t)columns * rows);
    if (!layout) {
        fprintf(stderr, "bench-balance: cannot build the grid\n");
        exit(1);
    }
    return layout;
}

/* ---- the ideal layout: every line straight to its median -------------------- */

typedef struct sweep_item {
    double key; /* first: sorted on */
    double load;
} sweep_item;

static int compare_sweep_items(const void *a, const void *b) {
    double x = ((const sweep_item *)a)->key, y = ((const sweep_item *)b)->key;
    return x < y ? -1 : x > y;
}

static size_t subtree_cells(const space_layout *layout, int32_t index) {
    const space_layout_node *node = &layout->nodes[index];
    return node->leaf ? 1 : subtree_cells(layout, node->low) + subtree_cells(layout, node->high);
}

/* Puts every split of the subtree at the point of its region where the load
 * parts as its cells do (top down, so each child sees its new region). */
static void ideal_node(space_layout *layout, int32_t index, space_layout_rect region, const cluster *c,
                       sweep_item *items) {
    space_layout_node *node = &layout->nodes[index];
    if (node->leaf) return;
    bool axis_x = node->axis == SPACE_LAYOUT_AXIS_X;
    size_t count = 0;
    double total = 0;
    for (size_t i = 0; i < c->entity_count; i++) {
        const balance_entity *e = &c->entities[i];
        if (!space_layout_rect_contains(&region, e->x, e->z)) continue;
        items[count++] = (sweep_item){axis_x ? e->x : e->z, e->load};
        total += e->load;
    }
    qsort(items, count, sizeof *items, compare_sweep_items);
    double low_cells = (double)subtree_cells(layout, node->low);
    double share = total * low_cells / (low_cells + (double)subtree_cells(layout, node->high));
    double running = 0;
    for (size_t i = 0; i + 1 < count; i++) {
        running += items[i].load;
        if (running >= share) {
            node->at = (items[i].key + items[i + 1].key) / 2;
            break;
        }
    }
    space_layout_rect low = region, high = region;
    if (axis_x)
        low.max_x = high.min_x = node->at;
    else
        low.max_z = high.min_z = node->at;
    ideal_node(layout, node->low, low, c, items);
    ideal_node(layout, node->high, high, c, items);
}

/* ---- (a) and (b): a step change in where the load is ------------------------ */

/* Returns the passes to +-5 %. */
static int bench_step_change(double max_offload) {
    const size_t reals = 20000;
    const double side = 1000, total_load = 6.4, corner_share = 0.70, corner_side = 250;
    cluster c;
    cluster_init(&c, reals, 16);
    c.config.max_offload = max_offload;
    printf("largest bound level %.2f of a core%s\n", max_offload,
           max_offload == balance_default_config().max_offload ? " (the default)" : " (the first version's)");
    for (size_t i = 0; i < reals; i++)
        c.entities[i] = (balance_entity){side * random_unit(), side * random_unit(), total_load / (double)reals};
    space_layout *layout = grid_layout(4, 4, side);
    cluster_measure(&c, layout);

    int settle_passes = 0;
    while (cluster_spread(&c, layout).worst_deviation > TIGHT_TOLERANCE && settle_passes < CONVERGE_CAP) {
        balance_pass(layout, cluster_lookup, &c, &c.config, NULL, 0);
        layout->epoch++;
        cluster_measure(&c, layout);
        settle_passes++;
    }
    spread settled = cluster_spread(&c, layout);

    /* The step: 70 % of the reals gather in the corner. */
    size_t moved_reals = (size_t)((double)reals * corner_share);
    for (size_t i = 0; i < moved_reals; i++) {
        c.entities[i].x = corner_side * random_unit();
        c.entities[i].z = corner_side * random_unit();
    }
    cluster_measure(&c, layout); /* the reals that walked over do not count as offloads */
    spread at_step = cluster_spread(&c, layout);
    space_layout *static_layout = space_layout_copy(layout);

    int passes = 0, passes_loose = -1, passes_tight = -1;
    size_t offloads = 0, line_moves = 0;
    spread now = at_step;
    while (passes < CONVERGE_CAP) {
        size_t moved = balance_pass(layout, cluster_lookup, &c, &c.config, NULL, 0);
        layout->epoch++;
        offloads += cluster_measure(&c, layout);
        line_moves += moved;
        passes++;
        now = cluster_spread(&c, layout);
        if (passes_loose < 0 && now.worst_deviation <= LOOSE_TOLERANCE) passes_loose = passes;
        if (now.worst_deviation <= TIGHT_TOLERANCE) {
            passes_tight = passes;
            break;
        }
    }
    /* The static layout after as many passes: reals stand still, so its
     * spread is the one at the step. */
    cluster_measure(&c, static_layout);
    spread static_spread = cluster_spread(&c, static_layout);

    printf("(a) convergence after a step change: 16 cells (4x4), %zu reals, %.1f cores (%.2f a cellapp)\n", reals,
           total_load, total_load / 16);
    printf("    uniform start: within +-5%% after %d passes%s (largest cell %.3f x average)\n", settle_passes,
           settle_passes ? "" : " (already)", settled.max_over_average);
    printf("    step: %.0f%% of the reals into the %.0f m corner; largest cell %.2f x average\n", corner_share * 100,
           corner_side, at_step.max_over_average);
    if (passes_loose >= 0)
        printf("    balanced: within +-10%% after %d passes (s)\n", passes_loose);
    else
        printf("    balanced: not within +-10%% after %d passes\n", passes);
    if (passes_tight >= 0)
        printf("    balanced: within +-5%%  after %d passes (s)\n", passes_tight);
    else
        printf("    balanced: not within +-5%% after %d passes (worst %.1f%%)\n", passes, now.worst_deviation * 100);
    printf("    after %d passes: largest cell / average  static %.2f   balanced %.3f   ratio %.2fx\n", passes,
           static_spread.max_over_average, now.max_over_average, static_spread.max_over_average / now.max_over_average);

    /* (b) The ideal: every line straight to its median, from the layout at
     * the step. */
    space_layout *ideal = space_layout_copy(static_layout);
    sweep_item *items = checked_calloc(reals, sizeof *items);
    space_layout_rect bounds = {ideal->min[0], ideal->min[2], ideal->max[0], ideal->max[2]};
    ideal_node(ideal, ideal->root, bounds, &c, items);
    free(items);
    size_t ideal_moves = 0;
    for (int32_t n = 0; n < ideal->node_count; n++)
        if (!ideal->nodes[n].leaf && ideal->nodes[n].at != static_layout->nodes[n].at) ideal_moves++;
    cluster_measure(&c, static_layout); /* every real's cell before */
    size_t ideal_offloads = cluster_measure(&c, ideal);
    spread ideal_spread = cluster_spread(&c, ideal);
    double per_move = line_moves ? (double)offloads / (double)line_moves : 0;
    double ideal_per_move = ideal_moves ? (double)ideal_offloads / (double)ideal_moves : 0;
    printf("(b) offloads (reals changing cell) per line move, step to +-5%%\n");
    printf("    balancer: %zu offloads / %zu line moves over %d passes = %.1f per move\n", offloads, line_moves, passes,
           per_move);
    printf("    ideal (each line once to its median): %zu offloads / %zu moves = %.1f per move "
           "(largest cell %.3f x average)\n",
           ideal_offloads, ideal_moves, ideal_per_move, ideal_spread.max_over_average);
    printf("    per move: ideal / balancer %.1fx; in all: balancer / ideal %.2fx\n",
           per_move > 0 ? ideal_per_move / per_move : 0,
           ideal_offloads ? (double)offloads / (double)ideal_offloads : 0);
    printf("    balancer: %.1f offloads per pass on average (%.2f%% of the reals)\n",
           passes ? (double)offloads / (double)passes : 0,
           passes ? 100.0 * (double)offloads / (double)passes / (double)reals : 0);

    space_layout_free(ideal);
    space_layout_free(static_layout);
    space_layout_free(layout);
    cluster_close(&c);
    return passes;
}

/* ---- (c) the brute-force pass --------------------------------------------- */

/* Where each node sits in the tree: the low/high turns from the root (bit d
 * set: high at depth d), so "is this cell under that node" is a prefix test. */
typedef struct oracle {
    space_layout *layout;
    const cluster *cluster;
    const balance_config *config;
    uint64_t *path;
    int *depth;
    sweep_item *items;
    double safety;
    size_t moved;
} oracle;

static void oracle_paths(oracle *o, int32_t index, uint64_t path, int depth) {
    o->path[index] = path;
    o->depth[index] = depth;
    const space_layout_node *node = &o->layout->nodes[index];
    if (node->leaf) return;
    oracle_paths(o, node->low, path, depth + 1);
    oracle_paths(o, node->high, path | (UINT64_C(1) << depth), depth + 1);
}

static bool oracle_under(const oracle *o, int32_t node, int32_t subtree) {
    if (o->depth[node] < o->depth[subtree]) return false;
    uint64_t mask = o->depth[subtree] ? (UINT64_C(1) << o->depth[subtree]) - 1 : 0;
    return (o->path[node] & mask) == o->path[subtree];
}

typedef struct oracle_side {
    double load, max_cellapp_load;
    size_t cells;
    bool created, retiring;
} oracle_side;

/* A side's load and state, by scanning every cell of the layout. */
static oracle_side oracle_side_of(const oracle *o, int32_t subtree) {
    oracle_side side = {0, 0, 0, true, true};
    for (int32_t n = 0; n < o->layout->node_count; n++) {
        const space_layout_node *node = &o->layout->nodes[n];
        if (!node->leaf || !oracle_under(o, n, subtree)) continue;
        const balance_cell_report *report = cluster_lookup(node->cell_id, (void *)o->cluster);
        if (!report) side.created = false;
        side.retiring &= node->retiring;
        if (!node->retiring) side.cells++;
        if (report) {
            side.load += report->load;
            side.max_cellapp_load = fmax(side.max_cellapp_load, report->cellapp_load);
        }
    }
    return side;
}

static void oracle_aggression(const balance_config *config, space_layout_node *node, int direction) {
    double aggression = node->aggression > 0 ? node->aggression : 1.0;
    if (direction && node->direction && direction != node->direction)
        aggression *= config->aggression_decrease;
    else
        aggression *= config->aggression_increase;
    aggression = fmin(fmax(aggression, config->min_aggression), config->max_aggression);
    node->aggression = aggression;
    if (direction) node->direction = (int8_t)direction;
}

static void oracle_node(oracle *o, int32_t index, space_layout_rect region) {
    space_layout_node *node = &o->layout->nodes[index];
    if (node->leaf) return;
    const balance_config *config = o->config;
    oracle_side low = oracle_side_of(o, node->low), high = oracle_side_of(o, node->high);
    bool axis_x = node->axis == SPACE_LAYOUT_AXIS_X;
    double region_low = axis_x ? region.min_x : region.min_z, region_high = axis_x ? region.max_x : region.max_z;
    int direction = 0;
    double target = 0;
    bool retiring = false;
    if (low.retiring != high.retiring) {
        retiring = true;
        direction = low.retiring ? -1 : +1;
        target = INFINITY;
    } else if (low.cells && high.cells) {
        double low_average = low.load / (double)low.cells, high_average = high.load / (double)high.cells;
        double average = (low.load + high.load) / (double)(low.cells + high.cells);
        double d = low_average > high_average ? low_average - average : high_average - average;
        direction = low_average > high_average ? -1 : +1;
        target = d * (node->aggression > 0 ? node->aggression : 1.0);
        if (d < balance_level_load(config, 0)) direction = 0;
    }
    const oracle_side *growing = direction < 0 ? &high : &low;
    if (direction && (!low.created || !high.created)) direction = 0;
    if (direction && !retiring && growing->max_cellapp_load >= o->safety) direction = 0;

    double at = node->at;
    if (direction) {
        int32_t shrinking = direction < 0 ? node->low : node->high;
        space_layout_rect side_region = region;
        if (direction < 0) {
            if (axis_x)
                side_region.max_x = node->at;
            else
                side_region.max_z = node->at;
        } else {
            if (axis_x)
                side_region.min_x = node->at;
            else
                side_region.min_z = node->at;
        }
        /* Every real of the shrinking side, by distance from the line. */
        size_t count = 0;
        for (size_t i = 0; i < o->cluster->entity_count; i++) {
            const balance_entity *e = &o->cluster->entities[i];
            if (!space_layout_rect_contains(&side_region, e->x, e->z)) continue;
            double coordinate = axis_x ? e->x : e->z;
            o->items[count++] = (sweep_item){direction < 0 ? -coordinate : coordinate, e->load};
        }
        qsort(o->items, count, sizeof *o->items, compare_sweep_items);
        /* The splits on the same axis inside the shrinking side, by
         * scanning every node. */
        double limit = direction < 0 ? region_low : region_high;
        for (int32_t n = 0; n < o->layout->node_count; n++) {
            const space_layout_node *inner = &o->layout->nodes[n];
            if (inner->leaf || inner->axis != node->axis || !oracle_under(o, n, shrinking)) continue;
            limit = direction < 0 ? fmax(limit, inner->at) : fmin(limit, inner->at);
        }
        /* The farthest place, just past a real, that sheds no more than the
         * target; past every real if all of them fit. */
        double running = 0, position = NAN;
        size_t i = 0;
        for (; i < count; i++) {
            running += o->items[i].load;
            if (i + 1 < count && o->items[i + 1].key - o->items[i].key < SAME_PLACE) continue;
            if (running > target) break;
            double past = i + 1 < count ? (o->items[i].key + o->items[i + 1].key) / 2 : o->items[i].key + PAST_LAST;
            position = direction < 0 ? -past : past;
        }
        if (i == count) position = direction < 0 ? -INFINITY : INFINITY;
        if (!isnan(position)) {
            if (direction < 0) {
                at = fmax(position, limit);
                if (config->max_step > 0 && !retiring) at = fmax(at, node->at - config->max_step);
                if (at >= node->at) at = node->at;
            } else {
                at = fmin(position, limit);
                if (config->max_step > 0 && !retiring) at = fmin(at, node->at + config->max_step);
                if (at <= node->at) at = node->at;
            }
        }
    }
    if (at != node->at) {
        o->moved++;
        node->at = at;
        if (!retiring) oracle_aggression(config, node, direction);
    } else {
        oracle_aggression(config, node, 0);
    }
    space_layout_rect low_rect = region, high_rect = region;
    if (axis_x)
        low_rect.max_x = high_rect.min_x = node->at;
    else
        low_rect.max_z = high_rect.min_z = node->at;
    int32_t low_index = node->low, high_index = node->high;
    oracle_node(o, low_index, low_rect);
    oracle_node(o, high_index, high_rect);
}

static size_t oracle_pass(oracle *o) {
    oracle_side root = oracle_side_of(o, o->layout->root);
    double average = root.cells ? root.load / (double)root.cells : 0;
    o->safety = fmax(o->config->safety_bound, average * o->config->safety_ratio);
    o->moved = 0;
    oracle_paths(o, o->layout->root, 0, 0);
    space_layout_rect bounds = {o->layout->min[0], o->layout->min[2], o->layout->max[0], o->layout->max[2]};
    oracle_node(o, o->layout->root, bounds);
    return o->moved;
}

/* ---- the quadratic bound levels -------------------------------------------- */

/* balance_compute_bounds' result, from its definition: for each edge, each
 * real's "taken" load (every real at or nearer the edge than it) and the
 * nearest real beyond it, each by a scan of every real; a level goes to the
 * nearest real whose taken load exceeds the level's and that has no other
 * real within SAME_PLACE beyond it. Quadratic in the reals. */
static void oracle_bounds(const balance_entity *entities, size_t count, const balance_config *config,
                          balance_bounds *out) {
    double *taken = checked_calloc(count, sizeof *taken), *next = checked_calloc(count, sizeof *next);
    double *key = checked_calloc(count, sizeof *key);
    for (int e = 0; e < BALANCE_EDGES; e++) {
        bool high = e == BALANCE_EDGE_HIGH_X || e == BALANCE_EDGE_HIGH_Z;
        bool x = e == BALANCE_EDGE_LOW_X || e == BALANCE_EDGE_HIGH_X;
        double total = 0, farthest = -INFINITY;
        for (size_t i = 0; i < count; i++) {
            double coordinate = x ? entities[i].x : entities[i].z;
            key[i] = high ? -coordinate : coordinate;
            total += entities[i].load;
            farthest = fmax(farthest, key[i]);
        }
        for (size_t i = 0; i < count; i++) {
            taken[i] = 0;
            next[i] = INFINITY;
            for (size_t j = 0; j < count; j++) {
                if (key[j] <= key[i])
                    taken[i] += entities[j].load;
                else if (key[j] < next[i])
                    next[i] = key[j];
            }
        }
        for (int l = 0; l < BALANCE_LEVELS; l++) {
            double level_load = balance_level_load(config, l);
            size_t best = count;
            for (size_t i = 0; i < count; i++) {
                if (next[i] - key[i] < SAME_PLACE || taken[i] <= level_load) continue;
                if (best == count || key[i] < key[best]) best = i;
            }
            if (best == count) {
                out->level[e][l].position = high ? -INFINITY : INFINITY;
                out->level[e][l].load = fmax(total, level_load);
            } else {
                double past = isinf(next[best]) ? key[best] + PAST_LAST : (key[best] + next[best]) / 2;
                out->level[e][l].position = high ? -past : past;
                out->level[e][l].load = taken[best];
            }
        }
        if (count > 0 && isinf(out->level[e][0].position)) {
            /* Below the smallest level: taking them all is the first step. */
            out->level[e][0].position = high ? -(farthest + PAST_LAST) : farthest + PAST_LAST;
            out->level[e][0].load = total;
        }
    }
    free(taken);
    free(next);
    free(key);
}

static void bench_pass_cost(void) {
    const size_t reals = 64000;
    const double side = 1000;
    cluster c;
    cluster_init(&c, reals, 64);
    for (size_t i = 0; i < reals; i++) {
        bool corner = i % 2 == 0;
        double extent = corner ? 300 : side;
        c.entities[i] = (balance_entity){extent * random_unit(), extent * random_unit(), 25.6 / (double)reals};
    }
    space_layout *pristine = grid_layout(8, 8, side);
    cluster_measure(&c, pristine);
    space_layout *work = space_layout_copy(pristine);
    size_t node_bytes = (size_t)pristine->node_count * sizeof *pristine->nodes;

    /* balance_pass: 5 runs of 200 passes, each from the same layout. */
    double best = INFINITY;
    size_t moved = 0;
    for (int run = 0; run < 5; run++) {
        double spent = 0;
        for (int pass = 0; pass < 200; pass++) {
            memcpy(work->nodes, pristine->nodes, node_bytes);
            double start = now_microseconds();
            moved = balance_pass(work, cluster_lookup, &c, &c.config, NULL, 0);
            spent += now_microseconds() - start;
        }
        best = fmin(best, spent / 200);
    }

    /* The brute-force pass: 3 runs of 5. */
    oracle o = {work,
                &c,
                &c.config,
                checked_calloc((size_t)pristine->node_count, sizeof(uint64_t)),
                checked_calloc((size_t)pristine->node_count, sizeof(int)),
                checked_calloc(reals, sizeof(sweep_item)),
                0,
                0};
    double oracle_best = INFINITY;
    size_t oracle_moved = 0;
    for (int run = 0; run < 3; run++) {
        double spent = 0;
        for (int pass = 0; pass < 5; pass++) {
            memcpy(work->nodes, pristine->nodes, node_bytes);
            double start = now_microseconds();
            oracle_moved = oracle_pass(&o);
            spent += now_microseconds() - start;
        }
        oracle_best = fmin(oracle_best, spent / 5);
    }
    free(o.path);
    free(o.depth);
    free(o.items);
    printf("(c) one pass over 64 cells (8x8), %zu reals, reports precomputed\n", reals);
    printf("    balance_pass %.1f us (%zu lines moved)   brute force %.1f us (%zu lines moved)   ratio %.0fx\n", best,
           moved, oracle_best, oracle_moved, oracle_best / best);

    /* balance_compute_bounds over one cell of 2,000 reals. Loads are whole
     * multiples of 2^-20 so that every sum is exact in any order, and the
     * oracle's output must match to the bit. */
    const size_t cell_reals = 2000;
    balance_entity *cell = checked_calloc(cell_reals, sizeof *cell);
    balance_entity *copy = checked_calloc(cell_reals, sizeof *copy);
    for (size_t i = 0; i < cell_reals; i++)
        cell[i] = (balance_entity){125 * random_unit(), 125 * random_unit(),
                                   (double)(1 + (int)(400 * random_unit())) / 1048576.0};
    balance_bounds bounds, expected;
    double bounds_best = INFINITY;
    for (int run = 0; run < 20; run++) {
        memcpy(copy, cell, cell_reals * sizeof *cell);
        double start = now_microseconds();
        balance_compute_bounds(copy, cell_reals, &c.config, &bounds);
        bounds_best = fmin(bounds_best, now_microseconds() - start);
    }
    double oracle_bounds_best = INFINITY;
    for (int run = 0; run < 2; run++) {
        double start = now_microseconds();
        oracle_bounds(cell, cell_reals, &c.config, &expected);
        oracle_bounds_best = fmin(oracle_bounds_best, now_microseconds() - start);
    }
    int mismatches = 0;
    for (int e = 0; e < BALANCE_EDGES; e++)
        for (int l = 0; l < BALANCE_LEVELS; l++)
            if (bounds.level[e][l].position != expected.level[e][l].position ||
                bounds.level[e][l].load != expected.level[e][l].load)
                mismatches++;
    printf("    balance_compute_bounds, one cell of %zu reals: %.1f us   quadratic oracle %.0f us   ratio %.0fx   "
           "(%d of %d levels differ)\n",
           cell_reals, bounds_best, oracle_bounds_best, oracle_bounds_best / bounds_best, mismatches,
           BALANCE_EDGES * BALANCE_LEVELS);
    free(cell);
    free(copy);
    space_layout_free(work);
    space_layout_free(pristine);
    cluster_close(&c);
    if (mismatches) {
        fprintf(stderr, "bench-balance: balance_compute_bounds disagrees with its oracle\n");
        exit(1);
    }
}

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
            random_state = strtoull(argv[++i], NULL, 10);
            if (random_state == 0) random_state = 1; /* xorshift stays at 0 */
        } else {
            fprintf(stderr, "usage: bench-balance [--seed N]\n");
            return 2;
        }
    }
    double start = now_microseconds();
    /* The same workload twice: the first version's largest level, then
     * the default. */
    uint64_t seed = random_state;
    int first = bench_step_change(0.02);
    random_state = seed;
    int now = bench_step_change(balance_default_config().max_offload);
    printf("passes to +-5%% after the step: first version %d, default %d: %.2fx fewer\n", first, now,
           now ? (double)first / (double)now : 0);
    bench_pass_cost();
    printf("total %.1f s\n", (now_microseconds() - start) / 1e6);
    return 0;
}
