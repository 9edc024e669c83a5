/* test_balance.c -- unit tests for the load balancer's algorithm
 * (cellapp/balance.c), run against a small simulated cluster: synthetic
 * reals at positions, each with its load; the cluster puts every real in
 * the cell whose region holds it (space_layout_cell_at) and reports, per
 * cell, the sum of its reals' loads and their bound levels
 * (balance_compute_bounds), as the cellapps would after applying a layout.
 *
 * Covered: the bound levels of a hand-checkable line of reals (positions
 * midway between reals, past the last one, infinite for unreached levels,
 * reals at the same place as one step); convergence of a 2x2 and a 1x4
 * layout to within +-5 % of the average from a hot corner; the farthest
 * level within d x aggression, and no move while d is below the smallest
 * level, except for a cell just added with no area, which takes its
 * neighbour's first level; the aggression (halved on a reversal, grown by 2^(1/10)
 * otherwise, within [min, max]); no move next to a cell that is not
 * reported; the safety bound and its ratio; max_step; a line stopping at
 * the splits inside the side it shrinks; a retiring cell pushed to zero
 * area and removed only once it has no reals, no offloads in flight and
 * every cellapp applied the layout's epoch; and balance_plan's hand-overs,
 * removals, retirements and added cells, each applied with balance_apply
 * and checked with space_layout_check.
 *
 * Reals come from a fixed xorshift seed, so failures reproduce. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "balance.h"
#include "space_layout.h"

/* Cell ids of the simulated cluster go up to this (a grid of 4, plus the
 * cells a test adds). */
#define TEST_MAX_CELLS 16
/* The tolerance of the convergence tests: every cell within 5 % of the
 * average, as the balancer's users expect of a settled space. */
#define TEST_TOLERANCE 0.05
/* Passes the convergence tests allow: a minute of one pass a second. */
#define TEST_MAX_PASSES 60

/* ---- the simulated cluster --------------------------------------------- */

/* Deterministic generator so failures reproduce (xorshift64*). */
static uint64_t test_random(uint64_t *state) {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    return *state * UINT64_C(0x2545f4914f6cdd1d);
}

/* Uniform in [0, 1). */
static double test_unit(uint64_t *state) { return (double)(test_random(state) >> 11) / 9007199254740992.0; }

typedef struct test_cluster {
    balance_entity *entities;
    size_t entity_count;
    balance_config config;
    balance_cell_report reports[TEST_MAX_CELLS + 1]; /* by cell id */
    bool reported[TEST_MAX_CELLS + 1];
    uint32_t missing_cell; /* a cell whose cellapp has not reported it (0: none) */
} test_cluster;

/* The defaults with the largest level at 0.02 of a core: the figures
 * worked out by hand below (levels 0.00125 .. 0.02) assume it. */
static balance_config test_config(void) {
    balance_config config = balance_default_config();
    config.max_offload = 0.02;
    return config;
}

static void test_cluster_init(test_cluster *cluster, size_t entity_count) {
    memset(cluster, 0, sizeof *cluster);
    cluster->entities = calloc(entity_count ? entity_count : 1, sizeof *cluster->entities);
    assert_non_null(cluster->entities);
    cluster->entity_count = entity_count;
    cluster->config = test_config();
}

static void test_cluster_close(test_cluster *cluster) { free(cluster->entities); }

/* What each cellapp reports after applying `layout`: its cell's reals, their
 * load and bound levels; one cell per cellapp, so the cellapp's load is the
 * cell's. */
static void test_cluster_measure(test_cluster *cluster, const space_layout *layout) {
    memset(cluster->reported, 0, sizeof cluster->reported);
    balance_entity *scratch = calloc(cluster->entity_count ? cluster->entity_count : 1, sizeof *scratch);
    assert_non_null(scratch);
    for (int32_t i = 0; i < layout->node_count; i++) {
        const space_layout_node *node = &layout->nodes[i];
        if (!node->leaf) continue;
        if (node->cell_id > TEST_MAX_CELLS) fail_msg("cell %u is beyond the simulated cluster", node->cell_id);
        size_t count = 0;
        double load = 0;
        for (size_t e = 0; e < cluster->entity_count; e++) {
            const balance_entity *entity = &cluster->entities[e];
            if (space_layout_cell_at(layout, entity->x, entity->z) != node) continue;
            scratch[count++] = *entity;
            load += entity->load;
        }
        balance_cell_report *report = &cluster->reports[node->cell_id];
        memset(report, 0, sizeof *report);
        report->cell_id = node->cell_id;
        report->cellapp_id = node->cellapp_id;
        report->load = load;
        report->cellapp_load = load;
        report->reals = (uint32_t)count;
        report->pending_offloads = 0;
        report->epoch = layout->epoch;
        balance_compute_bounds(scratch, count, &cluster->config, &report->bounds);
        cluster->reported[node->cell_id] = true;
    }
    free(scratch);
}

static const balance_cell_report *test_cluster_lookup(uint32_t cell_id, void *context) {
    const test_cluster *cluster = context;
    if (cell_id == 0 || cell_id > TEST_MAX_CELLS || !cluster->reported[cell_id]) return NULL;
    if (cell_id == cluster->missing_cell) return NULL;
    return &cluster->reports[cell_id];
}

/* The largest |cell load - average| / average over the cells that are not
 * retiring, from the last measure. */
static double test_cluster_spread(const test_cluster *cluster, const space_layout *layout) {
    double total = 0, highest = 0, lowest = INFINITY;
    size_t cells = 0;
    for (int32_t i = 0; i < layout->node_count; i++) {
        const space_layout_node *node = &layout->nodes[i];
        if (!node->leaf || node->retiring) continue;
        double load = cluster->reports[node->cell_id].load;
        total += load;
        highest = fmax(highest, load);
        lowest = fmin(lowest, load);
        cells++;
    }
    double average = total / (double)cells;
    return fmax(highest - average, average - lowest) / average;
}

/* One pass, written with the next epoch as the balancer writes it, then
 * applied by the cluster. Returns the lines moved. */
static size_t test_cluster_pass(test_cluster *cluster, space_layout *layout, balance_move *moves, size_t cap) {
    size_t moved = balance_pass(layout, test_cluster_lookup, cluster, &cluster->config, moves, cap);
    layout->epoch++;
    test_cluster_measure(cluster, layout);
    return moved;
}

/* ---- helpers ------------------------------------------------------------- */

static void assert_close(double a, double b) {
    if (!(fabs(a - b) <= 1e-9 * fmax(1.0, fabs(b)))) fail_msg("%.17g is not %.17g", a, b);
}

static void assert_checks(const space_layout *layout) {
    char err[256] = "";
    if (space_layout_check(layout, err, sizeof err) != 0) fail_msg("check refused: %s", err);
}

static void assert_applies(space_layout *layout, const balance_action *action) {
    char err[256] = "";
    if (balance_apply(layout, action, err, sizeof err) != 0) fail_msg("apply refused: %s", err);
    assert_checks(layout);
}

static void assert_level(const balance_level *level, double position, double load) {
    if (isinf(position)) {
        if (level->position != position) fail_msg("position %.17g is not %g", level->position, position);
    } else {
        assert_close(level->position, position);
    }
    assert_close(level->load, load);
}

/* A space of 400 x 400 metres on X and Z (Y is never split). */
static const double SQUARE_MIN[3] = {0, -100, 0};
static const double SQUARE_MAX[3] = {400, 100, 400};
static const uint64_t CELLAPPS[4] = {1, 2, 3, 4};

static space_layout *test_grid(uint32_t columns, uint32_t rows, const double min[3], const double max[3]) {
    space_layout *layout =
        space_layout_create_grid("balance", min, max, false, columns, rows, CELLAPPS, (size_t)columns * rows);
    assert_non_null(layout);
    assert_checks(layout);
    return layout;
}

/* The split at pre-order number `split`. */
static space_layout_node *test_split(space_layout *layout, uint32_t split) {
    uint32_t counter = 0;
    int32_t stack[64];
    int depth = 0;
    stack[depth++] = layout->root;
    while (depth > 0) {
        int32_t index = stack[--depth];
        space_layout_node *node = &layout->nodes[index];
        if (node->leaf) continue;
        if (counter++ == split) return node;
        stack[depth++] = node->high;
        stack[depth++] = node->low;
    }
    fail_msg("no split %u", split);
    return NULL;
}

/* `count` reals uniform over [min_x, max_x) x [min_z, max_z), each of `load`,
 * written from `first`. */
static void test_scatter(test_cluster *cluster, size_t first, size_t count, double min_x, double min_z, double max_x,
                         double max_z, double load, uint64_t *state) {
    assert_true(first + count <= cluster->entity_count);
    for (size_t i = first; i < first + count; i++) {
        cluster->entities[i].x = min_x + (max_x - min_x) * test_unit(state);
        cluster->entities[i].z = min_z + (max_z - min_z) * test_unit(state);
        cluster->entities[i].load = load;
    }
}

/* ---- bound levels ------------------------------------------------------- */

static void test_level_loads(void **state) {
    (void)state;
    balance_config config = balance_default_config();
    assert_close(config.max_offload, 0.1);
    assert_close(config.aggression_increase, pow(2.0, 0.1));
    assert_close(balance_level_load(&config, 4), 0.1);
    assert_close(balance_level_load(&config, 0), 0.1 / 16);
    config = test_config();
    assert_close(balance_level_load(&config, 0), 0.02 / 16);
    assert_close(balance_level_load(&config, 1), 0.02 / 8);
    assert_close(balance_level_load(&config, 2), 0.02 / 4);
    assert_close(balance_level_load(&config, 3), 0.02 / 2);
    assert_close(balance_level_load(&config, 4), 0.02);
}

/* Four reals on a line at x = 10, 20, 30, 40 (z = 5), loads 0.002, 0.002,
 * 0.002, 0.01; levels 0.00125, 0.0025, 0.005, 0.01, 0.02. */
static void test_bounds_by_hand(void **state) {
    (void)state;
    balance_config config = test_config();
    balance_entity entities[4] = {{30, 5, 0.002}, {10, 5, 0.002}, {40, 5, 0.01}, {20, 5, 0.002}};
    balance_bounds bounds;
    balance_compute_bounds(entities, 4, &config, &bounds);

    /* From low x: 0.002 after x=10 passes level 0 (midway to 20: 15);
     * 0.004 after 20 passes level 1 (25); 0.006 after 30 passes level 2
     * (35); 0.016 after the last passes level 3 (0.1 past it); nothing
     * reaches level 4. */
    const balance_level *low_x = bounds.level[BALANCE_EDGE_LOW_X];
    assert_level(&low_x[0], 15, 0.002);
    assert_level(&low_x[1], 25, 0.004);
    assert_level(&low_x[2], 35, 0.006);
    assert_level(&low_x[3], 40.1, 0.016);
    assert_level(&low_x[4], INFINITY, 0.02);

    /* From high x: 0.01 at x=40 passes levels 0..2 at once (35), but not
     * level 3 (the load must exceed it); 0.012 after 30 does (25). */
    const balance_level *high_x = bounds.level[BALANCE_EDGE_HIGH_X];
    assert_level(&high_x[0], 35, 0.01);
    assert_level(&high_x[1], 35, 0.01);
    assert_level(&high_x[2], 35, 0.01);
    assert_level(&high_x[3], 25, 0.012);
    assert_level(&high_x[4], -INFINITY, 0.02);

    /* On Z every real is at the same place: one step, 0.1 past them. */
    const balance_level *low_z = bounds.level[BALANCE_EDGE_LOW_Z];
    const balance_level *high_z = bounds.level[BALANCE_EDGE_HIGH_Z];
    for (int l = 0; l < 4; l++) {
        assert_level(&low_z[l], 5.1, 0.016);
        assert_level(&high_z[l], 4.9, 0.016);
    }
    assert_level(&low_z[4], INFINITY, 0.02);
    assert_level(&high_z[4], -INFINITY, 0.02);
}

static void test_bounds_small_and_empty(void **state) {
    (void)state;
    balance_config config = test_config();
    balance_bounds bounds;

    /* Below the smallest level: taking the lone real is the first step. */
    balance_entity lone = {10, -20, 0.0005};
    balance_compute_bounds(&lone, 1, &config, &bounds);
    assert_level(&bounds.level[BALANCE_EDGE_LOW_X][0], 10.1, 0.0005);
    assert_level(&bounds.level[BALANCE_EDGE_HIGH_X][0], 9.9, 0.0005);
    assert_level(&bounds.level[BALANCE_EDGE_LOW_Z][0], -19.9, 0.0005);
    assert_level(&bounds.level[BALANCE_EDGE_HIGH_Z][0], -20.1, 0.0005);
    for (int l = 1; l < BALANCE_LEVELS; l++) {
        assert_level(&bounds.level[BALANCE_EDGE_LOW_X][l], INFINITY, balance_level_load(&config, l));
        assert_level(&bounds.level[BALANCE_EDGE_HIGH_X][l], -INFINITY, balance_level_load(&config, l));
    }

    /* No reals: no level is reached. */
    balance_compute_bounds(NULL, 0, &config, &bounds);
    for (int e = 0; e < BALANCE_EDGES; e++) {
        double beyond = e == BALANCE_EDGE_HIGH_X || e == BALANCE_EDGE_HIGH_Z ? -INFINITY : INFINITY;
        for (int l = 0; l < BALANCE_LEVELS; l++)
            assert_level(&bounds.level[e][l], beyond, balance_level_load(&config, l));
    }

    /* Two reals closer than a centimetre are one step; a negative load
     * counts as none. */
    balance_entity pair[3] = {{10, 0, 0.001}, {10.005, 0, 0.001}, {50, 0, -1}};
    balance_compute_bounds(pair, 3, &config, &bounds);
    assert_level(&bounds.level[BALANCE_EDGE_LOW_X][0], (10.005 + 50) / 2, 0.002);
    assert_level(&bounds.level[BALANCE_EDGE_LOW_X][1], INFINITY, balance_level_load(&config, 1));
}

/* ---- convergence ---------------------------------------------------------- */

/* 2,000 reals of equal load over the square, 80 % of them (and so of the
 * load) in the 100 m corner at the origin; 0.8 cores in all. */
static void test_hot_corner(test_cluster *cluster, uint64_t seed) {
    uint64_t random = seed;
    const size_t count = 2000, corner = count * 8 / 10;
    const double load = 0.8 / (double)count;
    test_scatter(cluster, 0, corner, 0, 0, 100, 100, load, &random);
    test_scatter(cluster, corner, count - corner, 0, 0, 400, 400, load, &random);
}

static void test_converges(uint32_t columns, uint32_t rows) {
    test_cluster cluster;
    test_cluster_init(&cluster, 2000);
    test_hot_corner(&cluster, 0x9e3779b97f4a7c15ull + columns);
    space_layout *layout = test_grid(columns, rows, SQUARE_MIN, SQUARE_MAX);
    test_cluster_measure(&cluster, layout);
    double initial = test_cluster_spread(&cluster, layout);
    assert_true(initial > 1.0);

    balance_move moves[8];
    int passes = 0, lines_moved = 0;
    double spread = initial;
    while (spread > TEST_TOLERANCE && passes < TEST_MAX_PASSES) {
        size_t moved = test_cluster_pass(&cluster, layout, moves, 8);
        lines_moved += (int)moved;
        assert_true(moved <= space_layout_split_count(layout));
        for (size_t m = 0; m < moved && m < 8; m++) assert_true(moves[m].from != moves[m].to);
        assert_checks(layout);
        spread = test_cluster_spread(&cluster, layout);
        passes++;
    }
    print_message("%ux%u, hot corner: within +-5%% after %d passes (%d line moves), spread %.1f%% -> %.2f%%\n", columns,
                  rows, passes, lines_moved, initial * 100, spread * 100);
    if (spread > TEST_TOLERANCE) fail_msg("spread %.3f after %d passes", spread, passes);

    /* Settled, it stays settled. */
    for (int i = 0; i < 20; i++) {
        test_cluster_pass(&cluster, layout, moves, 8);
        assert_true(test_cluster_spread(&cluster, layout) <= TEST_TOLERANCE);
    }
    space_layout_free(layout);
    test_cluster_close(&cluster);
}

static void test_converges_2x2(void **state) {
    (void)state;
    test_converges(2, 2);
}

static void test_converges_1x4(void **state) {
    (void)state;
    test_converges(4, 1);
}

/* ---- one line: where it goes, how far, whether at all -------------------- */

/* Two cells split at x = 200: 1,000 reals on the low half of `low_load`
 * each, 1,000 on the high half of `high_load` each. */
static space_layout *test_two_cells(test_cluster *cluster, double low_load, double high_load) {
    test_cluster_init(cluster, 2000);
    uint64_t random = 42;
    test_scatter(cluster, 0, 1000, 0, 0, 200, 400, low_load, &random);
    test_scatter(cluster, 1000, 1000, 200, 0, 400, 400, high_load, &random);
    space_layout *layout = test_grid(2, 1, SQUARE_MIN, SQUARE_MAX);
    assert_close(test_split(layout, 0)->at, 200);
    test_cluster_measure(cluster, layout);
    return layout;
}

/* Mirrors every real across x = 200, so the load changes sides. */
static void test_mirror(test_cluster *cluster) {
    for (size_t i = 0; i < cluster->entity_count; i++) cluster->entities[i].x = 400 - cluster->entities[i].x;
}

static void test_farthest_level_within_target(void **state) {
    (void)state;
    test_cluster cluster;
    /* Low 0.4, high 0.1: d = 0.4 - 0.25 = 0.15. */
    space_layout *layout = test_two_cells(&cluster, 0.0004, 0.0001);
    space_layout_node *line = test_split(layout, 0);
    const balance_level *levels = cluster.reports[1].bounds.level[BALANCE_EDGE_HIGH_X];
    double d = cluster.reports[1].load - (cluster.reports[1].load + cluster.reports[2].load) / 2;
    assert_close(d, 0.15);

    /* Aggression 1: the target 0.15 is beyond every level: the largest. */
    space_layout *full = space_layout_copy(layout);
    balance_move move;
    assert_int_equal(balance_pass(full, test_cluster_lookup, &cluster, &cluster.config, &move, 1), 1);
    assert_int_equal(move.split, 0);
    assert_close(move.from, 200);
    assert_close(move.to, levels[4].position);
    assert_close(test_split(full, 0)->at, levels[4].position);
    assert_int_equal(test_split(full, 0)->direction, -1);
    space_layout_free(full);

    /* Aggression 1/16: target 0.009375, between levels 2 and 3. */
    line->aggression = 0.0625;
    assert_true(levels[2].load <= d * 0.0625 && levels[3].load > d * 0.0625);
    assert_int_equal(balance_pass(layout, test_cluster_lookup, &cluster, &cluster.config, &move, 1), 1);
    assert_close(line->at, levels[2].position);

    /* Nothing to gain below the smallest level: no move. */
    space_layout_free(layout);
    test_cluster_close(&cluster);
    layout = test_two_cells(&cluster, 0.0002, 0.0002);
    cluster.reports[1].load = 0.2 + 0.001;
    cluster.reports[2].load = 0.2 - 0.001; /* d = 0.001 < 0.00125 */
    assert_int_equal(balance_pass(layout, test_cluster_lookup, &cluster, &cluster.config, &move, 1), 0);
    assert_close(test_split(layout, 0)->at, 200);
    cluster.reports[1].load = 0.2 + 0.0015;
    cluster.reports[2].load = 0.2 - 0.0015; /* d = 0.0015: moves */
    assert_int_equal(balance_pass(layout, test_cluster_lookup, &cluster, &cluster.config, &move, 1), 1);
    assert_true(test_split(layout, 0)->at < 200);
    space_layout_free(layout);
    test_cluster_close(&cluster);
}

/* The shrinking side's level 0 can be below the smallest level (a cell next
 * to the line whose reals together are): the line still stays unless d
 * reaches the smallest level. Split 0 at x = 200 between cells 1 (x < 100)
 * and 3 (100 .. 200) on the low side and cell 2 on the high side, empty. */
static bool test_moves_with_loads(double load_of_cell_1, double load_of_cell_3, double *at) {
    test_cluster cluster;
    test_cluster_init(&cluster, 12);
    for (size_t i = 0; i < 11; i++) cluster.entities[i] = (balance_entity){10 + 5 * (double)i, 50, load_of_cell_1 / 11};
    cluster.entities[11] = (balance_entity){150, 50, load_of_cell_3};
    char err[256];
    space_layout *layout = space_layout_create("balance", SQUARE_MIN, SQUARE_MAX, false, 1);
    assert_non_null(layout);
    assert_int_equal(space_layout_split_cell(layout, 1, SPACE_LAYOUT_AXIS_X, 200, 2, err, sizeof err), 0);
    assert_int_equal(space_layout_split_cell(layout, 1, SPACE_LAYOUT_AXIS_X, 100, 3, err, sizeof err), 0);
    assert_checks(layout);
    test_cluster_measure(&cluster, layout);
    assert_int_equal(cluster.reports[3].reals, 1);
    balance_move move;
    size_t moved = balance_pass(layout, test_cluster_lookup, &cluster, &cluster.config, &move, 1);
    *at = test_split(layout, 0)->at;
    bool root_moved = *at != 200;
    /* Split 1 (cell 1 against cell 3) may move too; the root comes first. */
    if (root_moved) assert_int_equal(move.split, 0);
    assert_true(moved >= (root_moved ? 1u : 0u));
    space_layout_free(layout);
    test_cluster_close(&cluster);
    return root_moved;
}

static void test_smallest_level(void **state) {
    (void)state;
    double at;
    /* d = 0.00115 - 0.0023 / 3 = 0.00038, below 0.00125, though cell 3's
     * level 0 (0.0001, all of it) would fit. */
    assert_false(test_moves_with_loads(0.0022, 0.0001, &at));
    assert_true(at == 200);
    /* Ten times the load: d = 0.0038. Level 1 of the low side is cell 3's
     * unreached level 1 at split 1 (0.0025 <= d): the line takes all of
     * cell 3 and stops at split 1. */
    assert_true(test_moves_with_loads(0.022, 0.001, &at));
    assert_true(at == 100);
}

/* A cell just added at the edge of its neighbour has no area; it takes its
 * neighbour's first level whatever the loads say: here the neighbour is so
 * lightly loaded that d is below the smallest level, and the new cell's idle
 * cellapp reports more load than the neighbour. Once it has area the loads
 * decide again; a neighbour with no reals gives nothing. */
static void test_new_cell_takes_a_first_step(void **state) {
    (void)state;
    test_cluster cluster;
    test_cluster_init(&cluster, 10);
    for (size_t i = 0; i < 10; i++) cluster.entities[i] = (balance_entity){20 + 30 * (double)i, 200, 0.0001};
    char err[256];
    space_layout *layout = space_layout_create("balance", SQUARE_MIN, SQUARE_MAX, false, 1);
    assert_non_null(layout);
    assert_int_equal(space_layout_split_cell(layout, 1, SPACE_LAYOUT_AXIS_X, 400, 2, err, sizeof err), 0);
    assert_checks(layout);
    assert_true(space_layout_cell_area(layout, 2) == 0);
    test_cluster_measure(&cluster, layout);
    cluster.reports[2].load = cluster.reports[2].cellapp_load = 0.003; /* its cellapp's own work */
    double first = cluster.reports[1].bounds.level[BALANCE_EDGE_HIGH_X][0].position;
    assert_true(first < 400);

    balance_move move;
    assert_int_equal(balance_pass(layout, test_cluster_lookup, &cluster, &cluster.config, &move, 1), 1);
    assert_close(test_split(layout, 0)->at, first);
    assert_true(space_layout_cell_area(layout, 2) > 0);
    layout->epoch++;
    test_cluster_measure(&cluster, layout);
    assert_true(cluster.reports[2].reals > 0);
    /* It has area now: d (below the smallest level) keeps the line. */
    assert_int_equal(balance_pass(layout, test_cluster_lookup, &cluster, &cluster.config, &move, 1), 0);
    space_layout_free(layout);

    test_cluster_close(&cluster);

    /* A neighbour with no reals: nothing to take, the line stays (here the
     * new cell is the low side, squeezed at x = 0). */
    test_cluster_init(&cluster, 0);
    layout = space_layout_create("balance", SQUARE_MIN, SQUARE_MAX, false, 1);
    assert_non_null(layout);
    assert_int_equal(space_layout_split_cell(layout, 1, SPACE_LAYOUT_AXIS_X, 0, 2, err, sizeof err), 0);
    test_cluster_measure(&cluster, layout);
    cluster.reports[1].load = 0.003;
    assert_int_equal(balance_pass(layout, test_cluster_lookup, &cluster, &cluster.config, &move, 1), 0);
    assert_close(test_split(layout, 0)->at, 0);
    space_layout_free(layout);
    test_cluster_close(&cluster);
}

static void test_aggression(void **state) {
    (void)state;
    test_cluster cluster;
    const balance_config *config = &cluster.config;
    space_layout *layout = test_two_cells(&cluster, 0.0006, 0.0001);
    space_layout_node *line = test_split(layout, 0);
    balance_move move;

    /* A move one way grows it by 2^(1/10). */
    line->aggression = 0.25;
    assert_int_equal(test_cluster_pass(&cluster, layout, &move, 1), 1);
    assert_true(move.to < move.from);
    assert_int_equal(line->direction, -1);
    double expected = 0.25 * config->aggression_increase;
    assert_close(line->aggression, expected);

    /* The load flips: the line reverses and its aggression halves. */
    test_mirror(&cluster);
    test_cluster_measure(&cluster, layout);
    assert_int_equal(test_cluster_pass(&cluster, layout, &move, 1), 1);
    assert_true(move.to > move.from);
    assert_int_equal(line->direction, 1);
    expected *= config->aggression_decrease;
    assert_close(line->aggression, expected);

    /* On the same way again it grows. */
    assert_int_equal(test_cluster_pass(&cluster, layout, &move, 1), 1);
    assert_true(move.to > move.from);
    expected *= config->aggression_increase;
    assert_close(line->aggression, expected);

    /* A reversal at the minimum stays at the minimum. */
    line->aggression = config->min_aggression;
    line->direction = -1;
    assert_int_equal(test_cluster_pass(&cluster, layout, &move, 1), 1);
    assert_int_equal(line->direction, 1);
    assert_true(line->aggression == config->min_aggression);

    /* Growth stops at the maximum. */
    line->aggression = 0.98;
    assert_int_equal(test_cluster_pass(&cluster, layout, &move, 1), 1);
    assert_int_equal(line->direction, 1);
    assert_true(line->aggression == config->max_aggression);
    space_layout_free(layout);
    test_cluster_close(&cluster);

    /* A line with nothing to do grows too, pass by pass, up to the maximum. */
    layout = test_two_cells(&cluster, 0.0002, 0.0002);
    line = test_split(layout, 0);
    cluster.reports[1].load = cluster.reports[2].load = 0.2;
    line->aggression = config->min_aggression;
    line->direction = 1;
    expected = config->min_aggression;
    for (int pass = 0; pass < 45; pass++) {
        assert_int_equal(balance_pass(layout, test_cluster_lookup, &cluster, config, &move, 1), 0);
        expected = fmin(expected * config->aggression_increase, config->max_aggression);
        assert_close(line->aggression, expected);
        assert_true(line->aggression >= config->min_aggression && line->aggression <= config->max_aggression);
    }
    assert_true(line->aggression == config->max_aggression);
    assert_int_equal(line->direction, 1);
    assert_close(line->at, 200);
    space_layout_free(layout);
    test_cluster_close(&cluster);

    /* Other factors are kept to as well. */
    layout = test_two_cells(&cluster, 0.0006, 0.0001);
    line = test_split(layout, 0);
    cluster.config.aggression_decrease = 0.25;
    cluster.config.aggression_increase = 1.5;
    cluster.config.min_aggression = 0.1;
    cluster.config.max_aggression = 0.8;
    line->aggression = 0.5;
    line->direction = 1;
    assert_int_equal(test_cluster_pass(&cluster, layout, &move, 1), 1);
    assert_close(line->aggression, 0.125);
    assert_int_equal(test_cluster_pass(&cluster, layout, &move, 1), 1);
    assert_close(line->aggression, 0.1875);
    line->aggression = 0.7;
    assert_int_equal(test_cluster_pass(&cluster, layout, &move, 1), 1);
    assert_close(line->aggression, 0.8);
    space_layout_free(layout);
    test_cluster_close(&cluster);
}

static void test_no_move_before_creation(void **state) {
    (void)state;
    test_cluster cluster;
    test_cluster_init(&cluster, 2000);
    test_hot_corner(&cluster, 7);
    /* 2x2: split 0 is x = 200; split 1 (z = 200) parts cells 1 and 2 on the
     * low column, split 2 cells 3 and 4 on the high one. */
    space_layout *layout = test_grid(2, 2, SQUARE_MIN, SQUARE_MAX);
    test_cluster_measure(&cluster, layout);
    cluster.missing_cell = 4;
    balance_move moves[4];
    size_t moved = balance_pass(layout, test_cluster_lookup, &cluster, &cluster.config, moves, 4);
    /* Only the line with both sides reported moves. */
    assert_int_equal(moved, 1);
    assert_int_equal(moves[0].split, 1);
    assert_close(test_split(layout, 0)->at, 200);
    assert_true(test_split(layout, 1)->at < 200);
    assert_close(test_split(layout, 2)->at, 200);
    /* The unmoved lines did not change direction. */
    assert_int_equal(test_split(layout, 0)->direction, 0);
    assert_int_equal(test_split(layout, 2)->direction, 0);
    space_layout_free(layout);

    /* Two cells: whichever side is missing, the line stays. */
    for (uint32_t missing = 1; missing <= 2; missing++) {
        layout = test_grid(2, 1, SQUARE_MIN, SQUARE_MAX);
        test_cluster_measure(&cluster, layout);
        cluster.missing_cell = missing;
        assert_int_equal(balance_pass(layout, test_cluster_lookup, &cluster, &cluster.config, moves, 4), 0);
        assert_close(test_split(layout, 0)->at, 200);
        cluster.missing_cell = 0;
        assert_int_equal(balance_pass(layout, test_cluster_lookup, &cluster, &cluster.config, moves, 4), 1);
        assert_true(test_split(layout, 0)->at < 200);
        space_layout_free(layout);
    }
    test_cluster_close(&cluster);
}

/* Sets the cellapp load of cell 2 (the growing side) and passes a copy of
 * the layout; returns whether the line moved. */
static bool test_moves_with_cellapp_load(test_cluster *cluster, const space_layout *layout, double cellapp_load) {
    cluster->reports[2].cellapp_load = cellapp_load;
    space_layout *copy = space_layout_copy(layout);
    balance_move move;
    size_t moved = balance_pass(copy, test_cluster_lookup, cluster, &cluster->config, &move, 1);
    bool line_moved = test_split(copy, 0)->at != 200;
    assert_int_equal(moved, line_moved ? 1 : 0);
    space_layout_free(copy);
    return line_moved;
}

static void test_safety_bound(void **state) {
    (void)state;
    test_cluster cluster;
    /* Low 0.6, high 0.2: the average 0.4. */
    space_layout *layout = test_two_cells(&cluster, 0.0006, 0.0002);
    double average = (cluster.reports[1].load + cluster.reports[2].load) / 2;
    assert_close(average, 0.4);

    /* The bound, 0.85, is above 1.1 x 0.4. */
    double safety = fmax(cluster.config.safety_bound, cluster.config.safety_ratio * average);
    assert_close(safety, 0.85);
    assert_false(test_moves_with_cellapp_load(&cluster, layout, safety));
    assert_false(test_moves_with_cellapp_load(&cluster, layout, 2.0));
    assert_true(test_moves_with_cellapp_load(&cluster, layout, nextafter(safety, 0)));
    assert_true(test_moves_with_cellapp_load(&cluster, layout, 0.2));

    /* A low bound: the ratio of the average counts. */
    cluster.config.safety_bound = 0.1;
    safety = fmax(cluster.config.safety_bound, cluster.config.safety_ratio * average);
    assert_close(safety, 0.44);
    assert_false(test_moves_with_cellapp_load(&cluster, layout, safety));
    assert_true(test_moves_with_cellapp_load(&cluster, layout, nextafter(safety, 0)));

    /* The shrinking side's cellapp may be as busy as it likes. */
    cluster.reports[1].cellapp_load = 5.0;
    assert_true(test_moves_with_cellapp_load(&cluster, layout, 0.2));

    /* A retiring cell shrinks even toward a busy cellapp. */
    layout->nodes[test_split(layout, 0)->low].retiring = true;
    assert_true(test_moves_with_cellapp_load(&cluster, layout, 2.0));
    space_layout_free(layout);
    test_cluster_close(&cluster);
}

static void test_max_step(void **state) {
    (void)state;
    test_cluster cluster;
    space_layout *layout = test_two_cells(&cluster, 0.0004, 0.0001);
    /* Unlimited, the line goes farther than 5 m. */
    double free_position = cluster.reports[1].bounds.level[BALANCE_EDGE_HIGH_X][4].position;
    assert_true(free_position < 195);

    cluster.config.max_step = 5;
    balance_move move;
    assert_int_equal(balance_pass(layout, test_cluster_lookup, &cluster, &cluster.config, &move, 1), 1);
    assert_close(move.from, 200);
    assert_close(move.to, 195);
    assert_close(test_split(layout, 0)->at, 195);

    /* The other way too. */
    test_mirror(&cluster);
    test_cluster_measure(&cluster, layout);
    assert_int_equal(balance_pass(layout, test_cluster_lookup, &cluster, &cluster.config, &move, 1), 1);
    assert_close(move.to, 200);

    /* A step larger than the level's leaves the level's position. */
    cluster.config.max_step = 100;
    test_mirror(&cluster);
    test_cluster_measure(&cluster, layout);
    free_position = cluster.reports[1].bounds.level[BALANCE_EDGE_HIGH_X][4].position;
    assert_int_equal(balance_pass(layout, test_cluster_lookup, &cluster, &cluster.config, &move, 1), 1);
    assert_close(move.to, free_position);
    space_layout_free(layout);
    test_cluster_close(&cluster);
}

/* A line does not cross the splits inside the side it shrinks. */
static void test_nested_limit(void **state) {
    (void)state;
    test_cluster cluster;
    test_cluster_init(&cluster, 2000);
    /* 1x4: split 0 at x = 200, split 1 at 100, split 2 at 300. All the load
     * is in cell 1 (x < 100); cell 2 is empty, so the root line could shed
     * all of cell 2 and more: it stops at split 1. */
    uint64_t random = 3;
    test_scatter(&cluster, 0, 2000, 0, 0, 100, 400, 0.0004, &random);
    space_layout *layout = test_grid(4, 1, SQUARE_MIN, SQUARE_MAX);
    assert_close(test_split(layout, 1)->at, 100);
    test_cluster_measure(&cluster, layout);
    assert_int_equal(cluster.reports[2].reals, 0);
    balance_move moves[3];
    assert_int_equal(test_cluster_pass(&cluster, layout, moves, 3), 2);
    assert_int_equal(moves[0].split, 0);
    assert_true(test_split(layout, 0)->at == 100);
    /* Then split 1, inside the root line's new low region, moves on. */
    assert_int_equal(moves[1].split, 1);
    assert_true(test_split(layout, 1)->at < 100);
    assert_checks(layout);
    double before = test_cluster_spread(&cluster, layout);
    for (int pass = 0; pass < 30; pass++) {
        test_cluster_pass(&cluster, layout, NULL, 0);
        assert_checks(layout);
        assert_true(test_split(layout, 0)->at >= test_split(layout, 1)->at);
        assert_true(test_split(layout, 2)->at >= test_split(layout, 0)->at);
    }
    assert_true(test_cluster_spread(&cluster, layout) < before);
    space_layout_free(layout);
    test_cluster_close(&cluster);
}

/* ---- retiring and removing a cell ------------------------------------------ */

static const balance_cellapp LIVE[4] = {
    {1, 0.05, false, false}, {2, 0.05, false, false}, {3, 0.05, false, false}, {4, 0.05, false, false}};

static balance_action test_plan(const space_layout *layout, test_cluster *cluster, const balance_cellapp *cellapps,
                                size_t count) {
    balance_action action = balance_plan(layout, test_cluster_lookup, cluster, cellapps, count, &cluster->config);
    assert_true(strlen(action.reason) < sizeof action.reason);
    return action;
}

static void test_retirement_waits_for_every_ack(void **state) {
    (void)state;
    test_cluster cluster;
    test_cluster_init(&cluster, 2000);
    uint64_t random = 11;
    test_scatter(&cluster, 0, 2000, 0, 0, 400, 400, 0.0001, &random);
    space_layout *layout = test_grid(2, 2, SQUARE_MIN, SQUARE_MAX);
    cluster.config.retire_below = 0; /* only the retirement under test */
    char err[256];
    assert_int_equal(space_layout_set_retiring(layout, 1, true, err, sizeof err), 0);
    test_cluster_measure(&cluster, layout);

    int passes = 0;
    while (space_layout_cell_area(layout, 1) > 0 && passes < 50) {
        balance_action action = test_plan(layout, &cluster, LIVE, 4);
        assert_int_not_equal(action.kind, BALANCE_REMOVE);
        test_cluster_pass(&cluster, layout, NULL, 0);
        assert_checks(layout);
        passes++;
    }
    print_message("retiring cell 1 reached zero area after %d passes\n", passes);
    assert_true(space_layout_cell_area(layout, 1) == 0);
    assert_int_equal(cluster.reports[1].reals, 0);
    assert_close(cluster.reports[1].load, 0);

    /* Every condition holds: it goes. */
    balance_action action = test_plan(layout, &cluster, LIVE, 4);
    assert_int_equal(action.kind, BALANCE_REMOVE);
    assert_int_equal(action.cell_id, 1);

    /* Each one failing keeps it. */
    cluster.reports[1].reals = 1;
    assert_int_equal(test_plan(layout, &cluster, LIVE, 4).kind, BALANCE_NOTHING);
    cluster.reports[1].reals = 0;
    cluster.reports[1].pending_offloads = 3;
    assert_int_equal(test_plan(layout, &cluster, LIVE, 4).kind, BALANCE_NOTHING);
    cluster.reports[1].pending_offloads = 0;
    for (uint32_t cell = 1; cell <= 4; cell++) {
        cluster.reports[cell].epoch = layout->epoch - 1;
        assert_int_equal(test_plan(layout, &cluster, LIVE, 4).kind, BALANCE_NOTHING);
        cluster.reports[cell].epoch = layout->epoch;
    }
    for (uint32_t cell = 1; cell <= 4; cell++) {
        cluster.missing_cell = cell;
        assert_int_equal(test_plan(layout, &cluster, LIVE, 4).kind, BALANCE_NOTHING);
    }
    cluster.missing_cell = 0;
    /* A newer epoch applied counts as applied. */
    cluster.reports[3].epoch = layout->epoch + 1;
    assert_int_equal(test_plan(layout, &cluster, LIVE, 4).kind, BALANCE_REMOVE);

    /* With area it stays, whatever else holds. */
    space_layout *wide = space_layout_copy(layout);
    assert_int_equal(space_layout_move_split(wide, 1, 1, err, sizeof err), 0);
    assert_true(space_layout_cell_area(wide, 1) > 0);
    assert_int_equal(test_plan(wide, &cluster, LIVE, 4).kind, BALANCE_NOTHING);
    space_layout_free(wide);

    assert_applies(layout, &action);
    assert_null(space_layout_find_cell(layout, 1));
    assert_int_equal(space_layout_cell_count(layout), 3);
    assert_close(space_layout_cell_area(layout, 2), test_split(layout, 0)->at * 400);
    layout->epoch++;
    test_cluster_measure(&cluster, layout);
    assert_int_equal(test_plan(layout, &cluster, LIVE, 4).kind, BALANCE_NOTHING);
    space_layout_free(layout);
    test_cluster_close(&cluster);
}

/* ---- plan: gone, draining, add, retire ------------------------------------- */

static void test_plan_gone_cellapp(void **state) {
    (void)state;
    test_cluster cluster;
    test_cluster_init(&cluster, 2000);
    uint64_t random = 5;
    test_scatter(&cluster, 0, 2000, 0, 0, 400, 400, 0.0001, &random);
    space_layout *layout = test_grid(2, 2, SQUARE_MIN, SQUARE_MAX);
    test_cluster_measure(&cluster, layout);
    cluster.missing_cell = 4; /* its cellapp is gone: nobody reports it */

    /* Cellapp 4 is gone; 5 and 6 are free, 6 the less loaded; 7 is
     * draining, so not free. */
    const balance_cellapp free_ones[] = {{1, 0.05, false, false}, {2, 0.05, false, false}, {3, 0.05, false, false},
                                         {5, 0.5, false, false},  {6, 0.2, false, false},  {7, 0.0, true, false}};
    balance_action action = test_plan(layout, &cluster, free_ones, 6);
    assert_int_equal(action.kind, BALANCE_HAND_OVER);
    assert_int_equal(action.cell_id, 4);
    assert_int_equal(action.cellapp_id, 6);
    space_layout *copy = space_layout_copy(layout);
    assert_applies(copy, &action);
    assert_int_equal(space_layout_find_cell(copy, 4)->cellapp_id, 6);
    space_layout_free(copy);

    /* No cellapp is free: the cell goes. */
    const balance_cellapp none_free[] = {
        {1, 0.05, false, false}, {2, 0.05, false, false}, {3, 0.05, false, false}, {7, 0.0, true, false}};
    action = test_plan(layout, &cluster, none_free, 4);
    assert_int_equal(action.kind, BALANCE_REMOVE);
    assert_int_equal(action.cell_id, 4);
    copy = space_layout_copy(layout);
    assert_applies(copy, &action);
    assert_null(space_layout_find_cell(copy, 4));
    assert_int_equal(space_layout_cell_count(copy), 3);
    assert_close(space_layout_cell_area(copy, 3), 200 * 400);
    space_layout_free(copy);

    /* A suspect (alive, but its lease lapsed or its link is down) takes no
     * cell, however idle: 5 is chosen over the idler suspect 6. And a
     * suspect's own cells stay where they are. */
    const balance_cellapp with_suspect[] = {{1, 0.05, false, false},
                                            {2, 0.05, false, false},
                                            {3, 0.05, false, false},
                                            {5, 0.5, false, false},
                                            {6, 0.0, false, true}};
    action = test_plan(layout, &cluster, with_suspect, 5);
    assert_int_equal(action.kind, BALANCE_HAND_OVER);
    assert_int_equal(action.cell_id, 4);
    assert_int_equal(action.cellapp_id, 5);
    const balance_cellapp only_suspect_free[] = {
        {1, 0.05, false, false}, {2, 0.05, false, false}, {3, 0.05, false, false}, {6, 0.0, false, true}};
    action = test_plan(layout, &cluster, only_suspect_free, 4);
    assert_int_equal(action.kind, BALANCE_REMOVE);
    const balance_cellapp owner_suspect[] = {{1, 0.05, false, false},
                                             {2, 0.05, false, false},
                                             {3, 0.05, false, false},
                                             {4, 0.05, false, true},
                                             {5, 0.1, false, false}};
    cluster.missing_cell = 0; /* cellapp 4 is alive, only suspect: its cell stays */
    action = test_plan(layout, &cluster, owner_suspect, 5);
    assert_true(action.kind != BALANCE_HAND_OVER && action.kind != BALANCE_REMOVE);
    cluster.missing_cell = 4;

    /* Gone cells go before draining ones. */
    const balance_cellapp both[] = {
        {1, 0.05, false, false}, {2, 0.05, false, false}, {3, 0.05, true, false}, {5, 0.1, false, false}};
    action = test_plan(layout, &cluster, both, 4);
    assert_int_equal(action.kind, BALANCE_HAND_OVER);
    assert_int_equal(action.cell_id, 4);
    assert_int_equal(action.cellapp_id, 5);

    /* The only cell of a space stays until someone can take it. */
    space_layout *one = space_layout_create("one", SQUARE_MIN, SQUARE_MAX, false, 9);
    assert_non_null(one);
    const balance_cellapp only_draining[] = {{7, 0.0, true, false}};
    assert_int_equal(test_plan(one, &cluster, only_draining, 1).kind, BALANCE_NOTHING);
    action = test_plan(one, &cluster, free_ones + 3, 3);
    assert_int_equal(action.kind, BALANCE_HAND_OVER);
    assert_int_equal(action.cellapp_id, 6);
    assert_applies(one, &action);
    space_layout_free(one);
    space_layout_free(layout);
    test_cluster_close(&cluster);
}

static void test_plan_draining_cellapp(void **state) {
    (void)state;
    test_cluster cluster;
    test_cluster_init(&cluster, 2000);
    uint64_t random = 6;
    test_scatter(&cluster, 0, 2000, 0, 0, 400, 400, 0.0001, &random);
    space_layout *layout = test_grid(2, 2, SQUARE_MIN, SQUARE_MAX);
    test_cluster_measure(&cluster, layout);

    const balance_cellapp with_free[] = {{1, 0.05, false, false},
                                         {2, 0.05, true, false},
                                         {3, 0.05, false, false},
                                         {4, 0.05, false, false},
                                         {8, 0.3, false, false}};
    balance_action action = test_plan(layout, &cluster, with_free, 5);
    assert_int_equal(action.kind, BALANCE_HAND_OVER);
    assert_int_equal(action.cell_id, 2);
    assert_int_equal(action.cellapp_id, 8);
    space_layout *copy = space_layout_copy(layout);
    assert_applies(copy, &action);
    assert_int_equal(space_layout_find_cell(copy, 2)->cellapp_id, 8);
    assert_false(space_layout_find_cell(copy, 2)->retiring);
    space_layout_free(copy);

    /* None free: it retires, and is then left to the passes. */
    action = test_plan(layout, &cluster, with_free, 4);
    assert_int_equal(action.kind, BALANCE_RETIRE);
    assert_int_equal(action.cell_id, 2);
    assert_applies(layout, &action);
    assert_true(space_layout_find_cell(layout, 2)->retiring);
    assert_int_equal(test_plan(layout, &cluster, with_free, 4).kind, BALANCE_NOTHING);

    /* A retiring cell handed over stops retiring. */
    action = test_plan(layout, &cluster, with_free, 5);
    assert_int_not_equal(action.kind, BALANCE_RETIRE);
    balance_action hand_over = {.kind = BALANCE_HAND_OVER, .cell_id = 2, .cellapp_id = 8};
    assert_applies(layout, &hand_over);
    assert_false(space_layout_find_cell(layout, 2)->retiring);

    /* A cellapp that owns a cell of the space cannot take another. */
    char err[256] = "";
    balance_action taken = {.kind = BALANCE_HAND_OVER, .cell_id = 1, .cellapp_id = 3};
    assert_int_equal(balance_apply(layout, &taken, err, sizeof err), -1);
    assert_true(strlen(err) > 0);
    assert_int_equal(space_layout_find_cell(layout, 1)->cellapp_id, 1);
    space_layout_free(layout);
    test_cluster_close(&cluster);
}

static void test_plan_add_cell(void **state) {
    (void)state;
    test_cluster cluster;
    test_cluster_init(&cluster, 2000);
    uint64_t random = 8;
    /* 400 x 800: every cell of a 2x2 grid is 200 wide and 400 long on Z. */
    const double min[3] = {0, -100, 0}, max[3] = {400, 100, 800};
    test_scatter(&cluster, 0, 2000, 0, 0, 400, 800, 0.0004, &random);
    space_layout *layout = test_grid(2, 2, min, max);
    test_cluster_measure(&cluster, layout);
    cluster.reports[3].load = 0.9; /* cell 3: x 200..400, z 0..400, the hottest */

    /* The space's cellapps average 0.8, the cluster's (with 5 and 6) 0.6. */
    const balance_cellapp hot[] = {{1, 0.8, false, false}, {2, 0.8, false, false}, {3, 0.8, false, false},
                                   {4, 0.8, false, false}, {5, 0.3, false, false}, {6, 0.1, false, false}};
    balance_action action = test_plan(layout, &cluster, hot, 6);
    assert_int_equal(action.kind, BALANCE_ADD_CELL);
    assert_int_equal(action.cell_id, 3);
    assert_int_equal(action.cellapp_id, 6);
    assert_int_equal(action.axis, SPACE_LAYOUT_AXIS_Z);
    assert_close(action.at, 400);
    space_layout *copy = space_layout_copy(layout);
    uint32_t new_cell = copy->next_cell_id;
    assert_applies(copy, &action);
    assert_int_equal(space_layout_cell_count(copy), 5);
    assert_int_equal(space_layout_find_cell(copy, new_cell)->cellapp_id, 6);
    assert_true(space_layout_cell_area(copy, new_cell) == 0);
    assert_close(space_layout_cell_area(copy, 3), 200 * 400);

    /* The new cell is then grown by the passes once its cellapp reports it. */
    copy->epoch++;
    test_cluster_measure(&cluster, copy);
    /* Until then, no line beside it moves: split 0 (x = 200), 2 (the high
     * column's z = 400) and 3 (cell 3 against the new cell); split 1 on the
     * low column may. */
    cluster.missing_cell = new_cell;
    double before[4];
    for (uint32_t split = 0; split < 4; split++) before[split] = test_split(copy, split)->at;
    balance_pass(copy, test_cluster_lookup, &cluster, &cluster.config, NULL, 0);
    assert_true(test_split(copy, 0)->at == before[0]);
    assert_true(test_split(copy, 2)->at == before[2]);
    assert_true(test_split(copy, 3)->at == before[3]);
    assert_true(test_split(copy, 3)->at == 400);
    cluster.missing_cell = 0;
    for (int pass = 0; pass < 10; pass++) {
        test_cluster_pass(&cluster, copy, NULL, 0);
        assert_checks(copy);
    }
    assert_true(space_layout_cell_area(copy, new_cell) > 0);
    assert_true(cluster.reports[new_cell].reals > 0);
    space_layout_free(copy);

    /* Within the margin: nothing. 0.8 against 5.4 / 7 + 0.05 = 0.821. */
    const balance_cellapp within[] = {{1, 0.8, false, false}, {2, 0.8, false, false}, {3, 0.8, false, false},
                                      {4, 0.8, false, false}, {5, 0.8, false, false}, {6, 0.6, false, false},
                                      {7, 0.8, false, false}};
    assert_int_equal(test_plan(layout, &cluster, within, 7).kind, BALANCE_NOTHING);
    /* Hot, but no free cellapp: nothing. */
    assert_int_equal(test_plan(layout, &cluster, hot, 4).kind, BALANCE_NOTHING);
    /* A draining cellapp is no candidate, and does not count in the
     * cluster's average. */
    const balance_cellapp draining[] = {{1, 0.8, false, false},
                                        {2, 0.8, false, false},
                                        {3, 0.8, false, false},
                                        {4, 0.8, false, false},
                                        {5, 0.0, true, false}};
    assert_int_equal(test_plan(layout, &cluster, draining, 5).kind, BALANCE_NOTHING);
    /* Not while a cell is unreported. */
    cluster.missing_cell = 2;
    assert_int_equal(test_plan(layout, &cluster, hot, 6).kind, BALANCE_NOTHING);
    cluster.missing_cell = 0;

    /* A square cell is split on X, at its max x. */
    space_layout *square = test_grid(2, 2, SQUARE_MIN, SQUARE_MAX);
    test_cluster_measure(&cluster, square);
    cluster.reports[1].load = 0.9;
    action = test_plan(square, &cluster, hot, 6);
    assert_int_equal(action.kind, BALANCE_ADD_CELL);
    assert_int_equal(action.cell_id, 1);
    assert_int_equal(action.axis, SPACE_LAYOUT_AXIS_X);
    assert_close(action.at, 200);
    assert_applies(square, &action);
    space_layout_free(square);
    space_layout_free(layout);
    test_cluster_close(&cluster);
}

static void test_plan_retire_idle(void **state) {
    (void)state;
    test_cluster cluster;
    test_cluster_init(&cluster, 100);
    uint64_t random = 9;
    test_scatter(&cluster, 0, 100, 0, 0, 400, 400, 0.0001, &random);
    space_layout *layout = test_grid(2, 2, SQUARE_MIN, SQUARE_MAX);
    test_cluster_measure(&cluster, layout);
    /* 0.016 in all: three cellapps would run at 0.0053, below 0.02. */
    const balance_cellapp idle[] = {
        {1, 0.005, false, false}, {2, 0.003, false, false}, {3, 0.004, false, false}, {4, 0.004, false, false}};
    balance_action action = test_plan(layout, &cluster, idle, 4);
    assert_int_equal(action.kind, BALANCE_RETIRE);
    assert_int_equal(action.cell_id, 2);
    assert_applies(layout, &action);
    assert_true(space_layout_find_cell(layout, 2)->retiring);
    /* Busy enough: kept. */
    const balance_cellapp busy[] = {
        {1, 0.02, false, false}, {2, 0.01, false, false}, {3, 0.02, false, false}, {4, 0.02, false, false}};
    space_layout *fresh = test_grid(2, 2, SQUARE_MIN, SQUARE_MAX);
    assert_int_equal(test_plan(fresh, &cluster, busy, 4).kind, BALANCE_NOTHING);
    cluster.config.retire_below = 0;
    assert_int_equal(test_plan(fresh, &cluster, idle, 4).kind, BALANCE_NOTHING);
    space_layout_free(fresh);
    space_layout_free(layout);
    test_cluster_close(&cluster);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_level_loads),
        cmocka_unit_test(test_bounds_by_hand),
        cmocka_unit_test(test_bounds_small_and_empty),
        cmocka_unit_test(test_converges_2x2),
        cmocka_unit_test(test_converges_1x4),
        cmocka_unit_test(test_farthest_level_within_target),
        cmocka_unit_test(test_smallest_level),
        cmocka_unit_test(test_new_cell_takes_a_first_step),
        cmocka_unit_test(test_aggression),
        cmocka_unit_test(test_no_move_before_creation),
        cmocka_unit_test(test_safety_bound),
        cmocka_unit_test(test_max_step),
        cmocka_unit_test(test_nested_limit),
        cmocka_unit_test(test_retirement_waits_for_every_ack),
        cmocka_unit_test(test_plan_gone_cellapp),
        cmocka_unit_test(test_plan_draining_cellapp),
        cmocka_unit_test(test_plan_add_cell),
        cmocka_unit_test(test_plan_retire_idle),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
