/* navmesh_tool.c -- tessera-navmesh: builds a map's navigation mesh ahead of
 * time (a prebuilt mesh, which a map names with "navmesh" so that cellapps
 * load it instead of voxelizing at start-up), and answers path queries on
 * a map from the command line, for level designers and operators.
 *
 *   tessera-navmesh build MAP OUT [CELL_SIZE]
 *   tessera-navmesh path MAP X,Y,Z X,Y,Z [CELL_SIZE]
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "navmesh.h"
#include "space_map.h"

static int navmesh_tool_usage(void) {
    fprintf(stderr, "usage: tessera-navmesh build MAP OUT [CELL_SIZE]\n"
                    "       tessera-navmesh path MAP X,Y,Z X,Y,Z [CELL_SIZE]\n");
    return 2;
}

/* X,Y,Z: three numbers, nothing after them (strtof, so one out of float's
 * range is refused). */
static int navmesh_tool_point(const char *text, float out[3]) {
    for (int i = 0; i < 3; i++) {
        char *end;
        errno = 0;
        out[i] = strtof(text, &end);
        if (end == text || errno == ERANGE || *end != (i < 2 ? ',' : '\0')) return -1;
        text = end + 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 4) return navmesh_tool_usage();
    bool build = strcmp(argv[1], "build") == 0, path = strcmp(argv[1], "path") == 0;
    if ((!build && !path) || (path && argc < 5)) return navmesh_tool_usage();
    navmesh_config config = navmesh_default_config();
    const char *cell_size = build ? (argc > 4 ? argv[4] : NULL) : (argc > 5 ? argv[5] : NULL);
    if (cell_size) config.cell_size = strtof(cell_size, NULL);
    char err[512];
    navmesh *mesh = space_map_navmesh(argv[2], &config, err, sizeof err);
    if (!mesh) {
        fprintf(stderr, "tessera-navmesh: %s\n", err);
        return 1;
    }
    int rc = 0;
    if (build) {
        size_t length = 0;
        uint8_t *data = navmesh_save(mesh, &length);
        FILE *out = data ? fopen(argv[3], "wb") : NULL;
        if (!out || fwrite(data, 1, length, out) != length || fclose(out) != 0) {
            fprintf(stderr, "tessera-navmesh: cannot write %s\n", argv[3]);
            rc = 1;
        } else {
            printf("%s: %d polygons, %zu bytes\n", argv[3], navmesh_polygon_count(mesh), length);
        }
        free(data);
    } else {
        float from[3], to[3], points[3 * 256];
        size_t count = 0;
        char why[160];
        if (navmesh_tool_point(argv[3], from) != 0 || navmesh_tool_point(argv[4], to) != 0) {
            fprintf(stderr, "tessera-navmesh: points are X,Y,Z\n");
            rc = 2;
        } else if (navmesh_find_path(mesh, from, to, points, 256, &count, why, sizeof why) != 0) {
            printf("no path: %s\n", why);
            rc = 1;
        } else {
            for (size_t i = 0; i < count; i++)
                printf("%.2f,%.2f,%.2f\n", (double)points[3 * i], (double)points[3 * i + 1], (double)points[3 * i + 2]);
        }
    }
    navmesh_free(mesh);
    return rc;
}
