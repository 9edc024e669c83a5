/* tessera/game.h -- the game ABI: the only header a game module includes.
 *
 * A game is a shared object (a .so) that the cellapp loads with dlopen.
 * Its config names it next to the entity definitions:
 *
 *     "entity_definitions": "demo/entities",
 *     "game_module": "build/demo/libtessera_demo.so",
 *     "game": { "npc_count": 40 }          <- the game's own settings
 *
 * The engine owns entities, their properties (declared in the definitions'
 * JSON), their timers and traps, and moves all of it between cells and
 * cellapps. The game owns rules: what happens when an entity is created,
 * is called, steps into a trap, when a timer fires. It registers, per
 * entity class, a table of hooks and the bodies of the class's cell
 * methods, and it may ask the engine for a block of per-entity data of its
 * own, described by a field table so that the engine can carry it along
 * when the entity moves to another cellapp.
 *
 * A module in five steps (demo/game/demo_cell.c is the full example):
 *
 *     #include <tessera/game.h>
 *
 *     typedef struct guard { int32_t alarms; } guard;
 *     static const tessera_field guard_fields[] = {
 *         TESSERA_FIELD(guard, alarms, TESSERA_FIELD_INT32),
 *     };
 *
 *     static void guard_created(const tessera_cell_context *ctx, tessera_entity *e, void *data) {
 *         guard *g = data;
 *         ctx->api->add_timer(e, 1000, 1000, 1, 0);     // the timer hook, every second
 *     }
 *
 *     static int demo_cell_init(tessera_cellapp *app, const tessera_cell_api *api, void **game) {
 *         tessera_cell_hooks hooks = {.created = guard_created};
 *         tessera_class *cls = api->register_class(app, "Guard", &hooks, sizeof(guard),
 *                                                  guard_fields, 1);
 *         return cls ? 0 : -1;
 *     }
 *
 *     TESSERA_GAME_EXPORT const tessera_game_module tessera_game = {
 *         .abi_version = TESSERA_GAME_ABI_VERSION,
 *         .name = "demo",
 *         .cell_init = demo_cell_init,
 *     };
 *
 * Rules the engine keeps, and the game must too:
 *   - Entity pointers (tessera_entity *) are valid only during the hook
 *     call that handed them out, or until the game next returns to the
 *     engine. Across ticks the game keeps handles (tessera_handle): the
 *     entity's 64-bit id, never reused in a cluster. api->resolve turns one
 *     back into a pointer, or NULL once the entity is destroyed or is no
 *     longer on this cellapp (it moved away: its new cellapp runs it now).
 *   - Everything an entity is must be in its properties, timers, traps and
 *     its saved fields: an entity may leave for another cellapp at the end
 *     of any tick, and only those travel. The game keeps no per-entity
 *     state of its own beside them.
 *   - A ghost (a read-only copy of an entity whose real is on another
 *     cell) can be read, not written: setters and timers refuse it.
 *   - Hooks run on the process's one thread; they must not block.
 *   - Every api function that can fail returns 0 or a value, and -1 (or
 *     NULL) with the reason logged by the engine; none aborts.
 *
 * Versioning: TESSERA_GAME_ABI_VERSION changes whenever a struct here
 * changes shape or meaning. The engine refuses a module built against
 * another version, naming both, and does not start.
 */
#ifndef TESSERA_GAME_H
#define TESSERA_GAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TESSERA_GAME_ABI_VERSION 1u

/* The symbol the engine looks up in the module. */
#define TESSERA_GAME_SYMBOL "tessera_game"
#define TESSERA_GAME_EXPORT __attribute__((visibility("default")))

/* ---- what the engine hands out --------------------------------------------- */

typedef struct tessera_cellapp tessera_cellapp; /* the cellapp, opaque */
typedef struct tessera_entity tessera_entity;   /* an entity here, valid for one hook call */
typedef struct tessera_class tessera_class;     /* a registered class */
typedef struct tessera_args tessera_args;       /* a method's arguments */
typedef struct tessera_cell_api tessera_cell_api;

/* What every hook and method body is handed: the cellapp, the engine's
 * services, and the game's own state (what cell_init stored in *game). */
typedef struct tessera_cell_context {
    tessera_cellapp *app;
    const tessera_cell_api *api;
    void *game;
} tessera_cell_context;

/* An entity across ticks: its id. 0 is no entity. */
typedef uint64_t tessera_handle;
#define TESSERA_HANDLE_NONE ((tessera_handle)0)

/* Which part of an entity a method belongs to (the definitions' "base",
 * "cell", "client"). */
typedef enum tessera_part {
    TESSERA_PART_BASE = 0,
    TESSERA_PART_CELL = 1,
    TESSERA_PART_CLIENT = 2,
} tessera_part;

typedef enum tessera_log_level {
    TESSERA_LOG_DEBUG = 0,
    TESSERA_LOG_INFO = 1,
    TESSERA_LOG_WARN = 2,
} tessera_log_level;

/* ---- the game's per-entity data -------------------------------------------- */

/* A field of the game's per-entity struct. The engine allocates the struct
 * (zeroed, data_size bytes) when an entity of the class is created or
 * arrives, frees it when the entity goes, and saves every field in the
 * table, by name, when the entity moves to another cellapp: the receiving
 * cellapp restores them by name, so a field the new module dropped is
 * skipped with a log line and a new one starts at zero. */
typedef enum tessera_field_type {
    TESSERA_FIELD_INT32,
    TESSERA_FIELD_UINT32,
    TESSERA_FIELD_INT64,
    TESSERA_FIELD_UINT64,
    TESSERA_FIELD_FLOAT,
    TESSERA_FIELD_DOUBLE,
    TESSERA_FIELD_BOOL,
    TESSERA_FIELD_HANDLE,  /* a tessera_handle: saved as the entity id it is */
    TESSERA_FIELD_VECTOR3, /* float[3] */
    TESSERA_FIELD_STRING,  /* char[size], NUL-terminated */
} tessera_field_type;

typedef struct tessera_field {
    const char *name;
    tessera_field_type type;
    size_t offset;
    size_t size;           /* bytes; for STRING the array's size */
} tessera_field;

#define TESSERA_FIELD(type_name, member, field_type)                                                       \
    { #member, field_type, offsetof(type_name, member), sizeof(((type_name *)0)->member) }

/* ---- hooks ------------------------------------------------------------------ */

/* What the engine tells the game about one entity of a class. Every hook
 * is optional (NULL: nothing to do). `data` is the entity's per-entity
 * struct (NULL when the class asked for none). Hooks run for reals only,
 * except where it says otherwise. */
typedef struct tessera_cell_hooks {
    /* A real was created here: for a player, once its base asked for its
     * cell part; for one the game spawned, at once. Not called when a real
     * arrives from another cellapp (see arrived). */
    void (*created)(const tessera_cell_context *ctx, tessera_entity *entity, void *data);
    /* The real is being destroyed (it stays resolvable to the end of the
     * tick). Not called when it leaves for another cellapp (see leaving). */
    void (*destroyed)(const tessera_cell_context *ctx, tessera_entity *entity, void *data);
    /* The real is about to leave for another cellapp; its saved fields are
     * written after this returns. */
    void (*leaving)(const tessera_cell_context *ctx, tessera_entity *entity, void *data);
    /* The real arrived from another cellapp, its fields, timers and traps
     * restored. */
    void (*arrived)(const tessera_cell_context *ctx, tessera_entity *entity, void *data);
    /* Game code moved it (api->teleport) and the move is done. */
    void (*teleported)(const tessera_cell_context *ctx, tessera_entity *entity, void *data, bool space_changed);
    /* Its client's moves were applied this tick: `metres` in all. */
    void (*moved)(const tessera_cell_context *ctx, tessera_entity *entity, void *data, double metres);
    /* It got a client's view (a witness), or lost it. */
    void (*got_witness)(const tessera_cell_context *ctx, tessera_entity *entity, void *data);
    void (*lost_witness)(const tessera_cell_context *ctx, tessera_entity *entity, void *data);
    /* `other` (a real or a ghost) stepped into, or out of, the trap the
     * game gave it with api->add_trap(..., tag, ...). */
    void (*entered_trap)(const tessera_cell_context *ctx, tessera_entity *entity, void *data, uint32_t tag,
                         tessera_entity *other);
    void (*left_trap)(const tessera_cell_context *ctx, tessera_entity *entity, void *data, uint32_t tag,
                      tessera_entity *other);
    /* A timer set with api->add_timer fired. */
    void (*timer)(const tessera_cell_context *ctx, tessera_entity *entity, void *data, uint64_t timer_id, uint32_t tag,
                  uint64_t user_data);
} tessera_cell_hooks;

/* The body of a cell method: `caller` is the entity that called it (its
 * handle; for a call from a client, the client's own entity), `args` its
 * arguments as the definitions type them (read with api->arg_*). The
 * engine has checked exposure and argument types already; what only the
 * game can judge (may the caller reach that target?) is the method's. */
typedef void (*tessera_cell_method)(const tessera_cell_context *ctx, tessera_entity *entity, void *data, tessera_handle caller,
                                    const tessera_args *args);

/* Called once per tick, before timers and messages, for the game as a
 * whole (spawning, world rules). */
typedef void (*tessera_cell_tick)(const tessera_cell_context *ctx);

/* ---- engine services (cell side) -------------------------------------------- */

struct tessera_cell_api {
    uint32_t abi_version; /* the engine's; the same as the module's, or it would not be loaded */

    /* -- registration: only while cell_init runs -- */

    /* Registers the rules of class `class_name` (which the definitions must
     * declare): its hooks (copied), and its per-entity data of `data_size`
     * bytes (0: none) described by `fields` (copied; every field must fit
     * in data_size). NULL if the class is unknown, registered twice, or a
     * field is bad (logged). */
    tessera_class *(*register_class)(tessera_cellapp *app, const char *class_name, const tessera_cell_hooks *hooks,
                                     size_t data_size, const tessera_field *fields, size_t field_count);
    /* Gives cell method `method_name` of `cls` its body. -1 if the class
     * has no such cell method, or it has a body already. */
    int (*register_method)(tessera_cellapp *app, tessera_class *cls, const char *method_name,
                           tessera_cell_method body);
    /* The game's tick (NULL: none). */
    void (*set_tick)(tessera_cellapp *app, tessera_cell_tick tick);

    /* -- the game's settings: the config's "game" object -- */

    /* The setting `name` as a number, or `otherwise` when it is missing
     * (a present one of another type is logged and gives `otherwise`). */
    double (*setting_number)(tessera_cellapp *app, const char *name, double otherwise);

    /* -- classes and properties -- */

    /* A registered class by name (NULL if not registered). */
    tessera_class *(*find_class)(tessera_cellapp *app, const char *class_name);
    /* A property of a class by name: its id (>= 0), or -1 if the class
     * does not declare it. */
    int (*property_id)(const tessera_class *cls, const char *property_name);
    /* The element of a property's struct field or array entry named by a
     * path ("weapon", "slots[2].count"), for the *_at accessors. -1 if the
     * path names nothing. */
    int (*property_index)(const tessera_class *cls, int property_id, const char *path, uint32_t *index);

    /* -- entities -- */

    tessera_entity *(*resolve)(tessera_cellapp *app, tessera_handle handle);
    tessera_handle (*handle)(const tessera_entity *entity);
    tessera_class *(*class_of)(const tessera_entity *entity);
    const char *(*class_name)(const tessera_entity *entity);
    /* The entity's per-entity data (NULL if its class has none). */
    void *(*data)(tessera_entity *entity);
    bool (*is_real)(const tessera_entity *entity);
    bool (*has_client)(const tessera_entity *entity);
    void (*position)(const tessera_entity *entity, float position[3], float *yaw);
    /* The tick number of the entity's cell, and the engine's clocks. */
    uint32_t (*tick)(const tessera_entity *entity);
    uint64_t (*now_ms)(tessera_cellapp *app);      /* monotonic */
    uint64_t (*wall_ms)(tessera_cellapp *app);     /* Unix time */
    double (*random_unit)(tessera_cellapp *app);   /* [0, 1), not for secrets */

    /* -- properties (engine-owned, typed as declared; a write marks them
     *    dirty, and replication, persistence and offloading follow). The
     *    plain forms read element 0; the _at forms take an index from
     *    property_index. Setters refuse a ghost, a value outside the
     *    declared range or type, returning -1. -- */

    int (*get_int)(const tessera_entity *entity, int property, uint32_t index, int64_t *value);
    int (*get_uint)(const tessera_entity *entity, int property, uint32_t index, uint64_t *value);
    int (*get_float)(const tessera_entity *entity, int property, uint32_t index, double *value);
    int (*get_handle)(const tessera_entity *entity, int property, uint32_t index, tessera_handle *value);
    /* *value points into the entity's storage, valid until it is next set. */
    int (*get_string)(const tessera_entity *entity, int property, uint32_t index, const char **value,
                      size_t *length);
    int (*set_int)(tessera_entity *entity, int property, uint32_t index, int64_t value);
    int (*set_uint)(tessera_entity *entity, int property, uint32_t index, uint64_t value);
    int (*set_float)(tessera_entity *entity, int property, uint32_t index, double value);
    int (*set_handle)(tessera_entity *entity, int property, uint32_t index, tessera_handle value);
    int (*set_string)(tessera_entity *entity, int property, uint32_t index, const char *value, size_t length);

    /* -- timers (they travel with the entity) -- */

    /* Fires the class's timer hook `delay_ms` from now, then every
     * `repeat_ms` (0: once), with `tag` and `user_data`. Returns the
     * timer's id (> 0), or 0 for a ghost. */
    uint64_t (*add_timer)(tessera_entity *entity, uint64_t delay_ms, uint64_t repeat_ms, uint32_t tag,
                          uint64_t user_data);
    /* -1 if no such timer is pending. */
    int (*cancel_timer)(tessera_entity *entity, uint64_t timer_id);

    /* -- traps (they travel with the entity) -- */

    /* A square trap of half-side `radius` around the entity; every entity
     * crossing into it or out of it calls the class's trap hooks with
     * `tag`. Returns 0, or -1 (a ghost, a bad radius). */
    int (*add_trap)(tessera_entity *entity, uint32_t tag, float radius);

    /* -- reach: what an exposed method must check before it acts on an
     *    entity a client named -- */

    /* Whether `target` is in the view of `viewer`'s client (the entity
     * itself counts). False when viewer has no client. */
    bool (*in_view)(const tessera_entity *viewer, const tessera_entity *target);
    /* The distance between two entities on the ground (x, z), in metres. */
    double (*distance)(const tessera_entity *a, const tessera_entity *b);

    /* -- calls: arguments are built for one method and freed by the
     *    caller after the call (the call copies them) -- */

    /* Arguments for method `method_name` of `part` of `cls`, every one at
     * its default; NULL if there is no such method. */
    tessera_args *(*args_create)(const tessera_class *cls, tessera_part part, const char *method_name);
    void (*args_free)(tessera_args *args);
    int (*arg_get_int)(const tessera_args *args, unsigned index, int64_t *value);
    int (*arg_get_uint)(const tessera_args *args, unsigned index, uint64_t *value);
    int (*arg_get_float)(const tessera_args *args, unsigned index, double *value);
    int (*arg_get_handle)(const tessera_args *args, unsigned index, tessera_handle *value);
    int (*arg_get_string)(const tessera_args *args, unsigned index, const char **value, size_t *length);
    int (*arg_set_int)(tessera_args *args, unsigned index, int64_t value);
    int (*arg_set_uint)(tessera_args *args, unsigned index, uint64_t value);
    int (*arg_set_float)(tessera_args *args, unsigned index, double value);
    int (*arg_set_handle)(tessera_args *args, unsigned index, tessera_handle value);
    int (*arg_set_string)(tessera_args *args, unsigned index, const char *value, size_t length);

    /* Calls cell method `method_name` of `target` for `from`: at once when
     * the target is a real here, else on its cellapp, wherever it is.
     * -1 if its class has no such method. */
    int (*call_cell)(tessera_entity *from, tessera_entity *target, const char *method_name,
                     const tessera_args *args);
    /* Calls base method `method_name` (part BASE), or through the base its
     * client's (part CLIENT), of the entity `target` of class
     * `class_name`, wherever its base is. A call that cannot be delivered
     * comes back to the caller's base as a failure. -1 if there is no
     * such method. */
    int (*call_base)(tessera_entity *from, tessera_handle target, const char *class_name, tessera_part part,
                     const char *method_name, const tessera_args *args);
    /* Calls client method `method_name` of `entity` on its own client
     * only, or on every client that sees it (its own included). */
    int (*call_clients)(tessera_entity *entity, const char *method_name, const tessera_args *args,
                        bool every_observer);

    /* -- the world -- */

    /* The space players spawn in, and its spawn disc. */
    const char *(*default_space)(tessera_cellapp *app);
    int (*spawn_area)(tessera_cellapp *app, const char *space, float *x, float *z, float *radius);
    /* Creates a real of `class_name` with no base in `space` at a point:
     * here, or (a point in another cell) it moves there at the end of the
     * tick. Its created hook runs before this returns (so not from
     * cell_init: spawn from the tick). Returns its handle,
     * or TESSERA_HANDLE_NONE when no id is to hand yet (ids come from
     * Redis in blocks: try again next tick), the space has no cell here,
     * or the point is outside the space. */
    tessera_handle (*spawn)(tessera_cellapp *app, const char *class_name, const char *space, float x, float y,
                            float z, float yaw);
    /* Moves the entity to a point in this space (space NULL or "") or
     * another. Within the space it is there when this returns (the
     * teleported hook has run); into another space it goes at the end of
     * the tick, and the teleported hook runs where it arrives. -1 with the
     * reason logged if there is no cell there. */
    int (*teleport)(tessera_entity *entity, const char *space, float x, float y, float z);

    /* Logs a line with the cellapp's prefix; `entity` may be NULL. */
    void (*log)(tessera_cellapp *app, tessera_log_level level, const tessera_entity *entity, const char *format, ...)
        __attribute__((format(printf, 4, 5)));
};

/* ---- the module --------------------------------------------------------------- */

typedef struct tessera_game_module {
    uint32_t abi_version;    /* TESSERA_GAME_ABI_VERSION, as the module was built */
    const char *name;
    /* The cellapp's start: register classes and methods; store the game's
     * own state, if any, in *game (handed to the tick and to cell_shutdown).
     * `api` stays valid until cell_shutdown returns. A nonzero return stops
     * the cellapp, which names the module. */
    int (*cell_init)(tessera_cellapp *app, const tessera_cell_api *api, void **game);
    /* The cellapp is stopping: free what cell_init made. May be NULL. */
    void (*cell_shutdown)(tessera_cellapp *app, void *game);
} tessera_game_module;

#ifdef __cplusplus
}
#endif

#endif
