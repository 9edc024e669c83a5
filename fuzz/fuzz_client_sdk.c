/* fuzz_client_sdk.c -- fuzzes the client SDK (client/tessera_client.c) on
 * what a baseapp sends it: frames of ServerToClient handed to a client
 * through tessera_client_process_frame, the SDK's seam for a client that
 * never connected (nothing is ever sent or dialled). The client gets a
 * real ServerHello first; when the first input byte is odd, also the
 * real LoginReply of fuzz_support.c (the demo definitions, an Avatar in
 * the arena), so the frames after it reach the world: ViewUpdates with
 * their entity streams, calls and events, BaseProperties, corrections,
 * teleports, restores. With an even first byte the input brings its own
 * login reply (definitions included). The rest of the input is frames
 * (4-byte length each), fed until the client closes.
 *
 * Checks: at the end of every frame the view table is consistent (every
 * entity is found by its id and, with an alias, by its alias; its state is
 * of its class); the client closes once when asked, on_closed firing
 * exactly once; no crash, no leak. */
#include <uv.h>

#include "frame.h"
#include "fuzz_support.h"
#include "tessera_client.h"

/* The loop every client of the run lives on (made on the first input). */
static uv_loop_t loop;
static bool loop_ready;
static int closed_count;

/* Every entity of the view can be found the ways the API promises. */
static void fuzz_client_sdk_check_view(tessera_client *client, uint32_t tick) {
    (void)tick;
    size_t cursor = 0, count = 0;
    const tessera_client_entity *entity;
    while ((entity = tessera_client_entity_next(client, &cursor)) != NULL) {
        count++;
        fuzz_check(tessera_client_entity_find(client, entity->id) == entity, "an entity not found by its id");
        fuzz_check(entity->alias == UINT32_MAX || tessera_client_entity_by_alias(client, entity->alias) == entity,
                   "an entity not found by its alias");
        fuzz_check(entity->state && entity_state_class(entity->state) == entity->cls,
                   "an entity's state is not of its class");
    }
    fuzz_check(count == tessera_client_entity_count(client), "the view counts other entities than it holds");
}

static void fuzz_client_sdk_closed(tessera_client *client, tessera_client_close_cause cause, const char *reason) {
    (void)client;
    (void)cause;
    (void)reason;
    closed_count++;
}

static const tessera_client_callbacks fuzz_client_sdk_callbacks = {
    .on_frame_end = fuzz_client_sdk_check_view,
    .on_closed = fuzz_client_sdk_closed,
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    if (!loop_ready) {
        fuzz_check(uv_loop_init(&loop) == 0, "no loop");
        loop_ready = true;
    }
    closed_count = 0;
    tessera_client *client = tessera_client_create(&loop, &fuzz_client_sdk_callbacks, NULL);
    const fuzz_bytes *hello = fuzz_server_hello(), *login = fuzz_login_reply();
    int open = tessera_client_process_frame(client, hello->data, hello->length) == 0;
    fuzz_check(open, "the client refused a real ServerHello");
    if (data[0] & 1) {
        open = tessera_client_process_frame(client, login->data, login->length) == 0;
        fuzz_check(open && tessera_client_get_state(client) == TESSERA_CLIENT_IN_WORLD,
                   "the client refused a real LoginReply");
    }
    /* The client's own limit on a frame: the LoginReply's max_frame_bytes. */
    frame_reader reader;
    frame_reader_init(&reader, 65536);
    frame_reader_push(&reader, data + 1, size - 1);
    const uint8_t *frame;
    size_t length;
    while (open && frame_reader_next(&reader, &frame, &length) == 1)
        open = tessera_client_process_frame(client, frame, length) == 0;
    frame_reader_close(&reader);
    tessera_client_close(client);
    uv_run(&loop, UV_RUN_DEFAULT);
    fuzz_check(closed_count == 1, "on_closed did not fire exactly once");
    return 0;
}
