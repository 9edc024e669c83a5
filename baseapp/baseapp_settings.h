/* baseapp_settings.h -- a baseapp's settings: the common ones
 * (process_settings) and its own, each declared once in the key table of
 * baseapp_settings.c, with its bounds, default and meaning. */
#ifndef TESSERA_BASEAPP_SETTINGS_H
#define TESSERA_BASEAPP_SETTINGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "process.h"

typedef struct baseapp_settings {
    process_settings process;
    char client_host[64];
    char client_public_host[64];
    int64_t client_public_port; /* 0: the port it listens on */
    bool login_redirect;
    int64_t redirect_token_ms;
    int64_t client_port;
    int64_t websocket_port;                /* -1: none */
    int64_t websocket_public_port;         /* 0: the port it listens on */
    bool websocket_tls;                    /* the WebSocket port speaks TLS too (wss), with the client certificate */
    char client_tls_certificate_file[256]; /* empty: plaintext */
    char client_tls_key_file[256];
    int64_t client_max_frame_bytes;
    int64_t client_write_high_water_bytes;
    int64_t client_write_limit_bytes;
    int64_t max_clients;
    int64_t login_timeout_ms;
    bool auto_create_accounts;
    int64_t password_ops_limit;
    int64_t password_mem_limit_kib;
    int64_t entity_id_block;
    char player_entity_type[32];
    char entity_definitions[256];
    double client_moves_per_second;
    char state_dump_path[256];
    char game_module[256]; /* the game module (base_game.c); empty: none */
    config_group game;     /* its own settings */
    /* Lua scripts (lua_base.c): their folder ("" for none) and limits. */
    char game_scripts[256];
    int64_t lua_instruction_budget;
    int64_t lua_memory_mb;
    int64_t client_congestion_bytes;
    int64_t client_send_buffer_bytes;
    int64_t cell_lost_grace_ms;
    int64_t drain_timeout_ms;
    int64_t shutdown_retry_ms;
    double client_calls_per_second;
    int64_t client_frame_timeout_ms;
    double login_failures_per_account; /* a minute */
    double login_failures_per_address; /* a minute */
    int64_t login_hash_workers;        /* password hashes running at once (login_queue.h) */
    int64_t login_hash_queue_max;      /* ... waiting for a worker */
    int64_t login_hashes_per_account;  /* ... waiting or running, of one account */
    int64_t login_hashes_per_address;  /* ... waiting or running, from one address */
    int64_t client_detached_grace_ms;
    int64_t autosave_interval_ms;
    int64_t backup_timeout_ms;
    int64_t write_retry_ms;
    int64_t base_backup_period_ms; /* every base backed up to another baseapp once in this period (0: none) */
} baseapp_settings;

/* Every key a baseapp's config may hold. */
extern const config_key baseapp_config_keys[];
extern const size_t baseapp_config_key_count;

/* Where other baseapps send clients to reach this one. */
static inline const char *baseapp_settings_public_host(const baseapp_settings *settings) {
    return settings->client_public_host[0] ? settings->client_public_host : settings->client_host;
}

/* ... and the port there, given the port it listens on. */
static inline int baseapp_settings_public_port(const baseapp_settings *settings, int listening_port) {
    return settings->client_public_port > 0 ? (int)settings->client_public_port : listening_port;
}

/* ... and the WebSocket port there (0: none), given the one it listens on. */
static inline int baseapp_settings_public_websocket_port(const baseapp_settings *settings, int listening_port) {
    if (listening_port <= 0) return 0;
    return settings->websocket_public_port > 0 ? (int)settings->websocket_public_port : listening_port;
}

#endif
