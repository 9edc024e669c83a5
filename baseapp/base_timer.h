/* base_timer.h -- the timers of a baseapp's bases (game.h's add_timer on
 * the base side; KBEngine's Base.addTimer): one scheduler per baseapp
 * (common/entity_timer.h), by entity id.
 *
 * Running. The baseapp runs the due timers on its 50 ms beat (main.c's
 * congestion timer), so a timer fires within a beat of its due time; a
 * fenced baseapp (baseapp_fence.h), which acts for none of its bases, runs
 * none. The caller says which bases are live and what a firing does.
 *
 * Whose. A timer belongs to its base: base_timers_cancel refuses another
 * base's id, and base_timers_drop removes every timer of a base that is
 * freed (destroyed, or the baseapp stopping), so none fires for a base that
 * has gone, and none waits for an entity id that may come back (a player
 * logging in again).
 *
 * Travelling. A base lives on one baseapp for its life (a giveClientTo
 * moves its client, not the base), and its timers with it. Its pending
 * timers go with its backup to another baseapp (base_backup.h:
 * BaseBackup.timers, the time left on each then) and come back with the
 * base if its baseapp dies (base_timers_restore), under the same ids, each
 * due the time it had left less the backup's age: those that fell due
 * meanwhile fire at once (a repeating one once, then on its beat). Timers
 * are not written to the database: a base loaded from it (a player's next
 * login, a draining baseapp's player on another baseapp, a cluster
 * restarted) starts with none, and its created hook sets what it needs.
 */
#ifndef TESSERA_BASE_TIMER_H
#define TESSERA_BASE_TIMER_H

#include <stddef.h>
#include <stdint.h>

#include "cluster.pb-c.h"
#include "entity_timer.h"
#include "process_self.h"

typedef struct base_timers base_timers;

/* A delay or a repeat longer than a year is cut to a year: no game means
 * more, and the microsecond clock's sums stay far from overflowing. */
#define BASE_TIMER_MAX_MS ((uint64_t)366 * 24 * 3600 * 1000)

/* Timer ids carry `self`'s process id (read at each add: it is 0 until the
 * baseapp registers). */
base_timers *base_timers_create(const process_self *self);
void base_timers_free(base_timers *timers);

/* A timer of base `entity_id`, due `delay_ms` from now, then every
 * `repeat_ms` (0: once), each at most BASE_TIMER_MAX_MS. Returns its id
 * (> 0). */
uint64_t base_timers_add(base_timers *timers, uint64_t entity_id, uint64_t delay_ms, uint64_t repeat_ms, uint32_t tag,
                         uint64_t user_data);
/* Cancels timer `timer_id` of base `entity_id`. Returns 0, or -1 when that
 * base has no such timer pending. */
int base_timers_cancel(base_timers *timers, uint64_t entity_id, uint64_t timer_id);
/* Runs the timers due by `now_us` (monotonic), as entity_timers_run. */
size_t base_timers_run(base_timers *timers, uint64_t now_us, entity_timer_live live, entity_timer_fire fire,
                       void *context);
/* Removes every timer of base `entity_id`. */
void base_timers_drop(base_timers *timers, uint64_t entity_id);
/* The base's timers, their time left counted from `now_us`: at most `cap`
 * into `out`; returns how many it has. */
size_t base_timers_of(const base_timers *timers, uint64_t entity_id, uint64_t now_us, entity_timer_state *out,
                      size_t cap);
/* The same as a backup carries them (entity_timers_save: free them with
 * entity_timers_wire_free), their time left counted from now. */
void base_timers_save(const base_timers *timers, uint64_t entity_id, Tessera__Cluster__TimerState ***out,
                      size_t *count);
/* Sets the timers a backup carried for base `entity_id`, `age_us` after
 * the backup was taken. Returns how many were set (an id already pending
 * here is dropped, logged). */
size_t base_timers_restore(base_timers *timers, uint64_t entity_id, Tessera__Cluster__TimerState *const *states,
                           size_t count, uint64_t age_us);
size_t base_timers_count(const base_timers *timers);

#endif
