/* fuzz_peer_message.c -- fuzzes what a Tessera process decodes from a
 * peer: the byte stream cut into frames (common/frame.c, at
 * channel_default_peer_options' limit), each frame unpacked as a
 * PeerMessage into a decode arena as common/peer_set.c's on_frame does, and
 * the messages carried inside as bytes unpacked as their receivers unpack
 * them: a CellBatch's items as CellItems (cellapp/peer_dispatch.c), and a
 * CellSnapshot's or RestoreCellEntity's state as a CellEntityState
 * (cellapp/restore.c, baseapp/persistence.c).
 *
 * Checks: a message that unpacks packs again and that packing is stable
 * (pack, unpack, pack gives the same bytes); no crash, no leak (the nested
 * messages are unpacked with the heap allocator and freed, as their
 * receivers do). */
#include "arena.h"
#include "channel.h"
#include "cluster.pb-c.h"
#include "fuzz_support.h"

/* Unpacks `bytes` as a `descriptor` message with the heap allocator, as
 * the receivers of nested messages do, and frees it. */
static void fuzz_peer_message_frame(const uint8_t *frame, size_t length, arena *decode) {
    arena_mark mark = arena_save(decode);
    Tessera__Cluster__PeerMessage *message =
        tessera__cluster__peer_message__unpack(arena_protobuf(decode), length, frame);
    if (message) {
        fuzz_check_repack(&message->base);
        fuzz_peer_nested(message);
    }
    arena_release(decode, mark);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_frames(data, size, channel_default_peer_options().max_frame_bytes, fuzz_peer_message_frame);
    return 0;
}
