/* entity_state_json.h -- an entity_state's values as JSON, for tools, logs
 * and debugging views: {property name: value}, read through entity_state's
 * getters and shaped by the property types (arrays as arrays, structs as
 * objects).
 *
 * It also reads that form back (entity_state_from_json), for the stored
 * form of persistent entities: by property name, so a stored entity
 * survives changes to its definitions. It does not decide who may see a
 * property: the caller passes the properties it wants (for example an
 * audience's set) as `only`.
 *
 * Numbers are cJSON raw items (cJSON_IsRaw, the number's text in
 * valuestring), not cJSON numbers: cJSON prints a number with 15
 * significant digits when those read back within a relative epsilon, which
 * changes the last bits of some doubles and of integers near 2^53. A caller
 * that walks the tree reads a number with strtod or strtoll on valuestring.
 */
#ifndef TESSERA_ENTITY_STATE_JSON_H
#define TESSERA_ENTITY_STATE_JSON_H

#include <cjson/cJSON.h>

#include "entity_state.h"

/* The values of `state` as a JSON object {property name: value}, for the
 * properties in `only` (NULL: every property), in property id order. Ids in
 * `only` that the class does not have are ignored. Values: signed/unsigned
 * integers as numbers (an int64/uint64 whose magnitude is above 2^53 as a
 * decimal string, so nothing is rounded); float/double as numbers (doubles
 * printed exactly: cJSON's printer loses bits, so use a raw number with
 * "%.17g"); bool as true/false; string as a string; bytes as a lowercase
 * hex string; vector2/vector3 as arrays of 2/3 numbers; entity as a number
 * (above 2^53 as a decimal string, as uint64); fixed arrays as arrays;
 * structs as objects with fields in declaration order. Never NULL (out of
 * memory stops the process through log_panic/xmalloc as the rest of common/
 * does). Caller frees with cJSON_Delete. */
cJSON *entity_state_to_json(const entity_state *state, const entity_state_mask *only);

/* The same, printed unformatted; caller frees with free(). */
char *entity_state_to_json_string(const entity_state *state, const entity_state_mask *only);

/* Told of each member of the object that was not restored: `name` is the
 * member's key, `why` says what was wrong with it. */
typedef void (*entity_state_json_problem)(const char *name, const char *why, void *context);

/* Sets the properties of `state` named in `object` (the form
 * entity_state_to_json writes, numbers as cJSON numbers or raw numbers or
 * decimal strings) that are in `only` (NULL: every property). A property
 * is set whole or not at all: a member that names no property of the
 * class, one outside `only`, or one whose value does not convert (a wrong
 * type, out of range, a struct field or array element missing) is left
 * at its current value and reported to `problem` (may be NULL). A
 * property the object does not name keeps its value. Returns how many
 * properties were set, or -1 when `object` is not a JSON object. The
 * properties set are marked dirty, as any write is. */
int entity_state_from_json(entity_state *state, const cJSON *object, const entity_state_mask *only,
                           entity_state_json_problem problem, void *context);

#endif
