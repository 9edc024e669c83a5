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
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "baseapp.h"
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
    if (app->process_id == 0)
        snprintf(why, size, "not registered yet");
    else if (app->draining)
        snprintf(why, size, "draining");
    else if (app->shutting_down)
        snprintf(why, size, "shutting down");
    else if (peer_set_count_up(app->peers, PEER_ROLE_CELLAPP) == 0)
        snprintf(why, size, "no cellapp is connected");
    else
        return true;
    return false;
}

static void baseapp_admin_metrics(void *user_data, metrics_text *m) {
    const baseapp *app = user_data;
    metrics_single(m, "gauge", "clients", "players with an entity here, detached ones included",
                   (double)id_map_count(&app->proxies_by_account));
    metrics_single(m, "gauge", "bases", "base entities here, players' and others (a global Census)",
                   (double)entity_list_count(app->proxies));
    metrics_single(m, "gauge", "connections", "client connections open (logging in included)",
                   (double)entity_list_count(app->links));
    metrics_single(m, "counter", "reconnects_total", "dropped clients that came back to their entity",
                   (double)app->reconnects);
    metrics_single(m, "counter", "reconnects_refused_total", "reconnects with an unknown or expired session",
                   (double)app->reconnects_refused);
    metrics_single(m, "counter", "logins_replaced_total", "clients replaced by a newer login of their account",
                   (double)app->logins_replaced);
    metrics_single(m, "counter", "entity_writes_total", "entity states written to Redis (acknowledged)",
                   (double)app->writes);
    metrics_single(m, "counter", "entity_write_failures_total", "entity writes that failed (each is retried)",
                   (double)app->write_failures);
    static const double write_edges[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1};
    metrics_single(m, "counter", "entity_calls_total", "entity calls game code here made (to bases and clients)",
                   (double)app->entity_calls);
    metrics_single(m, "counter", "entity_calls_received_total", "entity calls that reached a base here",
                   (double)app->entity_calls_received);
    metrics_single(m, "counter", "entity_calls_failed_total",
                   "entity calls made here that did not reach their entity (each reported to the game)",
                   (double)app->entity_calls_failed);
    metrics_single(m, "counter", "handovers_total", "clients handed from one entity to another (giveClientTo)",
                   (double)app->handovers);
    metrics_family(m, "handover_seconds", "histogram",
                   "giveClientTo, from the call to the client hearing its new space");
    metrics_histogram(m, "handover_seconds", NULL, &app->handover_latency, write_edges,
                      sizeof write_edges / sizeof write_edges[0]);
    metrics_family(m, "entity_write_seconds", "histogram", "writeToDB round trips to Redis");
    metrics_histogram(m, "entity_write_seconds", NULL, &app->write_latency, write_edges,
                      sizeof write_edges / sizeof write_edges[0]);
    metrics_single(m, "counter", "logins_total", "logins that succeeded", (double)app->logins);
    metrics_single(m, "counter", "login_failures_total", "logins refused for their credentials",
                   (double)app->login_failures);
    metrics_family(m, "client_errors_total", "counter", "errors sent to clients (each drops its client), by code");
    size_t slots = sizeof app->errors_sent / sizeof app->errors_sent[0];
    for (size_t code = 1; code < slots; code++) {
        if (!app->errors_sent[code]) continue;
        const ProtobufCEnumValue *value =
            protobuf_c_enum_descriptor_get_value(&tessera__client__error_code__descriptor, (int)code);
        char labels[96] = "";
        metrics_label(labels, sizeof labels, "code", value ? value->name : "other");
        metrics_sample(m, "client_errors_total", labels, (double)app->errors_sent[code]);
    }
    metrics_family(m, "errors_total", "counter", "things that went wrong, by reason");
    metrics_sample(m, "errors_total", "reason=\"cell_message_failed\"", (double)app->cell_messages_failed);
    metrics_sample(m, "errors_total", "reason=\"move_over_rate\"", (double)app->moves_dropped);
    metrics_sample(m, "errors_total", "reason=\"client_message_stale\"", (double)app->client_messages_stale);
    metrics_single(m, "gauge", "congested_clients", "clients not reading, held to enters and leaves",
                   (double)app->congested_clients);
    const channel_stats *clients = &app->client_totals, *peers = &app->peer_totals;
    metrics_family(m, "channel_bytes_in_total", "counter", "bytes read, by side (clients or cluster peers)");
    metrics_sample(m, "channel_bytes_in_total", "side=\"clients\"", (double)clients->bytes_in);
    metrics_sample(m, "channel_bytes_in_total", "side=\"peers\"", (double)peers->bytes_in);
    metrics_family(m, "channel_bytes_out_total", "counter", "bytes written, by side");
    metrics_sample(m, "channel_bytes_out_total", "side=\"clients\"", (double)clients->bytes_out);
    metrics_sample(m, "channel_bytes_out_total", "side=\"peers\"", (double)peers->bytes_out);
    metrics_family(m, "channel_frames_in_total", "counter", "frames read, by side");
    metrics_sample(m, "channel_frames_in_total", "side=\"clients\"", (double)clients->frames_in);
    metrics_sample(m, "channel_frames_in_total", "side=\"peers\"", (double)peers->frames_in);
    metrics_family(m, "channel_frames_out_total", "counter", "frames written, by side");
    metrics_sample(m, "channel_frames_out_total", "side=\"clients\"", (double)clients->frames_out);
    metrics_sample(m, "channel_frames_out_total", "side=\"peers\"", (double)peers->frames_out);
    metrics_single(m, "gauge", "cellapps", "cellapps connected",
                   (double)peer_set_count_up(app->peers, PEER_ROLE_CELLAPP));
    metrics_single(m, "gauge", "draining", "1 while the baseapp sends its clients away before stopping", app->draining);
}

static void baseapp_admin_on_entity(admin_http_request *request, void *user_data) {
    struct baseapp_admin *admin = user_data;
    char text[32];
    uint64_t id = admin_http_query(request, "id", text, sizeof text) ? strtoull(text, NULL, 10) : 0;
    const proxy *client = id ? proxy_find_by_entity(admin->app, id) : NULL;
    if (!client || client->state == PROXY_DESTROYING) {
        admin_http_reply_text(request, 404, "no base of that entity on this baseapp\n");
        return;
    }
    cJSON *root = cJSON_CreateObject();
    cJSON_AddNumberToObject(root, "id", (double)client->entity_id);
    cJSON_AddNumberToObject(root, "baseapp", (double)admin->app->process_id);
    cJSON_AddStringToObject(root, "account", client->account);
    cJSON_AddStringToObject(root, "class", client->cls ? client->cls->name : "");
    cJSON_AddStringToObject(root, "client", client->link ? channel_peer_name(client->link->ch) : "");
    cJSON_AddBoolToObject(root, "detached", client->link == NULL);
    cJSON_AddNumberToObject(root, "writes", (double)client->persistence.writes);
    cJSON_AddNumberToObject(root, "cellapp", (double)client->cell.cellapp_id);
    if (client->properties) cJSON_AddItemToObject(root, "properties", entity_state_to_json(client->properties, NULL));
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
    proxy *client = proxy_find_by_account(admin->app, account);
    if (!client || client->state == PROXY_DESTROYING) {
        admin_http_reply_text(request, 404, "that account is not logged in here\n");
        return;
    }
    log_info("admin: kicking account '%s'", account);
    /* The session ends: no reconnect; the entity is saved and goes. */
    if (client->link)
        client_link_fail(client->link, TESSERA__CLIENT__ERROR_CODE__ERROR_UNAVAILABLE, "kicked by an operator");
    proxy_destroy(client, true, "kicked by an operator");
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
    proxy *from = proxy_find_by_entity(admin->app, strtoull(from_text, NULL, 10));
    uint64_t target_id = strtoull(to_text, NULL, 10);
    bool here = proxy_find_by_entity(admin->app, target_id) != NULL;
    char why[160];
    if (proxy_give_client_to_entity(from, target_id, why, sizeof why) != 0) {
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
    proxy *player;
    while ((player = entity_list_next(admin->app->proxies, &cursor, NULL)) != NULL) {
        if (player->state != PROXY_LIVE) continue;
        persistence_save(player);
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
    process_admin *process = process_admin_start(app->loop, &app->settings.process, app->redis, &hooks, err, errlen);
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
