/* entity_state.h -- the engine-owned property values of one entity, laid out
 * from its entity_def class, behind typed accessors whose setters check the
 * declared type and range and mark what changed.
 *
 * Layout: one slot per flattened value, as entity_def's value_count counts
 * them. A property owns value_count consecutive slots; arrays are flattened
 * element by element and structs field by field, in declaration order and
 * recursively. A string, a bytes value and a vector are one slot each, so a
 * vector is read and written whole (vector2/vector3 accessors), never per
 * component. An accessor names a value by (property id, index), the index
 * counting flattened values within the property: 0 for a scalar property;
 * for `array of 8 uint16`, 0..7; for `array of 4 {hp: int16, pos: vector3}`,
 * element i's hp is 2*i and its pos 2*i+1. entity_state_index turns a path
 * such as "[3].pos" into that index.
 *
 * A new state holds every property's declared default and nothing is dirty.
 *
 * Writes: a setter accepts a value only if the accessor matches the value's
 * kind (int: int8..int64, uint: uint8..uint64, float: float and double,
 * string, bytes, vector2, vector3, bool, entity) and the value is legal:
 *   integers   within [int_min, int_max] of the declared bit width;
 *   quantized  within [quant_min, quant_max] (every component of a vector);
 *   float      finite, and (unquantized float and vector components) at most
 *              FLT_MAX in magnitude;
 *   string     at most max_length bytes of UTF-8 without NUL bytes;
 *   bytes      at most max_length bytes.
 * Otherwise it returns a negative ENTITY_STATE_ERROR_* and changes nothing:
 * no wrap, no clamp, no dirty bit. What is stored: integers, bools, entity
 * ids, strings and bytes exactly; doubles and quantized numbers exactly (the
 * wire quantizes, the state does not); unquantized float and vector
 * components rounded to the nearest float, since that is what the wire
 * carries, so that a receiver holds the same value as the sender; -0 as 0.
 * A write that changes the stored value marks its property dirty; writing
 * the value already stored does not.
 *
 * This module does not know who receives a property (entity_def's audience)
 * or how values are packed (property_codec.h); entity_state_encode_all and
 * _decode_all are the codec applied to every property.
 *
 * A state refers to its class: the registry must outlive it. Within a
 * process it is addressed by pointer; across processes only through the
 * encoded form.
 */
#ifndef TESSERA_ENTITY_STATE_H
#define TESSERA_ENTITY_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bit_stream.h"
#include "entity_def.h"

/* Error codes, distinct from bit_stream's and property_codec's. */
#define ENTITY_STATE_ERROR_NO_SUCH_PROPERTY (-10) /* no property with this id */
#define ENTITY_STATE_ERROR_INDEX (-11)            /* index past the property's values, or a bad path */
#define ENTITY_STATE_ERROR_TYPE (-12)             /* the accessor does not match the value's kind */
#define ENTITY_STATE_ERROR_RANGE (-13)            /* outside the range or max_length, or not finite */
#define ENTITY_STATE_ERROR_INVALID (-14)          /* a string that is not UTF-8 or holds a NUL byte */
#define ENTITY_STATE_ERROR_CLASS (-15)            /* two states of different classes */

/* ---- property sets ---------------------------------------------------- */

/* A set of property ids of one class (a class has at most
 * ENTITY_DEF_MAX_MEMBERS properties): dirty properties, the properties an
 * audience receives, the properties a change list carries. Plain data:
 * zero-initialise it for the empty set. */
#define ENTITY_STATE_MASK_WORDS ((ENTITY_DEF_MAX_MEMBERS + 63) / 64)
typedef struct entity_state_mask {
    uint64_t words[ENTITY_STATE_MASK_WORDS];
} entity_state_mask;

static inline void entity_state_mask_add(entity_state_mask *m, uint16_t id) {
    if (id < ENTITY_DEF_MAX_MEMBERS) m->words[id / 64] |= UINT64_C(1) << (id % 64);
}
static inline void entity_state_mask_remove(entity_state_mask *m, uint16_t id) {
    if (id < ENTITY_DEF_MAX_MEMBERS) m->words[id / 64] &= ~(UINT64_C(1) << (id % 64));
}
static inline bool entity_state_mask_has(const entity_state_mask *m, uint16_t id) {
    return id < ENTITY_DEF_MAX_MEMBERS && (m->words[id / 64] >> (id % 64) & 1) != 0;
}
/* The set of properties 0..count-1 (count at most ENTITY_DEF_MAX_MEMBERS). */
void entity_state_mask_all(entity_state_mask *m, size_t count);
/* Inline: the witness asks it for every pair it touches. */
static inline bool entity_state_mask_empty(const entity_state_mask *m) {
    uint64_t any = 0;
    for (size_t w = 0; w < ENTITY_STATE_MASK_WORDS; w++) any |= m->words[w];
    return any == 0;
}
/* *out = a AND b (out may be a or b). */
void entity_state_mask_intersect(entity_state_mask *out, const entity_state_mask *a, const entity_state_mask *b);
/* The smallest id in the set greater than `after` (-1 to start), or -1:
 *   for (int p = entity_state_mask_next(m, -1); p >= 0; p = entity_state_mask_next(m, p)) */
int entity_state_mask_next(const entity_state_mask *m, int after);

/* ---- lifetime --------------------------------------------------------- */

typedef struct entity_state entity_state;

/* A state of class `cls` holding every default, nothing dirty. Freed with
 * entity_state_free. Out of memory stops the process. */
entity_state *entity_state_create(const entity_def_class *cls);
/* Frees the state and its strings. NULL is allowed. */
void entity_state_free(entity_state *state);
const entity_def_class *entity_state_class(const entity_state *state);

/* Makes `dst` a copy of `src`: every value and the dirty set. Returns 0, or
 * ENTITY_STATE_ERROR_CLASS (dst unchanged) when their classes differ. */
int entity_state_copy(entity_state *dst, const entity_state *src);
/* Copies property `prop`'s value from `src` to `dst` (same class), marking
 * it dirty in `dst` when it changed. Returns 0, or ENTITY_STATE_ERROR_CLASS
 * / ENTITY_STATE_ERROR_NO_SUCH_PROPERTY (dst unchanged). */
int entity_state_copy_property(entity_state *dst, const entity_state *src, uint16_t prop);

/* ---- naming values ---------------------------------------------------- */

/* The index of the value at `path` within property `prop`: "" is the first
 * value (index 0), "[i]" an array element, ".name" (or "name" first) a
 * struct field; they chain: "[3].pos", "slots[1]" when a field is an array.
 * The path must lead to a single value (a scalar, string, bytes or vector),
 * except that "" is always allowed. Returns 0 with *index set, or
 * ENTITY_STATE_ERROR_NO_SUCH_PROPERTY, or ENTITY_STATE_ERROR_INDEX for a
 * path that does not fit the type. */
int entity_state_index(const entity_def_class *cls, uint16_t prop, const char *path, uint32_t *index);

/* The type of value `index` of property `prop` (never an array or struct),
 * or NULL when there is no such value. Owned by the registry. */
const entity_def_type *entity_state_value_type(const entity_def_class *cls, uint16_t prop, uint32_t index);

/* ---- accessors -------------------------------------------------------- */

/* Getters return 0, or ENTITY_STATE_ERROR_NO_SUCH_PROPERTY, _INDEX or _TYPE
 * with the output zeroed. Setters return 0, or one of those, _RANGE or
 * _INVALID, and then change nothing (see the top of this file). */
int entity_state_get_int(const entity_state *state, uint16_t prop, uint32_t index, int64_t *out);
int entity_state_set_int(entity_state *state, uint16_t prop, uint32_t index, int64_t value);
int entity_state_get_uint(const entity_state *state, uint16_t prop, uint32_t index, uint64_t *out);
int entity_state_set_uint(entity_state *state, uint16_t prop, uint32_t index, uint64_t value);
/* float and double (not vectors). */
int entity_state_get_float(const entity_state *state, uint16_t prop, uint32_t index, double *out);
int entity_state_set_float(entity_state *state, uint16_t prop, uint32_t index, double value);
int entity_state_get_bool(const entity_state *state, uint16_t prop, uint32_t index, bool *out);
int entity_state_set_bool(entity_state *state, uint16_t prop, uint32_t index, bool value);
/* The string's bytes, NUL-terminated, and its length (length may be NULL).
 * The pointer is valid until the value is next written or the state freed. */
int entity_state_get_string(const entity_state *state, uint16_t prop, uint32_t index, const char **data,
                            size_t *length);
/* Copies `length` bytes from `data` (NULL allowed when length is 0). */
int entity_state_set_string(entity_state *state, uint16_t prop, uint32_t index, const char *data, size_t length);
/* As the string accessors; *data is never NULL. */
int entity_state_get_bytes(const entity_state *state, uint16_t prop, uint32_t index, const uint8_t **data,
                           size_t *length);
int entity_state_set_bytes(entity_state *state, uint16_t prop, uint32_t index, const void *data, size_t length);
int entity_state_get_vector2(const entity_state *state, uint16_t prop, uint32_t index, double out[2]);
int entity_state_set_vector2(entity_state *state, uint16_t prop, uint32_t index, double x, double y);
int entity_state_get_vector3(const entity_state *state, uint16_t prop, uint32_t index, double out[3]);
int entity_state_set_vector3(entity_state *state, uint16_t prop, uint32_t index, double x, double y, double z);
/* An entity id; 0 means none. Any id is accepted: whether it names a live
 * entity is the caller's question. */
int entity_state_get_entity(const entity_state *state, uint16_t prop, uint32_t index, uint64_t *out);
int entity_state_set_entity(entity_state *state, uint16_t prop, uint32_t index, uint64_t value);

/* ---- dirty properties ------------------------------------------------- */

/* The properties changed since the dirty set was last cleared. */
const entity_state_mask *entity_state_dirty(const entity_state *state);
bool entity_state_is_dirty(const entity_state *state, uint16_t prop);
/* The next dirty property after `after` (-1 to start), or -1. */
int entity_state_next_dirty(const entity_state *state, int after);
/* Marks a property dirty without a write (to resend it whole). Returns 0 or
 * ENTITY_STATE_ERROR_NO_SUCH_PROPERTY. */
int entity_state_mark_dirty(entity_state *state, uint16_t prop);
/* Clears every dirty mark (once per tick, after packing). */
void entity_state_clear_dirty(entity_state *state);
/* Has `dirtied(context)` called when the state's first property becomes
 * dirty after a clear (or its creation): once between two clears, however
 * many writes follow. The owner learns which states changed without
 * looking at them all (the cellapp's list of what changed in a tick).
 * NULL stops it. */
typedef void (*entity_state_dirtied_fn)(void *context);
void entity_state_on_dirtied(entity_state *state, entity_state_dirtied_fn dirtied, void *context);

/* ---- the whole state -------------------------------------------------- */

/* Appends every property, in id order, with property_codec's encoding and
 * no ids (both ends know the class). The class and the dirty set are not
 * included: the caller sends what identifies the class, and the dirty set
 * if the receiver must resend. Never allocates once the writer is large
 * enough. */
void entity_state_encode_all(const entity_state *state, bit_writer *w);

/* Reads what entity_state_encode_all wrote into `state`, all or nothing:
 * every value is checked first (as property_codec_decode_changes does), and
 * on any error nothing is written, `r` is left failed, and a
 * PROPERTY_CODEC_ERROR_* is returned. On success the properties whose value
 * changed are marked dirty. */
int entity_state_decode_all(entity_state *state, bit_reader *r);

const char *entity_state_strerror(int code);

/* ---- for property_codec.c only ---------------------------------------- */

/* One slot. Which member is live follows the value's type: i for signed
 * integers; u for unsigned integers and entity ids; d for float and double;
 * b for bool; v[0..1] or v[0..2] for vectors; blob for string and bytes. */
typedef struct entity_state_blob {
    uint8_t *data;     /* NULL until the first non-empty value; NUL-terminated */
    uint32_t length;   /* bytes of the value */
    uint32_t capacity; /* bytes allocated, the terminator included */
} entity_state_blob;

typedef union entity_state_slot {
    int64_t i;
    uint64_t u;
    double d;
    bool b;
    double v[3];
    entity_state_blob blob;
} entity_state_slot;

/* The first slot of property `prop` (which must exist). */
entity_state_slot *entity_state__slots(entity_state *state, uint16_t prop);
const entity_state_slot *entity_state__const_slots(const entity_state *state, uint16_t prop);
/* Makes room for a value of `length` bytes plus the terminator, sets the
 * length and terminator, and returns where the bytes go. The old content is
 * lost. May allocate (only when the value is longer than ever before). */
uint8_t *entity_state__blob_resize(entity_state_slot *slot, size_t length);

/* UTF-8 validation that can be fed in pieces. Zero-initialise, feed, then
 * check that nothing is left open with entity_state__utf8_complete. */
typedef struct entity_state_utf8 {
    uint8_t need;   /* continuation bytes still expected */
    uint8_t lo, hi; /* range of the next continuation byte */
} entity_state_utf8;
/* False at the first byte that breaks UTF-8, or a NUL byte. */
bool entity_state__utf8_feed(entity_state_utf8 *u, const uint8_t *bytes, size_t length);
bool entity_state__utf8_complete(const entity_state_utf8 *u);

#endif
