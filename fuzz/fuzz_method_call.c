/* fuzz_method_call.c -- fuzzes common/method_call.c, the arguments of a
 * remote method call as a client sends them (EntityCall.args) and peers
 * relay them (BaseCall, CellCall), against the demo definitions. The first
 * three bytes pick the class, the part (base, cell, client) and the
 * method; the rest are the arguments.
 *
 * Checks: method_call_check and method_call_decode agree; decoded
 * arguments encode in no more bytes than received and round-trip from
 * there unchanged; a refused call leaves the arguments at their zero values;
 * method_call_prepare agrees with the two; no crash, no leak. */
#include <string.h>

#include "entity_state.h"
#include "fuzz_support.h"
#include "method_call.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 3) return 0;
    const entity_def_registry *definitions = fuzz_definitions();
    const entity_def_class *cls =
        entity_def_registry_class(definitions, (uint16_t)(data[0] % entity_def_registry_class_count(definitions)));
    static const entity_def_part parts[] = {ENTITY_DEF_PART_BASE, ENTITY_DEF_PART_CELL, ENTITY_DEF_PART_CLIENT};
    entity_def_part part = parts[data[1] % 3];
    const entity_def_method *method = entity_def_class_method(cls, part, data[2]);
    const uint8_t *args = data + 3;
    size_t length = size - 3;
    if (method) {
        int checked = method_call_check(method, args, length);
        entity_state *decoded = method_call_args_create(method);
        entity_state *zero = method_call_args_create(method);
        int rc = method_call_decode(decoded, args, length);
        fuzz_check((checked == 0) == (rc == 0), "method_call_check and method_call_decode disagree");
        bit_writer w;
        bit_writer_init(&w);
        method_call_encode(decoded, &w);
        if (rc == 0) {
            /* bit_stream.c's writer picks the shortest uvar and its reader
             * takes a longer one too, so the bytes need not come back the
             * same: the values must, in no more bytes. */
            fuzz_check(bit_writer_bytes(&w) <= length, "decoded arguments encode longer than received");
            entity_state *again = method_call_args_create(method);
            fuzz_check(method_call_decode(again, bit_writer_data(&w), bit_writer_bytes(&w)) == 0,
                       "encoded arguments are refused");
            bit_writer w2;
            bit_writer_init(&w2);
            method_call_encode(again, &w2);
            fuzz_check(bit_writer_bytes(&w2) == bit_writer_bytes(&w) &&
                           (bit_writer_bytes(&w) == 0 ||
                            memcmp(bit_writer_data(&w2), bit_writer_data(&w), bit_writer_bytes(&w)) == 0),
                       "arguments change on a round trip");
            bit_writer_close(&w2);
            entity_state_free(again);
        } else {
            bit_writer wz;
            bit_writer_init(&wz);
            method_call_encode(zero, &wz);
            fuzz_check(bit_writer_bytes(&w) == bit_writer_bytes(&wz) &&
                           (bit_writer_bytes(&w) == 0 ||
                            memcmp(bit_writer_data(&w), bit_writer_data(&wz), bit_writer_bytes(&w)) == 0),
                       "refused arguments changed the state");
            bit_writer_close(&wz);
        }
        bit_writer_close(&w);
        entity_state_free(zero);
        entity_state_free(decoded);
    }
    if (part != ENTITY_DEF_PART_CLIENT) {
        const entity_def_method *prepared = NULL;
        entity_state *prepared_args = NULL;
        char reason[256];
        method_call_verdict verdict = method_call_prepare(cls, part, data[2], args, length, data[1] & 4, &prepared,
                                                          &prepared_args, reason, sizeof reason);
        fuzz_check(verdict != METHOD_CALL_OK || (method && prepared == method && prepared_args),
                   "method_call_prepare accepted a call the method does not take");
        fuzz_check(verdict != METHOD_CALL_BAD_ARGUMENTS || (method && method_call_check(method, args, length) != 0),
                   "method_call_prepare refused arguments method_call_check takes");
        entity_state_free(prepared_args);
    }
    return 0;
}
