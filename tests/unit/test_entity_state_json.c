/* test_entity_state_json.c -- unit tests for entity_state_json: the exact
 * text of a state holding its defaults and one holding every type at or
 * near its limits (int8..int64 minimum and maximum, uint64 maximum, float,
 * quantized float, double, bool, string with escapes, bytes, vectors,
 * entity, a fixed array, an array of structs, nested structs), the 2^53
 * boundary between numbers and strings, doubles that read back bit for
 * bit, the shape of the cJSON tree, and the `only` filter; and reading it
 * back (entity_state_from_json): every type round trips exactly, values
 * written as plain cJSON numbers read too, and what does not fit (an
 * unknown name, a property outside `only`, a wrong type, out of range, a
 * struct or array half right) is reported and leaves the property whole. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "entity_def.h"
#include "entity_state.h"
#include "entity_state_json.h"

/* Every type. Property ids follow the order below (the P_* enum). */
static const char defs[] =
    "{\"types\": [\n"
    "  {\"name\": \"Item\", \"fields\": [\n"
    "    {\"name\": \"id\", \"type\": \"uint16\", \"default\": 7},\n"
    "    {\"name\": \"name\", \"type\": \"string\", \"max_length\": 8, \"default\": \"none\"},\n"
    "    {\"name\": \"pos\", \"type\": \"vector2\"}]},\n"
    "  {\"name\": \"Inner\", \"fields\": [\n"
    "    {\"name\": \"hp\", \"type\": \"int16\", \"bits\": 12, \"default\": 100},\n"
    "    {\"name\": \"tags\", \"type\": \"array\", \"element\": \"uint8\", \"count\": 2,\n"
    "     \"default\": [1, 2]}]},\n"
    "  {\"name\": \"Outer\", \"fields\": [\n"
    "    {\"name\": \"inner\", \"type\": \"Inner\"},\n"
    "    {\"name\": \"alive\", \"type\": \"bool\", \"default\": true},\n"
    "    {\"name\": \"scale\", \"type\": \"double\"}]}\n"
    "],\n"
    "\"entities\": [\n"
    " {\"name\": \"Thing\", \"properties\": [\n"
    "  {\"name\": \"i8\", \"type\": \"int8\", \"flags\": \"ALL_CLIENTS\", \"default\": -5},\n"
    "  {\"name\": \"i16\", \"type\": \"int16\", \"flags\": \"ALL_CLIENTS\"},\n"
    "  {\"name\": \"i32\", \"type\": \"int32\", \"flags\": \"ALL_CLIENTS\"},\n"
    "  {\"name\": \"i64\", \"type\": \"int64\", \"flags\": \"ALL_CLIENTS\"},\n"
    "  {\"name\": \"u8\", \"type\": \"uint8\", \"flags\": \"ALL_CLIENTS\", \"default\": 200},\n"
    "  {\"name\": \"u16\", \"type\": \"uint16\", \"flags\": \"ALL_CLIENTS\"},\n"
    "  {\"name\": \"u32\", \"type\": \"uint32\", \"flags\": \"ALL_CLIENTS\"},\n"
    "  {\"name\": \"u64\", \"type\": \"uint64\", \"flags\": \"ALL_CLIENTS\"},\n"
    "  {\"name\": \"f\", \"type\": \"float\", \"flags\": \"ALL_CLIENTS\", \"default\": 1.5},\n"
    "  {\"name\": \"q\", \"type\": \"float\", \"flags\": \"ALL_CLIENTS\", \"default\": 2.5,\n"
    "   \"quantize\": {\"min\": -10, \"max\": 10, \"precision\": 0.5}},\n"
    "  {\"name\": \"d\", \"type\": \"double\", \"flags\": \"ALL_CLIENTS\", \"default\": 0.1},\n"
    "  {\"name\": \"b\", \"type\": \"bool\", \"flags\": \"ALL_CLIENTS\"},\n"
    "  {\"name\": \"s\", \"type\": \"string\", \"max_length\": 16, \"flags\": \"ALL_CLIENTS\",\n"
    "   \"default\": \"hi\"},\n"
    "  {\"name\": \"by\", \"type\": \"bytes\", \"max_length\": 4, \"flags\": \"ALL_CLIENTS\",\n"
    "   \"default\": \"0aFF\"},\n"
    "  {\"name\": \"v2\", \"type\": \"vector2\", \"flags\": \"ALL_CLIENTS\", \"default\": [1, 2]},\n"
    "  {\"name\": \"v3\", \"type\": \"vector3\", \"flags\": \"ALL_CLIENTS\"},\n"
    "  {\"name\": \"e\", \"type\": \"entity\", \"flags\": \"ALL_CLIENTS\"},\n"
    "  {\"name\": \"arr\", \"type\": \"array\", \"element\": \"uint16\", \"count\": 3,\n"
    "   \"flags\": \"ALL_CLIENTS\", \"default\": [1, 2, 3]},\n"
    "  {\"name\": \"items\", \"type\": \"array\", \"element\": \"Item\", \"count\": 2,\n"
    "   \"flags\": \"ALL_CLIENTS\"},\n"
    "  {\"name\": \"outer\", \"type\": \"Outer\", \"flags\": \"ALL_CLIENTS\"}\n"
    " ]},\n"
    " {\"name\": \"Empty\"}\n"
    "]}\n";

enum {
    P_I8,
    P_I16,
    P_I32,
    P_I64,
    P_U8,
    P_U16,
    P_U32,
    P_U64,
    P_F,
    P_Q,
    P_D,
    P_B,
    P_S,
    P_BY,
    P_V2,
    P_V3,
    P_E,
    P_ARR,
    P_ITEMS,
    P_OUTER,
    P_COUNT
};

/* Item has 3 flattened values: element i's id is 3*i, name 3*i+1, pos 3*i+2.
 * Outer: inner.hp 0, inner.tags[0..1] 1..2, alive 3, scale 4. */
enum { ITEM_VALUES = 3 };

static const char default_text[] =
    "{\"i8\":-5,\"i16\":0,\"i32\":0,\"i64\":0,\"u8\":200,\"u16\":0,\"u32\":0,\"u64\":0,"
    "\"f\":1.5,\"q\":2.5,\"d\":0.10000000000000001,\"b\":false,\"s\":\"hi\",\"by\":\"0aff\","
    "\"v2\":[1,2],\"v3\":[0,0,0],\"e\":0,\"arr\":[1,2,3],"
    "\"items\":[{\"id\":7,\"name\":\"none\",\"pos\":[0,0]},"
    "{\"id\":7,\"name\":\"none\",\"pos\":[0,0]}],"
    "\"outer\":{\"inner\":{\"hp\":100,\"tags\":[1,2]},\"alive\":true,\"scale\":0}}";

typedef struct fixture {
    entity_def_registry *reg;
    const entity_def_class *cls;
    entity_state *st;
} fixture;

static int setup(void **state) {
    fixture *fx = calloc(1, sizeof *fx);
    char err[512] = "";
    if (fx == NULL || entity_def_load_string(defs, "test", &fx->reg, err, sizeof err) != 0) {
        fprintf(stderr, "load failed: %s\n", err);
        free(fx);
        return -1;
    }
    fx->cls = entity_def_registry_find_class(fx->reg, "Thing");
    if (fx->cls == NULL || fx->cls->property_count != P_COUNT) {
        entity_def_registry_free(fx->reg);
        free(fx);
        return -1;
    }
    fx->st = entity_state_create(fx->cls);
    *state = fx;
    return 0;
}

static int teardown(void **state) {
    fixture *fx = *state;
    entity_state_free(fx->st);
    entity_def_registry_free(fx->reg);
    free(fx);
    return 0;
}

/* Setters must succeed: a failing one would make the test meaningless. */
#define SET(call) assert_int_equal((call), 0)

static void assert_json(const entity_state *st, const entity_state_mask *only, const char *expected) {
    char *text = entity_state_to_json_string(st, only);
    assert_non_null(text);
    assert_string_equal(text, expected);
    free(text);
}

/* The JSON of the single property `prop`. */
static void assert_property_json(const entity_state *st, uint16_t prop, const char *expected) {
    entity_state_mask only = {{0}};
    entity_state_mask_add(&only, prop);
    assert_json(st, &only, expected);
}

/* Sets every property of the Thing away from its default, at or near the
 * limits of its type. */
static void set_everything(fixture *fx) {
    entity_state *st = fx->st;
    SET(entity_state_set_int(st, P_I8, 0, INT8_MIN));
    SET(entity_state_set_int(st, P_I16, 0, INT16_MAX));
    SET(entity_state_set_int(st, P_I32, 0, INT32_MIN));
    SET(entity_state_set_int(st, P_I64, 0, INT64_MIN));
    SET(entity_state_set_uint(st, P_U8, 0, UINT8_MAX));
    SET(entity_state_set_uint(st, P_U16, 0, UINT16_MAX));
    SET(entity_state_set_uint(st, P_U32, 0, UINT32_MAX));
    SET(entity_state_set_uint(st, P_U64, 0, UINT64_MAX));
    SET(entity_state_set_float(st, P_F, 0, 0.1)); /* stored as the float nearest 0.1 */
    SET(entity_state_set_float(st, P_Q, 0, -7.25));
    SET(entity_state_set_float(st, P_D, 0, 1.0 / 3.0));
    SET(entity_state_set_bool(st, P_B, 0, true));
    static const char s[] = "a\"b\\c\n\xc3\xa9"; /* quote, backslash, newline, e-acute */
    SET(entity_state_set_string(st, P_S, 0, s, strlen(s)));
    static const uint8_t by[] = {0x00, 0xab, 0xff};
    SET(entity_state_set_bytes(st, P_BY, 0, by, sizeof by));
    SET(entity_state_set_vector2(st, P_V2, 0, -1.5, 0.25));
    SET(entity_state_set_vector3(st, P_V3, 0, 1, 2.5, -3));
    SET(entity_state_set_entity(st, P_E, 0, 42));
    SET(entity_state_set_uint(st, P_ARR, 0, 10));
    SET(entity_state_set_uint(st, P_ARR, 1, 65535));
    /* items[0].pos, then every field of items[1]. */
    SET(entity_state_set_vector2(st, P_ITEMS, 0 * ITEM_VALUES + 2, 3, 4));
    SET(entity_state_set_uint(st, P_ITEMS, 1 * ITEM_VALUES + 0, 9));
    SET(entity_state_set_string(st, P_ITEMS, 1 * ITEM_VALUES + 1, "sword", 5));
    SET(entity_state_set_vector2(st, P_ITEMS, 1 * ITEM_VALUES + 2, 0.5, -2));
    SET(entity_state_set_int(st, P_OUTER, 0, -2048));
    SET(entity_state_set_uint(st, P_OUTER, 2, 255));
    SET(entity_state_set_bool(st, P_OUTER, 3, false));
    SET(entity_state_set_float(st, P_OUTER, 4, 9007199254740992.0)); /* 2^53 */
}

static const char everything_text[] = "{\"i8\":-128,\"i16\":32767,\"i32\":-2147483648,\"i64\":\"-9223372036854775808\","
                                      "\"u8\":255,\"u16\":65535,\"u32\":4294967295,\"u64\":\"18446744073709551615\","
                                      "\"f\":0.10000000149011612,\"q\":-7.25,\"d\":0.33333333333333331,\"b\":true,"
                                      "\"s\":\"a\\\"b\\\\c\\n\xc3\xa9\",\"by\":\"00abff\","
                                      "\"v2\":[-1.5,0.25],\"v3\":[1,2.5,-3],\"e\":42,\"arr\":[10,65535,3],"
                                      "\"items\":[{\"id\":7,\"name\":\"none\",\"pos\":[3,4]},"
                                      "{\"id\":9,\"name\":\"sword\",\"pos\":[0.5,-2]}],"
                                      "\"outer\":{\"inner\":{\"hp\":-2048,\"tags\":[1,255]},\"alive\":false,"
                                      "\"scale\":9007199254740992}}";

/* ---- tests ------------------------------------------------------------ */

/* The indexes set_everything uses are the ones entity_state names by path:
 * otherwise the expected text below would test the test. */
static void test_layout_matches_paths(void **state) {
    fixture *fx = *state;
    static const struct {
        uint16_t prop;
        const char *path;
        uint32_t index;
    } cases[] = {
        {P_ARR, "[1]", 1},
        {P_ITEMS, "[0].pos", 0 * ITEM_VALUES + 2},
        {P_ITEMS, "[1].id", 1 * ITEM_VALUES + 0},
        {P_ITEMS, "[1].name", 1 * ITEM_VALUES + 1},
        {P_ITEMS, "[1].pos", 1 * ITEM_VALUES + 2},
        {P_OUTER, "inner.hp", 0},
        {P_OUTER, "inner.tags[1]", 2},
        {P_OUTER, "alive", 3},
        {P_OUTER, "scale", 4},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint32_t index = 999;
        assert_int_equal(entity_state_index(fx->cls, cases[i].prop, cases[i].path, &index), 0);
        assert_int_equal(index, cases[i].index);
    }
}

static void test_defaults(void **state) {
    fixture *fx = *state;
    assert_json(fx->st, NULL, default_text);
}

static void test_every_type(void **state) {
    fixture *fx = *state;
    set_everything(fx);
    assert_json(fx->st, NULL, everything_text);
}

/* Converting reads the state and changes nothing: no value, no dirty mark. */
static void test_read_only(void **state) {
    fixture *fx = *state;
    set_everything(fx);
    entity_state_clear_dirty(fx->st);
    assert_json(fx->st, NULL, everything_text);
    assert_json(fx->st, NULL, everything_text);
    assert_int_equal(entity_state_next_dirty(fx->st, -1), -1);
}

/* Integers of at most 2^53 in magnitude are numbers; one more is a string,
 * for int64, uint64 and entity ids alike. */
static void test_two_to_the_53(void **state) {
    fixture *fx = *state;
    const int64_t limit = INT64_C(1) << 53;

    SET(entity_state_set_int(fx->st, P_I64, 0, limit));
    assert_property_json(fx->st, P_I64, "{\"i64\":9007199254740992}");
    SET(entity_state_set_int(fx->st, P_I64, 0, limit + 1));
    assert_property_json(fx->st, P_I64, "{\"i64\":\"9007199254740993\"}");
    SET(entity_state_set_int(fx->st, P_I64, 0, -limit));
    assert_property_json(fx->st, P_I64, "{\"i64\":-9007199254740992}");
    SET(entity_state_set_int(fx->st, P_I64, 0, -limit - 1));
    assert_property_json(fx->st, P_I64, "{\"i64\":\"-9007199254740993\"}");
    SET(entity_state_set_int(fx->st, P_I64, 0, INT64_MAX));
    assert_property_json(fx->st, P_I64, "{\"i64\":\"9223372036854775807\"}");
    SET(entity_state_set_int(fx->st, P_I64, 0, INT64_MIN));
    assert_property_json(fx->st, P_I64, "{\"i64\":\"-9223372036854775808\"}");
    SET(entity_state_set_int(fx->st, P_I64, 0, -1));
    assert_property_json(fx->st, P_I64, "{\"i64\":-1}");

    SET(entity_state_set_uint(fx->st, P_U64, 0, (uint64_t)limit));
    assert_property_json(fx->st, P_U64, "{\"u64\":9007199254740992}");
    SET(entity_state_set_uint(fx->st, P_U64, 0, (uint64_t)limit + 1));
    assert_property_json(fx->st, P_U64, "{\"u64\":\"9007199254740993\"}");
    SET(entity_state_set_uint(fx->st, P_U64, 0, UINT64_MAX));
    assert_property_json(fx->st, P_U64, "{\"u64\":\"18446744073709551615\"}");

    SET(entity_state_set_entity(fx->st, P_E, 0, (uint64_t)limit));
    assert_property_json(fx->st, P_E, "{\"e\":9007199254740992}");
    SET(entity_state_set_entity(fx->st, P_E, 0, (uint64_t)limit + 1));
    assert_property_json(fx->st, P_E, "{\"e\":\"9007199254740993\"}");
}

/* Doubles read back bit for bit, including those cJSON's own printer
 * changes (it writes 0.1 + 0.2 as 0.3, and 2^53 - 1 as
 * 9.00719925474099e+15). */
static void test_doubles_exact(void **state) {
    fixture *fx = *state;
    static const struct {
        double value;
        const char *text;
    } cases[] = {
        {0.1, "0.10000000000000001"},
        {0.1 + 0.2, "0.30000000000000004"},
        {9007199254740991.0, "9007199254740991"},
        {9007199254740994.0, "9007199254740994"},
        {-0.0, "0"}, /* the state stores -0 as 0 */
        {DBL_MAX, "1.7976931348623157e+308"},
        {-DBL_MIN, "-2.2250738585072014e-308"},
        {4.9406564584124654e-324, "4.9406564584124654e-324"}, /* the smallest subnormal */
        {123456789.125, "123456789.125"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        SET(entity_state_set_float(fx->st, P_D, 0, cases[i].value));
        char expected[96];
        snprintf(expected, sizeof expected, "{\"d\":%s}", cases[i].text);
        entity_state_mask only = {{0}};
        entity_state_mask_add(&only, P_D);
        char *text = entity_state_to_json_string(fx->st, &only);
        assert_string_equal(text, expected);
        cJSON *parsed = cJSON_Parse(text);
        assert_non_null(parsed);
        double back = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(parsed, "d"));
        double want = cases[i].value == 0 ? 0.0 : cases[i].value; /* -0 comes back as 0 */
        assert_memory_equal(&back, &want, sizeof back);
        cJSON_Delete(parsed);
        free(text);
    }
    /* A float property holds the nearest float, written exactly. */
    SET(entity_state_set_float(fx->st, P_F, 0, FLT_MAX));
    assert_property_json(fx->st, P_F, "{\"f\":3.4028234663852886e+38}");
    SET(entity_state_set_vector3(fx->st, P_V3, 0, 0.1, -FLT_MIN, 1e-3));
    assert_property_json(fx->st, P_V3,
                         "{\"v3\":[0.10000000149011612,-1.1754943508222875e-38,"
                         "0.0010000000474974513]}");
}

/* The tree: numbers are raw items, big integers strings, arrays and
 * objects in order; and the printed text is JSON that reads back. */
static void test_tree(void **state) {
    fixture *fx = *state;
    set_everything(fx);
    cJSON *root = entity_state_to_json(fx->st, NULL);
    assert_non_null(root);
    assert_true(cJSON_IsObject(root));
    assert_int_equal(cJSON_GetArraySize(root), P_COUNT);

    /* Members in property id order. */
    size_t p = 0;
    for (const cJSON *item = root->child; item != NULL; item = item->next, p++)
        assert_string_equal(item->string, fx->cls->properties[p].name);
    assert_int_equal(p, P_COUNT);

    const cJSON *i8 = cJSON_GetObjectItemCaseSensitive(root, "i8");
    assert_true(cJSON_IsRaw(i8));
    assert_string_equal(i8->valuestring, "-128");
    const cJSON *i64 = cJSON_GetObjectItemCaseSensitive(root, "i64");
    assert_true(cJSON_IsString(i64));
    assert_int_equal(strtoll(i64->valuestring, NULL, 10), INT64_MIN);
    const cJSON *u64 = cJSON_GetObjectItemCaseSensitive(root, "u64");
    assert_true(cJSON_IsString(u64));
    assert_true(strtoull(u64->valuestring, NULL, 10) == UINT64_MAX);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "b")));
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(root, "s")), "a\"b\\c\n\xc3\xa9");

    const cJSON *v3 = cJSON_GetObjectItemCaseSensitive(root, "v3");
    assert_true(cJSON_IsArray(v3));
    assert_int_equal(cJSON_GetArraySize(v3), 3);

    const cJSON *items = cJSON_GetObjectItemCaseSensitive(root, "items");
    assert_true(cJSON_IsArray(items));
    assert_int_equal(cJSON_GetArraySize(items), 2);
    const cJSON *item1 = cJSON_GetArrayItem(items, 1);
    assert_true(cJSON_IsObject(item1));
    assert_string_equal(item1->child->string, "id");
    assert_string_equal(item1->child->next->string, "name");
    assert_string_equal(item1->child->next->next->string, "pos");
    assert_null(item1->child->next->next->next);

    const cJSON *outer = cJSON_GetObjectItemCaseSensitive(root, "outer");
    assert_string_equal(outer->child->string, "inner");
    assert_true(cJSON_IsObject(outer->child));
    assert_string_equal(outer->child->next->string, "alive");
    assert_true(cJSON_IsFalse(outer->child->next));
    assert_string_equal(outer->child->next->next->string, "scale");
    cJSON_Delete(root);

    /* The text parses, and its numbers are the stored values. */
    char *text = entity_state_to_json_string(fx->st, NULL);
    cJSON *parsed = cJSON_Parse(text);
    free(text);
    assert_non_null(parsed);
    double f = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(parsed, "f"));
    assert_true(f == (double)0.1f);
    double d = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(parsed, "d"));
    assert_true(d == 1.0 / 3.0);
    const cJSON *scale = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(parsed, "outer"), "scale");
    assert_true(cJSON_GetNumberValue(scale) == 9007199254740992.0);
    const cJSON *pos = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(parsed, "items"), 1), "pos");
    assert_true(cJSON_GetNumberValue(cJSON_GetArrayItem(pos, 0)) == 0.5);
    assert_true(cJSON_GetNumberValue(cJSON_GetArrayItem(pos, 1)) == -2);
    cJSON_Delete(parsed);
}

static void test_strings_and_bytes(void **state) {
    fixture *fx = *state;
    SET(entity_state_set_string(fx->st, P_S, 0, "", 0));
    assert_property_json(fx->st, P_S, "{\"s\":\"\"}");
    SET(entity_state_set_string(fx->st, P_S, 0, "tab\there\x01/", 10));
    assert_property_json(fx->st, P_S, "{\"s\":\"tab\\there\\u0001/\"}");
    SET(entity_state_set_bytes(fx->st, P_BY, 0, NULL, 0));
    assert_property_json(fx->st, P_BY, "{\"by\":\"\"}");
    SET(entity_state_set_bytes(fx->st, P_BY, 0, "\x10\x9f\xa0\x0f", 4));
    assert_property_json(fx->st, P_BY, "{\"by\":\"109fa00f\"}");
}

static void test_only(void **state) {
    fixture *fx = *state;
    entity_state_mask only = {{0}};
    assert_json(fx->st, &only, "{}");

    entity_state_mask_add(&only, P_OUTER);
    entity_state_mask_add(&only, P_I8);
    entity_state_mask_add(&only, P_BY);
    assert_json(fx->st, &only,
                "{\"i8\":-5,\"by\":\"0aff\","
                "\"outer\":{\"inner\":{\"hp\":100,\"tags\":[1,2]},\"alive\":true,\"scale\":0}}");

    /* Ids the class does not have change nothing. */
    entity_state_mask_add(&only, P_COUNT);
    entity_state_mask_add(&only, ENTITY_DEF_MAX_MEMBERS - 1);
    assert_json(fx->st, &only,
                "{\"i8\":-5,\"by\":\"0aff\","
                "\"outer\":{\"inner\":{\"hp\":100,\"tags\":[1,2]},\"alive\":true,\"scale\":0}}");

    /* Every id is the same as NULL. */
    entity_state_mask_all(&only, ENTITY_DEF_MAX_MEMBERS);
    assert_json(fx->st, &only, default_text);

    /* The filter is by id, not by dirtiness: a changed property outside it
     * stays out. */
    SET(entity_state_set_int(fx->st, P_I16, 0, 5));
    memset(&only, 0, sizeof only);
    entity_state_mask_add(&only, P_U8);
    assert_json(fx->st, &only, "{\"u8\":200}");
    assert_json(fx->st, entity_state_dirty(fx->st), "{\"i16\":5}");
}

/* ---- reading back ------------------------------------------------------- */

typedef struct problems {
    char names[16][32];
    char whys[16][128];
    int count;
} problems;

static void note_problem(const char *name, const char *why, void *context) {
    problems *p = context;
    if (p->count < 16) {
        snprintf(p->names[p->count], sizeof p->names[0], "%s", name);
        snprintf(p->whys[p->count], sizeof p->whys[0], "%s", why);
    }
    p->count++;
}

/* What entity_state_to_json writes, entity_state_from_json reads back to
 * the same values, every type at its limits included. */
static void test_read_back_every_type(void **state) {
    fixture *fx = *state;
    set_everything(fx);
    char *text = entity_state_to_json_string(fx->st, NULL);
    cJSON *parsed = cJSON_Parse(text);
    assert_non_null(parsed);
    entity_state *copy = entity_state_create(fx->cls);
    problems p = {0};
    assert_int_equal(entity_state_from_json(copy, parsed, NULL, note_problem, &p), P_COUNT);
    assert_int_equal(p.count, 0);
    assert_json(copy, NULL, everything_text);
    cJSON_Delete(parsed);
    free(text);
    entity_state_free(copy);
}

/* Numbers as cJSON numbers (what cJSON_Parse makes of hand-written JSON)
 * and big integers as decimal strings both read. */
static void test_read_plain_numbers(void **state) {
    fixture *fx = *state;
    cJSON *object = cJSON_Parse("{\"u32\": 4000000000, \"i16\": -7, \"d\": 0.5, \"u64\": \"18446744073709551615\","
                                " \"v2\": [3, -4], \"e\": 1e3}");
    assert_non_null(object);
    assert_int_equal(entity_state_from_json(fx->st, object, NULL, NULL, NULL), 6);
    uint64_t u;
    int64_t i;
    double d, v[2];
    assert_int_equal(entity_state_get_uint(fx->st, P_U32, 0, &u), 0);
    assert_int_equal(u, 4000000000u);
    assert_int_equal(entity_state_get_int(fx->st, P_I16, 0, &i), 0);
    assert_int_equal(i, -7);
    assert_int_equal(entity_state_get_float(fx->st, P_D, 0, &d), 0);
    assert_true(d == 0.5);
    assert_int_equal(entity_state_get_uint(fx->st, P_U64, 0, &u), 0);
    assert_true(u == UINT64_MAX);
    assert_int_equal(entity_state_get_vector2(fx->st, P_V2, 0, v), 0);
    assert_true(v[0] == 3 && v[1] == -4);
    assert_int_equal(entity_state_get_entity(fx->st, P_E, 0, &u), 0);
    assert_int_equal(u, 1000);
    cJSON_Delete(object);
}

/* Each member that does not fit is reported by name, and its property is
 * left as it was, whole: a struct whose second field is wrong keeps its
 * first field too. The members that fit are set. */
static void test_read_problems(void **state) {
    fixture *fx = *state;
    cJSON *object =
        cJSON_Parse("{\"gone\": 1, \"u8\": 300, \"i8\": \"x\", \"b\": 1, \"s\": \"ok\", \"arr\": [1, 2],"
                    " \"outer\": {\"inner\": {\"hp\": 5, \"tags\": [1, 2]}, \"alive\": \"yes\", \"scale\": 1},"
                    " \"items\": [{\"id\": 1, \"name\": \"a\", \"pos\": [0, 0]}, {\"id\": 2, \"pos\": [0, 0]}],"
                    " \"by\": \"abc\", \"u16\": 9}");
    assert_non_null(object);
    entity_state_mask only;
    entity_state_mask_all(&only, P_COUNT);
    entity_state_mask_remove(&only, P_U16);
    problems p = {0};
    assert_int_equal(entity_state_from_json(fx->st, object, &only, note_problem, &p), 1);
    assert_int_equal(p.count, 9);
    static const char *expected[] = {"gone", "u8", "i8", "b", "arr", "outer", "items", "by", "u16"};
    for (int k = 0; k < 9; k++) assert_string_equal(p.names[k], expected[k]);
    assert_non_null(strstr(p.whys[0], "not a property"));
    assert_non_null(strstr(p.whys[1], "does not fit"));
    assert_non_null(strstr(p.whys[5], "alive"));
    assert_non_null(strstr(p.whys[6], "name"));
    assert_non_null(strstr(p.whys[8], "not among"));
    /* Only "s" was set; everything else kept its default. */
    entity_state_mask hi = {{0}};
    entity_state_mask_add(&hi, P_S);
    assert_json(fx->st, &hi, "{\"s\":\"ok\"}");
    entity_state_mask rest;
    entity_state_mask_all(&rest, P_COUNT);
    entity_state_mask_remove(&rest, P_S);
    char *text = entity_state_to_json_string(fx->st, &rest);
    entity_state *fresh = entity_state_create(fx->cls);
    char *defaults = entity_state_to_json_string(fresh, &rest);
    assert_string_equal(text, defaults);
    free(text);
    free(defaults);
    entity_state_free(fresh);
    assert_int_equal(entity_state_from_json(fx->st, cJSON_GetObjectItem(object, "u8"), NULL, NULL, NULL), -1);
    cJSON_Delete(object);
}

static void test_class_without_properties(void **state) {
    fixture *fx = *state;
    const entity_def_class *empty = entity_def_registry_find_class(fx->reg, "Empty");
    assert_non_null(empty);
    entity_state *st = entity_state_create(empty);
    assert_json(st, NULL, "{}");
    cJSON *root = entity_state_to_json(st, NULL);
    assert_true(cJSON_IsObject(root));
    assert_null(root->child);
    cJSON_Delete(root);
    entity_state_free(st);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_layout_matches_paths, setup, teardown),
        cmocka_unit_test_setup_teardown(test_defaults, setup, teardown),
        cmocka_unit_test_setup_teardown(test_every_type, setup, teardown),
        cmocka_unit_test_setup_teardown(test_read_only, setup, teardown),
        cmocka_unit_test_setup_teardown(test_two_to_the_53, setup, teardown),
        cmocka_unit_test_setup_teardown(test_doubles_exact, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tree, setup, teardown),
        cmocka_unit_test_setup_teardown(test_strings_and_bytes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_only, setup, teardown),
        cmocka_unit_test_setup_teardown(test_class_without_properties, setup, teardown),
        cmocka_unit_test_setup_teardown(test_read_back_every_type, setup, teardown),
        cmocka_unit_test_setup_teardown(test_read_plain_numbers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_read_problems, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
