/* ghost_route.h -- where departed reals went (ghost_route.c): for a while
 * after a real leaves, a message for it that arrives here is forwarded to
 * where it went.
 */
#ifndef TESSERA_GHOST_ROUTE_H
#define TESSERA_GHOST_ROUTE_H

#include <stddef.h>
#include <stdint.h>

typedef struct ghost_route ghost_route;

ghost_route *ghost_route_create(void);
void ghost_route_free(ghost_route *route);
/* Real `entity_id` left for `cellapp_id`: remember it until `until_ms`. */
void ghost_route_add(ghost_route *route, uint64_t entity_id, uint64_t cellapp_id, uint64_t until_ms);
/* Where `entity_id` went, or 0 if not remembered (or expired). */
uint64_t ghost_route_find(ghost_route *route, uint64_t entity_id, uint64_t now_ms);
void ghost_route_remove(ghost_route *route, uint64_t entity_id);
void ghost_route_expire(ghost_route *route, uint64_t now_ms);
size_t ghost_route_count(const ghost_route *route);

#endif
