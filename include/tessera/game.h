/* tessera/game.h -- the game ABI: the only header a game module includes.
 *
 * A game is a shared object (a .so) that the cellapp and the baseapp load
 * with dlopen. Their configs name it next to the entity definitions:
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
 * A module in five steps (demo/game/ is the full example: demo.c, the cell
 * rules in demo_cell.c and demo_world.c, the base rules in demo_base.c;
 * demo/README.md walks through adding a class):
 *
 *     #include <tessera/game.h>
 *
 *     typedef struct guard { int32_t alarms; } guard;
 *     static const tessera_field guard_fields[] = {
 *         TESSERA_FIELD(guard, alarms, TESSERA_FIELD_INT32),
 *     };
 *
 *     static void guard_created(const tessera_cell_context *ctx, tessera_entity *e, void *data) {
 *         guard *g = data;                              // zeroed by the engine
 *         g->alarms = 0;
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
 *   - Everything an entity is must be in what the engine keeps for it: its
 *     properties, timers and thinks, traps, controllers, name and output
 *     connections, and its per-entity data (the field table). An entity
 *     may leave for another cellapp at the end of any tick, and only those
 *     travel. The game keeps no per-entity state of its own beside them.
 *   - A time that travels (in a property, the per-entity data, an event's
 *     fields, a call's arguments) is a wall_ms, never a now_ms: now_ms is
 *     one process's monotonic clock and means nothing on another.
 *   - A ghost (a read-only copy of an entity whose real is on another
 *     cell) can be read, not written: setters and timers refuse it.
 *   - Hooks run on the process's one thread; they must not block.
 *   - Every api function that can fail returns 0 or a value, and -1 (or
 *     NULL) with the reason logged by the engine; none aborts.
 *
 * A cellapp tick runs, in this order (steps 2 to 6 cell by cell;
 * cellapp/tick.c lists the engine's own phases around them):
 *   1. the game's tick (set_tick), once;
 *   2. the timers and thinks that are due (the timer hook, the thinks), in
 *      (due time, id) order, between the game systems' before_thinks and
 *      after_thinks; then the entity I/O events that are due (the inputs),
 *      in (due time, firing) order;
 *   3. the controllers: every movement chain advances one tick (the
 *      controller hooks);
 *   4. the flush: traps learn who crossed them since the last tick, the
 *      moves of step 3 and those that arrived between ticks included (the
 *      trap hooks);
 *   5. the pack: what changed is encoded once per audience, and every
 *      witness streams its client its view, then the client calls and the
 *      game events queued for it; then the view hooks hear this tick's
 *      enters and leaves of views (entered_view, left_view);
 *   6. reals the game destroyed go (their destroyed hooks run once), and
 *      reals past their cell's edge move to the cellapp that holds the
 *      point (leaving here, arrived there, from its next tick on).
 * Messages are not a step: method calls from clients, bases and other
 * cells (method bodies), clients' moves, entity I/O inputs fired on other
 * cellapps and game events fired by other processes run between ticks, as
 * they arrive; game events fired here reach the listeners at once. A change
 * made between ticks or at any step before 5 reaches the clients with the
 * next pack.
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

/* 2: game events and user messages (event_args_create, listen_event,
 * fire_event, send_event on both sides).
 * 3: restored (a real brought back after its cellapp died).
 * 4: named dispatch (the method, think and input hooks: one body for many,
 *    as a script host needs), property_changed, and the services of the
 *    "writing a game" work: round traps, base-side clock, random and
 *    timers, listing bases by class, server-wide events. */
#define TESSERA_GAME_ABI_VERSION 4u

/* The symbol the engine looks up in the module. */
#define TESSERA_GAME_SYMBOL "tessera_game"
#define TESSERA_GAME_EXPORT __attribute__((visibility("default")))

/* ---- what the engine hands out --------------------------------------------- */

typedef struct tessera_cellapp tessera_cellapp; /* the cellapp, opaque */
typedef struct tessera_entity tessera_entity;   /* an entity here, valid for one hook call */
typedef struct tessera_class tessera_class;     /* a registered class */
typedef struct tessera_args tessera_args;       /* a method's arguments */
typedef struct tessera_cell_api tessera_cell_api;
typedef struct tessera_value tessera_value; /* an input's parameter (below) */

/* What every hook and method body is handed: the cellapp, the engine's
 * services, and the game's own state (what cell_init stored in *game). */
typedef struct tessera_cell_context {
    tessera_cellapp *app;
    const tessera_cell_api *api;
    void *game;
} tessera_cell_context;

/* Timer tags from this up are the engine's (thinks). */
#define TESSERA_TIMER_TAG_LIMIT 0x80000000u

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
 * skipped with a log line and a new one starts at zero. The table is also
 * Source's datadesc for maps: a map entity's keyvalue that names no
 * property of its class but names a field here sets that field before the
 * created hook runs ("courage": 5, "motto": "hold", "home": [1, 2, 3], or
 * any of them as text: "5"); one that does not convert or fit skips the
 * entity, naming the key. */
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
    size_t size; /* bytes; for STRING the array's size */
} tessera_field;

#define TESSERA_FIELD(type_name, member, field_type) \
    { #member, field_type, offsetof(type_name, member), sizeof(((type_name *)0)->member) }

/* (ABI 4) The shape of a trap (api->add_trap_shaped, its hooks below) and
 * of a range query (api->query_range), around an entity's position. Inside
 * includes the edge; distances are computed in double precision from the
 * positions.
 *   BOX: the square of half-side `radius` on the ground (x, z), of any
 *     height; in a 3D space (its layout's "three_d") a cube. What add_trap
 *     makes: "within 5 m" reaches 7.07 m at its corners.
 *   CIRCLE: within `radius` on the ground, dx*dx + dz*dz <= radius*radius,
 *     of any height (in a 3D space, up to `radius` up or down too: an
 *     upright cylinder).
 *   SPHERE: within `radius` in 3D, dx*dx + dy*dy + dz*dz <= radius*radius. */
typedef enum tessera_trap_shape {
    TESSERA_TRAP_BOX = 0,
    TESSERA_TRAP_CIRCLE = 1,
    TESSERA_TRAP_SPHERE = 2,
} tessera_trap_shape;

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
    /* Its client's view gained `other` (it will be sent its ENTER), or lost
     * the entity `other` (its LEAVE went out). Run once every witness of
     * the tick has written its stream (step 5). */
    void (*entered_view)(const tessera_cell_context *ctx, tessera_entity *entity, void *data, tessera_entity *other);
    void (*left_view)(const tessera_cell_context *ctx, tessera_entity *entity, void *data, tessera_handle other);
    /* It got a client's view (a witness), or lost it. */
    void (*got_witness)(const tessera_cell_context *ctx, tessera_entity *entity, void *data);
    void (*lost_witness)(const tessera_cell_context *ctx, tessera_entity *entity, void *data);
    /* `other` (a real or a ghost) stepped into, or out of, the trap the
     * game gave it with api->add_trap(..., tag, ...) or add_trap_shaped. */
    void (*entered_trap)(const tessera_cell_context *ctx, tessera_entity *entity, void *data, uint32_t tag,
                         tessera_entity *other);
    void (*left_trap)(const tessera_cell_context *ctx, tessera_entity *entity, void *data, uint32_t tag,
                      tessera_entity *other);
    /* A timer set with api->add_timer fired. */
    void (*timer)(const tessera_cell_context *ctx, tessera_entity *entity, void *data, uint64_t timer_id, uint32_t tag,
                  uint64_t user_data);
    /* Controllers (api->move_to_point and the rest): a move moved it this
     * tick; a move reached its destination or a turn its yaw (the
     * controller is over); a move failed (its target is gone, its next
     * step leaves the space: the chain is stopped). Each may start, stop
     * or cancel controllers. */
    void (*controller_moved)(const tessera_cell_context *ctx, tessera_entity *entity, void *data,
                             uint32_t controller_id, uint64_t user_data);
    void (*controller_arrived)(const tessera_cell_context *ctx, tessera_entity *entity, void *data,
                               uint32_t controller_id, uint64_t user_data);
    void (*controller_failed)(const tessera_cell_context *ctx, tessera_entity *entity, void *data,
                              uint32_t controller_id, uint64_t user_data, const char *reason);
    /* The cellapp that held this real died and this one brought it back:
     * its fields, timers, traps and controllers are as they were
     * `state_age_ms` ago (its last backup), and its position and the
     * values its ghosts carry are a tick old at most when `from_ghost`.
     * Whatever happened to it since that state is gone: a game that
     * counts on it (an item just handed over) settles it here. Called
     * instead of created and arrived; a player's client stays connected
     * and is told (EntityRestored). */
    void (*restored)(const tessera_cell_context *ctx, tessera_entity *entity, void *data, uint32_t state_age_ms,
                     bool from_ghost);

    /* -- named dispatch (ABI 4): one body for many names. A cell method of
     *    the class with no body of its own (register_method) runs `method`,
     *    named; a think or an input registered with a NULL function runs
     *    `think` or `input`, named. The Lua host (docs/lua.md) is built on
     *    these; a C game may use them for a table-driven class. -- */
    void (*method)(const tessera_cell_context *ctx, tessera_entity *entity, void *data, const char *method_name,
                   tessera_handle caller, const tessera_args *args);
    void (*think)(const tessera_cell_context *ctx, tessera_entity *entity, void *data, const char *think_name);
    void (*input)(const tessera_cell_context *ctx, tessera_entity *entity, void *data, const char *input_name,
                  tessera_handle activator, tessera_handle caller, const tessera_value *value);
    /* -- (ABI 4) A property of this real changed: a setter (api->set_*,
     *    from any hook, method body, think or listener) stored a value
     *    other than the one it held; setting the value it holds, or a
     *    refused write, runs nothing. `property` is its id, `index` the
     *    element set (0 for a whole property). Runs after the value is
     *    stored, before the setter returns. A set from inside this hook
     *    (or a hook it sets off) of the same property of the same entity
     *    does not call it again; other properties' hooks run, nested, 16
     *    deep at most. The engine itself changes no property of a real
     *    after it is made: the values it is made with (a base's, a map's
     *    keyvalues), brings with it (arrived) or is restored with
     *    (restored) run no property_changed. Reals only: a ghost takes its
     *    real's values silently. -- */
    void (*property_changed)(const tessera_cell_context *ctx, tessera_entity *entity, void *data, int property,
                             uint32_t index);
} tessera_cell_hooks;

/* The body of a cell method: `caller` is the entity that called it (its
 * handle; for a call from a client, the client's own entity), `args` its
 * arguments as the definitions type them (read with api->args). The
 * engine has checked exposure and argument types already; what only the
 * game can judge (may the caller reach that target?) is the method's. */
typedef void (*tessera_cell_method)(const tessera_cell_context *ctx, tessera_entity *entity, void *data,
                                    tessera_handle caller, const tessera_args *args);

/* A think (Source's SetContextThink): a function the game names at
 * registration and schedules by that name on an entity; each name is one
 * context, so an entity has as many pending thinks as names. */
typedef void (*tessera_cell_think)(const tessera_cell_context *ctx, tessera_entity *entity, void *data);

/* An input's parameter, converted from the firing's text to the type the
 * input was registered with (TESSERA_FIELD_STRING: the text itself). */
struct tessera_value {
    tessera_field_type type;
    int64_t i;        /* INT32, INT64 */
    uint64_t u;       /* UINT32, UINT64 */
    double f;         /* FLOAT, DOUBLE */
    bool b;           /* BOOL: "1", "0", "true", "false" */
    tessera_handle h; /* HANDLE: an entity id */
    float v[3];       /* VECTOR3: "x y z" */
    const char *s;    /* the text (every type) */
};

/* An input (Source's entity I/O): what an output connected to it makes the
 * entity do. `activator` set the chain off; `caller` is the entity whose
 * output fired. */
typedef void (*tessera_cell_input)(const tessera_cell_context *ctx, tessera_entity *entity, void *data,
                                   tessera_handle activator, tessera_handle caller, const tessera_value *value);

/* A game system (Source's IGameSystem): a part of the game with a start,
 * an end and per-tick work of its own (a weather system, a quest book).
 * Systems start in the order they were registered, once cell_init has
 * returned, and stop in the reverse order; one whose init fails stops the
 * cellapp from starting, naming it (the ones already started are stopped
 * first). Each hook may be NULL. */
typedef struct tessera_system {
    const char *name;
    int (*init)(const tessera_cell_context *ctx);
    void (*shutdown)(const tessera_cell_context *ctx);
    void (*before_thinks)(const tessera_cell_context *ctx); /* each tick, before the timers and thinks (step 2) */
    void (*after_thinks)(const tessera_cell_context *ctx);  /* each tick, after them and the I/O events */
} tessera_system;

/* Called once per tick, before timers and messages, for the game as a
 * whole (spawning, world rules). */
typedef void (*tessera_cell_tick)(const tessera_cell_context *ctx);

/* A server listener of a game event: `source` fired it (NONE: the game as
 * a whole); `fields` are valid during the call only. */
typedef void (*tessera_cell_event_listener)(const tessera_cell_context *ctx, const char *event, tessera_handle source,
                                            const tessera_args *fields, void *user_data);

/* ---- method arguments (both sides) ------------------------------------------ */

/* A method's arguments (or an event's fields), by position (0 = the first
 * declared) or by their declared name, typed as the definitions declare
 * them. A getter or setter of the wrong type, an index past the last
 * argument, or a value outside the declared range returns -1. */
typedef struct tessera_args_api {
    void (*free)(tessera_args *args);
    int (*get_int)(const tessera_args *args, unsigned index, int64_t *value);
    int (*get_uint)(const tessera_args *args, unsigned index, uint64_t *value);
    int (*get_float)(const tessera_args *args, unsigned index, double *value);
    int (*get_handle)(const tessera_args *args, unsigned index, tessera_handle *value);
    int (*get_bool)(const tessera_args *args, unsigned index, bool *value);
    /* *value points into the arguments, valid while they live. */
    int (*get_string)(const tessera_args *args, unsigned index, const char **value, size_t *length);
    int (*set_int)(tessera_args *args, unsigned index, int64_t value);
    int (*set_uint)(tessera_args *args, unsigned index, uint64_t value);
    int (*set_float)(tessera_args *args, unsigned index, double value);
    int (*set_handle)(tessera_args *args, unsigned index, tessera_handle value);
    int (*set_bool)(tessera_args *args, unsigned index, bool value);
    int (*set_string)(tessera_args *args, unsigned index, const char *value, size_t length);

    /* -- by name (ABI 4): the argument or field declared as `name`,
     *    set_uint_named(fields, "spell_id", 7) for set_uint(fields, 2, 7).
     *    Positions are the faster path for code that runs often: look a
     *    position up once with index_of and keep it. -- */

    /* The position of the argument or field named `name`, or -1 if there
     * is none (not logged: a question, not a mistake). */
    int (*index_of)(const tessera_args *args, const char *name);
    /* The accessors above by name: -1 as theirs, and -1 logged (naming
     * the method or event) for a name it does not declare. */
    int (*get_int_named)(const tessera_args *args, const char *name, int64_t *value);
    int (*get_uint_named)(const tessera_args *args, const char *name, uint64_t *value);
    int (*get_float_named)(const tessera_args *args, const char *name, double *value);
    int (*get_handle_named)(const tessera_args *args, const char *name, tessera_handle *value);
    int (*get_bool_named)(const tessera_args *args, const char *name, bool *value);
    int (*get_string_named)(const tessera_args *args, const char *name, const char **value, size_t *length);
    int (*set_int_named)(tessera_args *args, const char *name, int64_t value);
    int (*set_uint_named)(tessera_args *args, const char *name, uint64_t value);
    int (*set_float_named)(tessera_args *args, const char *name, double value);
    int (*set_handle_named)(tessera_args *args, const char *name, tessera_handle value);
    int (*set_bool_named)(tessera_args *args, const char *name, bool value);
    int (*set_string_named)(tessera_args *args, const char *name, const char *value, size_t length);
} tessera_args_api;

/* ---- game events (both sides) ----------------------------------------------
 *
 * Source's game events and user messages. An event is declared in the
 * definitions' JSON, next to the entities, with typed fields:
 *
 *     "events": [ { "name": "player_joined",
 *                   "args": [ { "name": "player", "type": "entity" },
 *                             { "name": "name", "type": "string", "max_length": 32 } ] } ]
 *
 * Game code builds one firing's fields with event_args_create and the args
 * table, by position or by name (a field of the wrong type is a -1 from
 * the setter), then fires it to a scope, or sends it to chosen clients (a
 * user message). Firing an event the definitions do not declare, or with
 * fields built for another event or method, is refused with -1 and the
 * reason logged. Clients
 * receive the fields coded as a method call's arguments (proto/client.proto:
 * GameEvent) and decode them from the definitions they got at login. */

/* Who hears a fired event. Each of the first four scopes includes the ones
 * above it; SERVERS is apart: EVERYONE's listeners without its clients.
 * The listeners of the process that fires an event hear it at once, before
 * fire_event returns (a listener may fire events of its own, 8 deep). */
typedef enum tessera_event_scope {
    /* The listeners of this process only: no client. */
    TESSERA_EVENT_SERVER = 0,
    /* The clients that see the source when their next update goes (its
     * own client included), wherever they are in the space. */
    TESSERA_EVENT_VIEWERS = 1,
    /* Every client in the source's space, and the listeners of every
     * cellapp that holds a cell of it. Cell side only. */
    TESSERA_EVENT_SPACE = 2,
    /* Every client of the cluster (those without a space too), and the
     * listeners of every cellapp and baseapp. */
    TESSERA_EVENT_EVERYONE = 3,
    /* (ABI 4) The listeners of every process of the cluster (every cellapp
     * and every baseapp, this one at once), and no client: server-side
     * news such as "the boss is down, open the gates". Both sides. */
    TESSERA_EVENT_SERVERS = 4,
} tessera_event_scope;

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
    int (*register_method)(tessera_cellapp *app, tessera_class *cls, const char *method_name, tessera_cell_method body);
    /* Names think `name` of `cls` (at most 16 per class; the same names in
     * the same order on every cellapp, since a pending think travels with
     * its entity by its place in this list). -1 if taken or full. */
    int (*register_think)(tessera_cellapp *app, tessera_class *cls, const char *name, tessera_cell_think think);
    /* Names input `name` of `cls`, taking a parameter of `type` (at most
     * 32 per class). -1 if taken or full. */
    int (*register_input)(tessera_cellapp *app, tessera_class *cls, const char *name, tessera_field_type type,
                          tessera_cell_input input);
    /* Registers a game system (copied; at most 16). -1 without a name, or
     * when full. */
    int (*register_system)(tessera_cellapp *app, const tessera_system *system);
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
     * path ("weapon", "slots[2].count"), as the `index` the accessors below
     * take. -1 if the path names nothing. */
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
    /* The tick number of the entity's cell, and the engine's clocks.
     * now_ms is this process's monotonic clock: for timing within the
     * process only; its value means nothing on another cellapp (each
     * counts from its own start), so one stored in anything that travels
     * (a property, the per-entity data, an event, a call) is wrong as
     * soon as the entity moves. wall_ms is Unix time, the cluster's one
     * clock: every process reads it alike, to within the hosts' clock
     * sync (NTP: a few ms; the engine ages moved timers by it too). Store
     * wall_ms, never now_ms; a difference of two wall_ms may be negative
     * if a host's clock is stepped: clamp it. */
    uint32_t (*tick)(const tessera_entity *entity);
    uint64_t (*now_ms)(tessera_cellapp *app);    /* monotonic, this process's own */
    uint64_t (*wall_ms)(tessera_cellapp *app);   /* Unix time: the one to store */
    double (*random_unit)(tessera_cellapp *app); /* [0, 1), not for secrets */

    /* -- properties (engine-owned, typed as declared; a write marks them
     *    dirty, and replication, persistence and offloading follow). Each
     *    accessor takes `index`: 0 for a property of one value, or, for a
     *    struct field or an array entry, what property_index gives for its
     *    path. Setters refuse a ghost, a value outside the declared range
     *    or type, returning -1. -- */

    int (*get_int)(const tessera_entity *entity, int property, uint32_t index, int64_t *value);
    int (*get_uint)(const tessera_entity *entity, int property, uint32_t index, uint64_t *value);
    int (*get_float)(const tessera_entity *entity, int property, uint32_t index, double *value);
    int (*get_handle)(const tessera_entity *entity, int property, uint32_t index, tessera_handle *value);
    int (*get_bool)(const tessera_entity *entity, int property, uint32_t index, bool *value);
    /* *value points into the entity's storage, valid until it is next set. */
    int (*get_string)(const tessera_entity *entity, int property, uint32_t index, const char **value, size_t *length);
    int (*set_int)(tessera_entity *entity, int property, uint32_t index, int64_t value);
    int (*set_uint)(tessera_entity *entity, int property, uint32_t index, uint64_t value);
    int (*set_float)(tessera_entity *entity, int property, uint32_t index, double value);
    int (*set_handle)(tessera_entity *entity, int property, uint32_t index, tessera_handle value);
    int (*set_bool)(tessera_entity *entity, int property, uint32_t index, bool value);
    int (*set_string)(tessera_entity *entity, int property, uint32_t index, const char *value, size_t length);

    /* -- timers (they travel with the entity) -- */

    /* Fires the class's timer hook `delay_ms` from now, then every
     * `repeat_ms` (0: once), with `tag` (below TESSERA_TIMER_TAG_LIMIT)
     * and `user_data`. Returns the timer's id (> 0), or 0 for a ghost or a
     * tag out of range. All timers and thinks run on the tick (step 2),
     * in (due time, id) order, from one scheduler per cell: a tick on
     * which none is due costs nothing, however many wait. */
    uint64_t (*add_timer)(tessera_entity *entity, uint64_t delay_ms, uint64_t repeat_ms, uint32_t tag,
                          uint64_t user_data);
    /* -1 if no such timer is pending. */
    int (*cancel_timer)(tessera_entity *entity, uint64_t timer_id);
    /* Runs think `name` (register_think) `delay_ms` from now, once,
     * replacing the one pending under that name. -1 for a ghost or an
     * unknown name. */
    int (*set_think)(tessera_entity *entity, const char *name, uint64_t delay_ms);
    /* Cancels the pending think `name`. -1 if none is pending. */
    int (*cancel_think)(tessera_entity *entity, const char *name);

    /* -- traps (they travel with the entity) -- */

    /* A square trap of half-side `radius` around the entity; every entity
     * crossing into it or out of it calls the class's trap hooks with
     * `tag`. Returns its controller id (> 0; cancel_controller removes
     * it), or 0 (a ghost, a bad radius). For a circle or a sphere, see
     * add_trap_shaped (at the end). */
    uint32_t (*add_trap)(tessera_entity *entity, uint32_t tag, float radius);

    /* -- controllers (seed 004): one movement chain per entity, which
     *    travels with it to other cellapps -- */

    /* Moves the entity at `speed` m/s to `destination`, to within
     * `distance` of it; `face`: it turns the way it goes. Any move or turn
     * under way stops first. Returns the controller's id (> 0), or 0 (a
     * ghost, a bad speed, a point outside the space). */
    uint32_t (*move_to_point)(tessera_entity *entity, const float destination[3], float speed, float distance,
                              bool face, uint64_t user_data);
    /* The same towards `target` (an entity in this cell: real or ghost),
     * followed as it moves; it fails if the target goes. */
    uint32_t (*move_to_entity)(tessera_entity *entity, tessera_handle target, float speed, float distance, bool face,
                               uint64_t user_data);
    /* Walks the entity the shortest walkable way to `destination`: a path
     * on its space's navigation mesh (built from the space's map, the
     * cellapp's "maps" setting), followed by one move controller through
     * every corner, which goes on across cellapps like any move. Returns
     * the controller's id, or 0 with why in `why` (the space has no map,
     * the entity or the destination is off the mesh, no path joins them):
     * then no controller is made, and a move under way goes on. */
    uint32_t (*navigate)(tessera_entity *entity, const float destination[3], float speed, float distance, bool face,
                         uint64_t user_data, char *why, size_t why_size);
    /* Turns the entity to `yaw` (radians) at `speed` radians a second; any
     * move or turn under way stops first. */
    uint32_t (*turn_to)(tessera_entity *entity, float yaw, float speed, uint64_t user_data);
    /* Cancels a controller by id: the move's or the turn's id stops the
     * whole movement chain; a trap's removes that trap alone. -1 if the
     * entity has no such controller. No hook runs. */
    int (*cancel_controller)(tessera_entity *entity, uint32_t controller_id);
    /* cancelController("Movement"): stops the movement chain, if any. */
    void (*stop_movement)(tessera_entity *entity);

    /* -- reach: what an exposed method must check before it acts on an
     *    entity a client named -- */

    /* Whether `target` is in the view of `viewer`'s client (the entity
     * itself counts). False when viewer has no client. */
    bool (*in_view)(const tessera_entity *viewer, const tessera_entity *target);
    /* The distance between two entities on the ground (x, z), in metres. */
    double (*distance)(const tessera_entity *a, const tessera_entity *b);

    /* -- calls: arguments are built for one method, filled and read with
     *    the `args` table, and freed by the caller after the call (the
     *    call copies them) -- */

    /* Arguments for method `method_name` of `part` of `cls`, every one at
     * its default; NULL if there is no such method. */
    tessera_args *(*args_create)(const tessera_class *cls, tessera_part part, const char *method_name);
    const tessera_args_api *args;

    /* Calls cell method `method_name` of `target` for `from`: at once when
     * the target is a real here, else on its cellapp, wherever it is.
     * -1 if its class has no such method. */
    int (*call_cell)(tessera_entity *from, tessera_entity *target, const char *method_name, const tessera_args *args);
    /* Calls base method `method_name` (part BASE), or through the base its
     * client's (part CLIENT), of the entity `target` of class
     * `class_name`, wherever its base is. A call that cannot be delivered
     * comes back to the caller's base as a failure. -1 if there is no
     * such method. */
    int (*call_base)(tessera_entity *from, tessera_handle target, const char *class_name, tessera_part part,
                     const char *method_name, const tessera_args *args);
    /* Calls client method `method_name` of `entity` on its own client
     * only, or on every client that sees it (its own included). */
    int (*call_clients)(tessera_entity *entity, const char *method_name, const tessera_args *args, bool every_observer);

    /* -- names and look-ups (a map's "name", or set_name; several may
     *    share one). Both look-ups are hash indexes over the reals of this
     *    cellapp: no scan -- */

    /* The entity's look-up name: what find_by_name and entity I/O targets
     * match, given by a map's "name" or by set_name, travelling with the
     * entity ("" when it has none). It is NOT a property: a class's
     * property called "name" (the demo Avatar's display name, which
     * clients see) is read and written like any other,
     * get_string(entity, property_id(cls, "name"), 0, ...), and neither
     * changes the other. */
    int (*set_name)(tessera_entity *entity, const char *name);
    const char *(*name)(const tessera_entity *entity);
    /* The reals here named `name`, or of class `class_name`: up to `max`
     * handles in `out`; returns how many there are. */
    size_t (*find_by_name)(tessera_cellapp *app, const char *name, tessera_handle *out, size_t max);
    size_t (*find_by_class)(tessera_cellapp *app, const char *class_name, tessera_handle *out, size_t max);

    /* -- entity I/O (Source's outputs and inputs; the rules are in
     *    cellapp/entity_io.h): an output holds connections, firing it
     *    queues one event per connection, and the tick runs the events
     *    that are due after the timers and thinks (step 2) -- */

    /* Connects output `output` of the entity to input `input` of what
     * `target` names: "!self", "!activator", "!caller", or a name (else a
     * class of that name). `parameter` overrides the firing's (NULL or "":
     * keep it); `delay_ms` after each firing; `times` firings (-1:
     * unlimited). Connections travel with the entity. */
    int (*connect)(tessera_entity *entity, const char *output, const char *target, const char *input,
                   const char *parameter, uint32_t delay_ms, int32_t times);
    /* Fires the output: returns the events queued. */
    size_t (*fire_output)(tessera_entity *entity, const char *output, tessera_handle activator, tessera_handle caller,
                          const char *parameter);

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
    tessera_handle (*spawn)(tessera_cellapp *app, const char *class_name, const char *space, float x, float y, float z,
                            float yaw);
    /* Destroys an entity without a base (one the game spawned) at the end
     * of this tick: until then it resolves and runs as before; then its
     * destroyed hook runs, once, however often destroy was called, and
     * its handle resolves to NULL. -1 for a ghost or a player's entity
     * (its base destroys it). */
    int (*destroy)(tessera_entity *entity);
    /* Moves the entity to a point in this space (space NULL or "") or
     * another. Within the space it is there when this returns (the
     * teleported hook has run); into another space it goes at the end of
     * the tick, and the teleported hook runs where it arrives. -1 with the
     * reason logged if there is no cell there. */
    int (*teleport)(tessera_entity *entity, const char *space, float x, float y, float z);

    /* Logs a line with the cellapp's prefix; `entity` may be NULL. */
    void (*log)(tessera_cellapp *app, tessera_log_level level, const tessera_entity *entity, const char *format, ...)
        __attribute__((format(printf, 4, 5)));

    /* -- game events and user messages (the rules are above, at
     *    tessera_event_scope) -- */

    /* The fields of event `event`, every one at its default, for the args
     * table; freed by the caller. NULL (logged) if the definitions declare
     * no such event. */
    tessera_args *(*event_args_create)(tessera_cellapp *app, const char *event);
    /* Calls `listener` whenever this cellapp hears `event` (at most 64
     * listeners). -1 if there is no such event, or when full. */
    int (*listen_event)(tessera_cellapp *app, const char *event, tessera_cell_event_listener listener, void *user_data);
    /* Fires `event` from `source` (NULL: the game as a whole, for the
     * SERVER, EVERYONE and SERVERS scopes) to `scope`. `fields` NULL:
     * every field at its default. -1 for an unknown event, fields made for
     * something else, a ghost source, or a scope that needs a source
     * without one. */
    int (*fire_event)(tessera_cellapp *app, tessera_entity *source, const char *event, const tessera_args *fields,
                      tessera_event_scope scope);
    /* A user message: sends `event` to the clients of the `count` entities
     * in `recipients`, wherever their reals are (an entity without a client
     * gets nothing), with `source` (may be NULL) as its source, whether or
     * not they see it. No listener hears it. Returns how many were sent
     * on (here, or toward another cellapp), or -1 as fire_event does. */
    int (*send_event)(tessera_cellapp *app, tessera_entity *source, const char *event, const tessera_args *fields,
                      const tessera_handle *recipients, size_t count);

    /* -- round traps and range queries (ABI 4); the shapes are above the
     *    hooks (tessera_trap_shape) -- */

    /* A trap of `shape` and `radius` around the entity; add_trap is this
     * with TESSERA_TRAP_BOX. The trap hooks run with `tag` once for each
     * entity (real or ghost) that comes inside it, and once when it goes
     * out again (it moved, or the trap's owner did); one destroyed inside
     * it, or gone from the cell, is no longer inside, and no hook runs
     * (there is no entity left to hand over). They run at the flush (step
     * 4), by the positions then: an entity that went in and out between
     * two flushes is heard of not at all. A round trap finds its
     * candidates with the square that holds it, as a box does, then
     * measures each entity in that square whenever it (or the owner)
     * moved: one distance a mover in the square, per tick. It travels
     * with the entity (its shape, and who is inside: those fire no enter
     * again where it arrives). Returns the controller id (> 0;
     * cancel_controller removes it), or 0 (a ghost, a bad radius, an
     * unknown shape). */
    uint32_t (*add_trap_shaped)(tessera_entity *entity, uint32_t tag, tessera_trap_shape shape, float radius);
    /* The entities here (reals and ghosts of the entity's cell; not
     * `around` itself) inside `shape` of `radius` around `around`, by the
     * rule its traps apply, as they are now: up to `max` handles in `out`,
     * in no order; returns how many there are (0 for a bad radius or
     * shape). It searches the cell's coordinate axes: it costs what the
     * square holds, not what the cell does. A cell knows the entities of
     * its neighbours within the cellapp's ghost_distance of its region:
     * a radius beyond that, near the cell's edge, misses what lies past. */
    size_t (*query_range)(const tessera_entity *around, tessera_trap_shape shape, float radius, tessera_handle *out,
                          size_t max);
};

/* ---- the base side ---------------------------------------------------------------
 *
 * The baseapp loads the same module (its own config's game_module) and
 * runs base_init. A base is the persistent part of an entity: its BASE
 * properties (saved to the database with it), and, for a player, its
 * client. Base code is what a client's base methods run, what entity
 * calls between bases run, and the long-lived logic of the game (a guild,
 * an auction house, a census). */

typedef struct tessera_baseapp tessera_baseapp;       /* the baseapp, opaque */
typedef struct tessera_base tessera_base;             /* a base here, valid for one hook call */
typedef struct tessera_base_class tessera_base_class; /* a registered class, base side */
typedef struct tessera_base_api tessera_base_api;

typedef struct tessera_base_context {
    tessera_baseapp *app;
    const tessera_base_api *api;
    void *game; /* what base_init stored */
} tessera_base_context;

/* What the engine tells the game about one base of a class (each
 * optional). Base properties the game sets are sent to the entity's own
 * client (the BASE_AND_CLIENT ones) when the hook returns. */
typedef struct tessera_base_hooks {
    /* Made: logged in, loaded, or created by game code. */
    void (*created)(const tessera_base_context *ctx, tessera_base *base);
    /* Going: it stays resolvable until this returns. */
    void (*destroyed)(const tessera_base_context *ctx, tessera_base *base);
    /* A client was given to it and may now call it (a login, a reconnect,
     * a giveClientTo). */
    void (*client_enabled)(const tessera_base_context *ctx, tessera_base *base);
    /* A write to the database finished (a failed one is retried by the
     * engine with the latest state; `detail` says why it failed). */
    void (*written)(const tessera_base_context *ctx, tessera_base *base, bool ok, const char *detail);
    /* A call this base made could not be delivered: its target is gone or
     * unknown. */
    void (*call_failed)(const tessera_base_context *ctx, tessera_base *base, tessera_handle target, tessera_part part,
                        const char *method_name);
    /* A giveClientTo from this base was refused by `rule`; it keeps its
     * client. */
    void (*handover_refused)(const tessera_base_context *ctx, tessera_base *base, tessera_handle target,
                             const char *rule);
    /* (ABI 4) A base method of the class with no body of its own runs
     * this, named (as the cell side's method hook). */
    void (*method)(const tessera_base_context *ctx, tessera_base *base, const char *method_name, tessera_handle caller,
                   const tessera_args *args);
    /* -- base timers (ABI 4): a timer set with api->add_timer on this
     *    base fired. It may cancel timers, set more, or destroy the base
     *    (its other timers then never fire). -- */
    void (*timer)(const tessera_base_context *ctx, tessera_base *base, uint64_t timer_id, uint32_t tag,
                  uint64_t user_data);
} tessera_base_hooks;

/* The body of a base method: `caller` is the calling entity (for a
 * client's call, its own). Exposure and argument types are checked. */
typedef void (*tessera_base_method)(const tessera_base_context *ctx, tessera_base *base, tessera_handle caller,
                                    const tessera_args *args);
/* About once a second while the baseapp runs (not while it drains). */
typedef void (*tessera_base_tick)(const tessera_base_context *ctx);
/* The answer of a global-name registration or look-up: `holder` is the
 * base that holds the name (NONE: nobody), `ok` whether this call got
 * what it asked (registered, or found). */
typedef void (*tessera_global_callback)(const tessera_base_context *ctx, bool ok, tessera_handle holder,
                                        void *user_data);
/* A server listener of a game event on the baseapp: it hears the events
 * fired here and those fired to everyone (or to the SERVERS) anywhere. */
typedef void (*tessera_base_event_listener)(const tessera_base_context *ctx, const char *event, tessera_handle source,
                                            const tessera_args *fields, void *user_data);
/* A base loaded from the database (or made new, the first time): its
 * handle, or NONE with `why`. */
typedef void (*tessera_loaded_callback)(const tessera_base_context *ctx, tessera_handle loaded, const char *why,
                                        void *user_data);

struct tessera_base_api {
    uint32_t abi_version;

    /* -- registration: only while base_init runs -- */
    tessera_base_class *(*register_class)(tessera_baseapp *app, const char *class_name,
                                          const tessera_base_hooks *hooks);
    int (*register_method)(tessera_baseapp *app, tessera_base_class *cls, const char *method_name,
                           tessera_base_method body);
    void (*set_tick)(tessera_baseapp *app, tessera_base_tick tick);
    /* The baseapp config's "game" object, as on the cell side. */
    double (*setting_number)(tessera_baseapp *app, const char *name, double otherwise);

    /* -- classes, bases, properties -- */
    tessera_base_class *(*find_class)(tessera_baseapp *app, const char *class_name);
    int (*property_id)(const tessera_base_class *cls, const char *property_name);
    /* A base on this baseapp, or NULL (gone, or held by another baseapp:
     * reach those with call_base). */
    tessera_base *(*resolve)(tessera_baseapp *app, tessera_handle handle);
    tessera_handle (*handle)(const tessera_base *base);
    tessera_base_class *(*class_of)(const tessera_base *base);
    const char *(*class_name)(const tessera_base *base);
    /* The account (or key) it was made for. The engine puts it in no
     * property and sends it to no client but its own: name players with a
     * display name of the game's (the demo's demo_names.c). */
    const char *(*account)(const tessera_base *base);
    bool (*has_client)(const tessera_base *base);
    /* The baseapp is draining or stopping: make nothing new. */
    bool (*stopping)(tessera_baseapp *app);

    int (*get_int)(const tessera_base *base, int property, uint32_t index, int64_t *value);
    int (*get_uint)(const tessera_base *base, int property, uint32_t index, uint64_t *value);
    int (*get_float)(const tessera_base *base, int property, uint32_t index, double *value);
    int (*get_handle)(const tessera_base *base, int property, uint32_t index, tessera_handle *value);
    int (*get_bool)(const tessera_base *base, int property, uint32_t index, bool *value);
    int (*get_string)(const tessera_base *base, int property, uint32_t index, const char **value, size_t *length);
    int (*set_int)(tessera_base *base, int property, uint32_t index, int64_t value);
    int (*set_uint)(tessera_base *base, int property, uint32_t index, uint64_t value);
    int (*set_float)(tessera_base *base, int property, uint32_t index, double value);
    int (*set_handle)(tessera_base *base, int property, uint32_t index, tessera_handle value);
    int (*set_bool)(tessera_base *base, int property, uint32_t index, bool value);
    int (*set_string)(tessera_base *base, int property, uint32_t index, const char *value, size_t length);

    /* -- calls -- */
    tessera_args *(*args_create)(const tessera_base_class *cls, tessera_part part, const char *method_name);
    const tessera_args_api *args;
    /* Calls cell method `method_name` of the base's own cell part. */
    int (*call_cell)(tessera_base *base, const char *method_name, const tessera_args *args);
    /* Calls base method `method_name` (part BASE), or through the base its
     * client's (part CLIENT), of entity `target` of `class_name`, wherever
     * its base is; an undeliverable call comes back as call_failed. */
    int (*call_base)(tessera_base *from, tessera_handle target, const char *class_name, tessera_part part,
                     const char *method_name, const tessera_args *args);

    /* -- global names: one base per name in the cluster (KBEngine's
     *    globalBases); a base made once and made again when lost is a
     *    singleton (at the end) -- */
    /* Claims `name` for `base`; `done` says whether it got it or who holds
     * it. -1 (and no callback) when Redis is not connected. */
    int (*register_global)(tessera_baseapp *app, const char *name, tessera_base *base, tessera_global_callback done,
                           void *user_data);
    int (*find_global)(tessera_baseapp *app, const char *name, tessera_global_callback done, void *user_data);
    /* Gives the name up if `holder` holds it. */
    void (*unregister_global)(tessera_baseapp *app, const char *name, tessera_handle holder);

    /* -- lifecycle -- */
    /* A new base of `class_name` here, for `key` (its account field),
     * with its cell part asked for if the class has one. NONE if the
     * class is unknown or the baseapp is full. */
    tessera_handle (*create_base)(tessera_baseapp *app, const char *class_name, const char *key);
    /* Loads the base of `class_name` saved for `key` (or makes it, the
     * first time) with its cell part, for `from`; `done` hands it over.
     * One load at a time per `from`: -1 while one is in flight, or when
     * Redis is not connected. */
    int (*load_base)(tessera_base *from, const char *class_name, const char *key, tessera_loaded_callback done,
                     void *user_data);
    /* giveClientTo: moves `from`'s client to `to` (on this baseapp). -1
     * with the rule logged if refused. */
    int (*give_client)(tessera_base *from, tessera_base *to);
    /* Destroys the base (written first when `write`); its destroyed hook
     * runs. */
    void (*destroy)(tessera_base *base, bool write, const char *reason);

    void (*log)(tessera_baseapp *app, tessera_log_level level, const tessera_base *base, const char *format, ...)
        __attribute__((format(printf, 4, 5)));

    /* -- game events, as on the cell side -- */
    tessera_args *(*event_args_create)(tessera_baseapp *app, const char *event);
    int (*listen_event)(tessera_baseapp *app, const char *event, tessera_base_event_listener listener, void *user_data);
    /* Scopes SERVER, EVERYONE and SERVERS only (a base is in no space);
     * `source` may be NULL. */
    int (*fire_event)(tessera_baseapp *app, tessera_base *source, const char *event, const tessera_args *fields,
                      tessera_event_scope scope);
    /* A user message to the base's own client: -1 if it has none. */
    int (*send_event)(tessera_base *base, const char *event, const tessera_args *fields);

    /* -- base services (ABI 4): clocks, random, timers, bases by class and
     *    cluster singletons -- */

    /* The engine's clocks, as on the cell side: now_ms is this baseapp's
     * monotonic clock (timing within the process: it means nothing on
     * another), wall_ms Unix time (the one to store). */
    uint64_t (*now_ms)(tessera_baseapp *app);
    uint64_t (*wall_ms)(tessera_baseapp *app);
    /* [0, 1), not for secrets: one generator per baseapp, seeded at start. */
    double (*random_unit)(tessera_baseapp *app);
    /* KBEngine's Base.addTimer: runs the class's timer hook `delay_ms`
     * from now, then every `repeat_ms` (0: once), with `tag` (below
     * TESSERA_TIMER_TAG_LIMIT) and `user_data`. Returns the timer's id
     * (> 0, unique in the cluster), or 0 for a base being destroyed or a
     * tag out of range. Timers run on the baseapp's loop every 50 ms, in
     * (due time, id) order: one fires within 50 ms of falling due, and a
     * repeating one keeps its beat (next due repeat_ms after its last due
     * time, not after it ran; after a stall, at most 10 firings at once).
     * A timer belongs to its base:
     *   - destroying the base cancels them all (none fires once destroy
     *     is called, even from a timer hook);
     *   - they travel with the base's backup (taken every
     *     base_backup_period_ms): a base restored on another baseapp after
     *     its own died keeps its pending timers, under the same ids, each
     *     due the time it had left at the backup less the backup's age
     *     (one that fell due meanwhile fires at once; a repeating one once,
     *     then on its beat). Its created hook does not run again;
     *   - they are not written to the database: a base loaded from it (a
     *     player's next login, a cluster restarted) has none, so set the
     *     ones it needs in its created hook. */
    uint64_t (*add_timer)(tessera_base *base, uint64_t delay_ms, uint64_t repeat_ms, uint32_t tag, uint64_t user_data);
    /* -1 if the base has no such timer pending (it fired once, was
     * cancelled, or is another base's). */
    int (*cancel_timer)(tessera_base *base, uint64_t timer_id);
    /* The bases of class `class_name` on this baseapp, not those being
     * destroyed (another baseapp's are not listed: reach those by a
     * singleton or a global name): up to `max` handles in `out` (may be
     * NULL); returns how many there are (0 for an unknown class). An
     * index per class: the other bases are not walked. */
    size_t (*find_by_class)(tessera_baseapp *app, const char *class_name, tessera_handle *out, size_t max);
    /* A cluster singleton service (KBEngine's global bases, made once):
     * one base of `class_name` in the whole cluster, under the global name
     * `name` (1 to 64 bytes; find_global finds it too), reached with
     * call_base. Every baseapp that calls this (in base_init or later)
     * takes part; on each, `ready` is called (ok true) with the base's
     * handle once it is known -- it checks the name every second, from
     * its first tick -- and again whenever it changes. The base is made by
     * one of them, whichever finds the name free first: a fresh base with
     * `name` as its key (not loaded from the database), whose created hook
     * runs once in the cluster. If it is lost:
     *   - its baseapp died and another restored it from its backup (the
     *     usual case): it is the same base, with the same handle, its
     *     properties and timers as at its last backup; the name follows
     *     it and `ready` is not called again;
     *   - its baseapp died before a backup of it was taken (within
     *     base_backup_period_ms of its making, or with no other baseapp
     *     up), or it was destroyed (by the game, with its cellapp, or its
     *     baseapp stopping): a new one is made on a baseapp that takes
     *     part, about 2 s after the loss is seen, and each `ready` hears
     *     its new handle. Calls to the old handle meanwhile come back as
     *     call_failed.
     * Several calls with one name share one singleton (of one class).
     * Returns 0, or -1 (logged) for an unknown class, an empty or too long
     * name, or a name joined here with another class. */
    int (*singleton)(tessera_baseapp *app, const char *name, const char *class_name, tessera_global_callback ready,
                     void *user_data);
};

/* ---- the module --------------------------------------------------------------- */

typedef struct tessera_game_module {
    uint32_t abi_version; /* TESSERA_GAME_ABI_VERSION, as the module was built */
    const char *name;
    /* The cellapp's start: register classes and methods; store the game's
     * own state, if any, in *game (handed to the tick and to cell_shutdown).
     * `api` stays valid until cell_shutdown returns. A nonzero return stops
     * the cellapp, which names the module. */
    int (*cell_init)(tessera_cellapp *app, const tessera_cell_api *api, void **game);
    /* The cellapp is stopping: free what cell_init made. May be NULL. */
    void (*cell_shutdown)(tessera_cellapp *app, void *game);
    /* The same for the baseapp (either pair may be NULL: a module with
     * only cell rules, or only base rules). */
    int (*base_init)(tessera_baseapp *app, const tessera_base_api *api, void **game);
    void (*base_shutdown)(tessera_baseapp *app, void *game);
} tessera_game_module;

#ifdef __cplusplus
}
#endif

#endif
