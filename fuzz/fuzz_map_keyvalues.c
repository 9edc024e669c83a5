/* fuzz_map_keyvalues.c -- fuzzes the property half of a map entity's
 * "keyvalues" (cellapp/map_keyvalues.c hands every key that names a
 * property to common/entity_state_json.c's entity_state_from_json), which
 * is also how a persisted entity's properties are read back. The first
 * byte picks a demo class; the rest is the JSON object.
 *
 * Checks: the properties set hold values their types allow (they encode
 * and decode to the same bytes), and the state's JSON form reads back into
 * a fresh state with the same values; no crash, no leak. */
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "entity_state.h"
#include "entity_state_json.h"
#include "fuzz_support.h"

static void fuzz_map_keyvalues_problem(const char *name, const char *why, void *context) {
    (void)name;
    (void)why;
    (*(size_t *)context)++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const entity_def_registry *definitions = fuzz_definitions();
    const entity_def_class *cls =
        entity_def_registry_class(definitions, (uint16_t)(data[0] % entity_def_registry_class_count(definitions)));
    cJSON *object = cJSON_ParseWithLength((const char *)data + 1, size - 1);
    if (!object) return 0;
    entity_state *state = entity_state_create(cls);
    size_t problems = 0;
    int set = entity_state_from_json(state, object, NULL, fuzz_map_keyvalues_problem, &problems);
    fuzz_check(set >= 0 || !cJSON_IsObject(object), "an object refused as not an object");
    if (set > 0) {
        fuzz_check_state_round_trip(state);
        /* The JSON form reads back whole. */
        cJSON *json = entity_state_to_json(state, NULL);
        entity_state *reread = entity_state_create(cls);
        size_t reread_problems = 0;
        entity_state_from_json(reread, json, NULL, fuzz_map_keyvalues_problem, &reread_problems);
        fuzz_check(reread_problems == 0, "a state's JSON form does not read back");
        fuzz_check(fuzz_same_values(state, reread), "a state's JSON form reads back other values");
        entity_state_free(reread);
        cJSON_Delete(json);
    }
    entity_state_free(state);
    cJSON_Delete(object);
    return 0;
}
