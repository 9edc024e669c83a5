/* fuzz_support.c -- the fuzz targets' shared helpers (fuzz_support.h): their
 * LLVMFuzzerInitialize (the quiet log, the demo definitions loaded once),
 * the in-memory file behind fuzz_file, and the invariant checks. It owns the definitions and the
 * file descriptor for the life of the fuzzing process. */
#include "fuzz_support.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "frame.h"
#include "log.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    log_set_level(LOG_LEVEL_ERROR);
    fuzz_definitions();
    return 0;
}

const entity_def_registry *fuzz_definitions(void) {
    static entity_def_registry *definitions;
    if (definitions) return definitions;
    char err[512];
    if (entity_def_load_directory(TESSERA_SOURCE_DIR "/demo/entities", &definitions, err, sizeof err) != 0) {
        fprintf(stderr, "fuzz: the demo definitions do not load: %s\n", err);
        exit(2);
    }
    return definitions;
}

const entity_def_registry *fuzz_every_type(void) {
    static entity_def_registry *definitions;
    if (definitions) return definitions;
    char err[512];
    if (entity_def_load_file(TESSERA_SOURCE_DIR "/fuzz/definitions/every_type.json", &definitions, err, sizeof err) !=
        0) {
        fprintf(stderr, "fuzz: fuzz/definitions/every_type.json does not load: %s\n", err);
        exit(2);
    }
    return definitions;
}

const volatile_codec_config *fuzz_arena_config(void) {
    static volatile_codec_config config;
    static bool ready;
    if (ready) return &config;
    const double min[3] = {-500, -32, -500}, max[3] = {500, 32, 500};
    fuzz_check(volatile_codec_config_init(&config, 1.0 / 64, min, max, 256) == 0, "the arena's config is refused");
    ready = true;
    return &config;
}

/* Packs `message` into `out` (malloc'd). */
static void fuzz_pack_server(const Tessera__Client__ServerToClient *message, fuzz_bytes *out) {
    out->length = tessera__client__server_to_client__get_packed_size(message);
    out->data = xmalloc(out->length ? out->length : 1);
    tessera__client__server_to_client__pack(message, out->data);
}

const fuzz_bytes *fuzz_server_hello(void) {
    static fuzz_bytes packed;
    if (packed.data) return &packed;
    Tessera__Client__ServerHello hello = TESSERA__CLIENT__SERVER_HELLO__INIT;
    hello.protocol_version = TESSERA__CLIENT__PROTOCOL_VERSION__PROTOCOL_VERSION;
    hello.server_name = "tessera-baseapp";
    Tessera__Client__ServerToClient message = TESSERA__CLIENT__SERVER_TO_CLIENT__INIT;
    message.body_case = TESSERA__CLIENT__SERVER_TO_CLIENT__BODY_HELLO;
    message.hello = &hello;
    fuzz_pack_server(&message, &packed);
    return &packed;
}

const fuzz_bytes *fuzz_login_reply(void) {
    static fuzz_bytes packed;
    if (packed.data) return &packed;
    const entity_def_registry *definitions = fuzz_definitions();
    const volatile_codec_config *config = fuzz_arena_config();
    char *described = entity_def_registry_describe(definitions);
    Tessera__Client__Vector3 position = TESSERA__CLIENT__VECTOR3__INIT;
    Tessera__Client__Vector3 world_min = TESSERA__CLIENT__VECTOR3__INIT;
    Tessera__Client__Vector3 world_max = TESSERA__CLIENT__VECTOR3__INIT;
    position.x = 10;
    position.z = -20;
    world_min.x = (float)config->min[0];
    world_min.y = (float)config->min[1];
    world_min.z = (float)config->min[2];
    world_max.x = (float)config->max[0];
    world_max.y = (float)config->max[1];
    world_max.z = (float)config->max[2];
    Tessera__Client__LoginReply reply = TESSERA__CLIENT__LOGIN_REPLY__INIT;
    reply.entity_id = FUZZ_PLAYER_ID;
    reply.position = &position;
    reply.view_radius = 50;
    reply.view_hysteresis = 5;
    reply.max_speed = 10;
    reply.tick_hz = 10;
    reply.space_name = "arena";
    reply.definitions = described;
    reply.definitions_digest = (char *)entity_def_registry_digest_hex(definitions);
    reply.max_aliases = FUZZ_MAX_ALIASES;
    reply.position_precision = config->precision;
    reply.world_min = &world_min;
    reply.world_max = &world_max;
    reply.yaw_steps = config->yaw_steps;
    reply.detail_near_distance = 10;
    reply.detail_medium_distance = 30;
    reply.entity_type = "Avatar";
    reply.max_frame_bytes = 65536;
    reply.session_token = "0123456789abcdef0123456789abcdef";
    Tessera__Client__ServerToClient message = TESSERA__CLIENT__SERVER_TO_CLIENT__INIT;
    message.body_case = TESSERA__CLIENT__SERVER_TO_CLIENT__BODY_LOGIN_REPLY;
    message.login_reply = &reply;
    fuzz_pack_server(&message, &packed);
    free(described);
    return &packed;
}

int fuzz_loopback_send(int port, const uint8_t *data, size_t size) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    fuzz_check(fd >= 0, "no socket");
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int rc = connect(fd, (struct sockaddr *)&address, sizeof address);
    if (rc != 0 && errno == EINTR) {
        /* libFuzzer's timer (SIGALRM, each second) interrupted it: the
         * connection goes on by itself; wait for it and take its result. */
        struct pollfd ready = {.fd = fd, .events = POLLOUT};
        while (poll(&ready, 1, -1) < 0 && errno == EINTR) {
        }
        int error = 0;
        socklen_t error_length = sizeof error;
        rc = getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &error_length) == 0 && error == 0 ? 0 : -1;
        if (rc != 0) errno = error;
    }
    if (rc != 0) {
        fprintf(stderr, "fuzz: connecting to 127.0.0.1:%d: %s\n", port, strerror(errno));
        fuzz__fail("cannot connect to the listener", __FILE__, __LINE__);
    }
    size_t written = 0;
    while (written < size) {
        /* MSG_NOSIGNAL: a listener that closed on us is no SIGPIPE. */
        ssize_t n = send(fd, data + written, size - written, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break; /* the peer closed on us: what it read is enough */
        written += (size_t)n;
    }
    return fd;
}

/* Reads what the listener sent without waiting. Returns true when it has
 * closed the connection (the end of the stream, or an error). */
static bool fuzz_loopback_closed(int fd) {
    char sink[4096];
    for (;;) {
        ssize_t n = recv(fd, sink, sizeof sink, MSG_DONTWAIT);
        if (n > 0) continue;
        return n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
    }
}

/* Closes with a reset rather than a FIN: the client never closes first in
 * the orderly way, so no end of the connection stays in TIME_WAIT and tens
 * of thousands of connections a minute do not crowd loopback's ports. */
static void fuzz_loopback_reset(int fd) {
    struct linger abort_close = {.l_onoff = 1, .l_linger = 0};
    (void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &abort_close, sizeof abort_close);
    close(fd);
}

/* Turns the loop until `done` or the listener closed the connection. */
static void fuzz_loopback_turn(uv_loop_t *loop, int fd, const uint64_t *bytes_read, uint64_t expected) {
    for (;;) {
        uv_run(loop, UV_RUN_NOWAIT);
        if ((bytes_read && *bytes_read >= expected) || fuzz_loopback_closed(fd)) return;
        uv_run(loop, UV_RUN_ONCE);
    }
}

/* Loop turns an answer takes at most, from the accept to the close: the
 * accept, the read, the write of the answer, the close. */
#define FUZZ_LOOPBACK_ANSWER_TURNS 8

void fuzz_loopback_finish(uv_loop_t *loop, int fd, const uint64_t *bytes_read, uint64_t expected) {
    if (bytes_read) {
        fuzz_loopback_turn(loop, fd, bytes_read, expected);
    } else {
        bool closed = false;
        for (int turn = 0; turn < FUZZ_LOOPBACK_ANSWER_TURNS && !closed; turn++) {
            uv_run(loop, UV_RUN_NOWAIT);
            closed = fuzz_loopback_closed(fd);
        }
        if (!closed) {
            /* It waits for more: the end of the stream says there is none. */
            shutdown(fd, SHUT_WR);
            fuzz_loopback_turn(loop, fd, NULL, 0);
        }
    }
    fuzz_loopback_reset(fd);
}

const char *fuzz_file(const uint8_t *data, size_t size) {
    static int fd = -1;
    static char path[64];
    if (fd < 0) {
        fd = memfd_create("tessera-fuzz", 0);
        if (fd < 0) {
            perror("fuzz: memfd_create");
            exit(2);
        }
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    if (ftruncate(fd, 0) != 0 || (size > 0 && pwrite(fd, data, size, 0) != (ssize_t)size)) {
        perror("fuzz: writing the input file");
        exit(2);
    }
    return path;
}

char *fuzz_text(const uint8_t *data, size_t size) {
    char *text = xmalloc(size + 1);
    if (size > 0) memcpy(text, data, size);
    text[size] = '\0';
    return text;
}

void fuzz_frames(const uint8_t *data, size_t size, size_t max_frame_bytes,
                 void (*on_frame)(const uint8_t *frame, size_t length, arena *decode)) {
    static arena decode;
    static bool ready;
    if (!ready) {
        arena_init(&decode);
        ready = true;
    }
    frame_reader reader;
    frame_reader_init(&reader, max_frame_bytes);
    frame_reader_push(&reader, data, size);
    const uint8_t *frame;
    size_t length;
    while (frame_reader_next(&reader, &frame, &length) == 1) on_frame(frame, length, &decode);
    frame_reader_close(&reader);
}

bool fuzz_same_values(const entity_state *a, const entity_state *b) {
    bit_writer wa, wb;
    bit_writer_init(&wa);
    bit_writer_init(&wb);
    entity_state_encode_all(a, &wa);
    entity_state_encode_all(b, &wb);
    bool same =
        bit_writer_bits(&wa) == bit_writer_bits(&wb) &&
        (bit_writer_bytes(&wa) == 0 || memcmp(bit_writer_data(&wa), bit_writer_data(&wb), bit_writer_bytes(&wa)) == 0);
    bit_writer_close(&wa);
    bit_writer_close(&wb);
    return same;
}

void fuzz_check_state_round_trip(const entity_state *state) {
    bit_writer w;
    bit_writer_init(&w);
    entity_state_encode_all(state, &w);
    entity_state *again = entity_state_create(entity_state_class(state));
    bit_reader r;
    bit_reader_init(&r, bit_writer_data(&w), bit_writer_bytes(&w));
    fuzz_check(entity_state_decode_all(again, &r) == 0, "encoded properties do not decode");
    fuzz_check(fuzz_same_values(state, again), "properties change on a round trip");
    entity_state_free(again);
    bit_writer_close(&w);
}

void fuzz_check_repack(const ProtobufCMessage *message) {
    size_t length = protobuf_c_message_get_packed_size(message);
    uint8_t *first = xmalloc(length ? length : 1);
    fuzz_check(protobuf_c_message_pack(message, first) == length, "pack wrote another size");
    ProtobufCMessage *again = protobuf_c_message_unpack(message->descriptor, NULL, length, first);
    if (!again) { /* protobuf-c's field 0 (see fuzz_support.h) */
        free(first);
        return;
    }
    fuzz_check(protobuf_c_message_get_packed_size(again) == length, "re-packing changed the size");
    uint8_t *second = xmalloc(length ? length : 1);
    protobuf_c_message_pack(again, second);
    fuzz_check(memcmp(first, second, length) == 0, "re-packing changed the bytes");
    protobuf_c_message_free_unpacked(again, NULL);
    free(first);
    free(second);
}

static void fuzz_nested(const ProtobufCMessageDescriptor *descriptor, const ProtobufCBinaryData *bytes) {
    ProtobufCMessage *nested = protobuf_c_message_unpack(descriptor, NULL, bytes->len, bytes->data);
    if (!nested) return;
    fuzz_check_repack(nested);
    protobuf_c_message_free_unpacked(nested, NULL);
}

void fuzz_peer_nested(const Tessera__Cluster__PeerMessage *message) {
    switch (message->body_case) {
        case TESSERA__CLUSTER__PEER_MESSAGE__BODY_CELL_BATCH:
            for (size_t i = 0; i < message->cell_batch->n_items; i++)
                fuzz_nested(&tessera__cluster__cell_item__descriptor, &message->cell_batch->items[i]);
            break;
        case TESSERA__CLUSTER__PEER_MESSAGE__BODY_CELL_SNAPSHOT:
            fuzz_nested(&tessera__cluster__cell_entity_state__descriptor, &message->cell_snapshot->state);
            break;
        case TESSERA__CLUSTER__PEER_MESSAGE__BODY_RESTORE_CELL_ENTITY:
            fuzz_nested(&tessera__cluster__cell_entity_state__descriptor, &message->restore_cell_entity->state);
            break;
        default:
            break;
    }
}

void fuzz__fail(const char *what, const char *file, int line) {
    fprintf(stderr, "%s:%d: fuzz invariant broken: %s\n", file, line, what);
    abort(); /* libFuzzer saves the input as a crash */
}
