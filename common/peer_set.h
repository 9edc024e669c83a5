/* peer_set.h -- this process's connections to other Tessera processes.
 *
 * The registry says who is alive; the peer set turns that into channels.
 * For each live process it should talk to, the side chosen by the dial rule
 * connects (a baseapp dials cellapps; between cellapps the lower id dials)
 * and both sides open with PeerHello. A peer is "up" once its hello is in,
 * and only then are its messages delivered.
 *
 * A peer goes DOWN when its channel closes (on_peer_down, once per link):
 * what was in flight on it is lost, but nothing the peer owns is: it may
 * be only busy, cut off for a moment, or dying. A peer is DEAD once the
 * cluster has declared it so (on_peer_dead, once per process): the
 * balancer's lease holder decides, when the peer's registry lease lapsed
 * and it has been silent for PEER_SET_DEATH_SILENCE_MS (a stopped or
 * cut-off process), or when its connection closed and it did not come back
 * within PEER_SET_DEATH_RESET_MS (a crashed one: its kernel resets the
 * connection at once), and writes the decision to Redis (registry.h); the
 * registry's dead set and PeerDeath messages tell everyone. Only then does
 * the owner take over or forget what the peer held. A dead process id is
 * never let in again: a process that was declared dead rejoins as a new
 * one.
 *
 * Every link carries a PeerPing every PEER_SET_PING_MS, so a link that
 * carries nothing else is not silent, and each side learns that the other
 * hears it (the echo of its pings): a process whose own lease lapsed is
 * safe from being declared dead while every cellapp that could decide has
 * heard it lately (peer_set_vouched); otherwise it must fence itself.
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

/* How often each link carries a PeerPing (a fraction of a tick: silence is
 * measured against it). */
#define PEER_SET_PING_MS 200
/* A lapsed peer this long silent may be declared dead: five pings missed,
 * far more than a busy loop or a full socket buffer delays one. */
#define PEER_SET_DEATH_SILENCE_MS 1000
/* A peer whose connection closed and that did not reconnect within this
 * long may be declared dead at once (a crash resets its connections; a
 * clean restart re-registers under a new id). */
#define PEER_SET_DEATH_RESET_MS 300
/* A process vouched for: every cellapp that could declare it dead echoed a
 * ping it sent less than this long ago, well inside the silence a death
 * needs (PEER_SET_DEATH_SILENCE_MS), so none can see it silent. */
#define PEER_SET_VOUCH_MS 600

/* What the registry and the cluster's decisions say of a process. */
typedef enum peer_liveness {
    PEER_UNKNOWN, /* never listed (or long gone): the registry does not know it */
    PEER_LISTED,  /* its lease is held */
    PEER_LAPSED,  /* registered, but its lease lapsed: not renewed for the TTL */
    PEER_GONE,    /* it left the registry (a clean stop) and was not declared dead */
    PEER_DEAD,    /* declared dead */
} peer_liveness;

typedef struct peer_set_callbacks {
    void (*on_peer_up)(peer_set *set, uint64_t process_id, peer_role role, void *user_data);
    void (*on_peer_down)(peer_set *set, uint64_t process_id, peer_role role, const char *reason, void *user_data);
    /* Declared dead (once per process; its link, if any, is gone). */
    void (*on_peer_dead)(peer_set *set, uint64_t process_id, peer_role role, const char *reason, void *user_data);
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

/* Call with each registry report: dials new peers, closes the links of
 * those that left, and marks the dead dead. */
void peer_set_on_registry(peer_set *set, const registry_view *view);
/* The cluster declared `process_id` dead (PeerDeath, or this process's own
 * decision): its link closes, no hello from it is accepted again, and
 * on_peer_dead fires (once). */
void peer_set_mark_dead(peer_set *set, uint64_t process_id, const char *reason);
/* What is known of a process. */
peer_liveness peer_set_liveness(const peer_set *set, uint64_t process_id);
/* Whether its link that just came up is not its first: it was up before
 * and went down without the process being declared dead. What each side
 * sent the other meanwhile is lost. */
bool peer_set_returning(const peer_set *set, uint64_t process_id);
/* Its role as last seen (registry or hello); false when never seen. */
bool peer_set_role_of(const peer_set *set, uint64_t process_id, peer_role *role);
/* How long nothing has come from `process_id` at `now_us` (UINT64_MAX when
 * it has no link up). */
uint64_t peer_set_silence_us(const peer_set *set, uint64_t process_id, uint64_t now_us);
/* Since when its link has been down (monotonic us; 0 while it is up, or if
 * it never had one). */
uint64_t peer_set_down_since_us(const peer_set *set, uint64_t process_id);
/* Whether every known peer of `role` that is not dead or gone has echoed a
 * ping this process sent less than PEER_SET_VOUCH_MS before `now_us`. */
bool peer_set_vouched(const peer_set *set, peer_role role, uint64_t now_us);
/* Iterates known processes (listed, lapsed or gone, not dead): *cursor = 0
 * to start; returns the next id, or 0 at the end. */
uint64_t peer_set_next_known(const peer_set *set, size_t *cursor);

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
