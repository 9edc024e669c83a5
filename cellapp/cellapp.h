/* cellapp.h -- the cellapp program's private header: the process context
 * and, under one banner per file, what each cellapp module offers the
 * others.
 *
 * A cellapp hosts the spatial part of entities. Until seamless multi-cell
 * spaces arrive, every cellapp holds a cell of the default space that
 * covers the whole space: each keeps the reals it was given and a ghost of
 * every real of every other cellapp (ghost distance unbounded), so a
 * witness sees the whole space whichever cellapp its entity lives on.
 */
#ifndef TESSERA_CELLAPP_H
#define TESSERA_CELLAPP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "bit_stream.h"
#include "channel.h"
#include "coord.h"
#include "client.pb-c.h"
#include "cluster.pb-c.h"
#include "entity_def.h"
#include "entity_state.h"
#include "id_block.h"
#include "id_map.h"
#include "peer_set.h"
#include "process.h"
#include "redis_client.h"
#include "registry.h"
#include "replication.h"
#include "volatile_codec.h"

/* ---- settings (main.c) -------------------------------------------------- */

typedef struct cellapp_settings {
    process_settings process;
    int64_t tick_hz;
    char space_name[64];
    bool space_3d;
    double world_min_x, world_max_x, world_min_z, world_max_z;
    double spawn_x, spawn_z, spawn_radius;
    double view_radius, view_hysteresis;
    double world_min_y, world_max_y;
    double max_speed;
    double movement_burst_seconds;
    int64_t max_entities;
    char entity_definitions[256];
    /* Replication (witness.c). */
    int64_t client_bytes_per_second;
    int64_t max_aliases;
    int64_t alias_cooldown_ms;
    double position_precision;
    int64_t yaw_steps;
    double detail_near_distance, detail_medium_distance, detail_hysteresis;
    double update_near_distance, update_far_distance;
    /* The demo game (game.c). */
    int64_t npc_count;
    double npc_trap_radius;
    char state_dump_path[256];
} cellapp_settings;

/* ---- entities (space.c) ------------------------------------------------- */

typedef struct witness witness;

typedef enum cell_entity_kind {
    CELL_ENTITY_REAL,  /* the authoritative copy; this cellapp runs it */
    CELL_ENTITY_GHOST, /* a read-only mirror of a real on another cellapp */
} cell_entity_kind;

typedef struct cell_entity {
    /* The packer's record (replication.h): first, so that its encodings
     * start on the allocation's alignment. */
    replication_entity replication;
    uint64_t id;
    cell_entity_kind kind;
    char type[32];
    const entity_def_class *cls; /* type's class in the definitions */
    entity_state *state;      /* its properties: every one on a real, to_ghosts ones on a ghost */
    bool packed;              /* replication_pack ran for it this tick */
    float x, y, z, yaw;
    uint64_t move_stamp_us;   /* wall clock when the real applied its last move */
    bool moved;               /* position changed since the last tick */
    bool is_new;              /* created since the last tick (ghosts not yet told) */
    bool destroyed;           /* deferred deletion: reaped at the end of the tick */
    uint64_t baseapp_id;      /* reals: where the base and client live */
    uint64_t owner_cellapp;   /* ghosts: the cellapp that holds the real */
    /* Movement checking (reals with a client). */
    double move_allowance;    /* metres the entity may still move now */
    uint64_t allowance_us;    /* monotonic time of the last allowance update */
    uint32_t last_sequence;
    witness *witness;         /* NULL when nobody watches through this entity */
    uint32_t coord_id;        /* this entity in the space's coordinate system */
    size_t index;             /* position in space.by_index */
    /* Client calls to every client that sees this real, made this tick:
     * relayed to the ghosts' cellapps with the next GhostBatch. */
    Tessera__Client__ClientCall *broadcast_calls;
    size_t broadcast_count, broadcast_capacity;
    /* The demo game's per-entity state (game.c). */
    double walked_metres;
    uint32_t visitors;        /* NPCs: avatars that have stepped into the trap */
    uint32_t trap;            /* NPCs: their trap watcher, or COORD_NONE; removed with the entity */
} cell_entity;

/* A space on this cellapp: its entities by id and in a dense array, and
 * the coordinate system (coord.h) that keeps them, and the witnesses'
 * triggers, on sorted axes. */
typedef struct space {
    char name[64];
    id_map entities;          /* id -> cell_entity */
    cell_entity **by_index;   /* dense, for iteration; order is not stable */
    size_t count, capacity;
    size_t real_count, ghost_count;
    uint32_t tick;
    coord_system *coord;
    uint64_t *entity_id_of;   /* coord id -> entity id, kept until the id is reused */
    size_t entity_id_capacity;
} space;

/* A 3D space also sorts and checks Y; views and traps become cubes. */
void space_init(space *sp, const char *name, bool three_d);
/* Frees every entity (and its witness). */
void space_close(space *sp);
/* Creates an entity of class `cls` (whose registry must outlive it) at a
 * position, with default properties; NULL if the id is taken or the
 * position is not finite. */
cell_entity *space_add(space *sp, uint64_t id, cell_entity_kind kind, const entity_def_class *cls, float x, float y,
                       float z);
cell_entity *space_find(const space *sp, uint64_t id);
/* Moves an entity (and its witness's view with it) and marks it moved. */
void space_move(space *sp, cell_entity *entity, float x, float y, float z, float yaw);
/* Takes the entity out of the space now (watchers that saw it are told at
 * the next flush) and frees it at the end of the tick. Idempotent. */
void space_destroy(space *sp, cell_entity *entity);
/* Frees the entities marked destroyed and clears per-tick flags. */
void space_end_tick(space *sp);
/* The entity id behind a coord id, valid for ids the coordinate system has
 * reported, even after the entity left. */
uint64_t space_entity_id_of(const space *sp, uint32_t coord_id);

/* ---- witnesses (witness.c) ---------------------------------------------- */

typedef struct cellapp cellapp;

/* Gives `entity` (a real with a client) a witness: a watcher in the
 * coordinate system with the view radius (half the side of the square
 * view) and hysteresis, an alias table and a bandwidth budget. */
void witness_attach(cellapp *app, cell_entity *entity);
void witness_detach(space *sp, cell_entity *entity);
/* After the tick's coord_flush and replication_pack: writes this client's
 * entity stream (replication.c's format: leaves, enters, property updates
 * and movement, chosen and ordered by the budget) and the client calls
 * queued for it into one ServerToClient(view) in *payload (allocated;
 * caller frees). Returns its length, 0 when there is nothing to send. */
size_t witness_update(witness *view, cellapp *app, cell_entity *owner, uint8_t **payload);
/* Queues a call of client method `method_id` of entity `entity_id` for
 * this client, sent with its next update. Copies `args`. */
void witness_queue_call(witness *view, uint64_t entity_id, uint32_t method_id, const uint8_t *args, size_t length);
/* The client's baseapp says it is not reading (congested) or has drained.
 * While congested the witness sends only enters and leaves; movement and
 * property changes are held and go, current, once it drains. */
void witness_set_congested(witness *view, bool congested);
/* Whether the client currently knows `entity_id` (has an alias for it, its
 * own entity included). */
bool witness_sees(const witness *view, uint64_t entity_id);

/* Per-witness counters, summed over the cellapp for the registry. */
typedef struct witness_totals {
    uint64_t stream_bytes;     /* entity stream bytes sent to clients */
    uint64_t records_held;     /* records the budget held back to a later tick */
    uint64_t aliases_exhausted;/* entities not sent because a client's alias table was full */
} witness_totals;

/* ---- movement (movement.c) ---------------------------------------------- */

typedef enum movement_verdict {
    MOVEMENT_ACCEPTED,
    MOVEMENT_TOO_FAST,        /* farther than max_speed allows since the last move */
    MOVEMENT_OUTSIDE_WORLD,   /* beyond the space's bounds */
    MOVEMENT_NOT_FINITE,      /* NaN or infinity */
} movement_verdict;

/* Checks a client's move of a real against the world and the speed limit,
 * spending the allowance if it is accepted. The caller applies an accepted
 * move (space_move); a refused one changes nothing. */
movement_verdict movement_check(const cellapp_settings *settings, cell_entity *entity, float x, float y, float z,
                                float yaw, uint64_t now_monotonic_us);
const char *movement_verdict_text(movement_verdict verdict);
/* Gives a new real its full allowance. */
void movement_reset(const cellapp_settings *settings, cell_entity *entity, uint64_t now_monotonic_us);

/* ---- the process (main.c, cellapp.c) ------------------------------------ */

typedef struct cellapp_outbox cellapp_outbox;
typedef struct game game;

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
    uv_signal_t sigint, sigterm;
    uint64_t process_id;
    space space;
    channel_stats totals;
    uint64_t tick_last_us;        /* monotonic time the accumulator last advanced */
    uint64_t tick_accumulator_us; /* time owed to the simulation */
    uint64_t last_tick_duration_us;
    uint64_t random_state;        /* spawn points */
    id_map outboxes;              /* baseapp id -> cellapp_outbox */
    uint64_t *destroyed_reals;    /* ids of reals destroyed this tick, for ghosts */
    size_t destroyed_count, destroyed_capacity;
    int shutting_down;
    int exit_code;
    uv_signal_t sigusr1;          /* dumps the reals' state (state_dump_path) */
    /* Replication: the game's definitions, the audience masks, the packer
     * and its tick counter, the quantization of volatile updates, and one
     * writer that every witness's stream is built in, in turn. */
    entity_def_registry *definitions;
    replication_schema *schema;
    replication *replication;
    uint64_t replication_tick;
    volatile_codec_config volatile_config;
    bit_writer stream;
    witness_totals witness_totals;
    id_block *ids;                /* entity ids for what the cellapp creates itself (NPCs) */
    game *game;
};

/* cellapp.c: what peers ask of the cellapp, and the tick. */
void cellapp_on_peer_up(peer_set *set, uint64_t process_id, peer_role role, void *user_data);
void cellapp_on_peer_down(peer_set *set, uint64_t process_id, peer_role role, const char *reason, void *user_data);
void cellapp_on_message(peer_set *set, uint64_t process_id, peer_role role,
                        const Tessera__Cluster__PeerMessage *message, void *user_data);
/* Runs one simulation tick: witnesses, client messages, ghost updates. */
void cellapp_tick(cellapp *app);
/* Sends `message` to the client of real `entity` (through its baseapp). */
void cellapp_send_to_client(cellapp *app, const cell_entity *entity, const Tessera__Client__ServerToClient *message);
/* Runs cell method `method` of `target` with `args` (a state of its
 * args_class) on behalf of `caller_id` (0: the server): here when the
 * target is a real here, else on the cellapp that holds its real. */
void cellapp_call_cell(cellapp *app, cell_entity *target, const entity_def_method *method, uint64_t caller_id,
                       const entity_state *args);
/* Calls client method `method` of `entity` on its own client only, or on
 * every client that sees it (its own included), across cellapps. */
void cellapp_call_client(cellapp *app, cell_entity *entity, const entity_def_method *method, const entity_state *args,
                         bool every_observer);
/* A pseudo-random number in [0, 1) (spawn points: spread, not secrecy). */
double cellapp_random_unit(cellapp *app);
/* Queues a client call for every local witness that sees `entity_id`. */
void cellapp_queue_for_observers(cellapp *app, uint64_t entity_id, uint32_t method_id, const uint8_t *args,
                                 size_t length);
/* Writes every real's properties to settings.state_dump_path as JSON
 * (state_dump.c). Returns 0 or -1 (logged). */
int state_dump_write(const cellapp *app);
/* Frees the outboxes; called at shutdown. */
void cellapp_close_outboxes(cellapp *app);

/* game.c: the demo game's rules (Avatar and Npc from demo/entities). Each
 * is a no-op when the definitions lack the class or member it uses. */
game *game_create(cellapp *app);
void game_free(game *g);
/* Once per tick, before the flush: spawns the NPCs still owed. */
void game_tick(cellapp *app);
/* A real was created (its cell properties already set). */
void game_on_real_created(cellapp *app, cell_entity *entity);
/* A real's accepted move covered `metres`. */
void game_on_moved(cellapp *app, cell_entity *entity, double metres);
/* Runs a cell method on a real (checks done by the caller). */
void game_run_method(cellapp *app, cell_entity *entity, const entity_def_method *method, uint64_t caller_id,
                     const entity_state *args);

/* ghost.c: keeping peers' ghosts of our reals, and our ghosts of theirs. */
/* Sends `peer` every real we hold, as new ghosts. */
void ghost_send_full_state(cellapp *app, uint64_t peer_id);
/* Sends every cellapp peer this tick's new, moved and destroyed reals. */
void ghost_send_tick(cellapp *app);
/* Applies a peer's GhostBatch. */
void ghost_apply(cellapp *app, uint64_t peer_id, const Tessera__Cluster__GhostBatch *batch);
/* Destroys every ghost whose real lived on `peer_id`. */
void ghost_drop_peer(cellapp *app, uint64_t peer_id);

#endif

