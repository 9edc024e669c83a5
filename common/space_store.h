/* space_store.h -- how space layouts are kept in Redis (keys in
 * redis_keys.h): P spaces maps each space's name to the epoch of its
 * layout, P space:<name> holds the layout's JSON (space_layout.h).
 *
 * A layout is written only together with a larger epoch, in one Lua script,
 * so two writers can never leave the JSON and the epoch disagreeing, and a
 * writer holding an old picture cannot overwrite a newer layout. A layout
 * the balancer writes carries its lease's fence (lease.h); the script
 * refuses a fence older than P balancer_fence, the newest lease's, so a
 * leader that was paused or cut off cannot undo its successor's work.
 * Operators write with fence 0, which is not checked.
 *
 *   EVAL SPACE_STORE_WRITE_SCRIPT 3 <P spaces> <P space:name> <P balancer_fence>
 *        <name> <epoch> <json> <fence>
 *     ->  0 when written;
 *        >0 the epoch already stored (>= <epoch>), nothing changed;
 *        <0 minus the newest fence (> <fence>), nothing changed.
 *
 * Readers poll HGETALL P spaces (cheap: one small hash) and GET a space's
 * JSON only when its epoch grew.
 */
#ifndef TESSERA_SPACE_STORE_H
#define TESSERA_SPACE_STORE_H

#include <stddef.h>

#include <hiredis/hiredis.h>

#include "redis_client.h"
#include "redis_keys.h"
#include "space_layout.h"

extern const char SPACE_STORE_WRITE_SCRIPT[];

typedef enum space_store_result {
    SPACE_STORE_WRITTEN,
    SPACE_STORE_OLD_EPOCH, /* value: the epoch stored */
    SPACE_STORE_FENCED,    /* value: the newest lease's fence */
    SPACE_STORE_FAILED,    /* error says why */
} space_store_result;

/* The script's arguments for writing `layout` (its epoch and fence as they
 * are), for any Redis client: argv[0 .. argc) with their lengths. */
typedef struct space_store_command {
    int argc;
    const char *argv[10];
    size_t lengths[10];
    char spaces_key[REDIS_KEY_MAX], space_key[REDIS_KEY_MAX], fence_key[REDIS_KEY_MAX];
    char epoch[24], fence[24];
    char *json;
} space_store_command;
void space_store_command_init(space_store_command *command, const char *cluster, const space_layout *layout);
void space_store_command_close(space_store_command *command);
/* What a reply to the script means; `error` (if not NULL) gets the text of
 * a failure. */
space_store_result space_store_result_of(const redisReply *reply, unsigned long long *value, const char **error);

typedef void (*space_store_written_callback)(space_store_result result, unsigned long long value, const char *error,
                                             void *user_data);

/* Writes `layout` through `redis`. The callback, if any, fires once.
 * Returns 0, or -1 when Redis is not connected (no callback). */
int space_store_write(redis_client *redis, const char *cluster, const space_layout *layout,
                      space_store_written_callback callback, void *user_data);

const char *space_store_result_name(space_store_result result);

#endif
