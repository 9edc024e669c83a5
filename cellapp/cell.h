/* cell.h -- a cellapp's part of one space (a cell) and the entities in it.
 *
 * A space is split into cells by its layout (common/space_layout.h, kept in
 * Redis); a cellapp owns at most one cell of each space, and its `cell`
 * object for a space holds the REAL entities whose position lies in its
 * region and GHOSTS of the reals of neighbouring cells that come within
 * ghost distance of it, all in one coordinate system, so a witness sees
 * across the line as if there were none. What ghosts and reals share is a
 * cell_entity; what only a real has (its witness, haunts, traps,
 * controllers, inbox, game data) is its cell_real.
 */
#ifndef TESSERA_CELL_H
#define TESSERA_CELL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bit_stream.h"
#include "cellapp_settings.h"
#include "client.pb-c.h"
#include "controller.h"
#include "coord.h"
#include "entity_def.h"
#include "entity_io.h"
#include "entity_state.h"
#include "entity_timer.h"
#include "id_map.h"
#include "mailbox.h"
#include "replication.h"
#include "space_layout.h"
#include "volatile_codec.h"

typedef struct witness witness;
typedef struct cell cell;

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
    coord_shape shape; /* the square (box), or a circle or sphere inside it */
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
    /* Its next backup goes this tick, not at its turn (created, arrived,
     * teleported, restored: cell_snapshot.c). */
    bool snapshot_due;
    uint32_t witnessed_index; /* in cell.witnessed, while it has a witness */
    /* Restored without a base from the backups of this dead cellapp: its
     * entry there is deleted once its first backup here is written, so a
     * second death before then leaves it restorable (0: none). */
    uint64_t restored_from_cellapp;
    /* Its baseapp was declared dead: since when it waits for its base to be
     * restored elsewhere (monotonic us; 0: its base is alive). reals.c. */
    uint64_t base_lost_us;
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
    /* What every witness that has it in view reads of it each tick, in one
     * cache line (cell_add allocates the entity on a line's boundary):
     * where it is, what happened to it this tick, and its position as
     * clients are sent it. That is worked out once for all of them
     * (witness_write_move), from the x, y, z and yaw in quantized_from and
     * for the config quantized_for; quantized_ok is false when that config
     * cannot carry it. */
    _Alignas(64) float x; /* the line's first field */
    float y, z, yaw;
    volatile_quantized quantized;
    float quantized_from[4];
    const volatile_codec_config *quantized_for;
    bool quantized_ok;
    bool packed;            /* replication_pack ran for it this tick */
    bool moved;             /* position changed since the last tick */
    bool is_new;            /* created here since the last tick */
    bool destroyed;         /* deferred deletion: reaped at the end of the tick */
    bool listed;            /* on its cell's list of what changed this tick (cell_note_changed) */
    uint64_t move_stamp_us; /* wall clock when the real applied its last move */
    uint32_t incarnation;   /* of the real (ghosts: of the real they copy) */
    /* The real's change counters (cell_change_count_ahead): ticks in which
     * it moved, and in which a ghost property changed; ghosts copy them. */
    uint32_t move_count, property_count;
    uint64_t owner_cellapp; /* ghosts: the cellapp that holds the real */
    /* Ghosts: when that cellapp was declared dead (0: it is not). The
     * ghost waits, frozen, for its real to be restored (restore.c). */
    uint64_t orphaned_us;
    uint64_t ghost_heard_us; /* ghosts: when its real's last message was applied here (monotonic) */
    /* The witnesses that have it in view (their own entity included). */
    cell_observer *observers;
    uint32_t observer_count, observer_capacity;
    uint32_t coord_id; /* this entity in the cell's coordinate system */
    size_t index;      /* position in cell.by_index */
} cell_entity;

_Static_assert(offsetof(cell_entity, listed) - offsetof(cell_entity, x) < 64,
               "what witnesses read of an entity is one cache line");

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
    /* What a cell tells its owner, the cellapp (all three are set):
     * on_trap: a trap of `owner` saw `visitor` step in or out;
     * release_real: the real part of `entity` is going (the entity is made
     *   a ghost, destroyed or freed): what lives above the cell (its
     *   witness, its controllers) goes first;
     * entity_freed: `entity` is being freed: whatever still refers to it
     *   (the witnesses that have it in view) forgets it. */
    void (*on_trap)(void *host, cell_entity *owner, uint32_t tag, cell_entity *visitor, bool entered);
    void (*release_real)(void *host, cell *c, cell_entity *entity);
    void (*entity_freed)(void *host, cell_entity *entity);
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
    /* The entities something happened to since the last tick's end: moved,
     * a property written, created, destroyed, a broadcast queued,
     * teleported. Each once (cell_entity.listed). A real whose haunts are
     * still to be worked out, whose teleport waits, whose backup is due,
     * or that is outside the region stays on it from tick to tick
     * (cell_end_tick). The tick's passes over what changed -- pack, the
     * witnesses' notices, haunts, offloads, due backups, the end of the
     * tick -- walk this, not every entity: an idle entity costs them
     * nothing. A new layout makes haunts and offloads look at every real
     * once. */
    cell_entity **changed;
    size_t changed_count, changed_capacity;
    /* The reals with a witness, in no order (cell_real.witnessed_index):
     * the tick's witness pass walks these, not every entity. */
    cell_entity **witnessed;
    size_t witnessed_count, witnessed_capacity;
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
    size_t snapshot_cursor; /* where the backups' round goes on (cell_snapshot.c) */
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
 * audience that receives something of the change (replication.h) and marks
 * it packed. The witnesses hear of it next (witness_notify_changes). */
void cell_pack(cell *c);
void cell_end_tick(cell *c);
/* The entity id behind a coord id, valid for ids the coordinate system has
 * reported, even after the entity left. */
uint64_t cell_entity_id_of(const cell *c, uint32_t coord_id);
/* Whether (x, z) lies in the cell's region grown by `margin`. */
bool cell_region_holds(const cell *c, double x, double z, double margin);
/* Whether a position lies inside the space's bounds (and is finite). */
bool cell_in_bounds(const cell *c, float x, float y, float z);
/* Adds a trap of `shape` and `radius` (coord.h, "Round shapes") with the
 * game's `tag` to a real, named `controller_id` among its controllers; its
 * members start as `members` (ids, after a move between cellapps; NULL:
 * empty): they enter no more, and leave at the next flush if they are not
 * inside. Returns 0, or -1 for a bad radius or shape. */
int cell_add_trap(cell *c, cell_entity *entity, uint32_t controller_id, uint32_t tag, coord_shape shape, float radius,
                  const uint64_t *members, size_t member_count);
/* The entities of the cell (reals and ghosts, not `around` itself) inside
 * `shape` of `radius` around `around`, by the rule its traps apply: up to
 * `max` ids in `out`; returns how many there are (0 for a bad radius or
 * shape). */
size_t cell_query_range(cell *c, const cell_entity *around, coord_shape shape, float radius, uint64_t *out, size_t max);
/* Notes that `other_id` entered (or left) the view of `owner_id`'s
 * witness, for the game's view hooks after the witnesses' pass. */
void cell_note_view(cell *c, uint64_t owner_id, uint64_t other_id, bool entered);
/* Marks a real for destruction at the end of the tick (idempotent); it
 * stays in the cell and resolves until cellapp_tick reaps it. */
void cell_doom(cell *c, cell_entity *entity);
/* Removes the trap named `controller_id`. Returns 0, or -1 if it has none. */
int cell_remove_trap(cell *c, cell_entity *entity, uint32_t controller_id);
/* Puts `entity` on its cell's list of what changed this tick (once). The
 * cell does it for a move, a property write, a creation, a destruction
 * and a broadcast; code that sets another per-tick flag the end of the
 * tick resets (cell_real.teleported, .space_changed) calls it too. */
void cell_note_changed(cell *c, cell_entity *entity);

/* Keeps cell.witnessed: `entity`, a real of `c`, has just been given a
 * witness, or is about to lose it (witness.c calls these). */
void cell_witnessed_add(cell *c, cell_entity *entity);
void cell_witnessed_remove(cell *c, cell_entity *entity);

/* Adds a property-free client call of `entity` for its haunts to relay. */
void cell_queue_broadcast(cell_entity *entity, uint32_t method_id, const uint8_t *args, size_t length);
/* The same for a game event fired to the viewers of the real. */
void cell_queue_broadcast_event(cell_entity *entity, uint32_t event_id, const uint8_t *args, size_t length);
/* Forgets this tick's broadcast calls and events (sent, or nobody to send to). */
void cell_clear_broadcasts(cell_entity *entity);

#endif
