/* witness_budget.h -- one client's bandwidth budget: each tick, decides which
 * of its witness's pending entity records go out, and in which order.
 *
 * It decides; it does not encode, send, or know entity ids. The witness
 * offers an alias when it has something to send (an enter or leave record,
 * a property delta, a movement update), with the entity's distance to the
 * viewer and the bytes the record would take now. An offered alias stays
 * pending until it is selected (or forgotten): the witness offers again
 * only when something new happens to it, so a tick's work follows what
 * changed and what is due, not the size of the view. Each tick the
 * scheduler answers with the aliases to send, in send order, and charges
 * their bytes to the budget. It keeps its own per-alias memory (when each
 * alias was last sent, since when it has been pending) in a dense array
 * indexed by alias, which the witness clears with witness_budget_forget()
 * when the entity leaves view.
 *
 * Rules (issue 4, "Bandwidth budget"):
 *   - Mandatory records (enter, leave) always go, first, in offer order,
 *     whatever the budget. Bytes beyond the credit become debt.
 *   - Nothing starves: an alias pending for tick_hz ticks without being
 *     sent is forced, and goes like a mandatory record (it can make debt
 *     too). So the gap between two sends of an alias that is continuously
 *     pending is at most tick_hz ticks: one second.
 *   - Everything else competes for the credit in priority order, nearer
 *     and staler first, and an alias is only a candidate once its minimum
 *     interval for its distance has passed since its last send (see
 *     witness_budget.c for the curve, the priority and the carry-over).
 *     Only the candidates of the tick are ranked, never the whole view.
 *   - Latest state wins: a record not selected is not queued. The alias
 *     stays pending, and the witness writes it from its state then current
 *     when it is selected.
 *   - While held (witness_budget_hold: the client is not reading), only
 *     mandatory records go; on release every pending alias's second starts
 *     again, so what waited is spread by priority rather than all forced.
 *
 * Per tick:  witness_budget_begin_tick, witness_budget_offer for what is new,
 * witness_budget_select, then optionally witness_budget_commit for records
 * whose real size differs from the offer (or were not sent). After warm-up
 * (the largest number of pending aliases seen) no call allocates.
 */
#ifndef TESSERA_WITNESS_BUDGET_H
#define TESSERA_WITNESS_BUDGET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Error codes. -5x: distinct from the other cellapp modules' codes. */
#define WITNESS_BUDGET_ERROR_ARGUMENT (-50)     /* alias out of range, NaN distance */
#define WITNESS_BUDGET_ERROR_SEQUENCE (-51)     /* call out of begin/offer/select order */
#define WITNESS_BUDGET_ERROR_DUPLICATE (-52)    /* alias already offered this tick */
#define WITNESS_BUDGET_ERROR_SPACE (-53)        /* output array too small; nothing selected */
#define WITNESS_BUDGET_ERROR_NOT_SELECTED (-54) /* commit for an alias not selected this tick */

typedef struct witness_budget witness_budget;

typedef struct witness_budget_config {
    /* The client's budget. 0 is allowed: only mandatory and forced records
     * go, all of it as debt. */
    uint32_t bytes_per_second;
    /* Ticks per second, 1..1000. Also the starvation bound, in ticks. */
    uint32_t tick_hz;
    /* Aliases 0 .. max_aliases-1 may be offered (the alias table's size). */
    uint32_t max_aliases;
    /* Most unspent credit carried into the next tick; 0 picks the default,
     * bytes_per_second / 4 (why: witness_budget.c). */
    uint32_t carry_max_bytes;
    /* At or nearer than near_distance an alias may be sent every tick; at
     * or beyond far_distance once a second; linear in between. 0 <= near <
     * far, both finite. */
    float near_distance;
    float far_distance;
} witness_budget_config;

typedef struct witness_budget_stats {
    uint64_t bytes_spent;     /* every byte charged, lifetime (after commits) */
    uint64_t mandatory_bytes; /* ... of which mandatory records */
    uint64_t forced_bytes;    /* ... of which forced (starvation) records */
    uint64_t sent_count;      /* records selected, lifetime */
    uint64_t mandatory_count;
    uint64_t forced_count;
    uint64_t skipped_count; /* pending aliases not selected, per tick, lifetime */
    uint64_t debt;          /* bytes owed now, paid back from later ticks */
    uint64_t credit;        /* unspent bytes available now */
} witness_budget_stats;

/* A scheduler for one client. NULL on a bad config (see the field
 * comments). Free with witness_budget_free (NULL is fine). */
witness_budget *witness_budget_create(const witness_budget_config *config);
void witness_budget_free(witness_budget *budget);

/* Starts tick `tick` (a tick counter, strictly greater than the previous
 * call's; gaps are allowed and earn their ticks' allowance, within the
 * carry cap). Adds the tick's allowance to the credit or pays it against
 * the debt, and discards the previous tick's offers.
 * Returns 0, or WITNESS_BUDGET_ERROR_SEQUENCE if `tick` does not advance. */
int witness_budget_begin_tick(witness_budget *budget, uint64_t tick);

/* Offers `alias`: it has a record of `bytes` bytes to send, and is
 * `distance` away from the viewer (negative counts as 0). Mandatory records
 * are enter and leave. The alias stays pending until selected; offering a
 * pending alias again (at most once a tick) updates its distance and size,
 * and a mandatory offer makes it mandatory. Its staleness counts from the
 * first offer after its last send.
 * Returns 0, or WITNESS_BUDGET_ERROR_ARGUMENT, _DUPLICATE (offered twice in
 * one tick), or _SEQUENCE (not between begin_tick and select). */
int witness_budget_offer(witness_budget *budget, uint32_t alias, float distance, uint32_t bytes, bool mandatory);

/* Chooses this tick's records: writes their aliases to `out` in send order
 * (mandatory in offer order, then forced by priority, then the rest: by
 * priority when the credit does not cover them all, otherwise all of them,
 * unranked), sets *count, charges their offered bytes, and records them as
 * sent. `out` needs room for every record selected; the number of offers
 * this tick always suffices. Returns 0; WITNESS_BUDGET_ERROR_SPACE if
 * `capacity` is too small (nothing is selected or charged; call again with
 * more room); _SEQUENCE if not called once, after begin_tick. */
int witness_budget_select(witness_budget *budget, uint32_t *out, uint32_t capacity, uint32_t *count);

/* Corrects the charge for `alias`, selected this tick, to the bytes really
 * sent. 0 means it was not sent after all (say, TCP backpressure): the
 * alias keeps its staleness, as if it had been skipped. Returns 0, or
 * WITNESS_BUDGET_ERROR_NOT_SELECTED / _ARGUMENT. */
int witness_budget_commit(witness_budget *budget, uint32_t alias, uint32_t bytes_sent);

/* Forgets everything about `alias` (the entity left view; the alias may
 * later name another entity): it is no longer pending, and an offer of it
 * this tick, if select has not run yet, is withdrawn. Idempotent;
 * out-of-range aliases are ignored. */
void witness_budget_forget(witness_budget *budget, uint32_t alias);

/* The witness has nothing to send for `alias` after all: it is no longer
 * pending, and if it was selected this tick the send is undone and its
 * charge refunded (its history stays). Idempotent. */
void witness_budget_withdraw(witness_budget *budget, uint32_t alias);

/* Starts loading the budget's memory of aliases[0, count), which the
 * caller is about to offer or commit: a witness works a batch of pairs at
 * a time, and its budget's memory is as cold as its slots. Only a hint. */
void witness_budget_prefetch(const witness_budget *budget, const uint32_t *aliases, size_t count);

/* Whether `alias` waits to be sent (offered and not yet selected). */
bool witness_budget_is_pending(const witness_budget *budget, uint32_t alias);
/* Aliases waiting now. */
uint32_t witness_budget_pending_count(const witness_budget *budget);

/* Holds (true) or releases the budget: while held only mandatory records
 * are selected. Releasing restarts every pending alias's second at the
 * current tick. */
void witness_budget_hold(witness_budget *budget, bool held);

void witness_budget_get_stats(const witness_budget *budget, witness_budget_stats *out);

/* What the budget remembers, for moving a client's witness to another
 * cellapp: its tick, credit (negative: debt) and allowance remainder, and
 * per alias the history below, all in the budget's own tick counter. Save
 * and restore between ticks (not between begin_tick and select). */
typedef struct witness_budget_alias_state {
    bool has_sent;
    uint64_t last_sent;
    bool has_offered; /* pending: offered and not sent since */
    uint64_t pending_since;
    uint64_t last_offered;
    /* When pending: the latest offer, and the alias's place in the pending
     * list (restore them in this order to choose exactly as before). */
    uint32_t offered_bytes;
    float offered_distance;
    uint32_t pending_order;
} witness_budget_alias_state;

void witness_budget_save(const witness_budget *budget, uint64_t *tick, int64_t *credit, uint64_t *remainder);
/* The history of `alias` (all zero if it has none). */
void witness_budget_alias_save(const witness_budget *budget, uint32_t alias, witness_budget_alias_state *out);
/* Sets the counters; the next begin_tick must pass a later tick. */
void witness_budget_restore(witness_budget *budget, uint64_t tick, int64_t credit, uint64_t remainder);
/* Sets the history of `alias`; a pending one is pending again, with its
 * latest offer (restore pending aliases in their pending_order). Returns 0,
 * or WITNESS_BUDGET_ERROR_ARGUMENT for an alias out of range. */
int witness_budget_alias_restore(witness_budget *budget, uint32_t alias, const witness_budget_alias_state *state);

/* The minimum interval, in ticks, between two non-forced sends of an entity
 * at `distance`: 1 .. tick_hz. Exposed for the tests and the witness. */
uint32_t witness_budget_interval(const witness_budget *budget, float distance);

#endif
