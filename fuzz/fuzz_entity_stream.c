/* fuzz_entity_stream.c -- fuzzes the client SDK's entity stream decoder,
 * common/replication.c's replication_decode_stream, with the demo's real
 * schema and callbacks that do what client/tessera_client.c's do: an ENTER
 * makes a fresh state for its alias (replacing what the alias held), an
 * UPDATE finds it, a MOVE reads one volatile record into the alias's
 * tracker (or skips it for an unknown alias), a LEAVE frees it. The first
 * byte picks the alias width (as a login reply's max_aliases would); the
 * rest is streams, each after a 2-byte length (one per ViewUpdate), read
 * in turn with the aliases kept between them, until the input ends or a
 * stream is refused.
 *
 * Checks: a stream is accepted only whole, up to its END and padding, or
 * refused with the reader failed; the states the stream built re-encode and decode to the
 * same bytes; no crash, no leak. */
#include <string.h>

#include "entity_state.h"
#include "fuzz_support.h"
#include "replication.h"
#include "volatile_codec.h"

/* Aliases the harness tracks: the widest alias_bits below is 10. */
#define FUZZ_STREAM_ALIASES 1024
/* Streams read from one input at most (a run of ViewUpdates). */
#define FUZZ_STREAM_MAX_STREAMS 16

typedef struct fuzz_stream_alias {
    entity_state *state;
    bool is_owner;
    volatile_track track;
} fuzz_stream_alias;

/* The demo definitions' audiences (made on the first input). */
static replication_schema *schema;
static fuzz_stream_alias aliases[FUZZ_STREAM_ALIASES];

static entity_state *fuzz_stream_enter(void *ctx, uint32_t alias, uint64_t entity_id, const entity_def_class *cls,
                                       bool is_owner) {
    (void)ctx;
    (void)entity_id;
    fuzz_check(alias < FUZZ_STREAM_ALIASES, "an alias wider than alias_bits");
    fuzz_stream_alias *a = &aliases[alias];
    entity_state_free(a->state);
    a->state = entity_state_create(cls);
    a->is_owner = is_owner;
    volatile_track_init(&a->track);
    return a->state;
}

static entity_state *fuzz_stream_find(void *ctx, uint32_t alias, bool *is_owner) {
    (void)ctx;
    fuzz_check(alias < FUZZ_STREAM_ALIASES, "an alias wider than alias_bits");
    *is_owner = aliases[alias].is_owner;
    return aliases[alias].state;
}

static int fuzz_stream_move(void *ctx, uint32_t alias, bit_reader *r) {
    (void)ctx;
    fuzz_check(alias < FUZZ_STREAM_ALIASES, "an alias wider than alias_bits");
    fuzz_stream_alias *a = &aliases[alias];
    if (!a->state) return volatile_codec_skip(r, fuzz_arena_config()) == 0 ? 0 : VOLATILE_CODEC_ERROR_TRUNCATED;
    float x, y, z, yaw;
    int rc = volatile_codec_decode(r, &a->track, fuzz_arena_config(), &x, &y, &z, &yaw);
    return rc == 0 ? 1 : rc;
}

static void fuzz_stream_leave(void *ctx, uint32_t alias) {
    (void)ctx;
    fuzz_check(alias < FUZZ_STREAM_ALIASES, "an alias wider than alias_bits");
    entity_state_free(aliases[alias].state);
    aliases[alias].state = NULL;
}

static const replication_decode_callbacks fuzz_stream_callbacks = {
    .enter = fuzz_stream_enter,
    .find = fuzz_stream_find,
    .move = fuzz_stream_move,
    .leave = fuzz_stream_leave,
    .changed = NULL,
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    if (!schema) schema = replication_schema_create(fuzz_definitions());
    /* 1 to 1024 aliases, as a login reply's max_aliases: 0 to 10 bits. */
    unsigned alias_bits = replication_alias_bits(1u + (data[0] % 4 == 0 ? 0u : (1u << (data[0] % 11)) - 1u));
    fuzz_check(alias_bits <= 10, "alias_bits wider than the harness's table");
    /* Then streams, each after its length (2 bytes, big-endian), as each
     * ViewUpdate carries one; the last may be cut short. */
    size_t at = 1;
    for (int stream = 0; stream < FUZZ_STREAM_MAX_STREAMS && at + 2 <= size; stream++) {
        size_t length = (size_t)data[at] << 8 | data[at + 1];
        at += 2;
        if (length > size - at) length = size - at;
        bit_reader r;
        bit_reader_init(&r, data + at, length);
        at += length;
        replication_decode_stats stats;
        int rc = replication_decode_stream(&r, schema, alias_bits, &fuzz_stream_callbacks, NULL, &stats);
        if (rc != 0) {
            fuzz_check(bit_reader_failed(&r), "a refused stream left the reader good");
            break;
        }
        fuzz_check(bit_reader_remaining(&r) == 0, "a stream accepted with bytes after its END");
    }
    for (size_t i = 0; i < FUZZ_STREAM_ALIASES; i++) {
        if (!aliases[i].state) continue;
        fuzz_check_state_round_trip(aliases[i].state);
        entity_state_free(aliases[i].state);
        aliases[i].state = NULL;
    }
    return 0;
}
