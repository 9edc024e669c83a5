/* config.h -- settings declared once in a table, read from JSON and the
 * command line.
 *
 * Each program declares its settings as a table of config_key (name, type,
 * bounds, default, where the value lives in the program's settings struct,
 * and what it does). config_load fills the struct in three layers: the
 * defaults in the table, then the JSON file (a flat object whose keys are
 * the table's names; a CONFIG_GROUP key's value is an object), then
 * `key=value` overrides from the command line.
 * Every error names the key and the source (file path or "command line"):
 * an unknown key, a wrong JSON type, a number out of bounds, a string too
 * long, a file that is missing or not valid JSON.
 */
#ifndef TESSERA_CONFIG_H
#define TESSERA_CONFIG_H

#include <stddef.h>

typedef enum config_type {
    CONFIG_INT,    /* int64_t field; JSON integer; bounds inclusive */
    CONFIG_DOUBLE, /* double field; JSON number; bounds inclusive */
    CONFIG_BOOL,   /* bool field; JSON true/false; "true"/"false"/"1"/"0" on the command line */
    CONFIG_STRING, /* char[size] field; JSON string; at most size-1 bytes */
    CONFIG_GROUP,  /* config_group field: an open set of named values that
                     * the program does not declare (a game's own settings);
                     * JSON: an object of numbers, strings and booleans;
                     * command line: "<key>.<name>=value" */
} config_type;

/* What a CONFIG_GROUP key holds: names and their values as text (numbers
 * as JSON writes them, booleans as true/false). */
#define CONFIG_GROUP_MAX 32
#define CONFIG_GROUP_NAME_MAX 48
#define CONFIG_GROUP_VALUE_MAX 128
typedef struct config_group {
    size_t count;
    struct config_group_item {
        char name[CONFIG_GROUP_NAME_MAX];
        char value[CONFIG_GROUP_VALUE_MAX];
    } items[CONFIG_GROUP_MAX];
} config_group;

/* The value of `name` in a group, or NULL. */
const char *config_group_find(const config_group *group, const char *name);

typedef struct config_key {
    const char *name;
    config_type type;
    size_t offset;             /* offsetof(settings struct, field) */
    size_t size;               /* CONFIG_STRING: sizeof the char array; else 0 */
    double min, max;           /* numbers only */
    const char *default_value; /* text, parsed like a command-line value */
    const char *help;          /* one line: what the setting does */
} config_key;

/* Fills `settings` from `keys`: defaults, then the JSON file at `path`
 * (skipped when NULL), then each "key=value" string in overrides[0..n).
 * Returns 0, or -1 with a message in err (at most errlen bytes) naming the
 * key and where it came from. */
int config_load(const config_key *keys, size_t key_count, void *settings, const char *path, char *const *overrides,
                size_t override_count, char *err, size_t errlen);

/* Writes "name = value  # help" lines for every key to `out` (a FILE *),
 * for --help and for logging the effective settings. */
void config_print(const config_key *keys, size_t key_count, const void *settings, void *out);

#endif
