/* handover.h -- giveClientTo to an entity whose base is on another baseapp:
 * the source's side offers the client (HandoverOffer), the target's side
 * checks and reserves the target and answers with a one-time token
 * (HandoverAnswer), and only then does the client leave the source. The
 * protocol is walked at the top of handover.c.
 */
#ifndef TESSERA_HANDOVER_H
#define TESSERA_HANDOVER_H

#include <stddef.h>
#include <stdint.h>

#include "base_entity.h"
#include "base_hooks.h"
#include "base_mailbox.h"
#include "baseapp_settings.h"
#include "cluster.pb-c.h"
#include "peer_set.h"
#include "proxy.h"
#include "redis_client.h"

typedef struct handovers handovers;

typedef struct handovers_context {
    const baseapp_settings *settings;
    redis_client *redis;
    peer_set *peers;
    base_entities *bases;
    proxies *players;
    base_mailbox *addresses; /* finds the target's baseapp */
    const base_hooks *hooks;
    const process_self *self;
    const bool *draining;
    const int *client_port;    /* the port it listens on (answers name the public one) */
    const int *websocket_port; /* ... its WebSocket port (0: none) */
} handovers_context;

handovers *handovers_create(const handovers_context *context);
/* Frees the module and the handovers still waiting for an answer. */
void handovers_free(handovers *set);
/* giveClientTos another baseapp refused. */
uint64_t handovers_refused(const handovers *set);

/* giveClientTo by id: a target here is given the client at once; one on
 * another baseapp is offered it first, and the client goes there once it
 * accepts. Returns 0 (done, or offered: `why` says which), or -1 with `why`
 * naming the rule that refuses it. */
int handover_give_client_to_entity(handovers *set, base_entity *from, uint64_t target_id, char *why, size_t why_size);
/* A HandoverOffer from baseapp `sender` (the target's side). */
void handover_on_offer(handovers *set, uint64_t sender, const Tessera__Cluster__HandoverOffer *offer);
/* A HandoverAnswer (the source's side). */
void handover_on_answer(handovers *set, const Tessera__Cluster__HandoverAnswer *answer);
/* Baseapp `baseapp_id` was declared dead: the handovers offered to it and
 * not answered are refused ("the target's baseapp died"); their clients
 * stay with their sources. */
void handovers_on_baseapp_dead(handovers *set, uint64_t baseapp_id);
/* Handovers unanswered for HANDOVER_ANSWER_WAIT_MS (a target's baseapp
 * that is stalled, or lost the offer) are refused the same way; a late
 * answer finds nothing and the target's reservation lapses. */
void handovers_sweep(handovers *set);

/* How long an offer waits for its answer. */
#define HANDOVER_ANSWER_WAIT_MS 5000

#endif
