/* controller.c -- owns every real's movement chain (controller.h): starting,
 * stopping and cancelling moves and turns, advancing them each tick, and
 * carrying them in an entity's saved state. The cell keeps the ids of its
 * entities with a chain (cell.chained), so a tick costs nothing for the
 * entities that have none. */
#include "controller.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cell.h"
#include "log.h"

uint32_t controller_new_id(cell_entity *entity) {
    controller_chain *chain = &entity->real->controllers;
    if (++chain->next_id == 0) chain->next_id = 1; /* 2^32 controllers later: ids start over, never 0 */
    return chain->next_id;
}

bool controller_moving(const cell_entity *entity) {
    return entity->real->controllers.move.id != 0 || entity->real->controllers.turn.id != 0;
}

void controller_release(cell_entity *entity) {
    free(entity->real->controllers.move.path);
    memset(&entity->real->controllers.move, 0, sizeof entity->real->controllers.move);
    memset(&entity->real->controllers.turn, 0, sizeof entity->real->controllers.turn);
}

void controller_stop(cell_entity *entity) { controller_release(entity); }

/* Puts the entity on its cell's list of entities with a chain. */
static void controller_list(cell *c, cell_entity *entity) {
    if (entity->real->controllers.listed) return;
    if (c->chained_count == c->chained_capacity) {
        c->chained_capacity = c->chained_capacity ? c->chained_capacity * 2 : 16;
        c->chained = xrealloc(c->chained, c->chained_capacity * sizeof *c->chained);
    }
    c->chained[c->chained_count++] = entity->id;
    entity->real->controllers.listed = true;
}

static bool controller_startable(const cell *c, const cell_entity *entity, float speed, float distance) {
    (void)c;
    return entity->kind == CELL_ENTITY_REAL && !entity->destroyed && isfinite(speed) && speed > 0 &&
           isfinite(distance) && distance >= 0;
}

static uint32_t controller_begin_move(cell *c, cell_entity *entity, controller_move_kind kind, float speed,
                                      float distance, bool face, uint64_t user_data) {
    controller_stop(entity);
    struct controller_move *move = &entity->real->controllers.move;
    move->id = controller_new_id(entity);
    move->kind = kind;
    move->speed = speed;
    move->distance = distance;
    move->face = face;
    move->user_data = user_data;
    controller_list(c, entity);
    return move->id;
}

uint32_t controller_move_to_point(cell *c, cell_entity *entity, const float destination[3], float speed, float distance,
                                  bool face, uint64_t user_data) {
    if (!controller_startable(c, entity, speed, distance) || !destination ||
        !cell_in_bounds(c, destination[0], destination[1], destination[2]))
        return 0;
    uint32_t id = controller_begin_move(c, entity, CONTROLLER_MOVE_POINT, speed, distance, face, user_data);
    memcpy(entity->real->controllers.move.destination, destination, sizeof entity->real->controllers.move.destination);
    return id;
}

uint32_t controller_move_to_entity(cell *c, cell_entity *entity, uint64_t target_id, float speed, float distance,
                                   bool face, uint64_t user_data) {
    if (!controller_startable(c, entity, speed, distance) || target_id == 0 || target_id == entity->id ||
        !cell_find(c, target_id))
        return 0;
    uint32_t id = controller_begin_move(c, entity, CONTROLLER_MOVE_ENTITY, speed, distance, face, user_data);
    entity->real->controllers.move.target_id = target_id;
    return id;
}

uint32_t controller_follow_path(cell *c, cell_entity *entity, const float *points, size_t count, float speed,
                                float distance, bool face, uint64_t user_data) {
    if (!controller_startable(c, entity, speed, distance) || !points || count == 0 || count > UINT32_MAX / 3) return 0;
    for (size_t i = 0; i < count; i++)
        if (!cell_in_bounds(c, points[3 * i], points[3 * i + 1], points[3 * i + 2])) return 0;
    uint32_t id = controller_begin_move(c, entity, CONTROLLER_MOVE_PATH, speed, distance, face, user_data);
    struct controller_move *move = &entity->real->controllers.move;
    move->path = xmalloc(count * 3 * sizeof *move->path);
    memcpy(move->path, points, count * 3 * sizeof *move->path);
    move->path_count = (uint32_t)count;
    move->path_next = 0;
    memcpy(move->destination, &points[3 * (count - 1)], sizeof move->destination);
    return id;
}

uint32_t controller_turn_to(cell *c, cell_entity *entity, float yaw, float speed, uint64_t user_data) {
    if (!controller_startable(c, entity, speed, 0) || !isfinite(yaw)) return 0;
    controller_stop(entity);
    struct controller_turn *turn = &entity->real->controllers.turn;
    turn->id = controller_new_id(entity);
    turn->yaw = remainderf(yaw, 2.0f * (float)M_PI);
    turn->speed = speed;
    turn->user_data = user_data;
    controller_list(c, entity);
    return turn->id;
}

int controller_cancel(cell *c, cell_entity *entity, uint32_t id) {
    if (id == 0) return -1;
    const controller_chain *chain = &entity->real->controllers;
    if (id == chain->move.id || id == chain->turn.id) {
        controller_stop(entity);
        return 0;
    }
    return cell_remove_trap(c, entity, id);
}

/* ---- the tick ------------------------------------------------------------------- */

/* Where the move heads now: its point, its target's position, or the
 * path's next point. False when the target is gone. */
static bool controller_aim(const cell *c, const struct controller_move *move, float aim[3]) {
    switch (move->kind) {
        case CONTROLLER_MOVE_POINT:
            memcpy(aim, move->destination, 3 * sizeof *aim);
            return true;
        case CONTROLLER_MOVE_PATH:
            memcpy(aim, &move->path[(size_t)3 * move->path_next], 3 * sizeof *aim);
            return true;
        case CONTROLLER_MOVE_ENTITY: {
            const cell_entity *target = cell_find(c, move->target_id);
            if (!target) return false;
            aim[0] = target->x, aim[1] = target->y, aim[2] = target->z;
            return true;
        }
        case CONTROLLER_MOVE_NONE:
            break;
    }
    return false;
}

/* One tick of a move. Returns the event it ends with, or MOVED. */
static controller_event controller_step_move(cell *c, cell_entity *entity, double seconds, const char **reason) {
    struct controller_move *move = &entity->real->controllers.move;
    double budget = move->speed * seconds;
    float x = entity->x, y = entity->y, z = entity->z, yaw = entity->yaw;
    for (;;) {
        float aim[3];
        if (!controller_aim(c, move, aim)) {
            *reason = "its target is gone";
            return CONTROLLER_FAILED;
        }
        bool last = move->kind != CONTROLLER_MOVE_PATH || move->path_next + 1 >= move->path_count;
        double dx = aim[0] - x, dy = c->three_d ? aim[1] - y : 0.0, dz = aim[2] - z;
        double gap = sqrt(dx * dx + dy * dy + dz * dz);
        double stop = last ? move->distance : 0.0;
        if (move->face && (dx != 0 || dz != 0)) yaw = (float)atan2(dx, dz);
        if (gap - stop <= budget) {
            /* Reaches this point (or its stopping distance) this tick. */
            double t = gap > 0 ? (gap - stop) / gap : 0;
            if (t > 0) {
                x += (float)(dx * t), z += (float)(dz * t);
                if (c->three_d)
                    y += (float)(dy * t);
                else
                    y = aim[1];
            }
            budget -= gap - stop > 0 ? gap - stop : 0;
            if (last) {
                cell_move(c, entity, x, y, z, yaw);
                return CONTROLLER_ARRIVED;
            }
            move->path_next++;
            continue;
        }
        double t = budget / gap;
        x += (float)(dx * t), z += (float)(dz * t);
        if (c->three_d) y += (float)(dy * t);
        break;
    }
    if (!cell_in_bounds(c, x, y, z)) {
        *reason = "its next step leaves the space";
        return CONTROLLER_FAILED;
    }
    cell_move(c, entity, x, y, z, yaw);
    return CONTROLLER_MOVED;
}

/* One tick of a turn: true once it faces its yaw. */
static bool controller_step_turn(cell *c, cell_entity *entity, double seconds) {
    struct controller_turn *turn = &entity->real->controllers.turn;
    float delta = remainderf(turn->yaw - entity->yaw, 2.0f * (float)M_PI);
    float step = (float)(turn->speed * seconds);
    bool done = fabsf(delta) <= step;
    float yaw = done ? turn->yaw : entity->yaw + (delta > 0 ? step : -step);
    cell_move(c, entity, entity->x, entity->y, entity->z, remainderf(yaw, 2.0f * (float)M_PI));
    return done;
}

void controller_tick(cell *c, double seconds, controller_event_callback callback, void *context) {
    if (c->chained_count == 0) return;
    /* The list as it stands: callbacks may start chains (appended, run from
     * the next tick) or end them. */
    size_t count = c->chained_count, kept = 0;
    for (size_t i = 0; i < count; i++) {
        uint64_t id = c->chained[i];
        cell_entity *entity = cell_find(c, id);
        if (!entity || entity->kind != CELL_ENTITY_REAL || !controller_moving(entity)) {
            if (entity && entity->real) entity->real->controllers.listed = false;
            continue;
        }
        c->chained[kept++] = id;
        controller_chain *chain = &entity->real->controllers;
        if (chain->move.id) {
            const char *reason = NULL;
            uint32_t move_id = chain->move.id;
            uint64_t user_data = chain->move.user_data;
            controller_event event = controller_step_move(c, entity, seconds, &reason);
            /* The chain is over before the game hears: it may start another. */
            if (event != CONTROLLER_MOVED) controller_stop(entity);
            if (callback) callback(c, entity, event, move_id, user_data, reason, context);
        } else if (chain->turn.id) {
            uint32_t turn_id = chain->turn.id;
            uint64_t user_data = chain->turn.user_data;
            if (controller_step_turn(c, entity, seconds)) {
                controller_stop(entity);
                if (callback) callback(c, entity, CONTROLLER_ARRIVED, turn_id, user_data, NULL, context);
            }
        }
    }
    /* Appended by callbacks meanwhile: kept after the ones that stay. */
    if (c->chained_count > count)
        memmove(c->chained + kept, c->chained + count, (c->chained_count - count) * sizeof *c->chained);
    c->chained_count = kept + (c->chained_count - count);
}

/* ---- saved state -------------------------------------------------------------- */

Tessera__Cluster__ControllerState *controller_save(const cell_entity *entity) {
    const controller_chain *chain = &entity->real->controllers;
    if (chain->next_id == 0) return NULL;
    Tessera__Cluster__ControllerState *out = xmalloc(sizeof *out);
    tessera__cluster__controller_state__init(out);
    out->next_id = chain->next_id;
    if (chain->move.id) {
        const struct controller_move *move = &chain->move;
        Tessera__Cluster__ControllerMove *saved = xmalloc(sizeof *saved);
        tessera__cluster__controller_move__init(saved);
        saved->id = move->id;
        saved->kind = (uint32_t)move->kind;
        saved->destination = xmalloc(3 * sizeof *saved->destination);
        memcpy(saved->destination, move->destination, 3 * sizeof *saved->destination);
        saved->n_destination = 3;
        saved->target_id = move->target_id;
        saved->speed = move->speed;
        saved->distance = move->distance;
        saved->face = move->face;
        saved->user_data = move->user_data;
        if (move->path_count) {
            saved->n_path = (size_t)move->path_count * 3;
            saved->path = xmalloc(saved->n_path * sizeof *saved->path);
            memcpy(saved->path, move->path, saved->n_path * sizeof *saved->path);
        }
        saved->path_next = move->path_next;
        out->move = saved;
    }
    if (chain->turn.id) {
        Tessera__Cluster__ControllerTurn *saved = xmalloc(sizeof *saved);
        tessera__cluster__controller_turn__init(saved);
        saved->id = chain->turn.id;
        saved->yaw = chain->turn.yaw;
        saved->speed = chain->turn.speed;
        saved->user_data = chain->turn.user_data;
        out->turn = saved;
    }
    return out;
}

void controller_saved_free(Tessera__Cluster__ControllerState *state) {
    if (!state) return;
    if (state->move) {
        free(state->move->destination);
        free(state->move->path);
        free(state->move);
    }
    free(state->turn);
    free(state);
}

void controller_restore(cell *c, cell_entity *entity, const Tessera__Cluster__ControllerState *state) {
    controller_release(entity);
    if (!state) return;
    controller_chain *chain = &entity->real->controllers;
    chain->next_id = state->next_id;
    const Tessera__Cluster__ControllerMove *move = state->move;
    bool move_ok = move && move->id && move->n_destination == 3 && move->kind >= CONTROLLER_MOVE_POINT &&
                   move->kind <= CONTROLLER_MOVE_PATH && move->n_path % 3 == 0 &&
                   (move->kind != CONTROLLER_MOVE_PATH || (move->n_path > 0 && move->path_next < move->n_path / 3));
    if (move && !move_ok)
        log_warn("entity %" PRIu64 ": its saved move controller %u does not read: it stops", entity->id, move->id);
    if (move_ok) {
        struct controller_move *m = &chain->move;
        m->id = move->id;
        m->kind = (controller_move_kind)move->kind;
        memcpy(m->destination, move->destination, sizeof m->destination);
        m->target_id = move->target_id;
        m->speed = move->speed;
        m->distance = move->distance;
        m->face = move->face;
        m->user_data = move->user_data;
        if (move->n_path) {
            m->path = xmalloc(move->n_path * sizeof *m->path);
            memcpy(m->path, move->path, move->n_path * sizeof *m->path);
            m->path_count = (uint32_t)(move->n_path / 3);
            m->path_next = move->path_next;
        }
    }
    if (state->turn && state->turn->id) {
        chain->turn.id = state->turn->id;
        chain->turn.yaw = state->turn->yaw;
        chain->turn.speed = state->turn->speed;
        chain->turn.user_data = state->turn->user_data;
    }
    if (controller_moving(entity)) controller_list(c, entity);
}
