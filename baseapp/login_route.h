/* login_route.h -- which baseapp an account plays on, and getting its client
 * there: here (its proxy is here, or this is the least-loaded baseapp), or
 * another baseapp with a one-time token (LoginRedirect, then TokenLogin).
 * The rules are at the top of login_route.c. A draining baseapp hands its
 * clients over the same way.
 */
#ifndef TESSERA_LOGIN_ROUTE_H
#define TESSERA_LOGIN_ROUTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "baseapp_settings.h"
#include "client_link.h"
#include "process_self.h"
#include "proxy.h"
#include "redis_client.h"
#include "registry.h"
#include "session_directory.h"

typedef struct login_routes login_routes;

typedef struct login_routes_context {
    const baseapp_settings *settings;
    redis_client *redis;
    client_links *links;
    proxies *players;
    const process_self *self;
    const session_directory *sessions;
} login_routes_context;

typedef struct login_route_counters {
    uint64_t logins;                 /* logins whose credentials checked out */
    uint64_t redirects;              /* clients sent to another baseapp */
    uint64_t token_logins;           /* clients that came with a redirect's token */
    uint64_t reconnect_redirects;    /* Reconnects sent to the baseapp holding their session */
    uint64_t reconnects_deferred;    /* Reconnects told to retry: their session's baseapp died, restores under way */
    uint64_t handover_tokens_kept;   /* handover TokenLogins told to retry: their target is not here (yet) */
    uint64_t session_claims_refused; /* logins that found their account's session held elsewhere at the claim */
} login_route_counters;

login_routes *login_routes_create(const login_routes_context *context);
void login_routes_free(login_routes *routes);
const login_route_counters *login_routes_figures(const login_routes *routes);

/* The credentials checked out (login.c): the account plays here (its proxy
 * is made or taken over), or the client is redirected, with a one-time
 * token, to the baseapp its entity lives on or to the least-loaded one. */
void login_route_on_verified(login_routes *routes, client_link *link);
/* A Reconnect with session token `token`: taken by the account's proxy
 * here; else, by the session directory, sent to the baseapp that holds the
 * session (a LoginRedirect without a token: the client reconnects there),
 * or, while that baseapp is dead and its sessions are being restored,
 * told to try again shortly (ERROR_UNAVAILABLE with retry_after_ms). */
void login_route_reconnect(login_routes *routes, client_link *link, const char *token);
/* The cluster declared this baseapp dead (it was stopped or cut off, and
 * its bases were restored elsewhere): each client in the world is told
 * where its session lives now -- the session directory names the baseapp
 * that restored it -- with a LoginRedirect without a token (it sends its
 * Reconnect there), and its connection closes once that is written; a
 * client whose session's home is unknown, or that is not in the world,
 * is disconnected. Returns the directory lookups asked (their answers
 * come later). */
size_t login_route_send_sessions_home(login_routes *routes);
/* The other baseapps' client addresses ("host:port"), at most `max`, into
 * `out`; returns how many. */
size_t login_route_other_addresses(const login_routes *routes, bool websocket, char (*out)[80], size_t max);
/* A TokenLogin: the token a redirect gave stands for the password. */
void login_route_token_login(login_routes *routes, client_link *link, const char *token);
/* Sends the link to another baseapp (the least-loaded one that is not
 * draining) with a one-time token, and closes it. Returns 0, or -1 when no
 * other baseapp can take it (the link is left as it was). */
int login_route_hand_off(login_routes *routes, client_link *link, const char *reason);
/* Whether another baseapp, not draining, could take clients. */
bool login_route_can_hand_off(const login_routes *routes);
/* A registry report: the baseapps and their loads. */
void login_routes_on_registry(login_routes *routes, const registry_peer *peers, size_t count);

#endif
