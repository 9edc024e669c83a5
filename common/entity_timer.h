/* entity_timer.h -- timers of entities, run by their process's loop
 * (KBEngine's addTimer: an initial delay, an optional repeat, user data,
 * cancel). Two kinds of owner use it: a cellapp's reals (one scheduler per
 * cell, run by its tick) and a baseapp's bases (one scheduler per baseapp,
 * baseapp/base_timer.h).
 *
 * A scheduler is a binary min-heap by (due time, id). The cellapp's tick
 * runs the due timers at a fixed point of its phases (after the layout and
 * the game's own tick, before the coord flush, so what a timer moves or
 * changes goes out in the same tick). Times are monotonic microseconds. A
 * repeating timer is next due `interval` after its last due time, never
 * after when it ran, so its fire count follows the clock exactly; after a
 * stall it catches up, at most ENTITY_TIMER_MAX_CATCH_UP firings per timer
 * per run.
 *
 * Timers move with their entity: entity_timers_take removes an entity's
 * timers for an offload (with the time left on each), entity_timers_put
 * sets them again on the other process under the same ids. Ids are unique
 * in the cluster: the process id in the high bits and one counter per
 * process (entity_timer_ids, shared by all its schedulers) in the low ones,
 * so game code may keep one across moves.
 *
 * The scheduler knows entities by id only: the caller says which ids are
 * live (reals, bases) and what a firing does (entity_timer_live,
 * entity_timer_fire).
 */
#ifndef TESSERA_ENTITY_TIMER_H
#define TESSERA_ENTITY_TIMER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cluster.pb-c.h"

/* Why 10: a second of missed half-second heartbeats; beyond that the
 * process was stopped, and firing a burst would not help anyone. */
#define ENTITY_TIMER_MAX_CATCH_UP 10

typedef struct entity_timer_state {
    uint64_t timer_id;
    uint64_t remaining_us; /* until it is next due */
    uint64_t interval_us;  /* 0: once */
    uint32_t tag;
    uint64_t user_data;
} entity_timer_state;

/* Where a process's timer ids come from: its id (set once registered) and
 * a counter. One per process, shared by all its schedulers, owned by the
 * caller and outliving them. */
typedef struct entity_timer_ids {
    uint64_t prefix;
    uint64_t counter;
} entity_timer_ids;

typedef struct entity_timers entity_timers;

/* Whether entity `entity_id` is a real the scheduler's timers may fire
 * for; a timer of one that is not is dropped. */
typedef bool (*entity_timer_live)(uint64_t entity_id, void *context);
/* Runs when a timer of a live entity is due (after it was re-armed or
 * removed, so the callback may add and cancel timers, its own included). */
typedef void (*entity_timer_fire)(uint64_t entity_id, uint64_t timer_id, uint32_t tag, uint64_t user_data,
                                  void *context);

/* A scheduler taking its new ids from `ids`. */
entity_timers *entity_timers_create(entity_timer_ids *ids);
void entity_timers_free(entity_timers *timers);

/* Sets a timer of entity `entity_id`, due `delay_us` from now_us, then
 * every `interval_us` (0: once). Returns its id (> 0). */
uint64_t entity_timers_add(entity_timers *timers, uint64_t entity_id, uint64_t now_us, uint64_t delay_us,
                           uint64_t interval_us, uint32_t tag, uint64_t user_data);
/* Cancels a timer. Returns 0, or -1 if unknown (fired once-only, cancelled). */
int entity_timers_cancel(entity_timers *timers, uint64_t timer_id);
/* Runs every timer due by now_us, in (due, id) order: a timer whose
 * entity `live` denies is dropped, the others `fire`. Returns the
 * firings. */
size_t entity_timers_run(entity_timers *timers, uint64_t now_us, entity_timer_live live, entity_timer_fire fire,
                         void *context);
/* Removes every timer of `entity_id`; with `out`, describes them there
 * (allocated, *count entries; the caller frees). */
void entity_timers_take(entity_timers *timers, uint64_t entity_id, uint64_t now_us, entity_timer_state **out,
                        size_t *count);
/* Sets described timers again for `entity_id`, keeping their ids. */
void entity_timers_put(entity_timers *timers, uint64_t entity_id, uint64_t now_us, const entity_timer_state *states,
                       size_t count);
size_t entity_timers_count(const entity_timers *timers);
/* The entity whose timer `timer_id` is (0: no such timer pending). */
uint64_t entity_timers_owner(const entity_timers *timers, uint64_t timer_id);

/* The wire form of one entity's timers (proto/cluster.proto: TimerState),
 * as a moved or backed-up entity carries them. entity_timers_save
 * describes them without removing them: *out gets *count pointers (NULL
 * when none), each state allocated; entity_timers_wire_free frees them.
 * entity_timers_load sets them again for `entity_id`, each due its time
 * left less `age_us` (the time since they were described; at once when
 * that is past), under the same ids as entity_timers_put, skipping states
 * without an id; returns how many were set. */
void entity_timers_save(const entity_timers *timers, uint64_t entity_id, uint64_t now_us,
                        Tessera__Cluster__TimerState ***out, size_t *count);
void entity_timers_wire_free(Tessera__Cluster__TimerState **states, size_t count);
size_t entity_timers_load(entity_timers *timers, uint64_t entity_id, uint64_t now_us,
                          Tessera__Cluster__TimerState *const *states, size_t count, uint64_t age_us);
/* Describes the timers of one entity without removing them (state dumps):
 * at most `cap` into `out`; returns how many it has. */
size_t entity_timers_of(const entity_timers *timers, uint64_t entity_id, uint64_t now_us, entity_timer_state *out,
                        size_t cap);

#endif
