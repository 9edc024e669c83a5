/* entity_state.c -- one entity's property values: the slot layout, defaults,
 * the checking setters, the dirty set, copying, and the whole-state
 * encoding (which is property_codec applied to every property).
 *
 * It owns the values and their legality rules (entity_state.h lists them),
 * not the wire format (property_codec.c, bit_stream.c) and not who may see
 * what (entity_def's audience, the cellapp's witnesses).
 *
 * A state is one allocation: the header, then the slots, then the index of
 * each property's first slot. Strings and bytes live in their own buffers,
 * which only grow, so rewriting a string no longer than before does not
 * allocate. Finding value `index` of a property walks the type once (array:
 * a division; struct: its fields), without any per-slot table.
 */
#include "entity_state.h"

#include "log.h"
#include "property_codec.h"

#include <float.h>
#include <math.h>
#include <stdalign.h>
#include <stdlib.h>
#include <string.h>

struct entity_state {
    const entity_def_class *cls;
    entity_state_mask dirty;
    entity_state_dirtied_fn dirtied; /* entity_state_on_dirtied's, or NULL */
    void *dirtied_context;
    bool dirtied_told;        /* dirtied was called since the last clear */
    uint32_t value_count;     /* slots in all */
    entity_state_slot *slots; /* value_count slots */
    uint32_t *first;          /* property_count + 1 entries: property p is first[p]..first[p+1]-1 */
};

/* ---- property sets ---------------------------------------------------- */

void entity_state_mask_all(entity_state_mask *m, size_t count) {
    if (count > ENTITY_DEF_MAX_MEMBERS) count = ENTITY_DEF_MAX_MEMBERS;
    memset(m, 0, sizeof *m);
    for (size_t w = 0; w < count / 64; w++) m->words[w] = UINT64_MAX;
    if (count % 64 != 0) m->words[count / 64] = (UINT64_C(1) << (count % 64)) - 1;
}

void entity_state_mask_intersect(entity_state_mask *out, const entity_state_mask *a, const entity_state_mask *b) {
    for (size_t w = 0; w < ENTITY_STATE_MASK_WORDS; w++) out->words[w] = a->words[w] & b->words[w];
}

int entity_state_mask_next(const entity_state_mask *m, int after) {
    int start = after + 1;
    if (start < 0) start = 0;
    if (start >= ENTITY_DEF_MAX_MEMBERS) return -1;
    size_t w = (size_t)start / 64;
    uint64_t word = m->words[w] & (UINT64_MAX << (start % 64));
    for (;;) {
        if (word != 0) return (int)(w * 64) + __builtin_ctzll(word);
        if (++w == ENTITY_STATE_MASK_WORDS) return -1;
        word = m->words[w];
    }
}

/* ---- strings ---------------------------------------------------------- */

bool entity_state__utf8_feed(entity_state_utf8 *u, const uint8_t *bytes, size_t length) {
    for (size_t i = 0; i < length; i++) {
        uint8_t c = bytes[i];
        if (u->need != 0) {
            if (c < u->lo || c > u->hi) return false;
            u->need--;
            u->lo = 0x80;
            u->hi = 0xbf;
            continue;
        }
        if (c < 0x80) {
            if (c == 0) return false;
            continue;
        }
        /* The first continuation byte's range excludes overlong forms
         * (E0, F0), UTF-16 surrogates (ED) and code points past U+10FFFF
         * (F4); C0, C1 and F5..FF never start a valid sequence. */
        if (c < 0xc2 || c > 0xf4) return false;
        u->lo = 0x80;
        u->hi = 0xbf;
        if (c < 0xe0) {
            u->need = 1;
        } else if (c < 0xf0) {
            u->need = 2;
            if (c == 0xe0)
                u->lo = 0xa0;
            else if (c == 0xed)
                u->hi = 0x9f;
        } else {
            u->need = 3;
            if (c == 0xf0)
                u->lo = 0x90;
            else if (c == 0xf4)
                u->hi = 0x8f;
        }
    }
    return true;
}

bool entity_state__utf8_complete(const entity_state_utf8 *u) { return u->need == 0; }

uint8_t *entity_state__blob_resize(entity_state_slot *slot, size_t length) {
    entity_state_blob *blob = &slot->blob;
    if (length > ENTITY_DEF_MAX_LENGTH)
        log_panic("entity_state: a %zu-byte value is past the largest max_length", length);
    if (length + 1 > blob->capacity) {
        /* The old content is not kept, so free then allocate: no copy. */
        free(blob->data);
        blob->data = xmalloc(length + 1);
        blob->capacity = (uint32_t)(length + 1);
    }
    if (blob->data != NULL) blob->data[length] = '\0';
    blob->length = (uint32_t)length;
    return blob->data;
}

/* Stores `length` bytes; returns whether the value changed. */
static bool entity_state__blob_store(entity_state_slot *slot, const void *data, size_t length) {
    entity_state_blob *blob = &slot->blob;
    if (blob->length == length && (length == 0 || memcmp(blob->data, data, length) == 0)) return false;
    uint8_t *dst = entity_state__blob_resize(slot, length);
    if (length != 0) memcpy(dst, data, length);
    return true;
}

static int entity_state__hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* ---- numbers ---------------------------------------------------------- */

static bool entity_state__signed(entity_def_kind kind) { return kind >= ENTITY_DEF_INT8 && kind <= ENTITY_DEF_INT64; }

static bool entity_state__unsigned(entity_def_kind kind) {
    return kind >= ENTITY_DEF_UINT8 && kind <= ENTITY_DEF_UINT64;
}

/* Checks a float, double or vector component `v` against `type` and gives
 * the value to store (entity_state.h: rounded to float unless double or
 * quantized; -0 as 0). Returns 0 or ENTITY_STATE_ERROR_RANGE. */
static int entity_state__number(const entity_def_type *type, double v, double *stored) {
    if (!isfinite(v)) return ENTITY_STATE_ERROR_RANGE;
    if (type->quantized) {
        if (v < type->quant_min || v > type->quant_max) return ENTITY_STATE_ERROR_RANGE;
    } else if (type->kind != ENTITY_DEF_DOUBLE) {
        if (fabs(v) > FLT_MAX) return ENTITY_STATE_ERROR_RANGE;
        v = (double)(float)v;
    }
    *stored = v == 0 ? 0.0 : v;
    return 0;
}

/* ---- layout ----------------------------------------------------------- */

/* Fills the slots of a value of `type` from its normalised default (which
 * the loader checked), returning the slot after them. */
static entity_state_slot *entity_state__fill(const entity_def_type *type, const cJSON *json, entity_state_slot *slot) {
    if (json == NULL) log_panic("entity_state: a default is missing for a %s", entity_def_kind_name(type->kind));
    switch (type->kind) {
        case ENTITY_DEF_INT8:
        case ENTITY_DEF_INT16:
        case ENTITY_DEF_INT32:
        case ENTITY_DEF_INT64:
            slot->i = (int64_t)json->valuedouble;
            return slot + 1;
        case ENTITY_DEF_UINT8:
        case ENTITY_DEF_UINT16:
        case ENTITY_DEF_UINT32:
        case ENTITY_DEF_UINT64:
            slot->u = (uint64_t)json->valuedouble;
            return slot + 1;
        case ENTITY_DEF_FLOAT:
        case ENTITY_DEF_DOUBLE:
            if (entity_state__number(type, json->valuedouble, &slot->d) != 0)
                log_panic("entity_state: a default does not fit its type");
            return slot + 1;
        case ENTITY_DEF_BOOL:
            slot->b = cJSON_IsTrue(json);
            return slot + 1;
        case ENTITY_DEF_STRING:
            entity_state__blob_store(slot, json->valuestring, strlen(json->valuestring));
            return slot + 1;
        case ENTITY_DEF_BYTES: {
            size_t length = strlen(json->valuestring) / 2;
            uint8_t *dst = entity_state__blob_resize(slot, length);
            for (size_t i = 0; i < length; i++) {
                int hi = entity_state__hex(json->valuestring[2 * i]);
                int lo = entity_state__hex(json->valuestring[2 * i + 1]);
                if (hi < 0 || lo < 0) log_panic("entity_state: a bytes default is not lowercase hex");
                dst[i] = (uint8_t)(hi << 4 | lo);
            }
            return slot + 1;
        }
        case ENTITY_DEF_VECTOR2:
        case ENTITY_DEF_VECTOR3: {
            unsigned n = type->kind == ENTITY_DEF_VECTOR2 ? 2 : 3, i = 0;
            for (const cJSON *c = json->child; c != NULL && i < n; c = c->next, i++) {
                if (entity_state__number(type, c->valuedouble, &slot->v[i]) != 0)
                    log_panic("entity_state: a default does not fit its type");
            }
            if (i != n) log_panic("entity_state: a vector default has %u components", i);
            return slot + 1;
        }
        case ENTITY_DEF_ENTITY:
            slot->u = 0;
            return slot + 1;
        case ENTITY_DEF_ARRAY: {
            uint32_t i = 0;
            for (const cJSON *c = json->child; c != NULL && i < type->count; c = c->next, i++)
                slot = entity_state__fill(type->element, c, slot);
            if (i != type->count) log_panic("entity_state: an array default has %u elements", (unsigned)i);
            return slot;
        }
        case ENTITY_DEF_STRUCT:
            for (size_t f = 0; f < type->structure->field_count; f++) {
                const entity_def_field *field = &type->structure->fields[f];
                slot = entity_state__fill(&field->type, cJSON_GetObjectItemCaseSensitive(json, field->name), slot);
            }
            return slot;
    }
    log_panic("entity_state: bad kind %d", (int)type->kind);
}

/* Whether a value of `type` holds a string or bytes somewhere. */
static bool entity_state__has_blob(const entity_def_type *type) {
    switch (type->kind) {
        case ENTITY_DEF_STRING:
        case ENTITY_DEF_BYTES:
            return true;
        case ENTITY_DEF_ARRAY:
            return entity_state__has_blob(type->element);
        case ENTITY_DEF_STRUCT:
            for (size_t f = 0; f < type->structure->field_count; f++) {
                if (entity_state__has_blob(&type->structure->fields[f].type)) return true;
            }
            return false;
        default:
            return false;
    }
}

/* Frees the string buffers of a value of `type`; returns the next slot. */
static entity_state_slot *entity_state__release(const entity_def_type *type, entity_state_slot *slot) {
    if (!entity_state__has_blob(type)) return slot + type->value_count;
    switch (type->kind) {
        case ENTITY_DEF_ARRAY:
            for (uint32_t i = 0; i < type->count; i++) slot = entity_state__release(type->element, slot);
            return slot;
        case ENTITY_DEF_STRUCT:
            for (size_t f = 0; f < type->structure->field_count; f++)
                slot = entity_state__release(&type->structure->fields[f].type, slot);
            return slot;
        default: /* string or bytes */
            free(slot->blob.data);
            slot->blob = (entity_state_blob){0};
            return slot + 1;
    }
}

/* Copies a value of `type` from `src` to `dst` (same type), returning
 * whether it changed; advances both. */
static bool entity_state__copy_value(const entity_def_type *type, entity_state_slot **dst,
                                     const entity_state_slot **src) {
    bool changed = false;
    if (!entity_state__has_blob(type)) {
        size_t bytes = type->value_count * sizeof(entity_state_slot);
        changed = memcmp(*dst, *src, bytes) != 0;
        memcpy(*dst, *src, bytes);
        *dst += type->value_count;
        *src += type->value_count;
        return changed;
    }
    switch (type->kind) {
        case ENTITY_DEF_ARRAY:
            for (uint32_t i = 0; i < type->count; i++) changed |= entity_state__copy_value(type->element, dst, src);
            return changed;
        case ENTITY_DEF_STRUCT:
            for (size_t f = 0; f < type->structure->field_count; f++)
                changed |= entity_state__copy_value(&type->structure->fields[f].type, dst, src);
            return changed;
        default:
            changed = entity_state__blob_store(*dst, (*src)->blob.data, (*src)->blob.length);
            (*dst)++;
            (*src)++;
            return changed;
    }
}

entity_state *entity_state_create(const entity_def_class *cls) {
    size_t count = cls->property_count;
    uint64_t values = 0;
    for (size_t p = 0; p < count; p++) values += cls->properties[p].type.value_count;
    if (values > UINT32_MAX / 2)
        log_panic("entity_state: class %s holds %llu values", cls->name, (unsigned long long)values);
    /* The header, the slots (aligned for their doubles and pointers), then
     * the first-slot index. */
    size_t header = (sizeof(entity_state) + alignof(entity_state_slot) - 1) / alignof(entity_state_slot) *
                    alignof(entity_state_slot);
    size_t slots = (size_t)values * sizeof(entity_state_slot);
    entity_state *state = xcalloc(1, header + slots + (count + 1) * sizeof(uint32_t));
    state->cls = cls;
    state->value_count = (uint32_t)values;
    state->slots = (entity_state_slot *)((char *)state + header);
    state->first = (uint32_t *)((char *)state->slots + slots);
    entity_state_slot *slot = state->slots;
    for (size_t p = 0; p < count; p++) {
        const entity_def_property *prop = &cls->properties[p];
        state->first[p] = (uint32_t)(slot - state->slots);
        entity_state_slot *end = entity_state__fill(&prop->type, prop->default_value, slot);
        if ((size_t)(end - slot) != prop->type.value_count)
            log_panic("entity_state: %s.%s filled %zu slots for %u values", cls->name, prop->name, (size_t)(end - slot),
                      (unsigned)prop->type.value_count);
        slot = end;
    }
    state->first[count] = state->value_count;
    return state;
}

void entity_state_free(entity_state *state) {
    if (state == NULL) return;
    for (size_t p = 0; p < state->cls->property_count; p++)
        entity_state__release(&state->cls->properties[p].type, state->slots + state->first[p]);
    free(state);
}

const entity_def_class *entity_state_class(const entity_state *state) { return state->cls; }

/* Tells the owner, once between two clears, that something is dirty. */
static void entity_state__tell_dirtied(entity_state *state) {
    if (state->dirtied_told || !state->dirtied) return;
    state->dirtied_told = true;
    state->dirtied(state->dirtied_context);
}

int entity_state_copy(entity_state *dst, const entity_state *src) {
    if (dst->cls != src->cls) return ENTITY_STATE_ERROR_CLASS;
    if (dst == src) return 0;
    entity_state_slot *d = dst->slots;
    const entity_state_slot *s = src->slots;
    for (size_t p = 0; p < dst->cls->property_count; p++)
        entity_state__copy_value(&dst->cls->properties[p].type, &d, &s);
    dst->dirty = src->dirty;
    if (!entity_state_mask_empty(&dst->dirty)) entity_state__tell_dirtied(dst);
    return 0;
}

int entity_state_copy_property(entity_state *dst, const entity_state *src, uint16_t prop) {
    if (dst->cls != src->cls) return ENTITY_STATE_ERROR_CLASS;
    if (prop >= dst->cls->property_count) return ENTITY_STATE_ERROR_NO_SUCH_PROPERTY;
    if (dst == src) return 0;
    entity_state_slot *d = entity_state__slots(dst, prop);
    const entity_state_slot *s = entity_state__const_slots(src, prop);
    if (entity_state__copy_value(&dst->cls->properties[prop].type, &d, &s)) entity_state_mark_dirty(dst, prop);
    return 0;
}

entity_state_slot *entity_state__slots(entity_state *state, uint16_t prop) {
    if (prop >= state->cls->property_count)
        log_panic("entity_state: class %s has no property %u", state->cls->name, prop);
    return state->slots + state->first[prop];
}

const entity_state_slot *entity_state__const_slots(const entity_state *state, uint16_t prop) {
    return entity_state__slots((entity_state *)state, prop);
}

/* ---- naming values ---------------------------------------------------- */

/* The type of value `index` of `type` (a leaf, never an array or struct). */
static const entity_def_type *entity_state__leaf(const entity_def_type *type, uint32_t index) {
    for (;;) {
        if (type->kind == ENTITY_DEF_ARRAY) {
            index %= type->element->value_count;
            type = type->element;
        } else if (type->kind == ENTITY_DEF_STRUCT) {
            const entity_def_struct *st = type->structure;
            size_t f = 0;
            while (f + 1 < st->field_count && index >= st->fields[f].type.value_count) {
                index -= st->fields[f].type.value_count;
                f++;
            }
            type = &st->fields[f].type;
        } else {
            return type;
        }
    }
}

const entity_def_type *entity_state_value_type(const entity_def_class *cls, uint16_t prop, uint32_t index) {
    if (prop >= cls->property_count || index >= cls->properties[prop].type.value_count) return NULL;
    return entity_state__leaf(&cls->properties[prop].type, index);
}

int entity_state_index(const entity_def_class *cls, uint16_t prop, const char *path, uint32_t *index) {
    *index = 0;
    if (prop >= cls->property_count) return ENTITY_STATE_ERROR_NO_SUCH_PROPERTY;
    const entity_def_type *type = &cls->properties[prop].type;
    uint32_t at = 0;
    const char *p = path;
    bool first = true;
    while (*p != '\0') {
        if (*p == '[') {
            if (type->kind != ENTITY_DEF_ARRAY) return ENTITY_STATE_ERROR_INDEX;
            p++;
            uint64_t i = 0;
            const char *digits = p;
            while (*p >= '0' && *p <= '9' && p - digits < 10) i = i * 10 + (uint64_t)(*p++ - '0');
            if (p == digits || *p != ']' || i >= type->count) return ENTITY_STATE_ERROR_INDEX;
            p++;
            at += (uint32_t)i * type->element->value_count;
            type = type->element;
        } else {
            if (*p == '.')
                p++;
            else if (!first)
                return ENTITY_STATE_ERROR_INDEX;
            if (type->kind != ENTITY_DEF_STRUCT) return ENTITY_STATE_ERROR_INDEX;
            size_t length = strcspn(p, ".[");
            const entity_def_struct *st = type->structure;
            const entity_def_field *field = NULL;
            uint32_t offset = 0;
            for (size_t f = 0; f < st->field_count; f++) {
                if (strlen(st->fields[f].name) == length && memcmp(st->fields[f].name, p, length) == 0) {
                    field = &st->fields[f];
                    break;
                }
                offset += st->fields[f].type.value_count;
            }
            if (field == NULL) return ENTITY_STATE_ERROR_INDEX;
            p += length;
            at += offset;
            type = &field->type;
        }
        first = false;
    }
    if (path[0] != '\0' && (type->kind == ENTITY_DEF_ARRAY || type->kind == ENTITY_DEF_STRUCT))
        return ENTITY_STATE_ERROR_INDEX;
    *index = at;
    return 0;
}

/* ---- accessors -------------------------------------------------------- */

/* Finds value `index` of `prop`: its leaf type and slot. */
static int entity_state__at(const entity_state *state, uint16_t prop, uint32_t index, const entity_def_type **leaf,
                            entity_state_slot **slot) {
    const entity_def_class *cls = state->cls;
    if (prop >= cls->property_count) return ENTITY_STATE_ERROR_NO_SUCH_PROPERTY;
    const entity_def_type *type = &cls->properties[prop].type;
    if (index >= type->value_count) return ENTITY_STATE_ERROR_INDEX;
    *leaf = entity_state__leaf(type, index);
    *slot = state->slots + state->first[prop] + index;
    return 0;
}

/* Finds a value whose kind must satisfy `ok`. */
#define ENTITY_STATE__FIND(state, prop, index, ok)                \
    const entity_def_type *type;                                  \
    entity_state_slot *slot;                                      \
    int rc_ = entity_state__at(state, prop, index, &type, &slot); \
    if (rc_ == 0 && !(ok)) rc_ = ENTITY_STATE_ERROR_TYPE

static void entity_state__changed(entity_state *state, uint16_t prop) {
    entity_state_mask_add(&state->dirty, prop);
    entity_state__tell_dirtied(state);
}

int entity_state_get_int(const entity_state *state, uint16_t prop, uint32_t index, int64_t *out) {
    *out = 0;
    ENTITY_STATE__FIND(state, prop, index, entity_state__signed(type->kind));
    if (rc_ != 0) return rc_;
    *out = slot->i;
    return 0;
}

int entity_state_set_int(entity_state *state, uint16_t prop, uint32_t index, int64_t value) {
    ENTITY_STATE__FIND(state, prop, index, entity_state__signed(type->kind));
    if (rc_ != 0) return rc_;
    if (value < type->int_min || value > (int64_t)type->int_max) return ENTITY_STATE_ERROR_RANGE;
    if (slot->i != value) {
        slot->i = value;
        entity_state__changed(state, prop);
    }
    return 0;
}

int entity_state_get_uint(const entity_state *state, uint16_t prop, uint32_t index, uint64_t *out) {
    *out = 0;
    ENTITY_STATE__FIND(state, prop, index, entity_state__unsigned(type->kind));
    if (rc_ != 0) return rc_;
    *out = slot->u;
    return 0;
}

int entity_state_set_uint(entity_state *state, uint16_t prop, uint32_t index, uint64_t value) {
    ENTITY_STATE__FIND(state, prop, index, entity_state__unsigned(type->kind));
    if (rc_ != 0) return rc_;
    if (value > type->int_max) return ENTITY_STATE_ERROR_RANGE;
    if (slot->u != value) {
        slot->u = value;
        entity_state__changed(state, prop);
    }
    return 0;
}

int entity_state_get_float(const entity_state *state, uint16_t prop, uint32_t index, double *out) {
    *out = 0;
    ENTITY_STATE__FIND(state, prop, index, type->kind == ENTITY_DEF_FLOAT || type->kind == ENTITY_DEF_DOUBLE);
    if (rc_ != 0) return rc_;
    *out = slot->d;
    return 0;
}

int entity_state_set_float(entity_state *state, uint16_t prop, uint32_t index, double value) {
    ENTITY_STATE__FIND(state, prop, index, type->kind == ENTITY_DEF_FLOAT || type->kind == ENTITY_DEF_DOUBLE);
    if (rc_ != 0) return rc_;
    double stored;
    int rc = entity_state__number(type, value, &stored);
    if (rc != 0) return rc;
    if (slot->d != stored) {
        slot->d = stored;
        entity_state__changed(state, prop);
    }
    return 0;
}

int entity_state_get_bool(const entity_state *state, uint16_t prop, uint32_t index, bool *out) {
    *out = false;
    ENTITY_STATE__FIND(state, prop, index, type->kind == ENTITY_DEF_BOOL);
    if (rc_ != 0) return rc_;
    *out = slot->b;
    return 0;
}

int entity_state_set_bool(entity_state *state, uint16_t prop, uint32_t index, bool value) {
    ENTITY_STATE__FIND(state, prop, index, type->kind == ENTITY_DEF_BOOL);
    if (rc_ != 0) return rc_;
    if (slot->b != value) {
        slot->b = value;
        entity_state__changed(state, prop);
    }
    return 0;
}

/* Both blob getters: the bytes (never NULL) and their length. */
static int entity_state__get_blob(const entity_state *state, uint16_t prop, uint32_t index, entity_def_kind kind,
                                  const uint8_t **data, size_t *length) {
    static const uint8_t empty[1] = {0};
    *data = empty;
    if (length != NULL) *length = 0;
    ENTITY_STATE__FIND(state, prop, index, type->kind == kind);
    if (rc_ != 0) return rc_;
    if (slot->blob.data != NULL) *data = slot->blob.data;
    if (length != NULL) *length = slot->blob.length;
    return 0;
}

int entity_state_get_string(const entity_state *state, uint16_t prop, uint32_t index, const char **data,
                            size_t *length) {
    const uint8_t *bytes;
    int rc = entity_state__get_blob(state, prop, index, ENTITY_DEF_STRING, &bytes, length);
    *data = (const char *)bytes;
    return rc;
}

int entity_state_set_string(entity_state *state, uint16_t prop, uint32_t index, const char *data, size_t length) {
    ENTITY_STATE__FIND(state, prop, index, type->kind == ENTITY_DEF_STRING);
    if (rc_ != 0) return rc_;
    if (length > type->max_length) return ENTITY_STATE_ERROR_RANGE;
    if (data == NULL && length != 0) return ENTITY_STATE_ERROR_INVALID;
    entity_state_utf8 utf8 = {0};
    if (!entity_state__utf8_feed(&utf8, (const uint8_t *)data, length) || !entity_state__utf8_complete(&utf8))
        return ENTITY_STATE_ERROR_INVALID;
    if (entity_state__blob_store(slot, data, length)) entity_state__changed(state, prop);
    return 0;
}

int entity_state_get_bytes(const entity_state *state, uint16_t prop, uint32_t index, const uint8_t **data,
                           size_t *length) {
    return entity_state__get_blob(state, prop, index, ENTITY_DEF_BYTES, data, length);
}

int entity_state_set_bytes(entity_state *state, uint16_t prop, uint32_t index, const void *data, size_t length) {
    ENTITY_STATE__FIND(state, prop, index, type->kind == ENTITY_DEF_BYTES);
    if (rc_ != 0) return rc_;
    if (length > type->max_length) return ENTITY_STATE_ERROR_RANGE;
    if (data == NULL && length != 0) return ENTITY_STATE_ERROR_INVALID;
    if (entity_state__blob_store(slot, data, length)) entity_state__changed(state, prop);
    return 0;
}

static int entity_state__get_vector(const entity_state *state, uint16_t prop, uint32_t index, entity_def_kind kind,
                                    double *out, unsigned n) {
    for (unsigned i = 0; i < n; i++) out[i] = 0;
    ENTITY_STATE__FIND(state, prop, index, type->kind == kind);
    if (rc_ != 0) return rc_;
    for (unsigned i = 0; i < n; i++) out[i] = slot->v[i];
    return 0;
}

static int entity_state__set_vector(entity_state *state, uint16_t prop, uint32_t index, entity_def_kind kind,
                                    const double *in, unsigned n) {
    ENTITY_STATE__FIND(state, prop, index, type->kind == kind);
    if (rc_ != 0) return rc_;
    double stored[3];
    bool changed = false;
    for (unsigned i = 0; i < n; i++) {
        int rc = entity_state__number(type, in[i], &stored[i]);
        if (rc != 0) return rc;
        changed |= stored[i] != slot->v[i];
    }
    if (changed) {
        for (unsigned i = 0; i < n; i++) slot->v[i] = stored[i];
        entity_state__changed(state, prop);
    }
    return 0;
}

int entity_state_get_vector2(const entity_state *state, uint16_t prop, uint32_t index, double out[2]) {
    return entity_state__get_vector(state, prop, index, ENTITY_DEF_VECTOR2, out, 2);
}

int entity_state_set_vector2(entity_state *state, uint16_t prop, uint32_t index, double x, double y) {
    double in[2] = {x, y};
    return entity_state__set_vector(state, prop, index, ENTITY_DEF_VECTOR2, in, 2);
}

int entity_state_get_vector3(const entity_state *state, uint16_t prop, uint32_t index, double out[3]) {
    return entity_state__get_vector(state, prop, index, ENTITY_DEF_VECTOR3, out, 3);
}

int entity_state_set_vector3(entity_state *state, uint16_t prop, uint32_t index, double x, double y, double z) {
    double in[3] = {x, y, z};
    return entity_state__set_vector(state, prop, index, ENTITY_DEF_VECTOR3, in, 3);
}

int entity_state_get_entity(const entity_state *state, uint16_t prop, uint32_t index, uint64_t *out) {
    *out = 0;
    ENTITY_STATE__FIND(state, prop, index, type->kind == ENTITY_DEF_ENTITY);
    if (rc_ != 0) return rc_;
    *out = slot->u;
    return 0;
}

int entity_state_set_entity(entity_state *state, uint16_t prop, uint32_t index, uint64_t value) {
    ENTITY_STATE__FIND(state, prop, index, type->kind == ENTITY_DEF_ENTITY);
    if (rc_ != 0) return rc_;
    if (slot->u != value) {
        slot->u = value;
        entity_state__changed(state, prop);
    }
    return 0;
}

/* ---- dirty properties ------------------------------------------------- */

const entity_state_mask *entity_state_dirty(const entity_state *state) { return &state->dirty; }

bool entity_state_is_dirty(const entity_state *state, uint16_t prop) {
    return entity_state_mask_has(&state->dirty, prop);
}

int entity_state_next_dirty(const entity_state *state, int after) {
    return entity_state_mask_next(&state->dirty, after);
}

int entity_state_mark_dirty(entity_state *state, uint16_t prop) {
    if (prop >= state->cls->property_count) return ENTITY_STATE_ERROR_NO_SUCH_PROPERTY;
    entity_state__changed(state, prop);
    return 0;
}

void entity_state_clear_dirty(entity_state *state) {
    memset(&state->dirty, 0, sizeof state->dirty);
    state->dirtied_told = false;
}

void entity_state_on_dirtied(entity_state *state, entity_state_dirtied_fn dirtied, void *context) {
    state->dirtied = dirtied;
    state->dirtied_context = context;
    state->dirtied_told = false;
    if (dirtied && !entity_state_mask_empty(&state->dirty)) entity_state__tell_dirtied(state);
}

/* ---- the whole state -------------------------------------------------- */

void entity_state_encode_all(const entity_state *state, bit_writer *w) {
    for (size_t p = 0; p < state->cls->property_count; p++) {
        if (property_codec_encode(w, state, (uint16_t)p) != 0)
            log_panic("entity_state: cannot encode property %zu of %s", p, state->cls->name);
    }
}

int entity_state_decode_all(entity_state *state, bit_reader *r) {
    const entity_def_class *cls = state->cls;
    bit_reader check = *r;
    for (size_t p = 0; p < cls->property_count; p++) {
        int rc = property_codec_check(&check, &cls->properties[p].type);
        if (rc != 0) {
            bit_reader_fail(r);
            return rc;
        }
    }
    for (size_t p = 0; p < cls->property_count; p++) {
        int rc = property_codec_decode(r, state, (uint16_t)p);
        if (rc != 0)
            log_panic("entity_state: property %zu of %s failed after its check: %s", p, cls->name,
                      property_codec_strerror(rc));
    }
    return 0;
}

const char *entity_state_strerror(int code) {
    switch (code) {
        case 0:
            return "ok";
        case ENTITY_STATE_ERROR_NO_SUCH_PROPERTY:
            return "no such property";
        case ENTITY_STATE_ERROR_INDEX:
            return "no such value in the property";
        case ENTITY_STATE_ERROR_TYPE:
            return "wrong type for the property";
        case ENTITY_STATE_ERROR_RANGE:
            return "value outside the declared range";
        case ENTITY_STATE_ERROR_INVALID:
            return "string is not UTF-8 without NUL bytes";
        case ENTITY_STATE_ERROR_CLASS:
            return "states of different classes";
        default:
            return "unknown entity_state error";
    }
}
