/* fuzz_space_layout.c -- fuzzes common/space_layout.c's reader of a space
 * layout's JSON form, what every process reads from Redis and an operator
 * writes with tessera-admin.
 *
 * Checks: a layout that reads writes its JSON form, and that form reads
 * back into a layout that writes the very same text (the form round-trips)
 * and passes or fails space_layout_check alike; a refused text says why;
 * no crash, no leak. */
#include <stdlib.h>
#include <string.h>

#include "fuzz_support.h"
#include "space_layout.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char err[512] = "";
    /* NUL-terminated, as every caller's text is (a hiredis reply, a file). */
    char *text = fuzz_text(data, size);
    space_layout *layout = space_layout_from_json(text, size, err, sizeof err);
    free(text);
    if (!layout) {
        fuzz_check(err[0] != '\0', "a refused layout without a reason");
        return 0;
    }
    int checked = space_layout_check(layout, err, sizeof err);
    char *json = space_layout_to_json(layout);
    space_layout *again = space_layout_from_json(json, strlen(json), err, sizeof err);
    fuzz_check(again != NULL, "a layout's JSON form does not read back");
    char *json_again = space_layout_to_json(again);
    fuzz_check(strcmp(json, json_again) == 0, "a layout's JSON form changes on a round trip");
    fuzz_check(space_layout_check(again, err, sizeof err) == checked, "a round trip changes the layout's check");
    free(json_again);
    free(json);
    space_layout_free(again);
    space_layout_free(layout);
    return 0;
}
