/* io_route.h -- entity I/O between cellapps (cellapp/entity_io.h has the
 * rules of outputs and events). An event whose target is a name reaches
 * every entity of that name in the cluster: the ones here at once, when it
 * is serviced; the ones on other cellapps a Redis round trip and a hop
 * later, found through the name directory (P entity_name:<name>, a set of
 * entity ids each named real adds itself to when it is made or named, and
 * leaves when it is destroyed or renamed) and reached through the mailbox
 * (CellMessage's io_input), wherever their reals are by then. "!activator"
 * and "!caller" that are not reals here go the same way; "!self" is always
 * here, and a class as the fallback target means the class's entities here.
 *
 * A target that is gone by the time its input arrives loses the event (the
 * sender's mailbox logs it); nothing else is lost when a peer disappears. */
#ifndef TESSERA_IO_ROUTE_H
#define TESSERA_IO_ROUTE_H

#include <stddef.h>
#include <stdint.h>

#include "cellapp.h"

/* Records in the directory that `entity` now bears its name (old_name: the
 * name it had, "" or NULL for none). */
void io_route_named(cellapp *app, const cell_entity *entity, const char *old_name);
/* The named `entity` is destroyed: it leaves the directory. */
void io_route_unnamed(cellapp *app, const cell_entity *entity);

/* The input for entities named `name` on other cellapps: looks the name up
 * and sends the input to each id that is not among the `delivered` ones
 * (served here already). Nothing when this cellapp has no peer cellapp. */
void io_route_to_name(cellapp *app, const char *name, const uint64_t *delivered, size_t delivered_count,
                      uint64_t activator_id, uint64_t caller_id, const char *input, const char *parameter);
/* The input for the entity `entity_id`, whose real is not here. */
void io_route_to_entity(cellapp *app, uint64_t entity_id, uint64_t activator_id, uint64_t caller_id, const char *input,
                        const char *parameter);

/* An io_input CellMessage for the real `target`. */
void io_route_on_message(cellapp *app, cell_entity *target, const Tessera__Cluster__IoInput *input);

#endif
