/* random_unit.h -- a small, fast, reproducible generator (xorshift64*) for
 * spread, not secrecy: spawn points, jitter, test and benchmark inputs. The
 * caller owns the state: seed it with any value but 0 (the generator stays
 * at 0 from there).
 */
#ifndef TESSERA_RANDOM_UNIT_H
#define TESSERA_RANDOM_UNIT_H

#include <stdint.h>

/* The next 64 bits of the sequence. */
static inline uint64_t random_next(uint64_t *state) {
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * UINT64_C(2685821657736338717);
}

/* A uniform double in [0, 1): the top 53 bits of the next value. */
static inline double random_unit(uint64_t *state) { return (double)(random_next(state) >> 11) / 9007199254740992.0; }

#endif
