/* test_replication.c -- pack once: the audience matrix per flag, detail
 * levels, zero cost for unchanged entities, the encode -> stream -> decode
 * round trip, and malformed streams rejected without a crash. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "entity_def.h"
#include "entity_state.h"
#include "property_codec.h"
#include "replication.h"
#include "volatile_codec.h"

static const char defs[] =
    "{\"entities\": [{\"name\": \"Thing\", \"properties\": [\n"
    "  {\"name\": \"base\", \"type\": \"int16\", \"flags\": \"BASE\"},\n"
    "  {\"name\": \"base_client\", \"type\": \"int16\", \"flags\": \"BASE_AND_CLIENT\"},\n"
    "  {\"name\": \"cell_private\", \"type\": \"int16\", \"flags\": \"CELL_PRIVATE\"},\n"
    "  {\"name\": \"cell_public\", \"type\": \"int16\", \"flags\": \"CELL_PUBLIC\"},\n"
    "  {\"name\": \"cell_public_own\", \"type\": \"int16\", \"flags\": \"CELL_PUBLIC_AND_OWN\"},\n"
    "  {\"name\": \"all\", \"type\": \"int16\", \"flags\": \"ALL_CLIENTS\"},\n"
    "  {\"name\": \"own\", \"type\": \"int16\", \"flags\": \"OWN_CLIENT\"},\n"
    "  {\"name\": \"other\", \"type\": \"int16\", \"flags\": \"OTHER_CLIENTS\"},\n"
    "  {\"name\": \"near\", \"type\": \"uint8\", \"flags\": \"ALL_CLIENTS\", \"detail\": \"near\"},\n"
    "  {\"name\": \"medium\", \"type\": \"uint8\", \"flags\": \"ALL_CLIENTS\",\n"
    "   \"detail\": \"medium\"},\n"
    "  {\"name\": \"label\", \"type\": \"string\", \"max_length\": 40, \"flags\": \"ALL_CLIENTS\"},\n"
    "  {\"name\": \"speed\", \"type\": \"float\", \"flags\": \"OTHER_CLIENTS\",\n"
    "   \"quantize\": {\"min\": 0, \"max\": 20, \"precision\": 0.01}},\n"
    "  {\"name\": \"target\", \"type\": \"entity\", \"flags\": \"ALL_CLIENTS\"},\n"
    "  {\"name\": \"stats\", \"type\": \"array\", \"element\": \"uint16\", \"count\": 3,\n"
    "   \"flags\": \"CELL_PUBLIC_AND_OWN\"}\n"
    "]}]}\n";

enum {
    P_BASE,
    P_BASE_CLIENT,
    P_CELL_PRIVATE,
    P_CELL_PUBLIC,
    P_CELL_PUBLIC_OWN,
    P_ALL,
    P_OWN,
    P_OTHER,
    P_NEAR,
    P_MEDIUM,
    P_LABEL,
    P_SPEED,
    P_TARGET,
    P_STATS,
    P_COUNT
};

#define ALIASES 64
#define ALIAS_BITS 6
#define ENTITIES 6

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;
static uint64_t rng(void) {
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1dULL;
}

/* The client side: one state per alias, and whether it is ours. */
typedef struct client {
    entity_state *states[ALIASES];
    bool owner[ALIASES];
    uint64_t entity_id[ALIASES];
    volatile_track track[ALIASES];
    float x[ALIASES], z[ALIASES];
    int changed_calls;
} client;

/* The space of the MOVE tests: 1/64 m over 1 km. */
static volatile_codec_config move_config;

typedef struct fixture {
    entity_def_registry *reg;
    const entity_def_class *cls;
    replication_schema *schema;
    replication *rep;
    entity_state *server[ENTITIES];
    replication_entity ent[ENTITIES];
    bit_writer w;
    client cl;
    uint64_t tick;
} fixture;

static entity_state *client_enter(void *ctx, uint32_t alias, uint64_t entity_id, const entity_def_class *cls,
                                  bool is_owner) {
    client *c = ctx;
    if (alias >= ALIASES) return NULL;
    c->entity_id[alias] = entity_id;
    entity_state_free(c->states[alias]);
    c->states[alias] = entity_state_create(cls);
    c->owner[alias] = is_owner;
    return c->states[alias];
}
static entity_state *client_find(void *ctx, uint32_t alias, bool *is_owner) {
    client *c = ctx;
    if (alias >= ALIASES || c->states[alias] == NULL) return NULL;
    *is_owner = c->owner[alias];
    return c->states[alias];
}
static void client_leave(void *ctx, uint32_t alias) {
    client *c = ctx;
    if (alias < ALIASES) {
        entity_state_free(c->states[alias]);
        c->states[alias] = NULL;
    }
}
static void client_changed(void *ctx, uint32_t alias, entity_state *state, const entity_state_mask *changed) {
    (void)alias, (void)state, (void)changed;
    ((client *)ctx)->changed_calls++;
}
static int client_move(void *ctx, uint32_t alias, bit_reader *r) {
    client *c = ctx;
    if (alias >= ALIASES || c->states[alias] == NULL) {
        int rc = volatile_codec_skip(r, &move_config);
        return rc < 0 ? rc : 0;
    }
    float y, yaw;
    int rc = volatile_codec_decode(r, &c->track[alias], &move_config, &c->x[alias], &y, &c->z[alias], &yaw);
    return rc < 0 ? rc : 1;
}
static const replication_decode_callbacks callbacks = {
    .enter = client_enter,
    .find = client_find,
    .move = client_move,
    .leave = client_leave,
    .changed = client_changed,
};

static void client_clear(client *c) {
    for (int i = 0; i < ALIASES; i++) {
        entity_state_free(c->states[i]);
        c->states[i] = NULL;
    }
}

static int setup(void **state) {
    fixture *fx = calloc(1, sizeof *fx);
    char err[512] = "";
    if (fx == NULL || entity_def_load_string(defs, "test", &fx->reg, err, sizeof err) != 0) {
        fprintf(stderr, "load failed: %s\n", err);
        free(fx);
        return -1;
    }
    fx->cls = entity_def_registry_find_class(fx->reg, "Thing");
    if (fx->cls == NULL || fx->cls->property_count != P_COUNT) return -1;
    fx->schema = replication_schema_create(fx->reg);
    fx->rep = replication_create(fx->schema);
    for (int i = 0; i < ENTITIES; i++) {
        fx->server[i] = entity_state_create(fx->cls);
        replication_entity_init(&fx->ent[i], fx->server[i], 1000 + (uint64_t)i);
    }
    bit_writer_init(&fx->w);
    *state = fx;
    return 0;
}

static int teardown(void **state) {
    fixture *fx = *state;
    client_clear(&fx->cl);
    for (int i = 0; i < ENTITIES; i++) entity_state_free(fx->server[i]);
    bit_writer_close(&fx->w);
    replication_free(fx->rep);
    replication_schema_free(fx->schema);
    entity_def_registry_free(fx->reg);
    free(fx);
    return 0;
}

static void next_tick(fixture *fx) { replication_begin_tick(fx->rep, ++fx->tick); }

/* Sets property `p` of `s` to a random legal value. */
static void randomize(entity_state *s, uint16_t p) {
    switch (p) {
        case P_NEAR:
        case P_MEDIUM:
            assert_int_equal(entity_state_set_uint(s, p, 0, rng() % 256), 0);
            break;
        case P_LABEL: {
            char text[41];
            size_t n = rng() % 41;
            for (size_t i = 0; i < n; i++) text[i] = (char)('a' + rng() % 26);
            assert_int_equal(entity_state_set_string(s, p, 0, text, n), 0);
            break;
        }
        case P_SPEED:
            assert_int_equal(entity_state_set_float(s, p, 0, (double)(rng() % 2001) / 100.0), 0);
            break;
        case P_TARGET:
            assert_int_equal(entity_state_set_entity(s, p, 0, rng()), 0);
            break;
        case P_STATS:
            for (uint32_t i = 0; i < 3; i++) assert_int_equal(entity_state_set_uint(s, p, i, rng() % 65536), 0);
            break;
        default:
            assert_int_equal(entity_state_set_int(s, p, 0, (int64_t)(rng() % 65536) - 32768), 0);
            break;
    }
}

/* The property ids of the change list in `span` (after its length). */
static void span_ids(const replication *rep, const entity_def_class *cls, replication_span span,
                     entity_state_mask *ids) {
    memset(ids, 0, sizeof *ids);
    if (span.bits == 0) return;
    bit_reader r;
    bit_reader_init_bits(&r, replication_shared_data(rep), span.start + span.bits);
    assert_int_equal(bit_reader_skip(&r, span.start), 0);
    uint64_t length, count, id;
    assert_int_equal(bit_reader_read_uvar(&r, &length), 0);
    assert_int_equal(bit_reader_read(&r, property_codec_bits_for(P_COUNT), &count), 0);
    for (uint64_t i = 0; i < count; i++) {
        assert_int_equal(bit_reader_read(&r, property_codec_bits_for(P_COUNT - 1), &id), 0);
        entity_state_mask_add(ids, (uint16_t)id);
        assert_int_equal(property_codec_check(&r, &cls->properties[id].type), 0);
    }
    assert_int_equal(bit_reader_remaining(&r), 0);
}

/* Changes only property `p` of entity 0, packs it, and checks which
 * audiences' encodings carry it: bit a of `expected`. */
static void check_matrix(fixture *fx, uint16_t p, unsigned expected) {
    next_tick(fx);
    entity_state_clear_dirty(fx->server[0]);
    assert_int_equal(entity_state_mark_dirty(fx->server[0], p), 0);
    replication_pack(fx->rep, &fx->ent[0]);
    for (int a = 0; a < REPLICATION_AUDIENCE_COUNT; a++) {
        replication_span span = replication_entity_span(fx->rep, &fx->ent[0], a, false);
        entity_state_mask ids;
        span_ids(fx->rep, fx->cls, span, &ids);
        bool want = (expected >> a & 1) != 0;
        if (want != entity_state_mask_has(&ids, p))
            fail_msg("property %u, audience %d: expected %s", p, a, want ? "in" : "absent");
        assert_int_equal(span.bits != 0, want);
        /* The mask agrees with the encoding. */
        assert_int_equal(entity_state_mask_has(replication_schema_mask(fx->schema, 0, a), p), want);
    }
    entity_state_clear_dirty(fx->server[0]);
}

#define OWN (1u << REPLICATION_AUDIENCE_OWN)
#define NEAR (1u << REPLICATION_AUDIENCE_OTHERS_NEAR)
#define MEDIUM (1u << REPLICATION_AUDIENCE_OTHERS_MEDIUM)
#define FAR (1u << REPLICATION_AUDIENCE_OTHERS_FAR)
#define GHOSTS (1u << REPLICATION_AUDIENCE_GHOSTS)
#define OTHERS (NEAR | MEDIUM | FAR)

static void test_flag_base(void **s) { check_matrix(*s, P_BASE, 0); }
/* Sent by the base, not by the cell. */
static void test_flag_base_and_client(void **s) { check_matrix(*s, P_BASE_CLIENT, 0); }
static void test_flag_cell_private(void **s) { check_matrix(*s, P_CELL_PRIVATE, 0); }
static void test_flag_cell_public(void **s) { check_matrix(*s, P_CELL_PUBLIC, GHOSTS); }
static void test_flag_cell_public_and_own(void **s) { check_matrix(*s, P_CELL_PUBLIC_OWN, OWN | GHOSTS); }
static void test_flag_all_clients(void **s) { check_matrix(*s, P_ALL, OWN | OTHERS | GHOSTS); }
static void test_flag_own_client(void **s) { check_matrix(*s, P_OWN, OWN); }
static void test_flag_other_clients(void **s) { check_matrix(*s, P_OTHER, OTHERS | GHOSTS); }

static void test_detail_levels(void **state) {
    fixture *fx = *state;
    check_matrix(fx, P_NEAR, OWN | NEAR | GHOSTS);
    check_matrix(fx, P_MEDIUM, OWN | NEAR | MEDIUM | GHOSTS);
    check_matrix(fx, P_ALL, OWN | NEAR | MEDIUM | FAR | GHOSTS);
    /* Through the witness API: a far observer gets nothing for a near-only
     * change, a near one gets it. */
    next_tick(fx);
    assert_int_equal(entity_state_set_uint(fx->server[1], P_NEAR, 0, 7), 0);
    replication_pack(fx->rep, &fx->ent[1]);
    bit_writer_reset(&fx->w);
    assert_int_equal(
        replication_append_update(fx->rep, &fx->ent[1], &fx->w, 1, ALIAS_BITS, false, ENTITY_DEF_DETAIL_FAR), 0);
    assert_int_equal(
        replication_append_update(fx->rep, &fx->ent[1], &fx->w, 1, ALIAS_BITS, false, ENTITY_DEF_DETAIL_MEDIUM), 0);
    assert_true(replication_append_update(fx->rep, &fx->ent[1], &fx->w, 1, ALIAS_BITS, false, ENTITY_DEF_DETAIL_NEAR) >
                0);
    assert_true(replication_append_update(fx->rep, &fx->ent[1], &fx->w, 1, ALIAS_BITS, true, ENTITY_DEF_DETAIL_FAR) >
                0);
    entity_state_clear_dirty(fx->server[1]);
}

static void test_unchanged_costs_nothing(void **state) {
    fixture *fx = *state;
    next_tick(fx);
    for (int i = 0; i < ENTITIES; i++) entity_state_clear_dirty(fx->server[i]);
    replication_pack(fx->rep, &fx->ent[0]); /* packed with nothing dirty */
    /* entity 1 is not packed at all this tick */
    assert_int_equal(entity_state_set_int(fx->server[2], P_CELL_PRIVATE, 0, 5), 0);
    replication_pack(fx->rep, &fx->ent[2]); /* only a cell-private change */
    bit_writer_reset(&fx->w);
    for (int e = 0; e < 3; e++) {
        for (int owner = 0; owner < 2; owner++) {
            for (int d = 0; d <= ENTITY_DEF_DETAIL_FAR; d++)
                assert_int_equal(replication_append_update(fx->rep, &fx->ent[e], &fx->w, 3, ALIAS_BITS, owner, d), 0);
        }
    }
    assert_int_equal(bit_writer_bits(&fx->w), 0);
    /* A span of an earlier tick is stale. */
    assert_int_equal(entity_state_set_int(fx->server[3], P_ALL, 0, 5), 0);
    replication_pack(fx->rep, &fx->ent[3]);
    next_tick(fx);
    assert_int_equal(
        replication_append_update(fx->rep, &fx->ent[3], &fx->w, 3, ALIAS_BITS, false, ENTITY_DEF_DETAIL_NEAR), 0);
    entity_state_clear_dirty(fx->server[2]);
    entity_state_clear_dirty(fx->server[3]);
}

/* Every property the client may hold for entity e equals the server's
 * (compared through their encodings); every other one holds its default. */
static void assert_client_matches(fixture *fx, int e, uint32_t alias, bool owner, entity_def_detail detail) {
    entity_state *c = fx->cl.states[alias];
    assert_non_null(c);
    entity_state *defaults = entity_state_create(fx->cls);
    const entity_state_mask *m = replication_schema_mask(fx->schema, 0, replication_audience_for(owner, detail));
    bit_writer a, b;
    bit_writer_init(&a);
    bit_writer_init(&b);
    for (int p = 0; p < P_COUNT; p++) {
        bit_writer_reset(&a);
        bit_writer_reset(&b);
        property_codec_encode(&a, entity_state_mask_has(m, p) ? fx->server[e] : defaults, p);
        property_codec_encode(&b, c, p);
        assert_int_equal(bit_writer_bits(&a), bit_writer_bits(&b));
        assert_memory_equal(bit_writer_data(&a), bit_writer_data(&b), bit_writer_bytes(&a));
    }
    bit_writer_close(&a);
    bit_writer_close(&b);
    entity_state_free(defaults);
}

static int decode(fixture *fx, const void *data, size_t bits, replication_decode_stats *st) {
    bit_reader r;
    bit_reader_init_bits(&r, data, bits);
    return replication_decode_stream(&r, fx->schema, ALIAS_BITS, &callbacks, &fx->cl, st);
}

/* Viewers of the round trip: entity e is seen with alias e + 10 at these
 * levels; entity 0 is the receiver's own. */
static const entity_def_detail levels[ENTITIES] = {ENTITY_DEF_DETAIL_FAR,    ENTITY_DEF_DETAIL_NEAR,
                                                   ENTITY_DEF_DETAIL_MEDIUM, ENTITY_DEF_DETAIL_FAR,
                                                   ENTITY_DEF_DETAIL_NEAR,   ENTITY_DEF_DETAIL_FAR};

static void test_round_trip(void **state) {
    fixture *fx = *state;
    /* Some state before anyone sees it. */
    for (int e = 0; e < ENTITIES; e++) {
        for (int p = 0; p < P_COUNT; p++) randomize(fx->server[e], p);
    }
    next_tick(fx);
    for (int e = 0; e < ENTITIES; e++) replication_pack(fx->rep, &fx->ent[e]);
    bit_writer_reset(&fx->w);
    for (int e = 0; e < ENTITIES; e++)
        replication_append_enter(fx->rep, &fx->ent[e], &fx->w, (uint32_t)e + 10, ALIAS_BITS, e == 0, levels[e]);
    replication_append_end(&fx->w);
    for (int e = 0; e < ENTITIES; e++) entity_state_clear_dirty(fx->server[e]);
    replication_decode_stats st;
    assert_int_equal(decode(fx, bit_writer_data(&fx->w), bit_writer_bits(&fx->w), &st), 0);
    assert_int_equal(st.enters, ENTITIES);
    for (int e = 0; e < ENTITIES; e++) {
        assert_int_equal(fx->cl.owner[e + 10], e == 0);
        assert_client_matches(fx, e, (uint32_t)e + 10, e == 0, levels[e]);
    }
    /* Ticks of random changes. */
    for (int round = 0; round < 200; round++) {
        next_tick(fx);
        for (int e = 0; e < ENTITIES; e++) {
            for (int p = 0; p < P_COUNT; p++) {
                if (rng() % 5 == 0) randomize(fx->server[e], p);
            }
            replication_pack(fx->rep, &fx->ent[e]);
        }
        bit_writer_reset(&fx->w);
        /* A writer not at a byte boundary, to exercise unaligned copies. */
        for (int e = 0; e < ENTITIES; e++)
            replication_append_update(fx->rep, &fx->ent[e], &fx->w, (uint32_t)e + 10, ALIAS_BITS, e == 0, levels[e]);
        replication_append_end(&fx->w);
        for (int e = 0; e < ENTITIES; e++) entity_state_clear_dirty(fx->server[e]);
        assert_int_equal(decode(fx, bit_writer_data(&fx->w), bit_writer_bits(&fx->w), &st), 0);
        for (int e = 0; e < ENTITIES; e++) assert_client_matches(fx, e, (uint32_t)e + 10, e == 0, levels[e]);
    }
    assert_true(fx->cl.changed_calls > 0);
    /* Leave. */
    bit_writer_reset(&fx->w);
    replication_append_leave(&fx->w, 12, ALIAS_BITS);
    replication_append_end(&fx->w);
    assert_int_equal(decode(fx, bit_writer_data(&fx->w), bit_writer_bits(&fx->w), &st), 0);
    assert_int_equal(st.leaves, 1);
    assert_null(fx->cl.states[12]);
}

/* A valid stream of every record kind: enter 10 (own) and 11, update both,
 * leave 11, END. */
static void valid_stream(fixture *fx) {
    for (int e = 0; e < 2; e++) {
        for (int p = 0; p < P_COUNT; p++) randomize(fx->server[e], p);
    }
    next_tick(fx);
    for (int e = 0; e < 2; e++) replication_pack(fx->rep, &fx->ent[e]);
    bit_writer_reset(&fx->w);
    replication_append_enter(fx->rep, &fx->ent[0], &fx->w, 10, ALIAS_BITS, true, ENTITY_DEF_DETAIL_NEAR);
    replication_append_enter(fx->rep, &fx->ent[1], &fx->w, 11, ALIAS_BITS, false, ENTITY_DEF_DETAIL_NEAR);
    replication_append_update(fx->rep, &fx->ent[0], &fx->w, 10, ALIAS_BITS, true, ENTITY_DEF_DETAIL_NEAR);
    replication_append_update(fx->rep, &fx->ent[1], &fx->w, 11, ALIAS_BITS, false, ENTITY_DEF_DETAIL_NEAR);
    replication_append_leave(&fx->w, 11, ALIAS_BITS);
    replication_append_end(&fx->w);
    for (int e = 0; e < 2; e++) entity_state_clear_dirty(fx->server[e]);
}

static void test_truncated_everywhere(void **state) {
    fixture *fx = *state;
    valid_stream(fx);
    size_t total = bit_writer_bits(&fx->w);
    /* The END record ends 4 bits into the padding at most. */
    size_t end = total;
    while (end > 0 && (bit_writer_data(&fx->w)[(end - 1) / 8] >> ((end - 1) % 8) & 1) == 0) end--;
    end += 2; /* END's kind is 3 (binary 11) and its ext kind 00: its last set bit is the
               * kind's, and two zero bits complete it */
    for (size_t n = 0; n < end; n++) {
        client_clear(&fx->cl);
        int rc = decode(fx, bit_writer_data(&fx->w), n, NULL);
        if (rc == 0) fail_msg("a stream cut at bit %zu of %zu was accepted", n, end);
    }
    client_clear(&fx->cl);
    replication_decode_stats st;
    assert_int_equal(decode(fx, bit_writer_data(&fx->w), total, &st), 0);
    assert_int_equal(st.enters, 2);
    assert_int_equal(st.updates, 2);
    assert_int_equal(st.leaves, 1);
}

static void test_unknown_alias_discarded(void **state) {
    fixture *fx = *state;
    client_clear(&fx->cl);
    for (int p = 0; p < P_COUNT; p++) randomize(fx->server[0], p);
    next_tick(fx);
    replication_pack(fx->rep, &fx->ent[0]);
    bit_writer_reset(&fx->w);
    /* An update for alias 5, which the client never entered, then a valid
     * enter and a leave for an unknown alias. */
    assert_true(replication_append_update(fx->rep, &fx->ent[0], &fx->w, 5, ALIAS_BITS, false, ENTITY_DEF_DETAIL_NEAR) >
                0);
    replication_append_enter(fx->rep, &fx->ent[0], &fx->w, 6, ALIAS_BITS, false, ENTITY_DEF_DETAIL_NEAR);
    replication_append_leave(&fx->w, 40, ALIAS_BITS);
    replication_append_end(&fx->w);
    entity_state_clear_dirty(fx->server[0]);
    replication_decode_stats st;
    assert_int_equal(decode(fx, bit_writer_data(&fx->w), bit_writer_bits(&fx->w), &st), 0);
    assert_int_equal(st.discarded, 1);
    assert_int_equal(st.enters, 1);
    assert_null(fx->cl.states[5]);
    assert_client_matches(fx, 0, 6, false, ENTITY_DEF_DETAIL_NEAR);
}

static void test_bad_kind_and_garbage(void **state) {
    fixture *fx = *state;
    /* EXT with a reserved extended kind. */
    for (uint64_t ext = 2; ext < 4; ext++) {
        bit_writer_reset(&fx->w);
        bit_writer_write(&fx->w, 3, 2);
        bit_writer_write(&fx->w, ext, 2);
        assert_int_equal(decode(fx, bit_writer_data(&fx->w), 8, NULL), REPLICATION_ERROR_KIND);
    }
    /* Bits after END. */
    bit_writer_reset(&fx->w);
    replication_append_end(&fx->w);
    bit_writer_write(&fx->w, 0, 8);
    assert_int_equal(decode(fx, bit_writer_data(&fx->w), 16, NULL), REPLICATION_ERROR_MALFORMED);
    bit_writer_reset(&fx->w);
    bit_writer_write(&fx->w, 3 | 1u << 5, 8); /* END, then a set padding bit */
    assert_int_equal(decode(fx, bit_writer_data(&fx->w), 8, NULL), REPLICATION_ERROR_MALFORMED);
    /* An empty stream has no END. */
    assert_int_equal(decode(fx, NULL, 0, NULL), REPLICATION_ERROR_TRUNCATED);
    /* Random bytes never crash. */
    uint8_t junk[64];
    for (int round = 0; round < 2000; round++) {
        for (size_t i = 0; i < sizeof junk; i++) junk[i] = (uint8_t)rng();
        client_clear(&fx->cl);
        (void)decode(fx, junk, (rng() % sizeof junk) * 8, NULL);
    }
    client_clear(&fx->cl);
}

/* Record kinds as replication.c documents them. */
enum { KIND_MOVE = 0, KIND_UPDATE = 1, KIND_ENTER = 2 };

/* Writes an UPDATE (or ENTER when kind is KIND_ENTER) for `alias` carrying
 * the change list of `props` of `src`; `length_delta` falsifies the length. */
static void forge(bit_writer *w, unsigned kind, uint32_t alias, int owner, const entity_state *src,
                  const entity_state_mask *props, int length_delta) {
    bit_writer body;
    bit_writer_init(&body);
    if (kind == KIND_ENTER) {
        bit_writer_write_bool(&body, owner != 0);
        /* one class: 0 class bits */
        bit_writer_write_uvar(&body, 77);
    }
    assert_int_equal(property_codec_encode_changes(&body, src, props), 0);
    bit_writer_write(w, kind, 2);
    bit_writer_write(w, alias, ALIAS_BITS);
    bit_writer_write_uvar(w, (uint64_t)((int64_t)bit_writer_bits(&body) + length_delta));
    bit_reader r;
    bit_reader_init_bits(&r, bit_writer_data(&body), bit_writer_bits(&body));
    for (size_t i = 0; i < bit_writer_bits(&body); i++) {
        uint64_t bit;
        assert_int_equal(bit_reader_read(&r, 1, &bit), 0);
        bit_writer_write(w, bit, 1);
    }
    bit_writer_close(&body);
}

static void test_property_outside_audience(void **state) {
    fixture *fx = *state;
    entity_state_mask own = {0}, priv = {0}, ok = {0};
    entity_state_mask_add(&own, P_OWN);
    entity_state_mask_add(&priv, P_CELL_PRIVATE);
    entity_state_mask_add(&ok, P_ALL);
    /* An enter for another client's entity carrying an OWN_CLIENT property. */
    client_clear(&fx->cl);
    bit_writer_reset(&fx->w);
    forge(&fx->w, KIND_ENTER, 7, 0, fx->server[0], &own, 0);
    replication_append_end(&fx->w);
    assert_int_equal(decode(fx, bit_writer_data(&fx->w), bit_writer_bits(&fx->w), NULL),
                     PROPERTY_CODEC_ERROR_UNEXPECTED_PROPERTY);
    assert_null(fx->cl.states[7]); /* no callback fired */
    /* A valid enter, then an update with a cell-private property. */
    bit_writer_reset(&fx->w);
    forge(&fx->w, KIND_ENTER, 7, 0, fx->server[0], &ok, 0);
    forge(&fx->w, KIND_UPDATE, 7, 0, fx->server[0], &priv, 0);
    replication_append_end(&fx->w);
    assert_int_equal(decode(fx, bit_writer_data(&fx->w), bit_writer_bits(&fx->w), NULL),
                     PROPERTY_CODEC_ERROR_UNEXPECTED_PROPERTY);
    /* The own entity may get OWN_CLIENT but never OTHER_CLIENTS. */
    entity_state_mask other = {0};
    entity_state_mask_add(&other, P_OTHER);
    bit_writer_reset(&fx->w);
    forge(&fx->w, KIND_ENTER, 8, 1, fx->server[0], &own, 0);
    forge(&fx->w, KIND_UPDATE, 8, 1, fx->server[0], &other, 0);
    replication_append_end(&fx->w);
    assert_int_equal(decode(fx, bit_writer_data(&fx->w), bit_writer_bits(&fx->w), NULL),
                     PROPERTY_CODEC_ERROR_UNEXPECTED_PROPERTY);
    assert_true(fx->cl.owner[8]);
    /* A length that lies, either way. */
    for (int delta = -3; delta <= 3; delta += 6) {
        bit_writer_reset(&fx->w);
        forge(&fx->w, KIND_UPDATE, 8, 1, fx->server[0], &own, delta);
        replication_append_end(&fx->w);
        assert_int_not_equal(decode(fx, bit_writer_data(&fx->w), bit_writer_bits(&fx->w), NULL), 0);
    }
    client_clear(&fx->cl);
}

/* An ENTER names the entity; a MOVE after it places it; a MOVE for an alias
 * the client does not know is read and discarded, and the stream goes on. */
static void test_enter_then_moves(void **state) {
    fixture *fx = *state;
    client_clear(&fx->cl);
    next_tick(fx);
    bit_writer_reset(&fx->w);
    volatile_track server_track;
    volatile_track_init(&server_track);
    replication_append_enter(fx->rep, &fx->ent[2], &fx->w, 3, ALIAS_BITS, false, ENTITY_DEF_DETAIL_FAR);
    replication_append_move_header(&fx->w, 3, ALIAS_BITS);
    assert_true(volatile_codec_encode(&fx->w, &server_track, &move_config, 10.5f, 0.0f, 20.25f, 0.5f) > 0);
    volatile_track stale;
    volatile_track_init(&stale);
    replication_append_move_header(&fx->w, 9, ALIAS_BITS); /* never entered */
    assert_true(volatile_codec_encode(&fx->w, &stale, &move_config, 1, 0, 1, 0) > 0);
    replication_append_move_header(&fx->w, 3, ALIAS_BITS); /* a delta */
    assert_true(volatile_codec_encode(&fx->w, &server_track, &move_config, 10.75f, 0.0f, 20.5f, 0.5f) > 0);
    size_t before_end = bit_writer_bits(&fx->w);
    replication_append_end(&fx->w);
    replication_decode_stats st;
    assert_int_equal(decode(fx, bit_writer_data(&fx->w), bit_writer_bits(&fx->w), &st), 0);
    assert_int_equal(st.enters, 1);
    assert_int_equal(st.moves, 2);
    assert_int_equal(st.discarded, 1);
    assert_int_equal(fx->cl.entity_id[3], 1002);
    assert_float_equal(fx->cl.x[3], 10.75f, 1.0 / 128);
    assert_float_equal(fx->cl.z[3], 20.5f, 1.0 / 128);
    /* A stream cut anywhere before its END is an error, not a crash. */
    for (size_t cut = 0; cut <= before_end + 3; cut++) {
        client_clear(&fx->cl);
        assert_true(decode(fx, bit_writer_data(&fx->w), cut, NULL) < 0);
    }
    client_clear(&fx->cl);
}

/* replication_append_properties sends current values of chosen properties
 * to one witness, outside the shared encodings. */
static void test_refresh_properties(void **state) {
    fixture *fx = *state;
    client_clear(&fx->cl);
    next_tick(fx);
    bit_writer_reset(&fx->w);
    replication_append_enter(fx->rep, &fx->ent[1], &fx->w, 4, ALIAS_BITS, false, ENTITY_DEF_DETAIL_FAR);
    replication_append_end(&fx->w);
    assert_int_equal(decode(fx, bit_writer_data(&fx->w), bit_writer_bits(&fx->w), NULL), 0);
    /* The near-only property changes on the server while the client is far;
     * when it comes near it gets the value now held. */
    const entity_state_mask *near = replication_schema_mask(fx->schema, fx->cls->id, REPLICATION_AUDIENCE_OTHERS_NEAR);
    const entity_state_mask *far = replication_schema_mask(fx->schema, fx->cls->id, REPLICATION_AUDIENCE_OTHERS_FAR);
    entity_state_mask gained = {0};
    for (int k = 0; k < ENTITY_STATE_MASK_WORDS; k++) gained.words[k] = near->words[k] & ~far->words[k];
    assert_false(entity_state_mask_empty(&gained));
    for (int p = entity_state_mask_next(&gained, -1); p >= 0; p = entity_state_mask_next(&gained, p))
        randomize(fx->server[1], (uint16_t)p);
    entity_state_clear_dirty(fx->server[1]);
    next_tick(fx);
    bit_writer_reset(&fx->w);
    assert_true(replication_append_properties(fx->rep, &fx->ent[1], &fx->w, 4, ALIAS_BITS, &gained) > 0);
    entity_state_mask none = {0};
    assert_int_equal(replication_append_properties(fx->rep, &fx->ent[1], &fx->w, 4, ALIAS_BITS, &none), 0);
    replication_append_end(&fx->w);
    assert_int_equal(decode(fx, bit_writer_data(&fx->w), bit_writer_bits(&fx->w), NULL), 0);
    assert_client_matches(fx, 1, 4, false, ENTITY_DEF_DETAIL_NEAR);
    client_clear(&fx->cl);
}

/* The batch append writes exactly what one call per record writes, at any
 * starting bit phase, for empty, short and long (> 128 bit) encodings. */
static void test_batch_matches_single(void **state) {
    fixture *fx = *state;
    bit_writer single;
    bit_writer_init(&single);
    for (int round = 0; round < 300; round++) {
        next_tick(fx);
        for (int e = 0; e < ENTITIES; e++) {
            /* Sometimes everything changes (long lists), sometimes nothing. */
            int chance = round % 3 == 0 ? 1 : round % 3 == 1 ? 4 : 50;
            for (int p = 0; p < P_COUNT; p++)
                if (rng() % (uint64_t)chance == 0) randomize(fx->server[e], p);
            if (rng() % 4 != 0) replication_pack(fx->rep, &fx->ent[e]);
        }
        unsigned phase = (unsigned)(rng() % 8);
        bit_writer_reset(&single);
        bit_writer_reset(&fx->w);
        bit_writer_write(&single, 0x5a & ((1u << phase) - 1), phase);
        bit_writer_write(&fx->w, 0x5a & ((1u << phase) - 1), phase);
        replication_ref refs[ENTITIES * 2];
        size_t count = 0, expected = 0;
        for (int k = 0; k < ENTITIES * 2; k++) {
            int e = (int)(rng() % ENTITIES);
            bool owner = rng() % 4 == 0;
            entity_def_detail detail = (entity_def_detail)(rng() % 3);
            uint32_t alias = (uint32_t)(rng() % (1u << ALIAS_BITS));
            expected += replication_append_update(fx->rep, &fx->ent[e], &single, alias, ALIAS_BITS, owner, detail);
            refs[count++] = (replication_ref){&fx->ent[e], alias, (uint8_t)replication_audience_for(owner, detail)};
        }
        assert_int_equal(replication_append_updates(fx->rep, &fx->w, refs, count, ALIAS_BITS), expected);
        assert_int_equal(bit_writer_bits(&fx->w), bit_writer_bits(&single));
        assert_memory_equal(bit_writer_data(&fx->w), bit_writer_data(&single), bit_writer_bytes(&single));
        for (int e = 0; e < ENTITIES; e++) entity_state_clear_dirty(fx->server[e]);
    }
    bit_writer_close(&single);
}

/* Packing only some audiences: the others send nothing this tick, the
 * packed ones are what a full pack gives. */
static void test_pack_some_audiences(void **state) {
    fixture *fx = *state;
    for (int p = 0; p < P_COUNT; p++) randomize(fx->server[0], p);
    next_tick(fx);
    replication_pack(fx->rep, &fx->ent[0]);
    replication_span full[REPLICATION_AUDIENCE_COUNT];
    bit_writer reference[REPLICATION_AUDIENCE_COUNT];
    for (int a = 0; a < REPLICATION_AUDIENCE_COUNT; a++) {
        full[a] = replication_entity_span(fx->rep, &fx->ent[0], a, false);
        bit_writer_init(&reference[a]);
        bit_writer_append_bits(&reference[a], 0, 0, replication_shared_data(fx->rep),
                               (full[a].start + full[a].bits + 7) / 8, full[a].start, full[a].bits);
    }
    next_tick(fx);
    replication_pack_audiences(fx->rep, &fx->ent[0], REPLICATION_OTHERS_AUDIENCES);
    for (int a = 0; a < REPLICATION_AUDIENCE_COUNT; a++) {
        replication_span span = replication_entity_span(fx->rep, &fx->ent[0], a, false);
        bool packed = a != REPLICATION_AUDIENCE_OWN && a != REPLICATION_AUDIENCE_GHOSTS;
        if (!packed) {
            assert_int_equal(span.bits, 0);
            bit_writer_reset(&fx->w);
            if (a == REPLICATION_AUDIENCE_OWN)
                assert_int_equal(replication_append_update(fx->rep, &fx->ent[0], &fx->w, 1, ALIAS_BITS, true,
                                                           ENTITY_DEF_DETAIL_NEAR),
                                 0);
        } else {
            assert_int_equal(span.bits, full[a].bits);
            bit_writer copy;
            bit_writer_init(&copy);
            bit_writer_append_bits(&copy, 0, 0, replication_shared_data(fx->rep), (span.start + span.bits + 7) / 8,
                                   span.start, span.bits);
            assert_memory_equal(bit_writer_data(&copy), bit_writer_data(&reference[a]), bit_writer_bytes(&copy));
            bit_writer_close(&copy);
        }
        bit_writer_close(&reference[a]);
    }
    entity_state_clear_dirty(fx->server[0]);
}

/* The change list of a packed audience, without its length, is what
 * property_codec_encode_changes writes for dirty AND that audience. */
static void test_change_list_copy(void **state) {
    fixture *fx = *state;
    bit_writer copy, reference;
    bit_writer_init(&copy);
    bit_writer_init(&reference);
    for (int round = 0; round < 100; round++) {
        next_tick(fx);
        for (int p = 0; p < P_COUNT; p++)
            if (rng() % 3 == 0) randomize(fx->server[0], p);
        replication_pack(fx->rep, &fx->ent[0]);
        for (int a = 0; a < REPLICATION_AUDIENCE_COUNT; a++) {
            entity_state_mask m;
            entity_state_mask_intersect(&m, entity_state_dirty(fx->server[0]),
                                        replication_schema_mask(fx->schema, fx->cls->id, a));
            bit_writer_reset(&copy);
            bit_writer_reset(&reference);
            size_t bits = replication_append_change_list(fx->rep, &fx->ent[0], a, &copy);
            if (entity_state_mask_empty(&m)) {
                assert_int_equal(bits, 0);
                continue;
            }
            property_codec_encode_changes(&reference, fx->server[0], &m);
            assert_int_equal(bits, bit_writer_bits(&reference));
            assert_int_equal(bit_writer_bits(&copy), bits);
            assert_memory_equal(bit_writer_data(&copy), bit_writer_data(&reference), bit_writer_bytes(&copy));
        }
        entity_state_clear_dirty(fx->server[0]);
    }
    /* A tick later, nothing is packed: nothing is copied. */
    next_tick(fx);
    bit_writer_reset(&copy);
    assert_int_equal(replication_append_change_list(fx->rep, &fx->ent[0], REPLICATION_AUDIENCE_GHOSTS, &copy), 0);
    bit_writer_close(&copy);
    bit_writer_close(&reference);
}

int main(void) {
    const double min[3] = {0, -100, 0}, max[3] = {1000, 100, 1000};
    if (volatile_codec_config_init(&move_config, 1.0 / 64, min, max, 256) != 0) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_flag_base, setup, teardown),
        cmocka_unit_test_setup_teardown(test_flag_base_and_client, setup, teardown),
        cmocka_unit_test_setup_teardown(test_flag_cell_private, setup, teardown),
        cmocka_unit_test_setup_teardown(test_flag_cell_public, setup, teardown),
        cmocka_unit_test_setup_teardown(test_flag_cell_public_and_own, setup, teardown),
        cmocka_unit_test_setup_teardown(test_flag_all_clients, setup, teardown),
        cmocka_unit_test_setup_teardown(test_flag_own_client, setup, teardown),
        cmocka_unit_test_setup_teardown(test_flag_other_clients, setup, teardown),
        cmocka_unit_test_setup_teardown(test_detail_levels, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unchanged_costs_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_truncated_everywhere, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unknown_alias_discarded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_kind_and_garbage, setup, teardown),
        cmocka_unit_test_setup_teardown(test_property_outside_audience, setup, teardown),
        cmocka_unit_test_setup_teardown(test_enter_then_moves, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refresh_properties, setup, teardown),
        cmocka_unit_test_setup_teardown(test_batch_matches_single, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pack_some_audiences, setup, teardown),
        cmocka_unit_test_setup_teardown(test_change_list_copy, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
