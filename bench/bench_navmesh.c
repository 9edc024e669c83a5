/* bench_navmesh.c -- navigate's path queries per second on the demo map
 * (demo/maps/arena.json), against a brute-force oracle in the same run: A*
 * over a 1 m occupancy grid of the same map (its boxes, grown by the
 * agent's radius), 8-connected. Both answer the same random pairs of
 * points on open ground; the bench prints each one's queries per second,
 * the ratio, how often the two agree on whether a path exists, and how the
 * mesh's path lengths compare with the grid's (an 8-connected grid path is
 * at most ~8 % longer than the true shortest path, so the mesh's should
 * come out a little shorter, never much longer).
 *
 *   bench-navmesh [PAIRS] [SOURCE_DIR]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cJSON.h>

#include "bench_args.h"
#include "json_file.h"
#include "navmesh.h"
#include "space_map.h"

#define GRID 1000 /* cells per side: -500 .. 500 at 1 m */
#define MAX_POINTS 256

static double now_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;
static double uniform(void) {
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}

/* ---- the oracle: A* on a grid --------------------------------------------- */

static unsigned char *blocked; /* GRID x GRID */
static float *cost;            /* best cost so far */
static int *heap, heap_count;
static float *heap_key;
static unsigned char *closed;

static int cell_index(double x, double z) {
    int cx = (int)floor(x + 500), cz = (int)floor(z + 500);
    if (cx < 0 || cz < 0 || cx >= GRID || cz >= GRID) return -1;
    return cz * GRID + cx;
}

static void heap_push(int node, float key) {
    int i = heap_count++;
    heap[i] = node, heap_key[i] = key;
    while (i > 0) {
        int parent = (i - 1) / 2;
        if (heap_key[parent] <= heap_key[i]) break;
        int n = heap[parent];
        float k = heap_key[parent];
        heap[parent] = heap[i], heap_key[parent] = heap_key[i];
        heap[i] = n, heap_key[i] = k;
        i = parent;
    }
}

static int heap_pop(void) {
    int top = heap[0];
    heap_count--;
    heap[0] = heap[heap_count], heap_key[0] = heap_key[heap_count];
    int i = 0;
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        if (l < heap_count && heap_key[l] < heap_key[m]) m = l;
        if (r < heap_count && heap_key[r] < heap_key[m]) m = r;
        if (m == i) break;
        int n = heap[m];
        float k = heap_key[m];
        heap[m] = heap[i], heap_key[m] = heap_key[i];
        heap[i] = n, heap_key[i] = k;
        i = m;
    }
    return top;
}

/* The grid path's length, or -1 if none. */
static double grid_path(const float start[3], const float end[3]) {
    int from = cell_index(start[0], start[2]), to = cell_index(end[0], end[2]);
    if (from < 0 || to < 0 || blocked[from] || blocked[to]) return -1;
    for (int i = 0; i < GRID * GRID; i++) cost[i] = INFINITY;
    memset(closed, 0, (size_t)GRID * GRID);
    heap_count = 0;
    int tx = to % GRID, tz = to / GRID;
    cost[from] = 0;
    heap_push(from, 0);
    static const int dx[8] = {1, -1, 0, 0, 1, 1, -1, -1}, dz[8] = {0, 0, 1, -1, 1, -1, 1, -1};
    while (heap_count) {
        int node = heap_pop();
        if (closed[node]) continue;
        if (node == to) return cost[node];
        closed[node] = 1;
        int x = node % GRID, z = node / GRID;
        for (int k = 0; k < 8; k++) {
            int nx = x + dx[k], nz = z + dz[k];
            if (nx < 0 || nz < 0 || nx >= GRID || nz >= GRID) continue;
            int next = nz * GRID + nx;
            if (blocked[next] || closed[next]) continue;
            if (k >= 4 && (blocked[z * GRID + nx] || blocked[nz * GRID + x])) continue; /* no corner cutting */
            float step = k >= 4 ? 1.41421356f : 1.0f;
            if (cost[node] + step < cost[next]) {
                cost[next] = cost[node] + step;
                int ax = abs(nx - tx), az = abs(nz - tz);
                float h = (float)(ax > az ? ax - az : az - ax) + 1.41421356f * (float)(ax < az ? ax : az);
                heap_push(next, cost[next] + h);
            }
        }
    }
    return -1;
}

/* The map's boxes, grown by the agent's radius, on the grid. */
static int rasterize(const char *map_path) {
    size_t length;
    char problem[256];
    char *text = json_file_read(map_path, &length, problem, sizeof problem);
    cJSON *root = text ? json_file_parse(text, length, problem, sizeof problem) : NULL;
    free(text);
    if (!root) {
        fprintf(stderr, "bench-navmesh: %s: %s\n", map_path, problem);
        return -1;
    }
    const cJSON *boxes = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "geometry"), "boxes");
    const cJSON *box;
    cJSON_ArrayForEach(box, boxes) {
        const cJSON *min = cJSON_GetObjectItemCaseSensitive(box, "min"),
                    *max = cJSON_GetObjectItemCaseSensitive(box, "max");
        double x0 = cJSON_GetArrayItem(min, 0)->valuedouble - 0.5, z0 = cJSON_GetArrayItem(min, 2)->valuedouble - 0.5;
        double x1 = cJSON_GetArrayItem(max, 0)->valuedouble + 0.5, z1 = cJSON_GetArrayItem(max, 2)->valuedouble + 0.5;
        for (int cz = 0; cz < GRID; cz++)
            for (int cx = 0; cx < GRID; cx++) {
                double x = cx - 500 + 0.5, z = cz - 500 + 0.5;
                if (x >= x0 && x <= x1 && z >= z0 && z <= z1) blocked[cz * GRID + cx] = 1;
            }
    }
    cJSON_Delete(root);
    return 0;
}

int main(int argc, char **argv) {
    int pairs = argc > 1 ? bench_int_arg(argv[1], 0) : 300;
    const char *source = argc > 2 ? argv[2] : (getenv("TESSERA_SOURCE_DIR") ? getenv("TESSERA_SOURCE_DIR") : ".");
    if (pairs <= 0) pairs = 300;
    char map_path[512];
    snprintf(map_path, sizeof map_path, "%s/demo/maps/arena.json", source);
    navmesh_config config = navmesh_default_config();
    config.cell_size = 1.0f;
    char err[512];
    double built = now_seconds();
    navmesh *mesh = space_map_navmesh(map_path, &config, err, sizeof err);
    if (!mesh) {
        fprintf(stderr, "bench-navmesh: %s\n", err);
        return 1;
    }
    built = now_seconds() - built;
    blocked = calloc((size_t)GRID * GRID, 1);
    closed = calloc((size_t)GRID * GRID, 1);
    cost = malloc(sizeof *cost * GRID * GRID);
    heap = malloc(sizeof *heap * GRID * GRID * 8);
    heap_key = malloc(sizeof *heap_key * GRID * GRID * 8);
    if (!blocked || !closed || !cost || !heap || !heap_key || rasterize(map_path) != 0) return 1;

    /* Random pairs on the mesh, 450 m of the centre. */
    float(*starts)[3] = malloc(sizeof *starts * (size_t)pairs), (*ends)[3] = malloc(sizeof *ends * (size_t)pairs);
    for (int i = 0; i < pairs; i++) {
        for (int k = 0; k < 2; k++) {
            float *p = k ? ends[i] : starts[i];
            for (;;) {
                float raw[3] = {(float)(uniform() * 900 - 450), 0, (float)(uniform() * 900 - 450)};
                if (navmesh_nearest_point(mesh, raw, 0.5f, p) == 0 && fabsf(p[0] - raw[0]) < 0.01f &&
                    fabsf(p[2] - raw[2]) < 0.01f && !blocked[cell_index(p[0], p[2])])
                    break;
            }
        }
    }
    float points[3 * MAX_POINTS];
    double *mesh_lengths = calloc((size_t)pairs, sizeof *mesh_lengths);
    int mesh_found = 0;
    /* Mesh queries, repeated until the timing is well above the clock. */
    int rounds = 0;
    double t0 = now_seconds(), mesh_seconds;
    do {
        for (int i = 0; i < pairs; i++) {
            size_t count;
            char why[128];
            if (navmesh_find_path(mesh, starts[i], ends[i], points, MAX_POINTS, &count, why, sizeof why) == 0) {
                if (rounds == 0) mesh_found++;
                double length = 0;
                for (size_t p = 1; p < count; p++)
                    length += hypot(points[3 * p] - points[3 * p - 3], points[3 * p + 2] - points[3 * p - 1]);
                mesh_lengths[i] = length;
            } else {
                mesh_lengths[i] = -1;
            }
        }
        rounds++;
        mesh_seconds = now_seconds() - t0;
    } while (mesh_seconds < 0.5);
    double mesh_rate = (double)pairs * rounds / mesh_seconds;

    int grid_found = 0, agree = 0, compared = 0;
    double ratio_sum = 0, ratio_max = 0;
    t0 = now_seconds();
    for (int i = 0; i < pairs; i++) {
        double length = grid_path(starts[i], ends[i]);
        if (length >= 0) grid_found++;
        if ((length >= 0) == (mesh_lengths[i] >= 0)) agree++;
        if (length > 0 && mesh_lengths[i] > 0) {
            double ratio = mesh_lengths[i] / length;
            ratio_sum += ratio;
            if (ratio > ratio_max) ratio_max = ratio;
            compared++;
        }
    }
    double grid_seconds = now_seconds() - t0;
    double grid_rate = (double)pairs / grid_seconds;
    printf("bench-navmesh: demo map, %d polygons, built in %.0f ms; %d random pairs on open ground\n",
           navmesh_polygon_count(mesh), built * 1000, pairs);
    printf("  navmesh (Detour findPath + findStraightPath): %10.0f queries/s (%.1f us each), %d paths\n", mesh_rate,
           1e6 / mesh_rate, mesh_found);
    printf("  oracle (A* on a 1 m grid, 8-connected):      %10.0f queries/s (%.1f us each), %d paths\n", grid_rate,
           1e6 / grid_rate, grid_found);
    printf("  ratio: %.0fx faster; the two agree on whether a path exists in %d of %d pairs\n", mesh_rate / grid_rate,
           agree, pairs);
    if (compared)
        printf("  mesh path length / grid path length: mean %.3f, worst %.3f (over %d pairs)\n", ratio_sum / compared,
               ratio_max, compared);
    free(mesh_lengths);
    free(starts);
    free(ends);
    free(blocked);
    free(closed);
    free(cost);
    free(heap);
    free(heap_key);
    navmesh_free(mesh);
    return 0;
}
