/* cellapp.h -- the cellapp program's private header: the settings, the cell
 * and its entities, and under one banner per file what each cellapp module
 * offers the others.
 *
 * A cellapp holds cells of spaces. A space is split into cells by its
 * layout (common/space_layout.h, kept in Redis); this cellapp owns at most
 * one cell of each space, and its `cell` object for a space holds the REAL
 * entities whose position lies in its region and GHOSTS of the reals of
 * neighbouring cells that come within ghost distance of it, all in one
 * coordinate system, so a witness sees across the line as if there were
 * none. Reals that walk out of the region move to the cell they walked
 * into (offload.c); the cellapps that hold a real's ghosts are its haunts
 * (haunt.c).
 */
#ifndef TESSERA_CELLAPP_H
#define TESSERA_CELLAPP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "bit_stream.h"
#include "channel.h"
#include "clock.h"
#include "client.pb-c.h"
#include "cluster.pb-c.h"
#include "controller.h"
#include "entity_io.h"
#include "entity_timer.h"
#include "coord.h"
#include "entity_def.h"
#include "entity_state.h"
#include "game_host.h"
#include "ghost_order.h"
#include "id_block.h"
#include "balance.h"
#include "id_map.h"
#include "latency_histogram.h"
#include "base_mailbox.h"
#include "mailbox.h"
#include "navmesh.h"
#include "peer_set.h"
#include "process.h"
#include "redis_client.h"
#include "registry.h"
#include "replication.h"
#include "space_layout.h"
#include "volatile_codec.h"

/* ---- settings (main.c) -------------------------------------------------- */

/* What a witness needs (witness.c). */
typedef struct witness_config {
    int64_t tick_hz; /* the cellapp's, copied in */
    double view_radius, view_hysteresis;
    int64_t client_bytes_per_second;
    int64_t max_aliases;
    int64_t alias_cooldown_ms;
    double detail_near_distance, detail_medium_distance, detail_hysteresis;
    double update_near_distance, update_far_distance;
} witness_config;

/* What the speed check needs (movement.c). */
typedef struct movement_config {
    double max_speed;
    double burst_seconds;
} movement_config;

/* Where ghosts live and when reals move (haunt.c, offload.c). */
typedef struct haunt_config {
    double ghost_distance;         /* a real has a ghost in every cell this close */
    double ghost_fudge;            /* ... kept until it is this much farther */
    int64_t ghost_min_lifespan_ms; /* ... and at least this long */
    double offload_margin;         /* a real moves only this far past its cell's edge */
} haunt_config;

/* The balancer (balancer.c) and the load it acts on (cell_load.c). */
typedef struct balancer_settings {
    bool enabled;              /* stand for the lease; move lines, add and retire cells */
    int64_t period_ms;         /* reports, lease renewal, one pass */
    int64_t lease_ms;          /* the lease's time to live */
    int64_t report_timeout_ms; /* a report this old counts as its cellapp's silence */
    int64_t cell_change_ms;    /* at least this long between adding or retiring cells */
    int64_t drain_timeout_ms;  /* SIGTERM: give up waiting for the cells to go after this */
    double load_smoothing;     /* weight of each tick's sample in the smoothed load */
    balance_config algorithm;
} balancer_settings;

typedef struct cellapp_settings {
    process_settings process;
    int64_t tick_hz;
    char default_space[SPACE_LAYOUT_NAME_MAX];
    movement_config movement;
    witness_config witness;
    haunt_config haunt;
    double position_precision;
    int64_t yaw_steps;
    int64_t max_entities;
    char entity_definitions[256];
    int64_t ghost_route_ms;
    int64_t cell_stream_gap_ms;
    balancer_settings balance;
    /* The game module (game_host.c) and its own settings. */
    char game_module[256];
    config_group game;
    /* Map files by space name (space_map.h): their navigation meshes. */
    config_group maps;
    double navmesh_cell_size;
    char state_dump_path[256];
} cellapp_settings;

/* ---- cells and their entities (cell.c) ---------------------------------- */

typedef struct witness witness;
typedef struct cell cell;
typedef struct cellapp cellapp;

typedef enum cell_entity_kind {
    CELL_ENTITY_REAL,  /* the authoritative copy: this cellapp runs it */
    CELL_ENTITY_GHOST, /* a read-only copy of a real in another cell */
} cell_entity_kind;

/* A cellapp holding a ghost of a real, since when. */
typedef struct cell_haunt {
    uint64_t cellapp_id;
    uint64_t since_us; /* monotonic */
} cell_haunt;

/* A trap (proximity watcher) of a real: its coord watcher, and what it
 * means to the game. */
typedef struct cell_trap {
    uint32_t watcher;
    uint32_t controller_id; /* its id among the entity's controllers (controller.h) */
    uint32_t tag;
    float radius;
    struct cell_trap_binding *binding; /* the watcher's user data */
} cell_trap;

/* The change counters run modulo 2^14 (two varint bytes on the wire); a
 * copy is never thousands of ticks behind another. */
#define CELL_CHANGE_COUNT_MASK 0x3FFFu
static inline uint32_t cell_change_count_next(uint32_t count) { return (count + 1) & CELL_CHANGE_COUNT_MASK; }
/* Whether counter `now` is ahead of `then`. */
static inline bool cell_change_count_ahead(uint32_t then, uint32_t now) {
    uint32_t ahead = (now - then) & CELL_CHANGE_COUNT_MASK;
    return ahead != 0 && ahead <= CELL_CHANGE_COUNT_MASK / 2;
}

/* One witness that has an entity in view: the entity's side of the pair,
 * so that a change reaches exactly the clients that see it (witness.c). */
typedef struct cell_observer {
    witness *view;
    uint32_t alias; /* the entity's alias in that witness */
    /* That client is owed a MOVE of it already: a further move changes
     * nothing there until the MOVE goes (then the witness clears this). */
    bool move_owed;
} cell_observer;

/* What only a real has: the parts of an entity this cellapp runs. A ghost
 * has none of it (cell_entity.real is NULL); making a ghost frees it
 * (cell_make_ghost) and promoting a ghost attaches a fresh one
 * (cell_make_real). BigWorld keeps the same split (RealEntity). */
typedef struct cell_real {
    uint64_t baseapp_id;           /* where the base and client live (0: none) */
    uint32_t client_binding;       /* its client's binding, stamped on client messages */
    void *game_data;               /* the game's per-entity data (game_host.c), NULL until asked */
    char name[ENTITY_IO_NAME_MAX]; /* its name for entity I/O and look-ups ("": none) */
    bool doomed;                   /* game code destroyed it: it goes at the end of this tick (cell_doom) */
    uint32_t offloads;             /* times it moved between cellapps */
    /* Movement checking (reals with a client, movement.c). */
    double move_allowance; /* metres the entity may still move now */
    uint64_t allowance_us; /* monotonic time of the last allowance update */
    uint32_t last_sequence;
    witness *witness; /* NULL when nobody watches through this entity */
    /* Client calls to every client that sees this real, made this tick:
     * sent to its haunts with its next ghost update. */
    Tessera__Client__ClientCall *broadcast_calls;
    size_t broadcast_count, broadcast_capacity;
    /* Game events to the viewers of this real, fired this tick: they go
     * to its haunts the same way (game_event.c). */
    Tessera__Client__GameEvent *broadcast_events;
    size_t broadcast_event_count, broadcast_event_capacity;
    /* Where its ghosts are (haunt.c). */
    cell_haunt *haunts;
    uint32_t haunt_count, haunt_capacity;
    bool haunts_stale; /* moved, or the layout changed: recheck */
    /* Traps, controllers, entity I/O, and the order of messages to it. */
    cell_trap *traps;
    uint32_t trap_count, trap_capacity;
    controller_chain controllers; /* its movement chain and controller ids (controller.c) */
    entity_io_outputs outputs;    /* its outputs' connections (entity_io.h) */
    mailbox_inbox *inbox;         /* NULL until the first message */
    bool teleported;              /* game code moved it this tick */
    bool space_changed;           /* ... and it came from another space */
    /* A teleport into another space, done by offload_tick after this
     * tick's client messages have gone. */
    bool teleport_pending;
    char teleport_space[SPACE_LAYOUT_NAME_MAX];
    float teleport_x, teleport_y, teleport_z, teleport_yaw;
} cell_real;

/* An entity in a cell: what a real and its ghosts share (position, class,
 * properties, change counters, who sees it), and the real part on a real. */
typedef struct cell_entity {
    /* The packer's record (replication.h): first, so that its encodings
     * start on the allocation's alignment. */
    replication_entity replication;
    uint64_t id;
    cell_entity_kind kind;
    cell_real *real;             /* exactly when kind is CELL_ENTITY_REAL; NULL on a ghost */
    cell *home;                  /* the cell it is in */
    const entity_def_class *cls; /* its class in the definitions */
    entity_state *state;         /* its properties: all on a real, the ghosts' ones kept on a ghost */
    bool packed;                 /* replication_pack ran for it this tick */
    float x, y, z, yaw;
    uint64_t move_stamp_us; /* wall clock when the real applied its last move */
    bool moved;             /* position changed since the last tick */
    bool is_new;            /* created here since the last tick */
    bool destroyed;         /* deferred deletion: reaped at the end of the tick */
    uint32_t incarnation;   /* of the real (ghosts: of the real they copy) */
    /* The real's change counters (cell_change_count_ahead): ticks in which
     * it moved, and in which a ghost property changed; ghosts copy them. */
    uint32_t move_count, property_count;
    uint64_t owner_cellapp; /* ghosts: the cellapp that holds the real */
    /* The witnesses that have it in view (their own entity included). */
    cell_observer *observers;
    uint32_t observer_count, observer_capacity;
    uint32_t coord_id; /* this entity in the cell's coordinate system */
    size_t index;      /* position in cell.by_index */
} cell_entity;

/* The entity's name for entity I/O and look-ups ("": none; a ghost has
 * none). */
static inline const char *cell_entity_name(const cell_entity *entity) { return entity->real ? entity->real->name : ""; }

/* The witness that sees through `entity`, NULL for a ghost or a real
 * nobody watches through. */
static inline witness *cell_entity_witness(const cell_entity *entity) {
    return entity->real ? entity->real->witness : NULL;
}

/* What the cells of one cellapp share: settings, definitions, the packer,
 * one writer every witness's stream is built in, in turn, and counters. */
typedef struct cell_shared {
    const cellapp_settings *settings;
    entity_def_registry *definitions;
    replication_schema *schema;
    replication *replication;
    uint64_t replication_tick;
    bit_writer stream;
    struct witness_totals {
        uint64_t stream_bytes;      /* entity stream bytes sent to clients */
        uint64_t records_held;      /* records a budget held back to a later tick */
        uint64_t aliases_exhausted; /* entities not sent because an alias table was full */
        uint64_t arrivals_awaited;  /* restored views' entities whose copy was not here yet */
        uint64_t arrivals_missed;   /* ... that never came, and left */
        uint64_t near_leaves;       /* LEAVEs of entities still inside the view radius (a bug) */
    } witness_totals;
    uint64_t self_id;                   /* this cellapp's process id */
    struct entity_timer_ids *timer_ids; /* the process's timer ids, for every cell */
    /* What a cell tells its cellapp: a trap of `owner` saw `visitor` step
     * in or out. */
    void (*on_trap)(void *host, cell_entity *owner, uint32_t tag, cell_entity *visitor, bool entered);
    /* The game listens to views entering and leaving (cell_note_view). */
    bool report_views;
    void *host;
} cell_shared;

/* This cellapp's part of one space: its region (if the layout gives it
 * one), its entities, their coordinate system, their timers. */
struct cell {
    cell_shared *shared;
    char space_name[SPACE_LAYOUT_NAME_MAX];
    const space_layout *layout; /* the space's layout now (spaces.c owns it) */
    bool has_region;            /* the layout gives this cellapp a cell */
    uint32_t cell_id;
    space_layout_rect region;
    bool three_d;
    double min[3], max[3]; /* the space's bounds */
    volatile_codec_config volatile_config;
    id_map entities;        /* id -> cell_entity */
    cell_entity **by_index; /* dense, for iteration; order is not stable */
    size_t count, capacity;
    size_t real_count, ghost_count;
    uint32_t tick;
    coord_system *coord;
    uint64_t *entity_id_of; /* coord id -> entity id, kept until the id is reused */
    size_t entity_id_capacity;
    entity_timers *timers;
    bool layout_changed; /* since the last tick: every real rechecks */
    uint64_t *chained;   /* ids of the entities with a movement chain (controller.c) */
    size_t chained_count, chained_capacity;
    uint64_t *doomed; /* ids of the reals to destroy at the end of this tick (cell_doom) */
    size_t doomed_count, doomed_capacity;
    /* This tick's enters and leaves of the witnesses' views, for the game
     * once every witness is done (cell_note_view). */
    struct cell_view_event {
        uint64_t owner_id, other_id;
        bool entered;
    } * view_events;
    size_t view_event_count, view_event_capacity;
};

/* A cell of space `layout` (its bounds, 3D flag; the region it owns, if
 * any). NULL if the space's bounds cannot be quantized at the settings'
 * position_precision (logged). */
cell *cell_create(cell_shared *shared, const space_layout *layout);
/* Frees every entity (and its witness, traps, timers). */
void cell_free(cell *c);
/* Adopts a new layout of the cell's space (the region may change). */
void cell_set_layout(cell *c, const space_layout *layout);
/* Creates an entity of class `cls` at a position, with default
 * properties; NULL if the id is taken or the position is not finite. */
cell_entity *cell_add(cell *c, uint64_t id, cell_entity_kind kind, const entity_def_class *cls, float x, float y,
                      float z);
cell_entity *cell_find(const cell *c, uint64_t id);
/* Moves an entity (and its witness's view with it) and marks it moved. */
void cell_move(cell *c, cell_entity *entity, float x, float y, float z, float yaw);
/* Takes the entity out of the cell now (watchers that saw it are told at
 * the next flush) and frees it at the end of the tick. Idempotent. */
void cell_destroy(cell *c, cell_entity *entity);
/* Frees the real part (witness, traps, timers, inbox, haunts, ...) and
 * makes the entity a ghost of `owner` at `incarnation`. */
void cell_make_ghost(cell *c, cell_entity *entity, uint64_t owner, uint32_t incarnation);
/* Promotes a ghost to a real here: attaches a fresh real part (no witness,
 * traps or haunts yet) and returns it; a real's own part unchanged. */
cell_real *cell_make_real(cell *c, cell_entity *entity);
/* Frees the entities marked destroyed and clears per-tick flags. */
/* Once per tick, after coord_flush: encodes every changed entity once per
 * audience that receives something of the change (replication.h), marks it
 * packed, and tells the witnesses that see what changed
 * (witness_notify_changes). Then the witnesses' updates. */
void cell_pack(cell *c);
void cell_end_tick(cell *c);
/* The entity id behind a coord id, valid for ids the coordinate system has
 * reported, even after the entity left. */
uint64_t cell_entity_id_of(const cell *c, uint32_t coord_id);
/* Whether (x, z) lies in the cell's region grown by `margin`. */
bool cell_region_holds(const cell *c, double x, double z, double margin);
/* Whether a position lies inside the space's bounds (and is finite). */
bool cell_in_bounds(const cell *c, float x, float y, float z);
/* Adds a trap of `radius` with the game's `tag` to a real, named
 * `controller_id` among its controllers; its members start as `members`
 * (ids, after a move between cellapps; NULL: empty). Returns 0 or -1. */
int cell_add_trap(cell *c, cell_entity *entity, uint32_t controller_id, uint32_t tag, float radius,
                  const uint64_t *members, size_t member_count);
/* Notes that `other_id` entered (or left) the view of `owner_id`'s
 * witness, for the game's view hooks after the witnesses' pass. */
void cell_note_view(cell *c, uint64_t owner_id, uint64_t other_id, bool entered);
/* Marks a real for destruction at the end of the tick (idempotent); it
 * stays in the cell and resolves until cellapp_tick reaps it. */
void cell_doom(cell *c, cell_entity *entity);
/* Removes the trap named `controller_id`. Returns 0, or -1 if it has none. */
int cell_remove_trap(cell *c, cell_entity *entity, uint32_t controller_id);
/* Adds a property-free client call of `entity` for its haunts to relay. */
void cell_queue_broadcast(cell_entity *entity, uint32_t method_id, const uint8_t *args, size_t length);
/* The same for a game event fired to the viewers of the real. */
void cell_queue_broadcast_event(cell_entity *entity, uint32_t event_id, const uint8_t *args, size_t length);
/* Forgets this tick's broadcast calls and events (sent, or nobody to send to). */
void cell_clear_broadcasts(cell_entity *entity);

/* ---- witnesses (witness.c) ---------------------------------------------- */

/* Gives `entity` (a real with a client) a witness: a watcher in the cell's
 * coordinate system with the view radius (half the side of the square
 * view) and hysteresis, an alias table and a bandwidth budget. */
void witness_attach(cell *c, cell_entity *entity);
void witness_detach(cell *c, cell_entity *entity);
/* After the tick's coord_flush and replication_pack: writes this client's
 * entity stream (replication.c's format: leaves, enters, property updates
 * and movement, chosen and ordered by the budget) and the client calls
 * queued for it into one ServerToClient(view) in *payload (allocated;
 * caller frees). Returns its length, 0 when there is nothing to send. */
size_t witness_update(witness *view, cell *c, cell_entity *owner, uint8_t **payload);
/* Queues a call of client method `method_id` of entity `entity_id` for
 * this client, sent with its next update. Copies `args`. */
void witness_queue_call(witness *view, uint64_t entity_id, uint32_t method_id, const uint8_t *args, size_t length);
/* The client's baseapp says it is not reading (congested) or has drained.
 * While congested the witness sends only enters and leaves; movement and
 * property changes are held and go, current, once it drains. */
void witness_set_congested(witness *view, bool congested);
/* Once per tick, after coord_flush and the pack, before the witnesses'
 * updates: every entity of `c` that moved or was packed tells the witnesses
 * that have it in view, so that each update looks only at what changed in
 * its view. */
void witness_notify_changes(cell *c);
/* `entity` is being freed: the witnesses that still have it in view forget
 * it (its LEAVE follows from the coordinate system's leave). */
void witness_entity_gone(cell_entity *entity);
/* Queues a client call of `entity` for every client that sees it. */
void witness_queue_call_for_observers(cell_entity *entity, uint32_t method_id, const uint8_t *args, size_t length);
/* Queues game event `event_id` (fields coded in `args`) from `source_id` for
 * the next update; needs_view: only if the client sees the source by then. */
void witness_queue_event(witness *view, uint64_t source_id, uint32_t event_id, const uint8_t *args, size_t length,
                         bool needs_view);
/* Queues it for every witness that sees `entity` here (needs_view). */
void witness_queue_event_for_observers(cell_entity *entity, uint32_t event_id, const uint8_t *args, size_t length);
/* Whether the client currently knows `entity_id` (has an alias for it, its
 * own entity included). */
bool witness_sees(const witness *view, uint64_t entity_id);
/* How many entities the client knows now (its aliases in use). */
uint32_t witness_view_count(const witness *view);
/* Everything the client holds and the witness remembers, for an offload.
 * The message's arrays are allocated; free with witness_saved_free. */
void witness_save(const witness *view, const cell *c, Tessera__Cluster__WitnessState *out);
void witness_saved_free(Tessera__Cluster__WitnessState *state);
/* Gives `entity` (now a real here) the witness it had on another cellapp:
 * the same aliases, cooldowns, budget and per-alias state, and a view that
 * starts with what the client knew, so nothing leaves or enters that
 * stayed in view. A copy here that is ahead of the one the witness left
 * (its change counters) owes the client its move, or its properties. Returns 0, or -1 (logged) for a state that does not fit
 * this cellapp's settings (then a fresh witness is attached). */
int witness_restore(cell *c, cell_entity *entity, const Tessera__Cluster__WitnessState *state);
/* The space changed under the client: forget every alias, as the client
 * does on Teleported(space_changed). */
void witness_reset(cell *c, cell_entity *entity);

/* ---- movement (movement.c) ---------------------------------------------- */

typedef enum movement_verdict {
    MOVEMENT_ACCEPTED,
    MOVEMENT_TOO_FAST,      /* farther than max_speed allows since the last move */
    MOVEMENT_OUTSIDE_WORLD, /* beyond the space's bounds: in no cell */
    MOVEMENT_NOT_FINITE,    /* NaN or infinity */
} movement_verdict;

/* Checks a client's move of a real against the space and the speed limit,
 * spending the allowance if it is accepted. The caller applies an accepted
 * move (cell_move); a refused one changes nothing. */
movement_verdict movement_check(const movement_config *config, const cell *c, cell_entity *entity, float x, float y,
                                float z, float yaw, uint64_t now_monotonic_us);
const char *movement_verdict_text(movement_verdict verdict);
/* Gives a new real its full allowance. */
void movement_reset(const movement_config *config, cell_entity *entity, uint64_t now_monotonic_us);

/* ---- the process (main.c, cellapp.c) ------------------------------------ */

typedef struct cellapp_space cellapp_space;
typedef struct balancer balancer;
typedef struct cellapp_admin cellapp_admin;

/* How busy the cellapp is (cell_load.c): the share of wall time its loop
 * spent working, sampled each tick and smoothed, without the transient
 * work of offloads and ghost churn, which is measured and smoothed apart. */
typedef struct cellapp_load {
    uint64_t sampled_us;   /* monotonic time of the last sample (0: none yet) */
    uint64_t idle_ns;      /* the loop's idle time then (uv_metrics_idle_time) */
    uint64_t transient_us; /* offload and ghost work since then */
    double load;           /* smoothed, a fraction of one core */
    double transient;      /* smoothed likewise */
} cellapp_load;
typedef struct ghost_route ghost_route;

/* Counters the cellapp publishes (registry) and prints. */
typedef struct cellapp_counters {
    uint64_t offloads_out, offloads_in; /* reals sent to and taken from other cellapps */
    uint64_t game_events;               /* game events and user messages fired here */
    uint64_t offloads_refused, offloads_reclaimed;
    uint64_t ghosts_created, ghosts_deleted; /* ghosts of our reals made and removed elsewhere */
    uint64_t ghost_bytes;                    /* GhostMessage bytes sent */
    uint64_t messages_forwarded;             /* CellMessages sent on to the real */
    uint64_t messages_failed;                /* CellMessages that could not be delivered */
    uint64_t stream_gaps;                    /* sequences given up after cell_stream_gap_ms */
    uint64_t duplicates;                     /* CellMessages delivered before, dropped */
    uint64_t teleports;
    uint64_t moves_refused;
    /* From an offload's send to its acknowledgement, microseconds. */
    latency_histogram offload_latency;
    latency_histogram tick_time; /* each tick's duration, microseconds */
} cellapp_counters;

struct cellapp {
    uv_loop_t *loop;
    cellapp_settings settings;
    redis_client *redis;
    registry *registry;
    peer_set *peers;
    uv_tcp_t listener;
    int listen_port;
    uv_timer_t tick_timer;
    uv_timer_t stats_timer;
    uv_signal_t sigint, sigterm, sigusr1, sighup;
    int argc; /* main's, for SIGHUP's reload */
    char **argv;
    uint64_t process_id;
    cell_shared shared;
    /* The spaces this cellapp knows (spaces.c), each with its cell here,
     * if any. */
    cellapp_space **spaces;
    size_t space_count, space_capacity;
    bool spaces_polling; /* an HGETALL of the epochs is in flight */
    channel_stats totals;
    uint64_t tick_last_us;        /* monotonic time the accumulator last advanced */
    uint64_t tick_accumulator_us; /* time owed to the simulation */
    uint64_t last_tick_duration_us;
    uint64_t random_state;    /* spawn points */
    id_map base_outboxes;     /* baseapp id -> cellapp_base_outbox (outbox.c) */
    id_map cell_outboxes;     /* cellapp id -> cellapp_cell_outbox (outbox.c) */
    ghost_order *ghost_order; /* the incarnation books (haunt.c applies them) */
    ghost_route *route;       /* where departed reals went (ghost_route.c) */
    mailbox *mailbox;         /* this cellapp's streams to other entities */
    base_mailbox *bases;      /* calls to entities' bases (cellapp_call_base) */
    uint64_t base_calls, base_calls_failed;
    id_map pending_offloads;    /* entity id -> offload_pending (offload.c) */
    id_map peer_layouts;        /* cellapp id -> what it applied (spaces.c) */
    entity_timer_ids timer_ids; /* every cell's timers take their ids here */
    id_map ghost_moves;         /* cellapp id -> this tick's moves for it (haunt.c) */
    cellapp_counters counters;
    cellapp_load load;
    balancer *balancer;   /* NULL when balancing is off */
    cellapp_admin *admin; /* the admin HTTP listener's part (NULL: admin_port -1) */
    bool draining;        /* SIGTERM: the cells go elsewhere, then the process stops */
    uint64_t drain_started_us;
    int shutting_down;
    int exit_code;
    id_block *ids;                        /* entity ids for what the game spawns */
    game_host *game;                      /* the game module (never NULL once running) */
    entity_io *io;                        /* the queue of entity I/O events (entity_io.h) */
    struct cellapp_map_claim *map_claims; /* per mapped space: who spawns its entities (map_entities.c) */
    size_t map_claim_count;
    struct cellapp_navmesh { /* each mapped space's navigation mesh (settings.maps) */
        char space[SPACE_LAYOUT_NAME_MAX];
        navmesh *mesh;
    } * navmeshes;
    size_t navmesh_count;
    game_host *game_loading; /* while the module's cell_init runs */
};

/* cellapp.c: what peers ask of the cellapp, and the tick. */
void cellapp_on_peer_up(peer_set *set, uint64_t process_id, peer_role role, void *user_data);
void cellapp_on_peer_down(peer_set *set, uint64_t process_id, peer_role role, const char *reason, void *user_data);
void cellapp_on_message(peer_set *set, uint64_t process_id, peer_role role,
                        const Tessera__Cluster__PeerMessage *message, void *user_data);
/* Runs one simulation tick of every cell. */
void cellapp_tick(cellapp *app);
/* The navigation mesh of space `space` (NULL: it has no map). */
const navmesh *cellapp_navmesh_of(const cellapp *app, const char *space);
/* Builds (or loads) the mesh of every space in settings.maps. Returns 0,
 * or -1 with why in err. */
int cellapp_load_navmeshes(cellapp *app, char *err, size_t errlen);
void cellapp_free_navmeshes(cellapp *app);
/* The entity with this id in any cell here, or NULL. */
cell_entity *cellapp_find_entity(const cellapp *app, uint64_t entity_id);
/* A pseudo-random number in [0, 1) (spawn points: spread, not secrecy). */
double cellapp_random_unit(cellapp *app);
/* Creates a real of class `cls` in cell `c` at a position (checked by the
 * caller), incarnation 1, and announces it (ghost books, directory). NULL
 * if the id is taken. */
cell_entity *cellapp_create_real(cellapp *app, cell *c, uint64_t id, const entity_def_class *cls, float x, float y,
                                 float z, float yaw, uint64_t baseapp_id);
/* Destroys a real: its haunts delete their ghosts, the directory forgets
 * it. Idempotent. */
void cellapp_destroy_real(cellapp *app, cell_entity *entity);
/* Sends `message` to the client of real `entity` (through its baseapp). */
void cellapp_send_to_client(cellapp *app, const cell_entity *entity, const Tessera__Client__ServerToClient *message);
/* Asks the baseapp of real `entity` to drop its client, which broke the
 * rules; the cell entity goes when the baseapp destroys it. */
void cellapp_drop_client(cellapp *app, const cell_entity *entity, Tessera__Client__ErrorCode code, const char *reason);
/* Calls method `method_name` (of class `class_name`, part BASE, or CLIENT:
 * through the base to its client) of entity `target_id`'s base, wherever it
 * is, for `caller_id`, with `args` (a state of the method's args_class;
 * NULL: none). Returns 0 (a failure comes back, logged and counted), or -1
 * when there is no such method. */
int cellapp_call_base(cellapp *app, uint64_t caller_id, uint64_t target_id, const char *class_name,
                      entity_def_part part, const char *method_name, const entity_state *args);
base_mailbox *cellapp_base_mailbox_create(cellapp *app);
/* Tells baseapp `baseapp_id` how entity `entity_id`'s cell part came out:
 * made (entity, with what its client needs) or refused (entity NULL,
 * `error`). Also the answer to a ClientBinding that attaches a client. */
void cellapp_reply_created(cellapp *app, uint64_t baseapp_id, uint64_t entity_id, const cell_entity *entity,
                           const char *error);

/* spaces.c: the layouts in Redis and this cellapp's cells. */
/* Starts a poll of the layout epochs (one at a time), every tick. */
void spaces_poll(cellapp *app);
/* Applies layouts fetched since the last tick, whole: creates, resizes
 * and marks cells. Call at the start of a tick. */
void spaces_apply_pending(cellapp *app);
/* The cell of space `name` here, or NULL. With `create`, makes one (with
 * no region) when the space is known but has no cell here. */
cell *spaces_cell(cellapp *app, const char *name, bool create);
/* The layout of space `name`, or NULL if unknown. */
const space_layout *spaces_layout(const cellapp *app, const char *name);
/* Iterates the cells: *cursor = 0 to start; NULL at the end. */
cell *spaces_next_cell(const cellapp *app, size_t *cursor);
/* Iterates the applied layouts likewise. */
const space_layout *spaces_next_layout(const cellapp *app, size_t *cursor);
/* Likewise, but a layout fetched and not yet applied (waiting for a cellapp
 * it names to be up, say) instead of the applied one: what the balancer
 * must build on, or its writes would be older than what Redis holds. */
const space_layout *spaces_next_newest_layout(const cellapp *app, size_t *cursor);
/* Frees every space and cell (shutdown). */
void spaces_free(cellapp *app);
/* Drops cells with no region and no entities left. */
void spaces_reap(cellapp *app);
/* Tells cellapp `peer` (0: every one) which layouts this cellapp applied. */
void spaces_announce(cellapp *app, uint64_t peer);
/* A peer says it applied a layout. */
void spaces_on_layout_applied(cellapp *app, uint64_t peer, const Tessera__Cluster__LayoutApplied *applied);
/* The epoch of space `name` that `peer` has applied, 0 if none. */
uint64_t spaces_peer_epoch(const cellapp *app, uint64_t peer, const char *name);
/* The latest epoch of space `name` any up peer has applied (0: none). */
uint64_t spaces_newest_peer_epoch(const cellapp *app, const char *name);
void spaces_peer_down(cellapp *app, uint64_t peer);

/* outbox.c: what a tick sends, gathered per peer and sent at its end. */
/* Queues a client payload (ownership passes) for the client of `entity` (a
 * real with a base), stamped with its incarnation and client binding. */
void outbox_to_client(cellapp *app, const cell_entity *entity, uint8_t *payload, size_t length);
/* Appends one CellItem (encoded now) for cellapp `peer`. */
void outbox_to_cellapp(cellapp *app, uint64_t peer, const Tessera__Cluster__CellItem *item);
/* Bytes `outbox_to_cellapp` appended for `peer` since the last flush. */
size_t outbox_cellapp_bytes(const cellapp *app, uint64_t peer);
void outbox_flush_clients(cellapp *app);
void outbox_flush_cellapps(cellapp *app);
/* Sends what is queued for cellapp `peer` now, ahead of the tick (the
 * order of its items is kept). */
void outbox_flush_cellapp(cellapp *app, uint64_t peer);
/* Forgets what was queued for a peer that went away. */
void outbox_drop_peer(cellapp *app, uint64_t peer);
void outbox_free(cellapp *app);

/* haunt.c: where each real's ghosts live, and the ghost protocol. */
/* Once per tick, after the witnesses: brings every real's haunts up to
 * date (creates, keeps, deletes ghosts) and queues its ghost update. */
void haunt_tick(cellapp *app, cell *c);
/* A GhostMoves from cellapp `peer`: each entry as a GhostUpdate. */
void haunt_on_moves(cellapp *app, uint64_t peer, const Tessera__Cluster__GhostMoves *moves);
/* Frees the per-peer buffers of moves. */
void haunt_free(cellapp *app);
/* A GhostMessage from cellapp `peer` (encoded in `item`, kept if held). */
void haunt_on_message(cellapp *app, uint64_t peer, const Tessera__Cluster__GhostMessage *message, const uint8_t *item,
                      size_t item_length);
/* Queues a ghost message for cellapp `peer`, in order after everything
 * queued for it before. */
void haunt_send(cellapp *app, uint64_t peer, const Tessera__Cluster__GhostMessage *message);
/* Queues the delete of `entity`'s ghost on `peer` (destroyed: the entity
 * is gone, not only out of reach). */
void haunt_send_delete(cellapp *app, const cell_entity *entity, uint64_t peer, bool destroyed);
/* Queues a ghost create of `entity` (a real) for `peer` and adds it to the
 * haunts. */
void haunt_add(cellapp *app, cell_entity *entity, uint64_t peer);
/* Queues the delete of every ghost of a real that is being destroyed. */
void haunt_destroyed(cellapp *app, cell_entity *entity);
/* A copy of a CellItem from `peer` for the incarnation books to hold
 * (freed with free). */
void *haunt_hold_item(uint64_t peer, const uint8_t *item, size_t length);
/* Replays held ghost messages that have become applicable for entity_id
 * (after an offload arrived, or a peer went down). */
void haunt_release(cellapp *app, uint64_t entity_id);
/* Cellapp `peer` is gone: its ghosts here move on or are dropped, and it
 * leaves every haunt list. */
void haunt_peer_down(cellapp *app, uint64_t peer);
/* Counts reals with no ghost anywhere (the interior) and ghosts held. */
void haunt_count(const cellapp *app, size_t *interior_reals, size_t *reals, size_t *ghosts);

/* offload.c: reals moving between cellapps. */
/* Once per tick, after haunt_tick: every real whose position lies in
 * another cell (past the margin) moves there. */
void offload_tick(cellapp *app, cell *c);
/* Moves real `entity` to `target` now (a teleport, a line moved). */
void offload_send(cellapp *app, cell_entity *entity, uint64_t target);
/* An Offload from `peer`, encoded in `item` (kept if the books hold it). */
void offload_on_offload(cellapp *app, uint64_t peer, const Tessera__Cluster__Offload *offload, const uint8_t *item,
                        size_t item_length);
/* An Offload released from the ghost books: restores it (decoded from the
 * held CellItem). */
void offload_apply(cellapp *app, uint64_t peer, const Tessera__Cluster__Offload *offload);
void offload_on_ack(cellapp *app, uint64_t peer, const Tessera__Cluster__OffloadAck *ack);
/* Cellapp `peer` is gone: reals sent to it and not acknowledged come back. */
void offload_peer_down(cellapp *app, uint64_t peer);
/* Moves `entity` (a real) to (x, y, z) in space `space_name` (NULL: its
 * own): here if the point is in this cell, else to the cell that holds it,
 * on whichever cellapp. Returns 0, or -1 with why in err (an unknown space,
 * a point in no cell: the entity stays where it is). */
int offload_teleport(cellapp *app, cell_entity *entity, const char *space_name, float x, float y, float z, float yaw,
                     char *err, size_t errlen);
void offload_free(cellapp *app);

/* cell_entity_codec.c: an entity's whole cell state, as one message. */
/* Fills `out` with everything `entity` (a real) is; arrays allocated (free
 * with cell_entity_saved_free). */
void cell_entity_save(cellapp *app, const cell_entity *entity, Tessera__Cluster__CellEntityState *out);
void cell_entity_saved_free(Tessera__Cluster__CellEntityState *state);
/* Makes `entity` (a ghost here, or a new entity) the real that `state`
 * describes. Returns 0, or -1 with why in err (the entity is then left a
 * ghost). */
int cell_entity_restore(cellapp *app, cell *c, cell_entity *entity, const Tessera__Cluster__CellEntityState *state,
                        char *err, size_t errlen);

/* ghost_route.c: where departed reals went. */
ghost_route *ghost_route_create(void);
void ghost_route_free(ghost_route *route);
/* Real `entity_id` left for `cellapp_id`: remember it until `until_ms`. */
void ghost_route_add(ghost_route *route, uint64_t entity_id, uint64_t cellapp_id, uint64_t until_ms);
/* Where `entity_id` went, or 0 if not remembered (or expired). */
uint64_t ghost_route_find(ghost_route *route, uint64_t entity_id, uint64_t now_ms);
void ghost_route_remove(ghost_route *route, uint64_t entity_id);
void ghost_route_expire(ghost_route *route, uint64_t now_ms);
size_t ghost_route_count(const ghost_route *route);

/* cell_message.c: messages to entities' cell parts (CellMessage). */
/* A CellMessage from `peer` (a baseapp, or a cellapp forwarding): delivers
 * it in its stream's order to the real here, forwards it to the real
 * elsewhere, or fails it back to its sender. */
void cell_message_on_message(cellapp *app, uint64_t peer, peer_role role, const Tessera__Cluster__CellMessage *message);
/* Delivers held messages whose gap waited too long (every tick). */
void cell_message_tick(cellapp *app, cell *c);
/* Runs cell method `method` of `target` with `args` (a state of its
 * args_class) on behalf of `caller_id` (0: the server): here when the
 * target is a real here, else through the mailbox. */
void cell_message_call(cellapp *app, cell_entity *target, const entity_def_method *method, uint64_t caller_id,
                       const entity_state *args);
/* Calls client method `method` of `entity` on its own client only, or on
 * every client that sees it (its own included), across cellapps. */
void cell_message_call_client(cellapp *app, cell_entity *entity, const entity_def_method *method,
                              const entity_state *args, bool every_observer);

/* state_dump.c: every real's state to settings.state_dump_path as JSON. */
int state_dump_write(const cellapp *app);

/* ---- load (cell_load.c) ----------------------------------------------------------
 * cell_load_start before the loop runs (turns on libuv's idle time);
 * cell_load_sample once a tick; transient work is timed with
 * cell_load_transient_begin/end around it. cell_load_report fills a cell's
 * balance report: its share of the load (by its reals' work: each counts
 * one plus the entities its client sees) and its entity bound levels. */
void cell_load_start(cellapp *app);
void cell_load_sample(cellapp *app, uint64_t now_us);
static inline uint64_t cell_load_transient_begin(void) { return clock_monotonic_us(); }
void cell_load_transient_end(cellapp *app, uint64_t began_us);
void cell_load_report(const cellapp *app, const cell *c, balance_cell_report *out);

/* ---- the balancer (balancer.c) ---------------------------------------------------
 * Created after the registry; balancer_tick once a tick does what is due:
 * publishing this cellapp's report, the lease, and, while this cellapp
 * holds the lease, the decisions for every space. balancer_stop gives the
 * lease up and withdraws the report (a stopping cellapp). */
balancer *balancer_create(cellapp *app);
void balancer_free(balancer *b);
void balancer_tick(balancer *b, uint64_t now_us);
void balancer_stop(balancer *b);
/* A draining cellapp stops standing for the lease (and lets it go now if
 * it holds it), but keeps reporting. */
void balancer_give_up_lease(balancer *b);
bool balancer_is_leader(const balancer *b);

/* ---- the admin listener (cellapp_admin.c; process_admin.h has the common
 * routes) --------------------------------------------------------------------- */
struct registry;
cellapp_admin *cellapp_admin_start(cellapp *app, char *err, size_t errlen);
void cellapp_admin_publish(cellapp_admin *admin, struct registry *reg);
void cellapp_admin_stop(cellapp_admin *admin);
/* Drain, as SIGTERM asks (main.c): with no balancer or no other cellapp,
 * stop at once. */
void cellapp_begin_drain(cellapp *app);
typedef struct balancer_figures {
    bool leader;
    uint64_t holder; /* the lease's holder last seen */
    uint64_t passes, line_moves, cell_changes, writes_refused;
} balancer_figures;
void balancer_stats(const balancer *b, balancer_figures *out);

#endif
