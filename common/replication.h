/* replication.h -- "pack once", as Source does it: each tick, every changed entity is
 * encoded once per audience into one shared bit buffer, and each witness
 * builds its client's stream by bit-copying the shared encodings it needs;
 * and the decoder that applies such a stream to client-side entity states.
 *
 * Audiences, computed once per class from entity_def's audience table. The
 * cell only sends what the cell holds (audience.on_cell): BASE_AND_CLIENT
 * properties go from the base to the own client, never through here.
 *
 *   OWN            on_cell && to_own_client: the entity's own client
 *   OTHERS_NEAR    on_cell && to_other_clients, every detail level
 *   OTHERS_MEDIUM  ... with detail medium or far
 *   OTHERS_FAR     ... with detail far only
 *   GHOSTS         to_ghosts: the entity's ghosts on other cells (not sent
 *                  to clients; for the multi-cell piece)
 *
 * The stream format is documented at the top of replication.c.
 *
 * This module does not decide who sees whom, at which detail level, or in
 * which order records are sent (the witness and its budget do). It frames
 * MOVE records, whose content is volatile_codec's. It does not
 * clear dirty sets: the caller clears them once every entity is packed.
 */
#ifndef TESSERA_REPLICATION_H
#define TESSERA_REPLICATION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bit_stream.h"
#include "entity_def.h"
#include "entity_state.h"

/* Error codes of the decoder, distinct from bit_stream's (-1),
 * entity_state's (-1x) and property_codec's (-2x), which it also returns
 * for the content of a record (PROPERTY_CODEC_ERROR_UNEXPECTED_PROPERTY for
 * a property outside the audience, _RANGE, _INVALID, _MALFORMED). */
#define REPLICATION_ERROR_TRUNCATED (-30) /* the stream ends inside a record or before END */
#define REPLICATION_ERROR_KIND (-31)      /* a reserved record kind */
/* A record whose length does not match its content, a class id the
 * registry does not have, or bits after END other than zero padding. */
#define REPLICATION_ERROR_MALFORMED (-32)
/* The enter callback returned a state of another class than the record's. */
#define REPLICATION_ERROR_CLASS (-33)

typedef enum replication_audience {
    REPLICATION_AUDIENCE_OWN = 0,
    REPLICATION_AUDIENCE_OTHERS_NEAR = 1,
    REPLICATION_AUDIENCE_OTHERS_MEDIUM = 2,
    REPLICATION_AUDIENCE_OTHERS_FAR = 3,
    REPLICATION_AUDIENCE_GHOSTS = 4,
} replication_audience;

#define REPLICATION_AUDIENCE_COUNT 5

/* The audience of a client: the owner gets OWN whatever its distance;
 * another client gets OTHERS_<detail> for the detail level its distance
 * allows. */
static inline replication_audience replication_audience_for(bool is_owner, entity_def_detail detail) {
    if (is_owner) return REPLICATION_AUDIENCE_OWN;
    return detail == ENTITY_DEF_DETAIL_NEAR     ? REPLICATION_AUDIENCE_OTHERS_NEAR
           : detail == ENTITY_DEF_DETAIL_MEDIUM ? REPLICATION_AUDIENCE_OTHERS_MEDIUM
                                                : REPLICATION_AUDIENCE_OTHERS_FAR;
}

/* ---- schema: audience masks per class ---------------------------------- */

/* The audience masks of every class of a registry, computed once. Used by
 * the packer and the decoder. The registry must outlive it. */
typedef struct replication_schema replication_schema;

/* Never NULL (out of memory stops the process). */
replication_schema *replication_schema_create(const entity_def_registry *registry);
/* NULL is allowed. */
void replication_schema_free(replication_schema *schema);
/* The properties of class `class_id` that `audience` receives, or NULL for
 * an unknown class or audience. Owned by the schema. */
const entity_state_mask *replication_schema_mask(const replication_schema *schema, uint16_t class_id,
                                                 replication_audience audience);

/* ---- packing ----------------------------------------------------------- */

/* Where one encoding lies in the shared buffer of the current tick. `bits`
 * is 0 when there is nothing to send. */
typedef struct replication_span {
    size_t start; /* first bit */
    size_t bits;
} replication_span;

/* Spans of up to this many bits are also kept inline in the entity's
 * record, so that a witness appends one with three word stores and never
 * touches the shared buffer: 128 is two words, and holds the UPDATE of a
 * typical change list (a few small properties: bench-replication's median
 * is 66 bits with the length prefix, its 90th percentile 159). */
#define REPLICATION_INLINE_BITS 128

/* A span of the current tick's shared buffer, in the entity's record: 32
 * bits are enough (a tick's shared buffer of 512 MiB stops the process). */
typedef struct replication_short_span {
    uint32_t start, bits;
} replication_short_span;

/* One audience's UPDATE encoding: the tick it was packed for, its span in
 * the shared buffer and, when span.bits <= REPLICATION_INLINE_BITS, the
 * same bits in `head` (bit i of the span is bit i % 64 of head[i / 64];
 * bits past the span are zero). 32 bytes: a witness's append reads one
 * cache line of the entity's record (when the record is 32-byte aligned).
 * Private to replication.c. */
typedef struct replication_encoding {
    uint64_t head[2];
    uint64_t tick; /* 0: never packed */
    replication_short_span span;
} replication_encoding;

/* The packer's per-entity record, owned by the caller (embed it in the
 * cell's entity; 32- or 64-byte alignment keeps each append to one cache
 * line). Plain data, no resources: nothing to close. The spans are valid
 * for the tick stamped in them only. The fields are private. */
typedef struct replication_entity {
    replication_encoding update[REPLICATION_AUDIENCE_COUNT]; /* first: see above */
    const entity_state *state;
    uint64_t enter_tick; /* tick of the `enter` spans marked in enter_ready */
    replication_short_span enter[REPLICATION_AUDIENCE_COUNT];
    uint8_t enter_ready; /* bit a: enter[a] is encoded for enter_tick */
    uint64_t entity_id;  /* sent in ENTER records */
} replication_entity;

/* Starts the record of entity `entity_id` (not 0) whose state is `state`
 * (which must outlive the record, and belong to a class of the packer's
 * registry). */
void replication_entity_init(replication_entity *entity, const entity_state *state, uint64_t entity_id);

typedef struct replication replication;

/* A packer over `schema` (which must outlive it). Never NULL. */
replication *replication_create(const replication_schema *schema);
/* NULL is allowed. */
void replication_free(replication *rep);

/* Starts tick `tick` (strictly greater than the previous one, and not 0):
 * empties the shared buffer; every span of an earlier tick is stale. */
void replication_begin_tick(replication *rep, uint64_t tick);

/* Encodes the dirty properties of `entity`'s state once per audience
 * (dirty AND audience mask), each as a length-prefixed change list, into
 * the shared buffer; audiences with the same properties share one span, and
 * one without any gets an empty span. Call it once per tick for each entity
 * whose dirty set is not empty, before any append; an entity not packed
 * this tick sends nothing. Does not clear the dirty set. */
void replication_pack(replication *rep, replication_entity *entity);

/* replication_pack for the audiences in `audiences` only (bit a for
 * audience a): a cell need not encode OWN for an entity without a client,
 * or GHOSTS when it has no neighbours. The others send nothing this tick. */
#define REPLICATION_ALL_AUDIENCES ((1u << REPLICATION_AUDIENCE_COUNT) - 1)
#define REPLICATION_OTHERS_AUDIENCES                                                     \
    (1u << REPLICATION_AUDIENCE_OTHERS_NEAR | 1u << REPLICATION_AUDIENCE_OTHERS_MEDIUM | \
     1u << REPLICATION_AUDIENCE_OTHERS_FAR)
void replication_pack_audiences(replication *rep, replication_entity *entity, unsigned audiences);

/* The shared buffer of the current tick and a span of one entity (for the
 * ghost pipeline): `update` or, when `enter`, the enter encoding (encoded
 * on demand). The span is empty when stale. */
const uint8_t *replication_shared_data(const replication *rep);
replication_span replication_entity_span(replication *rep, replication_entity *entity, replication_audience audience,
                                         bool enter);

/* Appends the change list of `entity`'s UPDATE encoding for `audience`
 * this tick, without its length prefix: property_codec's change list, as a
 * GhostState carries it. Returns the bits appended, 0 when the entity was
 * not packed for that audience this tick or nothing changed for it. */
size_t replication_append_change_list(const replication *rep, const replication_entity *entity,
                                      replication_audience audience, bit_writer *w);

/* ---- a witness's stream ------------------------------------------------ */

/* Bits of an alias field for an alias table of `max_aliases` aliases
 * (0 .. max_aliases-1): both ends must agree on it. */
unsigned replication_alias_bits(uint32_t max_aliases);

/* Appends to `w` the UPDATE record of `entity` for a client that is its
 * owner, or sees it at `detail`: the kind, `alias` in `alias_bits` bits,
 * and a bit copy of the shared encoding (nothing is re-encoded). Appends
 * nothing when the entity was not packed this tick or nothing changed for
 * that audience. Returns the bits appended. An alias wider than alias_bits
 * is a caller bug (stops the process). */
size_t replication_append_update(const replication *rep, const replication_entity *entity, bit_writer *w,
                                 uint32_t alias, unsigned alias_bits, bool is_owner, entity_def_detail detail);

/* One entity a witness sends its shared UPDATE to: the record, the alias
 * and the audience (replication_audience_for of its owner flag and detail
 * level). */
typedef struct replication_ref {
    const replication_entity *entity;
    uint32_t alias;
    uint8_t audience;
} replication_ref;

/* replication_append_update for each of `count` references, in order, in
 * one loop: no call per record, and the records a few references ahead are
 * prefetched. This is the witness's hot path (bench-replication). Returns
 * the bits appended. */
size_t replication_append_updates(const replication *rep, bit_writer *w, const replication_ref *refs, size_t count,
                                  unsigned alias_bits);

/* Appends the ENTER record of `entity` for that audience: every property of
 * the audience with its current value (not only the dirty ones), the class
 * and whether the receiver owns it. The encoding is made once per tick per
 * audience, on the first call, and shared by later ones. Returns the bits
 * appended (never 0). */
size_t replication_append_enter(replication *rep, replication_entity *entity, bit_writer *w, uint32_t alias,
                                unsigned alias_bits, bool is_owner, entity_def_detail detail);

/* Appends an UPDATE record carrying the CURRENT values of `props` (which
 * must lie within the receiver's audience), encoded for this one witness:
 * for what pack-once cannot share, a near-only property an observer gets
 * when it comes near, or changes the budget held back. Returns the bits
 * appended, 0 when `props` is empty. */
size_t replication_append_properties(replication *rep, const replication_entity *entity, bit_writer *w, uint32_t alias,
                                     unsigned alias_bits, const entity_state_mask *props);

/* Appends a LEAVE record for `alias`. Returns the bits appended. */
size_t replication_append_leave(bit_writer *w, uint32_t alias, unsigned alias_bits);

/* Appends the header of a MOVE record for `alias`; the caller appends one
 * volatile_codec record right after it. Returns the bits appended. */
size_t replication_append_move_header(bit_writer *w, uint32_t alias, unsigned alias_bits);

/* Appends the END record and zero padding to a byte boundary: a stream is
 * complete only with it. Returns the bits appended. */
size_t replication_append_end(bit_writer *w);

/* ---- decoding (the client) --------------------------------------------- */

/* What the decoder asks of the client. Callbacks fire only for records
 * that passed every check, in stream order, and never after
 * replication_decode_stream returned. */
typedef struct replication_decode_callbacks {
    /* An ENTER for `alias`: return a fresh state of class `cls` (holding
     * the defaults: properties outside the audience are not sent) that the
     * decoder fills, or NULL to discard the record. The client remembers
     * `is_owner` for the alias. The state must stay valid until the next
     * record. */
    entity_state *(*enter)(void *ctx, uint32_t alias, uint64_t entity_id, const entity_def_class *cls, bool is_owner);
    /* An UPDATE: the state that `alias` names, with *is_owner as it was
     * entered, or NULL for an unknown (or stale) alias: the record is then
     * skipped. */
    entity_state *(*find)(void *ctx, uint32_t alias, bool *is_owner);
    /* A MOVE for `alias`: read exactly one volatile_codec record from `r`
     * (for an unknown alias, read it and drop it). Return 1 when applied, 0
     * when discarded, or a negative error (a broken record: decoding stops
     * with it). NULL makes a MOVE an error. */
    int (*move)(void *ctx, uint32_t alias, bit_reader *r);
    /* A LEAVE for `alias` (possibly unknown: the client ignores it). May be
     * NULL. */
    void (*leave)(void *ctx, uint32_t alias);
    /* After an ENTER or UPDATE was applied: the properties whose value
     * changed. May be NULL. */
    void (*changed)(void *ctx, uint32_t alias, entity_state *state, const entity_state_mask *changed);
} replication_decode_callbacks;

typedef struct replication_decode_stats {
    uint32_t enters, updates, moves, leaves; /* records applied (leaves: seen) */
    uint32_t discarded;                      /* records skipped: unknown alias, refused enter */
} replication_decode_stats;

/* Reads a stream up to its END record and applies it. Each record is
 * checked whole before anything of it is applied (or any callback fires
 * for it): properties outside the receiver's audience (OWN for an owned
 * entity, OTHERS_NEAR otherwise), values outside their type, a length that
 * does not match the content. On an error, decoding stops: the records
 * before it stay applied, `r` is failed, and a REPLICATION_ERROR_* or
 * PROPERTY_CODEC_ERROR_* is returned (the client should drop the
 * connection). Returns 0 once END was read. `stats` may be NULL. Never
 * allocates (beyond what a state needs for a longer string). */
int replication_decode_stream(bit_reader *r, const replication_schema *schema, unsigned alias_bits,
                              const replication_decode_callbacks *cb, void *ctx, replication_decode_stats *stats);

const char *replication_strerror(int code);

#endif
