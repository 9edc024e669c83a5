/* test_base_entity.c -- unit tests for the bases of a baseapp
 * (baseapp/base_entity.h) and the account name rule (baseapp/account_name.h).
 *
 * Covered: a base added is found by id and by handle, starts CREATING_CELL
 * when its class has a cell part and LIVE when it has none, keeps the name
 * it is stored under (an account) out of its properties: its "name"
 * property stays empty and unchanged; a removed base's handle and id resolve to nothing, and a slot
 * reused by a new base does not answer to the old handle; a full set
 * refuses; iteration visits every base once; the cell properties a base
 * starts its cell part with are the cell properties it set, and only
 * those; the client properties are the BASE_AND_CLIENT ones (all, or the
 * changed ones) and clear the dirty set; the host pointer round-trips;
 * the index by class lists a class's live bases only (not those being
 * destroyed, not those removed), counting past `max`;
 * account names: lengths 1 to 64 and the characters allowed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "account_name.h"
#include "base_entity.h"
#include "property_codec.h"
#include "text_key.h"

static const char *defs = "{\"format\":1,\"entities\":["
                          " {\"name\":\"Avatar\",\"properties\":["
                          "  {\"name\":\"name\",\"type\":\"string\",\"max_length\":8,\"flags\":\"ALL_CLIENTS\"},"
                          "  {\"name\":\"gold\",\"type\":\"uint32\",\"flags\":\"BASE_AND_CLIENT\"},"
                          "  {\"name\":\"notes\",\"type\":\"uint32\",\"flags\":\"BASE\"},"
                          "  {\"name\":\"hp\",\"type\":\"int32\",\"flags\":\"ALL_CLIENTS\",\"default\":100}]},"
                          " {\"name\":\"Census\",\"properties\":["
                          "  {\"name\":\"players\",\"type\":\"uint32\",\"flags\":\"BASE\"}]}]}";

typedef struct fixture {
    entity_def_registry *definitions;
    const entity_def_class *avatar, *census;
    base_entities *set;
} fixture;

static int setup(void **state) {
    fixture *fx = calloc(1, sizeof *fx);
    char err[512];
    if (entity_def_load_string(defs, "test", &fx->definitions, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    fx->avatar = entity_def_registry_find_class(fx->definitions, "Avatar");
    fx->census = entity_def_registry_find_class(fx->definitions, "Census");
    fx->set = base_entities_create(4);
    *state = fx;
    return 0;
}

static int teardown(void **state) {
    fixture *fx = *state;
    uint32_t cursor = 0;
    base_entity *base;
    while ((base = base_entities_next(fx->set, &cursor)) != NULL) base_entities_remove(fx->set, base);
    base_entities_free(fx->set);
    entity_def_registry_free(fx->definitions);
    free(fx);
    return 0;
}

static uint16_t property(const entity_def_class *cls, const char *name) {
    const entity_def_property *p = entity_def_class_find_property(cls, name);
    assert_non_null(p);
    return p->id;
}

static void test_add_find_remove(void **state) {
    fixture *fx = *state;
    base_entity *avatar = base_entities_add(fx->set, 100, fx->avatar, "alice");
    base_entity *census = base_entities_add(fx->set, 101, fx->census, "census");
    assert_non_null(avatar);
    assert_non_null(census);
    assert_int_equal(base_entities_count(fx->set), 2);
    assert_ptr_equal(base_entities_find(fx->set, 100), avatar);
    assert_ptr_equal(base_entities_get(fx->set, census->handle), census);
    assert_ptr_equal(avatar->set, fx->set);
    assert_null(avatar->proxy);
    /* Avatar has cell properties (hp): its cell part is to be made. Census
     * has none: it is whole at once. */
    assert_int_equal(avatar->state, BASE_ENTITY_CREATING_CELL);
    assert_int_equal(census->state, BASE_ENTITY_LIVE);
    assert_true(base_entity_is_live(avatar));
    const char *name;
    size_t length;
    /* The account name stays the storage key: no property holds it. */
    assert_int_equal(entity_state_get_string(avatar->properties, property(fx->avatar, "name"), 0, &name, &length), 0);
    assert_int_equal(length, 0);
    assert_string_equal(avatar->name, "alice");
    entity_handle old = avatar->handle;
    base_entities_remove(fx->set, avatar);
    assert_null(base_entities_find(fx->set, 100));
    assert_null(base_entities_get(fx->set, old));
    /* The slot is reused; the old handle still names nothing. */
    base_entity *again = base_entities_add(fx->set, 102, fx->avatar, "bob");
    assert_non_null(again);
    assert_null(base_entities_get(fx->set, old));
    assert_ptr_equal(base_entities_get(fx->set, again->handle), again);
    assert_int_equal(base_entities_count(fx->set), 2);
}

static bool holds(const uint64_t *ids, size_t count, uint64_t id) {
    for (size_t i = 0; i < count; i++)
        if (ids[i] == id) return true;
    return false;
}

static void test_of_class(void **state) {
    fixture *fx = *state;
    uint64_t ids[4];
    assert_int_equal(base_entities_of_class(fx->set, fx->avatar, ids, 4), 0);
    base_entity *a = base_entities_add(fx->set, 100, fx->avatar, "alice");
    base_entities_add(fx->set, 101, fx->census, "census");
    base_entity *b = base_entities_add(fx->set, 102, fx->avatar, "bob");
    assert_int_equal(base_entities_of_class(fx->set, fx->avatar, ids, 4), 2);
    assert_true(holds(ids, 2, 100) && holds(ids, 2, 102));
    assert_int_equal(base_entities_of_class(fx->set, fx->census, ids, 4), 1);
    assert_int_equal(ids[0], 101);
    /* Counted past `max`; NULL `out` only counts. */
    assert_int_equal(base_entities_of_class(fx->set, fx->avatar, ids, 1), 2);
    assert_int_equal(base_entities_of_class(fx->set, fx->avatar, NULL, 0), 2);
    /* One being destroyed is not listed; one removed is gone. */
    b->state = BASE_ENTITY_DESTROYING;
    assert_int_equal(base_entities_of_class(fx->set, fx->avatar, ids, 4), 1);
    assert_int_equal(ids[0], 100);
    base_entities_remove(fx->set, a);
    assert_int_equal(base_entities_of_class(fx->set, fx->avatar, ids, 4), 0);
    assert_int_equal(base_entities_of_class(fx->set, NULL, ids, 4), 0);
}

static void test_account_name_is_no_property(void **state) {
    fixture *fx = *state;
    base_entity *base = base_entities_add(fx->set, 7, fx->avatar, "a-very-long-account");
    assert_string_equal(base->name, "a-very-long-account");
    const char *name;
    size_t length;
    assert_int_equal(entity_state_get_string(base->properties, property(fx->avatar, "name"), 0, &name, &length), 0);
    assert_int_equal(length, 0);
    assert_false(entity_state_is_dirty(base->properties, (uint16_t)property(fx->avatar, "name")));
}

static void test_full_set_refuses(void **state) {
    fixture *fx = *state;
    for (uint64_t id = 1; id <= 4; id++) assert_non_null(base_entities_add(fx->set, id, fx->census, "c"));
    assert_null(base_entities_add(fx->set, 5, fx->census, "c"));
    assert_int_equal(base_entities_count(fx->set), 4);
    uint32_t cursor = 0, seen = 0;
    uint64_t ids = 0;
    base_entity *base;
    while ((base = base_entities_next(fx->set, &cursor)) != NULL) {
        seen++;
        ids += base->entity_id;
    }
    assert_int_equal(seen, 4);
    assert_int_equal(ids, 1 + 2 + 3 + 4);
}

static void test_class_has_cell(void **state) {
    fixture *fx = *state;
    assert_true(base_entity_class_has_cell(fx->avatar));
    assert_false(base_entity_class_has_cell(fx->census));
}

static void test_cell_properties_are_those_set(void **state) {
    fixture *fx = *state;
    base_entity *base = base_entities_add(fx->set, 9, fx->avatar, "carol");
    /* The game named it (a cell property too); hp keeps its default. */
    assert_int_equal(entity_state_set_string(base->properties, (uint16_t)property(fx->avatar, "name"), 0, "Wren", 4),
                     0);
    bit_writer w;
    bit_writer_init(&w);
    base_entity_cell_properties(base, &w);
    entity_state *cell = entity_state_create(fx->avatar);
    bit_reader r;
    bit_reader_init(&r, bit_writer_data(&w), bit_writer_bytes(&w));
    entity_state_mask on_cell = {{0}};
    for (size_t p = 0; p < fx->avatar->property_count; p++)
        if (fx->avatar->properties[p].audience.on_cell) entity_state_mask_add(&on_cell, (uint16_t)p);
    assert_int_equal(property_codec_decode_changes(&r, cell, &on_cell, NULL), 0);
    const char *name;
    size_t length;
    assert_int_equal(entity_state_get_string(cell, property(fx->avatar, "name"), 0, &name, &length), 0);
    assert_int_equal(length, 4);
    assert_memory_equal(name, "Wren", 4);
    int64_t hp;
    assert_int_equal(entity_state_get_int(cell, property(fx->avatar, "hp"), 0, &hp), 0);
    assert_int_equal(hp, 100);
    entity_state_free(cell);
    bit_writer_close(&w);
}

static void test_client_properties(void **state) {
    fixture *fx = *state;
    base_entity *base = base_entities_add(fx->set, 11, fx->avatar, "dave");
    bit_writer w;
    bit_writer_init(&w);
    /* Nothing BASE_AND_CLIENT changed: nothing to send (the dirty name is a
     * cell property, not the base's to send). */
    assert_false(base_entity_client_properties(base, false, &w));
    /* All of them: gold, at its default. */
    assert_true(base_entity_client_properties(base, true, &w));
    bit_writer_close(&w);
    bit_writer_init(&w);
    assert_int_equal(entity_state_set_uint(base->properties, property(fx->avatar, "gold"), 0, 42), 0);
    assert_int_equal(entity_state_set_uint(base->properties, property(fx->avatar, "notes"), 0, 7), 0);
    assert_true(base_entity_client_properties(base, false, &w));
    entity_state *client = entity_state_create(fx->avatar);
    bit_reader r;
    bit_reader_init(&r, bit_writer_data(&w), bit_writer_bytes(&w));
    assert_int_equal(property_codec_decode_changes(&r, client, NULL, NULL), 0);
    uint64_t gold, notes;
    assert_int_equal(entity_state_get_uint(client, property(fx->avatar, "gold"), 0, &gold), 0);
    assert_int_equal(entity_state_get_uint(client, property(fx->avatar, "notes"), 0, &notes), 0);
    assert_int_equal(gold, 42);
    assert_int_equal(notes, 0); /* BASE only: never sent */
    entity_state_free(client);
    bit_writer_close(&w);
    /* The dirty set was cleared. */
    bit_writer_init(&w);
    assert_false(base_entity_client_properties(base, false, &w));
    bit_writer_close(&w);
}

static void test_host_round_trips(void **state) {
    fixture *fx = *state;
    int host;
    assert_null(base_entities_host(fx->set));
    base_entities_set_host(fx->set, &host);
    assert_ptr_equal(base_entities_host(fx->set), &host);
}

static void test_account_names(void **state) {
    (void)state;
    assert_null(account_name_check("a"));
    assert_null(account_name_check("Bot_7-x.y"));
    char longest[ACCOUNT_NAME_MAX + 2];
    memset(longest, 'a', sizeof longest);
    longest[ACCOUNT_NAME_MAX] = '\0';
    assert_null(account_name_check(longest));
    longest[ACCOUNT_NAME_MAX] = 'a';
    longest[ACCOUNT_NAME_MAX + 1] = '\0';
    assert_non_null(account_name_check(longest));
    assert_non_null(account_name_check(""));
    assert_non_null(account_name_check(NULL));
    assert_non_null(account_name_check("bad name"));
    assert_non_null(account_name_check("semi;colon"));
    assert_non_null(account_name_check("new\nline"));
}

static void test_text_keys(void **state) {
    (void)state;
    assert_int_equal(text_key_string("alice"), text_key("alice:1", 5));
    assert_int_not_equal(text_key_string("alice"), text_key_string("alicf"));
    assert_int_not_equal(text_key("", 0), 0); /* never id_map's empty key */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_add_find_remove, setup, teardown),
        cmocka_unit_test_setup_teardown(test_of_class, setup, teardown),
        cmocka_unit_test_setup_teardown(test_account_name_is_no_property, setup, teardown),
        cmocka_unit_test_setup_teardown(test_full_set_refuses, setup, teardown),
        cmocka_unit_test_setup_teardown(test_class_has_cell, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cell_properties_are_those_set, setup, teardown),
        cmocka_unit_test_setup_teardown(test_client_properties, setup, teardown),
        cmocka_unit_test_setup_teardown(test_host_round_trips, setup, teardown),
        cmocka_unit_test(test_account_names),
        cmocka_unit_test(test_text_keys),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
