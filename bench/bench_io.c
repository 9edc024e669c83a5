/* bench_io.c -- entity I/O events per second (cellapp/entity_io.h): a
 * thousand entities, each with four connections, fire their outputs with
 * delays spread over 0 .. 2 s; a 10 Hz tick services what is due. The
 * baseline in the same run is the simplest correct queue: an unsorted
 * array scanned whole every tick for what is due (what a first version
 * would write), fed the same firings. Both must deliver the same events;
 * the bench prints events per second for each and the ratio.
 *
 *   bench-io [ENTITIES=1000] [TICKS=600]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "entity_io.h"

static double now_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static uint64_t delivered_heap, checksum_heap;
static void count_heap(const char *target, uint64_t self_id, uint64_t activator_id, uint64_t caller_id,
                       const char *input, const char *parameter, void *context) {
    (void)target, (void)activator_id, (void)caller_id, (void)input, (void)parameter, (void)context;
    delivered_heap++;
    checksum_heap += self_id;
}

/* The oracle: an array of (due, self) scanned every tick. */
typedef struct scan_event {
    uint64_t due_ms, self;
    char target[ENTITY_IO_NAME_MAX], input[ENTITY_IO_NAME_MAX], parameter[ENTITY_IO_NAME_MAX];
} scan_event;

/* One scenario: delays spread over 0 .. max_delay_ms. Returns 0 if both
 * queues delivered the same events. */
static int bench_io_run(int entities, int ticks, uint32_t max_delay_ms) {
    delivered_heap = checksum_heap = 0;
    entity_io_outputs *outputs = calloc((size_t)entities, sizeof *outputs);
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
        for (int e = t % 10; e < entities; e += 10) entity_io_fire(io, &outputs[e], (uint64_t)e + 1, "OnTick", 0, 0, NULL, now);
        entity_io_service(io, now, count_heap, NULL);
    }
    entity_io_service(io, (uint64_t)ticks * 100 + max_delay_ms + 1000, count_heap, NULL);
    double heap_seconds = now_seconds() - t0;

    size_t capacity = 1024, count = 0;
    scan_event *queue = malloc(capacity * sizeof *queue);
    uint64_t delivered_scan = 0, checksum_scan = 0;
    t0 = now_seconds();
    for (int t = 0; t <= ticks; t++) {
        uint64_t now = t < ticks ? (uint64_t)t * 100 : (uint64_t)ticks * 100 + max_delay_ms + 1000;
        for (int e = t % 10; t < ticks && e < entities; e += 10)
            for (uint32_t k = 0; k < outputs[e].count; k++) {
                if (count == capacity) queue = realloc(queue, (capacity *= 2) * sizeof *queue);
                scan_event *ev = &queue[count++];
                ev->due_ms = now + outputs[e].connections[k].delay_ms;
                ev->self = (uint64_t)e + 1;
                memcpy(ev->target, outputs[e].connections[k].target, sizeof ev->target);
                memcpy(ev->input, outputs[e].connections[k].input, sizeof ev->input);
                memcpy(ev->parameter, outputs[e].connections[k].parameter, sizeof ev->parameter);
            }
        for (size_t i = 0; i < count;) {
            if (queue[i].due_ms <= now) {
                delivered_scan++;
                checksum_scan += queue[i].self;
                queue[i] = queue[--count];
            } else {
                i++;
            }
        }
    }
    double scan_seconds = now_seconds() - t0;
    printf("%d entities x 4 connections, a tenth firing each of %d ticks, delays 0 .. %.0f s (about %zu waiting)\n",
           entities, ticks, max_delay_ms / 1000.0, (size_t)entities / 10 * 4 * (max_delay_ms / 200));
    printf("  entity_io (heap):     %10.0f events/s (%llu events)\n", (double)delivered_heap / heap_seconds,
           (unsigned long long)delivered_heap);
    printf("  oracle (array scan):  %10.0f events/s (%llu events)\n", (double)delivered_scan / scan_seconds,
           (unsigned long long)delivered_scan);
    printf("  ratio (heap over scan): %.2fx; same events delivered: %s\n", scan_seconds / heap_seconds,
           delivered_heap == delivered_scan && checksum_heap == checksum_scan ? "yes" : "NO");
    for (int e = 0; e < entities; e++) entity_io_outputs_free(&outputs[e]);
    free(outputs);
    free(queue);
    entity_io_free(io);
    return delivered_heap == delivered_scan && checksum_heap == checksum_scan ? 0 : 1;
}

int main(int argc, char **argv) {
    int entities = argc > 1 ? atoi(argv[1]) : 1000, ticks = argc > 2 ? atoi(argv[2]) : 600;
    if (entities <= 0) entities = 1000;
    if (ticks <= 0) ticks = 600;
    printf("bench-io: entity I/O events per second against an array scanned every tick\n");
    int rc = bench_io_run(entities, ticks, 2000);
    rc |= bench_io_run(entities, ticks, 60000);
    return rc;
}
