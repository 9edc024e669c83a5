/* navmesh.h -- a space's navigation mesh and path queries, in C, over
 * Recast (building the mesh from triangles) and Detour (querying it):
 * navmesh.cpp is the small C++ shim behind this contract.
 *
 * A mesh is built once from a map's walkable geometry (triangles in world
 * metres, y up): Recast voxelizes it, keeps what an agent of the
 * configured radius, height and climb can stand on and reach, and turns
 * that into polygons. The result can be saved as bytes and loaded again
 * (a prebuilt mesh: no build at start-up). Queries are read-only and
 * independent: one mesh serves every entity of its space.
 */
#ifndef TESSERA_NAVMESH_H
#define TESSERA_NAVMESH_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct navmesh navmesh;

/* The agent the mesh is for and the voxel sizes (metres). */
typedef struct navmesh_config {
    float cell_size;    /* voxel side on x and z (0.5) */
    float cell_height;  /* voxel height (0.2) */
    float agent_radius; /* walls are kept this far (0.5) */
    float agent_height; /* headroom needed (2) */
    float agent_climb;  /* the highest step walked up (0.9) */
    float max_slope;    /* degrees (45) */
} navmesh_config;

navmesh_config navmesh_default_config(void);

/* Builds a mesh from `triangle_count` triangles (three vertex indices
 * each) over `vertex_count` vertices (x, y, z each). NULL with why in err
 * (no triangles, an index out of range, a world too large for one tile,
 * nothing walkable, out of memory). */
navmesh *navmesh_build(const float *vertices, size_t vertex_count, const int32_t *triangles, size_t triangle_count,
                       const navmesh_config *config, char *err, size_t errlen);
/* The mesh as bytes, to store and load later (allocated; free() it), and
 * a mesh from such bytes (NULL with why in err if they are not one). */
uint8_t *navmesh_save(const navmesh *mesh, size_t *length);
navmesh *navmesh_load(const uint8_t *data, size_t length, char *err, size_t errlen);
void navmesh_free(navmesh *mesh);

/* Polygons in the mesh (for logs and tests). */
int navmesh_polygon_count(const navmesh *mesh);

/* A path from `start` to `end`: the corners of the shortest way along the
 * mesh, the first at (the mesh point nearest) start and the last at end,
 * at most `max_points` of them (x, y, z each) in `points`; *count gets how
 * many. Returns 0, or -1 with why in why: start or end is not near any
 * walkable surface, no path joins them (end unreachable: a path that ends
 * short of it is not one), or more than max_points corners. */
int navmesh_find_path(const navmesh *mesh, const float start[3], const float end[3], float *points, size_t max_points,
                      size_t *count, char *why, size_t why_size);

/* The point of the mesh nearest to `point` within `reach` metres (on x
 * and z; 4 m of height), in `out`. Returns 0, or -1 if there is none. */
int navmesh_nearest_point(const navmesh *mesh, const float point[3], float reach, float out[3]);

#ifdef __cplusplus
}
#endif

#endif
