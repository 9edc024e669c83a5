/* entity_def.c -- the loader of entity definitions: reads JSON documents
 * with cJSON, checks every key, resolves struct references, normalises
 * defaults, computes the digest, and writes the self-description back.
 *
 * It owns the registry and nothing else: no values, no encoding, no views.
 *
 * The document (one per file or string; demo/entities/README.md has a full
 * example):
 *
 *   { "format": 1,                                   optional, must be 1
 *     "types":    [ { "name": S, "fields": [FIELD...] } ... ],      optional
 *     "entities": [ { "name": C, "properties": [PROP...],           optional
 *                     "base_methods": [M...], "cell_methods": [M...],
 *                     "client_methods": [M...] } ... ],
 *     "events":   [ { "name": E, "args": [ARG...] } ... ] }             optional
 *   PROP  = { "name", TYPE..., "flags": "ALL_CLIENTS", "persistent": bool,
 *             "detail": "near"|"medium"|"far", "default": VALUE }
 *   FIELD = { "name", TYPE..., "default": VALUE }
 *   M     = { "name", "exposed": bool (not on client methods), "args": [ARG...] }
 *   ARG   = { "name", TYPE... }
 *   TYPE... = "type": NAME plus the keys of that type:
 *     int8..int64, uint8..uint64   "bits": 1..natural width (optional)
 *     float, double, vector2/3     "quantize": {"min", "max", "precision"} (optional)
 *     string, bytes                "max_length": 1..65535 (required)
 *     array                        "element": NAME or {"type": NAME, ...}, "count": 1..1024
 *     bool, entity, a struct name  nothing
 *
 * Arrays (not objects) hold the members because their order is meaningful:
 * it gives the ids. Every object is checked against the keys its context
 * and its type allow, and a key given twice is an error too.
 *
 * Loading runs in three passes over the parsed documents: collect the struct
 * declarations of every document (so a struct may be used before, or in a
 * different file from, its declaration) and sort them by name; resolve each
 * struct's fields depth first, which is where recursion is found (a struct
 * marked "resolving" met again); then build the classes in document order.
 *
 * The digest is BLAKE2b-256 over this canonical form, built from the loaded
 * registry and never from the file text. Integers are little-endian, a u32
 * or u64 as named; a string is its u32 byte length then its bytes; a double
 * is its IEEE 754 bits as a u64; a bool is one byte.
 *
 *   str "tessera-entity-def/1"
 *   u32 struct count, then per struct in name order:
 *       str name, u32 field count, per field: str name, TYPE, VALUE(default)
 *   u32 class count, then per class in id order:
 *       str name, u32 property count,
 *       per property: str name, TYPE, u8 flags, u8 persistent, u8 detail, VALUE(default)
 *       per part (base, cell, client): u32 method count,
 *           per method: str name, u8 exposed, u32 arg count, per arg: str name, TYPE
 *   and only when there are game events (so that definitions without any
 *   keep the digest they had before events existed):
 *   str "events", u32 event count, per event in id order: str name,
 *       u32 arg count, per arg: str name, TYPE
 *   TYPE  = u8 kind, then: integers u32 bits; float/double/vectors u8 quantized
 *           and, if quantized, double min, max, precision; string/bytes
 *           u32 max_length; array u32 count and the element's TYPE; struct
 *           str name; bool and entity nothing.
 *   VALUE = integers i64 (signed kinds) or u64; float/double a double;
 *           vectors 2 or 3 doubles; bool u8; string str; bytes str of the
 *           lowercase hex; entity u64; array each element; struct each
 *           field in declaration order.
 *
 * Numbers in JSON are doubles (cJSON), so integer defaults are limited to
 * magnitudes up to 2^53 where every integer is exact.
 */
#include "entity_def.h"
#include "json_file.h"

#include "log.h"

#include <dirent.h>
#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The only format so far; "format" in a document must equal it. */
#define ENTITY_DEF__FORMAT 1

/* 2^53: the largest magnitude below which every integer is a double. */
#define ENTITY_DEF__EXACT_INT 9007199254740992.0

/* Class ids and struct indexes are uint16_t. */
#define ENTITY_DEF__MAX_CLASSES 65535

/* Room for "Class.method(arg)[][]" and a value path like "default.a[3].b";
 * longer paths (deeply nested arrays) are cut, which only shortens a
 * message. */
#define ENTITY_DEF__WHERE 256

/* ---- tables ----------------------------------------------------------- */

/* Which type keys a kind takes, besides "type". */
typedef enum entity_def__group {
    ENTITY_DEF__GROUP_INT,    /* "bits" */
    ENTITY_DEF__GROUP_REAL,   /* "quantize" */
    ENTITY_DEF__GROUP_SIZED,  /* "max_length" */
    ENTITY_DEF__GROUP_ARRAY,  /* "element", "count" */
    ENTITY_DEF__GROUP_PLAIN,  /* nothing */
    ENTITY_DEF__GROUP_STRUCT, /* nothing: the struct's name is the type */
} entity_def__group;

typedef struct entity_def__kind_info {
    const char *name;
    entity_def__group group;
    unsigned bits;       /* natural bits of one value, or of one component */
    unsigned components; /* numbers and vectors: 1, 2 or 3; others 0 */
    bool is_signed;
    unsigned max_quant_bits; /* GROUP_REAL: a quantized value may not need more */
} entity_def__kind_info;

/* Quantizing a float to more than 32 bits would cost more than sending the
 * float itself; a double may use up to 64. */
static const entity_def__kind_info entity_def__kinds[] = {
    [ENTITY_DEF_INT8] = {"int8", ENTITY_DEF__GROUP_INT, 8, 1, true, 0},
    [ENTITY_DEF_INT16] = {"int16", ENTITY_DEF__GROUP_INT, 16, 1, true, 0},
    [ENTITY_DEF_INT32] = {"int32", ENTITY_DEF__GROUP_INT, 32, 1, true, 0},
    [ENTITY_DEF_INT64] = {"int64", ENTITY_DEF__GROUP_INT, 64, 1, true, 0},
    [ENTITY_DEF_UINT8] = {"uint8", ENTITY_DEF__GROUP_INT, 8, 1, false, 0},
    [ENTITY_DEF_UINT16] = {"uint16", ENTITY_DEF__GROUP_INT, 16, 1, false, 0},
    [ENTITY_DEF_UINT32] = {"uint32", ENTITY_DEF__GROUP_INT, 32, 1, false, 0},
    [ENTITY_DEF_UINT64] = {"uint64", ENTITY_DEF__GROUP_INT, 64, 1, false, 0},
    [ENTITY_DEF_FLOAT] = {"float", ENTITY_DEF__GROUP_REAL, 32, 1, true, 32},
    [ENTITY_DEF_DOUBLE] = {"double", ENTITY_DEF__GROUP_REAL, 64, 1, true, 64},
    [ENTITY_DEF_BOOL] = {"bool", ENTITY_DEF__GROUP_PLAIN, 1, 0, false, 0},
    [ENTITY_DEF_STRING] = {"string", ENTITY_DEF__GROUP_SIZED, 0, 0, false, 0},
    [ENTITY_DEF_BYTES] = {"bytes", ENTITY_DEF__GROUP_SIZED, 0, 0, false, 0},
    [ENTITY_DEF_VECTOR2] = {"vector2", ENTITY_DEF__GROUP_REAL, 32, 2, true, 32},
    [ENTITY_DEF_VECTOR3] = {"vector3", ENTITY_DEF__GROUP_REAL, 32, 3, true, 32},
    [ENTITY_DEF_ENTITY] = {"entity", ENTITY_DEF__GROUP_PLAIN, 64, 0, false, 0},
    [ENTITY_DEF_ARRAY] = {"array", ENTITY_DEF__GROUP_ARRAY, 0, 0, false, 0},
    [ENTITY_DEF_STRUCT] = {"struct", ENTITY_DEF__GROUP_STRUCT, 0, 0, false, 0},
};
#define ENTITY_DEF__KIND_COUNT (sizeof(entity_def__kinds) / sizeof(entity_def__kinds[0]))

static const char *const entity_def__group_keys[][3] = {
    [ENTITY_DEF__GROUP_INT] = {"bits", NULL, NULL},         [ENTITY_DEF__GROUP_REAL] = {"quantize", NULL, NULL},
    [ENTITY_DEF__GROUP_SIZED] = {"max_length", NULL, NULL}, [ENTITY_DEF__GROUP_ARRAY] = {"element", "count", NULL},
    [ENTITY_DEF__GROUP_PLAIN] = {NULL, NULL, NULL},         [ENTITY_DEF__GROUP_STRUCT] = {NULL, NULL, NULL},
};

/* Every type key, to tell "does not apply to this type" from "unknown". */
static const char *const entity_def__all_type_keys[] = {"bits", "quantize", "max_length", "element", "count", NULL};

/* The audience of each flag: the KBEngine meaning, as in entity_def.h. */
static const struct {
    const char *name;
    entity_def_audience audience;
} entity_def__flags[ENTITY_DEF_FLAG_COUNT] = {
    [ENTITY_DEF_FLAG_BASE] = {"BASE", {.on_base = true}},
    [ENTITY_DEF_FLAG_BASE_AND_CLIENT] = {"BASE_AND_CLIENT", {.on_base = true, .to_own_client = true}},
    [ENTITY_DEF_FLAG_CELL_PRIVATE] = {"CELL_PRIVATE", {.on_cell = true}},
    [ENTITY_DEF_FLAG_CELL_PUBLIC] = {"CELL_PUBLIC", {.on_cell = true, .to_ghosts = true}},
    [ENTITY_DEF_FLAG_CELL_PUBLIC_AND_OWN] = {"CELL_PUBLIC_AND_OWN",
                                             {.on_cell = true, .to_ghosts = true, .to_own_client = true}},
    [ENTITY_DEF_FLAG_ALL_CLIENTS] =
        {"ALL_CLIENTS", {.on_cell = true, .to_ghosts = true, .to_own_client = true, .to_other_clients = true}},
    [ENTITY_DEF_FLAG_OWN_CLIENT] = {"OWN_CLIENT", {.on_cell = true, .to_own_client = true}},
    [ENTITY_DEF_FLAG_OTHER_CLIENTS] = {"OTHER_CLIENTS", {.on_cell = true, .to_ghosts = true, .to_other_clients = true}},
};

static const char *const entity_def__detail_names[] = {
    [ENTITY_DEF_DETAIL_NEAR] = "near",
    [ENTITY_DEF_DETAIL_MEDIUM] = "medium",
    [ENTITY_DEF_DETAIL_FAR] = "far",
};

static const char *const entity_def__part_names[] = {
    [ENTITY_DEF_PART_BASE] = "base",
    [ENTITY_DEF_PART_CELL] = "cell",
    [ENTITY_DEF_PART_CLIENT] = "client",
};

/* The JSON sections of a class, one per part. */
static const char *const entity_def__part_sections[] = {
    [ENTITY_DEF_PART_BASE] = "base_methods",
    [ENTITY_DEF_PART_CELL] = "cell_methods",
    [ENTITY_DEF_PART_CLIENT] = "client_methods",
};

/* The keys each kind of object may hold ("type" for a type spec; the type's
 * own keys are added by the type). */
static const char *const entity_def__document_keys[] = {"format", "types", "entities", "events", NULL};
static const char *const entity_def__struct_keys[] = {"name", "fields", NULL};
static const char *const entity_def__field_keys[] = {"name", "type", "default", NULL};
static const char *const entity_def__class_keys[] = {"name",         "properties",     "base_methods",
                                                     "cell_methods", "client_methods", NULL};
static const char *const entity_def__property_keys[] = {"name",   "type",    "flags", "persistent",
                                                        "detail", "default", NULL};
static const char *const entity_def__method_keys[] = {"name", "exposed", "args", NULL};
static const char *const entity_def__client_method_keys[] = {"name", "args", NULL};
static const char *const entity_def__arg_keys[] = {"name", "type", NULL};
static const char *const entity_def__element_keys[] = {"type", NULL};
static const char *const entity_def__quantize_keys[] = {"min", "max", "precision", NULL};

/* ---- the registry ----------------------------------------------------- */

struct entity_def_registry {
    char **sources; /* file paths or string names, in load order */
    size_t source_count;
    entity_def_struct *structs; /* sorted by name; types point into it */
    size_t struct_count;
    entity_def_class *classes; /* by id */
    size_t class_count;
    /* The game events, as the client methods of a class of their own named
     * "events" (id UINT16_MAX): an event is declared, checked, coded and
     * described exactly as a client method is. */
    entity_def_class events;
    uint8_t digest[ENTITY_DEF_DIGEST_BYTES];
    char digest_hex[ENTITY_DEF_DIGEST_BYTES * 2 + 1];
};

/* Resolution state of a struct declaration during loading. */
typedef enum entity_def__state {
    ENTITY_DEF__UNRESOLVED, /* fields not read yet */
    ENTITY_DEF__RESOLVING,  /* on the stack: meeting it again is recursion */
    ENTITY_DEF__RESOLVED,   /* fields and their defaults are ready */
} entity_def__state;

typedef struct entity_def__decl {
    const cJSON *json; /* the declaration object, owned by the document */
    const char *source;
    const char *name;
    size_t order; /* document order, so duplicates are reported on the later one */
    entity_def__state state;
} entity_def__decl;

/* Everything one load call needs; gone when it returns. */
typedef struct entity_def__loader {
    entity_def_registry *reg;
    cJSON **roots;           /* one parsed document per reg->sources entry */
    entity_def__decl *decls; /* parallel to reg->structs */
    size_t *stack;           /* indexes of the structs being resolved */
    size_t depth;
    char *err;
    size_t errlen;
} entity_def__loader;

/* ---- small helpers ---------------------------------------------------- */

static void entity_def__report(entity_def__loader *L, const char *source, const char *where, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Writes "source: where: problem" (or "source: problem") into L->err. */
static void entity_def__report(entity_def__loader *L, const char *source, const char *where, const char *fmt, ...) {
    if (L->err == NULL || L->errlen == 0) return;
    char problem[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(problem, sizeof problem, fmt, ap);
    va_end(ap);
    if (where != NULL && where[0] != '\0')
        snprintf(L->err, L->errlen, "%s: %s: %s", source, where, problem);
    else
        snprintf(L->err, L->errlen, "%s: %s", source, problem);
}

/* Reports the problem and is -1. A macro, so that the -1 is in sight of the
 * static analyzer, which does not follow calls into variadic functions:
 * with a function it took the failure for a success that left *out unset. */
#define entity_def__fail(L, source, where, ...) (entity_def__report((L), (source), (where), __VA_ARGS__), -1)

/* cJSON allocates with malloc and reports failure as NULL or false: out of
 * memory stops the process, as xmalloc does. */
static cJSON *entity_def__json(cJSON *item) {
    if (item == NULL) log_panic("entity_def: out of memory building JSON");
    return item;
}

static void entity_def__add(cJSON *object, const char *key, cJSON *item) {
    if (!cJSON_AddItemToObject(object, key, entity_def__json(item)))
        log_panic("entity_def: out of memory building JSON");
}

static void entity_def__append(cJSON *array, cJSON *item) {
    if (!cJSON_AddItemToArray(array, entity_def__json(item))) log_panic("entity_def: out of memory building JSON");
}

static void entity_def__where(char *buf, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Formats a location into a ENTITY_DEF__WHERE buffer, cutting if needed. */
static void entity_def__where(char *buf, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, ENTITY_DEF__WHERE, fmt, ap);
    va_end(ap);
    if (n < 0) buf[0] = '\0';
}

/* Exact text for a double: whole numbers up to 2^53 as integers (100, not
 * 1e+02), anything else as the shortest "%g" text that reads back as the
 * same double (0.1, not 0.10000000000000001). */
static void entity_def__format_double(double value, char *buf, size_t len) {
    if (fabs(value) <= ENTITY_DEF__EXACT_INT && value == floor(value)) {
        snprintf(buf, len, "%" PRId64, (int64_t)value);
        return;
    }
    for (int precision = 1; precision <= 17; precision++) {
        snprintf(buf, len, "%.*g", precision, value);
        if (strtod(buf, NULL) == value) return;
    }
}

/* Words for a JSON value, for "must be X, got Y" messages. */
static void entity_def__describe_json(const cJSON *item, char *buf, size_t len) {
    if (cJSON_IsNumber(item))
        entity_def__format_double(item->valuedouble, buf, len);
    else if (cJSON_IsString(item))
        snprintf(buf, len, "a string");
    else if (cJSON_IsBool(item))
        snprintf(buf, len, "%s", cJSON_IsTrue(item) ? "true" : "false");
    else if (cJSON_IsNull(item))
        snprintf(buf, len, "null");
    else if (cJSON_IsArray(item))
        snprintf(buf, len, "an array");
    else if (cJSON_IsObject(item))
        snprintf(buf, len, "an object");
    else
        snprintf(buf, len, "an unknown JSON value");
}

static bool entity_def__in_list(const char *const *list, const char *key) {
    for (; list != NULL && *list != NULL; list++) {
        if (strcmp(*list, key) == 0) return true;
    }
    return false;
}

/* Every member of `object` must be in `keys` or `type_keys`, and appear
 * once. `type_name` (or NULL) says which type the type keys belong to. */
static int entity_def__check_keys(entity_def__loader *L, const char *source, const char *where, const cJSON *object,
                                  const char *const *keys, const char *const *type_keys, const char *type_name) {
    for (const cJSON *item = object->child; item != NULL; item = item->next) {
        const char *key = item->string != NULL ? item->string : "";
        for (const cJSON *prev = object->child; prev != item; prev = prev->next) {
            if (prev->string != NULL && strcmp(prev->string, key) == 0)
                return entity_def__fail(L, source, where, "duplicate key '%.80s'", key);
        }
        if (entity_def__in_list(keys, key) || entity_def__in_list(type_keys, key)) continue;
        if (type_name != NULL && entity_def__in_list(entity_def__all_type_keys, key))
            return entity_def__fail(L, source, where, "key '%s' does not apply to type %.80s", key, type_name);
        return entity_def__fail(L, source, where, "unknown key '%.80s'", key);
    }
    return 0;
}

static bool entity_def__is_identifier(const char *name) {
    size_t len = strlen(name);
    if (len == 0 || len > ENTITY_DEF_NAME_MAX) return false;
    for (size_t i = 0; i < len; i++) {
        char c = name[i];
        bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
        bool digit = c >= '0' && c <= '9';
        if (!letter && !(digit && i > 0)) return false;
    }
    return true;
}

/* Reads the "name" of `object` (which `where` locates) into *out. */
static int entity_def__name(entity_def__loader *L, const char *source, const char *where, const cJSON *object,
                            const char **out) {
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(object, "name");
    if (item == NULL) return entity_def__fail(L, source, where, "missing 'name'");
    if (!cJSON_IsString(item) || item->valuestring == NULL)
        return entity_def__fail(L, source, where, "'name' must be a string");
    if (!entity_def__is_identifier(item->valuestring))
        return entity_def__fail(L, source, where,
                                "name '%.80s' is not an identifier (a letter or '_', then "
                                "letters, digits or '_'; at most %d bytes)",
                                item->valuestring, ENTITY_DEF_NAME_MAX);
    *out = item->valuestring;
    return 0;
}

/* Reads an optional member that must be an array (of objects when
 * `objects`) of at most `max` items. *out is NULL when it is absent. */
static int entity_def__array(entity_def__loader *L, const char *source, const char *where, const cJSON *object,
                             const char *key, size_t max, const cJSON **out) {
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(object, key);
    *out = NULL;
    if (item == NULL) return 0;
    if (!cJSON_IsArray(item)) return entity_def__fail(L, source, where, "'%s' must be an array of objects", key);
    size_t n = 0;
    for (const cJSON *child = item->child; child != NULL; child = child->next, n++) {
        if (!cJSON_IsObject(child)) return entity_def__fail(L, source, where, "'%s'[%zu] must be an object", key, n);
    }
    if (n > max) return entity_def__fail(L, source, where, "'%s' has %zu entries, more than %zu", key, n, max);
    *out = item;
    return 0;
}

/* True when `item` is an integral number in [lo, hi]. */
static bool entity_def__json_int(const cJSON *item, double lo, double hi, int64_t *out) {
    if (!cJSON_IsNumber(item) || !isfinite(item->valuedouble)) return false;
    double v = item->valuedouble;
    if (v != floor(v) || v < lo || v > hi) return false;
    *out = (int64_t)v;
    return true;
}

/* ---- public small functions ------------------------------------------- */

entity_def_audience entity_def_property_audience(entity_def_flags flags) {
    entity_def_audience none = {0};
    if ((unsigned)flags >= ENTITY_DEF_FLAG_COUNT) return none;
    return entity_def__flags[flags].audience;
}

int entity_def_quantization_bits(double min, double max, double precision) {
    if (!isfinite(min) || !isfinite(max) || !isfinite(precision) || !(max > min) || !(precision > 0)) return -1;
    double steps = (max - min) / precision;
    if (!isfinite(steps)) return -1;
    /* The division rounds (0.3 / 0.1 is 2.9999999999999996): a result this
     * close to a whole number is that number. */
    double nearest = nearbyint(steps);
    if (fabs(steps - nearest) <= 1e-12 * fmax(1.0, nearest)) steps = nearest;
    double levels = ceil(steps) + 1.0;
    for (int bits = 1; bits <= 64; bits++) {
        if (ldexp(1.0, bits) >= levels) return bits;
    }
    return -1;
}

const char *entity_def_kind_name(entity_def_kind kind) {
    return (unsigned)kind < ENTITY_DEF__KIND_COUNT ? entity_def__kinds[kind].name : "?";
}

const char *entity_def_flags_name(entity_def_flags flags) {
    return (unsigned)flags < ENTITY_DEF_FLAG_COUNT ? entity_def__flags[flags].name : "?";
}

const char *entity_def_detail_name(entity_def_detail detail) {
    return (unsigned)detail <= ENTITY_DEF_DETAIL_FAR ? entity_def__detail_names[detail] : "?";
}

const char *entity_def_part_name(entity_def_part part) {
    return (unsigned)part < ENTITY_DEF_PART_COUNT ? entity_def__part_names[part] : "?";
}

/* ---- values ----------------------------------------------------------- */

/* The value nearest zero that a number of this type may hold: 0, or the
 * end of the quantization range nearest to 0 when the range excludes it. */
static double entity_def__zero_number(const entity_def_type *type) {
    if (!type->quantized) return 0.0;
    if (type->quant_min > 0) return type->quant_min;
    if (type->quant_max < 0) return type->quant_max;
    return 0.0;
}

/* The implied default of a type: zero (see above), false, empty, no entity;
 * every element's; every field's declared default. Never fails. */
static cJSON *entity_def__zero(const entity_def_type *type) {
    const entity_def__kind_info *info = &entity_def__kinds[type->kind];
    switch (info->group) {
        case ENTITY_DEF__GROUP_INT:
            return entity_def__json(cJSON_CreateNumber(0));
        case ENTITY_DEF__GROUP_REAL: {
            double zero = entity_def__zero_number(type);
            if (info->components == 1) return entity_def__json(cJSON_CreateNumber(zero));
            cJSON *array = entity_def__json(cJSON_CreateArray());
            for (unsigned i = 0; i < info->components; i++) entity_def__append(array, cJSON_CreateNumber(zero));
            return array;
        }
        case ENTITY_DEF__GROUP_SIZED:
            return entity_def__json(cJSON_CreateString(""));
        case ENTITY_DEF__GROUP_ARRAY: {
            cJSON *array = entity_def__json(cJSON_CreateArray());
            for (uint32_t i = 0; i < type->count; i++) entity_def__append(array, entity_def__zero(type->element));
            return array;
        }
        case ENTITY_DEF__GROUP_PLAIN:
            if (type->kind == ENTITY_DEF_BOOL) return entity_def__json(cJSON_CreateFalse());
            return entity_def__json(cJSON_CreateNumber(0));
        case ENTITY_DEF__GROUP_STRUCT: {
            cJSON *object = entity_def__json(cJSON_CreateObject());
            for (size_t i = 0; i < type->structure->field_count; i++) {
                const entity_def_field *field = &type->structure->fields[i];
                entity_def__add(object, field->name, cJSON_Duplicate(field->default_value, 1));
            }
            return object;
        }
    }
    log_panic("entity_def: bad kind %d", (int)type->kind);
}

/* Exact equality of two normalised values (cJSON_Compare allows a relative
 * epsilon for numbers, which would let describe drop a default that differs
 * from the implied one in its last bit). */
static bool entity_def__json_equal(const cJSON *a, const cJSON *b) {
    if ((a->type & 0xff) != (b->type & 0xff)) return false;
    if (cJSON_IsNumber(a)) return a->valuedouble == b->valuedouble;
    if (cJSON_IsString(a)) return strcmp(a->valuestring, b->valuestring) == 0;
    if (cJSON_IsArray(a) || cJSON_IsObject(a)) {
        const cJSON *x = a->child, *y = b->child;
        for (; x != NULL && y != NULL; x = x->next, y = y->next) {
            if (cJSON_IsObject(a) && strcmp(x->string, y->string) != 0) return false;
            if (!entity_def__json_equal(x, y)) return false;
        }
        return x == NULL && y == NULL;
    }
    return true; /* true, false, null */
}

static int entity_def__make_value(entity_def__loader *L, const char *source, const char *where, const char *path,
                                  const entity_def_type *type, const cJSON *json, cJSON **out);

/* One number of a float, double or vector type. */
static int entity_def__make_real(entity_def__loader *L, const char *source, const char *where, const char *path,
                                 const entity_def_type *type, const cJSON *json, cJSON **out) {
    char got[48];
    if (!cJSON_IsNumber(json) || !isfinite(json->valuedouble)) {
        entity_def__describe_json(json, got, sizeof got);
        return entity_def__fail(L, source, where, "%s must be a finite number, got %s", path, got);
    }
    double v = json->valuedouble;
    entity_def__format_double(v, got, sizeof got);
    if (type->kind != ENTITY_DEF_DOUBLE && fabs(v) > FLT_MAX)
        return entity_def__fail(L, source, where, "%s %s does not fit a float", path, got);
    if (type->quantized && (v < type->quant_min || v > type->quant_max)) {
        char lo[48], hi[48];
        entity_def__format_double(type->quant_min, lo, sizeof lo);
        entity_def__format_double(type->quant_max, hi, sizeof hi);
        return entity_def__fail(L, source, where,
                                "%s %s is outside the quantization range "
                                "[%s, %s]",
                                path, got, lo, hi);
    }
    *out = entity_def__json(cJSON_CreateNumber(v == 0 ? 0.0 : v)); /* -0 is 0 */
    return 0;
}

static int entity_def__hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Checks `json` against `type` and returns its normalised copy in *out (see
 * entity_def_property.default_value); NULL `json` means the implied default.
 * `path` names the value in messages ("default", "default.armor[2]"). */
static int entity_def__make_value(entity_def__loader *L, const char *source, const char *where, const char *path,
                                  const entity_def_type *type, const cJSON *json, cJSON **out) {
    const entity_def__kind_info *info = &entity_def__kinds[type->kind];
    char got[48];
    char child[ENTITY_DEF__WHERE];
    *out = NULL;
    if (json == NULL) {
        *out = entity_def__zero(type);
        return 0;
    }
    entity_def__describe_json(json, got, sizeof got);
    switch (info->group) {
        case ENTITY_DEF__GROUP_INT: {
            int64_t v;
            double lo = fmax((double)type->int_min, -ENTITY_DEF__EXACT_INT);
            double hi = fmin((double)type->int_max, ENTITY_DEF__EXACT_INT);
            if (!cJSON_IsNumber(json) || !entity_def__json_int(json, -ENTITY_DEF__EXACT_INT, ENTITY_DEF__EXACT_INT, &v))
                return entity_def__fail(L, source, where, "%s must be an integer (at most 2^53 in magnitude), got %s",
                                        path, got);
            if (json->valuedouble < lo || json->valuedouble > hi)
                return entity_def__fail(L, source, where, "%s %s is outside [%" PRId64 ", %" PRIu64 "] (%s, %u bits)",
                                        path, got, type->int_min, type->int_max, info->name, type->bits);
            *out = entity_def__json(cJSON_CreateNumber((double)v));
            return 0;
        }
        case ENTITY_DEF__GROUP_REAL: {
            if (info->components == 1) return entity_def__make_real(L, source, where, path, type, json, out);
            if (!cJSON_IsArray(json) || (unsigned)cJSON_GetArraySize(json) != info->components)
                return entity_def__fail(L, source, where, "%s must be an array of %u numbers, got %s", path,
                                        info->components, got);
            cJSON *array = entity_def__json(cJSON_CreateArray());
            unsigned i = 0;
            for (const cJSON *item = json->child; item != NULL; item = item->next, i++) {
                cJSON *number;
                entity_def__where(child, "%s[%u]", path, i);
                if (entity_def__make_real(L, source, where, child, type, item, &number) != 0) {
                    cJSON_Delete(array);
                    return -1;
                }
                entity_def__append(array, number);
            }
            *out = array;
            return 0;
        }
        case ENTITY_DEF__GROUP_SIZED: {
            if (!cJSON_IsString(json) || json->valuestring == NULL)
                return entity_def__fail(L, source, where, "%s must be a string%s, got %s", path,
                                        type->kind == ENTITY_DEF_BYTES ? " of hex digits" : "", got);
            size_t len = strlen(json->valuestring);
            if (type->kind == ENTITY_DEF_STRING) {
                if (len > type->max_length)
                    return entity_def__fail(L, source, where, "%s is %zu bytes long, more than max_length %" PRIu32,
                                            path, len, type->max_length);
                *out = entity_def__json(cJSON_CreateString(json->valuestring));
                return 0;
            }
            if (len % 2 != 0)
                return entity_def__fail(L, source, where, "%s must be an even number of hex digits", path);
            if (len / 2 > type->max_length)
                return entity_def__fail(L, source, where, "%s is %zu bytes long, more than max_length %" PRIu32, path,
                                        len / 2, type->max_length);
            char *lower = xmalloc(len + 1);
            for (size_t i = 0; i < len; i++) {
                int digit = entity_def__hex_digit(json->valuestring[i]);
                if (digit < 0) {
                    free(lower);
                    return entity_def__fail(L, source, where, "%s must be hex digits, got '%c' at offset %zu", path,
                                            json->valuestring[i], i);
                }
                lower[i] = "0123456789abcdef"[digit];
            }
            lower[len] = '\0';
            *out = entity_def__json(cJSON_CreateString(lower));
            free(lower);
            return 0;
        }
        case ENTITY_DEF__GROUP_ARRAY: {
            if (!cJSON_IsArray(json) || (uint32_t)cJSON_GetArraySize(json) != type->count)
                return entity_def__fail(L, source, where, "%s must be an array of exactly %" PRIu32 " values, got %s",
                                        path, type->count, got);
            cJSON *array = entity_def__json(cJSON_CreateArray());
            size_t i = 0;
            for (const cJSON *item = json->child; item != NULL; item = item->next, i++) {
                cJSON *value;
                entity_def__where(child, "%s[%zu]", path, i);
                if (entity_def__make_value(L, source, where, child, type->element, item, &value) != 0) {
                    cJSON_Delete(array);
                    return -1;
                }
                entity_def__append(array, value);
            }
            *out = array;
            return 0;
        }
        case ENTITY_DEF__GROUP_PLAIN:
            if (type->kind == ENTITY_DEF_BOOL) {
                if (!cJSON_IsBool(json))
                    return entity_def__fail(L, source, where, "%s must be true or false, got %s", path, got);
                *out = entity_def__json(cJSON_CreateBool(cJSON_IsTrue(json)));
                return 0;
            }
            if (!cJSON_IsNumber(json) || json->valuedouble != 0)
                return entity_def__fail(L, source, where,
                                        "%s must be 0 (no entity): entity ids are allocated at run "
                                        "time, got %s",
                                        path, got);
            *out = entity_def__json(cJSON_CreateNumber(0));
            return 0;
        case ENTITY_DEF__GROUP_STRUCT: {
            const entity_def_struct *st = type->structure;
            if (!cJSON_IsObject(json))
                return entity_def__fail(L, source, where, "%s must be an object with fields of struct %s, got %s", path,
                                        st->name, got);
            for (const cJSON *item = json->child; item != NULL; item = item->next) {
                const char *key = item->string != NULL ? item->string : "";
                bool known = false;
                for (size_t i = 0; i < st->field_count && !known; i++) known = strcmp(st->fields[i].name, key) == 0;
                if (!known)
                    return entity_def__fail(L, source, where, "%s: struct %s has no field '%.80s'", path, st->name,
                                            key);
                for (const cJSON *prev = json->child; prev != item; prev = prev->next) {
                    if (strcmp(prev->string, key) == 0)
                        return entity_def__fail(L, source, where, "%s: field '%s' given twice", path, key);
                }
            }
            cJSON *object = entity_def__json(cJSON_CreateObject());
            for (size_t i = 0; i < st->field_count; i++) {
                const entity_def_field *field = &st->fields[i];
                const cJSON *given = cJSON_GetObjectItemCaseSensitive(json, field->name);
                cJSON *value;
                if (given == NULL) {
                    value = entity_def__json(cJSON_Duplicate(field->default_value, 1));
                } else {
                    entity_def__where(child, "%s.%s", path, field->name);
                    if (entity_def__make_value(L, source, where, child, &field->type, given, &value) != 0) {
                        cJSON_Delete(object);
                        return -1;
                    }
                }
                entity_def__add(object, field->name, value);
            }
            *out = object;
            return 0;
        }
    }
    log_panic("entity_def: bad kind %d", (int)type->kind);
}

/* ---- types ------------------------------------------------------------ */

static void entity_def__type_clear(entity_def_type *type) {
    if (type->element != NULL) {
        entity_def__type_clear(type->element);
        free(type->element);
        type->element = NULL;
    }
}

static int entity_def__kind_by_name(const char *name) {
    for (size_t i = 0; i < ENTITY_DEF__KIND_COUNT; i++) {
        if (i != ENTITY_DEF_STRUCT && strcmp(entity_def__kinds[i].name, name) == 0) return (int)i;
    }
    return -1;
}

static const entity_def_struct *entity_def__struct_by_name(const entity_def_registry *reg, const char *name) {
    size_t lo = 0, hi = reg->struct_count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(reg->structs[mid].name, name);
        if (c == 0) return &reg->structs[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

static int entity_def__resolve_struct(entity_def__loader *L, size_t index);

static int entity_def__parse_quantize(entity_def__loader *L, const char *source, const char *where, const cJSON *q,
                                      const entity_def__kind_info *info, entity_def_type *out) {
    if (!cJSON_IsObject(q))
        return entity_def__fail(L, source, where, "'quantize' must be an object {\"min\", \"max\", \"precision\"}");
    if (entity_def__check_keys(L, source, where, q, entity_def__quantize_keys, NULL, NULL) != 0) return -1;
    double v[3];
    for (int i = 0; i < 3; i++) {
        const char *key = entity_def__quantize_keys[i];
        const cJSON *item = cJSON_GetObjectItemCaseSensitive(q, key);
        if (item == NULL) return entity_def__fail(L, source, where, "quantize needs '%s'", key);
        if (!cJSON_IsNumber(item) || !isfinite(item->valuedouble))
            return entity_def__fail(L, source, where, "quantize.%s must be a finite number", key);
        v[i] = item->valuedouble;
        if (info->bits == 32 && fabs(v[i]) > FLT_MAX)
            return entity_def__fail(L, source, where, "quantize.%s does not fit a float", key);
    }
    char lo[48], hi[48], step[48];
    entity_def__format_double(v[0], lo, sizeof lo);
    entity_def__format_double(v[1], hi, sizeof hi);
    entity_def__format_double(v[2], step, sizeof step);
    if (!(v[1] > v[0]))
        return entity_def__fail(L, source, where, "quantize.max (%s) must be greater than quantize.min (%s)", hi, lo);
    if (!(v[2] > 0)) return entity_def__fail(L, source, where, "quantize.precision (%s) must be greater than 0", step);
    int bits = entity_def_quantization_bits(v[0], v[1], v[2]);
    if (bits < 0 || (unsigned)bits > info->max_quant_bits)
        return entity_def__fail(L, source, where, "quantization [%s, %s] at %s needs more than %u bits for %s", lo, hi,
                                step, info->max_quant_bits, info->name);
    out->quantized = true;
    out->quant_min = v[0];
    out->quant_max = v[1];
    out->quant_precision = v[2];
    out->bits = (unsigned)bits;
    return 0;
}

/* Reads a type from `spec`: an object holding "type" and the type's own
 * keys next to the context's `keys`, or (array elements only) a bare type
 * name. `out` must be zeroed and owned by the caller, who clears it even on
 * failure. */
static int entity_def__parse_type(entity_def__loader *L, const char *source, const char *where, const cJSON *spec,
                                  const char *const *keys, entity_def_type *out) {
    const cJSON *object = NULL;
    const char *type_name;
    if (cJSON_IsString(spec) && spec->valuestring != NULL) {
        type_name = spec->valuestring;
    } else if (cJSON_IsObject(spec)) {
        object = spec;
        const cJSON *item = cJSON_GetObjectItemCaseSensitive(object, "type");
        if (item == NULL) return entity_def__fail(L, source, where, "missing 'type'");
        if (!cJSON_IsString(item) || item->valuestring == NULL)
            return entity_def__fail(L, source, where, "'type' must be a string (a type name)");
        type_name = item->valuestring;
    } else {
        return entity_def__fail(L, source, where, "a type must be a type name or an object with 'type'");
    }

    int kind = entity_def__kind_by_name(type_name);
    const entity_def_struct *st = NULL;
    if (kind < 0) {
        st = entity_def__struct_by_name(L->reg, type_name);
        if (st == NULL)
            return entity_def__fail(L, source, where,
                                    "unknown type '%.80s' (not a built-in type or a struct "
                                    "declared in \"types\")",
                                    type_name);
        kind = ENTITY_DEF_STRUCT;
    }
    const entity_def__kind_info *info = &entity_def__kinds[kind];
    out->kind = (entity_def_kind)kind;
    out->bits = info->bits;
    out->value_count = 1;
    if (object != NULL &&
        entity_def__check_keys(L, source, where, object, keys, entity_def__group_keys[info->group], type_name) != 0)
        return -1;

#define ENTITY_DEF__MEMBER(key) (object != NULL ? cJSON_GetObjectItemCaseSensitive(object, key) : NULL)
    switch (info->group) {
        case ENTITY_DEF__GROUP_INT: {
            const cJSON *item = ENTITY_DEF__MEMBER("bits");
            if (item != NULL) {
                int64_t bits;
                if (!entity_def__json_int(item, 1, 64, &bits))
                    return entity_def__fail(L, source, where, "bit width must be an integer from 1 to 64");
                if ((unsigned)bits > info->bits)
                    return entity_def__fail(L, source, where, "bit width %" PRId64 " does not fit type %s", bits,
                                            info->name);
                out->bits = (unsigned)bits;
            }
            unsigned b = out->bits;
            if (info->is_signed) {
                out->int_min = b == 64 ? INT64_MIN : -(int64_t)(UINT64_C(1) << (b - 1));
                out->int_max = (UINT64_C(1) << (b - 1)) - 1;
            } else {
                out->int_min = 0;
                out->int_max = b == 64 ? UINT64_MAX : (UINT64_C(1) << b) - 1;
            }
            return 0;
        }
        case ENTITY_DEF__GROUP_REAL: {
            const cJSON *item = ENTITY_DEF__MEMBER("quantize");
            if (item == NULL) return 0;
            return entity_def__parse_quantize(L, source, where, item, info, out);
        }
        case ENTITY_DEF__GROUP_SIZED: {
            const cJSON *item = ENTITY_DEF__MEMBER("max_length");
            int64_t len;
            if (item == NULL)
                return entity_def__fail(L, source, where, "type %s needs 'max_length' (1 to %d)", info->name,
                                        ENTITY_DEF_MAX_LENGTH);
            if (!entity_def__json_int(item, 1, ENTITY_DEF_MAX_LENGTH, &len))
                return entity_def__fail(L, source, where, "max_length must be an integer from 1 to %d",
                                        ENTITY_DEF_MAX_LENGTH);
            out->max_length = (uint32_t)len;
            return 0;
        }
        case ENTITY_DEF__GROUP_ARRAY: {
            const cJSON *element = ENTITY_DEF__MEMBER("element");
            const cJSON *count = ENTITY_DEF__MEMBER("count");
            int64_t n;
            if (element == NULL || count == NULL)
                return entity_def__fail(L, source, where, "an array needs 'element' and 'count'");
            if (!entity_def__json_int(count, 1, ENTITY_DEF_MAX_ARRAY, &n))
                return entity_def__fail(L, source, where, "count must be an integer from 1 to %d",
                                        ENTITY_DEF_MAX_ARRAY);
            out->count = (uint32_t)n;
            out->element = xcalloc(1, sizeof *out->element);
            char inner[ENTITY_DEF__WHERE];
            entity_def__where(inner, "%s[]", where);
            if (entity_def__parse_type(L, source, inner, element, entity_def__element_keys, out->element) != 0)
                return -1;
            uint64_t values = (uint64_t)out->count * out->element->value_count;
            if (values > ENTITY_DEF_MAX_VALUES)
                return entity_def__fail(L, source, where,
                                        "the array holds %" PRIu64 " values when flattened, more "
                                        "than %d",
                                        values, ENTITY_DEF_MAX_VALUES);
            out->value_count = (uint32_t)values;
            return 0;
        }
        case ENTITY_DEF__GROUP_PLAIN:
            return 0;
        case ENTITY_DEF__GROUP_STRUCT: {
            /* Only a declared struct's name has this group (kind_by_name
             * never returns ENTITY_DEF_STRUCT). */
            if (st == NULL) log_panic("entity_def: struct type '%s' without its struct", type_name);
            size_t index = (size_t)(st - L->reg->structs);
            entity_def__decl *decl = &L->decls[index];
            if (decl->state == ENTITY_DEF__RESOLVING) {
                /* The stack holds the chain that led here: print it from the
             * first appearance of this struct. */
                char chain[ENTITY_DEF__WHERE * 2] = "";
                size_t first = 0;
                while (first < L->depth && L->stack[first] != index) first++;
                size_t used = 0;
                for (size_t i = first; i < L->depth && used < sizeof chain; i++) {
                    int n = snprintf(chain + used, sizeof chain - used, "%s -> ", L->reg->structs[L->stack[i]].name);
                    used += n > 0 ? (size_t)n : 0;
                }
                if (used < sizeof chain) snprintf(chain + used, sizeof chain - used, "%s", st->name);
                return entity_def__fail(L, source, where, "struct %s contains itself (%s)", st->name, chain);
            }
            if (decl->state == ENTITY_DEF__UNRESOLVED && entity_def__resolve_struct(L, index) != 0) return -1;
            out->structure = st;
            out->value_count = st->value_count;
            return 0;
        }
    }
#undef ENTITY_DEF__MEMBER
    log_panic("entity_def: bad kind %d", kind);
}

/* Reads the fields of struct `index`, resolving the structs they use first. */
static int entity_def__resolve_struct(entity_def__loader *L, size_t index) {
    entity_def__decl *decl = &L->decls[index];
    entity_def_struct *st = &L->reg->structs[index];
    const char *source = decl->source;
    decl->state = ENTITY_DEF__RESOLVING;
    L->stack[L->depth++] = index;

    const cJSON *fields;
    if (entity_def__array(L, source, st->name, decl->json, "fields", ENTITY_DEF_MAX_MEMBERS, &fields) != 0) return -1;
    if (fields == NULL) return entity_def__fail(L, source, st->name, "missing 'fields'");
    size_t n = (size_t)cJSON_GetArraySize(fields);
    if (n == 0) return entity_def__fail(L, source, st->name, "a struct needs at least one field");
    st->fields = xcalloc(n, sizeof *st->fields);
    st->field_count = n;
    size_t i = 0;
    for (const cJSON *item = fields->child; item != NULL; item = item->next, i++) {
        entity_def_field *field = &st->fields[i];
        char where[ENTITY_DEF__WHERE];
        const char *name;
        entity_def__where(where, "%s.fields[%zu]", st->name, i);
        if (entity_def__name(L, source, where, item, &name) != 0) return -1;
        entity_def__where(where, "%s.%s", st->name, name);
        for (size_t j = 0; j < i; j++) {
            if (strcmp(st->fields[j].name, name) == 0)
                return entity_def__fail(L, source, where, "duplicate field name");
        }
        field->name = xstrdup(name);
        if (entity_def__parse_type(L, source, where, item, entity_def__field_keys, &field->type) != 0) return -1;
        /* Checked before the field's default is built, so the defaults never
         * grow past the cap either. */
        uint64_t values = (uint64_t)st->value_count + field->type.value_count;
        if (values > ENTITY_DEF_MAX_VALUES)
            return entity_def__fail(L, source, where, "struct %s holds more than %d values when flattened", st->name,
                                    ENTITY_DEF_MAX_VALUES);
        st->value_count = (uint32_t)values;
        if (entity_def__make_value(L, source, where, "default", &field->type,
                                   cJSON_GetObjectItemCaseSensitive(item, "default"), &field->default_value) != 0)
            return -1;
    }
    L->depth--;
    decl->state = ENTITY_DEF__RESOLVED;
    return 0;
}

/* ---- classes ---------------------------------------------------------- */

static int entity_def__parse_flags(entity_def__loader *L, const char *source, const char *where, const cJSON *item,
                                   entity_def_flags *out) {
    static const char one_of[] = "BASE, BASE_AND_CLIENT, CELL_PRIVATE, CELL_PUBLIC, "
                                 "CELL_PUBLIC_AND_OWN, ALL_CLIENTS, OWN_CLIENT or OTHER_CLIENTS";
    if (item == NULL) return entity_def__fail(L, source, where, "missing 'flags' (one of %s)", one_of);
    if (cJSON_IsArray(item))
        return entity_def__fail(L, source, where, "'flags' must be exactly one flag, got an array of %d",
                                cJSON_GetArraySize(item));
    if (!cJSON_IsString(item) || item->valuestring == NULL)
        return entity_def__fail(L, source, where, "'flags' must be a string, one of %s", one_of);
    for (int i = 0; i < ENTITY_DEF_FLAG_COUNT; i++) {
        if (strcmp(item->valuestring, entity_def__flags[i].name) == 0) {
            *out = (entity_def_flags)i;
            return 0;
        }
    }
    if (strpbrk(item->valuestring, "|,+ ") != NULL)
        return entity_def__fail(L, source, where, "'flags' must be exactly one flag, got '%.80s'", item->valuestring);
    return entity_def__fail(L, source, where, "unknown flag '%.80s' (one of %s)", item->valuestring, one_of);
}

static int entity_def__parse_property(entity_def__loader *L, const char *source, entity_def_class *cls, size_t index,
                                      const cJSON *item) {
    entity_def_property *prop = &cls->properties[index];
    char where[ENTITY_DEF__WHERE];
    const char *name;
    entity_def__where(where, "%s.properties[%zu]", cls->name, index);
    if (entity_def__name(L, source, where, item, &name) != 0) return -1;
    entity_def__where(where, "%s.%s", cls->name, name);
    for (size_t j = 0; j < index; j++) {
        if (strcmp(cls->properties[j].name, name) == 0)
            return entity_def__fail(L, source, where, "duplicate property name (also property %zu)", j);
    }
    prop->name = xstrdup(name);
    prop->id = (uint16_t)index;
    if (entity_def__parse_type(L, source, where, item, entity_def__property_keys, &prop->type) != 0) return -1;
    if (entity_def__parse_flags(L, source, where, cJSON_GetObjectItemCaseSensitive(item, "flags"), &prop->flags) != 0)
        return -1;
    prop->audience = entity_def_property_audience(prop->flags);

    const cJSON *persistent = cJSON_GetObjectItemCaseSensitive(item, "persistent");
    if (persistent != NULL && !cJSON_IsBool(persistent))
        return entity_def__fail(L, source, where, "'persistent' must be true or false");
    prop->persistent = cJSON_IsTrue(persistent);

    const cJSON *detail = cJSON_GetObjectItemCaseSensitive(item, "detail");
    prop->detail = ENTITY_DEF_DETAIL_FAR;
    if (detail != NULL) {
        int found = -1;
        if (cJSON_IsString(detail) && detail->valuestring != NULL) {
            for (int i = 0; i <= ENTITY_DEF_DETAIL_FAR; i++) {
                if (strcmp(detail->valuestring, entity_def__detail_names[i]) == 0) found = i;
            }
        }
        if (found < 0) return entity_def__fail(L, source, where, "'detail' must be \"near\", \"medium\" or \"far\"");
        prop->detail = (entity_def_detail)found;
        /* Detail levels sort other clients by distance; a property no other
         * client receives has no use for one, so a level there is a mistake. */
        if (prop->detail != ENTITY_DEF_DETAIL_FAR && !prop->audience.to_other_clients)
            return entity_def__fail(L, source, where,
                                    "detail '%s' needs a property other clients see "
                                    "(ALL_CLIENTS or OTHER_CLIENTS), not %s",
                                    entity_def__detail_names[found], entity_def__flags[prop->flags].name);
    }
    return entity_def__make_value(L, source, where, "default", &prop->type,
                                  cJSON_GetObjectItemCaseSensitive(item, "default"), &prop->default_value);
}

static int entity_def__parse_method(entity_def__loader *L, const char *source, entity_def_class *cls,
                                    entity_def_part part, size_t index, const cJSON *item) {
    entity_def_method *method = &cls->methods[part][index];
    bool is_event = cls == &L->reg->events;
    char where[ENTITY_DEF__WHERE];
    const char *name;
    if (is_event)
        entity_def__where(where, "events[%zu]", index);
    else
        entity_def__where(where, "%s.%s[%zu]", cls->name, entity_def__part_sections[part], index);
    if (entity_def__name(L, source, where, item, &name) != 0) return -1;
    entity_def__where(where, "%s.%s", cls->name, name);
    for (size_t j = 0; j < index; j++) {
        if (strcmp(cls->methods[part][j].name, name) != 0) continue;
        if (is_event) return entity_def__fail(L, source, where, "duplicate event name (also event %zu)", j);
        return entity_def__fail(L, source, where, "duplicate %s method name (also method %zu)",
                                entity_def__part_names[part], j);
    }
    method->name = xstrdup(name);
    method->id = (uint16_t)index;
    method->part = part;
    const cJSON *exposed = cJSON_GetObjectItemCaseSensitive(item, "exposed");
    if (is_event && exposed != NULL)
        return entity_def__fail(L, source, where, "events cannot be exposed: only the server fires them");
    if (part == ENTITY_DEF_PART_CLIENT && exposed != NULL)
        return entity_def__fail(L, source, where,
                                "client methods cannot be exposed: only base and cell methods "
                                "may be called by a client");
    if (entity_def__check_keys(
            L, source, where, item,
            part == ENTITY_DEF_PART_CLIENT ? entity_def__client_method_keys : entity_def__method_keys, NULL, NULL) != 0)
        return -1;
    if (exposed != NULL && !cJSON_IsBool(exposed))
        return entity_def__fail(L, source, where, "'exposed' must be true or false");
    method->exposed = cJSON_IsTrue(exposed);

    const cJSON *args;
    if (entity_def__array(L, source, where, item, "args", ENTITY_DEF_MAX_MEMBERS, &args) != 0) return -1;
    size_t n = args != NULL ? (size_t)cJSON_GetArraySize(args) : 0;
    method->args = n > 0 ? xcalloc(n, sizeof *method->args) : NULL;
    method->arg_count = n;
    size_t i = 0;
    for (const cJSON *arg_json = args != NULL ? args->child : NULL; arg_json != NULL && i < n;
         arg_json = arg_json->next, i++) {
        entity_def_arg *arg = &method->args[i];
        char arg_where[ENTITY_DEF__WHERE];
        const char *arg_name;
        entity_def__where(arg_where, "%s.%s(args[%zu])", cls->name, name, i);
        if (entity_def__name(L, source, arg_where, arg_json, &arg_name) != 0) return -1;
        entity_def__where(arg_where, "%s.%s(%s)", cls->name, name, arg_name);
        for (size_t j = 0; j < i; j++) {
            if (strcmp(method->args[j].name, arg_name) == 0)
                return entity_def__fail(L, source, arg_where, "duplicate argument name");
        }
        arg->name = xstrdup(arg_name);
        if (entity_def__parse_type(L, source, arg_where, arg_json, entity_def__arg_keys, &arg->type) != 0) return -1;
    }
    /* The arguments as the properties of a class of their own, so that an
     * entity_state holds a call's arguments with the same checked setters
     * and the same all-or-nothing codec as properties. The properties borrow
     * the arguments' names and types. */
    entity_def_class *args_class = &method->args_class;
    args_class->name = method->name;
    args_class->id = UINT16_MAX;
    args_class->source = source;
    args_class->property_count = n;
    args_class->properties = n > 0 ? xcalloc(n, sizeof *args_class->properties) : NULL;
    for (size_t a = 0; a < n; a++) {
        entity_def_property *prop = &args_class->properties[a];
        prop->name = method->args[a].name;
        prop->id = (uint16_t)a;
        prop->type = method->args[a].type;
        prop->detail = ENTITY_DEF_DETAIL_FAR;
        prop->default_value = entity_def__zero(&prop->type);
    }
    return 0;
}

static int entity_def__parse_class(entity_def__loader *L, const char *source, size_t id, size_t position,
                                   const cJSON *json) {
    entity_def_class *cls = &L->reg->classes[id];
    char where[ENTITY_DEF__WHERE];
    const char *name;
    entity_def__where(where, "entities[%zu]", position);
    if (entity_def__name(L, source, where, json, &name) != 0) return -1;
    for (size_t j = 0; j < id; j++) {
        if (strcmp(L->reg->classes[j].name, name) == 0)
            return entity_def__fail(L, source, name, "duplicate class name (also declared in %s)",
                                    L->reg->classes[j].source);
    }
    cls->name = xstrdup(name);
    cls->id = (uint16_t)id;
    cls->source = source;
    if (entity_def__check_keys(L, source, name, json, entity_def__class_keys, NULL, NULL) != 0) return -1;

    const cJSON *props;
    if (entity_def__array(L, source, name, json, "properties", ENTITY_DEF_MAX_MEMBERS, &props) != 0) return -1;
    size_t n = props != NULL ? (size_t)cJSON_GetArraySize(props) : 0;
    cls->properties = n > 0 ? xcalloc(n, sizeof *cls->properties) : NULL;
    cls->property_count = n;
    size_t i = 0;
    /* i < n always holds (n counts the children); said for the analyzer. */
    for (const cJSON *item = props != NULL ? props->child : NULL; item != NULL && i < n; item = item->next, i++) {
        if (entity_def__parse_property(L, source, cls, i, item) != 0) return -1;
    }

    for (int part = 0; part < ENTITY_DEF_PART_COUNT; part++) {
        const cJSON *methods;
        if (entity_def__array(L, source, name, json, entity_def__part_sections[part], ENTITY_DEF_MAX_MEMBERS,
                              &methods) != 0)
            return -1;
        size_t count = methods != NULL ? (size_t)cJSON_GetArraySize(methods) : 0;
        cls->methods[part] = count > 0 ? xcalloc(count, sizeof *cls->methods[part]) : NULL;
        cls->method_count[part] = count;
        i = 0;
        for (const cJSON *item = methods != NULL ? methods->child : NULL; item != NULL && i < count;
             item = item->next, i++) {
            if (entity_def__parse_method(L, source, cls, (entity_def_part)part, i, item) != 0) return -1;
        }
    }
    return 0;
}

/* ---- the digest ------------------------------------------------------- */

static void entity_def__h_bytes(crypto_generichash_state *h, const void *data, size_t len) {
    crypto_generichash_update(h, data, len);
}

static void entity_def__h_u8(crypto_generichash_state *h, uint8_t v) { entity_def__h_bytes(h, &v, 1); }

static void entity_def__h_u32(crypto_generichash_state *h, uint32_t v) {
    uint8_t b[4];
    for (int i = 0; i < 4; i++) b[i] = (uint8_t)(v >> (8 * i));
    entity_def__h_bytes(h, b, sizeof b);
}

static void entity_def__h_u64(crypto_generichash_state *h, uint64_t v) {
    uint8_t b[8];
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(v >> (8 * i));
    entity_def__h_bytes(h, b, sizeof b);
}

static void entity_def__h_double(crypto_generichash_state *h, double v) {
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    entity_def__h_u64(h, bits);
}

static void entity_def__h_str(crypto_generichash_state *h, const char *s) {
    size_t len = strlen(s);
    entity_def__h_u32(h, (uint32_t)len);
    entity_def__h_bytes(h, s, len);
}

static void entity_def__h_type(crypto_generichash_state *h, const entity_def_type *type) {
    const entity_def__kind_info *info = &entity_def__kinds[type->kind];
    entity_def__h_u8(h, (uint8_t)type->kind);
    switch (info->group) {
        case ENTITY_DEF__GROUP_INT:
            entity_def__h_u32(h, type->bits);
            break;
        case ENTITY_DEF__GROUP_REAL:
            entity_def__h_u8(h, type->quantized);
            if (type->quantized) {
                entity_def__h_double(h, type->quant_min);
                entity_def__h_double(h, type->quant_max);
                entity_def__h_double(h, type->quant_precision);
            }
            break;
        case ENTITY_DEF__GROUP_SIZED:
            entity_def__h_u32(h, type->max_length);
            break;
        case ENTITY_DEF__GROUP_ARRAY:
            entity_def__h_u32(h, type->count);
            entity_def__h_type(h, type->element);
            break;
        case ENTITY_DEF__GROUP_PLAIN:
            break;
        case ENTITY_DEF__GROUP_STRUCT:
            entity_def__h_str(h, type->structure->name);
            break;
    }
}

static void entity_def__h_value(crypto_generichash_state *h, const entity_def_type *type, const cJSON *value) {
    const entity_def__kind_info *info = &entity_def__kinds[type->kind];
    switch (info->group) {
        case ENTITY_DEF__GROUP_INT:
            if (info->is_signed)
                entity_def__h_u64(h, (uint64_t)(int64_t)value->valuedouble);
            else
                entity_def__h_u64(h, (uint64_t)value->valuedouble);
            break;
        case ENTITY_DEF__GROUP_REAL:
            if (info->components == 1) {
                entity_def__h_double(h, value->valuedouble);
            } else {
                for (const cJSON *item = value->child; item != NULL; item = item->next)
                    entity_def__h_double(h, item->valuedouble);
            }
            break;
        case ENTITY_DEF__GROUP_SIZED:
            entity_def__h_str(h, value->valuestring);
            break;
        case ENTITY_DEF__GROUP_ARRAY:
            for (const cJSON *item = value->child; item != NULL; item = item->next)
                entity_def__h_value(h, type->element, item);
            break;
        case ENTITY_DEF__GROUP_PLAIN:
            if (type->kind == ENTITY_DEF_BOOL)
                entity_def__h_u8(h, cJSON_IsTrue(value));
            else
                entity_def__h_u64(h, 0);
            break;
        case ENTITY_DEF__GROUP_STRUCT:
            for (size_t i = 0; i < type->structure->field_count; i++) {
                const entity_def_field *field = &type->structure->fields[i];
                entity_def__h_value(h, &field->type, cJSON_GetObjectItemCaseSensitive(value, field->name));
            }
            break;
    }
}

/* A method's (or an event's) arguments: u32 count, per arg str name, TYPE. */
static void entity_def__h_args(crypto_generichash_state *h, const entity_def_method *method) {
    entity_def__h_u32(h, (uint32_t)method->arg_count);
    for (size_t a = 0; a < method->arg_count; a++) {
        entity_def__h_str(h, method->args[a].name);
        entity_def__h_type(h, &method->args[a].type);
    }
}

static void entity_def__compute_digest(entity_def_registry *reg) {
    if (sodium_init() < 0) log_panic("entity_def: libsodium failed to initialise");
    crypto_generichash_state h;
    crypto_generichash_init(&h, NULL, 0, ENTITY_DEF_DIGEST_BYTES);
    entity_def__h_str(&h, "tessera-entity-def/1");
    entity_def__h_u32(&h, (uint32_t)reg->struct_count);
    for (size_t s = 0; s < reg->struct_count; s++) {
        const entity_def_struct *st = &reg->structs[s];
        entity_def__h_str(&h, st->name);
        entity_def__h_u32(&h, (uint32_t)st->field_count);
        for (size_t f = 0; f < st->field_count; f++) {
            entity_def__h_str(&h, st->fields[f].name);
            entity_def__h_type(&h, &st->fields[f].type);
            entity_def__h_value(&h, &st->fields[f].type, st->fields[f].default_value);
        }
    }
    entity_def__h_u32(&h, (uint32_t)reg->class_count);
    for (size_t c = 0; c < reg->class_count; c++) {
        const entity_def_class *cls = &reg->classes[c];
        entity_def__h_str(&h, cls->name);
        entity_def__h_u32(&h, (uint32_t)cls->property_count);
        for (size_t p = 0; p < cls->property_count; p++) {
            const entity_def_property *prop = &cls->properties[p];
            entity_def__h_str(&h, prop->name);
            entity_def__h_type(&h, &prop->type);
            entity_def__h_u8(&h, (uint8_t)prop->flags);
            entity_def__h_u8(&h, prop->persistent);
            entity_def__h_u8(&h, (uint8_t)prop->detail);
            entity_def__h_value(&h, &prop->type, prop->default_value);
        }
        for (int part = 0; part < ENTITY_DEF_PART_COUNT; part++) {
            entity_def__h_u32(&h, (uint32_t)cls->method_count[part]);
            for (size_t m = 0; m < cls->method_count[part]; m++) {
                const entity_def_method *method = &cls->methods[part][m];
                entity_def__h_str(&h, method->name);
                entity_def__h_u8(&h, method->exposed);
                entity_def__h_args(&h, method);
            }
        }
    }
    const entity_def_class *events = &reg->events;
    if (events->method_count[ENTITY_DEF_PART_CLIENT] > 0) {
        entity_def__h_str(&h, "events");
        entity_def__h_u32(&h, (uint32_t)events->method_count[ENTITY_DEF_PART_CLIENT]);
        for (size_t e = 0; e < events->method_count[ENTITY_DEF_PART_CLIENT]; e++) {
            entity_def__h_str(&h, events->methods[ENTITY_DEF_PART_CLIENT][e].name);
            entity_def__h_args(&h, &events->methods[ENTITY_DEF_PART_CLIENT][e]);
        }
    }
    crypto_generichash_final(&h, reg->digest, ENTITY_DEF_DIGEST_BYTES);
    sodium_bin2hex(reg->digest_hex, sizeof reg->digest_hex, reg->digest, ENTITY_DEF_DIGEST_BYTES);
}

/* ---- loading ---------------------------------------------------------- */

static int entity_def__compare_decls(const void *a, const void *b) {
    const entity_def__decl *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    if (c != 0) return c;
    return x->order < y->order ? -1 : x->order > y->order;
}

/* Parses `text` (len bytes, NUL-terminated) as the document `source`.
 * Returns the root, or NULL with the message in L->err. */
static cJSON *entity_def__parse_document(entity_def__loader *L, const char *source, const char *text, size_t len) {
    char problem[192];
    cJSON *root = json_file_parse(text, len, problem, sizeof problem);
    if (root == NULL) {
        entity_def__report(L, source, NULL, "%s", problem);
        return NULL;
    }
    if (!cJSON_IsObject(root)) {
        entity_def__report(L, source, NULL, "the top level must be a JSON object");
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}

/* Builds L->reg from the parsed documents in L->roots: the three passes
 * described at the top of the file, then the digest. */
static int entity_def__build(entity_def__loader *L) {
    entity_def_registry *reg = L->reg;
    size_t struct_count = 0, class_count = 0, event_count = 0;
    for (size_t s = 0; s < reg->source_count; s++) {
        const char *source = reg->sources[s];
        const cJSON *root = L->roots[s];
        if (entity_def__check_keys(L, source, NULL, root, entity_def__document_keys, NULL, NULL) != 0) return -1;
        const cJSON *format = cJSON_GetObjectItemCaseSensitive(root, "format");
        if (format != NULL && !(cJSON_IsNumber(format) && format->valuedouble == ENTITY_DEF__FORMAT))
            return entity_def__fail(L, source, NULL, "'format' must be %d", ENTITY_DEF__FORMAT);
        const cJSON *types, *entities, *events;
        if (entity_def__array(L, source, NULL, root, "types", ENTITY_DEF__MAX_CLASSES, &types) != 0 ||
            entity_def__array(L, source, NULL, root, "entities", ENTITY_DEF__MAX_CLASSES, &entities) != 0 ||
            entity_def__array(L, source, NULL, root, "events", ENTITY_DEF_MAX_EVENTS, &events) != 0)
            return -1;
        struct_count += types != NULL ? (size_t)cJSON_GetArraySize(types) : 0;
        class_count += entities != NULL ? (size_t)cJSON_GetArraySize(entities) : 0;
        event_count += events != NULL ? (size_t)cJSON_GetArraySize(events) : 0;
    }
    if (event_count > ENTITY_DEF_MAX_EVENTS)
        return entity_def__fail(L, reg->sources[0], NULL, "more than %d events in all", ENTITY_DEF_MAX_EVENTS);
    if (struct_count > ENTITY_DEF__MAX_CLASSES)
        return entity_def__fail(L, reg->sources[0], NULL, "more than %d structs in all", ENTITY_DEF__MAX_CLASSES);
    if (class_count > ENTITY_DEF__MAX_CLASSES)
        return entity_def__fail(L, reg->sources[0], NULL, "more than %d classes in all", ENTITY_DEF__MAX_CLASSES);

    /* Pass 1: struct declarations, sorted by name. */
    L->decls = xcalloc(struct_count > 0 ? struct_count : 1, sizeof *L->decls);
    L->stack = xcalloc(struct_count > 0 ? struct_count : 1, sizeof *L->stack);
    size_t k = 0;
    for (size_t s = 0; s < reg->source_count; s++) {
        const cJSON *types = cJSON_GetObjectItemCaseSensitive(L->roots[s], "types");
        size_t position = 0;
        for (const cJSON *item = types != NULL ? types->child : NULL; item != NULL; item = item->next, position++) {
            char where[ENTITY_DEF__WHERE];
            const char *name;
            entity_def__where(where, "types[%zu]", position);
            if (entity_def__name(L, reg->sources[s], where, item, &name) != 0) return -1;
            if (entity_def__check_keys(L, reg->sources[s], name, item, entity_def__struct_keys, NULL, NULL) != 0)
                return -1;
            if (entity_def__kind_by_name(name) >= 0 || strcmp(name, "struct") == 0)
                return entity_def__fail(L, reg->sources[s], name, "a struct cannot take the name of a built-in type");
            L->decls[k] = (entity_def__decl){item, reg->sources[s], name, k, ENTITY_DEF__UNRESOLVED};
            k++;
        }
    }
    qsort(L->decls, struct_count, sizeof *L->decls, entity_def__compare_decls);
    for (size_t i = 1; i < struct_count; i++) {
        if (strcmp(L->decls[i].name, L->decls[i - 1].name) == 0)
            return entity_def__fail(L, L->decls[i].source, L->decls[i].name,
                                    "duplicate struct name (also declared in %s)", L->decls[i - 1].source);
    }
    reg->structs = xcalloc(struct_count > 0 ? struct_count : 1, sizeof *reg->structs);
    reg->struct_count = struct_count;
    for (size_t i = 0; i < struct_count; i++) {
        reg->structs[i].name = xstrdup(L->decls[i].name);
        reg->structs[i].index = (uint16_t)i;
    }

    /* Pass 2: struct fields, depth first. */
    for (size_t i = 0; i < struct_count; i++) {
        if (L->decls[i].state == ENTITY_DEF__UNRESOLVED && entity_def__resolve_struct(L, i) != 0) return -1;
    }

    /* Pass 3: classes, in document order. */
    reg->classes = xcalloc(class_count > 0 ? class_count : 1, sizeof *reg->classes);
    reg->class_count = class_count;
    k = 0;
    for (size_t s = 0; s < reg->source_count; s++) {
        const cJSON *entities = cJSON_GetObjectItemCaseSensitive(L->roots[s], "entities");
        size_t position = 0;
        for (const cJSON *item = entities != NULL ? entities->child : NULL; item != NULL;
             item = item->next, position++, k++) {
            if (entity_def__parse_class(L, reg->sources[s], k, position, item) != 0) return -1;
        }
    }

    /* Pass 4: the game events, in document order. */
    entity_def_class *events = &reg->events;
    events->name = xstrdup("events");
    events->id = UINT16_MAX;
    events->source = reg->sources[0];
    events->methods[ENTITY_DEF_PART_CLIENT] = event_count > 0 ? xcalloc(event_count, sizeof(entity_def_method)) : NULL;
    events->method_count[ENTITY_DEF_PART_CLIENT] = event_count;
    k = 0;
    for (size_t s = 0; s < reg->source_count; s++) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(L->roots[s], "events");
        for (const cJSON *item = list != NULL ? list->child : NULL; item != NULL; item = item->next, k++) {
            if (entity_def__parse_method(L, reg->sources[s], events, ENTITY_DEF_PART_CLIENT, k, item) != 0) return -1;
        }
    }
    entity_def__compute_digest(reg);
    return 0;
}

/* Loads the documents `texts` (NULL entries are files to read at
 * `sources`) as one registry. Takes no ownership of its arguments. */
static int entity_def__load(const char *const *sources, const char *const *texts, size_t count,
                            entity_def_registry **out, char *err, size_t errlen) {
    entity_def__loader loader = {.err = err, .errlen = errlen};
    entity_def__loader *L = &loader;
    L->reg = xcalloc(1, sizeof *L->reg);
    L->reg->sources = xcalloc(count, sizeof *L->reg->sources);
    L->reg->source_count = count;
    L->roots = xcalloc(count, sizeof(cJSON *));
    int rc = 0;
    for (size_t i = 0; i < count && rc == 0; i++) {
        L->reg->sources[i] = xstrdup(sources[i]);
        if (texts[i] != NULL) {
            L->roots[i] = entity_def__parse_document(L, sources[i], texts[i], strlen(texts[i]));
        } else {
            char problem[192];
            size_t len;
            char *text = json_file_read(sources[i], &len, problem, sizeof problem);
            if (text == NULL) {
                rc = entity_def__fail(L, sources[i], NULL, "%s", problem);
                break;
            }
            L->roots[i] = entity_def__parse_document(L, sources[i], text, len);
            free(text);
        }
        if (rc == 0 && L->roots[i] == NULL) rc = -1;
    }
    if (rc == 0) rc = entity_def__build(L);
    for (size_t i = 0; i < count; i++) cJSON_Delete(L->roots[i]);
    free(L->roots);
    free(L->decls);
    free(L->stack);
    if (rc != 0) {
        entity_def_registry_free(L->reg);
        *out = NULL;
        return -1;
    }
    if (err != NULL && errlen > 0) err[0] = '\0';
    *out = L->reg;
    return 0;
}

int entity_def_load_string(const char *text, const char *source, entity_def_registry **out, char *err, size_t errlen) {
    if (source == NULL) source = "<string>";
    if (text == NULL || out == NULL) {
        if (err != NULL && errlen > 0) snprintf(err, errlen, "%s: bad arguments", source);
        if (out != NULL) *out = NULL;
        return -1;
    }
    return entity_def__load(&source, &text, 1, out, err, errlen);
}

int entity_def_load_file(const char *path, entity_def_registry **out, char *err, size_t errlen) {
    const char *text = NULL;
    if (path == NULL || out == NULL) {
        if (err != NULL && errlen > 0) snprintf(err, errlen, "entity definitions: bad arguments");
        if (out != NULL) *out = NULL;
        return -1;
    }
    return entity_def__load(&path, &text, 1, out, err, errlen);
}

static int entity_def__compare_strings(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int entity_def_load_directory(const char *path, entity_def_registry **out, char *err, size_t errlen) {
    if (path == NULL || out == NULL) {
        if (err != NULL && errlen > 0) snprintf(err, errlen, "entity definitions: bad arguments");
        if (out != NULL) *out = NULL;
        return -1;
    }
    *out = NULL;
    DIR *dir = opendir(path);
    if (dir == NULL) {
        if (err != NULL && errlen > 0) snprintf(err, errlen, "%s: cannot open directory: %s", path, strerror(errno));
        return -1;
    }
    char **paths = NULL;
    size_t count = 0, cap = 0;
    struct dirent *entry;
    while ((entry = readdir(dir)) != NULL) {
        size_t len = strlen(entry->d_name);
        if (entry->d_name[0] == '.' || len <= 5 || strcmp(entry->d_name + len - 5, ".json") != 0) continue;
        size_t full_len = strlen(path) + 1 + len + 1;
        char *full = xmalloc(full_len);
        snprintf(full, full_len, "%s/%s", path, entry->d_name);
        struct stat st;
        if (stat(full, &st) != 0 || !S_ISREG(st.st_mode)) {
            free(full);
            continue;
        }
        if (count == cap) {
            cap = cap > 0 ? cap * 2 : 8;
            paths = xrealloc(paths, cap * sizeof *paths);
        }
        paths[count++] = full;
    }
    closedir(dir);
    if (count == 0) {
        if (err != NULL && errlen > 0) snprintf(err, errlen, "%s: no *.json files in the directory", path);
        free(paths);
        return -1;
    }
    qsort(paths, count, sizeof *paths, entity_def__compare_strings);
    const char **texts = xcalloc(count, sizeof *texts); /* all NULL: read the files */
    int rc = entity_def__load((const char *const *)paths, texts, count, out, err, errlen);
    free(texts);
    for (size_t i = 0; i < count; i++) free(paths[i]);
    free(paths);
    return rc;
}

/* Frees the methods of every part of `cls` (not the class itself). */
static void entity_def__free_methods(entity_def_class *cls) {
    for (int part = 0; part < ENTITY_DEF_PART_COUNT; part++) {
        for (size_t m = 0; m < cls->method_count[part]; m++) {
            entity_def_method *method = &cls->methods[part][m];
            for (size_t a = 0; a < method->arg_count; a++) {
                free(method->args[a].name);
                entity_def__type_clear(&method->args[a].type);
            }
            /* Its properties borrow the arguments' names and types. */
            for (size_t a = 0; a < method->args_class.property_count; a++)
                cJSON_Delete(method->args_class.properties[a].default_value);
            free(method->args_class.properties);
            free(method->args);
            free(method->name);
        }
        free(cls->methods[part]);
    }
}

void entity_def_registry_free(entity_def_registry *reg) {
    if (reg == NULL) return;
    for (size_t s = 0; s < reg->struct_count; s++) {
        entity_def_struct *st = &reg->structs[s];
        for (size_t f = 0; f < st->field_count; f++) {
            free(st->fields[f].name);
            entity_def__type_clear(&st->fields[f].type);
            cJSON_Delete(st->fields[f].default_value);
        }
        free(st->fields);
        free(st->name);
    }
    free(reg->structs);
    for (size_t c = 0; c < reg->class_count; c++) {
        entity_def_class *cls = &reg->classes[c];
        for (size_t p = 0; p < cls->property_count; p++) {
            free(cls->properties[p].name);
            entity_def__type_clear(&cls->properties[p].type);
            cJSON_Delete(cls->properties[p].default_value);
        }
        free(cls->properties);
        entity_def__free_methods(cls);
        free(cls->name);
    }
    free(reg->classes);
    entity_def__free_methods(&reg->events);
    free(reg->events.name);
    for (size_t s = 0; s < reg->source_count; s++) free(reg->sources[s]);
    free(reg->sources);
    free(reg);
}

/* ---- describe --------------------------------------------------------- */

/* A number as a raw item holding its exact text. cJSON's printer tries 15
 * digits and keeps them when they read back within a relative epsilon, which
 * drops the last bits of some doubles (2^53 prints as 9.00719925474099e+15)
 * and would break the round trip. */
static cJSON *entity_def__number(double value) {
    char text[48];
    entity_def__format_double(value, text, sizeof text);
    return entity_def__json(cJSON_CreateRaw(text));
}

/* A copy of a normalised value with every number made exact. */
static cJSON *entity_def__exact_copy(const cJSON *value) {
    if (cJSON_IsNumber(value)) return entity_def__number(value->valuedouble);
    if (cJSON_IsArray(value)) {
        cJSON *array = entity_def__json(cJSON_CreateArray());
        for (const cJSON *item = value->child; item != NULL; item = item->next)
            entity_def__append(array, entity_def__exact_copy(item));
        return array;
    }
    if (cJSON_IsObject(value)) {
        cJSON *object = entity_def__json(cJSON_CreateObject());
        for (const cJSON *item = value->child; item != NULL; item = item->next)
            entity_def__add(object, item->string, entity_def__exact_copy(item));
        return object;
    }
    return entity_def__json(cJSON_Duplicate(value, 0)); /* string, true, false */
}

/* True when the type is fully said by its name (no keys of its own). */
static bool entity_def__type_is_bare(const entity_def_type *type) {
    const entity_def__kind_info *info = &entity_def__kinds[type->kind];
    switch (info->group) {
        case ENTITY_DEF__GROUP_INT:
            return type->bits == info->bits;
        case ENTITY_DEF__GROUP_REAL:
            return !type->quantized;
        case ENTITY_DEF__GROUP_SIZED:
        case ENTITY_DEF__GROUP_ARRAY:
            return false;
        case ENTITY_DEF__GROUP_PLAIN:
        case ENTITY_DEF__GROUP_STRUCT:
            return true;
    }
    return false;
}

static const char *entity_def__type_name(const entity_def_type *type) {
    return type->kind == ENTITY_DEF_STRUCT ? type->structure->name : entity_def__kinds[type->kind].name;
}

static cJSON *entity_def__describe_element(const entity_def_type *type);

/* Adds "type" and the type's own keys to `object`. */
static void entity_def__describe_type(cJSON *object, const entity_def_type *type) {
    const entity_def__kind_info *info = &entity_def__kinds[type->kind];
    entity_def__add(object, "type", cJSON_CreateString(entity_def__type_name(type)));
    switch (info->group) {
        case ENTITY_DEF__GROUP_INT:
            if (type->bits != info->bits) entity_def__add(object, "bits", entity_def__number(type->bits));
            break;
        case ENTITY_DEF__GROUP_REAL:
            if (type->quantized) {
                cJSON *q = entity_def__json(cJSON_CreateObject());
                entity_def__add(q, "min", entity_def__number(type->quant_min));
                entity_def__add(q, "max", entity_def__number(type->quant_max));
                entity_def__add(q, "precision", entity_def__number(type->quant_precision));
                entity_def__add(object, "quantize", q);
            }
            break;
        case ENTITY_DEF__GROUP_SIZED:
            entity_def__add(object, "max_length", entity_def__number(type->max_length));
            break;
        case ENTITY_DEF__GROUP_ARRAY:
            entity_def__add(object, "element", entity_def__describe_element(type->element));
            entity_def__add(object, "count", entity_def__number(type->count));
            break;
        case ENTITY_DEF__GROUP_PLAIN:
        case ENTITY_DEF__GROUP_STRUCT:
            break;
    }
}

static cJSON *entity_def__describe_element(const entity_def_type *type) {
    if (entity_def__type_is_bare(type)) return entity_def__json(cJSON_CreateString(entity_def__type_name(type)));
    cJSON *object = entity_def__json(cJSON_CreateObject());
    entity_def__describe_type(object, type);
    return object;
}

/* Adds "default" unless it is the implied one. */
static void entity_def__describe_default(cJSON *object, const entity_def_type *type, const cJSON *value) {
    cJSON *zero = entity_def__zero(type);
    if (!entity_def__json_equal(zero, value)) entity_def__add(object, "default", entity_def__exact_copy(value));
    cJSON_Delete(zero);
}

/* A method (or an event) as the loader reads it. */
static cJSON *entity_def__describe_method(const entity_def_method *method) {
    cJSON *json = entity_def__json(cJSON_CreateObject());
    entity_def__add(json, "name", cJSON_CreateString(method->name));
    if (method->exposed) entity_def__add(json, "exposed", cJSON_CreateTrue());
    if (method->arg_count > 0) {
        cJSON *args = entity_def__json(cJSON_CreateArray());
        for (size_t a = 0; a < method->arg_count; a++) {
            cJSON *arg = entity_def__json(cJSON_CreateObject());
            entity_def__add(arg, "name", cJSON_CreateString(method->args[a].name));
            entity_def__describe_type(arg, &method->args[a].type);
            entity_def__append(args, arg);
        }
        entity_def__add(json, "args", args);
    }
    return json;
}

static cJSON *entity_def__describe_document(const entity_def_registry *reg) {
    cJSON *doc = entity_def__json(cJSON_CreateObject());
    entity_def__add(doc, "format", entity_def__number(ENTITY_DEF__FORMAT));
    if (reg->struct_count > 0) {
        cJSON *types = entity_def__json(cJSON_CreateArray());
        for (size_t s = 0; s < reg->struct_count; s++) {
            const entity_def_struct *st = &reg->structs[s];
            cJSON *decl = entity_def__json(cJSON_CreateObject());
            entity_def__add(decl, "name", cJSON_CreateString(st->name));
            cJSON *fields = entity_def__json(cJSON_CreateArray());
            for (size_t f = 0; f < st->field_count; f++) {
                const entity_def_field *field = &st->fields[f];
                cJSON *item = entity_def__json(cJSON_CreateObject());
                entity_def__add(item, "name", cJSON_CreateString(field->name));
                entity_def__describe_type(item, &field->type);
                entity_def__describe_default(item, &field->type, field->default_value);
                entity_def__append(fields, item);
            }
            entity_def__add(decl, "fields", fields);
            entity_def__append(types, decl);
        }
        entity_def__add(doc, "types", types);
    }
    cJSON *entities = entity_def__json(cJSON_CreateArray());
    for (size_t c = 0; c < reg->class_count; c++) {
        const entity_def_class *cls = &reg->classes[c];
        cJSON *item = entity_def__json(cJSON_CreateObject());
        entity_def__add(item, "name", cJSON_CreateString(cls->name));
        if (cls->property_count > 0) {
            cJSON *props = entity_def__json(cJSON_CreateArray());
            for (size_t p = 0; p < cls->property_count; p++) {
                const entity_def_property *prop = &cls->properties[p];
                cJSON *json = entity_def__json(cJSON_CreateObject());
                entity_def__add(json, "name", cJSON_CreateString(prop->name));
                entity_def__describe_type(json, &prop->type);
                entity_def__add(json, "flags", cJSON_CreateString(entity_def__flags[prop->flags].name));
                if (prop->persistent) entity_def__add(json, "persistent", cJSON_CreateTrue());
                if (prop->detail != ENTITY_DEF_DETAIL_FAR)
                    entity_def__add(json, "detail", cJSON_CreateString(entity_def__detail_names[prop->detail]));
                entity_def__describe_default(json, &prop->type, prop->default_value);
                entity_def__append(props, json);
            }
            entity_def__add(item, "properties", props);
        }
        for (int part = 0; part < ENTITY_DEF_PART_COUNT; part++) {
            if (cls->method_count[part] == 0) continue;
            cJSON *methods = entity_def__json(cJSON_CreateArray());
            for (size_t m = 0; m < cls->method_count[part]; m++)
                entity_def__append(methods, entity_def__describe_method(&cls->methods[part][m]));
            entity_def__add(item, entity_def__part_sections[part], methods);
        }
        entity_def__append(entities, item);
    }
    entity_def__add(doc, "entities", entities);
    const entity_def_class *events = &reg->events;
    if (events->method_count[ENTITY_DEF_PART_CLIENT] > 0) {
        cJSON *list = entity_def__json(cJSON_CreateArray());
        for (size_t e = 0; e < events->method_count[ENTITY_DEF_PART_CLIENT]; e++)
            entity_def__append(list, entity_def__describe_method(&events->methods[ENTITY_DEF_PART_CLIENT][e]));
        entity_def__add(doc, "events", list);
    }
    return doc;
}

char *entity_def_registry_describe(const entity_def_registry *reg) {
    cJSON *doc = entity_def__describe_document(reg);
    char *printed = cJSON_PrintUnformatted(doc);
    cJSON_Delete(doc);
    if (printed == NULL) log_panic("entity_def: out of memory printing the description");
    char *text = xstrdup(printed);
    cJSON_free(printed);
    return text;
}

/* ---- lookup ----------------------------------------------------------- */

const uint8_t *entity_def_registry_digest(const entity_def_registry *reg) { return reg->digest; }

const char *entity_def_registry_digest_hex(const entity_def_registry *reg) { return reg->digest_hex; }

size_t entity_def_registry_class_count(const entity_def_registry *reg) { return reg->class_count; }

const entity_def_class *entity_def_registry_class(const entity_def_registry *reg, uint16_t id) {
    return id < reg->class_count ? &reg->classes[id] : NULL;
}

const entity_def_class *entity_def_registry_find_class(const entity_def_registry *reg, const char *name) {
    for (size_t i = 0; i < reg->class_count; i++) {
        if (strcmp(reg->classes[i].name, name) == 0) return &reg->classes[i];
    }
    return NULL;
}

size_t entity_def_registry_struct_count(const entity_def_registry *reg) { return reg->struct_count; }

const entity_def_struct *entity_def_registry_struct(const entity_def_registry *reg, size_t index) {
    return index < reg->struct_count ? &reg->structs[index] : NULL;
}

const entity_def_struct *entity_def_registry_find_struct(const entity_def_registry *reg, const char *name) {
    return entity_def__struct_by_name(reg, name);
}

const entity_def_property *entity_def_class_property(const entity_def_class *cls, uint16_t id) {
    return id < cls->property_count ? &cls->properties[id] : NULL;
}

const entity_def_property *entity_def_class_find_property(const entity_def_class *cls, const char *name) {
    for (size_t i = 0; i < cls->property_count; i++) {
        if (strcmp(cls->properties[i].name, name) == 0) return &cls->properties[i];
    }
    return NULL;
}

const entity_def_method *entity_def_class_method(const entity_def_class *cls, entity_def_part part, uint16_t id) {
    if ((unsigned)part >= ENTITY_DEF_PART_COUNT || id >= cls->method_count[part]) return NULL;
    return &cls->methods[part][id];
}

const entity_def_method *entity_def_class_find_method(const entity_def_class *cls, entity_def_part part,
                                                      const char *name) {
    if ((unsigned)part >= ENTITY_DEF_PART_COUNT) return NULL;
    for (size_t i = 0; i < cls->method_count[part]; i++) {
        if (strcmp(cls->methods[part][i].name, name) == 0) return &cls->methods[part][i];
    }
    return NULL;
}

size_t entity_def_registry_event_count(const entity_def_registry *reg) {
    return reg->events.method_count[ENTITY_DEF_PART_CLIENT];
}

const entity_def_method *entity_def_registry_event(const entity_def_registry *reg, uint32_t id) {
    return id <= UINT16_MAX ? entity_def_class_method(&reg->events, ENTITY_DEF_PART_CLIENT, (uint16_t)id) : NULL;
}

const entity_def_method *entity_def_registry_find_event(const entity_def_registry *reg, const char *name) {
    return name ? entity_def_class_find_method(&reg->events, ENTITY_DEF_PART_CLIENT, name) : NULL;
}
