/* redis_libuv.c -- the poll handle between a hiredis async context and the
 * libuv loop (redis_libuv.h says why it is not hiredis's own). It owns the
 * uv_poll_t; hiredis owns its lifetime through the cleanup hook. */
#include "redis_libuv.h"

#include <stdlib.h>

typedef struct redis_libuv_poll {
    uv_poll_t handle;
    redisAsyncContext *context; /* NULL once hiredis has cleaned up */
    int events;                 /* UV_READABLE | UV_WRITABLE wanted */
} redis_libuv_poll;

static void redis_libuv_on_poll(uv_poll_t *handle, int status, int events) {
    redis_libuv_poll *poll = handle->data;
    if (status < 0) {
        /* libuv has stopped the handle. What hiredis wanted to do, it now
         * does, and finds the socket's error doing it. */
        events = poll->events;
    }
    if (poll->context && (events & UV_READABLE)) redisAsyncHandleRead(poll->context);
    if (poll->context && (events & UV_WRITABLE)) redisAsyncHandleWrite(poll->context);
    /* Should hiredis somehow still hold the connection, keep watching it. */
    if (status < 0 && poll->context && poll->events) uv_poll_start(&poll->handle, poll->events, redis_libuv_on_poll);
}

static void redis_libuv_update(redis_libuv_poll *poll) {
    if (poll->events)
        uv_poll_start(&poll->handle, poll->events, redis_libuv_on_poll);
    else
        uv_poll_stop(&poll->handle);
}

static void redis_libuv_add_read(void *data) {
    redis_libuv_poll *poll = data;
    poll->events |= UV_READABLE;
    redis_libuv_update(poll);
}

static void redis_libuv_del_read(void *data) {
    redis_libuv_poll *poll = data;
    poll->events &= ~UV_READABLE;
    redis_libuv_update(poll);
}

static void redis_libuv_add_write(void *data) {
    redis_libuv_poll *poll = data;
    poll->events |= UV_WRITABLE;
    redis_libuv_update(poll);
}

static void redis_libuv_del_write(void *data) {
    redis_libuv_poll *poll = data;
    poll->events &= ~UV_WRITABLE;
    redis_libuv_update(poll);
}

static void redis_libuv_on_closed(uv_handle_t *handle) { free(handle->data); }

static void redis_libuv_cleanup(void *data) {
    redis_libuv_poll *poll = data;
    poll->context = NULL; /* hiredis is freeing it */
    uv_close((uv_handle_t *)&poll->handle, redis_libuv_on_closed);
}

int redis_libuv_attach(redisAsyncContext *context, uv_loop_t *loop) {
    if (context->ev.data != NULL) return -1;
    redis_libuv_poll *poll = calloc(1, sizeof *poll);
    if (!poll) return -1;
    if (uv_poll_init(loop, &poll->handle, context->c.fd) != 0) {
        free(poll);
        return -1;
    }
    poll->handle.data = poll;
    poll->context = context;
    context->ev.addRead = redis_libuv_add_read;
    context->ev.delRead = redis_libuv_del_read;
    context->ev.addWrite = redis_libuv_add_write;
    context->ev.delWrite = redis_libuv_del_write;
    context->ev.cleanup = redis_libuv_cleanup;
    context->ev.data = poll;
    return 0;
}
