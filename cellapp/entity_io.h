/* entity_io.h -- Source's entity I/O on a cellapp: an entity's outputs hold
 * connections (a target, an input, a parameter, a delay, a count of
 * firings left), firing an output queues one event per connection, and
 * the tick services the events that are due, calling the targets' inputs.
 *
 * Targets: "!self" (the entity whose output fired), "!activator" (what
 * set the chain off: the player who stepped in, say), "!caller" (the
 * entity that fired the output that called the input now firing), or a
 * name: every real of that name, here and on other cellapps (io_route.h),
 * else (Source's fallback) every real here of the class of that name.
 *
 * The delay rule (seed 002 found Source's two firing branches treating the
 * caller's delay differently): every firing goes through the queue, due
 * `delay` after the moment the output fires, whatever fired it; a delay is
 * never added to or inherited from the event that caused the firing. An
 * event fired while the queue is being serviced, even with no delay, runs
 * at the next service (the next tick), so a loop of outputs cannot spin
 * inside one tick. Events due at the same time run in the order they were
 * fired.
 *
 * Connections are part of the entity's cell state (entity_io_save,
 * entity_io_restore) and travel with it; events in the queue belong to
 * the cellapp and find their targets when they run.
 */
#ifndef TESSERA_ENTITY_IO_H
#define TESSERA_ENTITY_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cluster.pb-c.h"

struct cell_entity;

#define ENTITY_IO_NAME_MAX 64

typedef struct entity_io_connection {
    char output[ENTITY_IO_NAME_MAX];
    char target[ENTITY_IO_NAME_MAX];
    char input[ENTITY_IO_NAME_MAX];
    char parameter[ENTITY_IO_NAME_MAX]; /* "": the firing's own */
    uint32_t delay_ms;
    int32_t times; /* firings left; -1: unlimited */
} entity_io_connection;

/* An entity's connections (a member of cell_entity). */
typedef struct entity_io_outputs {
    entity_io_connection *connections;
    uint32_t count, capacity;
} entity_io_outputs;

typedef struct entity_io entity_io;

/* Delivers one event: `input` of `target_id` (whatever the target names;
 * resolved by the callback) with `parameter`. */
typedef void (*entity_io_deliver)(const char *target, uint64_t self_id, uint64_t activator_id, uint64_t caller_id,
                                  const char *input, const char *parameter, void *context);

entity_io *entity_io_create(void);
void entity_io_free(entity_io *io);

/* Adds a connection to `outputs`. Returns 0, or -1 for an empty or
 * too-long name, or times 0. */
int entity_io_connect(entity_io_outputs *outputs, const char *output, const char *target, const char *input,
                      const char *parameter, uint32_t delay_ms, int32_t times);
void entity_io_outputs_free(entity_io_outputs *outputs);

/* Fires output `output` of entity `self_id` (its connections in
 * `outputs`): one event per live connection, due delay_ms after now_ms;
 * counts a firing off each limited one (a spent one is removed).
 * `activator_id` set the chain off; `caller_id` is the entity whose output
 * called the input that fires this one (0: none). `parameter` is the
 * firing's value (NULL: none). Returns the events queued. */
size_t entity_io_fire(entity_io *io, entity_io_outputs *outputs, uint64_t self_id, const char *output,
                      uint64_t activator_id, uint64_t caller_id, const char *parameter, uint64_t now_ms);

/* Runs every event due by now_ms (not those queued meanwhile). Returns
 * how many ran. */
size_t entity_io_service(entity_io *io, uint64_t now_ms, entity_io_deliver deliver, void *context);
size_t entity_io_pending(const entity_io *io);

/* The connections into a saved state (allocated; free with
 * entity_io_saved_free) and back. */
void entity_io_save(const entity_io_outputs *outputs, Tessera__Cluster__IoConnection ***out, size_t *count);
void entity_io_saved_free(Tessera__Cluster__IoConnection **saved, size_t count);
void entity_io_restore(entity_io_outputs *outputs, Tessera__Cluster__IoConnection *const *saved, size_t count);

#endif
