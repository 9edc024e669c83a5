/* lifecycle.c -- a game module for test_game_lifecycle.py, over the demo's
 * definitions: named thinks and deferred deletion, reported in log lines
 * the test reads ("lifecycle: ...").
 *
 * The game's tick spawns two Npcs. Each, when created, schedules think
 * "a" in 100 ms, think "b" in 300 ms, and think "a" again in 200 ms, which
 * replaces the first "a" (one pending think per name): "a" runs once, at
 * about 200 ms, then "b" once. Think "b" destroys the entity twice and
 * checks that it still resolves and takes a write; the next tick checks
 * that its handle resolves to NULL. The destroyed hook logs each time it
 * runs: once per entity is right. An Avatar logs what enters and leaves
 * its client's view. The created line names the entity, so
 * that a map's spawn order can be read (test_entity_io.py).
 *
 * Think "a" also writes properties, and the property_changed hook logs
 * each change it hears ("lifecycle: changed health 0"): health 50 (whose
 * hook sets health again, heard by no hook, and mood, whose hook sets
 * health a third time, heard by none either), health again to the value it
 * holds (no hook), level out of its range (refused: no hook), the `name`
 * property twice to the same text (one hook; the look-up name, api->name,
 * stays what it was) and scale. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/game.h>

/* Three game systems, "first", "second" and "third", that log their start,
 * their stop and their first tick's hooks; the game setting fail_system
 * (1 .. 3) makes that one's start fail. */
typedef struct lifecycle_system_state {
    bool before_logged, after_logged;
} lifecycle_system_state;

typedef struct lifecycle {
    lifecycle_system_state systems[3];
    int fail_system;
    tessera_class *npc;
    int visitors; /* a cell-private property to write */
    int health, mood, level, name, scale;
    int spawned;
    tessera_handle doomed[2];
    int doomed_count;
    uint32_t doomed_tick[2];
} lifecycle;

static void lifecycle_think_a(const tessera_cell_context *ctx, tessera_entity *e, void *data) {
    const lifecycle *g = ctx->game;
    const tessera_cell_api *api = ctx->api;
    (void)data;
    api->log(ctx->app, TESSERA_LOG_INFO, e, "lifecycle: think a at %llu ms", (unsigned long long)api->now_ms(ctx->app));
    int rc = api->set_int(e, g->health, 0, 50);
    int64_t health = 0;
    api->get_int(e, g->health, 0, &health);
    rc |= api->set_int(e, g->health, 0, health); /* the value it holds */
    int refused = api->set_uint(e, g->level, 0, 300);
    rc |= api->set_string(e, g->name, 0, "Bo", 2);
    rc |= api->set_string(e, g->name, 0, "Bo", 2); /* the same text: no hook */
    rc |= api->set_float(e, g->scale, 0, 1.5);
    const char *name = "";
    api->get_string(e, g->name, 0, &name, NULL);
    api->log(ctx->app, TESSERA_LOG_INFO, e,
             "lifecycle: writes %d, refused %d, health %lld, name property '%s', look-up name '%s'", rc, refused,
             (long long)health, name, api->name(e));
}

/* Logs each change; health's and mood's hooks write again. */
static void lifecycle_property_changed(const tessera_cell_context *ctx, tessera_entity *e, void *data, int property,
                                       uint32_t index) {
    const lifecycle *g = ctx->game;
    const tessera_cell_api *api = ctx->api;
    (void)data;
    const char *which = property == g->health     ? "health"
                        : property == g->mood     ? "mood"
                        : property == g->name     ? "name"
                        : property == g->scale    ? "scale"
                        : property == g->visitors ? "visitors"
                                                  : "another";
    api->log(ctx->app, TESSERA_LOG_INFO, e, "lifecycle: changed %s %u", which, index);
    if (property == g->health) {
        int64_t health = 0;
        api->get_int(e, g->health, 0, &health);
        if (health == 50) api->set_int(e, g->health, 0, 49); /* the same property: no hook */
        api->set_uint(e, g->mood, 0, 3);
    } else if (property == g->mood) {
        api->set_int(e, g->health, 0, 10); /* health's hook is running: no hook */
    }
}

static void lifecycle_think_b(const tessera_cell_context *ctx, tessera_entity *e, void *data) {
    lifecycle *g = ctx->game;
    const tessera_cell_api *api = ctx->api;
    (void)data;
    api->log(ctx->app, TESSERA_LOG_INFO, e, "lifecycle: think b at %llu ms", (unsigned long long)api->now_ms(ctx->app));
    tessera_handle self = api->handle(e);
    /* Twice on purpose: the second call must be refused. */
    // cppcheck-suppress duplicateAssignExpression ; the same call twice is the test
    int first = api->destroy(e), second = api->destroy(e);
    bool resolves = api->resolve(ctx->app, self) == e;
    int wrote = api->set_uint(e, g->visitors, 0, 7);
    api->log(ctx->app, TESSERA_LOG_INFO, e, "lifecycle: destroyed %d %d, still resolves %s, write %d", first, second,
             resolves ? "yes" : "no", wrote);
    if (g->doomed_count < 2) {
        g->doomed_tick[g->doomed_count] = api->tick(e);
        g->doomed[g->doomed_count++] = self;
    }
}

/* An Npc's data: a map's keyvalues may set it (the field table). */
typedef struct lifecycle_npc {
    int32_t courage;
    char motto[16];
    float home[3];
} lifecycle_npc;

static const tessera_field lifecycle_npc_fields[] = {
    TESSERA_FIELD(lifecycle_npc, courage, TESSERA_FIELD_INT32),
    TESSERA_FIELD(lifecycle_npc, motto, TESSERA_FIELD_STRING),
    TESSERA_FIELD(lifecycle_npc, home, TESSERA_FIELD_VECTOR3),
};

static void lifecycle_created(const tessera_cell_context *ctx, tessera_entity *e, void *data) {
    const tessera_cell_api *api = ctx->api;
    const lifecycle_npc *npc = data;
    api->log(ctx->app, TESSERA_LOG_INFO, e,
             "lifecycle: created at %llu ms, named '%s', courage %d, motto '%s', "
             "home %.1f %.1f %.1f",
             (unsigned long long)api->now_ms(ctx->app), api->name(e), npc ? npc->courage : -1, npc ? npc->motto : "",
             npc ? npc->home[0] : 0, npc ? npc->home[1] : 0, npc ? npc->home[2] : 0);
    int rc = api->set_think(e, "a", 100) | api->set_think(e, "b", 300) | api->set_think(e, "a", 200);
    int unknown = api->set_think(e, "c", 10);
    api->log(ctx->app, TESSERA_LOG_INFO, e, "lifecycle: thinks set %d, unknown %d", rc, unknown);
}

static void lifecycle_destroyed(const tessera_cell_context *ctx, tessera_entity *e, void *data) {
    (void)data;
    ctx->api->log(ctx->app, TESSERA_LOG_INFO, e, "lifecycle: destroyed hook");
}

/* Views: an Avatar's client gains or loses an entity. */
static void lifecycle_entered_view(const tessera_cell_context *ctx, tessera_entity *e, void *data,
                                   tessera_entity *other) {
    (void)data;
    ctx->api->log(ctx->app, TESSERA_LOG_INFO, e, "lifecycle: sees %llu (%s)",
                  (unsigned long long)ctx->api->handle(other), ctx->api->class_name(other));
}

static void lifecycle_left_view(const tessera_cell_context *ctx, tessera_entity *e, void *data, tessera_handle other) {
    (void)data;
    ctx->api->log(ctx->app, TESSERA_LOG_INFO, e, "lifecycle: no longer sees %llu", (unsigned long long)other);
}

static void lifecycle_tick(const tessera_cell_context *ctx) {
    lifecycle *g = ctx->game;
    const tessera_cell_api *api = ctx->api;
    float x, z, radius;
    const char *space = api->default_space(ctx->app);
    while (g->spawned < 2 && api->spawn_area(ctx->app, space, &x, &z, &radius) == 0 &&
           api->spawn(ctx->app, "Npc", space, x + 2.0f * (float)g->spawned, 0, z, 0) != TESSERA_HANDLE_NONE)
        g->spawned++;
    for (int i = 0; i < g->doomed_count; i++) {
        if (!g->doomed[i]) continue;
        tessera_entity *e = api->resolve(ctx->app, g->doomed[i]);
        api->log(ctx->app, TESSERA_LOG_INFO, NULL, "lifecycle: entity %llu a tick later resolves %s",
                 (unsigned long long)g->doomed[i], e ? "yes" : "no");
        g->doomed[i] = TESSERA_HANDLE_NONE;
    }
}

static int lifecycle_system_index(const char *name) {
    return strcmp(name, "first") == 0 ? 0 : strcmp(name, "second") == 0 ? 1 : 2;
}

#define LIFECYCLE_SYSTEM(NAME)                                                                                       \
    static int lifecycle_##NAME##_init(const tessera_cell_context *ctx) {                                            \
        lifecycle *g = ctx->game;                                                                                    \
        ctx->api->log(ctx->app, TESSERA_LOG_INFO, NULL, "lifecycle: system " #NAME " init");                         \
        return g->fail_system == lifecycle_system_index(#NAME) + 1 ? -1 : 0;                                         \
    }                                                                                                                \
    static void lifecycle_##NAME##_shutdown(const tessera_cell_context *ctx) {                                       \
        ctx->api->log(ctx->app, TESSERA_LOG_INFO, NULL, "lifecycle: system " #NAME " shutdown");                     \
    }                                                                                                                \
    static void lifecycle_##NAME##_before(const tessera_cell_context *ctx) {                                         \
        lifecycle *g = ctx->game;                                                                                    \
        if (g->systems[lifecycle_system_index(#NAME)].before_logged) return;                                         \
        g->systems[lifecycle_system_index(#NAME)].before_logged = true;                                              \
        ctx->api->log(ctx->app, TESSERA_LOG_INFO, NULL, "lifecycle: system " #NAME " before thinks");                \
    }                                                                                                                \
    static void lifecycle_##NAME##_after(const tessera_cell_context *ctx) {                                          \
        lifecycle *g = ctx->game;                                                                                    \
        if (g->systems[lifecycle_system_index(#NAME)].after_logged) return;                                          \
        g->systems[lifecycle_system_index(#NAME)].after_logged = true;                                               \
        ctx->api->log(ctx->app, TESSERA_LOG_INFO, NULL, "lifecycle: system " #NAME " after thinks");                 \
    }                                                                                                                \
    static const tessera_system lifecycle_##NAME##_system = {#NAME, lifecycle_##NAME##_init,                         \
                                                             lifecycle_##NAME##_shutdown, lifecycle_##NAME##_before, \
                                                             lifecycle_##NAME##_after};
LIFECYCLE_SYSTEM(first)
LIFECYCLE_SYSTEM(second)
LIFECYCLE_SYSTEM(third)

static int lifecycle_cell_init(tessera_cellapp *app, const tessera_cell_api *api, void **game) {
    lifecycle *g = calloc(1, sizeof *g);
    if (!g) return -1;
    *game = g;
    tessera_cell_hooks hooks = {
        .created = lifecycle_created,
        .destroyed = lifecycle_destroyed,
        .property_changed = lifecycle_property_changed,
    };
    g->npc = api->register_class(app, "Npc", &hooks, sizeof(lifecycle_npc), lifecycle_npc_fields,
                                 sizeof lifecycle_npc_fields / sizeof lifecycle_npc_fields[0]);
    if (!g->npc) return -1;
    g->visitors = api->property_id(g->npc, "visitors");
    g->health = api->property_id(g->npc, "health");
    g->mood = api->property_id(g->npc, "mood");
    g->level = api->property_id(g->npc, "level");
    g->name = api->property_id(g->npc, "name");
    g->scale = api->property_id(g->npc, "scale");
    tessera_cell_hooks avatar = {.entered_view = lifecycle_entered_view, .left_view = lifecycle_left_view};
    if (!api->register_class(app, "Avatar", &avatar, 0, NULL, 0)) return -1;
    if (api->register_think(app, g->npc, "a", lifecycle_think_a) != 0 ||
        api->register_think(app, g->npc, "b", lifecycle_think_b) != 0 ||
        api->register_think(app, g->npc, "a", lifecycle_think_a) == 0) /* a name is taken once */
        return -1;
    g->fail_system = (int)api->setting_number(app, "fail_system", 0);
    if (api->register_system(app, &lifecycle_first_system) != 0 ||
        api->register_system(app, &lifecycle_second_system) != 0 ||
        api->register_system(app, &lifecycle_third_system) != 0)
        return -1;
    api->set_tick(app, lifecycle_tick);
    return 0;
}

static void lifecycle_cell_shutdown(tessera_cellapp *app, void *game) {
    (void)app;
    free(game);
}

TESSERA_GAME_EXPORT const tessera_game_module tessera_game = {
    .abi_version = TESSERA_GAME_ABI_VERSION,
    .name = "lifecycle",
    .cell_init = lifecycle_cell_init,
    .cell_shutdown = lifecycle_cell_shutdown,
};
