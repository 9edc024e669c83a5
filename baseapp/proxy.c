/* proxy.c -- proxies, the client parts of bases (proxy.h): binding a link
 * to a base and letting it go, logins taking over or making a player's
 * entity, reconnects, giveClientTo, relaying the cell's stream and the
 * client's moves and calls, congestion, and the detached grace period. It
 * owns the proxy parts and the account map; the bases' lives are
 * base_life.c's. */
#include "proxy.h"

#include <inttypes.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bit_stream.h"
#include "clock.h"
#include "id_map.h"
#include "log.h"
#include "method_call.h"
#include "text_key.h"

struct proxies {
    proxies_context context;
    id_map by_account; /* account key -> base_entity holding its client */
    proxy_counters counters;
};

proxies *proxies_create(const proxies_context *context) {
    proxies *set = xcalloc(1, sizeof *set);
    set->context = *context;
    id_map_init(&set->by_account);
    latency_histogram_init(&set->counters.handover_latency, 100, 10000000);
    return set;
}

void proxies_free(proxies *set) {
    if (!set) return;
    id_map_close(&set->by_account);
    latency_histogram_close(&set->counters.handover_latency);
    free(set);
}

const proxy_counters *proxies_figures(const proxies *set) { return &set->counters; }

size_t proxies_account_count(const proxies *set) { return id_map_count(&set->by_account); }

base_entity *proxy_find_by_account(const proxies *set, const char *account) {
    base_entity *base = id_map_get(&set->by_account, text_key_string(account));
    return base && base->proxy && strcmp(base->proxy->account, account) == 0 ? base : NULL;
}

static void proxy_hold_account(proxies *set, base_entity *base) {
    id_map_put(&set->by_account, text_key_string(base->proxy->account), base);
}

static void proxy_forget_account(proxies *set, base_entity *base) {
    uint64_t key = text_key_string(base->proxy->account);
    if (id_map_get(&set->by_account, key) == base) id_map_remove(&set->by_account, key);
}

/* The base's proxy part, made the first time it gets a client. */
static proxy *proxy_part(base_entity *base) {
    if (!base->proxy) {
        base->proxy = xcalloc(1, sizeof *base->proxy);
        base->proxy->base = base;
        snprintf(base->proxy->account, sizeof base->proxy->account, "%s", base->name);
    }
    return base->proxy;
}

static void proxy_new_session_token(proxy *player) {
    unsigned char bytes[16];
    randombytes_buf(bytes, sizeof bytes);
    sodium_bin2hex(player->session_token, sizeof player->session_token, bytes, sizeof bytes);
}

static void proxy_sync_cell_binding(proxies *set, proxy *player) {
    if (player->base->state != BASE_ENTITY_LIVE) return;
    bool attached = player->link != NULL;
    if (player->cell_binding == player->client_binding && player->cell_attached == attached) return;
    Tessera__Cluster__ClientBinding binding = TESSERA__CLUSTER__CLIENT_BINDING__INIT;
    binding.binding = player->client_binding;
    binding.attached = attached;
    Tessera__Cluster__CellMessage message = TESSERA__CLUSTER__CELL_MESSAGE__INIT;
    message.body_case = TESSERA__CLUSTER__CELL_MESSAGE__BODY_CLIENT_BINDING;
    message.client_binding = &binding;
    if (cell_link_send(set->context.cells, player->base, &message) == 0) {
        player->cell_binding = player->client_binding;
        player->cell_attached = attached;
    }
}

void proxy_on_link_lost(proxies *set, proxy *player) {
    base_entity *base = player->base;
    player->link = NULL;
    player->detached_us = clock_monotonic_us();
    player->client_binding++;
    if (base->state == BASE_ENTITY_DESTROYING) return;
    proxy_sync_cell_binding(set, player);
    bool draining = *set->context.draining;
    if (draining || set->context.settings->client_detached_grace_ms == 0) {
        base_life_destroy(set->context.life, base, true,
                          draining ? "its client left a draining baseapp" : "its client left");
        return;
    }
    log_debug("entity %" PRIu64 " (account '%s'): detached; kept %lld ms for a reconnect", base->entity_id,
              player->account, (long long)set->context.settings->client_detached_grace_ms);
}

void proxy_client_gone(proxies *set, base_entity *base, const char *message) {
    (void)set;
    if (base->proxy && base->proxy->link)
        client_link_fail(base->proxy->link, TESSERA__CLIENT__ERROR_CODE__ERROR_UNAVAILABLE, "%s", message);
}

void proxy_send_properties(proxies *set, base_entity *base, bool all) {
    (void)set;
    /* Never before the client is in the world: a BaseProperties ahead of
     * its login reply would break the login, and the reply's own full
     * send carries every property anyway. */
    proxy *player = base->proxy;
    if (!player || base->properties == NULL || !player->link || player->link->state != CLIENT_LINK_IN_WORLD) return;
    bit_writer w;
    bit_writer_init(&w);
    if (base_entity_client_properties(base, all, &w)) {
        Tessera__Client__BaseProperties properties = TESSERA__CLIENT__BASE_PROPERTIES__INIT;
        properties.entity_id = base->entity_id;
        properties.changes.data = (uint8_t *)bit_writer_data(&w);
        properties.changes.len = bit_writer_bytes(&w);
        Tessera__Client__ServerToClient message = TESSERA__CLIENT__SERVER_TO_CLIENT__INIT;
        message.body_case = TESSERA__CLIENT__SERVER_TO_CLIENT__BODY_BASE_PROPERTIES;
        message.base_properties = &properties;
        client_link_send(player->link, &message);
    }
    bit_writer_close(&w);
}

/* ---- entering the world ----------------------------------------------------- */

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
static void proxy_send_login_reply(proxies *set, proxy *player, const Tessera__Cluster__CellEntityCreated *reply) {
    const baseapp_settings *settings = set->context.settings;
    base_entity *base = player->base;
    client_link *link = player->link;
    Tessera__Client__EnteredSpace space = TESSERA__CLIENT__ENTERED_SPACE__INIT;
    if (reply) proxy_fill_space(&space, base->entity_id, reply);
    Tessera__Client__LoginReply login = TESSERA__CLIENT__LOGIN_REPLY__INIT;
    login.entity_id = base->entity_id;
    login.position = space.position;
    login.yaw = space.yaw;
    login.view_radius = space.view_radius;
    login.view_hysteresis = space.view_hysteresis;
    login.max_speed = space.max_speed;
    login.tick_hz = space.tick_hz;
    login.space_name = space.space_name;
    login.definitions = link->has_definitions ? "" : (char *)set->context.definitions_text;
    login.definitions_digest = (char *)entity_def_registry_digest_hex(set->context.definitions);
    login.max_aliases = space.max_aliases;
    login.position_precision = space.position_precision;
    login.world_min = space.world_min;
    login.world_max = space.world_max;
    login.yaw_steps = space.yaw_steps;
    login.detail_near_distance = space.detail_near_distance;
    login.detail_medium_distance = space.detail_medium_distance;
    login.entity_type = (char *)base->cls->name;
    login.max_frame_bytes = (uint32_t)settings->client_max_frame_bytes;
    login.moves_per_second = (float)settings->client_moves_per_second;
    login.calls_per_second = (float)settings->client_calls_per_second;
    login.login_timeout_ms = (uint32_t)settings->login_timeout_ms;
    login.alias_cooldown_ms = space.alias_cooldown_ms;
    login.detail_hysteresis = space.detail_hysteresis;
    login.session_token = player->session_token;
    login.detached_grace_ms = (uint32_t)settings->client_detached_grace_ms;
    login.reconnected = link->reconnecting;
    login.no_space = reply == NULL;
    /* Where to reconnect if this baseapp dies. */
    char addresses[PROXY_MAX_OTHER_BASEAPPS][80];
    char *address_list[PROXY_MAX_OTHER_BASEAPPS];
    size_t address_count =
        set->context.other_baseapps
            ? set->context.other_baseapps(set->context.owner, link->websocket, addresses, PROXY_MAX_OTHER_BASEAPPS)
            : 0;
    for (size_t i = 0; i < address_count; i++) address_list[i] = addresses[i];
    login.baseapps = address_list;
    login.n_baseapps = address_count;
    Tessera__Client__ServerToClient message = TESSERA__CLIENT__SERVER_TO_CLIENT__INIT;
    message.body_case = TESSERA__CLIENT__SERVER_TO_CLIENT__BODY_LOGIN_REPLY;
    message.login_reply = &login;
    client_link_send(link, &message);
    link->state = CLIENT_LINK_IN_WORLD;
    player->space_pending = false;
    client_link_start_limits(link);
    proxy_send_properties(set, base, true);
    log_debug("entity %" PRIu64 " (account '%s') %s on cellapp %" PRIu64 " (binding %u)", base->entity_id,
              player->account, link->reconnecting ? "reconnected" : "entered the world", base->cell.cellapp_id,
              player->client_binding);
    /* The game learns the base has a client (a login, a reconnect, a
     * redirected login), as it does on a giveClientTo. */
    base_hooks_client_enabled(set->context.hooks, base);
}

/* A handover is done once the client hears its new space (or at once for a
 * target without a cell part): its latency, from the call on. */
static void proxy_handover_done(proxies *set, proxy *player) {
    if (!player->handover_started_us) return;
    latency_histogram_add(&set->counters.handover_latency, clock_monotonic_us() - player->handover_started_us);
    player->handover_started_us = 0;
}

/* Tells the client its player entity is in a space now (after a
 * giveClientTo): the stream of its new witness follows. */
static void proxy_send_entered_space(proxies *set, proxy *player, const Tessera__Cluster__CellEntityCreated *reply) {
    Tessera__Client__EnteredSpace space = TESSERA__CLIENT__ENTERED_SPACE__INIT;
    proxy_fill_space(&space, player->base->entity_id, reply);
    Tessera__Client__ServerToClient message = TESSERA__CLIENT__SERVER_TO_CLIENT__INIT;
    message.body_case = TESSERA__CLIENT__SERVER_TO_CLIENT__BODY_ENTERED_SPACE;
    message.entered_space = &space;
    client_link_send(player->link, &message);
    player->space_pending = false;
    proxy_handover_done(set, player);
    log_debug("entity %" PRIu64 " (account '%s'): its client entered space '%s'", player->base->entity_id,
              player->account, reply->space_name ? reply->space_name : "");
}

/* Binds `link` to the base's proxy part: a new binding, a new session
 * token; the link enters the world once the cell part says where the
 * player is, or at once when the entity has no cell part. */
static void proxy_attach(proxies *set, base_entity *base, client_link *link) {
    proxy *player = proxy_part(base);
    client_link_bind(link, player, base->entity_id);
    player->link = link;
    player->detached_us = 0;
    player->client_binding++;
    proxy_hold_account(set, base);
    /* A login's route claimed the session already; a takeover, a
     * reconnect or a handover's client claims it here. */
    if (!link->session_claimed)
        session_directory_claim(set->context.sessions, player->account, SESSION_CLAIM_LOGIN, 0, link->redirected_from,
                                NULL, NULL);
    proxy_new_session_token(player);
    if (base->state == BASE_ENTITY_LIVE && !base->cell.cellapp_id) {
        proxy_send_login_reply(set, player, NULL);
        return;
    }
    proxy_sync_cell_binding(set, player);
}

void proxy_on_cell_ready(proxies *set, base_entity *base, const Tessera__Cluster__CellEntityCreated *reply,
                         bool created) {
    proxy *player = base->proxy;
    if (!player) return;
    if (created) {
        player->cell_binding = reply->client_binding; /* cell_attached: as it was created */
        if (player->cell_binding != player->client_binding || player->cell_attached != (player->link != NULL)) {
            /* Its client changed while the cell part was made: the cell
             * learns the binding now, and an attach is answered again. */
            proxy_sync_cell_binding(set, player);
            return;
        }
    } else if (reply->client_binding != player->client_binding) {
        return; /* an answer for a binding that has passed */
    }
    if (!player->link) return;
    if (player->link->state == CLIENT_LINK_ENTERING)
        proxy_send_login_reply(set, player, reply);
    else if (player->space_pending)
        proxy_send_entered_space(set, player, reply);
}

/* Asks for the cell part of a base made for a client. Returns 0, or -1
 * when no cellapp is up. */
static int proxy_create_cell(proxies *set, base_entity *base) {
    proxy *player = proxy_part(base);
    player->cell_attached = true;
    return base_life_create_cell(set->context.life, base, true, player->client_binding);
}

/* The account has a proxy here already: the new link takes it over. */
static void proxy_take_over(proxies *set, base_entity *base, client_link *link) {
    proxy *player = base->proxy;
    if (player->link) {
        set->counters.logins_replaced++;
        client_link_fail(player->link, TESSERA__CLIENT__ERROR_CODE__ERROR_REPLACED, "account '%s' logged in from %s",
                         player->account, channel_peer_name(link->ch));
    }
    proxy_attach(set, base, link);
}

/* Whether the account's proxy can take a login now: NULL when there is
 * none, or its base; fails the link while the last one is being saved
 * (its state must be written before it is read again). */
static bool proxy_busy_saving(proxies *set, client_link *link, base_entity **existing) {
    *existing = proxy_find_by_account(set, link->account);
    if (*existing && (*existing)->state == BASE_ENTITY_DESTROYING) {
        client_link_fail(link, TESSERA__CLIENT__ERROR_CODE__ERROR_UNAVAILABLE,
                         "your last session is still being saved: log in again in a moment");
        return true;
    }
    return false;
}

typedef struct proxy_login_load {
    proxies *set;
    entity_handle link_handle;
} proxy_login_load;

static void proxy_on_login_loaded(persistence_outcome outcome, const cJSON *stored, void *context) {
    proxy_login_load *load = context;
    proxies *set = load->set;
    client_link *link = client_links_get(set->context.links, load->link_handle);
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
    base_entity *base;
    if (proxy_busy_saving(set, link, &base)) return;
    if (base) {
        proxy_take_over(set, base, link);
        return;
    }
    const entity_def_class *cls =
        entity_def_registry_find_class(set->context.definitions, set->context.settings->player_entity_type);
    char why[128];
    base = base_life_make(set->context.life, cls, link->account, stored, why, sizeof why);
    if (!base) {
        client_link_fail(link, TESSERA__CLIENT__ERROR_CODE__ERROR_UNAVAILABLE, "%s", why);
        return;
    }
    proxy_part(base);
    if (base->state == BASE_ENTITY_CREATING_CELL && proxy_create_cell(set, base) != 0) {
        client_link_fail(link, TESSERA__CLIENT__ERROR_CODE__ERROR_UNAVAILABLE, "no cellapp available, try again");
        base_life_destroy(set->context.life, base, false, "no cellapp for its cell part");
        return;
    }
    proxy_attach(set, base, link);
}

void proxy_login_here(proxies *set, client_link *link) {
    base_entity *base;
    if (proxy_busy_saving(set, link, &base)) return;
    if (base) {
        proxy_take_over(set, base, link);
        return;
    }
    proxy_login_load *load = xcalloc(1, sizeof *load);
    load->set = set;
    load->link_handle = link->handle;
    if (persistence_load(set->context.store, set->context.settings->player_entity_type, link->account,
                         proxy_on_login_loaded, load) != 0) {
        free(load);
        client_link_fail(link, TESSERA__CLIENT__ERROR_CODE__ERROR_UNAVAILABLE,
                         "the entity database is unavailable, try again");
    }
}

typedef struct proxy_restore_claim {
    proxies *set;
    uint64_t entity_id;
} proxy_restore_claim;

/* A restored session whose account another baseapp holds by now (a login
 * there after the restore window) is not a second life: it goes, unsaved
 * (the live session writes the account's state). */
static void proxy_on_restore_claim(const session_claim_result *result, void *user_data) {
    proxy_restore_claim *claim = user_data;
    proxies *set = claim->set;
    base_entity *base = base_entities_find(set->context.bases, claim->entity_id);
    free(claim);
    if (result->failed || result->claimed || !base || !base->proxy || base->proxy->link ||
        base->state == BASE_ENTITY_DESTROYING)
        return;
    set->counters.restores_superseded++;
    log_warn("entity %" PRIu64 " (account '%s'): restored, but baseapp %" PRIu64
             " holds the account's session now; the restored copy goes",
             base->entity_id, base->proxy->account, result->holder);
    base_life_destroy(set->context.life, base, false, "its account plays on another baseapp");
}

void proxy_restore(proxies *set, base_entity *base, const char *account, const char *session_token,
                   uint32_t client_binding) {
    proxy *player = proxy_part(base);
    snprintf(player->account, sizeof player->account, "%s", account);
    snprintf(player->session_token, sizeof player->session_token, "%s", session_token);
    player->link = NULL;
    player->client_binding = client_binding + 1; /* its old client's binding has ended */
    player->cell_binding = 0;
    player->cell_attached = false;
    player->detached_us = clock_monotonic_us();
    proxy_hold_account(set, base);
    proxy_restore_claim *claim = xcalloc(1, sizeof *claim);
    claim->set = set;
    claim->entity_id = base->entity_id;
    if (session_directory_claim(set->context.sessions, player->account, SESSION_CLAIM_RESTORE, 0, 0,
                                proxy_on_restore_claim, claim) != 0)
        free(claim);
    log_info("entity %" PRIu64 " (account '%s'): restored, waiting %lld ms for its client to reconnect",
             base->entity_id, player->account, (long long)set->context.settings->client_detached_grace_ms);
}

void proxy_reconnect(proxies *set, client_link *link, const char *token) {
    base_entity *base = proxy_find_by_account(set, link->account);
    const proxy *player = base ? base->proxy : NULL;
    if (!player || base->state == BASE_ENTITY_DESTROYING || strlen(token) != strlen(player->session_token) ||
        sodium_memcmp(token, player->session_token, strlen(token)) != 0) {
        set->counters.reconnects_refused++;
        client_link_count_failed_token(link);
        client_link_fail_quietly(link, TESSERA__CLIENT__ERROR_CODE__ERROR_SESSION_EXPIRED,
                                 "no session to resume: log in again", "reconnect to account '%s' refused: %s",
                                 link->account,
                                 !player                                 ? "no session here"
                                 : base->state == BASE_ENTITY_DESTROYING ? "its session is over"
                                                                         : "wrong session token");
        return;
    }
    set->counters.reconnects++;
    proxy_take_over(set, base, link);
}

/* ---- the cell's stream and the client's input ------------------------------------ */

void proxy_release(proxies *set, base_entity *base) {
    (void)set;
    size_t length;
    uint8_t *payload;
    const proxy *player = base->proxy;
    while ((payload = cell_address_next(&base->cell, &length)) != NULL) {
        if (player && player->link && player->link->state == CLIENT_LINK_IN_WORLD)
            channel_send(player->link->ch, payload, length);
        free(payload);
    }
}

/* Tells a client's cell whether the client keeps up: congested above
 * client_congestion_bytes queued, drained below half of it. Called after
 * sending to it and from a timer while any client is congested. */
static void proxy_check_congestion(proxies *set, proxy *player) {
    client_link *link = player->link;
    base_entity *base = player->base;
    if (!link || link->state != CLIENT_LINK_IN_WORLD || base->state != BASE_ENTITY_LIVE) return;
    size_t queued = channel_queued_bytes(link->ch);
    size_t threshold = (size_t)set->context.settings->client_congestion_bytes;
    bool congested = link->congested ? queued > threshold / 2 : queued > threshold;
    if (congested == link->congested) return;
    client_link_set_congested(link, congested);
    log_debug("entity %" PRIu64 " (account '%s'): %s (%zu bytes queued)", base->entity_id, player->account,
              congested ? "congested: its cell holds its updates" : "drained: updates resume", queued);
    Tessera__Cluster__ClientCongestion notice = TESSERA__CLUSTER__CLIENT_CONGESTION__INIT;
    notice.congested = congested;
    Tessera__Cluster__CellMessage message = TESSERA__CLUSTER__CELL_MESSAGE__INIT;
    message.body_case = TESSERA__CLUSTER__CELL_MESSAGE__BODY_CONGESTION;
    message.congestion = &notice;
    cell_link_send(set->context.cells, base, &message);
}

void proxies_check_congestion(proxies *set) {
    if (!client_links_counters(set->context.links)->congested) return;
    uint32_t cursor = 0;
    client_link *link;
    while ((link = client_links_next(set->context.links, &cursor)) != NULL)
        if (link->congested && link->proxy) proxy_check_congestion(set, link->proxy);
}

void proxy_on_client_messages(proxies *set, uint64_t cellapp_id, const Tessera__Cluster__ToClientBatch *batch) {
    for (size_t i = 0; i < batch->n_messages; i++) {
        const Tessera__Cluster__ToClient *item = batch->messages[i];
        base_entity *base = base_entities_find(set->context.bases, item->entity_id);
        /* A stale entity (the base went this tick) is normal; so is a
         * message for a client that has gone, or for an earlier one
         * (another binding). */
        if (!base || base->state != BASE_ENTITY_LIVE) continue;
        proxy *player = base->proxy;
        if (!player || item->binding != player->client_binding || !player->link ||
            player->link->state != CLIENT_LINK_IN_WORLD) {
            set->counters.client_messages_unbound++;
            continue;
        }
        client_link *link = player->link;
        switch (cell_address_on_client_message(&base->cell, cellapp_id, item->incarnation, item->payload.data,
                                               item->payload.len)) {
            case CELL_ADDRESS_DELIVER:
                channel_send(link->ch, item->payload.data, item->payload.len);
                break;
            case CELL_ADDRESS_HELD:
                set->counters.client_messages_held++;
                break;
            case CELL_ADDRESS_STALE:
                set->counters.client_messages_stale++;
                log_debug("entity %" PRIu64 ": a client message of incarnation %u from cellapp %" PRIu64
                          " after its stream ended: dropped",
                          item->entity_id, item->incarnation, cellapp_id);
                break;
            case CELL_ADDRESS_OVERFLOW:
                client_link_fail(link, TESSERA__CLIENT__ERROR_CODE__ERROR_UNAVAILABLE,
                                 "its cell moved and the new one's messages piled up (%d held)", CELL_ADDRESS_MAX_HELD);
                continue;
        }
        proxy_check_congestion(set, player);
    }
}

void proxy_on_drop_client(proxies *set, uint64_t cellapp_id, const Tessera__Cluster__DropClient *drop) {
    base_entity *base = base_entities_find(set->context.bases, drop->entity_id);
    if (base && base->state == BASE_ENTITY_LIVE && base->proxy && base->proxy->link &&
        (base->cell.cellapp_id == cellapp_id || base->cell.stream_cellapp == cellapp_id))
        client_link_fail(base->proxy->link, drop->code, "%s", drop->reason ? drop->reason : "dropped by its cell");
}

void proxy_on_client_move(proxies *set, client_link *link, const Tessera__Client__Move *move) {
    if (!link->proxy) return;
    Tessera__Cluster__ClientMove relay = TESSERA__CLUSTER__CLIENT_MOVE__INIT;
    relay.move = (Tessera__Client__Move *)move;
    Tessera__Cluster__CellMessage message = TESSERA__CLUSTER__CELL_MESSAGE__INIT;
    message.body_case = TESSERA__CLUSTER__CELL_MESSAGE__BODY_CLIENT_MOVE;
    message.client_move = &relay;
    cell_link_send(set->context.cells, link->proxy->base, &message);
}

void proxy_on_client_call(proxies *set, client_link *link, const Tessera__Client__EntityCall *call) {
    if (!link->proxy) return;
    base_entity *base = link->proxy->base;
    if (call->part == TESSERA__CLIENT__METHOD_PART__METHOD_PART_CELL) {
        if (!base_entity_class_has_cell(base->cls)) {
            /* Nothing would ever answer: refused, not dropped in silence. */
            client_link_fail(link, TESSERA__CLIENT__ERROR_CODE__ERROR_NOT_EXPOSED,
                             "entity %" PRIu64 " (%s) has no cell part: no cell method can be called through it",
                             base->entity_id, base->cls->name);
            return;
        }
        /* To the caller's real, which knows what its client sees and checks
         * the rest (cell_message.c). */
        Tessera__Cluster__CellCall relay = TESSERA__CLUSTER__CELL_CALL__INIT;
        relay.caller_id = base->entity_id;
        relay.target_id = call->entity_id;
        relay.method_id = call->method_id;
        relay.args = call->args;
        relay.from_client = true;
        Tessera__Cluster__CellMessage message = TESSERA__CLUSTER__CELL_MESSAGE__INIT;
        message.body_case = TESSERA__CLUSTER__CELL_MESSAGE__BODY_CALL;
        message.call = &relay;
        cell_link_send(set->context.cells, base, &message);
        return;
    }
    if (call->part != TESSERA__CLIENT__METHOD_PART__METHOD_PART_BASE) {
        client_link_fail(link, TESSERA__CLIENT__ERROR_CODE__ERROR_NOT_EXPOSED,
                         "only base and cell methods can be called by a client (part %d)", (int)call->part);
        return;
    }
    if (call->entity_id != base->entity_id) {
        client_link_fail(link, TESSERA__CLIENT__ERROR_CODE__ERROR_UNKNOWN_ENTITY,
                         "base method call on entity %" PRIu64 ", which is not the player's", call->entity_id);
        return;
    }
    char reason[256];
    const entity_def_method *method;
    entity_state *args;
    method_call_verdict verdict = method_call_prepare(base->cls, ENTITY_DEF_PART_BASE, call->method_id, call->args.data,
                                                      call->args.len, true, &method, &args, reason, sizeof reason);
    if (verdict != METHOD_CALL_OK) {
        client_link_fail(link, (Tessera__Client__ErrorCode)method_call_error_code(verdict), "%s", reason);
        return;
    }
    base_hooks_call(set->context.hooks, base, method, args, base->entity_id);
    entity_state_free(args);
}

/* ---- giveClientTo -------------------------------------------------------------- */

const char *proxy_give_client_source_refusal(const base_entity *from) {
    if (!from || from->state == BASE_ENTITY_DESTROYING) return "the source is destroyed";
    if (!from->proxy || !from->proxy->link) return "the source has no client";
    if (from->proxy->link->state != CLIENT_LINK_IN_WORLD) return "the source's client has not entered the world yet";
    return NULL;
}

bool proxy_client_is_websocket(const base_entity *base) {
    return base && base->proxy && base->proxy->link && base->proxy->link->websocket;
}

const char *proxy_give_client_refusal(const base_entity *from, const base_entity *to) {
    const char *source = proxy_give_client_source_refusal(from);
    if (source) return source;
    if (!to) return "the target is missing";
    if (to == from) return "the target is the source";
    if (to->state == BASE_ENTITY_DESTROYING) return "the target is destroyed";
    if (to->proxy && to->proxy->link) return "the target already has a client";
    return NULL;
}

/* giveClientTo's steps 1 and 2, wherever the target is: the source's cell
 * loses its witness and the client destroys the old player entity. The
 * source keeps living without a client (not waiting for a reconnect: the
 * game decides its fate). Returns the link, now bound to nothing. */
static client_link *proxy_let_go_of_client(proxies *set, proxy *from) {
    client_link *link = from->link;
    from->link = NULL;
    from->detached_us = 0;
    from->client_binding++;
    from->space_pending = false;
    proxy_sync_cell_binding(set, from);
    client_link_release(link);
    Tessera__Client__PlayerDestroyed destroyed = TESSERA__CLIENT__PLAYER_DESTROYED__INIT;
    destroyed.entity_id = from->base->entity_id;
    Tessera__Client__ServerToClient message = TESSERA__CLIENT__SERVER_TO_CLIENT__INIT;
    message.body_case = TESSERA__CLIENT__SERVER_TO_CLIENT__BODY_PLAYER_DESTROYED;
    message.player_destroyed = &destroyed;
    client_link_send(link, &message);
    return link;
}

int proxy_give_client_to(proxies *set, base_entity *from, base_entity *to, char *why, size_t why_size) {
    const char *refused = proxy_give_client_refusal(from, to);
    if (refused) {
        snprintf(why, why_size, "giveClientTo refused: %s", refused);
        log_info("entity %" PRIu64 ": %s (target %" PRIu64 ")", from ? from->entity_id : 0, why,
                 to ? to->entity_id : 0);
        return -1;
    }
    uint64_t started_us = clock_monotonic_us();
    proxy *source = from->proxy, *target = proxy_part(to);
    /* 1, 2. */
    client_link *link = proxy_let_go_of_client(set, source);
    /* 3, 4. The link, the client type and the login data (the account, the
     * session) move to the target; the source has lost its client. */
    client_link_bind(link, target, to->entity_id);
    link->state = CLIENT_LINK_IN_WORLD;
    target->link = link;
    target->detached_us = 0;
    snprintf(target->account, sizeof target->account, "%s", source->account);
    proxy_hold_account(set, to);
    session_directory_claim(set->context.sessions, target->account, SESSION_CLAIM_LOGIN, 0, 0, NULL, NULL);
    proxy_new_session_token(target);
    /* 5. The target is created on the client, with its base properties. */
    Tessera__Client__PlayerCreated created = TESSERA__CLIENT__PLAYER_CREATED__INIT;
    created.entity_id = to->entity_id;
    created.entity_type = (char *)to->cls->name;
    created.session_token = target->session_token;
    Tessera__Client__ServerToClient message = TESSERA__CLIENT__SERVER_TO_CLIENT__INIT;
    message.body_case = TESSERA__CLIENT__SERVER_TO_CLIENT__BODY_PLAYER_CREATED;
    message.player_created = &created;
    client_link_send(link, &message);
    proxy_send_properties(set, to, true);
    /* 6. The target's game code learns it has a client. */
    base_hooks_client_enabled(set->context.hooks, to);
    /* 7. With a cell part, the cell rebinds the client and builds a fresh
     * witness, and the client hears its space (proxy_on_cell_ready); a
     * target whose cell part is still being made does it when it is. */
    target->client_binding++;
    target->space_pending = base_entity_class_has_cell(to->cls);
    proxy_sync_cell_binding(set, target);
    set->counters.handovers++;
    target->handover_started_us = started_us;
    if (!target->space_pending) proxy_handover_done(set, target);
    log_debug("entity %" PRIu64 " gave its client (account '%s') to entity %" PRIu64 " (%s)", from->entity_id,
              target->account, to->entity_id, to->cls->name);
    return 0;
}

void proxy_send_client_away(proxies *set, base_entity *from, uint64_t target_id, const char *host, int port,
                            const char *token) {
    proxy *source = from->proxy;
    /* 1, 2. */
    client_link *link = proxy_let_go_of_client(set, source);
    proxy_forget_account(set, from);
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
    set->counters.handovers++;
    log_debug("entity %" PRIu64 " gave its client (account '%s') to entity %" PRIu64 " on %s:%d", from->entity_id,
              source->account, target_id, host, port);
}

bool proxy_handover_target_here(const proxies *set, uint64_t target_id) {
    const base_entity *target = base_entities_find(set->context.bases, target_id);
    return target && target->state != BASE_ENTITY_DESTROYING;
}

void proxy_take_handover(proxies *set, client_link *link, uint64_t target_id) {
    base_entity *target = base_entities_find(set->context.bases, target_id);
    bool has_client = target && target->proxy && target->proxy->link;
    if (!target || target->state == BASE_ENTITY_DESTROYING || has_client) {
        client_link_fail_quietly(link, TESSERA__CLIENT__ERROR_CODE__ERROR_SESSION_EXPIRED,
                                 "the entity you were handed to is gone: log in again",
                                 "handover of account '%s' to entity %" PRIu64 ": %s", link->account, target_id,
                                 !target      ? "no such entity here"
                                 : has_client ? "it has a client"
                                              : "destroyed");
        return;
    }
    proxy *player = proxy_part(target);
    player->handover_reserved_until_us = 0;
    snprintf(player->account, sizeof player->account, "%s", link->account);
    /* 5 to 7: the target is created on the client (its login reply), and
     * its cell rebinds the client. */
    proxy_attach(set, target, link);
}

void proxy_reserve(base_entity *base, uint64_t until_us) { proxy_part(base)->handover_reserved_until_us = until_us; }

void proxy_hand_off(proxies *set, base_entity *base) {
    proxy *player = base->proxy;
    client_link *link = player ? player->link : NULL;
    if (!link) {
        base_life_destroy(set->context.life, base, true, "the baseapp is stopping");
        return;
    }
    client_link_release(link);
    player->link = NULL;
    link->state = CLIENT_LINK_HANDING_OFF;
    player->handoff_link = link->handle;
    base_life_destroy(set->context.life, base, true, "the baseapp is stopping: its client goes to another");
}

void proxy_part_free(proxies *set, base_entity *base) {
    proxy *player = base->proxy;
    if (!player) return;
    if (player->link) {
        client_link_release(player->link);
        player->link = NULL;
    }
    uint64_t key = text_key_string(player->account);
    bool stopping = set->context.self->stopping;
    if (id_map_get(&set->by_account, key) == base) {
        id_map_remove(&set->by_account, key);
        if (!stopping) session_directory_release(set->context.sessions, player->account);
    }
    /* Draining: its client goes to another baseapp now that it is written. */
    client_link *handoff = player->handoff_link ? client_links_get(set->context.links, player->handoff_link) : NULL;
    if (handoff && handoff->state == CLIENT_LINK_HANDING_OFF && !stopping &&
        (!set->context.hand_off || set->context.hand_off(set->context.owner, handoff, "this baseapp is stopping") != 0))
        client_link_fail(handoff, TESSERA__CLIENT__ERROR_CODE__ERROR_SERVER_SHUTDOWN,
                         "this baseapp is stopping: log in again in a moment");
    free(player);
    base->proxy = NULL;
}

void proxies_sweep(proxies *set) {
    uint64_t now = clock_monotonic_us();
    uint64_t grace_us = (uint64_t)set->context.settings->client_detached_grace_ms * 1000u;
    uint32_t cursor = 0;
    base_entity *base;
    while ((base = base_entities_next(set->context.bases, &cursor)) != NULL) {
        proxy *player = base->proxy;
        if (!player) continue;
        if (base->state != BASE_ENTITY_DESTROYING && !player->link && player->detached_us &&
            now - player->detached_us >= grace_us) {
            base_life_destroy(set->context.life, base, true, "no reconnect within client_detached_grace_ms");
            continue; /* it may be gone */
        }
        if (player->handover_reserved_until_us && now >= player->handover_reserved_until_us)
            player->handover_reserved_until_us = 0; /* the client never came */
    }
}
