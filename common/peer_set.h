/* peer_set.h -- this process's connections to other Tessera processes.
 *
 * The registry says who is alive; the peer set turns that into channels.
 * For each live process it should talk to, the side chosen by the dial rule
 * connects (a baseapp dials cellapps; between cellapps the lower id dials)
 * and both sides open with PeerHello. A peer is "up" once its hello is in,
 * and only then are its messages delivered.
 *
 * A peer goes down when its channel closes or when the registry stops
 * listing it (its heartbeat lapsed: a frozen process keeps its sockets open,
 * so only the registry can tell). Either way on_peer_down fires once, and
 * the owner forgets everything that lived on that peer. A process that
 * comes back is a new connection.
 *
 * Peers are named by process id across the API; a peer_link pointer is
 * valid only during the callback that hands it out.
 */
#ifndef TESSERA_PEER_SET_H
#define TESSERA_PEER_SET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "channel.h"
#include "cluster.pb-c.h"
#include "registry.h"

typedef struct peer_set peer_set;

typedef enum peer_role {
    PEER_ROLE_BASEAPP = TESSERA__CLUSTER__ROLE__ROLE_BASEAPP,
    PEER_ROLE_CELLAPP = TESSERA__CLUSTER__ROLE__ROLE_CELLAPP,
} peer_role;

typedef struct peer_set_callbacks {
    void (*on_peer_up)(peer_set *set, uint64_t process_id, peer_role role, void *user_data);
    void (*on_peer_down)(peer_set *set, uint64_t process_id, peer_role role, const char *reason, void *user_data);
    /* `message` is freed when the callback returns. */
    void (*on_message)(peer_set *set, uint64_t process_id, peer_role role, const Tessera__Cluster__PeerMessage *message,
                       void *user_data);
} peer_set_callbacks;

peer_set *peer_set_create(uv_loop_t *loop, peer_role role, const char *cluster_name,
                          const peer_set_callbacks *callbacks, void *user_data, channel_stats *totals);
/* Closes every channel (on_peer_down fires for peers that were up) and frees
 * the set once they are released. */
void peer_set_free(peer_set *set);

/* This process's id, once the registry has given it one. Dialling and
 * accepting wait for it. */
void peer_set_set_process_id(peer_set *set, uint64_t process_id);

/* Call from the listener's connection callback. */
void peer_set_accept(peer_set *set, uv_stream_t *listener);

/* Call with each registry report: dials new peers, drops lapsed ones. */
void peer_set_on_registry(peer_set *set, const registry_peer *peers, size_t count);

/* Sends to an up peer. Returns 0, or -1 if that peer is not up. */
int peer_set_send(peer_set *set, uint64_t process_id, const Tessera__Cluster__PeerMessage *message);
size_t peer_set_count_up(const peer_set *set, peer_role role);
/* Whether `process_id` is an up peer (of either role). */
bool peer_set_is_up(const peer_set *set, uint64_t process_id);

/* Iterates up peers of `role`: *cursor = 0 to start; returns the next
 * process id or 0 at the end. */
uint64_t peer_set_next_up(const peer_set *set, peer_role role, size_t *cursor);

/* The registry's last published load of an up peer (0 if unknown). */
int64_t peer_set_load(const peer_set *set, uint64_t process_id);

const char *peer_role_name(peer_role role);

#endif
