/* channel.c -- framed TCP connections on the libuv loop: reading into the
 * frame reader, dispatching frames, gathering the frames sent in one loop
 * iteration into one write, backpressure, and the close sequence that frees
 * a channel only after libuv releases it. What a frame means is the
 * owner's business (baseapp, cellapp, client). */
#include "channel.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frame.h"
#include "clock.h"
#include "log.h"
#include "tls.h"
#include "websocket.h"

struct channel {
    uv_tcp_t tcp; /* first: the handle's data points back here */
    uv_connect_t connect_request;
    uv_shutdown_t shutdown_request;
    channel_state state;
    channel_options options;
    channel_callbacks callbacks;
    void *user_data;
    frame_reader reader;
    size_t queued_bytes; /* bytes sent and not yet written (gathering included) */
    /* Frames sent since the loop last went to poll, gathered into one write
     * that the prepare handle hands to libuv before the loop blocks. */
    struct channel_write *gathering;
    /* The buffer of the last finished write, kept for the next one (NULL:
     * none kept). */
    struct channel_write *spare;
    uv_prepare_t flush_prepare;
    int reading; /* uv_read_start is in effect */
    int paused_for_backpressure;
    bool held;            /* channel_hold: no frame dispatched, nothing read */
    int flush_on_connect; /* close_after_flush arrived while still dialling */
    /* A flush-close that the peer does not read ends at this timer. */
    uv_timer_t flush_deadline;
    int flush_deadline_started;
    int open_handles; /* the socket, the prepare, the timer once started: freed at 0 */
    char peer_name[64];
    char close_reason[160];
    channel_stats stats;
    uint64_t incomplete_since_us; /* monotonic: when the frame still being received began (0: none) */
    tls_session *tls;             /* options.tls: the connection's TLS session */
    bool dialled;                 /* channel_connect's: on_connect waits for the handshake */
    websocket *ws;                /* options.websocket: the connection's WebSocket (inside TLS, if any) */
    bool ws_answered;             /* the upgrade request has its answer: what is gathered may go */
};

/* One write: the request, then the frames (header + body each) in the same
 * allocation. While it gathers, `capacity` is the room for data; once
 * handed to libuv it is owned there until on_write_done frees it. */
typedef struct channel_write {
    uv_write_t request;
    size_t bytes;
    size_t capacity;
    uint8_t data[];
} channel_write;

/* A finished write's buffer is kept for the next one when it is at most
 * this large: a client's tick of updates is a few hundred bytes, a
 * cellapp's batch tens of kilobytes, and reusing them means no allocation
 * per write; a rare huge write is returned. */
#define CHANNEL_SPARE_MAX_BYTES ((size_t)1024 * 1024)
/* A write this small is tried straight away (uv_try_write): a client's
 * tick, a handful of peer messages. Larger ones, a batch for thousands of
 * clients, would rarely fit the socket buffer whole and go through libuv's
 * queue, which is also what the queue limits are measured against. */
#define CHANNEL_TRY_WRITE_MAX_BYTES ((size_t)64 * 1024)
/* The first buffer of a channel: a client's usual tick fits. */
#define CHANNEL_FIRST_WRITE_BYTES 1024u

/* A gathering write goes at once when it reaches this much: a burst of
 * sends does not wait for the loop, and one write stays modest. */
#define CHANNEL_GATHER_BYTES ((size_t)256 * 1024)

/* A read hands us at most this much at once; 64 KiB matches the kernel's
 * usual socket buffer granularity and keeps the reader's growth modest. */
#define CHANNEL_READ_CHUNK 65536
/* The most plaintext one TLS record carries (one SSL_read's worth). */
#define CHANNEL_TLS_RECORD_BYTES 16384
/* A WebSocket channel reads into a buffer of its own this large, freed
 * after each read: its bytes are decoded into the frame reader, not read
 * into it. A client's messages are small. */
#define CHANNEL_WEBSOCKET_READ_BYTES 16384

channel_options channel_default_peer_options(void) {
    channel_options options = {
        .max_frame_bytes = 16u << 20,        /* a tick batch for thousands of clients fits */
        .write_high_water_bytes = 32u << 20, /* about a second of a busy cellapp's output */
        .write_limit_bytes = 256u << 20,     /* far beyond any healthy peer: it is stuck */
        .totals = NULL,
    };
    return options;
}

/* How long a flush-close waits for the peer to read what is queued: an
 * Error is a few hundred bytes, so a peer that has not taken it in this
 * long is not reading, and a shutdown must not wait on it. */
#define CHANNEL_FLUSH_TIMEOUT_MS 2000

/* One of the channel's handles is closed; the memory goes with the last. */
static void channel_release(channel *ch) {
    if (--ch->open_handles > 0) return;
    frame_reader_close(&ch->reader);
    free(ch->gathering);
    free(ch->spare);
    tls_session_free(ch->tls);
    websocket_free(ch->ws);
    free(ch);
}

static void channel_on_handle_closed(uv_handle_t *handle) { channel_release(handle->data); }

static void channel_on_closed(uv_handle_t *handle) {
    channel *ch = handle->data;
    if (ch->callbacks.on_close) ch->callbacks.on_close(ch, ch->close_reason);
    uv_prepare_stop(&ch->flush_prepare);
    uv_close((uv_handle_t *)&ch->flush_prepare, channel_on_handle_closed);
    if (ch->flush_deadline_started && !uv_is_closing((uv_handle_t *)&ch->flush_deadline)) {
        uv_timer_stop(&ch->flush_deadline);
        uv_close((uv_handle_t *)&ch->flush_deadline, channel_on_handle_closed);
    }
    channel_release(ch);
}

/* Closes the socket unless that is already under way. */
static void channel_close_socket(channel *ch) {
    if (!uv_is_closing((uv_handle_t *)&ch->tcp)) uv_close((uv_handle_t *)&ch->tcp, channel_on_closed);
}

static void channel_on_flush_deadline(uv_timer_t *timer) {
    channel *ch = timer->data;
    log_info("%s: not reading what is left to send after %d ms; closing", ch->peer_name, CHANNEL_FLUSH_TIMEOUT_MS);
    channel_close_socket(ch);
}

static void channel_start_flush_deadline(channel *ch) {
    if (ch->flush_deadline_started) return;
    uv_timer_init(ch->tcp.loop, &ch->flush_deadline);
    ch->flush_deadline.data = ch;
    ch->flush_deadline_started = 1;
    ch->open_handles++;
    uv_timer_start(&ch->flush_deadline, channel_on_flush_deadline, CHANNEL_FLUSH_TIMEOUT_MS, 0);
}

static void channel_discard_gathering(channel *ch) {
    if (!ch->gathering) return;
    ch->queued_bytes -= ch->gathering->bytes;
    free(ch->gathering);
    ch->gathering = NULL;
}

/* Keeps the reason on_close will be given, cut to fit: it is for logs. */
static void channel_keep_reason(channel *ch, const char *reason) {
    if (!reason) reason = "closed";
    size_t length = strnlen(reason, sizeof ch->close_reason - 1);
    memcpy(ch->close_reason, reason, length);
    ch->close_reason[length] = '\0';
}

void channel_close(channel *ch, const char *reason) {
    if (!ch || ch->state == CHANNEL_CLOSING) return;
    ch->state = CHANNEL_CLOSING;
    channel_keep_reason(ch, reason);
    if (ch->reading) uv_read_stop((uv_stream_t *)&ch->tcp);
    ch->reading = 0;
    channel_discard_gathering(ch);
    /* Pending writes are cancelled by uv_close and their callbacks run with
     * UV_ECANCELED before the close callback, so every buffer is freed. */
    channel_close_socket(ch);
}

static void channel_on_shutdown(uv_shutdown_t *request, int status) {
    channel *ch = request->handle->data;
    (void)status;
    channel_close_socket(ch);
}

static void channel_websocket_goodbye(channel *ch, const char *reason);
static void channel_close_after_flushing(channel *ch, const char *reason, bool bounded);

void channel_close_after_flush(channel *ch, const char *reason) { channel_close_after_flushing(ch, reason, true); }

/* channel_close_after_flush; `bounded` false lets more than
 * CHANNEL_FLUSH_LIMIT go first (a file the WebSocket port served: its size
 * is ours, not the peer's doing). */
static void channel_close_after_flushing(channel *ch, const char *reason, bool bounded) {
    if (!ch || ch->state == CHANNEL_CLOSING) return;
    if (bounded && ch->queued_bytes > CHANNEL_FLUSH_LIMIT) {
        channel_close(ch, reason);
        return;
    }
    if (ch->ws) channel_websocket_goodbye(ch, reason);
    if (channel_flush(ch) != 0) return;
    int connecting = ch->state == CHANNEL_CONNECTING;
    ch->state = CHANNEL_CLOSING;
    channel_keep_reason(ch, reason);
    channel_start_flush_deadline(ch);
    if (connecting) {
        /* libuv holds the queued frames until the connection is up; the
         * connect callback starts the flush (or closes on failure). */
        ch->flush_on_connect = 1;
        return;
    }
    if (ch->reading) uv_read_stop((uv_stream_t *)&ch->tcp);
    ch->reading = 0;
    /* uv_shutdown waits for queued writes, then half-closes; a peer that
     * resets meanwhile makes it fail, and we close either way; one that
     * does not read meets the deadline. */
    if (uv_shutdown(&ch->shutdown_request, (uv_stream_t *)&ch->tcp, channel_on_shutdown) != 0) channel_close_socket(ch);
}

static void channel_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buf) {
    channel *ch = handle->data;
    uint8_t *space;
    size_t space_bytes;
    (void)suggested;
    if (ch->ws && !ch->tls) {
        /* Freed by channel_on_read, whatever happens. */
        buf->base = xmalloc(CHANNEL_WEBSOCKET_READ_BYTES);
        buf->len = CHANNEL_WEBSOCKET_READ_BYTES;
        return;
    }
    /* With TLS the ciphertext lands here too: the session copies it out at
     * once (channel_tls_received), and the plaintext takes its place. */
    frame_reader_reserve(&ch->reader, CHANNEL_READ_CHUNK, &space, &space_bytes);
    buf->base = (char *)space;
    buf->len = space_bytes;
}

static void channel_on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf);
static void channel_dispatch(channel *ch);
static int channel_tls_received(channel *ch, const uint8_t *data, size_t length);
static int channel_websocket_received(channel *ch, const uint8_t *data, size_t length);
static int channel_websocket_start_client(channel *ch);

static void channel_update_reading(channel *ch) {
    if (ch->state != CHANNEL_OPEN) return;
    int want = !ch->paused_for_backpressure && !ch->held;
    if (want == ch->reading) return;
    if (want) {
        if (uv_read_start((uv_stream_t *)&ch->tcp, channel_alloc, channel_on_read) == 0) ch->reading = 1;
    } else {
        uv_read_stop((uv_stream_t *)&ch->tcp);
        ch->reading = 0;
    }
}

void channel_hold(channel *ch) {
    if (!ch || ch->held) return;
    ch->held = true;
    channel_update_reading(ch);
}

void channel_resume(channel *ch) {
    if (!ch || !ch->held) return;
    ch->held = false;
    if (ch->state != CHANNEL_OPEN) return;
    channel_dispatch(ch);
    channel_update_reading(ch);
}

bool channel_held(const channel *ch) { return ch && ch->held; }

/* Whether the owner's gate holds the channel before its next frame (it is
 * held from then on, until channel_resume). */
static bool channel_gate_holds(channel *ch) {
    if (ch->held) return true;
    if (!ch->options.may_dispatch || ch->options.may_dispatch(ch->options.gate_data)) return false;
    channel_hold(ch);
    return true;
}

static void channel_on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf) {
    channel *ch = stream->data;
    if (ch->ws && !ch->tls) {
        /* The WebSocket's own read buffer (channel_alloc). */
        if (ch->state != CHANNEL_CLOSING && nread > 0) {
            ch->stats.bytes_in += (uint64_t)nread;
            if (ch->options.totals) ch->options.totals->bytes_in += (uint64_t)nread;
            int rc = channel_websocket_received(ch, (const uint8_t *)buf->base, (size_t)nread);
            free(buf->base);
            if (rc == 0) channel_dispatch(ch);
            return;
        }
        free(buf->base);
    }
    if (ch->state == CHANNEL_CLOSING) return;
    if (nread < 0) {
        char reason[128];
        if (nread == UV_EOF)
            snprintf(reason, sizeof reason, "peer closed the connection");
        else
            snprintf(reason, sizeof reason, "read error: %s", uv_strerror((int)nread));
        channel_close(ch, reason);
        return;
    }
    if (nread == 0) return;
    ch->stats.bytes_in += (uint64_t)nread;
    if (ch->options.totals) ch->options.totals->bytes_in += (uint64_t)nread;
    if (ch->tls) {
        if (channel_tls_received(ch, (const uint8_t *)buf->base, (size_t)nread) != 0) return;
    } else {
        frame_reader_commit(&ch->reader, (size_t)nread);
    }
    channel_dispatch(ch);
}

/* Dispatches the complete frames the reader holds, until the channel
 * closes or is held. */
static void channel_dispatch(channel *ch) {
    const uint8_t *frame;
    size_t length;
    int result;
    bool dispatched = false;
    while (ch->state == CHANNEL_OPEN && !channel_gate_holds(ch) &&
           (result = frame_reader_next(&ch->reader, &frame, &length)) != 0) {
        dispatched = true;
        if (result < 0) {
            char reason[160];
            snprintf(reason, sizeof reason, "frame of %u bytes exceeds the limit of %zu bytes",
                     ch->reader.rejected_length, ch->options.max_frame_bytes);
            if (ch->callbacks.on_oversized_frame) {
                /* The stream cannot be resynchronised: never read again. */
                uv_read_stop((uv_stream_t *)&ch->tcp);
                ch->reading = 0;
                ch->callbacks.on_oversized_frame(ch, ch->reader.rejected_length);
            }
            channel_close(ch, reason);
            break;
        }
        ch->stats.frames_in++;
        if (ch->options.totals) ch->options.totals->frames_in++;
        ch->callbacks.on_frame(ch, frame, length);
        /* Backpressure may have paused reading; frames already buffered are
         * still dispatched, which is bounded by one read chunk. */
    }
    /* A frame left half-received: when it began (a newer one if frames
     * completed in this read), so an owner can drop a peer that trickles.
     * A held channel's pending bytes are ours to wait on, not the peer's. */
    if (ch->state != CHANNEL_OPEN) return;
    bool partial = frame_reader_pending(&ch->reader) > 0 || (ch->ws && websocket_has_partial_input(ch->ws));
    if (ch->held || !partial)
        ch->incomplete_since_us = 0;
    else if (dispatched || ch->incomplete_since_us == 0)
        ch->incomplete_since_us = clock_monotonic_us();
}

uint64_t channel_incomplete_frame_since_us(const channel *ch) { return ch->incomplete_since_us; }

/* Reading paused for backpressure starts again once the queue is down to
 * half the high-water mark. */
static void channel_resume_if_drained(channel *ch) {
    if (ch->paused_for_backpressure && ch->queued_bytes <= ch->options.write_high_water_bytes / 2) {
        ch->paused_for_backpressure = 0;
        channel_update_reading(ch);
    }
}

static void channel_on_write_done(uv_write_t *request, int status) {
    channel_write *write = (channel_write *)request;
    channel *ch = request->handle->data;
    ch->queued_bytes -= write->bytes;
    if (!ch->spare && write->capacity <= CHANNEL_SPARE_MAX_BYTES && ch->state != CHANNEL_CLOSING)
        ch->spare = write;
    else
        free(write);
    if (ch->state == CHANNEL_CLOSING) return;
    if (status < 0) {
        char reason[128];
        snprintf(reason, sizeof reason, "write error: %s", uv_strerror(status));
        channel_close(ch, reason);
        return;
    }
    channel_resume_if_drained(ch);
}

/* The gathering write with room for `more` bytes, created or grown. It is
 * not libuv's yet, so it may move. */
static channel_write *channel_gathering_reserve(channel *ch, size_t more) {
    channel_write *write = ch->gathering;
    size_t need = (write ? write->bytes : 0) + more;
    if (write && need <= write->capacity) return write;
    if (!write && ch->spare) {
        /* The last finished write's buffer, grown below if too small. */
        write = ch->spare;
        ch->spare = NULL;
        write->bytes = 0;
        ch->gathering = write;
        if (need <= write->capacity) return write;
    }
    size_t capacity = write ? write->capacity * 2 : CHANNEL_FIRST_WRITE_BYTES;
    while (capacity < need) capacity *= 2;
    write = xrealloc(write, sizeof *write + capacity);
    if (!ch->gathering) write->bytes = 0;
    write->capacity = capacity;
    ch->gathering = write;
    return write;
}

/* A write libuv refused: its bytes leave the queue and the channel closes.
 * Returns -1. */
static int channel_write_failed(channel *ch, channel_write *write, int error) {
    ch->queued_bytes -= write->bytes;
    free(write);
    char reason[128];
    snprintf(reason, sizeof reason, "write failed: %s", uv_strerror(error));
    channel_close(ch, reason);
    return -1;
}

/* Hands `write` (the channel's no longer) to the kernel: straight away when
 * it fits, the rest through libuv's queue. Returns 0, or -1 when the write
 * failed and the channel is closing. */
static int channel_write_out(channel *ch, channel_write *write) {
    size_t offset = 0;
    if (ch->state == CHANNEL_OPEN && write->bytes <= CHANNEL_TRY_WRITE_MAX_BYTES) {
        /* Straight to the kernel when nothing is queued ahead (the usual
         * case): no write request, and libuv does not re-arm the socket in
         * epoll after every write. What does not fit goes the queued way. */
        uv_buf_t buffer = {.base = (char *)write->data, .len = write->bytes};
        int written = uv_try_write((uv_stream_t *)&ch->tcp, &buffer, 1);
        if (written > 0) {
            offset = (size_t)written;
            ch->queued_bytes -= offset;
            ch->stats.writes++;
            if (ch->options.totals) ch->options.totals->writes++;
            if (offset == write->bytes) {
                if (!ch->spare && write->capacity <= CHANNEL_SPARE_MAX_BYTES)
                    ch->spare = write;
                else
                    free(write);
                channel_resume_if_drained(ch);
                return 0;
            }
        } else if (written != UV_EAGAIN) {
            return channel_write_failed(ch, write, written);
        }
    }
    /* The rest is libuv's until on_write_done: write->bytes is what it
     * still owes. */
    write->bytes -= offset;
    uv_buf_t buf = uv_buf_init((char *)write->data + offset, (unsigned)write->bytes);
    int rc = uv_write(&write->request, (uv_stream_t *)&ch->tcp, &buf, 1, channel_on_write_done);
    if (rc < 0) return channel_write_failed(ch, write, rc);
    ch->stats.writes++;
    if (ch->options.totals) ch->options.totals->writes++;
    return 0;
}

/* ---- TLS (tls.h) ------------------------------------------------------------- */

/* A TLS failure: the channel closes with its cause. Returns -1. */
static int channel_tls_failed(channel *ch) {
    char reason[224];
    snprintf(reason, sizeof reason, "TLS: %s", tls_session_error(ch->tls));
    channel_close(ch, reason);
    return -1;
}

/* Sends the ciphertext the session produced (handshake records, encrypted
 * frames) as one write. Returns 0, or -1 when the channel is closing. */
static int channel_tls_send_output(channel *ch) {
    size_t pending = tls_session_output_pending(ch->tls);
    if (pending == 0 || ch->state == CHANNEL_CLOSING) return 0;
    channel_write *write = ch->spare && ch->spare->capacity >= pending ? ch->spare : NULL;
    if (write)
        ch->spare = NULL;
    else {
        write = xmalloc(sizeof *write + pending);
        write->capacity = pending;
    }
    write->bytes = tls_session_take_output(ch->tls, write->data, pending);
    ch->queued_bytes += write->bytes;
    return channel_write_out(ch, write);
}

/* Moves the handshake on; once it completes, the frames gathered meanwhile
 * go. Returns 0, or -1 when the channel is closing. */
static int channel_tls_handshake(channel *ch) {
    bool was_established = tls_session_established(ch->tls);
    int rc = tls_session_handshake(ch->tls);
    if (channel_tls_send_output(ch) != 0) return -1;
    if (rc == TLS_FAILED) return channel_tls_failed(ch);
    if (rc != 1 || was_established) return 0;
    /* A dialled WebSocket channel asks for the upgrade next. */
    if (ch->dialled && ch->ws) return channel_websocket_start_client(ch);
    /* A dialled channel is connected once it is secure. */
    if (ch->dialled && ch->callbacks.on_connect) {
        ch->callbacks.on_connect(ch, 0);
        if (ch->state == CHANNEL_CLOSING) return -1;
    }
    return ch->gathering ? channel_flush(ch) : 0;
}

/* Ciphertext arrived: the handshake moves on, and the plaintext goes into
 * the frame reader. Returns 0, or -1 when the channel is closing. */
static int channel_tls_received(channel *ch, const uint8_t *data, size_t length) {
    if (tls_session_feed(ch->tls, data, length) != 0) return channel_tls_failed(ch);
    if (!tls_session_established(ch->tls)) {
        if (channel_tls_handshake(ch) != 0) return -1;
        if (!tls_session_established(ch->tls)) return 0;
    }
    for (;;) {
        if (ch->ws) {
            /* A WebSocket inside TLS: the plaintext is its bytes. */
            uint8_t plaintext[CHANNEL_TLS_RECORD_BYTES];
            int got = tls_session_read(ch->tls, plaintext, sizeof plaintext);
            if (got == TLS_WANT_MORE) break;
            if (got == TLS_FAILED) return channel_tls_failed(ch);
            if (channel_websocket_received(ch, plaintext, (size_t)got) != 0) return -1;
            continue;
        }
        uint8_t *space;
        size_t space_bytes;
        /* One record's plaintext at a time: asking for a whole read chunk
         * here would double every reader that holds a partial frame. */
        frame_reader_reserve(&ch->reader, CHANNEL_TLS_RECORD_BYTES, &space, &space_bytes);
        int got = tls_session_read(ch->tls, space, space_bytes);
        if (got == TLS_WANT_MORE) break;
        if (got == TLS_FAILED) return channel_tls_failed(ch);
        frame_reader_commit(&ch->reader, (size_t)got);
    }
    /* Reading may have produced records of its own (a key update). */
    return channel_tls_send_output(ch);
}

/* Hands the gathered frames to libuv as one write (encrypted first on a TLS
 * channel, once its handshake is done). Returns 0, or -1 when the write
 * failed and the channel is closing. */
int channel_flush(channel *ch) {
    channel_write *write = ch->gathering;
    if (!write) return 0;
    uv_prepare_stop(&ch->flush_prepare);
    /* A WebSocket's frames wait for the upgrade request's answer, which
     * goes first (channel_websocket_send). */
    if (ch->ws && !ch->ws_answered) return 0;
    if (ch->tls) {
        /* Before the handshake completes they wait: its end flushes. */
        if (!tls_session_established(ch->tls)) return 0;
        ch->gathering = NULL;
        int rc = tls_session_write(ch->tls, write->data, write->bytes);
        ch->queued_bytes -= write->bytes;
        if (!ch->spare && write->capacity <= CHANNEL_SPARE_MAX_BYTES)
            ch->spare = write;
        else
            free(write);
        if (rc != 0) return channel_tls_failed(ch);
        return channel_tls_send_output(ch);
    }
    ch->gathering = NULL;
    return channel_write_out(ch, write);
}

static void channel_on_prepare(uv_prepare_t *prepare) { channel_flush(prepare->data); }

/* Counts a frame of `bytes` (header included) just gathered, applies the
 * queue limits, and starts the flush. */
static int channel_commit_frame(channel *ch, size_t bytes) {
    ch->gathering->bytes += bytes;
    ch->queued_bytes += bytes;
    ch->stats.frames_out++;
    ch->stats.bytes_out += bytes;
    if (ch->options.totals) {
        ch->options.totals->frames_out++;
        ch->options.totals->bytes_out += bytes;
    }
    if (ch->queued_bytes > ch->options.write_limit_bytes) {
        char reason[160];
        snprintf(reason, sizeof reason, "slow consumer: %zu bytes queued, limit %zu", ch->queued_bytes,
                 ch->options.write_limit_bytes);
        channel_close(ch, reason);
        return -1;
    }
    if (!ch->paused_for_backpressure && ch->queued_bytes > ch->options.write_high_water_bytes) {
        ch->paused_for_backpressure = 1;
        channel_update_reading(ch);
    }
    if (ch->gathering->bytes >= CHANNEL_GATHER_BYTES) return channel_flush(ch);
    uv_prepare_start(&ch->flush_prepare, channel_on_prepare);
    return 0;
}

/* A frame's header on this channel: the 4-byte length, or a WebSocket
 * binary frame's header (2, 4 or 10 bytes). */
static size_t channel_frame_header_bytes(const channel *ch, size_t length) {
    return ch->ws ? websocket_frame_header_bytes(ch->ws, length) : FRAME_HEADER_BYTES;
}

static void channel_write_frame_header(channel *ch, uint8_t *out, size_t length) {
    if (ch->ws)
        websocket_frame_header(ch->ws, out, length);
    else
        frame_write_header(out, (uint32_t)length);
}

/* Whether a frame may still be queued: not once the channel is closing,
 * nor on a WebSocket whose Close has gone (RFC 6455, 5.5.1: no data frame
 * after it; the peer's Close is answered before the messages that came
 * with it are dispatched, and their replies would follow it). */
static bool channel_may_send(const channel *ch) {
    return ch && ch->state != CHANNEL_CLOSING && !(ch->ws && websocket_close_sent(ch->ws));
}

int channel_send(channel *ch, const uint8_t *body, size_t length) {
    if (!channel_may_send(ch)) return -1;
    if (length > UINT32_MAX - FRAME_HEADER_BYTES) return -1;
    size_t header = channel_frame_header_bytes(ch, length);
    channel_write *write = channel_gathering_reserve(ch, header + length);
    uint8_t *frame = write->data + write->bytes;
    channel_write_frame_header(ch, frame, length);
    if (length > 0) memcpy(frame + header, body, length);
    if (ch->ws) websocket_mask_payload(ch->ws, frame + header, length);
    return channel_commit_frame(ch, header + length);
}

int channel_send_message(channel *ch, const ProtobufCMessage *message) {
    if (!channel_may_send(ch)) return -1;
    size_t length = protobuf_c_message_get_packed_size(message);
    if (length > UINT32_MAX - FRAME_HEADER_BYTES) return -1;
    size_t header = channel_frame_header_bytes(ch, length);
    channel_write *write = channel_gathering_reserve(ch, header + length);
    uint8_t *frame = write->data + write->bytes;
    channel_write_frame_header(ch, frame, length);
    protobuf_c_message_pack(message, frame + header);
    if (ch->ws) websocket_mask_payload(ch->ws, frame + header, length);
    return channel_commit_frame(ch, header + length);
}

/* ---- WebSocket (websocket.h) ------------------------------------------------- */

/* Bytes of the WebSocket's own (the upgrade's answer, a pong, a Close)
 * gathered with the frames, in order; the upgrade's answer goes in front
 * of the frames the owner sent before it. */
static void channel_gather_raw(channel *ch, const uint8_t *data, size_t length, bool in_front) {
    channel_write *write = channel_gathering_reserve(ch, length);
    if (in_front) {
        memmove(write->data + length, write->data, write->bytes);
        memcpy(write->data, data, length);
    } else {
        memcpy(write->data + write->bytes, data, length);
    }
    write->bytes += length;
    ch->queued_bytes += length;
    ch->stats.bytes_out += length;
    if (ch->options.totals) ch->options.totals->bytes_out += length;
    uv_prepare_start(&ch->flush_prepare, channel_on_prepare);
}

/* Bytes that go now, before everything gathered: a WebSocket client's
 * upgrade request. Returns 0, or -1 when the channel is closing. */
static int channel_write_now(channel *ch, const uint8_t *data, size_t length) {
    if (ch->tls) {
        if (tls_session_write(ch->tls, data, length) != 0) return channel_tls_failed(ch);
        return channel_tls_send_output(ch);
    }
    channel_write *write = xmalloc(sizeof *write + length);
    write->capacity = length;
    write->bytes = length;
    memcpy(write->data, data, length);
    ch->queued_bytes += length;
    return channel_write_out(ch, write);
}

static int channel_websocket_send(void *user_data, const uint8_t *data, size_t length) {
    channel *ch = user_data;
    if (ch->state == CHANNEL_CLOSING) return -1;
    /* A client's upgrade request: the frames wait for the answer. */
    if (ch->dialled && !ch->ws_answered) return channel_write_now(ch, data, length);
    bool in_front = false;
    if (!ch->ws_answered) {
        if (websocket_is_open(ch->ws))
            in_front = true; /* the 101 */
        else
            channel_discard_gathering(ch); /* a refusal: no frame may follow it */
        ch->ws_answered = true;
    }
    channel_gather_raw(ch, data, length, in_front);
    return 0;
}

/* A whole binary message: one frame body, into the frame reader as if it
 * had come length-prefixed. */
static int channel_websocket_message(void *user_data, const uint8_t *data, size_t length) {
    channel *ch = user_data;
    uint8_t *space;
    size_t space_bytes;
    frame_reader_reserve(&ch->reader, FRAME_HEADER_BYTES + length, &space, &space_bytes);
    frame_write_header(space, (uint32_t)length);
    if (length) memcpy(space + FRAME_HEADER_BYTES, data, length);
    frame_reader_commit(&ch->reader, FRAME_HEADER_BYTES + length);
    return 0;
}

/* A message over max_frame_bytes: the owner hears it as an oversized frame
 * (it may queue an error and close after flushing, with the Close 1009). */
static void channel_websocket_oversized(void *user_data, uint64_t declared) {
    channel *ch = user_data;
    if (!ch->callbacks.on_oversized_frame || ch->state == CHANNEL_CLOSING) return;
    if (ch->reading) uv_read_stop((uv_stream_t *)&ch->tcp);
    ch->reading = 0;
    ch->callbacks.on_oversized_frame(ch, declared > UINT32_MAX ? UINT32_MAX : (uint32_t)declared);
}

static const websocket_callbacks channel_websocket_callbacks = {
    channel_websocket_message,
    channel_websocket_oversized,
    channel_websocket_send,
};

/* Bytes from the peer (after TLS, if any) for the WebSocket. Returns 0, or
 * -1 when the channel is closing (the WebSocket's answer, a Close or an
 * HTTP refusal, goes first). */
static int channel_websocket_received(channel *ch, const uint8_t *data, size_t length) {
    int rc = websocket_feed(ch->ws, data, length);
    if (rc == WEBSOCKET_OK && ch->dialled && !ch->ws_answered && websocket_is_open(ch->ws)) {
        /* A dialled channel is connected once the server took the upgrade;
         * what the owner sent meanwhile goes now. */
        ch->ws_answered = true;
        if (ch->callbacks.on_connect) {
            ch->callbacks.on_connect(ch, 0);
            if (ch->state == CHANNEL_CLOSING) return -1;
        }
        if (ch->gathering && channel_flush(ch) != 0) return -1;
    }
    if (rc == WEBSOCKET_OK) return 0;
    if (ch->state == CHANNEL_CLOSING) return -1;
    char reason[192];
    snprintf(reason, sizeof reason, "%s", websocket_error(ch->ws));
    /* A clean Close after messages in the same read: they are the peer's
     * last words (a redirect, an error), dispatched first, as the frames
     * before a TCP end of file are. */
    if (rc == WEBSOCKET_CLOSED) {
        channel_dispatch(ch);
        if (ch->state == CHANNEL_CLOSING) return -1;
    }
    if (rc == WEBSOCKET_STOPPED)
        channel_close(ch, reason);
    else
        channel_close_after_flushing(ch, reason, rc != WEBSOCKET_SERVED);
    return -1;
}

/* A dialled WebSocket channel is up (TCP, and TLS if any): its upgrade
 * request goes, naming the address dialled. Returns 0, or -1 when the
 * channel is closing. */
static int channel_websocket_start_client(channel *ch) {
    if (websocket_client_start(ch->ws, ch->peer_name, "/") == 0) return 0;
    if (ch->state != CHANNEL_CLOSING) channel_close(ch, "cannot send the WebSocket upgrade request");
    return -1;
}

/* Before a flush-close: a Close frame after the frames (the WebSocket's
 * close code: 1000 unless it failed), or, before the upgrade was
 * answered, an HTTP 503 with the reason instead of the frames. */
static void channel_websocket_goodbye(channel *ch, const char *reason) {
    if (websocket_is_open(ch->ws)) {
        uint8_t frame[WEBSOCKET_MAX_CLOSE_FRAME_BYTES];
        size_t length = websocket_close_frame(ch->ws, frame, websocket_close_code(ch->ws), reason);
        if (length) channel_gather_raw(ch, frame, length, false);
        return;
    }
    if (ch->ws_answered) return;
    char refusal[512];
    size_t length = websocket_refusal(ch->ws, refusal, sizeof refusal, reason ? reason : "closed");
    channel_discard_gathering(ch);
    ch->ws_answered = true;
    if (length) channel_gather_raw(ch, (const uint8_t *)refusal, length, false);
}

static channel *channel_create(uv_loop_t *loop, const channel_options *options, const channel_callbacks *callbacks,
                               void *user_data) {
    channel *ch = xcalloc(1, sizeof *ch);
    if (uv_tcp_init(loop, &ch->tcp) != 0) {
        free(ch);
        return NULL;
    }
    ch->tcp.data = ch;
    uv_prepare_init(loop, &ch->flush_prepare);
    ch->flush_prepare.data = ch;
    ch->open_handles = 2;
    ch->options = *options;
    ch->callbacks = *callbacks;
    ch->user_data = user_data;
    frame_reader_init(&ch->reader, options->max_frame_bytes);
    snprintf(ch->peer_name, sizeof ch->peer_name, "?");
    return ch;
}

static void channel_fill_peer_name(channel *ch) {
    struct sockaddr_storage address;
    int length = sizeof address;
    if (uv_tcp_getpeername(&ch->tcp, (struct sockaddr *)&address, &length) != 0) return;
    char ip[48] = "?";
    int port = 0;
    if (address.ss_family == AF_INET) {
        struct sockaddr_in *v4 = (struct sockaddr_in *)&address;
        uv_ip4_name(v4, ip, sizeof ip);
        port = ntohs(v4->sin_port);
    } else if (address.ss_family == AF_INET6) {
        struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&address;
        uv_ip6_name(v6, ip, sizeof ip);
        port = ntohs(v6->sin6_port);
    }
    snprintf(ch->peer_name, sizeof ch->peer_name, "%s:%d", ip, port);
}

static void channel_start_open(channel *ch) {
    ch->state = CHANNEL_OPEN;
    uv_tcp_nodelay(&ch->tcp, 1);
    channel_fill_peer_name(ch);
    channel_update_reading(ch);
}

/* The channel's TLS session, as server or client. Returns 0, or -1 (logged). */
static int channel_start_tls(channel *ch, bool server) {
    if (!ch->options.tls) return 0;
    ch->tls = tls_session_create(ch->options.tls, server, ch->options.tls_server_name);
    ch->options.tls_server_name = NULL; /* the session has its copy */
    return ch->tls ? 0 : -1;
}

channel *channel_accept(uv_stream_t *listener, const channel_options *options, const channel_callbacks *callbacks,
                        void *user_data) {
    channel *ch = channel_create(listener->loop, options, callbacks, user_data);
    if (!ch) return NULL;
    int rc = uv_accept(listener, (uv_stream_t *)&ch->tcp);
    if (rc != 0) {
        log_warn("accept failed: %s", uv_strerror(rc));
        /* Not yet handed out: close without calling on_close. */
        ch->callbacks.on_close = NULL;
        channel_close(ch, "accept failed");
        return NULL;
    }
    if (options->socket_send_buffer_bytes > 0) {
        int size = options->socket_send_buffer_bytes > INT32_MAX ? INT32_MAX : (int)options->socket_send_buffer_bytes;
        int rc_size = uv_send_buffer_size((uv_handle_t *)&ch->tcp, &size);
        if (rc_size != 0) log_warn("cannot set the send buffer of an accepted socket: %s", uv_strerror(rc_size));
    }
    if (channel_start_tls(ch, true) != 0) {
        ch->callbacks.on_close = NULL;
        channel_close(ch, "no TLS session");
        return NULL;
    }
    if (options->websocket) {
        ch->ws = websocket_server_create(options->max_frame_bytes, &channel_websocket_callbacks, ch);
        websocket_serve(ch->ws, options->websocket_resources, options->websocket_resource_count);
    }
    channel_start_open(ch);
    return ch;
}

static int channel_parse_address(const char *host, int port, struct sockaddr_storage *out) {
    memset(out, 0, sizeof *out);
    if (uv_ip4_addr(host, port, (struct sockaddr_in *)out) == 0) return 0;
    if (uv_ip6_addr(host, port, (struct sockaddr_in6 *)out) == 0) return 0;
    return UV_EINVAL;
}

static void channel_on_connected(uv_connect_t *request, int status) {
    channel *ch = request->handle->data;
    if (ch->flush_on_connect) {
        ch->flush_on_connect = 0;
        if (status != 0 || uv_shutdown(&ch->shutdown_request, (uv_stream_t *)&ch->tcp, channel_on_shutdown) != 0)
            channel_close_socket(ch);
        return;
    }
    if (ch->state == CHANNEL_CLOSING) return;
    if (status == 0) {
        channel_start_open(ch);
        /* The client speaks first: its hello goes now, and on_connect
         * waits for the handshake's end. */
        if (ch->tls) {
            channel_tls_handshake(ch);
            return;
        }
        if (ch->ws) {
            channel_websocket_start_client(ch);
            return;
        }
        if (ch->callbacks.on_connect) ch->callbacks.on_connect(ch, 0);
        return;
    }
    if (ch->callbacks.on_connect) ch->callbacks.on_connect(ch, status);
    char reason[160];
    snprintf(reason, sizeof reason, "connect to %s failed: %s", ch->peer_name, uv_strerror(status));
    channel_close(ch, reason);
}

channel *channel_connect(uv_loop_t *loop, const char *host, int port, const channel_options *options,
                         const channel_callbacks *callbacks, void *user_data) {
    struct sockaddr_storage address;
    if (channel_parse_address(host, port, &address) != 0) {
        log_warn("cannot connect to '%s:%d': not an IP address", host, port);
        return NULL;
    }
    channel *ch = channel_create(loop, options, callbacks, user_data);
    if (!ch) return NULL;
    if (channel_start_tls(ch, false) != 0) {
        ch->callbacks.on_close = NULL;
        channel_close(ch, "no TLS session");
        return NULL;
    }
    ch->dialled = true;
    if (options->websocket)
        ch->ws = websocket_client_create(options->max_frame_bytes, &channel_websocket_callbacks, ch);
    ch->state = CHANNEL_CONNECTING;
    snprintf(ch->peer_name, sizeof ch->peer_name, "%s:%d", host, port);
    int rc = uv_tcp_connect(&ch->connect_request, &ch->tcp, (struct sockaddr *)&address, channel_on_connected);
    if (rc != 0) {
        log_warn("connect to %s:%d failed: %s", host, port, uv_strerror(rc));
        ch->callbacks.on_close = NULL;
        channel_close(ch, "connect failed");
        return NULL;
    }
    return ch;
}

int channel_listen(uv_loop_t *loop, uv_tcp_t *server, const char *host, int port, uv_connection_cb on_connection,
                   char *err, size_t errlen) {
    struct sockaddr_storage address;
    int rc = channel_parse_address(host, port, &address);
    if (rc != 0) {
        snprintf(err, errlen, "cannot listen on '%s:%d': not an IP address", host, port);
        return rc;
    }
    rc = uv_tcp_init(loop, server);
    if (rc != 0) {
        snprintf(err, errlen, "cannot create a socket for %s:%d: %s", host, port, uv_strerror(rc));
        return rc;
    }
    rc = uv_tcp_bind(server, (struct sockaddr *)&address, 0);
    if (rc == 0) rc = uv_listen((uv_stream_t *)server, 511, on_connection);
    if (rc != 0) {
        snprintf(err, errlen, "cannot listen on %s:%d: %s%s", host, port, uv_strerror(rc),
                 rc == UV_EADDRINUSE ? " (address already in use by another process)" : "");
        /* The handle was initialised: release it so the loop can close. */
        uv_close((uv_handle_t *)server, NULL);
        return rc;
    }
    return 0;
}

int channel_listener_port(uv_tcp_t *server) {
    struct sockaddr_storage address;
    int length = sizeof address;
    if (uv_tcp_getsockname(server, (struct sockaddr *)&address, &length) != 0) return -1;
    if (address.ss_family == AF_INET) return ntohs(((struct sockaddr_in *)&address)->sin_port);
    if (address.ss_family == AF_INET6) return ntohs(((struct sockaddr_in6 *)&address)->sin6_port);
    return -1;
}

channel_state channel_get_state(const channel *ch) { return ch->state; }
void *channel_user_data(const channel *ch) { return ch->user_data; }
void channel_set_user_data(channel *ch, void *user_data) { ch->user_data = user_data; }
const char *channel_peer_name(const channel *ch) { return ch->peer_name; }
size_t channel_queued_bytes(const channel *ch) { return ch->queued_bytes; }
const channel_stats *channel_get_stats(const channel *ch) { return &ch->stats; }
