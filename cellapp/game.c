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
 *   both    takeDamage(amount, attacker), not exposed: `health` drops (and
 *           resets to 100 at 0), and onDamage(amount) goes to every client
 *           that sees the entity.
 *
 * Nothing here changes on a timer: when the players stand still and stop
 * casting, the world's state stops changing, which lets the integration
 * test compare what each client holds with what the cells hold.
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

struct game {
    cellapp *app;
    const entity_def_class *avatar;
    game_property avatar_level, avatar_health, avatar_mana, avatar_equipment, avatar_buffs, avatar_secret_note;
    uint32_t weapon_index, armor_index; /* within equipment */
    const entity_def_method *cast_spell, *avatar_take_damage, *avatar_on_damage;
    const entity_def_class *npc;
    game_property npc_name, npc_level, npc_health, npc_mood, npc_scale;
    const entity_def_method *npc_take_damage, *npc_on_damage;
    int64_t npcs_spawned;
    id_map trap_owners; /* trap watcher id -> the NPC's cell_entity (live traps only are looked up) */
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
    id_map_init(&g->trap_owners);
    g->avatar = entity_def_registry_find_class(app->definitions, "Avatar");
    g->avatar_level = game_find_property(g->avatar, "level");
    g->avatar_health = game_find_property(g->avatar, "health");
    g->avatar_mana = game_find_property(g->avatar, "mana");
    g->avatar_equipment = game_find_property(g->avatar, "equipment");
    g->avatar_buffs = game_find_property(g->avatar, "buffs");
    g->avatar_secret_note = game_find_property(g->avatar, "secret_note");
    if (g->avatar_equipment.id >= 0 &&
        (entity_state_index(g->avatar, (uint16_t)g->avatar_equipment.id, "weapon", &g->weapon_index) != 0 ||
         entity_state_index(g->avatar, (uint16_t)g->avatar_equipment.id, "armor", &g->armor_index) != 0)) {
        log_warn("demo game: Avatar.equipment has no weapon/armor fields: the rule is off");
        g->avatar_equipment.id = -1;
    }
    g->cast_spell = game_find_method(g->avatar, ENTITY_DEF_PART_CELL, "castSpell");
    g->avatar_take_damage = game_find_method(g->avatar, ENTITY_DEF_PART_CELL, "takeDamage");
    g->avatar_on_damage = game_find_method(g->avatar, ENTITY_DEF_PART_CLIENT, "onDamage");
    g->npc = entity_def_registry_find_class(app->definitions, "Npc");
    g->npc_name = game_find_property(g->npc, "name");
    g->npc_level = game_find_property(g->npc, "level");
    g->npc_health = game_find_property(g->npc, "health");
    g->npc_mood = game_find_property(g->npc, "mood");
    g->npc_scale = game_find_property(g->npc, "scale");
    g->npc_take_damage = game_find_method(g->npc, ENTITY_DEF_PART_CELL, "takeDamage");
    g->npc_on_damage = game_find_method(g->npc, ENTITY_DEF_PART_CLIENT, "onDamage");
    if (!g->npc && app->settings.npc_count > 0) log_warn("demo game: no Npc class: no NPCs are spawned");
    return g;
}

void game_free(game *g) {
    if (!g) return;
    id_map_close(&g->trap_owners);
    free(g);
}

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

static void game_on_trap_enter(coord_system *cs, uint32_t watcher, uint32_t entered, void *user_data) {
    game *g = user_data;
    cell_entity *npc = id_map_get(&g->trap_owners, watcher);
    cell_entity *visitor = coord_entity_user_data(cs, entered);
    if (!npc || npc->destroyed || npc->trap != watcher || !visitor || visitor->cls != g->avatar) return;
    npc->visitors++;
    game_set_uint(npc, g->npc_mood, 0, npc->visitors % 256);
    uint64_t level = 1 + npc->visitors / 5;
    game_set_uint(npc, g->npc_level, 0, level > 255 ? 255 : level);
    if (g->npc_scale.id >= 0)
        entity_state_set_float(npc->state, (uint16_t)g->npc_scale.id, 0, 0.5 + (double)(npc->visitors % 151) * 0.01);
}

static void game_on_trap_leave(coord_system *cs, uint32_t watcher, uint32_t left, void *user_data) {
    (void)cs, (void)watcher, (void)left, (void)user_data;
}

static const coord_watcher_callbacks game_trap_callbacks = {
    .on_enter = game_on_trap_enter,
    .on_leave = game_on_trap_leave,
};

/* Spawns the NPCs still owed, as ids arrive from Redis. */
static void game_spawn_npcs(cellapp *app, game *g) {
    const cellapp_settings *settings = &app->settings;
    if (!g->npc || !app->ids) return;
    while (g->npcs_spawned < settings->npc_count) {
        uint64_t id;
        if (id_block_take(app->ids, &id) != 0) {
            id_block_refill(app->ids);
            return;
        }
        double angle = cellapp_random_unit(app) * 2.0 * M_PI;
        double distance = sqrt(cellapp_random_unit(app)) * settings->spawn_radius;
        float x = (float)(settings->spawn_x + distance * cos(angle));
        float z = (float)(settings->spawn_z + distance * sin(angle));
        cell_entity *npc = space_add(&app->space, id, CELL_ENTITY_REAL, g->npc, x, 0, z);
        if (!npc) log_panic("NPC %" PRIu64 ": a fresh id is taken", id);
        npc->move_stamp_us = clock_wall_us();
        npc->yaw = (float)(cellapp_random_unit(app) * 2.0 * M_PI - M_PI);
        if (g->npc_name.id >= 0) {
            char name[32];
            snprintf(name, sizeof name, "Guard-%" PRIu64, id);
            entity_state_set_string(npc->state, (uint16_t)g->npc_name.id, 0, name, strlen(name));
        }
        npc->trap = coord_add_watcher(app->space.coord, npc->coord_id, (float)settings->npc_trap_radius, 0,
                                      &game_trap_callbacks, g);
        if (npc->trap == COORD_NONE) log_panic("NPC %" PRIu64 ": cannot add its trap", id);
        id_map_put(&g->trap_owners, npc->trap, npc);
        g->npcs_spawned++;
    }
    id_block_refill(app->ids);
}

void game_tick(cellapp *app) { game_spawn_npcs(app, app->game); }

/* ---- avatars --------------------------------------------------------------- */

void game_on_real_created(cellapp *app, cell_entity *entity) {
    (void)app;
    (void)entity;
}

void game_on_moved(cellapp *app, cell_entity *entity, double metres) {
    game *g = app->game;
    if (entity->cls != g->avatar || !isfinite(metres)) return;
    entity->walked_metres += metres;
    uint64_t level = 1 + (uint64_t)(entity->walked_metres / 50.0);
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
        snprintf(note, sizeof note, "spell %" PRIu64 " at tick %u", spell_id, app->space.tick);
        entity_state_set_string(caster->state, (uint16_t)g->avatar_secret_note.id, 0, note, strlen(note));
    }
    cell_entity *target = target_id ? space_find(&app->space, target_id) : NULL;
    if (!target || target == caster) return;
    const entity_def_method *take_damage = target->cls == g->avatar ? g->avatar_take_damage
                                           : target->cls == g->npc  ? g->npc_take_damage
                                                                    : NULL;
    if (!take_damage || take_damage->arg_count != 2) return;
    entity_state *damage = method_call_args_create(take_damage);
    entity_state_set_int(damage, 0, 0, (int64_t)(spell_id % 20) + 1);
    entity_state_set_entity(damage, 1, 0, caster->id);
    cellapp_call_cell(app, target, take_damage, caster->id, damage);
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
    cellapp_call_client(app, entity, on_damage, notice, true);
    entity_state_free(notice);
}

void game_run_method(cellapp *app, cell_entity *entity, const entity_def_method *method, uint64_t caller_id,
                     const entity_state *args) {
    game *g = app->game;
    if (method == g->cast_spell) {
        game_cast_spell(app, g, entity, caller_id, args);
    } else if (method == g->avatar_take_damage || method == g->npc_take_damage) {
        game_take_damage(app, g, entity, args);
    } else {
        log_info("entity %" PRIu64 ": %s.%s has no implementation in this game: ignored", entity->id,
                 entity->cls->name, method->name);
    }
}
