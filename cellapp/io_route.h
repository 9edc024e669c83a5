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

#include "cell.h"
#include "cluster.pb-c.h"
#include "game_hooks.h"
#include "mailbox.h"
#include "peer_set.h"
#include "process_self.h"
#include "redis_client.h"
#include "spaces.h"

typedef struct io_route io_route;

/* What the routes borrow (each outlives them). */
typedef struct io_route_context {
    redis_client *redis; /* the name directory */
    const char *cluster_name;
    const game_hooks *hooks; /* io_input */
    spaces *spaces;
    peer_set *peers;
    mailbox *mailbox;
    const process_self *self;
} io_route_context;

io_route *io_route_create(const io_route_context *context);
void io_route_free(io_route *route);

/* Records in the directory that `entity` now bears its name (old_name: the
 * name it had, "" or NULL for none). */
void io_route_named(io_route *route, const cell_entity *entity, const char *old_name);
/* The named `entity` is destroyed: it leaves the directory. */
void io_route_unnamed(io_route *route, const cell_entity *entity);

/* The input for entities named `name` on other cellapps: looks the name up
 * and sends the input to each id that is not among the `delivered` ones
 * (served here already). Nothing when this cellapp has no peer cellapp. */
void io_route_to_name(io_route *route, const char *name, const uint64_t *delivered, size_t delivered_count,
                      uint64_t activator_id, uint64_t caller_id, const char *input, const char *parameter);
/* The input for the entity `entity_id`, whose real is not here. */
void io_route_to_entity(io_route *route, uint64_t entity_id, uint64_t activator_id, uint64_t caller_id,
                        const char *input, const char *parameter);

/* An io_input CellMessage for the real `target`. */
void io_route_on_message(io_route *route, cell_entity *target, const Tessera__Cluster__IoInput *input);

#endif
