/* cell_snapshot.c -- the reals' backups (cell_snapshot.h): which reals are
 * backed up this tick (those due at once, then a share of the round that
 * reaches every real once per period), and where each backup goes (its
 * base, or Redis for one without). It owns nothing but its context; the
 * round's place is kept in each cell (snapshot_cursor). */
#include "cell_snapshot.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "log.h"
#include "peer_message.h"
#include "redis_keys.h"

struct cell_snapshots {
    cell_snapshots_context context;
};

cell_snapshots *cell_snapshots_create(const cell_snapshots_context *context) {
    cell_snapshots *snapshots = xcalloc(1, sizeof *snapshots);
    snapshots->context = *context;
    return snapshots;
}

void cell_snapshots_free(cell_snapshots *snapshots) { free(snapshots); }

/* Keeps a backup of a real without a base in Redis, under this cellapp.
 * A real restored from a dead cellapp's backups has its entry there
 * deleted after this one is written (one connection keeps the order):
 * until then a death of this cellapp leaves the old one to restore. */
static void cell_snapshots_store(cell_snapshots *snapshots, cell_entity *entity, const uint8_t *bytes, size_t length) {
    redis_client *redis = snapshots->context.redis;
    if (!redis || !redis_client_is_connected(redis)) return; /* the next round tries again */
    char key[REDIS_KEY_MAX], field[24];
    redis_key_cell_backups(key, snapshots->context.cluster_name, snapshots->context.self->process_id);
    snprintf(field, sizeof field, "%" PRIu64, entity->id);
    const char *argv[] = {"HSET", key, field, (const char *)bytes};
    size_t lengths[] = {4, strlen(key), strlen(field), length};
    if (redis_client_command_argv(redis, NULL, NULL, 4, argv, lengths) != 0) return;
    if (!entity->real->restored_from_cellapp) return;
    redis_key_cell_backups(key, snapshots->context.cluster_name, entity->real->restored_from_cellapp);
    if (redis_client_command(redis, NULL, NULL, "HDEL %s %s", key, field) == 0) entity->real->restored_from_cellapp = 0;
}

/* Takes one real's backup and sends it where it is kept. */
static void cell_snapshots_take(cell_snapshots *snapshots, cell_entity *entity) {
    uint64_t began = clock_monotonic_us();
    entity->real->snapshot_due = false;
    Tessera__Cluster__CellEntityState state;
    /* A restore starts the client's view again (restore.c): the witness,
     * most of a player's state, is not kept. */
    cell_entity_save_backup(snapshots->context.codec, entity, &state);
    size_t length = tessera__cluster__cell_entity_state__get_packed_size(&state);
    uint8_t *bytes = xmalloc(length ? length : 1);
    tessera__cluster__cell_entity_state__pack(&state, bytes);
    if (entity->real->baseapp_id) {
        Tessera__Cluster__CellSnapshot snapshot = TESSERA__CLUSTER__CELL_SNAPSHOT__INIT;
        snapshot.entity_id = entity->id;
        snapshot.incarnation = entity->incarnation;
        snapshot.state.data = bytes;
        snapshot.state.len = length;
        snapshot.saved_wall_us = state.sent_wall_us;
        /* A base that is not reachable now gets the next one. */
        (void)peer_send_cell_snapshot(snapshots->context.peers, entity->real->baseapp_id, &snapshot);
    } else {
        cell_snapshots_store(snapshots, entity, bytes, length);
    }
    cell_entity_saved_free(&state);
    free(bytes);
    cellapp_counters *counters = snapshots->context.counters;
    counters->snapshots++;
    counters->snapshot_bytes += length;
    counters->snapshot_us += clock_monotonic_us() - began;
}

static bool cell_snapshots_eligible(const cell_entity *entity) {
    return entity->kind == CELL_ENTITY_REAL && !entity->destroyed && !entity->real->doomed;
}

void cell_snapshots_tick(cell_snapshots *snapshots, cell *c) {
    if (c->count == 0) return;
    /* A real whose backup is due now is on the cell's changed list. */
    for (size_t i = 0; i < c->changed_count; i++) {
        cell_entity *entity = c->changed[i];
        if (cell_snapshots_eligible(entity) && entity->real->snapshot_due) cell_snapshots_take(snapshots, entity);
    }
    const cellapp_settings *settings = snapshots->context.settings;
    /* Spread over the period less one tick: reals that come and go move
     * others in by_index past the cursor, and a tick's margin keeps every
     * real's latest backup within the period all the same. */
    uint64_t ticks = (uint64_t)settings->cell_backup_period_ms * (uint64_t)settings->tick_hz / 1000u;
    if (ticks > 1) ticks--;
    if (ticks == 0) ticks = 1;
    size_t quota = (size_t)((c->real_count + ticks - 1) / ticks);
    size_t taken = 0;
    for (size_t steps = 0; steps < c->count && taken < quota; steps++) {
        cell_entity *entity = c->by_index[c->snapshot_cursor++ % c->count];
        if (!cell_snapshots_eligible(entity)) continue;
        cell_snapshots_take(snapshots, entity);
        taken++;
    }
    c->snapshot_cursor %= c->count;
}

void cell_snapshots_forget(cell_snapshots *snapshots, const cell_entity *entity) {
    redis_client *redis = snapshots->context.redis;
    if (!entity->real || entity->real->baseapp_id || !redis || !redis_client_is_connected(redis)) return;
    char key[REDIS_KEY_MAX], field[24];
    redis_key_cell_backups(key, snapshots->context.cluster_name, snapshots->context.self->process_id);
    snprintf(field, sizeof field, "%" PRIu64, entity->id);
    redis_client_command(redis, NULL, NULL, "HDEL %s %s", key, field);
}
