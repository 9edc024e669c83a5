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

#include <stdbool.h>
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

/* The one check every remote call passes, whoever receives it (a baseapp
 * for base methods, a cellapp for cell methods): the method exists on the
 * class's part, a client's call is of an exposed method, and the arguments
 * are exactly the declared types. */
typedef enum method_call_verdict {
    METHOD_CALL_OK = 0,
    METHOD_CALL_NO_SUCH_METHOD, /* the part has no method of that index */
    METHOD_CALL_NOT_EXPOSED,    /* a client called a method that is not exposed */
    METHOD_CALL_BAD_ARGUMENTS,  /* the arguments are not the declared types */
} method_call_verdict;

/* Checks a call of method `method_id` of `part` of `cls` with the encoded
 * `args`. On METHOD_CALL_OK, *method is the method and *decoded its
 * arguments (a state the caller frees). Otherwise `reason` says what was
 * wrong, naming class and method, and nothing is allocated. */
method_call_verdict method_call_prepare(const entity_def_class *cls, entity_def_part part, uint32_t method_id,
                                        const uint8_t *args, size_t length, bool from_client,
                                        const entity_def_method **method, entity_state **decoded, char *reason,
                                        size_t reason_size);
/* The client ErrorCode (client.proto) for a verdict: what a client that
 * made the call is dropped with. */
int method_call_error_code(method_call_verdict verdict);

#endif
