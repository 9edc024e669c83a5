/* movement.c -- the speed check on client-driven movement. A real with a
 * client earns an allowance of max_speed metres per second, banked up to
 * movement_burst_seconds worth; each move spends its length. Network jitter
 * that bunches two moves together is absorbed by the bank; a teleport or a
 * speed hack is not, and is refused without changing anything. */
#include <math.h>

#include "movement.h"

const char *movement_verdict_text(movement_verdict verdict) {
    switch (verdict) {
        case MOVEMENT_ACCEPTED:
            return "accepted";
        case MOVEMENT_TOO_FAST:
            return "moved faster than the speed limit";
        case MOVEMENT_OUTSIDE_WORLD:
            return "position outside every cell of the space";
        case MOVEMENT_NOT_FINITE:
            return "position is not a finite number";
    }
    return "unknown";
}

static double movement_bank_limit(const movement_config *settings) {
    return settings->max_speed * settings->burst_seconds;
}

void movement_reset(const movement_config *settings, cell_entity *entity, uint64_t now_monotonic_us) {
    entity->real->move_allowance = movement_bank_limit(settings);
    entity->real->allowance_us = now_monotonic_us;
}

movement_verdict movement_check(const movement_config *settings, const cell *c, cell_entity *entity, float x, float y,
                                float z, float yaw, uint64_t now_monotonic_us) {
    if (!isfinite(x) || !isfinite(y) || !isfinite(z) || !isfinite(yaw)) return MOVEMENT_NOT_FINITE;
    /* The space's bounds are the union of its cells: a point beyond them is
     * in no cell. */
    if (!cell_in_bounds(c, x, y, z)) return MOVEMENT_OUTSIDE_WORLD;

    double elapsed = (double)(now_monotonic_us - entity->real->allowance_us) / 1e6;
    double allowance = entity->real->move_allowance + elapsed * settings->max_speed;
    double limit = movement_bank_limit(settings);
    if (allowance > limit) allowance = limit;
    entity->real->allowance_us = now_monotonic_us;

    double dx = (double)x - entity->x, dy = (double)y - entity->y, dz = (double)z - entity->z;
    double distance = sqrt(dx * dx + dy * dy + dz * dz);
    if (distance > allowance) {
        entity->real->move_allowance = allowance;
        return MOVEMENT_TOO_FAST;
    }
    entity->real->move_allowance = allowance - distance;
    return MOVEMENT_ACCEPTED;
}
