/* controller.h -- an entity's controllers (seed 004): what moves a real on
 * its own, tick by tick, and the ids that name them.
 *
 * A real has at most one movement chain: a move controller (to a point,
 * to an entity, or along a path of points, which is what a navigate is:
 * a multi-segment move on the same controller) and a turn controller.
 * Starting any move or turn stops the chain first. Stopping the chain
 * (controller_stop, the game's cancelController("Movement")) ends both;
 * cancelling by id ends the whole chain when the id is the move's or the
 * turn's, and only that controller otherwise (a trap: its ids come from
 * the same counter).
 *
 * The chain is part of the entity's cell state: controller_save and
 * controller_restore carry it exactly (destination, path and the point
 * reached on it, target, speed, ids, user data) when the entity moves to
 * another cellapp, where it goes on from the next tick.
 *
 * Each tick (controller_tick, after timers and messages, before the
 * flush) every real with a chain advances by speed x the tick's length.
 * The game hears of it through the event callback: moved (each tick a
 * move moved it), arrived (a move reached its destination, a turn its
 * yaw: the controller is over), failed (the target is gone, the next step
 * leaves the space: the chain is stopped). A callback may start, stop or
 * cancel controllers of any entity, and destroy entities.
 */
#ifndef TESSERA_CONTROLLER_H
#define TESSERA_CONTROLLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cluster.pb-c.h"

struct cell;
struct cell_entity;

typedef enum controller_move_kind {
    CONTROLLER_MOVE_NONE = 0,
    CONTROLLER_MOVE_POINT = 1,
    CONTROLLER_MOVE_ENTITY = 2,
    CONTROLLER_MOVE_PATH = 3,
} controller_move_kind;

/* What an entity's chain holds (a member of cell_entity). */
typedef struct controller_chain {
    uint32_t next_id; /* the last id given out (traps' included) */
    bool listed;      /* in its cell's list of entities with a chain */
    struct controller_move {
        uint32_t id; /* 0: no move */
        controller_move_kind kind;
        float destination[3]; /* POINT; PATH: the last point */
        uint64_t target_id;   /* ENTITY */
        float speed;          /* metres a second */
        float distance;       /* arrives this close to the destination */
        bool face;            /* turns to face where it goes */
        uint64_t user_data;
        float *path; /* PATH: path_count points, x y z each */
        uint32_t path_count, path_next;
    } move;
    struct controller_turn {
        uint32_t id; /* 0: no turn */
        float yaw;   /* radians */
        float speed; /* radians a second */
        uint64_t user_data;
    } turn;
} controller_chain;

typedef enum controller_event {
    CONTROLLER_MOVED,
    CONTROLLER_ARRIVED,
    CONTROLLER_FAILED,
} controller_event;

/* What the tick tells: `entity` (a real), which controller, its user data,
 * and for FAILED why. */
typedef void (*controller_event_callback)(struct cell *c, struct cell_entity *entity, controller_event event,
                                          uint32_t controller_id, uint64_t user_data, const char *reason,
                                          void *context);

/* A new controller id of `entity` (> 0), for traps and the chain. */
uint32_t controller_new_id(struct cell_entity *entity);

/* Starts a move of real `entity` (the chain stopped first): to a point,
 * to within `distance` of an entity (real or ghost in the same cell;
 * followed as it moves), or along `count` points (x y z each; copied).
 * `speed` in metres a second (> 0), `distance` >= 0. Returns the move's
 * id, or 0 (nothing started) for a ghost, a bad number, an empty path or
 * a point outside the space. */
uint32_t controller_move_to_point(struct cell *c, struct cell_entity *entity, const float destination[3], float speed,
                                  float distance, bool face, uint64_t user_data);
uint32_t controller_move_to_entity(struct cell *c, struct cell_entity *entity, uint64_t target_id, float speed,
                                   float distance, bool face, uint64_t user_data);
uint32_t controller_follow_path(struct cell *c, struct cell_entity *entity, const float *points, size_t count,
                                float speed, float distance, bool face, uint64_t user_data);
/* Starts a turn to `yaw` at `speed` radians a second (the chain stopped
 * first). Returns its id, or 0. */
uint32_t controller_turn_to(struct cell *c, struct cell_entity *entity, float yaw, float speed, uint64_t user_data);

/* Stops the whole chain (move and turn); no event fires. */
void controller_stop(struct cell_entity *entity);
/* Cancels controller `id`: the chain if it is the move's or the turn's, a
 * trap if it is a trap's. Returns 0, or -1 if the entity has no such
 * controller. */
int controller_cancel(struct cell *c, struct cell_entity *entity, uint32_t id);
/* Whether the entity has a move (or turn) going. */
bool controller_moving(const struct cell_entity *entity);

/* Advances every chain of the cell by `seconds`, telling `callback`. */
void controller_tick(struct cell *c, double seconds, controller_event_callback callback, void *context);

/* The chain into `out` (allocated; NULL when the entity has none and
 * no ids given out), and back. Free with controller_saved_free. */
Tessera__Cluster__ControllerState *controller_save(const struct cell_entity *entity);
void controller_saved_free(Tessera__Cluster__ControllerState *state);
/* Restores a saved chain onto real `entity` of cell `c`. A malformed one
 * (a path of a length not a multiple of 3) restores no move (logged). */
void controller_restore(struct cell *c, struct cell_entity *entity, const Tessera__Cluster__ControllerState *state);
/* Frees what the chain holds (the entity is going, or becomes a ghost). */
void controller_release(struct cell_entity *entity);

#endif
