/* entity_timer.c -- one scheduler of entity timers (a cell's reals, or a
 * baseapp's bases): a binary min-heap of timers by (due, id), an index by
 * id for cancelling, and each entity's timer ids, so an entity's timers
 * can leave with it. */
#include <stdlib.h>
#include <string.h>

#include "entity_timer.h"
#include "id_map.h"
#include "log.h"

typedef struct entity_timer {
    uint64_t id;
    uint64_t entity_id;
    uint64_t due_us;
    uint64_t interval_us;
    uint64_t user_data;
    uint32_t tag;
    size_t heap_index;
} entity_timer;

/* The timer ids of one entity. */
typedef struct entity_timer_list {
    uint64_t *ids;
    size_t count, capacity;
} entity_timer_list;

struct entity_timers {
    entity_timer_ids *ids;
    entity_timer **heap;
    size_t count, capacity;
    id_map by_id;     /* timer id -> entity_timer */
    id_map by_entity; /* entity id -> entity_timer_list */
};

/* The process id takes the high 24 bits, a counter the low 40: a process
 * would have to set a trillion timers to wrap. */
#define ENTITY_TIMER_COUNTER_BITS 40

entity_timers *entity_timers_create(entity_timer_ids *ids) {
    entity_timers *timers = xcalloc(1, sizeof *timers);
    timers->ids = ids;
    id_map_init(&timers->by_id);
    id_map_init(&timers->by_entity);
    return timers;
}

void entity_timers_free(entity_timers *timers) {
    if (!timers) return;
    for (size_t i = 0; i < timers->count; i++) free(timers->heap[i]);
    free(timers->heap);
    size_t cursor = 0;
    uint64_t id;
    void *value;
    while (id_map_next(&timers->by_entity, &cursor, &id, &value)) {
        entity_timer_list *list = value;
        free(list->ids);
        free(list);
    }
    id_map_close(&timers->by_id);
    id_map_close(&timers->by_entity);
    free(timers);
}

static bool entity_timer_before(const entity_timer *a, const entity_timer *b) {
    return a->due_us < b->due_us || (a->due_us == b->due_us && a->id < b->id);
}

static void entity_timers_place(entity_timers *timers, size_t i, entity_timer *timer) {
    timers->heap[i] = timer;
    timer->heap_index = i;
}

static void entity_timers_sift_up(entity_timers *timers, size_t i) {
    entity_timer *timer = timers->heap[i];
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!entity_timer_before(timer, timers->heap[parent])) break;
        entity_timers_place(timers, i, timers->heap[parent]);
        i = parent;
    }
    entity_timers_place(timers, i, timer);
}

static void entity_timers_sift_down(entity_timers *timers, size_t i) {
    entity_timer *timer = timers->heap[i];
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= timers->count) break;
        if (child + 1 < timers->count && entity_timer_before(timers->heap[child + 1], timers->heap[child])) child++;
        if (!entity_timer_before(timers->heap[child], timer)) break;
        entity_timers_place(timers, i, timers->heap[child]);
        i = child;
    }
    entity_timers_place(timers, i, timer);
}

static void entity_timers_push(entity_timers *timers, entity_timer *timer) {
    if (timers->count == timers->capacity) {
        timers->capacity = timers->capacity ? timers->capacity * 2 : 64;
        timers->heap = xrealloc(timers->heap, timers->capacity * sizeof(entity_timer *));
    }
    timers->heap[timers->count] = timer;
    entity_timers_sift_up(timers, timers->count++);
}

static void entity_timers_unheap(entity_timers *timers, entity_timer *timer) {
    size_t i = timer->heap_index;
    entity_timer *last = timers->heap[--timers->count];
    if (i == timers->count) return;
    entity_timers_place(timers, i, last);
    entity_timers_sift_down(timers, i);
    entity_timers_sift_up(timers, last->heap_index);
}

static void entity_timers_list_add(entity_timers *timers, uint64_t entity_id, uint64_t timer_id) {
    entity_timer_list *list = id_map_get(&timers->by_entity, entity_id);
    if (!list) {
        list = xcalloc(1, sizeof *list);
        id_map_put(&timers->by_entity, entity_id, list);
    }
    if (list->count == list->capacity) {
        list->capacity = list->capacity ? list->capacity * 2 : 2;
        list->ids = xrealloc(list->ids, list->capacity * sizeof *list->ids);
    }
    list->ids[list->count++] = timer_id;
}

static void entity_timers_list_remove(entity_timers *timers, uint64_t entity_id, uint64_t timer_id) {
    entity_timer_list *list = id_map_get(&timers->by_entity, entity_id);
    if (!list) return;
    for (size_t i = 0; i < list->count; i++) {
        if (list->ids[i] != timer_id) continue;
        list->ids[i] = list->ids[--list->count];
        break;
    }
    if (list->count == 0) {
        id_map_remove(&timers->by_entity, entity_id);
        free(list->ids);
        free(list);
    }
}

static uint64_t entity_timers_insert(entity_timers *timers, uint64_t timer_id, uint64_t entity_id, uint64_t due_us,
                                     uint64_t interval_us, uint32_t tag, uint64_t user_data) {
    entity_timer *timer = xcalloc(1, sizeof *timer);
    timer->id = timer_id;
    timer->entity_id = entity_id;
    timer->due_us = due_us;
    timer->interval_us = interval_us;
    timer->tag = tag;
    timer->user_data = user_data;
    id_map_put(&timers->by_id, timer_id, timer);
    entity_timers_list_add(timers, entity_id, timer_id);
    entity_timers_push(timers, timer);
    return timer_id;
}

uint64_t entity_timers_add(entity_timers *timers, uint64_t entity_id, uint64_t now_us, uint64_t delay_us,
                           uint64_t interval_us, uint32_t tag, uint64_t user_data) {
    uint64_t id = (timers->ids->prefix << ENTITY_TIMER_COUNTER_BITS) | (++timers->ids->counter);
    return entity_timers_insert(timers, id, entity_id, now_us + delay_us, interval_us, tag, user_data);
}

static void entity_timers_delete(entity_timers *timers, entity_timer *timer) {
    entity_timers_unheap(timers, timer);
    id_map_remove(&timers->by_id, timer->id);
    entity_timers_list_remove(timers, timer->entity_id, timer->id);
    free(timer);
}

int entity_timers_cancel(entity_timers *timers, uint64_t timer_id) {
    entity_timer *timer = id_map_get(&timers->by_id, timer_id);
    if (!timer) return -1;
    entity_timers_delete(timers, timer);
    return 0;
}

size_t entity_timers_run(entity_timers *timers, uint64_t now_us, entity_timer_live live, entity_timer_fire fire,
                         void *context) {
    size_t fired = 0;
    /* A timer re-armed this run may fall due again within it; each timer
     * fires at most ENTITY_TIMER_MAX_CATCH_UP times, then waits. */
    uint64_t limit = timers->count * (uint64_t)ENTITY_TIMER_MAX_CATCH_UP + 16;
    while (timers->count && timers->heap[0]->due_us <= now_us && limit-- > 0) {
        entity_timer *timer = timers->heap[0];
        uint64_t id = timer->id, entity_id = timer->entity_id, user_data = timer->user_data;
        uint32_t tag = timer->tag;
        if (!live(entity_id, context)) {
            entity_timers_delete(timers, timer);
            continue;
        }
        if (timer->interval_us) {
            timer->due_us += timer->interval_us;
            /* Behind by more than the catch-up allows (this firing and
             * MAX_CATCH_UP - 1 more still due): skip the rest. */
            if (timer->due_us + timer->interval_us * (ENTITY_TIMER_MAX_CATCH_UP - 1) <= now_us)
                timer->due_us += (now_us - timer->due_us) / timer->interval_us * timer->interval_us;
            entity_timers_sift_down(timers, 0);
        } else {
            entity_timers_delete(timers, timer);
        }
        fired++;
        fire(entity_id, id, tag, user_data, context);
    }
    return fired;
}

static void entity_timers_describe(const entity_timer *timer, uint64_t now_us, entity_timer_state *out) {
    out->timer_id = timer->id;
    out->remaining_us = timer->due_us > now_us ? timer->due_us - now_us : 0;
    out->interval_us = timer->interval_us;
    out->tag = timer->tag;
    out->user_data = timer->user_data;
}

void entity_timers_take(entity_timers *timers, uint64_t entity_id, uint64_t now_us, entity_timer_state **out,
                        size_t *count) {
    if (out) *out = NULL;
    if (count) *count = 0;
    entity_timer_list *list = id_map_get(&timers->by_entity, entity_id);
    if (!list) return;
    size_t n = list->count;
    uint64_t *ids = xmalloc(n * sizeof *ids);
    memcpy(ids, list->ids, n * sizeof *ids);
    if (out) *out = xcalloc(n, sizeof **out);
    for (size_t i = 0; i < n; i++) {
        entity_timer *timer = id_map_get(&timers->by_id, ids[i]);
        if (out) entity_timers_describe(timer, now_us, &(*out)[i]);
        entity_timers_delete(timers, timer);
    }
    if (count) *count = n;
    free(ids);
}

void entity_timers_put(entity_timers *timers, uint64_t entity_id, uint64_t now_us, const entity_timer_state *states,
                       size_t count) {
    for (size_t i = 0; i < count; i++) {
        const entity_timer_state *s = &states[i];
        if (s->timer_id == 0 || id_map_get(&timers->by_id, s->timer_id)) {
            log_warn("entity %llu: timer %llu arrived twice or without an id: dropped", (unsigned long long)entity_id,
                     (unsigned long long)s->timer_id);
            continue;
        }
        /* An id of this prefix (another scheduler of this process made it)
         * is never given again by entity_timers_add. */
        uint64_t counter = s->timer_id & ((UINT64_C(1) << ENTITY_TIMER_COUNTER_BITS) - 1);
        if (s->timer_id >> ENTITY_TIMER_COUNTER_BITS == timers->ids->prefix && counter > timers->ids->counter)
            timers->ids->counter = counter;
        entity_timers_insert(timers, s->timer_id, entity_id, now_us + s->remaining_us, s->interval_us, s->tag,
                             s->user_data);
    }
}

size_t entity_timers_count(const entity_timers *timers) { return timers->count; }

uint64_t entity_timers_owner(const entity_timers *timers, uint64_t timer_id) {
    const entity_timer *timer = id_map_get(&timers->by_id, timer_id);
    return timer ? timer->entity_id : 0;
}

size_t entity_timers_of(const entity_timers *timers, uint64_t entity_id, uint64_t now_us, entity_timer_state *out,
                        size_t cap) {
    const entity_timer_list *list = id_map_get(&timers->by_entity, entity_id);
    if (!list) return 0;
    for (size_t i = 0; i < list->count && i < cap; i++)
        entity_timers_describe(id_map_get(&timers->by_id, list->ids[i]), now_us, &out[i]);
    return list->count;
}

/* ---- the wire form ---------------------------------------------------------------- */

void entity_timers_save(const entity_timers *timers, uint64_t entity_id, uint64_t now_us,
                        Tessera__Cluster__TimerState ***out, size_t *count) {
    *out = NULL;
    *count = entity_timers_of(timers, entity_id, now_us, NULL, 0);
    if (!*count) return;
    entity_timer_state *states = xcalloc(*count, sizeof *states);
    entity_timers_of(timers, entity_id, now_us, states, *count);
    *out = xcalloc(*count, sizeof(Tessera__Cluster__TimerState *));
    for (size_t i = 0; i < *count; i++) {
        Tessera__Cluster__TimerState *saved = xmalloc(sizeof *saved);
        tessera__cluster__timer_state__init(saved);
        saved->timer_id = states[i].timer_id;
        saved->remaining_us = states[i].remaining_us;
        saved->interval_us = states[i].interval_us;
        saved->tag = states[i].tag;
        saved->user_data = states[i].user_data;
        (*out)[i] = saved;
    }
    free(states);
}

void entity_timers_wire_free(Tessera__Cluster__TimerState **states, size_t count) {
    for (size_t i = 0; states && i < count; i++) free(states[i]);
    free(states);
}

size_t entity_timers_load(entity_timers *timers, uint64_t entity_id, uint64_t now_us,
                          Tessera__Cluster__TimerState *const *states, size_t count, uint64_t age_us) {
    if (!count) return 0;
    entity_timer_state *loaded = xcalloc(count, sizeof *loaded);
    size_t kept = 0;
    for (size_t i = 0; i < count; i++) {
        const Tessera__Cluster__TimerState *s = states[i];
        if (!s || !s->timer_id) continue;
        loaded[kept++] = (entity_timer_state){s->timer_id, s->remaining_us > age_us ? s->remaining_us - age_us : 0,
                                              s->interval_us, s->tag, s->user_data};
    }
    size_t before = timers->count;
    entity_timers_put(timers, entity_id, now_us, loaded, kept);
    free(loaded);
    return timers->count - before;
}
