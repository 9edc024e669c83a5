/* fuzz_cell_state.c -- fuzzes the whole-cell-state blob: a packed
 * CellEntityState (what an offload moves and a backup keeps), unpacked as
 * cellapp/restore.c and cellapp/offload.c unpack it, then its properties
 * decoded as cellapp/cell_entity_codec.c's cell_entity_restore decodes them
 * (entity_state_decode_all into a fresh state of its class, from the demo
 * definitions), and its inbox streams restored as common/mailbox.c does.
 * A state naming no demo class is decoded as the class its entity id
 * picks, so the fuzzer reaches the property decoder without spelling a
 * class name.
 *
 * Checks: decoded properties encode and decode again to the same values;
 * no crash, no leak. */
#include "cluster.pb-c.h"
#include "entity_state.h"
#include "fuzz_support.h"
#include "mailbox.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    Tessera__Cluster__CellEntityState *state = tessera__cluster__cell_entity_state__unpack(NULL, size, data);
    if (!state) return 0;
    const entity_def_registry *definitions = fuzz_definitions();
    const entity_def_class *cls =
        state->entity_type ? entity_def_registry_find_class(definitions, state->entity_type) : NULL;
    if (!cls)
        cls = entity_def_registry_class(definitions,
                                        (uint16_t)(state->entity_id % entity_def_registry_class_count(definitions)));
    entity_state *properties = entity_state_create(cls);
    bit_reader reader;
    bit_reader_init(&reader, state->properties.data, state->properties.len);
    if (entity_state_decode_all(properties, &reader) == 0) fuzz_check_state_round_trip(properties);
    entity_state_free(properties);
    /* Any monotonic time does: the restored inbox only ages from it. */
    if (state->n_inbox) mailbox_inbox_free(mailbox_inbox_restore(state->inbox, state->n_inbox, 1000000));
    tessera__cluster__cell_entity_state__free_unpacked(state, NULL);
    return 0;
}
