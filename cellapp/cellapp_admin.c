/* cellapp_admin.c -- what a cellapp adds to its admin listener
 * (process_admin.h): its metrics, health and readiness, the live map's
 * entity snapshots (once, and as a server-sent event stream four times a
 * second), one entity's state, and an operator's shutdown (a drain).
 *
 *   GET  /api/entities[?witness=ID]  {"cellapp", "tick", "cells": [{"space",
 *        "cell", "region": {min_x, min_z, max_x, max_z} or null, "entities":
 *        [[id, x, z, kind (0 real, 1 ghost), witness (1 if it has a client)]]}],
 *        "witness": null or {"id", "x", "z", "view_radius", "sees": [ids]}}
 *   GET  /api/events[?witness=ID]    the same, as `data:` events every 250 ms
 *   GET  /api/entity?id=ID           a real's or ghost's state here (404 if none)
 *   POST /admin/shutdown             drain, as SIGTERM does (202)
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cellapp.h"
#include "entity_state_json.h"
#include "log.h"
#include "process_admin.h"
#include "text_buffer.h"

#define CELLAPP_ADMIN_EVENT_MS 250
/* A tick that has not run for this long means the loop is stuck in one. */
#define CELLAPP_ADMIN_STUCK_US (5u * 1000u * 1000u)

struct cellapp_admin {
    cellapp *app;
    process_admin *admin;
    uv_timer_t events;
    bool events_started;
};

/* A JSON string (quotes included): space names are any text. */
static void cellapp_admin_print_string(text_buffer *t, const char *text) {
    text_buffer_printf(t, "\"");
    for (const unsigned char *c = (const unsigned char *)text; *c; c++) {
        if (*c == '"' || *c == '\\')
            text_buffer_printf(t, "\\%c", *c);
        else if (*c < 0x20)
            text_buffer_printf(t, "\\u%04x", *c);
        else
            text_buffer_printf(t, "%c", *c);
    }
    text_buffer_printf(t, "\"");
}

/* ---- snapshots ------------------------------------------------------------------ */

static const cell_entity *cellapp_admin_witness_owner(const cellapp *app, const char *query) {
    const char *at = strstr(query, "witness=");
    if (!at) return NULL;
    uint64_t id = strtoull(at + 8, NULL, 10);
    const cell_entity *entity = id ? spaces_find_entity(app->spaces, id) : NULL;
    return entity && entity->kind == CELL_ENTITY_REAL && cell_entity_witness(entity) ? entity : NULL;
}

/* The snapshot JSON for one query (the map asks with ?witness=ID for the
 * client it shows). Returns malloc'd text. */
static char *cellapp_admin_snapshot(const char *query, void *user_data) {
    const cellapp *app = user_data;
    text_buffer t = {0};
    text_buffer_printf(&t, "{\"cellapp\":%" PRIu64 ",\"tick\":%" PRIu64 ",\"cells\":[", app->self.process_id,
                       app->shared.replication_tick);
    size_t cursor = 0;
    const cell *c;
    bool first_cell = true;
    while ((c = spaces_next_cell(app->spaces, &cursor)) != NULL) {
        text_buffer_printf(&t, "%s{\"space\":", first_cell ? "" : ",");
        cellapp_admin_print_string(&t, c->space_name);
        text_buffer_printf(&t, ",\"cell\":%u,\"region\":", c->cell_id);
        first_cell = false;
        if (c->has_region)
            text_buffer_printf(&t, "{\"min_x\":%.2f,\"min_z\":%.2f,\"max_x\":%.2f,\"max_z\":%.2f}", c->region.min_x,
                               c->region.min_z, c->region.max_x, c->region.max_z);
        else
            text_buffer_printf(&t, "null");
        text_buffer_printf(&t, ",\"entities\":[");
        bool first = true;
        for (size_t i = 0; i < c->count; i++) {
            const cell_entity *e = c->by_index[i];
            if (e->destroyed) continue;
            text_buffer_printf(&t, "%s[%" PRIu64 ",%.2f,%.2f,%d,%d]", first ? "" : ",", e->id, e->x, e->z,
                               e->kind == CELL_ENTITY_REAL ? 0 : 1, cell_entity_witness(e) != NULL);
            first = false;
        }
        text_buffer_printf(&t, "]}");
    }
    text_buffer_printf(&t, "],\"witness\":");
    const cell_entity *owner = query ? cellapp_admin_witness_owner(app, query) : NULL;
    if (owner) {
        text_buffer_printf(&t, "{\"id\":%" PRIu64 ",\"x\":%.2f,\"z\":%.2f,\"view_radius\":%g,\"sees\":[", owner->id,
                           owner->x, owner->z, app->settings.witness.view_radius);
        const cell *home = owner->home;
        bool first = true;
        for (size_t i = 0; i < home->count; i++) {
            const cell_entity *e = home->by_index[i];
            if (e == owner || e->destroyed || !witness_sees(cell_entity_witness(owner), e->id)) continue;
            text_buffer_printf(&t, "%s%" PRIu64, first ? "" : ",", e->id);
            first = false;
        }
        text_buffer_printf(&t, "]}");
    } else {
        text_buffer_printf(&t, "null");
    }
    text_buffer_printf(&t, "}");
    return text_buffer_take(&t, NULL);
}

static void cellapp_admin_on_entities(admin_http_request *request, void *user_data) {
    struct cellapp_admin *admin = user_data;
    char witness[32];
    char query[48] = "";
    if (admin_http_query(request, "witness", witness, sizeof witness))
        snprintf(query, sizeof query, "witness=%s", witness);
    char *json = cellapp_admin_snapshot(query, admin->app);
    admin_http_reply(request, 200, "application/json", json, strlen(json));
    free(json);
}

static void cellapp_admin_on_events(admin_http_request *request, void *user_data) {
    (void)user_data;
    admin_http_start_stream(request);
}

static void cellapp_admin_on_event_timer(uv_timer_t *timer) {
    struct cellapp_admin *admin = timer->data;
    admin_http *http = process_admin_http(admin->admin);
    if (admin_http_stream_count(http)) admin_http_broadcast(http, cellapp_admin_snapshot, admin->app);
}

static void cellapp_admin_on_entity(admin_http_request *request, void *user_data) {
    struct cellapp_admin *admin = user_data;
    char text[32];
    uint64_t id = admin_http_query(request, "id", text, sizeof text) ? strtoull(text, NULL, 10) : 0;
    const cell_entity *e = id ? spaces_find_entity(admin->app->spaces, id) : NULL;
    if (!e) {
        admin_http_reply_text(request, 404, "no such entity on this cellapp\n");
        return;
    }
    cJSON *root = cJSON_CreateObject();
    cJSON_AddNumberToObject(root, "id", (double)e->id);
    cJSON_AddNumberToObject(root, "cellapp", (double)admin->app->self.process_id);
    cJSON_AddStringToObject(root, "kind", e->kind == CELL_ENTITY_REAL ? "real" : "ghost");
    cJSON_AddStringToObject(root, "class", e->cls->name);
    cJSON_AddStringToObject(root, "space", e->home->space_name);
    cJSON_AddNumberToObject(root, "cell", e->home->cell_id);
    cJSON *position = cJSON_AddArrayToObject(root, "position");
    cJSON_AddItemToArray(position, cJSON_CreateNumber(e->x));
    cJSON_AddItemToArray(position, cJSON_CreateNumber(e->y));
    cJSON_AddItemToArray(position, cJSON_CreateNumber(e->z));
    cJSON_AddNumberToObject(root, "incarnation", e->incarnation);
    if (e->kind == CELL_ENTITY_REAL)
        cJSON_AddNumberToObject(root, "baseapp", (double)e->real->baseapp_id);
    else
        cJSON_AddNumberToObject(root, "real_on", (double)e->owner_cellapp);
    cJSON_AddBoolToObject(root, "has_client", cell_entity_witness(e) != NULL);
    cJSON_AddItemToObject(root, "properties", entity_state_to_json(e->state, NULL));
    char *json = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    admin_http_reply(request, 200, "application/json", json, strlen(json));
    free(json);
}

static void cellapp_admin_on_shutdown(admin_http_request *request, void *user_data) {
    struct cellapp_admin *admin = user_data;
    log_info("admin: shutdown asked over HTTP");
    cellapp_begin_drain(admin->app);
    admin_http_reply_text(request, 202, admin->app->draining ? "draining\n" : "stopping\n");
}

/* ---- health, readiness, metrics ------------------------------------------------ */

static bool cellapp_admin_ready(void *user_data, char *why, size_t size) {
    const cellapp *app = user_data;
    if (app->self.process_id == 0)
        snprintf(why, size, "not registered yet");
    else if (app->draining)
        snprintf(why, size, "draining");
    else if (app->self.stopping)
        snprintf(why, size, "shutting down");
    else
        return true;
    return false;
}

static bool cellapp_admin_healthy(void *user_data, char *why, size_t size) {
    const cellapp *app = user_data;
    uint64_t since = clock_monotonic_us() - app->tick_last_us;
    if (since < CELLAPP_ADMIN_STUCK_US) return true;
    snprintf(why, size, "no tick for %" PRIu64 " ms", since / 1000);
    return false;
}

static const double cellapp_admin_tick_edges[] = {0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0};
static const double cellapp_admin_offload_edges[] = {0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.5, 1.0};

static void cellapp_admin_metrics(void *user_data, metrics_text *m) {
    const cellapp *app = user_data;
    const cellapp_counters *n = &app->counters;
    metrics_family(m, "tick_seconds", "histogram", "time one simulation tick took");
    metrics_histogram(m, "tick_seconds", NULL, &n->tick_time, cellapp_admin_tick_edges,
                      sizeof cellapp_admin_tick_edges / sizeof cellapp_admin_tick_edges[0]);
    metrics_single(m, "gauge", "load", "busy share of one core, smoothed, without transient work", app->load.load);
    metrics_single(m, "gauge", "transient_load", "share of one core spent moving reals and making and removing ghosts",
                   app->load.transient);
    metrics_family(m, "reals", "gauge", "reals held, per cell");
    metrics_family(m, "ghosts", "gauge", "ghosts held, per cell");
    size_t cursor = 0;
    const cell *c;
    while ((c = spaces_next_cell(app->spaces, &cursor)) != NULL) {
        char labels[160] = "", id[16];
        snprintf(id, sizeof id, "%u", c->cell_id);
        metrics_label(labels, sizeof labels, "space", c->space_name);
        metrics_label(labels, sizeof labels, "cell", id);
        metrics_sample(m, "reals", labels, (double)c->real_count);
        metrics_sample(m, "ghosts", labels, (double)c->ghost_count);
    }
    metrics_single(m, "counter", "offloads_out_total", "reals sent to other cellapps", (double)n->offloads_out);
    metrics_single(m, "counter", "offloads_in_total", "reals taken from other cellapps", (double)n->offloads_in);
    metrics_single(m, "counter", "offloads_reclaimed_total", "reals taken back after their receiver refused or died",
                   (double)n->offloads_reclaimed);
    metrics_family(m, "offload_seconds", "histogram", "from sending a real to its acknowledgement");
    metrics_histogram(m, "offload_seconds", NULL, &n->offload_latency, cellapp_admin_offload_edges,
                      sizeof cellapp_admin_offload_edges / sizeof cellapp_admin_offload_edges[0]);
    metrics_single(m, "counter", "ghosts_created_total", "ghosts of our reals made on other cellapps",
                   (double)n->ghosts_created);
    metrics_single(m, "counter", "ghosts_deleted_total", "ghosts of our reals removed from other cellapps",
                   (double)n->ghosts_deleted);
    metrics_single(m, "counter", "game_events_total", "game events and user messages the game fired here",
                   (double)n->game_events);
    metrics_single(m, "counter", "witness_bytes_total", "entity stream bytes sent to clients",
                   (double)app->shared.witness_totals.stream_bytes);
    metrics_single(m, "counter", "witness_records_held_total", "records a client's budget held to a later tick",
                   (double)app->shared.witness_totals.records_held);
    metrics_single(m, "counter", "witness_arrivals_awaited_total",
                   "entities a travelling view knew whose copy it waited for here",
                   (double)app->shared.witness_totals.arrivals_awaited);
    metrics_single(m, "counter", "witness_arrivals_missed_total",
                   "entities a travelling view waited for in vain (they left its client's view)",
                   (double)app->shared.witness_totals.arrivals_missed);
    metrics_single(m, "counter", "witness_near_leaves_total",
                   "LEAVEs of entities still inside the view radius: the AOI and the positions disagree (a bug)",
                   (double)app->shared.witness_totals.near_leaves);
    metrics_single(m, "counter", "channel_bytes_in_total", "bytes read from other processes",
                   (double)app->totals.bytes_in);
    metrics_single(m, "counter", "channel_bytes_out_total", "bytes written to other processes",
                   (double)app->totals.bytes_out);
    metrics_single(m, "counter", "channel_frames_in_total", "frames read from other processes",
                   (double)app->totals.frames_in);
    metrics_single(m, "counter", "channel_frames_out_total", "frames written to other processes",
                   (double)app->totals.frames_out);
    metrics_family(m, "errors_total", "counter", "things that went wrong, by reason");
    metrics_sample(m, "errors_total", "reason=\"message_failed\"", (double)n->messages_failed);
    metrics_sample(m, "errors_total", "reason=\"stream_gap\"", (double)n->stream_gaps);
    metrics_sample(m, "errors_total", "reason=\"move_refused\"", (double)n->moves_refused);
    metrics_sample(m, "errors_total", "reason=\"offload_refused\"", (double)n->offloads_refused);
    metrics_sample(m, "errors_total", "reason=\"aliases_exhausted\"",
                   (double)app->shared.witness_totals.aliases_exhausted);
    balancer_figures figures;
    balancer_stats(app->balancer, &figures);
    metrics_single(m, "gauge", "balance_leader", "1 while this cellapp holds the balancer lease", figures.leader);
    metrics_single(m, "counter", "line_moves_total", "split lines this cellapp moved as the balancer",
                   (double)figures.line_moves);
    metrics_single(m, "counter", "cell_changes_total", "cells this cellapp added, handed over, retired or removed",
                   (double)figures.cell_changes);
    metrics_single(m, "gauge", "draining", "1 while the cellapp hands its cells over before stopping", app->draining);
}

/* ---- lifetime -------------------------------------------------------------------- */

cellapp_admin *cellapp_admin_start(cellapp *app, char *err, size_t errlen) {
    process_admin_hooks hooks = {cellapp_admin_ready, cellapp_admin_healthy, cellapp_admin_metrics, app};
    process_admin *process = process_admin_start(app->loop, &app->settings.process, app->redis, &hooks, err, errlen);
    if (!process) return NULL;
    cellapp_admin *admin = xcalloc(1, sizeof *admin);
    admin->app = app;
    admin->admin = process;
    admin_http *http = process_admin_http(process);
    admin_http_route(http, "GET", "/api/entities", cellapp_admin_on_entities, admin);
    admin_http_route(http, "GET", "/api/events", cellapp_admin_on_events, admin);
    admin_http_route(http, "GET", "/api/entity", cellapp_admin_on_entity, admin);
    admin_http_route(http, "POST", "/admin/shutdown", cellapp_admin_on_shutdown, admin);
    uv_timer_init(app->loop, &admin->events);
    admin->events.data = admin;
    admin->events_started = true;
    uv_timer_start(&admin->events, cellapp_admin_on_event_timer, CELLAPP_ADMIN_EVENT_MS, CELLAPP_ADMIN_EVENT_MS);
    return admin;
}

void cellapp_admin_publish(cellapp_admin *admin, registry *reg) {
    if (admin) process_admin_publish(admin->admin, reg);
}

static void cellapp_admin_on_timer_closed(uv_handle_t *handle) { free(handle->data); }

void cellapp_admin_stop(cellapp_admin *admin) {
    if (!admin) return;
    process_admin_free(admin->admin);
    admin->admin = NULL;
    uv_timer_stop(&admin->events);
    uv_close((uv_handle_t *)&admin->events, cellapp_admin_on_timer_closed);
}
