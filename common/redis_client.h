/* redis_client.h -- one asynchronous Redis connection on the libuv loop,
 * with reconnection.
 *
 * Built on hiredis's async API, attached to the loop by redis_libuv.h
 * (which sees a connection reset that hiredis's own adapter misses). When the
 * connection drops or an attempt fails, the client logs it and tries again
 * every retry_ms, forever; the owner learns of each change through the
 * state callback and decides whether a failure is fatal (processes give up
 * at start-up after a configured number of attempts).
 *
 * With a password (redis_client_set_password), every connection sends AUTH
 * first and counts as connected only once Redis accepted it; a refused AUTH
 * is a failed attempt like a refused connection (logged with Redis's
 * reason, never the password).
 *
 * Commands are only accepted while connected. Every accepted command's
 * callback fires exactly once: with the reply, or with reply == NULL if the
 * connection was lost first or the client is being freed.
 */
#ifndef TESSERA_REDIS_CLIENT_H
#define TESSERA_REDIS_CLIENT_H

#include <hiredis/hiredis.h>
#include <stdint.h>
#include <uv.h>

#include "latency_histogram.h"

typedef struct redis_client redis_client;

typedef void (*redis_reply_callback)(redis_client *client, redisReply *reply, void *user_data);
/* connected is 1 after a successful connect, 0 after a loss or a failed
 * attempt; attempts counts failures since the last success. */
typedef void (*redis_state_callback)(redis_client *client, int connected, unsigned failed_attempts, void *user_data);

/* Creates a client for host:port (an IP address). Nothing happens until
 * redis_client_start. NULL on bad arguments. */
redis_client *redis_client_create(uv_loop_t *loop, const char *host, int port, unsigned retry_ms,
                                  redis_state_callback on_state, void *user_data);
void redis_client_start(redis_client *client);
/* The password every connection authenticates with (copied; NULL or "":
 * none). Call before redis_client_start. */
void redis_client_set_password(redis_client *client, const char *password);

/* Stops retrying and disconnects gracefully: commands already sent complete
 * (their callbacks fire with replies, or NULL if the link fails first). The
 * client is freed once hiredis and libuv have released it, so the loop must
 * run on. No state callback fires from here on, and no new command is
 * accepted. */
void redis_client_free(redis_client *client);

int redis_client_is_connected(const redis_client *client);
const char *redis_client_address(const redis_client *client);
/* Round trips of the commands answered so far (microseconds). */
const latency_histogram *redis_client_latency(const redis_client *client);

/* Sends a command formatted like redisCommand. Returns 0, or -1 when not
 * connected (the callback will not fire). `callback` may be NULL. */
int redis_client_command(redis_client *client, redis_reply_callback callback, void *user_data, const char *format, ...);
int redis_client_command_argv(redis_client *client, redis_reply_callback callback, void *user_data, int argc,
                              const char **argv, const size_t *argv_lengths);

#endif
