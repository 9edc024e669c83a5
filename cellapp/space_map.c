/* space_map.c -- reads a space's map file (space_map.h) into triangles, and
 * makes its navigation mesh from them or from the prebuilt file it names.
 * Owns the geometry arrays it returns until space_map_geometry_free. */
#include "space_map.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "json_file.h"
#include "log.h"

static void space_map_geometry_grow(space_map_geometry *g, size_t vertices, size_t triangles) {
    g->vertices = xrealloc(g->vertices, (g->vertex_count + vertices) * 3 * sizeof *g->vertices);
    g->triangles = xrealloc(g->triangles, (g->triangle_count + triangles) * 3 * sizeof *g->triangles);
}

/* A JSON array of `count` numbers into out. */
static int space_map_numbers(const cJSON *array, float *out, int count) {
    if (!cJSON_IsArray(array) || cJSON_GetArraySize(array) != count) return -1;
    int i = 0;
    const cJSON *item;
    cJSON_ArrayForEach(item, array) {
        if (!cJSON_IsNumber(item) || !isfinite(item->valuedouble)) return -1;
        out[i++] = (float)item->valuedouble;
    }
    return i == count ? 0 : -1;
}

/* A box's twelve triangles over its eight corners. */
static void space_map_add_box(space_map_geometry *g, const float min[3], const float max[3]) {
    static const int faces[12][3] = {{0, 2, 1}, {0, 3, 2}, {4, 5, 6}, {4, 6, 7}, {0, 1, 5}, {0, 5, 4},
                                     {1, 2, 6}, {1, 6, 5}, {2, 3, 7}, {2, 7, 6}, {3, 0, 4}, {3, 4, 7}};
    space_map_geometry_grow(g, 8, 12);
    int32_t base = (int32_t)g->vertex_count;
    for (int corner = 0; corner < 8; corner++) {
        float *v = &g->vertices[3 * (g->vertex_count + (size_t)corner)];
        v[0] = (corner == 1 || corner == 2 || corner == 5 || corner == 6) ? max[0] : min[0];
        v[1] = corner >= 4 ? max[1] : min[1];
        v[2] = (corner == 2 || corner == 3 || corner == 6 || corner == 7) ? max[2] : min[2];
    }
    for (int f = 0; f < 12; f++)
        for (int k = 0; k < 3; k++) g->triangles[3 * (g->triangle_count + (size_t)f) + (size_t)k] = base + faces[f][k];
    g->vertex_count += 8;
    g->triangle_count += 12;
}

static int space_map_read_geometry(const char *path, const cJSON *geometry, space_map_geometry *g, char *err,
                                   size_t errlen) {
    const cJSON *vertices = cJSON_GetObjectItemCaseSensitive(geometry, "vertices");
    const cJSON *triangles = cJSON_GetObjectItemCaseSensitive(geometry, "triangles");
    const cJSON *boxes = cJSON_GetObjectItemCaseSensitive(geometry, "boxes");
    if ((vertices && !cJSON_IsArray(vertices)) || (triangles && !cJSON_IsArray(triangles)) ||
        (boxes && !cJSON_IsArray(boxes))) {
        snprintf(err, errlen, "map %s: geometry.vertices, .triangles and .boxes must be arrays", path);
        return -1;
    }
    size_t nv = vertices ? (size_t)cJSON_GetArraySize(vertices) : 0;
    size_t nt = triangles ? (size_t)cJSON_GetArraySize(triangles) : 0;
    if (nv % 3 || nt % 3) {
        snprintf(err, errlen, "map %s: geometry.%s has %zu numbers, not a multiple of 3", path,
                 nv % 3 ? "vertices" : "triangles", nv % 3 ? nv : nt);
        return -1;
    }
    space_map_geometry_grow(g, nv / 3, nt / 3);
    size_t i = 0;
    const cJSON *item;
    cJSON_ArrayForEach(item, vertices) {
        if (!cJSON_IsNumber(item) || !isfinite(item->valuedouble)) {
            snprintf(err, errlen, "map %s: geometry.vertices[%zu] is not a number", path, i);
            return -1;
        }
        g->vertices[i++] = (float)item->valuedouble;
    }
    g->vertex_count = nv / 3;
    i = 0;
    cJSON_ArrayForEach(item, triangles) {
        double index = cJSON_IsNumber(item) ? item->valuedouble : -1;
        if (index < 0 || index >= (double)g->vertex_count || index != floor(index)) {
            snprintf(err, errlen, "map %s: geometry.triangles[%zu] is not a vertex index (there are %zu vertices)",
                     path, i, g->vertex_count);
            return -1;
        }
        g->triangles[i++] = (int32_t)index;
    }
    g->triangle_count = nt / 3;
    i = 0;
    cJSON_ArrayForEach(item, boxes) {
        float min[3], max[3];
        if (space_map_numbers(cJSON_GetObjectItemCaseSensitive(item, "min"), min, 3) != 0 ||
            space_map_numbers(cJSON_GetObjectItemCaseSensitive(item, "max"), max, 3) != 0 || min[0] >= max[0] ||
            min[1] >= max[1] || min[2] >= max[2]) {
            snprintf(err, errlen, "map %s: geometry.boxes[%zu] needs \"min\" and \"max\" points, min below max", path,
                     i);
            return -1;
        }
        space_map_add_box(g, min, max);
        i++;
    }
    return 0;
}

int space_map_read(const char *path, space_map_geometry *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    size_t length;
    char problem[256];
    char *text = json_file_read(path, &length, problem, sizeof problem);
    if (!text) {
        snprintf(err, errlen, "map %s: %s", path, problem);
        return -1;
    }
    cJSON *root = json_file_parse(text, length, problem, sizeof problem);
    free(text);
    if (!root) {
        snprintf(err, errlen, "map %s: %s", path, problem);
        return -1;
    }
    int rc = -1;
    const cJSON *format = cJSON_GetObjectItemCaseSensitive(root, "format");
    const cJSON *geometry = cJSON_GetObjectItemCaseSensitive(root, "geometry");
    const cJSON *prebuilt = cJSON_GetObjectItemCaseSensitive(root, "navmesh");
    if (!cJSON_IsObject(root) || !cJSON_IsNumber(format) || format->valuedouble != 1) {
        snprintf(err, errlen, "map %s: not a map of format 1 (\"format\": 1)", path);
    } else if (geometry && !cJSON_IsObject(geometry)) {
        snprintf(err, errlen, "map %s: \"geometry\" must be an object", path);
    } else if (prebuilt && (!cJSON_IsString(prebuilt) || !prebuilt->valuestring[0])) {
        snprintf(err, errlen, "map %s: \"navmesh\" must name a file", path);
    } else if (geometry && space_map_read_geometry(path, geometry, out, err, errlen) != 0) {
        /* err says why */
    } else {
        if (prebuilt) {
            /* Relative to the map's directory. */
            const char *slash = strrchr(path, '/');
            int dir = slash ? (int)(slash - path + 1) : 0;
            if (prebuilt->valuestring[0] == '/') dir = 0;
            snprintf(out->navmesh_path, sizeof out->navmesh_path, "%.*s%s", dir, path, prebuilt->valuestring);
        }
        rc = 0;
    }
    cJSON_Delete(root);
    if (rc != 0) space_map_geometry_free(out);
    return rc;
}

void space_map_geometry_free(space_map_geometry *geometry) {
    free(geometry->vertices);
    free(geometry->triangles);
    memset(geometry, 0, sizeof *geometry);
}

/* The prebuilt mesh's bytes. */
static navmesh *space_map_load_prebuilt(const char *map, const char *file, char *err, size_t errlen) {
    FILE *f = fopen(file, "rb");
    if (!f) {
        snprintf(err, errlen, "map %s: its navmesh %s cannot be read", map, file);
        return NULL;
    }
    uint8_t *data = NULL;
    size_t length = 0, capacity = 0, got;
    uint8_t chunk[65536];
    while ((got = fread(chunk, 1, sizeof chunk, f)) > 0) {
        if (length + got > capacity) {
            capacity = (length + got) * 2;
            data = xrealloc(data, capacity);
        }
        memcpy(data + length, chunk, got);
        length += got;
    }
    bool unread = ferror(f) != 0;
    (void)fclose(f); /* read only: nothing to lose */
    if (unread) {
        free(data);
        snprintf(err, errlen, "map %s: its navmesh %s cannot be read", map, file);
        return NULL;
    }
    char why[256];
    navmesh *mesh = navmesh_load(data, length, why, sizeof why);
    free(data);
    if (!mesh) snprintf(err, errlen, "map %s: its navmesh %s: %s", map, file, why);
    return mesh;
}

navmesh *space_map_navmesh(const char *path, const navmesh_config *config, char *err, size_t errlen) {
    space_map_geometry geometry;
    if (space_map_read(path, &geometry, err, errlen) != 0) return NULL;
    navmesh *mesh = NULL;
    if (geometry.navmesh_path[0]) {
        mesh = space_map_load_prebuilt(path, geometry.navmesh_path, err, errlen);
    } else {
        char why[256];
        mesh = navmesh_build(geometry.vertices, geometry.vertex_count, geometry.triangles, geometry.triangle_count,
                             config, why, sizeof why);
        if (!mesh) snprintf(err, errlen, "map %s: no navigation mesh: %s", path, why);
    }
    space_map_geometry_free(&geometry);
    return mesh;
}
