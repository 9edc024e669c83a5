/* fuzz_peer_link.c -- fuzzes what a process reads from a peer through the
 * entry point it uses: the input is written to a loopback connection that
 * common/peer_set.c accepted (peer_set_accept), so its bytes go through
 * channel.c's reads, the frame reader and peer_set.c's on_frame (the
 * PeerMessage unpacked into the set's decode arena; the hello checked for
 * version, cluster, role and id; pings and deaths handled there) and reach
 * the process's on_message as a cellapp's would. The set is a fresh
 * cellapp's (process 1 of cluster "tessera") per input, so a death or a
 * hello of one input says nothing to the next. on_message unpacks what a
 * message carries as bytes as the cellapp does (fuzz_peer_nested).
 *
 * Checks: on_message fires only for a peer that said hello first, never
 * for a hello or a ping, and names the peer's role and id; once the set
 * has read everything and the peer is gone, the set frees everything when
 * freed; no crash, no leak. */
#include <uv.h>

#include "channel.h"
#include "fuzz_support.h"
#include "peer_set.h"

/* Peer and cluster of the seeds' hello (fuzz/make_corpus.c). */
#define FUZZ_PEER_CLUSTER "tessera"

static struct fuzz_peer_world {
    uv_loop_t loop;
    uv_tcp_t listener;
    int port;
    peer_set *set; /* this input's */
    bool accepted;
    uint64_t up_id;
    peer_role up_role;
} world;

static void fuzz_peer_up(peer_set *set, uint64_t process_id, peer_role role, void *user_data) {
    (void)set;
    (void)user_data;
    world.up_id = process_id;
    world.up_role = role;
}

static void fuzz_peer_message(peer_set *set, uint64_t process_id, peer_role role,
                              const Tessera__Cluster__PeerMessage *message, void *user_data) {
    (void)set;
    (void)user_data;
    fuzz_check(world.up_id != 0 && process_id == world.up_id && role == world.up_role,
               "a message passed on from a peer that did not say hello");
    fuzz_check(message->body_case != TESSERA__CLUSTER__PEER_MESSAGE__BODY_HELLO &&
                   message->body_case != TESSERA__CLUSTER__PEER_MESSAGE__BODY_PING,
               "a hello or a ping passed on");
    fuzz_peer_nested(message);
}

static const peer_set_callbacks fuzz_peer_callbacks = {
    .on_peer_up = fuzz_peer_up,
    .on_message = fuzz_peer_message,
};

static void fuzz_peer_on_connection(uv_stream_t *listener, int status) {
    if (status != 0 || !world.set) return;
    peer_set_accept(world.set, listener);
    world.accepted = true;
}

// cppcheck-suppress constParameter ; uv_walk_cb passes the handle non-const
static void fuzz_peer_count_handle(uv_handle_t *handle, void *count) {
    if (handle != (uv_handle_t *)&world.listener) (*(size_t *)count)++;
}

/* The handles on the loop besides the listener: the set's and its links'. */
static size_t fuzz_peer_handles(void) {
    size_t count = 0;
    uv_walk(&world.loop, fuzz_peer_count_handle, &count);
    return count;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!world.port) {
        char err[256];
        fuzz_check(uv_loop_init(&world.loop) == 0, "no loop");
        fuzz_check(
            channel_listen(&world.loop, &world.listener, "127.0.0.1", 0, fuzz_peer_on_connection, err, sizeof err) == 0,
            "cannot listen on 127.0.0.1");
        world.port = channel_listener_port(&world.listener);
    }
    world.up_id = 0;
    world.accepted = false;
    channel_stats totals = {0};
    world.set = peer_set_create(&world.loop, PEER_ROLE_CELLAPP, FUZZ_PEER_CLUSTER, &fuzz_peer_callbacks, NULL, &totals);
    peer_set_set_process_id(world.set, 1);
    int fd = fuzz_loopback_send(world.port, data, size);
    /* Accepted first: the reset must not meet it in the listen queue. */
    while (!world.accepted) uv_run(&world.loop, UV_RUN_ONCE);
    fuzz_loopback_finish(&world.loop, fd, &totals.bytes_in, size);
    peer_set_free(world.set);
    world.set = NULL;
    while (fuzz_peer_handles() > 0) uv_run(&world.loop, UV_RUN_ONCE);
    return 0;
}
