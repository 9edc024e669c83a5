/* cellapp.h -- the cellapp process: its modules, and nothing else.
 *
 * A cellapp holds cells of spaces (spaces.h): the reals whose position lies
 * in its regions and ghosts of the reals of neighbouring cells, in one
 * coordinate system per cell (cell.h). Its modules each own their state and
 * borrow what they need from the ones below them; the process struct holds
 * them so that main.c can build and free them in order, the tick (tick.c)
 * can run their phases, and peer dispatch (peer_dispatch.c) can hand them
 * what other processes send. Nothing else takes the whole process.
 */
#ifndef TESSERA_CELLAPP_H
#define TESSERA_CELLAPP_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "balancer.h"
#include "base_route.h"
#include "cell.h"
#include "cell_entity_codec.h"
#include "cell_load.h"
#include "cell_message.h"
#include "cell_snapshot.h"
#include "cellapp_counters.h"
#include "cellapp_settings.h"
#include "channel.h"
#include "death_watch.h"
#include "entity_io.h"
#include "entity_timer.h"
#include "event_route.h"
#include "game_hooks.h"
#include "game_host.h"
#include "ghost_inbox.h"
#include "ghost_order.h"
#include "ghost_route.h"
#include "haunt.h"
#include "id_block.h"
#include "io_route.h"
#include "mailbox.h"
#include "map_entities.h"
#include "offload.h"
#include "outbox.h"
#include "peer_set.h"
#include "process_runtime.h"
#include "reals.h"
#include "restore.h"
#include "redis_client.h"
#include "registry.h"
#include "space_maps.h"
#include "spaces.h"

typedef struct cellapp cellapp;
typedef struct cellapp_admin cellapp_admin;

/* The clock that drives the tick (tick.c). */
typedef struct tick_clock {
    uv_timer_t timer;
    uint64_t last_us;          /* monotonic time the accumulator last advanced */
    uint64_t accumulator_us;   /* time owed to the simulation */
    uint64_t last_duration_us; /* the last tick's */
    /* Runs after each wake-up that ran a tick (the drain check). */
    void (*after_ticks)(cellapp *app);
} tick_clock;

struct cellapp {
    /* The process (main.c): loop, identity, peers, Redis, registry,
     * signals (common/process_runtime.h). */
    process_runtime runtime;
    cellapp_settings settings;
    bool draining; /* SIGTERM: the cells go elsewhere, then the process stops */
    uint64_t drain_started_us;
    bool ticking; /* the tick is started */
    bool fenced;  /* the last tick found this cellapp fenced (tick.c) */
    tick_clock clock;
    uint64_t random_state;      /* spawn points (random_unit.h) */
    entity_timer_ids timer_ids; /* every cell's timers take their ids here */
    cellapp_counters counters;
    /* What every cell shares, and how the modules reach the game. */
    cell_shared shared;
    game_hooks hooks;
    cell_entity_codec codec;
    /* The modules, from the bottom up. */
    ghost_order *ghost_order;  /* the incarnation books */
    ghost_route *route;        /* where departed reals went */
    mailbox *mailbox;          /* this cellapp's streams to other entities' cell parts */
    outbox *outbox;            /* what the tick sends, per peer */
    spaces *spaces;            /* the spaces known, each with its cell here, if any */
    cell_load *load;           /* how busy the loop is */
    haunts *haunts;            /* where each real's ghosts live */
    cell_snapshots *snapshots; /* every real's backup */
    reals *reals;              /* creating and destroying reals */
    offloads *offloads;        /* reals moving between cellapps */
    ghost_inbox *ghost_inbox;  /* ghosts and offloads in incarnation order */
    restores *restores;        /* a dead cellapp's reals brought back */
    event_route *events;       /* game events' paths */
    io_route *io_route;        /* entity I/O between cellapps */
    cell_messages *messages;   /* messages to cell parts */
    base_route *bases;         /* calls to entities' bases */
    entity_io *io;             /* the queue of entity I/O events */
    id_block *ids;             /* entity ids for what the game spawns */
    space_maps *maps;          /* the spaces' navigation meshes */
    game_host *game;           /* the game module (never NULL once running) */
    map_entities *map_spawner; /* the maps' entities */
    balancer *balancer;        /* the lease, and the balancing when it is on */
    death_watch *deaths;       /* death decisions, while this cellapp holds the lease */
    cellapp_admin *admin;      /* the admin HTTP listener's part (NULL: admin_port -1) */
};

#endif
