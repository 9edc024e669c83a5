/* cellapp_settings.h -- a cellapp's settings, as its config table (main.c)
 * fills them: the common process settings, and one group per module that
 * needs some (the witness, the speed check, haunts and offloads, the
 * balancer), so a module takes only its own group.
 */
#ifndef TESSERA_CELLAPP_SETTINGS_H
#define TESSERA_CELLAPP_SETTINGS_H

#include <stdbool.h>
#include <stdint.h>

#include "balance.h"
#include "config.h"
#include "process.h"
#include "space_layout.h"

/* What a witness needs (witness.c). */
typedef struct witness_config {
    int64_t tick_hz; /* the cellapp's, copied in */
    double view_radius, view_hysteresis;
    int64_t client_bytes_per_second;
    int64_t max_aliases;
    int64_t alias_cooldown_ms;
    double detail_near_distance, detail_medium_distance, detail_hysteresis;
    double update_near_distance, update_far_distance;
} witness_config;

/* What the speed check needs (movement.c). */
typedef struct movement_config {
    double max_speed;
    double burst_seconds;
} movement_config;

/* Where ghosts live and when reals move (haunt.c, offload.c). */
typedef struct haunt_config {
    double ghost_distance;         /* a real has a ghost in every cell this close */
    double ghost_fudge;            /* ... kept until it is this much farther */
    int64_t ghost_min_lifespan_ms; /* ... and at least this long */
    double offload_margin;         /* a real moves only this far past its cell's edge */
} haunt_config;

/* The balancer (balancer.c) and the load it acts on (cell_load.c). */
typedef struct balancer_settings {
    bool enabled;              /* stand for the lease; move lines, add and retire cells */
    int64_t period_ms;         /* reports, lease renewal, one pass */
    int64_t lease_ms;          /* the lease's time to live */
    int64_t report_timeout_ms; /* a report this old counts as its cellapp's silence */
    int64_t cell_change_ms;    /* at least this long between adding or retiring cells */
    int64_t drain_timeout_ms;  /* SIGTERM: give up waiting for the cells to go after this */
    double load_smoothing;     /* weight of each tick's sample in the smoothed load */
    balance_config algorithm;
} balancer_settings;

typedef struct cellapp_settings {
    process_settings process;
    int64_t tick_hz;
    char default_space[SPACE_LAYOUT_NAME_MAX];
    movement_config movement;
    witness_config witness;
    haunt_config haunt;
    double position_precision;
    int64_t yaw_steps;
    int64_t max_entities;
    char entity_definitions[256];
    char aoi_mode[16]; /* each cell's AOI mode by name (coord_mode_from_name) */
    int64_t ghost_route_ms;
    int64_t cell_stream_gap_ms;
    /* Recovery: every real is backed up once per cell_backup_period_ms
     * (cell_snapshot.c); a dead cellapp's ghosts wait restore_orphan_ms
     * for their reals to be restored (restore.c). */
    int64_t cell_backup_period_ms;
    int64_t restore_orphan_ms;
    /* A dead baseapp's reals wait this long for their bases to be restored
     * on another baseapp (BaseMoved), then go (reals_sweep_lost_bases). */
    int64_t base_restore_wait_ms;
    balancer_settings balance;
    /* The game module (game_host.c) and its own settings. */
    char game_module[256];
    config_group game;
    /* Lua scripts (lua_cell.c): their folder ("" for none) and limits. */
    char game_scripts[256];
    int64_t lua_instruction_budget;
    int64_t lua_memory_mb;
    /* Map files by space name (space_map.h): their navigation meshes. */
    config_group maps;
    double navmesh_cell_size;
    char state_dump_path[256];
} cellapp_settings;

#endif
