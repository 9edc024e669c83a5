/* main.c -- the baseapp process: start-up (settings, libsodium, the
 * definitions, the process runtime, the client listener, then its modules
 * from the bottom up and the game), the wiring between modules (the
 * callbacks each lower module makes upward), the sweeps, the drain on
 * SIGINT/SIGTERM -- no new logins, every client told, every entity written
 * -- and an orderly stop. What clients send is client dispatch's; what
 * peers send, peer dispatch's. */
#include <inttypes.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baseapp.h"
#include "baseapp_admin.h"
#include "baseapp_fence.h"
#include "baseapp_figures.h"
#include "client_dispatch.h"
#include "clock.h"
#include "game_module.h"
#include "log.h"
#include "peer_dispatch.h"
#include "peer_message.h"

/* Bases and connections live in slot tables; a million of either per
 * process is far beyond what one loop serves, so it bounds their growth. */
#define BASEAPP_MAX_SLOTS (1u << 20)

/* ---- the wiring: what lower modules tell the ones above -------------------- */

static void baseapp_cell_release(void *owner, base_entity *base) { proxy_release(((baseapp *)owner)->players, base); }

static void baseapp_cell_lost(void *owner, base_entity *base, uint64_t cellapp_id, bool while_making,
                              const char *reason) {
    base_life_on_cell_lost(((baseapp *)owner)->life, base, cellapp_id, while_making, reason);
}

static void baseapp_written_last(void *owner, base_entity *base) { base_life_free(((baseapp *)owner)->life, base); }

static void baseapp_client_gone(void *owner, base_entity *base, const char *message) {
    proxy_client_gone(((baseapp *)owner)->players, base, message);
}

static void baseapp_client_part_free(void *owner, base_entity *base) {
    proxy_part_free(((baseapp *)owner)->players, base);
}

static void baseapp_cell_ready(void *owner, base_entity *base, const Tessera__Cluster__CellEntityCreated *reply,
                               bool created) {
    proxy_on_cell_ready(((baseapp *)owner)->players, base, reply, created);
}

static void baseapp_base_freed(void *owner, base_entity *base) {
    base_backups_forget(((baseapp *)owner)->backups, base->entity_id);
}

static size_t baseapp_other_baseapps(void *owner, bool websocket, char (*out)[80], size_t max) {
    baseapp *app = owner;
    return app->routes ? login_route_other_addresses(app->routes, websocket, out, max) : 0;
}

/* A dead baseapp's base, held here as a backup, comes back: its base part
 * (base_life.c), then its client part (proxy.c) if it held a client. An
 * account that plays here already keeps its newer session. */
static int baseapp_restore_base(void *owner, const Tessera__Cluster__BaseBackup *backup, uint64_t dead_baseapp_id,
                                char *why, size_t why_size) {
    baseapp *app = owner;
    const entity_def_class *cls =
        entity_def_registry_find_class(app->definitions, backup->class_name ? backup->class_name : "");
    if (!cls) {
        snprintf(why, why_size, "its class '%s' is not defined here", backup->class_name ? backup->class_name : "");
        return -1;
    }
    if (backup->has_proxy && (!backup->account || !backup->account[0] || !backup->session_token)) {
        snprintf(why, why_size, "its client part has no account or session");
        return -1;
    }
    if (backup->has_proxy && proxy_find_by_account(app->players, backup->account)) {
        snprintf(why, why_size, "account '%s' plays here already (a newer session)", backup->account);
        return -1;
    }
    base_entity *base = base_life_restore(app->life, cls, backup, dead_baseapp_id, why, why_size);
    if (!base) return -1;
    /* Its timers, each due the time it had left less the backup's age. */
    uint64_t now_wall = clock_wall_us();
    base_timers_restore(app->timers, base->entity_id, backup->timers, backup->n_timers,
                        now_wall > backup->saved_wall_us ? now_wall - backup->saved_wall_us : 0);
    if (backup->has_proxy)
        proxy_restore(app->players, base, backup->account, backup->session_token, backup->client_binding);
    return 0;
}

/* The mailbox's wire: straight to the cellapp that holds the real. */
static int baseapp_mailbox_send(uint64_t process_id, const Tessera__Cluster__CellMessage *message, void *user_data) {
    baseapp *app = user_data;
    return peer_send_cell_message(app->runtime.peers, process_id, message);
}

static void baseapp_mailbox_failed(uint64_t entity_id, uint64_t sequence, const char *reason, void *user_data) {
    baseapp *app = user_data;
    app->cell_messages_failed++;
    log_info("a message to the cell of entity %" PRIu64 " (#%" PRIu64 ") failed: %s", entity_id, sequence, reason);
}

/* ---- the runtime's hooks -------------------------------------------------------- */

static void baseapp_on_registered(void *owner, uint64_t process_id) {
    baseapp *app = owner;
    mailbox_set_self(app->mailbox, process_id);
    base_calls_set_self(app->calls, process_id);
}

static void baseapp_on_peers(void *owner, const registry_view *view) {
    baseapp *app = owner;
    cell_links_on_registry(app->cells);
    login_routes_on_registry(app->routes, view->peers, view->count);
}

static void baseapp_on_redis_connected(void *owner) { id_block_refill(((baseapp *)owner)->ids); }

static void baseapp_shutdown(baseapp *app);

/* A draining baseapp stops once its clients have gone (their errors were
 * flushed and the connections closed) and their entities are written, or
 * its time is up. */
static void baseapp_drain_check(baseapp *app) {
    if (!app->draining || app->runtime.self.stopping) return;
    size_t links = client_links_count(app->links), bases = base_entities_count(app->bases);
    uint64_t waited_ms = (clock_monotonic_us() - app->drain_started_us) / 1000;
    if (links == 0 && bases == 0) {
        log_info("drained: every client was told and has gone, every entity written");
        baseapp_shutdown(app);
    } else if (waited_ms >= (uint64_t)app->settings.drain_timeout_ms) {
        log_warn("drain timed out after %" PRIu64 " ms with %zu clients still connected and %zu entities not yet "
                 "written: stopping",
                 waited_ms, links, bases);
        baseapp_shutdown(app);
    }
}

static void baseapp_on_figures(void *owner) {
    baseapp *app = owner;
    baseapp_drain_check(app);
    if (app->runtime.self.stopping) return;
    baseapp_figures figures;
    baseapp_figures_gather(app, &figures);
    baseapp_figures_publish(&figures, app->runtime.registry);
    if (redis_client_is_connected(app->runtime.redis)) id_block_refill(app->ids);
}

/* SIGHUP: the game's scripts reload at the next tick. */
static void baseapp_on_reload(void *owner) {
    baseapp *app = owner;
    base_game_request_reload(app->game);
}

static void baseapp_on_dump(void *owner) {
    baseapp *app = owner;
    base_entity_dump(app->bases, app->settings.state_dump_path, app->runtime.self.process_id);
}

/* ---- timers and the client listener ------------------------------------------------ */

/* The sweep and the backups act for the bases: a fenced baseapp skips
 * them (baseapp_fence.h). */
static void baseapp_on_sweep_timer(uv_timer_t *timer) {
    baseapp *app = timer->data;
    uint64_t now = clock_monotonic_us();
    if (baseapp_fence_check(app, now)) return;
    login_throttle_sweep(&app->throttle, now);
    client_links_sweep(app->links);
    proxies_sweep(app->players);
    base_life_sweep(app->life);
    handovers_sweep(app->handovers);
    base_game_tick(app->game);
    cell_links_sweep(app->cells);
    mailbox_sweep(app->mailbox, now / 1000);
}

/* How long a baseapp declared dead waits for its clients' redirects to be
 * written before it rejoins. */
#define BASEAPP_REVOKED_FLUSH_US ((uint64_t)1000 * 1000)

/* The cluster declared this baseapp dead (baseapp_fence.h): its clients are
 * sent where their sessions live now, and once their connections have
 * closed (or after BASEAPP_REVOKED_FLUSH_US) it rejoins as a new
 * process. */
static void baseapp_on_revoked(void *owner) {
    baseapp *app = owner;
    if (app->revoked_us) return;
    app->revoked_us = clock_monotonic_us();
    size_t asked = login_route_send_sessions_home(app->routes);
    log_warn("declared dead by the cluster: %zu clients are sent to the baseapps that restored their sessions; "
             "rejoining once they have gone",
             asked);
}

static void baseapp_rejoin_once_sent(baseapp *app, uint64_t now_us) {
    if (client_links_count(app->links) > 0 && now_us - app->revoked_us < BASEAPP_REVOKED_FLUSH_US) return;
    process_runtime_rejoin(&app->runtime, "the cluster declared this process dead");
}

static void baseapp_on_congestion_timer(uv_timer_t *timer) {
    baseapp *app = timer->data;
    uint64_t now = clock_monotonic_us();
    if (app->revoked_us) {
        baseapp_rejoin_once_sent(app, now);
        return;
    }
    if (baseapp_fence_check(app, now)) return;
    proxies_check_congestion(app->players);
    base_game_run_timers(app->game, now);
    base_backups_tick(app->backups, now);
}

static void baseapp_on_client_connection(uv_stream_t *listener, int status) {
    baseapp *app = listener->data;
    if (status < 0) {
        log_warn("client listener: %s", uv_strerror(status));
        return;
    }
    client_links_accept(app->links, listener, false);
}

static void baseapp_on_websocket_connection(uv_stream_t *listener, int status) {
    baseapp *app = listener->data;
    if (status < 0) {
        log_warn("WebSocket listener: %s", uv_strerror(status));
        return;
    }
    client_links_accept(app->links, listener, true);
}

/* ---- drain and shutdown ------------------------------------------------------------- */

/* Closes what talks to the outside: the admin listener, the client
 * listener and the timers, every client, every base (freed, the unwritten
 * ones reported), the mailboxes (before Redis goes, which answers what
 * they wait for), then the runtime. The modules stay until the loop has
 * drained (baseapp_free); they see self.stopping and do nothing more.
 * Idempotent. */
static void baseapp_shutdown(baseapp *app) {
    if (app->runtime.self.stopping) return;
    app->runtime.self.stopping = true;
    log_info("shutting down");
    baseapp_admin_stop(app->admin);
    app->admin = NULL;
    if (app->timers_running) {
        uv_timer_stop(&app->sweep_timer);
        uv_timer_stop(&app->congestion_timer);
        uv_close((uv_handle_t *)&app->sweep_timer, NULL);
        uv_close((uv_handle_t *)&app->congestion_timer, NULL);
        app->timers_running = false;
    }
    if (app->client_listening) uv_close((uv_handle_t *)&app->client_listener, NULL);
    app->client_listening = false;
    if (app->websocket_listening) uv_close((uv_handle_t *)&app->websocket_listener, NULL);
    app->websocket_listening = false;
    if (app->links)
        client_links_close_all(app->links, TESSERA__CLIENT__ERROR_CODE__ERROR_SERVER_SHUTDOWN, "server shutting down");
    if (app->life) base_life_free_all(app->life);
    mailbox_free(app->mailbox);
    app->mailbox = NULL;
    base_calls_free(app->calls);
    app->calls = NULL;
    process_runtime_stop(&app->runtime);
}

/* Frees the modules, the game first (its shutdown may still ask them
 * things), once the loop has drained. */
static void baseapp_free(baseapp *app) {
    base_game_free(app->game);
    handovers_free(app->handovers);
    login_routes_free(app->routes);
    logins_free(app->logins);
    proxies_free(app->players);
    base_backups_free(app->backups);
    base_timers_free(app->timers);
    base_life_free_module(app->life);
    persistence_free(app->store);
    cell_links_free(app->cells);
    base_entities_free(app->bases);
    client_links_free(app->links);
    id_block_free(app->ids);
    login_throttle_close(&app->throttle);
    tls_context_free(app->client_tls);
    app->client_tls = NULL;
    entity_def_registry_free(app->definitions);
    free(app->definitions_text);
}

void baseapp_begin_drain(void *owner) {
    baseapp *app = owner;
    if (app->runtime.self.stopping) return;
    if (app->draining) {
        log_info("asked to stop again while draining: stopping now");
        baseapp_shutdown(app);
        return;
    }
    app->draining = true;
    app->drain_started_us = clock_monotonic_us();
    log_info("draining: no new logins; %zu clients told to log in again in %lld ms; %zu entities to write; stopping "
             "once done (at most %lld ms)",
             client_links_count(app->links), (long long)app->settings.shutdown_retry_ms,
             base_entities_count(app->bases), (long long)app->settings.drain_timeout_ms);
    /* Every entity is written and goes. With another baseapp up, each
     * client in the world goes there once its entity is written (a
     * LoginRedirect, proxy_hand_off); otherwise clients are told to come
     * back in a moment. */
    bool hand_off = login_route_can_hand_off(app->routes);
    uint32_t cursor = 0;
    base_entity *base;
    while (hand_off && (base = base_entities_next(app->bases, &cursor)) != NULL)
        if (base->state != BASE_ENTITY_DESTROYING && base->proxy && base->proxy->link &&
            base->proxy->link->state == CLIENT_LINK_IN_WORLD)
            proxy_hand_off(app->players, base);
    /* The other clients are told to come back; their proxies, detached,
     * go with a save (proxy_on_link_lost), and so do those already
     * detached. */
    cursor = 0;
    client_link *link;
    while ((link = client_links_next(app->links, &cursor)) != NULL)
        if (link->state != CLIENT_LINK_HANDING_OFF)
            client_link_fail(link, TESSERA__CLIENT__ERROR_CODE__ERROR_SERVER_SHUTDOWN,
                             "this baseapp is stopping: log in again (another baseapp will take you)");
    cursor = 0;
    while ((base = base_entities_next(app->bases, &cursor)) != NULL)
        if (base->state != BASE_ENTITY_DESTROYING) base_life_destroy(app->life, base, true, "the baseapp is stopping");
    baseapp_drain_check(app);
}

/* ---- start-up -------------------------------------------------------------------- */

/* The definitions and the player's class. Returns 0, or -1 with why in err. */
static int baseapp_load_definitions(baseapp *app, char *err, size_t errlen) {
    const baseapp_settings *settings = &app->settings;
    char why[400];
    if (entity_def_load_directory(settings->entity_definitions, &app->definitions, why, sizeof why) != 0) {
        snprintf(err, errlen, "configuration error: entity_definitions '%s': %s", settings->entity_definitions, why);
        return -1;
    }
    app->definitions_text = entity_def_registry_describe(app->definitions);
    if (entity_def_registry_find_class(app->definitions, settings->player_entity_type)) return 0;
    if (!settings->player_entity_type[0])
        snprintf(err, errlen,
                 "configuration error: player_entity_type is not set: name the class of %s that a login gets",
                 settings->entity_definitions);
    else
        snprintf(err, errlen, "configuration error: player_entity_type '%s' is not defined in %s",
                 settings->player_entity_type, settings->entity_definitions);
    return -1;
}

/* The modules, bottom up: each borrows only what was built before it. */
static void baseapp_build_modules(baseapp *app) {
    baseapp_settings *settings = &app->settings;
    process_runtime *rt = &app->runtime;
    const char *cluster = settings->process.cluster_name;
    login_throttle_init(&app->throttle, settings->login_failures_per_account, settings->login_failures_per_address);
    app->sessions = (session_directory){rt->redis, cluster, &rt->self};
    app->ids = id_block_create(rt->redis, cluster, (uint64_t)settings->entity_id_block);
    app->mailbox = mailbox_create(rt->redis, cluster, baseapp_mailbox_send, baseapp_mailbox_failed, app);
    client_links_context link_needs = {settings,
                                       entity_def_registry_digest_hex(app->definitions),
                                       &app->throttle,
                                       &app->draining,
                                       &rt->self,
                                       client_dispatch_handlers(app),
                                       baseapp_fence_may_dispatch,
                                       app,
                                       app->client_tls,
                                       app->play_files,
                                       PLAY_FILES_COUNT};
    app->links = client_links_create(&link_needs, BASEAPP_MAX_SLOTS);
    app->events = (base_events){app->definitions, app->links, rt->peers, &app->hooks};
    app->bases = base_entities_create(BASEAPP_MAX_SLOTS);
    cell_links_context cell_needs = {settings,   rt->peers, app->mailbox,
                                     app->bases, &rt->self, {app, baseapp_cell_release, baseapp_cell_lost}};
    app->cells = cell_links_create(&cell_needs);
    persistence_context store_needs = {settings, rt->redis, app->cells, app->bases, &app->hooks, baseapp_written_last,
                                       app,      &rt->self};
    app->store = persistence_create(&store_needs);
    base_calls_context call_needs = {rt->redis,  cluster,     app->definitions, rt->peers,
                                     app->bases, &app->hooks, &rt->self};
    app->calls = base_calls_create(&call_needs);
    base_life_context life_needs = {
        app->bases, app->cells,
        app->store, base_calls_mailbox(app->calls),
        app->ids,   &app->hooks,
        &rt->self,  {app, baseapp_client_gone, baseapp_client_part_free, baseapp_cell_ready, baseapp_base_freed}};
    app->life = base_life_create(&life_needs);
    app->timers = base_timers_create(&rt->self);
    base_backups_context backup_needs = {settings, rt->peers, app->bases, &rt->self, app->timers, baseapp_restore_base,
                                         app};
    app->backups = base_backups_create(&backup_needs);
    proxies_context player_needs = {settings,
                                    app->definitions,
                                    app->definitions_text,
                                    app->bases,
                                    app->life,
                                    app->cells,
                                    app->links,
                                    app->store,
                                    &app->sessions,
                                    &app->hooks,
                                    &rt->self,
                                    &app->draining,
                                    client_dispatch_hand_off,
                                    baseapp_other_baseapps,
                                    app};
    app->players = proxies_create(&player_needs);
    logins_context login_needs = {rt->loop, settings, rt->redis, app->links, client_dispatch_verified, app};
    app->logins = logins_create(&login_needs);
    login_routes_context route_needs = {settings, rt->redis, app->links, app->players, &rt->self, &app->sessions};
    app->routes = login_routes_create(&route_needs);
    handovers_context handover_needs = {
        settings,    rt->redis, rt->peers,      app->bases,        app->players,        base_calls_mailbox(app->calls),
        &app->hooks, &rt->self, &app->draining, &app->client_port, &app->websocket_port};
    app->handovers = handovers_create(&handover_needs);
}

/* Everything up to the loop: the runtime, the client listener, the
 * modules, the game, the registry entry, the admin listener and the
 * timers. Returns 0, or -1 with why in err. */
static int baseapp_build(baseapp *app, int argc, char **argv, char *err, size_t errlen) {
    baseapp_settings *settings = &app->settings;
    static const peer_set_callbacks peer_callbacks = {
        .on_peer_up = peer_dispatch_on_peer_up,
        .on_peer_down = peer_dispatch_on_peer_down,
        .on_peer_dead = peer_dispatch_on_peer_dead,
        .on_message = peer_dispatch_on_message,
    };
    process_runtime_options options = {
        .program = "tessera-baseapp",
        .role = "baseapp",
        .peer_role = PEER_ROLE_BASEAPP,
        .settings = &settings->process,
        .keys = baseapp_config_keys,
        .key_count = baseapp_config_key_count,
        .settings_size = sizeof(baseapp_settings),
        .common_offset = offsetof(baseapp_settings, process),
        .argc = argc,
        .argv = argv,
        .peer_callbacks = &peer_callbacks,
        .peer_user_data = app,
        .figures_ms = 200,
        .hooks =
            {
                .owner = app,
                .registered = baseapp_on_registered,
                .peers = baseapp_on_peers,
                .redis_connected = baseapp_on_redis_connected,
                .figures = baseapp_on_figures,
                .revoked = baseapp_on_revoked,
                .terminate = baseapp_begin_drain,
                .interrupt = baseapp_begin_drain,
                .dump = baseapp_on_dump,
                .reload = baseapp_on_reload,
            },
    };
    if (process_runtime_open(&app->runtime, &options, err, errlen) != 0) return -1;
    char why[400];
    /* The files were checked at start (baseapp_check_settings); read again
     * here, they may have changed since. */
    if (settings->client_tls_certificate_file[0]) {
        app->client_tls = tls_server_context_create(settings->client_tls_certificate_file,
                                                    settings->client_tls_key_file, why, sizeof why);
        if (!app->client_tls) {
            snprintf(err, errlen, "configuration error: %s", why);
            return -1;
        }
    }
    if (channel_listen(app->runtime.loop, &app->client_listener, settings->client_host, (int)settings->client_port,
                       baseapp_on_client_connection, why, sizeof why) != 0) {
        snprintf(err, errlen, "client listener: %s", why);
        return -1;
    }
    app->client_listening = true;
    app->client_listener.data = app;
    app->client_port = channel_listener_port(&app->client_listener);
    play_files_fill(app->play_files);
    if (settings->websocket_port >= 0) {
        if (channel_listen(app->runtime.loop, &app->websocket_listener, settings->client_host,
                           (int)settings->websocket_port, baseapp_on_websocket_connection, why, sizeof why) != 0) {
            snprintf(err, errlen, "WebSocket listener: %s", why);
            return -1;
        }
        app->websocket_listening = true;
        app->websocket_listener.data = app;
        app->websocket_port = channel_listener_port(&app->websocket_listener);
    }
    baseapp_build_modules(app);
    base_game_services game_needs = {app->definitions,   &app->hooks,
                                     app->bases,         app->life,
                                     app->players,       app->cells,
                                     app->store,         app->calls,
                                     &app->events,       &app->runtime.self,
                                     &app->draining,     app->timers,
                                     app->runtime.redis, settings->process.cluster_name};
    app->game = base_game_load(&game_needs, settings->game_module, &settings->game, why, sizeof why);
    if (!app->game) {
        snprintf(err, errlen, "configuration error: %s", why);
        return -1;
    }
    lua_runtime_limits lua_limits = {(uint64_t)settings->lua_instruction_budget, (size_t)settings->lua_memory_mb << 20};
    if (base_game_open_scripts(app->game, settings->game_scripts, &lua_limits, why, sizeof why) != 0) {
        snprintf(err, errlen, "configuration error: %s", why);
        return -1;
    }
    process_runtime_register(&app->runtime, baseapp_settings_public_host(settings));
    registry_set_stat(app->runtime.registry, "client_port", baseapp_settings_public_port(settings, app->client_port));
    if (app->websocket_port > 0)
        registry_set_stat(app->runtime.registry, "websocket_port",
                          baseapp_settings_public_websocket_port(settings, app->websocket_port));
    app->admin = baseapp_admin_start(app, why, sizeof why);
    if (!app->admin && why[0]) {
        snprintf(err, errlen, "%s", why);
        return -1;
    }
    baseapp_admin_publish(app->admin, app->runtime.registry);
    baseapp_on_figures(app);
    uv_timer_init(app->runtime.loop, &app->sweep_timer);
    app->sweep_timer.data = app;
    uv_timer_start(&app->sweep_timer, baseapp_on_sweep_timer, 1000, 1000);
    /* A congested client is told to its cell as soon as its queue passes the
     * threshold (proxy.c); this timer notices it draining, every 50 ms: a
     * fraction of a tick, so the held updates resume within one. The bases'
     * timers run on the same beat (base_timer.h). */
    uv_timer_init(app->runtime.loop, &app->congestion_timer);
    app->congestion_timer.data = app;
    uv_timer_start(&app->congestion_timer, baseapp_on_congestion_timer, 50, 50);
    app->timers_running = true;
    return 0;
}

/* The settings' rules across keys, checked before anything starts (and by
 * --check): TLS's certificate and key go together, load, and match; the
 * WebSocket port's settings fit them; the game's definitions load, name the
 * player's class, and its module opens with this engine's ABI. */
static int baseapp_check_settings(const void *raw, char *err, size_t errlen) {
    const baseapp_settings *settings = raw;
    bool certificate = settings->client_tls_certificate_file[0], key = settings->client_tls_key_file[0];
    if (certificate != key) {
        snprintf(err, errlen, "client_tls_certificate_file and client_tls_key_file go together (%s is not set)",
                 certificate ? "client_tls_key_file" : "client_tls_certificate_file");
        return -1;
    }
    if (settings->websocket_tls && !certificate) {
        snprintf(err, errlen, "websocket_tls needs client_tls_certificate_file and client_tls_key_file");
        return -1;
    }
    if (settings->websocket_port > 0 && settings->websocket_port == settings->client_port) {
        snprintf(err, errlen, "websocket_port and client_port are both %lld: give each its own port",
                 (long long)settings->websocket_port);
        return -1;
    }
    if (certificate) {
        tls_context *context = tls_server_context_create(settings->client_tls_certificate_file,
                                                         settings->client_tls_key_file, err, errlen);
        if (!context) return -1;
        tls_context_free(context);
    }
    /* The game: its definitions, the player's class, its module's ABI, its
     * scripts. */
    if (game_module_check(settings->entity_definitions, settings->player_entity_type, settings->game_module, "baseapp",
                          err, errlen) != 0)
        return -1;
    return game_module_check_scripts(settings->entity_definitions, settings->game_scripts, "base", err, errlen);
}

int main(int argc, char **argv) {
    static baseapp app; /* the process's single context */
    int status =
        process_configure("tessera-baseapp", "baseapp", argc, argv, baseapp_config_keys, baseapp_config_key_count,
                          &app.settings, &app.settings.process, baseapp_check_settings);
    if (status != PROCESS_CONTINUE) return status;
    if (sodium_init() < 0) {
        fprintf(stderr, "tessera-baseapp: libsodium failed to initialise\n");
        return 1;
    }
    char err[1024];
    if (baseapp_load_definitions(&app, err, sizeof err) != 0) {
        fprintf(stderr, "tessera-baseapp: %s\n", err);
        entity_def_registry_free(app.definitions);
        free(app.definitions_text);
        return 1;
    }
    if (baseapp_build(&app, argc, argv, err, sizeof err) != 0) {
        fprintf(stderr, "tessera-baseapp: %s\n", err);
        app.runtime.exit_code = 1;
    } else {
        const baseapp_settings *settings = &app.settings;
        log_info("baseapp starting: clients on %s:%d, peers on %s:%d, Redis %s:%lld, %zu entity types (digest %.16s)",
                 settings->client_host, app.client_port, settings->process.internal_host, app.runtime.peer_port,
                 settings->process.redis_host, (long long)settings->process.redis_port,
                 entity_def_registry_class_count(app.definitions), entity_def_registry_digest_hex(app.definitions));
        if (app.websocket_port > 0)
            log_info("browsers on ws%s://%s:%d/ (WebSocket; the play page at http%s://%s:%d/play)",
                     settings->websocket_tls ? "s" : "", settings->client_host, app.websocket_port,
                     settings->websocket_tls ? "s" : "", settings->client_host, app.websocket_port);
        process_runtime_run(&app.runtime);
    }
    /* Either a drain or a second signal ran the shutdown and the loop
     * drained, or a fatal error stopped the loop (or the start): close what
     * is left and drain. */
    baseapp_shutdown(&app);
    process_runtime_close(&app.runtime);
    baseapp_free(&app);
    log_info("stopped");
    return app.runtime.exit_code;
}
