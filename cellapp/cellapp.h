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

#include "channel.h"
#include "coord.h"
#include "client.pb-c.h"
#include "cluster.pb-c.h"
#include "id_map.h"
#include "peer_set.h"
#include "process.h"
#include "redis_client.h"
#include "registry.h"

/* ---- settings (main.c) -------------------------------------------------- */

typedef struct cellapp_settings {
    process_settings process;
    int64_t tick_hz;
    char space_name[64];
    bool space_3d;
    double world_min_x, world_max_x, world_min_z, world_max_z;
    double spawn_x, spawn_z, spawn_radius;
    double view_radius, view_hysteresis;
    double max_speed;
    double movement_burst_seconds;
    int64_t max_entities;
} cellapp_settings;

/* ---- entities (space.c) ------------------------------------------------- */

typedef struct witness witness;

typedef enum cell_entity_kind {
    CELL_ENTITY_REAL,  /* the authoritative copy; this cellapp runs it */
    CELL_ENTITY_GHOST, /* a read-only mirror of a real on another cellapp */
} cell_entity_kind;

typedef struct cell_entity {
    uint64_t id;
    cell_entity_kind kind;
    char type[32];
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
/* Creates an entity at a position; NULL if the id is taken or the position
 * is not finite. */
cell_entity *space_add(space *sp, uint64_t id, cell_entity_kind kind, const char *type, float x, float y, float z);
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

/* Gives `entity` a witness: a watcher in the coordinate system with the
 * view radius (half the side of the square view) and hysteresis. */
void witness_attach(space *sp, cell_entity *entity, double view_radius, double view_hysteresis);
void witness_detach(space *sp, cell_entity *entity);
/* After the tick's coord_flush: packs one ServerToClient(view) with the
 * leaves and enters the flush reported and the moves of entities in view
 * into *payload (allocated; caller frees). Returns the payload length, 0
 * when nothing changed. */
size_t witness_update(witness *view, const cell_entity *owner, const space *sp, uint8_t **payload);

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

typedef struct cellapp {
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
} cellapp;

/* cellapp.c: what peers ask of the cellapp, and the tick. */
void cellapp_on_peer_up(peer_set *set, uint64_t process_id, peer_role role, void *user_data);
void cellapp_on_peer_down(peer_set *set, uint64_t process_id, peer_role role, const char *reason, void *user_data);
void cellapp_on_message(peer_set *set, uint64_t process_id, peer_role role,
                        const Tessera__Cluster__PeerMessage *message, void *user_data);
/* Runs one simulation tick: witnesses, client messages, ghost updates. */
void cellapp_tick(cellapp *app);
/* Frees the outboxes; called at shutdown. */
void cellapp_close_outboxes(cellapp *app);

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
