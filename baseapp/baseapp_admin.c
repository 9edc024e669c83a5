/* baseapp_admin.c -- what a baseapp adds to its admin listener
 * (process_admin.h): its metrics and readiness, one base entity's state,
 * and the operator's actions.
 *
 *   GET  /api/entity?id=ID          the base of a logged-in player here (404 if none)
 *   POST /admin/kick?account=NAME   ends that account's session: its client is dropped with
 *                                   ERROR_UNAVAILABLE ("kicked by an operator"), its entity
 *                                   saved and destroyed; 404 if it is not here
 *   POST /admin/save                writes every live entity here to Redis now (writeToDB, 202)
 *   POST /admin/give-client?from=ID&to=ID
 *                                   giveClientTo: entity ID's client goes to entity ID (200), or
 *                                   409 with the rule that refuses it
 *   POST /admin/shutdown            drain, as SIGTERM does (202)
 *
 * It takes the whole process: its routes reach most of the modules.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "baseapp_admin.h"

#include "baseapp_figures.h"
#include "clock.h"
#include "entity_state_json.h"
#include "log.h"
#include "process_admin.h"

struct baseapp_admin {
    baseapp *app;
    process_admin *admin;
};

static bool baseapp_admin_ready(void *user_data, char *why, size_t size) {
    const baseapp *app = user_data;
    if (app->runtime.self.process_id == 0)
        snprintf(why, size, "not registered yet");
    else if (app->draining)
        snprintf(why, size, "draining");
    else if (app->runtime.self.stopping)
        snprintf(why, size, "shutting down");
    else if (peer_set_count_up(app->runtime.peers, PEER_ROLE_CELLAPP) == 0)
        snprintf(why, size, "no cellapp is connected");
    else
        return true;
    return false;
}

static void baseapp_admin_metrics(void *user_data, metrics_text *m) { baseapp_figures_metrics(user_data, m); }

static void baseapp_admin_on_entity(admin_http_request *request, void *user_data) {
    struct baseapp_admin *admin = user_data;
    char text[32];
    uint64_t id = admin_http_query(request, "id", text, sizeof text) ? strtoull(text, NULL, 10) : 0;
    const base_entity *base = id ? base_entities_find(admin->app->bases, id) : NULL;
    if (!base_entity_is_live(base)) {
        admin_http_reply_text(request, 404, "no base of that entity on this baseapp\n");
        return;
    }
    const client_link *link = base->proxy ? base->proxy->link : NULL;
    cJSON *root = cJSON_CreateObject();
    cJSON_AddNumberToObject(root, "id", (double)base->entity_id);
    cJSON_AddNumberToObject(root, "baseapp", (double)admin->app->runtime.self.process_id);
    cJSON_AddStringToObject(root, "account", base->proxy ? base->proxy->account : base->name);
    cJSON_AddStringToObject(root, "class", base->cls ? base->cls->name : "");
    cJSON_AddStringToObject(root, "client", link ? channel_peer_name(link->ch) : "");
    cJSON_AddBoolToObject(root, "detached", link == NULL);
    cJSON_AddNumberToObject(root, "writes", (double)base->persistence.writes);
    cJSON_AddNumberToObject(root, "cellapp", (double)base->cell.cellapp_id);
    if (base->properties) cJSON_AddItemToObject(root, "properties", entity_state_to_json(base->properties, NULL));
    char *json = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    admin_http_reply(request, 200, "application/json", json, strlen(json));
    free(json);
}

static void baseapp_admin_on_kick(admin_http_request *request, void *user_data) {
    struct baseapp_admin *admin = user_data;
    char account[80];
    if (!admin_http_query(request, "account", account, sizeof account) || !account[0]) {
        admin_http_reply_text(request, 400, "kick wants ?account=NAME\n");
        return;
    }
    base_entity *client = proxy_find_by_account(admin->app->players, account);
    if (!base_entity_is_live(client)) {
        admin_http_reply_text(request, 404, "that account is not logged in here\n");
        return;
    }
    log_info("admin: kicking account '%s'", account);
    /* The session ends: no reconnect; the entity is saved and goes. */
    if (client->proxy->link)
        client_link_fail(client->proxy->link, TESSERA__CLIENT__ERROR_CODE__ERROR_UNAVAILABLE, "kicked by an operator");
    base_life_destroy(admin->app->life, client, true, "kicked by an operator");
    admin_http_reply_text(request, 200, "kicked\n");
}

/* giveClientTo by hand: hands the client of entity `from` to entity `to`
 * (a game master taking over an NPC's base, a support agent moving a
 * player to a repaired character). 409 with the rule that refuses it. */
static void baseapp_admin_on_give_client(admin_http_request *request, void *user_data) {
    struct baseapp_admin *admin = user_data;
    char from_text[32], to_text[32];
    if (!admin_http_query(request, "from", from_text, sizeof from_text) ||
        !admin_http_query(request, "to", to_text, sizeof to_text)) {
        admin_http_reply_text(request, 400, "give-client wants ?from=ID&to=ID\n");
        return;
    }
    base_entity *from = base_entities_find(admin->app->bases, strtoull(from_text, NULL, 10));
    uint64_t target_id = strtoull(to_text, NULL, 10);
    bool here = base_entities_find(admin->app->bases, target_id) != NULL;
    char why[160];
    if (handover_give_client_to_entity(admin->app->handovers, from, target_id, why, sizeof why) != 0) {
        char text[200];
        snprintf(text, sizeof text, "%s\n", why);
        admin_http_reply_text(request, 409, text);
        return;
    }
    log_info("admin: the client of entity %s given to entity %s%s", from_text, to_text,
             here ? "" : " (offered to its baseapp)");
    /* A target on another baseapp answers later: 202, the outcome in the
     * logs and metrics. */
    admin_http_reply_text(request, here ? 200 : 202, here ? "given\n" : "offered to the target's baseapp\n");
}

/* writeToDB for every live entity here, now (an operator's save before a
 * risky change, and what bench/bench_base.py times). */
static void baseapp_admin_on_save(admin_http_request *request, void *user_data) {
    struct baseapp_admin *admin = user_data;
    uint32_t cursor = 0, started = 0;
    base_entity *base;
    while ((base = base_entities_next(admin->app->bases, &cursor)) != NULL) {
        if (base->state != BASE_ENTITY_LIVE) continue;
        persistence_save(admin->app->store, base);
        started++;
    }
    log_info("admin: saving %u entities", started);
    char text[64];
    snprintf(text, sizeof text, "saving %u\n", started);
    admin_http_reply_text(request, 202, text);
}

static void baseapp_admin_on_shutdown(admin_http_request *request, void *user_data) {
    struct baseapp_admin *admin = user_data;
    log_info("admin: shutdown asked over HTTP");
    admin_http_reply_text(request, 202, "draining\n");
    baseapp_begin_drain(admin->app);
}

struct baseapp_admin *baseapp_admin_start(baseapp *app, char *err, size_t errlen) {
    process_admin_hooks hooks = {baseapp_admin_ready, NULL, baseapp_admin_metrics, app};
    process_admin *process =
        process_admin_start(app->runtime.loop, &app->settings.process, app->runtime.redis, &hooks, err, errlen);
    if (!process) return NULL;
    struct baseapp_admin *admin = xcalloc(1, sizeof *admin);
    admin->app = app;
    admin->admin = process;
    admin_http *http = process_admin_http(process);
    admin_http_route(http, "GET", "/api/entity", baseapp_admin_on_entity, admin);
    admin_http_route(http, "POST", "/admin/kick", baseapp_admin_on_kick, admin);
    admin_http_route(http, "POST", "/admin/shutdown", baseapp_admin_on_shutdown, admin);
    admin_http_route(http, "POST", "/admin/save", baseapp_admin_on_save, admin);
    admin_http_route(http, "POST", "/admin/give-client", baseapp_admin_on_give_client, admin);
    return admin;
}

void baseapp_admin_publish(struct baseapp_admin *admin, registry *reg) {
    if (admin) process_admin_publish(admin->admin, reg);
}

void baseapp_admin_stop(struct baseapp_admin *admin) {
    if (!admin) return;
    process_admin_free(admin->admin);
    free(admin);
}
