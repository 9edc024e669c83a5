/* test_space_layout.c -- unit tests for space_layout: one-cell spaces and
 * the names and bounds create refuses; grids (1x1, 2x2, 3x1, 2x3, uneven
 * bounds) with their cell ids, cellapp order, rects, and cell_at inside,
 * on split lines (which go to the high side) and beyond the bounds; the
 * JSON form (round trips compared node by node, hand-written documents,
 * and every error from_json reports, including a tree one level deeper
 * than SPACE_LAYOUT_MAX_DEPTH); space_layout_check and check_owners;
 * cells_near on a 2x2 grid and against a brute-force oracle over random
 * layouts; cell_at against rect_contains; the edits (move_split, assign,
 * split_cell, split_info), each leaving the layout unchanged when it
 * refuses; copy; and space_layout_print.
 *
 * Random layouts are built with space_layout_split_cell on random cells
 * from a fixed xorshift seed, so failures reproduce. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "space_layout.h"

static const double MIN[3] = {-500, -1000, -500};
static const double MAX[3] = {500, 1000, 500};

/* Deterministic generator so failures reproduce (xorshift64*). */
static uint64_t test_rand(uint64_t *s) {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * UINT64_C(0x2545f4914f6cdd1d);
}

/* Uniform in [0, 1). */
static double test_unit(uint64_t *s) { return (double)(test_rand(s) >> 11) / 9007199254740992.0; }

static void assert_close(double a, double b) {
    if (!(fabs(a - b) <= 1e-9 * fmax(1.0, fabs(b)))) fail_msg("%.17g is not %.17g", a, b);
}

static space_layout *parse(const char *json) {
    char err[256] = "";
    space_layout *layout = space_layout_from_json(json, strlen(json), err, sizeof err);
    if (!layout) fail_msg("from_json refused %s: %s", json, err);
    return layout;
}

/* from_json must refuse `json` with an err mentioning each of the words. */
static void assert_parse_fails(const char *json, const char *word, const char *word2) {
    char err[256] = "";
    space_layout *layout = space_layout_from_json(json, strlen(json), err, sizeof err);
    if (layout) {
        space_layout_free(layout);
        fail_msg("from_json accepted %s", json);
    }
    if (!strstr(err, word) || (word2 && !strstr(err, word2)))
        fail_msg("err for %s is \"%s\", which does not mention \"%s\"%s%s", json, err, word, word2 ? " and " : "",
                 word2 ? word2 : "");
}

static void assert_checks(const space_layout *layout) {
    char err[256] = "";
    if (space_layout_check(layout, err, sizeof err) != 0) fail_msg("check refused: %s", err);
}

static void assert_check_fails(const space_layout *layout, const char *word) {
    char err[256] = "";
    assert_int_equal(space_layout_check(layout, err, sizeof err), -1);
    if (!strstr(err, word)) fail_msg("check err \"%s\" does not mention \"%s\"", err, word);
}

static void assert_rect(const space_layout *layout, uint32_t cell, double min_x, double min_z, double max_x,
                        double max_z) {
    space_layout_rect r;
    assert_int_equal(space_layout_rect_of(layout, cell, &r), 0);
    assert_close(r.min_x, min_x);
    assert_close(r.min_z, min_z);
    assert_close(r.max_x, max_x);
    assert_close(r.max_z, max_z);
}

static uint32_t cell_at(const space_layout *layout, double x, double z) {
    const space_layout_node *node = space_layout_cell_at(layout, x, z);
    assert_non_null(node);
    assert_true(node->leaf);
    return node->cell_id;
}

/* The two trees have the same shape and the same fields, node for node. */
static void assert_same_tree(const space_layout *a, int32_t ia, const space_layout *b, int32_t ib) {
    assert_true(ia >= 0 && ia < a->node_count);
    assert_true(ib >= 0 && ib < b->node_count);
    const space_layout_node *na = &a->nodes[ia], *nb = &b->nodes[ib];
    assert_int_equal(na->leaf, nb->leaf);
    if (na->leaf) {
        assert_int_equal(na->cell_id, nb->cell_id);
        assert_int_equal(na->cellapp_id, nb->cellapp_id);
        assert_int_equal(na->retiring, nb->retiring);
        return;
    }
    assert_int_equal(na->axis, nb->axis);
    assert_true(na->at == nb->at);
    assert_true(na->aggression == nb->aggression);
    assert_int_equal(na->direction, nb->direction);
    assert_same_tree(a, na->low, b, nb->low);
    assert_same_tree(a, na->high, b, nb->high);
}

static void assert_same_layout(const space_layout *a, const space_layout *b) {
    assert_string_equal(a->name, b->name);
    assert_int_equal(a->epoch, b->epoch);
    assert_int_equal(a->fence, b->fence);
    assert_int_equal(a->three_d, b->three_d);
    for (int i = 0; i < 3; i++) {
        assert_true(a->min[i] == b->min[i]);
        assert_true(a->max[i] == b->max[i]);
    }
    assert_true(a->spawn_x == b->spawn_x);
    assert_true(a->spawn_z == b->spawn_z);
    assert_true(a->spawn_radius == b->spawn_radius);
    assert_int_equal(a->next_cell_id, b->next_cell_id);
    assert_int_equal(a->node_count, b->node_count);
    assert_int_equal(space_layout_cell_count(a), space_layout_cell_count(b));
    assert_int_equal(space_layout_split_count(a), space_layout_split_count(b));
    assert_true((a->root == SPACE_LAYOUT_NONE) == (b->root == SPACE_LAYOUT_NONE));
    if (a->root != SPACE_LAYOUT_NONE) assert_same_tree(a, a->root, b, b->root);
}

/* to_json, then from_json: the same layout, and the same text again. */
static void assert_round_trip(const space_layout *layout) {
    char *text = space_layout_to_json(layout);
    assert_non_null(text);
    space_layout *back = parse(text);
    assert_same_layout(layout, back);
    char *again = space_layout_to_json(back);
    assert_string_equal(text, again);
    free(again);
    free(text);
    space_layout_free(back);
}

/* A layout of `splits` random cuts of random cells; some cuts sit exactly
 * on the cell's edge (zero-area cells). Cell n goes to cellapp 1000 + n. */
static space_layout *random_layout(uint64_t *seed, const double min[3], const double max[3], int splits) {
    space_layout *layout = space_layout_create("random", min, max, false, 1001);
    assert_non_null(layout);
    char err[256] = "";
    for (int i = 0; i < splits; i++) {
        uint32_t cell = 1 + (uint32_t)(test_rand(seed) % (layout->next_cell_id - 1));
        space_layout_rect r;
        assert_int_equal(space_layout_rect_of(layout, cell, &r), 0);
        space_layout_axis axis = test_rand(seed) & 1 ? SPACE_LAYOUT_AXIS_Z : SPACE_LAYOUT_AXIS_X;
        double low = axis == SPACE_LAYOUT_AXIS_X ? r.min_x : r.min_z;
        double high = axis == SPACE_LAYOUT_AXIS_X ? r.max_x : r.max_z;
        uint64_t pick = test_rand(seed) % 32;
        double at = pick == 0 ? low : pick == 1 ? high : low + (high - low) * test_unit(seed);
        uint32_t new_cell = layout->next_cell_id;
        if (space_layout_split_cell(layout, cell, axis, at, 1000 + new_cell, err, sizeof err) != 0)
            fail_msg("split_cell %u at %g: %s", cell, at, err);
        assert_int_equal(layout->next_cell_id, new_cell + 1);
    }
    assert_int_equal(space_layout_cell_count(layout), (size_t)splits + 1);
    assert_int_equal(space_layout_split_count(layout), (size_t)splits);
    assert_checks(layout);
    return layout;
}

/* A JSON document whose tree is `splits` x-splits deep on the low side,
 * each split's high side a cell: cells 1..splits on the high sides, cell
 * splits + 1 the deepest leaf. */
static char *deep_json(int splits) {
    size_t cap = 128 + (size_t)splits * 96;
    char *text = malloc(cap);
    assert_non_null(text);
    size_t len =
        (size_t)snprintf(text, cap, "{\"name\":\"deep\",\"min\":[-500,-1000,-500],\"max\":[500,1000,500],\"tree\":");
    for (int i = 0; i < splits; i++)
        len += (size_t)snprintf(text + len, cap - len,
                                "{\"split\":\"x\",\"at\":0,\"high\":{\"cell\":%d,\"cellapp\":%d},\"low\":", i + 1,
                                100 + i + 1);
    len += (size_t)snprintf(text + len, cap - len, "{\"cell\":%d,\"cellapp\":%d}", splits + 1, 100 + splits + 1);
    for (int i = 0; i < splits; i++) len += (size_t)snprintf(text + len, cap - len, "}");
    len += (size_t)snprintf(text + len, cap - len, "}");
    assert_true(len < cap);
    return text;
}

/* ---- create ---------------------------------------------------------------- */

static void test_create_one_cell(void **state) {
    space_layout *layout = space_layout_create("default", MIN, MAX, true, 7);
    assert_non_null(layout);
    assert_string_equal(layout->name, "default");
    assert_int_equal(layout->epoch, 0);
    assert_true(layout->three_d);
    assert_int_equal(space_layout_cell_count(layout), 1);
    assert_int_equal(space_layout_split_count(layout), 0);
    assert_int_equal(layout->next_cell_id, 2);
    assert_true(layout->spawn_x == 0 && layout->spawn_z == 0 && layout->spawn_radius == 50);
    for (int i = 0; i < 3; i++) assert_true(layout->min[i] == MIN[i] && layout->max[i] == MAX[i]);
    const space_layout_node *cell = space_layout_find_cell(layout, 1);
    assert_non_null(cell);
    assert_true(cell->leaf);
    assert_int_equal(cell->cellapp_id, 7);
    assert_ptr_equal(space_layout_cell_of(layout, 7), cell);
    assert_null(space_layout_cell_of(layout, 8));
    assert_null(space_layout_find_cell(layout, 2));
    assert_null(space_layout_find_cell(layout, 0));
    assert_rect(layout, 1, -500, -500, 500, 500);
    space_layout_rect r;
    assert_int_equal(space_layout_rect_of(layout, 2, &r), -1);
    assert_int_equal(cell_at(layout, 0, 0), 1);
    assert_int_equal(cell_at(layout, -1e12, 1e12), 1);
    assert_int_equal(cell_at(layout, 500, 500), 1);
    assert_checks(layout);
    assert_round_trip(layout);
    space_layout_free(layout);

    /* Spawn centred, radius capped by half the smaller extent. */
    const double small_min[3] = {0, 0, 0}, small_max[3] = {20, 10, 40};
    layout = space_layout_create("small", small_min, small_max, false, 1);
    assert_non_null(layout);
    assert_true(layout->spawn_x == 10 && layout->spawn_z == 20 && layout->spawn_radius == 10);
    assert_false(layout->three_d);
    assert_checks(layout);
    space_layout_free(layout);

    /* Nobody yet: a valid tree, but check wants an owner. */
    layout = space_layout_create("unowned", MIN, MAX, false, 0);
    assert_non_null(layout);
    assert_check_fails(layout, "no cellapp");
    space_layout_free(layout);

    space_layout_free(NULL);
}

static void test_create_refuses(void **state) {
    char name63[64], name64[65];
    memset(name63, 'a', 63);
    name63[63] = '\0';
    memset(name64, 'b', 64);
    name64[64] = '\0';
    assert_null(space_layout_create(NULL, MIN, MAX, false, 1));
    assert_null(space_layout_create("", MIN, MAX, false, 1));
    assert_null(space_layout_create(name64, MIN, MAX, false, 1));
    space_layout *layout = space_layout_create(name63, MIN, MAX, false, 1);
    assert_non_null(layout);
    assert_string_equal(layout->name, name63);
    space_layout_free(layout);

    for (int axis = 0; axis < 3; axis++) {
        double min[3], max[3];
        const double bad_min[] = {500, 600, NAN, -INFINITY, 0};
        const double bad_max[] = {500, 500, 0, 0, INFINITY};
        for (size_t k = 0; k < sizeof bad_min / sizeof bad_min[0]; k++) {
            memcpy(min, MIN, sizeof min);
            memcpy(max, MAX, sizeof max);
            min[axis] = bad_min[k];
            max[axis] = bad_max[k];
            assert_null(space_layout_create("bad", min, max, false, 1));
            const uint64_t apps[] = {1};
            assert_null(space_layout_create_grid("bad", min, max, false, 1, 1, apps, 1));
        }
    }

    const uint64_t apps[] = {1, 2, 3};
    assert_null(space_layout_create_grid("g", MIN, MAX, false, 0, 2, apps, 3));
    assert_null(space_layout_create_grid("g", MIN, MAX, false, 2, 0, apps, 3));
    assert_null(space_layout_create_grid("g", MIN, MAX, false, 2, 2, apps, 0));
    assert_null(space_layout_create_grid("", MIN, MAX, false, 2, 2, apps, 3));
    assert_null(space_layout_create_grid(NULL, MIN, MAX, false, 2, 2, apps, 3));
    assert_null(space_layout_create_grid("g", MIN, MAX, false, 64, 65, apps, 3));
}

/* ---- grids ----------------------------------------------------------------- */

static void test_grid_1x1(void **state) {
    const uint64_t apps[] = {42, 43};
    space_layout *layout = space_layout_create_grid("one", MIN, MAX, false, 1, 1, apps, 2);
    assert_non_null(layout);
    assert_int_equal(space_layout_cell_count(layout), 1);
    assert_int_equal(space_layout_split_count(layout), 0);
    assert_int_equal(layout->next_cell_id, 2);
    assert_int_equal(space_layout_find_cell(layout, 1)->cellapp_id, 42);
    assert_rect(layout, 1, -500, -500, 500, 500);
    assert_int_equal(cell_at(layout, 123, -456), 1);
    space_layout_axis axis;
    double at, lo, hi;
    assert_int_equal(space_layout_split_info(layout, 0, &axis, &at, &lo, &hi), -1);
    assert_checks(layout);
    assert_round_trip(layout);
    space_layout_free(layout);
}

static void test_grid_2x2(void **state) {
    const uint64_t apps[] = {7, 8, 9, 10};
    space_layout *layout = space_layout_create_grid("grid", MIN, MAX, false, 2, 2, apps, 4);
    assert_non_null(layout);
    assert_int_equal(space_layout_cell_count(layout), 4);
    assert_int_equal(space_layout_split_count(layout), 3);
    assert_int_equal(layout->next_cell_id, 5);
    for (uint32_t id = 1; id <= 4; id++) {
        const space_layout_node *cell = space_layout_find_cell(layout, id);
        assert_non_null(cell);
        assert_int_equal(cell->cellapp_id, 6 + id);
        assert_ptr_equal(space_layout_cell_of(layout, 6 + id), cell);
    }
    assert_null(space_layout_find_cell(layout, 5));
    /* Column-major from the low corner. */
    assert_rect(layout, 1, -500, -500, 0, 0);
    assert_rect(layout, 2, -500, 0, 0, 500);
    assert_rect(layout, 3, 0, -500, 500, 0);
    assert_rect(layout, 4, 0, 0, 500, 500);

    /* Splits in pre-order: the X line, then the low column's Z line, then
     * the high column's. */
    space_layout_axis axis;
    double at, lo, hi;
    assert_int_equal(space_layout_split_info(layout, 0, &axis, &at, &lo, &hi), 0);
    assert_int_equal(axis, SPACE_LAYOUT_AXIS_X);
    assert_true(at == 0 && lo == -500 && hi == 500);
    assert_int_equal(space_layout_split_info(layout, 1, &axis, &at, &lo, &hi), 0);
    assert_int_equal(axis, SPACE_LAYOUT_AXIS_Z);
    assert_true(at == 0 && lo == -500 && hi == 500);
    assert_int_equal(space_layout_split_info(layout, 2, &axis, &at, &lo, &hi), 0);
    assert_int_equal(axis, SPACE_LAYOUT_AXIS_Z);
    assert_int_equal(space_layout_split_info(layout, 3, &axis, &at, &lo, &hi), -1);

    /* Quadrants. */
    assert_int_equal(cell_at(layout, -250, -250), 1);
    assert_int_equal(cell_at(layout, -250, 250), 2);
    assert_int_equal(cell_at(layout, 250, -250), 3);
    assert_int_equal(cell_at(layout, 250, 250), 4);
    /* On the lines: coordinate == at goes high. */
    assert_int_equal(cell_at(layout, 0, -250), 3);
    assert_int_equal(cell_at(layout, 0, 250), 4);
    assert_int_equal(cell_at(layout, -250, 0), 2);
    assert_int_equal(cell_at(layout, 250, 0), 4);
    assert_int_equal(cell_at(layout, 0, 0), 4);
    assert_int_equal(cell_at(layout, -0.0, -0.0), 4);
    assert_int_equal(cell_at(layout, -1e-9, -1e-9), 1);
    /* On the bounds and beyond: the nearest edge's cell. */
    assert_int_equal(cell_at(layout, -500, -500), 1);
    assert_int_equal(cell_at(layout, 500, 500), 4);
    assert_int_equal(cell_at(layout, -900, -900), 1);
    assert_int_equal(cell_at(layout, -900, 900), 2);
    assert_int_equal(cell_at(layout, 900, -900), 3);
    assert_int_equal(cell_at(layout, 900, 900), 4);
    assert_int_equal(cell_at(layout, 1e300, -250), 3);
    assert_int_equal(cell_at(layout, -250, -INFINITY), 1);
    assert_int_equal(cell_at(layout, -1e9, 10), 2);
    assert_int_equal(cell_at(layout, 10, -1e9), 3);

    assert_checks(layout);
    assert_round_trip(layout);
    space_layout_free(layout);
}

static void test_grid_3x1(void **state) {
    const uint64_t apps[] = {31, 32, 33};
    space_layout *layout = space_layout_create_grid("row", MIN, MAX, true, 3, 1, apps, 3);
    assert_non_null(layout);
    assert_int_equal(space_layout_cell_count(layout), 3);
    assert_int_equal(space_layout_split_count(layout), 2);
    assert_int_equal(layout->next_cell_id, 4);
    for (uint32_t id = 1; id <= 3; id++) assert_int_equal(space_layout_find_cell(layout, id)->cellapp_id, 30 + id);

    space_layout_axis axis;
    double at0, at1, lo, hi;
    assert_int_equal(space_layout_split_info(layout, 0, &axis, &at0, &lo, &hi), 0);
    assert_int_equal(axis, SPACE_LAYOUT_AXIS_X);
    assert_close(at0, -500 + 1000.0 / 3);
    assert_true(lo == -500 && hi == 500);
    assert_int_equal(space_layout_split_info(layout, 1, &axis, &at1, &lo, &hi), 0);
    assert_int_equal(axis, SPACE_LAYOUT_AXIS_X);
    assert_close(at1, 500 - 1000.0 / 3);
    assert_true(lo == at0 && hi == 500);
    assert_int_equal(space_layout_split_info(layout, 2, &axis, &at1, &lo, &hi), -1);
    assert_int_equal(space_layout_split_info(layout, 1, &axis, &at1, &lo, &hi), 0);

    assert_rect(layout, 1, -500, -500, at0, 500);
    assert_rect(layout, 2, at0, -500, at1, 500);
    assert_rect(layout, 3, at1, -500, 500, 500);
    assert_int_equal(cell_at(layout, -200, 0), 1);
    assert_int_equal(cell_at(layout, 0, 0), 2);
    assert_int_equal(cell_at(layout, 200, 499), 3);
    assert_int_equal(cell_at(layout, at0, 0), 2);
    assert_int_equal(cell_at(layout, nextafter(at0, -INFINITY), 0), 1);
    assert_int_equal(cell_at(layout, at1, -499), 3);
    assert_int_equal(cell_at(layout, nextafter(at1, -INFINITY), 0), 2);
    assert_int_equal(cell_at(layout, -600, 1e6), 1);
    assert_int_equal(cell_at(layout, 0, -1e6), 2);
    assert_int_equal(cell_at(layout, 600, 0), 3);
    assert_checks(layout);
    assert_round_trip(layout);
    space_layout_free(layout);
}

static void test_grid_other_shapes(void **state) {
    /* 2 columns of 3 rows over uneven bounds. */
    const double min[3] = {0, 0, 0}, max[3] = {60, 10, 90};
    const uint64_t apps[] = {1, 2, 3, 4, 5, 6};
    space_layout *layout = space_layout_create_grid("cols", min, max, false, 2, 3, apps, 6);
    assert_non_null(layout);
    assert_int_equal(space_layout_cell_count(layout), 6);
    assert_rect(layout, 1, 0, 0, 30, 30);
    assert_rect(layout, 2, 0, 30, 30, 60);
    assert_rect(layout, 3, 0, 60, 30, 90);
    assert_rect(layout, 4, 30, 0, 60, 30);
    assert_rect(layout, 5, 30, 30, 60, 60);
    assert_rect(layout, 6, 30, 60, 60, 90);
    for (uint32_t id = 1; id <= 6; id++) {
        space_layout_rect r;
        assert_int_equal(space_layout_rect_of(layout, id, &r), 0);
        assert_int_equal(cell_at(layout, (r.min_x + r.max_x) / 2, (r.min_z + r.max_z) / 2), id);
        assert_int_equal(cell_at(layout, r.min_x, r.min_z), id);
        assert_int_equal(space_layout_find_cell(layout, id)->cellapp_id, id);
    }
    assert_checks(layout);
    assert_round_trip(layout);
    space_layout_free(layout);

    /* Fewer cellapps than cells: they wrap around, and check objects. */
    const uint64_t two[] = {7, 8};
    layout = space_layout_create_grid("wrap", MIN, MAX, false, 2, 2, two, 2);
    assert_non_null(layout);
    assert_int_equal(space_layout_find_cell(layout, 1)->cellapp_id, 7);
    assert_int_equal(space_layout_find_cell(layout, 2)->cellapp_id, 8);
    assert_int_equal(space_layout_find_cell(layout, 3)->cellapp_id, 7);
    assert_int_equal(space_layout_find_cell(layout, 4)->cellapp_id, 8);
    assert_check_fails(layout, "at most one");
    space_layout_free(layout);

    /* A large grid: 8x8, every cell's centre finds it. */
    uint64_t many[64];
    for (int i = 0; i < 64; i++) many[i] = 500 + (uint64_t)i;
    layout = space_layout_create_grid("big", MIN, MAX, false, 8, 8, many, 64);
    assert_non_null(layout);
    assert_int_equal(space_layout_cell_count(layout), 64);
    assert_int_equal(space_layout_split_count(layout), 63);
    for (uint32_t id = 1; id <= 64; id++) {
        uint32_t column = (id - 1) / 8, row = (id - 1) % 8;
        assert_rect(layout, id, -500 + 125.0 * column, -500 + 125.0 * row, -500 + 125.0 * (column + 1),
                    -500 + 125.0 * (row + 1));
        assert_int_equal(cell_at(layout, -500 + 125.0 * column + 60, -500 + 125.0 * row + 60), id);
        assert_int_equal(space_layout_find_cell(layout, id)->cellapp_id, 499 + id);
    }
    assert_checks(layout);
    assert_round_trip(layout);
    space_layout_free(layout);
}

/* ---- JSON ------------------------------------------------------------------ */

static void test_json_round_trip(void **state) {
    const uint64_t apps[] = {7, 8, 9, 10};
    space_layout *layout = space_layout_create_grid("grid", MIN, MAX, true, 2, 2, apps, 4);
    layout->epoch = UINT64_C(123456789012);
    layout->spawn_x = -12.25;
    layout->spawn_z = 33.125;
    layout->spawn_radius = 7.5;
    layout->next_cell_id = 17;
    assert_round_trip(layout);
    space_layout_free(layout);

    /* The largest epoch and cellapp ids the form holds exactly. */
    layout = space_layout_create("big", MIN, MAX, false, (uint64_t)1 << 53);
    layout->epoch = (UINT64_C(1) << 53) - 1;
    assert_round_trip(layout);
    space_layout_free(layout);

    /* Doubles that 15 significant digits do not hold: each must come back
     * bit for bit, while short ones stay short. */
    char err[256] = "";
    layout = space_layout_create("ulp", MIN, MAX, false, 1);
    assert_int_equal(space_layout_split_cell(layout, 1, SPACE_LAYOUT_AXIS_X, -302.44863070661603, 2, err, sizeof err),
                     0);
    assert_int_equal(space_layout_split_cell(layout, 2, SPACE_LAYOUT_AXIS_Z, 0.1 + 0.2, 3, err, sizeof err), 0);
    layout->spawn_x = -99.055605753816508;
    layout->spawn_radius = 1.0 / 3;
    assert_round_trip(layout);
    char *text = space_layout_to_json(layout);
    assert_non_null(strstr(text, "\"at\":-302.44863070661603"));
    assert_non_null(strstr(text, "\"at\":0.30000000000000004"));
    assert_non_null(strstr(text, "\"min\":[-500,-1000,-500]"));
    assert_non_null(strstr(text, "\"cellapp\":3"));
    free(text);
    space_layout_free(layout);

    /* Random layouts with split positions of full precision, some cells of
     * zero area, and nodes stored out of pre-order. */
    uint64_t seed = 0x5eed1234abcdULL;
    const double min[3] = {-1234.5, -10, 77.0 / 3}, max[3] = {8765.25, 10, 1e4 / 7};
    for (int round = 0; round < 8; round++) {
        space_layout *random = random_layout(&seed, round & 1 ? min : MIN, round & 1 ? max : MAX, 10 + round * 9);
        random->epoch = test_rand(&seed) >> 12;
        random->three_d = round & 2;
        assert_round_trip(random);
        space_layout *copy = space_layout_copy(random);
        assert_same_layout(random, copy);
        space_layout_free(copy);
        space_layout_free(random);
    }
}

static void test_json_hand_written(void **state) {
    /* The example from space_layout.h. */
    space_layout *layout = parse("{\"name\": \"default\", \"epoch\": 3, \"three_d\": false,\n"
                                 " \"min\": [-500, -1000, -500], \"max\": [500, 1000, 500],\n"
                                 " \"spawn\": {\"x\": 0, \"z\": 0, \"radius\": 50}, \"next_cell\": 5,\n"
                                 " \"tree\": {\"split\": \"x\", \"at\": 0,\n"
                                 "          \"low\":  {\"cell\": 1, \"cellapp\": 7},\n"
                                 "          \"high\": {\"split\": \"z\", \"at\": 0.5,\n"
                                 "                     \"low\": {\"cell\": 2, \"cellapp\": 8},\n"
                                 "                     \"high\": {\"cell\": 3, \"cellapp\": 9}}}}");
    assert_string_equal(layout->name, "default");
    assert_int_equal(layout->epoch, 3);
    assert_false(layout->three_d);
    assert_int_equal(layout->next_cell_id, 5);
    assert_true(layout->spawn_x == 0 && layout->spawn_z == 0 && layout->spawn_radius == 50);
    assert_int_equal(space_layout_cell_count(layout), 3);
    assert_int_equal(space_layout_split_count(layout), 2);
    assert_rect(layout, 1, -500, -500, 0, 500);
    assert_rect(layout, 2, 0, -500, 500, 0.5);
    assert_rect(layout, 3, 0, 0.5, 500, 500);
    assert_int_equal(cell_at(layout, -1, 0), 1);
    assert_int_equal(cell_at(layout, 10, 0.4), 2);
    assert_int_equal(cell_at(layout, 10, 0.5), 3);
    assert_int_equal(space_layout_find_cell(layout, 3)->cellapp_id, 9);
    space_layout_axis axis;
    double at, lo, hi;
    assert_int_equal(space_layout_split_info(layout, 1, &axis, &at, &lo, &hi), 0);
    assert_int_equal(axis, SPACE_LAYOUT_AXIS_Z);
    assert_true(at == 0.5 && lo == -500 && hi == 500);
    assert_checks(layout);
    assert_round_trip(layout);
    char *written = space_layout_to_json(layout);
    assert_non_null(strstr(written, "\"at\":0.5,"));
    assert_non_null(strstr(written, "\"spawn\":{\"x\":0,\"z\":0,\"radius\":50}"));
    assert_non_null(strstr(written, "\"epoch\":3,"));
    free(written);
    space_layout_free(layout);

    /* Only what is required: defaults for the rest. */
    layout = parse("{\"name\":\"bare\",\"min\":[0,0,0],\"max\":[200,50,100],\"tree\":{\"cell\":4,\"cellapp\":2}}");
    assert_int_equal(layout->epoch, 0);
    assert_false(layout->three_d);
    assert_true(layout->spawn_x == 100 && layout->spawn_z == 50 && layout->spawn_radius == 50);
    assert_int_equal(layout->next_cell_id, 5);
    assert_int_equal(cell_at(layout, 1, 1), 4);
    assert_checks(layout);
    space_layout_free(layout);

    /* A next_cell not above the highest cell is raised past it; three_d. */
    layout = parse("{\"name\":\"n\",\"three_d\":true,\"next_cell\":2,\"min\":[0,0,0],\"max\":[1,1,1],"
                   "\"tree\":{\"split\":\"z\",\"at\":0.25,\"low\":{\"cell\":9,\"cellapp\":1},"
                   "\"high\":{\"cell\":3,\"cellapp\":2}}}");
    assert_true(layout->three_d);
    assert_int_equal(layout->next_cell_id, 10);
    assert_int_equal(cell_at(layout, 0.5, 0.1), 9);
    assert_int_equal(cell_at(layout, 0.5, 0.25), 3);
    assert_rect(layout, 9, 0, 0, 1, 0.25);
    assert_checks(layout);
    space_layout_free(layout);

    /* A cellapp of 0 reads (nobody yet) but does not check. */
    layout = parse("{\"name\":\"z\",\"min\":[0,0,0],\"max\":[1,1,1],\"tree\":{\"cell\":1,\"cellapp\":0}}");
    assert_int_equal(space_layout_find_cell(layout, 1)->cellapp_id, 0);
    assert_check_fails(layout, "no cellapp");
    space_layout_free(layout);

    /* Exactly SPACE_LAYOUT_MAX_DEPTH splits deep is allowed. */
    char *text = deep_json(SPACE_LAYOUT_MAX_DEPTH);
    layout = parse(text);
    free(text);
    assert_int_equal(space_layout_split_count(layout), SPACE_LAYOUT_MAX_DEPTH);
    assert_int_equal(space_layout_cell_count(layout), SPACE_LAYOUT_MAX_DEPTH + 1);
    assert_int_equal(cell_at(layout, -1, 0), SPACE_LAYOUT_MAX_DEPTH + 1);
    assert_int_equal(cell_at(layout, 1, 0), 1);
    assert_checks(layout);
    assert_round_trip(layout);
    space_layout_free(layout);
}

static void test_json_errors(void **state) {
    assert_parse_fails("{\"name\": ", "invalid JSON", NULL);
    assert_parse_fails("", "invalid JSON", NULL);
    assert_parse_fails("{\"name\":\"a\"} trailing", "invalid JSON", NULL);
    assert_parse_fails("[1, 2, 3]", "object", NULL);
    assert_parse_fails("{\"min\":[0,0,0],\"max\":[1,1,1],\"tree\":{\"cell\":1,\"cellapp\":1}}", "name", NULL);
    assert_parse_fails("{\"name\":\"\",\"min\":[0,0,0],\"max\":[1,1,1],\"tree\":{\"cell\":1,\"cellapp\":1}}", "name",
                       NULL);
    assert_parse_fails("{\"name\":5,\"min\":[0,0,0],\"max\":[1,1,1],\"tree\":{\"cell\":1,\"cellapp\":1}}", "name",
                       NULL);
    assert_parse_fails("{\"name\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\","
                       "\"min\":[0,0,0],\"max\":[1,1,1],\"tree\":{\"cell\":1,\"cellapp\":1}}",
                       "name", NULL);
    /* Bounds. */
    assert_parse_fails("{\"name\":\"s\",\"max\":[1,1,1],\"tree\":{\"cell\":1,\"cellapp\":1}}", "min", NULL);
    assert_parse_fails("{\"name\":\"s\",\"min\":[0,0],\"max\":[1,1,1],\"tree\":{\"cell\":1,\"cellapp\":1}}", "min",
                       "s'");
    assert_parse_fails("{\"name\":\"s\",\"min\":[0,0,0],\"max\":[1,1,1,1],\"tree\":{\"cell\":1,\"cellapp\":1}}", "max",
                       NULL);
    assert_parse_fails("{\"name\":\"s\",\"min\":[0,\"0\",0],\"max\":[1,1,1],\"tree\":{\"cell\":1,\"cellapp\":1}}",
                       "min", NULL);
    assert_parse_fails("{\"name\":\"s\",\"min\":{},\"max\":[1,1,1],\"tree\":{\"cell\":1,\"cellapp\":1}}", "min", NULL);
    assert_parse_fails("{\"name\":\"s\",\"min\":[0,0,0],\"max\":[1,0,1],\"tree\":{\"cell\":1,\"cellapp\":1}}", "below",
                       NULL);
    assert_parse_fails("{\"name\":\"s\",\"min\":[0,0,5],\"max\":[1,1,1],\"tree\":{\"cell\":1,\"cellapp\":1}}", "below",
                       NULL);
    /* Spawn. */
    assert_parse_fails("{\"name\":\"s\",\"min\":[0,0,0],\"max\":[1,1,1],\"spawn\":{\"x\":0,\"z\":0},"
                       "\"tree\":{\"cell\":1,\"cellapp\":1}}",
                       "spawn", NULL);
    assert_parse_fails("{\"name\":\"s\",\"min\":[0,0,0],\"max\":[1,1,1],\"spawn\":3,"
                       "\"tree\":{\"cell\":1,\"cellapp\":1}}",
                       "spawn", NULL);
    /* The tree. */
    assert_parse_fails("{\"name\":\"s\",\"min\":[0,0,0],\"max\":[1,1,1]}", "tree", "not an object");
    assert_parse_fails("{\"name\":\"s\",\"min\":[0,0,0],\"max\":[1,1,1],\"tree\":[]}", "tree", NULL);
    assert_parse_fails("{\"name\":\"s\",\"min\":[-1,0,-1],\"max\":[1,1,1],\"tree\":{\"split\":\"y\",\"at\":0,"
                       "\"low\":{\"cell\":1,\"cellapp\":1},\"high\":{\"cell\":2,\"cellapp\":2}}}",
                       "\"split\" must be", "tree:");
    assert_parse_fails("{\"name\":\"s\",\"min\":[-1,0,-1],\"max\":[1,1,1],\"tree\":{\"split\":0,\"at\":0,"
                       "\"low\":{\"cell\":1,\"cellapp\":1},\"high\":{\"cell\":2,\"cellapp\":2}}}",
                       "split", NULL);
    assert_parse_fails("{\"name\":\"s\",\"min\":[-1,0,-1],\"max\":[1,1,1],\"tree\":{\"split\":\"X\",\"at\":0,"
                       "\"low\":{\"cell\":1,\"cellapp\":1},\"high\":{\"cell\":2,\"cellapp\":2}}}",
                       "split", NULL);
    /* The path names the node. */
    assert_parse_fails("{\"name\":\"s\",\"min\":[-1,0,-1],\"max\":[1,1,1],\"tree\":{\"split\":\"x\",\"at\":0,"
                       "\"low\":{\"cell\":1,\"cellapp\":1},\"high\":{\"split\":\"q\",\"at\":0,"
                       "\"low\":{\"cell\":2,\"cellapp\":2},\"high\":{\"cell\":3,\"cellapp\":3}}}}",
                       "tree.high:", "split");
    assert_parse_fails("{\"name\":\"s\",\"min\":[-1,0,-1],\"max\":[1,1,1],\"tree\":{\"split\":\"x\","
                       "\"low\":{\"cell\":1,\"cellapp\":1},\"high\":{\"cell\":2,\"cellapp\":2}}}",
                       "\"at\"", NULL);
    assert_parse_fails("{\"name\":\"s\",\"min\":[-1,0,-1],\"max\":[1,1,1],\"tree\":{\"split\":\"x\",\"at\":\"0\","
                       "\"low\":{\"cell\":1,\"cellapp\":1},\"high\":{\"cell\":2,\"cellapp\":2}}}",
                       "\"at\"", NULL);
    assert_parse_fails("{\"name\":\"s\",\"min\":[-1,0,-1],\"max\":[1,1,1],\"tree\":{\"split\":\"x\",\"at\":0,"
                       "\"high\":{\"cell\":2,\"cellapp\":2}}}",
                       "tree.low", "not an object");
    assert_parse_fails("{\"name\":\"s\",\"min\":[-1,0,-1],\"max\":[1,1,1],\"tree\":{\"split\":\"x\",\"at\":0,"
                       "\"low\":{\"cell\":1,\"cellapp\":1}}}",
                       "tree.high", "not an object");
    assert_parse_fails("{\"name\":\"s\",\"min\":[-1,0,-1],\"max\":[1,1,1],\"tree\":{\"split\":\"x\",\"at\":0,"
                       "\"low\":{\"cell\":1},\"high\":{\"cell\":2,\"cellapp\":2}}}",
                       "cellapp", "tree.low");
    assert_parse_fails("{\"name\":\"s\",\"min\":[0,0,0],\"max\":[1,1,1],\"tree\":{\"cell\":1,\"cellapp\":-3}}",
                       "cellapp", NULL);
    assert_parse_fails("{\"name\":\"s\",\"min\":[0,0,0],\"max\":[1,1,1],\"tree\":{\"cell\":1,\"cellapp\":1.5}}",
                       "cellapp", NULL);
    assert_parse_fails("{\"name\":\"s\",\"min\":[0,0,0],\"max\":[1,1,1],\"tree\":{\"cell\":1,\"cellapp\":1e300}}",
                       "cellapp", NULL);
    assert_parse_fails("{\"name\":\"s\",\"min\":[0,0,0],\"max\":[1,1,1],\"tree\":{\"cell\":0,\"cellapp\":1}}",
                       "\"cell\"", "from 1");
    assert_parse_fails("{\"name\":\"s\",\"min\":[0,0,0],\"max\":[1,1,1],\"tree\":{\"cellapp\":1}}", "\"cell\"", NULL);
    assert_parse_fails("{\"name\":\"s\",\"min\":[0,0,0],\"max\":[1,1,1],\"tree\":{\"cell\":-1,\"cellapp\":1}}",
                       "\"cell\"", NULL);
    assert_parse_fails("{\"name\":\"s\",\"min\":[0,0,0],\"max\":[1,1,1],\"tree\":{\"cell\":2.5,\"cellapp\":1}}",
                       "\"cell\"", NULL);
    assert_parse_fails("{\"name\":\"s\",\"min\":[0,0,0],\"max\":[1,1,1],\"tree\":{\"cell\":4294967296,"
                       "\"cellapp\":1}}",
                       "\"cell\"", NULL);

    /* One level deeper than allowed. */
    char *text = deep_json(SPACE_LAYOUT_MAX_DEPTH + 1);
    assert_parse_fails(text, "deeper", NULL);
    free(text);
    /* Far deeper (cJSON's own nesting limit or ours, never the stack). */
    text = deep_json(2000);
    char err[256] = "";
    assert_null(space_layout_from_json(text, strlen(text), err, sizeof err));
    assert_true(err[0] != '\0');
    free(text);

    /* A tiny err buffer truncates but never overflows. */
    char tiny[8];
    const char *bad = "{\"min\":[0,0,0]}";
    memset(tiny, 'x', sizeof tiny);
    assert_null(space_layout_from_json(bad, strlen(bad), tiny, sizeof tiny));
    assert_int_equal(strlen(tiny), sizeof tiny - 1);
}

/* ---- check ----------------------------------------------------------------- */

static bool alive_unless(uint64_t cellapp_id, void *context) { return cellapp_id != *(const uint64_t *)context; }

static void test_check(void **state) {
    const uint64_t apps[] = {7, 8, 9, 10};
    space_layout *layout = space_layout_create_grid("grid", MIN, MAX, false, 2, 2, apps, 4);
    assert_checks(layout);

    /* Owners: all alive, then one dead. */
    char err[256] = "";
    uint64_t dead = 99;
    assert_int_equal(space_layout_check_owners(layout, alive_unless, &dead, err, sizeof err), 0);
    dead = 9;
    assert_int_equal(space_layout_check_owners(layout, alive_unless, &dead, err, sizeof err), -1);
    assert_non_null(strstr(err, "cell 3"));
    assert_non_null(strstr(err, "cellapp 9"));

    /* next_cell must lie above every cell. */
    layout->next_cell_id = 4;
    assert_check_fails(layout, "next_cell");
    layout->next_cell_id = 5;
    assert_checks(layout);

    /* Spawn disc: inside, touching an edge, outside, negative. */
    layout->spawn_x = 450;
    layout->spawn_radius = 50;
    assert_checks(layout);
    layout->spawn_x = 480;
    assert_check_fails(layout, "spawn");
    layout->spawn_x = 0;
    layout->spawn_z = -470;
    assert_check_fails(layout, "spawn");
    layout->spawn_z = 0;
    layout->spawn_radius = -1;
    assert_check_fails(layout, "spawn");
    layout->spawn_radius = NAN;
    assert_check_fails(layout, "spawn");
    layout->spawn_radius = 0;
    assert_checks(layout);

    /* Bounds changed under it. */
    layout->max[1] = layout->min[1];
    assert_check_fails(layout, "below");
    layout->max[1] = 1000;

    /* A split pushed outside its region behind the edits' back. */
    layout->nodes[layout->root].at = 600;
    assert_check_fails(layout, "outside");
    layout->nodes[layout->root].at = 0;
    assert_checks(layout);

    /* A cell that nobody owns. */
    ((space_layout_node *)space_layout_find_cell(layout, 2))->cellapp_id = 0;
    assert_check_fails(layout, "cell 2 has no cellapp");
    ((space_layout_node *)space_layout_find_cell(layout, 2))->cellapp_id = 8;

    /* A child index outside the node array, and a cycle. */
    int32_t high = layout->nodes[layout->root].high;
    layout->nodes[layout->root].high = layout->node_count;
    assert_check_fails(layout, "broken");
    layout->nodes[layout->root].high = layout->root;
    assert_check_fails(layout, "broken");
    layout->nodes[layout->root].high = high;
    assert_checks(layout);
    space_layout_free(layout);

    /* From JSON: a nested split outside the region its parent leaves it. */
    layout = parse("{\"name\":\"s\",\"min\":[-500,0,-500],\"max\":[500,1,500],\"tree\":{\"split\":\"x\",\"at\":0,"
                   "\"low\":{\"split\":\"x\",\"at\":100,\"low\":{\"cell\":1,\"cellapp\":1},"
                   "\"high\":{\"cell\":2,\"cellapp\":2}},\"high\":{\"cell\":3,\"cellapp\":3}}}");
    assert_check_fails(layout, "outside its region");
    space_layout_free(layout);
    layout = parse("{\"name\":\"s\",\"min\":[-500,0,-500],\"max\":[500,1,500],\"tree\":{\"split\":\"z\",\"at\":-501,"
                   "\"low\":{\"cell\":1,\"cellapp\":1},\"high\":{\"cell\":2,\"cellapp\":2}}}");
    assert_check_fails(layout, "outside");
    space_layout_free(layout);

    /* Two cells on one cellapp. */
    layout = parse("{\"name\":\"s\",\"min\":[-500,0,-500],\"max\":[500,1,500],\"tree\":{\"split\":\"x\",\"at\":0,"
                   "\"low\":{\"cell\":1,\"cellapp\":5},\"high\":{\"cell\":2,\"cellapp\":5}}}");
    assert_check_fails(layout, "at most one");
    space_layout_free(layout);

    /* Two cells with one id. */
    layout = parse("{\"name\":\"s\",\"min\":[-500,0,-500],\"max\":[500,1,500],\"tree\":{\"split\":\"x\",\"at\":0,"
                   "\"low\":{\"cell\":1,\"cellapp\":5},\"high\":{\"cell\":1,\"cellapp\":6}}}");
    assert_check_fails(layout, "two cells have id 1");
    space_layout_free(layout);

    /* A cell with cellapp 0 deep in the tree. */
    layout = parse("{\"name\":\"s\",\"min\":[-500,0,-500],\"max\":[500,1,500],\"tree\":{\"split\":\"x\",\"at\":0,"
                   "\"low\":{\"cell\":1,\"cellapp\":5},\"high\":{\"cell\":2,\"cellapp\":0}}}");
    assert_check_fails(layout, "no cellapp");
    space_layout_free(layout);

    /* A spawn disc outside the bounds. */
    layout = parse("{\"name\":\"s\",\"min\":[-500,0,-500],\"max\":[500,1,500],"
                   "\"spawn\":{\"x\":480,\"z\":0,\"radius\":50},\"tree\":{\"cell\":1,\"cellapp\":1}}");
    assert_check_fails(layout, "spawn");
    space_layout_free(layout);

    /* Splits on their region's edges leave zero-area cells, which is fine. */
    layout = parse("{\"name\":\"s\",\"min\":[-500,0,-500],\"max\":[500,1,500],\"tree\":{\"split\":\"x\",\"at\":500,"
                   "\"low\":{\"split\":\"z\",\"at\":-500,\"low\":{\"cell\":1,\"cellapp\":1},"
                   "\"high\":{\"cell\":2,\"cellapp\":2}},\"high\":{\"cell\":3,\"cellapp\":3}}}");
    assert_checks(layout);
    assert_int_equal(cell_at(layout, 0, 0), 2);
    assert_int_equal(cell_at(layout, 499, -500), 2);
    /* A zero-width cell at the far edge takes nothing, not even the
     * points on the edge or beyond it (a retiring cell squeezed there must
     * empty); at the near edge a point below the bounds (never a real's
     * position) falls to the low side. */
    assert_int_equal(cell_at(layout, 500, 0), 2);
    assert_int_equal(cell_at(layout, 600, 0), 2);
    assert_int_equal(cell_at(layout, 0, -600), 1);
    assert_rect(layout, 1, -500, -500, 500, -500);
    assert_rect(layout, 3, 500, -500, 500, 500);
    space_layout_free(layout);

    /* Owners checked on a layout read from JSON: the first dead one named. */
    layout = parse("{\"name\":\"s\",\"min\":[-500,0,-500],\"max\":[500,1,500],\"tree\":{\"split\":\"x\",\"at\":0,"
                   "\"low\":{\"cell\":4,\"cellapp\":40},\"high\":{\"cell\":6,\"cellapp\":60}}}");
    dead = 60;
    assert_int_equal(space_layout_check_owners(layout, alive_unless, &dead, err, sizeof err), -1);
    assert_non_null(strstr(err, "cell 6"));
    assert_non_null(strstr(err, "60"));
    dead = 0;
    assert_int_equal(space_layout_check_owners(layout, alive_unless, &dead, err, sizeof err), 0);
    space_layout_free(layout);
}

/* ---- geometry -------------------------------------------------------------- */

static void test_rect_helpers(void **state) {
    const space_layout_rect r = {0, 0, 10, 20};
    assert_true(space_layout_rect_contains(&r, 0, 0));
    assert_true(space_layout_rect_contains(&r, 9.999, 19.999));
    assert_false(space_layout_rect_contains(&r, 10, 5));
    assert_false(space_layout_rect_contains(&r, 5, 20));
    assert_false(space_layout_rect_contains(&r, -0.001, 5));
    assert_false(space_layout_rect_contains(&r, NAN, 5));
    assert_true(space_layout_rect_distance(&r, 5, 5) == 0);
    assert_true(space_layout_rect_distance(&r, 10, 20) == 0);
    assert_true(space_layout_rect_distance(&r, 15, 5) == 5);
    assert_true(space_layout_rect_distance(&r, -3, 30) == 10);
    assert_true(space_layout_rect_distance(&r, 13, 24) == 4);
    assert_true(space_layout_rect_distance(&r, -7, -2) == 7);
    const space_layout_rect open = {-INFINITY, 0, 10, INFINITY};
    assert_true(space_layout_rect_distance(&open, -1e300, 1e300) == 0);
    assert_true(space_layout_rect_distance(&open, 12, -1) == 2);
    assert_string_equal(space_layout_axis_name(SPACE_LAYOUT_AXIS_X), "x");
    assert_string_equal(space_layout_axis_name(SPACE_LAYOUT_AXIS_Z), "z");
}

/* The ids cells_near returns, sorted, into ids; returns the count. */
static size_t near_ids(const space_layout *layout, double x, double z, double d, uint32_t *ids, size_t cap) {
    const space_layout_node *out[256];
    assert_true(cap <= 256);
    size_t n = space_layout_cells_near(layout, x, z, d, out, cap);
    assert_true(n <= cap);
    for (size_t i = 0; i < n; i++) {
        assert_true(out[i]->leaf);
        ids[i] = out[i]->cell_id;
    }
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && ids[j - 1] > ids[j]; j--) {
            uint32_t t = ids[j];
            ids[j] = ids[j - 1];
            ids[j - 1] = t;
        }
    return n;
}

static void test_cells_near_grid(void **state) {
    const uint64_t apps[] = {7, 8, 9, 10};
    space_layout *layout = space_layout_create_grid("grid", MIN, MAX, false, 2, 2, apps, 4);
    uint32_t ids[8];

    /* The square [50, 150]^2 lies in cell 4 alone. */
    assert_int_equal(near_ids(layout, 100, 100, 50, ids, 8), 1);
    assert_int_equal(ids[0], 4);
    /* Distance is Chebyshev: at 150 the square [-50, 250]^2 crosses both
     * lines, so it meets the diagonal cell as well (its distance is
     * max(100, 100) = 100). Around a 2x2 grid's centre a square meets 1, 2
     * or 4 cells, never 3. */
    assert_int_equal(near_ids(layout, 100, 100, 150, ids, 8), 4);
    assert_int_equal(ids[0], 1);
    assert_int_equal(ids[3], 4);
    /* Crossing one line only: its own cell and the one across it. */
    assert_int_equal(near_ids(layout, 100, 300, 150, ids, 8), 2);
    assert_int_equal(ids[0], 2);
    assert_int_equal(ids[1], 4);
    assert_int_equal(near_ids(layout, 300, 100, 150, ids, 8), 2);
    assert_int_equal(ids[0], 3);
    assert_int_equal(ids[1], 4);
    /* Exactly at the distance counts as near; just short of it does not. */
    assert_int_equal(near_ids(layout, 100, 300, 100, ids, 8), 2);
    assert_int_equal(near_ids(layout, 100, 300, nextafter(100, 0), ids, 8), 1);
    /* Near the centre: all four. */
    assert_int_equal(near_ids(layout, 1, 1, 5, ids, 8), 4);
    assert_int_equal(near_ids(layout, 0, 0, 0, ids, 8), 4);
    assert_int_equal(near_ids(layout, -250, -250, 0, ids, 8), 1);
    assert_int_equal(ids[0], 1);
    /* Beyond the bounds the edge cells still answer. */
    assert_int_equal(near_ids(layout, 900, 900, 10, ids, 8), 1);
    assert_int_equal(ids[0], 4);
    assert_int_equal(near_ids(layout, -900, -900, 0, ids, 8), 1);
    assert_int_equal(ids[0], 1);
    assert_int_equal(near_ids(layout, 900, 0, 10, ids, 8), 2);
    assert_int_equal(ids[0], 3);
    assert_int_equal(ids[1], 4);
    assert_int_equal(near_ids(layout, -1e9, 300, 1, ids, 8), 1);
    assert_int_equal(ids[0], 2);
    assert_int_equal(near_ids(layout, 1e9, 1e9, 1e10, ids, 8), 4);

    /* The count is the whole count even when the array is smaller; only cap
     * entries are written. */
    const space_layout_node *out[4] = {NULL, NULL, NULL, NULL};
    assert_int_equal(space_layout_cells_near(layout, 0, 0, 10, out, 2), 4);
    assert_non_null(out[0]);
    assert_non_null(out[1]);
    assert_null(out[2]);
    assert_null(out[3]);
    assert_int_equal(space_layout_cells_near(layout, 0, 0, 10, NULL, 0), 4);
    space_layout_free(layout);
}

/* The cell's region, open towards the outside at the space's edges. */
static space_layout_rect open_rect(const space_layout *layout, uint32_t cell) {
    space_layout_rect r;
    assert_int_equal(space_layout_rect_of(layout, cell, &r), 0);
    if (r.min_x <= layout->min[0]) r.min_x = -INFINITY;
    if (r.max_x >= layout->max[0]) r.max_x = INFINITY;
    if (r.min_z <= layout->min[2]) r.min_z = -INFINITY;
    if (r.max_z >= layout->max[2]) r.max_z = INFINITY;
    return r;
}

static void test_cells_near_oracle(void **state) {
    uint64_t seed = 0x9e3779b97f4a7c15ULL;
    const double bounds[4][2][3] = {
        {{-500, -1000, -500}, {500, 1000, 500}},
        {{0, 0, 0}, {100, 1, 3000}},
        {{-1e5, -1, 2.5}, {-2e4, 1, 7.75}},
        {{-1, -1, -1}, {1, 1, 1}},
    };
    int points = 0;
    for (int round = 0; round < 4; round++) {
        const double *min = bounds[round][0], *max = bounds[round][1];
        space_layout *layout = random_layout(&seed, min, max, 20 + round * 20);
        uint32_t cells = layout->next_cell_id - 1;
        if (cells == 0) {
            fail_msg("random_layout made no cell");
            return; /* not reached (fail_msg jumps out), but the analyzer cannot tell */
        }
        double w = max[0] - min[0], h = max[2] - min[2];
        for (int i = 0; i < 500; i++, points++) {
            double x = min[0] - 0.25 * w + 1.5 * w * test_unit(&seed);
            double z = min[2] - 0.25 * h + 1.5 * h * test_unit(&seed);
            uint64_t pick = test_rand(&seed) % 8;
            if (pick == 0) {
                /* On a cell's corner or edge, where ties live. */
                space_layout_rect r;
                assert_int_equal(space_layout_rect_of(layout, 1 + (uint32_t)(test_rand(&seed) % cells), &r), 0);
                x = test_rand(&seed) & 1 ? r.min_x : r.max_x;
                if (test_rand(&seed) & 1) z = test_rand(&seed) & 1 ? r.min_z : r.max_z;
            }
            double d = pick == 1 ? 0 : 0.4 * fmax(w, h) * test_unit(&seed) * test_unit(&seed);
            uint32_t ids[256];
            size_t n = near_ids(layout, x, z, d, ids, 256);
            bool got[256] = {false};
            for (size_t k = 0; k < n; k++) {
                assert_true(ids[k] >= 1 && ids[k] <= cells);
                assert_false(got[ids[k]]); /* no cell twice */
                got[ids[k]] = true;
            }
            size_t expected = 0;
            for (uint32_t c = 1; c <= cells; c++) {
                space_layout_rect r = open_rect(layout, c);
                bool want = space_layout_rect_distance(&r, x, z) <= d;
                expected += want;
                if (want != got[c])
                    fail_msg("round %d point (%.17g, %.17g) distance %.17g: cell %u %s", round, x, z, d, c,
                             want ? "missing" : "not near");
            }
            assert_int_equal(n, expected);
            /* The point's own cell is always among them. */
            assert_true(got[cell_at(layout, x, z)]);
        }
        space_layout_free(layout);
    }
    assert_int_equal(points, 2000);
}

static void test_cell_at_agrees_with_rects(void **state) {
    uint64_t seed = 0xc0ffee;
    for (int round = 0; round < 4; round++) {
        const double min[3] = {-300.5 * (round + 1), 0, -77}, max[3] = {123.25, 1, 400 * (round + 1)};
        space_layout *layout = random_layout(&seed, min, max, 15 + round * 15);
        uint32_t cells = layout->next_cell_id - 1;
        for (int i = 0; i < 1000; i++) {
            double x = min[0] + (max[0] - min[0]) * test_unit(&seed);
            double z = min[2] + (max[2] - min[2]) * test_unit(&seed);
            uint32_t id = cell_at(layout, x, z);
            space_layout_rect r;
            assert_int_equal(space_layout_rect_of(layout, id, &r), 0);
            assert_true(space_layout_rect_contains(&r, x, z));
            /* And no other cell holds it. */
            for (uint32_t c = 1; c <= cells; c++) {
                if (c == id) continue;
                assert_int_equal(space_layout_rect_of(layout, c, &r), 0);
                assert_false(space_layout_rect_contains(&r, x, z));
            }
            /* Beyond the bounds: the returned cell's open region holds it. */
            double fx = x + (test_rand(&seed) & 1 ? 2 : -2) * (max[0] - min[0]);
            double fz = z + (test_rand(&seed) & 1 ? 3 : -3) * (max[2] - min[2]);
            space_layout_rect o = open_rect(layout, cell_at(layout, fx, z));
            assert_true(space_layout_rect_contains(&o, fx, z));
            o = open_rect(layout, cell_at(layout, x, fz));
            assert_true(space_layout_rect_contains(&o, x, fz));
            o = open_rect(layout, cell_at(layout, fx, fz));
            assert_true(space_layout_rect_contains(&o, fx, fz));
        }
        /* Points exactly on each split line go to the high side. */
        for (uint32_t s = 0; s < space_layout_split_count(layout); s++) {
            space_layout_axis axis;
            double at, lo, hi;
            assert_int_equal(space_layout_split_info(layout, s, &axis, &at, &lo, &hi), 0);
            assert_true(at >= lo && at <= hi);
            double other = axis == SPACE_LAYOUT_AXIS_X ? min[2] + (max[2] - min[2]) * test_unit(&seed)
                                                       : min[0] + (max[0] - min[0]) * test_unit(&seed);
            double x = axis == SPACE_LAYOUT_AXIS_X ? at : other, z = axis == SPACE_LAYOUT_AXIS_X ? other : at;
            if (!(x < max[0] && z < max[2])) continue;
            space_layout_rect r;
            assert_int_equal(space_layout_rect_of(layout, cell_at(layout, x, z), &r), 0);
            assert_true(space_layout_rect_contains(&r, x, z));
        }
        assert_int_equal(space_layout_split_info(layout, (uint32_t)space_layout_split_count(layout),
                                                 &(space_layout_axis){0}, &(double){0}, &(double){0}, &(double){0}),
                         -1);
        space_layout_free(layout);
    }
}

/* ---- edits ----------------------------------------------------------------- */

static void assert_unchanged(const space_layout *layout, const char *before) {
    char *now = space_layout_to_json(layout);
    assert_string_equal(now, before);
    free(now);
}

static void test_move_split(void **state) {
    const uint64_t apps[] = {7, 8, 9, 10};
    space_layout *layout = space_layout_create_grid("grid", MIN, MAX, false, 2, 2, apps, 4);
    layout->epoch = 5;
    char err[256] = "";

    /* Within its region. */
    assert_int_equal(space_layout_move_split(layout, 0, 100, err, sizeof err), 0);
    assert_int_equal(layout->epoch, 5);
    assert_rect(layout, 1, -500, -500, 100, 0);
    assert_rect(layout, 3, 100, -500, 500, 0);
    assert_int_equal(cell_at(layout, 50, -1), 1);
    assert_int_equal(space_layout_move_split(layout, 2, -250, err, sizeof err), 0);
    assert_rect(layout, 3, 100, -500, 500, -250);
    assert_rect(layout, 4, 100, -250, 500, 500);
    space_layout_axis axis;
    double at, lo, hi;
    assert_int_equal(space_layout_split_info(layout, 2, &axis, &at, &lo, &hi), 0);
    assert_true(axis == SPACE_LAYOUT_AXIS_Z && at == -250 && lo == -500 && hi == 500);
    assert_checks(layout);
    /* To an edge: a zero-area cell, allowed. */
    assert_int_equal(space_layout_move_split(layout, 1, 500, err, sizeof err), 0);
    assert_rect(layout, 2, -500, 500, 100, 500);
    assert_int_equal(cell_at(layout, 0, 499), 1);
    assert_checks(layout);
    assert_int_equal(space_layout_move_split(layout, 1, 0, err, sizeof err), 0);

    /* Outside its region, not finite, or no such split: refused, unchanged. */
    char *before = space_layout_to_json(layout);
    assert_int_equal(space_layout_move_split(layout, 0, 500.5, err, sizeof err), -1);
    assert_non_null(strstr(err, "split 0"));
    assert_non_null(strstr(err, "-500 .. 500"));
    assert_unchanged(layout, before);
    assert_int_equal(space_layout_move_split(layout, 1, -501, err, sizeof err), -1);
    assert_unchanged(layout, before);
    assert_int_equal(space_layout_move_split(layout, 0, NAN, err, sizeof err), -1);
    assert_int_equal(space_layout_move_split(layout, 0, INFINITY, err, sizeof err), -1);
    assert_unchanged(layout, before);
    assert_int_equal(space_layout_move_split(layout, 3, 0, err, sizeof err), -1);
    assert_non_null(strstr(err, "no split 3"));
    assert_unchanged(layout, before);
    free(before);
    space_layout_free(layout);

    /* A parent split cannot cross a child split on the same axis. */
    const uint64_t three[] = {1, 2, 3};
    layout = space_layout_create_grid("row", MIN, MAX, false, 3, 1, three, 3);
    double at0, at1;
    assert_int_equal(space_layout_split_info(layout, 0, &axis, &at0, &lo, &hi), 0);
    assert_int_equal(space_layout_split_info(layout, 1, &axis, &at1, &lo, &hi), 0);
    before = space_layout_to_json(layout);
    assert_int_equal(space_layout_move_split(layout, 0, 200, err, sizeof err), -1);
    assert_non_null(strstr(err, "cross"));
    assert_unchanged(layout, before);
    /* The child split's region is bounded by the parent. */
    assert_int_equal(space_layout_move_split(layout, 1, at0 - 1, err, sizeof err), -1);
    assert_unchanged(layout, before);
    free(before);
    /* Up to the child exactly is fine (cell 2 has zero area). */
    assert_int_equal(space_layout_move_split(layout, 0, at1, err, sizeof err), 0);
    assert_rect(layout, 2, at1, -500, at1, 500);
    assert_int_equal(cell_at(layout, at1, 0), 3);
    assert_checks(layout);
    /* Now the child can move right, and then the parent after it. */
    assert_int_equal(space_layout_move_split(layout, 1, 300, err, sizeof err), 0);
    assert_int_equal(space_layout_move_split(layout, 0, 200, err, sizeof err), 0);
    assert_rect(layout, 1, -500, -500, 200, 500);
    assert_rect(layout, 2, 200, -500, 300, 500);
    assert_rect(layout, 3, 300, -500, 500, 500);
    assert_checks(layout);
    space_layout_free(layout);

    /* A split on the other axis below does not limit the parent. */
    layout = space_layout_create_grid("grid", MIN, MAX, false, 2, 2, apps, 4);
    assert_int_equal(space_layout_move_split(layout, 0, -499, err, sizeof err), 0);
    assert_rect(layout, 2, -500, 0, -499, 500);
    assert_checks(layout);
    space_layout_free(layout);
}

static void test_assign(void **state) {
    const uint64_t apps[] = {7, 8, 9, 10};
    space_layout *layout = space_layout_create_grid("grid", MIN, MAX, false, 2, 2, apps, 4);
    char err[256] = "";
    char *before = space_layout_to_json(layout);
    /* To a cellapp that owns another cell: refused. */
    assert_int_equal(space_layout_assign(layout, 1, 8, err, sizeof err), -1);
    assert_non_null(strstr(err, "owns another cell"));
    assert_unchanged(layout, before);
    /* To nobody, or an unknown cell: refused. */
    assert_int_equal(space_layout_assign(layout, 1, 0, err, sizeof err), -1);
    assert_unchanged(layout, before);
    assert_int_equal(space_layout_assign(layout, 5, 11, err, sizeof err), -1);
    assert_non_null(strstr(err, "no cell 5"));
    assert_unchanged(layout, before);
    /* To its own owner: a no-op. */
    assert_int_equal(space_layout_assign(layout, 1, 7, err, sizeof err), 0);
    assert_unchanged(layout, before);
    free(before);
    /* To a new cellapp. */
    assert_int_equal(space_layout_assign(layout, 1, 11, err, sizeof err), 0);
    assert_int_equal(space_layout_find_cell(layout, 1)->cellapp_id, 11);
    assert_ptr_equal(space_layout_cell_of(layout, 11), space_layout_find_cell(layout, 1));
    assert_null(space_layout_cell_of(layout, 7));
    assert_checks(layout);
    /* 7 owns nothing now, so it can take another cell. */
    assert_int_equal(space_layout_assign(layout, 4, 7, err, sizeof err), 0);
    assert_int_equal(space_layout_find_cell(layout, 4)->cellapp_id, 7);
    assert_checks(layout);
    space_layout_free(layout);

    /* From nobody to somebody makes a layout check. */
    layout = space_layout_create("s", MIN, MAX, false, 0);
    assert_check_fails(layout, "no cellapp");
    assert_int_equal(space_layout_assign(layout, 1, 3, err, sizeof err), 0);
    assert_checks(layout);
    space_layout_free(layout);
}

static void test_split_cell(void **state) {
    const uint64_t apps[] = {7, 8, 9, 10};
    space_layout *layout = space_layout_create_grid("grid", MIN, MAX, false, 2, 2, apps, 4);
    layout->epoch = 9;
    char err[256] = "";

    /* Cell 4 at x = 250: it keeps the low side, cell 5 takes the high. */
    assert_int_equal(space_layout_split_cell(layout, 4, SPACE_LAYOUT_AXIS_X, 250, 20, err, sizeof err), 0);
    assert_int_equal(layout->epoch, 9);
    assert_int_equal(layout->next_cell_id, 6);
    assert_int_equal(space_layout_cell_count(layout), 5);
    assert_int_equal(space_layout_split_count(layout), 4);
    assert_rect(layout, 4, 0, 0, 250, 500);
    assert_rect(layout, 5, 250, 0, 500, 500);
    assert_int_equal(space_layout_find_cell(layout, 4)->cellapp_id, 10);
    assert_int_equal(space_layout_find_cell(layout, 5)->cellapp_id, 20);
    assert_int_equal(cell_at(layout, 249, 1), 4);
    assert_int_equal(cell_at(layout, 250, 1), 5);
    assert_int_equal(cell_at(layout, 900, 900), 5);
    /* The new split is numbered in pre-order: after 0, 1 and 2. */
    space_layout_axis axis;
    double at, lo, hi;
    assert_int_equal(space_layout_split_info(layout, 3, &axis, &at, &lo, &hi), 0);
    assert_true(axis == SPACE_LAYOUT_AXIS_X && at == 250 && lo == 0 && hi == 500);
    assert_checks(layout);
    assert_round_trip(layout);

    /* Cell 1 on z: its split comes before the high column's in pre-order. */
    assert_int_equal(space_layout_split_cell(layout, 1, SPACE_LAYOUT_AXIS_Z, -100, 21, err, sizeof err), 0);
    assert_int_equal(space_layout_split_info(layout, 2, &axis, &at, &lo, &hi), 0);
    assert_true(axis == SPACE_LAYOUT_AXIS_Z && at == -100 && lo == -500 && hi == 0);
    assert_rect(layout, 1, -500, -500, 0, -100);
    assert_rect(layout, 6, -500, -100, 0, 0);
    assert_int_equal(layout->next_cell_id, 7);
    assert_checks(layout);

    /* Refusals, each leaving the layout as it was. */
    char *before = space_layout_to_json(layout);
    assert_int_equal(space_layout_split_cell(layout, 1, SPACE_LAYOUT_AXIS_X, 100, 30, err, sizeof err), -1);
    assert_non_null(strstr(err, "cell 1"));
    assert_non_null(strstr(err, "outside"));
    assert_unchanged(layout, before);
    assert_int_equal(space_layout_split_cell(layout, 1, SPACE_LAYOUT_AXIS_Z, -100.5 - 400, 30, err, sizeof err), -1);
    assert_unchanged(layout, before);
    assert_int_equal(space_layout_split_cell(layout, 1, SPACE_LAYOUT_AXIS_Z, NAN, 30, err, sizeof err), -1);
    assert_unchanged(layout, before);
    assert_int_equal(space_layout_split_cell(layout, 1, SPACE_LAYOUT_AXIS_X, -200, 8, err, sizeof err), -1);
    assert_non_null(strstr(err, "cellapp 8"));
    assert_unchanged(layout, before);
    assert_int_equal(space_layout_split_cell(layout, 1, SPACE_LAYOUT_AXIS_X, -200, 0, err, sizeof err), -1);
    assert_unchanged(layout, before);
    assert_int_equal(space_layout_split_cell(layout, 99, SPACE_LAYOUT_AXIS_X, -200, 30, err, sizeof err), -1);
    assert_non_null(strstr(err, "no cell 99"));
    assert_unchanged(layout, before);
    free(before);

    /* Exactly on the cell's edge: a zero-area new cell, which check allows
     * and cell_at never returns inside the bounds. */
    assert_int_equal(space_layout_split_cell(layout, 2, SPACE_LAYOUT_AXIS_X, 0, 31, err, sizeof err), 0);
    assert_rect(layout, 7, 0, 0, 0, 500);
    assert_rect(layout, 2, -500, 0, 0, 500);
    assert_int_equal(cell_at(layout, nextafter(0, -1), 1), 2);
    assert_int_equal(cell_at(layout, 0, 1), 4);
    assert_checks(layout);
    /* And on the low edge: the cell keeps the zero-area low side. */
    assert_int_equal(space_layout_split_cell(layout, 3, SPACE_LAYOUT_AXIS_Z, -500, 32, err, sizeof err), 0);
    assert_rect(layout, 3, 0, -500, 500, -500);
    assert_rect(layout, 8, 0, -500, 500, 0);
    assert_int_equal(cell_at(layout, 10, -500), 8);
    assert_int_equal(cell_at(layout, 10, -501), 3);
    assert_checks(layout);
    assert_round_trip(layout);
    space_layout_free(layout);

    /* Many splits of one cell grow the node array past its first blocks. */
    layout = space_layout_create("s", MIN, MAX, false, 1);
    for (uint32_t i = 0; i < 30; i++) {
        uint32_t id = layout->next_cell_id - 1; /* the newest, on the high side */
        space_layout_rect r;
        assert_int_equal(space_layout_rect_of(layout, id, &r), 0);
        assert_int_equal(space_layout_split_cell(layout, id, i & 1 ? SPACE_LAYOUT_AXIS_Z : SPACE_LAYOUT_AXIS_X,
                                                 i & 1 ? (r.min_z + r.max_z) / 2 : (r.min_x + r.max_x) / 2, 2 + i, err,
                                                 sizeof err),
                         0);
    }
    assert_int_equal(space_layout_cell_count(layout), 31);
    assert_checks(layout);
    assert_round_trip(layout);
    space_layout_free(layout);
}

/* The edits never build a tree deeper than from_json and check accept. */
static void test_split_cell_depth_limit(void **state) {
    char err[256] = "";
    char *text = deep_json(SPACE_LAYOUT_MAX_DEPTH);
    space_layout *layout = parse(text);
    free(text);
    assert_checks(layout);
    /* The deepest cell sits at depth SPACE_LAYOUT_MAX_DEPTH: no further. */
    uint32_t deepest = SPACE_LAYOUT_MAX_DEPTH + 1;
    char *before = space_layout_to_json(layout);
    assert_int_equal(space_layout_split_cell(layout, deepest, SPACE_LAYOUT_AXIS_Z, 0, 999, err, sizeof err), -1);
    assert_non_null(strstr(err, "deep"));
    assert_unchanged(layout, before);
    free(before);
    /* A shallower one can still split. */
    assert_int_equal(space_layout_split_cell(layout, 1, SPACE_LAYOUT_AXIS_Z, 0, 999, err, sizeof err), 0);
    assert_checks(layout);
    assert_round_trip(layout);
    space_layout_free(layout);
}

static void test_copy(void **state) {
    const uint64_t apps[] = {7, 8, 9, 10};
    space_layout *layout = space_layout_create_grid("grid", MIN, MAX, false, 2, 2, apps, 4);
    space_layout *copy = space_layout_copy(layout);
    assert_same_layout(layout, copy);
    assert_true(copy->nodes != layout->nodes);
    char err[256] = "";
    assert_int_equal(space_layout_split_cell(copy, 1, SPACE_LAYOUT_AXIS_X, -250, 11, err, sizeof err), 0);
    assert_int_equal(space_layout_move_split(copy, 0, 10, err, sizeof err), 0);
    assert_int_equal(space_layout_cell_count(layout), 4);
    assert_rect(layout, 1, -500, -500, 0, 0);
    assert_null(space_layout_find_cell(layout, 5));
    assert_non_null(space_layout_find_cell(copy, 5));
    assert_checks(layout);
    assert_checks(copy);
    space_layout_free(copy);
    space_layout_free(layout);
}

static void test_print(void **state) {
    const uint64_t apps[] = {7, 8, 9, 10};
    space_layout *layout = space_layout_create_grid("grid", MIN, MAX, true, 2, 2, apps, 4);
    layout->epoch = 12;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    space_layout_print(layout, f);
    assert_int_equal(fclose(f), 0);
    assert_non_null(strstr(buf, "space grid"));
    assert_non_null(strstr(buf, "epoch 12"));
    assert_non_null(strstr(buf, "3D"));
    assert_non_null(strstr(buf, "split 0: x = 0 (region -500 .. 500)"));
    assert_non_null(strstr(buf, "split 1: z = 0"));
    assert_non_null(strstr(buf, "split 2: z = 0"));
    assert_null(strstr(buf, "split 3"));
    assert_non_null(strstr(buf, "cell 1 on cellapp 7: x -500 .. 0, z -500 .. 0"));
    assert_non_null(strstr(buf, "cell 4 on cellapp 10: x 0 .. 500, z 0 .. 500"));
    /* One line for the header and one per node. */
    int lines = 0;
    for (size_t i = 0; i < len; i++) lines += buf[i] == '\n';
    assert_int_equal(lines, 1 + layout->node_count);
    /* Children are indented below their split. */
    assert_non_null(strstr(buf, "\n  split 0"));
    assert_non_null(strstr(buf, "\n    split 1"));
    assert_non_null(strstr(buf, "\n      cell 1"));
    free(buf);
    space_layout_free(layout);
}

/* The balancer's fields: fence, aggression and direction of each line, a
 * retiring cell; they round-trip, bad values are refused, and a new split
 * starts at aggression 1. Removing a cell gives its region to its sibling
 * subtree, keeps every other cell where it was and checks. */
static void test_balancer_fields_and_remove(void **state) {
    (void)state;
    const uint64_t owners[4] = {11, 12, 13, 14};
    space_layout *layout = space_layout_create_grid("w", MIN, MAX, false, 2, 2, owners, 4);
    assert_non_null(layout);
    for (int32_t i = 0; i < layout->node_count; i++)
        if (!layout->nodes[i].leaf) assert_true(layout->nodes[i].aggression == 1.0);
    char err[256];
    layout->fence = 7;
    layout->nodes[layout->root].aggression = 0.125;
    layout->nodes[layout->root].direction = -1;
    assert_int_equal(space_layout_set_retiring(layout, 3, true, err, sizeof err), 0);
    assert_int_equal(space_layout_set_retiring(layout, 99, true, err, sizeof err), -1);
    assert_round_trip(layout);
    char *text = space_layout_to_json(layout);
    assert_non_null(strstr(text, "\"fence\":7"));
    assert_non_null(strstr(text, "\"retiring\":true"));
    assert_non_null(strstr(text, "\"aggression\":0.125"));
    free(text);
    assert_parse_fails("{\"name\":\"w\",\"min\":[0,0,0],\"max\":[1,1,1],\"tree\":{\"split\":\"x\",\"at\":0.5,"
                       "\"aggression\":0,\"low\":{\"cell\":1,\"cellapp\":1},\"high\":{\"cell\":2,\"cellapp\":2}}}",
                       "aggression", NULL);
    assert_parse_fails("{\"name\":\"w\",\"min\":[0,0,0],\"max\":[1,1,1],\"tree\":{\"split\":\"x\",\"at\":0.5,"
                       "\"direction\":2,\"low\":{\"cell\":1,\"cellapp\":1},\"high\":{\"cell\":2,\"cellapp\":2}}}",
                       "direction", NULL);
    assert_parse_fails("{\"name\":\"w\",\"fence\":-1,\"min\":[0,0,0],\"max\":[1,1,1],\"tree\":{\"cell\":1,"
                       "\"cellapp\":1}}",
                       "fence", NULL);

    /* Cell 3 (x 0..500, z -500..0) goes: cell 4 takes the whole x >= 0 half. */
    assert_true(space_layout_cell_area(layout, 3) == 500.0 * 500.0);
    assert_true(space_layout_cell_area(layout, 42) < 0);
    assert_int_equal(space_layout_remove_cell(layout, 3, err, sizeof err), 0);
    assert_checks(layout);
    assert_null(space_layout_find_cell(layout, 3));
    assert_int_equal(space_layout_cell_count(layout), 3);
    assert_rect(layout, 4, 0, -500, 500, 500);
    assert_rect(layout, 1, -500, -500, 0, 0);
    assert_rect(layout, 2, -500, 0, 0, 500);
    assert_true(layout->nodes[layout->root].aggression == 0.125);
    assert_round_trip(layout);
    /* Down to one cell, which stays. */
    assert_int_equal(space_layout_remove_cell(layout, 1, err, sizeof err), 0);
    assert_int_equal(space_layout_remove_cell(layout, 2, err, sizeof err), 0);
    assert_int_equal(space_layout_cell_count(layout), 1);
    assert_rect(layout, 4, -500, -500, 500, 500);
    assert_int_equal(space_layout_remove_cell(layout, 4, err, sizeof err), -1);
    assert_non_null(strstr(err, "only cell"));
    assert_int_equal(space_layout_remove_cell(layout, 5, err, sizeof err), -1);
    assert_checks(layout);
    /* A split made now starts fresh. */
    assert_int_equal(space_layout_split_cell(layout, 4, SPACE_LAYOUT_AXIS_Z, 10, 15, err, sizeof err), 0);
    assert_true(layout->nodes[layout->root].aggression == 1.0);
    assert_int_equal(layout->nodes[layout->root].direction, 0);
    space_layout_free(layout);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_one_cell),
        cmocka_unit_test(test_create_refuses),
        cmocka_unit_test(test_grid_1x1),
        cmocka_unit_test(test_grid_2x2),
        cmocka_unit_test(test_grid_3x1),
        cmocka_unit_test(test_grid_other_shapes),
        cmocka_unit_test(test_json_round_trip),
        cmocka_unit_test(test_json_hand_written),
        cmocka_unit_test(test_json_errors),
        cmocka_unit_test(test_check),
        cmocka_unit_test(test_rect_helpers),
        cmocka_unit_test(test_cells_near_grid),
        cmocka_unit_test(test_cells_near_oracle),
        cmocka_unit_test(test_cell_at_agrees_with_rects),
        cmocka_unit_test(test_move_split),
        cmocka_unit_test(test_assign),
        cmocka_unit_test(test_split_cell),
        cmocka_unit_test(test_split_cell_depth_limit),
        cmocka_unit_test(test_copy),
        cmocka_unit_test(test_print),
        cmocka_unit_test(test_balancer_fields_and_remove),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
