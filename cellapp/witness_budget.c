/* witness_budget.c -- the per-client bandwidth scheduler: credit, debt, and
 * the choice of which offered records go this tick. It owns the per-alias
 * send history; it does not own the records, their encoding, or the socket.
 *
 * Credit. The budget is a token bucket refilled by bytes_per_second /
 * tick_hz per tick (the remainder of the division is carried, so N ticks
 * earn exactly floor(bytes_per_second * N / tick_hz)). Unspent credit
 * carries over, capped at carry_max_bytes, by default a quarter second of
 * budget. Why a quarter second: the cap is how much the scheduler may burst
 * after a quiet spell, and a burst lands in the client's TCP send buffer
 * ahead of later movement, which is exactly the stale movement the issue
 * says never to queue; a full second's cap would let a 10 Hz client take
 * 11 ticks' worth in one tick. A quarter second (625 B at 20 kbit/s) still
 * lets a record two or three ticks' allowance large be saved up for, and
 * any one-second window stays within 1.25x the budget (plus debt).
 *
 * Debt. Mandatory and forced records go even when the credit does not
 * cover them; the credit goes negative, and later ticks' allowances pay it
 * back before anything optional is sent. There is no cap on debt: capping
 * it would forgive bytes and break the budget. If the forced floor (every
 * pending alias once a second) costs more than the budget, debt grows
 * without bound and only mandatory and forced records go; the stats show
 * it, and the config is wrong, not the scheduler.
 *
 * Distance curve. An alias at distance d may be sent (non-forced) once its
 * minimum interval has passed since its last send:
 *
 *   d <= near:          1 tick (every tick)
 *   near < d < far:     1 + floor((tick_hz - 1) * (d - near) / (far - near))
 *   d >= far:           tick_hz ticks (once a second, when it is forced
 *                       anyway)
 *
 * Staleness. The ticks the client's copy has been out of date: counted from
 * the first offer after the alias's last send (an offer starts a run of
 * pending ticks; only a send ends it). An alias pending since its last send
 * at tick s has staleness t - s at tick t, and is forced when its staleness
 * reaches tick_hz: the gap between sends is then at most tick_hz ticks.
 *
 * Work per tick. Pending aliases sit in a dense list; select walks it once,
 * with integer tests only, to find the tick's candidates (mandatory,
 * forced, or past their interval), and ranks those alone. An alias inside
 * its interval costs one comparison; an alias with nothing pending costs
 * nothing.
 *
 * Priority among the non-forced candidates: staleness / interval, highest
 * first ("how many of its own intervals it is overdue"), so at equal
 * staleness the nearer goes first, and a far alias overtakes a near one
 * once it is overdue by more of its intervals. Ties: nearer first, then
 * lower alias, so the order is a total order and the result is
 * deterministic. The same order ranks the forced records among themselves.
 * Candidates are taken greedily in that order: one that does not fit the
 * remaining credit is skipped and smaller ones after it may still go (it is
 * forced within the second anyway). When the credit covers every optional
 * candidate there is nothing to decide: they all go, unranked. When it does
 * not, they are ranked in a heap, popped only while the credit left can
 * still pay for the smallest of them (witness_budget_choose).
 */
#include "witness_budget.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

/* Why 16: the arrays grow on demand, and a tick's candidates are the few
 * aliases that came due, not the view (the pending list, which follows
 * the view under load, grows to it once). */
#define WITNESS_BUDGET_INITIAL_CANDIDATES 16
#define WITNESS_BUDGET_NOT_PENDING UINT32_MAX

typedef enum witness_budget_phase {
    WITNESS_BUDGET_PHASE_IDLE = 0, /* created, no tick begun yet */
    WITNESS_BUDGET_PHASE_OFFERING, /* after begin_tick: offers accepted */
    WITNESS_BUDGET_PHASE_SELECTED, /* after select: commits accepted until the next begin_tick */
} witness_budget_phase;

typedef enum witness_budget_class {
    WITNESS_BUDGET_CLASS_SKIPPED = 0, /* not sent this tick */
    WITNESS_BUDGET_CLASS_MANDATORY,   /* enter or leave */
    WITNESS_BUDGET_CLASS_FORCED,      /* pending for a second: the starvation bound */
    WITNESS_BUDGET_CLASS_OPTIONAL,    /* won its place on priority */
} witness_budget_class;

/* What the scheduler remembers of one alias. */
typedef struct witness_budget_alias {
    /* Ticks are kept as their low 32 bits (witness_budget_widen gives the
     * whole tick back): 13 years at 10 Hz before two ticks share them, and
     * an entry half the size for every alias of every client. */
    uint32_t last_sent;      /* tick of the last send; valid if has_sent */
    uint32_t pending_since;  /* first tick of the current run of pending ticks */
    uint32_t last_offered;   /* tick of the latest offer; valid if has_offered */
    uint32_t selected_tick;  /* tick it was last selected in (for commit) */
    uint32_t listed_tick;    /* tick + 1 when it was last made a candidate */
    uint32_t restored_order; /* its place in the pending list it was saved from */
    uint32_t pending_index;  /* index in the pending list, or WITNESS_BUDGET_NOT_PENDING */
    uint32_t candidate;      /* index into candidates when selected_tick is this tick */
    uint32_t bytes;          /* the latest offer's size */
    uint32_t interval;       /* minimum ticks between non-forced sends, from the latest distance */
    float distance;          /* the latest offer's distance */
    bool has_sent;
    bool has_offered;
    bool mandatory; /* pending as an enter or leave */
} witness_budget_alias;

/* A pending alias as the per-tick pass reads it: a copy of what decides
 * whether it is a candidate, kept next to its neighbours so the pass never
 * looks an alias up. */
typedef struct witness_budget_waiting {
    uint32_t alias;
    bool mandatory;
    uint64_t forced_at;   /* pending_since + tick_hz - 1: staleness reaches tick_hz */
    uint64_t eligible_at; /* last_sent + interval, or 0 if never sent */
} witness_budget_waiting;

/* One candidate of this tick. */
typedef struct witness_budget_candidate {
    uint32_t alias;
    uint32_t bytes; /* offered; after select, what is charged */
    float distance;
    uint32_t interval;
    uint64_t staleness; /* >= 1 */
    witness_budget_class class;
    /* The alias's history before select marked it sent, for commit(0). */
    uint32_t previous_last_sent;
    uint32_t previous_pending_since;
    bool previous_has_sent;
    bool mandatory;
} witness_budget_candidate;

struct witness_budget {
    witness_budget_config config;
    witness_budget_phase phase;
    uint64_t tick;
    int64_t credit;               /* negative: debt */
    uint64_t allowance_remainder; /* bytes_per_second * ticks mod tick_hz */
    bool held;                    /* only mandatory records go */
    double interval_scale;        /* (tick_hz - 1) / (far_distance - near_distance) */
    /* Per-alias memory, grown on demand up to max_aliases: aliases are
     * handed out lowest first, so it follows the largest view the client
     * has had rather than the table's size. */
    witness_budget_alias *aliases;
    uint32_t alias_capacity;
    /* Aliases pending, in no particular order (swap-removed). */
    witness_budget_waiting *pending;
    uint32_t pending_count, pending_capacity;
    /* Mandatory offers since the last select, in offer order (they are also
     * in `pending`, flagged mandatory; select takes them all). */
    uint32_t *mandatory;
    uint32_t mandatory_count, mandatory_capacity;
    witness_budget_candidate *candidates;
    uint32_t candidate_count, candidate_capacity;
    uint32_t *order;            /* candidate indices being ranked */
    uint32_t *scratch;          /* merge sort buffer */
    witness_budget_stats stats; /* debt and credit filled in on read */
};

witness_budget *witness_budget_create(const witness_budget_config *config) {
    if (!config || config->tick_hz < 1 || config->tick_hz > 1000) return NULL;
    if (config->max_aliases == 0 || config->max_aliases == UINT32_MAX) return NULL;
    if (!isfinite(config->near_distance) || !isfinite(config->far_distance)) return NULL;
    if (config->near_distance < 0 || config->far_distance <= config->near_distance) return NULL;
    witness_budget *budget = xcalloc(1, sizeof *budget);
    budget->config = *config;
    if (budget->config.carry_max_bytes == 0) budget->config.carry_max_bytes = config->bytes_per_second / 4;
    budget->interval_scale =
        (double)(config->tick_hz - 1) / ((double)config->far_distance - (double)config->near_distance);
    return budget;
}

void witness_budget_free(witness_budget *budget) {
    if (!budget) return;
    free(budget->aliases);
    free(budget->pending);
    free(budget->mandatory);
    free(budget->candidates);
    free(budget->order);
    free(budget->scratch);
    free(budget);
}

uint32_t witness_budget_interval(const witness_budget *budget, float distance) {
    const witness_budget_config *config = &budget->config;
    if (!(distance > config->near_distance)) return 1; /* also NaN, though offer rejects it */
    if (distance >= config->far_distance) return config->tick_hz;
    /* Truncation is floor here: the product is positive. */
    uint32_t interval = 1 + (uint32_t)(((double)distance - config->near_distance) * budget->interval_scale);
    return interval > config->tick_hz ? config->tick_hz : interval;
}

int witness_budget_begin_tick(witness_budget *budget, uint64_t tick) {
    if (budget->phase != WITNESS_BUDGET_PHASE_IDLE && tick <= budget->tick) return WITNESS_BUDGET_ERROR_SEQUENCE;
    uint64_t elapsed = budget->phase == WITNESS_BUDGET_PHASE_IDLE ? 1 : tick - budget->tick;
    const uint64_t hz = budget->config.tick_hz;
    const int64_t cap = budget->config.carry_max_bytes;
    /* Earn the allowance of every elapsed tick. The cap applies to what is
     * carried from one tick to the next, so after a gap the credit is at
     * most the cap plus one tick's allowance, as after a quiet tick. A gap
     * long enough to overflow is clamped: it could only matter to a debt
     * larger than any real one. */
    if (elapsed > (uint64_t)1 << 31) elapsed = (uint64_t)1 << 31;
    uint64_t earned_total = budget->allowance_remainder + budget->config.bytes_per_second * elapsed;
    int64_t grant = (int64_t)(earned_total / hz);
    budget->allowance_remainder = earned_total % hz;
    int64_t last_tick_share = (int64_t)(budget->config.bytes_per_second / hz);
    int64_t credit = budget->credit < cap ? budget->credit : cap;
    if (elapsed > 1) {
        credit += grant - last_tick_share;
        if (credit > cap) credit = cap;
        credit += last_tick_share;
    } else {
        credit += grant;
    }
    budget->credit = credit;
    budget->tick = tick;
    budget->candidate_count = 0;
    budget->phase = WITNESS_BUDGET_PHASE_OFFERING;
    /* Select walks the pending list after the witness's offers: start
     * loading it now, while the witness works out what it owes. */
    const char *pending = (const char *)budget->pending;
    size_t pending_bytes = (size_t)budget->pending_count * sizeof *budget->pending;
    for (size_t at = 0; at < pending_bytes; at += 64) __builtin_prefetch(pending + at);
    return 0;
}

/* The whole tick whose low 32 bits are `low`, at or before the current
 * tick (every stored tick is). */
static uint64_t witness_budget_widen(const witness_budget *budget, uint32_t low) {
    return budget->tick - (uint32_t)((uint32_t)budget->tick - low);
}

/* Grows a uint32 array to hold one more. Only during warm-up: the arrays
 * never shrink. */
static void witness_budget_grow(uint32_t **array, uint32_t count, uint32_t *capacity) {
    if (count < *capacity) return;
    if (*capacity > UINT32_MAX / 2) log_panic("witness_budget: too many pending aliases");
    *capacity = *capacity ? *capacity * 2 : WITNESS_BUDGET_INITIAL_CANDIDATES;
    *array = xrealloc(*array, (size_t)*capacity * sizeof **array);
}

/* Makes room for the memory of `alias` (below max_aliases). */
static void witness_budget_reserve_alias(witness_budget *budget, uint32_t alias) {
    if (alias < budget->alias_capacity) return;
    uint32_t capacity = budget->alias_capacity ? budget->alias_capacity : 64;
    while (capacity <= alias) capacity = capacity > UINT32_MAX / 2 ? UINT32_MAX : capacity * 2;
    if (capacity > budget->config.max_aliases) capacity = budget->config.max_aliases;
    budget->aliases = xrealloc(budget->aliases, (size_t)capacity * sizeof *budget->aliases);
    for (uint32_t i = budget->alias_capacity; i < capacity; i++) {
        memset(&budget->aliases[i], 0, sizeof budget->aliases[i]);
        budget->aliases[i].pending_index = WITNESS_BUDGET_NOT_PENDING;
    }
    budget->alias_capacity = capacity;
}

static void witness_budget_unpend(witness_budget *budget, witness_budget_alias *entry) {
    uint32_t index = entry->pending_index;
    if (index == WITNESS_BUDGET_NOT_PENDING) return;
    witness_budget_waiting last = budget->pending[--budget->pending_count];
    budget->pending[index] = last;
    budget->aliases[last.alias].pending_index = index;
    entry->pending_index = WITNESS_BUDGET_NOT_PENDING;
    entry->mandatory = false;
}

/* Copies what decides candidacy from a pending alias's entry to its place
 * in the pending list. */
static void witness_budget_refresh(witness_budget *budget, const witness_budget_alias *entry) {
    witness_budget_waiting *waiting = &budget->pending[entry->pending_index];
    waiting->mandatory = entry->mandatory;
    waiting->forced_at = witness_budget_widen(budget, entry->pending_since) + budget->config.tick_hz - 1;
    waiting->eligible_at = entry->has_sent ? witness_budget_widen(budget, entry->last_sent) + entry->interval : 0;
}

static void witness_budget_pend(witness_budget *budget, uint32_t alias) {
    witness_budget_alias *entry = &budget->aliases[alias];
    if (entry->pending_index != WITNESS_BUDGET_NOT_PENDING) return;
    if (budget->pending_count == budget->pending_capacity) {
        budget->pending_capacity =
            budget->pending_capacity ? budget->pending_capacity * 2 : WITNESS_BUDGET_INITIAL_CANDIDATES;
        budget->pending = xrealloc(budget->pending, budget->pending_capacity * sizeof *budget->pending);
    }
    entry->pending_index = budget->pending_count;
    budget->pending[budget->pending_count++].alias = alias;
    witness_budget_refresh(budget, entry);
}

int witness_budget_offer(witness_budget *budget, uint32_t alias, float distance, uint32_t bytes, bool mandatory) {
    if (budget->phase != WITNESS_BUDGET_PHASE_OFFERING) return WITNESS_BUDGET_ERROR_SEQUENCE;
    if (alias >= budget->config.max_aliases || isnan(distance)) return WITNESS_BUDGET_ERROR_ARGUMENT;
    witness_budget_reserve_alias(budget, alias);
    if (distance < 0) distance = 0;
    witness_budget_alias *entry = &budget->aliases[alias];
    if (entry->has_offered && entry->last_offered == (uint32_t)budget->tick) return WITNESS_BUDGET_ERROR_DUPLICATE;
    if (entry->pending_index == WITNESS_BUDGET_NOT_PENDING) {
        entry->pending_since = (uint32_t)budget->tick;
        witness_budget_pend(budget, alias);
    }
    entry->has_offered = true;
    entry->last_offered = (uint32_t)budget->tick;
    entry->bytes = bytes;
    entry->distance = distance;
    entry->interval = witness_budget_interval(budget, distance);
    if (mandatory && !entry->mandatory) {
        entry->mandatory = true;
        witness_budget_grow(&budget->mandatory, budget->mandatory_count, &budget->mandatory_capacity);
        budget->mandatory[budget->mandatory_count++] = alias;
    }
    witness_budget_refresh(budget, entry);
    return 0;
}

/* True if candidate a goes before candidate b: higher staleness/interval,
 * then nearer, then lower alias. Cross-multiplied, so exact. */
static bool witness_budget_before(const witness_budget_candidate *a, const witness_budget_candidate *b) {
    uint64_t left = a->staleness * b->interval, right = b->staleness * a->interval;
    if (left != right) return left > right;
    if (a->distance != b->distance) return a->distance < b->distance;
    return a->alias < b->alias;
}

/* Sorts order[begin, end) by priority: a bottom-up merge sort into the
 * preallocated scratch array (qsort may allocate, and this runs per tick).
 * Only the tick's candidates are ranked, usually a few. */
static void witness_budget_sort(witness_budget *budget, uint32_t begin, uint32_t end) {
    uint32_t *from = budget->order + begin, *to = budget->scratch + begin;
    uint32_t n = end - begin;
    const witness_budget_candidate *c = budget->candidates;
    for (uint32_t width = 1; width < n; width *= 2) {
        for (uint32_t low = 0; low < n; low += 2 * width) {
            uint32_t mid = low + width < n ? low + width : n;
            uint32_t high = low + 2 * width < n ? low + 2 * width : n;
            uint32_t i = low, j = mid, k = low;
            while (i < mid && j < high)
                to[k++] = witness_budget_before(&c[from[j]], &c[from[i]]) ? from[j++] : from[i++];
            while (i < mid) to[k++] = from[i++];
            while (j < high) to[k++] = from[j++];
        }
        uint32_t *swap = from;
        from = to;
        to = swap;
    }
    if (from != budget->order + begin) memcpy(budget->order + begin, from, n * sizeof *from);
}

/* Restores the heap order of order[begin, begin + count) below `at`: each
 * parent goes before its children (witness_budget_before). */
static void witness_budget_sift_down(witness_budget *budget, uint32_t begin, uint32_t count, uint32_t at) {
    uint32_t *heap = budget->order + begin;
    const witness_budget_candidate *c = budget->candidates;
    uint32_t moving = heap[at];
    for (;;) {
        uint32_t child = 2 * at + 1;
        if (child >= count) break;
        if (child + 1 < count && witness_budget_before(&c[heap[child + 1]], &c[heap[child]])) child++;
        if (!witness_budget_before(&c[heap[child]], &c[moving])) break;
        heap[at] = heap[child];
        at = child;
    }
    heap[at] = moving;
}

/* Greedy choice among the optional candidates order[begin, end), which the
 * credit does not all cover: in priority order, each that fits the credit
 * left goes. Writes the chosen candidates' indices back to order[begin,
 * ...) in that order and returns how many. The result is what sorting them
 * all and walking the sorted list would give, but a heap is built in
 * linear time and only popped while something can still fit: in a crowd
 * the credit runs out after a fraction of the view. */
static uint32_t witness_budget_choose(witness_budget *budget, uint32_t begin, uint32_t end, int64_t credit) {
    const witness_budget_candidate *c = budget->candidates;
    uint32_t count = end - begin, smallest = UINT32_MAX;
    for (uint32_t i = begin; i < end; i++)
        if (c[budget->order[i]].bytes < smallest) smallest = c[budget->order[i]].bytes;
    for (uint32_t at = count / 2; at-- > 0;) witness_budget_sift_down(budget, begin, count, at);
    uint32_t chosen = 0;
    while (count > 0 && credit >= (int64_t)smallest) {
        uint32_t top = budget->order[begin];
        budget->order[begin] = budget->order[begin + --count];
        if (count > 0) witness_budget_sift_down(budget, begin, count, 0);
        if ((int64_t)c[top].bytes > credit) continue;
        credit -= c[top].bytes;
        /* The chosen are kept after the heap, which shrinks as they go;
         * scratch holds them in order meanwhile. */
        budget->scratch[begin + chosen++] = top;
    }
    memcpy(budget->order + begin, budget->scratch + begin, chosen * sizeof *budget->order);
    return chosen;
}

/* Adds `alias` as a candidate of this tick. */
static uint32_t witness_budget_add_candidate(witness_budget *budget, uint32_t alias) {
    if (budget->candidate_count == budget->candidate_capacity) {
        uint32_t capacity =
            budget->candidate_capacity ? budget->candidate_capacity * 2 : WITNESS_BUDGET_INITIAL_CANDIDATES;
        budget->candidates = xrealloc(budget->candidates, capacity * sizeof *budget->candidates);
        budget->order = xrealloc(budget->order, capacity * sizeof *budget->order);
        budget->scratch = xrealloc(budget->scratch, capacity * sizeof *budget->scratch);
        budget->candidate_capacity = capacity;
    }
    witness_budget_alias *entry = &budget->aliases[alias];
    entry->listed_tick = (uint32_t)(budget->tick + 1);
    uint32_t index = budget->candidate_count++;
    witness_budget_candidate *candidate = &budget->candidates[index];
    candidate->alias = alias;
    candidate->bytes = entry->bytes;
    candidate->distance = entry->distance;
    candidate->interval = entry->interval;
    candidate->staleness = (uint32_t)((uint32_t)budget->tick - entry->pending_since) + 1u;
    candidate->mandatory = entry->mandatory;
    candidate->class = WITNESS_BUDGET_CLASS_SKIPPED;
    return index;
}

int witness_budget_select(witness_budget *budget, uint32_t *out, uint32_t capacity, uint32_t *count) {
    if (budget->phase != WITNESS_BUDGET_PHASE_OFFERING) return WITNESS_BUDGET_ERROR_SEQUENCE;
    const uint64_t tick = budget->tick;
    witness_budget_candidate *c;

    /* The candidates: mandatory in offer order, then forced, then those
     * past their interval. One pass over what is pending. */
    budget->candidate_count = 0;
    for (uint32_t i = 0; i < budget->mandatory_count; i++) {
        const witness_budget_alias *entry = &budget->aliases[budget->mandatory[i]];
        if (entry->mandatory && entry->pending_index != WITNESS_BUDGET_NOT_PENDING &&
            entry->listed_tick != (uint32_t)(tick + 1))
            witness_budget_add_candidate(budget, budget->mandatory[i]);
    }
    uint32_t forced_begin = budget->candidate_count;
    if (!budget->held) {
        for (uint32_t i = 0; i < budget->pending_count; i++) {
            /* The next pass makes most of them candidates, each reading
             * its alias's memory, in the list's order (not the memory's):
             * start loading it now. */
            __builtin_prefetch(&budget->aliases[budget->pending[i].alias], 1);
            const witness_budget_waiting *waiting = &budget->pending[i];
            if (!waiting->mandatory && tick >= waiting->forced_at) witness_budget_add_candidate(budget, waiting->alias);
        }
    }
    uint32_t optional_begin = budget->candidate_count;
    if (!budget->held) {
        for (uint32_t i = 0; i < budget->pending_count; i++) {
            const witness_budget_waiting *waiting = &budget->pending[i];
            if (waiting->mandatory || tick >= waiting->forced_at) continue;
            if (tick >= waiting->eligible_at) witness_budget_add_candidate(budget, waiting->alias);
        }
    }
    uint32_t n = budget->candidate_count;
    c = budget->candidates;
    for (uint32_t i = 0; i < n; i++) budget->order[i] = i;
    witness_budget_sort(budget, forced_begin, optional_begin);
    /* The optional candidates are ranked only when the credit left after
     * the mandatory and forced ones does not cover them all: when it does,
     * they all go, and their order does not matter. */
    int64_t need = 0, left = budget->credit;
    for (uint32_t i = 0; i < optional_begin; i++) left -= c[i].bytes;
    for (uint32_t i = optional_begin; i < n && need <= left; i++) need += c[i].bytes;
    uint32_t optional_end = n;
    if (need > left) optional_end = optional_begin + witness_budget_choose(budget, optional_begin, n, left);

    /* Spend, on a copy of the credit until the output is known to fit. */
    int64_t credit = budget->credit;
    uint32_t selected = 0;
    for (uint32_t k = 0; k < optional_end; k++) {
        witness_budget_candidate *candidate = &c[budget->order[k]];
        if (k < forced_begin)
            candidate->class = WITNESS_BUDGET_CLASS_MANDATORY;
        else if (k < optional_begin)
            candidate->class = WITNESS_BUDGET_CLASS_FORCED;
        else
            candidate->class = WITNESS_BUDGET_CLASS_OPTIONAL;
        credit -= candidate->bytes;
        if (selected < capacity) out[selected] = candidate->alias;
        selected++;
    }
    if (selected > capacity) {
        for (uint32_t k = 0; k < n; k++) {
            c[k].class = WITNESS_BUDGET_CLASS_SKIPPED;
            budget->aliases[c[k].alias].listed_tick = 0;
        }
        *count = 0;
        return WITNESS_BUDGET_ERROR_SPACE;
    }

    /* Commit: charge, record the sends, count. Every mandatory offer went. */
    budget->credit = credit;
    budget->mandatory_count = 0;
    for (uint32_t i = 0; i < n; i++) {
        witness_budget_candidate *candidate = &c[i];
        if (candidate->class == WITNESS_BUDGET_CLASS_SKIPPED) continue;
        witness_budget_alias *entry = &budget->aliases[candidate->alias];
        candidate->previous_last_sent = entry->last_sent;
        candidate->previous_has_sent = entry->has_sent;
        candidate->previous_pending_since = entry->pending_since;
        entry->last_sent = (uint32_t)tick;
        entry->has_sent = true;
        entry->selected_tick = (uint32_t)tick;
        entry->candidate = i;
        witness_budget_unpend(budget, entry);
        budget->stats.bytes_spent += candidate->bytes;
        budget->stats.sent_count++;
        if (candidate->class == WITNESS_BUDGET_CLASS_MANDATORY) {
            budget->stats.mandatory_bytes += candidate->bytes;
            budget->stats.mandatory_count++;
        } else if (candidate->class == WITNESS_BUDGET_CLASS_FORCED) {
            budget->stats.forced_bytes += candidate->bytes;
            budget->stats.forced_count++;
        }
    }
    budget->stats.skipped_count += budget->pending_count;
    *count = selected;
    budget->phase = WITNESS_BUDGET_PHASE_SELECTED;
    return 0;
}

int witness_budget_commit(witness_budget *budget, uint32_t alias, uint32_t bytes_sent) {
    if (alias >= budget->config.max_aliases) return WITNESS_BUDGET_ERROR_ARGUMENT;
    if (alias >= budget->alias_capacity) return WITNESS_BUDGET_ERROR_NOT_SELECTED; /* never offered */
    witness_budget_alias *entry = &budget->aliases[alias];
    if (budget->phase != WITNESS_BUDGET_PHASE_SELECTED || !entry->has_sent ||
        entry->selected_tick != (uint32_t)budget->tick || entry->candidate >= budget->candidate_count)
        return WITNESS_BUDGET_ERROR_NOT_SELECTED;
    witness_budget_candidate *candidate = &budget->candidates[entry->candidate];
    witness_budget_class class = candidate->class;
    if (candidate->alias != alias || (class != WITNESS_BUDGET_CLASS_MANDATORY && class != WITNESS_BUDGET_CLASS_FORCED &&
                                      class != WITNESS_BUDGET_CLASS_OPTIONAL))
        return WITNESS_BUDGET_ERROR_NOT_SELECTED;

    /* Unsigned wrap-around makes the delta a subtraction when negative. */
    uint64_t delta = (uint64_t)bytes_sent - candidate->bytes;
    budget->credit += (int64_t)candidate->bytes - (int64_t)bytes_sent;
    budget->stats.bytes_spent += delta;
    if (class == WITNESS_BUDGET_CLASS_MANDATORY) budget->stats.mandatory_bytes += delta;
    if (class == WITNESS_BUDGET_CLASS_FORCED) budget->stats.forced_bytes += delta;
    candidate->bytes = bytes_sent;
    if (bytes_sent > 0) return 0;

    /* Not sent after all: undo the send, so the alias stays pending, as
     * stale as it was, and is forced on time. */
    entry->last_sent = candidate->previous_last_sent;
    entry->has_sent = candidate->previous_has_sent;
    entry->pending_since = candidate->previous_pending_since;
    witness_budget_pend(budget, alias);
    entry->mandatory = candidate->mandatory;
    witness_budget_refresh(budget, entry);
    if (entry->mandatory) {
        witness_budget_grow(&budget->mandatory, budget->mandatory_count, &budget->mandatory_capacity);
        budget->mandatory[budget->mandatory_count++] = alias;
    }
    candidate->class = WITNESS_BUDGET_CLASS_SKIPPED;
    budget->stats.sent_count--;
    budget->stats.skipped_count++;
    if (class == WITNESS_BUDGET_CLASS_MANDATORY) budget->stats.mandatory_count--;
    if (class == WITNESS_BUDGET_CLASS_FORCED) budget->stats.forced_count--;
    return 0;
}

void witness_budget_forget(witness_budget *budget, uint32_t alias) {
    if (alias >= budget->alias_capacity) return; /* never offered: nothing to forget */
    witness_budget_alias *entry = &budget->aliases[alias];
    witness_budget_unpend(budget, entry);
    memset(entry, 0, sizeof *entry);
    entry->pending_index = WITNESS_BUDGET_NOT_PENDING;
}

void witness_budget_withdraw(witness_budget *budget, uint32_t alias) {
    if (alias >= budget->alias_capacity) return;
    witness_budget_alias *entry = &budget->aliases[alias];
    if (budget->phase == WITNESS_BUDGET_PHASE_SELECTED && entry->has_sent &&
        entry->selected_tick == (uint32_t)budget->tick && entry->candidate < budget->candidate_count &&
        budget->candidates[entry->candidate].alias == alias &&
        budget->candidates[entry->candidate].class != WITNESS_BUDGET_CLASS_SKIPPED)
        witness_budget_commit(budget, alias, 0);
    witness_budget_unpend(budget, entry);
}

void witness_budget_prefetch(const witness_budget *budget, const uint32_t *aliases, size_t count) {
    for (size_t i = 0; i < count; i++)
        if (aliases[i] < budget->alias_capacity) __builtin_prefetch(&budget->aliases[aliases[i]], 1);
}

bool witness_budget_is_pending(const witness_budget *budget, uint32_t alias) {
    return alias < budget->alias_capacity && budget->aliases[alias].pending_index != WITNESS_BUDGET_NOT_PENDING;
}

uint32_t witness_budget_pending_count(const witness_budget *budget) { return budget->pending_count; }

void witness_budget_hold(witness_budget *budget, bool held) {
    if (budget->held && !held) {
        for (uint32_t i = 0; i < budget->pending_count; i++) {
            witness_budget_alias *entry = &budget->aliases[budget->pending[i].alias];
            entry->pending_since = (uint32_t)budget->tick;
            witness_budget_refresh(budget, entry);
        }
    }
    budget->held = held;
}

void witness_budget_get_stats(const witness_budget *budget, witness_budget_stats *out) {
    *out = budget->stats;
    out->debt = budget->credit < 0 ? (uint64_t)-budget->credit : 0;
    out->credit = budget->credit > 0 ? (uint64_t)budget->credit : 0;
}

void witness_budget_save(const witness_budget *budget, uint64_t *tick, int64_t *credit, uint64_t *remainder) {
    *tick = budget->tick;
    *credit = budget->credit;
    *remainder = budget->allowance_remainder;
}

void witness_budget_alias_save(const witness_budget *budget, uint32_t alias, witness_budget_alias_state *out) {
    memset(out, 0, sizeof *out);
    if (alias >= budget->alias_capacity) return;
    const witness_budget_alias *a = &budget->aliases[alias];
    out->has_sent = a->has_sent;
    out->last_sent = a->has_sent ? witness_budget_widen(budget, a->last_sent) : 0;
    /* has_offered stands for "pending" in the saved form. */
    out->has_offered = a->pending_index != WITNESS_BUDGET_NOT_PENDING;
    out->pending_since = witness_budget_widen(budget, a->pending_since);
    out->last_offered = witness_budget_widen(budget, a->last_offered);
    if (out->has_offered) {
        out->offered_bytes = a->bytes;
        out->offered_distance = a->distance;
        out->pending_order = a->pending_index;
    }
}

void witness_budget_restore(witness_budget *budget, uint64_t tick, int64_t credit, uint64_t remainder) {
    budget->tick = tick;
    budget->credit = credit;
    budget->allowance_remainder = remainder % budget->config.tick_hz;
    budget->candidate_count = 0;
    /* As after a select: the next begin_tick continues from `tick`. */
    budget->phase = tick ? WITNESS_BUDGET_PHASE_SELECTED : WITNESS_BUDGET_PHASE_IDLE;
}

int witness_budget_alias_restore(witness_budget *budget, uint32_t alias, const witness_budget_alias_state *state) {
    if (alias >= budget->config.max_aliases) return WITNESS_BUDGET_ERROR_ARGUMENT;
    witness_budget_reserve_alias(budget, alias);
    witness_budget_alias *a = &budget->aliases[alias];
    witness_budget_unpend(budget, a);
    memset(a, 0, sizeof *a);
    a->pending_index = WITNESS_BUDGET_NOT_PENDING;
    a->has_sent = state->has_sent;
    a->last_sent = (uint32_t)state->last_sent;
    a->pending_since = (uint32_t)state->pending_since;
    a->last_offered = (uint32_t)state->last_offered;
    if (state->has_offered) {
        /* Pending here as it was there, with its latest offer. */
        a->has_offered = true;
        a->bytes = state->offered_bytes;
        a->distance = isfinite(state->offered_distance) && state->offered_distance > 0 ? state->offered_distance : 0;
        a->interval = witness_budget_interval(budget, a->distance);
        a->restored_order = state->pending_order;
        witness_budget_pend(budget, alias);
        /* Into its saved place among the aliases restored so far, so the
         * list is in the order it was, whatever order they come in. */
        uint32_t index = a->pending_index;
        while (index > 0 && budget->aliases[budget->pending[index - 1].alias].restored_order > a->restored_order) {
            witness_budget_waiting moved = budget->pending[index - 1];
            budget->pending[index] = moved;
            budget->aliases[moved.alias].pending_index = index;
            index--;
        }
        budget->pending[index].alias = alias;
        a->pending_index = index;
        witness_budget_refresh(budget, a);
    }
    return 0;
}
