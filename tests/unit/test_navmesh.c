/* test_navmesh.c -- the navigation shim (cellapp/navmesh.h) and map files
 * (cellapp/space_map.h) on the demo's map (demo/maps/arena.json): a path
 * around a wall is longer than the straight line and stays off the wall; a
 * point inside the closed courtyard has no path from outside, and says
 * why; a saved mesh loads and answers the same; bad geometry and bad map
 * files are refused with the reason; and a navigate (a path handed to the
 * movement chain) that crosses three cells, the entity's whole chain saved
 * and restored into the next cell at each line, arrives at its
 * destination on the far side of the walls. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "cell.h"
#include "movement.h"
#include "witness.h"
#include "cell_real.h"
#include "navmesh.h"
#include "space_map.h"

#define MAX_POINTS 256

static navmesh *arena;

static const char *arena_path(void) {
    static char path[512];
    const char *source = getenv("TESSERA_SOURCE_DIR");
    snprintf(path, sizeof path, "%s/demo/maps/arena.json", source ? source : "..");
    return path;
}

static navmesh_config arena_config(void) {
    navmesh_config config = navmesh_default_config();
    config.cell_size = 1.0f; /* a kilometre square: 1 m voxels */
    return config;
}

static int setup(void **state) {
    (void)state;
    char err[512];
    navmesh_config config = arena_config();
    arena = space_map_navmesh(arena_path(), &config, err, sizeof err);
    if (!arena) fprintf(stderr, "%s\n", err);
    return arena ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    navmesh_free(arena);
    return 0;
}

static double path_length(const float *points, size_t count) {
    double length = 0;
    for (size_t i = 1; i < count; i++)
        length += hypot(points[3 * i] - points[3 * i - 3], points[3 * i + 2] - points[3 * i - 1]);
    return length;
}

static void test_a_path_goes_around_the_wall(void **state) {
    (void)state;
    assert_true(navmesh_polygon_count(arena) > 0);
    /* From south of the wall z in [20, 24], x in [-60, 60], to north of it. */
    const float start[3] = {0, 0, 10}, end[3] = {0, 0, 34};
    float points[3 * MAX_POINTS];
    size_t count = 0;
    char why[128];
    assert_int_equal(navmesh_find_path(arena, start, end, points, MAX_POINTS, &count, why, sizeof why), 0);
    assert_true(count >= 3); /* at least one corner, at the wall's end */
    double length = path_length(points, count);
    assert_true(length > 100.0); /* round an end: 60 + 60 and more, not 24 */
    for (size_t i = 0; i < count; i++) {
        float x = points[3 * i], z = points[3 * i + 2];
        assert_false(x > -60.0f && x < 60.0f && z > 20.0f && z < 24.0f); /* never in the wall */
    }
    assert_true(fabsf(points[3 * (count - 1)] - end[0]) < 1.0f && fabsf(points[3 * (count - 1) + 2] - end[2]) < 1.0f);
}

static void test_no_path_into_the_courtyard(void **state) {
    (void)state;
    const float outside[3] = {150, 0, 150}, inside[3] = {230, 0, 230};
    float points[3 * MAX_POINTS];
    size_t count = 99;
    char why[128] = "";
    assert_int_equal(navmesh_find_path(arena, outside, inside, points, MAX_POINTS, &count, why, sizeof why), -1);
    assert_int_equal(count, 0);
    assert_string_equal(why, "no path joins the start to the destination");
    /* Off the world entirely. */
    const float away[3] = {0, 0, 900};
    assert_int_equal(navmesh_find_path(arena, outside, away, points, MAX_POINTS, &count, why, sizeof why), -1);
    assert_string_equal(why, "the destination is not near any walkable surface");
    /* The top of the tall block is not reachable either: its nearest
     * walkable ground is beside it, or nothing. */
    const float open[3] = {-200, 0, -200};
    assert_int_equal(navmesh_find_path(arena, open, outside, points, MAX_POINTS, &count, why, sizeof why), 0);
}

static void test_a_saved_mesh_answers_the_same(void **state) {
    (void)state;
    size_t length = 0;
    uint8_t *data = navmesh_save(arena, &length);
    assert_non_null(data);
    assert_true(length > 100);
    char err[256];
    navmesh *copy = navmesh_load(data, length, err, sizeof err);
    assert_non_null(copy);
    const float start[3] = {-80, 0, -80}, end[3] = {120, 0, 40};
    float a[3 * MAX_POINTS], b[3 * MAX_POINTS];
    size_t na, nb;
    char why[128];
    assert_int_equal(navmesh_find_path(arena, start, end, a, MAX_POINTS, &na, why, sizeof why), 0);
    assert_int_equal(navmesh_find_path(copy, start, end, b, MAX_POINTS, &nb, why, sizeof why), 0);
    assert_int_equal(na, nb);
    assert_memory_equal(a, b, na * 3 * sizeof *a);
    /* A map that names the saved mesh loads it instead of building. */
    char dir[] = "/tmp/tessera_test_prebuilt_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char mesh_path[256], map_path[256];
    snprintf(mesh_path, sizeof mesh_path, "%s/arena.navmesh", dir);
    snprintf(map_path, sizeof map_path, "%s/map.json", dir);
    FILE *f = fopen(mesh_path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, length, f), length);
    assert_int_equal(fclose(f), 0);
    f = fopen(map_path, "w");
    assert_non_null(f);
    fputs("{\"format\": 1, \"navmesh\": \"arena.navmesh\"}", f);
    assert_int_equal(fclose(f), 0);
    navmesh *prebuilt = space_map_navmesh(map_path, NULL, err, sizeof err);
    assert_non_null(prebuilt);
    size_t np;
    assert_int_equal(navmesh_find_path(prebuilt, start, end, b, MAX_POINTS, &np, why, sizeof why), 0);
    assert_int_equal(np, na);
    assert_memory_equal(a, b, na * 3 * sizeof *a);
    navmesh_free(prebuilt);
    unlink(mesh_path);
    unlink(map_path);
    rmdir(dir);
    /* Bytes that are not a mesh. */
    data[0] ^= 0xff;
    assert_null(navmesh_load(data, length, err, sizeof err));
    assert_non_null(strstr(err, "not a navigation mesh"));
    assert_null(navmesh_load(data, 3, err, sizeof err));
    free(data);
    navmesh_free(copy);
}

static void test_bad_geometry_is_refused(void **state) {
    (void)state;
    char err[256];
    const float vertices[] = {0, 0, 0, 10, 0, 0, 0, 0, 10};
    const int32_t bad[] = {0, 1, 7};
    assert_null(navmesh_build(vertices, 3, bad, 1, NULL, err, sizeof err));
    assert_non_null(strstr(err, "names vertex 7"));
    assert_null(navmesh_build(vertices, 3, bad, 0, NULL, err, sizeof err));
    assert_non_null(strstr(err, "no triangles"));
    /* A wall standing on its edge: nothing to stand on. */
    const float wall[] = {0, 0, 0, 10, 0, 0, 10, 10, 0};
    const int32_t triangle[] = {0, 1, 2};
    assert_null(navmesh_build(wall, 3, triangle, 1, NULL, err, sizeof err));
    assert_non_null(strstr(err, "walkable"));
}

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0); /* a write error shows here */
}

static void test_bad_maps_name_the_key(void **state) {
    (void)state;
    char dir[] = "/tmp/tessera_test_map_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256], err[512];
    snprintf(path, sizeof path, "%s/map.json", dir);
    space_map_geometry g;
    struct {
        const char *text, *needle;
    } cases[] = {
        {"{\"format\": 2}", "format 1"},
        {"{\"format\": 1, \"geometry\": {\"vertices\": [1, 2]}}", "not a multiple of 3"},
        {"{\"format\": 1, \"geometry\": {\"vertices\": [0,0,0], \"triangles\": [0, 0, 5]}}", "triangles[2]"},
        {"{\"format\": 1, \"geometry\": {\"boxes\": [{\"min\": [0,0,0], \"max\": [0,1,1]}]}}", "boxes[0]"},
        {"{\"format\": 1, \"navmesh\": 5}", "\"navmesh\""},
        {"{\"format\": 1,", path},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_file(path, cases[i].text);
        assert_int_equal(space_map_read(path, &g, err, sizeof err), -1);
        if (!strstr(err, cases[i].needle)) fail_msg("case %zu: \"%s\" lacks \"%s\"", i, err, cases[i].needle);
    }
    /* A prebuilt mesh that is not there. */
    write_file(path, "{\"format\": 1, \"navmesh\": \"missing.navmesh\"}");
    assert_null(space_map_navmesh(path, NULL, err, sizeof err));
    assert_non_null(strstr(err, "missing.navmesh"));
    unlink(path);
    rmdir(dir);
}

/* ---- a navigate across three cells ------------------------------------- */

static const char *defs = "{\"format\":1,\"entities\":[{\"name\":\"Walker\",\"properties\":["
                          " {\"name\":\"hp\",\"type\":\"uint8\",\"flags\":\"ALL_CLIENTS\"}]}]}";

typedef struct world {
    cellapp_settings settings;
    cell_shared shared;
    space_layout *layout;
    cell *cells[3]; /* x < -50, -50 .. 50, x >= 50 */
    entity_timer_ids timer_ids;
    int arrived, failed;
} world;

static void on_event(cell *c, cell_entity *entity, controller_event event, uint32_t controller_id, uint64_t user_data,
                     const char *reason, void *context) {
    world *w = context;
    (void)c, (void)entity, (void)controller_id, (void)user_data, (void)reason;
    if (event == CONTROLLER_ARRIVED) w->arrived++;
    if (event == CONTROLLER_FAILED) w->failed++;
}

static int cell_of_x(float x) { return x < -50 ? 0 : x < 50 ? 1 : 2; }

static void test_a_navigate_across_three_cells_arrives(void **state) {
    (void)state;
    world *w = calloc(1, sizeof *w);
    w->settings.tick_hz = 10;
    w->settings.position_precision = 1.0 / 64;
    w->settings.yaw_steps = 256;
    w->shared.settings = &w->settings;
    w->timer_ids = (entity_timer_ids){1, 0};
    w->shared.timer_ids = &w->timer_ids;
    cell_real_install_hooks(&w->shared);
    char err[512];
    assert_int_equal(entity_def_load_string(defs, "test", &w->shared.definitions, err, sizeof err), 0);
    const entity_def_class *cls = entity_def_registry_find_class(w->shared.definitions, "Walker");
    w->shared.schema = replication_schema_create(w->shared.definitions);
    w->shared.replication = replication_create(w->shared.schema);
    bit_writer_init(&w->shared.stream);
    const double min[3] = {-500, -10, -500}, max[3] = {500, 10, 500};
    w->layout = space_layout_create("arena", min, max, false, 1);
    for (int i = 0; i < 3; i++) w->cells[i] = cell_create(&w->shared, w->layout);

    /* West of the western wall (x -104 .. -100, z -150 .. 150) to east of
     * the eastern one: the path goes round both walls' ends. */
    const float start[3] = {-130, 0, 0}, end[3] = {130, 0, 0};
    float points[3 * MAX_POINTS];
    size_t count = 0;
    char why[128];
    assert_int_equal(navmesh_find_path(arena, start, end, points, MAX_POINTS, &count, why, sizeof why), 0);
    assert_true(path_length(points, count) > 400.0); /* 260 straight; round 150 m walls */
    int here = cell_of_x(start[0]);
    cell_entity *e = cell_add(w->cells[here], 7, CELL_ENTITY_REAL, cls, start[0], start[1], start[2]);
    uint32_t id = controller_follow_path(w->cells[here], e, points + 3, count - 1, 8, 0.5f, true, 77);
    assert_true(id > 0);
    int crossings = 0, ticks = 0;
    while (w->arrived == 0 && w->failed == 0 && ticks++ < 2000) {
        controller_tick(w->cells[here], 0.1, on_event, w);
        int next = cell_of_x(e->x);
        if (next == here) continue;
        /* An offload: the whole chain, through the wire, into the next cell. */
        Tessera__Cluster__ControllerState *saved = controller_save(e);
        size_t length = tessera__cluster__controller_state__get_packed_size(saved);
        uint8_t *bytes = malloc(length);
        tessera__cluster__controller_state__pack(saved, bytes);
        controller_saved_free(saved);
        Tessera__Cluster__ControllerState *read = tessera__cluster__controller_state__unpack(NULL, length, bytes);
        free(bytes);
        cell_entity *moved = cell_add(w->cells[next], 7, CELL_ENTITY_REAL, cls, e->x, e->y, e->z);
        cell_move(w->cells[next], moved, e->x, e->y, e->z, e->yaw);
        controller_restore(w->cells[next], moved, read);
        tessera__cluster__controller_state__free_unpacked(read, NULL);
        cell_destroy(w->cells[here], e);
        e = moved;
        here = next;
        crossings++;
    }
    assert_int_equal(w->failed, 0);
    assert_int_equal(w->arrived, 1);
    assert_int_equal(here, 2);
    assert_true(crossings >= 2);
    assert_true(hypot(e->x - end[0], e->z - end[2]) <= 0.5 + 1e-3);
    for (int i = 0; i < 3; i++) cell_free(w->cells[i]);
    space_layout_free(w->layout);
    bit_writer_close(&w->shared.stream);
    replication_free(w->shared.replication);
    replication_schema_free(w->shared.schema);
    entity_def_registry_free(w->shared.definitions);
    free(w);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_path_goes_around_the_wall),
        cmocka_unit_test(test_no_path_into_the_courtyard),
        cmocka_unit_test(test_a_saved_mesh_answers_the_same),
        cmocka_unit_test(test_bad_geometry_is_refused),
        cmocka_unit_test(test_bad_maps_name_the_key),
        cmocka_unit_test(test_a_navigate_across_three_cells_arrives),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
