/* ghost_order.h -- in which order a cellapp applies what successive reals of
 * one entity tell it (proto/cluster.proto, GhostMessage and Offload).
 *
 * A real's messages to one haunt travel on the ordered channel between the
 * two cellapps, but successive reals of one entity (incarnations k, k+1,
 * ... on different cellapps) use different channels, so the new real's
 * first messages can overtake the old real's last ones. Every message
 * carries the incarnation of the real that sent it, and a receiver applies
 * one incarnation at a time:
 *
 *   - a message of the incarnation that applies now is applied;
 *   - one of a later incarnation is HELD until the earlier real's last
 *     message (SET_REAL, or OFFLOAD at its destination) moves the entity on
 *     to it, and is then replayed in arrival order;
 *   - one of an earlier incarnation is STALE and dropped.
 *
 * With no copy here, a CREATE of any incarnation applies (others wait for
 * one), and so does an OFFLOAD, which carries the whole entity. After a
 * DELETE the entity leaves a tombstone for a while: messages
 * of the deleted incarnation or earlier are stale, so a late CREATE from a
 * former real cannot raise a ghost that nobody will delete.
 *
 * A dead cellapp ends its incarnations: the copy it fed moves on to the
 * earliest later incarnation held, or, with nothing held, is LOST (the
 * caller destroys its ghost) or, when the dead cellapp's reals are being
 * restored, an ORPHAN that the restored real's first CREATE takes over. Held messages whose chain never resolves
 * expire.
 *
 * This module only keeps books: it never reads a payload, and it knows
 * entities by id only. Payloads belong to the caller; the order frees the
 * ones it drops through the free callback.
 */
#ifndef TESSERA_GHOST_ORDER_H
#define TESSERA_GHOST_ORDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum ghost_order_kind {
    GHOST_ORDER_CREATE,   /* the real makes a ghost here */
    GHOST_ORDER_UPDATE,   /* position, properties, client calls */
    GHOST_ORDER_DELETE,   /* the real needs no ghost here any more */
    GHOST_ORDER_SET_REAL, /* the real moves to next_owner: its incarnation's last message */
    GHOST_ORDER_OFFLOAD,  /* the real moves HERE: its incarnation's last message to us */
} ghost_order_kind;

typedef struct ghost_order_message {
    ghost_order_kind kind;
    uint64_t sender;      /* the cellapp that sent it */
    uint32_t incarnation; /* of the real that sent it */
    uint64_t next_owner;  /* SET_REAL: where the real went; OFFLOAD: this cellapp */
    void *payload;        /* the caller's */
} ghost_order_message;

typedef enum ghost_order_verdict {
    GHOST_ORDER_APPLY, /* apply it now; the books already count it as applied */
    GHOST_ORDER_HOLD,  /* the order keeps it; ghost_order_next returns it when it applies */
    GHOST_ORDER_STALE, /* drop it (the order has not kept it) */
} ghost_order_verdict;

typedef enum ghost_order_event {
    GHOST_ORDER_NONE,  /* nothing more to do for this entity now */
    GHOST_ORDER_READY, /* a held message applies now: apply it */
    GHOST_ORDER_LOST,  /* the cellapp that fed this copy is gone: destroy it */
} ghost_order_event;

typedef struct ghost_order_stats {
    uint64_t applied, held, stale, replayed, expired, lost;
} ghost_order_stats;

typedef struct ghost_order ghost_order;

/* `free_payload` (may be NULL) frees a payload the order drops. */
ghost_order *ghost_order_create(void (*free_payload)(void *payload, void *context), void *context);
/* Frees every held payload too. */
void ghost_order_free(ghost_order *order);

/* Offers a message about `entity_id` received at `now_us`. */
ghost_order_verdict ghost_order_offer(ghost_order *order, uint64_t entity_id, const ghost_order_message *message,
                                      uint64_t now_us);
/* Gives the message ghost_order_offer has just HELD for `entity_id` its
 * payload (a copy the caller makes only when a message is held). */
void ghost_order_hold_payload(ghost_order *order, uint64_t entity_id, void *payload);
/* Call after applying a message or a change of books (peer down) until it
 * returns NONE: READY hands back a held message (removed from the hold and
 * counted as applied) in *out; LOST says the copy here has lost its real. */
ghost_order_event ghost_order_next(ghost_order *order, uint64_t entity_id, ghost_order_message *out);

/* The books' view of an entity: whether a copy is here, the incarnation
 * whose messages apply, and the cellapp that sends them. Returns false if
 * the order knows nothing of it (or only a tombstone). */
bool ghost_order_lookup(const ghost_order *order, uint64_t entity_id, uint32_t *incarnation, uint64_t *owner);

/* This cellapp holds the real at `incarnation` (it created it, or took it
 * back): owner is `self`. */
void ghost_order_set_real(ghost_order *order, uint64_t entity_id, uint32_t incarnation, uint64_t self);
/* The real here left for `owner`, where it is `incarnation`: the copy here
 * is its ghost. */
void ghost_order_set_ghost(ghost_order *order, uint64_t entity_id, uint32_t incarnation, uint64_t owner);
/* The copy here is gone (destroyed): leaves a tombstone at its incarnation
 * and keeps what is held. */
void ghost_order_forget(ghost_order *order, uint64_t entity_id, uint64_t now_us);

/* Cellapp `peer` is gone. Writes the ids of the entities whose books
 * changed to `out` (at most `cap`; returns how many there are): call
 * ghost_order_next for each. */
size_t ghost_order_peer_down(ghost_order *order, uint64_t peer, uint64_t *out, size_t cap);
/* Cellapp `peer` was declared dead and its reals will be restored
 * elsewhere: like ghost_order_peer_down, but a copy with nothing later
 * held is an ORPHAN rather than lost: it stays, and the first CREATE (or
 * OFFLOAD) of any later incarnation applies to it, so the restored real
 * takes the copy over in place. */
size_t ghost_order_peer_orphans(ghost_order *order, uint64_t peer, uint64_t *out, size_t cap);
/* Whether the copy of `entity_id` here is an orphan. */
bool ghost_order_is_orphan(const ghost_order *order, uint64_t entity_id);

/* Drops held messages older than `max_age_us` and tombstones older than
 * `tombstone_us`. Returns the messages dropped. */
size_t ghost_order_expire(ghost_order *order, uint64_t now_us, uint64_t max_age_us, uint64_t tombstone_us);

size_t ghost_order_held_count(const ghost_order *order);
/* Entities the books hold a record of (an upper bound for peer_down). */
size_t ghost_order_size(const ghost_order *order);
void ghost_order_get_stats(const ghost_order *order, ghost_order_stats *out);
const char *ghost_order_kind_name(ghost_order_kind kind);

#endif
