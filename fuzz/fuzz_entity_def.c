/* fuzz_entity_def.c -- fuzzes common/entity_def.c's loader on JSON text:
 * the definitions a client SDK takes from a login reply
 * (entity_def_load_string), the same parser that reads a game's
 * definition files.
 *
 * Checks: a document that loads describes itself (the text the baseapp
 * sends at login), and that text loads into a registry with the same
 * digest, class count and struct count (entity_def.h's promise); a refused
 * document says why; no crash, no leak. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_support.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = fuzz_text(data, size);
    entity_def_registry *registry = NULL;
    char err[512] = "";
    if (entity_def_load_string(text, "fuzz input", &registry, err, sizeof err) != 0) {
        fuzz_check(registry == NULL, "a refused document left a registry");
        fuzz_check(err[0] != '\0', "a refused document without a reason");
        free(text);
        return 0;
    }
    char *description = entity_def_registry_describe(registry);
    entity_def_registry *again = NULL;
    char again_err[512] = "";
    int rc = entity_def_load_string(description, "description", &again, again_err, sizeof again_err);
    if (rc != 0) fprintf(stderr, "the description does not load: %s\n%s\n", again_err, description);
    fuzz_check(rc == 0, "the description of loaded definitions does not load");
    fuzz_check(strcmp(entity_def_registry_digest_hex(registry), entity_def_registry_digest_hex(again)) == 0,
               "the description loads with another digest");
    fuzz_check(entity_def_registry_class_count(registry) == entity_def_registry_class_count(again) &&
                   entity_def_registry_struct_count(registry) == entity_def_registry_struct_count(again),
               "the description loads with other classes or structs");
    entity_def_registry_free(again);
    free(description);
    entity_def_registry_free(registry);
    free(text);
    return 0;
}
