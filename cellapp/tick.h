/* tick.h -- the cellapp's simulation tick and the clock that drives it
 * (tick.c lists the phases in the order they run).
 */
#ifndef TESSERA_TICK_H
#define TESSERA_TICK_H

#include "cellapp.h"
#include "witness.h"

/* Starts the tick timer on the process's loop (settings.tick_hz). */
void tick_start(cellapp *app);
/* Stops it and closes its handle (the loop releases it). */
void tick_stop(cellapp *app);
/* Runs one simulation tick of every cell, every phase in order. */
void tick_run(cellapp *app);

#endif
