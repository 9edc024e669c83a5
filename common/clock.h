/* clock.h -- the two clocks Tessera reads.
 *
 * Wall-clock microseconds stamp events that another process compares
 * (position-update latency); monotonic milliseconds drive everything local
 * (ticks, timeouts), immune to clock steps. */
#ifndef TESSERA_CLOCK_H
#define TESSERA_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t clock_wall_us(void) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    return (uint64_t)now.tv_sec * 1000000u + (uint64_t)now.tv_nsec / 1000u;
}

static inline uint64_t clock_monotonic_us(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000u + (uint64_t)now.tv_nsec / 1000u;
}

#endif
