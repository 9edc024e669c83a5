/* balance.c -- the balancer's arithmetic: a cell's entity bound levels from
 * its reals, the bound levels of a subtree from its cells', one pass of
 * line moves, and the one change to the cells (add, hand over, retire,
 * remove) a space needs now. No I/O: balancer.c feeds it reports and
 * writes what it returns. */
#include "balance.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

balance_config balance_default_config(void) {
    balance_config config = {
        .max_offload = 0.1,
        .aggression_decrease = 0.5,
        .aggression_increase = 1.0717734625362931, /* 2^(1/10): a halving regrown in 10 passes */
        .min_aggression = 0.0625,
        .max_aggression = 1.0,
        .safety_bound = 0.85,
        .safety_ratio = 1.1,
        .max_step = 0,
        .add_margin = 0.05,
        .retire_below = 0.02,
    };
    return config;
}

double balance_level_load(const balance_config *config, int level) {
    return config->max_offload / (double)(1u << (BALANCE_LEVELS - 1 - level));
}

/* ---- bound levels ------------------------------------------------------- */

/* Edges are handled in "inward" coordinates: the coordinate itself for a
 * low edge, its negation for a high one, so that moving in always means
 * growing. */
static bool balance_edge_is_high(balance_edge edge) {
    return edge == BALANCE_EDGE_HIGH_X || edge == BALANCE_EDGE_HIGH_Z;
}
static bool balance_edge_is_x(balance_edge edge) { return edge == BALANCE_EDGE_LOW_X || edge == BALANCE_EDGE_HIGH_X; }

static double balance_inward(balance_edge edge, double coordinate) {
    return balance_edge_is_high(edge) ? -coordinate : coordinate;
}

static int balance_compare_inward(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef struct balance_sweep_item {
    double inward; /* first: sorted on */
    double load;
} balance_sweep_item;

/* Two reals this close count as one step: no line fits between them. */
#define BALANCE_SAME_PLACE 0.01
/* How far past the last real a line goes to take it. */
#define BALANCE_PAST_LAST 0.1

static void balance_sweep_edge(balance_sweep_item *items, size_t count, balance_edge edge, const balance_config *config,
                               balance_level *out) {
    qsort(items, count, sizeof *items, balance_compare_inward);
    double running = 0;
    int level = 0;
    for (size_t i = 0; i < count && level < BALANCE_LEVELS; i++) {
        running += items[i].load;
        if (i + 1 < count && items[i + 1].inward - items[i].inward < BALANCE_SAME_PLACE) continue;
        double past = i + 1 < count ? (items[i].inward + items[i + 1].inward) / 2 : items[i].inward + BALANCE_PAST_LAST;
        while (level < BALANCE_LEVELS && running > balance_level_load(config, level)) {
            out[level].position = balance_inward(edge, past);
            out[level].load = running;
            level++;
        }
    }
    if (level == 0 && count > 0) {
        /* Every real together is below the smallest level: taking them all
         * is the first step. */
        out[0].position = balance_inward(edge, items[count - 1].inward + BALANCE_PAST_LAST);
        out[0].load = running;
        level = 1;
    }
    for (; level < BALANCE_LEVELS; level++) {
        out[level].position = balance_edge_is_high(edge) ? -INFINITY : INFINITY;
        out[level].load = fmax(running, balance_level_load(config, level));
    }
}

void balance_compute_bounds(balance_entity *entities, size_t count, const balance_config *config, balance_bounds *out) {
    balance_sweep_item *items = xmalloc((count ? count : 1) * sizeof *items);
    for (int e = 0; e < BALANCE_EDGES; e++) {
        balance_edge edge = (balance_edge)e;
        for (size_t i = 0; i < count; i++) {
            double coordinate = balance_edge_is_x(edge) ? entities[i].x : entities[i].z;
            items[i].inward = balance_inward(edge, coordinate);
            items[i].load = entities[i].load > 0 ? entities[i].load : 0;
        }
        balance_sweep_edge(items, count, edge, config, out->level[e]);
    }
    free(items);
}

/* The load a line at inward position `p` takes off, by the levels alone
 * (a step function: a level counts once the line has passed it). */
static double balance_load_at(const balance_level *levels, balance_edge edge, double p) {
    double load = 0;
    for (int l = 0; l < BALANCE_LEVELS; l++)
        if (balance_inward(edge, levels[l].position) <= p && levels[l].load > load) load = levels[l].load;
    return load;
}

/* Levels of two cells side by side along an edge (a split across it): at
 * each candidate position the loads of both add up; each level takes the
 * first position where the sum reaches it. */
static void balance_merge_levels(const balance_level *a, const balance_level *b, balance_edge edge,
                                 const balance_config *config, balance_level *out) {
    double candidates[2 * BALANCE_LEVELS];
    int n = 0;
    for (int l = 0; l < BALANCE_LEVELS; l++) {
        if (isfinite(a[l].position)) candidates[n++] = balance_inward(edge, a[l].position);
        if (isfinite(b[l].position)) candidates[n++] = balance_inward(edge, b[l].position);
    }
    qsort(candidates, (size_t)n, sizeof *candidates, balance_compare_inward);
    double total = fmax(a[BALANCE_LEVELS - 1].load, 0) + fmax(b[BALANCE_LEVELS - 1].load, 0);
    int level = 0;
    for (int i = 0; i < n && level < BALANCE_LEVELS; i++) {
        double load = balance_load_at(a, edge, candidates[i]) + balance_load_at(b, edge, candidates[i]);
        while (level < BALANCE_LEVELS && load >= balance_level_load(config, level)) {
            out[level].position = balance_inward(edge, candidates[i]);
            out[level].load = load;
            level++;
        }
    }
    for (; level < BALANCE_LEVELS; level++) {
        out[level].position = balance_edge_is_high(edge) ? -INFINITY : INFINITY;
        out[level].load = fmax(total, balance_level_load(config, level));
    }
}

/* What a subtree knows of itself. */
typedef struct balance_side {
    double load;   /* every cell's, retiring ones included */
    size_t cells;  /* cells that are not retiring */
    bool created;  /* every cell reported */
    bool retiring; /* every cell retiring */
    double max_cellapp_load;
} balance_side;

static balance_side balance_side_of(const space_layout *layout, int32_t index, balance_report_lookup lookup,
                                    void *context) {
    const space_layout_node *node = &layout->nodes[index];
    balance_side side = {0, 0, true, true, 0};
    if (node->leaf) {
        const balance_cell_report *report = lookup(node->cell_id, context);
        side.created = report != NULL;
        side.retiring = node->retiring;
        side.cells = node->retiring ? 0 : 1;
        if (report) {
            side.load = report->load;
            side.max_cellapp_load = report->cellapp_load;
        }
        return side;
    }
    balance_side low = balance_side_of(layout, node->low, lookup, context);
    balance_side high = balance_side_of(layout, node->high, lookup, context);
    side.load = low.load + high.load;
    side.cells = low.cells + high.cells;
    side.created = low.created && high.created;
    side.retiring = low.retiring && high.retiring;
    side.max_cellapp_load = fmax(low.max_cellapp_load, high.max_cellapp_load);
    return side;
}

/* The bound levels of a subtree on one edge. */
static void balance_subtree_levels(const space_layout *layout, int32_t index, balance_edge edge,
                                   balance_report_lookup lookup, void *context, const balance_config *config,
                                   balance_level *out) {
    const space_layout_node *node = &layout->nodes[index];
    if (node->leaf) {
        const balance_cell_report *report = lookup(node->cell_id, context);
        if (report) {
            memcpy(out, report->bounds.level[edge], sizeof report->bounds.level[edge]);
        } else {
            for (int l = 0; l < BALANCE_LEVELS; l++)
                out[l] = (balance_level){balance_edge_is_high(edge) ? -INFINITY : INFINITY, 0};
        }
        return;
    }
    bool along = (node->axis == SPACE_LAYOUT_AXIS_X) == balance_edge_is_x(edge);
    if (along) {
        /* The edge belongs to one child; past the partition the other
         * child's load would be shed too, which its levels do not count. */
        int32_t child = balance_edge_is_high(edge) ? node->high : node->low;
        balance_subtree_levels(layout, child, edge, lookup, context, config, out);
        for (int l = 0; l < BALANCE_LEVELS; l++) {
            if (balance_edge_is_high(edge) && out[l].position < node->at) out[l].position = node->at;
            if (!balance_edge_is_high(edge) && out[l].position > node->at) out[l].position = node->at;
        }
        return;
    }
    balance_level low[BALANCE_LEVELS], high[BALANCE_LEVELS];
    balance_subtree_levels(layout, node->low, edge, lookup, context, config, low);
    balance_subtree_levels(layout, node->high, edge, lookup, context, config, high);
    balance_merge_levels(low, high, edge, config, out);
}

/* The tightest position a split of `axis` may move to, so that the splits
 * on the same axis inside the shrinking subtree stay inside it. */
static void balance_nested_limit(const space_layout *layout, int32_t index, space_layout_axis axis, bool shrinking_low,
                                 double *limit) {
    const space_layout_node *node = &layout->nodes[index];
    if (node->leaf) return;
    if (node->axis == axis) {
        if (shrinking_low && node->at > *limit) *limit = node->at;
        if (!shrinking_low && node->at < *limit) *limit = node->at;
    }
    balance_nested_limit(layout, node->low, axis, shrinking_low, limit);
    balance_nested_limit(layout, node->high, axis, shrinking_low, limit);
}

typedef struct balance_walk {
    space_layout *layout;
    balance_report_lookup lookup;
    void *context;
    const balance_config *config;
    double safety;
    balance_move *moves;
    size_t cap, moved;
    uint32_t split_counter;
} balance_walk;

static void balance_adjust_aggression(const balance_config *config, space_layout_node *node, int direction) {
    double aggression = node->aggression > 0 ? node->aggression : 1.0;
    if (direction && node->direction && direction != node->direction)
        aggression *= config->aggression_decrease;
    else
        aggression *= config->aggression_increase;
    if (aggression < config->min_aggression) aggression = config->min_aggression;
    if (aggression > config->max_aggression) aggression = config->max_aggression;
    node->aggression = aggression;
    if (direction) node->direction = (int8_t)direction;
}

static void balance_node(balance_walk *walk, int32_t index, space_layout_rect region) {
    space_layout_node *node = &walk->layout->nodes[index];
    if (node->leaf) return;
    uint32_t split = walk->split_counter++;
    const balance_config *config = walk->config;
    balance_side low = balance_side_of(walk->layout, node->low, walk->lookup, walk->context);
    balance_side high = balance_side_of(walk->layout, node->high, walk->lookup, walk->context);
    bool axis_x = node->axis == SPACE_LAYOUT_AXIS_X;
    double region_low = axis_x ? region.min_x : region.min_z, region_high = axis_x ? region.max_x : region.max_z;

    int direction = 0; /* -1: the line goes toward low (low shrinks), +1 toward high */
    double target = 0;
    bool retiring = false, first_step = false;
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
        /* A side with no area (a cell just added at this line) takes its
         * first step whatever the loads say: until it holds some of the
         * space it can carry nothing, and its idle cellapp's own work (Redis,
         * heartbeats, backups) can make it look as busy as a lightly loaded
         * neighbour, or the difference stay below the smallest level. */
        bool low_empty = node->at <= region_low, high_empty = node->at >= region_high;
        if (low_empty != high_empty) {
            int toward_full = low_empty ? +1 : -1; /* the line moves into the side that has the area */
            if (direction != toward_full) target = 0;
            direction = toward_full;
            first_step = true;
        }
    }
    const balance_side *growing = direction < 0 ? &high : &low;
    if (direction && (!low.created || !high.created)) direction = 0;
    if (direction && !retiring && growing->max_cellapp_load >= walk->safety) direction = 0;

    double at = node->at;
    if (direction) {
        /* The shrinking side's levels on the edge that faces the line. */
        balance_edge edge = direction < 0 ? (axis_x ? BALANCE_EDGE_HIGH_X : BALANCE_EDGE_HIGH_Z)
                                          : (axis_x ? BALANCE_EDGE_LOW_X : BALANCE_EDGE_LOW_Z);
        balance_level levels[BALANCE_LEVELS];
        balance_subtree_levels(walk->layout, direction < 0 ? node->low : node->high, edge, walk->lookup, walk->context,
                               config, levels);
        double position = NAN;
        /* The first step needs a real to take: past nothing it would sweep
         * the other side's whole area and leave that one empty instead. */
        if (first_step) target = isfinite(levels[0].position) ? fmax(target, levels[0].load) : -1;
        for (int l = BALANCE_LEVELS - 1; l >= 0; l--) {
            if (levels[l].load <= target) {
                position = levels[l].position;
                break;
            }
        }
        if (!isnan(position)) {
            double limit = direction < 0 ? region_low : region_high;
            balance_nested_limit(walk->layout, direction < 0 ? node->low : node->high, node->axis, direction < 0,
                                 &limit);
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
        if (walk->moved < walk->cap) walk->moves[walk->moved] = (balance_move){split, node->at, at};
        walk->moved++;
        node->at = at;
        if (!retiring) balance_adjust_aggression(config, node, direction);
    } else {
        balance_adjust_aggression(config, node, 0);
    }
    space_layout_rect low_rect = region, high_rect = region;
    if (axis_x)
        low_rect.max_x = high_rect.min_x = node->at;
    else
        low_rect.max_z = high_rect.min_z = node->at;
    int32_t low_index = node->low, high_index = node->high;
    balance_node(walk, low_index, low_rect);
    balance_node(walk, high_index, high_rect);
}

size_t balance_pass(space_layout *layout, balance_report_lookup lookup, void *context, const balance_config *config,
                    balance_move *moves, size_t cap) {
    if (layout->root == SPACE_LAYOUT_NONE) return 0;
    balance_side root = balance_side_of(layout, layout->root, lookup, context);
    double average = root.cells ? root.load / (double)root.cells : 0;
    balance_walk walk = {layout, lookup, context, config, fmax(config->safety_bound, average * config->safety_ratio),
                         moves,  cap,    0,       0};
    space_layout_rect bounds = {layout->min[0], layout->min[2], layout->max[0], layout->max[2]};
    balance_node(&walk, layout->root, bounds);
    return walk.moved;
}

/* ---- cells: add, hand over, retire, remove --------------------------------- */

static const balance_cellapp *balance_find_cellapp(const balance_cellapp *cellapps, size_t count, uint64_t id) {
    for (size_t i = 0; i < count; i++)
        if (cellapps[i].cellapp_id == id) return &cellapps[i];
    return NULL;
}

/* The least loaded live cellapp that may take a cell of the space: not
 * draining, owning none of its cells. */
static const balance_cellapp *balance_candidate(const space_layout *layout, const balance_cellapp *cellapps,
                                                size_t count) {
    const balance_cellapp *best = NULL;
    for (size_t i = 0; i < count; i++) {
        const balance_cellapp *c = &cellapps[i];
        if (c->draining || c->suspect || space_layout_cell_of(layout, c->cellapp_id)) continue;
        if (!best || c->load < best->load) best = c;
    }
    return best;
}

static balance_action balance_action_of(balance_action_kind kind, uint32_t cell_id, uint64_t cellapp_id) {
    balance_action action;
    memset(&action, 0, sizeof action);
    action.kind = kind;
    action.cell_id = cell_id;
    action.cellapp_id = cellapp_id;
    return action;
}

balance_action balance_plan(const space_layout *layout, balance_report_lookup lookup, void *context,
                            const balance_cellapp *cellapps, size_t cellapp_count, const balance_config *config) {
    balance_action none = balance_action_of(BALANCE_NOTHING, 0, 0);
    size_t cells = space_layout_cell_count(layout);
    bool all_applied = true, any_retiring = false, all_created = true;
    for (int32_t i = 0; i < layout->node_count; i++) {
        const space_layout_node *node = &layout->nodes[i];
        if (!node->leaf || !space_layout_find_cell(layout, node->cell_id)) continue;
        const balance_cell_report *report = lookup(node->cell_id, context);
        if (!report) all_created = false;
        if (!report || report->epoch < layout->epoch) all_applied = false;
        any_retiring |= node->retiring;
    }
    /* 1. A retired cell with nothing left goes. */
    for (int32_t i = 0; i < layout->node_count; i++) {
        const space_layout_node *node = &layout->nodes[i];
        if (!node->leaf || !node->retiring || space_layout_find_cell(layout, node->cell_id) != node) continue;
        const balance_cell_report *report = lookup(node->cell_id, context);
        if (cells > 1 && space_layout_cell_area(layout, node->cell_id) == 0 && report && report->reals == 0 &&
            report->pending_offloads == 0 && all_applied) {
            balance_action action = balance_action_of(BALANCE_REMOVE, node->cell_id, node->cellapp_id);
            snprintf(action.reason, sizeof action.reason,
                     "cell %u has no area and no reals, and every cellapp applied epoch %llu", node->cell_id,
                     (unsigned long long)layout->epoch);
            return action;
        }
    }
    /* 2. Cells of cellapps that are gone, then of those that are draining. */
    for (int pass = 0; pass < 2; pass++) {
        for (int32_t i = 0; i < layout->node_count; i++) {
            const space_layout_node *node = &layout->nodes[i];
            if (!node->leaf || space_layout_find_cell(layout, node->cell_id) != node) continue;
            const balance_cellapp *owner = balance_find_cellapp(cellapps, cellapp_count, node->cellapp_id);
            bool gone = owner == NULL;
            if (pass == 0 ? !gone : (gone || !owner->draining || node->retiring)) continue;
            const balance_cellapp *candidate = balance_candidate(layout, cellapps, cellapp_count);
            balance_action action;
            if (candidate) {
                action = balance_action_of(BALANCE_HAND_OVER, node->cell_id, candidate->cellapp_id);
                snprintf(action.reason, sizeof action.reason, "cellapp %llu %s: cell %u goes to cellapp %llu",
                         (unsigned long long)node->cellapp_id, gone ? "is gone" : "is draining", node->cell_id,
                         (unsigned long long)candidate->cellapp_id);
                return action;
            }
            if (cells <= 1) continue; /* the only cell stays until someone can take it */
            action = balance_action_of(gone ? BALANCE_REMOVE : BALANCE_RETIRE, node->cell_id, node->cellapp_id);
            snprintf(action.reason, sizeof action.reason, "cellapp %llu %s and no cellapp is free: cell %u %s",
                     (unsigned long long)node->cellapp_id, gone ? "is gone" : "is draining", node->cell_id,
                     gone ? "is removed" : "retires");
            return action;
        }
    }
    if (any_retiring || !all_created) return none;

    /* 3. The space's cellapps against the cluster's. */
    double group_load = 0, all_load = 0, lowest = INFINITY;
    size_t group = 0, all = 0;
    const space_layout_node *coolest = NULL, *hottest = NULL;
    double hottest_load = -1;
    for (size_t i = 0; i < cellapp_count; i++) {
        if (cellapps[i].draining) continue;
        all_load += cellapps[i].load;
        all++;
        const space_layout_node *cell = space_layout_cell_of(layout, cellapps[i].cellapp_id);
        if (!cell) continue;
        group_load += cellapps[i].load;
        group++;
        if (cellapps[i].load < lowest) {
            lowest = cellapps[i].load;
            coolest = cell;
        }
        const balance_cell_report *report = lookup(cell->cell_id, context);
        if (report && report->load > hottest_load) {
            hottest_load = report->load;
            hottest = cell;
        }
    }
    if (group == 0 || all == 0) return none;
    double group_average = group_load / (double)group, all_average = all_load / (double)all;
    const balance_cellapp *candidate = balance_candidate(layout, cellapps, cellapp_count);
    if (candidate && hottest && group_average > all_average + config->add_margin) {
        space_layout_rect rect;
        space_layout_rect_of(layout, hottest->cell_id, &rect);
        bool along_x = rect.max_x - rect.min_x >= rect.max_z - rect.min_z;
        balance_action action = balance_action_of(BALANCE_ADD_CELL, hottest->cell_id, candidate->cellapp_id);
        action.axis = along_x ? SPACE_LAYOUT_AXIS_X : SPACE_LAYOUT_AXIS_Z;
        action.at = along_x ? rect.max_x : rect.max_z;
        snprintf(action.reason, sizeof action.reason,
                 "the space's cellapps average %.3f against %.3f: cellapp %llu takes a new cell beside cell %u",
                 group_average, all_average, (unsigned long long)candidate->cellapp_id, hottest->cell_id);
        return action;
    }
    if (config->retire_below > 0 && group >= 2 && coolest && group_load / (double)(group - 1) < config->retire_below) {
        balance_action action = balance_action_of(BALANCE_RETIRE, coolest->cell_id, coolest->cellapp_id);
        snprintf(action.reason, sizeof action.reason,
                 "the space's load %.4f fits in %zu cellapps below %.3f each: cell %u retires", group_load, group - 1,
                 config->retire_below, coolest->cell_id);
        return action;
    }
    return none;
}

int balance_apply(space_layout *layout, const balance_action *action, char *err, size_t errlen) {
    switch (action->kind) {
        case BALANCE_NOTHING:
            return 0;
        case BALANCE_ADD_CELL:
            return space_layout_split_cell(layout, action->cell_id, action->axis, action->at, action->cellapp_id, err,
                                           errlen);
        case BALANCE_HAND_OVER:
            if (space_layout_set_retiring(layout, action->cell_id, false, err, errlen) != 0) return -1;
            return space_layout_assign(layout, action->cell_id, action->cellapp_id, err, errlen);
        case BALANCE_RETIRE:
            return space_layout_set_retiring(layout, action->cell_id, true, err, errlen);
        case BALANCE_REMOVE:
            return space_layout_remove_cell(layout, action->cell_id, err, errlen);
    }
    snprintf(err, errlen, "unknown balancer action %d", (int)action->kind);
    return -1;
}
