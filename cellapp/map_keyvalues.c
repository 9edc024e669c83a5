/* map_keyvalues.c -- owns the reading of a map entity's keyvalues into its
 * properties and its game data (map_keyvalues.h). A value for a field is a
 * JSON number, bool or string (Source writes every keyvalue as text, and
 * text converts as an input's parameter does), or [x, y, z] for a vector;
 * integers must be whole and within the field's type, strings must fit its
 * array with their terminator. */
#include "map_keyvalues.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "entity_state_json.h"
#include "game_host.h"
#include "log.h"

/* Why the first problem arose, for entity_state_from_json's reports. */
typedef struct map_keyvalues_problem {
    char text[256];
} map_keyvalues_problem;

static void map_keyvalues_on_problem(const char *name, const char *why, void *context) {
    map_keyvalues_problem *problem = context;
    if (!problem->text[0]) snprintf(problem->text, sizeof problem->text, "key '%s': %s", name, why);
}

/* A JSON value as a field's value. Returns 0, or -1 with why. */
static int map_keyvalues_field_value(const tessera_field *field, const cJSON *item, tessera_value *out, char *why,
                                     size_t why_size) {
    if (cJSON_IsString(item)) {
        if (field->type == TESSERA_FIELD_STRING && strlen(item->valuestring) >= field->size) {
            snprintf(why, why_size, "longer than the %zu bytes of field '%s'", field->size - 1, field->name);
            return -1;
        }
        if (game_host_convert(item->valuestring, field->type, out) != 0) {
            snprintf(why, why_size, "'%s' does not convert to field '%s'", item->valuestring, field->name);
            return -1;
        }
    } else if (cJSON_IsBool(item) && field->type == TESSERA_FIELD_BOOL) {
        memset(out, 0, sizeof *out);
        out->type = field->type;
        out->b = cJSON_IsTrue(item);
    } else if (cJSON_IsNumber(item) && field->type != TESSERA_FIELD_STRING && field->type != TESSERA_FIELD_VECTOR3 &&
               field->type != TESSERA_FIELD_BOOL) {
        char text[64];
        double v = item->valuedouble;
        if (field->type == TESSERA_FIELD_FLOAT || field->type == TESSERA_FIELD_DOUBLE)
            snprintf(text, sizeof text, "%.17g", v);
        else if (v == floor(v) && fabs(v) < 9007199254740992.0)
            snprintf(text, sizeof text, "%.0f", v);
        else
            text[0] = '\0';
        if (!text[0] || game_host_convert(text, field->type, out) != 0) {
            snprintf(why, why_size, "%g does not convert to field '%s'", v, field->name);
            return -1;
        }
    } else if (cJSON_IsArray(item) && field->type == TESSERA_FIELD_VECTOR3 && cJSON_GetArraySize(item) == 3) {
        memset(out, 0, sizeof *out);
        out->type = field->type;
        for (int k = 0; k < 3; k++) {
            const cJSON *v = cJSON_GetArrayItem(item, k);
            if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble)) {
                snprintf(why, why_size, "field '%s' takes [x, y, z] of numbers", field->name);
                return -1;
            }
            out->v[k] = (float)v->valuedouble;
        }
    } else {
        snprintf(why, why_size, "the value does not suit field '%s'", field->name);
        return -1;
    }
    /* Integers within the field's width. */
    if ((field->type == TESSERA_FIELD_INT32 && (out->i < INT32_MIN || out->i > INT32_MAX)) ||
        (field->type == TESSERA_FIELD_UINT32 && out->u > UINT32_MAX)) {
        snprintf(why, why_size, "out of the range of field '%s'", field->name);
        return -1;
    }
    return 0;
}

static void map_keyvalues_store(const tessera_field *field, const tessera_value *value, uint8_t *data) {
    uint8_t *at = data + field->offset;
    switch (field->type) {
        case TESSERA_FIELD_INT32:
            *(int32_t *)(void *)at = (int32_t)value->i;
            break;
        case TESSERA_FIELD_INT64:
            *(int64_t *)(void *)at = value->i;
            break;
        case TESSERA_FIELD_UINT32:
            *(uint32_t *)(void *)at = (uint32_t)value->u;
            break;
        case TESSERA_FIELD_UINT64:
        case TESSERA_FIELD_HANDLE:
            *(uint64_t *)(void *)at = value->u;
            break;
        case TESSERA_FIELD_FLOAT:
            *(float *)(void *)at = (float)value->f;
            break;
        case TESSERA_FIELD_DOUBLE:
            *(double *)(void *)at = value->f;
            break;
        case TESSERA_FIELD_BOOL:
            *(bool *)(void *)at = value->b;
            break;
        case TESSERA_FIELD_VECTOR3:
            memcpy(at, value->v, sizeof value->v);
            break;
        case TESSERA_FIELD_STRING:
            memset(at, 0, field->size);
            memcpy(at, value->s, strlen(value->s));
            break;
    }
}

/* The keyvalues that name properties (the rest are fields): a new object
 * the caller frees, with the field keys checked (and, with `entity`,
 * stored). Returns NULL with why when a field's value is wrong. */
static cJSON *map_keyvalues_split(game_host *game, const entity_def_class *cls, cell_entity *entity,
                                  const cJSON *keyvalues, char *why, size_t why_size) {
    cJSON *properties = cJSON_CreateObject();
    if (!properties) log_panic("map keyvalues: out of memory");
    const cJSON *item;
    cJSON_ArrayForEach(item, keyvalues) {
        const tessera_field *field =
            entity_def_class_find_property(cls, item->string) ? NULL : game_host_find_field(game, cls, item->string);
        if (!field) {
            cJSON_AddItemToObject(properties, item->string, cJSON_Duplicate(item, 1));
            continue;
        }
        tessera_value value;
        char problem[192];
        if (map_keyvalues_field_value(field, item, &value, problem, sizeof problem) != 0) {
            snprintf(why, why_size, "key '%s': %s", item->string, problem);
            cJSON_Delete(properties);
            return NULL;
        }
        uint8_t *data = entity ? game_host_data(entity) : NULL;
        if (data) map_keyvalues_store(field, &value, data);
    }
    return properties;
}

int map_keyvalues_check(game_host *game, const entity_def_class *cls, const cJSON *keyvalues, char *why,
                        size_t why_size) {
    if (!cJSON_IsObject(keyvalues)) {
        snprintf(why, why_size, "\"keyvalues\" is not an object");
        return -1;
    }
    cJSON *properties = map_keyvalues_split(game, cls, NULL, keyvalues, why, why_size);
    if (!properties) return -1;
    entity_state *scratch = entity_state_create(cls);
    map_keyvalues_problem problem = {{0}};
    entity_state_from_json(scratch, properties, NULL, map_keyvalues_on_problem, &problem);
    entity_state_free(scratch);
    cJSON_Delete(properties);
    if (problem.text[0]) {
        snprintf(why, why_size, "%s", problem.text);
        return -1;
    }
    return 0;
}

void map_keyvalues_apply(game_host *game, cell_entity *entity, const cJSON *keyvalues) {
    char why[256];
    cJSON *properties = map_keyvalues_split(game, entity->cls, entity, keyvalues, why, sizeof why);
    if (!properties) return; /* checked before: cannot be */
    entity_state_from_json(entity->state, properties, NULL, NULL, NULL);
    cJSON_Delete(properties);
}
