/* proxy.c -- proxies: players' bases, each of which may hold a client link.
 *
 * A proxy is made when an account logs in and nothing of it is here yet:
 * its stored state is loaded (persistence.c), it takes an entity id and
 * asks the least-loaded cellapp for its cell part. It keeps the player's
 * entity whether or not a client is connected:
 *
 *   - a link that drops detaches; the proxy waits client_detached_grace_ms
 *     for a Reconnect with its session token, then goes (with a save);
 *   - a second login of the account takes the proxy over: the old link is
 *     told ERROR_REPLACED, the new one gets the same entity;
 *   - every change of client is a new binding (ClientBinding): the cell
 *     drops its witness when the client goes and builds a fresh one when a
 *     client comes, and the client's messages of any other binding are
 *     dropped here, so no stream reaches the wrong connection.
 *
 * A proxy's end (proxy_destroy) is explicit: its cell part goes with a last
 * backup, its state is written, and only then is it freed. */
#include <inttypes.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baseapp.h"
#include "clock.h"
#include "log.h"
#include "peer_message.h"

proxy *proxy_find_by_entity(const baseapp *app, uint64_t entity_id) {
    return id_map_get(&app->proxies_by_entity, entity_id);
}

proxy *proxy_find_by_account(const baseapp *app, const char *account) {
    proxy *player = id_map_get(&app->proxies_by_account, baseapp_account_key(account));
    return player && strcmp(player->account, account) == 0 ? player : NULL;
}

static void proxy_new_session_token(proxy *player) {
    unsigned char bytes[16];
    randombytes_buf(bytes, sizeof bytes);
    sodium_bin2hex(player->session_token, sizeof player->session_token, bytes, sizeof bytes);
}

void proxy_sync_cell_binding(proxy *player) {
    if (player->state != PROXY_LIVE) return;
    bool attached = player->link != NULL;
    if (player->cell_binding == player->client_binding && player->cell_attached == attached) return;
    Tessera__Cluster__ClientBinding binding = TESSERA__CLUSTER__CLIENT_BINDING__INIT;
    binding.binding = player->client_binding;
    binding.attached = attached;
    Tessera__Cluster__CellMessage message = TESSERA__CLUSTER__CELL_MESSAGE__INIT;
    message.body_case = TESSERA__CLUSTER__CELL_MESSAGE__BODY_CLIENT_BINDING;
    message.client_binding = &binding;
    if (cell_link_send(player, &message) == 0) {
        player->cell_binding = player->client_binding;
        player->cell_attached = attached;
    }
}

void proxy_on_link_lost(proxy *player) {
    baseapp *app = player->app;
    player->link = NULL;
    player->detached_us = clock_monotonic_us();
    player->client_binding++;
    if (player->state == PROXY_DESTROYING) return;
    proxy_sync_cell_binding(player);
    if (app->draining || app->settings.client_detached_grace_ms == 0) {
        proxy_destroy(player, true, app->draining ? "its client left a draining baseapp" : "its client left");
        return;
    }
    log_debug("entity %" PRIu64 " (account '%s'): detached; kept %lld ms for a reconnect", player->entity_id,
              player->account, (long long)app->settings.client_detached_grace_ms);
}

/* What the client needs to read its space's stream, from what the cell
 * part said (CellEntityCreated), as an EnteredSpace. */
static void proxy_fill_space(Tessera__Client__EnteredSpace *space, uint64_t entity_id,
                             const Tessera__Cluster__CellEntityCreated *reply) {
    space->entity_id = entity_id;
    space->position = reply->position;
    space->yaw = reply->yaw;
    space->view_radius = reply->view_radius;
    space->view_hysteresis = reply->view_hysteresis;
    space->max_speed = reply->max_speed;
    space->tick_hz = reply->tick_hz;
    space->space_name = reply->space_name;
    space->max_aliases = reply->max_aliases;
    space->position_precision = reply->position_precision;
    space->world_min = reply->world_min;
    space->world_max = reply->world_max;
    space->yaw_steps = reply->yaw_steps;
    space->detail_near_distance = reply->detail_near_distance;
    space->detail_medium_distance = reply->detail_medium_distance;
    space->alias_cooldown_ms = reply->alias_cooldown_ms;
    space->detail_hysteresis = reply->detail_hysteresis;
}

/* Sends the bound link its LoginReply, with its space from what the cell
 * part said (reply NULL: no space, the entity has no cell part), and the
 * base's properties; the link is in the world. */
static void proxy_send_login_reply(proxy *player, const Tessera__Cluster__CellEntityCreated *reply) {
    baseapp *app = player->app;
    client_link *link = player->link;
    Tessera__Client__EnteredSpace space = TESSERA__CLIENT__ENTERED_SPACE__INIT;
    if (reply) proxy_fill_space(&space, player->entity_id, reply);
    Tessera__Client__LoginReply login = TESSERA__CLIENT__LOGIN_REPLY__INIT;
    login.entity_id = player->entity_id;
    login.position = space.position;
    login.yaw = space.yaw;
    login.view_radius = space.view_radius;
    login.view_hysteresis = space.view_hysteresis;
    login.max_speed = space.max_speed;
    login.tick_hz = space.tick_hz;
    login.space_name = space.space_name;
    login.definitions = link->has_definitions ? "" : app->definitions_text;
    login.definitions_digest = (char *)entity_def_registry_digest_hex(app->definitions);
    login.max_aliases = space.max_aliases;
    login.position_precision = space.position_precision;
    login.world_min = space.world_min;
    login.world_max = space.world_max;
    login.yaw_steps = space.yaw_steps;
    login.detail_near_distance = space.detail_near_distance;
    login.detail_medium_distance = space.detail_medium_distance;
    login.entity_type = (char *)player->cls->name;
    login.max_frame_bytes = (uint32_t)app->settings.client_max_frame_bytes;
    login.moves_per_second = (float)app->settings.client_moves_per_second;
    login.calls_per_second = (float)app->settings.client_calls_per_second;
    login.login_timeout_ms = (uint32_t)app->settings.login_timeout_ms;
    login.alias_cooldown_ms = space.alias_cooldown_ms;
    login.detail_hysteresis = space.detail_hysteresis;
    login.session_token = player->session_token;
    login.detached_grace_ms = (uint32_t)app->settings.client_detached_grace_ms;
    login.reconnected = link->reconnecting;
    login.no_space = reply == NULL;
    Tessera__Client__ServerToClient message = TESSERA__CLIENT__SERVER_TO_CLIENT__INIT;
    message.body_case = TESSERA__CLIENT__SERVER_TO_CLIENT__BODY_LOGIN_REPLY;
    message.login_reply = &login;
    client_link_send(link, &message);
    link->state = CLIENT_LINK_IN_WORLD;
    player->space_pending = false;
    client_link_start_limits(link);
    base_entity_send_properties(player, true);
    log_debug("entity %" PRIu64 " (account '%s') %s on cellapp %" PRIu64 " (binding %u)", player->entity_id,
              player->account, link->reconnecting ? "reconnected" : "entered the world", player->cell.cellapp_id,
              player->client_binding);
    /* The game learns the base has a client (a login, a reconnect, a
     * redirected login), as it does on a giveClientTo. */
    base_game_client_enabled(app->game, player);
}

/* A handover is done once the client hears its new space (or at once for a
 * target without a cell part): its latency, from the call on. */
static void proxy_handover_done(proxy *player) {
    if (!player->handover_started_us) return;
    latency_histogram_add(&player->app->handover_latency, clock_monotonic_us() - player->handover_started_us);
    player->handover_started_us = 0;
}

/* Tells the client its player entity is in a space now (after a
 * giveClientTo): the stream of its new witness follows. */
static void proxy_send_entered_space(proxy *player, const Tessera__Cluster__CellEntityCreated *reply) {
    Tessera__Client__EnteredSpace space = TESSERA__CLIENT__ENTERED_SPACE__INIT;
    proxy_fill_space(&space, player->entity_id, reply);
    Tessera__Client__ServerToClient message = TESSERA__CLIENT__SERVER_TO_CLIENT__INIT;
    message.body_case = TESSERA__CLIENT__SERVER_TO_CLIENT__BODY_ENTERED_SPACE;
    message.entered_space = &space;
    client_link_send(player->link, &message);
    player->space_pending = false;
    proxy_handover_done(player);
    log_debug("entity %" PRIu64 " (account '%s'): its client entered space '%s'", player->entity_id, player->account,
              reply->space_name ? reply->space_name : "");
}

/* Binds `link` to `player`: a new binding, a new session token; the link
 * enters the world once the cell part says where the player is, or at
 * once when the entity has no cell part. */
static void proxy_attach(proxy *player, client_link *link) {
    link->proxy = player;
    link->state = CLIENT_LINK_ENTERING;
    player->link = link;
    player->detached_us = 0;
    player->client_binding++;
    id_map_put(&player->app->proxies_by_account, baseapp_account_key(player->account), player);
    login_route_claim(player);
    proxy_new_session_token(player);
    if (player->state == PROXY_LIVE && !player->cell.cellapp_id) {
        proxy_send_login_reply(player, NULL);
        return;
    }
    proxy_sync_cell_binding(player);
}

void proxy_on_cell_ready(proxy *player, uint64_t cellapp_id, const Tessera__Cluster__CellEntityCreated *reply) {
    if (player->state == PROXY_CREATING_CELL) {
        if (!reply->ok) {
            cell_address_clear(&player->cell);
            if (player->link)
                client_link_fail(player->link, TESSERA__CLIENT__ERROR_CODE__ERROR_UNAVAILABLE,
                                 "cellapp %" PRIu64 " refused the entity: %s", cellapp_id,
                                 reply->error ? reply->error : "");
            proxy_destroy(player, false, "its cell part was refused");
            return;
        }
        cell_address_clear(&player->cell);
        cell_address_init(&player->cell, cellapp_id, reply->incarnation ? reply->incarnation : 1);
        player->state = PROXY_LIVE;
        player->cell_binding = reply->client_binding; /* cell_attached: as it was created */
        if (player->cell_binding != player->client_binding || player->cell_attached != (player->link != NULL)) {
            /* Its client changed while the cell part was made: the cell
             * learns the binding now, and an attach is answered again. */
            proxy_sync_cell_binding(player);
            return;
        }
    } else if (player->state != PROXY_LIVE || reply->client_binding != player->client_binding) {
        return; /* an answer for a binding that has passed */
    }
    if (!player->link) return;
    if (player->link->state == CLIENT_LINK_ENTERING)
        proxy_send_login_reply(player, reply);
    else if (player->space_pending)
        proxy_send_entered_space(player, reply);
}

proxy *proxy_make(baseapp *app, const entity_def_class *cls, const char *account, const cJSON *stored, char *why,
                  size_t why_size) {
    uint64_t entity_id;
    if (id_block_take(app->entity_ids, &entity_id) != 0) {
        snprintf(why, why_size, "no entity ids available, try again");
        return NULL;
    }
    proxy *player = xcalloc(1, sizeof *player);
    player->app = app;
    player->handle = entity_list_add(app->proxies, player);
    if (player->handle == ENTITY_HANDLE_NONE) {
        free(player);
        snprintf(why, why_size, "server full, try another baseapp");
        return NULL;
    }
    /* Without a cell part it is whole at once. */
    player->state = base_entity_has_cell(cls) ? PROXY_CREATING_CELL : PROXY_LIVE;
    player->entity_id = entity_id;
    snprintf(player->account, sizeof player->account, "%s", account);
    id_map_put(&app->proxies_by_entity, entity_id, player);
    base_entity_create(player, cls);
    persistence_restore(player, stored);
    base_mailbox_claim(app->bases, entity_id);
    base_game_created(app->game, player);
    return player;
}

int proxy_create_cell(proxy *player, bool with_client) {
    baseapp *app = player->app;
    uint64_t cellapp_id = cell_link_choose(app);
    if (!cellapp_id) return -1;
    /* The cellapp asked; the address comes with its answer. */
    cell_address_init(&player->cell, cellapp_id, 0);
    player->cell_attached = with_client;
    bit_writer cell_properties;
    bit_writer_init(&cell_properties);
    base_entity_cell_properties(player, &cell_properties);
    Tessera__Client__Vector3 position = TESSERA__CLIENT__VECTOR3__INIT;
    Tessera__Cluster__CreateCellEntity create = TESSERA__CLUSTER__CREATE_CELL_ENTITY__INIT;
    create.entity_id = player->entity_id;
    create.baseapp_id = app->process_id;
    create.entity_type = (char *)player->cls->name;
    create.space_name = player->persistence.space_name;
    if (player->persistence.has_position) {
        position.x = (float)player->persistence.position[0];
        position.y = (float)player->persistence.position[1];
        position.z = (float)player->persistence.position[2];
        create.position = &position;
        create.has_position = true;
        create.yaw = player->persistence.yaw;
    }
    create.has_client = with_client;
    create.client_binding = player->client_binding;
    create.cell_properties.data = (uint8_t *)bit_writer_data(&cell_properties);
    create.cell_properties.len = bit_writer_bytes(&cell_properties);
    peer_send_create_cell_entity(app->peers, cellapp_id, &create);
    bit_writer_close(&cell_properties);
    log_debug("entity %" PRIu64 " (%s of account '%s'): its cell part asked of cellapp %" PRIu64 "%s",
              player->entity_id, player->cls->name, player->account, cellapp_id,
              player->persistence.loaded ? " (restored)" : "");
    return 0;
}

/* The account has a proxy here already: the new link takes it over. */
static void proxy_take_over(proxy *player, client_link *link) {
    baseapp *app = player->app;
    if (player->link) {
        app->logins_replaced++;
        client_link_fail(player->link, TESSERA__CLIENT__ERROR_CODE__ERROR_REPLACED, "account '%s' logged in from %s",
                         player->account, channel_peer_name(link->ch));
    }
    proxy_attach(player, link);
}

/* Whether the account's proxy can take a login now: NULL when there is
 * none, or the proxy; fails the link while the last one is being saved
 * (its state must be written before it is read again). */
static bool proxy_busy_saving(client_link *link, proxy **existing) {
    *existing = proxy_find_by_account(link->app, link->account);
    if (*existing && (*existing)->state == PROXY_DESTROYING) {
        client_link_fail(link, TESSERA__CLIENT__ERROR_CODE__ERROR_UNAVAILABLE,
                         "your last session is still being saved: log in again in a moment");
        return true;
    }
    return false;
}

typedef struct proxy_login_load {
    entity_handle link_handle;
} proxy_login_load;

static void proxy_on_login_loaded(baseapp *app, persistence_outcome outcome, const cJSON *stored, void *context) {
    proxy_login_load *load = context;
    client_link *link = entity_list_get(app->links, load->link_handle);
    free(load);
    if (!link || link->state != CLIENT_LINK_AUTHENTICATING) return;
    if (outcome == PERSISTENCE_UNAVAILABLE) {
        client_link_fail(link, TESSERA__CLIENT__ERROR_CODE__ERROR_UNAVAILABLE,
                         "the entity database is unavailable, try again");
        return;
    }
    if (outcome == PERSISTENCE_DAMAGED) {
        client_link_fail_quietly(link, TESSERA__CLIENT__ERROR_CODE__ERROR_UNAVAILABLE,
                                 "your saved entity could not be read; it is kept for an operator to look at",
                                 "stored entity of account '%s' is damaged", link->account);
        return;
    }
    /* Another login of the account may have made its proxy meanwhile. */
    proxy *player;
    if (proxy_busy_saving(link, &player)) return;
    if (player) {
        proxy_take_over(player, link);
        return;
    }
    const entity_def_class *cls = entity_def_registry_find_class(app->definitions, app->settings.player_entity_type);
    char why[128];
    player = proxy_make(app, cls, link->account, stored, why, sizeof why);
    if (!player) {
        client_link_fail(link, TESSERA__CLIENT__ERROR_CODE__ERROR_UNAVAILABLE, "%s", why);
        return;
    }
    if (player->state == PROXY_CREATING_CELL && proxy_create_cell(player, true) != 0) {
        client_link_fail(link, TESSERA__CLIENT__ERROR_CODE__ERROR_UNAVAILABLE, "no cellapp available, try again");
        proxy_destroy(player, false, "no cellapp for its cell part");
        return;
    }
    proxy_attach(player, link);
}

void proxy_login_succeeded(client_link *link) {
    if (link->state != CLIENT_LINK_AUTHENTICATING) return;
    link->app->logins++;
    login_route(link);
}

void proxy_login_here(client_link *link) {
    baseapp *app = link->app;
    proxy *player;
    if (proxy_busy_saving(link, &player)) return;
    if (player) {
        proxy_take_over(player, link);
        return;
    }
    proxy_login_load *load = xcalloc(1, sizeof *load);
    load->link_handle = link->handle;
    if (persistence_load(app, app->settings.player_entity_type, link->account, proxy_on_login_loaded, load) != 0) {
        free(load);
        client_link_fail(link, TESSERA__CLIENT__ERROR_CODE__ERROR_UNAVAILABLE,
                         "the entity database is unavailable, try again");
    }
}

const char *proxy_give_client_source_refusal(const proxy *from) {
    if (!from || from->state == PROXY_DESTROYING) return "the source is destroyed";
    if (!from->link) return "the source has no client";
    if (from->link->state != CLIENT_LINK_IN_WORLD) return "the source's client has not entered the world yet";
    return NULL;
}

const char *proxy_give_client_refusal(const proxy *from, const proxy *to) {
    const char *source = proxy_give_client_source_refusal(from);
    if (source) return source;
    if (!to) return "the target is missing";
    if (to == from) return "the target is the source";
    if (to->state == PROXY_DESTROYING) return "the target is destroyed";
    if (to->link) return "the target already has a client";
    return NULL;
}

/* giveClientTo's steps 1 and 2, wherever the target is: the source's cell
 * loses its witness and the client destroys the old player entity. The
 * source keeps living without a client (not waiting for a reconnect: the
 * game decides its fate). Returns the link, now bound to nothing. */
static client_link *proxy_let_go_of_client(proxy *from) {
    client_link *link = from->link;
    from->link = NULL;
    from->detached_us = 0;
    from->client_binding++;
    from->space_pending = false;
    proxy_sync_cell_binding(from);
    link->proxy = NULL;
    client_link_forget_congestion(link);
    Tessera__Client__PlayerDestroyed destroyed = TESSERA__CLIENT__PLAYER_DESTROYED__INIT;
    destroyed.entity_id = from->entity_id;
    Tessera__Client__ServerToClient message = TESSERA__CLIENT__SERVER_TO_CLIENT__INIT;
    message.body_case = TESSERA__CLIENT__SERVER_TO_CLIENT__BODY_PLAYER_DESTROYED;
    message.player_destroyed = &destroyed;
    client_link_send(link, &message);
    return link;
}

int proxy_give_client_to(proxy *from, proxy *to, char *why, size_t why_size) {
    const char *refused = proxy_give_client_refusal(from, to);
    if (refused) {
        snprintf(why, why_size, "giveClientTo refused: %s", refused);
        log_info("entity %" PRIu64 ": %s (target %" PRIu64 ")", from ? from->entity_id : 0, why,
                 to ? to->entity_id : 0);
        return -1;
    }
    baseapp *app = from->app;
    uint64_t started_us = clock_monotonic_us();
    /* 1, 2. */
    client_link *link = proxy_let_go_of_client(from);
    /* 3, 4. The link, the client type and the login data (the account, the
     * session) move to the target; the source has lost its client. */
    link->proxy = to;
    to->link = link;
    to->detached_us = 0;
    snprintf(to->account, sizeof to->account, "%s", from->account);
    id_map_put(&app->proxies_by_account, baseapp_account_key(to->account), to);
    login_route_claim(to);
    proxy_new_session_token(to);
    /* 5. The target is created on the client, with its base properties. */
    Tessera__Client__PlayerCreated created = TESSERA__CLIENT__PLAYER_CREATED__INIT;
    created.entity_id = to->entity_id;
    created.entity_type = (char *)to->cls->name;
    created.session_token = to->session_token;
    Tessera__Client__ServerToClient message = TESSERA__CLIENT__SERVER_TO_CLIENT__INIT;
    message.body_case = TESSERA__CLIENT__SERVER_TO_CLIENT__BODY_PLAYER_CREATED;
    message.player_created = &created;
    client_link_send(link, &message);
    base_entity_send_properties(to, true);
    /* 6. The target's game code learns it has a client. */
    base_game_client_enabled(to->app->game, to);
    /* 7. With a cell part, the cell rebinds the client and builds a fresh
     * witness, and the client hears its space (proxy_on_cell_ready); a
     * target whose cell part is still being made does it when it is. */
    to->client_binding++;
    to->space_pending = base_entity_has_cell(to->cls);
    proxy_sync_cell_binding(to);
    app->handovers++;
    to->handover_started_us = started_us;
    if (!to->space_pending) proxy_handover_done(to);
    log_debug("entity %" PRIu64 " gave its client (account '%s') to entity %" PRIu64 " (%s)", from->entity_id,
              to->account, to->entity_id, to->cls->name);
    return 0;
}

void proxy_reconnect(client_link *link, const char *token) {
    baseapp *app = link->app;
    proxy *player = proxy_find_by_account(app, link->account);
    if (!player || player->state == PROXY_DESTROYING || strlen(token) != strlen(player->session_token) ||
        sodium_memcmp(token, player->session_token, strlen(token)) != 0) {
        app->reconnects_refused++;
        login_throttle_failed(&app->throttle, link->account, channel_peer_name(link->ch), clock_monotonic_us());
        client_link_fail_quietly(link, TESSERA__CLIENT__ERROR_CODE__ERROR_SESSION_EXPIRED,
                                 "no session to resume: log in again", "reconnect to account '%s' refused: %s",
                                 link->account,
                                 !player                             ? "no session here"
                                 : player->state == PROXY_DESTROYING ? "its session is over"
                                                                     : "wrong session token");
        return;
    }
    app->reconnects++;
    proxy_take_over(player, link);
}

void proxy_destroy(proxy *player, bool save, const char *reason) {
    baseapp *app = player->app;
    if (player->state == PROXY_DESTROYING) return;
    log_debug("entity %" PRIu64 " (account '%s'): destroyed%s: %s", player->entity_id, player->account,
              save ? " with a save" : "", reason);
    proxy_state was = player->state;
    player->state = PROXY_DESTROYING;
    if (player->link)
        client_link_fail(player->link, TESSERA__CLIENT__ERROR_CODE__ERROR_UNAVAILABLE, "your entity is gone: %s",
                         reason);
    if (was == PROXY_LIVE) {
        Tessera__Cluster__DestroyCellEntity destroy = TESSERA__CLUSTER__DESTROY_CELL_ENTITY__INIT;
        destroy.backup = save;
        destroy.request = save ? ++app->next_backup_request : 0;
        Tessera__Cluster__CellMessage message = TESSERA__CLUSTER__CELL_MESSAGE__INIT;
        message.body_case = TESSERA__CLUSTER__CELL_MESSAGE__BODY_DESTROY;
        message.destroy = &destroy;
        if (save && cell_link_send(player, &message) == 0) {
            /* The write follows the last backup (persistence_on_backup), or
             * the deadline (persistence_sweep). */
            player->persistence.backup_request = destroy.request;
            player->persistence.backup_deadline_us =
                clock_monotonic_us() + (uint64_t)app->settings.backup_timeout_ms * 1000u;
            return;
        }
        if (!save) cell_link_send(player, &message);
    }
    /* A cell part still being made is undone when its answer comes
     * (cell_link.c). */
    if (save) {
        persistence_write(player);
        return;
    }
    proxy_free(player);
}

void proxy_free(proxy *player) {
    baseapp *app = player->app;
    base_game_destroyed(app->game, player);
    if (app->bases) base_mailbox_release(app->bases, player->entity_id);
    if (player->link) {
        player->link->proxy = NULL;
        player->link = NULL;
    }
    if (id_map_get(&app->proxies_by_entity, player->entity_id) == player)
        id_map_remove(&app->proxies_by_entity, player->entity_id);
    uint64_t key = baseapp_account_key(player->account);
    if (id_map_get(&app->proxies_by_account, key) == player) {
        id_map_remove(&app->proxies_by_account, key);
        if (!app->shutting_down) login_route_release(player);
    }
    /* Draining: its client goes to another baseapp now that it is written. */
    client_link *handoff = player->handoff_link ? entity_list_get(app->links, player->handoff_link) : NULL;
    if (handoff && handoff->state == CLIENT_LINK_HANDING_OFF && !app->shutting_down &&
        login_route_hand_off(handoff, "this baseapp is stopping") != 0)
        client_link_fail(handoff, TESSERA__CLIENT__ERROR_CODE__ERROR_SERVER_SHUTDOWN,
                         "this baseapp is stopping: log in again in a moment");
    cell_address_clear(&player->cell);
    base_entity_free(player);
    entity_list_remove(app->proxies, player->handle);
    free(player);
}

void proxy_hand_off(proxy *player) {
    client_link *link = player->link;
    if (!link) {
        proxy_destroy(player, true, "the baseapp is stopping");
        return;
    }
    link->proxy = NULL;
    player->link = NULL;
    client_link_forget_congestion(link);
    link->state = CLIENT_LINK_HANDING_OFF;
    player->handoff_link = link->handle;
    proxy_destroy(player, true, "the baseapp is stopping: its client goes to another");
}

void proxy_send_client_away(proxy *from, uint64_t target_id, const char *host, int port, const char *token) {
    baseapp *app = from->app;
    /* 1, 2. */
    client_link *link = proxy_let_go_of_client(from);
    uint64_t key = baseapp_account_key(from->account);
    if (id_map_get(&app->proxies_by_account, key) == from) id_map_remove(&app->proxies_by_account, key);
    /* 3, 4. The link goes to the target's baseapp, which binds it to the
     * target when its TokenLogin comes (proxy_take_handover). */
    Tessera__Client__LoginRedirect redirect = TESSERA__CLIENT__LOGIN_REDIRECT__INIT;
    redirect.host = (char *)host;
    redirect.port = (uint32_t)port;
    redirect.token = (char *)token;
    redirect.reason = "giveClientTo: the entity you play now lives on another baseapp";
    Tessera__Client__ServerToClient message = TESSERA__CLIENT__SERVER_TO_CLIENT__INIT;
    message.body_case = TESSERA__CLIENT__SERVER_TO_CLIENT__BODY_LOGIN_REDIRECT;
    message.login_redirect = &redirect;
    client_link_send(link, &message);
    client_link_close_quietly(link, "handed to an entity on another baseapp");
    app->handovers++;
    log_debug("entity %" PRIu64 " gave its client (account '%s') to entity %" PRIu64 " on %s:%d", from->entity_id,
              from->account, target_id, host, port);
}

void proxy_take_handover(client_link *link, uint64_t target_id) {
    baseapp *app = link->app;
    proxy *target = proxy_find_by_entity(app, target_id);
    if (!target || target->state == PROXY_DESTROYING || target->link) {
        client_link_fail_quietly(link, TESSERA__CLIENT__ERROR_CODE__ERROR_SESSION_EXPIRED,
                                 "the entity you were handed to is gone: log in again",
                                 "handover of account '%s' to entity %" PRIu64 ": %s", link->account, target_id,
                                 !target        ? "no such entity here"
                                 : target->link ? "it has a client"
                                                : "destroyed");
        return;
    }
    target->handover_reserved_until_us = 0;
    snprintf(target->account, sizeof target->account, "%s", link->account);
    /* 5 to 7: the target is created on the client (its login reply), and
     * its cell rebinds the client. */
    proxy_attach(target, link);
}

void proxy_sweep(baseapp *app) {
    uint64_t now = clock_monotonic_us();
    uint64_t grace_us = (uint64_t)app->settings.client_detached_grace_ms * 1000u;
    uint32_t cursor = 0;
    proxy *player;
    while ((player = entity_list_next(app->proxies, &cursor, NULL)) != NULL) {
        if (player->state != PROXY_DESTROYING && !player->link && player->detached_us &&
            now - player->detached_us >= grace_us) {
            proxy_destroy(player, true, "no reconnect within client_detached_grace_ms");
            continue; /* it may be gone */
        }
        if (player->handover_reserved_until_us && now >= player->handover_reserved_until_us)
            player->handover_reserved_until_us = 0; /* the client never came */
        persistence_sweep(player, now);
    }
}

void proxy_free_all(baseapp *app) {
    size_t unwritten = 0;
    uint32_t cursor = 0;
    proxy *player;
    while ((player = entity_list_next(app->proxies, &cursor, NULL)) != NULL) {
        if (player->persistence.write_in_flight || player->persistence.write_failures ||
            player->persistence.backup_request || player->state != PROXY_DESTROYING) {
            unwritten++;
            log_error("entity %" PRIu64 " (account '%s'): stopping with its latest state unwritten", player->entity_id,
                      player->account);
        }
        proxy_free(player);
    }
    if (unwritten) log_error("%zu entities stopped without their latest state written", unwritten);
}
