/* fuzz_every_type.c -- fuzzes the property codec (common/property_codec.c,
 * common/entity_state.c, common/method_call.c, common/entity_state_json.c)
 * over every kind of value the definitions allow: the class Thing of
 * fuzz/definitions/every_type.json (quantized floats and vectors, bit
 * widths, strings, bytes, arrays of structs, arrays of arrays), which the
 * demo's classes only partly use. The first byte picks what the rest is:
 *   0: a change list (what ghosts, bases and the entity stream carry);
 *   1: a whole state (entity_state_encode_all's form: a cell state's and
 *      a backup's properties);
 *   2: the arguments of Thing's base method (a client's EntityCall.args);
 *   3: a JSON object of properties (a map's keyvalues, a persisted base).
 *
 * Checks: a refused input leaves the state as it was (all or nothing);
 * what is accepted holds values their types allow: it encodes, decodes
 * into a fresh state with the same values, and its JSON form reads back
 * to the same values; decoded method arguments encode in no more bytes
 * than received; no crash, no leak. */
#include <string.h>

#include <cJSON.h>

#include "entity_state.h"
#include "entity_state_json.h"
#include "fuzz_support.h"
#include "method_call.h"
#include "property_codec.h"

/* What every accepted state must satisfy. */
static void fuzz_every_type_check(const entity_state *state) {
    fuzz_check_state_round_trip(state);
    cJSON *json = entity_state_to_json(state, NULL);
    entity_state *reread = entity_state_create(entity_state_class(state));
    fuzz_check(entity_state_from_json(reread, json, NULL, NULL, NULL) >= 0, "a state's JSON form is not an object");
    fuzz_check(fuzz_same_values(state, reread), "a state's JSON form reads back other values");
    entity_state_free(reread);
    cJSON_Delete(json);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const entity_def_class *thing = entity_def_registry_find_class(fuzz_every_type(), "Thing");
    const uint8_t *rest = data + 1;
    size_t length = size - 1;
    entity_state *state = entity_state_create(thing);
    entity_state *pristine = entity_state_create(thing);
    bit_reader r;
    bit_reader_init(&r, rest, length);
    switch (data[0] % 4) {
        case 0: {
            entity_state_mask changed;
            if (property_codec_decode_changes(&r, state, NULL, &changed) == 0)
                fuzz_every_type_check(state);
            else
                fuzz_check(fuzz_same_values(state, pristine), "a refused change list changed the state");
            break;
        }
        case 1:
            if (entity_state_decode_all(state, &r) == 0)
                fuzz_every_type_check(state);
            else
                fuzz_check(fuzz_same_values(state, pristine), "a refused state changed the state");
            break;
        case 2: {
            const entity_def_method *method = entity_def_class_method(thing, ENTITY_DEF_PART_BASE, 0);
            entity_state *args = method_call_args_create(method);
            if (method_call_decode(args, rest, length) == 0) {
                fuzz_every_type_check(args);
                bit_writer w;
                bit_writer_init(&w);
                method_call_encode(args, &w);
                fuzz_check(bit_writer_bytes(&w) <= length, "decoded arguments encode longer than received");
                fuzz_check(method_call_check(method, bit_writer_data(&w), bit_writer_bytes(&w)) == 0,
                           "decoded arguments, encoded again, are refused");
                bit_writer_close(&w);
            }
            entity_state_free(args);
            break;
        }
        default: {
            cJSON *object = cJSON_ParseWithLength((const char *)rest, length);
            if (object && entity_state_from_json(state, object, NULL, NULL, NULL) > 0) fuzz_every_type_check(state);
            cJSON_Delete(object);
            break;
        }
    }
    entity_state_free(pristine);
    entity_state_free(state);
    return 0;
}
