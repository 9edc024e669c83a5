/* test_websocket.c -- unit tests for websocket.h: the upgrade handshake
 * (RFC 6455's own example key), messages whole and fragmented and split at
 * every byte, pings, Close both ways, and each refusal with its HTTP
 * status or close code. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "websocket.h"

#define LIMIT 1000

typedef struct sink {
    uint8_t sent[8192];
    size_t sent_length;
    uint8_t messages[8][2048];
    size_t message_lengths[8];
    int message_count;
    uint64_t oversized;
} sink;

static int on_message(void *user_data, const uint8_t *data, size_t length) {
    sink *s = user_data;
    assert_true(s->message_count < 8 && length <= sizeof s->messages[0]);
    if (length) memcpy(s->messages[s->message_count], data, length);
    s->message_lengths[s->message_count++] = length;
    return 0;
}

static void on_oversized(void *user_data, uint64_t declared) { ((sink *)user_data)->oversized = declared; }

static int on_send(void *user_data, const uint8_t *data, size_t length) {
    sink *s = user_data;
    assert_true(s->sent_length + length <= sizeof s->sent);
    memcpy(s->sent + s->sent_length, data, length);
    s->sent_length += length;
    return 0;
}

static const websocket_callbacks callbacks = {on_message, on_oversized, on_send};

#define GOOD_REQUEST                                                                                          \
    "GET /play HTTP/1.1\r\nHost: 127.0.0.1:9000\r\nUpgrade: websocket\r\nConnection: keep-alive, Upgrade\r\n" \
    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nOrigin: http://127.0.0.1:9001\r\nSec-WebSocket-Version: " \
    "13\r\n\r\n"

static int feed_text(websocket *ws, const char *text) {
    return websocket_feed(ws, (const uint8_t *)text, strlen(text));
}

/* An open connection, its 101 taken out of the sink. */
static websocket *open_connection(sink *s) {
    memset(s, 0, sizeof *s);
    websocket *ws = websocket_server_create(LIMIT, &callbacks, s);
    assert_int_equal(feed_text(ws, GOOD_REQUEST), WEBSOCKET_OK);
    assert_true(websocket_is_open(ws));
    s->sent_length = 0;
    return ws;
}

/* A client's frame: masked with a fixed key. Returns its length. */
static size_t client_frame(uint8_t *out, int fin, uint8_t opcode, const uint8_t *payload, size_t length) {
    static const uint8_t mask[4] = {0x37, 0xfa, 0x21, 0x3d};
    size_t at = 0;
    out[at++] = (uint8_t)((fin ? 0x80 : 0) | opcode);
    if (length < 126) {
        out[at++] = (uint8_t)(0x80 | length);
    } else if (length < 65536) {
        out[at++] = 0x80 | 126;
        out[at++] = (uint8_t)(length >> 8);
        out[at++] = (uint8_t)length;
    } else {
        out[at++] = 0x80 | 127;
        for (int i = 0; i < 8; i++) out[at++] = (uint8_t)((uint64_t)length >> (56 - 8 * i));
    }
    memcpy(out + at, mask, 4);
    at += 4;
    for (size_t i = 0; i < length; i++) out[at + i] = payload[i] ^ mask[i % 4];
    return at + length;
}

static void test_handshake(void **state) {
    (void)state;
    sink s;
    memset(&s, 0, sizeof s);
    websocket *ws = websocket_server_create(LIMIT, &callbacks, &s);
    assert_false(websocket_is_open(ws));
    assert_false(websocket_has_partial_input(ws));
    /* Byte by byte: the request may arrive in any pieces. */
    const char *request = GOOD_REQUEST;
    for (size_t i = 0; request[i]; i++) {
        assert_int_equal(websocket_feed(ws, (const uint8_t *)request + i, 1), WEBSOCKET_OK);
        if (request[i + 1]) assert_true(websocket_has_partial_input(ws));
    }
    assert_true(websocket_is_open(ws));
    s.sent[s.sent_length] = '\0';
    assert_non_null(strstr((char *)s.sent, "HTTP/1.1 101 Switching Protocols\r\n"));
    /* RFC 6455, 1.3: this key's accept value. */
    assert_non_null(strstr((char *)s.sent, "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"));
    websocket_free(ws);
}

static void test_refused_requests(void **state) {
    (void)state;
    struct {
        const char *request, *status;
    } cases[] = {
        {"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", "400 Bad Request"},
        {"POST / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
         "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
         "405 Method Not Allowed"},
        {"GET / HTTP/1.1\r\nHost: x\r\n\r\n", "426 Upgrade Required"},
        {"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
         "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 8\r\n\r\n",
         "426 Upgrade Required"},
        {"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
         "Sec-WebSocket-Key: short==\r\nSec-WebSocket-Version: 13\r\n\r\n",
         "400 Bad Request"},
        {"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n\r\n",
         "400 Bad Request"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sink s;
        memset(&s, 0, sizeof s);
        websocket *ws = websocket_server_create(LIMIT, &callbacks, &s);
        assert_int_equal(feed_text(ws, cases[i].request), WEBSOCKET_FAILED);
        assert_false(websocket_is_open(ws));
        s.sent[s.sent_length] = '\0';
        char expected[64];
        snprintf(expected, sizeof expected, "HTTP/1.1 %s\r\n", cases[i].status);
        if (strncmp((char *)s.sent, expected, strlen(expected)) != 0) fail_msg("case %zu: got %s", i, (char *)s.sent);
        assert_int_equal(websocket_feed(ws, (const uint8_t *)"x", 1), WEBSOCKET_FAILED); /* nothing more is read */
        websocket_free(ws);
    }
    /* A request that never ends is cut at 8 KiB. */
    sink s;
    memset(&s, 0, sizeof s);
    websocket *ws = websocket_server_create(LIMIT, &callbacks, &s);
    assert_int_equal(feed_text(ws, "GET / HTTP/1.1\r\n"), WEBSOCKET_OK);
    /* One header line of 1100 bytes: "X-Filler: aaa...\r\n". */
    char header[1100];
    snprintf(header, sizeof header, "X-Filler: ");
    memset(header + 10, 'a', sizeof header - 10);
    header[sizeof header - 2] = '\r';
    header[sizeof header - 1] = '\n';
    int rc = WEBSOCKET_OK;
    for (int i = 0; i < 10 && rc == WEBSOCKET_OK; i++) rc = websocket_feed(ws, (const uint8_t *)header, sizeof header);
    assert_int_equal(rc, WEBSOCKET_FAILED);
    assert_non_null(strstr(websocket_error(ws), "8 KiB"));
    websocket_free(ws);
}

static void test_messages(void **state) {
    (void)state;
    sink s;
    websocket *ws = open_connection(&s);
    uint8_t wire[4096], payload[700];
    for (size_t i = 0; i < sizeof payload; i++) payload[i] = (uint8_t)(i * 7);
    size_t length = 0;
    length += client_frame(wire + length, 1, 0x2, payload, 5);               /* small */
    length += client_frame(wire + length, 1, 0x2, payload, 300);             /* 16-bit length */
    length += client_frame(wire + length, 0, 0x2, payload, 10);              /* fragmented ... */
    length += client_frame(wire + length, 1, 0x9, (const uint8_t *)"hi", 2); /* ... a ping between ... */
    length += client_frame(wire + length, 0, 0x0, payload + 10, 0);          /* ... an empty piece ... */
    length += client_frame(wire + length, 1, 0x0, payload + 10, 690);        /* ... the end */
    length += client_frame(wire + length, 1, 0x2, payload, 0);               /* empty */
    /* Split at every byte boundary: the same messages come out. */
    for (size_t split = 1; split < length; split++) {
        websocket_free(ws);
        ws = open_connection(&s);
        assert_int_equal(websocket_feed(ws, wire, split), WEBSOCKET_OK);
        assert_int_equal(websocket_feed(ws, wire + split, length - split), WEBSOCKET_OK);
        assert_int_equal(s.message_count, 4);
        assert_int_equal(s.message_lengths[0], 5);
        assert_int_equal(s.message_lengths[1], 300);
        assert_int_equal(s.message_lengths[2], 700);
        assert_int_equal(s.message_lengths[3], 0);
        assert_memory_equal(s.messages[1], payload, 300);
        assert_memory_equal(s.messages[2], payload, 700);
        /* The ping was answered: an unmasked pong with its payload. */
        assert_int_equal(s.sent_length, 4);
        assert_memory_equal(s.sent, "\x8a\x02hi", 4);
        assert_false(websocket_has_partial_input(ws));
    }
    websocket_free(ws);
}

static void test_close_both_ways(void **state) {
    (void)state;
    sink s;
    websocket *ws = open_connection(&s);
    uint8_t wire[64];
    size_t length = client_frame(wire, 1, 0x8, (const uint8_t *)"\x03\xe9going", 7);
    assert_int_equal(websocket_feed(ws, wire, length), WEBSOCKET_CLOSED);
    /* Answered with its code, 1001. */
    assert_int_equal(s.sent_length, 4);
    assert_memory_equal(s.sent, "\x88\x02\x03\xe9", 4);
    assert_true(websocket_close_sent(ws));
    uint8_t frame[WEBSOCKET_MAX_CLOSE_FRAME_BYTES];
    assert_int_equal(websocket_close_frame(ws, frame, 1000, "again"), 0); /* one Close only */
    websocket_free(ws);

    ws = open_connection(&s);
    length = websocket_close_frame(ws, frame, WEBSOCKET_CLOSE_GOING_AWAY, "server shutting down");
    assert_int_equal(length, 2 + 2 + 20);
    assert_memory_equal(frame, "\x88\x16\x03\xe9server shutting down", length);
    char refusal[256];
    assert_int_equal(websocket_refusal(ws, refusal, sizeof refusal, "full"), 0); /* open: a Close, not HTTP */
    websocket_free(ws);

    memset(&s, 0, sizeof s);
    ws = websocket_server_create(LIMIT, &callbacks, &s);
    size_t refusal_length = websocket_refusal(ws, refusal, sizeof refusal, "server full, try another baseapp");
    assert_true(refusal_length > 0);
    assert_non_null(strstr(refusal, "HTTP/1.1 503 Service Unavailable\r\n"));
    assert_non_null(strstr(refusal, "server full"));
    websocket_free(ws);
}

static void test_refused_frames(void **state) {
    (void)state;
    uint8_t payload[LIMIT + 10];
    memset(payload, 'x', sizeof payload);
    struct {
        const char *name;
        uint8_t wire[2048];
        size_t length;
        uint16_t code;
    } cases[6];
    memset(cases, 0, sizeof cases);
    cases[0].name = "text";
    cases[0].length = client_frame(cases[0].wire, 1, 0x1, (const uint8_t *)"hello", 5);
    cases[0].code = WEBSOCKET_CLOSE_UNSUPPORTED_DATA;
    cases[1].name = "unmasked";
    memcpy(cases[1].wire, "\x82\x01x", 3);
    cases[1].length = 3;
    cases[1].code = WEBSOCKET_CLOSE_PROTOCOL_ERROR;
    cases[2].name = "reserved bits";
    cases[2].length = client_frame(cases[2].wire, 1, 0x2, payload, 3);
    cases[2].wire[0] |= 0x40;
    cases[2].code = WEBSOCKET_CLOSE_PROTOCOL_ERROR;
    cases[3].name = "stray continuation";
    cases[3].length = client_frame(cases[3].wire, 1, 0x0, payload, 3);
    cases[3].code = WEBSOCKET_CLOSE_PROTOCOL_ERROR;
    cases[4].name = "reserved opcode";
    cases[4].length = client_frame(cases[4].wire, 1, 0x3, payload, 3);
    cases[4].code = WEBSOCKET_CLOSE_PROTOCOL_ERROR;
    cases[5].name = "over the limit in two pieces";
    cases[5].length = client_frame(cases[5].wire, 0, 0x2, payload, 600);
    cases[5].length += client_frame(cases[5].wire + cases[5].length, 1, 0x0, payload, 401);
    cases[5].code = WEBSOCKET_CLOSE_MESSAGE_TOO_BIG;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sink s;
        websocket *ws = open_connection(&s);
        assert_int_equal(websocket_feed(ws, cases[i].wire, cases[i].length), WEBSOCKET_FAILED);
        assert_int_equal(websocket_close_code(ws), cases[i].code);
        /* A Close frame with the code went out. */
        if (s.sent_length < 4 || s.sent[0] != 0x88 || (s.sent[2] << 8 | s.sent[3]) != cases[i].code)
            fail_msg("%s: no Close %u", cases[i].name, cases[i].code);
        assert_int_equal(s.message_count, 0);
        if (cases[i].code == WEBSOCKET_CLOSE_MESSAGE_TOO_BIG) assert_int_equal(s.oversized, 1001);
        websocket_free(ws);
    }
}

static void test_frame_header(void **state) {
    (void)state;
    sink s;
    memset(&s, 0, sizeof s);
    websocket *ws = websocket_server_create(LIMIT, &callbacks, &s);
    uint8_t header[WEBSOCKET_MAX_HEADER_BYTES];
    assert_int_equal(websocket_frame_header(ws, header, 125), 2);
    assert_memory_equal(header, "\x82\x7d", 2);
    assert_int_equal(websocket_frame_header(ws, header, 126), 4);
    assert_memory_equal(header, "\x82\x7e\x00\x7e", 4);
    assert_int_equal(websocket_frame_header(ws, header, 70000), 10);
    assert_memory_equal(header, "\x82\x7f\x00\x00\x00\x00\x00\x01\x11\x70", 10);
    assert_int_equal(websocket_frame_header_bytes(ws, 65535), 4);
    assert_int_equal(websocket_frame_header_bytes(ws, 65536), 10);
    websocket_free(ws);
}

/* A client and a server joined back to back: the request, the answer, and
 * messages both ways (the client's masked, each with a new mask). */
typedef struct pair {
    websocket *client, *server;
    sink client_sink, server_sink;
} pair;

static int to_server(void *user_data, const uint8_t *data, size_t length) {
    pair *p = user_data;
    return websocket_feed(p->server, data, length) == WEBSOCKET_OK ? 0 : -1;
}

static int to_client(void *user_data, const uint8_t *data, size_t length) {
    pair *p = user_data;
    int rc = websocket_feed(p->client, data, length);
    return rc == WEBSOCKET_OK || rc == WEBSOCKET_CLOSED ? 0 : -1;
}

static int client_message(void *user_data, const uint8_t *data, size_t length) {
    return on_message(&((pair *)user_data)->client_sink, data, length);
}

static int server_message(void *user_data, const uint8_t *data, size_t length) {
    return on_message(&((pair *)user_data)->server_sink, data, length);
}

static void test_client_and_server(void **state) {
    (void)state;
    static pair p;
    memset(&p, 0, sizeof p);
    const websocket_callbacks client_callbacks = {client_message, NULL, to_server};
    const websocket_callbacks server_callbacks = {server_message, NULL, to_client};
    p.client = websocket_client_create(LIMIT, &client_callbacks, &p);
    p.server = websocket_server_create(LIMIT, &server_callbacks, &p);
    assert_int_equal(websocket_client_start(p.client, "127.0.0.1:9000", "/"), 0);
    assert_true(websocket_is_open(p.server));
    assert_true(websocket_is_open(p.client));
    assert_int_equal(websocket_client_start(p.client, "127.0.0.1:9000", "/"), -1); /* once */
    uint8_t frame[WEBSOCKET_MAX_HEADER_BYTES + 300], first_mask[4];
    for (int round = 0; round < 2; round++) {
        size_t header = websocket_frame_header(p.client, frame, 300);
        assert_int_equal(header, 8);
        assert_true(frame[1] & 0x80);
        if (round == 0)
            memcpy(first_mask, frame + 4, 4);
        else
            assert_memory_not_equal(first_mask, frame + 4, 4);
        for (int i = 0; i < 300; i++) frame[header + i] = (uint8_t)(i + round);
        websocket_mask_payload(p.client, frame + header, 300);
        assert_int_equal(websocket_feed(p.server, frame, header + 300), WEBSOCKET_OK);
        assert_int_equal(p.server_sink.message_lengths[round], 300);
        assert_int_equal(p.server_sink.messages[round][7], (uint8_t)(7 + round));
    }
    static const uint8_t abc[3] = {'a', 'b', 'c'};
    size_t header = websocket_frame_header(p.server, frame, 3);
    memcpy(frame + header, abc, sizeof abc);
    assert_int_equal(websocket_feed(p.client, frame, header + 3), WEBSOCKET_OK);
    assert_int_equal(p.client_sink.message_count, 1);
    assert_memory_equal(p.client_sink.messages[0], "abc", 3);
    /* A masked frame, as if from the server, is refused by the client. */
    header = websocket_frame_header(p.client, frame, 3);
    memcpy(frame + header, abc, sizeof abc);
    websocket_mask_payload(p.client, frame + header, 3);
    int rc = websocket_feed(p.client, frame, header + 3);
    assert_true(rc == WEBSOCKET_FAILED || rc == WEBSOCKET_STOPPED);
    assert_int_equal(websocket_close_code(p.client), WEBSOCKET_CLOSE_PROTOCOL_ERROR);
    websocket_free(p.client);
    websocket_free(p.server);
}

static void test_client_refuses_bad_answers(void **state) {
    (void)state;
    const char *answers[] = {
        "HTTP/1.1 426 Upgrade Required\r\nContent-Length: 0\r\n\r\n",
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n", /* another key's */
        "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n\r\n",
        "SSH-2.0-OpenSSH_9.2\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof answers / sizeof answers[0]; i++) {
        sink s;
        memset(&s, 0, sizeof s);
        websocket *ws = websocket_client_create(LIMIT, &callbacks, &s);
        assert_int_equal(websocket_client_start(ws, "h:1", NULL), 0);
        assert_int_equal(websocket_client_start(ws, "h:1", NULL), -1); /* one request */
        s.sent[s.sent_length] = '\0';
        assert_non_null(strstr((char *)s.sent, "GET / HTTP/1.1\r\nHost: h:1\r\n"));
        s.sent_length = 0;
        assert_int_equal(feed_text(ws, answers[i]), WEBSOCKET_FAILED);
        assert_false(websocket_is_open(ws));
        assert_int_equal(s.sent_length, 0); /* nothing sent back */
        websocket_free(ws);
    }
}

static void test_served_files(void **state) {
    (void)state;
    static const uint8_t page[] = "<!doctype html><title>play</title>";
    static const websocket_resource files[] = {
        {"/play", "text/html; charset=utf-8", page, sizeof page - 1},
        {"/tessera.js", "text/javascript", (const uint8_t *)"var Tessera;", 12},
    };
    struct {
        const char *request;
        int result;
        const char *status;
        bool body;
    } cases[] = {
        {"GET /play?auto=10&account=a HTTP/1.1\r\nHost: x\r\n\r\n", WEBSOCKET_SERVED, "HTTP/1.1 200 OK\r\n", true},
        {"HEAD /play HTTP/1.1\r\nHost: x\r\n\r\n", WEBSOCKET_SERVED, "HTTP/1.1 200 OK\r\n", false},
        {"GET /elsewhere HTTP/1.1\r\nHost: x\r\n\r\n", WEBSOCKET_FAILED, "HTTP/1.1 426 ", false},
        {"POST /play HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", WEBSOCKET_FAILED, "HTTP/1.1 405 ", false},
        {GOOD_REQUEST, WEBSOCKET_OK, "HTTP/1.1 101 ", false}, /* an upgrade of /play upgrades */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sink s;
        memset(&s, 0, sizeof s);
        websocket *ws = websocket_server_create(LIMIT, &callbacks, &s);
        websocket_serve(ws, files, 2);
        assert_int_equal(feed_text(ws, cases[i].request), cases[i].result);
        s.sent[s.sent_length] = '\0';
        if (strncmp((char *)s.sent, cases[i].status, strlen(cases[i].status)) != 0)
            fail_msg("case %zu: got %s", i, (char *)s.sent);
        const char *end_of_head = strstr((char *)s.sent, "\r\n\r\n");
        assert_non_null(end_of_head);
        if (cases[i].body) {
            assert_string_equal(end_of_head + 4, (const char *)page);
            assert_non_null(strstr((char *)s.sent, "Content-Length: 34\r\n"));
            assert_non_null(strstr((char *)s.sent, "Content-Type: text/html; charset=utf-8\r\n"));
        } else if (cases[i].result == WEBSOCKET_SERVED) {
            assert_string_equal(end_of_head + 4, ""); /* HEAD: no body */
        }
        websocket_free(ws);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_handshake),         cmocka_unit_test(test_refused_requests),
        cmocka_unit_test(test_messages),          cmocka_unit_test(test_close_both_ways),
        cmocka_unit_test(test_refused_frames),    cmocka_unit_test(test_frame_header),
        cmocka_unit_test(test_client_and_server), cmocka_unit_test(test_client_refuses_bad_answers),
        cmocka_unit_test(test_served_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
