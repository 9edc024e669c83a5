/* bench_io.c -- entity I/O events per second (cellapp/entity_io.h): a
 * thousand entities, each with four connections, fire their outputs with
 * delays spread over 0 .. 2 s (and 0 .. 60 s); a 10 Hz tick services what
 * is due. The baseline in the same run is the simplest correct queue: an
 * unsorted array scanned whole every tick for what is due, which sorts
 * those by (due time, firing) as the rules ask and delivers them through
 * the same callback (what a first version would write), fed the same
 * firings. Both must deliver the same events in the same order (an
 * order-sensitive checksum); the bench prints events per second for each
 * and the ratio.
 *
 *   bench-io [ENTITIES=1000] [TICKS=600]
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_args.h"
#include "entity_io.h"
#include "log.h"

static double now_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* What a delivery counts: how many, and a checksum that depends on their
 * order. */
typedef struct tally {
    uint64_t delivered, checksum;
} tally;

static void count_event(const char *target, uint64_t self_id, uint64_t activator_id, uint64_t caller_id,
                        const char *input, const char *parameter, void *context) {
    (void)target, (void)activator_id, (void)caller_id, (void)input, (void)parameter;
    tally *t = context;
    t->delivered++;
    t->checksum = t->checksum * 1000003u + self_id;
}

/* The oracle: an array of events scanned every tick. */
typedef struct scan_event {
    uint64_t due_ms, sequence, self;
    char target[ENTITY_IO_NAME_MAX], input[ENTITY_IO_NAME_MAX], parameter[ENTITY_IO_NAME_MAX];
} scan_event;

static int scan_compare(const void *a, const void *b) {
    const scan_event *x = a, *y = b;
    if (x->due_ms != y->due_ms) return x->due_ms < y->due_ms ? -1 : 1;
    return x->sequence < y->sequence ? -1 : x->sequence > y->sequence;
}

/* One scenario: delays spread over 0 .. max_delay_ms. Returns 0 if both
 * queues delivered the same events. */
static int bench_io_run(int entities, int ticks, uint32_t max_delay_ms) {
    tally wheel = {0, 0}, scan = {0, 0};
    entity_io_outputs *outputs = xcalloc((size_t)entities, sizeof *outputs);
    for (int e = 0; e < entities; e++)
        for (int k = 0; k < 4; k++) {
            char target[32];
            snprintf(target, sizeof target, "target%d", (e * 4 + k) % 97);
            entity_io_connect(&outputs[e], "OnTick", target, "Input", "",
                              (uint32_t)(((uint64_t)e * 37 + (uint64_t)k * 500) * max_delay_ms / 2000 % max_delay_ms),
                              -1);
        }
    /* Each tick a tenth of the entities fire. */
    entity_io *io = entity_io_create();
    double t0 = now_seconds();
    for (int t = 0; t < ticks; t++) {
        uint64_t now = (uint64_t)t * 100;
        for (int e = t % 10; e < entities; e += 10)
            entity_io_fire(io, &outputs[e], (uint64_t)e + 1, "OnTick", 0, 0, NULL, now);
        entity_io_service(io, now, count_event, &wheel);
    }
    entity_io_service(io, (uint64_t)ticks * 100 + max_delay_ms + 1000, count_event, &wheel);
    double wheel_seconds = now_seconds() - t0;

    size_t capacity = 1024, count = 0, due_capacity = 1024;
    scan_event *queue = xmalloc(capacity * sizeof *queue), *due = xmalloc(due_capacity * sizeof *due);
    uint64_t sequence = 0;
    t0 = now_seconds();
    for (int t = 0; t <= ticks; t++) {
        uint64_t now = t < ticks ? (uint64_t)t * 100 : (uint64_t)ticks * 100 + max_delay_ms + 1000;
        for (int e = t % 10; t < ticks && e < entities; e += 10)
            for (uint32_t k = 0; k < outputs[e].count; k++) {
                if (count == capacity) queue = xrealloc(queue, (capacity *= 2) * sizeof *queue);
                scan_event *ev = &queue[count++];
                ev->due_ms = now + outputs[e].connections[k].delay_ms;
                ev->sequence = sequence++;
                ev->self = (uint64_t)e + 1;
                memcpy(ev->target, outputs[e].connections[k].target, sizeof ev->target);
                memcpy(ev->input, outputs[e].connections[k].input, sizeof ev->input);
                memcpy(ev->parameter, outputs[e].connections[k].parameter, sizeof ev->parameter);
            }
        size_t due_count = 0;
        for (size_t i = 0; i < count;) {
            if (queue[i].due_ms <= now) {
                if (due_count == due_capacity) due = xrealloc(due, (due_capacity *= 2) * sizeof *due);
                due[due_count++] = queue[i];
                queue[i] = queue[--count];
            } else {
                i++;
            }
        }
        qsort(due, due_count, sizeof *due, scan_compare);
        for (size_t i = 0; i < due_count; i++)
            count_event(due[i].target, due[i].self, 0, 0, due[i].input, due[i].parameter, &scan);
    }
    double scan_seconds = now_seconds() - t0;
    printf("%d entities x 4 connections, a tenth firing each of %d ticks, delays 0 .. %.0f s (about %zu waiting)\n",
           entities, ticks, max_delay_ms / 1000.0, (size_t)entities / 10 * 4 * (max_delay_ms / 200));
    bool same = wheel.delivered == scan.delivered && wheel.checksum == scan.checksum;
    printf("  entity_io (wheel):    %10.0f events/s (%llu events)\n", (double)wheel.delivered / wheel_seconds,
           (unsigned long long)wheel.delivered);
    printf("  oracle (array scan):  %10.0f events/s (%llu events)\n", (double)scan.delivered / scan_seconds,
           (unsigned long long)scan.delivered);
    printf("  ratio (wheel over scan): %.2fx; same events in the same order: %s\n", scan_seconds / wheel_seconds,
           same ? "yes" : "NO");
    for (int e = 0; e < entities; e++) entity_io_outputs_free(&outputs[e]);
    free(outputs);
    free(queue);
    free(due);
    entity_io_free(io);
    return same ? 0 : 1;
}

int main(int argc, char **argv) {
    int entities = argc > 1 ? bench_int_arg(argv[1], 0) : 1000, ticks = argc > 2 ? bench_int_arg(argv[2], 0) : 600;
    if (entities <= 0) entities = 1000;
    if (ticks <= 0) ticks = 600;
    printf("bench-io: entity I/O events per second against an array scanned every tick\n");
    int rc = bench_io_run(entities, ticks, 2000);
    rc |= bench_io_run(entities, ticks, 60000);
    return rc;
}
