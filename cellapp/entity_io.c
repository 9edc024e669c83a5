/* entity_io.c -- owns the cellapp's queue of I/O events and the per-entity
 * connection lists (entity_io.h).
 *
 * The queue is a timing wheel of one bucket a millisecond, over a slab of
 * event bodies with a free list, so that queueing and ordering move a
 * 24-byte key (due time, firing order, slot), never an event. A key due
 * within ENTITY_IO_WHEEL_MS of the wheel's cursor goes in its bucket, at
 * the end; a later one waits in an overflow heap and moves to its bucket
 * the moment the cursor brings it within reach (its bucket is empty then).
 * So each bucket holds one due time in firing order, and servicing walks
 * the buckets from the cursor to now: O(1) a firing, O(1) an event run,
 * plus one step a millisecond. Events fired while the queue is serviced
 * that are due by then wait in a carry list for the next service, which
 * runs them first (they are due before anything in the wheel). */
#include "entity_io.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

/* Buckets ahead of the cursor: 8.2 s of delays go straight to their
 * bucket (most of a map's); longer ones wait in the heap. */
#define ENTITY_IO_WHEEL_MS 8192u

/* An event's body, in a slab slot while it waits. */
typedef struct entity_io_event {
    uint64_t self_id, activator_id, caller_id;
    char target[ENTITY_IO_NAME_MAX];
    char input[ENTITY_IO_NAME_MAX];
    char parameter[ENTITY_IO_NAME_MAX];
} entity_io_event;

/* What the queue orders: small, so that it moves 24 bytes. */
typedef struct entity_io_key {
    uint64_t due_ms;
    uint64_t sequence;
    uint32_t slot;
} entity_io_key;

/* Keys in firing order (a bucket, the carry list). */
typedef struct entity_io_keys {
    entity_io_key *keys;
    uint32_t count, capacity;
} entity_io_keys;

struct entity_io {
    entity_io_keys *wheel; /* ENTITY_IO_WHEEL_MS buckets by due ms modulo its size; NULL until used */
    uint64_t cursor_ms;    /* every key in the wheel is due at or after it */
    size_t wheel_count;    /* keys in the wheel */
    entity_io_keys carry;  /* due already, fired while the queue was serviced */
    entity_io_key *heap;   /* overflow: due beyond the wheel's reach; min-heap */
    size_t heap_count, heap_capacity;
    entity_io_event *slab; /* bodies, by slot */
    uint32_t *free_slots;  /* slots not in use */
    size_t slab_count, slab_capacity, free_count;
    uint64_t next_sequence;
    bool servicing;
};

entity_io *entity_io_create(void) { return xcalloc(1, sizeof(entity_io)); }

void entity_io_free(entity_io *io) {
    if (!io) return;
    for (size_t i = 0; io->wheel && i < ENTITY_IO_WHEEL_MS; i++) free(io->wheel[i].keys);
    free(io->wheel);
    free(io->carry.keys);
    free(io->heap);
    free(io->slab);
    free(io->free_slots);
    free(io);
}

size_t entity_io_pending(const entity_io *io) { return io->wheel_count + io->carry.count + io->heap_count; }

static bool entity_io_name_ok(const char *name, bool may_be_empty) {
    if (!name) return may_be_empty;
    size_t length = strlen(name);
    return (may_be_empty || length > 0) && length < ENTITY_IO_NAME_MAX;
}

int entity_io_connect(entity_io_outputs *outputs, const char *output, const char *target, const char *input,
                      const char *parameter, uint32_t delay_ms, int32_t times) {
    if (!entity_io_name_ok(output, false) || !entity_io_name_ok(target, false) || !entity_io_name_ok(input, false) ||
        !entity_io_name_ok(parameter, true) || times == 0 || times < -1)
        return -1;
    if (outputs->count == outputs->capacity) {
        outputs->capacity = outputs->capacity ? outputs->capacity * 2 : 4;
        outputs->connections = xrealloc(outputs->connections, outputs->capacity * sizeof *outputs->connections);
    }
    entity_io_connection *c = &outputs->connections[outputs->count++];
    memset(c, 0, sizeof *c);
    snprintf(c->output, sizeof c->output, "%s", output);
    snprintf(c->target, sizeof c->target, "%s", target);
    snprintf(c->input, sizeof c->input, "%s", input);
    snprintf(c->parameter, sizeof c->parameter, "%s", parameter ? parameter : "");
    c->delay_ms = delay_ms;
    c->times = times;
    return 0;
}

void entity_io_outputs_free(entity_io_outputs *outputs) {
    free(outputs->connections);
    memset(outputs, 0, sizeof *outputs);
}

static bool entity_io_before(const entity_io_key *a, const entity_io_key *b) {
    return a->due_ms != b->due_ms ? a->due_ms < b->due_ms : a->sequence < b->sequence;
}

/* A slot for an event's body. */
static uint32_t entity_io_take_slot(entity_io *io) {
    if (io->free_count) return io->free_slots[--io->free_count];
    if (io->slab_count == io->slab_capacity) {
        size_t capacity = io->slab_capacity ? io->slab_capacity * 2 : 64;
        io->slab = xrealloc(io->slab, capacity * sizeof *io->slab);
        io->free_slots = xrealloc(io->free_slots, capacity * sizeof *io->free_slots);
        io->slab_capacity = capacity;
    }
    return (uint32_t)io->slab_count++;
}

static void entity_io_append(entity_io_keys *list, entity_io_key key) {
    if (list->count == list->capacity) {
        list->capacity = list->capacity ? list->capacity * 2 : 8;
        list->keys = xrealloc(list->keys, list->capacity * sizeof *list->keys);
    }
    list->keys[list->count++] = key;
}

static void entity_io_heap_push(entity_io *io, entity_io_key key) {
    if (io->heap_count == io->heap_capacity) {
        io->heap_capacity = io->heap_capacity ? io->heap_capacity * 2 : 64;
        io->heap = xrealloc(io->heap, io->heap_capacity * sizeof *io->heap);
    }
    size_t i = io->heap_count++;
    io->heap[i] = key;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!entity_io_before(&io->heap[i], &io->heap[parent])) break;
        entity_io_key swap = io->heap[parent];
        io->heap[parent] = io->heap[i];
        io->heap[i] = swap;
        i = parent;
    }
}

static entity_io_key entity_io_heap_pop(entity_io *io) {
    entity_io_key top = io->heap[0];
    io->heap[0] = io->heap[--io->heap_count];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < io->heap_count && entity_io_before(&io->heap[l], &io->heap[m])) m = l;
        if (r < io->heap_count && entity_io_before(&io->heap[r], &io->heap[m])) m = r;
        if (m == i) break;
        entity_io_key swap = io->heap[m];
        io->heap[m] = io->heap[i];
        io->heap[i] = swap;
        i = m;
    }
    return top;
}

/* Queues a key: behind the cursor (fired while servicing, due already) in
 * the carry list, within the wheel's reach in its bucket, else the heap. */
static void entity_io_insert(entity_io *io, entity_io_key key, uint64_t now_ms) {
    if (!io->wheel) io->wheel = xcalloc(ENTITY_IO_WHEEL_MS, sizeof *io->wheel);
    if (io->wheel_count == 0 && io->carry.count == 0 && io->heap_count == 0 && !io->servicing)
        io->cursor_ms = now_ms; /* an empty queue starts now, however long it lay idle */
    if (key.due_ms < io->cursor_ms) {
        entity_io_append(&io->carry, key);
    } else if (key.due_ms - io->cursor_ms < ENTITY_IO_WHEEL_MS) {
        entity_io_append(&io->wheel[key.due_ms % ENTITY_IO_WHEEL_MS], key);
        io->wheel_count++;
    } else {
        entity_io_heap_push(io, key);
    }
}

/* Moves the heap's keys the cursor has brought within reach to their
 * buckets, in (due, firing) order: each bucket they go to is empty. */
static void entity_io_migrate(entity_io *io) {
    while (io->heap_count && io->heap[0].due_ms - io->cursor_ms < ENTITY_IO_WHEEL_MS) {
        entity_io_key key = entity_io_heap_pop(io);
        entity_io_append(&io->wheel[key.due_ms % ENTITY_IO_WHEEL_MS], key);
        io->wheel_count++;
    }
}

size_t entity_io_fire(entity_io *io, entity_io_outputs *outputs, uint64_t self_id, const char *output,
                      uint64_t activator_id, uint64_t caller_id, const char *parameter, uint64_t now_ms) {
    size_t queued = 0;
    for (uint32_t i = 0; output && i < outputs->count;) {
        entity_io_connection *c = &outputs->connections[i];
        if (strcmp(c->output, output) != 0) {
            i++;
            continue;
        }
        uint32_t slot = entity_io_take_slot(io);
        entity_io_event *event = &io->slab[slot];
        event->self_id = self_id;
        event->activator_id = activator_id;
        event->caller_id = caller_id;
        memcpy(event->target, c->target, sizeof event->target);
        memcpy(event->input, c->input, sizeof event->input);
        if (c->parameter[0] || !parameter) {
            memcpy(event->parameter, c->parameter, sizeof event->parameter);
        } else {
            size_t length = strnlen(parameter, sizeof event->parameter - 1);
            memcpy(event->parameter, parameter, length);
            event->parameter[length] = '\0';
        }
        entity_io_insert(io, (entity_io_key){now_ms + c->delay_ms, io->next_sequence++, slot}, now_ms);
        queued++;
        if (c->times > 0 && --c->times == 0) {
            /* Spent: gone from the list (its place taken by the last). */
            outputs->connections[i] = outputs->connections[--outputs->count];
            continue;
        }
        i++;
    }
    return queued;
}

/* Runs one key's event. */
static void entity_io_run(entity_io *io, entity_io_key key, entity_io_deliver deliver, void *context) {
    /* A copy: the delivery may fire outputs, which may grow the slab. */
    entity_io_event event = io->slab[key.slot];
    io->free_slots[io->free_count++] = key.slot;
    deliver(event.target, event.self_id, event.activator_id, event.caller_id, event.input, event.parameter, context);
}

static int entity_io_compare(const void *a, const void *b) {
    const entity_io_key *x = a, *y = b;
    return entity_io_before(x, y) ? -1 : entity_io_before(y, x) ? 1 : 0;
}

size_t entity_io_service(entity_io *io, uint64_t now_ms, entity_io_deliver deliver, void *context) {
    /* What was queued before this service began and is due: events fired
     * by the inputs it runs wait for the next one. */
    uint64_t last = io->next_sequence;
    size_t ran = 0;
    io->servicing = true;
    /* The carry list first: due before anything in the wheel. It is in
     * firing order; its due times may differ (services at different
     * times), so it is sorted, and it holds only what chains fired. */
    if (io->carry.count) {
        entity_io_keys carry = io->carry;
        io->carry = (entity_io_keys){0};
        qsort(carry.keys, carry.count, sizeof *carry.keys, entity_io_compare);
        for (uint32_t i = 0; i < carry.count; i++) {
            if (carry.keys[i].due_ms <= now_ms) {
                entity_io_run(io, carry.keys[i], deliver, context);
                ran++;
            } else {
                entity_io_insert(io, carry.keys[i], now_ms); /* only a clock that went back */
            }
        }
        free(carry.keys);
    }
    while (io->cursor_ms <= now_ms) {
        if (io->wheel_count == 0) {
            /* Nothing near: jump to now, or to the heap's first. */
            uint64_t next = io->heap_count && io->heap[0].due_ms <= now_ms ? io->heap[0].due_ms : now_ms + 1;
            if (next > io->cursor_ms) io->cursor_ms = next;
            entity_io_migrate(io);
            if (io->wheel_count == 0) break;
            continue;
        }
        entity_io_keys *bucket = &io->wheel[io->cursor_ms % ENTITY_IO_WHEEL_MS];
        /* The bucket may grow while its events run (an input fires one due
         * now): those wait, in the carry list. */
        for (uint32_t i = 0; i < bucket->count; i++) {
            entity_io_key key = bucket->keys[i];
            if (key.sequence >= last) {
                entity_io_append(&io->carry, key);
                continue;
            }
            entity_io_run(io, key, deliver, context);
            ran++;
        }
        io->wheel_count -= bucket->count;
        bucket->count = 0;
        io->cursor_ms++;
        entity_io_migrate(io);
    }
    if (io->cursor_ms <= now_ms) io->cursor_ms = now_ms + 1;
    io->servicing = false;
    return ran;
}

void entity_io_save(const entity_io_outputs *outputs, Tessera__Cluster__IoConnection ***out, size_t *count) {
    *out = NULL;
    *count = 0;
    if (!outputs->count) return;
    *out = xcalloc(outputs->count, sizeof(Tessera__Cluster__IoConnection *));
    for (uint32_t i = 0; i < outputs->count; i++) {
        const entity_io_connection *c = &outputs->connections[i];
        Tessera__Cluster__IoConnection *saved = xmalloc(sizeof *saved);
        tessera__cluster__io_connection__init(saved);
        saved->output = (char *)c->output;
        saved->target = (char *)c->target;
        saved->input = (char *)c->input;
        saved->parameter = (char *)c->parameter;
        saved->delay_ms = c->delay_ms;
        saved->times = c->times;
        (*out)[i] = saved;
    }
    *count = outputs->count;
}

void entity_io_saved_free(Tessera__Cluster__IoConnection **saved, size_t count) {
    for (size_t i = 0; i < count; i++) free(saved[i]);
    free(saved);
}

void entity_io_restore(entity_io_outputs *outputs, Tessera__Cluster__IoConnection *const *saved, size_t count) {
    entity_io_outputs_free(outputs);
    for (size_t i = 0; i < count; i++) {
        const Tessera__Cluster__IoConnection *c = saved[i];
        if (entity_io_connect(outputs, c->output, c->target, c->input, c->parameter, c->delay_ms, c->times) != 0)
            log_warn("entity I/O: a saved connection (%s -> %s.%s) does not read: dropped", c->output ? c->output : "",
                     c->target ? c->target : "", c->input ? c->input : "");
    }
}
