/* demo_world.c -- the demo map's working parts, in entity I/O (seed 002):
 *
 *   Door        inputs Open, Close and Toggle set `open` (every client
 *               that sees it gets the property) and fire OnOpened or
 *               OnClosed; the game event door_changed(door, open) goes to
 *               every client in the space (the gate is heard, not only
 *               seen).
 *   Trigger     a zone of `size` (a keyvalue) around it: an avatar
 *               stepping in fires OnTrigger, with the avatar as the
 *               activator. If the map gives it a parent, it looks the
 *               parent up by name when it spawns (parents spawn first).
 *   LogicTimer  fires OnTimer every `interval` seconds (a keyvalue), from
 *               a named think that travels with it.
 *
 * The map (demo/maps/arena.json) wires them: stepping on the plate in
 * front of the gate opens it a second later; the gate's timer closes it
 * every ten seconds; a shutter by the courtyard toggles every six, from
 * its own timer, whoever walks by. None of it is in the engine: three
 * classes, their inputs, and connections in a map file.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "demo.h"

enum { DEMO_TRAP_ZONE = 2 };

typedef struct demo_world {
    tessera_class *door, *trigger, *timer, *avatar;
    int door_open, door_opened_count, trigger_radius, trigger_entered, timer_interval, timer_fired;
} demo_world;

/* The game state holds the world's ids; each input reaches it this way. */
static const demo_world *demo_world_of(const tessera_cell_context *ctx) { return demo_world_state(ctx->game); }

static void demo_door_set(const tessera_cell_context *ctx, tessera_entity *door, bool open, tessera_handle activator) {
    const demo_world *w = demo_world_of(ctx);
    const tessera_cell_api *api = ctx->api;
    bool was = false;
    api->get_bool(door, w->door_open, 0, &was);
    if (was == open) return;
    api->set_bool(door, w->door_open, 0, open);
    if (open) {
        uint64_t count = 0;
        api->get_uint(door, w->door_opened_count, 0, &count);
        api->set_uint(door, w->door_opened_count, 0, count + 1);
    }
    api->log(ctx->app, TESSERA_LOG_INFO, door, "the door '%s' %s", api->name(door), open ? "opens" : "closes");
    api->fire_output(door, open ? "OnOpened" : "OnClosed", activator, api->handle(door), NULL);
    tessera_args *fields = api->event_args_create(ctx->app, "door_changed");
    if (!fields) return;
    api->args->set_handle(fields, 0, api->handle(door));
    api->args->set_bool(fields, 1, open);
    api->fire_event(ctx->app, door, "door_changed", fields, TESSERA_EVENT_SPACE);
    api->args->free(fields);
}

static void demo_door_open(const tessera_cell_context *ctx, tessera_entity *door, void *data, tessera_handle activator,
                           tessera_handle caller, const tessera_value *value) {
    (void)data, (void)caller, (void)value;
    demo_door_set(ctx, door, true, activator);
}

static void demo_door_close(const tessera_cell_context *ctx, tessera_entity *door, void *data, tessera_handle activator,
                            tessera_handle caller, const tessera_value *value) {
    (void)data, (void)caller, (void)value;
    demo_door_set(ctx, door, false, activator);
}

static void demo_door_toggle(const tessera_cell_context *ctx, tessera_entity *door, void *data,
                             tessera_handle activator, tessera_handle caller, const tessera_value *value) {
    (void)data, (void)caller, (void)value;
    bool open = false;
    ctx->api->get_bool(door, demo_world_of(ctx)->door_open, 0, &open);
    demo_door_set(ctx, door, !open, activator);
}

static void demo_trigger_created(const tessera_cell_context *ctx, tessera_entity *trigger, void *data) {
    const demo_world *w = demo_world_of(ctx);
    const tessera_cell_api *api = ctx->api;
    (void)data;
    double radius = 5;
    api->get_float(trigger, w->trigger_radius, 0, &radius);
    api->add_trap(trigger, DEMO_TRAP_ZONE, (float)radius);
}

static void demo_trigger_entered(const tessera_cell_context *ctx, tessera_entity *trigger, void *data, uint32_t tag,
                                 tessera_entity *visitor) {
    const demo_world *w = demo_world_of(ctx);
    const tessera_cell_api *api = ctx->api;
    (void)data;
    if (tag != DEMO_TRAP_ZONE || api->class_of(visitor) != w->avatar || !api->is_real(visitor)) return;
    uint64_t entered = 0;
    api->get_uint(trigger, w->trigger_entered, 0, &entered);
    api->set_uint(trigger, w->trigger_entered, 0, entered + 1);
    size_t events = api->fire_output(trigger, "OnTrigger", api->handle(visitor), TESSERA_HANDLE_NONE, NULL);
    api->log(ctx->app, TESSERA_LOG_INFO, trigger, "entity %llu steps in: fires OnTrigger (%zu events)",
             (unsigned long long)api->handle(visitor), events);
}

/* The timer's next tick, `interval` seconds (a keyvalue) from now. */
static void demo_timer_schedule(const tessera_cell_context *ctx, tessera_entity *timer) {
    double interval = 10;
    ctx->api->get_float(timer, demo_world_of(ctx)->timer_interval, 0, &interval);
    ctx->api->set_think(timer, "tick", interval > 0.1 ? (uint64_t)(interval * 1000) : 100);
}

static void demo_timer_tick(const tessera_cell_context *ctx, tessera_entity *timer, void *data) {
    const demo_world *w = demo_world_of(ctx);
    const tessera_cell_api *api = ctx->api;
    (void)data;
    uint64_t fired = 0;
    api->get_uint(timer, w->timer_fired, 0, &fired);
    api->set_uint(timer, w->timer_fired, 0, fired + 1);
    api->fire_output(timer, "OnTimer", TESSERA_HANDLE_NONE, TESSERA_HANDLE_NONE, NULL);
    demo_timer_schedule(ctx, timer);
}

static void demo_timer_created(const tessera_cell_context *ctx, tessera_entity *timer, void *data) {
    (void)data;
    demo_timer_schedule(ctx, timer);
}

demo_world *demo_world_register(tessera_cellapp *app, const tessera_cell_api *api, tessera_class *avatar) {
    demo_world *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->avatar = avatar;
    tessera_cell_hooks none = {0};
    tessera_cell_hooks trigger = {.created = demo_trigger_created, .entered_trap = demo_trigger_entered};
    tessera_cell_hooks timer = {.created = demo_timer_created};
    w->door = api->register_class(app, "Door", &none, 0, NULL, 0);
    w->trigger = api->register_class(app, "Trigger", &trigger, 0, NULL, 0);
    w->timer = api->register_class(app, "LogicTimer", &timer, 0, NULL, 0);
    if (!w->door || !w->trigger || !w->timer) {
        free(w);
        return NULL;
    }
    w->door_open = api->property_id(w->door, "open");
    w->door_opened_count = api->property_id(w->door, "opened_count");
    w->trigger_radius = api->property_id(w->trigger, "size");
    w->trigger_entered = api->property_id(w->trigger, "entered");
    w->timer_interval = api->property_id(w->timer, "interval");
    w->timer_fired = api->property_id(w->timer, "fired");
    if (api->register_input(app, w->door, "Open", TESSERA_FIELD_STRING, demo_door_open) != 0 ||
        api->register_input(app, w->door, "Close", TESSERA_FIELD_STRING, demo_door_close) != 0 ||
        api->register_input(app, w->door, "Toggle", TESSERA_FIELD_STRING, demo_door_toggle) != 0 ||
        api->register_think(app, w->timer, "tick", demo_timer_tick) != 0) {
        free(w);
        return NULL;
    }
    return w;
}
