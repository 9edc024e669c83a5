/* test_cell.c -- a cell's traps and range queries (cellapp/cell.h), as the
 * game sees them through the on_trap hook. A box, a circle and a sphere trap
 * of radius 5 on one owner, with entities at 4.9, 5.0 and 5.1 m, in the
 * square's corner and above the ground: each trap holds exactly what its
 * shape says, the box as it always did. Then entities walk into and out of
 * the round traps without crossing their square, walk about inside them
 * (no second enter), go in and out between two flushes (nothing), the
 * owner walks, an entity is destroyed inside; a round trap is set again
 * with the members it had (as after a move between cellapps): those fire
 * no enter, and those not inside any more leave. The same in a 3D space,
 * where a circle is an upright cylinder. After every flush the set told by
 * the events is compared with a brute-force oracle of the rule (coord.h,
 * "Round shapes"). cell_query_range is checked against brute force for
 * random points, shapes and radii, with reals and ghosts, never the
 * asker, and its cut. The cell's list of what changed holds exactly the
 * entities a tick's passes must visit. */
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
#include "cell_real.h"

static const char *defs = "{\"format\":1,\"entities\":[{\"name\":\"Thing\",\"properties\":["
                          " {\"name\":\"hp\",\"type\":\"uint8\",\"flags\":\"ALL_CLIENTS\"}]}]}";

/* Entity ids stay below this; trap tags are 0 .. TRAPS - 1. */
#define MAX_IDS 4096
#define TRAPS 3

/* What the trap hook told, per tag: who is inside, and the events. */
typedef struct trap_log {
    uint8_t inside[MAX_IDS];
    int enters, leaves;
    int errors; /* a second enter, a leave of a non-member, a bad tag or owner */
} trap_log;

typedef struct fixture {
    cellapp_settings settings;
    cell_shared shared;
    space_layout *layout;
    cell *c;
    const entity_def_class *cls;
    entity_timer_ids timer_ids;
    cell_entity *owner;
    trap_log logs[TRAPS];
    coord_shape shapes[TRAPS];
    float radius;
} fixture;

// cppcheck-suppress constParameter ; cell_shared.on_trap passes the owner non-const
static void on_trap(void *host, cell_entity *owner, uint32_t tag, cell_entity *visitor, bool entered) {
    fixture *fx = host;
    if (tag >= TRAPS || owner != fx->owner || visitor->id >= MAX_IDS) {
        fx->logs[0].errors++;
        return;
    }
    trap_log *log = &fx->logs[tag];
    if (entered == (log->inside[visitor->id] != 0)) log->errors++;
    log->inside[visitor->id] = entered;
    if (entered)
        log->enters++;
    else
        log->leaves++;
}

static fixture *fixture_create(bool three_d) {
    fixture *fx = calloc(1, sizeof *fx);
    assert_non_null(fx);
    fx->settings.tick_hz = 10;
    fx->settings.position_precision = 1.0 / 64;
    fx->settings.yaw_steps = 256;
    fx->shared.settings = &fx->settings;
    fx->shared.self_id = 1;
    fx->timer_ids = (entity_timer_ids){1, 0};
    fx->shared.timer_ids = &fx->timer_ids;
    cell_real_install_hooks(&fx->shared);
    fx->shared.on_trap = on_trap;
    fx->shared.host = fx;
    char err[512];
    if (entity_def_load_string(defs, "test", &fx->shared.definitions, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        abort();
    }
    fx->cls = entity_def_registry_find_class(fx->shared.definitions, "Thing");
    fx->shared.schema = replication_schema_create(fx->shared.definitions);
    fx->shared.replication = replication_create(fx->shared.schema);
    const double min[3] = {-100, -100, -100}, max[3] = {100, 100, 100};
    fx->layout = space_layout_create("test", min, max, three_d, 1);
    fx->c = cell_create(&fx->shared, fx->layout);
    assert_non_null(fx->c);
    return fx;
}

static void fixture_free(fixture *fx) {
    cell_free(fx->c);
    space_layout_free(fx->layout);
    replication_free(fx->shared.replication);
    replication_schema_free(fx->shared.schema);
    entity_def_registry_free(fx->shared.definitions);
    free(fx);
}

static cell_entity *put(fixture *fx, uint64_t id, float x, float y, float z) {
    cell_entity *e = cell_add(fx->c, id, CELL_ENTITY_REAL, fx->cls, x, y, z);
    assert_non_null(e);
    return e;
}

static cell_entity *put_ghost(fixture *fx, uint64_t id, float x, float y, float z) {
    cell_entity *e = cell_add(fx->c, id, CELL_ENTITY_GHOST, fx->cls, x, y, z);
    assert_non_null(e);
    return e;
}

static void move(fixture *fx, uint64_t id, float x, float y, float z) {
    cell_entity *e = cell_find(fx->c, id);
    assert_non_null(e);
    cell_move(fx->c, e, x, y, z, 0);
}

/* The owner at (0, 0, 0) with a box (tag 0), a circle (1) and a sphere (2)
 * of `radius`. */
static void add_traps(fixture *fx, float radius) {
    fx->owner = put(fx, 1, 0, 0, 0);
    fx->radius = radius;
    for (uint32_t tag = 0; tag < TRAPS; tag++) {
        fx->shapes[tag] = (coord_shape)tag;
        uint32_t id = controller_new_id(fx->owner);
        assert_int_equal(cell_add_trap(fx->c, fx->owner, id, tag, fx->shapes[tag], radius, NULL, 0), 0);
    }
}

/* The rule, by brute force: in the square (a cube in 3D) of half-side r,
 * bounded in single precision, and for a round shape within r in double. */
static bool oracle_inside(const fixture *fx, coord_shape shape, const cell_entity *e) {
    const cell_entity *o = fx->owner;
    float r = fx->radius;
    const float lo[3] = {o->x - r, o->y - r, o->z - r};
    const float hi[3] = {o->x + r, o->y + r, o->z + r};
    if (e->x < lo[0] || e->x > hi[0] || e->z < lo[2] || e->z > hi[2]) return false;
    if (fx->c->three_d && (e->y < lo[1] || e->y > hi[1])) return false;
    double dx = (double)e->x - o->x, dy = (double)e->y - o->y, dz = (double)e->z - o->z;
    if (shape == COORD_SHAPE_CIRCLE) return dx * dx + dz * dz <= (double)r * r;
    if (shape == COORD_SHAPE_SPHERE) return dx * dx + dy * dy + dz * dz <= (double)r * r;
    return true;
}

/* Flushes, then checks every trap's members as told by its events against
 * the oracle, and that no event came twice. */
#define FLUSH(fx) flush_at((fx), __FILE__, __LINE__)
static void flush_at(fixture *fx, const char *file, int line) {
    for (uint32_t tag = 0; tag < TRAPS; tag++) fx->logs[tag].enters = fx->logs[tag].leaves = 0;
    coord_flush(fx->c->coord);
    for (uint32_t tag = 0; tag < TRAPS; tag++) {
        const trap_log *log = &fx->logs[tag];
        _assert_int_equal(log->errors, 0, file, line);
        for (size_t i = 0; i < fx->c->count; i++) {
            const cell_entity *e = fx->c->by_index[i];
            if (e == fx->owner || e->destroyed) continue;
            bool want = oracle_inside(fx, fx->shapes[tag], e);
            if (want != (log->inside[e->id] != 0))
                print_error("trap %u: entity %llu at (%g, %g, %g): expected %s\n", tag, (unsigned long long)e->id,
                            (double)e->x, (double)e->y, (double)e->z, want ? "inside" : "outside");
            _assert_int_equal(want, log->inside[e->id] != 0, file, line);
        }
    }
}

/* Entity `id` is inside (or not) the box, the circle and the sphere. */
#define EXPECT_INSIDE(fx, id, box, circle, sphere) expect_inside_at((fx), (id), (box), (circle), (sphere), __LINE__)
static void expect_inside_at(const fixture *fx, uint64_t id, bool box, bool circle, bool sphere, int line) {
    const bool want[TRAPS] = {box, circle, sphere};
    for (uint32_t tag = 0; tag < TRAPS; tag++) _assert_int_equal(fx->logs[tag].inside[id], want[tag], __FILE__, line);
}

/* The events of the last flush, per trap. */
#define EXPECT_EVENTS(fx, tag, in, out) expect_events_at((fx), (tag), (in), (out), __LINE__)
static void expect_events_at(const fixture *fx, uint32_t tag, int enters, int leaves, int line) {
    _assert_int_equal(fx->logs[tag].enters, enters, __FILE__, line);
    _assert_int_equal(fx->logs[tag].leaves, leaves, __FILE__, line);
}

enum { BOX = 0, CIRCLE = 1, SPHERE = 2 };

/* ---- the edges, in a 2D space --------------------------------------------- */

static void test_edges_at_the_radius(void **state) {
    (void)state;
    fixture *fx = fixture_create(false);
    add_traps(fx, 5.0f);
    put(fx, 10, 4.9f, 0, 0);
    put(fx, 11, 5.0f, 0, 0);      /* on the edge: inside */
    put(fx, 12, 5.1f, 0, 0);      /* outside every shape */
    put(fx, 13, 3.6f, 0, 3.6f);   /* 5.09 m: in the square's corner */
    put(fx, 14, 3.5f, 0, 3.5f);   /* 4.95 m */
    put(fx, 15, 0, 4.0f, 3.5f);   /* 3.5 m on the ground, 5.32 m in 3D */
    put(fx, 16, 0, 3.0f, 3.5f);   /* 4.61 m in 3D */
    put(fx, 17, 5.0f, 0, 5.0f);   /* the square's very corner, 7.07 m */
    put(fx, 18, 0, 0, -5.0f);     /* on the edge, the other way */
    put_ghost(fx, 19, -3, 0, -3); /* a ghost is caught too */
    FLUSH(fx);
    EXPECT_INSIDE(fx, 10, true, true, true);
    EXPECT_INSIDE(fx, 11, true, true, true);
    EXPECT_INSIDE(fx, 12, false, false, false);
    EXPECT_INSIDE(fx, 13, true, false, false);
    EXPECT_INSIDE(fx, 14, true, true, true);
    EXPECT_INSIDE(fx, 15, true, true, false);
    EXPECT_INSIDE(fx, 16, true, true, true);
    EXPECT_INSIDE(fx, 17, true, false, false);
    EXPECT_INSIDE(fx, 18, true, true, true);
    EXPECT_INSIDE(fx, 19, true, true, true);
    EXPECT_EVENTS(fx, BOX, 9, 0);
    EXPECT_EVENTS(fx, CIRCLE, 7, 0);
    EXPECT_EVENTS(fx, SPHERE, 6, 0);

    /* Into the round shapes and out of them, all within the square: no
     * square edge is crossed, the box hears nothing. 15 only rises. */
    move(fx, 13, 3.0f, 0, 3.0f);
    move(fx, 14, 3.6f, 0, 3.6f);
    move(fx, 15, 0, 2.0f, 3.5f);
    FLUSH(fx);
    EXPECT_INSIDE(fx, 13, true, true, true);
    EXPECT_INSIDE(fx, 14, true, false, false);
    EXPECT_INSIDE(fx, 15, true, true, true);
    EXPECT_EVENTS(fx, BOX, 0, 0);
    EXPECT_EVENTS(fx, CIRCLE, 1, 1);
    EXPECT_EVENTS(fx, SPHERE, 2, 1);

    /* Out across the radius by 0.1 m, and back onto it. */
    move(fx, 10, 5.1f, 0, 0);
    FLUSH(fx);
    EXPECT_INSIDE(fx, 10, false, false, false);
    EXPECT_EVENTS(fx, BOX, 0, 1);
    EXPECT_EVENTS(fx, CIRCLE, 0, 1);
    move(fx, 10, 5.0f, 0, 0);
    FLUSH(fx);
    EXPECT_INSIDE(fx, 10, true, true, true);
    EXPECT_EVENTS(fx, BOX, 1, 0);
    EXPECT_EVENTS(fx, SPHERE, 1, 0);

    /* Walking about inside: no second enter, whatever the flushes. */
    for (int step = 0; step < 6; step++) {
        move(fx, 16, 0.5f * (float)step - 1.0f, 3.0f, 2.0f);
        move(fx, 13, 3.0f, 0, 3.0f - 0.25f * (float)step);
        FLUSH(fx);
        for (uint32_t tag = 0; tag < TRAPS; tag++) EXPECT_EVENTS(fx, tag, 0, 0);
    }

    /* In and out again between two flushes: nothing at all. */
    move(fx, 12, 1.0f, 0, 0);
    move(fx, 12, 5.1f, 0, 0);
    move(fx, 14, 3.0f, 0, 3.0f);
    move(fx, 14, 3.6f, 0, 3.6f);
    FLUSH(fx);
    for (uint32_t tag = 0; tag < TRAPS; tag++) EXPECT_EVENTS(fx, tag, 0, 0);

    /* The owner walks 0.2 m along X: 12 (5.1 m) comes within 4.9 m and
     * 18 (on the edge, 0.2 m aside) goes 5.004 m away, in the square. */
    cell_move(fx->c, fx->owner, 0.2f, 0, 0, 0);
    FLUSH(fx);
    EXPECT_INSIDE(fx, 12, true, true, true);
    EXPECT_INSIDE(fx, 18, true, false, false);

    /* Destroyed inside: no longer inside, and no hook runs (as for a box:
     * there is no entity to hand over). */
    cell_entity *doomed = cell_find(fx->c, 11);
    cell_destroy(fx->c, doomed);
    FLUSH(fx);
    for (uint32_t tag = 0; tag < TRAPS; tag++) {
        EXPECT_EVENTS(fx, tag, 0, 0);
        assert_false(coord_watcher_sees(fx->c->coord, fx->owner->real->traps[tag].watcher, doomed->coord_id));
    }
    fixture_free(fx);
}

/* A round trap set again with the members it had, as a move between
 * cellapps does: those inside fire no enter; those no longer inside leave;
 * one that was not a member enters. */
static void test_seeded_round_trap(void **state) {
    (void)state;
    fixture *fx = fixture_create(false);
    fx->owner = put(fx, 1, 0, 0, 0);
    fx->radius = 5.0f;
    put(fx, 10, 4.0f, 0, 0);    /* a member, inside */
    put(fx, 11, 3.6f, 0, 3.6f); /* a member, now in the corner */
    put(fx, 12, 9.0f, 0, 0);    /* a member, now out of the square */
    put(fx, 13, 0, 0, 4.9f);    /* not a member, inside */
    for (uint32_t tag = 0; tag < TRAPS; tag++) fx->shapes[tag] = COORD_SHAPE_CIRCLE;
    const uint64_t members[] = {10, 11, 12};
    for (uint64_t id = 10; id <= 12; id++) fx->logs[0].inside[id] = 1;
    assert_int_equal(cell_add_trap(fx->c, fx->owner, 1, 0, COORD_SHAPE_CIRCLE, 5.0f, members, 3), 0);
    assert_int_equal(fx->owner->real->traps[0].shape, COORD_SHAPE_CIRCLE);
    coord_flush(fx->c->coord);
    assert_int_equal(fx->logs[0].errors, 0);
    EXPECT_EVENTS(fx, 0, 1, 2);
    assert_int_equal(fx->logs[0].inside[10], 1);
    assert_int_equal(fx->logs[0].inside[11], 0);
    assert_int_equal(fx->logs[0].inside[12], 0);
    assert_int_equal(fx->logs[0].inside[13], 1);
    /* A bad shape or radius is refused. */
    assert_int_equal(cell_add_trap(fx->c, fx->owner, 2, 0, (coord_shape)3, 5.0f, NULL, 0), -1);
    assert_int_equal(cell_add_trap(fx->c, fx->owner, 2, 0, COORD_SHAPE_SPHERE, -1.0f, NULL, 0), -1);
    assert_int_equal(fx->owner->real->trap_count, 1);
    fixture_free(fx);
}

/* ---- a 3D space: the square is a cube, a circle an upright cylinder ------- */

static void test_edges_in_3d(void **state) {
    (void)state;
    fixture *fx = fixture_create(true);
    add_traps(fx, 5.0f);
    put(fx, 10, 0, 4.9f, 3.0f);    /* 3 m on the ground, 4.9 m up: 5.74 m */
    put(fx, 11, 0, 5.5f, 0);       /* right above, beyond the cube */
    put(fx, 12, 3.0f, 4.0f, 0);    /* 5.0 m in 3D: on the sphere */
    put(fx, 13, 2.0f, 4.0f, 3.0f); /* 5.39 m in 3D */
    FLUSH(fx);
    EXPECT_INSIDE(fx, 10, true, true, false);
    EXPECT_INSIDE(fx, 11, false, false, false);
    EXPECT_INSIDE(fx, 12, true, true, true);
    EXPECT_INSIDE(fx, 13, true, true, false);
    /* Down into the sphere, up out of the cube. */
    move(fx, 10, 0, 3.9f, 3.0f);
    move(fx, 11, 0, 5.0f, 0);
    FLUSH(fx);
    EXPECT_INSIDE(fx, 10, true, true, true);
    EXPECT_INSIDE(fx, 11, true, true, true);
    EXPECT_EVENTS(fx, BOX, 1, 0);
    EXPECT_EVENTS(fx, CIRCLE, 1, 0);
    EXPECT_EVENTS(fx, SPHERE, 2, 0);
    fixture_free(fx);
}

/* ---- random walkers against the oracle --------------------------------------- */

static uint64_t next_random(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static float random_between(uint64_t *s, float lo, float hi) {
    return lo + (hi - lo) * (float)((double)(next_random(s) >> 11) / (double)(UINT64_C(1) << 53));
}

/* Walkers around the three traps, half of them on a 0.5 m grid so that
 * they land on the edges; the owner walks too. */
static void run_walkers(bool three_d, uint64_t seed) {
    fixture *fx = fixture_create(three_d);
    add_traps(fx, 5.0f);
    uint64_t rng = seed;
    enum { WALKERS = 60, STEPS = 150 };
    for (uint64_t id = 10; id < 10 + WALKERS; id++) {
        float x = random_between(&rng, -8, 8), y = random_between(&rng, -6, 6), z = random_between(&rng, -8, 8);
        if (id % 3)
            put(fx, id, x, y, z);
        else
            put_ghost(fx, id, x, y, z);
    }
    FLUSH(fx);
    for (int step = 0; step < STEPS; step++) {
        for (uint64_t id = 10; id < 10 + WALKERS; id++) {
            if (next_random(&rng) % 3) continue;
            const cell_entity *e = cell_find(fx->c, id);
            float p[3] = {e->x + random_between(&rng, -1, 1), e->y + random_between(&rng, -1, 1),
                          e->z + random_between(&rng, -1, 1)};
            for (int a = 0; a < 3; a++) {
                if (id % 2) p[a] = roundf(p[a] * 2) / 2;
                p[a] = fminf(fmaxf(p[a], -9), 9);
            }
            move(fx, id, p[0], p[1], p[2]);
        }
        if (step % 10 == 0)
            cell_move(fx->c, fx->owner, random_between(&rng, -1, 1), random_between(&rng, -1, 1),
                      random_between(&rng, -1, 1), 0);
        FLUSH(fx);
    }
    fixture_free(fx);
}

static void test_walkers_2d(void **state) {
    (void)state;
    run_walkers(false, 0x5eed1);
}

static void test_walkers_3d(void **state) {
    (void)state;
    run_walkers(true, 0x5eed2);
}

/* ---- cell_query_range against brute force ------------------------------------- */

static int compare_ids(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void run_queries(bool three_d, uint64_t seed) {
    fixture *fx = fixture_create(three_d);
    uint64_t rng = seed;
    enum { ENTITIES = 800, QUERIES = 300 };
    for (uint64_t id = 1; id <= ENTITIES; id++) {
        float x = random_between(&rng, -90, 90), y = random_between(&rng, -20, 20), z = random_between(&rng, -90, 90);
        if (id % 4 == 0) { /* on a 1 m grid: exact distances */
            x = roundf(x);
            y = roundf(y);
            z = roundf(z);
        }
        if (id % 3)
            put(fx, id, x, y, z);
        else
            put_ghost(fx, id, x, y, z);
    }
    uint64_t got[ENTITIES] = {0}, want[ENTITIES] = {0};
    for (int q = 0; q < QUERIES; q++) {
        cell_entity *around = cell_find(fx->c, 1 + next_random(&rng) % ENTITIES);
        /* The asker may have just moved: the query sees where it is now. */
        if (q % 5 == 0) cell_move(fx->c, around, around->x + 0.5f, around->y, around->z, 0);
        coord_shape shape = (coord_shape)(next_random(&rng) % 3);
        float radius = q % 2 ? (float)(next_random(&rng) % 30) : random_between(&rng, 0, 30);
        fx->owner = around;
        fx->radius = radius;
        size_t want_count = 0;
        for (size_t i = 0; i < fx->c->count; i++) {
            const cell_entity *e = fx->c->by_index[i];
            if (e != around && oracle_inside(fx, shape, e)) want[want_count++] = e->id;
        }
        size_t count = cell_query_range(fx->c, around, shape, radius, got, ENTITIES);
        assert_int_equal(count, want_count);
        qsort(got, count, sizeof *got, compare_ids);
        qsort(want, want_count, sizeof *want, compare_ids);
        for (size_t i = 0; i < count; i++) assert_int_equal(got[i], want[i]);
        /* Cut: the total, and no more than `max` written. */
        if (want_count > 1) {
            size_t max = want_count / 2;
            got[max] = UINT64_MAX;
            assert_int_equal(cell_query_range(fx->c, around, shape, radius, got, max), want_count);
            assert_true(got[max] == UINT64_MAX);
            for (size_t i = 0; i < max; i++)
                assert_non_null(bsearch(&got[i], want, want_count, sizeof *want, compare_ids));
        }
        /* Counting only. */
        assert_int_equal(cell_query_range(fx->c, around, shape, radius, NULL, 0), want_count);
    }
    /* Bad radii and shapes find nothing. */
    cell_entity *any = cell_find(fx->c, 1);
    assert_int_equal(cell_query_range(fx->c, any, COORD_SHAPE_CIRCLE, -1.0f, got, ENTITIES), 0);
    assert_int_equal(cell_query_range(fx->c, any, COORD_SHAPE_CIRCLE, NAN, got, ENTITIES), 0);
    assert_int_equal(cell_query_range(fx->c, any, (coord_shape)5, 10.0f, got, ENTITIES), 0);
    fixture_free(fx);
}

static void test_queries_2d(void **state) {
    (void)state;
    run_queries(false, 0xfeed1);
}

static void test_queries_3d(void **state) {
    (void)state;
    run_queries(true, 0xfeed2);
}

/* Whether `entity` is on its cell's list of what changed. */
static bool listed(const cell *c, const cell_entity *entity) {
    for (size_t i = 0; i < c->changed_count; i++)
        if (c->changed[i] == entity) return entity->listed;
    return false;
}

/* The list of what changed: an idle entity is never on it; a move, a
 * property write (through the state, as game code writes), a broadcast
 * and a destruction put an entity on it once; the pack encodes exactly
 * the dirty ones; the end of the tick empties it and reaps the destroyed;
 * a write after the dirty set is cleared lists the entity again. A real
 * whose haunts are still to be worked out stays listed from tick to tick. */
static void test_changed_list(void **state) {
    (void)state;
    fixture *fx = fixture_create(false);
    cell *c = fx->c;
    cell_entity *idle = put(fx, 1, 0, 0, 0), *walker = put(fx, 2, 10, 0, 10), *writer = put(fx, 3, -10, 0, -10);
    cell_entity *caller = put(fx, 4, 20, 0, 20), *doomed = put_ghost(fx, 5, 30, 0, 30);
    assert_int_equal(c->changed_count, 5); /* new, each once */
    /* A new real's haunts are still to be worked out (haunt_tick, not run
     * here): the reals stay listed for the next tick, the ghost does not. */
    cell_end_tick(c);
    assert_int_equal(c->changed_count, 4);
    assert_true(idle->listed && !idle->is_new && !doomed->listed);
    cell_entity *reals[] = {idle, walker, writer, caller};
    for (size_t i = 0; i < 4; i++) reals[i]->real->haunts_stale = false;
    cell_end_tick(c);
    assert_int_equal(c->changed_count, 0);
    assert_false(idle->listed || idle->is_new);

    move(fx, 2, 11, 0, 10);
    move(fx, 2, 12, 0, 10);
    uint16_t hp = entity_def_class_find_property(fx->cls, "hp")->id;
    assert_int_equal(entity_state_set_uint(writer->state, hp, 0, 7), 0);
    assert_int_equal(entity_state_set_uint(writer->state, hp, 0, 8), 0);
    cell_queue_broadcast(caller, 1, NULL, 0);
    cell_destroy(c, doomed);
    assert_int_equal(c->changed_count, 4);
    assert_false(listed(c, idle));
    assert_true(listed(c, walker) && listed(c, writer) && listed(c, caller) && listed(c, doomed));

    cell_pack(c);
    assert_true(writer->packed);
    assert_false(walker->packed || caller->packed || idle->packed);
    for (size_t i = 0; i < c->changed_count; i++) {
        entity_state_clear_dirty(c->changed[i]->state);
        cell_clear_broadcasts(c->changed[i]);
    }
    assert_true(walker->real->haunts_stale); /* a move makes its haunts stale */
    walker->real->haunts_stale = false;      /* ... and haunt_tick works them out */
    cell_end_tick(c);
    assert_int_equal(c->changed_count, 0);
    assert_null(cell_find(c, 5));
    assert_int_equal(c->count, 4);
    assert_false(walker->moved || writer->packed || writer->listed);

    /* Cleared: the next write lists it again, and the pack finds it. */
    assert_int_equal(entity_state_set_uint(writer->state, hp, 0, 9), 0);
    assert_true(listed(c, writer));
    assert_int_equal(c->changed_count, 1);
    cell_pack(c);
    assert_true(writer->packed);
    fixture_free(fx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_changed_list),      cmocka_unit_test(test_edges_at_the_radius),
        cmocka_unit_test(test_seeded_round_trap), cmocka_unit_test(test_edges_in_3d),
        cmocka_unit_test(test_walkers_2d),        cmocka_unit_test(test_walkers_3d),
        cmocka_unit_test(test_queries_2d),        cmocka_unit_test(test_queries_3d),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
