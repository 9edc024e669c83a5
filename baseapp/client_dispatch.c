/* client_dispatch.c -- a client link's messages routed to the modules that
 * own them (client_dispatch.h): credentials to login.c, then login_route.c;
 * session tokens to proxy.c; redirect tokens to login_route.c; moves and
 * calls to the proxy bound to the link; and a link that let go of its
 * proxy to that proxy. It owns nothing. */
#include "client_dispatch.h"

static void client_dispatch_login(void *owner, client_link *link, const char *password) {
    baseapp *app = owner;
    login_start(app->logins, link, password);
}

static void client_dispatch_reconnect(void *owner, client_link *link, const char *token) {
    baseapp *app = owner;
    login_route_reconnect(app->routes, link, token);
}

static void client_dispatch_token_login(void *owner, client_link *link, const char *token) {
    baseapp *app = owner;
    login_route_token_login(app->routes, link, token);
}

static void client_dispatch_move(void *owner, client_link *link, const Tessera__Client__Move *move) {
    baseapp *app = owner;
    proxy_on_client_move(app->players, link, move);
}

static void client_dispatch_call(void *owner, client_link *link, const Tessera__Client__EntityCall *call) {
    baseapp *app = owner;
    proxy_on_client_call(app->players, link, call);
}

static void client_dispatch_unbound(void *owner, const client_link *link, proxy *was) {
    baseapp *app = owner;
    if (was->link == link) proxy_on_link_lost(app->players, was);
}

client_link_handlers client_dispatch_handlers(baseapp *app) {
    return (client_link_handlers){
        .owner = app,
        .login = client_dispatch_login,
        .reconnect = client_dispatch_reconnect,
        .token_login = client_dispatch_token_login,
        .move = client_dispatch_move,
        .call = client_dispatch_call,
        .unbound = client_dispatch_unbound,
    };
}

void client_dispatch_verified(void *owner, client_link *link) {
    baseapp *app = owner;
    login_route_on_verified(app->routes, link);
}

int client_dispatch_hand_off(void *owner, client_link *link, const char *reason) {
    baseapp *app = owner;
    return login_route_hand_off(app->routes, link, reason);
}
