/* test_coord.c -- unit tests for coord (cellapp/coord.h): the coordinate-axis
 * AOI. A randomized run (2D and 3D, fixed seeds) checks every watcher's view,
 * as told by its enter/leave events and by coord_watcher_sees/_view_size/
 * _next, against a brute-force oracle of the view rule after every flush.
 * Hand-written cases pin the edges: stacked entities, closed boundaries in
 * single precision, boundaries landing on entities (KBEngine #1329), the
 * owner, range changes with hysteresis, netting within a flush, callbacks
 * that change the system, extent 0. Spatial queries are checked against
 * brute force, and bad input against its documented result.
 *
 * The view rule the oracle applies (coord.h, "Shape" and "Watchers"): for a
 * watcher of extent r and hysteresis h owned by O, entity E != O is inside
 * the inner square when on every axis `float lo = o - r, hi = o + r;
 * lo <= e && e <= hi`, inside the outer square the same with `float R = r +
 * h`, and at each flush
 *     new_view(E) = inner(E) ? true : outer(E) ? old_view(E) : false,
 * with positions as they are at the flush. A flush reports exactly the
 * differences between the old and the new view. A round watcher (h == 0,
 * coord_set_watcher_shape) adds, as coord.h states it, the distance in
 * double: new_view(E) = inner(E) && dx*dx + dz*dz (+ dy*dy for a sphere,
 * with Y even in 2D) <= r*r. The randomized runs make a third of their
 * traps circles and a third spheres, and change shapes as they go; the
 * shape queries are checked against the same rule. */
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

#include "coord.h"
#include "log.h"

/* ======================================================================== */
/* Shared helpers                                                           */
/* ======================================================================== */

/* Deterministic generator so failures reproduce (xorshift64*). */
static uint64_t test_rand(uint64_t *s) {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * UINT64_C(0x2545f4914f6cdd1d);
}

/* Uniform integer in [0, n). */
static uint32_t rand_below(uint64_t *s, uint32_t n) { return (uint32_t)((test_rand(s) >> 32) % n); }

/* Uniform float in [lo, hi]. */
static float rand_float(uint64_t *s, float lo, float hi) {
    double u = (double)(test_rand(s) >> 11) / (double)(UINT64_C(1) << 53);
    return (float)(lo + (hi - lo) * u);
}

/* The oracle's per-axis test, written exactly as coord.h states it: the
 * bounds are computed once in single precision, then compared. */
static bool axis_inside(float centre, float extent, float p) {
    float lo = centre - extent;
    float hi = centre + extent;
    return lo <= p && p <= hi;
}

/* The round part of a shape's rule, as coord.h states it (points in world
 * order x, y, z): the distance in double, on the ground for a circle, in
 * 3D for a sphere. */
static bool round_inside(coord_shape shape, const float *centre, float r, const float *p) {
    if (shape == COORD_SHAPE_BOX) {
        return true;
    }
    double dx = (double)p[0] - centre[0], dy = (double)p[1] - centre[1], dz = (double)p[2] - centre[2];
    double d2 = dx * dx + dz * dz + (shape == COORD_SHAPE_SPHERE ? dy * dy : 0.0);
    return d2 <= (double)r * r;
}

/* ======================================================================== */
/* Event recorder for the hand-written cases                                */
/* ======================================================================== */

/* Enough for the largest hand-written case (a stack of 50 entities). */
#define REC_MAX_EVENTS 512
#define REC_MAX_VIEW 128

typedef struct rec_event {
    bool enter;
    uint32_t entity;
} rec_event;

/* One per watcher, passed as its user_data: records the events it gets and
 * the view they add up to. Callbacks never assert (a longjmp out of
 * coord_flush would leave the system mid-flush); they count errors, which
 * the test asserts after the flush. */
typedef struct recorder {
    uint32_t watcher; /* COORD_NONE until coord_add_watcher returned */
    rec_event events[REC_MAX_EVENTS];
    size_t n_events;
    uint32_t view[REC_MAX_VIEW]; /* the view as told by events */
    size_t view_n;
    int errors;   /* event outside a flush, for another watcher, after removal, duplicate enter, unknown leave */
    bool removed; /* the watcher was removed: no event may follow */
    /* Optional: runs after the event is recorded, to change the system. */
    void (*hook)(coord_system *s, struct recorder *rec, bool enter, uint32_t entity);
    void *hook_data;
} recorder;

/* Events delivered since the last FLUSH, across all recorders. */
static size_t g_events;
static bool g_in_flush;

static void rec_init(recorder *rec) {
    memset(rec, 0, sizeof(*rec));
    rec->watcher = COORD_NONE;
}

static bool rec_in_view(const recorder *rec, uint32_t entity) {
    for (size_t i = 0; i < rec->view_n; i++) {
        if (rec->view[i] == entity) {
            return true;
        }
    }
    return false;
}

static void rec_event_cb(coord_system *s, uint32_t watcher, uint32_t entity, void *user_data, bool enter) {
    recorder *rec = user_data;
    g_events++;
    if (!g_in_flush || rec->removed || (rec->watcher != COORD_NONE && rec->watcher != watcher)) {
        rec->errors++;
    }
    if (rec->n_events < REC_MAX_EVENTS) {
        rec->events[rec->n_events++] = (rec_event){enter, entity};
    } else {
        rec->errors++;
    }
    if (enter) {
        if (rec_in_view(rec, entity) || rec->view_n == REC_MAX_VIEW) {
            rec->errors++;
        } else {
            rec->view[rec->view_n++] = entity;
        }
    } else {
        size_t i = 0;
        while (i < rec->view_n && rec->view[i] != entity) {
            i++;
        }
        if (i == rec->view_n) {
            rec->errors++;
        } else {
            rec->view[i] = rec->view[--rec->view_n];
        }
    }
    if (rec->hook != NULL) {
        rec->hook(s, rec, enter, entity);
    }
}

static void rec_on_enter(coord_system *s, uint32_t watcher, uint32_t entity, void *user_data) {
    rec_event_cb(s, watcher, entity, user_data, true);
}

static void rec_on_leave(coord_system *s, uint32_t watcher, uint32_t entity, void *user_data) {
    rec_event_cb(s, watcher, entity, user_data, false);
}

static const coord_watcher_callbacks rec_callbacks = {rec_on_enter, rec_on_leave};

/* Adds an entity at (x, 0, z) on the X/Z plane. */
static uint32_t put(coord_system *s, float x, float z) {
    uint32_t id = coord_add_entity(s, x, 0.0f, z, 0, 0, NULL);
    assert_int_not_equal(id, COORD_NONE);
    return id;
}

static void move(coord_system *s, uint32_t entity, float x, float z) {
    assert_int_equal(coord_move_entity(s, entity, x, 0.0f, z), 0);
}

/* Attaches a recording watcher. */
static uint32_t watch(coord_system *s, uint32_t owner, float extent, float hysteresis, recorder *rec) {
    rec_init(rec);
    rec->watcher = coord_add_watcher(s, owner, extent, hysteresis, &rec_callbacks, rec);
    assert_int_not_equal(rec->watcher, COORD_NONE);
    return rec->watcher;
}

/* Flushes and checks the return value is the number of events delivered. */
#define FLUSH(s) flush_at((s), __FILE__, __LINE__)
static size_t flush_at(coord_system *s, const char *file, int line) {
    g_events = 0;
    g_in_flush = true;
    size_t n = coord_flush(s);
    g_in_flush = false;
    if (n != g_events) {
        print_error("coord_flush returned %zu but %zu callbacks ran\n", n, g_events);
    }
    _assert_int_equal(n, g_events, file, line);
    return n;
}

/* Forgets the recorded events (the view they built stays). */
static void rec_clear(recorder *rec) { rec->n_events = 0; }

static bool id_listed(const uint32_t *ids, size_t n, uint32_t id) {
    for (size_t i = 0; i < n; i++) {
        if (ids[i] == id) {
            return true;
        }
    }
    return false;
}

/* The recorder holds exactly these enters and leaves since rec_clear, in
 * any order, each once, and no error. Then the events are cleared. */
#define ENTERS(...) ((const uint32_t[]){__VA_ARGS__}), (sizeof((const uint32_t[]){__VA_ARGS__}) / sizeof(uint32_t))
#define LEAVES(...) ENTERS(__VA_ARGS__)
#define NONE NULL, 0
#define EXPECT_EVENTS(rec, ...) expect_events_at((rec), __VA_ARGS__, __FILE__, __LINE__)
static void expect_events_at(recorder *rec, const uint32_t *enters, size_t n_enters, const uint32_t *leaves,
                             size_t n_leaves, const char *file, int line) {
    _assert_int_equal(rec->errors, 0, file, line);
    if (rec->n_events != n_enters + n_leaves) {
        for (size_t i = 0; i < rec->n_events; i++) {
            print_error("  got %s %u\n", rec->events[i].enter ? "enter" : "leave", rec->events[i].entity);
        }
    }
    _assert_int_equal(rec->n_events, n_enters + n_leaves, file, line);
    for (size_t i = 0; i < rec->n_events; i++) {
        const rec_event *ev = &rec->events[i];
        const uint32_t *want = ev->enter ? enters : leaves;
        size_t n_want = ev->enter ? n_enters : n_leaves;
        if (!id_listed(want, n_want, ev->entity)) {
            print_error("  unexpected %s %u\n", ev->enter ? "enter" : "leave", ev->entity);
        }
        _assert_true(id_listed(want, n_want, ev->entity), "event expected", file, line);
        for (size_t j = 0; j < i; j++) {
            bool duplicate = rec->events[j].enter == ev->enter && rec->events[j].entity == ev->entity;
            _assert_true(!duplicate, "event delivered once", file, line);
        }
    }
    rec_clear(rec);
}

/* The view told by events is exactly `ids`, and coord agrees through
 * coord_watcher_sees, coord_watcher_view_size and coord_watcher_next. */
#define EXPECT_VIEW(s, rec, ...) expect_view_at((s), (rec), __VA_ARGS__, __FILE__, __LINE__)
static void expect_view_at(const coord_system *s, const recorder *rec, const uint32_t *ids, size_t n, const char *file,
                           int line) {
    _assert_int_equal(rec->view_n, n, file, line);
    for (size_t i = 0; i < n; i++) {
        _assert_true(rec_in_view(rec, ids[i]), "in the view told by events", file, line);
        _assert_true(coord_watcher_sees(s, rec->watcher, ids[i]), "coord_watcher_sees", file, line);
    }
    _assert_int_equal(coord_watcher_view_size(s, rec->watcher), n, file, line);
    size_t cursor = 0;
    size_t count = 0;
    uint32_t id;
    uint32_t seen[REC_MAX_VIEW];
    while ((id = coord_watcher_next(s, rec->watcher, &cursor)) != COORD_NONE) {
        _assert_true(count < n, "coord_watcher_next ends", file, line);
        _assert_true(id_listed(ids, n, id), "coord_watcher_next in view", file, line);
        _assert_true(!id_listed(seen, count, id), "coord_watcher_next once", file, line);
        seen[count++] = id;
    }
    _assert_int_equal(count, n, file, line);
}
#define VIEW(...) ENTERS(__VA_ARGS__)

/* Brute-force view of a watcher without hysteresis: the ids among
 * `candidates` (removed ones included: coord_entity_position fails for
 * them) inside the square of `extent` around the owner's position now. */
static size_t oracle_trap_view(const coord_system *s, uint32_t owner, float extent, const uint32_t *candidates,
                               size_t n, uint32_t *out) {
    float ox, oy, oz;
    size_t count = 0;
    assert_int_equal(coord_entity_position(s, owner, &ox, &oy, &oz), 0);
    for (size_t i = 0; i < n; i++) {
        float x, y, z;
        if (candidates[i] == owner || coord_entity_position(s, candidates[i], &x, &y, &z) != 0) {
            continue;
        }
        if (axis_inside(ox, extent, x) && axis_inside(oz, extent, z)) {
            out[count++] = candidates[i];
        }
    }
    return count;
}

/* Every hand-written case runs on a fresh 2D system, freed even when an
 * assertion fails. */
static int setup_2d(void **state) {
    coord_system *s = coord_create(false);
    if (s == NULL) {
        return -1;
    }
    *state = s;
    g_events = 0;
    g_in_flush = false;
    return 0;
}

/* The edge cases again, in scan mode. */
static int setup_2d_scan(void **state) {
    if (setup_2d(state) != 0) return -1;
    coord_set_mode(*state, COORD_MODE_SCAN);
    return coord_current_mode(*state) == COORD_MODE_SCAN ? 0 : -1;
}

static int teardown_system(void **state) {
    coord_free(*state);
    return 0;
}

/* ======================================================================== */
/* 1. Randomized run against the brute-force oracle                          */
/* ======================================================================== */

/* Slot capacities: a run keeps ~2000 entities and ~300 watchers, and churn
 * frees slots only after a flush, so 4096 / 1024 leave ample headroom. */
#define RW_MAX_ENTITIES 4096
#define RW_MAX_WATCHERS 1024
#define RW_HASH 16384     /* power of two, >= 4 x RW_MAX_ENTITIES: short probes */
#define RW_MAX_REPORTS 12 /* mismatches printed per run before going quiet */

typedef struct rw_entity {
    uint32_t id;
    float p[3]; /* x, y, z */
    bool used;  /* the slot holds an entity: live, or removed and awaiting the flush */
    bool live;
} rw_entity;

struct rw_world;

typedef struct rw_watcher {
    struct rw_world *world;
    uint32_t id;
    int owner; /* entity slot */
    float r, h;
    coord_shape shape; /* round only when h == 0 */
    bool used;         /* the slot holds a watcher: live, or removed and awaiting the flush */
    bool live;
    uint8_t *expected; /* oracle view, by entity slot */
    uint8_t *tracked;  /* view told by events, by entity slot */
} rw_watcher;

typedef struct rw_params {
    bool three_d;
    uint64_t seed;
    int entities;
    int watchers;
    int steps;
    float world;  /* X and Z span [0, world] */
    float y_span; /* Y spans [0, y_span] (ignored by a 2D system) */
    /* AUTO: the system chooses. Otherwise the mode from the start, and with
     * switch_every > 0 the other one every switch_every steps, back and
     * forth (coord.h, "Modes": the events are the same in both). */
    coord_mode mode;
    int switch_every;
} rw_params;

typedef struct rw_world {
    coord_system *s;
    rw_params prm;
    uint64_t rng;
    int step;
    rw_entity e[RW_MAX_ENTITIES];
    int e_high; /* slots [0, e_high) have been used */
    int live_entities;
    rw_watcher w[RW_MAX_WATCHERS];
    int w_high;
    int live_watchers;
    uint32_t hash_key[RW_HASH]; /* entity id -> slot, open addressing */
    int hash_slot[RW_HASH];     /* -1: empty */
    bool in_flush;
    size_t events;
    size_t errors;
    size_t reports;
    uint8_t *stamp; /* scratch, by entity slot */
} rw_world;

#define rw_fail(W, ...)                                                               \
    do {                                                                              \
        (W)->errors++;                                                                \
        if ((W)->reports++ < RW_MAX_REPORTS) {                                        \
            char msg_[512];                                                           \
            snprintf(msg_, sizeof(msg_), __VA_ARGS__);                                \
            print_error("%s seed %llu step %d: %s\n", (W)->prm.three_d ? "3D" : "2D", \
                        (unsigned long long)(W)->prm.seed, (W)->step, msg_);          \
        }                                                                             \
    } while (0)

static size_t rw_hash_index(uint32_t id) { return (size_t)((id * UINT32_C(2654435761)) & (RW_HASH - 1)); }

static int rw_lookup(const rw_world *W, uint32_t id) {
    for (size_t i = rw_hash_index(id);; i = (i + 1) & (RW_HASH - 1)) {
        if (W->hash_slot[i] < 0) {
            return -1;
        }
        if (W->hash_key[i] == id) {
            return W->hash_slot[i];
        }
    }
}

static void rw_hash_put(rw_world *W, uint32_t id, int slot) {
    for (size_t i = rw_hash_index(id);; i = (i + 1) & (RW_HASH - 1)) {
        if (W->hash_slot[i] < 0) {
            W->hash_key[i] = id;
            W->hash_slot[i] = slot;
            return;
        }
        if (W->hash_key[i] == id) {
            rw_fail(W, "entity id %u handed out while still in use (removed ids wait for a flush)", id);
            W->hash_slot[i] = slot;
            return;
        }
    }
}

/* Rebuilt after each flush: ids of removed entities may be reused then. */
static void rw_hash_rebuild(rw_world *W) {
    for (size_t i = 0; i < RW_HASH; i++) {
        W->hash_slot[i] = -1;
    }
    for (int i = 0; i < W->e_high; i++) {
        if (W->e[i].used) {
            rw_hash_put(W, W->e[i].id, i);
        }
    }
}

static void rw_event(uint32_t watcher, uint32_t entity, void *user_data, bool enter) {
    rw_watcher *w = user_data;
    rw_world *W = w->world;
    W->events++;
    if (!W->in_flush) {
        rw_fail(W, "event outside coord_flush (watcher %u entity %u)", watcher, entity);
    }
    if (!w->live || w->id != watcher) {
        rw_fail(W, "%s for removed watcher %u (entity %u)", enter ? "enter" : "leave", watcher, entity);
        return;
    }
    int slot = rw_lookup(W, entity);
    if (slot < 0) {
        rw_fail(W, "%s of unknown entity %u (watcher %u)", enter ? "enter" : "leave", entity, watcher);
        return;
    }
    if (enter && w->tracked[slot]) {
        rw_fail(W, "duplicate enter: watcher %u entity %u already in view", watcher, entity);
    } else if (!enter && !w->tracked[slot]) {
        rw_fail(W, "leave of entity %u not in the view of watcher %u", entity, watcher);
    }
    w->tracked[slot] = enter;
}

static void rw_on_enter(coord_system *s, uint32_t watcher, uint32_t entity, void *user_data) {
    (void)s;
    rw_event(watcher, entity, user_data, true);
}

static void rw_on_leave(coord_system *s, uint32_t watcher, uint32_t entity, void *user_data) {
    (void)s;
    rw_event(watcher, entity, user_data, false);
}

static const coord_watcher_callbacks rw_callbacks = {rw_on_enter, rw_on_leave};

/* Half the coordinates land on a 0.5 grid, so exact ties between entities
 * and boundaries (which also often land on it) are common. */
static float rw_snap(rw_world *W, float v) { return rand_below(&W->rng, 2) ? roundf(v * 2.0f) / 2.0f : v; }

static void rw_random_position(rw_world *W, float p[3]) {
    p[0] = rw_snap(W, rand_float(&W->rng, 0.0f, W->prm.world));
    p[1] = rw_snap(W, rand_float(&W->rng, 0.0f, W->prm.y_span));
    p[2] = rw_snap(W, rand_float(&W->rng, 0.0f, W->prm.world));
}

/* r in [5, 60], h in [0, 10] with a third of watchers traps (h == 0);
 * half the values integral. */
static void rw_random_range(rw_world *W, float *r, float *h) {
    *r = rand_float(&W->rng, 5.0f, 60.0f);
    *h = rand_below(&W->rng, 3) == 0 ? 0.0f : rand_float(&W->rng, 0.0f, 10.0f);
    if (rand_below(&W->rng, 2)) {
        *r = roundf(*r);
        *h = roundf(*h);
    }
}

static int rw_random_live_entity(rw_world *W) {
    for (;;) {
        int i = (int)rand_below(&W->rng, (uint32_t)W->e_high);
        if (W->e[i].live) {
            return i;
        }
    }
}

/* -1 when no watcher is live. */
static int rw_random_live_watcher(rw_world *W) {
    if (W->live_watchers == 0) {
        return -1;
    }
    for (;;) {
        int i = (int)rand_below(&W->rng, (uint32_t)W->w_high);
        if (W->w[i].live) {
            return i;
        }
    }
}

static void rw_add_entity(rw_world *W) {
    int slot = 0;
    while (slot < RW_MAX_ENTITIES && W->e[slot].used) {
        slot++;
    }
    assert_true(slot < RW_MAX_ENTITIES);
    rw_entity *e = &W->e[slot];
    rw_random_position(W, e->p);
    uint32_t type = rand_below(&W->rng, 8);
    e->id = coord_add_entity(W->s, e->p[0], e->p[1], e->p[2], type, 0, &W->e[slot]);
    if (e->id == COORD_NONE) {
        rw_fail(W, "coord_add_entity failed");
        return;
    }
    e->used = true;
    e->live = true;
    if (slot >= W->e_high) {
        W->e_high = slot + 1;
    }
    W->live_entities++;
    rw_hash_put(W, e->id, slot);
}

static void rw_move(rw_world *W, int slot, const float p[3]) {
    rw_entity *e = &W->e[slot];
    if (coord_move_entity(W->s, e->id, p[0], p[1], p[2]) != 0) {
        rw_fail(W, "coord_move_entity(%u) failed", e->id);
        return;
    }
    memcpy(e->p, p, sizeof(e->p));
}

static void rw_remove_entity(rw_world *W, int slot) {
    rw_entity *e = &W->e[slot];
    if (coord_remove_entity(W->s, e->id) != 0) {
        rw_fail(W, "coord_remove_entity(%u) failed", e->id);
        return;
    }
    e->live = false;
    W->live_entities--;
    /* The entity's watchers go with it. */
    for (int i = 0; i < W->w_high; i++) {
        if (W->w[i].live && W->w[i].owner == slot) {
            W->w[i].live = false;
            W->live_watchers--;
        }
    }
}

static void rw_add_watcher(rw_world *W, int owner) {
    int slot = 0;
    while (slot < RW_MAX_WATCHERS && W->w[slot].used) {
        slot++;
    }
    assert_true(slot < RW_MAX_WATCHERS);
    rw_watcher *w = &W->w[slot];
    rw_random_range(W, &w->r, &w->h);
    w->owner = owner;
    w->world = W;
    w->id = coord_add_watcher(W->s, W->e[owner].id, w->r, w->h, &rw_callbacks, w);
    if (w->id == COORD_NONE) {
        rw_fail(W, "coord_add_watcher(owner %u, %g, %g) failed", W->e[owner].id, w->r, w->h);
        return;
    }
    /* A third of the traps are circles, a third spheres. */
    w->shape = w->h == 0.0f ? (coord_shape)rand_below(&W->rng, 3) : COORD_SHAPE_BOX;
    if (coord_set_watcher_shape(W->s, w->id, w->shape) != 0) {
        rw_fail(W, "coord_set_watcher_shape(%u, %d) failed", w->id, (int)w->shape);
    }
    /* Both views start empty (cleared when the slot was freed). */
    w->used = true;
    w->live = true;
    if (slot >= W->w_high) {
        W->w_high = slot + 1;
    }
    W->live_watchers++;
}

/* Random mix of changes between two flushes. */
static void rw_mutate(rw_world *W) {
    uint64_t *rng = &W->rng;
    float p[3];

    /* Small moves, up to 5 units per axis (a tenth of the population). */
    for (int n = W->live_entities / 10; n > 0; n--) {
        int i = rw_random_live_entity(W);
        for (int a = 0; a < 3; a++) {
            p[a] = W->e[i].p[a] + rw_snap(W, rand_float(rng, -5.0f, 5.0f));
        }
        rw_move(W, i, p);
    }
    /* Teleports anywhere. */
    for (int n = (int)rand_below(rng, 12); n > 0; n--) {
        int i = rw_random_live_entity(W);
        rw_random_position(W, p);
        rw_move(W, i, p);
    }
    /* Moves that net out before the flush: away and back, and through a
     * watcher's square and back. */
    for (int n = (int)rand_below(rng, 8); n > 0; n--) {
        int i = rw_random_live_entity(W);
        float back[3];
        memcpy(back, W->e[i].p, sizeof(back));
        int wi = rw_random_live_watcher(W);
        if (wi >= 0 && rand_below(rng, 2)) {
            memcpy(p, W->e[W->w[wi].owner].p, sizeof(p));
        } else {
            rw_random_position(W, p);
        }
        rw_move(W, i, p);
        rw_move(W, i, back);
    }
    /* Inserts and removals (sometimes of a watcher's owner). */
    int shortfall = W->prm.entities - W->live_entities;
    for (int n = (int)rand_below(rng, 11) + (shortfall > 0 ? shortfall / 8 : 0); n > 0; n--) {
        rw_add_entity(W);
    }
    for (int n = (int)rand_below(rng, 11); n > 0 && W->live_entities > 2; n--) {
        int wi = rw_random_live_watcher(W);
        rw_remove_entity(W, wi >= 0 && rand_below(rng, 4) == 0 ? W->w[wi].owner : rw_random_live_entity(W));
    }
    /* Watcher range changes, removals and additions (some on an owner that
     * already has one); additions top the count up towards the initial
     * one, making up for the watchers that go with their owners. */
    for (int n = (int)rand_below(rng, 6); n > 0; n--) {
        int wi = rw_random_live_watcher(W);
        if (wi < 0) {
            break;
        }
        rw_watcher *w = &W->w[wi];
        float r, h;
        rw_random_range(W, &r, &h);
        if (w->shape != COORD_SHAPE_BOX && h > 0.0f) {
            /* A round watcher refuses hysteresis, and keeps its range. */
            if (coord_set_watcher_range(W->s, w->id, r, h) != -1) {
                rw_fail(W, "coord_set_watcher_range(%u) gave a round watcher hysteresis", w->id);
            }
            h = 0.0f;
        }
        w->r = r;
        w->h = h;
        if (coord_set_watcher_range(W->s, w->id, w->r, w->h) != 0) {
            rw_fail(W, "coord_set_watcher_range(%u) failed", w->id);
        }
    }
    /* Shape changes; a watcher with hysteresis refuses a round one. */
    for (int n = (int)rand_below(rng, 4); n > 0; n--) {
        int wi = rw_random_live_watcher(W);
        if (wi < 0) {
            break;
        }
        rw_watcher *w = &W->w[wi];
        coord_shape shape = (coord_shape)rand_below(rng, 3);
        int want = w->h > 0.0f && shape != COORD_SHAPE_BOX ? -1 : 0;
        if (coord_set_watcher_shape(W->s, w->id, shape) != want) {
            rw_fail(W, "coord_set_watcher_shape(%u, %d) did not return %d", w->id, (int)shape, want);
        }
        if (want == 0) {
            w->shape = shape;
        }
    }
    for (int n = (int)rand_below(rng, 4); n > 0; n--) {
        int wi = rw_random_live_watcher(W);
        if (wi < 0) {
            break;
        }
        if (coord_remove_watcher(W->s, W->w[wi].id) != 0) {
            rw_fail(W, "coord_remove_watcher(%u) failed", W->w[wi].id);
        }
        W->w[wi].live = false;
        W->live_watchers--;
    }
    int deficit = W->prm.watchers - W->live_watchers;
    for (int n = (int)rand_below(rng, 4) + (deficit > 0 ? deficit / 4 : 0); n > 0; n--) {
        int wi = rw_random_live_watcher(W);
        rw_add_watcher(W, wi >= 0 && rand_below(rng, 4) == 0 ? W->w[wi].owner : rw_random_live_entity(W));
    }
    /* Exact ties: put an entity on a boundary of a watcher (inner or
     * outer, low or high side, on one axis, sometimes on all), or move an
     * owner so that one of its boundaries lands exactly on an entity. */
    int axes = W->prm.three_d ? 3 : 2;
    for (int n = (int)rand_below(rng, 16); n > 0; n--) {
        int wi = rw_random_live_watcher(W);
        if (wi < 0) {
            break;
        }
        rw_watcher *w = &W->w[wi];
        int ei = rw_random_live_entity(W);
        if (ei == w->owner) {
            continue;
        }
        float extent = w->r;
        if (w->h > 0.0f && rand_below(rng, 2)) {
            extent = w->r + w->h;
        }
        bool corner = rand_below(rng, 3) == 0;
        int tie_axis = (int)rand_below(rng, (uint32_t)axes);
        if (!W->prm.three_d && tie_axis == 1) {
            tie_axis = 2; /* axis indexes: 0 = X, 1 = Y, 2 = Z */
        }
        if (rand_below(rng, 2)) {
            /* Entity onto the boundary. */
            const float *o = W->e[w->owner].p;
            memcpy(p, W->e[ei].p, sizeof(p));
            for (int a = 0; a < 3; a++) {
                if (a == 1 && !W->prm.three_d) {
                    continue;
                }
                if (a == tie_axis || corner) {
                    p[a] = rand_below(rng, 2) ? o[a] - extent : o[a] + extent;
                } else {
                    p[a] = o[a] + rw_snap(W, rand_float(rng, -extent, extent));
                }
            }
            rw_move(W, ei, p);
        } else {
            /* Owner so that a boundary lands on the entity. */
            const float *t = W->e[ei].p;
            memcpy(p, W->e[w->owner].p, sizeof(p));
            for (int a = 0; a < 3; a++) {
                if (a == 1 && !W->prm.three_d) {
                    continue;
                }
                if (a == tie_axis || corner) {
                    if (rand_below(rng, 2)) {
                        p[a] = t[a] - extent; /* high side: p + extent == t, when exact */
                        if (p[a] + extent != t[a]) {
                            p[a] = t[a] + extent;
                        }
                    } else {
                        p[a] = t[a] + extent; /* low side: p - extent == t, when exact */
                        if (p[a] - extent != t[a]) {
                            p[a] = t[a] - extent;
                        }
                    }
                } else {
                    p[a] = t[a] + rw_snap(W, rand_float(rng, -extent, extent));
                }
            }
            rw_move(W, w->owner, p);
        }
    }
}

/* Round ties: an entity put exactly on a round trap's edge (3-4-5 and
 * axis points, exact for an integral radius), or in its square's corner,
 * or the trap's owner moved so that an entity lands on it. */
static void rw_round_ties(rw_world *W) {
    uint64_t *rng = &W->rng;
    static const float on_edge[][3] = {{1, 0, 0},       {0, 0, -1},      {0.6f, 0, 0.8f}, {-0.8f, 0, 0.6f},
                                       {0, 0.6f, 0.8f}, {0.6f, 0.8f, 0}, {1, 0, 1}};
    for (int n = (int)rand_below(rng, 12); n > 0; n--) {
        int wi = rw_random_live_watcher(W);
        if (wi < 0 || W->w[wi].shape == COORD_SHAPE_BOX) {
            continue;
        }
        rw_watcher *w = &W->w[wi];
        int ei = rw_random_live_entity(W);
        if (ei == w->owner) {
            continue;
        }
        const float *k = on_edge[rand_below(rng, sizeof on_edge / sizeof *on_edge)];
        float sign = rand_below(rng, 2) ? 1.0f : -1.0f, p[3];
        if (rand_below(rng, 2)) {
            for (int a = 0; a < 3; a++) {
                p[a] = W->e[w->owner].p[a] + sign * k[a] * w->r;
            }
            rw_move(W, ei, p);
        } else {
            for (int a = 0; a < 3; a++) {
                p[a] = W->e[ei].p[a] - sign * k[a] * w->r;
            }
            rw_move(W, w->owner, p);
        }
    }
}

/* New expected views from the old ones, by the rule at the top. */
static void rw_oracle(rw_world *W) {
    bool three_d = W->prm.three_d;
    for (int wi = 0; wi < W->w_high; wi++) {
        rw_watcher *w = &W->w[wi];
        if (!w->live) {
            continue;
        }
        const float *o = W->e[w->owner].p;
        float outer = w->r + w->h;
        for (int i = 0; i < W->e_high; i++) {
            const rw_entity *e = &W->e[i];
            if (!e->live || i == w->owner) {
                w->expected[i] = 0;
                continue;
            }
            bool inner = axis_inside(o[0], w->r, e->p[0]) && axis_inside(o[2], w->r, e->p[2]) &&
                         (!three_d || axis_inside(o[1], w->r, e->p[1]));
            if (w->shape != COORD_SHAPE_BOX) {
                w->expected[i] = inner && round_inside(w->shape, o, w->r, e->p);
                continue;
            }
            if (inner) {
                w->expected[i] = 1;
                continue;
            }
            bool in_outer = axis_inside(o[0], outer, e->p[0]) && axis_inside(o[2], outer, e->p[2]) &&
                            (!three_d || axis_inside(o[1], outer, e->p[1]));
            w->expected[i] = in_outer ? w->expected[i] : 0;
        }
    }
}

/* Compares every live watcher's event-told view and coord's own answers
 * with the oracle; returns the number of differences. */
static size_t rw_compare(rw_world *W) {
    size_t diffs = 0;
    for (int wi = 0; wi < W->w_high; wi++) {
        rw_watcher *w = &W->w[wi];
        if (!w->live) {
            continue;
        }
        const rw_entity *o = &W->e[w->owner];
        size_t expected_n = 0;
        for (int i = 0; i < W->e_high; i++) {
            expected_n += w->expected[i];
            if (!W->e[i].used || w->expected[i] == w->tracked[i]) {
                continue;
            }
            const rw_entity *e = &W->e[i];
            diffs++;
            rw_fail(W,
                    "watcher %u (owner %u at %.9g,%.9g,%.9g r=%.9g h=%.9g) entity %u%s at %.9g,%.9g,%.9g: "
                    "expected %s, events say %s, coord_watcher_sees %d",
                    w->id, o->id, o->p[0], o->p[1], o->p[2], w->r, w->h, e->id, e->live ? "" : " (removed)", e->p[0],
                    e->p[1], e->p[2], w->expected[i] ? "in view" : "out", w->tracked[i] ? "in view" : "out",
                    coord_watcher_sees(W->s, w->id, e->id));
        }
        size_t size = coord_watcher_view_size(W->s, w->id);
        if (size != expected_n) {
            diffs++;
            rw_fail(W, "watcher %u: coord_watcher_view_size %zu, expected %zu", w->id, size, expected_n);
        }
        memset(W->stamp, 0, RW_MAX_ENTITIES);
        size_t cursor = 0;
        size_t listed = 0;
        uint32_t id;
        while ((id = coord_watcher_next(W->s, w->id, &cursor)) != COORD_NONE && listed <= expected_n) {
            listed++;
            int slot = rw_lookup(W, id);
            if (slot < 0 || !w->expected[slot] || W->stamp[slot]) {
                diffs++;
                rw_fail(W, "watcher %u: coord_watcher_next gave %u (%s)", w->id, id,
                        slot < 0             ? "unknown"
                        : !w->expected[slot] ? "not in view"
                                             : "twice");
                continue;
            }
            W->stamp[slot] = 1;
        }
        if (listed != expected_n) {
            diffs++;
            rw_fail(W, "watcher %u: coord_watcher_next listed %zu, expected %zu", w->id, listed, expected_n);
        }
        for (int i = 0; i < W->e_high; i++) {
            if (w->expected[i] && !coord_watcher_sees(W->s, w->id, W->e[i].id)) {
                diffs++;
                rw_fail(W, "watcher %u: coord_watcher_sees(%u) false, expected in view", w->id, W->e[i].id);
            }
        }
    }
    if (coord_entity_count(W->s) != (size_t)W->live_entities) {
        diffs++;
        rw_fail(W, "coord_entity_count %zu, expected %d", coord_entity_count(W->s), W->live_entities);
    }
    if (coord_watcher_count(W->s) != (size_t)W->live_watchers) {
        diffs++;
        rw_fail(W, "coord_watcher_count %zu, expected %d", coord_watcher_count(W->s), W->live_watchers);
    }
    return diffs;
}

/* Spot checks of positions and user data. */
static void rw_check_entities(rw_world *W) {
    for (int n = 0; n < 16; n++) {
        int i = rw_random_live_entity(W);
        const rw_entity *e = &W->e[i];
        float x, y, z;
        if (coord_entity_position(W->s, e->id, &x, &y, &z) != 0 || x != e->p[0] || z != e->p[2] ||
            (W->prm.three_d && y != e->p[1])) {
            rw_fail(W, "coord_entity_position(%u) disagrees", e->id);
        }
        if (coord_entity_user_data(W->s, e->id) != e) {
            rw_fail(W, "coord_entity_user_data(%u) disagrees", e->id);
        }
    }
}

/* After the flush, slots of removed entities and watchers are freed. */
static void rw_reclaim(rw_world *W) {
    for (int wi = 0; wi < W->w_high; wi++) {
        rw_watcher *w = &W->w[wi];
        if (w->used && !w->live) {
            w->used = false;
            memset(w->expected, 0, RW_MAX_ENTITIES);
            memset(w->tracked, 0, RW_MAX_ENTITIES);
        }
    }
    for (int i = 0; i < W->e_high; i++) {
        if (W->e[i].used && !W->e[i].live) {
            W->e[i].used = false;
            /* Any view still holding it was reported by rw_compare; clear
             * so the slot starts clean. */
            for (int wi = 0; wi < W->w_high; wi++) {
                if (W->w[wi].used) {
                    W->w[wi].expected[i] = 0;
                    W->w[wi].tracked[i] = 0;
                }
            }
        }
    }
    rw_hash_rebuild(W);
}

static size_t rw_flush_and_check(rw_world *W) {
    size_t before = W->events;
    W->in_flush = true;
    size_t n = coord_flush(W->s);
    W->in_flush = false;
    if (n != W->events - before) {
        rw_fail(W, "coord_flush returned %zu, delivered %zu", n, W->events - before);
    }
    coord_stats stats;
    coord_get_stats(W->s, &stats);
    if (stats.events != W->events) {
        rw_fail(W, "coord_stats.events %llu, delivered %zu in all", (unsigned long long)stats.events, W->events);
    }
    rw_oracle(W);
    size_t diffs = rw_compare(W);
    rw_check_entities(W);
    rw_reclaim(W);
    return diffs;
}

static void rw_free(rw_world *W) {
    if (W == NULL) {
        return;
    }
    if (W->s != NULL) {
        coord_free(W->s);
    }
    for (int i = 0; i < RW_MAX_WATCHERS; i++) {
        free(W->w[i].expected);
        free(W->w[i].tracked);
    }
    free(W->stamp);
    free(W);
}

static int teardown_world(void **state) {
    rw_free(*state);
    return 0;
}

static void rw_run(void **state, rw_params prm) {
    rw_world *W = calloc(1, sizeof(*W));
    assert_non_null(W);
    *state = W; /* teardown_world frees it, also after a failure */
    W->prm = prm;
    W->rng = prm.seed * UINT64_C(0x9E3779B97F4A7C15) + 1;
    W->stamp = malloc(RW_MAX_ENTITIES);
    assert_non_null(W->stamp);
    for (int i = 0; i < RW_MAX_WATCHERS; i++) {
        W->w[i].expected = calloc(RW_MAX_ENTITIES, 1);
        W->w[i].tracked = calloc(RW_MAX_ENTITIES, 1);
        assert_non_null(W->w[i].expected);
        assert_non_null(W->w[i].tracked);
    }
    for (size_t i = 0; i < RW_HASH; i++) {
        W->hash_slot[i] = -1;
    }
    W->s = coord_create(prm.three_d);
    assert_non_null(W->s);
    if (prm.mode != COORD_MODE_AUTO) coord_set_mode(W->s, prm.mode);

    /* Step 0: the population, added in one batch, then the watchers, which
     * report everything already in range at the first flush. */
    for (int i = 0; i < prm.entities; i++) {
        rw_add_entity(W);
    }
    for (int i = 0; i < prm.watchers; i++) {
        rw_add_watcher(W, rw_random_live_entity(W));
    }
    size_t diffs = rw_flush_and_check(W);
    assert_int_equal(W->errors, 0);
    assert_int_equal(diffs, 0);
    assert_true(W->events > 0);

    for (W->step = 1; W->step <= prm.steps; W->step++) {
        if (prm.switch_every > 0 && W->step % prm.switch_every == 0) {
            bool scanning = coord_current_mode(W->s) == COORD_MODE_SCAN;
            coord_set_mode(W->s, scanning ? COORD_MODE_CROSSING : COORD_MODE_SCAN);
            assert_int_equal(coord_current_mode(W->s), scanning ? COORD_MODE_CROSSING : COORD_MODE_SCAN);
        }
        rw_mutate(W);
        rw_round_ties(W);
        diffs = rw_flush_and_check(W);
        assert_int_equal(W->errors, 0);
        assert_int_equal(diffs, 0);
    }
    /* A run in scan mode took its teleports apart as long moves. */
    if (prm.mode == COORD_MODE_SCAN && prm.switch_every == 0) {
        coord_stats stats;
        coord_get_stats(W->s, &stats);
        assert_true(stats.long_moves > 0);
        assert_true(stats.scanned > 0);
    }
    /* The run stayed populated, so it tested something. */
    assert_true(W->live_entities > prm.entities / 2);
    assert_true(W->live_watchers > prm.watchers / 2);
}

/* Sizes: the oracle costs watchers x entities per step; these keep the
 * four runs within a few seconds under AddressSanitizer. */
static void test_random_2d_seed1(void **state) {
    rw_run(state, (rw_params){false, 1, 2000, 300, 120, 1000.0f, 100.0f, COORD_MODE_AUTO, 0});
}

static void test_random_2d_seed2(void **state) {
    rw_run(state, (rw_params){false, 2, 2000, 300, 120, 1000.0f, 100.0f, COORD_MODE_AUTO, 0});
}

static void test_random_2d_seed3(void **state) {
    rw_run(state, (rw_params){false, 3, 2000, 300, 120, 1000.0f, 100.0f, COORD_MODE_AUTO, 0});
}

/* 3D: Y spans 100 units, so most squares reach through it and views stay
 * populated while Y still decides some of them. */
static void test_random_3d(void **state) {
    rw_run(state, (rw_params){true, 4, 1500, 250, 120, 1000.0f, 100.0f, COORD_MODE_AUTO, 0});
}

/* A crowd: 1,500 entities in 200 x 200, so a wide view holds half of them
 * and its pairs go to a dense table, while a narrow one holds a few in a
 * sparse table; range changes and teleports move views between the two,
 * both ways, under the oracle. */
static void test_random_2d_crowd(void **state) {
    rw_run(state, (rw_params){false, 5, 1500, 300, 120, 200.0f, 100.0f, COORD_MODE_AUTO, 0});
}

/* Scan mode from the start, and both modes in turn: every few steps the
 * system changes mode between a mutation and its flush, under the oracle. */
static void test_random_2d_scan(void **state) {
    rw_run(state, (rw_params){false, 6, 2000, 300, 120, 1000.0f, 100.0f, COORD_MODE_SCAN, 0});
}

static void test_random_3d_scan(void **state) {
    rw_run(state, (rw_params){true, 7, 1500, 250, 120, 1000.0f, 100.0f, COORD_MODE_SCAN, 0});
}

static void test_random_2d_modes_in_turn(void **state) {
    rw_run(state, (rw_params){false, 8, 2000, 300, 120, 1000.0f, 100.0f, COORD_MODE_SCAN, 3});
}

static void test_random_2d_crowd_modes_in_turn(void **state) {
    rw_run(state, (rw_params){false, 9, 1500, 300, 120, 200.0f, 100.0f, COORD_MODE_CROSSING, 5});
}

/* ======================================================================== */
/* 2. Edge cases                                                            */
/* ======================================================================== */

/* 50 entities stacked on one point, ten of them owning watchers of extent
 * 0 there, a watcher at the same point and one at exactly its extent. */
static void test_stacked_entities(void **state) {
    coord_system *s = *state;
    enum { STACK = 50 };
    uint32_t stack[STACK];
    for (int i = 0; i < STACK; i++) {
        stack[i] = put(s, 100.0f, 100.0f);
    }
    uint32_t a = put(s, 100.0f, 100.0f);
    uint32_t b = put(s, 110.0f, 100.0f); /* exactly a's extent away on X */
    recorder ra, rb, rz[10];
    watch(s, a, 10.0f, 0.0f, &ra);
    watch(s, b, 10.0f, 0.0f, &rb);
    for (int i = 0; i < 10; i++) {
        watch(s, stack[i], 0.0f, 0.0f, &rz[i]);
    }
    FLUSH(s);

    /* a sees the stack and b; b sees the stack and a; each stacked watcher
     * sees the other 49 and a, never itself. */
    uint32_t view_a[STACK + 1], view_b[STACK + 1];
    memcpy(view_a, stack, sizeof(stack));
    memcpy(view_b, stack, sizeof(stack));
    view_a[STACK] = b;
    view_b[STACK] = a;
    EXPECT_EVENTS(&ra, view_a, STACK + 1, NONE);
    EXPECT_VIEW(s, &ra, view_a, STACK + 1);
    assert_false(coord_watcher_sees(s, ra.watcher, a));
    EXPECT_EVENTS(&rb, view_b, STACK + 1, NONE);
    EXPECT_VIEW(s, &rb, view_b, STACK + 1);
    for (int i = 0; i < 10; i++) {
        uint32_t expect[STACK];
        size_t n = 0;
        for (int j = 0; j < STACK; j++) {
            if (j != i) {
                expect[n++] = stack[j];
            }
        }
        expect[n++] = a;
        EXPECT_EVENTS(&rz[i], expect, n, NONE);
        EXPECT_VIEW(s, &rz[i], expect, n);
    }

    /* Half the plain stack (not the watcher owners) leaves every square. */
    for (int i = 25; i < STACK; i++) {
        move(s, stack[i], 100.0f, 110.5f);
    }
    FLUSH(s);
    EXPECT_EVENTS(&ra, NONE, &stack[25], 25);
    EXPECT_EVENTS(&rb, NONE, &stack[25], 25);
    for (int i = 0; i < 10; i++) {
        EXPECT_EVENTS(&rz[i], NONE, &stack[25], 25);
    }
    /* And comes back. */
    for (int i = 25; i < STACK; i++) {
        move(s, stack[i], 100.0f, 100.0f);
    }
    FLUSH(s);
    EXPECT_EVENTS(&ra, &stack[25], 25, NONE);
    EXPECT_EVENTS(&rb, &stack[25], 25, NONE);
    for (int i = 0; i < 10; i++) {
        EXPECT_EVENTS(&rz[i], &stack[25], 25, NONE);
    }
    /* The whole plain part of the stack moves onto b: still on a's
     * boundary, inside b's square, away from the extent-0 watchers. */
    for (int i = 10; i < STACK; i++) {
        move(s, stack[i], 110.0f, 100.0f);
    }
    FLUSH(s);
    EXPECT_EVENTS(&ra, NONE, NONE);
    EXPECT_EVENTS(&rb, NONE, NONE);
    for (int i = 0; i < 10; i++) {
        EXPECT_EVENTS(&rz[i], NONE, &stack[10], STACK - 10);
    }
    EXPECT_VIEW(s, &rb, view_b, STACK + 1);
    EXPECT_VIEW(s, &ra, view_a, STACK + 1);
    assert_int_equal(FLUSH(s), 0);
}

/* Closed boundaries: on X, on Z and on both (the corners) is inside; the
 * next float outwards is outside. Also where o - r and o + r round. */
static void test_boundary_is_inside(void **state) {
    coord_system *s = *state;
    uint32_t o = put(s, 100.0f, 200.0f);
    uint32_t in[8] = {
        put(s, 110.0f, 200.0f), put(s, 90.0f, 200.0f), put(s, 100.0f, 210.0f), put(s, 100.0f, 190.0f),
        put(s, 110.0f, 210.0f), put(s, 90.0f, 190.0f), put(s, 110.0f, 190.0f), put(s, 90.0f, 210.0f),
    };
    put(s, nextafterf(110.0f, INFINITY), 200.0f);
    put(s, nextafterf(90.0f, -INFINITY), 200.0f);
    put(s, 100.0f, nextafterf(210.0f, INFINITY));
    put(s, 100.0f, nextafterf(190.0f, -INFINITY));
    put(s, nextafterf(110.0f, INFINITY), nextafterf(210.0f, INFINITY));
    recorder r;
    watch(s, o, 10.0f, 0.0f, &r);
    FLUSH(s);
    EXPECT_EVENTS(&r, in, 8, NONE);
    EXPECT_VIEW(s, &r, in, 8);

    /* Values whose bounds round: the bounds are whatever single precision
     * makes of o - r and o + r. */
    const float ox = 0.1f, oz = 0.3f, ext = 0.7f;
    const float lo_x = ox - ext, hi_x = ox + ext, lo_z = oz - ext, hi_z = oz + ext;
    uint32_t o2 = put(s, ox, oz);
    uint32_t in2[4] = {put(s, lo_x, oz), put(s, hi_x, oz), put(s, ox, lo_z), put(s, hi_x, hi_z)};
    put(s, nextafterf(lo_x, -INFINITY), oz);
    put(s, nextafterf(hi_x, INFINITY), oz);
    put(s, ox, nextafterf(lo_z, -INFINITY));
    put(s, ox, nextafterf(hi_z, INFINITY));
    recorder r2;
    watch(s, o2, ext, 0.0f, &r2);
    FLUSH(s);
    EXPECT_EVENTS(&r2, in2, 4, NONE);
    EXPECT_VIEW(s, &r2, in2, 4);
    EXPECT_EVENTS(&r, NONE, NONE);
}

/* Entities moving onto a boundary from outside (enter) and from inside (no
 * event), off it (leave); the watcher moving so that its boundary lands on
 * an entity, and away again: the leave must fire (KBEngine #1329). */
static void test_moving_onto_boundary(void **state) {
    coord_system *s = *state;
    uint32_t o = put(s, 100.0f, 100.0f);
    uint32_t e = put(s, 130.0f, 100.0f);
    uint32_t f = put(s, 100.0f, 70.0f);
    recorder r;
    watch(s, o, 10.0f, 0.0f, &r);
    assert_int_equal(FLUSH(s), 0);

    move(s, e, 110.0f, 100.0f); /* from outside onto the high X boundary */
    move(s, f, 100.0f, 90.0f);  /* from outside onto the low Z boundary */
    FLUSH(s);
    EXPECT_EVENTS(&r, ENTERS(e, f), NONE);
    move(s, e, 105.0f, 100.0f);
    move(s, f, 100.0f, 95.0f);
    assert_int_equal(FLUSH(s), 0);
    move(s, e, 110.0f, 100.0f); /* from inside onto the boundary */
    move(s, f, 100.0f, 90.0f);
    assert_int_equal(FLUSH(s), 0);
    EXPECT_VIEW(s, &r, VIEW(e, f));
    move(s, e, nextafterf(110.0f, INFINITY), 100.0f); /* just off it */
    move(s, f, 100.0f, nextafterf(90.0f, -INFINITY));
    FLUSH(s);
    EXPECT_EVENTS(&r, NONE, LEAVES(e, f));
    move(s, e, 110.0f, 110.0f); /* onto the corner */
    FLUSH(s);
    EXPECT_EVENTS(&r, ENTERS(e), NONE);
    move(s, e, 110.0f, nextafterf(110.0f, INFINITY));
    FLUSH(s);
    EXPECT_EVENTS(&r, NONE, LEAVES(e));

    /* The watcher's high X boundary lands on g, then moves away. */
    uint32_t g = put(s, 200.0f, 100.0f);
    assert_int_equal(FLUSH(s), 0);
    move(s, o, 190.0f, 100.0f);
    FLUSH(s);
    EXPECT_EVENTS(&r, ENTERS(g), NONE);
    move(s, o, 100.0f, 100.0f);
    FLUSH(s);
    EXPECT_EVENTS(&r, NONE, LEAVES(g));
    /* Its low X boundary lands on g, then moves away the other way. */
    move(s, o, 210.0f, 100.0f);
    FLUSH(s);
    EXPECT_EVENTS(&r, ENTERS(g), NONE);
    move(s, o, 300.0f, 100.0f);
    FLUSH(s);
    EXPECT_EVENTS(&r, NONE, LEAVES(g));
    /* On Z: low boundary onto g, then through to the high boundary (no
     * event), then away. */
    move(s, o, 200.0f, 110.0f);
    FLUSH(s);
    EXPECT_EVENTS(&r, ENTERS(g), NONE);
    move(s, o, 200.0f, 90.0f);
    assert_int_equal(FLUSH(s), 0);
    move(s, o, 200.0f, 50.0f);
    FLUSH(s);
    EXPECT_EVENTS(&r, NONE, LEAVES(g));
    /* Landing on the boundary and leaving again before the flush: nothing. */
    move(s, o, 190.0f, 100.0f);
    move(s, o, 150.0f, 100.0f);
    assert_int_equal(FLUSH(s), 0);
    /* Both g and the boundary land on the same new coordinate. */
    move(s, o, 400.0f, 400.0f);
    move(s, g, 410.0f, 390.0f);
    FLUSH(s);
    EXPECT_EVENTS(&r, ENTERS(g), NONE);
    move(s, o, 390.0f, 410.0f);
    move(s, g, 380.0f, 420.0f);
    assert_int_equal(FLUSH(s), 0);
    move(s, g, 379.5f, 420.0f);
    FLUSH(s);
    EXPECT_EVENTS(&r, NONE, LEAVES(g));
    EXPECT_VIEW(s, &r, NONE);
}

/* An owner never sees itself, whatever its watchers' extents and moves. */
static void test_owner_never_sees_itself(void **state) {
    coord_system *s = *state;
    uint32_t o = put(s, 0.0f, 0.0f);
    recorder r1, r2, r3;
    watch(s, o, 50.0f, 0.0f, &r1);
    watch(s, o, 0.0f, 0.0f, &r2);
    watch(s, o, 10.0f, 5.0f, &r3);
    assert_int_equal(FLUSH(s), 0);
    assert_false(coord_watcher_sees(s, r1.watcher, o));
    move(s, o, 10.0f, 10.0f);
    assert_int_equal(FLUSH(s), 0);
    uint32_t e = put(s, 10.0f, 10.0f);
    FLUSH(s);
    EXPECT_EVENTS(&r1, ENTERS(e), NONE);
    EXPECT_EVENTS(&r2, ENTERS(e), NONE);
    EXPECT_EVENTS(&r3, ENTERS(e), NONE);
    assert_int_equal(coord_set_watcher_range(s, r1.watcher, 500.0f, 0.0f), 0);
    move(s, o, -300.0f, 200.0f);
    FLUSH(s);
    EXPECT_EVENTS(&r1, NONE, NONE);
    EXPECT_EVENTS(&r2, NONE, LEAVES(e));
    EXPECT_EVENTS(&r3, NONE, LEAVES(e));
    EXPECT_VIEW(s, &r1, VIEW(e));
    EXPECT_VIEW(s, &r2, NONE);
}

/* A growing extent brings entities in; a shrinking one lets them go only
 * beyond extent + hysteresis (closed), and a band never brings anything in. */
static void test_range_changes_and_hysteresis(void **state) {
    coord_system *s = *state;
    uint32_t o = put(s, 0.0f, 0.0f);
    uint32_t e = put(s, 15.0f, 0.0f);
    recorder r;
    uint32_t w = watch(s, o, 10.0f, 0.0f, &r);
    assert_int_equal(FLUSH(s), 0);
    assert_int_equal(coord_set_watcher_range(s, w, 20.0f, 0.0f), 0);
    FLUSH(s);
    EXPECT_EVENTS(&r, ENTERS(e), NONE);
    assert_int_equal(coord_set_watcher_range(s, w, 12.0f, 5.0f), 0); /* 15 <= 17: stays */
    assert_int_equal(FLUSH(s), 0);
    assert_int_equal(coord_set_watcher_range(s, w, 12.0f, 3.0f), 0); /* 15 == 15: on the boundary, stays */
    assert_int_equal(FLUSH(s), 0);
    EXPECT_VIEW(s, &r, VIEW(e));
    assert_int_equal(coord_set_watcher_range(s, w, 12.0f, 2.5f), 0); /* 15 > 14.5: leaves */
    FLUSH(s);
    EXPECT_EVENTS(&r, NONE, LEAVES(e));
    assert_int_equal(coord_set_watcher_range(s, w, 12.0f, 10.0f), 0); /* in the band: no enter */
    assert_int_equal(FLUSH(s), 0);
    assert_int_equal(coord_set_watcher_range(s, w, 15.0f, 0.0f), 0); /* on the boundary: enters */
    FLUSH(s);
    EXPECT_EVENTS(&r, ENTERS(e), NONE);
    assert_int_equal(coord_set_watcher_range(s, w, 14.0f, 0.0f), 0);
    FLUSH(s);
    EXPECT_EVENTS(&r, NONE, LEAVES(e));

    /* Hysteresis on movement: r = 10, h = 5. */
    assert_int_equal(coord_set_watcher_range(s, w, 10.0f, 5.0f), 0);
    move(s, e, 0.0f, 8.0f);
    FLUSH(s);
    EXPECT_EVENTS(&r, ENTERS(e), NONE);
    move(s, e, 0.0f, 14.0f);
    assert_int_equal(FLUSH(s), 0);
    move(s, e, 0.0f, -15.0f); /* the outer boundary */
    assert_int_equal(FLUSH(s), 0);
    move(s, e, 0.0f, nextafterf(-15.0f, -INFINITY));
    FLUSH(s);
    EXPECT_EVENTS(&r, NONE, LEAVES(e));
    move(s, e, 12.0f, 0.0f); /* the band: no enter */
    assert_int_equal(FLUSH(s), 0);
    move(s, e, 10.0f, 0.0f); /* the inner boundary */
    FLUSH(s);
    EXPECT_EVENTS(&r, ENTERS(e), NONE);

    /* Outer bounds in single precision: o + (r + h) rounds. */
    const float ext = 0.7f, hys = 0.2f;
    const float outer = ext + hys;
    const float ox = 0.1f;
    const float hi = ox + outer;
    uint32_t o2 = put(s, ox, 500.0f);
    uint32_t e2 = put(s, ox, 500.0f);
    recorder r2;
    watch(s, o2, ext, hys, &r2);
    FLUSH(s);
    EXPECT_EVENTS(&r2, ENTERS(e2), NONE);
    move(s, e2, hi, 500.0f);
    assert_int_equal(FLUSH(s), 0);
    move(s, e2, nextafterf(hi, INFINITY), 500.0f);
    FLUSH(s);
    EXPECT_EVENTS(&r2, NONE, LEAVES(e2));
}

/* An enter and a leave of the same pair between two flushes cancel. */
static void test_enter_leave_cancel(void **state) {
    coord_system *s = *state;
    uint32_t o = put(s, 0.0f, 0.0f);
    uint32_t out = put(s, 50.0f, 50.0f);
    uint32_t in = put(s, 5.0f, 5.0f);
    recorder r;
    watch(s, o, 10.0f, 0.0f, &r);
    FLUSH(s);
    EXPECT_EVENTS(&r, ENTERS(in), NONE);

    move(s, out, 5.0f, 0.0f); /* in and out again */
    move(s, out, 50.0f, 50.0f);
    move(s, in, 50.0f, 0.0f); /* out and in again */
    move(s, in, 5.0f, 5.0f);
    assert_int_equal(FLUSH(s), 0);
    EXPECT_EVENTS(&r, NONE, NONE);
    /* In, out, in: one enter. */
    move(s, out, 5.0f, 0.0f);
    move(s, out, 50.0f, 50.0f);
    move(s, out, 0.0f, 5.0f);
    FLUSH(s);
    EXPECT_EVENTS(&r, ENTERS(out), NONE);
    /* The watcher's owner doing the same. */
    move(s, o, 300.0f, 300.0f);
    move(s, o, 0.0f, 0.0f);
    assert_int_equal(FLUSH(s), 0);
    /* An entity added and removed between flushes was never seen. */
    uint32_t brief = put(s, 1.0f, 1.0f);
    assert_int_equal(coord_remove_entity(s, brief), 0);
    assert_int_equal(FLUSH(s), 0);
    EXPECT_VIEW(s, &r, VIEW(in, out));
}

/* An entity crossing the inner square's corner diagonally, from outside
 * the inner square to the band, never entered: no event, although moving
 * X then Z (or the owner's bounds) passes through the inner square. */
static void test_intermediate_states_do_not_leak(void **state) {
    coord_system *s = *state;
    uint32_t o = put(s, 0.0f, 0.0f);
    uint32_t e1 = put(s, -15.0f, 5.0f); /* band */
    uint32_t e2 = put(s, 5.0f, -15.0f); /* band */
    uint32_t e3 = put(s, -25.0f, 5.0f); /* beyond the outer square */
    uint32_t e4 = put(s, 5.0f, -25.0f); /* beyond the outer square */
    recorder r;
    watch(s, o, 10.0f, 10.0f, &r);
    assert_int_equal(FLUSH(s), 0);
    move(s, e1, 5.0f, 15.0f); /* X first passes (5, 5) */
    move(s, e2, 15.0f, 5.0f); /* Z first passes (5, 5) */
    move(s, e3, 5.0f, 15.0f); /* X first passes (5, 5) */
    move(s, e4, 15.0f, 5.0f); /* Z first passes (5, 5) */
    assert_int_equal(FLUSH(s), 0);
    EXPECT_VIEW(s, &r, NONE);

    /* The same with the owner moving: relative to it, e5 goes from
     * (-15, 5) to (5, 15). */
    uint32_t o2 = put(s, 515.0f, 495.0f);
    uint32_t e5 = put(s, 500.0f, 500.0f);
    recorder r2;
    watch(s, o2, 10.0f, 10.0f, &r2);
    assert_int_equal(FLUSH(s), 0);
    move(s, o2, 495.0f, 485.0f);
    assert_int_equal(FLUSH(s), 0);
    EXPECT_VIEW(s, &r2, NONE);
    /* And then really inside. */
    move(s, e5, 496.0f, 486.0f);
    FLUSH(s);
    EXPECT_EVENTS(&r2, ENTERS(e5), NONE);
}

/* Teleporting far away and back within one flush changes nothing. */
static void test_teleport_and_back(void **state) {
    coord_system *s = *state;
    uint32_t o = put(s, 0.0f, 0.0f);
    uint32_t in = put(s, 5.0f, 5.0f);
    uint32_t band = put(s, 12.0f, 0.0f);
    uint32_t out = put(s, 500.0f, 500.0f);
    recorder r;
    watch(s, o, 10.0f, 5.0f, &r);
    FLUSH(s);
    EXPECT_EVENTS(&r, ENTERS(in), NONE);
    move(s, band, 0.0f, 0.0f); /* enters, then stays in the band */
    FLUSH(s);
    move(s, band, 12.0f, 0.0f);
    FLUSH(s);
    EXPECT_EVENTS(&r, ENTERS(band), NONE);

    move(s, in, 900.0f, 900.0f);
    move(s, in, 5.0f, 5.0f);
    move(s, band, -900.0f, 900.0f);
    move(s, band, 12.0f, 0.0f);
    move(s, out, 1.0f, 1.0f);
    move(s, out, 500.0f, 500.0f);
    assert_int_equal(FLUSH(s), 0);
    move(s, o, 10000.0f, -10000.0f);
    move(s, o, 0.0f, 0.0f);
    assert_int_equal(FLUSH(s), 0);
    EXPECT_VIEW(s, &r, VIEW(in, band));
}

/* A watcher of extent 0 sees only entities exactly at its owner's point. */
static void test_extent_zero(void **state) {
    coord_system *s = *state;
    uint32_t o = put(s, 10.0f, 10.0f);
    uint32_t e1 = put(s, 10.0f, 10.0f);
    uint32_t e2 = put(s, 10.0f, nextafterf(10.0f, INFINITY));
    put(s, nextafterf(10.0f, 0.0f), 10.0f);
    uint32_t e4 = put(s, 10.0f, 10.0f);
    recorder r;
    watch(s, o, 0.0f, 0.0f, &r);
    FLUSH(s);
    EXPECT_EVENTS(&r, ENTERS(e1, e4), NONE);
    move(s, e1, nextafterf(10.0f, INFINITY), 10.0f);
    FLUSH(s);
    EXPECT_EVENTS(&r, NONE, LEAVES(e1));
    move(s, o, 10.0f, nextafterf(10.0f, INFINITY)); /* onto e2 */
    FLUSH(s);
    EXPECT_EVENTS(&r, ENTERS(e2), LEAVES(e4));
    EXPECT_VIEW(s, &r, VIEW(e2));
}

/* Basic lifecycle: removed entities leave, removed watchers stay silent,
 * new watchers report what is already in range. */
static void test_lifecycle(void **state) {
    coord_system *s = *state;
    uint32_t o = put(s, 0.0f, 0.0f);
    uint32_t e1 = put(s, 1.0f, 1.0f);
    uint32_t e2 = put(s, 2.0f, 2.0f);
    recorder r;
    watch(s, o, 10.0f, 0.0f, &r);
    assert_int_equal(coord_watcher_count(s), 1);
    assert_int_equal(coord_watcher_view_size(s, r.watcher), 0); /* nothing before the flush */
    FLUSH(s);
    EXPECT_EVENTS(&r, ENTERS(e1, e2), NONE);
    assert_int_equal(coord_remove_entity(s, e1), 0);
    assert_true(coord_watcher_sees(s, r.watcher, e1)); /* as of the last flush */
    FLUSH(s);
    EXPECT_EVENTS(&r, NONE, LEAVES(e1));
    EXPECT_VIEW(s, &r, VIEW(e2));

    /* A late watcher reports what is already in range. */
    recorder late;
    watch(s, e2, 5.0f, 0.0f, &late);
    FLUSH(s);
    EXPECT_EVENTS(&late, ENTERS(o), NONE);
    EXPECT_EVENTS(&r, NONE, NONE);

    /* A removed watcher gets nothing, whatever moves. */
    assert_int_equal(coord_remove_watcher(s, late.watcher), 0);
    late.removed = true;
    assert_int_equal(coord_remove_watcher(s, late.watcher), -1);
    assert_int_equal(coord_watcher_count(s), 1);
    move(s, o, 500.0f, 500.0f);
    uint32_t e3 = put(s, 2.0f, 3.0f);
    FLUSH(s);
    EXPECT_EVENTS(&late, NONE, NONE);
    EXPECT_EVENTS(&r, NONE, LEAVES(e2));
    assert_false(coord_watcher_sees(s, late.watcher, o));
    /* Removing the owner removes its watchers, silently. */
    move(s, e3, 501.0f, 501.0f);
    assert_int_equal(coord_remove_entity(s, o), 0);
    assert_int_equal(coord_watcher_count(s), 0);
    // cppcheck-suppress unreadVariable ; the recorder's callbacks read it during FLUSH
    r.removed = true;
    assert_int_equal(FLUSH(s), 0);
    assert_int_equal(coord_entity_count(s), 2);
}

/* ---- callbacks that change the system ----------------------------------- */

/* hook_data for the callback cases. */
typedef struct hook_ctx {
    uint32_t target;   /* entity the hook acts on */
    uint32_t other;    /* a second entity, or COORD_NONE */
    uint32_t added;    /* entity the hook added, or COORD_NONE */
    recorder *sibling; /* another watcher of the same owner, or NULL */
    recorder *new_rec; /* recorder for a watcher the hook adds, or NULL */
    int fired;
    int errors; /* a call from the hook failed */
} hook_ctx;

static void hook_remove_entered(coord_system *s, recorder *rec, bool enter, uint32_t entity) {
    hook_ctx *ctx = rec->hook_data;
    if (enter && entity == ctx->target) {
        ctx->fired++;
        ctx->errors += coord_remove_entity(s, entity) != 0;
    }
}

static void hook_remove_owner(coord_system *s, recorder *rec, bool enter, uint32_t entity) {
    (void)enter;
    (void)entity;
    hook_ctx *ctx = rec->hook_data;
    if (ctx->fired++ == 0) {
        ctx->errors += coord_remove_entity(s, ctx->target) != 0;
        rec->removed = true;
        ctx->sibling->removed = true;
    }
}

static void hook_move(coord_system *s, recorder *rec, bool enter, uint32_t entity) {
    hook_ctx *ctx = rec->hook_data;
    if (enter && entity == ctx->target) {
        ctx->fired++;
        ctx->errors += coord_move_entity(s, entity, 500.0f, 0.0f, 500.0f) != 0;
        ctx->errors += coord_move_entity(s, ctx->other, 1.0f, 0.0f, 1.0f) != 0;
    }
}

static void hook_add(coord_system *s, recorder *rec, bool enter, uint32_t entity) {
    hook_ctx *ctx = rec->hook_data;
    if (enter && entity == ctx->target && ctx->fired++ == 0) {
        ctx->added = coord_add_entity(s, 2.0f, 0.0f, 2.0f, 0, 0, NULL);
        ctx->errors += ctx->added == COORD_NONE;
        rec_init(ctx->new_rec);
        ctx->new_rec->watcher = coord_add_watcher(s, entity, 10.0f, 0.0f, &rec_callbacks, ctx->new_rec);
        ctx->errors += ctx->new_rec->watcher == COORD_NONE;
    }
}

/* The recorder's view, coord's view and the brute-force view (h == 0)
 * agree after the flush. */
static void expect_oracle_trap(const coord_system *s, const recorder *rec, uint32_t owner, float extent,
                               const uint32_t *candidates, size_t n) {
    uint32_t expect[REC_MAX_VIEW];
    size_t count = oracle_trap_view(s, owner, extent, candidates, n, expect);
    assert_int_equal(rec->errors, 0);
    EXPECT_VIEW(s, rec, expect, count);
}

static void test_callback_removes_entered(void **state) {
    coord_system *s = *state;
    uint32_t o = put(s, 0.0f, 0.0f);
    uint32_t p = put(s, 3.0f, 0.0f);
    uint32_t e1 = put(s, 5.0f, 5.0f);
    uint32_t e2 = put(s, -5.0f, 5.0f);
    recorder ro, rp;
    hook_ctx ctx = {.target = e1, .other = COORD_NONE, .added = COORD_NONE};
    watch(s, o, 10.0f, 0.0f, &ro);
    ro.hook = hook_remove_entered;
    ro.hook_data = &ctx;
    watch(s, p, 10.0f, 0.0f, &rp);
    FLUSH(s);
    assert_int_equal(ctx.fired, 1);
    assert_int_equal(ctx.errors, 0);
    /* The same flush reports the removal to the watcher that saw e1. */
    EXPECT_EVENTS(&ro, ENTERS(e1, e2, p), LEAVES(e1));
    const uint32_t all[] = {o, p, e1, e2};
    expect_oracle_trap(s, &ro, o, 10.0f, all, 4);
    expect_oracle_trap(s, &rp, p, 10.0f, all, 4);
    assert_false(coord_watcher_sees(s, rp.watcher, e1));
    assert_int_equal(FLUSH(s), 0);
    assert_int_equal(coord_entity_count(s), 3);
}

static void test_callback_removes_own_owner(void **state) {
    coord_system *s = *state;
    uint32_t o = put(s, 0.0f, 0.0f);
    uint32_t p = put(s, 3.0f, 0.0f);
    uint32_t e1 = put(s, 5.0f, 5.0f);
    uint32_t e2 = put(s, -5.0f, 5.0f);
    uint32_t e3 = put(s, 5.0f, -5.0f);
    recorder ro, ro2, rp;
    hook_ctx ctx = {.target = o, .other = COORD_NONE, .added = COORD_NONE, .sibling = &ro2};
    watch(s, o, 10.0f, 0.0f, &ro);
    ro.hook = hook_remove_owner;
    ro.hook_data = &ctx;
    watch(s, o, 10.0f, 0.0f, &ro2);
    watch(s, p, 10.0f, 0.0f, &rp);
    FLUSH(s);
    assert_int_equal(ctx.errors, 0);
    assert_int_equal(ctx.fired, 1); /* nothing reached ro after its owner went */
    assert_int_equal(ro.n_events, 1);
    assert_int_equal(ro.errors, 0);
    assert_int_equal(ro2.errors, 0);
    assert_int_equal(coord_remove_watcher(s, ro.watcher), -1);
    assert_int_equal(coord_remove_watcher(s, ro2.watcher), -1);
    assert_int_equal(coord_watcher_count(s), 1);
    const uint32_t all[] = {o, p, e1, e2, e3};
    expect_oracle_trap(s, &rp, p, 10.0f, all, 5);
    assert_int_equal(rp.view_n, 3);
    assert_int_equal(FLUSH(s), 0);
}

static void test_callback_moves_entities(void **state) {
    coord_system *s = *state;
    uint32_t o = put(s, 0.0f, 0.0f);
    uint32_t e1 = put(s, 5.0f, 5.0f);
    uint32_t e2 = put(s, 50.0f, 50.0f);
    recorder r;
    hook_ctx ctx = {.target = e1, .other = e2, .added = COORD_NONE};
    watch(s, o, 10.0f, 0.0f, &r);
    r.hook = hook_move;
    r.hook_data = &ctx;
    FLUSH(s);
    assert_int_equal(ctx.fired, 1);
    assert_int_equal(ctx.errors, 0);
    EXPECT_EVENTS(&r, ENTERS(e1, e2), LEAVES(e1));
    const uint32_t all[] = {o, e1, e2};
    expect_oracle_trap(s, &r, o, 10.0f, all, 3);
    assert_int_equal(FLUSH(s), 0);
}

static void test_callback_adds_entity_and_watcher(void **state) {
    coord_system *s = *state;
    uint32_t o = put(s, 0.0f, 0.0f);
    uint32_t e1 = put(s, 5.0f, 5.0f);
    recorder r, added_rec;
    hook_ctx ctx = {.target = e1, .other = COORD_NONE, .added = COORD_NONE, .new_rec = &added_rec};
    watch(s, o, 10.0f, 0.0f, &r);
    r.hook = hook_add;
    r.hook_data = &ctx;
    FLUSH(s);
    assert_int_equal(ctx.fired, 1);
    assert_int_equal(ctx.errors, 0);
    /* The same flush reports the new entity, and the new watcher's view. */
    EXPECT_EVENTS(&r, ENTERS(e1, ctx.added), NONE);
    EXPECT_EVENTS(&added_rec, ENTERS(o, ctx.added), NONE);
    const uint32_t all[] = {o, e1, ctx.added};
    expect_oracle_trap(s, &r, o, 10.0f, all, 3);
    expect_oracle_trap(s, &added_rec, e1, 10.0f, all, 3);
    assert_int_equal(coord_watcher_count(s), 2);
    assert_int_equal(FLUSH(s), 0);
}

/* ======================================================================== */
/* 3. Spatial queries                                                       */
/* ======================================================================== */

#define Q_ENTITIES 3000
#define Q_QUERIES 300
/* Entities this close to a query's boundary (in distance) are ambiguous
 * between single and double precision: such a query is drawn again. */
#define Q_MARGIN 1e-2

typedef struct q_entity {
    uint32_t id;
    float p[3];
    uint32_t type, flags;
} q_entity;

static bool q_filter_pass(const q_entity *e, const coord_query_filter *f) {
    if (f == NULL) {
        return true;
    }
    if (f->type_mask != 0 && ((1u << e->type) & f->type_mask) == 0) {
        return false;
    }
    return (e->flags & f->required_flags) == f->required_flags && (e->flags & f->excluded_flags) == 0 &&
           e->id != f->exclude_entity;
}

static void q_random_filter(uint64_t *rng, const q_entity *es, size_t n, coord_query_filter *f) {
    f->type_mask = rand_below(rng, 3) == 0 ? 0 : (uint32_t)rand_below(rng, 256);
    f->required_flags = rand_below(rng, 2) ? 0 : 1u << rand_below(rng, 4);
    f->excluded_flags = rand_below(rng, 2) ? 0 : 1u << rand_below(rng, 4);
    f->exclude_entity = rand_below(rng, 2) ? COORD_NONE : es[rand_below(rng, (uint32_t)n)].id;
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* id -> index in the entity array, for the segment's order check. */
typedef struct q_index {
    uint32_t id;
    uint32_t i;
} q_index;

static int cmp_q_index(const void *a, const void *b) {
    return cmp_u32(&((const q_index *)a)->id, &((const q_index *)b)->id);
}

static size_t q_find(const q_index *index, size_t n, uint32_t id) {
    q_index key = {id, 0};
    const q_index *hit = bsearch(&key, index, n, sizeof(*index), cmp_q_index);
    assert_non_null(hit);
    return hit->i;
}

/* Checks one query result against the brute-force set: same total, same
 * ids (sorted copies compared), no id twice. */
static void q_expect_same_set(const uint32_t *got, size_t got_n, uint32_t *want, size_t want_n) {
    assert_int_equal(got_n, want_n);
    uint32_t *sorted = malloc((got_n + 1) * sizeof(*sorted));
    assert_non_null(sorted);
    memcpy(sorted, got, got_n * sizeof(*sorted));
    qsort(sorted, got_n, sizeof(*sorted), cmp_u32);
    qsort(want, want_n, sizeof(*want), cmp_u32);
    for (size_t i = 0; i < got_n; i++) {
        assert_int_equal(sorted[i], want[i]);
    }
    free(sorted);
}

/* A cut result: the total is returned, at most `cap` ids are written (the
 * slot after them is untouched), all distinct and all matching. */
static void q_expect_cut(const uint32_t *got, size_t cap, size_t ret, const uint32_t *full, size_t full_n) {
    assert_int_equal(ret, full_n);
    assert_int_equal(got[cap], 0xDEADBEEFu);
    size_t written = cap < full_n ? cap : full_n;
    for (size_t i = 0; i < written; i++) {
        assert_true(id_listed(full, full_n, got[i]));
        assert_false(id_listed(got, i, got[i]));
    }
}

/* Distance, in double, from p to the segment a-b (over `axes`: X/Z, plus Y
 * in 3D), and the projection of p on the line, as a distance from a. */
static double q_segment_distance(const float a[3], const float b[3], const float p[3], bool three_d, double *along) {
    double d[3], v[3];
    double len2 = 0.0, dot = 0.0;
    for (int i = 0; i < 3; i++) {
        bool used = i != 1 || three_d;
        d[i] = used ? (double)b[i] - a[i] : 0.0;
        v[i] = used ? (double)p[i] - a[i] : 0.0;
        len2 += d[i] * d[i];
        dot += d[i] * v[i];
    }
    double t = len2 > 0.0 ? dot / len2 : 0.0;
    *along = len2 > 0.0 ? dot / sqrt(len2) : 0.0;
    double tc = t < 0.0 ? 0.0 : t > 1.0 ? 1.0 : t;
    double dist2 = 0.0;
    for (int i = 0; i < 3; i++) {
        double q = v[i] - tc * d[i];
        dist2 += q * q;
    }
    return sqrt(dist2);
}

static void run_query_test(bool three_d, uint64_t seed) {
    uint64_t rng = seed;
    coord_system *s = coord_create(three_d);
    assert_non_null(s);
    /* x*alloc: out of memory stops the program (log.h). */
    q_entity *es = xcalloc(Q_ENTITIES, sizeof(*es));
    uint32_t *want = xmalloc((Q_ENTITIES + 1) * sizeof(*want));
    uint32_t *got = xmalloc((Q_ENTITIES + 1) * sizeof(*got));
    double *along = xmalloc(Q_ENTITIES * sizeof(*along));
    q_index *index = xmalloc(Q_ENTITIES * sizeof(*index));
    for (size_t i = 0; i < Q_ENTITIES; i++) {
        q_entity *e = &es[i];
        e->p[0] = rand_float(&rng, 0.0f, 1000.0f);
        e->p[1] = rand_float(&rng, 0.0f, 100.0f);
        e->p[2] = rand_float(&rng, 0.0f, 1000.0f);
        e->type = rand_below(&rng, 8);
        e->flags = rand_below(&rng, 16);
        e->id = coord_add_entity(s, e->p[0], e->p[1], e->p[2], e->type, e->flags, NULL);
        assert_int_not_equal(e->id, COORD_NONE);
        index[i] = (q_index){e->id, (uint32_t)i};
    }
    qsort(index, Q_ENTITIES, sizeof(*index), cmp_q_index);
    /* Half of them move (queries see pending additions and moves). */
    for (size_t i = 0; i < Q_ENTITIES; i += 2) {
        q_entity *e = &es[i];
        e->p[0] = rand_float(&rng, 0.0f, 1000.0f);
        e->p[2] = rand_float(&rng, 0.0f, 1000.0f);
        assert_int_equal(coord_move_entity(s, e->id, e->p[0], e->p[1], e->p[2]), 0);
    }
    /* Filters changed after creation are honoured. */
    for (size_t i = 1; i < Q_ENTITIES; i += 7) {
        es[i].type = rand_below(&rng, 8);
        es[i].flags = rand_below(&rng, 16);
        coord_set_entity_filter(s, es[i].id, es[i].type, es[i].flags);
    }

    for (int q = 0; q < Q_QUERIES; q++) {
        coord_query_filter filter;
        q_random_filter(&rng, es, Q_ENTITIES, &filter);
        const coord_query_filter *f = rand_below(&rng, 4) == 0 ? NULL : &filter;
        size_t want_n, ret;

        /* Box. Continuous random bounds and positions never tie exactly
         * (checked); in 2D the Y bounds span all entities. */
        float lo[3], hi[3];
        bool tie;
        do {
            tie = false;
            for (int a = 0; a < 3; a++) {
                float span = a == 1 ? 100.0f : 1000.0f;
                float c = rand_float(&rng, 0.0f, span);
                float half = rand_float(&rng, 0.0f, a == 1 ? 60.0f : 150.0f);
                lo[a] = c - half;
                hi[a] = c + half;
            }
            if (!three_d) {
                lo[1] = -1.0f;
                hi[1] = 101.0f;
            }
            want_n = 0;
            for (size_t i = 0; i < Q_ENTITIES; i++) {
                const q_entity *e = &es[i];
                bool inside = true;
                for (int a = 0; a < 3; a++) {
                    tie |= e->p[a] == lo[a] || e->p[a] == hi[a];
                    inside &= lo[a] <= e->p[a] && e->p[a] <= hi[a];
                }
                if (inside && q_filter_pass(e, f)) {
                    want[want_n++] = e->id;
                }
            }
        } while (tie);
        ret = coord_query_box(s, lo[0], lo[1], lo[2], hi[0], hi[1], hi[2], f, got, Q_ENTITIES);
        q_expect_same_set(got, ret, want, want_n);
        /* Cut: at most `cap` written, the total returned. */
        size_t cap = want_n / 2;
        got[cap] = 0xDEADBEEFu;
        ret = coord_query_box(s, lo[0], lo[1], lo[2], hi[0], hi[1], hi[2], f, got, cap);
        q_expect_cut(got, cap, ret, want, want_n);

        /* Sphere: Euclidean on X/Z (plus Y in 3D); the centre's Y is random
         * in 2D and must not matter. */
        float c[3];
        float radius;
        do {
            tie = false;
            for (int a = 0; a < 3; a++) {
                c[a] = rand_float(&rng, 0.0f, a == 1 ? 100.0f : 1000.0f);
            }
            radius = rand_float(&rng, 0.0f, 120.0f);
            want_n = 0;
            for (size_t i = 0; i < Q_ENTITIES; i++) {
                const q_entity *e = &es[i];
                double dx = (double)e->p[0] - c[0], dy = three_d ? (double)e->p[1] - c[1] : 0.0,
                       dz = (double)e->p[2] - c[2];
                double d = sqrt(dx * dx + dy * dy + dz * dz);
                tie |= fabs(d - radius) < Q_MARGIN;
                if (d <= radius && q_filter_pass(e, f)) {
                    want[want_n++] = e->id;
                }
            }
        } while (tie);
        ret = coord_query_sphere(s, c[0], c[1], c[2], radius, f, got, Q_ENTITIES);
        q_expect_same_set(got, ret, want, want_n);
        cap = want_n > 0 ? (size_t)rand_below(&rng, (uint32_t)want_n) : 0;
        got[cap] = 0xDEADBEEFu;
        ret = coord_query_sphere(s, c[0], c[1], c[2], radius, f, got, cap);
        q_expect_cut(got, cap, ret, want, want_n);

        /* Shapes: the square (a cube in 3D) of extent `radius`, bounded in
         * single precision as a trigger is, and the round rule on top (a
         * sphere's Y counts in 2D too). Ties are the rule's to settle. */
        for (int shape = COORD_SHAPE_BOX; shape <= COORD_SHAPE_SPHERE; shape++) {
            for (int a = 0; a < 3; a++) {
                c[a] = rand_float(&rng, 0.0f, a == 1 ? 100.0f : 1000.0f);
            }
            radius = rand_below(&rng, 2) ? rand_float(&rng, 0.0f, 120.0f) : (float)rand_below(&rng, 120);
            float centre_axes[3] = {c[0], c[2], c[1]};
            want_n = 0;
            for (size_t i = 0; i < Q_ENTITIES; i++) {
                const q_entity *e = &es[i];
                bool inside = axis_inside(centre_axes[0], radius, e->p[0]) &&
                              axis_inside(centre_axes[1], radius, e->p[2]) &&
                              (!three_d || axis_inside(centre_axes[2], radius, e->p[1])) &&
                              round_inside((coord_shape)shape, c, radius, e->p);
                if (inside && q_filter_pass(e, f)) {
                    want[want_n++] = e->id;
                }
            }
            ret = coord_query_shape(s, (coord_shape)shape, c[0], c[1], c[2], radius, f, got, Q_ENTITIES);
            q_expect_same_set(got, ret, want, want_n);
            cap = want_n > 0 ? (size_t)rand_below(&rng, (uint32_t)want_n) : 0;
            got[cap] = 0xDEADBEEFu;
            ret = coord_query_shape(s, (coord_shape)shape, c[0], c[1], c[2], radius, f, got, cap);
            q_expect_cut(got, cap, ret, want, want_n);
        }

        /* Segment: within `radius` of the segment (a capsule), ordered by
         * distance along it. */
        float a0[3], a1[3];
        do {
            tie = false;
            for (int a = 0; a < 3; a++) {
                float span = a == 1 ? 100.0f : 1000.0f;
                a0[a] = rand_float(&rng, 0.0f, span);
                a1[a] = a0[a] + rand_float(&rng, a == 1 ? -30.0f : -300.0f, a == 1 ? 30.0f : 300.0f);
            }
            radius = rand_float(&rng, 0.5f, 25.0f);
            want_n = 0;
            for (size_t i = 0; i < Q_ENTITIES; i++) {
                const q_entity *e = &es[i];
                double t;
                double d = q_segment_distance(a0, a1, e->p, three_d, &t);
                tie |= fabs(d - radius) < Q_MARGIN;
                along[i] = t;
                if (d <= radius && q_filter_pass(e, f)) {
                    want[want_n++] = e->id;
                }
            }
        } while (tie);
        ret = coord_query_segment(s, a0[0], a0[1], a0[2], a1[0], a1[1], a1[2], radius, f, got, Q_ENTITIES);
        /* Order: whether "distance along" is the projection or the entry
         * point of the ray into the entity's radius (which lies within
         * `radius` before the projection), an entity whose projection is
         * more than `radius` further than another's comes after it. */
        q_expect_same_set(got, ret, want, want_n);
        double furthest = -INFINITY; /* largest projection so far */
        for (size_t i = 0; i < ret; i++) {
            double t = along[q_find(index, Q_ENTITIES, got[i])];
            assert_false(furthest > t + radius + Q_MARGIN);
            furthest = t > furthest ? t : furthest;
        }
        cap = want_n > 0 ? (size_t)rand_below(&rng, (uint32_t)want_n) : 0;
        got[cap] = 0xDEADBEEFu;
        ret = coord_query_segment(s, a0[0], a0[1], a0[2], a1[0], a1[1], a1[2], radius, f, got, cap);
        q_expect_cut(got, cap, ret, want, want_n);
    }

    /* Removed entities are not found. */
    for (size_t i = 0; i < Q_ENTITIES; i += 3) {
        assert_int_equal(coord_remove_entity(s, es[i].id), 0);
    }
    size_t ret = coord_query_box(s, -1.0f, -1.0f, -1.0f, 1001.0f, 101.0f, 1001.0f, NULL, got, Q_ENTITIES);
    assert_int_equal(ret, Q_ENTITIES - (Q_ENTITIES + 2) / 3);
    for (size_t i = 0; i < ret; i++) {
        for (size_t j = 0; j < Q_ENTITIES; j += 3) {
            assert_int_not_equal(got[i], es[j].id);
        }
    }
    free(es);
    free(want);
    free(got);
    free(along);
    free(index);
    coord_free(s);
}

static void test_queries_2d(void **state) {
    (void)state;
    run_query_test(false, 11);
}

static void test_queries_3d(void **state) {
    (void)state;
    run_query_test(true, 12);
}

/* Filters and the segment's order on a small hand-made set. */
static void test_query_filters_and_order(void **state) {
    coord_system *s = *state;
    /* Along the X axis at x = 10, 20, ..., 100, entered in shuffled order;
     * types 0..4, flags alternate bit 0 and bit 1. */
    const int order[10] = {7, 2, 9, 0, 4, 1, 8, 3, 6, 5};
    uint32_t ids[10];
    for (int k = 0; k < 10; k++) {
        int i = order[k];
        ids[i] = coord_add_entity(s, 10.0f * (float)(i + 1), 0.0f, 0.0f, (uint32_t)(i % 5), i % 2 ? 2u : 1u, NULL);
        assert_int_not_equal(ids[i], COORD_NONE);
    }
    uint32_t out[16];
    /* The whole line, from x = 0 to 120, radius 1: all ten in order. */
    size_t n = coord_query_segment(s, 0.0f, 0.0f, 0.0f, 120.0f, 0.0f, 0.0f, 1.0f, NULL, out, 16);
    assert_int_equal(n, 10);
    for (int i = 0; i < 10; i++) {
        assert_int_equal(out[i], ids[i]);
    }
    /* Backwards: reverse order. */
    n = coord_query_segment(s, 120.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 1.0f, NULL, out, 16);
    assert_int_equal(n, 10);
    for (int i = 0; i < 10; i++) {
        assert_int_equal(out[i], ids[9 - i]);
    }
    /* A cut segment query keeps the order of what it writes. */
    n = coord_query_segment(s, 0.0f, 0.0f, 0.0f, 120.0f, 0.0f, 0.0f, 1.0f, NULL, out, 3);
    assert_int_equal(n, 10);
    for (int i = 1; i < 3; i++) {
        size_t a = 0, b = 0;
        while (ids[a] != out[i - 1]) {
            a++;
        }
        while (ids[b] != out[i]) {
            b++;
        }
        assert_true(a < b);
    }
    /* Filters. */
    coord_query_filter f = {
        .type_mask = 1u << 2, .required_flags = 0, .excluded_flags = 0, .exclude_entity = COORD_NONE};
    n = coord_query_box(s, 0.0f, -1.0f, -1.0f, 200.0f, 1.0f, 1.0f, &f, out, 16);
    assert_int_equal(n, 2); /* i = 2, 7 */
    assert_true(id_listed(out, 2, ids[2]) && id_listed(out, 2, ids[7]));
    f = (coord_query_filter){.type_mask = 0, .required_flags = 2u, .excluded_flags = 0, .exclude_entity = ids[1]};
    n = coord_query_sphere(s, 50.0f, 0.0f, 0.0f, 1000.0f, &f, out, 16);
    assert_int_equal(n, 4); /* odd i but 1 */
    assert_false(id_listed(out, n, ids[1]));
    f = (coord_query_filter){.type_mask = 0, .required_flags = 0, .excluded_flags = 1u, .exclude_entity = COORD_NONE};
    n = coord_query_sphere(s, 50.0f, 0.0f, 0.0f, 1000.0f, &f, out, 16);
    assert_int_equal(n, 5); /* odd i */
    /* Cap 0 writes nothing but counts. */
    out[0] = 0xDEADBEEFu;
    n = coord_query_sphere(s, 50.0f, 0.0f, 0.0f, 1000.0f, NULL, out, 0);
    assert_int_equal(n, 10);
    assert_int_equal(out[0], 0xDEADBEEFu);
    /* Filters changed at run time. */
    coord_set_entity_filter(s, ids[0], 3, 0);
    f = (coord_query_filter){
        .type_mask = 1u << 3, .required_flags = 0, .excluded_flags = 0, .exclude_entity = COORD_NONE};
    n = coord_query_sphere(s, 50.0f, 0.0f, 0.0f, 1000.0f, &f, out, 16);
    assert_int_equal(n, 3); /* i = 0, 3, 8 */
    assert_true(id_listed(out, 3, ids[0]));
}

/* ======================================================================== */
/* 4. Input validation                                                      */
/* ======================================================================== */

static void test_input_validation(void **state) {
    coord_system *s = *state;
    /* Non-finite coordinates are refused. */
    assert_int_equal(coord_add_entity(s, NAN, 0.0f, 0.0f, 0, 0, NULL), COORD_NONE);
    assert_int_equal(coord_add_entity(s, 0.0f, INFINITY, 0.0f, 0, 0, NULL), COORD_NONE);
    assert_int_equal(coord_add_entity(s, 0.0f, 0.0f, -INFINITY, 0, 0, NULL), COORD_NONE);
    assert_int_equal(coord_entity_count(s), 0);
    int marker;
    uint32_t e = coord_add_entity(s, 1.0f, 2.0f, 3.0f, 0, 0, &marker);
    assert_int_not_equal(e, COORD_NONE);
    assert_ptr_equal(coord_entity_user_data(s, e), &marker);
    assert_int_equal(coord_move_entity(s, e, NAN, 0.0f, 0.0f), -1);
    assert_int_equal(coord_move_entity(s, e, 0.0f, 0.0f, INFINITY), -1);
    float x, y, z;
    assert_int_equal(coord_entity_position(s, e, &x, &y, &z), 0);
    assert_true(x == 1.0f && z == 3.0f); /* unchanged */

    /* Unknown ids. */
    uint32_t unknown = e + 1000;
    assert_int_equal(coord_move_entity(s, unknown, 0.0f, 0.0f, 0.0f), -1);
    assert_int_equal(coord_remove_entity(s, unknown), -1);
    assert_int_equal(coord_entity_position(s, unknown, &x, &y, &z), -1);
    assert_null(coord_entity_user_data(s, unknown));
    assert_int_equal(coord_move_entity(s, COORD_NONE, 0.0f, 0.0f, 0.0f), -1);
    assert_int_equal(coord_add_watcher(s, unknown, 1.0f, 0.0f, &rec_callbacks, NULL), COORD_NONE);
    assert_int_equal(coord_remove_watcher(s, unknown), -1);
    assert_int_equal(coord_set_watcher_range(s, unknown, 1.0f, 0.0f), -1);
    assert_int_equal(coord_set_watcher_shape(s, unknown, COORD_SHAPE_CIRCLE), -1);
    assert_false(coord_watcher_sees(s, unknown, e));
    assert_int_equal(coord_watcher_view_size(s, unknown), 0);
    size_t cursor = 0;
    assert_int_equal(coord_watcher_next(s, unknown, &cursor), COORD_NONE);

    /* Bad ranges. */
    recorder r;
    rec_init(&r);
    assert_int_equal(coord_add_watcher(s, e, -1.0f, 0.0f, &rec_callbacks, &r), COORD_NONE);
    assert_int_equal(coord_add_watcher(s, e, 1.0f, -1.0f, &rec_callbacks, &r), COORD_NONE);
    assert_int_equal(coord_add_watcher(s, e, NAN, 0.0f, &rec_callbacks, &r), COORD_NONE);
    assert_int_equal(coord_add_watcher(s, e, INFINITY, 0.0f, &rec_callbacks, &r), COORD_NONE);
    assert_int_equal(coord_add_watcher(s, e, 1.0f, NAN, &rec_callbacks, &r), COORD_NONE);
    assert_int_equal(coord_watcher_count(s), 0);
    uint32_t near = put(s, 5.0f, 3.0f);
    uint32_t w = watch(s, e, 10.0f, 0.0f, &r);
    assert_int_equal(coord_set_watcher_range(s, w, -1.0f, 0.0f), -1);
    assert_int_equal(coord_set_watcher_range(s, w, 1.0f, -0.5f), -1);
    assert_int_equal(coord_set_watcher_range(s, w, NAN, 0.0f), -1);
    /* Bad shapes: unknown, or round with hysteresis (either way round). */
    assert_int_equal(coord_set_watcher_shape(s, w, (coord_shape)3), -1);
    assert_int_equal(coord_set_watcher_shape(s, w, COORD_SHAPE_SPHERE), 0);
    assert_int_equal(coord_set_watcher_range(s, w, 10.0f, 1.0f), -1);
    assert_int_equal(coord_set_watcher_shape(s, w, COORD_SHAPE_BOX), 0);
    assert_int_equal(coord_set_watcher_range(s, w, 10.0f, 1.0f), 0);
    assert_int_equal(coord_set_watcher_shape(s, w, COORD_SHAPE_CIRCLE), -1);
    assert_int_equal(coord_set_watcher_range(s, w, 10.0f, 0.0f), 0);
    /* Shape queries: a bad radius or shape finds nothing. */
    uint32_t found[4];
    assert_int_equal(coord_query_shape(s, COORD_SHAPE_CIRCLE, 1.0f, 2.0f, 3.0f, 100.0f, NULL, found, 4), 2);
    assert_int_equal(coord_query_shape(s, COORD_SHAPE_CIRCLE, 1.0f, 2.0f, 3.0f, -1.0f, NULL, found, 4), 0);
    assert_int_equal(coord_query_shape(s, COORD_SHAPE_SPHERE, 1.0f, 2.0f, 3.0f, NAN, NULL, found, 4), 0);
    assert_int_equal(coord_query_shape(s, (coord_shape)7, 1.0f, 2.0f, 3.0f, 100.0f, NULL, found, 4), 0);
    FLUSH(s); /* the range is still 10 */
    EXPECT_EVENTS(&r, ENTERS(near), NONE);

    /* Stale ids, after removal and after the next flush. */
    assert_int_equal(coord_remove_entity(s, near), 0);
    assert_int_equal(coord_remove_entity(s, near), -1);
    assert_int_equal(coord_move_entity(s, near, 0.0f, 0.0f, 0.0f), -1);
    FLUSH(s);
    EXPECT_EVENTS(&r, NONE, LEAVES(near));
    assert_int_equal(coord_remove_watcher(s, w), 0);
    assert_int_equal(coord_remove_watcher(s, w), -1);
    assert_int_equal(coord_set_watcher_range(s, w, 1.0f, 0.0f), -1);
    // cppcheck-suppress unreadVariable ; the recorder's callbacks read it during FLUSH
    r.removed = true;
    assert_int_equal(FLUSH(s), 0);
    assert_int_equal(coord_entity_count(s), 1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_random_2d_seed1, teardown_world),
        cmocka_unit_test_teardown(test_random_2d_seed2, teardown_world),
        cmocka_unit_test_teardown(test_random_2d_seed3, teardown_world),
        cmocka_unit_test_teardown(test_random_3d, teardown_world),
        cmocka_unit_test_teardown(test_random_2d_crowd, teardown_world),
        cmocka_unit_test_teardown(test_random_2d_scan, teardown_world),
        cmocka_unit_test_teardown(test_random_3d_scan, teardown_world),
        cmocka_unit_test_teardown(test_random_2d_modes_in_turn, teardown_world),
        cmocka_unit_test_teardown(test_random_2d_crowd_modes_in_turn, teardown_world),
        cmocka_unit_test_setup_teardown(test_stacked_entities, setup_2d, teardown_system),
        cmocka_unit_test_setup_teardown(test_boundary_is_inside, setup_2d, teardown_system),
        cmocka_unit_test_setup_teardown(test_moving_onto_boundary, setup_2d, teardown_system),
        cmocka_unit_test_setup_teardown(test_owner_never_sees_itself, setup_2d, teardown_system),
        cmocka_unit_test_setup_teardown(test_range_changes_and_hysteresis, setup_2d, teardown_system),
        cmocka_unit_test_setup_teardown(test_enter_leave_cancel, setup_2d, teardown_system),
        cmocka_unit_test_setup_teardown(test_intermediate_states_do_not_leak, setup_2d, teardown_system),
        cmocka_unit_test_setup_teardown(test_teleport_and_back, setup_2d, teardown_system),
        cmocka_unit_test_setup_teardown(test_extent_zero, setup_2d, teardown_system),
        cmocka_unit_test_setup_teardown(test_lifecycle, setup_2d, teardown_system),
        cmocka_unit_test_setup_teardown(test_callback_removes_entered, setup_2d, teardown_system),
        cmocka_unit_test_setup_teardown(test_callback_removes_own_owner, setup_2d, teardown_system),
        cmocka_unit_test_setup_teardown(test_callback_moves_entities, setup_2d, teardown_system),
        cmocka_unit_test_setup_teardown(test_callback_adds_entity_and_watcher, setup_2d, teardown_system),
        cmocka_unit_test_setup_teardown(test_stacked_entities, setup_2d_scan, teardown_system),
        cmocka_unit_test_setup_teardown(test_boundary_is_inside, setup_2d_scan, teardown_system),
        cmocka_unit_test_setup_teardown(test_moving_onto_boundary, setup_2d_scan, teardown_system),
        cmocka_unit_test_setup_teardown(test_owner_never_sees_itself, setup_2d_scan, teardown_system),
        cmocka_unit_test_setup_teardown(test_range_changes_and_hysteresis, setup_2d_scan, teardown_system),
        cmocka_unit_test_setup_teardown(test_enter_leave_cancel, setup_2d_scan, teardown_system),
        cmocka_unit_test_setup_teardown(test_intermediate_states_do_not_leak, setup_2d_scan, teardown_system),
        cmocka_unit_test_setup_teardown(test_teleport_and_back, setup_2d_scan, teardown_system),
        cmocka_unit_test_setup_teardown(test_extent_zero, setup_2d_scan, teardown_system),
        cmocka_unit_test_setup_teardown(test_lifecycle, setup_2d_scan, teardown_system),
        cmocka_unit_test_setup_teardown(test_callback_removes_entered, setup_2d_scan, teardown_system),
        cmocka_unit_test_setup_teardown(test_callback_removes_own_owner, setup_2d_scan, teardown_system),
        cmocka_unit_test_setup_teardown(test_callback_moves_entities, setup_2d_scan, teardown_system),
        cmocka_unit_test_setup_teardown(test_callback_adds_entity_and_watcher, setup_2d_scan, teardown_system),
        cmocka_unit_test(test_queries_2d),
        cmocka_unit_test(test_queries_3d),
        cmocka_unit_test_setup_teardown(test_query_filters_and_order, setup_2d, teardown_system),
        cmocka_unit_test_setup_teardown(test_input_validation, setup_2d, teardown_system),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
