/* fuzz_websocket.c -- fuzzes common/websocket.c, the WebSocket server side
 * of the baseapp's websocket_port: the upgrade request (http-parser) and
 * the frames after it (wslay's decoder, then the messages put back
 * together), and the file a plain GET may fetch instead. The first byte
 * picks the mode and the chunk size: with its
 * low bit set a valid upgrade request goes first and the input is all
 * frames (so the fuzzer spends its time past the handshake), otherwise
 * the input is the request itself. The rest is fed in chunks, as reads
 * would give it. Checks: no message over the limit is handed out; nothing
 * is delivered before the handshake completed or after the feed stopped
 * accepting; the first bytes sent are an HTTP answer, a 101 exactly when
 * the connection opened; at most one Close goes out; no crash, no leak. */
#include <string.h>

#include "fuzz_support.h"
#include "websocket.h"

/* The client link's default client_max_frame_bytes is 65536: a smaller
 * limit the fuzzer can reach both sides of. */
#define FUZZ_WEBSOCKET_MAX_MESSAGE 4096

/* The file a plain GET of /play may fetch (websocket_serve). */
#define FUZZ_WEBSOCKET_FILE "<!doctype html><title>play</title>"
#define FUZZ_WEBSOCKET_FILE_BYTES (sizeof FUZZ_WEBSOCKET_FILE - 1)

#define FUZZ_WEBSOCKET_UPGRADE                                                           \
    "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" \
    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"

typedef struct fuzz_websocket_state {
    websocket *ws;
    bool stopped;       /* the feed returned something else than OK */
    size_t sends;       /* calls of the send callback */
    bool answered_101;  /* the first send was a 101 */
    bool answered_200;  /* ... a 200: a served file's head, its body next */
    size_t closes_sent; /* Close frames among the sends */
    size_t messages;
} fuzz_websocket_state;

static int fuzz_websocket_on_message(void *user_data, const uint8_t *data, size_t length) {
    fuzz_websocket_state *state = user_data;
    (void)data;
    fuzz_check(!state->stopped, "a message after the feed stopped");
    fuzz_check(websocket_is_open(state->ws), "a message before the handshake");
    fuzz_check(length <= FUZZ_WEBSOCKET_MAX_MESSAGE, "a message over the limit was handed out");
    state->messages++;
    return 0;
}

static void fuzz_websocket_on_oversized(void *user_data, uint64_t declared) {
    (void)user_data;
    fuzz_check(declared > FUZZ_WEBSOCKET_MAX_MESSAGE, "a message within the limit was called oversized");
}

static int fuzz_websocket_send(void *user_data, const uint8_t *data, size_t length) {
    fuzz_websocket_state *state = user_data;
    fuzz_check(length > 0, "an empty send");
    if (state->sends++ == 0) {
        fuzz_check(length > 9 && memcmp(data, "HTTP/1.1 ", 9) == 0, "the first bytes sent are no HTTP answer");
        state->answered_101 = memcmp(data, "HTTP/1.1 101 ", 13) == 0;
        state->answered_200 = memcmp(data, "HTTP/1.1 200 ", 13) == 0;
        fuzz_check(state->answered_101 == websocket_is_open(state->ws), "a 101 without an open connection");
        return 0;
    }
    if (state->answered_200) {
        fuzz_check(state->sends == 2, "more than a file's body after its head");
        fuzz_check(length == FUZZ_WEBSOCKET_FILE_BYTES, "a file's body is not the file");
        return 0;
    }
    fuzz_check(state->answered_101, "frames sent after a refused handshake");
    if (data[0] == 0x88) state->closes_sent++;
    fuzz_check(state->closes_sent <= 1, "more than one Close sent");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    static const websocket_callbacks callbacks = {fuzz_websocket_on_message, fuzz_websocket_on_oversized,
                                                  fuzz_websocket_send};
    fuzz_websocket_state state = {0};
    static const websocket_resource files[] = {
        {"/play", "text/html", (const uint8_t *)FUZZ_WEBSOCKET_FILE, FUZZ_WEBSOCKET_FILE_BYTES},
    };
    state.ws = websocket_server_create(FUZZ_WEBSOCKET_MAX_MESSAGE, &callbacks, &state);
    websocket_serve(state.ws, files, 1);
    bool frames_only = data[0] & 1;
    size_t step = 1 + (data[0] >> 1) % 97;
    int rc = WEBSOCKET_OK;
    if (frames_only) {
        rc = websocket_feed(state.ws, (const uint8_t *)FUZZ_WEBSOCKET_UPGRADE, strlen(FUZZ_WEBSOCKET_UPGRADE));
        fuzz_check(rc == WEBSOCKET_OK && websocket_is_open(state.ws), "a valid upgrade was refused");
    }
    for (size_t at = 1; at < size && rc == WEBSOCKET_OK; at += step) {
        size_t chunk = size - at < step ? size - at : step;
        rc = websocket_feed(state.ws, data + at, chunk);
    }
    fuzz_check((rc == WEBSOCKET_SERVED) == state.answered_200, "a file served without WEBSOCKET_SERVED");
    if (rc != WEBSOCKET_OK) {
        state.stopped = true;
        fuzz_check(websocket_error(state.ws)[0] != '\0', "a stop without a reason");
        /* Nothing more is read once it stopped. */
        fuzz_check(websocket_feed(state.ws, data, size) != WEBSOCKET_OK, "fed again after it stopped");
    }
    if (websocket_is_open(state.ws)) {
        uint8_t frame[WEBSOCKET_MAX_CLOSE_FRAME_BYTES];
        size_t length = websocket_close_frame(state.ws, frame, WEBSOCKET_CLOSE_NORMAL, "done");
        fuzz_check(length == 0 || state.closes_sent == 0, "a second Close was written");
    }
    websocket_free(state.ws);
    return 0;
}
