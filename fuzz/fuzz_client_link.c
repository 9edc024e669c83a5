/* fuzz_client_link.c -- fuzzes a baseapp's client connection whole, through
 * the entry point the baseapp itself uses: the input is written to a real
 * loopback TCP connection that baseapp/client_link.c accepted
 * (client_links_accept), so its bytes go through channel.c's reads, the
 * frame reader and client_link.c's on_frame (ClientToServer unpacked into
 * the links' decode arena, each message checked against the link's state
 * and limits) exactly as a client's would. client_link.c and
 * client_dispatch.c are not changed for it: the handlers the links call
 * are this file's, doing what the layer above does in the ways that matter
 * to the link: a login, reconnect or token login binds the link to a
 * player and puts it in the world (as proxy.c does once the cell answers),
 * a method call is prepared against the demo's Avatar (as proxy.c and
 * cell_message.c do).
 *
 * Checks: a move reaches the layer above only in the world, with a finite
 * position and yaw; a call only in the world; an account name the link
 * passed on is a valid one; a bound link lets go of its player exactly
 * once; every connection is closed and freed once the client has sent
 * everything and gone; no crash, no leak. */
#include <math.h>
#include <string.h>
#include <uv.h>

#include "account_name.h"
#include "baseapp_settings.h"
#include "client_link.h"
#include "fuzz_support.h"
#include "log.h"
#include "method_call.h"

/* What the links borrow, made on the first input and kept for the run. */
static struct fuzz_link_world {
    uv_loop_t loop;
    uv_tcp_t listener;
    int port;
    baseapp_settings settings;
    login_throttle throttle;
    bool draining;
    process_self self;
    client_links *links;
    /* Stands for the proxy a link is bound to: the link only keeps the
     * pointer and hands it back (the unbound handler). */
    char player;
    int bound, unbound;
    bool accepted;
} world;

static void fuzz_link_bind(client_link *link) {
    client_link_bind(link, (proxy *)(void *)&world.player, FUZZ_PLAYER_ID);
    /* What proxy.c does when the LoginReply goes out. */
    link->state = CLIENT_LINK_IN_WORLD;
    client_link_start_limits(link);
    world.bound++;
}

static void fuzz_link_login(void *owner, client_link *link, const char *password) {
    (void)owner;
    fuzz_check(account_name_check(link->account) == NULL, "a login passed on with a bad account name");
    fuzz_check(password && strlen(password) >= 1 && strlen(password) <= 128, "a login passed on with a bad password");
    fuzz_link_bind(link);
}

static void fuzz_link_token(void *owner, client_link *link, const char *token) {
    (void)owner;
    fuzz_check(account_name_check(link->account) == NULL, "a reconnect passed on with a bad account name");
    fuzz_check(token != NULL, "a reconnect passed on without a token");
    fuzz_link_bind(link);
}

static void fuzz_link_move(void *owner, client_link *link, const Tessera__Client__Move *move) {
    (void)owner;
    fuzz_check(link->state == CLIENT_LINK_IN_WORLD, "a move passed on outside the world");
    fuzz_check(move->position && isfinite(move->position->x) && isfinite(move->position->y) &&
                   isfinite(move->position->z) && isfinite(move->yaw),
               "a move passed on without a finite position and yaw");
}

static void fuzz_link_call(void *owner, client_link *link, const Tessera__Client__EntityCall *call) {
    (void)owner;
    fuzz_check(link->state == CLIENT_LINK_IN_WORLD, "a call passed on outside the world");
    const entity_def_class *avatar = entity_def_registry_find_class(fuzz_definitions(), "Avatar");
    entity_def_part part =
        call->part == TESSERA__CLIENT__METHOD_PART__METHOD_PART_CELL ? ENTITY_DEF_PART_CELL : ENTITY_DEF_PART_BASE;
    const entity_def_method *method;
    entity_state *args;
    char reason[256];
    if (method_call_prepare(avatar, part, call->method_id, call->args.data, call->args.len, true, &method, &args,
                            reason, sizeof reason) == METHOD_CALL_OK)
        entity_state_free(args);
}

// cppcheck-suppress constParameter ; client_link_handlers.unbound passes the player non-const
static void fuzz_link_unbound(void *owner, const client_link *link, proxy *was) {
    (void)owner;
    (void)link;
    fuzz_check(was == (proxy *)(void *)&world.player, "a link let go of a player it was not bound to");
    world.unbound++;
}

static void fuzz_link_on_connection(uv_stream_t *listener, int status) {
    if (status != 0) return;
    client_links_accept(world.links, listener, false);
    world.accepted = true;
}

static void fuzz_link_setup(void) {
    char err[256];
    fuzz_check(config_load(baseapp_config_keys, baseapp_config_key_count, &world.settings, NULL, NULL, 0, err,
                           sizeof err) == 0,
               "the baseapp's defaults do not load");
    login_throttle_init(&world.throttle, world.settings.login_failures_per_account,
                        world.settings.login_failures_per_address);
    fuzz_check(uv_loop_init(&world.loop) == 0, "no loop");
    fuzz_check(channel_listen(&world.loop, &world.listener, "127.0.0.1", 0, fuzz_link_on_connection, err, sizeof err) ==
                   0,
               "cannot listen on 127.0.0.1");
    world.port = channel_listener_port(&world.listener);
    client_links_context context = {
        .settings = &world.settings,
        .definitions_digest = entity_def_registry_digest_hex(fuzz_definitions()),
        .throttle = &world.throttle,
        .draining = &world.draining,
        .self = &world.self,
        .handlers =
            {
                .login = fuzz_link_login,
                .reconnect = fuzz_link_token,
                .token_login = fuzz_link_token,
                .move = fuzz_link_move,
                .call = fuzz_link_call,
                .unbound = fuzz_link_unbound,
            },
    };
    world.links = client_links_create(&context, 16);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!world.links) fuzz_link_setup();
    world.bound = world.unbound = 0;
    world.accepted = false;
    const uint64_t *bytes_read = &client_links_counters(world.links)->totals.bytes_in;
    uint64_t expected = *bytes_read + size;
    int fd = fuzz_loopback_send(world.port, data, size);
    /* Accepted before anything else, so that the reset below never meets
     * a connection still in the listen queue. */
    while (!world.accepted) uv_run(&world.loop, UV_RUN_ONCE);
    fuzz_loopback_finish(&world.loop, fd, bytes_read, expected);
    /* The client is gone: its link closes and is freed. */
    while (client_links_count(world.links) > 0) uv_run(&world.loop, UV_RUN_ONCE);
    fuzz_check(world.unbound == world.bound, "a bound link did not let go of its player exactly once");
    return 0;
}
