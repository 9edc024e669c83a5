/* coord.h -- the coordinate system of a cell: entities and range triggers
 * on sorted axis lists, watchers (witness views and traps) with exact,
 * per-tick-netted enter/leave events, and spatial queries on the same
 * structure (KBEngine's CoordinateSystem and RangeTrigger, Source's
 * spatial partition).
 *
 * Axes. Each axis (X and Z; Y too when the system is 3D) is one sorted
 * array of nodes. An entity has one node per axis; a range trigger has a
 * lower and an upper boundary node per axis. Nodes are totally ordered by
 * (coordinate, kind, index) with kind lower < entity < upper, so at equal
 * coordinates a lower boundary sorts before an entity and an upper
 * boundary after it: a trigger covers the CLOSED box [centre - extent,
 * centre + extent] on every axis, and ties can never disagree with the
 * range test (KBEngine issue #1329). A node moves by swapping with the
 * neighbours it passes, so a move costs what the distance covered costs.
 *
 * Shape. Views and traps are axis-aligned SQUARES (cubes in 3D): an entity
 * is inside a trigger of extent r owned by an entity at c when, on every
 * axis, c - r <= p <= c + r, computed in single precision exactly as
 * written (bounds are stored, never re-derived). A square is what sorted
 * axes answer exactly; a circle needs a distance check on top.
 *
 * Round shapes. A watcher without hysteresis (a trap) may be a CIRCLE or a
 * SPHERE of radius r (coord_set_watcher_shape): its trigger stays the
 * square of extent r that holds the shape (the broad phase), and an entity
 * in that square is in view only when, in double precision from the
 * single-precision positions, dx*dx + dz*dz <= r*r (circle, on the ground)
 * or dx*dx + dy*dy + dz*dz <= r*r (sphere; Y from the entity's position in
 * a 2D system too). In a 3D system the square is a cube, so a circle is an
 * upright cylinder of half-height r. Entities move inside the square
 * without crossing its edges, so at each flush a round watcher re-checks,
 * by coordinates, the members of its square that moved since the last
 * check (all of them when its owner moved): a flush costs a round watcher
 * one comparison per member of its square when anything moved, and a
 * distance test per member that moved. The queries answer the same rule
 * (coord_query_shape).
 *
 * Events. When an entity node and a boundary node pass each other, the
 * kind of crossing says whether the pair starts or stops overlapping on
 * that axis, and the other axes are checked against their (consistent)
 * lists. Triggers never scan entities per tick. Crossings only flip
 * membership bits; nothing reaches game code until coord_flush, which
 * compares each touched pair's state with its state at the previous flush
 * and reports only real changes: an enter and a leave of the same pair
 * between two flushes cancel, and intermediate states (X moved, Z not yet)
 * never leak out.
 *
 * Watchers. A watcher belongs to an owner entity and moves with it; it has
 * an inner extent r and a hysteresis h. An entity enters the view when it
 * is inside the inner square (extent r) and leaves only when it is outside
 * the outer square (extent r + h); in between, the previous answer stands.
 * The watcher owns ONE trigger, the outer square, whose crossings say
 * exactly when an entity leaves; entities inside it but not yet in view
 * (the candidates, a thin band) are checked against the inner square by
 * coordinates at each flush. With h == 0 the trigger is the view itself (a
 * trap, KBEngine's addProximity). An owner never sees itself.
 *
 * Callbacks. on_enter/on_leave run only inside coord_flush, when every
 * axis is consistent. They may move, add and remove entities and watchers,
 * their own owner included; the changes they cause are reported by the
 * same flush (it repeats until nothing is pending, up to a bound).
 *
 * Modes. How crossings are found is the system's choice, not the API's:
 * every event, order and rule above is the same in both. In crossing mode
 * (the above) the boundaries live in the axes. In scan mode the axes hold
 * the entities alone, and at each flush after anything moved every
 * watcher walks the stretch of the X axis its trigger covers, testing
 * each entity there against its trigger now and at the last scan: a
 * change is the flip a crossing would have logged. A teleport costs a
 * test per watcher in scan mode, not a wider stretch for all of them. Crossings cost what
 * the distance moved costs, scans what the stretch holds, so crossings win
 * when few move and scans when everyone does, or in a crowd, where a tick
 * makes millions of crossings. COORD_MODE_AUTO (the default) measures the
 * work of the mode it is in after each flush that moved things, estimates
 * the other's, and changes when the other is clearly cheaper for a few
 * flushes running (coord_scan.c has the model).
 *
 * Identity. Entities and watchers are named by uint32 ids that coord
 * assigns; an id freed is not reused before the next flush completes, so a
 * pending event never lands on a newcomer.
 */
#ifndef TESSERA_COORD_H
#define TESSERA_COORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define COORD_NONE UINT32_MAX

typedef struct coord_system coord_system;

/* What a watcher or a query covers (above, "Shape" and "Round shapes"). */
typedef enum coord_shape {
    COORD_SHAPE_BOX = 0,    /* the square (cube in 3D) alone */
    COORD_SHAPE_CIRCLE = 1, /* ... and within r on the ground (x, z) */
    COORD_SHAPE_SPHERE = 2, /* ... and within r in 3D (x, y, z) */
} coord_shape;

typedef struct coord_watcher_callbacks {
    /* `entity` entered the watcher's view. */
    void (*on_enter)(coord_system *system, uint32_t watcher, uint32_t entity, void *user_data);
    /* `entity` left the view, or was removed from the system. */
    void (*on_leave)(coord_system *system, uint32_t watcher, uint32_t entity, void *user_data);
} coord_watcher_callbacks;

/* A system with X and Z axes, plus Y when `three_d`. NULL on no memory. */
coord_system *coord_create(bool three_d);
/* Frees everything; no callback fires. */
void coord_free(coord_system *system);

/* ---- entities ------------------------------------------------------------ */

/* Adds an entity at (x, y, z) and returns its id (COORD_NONE if a
 * coordinate is not finite). `type` and `flags` are for query filters,
 * `user_data` is returned by coord_entity_user_data. Additions are batched:
 * many entities added between two operations go in together, sorted, in
 * O(n log n) rather than O(n) each. */
uint32_t coord_add_entity(coord_system *system, float x, float y, float z, uint32_t type, uint32_t flags,
                          void *user_data);
/* Removes an entity and every watcher it owns. Watchers that saw it get
 * on_leave at the next flush. Returns 0, or -1 for an unknown id. */
int coord_remove_entity(coord_system *system, uint32_t entity);
/* Moves an entity and the watchers it owns. The move is recorded now and
 * applied with every other move at the next flush, query or structural
 * change (one pass per axis over all moved entities); several moves of one
 * entity in between cost one. Returns 0, or -1 for an unknown id or a
 * coordinate that is not finite. */
int coord_move_entity(coord_system *system, uint32_t entity, float x, float y, float z);
int coord_entity_position(const coord_system *system, uint32_t entity, float *x, float *y, float *z);
void *coord_entity_user_data(const coord_system *system, uint32_t entity);
void coord_set_entity_filter(coord_system *system, uint32_t entity, uint32_t type, uint32_t flags);
size_t coord_entity_count(const coord_system *system);

/* ---- watchers ------------------------------------------------------------ */

/* Attaches a watcher to `owner`: entities enter its view within `extent`
 * and leave beyond `extent + hysteresis` (hysteresis 0: one trigger, a
 * trap). Entities already in range enter at the next flush. Returns the
 * watcher id, or COORD_NONE for an unknown owner or a negative/non-finite
 * range. */
uint32_t coord_add_watcher(coord_system *system, uint32_t owner, float extent, float hysteresis,
                           const coord_watcher_callbacks *callbacks, void *user_data);
/* Cancels a watcher. No on_leave fires for what it saw: its owner asked to
 * stop watching. Returns 0, or -1 for an unknown id. */
int coord_remove_watcher(coord_system *system, uint32_t watcher);
/* Marks `entity` as already in the watcher's view (a view or trap that moved
 * here from another cellapp, with what it held there): no on_enter fires for
 * it, and at the next flush it stays in view if the view rule allows (it is
 * inside the outer extent) or gets on_leave if not. Returns 0, or -1 for an
 * unknown watcher or entity, or the watcher's own owner. */
int coord_watcher_seed(coord_system *system, uint32_t watcher, uint32_t entity);
/* Changes the range at run time; entities enter or leave at the next
 * flush exactly as if the watcher had been created with this range. -1
 * also for hysteresis on a round watcher. */
int coord_set_watcher_range(coord_system *system, uint32_t watcher, float extent, float hysteresis);
/* Makes the watcher a box (its square, the default), a circle or a sphere
 * of radius `extent`; entities enter or leave at the next flush as if it
 * had been created so. Returns 0, or -1 for an unknown watcher or shape,
 * or a round shape on a watcher with hysteresis. */
int coord_set_watcher_shape(coord_system *system, uint32_t watcher, coord_shape shape);
/* Whether `entity` is in the watcher's view as of the last flush. */
bool coord_watcher_sees(const coord_system *system, uint32_t watcher, uint32_t entity);
/* Number of entities in view as of the last flush. */
size_t coord_watcher_view_size(const coord_system *system, uint32_t watcher);
/* Iterates the view as of the last flush: *cursor = 0 to start; returns the
 * next entity id or COORD_NONE at the end. The view must not change during
 * the iteration (do not flush). */
uint32_t coord_watcher_next(const coord_system *system, uint32_t watcher, size_t *cursor);
size_t coord_watcher_count(const coord_system *system);

/* ---- events -------------------------------------------------------------- */

/* Delivers the net enter/leave events since the last flush. Returns the
 * number of events delivered. */
size_t coord_flush(coord_system *system);

/* ---- spatial queries ----------------------------------------------------- */

typedef struct coord_query_filter {
    uint32_t type_mask;      /* entity matches if (1u << type) & type_mask; 0 = any type */
    uint32_t required_flags; /* all of these flags must be set */
    uint32_t excluded_flags; /* none of these may be set */
    uint32_t exclude_entity; /* COORD_NONE, or an entity to leave out (the asker) */
} coord_query_filter;

/* Source's default cap on a query's results. */
#define COORD_QUERY_DEFAULT_CAP 512

/* Each query writes at most `cap` entity ids to `out` and returns how many
 * matched in total (which may exceed cap: the caller sees it was cut; the
 * ids written are the first in the query's order). `filter` may be NULL.
 * Deferred additions and moves are applied first. Shapes are closed: an
 * entity exactly on the boundary is inside. A 2D system ignores Y in every
 * query. */
size_t coord_query_box(coord_system *system, float min_x, float min_y, float min_z, float max_x, float max_y,
                       float max_z, const coord_query_filter *filter, uint32_t *out, size_t cap);
/* Entities whose position is within `radius` (Euclidean, on X/Z, plus Y in
 * a 3D system) of the centre. */
size_t coord_query_sphere(coord_system *system, float x, float y, float z, float radius,
                          const coord_query_filter *filter, uint32_t *out, size_t cap);
/* Entities inside `shape` of radius `radius` around the centre, by the
 * rule a watcher of that shape and extent applies (above, "Round
 * shapes"): a box is the square of extent `radius` (a cube in 3D). */
size_t coord_query_shape(coord_system *system, coord_shape shape, float x, float y, float z, float radius,
                         const coord_query_filter *filter, uint32_t *out, size_t cap);
/* Entities within `radius` of the segment from (x0,y0,z0) to (x1,y1,z1),
 * ordered by where their closest point on the segment lies, from the
 * start (a ray cast against entities of that radius). */
size_t coord_query_segment(coord_system *system, float x0, float y0, float z0, float x1, float y1, float z1,
                           float radius, const coord_query_filter *filter, uint32_t *out, size_t cap);

/* ---- modes ---------------------------------------------------------------- */

typedef enum coord_mode {
    COORD_MODE_AUTO = 0,     /* chosen by the work measured (above, "Modes") */
    COORD_MODE_CROSSING = 1, /* the boundaries in the axes */
    COORD_MODE_SCAN = 2,     /* flushes scan each trigger's stretch of X */
} coord_mode;

/* Fixes the mode, or lets the system choose (AUTO). A fixed mode takes
 * effect now (after the flush, if called from a callback); nothing is
 * reported by the change itself. An unknown mode is ignored. */
void coord_set_mode(coord_system *system, coord_mode mode);
/* The mode in use: COORD_MODE_CROSSING or COORD_MODE_SCAN. */
coord_mode coord_current_mode(const coord_system *system);
/* "auto", "crossing" or "scan" into *mode: 0, or -1 for any other name. */
int coord_mode_from_name(const char *name, coord_mode *mode);

/* ---- accounting ---------------------------------------------------------- */

typedef struct coord_stats {
    uint64_t crossings;    /* node swaps between an entity and a boundary */
    uint64_t swaps;        /* all node swaps */
    uint64_t events;       /* net events delivered by flushes */
    uint64_t cancelled;    /* pairs touched whose state ended where it started */
    uint64_t scanned;      /* entities tested by scan mode's flushes */
    uint64_t long_moves;   /* scan mode: moves taken apart as teleports */
    uint64_t mode_changes; /* changes between crossing and scan mode */
    size_t bytes;          /* memory held by the system */
} coord_stats;
void coord_get_stats(const coord_system *system, coord_stats *out);

#endif
