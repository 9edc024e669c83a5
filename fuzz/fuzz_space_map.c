/* fuzz_space_map.c -- fuzzes cellapp/space_map.c's reader of a space's map
 * file (its geometry: vertices, triangles, boxes, and the prebuilt mesh's
 * name), through space_map_read on the file's path, as the cellapp reads
 * it at start-up. The navigation mesh is not built from it (that is
 * Recast's work, seconds a map).
 *
 * Checks: a map that reads has whole vertices, whole triangles whose every
 * index names a vertex, and a NUL-terminated mesh name; a refused map says
 * why; no crash, no leak. */
#include <string.h>

#include "fuzz_support.h"
#include "space_map.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    space_map_geometry geometry;
    memset(&geometry, 0, sizeof geometry);
    char err[512] = "";
    if (space_map_read(fuzz_file(data, size), &geometry, err, sizeof err) != 0) {
        fuzz_check(err[0] != '\0', "a refused map without a reason");
        space_map_geometry_free(&geometry);
        return 0;
    }
    for (size_t i = 0; i < geometry.triangle_count * 3; i++)
        fuzz_check(geometry.triangles[i] >= 0 && (size_t)geometry.triangles[i] < geometry.vertex_count,
                   "a triangle names a vertex the map does not have");
    fuzz_check(memchr(geometry.navmesh_path, '\0', sizeof geometry.navmesh_path) != NULL,
               "the mesh name overran its field");
    space_map_geometry_free(&geometry);
    return 0;
}
