/* witness.c -- one client's view of its space and the stream that keeps the
 * client's copy of it current.
 *
 * The view is a watcher in the space's coordinate system (coord.h: a square
 * of half-side view_radius, left beyond view_radius + view_hysteresis); its
 * flush tells the witness who entered and who left, net for the tick. Every
 * entity in view knows the witness (cell_entity.observers), and when it
 * moves or its properties are packed it sets its alias's bit in the
 * witness's touched bitmap (witness_notify_changes). So a tick's work
 * follows what changed in the view -- enters, leaves, movers, changed
 * properties -- and what the budget finds due, not the view's size.
 *
 * Memory. A pair in view costs the witness one cache line: its slot is 64
 * bytes, aligned, indexed by alias, and the touched pairs are worked
 * through in alias order (the bitmap's), so one witness's slots and its
 * budget's memory are read in address order, while they are in cache,
 * rather than once per mover in the movers' order. Each tick the witness:
 *
 *   1. writes a LEAVE for every entity that left, and releases its alias
 *      (alias_table: it cools down before naming anything else);
 *   2. gives every entity that entered an alias (the own entity first), to
 *      be ENTERed with its full state for the detail level it is at, and
 *      an absolute MOVE;
 *   3. for every entity that changed (and a tenth of the view, for detail
 *      levels: see below), works out what it owes the client: a
 *      property UPDATE (pack-once: the shared encoding of its audience,
 *      replication.c), properties the client lacks (a near-only property
 *      when the entity came near, or changes the budget held back), and a
 *      MOVE when it moved (volatile_codec.c: a small delta from what the
 *      client holds);
 *   4. offers it to the client's budget (witness_budget.c), where it stays
 *      pending until it goes; the budget picks what goes this tick, nearer
 *      and staler first, enters and leaves always, nothing starving past a
 *      second;
 *   5. writes the chosen records in the budget's order, then END, and packs
 *      the stream and the queued client calls into one ViewUpdate.
 *
 * Latest state wins: a record the budget holds back is not queued, and
 * while the client's baseapp reports it congested (not reading), only
 * enters and leaves are written at all. A held
 * MOVE is sent later from the position then current; held property changes
 * are remembered as a set of properties (`pending`) and sent later with the
 * values then current. So under pressure a client gets fewer, newer
 * updates, never a backlog of stale ones.
 *
 * Detail levels are distances on X and Z (and Y in a 3D space), like the
 * view: at most detail_near_distance is near, at most
 * detail_medium_distance medium, farther far. A client gets a finer level
 * as soon as it is near enough, and drops to a coarser one only
 * detail_hysteresis past the boundary. The level is rechecked whenever the
 * entity is touched, and, because the viewer's own steps change it too,
 * for a tenth of the view every tick (tick_hz ticks for all of it): an
 * entity standing still is given a finer level within a second of the
 * viewer walking up to it. The own entity is always sent at its own
 * audience (replication.h's OWN).
 *
 * Pointers. A slot keeps its entity's pointer while the entity is in view;
 * the entity clears it when it is freed (witness_entity_gone), before the
 * coordinate system's leave reaches the witness.
 *
 * Travelling. An offload brings the witness here with the client's view
 * (witness_save, witness_restore). An entity in that view whose copy this
 * cellapp does not hold yet -- its ghost is on its way: made in the same
 * tick on the real's cellapp, which reached the old cellapp first -- is
 * awaited for WITNESS_ARRIVAL_WAIT_MS rather than sent a LEAVE that its
 * ENTER would follow a tick later; the client keeps it meanwhile, and it
 * leaves only if no copy comes (a witness that moves on meanwhile awaits
 * it afresh on the next cellapp).
 *
 * A LEAVE is written only for an entity beyond the view's outer extent, or
 * gone from the cell. One still well inside the view by this cell's
 * positions means the coordinate system and the positions disagree: it is
 * counted (witness_near_leaves) and logged, as the bug it would be.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "alias_table.h"
#include "witness.h"
#include "clock.h"
#include "log.h"
#include "witness_budget.h"

/* What the client holds of one alias: one cache line (64 bytes, aligned),
 * so that touching a pair in view costs one line of memory. The properties
 * owed with their current values (a 32-byte mask) are read only when
 * `owes_properties` says there are some, and live apart (witness.owed). */
typedef struct witness_slot {
    _Alignas(64) cell_entity *entity; /* the entity; NULL once it is freed (its leave is coming) */
    uint64_t entity_id;               /* 0: the alias names nothing */
    uint32_t observer_index;          /* this pair in entity->observers */
    uint32_t member_index;            /* this alias in the witness's members */
    uint32_t update_bits;             /* this tick: the size of that shared UPDATE's span */
    uint32_t written_bits;            /* this tick: bits written for it so far */
    uint8_t detail;                   /* the entity_def_detail the client was last given */
    bool entering;                    /* this tick: ENTER, then an absolute MOVE */
    bool move_pending;                /* the entity moved since the client's last MOVE */
    bool offered;                     /* offered to the budget this tick */
    bool selected;                    /* ... and selected */
    bool batched;                     /* its shared UPDATE goes in this tick's batch */
    bool owes_properties;             /* witness.owed[alias] is not empty */
    bool pending;                     /* waits in the budget (witness_is_pending) */
    volatile_track track;             /* the position and yaw the client holds */
} witness_slot;

_Static_assert(sizeof(witness_slot) == 64, "a witness slot is one cache line");

/* How long a restored view waits for the copy of an entity the client
 * knows before it leaves (well under the second a client may go without
 * hearing of an entity in view). */
#define WITNESS_ARRIVAL_WAIT_MS 500

/* An entity the client knows that this cellapp holds no copy of yet
 * (witness_restore), with the change counters the client's knowledge of
 * it was at. */
typedef struct witness_awaited {
    uint64_t entity_id;
    uint32_t alias;
    uint32_t move_count, property_count;
    uint64_t deadline_ms; /* monotonic: it leaves then, if still not here */
} witness_awaited;

/* An entity in view that could not get an alias (the table was full). */
typedef struct witness_waiting {
    uint32_t coord_id;
    uint64_t entity_id;
} witness_waiting;

/* A client call queued for the next update. */
typedef struct witness_call {
    uint64_t entity_id;
    uint32_t method_id;
    uint8_t *args;
    size_t length;
} witness_call;

/* A game event waiting for the next update (cellapp/game_event.h). */
typedef struct witness_event {
    uint64_t source_id;
    uint32_t event_id;
    bool needs_view; /* a viewers' event: only while the client sees its source */
    uint8_t *args;
    size_t length;
} witness_event;

struct witness {
    const cell *c;
    cell_entity *owner; /* the entity it watches through (it goes before its owner) */
    bool tick_begun;    /* this tick's budget tick has begun (notify or update) */
    uint32_t watcher;
    uint32_t self_alias; /* the own entity's alias, ALIAS_NONE before its ENTER */
    uint64_t owner_id;
    alias_table *aliases;
    witness_budget *budget;
    unsigned alias_bits;
    uint32_t max_aliases;
    /* By alias, grown on demand up to max_aliases: aliases are handed out
     * lowest first, so this follows the largest view the client has had
     * (a slot is ~100 bytes; 1024 of them for every client would be 100 KB
     * each). */
    witness_slot *slots;
    /* By alias likewise: the properties owed with their current values
     * (read only when the slot's owes_properties is set). */
    entity_state_mask *owed;
    uint32_t slot_capacity;
    uint64_t budget_tick;
    uint64_t *left; /* entity ids reported leaving since the last update */
    size_t left_count, left_capacity;
    uint32_t *entered; /* coord ids reported entering since the last update */
    size_t entered_count, entered_capacity;
    uint32_t *members; /* aliases in use, in no order (slot.member_index) */
    size_t member_count, member_capacity;
    size_t sweep_cursor; /* where this tick's detail recheck starts in members */
    /* A bit by alias: its entity changed (or its detail level may have)
     * since the last update. A bitmap rather than a list, so that the
     * update works through them in alias order -- the order of the slots
     * and of the budget's memory in memory -- and a second touch is free. */
    uint64_t *touched;
    /* The last update's ServerToClient, packed (witness_update): kept from
     * tick to tick, so an update allocates nothing. */
    uint8_t *payload;
    size_t payload_capacity;
    uint32_t *touched_aliases; /* scratch: this update's touched aliases, in order */
    witness_waiting *waiting;  /* in view, without an alias yet */
    size_t waiting_count, waiting_capacity;
    witness_awaited *awaited; /* known to the client, not here yet (travelling) */
    size_t awaited_count, awaited_capacity;
    uint32_t *offered; /* aliases offered this tick */
    size_t offered_count, offered_capacity;
    uint32_t *selected; /* the budget's choice, in send order */
    size_t selected_capacity;
    replication_ref *refs; /* this tick's shared UPDATEs, in send order */
    size_t ref_capacity;
    witness_call *calls;
    size_t call_count, call_capacity;
    witness_event *events;
    size_t event_count, event_capacity;
    bool warned_exhausted;
    bool congested; /* the client is not reading: hold all but enters and leaves */
    /* The cell whose tick counter the last update carried (NULL before the
     * first): an update from another cell's counter says so. */
    const cell *ticks_sent_from;
};

#define WITNESS_PUSH(array, count, capacity, value)                    \
    do {                                                               \
        if ((count) == (capacity)) {                                   \
            (capacity) = (capacity) ? (capacity)*2 : 16;               \
            (array) = xrealloc((array), (capacity) * sizeof *(array)); \
        }                                                              \
        (array)[(count)++] = (value);                                  \
    } while (0)

static void witness_on_enter(coord_system *cs, uint32_t watcher, uint32_t entity, void *user_data) {
    witness *view = user_data;
    (void)cs;
    (void)watcher;
    WITNESS_PUSH(view->entered, view->entered_count, view->entered_capacity, entity);
}

static void witness_on_leave(coord_system *cs, uint32_t watcher, uint32_t entity, void *user_data) {
    witness *view = user_data;
    (void)cs;
    (void)watcher;
    WITNESS_PUSH(view->left, view->left_count, view->left_capacity, cell_entity_id_of(view->c, entity));
}

static const coord_watcher_callbacks witness_callbacks = {
    .on_enter = witness_on_enter,
    .on_leave = witness_on_leave,
};

/* ---- the pairs: which witnesses see an entity -------------------------------- */

#define WITNESS_NO_OBSERVER UINT32_MAX

/* Records that `view` has the entity of `alias` in view (slot->entity set). */
static void witness_observe(witness *view, uint32_t alias) {
    witness_slot *slot = &view->slots[alias];
    cell_entity *entity = slot->entity;
    if (entity->observer_count == entity->observer_capacity) {
        entity->observer_capacity = entity->observer_capacity ? entity->observer_capacity * 2 : 8;
        entity->observers = xrealloc(entity->observers, entity->observer_capacity * sizeof *entity->observers);
    }
    slot->observer_index = entity->observer_count;
    entity->observers[entity->observer_count++] = (cell_observer){view, alias};
}

/* Undoes witness_observe, if the entity is still there. */
static void witness_unobserve(witness *view, uint32_t alias) {
    witness_slot *slot = &view->slots[alias];
    cell_entity *entity = slot->entity;
    if (!entity) return;
    uint32_t index = slot->observer_index;
    cell_observer last = entity->observers[--entity->observer_count];
    if (index < entity->observer_count) {
        entity->observers[index] = last;
        last.view->slots[last.alias].observer_index = index;
    }
    slot->entity = NULL;
    slot->observer_index = WITNESS_NO_OBSERVER;
}

/* Marks `alias` touched: the update works out what it owes. */
static inline void witness_touch(witness *view, uint32_t alias) {
    view->touched[alias / 64] |= UINT64_C(1) << (alias % 64);
}

static inline bool witness_is_touched(const witness *view, uint32_t alias) {
    return (view->touched[alias / 64] >> (alias % 64) & 1) != 0;
}

/* Starts this tick's budget tick, once: at the first change an entity in
 * view reports, or at the update. */
static void witness_begin(witness *view) {
    if (view->tick_begun) return;
    if (witness_budget_begin_tick(view->budget, ++view->budget_tick) != 0)
        log_panic("entity %llu: budget tick out of order", (unsigned long long)view->owner_id);
    view->offered_count = 0;
    view->tick_begun = true;
}

static void witness_consider(witness *view, cell *c, uint32_t alias, cell_entity *entity, float distance,
                             bool is_owner);
static float witness_distance(const cell *c, const cell_entity *a, const cell_entity *b);
static void witness_resolve_awaited(witness *view, cell *c, uint64_t now_ms);
static void witness_check_leave(const witness *view, cell *c, const cell_entity *owner, uint64_t entity_id);

/* The prefetch helpers are always inlined, and must be: gcc finds a
 * function that only prefetches "pure" (it writes nothing), and drops
 * every call of a pure function returning nothing. Unless inlined before
 * that analysis, they compile to nothing (they did, until this was seen
 * in the disassembly). */

/* How far ahead the detail sweep fetches: a pair's slot and entity sit in
 * memory nothing else of the tick touches, so without this each pair waits
 * for main memory twice. The slot is fetched this many pairs ahead, the
 * entity (through the slot, by then in cache) half as many. */
#define WITNESS_PREFETCH_AHEAD 8

/* Starts loading the slot of aliases[i + AHEAD] and the entity of
 * aliases[i + AHEAD / 2]: the line a touch and a MOVE read (cell.h), and
 * the packed UPDATE spans an UPDATE reads. */
static inline __attribute__((always_inline)) void witness_prefetch(const witness *view, const uint32_t *aliases,
                                                                   size_t count, size_t i) {
    if (i + WITNESS_PREFETCH_AHEAD < count) __builtin_prefetch(&view->slots[aliases[i + WITNESS_PREFETCH_AHEAD]]);
    if (i + WITNESS_PREFETCH_AHEAD / 2 < count) {
        const cell_entity *entity = view->slots[aliases[i + WITNESS_PREFETCH_AHEAD / 2]].entity;
        if (entity) {
            __builtin_prefetch(&entity->x);
            __builtin_prefetch(&entity->replication.update);
        }
    }
}

/* How many pairs the loops over a tick's touched and selected aliases
 * fetch at once (witness_prefetch_batch): 32 slots and their entities'
 * lines, about 6 KB, sit well inside L1. */
#define WITNESS_PREFETCH_BATCH 32

/* Starts loading, for aliases[begin, end), every slot and the budget's
 * memory of it, then every entity line a touch and a MOVE read (cell.h)
 * and its packed UPDATE spans. The loads of a batch overlap, so the batch
 * waits for main memory about twice rather than twice a pair: a view of
 * thirty touched entities is done before a fetch a few pairs ahead gets
 * going. */
static inline __attribute__((always_inline)) void witness_prefetch_batch(const witness *view, const uint32_t *aliases,
                                                                         size_t begin, size_t end) {
    for (size_t i = begin; i < end; i++) __builtin_prefetch(&view->slots[aliases[i]]);
    witness_budget_prefetch(view->budget, aliases + begin, end - begin);
    for (size_t i = begin; i < end; i++) {
        const cell_entity *entity = view->slots[aliases[i]].entity;
        if (entity) {
            __builtin_prefetch(&entity->x);
            __builtin_prefetch(&entity->replication.update);
        }
    }
}

void witness_notify_changes(cell *c) {
    /* A mover or a packed entity is on the cell's changed list. */
    for (size_t i = 0; i < c->changed_count; i++) {
        cell_entity *entity = c->changed[i];
        if (!(entity->moved || entity->packed) || entity->destroyed) continue;
        const cell_observer *observers = entity->observers;
        for (uint32_t k = 0; k < entity->observer_count; k++) {
            /* A batch at a time: the witnesses, then the words of their
             * touched bitmaps (through the witnesses, by then in cache). */
            if (k % WITNESS_PREFETCH_BATCH == 0) {
                uint32_t end = k + WITNESS_PREFETCH_BATCH < entity->observer_count ? k + WITNESS_PREFETCH_BATCH
                                                                                   : entity->observer_count;
                for (uint32_t j = k; j < end; j++) __builtin_prefetch(observers[j].view, 1);
                for (uint32_t j = k; j < end; j++)
                    __builtin_prefetch(&observers[j].view->touched[observers[j].alias / 64], 1);
            }
            /* What it owes that client is worked out by the client's update,
             * with the rest of that view's pairs, in alias order: here the
             * pair costs a bit. */
            witness_touch(observers[k].view, observers[k].alias);
        }
    }
}

void witness_entity_gone(cell_entity *entity) {
    for (uint32_t i = 0; i < entity->observer_count; i++) {
        witness_slot *slot = &entity->observers[i].view->slots[entity->observers[i].alias];
        slot->entity = NULL;
        slot->observer_index = WITNESS_NO_OBSERVER;
    }
    entity->observer_count = 0;
}

void witness_queue_call_for_observers(cell_entity *entity, uint32_t method_id, const uint8_t *args, size_t length) {
    for (uint32_t i = 0; i < entity->observer_count; i++)
        witness_queue_call(entity->observers[i].view, entity->id, method_id, args, length);
}

void witness_queue_event_for_observers(cell_entity *entity, uint32_t event_id, const uint8_t *args, size_t length) {
    for (uint32_t i = 0; i < entity->observer_count; i++)
        witness_queue_event(entity->observers[i].view, entity->id, event_id, args, length, true);
}

/* A witness with its alias table and budget, no watcher yet. */
static witness *witness_create(const witness_config *settings, uint64_t owner_id) {
    witness *view = xcalloc(1, sizeof *view);
    view->owner_id = owner_id;
    view->self_alias = ALIAS_NONE;
    view->max_aliases = (uint32_t)settings->max_aliases;
    view->alias_bits = replication_alias_bits(view->max_aliases);
    view->aliases = alias_table_create(view->max_aliases, (uint64_t)settings->alias_cooldown_ms);
    witness_budget_config budget = {
        .bytes_per_second = (uint32_t)settings->client_bytes_per_second,
        .tick_hz = (uint32_t)settings->tick_hz,
        .max_aliases = view->max_aliases,
        .carry_max_bytes = 0,
        .near_distance = (float)settings->update_near_distance,
        .far_distance = (float)settings->update_far_distance,
    };
    view->budget = witness_budget_create(&budget);
    if (!view->aliases || !view->budget)
        log_panic("entity %llu: the witness settings were not validated", (unsigned long long)owner_id);
    return view;
}

static void witness_watch(cell *c, cell_entity *entity, witness *view) {
    const witness_config *settings = &c->shared->settings->witness;
    view->c = c;
    view->owner = entity;
    view->watcher = coord_add_watcher(c->coord, entity->coord_id, (float)settings->view_radius,
                                      (float)settings->view_hysteresis, &witness_callbacks, view);
    if (view->watcher == COORD_NONE) log_panic("entity %llu: cannot attach a witness", (unsigned long long)entity->id);
    entity->real->witness = view;
    cell_witnessed_add(c, entity);
}

void witness_attach(cell *c, cell_entity *entity) {
    if (!entity->real || cell_entity_witness(entity)) return; /* a ghost sees through its real, elsewhere */
    witness_watch(c, entity, witness_create(&c->shared->settings->witness, entity->id));
}

static void witness_free_calls(witness *view) {
    for (size_t i = 0; i < view->call_count; i++) free(view->calls[i].args);
    view->call_count = 0;
    for (size_t i = 0; i < view->event_count; i++) free(view->events[i].args);
    view->event_count = 0;
}

static void witness_free(witness *view) {
    for (uint32_t alias = 0; alias < view->slot_capacity; alias++)
        if (view->slots[alias].entity_id) witness_unobserve(view, alias);
    alias_table_free(view->aliases);
    witness_budget_free(view->budget);
    witness_free_calls(view);
    free(view->payload);
    free(view->calls);
    free(view->events);
    free(view->slots);
    free(view->owed);
    free(view->left);
    free(view->entered);
    free(view->members);
    free(view->touched);
    free(view->touched_aliases);
    free(view->waiting);
    free(view->awaited);
    free(view->offered);
    free(view->selected);
    free(view->refs);
    free(view);
}

void witness_detach(cell *c, cell_entity *entity) {
    witness *view = cell_entity_witness(entity);
    if (!view) return;
    coord_remove_watcher(c->coord, view->watcher);
    cell_witnessed_remove(c, entity);
    witness_free(view);
    entity->real->witness = NULL;
}

void witness_set_congested(witness *view, bool congested) {
    view->congested = congested;
    witness_budget_hold(view->budget, congested);
}

bool witness_sees(const witness *view, uint64_t entity_id) {
    return alias_table_find(view->aliases, entity_id) != ALIAS_NONE;
}

uint32_t witness_view_count(const witness *view) { return alias_table_in_use(view->aliases); }

void witness_queue_call(witness *view, uint64_t entity_id, uint32_t method_id, const uint8_t *args, size_t length) {
    witness_call call = {entity_id, method_id, NULL, length};
    call.args = xmalloc(length ? length : 1);
    if (length) memcpy(call.args, args, length);
    WITNESS_PUSH(view->calls, view->call_count, view->call_capacity, call);
}

void witness_queue_event(witness *view, uint64_t source_id, uint32_t event_id, const uint8_t *args, size_t length,
                         bool needs_view) {
    witness_event event = {source_id, event_id, needs_view, NULL, length};
    event.args = xmalloc(length ? length : 1);
    if (length) memcpy(event.args, args, length);
    WITNESS_PUSH(view->events, view->event_count, view->event_capacity, event);
}

/* The distance the view and the detail levels use: the largest of the
 * per-axis distances (a square view, a cube in 3D). */
static float witness_distance(const cell *c, const cell_entity *a, const cell_entity *b) {
    /* Positions are finite (cell_move takes no other): no fmaxf, whose NaN
     * rules make it a library call. */
    float dx = fabsf(a->x - b->x), dz = fabsf(a->z - b->z);
    float d = dx > dz ? dx : dz;
    if (c->three_d) {
        float dy = fabsf(a->y - b->y);
        d = d > dy ? d : dy;
    }
    return d;
}

static entity_def_detail witness_detail_at(const cell *c, float distance) {
    const witness_config *settings = &c->shared->settings->witness;
    if (distance <= settings->detail_near_distance) return ENTITY_DEF_DETAIL_NEAR;
    if (distance <= settings->detail_medium_distance) return ENTITY_DEF_DETAIL_MEDIUM;
    return ENTITY_DEF_DETAIL_FAR;
}

/* The level for a client that holds `held` and sees the entity at
 * `distance`: finer at once, coarser only past the boundary by the
 * hysteresis. */
static entity_def_detail witness_detail_for(const cell *c, entity_def_detail held, float distance) {
    entity_def_detail detail = witness_detail_at(c, distance);
    if (detail > held) {
        entity_def_detail beyond =
            witness_detail_at(c, distance - (float)c->shared->settings->witness.detail_hysteresis);
        detail = beyond > held ? beyond : held;
    }
    return detail;
}

static const entity_state_mask *witness_audience_mask(const cell *c, const cell_entity *entity, bool is_owner,
                                                      entity_def_detail detail) {
    return replication_schema_mask(c->shared->schema, entity->cls->id, replication_audience_for(is_owner, detail));
}

/* The properties of this tick's change list that the client's audience
 * receives (what the shared UPDATE would carry). */
static void witness_dirty_for(const cell *c, const cell_entity *entity, bool is_owner, entity_def_detail detail,
                              entity_state_mask *out) {
    entity_state_mask_intersect(out, entity_state_dirty(entity->state),
                                witness_audience_mask(c, entity, is_owner, detail));
}

static void witness_mask_or(entity_state_mask *into, const entity_state_mask *from) {
    for (int k = 0; k < ENTITY_STATE_MASK_WORDS; k++) into->words[k] |= from->words[k];
}

/* ---- owed properties: the cold side of a slot ------------------------------ */

/* Adds `properties` to what `alias` owes the client with current values. */
static void witness_owe(witness *view, uint32_t alias, const entity_state_mask *properties) {
    if (entity_state_mask_empty(properties)) return;
    witness_mask_or(&view->owed[alias], properties);
    view->slots[alias].owes_properties = true;
}

/* Keeps only the owed properties that are also in `keep`. */
static void witness_owe_only(witness *view, uint32_t alias, const entity_state_mask *keep) {
    witness_slot *slot = &view->slots[alias];
    if (!slot->owes_properties) return;
    entity_state_mask_intersect(&view->owed[alias], &view->owed[alias], keep);
    slot->owes_properties = !entity_state_mask_empty(&view->owed[alias]);
}

static void witness_owe_nothing(witness *view, uint32_t alias) {
    memset(&view->owed[alias], 0, sizeof view->owed[alias]);
    view->slots[alias].owes_properties = false;
}

/* Empties slot `alias`: the alias names nothing, and owes nothing. */
static void witness_clear_slot(witness *view, uint32_t alias) {
    memset(&view->slots[alias], 0, sizeof view->slots[alias]);
    memset(&view->owed[alias], 0, sizeof view->owed[alias]);
    view->touched[alias / 64] &= ~(UINT64_C(1) << (alias % 64));
}

/* Bytes a MOVE is charged before it is written: bench-volatile's median
 * record plus its header. The budget is corrected to the real size after. */
#define WITNESS_MOVE_ESTIMATE 4u

/* Whether `alias` waits in the budget. The slot keeps the answer, so the
 * per-pair paths read the line they already hold rather than call into
 * the budget: set when offered, cleared when selected (a selected record is
 * committed or withdrawn, never put back) or when the slot is cleared (the
 * budget forgets the alias with it), and copied from the budget on a
 * restore. Outside release builds every use checks it against the budget. */
static inline bool witness_is_pending(const witness *view, uint32_t alias) {
    bool pending = view->slots[alias].pending;
#ifdef TESSERA_CELL_CHECKS
    if (pending != witness_budget_is_pending(view->budget, alias))
        log_panic("entity %llu: alias %u: its slot says %s, the budget says otherwise",
                  (unsigned long long)view->owner_id, alias, pending ? "pending" : "not pending");
#endif
    return pending;
}

static void witness_offer(witness *view, uint32_t alias, float distance, uint32_t bytes, bool mandatory) {
    witness_slot *slot = &view->slots[alias];
    if (slot->offered) return;
    if (witness_budget_offer(view->budget, alias, distance, bytes ? bytes : 1, mandatory) != 0)
        log_panic("entity %llu: the budget refused alias %u", (unsigned long long)view->owner_id, alias);
    slot->offered = true;
    slot->pending = true;
    WITNESS_PUSH(view->offered, view->offered_count, view->offered_capacity, alias);
}

/* The members list: every alias in use, for the detail sweep. */
static void witness_add_member(witness *view, uint32_t alias) {
    view->slots[alias].member_index = (uint32_t)view->member_count;
    WITNESS_PUSH(view->members, view->member_count, view->member_capacity, alias);
}

static void witness_remove_member(witness *view, uint32_t alias) {
    uint32_t index = view->slots[alias].member_index;
    if (index >= view->member_count || view->members[index] != alias) return;
    uint32_t last = view->members[--view->member_count];
    view->members[index] = last;
    view->slots[last].member_index = index;
}

/* Grows the slots (cache-line aligned: realloc only promises 16 bytes)
 * and the owed masks to `capacity` aliases; the new ones are empty. */
static void witness_grow_slots(witness *view, uint32_t capacity) {
    if (capacity <= view->slot_capacity) return;
    witness_slot *slots = aligned_alloc(_Alignof(witness_slot), (size_t)capacity * sizeof *slots);
    if (!slots)
        log_panic("entity %llu: out of memory for %u witness slots", (unsigned long long)view->owner_id, capacity);
    if (view->slot_capacity) memcpy(slots, view->slots, (size_t)view->slot_capacity * sizeof *slots);
    memset(slots + view->slot_capacity, 0, (size_t)(capacity - view->slot_capacity) * sizeof *slots);
    free(view->slots);
    view->slots = slots;
    view->owed = xrealloc(view->owed, (size_t)capacity * sizeof *view->owed);
    memset(view->owed + view->slot_capacity, 0, (size_t)(capacity - view->slot_capacity) * sizeof *view->owed);
    size_t words = ((size_t)view->slot_capacity + 63) / 64, new_words = ((size_t)capacity + 63) / 64;
    view->touched = xrealloc(view->touched, new_words * sizeof *view->touched);
    view->touched_aliases = xrealloc(view->touched_aliases, (size_t)capacity * sizeof *view->touched_aliases);
    memset(view->touched + words, 0, (new_words - words) * sizeof *view->touched);
    view->slot_capacity = capacity;
}

/* Makes room for slot `alias`. */
static void witness_reserve_slot(witness *view, uint32_t alias) {
    if (alias < view->slot_capacity) return;
    uint32_t capacity = view->slot_capacity ? view->slot_capacity : 64;
    while (capacity <= alias) capacity *= 2;
    if (capacity > view->max_aliases) capacity = view->max_aliases;
    witness_grow_slots(view, capacity);
}

/* Gives `entity` an alias and schedules its ENTER. Returns false when the
 * client's alias table is full. */
static bool witness_enter(witness *view, cell *c, cell_entity *entity, float distance, bool is_owner, uint64_t now_ms) {
    uint32_t alias = alias_table_assign(view->aliases, entity->id, now_ms);
    if (alias == ALIAS_NONE) {
        c->shared->witness_totals.aliases_exhausted++;
        if (!view->warned_exhausted) {
            log_warn("entity %llu: all %u aliases are in use or cooling down; entity %llu waits",
                     (unsigned long long)view->owner_id, view->max_aliases, (unsigned long long)entity->id);
            view->warned_exhausted = true;
        }
        return false;
    }
    witness_reserve_slot(view, alias);
    witness_slot *slot = &view->slots[alias];
    witness_clear_slot(view, alias);
    slot->entity = entity;
    slot->entity_id = entity->id;
    witness_observe(view, alias);
    volatile_track_init(&slot->track);
    slot->detail = (uint8_t)(is_owner ? ENTITY_DEF_DETAIL_NEAR : witness_detail_at(c, distance));
    witness_add_member(view, alias);
    slot->entering = true;
    if (is_owner) view->self_alias = alias;
    witness_budget_forget(view->budget, alias);
    replication_span span = replication_entity_span(c->shared->replication, &entity->replication,
                                                    replication_audience_for(is_owner, slot->detail), true);
    witness_offer(view, alias, distance, (uint32_t)(span.bits / 8) + 2 + WITNESS_MOVE_ESTIMATE, true);
    if (c->shared->report_views && !is_owner) cell_note_view(c, view->owner_id, entity->id, true);
    return true;
}

/* Brings a slot's detail level to `detail`: what a finer level adds is
 * owed, current; what a coarser one drops is not. */
static void witness_set_detail(witness *view, cell *c, uint32_t alias, const cell_entity *entity,
                               entity_def_detail detail) {
    witness_slot *slot = &view->slots[alias];
    if (detail < slot->detail) {
        const entity_state_mask *now = witness_audience_mask(c, entity, false, detail);
        const entity_state_mask *before = witness_audience_mask(c, entity, false, slot->detail);
        entity_state_mask added;
        for (int k = 0; k < ENTITY_STATE_MASK_WORDS; k++) added.words[k] = now->words[k] & ~before->words[k];
        witness_owe(view, alias, &added);
    } else if (detail > slot->detail) {
        witness_owe_only(view, alias, witness_audience_mask(c, entity, false, detail));
    }
    slot->detail = (uint8_t)detail;
}

/* Works out what a touched entity, already known to the client, owes it,
 * and offers it. */
static void witness_consider(witness *view, cell *c, uint32_t alias, cell_entity *entity, float distance,
                             bool is_owner) {
    witness_slot *slot = &view->slots[alias];
    bool news = false; /* something the budget does not know of yet */
    if (!is_owner) {
        entity_def_detail detail = witness_detail_for(c, (entity_def_detail)slot->detail, distance);
        if (detail != slot->detail) {
            witness_set_detail(view, c, alias, entity, detail);
            news = true;
        }
        if (entity->moved && !slot->move_pending) {
            slot->move_pending = true;
            news = true;
        }
    }
    size_t update_bits = 0;
    if (entity->packed)
        update_bits = replication_entity_span(c->shared->replication, &entity->replication,
                                              replication_audience_for(is_owner, slot->detail), false)
                          .bits;
    slot->update_bits = (uint32_t)update_bits;
    bool owes_properties = update_bits > 0 || slot->owes_properties;
    if (!owes_properties && !slot->move_pending) return;
    /* Already waiting in the budget with nothing new: it keeps its place. */
    if (!news && update_bits == 0 && witness_is_pending(view, alias)) return;
    uint32_t bytes = (uint32_t)((update_bits + 7) / 8) + (slot->move_pending ? WITNESS_MOVE_ESTIMATE : 0) + 1;
    if (slot->owes_properties) bytes += 4; /* a refresh: values not known in advance */
    witness_offer(view, alias, distance, bytes, false);
}

/* Writes what a selected alias owes that is not a shared UPDATE: its ENTER,
 * or the owed properties with their current values. A shared UPDATE is
 * queued in `refs` for the batch instead. Returns the bits written. */
static size_t witness_write_first(witness *view, cell *c, uint32_t alias, bool is_owner, size_t *ref_count) {
    witness_slot *slot = &view->slots[alias];
    cell_entity *entity = slot->entity;
    bit_writer *w = &c->shared->stream;
    size_t before = bit_writer_bits(w);
    if (slot->entering) {
        replication_append_enter(c->shared->replication, &entity->replication, w, alias, view->alias_bits, is_owner,
                                 (entity_def_detail)slot->detail);
        slot->entering = false;
        slot->move_pending = true; /* the client learns where it is */
        witness_owe_nothing(view, alias);
    } else if (slot->owes_properties) {
        entity_state_mask props;
        if (entity->packed) {
            witness_dirty_for(c, entity, is_owner, (entity_def_detail)slot->detail, &props);
            witness_mask_or(&props, &view->owed[alias]);
        } else {
            props = view->owed[alias];
        }
        replication_append_properties(c->shared->replication, &entity->replication, w, alias, view->alias_bits, &props);
        witness_owe_nothing(view, alias);
    } else if (entity->packed) {
        view->refs[(*ref_count)++] = (replication_ref){
            &entity->replication, alias, (uint8_t)replication_audience_for(is_owner, (entity_def_detail)slot->detail)};
        slot->batched = true;
    }
    return bit_writer_bits(w) - before;
}

/* Whether `entity`'s position can be sent in this cell's quantized world;
 * when it can, entity->quantized holds it. A hundred witnesses may send one
 * mover in a tick: the division and rounding are done once, again only
 * when the position or the world changed (positions are finite, and a
 * zero of either sign quantizes alike). */
static bool witness_quantized(const cell *c, cell_entity *entity) {
    const float *from = entity->quantized_from;
    if (entity->quantized_for == &c->volatile_config && from[0] == entity->x && from[1] == entity->y &&
        from[2] == entity->z && from[3] == entity->yaw)
        return entity->quantized_ok;
    entity->quantized_from[0] = entity->x;
    entity->quantized_from[1] = entity->y;
    entity->quantized_from[2] = entity->z;
    entity->quantized_from[3] = entity->yaw;
    entity->quantized_for = &c->volatile_config;
    entity->quantized_ok = volatile_codec_quantize(&c->volatile_config, entity->x, entity->y, entity->z, entity->yaw,
                                                   &entity->quantized) == 0;
    return entity->quantized_ok;
}

/* Writes a selected alias's MOVE if it moved (or just entered). Returns the
 * bits written. */
static size_t witness_write_move(witness *view, cell *c, uint32_t alias) {
    witness_slot *slot = &view->slots[alias];
    if (!slot->move_pending) return 0;
    slot->move_pending = false;
    cell_entity *entity = slot->entity;
    /* The own client walks its entity itself: it gets its position once,
     * with the ENTER, and corrections when a move is refused. A position
     * outside the quantized world (a ghost from a peer configured with
     * other bounds) cannot be sent and is skipped. */
    if (!witness_quantized(c, entity)) return 0;
    bit_writer *w = &c->shared->stream;
    size_t before = bit_writer_bits(w);
    replication_append_move_header(w, alias, view->alias_bits);
    volatile_codec_encode_quantized(w, &slot->track, &c->volatile_config, &entity->quantized);
    return bit_writer_bits(w) - before;
}

/* Rechecks the detail level of a tenth of the view (tick_hz ticks make all
 * of it), since the viewer's own steps change it: an entity whose level
 * changed is touched, and owes what the finer level adds. */
static void witness_sweep_details(witness *view, cell *c, const cell_entity *owner) {
    size_t hz = (size_t)c->shared->settings->witness.tick_hz;
    size_t count = (view->member_count + hz - 1) / hz;
    for (size_t k = 0; k < count && view->member_count; k++) {
        if (view->sweep_cursor >= view->member_count) view->sweep_cursor = 0;
        witness_prefetch(view, view->members, view->member_count, view->sweep_cursor);
        uint32_t alias = view->members[view->sweep_cursor++];
        witness_slot *slot = &view->slots[alias];
        if (alias == view->self_alias || witness_is_touched(view, alias) || slot->entering || !slot->entity ||
            slot->entity->destroyed)
            continue;
        float distance = witness_distance(c, owner, slot->entity);
        if (witness_detail_for(c, (entity_def_detail)slot->detail, distance) != slot->detail)
            witness_touch(view, alias);
    }
}

/* Gives the entities that entered the view (and those still waiting for
 * an alias) their aliases and ENTERs. */
static void witness_admit(witness *view, cell *c, cell_entity *owner, uint64_t now_ms) {
    size_t still_waiting = 0;
    for (size_t i = 0; i < view->waiting_count; i++) {
        witness_waiting waiting = view->waiting[i];
        cell_entity *other = coord_entity_user_data(c->coord, waiting.coord_id);
        if (!other || other->id != waiting.entity_id || other->destroyed ||
            !coord_watcher_sees(c->coord, view->watcher, waiting.coord_id) ||
            alias_table_find(view->aliases, other->id) != ALIAS_NONE)
            continue;
        if (!witness_enter(view, c, other, witness_distance(c, owner, other), false, now_ms))
            view->waiting[still_waiting++] = waiting;
    }
    view->waiting_count = still_waiting;
    for (size_t i = 0; i < view->entered_count; i++) {
        uint32_t coord_id = view->entered[i];
        cell_entity *other = coord_entity_user_data(c->coord, coord_id);
        if (!other || other->destroyed || alias_table_find(view->aliases, other->id) != ALIAS_NONE) continue;
        if (!witness_enter(view, c, other, witness_distance(c, owner, other), false, now_ms)) {
            witness_waiting waiting = {coord_id, other->id};
            WITNESS_PUSH(view->waiting, view->waiting_count, view->waiting_capacity, waiting);
        }
    }
    view->entered_count = 0;
}

size_t witness_update(witness *view, cell *c, cell_entity *owner, const uint8_t **payload) {
    *payload = NULL;
    uint64_t now_ms = clock_monotonic_us() / 1000;
    bit_writer *w = &c->shared->stream;
    bit_writer_reset(w);
    witness_begin(view);
    if (view->awaited_count) witness_resolve_awaited(view, c, now_ms);

    /* 1. Leaves: mandatory, written first. */
    size_t records = 0;
    for (size_t i = 0; i < view->left_count; i++) {
        uint32_t alias = alias_table_release(view->aliases, view->left[i], now_ms);
        if (alias == ALIAS_NONE) continue; /* never sent (its alias table was full), or already gone */
        witness_check_leave(view, c, owner, view->left[i]);
        witness_unobserve(view, alias);
        witness_remove_member(view, alias);
        witness_clear_slot(view, alias);
        witness_budget_forget(view->budget, alias);
        size_t bits = replication_append_leave(w, alias, view->alias_bits);
        witness_offer(view, alias, 0, (uint32_t)((bits + 7) / 8), true);
        records++;
        if (c->shared->report_views) cell_note_view(c, view->owner_id, view->left[i], false);
    }
    view->left_count = 0;

    /* 2. The own entity, then whatever entered. */
    if (view->self_alias == ALIAS_NONE) witness_enter(view, c, owner, 0, true, now_ms);
    witness_admit(view, c, owner, now_ms);

    /* 3. What changed: this tick's tenth of the view for its detail levels,
     * then every touched entity. */
    witness_sweep_details(view, c, owner);
    size_t words = ((size_t)view->slot_capacity + 63) / 64, touched_count = 0;
    for (size_t word = 0; word < words; word++) {
        for (uint64_t bits = view->touched[word]; bits; bits &= bits - 1)
            view->touched_aliases[touched_count++] = (uint32_t)(word * 64 + (size_t)__builtin_ctzll(bits));
        view->touched[word] = 0;
    }
    for (size_t i = 0; i < touched_count; i++) {
        if (i % WITNESS_PREFETCH_BATCH == 0)
            witness_prefetch_batch(view, view->touched_aliases, i,
                                   i + WITNESS_PREFETCH_BATCH < touched_count ? i + WITNESS_PREFETCH_BATCH
                                                                              : touched_count);
        uint32_t alias = view->touched_aliases[i];
        witness_slot *slot = &view->slots[alias];
        cell_entity *other = slot->entity;
        if (!other || other->destroyed || slot->entering) continue;
        bool is_owner = alias == view->self_alias;
        witness_consider(view, c, alias, other, is_owner ? 0 : witness_distance(c, owner, other), is_owner);
    }

    /* 4. The budget's choice, among everything pending. */
    size_t room = view->offered_count + witness_budget_pending_count(view->budget);
    if (view->selected_capacity < room) {
        view->selected_capacity = room + room / 4;
        view->selected = xrealloc(view->selected, view->selected_capacity * sizeof *view->selected);
    }
    uint32_t chosen = 0;
    if (witness_budget_select(view->budget, view->selected, (uint32_t)view->selected_capacity, &chosen) != 0)
        log_panic("entity %llu: budget selection failed", (unsigned long long)view->owner_id);

    /* 5. The chosen records, in the budget's order: enters and refreshes,
     * then the shared UPDATEs in one batch (replication's hot path), then
     * the moves. An entity freed since it was offered writes nothing (its
     * LEAVE is coming). */
    if (view->ref_capacity < chosen) {
        view->ref_capacity = chosen + chosen / 4;
        view->refs = xrealloc(view->refs, view->ref_capacity * sizeof *view->refs);
    }
    size_t ref_count = 0;
    for (uint32_t i = 0; i < chosen; i++) {
        if (i % WITNESS_PREFETCH_BATCH == 0)
            witness_prefetch_batch(view, view->selected, i,
                                   i + WITNESS_PREFETCH_BATCH < chosen ? i + WITNESS_PREFETCH_BATCH : chosen);
        uint32_t alias = view->selected[i];
        witness_slot *slot = &view->slots[alias];
        slot->selected = true;
        slot->pending = false;
        slot->written_bits = 0;
        if (slot->entity_id == 0 || !slot->entity || slot->entity->destroyed) continue; /* a leave, or gone */
        slot->written_bits = (uint32_t)witness_write_first(view, c, alias, alias == view->self_alias, &ref_count);
    }
    replication_append_updates(c->shared->replication, w, view->refs, ref_count, view->alias_bits);
    for (uint32_t i = 0; i < chosen; i++) {
        uint32_t alias = view->selected[i];
        witness_slot *slot = &view->slots[alias];
        slot->selected = false;
        if (slot->entity_id == 0) continue;
        size_t bits = slot->written_bits;
        if (slot->entity && !slot->entity->destroyed) bits += witness_write_move(view, c, alias);
        if (slot->batched) {
            /* The batch wrote kind and alias, then the span witness_consider
             * measured. */
            if (slot->update_bits) bits += slot->update_bits + 2 + view->alias_bits;
            slot->batched = false;
        }
        if (bits) {
            witness_budget_commit(view->budget, alias, (uint32_t)((bits + 7) / 8));
            records++;
        } else {
            witness_budget_withdraw(view->budget, alias); /* nothing to write after all */
        }
    }
    /* What waits: the changes of this tick become owed properties. */
    for (size_t i = 0; i < view->offered_count; i++) {
        witness_slot *slot = &view->slots[view->offered[i]];
        if (slot->entity_id != 0 && witness_is_pending(view, view->offered[i])) {
            c->shared->witness_totals.records_held++;
            if (slot->update_bits && slot->entity && !slot->entering) {
                entity_state_mask owed;
                witness_dirty_for(c, slot->entity, view->offered[i] == view->self_alias,
                                  (entity_def_detail)slot->detail, &owed);
                witness_owe(view, view->offered[i], &owed);
            }
        }
        slot->offered = false;
        slot->update_bits = 0;
    }

    view->tick_begun = false;
    if (records == 0 && view->call_count == 0 && view->event_count == 0) return 0;
    replication_append_end(w);
    c->shared->witness_totals.stream_bytes += bit_writer_bytes(w);

    Tessera__Client__ViewUpdate update = TESSERA__CLIENT__VIEW_UPDATE__INIT;
    update.tick = c->tick;
    update.ticks_restart = view->ticks_sent_from != c;
    view->ticks_sent_from = c;
    update.stream.data = (uint8_t *)bit_writer_data(w);
    update.stream.len = bit_writer_bytes(w);
    update.stamp_us = clock_wall_us();
    Tessera__Client__ClientCall *calls = NULL, **call_pointers = NULL;
    if (view->call_count) {
        calls = xcalloc(view->call_count, sizeof *calls);
        call_pointers = xcalloc(view->call_count, sizeof(Tessera__Client__ClientCall *));
        size_t kept = 0;
        for (size_t i = 0; i < view->call_count; i++) {
            /* A call for an entity that left the view in this very stream
             * would reach a client that no longer knows it. */
            if (!witness_sees(view, view->calls[i].entity_id)) continue;
            Tessera__Client__ClientCall init = TESSERA__CLIENT__CLIENT_CALL__INIT;
            calls[kept] = init;
            calls[kept].entity_id = view->calls[i].entity_id;
            calls[kept].method_id = view->calls[i].method_id;
            calls[kept].args.data = view->calls[i].args;
            calls[kept].args.len = view->calls[i].length;
            call_pointers[kept] = &calls[kept];
            kept++;
        }
        update.n_calls = kept;
        update.calls = call_pointers;
    }
    Tessera__Client__GameEvent *events = NULL, **event_pointers = NULL;
    if (view->event_count) {
        events = xcalloc(view->event_count, sizeof *events);
        event_pointers = xcalloc(view->event_count, sizeof(Tessera__Client__GameEvent *));
        size_t kept = 0;
        for (size_t i = 0; i < view->event_count; i++) {
            const witness_event *queued = &view->events[i];
            if (queued->needs_view && !witness_sees(view, queued->source_id)) continue;
            Tessera__Client__GameEvent init = TESSERA__CLIENT__GAME_EVENT__INIT;
            events[kept] = init;
            events[kept].event_id = queued->event_id;
            events[kept].source_id = queued->source_id;
            events[kept].args.data = queued->args;
            events[kept].args.len = queued->length;
            event_pointers[kept] = &events[kept];
            kept++;
        }
        update.n_events = kept;
        update.events = event_pointers;
    }
    Tessera__Client__ServerToClient message = TESSERA__CLIENT__SERVER_TO_CLIENT__INIT;
    message.body_case = TESSERA__CLIENT__SERVER_TO_CLIENT__BODY_VIEW;
    message.view = &update;
    size_t length = tessera__client__server_to_client__get_packed_size(&message);
    if (view->payload_capacity < length) {
        view->payload_capacity = length + length / 2;
        view->payload = xrealloc(view->payload, view->payload_capacity);
    }
    tessera__client__server_to_client__pack(&message, view->payload);
    *payload = view->payload;
    free(calls);
    free(call_pointers);
    free(events);
    free(event_pointers);
    witness_free_calls(view);
    return length;
}

/* ---- moving a witness between cellapps ---------------------------------- */

void witness_save(const witness *view, const cell *c, Tessera__Cluster__WitnessState *out) {
    tessera__cluster__witness_state__init(out);
    uint32_t next_unused = alias_table_next_unused(view->aliases);
    uint32_t in_use = alias_table_in_use(view->aliases);
    out->aliases = in_use ? xcalloc(in_use, sizeof(Tessera__Cluster__WitnessAlias *)) : NULL;
    for (uint32_t alias = 0; alias < next_unused && out->n_aliases < in_use; alias++) {
        uint64_t entity_id = alias_table_entity(view->aliases, alias);
        if (!entity_id) continue;
        Tessera__Cluster__WitnessAlias *saved = xmalloc(sizeof *saved);
        tessera__cluster__witness_alias__init(saved);
        saved->alias = alias;
        saved->entity_id = entity_id;
        if (alias < view->slot_capacity) {
            const witness_slot *slot = &view->slots[alias];
            saved->detail = slot->detail;
            saved->n_pending = ENTITY_STATE_MASK_WORDS;
            saved->pending = xmalloc(sizeof view->owed[alias].words);
            memcpy(saved->pending, view->owed[alias].words, sizeof view->owed[alias].words);
            saved->move_pending = slot->move_pending;
            saved->track_valid = slot->track.valid;
            saved->track_x = slot->track.x;
            saved->track_y = slot->track.y;
            saved->track_z = slot->track.z;
            saved->track_yaw = slot->track.yaw;
        }
        witness_budget_alias_state history;
        witness_budget_alias_save(view->budget, alias, &history);
        saved->has_sent = history.has_sent;
        saved->last_sent = history.last_sent;
        saved->has_offered = history.has_offered;
        saved->pending_since = history.pending_since;
        saved->last_offered = history.last_offered;
        saved->offered_bytes = history.offered_bytes;
        saved->offered_distance = history.offered_distance;
        saved->pending_order = history.pending_order;
        const cell_entity *copy = cell_find(c, entity_id);
        if (copy) {
            saved->move_count = copy->move_count;
            saved->property_count = copy->property_count;
        } else {
            /* Still awaited here: the next cellapp awaits it in turn, from
             * what the client's knowledge of it was. */
            for (size_t i = 0; i < view->awaited_count; i++)
                if (view->awaited[i].entity_id == entity_id) {
                    saved->move_count = view->awaited[i].move_count;
                    saved->property_count = view->awaited[i].property_count;
                }
        }
        out->aliases[out->n_aliases++] = saved;
    }
    out->next_unused_alias = next_unused;
    uint64_t now_ms = clock_monotonic_us() / 1000;
    uint32_t cooling = alias_table_cooling(view->aliases, now_ms, NULL, 0);
    if (cooling) {
        alias_table_cooling_entry *entries = xcalloc(cooling, sizeof *entries);
        alias_table_cooling(view->aliases, now_ms, entries, cooling);
        out->cooling = xcalloc(cooling, sizeof(Tessera__Cluster__AliasCooling *));
        for (uint32_t i = 0; i < cooling; i++) {
            Tessera__Cluster__AliasCooling *saved = xmalloc(sizeof *saved);
            tessera__cluster__alias_cooling__init(saved);
            saved->alias = entries[i].alias;
            saved->remaining_ms = entries[i].remaining_ms;
            out->cooling[i] = saved;
        }
        out->n_cooling = cooling;
        free(entries);
    }
    uint64_t budget_tick;
    witness_budget_save(view->budget, &budget_tick, &out->budget_credit, &out->budget_allowance_remainder);
    out->budget_tick = view->budget_tick > budget_tick ? view->budget_tick : budget_tick;
    if (view->call_count) {
        out->calls = xcalloc(view->call_count, sizeof(Tessera__Client__ClientCall *));
        for (size_t i = 0; i < view->call_count; i++) {
            Tessera__Client__ClientCall *call = xmalloc(sizeof *call);
            tessera__client__client_call__init(call);
            call->entity_id = view->calls[i].entity_id;
            call->method_id = view->calls[i].method_id;
            call->args.data = view->calls[i].args;
            call->args.len = view->calls[i].length;
            out->calls[i] = call;
        }
        out->n_calls = view->call_count;
    }
    if (view->event_count) {
        out->events = xcalloc(view->event_count, sizeof(Tessera__Cluster__QueuedEvent *));
        for (size_t i = 0; i < view->event_count; i++) {
            /* One allocation holds the queued entry and its event. */
            struct {
                Tessera__Cluster__QueuedEvent queued;
                Tessera__Client__GameEvent event;
            } *saved = xmalloc(sizeof *saved);
            tessera__cluster__queued_event__init(&saved->queued);
            tessera__client__game_event__init(&saved->event);
            saved->event.event_id = view->events[i].event_id;
            saved->event.source_id = view->events[i].source_id;
            saved->event.args.data = view->events[i].args;
            saved->event.args.len = view->events[i].length;
            saved->queued.event = &saved->event;
            saved->queued.needs_view = view->events[i].needs_view;
            out->events[i] = &saved->queued;
        }
        out->n_events = view->event_count;
    }
    out->congested = view->congested;
    if (view->left_count) {
        out->left = xmalloc(view->left_count * sizeof *out->left);
        memcpy(out->left, view->left, view->left_count * sizeof *out->left);
        out->n_left = view->left_count;
    }
}

void witness_saved_free(Tessera__Cluster__WitnessState *state) {
    for (size_t i = 0; i < state->n_aliases; i++) {
        free(state->aliases[i]->pending);
        free(state->aliases[i]);
    }
    free(state->aliases);
    for (size_t i = 0; i < state->n_cooling; i++) free(state->cooling[i]);
    free(state->cooling);
    for (size_t i = 0; i < state->n_calls; i++) free(state->calls[i]); /* args belong to the witness */
    free(state->calls);
    for (size_t i = 0; i < state->n_events; i++)
        free(state->events[i]); /* the event shares it; args are the witness's */
    free(state->events);
    free(state->left);
    tessera__cluster__witness_state__init(state);
}

/* Rebuilds the alias table, the slots and the budget from `state` into
 * `view`. Returns 0, or -1 when the state does not fit this cellapp's
 * max_aliases. */
static int witness_restore_tables(witness *view, const witness_config *settings,
                                  const Tessera__Cluster__WitnessState *state, uint64_t now_ms) {
    uint32_t next_unused = state->next_unused_alias;
    if (next_unused > view->max_aliases) return -1;
    uint64_t *entity_of = xcalloc(next_unused ? next_unused : 1, sizeof *entity_of);
    for (size_t i = 0; i < state->n_aliases; i++) {
        const Tessera__Cluster__WitnessAlias *saved = state->aliases[i];
        if (saved->alias >= next_unused || saved->entity_id == 0 || entity_of[saved->alias]) {
            free(entity_of);
            return -1;
        }
        entity_of[saved->alias] = saved->entity_id;
    }
    alias_table_cooling_entry *cooling = xcalloc(state->n_cooling ? state->n_cooling : 1, sizeof *cooling);
    for (size_t i = 0; i < state->n_cooling; i++) {
        cooling[i].alias = state->cooling[i]->alias;
        cooling[i].remaining_ms = state->cooling[i]->remaining_ms;
    }
    alias_table *aliases = alias_table_restore(view->max_aliases, (uint64_t)settings->alias_cooldown_ms, next_unused,
                                               entity_of, cooling, (uint32_t)state->n_cooling, now_ms);
    free(entity_of);
    free(cooling);
    if (!aliases) return -1;
    alias_table_free(view->aliases);
    view->aliases = aliases;
    witness_grow_slots(view, next_unused);
    witness_budget_restore(view->budget, state->budget_tick, state->budget_credit, state->budget_allowance_remainder);
    view->budget_tick = state->budget_tick;
    for (size_t i = 0; i < state->n_aliases; i++) {
        const Tessera__Cluster__WitnessAlias *saved = state->aliases[i];
        witness_slot *slot = &view->slots[saved->alias];
        witness_clear_slot(view, saved->alias);
        slot->entity_id = saved->entity_id;
        slot->detail = (uint8_t)(saved->detail <= ENTITY_DEF_DETAIL_FAR ? saved->detail : ENTITY_DEF_DETAIL_FAR);
        entity_state_mask owed = {{0}};
        for (size_t k = 0; k < saved->n_pending && k < ENTITY_STATE_MASK_WORDS; k++) owed.words[k] = saved->pending[k];
        witness_owe(view, saved->alias, &owed);
        slot->move_pending = saved->move_pending;
        slot->track.valid = saved->track_valid;
        slot->track.x = saved->track_x;
        slot->track.y = saved->track_y;
        slot->track.z = saved->track_z;
        slot->track.yaw = saved->track_yaw;
        witness_budget_alias_state history = {saved->has_sent,         saved->last_sent,    saved->has_offered,
                                              saved->pending_since,    saved->last_offered, saved->offered_bytes,
                                              saved->offered_distance, saved->pending_order};
        witness_budget_alias_restore(view->budget, saved->alias, &history);
        slot->pending = witness_budget_is_pending(view->budget, saved->alias);
    }
    return 0;
}

/* The copy of `other` here may be ahead of the one the client's knowledge
 * came from (a real here whose ghost there was a tick behind, or a ghost
 * that arrived after the witness): the changes it took in before were
 * never offered to this client, so what they touched is owed now. A copy
 * behind needs nothing: its changes are still on the way, and are offered
 * when they come. */
static void witness_catch_up(witness *view, const cell *c, uint32_t alias, uint32_t move_count, uint32_t property_count,
                             const cell_entity *other) {
    witness_slot *slot = &view->slots[alias];
    if (cell_change_count_ahead(move_count, other->move_count)) slot->move_pending = true;
    if (cell_change_count_ahead(property_count, other->property_count))
        witness_owe(view, alias, witness_audience_mask(c, other, false, (entity_def_detail)slot->detail));
}

/* Puts `other`, which the client knows by `alias` (a restored slot), in
 * the view here without an ENTER: the watcher's next flush keeps it if it
 * is within the view's outer extent, and leaves it otherwise. Returns -1
 * when the coordinate system refuses it. */
static int witness_take_known(witness *view, cell *c, uint32_t alias, uint32_t move_count, uint32_t property_count,
                              cell_entity *other) {
    if (coord_watcher_seed(c->coord, view->watcher, other->coord_id) != 0) return -1;
    witness_slot *slot = &view->slots[alias];
    slot->entity = other;
    witness_observe(view, alias);
    witness_add_member(view, alias);
    witness_catch_up(view, c, alias, move_count, property_count, other);
    /* What it still owes goes to the budget at the next update. */
    if (slot->move_pending || slot->owes_properties) witness_touch(view, alias);
    return 0;
}

/* A LEAVE for `entity_id`, which this cell still holds well inside the
 * view, is a disagreement between the coordinate system and the
 * positions: counted, and logged (the first few, then every thousandth). */
static void witness_check_leave(const witness *view, cell *c, const cell_entity *owner, uint64_t entity_id) {
    const cell_entity *other = cell_find(c, entity_id);
    if (!other || other == owner) return;
    float distance = witness_distance(c, owner, other);
    if (distance >= (float)c->shared->settings->witness.view_radius) return;
    uint64_t count = ++c->shared->witness_totals.near_leaves;
    if (count <= 10 || count % 1000 == 0)
        log_warn("entity %llu: entity %llu (%s) left its view %.1f m away, inside the view radius (%g m): the "
                 "coordinate system disagrees with the positions (%llu such leaves so far)",
                 (unsigned long long)view->owner_id, (unsigned long long)entity_id,
                 other->kind == CELL_ENTITY_REAL ? "real" : "ghost", (double)distance,
                 c->shared->settings->witness.view_radius, (unsigned long long)count);
}

/* The awaited entities whose copies came are taken into the view; those
 * that did not come in time, or whose copy here the coordinate system
 * refuses, leave (at this update). One the client no longer knows by that
 * alias is forgotten. */
static void witness_resolve_awaited(witness *view, cell *c, uint64_t now_ms) {
    size_t still_awaited = 0;
    for (size_t i = 0; i < view->awaited_count; i++) {
        witness_awaited awaited = view->awaited[i];
        if (alias_table_find(view->aliases, awaited.entity_id) != awaited.alias) continue;
        cell_entity *other = cell_find(c, awaited.entity_id);
        if (other && witness_take_known(view, c, awaited.alias, awaited.move_count, awaited.property_count, other) == 0)
            continue;
        if (other || now_ms >= awaited.deadline_ms) {
            if (!other) c->shared->witness_totals.arrivals_missed++;
            log_debug("entity %llu: entity %llu, which its client knows, %s: it leaves",
                      (unsigned long long)view->owner_id, (unsigned long long)awaited.entity_id,
                      other ? "cannot be watched here" : "never came");
            WITNESS_PUSH(view->left, view->left_count, view->left_capacity, awaited.entity_id);
            continue;
        }
        view->awaited[still_awaited++] = awaited;
    }
    view->awaited_count = still_awaited;
}

int witness_restore(cell *c, cell_entity *entity, const Tessera__Cluster__WitnessState *state) {
    if (cell_entity_witness(entity)) witness_detach(c, entity);
    const witness_config *settings = &c->shared->settings->witness;
    witness *view = witness_create(settings, entity->id);
    uint64_t now_ms = clock_monotonic_us() / 1000;
    int rc = witness_restore_tables(view, settings, state, now_ms);
    if (rc != 0) {
        log_warn("entity %llu: its witness does not fit this cellapp's max_aliases (%u): starting a fresh one",
                 (unsigned long long)entity->id, view->max_aliases);
        witness_free(view);
        witness_attach(c, entity);
        return -1;
    }
    for (size_t i = 0; i < state->n_calls; i++)
        witness_queue_call(view, state->calls[i]->entity_id, state->calls[i]->method_id, state->calls[i]->args.data,
                           state->calls[i]->args.len);
    for (size_t i = 0; i < state->n_events; i++) {
        const Tessera__Cluster__QueuedEvent *queued = state->events[i];
        if (!queued->event) continue;
        witness_queue_event(view, queued->event->source_id, queued->event->event_id, queued->event->args.data,
                            queued->event->args.len, queued->needs_view);
    }
    view->congested = state->congested;
    for (size_t i = 0; i < state->n_left; i++)
        WITNESS_PUSH(view->left, view->left_count, view->left_capacity, state->left[i]);
    witness_watch(c, entity, view);
    /* The view starts with what the client knew: what is still within the
     * view here stays without a LEAVE or ENTER; what this cell does not
     * hold yet is awaited (witness_resolve_awaited). The detail watchers
     * start from the levels the client was given, and correct them at the
     * next flush. */
    for (size_t i = 0; i < state->n_aliases; i++) {
        const Tessera__Cluster__WitnessAlias *saved = state->aliases[i];
        witness_slot *slot = &view->slots[saved->alias];
        if (saved->entity_id == entity->id) {
            view->self_alias = saved->alias;
            slot->entity = entity;
            witness_observe(view, saved->alias);
            witness_add_member(view, saved->alias);
            continue;
        }
        cell_entity *other = cell_find(c, saved->entity_id);
        if (other) {
            if (witness_take_known(view, c, saved->alias, saved->move_count, saved->property_count, other) != 0)
                WITNESS_PUSH(view->left, view->left_count, view->left_capacity, saved->entity_id);
            continue;
        }
        witness_awaited awaited = {saved->entity_id, saved->alias, saved->move_count, saved->property_count,
                                   now_ms + WITNESS_ARRIVAL_WAIT_MS};
        WITNESS_PUSH(view->awaited, view->awaited_count, view->awaited_capacity, awaited);
        c->shared->witness_totals.arrivals_awaited++;
    }
    witness_budget_hold(view->budget, view->congested);
    return 0;
}

void witness_reset(cell *c, cell_entity *entity) {
    witness_detach(c, entity);
    witness_attach(c, entity);
}
