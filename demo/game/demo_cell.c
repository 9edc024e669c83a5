/* demo_cell.c -- the cell rules of the demo game (demo/entities), the
 * cellapp's half of the demo module: with demo_base.c and demo.c, what a
 * studio copies to start its own. It includes nothing of the engine but
 * <tessera/game.h>, and keeps nothing between calls but
 * what the engine stores for it (properties, timers, traps, the per-entity
 * data below).
 *
 *   Avatar  walking raises `level` (one per 50 m) and with it `equipment`
 *           (near-only); each move restores a point of `mana` (own client
 *           only). castSpell(spell_id, target), exposed, costs 5 mana,
 *           records the spell in `buffs` (own client only) and
 *           `secret_note` (cell only), and calls target.takeDamage -- but
 *           only on a target the caster's client can see: a client names
 *           entities by id, and ids are sequential, so without the check
 *           anyone could hit anything anywhere. A hit is a user message,
 *           spell_hit(caster, target, spell_id, amount), to the caster's
 *           client and a player target's.
 *           Every half second a heartbeat timer counts in `heartbeats`
 *           (cell only); `born_ms` is when it started. ping(n), exposed,
 *           and the base's relayPing(n) count numbered calls: `pings`,
 *           the last `ping_last`, and `ping_disorder` each one that is not
 *           ping_last + 1 (a call lost, repeated or out of order).
 *           teleport(space, x, y, z), exposed (a GM command of the demo:
 *           a real game would keep it to its own code), moves the avatar
 *           there, in this space (empty name) or another.
 *   events  every cellapp listens for player_joined (fired by the base
 *           to everyone) and counts the players it heard of.
 *   Npc     stationary guards, `npc_count` of them (a game setting) per
 *           cellapp in the default space's spawn disc. Each has a trap of
 *           `npc_trap_radius`: every avatar stepping in counts as a
 *           visitor, changes `mood` (other clients, medium detail),
 *           `level` and `scale` (everyone), and is greeted with a call of
 *           its base, Avatar.poked(from). The guard remembers its last
 *           visitor and how many it greeted in its per-entity data, which
 *           travels with it between cellapps.
 *           With `npc_patrol_speed` above 0 (a game setting; 0 by
 *           default, so that the world stands still for the tests that
 *           compare views) a guard patrols: it navigates (a path on the
 *           space's navigation mesh, around the map's walls) to random
 *           points within `npc_patrol_radius` of its post, one after the
 *           other; in a space without a map it walks straight there.
 *           With `npc_chase_speed` above 0 it chases, with moveToEntity,
 *           an avatar that steps into its trap, until it leaves the trap
 *           or is caught (within 2 m), then walks its patrol again. Its
 *           post and its quarry are in its per-entity data; its move is
 *           the engine's, and goes on across cellapps.
 *   both    takeDamage(amount, attacker), not exposed: `health` drops (and
 *           resets to 100 at 0), and onDamage(amount) goes to every client
 *           that sees the entity.
 *
 * Nothing a client sees changes on a timer: when the players stand still
 * and stop casting, the world's visible state stops changing, which lets
 * the integration tests compare what each client holds with what the cells
 * hold. (The heartbeat changes only a cell-private property.)
 *
 * A rule whose property or method the definitions lack is off (logged at
 * start-up).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "demo.h"

enum { DEMO_TRAP_VISITORS = 1 };
enum { DEMO_TIMER_HEARTBEAT = 1 };
/* What a guard's move is for (its user data). */
enum { DEMO_MOVE_PATROL = 1, DEMO_MOVE_CHASE = 2 };
#define DEMO_CATCH_DISTANCE 2.0f
/* Half a second: often enough for the timer test to see dozens of firings
 * across offloads, rare enough to cost nothing. */
#define DEMO_HEARTBEAT_MS 500

/* A guard's own data: the engine allocates it, and saves it by the field
 * table when the guard moves to another cellapp. */
typedef struct demo_npc {
    tessera_handle last_visitor;
    uint32_t greeted;
    float post[3];          /* where it was spawned: its patrol's centre */
    tessera_handle chasing; /* the avatar it chases (NONE: patrolling) */
} demo_npc;

static const tessera_field demo_npc_fields[] = {
    TESSERA_FIELD(demo_npc, last_visitor, TESSERA_FIELD_HANDLE),
    TESSERA_FIELD(demo_npc, greeted, TESSERA_FIELD_UINT32),
    TESSERA_FIELD(demo_npc, post, TESSERA_FIELD_VECTOR3),
    TESSERA_FIELD(demo_npc, chasing, TESSERA_FIELD_HANDLE),
};

/* The game's state: classes and property ids, looked up once. */
typedef struct demo_game {
    tessera_class *avatar, *npc;
    int avatar_level, avatar_health, avatar_mana, avatar_equipment, avatar_buffs, avatar_secret_note;
    int avatar_walked, avatar_born, avatar_heartbeats, avatar_pings, avatar_ping_last, avatar_ping_disorder;
    uint32_t weapon_index, armor_index; /* within equipment */
    int npc_name, npc_level, npc_health, npc_mood, npc_scale, npc_visitors;
    int64_t npc_count, npcs_spawned;
    float npc_trap_radius;
    float patrol_speed, patrol_radius, chase_speed;
    demo_world *world;         /* the map's working parts (demo_world.c) */
    uint64_t players_heard;    /* player_joined events this cellapp heard */
    uint64_t avatars_restored; /* Avatars brought back here after their cellapp died */
} demo_game;

const demo_world *demo_world_state(const void *game) { return ((const demo_game *)game)->world; }

static int demo_property(tessera_cellapp *app, const tessera_cell_api *api, const tessera_class *cls,
                         const char *class_name, const char *name) {
    int id = api->property_id(cls, name);
    if (id < 0)
        api->log(app, TESSERA_LOG_WARN, NULL, "demo: %s has no property '%s': its rule is off", class_name, name);
    return id;
}

static uint64_t demo_get_uint(const tessera_cell_context *ctx, const tessera_entity *e, int property) {
    uint64_t value = 0;
    if (property >= 0) ctx->api->get_uint(e, property, 0, &value);
    return value;
}

static int64_t demo_get_int(const tessera_cell_context *ctx, const tessera_entity *e, int property) {
    int64_t value = 0;
    if (property >= 0) ctx->api->get_int(e, property, 0, &value);
    return value;
}

/* Setters refuse values outside the declared range, and say so in the
 * log; the rules below stay inside it. */
static void demo_set_uint(const tessera_cell_context *ctx, tessera_entity *e, int property, uint32_t index,
                          uint64_t value) {
    if (property >= 0) ctx->api->set_uint(e, property, index, value);
}

/* ---- NPCs -------------------------------------------------------------------- */

/* The next leg of a guard's patrol: a random point near its post. */
static void demo_npc_patrol(const tessera_cell_context *ctx, tessera_entity *npc, demo_npc *self) {
    demo_game *g = ctx->game;
    const tessera_cell_api *api = ctx->api;
    self->chasing = TESSERA_HANDLE_NONE;
    if (g->patrol_speed <= 0) return;
    /* A few tries: a point may lie in a wall, or in a courtyard no path
     * reaches. */
    for (int attempt = 0; attempt < 4; attempt++) {
        double angle = api->random_unit(ctx->app) * 2.0 * M_PI;
        double distance = sqrt(api->random_unit(ctx->app)) * g->patrol_radius;
        float point[3] = {(float)(self->post[0] + distance * cos(angle)), self->post[1],
                          (float)(self->post[2] + distance * sin(angle))};
        char why[160];
        if (api->navigate(npc, point, g->patrol_speed, 0, true, DEMO_MOVE_PATROL, why, sizeof why)) return;
        /* A space without a map: straight there. */
        if (strstr(why, "no navigation mesh") &&
            api->move_to_point(npc, point, g->patrol_speed, 0, true, DEMO_MOVE_PATROL))
            return;
    }
    /* Nowhere to go from here: back to the post itself, straight. */
    api->move_to_point(npc, self->post, g->patrol_speed, 0, true, DEMO_MOVE_PATROL);
}

static void demo_npc_arrived(const tessera_cell_context *ctx, tessera_entity *npc, void *data, uint32_t controller_id,
                             uint64_t user_data) {
    (void)controller_id, (void)user_data;
    /* A patrol leg done, or its quarry caught: on with the patrol. */
    demo_npc_patrol(ctx, npc, data);
}

static void demo_npc_move_failed(const tessera_cell_context *ctx, tessera_entity *npc, void *data,
                                 uint32_t controller_id, uint64_t user_data, const char *reason) {
    (void)controller_id, (void)user_data, (void)reason;
    demo_npc_patrol(ctx, npc, data); /* its quarry went away */
}

static void demo_npc_left_trap(const tessera_cell_context *ctx, tessera_entity *npc, void *data, uint32_t tag,
                               tessera_entity *visitor) {
    demo_npc *self = data;
    if (tag == DEMO_TRAP_VISITORS && self->chasing && ctx->api->handle(visitor) == self->chasing)
        demo_npc_patrol(ctx, npc, self); /* it got away */
}

static void demo_npc_entered_trap(const tessera_cell_context *ctx, tessera_entity *npc, void *data, uint32_t tag,
                                  tessera_entity *visitor) {
    demo_game *g = ctx->game;
    const tessera_cell_api *api = ctx->api;
    demo_npc *self = data;
    if (tag != DEMO_TRAP_VISITORS || api->class_of(visitor) != g->avatar) return;
    if (g->chase_speed > 0 && !self->chasing &&
        api->move_to_entity(npc, api->handle(visitor), g->chase_speed, DEMO_CATCH_DISTANCE, true, DEMO_MOVE_CHASE))
        self->chasing = api->handle(visitor);
    uint64_t visitors = demo_get_uint(ctx, npc, g->npc_visitors) + 1;
    demo_set_uint(ctx, npc, g->npc_visitors, 0, visitors > UINT32_MAX ? UINT32_MAX : visitors);
    demo_set_uint(ctx, npc, g->npc_mood, 0, visitors % 256);
    uint64_t level = 1 + visitors / 5;
    demo_set_uint(ctx, npc, g->npc_level, 0, level > 255 ? 255 : level);
    if (g->npc_scale >= 0) api->set_float(npc, g->npc_scale, 0, 0.5 + (double)(visitors % 151) * 0.01);
    /* The guard greets its visitor: a call of the visitor's base from this
     * cell (Avatar.poked(from), which tells its client onPoked). Only the
     * cellapp of the visitor's real greets, so a visit is greeted once. */
    if (!api->is_real(visitor)) return;
    self->last_visitor = api->handle(visitor);
    tessera_args *args = api->args_create(g->avatar, TESSERA_PART_BASE, "poked");
    if (!args) return;
    api->args->set_handle(args, 0, api->handle(npc));
    if (api->call_base(npc, api->handle(visitor), "Avatar", TESSERA_PART_BASE, "poked", args) == 0) self->greeted++;
    api->args->free(args);
}

/* Spawns the guards still owed in the default space's spawn disc, as ids
 * arrive from Redis and once the space has a cell here. */
static void demo_tick(const tessera_cell_context *ctx) {
    demo_game *g = ctx->game;
    const tessera_cell_api *api = ctx->api;
    if (!g->npc || g->npcs_spawned >= g->npc_count) return;
    const char *space = api->default_space(ctx->app);
    float centre_x, centre_z, radius;
    if (api->spawn_area(ctx->app, space, &centre_x, &centre_z, &radius) != 0) return;
    while (g->npcs_spawned < g->npc_count) {
        double angle = api->random_unit(ctx->app) * 2.0 * M_PI;
        double distance = sqrt(api->random_unit(ctx->app)) * radius;
        float x = (float)(centre_x + distance * cos(angle));
        float z = (float)(centre_z + distance * sin(angle));
        float yaw = (float)(api->random_unit(ctx->app) * 2.0 * M_PI - M_PI);
        /* Here, wherever the point is: one outside this cellapp's cell
         * moves to its own at the end of the tick. */
        if (api->spawn(ctx->app, "Npc", space, x, 0, z, yaw) == TESSERA_HANDLE_NONE) return; /* next tick */
        g->npcs_spawned++;
    }
}

static void demo_npc_created(const tessera_cell_context *ctx, tessera_entity *npc, void *data) {
    demo_game *g = ctx->game;
    const tessera_cell_api *api = ctx->api;
    demo_npc *self = data;
    api->position(npc, self->post, NULL);
    if (g->npc_name >= 0) {
        char name[32];
        snprintf(name, sizeof name, "Guard-%llu", (unsigned long long)api->handle(npc));
        api->set_string(npc, g->npc_name, 0, name, strlen(name));
    }
    api->add_trap(npc, DEMO_TRAP_VISITORS, g->npc_trap_radius);
    demo_npc_patrol(ctx, npc, self);
}

/* ---- avatars ------------------------------------------------------------------ */

static void demo_avatar_created(const tessera_cell_context *ctx, tessera_entity *avatar, void *data) {
    demo_game *g = ctx->game;
    (void)data;
    demo_set_uint(ctx, avatar, g->avatar_born, 0, ctx->api->wall_ms(ctx->app));
    if (g->avatar_heartbeats >= 0)
        ctx->api->add_timer(avatar, DEMO_HEARTBEAT_MS, DEMO_HEARTBEAT_MS, DEMO_TIMER_HEARTBEAT, 0);
}

static void demo_avatar_timer(const tessera_cell_context *ctx, tessera_entity *avatar, void *data, uint64_t timer_id,
                              uint32_t tag, uint64_t user_data) {
    demo_game *g = ctx->game;
    (void)data, (void)timer_id, (void)user_data;
    if (tag == DEMO_TIMER_HEARTBEAT)
        demo_set_uint(ctx, avatar, g->avatar_heartbeats, 0, demo_get_uint(ctx, avatar, g->avatar_heartbeats) + 1);
}

/* The Avatar's cellapp died and this one brought it back, as it was
 * state_age_ms ago: what it did since (walked, was hit) is gone. A game
 * would settle what it cannot lose here (a trade half done); the demo
 * counts, and says so now and then. */
static void demo_avatar_restored(const tessera_cell_context *ctx, tessera_entity *avatar, void *data,
                                 uint32_t state_age_ms, bool from_ghost) {
    demo_game *g = ctx->game;
    (void)data;
    g->avatars_restored++;
    if (g->avatars_restored == 1 || g->avatars_restored % 100 == 0)
        ctx->api->log(ctx->app, TESSERA_LOG_INFO, avatar,
                      "demo: restored from %s, %u ms old (%llu Avatars restored here)",
                      from_ghost ? "its ghost" : "its backup", state_age_ms, (unsigned long long)g->avatars_restored);
}

static void demo_avatar_moved(const tessera_cell_context *ctx, tessera_entity *avatar, void *data, double metres) {
    demo_game *g = ctx->game;
    const tessera_cell_api *api = ctx->api;
    (void)data;
    double walked = 0;
    if (g->avatar_walked >= 0) {
        api->get_float(avatar, g->avatar_walked, 0, &walked);
        walked += metres;
        api->set_float(avatar, g->avatar_walked, 0, walked);
    }
    uint64_t level = 1 + (uint64_t)(walked / 50.0);
    if (level > 255) level = 255;
    if (level != demo_get_uint(ctx, avatar, g->avatar_level)) {
        demo_set_uint(ctx, avatar, g->avatar_level, 0, level);
        if (g->avatar_equipment >= 0) {
            demo_set_uint(ctx, avatar, g->avatar_equipment, g->weapon_index, level * 10);
            demo_set_uint(ctx, avatar, g->avatar_equipment, g->armor_index, level * 5);
        }
    }
    uint64_t mana = demo_get_uint(ctx, avatar, g->avatar_mana);
    if (mana < 50) demo_set_uint(ctx, avatar, g->avatar_mana, 0, mana + 1);
}

static void demo_cast_spell(const tessera_cell_context *ctx, tessera_entity *caster, void *data, tessera_handle caller,
                            const tessera_args *args) {
    demo_game *g = ctx->game;
    const tessera_cell_api *api = ctx->api;
    (void)data;
    if (caller != api->handle(caster)) return; /* only the caster casts */
    uint64_t spell_id = 0;
    tessera_handle target_id = TESSERA_HANDLE_NONE;
    api->args->get_uint(args, 0, &spell_id);
    api->args->get_handle(args, 1, &target_id);
    tessera_entity *target = api->resolve(ctx->app, target_id);
    /* The reach rule: a target is one the caster's client can see. */
    if (target_id != TESSERA_HANDLE_NONE && (!target || !api->in_view(caster, target))) {
        api->log(ctx->app, TESSERA_LOG_INFO, caster, "castSpell on entity %llu refused: not in its view",
                 (unsigned long long)target_id);
        return;
    }
    uint64_t mana = demo_get_uint(ctx, caster, g->avatar_mana);
    if (mana < 5) return;
    demo_set_uint(ctx, caster, g->avatar_mana, 0, mana - 5);
    demo_set_uint(ctx, caster, g->avatar_buffs, (uint32_t)(spell_id % 8), spell_id);
    if (g->avatar_secret_note >= 0) {
        char note[64];
        snprintf(note, sizeof note, "spell %llu at tick %u", (unsigned long long)spell_id, api->tick(caster));
        api->set_string(caster, g->avatar_secret_note, 0, note, strlen(note));
    }
    /* Avatars and guards take damage; doors, plates and timers do not. */
    if (!target || target == caster || (api->class_of(target) != g->avatar && api->class_of(target) != g->npc)) return;
    tessera_args *damage = api->args_create(api->class_of(target), TESSERA_PART_CELL, "takeDamage");
    if (!damage) return;
    api->args->set_int(damage, 0, (int64_t)(spell_id % 20) + 1);
    api->args->set_handle(damage, 1, api->handle(caster));
    api->call_cell(caster, target, "takeDamage", damage);
    api->args->free(damage);
    /* A user message: the caster's client and the target's (if it is a
     * player) hear of the hit, wherever the target's real is. */
    tessera_args *hit = api->event_args_create(ctx->app, "spell_hit");
    if (!hit) return;
    api->args->set_handle(hit, 0, api->handle(caster));
    api->args->set_handle(hit, 1, target_id);
    api->args->set_uint(hit, 2, spell_id);
    api->args->set_int(hit, 3, (int64_t)(spell_id % 20) + 1);
    tessera_handle recipients[2] = {api->handle(caster), target_id};
    api->send_event(ctx->app, caster, "spell_hit", hit, recipients, api->class_of(target) == g->avatar ? 2 : 1);
    api->args->free(hit);
}

static void demo_take_damage(const tessera_cell_context *ctx, tessera_entity *entity, void *data, tessera_handle caller,
                             const tessera_args *args) {
    demo_game *g = ctx->game;
    const tessera_cell_api *api = ctx->api;
    (void)data, (void)caller;
    int64_t amount = 0;
    api->args->get_int(args, 0, &amount);
    int health = api->class_of(entity) == g->avatar ? g->avatar_health : g->npc_health;
    if (health >= 0) {
        int64_t now = demo_get_int(ctx, entity, health) - amount;
        api->set_int(entity, health, 0, now <= 0 ? 100 : now);
    }
    tessera_args *notice = api->args_create(api->class_of(entity), TESSERA_PART_CLIENT, "onDamage");
    if (!notice) return;
    api->args->set_int(notice, 0, amount);
    api->call_clients(entity, "onDamage", notice, true);
    api->args->free(notice);
}

/* A numbered call: from the avatar's own client (through its base) or its
 * base; each should be the last plus one. */
static void demo_ping(const tessera_cell_context *ctx, tessera_entity *avatar, void *data, tessera_handle caller,
                      const tessera_args *args) {
    demo_game *g = ctx->game;
    (void)data;
    if (caller != ctx->api->handle(avatar)) return;
    uint64_t n = 0;
    ctx->api->args->get_uint(args, 0, &n);
    uint64_t last = demo_get_uint(ctx, avatar, g->avatar_ping_last);
    if (n != last + 1) {
        demo_set_uint(ctx, avatar, g->avatar_ping_disorder, 0, demo_get_uint(ctx, avatar, g->avatar_ping_disorder) + 1);
        ctx->api->log(ctx->app, TESSERA_LOG_WARN, avatar, "ping %llu after %llu", (unsigned long long)n,
                      (unsigned long long)last);
    }
    demo_set_uint(ctx, avatar, g->avatar_ping_last, 0, n);
    demo_set_uint(ctx, avatar, g->avatar_pings, 0, demo_get_uint(ctx, avatar, g->avatar_pings) + 1);
}

static void demo_teleport(const tessera_cell_context *ctx, tessera_entity *avatar, void *data, tessera_handle caller,
                          const tessera_args *args) {
    (void)data;
    if (caller != ctx->api->handle(avatar)) return;
    const char *space = "";
    double x = 0, y = 0, z = 0;
    ctx->api->args->get_string(args, 0, &space, NULL);
    ctx->api->args->get_float(args, 1, &x);
    ctx->api->args->get_float(args, 2, &y);
    ctx->api->args->get_float(args, 3, &z);
    ctx->api->teleport(avatar, space, (float)x, (float)y, (float)z);
}

/* A server listener: the cellapp hears of every player who joins the
 * cluster, wherever they log in (a game would greet, or count, here). */
static void demo_heard_player_joined(const tessera_cell_context *ctx, const char *event, tessera_handle source,
                                     const tessera_args *fields, void *user_data) {
    demo_game *g = user_data;
    (void)event, (void)source;
    const char *name = ""; /* the display name: never the account */
    ctx->api->args->get_string(fields, 1, &name, NULL);
    g->players_heard++;
    if (g->players_heard == 1 || g->players_heard % 100 == 0)
        ctx->api->log(ctx->app, TESSERA_LOG_INFO, NULL, "demo: %s joined (%llu players heard of so far)", name,
                      (unsigned long long)g->players_heard);
}

/* ---- registration -------------------------------------------------------------- */

static int demo_register_avatar(tessera_cellapp *app, const tessera_cell_api *api, demo_game *g) {
    tessera_cell_hooks hooks = {
        .created = demo_avatar_created,
        .timer = demo_avatar_timer,
        .moved = demo_avatar_moved,
        .restored = demo_avatar_restored,
    };
    g->avatar = api->register_class(app, "Avatar", &hooks, 0, NULL, 0);
    if (!g->avatar) return -1;
    const char *name = "Avatar";
    g->avatar_level = demo_property(app, api, g->avatar, name, "level");
    g->avatar_health = demo_property(app, api, g->avatar, name, "health");
    g->avatar_mana = demo_property(app, api, g->avatar, name, "mana");
    g->avatar_equipment = demo_property(app, api, g->avatar, name, "equipment");
    g->avatar_buffs = demo_property(app, api, g->avatar, name, "buffs");
    g->avatar_secret_note = demo_property(app, api, g->avatar, name, "secret_note");
    g->avatar_walked = demo_property(app, api, g->avatar, name, "walked");
    g->avatar_born = demo_property(app, api, g->avatar, name, "born_ms");
    g->avatar_heartbeats = demo_property(app, api, g->avatar, name, "heartbeats");
    g->avatar_pings = demo_property(app, api, g->avatar, name, "pings");
    g->avatar_ping_last = demo_property(app, api, g->avatar, name, "ping_last");
    g->avatar_ping_disorder = demo_property(app, api, g->avatar, name, "ping_disorder");
    if (g->avatar_equipment >= 0 &&
        (api->property_index(g->avatar, g->avatar_equipment, "weapon", &g->weapon_index) != 0 ||
         api->property_index(g->avatar, g->avatar_equipment, "armor", &g->armor_index) != 0)) {
        api->log(app, TESSERA_LOG_WARN, NULL, "demo: Avatar.equipment has no weapon/armor fields: its rule is off");
        g->avatar_equipment = -1;
    }
    /* Every body the definitions declare; a missing method is logged by
     * the engine and its rule is off. */
    api->register_method(app, g->avatar, "castSpell", demo_cast_spell);
    api->register_method(app, g->avatar, "takeDamage", demo_take_damage);
    api->register_method(app, g->avatar, "ping", demo_ping);
    api->register_method(app, g->avatar, "teleport", demo_teleport);
    return 0;
}

static int demo_register_npc(tessera_cellapp *app, const tessera_cell_api *api, demo_game *g) {
    tessera_cell_hooks hooks = {
        .created = demo_npc_created,
        .entered_trap = demo_npc_entered_trap,
        .left_trap = demo_npc_left_trap,
        .controller_arrived = demo_npc_arrived,
        .controller_failed = demo_npc_move_failed,
    };
    g->npc = api->register_class(app, "Npc", &hooks, sizeof(demo_npc), demo_npc_fields,
                                 sizeof demo_npc_fields / sizeof demo_npc_fields[0]);
    if (!g->npc) return -1;
    const char *name = "Npc";
    g->npc_name = demo_property(app, api, g->npc, name, "name");
    g->npc_level = demo_property(app, api, g->npc, name, "level");
    g->npc_health = demo_property(app, api, g->npc, name, "health");
    g->npc_mood = demo_property(app, api, g->npc, name, "mood");
    g->npc_scale = demo_property(app, api, g->npc, name, "scale");
    g->npc_visitors = demo_property(app, api, g->npc, name, "visitors");
    api->register_method(app, g->npc, "takeDamage", demo_take_damage);
    return 0;
}

int demo_cell_init(tessera_cellapp *app, const tessera_cell_api *api, void **game) {
    demo_game *g = calloc(1, sizeof *g);
    if (!g) return -1;
    *game = g;
    g->avatar_level = g->npc_name = -1;
    if (demo_register_avatar(app, api, g) != 0 || demo_register_npc(app, api, g) != 0) return -1;
    g->world = demo_world_register(app, api, g->avatar);
    if (!g->world) return -1;
    g->npc_count = (int64_t)api->setting_number(app, "npc_count", 20);
    g->npc_trap_radius = (float)api->setting_number(app, "npc_trap_radius", 8);
    g->patrol_speed = (float)api->setting_number(app, "npc_patrol_speed", 0);
    g->patrol_radius = (float)api->setting_number(app, "npc_patrol_radius", 15);
    g->chase_speed = (float)api->setting_number(app, "npc_chase_speed", 0);
    if (g->npc_count < 0 || g->npc_count > 1000000 || !(g->npc_trap_radius > 0) || !(g->patrol_speed >= 0) ||
        !(g->patrol_radius >= 0) || !(g->chase_speed >= 0)) {
        api->log(app, TESSERA_LOG_WARN, NULL,
                 "demo: npc_count must be 0..1000000, npc_trap_radius above 0, and the patrol and chase settings 0 "
                 "or more");
        return -1;
    }
    /* The base fires player_joined to everyone: every cellapp hears it. */
    api->listen_event(app, "player_joined", demo_heard_player_joined, g);
    api->set_tick(app, demo_tick);
    return 0;
}

void demo_cell_shutdown(tessera_cellapp *app, void *game) {
    (void)app;
    if (game) free(((demo_game *)game)->world);
    free(game);
}
