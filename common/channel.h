/* channel.h -- a framed, bidirectional connection over libuv TCP.
 *
 * A channel carries length-prefixed frames (frame.h) in both directions. It
 * checks frame sizes before allocating, applies write backpressure, and
 * closes cleanly:
 *
 *  - Backpressure. When more than write_high_water_bytes are queued towards
 *    the peer, the channel stops reading from that peer until the queue
 *    drains below half of it, so a peer that does not read cannot make us
 *    buffer its requests' answers without bound. Past write_limit_bytes the
 *    peer is a slow consumer and the channel closes.
 *  - Gathering. The frames sent while the loop runs callbacks are gathered
 *    and handed to the kernel as one write just before the loop next waits
 *    for events (a prepare handle), or at once past 256 KiB: a process that
 *    answers many requests in one loop iteration writes each peer once, and
 *    the peer wakes once. channel_flush writes them now. A small write
 *    goes straight to the kernel (uv_try_write) when nothing is queued
 *    ahead of it, and its buffer is kept for the next one: a relay writes
 *    its clients without a write request or an allocation per write.
 *  - Lifecycle. CONNECTING -> OPEN -> CLOSING -> (freed). channel_close is
 *    idempotent and safe inside any callback of the channel; the memory is
 *    released only in libuv's close callback, after on_close has run, so a
 *    channel is never freed inside its own callback.
 *  - Callbacks. on_frame never fires after channel_close was called, even
 *    for frames already buffered. on_close fires exactly once per channel
 *    that was returned non-NULL, with the first reason given.
 *
 *  - TLS. With options.tls the channel speaks TLS 1.3 (tls.h): an accepted
 *    one as the server, a dialled one as the client. Frames sent before
 *    the handshake completes wait in the gathering buffer and go, encrypted,
 *    as soon as it does; everything above (frames, limits, backpressure,
 *    the close sequence) is the same. A peer that fails the handshake (a
 *    certificate that does not verify, plaintext on a TLS port) closes the
 *    channel with the reason. bytes_in counts what arrived on the wire;
 *    bytes_out the frames' bytes before encryption.
 *
 * Hosts are IP literals (v4 or v6): name resolution would block the loop.
 */
#ifndef TESSERA_CHANNEL_H
#define TESSERA_CHANNEL_H

#include <protobuf-c/protobuf-c.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

typedef struct channel channel;
struct channel_stats;
struct tls_context;
struct websocket_resource;

typedef enum channel_state {
    CHANNEL_CONNECTING, /* dialling; sends are queued by libuv until connected */
    CHANNEL_OPEN,       /* reading and writing */
    CHANNEL_CLOSING,    /* channel_close called; waiting for libuv to release the socket */
} channel_state;

typedef struct channel_options {
    size_t max_frame_bytes;        /* frames above this are refused (on_close reason says so) */
    size_t write_high_water_bytes; /* stop reading from the peer above this many queued bytes */
    size_t write_limit_bytes;      /* close the channel above this many queued bytes */
    struct channel_stats *totals;  /* optional: process-wide counters this channel adds to */
    /* The kernel's send buffer for the socket (SO_SNDBUF), 0 for the
     * kernel's default (which autotunes up to megabytes). A small one keeps
     * what a slow peer has not read in our queue, where
     * channel_queued_bytes sees it. Accepted channels only. */
    size_t socket_send_buffer_bytes;
    /* Optional: asked before each frame is dispatched. false holds the
     * channel (channel_hold): the frame and those after it wait, unread,
     * until channel_resume. A process that must not act now (a fenced
     * baseapp) holds its clients' channels this way, so what they sent is
     * neither acted on nor lost. */
    bool (*may_dispatch)(void *gate_data);
    void *gate_data;
    /* Optional: speak TLS with this context (tls.h); NULL: plaintext. A
     * dialled channel expects the server's certificate to name
     * tls_server_name (copied at creation). */
    struct tls_context *tls;
    const char *tls_server_name;
    /* Speak WebSocket (websocket.h), inside TLS when tls is set too. An
     * accepted channel answers the peer's upgrade request first; a dialled
     * one sends its own once connected (and secure) and is connected
     * (on_connect) when the server took it. Then one binary message
     * carries one frame body each way (no 4-byte length; a dialled
     * channel's are masked), with the same max_frame_bytes, backpressure
     * and queue limits. A flush-close ends with a Close frame, or, before
     * an accepted channel's upgrade was answered, with an HTTP 503
     * carrying the reason. */
    bool websocket;
    /* An accepted WebSocket channel's files, fetched by a plain GET of
     * their path instead of an upgrade (websocket_serve; borrowed). */
    const struct websocket_resource *websocket_resources;
    size_t websocket_resource_count;
} channel_options;

typedef struct channel_callbacks {
    /* A complete frame body. `frame` is valid only during the call. */
    void (*on_frame)(channel *ch, const uint8_t *frame, size_t length);
    /* Outbound channels only: the connection attempt finished (with TLS,
     * once the handshake did). status is 0 or a libuv error; on error
     * on_close follows (a failed handshake closes without on_connect). May
     * be NULL. */
    void (*on_connect)(channel *ch, int status);
    /* Optional: the peer announced a frame above max_frame_bytes. Reading
     * has stopped for good; the owner may queue an error for the peer and
     * close (channel_close_after_flush). If it leaves the channel open, or
     * this is NULL, the channel closes. */
    void (*on_oversized_frame)(channel *ch, uint32_t declared_length);
    /* The channel is gone; its memory is freed when this returns. */
    void (*on_close)(channel *ch, const char *reason);
} channel_callbacks;

/* Default sizes for process-to-process links: generous frames (a tick batch
 * for thousands of clients) and a deep queue. */
channel_options channel_default_peer_options(void);

/* Binds and listens on host:port. Returns 0, or a libuv error code with a
 * message naming the address and the cause in err; after a bind or listen
 * failure `server` is closing and must stay valid until the loop has run
 * once more. The process must ignore SIGPIPE, as every Tessera program
 * does, or a write to a vanished peer kills it. */
int channel_listen(uv_loop_t *loop, uv_tcp_t *server, const char *host, int port, uv_connection_cb on_connection,
                   char *err, size_t errlen);
/* The port a listener is bound to (useful after port 0). */
int channel_listener_port(uv_tcp_t *server);

/* Accepts one pending connection from `listener`. NULL if accepting failed
 * (logged). */
channel *channel_accept(uv_stream_t *listener, const channel_options *options, const channel_callbacks *callbacks,
                        void *user_data);

/* Dials host:port. Returns NULL when the address is invalid or the socket
 * cannot be created; otherwise on_connect fires later. */
channel *channel_connect(uv_loop_t *loop, const char *host, int port, const channel_options *options,
                         const channel_callbacks *callbacks, void *user_data);

/* Queues one frame with a copy of `body` (gathered: see above). Returns 0,
 * or -1 if the channel is closing, its WebSocket has sent its Close, or
 * the peer is a slow consumer (the channel is then closing). */
int channel_send(channel *ch, const uint8_t *body, size_t length);
/* Packs `message` straight into the outgoing buffer and queues it. */
int channel_send_message(channel *ch, const ProtobufCMessage *message);
/* Hands the frames gathered so far to libuv now rather than when the loop
 * next waits. Returns 0, or -1 if the write failed (the channel is then
 * closing). */
int channel_flush(channel *ch);

/* Holds the channel: no frame is dispatched and nothing more is read (the
 * peer's sends wait in its socket, then in the peer) until channel_resume,
 * which dispatches what was held first. Both are idempotent. */
void channel_hold(channel *ch);
void channel_resume(channel *ch);
bool channel_held(const channel *ch);

/* Starts closing. Idempotent; the first reason is kept. Frames still queued
 * for the peer are discarded. */
void channel_close(channel *ch, const char *reason);
/* Like channel_close, but the frames already queued (an Error telling the
 * peer why) are delivered first: reading stops at once, the socket is shut
 * down for writing once the queue drains, then closed. If more than
 * CHANNEL_FLUSH_LIMIT bytes are queued the peer is not reading and the
 * channel closes at once. */
void channel_close_after_flush(channel *ch, const char *reason);
#define CHANNEL_FLUSH_LIMIT ((size_t)256 * 1024)

channel_state channel_get_state(const channel *ch);
void *channel_user_data(const channel *ch);
void channel_set_user_data(channel *ch, void *user_data);
/* "ip:port" of the other end, for logs. */
const char *channel_peer_name(const channel *ch);
/* When the frame still being received began (monotonic us), or 0 when no
 * frame is half-received: a peer that never finishes one is trickling. */
uint64_t channel_incomplete_frame_since_us(const channel *ch);
/* Bytes sent and not yet taken by the kernel, gathered frames included. */
size_t channel_queued_bytes(const channel *ch);

typedef struct channel_stats {
    uint64_t frames_in, frames_out;
    uint64_t bytes_in, bytes_out;
    uint64_t writes; /* writes handed to libuv: frames_out / writes is the gathering */
} channel_stats;
const channel_stats *channel_get_stats(const channel *ch);

#endif
