/* fuzz_config.c -- fuzzes common/config.c's loader on a config file: the
 * input is the JSON file a baseapp is started with, read through the
 * baseapp's real key table (baseapp/baseapp_settings.c), every layer of
 * config_load (defaults, the file, no command-line overrides).
 *
 * Checks: a file that loads leaves every string setting NUL-terminated
 * within its field and every number within its key's bounds; a refused
 * file says why; no crash, no leak. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "baseapp_settings.h"
#include "fuzz_support.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    baseapp_settings settings;
    memset(&settings, 0, sizeof settings);
    char err[512] = "";
    const char *path = fuzz_file(data, size);
    if (config_load(baseapp_config_keys, baseapp_config_key_count, &settings, path, NULL, 0, err, sizeof err) != 0) {
        fuzz_check(err[0] != '\0', "a refused config without a reason");
        return 0;
    }
    for (size_t i = 0; i < baseapp_config_key_count; i++) {
        const config_key *key = &baseapp_config_keys[i];
        const uint8_t *field = (const uint8_t *)&settings + key->offset;
        switch (key->type) {
            case CONFIG_STRING:
                fuzz_check(memchr(field, '\0', key->size) != NULL, "a string setting overran its field");
                break;
            case CONFIG_INT: {
                int64_t v;
                memcpy(&v, field, sizeof v);
                fuzz_check((double)v >= key->min && (double)v <= key->max, "an integer setting out of its bounds");
                break;
            }
            case CONFIG_DOUBLE: {
                double v;
                memcpy(&v, field, sizeof v);
                fuzz_check(isfinite(v) && v >= key->min && v <= key->max, "a number setting out of its bounds");
                break;
            }
            case CONFIG_GROUP: {
                config_group group;
                memcpy(&group, field, sizeof group);
                fuzz_check(group.count <= CONFIG_GROUP_MAX, "a group with more items than it holds");
                break;
            }
            case CONFIG_BOOL:
                break;
        }
    }
    return 0;
}
