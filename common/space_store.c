/* space_store.c -- writes space layouts to Redis with their epoch, through
 * the one Lua script that refuses an epoch that does not grow. */
#include "space_store.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "redis_keys.h"

const char SPACE_STORE_WRITE_SCRIPT[] =
    "local stored = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0')\n"
    "if tonumber(ARGV[2]) <= stored then return stored end\n"
    "redis.call('SET', KEYS[2], ARGV[3])\n"
    "redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])\n"
    "return 0\n";

typedef struct space_store_request {
    space_store_written_callback callback;
    void *user_data;
} space_store_request;

static void space_store_on_reply(redis_client *redis, redisReply *reply, void *user_data) {
    space_store_request *request = user_data;
    (void)redis;
    if (request->callback) {
        if (!reply) request->callback(0, 0, "the Redis connection was lost", request->user_data);
        else if (reply->type == REDIS_REPLY_ERROR) request->callback(0, 0, reply->str, request->user_data);
        else if (reply->type == REDIS_REPLY_INTEGER)
            request->callback(reply->integer == 0, (unsigned long long)reply->integer, NULL, request->user_data);
        else request->callback(0, 0, "unexpected reply to the layout script", request->user_data);
    }
    free(request);
}

int space_store_write(redis_client *redis, const char *cluster, const space_layout *layout,
                      space_store_written_callback callback, void *user_data) {
    char spaces_key[REDIS_KEY_MAX], space_key[REDIS_KEY_MAX], epoch[24];
    redis_key_spaces(spaces_key, cluster);
    redis_key_space(space_key, cluster, layout->name);
    snprintf(epoch, sizeof epoch, "%" PRIu64, layout->epoch);
    char *json = space_layout_to_json(layout);
    const char *argv[] = {"EVAL", SPACE_STORE_WRITE_SCRIPT, "2", spaces_key, space_key, layout->name, epoch, json};
    size_t lengths[8];
    for (int i = 0; i < 8; i++) lengths[i] = strlen(argv[i]);
    space_store_request *request = xmalloc(sizeof *request);
    request->callback = callback;
    request->user_data = user_data;
    int rc = redis_client_command_argv(redis, space_store_on_reply, request, 8, argv, lengths);
    if (rc != 0) free(request);
    free(json);
    return rc;
}
