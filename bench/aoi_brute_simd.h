/* aoi_brute_simd.h -- a brute-force area of interest in SIMD, the second
 * baseline bench-aoi holds the coordinate system (cellapp/coord.h) against.
 * It owns entity positions as a structure of arrays (x[], z[]) and one
 * optional watcher per entity whose view is a bitset over all entity
 * slots; each update tests every watcher against every entity, eight at a
 * time with AVX2 where the CPU has it (four with SSE2, one in plain C
 * elsewhere). It does not own game state, removal, ids that outlive a run
 * or queries: it is a benchmark baseline, not a cellapp module.
 *
 * The view rule is coord.h's, applied literally, as in aoi_grid.h: a
 * watcher of extent r and hysteresis h owned by an entity at (ox, oz) has
 * an inner square [ox - r, ox + r] x [oz - r, oz + r] and an outer square
 * of extent R = r + h (rounded once to float), each bound computed in
 * single precision (`float lo = ox - r, hi = ox + r; lo <= ex && ex <= hi`).
 * At each update an entity is in the new view when it is inside the inner
 * square, or inside the outer square and in the old view; the owner never
 * sees itself. Views change at updates only, so events are net per update,
 * as coord_flush's are.
 *
 * Entities and watchers are dense indices: entity i is the i-th added, and
 * its watcher (if any) is also named i. The number of entity slots is
 * fixed at creation, since every view is a bitset of that many bits.
 */
#ifndef TESSERA_AOI_BRUTE_SIMD_H
#define TESSERA_AOI_BRUTE_SIMD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define AOI_BRUTE_SIMD_NONE UINT32_MAX

typedef struct aoi_brute_simd aoi_brute_simd;

typedef struct aoi_brute_simd_callbacks {
    /* `entity` entered `watcher`'s view. Must not call back into the AOI. */
    void (*on_enter)(uint32_t watcher, uint32_t entity, void *user_data);
    /* `entity` left `watcher`'s view. Must not call back into the AOI. */
    void (*on_leave)(uint32_t watcher, uint32_t entity, void *user_data);
} aoi_brute_simd_callbacks;

/* An AOI with room for `capacity` entities (>= 1), and the bitsets of
 * `capacity` views of `capacity` bits each, allocated now. `kernel` names
 * the kernel the updates run ("avx2", "sse2" or "scalar"), or is NULL for
 * the best this CPU supports. NULL for a capacity of 0 or one too large
 * to index, or a kernel that is unknown or that this CPU cannot run;
 * panics on no memory (log.h), like the rest of the tree. */
aoi_brute_simd *aoi_brute_simd_create(uint32_t capacity, const char *kernel);
void aoi_brute_simd_free(aoi_brute_simd *aoi);

/* Adds an entity and returns its index, or AOI_BRUTE_SIMD_NONE when all
 * `capacity` slots are taken or a coordinate is not finite. It takes part
 * in views from the next aoi_brute_simd_update on. */
uint32_t aoi_brute_simd_add_entity(aoi_brute_simd *aoi, float x, float z);
/* Moves an entity; views change at the next aoi_brute_simd_update.
 * Returns 0, or -1 for an unknown index or a coordinate that is not
 * finite. */
int aoi_brute_simd_move_entity(aoi_brute_simd *aoi, uint32_t entity, float x, float z);
/* Gives entity `entity` a watcher (index `entity`) of inner extent `extent`
 * and hysteresis `hysteresis`, starting with an empty view: what is in
 * range enters at the next update. Setting it again changes the range; the
 * view kept so far is then judged by the new range at the next update.
 * Returns 0, or -1 for an unknown index or a negative/non-finite range. */
int aoi_brute_simd_set_watcher(aoi_brute_simd *aoi, uint32_t entity, float extent, float hysteresis);

/* Tests every watcher against every entity, brings every view up to date
 * and calls on_enter/on_leave for the net changes since the previous update
 * (`callbacks` may be NULL). Costs O(watchers x capacity / lanes) whatever
 * moved. Returns the number of events. */
size_t aoi_brute_simd_update(aoi_brute_simd *aoi, const aoi_brute_simd_callbacks *callbacks, void *user_data);

/* Whether `entity` is in the view as of the last update: one bit. False
 * for an entity without a watcher or an unknown index. */
bool aoi_brute_simd_sees(const aoi_brute_simd *aoi, uint32_t watcher, uint32_t entity);
/* Entities in the view as of the last update (0 without a watcher). */
size_t aoi_brute_simd_view_size(const aoi_brute_simd *aoi, uint32_t watcher);
/* The view as a bitset: bit e % 64 of word e / 64 is entity e; *words
 * words, valid until the next update. NULL with *words = 0 for an entity
 * without a watcher. */
const uint64_t *aoi_brute_simd_view_bits(const aoi_brute_simd *aoi, uint32_t watcher, size_t *words);
size_t aoi_brute_simd_entity_count(const aoi_brute_simd *aoi);
/* Memory held: positions, watcher ranges and the view bitsets, at their
 * allocated size. */
size_t aoi_brute_simd_bytes(const aoi_brute_simd *aoi);
/* The kernel the updates run: "avx2", "sse2" or "scalar". */
const char *aoi_brute_simd_kernel(const aoi_brute_simd *aoi);

#endif
