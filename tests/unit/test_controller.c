/* test_controller.c -- the movement chain (cellapp/controller.h) on a real
 * cell: moves to a point (and to within a distance of it), to an entity
 * that walks away and then is destroyed, along a path (one controller
 * through every point), turns; a new move stops the old one; the cancel
 * rules (the move's or the turn's id stops the chain, a trap's id removes
 * only the trap, stop ends everything, unknown ids are refused); a move
 * started from the arrived callback (a patrol); refusals (a ghost, a point
 * outside the space, a bad speed); and a chain saved mid-path and restored
 * on a copy of the entity in another cell ending exactly where the
 * original does. Every event is counted, so one firing twice is caught. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cell.h"
#include "movement.h"
#include "witness.h"
#include "cell_real.h"

static const char *defs = "{\"format\":1,\"entities\":[{\"name\":\"Thing\",\"properties\":["
                          " {\"name\":\"hp\",\"type\":\"uint8\",\"flags\":\"ALL_CLIENTS\"}]}]}";

#define TICK_S 0.1

typedef struct fixture {
    cellapp_settings settings;
    cell_shared shared;
    space_layout *layout;
    cell *c;
    const entity_def_class *cls;
    entity_timer_ids timer_ids;
} fixture;

/* What the callback saw. */
typedef struct events {
    int moved, arrived, failed;
    uint32_t last_id;
    uint64_t last_user_data;
    char reason[64];
    /* A patrol: on arrival, the next point (while legs > 0). */
    int legs;
    float next[3];
} events;

static fixture *fixture_create(void) {
    fixture *fx = calloc(1, sizeof *fx);
    fx->settings.tick_hz = 10;
    fx->settings.position_precision = 1.0 / 64;
    fx->settings.yaw_steps = 256;
    fx->settings.witness.tick_hz = 10;
    fx->settings.witness.view_radius = 50;
    fx->shared.settings = &fx->settings;
    fx->shared.self_id = 1;
    fx->timer_ids = (entity_timer_ids){1, 0};
    fx->shared.timer_ids = &fx->timer_ids;
    cell_real_install_hooks(&fx->shared);
    char err[512];
    if (entity_def_load_string(defs, "test", &fx->shared.definitions, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        abort();
    }
    fx->cls = entity_def_registry_find_class(fx->shared.definitions, "Thing");
    fx->shared.schema = replication_schema_create(fx->shared.definitions);
    fx->shared.replication = replication_create(fx->shared.schema);
    bit_writer_init(&fx->shared.stream);
    const double min[3] = {-100, -10, -100}, max[3] = {100, 10, 100};
    fx->layout = space_layout_create("test", min, max, false, 1);
    fx->c = cell_create(&fx->shared, fx->layout);
    assert_non_null(fx->c);
    return fx;
}

static void fixture_free(fixture *fx) {
    cell_free(fx->c);
    space_layout_free(fx->layout);
    bit_writer_close(&fx->shared.stream);
    replication_free(fx->shared.replication);
    replication_schema_free(fx->shared.schema);
    entity_def_registry_free(fx->shared.definitions);
    free(fx);
}

static void on_event(cell *c, cell_entity *entity, controller_event event, uint32_t controller_id, uint64_t user_data,
                     const char *reason, void *context) {
    events *seen = context;
    seen->last_id = controller_id;
    seen->last_user_data = user_data;
    switch (event) {
        case CONTROLLER_MOVED:
            seen->moved++;
            break;
        case CONTROLLER_ARRIVED:
            seen->arrived++;
            if (seen->legs > 0) {
                seen->legs--;
                assert_true(controller_move_to_point(c, entity, seen->next, 10, 0, false, 7) != 0);
            }
            break;
        case CONTROLLER_FAILED:
            seen->failed++;
            snprintf(seen->reason, sizeof seen->reason, "%s", reason ? reason : "");
            break;
    }
}

static void run_ticks(fixture *fx, events *seen, int ticks) {
    for (int i = 0; i < ticks; i++) controller_tick(fx->c, TICK_S, on_event, seen);
}

static void test_move_to_point_arrives_once(void **state) {
    (void)state;
    fixture *fx = fixture_create();
    cell_entity *e = cell_add(fx->c, 1, CELL_ENTITY_REAL, fx->cls, 0, 0, 0);
    const float to[3] = {5, 0, 0};
    uint32_t id = controller_move_to_point(fx->c, e, to, 10, 0, true, 42); /* 1 m a tick */
    assert_true(id > 0);
    events seen = {0};
    run_ticks(fx, &seen, 4);
    assert_int_equal(seen.moved, 4);
    assert_int_equal(seen.arrived, 0);
    assert_true(fabsf(e->x - 4.0f) < 1e-4f);
    assert_true(fabsf(e->yaw - (float)(M_PI / 2)) < 1e-4f); /* faces +x */
    run_ticks(fx, &seen, 5);
    assert_int_equal(seen.arrived, 1);
    assert_int_equal(seen.last_id, id);
    assert_int_equal(seen.last_user_data, 42);
    assert_true(e->x == 5.0f && e->z == 0.0f);
    assert_false(controller_moving(e));
    assert_int_equal(controller_cancel(fx->c, e, id), -1); /* over */
    /* Stopping short: within 2 m of the point. */
    const float back[3] = {-5, 0, 0};
    controller_move_to_point(fx->c, e, back, 10, 2, false, 0);
    run_ticks(fx, &seen, 20);
    assert_int_equal(seen.arrived, 2);
    assert_true(fabsf(e->x - (-3.0f)) < 1e-4f);
    fixture_free(fx);
}

static void test_a_new_move_stops_the_old_one(void **state) {
    (void)state;
    fixture *fx = fixture_create();
    cell_entity *e = cell_add(fx->c, 1, CELL_ENTITY_REAL, fx->cls, 0, 0, 0);
    const float east[3] = {50, 0, 0}, north[3] = {0, 0, 3};
    uint32_t first = controller_move_to_point(fx->c, e, east, 10, 0, false, 1);
    uint32_t turn = controller_turn_to(fx->c, e, 1.0f, 1.0f, 3);
    assert_int_equal(controller_cancel(fx->c, e, first), -1); /* the turn stopped it */
    uint32_t second = controller_move_to_point(fx->c, e, north, 10, 0, false, 2);
    assert_true(first && turn && second && first != second && turn != second);
    assert_int_equal(controller_cancel(fx->c, e, turn), -1); /* and the move stopped the turn */
    events seen = {0};
    run_ticks(fx, &seen, 10);
    assert_int_equal(seen.arrived, 1);
    assert_int_equal(seen.last_id, second);
    assert_int_equal(seen.last_user_data, 2);
    assert_true(e->x == 0.0f && e->z == 3.0f);
    fixture_free(fx);
}

static void test_cancel_rules(void **state) {
    (void)state;
    fixture *fx = fixture_create();
    cell_entity *e = cell_add(fx->c, 1, CELL_ENTITY_REAL, fx->cls, 0, 0, 0);
    uint32_t trap = controller_new_id(e);
    assert_int_equal(cell_add_trap(fx->c, e, trap, 9, COORD_SHAPE_BOX, 5.0f, NULL, 0), 0);
    const float far[3] = {80, 0, 0};
    uint32_t move = controller_move_to_point(fx->c, e, far, 10, 0, false, 0);
    /* A trap's id removes the trap, and only it. */
    assert_int_equal(controller_cancel(fx->c, e, trap), 0);
    assert_int_equal(e->real->trap_count, 0);
    assert_true(controller_moving(e));
    assert_int_equal(controller_cancel(fx->c, e, trap), -1);
    /* The move's id stops the chain. */
    assert_int_equal(controller_cancel(fx->c, e, move), 0);
    assert_false(controller_moving(e));
    /* The turn's id, too. */
    uint32_t turn = controller_turn_to(fx->c, e, 2.0f, 0.5f, 0);
    assert_int_equal(controller_cancel(fx->c, e, turn), 0);
    assert_false(controller_moving(e));
    /* "Movement": everything, with no event. */
    controller_move_to_point(fx->c, e, far, 10, 0, false, 0);
    controller_stop(e);
    events seen = {0};
    run_ticks(fx, &seen, 3);
    assert_int_equal(seen.moved + seen.arrived + seen.failed, 0);
    assert_true(e->x == 0.0f);
    assert_int_equal(controller_cancel(fx->c, e, 0), -1);
    assert_int_equal(controller_cancel(fx->c, e, 12345), -1);
    fixture_free(fx);
}

static void test_move_to_entity_follows_then_fails(void **state) {
    (void)state;
    fixture *fx = fixture_create();
    cell_entity *hunter = cell_add(fx->c, 1, CELL_ENTITY_REAL, fx->cls, 0, 0, 0);
    cell_entity *quarry = cell_add(fx->c, 2, CELL_ENTITY_REAL, fx->cls, 20, 0, 0);
    assert_int_equal(controller_move_to_entity(fx->c, hunter, 99, 5, 1, true, 0), 0); /* nobody */
    assert_int_equal(controller_move_to_entity(fx->c, hunter, 1, 5, 1, true, 0), 0);  /* itself */
    uint32_t id = controller_move_to_entity(fx->c, hunter, 2, 5, 1, true, 5);
    events seen = {0};
    run_ticks(fx, &seen, 10); /* 5 m: the quarry is 15 m off */
    assert_true(fabsf(hunter->x - 5.0f) < 1e-3f);
    /* The quarry runs north: the hunter turns after it. */
    cell_move(fx->c, quarry, 20, 0, 40, 0);
    run_ticks(fx, &seen, 2);
    assert_true(hunter->z > 0.5f);
    assert_int_equal(seen.arrived, 0);
    cell_destroy(fx->c, quarry);
    run_ticks(fx, &seen, 1);
    assert_int_equal(seen.failed, 1);
    assert_int_equal(seen.last_id, id);
    assert_string_equal(seen.reason, "its target is gone");
    assert_false(controller_moving(hunter));
    run_ticks(fx, &seen, 3);
    assert_int_equal(seen.failed, 1); /* once */
    fixture_free(fx);
}

static void test_a_path_is_one_controller(void **state) {
    (void)state;
    fixture *fx = fixture_create();
    cell_entity *e = cell_add(fx->c, 1, CELL_ENTITY_REAL, fx->cls, 0, 0, 0);
    const float path[] = {3, 0, 0, 3, 0, 4, -2, 0, 4}; /* 3 + 4 + 5 = 12 m */
    uint32_t id = controller_follow_path(fx->c, e, path, 3, 10, 0, false, 8);
    assert_true(id > 0);
    events seen = {0};
    run_ticks(fx, &seen, 11);
    assert_int_equal(seen.arrived, 0);
    assert_int_equal(seen.moved, 11);
    assert_int_equal(seen.last_id, id);
    run_ticks(fx, &seen, 2);
    assert_int_equal(seen.arrived, 1);
    assert_int_equal(seen.last_id, id);
    assert_true(e->x == -2.0f && e->z == 4.0f);
    assert_int_equal(controller_follow_path(fx->c, e, path, 0, 10, 0, false, 0), 0);
    fixture_free(fx);
}

static void test_turn_to_takes_the_short_way(void **state) {
    (void)state;
    fixture *fx = fixture_create();
    cell_entity *e = cell_add(fx->c, 1, CELL_ENTITY_REAL, fx->cls, 0, 0, 0);
    cell_move(fx->c, e, 0, 0, 0, 3.0f);
    uint32_t id = controller_turn_to(fx->c, e, -3.0f, 1.0f, 0); /* 0.28 rad across pi, not 6 the long way */
    events seen = {0};
    run_ticks(fx, &seen, 2);
    assert_int_equal(seen.arrived, 0);
    assert_true(e->yaw > 3.0f || e->yaw < -3.0f);
    run_ticks(fx, &seen, 2);
    assert_int_equal(seen.arrived, 1);
    assert_int_equal(seen.last_id, id);
    assert_true(fabsf(e->yaw - (-3.0f)) < 1e-5f);
    fixture_free(fx);
}

static void test_a_patrol_from_the_callback(void **state) {
    (void)state;
    fixture *fx = fixture_create();
    cell_entity *e = cell_add(fx->c, 1, CELL_ENTITY_REAL, fx->cls, 0, 0, 0);
    const float first[3] = {2, 0, 0};
    controller_move_to_point(fx->c, e, first, 10, 0, false, 0);
    events seen = {.legs = 2, .next = {2, 0, 3}};
    run_ticks(fx, &seen, 20);
    assert_int_equal(seen.arrived, 3); /* the first, then two legs started by the callback */
    assert_int_equal(seen.legs, 0);
    assert_int_equal(seen.last_user_data, 7);
    assert_true(e->x == 2.0f && e->z == 3.0f);
    fixture_free(fx);
}

static void test_refusals(void **state) {
    (void)state;
    fixture *fx = fixture_create();
    cell_entity *e = cell_add(fx->c, 1, CELL_ENTITY_REAL, fx->cls, 0, 0, 0);
    cell_entity *ghost = cell_add(fx->c, 2, CELL_ENTITY_GHOST, fx->cls, 1, 0, 0);
    const float outside[3] = {500, 0, 0}, inside[3] = {5, 0, 0};
    assert_int_equal(controller_move_to_point(fx->c, e, outside, 10, 0, false, 0), 0);
    assert_int_equal(controller_move_to_point(fx->c, e, inside, 0, 0, false, 0), 0);
    assert_int_equal(controller_move_to_point(fx->c, e, inside, NAN, 0, false, 0), 0);
    assert_int_equal(controller_move_to_point(fx->c, e, inside, 10, -1, false, 0), 0);
    assert_int_equal(controller_move_to_point(fx->c, ghost, inside, 10, 0, false, 0), 0);
    assert_int_equal(controller_turn_to(fx->c, e, INFINITY, 1, 0), 0);
    assert_false(controller_moving(e));
    fixture_free(fx);
}

/* Half way along a path the entity moves to another cell: its chain,
 * saved and restored there, ends where the original's does, at the same
 * tick, with the same ids. */
static void test_a_chain_travels_exactly(void **state) {
    (void)state;
    fixture *fx = fixture_create(), *other = fixture_create();
    cell_entity *original = cell_add(fx->c, 1, CELL_ENTITY_REAL, fx->cls, 0, 0, 0);
    cell_entity *trip = cell_add(fx->c, 2, CELL_ENTITY_REAL, fx->cls, 0, 0, 0);
    const float path[] = {10, 0, 0, 10, 0, 10, 0, 0, 10, 0, 0, 20};
    uint32_t a = controller_follow_path(fx->c, original, path, 4, 7, 0.5f, true, 11);
    uint32_t b = controller_follow_path(fx->c, trip, path, 4, 7, 0.5f, true, 11);
    events seen = {0}, seen_other = {0};
    run_ticks(fx, &seen, 23);
    Tessera__Cluster__ControllerState *saved = controller_save(trip);
    assert_non_null(saved);
    /* Through the wire, as an offload sends it. */
    size_t length = tessera__cluster__controller_state__get_packed_size(saved);
    uint8_t *bytes = malloc(length);
    tessera__cluster__controller_state__pack(saved, bytes);
    controller_saved_free(saved);
    Tessera__Cluster__ControllerState *read = tessera__cluster__controller_state__unpack(NULL, length, bytes);
    free(bytes);
    assert_non_null(read);
    cell_entity *arrived = cell_add(other->c, 2, CELL_ENTITY_REAL, other->cls, trip->x, trip->y, trip->z);
    cell_move(other->c, arrived, trip->x, trip->y, trip->z, trip->yaw);
    controller_restore(other->c, arrived, read);
    tessera__cluster__controller_state__free_unpacked(read, NULL);
    cell_destroy(fx->c, trip);
    int ticks = 0;
    while ((seen.arrived == 0 || seen_other.arrived == 0) && ticks++ < 200) {
        controller_tick(fx->c, TICK_S, on_event, &seen);
        controller_tick(other->c, TICK_S, on_event, &seen_other);
        assert_int_equal(seen.arrived, seen_other.arrived); /* the same tick */
    }
    assert_int_equal(seen.arrived, 1);
    assert_int_equal(seen_other.last_id, b);
    assert_int_equal(seen.last_id, a);
    assert_int_equal(seen_other.last_user_data, 11);
    assert_true(original->x == arrived->x && original->z == arrived->z && original->yaw == arrived->yaw);
    assert_true(fabsf(arrived->z - 19.5f) < 1e-4f);
    /* Its id counter came along: the next id does not repeat one. */
    assert_true(controller_new_id(arrived) > b);
    fixture_free(fx);
    fixture_free(other);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_move_to_point_arrives_once),
        cmocka_unit_test(test_a_new_move_stops_the_old_one),
        cmocka_unit_test(test_cancel_rules),
        cmocka_unit_test(test_move_to_entity_follows_then_fails),
        cmocka_unit_test(test_a_path_is_one_controller),
        cmocka_unit_test(test_turn_to_takes_the_short_way),
        cmocka_unit_test(test_a_patrol_from_the_callback),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_a_chain_travels_exactly),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
