/* proxy.h -- proxies: bases that may hold a client link.
 *
 * A proxy is the part of a base that deals with a client (DESIGN.md,
 * "Clients and proxies"): the account the client logged in as, the link
 * while one is connected, the session token a dropped client reconnects
 * with, the binding number that keeps a cell's stream from reaching the
 * wrong connection, and giveClientTo. It hangs off its base
 * (base_entity.proxy) and is made the first time the base gets a client (a
 * login, a giveClientTo, a handover from another baseapp); a base that
 * never holds a client has none.
 *
 * A proxy keeps the player's entity whether or not a client is connected:
 *
 *   - a link that drops detaches; the proxy waits client_detached_grace_ms
 *     for a Reconnect with its session token, then its base goes (saved);
 *   - a second login of the account takes the proxy over: the old link is
 *     told ERROR_REPLACED, the new one gets the same entity;
 *   - every change of client is a new binding (ClientBinding): the cell
 *     drops its witness when the client goes and builds a fresh one when a
 *     client comes, and the client's messages of any other binding are
 *     dropped here.
 */
#ifndef TESSERA_PROXY_H
#define TESSERA_PROXY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base_entity.h"
#include "base_hooks.h"
#include "base_life.h"
#include "baseapp_settings.h"
#include "cell_link.h"
#include "client_link.h"
#include "cluster.pb-c.h"
#include "entity_def.h"
#include "latency_histogram.h"
#include "persistence.h"
#include "process_self.h"
#include "session_directory.h"

struct proxy {
    base_entity *base;       /* the base it is the client part of */
    client_link *link;       /* NULL: detached (the client is gone) */
    char account[72];        /* the account whose client it holds */
    uint64_t detached_us;    /* monotonic, when the link went (0 while attached or never detached) */
    uint32_t client_binding; /* every change of client is a new one */
    uint32_t cell_binding;   /* the binding the cell part was last told */
    bool cell_attached;      /* ... and whether it was an attach */
    /* giveClientTo: its client waits for an EnteredSpace (the cell part
     * rebinding the client), since when. */
    bool space_pending;
    uint64_t handover_started_us;
    entity_handle handoff_link;          /* draining: the link sent to another baseapp once this base is written */
    bool handover_pending;               /* its client is offered to an entity on another baseapp (handover.c) */
    uint64_t handover_reserved_until_us; /* a client from another baseapp is on its way to it */
    char session_token[33];              /* hex; a Reconnect must show it */
};

typedef struct proxies proxies;

typedef struct proxy_counters {
    uint64_t reconnects, reconnects_refused, logins_replaced;
    uint64_t restores_superseded;       /* restored sessions dropped: their account plays elsewhere by now */
    uint64_t handovers;                 /* giveClientTo done */
    uint64_t client_messages_held;      /* client messages held across a handoff */
    uint64_t client_messages_stale;     /* ... dropped as from an ended incarnation */
    uint64_t client_messages_unbound;   /* ... dropped as for a client that has gone (another binding) */
    latency_histogram handover_latency; /* giveClientTo, from the call to the client hearing its new space (us) */
} proxy_counters;

typedef struct proxies_context {
    const baseapp_settings *settings;
    const entity_def_registry *definitions;
    const char *definitions_text; /* the definitions' self-description, sent at login */
    base_entities *bases;
    base_life *life;
    cell_links *cells;
    client_links *links;
    persistence *store;
    const session_directory *sessions;
    const base_hooks *hooks;
    const process_self *self;
    const bool *draining;
    /* Draining: sends a link whose base is written to another baseapp.
     * Returns 0, or -1 when none can take it. */
    int (*hand_off)(void *owner, client_link *link, const char *reason);
    /* The other baseapps' client addresses for the login reply (at most
     * `max` into `out`; returns how many): their WebSocket ports for a
     * WebSocket client. May be NULL. */
    size_t (*other_baseapps)(void *owner, bool websocket, char (*out)[80], size_t max);
    void *owner;
} proxies_context;

/* The most other baseapps a login reply names. */
#define PROXY_MAX_OTHER_BASEAPPS 16

proxies *proxies_create(const proxies_context *context);
void proxies_free(proxies *set);
const proxy_counters *proxies_figures(const proxies *set);
/* The accounts with a proxy here (detached ones included). */
size_t proxies_account_count(const proxies *set);

/* The base holding `account`'s client, or NULL. */
base_entity *proxy_find_by_account(const proxies *set, const char *account);

/* ---- the base's side (base_life.h's and cell_link.h's callbacks) -------- */

/* The base is going: its client, if any, is told `message`. */
void proxy_client_gone(proxies *set, base_entity *base, const char *message);
/* The base is freed: its proxy part goes (its link let go, its account
 * forgotten, a draining link sent on). */
void proxy_part_free(proxies *set, base_entity *base);
/* Its cell part answered: a link waiting to enter the world enters it, a
 * client given to it hears its new space. */
void proxy_on_cell_ready(proxies *set, base_entity *base, const Tessera__Cluster__CellEntityCreated *reply,
                         bool created);
/* Hands the client what the base's address lets through now (dropped
 * while no client is in the world through it). */
void proxy_release(proxies *set, base_entity *base);
/* A batch of client messages from a cell (ToClientBatch). */
void proxy_on_client_messages(proxies *set, uint64_t cellapp_id, const Tessera__Cluster__ToClientBatch *batch);
/* A cell asks to drop its entity's client (DropClient). */
void proxy_on_drop_client(proxies *set, uint64_t cellapp_id, const Tessera__Cluster__DropClient *drop);
/* The congestion check for every congested client (a timer). */
void proxies_check_congestion(proxies *set);

/* A base restored from a dead baseapp's backup (base_backup.h) held a
 * client: its proxy part comes back detached, with the account, session
 * token and binding of the backup, so that the client's Reconnect finds
 * it here within client_detached_grace_ms; the account's session names
 * this baseapp now. */
void proxy_restore(proxies *set, base_entity *base, const char *account, const char *session_token,
                   uint32_t client_binding);

/* ---- the client's side ------------------------------------------------- */

/* The link (bound to `player`) let go of it: the proxy keeps the entity for
 * client_detached_grace_ms (none while draining). */
void proxy_on_link_lost(proxies *set, proxy *player);
/* The account plays here (login_route.c decided): its proxy is taken over,
 * or its stored player entity loaded and a proxy made. */
void proxy_login_here(proxies *set, client_link *link);
/* A Reconnect with `token` for the link's account. */
void proxy_reconnect(proxies *set, client_link *link, const char *token);
/* A TokenLogin of a handover: the link becomes target_id's client. */
void proxy_take_handover(proxies *set, client_link *link, uint64_t target_id);
/* Whether base `target_id` is here, live or still having its cell part
 * made (a restored one), to take a handover's client. */
bool proxy_handover_target_here(const proxies *set, uint64_t target_id);
/* A client's move, relayed to its cell. */
void proxy_on_client_move(proxies *set, client_link *link, const Tessera__Client__Move *move);
/* A client's EntityCall: base methods are checked and run here, cell
 * methods relayed to the cell, which checks what only it can. A call the
 * client may not make drops it. */
void proxy_on_client_call(proxies *set, client_link *link, const Tessera__Client__EntityCall *call);
/* Sends the base's own client its BASE_AND_CLIENT properties: all of them
 * or the changed ones. Nothing while no client is in the world through it
 * (its login reply sends them all). */
void proxy_send_properties(proxies *set, base_entity *base, bool all);

/* ---- giveClientTo ---------------------------------------------------------- */

/* The rule a giveClientTo from `from` to `to` breaks, or NULL: the source
 * destroyed or without a client (or one still entering), the target
 * missing (NULL), the source itself, destroyed, or holding a client. */
const char *proxy_give_client_refusal(const base_entity *from, const base_entity *to);
/* Whether the base's client (if any) came over WebSocket. */
bool proxy_client_is_websocket(const base_entity *base);

/* The rules about the source alone (a target elsewhere is checked there). */
const char *proxy_give_client_source_refusal(const base_entity *from);
/* giveClientTo (seed 004's seven steps): moves `from`'s client to `to`.
 * Returns 0, or -1 with `why` naming the rule that refuses it. */
int proxy_give_client_to(proxies *set, base_entity *from, base_entity *to, char *why, size_t why_size);
/* giveClientTo's steps 1 to 4 towards an entity on another baseapp, which
 * accepted: the client goes to host:port with `token`. */
void proxy_send_client_away(proxies *set, base_entity *from, uint64_t target_id, const char *host, int port,
                            const char *token);
/* A client from another baseapp is on its way to `base` (a handover this
 * baseapp accepted): no other may take it until `until_us`. */
void proxy_reserve(base_entity *base, uint64_t until_us);
/* Draining: the base's client goes to another baseapp once the base is
 * written (it is destroyed with a save now). */
void proxy_hand_off(proxies *set, base_entity *base);
/* Detached proxies past their grace have their bases destroyed, and
 * handover reservations lapse. */
void proxies_sweep(proxies *set);

#endif
