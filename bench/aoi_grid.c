/* aoi_grid.c -- the uniform-grid baseline of bench-aoi (see aoi_grid.h for
 * the rule). Every update rebuilds cell membership with one counting sort
 * (O(N + cells): when every entity moves, as in most of the benchmark, an
 * incremental update would touch as much and branch more; when few move,
 * the sort is still small next to the views), then brings the views up to
 * date in two passes, both walking the watchers in cell order so that
 * neighbouring watchers reuse the same cells from cache.
 *
 * Pass 1 recomputes, from the cells overlapping its outer square, the view
 * of every watcher whose owner moved (or was added) or whose range was
 * set. Views are unsorted arrays of entity indices; the old and new views
 * are merged through a per-grid mark array stamped with a per-watcher
 * epoch (mark == epoch: in the old view; mark == epoch + 1: kept in the
 * new one), so this costs O(candidates + view) per watcher with no sorting
 * and no hashing. Cells are row-major, so the cells a square overlaps in
 * one row are one contiguous run of the cell-sorted arrays.
 *
 * Pass 2 handles the watchers whose owner stood still. The rule is per
 * pair and depends only on the two positions and the pair's old state, so
 * for such a watcher only its pairs with movers can change, and only with
 * movers that were inside its outer square before or are inside it now.
 * The movers are counting-sorted by the cells of their old and new
 * positions ("touches", one per distinct cell); the watcher looks at the
 * touches in the cells its outer square overlaps, the same cells pass 1
 * would scan and complete for the same reason (the cell lookup is
 * monotonic), and updates just those pairs (a leave scans the view for
 * the entity's slot). The old state of a pair is
 * known from the old position: inside the inner square it was in the view,
 * outside the outer square it was not (every update leaves each view
 * between the two), and only in the thin band between them does the view
 * need a look. So a tick costs O(movers x neighbourhood), not
 * O(N x neighbourhood), when few entities move; when all move, pass 2 has
 * nothing to do and is skipped.
 */
#include "aoi_grid.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

/* What happened to an entity since the last update (bits of `moved`). */
#define AOI_GRID_MOVED 1u      /* its position changed; last_x/last_z hold the old one */
#define AOI_GRID_ADDED 2u      /* added since the last update: no old position, in no view */
#define AOI_GRID_RECOMPUTED 4u /* during an update: pass 1 recomputed its watcher's view */
/* A touch of an entity's OLD position carries this bit on its index. */
#define AOI_GRID_TOUCH_OLD UINT32_C(0x80000000)
#define AOI_GRID_NOT_FOUND UINT32_MAX

typedef struct aoi_grid_watcher {
    float extent;      /* inner half-side r */
    float outer;       /* outer half-side R = r + h, rounded once to float */
    uint32_t *view;    /* entity indices, unsorted */
    uint32_t count;    /* entities in view */
    uint32_t capacity; /* allocated length of view; 0 and view NULL when unused */
    bool active;       /* the entity has a watcher */
    bool stale;        /* range set since the last update: recompute it whatever moved */
} aoi_grid_watcher;

struct aoi_grid {
    float min_x, min_z;
    float inverse_cell; /* 1 / cell_size: a multiplication is monotonic, as the cell lookup needs */
    float cell_size;
    uint32_t columns, rows;

    uint32_t count, capacity;   /* entities */
    float *x, *z;               /* positions, by entity index */
    float *last_x, *last_z;     /* position at the last update, valid while moved has AOI_GRID_MOVED */
    uint8_t *moved;             /* AOI_GRID_* bits, by entity index; all 0 between updates */
    aoi_grid_watcher *watchers; /* by entity index */
    uint32_t active_watchers;
    uint32_t *cell_of; /* cell of each entity at the last rebuild */
    uint32_t *mark;    /* by entity index; see the file comment */
    uint32_t epoch;    /* even; the current watcher's stamp */

    uint32_t *cell_start;       /* columns * rows + 1 offsets into the sorted arrays */
    uint32_t *cell_fill;        /* scatter cursor per cell during a rebuild */
    float *sorted_x, *sorted_z; /* positions in cell order */
    uint32_t *sorted_id;        /* entity indices in cell order */

    /* The movers of this update and their touches (pass 2). */
    uint32_t mover_count;
    uint32_t *mover;          /* entity indices, in index order */
    uint32_t *mover_old_cell; /* cell of the old position, or the new cell when there is none */
    uint32_t *touch_start;    /* columns * rows + 1 offsets into touch */
    uint32_t *touch;          /* mover indices by cell, | AOI_GRID_TOUCH_OLD for an old position */

    uint32_t *scratch;       /* the view being built */
    uint32_t *hits;          /* slots of the candidates inside the outer square */
    size_t scratch_capacity; /* of both */
    size_t recomputed;       /* views pass 1 recomputed in the last update */
};

aoi_grid *aoi_grid_create(float min_x, float min_z, float max_x, float max_z, float cell_size) {
    if (!(cell_size > 0) || !isfinite(cell_size) || !(max_x > min_x) || !(max_z > min_z)) return NULL;
    aoi_grid *grid = xcalloc(1, sizeof *grid);
    grid->min_x = min_x;
    grid->min_z = min_z;
    grid->cell_size = cell_size;
    grid->inverse_cell = 1.0f / cell_size;
    grid->columns = (uint32_t)ceilf((max_x - min_x) / cell_size);
    grid->rows = (uint32_t)ceilf((max_z - min_z) / cell_size);
    if (grid->columns == 0) grid->columns = 1;
    if (grid->rows == 0) grid->rows = 1;
    size_t cells = (size_t)grid->columns * grid->rows;
    grid->cell_start = xcalloc(cells + 1, sizeof *grid->cell_start);
    grid->cell_fill = xcalloc(cells, sizeof *grid->cell_fill);
    grid->touch_start = xcalloc(cells + 1, sizeof *grid->touch_start);
    grid->epoch = 2;
    return grid;
}

void aoi_grid_free(aoi_grid *grid) {
    if (!grid) return;
    for (uint32_t i = 0; i < grid->count; i++) free(grid->watchers[i].view);
    free(grid->x);
    free(grid->z);
    free(grid->last_x);
    free(grid->last_z);
    free(grid->moved);
    free(grid->watchers);
    free(grid->cell_of);
    free(grid->mark);
    free(grid->cell_start);
    free(grid->cell_fill);
    free(grid->sorted_x);
    free(grid->sorted_z);
    free(grid->sorted_id);
    free(grid->mover);
    free(grid->mover_old_cell);
    free(grid->touch_start);
    free(grid->touch);
    free(grid->scratch);
    free(grid->hits);
    free(grid);
}

static void aoi_grid__reserve(aoi_grid *grid, uint32_t wanted) {
    if (wanted <= grid->capacity) return;
    uint32_t capacity = grid->capacity ? grid->capacity : 64;
    while (capacity < wanted) capacity *= 2;
    if (capacity > AOI_GRID_TOUCH_OLD) log_panic("aoi_grid: more than 2^31 entities");
    grid->x = xrealloc(grid->x, capacity * sizeof *grid->x);
    grid->z = xrealloc(grid->z, capacity * sizeof *grid->z);
    grid->last_x = xrealloc(grid->last_x, capacity * sizeof *grid->last_x);
    grid->last_z = xrealloc(grid->last_z, capacity * sizeof *grid->last_z);
    grid->moved = xrealloc(grid->moved, capacity * sizeof *grid->moved);
    grid->watchers = xrealloc(grid->watchers, capacity * sizeof *grid->watchers);
    grid->cell_of = xrealloc(grid->cell_of, capacity * sizeof *grid->cell_of);
    grid->mark = xrealloc(grid->mark, capacity * sizeof *grid->mark);
    grid->sorted_x = xrealloc(grid->sorted_x, capacity * sizeof *grid->sorted_x);
    grid->sorted_z = xrealloc(grid->sorted_z, capacity * sizeof *grid->sorted_z);
    grid->sorted_id = xrealloc(grid->sorted_id, capacity * sizeof *grid->sorted_id);
    grid->mover = xrealloc(grid->mover, capacity * sizeof *grid->mover);
    grid->mover_old_cell = xrealloc(grid->mover_old_cell, capacity * sizeof *grid->mover_old_cell);
    grid->touch = xrealloc(grid->touch, 2 * (size_t)capacity * sizeof *grid->touch);
    grid->capacity = capacity;
}

uint32_t aoi_grid_add_entity(aoi_grid *grid, float x, float z) {
    aoi_grid__reserve(grid, grid->count + 1);
    uint32_t entity = grid->count++;
    grid->x[entity] = x;
    grid->z[entity] = z;
    grid->moved[entity] = AOI_GRID_ADDED;
    grid->cell_of[entity] = 0; /* not read while ADDED; defined all the same */
    grid->watchers[entity] = (aoi_grid_watcher){0};
    grid->mark[entity] = 0; /* never equal to an epoch, which is >= 2 */
    return entity;
}

int aoi_grid_move_entity(aoi_grid *grid, uint32_t entity, float x, float z) {
    if (entity >= grid->count) return -1;
    /* Not moving is not a move (NaN compares unequal, so it counts as one). */
    if (x == grid->x[entity] && z == grid->z[entity]) return 0;
    if (!grid->moved[entity]) { /* the first move since the update: keep where it was */
        grid->last_x[entity] = grid->x[entity];
        grid->last_z[entity] = grid->z[entity];
    }
    grid->moved[entity] |= AOI_GRID_MOVED;
    grid->x[entity] = x;
    grid->z[entity] = z;
    return 0;
}

int aoi_grid_set_watcher(aoi_grid *grid, uint32_t entity, float extent, float hysteresis) {
    if (entity >= grid->count) return -1;
    if (!(extent >= 0) || !(hysteresis >= 0) || !isfinite(extent) || !isfinite(hysteresis)) return -1;
    aoi_grid_watcher *watcher = &grid->watchers[entity];
    if (!watcher->active) grid->active_watchers++;
    watcher->extent = extent;
    watcher->outer = extent + hysteresis;
    watcher->active = true;
    watcher->stale = true;
    return 0;
}

/* Column (or row) of a coordinate, clamped to the grid. Monotonic in v, so
 * lo <= v <= hi implies cell(lo) <= cell(v) <= cell(hi): the cells between
 * the cells of a square's bounds hold every entity the exact test can
 * accept. NaN lands in cell 0. */
static inline uint32_t aoi_grid__cell(float v, float origin, float inverse, uint32_t limit) {
    float scaled = (v - origin) * inverse;
    if (!(scaled >= 0.0f)) return 0;
    if (scaled >= (float)limit) return limit - 1;
    return (uint32_t)scaled;
}

/* Counting sort of the entities by cell; collects the movers (moved or
 * added since the last update) with the cell of their old position. */
static void aoi_grid__rebuild(aoi_grid *grid) {
    size_t cells = (size_t)grid->columns * grid->rows;
    uint32_t *start = grid->cell_start;
    const uint8_t *moved = grid->moved;
    uint32_t movers = 0;
    memset(start, 0, (cells + 1) * sizeof *start);
    for (uint32_t i = 0; i < grid->count; i++) {
        uint32_t column = aoi_grid__cell(grid->x[i], grid->min_x, grid->inverse_cell, grid->columns);
        uint32_t row = aoi_grid__cell(grid->z[i], grid->min_z, grid->inverse_cell, grid->rows);
        uint32_t cell = row * grid->columns + column;
        /* Without branches: the movers may be a random subset. An added
         * entity has no old cell; its new one stands in (one touch). */
        grid->mover[movers] = i;
        grid->mover_old_cell[movers] = moved[i] & AOI_GRID_ADDED ? cell : grid->cell_of[i];
        movers += moved[i] != 0;
        grid->cell_of[i] = cell;
        start[cell + 1]++;
    }
    grid->mover_count = movers;
    for (size_t c = 0; c < cells; c++) {
        start[c + 1] += start[c];
        grid->cell_fill[c] = start[c];
    }
    for (uint32_t i = 0; i < grid->count; i++) {
        uint32_t slot = grid->cell_fill[grid->cell_of[i]]++;
        grid->sorted_x[slot] = grid->x[i];
        grid->sorted_z[slot] = grid->z[i];
        grid->sorted_id[slot] = i;
    }
}

/* Counting sort of the movers' touches: one in the cell of the new
 * position, one more in the cell of the old position when it differs. */
static void aoi_grid__sort_touches(aoi_grid *grid) {
    size_t cells = (size_t)grid->columns * grid->rows;
    uint32_t *start = grid->touch_start;
    memset(start, 0, (cells + 1) * sizeof *start);
    for (uint32_t k = 0; k < grid->mover_count; k++) {
        uint32_t new_cell = grid->cell_of[grid->mover[k]], old_cell = grid->mover_old_cell[k];
        start[new_cell + 1]++;
        if (old_cell != new_cell) start[old_cell + 1]++;
    }
    for (size_t c = 0; c < cells; c++) {
        start[c + 1] += start[c];
        grid->cell_fill[c] = start[c]; /* free again: the rebuild is done with it */
    }
    for (uint32_t k = 0; k < grid->mover_count; k++) {
        uint32_t entity = grid->mover[k];
        uint32_t new_cell = grid->cell_of[entity], old_cell = grid->mover_old_cell[k];
        grid->touch[grid->cell_fill[new_cell]++] = entity;
        if (old_cell != new_cell) grid->touch[grid->cell_fill[old_cell]++] = entity | AOI_GRID_TOUCH_OLD;
    }
}

static uint32_t aoi_grid__view_find(const aoi_grid_watcher *watcher, uint32_t entity) {
    for (uint32_t k = 0; k < watcher->count; k++)
        if (watcher->view[k] == entity) return k;
    return AOI_GRID_NOT_FOUND;
}

static void aoi_grid__view_push(aoi_grid_watcher *watcher, uint32_t entity) {
    if (watcher->count == watcher->capacity) {
        watcher->capacity = watcher->capacity ? 2 * watcher->capacity : 16;
        watcher->view = xrealloc(watcher->view, watcher->capacity * sizeof *watcher->view);
    }
    watcher->view[watcher->count++] = entity;
}

/* Pass 2 for one watcher whose owner stood still: its pairs with the movers
 * touching the cells [c0, c1] x [r0, r1] its outer square overlaps. */
static size_t aoi_grid__update_pairs(aoi_grid *grid, uint32_t owner, float ox, float oz, uint32_t c0, uint32_t c1,
                                     uint32_t r0, uint32_t r1, const aoi_grid_callbacks *callbacks, void *user_data) {
    aoi_grid_watcher *watcher = &grid->watchers[owner];
    const uint32_t *start = grid->touch_start;
    /* The bounds exactly as coord.h states them: computed once, in float. */
    float inner_lo_x = ox - watcher->extent, inner_hi_x = ox + watcher->extent;
    float inner_lo_z = oz - watcher->extent, inner_hi_z = oz + watcher->extent;
    float outer_lo_x = ox - watcher->outer, outer_hi_x = ox + watcher->outer;
    float outer_lo_z = oz - watcher->outer, outer_hi_z = oz + watcher->outer;
    size_t events = 0;
    for (uint32_t row = r0; row <= r1; row++) {
        uint32_t base = row * grid->columns;
        uint32_t end = start[base + c1 + 1];
        for (uint32_t t = start[base + c0]; t < end; t++) {
            uint32_t entity = grid->touch[t] & ~AOI_GRID_TOUCH_OLD;
            if (grid->touch[t] & AOI_GRID_TOUCH_OLD) {
                /* Its new cell has the other touch; if that one is in the
                 * square's cells too, the pair is handled there, once. */
                uint32_t cell = grid->cell_of[entity], new_row = cell / grid->columns;
                uint32_t new_column = cell - new_row * grid->columns;
                if (r0 <= new_row && new_row <= r1 && c0 <= new_column && new_column <= c1) continue;
            }
            float ex = grid->x[entity], ez = grid->z[entity];
            bool inner = inner_lo_x <= ex && ex <= inner_hi_x && inner_lo_z <= ez && ez <= inner_hi_z;
            bool outer = outer_lo_x <= ex && ex <= outer_hi_x && outer_lo_z <= ez && ez <= outer_hi_z;
            if (outer && !inner) continue; /* in the band: the pair keeps its state */

            /* The old state: 1 in the view, 0 not, -1 ask the view. */
            int was = 0;
            if (!(grid->moved[entity] & AOI_GRID_ADDED)) {
                float px = grid->last_x[entity], pz = grid->last_z[entity];
                if (inner_lo_x <= px && px <= inner_hi_x && inner_lo_z <= pz && pz <= inner_hi_z)
                    was = 1;
                else if (outer_lo_x <= px && px <= outer_hi_x && outer_lo_z <= pz && pz <= outer_hi_z)
                    was = -1;
            }
            if (inner) {
                if (was == 1 || (was == -1 && aoi_grid__view_find(watcher, entity) != AOI_GRID_NOT_FOUND)) continue;
                aoi_grid__view_push(watcher, entity);
                events++;
                if (callbacks && callbacks->on_enter) callbacks->on_enter(owner, entity, user_data);
            } else { /* outside the outer square */
                if (was == 0) continue;
                uint32_t k = aoi_grid__view_find(watcher, entity);
                if (k == AOI_GRID_NOT_FOUND) {
                    if (was == 1) /* every update leaves the inner square in the view */
                        log_panic("aoi_grid: watcher %" PRIu32 " lost entity %" PRIu32, owner, entity);
                    continue;
                }
                watcher->view[k] = watcher->view[--watcher->count];
                events++;
                if (callbacks && callbacks->on_leave) callbacks->on_leave(owner, entity, user_data);
            }
        }
    }
    return events;
}

size_t aoi_grid_update(aoi_grid *grid, const aoi_grid_callbacks *callbacks, void *user_data) {
    aoi_grid__rebuild(grid);
    void (*on_enter)(uint32_t, uint32_t, void *) = callbacks ? callbacks->on_enter : NULL;
    void (*on_leave)(uint32_t, uint32_t, void *) = callbacks ? callbacks->on_leave : NULL;
    const float *sx = grid->sorted_x, *sz = grid->sorted_z;
    const uint32_t *sid = grid->sorted_id, *start = grid->cell_start;
    uint32_t *mark = grid->mark;
    uint8_t *moved = grid->moved;
    size_t events = 0, recomputed = 0;

    /* Pass 1: watchers whose owner moved or whose range was set. */
    for (uint32_t p = 0; p < grid->count; p++) {
        uint32_t owner = sid[p];
        aoi_grid_watcher *watcher = &grid->watchers[owner];
        if (!watcher->active || !(watcher->stale || moved[owner])) continue;
        watcher->stale = false;
        moved[owner] |= AOI_GRID_RECOMPUTED;
        recomputed++;
        float ox = sx[p], oz = sz[p];
        /* The bounds exactly as coord.h states them: computed once, in float. */
        float inner_lo_x = ox - watcher->extent, inner_hi_x = ox + watcher->extent;
        float inner_lo_z = oz - watcher->extent, inner_hi_z = oz + watcher->extent;
        float outer_lo_x = ox - watcher->outer, outer_hi_x = ox + watcher->outer;
        float outer_lo_z = oz - watcher->outer, outer_hi_z = oz + watcher->outer;
        uint32_t c0 = aoi_grid__cell(outer_lo_x, grid->min_x, grid->inverse_cell, grid->columns);
        uint32_t c1 = aoi_grid__cell(outer_hi_x, grid->min_x, grid->inverse_cell, grid->columns);
        uint32_t r0 = aoi_grid__cell(outer_lo_z, grid->min_z, grid->inverse_cell, grid->rows);
        uint32_t r1 = aoi_grid__cell(outer_hi_z, grid->min_z, grid->inverse_cell, grid->rows);

        size_t candidates = 0;
        for (uint32_t row = r0; row <= r1; row++) {
            uint32_t base = row * grid->columns;
            candidates += start[base + c1 + 1] - start[base + c0];
        }
        if (candidates > grid->scratch_capacity) {
            size_t capacity = grid->scratch_capacity ? grid->scratch_capacity : 256;
            while (capacity < candidates) capacity *= 2;
            grid->scratch = xrealloc(grid->scratch, capacity * sizeof *grid->scratch);
            grid->hits = xrealloc(grid->hits, capacity * sizeof *grid->hits);
            grid->scratch_capacity = capacity;
        }

        if (grid->epoch >= UINT32_MAX - 2) {
            /* Wrapped after ~2^31 watcher updates: forget every old stamp. */
            memset(mark, 0, grid->count * sizeof *mark);
            grid->epoch = 2;
        }
        uint32_t was = grid->epoch, kept = grid->epoch + 1;
        grid->epoch += 2;
        const uint32_t *old = watcher->view;
        uint32_t old_count = watcher->count;
        for (uint32_t k = 0; k < old_count; k++) mark[old[k]] = was;

        /* Step 1, without branches: about half the candidates fall outside
         * the outer square, at random, which a branch would mispredict. */
        uint32_t *hits = grid->hits;
        uint32_t hit_count = 0;
        for (uint32_t row = r0; row <= r1; row++) {
            uint32_t base = row * grid->columns;
            uint32_t end = start[base + c1 + 1];
            for (uint32_t s = start[base + c0]; s < end; s++) {
                float ex = sx[s], ez = sz[s];
                hits[hit_count] = s;
                hit_count += (outer_lo_x <= ex) & (ex <= outer_hi_x) & (outer_lo_z <= ez) & (ez <= outer_hi_z);
            }
        }
        /* Step 2: the rule, on the few that can be in the view. */
        uint32_t *next = grid->scratch;
        uint32_t next_count = 0;
        for (uint32_t k = 0; k < hit_count; k++) {
            uint32_t s = hits[k];
            uint32_t entity = sid[s];
            if (entity == owner) continue;
            float ex = sx[s], ez = sz[s];
            bool inner = inner_lo_x <= ex && ex <= inner_hi_x && inner_lo_z <= ez && ez <= inner_hi_z;
            bool seen = mark[entity] == was;
            if (!inner && !seen) continue; /* in the band and not seen before: stays out */
            next[next_count++] = entity;
            mark[entity] = kept;
            if (!seen) {
                events++;
                if (on_enter) on_enter(owner, entity, user_data);
            }
        }
        for (uint32_t k = 0; k < old_count; k++) {
            if (mark[old[k]] != was) continue; /* kept */
            events++;
            if (on_leave) on_leave(owner, old[k], user_data);
        }

        if (next_count > watcher->capacity) {
            uint32_t capacity = watcher->capacity ? watcher->capacity : 16;
            while (capacity < next_count) capacity *= 2;
            free(watcher->view); /* the old view was fully consumed above */
            watcher->view = xmalloc(capacity * sizeof *watcher->view);
            watcher->capacity = capacity;
        }
        if (next_count) memcpy(watcher->view, next, next_count * sizeof *next);
        watcher->count = next_count;
    }

    /* Pass 2: watchers whose owner stood still, pair by pair with the
     * movers near them. Nothing to do when every watcher was recomputed. */
    if (recomputed < grid->active_watchers && grid->mover_count) {
        aoi_grid__sort_touches(grid);
        for (uint32_t p = 0; p < grid->count; p++) {
            uint32_t owner = sid[p];
            aoi_grid_watcher *watcher = &grid->watchers[owner];
            if (!watcher->active || moved[owner]) continue;
            float ox = sx[p], oz = sz[p];
            float outer_lo_x = ox - watcher->outer, outer_hi_x = ox + watcher->outer;
            float outer_lo_z = oz - watcher->outer, outer_hi_z = oz + watcher->outer;
            uint32_t c0 = aoi_grid__cell(outer_lo_x, grid->min_x, grid->inverse_cell, grid->columns);
            uint32_t c1 = aoi_grid__cell(outer_hi_x, grid->min_x, grid->inverse_cell, grid->columns);
            uint32_t r0 = aoi_grid__cell(outer_lo_z, grid->min_z, grid->inverse_cell, grid->rows);
            uint32_t r1 = aoi_grid__cell(outer_hi_z, grid->min_z, grid->inverse_cell, grid->rows);
            events += aoi_grid__update_pairs(grid, owner, ox, oz, c0, c1, r0, r1, callbacks, user_data);
        }
    }
    memset(moved, 0, grid->count * sizeof *moved);
    grid->recomputed = recomputed;
    return events;
}

size_t aoi_grid_recomputed(const aoi_grid *grid) { return grid->recomputed; }

const uint32_t *aoi_grid_view(const aoi_grid *grid, uint32_t watcher, size_t *count) {
    if (watcher >= grid->count || !grid->watchers[watcher].active) {
        *count = 0;
        return NULL;
    }
    *count = grid->watchers[watcher].count;
    return grid->watchers[watcher].view;
}

bool aoi_grid_sees(const aoi_grid *grid, uint32_t watcher, uint32_t entity) {
    size_t count;
    const uint32_t *view = aoi_grid_view(grid, watcher, &count);
    for (size_t k = 0; k < count; k++)
        if (view[k] == entity) return true;
    return false;
}

size_t aoi_grid_entity_count(const aoi_grid *grid) { return grid->count; }

size_t aoi_grid_bytes(const aoi_grid *grid) {
    size_t cells = (size_t)grid->columns * grid->rows;
    size_t bytes = sizeof *grid;
    /* x, z, last_x, last_z, cell_of, mark, sorted_x, sorted_z, sorted_id,
     * mover, mover_old_cell: 4 bytes each; touch: 8; moved: 1. */
    bytes += (size_t)grid->capacity * (11 * 4 + 8 + 1 + sizeof(aoi_grid_watcher));
    /* cell_start, touch_start: cells + 1 each; cell_fill: cells. */
    bytes += (3 * cells + 2) * sizeof(uint32_t);
    bytes += 2 * grid->scratch_capacity * sizeof(uint32_t);
    for (uint32_t i = 0; i < grid->count; i++) bytes += (size_t)grid->watchers[i].capacity * sizeof(uint32_t);
    return bytes;
}
