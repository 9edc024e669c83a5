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
 * source; the game learns why (base_game_handover_refused). */
#include <inttypes.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baseapp.h"
#include "clock.h"
#include "log.h"
#include "peer_message.h"
#include "redis_keys.h"

/* A handover offered by this baseapp, until its answer. */
typedef struct handover_pending {
    uint64_t request;
    entity_handle source;
    uint64_t target_id;
} handover_pending;

static void handover_refused(baseapp *app, proxy *source, uint64_t target_id, const char *rule) {
    log_info("entity %" PRIu64 ": giveClientTo entity %" PRIu64 " refused: %s", source ? source->entity_id : 0,
             target_id, rule);
    if (source) base_game_handover_refused(app->game, source, target_id, rule);
    app->handovers_refused++;
}

typedef struct handover_locating {
    baseapp *app;
    uint64_t request;
} handover_locating;

static void handover_on_located(uint64_t target_id, uint64_t baseapp_id, void *context) {
    handover_locating *locating = context;
    baseapp *app = locating->app;
    handover_pending *pending = id_map_get(&app->handovers_pending, locating->request);
    free(locating);
    if (!pending) return;
    proxy *source = entity_list_get(app->proxies, pending->source);
    if (!baseapp_id || baseapp_id == app->process_id) {
        id_map_remove(&app->handovers_pending, pending->request);
        handover_refused(app, source, target_id, "the target is missing");
        if (source) source->handover_pending = false;
        free(pending);
        return;
    }
    Tessera__Cluster__HandoverOffer offer = TESSERA__CLUSTER__HANDOVER_OFFER__INIT;
    offer.request = pending->request;
    offer.source_id = source ? source->entity_id : 0;
    offer.target_id = target_id;
    offer.account = source ? source->account : "";
    if (!source || peer_send_handover_offer(app->peers, baseapp_id, &offer) != 0) {
        id_map_remove(&app->handovers_pending, pending->request);
        handover_refused(app, source, target_id, "the target's baseapp is not reachable");
        if (source) source->handover_pending = false;
        free(pending);
    }
}

int proxy_give_client_to_entity(proxy *from, uint64_t target_id, char *why, size_t why_size) {
    baseapp *app = from ? from->app : NULL;
    proxy *to = app ? proxy_find_by_entity(app, target_id) : NULL;
    if (!from || to) return proxy_give_client_to(from, to, why, why_size);
    /* The source's rules are checked here; the target's, over there. */
    if (proxy_give_client_source_refusal(from)) return proxy_give_client_to(from, NULL, why, why_size);
    if (from->handover_pending) {
        snprintf(why, why_size, "giveClientTo refused: the source is handing its client over already");
        return -1;
    }
    handover_pending *pending = xcalloc(1, sizeof *pending);
    pending->request = ++app->next_handover_request;
    pending->source = from->handle;
    pending->target_id = target_id;
    handover_locating *locating = xcalloc(1, sizeof *locating);
    locating->app = app;
    locating->request = pending->request;
    id_map_put(&app->handovers_pending, pending->request, pending);
    from->handover_pending = true;
    if (base_mailbox_locate(app->bases, target_id, handover_on_located, locating) != 0) {
        id_map_remove(&app->handovers_pending, pending->request);
        free(pending);
        free(locating);
        from->handover_pending = false;
        snprintf(why, why_size, "giveClientTo refused: the base directory is unavailable");
        return -1;
    }
    snprintf(why, why_size, "offered to the target's baseapp");
    return 0;
}

/* ---- the target's side ----------------------------------------------------------- */

typedef struct handover_reserving {
    baseapp *app;
    uint64_t sender;
    uint64_t request;
    uint64_t target_id;
    char token[33];
} handover_reserving;

static void handover_answer(baseapp *app, uint64_t sender, uint64_t request, const char *refusal, const char *token) {
    Tessera__Cluster__HandoverAnswer answer = TESSERA__CLUSTER__HANDOVER_ANSWER__INIT;
    answer.request = request;
    answer.accepted = refusal == NULL;
    answer.reason = (char *)(refusal ? refusal : "");
    answer.host = app->settings.client_public_host[0] ? app->settings.client_public_host : app->settings.client_host;
    answer.port = (uint32_t)app->client_port;
    answer.token = (char *)(token ? token : "");
    if (peer_send_handover_answer(app->peers, sender, &answer) != 0)
        log_info("a handover answer to baseapp %" PRIu64 " could not be sent: it is gone", sender);
}

static void handover_on_reserved(redis_client *redis, redisReply *reply, void *user_data) {
    handover_reserving *reserving = user_data;
    (void)redis;
    baseapp *app = reserving->app;
    proxy *target = proxy_find_by_entity(app, reserving->target_id);
    bool ok = reply && reply->type == REDIS_REPLY_STATUS;
    if (!ok && target) target->handover_reserved_until_us = 0;
    handover_answer(app, reserving->sender, reserving->request, ok ? NULL : "the login database is unavailable",
                    reserving->token);
    free(reserving);
}

void handover_on_offer(baseapp *app, uint64_t sender, const Tessera__Cluster__HandoverOffer *offer) {
    proxy *target = proxy_find_by_entity(app, offer->target_id);
    const char *refusal = !target                                              ? "the target is missing"
                          : target->state == PROXY_DESTROYING                  ? "the target is destroyed"
                          : target->link || target->handover_reserved_until_us ? "the target already has a client"
                          : app->draining                                      ? "the target's baseapp is stopping"
                                                                               : NULL;
    const char *account = offer->account ? offer->account : "";
    if (!refusal && login_check_account_name(account)) refusal = "the client's account name is not one";
    if (refusal) {
        handover_answer(app, sender, offer->request, refusal, NULL);
        return;
    }
    handover_reserving *reserving = xcalloc(1, sizeof *reserving);
    reserving->app = app;
    reserving->sender = sender;
    reserving->request = offer->request;
    reserving->target_id = offer->target_id;
    unsigned char bytes[16];
    randombytes_buf(bytes, sizeof bytes);
    sodium_bin2hex(reserving->token, sizeof reserving->token, bytes, sizeof bytes);
    char key[REDIS_KEY_MAX], value[128], ttl[24];
    redis_key_login_token(key, app->settings.process.cluster_name, reserving->token);
    snprintf(value, sizeof value, "handover:%" PRIu64 ":%s", offer->target_id, account);
    snprintf(ttl, sizeof ttl, "%lld", (long long)app->settings.redirect_token_ms);
    if (redis_client_command(app->redis, handover_on_reserved, reserving, "SET %s %s PX %s", key, value, ttl) != 0) {
        free(reserving);
        handover_answer(app, sender, offer->request, "the login database is unavailable", NULL);
        return;
    }
    target->handover_reserved_until_us = clock_monotonic_us() + (uint64_t)app->settings.redirect_token_ms * 1000u;
}

/* ---- the answer, on the source's side ------------------------------------------------ */

void handover_on_answer(baseapp *app, const Tessera__Cluster__HandoverAnswer *answer) {
    handover_pending *pending = id_map_remove(&app->handovers_pending, answer->request);
    if (!pending) return;
    proxy *source = entity_list_get(app->proxies, pending->source);
    uint64_t target_id = pending->target_id;
    free(pending);
    if (!source) return; /* gone meanwhile: the target's reservation lapses */
    source->handover_pending = false;
    if (!answer->accepted) {
        handover_refused(app, source, target_id, answer->reason ? answer->reason : "refused");
        return;
    }
    const char *refused = proxy_give_client_source_refusal(source);
    if (refused) {
        handover_refused(app, source, target_id, refused); /* its client left meanwhile */
        return;
    }
    proxy_send_client_away(source, target_id, answer->host ? answer->host : "", (int)answer->port,
                           answer->token ? answer->token : "");
}
