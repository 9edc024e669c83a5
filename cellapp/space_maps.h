/* space_maps.h -- the navigation meshes of the spaces that have a map
 * (settings.maps: a map file per space name), built or loaded once at
 * start-up (space_maps.c).
 */
#ifndef TESSERA_SPACE_MAPS_H
#define TESSERA_SPACE_MAPS_H

#include <stddef.h>

#include "config.h"
#include "navmesh.h"

typedef struct space_maps space_maps;

/* Builds (or loads, prebuilt) the mesh of every space in `maps`, at voxel
 * size `cell_size`. NULL with why in err (naming the space). */
space_maps *space_maps_load(const config_group *maps, double cell_size, char *err, size_t errlen);
void space_maps_free(space_maps *set);
/* The navigation mesh of space `space` (NULL: it has no map). */
const navmesh *space_maps_navmesh(const space_maps *set, const char *space);

#endif
