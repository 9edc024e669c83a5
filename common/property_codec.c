/* property_codec.c -- the wire form of property values and change lists, and
 * the decoder's checks.
 *
 * It owns how a value of each entity_def type is packed into bits (on top of
 * bit_stream.c's bit order and variable-length integers) and nothing else:
 * values live in entity_state.c, audiences in entity_def.c and the cellapp.
 *
 * One value of a type (both ends know the type from the shared definitions,
 * so nothing describes it on the wire):
 *
 *   int8, int16, and any integer    (v - int_min) in `bits` bits: the bit
 *   with a bit width below 32/64    width is the legal range, so every
 *                                   pattern is a legal value.
 *   int32, int64 at their natural   zigzag svar (bit_stream.c): small
 *   width (no "bits", or the full   magnitudes of either sign are short
 *   width declared)                 (|v| < 8: 8 bits; 36 bits at worst for
 *                                   int32, 68 for int64).
 *   uint32, uint64 at natural width uvar (0..15: 8 bits; 36 / 68 at worst).
 *   uint8, uint16, narrower uints   v in `bits` bits.
 *   float, double quantized         q = round((v - min) / precision), halves
 *                                   up, in `bits` bits; decoded as
 *                                   min + q * precision, at most max, so
 *                                   the round trip is exact to within
 *                                   precision / 2. A q above that of max is
 *                                   rejected.
 *   float (unquantized)             IEEE 754 single, 32 bits
 *   double (unquantized)            IEEE 754 double, 64 bits
 *                                   (NaN and infinities are rejected)
 *   bool                            1 bit
 *   string, bytes                   length in property_codec_bits_for(
 *                                   max_length) bits (1..16), then the
 *                                   bytes, 8 bits each, not aligned; a
 *                                   string must be UTF-8 without NUL.
 *   vector2, vector3                each component as a float of the same
 *                                   quantization (x, y[, z])
 *   entity                          the 64-bit id, 64 bits
 *   array                           each element in order, no count (fixed)
 *   struct                          each field in declaration order
 *
 * A change list, for one entity of a known class with N properties:
 *
 *   count            property_codec_bits_for(N) bits, at most N
 *   count times:     id in property_codec_bits_for(N - 1) bits, strictly
 *                    increasing; then the value as above
 *
 * An Avatar (8 properties) sending only its 12-bit health thus costs
 * 4 + 3 + 12 = 19 bits. The whole-state form (entity_state_encode_all) is
 * every value in id order with no count and no ids.
 *
 * Decoding is two passes: a check pass over a copy of the reader that
 * validates everything and stores nothing, then an apply pass that cannot
 * fail. That is how a malformed message leaves the state untouched without
 * a scratch copy of the values.
 */
#include "property_codec.h"

#include "log.h"

#include <math.h>
#include <string.h>

/* Strings are checked and compared through a stack buffer of this size: big
 * enough that a typical name is one read, small enough for any stack. */
#define PROPERTY_CODEC__CHUNK 256

/* ---- helpers ---------------------------------------------------------- */

unsigned property_codec_bits_for(uint64_t max) { return max == 0 ? 0 : 64 - (unsigned)__builtin_clzll(max); }

/* Integers sent as variable-length: the 32- and 64-bit kinds at their full
 * width, where a fixed field would spend 32 or 64 bits on every small
 * value. */
static bool property_codec__varint(const entity_def_type *type) {
    switch (type->kind) {
        case ENTITY_DEF_INT32:
        case ENTITY_DEF_UINT32:
            return type->bits == 32;
        case ENTITY_DEF_INT64:
        case ENTITY_DEF_UINT64:
            return type->bits == 64;
        default:
            return false;
    }
}

/* round(steps) with halves up, as an index of `type->bits` bits. */
static uint64_t property_codec__index(const entity_def_type *type, double steps) {
    double rounded = floor(steps + 0.5);
    if (!(rounded > 0)) return 0;
    if (rounded >= ldexp(1.0, (int)type->bits)) return type->bits >= 64 ? UINT64_MAX : (UINT64_C(1) << type->bits) - 1;
    return (uint64_t)rounded;
}

uint64_t property_codec_quantize(const entity_def_type *type, double v) {
    return property_codec__index(type, (v - type->quant_min) / type->quant_precision);
}

uint64_t property_codec_quantize_max(const entity_def_type *type) {
    return property_codec_quantize(type, type->quant_max);
}

double property_codec_dequantize(const entity_def_type *type, uint64_t q) {
    double v = type->quant_min + (double)q * type->quant_precision;
    return v > type->quant_max ? type->quant_max : v;
}

/* ---- encoding --------------------------------------------------------- */

static void property_codec__put_real(bit_writer *w, const entity_def_type *type, double v) {
    if (type->quantized)
        bit_writer_write(w, property_codec_quantize(type, v), type->bits);
    else if (type->kind == ENTITY_DEF_DOUBLE)
        bit_writer_write_double(w, v);
    else
        bit_writer_write_float(w, (float)v);
}

/* Appends a value of `type` from the slots at `slot`; returns the slot
 * after them. The state's setters guarantee every value fits, so a value
 * that does not is a broken invariant, and bit_writer_write stops on it. */
static const entity_state_slot *property_codec__put(bit_writer *w, const entity_def_type *type,
                                                    const entity_state_slot *slot) {
    switch (type->kind) {
        case ENTITY_DEF_INT8:
        case ENTITY_DEF_INT16:
        case ENTITY_DEF_INT32:
        case ENTITY_DEF_INT64:
            if (property_codec__varint(type))
                bit_writer_write_svar(w, slot->i);
            else
                bit_writer_write(w, (uint64_t)slot->i - (uint64_t)type->int_min, type->bits);
            return slot + 1;
        case ENTITY_DEF_UINT8:
        case ENTITY_DEF_UINT16:
        case ENTITY_DEF_UINT32:
        case ENTITY_DEF_UINT64:
            if (property_codec__varint(type))
                bit_writer_write_uvar(w, slot->u);
            else
                bit_writer_write(w, slot->u, type->bits);
            return slot + 1;
        case ENTITY_DEF_FLOAT:
        case ENTITY_DEF_DOUBLE:
            property_codec__put_real(w, type, slot->d);
            return slot + 1;
        case ENTITY_DEF_BOOL:
            bit_writer_write_bool(w, slot->b);
            return slot + 1;
        case ENTITY_DEF_STRING:
        case ENTITY_DEF_BYTES:
            bit_writer_write(w, slot->blob.length, property_codec_bits_for(type->max_length));
            bit_writer_write_bytes(w, slot->blob.data, slot->blob.length);
            return slot + 1;
        case ENTITY_DEF_VECTOR2:
        case ENTITY_DEF_VECTOR3: {
            unsigned n = type->kind == ENTITY_DEF_VECTOR2 ? 2 : 3;
            for (unsigned i = 0; i < n; i++) property_codec__put_real(w, type, slot->v[i]);
            return slot + 1;
        }
        case ENTITY_DEF_ENTITY:
            bit_writer_write(w, slot->u, 64);
            return slot + 1;
        case ENTITY_DEF_ARRAY:
            for (uint32_t i = 0; i < type->count; i++) slot = property_codec__put(w, type->element, slot);
            return slot;
        case ENTITY_DEF_STRUCT:
            for (size_t f = 0; f < type->structure->field_count; f++)
                slot = property_codec__put(w, &type->structure->fields[f].type, slot);
            return slot;
    }
    log_panic("property_codec: bad kind %d", (int)type->kind);
}

int property_codec_encode(bit_writer *w, const entity_state *state, uint16_t prop) {
    const entity_def_class *cls = entity_state_class(state);
    if (prop >= cls->property_count) return ENTITY_STATE_ERROR_NO_SUCH_PROPERTY;
    property_codec__put(w, &cls->properties[prop].type, entity_state__const_slots(state, prop));
    return 0;
}

/* ---- decoding --------------------------------------------------------- */

/* Reads `bits` bits, mapping truncation to the codec's code. */
#define PROPERTY_CODEC__READ(call)                              \
    do {                                                        \
        if ((call) != 0) return PROPERTY_CODEC_ERROR_TRUNCATED; \
    } while (0)

/* One float, double or vector component, checked. */
static int property_codec__get_real(bit_reader *r, const entity_def_type *type, double *out) {
    double v;
    if (type->quantized) {
        uint64_t q;
        PROPERTY_CODEC__READ(bit_reader_read(r, type->bits, &q));
        if (q > property_codec_quantize_max(type)) return PROPERTY_CODEC_ERROR_RANGE;
        v = property_codec_dequantize(type, q);
    } else if (type->kind == ENTITY_DEF_DOUBLE) {
        PROPERTY_CODEC__READ(bit_reader_read_double(r, &v));
    } else {
        float f;
        PROPERTY_CODEC__READ(bit_reader_read_float(r, &f));
        v = f;
    }
    if (!isfinite(v)) return PROPERTY_CODEC_ERROR_RANGE;
    *out = v == 0 ? 0.0 : v; /* -0 is stored as 0, as the setters do */
    return 0;
}

/* The bytes of a string or bytes value of `length` bytes. Checking (slot
 * NULL): a string must be UTF-8 without NUL. Applying: stores them into
 * `slot`, setting *changed if they differ. */
static int property_codec__get_blob(bit_reader *r, const entity_def_type *type, size_t length, entity_state_slot *slot,
                                    bool *changed) {
    uint8_t chunk[PROPERTY_CODEC__CHUNK];
    if (slot == NULL) {
        if (type->kind == ENTITY_DEF_BYTES) {
            PROPERTY_CODEC__READ(bit_reader_skip(r, length * 8));
            return 0;
        }
        entity_state_utf8 utf8 = {0};
        for (size_t done = 0; done < length;) {
            size_t n = length - done < sizeof chunk ? length - done : sizeof chunk;
            PROPERTY_CODEC__READ(bit_reader_read_bytes(r, chunk, n));
            if (!entity_state__utf8_feed(&utf8, chunk, n)) return PROPERTY_CODEC_ERROR_INVALID;
            done += n;
        }
        return entity_state__utf8_complete(&utf8) ? 0 : PROPERTY_CODEC_ERROR_INVALID;
    }
    bit_reader start = *r;
    bool same = slot->blob.length == length;
    for (size_t done = 0; same && done < length;) {
        size_t n = length - done < sizeof chunk ? length - done : sizeof chunk;
        PROPERTY_CODEC__READ(bit_reader_read_bytes(r, chunk, n));
        same = memcmp(chunk, slot->blob.data + done, n) == 0;
        done += n;
    }
    if (same) return 0;
    *r = start;
    uint8_t *dst = entity_state__blob_resize(slot, length);
    if (length != 0) PROPERTY_CODEC__READ(bit_reader_read_bytes(r, dst, length));
    *changed = true;
    return 0;
}

/* Reads a value of `type`. With *slot NULL (or slot NULL) it only checks;
 * otherwise it stores into the slots at *slot, advances *slot past them,
 * and sets *changed if any value differs from what was there. Applying is
 * only done on input that passed a check, so it cannot fail half-way. */
static int property_codec__get(bit_reader *r, const entity_def_type *type, entity_state_slot **slot, bool *changed) {
    entity_state_slot *s = slot != NULL ? *slot : NULL;
    if (s != NULL && type->kind != ENTITY_DEF_ARRAY && type->kind != ENTITY_DEF_STRUCT) (*slot)++;
    switch (type->kind) {
        case ENTITY_DEF_INT8:
        case ENTITY_DEF_INT16:
        case ENTITY_DEF_INT32:
        case ENTITY_DEF_INT64: {
            int64_t v;
            if (property_codec__varint(type)) {
                PROPERTY_CODEC__READ(bit_reader_read_svar(r, &v));
                if (v < type->int_min || v > (int64_t)type->int_max) return PROPERTY_CODEC_ERROR_RANGE;
            } else {
                uint64_t raw;
                PROPERTY_CODEC__READ(bit_reader_read(r, type->bits, &raw));
                v = (int64_t)(raw + (uint64_t)type->int_min);
            }
            if (s != NULL && s->i != v) {
                s->i = v;
                *changed = true;
            }
            return 0;
        }
        case ENTITY_DEF_UINT8:
        case ENTITY_DEF_UINT16:
        case ENTITY_DEF_UINT32:
        case ENTITY_DEF_UINT64: {
            uint64_t v;
            if (property_codec__varint(type)) {
                PROPERTY_CODEC__READ(bit_reader_read_uvar(r, &v));
                if (v > type->int_max) return PROPERTY_CODEC_ERROR_RANGE;
            } else {
                PROPERTY_CODEC__READ(bit_reader_read(r, type->bits, &v));
            }
            if (s != NULL && s->u != v) {
                s->u = v;
                *changed = true;
            }
            return 0;
        }
        case ENTITY_DEF_FLOAT:
        case ENTITY_DEF_DOUBLE: {
            double v;
            int rc = property_codec__get_real(r, type, &v);
            if (rc != 0) return rc;
            if (s != NULL && s->d != v) {
                s->d = v;
                *changed = true;
            }
            return 0;
        }
        case ENTITY_DEF_BOOL: {
            bool v;
            PROPERTY_CODEC__READ(bit_reader_read_bool(r, &v));
            if (s != NULL && s->b != v) {
                s->b = v;
                *changed = true;
            }
            return 0;
        }
        case ENTITY_DEF_STRING:
        case ENTITY_DEF_BYTES: {
            uint64_t length;
            PROPERTY_CODEC__READ(bit_reader_read(r, property_codec_bits_for(type->max_length), &length));
            if (length > type->max_length) return PROPERTY_CODEC_ERROR_RANGE;
            return property_codec__get_blob(r, type, (size_t)length, s, changed);
        }
        case ENTITY_DEF_VECTOR2:
        case ENTITY_DEF_VECTOR3: {
            unsigned n = type->kind == ENTITY_DEF_VECTOR2 ? 2 : 3;
            double v[3];
            for (unsigned i = 0; i < n; i++) {
                int rc = property_codec__get_real(r, type, &v[i]);
                if (rc != 0) return rc;
            }
            for (unsigned i = 0; s != NULL && i < n; i++) {
                if (s->v[i] != v[i]) {
                    s->v[i] = v[i];
                    *changed = true;
                }
            }
            return 0;
        }
        case ENTITY_DEF_ENTITY: {
            uint64_t v;
            PROPERTY_CODEC__READ(bit_reader_read(r, 64, &v));
            if (s != NULL && s->u != v) {
                s->u = v;
                *changed = true;
            }
            return 0;
        }
        case ENTITY_DEF_ARRAY:
            for (uint32_t i = 0; i < type->count; i++) {
                int rc = property_codec__get(r, type->element, slot, changed);
                if (rc != 0) return rc;
            }
            return 0;
        case ENTITY_DEF_STRUCT:
            for (size_t f = 0; f < type->structure->field_count; f++) {
                int rc = property_codec__get(r, &type->structure->fields[f].type, slot, changed);
                if (rc != 0) return rc;
            }
            return 0;
    }
    log_panic("property_codec: bad kind %d", (int)type->kind);
}

int property_codec_check(bit_reader *r, const entity_def_type *type) {
    int rc = property_codec__get(r, type, NULL, NULL);
    if (rc != 0) bit_reader_fail(r);
    return rc;
}

/* Applies property `prop` from input that passed its check. */
static void property_codec__apply(bit_reader *r, entity_state *state, uint16_t prop, entity_state_mask *changed_set) {
    const entity_def_property *property = &entity_state_class(state)->properties[prop];
    entity_state_slot *slot = entity_state__slots(state, prop);
    bool changed = false;
    int rc = property_codec__get(r, &property->type, &slot, &changed);
    if (rc != 0)
        log_panic("property_codec: property %s failed after its check: %s", property->name,
                  property_codec_strerror(rc));
    if (changed) {
        entity_state_mark_dirty(state, prop);
        if (changed_set != NULL) entity_state_mask_add(changed_set, prop);
    }
}

int property_codec_decode(bit_reader *r, entity_state *state, uint16_t prop) {
    const entity_def_class *cls = entity_state_class(state);
    if (prop >= cls->property_count) return ENTITY_STATE_ERROR_NO_SUCH_PROPERTY;
    bit_reader check = *r;
    int rc = property_codec_check(&check, &cls->properties[prop].type);
    if (rc != 0) {
        bit_reader_fail(r);
        return rc;
    }
    property_codec__apply(r, state, prop, NULL);
    return 0;
}

/* ---- change lists ----------------------------------------------------- */

int property_codec_encode_changes(bit_writer *w, const entity_state *state, const entity_state_mask *props) {
    const entity_def_class *cls = entity_state_class(state);
    size_t n = cls->property_count;
    uint64_t count = 0;
    for (int p = entity_state_mask_next(props, -1); p >= 0; p = entity_state_mask_next(props, p)) {
        if ((size_t)p >= n) return ENTITY_STATE_ERROR_NO_SUCH_PROPERTY;
        count++;
    }
    unsigned id_bits = n > 0 ? property_codec_bits_for(n - 1) : 0;
    bit_writer_write(w, count, property_codec_bits_for(n));
    for (int p = entity_state_mask_next(props, -1); p >= 0; p = entity_state_mask_next(props, p)) {
        bit_writer_write(w, (uint64_t)p, id_bits);
        property_codec__put(w, &cls->properties[p].type, entity_state__const_slots(state, (uint16_t)p));
    }
    return 0;
}

/* The header of entry `i` of a change list: its id, checked against the
 * class, `accept` and the previous id. */
static int property_codec__get_id(bit_reader *r, size_t n, const entity_state_mask *accept, int previous,
                                  uint16_t *id) {
    uint64_t v;
    PROPERTY_CODEC__READ(bit_reader_read(r, n > 0 ? property_codec_bits_for(n - 1) : 0, &v));
    if (v >= n || (accept != NULL && !entity_state_mask_has(accept, (uint16_t)v)))
        return PROPERTY_CODEC_ERROR_UNEXPECTED_PROPERTY;
    if ((int64_t)v <= previous) return PROPERTY_CODEC_ERROR_MALFORMED;
    *id = (uint16_t)v;
    return 0;
}

/* Reads a change list: checking only (state NULL), or applying. */
static int property_codec__get_changes(bit_reader *r, const entity_def_class *cls, entity_state *state,
                                       const entity_state_mask *accept, entity_state_mask *changed) {
    size_t n = cls->property_count;
    uint64_t count;
    PROPERTY_CODEC__READ(bit_reader_read(r, property_codec_bits_for(n), &count));
    if (count > n) return PROPERTY_CODEC_ERROR_MALFORMED;
    int previous = -1;
    for (uint64_t i = 0; i < count; i++) {
        uint16_t id;
        int rc = property_codec__get_id(r, n, accept, previous, &id);
        if (rc != 0) return rc;
        previous = id;
        if (state != NULL) {
            property_codec__apply(r, state, id, changed);
        } else {
            rc = property_codec__get(r, &cls->properties[id].type, NULL, NULL);
            if (rc != 0) return rc;
        }
    }
    return 0;
}

int property_codec_decode_changes(bit_reader *r, entity_state *state, const entity_state_mask *accept,
                                  entity_state_mask *changed) {
    const entity_def_class *cls = entity_state_class(state);
    bit_reader check = *r;
    int rc = property_codec__get_changes(&check, cls, NULL, accept, NULL);
    if (rc != 0) {
        bit_reader_fail(r);
        return rc;
    }
    if (changed != NULL) memset(changed, 0, sizeof *changed);
    rc = property_codec__get_changes(r, cls, state, accept, changed);
    if (rc != 0)
        log_panic("property_codec: a change list for %s failed after its check: %s", cls->name,
                  property_codec_strerror(rc));
    return 0;
}

const char *property_codec_strerror(int code) {
    switch (code) {
        case PROPERTY_CODEC_ERROR_TRUNCATED:
            return "input ends inside a value";
        case PROPERTY_CODEC_ERROR_RANGE:
            return "value outside its type's range";
        case PROPERTY_CODEC_ERROR_INVALID:
            return "string is not UTF-8 without NUL bytes";
        case PROPERTY_CODEC_ERROR_UNEXPECTED_PROPERTY:
            return "unknown or unexpected property";
        case PROPERTY_CODEC_ERROR_MALFORMED:
            return "malformed change list";
        default:
            return entity_state_strerror(code);
    }
}
