/* fuzz_support.h -- what the fuzz targets of fuzz/ share: a quiet log, the
 * demo's entity definitions (a real schema to decode against), an input
 * handed to a decoder that reads a file by path, and the check that stops a
 * run when an invariant breaks.
 *
 * The targets are libFuzzer's (LLVMFuzzerTestOneInput); nothing here runs
 * in a Tessera process.
 */
#ifndef TESSERA_FUZZ_SUPPORT_H
#define TESSERA_FUZZ_SUPPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include <protobuf-c/protobuf-c.h>

#include "arena.h"
#include "client.pb-c.h"
#include "cluster.pb-c.h"
#include "entity_def.h"
#include "entity_state.h"
#include "volatile_codec.h"

/* libFuzzer's entry points. fuzz_support.c defines LLVMFuzzerInitialize
 * for every target: the log says errors only (a decoder that refuses input
 * logs a warning per input, which would cost more than the decoding), and
 * the demo definitions are loaded. A target defines LLVMFuzzerTestOneInput
 * and sets up anything else it keeps on its first input. */
int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The definitions of demo/entities, loaded once (the process exits with a
 * message if they do not load: the target would test nothing). */
const entity_def_registry *fuzz_definitions(void);

/* fuzz/definitions/every_type.json, loaded once: one class, Thing, with a
 * property of every kind and width the definitions allow (quantized
 * floats and vectors, strings, bytes, arrays, structs of arrays) and a
 * base method taking most of them, for the codecs the demo's classes do
 * not reach. */
const entity_def_registry *fuzz_every_type(void);

/* How the demo's arena (demo/maps/arena.json: 1000 m square, 64 m high)
 * quantizes volatile updates: the cellapp's default precision (1/64 m) and
 * 256 yaw steps. */
const volatile_codec_config *fuzz_arena_config(void);

/* The frame bodies (ServerToClient, packed) a baseapp answers a login
 * with: its hello, and a LoginReply for an Avatar (entity 1000) in the
 * demo's arena carrying the demo definitions, 256 aliases, the arena's
 * volatile config. Made once; owned here. */
typedef struct fuzz_bytes {
    uint8_t *data;
    size_t length;
} fuzz_bytes;
const fuzz_bytes *fuzz_server_hello(void);
const fuzz_bytes *fuzz_login_reply(void);
/* The player's entity in fuzz_login_reply, and its alias table's size. */
#define FUZZ_PLAYER_ID 1000
#define FUZZ_MAX_ALIASES 256

/* A blocking loopback TCP socket connected to 127.0.0.1:`port` that has
 * sent `data`, for targets that drive a listener on their loop. libFuzzer's
 * inputs fit loopback's socket buffers, so nothing blocks while the loop
 * is not running. Hand it to fuzz_loopback_finish. */
int fuzz_loopback_send(int port, const uint8_t *data, size_t size);

/* Turns `loop` until the listener has taken the input, then closes `fd`
 * with a reset (no end of the connection stays in TIME_WAIT), and the
 * listener sees the client gone. "Taken": *bytes_read (the listener's
 * channel counters) has reached `expected`, or the listener closed the
 * connection; without counters (NULL), the listener answered and closed,
 * or, when it waits for more, it was sent the end of the stream and then
 * closed. What the listener writes is drained on the way. */
void fuzz_loopback_finish(uv_loop_t *loop, int fd, const uint64_t *bytes_read, uint64_t expected);

/* A path whose file holds exactly `data` (an in-memory file, rewritten on
 * each call): for decoders that take a path. Valid until the next call. */
const char *fuzz_file(const uint8_t *data, size_t size);

/* A copy of `data` with a NUL after it (malloc'd; the caller frees it): for
 * decoders that take text. */
char *fuzz_text(const uint8_t *data, size_t size);

/* Cuts `data` into frames (common/frame.c) at `max_frame_bytes`, as a
 * channel does, and hands each complete frame to `on_frame` with the decode
 * arena (one for the process, as a peer set or the client links keep one):
 * `on_frame` unpacks into it and releases it to the mark it took. A frame
 * above the limit ends the stream. */
void fuzz_frames(const uint8_t *data, size_t size, size_t max_frame_bytes,
                 void (*on_frame)(const uint8_t *frame, size_t length, arena *decode));

/* Unpacks the messages a PeerMessage carries as bytes as their receivers
 * unpack them (with the heap allocator, then freed): a CellBatch's items
 * as CellItems (cellapp/peer_dispatch.c), a CellSnapshot's or
 * RestoreCellEntity's state as a CellEntityState (cellapp/restore.c,
 * baseapp/persistence.c); each that unpacks is held to
 * fuzz_check_repack. */
void fuzz_peer_nested(const Tessera__Cluster__PeerMessage *message);

/* Whether two states of one class hold the same values (compared by
 * entity_state_encode_all, the canonical form). */
bool fuzz_same_values(const entity_state *a, const entity_state *b);

/* Checks that `state` encodes (entity_state_encode_all) into bytes that
 * decode into a fresh state of its class holding the same values. */
void fuzz_check_state_round_trip(const entity_state *state);

/* Checks that `message` packs, and that what it packs to unpacks and packs
 * again to the same bytes. protobuf-c takes a field number 0 written as an
 * overlong varint (80 00) as an unknown field and writes it back short
 * (00), which it then refuses: its own quirk, harmless to Tessera (no
 * received message is sent on whole), so such a message is let go. */
void fuzz_check_repack(const ProtobufCMessage *message);

/* Stops the run with `what` when `ok` is false: an invariant the decoder
 * promises (a round trip, a bound) was broken by this input, which
 * libFuzzer then saves as a crash. */
#define fuzz_check(ok, what)                               \
    do {                                                   \
        if (!(ok)) fuzz__fail((what), __FILE__, __LINE__); \
    } while (0)
void fuzz__fail(const char *what, const char *file, int line) __attribute__((noreturn));

#endif
