/* test_game_event.c -- what both game hosts share about game events
 * (common/game_event.h): finding a declared event, the fields a firing
 * carries (its own, defaults, or a refusal of fields made for something
 * else), the coding of a firing and the check of one that arrives (an
 * unknown id, fields that are not the declared types, trailing bytes), and
 * the listener table's limit. */
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
#include "game_event.h"
#include "method_call.h"

static const char *defs = "{\"format\":1,"
                          " \"entities\":[{\"name\":\"Hero\",\"client_methods\":[{\"name\":\"onHit\",\"args\":[{"
                          "\"name\":\"n\",\"type\":\"uint8\"}]}]}],"
                          " \"events\":["
                          "  {\"name\":\"joined\",\"args\":[{\"name\":\"who\",\"type\":\"entity\"},"
                          "                               {\"name\":\"name\",\"type\":\"string\",\"max_length\":8}]},"
                          "  {\"name\":\"tick\"}]}";

static entity_def_registry *load(void) {
    entity_def_registry *reg = NULL;
    char err[256];
    assert_int_equal(entity_def_load_string(defs, "test", &reg, err, sizeof err), 0);
    return reg;
}

static void test_find_and_fields(void **state) {
    (void)state;
    entity_def_registry *reg = load();
    const entity_def_method *joined = game_event_find(reg, "joined", "test");
    const entity_def_method *tick = game_event_find(reg, "tick", "test");
    assert_non_null(joined);
    assert_non_null(tick);
    assert_null(game_event_find(reg, "left", "test"));
    assert_null(game_event_find(reg, NULL, "test"));
    /* Defaults when none are given; the game's own when made for it. */
    entity_state *owned = NULL;
    entity_state *fields = game_event_fields(joined, NULL, &owned);
    assert_non_null(fields);
    assert_ptr_equal(fields, owned);
    entity_state_free(owned);
    entity_state *mine = method_call_args_create(joined);
    assert_ptr_equal(game_event_fields(joined, game_args_of(mine), &owned), mine);
    assert_null(owned);
    /* Made for another event, or for a client method: refused. */
    assert_null(game_event_fields(tick, game_args_of(mine), &owned));
    assert_null(owned);
    const entity_def_method *on_hit =
        entity_def_class_find_method(entity_def_registry_find_class(reg, "Hero"), ENTITY_DEF_PART_CLIENT, "onHit");
    entity_state *hit = method_call_args_create(on_hit);
    assert_null(game_event_fields(joined, game_args_of(hit), &owned));
    entity_state_free(hit);
    entity_state_free(mine);
    entity_def_registry_free(reg);
}

static void test_code_and_check(void **state) {
    (void)state;
    entity_def_registry *reg = load();
    const entity_def_method *joined = entity_def_registry_find_event(reg, "joined");
    entity_state *fields = method_call_args_create(joined);
    assert_int_equal(entity_state_set_entity(fields, 0, 0, 42), 0);
    assert_int_equal(entity_state_set_string(fields, 1, 0, "ann", 3), 0);
    assert_int_not_equal(entity_state_set_string(fields, 1, 0, "far too long", 12), 0); /* max_length 8 */
    Tessera__Client__GameEvent coded;
    game_event_encode(joined, 7, fields, &coded);
    assert_int_equal(coded.event_id, joined->id);
    assert_int_equal(coded.source_id, 7);

    const entity_def_method *event = NULL;
    char why[160];
    entity_state *back = game_event_decode(reg, &coded, &event, why, sizeof why);
    assert_non_null(back);
    assert_ptr_equal(event, joined);
    uint64_t who = 0;
    const char *name = NULL;
    size_t length = 0;
    assert_int_equal(entity_state_get_entity(back, 0, 0, &who), 0);
    assert_int_equal(entity_state_get_string(back, 1, 0, &name, &length), 0);
    assert_int_equal(who, 42);
    assert_int_equal(length, 3);
    assert_memory_equal(name, "ann", 3);
    entity_state_free(back);

    /* An unknown id. */
    Tessera__Client__GameEvent bad = coded;
    bad.event_id = 2;
    assert_null(game_event_decode(reg, &bad, &event, why, sizeof why));
    assert_non_null(strstr(why, "event id 2 is not declared"));
    /* Cut short, one byte too many, another event's fields. */
    bad = coded;
    bad.args.len = coded.args.len - 1;
    assert_null(game_event_decode(reg, &bad, &event, why, sizeof why));
    assert_non_null(strstr(why, "'joined'"));
    uint8_t longer[64];
    memcpy(longer, coded.args.data, coded.args.len);
    longer[coded.args.len] = 0xff;
    bad.args.data = longer;
    bad.args.len = coded.args.len + 1;
    assert_null(game_event_decode(reg, &bad, &event, why, sizeof why));
    bad = coded;
    bad.event_id = entity_def_registry_find_event(reg, "tick")->id; /* takes no fields */
    assert_null(game_event_decode(reg, &bad, &event, why, sizeof why));
    free(coded.args.data);
    entity_state_free(fields);
    entity_def_registry_free(reg);
}

static void some_listener(void) {}

static void test_listener_limit(void **state) {
    (void)state;
    entity_def_registry *reg = load();
    const entity_def_method *tick = entity_def_registry_find_event(reg, "tick");
    game_event_listeners *listeners = calloc(1, sizeof *listeners);
    for (int i = 0; i < GAME_EVENT_MAX_LISTENERS; i++)
        assert_int_equal(game_event_listen(listeners, tick, some_listener, NULL), 0);
    assert_int_equal(game_event_listen(listeners, tick, some_listener, NULL), -1);
    assert_int_equal(listeners->count, GAME_EVENT_MAX_LISTENERS);
    assert_int_equal(listeners->entries[0].event_id, tick->id);
    assert_int_equal(game_event_listen(listeners, NULL, some_listener, NULL), -1);
    free(listeners);
    entity_def_registry_free(reg);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_find_and_fields),
        cmocka_unit_test(test_code_and_check),
        cmocka_unit_test(test_listener_limit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
