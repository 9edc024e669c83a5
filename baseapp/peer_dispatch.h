/* peer_dispatch.h -- what other processes send a baseapp, handed to the
 * module that owns it, and cellapps that go away. The peer set's callbacks
 * (peer_set.h); they take the whole process: they only route. */
#ifndef TESSERA_BASEAPP_PEER_DISPATCH_H
#define TESSERA_BASEAPP_PEER_DISPATCH_H

#include <stdint.h>

#include "cluster.pb-c.h"
#include "peer_set.h"

void peer_dispatch_on_peer_up(peer_set *set, uint64_t process_id, peer_role role, void *user_data);
void peer_dispatch_on_peer_down(peer_set *set, uint64_t process_id, peer_role role, const char *reason,
                                void *user_data);
/* Declared dead: the cell parts it held are lost (cell_link.h). */
void peer_dispatch_on_peer_dead(peer_set *set, uint64_t process_id, peer_role role, const char *reason,
                                void *user_data);
void peer_dispatch_on_message(peer_set *set, uint64_t process_id, peer_role role,
                              const Tessera__Cluster__PeerMessage *message, void *user_data);

#endif
