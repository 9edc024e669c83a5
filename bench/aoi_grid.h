/* aoi_grid.h -- a uniform-grid area of interest, the baseline bench-aoi
 * holds the coordinate system (cellapp/coord.h) against. It owns entity
 * positions, a grid of cells rebuilt from them on every update, and one
 * optional watcher per entity with its view set, kept up to date at each
 * update at a cost that follows the entities that moved; it does not own game
 * state, ids that outlive a run, removal, or queries: it is a benchmark
 * baseline, not a cellapp module.
 *
 * The view rule is coord.h's, applied literally: a watcher of extent r and
 * hysteresis h owned by an entity at (ox, oz) has an inner square
 * [ox - r, ox + r] x [oz - r, oz + r] and an outer square of extent
 * R = r + h, each bound computed in single precision
 * (`float lo = ox - r, hi = ox + r; lo <= ex && ex <= hi`). At each update
 * an entity is in the new view when it is inside the inner square, or
 * inside the outer square and in the old view; the owner never sees
 * itself. Because views are recomputed from positions at update time only,
 * events are net per update, as coord_flush's are.
 *
 * Entities and watchers are dense indices: entity i is the i-th added, and
 * its watcher (if any) is also named i.
 */
#ifndef TESSERA_AOI_GRID_H
#define TESSERA_AOI_GRID_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct aoi_grid aoi_grid;

typedef struct aoi_grid_callbacks {
    /* `entity` entered `watcher`'s view. Must not call back into the grid. */
    void (*on_enter)(uint32_t watcher, uint32_t entity, void *user_data);
    /* `entity` left `watcher`'s view. Must not call back into the grid. */
    void (*on_leave)(uint32_t watcher, uint32_t entity, void *user_data);
} aoi_grid_callbacks;

/* A grid of square cells of side `cell_size` covering [min_x, max_x] x
 * [min_z, max_z]. Entities outside that rectangle still work (they land in
 * the border cells), they just make those cells crowded. Panics on no
 * memory (log.h), like the rest of the tree. */
aoi_grid *aoi_grid_create(float min_x, float min_z, float max_x, float max_z, float cell_size);
void aoi_grid_free(aoi_grid *grid);

/* Adds an entity and returns its index. It takes part in views from the
 * next aoi_grid_update on. */
uint32_t aoi_grid_add_entity(aoi_grid *grid, float x, float z);
/* Moves an entity; views change at the next aoi_grid_update. A "move" to
 * the position it already has is not recorded. Returns 0, or -1 for an
 * unknown index. */
int aoi_grid_move_entity(aoi_grid *grid, uint32_t entity, float x, float z);
/* Gives entity `entity` a watcher (index `entity`) of inner extent `extent`
 * and hysteresis `hysteresis`, starting with an empty view: what is in
 * range enters at the next update. Setting it again changes the range.
 * Returns 0, or -1 for an unknown index or a negative/non-finite range. */
int aoi_grid_set_watcher(aoi_grid *grid, uint32_t entity, float extent, float hysteresis);

/* Rebuilds cell membership from the current positions, brings every view
 * up to date and calls on_enter/on_leave for the net changes since the
 * previous update (`callbacks` may be NULL). A view whose owner moved or
 * whose range was set is recomputed from the cells around it; any other
 * view only re-examines its pairs with the entities that moved near it
 * (the rest of its pairs cannot have changed). Returns the number of
 * events. */
size_t aoi_grid_update(aoi_grid *grid, const aoi_grid_callbacks *callbacks, void *user_data);
/* Views the last aoi_grid_update recomputed from scratch (owner moved or
 * range set); the others were updated pair by pair. */
size_t aoi_grid_recomputed(const aoi_grid *grid);

/* The view as of the last update, in no particular order: *count entity
 * indices, valid until the next update. NULL with *count = 0 for an entity
 * without a watcher. */
const uint32_t *aoi_grid_view(const aoi_grid *grid, uint32_t watcher, size_t *count);
/* Whether `entity` is in the view (a scan of the view: O(view size)). */
bool aoi_grid_sees(const aoi_grid *grid, uint32_t watcher, uint32_t entity);
size_t aoi_grid_entity_count(const aoi_grid *grid);
/* Memory held by the grid: its arrays at their allocated capacity. */
size_t aoi_grid_bytes(const aoi_grid *grid);

#endif
