/* cell_load.h -- how busy this cellapp is, and how that load spreads over
 * its cells and their reals, for the balancer (cell_load.c).
 *
 * cell_load_create before the loop runs (it turns on libuv's idle time);
 * cell_load_sample once a tick; transient work (offloads, ghost churn) is
 * timed with cell_load_transient_begin/end around it and kept apart.
 */
#ifndef TESSERA_CELL_LOAD_H
#define TESSERA_CELL_LOAD_H

#include <stdint.h>
#include <uv.h>

#include "balance.h"
#include "cell.h"
#include "clock.h"
#include "spaces.h"

typedef struct cell_load cell_load;

/* Measures `loop` (borrowed), smoothing each tick's sample with weight
 * `smoothing`; `algorithm` (borrowed) sets the entity bound levels of a
 * report. */
cell_load *cell_load_create(uv_loop_t *loop, double smoothing, const balance_config *algorithm);
void cell_load_free(cell_load *load);
/* Once a tick: the busy share since the last sample, without the
 * transient work timed meanwhile. */
void cell_load_sample(cell_load *load, uint64_t now_us);
static inline uint64_t cell_load_transient_begin(void) { return clock_monotonic_us(); }
void cell_load_transient_end(cell_load *load, uint64_t began_us);
/* The smoothed load and transient load, fractions of one core. */
double cell_load_value(const cell_load *load);
double cell_load_transient(const cell_load *load);
/* Fills a cell's balance report: its share of the load (by its reals'
 * work: each counts one plus the entities its client sees, among every
 * cell of `s`), its reals, its epoch and its entity bound levels. The
 * caller sets cellapp_id and pending_offloads. */
void cell_load_report(const cell_load *load, const spaces *s, const cell *c, balance_cell_report *out);

#endif
