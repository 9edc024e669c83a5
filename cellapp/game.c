/* game.c -- the rules of the demo game (demo/entities), the part a studio
 * replaces with its own: what makes an Avatar's and an Npc's properties
 * change, and the bodies of their cell methods. Everything goes through the
 * engine's API (entity_state setters, cellapp_call_cell/_call_client), so
 * the demo exercises the replication rules end to end:
 *
 *   Avatar  walking raises `level` (one per 50 m) and with it `equipment`
 *           (near-only); each move restores a point of `mana` (own client
 *           only). castSpell(spell_id, target), exposed, costs 5 mana,
 *           records the spell in `buffs` (own client only) and
 *           `secret_note` (cell only), and calls target.takeDamage.
 *   Npc     stationary guards spawned by the cellapp (npc_count). Each has
 *           a trap of npc_trap_radius: every avatar stepping in counts as a
 *           visitor and changes `mood` (other clients, medium detail),
 *           `level` and `scale` (everyone).
 *           Every half second a heartbeat timer counts in `heartbeats`
 *           (cell only); `born_ms` is when it started. ping(n), exposed,
 *           and the base's relayPing(n) count numbered calls: `pings`,
 *           the last `ping_last`, and `ping_disorder` each one that is not
 *           ping_last + 1 (a call lost, repeated or out of order).
 *           teleport(space, x, y, z), exposed (a GM command of the demo:
 *           a real game would keep it to its own code), moves the avatar
 *           there, in this space (empty name) or another.
 *   both    takeDamage(amount, attacker), not exposed: `health` drops (and
 *           resets to 100 at 0), and onDamage(amount) goes to every client
 *           that sees the entity.
 *
 * Nothing a client sees changes on a timer: when the players stand still
 * and stop casting, the world's visible state stops changing, which lets
 * the integration test compare what each client holds with what the cells
 * hold. (The heartbeat changes only a cell-private property.)
 *
 * Every per-entity value lives in properties, traps and timers, which move
 * with the entity between cellapps; nothing of the game's sits beside them.
 *
 * A rule whose class, property or method the definitions lack is off
 * (logged once at start-up); the engine never depends on this file.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cellapp.h"
#include "clock.h"
#include "log.h"
#include "method_call.h"

/* A property of a class, or none (-1). */
typedef struct game_property {
    int id;
} game_property;

/* What the game's traps and timers mean (their tags). */
enum { GAME_TRAP_VISITORS = 1 };
enum { GAME_TIMER_HEARTBEAT = 1 };
/* Half a second: often enough for the timer test to see dozens of firings
 * across offloads, rare enough to cost nothing. */
#define GAME_HEARTBEAT_US 500000u

struct game {
    cellapp *app;
    const entity_def_class *avatar;
    game_property avatar_level, avatar_health, avatar_mana, avatar_equipment, avatar_buffs, avatar_secret_note;
    game_property avatar_walked, avatar_born, avatar_heartbeats, avatar_pings, avatar_ping_last, avatar_ping_disorder;
    uint32_t weapon_index, armor_index; /* within equipment */
    const entity_def_method *cast_spell, *avatar_take_damage, *avatar_on_damage, *ping, *teleport;
    const entity_def_class *npc;
    game_property npc_name, npc_level, npc_health, npc_mood, npc_scale, npc_visitors;
    const entity_def_method *npc_take_damage, *npc_on_damage;
    int64_t npcs_spawned;
};

static game_property game_find_property(const entity_def_class *cls, const char *name) {
    const entity_def_property *p = cls ? entity_def_class_find_property(cls, name) : NULL;
    if (cls && !p) log_warn("demo game: %s has no property '%s': the rule that uses it is off", cls->name, name);
    return (game_property){p ? (int)p->id : -1};
}

static const entity_def_method *game_find_method(const entity_def_class *cls, entity_def_part part,
                                                 const char *name) {
    const entity_def_method *m = cls ? entity_def_class_find_method(cls, part, name) : NULL;
    if (cls && !m) log_warn("demo game: %s has no %s method '%s'", cls->name, entity_def_part_name(part), name);
    return m;
}

game *game_create(cellapp *app) {
    game *g = xcalloc(1, sizeof *g);
    g->app = app;
    g->avatar = entity_def_registry_find_class(app->shared.definitions, "Avatar");
    g->avatar_level = game_find_property(g->avatar, "level");
    g->avatar_health = game_find_property(g->avatar, "health");
    g->avatar_mana = game_find_property(g->avatar, "mana");
    g->avatar_equipment = game_find_property(g->avatar, "equipment");
    g->avatar_buffs = game_find_property(g->avatar, "buffs");
    g->avatar_secret_note = game_find_property(g->avatar, "secret_note");
    g->avatar_walked = game_find_property(g->avatar, "walked");
    g->avatar_born = game_find_property(g->avatar, "born_ms");
    g->avatar_heartbeats = game_find_property(g->avatar, "heartbeats");
    g->avatar_pings = game_find_property(g->avatar, "pings");
    g->avatar_ping_last = game_find_property(g->avatar, "ping_last");
    g->avatar_ping_disorder = game_find_property(g->avatar, "ping_disorder");
    if (g->avatar_equipment.id >= 0 &&
        (entity_state_index(g->avatar, (uint16_t)g->avatar_equipment.id, "weapon", &g->weapon_index) != 0 ||
         entity_state_index(g->avatar, (uint16_t)g->avatar_equipment.id, "armor", &g->armor_index) != 0)) {
        log_warn("demo game: Avatar.equipment has no weapon/armor fields: the rule is off");
        g->avatar_equipment.id = -1;
    }
    g->cast_spell = game_find_method(g->avatar, ENTITY_DEF_PART_CELL, "castSpell");
    g->avatar_take_damage = game_find_method(g->avatar, ENTITY_DEF_PART_CELL, "takeDamage");
    g->avatar_on_damage = game_find_method(g->avatar, ENTITY_DEF_PART_CLIENT, "onDamage");
    g->ping = game_find_method(g->avatar, ENTITY_DEF_PART_CELL, "ping");
    g->teleport = game_find_method(g->avatar, ENTITY_DEF_PART_CELL, "teleport");
    g->npc = entity_def_registry_find_class(app->shared.definitions, "Npc");
    g->npc_name = game_find_property(g->npc, "name");
    g->npc_level = game_find_property(g->npc, "level");
    g->npc_health = game_find_property(g->npc, "health");
    g->npc_mood = game_find_property(g->npc, "mood");
    g->npc_scale = game_find_property(g->npc, "scale");
    g->npc_visitors = game_find_property(g->npc, "visitors");
    g->npc_take_damage = game_find_method(g->npc, ENTITY_DEF_PART_CELL, "takeDamage");
    g->npc_on_damage = game_find_method(g->npc, ENTITY_DEF_PART_CLIENT, "onDamage");
    if (!g->npc && app->settings.npc_count > 0) log_warn("demo game: no Npc class: no NPCs are spawned");
    return g;
}

void game_free(game *g) { free(g); }

/* Setters refuse values outside the declared range; the rules below stay
 * inside it, so a refusal is a bug in this file, logged rather than fatal. */
static void game_set_uint(cell_entity *entity, game_property p, uint32_t index, uint64_t value) {
    if (p.id < 0) return;
    int rc = entity_state_set_uint(entity->state, (uint16_t)p.id, index, value);
    if (rc != 0)
        log_warn("demo game: entity %" PRIu64 " %s.%s = %" PRIu64 ": %s", entity->id, entity->cls->name,
                 entity->cls->properties[p.id].name, value, entity_state_strerror(rc));
}

static void game_set_int(cell_entity *entity, game_property p, int64_t value) {
    if (p.id < 0) return;
    int rc = entity_state_set_int(entity->state, (uint16_t)p.id, 0, value);
    if (rc != 0)
        log_warn("demo game: entity %" PRIu64 " %s.%s = %" PRId64 ": %s", entity->id, entity->cls->name,
                 entity->cls->properties[p.id].name, value, entity_state_strerror(rc));
}

static uint64_t game_get_uint(const cell_entity *entity, game_property p) {
    uint64_t value = 0;
    if (p.id >= 0) entity_state_get_uint(entity->state, (uint16_t)p.id, 0, &value);
    return value;
}

static int64_t game_get_int(const cell_entity *entity, game_property p) {
    int64_t value = 0;
    if (p.id >= 0) entity_state_get_int(entity->state, (uint16_t)p.id, 0, &value);
    return value;
}

/* ---- NPCs ------------------------------------------------------------------ */

void game_on_trap(cellapp *app, cell_entity *npc, uint32_t tag, cell_entity *visitor, bool entered) {
    game *g = app->game;
    if (tag != GAME_TRAP_VISITORS || !entered || npc->cls != g->npc || visitor->cls != g->avatar) return;
    uint64_t visitors = game_get_uint(npc, g->npc_visitors) + 1;
    game_set_uint(npc, g->npc_visitors, 0, visitors > UINT32_MAX ? UINT32_MAX : visitors);
    game_set_uint(npc, g->npc_mood, 0, visitors % 256);
    uint64_t level = 1 + visitors / 5;
    game_set_uint(npc, g->npc_level, 0, level > 255 ? 255 : level);
    if (g->npc_scale.id >= 0)
        entity_state_set_float(npc->state, (uint16_t)g->npc_scale.id, 0, 0.5 + (double)(visitors % 151) * 0.01);
    /* The NPC greets its visitor: a call of the visitor's base from this
     * cell (Avatar.poked(from), which tells its client onPoked). Only the
     * visitor's real's cellapp sends it, so a visit is greeted once. */
    if (visitor->kind != CELL_ENTITY_REAL || npc->kind != CELL_ENTITY_REAL) return;
    const entity_def_method *poked = entity_def_class_find_method(g->avatar, ENTITY_DEF_PART_BASE, "poked");
    if (!poked) return;
    entity_state *args = method_call_args_create(poked);
    entity_state_set_entity(args, 0, 0, npc->id);
    cellapp_call_base(app, npc->id, visitor->id, g->avatar->name, ENTITY_DEF_PART_BASE, "poked", args);
    entity_state_free(args);
}

/* Spawns the NPCs still owed in the default space's spawn disc, as ids
 * arrive from Redis and once the space is known. */
static void game_spawn_npcs(cellapp *app, game *g) {
    const cellapp_settings *settings = &app->settings;
    if (!g->npc || !app->ids || g->npcs_spawned >= settings->npc_count) return;
    const space_layout *layout = spaces_layout(app, settings->default_space);
    cell *c = layout ? spaces_cell(app, settings->default_space, true) : NULL;
    if (!c) return;
    while (g->npcs_spawned < settings->npc_count) {
        uint64_t id;
        if (id_block_take(app->ids, &id) != 0) {
            id_block_refill(app->ids);
            return;
        }
        double angle = cellapp_random_unit(app) * 2.0 * M_PI;
        double distance = sqrt(cellapp_random_unit(app)) * layout->spawn_radius;
        float x = (float)(layout->spawn_x + distance * cos(angle));
        float z = (float)(layout->spawn_z + distance * sin(angle));
        float yaw = (float)(cellapp_random_unit(app) * 2.0 * M_PI - M_PI);
        /* Here, wherever the point is: one outside this cellapp's cell
         * moves to its own at the end of the tick. */
        cell_entity *npc = cellapp_create_real(app, c, id, g->npc, x, 0, z, yaw, 0);
        if (!npc) log_panic("NPC %" PRIu64 ": a fresh id is taken", id);
        if (g->npc_name.id >= 0) {
            char name[32];
            snprintf(name, sizeof name, "Guard-%" PRIu64, id);
            entity_state_set_string(npc->state, (uint16_t)g->npc_name.id, 0, name, strlen(name));
        }
        if (cell_add_trap(c, npc, GAME_TRAP_VISITORS, (float)settings->npc_trap_radius, NULL, 0) != 0)
            log_panic("NPC %" PRIu64 ": cannot add its trap", id);
        g->npcs_spawned++;
    }
    id_block_refill(app->ids);
}

void game_tick(cellapp *app) { game_spawn_npcs(app, app->game); }

/* ---- avatars --------------------------------------------------------------- */

void game_on_real_created(cellapp *app, cell_entity *entity) {
    game *g = app->game;
    if (entity->cls != g->avatar) return;
    game_set_uint(entity, g->avatar_born, 0, clock_wall_us() / 1000);
    if (g->avatar_heartbeats.id >= 0)
        entity_timers_add(entity->home->timers, entity->id, clock_monotonic_us(), GAME_HEARTBEAT_US, GAME_HEARTBEAT_US,
                          GAME_TIMER_HEARTBEAT, 0);
}

void game_on_timer(cell *c, cell_entity *entity, uint64_t timer_id, uint32_t tag, uint64_t user_data, void *context) {
    cellapp *app = context;
    game *g = app->game;
    (void)c, (void)timer_id, (void)user_data;
    if (tag == GAME_TIMER_HEARTBEAT && entity->cls == g->avatar)
        game_set_uint(entity, g->avatar_heartbeats, 0, game_get_uint(entity, g->avatar_heartbeats) + 1);
}

void game_on_moved(cellapp *app, cell_entity *entity, double metres) {
    game *g = app->game;
    if (entity->cls != g->avatar || !isfinite(metres)) return;
    double walked = 0;
    if (g->avatar_walked.id >= 0) {
        entity_state_get_float(entity->state, (uint16_t)g->avatar_walked.id, 0, &walked);
        walked += metres;
        entity_state_set_float(entity->state, (uint16_t)g->avatar_walked.id, 0, walked);
    }
    uint64_t level = 1 + (uint64_t)(walked / 50.0);
    if (level > 255) level = 255;
    if (level != game_get_uint(entity, g->avatar_level)) {
        game_set_uint(entity, g->avatar_level, 0, level);
        game_set_uint(entity, g->avatar_equipment, g->weapon_index, level * 10);
        game_set_uint(entity, g->avatar_equipment, g->armor_index, level * 5);
    }
    uint64_t mana = game_get_uint(entity, g->avatar_mana);
    if (mana < 50) game_set_uint(entity, g->avatar_mana, 0, mana + 1);
}

static void game_cast_spell(cellapp *app, game *g, cell_entity *caster, uint64_t caller_id, const entity_state *args) {
    if (caller_id != caster->id) {
        log_debug("entity %" PRIu64 ": castSpell from %" PRIu64 ": only the caster casts", caster->id, caller_id);
        return;
    }
    uint64_t spell_id = 0, target_id = 0;
    entity_state_get_uint(args, 0, 0, &spell_id);
    entity_state_get_entity(args, 1, 0, &target_id);
    uint64_t mana = game_get_uint(caster, g->avatar_mana);
    if (mana < 5) return;
    game_set_uint(caster, g->avatar_mana, 0, mana - 5);
    game_set_uint(caster, g->avatar_buffs, (uint32_t)(spell_id % 8), spell_id);
    if (g->avatar_secret_note.id >= 0) {
        char note[64];
        snprintf(note, sizeof note, "spell %" PRIu64 " at tick %u", spell_id, caster->home->tick);
        entity_state_set_string(caster->state, (uint16_t)g->avatar_secret_note.id, 0, note, strlen(note));
    }
    cell_entity *target = target_id ? cell_find(caster->home, target_id) : NULL;
    if (!target || target == caster) return;
    const entity_def_method *take_damage = target->cls == g->avatar ? g->avatar_take_damage
                                           : target->cls == g->npc  ? g->npc_take_damage
                                                                    : NULL;
    if (!take_damage || take_damage->arg_count != 2) return;
    entity_state *damage = method_call_args_create(take_damage);
    entity_state_set_int(damage, 0, 0, (int64_t)(spell_id % 20) + 1);
    entity_state_set_entity(damage, 1, 0, caster->id);
    cell_message_call(app, target, take_damage, caster->id, damage);
    entity_state_free(damage);
}

static void game_take_damage(cellapp *app, game *g, cell_entity *entity, const entity_state *args) {
    int64_t amount = 0;
    entity_state_get_int(args, 0, 0, &amount);
    bool avatar = entity->cls == g->avatar;
    game_property health = avatar ? g->avatar_health : g->npc_health;
    int64_t now = game_get_int(entity, health) - amount;
    game_set_int(entity, health, now <= 0 ? 100 : now);
    const entity_def_method *on_damage = avatar ? g->avatar_on_damage : g->npc_on_damage;
    if (!on_damage || on_damage->arg_count != 1) return;
    entity_state *notice = method_call_args_create(on_damage);
    entity_state_set_int(notice, 0, 0, amount);
    cell_message_call_client(app, entity, on_damage, notice, true);
    entity_state_free(notice);
}

/* A numbered call: from the avatar's own client (through its base) or its
 * base; each should be the last plus one. */
static void game_ping(game *g, cell_entity *entity, uint64_t caller_id, const entity_state *args) {
    if (caller_id != entity->id) return;
    uint64_t n = 0;
    entity_state_get_uint(args, 0, 0, &n);
    uint64_t last = game_get_uint(entity, g->avatar_ping_last);
    if (n != last + 1) {
        game_set_uint(entity, g->avatar_ping_disorder, 0, game_get_uint(entity, g->avatar_ping_disorder) + 1);
        log_warn("entity %" PRIu64 ": ping %" PRIu64 " after %" PRIu64, entity->id, n, last);
    }
    game_set_uint(entity, g->avatar_ping_last, 0, n);
    game_set_uint(entity, g->avatar_pings, 0, game_get_uint(entity, g->avatar_pings) + 1);
}

static void game_teleport(cellapp *app, cell_entity *entity, uint64_t caller_id, const entity_state *args) {
    if (caller_id != entity->id) return;
    const char *space = "";
    double x = 0, y = 0, z = 0;
    entity_state_get_string(args, 0, 0, &space, NULL);
    entity_state_get_float(args, 1, 0, &x);
    entity_state_get_float(args, 2, 0, &y);
    entity_state_get_float(args, 3, 0, &z);
    char err[256];
    if (offload_teleport(app, entity, space, (float)x, (float)y, (float)z, entity->yaw, err, sizeof err) != 0)
        log_info("entity %" PRIu64 ": teleport refused: %s", entity->id, err);
}

void game_run_method(cellapp *app, cell_entity *entity, const entity_def_method *method, uint64_t caller_id,
                     const entity_state *args) {
    game *g = app->game;
    if (method == g->ping) {
        game_ping(g, entity, caller_id, args);
    } else if (method == g->teleport) {
        game_teleport(app, entity, caller_id, args);
    } else if (method == g->cast_spell) {
        game_cast_spell(app, g, entity, caller_id, args);
    } else if (method == g->avatar_take_damage || method == g->npc_take_damage) {
        game_take_damage(app, g, entity, args);
    } else {
        log_info("entity %" PRIu64 ": %s.%s has no implementation in this game: ignored", entity->id,
                 entity->cls->name, method->name);
    }
}
