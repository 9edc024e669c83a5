/* space_maps.c -- owns the navigation mesh of every space that has a map,
 * by space name, for the controllers' navigate and the game's paths. */
#include "space_maps.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "log.h"
#include "space_layout.h"
#include "space_map.h"

struct space_maps {
    struct space_maps_entry {
        char space[SPACE_LAYOUT_NAME_MAX];
        navmesh *mesh;
    } * entries;
    size_t count;
};

space_maps *space_maps_load(const config_group *maps, double cell_size, char *err, size_t errlen) {
    space_maps *set = xcalloc(1, sizeof *set);
    set->entries = xcalloc(maps->count ? maps->count : 1, sizeof *set->entries);
    navmesh_config config = navmesh_default_config();
    config.cell_size = (float)cell_size;
    for (size_t i = 0; i < maps->count; i++) {
        const char *space = maps->items[i].name, *path = maps->items[i].value;
        if (strlen(space) >= SPACE_LAYOUT_NAME_MAX) {
            snprintf(err, errlen, "maps.%s: the space name is too long", space);
            space_maps_free(set);
            return NULL;
        }
        uint64_t began = clock_monotonic_us();
        char why[512];
        navmesh *mesh = space_map_navmesh(path, &config, why, sizeof why);
        if (!mesh) {
            snprintf(err, errlen, "maps.%s: %s", space, why);
            space_maps_free(set);
            return NULL;
        }
        struct space_maps_entry *entry = &set->entries[set->count++];
        snprintf(entry->space, sizeof entry->space, "%s", space);
        entry->mesh = mesh;
        log_info("space '%s': navigation mesh from %s, %d polygons, in %.0f ms", space, path,
                 navmesh_polygon_count(mesh), (double)(clock_monotonic_us() - began) / 1000.0);
    }
    return set;
}

void space_maps_free(space_maps *set) {
    if (!set) return;
    for (size_t i = 0; i < set->count; i++) navmesh_free(set->entries[i].mesh);
    free(set->entries);
    free(set);
}

const navmesh *space_maps_navmesh(const space_maps *set, const char *space) {
    for (size_t i = 0; set && space && i < set->count; i++)
        if (strcmp(set->entries[i].space, space) == 0) return set->entries[i].mesh;
    return NULL;
}
