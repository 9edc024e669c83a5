/* test_game_args.c -- the game ABI's argument table (common/game_args.h):
 * a method's arguments and an event's fields read and written by position
 * and by name, every type round-tripped both ways, and every refusal (an
 * unknown name, the wrong type, a value out of range, a position past the
 * last) a -1 that changes nothing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "entity_def.h"
#include "entity_state.h"
#include "game_args.h"
#include "method_call.h"

static const char *defs = "{\"format\":1,"
                          " \"entities\":[{\"name\":\"Hero\",\"cell_methods\":[{\"name\":\"tag\",\"args\":["
                          "   {\"name\":\"target\",\"type\":\"entity\"},{\"name\":\"reach\",\"type\":\"float\"}]}]}],"
                          " \"events\":["
                          "  {\"name\":\"scored\",\"args\":[{\"name\":\"who\",\"type\":\"entity\"},"
                          "                              {\"name\":\"points\",\"type\":\"int16\"},"
                          "                              {\"name\":\"round\",\"type\":\"uint8\"},"
                          "                              {\"name\":\"ratio\",\"type\":\"double\"},"
                          "                              {\"name\":\"final\",\"type\":\"bool\"},"
                          "                              {\"name\":\"name\",\"type\":\"string\",\"max_length\":8}]}]}";

typedef struct fixture {
    entity_def_registry *reg;
    tessera_args *scored; /* an event's fields */
    tessera_args *tag;    /* a cell method's arguments */
} fixture;

static int setup(void **state) {
    fixture *f = calloc(1, sizeof *f);
    char err[256];
    assert_int_equal(entity_def_load_string(defs, "test", &f->reg, err, sizeof err), 0);
    f->scored = game_args_of(method_call_args_create(entity_def_registry_find_event(f->reg, "scored")));
    const entity_def_class *hero = entity_def_registry_find_class(f->reg, "Hero");
    f->tag = game_args_of(method_call_args_create(entity_def_class_find_method(hero, ENTITY_DEF_PART_CELL, "tag")));
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fixture *f = *state;
    game_args_api.free(f->scored);
    game_args_api.free(f->tag);
    entity_def_registry_free(f->reg);
    free(f);
    return 0;
}

static void test_index_of(void **state) {
    const fixture *f = *state;
    const tessera_args_api *a = &game_args_api;
    const char *names[] = {"who", "points", "round", "ratio", "final", "name"};
    for (int i = 0; i < 6; i++) assert_int_equal(a->index_of(f->scored, names[i]), i);
    assert_int_equal(a->index_of(f->tag, "target"), 0);
    assert_int_equal(a->index_of(f->tag, "reach"), 1);
    /* Another's name, no such name, case, NULL: none. */
    assert_int_equal(a->index_of(f->tag, "points"), -1);
    assert_int_equal(a->index_of(f->scored, "score"), -1);
    assert_int_equal(a->index_of(f->scored, "Points"), -1);
    assert_int_equal(a->index_of(f->scored, NULL), -1);
    assert_int_equal(a->index_of(NULL, "who"), -1);
}

/* Every type: set by name, read by position and by name. */
static void test_named_round_trip(void **state) {
    const fixture *f = *state;
    const tessera_args_api *a = &game_args_api;
    assert_int_equal(a->set_handle_named(f->scored, "who", 42), 0);
    assert_int_equal(a->set_int_named(f->scored, "points", -300), 0);
    assert_int_equal(a->set_uint_named(f->scored, "round", 7), 0);
    assert_int_equal(a->set_float_named(f->scored, "ratio", 0.25), 0);
    assert_int_equal(a->set_bool_named(f->scored, "final", true), 0);
    assert_int_equal(a->set_string_named(f->scored, "name", "ann", 3), 0);

    tessera_handle who = 0;
    int64_t points = 0;
    uint64_t round = 0;
    double ratio = 0;
    bool final = false;
    const char *name = NULL;
    size_t length = 0;
    assert_int_equal(a->get_handle(f->scored, 0, &who), 0);
    assert_int_equal(a->get_int(f->scored, 1, &points), 0);
    assert_int_equal(who, 42);
    assert_int_equal(points, -300);
    who = 0, points = 0;
    assert_int_equal(a->get_handle_named(f->scored, "who", &who), 0);
    assert_int_equal(a->get_int_named(f->scored, "points", &points), 0);
    assert_int_equal(a->get_uint_named(f->scored, "round", &round), 0);
    assert_int_equal(a->get_float_named(f->scored, "ratio", &ratio), 0);
    assert_int_equal(a->get_bool_named(f->scored, "final", &final), 0);
    assert_int_equal(a->get_string_named(f->scored, "name", &name, &length), 0);
    assert_int_equal(who, 42);
    assert_int_equal(points, -300);
    assert_int_equal(round, 7);
    assert_true(ratio == 0.25);
    assert_true(final);
    assert_int_equal(length, 3);
    assert_string_equal(name, "ann");

    /* A method's arguments alike. */
    double reach = 0;
    assert_int_equal(a->set_float_named(f->tag, "reach", 5.5), 0);
    assert_int_equal(a->get_float(f->tag, 1, &reach), 0);
    assert_true(reach == 5.5);
}

/* Each refusal is -1 and leaves the value as it was. */
static void test_named_refusals(void **state) {
    const fixture *f = *state;
    const tessera_args_api *a = &game_args_api;
    assert_int_equal(a->set_int_named(f->scored, "points", 12), 0);
    assert_int_equal(a->set_int_named(f->scored, "score", 5), -1);   /* no such field */
    assert_int_equal(a->set_int_named(f->scored, NULL, 5), -1);      /* no name */
    assert_int_equal(a->set_int_named(NULL, "points", 5), -1);       /* no args */
    assert_int_equal(a->set_uint_named(f->scored, "points", 5), -1); /* int16, not unsigned */
    assert_int_equal(a->set_string_named(f->scored, "points", "5", 1), -1);
    assert_int_equal(a->set_int_named(f->scored, "points", 40000), -1);               /* above 32767 */
    assert_int_equal(a->set_uint_named(f->scored, "round", 256), -1);                 /* above 255 */
    assert_int_equal(a->set_string_named(f->scored, "name", "far too long", 12), -1); /* max_length 8 */
    assert_int_equal(a->set_bool_named(f->scored, "who", true), -1);                  /* an entity */
    assert_int_equal(a->set_float_named(f->tag, "points", 1.0), -1); /* the event's, not the method's */
    int64_t points = 0;
    bool final = true;
    const char *name = NULL;
    assert_int_equal(a->get_int_named(f->scored, "points", &points), 0);
    assert_int_equal(points, 12);
    assert_int_equal(a->get_bool_named(f->scored, "points", &final), -1);
    assert_int_equal(a->get_string_named(f->scored, "nom", &name, NULL), -1);
    assert_null(name);
    assert_int_equal(a->get_int_named(f->scored, "points", NULL), -1);
    /* By position: past the last. */
    assert_int_equal(a->set_int(f->scored, 6, 1), -1);
    assert_int_equal(a->get_int(f->scored, 6, &points), -1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_index_of, setup, teardown),
        cmocka_unit_test_setup_teardown(test_named_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_named_refusals, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
