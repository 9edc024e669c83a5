/* test_entity_io.c -- the entity I/O queue and connections
 * (cellapp/entity_io.h): fire counts (a limited connection is spent and
 * removed, -1 never is), delays (an event runs at its due time, not
 * before; events due together run in firing order), the one delay rule (an
 * event fired while the queue is serviced waits for the next service, with
 * no delay inherited from what fired it), a parameter override against the
 * firing's own, the activator and caller handed through for !activator and
 * !caller, refusals of bad connections, a save/restore round trip, and
 * the queue's reach (delays past its wheel, long idle spells and pauses,
 * a thousand random firings in order while the tick services them). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "entity_io.h"

typedef struct delivered {
    char target[64], input[64], parameter[64];
    uint64_t self, activator, caller;
} delivered;

typedef struct recorder {
    delivered events[64];
    int count;
    /* When set: each delivery fires this output again (a loop). */
    entity_io *io;
    entity_io_outputs *refire;
    uint64_t now_ms;
} recorder;

static void record(const char *target, uint64_t self_id, uint64_t activator_id, uint64_t caller_id, const char *input,
                   const char *parameter, void *context) {
    recorder *r = context;
    assert_true(r->count < 64);
    delivered *d = &r->events[r->count++];
    snprintf(d->target, sizeof d->target, "%s", target);
    snprintf(d->input, sizeof d->input, "%s", input);
    snprintf(d->parameter, sizeof d->parameter, "%s", parameter);
    d->self = self_id, d->activator = activator_id, d->caller = caller_id;
    if (r->refire) entity_io_fire(r->io, r->refire, self_id, "OnLoop", activator_id, self_id, NULL, r->now_ms);
}

static void test_fire_counts(void **state) {
    (void)state;
    entity_io *io = entity_io_create();
    entity_io_outputs outputs = {0};
    assert_int_equal(entity_io_connect(&outputs, "OnUse", "door", "Open", NULL, 0, 2), 0);
    assert_int_equal(entity_io_connect(&outputs, "OnUse", "lamp", "Toggle", NULL, 0, -1), 0);
    assert_int_equal(entity_io_connect(&outputs, "OnOther", "lamp", "Toggle", NULL, 0, 1), 0);
    assert_int_equal(entity_io_fire(io, &outputs, 1, "OnUse", 9, 0, NULL, 0), 2);
    assert_int_equal(entity_io_fire(io, &outputs, 1, "OnUse", 9, 0, NULL, 0), 2);
    assert_int_equal(outputs.count, 2); /* the door's is spent */
    assert_int_equal(entity_io_fire(io, &outputs, 1, "OnUse", 9, 0, NULL, 0), 1);
    assert_int_equal(entity_io_fire(io, &outputs, 1, "Nothing", 9, 0, NULL, 0), 0);
    recorder r = {0};
    assert_int_equal(entity_io_service(io, 0, record, &r), 5);
    int doors = 0, lamps = 0;
    for (int i = 0; i < r.count; i++) {
        doors += strcmp(r.events[i].target, "door") == 0;
        lamps += strcmp(r.events[i].target, "lamp") == 0;
    }
    assert_int_equal(doors, 2);
    assert_int_equal(lamps, 3);
    entity_io_outputs_free(&outputs);
    entity_io_free(io);
}

static void test_delays_and_order(void **state) {
    (void)state;
    entity_io *io = entity_io_create();
    entity_io_outputs outputs = {0};
    entity_io_connect(&outputs, "Go", "late", "In", NULL, 1500, -1);
    entity_io_connect(&outputs, "Go", "first", "In", NULL, 500, -1);
    entity_io_connect(&outputs, "Go", "second", "In", NULL, 500, -1);
    entity_io_fire(io, &outputs, 1, "Go", 0, 0, NULL, 1000); /* fired at t = 1 s */
    recorder r = {0};
    assert_int_equal(entity_io_service(io, 1499, record, &r), 0); /* nothing early */
    assert_int_equal(entity_io_service(io, 1500, record, &r), 2);
    assert_string_equal(r.events[0].target, "first"); /* same due: firing order */
    assert_string_equal(r.events[1].target, "second");
    assert_int_equal(entity_io_service(io, 2499, record, &r), 0);
    assert_int_equal(entity_io_service(io, 2500, record, &r), 1);
    assert_string_equal(r.events[2].target, "late");
    assert_int_equal(entity_io_pending(io), 0);
    entity_io_outputs_free(&outputs);
    entity_io_free(io);
}

static void test_an_event_fired_while_serviced_waits(void **state) {
    (void)state;
    entity_io *io = entity_io_create();
    entity_io_outputs loop = {0};
    /* An output connected to an input that fires it again, with no delay. */
    entity_io_connect(&loop, "OnLoop", "!self", "Again", NULL, 0, -1);
    entity_io_fire(io, &loop, 5, "OnLoop", 0, 0, NULL, 100);
    recorder r = {.io = io, .refire = &loop, .now_ms = 100};
    assert_int_equal(entity_io_service(io, 100, record, &r), 1); /* not a spin */
    assert_int_equal(entity_io_pending(io), 1);
    r.now_ms = 200;
    assert_int_equal(entity_io_service(io, 200, record, &r), 1); /* the next tick */
    assert_int_equal(entity_io_pending(io), 1);
    /* A delayed connection in a chain counts from when it fires, not from
     * the event that fired it. */
    entity_io_outputs chained = {0};
    entity_io_connect(&chained, "OnLoop", "next", "In", NULL, 300, -1);
    recorder c = {.io = io, .refire = &chained, .now_ms = 1000};
    entity_io_service(io, 1000, record, &c); /* the pending loop event fires the chained one at 1000 */
    recorder d = {0};
    assert_int_equal(entity_io_service(io, 1299, record, &d), 0);
    assert_int_equal(entity_io_service(io, 1300, record, &d), 1);
    assert_string_equal(d.events[0].target, "next");
    entity_io_outputs_free(&loop);
    entity_io_outputs_free(&chained);
    entity_io_free(io);
}

static void test_parameters_activator_and_caller(void **state) {
    (void)state;
    entity_io *io = entity_io_create();
    entity_io_outputs outputs = {0};
    entity_io_connect(&outputs, "OnHit", "!activator", "Hurt", "25", 0, -1);
    entity_io_connect(&outputs, "OnHit", "!caller", "Echo", "", 0, -1);
    entity_io_fire(io, &outputs, 7, "OnHit", 42, 13, "10", 0);
    recorder r = {0};
    entity_io_service(io, 0, record, &r);
    assert_int_equal(r.count, 2);
    assert_string_equal(r.events[0].target, "!activator");
    assert_string_equal(r.events[0].parameter, "25"); /* the connection's */
    assert_string_equal(r.events[1].parameter, "10"); /* the firing's */
    for (int i = 0; i < 2; i++) {
        assert_int_equal(r.events[i].self, 7);
        assert_int_equal(r.events[i].activator, 42);
        assert_int_equal(r.events[i].caller, 13);
    }
    entity_io_outputs_free(&outputs);
    entity_io_free(io);
}

static void test_bad_connections_and_a_round_trip(void **state) {
    (void)state;
    entity_io_outputs outputs = {0};
    char long_name[100];
    memset(long_name, 'x', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    assert_int_equal(entity_io_connect(&outputs, "", "t", "i", NULL, 0, -1), -1);
    assert_int_equal(entity_io_connect(&outputs, "o", NULL, "i", NULL, 0, -1), -1);
    assert_int_equal(entity_io_connect(&outputs, "o", "t", long_name, NULL, 0, -1), -1);
    assert_int_equal(entity_io_connect(&outputs, "o", "t", "i", NULL, 0, 0), -1);
    assert_int_equal(entity_io_connect(&outputs, "o", "t", "i", NULL, 0, -2), -1);
    assert_int_equal(outputs.count, 0);
    entity_io_connect(&outputs, "OnOpen", "lamp", "On", "bright", 250, 3);
    Tessera__Cluster__IoConnection **saved;
    size_t count;
    entity_io_save(&outputs, &saved, &count);
    assert_int_equal(count, 1);
    entity_io_outputs copy = {0};
    entity_io_restore(&copy, saved, count);
    entity_io_saved_free(saved, count);
    assert_int_equal(copy.count, 1);
    assert_memory_equal(&copy.connections[0], &outputs.connections[0], sizeof outputs.connections[0]);
    entity_io_outputs_free(&outputs);
    entity_io_outputs_free(&copy);
}

/* Who ran, in order, and whether any ran before it was due. */
typedef struct ran_list {
    uint64_t selves[1000];
    uint64_t due[1000 + 100]; /* by self id: set by the test */
    int count, early;
    uint64_t now;
} ran_list;

static void record_self(const char *target, uint64_t self_id, uint64_t activator_id, uint64_t caller_id,
                        const char *input, const char *parameter, void *context) {
    (void)target, (void)activator_id, (void)caller_id, (void)input, (void)parameter;
    ran_list *ran = context;
    assert_true(ran->count < 1000);
    if (self_id < 1100 && ran->due[self_id] > ran->now) ran->early++;
    ran->selves[ran->count++] = self_id;
}

/* The queue's reach: delays beyond the wheel (8.2 s) wait apart and come
 * back in order beside short ones due at the same time; a queue idle for
 * hours, or serviced after a long pause, neither loses nor reorders
 * anything; a thousand events due at random times run in (due, firing)
 * order, against a sort of the same firings. */
static void test_long_delays_and_long_pauses(void **state) {
    (void)state;
    entity_io *io = entity_io_create();
    entity_io_outputs longer = {0}, shorter = {0};
    assert_int_equal(entity_io_connect(&longer, "OnGo", "far", "In", NULL, 20000, -1), 0);
    assert_int_equal(entity_io_connect(&shorter, "OnGo", "near", "In", NULL, 1000, -1), 0);
    const uint64_t idle = 3600ull * 1000 * 5;                                               /* five hours in */
    assert_int_equal(entity_io_fire(io, &longer, 1, "OnGo", 0, 0, NULL, idle), 1);          /* due idle + 20000 */
    assert_int_equal(entity_io_fire(io, &shorter, 2, "OnGo", 0, 0, NULL, idle + 19000), 1); /* due idle + 20000 too */
    assert_int_equal(entity_io_fire(io, &longer, 3, "OnGo", 0, 0, NULL, idle + 100), 1);    /* idle + 20100 */
    recorder r = {0};
    assert_int_equal(entity_io_service(io, idle + 19999, record, &r), 0);
    assert_int_equal(entity_io_service(io, idle + 20000, record, &r), 2);
    assert_int_equal(r.events[0].self, 1); /* fired first, though from farther away */
    assert_int_equal(r.events[1].self, 2);
    /* A pause of a minute: the last one runs at once, once. */
    assert_int_equal(entity_io_service(io, idle + 80000, record, &r), 1);
    assert_int_equal(r.events[2].self, 3);
    assert_int_equal(entity_io_pending(io), 0);

    /* Many at random times, some beyond the wheel: (due, firing) order. */
    entity_io_outputs spread[16];
    memset(spread, 0, sizeof spread);
    for (int k = 0; k < 16; k++)
        assert_int_equal(entity_io_connect(&spread[k], "OnGo", "t", "In", NULL, (uint32_t)(k * 1297 % 20000), -1), 0);
    uint64_t due[1000], order[1000];
    static ran_list ran; /* 17 KB: off the stack */
    memset(&ran, 0, sizeof ran);
    uint64_t seed = 12345, now = idle + 100000, serviced = now;
    for (int i = 0; i < 1000; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        int k = (int)((seed >> 33) % 16);
        now += (seed >> 20) % 21; /* time goes on by 0..20 ms between firings: 10 s of them */
        /* The tick services every 100 ms while the firings go on. */
        while (serviced + 100 <= now) {
            serviced += 100;
            ran.now = serviced;
            entity_io_service(io, serviced, record_self, &ran);
        }
        due[i] = now + (uint64_t)(k * 1297 % 20000);
        ran.due[i + 100] = due[i];
        entity_io_fire(io, &spread[k], (uint64_t)i + 100, "OnGo", 0, 0, NULL, now);
        order[i] = (uint64_t)i;
    }
    /* The expected order: by due time, then firing (a stable insertion sort). */
    for (int i = 1; i < 1000; i++)
        for (int j = i; j > 0 && due[order[j]] < due[order[j - 1]]; j--) {
            uint64_t t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    for (uint64_t t = serviced + 100; t < now + 21000; t += 100) {
        ran.now = t;
        entity_io_service(io, t, record_self, &ran);
    }
    assert_int_equal(ran.count, 1000);
    for (int i = 0; i < 1000; i++) assert_int_equal(ran.selves[i], order[i] + 100);
    assert_int_equal(ran.early, 0);
    assert_int_equal(entity_io_pending(io), 0);
    for (int k = 0; k < 16; k++) entity_io_outputs_free(&spread[k]);
    entity_io_outputs_free(&longer);
    entity_io_outputs_free(&shorter);
    entity_io_free(io);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fire_counts),
        cmocka_unit_test(test_delays_and_order),
        cmocka_unit_test(test_an_event_fired_while_serviced_waits),
        cmocka_unit_test(test_parameters_activator_and_caller),
        cmocka_unit_test(test_bad_connections_and_a_round_trip),
        cmocka_unit_test(test_long_delays_and_long_pauses),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
