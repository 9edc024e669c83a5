/* login_route.c -- which baseapp an account plays on, and getting its
 * client there.
 *
 * A client may log in at any baseapp. Once its credentials check out:
 *
 *   - if the account's proxy is here, it plays here (proxy.c takes it
 *     over, kicking an older client with ERROR_REPLACED);
 *   - if the session directory (P session:<account>, redis_keys.h) names
 *     another live baseapp, the client goes there: its entity lives there,
 *     and a second login kicks the first wherever it is;
 *   - otherwise it plays on the least-loaded baseapp that is not draining.
 *
 * One life per account: before a login plays here or is sent to the
 * least-loaded baseapp, the account's session is claimed for the baseapp
 * it goes to, atomically (session_directory.h). Two logins of one account
 * at two baseapps at once cannot both win: the loser is sent to the
 * winner, or told to retry in a moment; no entity of the account is
 * loaded where the claim did not go.
 *
 * Going elsewhere is a LoginRedirect with a one-time token (P
 * login_token:<token> holds the account, the baseapp it was made for and
 * the one that made it, for redirect_token_ms): the client connects there
 * and sends a TokenLogin, which takes the token -- good once, for that
 * account at that baseapp only, and no password travels twice. A
 * redirected login is never redirected again, so two baseapps with
 * different pictures of the loads cannot bounce a client between them.
 *
 * A draining baseapp hands its clients over the same way, once their
 * entities are written (proxy.c). This file owns the picture of the other
 * baseapps and the logins sent to each; the session directory's entries
 * are session_directory.c's. */
#include <inttypes.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "login_route.h"

#include "clock.h"
#include "id_map.h"
#include "log.h"
#include "redis_keys.h"

struct login_routes {
    login_routes_context context;
    /* The other baseapps, as the registry last listed them, and the logins
     * sent to each since. */
    registry_peer *baseapps;
    size_t baseapp_count;
    id_map assignments;
    login_route_counters counters;
};

login_routes *login_routes_create(const login_routes_context *context) {
    login_routes *routes = xcalloc(1, sizeof *routes);
    routes->context = *context;
    id_map_init(&routes->assignments);
    return routes;
}

void login_routes_free(login_routes *routes) {
    if (!routes) return;
    free(routes->baseapps);
    id_map_close(&routes->assignments);
    free(routes);
}

const login_route_counters *login_routes_figures(const login_routes *routes) { return &routes->counters; }

void login_routes_on_registry(login_routes *routes, const registry_peer *peers, size_t count) {
    free(routes->baseapps);
    routes->baseapps = NULL;
    routes->baseapp_count = 0;
    for (size_t i = 0; i < count; i++) {
        if (strcmp(peers[i].role, "baseapp") != 0 || !peers[i].client_host[0] || peers[i].client_port <= 0) continue;
        routes->baseapps = xrealloc(routes->baseapps, (routes->baseapp_count + 1) * sizeof *routes->baseapps);
        routes->baseapps[routes->baseapp_count++] = peers[i];
    }
    id_map_close(&routes->assignments);
    id_map_init(&routes->assignments);
}

/* The port a link's client reaches `peer` on: its WebSocket port for a
 * WebSocket client (0 when it has none), else its client port. */
static int login_route_port_for(const client_link *link, const registry_peer *peer) {
    return link->websocket ? peer->websocket_port : peer->client_port;
}

/* The live baseapp `process_id` when the link's client can reach it (a
 * WebSocket client needs its WebSocket port), else NULL. */
static const registry_peer *login_route_find(const login_routes *routes, const client_link *link, uint64_t process_id) {
    for (size_t i = 0; i < routes->baseapp_count; i++)
        if (routes->baseapps[i].process_id == process_id)
            return login_route_port_for(link, &routes->baseapps[i]) > 0 ? &routes->baseapps[i] : NULL;
    return NULL;
}

/* The least-loaded baseapp that is not draining, counting the logins sent
 * to each since the registry's last report (so a burst spreads); NULL when
 * that is this one (or, with `others_only`, when there is none). */
static const registry_peer *login_route_least_loaded(login_routes *routes, const client_link *link, bool others_only) {
    const registry_peer *best = NULL;
    int64_t best_load = others_only ? INT64_MAX : (int64_t)client_links_count(routes->context.links);
    for (size_t i = 0; i < routes->baseapp_count; i++) {
        const registry_peer *peer = &routes->baseapps[i];
        if (peer->draining || login_route_port_for(link, peer) <= 0) continue;
        int64_t load = peer->load + (int64_t)(uintptr_t)id_map_get(&routes->assignments, peer->process_id);
        if (load < best_load) {
            best = peer;
            best_load = load;
        }
    }
    return best;
}

bool login_route_can_hand_off(const login_routes *routes) {
    for (size_t i = 0; i < routes->baseapp_count; i++)
        if (!routes->baseapps[i].draining) return true;
    return false;
}

/* ---- the redirect ------------------------------------------------------------ */

/* Sends the client a LoginRedirect to `target` with `token` ("" answers a
 * Reconnect: the session token is the credential there). */
static void login_route_send_redirect(client_link *link, const registry_peer *target, const char *token,
                                      const char *reason) {
    Tessera__Client__LoginRedirect message = TESSERA__CLIENT__LOGIN_REDIRECT__INIT;
    message.host = (char *)target->client_host;
    message.port = (uint32_t)login_route_port_for(link, target);
    message.token = (char *)token;
    message.reason = (char *)reason;
    Tessera__Client__ServerToClient envelope = TESSERA__CLIENT__SERVER_TO_CLIENT__INIT;
    envelope.body_case = TESSERA__CLIENT__SERVER_TO_CLIENT__BODY_LOGIN_REDIRECT;
    envelope.login_redirect = &message;
    client_link_send(link, &envelope);
}

typedef struct login_route_redirect {
    login_routes *routes;
    entity_handle link_handle;
    registry_peer target;
    char token[33];
    const char *reason;
} login_route_redirect;

static void login_route_on_token_stored(redis_client *redis, redisReply *reply, void *user_data) {
    login_route_redirect *redirect = user_data;
    (void)redis;
    login_routes *routes = redirect->routes;
    client_link *link = client_links_get(routes->context.links, redirect->link_handle);
    if (!link || link->state == CLIENT_LINK_CLOSING) {
        free(redirect);
        return;
    }
    if (!reply || reply->type != REDIS_REPLY_STATUS) {
        client_link_fail(link, TESSERA__CLIENT__ERROR_CODE__ERROR_UNAVAILABLE, "the login database is unavailable");
        free(redirect);
        return;
    }
    login_route_send_redirect(link, &redirect->target, redirect->token, redirect->reason);
    routes->counters.redirects++;
    log_debug("client %s (account '%s'): redirected to baseapp %" PRIu64 " at %s:%d (%s)", channel_peer_name(link->ch),
              link->account, redirect->target.process_id, redirect->target.client_host,
              login_route_port_for(link, &redirect->target), redirect->reason);
    client_link_close_quietly(link, "redirected");
    free(redirect);
}

/* Stores a one-time token for the link's account and, once Redis has it,
 * sends the client to `target`. Returns 0, or -1 (nothing started). */
static int login_route_redirect_to(login_routes *routes, client_link *link, const registry_peer *target,
                                   const char *reason) {
    login_route_redirect *redirect = xcalloc(1, sizeof *redirect);
    redirect->routes = routes;
    redirect->link_handle = link->handle;
    redirect->target = *target;
    redirect->reason = reason;
    unsigned char bytes[16];
    randombytes_buf(bytes, sizeof bytes);
    sodium_bin2hex(redirect->token, sizeof redirect->token, bytes, sizeof bytes);
    char key[REDIS_KEY_MAX], ttl[24], value[128];
    redis_key_login_token(key, routes->context.settings->process.cluster_name, redirect->token);
    snprintf(ttl, sizeof ttl, "%lld", (long long)routes->context.settings->redirect_token_ms);
    /* Good once, for this account, at the target baseapp only. */
    snprintf(value, sizeof value, "login:%" PRIu64 ":%" PRIu64 ":%s", target->process_id,
             routes->context.self->process_id, link->account);
    const char *argv[] = {"SET", key, value, "PX", ttl};
    size_t lengths[] = {3, strlen(key), strlen(value), 2, strlen(ttl)};
    if (redis_client_command_argv(routes->context.redis, login_route_on_token_stored, redirect, 5, argv, lengths) !=
        0) {
        free(redirect);
        return -1;
    }
    uintptr_t sent = (uintptr_t)id_map_get(&routes->assignments, target->process_id);
    id_map_put(&routes->assignments, target->process_id, (void *)(sent + 1));
    /* Nothing more is read from this connection. */
    link->state = CLIENT_LINK_HANDING_OFF;
    return 0;
}

int login_route_hand_off(login_routes *routes, client_link *link, const char *reason) {
    const registry_peer *target = login_route_least_loaded(routes, link, true);
    if (!target) return -1;
    return login_route_redirect_to(routes, link, target, reason);
}

/* ---- routing a login ---------------------------------------------------------- */

/* Room for a token a lookup carries; a longer one is no token of ours. */
#define LOGIN_ROUTE_TOKEN_SIZE 72

typedef struct login_route_lookup {
    login_routes *routes;
    entity_handle link_handle;
    char token[LOGIN_ROUTE_TOKEN_SIZE]; /* a Reconnect's or TokenLogin's token (empty for other lookups) */
} login_route_lookup;

/* Asks the session directory which baseapp holds the link's account;
 * `answered` gets a login_route_lookup carrying `token` (NULL: none), and
 * frees it. Returns 0, or -1 when Redis is not connected (nothing asked). */
static int login_route_ask_session(login_routes *routes, client_link *link, const char *token,
                                   redis_reply_callback answered) {
    login_route_lookup *lookup = xcalloc(1, sizeof *lookup);
    lookup->routes = routes;
    lookup->link_handle = link->handle;
    if (token) snprintf(lookup->token, sizeof lookup->token, "%s", token);
    char key[REDIS_KEY_MAX];
    redis_key_session(key, routes->context.settings->process.cluster_name, link->account);
    if (redis_client_command(routes->context.redis, answered, lookup, "GET %s", key) != 0) {
        free(lookup);
        return -1;
    }
    return 0;
}

/* ---- the claim: one life per account ------------------------------------------- */

/* How long a login whose account another baseapp may still hold waits
 * before trying again. */
#define LOGIN_ROUTE_CLAIM_RETRY_MS 500

typedef struct login_route_claim {
    login_routes *routes;
    entity_handle link_handle;
    registry_peer target; /* the baseapp claimed for; process_id 0: this one */
} login_route_claim;

static void login_route_claim_for(login_routes *routes, client_link *link, const registry_peer *target);

static void login_route_on_claim(const session_claim_result *result, void *user_data) {
    login_route_claim *claim = user_data;
    login_routes *routes = claim->routes;
    client_link *link = client_links_get(routes->context.links, claim->link_handle);
    registry_peer target = claim->target;
    free(claim);
    if (!link || link->state != CLIENT_LINK_AUTHENTICATING) return;
    if (result->failed) {
        client_link_fail(link, TESSERA__CLIENT__ERROR_CODE__ERROR_UNAVAILABLE, "the login database is unavailable");
        return;
    }
    /* A proxy here may have appeared meanwhile (the entry names this
     * baseapp then): proxy_login_here takes it over. */
    if (proxy_find_by_account(routes->context.players, link->account) || (result->claimed && !target.process_id)) {
        link->session_claimed = result->claimed && !target.process_id;
        proxy_login_here(routes->context.players, link);
        return;
    }
    if (result->claimed) {
        if (login_route_redirect_to(routes, link, &target, "the least-loaded baseapp") != 0)
            client_link_fail(link, TESSERA__CLIENT__ERROR_CODE__ERROR_UNAVAILABLE, "the login database is unavailable");
        return;
    }
    routes->counters.session_claims_refused++;
    /* Claimed for another, refused as this one holds it: it plays here. */
    if (target.process_id && result->holder == routes->context.self->process_id) {
        login_route_claim_for(routes, link, NULL);
        return;
    }
    const registry_peer *there = login_route_find(routes, link, result->holder);
    if (there && !result->holder_restoring && !link->redirected &&
        login_route_redirect_to(routes, link, there, "the baseapp the account's entity lives on") == 0)
        return;
    client_link_fail_retry(
        link, TESSERA__CLIENT__ERROR_CODE__ERROR_UNAVAILABLE, LOGIN_ROUTE_CLAIM_RETRY_MS,
        result->holder_restoring
            ? "your account's session is being restored after its baseapp (%" PRIu64 ") failed: log in again shortly"
            : "your account is logging in at another baseapp (%" PRIu64 ") at this moment: log in again shortly",
        result->holder);
}

/* Claims the account's session for `target` (NULL: this baseapp), then
 * plays here or sends the client there: no entity of the account is loaded
 * anywhere its session entry does not name (session_directory.h). */
static void login_route_claim_for(login_routes *routes, client_link *link, const registry_peer *target) {
    if (!target && proxy_find_by_account(routes->context.players, link->account)) {
        proxy_login_here(routes->context.players, link); /* the entry names this baseapp already */
        return;
    }
    login_route_claim *claim = xcalloc(1, sizeof *claim);
    claim->routes = routes;
    claim->link_handle = link->handle;
    if (target) claim->target = *target;
    if (session_directory_claim(routes->context.sessions, link->account, SESSION_CLAIM_LOGIN,
                                target ? target->process_id : 0, link->redirected_from, login_route_on_claim,
                                claim) != 0) {
        free(claim);
        client_link_fail(link, TESSERA__CLIENT__ERROR_CODE__ERROR_UNAVAILABLE, "the login database is unavailable");
    }
}

/* Plays here, or on the least-loaded baseapp. */
static void login_route_by_load(login_routes *routes, client_link *link) {
    const registry_peer *target =
        routes->context.settings->login_redirect ? login_route_least_loaded(routes, link, false) : NULL;
    login_route_claim_for(routes, link, target);
}

static void login_route_on_session(redis_client *redis, redisReply *reply, void *user_data) {
    login_route_lookup *lookup = user_data;
    (void)redis;
    login_routes *routes = lookup->routes;
    client_link *link = client_links_get(routes->context.links, lookup->link_handle);
    free(lookup);
    if (!link || link->state != CLIENT_LINK_AUTHENTICATING) return;
    if (!reply || (reply->type != REDIS_REPLY_STRING && reply->type != REDIS_REPLY_NIL)) {
        client_link_fail(link, TESSERA__CLIENT__ERROR_CODE__ERROR_UNAVAILABLE, "the login database is unavailable");
        return;
    }
    uint64_t holder = reply->type == REDIS_REPLY_STRING ? session_directory_holder(reply->str) : 0;
    const registry_peer *there =
        holder && holder != routes->context.self->process_id ? login_route_find(routes, link, holder) : NULL;
    /* A proxy here may have appeared meanwhile; proxy_login_here sees it. */
    if (there && !proxy_find_by_account(routes->context.players, link->account) &&
        login_route_redirect_to(routes, link, there, "the baseapp the account's entity lives on") == 0)
        return;
    login_route_by_load(routes, link);
}

void login_route_on_verified(login_routes *routes, client_link *link) {
    if (link->state != CLIENT_LINK_AUTHENTICATING) return;
    routes->counters.logins++;
    /* The account's proxy is here, or the login came by a redirect: here. */
    if (proxy_find_by_account(routes->context.players, link->account) || link->redirected ||
        routes->baseapp_count == 0) {
        login_route_claim_for(routes, link, NULL);
        return;
    }
    if (login_route_ask_session(routes, link, NULL, login_route_on_session) != 0)
        client_link_fail(link, TESSERA__CLIENT__ERROR_CODE__ERROR_UNAVAILABLE, "the login database is unavailable");
}

/* ---- reconnects ------------------------------------------------------------------ */

/* How long a client whose session is being restored waits before trying
 * again: the restores of a dead baseapp's bases take about a second from
 * its death. */
#define LOGIN_ROUTE_RESTORE_RETRY_MS 500

/* Tells the client to send its Reconnect to `target` (a LoginRedirect
 * without a token: the session token is the credential there). */
static void login_route_reconnect_there(login_routes *routes, client_link *link, const registry_peer *target) {
    login_route_send_redirect(link, target, "", "the baseapp holding your session");
    routes->counters.reconnect_redirects++;
    log_debug("client %s (account '%s'): reconnect sent to baseapp %" PRIu64 " at %s:%d", channel_peer_name(link->ch),
              link->account, target->process_id, target->client_host, login_route_port_for(link, target));
    link->state = CLIENT_LINK_HANDING_OFF;
    client_link_close_quietly(link, "reconnect redirected");
}

static void login_route_on_reconnect_session(redis_client *redis, redisReply *reply, void *user_data) {
    login_route_lookup *lookup = user_data;
    (void)redis;
    login_routes *routes = lookup->routes;
    client_link *link = client_links_get(routes->context.links, lookup->link_handle);
    if (!link || link->state != CLIENT_LINK_AUTHENTICATING) {
        free(lookup);
        return;
    }
    if (!reply || (reply->type != REDIS_REPLY_STRING && reply->type != REDIS_REPLY_NIL)) {
        free(lookup);
        client_link_fail_retry(link, TESSERA__CLIENT__ERROR_CODE__ERROR_UNAVAILABLE, LOGIN_ROUTE_RESTORE_RETRY_MS,
                               "the session directory is unavailable");
        return;
    }
    uint64_t holder = reply->type == REDIS_REPLY_STRING ? session_directory_holder(reply->str) : 0;
    const registry_peer *there = holder ? login_route_find(routes, link, holder) : NULL;
    if (proxy_find_by_account(routes->context.players, link->account) || !holder ||
        holder == routes->context.self->process_id) {
        /* Here (it may have come meanwhile), or nowhere: the proxy's
         * check answers, or refuses with ERROR_SESSION_EXPIRED. */
        proxy_reconnect(routes->context.players, link, lookup->token);
    } else if (there) {
        login_route_reconnect_there(routes, link, there);
    } else {
        /* Its baseapp is not among the live ones: it died, and a backup
         * holder is bringing its bases back (or will say it has none). */
        routes->counters.reconnects_deferred++;
        client_link_fail_retry(link, TESSERA__CLIENT__ERROR_CODE__ERROR_UNAVAILABLE, LOGIN_ROUTE_RESTORE_RETRY_MS,
                               "the baseapp holding your session (%" PRIu64 ") is gone; it is being restored: "
                               "reconnect again shortly",
                               holder);
    }
    free(lookup);
}

void login_route_reconnect(login_routes *routes, client_link *link, const char *token) {
    if (proxy_find_by_account(routes->context.players, link->account) || strlen(token) >= LOGIN_ROUTE_TOKEN_SIZE) {
        proxy_reconnect(routes->context.players, link, token);
        return;
    }
    if (login_route_ask_session(routes, link, token, login_route_on_reconnect_session) != 0)
        client_link_fail_retry(link, TESSERA__CLIENT__ERROR_CODE__ERROR_UNAVAILABLE, LOGIN_ROUTE_RESTORE_RETRY_MS,
                               "the session directory is unavailable");
}

size_t login_route_other_addresses(const login_routes *routes, bool websocket, char (*out)[80], size_t max) {
    size_t count = 0;
    for (size_t i = 0; i < routes->baseapp_count && count < max; i++) {
        const registry_peer *peer = &routes->baseapps[i];
        int port = websocket ? peer->websocket_port : peer->client_port;
        if (peer->process_id == routes->context.self->process_id || peer->draining || port <= 0) continue;
        snprintf(out[count++], 80, "%s:%d", peer->client_host, port);
    }
    return count;
}

/* ---- token logins ---------------------------------------------------------------- */

/* A handover's token for a target that is not here: its baseapp died
 * after it accepted the client (the client could not reach it, and came
 * to another of the baseapps its login reply named), and the target is
 * being restored on the holder of its backup -- perhaps this one, in a
 * moment. The token is put back for what was left of its time (ttl_ms),
 * and the client told to try again shortly; once the target is restored
 * its TokenLogin at the right baseapp takes it. A target that is gone for
 * good lets the token lapse: then ERROR_SESSION_EXPIRED. */
static void login_route_keep_handover_token(login_routes *routes, client_link *link, const char *token,
                                            const char *value, long long ttl_ms, uint64_t target_id) {
    if (ttl_ms <= 0) {
        client_link_fail_quietly(link, TESSERA__CLIENT__ERROR_CODE__ERROR_SESSION_EXPIRED,
                                 "the entity you were handed to is gone: log in again",
                                 "handover of account '%s' to entity %" PRIu64 ": not here, and its token lapsed",
                                 link->account, target_id);
        return;
    }
    char key[REDIS_KEY_MAX], ttl[24];
    redis_key_login_token(key, routes->context.settings->process.cluster_name, token);
    snprintf(ttl, sizeof ttl, "%lld", ttl_ms);
    redis_client_command(routes->context.redis, NULL, NULL, "SET %s %s PX %s", key, value, ttl);
    routes->counters.handover_tokens_kept++;
    client_link_fail_retry(link, TESSERA__CLIENT__ERROR_CODE__ERROR_UNAVAILABLE, LOGIN_ROUTE_RESTORE_RETRY_MS,
                           "the entity you were handed to (%" PRIu64 ") is not on this baseapp: its baseapp may "
                           "have died and it is being restored; try again shortly",
                           target_id);
}

/* Takes a login token (good once) for account ARGV[1] at baseapp ARGV[2]:
 * its value and the milliseconds it had left, or nil. A token is
 * "login:<baseapp>:<maker>:<account>" (a redirect's, good at that baseapp
 * only) or "handover:<entity>:<maker>:<account>" (a giveClientTo's, good
 * wherever the entity is); <maker> is the baseapp that made it. A
 * handover's maker held the client, and gives the account's session up
 * by sending it (session_directory.h). One made for another account, or
 * for another baseapp, is left where it is: the answer is its value and
 * -1, and the caller refuses the login. */
static const char LOGIN_ROUTE_TAKE_TOKEN_SCRIPT[] =
    "local value = redis.call('GET', KEYS[1])\n"
    "if not value then return false end\n"
    "local tail = ':' .. ARGV[1]\n"
    "if string.sub(value, -string.len(tail)) ~= tail then return {value, -1} end\n"
    "local baseapp = string.match(value, '^login:(%d+):')\n"
    "if baseapp and baseapp ~= ARGV[2] then return {value, -1} end\n"
    "local left = redis.call('PTTL', KEYS[1])\n"
    "redis.call('DEL', KEYS[1])\n"
    "return {value, left}\n";

/* Reads "<id>:<maker>:<account>" (a token's value after its kind): the
 * account, or NULL for a value of another shape. */
static const char *login_route_parse_token(const char *text, uint64_t *id, uint64_t *maker) {
    char *end;
    *id = strtoull(text, &end, 10);
    if (*end != ':') return NULL;
    *maker = strtoull(end + 1, &end, 10);
    return *end == ':' ? end + 1 : NULL;
}

static void login_route_on_token(redis_client *redis, redisReply *reply, void *user_data) {
    login_route_lookup *lookup = user_data;
    (void)redis;
    login_routes *routes = lookup->routes;
    client_link *link = client_links_get(routes->context.links, lookup->link_handle);
    char token[sizeof lookup->token];
    memcpy(token, lookup->token, sizeof token);
    free(lookup);
    if (!link || link->state != CLIENT_LINK_AUTHENTICATING) return;
    /* {value, milliseconds it had left} or nil (LOGIN_ROUTE_TAKE_TOKEN_SCRIPT). */
    bool found = reply && reply->type == REDIS_REPLY_ARRAY && reply->elements == 2 &&
                 reply->element[0]->type == REDIS_REPLY_STRING && reply->element[1]->type == REDIS_REPLY_INTEGER;
    if (!found && (!reply || reply->type != REDIS_REPLY_NIL)) {
        client_link_fail(link, TESSERA__CLIENT__ERROR_CODE__ERROR_UNAVAILABLE, "the login database is unavailable");
        return;
    }
    const char *value = found ? reply->element[0]->str : NULL;
    long long ttl_ms = found ? reply->element[1]->integer : 0;
    /* A handover's token: "handover:<entity id>:<maker>:<account>". */
    uint64_t target_id = 0, maker = 0;
    const char *owner =
        value && strncmp(value, "handover:", 9) == 0 ? login_route_parse_token(value + 9, &target_id, &maker) : NULL;
    if (owner && strcmp(owner, link->account) == 0 && target_id) {
        if (!proxy_handover_target_here(routes->context.players, target_id)) {
            login_route_keep_handover_token(routes, link, token, value, ttl_ms, target_id);
            return;
        }
        routes->counters.token_logins++;
        link->redirected = true;
        link->redirected_from = maker;
        proxy_take_handover(routes->context.players, link, target_id);
        return;
    }
    /* A redirect's token: "login:<baseapp>:<maker>:<account>". */
    uint64_t bound = 0;
    owner = value && strncmp(value, "login:", 6) == 0 ? login_route_parse_token(value + 6, &bound, &maker) : NULL;
    bool mine = owner && strcmp(owner, link->account) == 0;
    if (!mine || bound != routes->context.self->process_id || ttl_ms < 0) {
        client_link_count_failed_token(link);
        client_link_fail_quietly(link, TESSERA__CLIENT__ERROR_CODE__ERROR_SESSION_EXPIRED,
                                 "that login token is spent or unknown: log in again",
                                 "token login for account '%s' refused: %s (baseapp %" PRIu64 ")", link->account,
                                 !value  ? "no such token (spent or expired)"
                                 : !mine ? "the token is another account's"
                                         : "the token was made for another baseapp",
                                 bound);
        return;
    }
    routes->counters.token_logins++;
    link->redirected = true;
    login_route_on_verified(routes, link);
}

void login_route_token_login(login_routes *routes, client_link *link, const char *token) {
    size_t length = strlen(token);
    if (length < 1 || length > 64) {
        client_link_fail(link, TESSERA__CLIENT__ERROR_CODE__ERROR_INVALID_ARGUMENT, "a login token is 1 to 64 bytes");
        return;
    }
    login_route_lookup *lookup = xcalloc(1, sizeof *lookup);
    lookup->routes = routes;
    lookup->link_handle = link->handle;
    snprintf(lookup->token, sizeof lookup->token, "%s", token);
    char key[REDIS_KEY_MAX];
    redis_key_login_token(key, routes->context.settings->process.cluster_name, token);
    char self[24];
    snprintf(self, sizeof self, "%" PRIu64, routes->context.self->process_id);
    if (redis_client_command(routes->context.redis, login_route_on_token, lookup, "EVAL %s 1 %s %s %s",
                             LOGIN_ROUTE_TAKE_TOKEN_SCRIPT, key, link->account, self) != 0) {
        free(lookup);
        client_link_fail(link, TESSERA__CLIENT__ERROR_CODE__ERROR_UNAVAILABLE, "the login database is unavailable");
    }
}

/* ---- declared dead: every client sent to its session's new home ------------------- */

static void login_route_on_session_home(redis_client *redis, redisReply *reply, void *user_data) {
    login_route_lookup *lookup = user_data;
    (void)redis;
    login_routes *routes = lookup->routes;
    client_link *link = client_links_get(routes->context.links, lookup->link_handle);
    free(lookup);
    if (!link || link->state == CLIENT_LINK_CLOSING || link->state == CLIENT_LINK_HANDING_OFF) return;
    uint64_t holder = reply && reply->type == REDIS_REPLY_STRING ? session_directory_holder(reply->str) : 0;
    const registry_peer *there =
        holder && holder != routes->context.self->process_id ? login_route_find(routes, link, holder) : NULL;
    if (!there) {
        /* Nowhere known: its connection ends, and the client finds its
         * session through the baseapps its login reply listed. */
        client_link_close_quietly(link, "this baseapp was declared dead; its session's new home is unknown");
        return;
    }
    login_route_send_redirect(link, there, "", "this baseapp was declared dead: your session lives there now");
    link->state = CLIENT_LINK_HANDING_OFF;
    client_link_close_quietly(link, "declared dead: sent to its session's new home");
}

size_t login_route_send_sessions_home(login_routes *routes) {
    size_t asked = 0;
    uint32_t cursor = 0;
    client_link *link;
    while ((link = client_links_next(routes->context.links, &cursor)) != NULL) {
        if (link->state != CLIENT_LINK_IN_WORLD && link->state != CLIENT_LINK_ENTERING) {
            if (link->state != CLIENT_LINK_CLOSING) client_link_close_quietly(link, "this baseapp was declared dead");
            continue;
        }
        if (login_route_ask_session(routes, link, NULL, login_route_on_session_home) != 0) {
            client_link_close_quietly(link, "this baseapp was declared dead");
            continue;
        }
        asked++;
    }
    return asked;
}
