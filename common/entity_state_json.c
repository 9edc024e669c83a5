/* entity_state_json.c -- writes an entity_state's values as JSON: walks each
 * property's type tree, counting the flattened index entity_state.h defines,
 * and reads every scalar through the public getters. Owns the JSON shape of
 * a value (see entity_state_json.h); does not own the values, their layout
 * or their checks (entity_state.c), nor who may see them (the caller).
 */
#include "entity_state_json.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

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
    if (item == NULL)
        log_panic("entity_state_json: out of memory building JSON");
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
static void entity_state_json__got(int rc, const entity_state *state, uint16_t prop,
                                   uint32_t index) {
    if (rc != 0)
        log_panic("entity_state_json: %s property %u value %u: %s",
                  entity_state_class(state)->name, (unsigned)prop, (unsigned)index,
                  entity_state_strerror(rc));
}

/* `text` (a decimal integer) as a raw number, or as a string when the
 * magnitude is above 2^53. */
static cJSON *entity_state_json__integer_text(const char *text, uint64_t magnitude) {
    if (magnitude > ENTITY_STATE_JSON__EXACT_INT)
        return entity_state_json__check(cJSON_CreateString(text));
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
    if (!isfinite(value))
        log_panic("entity_state_json: a stored number is not finite");
    char text[ENTITY_STATE_JSON__NUMBER_TEXT];
    snprintf(text, sizeof text, "%.17g", value);
    return entity_state_json__check(cJSON_CreateRaw(text));
}

static cJSON *entity_state_json__vector(const double *components, size_t count) {
    cJSON *array = entity_state_json__check(cJSON_CreateArray());
    for (size_t i = 0; i < count; i++)
        entity_state_json__append(array, entity_state_json__double(components[i]));
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
static cJSON *entity_state_json__value(const entity_state *state, uint16_t prop,
                                       const entity_def_type *type, uint32_t *index) {
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
            entity_state_json__append(array,
                                      entity_state_json__value(state, prop, type->element, index));
        return array;
    }
    case ENTITY_DEF_STRUCT: {
        cJSON *object = entity_state_json__check(cJSON_CreateObject());
        const entity_def_struct *s = type->structure;
        for (size_t f = 0; f < s->field_count; f++)
            entity_state_json__add(object, s->fields[f].name,
                                   entity_state_json__value(state, prop, &s->fields[f].type,
                                                            index));
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
        if (only != NULL && !entity_state_mask_has(only, property->id))
            continue;
        uint32_t index = 0;
        cJSON *value = entity_state_json__value(state, property->id, &property->type, &index);
        if (index != property->type.value_count)
            log_panic("entity_state_json: %s.%s walked %u values of %u", cls->name,
                      property->name, (unsigned)index, (unsigned)property->type.value_count);
        entity_state_json__add(object, property->name, value);
    }
    return object;
}

char *entity_state_to_json_string(const entity_state *state, const entity_state_mask *only) {
    cJSON *object = entity_state_to_json(state, only);
    char *printed = cJSON_PrintUnformatted(object);
    cJSON_Delete(object);
    if (printed == NULL)
        log_panic("entity_state_json: out of memory printing JSON");
    /* cJSON_free follows cJSON's hooks, which someone may have changed: hand
     * back a copy the caller frees with free(). */
    char *text = xstrdup(printed);
    cJSON_free(printed);
    return text;
}
