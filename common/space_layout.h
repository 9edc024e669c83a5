/* space_layout.h -- a space and how it is split into cells: its definition
 * (name, bounds, 2D or 3D, where players spawn) and its layout, a BSP tree
 * of axis-aligned split lines whose leaves are the cells, each owned by one
 * cellapp.
 *
 * Geometry. A split node divides its region at `at` on X or Z: points with
 * coordinate < at go to `low`, the others to `high`. The root's region is
 * the space's bounds on X and Z; Y is never split (a 3D space is split in
 * columns, like BigWorld's). Every point of the plane falls in exactly one
 * leaf: the tree covers the space by construction, and points beyond the
 * bounds fall in the leaf at the nearest edge. A split may sit on its
 * region's edge, which leaves one side with zero area (a cell being retired).
 *
 * Ownership rules, checked by space_layout_check: every leaf names a
 * cellapp; a cellapp owns at most one cell of a space (its copy of each
 * entity of the space is then one object); cell ids are unique.
 *
 * Epoch. A layout carries the epoch it was written with; every change is
 * written with a larger one (space_store.h), and a process holding a layout
 * ignores one whose epoch is not larger.
 *
 * JSON form (what Redis holds, what tessera-admin reads and writes):
 *
 *   {"name": "default", "epoch": 3, "fence": 2, "three_d": false,
 *    "min": [-500, -1000, -500], "max": [500, 1000, 500],
 *    "spawn": {"x": 0, "z": 0, "radius": 50}, "next_cell": 5,
 *    "tree": {"split": "x", "at": 0,
 *             "low":  {"cell": 1, "cellapp": 7},
 *             "high": {"split": "z", "at": 0.5, "low": {...}, "high": {...}}}}
 *
 * Optional: "fence" (absent: 0); on a split "aggression" (0 < a <= 1,
 * absent: 1) and "direction" (-1, 0, 1); on a cell "retiring": true.
 *
 * Splits are numbered in pre-order (root first, then its low subtree, then
 * its high subtree), from 0: that is how an operator names a line.
 */
#ifndef TESSERA_SPACE_LAYOUT_H
#define TESSERA_SPACE_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define SPACE_LAYOUT_NAME_MAX 64
/* Deep enough for any sensible split (2^32 cells), shallow enough that a
 * hostile document cannot exhaust the stack. */
#define SPACE_LAYOUT_MAX_DEPTH 32
#define SPACE_LAYOUT_NONE (-1)

typedef enum space_layout_axis {
    SPACE_LAYOUT_AXIS_X = 0, /* index into x, y, z triples */
    SPACE_LAYOUT_AXIS_Z = 2,
} space_layout_axis;

typedef struct space_layout_node {
    bool leaf;
    /* A split. */
    space_layout_axis axis;
    double at;
    int32_t low, high; /* node indices */
    /* The balancer's memory of this line (balance.h), kept in the layout so
     * that a new leader goes on where the last one stopped: how far its
     * steps go (0 < aggression <= 1; 1 for a new line) and which way it
     * last moved (-1 toward low, +1 toward high, 0 not yet). */
    double aggression;
    int8_t direction;
    /* A leaf: a cell. */
    uint32_t cell_id;
    uint64_t cellapp_id;
    bool retiring; /* being shrunk away (balance.h), then removed */
} space_layout_node;

/* A region of the X/Z plane: [min_x, max_x) x [min_z, max_z). */
typedef struct space_layout_rect {
    double min_x, min_z, max_x, max_z;
} space_layout_rect;

typedef struct space_layout {
    char name[SPACE_LAYOUT_NAME_MAX];
    uint64_t epoch;
    /* The balancer lease (lease.h) whose holder wrote it; 0 for an
     * operator's write. The store refuses a fence older than the newest
     * lease's (space_store.h). */
    uint64_t fence;
    bool three_d;
    double min[3], max[3]; /* x, y, z */
    double spawn_x, spawn_z, spawn_radius;
    uint32_t next_cell_id; /* the id the next new cell gets */
    space_layout_node *nodes;
    int32_t node_count, node_capacity;
    int32_t root;
} space_layout;

/* A space of one cell (id 1) owned by `cellapp_id` (0: nobody yet), epoch 0,
 * spawning at the centre with radius 50. NULL if a name is empty or too
 * long, or a bound is not finite or not below its maximum. */
space_layout *space_layout_create(const char *name, const double min[3], const double max[3], bool three_d,
                                  uint64_t cellapp_id);
/* A space split into columns x rows cells of equal size: X into columns,
 * then each column on Z into rows, each split halving its region as evenly
 * as the counts allow. Cell i (from 1, column-major from the low corner)
 * goes to cellapps[(i - 1) % count]. NULL on the errors of create, or a
 * count of 0. */
space_layout *space_layout_create_grid(const char *name, const double min[3], const double max[3], bool three_d,
                                       uint32_t columns, uint32_t rows, const uint64_t *cellapps, size_t count);
space_layout *space_layout_copy(const space_layout *layout);
void space_layout_free(space_layout *layout);

/* Reads the JSON form: `length` bytes of `text`, which must be
 * NUL-terminated at text[length] (as a hiredis reply and a file read with
 * json_file_read are; json_file_parse measures it). Returns the layout, or
 * NULL with the problem in err (which field, which node). The result is
 * not yet checked: call space_layout_check. */
space_layout *space_layout_from_json(const char *text, size_t length, char *err, size_t errlen);
/* The JSON form, NUL-terminated, allocated (the caller frees it). */
char *space_layout_to_json(const space_layout *layout);

/* Checks the rules above: bounds, spawn disc inside the bounds, splits
 * within their regions, every leaf owned, one cell per cellapp, unique cell
 * ids. Returns 0, or -1 with the first problem in err. */
int space_layout_check(const space_layout *layout, char *err, size_t errlen);
/* Checks that every owner is alive by `is_alive`. Returns 0, or -1 naming
 * the first cell whose cellapp is not. */
int space_layout_check_owners(const space_layout *layout, bool (*is_alive)(uint64_t cellapp_id, void *context),
                              void *context, char *err, size_t errlen);

/* The cell at a point (beyond the bounds: the nearest edge's). */
const space_layout_node *space_layout_cell_at(const space_layout *layout, double x, double z);
/* The cell with this id, or NULL. */
const space_layout_node *space_layout_find_cell(const space_layout *layout, uint32_t cell_id);
/* The cell `cellapp_id` owns, or NULL. */
const space_layout_node *space_layout_cell_of(const space_layout *layout, uint64_t cellapp_id);
/* The region of a cell. Returns 0, or -1 for an unknown cell. The regions
 * of cells at the edge end at the space's bounds. */
int space_layout_rect_of(const space_layout *layout, uint32_t cell_id, space_layout_rect *out);
/* The cells whose regions come within `distance` of the point on X and on
 * Z (they meet the square of half-side `distance` around it), at most `cap`
 * of them into `out`; returns how many there are. */
size_t space_layout_cells_near(const space_layout *layout, double x, double z, double distance,
                               const space_layout_node **out, size_t cap);
/* How far the point is from the region, on X and on Z: the larger of the
 * two axis distances, 0 inside. */
double space_layout_rect_distance(const space_layout_rect *rect, double x, double z);
bool space_layout_rect_contains(const space_layout_rect *rect, double x, double z);
size_t space_layout_cell_count(const space_layout *layout);
size_t space_layout_split_count(const space_layout *layout);

/* Edits, for operators and the balancer. Each leaves the epoch alone (the
 * writer sets it) and returns 0, or -1 with why in err and the layout
 * unchanged. */
/* Moves split number `split` (pre-order, from 0) to `at`, which must lie
 * within its region (edges included). */
int space_layout_move_split(space_layout *layout, uint32_t split, double at, char *err, size_t errlen);
/* Gives cell `cell_id` to `cellapp_id`, which must own no other cell of the
 * space. */
int space_layout_assign(space_layout *layout, uint32_t cell_id, uint64_t cellapp_id, char *err, size_t errlen);
/* Splits cell `cell_id` at `at` on `axis`: the low side keeps the cell, the
 * high side becomes a new cell (next_cell_id) owned by `cellapp_id`. */
int space_layout_split_cell(space_layout *layout, uint32_t cell_id, space_layout_axis axis, double at,
                            uint64_t cellapp_id, char *err, size_t errlen);
/* Removes cell `cell_id`: its sibling's subtree takes the parent split's
 * region. Refused for the only cell. */
int space_layout_remove_cell(space_layout *layout, uint32_t cell_id, char *err, size_t errlen);
/* Marks cell `cell_id` retiring (or not). */
int space_layout_set_retiring(space_layout *layout, uint32_t cell_id, bool retiring, char *err, size_t errlen);
/* The area of a cell's region on X/Z (0 for a cell squeezed to a line), or
 * -1 for an unknown cell. */
double space_layout_cell_area(const space_layout *layout, uint32_t cell_id);
/* Describes split number `split`: its axis, position and region. Returns 0
 * or -1 if there is no such split. */
int space_layout_split_info(const space_layout *layout, uint32_t split, space_layout_axis *axis, double *at,
                            double *region_min, double *region_max);

/* Writes the tree to `out` for an operator, one node a line, indented:
 * "split 0: x = 0 (region -500 .. 500)", "cell 1 on cellapp 7: x -500..0, z -500..500". */
void space_layout_print(const space_layout *layout, FILE *out);
const char *space_layout_axis_name(space_layout_axis axis);

#endif
