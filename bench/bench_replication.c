/* bench_replication.c -- pack once (cellapp/replication.c) against a
 * per-witness encoder, on one cell: 2,000 entities of a 12-property class,
 * 500 witnesses seeing ~100 entities each, 20 % of properties changing per
 * tick. Positions are not part of it (volatile updates are a separate
 * piece).
 *
 *   bench-replication [--json] [--ticks N]
 *
 * Both sides produce, per witness per tick, a stream of UPDATE records for
 * the entities it sees that changed for its audience. Pack once encodes
 * each changed entity once per audience and bit-copies; the baseline calls
 * property_codec_encode_changes for every (witness, entity) pair (its
 * records carry no length prefix, so its streams are slightly shorter: the
 * comparison favours it). Witness 0's pack-once stream is decoded every
 * tick and its client states are checked against the server's at the end;
 * every tick (untimed), every span and every witness's stream are checked
 * bit for bit against property_codec_encode_changes and plain bit copies
 * (check_format).
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alias_table.h"
#include "bench_args.h"
#include "entity_def.h"
#include "entity_state.h"
#include "property_codec.h"
#include "replication.h"

#define ENTITIES 2000
#define WITNESSES 500
#define VIEW 100
/* 1024 aliases (10 bits): a view of ~100 with room for churn and the
 * one-second cooldown. */
#define MAX_ALIASES 1024
#define HIST_BITS 8192
/* How far ahead a witness prefetches the records it will append (as
 * witness.c does): far enough to cover a cache miss (~100 ns) at ~10 ns an
 * append. */
#define PREFETCH_AHEAD 16

static const char defs[] =
    "{\"entities\": [{\"name\": \"Npc\", \"properties\": [\n"
    " {\"name\": \"hp\", \"type\": \"uint16\", \"bits\": 14, \"flags\": \"ALL_CLIENTS\"},\n"
    " {\"name\": \"mana\", \"type\": \"uint16\", \"bits\": 12, \"flags\": \"OWN_CLIENT\"},\n"
    " {\"name\": \"level\", \"type\": \"uint8\", \"bits\": 7, \"flags\": \"ALL_CLIENTS\"},\n"
    " {\"name\": \"stance\", \"type\": \"uint8\", \"bits\": 3, \"flags\": \"ALL_CLIENTS\"},\n"
    " {\"name\": \"speed\", \"type\": \"float\", \"flags\": \"OTHER_CLIENTS\",\n"
    "  \"quantize\": {\"min\": 0, \"max\": 20, \"precision\": 0.01}},\n"
    " {\"name\": \"target\", \"type\": \"entity\", \"flags\": \"ALL_CLIENTS\", \"detail\": \"medium\"},\n"
    " {\"name\": \"title\", \"type\": \"string\", \"max_length\": 24, \"flags\": \"ALL_CLIENTS\"},\n"
    " {\"name\": \"emote\", \"type\": \"uint8\", \"flags\": \"ALL_CLIENTS\", \"detail\": \"near\"},\n"
    " {\"name\": \"xp\", \"type\": \"uint32\", \"flags\": \"OWN_CLIENT\"},\n"
    " {\"name\": \"combat\", \"type\": \"bool\", \"flags\": \"ALL_CLIENTS\"},\n"
    " {\"name\": \"aggro\", \"type\": \"int16\", \"flags\": \"CELL_PRIVATE\"},\n"
    " {\"name\": \"buffs\", \"type\": \"array\", \"element\": \"uint16\", \"count\": 4,\n"
    "  \"flags\": \"ALL_CLIENTS\", \"detail\": \"medium\"}\n"
    "]}]}\n";

enum {
    P_HP,
    P_MANA,
    P_LEVEL,
    P_STANCE,
    P_SPEED,
    P_TARGET,
    P_TITLE,
    P_EMOTE,
    P_XP,
    P_COMBAT,
    P_AGGRO,
    P_BUFFS,
    P_COUNT
};

static uint64_t rng_state = 0x2545f4914f6cdd1dULL;
static uint64_t rng(void) {
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1dULL;
}

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void randomize(entity_state *s, uint16_t p) {
    int rc = 0;
    switch (p) {
        case P_HP:
            rc = entity_state_set_uint(s, p, 0, rng() % 16384);
            break;
        case P_MANA:
            rc = entity_state_set_uint(s, p, 0, rng() % 4096);
            break;
        case P_LEVEL:
            rc = entity_state_set_uint(s, p, 0, rng() % 128);
            break;
        case P_STANCE:
            rc = entity_state_set_uint(s, p, 0, rng() % 8);
            break;
        case P_SPEED:
            rc = entity_state_set_float(s, p, 0, (double)(rng() % 2001) / 100.0);
            break;
        case P_TARGET:
            rc = entity_state_set_entity(s, p, 0, 1 + rng() % ENTITIES);
            break;
        case P_TITLE: {
            char t[24];
            size_t n = 4 + rng() % 12;
            for (size_t i = 0; i < n; i++) t[i] = (char)('a' + rng() % 26);
            rc = entity_state_set_string(s, p, 0, t, n);
            break;
        }
        case P_EMOTE:
            rc = entity_state_set_uint(s, p, 0, rng() % 256);
            break;
        case P_XP:
            rc = entity_state_set_uint(s, p, 0, rng() % 100000);
            break;
        case P_COMBAT:
            rc = entity_state_set_bool(s, p, 0, rng() & 1);
            break;
        case P_AGGRO:
            rc = entity_state_set_int(s, p, 0, (int64_t)(rng() % 2000) - 1000);
            break;
        case P_BUFFS:
            rc = entity_state_set_uint(s, p, (uint32_t)(rng() % 4), rng() % 65536);
            break;
    }
    if (rc != 0) {
        fprintf(stderr, "bench-replication: set %u failed: %d\n", p, rc);
        exit(1);
    }
}

typedef struct seen {
    uint32_t entity;
    uint32_t alias;
    bool owner;
    entity_def_detail detail;
} seen;

typedef struct witness {
    seen view[VIEW];
    alias_table *aliases;
    bit_writer pack, base;
} witness;

/* Witness 0's client side, decoded from its pack-once stream. */
typedef struct client {
    entity_state *states[MAX_ALIASES];
    bool owner[MAX_ALIASES];
} client;

static entity_state *client_enter(void *ctx, uint32_t alias, uint64_t entity_id, const entity_def_class *cls,
                                  bool is_owner) {
    client *c = ctx;
    (void)entity_id;
    entity_state_free(c->states[alias]);
    c->states[alias] = entity_state_create(cls);
    c->owner[alias] = is_owner;
    return c->states[alias];
}
static entity_state *client_find(void *ctx, uint32_t alias, bool *is_owner) {
    client *c = ctx;
    if (alias >= MAX_ALIASES || c->states[alias] == NULL) return NULL;
    *is_owner = c->owner[alias];
    return c->states[alias];
}

/* True when (untimed) every span of the tick is its length then exactly
 * what property_codec_encode_changes writes for that audience, and every
 * witness's pack-once stream is exactly the records built by plain bit
 * copies of those spans: the fast paths of the packer change no bit. */
static bool check_format(replication *rep, const replication_schema *schema, entity_state **states,
                         replication_entity *ents, const witness *ws, unsigned alias_bits, bit_writer *probe) {
    const uint8_t *shared = replication_shared_data(rep);
    for (int e = 0; e < ENTITIES; e++) {
        for (int a = 0; a < REPLICATION_AUDIENCE_COUNT; a++) {
            /* The audiences the bench packs (see the tick loop). */
            if (a == REPLICATION_AUDIENCE_GHOSTS || (a == REPLICATION_AUDIENCE_OWN && e >= WITNESSES)) continue;
            replication_span sp = replication_entity_span(rep, &ents[e], a, false);
            entity_state_mask m;
            entity_state_mask_intersect(&m, entity_state_dirty(states[e]), replication_schema_mask(schema, 0, a));
            bit_writer_reset(probe);
            if (!entity_state_mask_empty(&m)) property_codec_encode_changes(probe, states[e], &m);
            size_t n = bit_writer_bits(probe);
            if (sp.bits == 0 || n == 0) {
                if (sp.bits != n) return false;
                continue;
            }
            bit_reader r, q;
            uint64_t length, x, y;
            bit_reader_init_bits(&r, shared, sp.start + sp.bits);
            bit_reader_skip(&r, sp.start);
            if (bit_reader_read_uvar(&r, &length) != 0 || length != n || bit_reader_remaining(&r) != n) return false;
            bit_reader_init_bits(&q, bit_writer_data(probe), n);
            for (size_t left = n; left > 0;) {
                unsigned k = left < 64 ? (unsigned)left : 64;
                bit_reader_read(&r, k, &x);
                bit_reader_read(&q, k, &y);
                if (x != y) return false;
                left -= k;
            }
        }
    }
    bit_writer ref;
    bit_writer_init(&ref);
    bool same = true;
    for (int w = 0; w < WITNESSES && same; w++) {
        bit_writer_reset(&ref);
        for (int k = 0; k < VIEW; k++) {
            const seen *s = &ws[w].view[k];
            replication_span sp =
                replication_entity_span(rep, &ents[s->entity], replication_audience_for(s->owner, s->detail), false);
            if (sp.bits == 0) continue;
            bit_writer_append_bits(&ref, 1 | (uint64_t)s->alias << 2, 2 + alias_bits, shared,
                                   (sp.start + sp.bits + 7) / 8, sp.start, sp.bits);
        }
        replication_append_end(&ref);
        same = bit_writer_bits(&ref) == bit_writer_bits(&ws[w].pack) &&
               memcmp(bit_writer_data(&ref), bit_writer_data(&ws[w].pack), bit_writer_bytes(&ref)) == 0;
    }
    bit_writer_close(&ref);
    return same;
}

static double percentile(const uint64_t *hist, uint64_t total, double q) {
    uint64_t want = (uint64_t)(q * (double)total), acc = 0;
    for (size_t b = 0; b < HIST_BITS; b++) {
        acc += hist[b];
        if (acc > want) return (double)b / 8.0;
    }
    return (double)HIST_BITS / 8.0;
}

int main(int argc, char **argv) {
    bool json = false;
    int ticks = 100;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            json = true;
        else if (strcmp(argv[i], "--ticks") == 0 && i + 1 < argc)
            ticks = bench_int_arg(argv[++i], 0);
        else {
            fprintf(stderr, "usage: bench-replication [--json] [--ticks N]\n");
            return 2;
        }
    }
    char err[512];
    entity_def_registry *reg;
    if (entity_def_load_string(defs, "bench", &reg, err, sizeof err) != 0) {
        fprintf(stderr, "bench-replication: %s\n", err);
        return 1;
    }
    const entity_def_class *cls = entity_def_registry_class(reg, 0);
    replication_schema *schema = replication_schema_create(reg);
    replication *rep = replication_create(schema);
    unsigned alias_bits = replication_alias_bits(MAX_ALIASES);

    static entity_state *states[ENTITIES];
    /* 64-byte aligned, as a cell would lay its entities out: an append then
     * reads one cache line of the record (see replication.h). */
    static _Alignas(64) replication_entity ents[ENTITIES];
    for (int e = 0; e < ENTITIES; e++) {
        states[e] = entity_state_create(cls);
        for (int p = 0; p < P_COUNT; p++) randomize(states[e], p);
        entity_state_clear_dirty(states[e]);
        replication_entity_init(&ents[e], states[e], 1 + (uint64_t)e);
    }

    /* Views: witness w owns entity w and sees it, plus 99 distinct others;
     * detail by distance: 30 % near, 30 % medium, 40 % far. */
    static witness ws[WITNESSES];
    static uint8_t mark[ENTITIES];
    for (int w = 0; w < WITNESSES; w++) {
        witness *wi = &ws[w];
        memset(mark, 0, sizeof mark);
        wi->aliases = alias_table_create(MAX_ALIASES, 1000);
        bit_writer_init(&wi->pack);
        bit_writer_init(&wi->base);
        for (int k = 0; k < VIEW; k++) {
            uint32_t e = (uint32_t)w;
            if (k > 0) {
                do e = (uint32_t)(rng() % ENTITIES);
                while (mark[e] || e == (uint32_t)w);
            }
            mark[e] = 1;
            uint64_t r = rng() % 10;
            wi->view[k] = (seen){
                .entity = e,
                .alias = alias_table_assign(wi->aliases, (uint64_t)e + 1, 0),
                .owner = k == 0,
                .detail = r < 3   ? ENTITY_DEF_DETAIL_NEAR
                          : r < 6 ? ENTITY_DEF_DETAIL_MEDIUM
                                  : ENTITY_DEF_DETAIL_FAR,
            };
        }
    }

    /* Tick 1: every witness enters its whole view. */
    uint64_t tick = 1;
    client cl;
    memset(&cl, 0, sizeof cl);
    replication_decode_callbacks cb = {.enter = client_enter, .find = client_find};
    replication_begin_tick(rep, tick);
    uint64_t t0 = now_ns();
    size_t enter_bits = 0;
    for (int w = 0; w < WITNESSES; w++) {
        bit_writer_reset(&ws[w].pack);
        for (int k = 0; k < VIEW; k++) {
            seen *s = &ws[w].view[k];
            enter_bits +=
                replication_append_enter(rep, &ents[s->entity], &ws[w].pack, s->alias, alias_bits, s->owner, s->detail);
        }
        replication_append_end(&ws[w].pack);
    }
    double enter_ms = (double)(now_ns() - t0) / 1e6;
    {
        bit_reader r;
        bit_reader_init(&r, bit_writer_data(&ws[0].pack), bit_writer_bytes(&ws[0].pack));
        if (replication_decode_stream(&r, schema, alias_bits, &cb, &cl, NULL) != 0) {
            fprintf(stderr, "bench-replication: enter stream does not decode\n");
            return 1;
        }
    }

    static uint64_t hist[HIST_BITS];
    bit_writer probe;
    bit_writer_init(&probe);
    uint64_t pack_ns = 0, packonly_ns = 0, base_ns = 0, decode_ns = 0;
    uint64_t update_records = 0, update_bits = 0, unchanged_pairs = 0, unchanged_bits = 0;
    uint64_t stream_bytes = 0, base_stream_bytes = 0, changed_entities = 0, shared_bits = 0;
    uint64_t prop_changes = 0;
    for (int t = 0; t < ticks; t++) {
        /* 20 % of properties change (untimed). */
        for (int e = 0; e < ENTITIES; e++) {
            for (int p = 0; p < P_COUNT; p++) {
                if (rng() % 5 == 0) {
                    randomize(states[e], p);
                    prop_changes++;
                }
            }
        }
        replication_begin_tick(rep, ++tick);

        /* Pack once. */
        uint64_t start = now_ns();
        for (int e = 0; e < ENTITIES; e++) {
            /* As a cell without neighbours does: OWN only for the entities
             * that have a client (witness w owns entity w), no GHOSTS. */
            if (!entity_state_mask_empty(entity_state_dirty(states[e])))
                replication_pack_audiences(
                    rep, &ents[e], REPLICATION_OTHERS_AUDIENCES | (e < WITNESSES ? 1u << REPLICATION_AUDIENCE_OWN : 0));
        }
        packonly_ns += now_ns() - start;
        for (int w = 0; w < WITNESSES; w++) {
            /* As witness.c does: the entities to update, then one batch. */
            bit_writer *out = &ws[w].pack;
            bit_writer_reset(out);
            replication_ref refs[VIEW];
            for (int k = 0; k < VIEW; k++) {
                const seen *s = &ws[w].view[k];
                refs[k] = (replication_ref){&ents[s->entity], s->alias,
                                            (uint8_t)replication_audience_for(s->owner, s->detail)};
            }
            replication_append_updates(rep, out, refs, VIEW, alias_bits);
            replication_append_end(out);
        }
        pack_ns += now_ns() - start;

        /* Per-witness encoder. */
        start = now_ns();
        for (int w = 0; w < WITNESSES; w++) {
            bit_writer *out = &ws[w].base;
            bit_writer_reset(out);
            for (int k = 0; k < VIEW; k++) {
                const seen *s = &ws[w].view[k];
                const entity_state *st = states[s->entity];
                entity_state_mask m;
                entity_state_mask_intersect(
                    &m, entity_state_dirty(st),
                    replication_schema_mask(schema, 0, replication_audience_for(s->owner, s->detail)));
                if (entity_state_mask_empty(&m)) continue;
                bit_writer_write(out, 1, 2); /* UPDATE */
                bit_writer_write(out, s->alias, alias_bits);
                property_codec_encode_changes(out, st, &m);
            }
            replication_append_end(out);
        }
        base_ns += now_ns() - start;

        /* Figures (untimed): record sizes, again through the API. */
        for (int e = 0; e < ENTITIES; e++) changed_entities += !entity_state_mask_empty(entity_state_dirty(states[e]));
        for (int w = 0; w < WITNESSES; w++) {
            stream_bytes += bit_writer_bytes(&ws[w].pack);
            base_stream_bytes += bit_writer_bytes(&ws[w].base);
            for (int k = 0; k < VIEW; k++) {
                const seen *s = &ws[w].view[k];
                bit_writer_reset(&probe);
                size_t bits =
                    replication_append_update(rep, &ents[s->entity], &probe, s->alias, alias_bits, s->owner, s->detail);
                if (entity_state_mask_empty(entity_state_dirty(states[s->entity]))) {
                    unchanged_pairs++;
                    unchanged_bits += bits;
                } else if (bits > 0) {
                    update_records++;
                    update_bits += bits;
                    hist[bits < HIST_BITS ? bits : HIST_BITS - 1]++;
                }
            }
        }
        for (int e = 0; e < ENTITIES; e++) {
            replication_span sp = replication_entity_span(rep, &ents[e], REPLICATION_AUDIENCE_OTHERS_NEAR, false);
            shared_bits += sp.bits;
        }
        if (!check_format(rep, schema, states, ents, ws, alias_bits, &probe)) {
            fprintf(stderr, "bench-replication: tick %d: a stream differs from its reference\n", t);
            return 1;
        }

        /* Witness 0 decodes its stream. */
        start = now_ns();
        bit_reader r;
        bit_reader_init(&r, bit_writer_data(&ws[0].pack), bit_writer_bytes(&ws[0].pack));
        int rc = replication_decode_stream(&r, schema, alias_bits, &cb, &cl, NULL);
        decode_ns += now_ns() - start;
        if (rc != 0) {
            fprintf(stderr, "bench-replication: tick %d does not decode: %s\n", t, replication_strerror(rc));
            return 1;
        }
        for (int e = 0; e < ENTITIES; e++) entity_state_clear_dirty(states[e]);
    }

    /* Witness 0's client holds what the server has, for its audience. */
    {
        bit_writer a, b;
        bit_writer_init(&a);
        bit_writer_init(&b);
        for (int k = 0; k < VIEW; k++) {
            const seen *s = &ws[0].view[k];
            const entity_state_mask *m =
                replication_schema_mask(schema, 0, replication_audience_for(s->owner, s->detail));
            for (int p = entity_state_mask_next(m, -1); p >= 0; p = entity_state_mask_next(m, p)) {
                bit_writer_reset(&a);
                bit_writer_reset(&b);
                property_codec_encode(&a, states[s->entity], (uint16_t)p);
                property_codec_encode(&b, cl.states[s->alias], (uint16_t)p);
                if (bit_writer_bits(&a) != bit_writer_bits(&b) ||
                    memcmp(bit_writer_data(&a), bit_writer_data(&b), bit_writer_bytes(&a)) != 0) {
                    fprintf(stderr, "bench-replication: client value differs (entity %u, %d)\n", s->entity, p);
                    return 1;
                }
            }
        }
        bit_writer_close(&a);
        bit_writer_close(&b);
    }

    double pack_ms = (double)pack_ns / 1e6 / ticks, base_ms = (double)base_ns / 1e6 / ticks;
    double ratio = pack_ms > 0 ? base_ms / pack_ms : 0;
    double median = percentile(hist, update_records, 0.5);
    double p90 = percentile(hist, update_records, 0.9);
    double mean = update_records ? (double)update_bits / 8.0 / (double)update_records : 0;
    double unchanged = unchanged_pairs ? (double)unchanged_bits / 8.0 / (double)unchanged_pairs : 0;
    double per_client_tick = (double)stream_bytes / WITNESSES / ticks;
    double base_per_client_tick = (double)base_stream_bytes / WITNESSES / ticks;
    double changed_pct = 100.0 * (double)changed_entities / ENTITIES / ticks;
    double decode_us = (double)decode_ns / 1e3 / ticks;
    double enter_mean = (double)enter_bits / 8.0 / (WITNESSES * VIEW);

    if (json) {
        printf("{\"entities\": %d, \"witnesses\": %d, \"view\": %d, \"ticks\": %d, "
               "\"properties\": %d, \"changed_property_pct\": %.1f, \"changed_entity_pct\": %.1f, "
               "\"pack_once_ms_per_tick\": %.3f, \"pack_once_encode_ms_per_tick\": %.3f, \"per_witness_ms_per_tick\": "
               "%.3f, "
               "\"speedup\": %.2f, \"update_bytes_median\": %.2f, \"update_bytes_p90\": %.2f, "
               "\"update_bytes_mean\": %.2f, \"unchanged_entity_bytes\": %.2f, "
               "\"stream_bytes_per_client_tick\": %.1f, \"bytes_per_s_per_client_10hz\": %.0f, "
               "\"per_witness_stream_bytes_per_client_tick\": %.1f, "
               "\"enter_bytes_mean\": %.2f, \"enter_all_views_ms\": %.3f, "
               "\"decode_us_per_packet\": %.2f, \"shared_near_bytes_per_tick\": %.0f}\n",
               ENTITIES, WITNESSES, VIEW, ticks, P_COUNT, 100.0 * (double)prop_changes / ENTITIES / P_COUNT / ticks,
               changed_pct, pack_ms, (double)packonly_ns / 1e6 / ticks, base_ms, ratio, median, p90, mean, unchanged,
               per_client_tick, per_client_tick * 10, base_per_client_tick, enter_mean, enter_ms, decode_us,
               (double)shared_bits / 8.0 / ticks);
    } else {
        printf("bench-replication: %d entities x %d properties, %d witnesses x %d in view, "
               "%d ticks\n",
               ENTITIES, P_COUNT, WITNESSES, VIEW, ticks);
        printf("  properties changed per tick   %.1f %%  (entities changed: %.1f %%)\n",
               100.0 * (double)prop_changes / ENTITIES / P_COUNT / ticks, changed_pct);
        printf("  pack once                     %8.3f ms/tick\n", pack_ms);
        printf("    of which encoding once      %8.3f ms/tick\n", (double)packonly_ns / 1e6 / ticks);
        printf("  per-witness encoder           %8.3f ms/tick\n", base_ms);
        printf("  speedup                       %8.2f x   (target >= 5x: %s)\n", ratio, ratio >= 5 ? "ok" : "MISSED");
        printf("  changed entity update         median %.2f B, p90 %.2f B, mean %.2f B\n", median, p90, mean);
        printf("  unchanged entity              %.2f B   (target 0: %s)\n", unchanged,
               unchanged_bits == 0 ? "ok" : "MISSED");
        printf("  stream per client             %.1f B/tick, %.0f B/s at 10 Hz "
               "(per-witness encoder: %.1f B/tick)\n",
               per_client_tick, per_client_tick * 10, base_per_client_tick);
        printf("  shared buffer (near spans)    %.0f B/tick\n", (double)shared_bits / 8.0 / ticks);
        printf("  enter records                 mean %.2f B; all %d views entered in %.3f ms\n", enter_mean, WITNESSES,
               enter_ms);
        printf("  client decode (witness 0)     %.2f us/packet\n", decode_us);
    }

    bit_writer_close(&probe);
    for (int a = 0; a < MAX_ALIASES; a++) entity_state_free(cl.states[a]);
    for (int w = 0; w < WITNESSES; w++) {
        alias_table_free(ws[w].aliases);
        bit_writer_close(&ws[w].pack);
        bit_writer_close(&ws[w].base);
    }
    for (int e = 0; e < ENTITIES; e++) entity_state_free(states[e]);
    replication_free(rep);
    replication_schema_free(schema);
    entity_def_registry_free(reg);
    return ratio >= 5 && unchanged_bits == 0 ? 0 : 1;
}
