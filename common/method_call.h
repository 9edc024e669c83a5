/* method_call.h -- the arguments of a remote method call on the wire.
 *
 * A method's arguments are the properties of its args_class (entity_def.h),
 * so one call's arguments live in an entity_state of that class, written
 * with its checked setters, and travel as entity_state_encode_all's bits
 * (every argument, in order, property_codec's encoding) padded with zero
 * bits to a whole byte. Decoding is all or nothing and exact: every value
 * must be legal for its declared type, and nothing but zero padding may
 * follow the last argument. This is the check that a client's call carries
 * "arguments of the declared types".
 *
 * Who may call which method on which entity is the caller's business (the
 * baseapp and cellapp check `exposed` and the target).
 */
#ifndef TESSERA_METHOD_CALL_H
#define TESSERA_METHOD_CALL_H

#include <stddef.h>
#include <stdint.h>

#include "bit_stream.h"
#include "entity_def.h"
#include "entity_state.h"

/* Bytes that follow the last argument are not zero padding, or there are
 * more than 7 bits of padding. */
#define METHOD_CALL_ERROR_TRAILING (-40)

/* A state holding the method's arguments, each at its type's zero value.
 * Free with entity_state_free. */
entity_state *method_call_args_create(const entity_def_method *method);

/* Appends the arguments in `args` (a state of method->args_class) to `w`,
 * then zero bits to a byte boundary. */
void method_call_encode(const entity_state *args, bit_writer *w);

/* Reads the arguments of `method` from `data` into `args` (a state of
 * method->args_class). Returns 0, or a PROPERTY_CODEC_ERROR_* for a value
 * its type does not allow or a truncated call, or METHOD_CALL_ERROR_TRAILING;
 * on an error `args` is unchanged. */
int method_call_decode(entity_state *args, const uint8_t *data, size_t length);

/* Checks that `data` holds exactly the arguments of `method`, storing
 * nothing. Returns as method_call_decode. Does not allocate. */
int method_call_check(const entity_def_method *method, const uint8_t *data, size_t length);

const char *method_call_strerror(int code);

#endif
