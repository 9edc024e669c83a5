/* peer_dispatch.h -- what other processes send this cellapp, and peers
 * that come and go, handed to the modules that own them (peer_dispatch.c).
 * These are the cellapp's peer_set callbacks; user_data is the cellapp.
 */
#ifndef TESSERA_PEER_DISPATCH_H
#define TESSERA_PEER_DISPATCH_H

#include <stdint.h>

#include "cellapp.h"
#include "cluster.pb-c.h"
#include "peer_set.h"

void peer_dispatch_on_peer_up(peer_set *set, uint64_t process_id, peer_role role, void *user_data);
void peer_dispatch_on_peer_down(peer_set *set, uint64_t process_id, peer_role role, const char *reason,
                                void *user_data);
void peer_dispatch_on_peer_dead(peer_set *set, uint64_t process_id, peer_role role, const char *reason,
                                void *user_data);
void peer_dispatch_on_message(peer_set *set, uint64_t process_id, peer_role role,
                              const Tessera__Cluster__PeerMessage *message, void *user_data);

#endif
