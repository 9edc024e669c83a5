/* timer.c -- many timers multiplexed onto one uv_timer_t: the min-heap of
 * pending timers ordered by (due time, id), the id -> timer map that makes
 * cancel O(log n), and the firing pass run from the uv timer callback.
 *
 * It owns the timer records and the uv handle; it does not own user_data.
 * Times are libuv loop milliseconds (uv_now), so a firing pass sees one
 * consistent "now" however long its callbacks take.
 *
 * The firing pass pops every timer due at the pass's "now" in heap order.
 * A repeating timer is rescheduled *before* its callback runs, so the
 * callback may cancel it; a once-only timer is gone before its callback
 * runs, so cancelling it there returns -1. Timers added by a callback never
 * fire in the pass that added them (even with delay 0): that keeps a
 * callback that re-adds itself from looping forever inside one pass. They
 * fire in a later pass, at least one millisecond on (see timer__rearm).
 */
#include "timer.h"

#include <stdio.h>
#include <stdlib.h>

#include "id_map.h"
#include "log.h"

/* First heap allocation, in timers; doubled as needed. */
#define TIMER__INITIAL_HEAP 16u

typedef struct timer__entry {
    uint64_t id;
    uint64_t due;      /* loop time (ms) of the next firing */
    uint64_t interval; /* 0 for once-only */
    timer_callback callback;
    void *user_data;
    uint64_t tag;
    size_t heap_index; /* position in set->heap */
} timer__entry;

struct timer_set {
    uv_timer_t handle;  /* armed for heap[0]->due; handle.data = the set */
    timer__entry **heap;
    size_t heap_count;
    size_t heap_capacity;
    id_map by_id;       /* id -> timer__entry * */
    uint64_t next_id;   /* ids start at 1 and are never reused */
    int firing;         /* inside the firing pass: rearm once at its end */
    int closing;        /* timer_set_free was called; only the close callback remains */
};

/* uv_timer_start only fails on a closing handle or a NULL callback, both
 * excluded here; if it fails anyway an invariant is broken, and silently
 * never firing again would be worse than stopping with file and line. */
#define TIMER__ASSERT(cond)                                          \
    do {                                                             \
        if (!(cond)) log_panic("timer: assertion failed: %s", #cond); \
    } while (0)

static uint64_t timer__add_sat(uint64_t a, uint64_t b) {
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* Heap order: earlier due first, and lower id first among equal due times,
 * so simultaneous timers fire in the order they were set. */
static int timer__before(const timer__entry *a, const timer__entry *b) {
    if (a->due != b->due)
        return a->due < b->due;
    return a->id < b->id;
}

static void timer__heap_place(timer_set *set, size_t i, timer__entry *e) {
    set->heap[i] = e;
    e->heap_index = i;
}

static void timer__sift_up(timer_set *set, size_t i) {
    timer__entry *e = set->heap[i];
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!timer__before(e, set->heap[parent]))
            break;
        timer__heap_place(set, i, set->heap[parent]);
        i = parent;
    }
    timer__heap_place(set, i, e);
}

static void timer__sift_down(timer_set *set, size_t i) {
    timer__entry *e = set->heap[i];
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= set->heap_count)
            break;
        if (child + 1 < set->heap_count && timer__before(set->heap[child + 1], set->heap[child]))
            child++;
        if (!timer__before(set->heap[child], e))
            break;
        timer__heap_place(set, i, set->heap[child]);
        i = child;
    }
    timer__heap_place(set, i, e);
}

/* Takes `e` out of the heap (not out of the map; does not free it). */
static void timer__heap_remove(timer_set *set, timer__entry *e) {
    size_t i = e->heap_index;
    timer__entry *last = set->heap[--set->heap_count];
    if (last == e)
        return;
    timer__heap_place(set, i, last);
    if (i > 0 && timer__before(last, set->heap[(i - 1) / 2]))
        timer__sift_up(set, i);
    else
        timer__sift_down(set, i);
}

static void timer__on_uv_timer(uv_timer_t *handle);

/* Arms the uv timer for the earliest pending timer, or stops it when none is
 * pending (so an idle set does not keep the loop alive). Not called during
 * the firing pass, which rearms once when it ends with `min_delay` 1: libuv
 * before 1.45 runs a timer restarted with timeout 0 from its own callback
 * again in the same uv__run_timers call, so a callback that keeps adding
 * delay-0 timers would starve I/O forever. One millisecond later is within
 * the "after delay_ms" contract. Elsewhere `min_delay` is 0. */
static void timer__rearm(timer_set *set, uint64_t min_delay) {
    if (set->firing || set->closing)
        return;
    if (set->heap_count == 0) {
        uv_timer_stop(&set->handle);
        return;
    }
    uint64_t now = uv_now(set->handle.loop);
    uint64_t due = set->heap[0]->due;
    uint64_t delay = due > now ? due - now : 0;
    if (delay < min_delay)
        delay = min_delay;
    TIMER__ASSERT(uv_timer_start(&set->handle, timer__on_uv_timer, delay, 0) == 0);
}

/* The first due time after `now` on the grid prev_due + k * interval
 * (k >= 1): the next period, or, after a stall, the first period not yet
 * passed. Missed periods are skipped, never fired in a burst. */
static uint64_t timer__next_due(uint64_t prev_due, uint64_t interval, uint64_t now) {
    uint64_t next = timer__add_sat(prev_due, interval);
    if (next > now || next == UINT64_MAX)
        return next;
    uint64_t periods = (now - prev_due) / interval + 1;
    if (periods > (UINT64_MAX - prev_due) / interval)
        return UINT64_MAX;
    return prev_due + periods * interval;
}

/* The firing pass. Fires, in (due, id) order, every timer that was pending
 * when the pass began and is due at `now`. Each callback may add, cancel or
 * free anything, so nothing about an entry is read after its callback runs. */
static void timer__on_uv_timer(uv_timer_t *handle) {
    timer_set *set = handle->data;
    uint64_t now = uv_now(handle->loop);
    uint64_t last_old_id = set->next_id - 1;
    set->firing = 1;
    while (!set->closing && set->heap_count > 0) {
        timer__entry *e = set->heap[0];
        /* A timer added during this pass has due >= now and a higher id
         * than every older one, so it sorts after every older timer still
         * due: meeting one means nothing old is left to fire. */
        if (e->due > now || e->id > last_old_id)
            break;
        uint64_t id = e->id;
        timer_callback callback = e->callback;
        void *user_data = e->user_data;
        if (e->interval != 0) {
            e->due = timer__next_due(e->due, e->interval, now);
            timer__sift_down(set, 0);
        } else {
            timer__heap_remove(set, e);
            id_map_remove(&set->by_id, id);
            free(e);
        }
        callback(set, id, user_data);
    }
    if (set->closing)
        return;
    set->firing = 0;
    timer__rearm(set, 1);
}

timer_set *timer_set_create(uv_loop_t *loop) {
    if (loop == NULL)
        return NULL;
    timer_set *set = calloc(1, sizeof(*set));
    if (set == NULL)
        return NULL;
    if (uv_timer_init(loop, &set->handle) != 0) {
        free(set);
        return NULL;
    }
    set->handle.data = set;
    id_map_init(&set->by_id);
    set->next_id = 1;
    return set;
}

static void timer__on_close(uv_handle_t *handle) {
    free(handle->data);
}

/* Safe to call from inside a timer callback: the firing pass notices
 * `closing` and stops touching the set, whose memory lives until the close
 * callback. */
void timer_set_free(timer_set *set) {
    if (set == NULL || set->closing)
        return;
    for (size_t i = 0; i < set->heap_count; i++)
        free(set->heap[i]);
    free(set->heap);
    set->heap = NULL;
    set->heap_count = 0;
    set->heap_capacity = 0;
    id_map_close(&set->by_id);
    set->closing = 1;
    uv_timer_stop(&set->handle);
    uv_close((uv_handle_t *)&set->handle, timer__on_close);
}

uint64_t timer_set_add(timer_set *set, uint64_t delay_ms, uint64_t interval_ms,
                       timer_callback callback, void *user_data, uint64_t tag) {
    if (set == NULL || set->closing || callback == NULL)
        return 0;
    if (set->heap_count == set->heap_capacity) {
        size_t capacity = set->heap_capacity == 0 ? TIMER__INITIAL_HEAP : set->heap_capacity * 2;
        timer__entry **heap = realloc(set->heap, capacity * sizeof(*heap));
        if (heap == NULL)
            return 0;
        set->heap = heap;
        set->heap_capacity = capacity;
    }
    timer__entry *e = malloc(sizeof(*e));
    if (e == NULL)
        return 0;
    e->id = set->next_id;
    e->due = timer__add_sat(uv_now(set->handle.loop), delay_ms);
    e->interval = interval_ms;
    e->callback = callback;
    e->user_data = user_data;
    e->tag = tag;
    if (id_map_put(&set->by_id, e->id, e) != 0) {
        free(e);
        return 0;
    }
    set->next_id++;
    set->heap[set->heap_count] = e;
    e->heap_index = set->heap_count++;
    timer__sift_up(set, e->heap_index);
    if (e->heap_index == 0)
        timer__rearm(set, 0);
    return e->id;
}

int timer_set_cancel(timer_set *set, uint64_t timer_id) {
    if (set == NULL || set->closing)
        return -1;
    timer__entry *e = id_map_remove(&set->by_id, timer_id);
    if (e == NULL)
        return -1;
    int was_first = e->heap_index == 0;
    timer__heap_remove(set, e);
    free(e);
    if (was_first)
        timer__rearm(set, 0);
    return 0;
}

size_t timer_set_count(const timer_set *set) {
    return set != NULL ? set->heap_count : 0;
}

int timer_set_describe(const timer_set *set, uint64_t timer_id, timer_description *out) {
    if (set == NULL || out == NULL || set->closing)
        return -1;
    const timer__entry *e = id_map_get(&set->by_id, timer_id);
    if (e == NULL)
        return -1;
    uint64_t now = uv_now(set->handle.loop);
    out->timer_id = e->id;
    out->remaining_ms = e->due > now ? e->due - now : 0;
    out->interval_ms = e->interval;
    out->tag = e->tag;
    out->user_data = e->user_data;
    return 0;
}
