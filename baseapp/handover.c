/* handover.c -- giveClientTo to an entity whose base is on another
 * baseapp.
 *
 * The source's baseapp finds the target's (the base directory) and offers
 * it the client (HandoverOffer). The target's baseapp checks the target as
 * a local giveClientTo would (there, not destroyed, without a client),
 * reserves it for redirect_token_ms, stores a one-time token and answers
 * (HandoverAnswer). Only then does the source do giveClientTo's steps 1 to
 * 4 -- its cell loses its witness, the client destroys the old player, the
 * source loses its client -- and sends the client, with a LoginRedirect
 * and the token, to the target's baseapp, where the TokenLogin binds it to
 * the target (steps 5 to 7: the target created on the client, client
 * enabled, its cell rebinding the client). The client does not log in
 * again: the token stands for the login.
 *
 * A refusal comes before anything changed, so the client stays with the
 * source; the game learns why (the handover_refused hook). This file owns
 * the handovers offered and waiting for their answer. */
#include <inttypes.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "handover.h"

#include "account_name.h"
#include "clock.h"
#include "id_map.h"
#include "log.h"
#include "peer_message.h"
#include "redis_keys.h"

struct handovers {
    handovers_context context;
    id_map pending; /* request -> handover_pending */
    uint64_t next_request;
    uint64_t refused;
};

/* A handover offered by this baseapp, until its answer. */
typedef struct handover_pending {
    uint64_t request;
    entity_handle source;
    uint64_t target_id;
    uint64_t baseapp_id; /* the target's, once located (0: not yet) */
    uint64_t offered_us; /* monotonic */
} handover_pending;

handovers *handovers_create(const handovers_context *context) {
    handovers *set = xcalloc(1, sizeof *set);
    set->context = *context;
    id_map_init(&set->pending);
    return set;
}

void handovers_free(handovers *set) {
    if (!set) return;
    size_t cursor = 0;
    uint64_t request;
    void *pending;
    while (id_map_next(&set->pending, &cursor, &request, &pending)) free(pending);
    id_map_close(&set->pending);
    free(set);
}

uint64_t handovers_refused(const handovers *set) { return set->refused; }

/* The proxy part of the live base behind `handle`, or NULL. */
static proxy *handover_source(const handovers *set, entity_handle handle) {
    base_entity *base = base_entities_get(set->context.bases, handle);
    return base ? base->proxy : NULL;
}

static void handover_refused(handovers *set, proxy *source, uint64_t target_id, const char *rule) {
    log_info("entity %" PRIu64 ": giveClientTo entity %" PRIu64 " refused: %s", source ? source->base->entity_id : 0,
             target_id, rule);
    if (source) base_hooks_handover_refused(set->context.hooks, source->base, target_id, rule);
    set->refused++;
}

typedef struct handover_locating {
    handovers *set;
    uint64_t request;
} handover_locating;

static void handover_on_located(uint64_t target_id, uint64_t baseapp_id, void *context) {
    handover_locating *locating = context;
    handovers *set = locating->set;
    handover_pending *pending = id_map_get(&set->pending, locating->request);
    free(locating);
    if (!pending) return;
    proxy *source = handover_source(set, pending->source);
    if (!baseapp_id || baseapp_id == set->context.self->process_id) {
        id_map_remove(&set->pending, pending->request);
        handover_refused(set, source, target_id, "the target is missing");
        if (source) source->handover_pending = false;
        free(pending);
        return;
    }
    Tessera__Cluster__HandoverOffer offer = TESSERA__CLUSTER__HANDOVER_OFFER__INIT;
    offer.request = pending->request;
    offer.source_id = source ? source->base->entity_id : 0;
    offer.target_id = target_id;
    offer.account = source ? source->account : "";
    pending->baseapp_id = baseapp_id;
    if (!source || peer_send_handover_offer(set->context.peers, baseapp_id, &offer) != 0) {
        id_map_remove(&set->pending, pending->request);
        handover_refused(set, source, target_id, "the target's baseapp is not reachable");
        if (source) source->handover_pending = false;
        free(pending);
    }
}

int handover_give_client_to_entity(handovers *set, base_entity *from, uint64_t target_id, char *why, size_t why_size) {
    proxies *players = set->context.players;
    base_entity *to = base_entities_find(set->context.bases, target_id);
    if (!from || to) return proxy_give_client_to(players, from, to, why, why_size);
    /* The source's rules are checked here; the target's, over there. */
    if (proxy_give_client_source_refusal(from)) return proxy_give_client_to(players, from, NULL, why, why_size);
    proxy *source = from->proxy;
    if (source->handover_pending) {
        snprintf(why, why_size, "giveClientTo refused: the source is handing its client over already");
        return -1;
    }
    handover_pending *pending = xcalloc(1, sizeof *pending);
    pending->request = ++set->next_request;
    pending->source = from->handle;
    pending->target_id = target_id;
    pending->offered_us = clock_monotonic_us();
    handover_locating *locating = xcalloc(1, sizeof *locating);
    locating->set = set;
    locating->request = pending->request;
    id_map_put(&set->pending, pending->request, pending);
    source->handover_pending = true;
    if (base_mailbox_locate(set->context.addresses, target_id, handover_on_located, locating) != 0) {
        id_map_remove(&set->pending, pending->request);
        free(pending);
        free(locating);
        source->handover_pending = false;
        snprintf(why, why_size, "giveClientTo refused: the base directory is unavailable");
        return -1;
    }
    snprintf(why, why_size, "offered to the target's baseapp");
    return 0;
}

/* ---- the target's side ----------------------------------------------------------- */

typedef struct handover_reserving {
    handovers *set;
    uint64_t sender;
    uint64_t request;
    uint64_t target_id;
    char token[33];
} handover_reserving;

static void handover_answer(handovers *set, uint64_t sender, uint64_t request, const char *refusal, const char *token) {
    Tessera__Cluster__HandoverAnswer answer = TESSERA__CLUSTER__HANDOVER_ANSWER__INIT;
    answer.request = request;
    answer.accepted = refusal == NULL;
    answer.reason = (char *)(refusal ? refusal : "");
    answer.host = (char *)baseapp_settings_public_host(set->context.settings);
    answer.port = (uint32_t)baseapp_settings_public_port(set->context.settings, *set->context.client_port);
    answer.websocket_port =
        (uint32_t)baseapp_settings_public_websocket_port(set->context.settings, *set->context.websocket_port);
    answer.token = (char *)(token ? token : "");
    if (peer_send_handover_answer(set->context.peers, sender, &answer) != 0)
        log_info("a handover answer to baseapp %" PRIu64 " could not be sent: it is gone", sender);
}

static void handover_on_reserved(redis_client *redis, redisReply *reply, void *user_data) {
    handover_reserving *reserving = user_data;
    (void)redis;
    handovers *set = reserving->set;
    if (set->context.self->stopping) {
        free(reserving);
        return;
    }
    base_entity *target = base_entities_find(set->context.bases, reserving->target_id);
    bool ok = reply && reply->type == REDIS_REPLY_STATUS;
    if (!ok && target && target->proxy) target->proxy->handover_reserved_until_us = 0;
    handover_answer(set, reserving->sender, reserving->request, ok ? NULL : "the login database is unavailable",
                    reserving->token);
    free(reserving);
}

void handover_on_offer(handovers *set, uint64_t sender, const Tessera__Cluster__HandoverOffer *offer) {
    base_entity *target = base_entities_find(set->context.bases, offer->target_id);
    const proxy *held = target ? target->proxy : NULL;
    bool taken = held && (held->link || held->handover_reserved_until_us);
    const char *refusal = !target                                   ? "the target is missing"
                          : target->state == BASE_ENTITY_DESTROYING ? "the target is destroyed"
                          : taken                                   ? "the target already has a client"
                          : *set->context.draining                  ? "the target's baseapp is stopping"
                                                                    : NULL;
    const char *account = offer->account ? offer->account : "";
    if (!refusal && account_name_check(account)) refusal = "the client's account name is not one";
    if (refusal) {
        handover_answer(set, sender, offer->request, refusal, NULL);
        return;
    }
    handover_reserving *reserving = xcalloc(1, sizeof *reserving);
    reserving->set = set;
    reserving->sender = sender;
    reserving->request = offer->request;
    reserving->target_id = offer->target_id;
    unsigned char bytes[16];
    randombytes_buf(bytes, sizeof bytes);
    sodium_bin2hex(reserving->token, sizeof reserving->token, bytes, sizeof bytes);
    char key[REDIS_KEY_MAX], value[128], ttl[24];
    const baseapp_settings *settings = set->context.settings;
    redis_key_login_token(key, settings->process.cluster_name, reserving->token);
    /* The sender gives the account's session up by sending the client. */
    snprintf(value, sizeof value, "handover:%" PRIu64 ":%" PRIu64 ":%s", offer->target_id, sender, account);
    snprintf(ttl, sizeof ttl, "%lld", (long long)settings->redirect_token_ms);
    if (redis_client_command(set->context.redis, handover_on_reserved, reserving, "SET %s %s PX %s", key, value, ttl) !=
        0) {
        free(reserving);
        handover_answer(set, sender, offer->request, "the login database is unavailable", NULL);
        return;
    }
    /* Reserved on its proxy part, which the client fills when it comes. */
    proxy_reserve(target, clock_monotonic_us() + (uint64_t)settings->redirect_token_ms * 1000u);
}

/* ---- the answer, on the source's side ------------------------------------------------ */

void handover_on_answer(handovers *set, const Tessera__Cluster__HandoverAnswer *answer) {
    handover_pending *pending = id_map_remove(&set->pending, answer->request);
    if (!pending) return;
    proxy *source = handover_source(set, pending->source);
    uint64_t target_id = pending->target_id;
    free(pending);
    if (!source) return; /* gone meanwhile: the target's reservation lapses */
    source->handover_pending = false;
    if (!answer->accepted) {
        handover_refused(set, source, target_id, answer->reason ? answer->reason : "refused");
        return;
    }
    const char *refused = proxy_give_client_source_refusal(source->base);
    if (refused) {
        handover_refused(set, source, target_id, refused); /* its client left meanwhile */
        return;
    }
    /* A browser reaches the target's baseapp on its WebSocket port only. */
    int port = proxy_client_is_websocket(source->base) ? (int)answer->websocket_port : (int)answer->port;
    if (port <= 0) {
        handover_refused(set, source, target_id, "the target's baseapp has no WebSocket port for a browser client");
        return;
    }
    proxy_send_client_away(set->context.players, source->base, target_id, answer->host ? answer->host : "", port,
                           answer->token ? answer->token : "");
}

/* Refuses every handover waiting for an answer that `gives_up` picks. */
static void handovers_give_up(handovers *set, bool (*gives_up)(const handover_pending *, uint64_t), uint64_t value,
                              const char *rule) {
    size_t cursor = 0;
    uint64_t request;
    void *entry;
    while (id_map_next(&set->pending, &cursor, &request, &entry)) {
        handover_pending *pending = entry;
        if (!gives_up(pending, value)) continue;
        id_map_remove(&set->pending, request);
        proxy *source = handover_source(set, pending->source);
        handover_refused(set, source, pending->target_id, rule);
        if (source) source->handover_pending = false;
        free(pending);
        cursor = 0; /* the map changed under the walk */
    }
}

static bool handover_offered_to(const handover_pending *pending, uint64_t baseapp_id) {
    return pending->baseapp_id == baseapp_id;
}

static bool handover_waited_since(const handover_pending *pending, uint64_t deadline_us) {
    return pending->baseapp_id && pending->offered_us < deadline_us;
}

void handovers_on_baseapp_dead(handovers *set, uint64_t baseapp_id) {
    if (baseapp_id) handovers_give_up(set, handover_offered_to, baseapp_id, "the target's baseapp died");
}

void handovers_sweep(handovers *set) {
    if (id_map_count(&set->pending) == 0) return;
    uint64_t now_us = clock_monotonic_us(), wait_us = (uint64_t)HANDOVER_ANSWER_WAIT_MS * 1000u;
    if (now_us < wait_us) return;
    handovers_give_up(set, handover_waited_since, now_us - wait_us, "the target's baseapp did not answer");
}
