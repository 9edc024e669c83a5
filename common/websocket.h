/* websocket.h -- a WebSocket connection (RFC 6455), as a byte transform:
 * what arrived from the peer goes in, whole binary messages and bytes to
 * send back come out. It never touches a socket; channel.c puts it between
 * the socket (or TLS) and the frame reader, so one binary WebSocket message
 * carries one client frame body, with the same limits as a length-prefixed
 * frame. The server side is the baseapp's websocket_port; the client side
 * (websocket_client_create) is the SDK's and the bots'.
 *
 * The connection opens with an HTTP/1.1 upgrade request (parsed with
 * http-parser), answered "101 Switching Protocols" with the accept key;
 * frames are decoded with wslay's frame layer. What is refused, and how:
 *
 *   handshake                       HTTP answer, then the connection ends
 *     not HTTP, or over 8 KiB         400 Bad Request
 *     not GET                         405 Method Not Allowed
 *     no Upgrade: websocket, or a     426 Upgrade Required (with
 *       version other than 13           Sec-WebSocket-Version: 13)
 *     no or a malformed key           400 Bad Request
 *   frames                          Close frame with the code, then the end
 *     unmasked, reserved bits or      1002 protocol error
 *       opcodes, a continuation
 *       out of place, a bad length
 *     a text message                  1003 unsupported data
 *     a message over the limit        1009 message too big (the owner is
 *                                       told first, as for an oversized
 *                                       frame: websocket_callbacks)
 *
 * Pings are answered with pongs carrying the same payload; pongs are
 * ignored; a Close from the peer is answered with a Close carrying its
 * code, and the connection is then over (WEBSOCKET_CLOSED). Fragmented
 * messages are put back together before they are handed on.
 *
 * Frames to the peer are binary and unfragmented: websocket_frame_header
 * writes their header in front of a body, unmasked from a server; a
 * client's are masked (websocket_mask_payload then masks the body).
 *
 * The client side sends the upgrade request (websocket_client_start),
 * checks the answer (101, Upgrade, Connection, the accept value of its
 * key; anything else fails the feed, sending nothing), and refuses masked
 * frames from the server (1002).
 */
#ifndef TESSERA_WEBSOCKET_H
#define TESSERA_WEBSOCKET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The longest path of a request kept (longer: no file is served). */
#define WEBSOCKET_PATH_MAX 256
/* The longest upgrade request read (headers included). */
#define WEBSOCKET_MAX_REQUEST_BYTES ((size_t)8 * 1024)
/* The longest header a frame to the peer needs (a client's: with a mask). */
#define WEBSOCKET_MAX_HEADER_BYTES 14
/* The longest Close frame websocket_close_frame writes. */
#define WEBSOCKET_MAX_CLOSE_FRAME_BYTES (6 + 125)

/* Close codes (RFC 6455, 7.4.1). */
#define WEBSOCKET_CLOSE_NORMAL 1000
#define WEBSOCKET_CLOSE_GOING_AWAY 1001
#define WEBSOCKET_CLOSE_PROTOCOL_ERROR 1002
#define WEBSOCKET_CLOSE_UNSUPPORTED_DATA 1003
#define WEBSOCKET_CLOSE_POLICY_VIOLATION 1008
#define WEBSOCKET_CLOSE_MESSAGE_TOO_BIG 1009

typedef struct websocket websocket;

typedef struct websocket_callbacks {
    /* A whole binary message; `data` is valid only during the call.
     * Returns 0, or -1 to stop (websocket_feed then returns
     * WEBSOCKET_STOPPED). */
    int (*on_message)(void *user_data, const uint8_t *data, size_t length);
    /* A message of `declared` bytes or more was begun, past the limit: the
     * owner may queue an error for the peer. websocket_feed then returns
     * WEBSOCKET_FAILED with the close code 1009. May be NULL. */
    void (*on_oversized)(void *user_data, uint64_t declared);
    /* Bytes for the peer, in order: the handshake's answer, pongs, Close
     * frames. Returns 0, or -1 (the connection is gone: stop). */
    int (*send)(void *user_data, const uint8_t *data, size_t length);
} websocket_callbacks;

/* A server-side connection whose messages may be up to max_message_bytes.
 * Copies callbacks. Never NULL (allocation failure aborts, as xmalloc). */
websocket *websocket_server_create(size_t max_message_bytes, const websocket_callbacks *callbacks, void *user_data);
/* The dialling side's: it speaks once websocket_client_start has sent the
 * upgrade request and the server's answer was fed in. */
websocket *websocket_client_create(size_t max_message_bytes, const websocket_callbacks *callbacks, void *user_data);
/* A client's upgrade request for `host` (the Host header: "host:port")
 * and `path` (NULL: "/"), through the send callback, with a fresh key.
 * Returns 0, or -1 (not a client, started already, or the send failed). */
int websocket_client_start(websocket *ws, const char *host, const char *path);
void websocket_free(websocket *ws);

/* What websocket_feed returns. */
#define WEBSOCKET_OK 0         /* all consumed; more may come */
#define WEBSOCKET_CLOSED 1     /* the peer closed and its Close was answered: end the connection */
#define WEBSOCKET_FAILED (-1)  /* refused (see the table above): the answer is sent; end the connection */
#define WEBSOCKET_STOPPED (-2) /* on_message or send asked to stop */
#define WEBSOCKET_SERVED 2     /* a plain GET got one of websocket_serve's files: end the connection once sent */

/* A file a plain GET (or HEAD) of its path may fetch from a server's port
 * instead of upgrading (the baseapp's play page and the SDK a browser
 * loads from the port it then plays on). The caller owns every byte. */
typedef struct websocket_resource {
    const char *path; /* "/play": the request's path up to '?' or '#' */
    const char *content_type;
    const uint8_t *body;
    size_t length;
} websocket_resource;

/* The files this server connection serves (borrowed: they must outlive it).
 * A request with no Upgrade header for one of their paths is answered 200
 * with the file and Connection: close (websocket_feed then returns
 * WEBSOCKET_SERVED); any other request is answered as the table above
 * says. */
void websocket_serve(websocket *ws, const websocket_resource *resources, size_t count);

/* Bytes from the peer. After anything but WEBSOCKET_OK, feed no more. */
int websocket_feed(websocket *ws, const uint8_t *data, size_t length);

/* Whether the handshake is done (frames may be sent). */
bool websocket_is_open(const websocket *ws);
/* Whether a request or a message has begun and not yet ended (a peer that
 * never finishes one is trickling). */
bool websocket_has_partial_input(const websocket *ws);
/* Why the last feed failed (for logs; never a peer's bytes unescaped). */
const char *websocket_error(const websocket *ws);
/* The close code the connection should end with: the failure's, or
 * WEBSOCKET_CLOSE_NORMAL. */
uint16_t websocket_close_code(const websocket *ws);
/* Whether a Close frame has been sent (the peer's was answered, or one was
 * written with websocket_close_frame); none is sent after it. */
bool websocket_close_sent(const websocket *ws);

/* Writes the header of a final binary frame of `payload_length` bytes
 * into out; returns its length (2, 4 or 10; a client's 4 more, with a
 * fresh mask for websocket_mask_payload). */
size_t websocket_frame_header(websocket *ws, uint8_t out[WEBSOCKET_MAX_HEADER_BYTES], uint64_t payload_length);
/* The header's length for a body of that size. */
size_t websocket_frame_header_bytes(const websocket *ws, uint64_t payload_length);
/* A client masks the body of the frame whose header it wrote last (in
 * place); a server's bodies go as they are. */
void websocket_mask_payload(const websocket *ws, uint8_t *payload, size_t length);
/* Writes a Close frame with `code` and `reason` (cut to fit 123 bytes)
 * into out and marks the Close as sent; returns its length, or 0 when one
 * was sent already or the handshake is not done. */
size_t websocket_close_frame(websocket *ws, uint8_t out[WEBSOCKET_MAX_CLOSE_FRAME_BYTES], uint16_t code,
                             const char *reason);

/* An HTTP answer refusing the connection before its handshake completed
 * (a full server, a shutdown): "HTTP/1.1 503 ..." with `reason` as the
 * body, into out (NUL-terminated); returns its length, or 0 when the
 * handshake was done already (send a Close frame instead). */
size_t websocket_refusal(const websocket *ws, char *out, size_t size, const char *reason);

#endif
