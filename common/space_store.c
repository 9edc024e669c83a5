/* space_store.c -- writes space layouts to Redis with their epoch and the
 * writer's fence, through the one Lua script that refuses an epoch that
 * does not grow and a fence older than the newest lease's. */
#include "space_store.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

const char SPACE_STORE_WRITE_SCRIPT[] = "local fence = tonumber(ARGV[4])\n"
                                        "if fence > 0 then\n"
                                        "  local newest = tonumber(redis.call('GET', KEYS[3]) or '0')\n"
                                        "  if fence < newest then return -newest end\n"
                                        "end\n"
                                        "local stored = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0')\n"
                                        "if tonumber(ARGV[2]) <= stored then return stored end\n"
                                        "redis.call('SET', KEYS[2], ARGV[3])\n"
                                        "redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])\n"
                                        "return 0\n";

void space_store_command_init(space_store_command *command, const char *cluster, const space_layout *layout) {
    redis_key_spaces(command->spaces_key, cluster);
    redis_key_space(command->space_key, cluster, layout->name);
    redis_key_balancer_fence(command->fence_key, cluster);
    snprintf(command->epoch, sizeof command->epoch, "%" PRIu64, layout->epoch);
    snprintf(command->fence, sizeof command->fence, "%" PRIu64, layout->fence);
    command->json = space_layout_to_json(layout);
    const char *argv[] = {"EVAL",
                          SPACE_STORE_WRITE_SCRIPT,
                          "3",
                          command->spaces_key,
                          command->space_key,
                          command->fence_key,
                          layout->name,
                          command->epoch,
                          command->json,
                          command->fence};
    command->argc = 10;
    for (int i = 0; i < command->argc; i++) {
        command->argv[i] = argv[i];
        command->lengths[i] = strlen(argv[i]);
    }
}

void space_store_command_close(space_store_command *command) {
    free(command->json);
    command->json = NULL;
}

space_store_result space_store_result_of(const redisReply *reply, unsigned long long *value, const char **error) {
    *value = 0;
    const char *why = NULL;
    space_store_result result = SPACE_STORE_FAILED;
    if (!reply)
        why = "the Redis connection was lost";
    else if (reply->type == REDIS_REPLY_ERROR)
        why = reply->str;
    else if (reply->type != REDIS_REPLY_INTEGER)
        why = "unexpected reply to the layout script";
    else if (reply->integer == 0)
        result = SPACE_STORE_WRITTEN;
    else if (reply->integer > 0) {
        result = SPACE_STORE_OLD_EPOCH;
        *value = (unsigned long long)reply->integer;
    } else {
        result = SPACE_STORE_FENCED;
        *value = (unsigned long long)-reply->integer;
    }
    if (error) *error = why;
    return result;
}

const char *space_store_result_name(space_store_result result) {
    switch (result) {
        case SPACE_STORE_WRITTEN:
            return "written";
        case SPACE_STORE_OLD_EPOCH:
            return "refused: a newer epoch is stored";
        case SPACE_STORE_FENCED:
            return "refused: a newer balancer lease exists";
        default:
            return "failed";
    }
}

typedef struct space_store_request {
    space_store_written_callback callback;
    void *user_data;
} space_store_request;

static void space_store_on_reply(redis_client *redis, redisReply *reply, void *user_data) {
    space_store_request *request = user_data;
    (void)redis;
    if (request->callback) {
        unsigned long long value;
        const char *error;
        space_store_result result = space_store_result_of(reply, &value, &error);
        request->callback(result, value, error, request->user_data);
    }
    free(request);
}

int space_store_write(redis_client *redis, const char *cluster, const space_layout *layout,
                      space_store_written_callback callback, void *user_data) {
    space_store_command command;
    space_store_command_init(&command, cluster, layout);
    space_store_request *request = xmalloc(sizeof *request);
    request->callback = callback;
    request->user_data = user_data;
    int rc =
        redis_client_command_argv(redis, space_store_on_reply, request, command.argc, command.argv, command.lengths);
    if (rc != 0) free(request);
    space_store_command_close(&command);
    return rc;
}
