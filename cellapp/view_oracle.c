/* view_oracle.c -- the view rule, stated once in its plainest form: a
 * circle on the X/Z plane, entered at the view radius and left beyond the
 * radius plus the hysteresis band. Witnesses apply it; the AOI tests compare
 * against it. */
#include "cellapp.h"

static double view_oracle_distance_squared(const cell_entity *a, const cell_entity *b) {
    double dx = (double)a->x - (double)b->x;
    double dz = (double)a->z - (double)b->z;
    return dx * dx + dz * dz;
}

bool view_oracle_should_enter(const cell_entity *owner, const cell_entity *other, double radius) {
    return view_oracle_distance_squared(owner, other) <= radius * radius;
}

bool view_oracle_should_leave(const cell_entity *owner, const cell_entity *other, double radius,
                              double hysteresis) {
    double outer = radius + hysteresis;
    return view_oracle_distance_squared(owner, other) > outer * outer;
}
