/* fuzz_property_changes.c -- fuzzes common/property_codec.c's change lists,
 * what a ghost update, a base's cell properties and the client's entity
 * stream carry. The first byte picks a demo class and what the receiver
 * accepts (every property, or only what a client near the entity may see);
 * the rest is the change list, decoded into a fresh state of that class.
 *
 * Checks: a refused list leaves the state untouched (all or nothing); an
 * accepted one changes only accepted properties, and applying it again
 * changes nothing; the properties it changed encode as a list that decodes
 * into another fresh state and gives the same values; no crash, no leak. */
#include <string.h>

#include "entity_state.h"
#include "fuzz_support.h"
#include "property_codec.h"
#include "replication.h"

/* The demo definitions' audiences (made on the first input). */
static replication_schema *schema;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const entity_def_registry *definitions = fuzz_definitions();
    if (!schema) schema = replication_schema_create(definitions);
    uint16_t class_id = (uint16_t)((data[0] >> 1) % entity_def_registry_class_count(definitions));
    const entity_def_class *cls = entity_def_registry_class(definitions, class_id);
    const entity_state_mask *accept =
        data[0] & 1 ? replication_schema_mask(schema, class_id, REPLICATION_AUDIENCE_OTHERS_NEAR) : NULL;
    entity_state *state = entity_state_create(cls);
    entity_state *pristine = entity_state_create(cls);
    entity_state_mask changed;
    bit_reader r;
    bit_reader_init(&r, data + 1, size - 1);
    int rc = property_codec_decode_changes(&r, state, accept, &changed);
    if (rc != 0) {
        fuzz_check(bit_reader_failed(&r), "a refused change list left the reader good");
        fuzz_check(fuzz_same_values(state, pristine), "a refused change list changed the state");
        fuzz_check(entity_state_mask_empty(entity_state_dirty(state)), "a refused change list marked dirty");
    } else {
        for (int p = entity_state_mask_next(&changed, -1); p >= 0; p = entity_state_mask_next(&changed, p))
            fuzz_check(!accept || entity_state_mask_has(accept, (uint16_t)p), "a property outside `accept` changed");
        /* The same list again: nothing more changes. */
        entity_state_mask again;
        bit_reader_init(&r, data + 1, size - 1);
        fuzz_check(property_codec_decode_changes(&r, state, accept, &again) == 0, "an accepted list refused again");
        fuzz_check(entity_state_mask_empty(&again), "an accepted list applied twice changed more");
        /* What changed, re-encoded, rebuilds the same values. */
        bit_writer w;
        bit_writer_init(&w);
        fuzz_check(property_codec_encode_changes(&w, state, &changed) == 0, "the changed set does not encode");
        entity_state *copy = entity_state_create(cls);
        bit_reader_init(&r, bit_writer_data(&w), bit_writer_bytes(&w));
        fuzz_check(property_codec_decode_changes(&r, copy, NULL, NULL) == 0, "an encoded change list is refused");
        fuzz_check(fuzz_same_values(state, copy), "a re-encoded change list gives other values");
        entity_state_free(copy);
        bit_writer_close(&w);
    }
    entity_state_free(pristine);
    entity_state_free(state);
    return 0;
}
