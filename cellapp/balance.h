/* balance.h -- the load balancer's decisions, as pure functions of a
 * space's layout and what its cells report (BigWorld's cellappmgr
 * algorithm, written anew; balancer.c runs it in whichever cellapp holds
 * the lease and writes the layouts it returns).
 *
 * Load is a fraction of one core: the smoothed busy share of a cellapp's
 * ticks, without the transient work of offloads and ghost churn
 * (cell_load.h). Each cell reports its load and, for each of its four
 * edges, BALANCE_LEVELS "entity bound levels": how far a line coming in
 * from that edge must move to take at least balance_level_load(l) =
 * max_offload / 2^(BALANCE_LEVELS - 1 - l) off the cell (level 0 the
 * smallest, nearest the edge; a level the cell's reals do not reach says
 * so with an infinite position).
 *
 * A pass (once a period) walks the tree from the root. At each split:
 *   - the side whose cells are, on average, above the node's average
 *     should shrink by d = |side average - node average| (a retiring cell
 *     shrinks regardless);
 *   - nothing moves unless every cell on both sides exists (its cellapp
 *     reports it), the growing side is below the safety bound
 *     (max(safety_bound, safety_ratio x the space's average)), and d is at
 *     least the smallest level;
 *   - the line moves to the farthest bound level of the shrinking side,
 *     facing the line, that sheds no more than d x the line's aggression,
 *     at most max_step metres, never across a split inside the side;
 *   - the aggression halves when the line reverses and grows by
 *     aggression_increase otherwise, within [min, max] aggression;
 *   then the children are balanced within their new regions.
 *
 * Between passes (balance_plan) the balancer also adds a cell where a
 * space's cellapps run hotter than the cluster by more than add_margin,
 * retires one where the space could do with one cellapp fewer, hands the
 * cells of a draining cellapp over or retires them, and removes a retiring
 * cell once it has no area, no reals, no offloads in flight, and every
 * cellapp of the space has applied the layout in which it has no area.
 */
#ifndef TESSERA_BALANCE_H
#define TESSERA_BALANCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "space_layout.h"

#define BALANCE_LEVELS 5

typedef enum balance_edge {
    BALANCE_EDGE_LOW_X,  /* a line at the cell's min x, coming in toward +x */
    BALANCE_EDGE_HIGH_X, /* at max x, toward -x */
    BALANCE_EDGE_LOW_Z,
    BALANCE_EDGE_HIGH_Z,
    BALANCE_EDGES,
} balance_edge;

typedef struct balance_level {
    double position; /* where the line would go (+-INFINITY: past every real) */
    double load;     /* the load it would take off (at least the level's) */
} balance_level;

typedef struct balance_bounds {
    balance_level level[BALANCE_EDGES][BALANCE_LEVELS];
} balance_bounds;

/* One real's share in the bound levels. */
typedef struct balance_entity {
    double x, z;
    double load;
} balance_entity;

/* What one cell's cellapp says of it (cell_loads in Redis). */
typedef struct balance_cell_report {
    uint32_t cell_id;
    uint64_t cellapp_id;
    double load;               /* this cell's share of its cellapp's load */
    double cellapp_load;       /* the whole cellapp's (the safety bound's measure) */
    uint32_t reals;            /* reals in the cell */
    uint32_t pending_offloads; /* of its cellapp, not yet acknowledged */
    uint64_t epoch;            /* the layout epoch its cellapp has applied */
    balance_bounds bounds;
} balance_cell_report;

/* What the balancer knows of each live cellapp. */
typedef struct balance_cellapp {
    uint64_t cellapp_id;
    double load;
    bool draining; /* stopping: its cells go elsewhere */
    bool suspect;  /* alive as far as the cluster decided, but its lease lapsed or its link is down: its cells
                      stay where they are, and it is given none */
} balance_cellapp;

typedef struct balance_config {
    double max_offload;         /* the largest level's load: how much one step sheds at most (0.1) */
    double aggression_decrease; /* on a reversal (0.5) */
    double aggression_increase; /* per pass otherwise (2^(1/10)) */
    double min_aggression;      /* 1/16 */
    double max_aggression;      /* 1 */
    double safety_bound;        /* 0.85 */
    double safety_ratio;        /* 1.1 */
    double max_step;            /* metres per line per pass; 0: no limit */
    double add_margin;          /* 0.05: a space's cellapps above the cluster's average by this */
    double retire_below;        /* 0.02: retire when the space's load over one cellapp fewer is below; 0: never */
} balance_config;

/* BigWorld's values (above) for the aggression, safety and margins;
 * max_offload 0.1 (a crowd is shared within ~15 passes), max_step 0. */
balance_config balance_default_config(void);

/* The load level l must shed: max_offload / 2^(BALANCE_LEVELS - 1 - l). */
double balance_level_load(const balance_config *config, int level);

/* Fills `out` from a cell's reals: for each edge, sweeping the reals in
 * from that edge, the position just past the real at which the running
 * load first exceeds each level's (midway to the next real), and that load.
 * Reorders `entities`. */
void balance_compute_bounds(balance_entity *entities, size_t count, const balance_config *config, balance_bounds *out);

typedef struct balance_move {
    uint32_t split; /* pre-order number */
    double from, to;
} balance_move;

/* Finds the report of a cell, or NULL when its cellapp has not reported it
 * (the cell does not exist yet, or its cellapp is gone). */
typedef const balance_cell_report *(*balance_report_lookup)(uint32_t cell_id, void *context);

/* One pass of line moves over `layout`, edited in place (positions, each
 * line's aggression and direction). Up to `cap` moves are described in
 * `moves`; returns how many lines moved. */
size_t balance_pass(space_layout *layout, balance_report_lookup lookup, void *context, const balance_config *config,
                    balance_move *moves, size_t cap);

typedef enum balance_action_kind {
    BALANCE_NOTHING,
    BALANCE_ADD_CELL,  /* split `cell_id` on `axis` at `at` (its edge): the new side to `cellapp_id` */
    BALANCE_HAND_OVER, /* give `cell_id` to `cellapp_id` */
    BALANCE_RETIRE,    /* mark `cell_id` retiring */
    BALANCE_REMOVE,    /* remove `cell_id` (retired: no area, nothing left) */
} balance_action_kind;

typedef struct balance_action {
    balance_action_kind kind;
    uint32_t cell_id;
    uint64_t cellapp_id;
    space_layout_axis axis;
    double at;
    char reason[160];
} balance_action;

/* The one change to the cells of `layout` worth making now, given the live
 * cellapps (draining ones included). Cells whose cellapp is not among
 * `cellapps` count as gone: handed over to a cellapp with room, or removed
 * when there is none. */
balance_action balance_plan(const space_layout *layout, balance_report_lookup lookup, void *context,
                            const balance_cellapp *cellapps, size_t cellapp_count, const balance_config *config);

/* Applies an action to `layout`. Returns 0, or -1 with err. */
int balance_apply(space_layout *layout, const balance_action *action, char *err, size_t errlen);

#endif
