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

#include "cellapp_admin.h"
#include "clock.h"
#include "entity_state_json.h"
#include "log.h"
#include "process_admin.h"
#include "text_buffer.h"
#include "witness.h"

#define CELLAPP_ADMIN_EVENT_MS 250
/* A tick that has not run for this long means the loop is stuck in one. */
#define CELLAPP_ADMIN_STUCK_US ((uint64_t)5 * 1000 * 1000)

struct cellapp_admin {
    cellapp_admin_context context;
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

static const cell_entity *cellapp_admin_witness_owner(const cellapp_admin *admin, const char *query) {
    const char *at = strstr(query, "witness=");
    if (!at) return NULL;
    uint64_t id = strtoull(at + 8, NULL, 10);
    const cell_entity *entity = id ? spaces_find_entity(admin->context.spaces, id) : NULL;
    return entity && entity->kind == CELL_ENTITY_REAL && cell_entity_witness(entity) ? entity : NULL;
}

/* The snapshot JSON for one query (the map asks with ?witness=ID for the
 * client it shows). Returns malloc'd text. */
static char *cellapp_admin_snapshot(const char *query, void *user_data) {
    const cellapp_admin *admin = user_data;
    text_buffer t = {0};
    text_buffer_printf(&t, "{\"cellapp\":%" PRIu64 ",\"tick\":%" PRIu64 ",\"cells\":[", admin->context.self->process_id,
                       admin->context.shared->replication_tick);
    size_t cursor = 0;
    const cell *c;
    bool first_cell = true;
    while ((c = spaces_next_cell(admin->context.spaces, &cursor)) != NULL) {
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
    const cell_entity *owner = query ? cellapp_admin_witness_owner(admin, query) : NULL;
    if (owner) {
        text_buffer_printf(&t, "{\"id\":%" PRIu64 ",\"x\":%.2f,\"z\":%.2f,\"view_radius\":%g,\"sees\":[", owner->id,
                           owner->x, owner->z, admin->context.view_radius);
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
    char *json = cellapp_admin_snapshot(query, admin);
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
    if (admin_http_stream_count(http)) admin_http_broadcast(http, cellapp_admin_snapshot, admin);
}

static void cellapp_admin_on_entity(admin_http_request *request, void *user_data) {
    struct cellapp_admin *admin = user_data;
    char text[32];
    uint64_t id = admin_http_query(request, "id", text, sizeof text) ? strtoull(text, NULL, 10) : 0;
    const cell_entity *e = id ? spaces_find_entity(admin->context.spaces, id) : NULL;
    if (!e) {
        admin_http_reply_text(request, 404, "no such entity on this cellapp\n");
        return;
    }
    cJSON *root = cJSON_CreateObject();
    cJSON_AddNumberToObject(root, "id", (double)e->id);
    cJSON_AddNumberToObject(root, "cellapp", (double)admin->context.self->process_id);
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
    admin->context.drain(admin->context.owner);
    admin_http_reply_text(request, 202, *admin->context.draining ? "draining\n" : "stopping\n");
}

/* ---- health, readiness, metrics ------------------------------------------------ */

static bool cellapp_admin_ready(void *user_data, char *why, size_t size) {
    const cellapp_admin *admin = user_data;
    if (admin->context.self->process_id == 0)
        snprintf(why, size, "not registered yet");
    else if (*admin->context.draining)
        snprintf(why, size, "draining");
    else if (admin->context.self->stopping)
        snprintf(why, size, "shutting down");
    else
        return true;
    return false;
}

static bool cellapp_admin_healthy(void *user_data, char *why, size_t size) {
    const cellapp_admin *admin = user_data;
    uint64_t since = clock_monotonic_us() - *admin->context.tick_last_us;
    if (since < CELLAPP_ADMIN_STUCK_US) return true;
    snprintf(why, size, "no tick for %" PRIu64 " ms", since / 1000);
    return false;
}

static void cellapp_admin_metrics(void *user_data, metrics_text *m) {
    const cellapp_admin *admin = user_data;
    admin->context.metrics(admin->context.owner, m);
}

/* ---- lifetime -------------------------------------------------------------------- */

cellapp_admin *cellapp_admin_start(const cellapp_admin_context *context, char *err, size_t errlen) {
    cellapp_admin *admin = xcalloc(1, sizeof *admin);
    admin->context = *context;
    process_admin_hooks hooks = {cellapp_admin_ready, cellapp_admin_healthy, cellapp_admin_metrics, admin};
    process_admin *process = process_admin_start(context->loop, context->process, context->redis, &hooks, err, errlen);
    if (!process) {
        free(admin);
        return NULL;
    }
    admin->admin = process;
    admin_http *http = process_admin_http(process);
    admin_http_route(http, "GET", "/api/entities", cellapp_admin_on_entities, admin);
    admin_http_route(http, "GET", "/api/events", cellapp_admin_on_events, admin);
    admin_http_route(http, "GET", "/api/entity", cellapp_admin_on_entity, admin);
    admin_http_route(http, "POST", "/admin/shutdown", cellapp_admin_on_shutdown, admin);
    uv_timer_init(context->loop, &admin->events);
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
