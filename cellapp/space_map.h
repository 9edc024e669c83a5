/* space_map.h -- a space's map file: its walkable geometry, from which the
 * cellapp builds (or loads) the space's navigation mesh.
 *
 * A map is one JSON document:
 *
 *   {
 *     "format": 1,
 *     "geometry": {
 *       "vertices": [x, y, z, x, y, z, ...],     metres, y up
 *       "triangles": [a, b, c, ...],             vertex indices, any winding
 *       "boxes": [ { "min": [x, y, z], "max": [x, y, z] }, ... ]
 *     },
 *     "navmesh": "arena.navmesh"                 optional: a prebuilt mesh,
 *                                                relative to the map's directory
 *   }
 *
 * Boxes are a level designer's shorthand: each becomes its six faces'
 * twelve triangles (a wall, a crate, a building). With "navmesh" the mesh
 * is loaded from that file (written by `tessera-navmesh build`), and the
 * geometry is not voxelized at start-up.
 *
 * Errors name the file and the key: a missing or broken file, a vertex
 * list whose length is not a multiple of 3, an index out of range, a box
 * whose min is not below its max, a prebuilt mesh that does not load.
 */
#ifndef TESSERA_SPACE_MAP_H
#define TESSERA_SPACE_MAP_H

#include <stddef.h>
#include <stdint.h>

#include "navmesh.h"

typedef struct space_map_geometry {
    float *vertices; /* x, y, z each */
    size_t vertex_count;
    int32_t *triangles; /* three indices each */
    size_t triangle_count;
    char navmesh_path[512]; /* the prebuilt mesh's file ("": none) */
} space_map_geometry;

/* Reads the map at `path`. Returns 0, or -1 with why in err. */
int space_map_read(const char *path, space_map_geometry *out, char *err, size_t errlen);
void space_map_geometry_free(space_map_geometry *geometry);

/* The map's navigation mesh: the prebuilt one if it names one, else built
 * from its geometry with `config`. NULL with why in err. */
navmesh *space_map_navmesh(const char *path, const navmesh_config *config, char *err, size_t errlen);

#endif
