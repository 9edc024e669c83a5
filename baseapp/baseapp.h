/* baseapp.h -- the baseapp program's private header: the process context,
 * the proxy, and under one banner per file what each module offers.
 *
 * A baseapp owns client connections and the base parts of entities. A
 * connection (client_link) walks the explicit states below; once it logs
 * in it is bound to a proxy, the player's base, which owns the player's
 * entity id, asks the least-loaded cellapp to create the entity's spatial
 * part, and relays the client's movement to that cell and the cell's view
 * messages back to the client. A proxy outlives its connection for a grace
 * period, so a dropped client reconnects to it; it writes its persistent
 * state to Redis (persistence.c) on autosave and when it goes.
 */
#ifndef TESSERA_BASEAPP_H
#define TESSERA_BASEAPP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include <cJSON.h>

#include "bit_stream.h"
#include "cell_address.h"
#include "arena.h"
#include "channel.h"
#include "client.pb-c.h"
#include "cluster.pb-c.h"
#include "entity_def.h"
#include "entity_state.h"
#include "entity_list.h"
#include "id_block.h"
#include "id_map.h"
#include "latency_histogram.h"
#include "base_mailbox.h"
#include "base_game.h"
#include "config.h"
#include "login_throttle.h"
#include "mailbox.h"
#include "peer_set.h"
#include "process.h"
#include "redis_client.h"
#include "registry.h"

/* ---- settings (main.c) -------------------------------------------------- */

typedef struct baseapp_settings {
    process_settings process;
    char client_host[64];
    char client_public_host[64];
    bool login_redirect;
    int64_t redirect_token_ms;
    int64_t client_port;
    int64_t client_max_frame_bytes;
    int64_t client_write_high_water_bytes;
    int64_t client_write_limit_bytes;
    int64_t max_clients;
    int64_t login_timeout_ms;
    bool auto_create_accounts;
    int64_t password_ops_limit;
    int64_t password_mem_limit_kib;
    int64_t entity_id_block;
    char player_entity_type[32];
    char entity_definitions[256];
    double client_moves_per_second;
    char state_dump_path[256];
    char game_module[256]; /* the game module (base_game.c); empty: none */
    config_group game;     /* its own settings */
    int64_t client_congestion_bytes;
    int64_t client_send_buffer_bytes;
    int64_t cell_lost_grace_ms;
    int64_t drain_timeout_ms;
    int64_t shutdown_retry_ms;
    double client_calls_per_second;
    int64_t client_frame_timeout_ms;
    double login_failures_per_account; /* a minute */
    double login_failures_per_address; /* a minute */
    int64_t client_detached_grace_ms;
    int64_t autosave_interval_ms;
    int64_t backup_timeout_ms;
    int64_t write_retry_ms;
} baseapp_settings;

/* ---- client connections (client_link.c) -------------------------------- */

typedef struct baseapp baseapp;
typedef struct proxy proxy;

/* A connection walks these states. Until it is bound to a proxy it is only
 * a connection; bound, it carries that proxy's client traffic. */
typedef enum client_link_state {
    CLIENT_LINK_AWAITING_HELLO, /* connected; the first frame must be hello */
    CLIENT_LINK_AWAITING_LOGIN, /* versions agreed; waiting for credentials or a session token */
    CLIENT_LINK_AUTHENTICATING, /* checking the account (Redis, then the thread pool), then loading it */
    CLIENT_LINK_ENTERING,       /* bound to a proxy; waiting for its cell to say where the player is */
    CLIENT_LINK_IN_WORLD,       /* bound; moves and calls flow both ways */
    CLIENT_LINK_HANDING_OFF,    /* going to another baseapp (LoginRedirect soon); nothing more is read */
    CLIENT_LINK_CLOSING,        /* dropped; the channel is closing and nothing more is read */
} client_link_state;

/* One client connection's wire state: the channel, where the conversation
 * is, and the limits on what the client sends. It owns no entity. */
typedef struct client_link {
    baseapp *app;
    entity_handle handle; /* this link in app->links; stale once freed */
    client_link_state state;
    channel *ch;
    proxy *proxy;            /* bound to (ENTERING, IN_WORLD), else NULL */
    uint64_t connected_us;   /* monotonic, for the login timeout */
    char account[72];        /* as the client gave it (login or reconnect) */
    bool has_definitions;    /* the client's cached definitions match ours */
    bool reconnecting;       /* it came with a session token, not a password */
    bool redirected;         /* it came with a redirect's token: it plays here, wherever the loads are */
    double move_tokens;      /* moves the client may still send now (token bucket) */
    uint64_t move_tokens_us; /* monotonic time of the last refill */
    double call_tokens;      /* method calls likewise */
    uint64_t call_tokens_us;
    double call_strikes; /* calls dropped lately (decays); too many and the client goes */
    bool congested;      /* its cell was told it does not read (cell_link.c) */
} client_link;

/* Accepts a client connection from the listener. */
void client_link_accept(baseapp *app, uv_stream_t *listener);
void client_link_send(client_link *link, const Tessera__Client__ServerToClient *message);
/* Sends an Error to the client and drops it once the error is flushed. Its
 * proxy, if any, is detached (proxy_on_link_lost). */
void client_link_fail(client_link *link, Tessera__Client__ErrorCode code, const char *format, ...)
    __attribute__((format(printf, 3, 4)));
/* The same, but the client is told only `public_text`; the log has the
 * detail (an unknown account and a wrong password look alike to a client). */
void client_link_fail_quietly(client_link *link, Tessera__Client__ErrorCode code, const char *public_text,
                              const char *format, ...) __attribute__((format(printf, 4, 5)));
/* The link leaves its proxy's cell: it no longer counts as congested
 * (a new cell part hears afresh whether it reads). */
void client_link_forget_congestion(client_link *link);
/* Closes the link once what was sent is flushed, with no Error: a
 * LoginRedirect said where to go. Its proxy, if any, is detached. */
void client_link_close_quietly(client_link *link, const char *reason);
/* Hello.client_name's documented limit. */
#define CLIENT_LINK_NAME_MAX 64
/* Drops connections that have not reached the world within the login
 * timeout, or hold a frame begun too long ago. */
void client_link_sweep(baseapp *app);
/* Tells every connection to go (shutdown, drain). */
void client_link_close_all(baseapp *app, Tessera__Client__ErrorCode code, const char *reason);
/* The link's rate limits start afresh (it has just entered the world). */
void client_link_start_limits(client_link *link);
const char *client_link_state_name(client_link_state state);

/* ---- proxies: bases that may hold a client (proxy.c) ---------------------- */

typedef enum proxy_state {
    PROXY_CREATING_CELL, /* a cellapp is creating its cell part */
    PROXY_LIVE,          /* its cell part exists (cell holds the address) */
    PROXY_DESTROYING,    /* going: its last cell backup, then its last write, then freed */
} proxy_state;

/* A player's base: the base part of its entity, with a client link while
 * the client is connected. It outlives its connection for
 * client_detached_grace_ms, so a dropped client can come back to it
 * (Reconnect) without losing anything. */
struct proxy {
    baseapp *app;
    entity_handle handle; /* this proxy in app->proxies */
    proxy_state state;
    uint64_t entity_id;
    char account[72];
    client_link *link;    /* NULL: detached (the client is gone) */
    uint64_t detached_us; /* monotonic, when the link went (0 while attached) */
    /* Every change of client gets a new binding number; the cell stamps its
     * client messages with the binding it was told (ClientBinding), and only
     * those of the current one reach the link. */
    uint32_t client_binding;
    uint32_t cell_binding; /* the binding the cell part was last told */
    bool cell_attached;    /* ... and whether it was an attach */
    /* giveClientTo: its client waits for an EnteredSpace (the cell part
     * rebinding the client), since when. */
    bool space_pending;
    uint64_t handover_started_us;
    bool entering;                       /* game code is loading a base for it (load_base): one at a time */
    entity_handle handoff_link;          /* draining: the link sent to another baseapp once this entity is written */
    bool handover_pending;               /* its client is offered to an entity on another baseapp (handover.c) */
    uint64_t handover_reserved_until_us; /* a client from another baseapp is on its way to it */
    char session_token[33];              /* hex; a Reconnect must show it */
    /* Where its cell part is (cellapp and incarnation), and the order its
     * client hears from it in (cell_address.h). cell.cellapp_id is the
     * cellapp asked to create it while CREATING_CELL. */
    cell_address cell;
    /* The base part (base_entity.c): the class and the properties it holds;
     * the persistent cell properties are the last backup's copy. */
    const entity_def_class *cls;
    entity_state *properties;
    /* Persistence (persistence.c). */
    struct proxy_persistence {
        bool loaded;         /* it was stored before (a restored entity) */
        char space_name[64]; /* where the last backup had the cell part */
        double position[3];
        float yaw;
        bool has_position;
        uint64_t backup_request; /* the BackupRequest waited for (0: none) */
        uint64_t backup_deadline_us;
        bool write_in_flight;
        bool write_again;        /* asked to write while a write was in flight */
        uint32_t write_failures; /* in a row */
        uint64_t retry_at_us;    /* after a failure: when to write again */
        uint64_t next_autosave_us;
        uint64_t writes; /* acknowledged */
    } persistence;
};

/* A new proxy of class `cls` for `account`, from what was stored (NULL:
 * nothing), without a client. An entity whose class has a cell part is
 * CREATING_CELL until proxy_create_cell's answer; one without is LIVE.
 * NULL with `why` when none can be made. */
proxy *proxy_make(baseapp *app, const entity_def_class *cls, const char *account, const cJSON *stored, char *why,
                  size_t why_size);
/* Asks the least-loaded cellapp for the proxy's cell part, with a witness
 * when `with_client`. Returns 0, or -1 when no cellapp is up. */
int proxy_create_cell(proxy *player, bool with_client);
/* giveClientTo (seed 004's seven steps): moves `from`'s client to `to`.
 * Returns 0, or -1 with `why` naming the rule that refuses it
 * (proxy_give_client_refusal). */
int proxy_give_client_to(proxy *from, proxy *to, char *why, size_t why_size);
/* giveClientTo by id: a target here is given the client at once; one on
 * another baseapp is offered it first (handover.c), and the client goes
 * there once it accepts. Returns 0 (done, or offered: `why` says which),
 * or -1 with `why` naming the rule that refuses it. */
int proxy_give_client_to_entity(proxy *from, uint64_t target_id, char *why, size_t why_size);
/* giveClientTo's steps 1 to 4 towards an entity on another baseapp, which
 * accepted: the client goes to host:port with `token`. */
void proxy_send_client_away(proxy *from, uint64_t target_id, const char *host, int port, const char *token);
/* A TokenLogin of a handover: the link becomes target_id's client. */
void proxy_take_handover(client_link *link, uint64_t target_id);
/* The rule a giveClientTo from `from` to `to` breaks, or NULL: the source
 * destroyed or without a client (or one still entering), the target
 * missing (NULL), the source itself, destroyed, or holding a client. */
const char *proxy_give_client_refusal(const proxy *from, const proxy *to);
/* The rules about the source alone (a target elsewhere is checked there). */
const char *proxy_give_client_source_refusal(const proxy *from);
/* The password checked out (login.c): the account's existing proxy takes
 * the link, its old link is told ERROR_REPLACED; or the stored entity is
 * loaded and a new proxy made. */
void proxy_login_succeeded(client_link *link);
/* The account plays here (login_route.c decided): its proxy is taken over
 * or made from what is stored. */
void proxy_login_here(client_link *link);
/* Draining: the proxy's client goes to another baseapp once the proxy is
 * written (it is destroyed with a save now). */
void proxy_hand_off(proxy *player);
/* A Reconnect with `token` for the link's account. */
void proxy_reconnect(client_link *link, const char *token);
/* The link closed or failed: the proxy keeps the player's entity for
 * client_detached_grace_ms (none while draining). */
void proxy_on_link_lost(proxy *player);
/* Starts the end of a proxy: its cell part goes (with a last backup when
 * `save`), its state is written, then it is freed. */
void proxy_destroy(proxy *player, bool save, const char *reason);
/* Its cell part said where the player is (CellEntityCreated): its client
 * link, if it waits, enters the world. */
void proxy_on_cell_ready(proxy *player, uint64_t cellapp_id, const Tessera__Cluster__CellEntityCreated *reply);
/* Detached proxies past their grace are destroyed, backups past their
 * deadline written, failed writes retried, autosaves started. */
void proxy_sweep(baseapp *app);
proxy *proxy_find_by_entity(const baseapp *app, uint64_t entity_id);
proxy *proxy_find_by_account(const baseapp *app, const char *account);
/* Frees a proxy whose part everywhere is over. */
void proxy_free(proxy *player);
/* At shutdown: frees every proxy, reporting those whose state is unwritten. */
void proxy_free_all(baseapp *app);
/* The base's client-facing knobs, as ClientBinding and the login reply
 * carry them. */
void proxy_sync_cell_binding(proxy *player);

/* ---- the base part of entities (base_entity.c) -------------------------- */

/* Gives a new proxy its base properties (of class `cls`; its name, if it
 * has one, set from the account). */
void base_entity_create(proxy *player, const entity_def_class *cls);
/* Whether entities of `cls` have a cell part (a cell property or method). */
bool base_entity_has_cell(const entity_def_class *cls);
void base_entity_free(proxy *player);
/* Appends the cell properties the base sets (CreateCellEntity's
 * cell_properties), byte-aligned. */
void base_entity_cell_properties(const proxy *player, bit_writer *w);
/* Sends the own client its BASE_AND_CLIENT properties: all of them, or the
 * changed ones; clears the base's dirty set. Nothing while the client is
 * not in the world (its login reply sends them all). */
void base_entity_send_properties(proxy *player, bool all);
/* A client's EntityCall, IN_WORLD: base methods are checked and run here,
 * cell methods relayed to the cell. A call the client may not make drops
 * it. */
void base_entity_on_call(proxy *player, const Tessera__Client__EntityCall *call);
/* Writes every base's properties to settings.state_dump_path as JSON.
 * Returns 0 or -1 (logged). */
int base_entity_dump(const baseapp *app);

/* ---- giveClientTo across baseapps (handover.c) -------------------------------- */

void handover_on_offer(baseapp *app, uint64_t sender, const Tessera__Cluster__HandoverOffer *offer);
void handover_on_answer(baseapp *app, const Tessera__Cluster__HandoverAnswer *answer);

/* ---- entity calls to bases (base_call.c) ------------------------------------- */

/* Calls method `method_name` of class `class_name` (part BASE or CLIENT) of
 * entity `target_id`, wherever its base is, for `caller_id` (0: the
 * server), with `args` (a state of the method's args_class; NULL: none).
 * Returns 0 (a failure comes back as base_entity_on_call_failed), or -1
 * when the class has no such method (nothing sent). */
int base_call(baseapp *app, uint64_t caller_id, uint64_t target_id, const char *class_name, entity_def_part part,
              const char *method_name, const entity_state *args);
/* A BaseCall for a base here (from a peer, or from this baseapp itself). */
void base_call_on_call(baseapp *app, const Tessera__Cluster__BaseCall *call);
base_mailbox *base_call_mailbox_create(baseapp *app);

/* ---- which baseapp an account plays on (login_route.c) --------------------- */

/* After the credentials: the account plays here (its proxy is made or
 * taken over), or the client is redirected, with a one-time token, to the
 * baseapp its entity lives on or to the least-loaded one. */
void login_route(client_link *link);
/* A TokenLogin: the token a redirect gave stands for the password. */
void login_route_token_login(client_link *link, const char *token);
/* Sends the link to another baseapp (the least-loaded one that is not
 * draining) with a one-time token, and closes it. Returns 0, or -1 when no
 * other baseapp can take it (the link is left as it was). */
int login_route_hand_off(client_link *link, const char *reason);
/* Whether another baseapp, not draining, could take clients. */
bool login_route_can_hand_off(const baseapp *app);
/* The session directory: which baseapp holds the account's client now. */
void login_route_claim(proxy *player);
void login_route_release(proxy *player);
void login_route_on_registry(baseapp *app, const registry_peer *peers, size_t count);

/* ---- persistence (persistence.c) ------------------------------------------ */

typedef enum persistence_outcome {
    PERSISTENCE_FOUND,       /* `stored` is the stored form */
    PERSISTENCE_NONE,        /* nothing stored: a new entity */
    PERSISTENCE_DAMAGED,     /* a record that does not read (logged; left as it is, never overwritten) */
    PERSISTENCE_UNAVAILABLE, /* Redis did not answer */
} persistence_outcome;
/* `stored` is valid during the call only. `context` is the caller's: it
 * must still find what it loads for (by handle), which may have gone. */
typedef void (*persistence_loaded)(baseapp *app, persistence_outcome outcome, const cJSON *stored, void *context);
/* Reads the stored `class_name` named `name` (a player's: its account).
 * Returns 0 (the callback follows, exactly once), or -1 when Redis is not
 * connected (no callback). */
int persistence_load(baseapp *app, const char *class_name, const char *name, persistence_loaded callback,
                     void *context);
/* A new proxy takes what was stored (NULL: nothing): its persistent base
 * and cell properties (a property the definitions no longer have is
 * dropped with a log line, a new one keeps its default) and where its cell
 * part was. */
void persistence_restore(proxy *player, const cJSON *stored);
/* writeToDB: the proxy's persistent state goes to Redis, after a fresh
 * backup of its cell part when it has one. */
void persistence_save(proxy *player);
/* A CellBackup from the proxy's cell part. */
void persistence_on_backup(proxy *player, const Tessera__Cluster__CellBackup *backup);
/* Writes the proxy's state as it is now (one write in flight per proxy;
 * a failed write is retried). */
void persistence_write(proxy *player);
/* The proxy's sweep duties: a backup past its deadline is written without
 * it, a failed write retried when its time comes, an autosave started. */
void persistence_sweep(proxy *player, uint64_t now_us);

/* ---- login (login.c) ---------------------------------------------------- */

/* Checks `account`/`password` against Redis (creating the account when the
 * settings allow it); hashing runs on libuv's thread pool. Ends in
 * proxy_login_succeeded or client_link_fail, unless the client left
 * meanwhile. */
void login_start(client_link *link, const char *account, const char *password);
/* Returns NULL when the account name is acceptable, or why it is not. */
const char *login_check_account_name(const char *account);

/* ---- cellapps (cell_link.c) --------------------------------------------- */

/* Sends the proxy's cell part a message (body set by the caller) through
 * the mailbox, to where its real is as last told. Returns 0, or -1 when it
 * has no cell part. */
int cell_link_send(proxy *player, Tessera__Cluster__CellMessage *message);
/* Drops clients whose cell part was lost with its cellapp and was not taken
 * back within cell_lost_grace_ms. */
void cell_link_sweep(baseapp *app);

/* Tells a client's cell whether the client keeps up: congested above
 * client_congestion_bytes queued, drained below half of it. Called after
 * sending to it and from a timer while any client is congested. */
void cell_link_check_congestion(proxy *player);
/* The congestion check for every congested client (the timer). */
void cell_link_check_all_congestion(baseapp *app);

/* The least-loaded cellapp that is up, or 0 if none. */
uint64_t cell_link_choose(baseapp *app);
/* Registry report: refreshes the loads the choice is made from. */
void cell_link_on_registry(baseapp *app);
void cell_link_on_peer_up(peer_set *set, uint64_t process_id, peer_role role, void *user_data);
void cell_link_on_peer_down(peer_set *set, uint64_t process_id, peer_role role, const char *reason, void *user_data);
void cell_link_on_message(peer_set *set, uint64_t process_id, peer_role role,
                          const Tessera__Cluster__PeerMessage *message, void *user_data);

/* ---- the process (main.c) ----------------------------------------------- */

struct baseapp {
    uv_loop_t *loop;
    /* Client messages are decoded here and released after their handler:
     * no allocation per move. */
    arena client_arena;
    baseapp_settings settings;
    redis_client *redis;
    registry *registry;
    peer_set *peers;
    id_block *entity_ids;
    uv_tcp_t client_listener;
    uv_tcp_t peer_listener;
    int client_port, peer_port;
    uv_timer_t sweep_timer;
    uv_timer_t stats_timer;
    uv_signal_t sigint, sigterm, sigusr1, sighup;
    int argc; /* main's, for SIGHUP's reload */
    char **argv;
    uint64_t process_id;
    entity_list *links;        /* every client connection, by handle */
    entity_list *proxies;      /* every proxy, by handle */
    id_map proxies_by_entity;  /* entity id -> proxy */
    id_map proxies_by_account; /* account name hash -> proxy */
    uint64_t next_backup_request;
    uint64_t reconnects, reconnects_refused, logins_replaced;
    uint64_t writes, write_failures;
    uint64_t handovers; /* giveClientTo done */
    uint64_t handovers_refused;
    id_map handovers_pending; /* request -> handover offered to another baseapp (handover.c) */
    uint64_t next_handover_request;
    latency_histogram handover_latency; /* ... from the call to the client hearing its new space (microseconds) */
    latency_histogram write_latency;    /* writeToDB round trips (microseconds) */
    id_map cellapp_assignments;         /* cellapp id -> entities sent since the last registry report */
    mailbox *mailbox;                   /* the bases' streams to their cell parts */
    uint64_t cell_messages_failed;      /* messages to cell parts that could not be delivered */
    uint64_t client_messages_held;      /* client messages held across a handoff */
    uint64_t client_messages_stale;     /* ... dropped as from an ended incarnation */
    uint64_t client_messages_unbound;   /* ... dropped as for a client that has gone (another binding) */
    entity_def_registry *definitions;   /* the game's entity types */
    char *definitions_text;             /* their self-description, sent at login */
    uint64_t moves_dropped;             /* moves over a client's rate, not relayed */
    uint64_t calls_dropped;             /* method calls over a client's rate, not run */
    login_throttle throttle;            /* failed logins per account and address */
    uint64_t logins_throttled;          /* attempts refused by it */
    uint64_t congested_clients;         /* clients whose cells hold their updates now */
    uint64_t congestion_events;         /* times a client became congested */
    uv_timer_t congestion_timer;
    channel_stats client_totals;
    channel_stats peer_totals;
    /* For /metrics (baseapp_admin.c). */
    uint64_t logins, login_failures;
    /* The other baseapps, as the registry last listed them (login_route.c),
     * and the logins sent to each since. */
    registry_peer *baseapps;
    size_t baseapp_count;
    id_map baseapp_assignments;
    uint64_t redirects, token_logins;
    base_mailbox *bases; /* entity calls to bases, by id (base_call.c) */
    uint64_t entity_calls, entity_calls_received, entity_calls_failed;
    base_game *game;          /* the game module's base rules (never NULL once running) */
    base_game *game_loading;  /* while its base_init runs */
    uint64_t errors_sent[32]; /* client errors sent, by ErrorCode (larger codes in the last) */
    bool draining;            /* SIGTERM: no new logins; clients told to go; then stop */
    uint64_t drain_started_us;
    struct baseapp_admin *admin; /* NULL with admin_port -1 */
    int shutting_down;
    int exit_code;
};

/* ---- the admin listener (baseapp_admin.c) ----------------------------------------- */
struct baseapp_admin *baseapp_admin_start(baseapp *app, char *err, size_t errlen);
void baseapp_admin_publish(struct baseapp_admin *admin, registry *reg);
void baseapp_admin_stop(struct baseapp_admin *admin);
/* Drain (main.c): stop taking logins, tell every client ERROR_SERVER_SHUTDOWN
 * with a retry hint, stop once they are gone or after drain_timeout_ms. */
void baseapp_begin_drain(baseapp *app);

/* 64-bit FNV-1a of an account name, the key of proxies_by_account. */
uint64_t baseapp_account_key(const char *account);
/* The id_map key of any text (FNV-1a, never 0); baseapp_account_key is it
 * over an account name. */
uint64_t baseapp_text_key(const char *text, size_t length);

#endif
