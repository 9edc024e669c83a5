/* movement.c -- the speed check on client-driven movement. A real with a
 * client earns an allowance of max_speed metres per second, banked up to
 * movement_burst_seconds worth; each move spends its length. Network jitter
 * that bunches two moves together is absorbed by the bank; a teleport or a
 * speed hack is not, and is refused without changing anything. */
#include <math.h>

#include "cellapp.h"

const char *movement_verdict_text(movement_verdict verdict) {
    switch (verdict) {
    case MOVEMENT_ACCEPTED: return "accepted";
    case MOVEMENT_TOO_FAST: return "moved faster than the speed limit";
    case MOVEMENT_OUTSIDE_WORLD: return "position outside the world";
    case MOVEMENT_NOT_FINITE: return "position is not a finite number";
    }
    return "unknown";
}

static double movement_bank_limit(const cellapp_settings *settings) {
    return settings->max_speed * settings->movement_burst_seconds;
}

void movement_reset(const cellapp_settings *settings, cell_entity *entity, uint64_t now_monotonic_us) {
    entity->move_allowance = movement_bank_limit(settings);
    entity->allowance_us = now_monotonic_us;
}

movement_verdict movement_check(const cellapp_settings *settings, cell_entity *entity, float x, float y, float z,
                                float yaw, uint64_t now_monotonic_us) {
    if (!isfinite(x) || !isfinite(y) || !isfinite(z) || !isfinite(yaw)) return MOVEMENT_NOT_FINITE;
    if (x < settings->world_min_x || x > settings->world_max_x || z < settings->world_min_z || y < settings->world_min_y || y > settings->world_max_y ||
        z > settings->world_max_z)
        return MOVEMENT_OUTSIDE_WORLD;

    double elapsed = (double)(now_monotonic_us - entity->allowance_us) / 1e6;
    double allowance = entity->move_allowance + elapsed * settings->max_speed;
    double limit = movement_bank_limit(settings);
    if (allowance > limit) allowance = limit;
    entity->allowance_us = now_monotonic_us;

    double dx = (double)x - entity->x, dy = (double)y - entity->y, dz = (double)z - entity->z;
    double distance = sqrt(dx * dx + dy * dy + dz * dz);
    if (distance > allowance) {
        entity->move_allowance = allowance;
        return MOVEMENT_TOO_FAST;
    }
    entity->move_allowance = allowance - distance;
    return MOVEMENT_ACCEPTED;
}
