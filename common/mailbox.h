/* mailbox.h -- messages to an entity's cell part, by entity id
 * (proto/cluster.proto: CellMessage): the sending side, which numbers each
 * (sender, entity) stream and finds where the entity's real is, and the
 * receiving side (mailbox_inbox), which delivers every stream in order,
 * exactly once, across the real's moves between cellapps.
 *
 * Finding the real. A sender names a process it believes holds the real
 * (the address a baseapp was told, the cellapp of a local ghost). Without
 * one, the mailbox asks the cell directory in Redis (P cell_directory, an
 * entity id -> "<cellapp>:<incarnation>" hash that each real writes when it
 * arrives), holding the entity's messages until the answer, and keeps the
 * answer (with its incarnation) for the next messages, until a failure
 * clears it or its stream is forgotten. An address that
 * is out of date costs a forward, never a loss: a cellapp that no longer
 * holds the real forwards along the ghost route (cellapp/ghost_route.h).
 * Where nobody holds the real, the sender hears CellMessageFailed and the
 * mailbox reports it: nothing is dropped silently.
 *
 * Streams. Each target gets a stream number, unique and growing within the
 * sending process, and sequence numbers 1, 2, 3 ... A target not written to
 * for MAILBOX_IDLE_MS is forgotten; writing to it again starts a new
 * stream, which the receiver recognises by its larger number.
 */
#ifndef TESSERA_MAILBOX_H
#define TESSERA_MAILBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cluster.pb-c.h"
#include "redis_client.h"

/* Why a minute: far longer than any message spends in flight or on the
 * ghost route, so a stream is never restarted under a message of the old one. */
#define MAILBOX_IDLE_MS 60000

/* ---- sending ---------------------------------------------------------------- */

typedef struct mailbox mailbox;

/* Puts a stamped message on the wire to `process_id`. Returns 0, or -1 when
 * that process is not reachable. */
typedef int (*mailbox_send_callback)(uint64_t process_id, const Tessera__Cluster__CellMessage *message,
                                     void *user_data);
/* A message could not be delivered: `reason` says why (the directory does
 * not know the entity, the process it named is unreachable, a receiver
 * answered CellMessageFailed). */
typedef void (*mailbox_failed_callback)(uint64_t entity_id, uint64_t sequence, const char *reason, void *user_data);

mailbox *mailbox_create(redis_client *redis, const char *cluster_name, mailbox_send_callback send,
                        mailbox_failed_callback failed, void *user_data);
/* Frees the mailbox; messages waiting for the directory are reported failed. */
void mailbox_free(mailbox *box);
/* This process's id (the sender of its streams), once registered. */
void mailbox_set_self(mailbox *box, uint64_t self_id);

/* Sends `message` (entity_id and body set by the caller) to the cell of
 * message->entity_id: stamps sender, stream and sequence, then sends it to
 * `where`, or, when where is 0, to the directory's answer. Returns the
 * sequence given, or 0 when the message failed at once (reported). */
uint64_t mailbox_send_cell(mailbox *box, Tessera__Cluster__CellMessage *message, uint64_t where, uint64_t now_ms);
/* A receiver answered CellMessageFailed: reports it and forgets the cached
 * address. */
void mailbox_on_failed(mailbox *box, const Tessera__Cluster__CellMessageFailed *failed);
/* Forgets streams idle for MAILBOX_IDLE_MS (call now and then). */
void mailbox_sweep(mailbox *box, uint64_t now_ms);
size_t mailbox_stream_count(const mailbox *box);

/* The cell directory. Records that entity's real is now `incarnation` on
 * `cellapp_id`, unless the directory already holds a later incarnation. */
void mailbox_directory_set(redis_client *redis, const char *cluster_name, uint64_t entity_id, uint64_t cellapp_id,
                           uint32_t incarnation);
/* How a claim came out: `claimed` with the entity's new incarnation, or
 * not (`holder` holds it: a live cellapp, or 0 when the directory has no
 * entry, or when Redis did not answer: `failed`). */
typedef void (*mailbox_claim_callback)(uint64_t entity_id, bool claimed, bool failed, uint32_t incarnation,
                                       uint64_t holder, void *context);
/* Claims the entity for `claimant` when the directory's entry names a
 * cellapp in the dead set (P dead), or, with `take_own`, the claimant
 * itself (a real it sent away and takes back): the entry becomes
 * `claimant` at the larger of the entry's incarnation + 1 and `at_least`,
 * atomically, so one entity is claimed by one cellapp only. Without
 * take_own an entry naming the claimant is not taken (holder: the
 * claimant; it holds the entity already). An entity with no entry is not
 * claimed (it was destroyed) unless make_missing is set: then the entry is
 * made (incarnation at_least, holder 0). Returns 0, or -1 when Redis is not
 * connected (the callback will not fire). */
int mailbox_directory_claim(redis_client *redis, const char *cluster_name, uint64_t entity_id, uint64_t claimant,
                            uint32_t at_least, bool take_own, bool make_missing, mailbox_claim_callback done,
                            void *context);
/* Removes the entry if it still names this incarnation on this cellapp. */
void mailbox_directory_remove(redis_client *redis, const char *cluster_name, uint64_t entity_id, uint64_t cellapp_id,
                              uint32_t incarnation);

/* ---- receiving -------------------------------------------------------------- */

typedef struct mailbox_inbox mailbox_inbox;

typedef enum mailbox_verdict {
    MAILBOX_DELIVER,   /* deliver it now: it was the stream's next */
    MAILBOX_HOLD,      /* early: the inbox kept a copy until the gap fills */
    MAILBOX_DUPLICATE, /* delivered before (or older than its stream): drop it */
} mailbox_verdict;

mailbox_inbox *mailbox_inbox_create(void);
void mailbox_inbox_free(mailbox_inbox *inbox);

/* Offers a message of stream (sender, stream) with `sequence`. A stream
 * number larger than the one known from this sender starts a new stream at
 * sequence 1; a smaller one is a duplicate. On MAILBOX_HOLD the caller
 * hands the encoded message to mailbox_inbox_hold. */
mailbox_verdict mailbox_inbox_offer(mailbox_inbox *inbox, uint64_t sender, uint64_t stream, uint64_t sequence,
                                    uint64_t now_us);
/* Keeps a copy of `encoded` (the whole CellMessage) as (sender, sequence)
 * of the stream the last offer named, until its turn. */
void mailbox_inbox_hold(mailbox_inbox *inbox, uint64_t sender, uint64_t sequence, const uint8_t *encoded, size_t length,
                        uint64_t now_us);
/* A held message that is deliverable now: its turn has come, or its stream
 * has waited gap_us for the gap before it, which is then given up (*skipped
 * counts the sequences given up). Returns the encoded message (the caller
 * frees it), or NULL. */
uint8_t *mailbox_inbox_next(mailbox_inbox *inbox, uint64_t now_us, uint64_t gap_us, size_t *length, uint64_t *skipped);
size_t mailbox_inbox_held_count(const mailbox_inbox *inbox);
/* The inbox was restored from an older state of its entity (its cellapp
 * died): what its senders sent since went with that cellapp. Each stream
 * goes on from its first held message or the next one offered, and so
 * does a sender first heard before `until_us`, instead of waiting for the
 * lost ones. */
void mailbox_inbox_resync(mailbox_inbox *inbox, uint64_t until_us);

/* Serialization (an offload): the streams as InboxStream messages. *out is
 * allocated, pointing into the inbox; free with mailbox_inbox_saved_free
 * before the inbox changes. */
void mailbox_inbox_save(const mailbox_inbox *inbox, uint64_t now_us, Tessera__Cluster__InboxStream ***out,
                        size_t *count);
void mailbox_inbox_saved_free(Tessera__Cluster__InboxStream **streams, size_t count);
/* Rebuilds an inbox from saved streams (copies everything). */
mailbox_inbox *mailbox_inbox_restore(Tessera__Cluster__InboxStream *const *streams, size_t count, uint64_t now_us);

#endif
