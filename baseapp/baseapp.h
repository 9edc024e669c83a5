/* baseapp.h -- the baseapp program's private header: the process context,
 * the proxy, and under one banner per file what each module offers.
 *
 * A baseapp owns client connections. Each connection gets a proxy, which
 * walks the explicit states below; once logged in the proxy owns the
 * player's entity id and asks the least-loaded cellapp to create the
 * entity's spatial part. From then on it relays the client's movement to
 * that cell and the cell's view messages back to the client.
 */
#ifndef TESSERA_BASEAPP_H
#define TESSERA_BASEAPP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "bit_stream.h"
#include "cell_address.h"
#include "channel.h"
#include "client.pb-c.h"
#include "cluster.pb-c.h"
#include "entity_def.h"
#include "entity_state.h"
#include "entity_list.h"
#include "id_block.h"
#include "id_map.h"
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
    int64_t client_congestion_bytes;
    int64_t client_send_buffer_bytes;
    int64_t cell_lost_grace_ms;
    int64_t drain_timeout_ms;
    int64_t shutdown_retry_ms;
    double client_calls_per_second;
    int64_t client_frame_timeout_ms;
    double login_failures_per_account;   /* a minute */
    double login_failures_per_address;   /* a minute */
} baseapp_settings;

/* ---- proxies (proxy.c) -------------------------------------------------- */

typedef struct baseapp baseapp;

typedef enum proxy_state {
    PROXY_AWAITING_HELLO,   /* connected; the first frame must be hello */
    PROXY_AWAITING_LOGIN,   /* versions agreed; waiting for credentials */
    PROXY_AUTHENTICATING,   /* checking the account (Redis, then the thread pool) */
    PROXY_CREATING_CELL,    /* logged in; a cellapp is creating the player's cell entity */
    PROXY_IN_WORLD,         /* moving and watching: messages flow both ways */
    PROXY_CLOSING,          /* dropped; the channel is closing and nothing more is read */
} proxy_state;

typedef struct proxy {
    baseapp *app;
    entity_handle handle;      /* this proxy in app->proxies; stale once freed */
    proxy_state state;
    channel *ch;
    uint64_t entity_id;        /* 0 until logged in */
    /* Where its cell part is (cellapp and incarnation), and the order its
     * client hears from it in (cell_address.h). cell.cellapp_id is the
     * cellapp asked to create it while CREATING_CELL, 0 if none. */
    cell_address cell;
    uint64_t connected_us;     /* monotonic, for the login timeout */
    char account[72];
    bool has_definitions;      /* the client's cached definitions match ours */
    double move_tokens;        /* moves the client may still send now (token bucket) */
    uint64_t move_tokens_us;   /* monotonic time of the last refill */
    double call_tokens;        /* method calls likewise */
    uint64_t call_tokens_us;
    double call_strikes;       /* calls dropped lately (decays); too many and the client goes */
    bool congested;            /* its cell was told it does not read (cell_link.c) */
    /* The base part of the player's entity (base_entity.c), from login on. */
    const entity_def_class *cls;
    entity_state *properties;
} proxy;

/* Accepts a client connection from the listener. */
void proxy_accept(baseapp *app, uv_stream_t *listener);
/* The digest the client said it has cached, kept until the login reply. */
void proxy_set_known_digest(proxy *client, const char *digest);

/* Sends an Error to the client and drops it once the error is flushed. */
void proxy_fail(proxy *client, Tessera__Client__ErrorCode code, const char *format, ...)
    __attribute__((format(printf, 3, 4)));
/* The same, but the client is told only `public_text`; the log has the
 * detail (an unknown account and a wrong password look alike to a client). */
void proxy_fail_quietly(proxy *client, Tessera__Client__ErrorCode code, const char *public_text, const char *format,
                        ...) __attribute__((format(printf, 4, 5)));
/* Hello.client_name's documented limit. */
#define PROXY_CLIENT_NAME_MAX 64
/* The password checked out: take an entity id and ask a cellapp for the
 * cell entity. Called by login.c. */
void proxy_login_succeeded(proxy *client);
/* Drops clients that have not reached the world within the login timeout. */
void proxy_sweep(baseapp *app);
proxy *proxy_find_by_entity(const baseapp *app, uint64_t entity_id);
/* Closes every client (shutdown). */
void proxy_close_all(baseapp *app, const char *reason);

/* ---- the base part of entities (base_entity.c) -------------------------- */

/* Gives a logged-in proxy its base properties (the player's class, its name
 * set from the account). */
void base_entity_create(proxy *client);
void base_entity_free(proxy *client);
/* Appends the cell properties the base sets (CreateCellEntity's
 * cell_properties), byte-aligned. */
void base_entity_cell_properties(const proxy *client, bit_writer *w);
/* Sends the own client its BASE_AND_CLIENT properties: all of them, or the
 * changed ones; clears the base's dirty set. */
void base_entity_send_properties(proxy *client, bool all);
/* A client's EntityCall, IN_WORLD: base methods are checked and run here,
 * cell methods relayed to the cell. A call the client may not make drops
 * it. */
void base_entity_on_call(proxy *client, const Tessera__Client__EntityCall *call);
/* Writes every base's properties to settings.state_dump_path as JSON.
 * Returns 0 or -1 (logged). */
int base_entity_dump(const baseapp *app);

/* ---- login (login.c) ---------------------------------------------------- */

/* Checks `account`/`password` against Redis (creating the account when the
 * settings allow it); hashing runs on libuv's thread pool. Ends in
 * proxy_login_succeeded or proxy_fail, unless the client left meanwhile. */
void login_start(proxy *client, const char *account, const char *password);
/* Returns NULL when the account name is acceptable, or why it is not. */
const char *login_check_account_name(const char *account);

/* ---- cellapps (cell_link.c) --------------------------------------------- */

/* Sends the proxy's cell part a message (body set by the caller) through
 * the mailbox, to where its real is as last told. Returns 0, or -1 when it
 * has no cell part. */
int cell_link_send(proxy *client, Tessera__Cluster__CellMessage *message);
/* Drops clients whose cell part was lost with its cellapp and was not taken
 * back within cell_lost_grace_ms. */
void cell_link_sweep(baseapp *app);

/* Tells a client's cell whether the client keeps up: congested above
 * client_congestion_bytes queued, drained below half of it. Called after
 * sending to it and from a timer while any client is congested. */
void cell_link_check_congestion(proxy *client);
/* The congestion check for every congested client (the timer). */
void cell_link_check_all_congestion(baseapp *app);

/* The least-loaded cellapp that is up, or 0 if none. */
uint64_t cell_link_choose(baseapp *app);
/* Registry report: refreshes the loads the choice is made from. */
void cell_link_on_registry(baseapp *app);
void cell_link_on_peer_up(peer_set *set, uint64_t process_id, peer_role role, void *user_data);
void cell_link_on_peer_down(peer_set *set, uint64_t process_id, peer_role role, const char *reason,
                            void *user_data);
void cell_link_on_message(peer_set *set, uint64_t process_id, peer_role role,
                          const Tessera__Cluster__PeerMessage *message, void *user_data);

/* ---- the process (main.c) ----------------------------------------------- */

struct baseapp {
    uv_loop_t *loop;
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
    int argc;                        /* main's, for SIGHUP's reload */
    char **argv;
    uint64_t process_id;
    entity_list *proxies;         /* every proxy, by handle */
    id_map proxies_by_entity;     /* entity id -> proxy, logged-in proxies */
    id_map proxies_by_account;    /* account name hash -> proxy */
    id_map cellapp_assignments;   /* cellapp id -> entities sent since the last registry report */
    mailbox *mailbox;                  /* the bases' streams to their cell parts */
    uint64_t cell_messages_failed;     /* messages to cell parts that could not be delivered */
    uint64_t client_messages_held;     /* client messages held across a handoff */
    uint64_t client_messages_stale;    /* ... dropped as from an ended incarnation */
    entity_def_registry *definitions;  /* the game's entity types */
    char *definitions_text;            /* their self-description, sent at login */
    uint64_t moves_dropped;            /* moves over a client's rate, not relayed */
    uint64_t calls_dropped;            /* method calls over a client's rate, not run */
    login_throttle throttle;           /* failed logins per account and address */
    uint64_t logins_throttled;         /* attempts refused by it */
    uint64_t congested_clients;        /* clients whose cells hold their updates now */
    uint64_t congestion_events;        /* times a client became congested */
    uv_timer_t congestion_timer;
    channel_stats client_totals;
    channel_stats peer_totals;
    /* For /metrics (baseapp_admin.c). */
    uint64_t logins, login_failures;
    uint64_t errors_sent[32];          /* client errors sent, by ErrorCode (larger codes in the last) */
    bool draining;                     /* SIGTERM: no new logins; clients told to go; then stop */
    uint64_t drain_started_us;
    struct baseapp_admin *admin;       /* NULL with admin_port -1 */
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
