/* client_link.h -- client connections: each one's wire state from hello to
 * the world, and the set of them a baseapp holds.
 *
 * A connection walks the explicit states below. Until it is bound to a
 * proxy (proxy.h) it is only a connection; bound, it carries that proxy's
 * client traffic. The link checks every client message against the state it
 * may arrive in and against the client's limits (frame time, moves and
 * calls a second, failed logins), and hands what passes to the layer above
 * through client_link_handlers: it owns no entity and checks no password.
 * Every way out (an error sent, a quiet close, the peer gone) goes through
 * one path that tells the layer above, once, that a bound link let go of
 * its proxy.
 */
#ifndef TESSERA_CLIENT_LINK_H
#define TESSERA_CLIENT_LINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "baseapp_settings.h"
#include "channel.h"
#include "client.pb-c.h"
#include "entity_list.h"
#include "login_throttle.h"
#include "process_self.h"
#include "tls.h"
#include "websocket.h"

typedef struct client_links client_links;
typedef struct proxy proxy;

/* A connection walks these states. */
typedef enum client_link_state {
    CLIENT_LINK_AWAITING_HELLO, /* connected; the first frame must be hello */
    CLIENT_LINK_AWAITING_LOGIN, /* versions agreed; waiting for credentials or a session token */
    CLIENT_LINK_AUTHENTICATING, /* checking the account (Redis, then the thread pool), then loading it */
    CLIENT_LINK_ENTERING,       /* bound to a proxy; waiting for its cell to say where the player is */
    CLIENT_LINK_IN_WORLD,       /* bound; moves and calls flow both ways */
    CLIENT_LINK_HANDING_OFF,    /* going to another baseapp (LoginRedirect soon); nothing more is read */
    CLIENT_LINK_CLOSING,        /* dropped; the channel is closing and nothing more is read */
} client_link_state;

/* Hello.client_name's documented limit. */
#define CLIENT_LINK_NAME_MAX 64

/* One client connection's wire state: the channel, where the conversation
 * is, and the limits on what the client sends. */
typedef struct client_link {
    client_links *set;
    entity_handle handle; /* this link in its set; stale once freed */
    client_link_state state;
    channel *ch;
    proxy *proxy;             /* bound to (ENTERING, IN_WORLD), else NULL; set by proxy.c */
    uint64_t entity_id;       /* its proxy's entity while bound, for log lines */
    uint64_t connected_us;    /* monotonic, for the login timeout */
    char account[72];         /* as the client gave it (login or reconnect) */
    bool has_definitions;     /* the client's cached definitions match ours */
    bool reconnecting;        /* it came with a session token, not a password */
    bool redirected;          /* it came with a redirect's token: it plays here, wherever the loads are */
    uint64_t redirected_from; /* ... made by this baseapp, which gives the account's session up (0: none) */
    bool session_claimed;     /* login_route claimed the account's session for this baseapp already */
    double move_tokens;       /* moves the client may still send now (token bucket) */
    uint64_t move_tokens_us;  /* monotonic time of the last refill */
    double call_tokens;       /* method calls likewise */
    uint64_t call_tokens_us;
    double call_strikes; /* calls dropped lately (decays); too many and the client goes */
    bool congested;      /* its cell was told it does not read (proxy.c) */
    bool websocket;      /* it came to the WebSocket port: redirects name WebSocket addresses */
} client_link;

/* What the layer above does with what a link says. Each runs with the
 * link in the state named; the link may be failed inside it. */
typedef struct client_link_handlers {
    void *owner;
    /* A login (now AUTHENTICATING; link->account set): check `password`. */
    void (*login)(void *owner, client_link *link, const char *password);
    /* A Reconnect (AUTHENTICATING) with its session token. */
    void (*reconnect)(void *owner, client_link *link, const char *token);
    /* A TokenLogin (AUTHENTICATING) with the token a redirect gave. */
    void (*token_login)(void *owner, client_link *link, const char *token);
    /* A move (IN_WORLD, finite, within the client's rate). */
    void (*move)(void *owner, client_link *link, const Tessera__Client__Move *move);
    /* A method call (IN_WORLD, within the client's rate). */
    void (*call)(void *owner, client_link *link, const Tessera__Client__EntityCall *call);
    /* The link, bound to `was`, let go of it (it failed or closed): once. */
    void (*unbound)(void *owner, const client_link *link, proxy *was);
} client_link_handlers;

/* What the links have done, for the figures. */
typedef struct client_link_counters {
    uint64_t errors_sent[32]; /* by ErrorCode (larger codes in the last) */
    uint64_t login_failures;  /* ERROR_BAD_CREDENTIALS sent */
    uint64_t moves_dropped;   /* moves over a client's rate, not relayed */
    uint64_t calls_dropped;   /* method calls over a client's rate, not run */
    uint64_t logins_throttled;
    uint64_t congested;         /* links whose cells hold their updates now */
    uint64_t congestion_events; /* times a link became congested */
    channel_stats totals;       /* every client channel's traffic */
} client_link_counters;

typedef struct client_links_context {
    const baseapp_settings *settings;
    const char *definitions_digest; /* a client that knows these needs no definitions */
    login_throttle *throttle;
    const bool *draining; /* no logins while it is set */
    const process_self *self;
    client_link_handlers handlers;
    /* Asked before each client frame is acted on: false holds every
     * frame of that connection until client_links_release (a fenced
     * baseapp acts for nobody). NULL: always. */
    bool (*may_dispatch)(void *gate_data);
    void *gate_data;
    tls_context *tls; /* clients speak TLS 1.3 (NULL: plaintext) */
    /* What the WebSocket port serves to a plain GET (play_files.h). */
    const websocket_resource *websocket_files;
    size_t websocket_file_count;
} client_links_context;

/* At most `max_links` connections (beyond max_clients, new ones are told
 * the server is full). */
client_links *client_links_create(const client_links_context *context, uint32_t max_links);
/* Frees the set; every link must be closed and freed (the loop drained). */
void client_links_free(client_links *set);

/* Accepts a client connection from the listener: the client port's, or
 * (websocket) the WebSocket port's (channel.h, websocket.h). */
void client_links_accept(client_links *set, uv_stream_t *listener, bool websocket);
/* NULL for a stale handle. */
client_link *client_links_get(const client_links *set, entity_handle handle);
client_link *client_links_next(const client_links *set, uint32_t *cursor);
size_t client_links_count(const client_links *set);
const client_link_counters *client_links_counters(const client_links *set);
/* Lets every held connection go on: what each sent meanwhile is acted on
 * now, in order. */
void client_links_release(client_links *set);
/* Drops connections that have not reached the world within the login
 * timeout, or hold a frame begun too long ago. */
void client_links_sweep(client_links *set);
/* Tells every connection to go (shutdown, drain). */
void client_links_close_all(client_links *set, Tessera__Client__ErrorCode code, const char *reason);

void client_link_send(client_link *link, const Tessera__Client__ServerToClient *message);
/* Sends an Error to the client and drops it once the error is flushed. A
 * bound link lets go of its proxy (the unbound handler). */
void client_link_fail(client_link *link, Tessera__Client__ErrorCode code, const char *format, ...)
    __attribute__((format(printf, 3, 4)));
/* The same with a hint of when to try again (Error.retry_after_ms). */
void client_link_fail_retry(client_link *link, Tessera__Client__ErrorCode code, uint32_t retry_after_ms,
                            const char *format, ...) __attribute__((format(printf, 4, 5)));
/* The same, but the client is told only `public_text`; the log has the
 * detail (an unknown account and a wrong password look alike to a client). */
void client_link_fail_quietly(client_link *link, Tessera__Client__ErrorCode code, const char *public_text,
                              const char *format, ...) __attribute__((format(printf, 4, 5)));
/* Closes the link once what was sent is flushed, with no Error: a
 * LoginRedirect said where to go. A bound link lets go of its proxy. */
void client_link_close_quietly(client_link *link, const char *reason);
/* Binds the link to `player` (entity `entity_id`): it is ENTERING. */
void client_link_bind(client_link *link, proxy *player, uint64_t entity_id);
/* Unbinds it without telling anyone (the proxy let go of it). */
void client_link_release(client_link *link);
/* Its cell holds its updates (congested) or sends them again. */
void client_link_set_congested(client_link *link, bool congested);
/* The link's rate limits start afresh (it has just entered the world). */
void client_link_start_limits(client_link *link);
/* A password login of link->account starts: its attempt is taken from
 * the account's and the address's buckets now (login_throttle.h). Returns
 * true, or false when they had none left (the link was failed with
 * ERROR_RATE_LIMITED and when to retry). */
bool client_link_charge_login(client_link *link);
/* The link's login succeeded, or was never checked: the attempt its
 * start took comes back. */
void client_link_refund_login(client_link *link);
/* The count of a refused token (a Reconnect's session token, a
 * TokenLogin's one-time token), against the address only: anyone can
 * send one in an account's name, and it must not lock the owner's
 * password out. */
void client_link_count_failed_token(client_link *link);
const char *client_link_state_name(client_link_state state);

#endif
