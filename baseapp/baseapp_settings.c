/* baseapp_settings.c -- the baseapp's config keys, each once: its name,
 * type, field, bounds, default, and what it does (config.h walks the
 * table). */
#include "baseapp_settings.h"

const config_key baseapp_config_keys[] = {
    PROCESS_CONFIG_KEYS(baseapp_settings, process),
    {"client_host", CONFIG_STRING, offsetof(baseapp_settings, client_host),
     sizeof(((baseapp_settings *)0)->client_host), 0, 0, "127.0.0.1", "IP address clients connect to"},
    {"client_public_host", CONFIG_STRING, offsetof(baseapp_settings, client_public_host),
     sizeof(((baseapp_settings *)0)->client_public_host), 0, 0, "",
     "the IP address other baseapps send clients to when they redirect a login here, and login replies list "
     "(empty: client_host)"},
    {"client_public_port", CONFIG_INT, offsetof(baseapp_settings, client_public_port), 0, 0, 65535, "0",
     "the TCP port other baseapps send clients to when they redirect a login here, and login replies list, with "
     "client_public_host: an address that forwards to client_host:client_port (a node's host port, a NAT) (0: the "
     "port it listens on)"},
    {"login_redirect", CONFIG_BOOL, offsetof(baseapp_settings, login_redirect), 0, 0, 0, "true",
     "send a login on to the least-loaded baseapp (or to the one the account's entity lives on) with a one-time "
     "token"},
    {"redirect_token_ms", CONFIG_INT, offsetof(baseapp_settings, redirect_token_ms), 0, 100, 600000, "30000",
     "how long the one-time token of a redirected login is good for"},
    {"client_port", CONFIG_INT, offsetof(baseapp_settings, client_port), 0, 0, 65535, "20013",
     "TCP port clients connect to (0: any free port)"},
    {"websocket_port", CONFIG_INT, offsetof(baseapp_settings, websocket_port), 0, -1, 65535, "-1",
     "TCP port (on client_host) where browsers connect over WebSocket: one binary message per client frame, "
     "the same limits and login as the client port (-1: none; 0: any free port)"},
    {"websocket_public_port", CONFIG_INT, offsetof(baseapp_settings, websocket_public_port), 0, 0, 65535, "0",
     "the WebSocket port other baseapps send browser clients to, with client_public_host (0: the port it listens "
     "on)"},
    {"websocket_tls", CONFIG_BOOL, offsetof(baseapp_settings, websocket_tls), 0, 0, 0, "false",
     "the WebSocket port speaks TLS 1.3 (wss://) with client_tls_certificate_file and client_tls_key_file"},
    {"client_tls_certificate_file", CONFIG_STRING, offsetof(baseapp_settings, client_tls_certificate_file),
     sizeof(((baseapp_settings *)0)->client_tls_certificate_file), 0, 0, "",
     "PEM certificate chain for TLS 1.3 on the client port (empty: clients speak plaintext); clients must see "
     "the name they are given in it"},
    {"client_tls_key_file", CONFIG_STRING, offsetof(baseapp_settings, client_tls_key_file),
     sizeof(((baseapp_settings *)0)->client_tls_key_file), 0, 0, "", "PEM private key of that certificate"},
    {"client_max_frame_bytes", CONFIG_INT, offsetof(baseapp_settings, client_max_frame_bytes), 0, 64, 16 << 20, "65536",
     "largest frame a client may send; larger ones drop the client before anything is allocated"},
    {"client_write_high_water_bytes", CONFIG_INT, offsetof(baseapp_settings, client_write_high_water_bytes), 0, 1024,
     1 << 30, "1048576", "queued bytes to a client above which its input is no longer read"},
    {"client_write_limit_bytes", CONFIG_INT, offsetof(baseapp_settings, client_write_limit_bytes), 0, 4096, 1 << 30,
     "8388608", "queued bytes to a client above which it is dropped as a slow consumer"},
    {"client_congestion_bytes", CONFIG_INT, offsetof(baseapp_settings, client_congestion_bytes), 0, 256, 1 << 30,
     "65536",
     "queued bytes to a client above which its cell sends it only enters and leaves until it drains (the "
     "latest state then goes, not a backlog)"},
    {"client_send_buffer_bytes", CONFIG_INT, offsetof(baseapp_settings, client_send_buffer_bytes), 0, 0, 1 << 30,
     "65536", "kernel send buffer per client socket (0: the kernel's autotuned default, up to megabytes per client)"},
    {"max_clients", CONFIG_INT, offsetof(baseapp_settings, max_clients), 0, 1, 1000000, "10000",
     "connections accepted before new ones are told the server is full"},
    {"login_timeout_ms", CONFIG_INT, offsetof(baseapp_settings, login_timeout_ms), 0, 100, 600000, "30000",
     "a connection that has not reached the world after this long is dropped"},
    {"auto_create_accounts", CONFIG_BOOL, offsetof(baseapp_settings, auto_create_accounts), 0, 0, 0, "false",
     "create an unknown account on its first login with the password given"},
    {"password_ops_limit", CONFIG_INT, offsetof(baseapp_settings, password_ops_limit), 0, 1, 32, "2",
     "argon2id passes over memory when hashing a new password"},
    {"password_mem_limit_kib", CONFIG_INT, offsetof(baseapp_settings, password_mem_limit_kib), 0, 8, 4 << 20, "19456",
     "argon2id memory per hash in KiB (19 MiB by default, OWASP's minimum for argon2id)"},
    {"entity_id_block", CONFIG_INT, offsetof(baseapp_settings, entity_id_block), 0, 1, 1000000, "1000",
     "entity ids reserved from Redis at a time"},
    {"player_entity_type", CONFIG_STRING, offsetof(baseapp_settings, player_entity_type),
     sizeof(((baseapp_settings *)0)->player_entity_type), 0, 0, "",
     "the class of the entity a login gets (a class of the entity definitions; required)"},
    {"entity_definitions", CONFIG_STRING, offsetof(baseapp_settings, entity_definitions),
     sizeof(((baseapp_settings *)0)->entity_definitions), 0, 0, "demo/entities",
     "directory of the game's entity definitions (*.json); sent to clients at login"},
    {"state_dump_path", CONFIG_STRING, offsetof(baseapp_settings, state_dump_path),
     sizeof(((baseapp_settings *)0)->state_dump_path), 0, 0, "",
     "where SIGUSR1 writes every base's properties as JSON (empty: SIGUSR1 only logs)"},
    {"game_module", CONFIG_STRING, offsetof(baseapp_settings, game_module),
     sizeof(((baseapp_settings *)0)->game_module), 0, 0, "",
     "the game module (a .so built against include/tessera/game.h) whose base rules the bases follow; empty: the "
     "definitions alone"},
    {"game_scripts", CONFIG_STRING, offsetof(baseapp_settings, game_scripts),
     sizeof(((baseapp_settings *)0)->game_scripts), 0, 0, "",
     "the folder of the game's Lua scripts (<Class>.lua, game.lua; docs/lua.md), which reload live on SIGHUP or "
     "when a file changes; empty: none"},
    {"lua_instruction_budget", CONFIG_INT, offsetof(baseapp_settings, lua_instruction_budget), 0, 1000, 1000000000,
     "1000000",
     "Lua VM instructions one hook or method may run (about 5 ms): a runaway loop is stopped there with its "
     "traceback, and the baseapp goes on"},
    {"lua_memory_mb", CONFIG_INT, offsetof(baseapp_settings, lua_memory_mb), 0, 1, 65536, "512",
     "megabytes the Lua state may hold; an allocation past it fails the call that made it"},
    {"game", CONFIG_GROUP, offsetof(baseapp_settings, game), 0, 0, 0, NULL,
     "the game module's own settings (an object; on the command line game.NAME=VALUE)"},
    {"cell_lost_grace_ms", CONFIG_INT, offsetof(baseapp_settings, cell_lost_grace_ms), 0, 100, 600000, "20000",
     "when the cellapp holding a player's cell part is declared dead, how long the client waits, connected, for its "
     "entity to be restored elsewhere (or taken back by the cellapp it was leaving) before it is told to log in "
     "again"},
    {"drain_timeout_ms", CONFIG_INT, offsetof(baseapp_settings, drain_timeout_ms), 0, 0, 3600000, "10000",
     "SIGTERM or SIGINT: the baseapp stops taking logins, tells its clients to log in again elsewhere, writes "
     "their entities, and stops once they are gone and written or after this long (a second signal stops at "
     "once)"},
    {"client_detached_grace_ms", CONFIG_INT, offsetof(baseapp_settings, client_detached_grace_ms), 0, 0, 3600000,
     "30000",
     "how long a player's entity stays after its client dropped, for a Reconnect with its session token "
     "(0: it goes with the client)"},
    {"autosave_interval_ms", CONFIG_INT, offsetof(baseapp_settings, autosave_interval_ms), 0, 0, 86400000, "300000",
     "how often each player's entity is written to Redis while it lives (spread over the interval; 0: "
     "only when it goes)"},
    {"backup_timeout_ms", CONFIG_INT, offsetof(baseapp_settings, backup_timeout_ms), 0, 10, 600000, "2000",
     "how long a save waits for the cell part's backup before writing the last one it has"},
    {"base_backup_period_ms", CONFIG_INT, offsetof(baseapp_settings, base_backup_period_ms), 0, 0, 600000, "1000",
     "every base is backed up once in this period (spread over it) to another live baseapp chosen by its entity "
     "id; if this baseapp dies, that one brings the base back and its client reconnects there without a "
     "password, having lost at most this long (0: no backups)"},
    {"write_retry_ms", CONFIG_INT, offsetof(baseapp_settings, write_retry_ms), 0, 10, 600000, "1000",
     "after a failed write of an entity, how long until it is written again (with its latest state)"},
    {"shutdown_retry_ms", CONFIG_INT, offsetof(baseapp_settings, shutdown_retry_ms), 0, 0, 600000, "1000",
     "the retry hint sent with ERROR_SERVER_SHUTDOWN: how long a client should wait before logging in again"},
    {"client_calls_per_second", CONFIG_DOUBLE, offsetof(baseapp_settings, client_calls_per_second), 0, 0.1, 10000, "20",
     "method calls a client may make a second (a second's worth may come at once); excess calls are dropped "
     "and counted, and a client that keeps it up for seconds is disconnected (ERROR_RATE_LIMITED)"},
    {"client_frame_timeout_ms", CONFIG_INT, offsetof(baseapp_settings, client_frame_timeout_ms), 0, 100, 600000,
     "10000",
     "a client frame begun and not finished within this long drops the client (a trickled frame would "
     "hold its buffer forever)"},
    {"login_failures_per_account", CONFIG_DOUBLE, offsetof(baseapp_settings, login_failures_per_account), 0, 0, 1e6,
     "10",
     "failed logins an account may have a minute (refilled evenly); beyond, attempts are refused before any "
     "hashing (ERROR_RATE_LIMITED, with when to retry); 0: no limit"},
    {"login_failures_per_address", CONFIG_DOUBLE, offsetof(baseapp_settings, login_failures_per_address), 0, 0, 1e6,
     "60",
     "likewise per client address (successful logins cost nothing, so a crowd behind one address is never "
     "slowed); 0: no limit"},
    {"login_hash_workers", CONFIG_INT, offsetof(baseapp_settings, login_hash_workers), 0, 1, 64, "2",
     "password hashes running at once on the thread pool (each takes a core for a few ms)"},
    {"login_hash_queue_max", CONFIG_INT, offsetof(baseapp_settings, login_hash_queue_max), 0, 1, 1000000, "256",
     "password hashes that may wait for a worker; beyond, a login is told to retry shortly (ERROR_UNAVAILABLE); a "
     "waiting login whose client left is dropped unhashed"},
    {"login_hashes_per_account", CONFIG_INT, offsetof(baseapp_settings, login_hashes_per_account), 0, 1, 1000, "2",
     "password hashes of one account waiting or running at once; beyond, ERROR_RATE_LIMITED with a retry hint"},
    {"login_hashes_per_address", CONFIG_INT, offsetof(baseapp_settings, login_hashes_per_address), 0, 1, 100000, "8",
     "likewise from one client address"},
    {"client_moves_per_second", CONFIG_DOUBLE, offsetof(baseapp_settings, client_moves_per_second), 0, 1, 1000, "30",
     "moves a client may send per second (half a second may be banked); the rest are dropped, not relayed"},
};

const size_t baseapp_config_key_count = sizeof baseapp_config_keys / sizeof baseapp_config_keys[0];
