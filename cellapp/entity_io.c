/* entity_io.c -- owns the cellapp's queue of I/O events and the per-entity
 * connection lists (entity_io.h). The queue is a binary min-heap of small
 * keys (due time, firing order, slot) over a slab of event bodies with a
 * free list, so that ordering moves 24 bytes, not an event. */
#include "entity_io.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

/* An event's body, in a slab slot while it waits. */
typedef struct entity_io_event {
    uint64_t self_id, activator_id, caller_id;
    char target[ENTITY_IO_NAME_MAX];
    char input[ENTITY_IO_NAME_MAX];
    char parameter[ENTITY_IO_NAME_MAX];
} entity_io_event;

/* What the heap orders: small, so that sifting moves 24 bytes. */
typedef struct entity_io_key {
    uint64_t due_ms;
    uint64_t sequence;
    uint32_t slot;
} entity_io_key;

struct entity_io {
    entity_io_key *heap;
    size_t count, capacity;
    entity_io_event *slab;           /* bodies, by slot */
    uint32_t *free_slots;            /* slots not in use */
    size_t slab_count, free_count;
    uint64_t next_sequence;
};

entity_io *entity_io_create(void) { return xcalloc(1, sizeof(entity_io)); }

void entity_io_free(entity_io *io) {
    if (!io) return;
    free(io->heap);
    free(io->slab);
    free(io->free_slots);
    free(io);
}

size_t entity_io_pending(const entity_io *io) { return io->count; }

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
    if (io->slab_count == io->capacity || !io->slab) {
        size_t capacity = io->capacity ? io->capacity * 2 : 64;
        io->slab = xrealloc(io->slab, capacity * sizeof *io->slab);
        io->heap = xrealloc(io->heap, capacity * sizeof *io->heap);
        io->free_slots = xrealloc(io->free_slots, capacity * sizeof *io->free_slots);
        io->capacity = capacity;
    }
    return (uint32_t)io->slab_count++;
}

static void entity_io_push(entity_io *io, entity_io_key key) {
    size_t i = io->count++;
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

static entity_io_key entity_io_pop(entity_io *io) {
    entity_io_key top = io->heap[0];
    io->heap[0] = io->heap[--io->count];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < io->count && entity_io_before(&io->heap[l], &io->heap[m])) m = l;
        if (r < io->count && entity_io_before(&io->heap[r], &io->heap[m])) m = r;
        if (m == i) break;
        entity_io_key swap = io->heap[m];
        io->heap[m] = io->heap[i];
        io->heap[i] = swap;
        i = m;
    }
    return top;
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
        entity_io_push(io, (entity_io_key){now_ms + c->delay_ms, io->next_sequence++, slot});
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

size_t entity_io_service(entity_io *io, uint64_t now_ms, entity_io_deliver deliver, void *context) {
    /* What was queued before this service began and is due: events fired
     * by the inputs it runs wait for the next one. */
    uint64_t last = io->next_sequence;
    size_t ran = 0;
    while (io->count && io->heap[0].due_ms <= now_ms && io->heap[0].sequence < last) {
        entity_io_key key = entity_io_pop(io);
        /* A copy: the delivery may fire outputs, which may grow the slab. */
        entity_io_event event = io->slab[key.slot];
        io->free_slots[io->free_count++] = key.slot;
        deliver(event.target, event.self_id, event.activator_id, event.caller_id, event.input, event.parameter,
                context);
        ran++;
    }
    return ran;
}

void entity_io_save(const entity_io_outputs *outputs, Tessera__Cluster__IoConnection ***out, size_t *count) {
    *out = NULL;
    *count = 0;
    if (!outputs->count) return;
    *out = xcalloc(outputs->count, sizeof **out);
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
