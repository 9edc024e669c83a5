/* coord_query.c -- spatial queries on the coordinate system (Source's
 * spatial partition: entities in a box, a sphere, or along a segment), and
 * the round shapes' distance rule, which round watchers share. A
 * query binary-searches the X axis for its slab and checks the entities in
 * it against the other axes and the filter; it never walks the whole
 * space. Results are capped like Source's (512 by default), and the total
 * is returned so a caller can see it was cut. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "coord_internal.h"
#include "log.h"

static bool coord_query_accepts(const coord_system *cs, uint32_t e, const coord_query_filter *filter) {
    if (!filter) return true;
    const coord_entity_record *record = &cs->entities[e];
    if (e == filter->exclude_entity) return false;
    if (filter->type_mask && (record->type >= 32 || !((1u << record->type) & filter->type_mask))) return false;
    if ((record->flags & filter->required_flags) != filter->required_flags) return false;
    if (record->flags & filter->excluded_flags) return false;
    return true;
}

/* Calls visit(e) for every entity whose position lies in the box, in X
 * order. The box is given per axis (axis order X, Z, Y). */
typedef void (*coord_visit)(coord_system *cs, uint32_t entity, void *context);

static void coord_scan_box(coord_system *cs, const float *low, const float *high, const coord_query_filter *filter,
                           coord_visit visit, void *context) {
    coord__settle(cs);
    const coord_axis *axis = &cs->axes[0];
    size_t i = coord__lower_bound(cs, 0, coord__key(low[0], COORD_KIND_LOWER, 0));
    uint64_t end = coord__key(high[0], COORD_KIND_UPPER, COORD_INDEX_MASK);
    for (; i < axis->count && axis->nodes[i].key <= end; i++) {
        const coord_node *node = &axis->nodes[i];
        if (((node->key >> 30) & 3u) != COORD_KIND_ENTITY) continue;
        /* The X node carries the entity's Z. */
        if (node->low < low[1] || node->low > high[1]) continue;
        uint32_t e = (uint32_t)(node->key & COORD_INDEX_MASK);
        bool inside = true;
        if (cs->axis_count == 3) {
            float c = cs->entity_coord[2][e];
            inside = c >= low[2] && c <= high[2];
        }
        if (inside && coord_query_accepts(cs, e, filter)) visit(cs, e, context);
    }
}

typedef struct coord_collect {
    uint32_t *out;
    size_t cap, total;
    /* sphere and segment tests */
    float centre[3], radius;
    float start[3], direction[3], length_squared;
    float *sort_keys; /* segment: distance along, per collected entity */
    uint32_t *all;    /* segment: every match, before sorting and capping */
    size_t all_count, all_capacity;
} coord_collect;

static void coord_collect_box(coord_system *cs, uint32_t e, void *context) {
    (void)cs;
    coord_collect *collect = context;
    if (collect->total < collect->cap) collect->out[collect->total] = e;
    collect->total++;
}

static void coord_axes_of(const coord_system *cs, float x, float y, float z, float *out) {
    out[0] = x;
    out[1] = z;
    out[2] = cs->axis_count == 3 ? y : 0.0f;
}

size_t coord_query_box(coord_system *cs, float min_x, float min_y, float min_z, float max_x, float max_y, float max_z,
                       const coord_query_filter *filter, uint32_t *out, size_t cap) {
    float low[3], high[3];
    coord_axes_of(cs, min_x, min_y, min_z, low);
    coord_axes_of(cs, max_x, max_y, max_z, high);
    coord_collect collect = {.out = out, .cap = out ? cap : 0};
    coord_scan_box(cs, low, high, filter, coord_collect_box, &collect);
    return collect.total;
}

static void coord_collect_sphere(coord_system *cs, uint32_t e, void *context) {
    coord_collect *collect = context;
    float distance_squared = 0;
    for (int a = 0; a < cs->axis_count; a++) {
        float d = cs->entity_coord[a][e] - collect->centre[a];
        distance_squared += d * d;
    }
    if (distance_squared > collect->radius * collect->radius) return;
    if (collect->total < collect->cap) collect->out[collect->total] = e;
    collect->total++;
}

size_t coord_query_sphere(coord_system *cs, float x, float y, float z, float radius, const coord_query_filter *filter,
                          uint32_t *out, size_t cap) {
    if (!(radius >= 0) || !isfinite(radius)) return 0;
    coord_collect collect = {.out = out, .cap = out ? cap : 0, .radius = radius};
    coord_axes_of(cs, x, y, z, collect.centre);
    float low[3], high[3];
    for (int a = 0; a < 3; a++) {
        low[a] = collect.centre[a] - radius;
        high[a] = collect.centre[a] + radius;
    }
    coord_scan_box(cs, low, high, filter, coord_collect_sphere, &collect);
    return collect.total;
}

typedef struct coord_collect_round {
    coord_collect collect;
    coord_shape shape;
    float centre[3]; /* world order */
} coord_collect_round;

static void coord_collect_shape(coord_system *cs, uint32_t e, void *context) {
    coord_collect_round *round = context;
    float position[3];
    coord__settled_position(cs, e, position);
    if (!coord__within_round(round->shape, round->centre, position, round->collect.radius)) return;
    coord_collect_box(cs, e, &round->collect);
}

size_t coord_query_shape(coord_system *cs, coord_shape shape, float x, float y, float z, float radius,
                         const coord_query_filter *filter, uint32_t *out, size_t cap) {
    if (!(radius >= 0) || !isfinite(radius) || (unsigned)shape > COORD_SHAPE_SPHERE) return 0;
    coord_collect_round round = {
        .collect = {.out = out, .cap = out ? cap : 0, .radius = radius}, .shape = shape, .centre = {x, y, z}};
    /* The square first, bounded exactly as a watcher's trigger is. */
    float centre[3], low[3], high[3];
    coord_axes_of(cs, x, y, z, centre);
    for (int a = 0; a < 3; a++) {
        low[a] = centre[a] - radius;
        high[a] = centre[a] + radius;
    }
    coord_scan_box(cs, low, high, filter, coord_collect_shape, &round);
    return round.collect.total;
}

/* Distance from the entity to the segment, and how far along it the
 * closest point lies (0 at the start). */
static void coord_collect_segment(coord_system *cs, uint32_t e, void *context) {
    coord_collect *collect = context;
    float offset[3] = {0, 0, 0}, along = 0;
    for (int a = 0; a < cs->axis_count; a++) {
        offset[a] = cs->entity_coord[a][e] - collect->start[a];
        along += offset[a] * collect->direction[a];
    }
    float t = collect->length_squared > 0 ? along / collect->length_squared : 0;
    if (t < 0) t = 0;
    if (t > 1) t = 1;
    float distance_squared = 0;
    for (int a = 0; a < cs->axis_count; a++) {
        float d = offset[a] - t * collect->direction[a];
        distance_squared += d * d;
    }
    if (distance_squared > collect->radius * collect->radius) return;
    if (collect->all_count == collect->all_capacity) {
        collect->all_capacity = collect->all_capacity ? collect->all_capacity * 2 : 64;
        collect->all = xrealloc(collect->all, collect->all_capacity * sizeof *collect->all);
        collect->sort_keys = xrealloc(collect->sort_keys, collect->all_capacity * sizeof *collect->sort_keys);
    }
    collect->all[collect->all_count] = e;
    collect->sort_keys[collect->all_count] = t;
    collect->all_count++;
}

size_t coord_query_segment(coord_system *cs, float x0, float y0, float z0, float x1, float y1, float z1, float radius,
                           const coord_query_filter *filter, uint32_t *out, size_t cap) {
    if (!(radius >= 0) || !isfinite(radius)) return 0;
    coord_collect collect = {.radius = radius};
    float end[3];
    coord_axes_of(cs, x0, y0, z0, collect.start);
    coord_axes_of(cs, x1, y1, z1, end);
    float low[3], high[3];
    for (int a = 0; a < 3; a++) {
        collect.direction[a] = end[a] - collect.start[a];
        collect.length_squared += collect.direction[a] * collect.direction[a];
        low[a] = fminf(collect.start[a], end[a]) - radius;
        high[a] = fmaxf(collect.start[a], end[a]) + radius;
    }
    coord_scan_box(cs, low, high, filter, coord_collect_segment, &collect);
    /* Order by distance along the segment: a ray cast wants the first hit
     * first. Insertion sort: a segment query's matches are few. */
    for (size_t i = 1; i < collect.all_count; i++) {
        uint32_t e = collect.all[i];
        float key = collect.sort_keys[i];
        size_t j = i;
        while (j > 0 && collect.sort_keys[j - 1] > key) {
            collect.all[j] = collect.all[j - 1];
            collect.sort_keys[j] = collect.sort_keys[j - 1];
            j--;
        }
        collect.all[j] = e;
        collect.sort_keys[j] = key;
    }
    size_t written = out ? (collect.all_count < cap ? collect.all_count : cap) : 0;
    if (written) memcpy(out, collect.all, written * sizeof *out);
    free(collect.all);
    free(collect.sort_keys);
    return collect.all_count;
}
