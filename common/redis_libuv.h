/* redis_libuv.h -- attaches a hiredis async context to a libuv loop.
 *
 * It does what hiredis's own adapter (hiredis/adapters/libuv.h) does, with
 * one difference that matters: when the socket fails (the server was
 * killed while a command was on its way, and the kernel answered with a
 * reset), libuv stops the poll handle and reports the error instead of
 * readiness. The 0.14 adapter Debian 12 ships returns on that error
 * without telling hiredis, so the connection is never seen to be lost:
 * the commands in flight never call back and no reconnect is tried. This
 * one hands the error to hiredis as readiness; hiredis then reads the
 * socket's error and disconnects, calling every pending callback with no
 * reply and the disconnect callback. */
#ifndef TESSERA_REDIS_LIBUV_H
#define TESSERA_REDIS_LIBUV_H

#include <hiredis/async.h>
#include <uv.h>

/* Attaches `context` (freshly made by redisAsyncConnect) to `loop`.
 * Returns 0, or -1 if it is attached already or the poll handle cannot be
 * made. hiredis owns the attachment from then on and releases it through
 * its cleanup hook. */
int redis_libuv_attach(redisAsyncContext *context, uv_loop_t *loop);

#endif
