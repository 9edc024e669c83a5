/* test_witness.c -- a witness on a real space (cellapp/space, coord,
 * replication, budget), its stream decoded by the real decoder: detail
 * levels in both directions, the audience of the own entity, alias reuse
 * after leaving, and the budget's starvation bound with many entities in
 * view. */
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

static const char *defs =
    "{\"format\":1,\"entities\":[{\"name\":\"Thing\",\"properties\":["
    " {\"name\":\"far_prop\",\"type\":\"uint8\",\"flags\":\"ALL_CLIENTS\"},"
    " {\"name\":\"medium_prop\",\"type\":\"uint8\",\"flags\":\"OTHER_CLIENTS\",\"detail\":\"medium\"},"
    " {\"name\":\"near_prop\",\"type\":\"uint8\",\"flags\":\"ALL_CLIENTS\",\"detail\":\"near\"},"
    " {\"name\":\"own_prop\",\"type\":\"uint8\",\"flags\":\"OWN_CLIENT\"},"
    " {\"name\":\"private_prop\",\"type\":\"uint8\",\"flags\":\"CELL_PRIVATE\"}]}]}";

enum { FAR_PROP, MEDIUM_PROP, NEAR_PROP, OWN_PROP, PRIVATE_PROP };

#define MAX_ALIASES 1024

/* The client of the witness under test. */
typedef struct client {
    const volatile_codec_config *config;
    unsigned alias_bits;
    entity_state *states[MAX_ALIASES];
    bool owner[MAX_ALIASES];
    uint64_t entity_of[MAX_ALIASES];
    volatile_track tracks[MAX_ALIASES];
    float x[MAX_ALIASES];
    uint32_t last_record[MAX_ALIASES];
    uint32_t tick;
    uint32_t longest_gap;
    uint64_t bytes;
} client;

static entity_state *client_enter(void *ctx, uint32_t alias, uint64_t entity_id, const entity_def_class *cls,
                                  bool is_owner) {
    client *c = ctx;
    entity_state_free(c->states[alias]);
    c->states[alias] = entity_state_create(cls);
    c->owner[alias] = is_owner;
    c->entity_of[alias] = entity_id;
    volatile_track_init(&c->tracks[alias]);
    c->last_record[alias] = c->tick;
    return c->states[alias];
}

static void client_note(client *c, uint32_t alias) {
    uint32_t gap = c->tick - c->last_record[alias];
    if (gap > c->longest_gap) c->longest_gap = gap;
    c->last_record[alias] = c->tick;
}

static entity_state *client_find(void *ctx, uint32_t alias, bool *is_owner) {
    client *c = ctx;
    if (alias >= MAX_ALIASES || !c->states[alias]) return NULL;
    *is_owner = c->owner[alias];
    client_note(c, alias);
    return c->states[alias];
}

static int client_move(void *ctx, uint32_t alias, bit_reader *r) {
    client *c = ctx;
    if (alias >= MAX_ALIASES || !c->states[alias]) {
        int rc = volatile_codec_skip(r, c->config);
        return rc < 0 ? rc : 0;
    }
    float y, z, yaw;
    int rc = volatile_codec_decode(r, &c->tracks[alias], c->config, &c->x[alias], &y, &z, &yaw);
    if (rc < 0) return rc;
    client_note(c, alias);
    return 1;
}

static void client_leave(void *ctx, uint32_t alias) {
    client *c = ctx;
    entity_state_free(c->states[alias]);
    c->states[alias] = NULL;
    c->entity_of[alias] = 0;
}

static const replication_decode_callbacks client_callbacks = {
    .enter = client_enter,
    .find = client_find,
    .move = client_move,
    .leave = client_leave,
};

typedef struct fixture {
    cellapp_settings settings;
    cell_shared shared;
    space_layout *layout;
    cell *c;
    const entity_def_class *cls;
    client cl;
} fixture;

static void fixture_settings(cellapp_settings *settings, int64_t bytes_per_second) {
    settings->tick_hz = 10;
    settings->position_precision = 1.0 / 64;
    settings->yaw_steps = 256;
    witness_config *s = &settings->witness;
    s->tick_hz = 10;
    s->view_radius = 50;
    s->view_hysteresis = 5;
    s->client_bytes_per_second = bytes_per_second;
    s->max_aliases = MAX_ALIASES;
    s->alias_cooldown_ms = 1000;
    s->detail_near_distance = 15;
    s->detail_medium_distance = 30;
    s->detail_hysteresis = 1;
    /* Unlimited: every change goes every tick, whatever the distance. */
    bool unlimited = bytes_per_second >= 100000000;
    s->update_near_distance = unlimited ? 1e5 : 10;
    s->update_far_distance = unlimited ? 2e5 : 40;
}

static fixture *fixture_create(int64_t bytes_per_second) {
    fixture *fx = calloc(1, sizeof *fx);
    fixture_settings(&fx->settings, bytes_per_second);
    cell_shared *shared = &fx->shared;
    shared->settings = &fx->settings;
    shared->self_id = 1;
    static entity_timer_ids timer_ids = {1, 0};
    shared->timer_ids = &timer_ids;
    cell_real_install_hooks(shared);
    char err[512];
    if (entity_def_load_string(defs, "test", &shared->definitions, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        abort();
    }
    fx->cls = entity_def_registry_find_class(shared->definitions, "Thing");
    const double min[3] = {-500, -100, -500}, max[3] = {500, 100, 500};
    shared->schema = replication_schema_create(shared->definitions);
    shared->replication = replication_create(shared->schema);
    bit_writer_init(&shared->stream);
    fx->layout = space_layout_create("test", min, max, false, 1);
    fx->c = cell_create(shared, fx->layout);
    assert_non_null(fx->c);
    fx->cl.config = &fx->c->volatile_config;
    fx->cl.alias_bits = replication_alias_bits(MAX_ALIASES);
    return fx;
}

static void fixture_free(fixture *fx) {
    for (int a = 0; a < MAX_ALIASES; a++) entity_state_free(fx->cl.states[a]);
    cell_free(fx->c);
    space_layout_free(fx->layout);
    bit_writer_close(&fx->shared.stream);
    replication_free(fx->shared.replication);
    replication_schema_free(fx->shared.schema);
    entity_def_registry_free(fx->shared.definitions);
    free(fx);
}

/* One cell tick as cellapp_tick runs it, for the witness of `viewer`; its
 * ViewUpdate is decoded into the fixture's client. */
static void tick(fixture *fx, cell_entity *viewer) {
    cell *c = fx->c;
    cell_shared *shared = c->shared;
    coord_flush(c->coord);
    replication_begin_tick(shared->replication, ++shared->replication_tick);
    cell_pack(c);
    witness_notify_changes(c);
    const uint8_t *payload;
    size_t length = witness_update(cell_entity_witness(viewer), c, viewer, &payload);
    fx->cl.tick++;
    if (length) {
        fx->cl.bytes += length;
        Tessera__Client__ServerToClient *message = tessera__client__server_to_client__unpack(NULL, length, payload);
        assert_non_null(message);
        assert_int_equal(message->body_case, TESSERA__CLIENT__SERVER_TO_CLIENT__BODY_VIEW);
        bit_reader r;
        bit_reader_init(&r, message->view->stream.data, message->view->stream.len);
        assert_int_equal(
            replication_decode_stream(&r, shared->schema, fx->cl.alias_bits, &client_callbacks, &fx->cl, NULL), 0);
        tessera__client__server_to_client__free_unpacked(message, NULL);
    }
    for (size_t i = 0; i < c->count; i++) entity_state_clear_dirty(c->by_index[i]->state);
    cell_end_tick(c);
}

static int alias_of(const fixture *fx, uint64_t entity_id) {
    for (int a = 0; a < MAX_ALIASES; a++)
        if (fx->cl.states[a] && fx->cl.entity_of[a] == entity_id) return a;
    return -1;
}

static uint64_t held(const fixture *fx, uint64_t entity_id, uint16_t prop) {
    int alias = alias_of(fx, entity_id);
    assert_true(alias >= 0);
    uint64_t value = 99;
    assert_int_equal(entity_state_get_uint(fx->cl.states[alias], prop, 0, &value), 0);
    return value;
}

static void set(cell_entity *e, uint16_t prop, uint64_t value) {
    assert_int_equal(entity_state_set_uint(e->state, prop, 0, value), 0);
}

/* A far observer does not get near-only (or medium) properties; coming near
 * it gets them, current; going far again it stops getting them. */
static void test_detail_both_directions(void **state) {
    (void)state;
    fixture *fx = fixture_create(100000000);
    cell *c = fx->c;
    cell_entity *viewer = cell_add(c, 1, CELL_ENTITY_REAL, fx->cls, 0, 0, 0);
    cell_entity *other = cell_add(c, 2, CELL_ENTITY_REAL, fx->cls, 40, 0, 0);
    witness_attach(c, viewer);
    set(other, FAR_PROP, 7);
    set(other, MEDIUM_PROP, 3);
    set(other, NEAR_PROP, 5);
    tick(fx, viewer);
    assert_int_equal(held(fx, 2, FAR_PROP), 7);
    assert_int_equal(held(fx, 2, MEDIUM_PROP), 0); /* 40 m: far */
    assert_int_equal(held(fx, 2, NEAR_PROP), 0);

    set(other, NEAR_PROP, 6);
    set(other, FAR_PROP, 8);
    tick(fx, viewer);
    assert_int_equal(held(fx, 2, FAR_PROP), 8);
    assert_int_equal(held(fx, 2, NEAR_PROP), 0);

    cell_move(c, other, 25, 0, 0, 0); /* medium */
    tick(fx, viewer);
    assert_int_equal(held(fx, 2, MEDIUM_PROP), 3);
    assert_int_equal(held(fx, 2, NEAR_PROP), 0);

    cell_move(c, other, 10, 0, 0, 0); /* near: current values */
    tick(fx, viewer);
    assert_int_equal(held(fx, 2, NEAR_PROP), 6);
    assert_int_equal(held(fx, 2, MEDIUM_PROP), 3);
    assert_float_equal(fx->cl.x[alias_of(fx, 2)], 10, 1.0 / 64);

    cell_move(c, other, 45, 0, 0, 0); /* far again */
    tick(fx, viewer);
    set(other, NEAR_PROP, 9);
    set(other, MEDIUM_PROP, 4);
    set(other, FAR_PROP, 10);
    tick(fx, viewer);
    assert_int_equal(held(fx, 2, NEAR_PROP), 6); /* not sent while far */
    assert_int_equal(held(fx, 2, MEDIUM_PROP), 3);
    assert_int_equal(held(fx, 2, FAR_PROP), 10);

    cell_move(c, other, 5, 0, 0, 0);
    tick(fx, viewer);
    assert_int_equal(held(fx, 2, NEAR_PROP), 9);
    assert_int_equal(held(fx, 2, MEDIUM_PROP), 4);
    fixture_free(fx);
}

/* The own client gets its own entity's OWN_CLIENT properties, never another
 * entity's, and nobody gets CELL_PRIVATE ones. */
static void test_own_audience(void **state) {
    (void)state;
    fixture *fx = fixture_create(100000000);
    cell *c = fx->c;
    cell_entity *viewer = cell_add(c, 1, CELL_ENTITY_REAL, fx->cls, 0, 0, 0);
    cell_entity *other = cell_add(c, 2, CELL_ENTITY_REAL, fx->cls, 5, 0, 0);
    witness_attach(c, viewer);
    tick(fx, viewer);
    set(viewer, OWN_PROP, 11);
    set(viewer, PRIVATE_PROP, 12);
    set(other, OWN_PROP, 13);
    set(other, PRIVATE_PROP, 14);
    set(viewer, MEDIUM_PROP, 15); /* OTHER_CLIENTS: never to the owner */
    tick(fx, viewer);
    assert_true(fx->cl.owner[alias_of(fx, 1)]);
    assert_int_equal(held(fx, 1, OWN_PROP), 11);
    assert_int_equal(held(fx, 1, PRIVATE_PROP), 0);
    assert_int_equal(held(fx, 1, MEDIUM_PROP), 0);
    assert_int_equal(held(fx, 2, OWN_PROP), 0);
    assert_int_equal(held(fx, 2, PRIVATE_PROP), 0);
    fixture_free(fx);
}

/* An entity that leaves frees its alias only after the cooldown: the next
 * one to enter gets another, and the client never applies a record to the
 * wrong entity. */
static void test_alias_not_reused_at_once(void **state) {
    (void)state;
    fixture *fx = fixture_create(100000000);
    cell *c = fx->c;
    cell_entity *viewer = cell_add(c, 1, CELL_ENTITY_REAL, fx->cls, 0, 0, 0);
    cell_entity *first = cell_add(c, 2, CELL_ENTITY_REAL, fx->cls, 5, 0, 0);
    witness_attach(c, viewer);
    tick(fx, viewer);
    int first_alias = alias_of(fx, 2);
    assert_true(first_alias >= 0);
    cell_destroy(c, first);
    tick(fx, viewer);
    assert_int_equal(alias_of(fx, 2), -1);
    cell_add(c, 3, CELL_ENTITY_REAL, fx->cls, 6, 0, 0);
    tick(fx, viewer);
    int second_alias = alias_of(fx, 3);
    assert_true(second_alias >= 0);
    assert_int_not_equal(second_alias, first_alias);
    fixture_free(fx);
}

/* 300 entities walking in view of a client with a small budget: enters
 * all arrive, every entity gets a record at least once a second, and the
 * client receives about its budget. */
static void test_budget_starvation_bound(void **state) {
    (void)state;
    const int64_t budget = 2000;
    fixture *fx = fixture_create(budget);
    cell *c = fx->c;
    cell_entity *viewer = cell_add(c, 1, CELL_ENTITY_REAL, fx->cls, 0, 0, 0);
    witness_attach(c, viewer);
    enum { N = 300 };
    cell_entity *walkers[N];
    for (int i = 0; i < N; i++) {
        int column = i % 20, row = i / 20; /* a 20-wide grid, 4 m by 5 m */
        walkers[i] =
            cell_add(c, 10 + (uint64_t)i, CELL_ENTITY_REAL, fx->cls, (float)column * 4 - 40, 0, (float)row * 5 - 40);
    }
    tick(fx, viewer);
    for (int i = 0; i < N; i++) assert_true(alias_of(fx, 10 + (uint64_t)i) >= 0);
    fx->cl.longest_gap = 0;
    uint64_t bytes_before = fx->cl.bytes;
    const int ticks = 50;
    for (int t = 0; t < ticks; t++) {
        for (int i = 0; i < N; i++) {
            cell_entity *w = walkers[i];
            float dx = (float)sin(t * 0.3 + i) * 0.5f;
            cell_move(c, w, w->x + dx, 0, w->z, w->yaw);
            if ((t + i) % 7 == 0) set(w, FAR_PROP, (uint64_t)(t % 200));
        }
        tick(fx, viewer);
    }
    /* Nothing waits more than a second (10 ticks) between records. */
    assert_true(fx->cl.longest_gap <= 10);
    /* Forced records may overspend: the debt is paid back, so the long-run
     * rate stays near the budget (within the one-second forcing). */
    double per_second = (double)(fx->cl.bytes - bytes_before) / (ticks / 10.0);
    assert_true(per_second < budget * 3);
    /* And the client holds every entity's latest value, a second after the
     * last change, however much the budget held back. */
    for (int t = 0; t < 12; t++) tick(fx, viewer);
    for (int i = 0; i < N; i++) {
        uint64_t value;
        entity_state_get_uint(walkers[i]->state, FAR_PROP, 0, &value);
        assert_int_equal(held(fx, 10 + (uint64_t)i, FAR_PROP), value);
    }
    fixture_free(fx);
}

/* A congested client (its baseapp says it does not read) gets only enters
 * and leaves; once it drains, one tick brings it the latest positions and
 * values, not the changes in between. */
static void test_congested_client_gets_latest_state(void **state) {
    (void)state;
    fixture *fx = fixture_create(100000000);
    cell *c = fx->c;
    cell_entity *viewer = cell_add(c, 1, CELL_ENTITY_REAL, fx->cls, 0, 0, 0);
    cell_entity *walker = cell_add(c, 2, CELL_ENTITY_REAL, fx->cls, 5, 0, 0);
    witness_attach(c, viewer);
    tick(fx, viewer);
    witness_set_congested(cell_entity_witness(viewer), true);
    uint64_t bytes = fx->cl.bytes;
    for (int t = 0; t < 20; t++) {
        cell_move(c, walker, 5 + 0.5f * (float)t, 0, 0, 0);
        set(walker, FAR_PROP, (uint64_t)t);
        tick(fx, viewer);
    }
    assert_int_equal(fx->cl.bytes, bytes); /* nothing for the walker */
    cell_add(c, 3, CELL_ENTITY_REAL, fx->cls, 7, 0, 0);
    tick(fx, viewer);
    assert_true(alias_of(fx, 3) >= 0); /* an enter still goes */
    assert_int_equal(held(fx, 2, FAR_PROP), 0);
    witness_set_congested(cell_entity_witness(viewer), false);
    uint64_t before = fx->cl.bytes;
    tick(fx, viewer);
    assert_int_equal(held(fx, 2, FAR_PROP), 19);
    assert_float_equal(fx->cl.x[alias_of(fx, 2)], 14.5, 1.0 / 64);
    /* One packet with one UPDATE and one MOVE, not twenty of each. */
    assert_true(fx->cl.bytes - before < 40);
    fixture_free(fx);
}

/* Pacing across a detail boundary: the finer level comes at once, the
 * coarser one only past the hysteresis. */
static void test_detail_hysteresis(void **state) {
    (void)state;
    fixture *fx = fixture_create(100000000);
    cell *c = fx->c;
    cell_entity *viewer = cell_add(c, 1, CELL_ENTITY_REAL, fx->cls, 0, 0, 0);
    cell_entity *other = cell_add(c, 2, CELL_ENTITY_REAL, fx->cls, 14, 0, 0);
    witness_attach(c, viewer);
    tick(fx, viewer);
    set(other, NEAR_PROP, 1);
    tick(fx, viewer);
    assert_int_equal(held(fx, 2, NEAR_PROP), 1);
    cell_move(c, other, 15.5f, 0, 0, 0); /* past 15, within the hysteresis: still near */
    tick(fx, viewer);
    set(other, NEAR_PROP, 2);
    tick(fx, viewer);
    assert_int_equal(held(fx, 2, NEAR_PROP), 2);
    cell_move(c, other, 16.5f, 0, 0, 0); /* past it: medium */
    tick(fx, viewer);
    set(other, NEAR_PROP, 3);
    tick(fx, viewer);
    assert_int_equal(held(fx, 2, NEAR_PROP), 2);
    cell_move(c, other, 15.5f, 0, 0, 0); /* back inside 16 but beyond 15: still medium */
    tick(fx, viewer);
    assert_int_equal(held(fx, 2, NEAR_PROP), 2);
    cell_move(c, other, 14.9f, 0, 0, 0); /* near again: current value at once */
    tick(fx, viewer);
    assert_int_equal(held(fx, 2, NEAR_PROP), 3);
    fixture_free(fx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_detail_both_directions),
        cmocka_unit_test(test_own_audience),
        cmocka_unit_test(test_alias_not_reused_at_once),
        cmocka_unit_test(test_budget_starvation_bound),
        cmocka_unit_test(test_congested_client_gets_latest_state),
        cmocka_unit_test(test_detail_hysteresis),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
