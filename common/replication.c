/* replication.c -- pack once: per tick, each changed entity's change lists
 * encoded once per audience into one shared buffer, copied bit for bit into
 * every witness's stream; and the client-side decoder of that stream.
 *
 * It owns the per-tick entity stream's record layer. Values and change lists
 * are property_codec.c's (documented there), bits are bit_stream.c's
 * (LSB-first). Who sees what, budgets and positions belong elsewhere.
 *
 * ---- The entity stream (one per client per tick) -----------------------
 *
 * A sequence of records, then END. A = the alias width both ends agree on
 * (replication_alias_bits of the client's alias table size); C = the class
 * id width, property_codec_bits_for(class count - 1).
 *
 *   kind     2 bits   0 MOVE, 1 UPDATE, 2 ENTER, 3 EXT (the most frequent
 *                     record, a moving entity, has the shortest header)
 *
 *   MOVE     kind, alias (A bits), one volatile position+yaw record
 *            (volatile_codec.c's layout; no length: it is self-delimiting)
 *   UPDATE   kind, alias (A bits), length (uvar: bits of the change list),
 *            change list (property_codec: dirty AND audience mask)
 *   ENTER    kind, alias (A bits), length (uvar: bits that follow, up to
 *            the end of the record), owner (1 bit: the receiver owns the
 *            entity), class id (C bits), entity id (uvar: the only place
 *            a 64-bit id appears, so the client can name what it sees),
 *            change list of EVERY property of the audience (current
 *            values, not only dirty ones)
 *   EXT      kind, then a 2-bit extended kind:
 *              0 END: followed only by zero bits up to the next byte
 *                boundary;
 *              1 LEAVE, then alias (A bits);
 *              2, 3 reserved.
 *
 * A witness sends an entity's ENTER followed by an absolute MOVE, so the
 * client learns where it is in the same stream. A client that does not
 * know a MOVE's alias (a stale alias) reads the record and discards it.
 *
 * The receiver's audience is OWN for an entity it owns and OTHERS_<detail>
 * for another; the stream does not say which detail level the server used,
 * so the decoder accepts any property of OTHERS_NEAR (the widest) for a
 * non-owned entity, and any of OWN for the owned one.
 *
 * Why a length on UPDATE and ENTER: a client that does not know an alias
 * (stale, or a lost enter) cannot parse a change list without the class, so
 * it skips the record by its length; the length is also checked against the
 * content. It costs 8 bits for a change list under 16 bits and 12 under 256.
 * Why END: a stream cut at a record boundary would otherwise read as a
 * shorter valid stream.
 *
 * The length prefix is part of the shared encoding (a span is "length,
 * [owner, class,] change list"), so a witness writes kind and alias and
 * copies one span. Cost of an unchanged entity: 0 bits (no record).
 */
#include "replication.h"

#include "log.h"
#include "property_codec.h"

#include <stdlib.h>
#include <string.h>

enum {
    REPLICATION__KIND_MOVE = 0,
    REPLICATION__KIND_UPDATE = 1,
    REPLICATION__KIND_ENTER = 2,
    REPLICATION__KIND_EXT = 3,
};
enum { REPLICATION__EXT_END = 0, REPLICATION__EXT_LEAVE = 1 };

#define REPLICATION__KIND_BITS 2
#define REPLICATION__EXT_BITS 2

struct replication_schema {
    const entity_def_registry *registry;
    size_t class_count;
    unsigned class_bits;
    entity_state_mask (*masks)[REPLICATION_AUDIENCE_COUNT]; /* [class][audience] */
};

struct replication {
    const replication_schema *schema;
    uint64_t tick;
    bit_writer shared;  /* this tick's encodings */
    bit_writer scratch; /* one change list, before its length is known */
};

/* ---- schema ------------------------------------------------------------ */

replication_schema *replication_schema_create(const entity_def_registry *registry) {
    replication_schema *s = xcalloc(1, sizeof *s);
    s->registry = registry;
    s->class_count = entity_def_registry_class_count(registry);
    s->class_bits = s->class_count > 0 ? property_codec_bits_for(s->class_count - 1) : 0;
    s->masks = xcalloc(s->class_count > 0 ? s->class_count : 1, sizeof *s->masks);
    for (size_t c = 0; c < s->class_count; c++) {
        const entity_def_class *cls = entity_def_registry_class(registry, (uint16_t)c);
        entity_state_mask *m = s->masks[c];
        for (size_t i = 0; i < cls->property_count; i++) {
            const entity_def_property *p = &cls->properties[i];
            const entity_def_audience *a = &p->audience;
            if (a->on_cell && a->to_own_client) entity_state_mask_add(&m[REPLICATION_AUDIENCE_OWN], p->id);
            if (a->on_cell && a->to_ghosts) entity_state_mask_add(&m[REPLICATION_AUDIENCE_GHOSTS], p->id);
            if (a->on_cell && a->to_other_clients) {
                /* Cumulative: a nearer observer gets everything a farther
                 * one does. */
                entity_state_mask_add(&m[REPLICATION_AUDIENCE_OTHERS_NEAR], p->id);
                if (p->detail != ENTITY_DEF_DETAIL_NEAR)
                    entity_state_mask_add(&m[REPLICATION_AUDIENCE_OTHERS_MEDIUM], p->id);
                if (p->detail == ENTITY_DEF_DETAIL_FAR)
                    entity_state_mask_add(&m[REPLICATION_AUDIENCE_OTHERS_FAR], p->id);
            }
        }
    }
    return s;
}

void replication_schema_free(replication_schema *schema) {
    if (schema == NULL) return;
    free(schema->masks);
    free(schema);
}

const entity_state_mask *replication_schema_mask(const replication_schema *schema, uint16_t class_id,
                                                 replication_audience audience) {
    if (class_id >= schema->class_count || (unsigned)audience >= REPLICATION_AUDIENCE_COUNT) return NULL;
    return &schema->masks[class_id][audience];
}

/* ---- packing ----------------------------------------------------------- */

void replication_entity_init(replication_entity *entity, const entity_state *state, uint64_t entity_id) {
    memset(entity, 0, sizeof *entity);
    entity->state = state;
    entity->entity_id = entity_id;
}

replication *replication_create(const replication_schema *schema) {
    replication *rep = xcalloc(1, sizeof *rep);
    rep->schema = schema;
    bit_writer_init(&rep->shared);
    bit_writer_init(&rep->scratch);
    return rep;
}

void replication_free(replication *rep) {
    if (rep == NULL) return;
    bit_writer_close(&rep->shared);
    bit_writer_close(&rep->scratch);
    free(rep);
}

void replication_begin_tick(replication *rep, uint64_t tick) {
    if (tick == 0 || tick <= rep->tick)
        log_panic("replication: tick %llu after %llu", (unsigned long long)tick, (unsigned long long)rep->tick);
    rep->tick = tick;
    bit_writer_reset(&rep->shared);
}

const uint8_t *replication_shared_data(const replication *rep) { return bit_writer_data(&rep->shared); }

/* Moves the scratch writer into the shared buffer behind its length (the
 * ENTER encodings; the UPDATE ones are assembled by replication_pack). */
static replication_short_span replication__commit_scratch(replication *rep) {
    size_t start = bit_writer_bits(&rep->shared);
    size_t n = bit_writer_bits(&rep->scratch);
    bit_writer_write_uvar(&rep->shared, n);
    bit_writer_append_bits(&rep->shared, 0, 0, bit_writer_data(&rep->scratch), bit_writer_bytes(&rep->scratch), 0, n);
    size_t end = bit_writer_bits(&rep->shared);
    if (end > UINT32_MAX) log_panic("replication: a tick's shared buffer outgrew 2^32 bits");
    /* Slack for replication__load_head and replication__put_tail. */
    bit_writer_reserve(&rep->shared, bit_writer_bytes(&rep->shared) + 24);
    return (replication_short_span){(uint32_t)start, (uint32_t)(end - start)};
}

static const entity_state_mask *replication__masks(const replication *rep, const entity_state *state) {
    const entity_def_class *cls = entity_state_class(state);
    if (cls->id >= rep->schema->class_count)
        log_panic("replication: class %s is not in the packer's registry", cls->name);
    return rep->schema->masks[cls->id];
}

/* The first min(bits, 128) bits of the shared buffer from bit `start`, as
 * replication_encoding.head wants them (the buffer keeps 24 bytes of slack
 * past its end: see replication_pack). */
static void replication__load_head(const uint8_t *data, size_t start, size_t bits, uint64_t head[2]) {
    const uint8_t *q = data + (start >> 3);
    unsigned off = (unsigned)(start & 7);
    uint64_t a = bit_stream_load_le64(q), b = bit_stream_load_le64(q + 8);
    head[0] = a >> off | (b << 1) << (63 - off);
    head[1] = b >> off | ((uint64_t)q[16] << 1) << (63 - off);
    if (bits < 64) {
        head[0] &= (UINT64_C(1) << bits) - 1;
        head[1] = 0;
    } else if (bits < 128) {
        head[1] &= (UINT64_C(1) << (bits - 64)) - 1;
    }
}

/* Each dirty property is encoded once (property_codec_encode, into the
 * scratch writer), and every audience's change list is assembled from
 * those values: the layout is property_codec's change list (count in
 * bits_for(n) bits, then per property in id order its id in
 * bits_for(n - 1) bits and its value), bit for bit what
 * property_codec_encode_changes writes (bench-replication checks it), but
 * a value shared by four audiences is encoded once instead of four
 * times. */
void replication_pack(replication *rep, replication_entity *entity) {
    replication_pack_audiences(rep, entity, REPLICATION_ALL_AUDIENCES);
}

void replication_pack_audiences(replication *rep, replication_entity *entity, unsigned audiences) {
    const entity_state *state = entity->state;
    const entity_state_mask *masks = replication__masks(rep, state);
    const entity_state_mask *dirty = entity_state_dirty(state);
    size_t n_props = entity_state_class(state)->property_count;
    unsigned count_bits = property_codec_bits_for(n_props);
    unsigned id_bits = n_props > 0 ? property_codec_bits_for(n_props - 1) : 0;
    entity_state_mask props[REPLICATION_AUDIENCE_COUNT], any = {{0}};
    for (int a = 0; a < REPLICATION_AUDIENCE_COUNT; a++) {
        if (!(audiences >> a & 1)) {
            memset(&props[a], 0, sizeof props[a]);
            continue;
        }
        for (int k = 0; k < ENTITY_STATE_MASK_WORDS; k++) {
            props[a].words[k] = dirty->words[k] & masks[a].words[k];
            any.words[k] |= props[a].words[k];
        }
    }

    /* Every value some audience receives, once; `at` and `len` are read
     * only for properties of `any`. */
    uint32_t at[ENTITY_DEF_MAX_MEMBERS], len[ENTITY_DEF_MAX_MEMBERS];
    bit_writer_reset(&rep->scratch);
    for (int k = 0; k < ENTITY_STATE_MASK_WORDS; k++) {
        for (uint64_t m = any.words[k]; m != 0; m &= m - 1) {
            uint16_t p = (uint16_t)(64 * k + __builtin_ctzll(m));
            size_t before = bit_writer_bits(&rep->scratch);
            if (property_codec_encode(&rep->scratch, state, p) != 0)
                log_panic("replication: an audience mask names a property its class lacks");
            at[p] = (uint32_t)before;
            len[p] = (uint32_t)(bit_writer_bits(&rep->scratch) - before);
        }
    }
    const uint8_t *values = bit_writer_data(&rep->scratch);
    size_t values_bytes = bit_writer_bytes(&rep->scratch);

    for (int a = 0; a < REPLICATION_AUDIENCE_COUNT; a++) {
        replication_encoding *enc = &entity->update[a];
        if (!(audiences >> a & 1)) {
            enc->tick = 0; /* not packed: nothing to send this tick */
            continue;
        }
        enc->tick = rep->tick;
        uint64_t count = 0;
        size_t bits = count_bits;
        for (int k = 0; k < ENTITY_STATE_MASK_WORDS; k++) {
            for (uint64_t m = props[a].words[k]; m != 0; m &= m - 1) {
                count++;
                bits += id_bits + len[64 * k + __builtin_ctzll(m)];
            }
        }
        if (count == 0) {
            enc->span = (replication_short_span){0, 0};
            continue;
        }
        int same = -1;
        for (int b = 0; b < a && same < 0; b++) {
            if ((audiences >> b & 1) && memcmp(&props[a], &props[b], sizeof props[a]) == 0) same = b;
        }
        if (same >= 0) {
            *enc = entity->update[same];
            continue;
        }
        size_t start = bit_writer_bits(&rep->shared);
        bit_writer_write_uvar(&rep->shared, bits);
        bit_writer_write(&rep->shared, count, count_bits);
        for (int k = 0; k < ENTITY_STATE_MASK_WORDS; k++) {
            for (uint64_t m = props[a].words[k]; m != 0; m &= m - 1) {
                unsigned p = 64 * (unsigned)k + (unsigned)__builtin_ctzll(m);
                bit_writer_append_bits(&rep->shared, p, id_bits, values, values_bytes, at[p], len[p]);
            }
        }
        size_t end = bit_writer_bits(&rep->shared);
        if (end > UINT32_MAX) log_panic("replication: a tick's shared buffer outgrew 2^32 bits");
        /* Slack for replication__load_head and replication__put_tail. */
        bit_writer_reserve(&rep->shared, bit_writer_bytes(&rep->shared) + 24);
        enc->span = (replication_short_span){(uint32_t)start, (uint32_t)(end - start)};
        replication__load_head(bit_writer_data(&rep->shared), start, end - start, enc->head);
    }
}

/* The enter encoding of `audience`, made on first use this tick. */
static replication_short_span replication__enter_span(replication *rep, replication_entity *entity,
                                                      replication_audience audience) {
    if (entity->enter_tick != rep->tick) {
        entity->enter_tick = rep->tick;
        entity->enter_ready = 0;
    }
    if ((entity->enter_ready >> audience & 1) == 0) {
        const entity_def_class *cls = entity_state_class(entity->state);
        const entity_state_mask *masks = replication__masks(rep, entity->state);
        bit_writer_reset(&rep->scratch);
        bit_writer_write_bool(&rep->scratch, audience == REPLICATION_AUDIENCE_OWN);
        bit_writer_write(&rep->scratch, cls->id, rep->schema->class_bits);
        bit_writer_write_uvar(&rep->scratch, entity->entity_id);
        if (property_codec_encode_changes(&rep->scratch, entity->state, &masks[audience]) != 0)
            log_panic("replication: an audience mask names a property its class lacks");
        entity->enter[audience] = replication__commit_scratch(rep);
        entity->enter_ready |= (uint8_t)(1u << audience);
    }
    return entity->enter[audience];
}

replication_span replication_entity_span(replication *rep, replication_entity *entity, replication_audience audience,
                                         bool enter) {
    replication_span none = {0};
    if ((unsigned)audience >= REPLICATION_AUDIENCE_COUNT) return none;
    replication_short_span span;
    if (enter)
        span = replication__enter_span(rep, entity, audience);
    else if (entity->update[audience].tick == rep->tick)
        span = entity->update[audience].span;
    else
        return none;
    return (replication_span){span.start, span.bits};
}

size_t replication_append_change_list(const replication *rep, const replication_entity *entity,
                                      replication_audience audience, bit_writer *w) {
    if ((unsigned)audience >= REPLICATION_AUDIENCE_COUNT) return 0;
    const replication_encoding *enc = &entity->update[audience];
    if (enc->tick != rep->tick || enc->span.bits == 0) return 0;
    const uint8_t *shared = bit_writer_data(&rep->shared);
    size_t end = (size_t)enc->span.start + enc->span.bits;
    bit_reader r;
    bit_reader_init_bits(&r, shared, end);
    bit_reader_skip(&r, enc->span.start);
    uint64_t length;
    if (bit_reader_read_uvar(&r, &length) != 0 || length != bit_reader_remaining(&r))
        log_panic("replication: a span is not a length-prefixed change list");
    bit_writer_append_bits(w, 0, 0, shared, (end + 7) / 8, bit_reader_position(&r), (size_t)length);
    return (size_t)length;
}

/* ---- a witness's stream ------------------------------------------------ */

unsigned replication_alias_bits(uint32_t max_aliases) {
    return max_aliases > 1 ? property_codec_bits_for(max_aliases - 1) : 0;
}

static inline void replication__check_alias(uint32_t alias, unsigned alias_bits) {
    if (alias_bits > 32 || (alias_bits < 32 && (alias >> alias_bits) != 0))
        log_panic("replication: alias %u does not fit in %u bits", alias, alias_bits);
}

static size_t replication__append(const replication *rep, bit_writer *w, unsigned kind, uint32_t alias,
                                  unsigned alias_bits, replication_short_span span) {
    replication__check_alias(alias, alias_bits);
    size_t before = bit_writer_bits(w);
    bit_writer_append_bits(w, kind | (uint64_t)alias << REPLICATION__KIND_BITS, REPLICATION__KIND_BITS + alias_bits,
                           bit_writer_data(&rep->shared), bit_writer_bytes(&rep->shared), span.start, span.bits);
    return bit_writer_bits(w) - before;
}

/* Appends bits [pos, pos + n) of the shared buffer `src` to `w` in 64-bit
 * chunks: an unaligned word load (the shared buffer keeps 16 bytes of
 * slack) and a word-and-byte store per chunk. */
static void replication__put_tail(bit_writer *w, const uint8_t *src, size_t pos, size_t n) {
    while (n > 0) {
        const uint8_t *q = src + (pos >> 3);
        unsigned off = (unsigned)(pos & 7);
        uint64_t v = bit_stream_load_le64(q) >> off | ((uint64_t)q[8] << 1) << (63 - off);
        unsigned k = n < 64 ? (unsigned)n : 64;
        if (k < 64) v &= (UINT64_C(1) << k) - 1;
        unsigned d;
        uint8_t *p = bit_writer_tail(w, 9, &d);
        bit_stream_store_le64(p, (uint64_t)(p[0] & ((1u << d) - 1)) | v << d);
        p[8] = (uint8_t)((v >> 1) >> (63 - d)); /* 0 when nothing spills */
        bit_writer_advance(w, k);
        pos += k;
        n -= k;
    }
}

size_t replication_append_update(const replication *rep, const replication_entity *entity, bit_writer *w,
                                 uint32_t alias, unsigned alias_bits, bool is_owner, entity_def_detail detail) {
    replication_ref ref = {entity, alias, (uint8_t)replication_audience_for(is_owner, detail)};
    return replication_append_updates(rep, w, &ref, 1, alias_bits);
}

/* How many references ahead the batch loop prefetches: enough to cover a
 * miss to memory (~100 ns) at ~10 ns a record. */
#define REPLICATION__PREFETCH_AHEAD 8

size_t replication_append_updates(const replication *rep, bit_writer *w, const replication_ref *refs, size_t count,
                                  unsigned alias_bits) {
    /* The tick and the writer's position live in locals, since every store
     * into the stream (a char buffer, which may alias anything) would
     * otherwise make the compiler reload them, and room for every inline
     * record is reserved once. */
    const uint64_t tick = rep->tick;
    const unsigned hb = REPLICATION__KIND_BITS + alias_bits; /* 2..34 */
    const size_t record_bytes = (hb + REPLICATION_INLINE_BITS + 7) / 8 + 1;
    size_t start = bit_writer_bits(w), bits = start;
    unsigned d;
    bit_writer_tail(w, count * record_bytes + 3 * sizeof(uint64_t), &d);
    uint8_t *data = (uint8_t *)bit_writer_data(w);
    for (size_t i = 0; i < count; i++) {
        if (i + REPLICATION__PREFETCH_AHEAD < count) {
            const replication_ref *ahead = &refs[i + REPLICATION__PREFETCH_AHEAD];
            __builtin_prefetch(&ahead->entity->update[ahead->audience]);
        }
        const replication_ref *ref = &refs[i];
        if ((unsigned)ref->audience >= REPLICATION_AUDIENCE_COUNT)
            log_panic("replication: audience %u in a batch", (unsigned)ref->audience);
        replication__check_alias(ref->alias, alias_bits);
        const replication_encoding *enc = &ref->entity->update[ref->audience];
        /* Without branches on whether there is anything to send: whether an
         * entity changed for this audience follows no pattern a branch
         * predictor can learn, and a mispredicted branch cost more than the
         * rest of the append. `keep` is all ones when the record goes, zero
         * when it does not; the stores then write only zeros past the end,
         * which the writer's invariant wants anyway, and nothing advances. */
        size_t n = enc->tick == tick ? enc->span.bits : 0;
        uint64_t keep = -(uint64_t)(n != 0);
        /* Header then the inline head of the span as three words (at most
         * 34 + 128 bits), shifted to the writer's bit phase d (at most
         * 7 + 162 bits: still three words) and stored whole. */
        uint64_t header = REPLICATION__KIND_UPDATE | (uint64_t)ref->alias << REPLICATION__KIND_BITS;
        uint64_t v0 = (header | enc->head[0] << hb) & keep;
        uint64_t v1 = (enc->head[0] >> (64 - hb) | enc->head[1] << hb) & keep;
        uint64_t v2 = (enc->head[1] >> (64 - hb)) & keep;
        uint8_t *p = data + (bits >> 3);
        d = (unsigned)(bits & 7);
        uint64_t kept = (uint64_t)(p[0] & ((1u << d) - 1));
        /* (x >> 1) >> (63 - d) is x >> (64 - d), and 0 for d = 0. */
        bit_stream_store_le64(p, kept | v0 << d);
        bit_stream_store_le64(p + 8, v1 << d | (v0 >> 1) >> (63 - d));
        bit_stream_store_le64(p + 16, v2 << d | (v1 >> 1) >> (63 - d));
        if (n <= REPLICATION_INLINE_BITS) {
            bits += (hb + n) & (size_t)keep;
            continue;
        }
        /* A long change list: the rest of the span from the shared buffer,
         * then back to locals with room for the records still to come. */
        bit_writer_advance(w, bits + hb + REPLICATION_INLINE_BITS - bit_writer_bits(w));
        replication__put_tail(w, bit_writer_data(&rep->shared), enc->span.start + REPLICATION_INLINE_BITS,
                              n - REPLICATION_INLINE_BITS);
        bits = bit_writer_bits(w);
        bit_writer_tail(w, (count - i) * record_bytes + 3 * sizeof(uint64_t), &d);
        data = (uint8_t *)bit_writer_data(w);
    }
    bit_writer_advance(w, bits - bit_writer_bits(w));
    return bits - start;
}

size_t replication_append_enter(replication *rep, replication_entity *entity, bit_writer *w, uint32_t alias,
                                unsigned alias_bits, bool is_owner, entity_def_detail detail) {
    replication_short_span span = replication__enter_span(rep, entity, replication_audience_for(is_owner, detail));
    return replication__append(rep, w, REPLICATION__KIND_ENTER, alias, alias_bits, span);
}

size_t replication_append_leave(bit_writer *w, uint32_t alias, unsigned alias_bits) {
    replication__check_alias(alias, alias_bits);
    size_t before = bit_writer_bits(w);
    bit_writer_write(w, REPLICATION__KIND_EXT | REPLICATION__EXT_LEAVE << REPLICATION__KIND_BITS,
                     REPLICATION__KIND_BITS + REPLICATION__EXT_BITS);
    bit_writer_write(w, alias, alias_bits);
    return bit_writer_bits(w) - before;
}

size_t replication_append_move_header(bit_writer *w, uint32_t alias, unsigned alias_bits) {
    replication__check_alias(alias, alias_bits);
    // cppcheck-suppress badBitmaskCheck ; KIND_MOVE is 0: or-ing it in names the kind the header carries
    bit_writer_write(w, REPLICATION__KIND_MOVE | (uint64_t)alias << REPLICATION__KIND_BITS,
                     REPLICATION__KIND_BITS + alias_bits);
    return REPLICATION__KIND_BITS + alias_bits;
}

size_t replication_append_properties(replication *rep, const replication_entity *entity, bit_writer *w, uint32_t alias,
                                     unsigned alias_bits, const entity_state_mask *props) {
    if (entity_state_mask_empty(props)) return 0;
    replication__check_alias(alias, alias_bits);
    bit_writer_reset(&rep->scratch);
    if (property_codec_encode_changes(&rep->scratch, entity->state, props) != 0)
        log_panic("replication: a refresh names a property its class lacks");
    size_t n = bit_writer_bits(&rep->scratch);
    size_t before = bit_writer_bits(w);
    bit_writer_write(w, REPLICATION__KIND_UPDATE | (uint64_t)alias << REPLICATION__KIND_BITS,
                     REPLICATION__KIND_BITS + alias_bits);
    bit_writer_write_uvar(w, n);
    bit_writer_append_bits(w, 0, 0, bit_writer_data(&rep->scratch), bit_writer_bytes(&rep->scratch), 0, n);
    return bit_writer_bits(w) - before;
}

size_t replication_append_end(bit_writer *w) {
    size_t before = bit_writer_bits(w);
    bit_writer_write(w, REPLICATION__KIND_EXT, REPLICATION__KIND_BITS);
    bit_writer_write(w, REPLICATION__EXT_END, REPLICATION__EXT_BITS);
    bit_writer_align(w);
    return bit_writer_bits(w) - before;
}

/* ---- decoding ---------------------------------------------------------- */

/* Checks a change list of class `cls` whose ids must lie in `accept`,
 * storing nothing (the format is property_codec.c's). */
static int replication__check_changes(bit_reader *r, const entity_def_class *cls, const entity_state_mask *accept) {
    size_t n = cls->property_count;
    uint64_t count, id;
    if (bit_reader_read(r, property_codec_bits_for(n), &count) != 0) return PROPERTY_CODEC_ERROR_TRUNCATED;
    if (count > n) return PROPERTY_CODEC_ERROR_MALFORMED;
    unsigned id_bits = n > 0 ? property_codec_bits_for(n - 1) : 0;
    int64_t previous = -1;
    for (uint64_t i = 0; i < count; i++) {
        if (bit_reader_read(r, id_bits, &id) != 0) return PROPERTY_CODEC_ERROR_TRUNCATED;
        if (id >= n || !entity_state_mask_has(accept, (uint16_t)id)) return PROPERTY_CODEC_ERROR_UNEXPECTED_PROPERTY;
        if ((int64_t)id <= previous) return PROPERTY_CODEC_ERROR_MALFORMED;
        previous = (int64_t)id;
        int rc = property_codec_check(r, &cls->properties[id].type);
        if (rc != 0) return rc;
    }
    return 0;
}

static const entity_state_mask *replication__accept(const replication_schema *schema, const entity_def_class *cls,
                                                    bool owner) {
    return &schema->masks[cls->id][owner ? REPLICATION_AUDIENCE_OWN : REPLICATION_AUDIENCE_OTHERS_NEAR];
}

#define REPLICATION__FAIL(r, code) \
    do {                           \
        bit_reader_fail(r);        \
        return (code);             \
    } while (0)

/* One ENTER or UPDATE record after its alias: the length is read, the
 * whole record checked, then applied. */
static int replication__decode_body(bit_reader *r, const replication_schema *schema, unsigned kind, uint32_t alias,
                                    const replication_decode_callbacks *cb, void *ctx,
                                    replication_decode_stats *stats) {
    uint64_t length;
    if (bit_reader_read_uvar(r, &length) != 0 || length > bit_reader_remaining(r))
        REPLICATION__FAIL(r, REPLICATION_ERROR_TRUNCATED);
    size_t end = bit_reader_position(r) + (size_t)length;

    if (kind == REPLICATION__KIND_UPDATE) {
        bool owner = false;
        entity_state *state = cb->find(ctx, alias, &owner);
        if (state == NULL) {
            bit_reader_skip(r, (size_t)length);
            stats->discarded++;
            return 0;
        }
        const entity_def_class *cls = entity_state_class(state);
        if (cls->id >= schema->class_count) REPLICATION__FAIL(r, REPLICATION_ERROR_CLASS);
        const entity_state_mask *accept = replication__accept(schema, cls, owner);
        bit_reader check = *r;
        int rc = replication__check_changes(&check, cls, accept);
        if (rc != 0) REPLICATION__FAIL(r, rc);
        if (bit_reader_position(&check) != end) REPLICATION__FAIL(r, REPLICATION_ERROR_MALFORMED);
        entity_state_mask changed;
        rc = property_codec_decode_changes(r, state, accept, &changed);
        if (rc != 0) log_panic("replication: a checked update failed: %s", property_codec_strerror(rc));
        stats->updates++;
        if (cb->changed != NULL) cb->changed(ctx, alias, state, &changed);
        return 0;
    }

    /* ENTER */
    bit_reader check = *r;
    bool owner;
    uint64_t class_id;
    if (bit_reader_read_bool(&check, &owner) != 0 || bit_reader_read(&check, schema->class_bits, &class_id) != 0)
        REPLICATION__FAIL(r, REPLICATION_ERROR_MALFORMED);
    if (class_id >= schema->class_count) REPLICATION__FAIL(r, REPLICATION_ERROR_MALFORMED);
    uint64_t entity_id;
    if (bit_reader_read_uvar(&check, &entity_id) != 0 || entity_id == 0)
        REPLICATION__FAIL(r, REPLICATION_ERROR_MALFORMED);
    const entity_def_class *cls = entity_def_registry_class(schema->registry, (uint16_t)class_id);
    const entity_state_mask *accept = replication__accept(schema, cls, owner);
    bit_reader body = check;
    int rc = replication__check_changes(&check, cls, accept);
    if (rc != 0) REPLICATION__FAIL(r, rc);
    if (bit_reader_position(&check) != end) REPLICATION__FAIL(r, REPLICATION_ERROR_MALFORMED);
    entity_state *state = cb->enter(ctx, alias, entity_id, cls, owner);
    if (state == NULL) {
        bit_reader_skip(r, (size_t)length);
        stats->discarded++;
        return 0;
    }
    if (entity_state_class(state) != cls) REPLICATION__FAIL(r, REPLICATION_ERROR_CLASS);
    entity_state_mask changed;
    rc = property_codec_decode_changes(&body, state, accept, &changed);
    if (rc != 0) log_panic("replication: a checked enter failed: %s", property_codec_strerror(rc));
    *r = body;
    stats->enters++;
    if (cb->changed != NULL) cb->changed(ctx, alias, state, &changed);
    return 0;
}

int replication_decode_stream(bit_reader *r, const replication_schema *schema, unsigned alias_bits,
                              const replication_decode_callbacks *cb, void *ctx, replication_decode_stats *stats) {
    replication_decode_stats ignored;
    if (stats == NULL) stats = &ignored;
    memset(stats, 0, sizeof *stats);
    for (;;) {
        uint64_t kind, alias;
        if (bit_reader_read(r, REPLICATION__KIND_BITS, &kind) != 0) return REPLICATION_ERROR_TRUNCATED;
        if (kind == REPLICATION__KIND_EXT) {
            uint64_t ext;
            if (bit_reader_read(r, REPLICATION__EXT_BITS, &ext) != 0) return REPLICATION_ERROR_TRUNCATED;
            if (ext == REPLICATION__EXT_LEAVE) {
                if (bit_reader_read(r, alias_bits, &alias) != 0) return REPLICATION_ERROR_TRUNCATED;
                stats->leaves++;
                if (cb->leave != NULL) cb->leave(ctx, (uint32_t)alias);
                continue;
            }
            if (ext != REPLICATION__EXT_END) REPLICATION__FAIL(r, REPLICATION_ERROR_KIND);
            /* Only zero padding to the byte boundary may follow. */
            size_t left = bit_reader_remaining(r);
            uint64_t pad;
            if (left >= 8 || bit_reader_read(r, (unsigned)left, &pad) != 0 || pad != 0)
                REPLICATION__FAIL(r, REPLICATION_ERROR_MALFORMED);
            return 0;
        }
        if (bit_reader_read(r, alias_bits, &alias) != 0) return REPLICATION_ERROR_TRUNCATED;
        if (kind == REPLICATION__KIND_MOVE) {
            if (cb->move == NULL) REPLICATION__FAIL(r, REPLICATION_ERROR_KIND);
            int rc = cb->move(ctx, (uint32_t)alias, r);
            if (rc > 0) {
                stats->moves++;
            } else if (rc == 0) {
                stats->discarded++;
            } else {
                bit_reader_fail(r);
                return rc;
            }
            continue;
        }
        int rc = replication__decode_body(r, schema, (unsigned)kind, (uint32_t)alias, cb, ctx, stats);
        if (rc != 0) return rc;
    }
}

const char *replication_strerror(int code) {
    switch (code) {
        case REPLICATION_ERROR_TRUNCATED:
            return "stream ends inside a record or before END";
        case REPLICATION_ERROR_KIND:
            return "reserved record kind";
        case REPLICATION_ERROR_MALFORMED:
            return "malformed record";
        case REPLICATION_ERROR_CLASS:
            return "entity state of the wrong class";
        default:
            return property_codec_strerror(code);
    }
}
