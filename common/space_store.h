/* space_store.h -- how space layouts are kept in Redis (keys in
 * redis_keys.h): P spaces maps each space's name to the epoch of its
 * layout, P space:<name> holds the layout's JSON (space_layout.h).
 *
 * A layout is written only together with a larger epoch, in one Lua script,
 * so two writers can never leave the JSON and the epoch disagreeing, and a
 * writer holding an old picture cannot overwrite a newer layout:
 *
 *   EVAL SPACE_STORE_WRITE_SCRIPT 2 <P spaces> <P space:name> <name> <epoch> <json>
 *     -> 0 when written; otherwise the epoch already stored (>= <epoch>),
 *        and nothing changed.
 *
 * Readers poll HGETALL P spaces (cheap: one small hash) and GET a space's
 * JSON only when its epoch grew.
 */
#ifndef TESSERA_SPACE_STORE_H
#define TESSERA_SPACE_STORE_H

#include <stddef.h>

#include "redis_client.h"
#include "space_layout.h"

extern const char SPACE_STORE_WRITE_SCRIPT[];

typedef void (*space_store_written_callback)(int written, unsigned long long stored_epoch, const char *error,
                                             void *user_data);

/* Writes `layout` (its epoch as it is) through `redis`. The callback, if
 * any, fires once: written 1, or 0 with the stored epoch that refused it, or
 * 0 with an error text (connection lost). Returns 0, or -1 when Redis is
 * not connected (no callback). */
int space_store_write(redis_client *redis, const char *cluster, const space_layout *layout,
                      space_store_written_callback callback, void *user_data);

#endif
