/* timer.h -- many timers on one libuv timer handle.
 *
 * Game code sets thousands of timers (entity thinks, cooldowns, heartbeats);
 * giving each its own uv_timer_t would cost a handle and a heap node in the
 * loop each. A timer_set keeps its timers in a binary min-heap by due time
 * and arms one uv_timer_t for the earliest. Timers are named by 64-bit ids
 * that are never reused, so cancelling an id that already fired is a no-op.
 *
 * A callback may set and cancel timers (itself included) freely. Timers due
 * in the same pass fire in (due time, id) order. A timer set with interval 0
 * fires once; otherwise it repeats every interval milliseconds, its next due
 * time counted from the previous due time (no drift), skipping missed
 * periods after a long stall rather than firing in a burst.
 *
 * Everything a timer is (id, due time relative to now, interval, tag) can be
 * read back with timer_set_describe so that an entity's timers can be
 * serialized when it moves between processes.
 */
#ifndef TESSERA_TIMER_H
#define TESSERA_TIMER_H

#include <stdint.h>
#include <uv.h>

typedef struct timer_set timer_set;
typedef void (*timer_callback)(timer_set *set, uint64_t timer_id, void *user_data);

/* Creates a set on `loop`. NULL on failure. */
timer_set *timer_set_create(uv_loop_t *loop);
/* Cancels every timer (no callback fires after this call) and closes the
 * uv handle; the memory is released in the close callback, so the loop must
 * run once more. */
void timer_set_free(timer_set *set);

/* Fires `callback(set, id, user_data)` after `delay_ms`, then every
 * `interval_ms` if that is non-zero. `tag` is an opaque value kept for
 * timer_set_describe. Returns the id (> 0), or 0 when out of memory. */
uint64_t timer_set_add(timer_set *set, uint64_t delay_ms, uint64_t interval_ms,
                       timer_callback callback, void *user_data, uint64_t tag);

/* Cancels a timer. Returns 0 if it was pending, -1 if unknown (already fired
 * once-only, or cancelled). */
int timer_set_cancel(timer_set *set, uint64_t timer_id);

/* Number of pending timers. */
size_t timer_set_count(const timer_set *set);

typedef struct timer_description {
    uint64_t timer_id;
    uint64_t remaining_ms;  /* until the next firing, 0 if overdue */
    uint64_t interval_ms;
    uint64_t tag;
    void *user_data;
} timer_description;

/* Fills `out` for a pending timer. Returns 0, or -1 if unknown. */
int timer_set_describe(const timer_set *set, uint64_t timer_id, timer_description *out);

#endif
