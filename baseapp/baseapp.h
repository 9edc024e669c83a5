/* baseapp.h -- the baseapp process: its modules, and nothing else.
 *
 * A baseapp owns client connections and the base parts of entities. A
 * connection (client_link.h) walks explicit states from hello to the
 * world; once it logs in it is bound to a proxy (proxy.h), the client part
 * of the player's base (base_entity.h), which asks the least-loaded cellapp
 * for the entity's spatial part (cell_link.h), relays the client's moves and
 * calls to it and the cell's view messages back. A base lives from made to
 * freed (base_life.h) whether or not it holds a client; it writes its
 * persistent state to Redis (persistence.h) on autosave and when it goes.
 *
 * The process struct holds the modules so that main.c can build and free
 * them in order, and so that the two dispatchers can hand them what clients
 * (client_dispatch.c) and other processes (peer_dispatch.c) send. Each
 * module takes the narrow context it needs, never the process.
 */
#ifndef TESSERA_BASEAPP_H
#define TESSERA_BASEAPP_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "base_backup.h"
#include "base_call.h"
#include "base_entity.h"
#include "base_event.h"
#include "base_game.h"
#include "base_hooks.h"
#include "base_life.h"
#include "baseapp_settings.h"
#include "cell_link.h"
#include "client_link.h"
#include "entity_def.h"
#include "handover.h"
#include "id_block.h"
#include "login.h"
#include "login_route.h"
#include "login_throttle.h"
#include "mailbox.h"
#include "persistence.h"
#include "play_files.h"
#include "process_runtime.h"
#include "proxy.h"
#include "session_directory.h"
#include "tls.h"

typedef struct baseapp_admin baseapp_admin;

typedef struct baseapp {
    /* The process (main.c): loop, identity, peers, Redis, registry,
     * signals. */
    process_runtime runtime;
    baseapp_settings settings;
    entity_def_registry *definitions; /* the game's entity types */
    char *definitions_text;           /* their self-description, sent at login */
    uv_tcp_t client_listener;
    int client_port;
    tls_context *client_tls; /* client_tls_certificate_file: the client port speaks TLS 1.3 (NULL: plaintext) */
    bool client_listening;
    uv_tcp_t websocket_listener;                     /* websocket_port: browsers (client_link.h) */
    websocket_resource play_files[PLAY_FILES_COUNT]; /* what it serves them: /play, /tessera.js */
    int websocket_port;                              /* the port it listens on (0: none) */
    bool websocket_listening;
    uv_timer_t sweep_timer;      /* once a second: timeouts, graces, retries, the game's tick */
    uv_timer_t congestion_timer; /* congested clients draining; the bases' timers */
    bool timers_running;
    bool draining;       /* SIGTERM: no new logins; clients told to go; then stop */
    bool fenced;         /* acting for nobody: the lease lapsed (baseapp_fence.h) */
    uint64_t revoked_us; /* when the cluster declared it dead (monotonic; 0: never): it rejoins soon */
    uint64_t fences;     /* times it fenced itself */
    uint64_t drain_started_us;
    uint64_t cell_messages_failed; /* messages to cell parts that could not be delivered */
    /* What the modules share. */
    login_throttle throttle;
    base_hooks hooks;
    session_directory sessions;
    base_events events;
    /* The modules, from the bottom up. */
    id_block *ids;         /* entity ids */
    mailbox *mailbox;      /* the bases' streams to their cell parts */
    client_links *links;   /* client connections */
    base_entities *bases;  /* every base here */
    cell_links *cells;     /* the bases' cell parts */
    persistence *store;    /* the bases in Redis */
    base_calls *calls;     /* entity calls to bases */
    base_life *life;       /* bases from made to freed */
    proxies *players;      /* the bases' client parts */
    logins *logins;        /* passwords checked */
    login_routes *routes;  /* where an account plays */
    handovers *handovers;  /* giveClientTo across baseapps */
    base_backups *backups; /* bases backed up to other baseapps, and theirs held here */
    base_timers *timers;   /* the bases' timers (base_timer.h) */
    base_game *game;       /* the game module (never NULL once running) */
    baseapp_admin *admin;  /* the admin HTTP listener's part (NULL: admin_port -1) */
} baseapp;

/* Drain (main.c): stop taking logins, tell every client
 * ERROR_SERVER_SHUTDOWN with a retry hint (or hand it to another baseapp
 * once its entity is written), stop once they are gone or after
 * drain_timeout_ms. A second call stops at once. */
void baseapp_begin_drain(void *owner);

#endif
