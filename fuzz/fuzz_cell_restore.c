/* fuzz_cell_restore.c -- fuzzes the restore of an entity's whole cell state:
 * a packed CellEntityState (what an offload moves, what a real's backup
 * keeps and a restore after a cellapp's death reads), unpacked as
 * cellapp/offload.c and cellapp/restore.c unpack it and made a real of a
 * cell by cellapp/cell_entity_codec.c's cell_entity_restore, everything it
 * carries included: properties, movement, timers, traps, controllers,
 * I/O connections, the witness and its view, the inbox. The cell is a
 * fresh one per input, of the demo's arena, owned by this cellapp, with
 * the demo definitions and the cellapp's usual settings (those of
 * test_cell_entity_codec.c); the game keeps no per-entity data.
 *
 * Checks: a refused state leaves the cell empty; a restored one is a real
 * of the id, class and position it names, and saving it again
 * (cell_entity_save) gives the same id and class and its properties in
 * their canonical encoding; no crash, no leak. */
#include <string.h>

#include "cell.h"
#include "cell_entity_codec.h"
#include "cell_real.h"
#include "cluster.pb-c.h"
#include "entity_timer.h"
#include "fuzz_support.h"

/* What the cells borrow, made on the first input and kept for the run. */
static struct fuzz_restore_world {
    cellapp_settings settings;
    cell_shared shared;
    game_hooks hooks;
    cell_entity_codec codec;
    space_layout *layout;
    entity_timer_ids timer_ids;
} world;

static void fuzz_restore_no_save(void *host, const cell_entity *entity, Tessera__Cluster__CellEntityState *out) {
    (void)host;
    (void)entity;
    (void)out;
}

static void fuzz_restore_no_restore(void *host, cell_entity *entity, const Tessera__Cluster__CellEntityState *state) {
    (void)host;
    (void)entity;
    (void)state;
}

static void fuzz_restore_on_trap(void *host, cell_entity *owner, uint32_t tag, cell_entity *visitor, bool entered) {
    (void)host;
    (void)owner;
    (void)tag;
    (void)visitor;
    (void)entered;
}

static void fuzz_restore_setup(void) {
    cellapp_settings *s = &world.settings;
    s->tick_hz = 10;
    s->position_precision = 1.0 / 64;
    s->yaw_steps = 256;
    s->movement.max_speed = 10;
    s->movement.burst_seconds = 1;
    witness_config *wc = &s->witness;
    wc->tick_hz = 10;
    wc->view_radius = 50;
    wc->view_hysteresis = 5;
    wc->client_bytes_per_second = 4096;
    wc->max_aliases = FUZZ_MAX_ALIASES;
    wc->alias_cooldown_ms = 1000;
    wc->detail_near_distance = 15;
    wc->detail_medium_distance = 30;
    wc->detail_hysteresis = 1;
    wc->update_near_distance = 10;
    wc->update_far_distance = 40;
    cell_shared *shared = &world.shared;
    shared->settings = s;
    shared->self_id = 1;
    world.timer_ids = (entity_timer_ids){1, 0};
    shared->timer_ids = &world.timer_ids;
    cell_real_install_hooks(shared);
    shared->on_trap = fuzz_restore_on_trap;
    /* cell_shared keeps the definitions non-const; no cell writes them. */
    shared->definitions = (entity_def_registry *)fuzz_definitions();
    shared->schema = replication_schema_create(shared->definitions);
    shared->replication = replication_create(shared->schema);
    bit_writer_init(&shared->stream);
    world.hooks.save = fuzz_restore_no_save;
    world.hooks.restore = fuzz_restore_no_restore;
    world.codec = (cell_entity_codec){shared->definitions, &s->movement, &world.hooks};
    const volatile_codec_config *arena = fuzz_arena_config();
    world.layout = space_layout_create("arena", arena->min, arena->max, false, shared->self_id);
    fuzz_check(world.layout != NULL, "the arena's layout is refused");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!world.layout) fuzz_restore_setup();
    Tessera__Cluster__CellEntityState *state = tessera__cluster__cell_entity_state__unpack(NULL, size, data);
    if (!state) return 0;
    cell *c = cell_create(&world.shared, world.layout);
    fuzz_check(c != NULL, "no cell for the arena");
    char err[512];
    if (cell_entity_restore(&world.codec, c, NULL, state, err, sizeof err) != 0) {
        fuzz_check(cell_find(c, state->entity_id) == NULL, "a refused state left an entity");
    } else {
        cell_entity *entity = cell_find(c, state->entity_id);
        fuzz_check(entity && entity->real, "a restored state is not a real");
        fuzz_check(strcmp(entity->cls->name, state->entity_type) == 0, "a restored real of another class");
        Tessera__Cluster__CellEntityState saved = TESSERA__CLUSTER__CELL_ENTITY_STATE__INIT;
        cell_entity_save(&world.codec, entity, &saved);
        fuzz_check(saved.entity_id == state->entity_id && strcmp(saved.entity_type, state->entity_type) == 0,
                   "a restored real saves as another entity");
        entity_state *properties = entity_state_create(entity->cls);
        bit_reader r;
        bit_reader_init(&r, state->properties.data, state->properties.len);
        fuzz_check(entity_state_decode_all(properties, &r) == 0, "restored properties do not decode alone");
        bit_writer w;
        bit_writer_init(&w);
        entity_state_encode_all(properties, &w);
        fuzz_check(saved.properties.len == bit_writer_bytes(&w) &&
                       (saved.properties.len == 0 ||
                        memcmp(saved.properties.data, bit_writer_data(&w), saved.properties.len) == 0),
                   "a restored real saves other properties");
        bit_writer_close(&w);
        entity_state_free(properties);
        cell_entity_saved_free(&saved);
    }
    cell_free(c);
    tessera__cluster__cell_entity_state__free_unpacked(state, NULL);
    return 0;
}
