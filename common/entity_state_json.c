/* entity_state_json.c -- writes an entity_state's values as JSON: walks each
 * property's type tree, counting the flattened index entity_state.h defines,
 * and reads every scalar through the public getters. Owns the JSON shape of
 * a value (see entity_state_json.h); does not own the values, their layout
 * or their checks (entity_state.c), nor who may see them (the caller).
 */
#include "entity_state_json.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

/* 2^53: every integer of at most this magnitude is a double, so a reader
 * that parses JSON numbers as doubles (JavaScript, most JSON libraries) gets
 * it exactly. Larger magnitudes are written as strings. */
#define ENTITY_STATE_JSON__EXACT_INT (UINT64_C(1) << 53)

/* Room for any int64/uint64 in decimal (20 digits, a sign, the NUL) and for
 * "%.17g" of any finite double (at most 24 characters). */
#define ENTITY_STATE_JSON__NUMBER_TEXT 32

/* cJSON allocates with malloc and reports failure as NULL or false: out of
 * memory stops the process, as xmalloc does. */
static cJSON *entity_state_json__check(cJSON *item) {
    if (item == NULL) log_panic("entity_state_json: out of memory building JSON");
    return item;
}

static void entity_state_json__add(cJSON *object, const char *key, cJSON *item) {
    if (!cJSON_AddItemToObject(object, key, entity_state_json__check(item)))
        log_panic("entity_state_json: out of memory building JSON");
}

static void entity_state_json__append(cJSON *array, cJSON *item) {
    if (!cJSON_AddItemToArray(array, entity_state_json__check(item)))
        log_panic("entity_state_json: out of memory building JSON");
}

/* A getter failing here means the walk and the state disagree about the
 * layout: a broken invariant, not bad input. */
static void entity_state_json__got(int rc, const entity_state *state, uint16_t prop, uint32_t index) {
    if (rc != 0)
        log_panic("entity_state_json: %s property %u value %u: %s", entity_state_class(state)->name, (unsigned)prop,
                  (unsigned)index, entity_state_strerror(rc));
}

/* `text` (a decimal integer) as a raw number, or as a string when the
 * magnitude is above 2^53. */
static cJSON *entity_state_json__integer_text(const char *text, uint64_t magnitude) {
    if (magnitude > ENTITY_STATE_JSON__EXACT_INT) return entity_state_json__check(cJSON_CreateString(text));
    return entity_state_json__check(cJSON_CreateRaw(text));
}

static cJSON *entity_state_json__uint(uint64_t value) {
    char text[ENTITY_STATE_JSON__NUMBER_TEXT];
    snprintf(text, sizeof text, "%" PRIu64, value);
    return entity_state_json__integer_text(text, value);
}

static cJSON *entity_state_json__int(int64_t value) {
    char text[ENTITY_STATE_JSON__NUMBER_TEXT];
    snprintf(text, sizeof text, "%" PRId64, value);
    /* Negated in unsigned arithmetic: -INT64_MIN does not fit an int64. */
    uint64_t magnitude = value < 0 ? UINT64_C(0) - (uint64_t)value : (uint64_t)value;
    return entity_state_json__integer_text(text, magnitude);
}

/* A double as a raw number: 17 significant digits always read back as the
 * same double. The state only holds finite values (its setters and the
 * loader's defaults reject the others), and JSON has no spelling for them. */
static cJSON *entity_state_json__double(double value) {
    if (!isfinite(value)) log_panic("entity_state_json: a stored number is not finite");
    char text[ENTITY_STATE_JSON__NUMBER_TEXT];
    snprintf(text, sizeof text, "%.17g", value);
    return entity_state_json__check(cJSON_CreateRaw(text));
}

static cJSON *entity_state_json__vector(const double *components, size_t count) {
    cJSON *array = entity_state_json__check(cJSON_CreateArray());
    for (size_t i = 0; i < count; i++) entity_state_json__append(array, entity_state_json__double(components[i]));
    return array;
}

static cJSON *entity_state_json__hex(const uint8_t *data, size_t length) {
    static const char digits[] = "0123456789abcdef";
    char *text = xmalloc(2 * length + 1);
    for (size_t i = 0; i < length; i++) {
        text[2 * i] = digits[data[i] >> 4];
        text[2 * i + 1] = digits[data[i] & 0x0f];
    }
    text[2 * length] = '\0';
    cJSON *item = entity_state_json__check(cJSON_CreateString(text));
    free(text);
    return item;
}

/* The value of `type` whose first flattened value is *index within property
 * `prop`; advances *index past the value's type->value_count values. */
static cJSON *entity_state_json__value(const entity_state *state, uint16_t prop, const entity_def_type *type,
                                       uint32_t *index) {
    uint32_t at = *index;
    int rc;
    switch (type->kind) {
        case ENTITY_DEF_INT8:
        case ENTITY_DEF_INT16:
        case ENTITY_DEF_INT32:
        case ENTITY_DEF_INT64: {
            int64_t value;
            rc = entity_state_get_int(state, prop, at, &value);
            entity_state_json__got(rc, state, prop, at);
            *index = at + 1;
            return entity_state_json__int(value);
        }
        case ENTITY_DEF_UINT8:
        case ENTITY_DEF_UINT16:
        case ENTITY_DEF_UINT32:
        case ENTITY_DEF_UINT64: {
            uint64_t value;
            rc = entity_state_get_uint(state, prop, at, &value);
            entity_state_json__got(rc, state, prop, at);
            *index = at + 1;
            return entity_state_json__uint(value);
        }
        case ENTITY_DEF_FLOAT:
        case ENTITY_DEF_DOUBLE: {
            double value;
            rc = entity_state_get_float(state, prop, at, &value);
            entity_state_json__got(rc, state, prop, at);
            *index = at + 1;
            return entity_state_json__double(value);
        }
        case ENTITY_DEF_BOOL: {
            bool value;
            rc = entity_state_get_bool(state, prop, at, &value);
            entity_state_json__got(rc, state, prop, at);
            *index = at + 1;
            return entity_state_json__check(cJSON_CreateBool(value));
        }
        case ENTITY_DEF_STRING: {
            /* A stored string is UTF-8 without NUL bytes, so the terminated
         * text is the whole value; cJSON escapes quotes and controls. */
            const char *data;
            rc = entity_state_get_string(state, prop, at, &data, NULL);
            entity_state_json__got(rc, state, prop, at);
            *index = at + 1;
            return entity_state_json__check(cJSON_CreateString(data));
        }
        case ENTITY_DEF_BYTES: {
            const uint8_t *data;
            size_t length;
            rc = entity_state_get_bytes(state, prop, at, &data, &length);
            entity_state_json__got(rc, state, prop, at);
            *index = at + 1;
            return entity_state_json__hex(data, length);
        }
        case ENTITY_DEF_VECTOR2: {
            double v[2];
            rc = entity_state_get_vector2(state, prop, at, v);
            entity_state_json__got(rc, state, prop, at);
            *index = at + 1;
            return entity_state_json__vector(v, 2);
        }
        case ENTITY_DEF_VECTOR3: {
            double v[3];
            rc = entity_state_get_vector3(state, prop, at, v);
            entity_state_json__got(rc, state, prop, at);
            *index = at + 1;
            return entity_state_json__vector(v, 3);
        }
        case ENTITY_DEF_ENTITY: {
            uint64_t value;
            rc = entity_state_get_entity(state, prop, at, &value);
            entity_state_json__got(rc, state, prop, at);
            *index = at + 1;
            return entity_state_json__uint(value);
        }
        case ENTITY_DEF_ARRAY: {
            cJSON *array = entity_state_json__check(cJSON_CreateArray());
            for (uint32_t i = 0; i < type->count; i++)
                entity_state_json__append(array, entity_state_json__value(state, prop, type->element, index));
            return array;
        }
        case ENTITY_DEF_STRUCT: {
            cJSON *object = entity_state_json__check(cJSON_CreateObject());
            const entity_def_struct *s = type->structure;
            for (size_t f = 0; f < s->field_count; f++)
                entity_state_json__add(object, s->fields[f].name,
                                       entity_state_json__value(state, prop, &s->fields[f].type, index));
            return object;
        }
    }
    log_panic("entity_state_json: bad kind %d", (int)type->kind);
}

cJSON *entity_state_to_json(const entity_state *state, const entity_state_mask *only) {
    const entity_def_class *cls = entity_state_class(state);
    cJSON *object = entity_state_json__check(cJSON_CreateObject());
    for (size_t p = 0; p < cls->property_count; p++) {
        const entity_def_property *property = &cls->properties[p];
        if (only != NULL && !entity_state_mask_has(only, property->id)) continue;
        uint32_t index = 0;
        cJSON *value = entity_state_json__value(state, property->id, &property->type, &index);
        if (index != property->type.value_count)
            log_panic("entity_state_json: %s.%s walked %u values of %u", cls->name, property->name, (unsigned)index,
                      (unsigned)property->type.value_count);
        entity_state_json__add(object, property->name, value);
    }
    return object;
}

char *entity_state_to_json_string(const entity_state *state, const entity_state_mask *only) {
    cJSON *object = entity_state_to_json(state, only);
    char *printed = cJSON_PrintUnformatted(object);
    cJSON_Delete(object);
    if (printed == NULL) log_panic("entity_state_json: out of memory printing JSON");
    /* cJSON_free follows cJSON's hooks, which someone may have changed: hand
     * back a copy the caller frees with free(). */
    char *text = xstrdup(printed);
    cJSON_free(printed);
    return text;
}

/* ---- reading ------------------------------------------------------------ */

/* A JSON number (a cJSON number, a raw number, or a decimal string) as
 * text, for strtoll/strtoull/strtod; NULL when the item is no number. */
static const char *entity_state_json__number_text(const cJSON *item, char *buffer, size_t size) {
    if (cJSON_IsRaw(item) || cJSON_IsString(item)) return item->valuestring;
    if (!cJSON_IsNumber(item)) return NULL;
    snprintf(buffer, size, "%.17g", item->valuedouble);
    return buffer;
}

static int entity_state_json__read_int(const cJSON *item, int64_t *out) {
    char buffer[ENTITY_STATE_JSON__NUMBER_TEXT];
    const char *text = entity_state_json__number_text(item, buffer, sizeof buffer);
    if (!text || !*text) return -1;
    char *end;
    errno = 0;
    long long value = strtoll(text, &end, 10);
    if (errno || *end) {
        /* 1e3 and the like: a double that is an exact integer. */
        double d = strtod(text, &end);
        if (*end || d != floor(d) || d < -9.2233720368547758e18 || d >= 9.2233720368547758e18) return -1;
        value = (long long)d;
    }
    *out = value;
    return 0;
}

static int entity_state_json__read_uint(const cJSON *item, uint64_t *out) {
    char buffer[ENTITY_STATE_JSON__NUMBER_TEXT];
    const char *text = entity_state_json__number_text(item, buffer, sizeof buffer);
    if (!text || !*text || *text == '-') return -1;
    char *end;
    errno = 0;
    unsigned long long value = strtoull(text, &end, 10);
    if (errno || *end) {
        double d = strtod(text, &end);
        if (*end || d != floor(d) || d < 0 || d >= 1.8446744073709552e19) return -1;
        value = (unsigned long long)d;
    }
    *out = value;
    return 0;
}

static int entity_state_json__read_double(const cJSON *item, double *out) {
    char buffer[ENTITY_STATE_JSON__NUMBER_TEXT];
    const char *text = entity_state_json__number_text(item, buffer, sizeof buffer);
    if (!text || !*text) return -1;
    char *end;
    double value = strtod(text, &end);
    if (*end || !isfinite(value)) return -1;
    *out = value;
    return 0;
}

static int entity_state_json__hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Reads `item` as a value of `type` into the flattened values from *index
 * on; returns 0, or -1 with `why` set. */
static int entity_state_json__read(entity_state *state, uint16_t prop, const entity_def_type *type, const cJSON *item,
                                   uint32_t *index, char *why, size_t why_size) {
    uint32_t at = *index;
    int rc = 0;
    switch (type->kind) {
        case ENTITY_DEF_INT8:
        case ENTITY_DEF_INT16:
        case ENTITY_DEF_INT32:
        case ENTITY_DEF_INT64: {
            int64_t value;
            if (entity_state_json__read_int(item, &value) != 0) {
                snprintf(why, why_size, "is not an integer");
                return -1;
            }
            rc = entity_state_set_int(state, prop, at, value);
            break;
        }
        case ENTITY_DEF_UINT8:
        case ENTITY_DEF_UINT16:
        case ENTITY_DEF_UINT32:
        case ENTITY_DEF_UINT64:
        case ENTITY_DEF_ENTITY: {
            uint64_t value;
            if (entity_state_json__read_uint(item, &value) != 0) {
                snprintf(why, why_size, "is not an unsigned integer");
                return -1;
            }
            rc = type->kind == ENTITY_DEF_ENTITY ? entity_state_set_entity(state, prop, at, value)
                                                 : entity_state_set_uint(state, prop, at, value);
            break;
        }
        case ENTITY_DEF_FLOAT:
        case ENTITY_DEF_DOUBLE: {
            double value;
            if (entity_state_json__read_double(item, &value) != 0) {
                snprintf(why, why_size, "is not a finite number");
                return -1;
            }
            rc = entity_state_set_float(state, prop, at, value);
            break;
        }
        case ENTITY_DEF_BOOL:
            if (!cJSON_IsBool(item)) {
                snprintf(why, why_size, "is not true or false");
                return -1;
            }
            rc = entity_state_set_bool(state, prop, at, cJSON_IsTrue(item));
            break;
        case ENTITY_DEF_STRING:
            if (!cJSON_IsString(item)) {
                snprintf(why, why_size, "is not a string");
                return -1;
            }
            rc = entity_state_set_string(state, prop, at, item->valuestring, strlen(item->valuestring));
            break;
        case ENTITY_DEF_BYTES: {
            if (!cJSON_IsString(item) || strlen(item->valuestring) % 2) {
                snprintf(why, why_size, "is not a string of hex digit pairs");
                return -1;
            }
            size_t length = strlen(item->valuestring) / 2;
            uint8_t *bytes = xmalloc(length ? length : 1);
            for (size_t i = 0; i < length; i++) {
                int high = entity_state_json__hex_digit(item->valuestring[2 * i]);
                int low = entity_state_json__hex_digit(item->valuestring[2 * i + 1]);
                if (high < 0 || low < 0) {
                    free(bytes);
                    snprintf(why, why_size, "is not a string of hex digit pairs");
                    return -1;
                }
                bytes[i] = (uint8_t)(high << 4 | low);
            }
            rc = entity_state_set_bytes(state, prop, at, bytes, length);
            free(bytes);
            break;
        }
        case ENTITY_DEF_VECTOR2:
        case ENTITY_DEF_VECTOR3: {
            int count = type->kind == ENTITY_DEF_VECTOR2 ? 2 : 3;
            double v[3] = {0, 0, 0};
            if (!cJSON_IsArray(item) || cJSON_GetArraySize(item) != count) {
                snprintf(why, why_size, "is not an array of %d numbers", count);
                return -1;
            }
            for (int i = 0; i < count; i++)
                if (entity_state_json__read_double(cJSON_GetArrayItem(item, i), &v[i]) != 0) {
                    snprintf(why, why_size, "is not an array of %d numbers", count);
                    return -1;
                }
            rc = count == 2 ? entity_state_set_vector2(state, prop, at, v[0], v[1])
                            : entity_state_set_vector3(state, prop, at, v[0], v[1], v[2]);
            break;
        }
        case ENTITY_DEF_ARRAY: {
            if (!cJSON_IsArray(item) || cJSON_GetArraySize(item) != (int)type->count) {
                snprintf(why, why_size, "is not an array of %u elements", (unsigned)type->count);
                return -1;
            }
            const cJSON *element;
            uint32_t i = 0;
            cJSON_ArrayForEach(element, item) {
                char inner[160];
                if (entity_state_json__read(state, prop, type->element, element, index, inner, sizeof inner) != 0) {
                    snprintf(why, why_size, "element %u %s", (unsigned)i, inner);
                    return -1;
                }
                i++;
            }
            return 0;
        }
        case ENTITY_DEF_STRUCT: {
            if (!cJSON_IsObject(item)) {
                snprintf(why, why_size, "is not an object");
                return -1;
            }
            const entity_def_struct *s = type->structure;
            for (size_t f = 0; f < s->field_count; f++) {
                const cJSON *field = cJSON_GetObjectItemCaseSensitive(item, s->fields[f].name);
                char inner[160];
                if (!field) {
                    snprintf(why, why_size, "has no field '%s'", s->fields[f].name);
                    return -1;
                }
                if (entity_state_json__read(state, prop, &s->fields[f].type, field, index, inner, sizeof inner) != 0) {
                    snprintf(why, why_size, "field '%s' %s", s->fields[f].name, inner);
                    return -1;
                }
            }
            return 0;
        }
    }
    if (rc != 0) {
        snprintf(why, why_size, "does not fit: %s", entity_state_strerror(rc));
        return -1;
    }
    *index = at + 1;
    return 0;
}

int entity_state_from_json(entity_state *state, const cJSON *object, const entity_state_mask *only,
                           entity_state_json_problem problem, void *context) {
    if (!cJSON_IsObject(object)) return -1;
    const entity_def_class *cls = entity_state_class(state);
    /* Each property is read into a scratch state first and copied over only
     * whole, so a value that fails halfway leaves the property as it was. */
    entity_state *scratch = entity_state_create(cls);
    int restored = 0;
    const cJSON *member;
    cJSON_ArrayForEach(member, object) {
        const entity_def_property *property = entity_def_class_find_property(cls, member->string);
        char why[256];
        if (!property) {
            if (problem) problem(member->string, "is not a property of the class (any more)", context);
            continue;
        }
        if (only && !entity_state_mask_has(only, property->id)) {
            if (problem) problem(member->string, "is not among the properties read here", context);
            continue;
        }
        uint32_t index = 0;
        if (entity_state_json__read(scratch, property->id, &property->type, member, &index, why, sizeof why) != 0) {
            if (problem) problem(member->string, why, context);
            continue;
        }
        if (entity_state_copy_property(state, scratch, property->id) != 0) {
            if (problem) problem(member->string, "could not be copied", context);
            continue;
        }
        restored++;
    }
    entity_state_free(scratch);
    return restored;
}
