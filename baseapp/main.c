/* main.c -- the baseapp process: its settings table, start-up (config,
 * libsodium, Redis, registry, the client and peer listeners), the sweeps,
 * the published numbers, and the drain on SIGINT/SIGTERM: no new logins,
 * every client told, every entity written, then an orderly stop. */
#include <inttypes.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baseapp.h"
#include "clock.h"
#include "log.h"
#include "peer_message.h"

static const config_key baseapp_config_keys[] = {
    PROCESS_CONFIG_KEYS(baseapp_settings, process),
    {"client_host", CONFIG_STRING, offsetof(baseapp_settings, client_host),
     sizeof(((baseapp_settings *)0)->client_host), 0, 0, "127.0.0.1", "IP address clients connect to"},
    {"client_public_host", CONFIG_STRING, offsetof(baseapp_settings, client_public_host),
     sizeof(((baseapp_settings *)0)->client_public_host), 0, 0, "",
     "the IP address other baseapps send clients to when they redirect a login here (empty: client_host)"},
    {"login_redirect", CONFIG_BOOL, offsetof(baseapp_settings, login_redirect), 0, 0, 0, "true",
     "send a login on to the least-loaded baseapp (or to the one the account's entity lives on) with a one-time "
     "token"},
    {"redirect_token_ms", CONFIG_INT, offsetof(baseapp_settings, redirect_token_ms), 0, 100, 600000, "30000",
     "how long the one-time token of a redirected login is good for"},
    {"client_port", CONFIG_INT, offsetof(baseapp_settings, client_port), 0, 0, 65535, "20013",
     "TCP port clients connect to (0: any free port)"},
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
    {"game", CONFIG_GROUP, offsetof(baseapp_settings, game), 0, 0, 0, NULL,
     "the game module's own settings (an object; on the command line game.NAME=VALUE)"},
    {"cell_lost_grace_ms", CONFIG_INT, offsetof(baseapp_settings, cell_lost_grace_ms), 0, 100, 600000, "5000",
     "when the cellapp holding a player's cell part goes away, how long the client waits for the cellapp it was "
     "leaving to take it back before it is told to log in again"},
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
    {"client_moves_per_second", CONFIG_DOUBLE, offsetof(baseapp_settings, client_moves_per_second), 0, 1, 1000, "30",
     "moves a client may send per second (half a second may be banked); the rest are dropped, not relayed"},
};

#define BASEAPP_CONFIG_KEY_COUNT (sizeof baseapp_config_keys / sizeof baseapp_config_keys[0])

/* Proxies live in a slot table; a million concurrent clients per process is
 * far beyond what one loop serves, so it bounds the table's growth. */
#define BASEAPP_MAX_PROXY_SLOTS (1u << 20)

static void baseapp_publish_stats(baseapp *app) {
    if (!app->registry) return;
    channel_stats *clients = &app->client_totals, *peers = &app->peer_totals;
    registry_set_stat(app->registry, "load", (int64_t)entity_list_count(app->links));
    /* Players: the accounts with an entity here (detached ones included);
     * bases without an account (the demo's Census) are not clients. */
    registry_set_stat(app->registry, "clients", (int64_t)id_map_count(&app->proxies_by_account));
    registry_set_stat(app->registry, "bases", (int64_t)entity_list_count(app->proxies));
    registry_set_stat(app->registry, "connections", (int64_t)entity_list_count(app->links));
    registry_set_stat(app->registry, "reconnects", (int64_t)app->reconnects);
    registry_set_stat(app->registry, "writes", (int64_t)app->writes);
    registry_set_stat(app->registry, "handovers", (int64_t)app->handovers);
    registry_set_stat(app->registry, "draining", app->draining);
    registry_set_stat(app->registry, "redirects", (int64_t)app->redirects);
    registry_set_stat(app->registry, "token_logins", (int64_t)app->token_logins);
    registry_set_stat(app->registry, "entity_calls", (int64_t)app->entity_calls);
    registry_set_stat(app->registry, "entity_calls_failed", (int64_t)app->entity_calls_failed);
    registry_set_stat(app->registry, "write_failures", (int64_t)app->write_failures);
    registry_set_stat(app->registry, "client_messages_unbound", (int64_t)app->client_messages_unbound);
    registry_set_stat(app->registry, "cellapps", (int64_t)peer_set_count_up(app->peers, PEER_ROLE_CELLAPP));
    registry_set_stat(app->registry, "frames_in", (int64_t)(clients->frames_in + peers->frames_in));
    registry_set_stat(app->registry, "frames_out", (int64_t)(clients->frames_out + peers->frames_out));
    registry_set_stat(app->registry, "bytes_in", (int64_t)(clients->bytes_in + peers->bytes_in));
    registry_set_stat(app->registry, "bytes_out", (int64_t)(clients->bytes_out + peers->bytes_out));
    registry_set_stat(app->registry, "client_frames_in", (int64_t)clients->frames_in);
    registry_set_stat(app->registry, "client_frames_out", (int64_t)clients->frames_out);
    registry_set_stat(app->registry, "moves_dropped", (int64_t)app->moves_dropped);
    registry_set_stat(app->registry, "calls_dropped", (int64_t)app->calls_dropped);
    registry_set_stat(app->registry, "logins_throttled", (int64_t)app->logins_throttled);
    registry_set_stat(app->registry, "congested_clients", (int64_t)app->congested_clients);
    registry_set_stat(app->registry, "congestion_events", (int64_t)app->congestion_events);
    registry_set_stat(app->registry, "cell_messages_failed", (int64_t)app->cell_messages_failed);
    registry_set_stat(app->registry, "client_messages_held", (int64_t)app->client_messages_held);
    registry_set_stat(app->registry, "client_messages_stale", (int64_t)app->client_messages_stale);
}

static void baseapp_drain_check(baseapp *app);

static void baseapp_on_stats_timer(uv_timer_t *timer) {
    baseapp *app = timer->data;
    baseapp_drain_check(app);
    if (app->shutting_down) return;
    baseapp_publish_stats(app);
    if (redis_client_is_connected(app->redis)) id_block_refill(app->entity_ids);
}

static void baseapp_shutdown(baseapp *app);

/* A draining baseapp stops once its clients have gone (their errors were
 * flushed and the connections closed) and their entities are written, or
 * its time is up. */
static void baseapp_drain_check(baseapp *app) {
    if (!app->draining || app->shutting_down) return;
    size_t links = entity_list_count(app->links), proxies = entity_list_count(app->proxies);
    uint64_t waited_ms = (clock_monotonic_us() - app->drain_started_us) / 1000;
    if (links == 0 && proxies == 0) {
        log_info("drained: every client was told and has gone, every entity written");
        baseapp_shutdown(app);
    } else if (waited_ms >= (uint64_t)app->settings.drain_timeout_ms) {
        log_warn("drain timed out after %" PRIu64 " ms with %zu clients still connected and %zu entities not yet "
                 "written: stopping",
                 waited_ms, links, proxies);
        baseapp_shutdown(app);
    }
}

static void baseapp_on_sweep_timer(uv_timer_t *timer) {
    login_throttle_sweep(&((baseapp *)timer->data)->throttle, clock_monotonic_us());
    client_link_sweep(timer->data);
    proxy_sweep(timer->data);
    base_game_tick(((baseapp *)timer->data)->game);
    cell_link_sweep(timer->data);
    mailbox_sweep(((baseapp *)timer->data)->mailbox, clock_monotonic_us() / 1000);
}

/* The mailbox's wire: straight to the cellapp that holds the real. */
static int baseapp_mailbox_send(uint64_t process_id, const Tessera__Cluster__CellMessage *message, void *user_data) {
    baseapp *app = user_data;
    return peer_send_cell_message(app->peers, process_id, message);
}

static void baseapp_mailbox_failed(uint64_t entity_id, uint64_t sequence, const char *reason, void *user_data) {
    baseapp *app = user_data;
    app->cell_messages_failed++;
    log_info("a message to the cell of entity %" PRIu64 " (#%" PRIu64 ") failed: %s", entity_id, sequence, reason);
}

static void baseapp_on_congestion_timer(uv_timer_t *timer) {
    baseapp *app = timer->data;
    if (app->congested_clients) cell_link_check_all_congestion(app);
}

static void baseapp_on_registered(registry *reg, uint64_t process_id, void *user_data) {
    baseapp *app = user_data;
    (void)reg;
    app->process_id = process_id;
    peer_set_set_process_id(app->peers, process_id);
    mailbox_set_self(app->mailbox, process_id);
    base_mailbox_set_self(app->bases, process_id);
}

static void baseapp_on_peers(registry *reg, const registry_peer *peers, size_t count, void *user_data) {
    baseapp *app = user_data;
    (void)reg;
    peer_set_on_registry(app->peers, peers, count);
    cell_link_on_registry(app);
    login_route_on_registry(app, peers, count);
}

static void baseapp_on_redis_state(redis_client *client, int connected, unsigned failed_attempts, void *user_data) {
    baseapp *app = user_data;
    (void)client;
    if (connected) {
        registry_on_redis_state(app->registry, 1);
        id_block_refill(app->entity_ids);
        return;
    }
    if (process_redis_should_give_up(&app->settings.process, app->process_id, failed_attempts)) {
        app->exit_code = 1;
        uv_stop(app->loop);
    }
}

static void baseapp_on_client_connection(uv_stream_t *listener, int status) {
    baseapp *app = listener->data;
    if (status < 0) {
        log_warn("client listener: %s", uv_strerror(status));
        return;
    }
    client_link_accept(app, listener);
}

static void baseapp_on_peer_connection(uv_stream_t *listener, int status) {
    baseapp *app = listener->data;
    if (status < 0) {
        log_warn("peer listener: %s", uv_strerror(status));
        return;
    }
    peer_set_accept(app->peers, listener);
}

static void baseapp_shutdown(baseapp *app) {
    if (app->shutting_down) return;
    app->shutting_down = 1;
    log_info("shutting down");
    baseapp_admin_stop(app->admin);
    app->admin = NULL;
    uv_timer_stop(&app->sweep_timer);
    uv_timer_stop(&app->stats_timer);
    uv_timer_stop(&app->congestion_timer);
    uv_close((uv_handle_t *)&app->congestion_timer, NULL);
    uv_close((uv_handle_t *)&app->sweep_timer, NULL);
    uv_close((uv_handle_t *)&app->stats_timer, NULL);
    uv_close((uv_handle_t *)&app->sigint, NULL);
    uv_close((uv_handle_t *)&app->sigterm, NULL);
    uv_close((uv_handle_t *)&app->sigusr1, NULL);
    uv_close((uv_handle_t *)&app->sighup, NULL);
    uv_close((uv_handle_t *)&app->client_listener, NULL);
    uv_close((uv_handle_t *)&app->peer_listener, NULL);
    client_link_close_all(app, TESSERA__CLIENT__ERROR_CODE__ERROR_SERVER_SHUTDOWN, "server shutting down");
    proxy_free_all(app);
    registry_free(app->registry);
    app->registry = NULL;
    mailbox_free(app->mailbox);
    app->mailbox = NULL;
    base_mailbox_free(app->bases);
    app->bases = NULL;
    peer_set_free(app->peers);
    redis_client_free(app->redis);
    arena_close(&app->client_arena);
}

/* SIGHUP: log_level and log_format again from the config. */
static void baseapp_on_reload_signal(uv_signal_t *handle, int signum) {
    baseapp *app = handle->data;
    (void)signum;
    process_reload_logging("tessera-baseapp", app->argc, app->argv, baseapp_config_keys, BASEAPP_CONFIG_KEY_COUNT,
                           sizeof(baseapp_settings), offsetof(baseapp_settings, process));
}

static void baseapp_on_dump_signal(uv_signal_t *handle, int signum) {
    (void)signum;
    base_entity_dump(handle->data);
}

void baseapp_begin_drain(baseapp *app) {
    if (app->shutting_down) return;
    if (app->draining) {
        log_info("asked to stop again while draining: stopping now");
        baseapp_shutdown(app);
        return;
    }
    app->draining = true;
    app->drain_started_us = clock_monotonic_us();
    size_t clients = entity_list_count(app->links);
    log_info("draining: no new logins; %zu clients told to log in again in %lld ms; %u entities to write; stopping "
             "once done (at most %lld ms)",
             clients, (long long)app->settings.shutdown_retry_ms, entity_list_count(app->proxies),
             (long long)app->settings.drain_timeout_ms);
    /* Every entity is written and goes. With another baseapp up, each
     * client in the world goes there once its entity is written (a
     * LoginRedirect, proxy_hand_off); otherwise clients are told to come
     * back in a moment. */
    bool hand_off = login_route_can_hand_off(app);
    uint32_t cursor = 0;
    proxy *player;
    while (hand_off && (player = entity_list_next(app->proxies, &cursor, NULL)) != NULL)
        if (player->state != PROXY_DESTROYING && player->link && player->link->state == CLIENT_LINK_IN_WORLD)
            proxy_hand_off(player);
    /* The other clients are told to come back; their proxies, detached,
     * go with a save (proxy_on_link_lost), and so do those already
     * detached. */
    cursor = 0;
    client_link *link;
    while ((link = entity_list_next(app->links, &cursor, NULL)) != NULL)
        if (link->state != CLIENT_LINK_HANDING_OFF)
            client_link_fail(link, TESSERA__CLIENT__ERROR_CODE__ERROR_SERVER_SHUTDOWN,
                             "this baseapp is stopping: log in again (another baseapp will take you)");
    cursor = 0;
    while ((player = entity_list_next(app->proxies, &cursor, NULL)) != NULL)
        if (player->state != PROXY_DESTROYING) proxy_destroy(player, true, "the baseapp is stopping");
    baseapp_drain_check(app);
}

static void baseapp_on_terminate(uv_signal_t *handle, int signum) {
    log_info("received signal %d", signum);
    baseapp_begin_drain(handle->data);
}

int main(int argc, char **argv) {
    static baseapp app; /* the process's single context */
    char err[512];
    int status = process_configure("tessera-baseapp", "baseapp", argc, argv, baseapp_config_keys,
                                   BASEAPP_CONFIG_KEY_COUNT, &app.settings, &app.settings.process, NULL);
    if (status != PROCESS_CONTINUE) return status;
    baseapp_settings *settings = &app.settings;
    if (sodium_init() < 0) {
        fprintf(stderr, "tessera-baseapp: libsodium failed to initialise\n");
        return 1;
    }
    if (entity_def_load_directory(settings->entity_definitions, &app.definitions, err, sizeof err) != 0) {
        fprintf(stderr, "tessera-baseapp: configuration error: entity_definitions '%s': %s\n",
                settings->entity_definitions, err);
        return 1;
    }
    app.definitions_text = entity_def_registry_describe(app.definitions);
    if (!entity_def_registry_find_class(app.definitions, settings->player_entity_type)) {
        if (!settings->player_entity_type[0])
            fprintf(stderr,
                    "tessera-baseapp: configuration error: player_entity_type is not set: name the class of "
                    "%s that a login gets\n",
                    settings->entity_definitions);
        else
            fprintf(stderr, "tessera-baseapp: configuration error: player_entity_type '%s' is not defined in %s\n",
                    settings->player_entity_type, settings->entity_definitions);
        entity_def_registry_free(app.definitions);
        free(app.definitions_text);
        return 1;
    }
    app.game = base_game_load(&app, settings->game_module, &settings->game, err, sizeof err);
    if (!app.game) {
        fprintf(stderr, "tessera-baseapp: configuration error: %s\n", err);
        entity_def_registry_free(app.definitions);
        free(app.definitions_text);
        return 1;
    }

    app.loop = uv_default_loop();
    app.links = entity_list_create(BASEAPP_MAX_PROXY_SLOTS, 32);
    arena_init(&app.client_arena);
    app.proxies = entity_list_create(BASEAPP_MAX_PROXY_SLOTS, 32);
    latency_histogram_init(&app.write_latency, 100, 10000000);
    latency_histogram_init(&app.handover_latency, 100, 10000000);
    id_map_init(&app.proxies_by_entity);
    id_map_init(&app.proxies_by_account);
    login_throttle_init(&app.throttle, settings->login_failures_per_account, settings->login_failures_per_address);
    id_map_init(&app.cellapp_assignments);
    id_map_init(&app.baseapp_assignments);
    id_map_init(&app.handovers_pending);

    if (channel_listen(app.loop, &app.client_listener, settings->client_host, (int)settings->client_port,
                       baseapp_on_client_connection, err, sizeof err) != 0) {
        fprintf(stderr, "tessera-baseapp: client listener: %s\n", err);
        return 1;
    }
    app.client_listener.data = &app;
    app.client_port = channel_listener_port(&app.client_listener);
    if (channel_listen(app.loop, &app.peer_listener, settings->process.internal_host,
                       (int)settings->process.internal_port, baseapp_on_peer_connection, err, sizeof err) != 0) {
        fprintf(stderr, "tessera-baseapp: peer listener: %s\n", err);
        return 1;
    }
    app.peer_listener.data = &app;
    app.peer_port = channel_listener_port(&app.peer_listener);

    static const peer_set_callbacks peer_callbacks = {
        .on_peer_up = cell_link_on_peer_up,
        .on_peer_down = cell_link_on_peer_down,
        .on_message = cell_link_on_message,
    };
    app.peers = peer_set_create(app.loop, PEER_ROLE_BASEAPP, settings->process.cluster_name, &peer_callbacks, &app,
                                &app.peer_totals);
    app.redis = redis_client_create(app.loop, settings->process.redis_host, (int)settings->process.redis_port,
                                    (unsigned)settings->process.redis_retry_ms, baseapp_on_redis_state, &app);
    if (!app.redis) {
        fprintf(stderr, "tessera-baseapp: configuration error: redis_host '%s' is not usable\n",
                settings->process.redis_host);
        return 1;
    }
    app.entity_ids = id_block_create(app.redis, settings->process.cluster_name, (uint64_t)settings->entity_id_block);
    app.mailbox =
        mailbox_create(app.redis, settings->process.cluster_name, baseapp_mailbox_send, baseapp_mailbox_failed, &app);
    app.bases = base_call_mailbox_create(&app);
    registry_options registry_settings = {
        .cluster_name = settings->process.cluster_name,
        .role = "baseapp",
        .host = settings->process.internal_host,
        .port = app.peer_port,
        .client_host = settings->client_public_host[0] ? settings->client_public_host : settings->client_host,
        .heartbeat_ms = (unsigned)settings->process.heartbeat_ms,
        .ttl_ms = (unsigned)settings->process.registry_ttl_ms,
        .on_registered = baseapp_on_registered,
        .on_peers = baseapp_on_peers,
        .user_data = &app,
    };
    app.registry = registry_create(app.loop, app.redis, &registry_settings);
    registry_set_stat(app.registry, "client_port", app.client_port);
    app.admin = baseapp_admin_start(&app, err, sizeof err);
    if (!app.admin && err[0]) {
        fprintf(stderr, "tessera-baseapp: %s\n", err);
        return 1;
    }
    baseapp_admin_publish(app.admin, app.registry);
    baseapp_publish_stats(&app);

    uv_timer_init(app.loop, &app.sweep_timer);
    app.sweep_timer.data = &app;
    uv_timer_start(&app.sweep_timer, baseapp_on_sweep_timer, 1000, 1000);
    /* A congested client is told to its cell as soon as its queue passes the
     * threshold (cell_link.c); this timer notices it draining, every 50 ms:
     * a fraction of a tick, so the held updates resume within one. */
    uv_timer_init(app.loop, &app.congestion_timer);
    app.congestion_timer.data = &app;
    uv_timer_start(&app.congestion_timer, baseapp_on_congestion_timer, 50, 50);
    uv_timer_init(app.loop, &app.stats_timer);
    app.stats_timer.data = &app;
    uv_timer_start(&app.stats_timer, baseapp_on_stats_timer, 200, 200);
    uv_signal_init(app.loop, &app.sigint);
    uv_signal_init(app.loop, &app.sigterm);
    app.sigint.data = app.sigterm.data = &app;
    uv_signal_start(&app.sigint, baseapp_on_terminate, SIGINT);
    uv_signal_start(&app.sigterm, baseapp_on_terminate, SIGTERM);
    app.argc = argc;
    app.argv = argv;
    uv_signal_init(app.loop, &app.sighup);
    app.sighup.data = &app;
    uv_signal_start(&app.sighup, baseapp_on_reload_signal, SIGHUP);
    uv_signal_init(app.loop, &app.sigusr1);
    app.sigusr1.data = &app;
    uv_signal_start(&app.sigusr1, baseapp_on_dump_signal, SIGUSR1);

    log_info("baseapp starting: clients on %s:%d, peers on %s:%d, Redis %s:%lld, %zu entity types (digest %.16s)",
             settings->client_host, app.client_port, settings->process.internal_host, app.peer_port,
             settings->process.redis_host, (long long)settings->process.redis_port,
             entity_def_registry_class_count(app.definitions), entity_def_registry_digest_hex(app.definitions));
    redis_client_start(app.redis);
    uv_run(app.loop, UV_RUN_DEFAULT);

    baseapp_shutdown(&app);
    process_drain_loop(app.loop);
    id_block_free(app.entity_ids);
    id_map_close(&app.proxies_by_entity);
    id_map_close(&app.proxies_by_account);
    login_throttle_close(&app.throttle);
    id_map_close(&app.cellapp_assignments);
    id_map_close(&app.baseapp_assignments);
    {
        size_t cursor = 0;
        uint64_t request;
        void *pending;
        while (id_map_next(&app.handovers_pending, &cursor, &request, &pending)) free(pending);
    }
    id_map_close(&app.handovers_pending);
    free(app.baseapps);
    entity_list_free(app.proxies);
    entity_list_free(app.links);
    latency_histogram_close(&app.write_latency);
    latency_histogram_close(&app.handover_latency);
    base_game_free(app.game);
    entity_def_registry_free(app.definitions);
    free(app.definitions_text);
    log_info("stopped");
    return app.exit_code;
}
