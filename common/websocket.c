/* websocket.c -- the server side of RFC 6455 as a byte transform
 * (websocket.h). It owns the upgrade request being parsed, wslay's frame
 * decoder, the message being put back together and the control frame
 * being read; the socket and every buffer towards the peer are the
 * caller's. */
#include "websocket.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <http_parser.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <wslay/wslay.h>

#include "log.h"

/* RFC 6455, 1.3: appended to the client's key before hashing. */
#define WEBSOCKET_GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
#define WEBSOCKET_FIELD_MAX 64
#define WEBSOCKET_VALUE_MAX 256
/* The most a control frame carries (RFC 6455, 5.5). */
#define WEBSOCKET_CONTROL_MAX 125

typedef enum websocket_phase {
    WEBSOCKET_HANDSHAKE, /* reading the upgrade request (a client: its answer) */
    WEBSOCKET_OPEN,      /* frames both ways */
    WEBSOCKET_DONE,      /* closed or failed: nothing more is read */
} websocket_phase;

struct websocket {
    websocket_callbacks callbacks;
    void *user_data;
    size_t max_message_bytes;
    websocket_phase phase;
    bool client;         /* the dialling side: masks what it sends, expects nothing masked */
    uint64_t mask_state; /* a client's masks: xorshift64, seeded from OpenSSL's generator */
    char expected_accept[32];
    uint8_t out_mask[4]; /* the mask of the frame a client is writing */

    /* The handshake. */
    http_parser parser;
    size_t request_bytes;
    bool headers_done;
    bool field_in_progress; /* the last callback was a header field's */
    char field[WEBSOCKET_FIELD_MAX];
    size_t field_length;
    char value[WEBSOCKET_VALUE_MAX];
    size_t value_length;
    bool value_too_long;
    bool upgrade_websocket, connection_upgrade;
    char key[WEBSOCKET_VALUE_MAX]; /* the request's key (a client: the answer's accept value) */
    char path[WEBSOCKET_PATH_MAX]; /* the request's path, without its query (cut: too long) */
    size_t path_length;
    bool path_too_long;
    const websocket_resource *resources; /* websocket_serve: files a plain GET may fetch */
    size_t resource_count;
    char version[16];

    /* The frames. */
    wslay_frame_context_ptr frames;
    const uint8_t *input; /* what websocket_feed was given and wslay has not pulled */
    size_t input_length;
    bool in_frame; /* a frame's header has been read, its payload not all */
    uint8_t frame_opcode;
    uint64_t frame_received;
    bool in_message; /* a fragmented message has begun */
    uint8_t *message;
    size_t message_length, message_capacity;
    uint8_t control[WEBSOCKET_CONTROL_MAX];
    size_t control_length;

    bool close_sent;
    uint16_t close_code;
    char error[160];
};

/* ---- wslay's callbacks: it pulls what websocket_feed was given ------------- */

static ssize_t websocket_pull(uint8_t *buffer, size_t length, int flags, void *user_data) {
    websocket *ws = user_data;
    (void)flags;
    size_t n = ws->input_length < length ? ws->input_length : length;
    if (n == 0) return 0; /* wslay reads this as "want more" */
    memcpy(buffer, ws->input, n);
    ws->input += n;
    ws->input_length -= n;
    return (ssize_t)n;
}

/* Frames to the peer are written by the caller, never through wslay. */
static ssize_t websocket_no_send(const uint8_t *data, size_t length, int flags, void *user_data) {
    (void)data;
    (void)length;
    (void)flags;
    (void)user_data;
    return -1;
}

static int websocket_no_mask(uint8_t *buffer, size_t length, void *user_data) {
    (void)buffer;
    (void)length;
    (void)user_data;
    return -1;
}

static websocket *websocket_create(size_t max_message_bytes, const websocket_callbacks *callbacks, void *user_data,
                                   bool client) {
    websocket *ws = xcalloc(1, sizeof *ws);
    ws->callbacks = *callbacks;
    ws->user_data = user_data;
    ws->max_message_bytes = max_message_bytes;
    ws->close_code = WEBSOCKET_CLOSE_NORMAL;
    ws->client = client;
    if (client && RAND_bytes((unsigned char *)&ws->mask_state, sizeof ws->mask_state) != 1)
        ws->mask_state = (uint64_t)(uintptr_t)ws ^ 0x9e3779b97f4a7c15ull;
    if (ws->mask_state == 0) ws->mask_state = 0x9e3779b97f4a7c15ull;
    http_parser_init(&ws->parser, client ? HTTP_RESPONSE : HTTP_REQUEST);
    ws->parser.data = ws;
    struct wslay_frame_callbacks frame_callbacks = {websocket_no_send, websocket_pull, websocket_no_mask};
    if (wslay_frame_context_init(&ws->frames, &frame_callbacks, ws) != 0) {
        log_error("websocket: out of memory for a frame decoder");
        abort();
    }
    return ws;
}

websocket *websocket_server_create(size_t max_message_bytes, const websocket_callbacks *callbacks, void *user_data) {
    return websocket_create(max_message_bytes, callbacks, user_data, false);
}

websocket *websocket_client_create(size_t max_message_bytes, const websocket_callbacks *callbacks, void *user_data) {
    return websocket_create(max_message_bytes, callbacks, user_data, true);
}

void websocket_free(websocket *ws) {
    if (!ws) return;
    wslay_frame_context_free(ws->frames);
    free(ws->message);
    free(ws);
}

bool websocket_is_open(const websocket *ws) { return ws->phase == WEBSOCKET_OPEN; }
const char *websocket_error(const websocket *ws) { return ws->error; }
uint16_t websocket_close_code(const websocket *ws) { return ws->close_code; }
bool websocket_close_sent(const websocket *ws) { return ws->close_sent; }

bool websocket_has_partial_input(const websocket *ws) {
    if (ws->phase == WEBSOCKET_HANDSHAKE) return ws->request_bytes > 0;
    return ws->phase == WEBSOCKET_OPEN && (ws->in_frame || ws->in_message);
}

/* ---- frames to the peer ---------------------------------------------------- */

size_t websocket_frame_header_bytes(const websocket *ws, uint64_t payload_length) {
    return (payload_length < 126 ? 2 : payload_length < 65536 ? 4 : 10) + (ws->client ? 4 : 0);
}

/* The header of a final frame with `opcode`: unmasked from a server; from
 * a client, masked with a fresh key (kept for websocket_mask_payload). */
static size_t websocket_header(websocket *ws, uint8_t *out, uint8_t opcode, uint64_t payload_length) {
    size_t at;
    uint8_t mask_bit = ws->client ? 0x80u : 0;
    out[0] = (uint8_t)(0x80u | opcode);
    if (payload_length < 126) {
        out[1] = (uint8_t)(mask_bit | payload_length);
        at = 2;
    } else if (payload_length < 65536) {
        out[1] = mask_bit | 126;
        out[2] = (uint8_t)(payload_length >> 8);
        out[3] = (uint8_t)payload_length;
        at = 4;
    } else {
        out[1] = mask_bit | 127;
        for (int i = 0; i < 8; i++) out[2 + i] = (uint8_t)(payload_length >> (56 - 8 * i));
        at = 10;
    }
    if (!ws->client) return at;
    /* xorshift64: masks need not be secret from a native client, only
     * varied (RFC 6455, 10.3 is about scripts in browsers). */
    ws->mask_state ^= ws->mask_state << 13;
    ws->mask_state ^= ws->mask_state >> 7;
    ws->mask_state ^= ws->mask_state << 17;
    for (int i = 0; i < 4; i++) ws->out_mask[i] = (uint8_t)(ws->mask_state >> (8 * i));
    memcpy(out + at, ws->out_mask, 4);
    return at + 4;
}

size_t websocket_frame_header(websocket *ws, uint8_t out[WEBSOCKET_MAX_HEADER_BYTES], uint64_t payload_length) {
    return websocket_header(ws, out, WSLAY_BINARY_FRAME, payload_length);
}

void websocket_mask_payload(const websocket *ws, uint8_t *payload, size_t length) {
    if (!ws->client) return;
    for (size_t i = 0; i < length; i++) payload[i] ^= ws->out_mask[i & 3];
}

size_t websocket_close_frame(websocket *ws, uint8_t out[WEBSOCKET_MAX_CLOSE_FRAME_BYTES], uint16_t code,
                             const char *reason) {
    if (ws->close_sent || ws->phase == WEBSOCKET_HANDSHAKE) return 0;
    size_t reason_length = reason ? strlen(reason) : 0;
    if (reason_length > WEBSOCKET_CONTROL_MAX - 2) reason_length = WEBSOCKET_CONTROL_MAX - 2;
    /* Cut at a character boundary: the reason must stay valid UTF-8. */
    while (reason_length > 0 && ((uint8_t)reason[reason_length] & 0xc0u) == 0x80u) reason_length--;
    size_t header = websocket_header(ws, out, WSLAY_CONNECTION_CLOSE, 2 + reason_length);
    out[header] = (uint8_t)(code >> 8);
    out[header + 1] = (uint8_t)code;
    /* A Close's reason is counted bytes, not a C string. */
    for (size_t i = 0; i < reason_length; i++) out[header + 2 + i] = (uint8_t)reason[i];
    websocket_mask_payload(ws, out + header, 2 + reason_length);
    ws->close_sent = true;
    return header + 2 + reason_length;
}

/* ---- failing ---------------------------------------------------------------- */

/* An HTTP answer to the upgrade request, then the end. Returns
 * WEBSOCKET_FAILED (or WEBSOCKET_STOPPED if the send failed). */
static int websocket_refuse_request(websocket *ws, const char *status, const char *extra_header, const char *why) {
    snprintf(ws->error, sizeof ws->error, "WebSocket handshake refused (%s): %s", status, why);
    ws->phase = WEBSOCKET_DONE;
    char answer[512];
    int length =
        snprintf(answer, sizeof answer,
                 "HTTP/1.1 %s\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n%sConnection: close\r\n\r\n"
                 "%s\n",
                 status, strlen(why) + 1, extra_header ? extra_header : "", why);
    if (length < 0 || (size_t)length >= sizeof answer) return WEBSOCKET_FAILED;
    if (ws->callbacks.send(ws->user_data, (const uint8_t *)answer, (size_t)length) != 0) return WEBSOCKET_STOPPED;
    return WEBSOCKET_FAILED;
}

/* A Close frame with `code`, then the end. Returns WEBSOCKET_FAILED (or
 * WEBSOCKET_STOPPED). */
static int websocket_fail(websocket *ws, uint16_t code, const char *why) {
    snprintf(ws->error, sizeof ws->error, "WebSocket %u: %s", code, why);
    ws->close_code = code;
    uint8_t frame[WEBSOCKET_MAX_CLOSE_FRAME_BYTES];
    size_t length = websocket_close_frame(ws, frame, code, why);
    ws->phase = WEBSOCKET_DONE;
    if (length && ws->callbacks.send(ws->user_data, frame, length) != 0) return WEBSOCKET_STOPPED;
    return WEBSOCKET_FAILED;
}

size_t websocket_refusal(const websocket *ws, char *out, size_t size, const char *reason) {
    if (ws->phase != WEBSOCKET_HANDSHAKE || size == 0) return 0;
    int length = snprintf(out, size,
                          "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n"
                          "Retry-After: 1\r\nConnection: close\r\n\r\n%s\n",
                          strlen(reason) + 1, reason);
    return length < 0 || (size_t)length >= size ? 0 : (size_t)length;
}

/* ---- the handshake ------------------------------------------------------------ */

/* Whether comma-separated `list` holds `token` (case-insensitive). */
static bool websocket_list_has(const char *list, const char *token) {
    size_t token_length = strlen(token);
    const char *cursor = list;
    while (*cursor) {
        while (*cursor == ' ' || *cursor == '\t' || *cursor == ',') cursor++;
        const char *end = cursor;
        while (*end && *end != ',') end++;
        const char *last = end;
        while (last > cursor && (last[-1] == ' ' || last[-1] == '\t')) last--;
        if ((size_t)(last - cursor) == token_length && strncasecmp(cursor, token, token_length) == 0) return true;
        cursor = end;
    }
    return false;
}

/* The header just read in full: kept if it is one the handshake needs. */
static void websocket_finish_header(websocket *ws) {
    if (ws->field_length == 0) return;
    ws->field[ws->field_length] = '\0';
    ws->value[ws->value_length] = '\0';
    if (!ws->value_too_long) {
        if (strcasecmp(ws->field, "Upgrade") == 0)
            ws->upgrade_websocket = websocket_list_has(ws->value, "websocket");
        else if (strcasecmp(ws->field, "Connection") == 0)
            ws->connection_upgrade = ws->connection_upgrade || websocket_list_has(ws->value, "upgrade");
        else if (strcasecmp(ws->field, ws->client ? "Sec-WebSocket-Accept" : "Sec-WebSocket-Key") == 0)
            snprintf(ws->key, sizeof ws->key, "%s", ws->value);
        else if (strcasecmp(ws->field, "Sec-WebSocket-Version") == 0 && ws->value_length < sizeof ws->version)
            memcpy(ws->version, ws->value, ws->value_length + 1);
    }
    ws->field_length = 0;
    ws->value_length = 0;
    ws->value_too_long = false;
}

/* Appends at[0..length) to buffer (holding *used bytes) as far as it fits
 * with a NUL. Returns false when it had to cut. */
static bool websocket_append(char *buffer, size_t size, size_t *used, const char *at, size_t length) {
    size_t room = size - 1 - *used;
    bool whole = length <= room;
    size_t n = whole ? length : room;
    memcpy(buffer + *used, at, n);
    *used += n;
    buffer[*used] = '\0';
    return whole;
}

static int websocket_on_header_field(http_parser *parser, const char *at, size_t length) {
    websocket *ws = parser->data;
    if (!ws->field_in_progress) websocket_finish_header(ws);
    ws->field_in_progress = true;
    /* A long field name is no header the handshake needs: kept cut. */
    websocket_append(ws->field, sizeof ws->field, &ws->field_length, at, length);
    return 0;
}

static int websocket_on_header_value(http_parser *parser, const char *at, size_t length) {
    websocket *ws = parser->data;
    ws->field_in_progress = false;
    if (!websocket_append(ws->value, sizeof ws->value, &ws->value_length, at, length)) ws->value_too_long = true;
    return 0;
}

static int websocket_on_url(http_parser *parser, const char *at, size_t length) {
    websocket *ws = parser->data;
    if (!websocket_append(ws->path, sizeof ws->path, &ws->path_length, at, length)) ws->path_too_long = true;
    return 0;
}

static int websocket_on_headers_complete(http_parser *parser) {
    websocket *ws = parser->data;
    websocket_finish_header(ws);
    ws->headers_done = true;
    return 0;
}

/* Whether `key` is 16 bytes in base64 (RFC 6455, 4.1). */
static bool websocket_key_ok(const char *key) {
    if (strlen(key) != 24 || strcmp(key + 22, "==") != 0) return false;
    for (int i = 0; i < 22; i++)
        if (!isalnum((unsigned char)key[i]) && key[i] != '+' && key[i] != '/') return false;
    unsigned char decoded[24];
    return EVP_DecodeBlock(decoded, (const unsigned char *)key, 24) == 18;
}

/* The Sec-WebSocket-Accept value for `key` (RFC 6455, 4.2.2): base64 of
 * SHA-1 of the key and the GUID, into out (29 bytes with its NUL).
 * Returns 0, or -1 when the digest cannot be computed. */
static int websocket_accept_for(const char *key, char out[32]) {
    char keyed[WEBSOCKET_VALUE_MAX + sizeof WEBSOCKET_GUID];
    int keyed_length = snprintf(keyed, sizeof keyed, "%s" WEBSOCKET_GUID, key);
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int digest_length = 0;
    if (keyed_length < 0 || EVP_Digest(keyed, (size_t)keyed_length, digest, &digest_length, EVP_sha1(), NULL) != 1 ||
        digest_length != 20)
        return -1;
    EVP_EncodeBlock((unsigned char *)out, digest, 20);
    return 0;
}

void websocket_serve(websocket *ws, const websocket_resource *resources, size_t count) {
    ws->resources = resources;
    ws->resource_count = count;
}

/* A plain GET (or HEAD) for one of the files websocket_serve named: it is
 * sent whole, then the connection ends. NULL when the path names none. */
static const websocket_resource *websocket_find_resource(const websocket *ws) {
    if (ws->path_too_long || ws->upgrade_websocket) return NULL;
    if (ws->parser.method != HTTP_GET && ws->parser.method != HTTP_HEAD) return NULL;
    size_t length = strcspn(ws->path, "?#");
    for (size_t i = 0; i < ws->resource_count; i++)
        if (strlen(ws->resources[i].path) == length && strncmp(ws->resources[i].path, ws->path, length) == 0)
            return &ws->resources[i];
    return NULL;
}

static int websocket_serve_resource(websocket *ws, const websocket_resource *resource) {
    snprintf(ws->error, sizeof ws->error, "served %s", resource->path);
    ws->phase = WEBSOCKET_DONE;
    char head[512];
    int length = snprintf(head, sizeof head,
                          "HTTP/1.1 200 OK\r\nContent-Type: %s\r\nContent-Length: %zu\r\nCache-Control: no-cache\r\n"
                          "X-Content-Type-Options: nosniff\r\nConnection: close\r\n\r\n",
                          resource->content_type, resource->length);
    if (length < 0 || (size_t)length >= sizeof head) return WEBSOCKET_FAILED;
    if (ws->callbacks.send(ws->user_data, (const uint8_t *)head, (size_t)length) != 0) return WEBSOCKET_STOPPED;
    if (ws->parser.method == HTTP_GET && resource->length &&
        ws->callbacks.send(ws->user_data, resource->body, resource->length) != 0)
        return WEBSOCKET_STOPPED;
    return WEBSOCKET_SERVED;
}

/* The upgrade request's headers are in: answer 101, or refuse. */
static int websocket_answer_request(websocket *ws) {
    const websocket_resource *resource = websocket_find_resource(ws);
    if (resource) return websocket_serve_resource(ws, resource);
    if (ws->parser.method != HTTP_GET)
        return websocket_refuse_request(ws, "405 Method Not Allowed", "Allow: GET\r\n",
                                        "this port speaks WebSocket: open it with a GET upgrade request");
    if (!ws->upgrade_websocket || !ws->connection_upgrade)
        return websocket_refuse_request(ws, "426 Upgrade Required",
                                        "Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\n",
                                        "this port speaks WebSocket only (Upgrade: websocket, Connection: Upgrade)");
    if (strcmp(ws->version, "13") != 0)
        return websocket_refuse_request(ws, "426 Upgrade Required", "Sec-WebSocket-Version: 13\r\n",
                                        "WebSocket version 13 only");
    if (!websocket_key_ok(ws->key))
        return websocket_refuse_request(ws, "400 Bad Request", NULL,
                                        "Sec-WebSocket-Key is missing or not 16 bytes in base64");
    char accept[32];
    if (websocket_accept_for(ws->key, accept) != 0)
        return websocket_refuse_request(ws, "500 Internal Server Error", NULL, "cannot compute the accept key");
    char answer[256];
    int length = snprintf(answer, sizeof answer,
                          "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                          "Sec-WebSocket-Accept: %s\r\n\r\n",
                          accept);
    ws->phase = WEBSOCKET_OPEN;
    if (ws->callbacks.send(ws->user_data, (const uint8_t *)answer, (size_t)length) != 0) return WEBSOCKET_STOPPED;
    return WEBSOCKET_OK;
}

/* A client's upgrade was refused or answered wrongly: nothing is sent
 * back (there is no WebSocket yet). Returns WEBSOCKET_FAILED. */
static int websocket_client_refused(websocket *ws, const char *why) {
    snprintf(ws->error, sizeof ws->error, "the WebSocket upgrade failed: %s", why);
    ws->phase = WEBSOCKET_DONE;
    return WEBSOCKET_FAILED;
}

/* A client's upgrade answer is in: open, or refuse it. */
static int websocket_check_answer(websocket *ws) {
    if (ws->parser.status_code != 101) {
        char why[64];
        snprintf(why, sizeof why, "the server answered HTTP %u", ws->parser.status_code);
        return websocket_client_refused(ws, why);
    }
    if (!ws->upgrade_websocket || !ws->connection_upgrade)
        return websocket_client_refused(ws, "the answer has no Upgrade: websocket and Connection: Upgrade");
    if (strcmp(ws->key, ws->expected_accept) != 0)
        return websocket_client_refused(ws, "the answer's Sec-WebSocket-Accept is not the key's");
    ws->phase = WEBSOCKET_OPEN;
    return WEBSOCKET_OK;
}

int websocket_client_start(websocket *ws, const char *host, const char *path) {
    /* Started already: its key's accept value is waited for. */
    if (!ws->client || ws->phase != WEBSOCKET_HANDSHAKE || ws->expected_accept[0]) return -1;
    unsigned char nonce[16];
    if (RAND_bytes(nonce, sizeof nonce) != 1) return -1;
    char key[32];
    EVP_EncodeBlock((unsigned char *)key, nonce, sizeof nonce);
    if (websocket_accept_for(key, ws->expected_accept) != 0) return -1;
    char request[512];
    int length = snprintf(request, sizeof request,
                          "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                          "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n",
                          path && path[0] ? path : "/", host, key);
    if (length < 0 || (size_t)length >= sizeof request) return -1;
    return ws->callbacks.send(ws->user_data, (const uint8_t *)request, (size_t)length);
}

/* Feeds the upgrade request (a client: its answer); *used is how much of
 * data it took (the rest, if the handshake completed, is frames). */
static int websocket_feed_request(websocket *ws, const uint8_t *data, size_t length, size_t *used) {
    static const http_parser_settings settings = {
        .on_url = websocket_on_url,
        .on_header_field = websocket_on_header_field,
        .on_header_value = websocket_on_header_value,
        .on_headers_complete = websocket_on_headers_complete,
    };
    size_t room = WEBSOCKET_MAX_REQUEST_BYTES - ws->request_bytes;
    size_t offered = length < room ? length : room;
    size_t parsed = http_parser_execute(&ws->parser, &settings, (const char *)data, offered);
    ws->request_bytes += parsed;
    *used = parsed;
    if (ws->client) {
        if (ws->headers_done) return websocket_check_answer(ws);
        if (HTTP_PARSER_ERRNO(&ws->parser) != HPE_OK) return websocket_client_refused(ws, "the answer is not HTTP");
        if (ws->request_bytes >= WEBSOCKET_MAX_REQUEST_BYTES)
            return websocket_client_refused(ws, "the answer is over 8 KiB");
        return WEBSOCKET_OK;
    }
    if (ws->headers_done) return websocket_answer_request(ws);
    if (HTTP_PARSER_ERRNO(&ws->parser) != HPE_OK)
        return websocket_refuse_request(ws, "400 Bad Request", NULL, "not an HTTP request");
    if (ws->request_bytes >= WEBSOCKET_MAX_REQUEST_BYTES)
        return websocket_refuse_request(ws, "400 Bad Request", NULL, "the upgrade request is over 8 KiB");
    return WEBSOCKET_OK;
}

/* ---- frames from the peer ------------------------------------------------------- */

/* A whole control frame: answer a ping, end on a close. */
static int websocket_control(websocket *ws) {
    if (ws->frame_opcode == WSLAY_PING) {
        uint8_t pong[WEBSOCKET_MAX_HEADER_BYTES + WEBSOCKET_CONTROL_MAX];
        size_t header = websocket_header(ws, pong, WSLAY_PONG, ws->control_length);
        memcpy(pong + header, ws->control, ws->control_length);
        websocket_mask_payload(ws, pong + header, ws->control_length);
        if (ws->callbacks.send(ws->user_data, pong, header + ws->control_length) != 0) return WEBSOCKET_STOPPED;
        return WEBSOCKET_OK;
    }
    if (ws->frame_opcode == WSLAY_PONG) return WEBSOCKET_OK;
    /* A Close: answered with its code (1000 when it had none), then over. */
    if (ws->control_length == 1) return websocket_fail(ws, WEBSOCKET_CLOSE_PROTOCOL_ERROR, "a Close of one byte");
    uint16_t code = ws->control_length >= 2 ? (uint16_t)(ws->control[0] << 8 | ws->control[1]) : 0;
    snprintf(ws->error, sizeof ws->error, "the peer closed the WebSocket (code %u)", code);
    uint8_t frame[WEBSOCKET_MAX_CLOSE_FRAME_BYTES];
    size_t length = websocket_close_frame(ws, frame, code ? code : WEBSOCKET_CLOSE_NORMAL, NULL);
    ws->phase = WEBSOCKET_DONE;
    if (length && ws->callbacks.send(ws->user_data, frame, length) != 0) return WEBSOCKET_STOPPED;
    return WEBSOCKET_CLOSED;
}

/* A data frame's header was read: check it against the message so far. */
static int websocket_start_data_frame(websocket *ws, const struct wslay_frame_iocb *frame) {
    if (frame->opcode == WSLAY_TEXT_FRAME && !ws->in_message)
        return websocket_fail(ws, WEBSOCKET_CLOSE_UNSUPPORTED_DATA, "text messages are not accepted: send binary");
    if (frame->opcode == WSLAY_CONTINUATION_FRAME && !ws->in_message)
        return websocket_fail(ws, WEBSOCKET_CLOSE_PROTOCOL_ERROR, "a continuation with no message begun");
    if (frame->opcode != WSLAY_CONTINUATION_FRAME && ws->in_message)
        return websocket_fail(ws, WEBSOCKET_CLOSE_PROTOCOL_ERROR, "a new message inside a fragmented one");
    uint64_t total = (uint64_t)ws->message_length + frame->payload_length;
    if (total > ws->max_message_bytes) {
        /* Set first: an owner that closes from on_oversized sends it. */
        ws->close_code = WEBSOCKET_CLOSE_MESSAGE_TOO_BIG;
        if (ws->callbacks.on_oversized) ws->callbacks.on_oversized(ws->user_data, total);
        return websocket_fail(ws, WEBSOCKET_CLOSE_MESSAGE_TOO_BIG, "message over the size limit");
    }
    if (total > ws->message_capacity) {
        size_t capacity = ws->message_capacity ? ws->message_capacity : 256;
        while (capacity < total) capacity *= 2;
        if (capacity > ws->max_message_bytes) capacity = ws->max_message_bytes;
        ws->message = xrealloc(ws->message, capacity);
        ws->message_capacity = capacity;
    }
    ws->in_message = true;
    return WEBSOCKET_OK;
}

/* One chunk wslay decoded. */
static int websocket_frame_chunk(websocket *ws, const struct wslay_frame_iocb *frame) {
    if (!ws->in_frame) {
        if (!frame->mask && !ws->client)
            return websocket_fail(ws, WEBSOCKET_CLOSE_PROTOCOL_ERROR, "an unmasked frame from a client");
        if (frame->mask && ws->client)
            return websocket_fail(ws, WEBSOCKET_CLOSE_PROTOCOL_ERROR, "a masked frame from the server");
        if (frame->rsv) return websocket_fail(ws, WEBSOCKET_CLOSE_PROTOCOL_ERROR, "reserved bits set");
        bool control = wslay_is_ctrl_frame(frame->opcode);
        if (frame->opcode != WSLAY_CONTINUATION_FRAME && frame->opcode != WSLAY_TEXT_FRAME &&
            frame->opcode != WSLAY_BINARY_FRAME && frame->opcode != WSLAY_CONNECTION_CLOSE &&
            frame->opcode != WSLAY_PING && frame->opcode != WSLAY_PONG)
            return websocket_fail(ws, WEBSOCKET_CLOSE_PROTOCOL_ERROR, "a reserved opcode");
        ws->in_frame = true;
        ws->frame_opcode = frame->opcode;
        ws->frame_received = 0;
        ws->control_length = 0;
        if (!control) {
            int rc = websocket_start_data_frame(ws, frame);
            if (rc != WEBSOCKET_OK) return rc;
        }
    }
    bool control = wslay_is_ctrl_frame(ws->frame_opcode);
    if (control) {
        /* wslay refuses control payloads over 125 bytes. */
        memcpy(ws->control + ws->control_length, frame->data, frame->data_length);
        ws->control_length += frame->data_length;
    } else if (frame->data_length) {
        memcpy(ws->message + ws->message_length, frame->data, frame->data_length);
        ws->message_length += frame->data_length;
    }
    ws->frame_received += frame->data_length;
    if (ws->frame_received < frame->payload_length) return WEBSOCKET_OK;
    ws->in_frame = false;
    if (control) return websocket_control(ws);
    if (!frame->fin) return WEBSOCKET_OK;
    ws->in_message = false;
    size_t length = ws->message_length;
    ws->message_length = 0;
    return ws->callbacks.on_message(ws->user_data, ws->message, length) == 0 ? WEBSOCKET_OK : WEBSOCKET_STOPPED;
}

static int websocket_feed_frames(websocket *ws, const uint8_t *data, size_t length) {
    ws->input = data;
    ws->input_length = length;
    for (;;) {
        struct wslay_frame_iocb frame;
        memset(&frame, 0, sizeof frame);
        ssize_t got = wslay_frame_recv(ws->frames, &frame);
        if (got == WSLAY_ERR_WANT_READ) break;
        if (got < 0) return websocket_fail(ws, WEBSOCKET_CLOSE_PROTOCOL_ERROR, "a malformed frame");
        int rc = websocket_frame_chunk(ws, &frame);
        if (rc != WEBSOCKET_OK) return rc;
    }
    ws->input = NULL;
    ws->input_length = 0;
    return WEBSOCKET_OK;
}

int websocket_feed(websocket *ws, const uint8_t *data, size_t length) {
    if (ws->phase == WEBSOCKET_DONE) return WEBSOCKET_FAILED;
    if (ws->phase == WEBSOCKET_HANDSHAKE) {
        size_t used = 0;
        int rc = websocket_feed_request(ws, data, length, &used);
        if (rc != WEBSOCKET_OK || ws->phase != WEBSOCKET_OPEN) return rc;
        data += used;
        length -= used;
    }
    if (length == 0) return WEBSOCKET_OK;
    return websocket_feed_frames(ws, data, length);
}
