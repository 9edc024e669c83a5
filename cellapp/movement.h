/* movement.h -- the check of a client's moves of its real: inside the
 * space, and no faster than max_speed allows with a banked burst
 * (movement.c).
 */
#ifndef TESSERA_MOVEMENT_H
#define TESSERA_MOVEMENT_H

#include <stdint.h>

#include "cell.h"
#include "cellapp_settings.h"

typedef enum movement_verdict {
    MOVEMENT_ACCEPTED,
    MOVEMENT_TOO_FAST,      /* farther than max_speed allows since the last move */
    MOVEMENT_OUTSIDE_WORLD, /* beyond the space's bounds: in no cell */
    MOVEMENT_NOT_FINITE,    /* NaN or infinity */
} movement_verdict;

/* Checks a client's move of a real against the space and the speed limit,
 * spending the allowance if it is accepted. The caller applies an accepted
 * move (cell_move); a refused one changes nothing. */
movement_verdict movement_check(const movement_config *config, const cell *c, cell_entity *entity, float x, float y,
                                float z, float yaw, uint64_t now_monotonic_us);
const char *movement_verdict_text(movement_verdict verdict);
/* Gives a new real its full allowance. */
void movement_reset(const movement_config *config, cell_entity *entity, uint64_t now_monotonic_us);

#endif
