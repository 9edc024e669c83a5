/* property_codec.h -- property values on the bit stream: one property of an
 * entity_state, a change list (some properties with their ids), and the
 * checks that make a decoder safe against any input.
 *
 * The encoding of every type is documented once, at the top of
 * property_codec.c. The encoders read an entity_state and never allocate
 * (the bit writer grows only until it holds the largest message). The
 * decoders are all or nothing: they check every value first, and on any
 * error write nothing into the state, leave the reader failed, and return a
 * PROPERTY_CODEC_ERROR_*. A decoded value always satisfies the setter rules
 * of entity_state.h, so what a decoder stores is what a setter would have
 * accepted; changed properties are marked dirty as a setter would.
 *
 * This module does not decide who receives what: a caller encodes the
 * properties of one audience (dirty AND audience mask) and, when decoding,
 * says which properties it accepts from that sender.
 */
#ifndef TESSERA_PROPERTY_CODEC_H
#define TESSERA_PROPERTY_CODEC_H

#include <stdbool.h>
#include <stdint.h>

#include "bit_stream.h"
#include "entity_def.h"
#include "entity_state.h"

/* Error codes, distinct from bit_stream's and entity_state's. */
#define PROPERTY_CODEC_ERROR_TRUNCATED (-20) /* the input ends inside a value */
/* A value its type does not allow: an integer outside the bit width, a
 * quantized index past the range, a NaN or infinity, a length over
 * max_length. */
#define PROPERTY_CODEC_ERROR_RANGE (-21)
#define PROPERTY_CODEC_ERROR_INVALID (-22) /* a string that is not UTF-8, or has a NUL */
/* A change list names a property the class does not have, or one the
 * caller does not accept from this sender. */
#define PROPERTY_CODEC_ERROR_UNEXPECTED_PROPERTY (-23)
/* A change list that no encoder writes: more entries than properties, or
 * ids not strictly increasing (a property twice). */
#define PROPERTY_CODEC_ERROR_MALFORMED (-24)

/* ---- one property ----------------------------------------------------- */

/* Appends the value(s) of property `prop` of `state`. Returns 0, or
 * ENTITY_STATE_ERROR_NO_SUCH_PROPERTY with nothing written. */
int property_codec_encode(bit_writer *w, const entity_state *state, uint16_t prop);

/* Reads one value of `type` and checks it, storing nothing: to validate, or
 * to skip a value. Returns 0 or a PROPERTY_CODEC_ERROR_* (the reader is
 * then failed). */
int property_codec_check(bit_reader *r, const entity_def_type *type);

/* Reads property `prop` of `state` as property_codec_encode wrote it, all or
 * nothing (see the top of this file); marks it dirty if its value changed.
 * Returns 0, ENTITY_STATE_ERROR_NO_SUCH_PROPERTY (nothing read), or a
 * PROPERTY_CODEC_ERROR_*. */
int property_codec_decode(bit_reader *r, entity_state *state, uint16_t prop);

/* ---- change lists ----------------------------------------------------- */

/* Appends a change list of the properties of `state` in `props`: their
 * count, then for each in increasing id order its id and its value. Returns
 * 0, or ENTITY_STATE_ERROR_NO_SUCH_PROPERTY with nothing written when
 * `props` holds an id the class does not have. An empty set is a valid
 * (short) list. */
int property_codec_encode_changes(bit_writer *w, const entity_state *state, const entity_state_mask *props);

/* Reads a change list into `state`, all or nothing. `accept` is the
 * audience check: the properties this sender may send (NULL accepts every
 * property of the class); any other id is an error
 * (PROPERTY_CODEC_ERROR_UNEXPECTED_PROPERTY). On success, `changed` (may
 * be NULL) receives the properties whose value changed, which are also
 * marked dirty in `state`. */
int property_codec_decode_changes(bit_reader *r, entity_state *state, const entity_state_mask *accept,
                                  entity_state_mask *changed);

/* ---- helpers ---------------------------------------------------------- */

/* Bits needed to send any of 0..max: 0 for 0, else floor(log2(max)) + 1. */
unsigned property_codec_bits_for(uint64_t max);

/* The quantized index of `v` for a quantized `type` (v within its range):
 * round((v - quant_min) / quant_precision), rounding halves up. */
uint64_t property_codec_quantize(const entity_def_type *type, double v);
/* The largest index an encoder sends for `type`, that of quant_max. */
uint64_t property_codec_quantize_max(const entity_def_type *type);
/* quant_min + q * quant_precision, at most quant_max. For v in range,
 * |dequantize(quantize(v)) - v| <= quant_precision / 2 (plus the rounding
 * of double arithmetic, a few units in the last place). */
double property_codec_dequantize(const entity_def_type *type, uint64_t q);

const char *property_codec_strerror(int code);

#endif
