/* balancer.c -- the balancer as the cluster runs it: every cellapp
 * publishes what its cells carry, one of them (whoever holds the Redis
 * lease) decides for every space, and writes the layouts it decides with
 * the lease's fence.
 *
 * Once a period each cellapp:
 *   - writes its report into HSET P cell_loads <its id> (JSON: its load,
 *     transient load, whether it is draining, its offloads in flight, and
 *     per cell the space, cell id, applied layout epoch, load, reals and
 *     entity bound levels, cell_load.c);
 *   - takes or renews the lease (lease.h).
 * The holder then reads every report (HGETALL) and, for each space whose
 * layout it has applied and has no write of its own in flight:
 *   1. asks balance_plan for the one change to the cells worth making
 *      (remove a retired cell, hand over the cell of a gone or draining
 *      cellapp, add a cell, retire one; adding and retiring at most once
 *      per cell_change_ms), and writes it;
 *   2. otherwise, when every cell's cellapp has applied the layout, runs
 *      one balance_pass of line moves and writes it if a line moved.
 * A layout is written as a copy of the applied one with the next epoch and
 * the lease's fence; the store refuses it if the epoch is taken (an
 * operator wrote meanwhile: the next period starts from theirs) or the
 * fence is old (another cellapp leads now).
 *
 * A cellapp is alive for the balancer until the cluster declared it dead
 * (death_watch.h) or it is gone without a trace; the cells of one that is
 * not are handed over, and its reals are restored where they now belong.
 * With balance_enabled off the holder does only that: no line moves, no
 * cells added or retired for the load.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "balancer.h"
#include "lease.h"
#include "log.h"
#include "redis_keys.h"
#include "space_store.h"

typedef struct balancer_cell {
    char space[SPACE_LAYOUT_NAME_MAX];
    balance_cell_report report;
} balancer_cell;

/* One cellapp's report as the leader last read it. */
typedef struct balancer_report {
    uint64_t cellapp_id;
    uint64_t at_ms; /* wall clock when it was written */
    double load, transient;
    bool draining;
    uint32_t pending_offloads;
    balancer_cell *cells;
    size_t cell_count;
} balancer_report;

/* What the leader last wrote for a space. */
typedef struct balancer_written {
    char space[SPACE_LAYOUT_NAME_MAX];
    uint64_t epoch; /* the last epoch written (0: none) */
    bool in_flight;
} balancer_written;

struct balancer {
    balancer_context context;
    lease *lease;
    char loads_key[REDIS_KEY_MAX];
    uint64_t next_period_us;
    bool reading_reports;
    bool stopped;
    uint64_t leading_since_us; /* 0 while not leading */
    uint64_t created_us;       /* monotonic */
    uint64_t last_cell_change_us;
    balancer_report *reports;
    size_t report_count;
    balancer_written *written;
    size_t written_count, written_capacity;
    /* Published in the registry (cellapp_publish_stats). */
    uint64_t passes, line_moves, cell_changes, writes_refused;
};

/* ---- reports: writing ----------------------------------------------------------- */

static cJSON *balancer_number_or_null(double value) {
    return isfinite(value) ? cJSON_CreateNumber(value) : cJSON_CreateNull();
}

static char *balancer_report_json(const balancer *b) {
    cJSON *root = cJSON_CreateObject();
    uint64_t at_ms = clock_wall_us() / 1000; /* whole milliseconds */
    cJSON_AddNumberToObject(root, "cellapp", (double)b->context.self->process_id);
    cJSON_AddNumberToObject(root, "at_ms", (double)at_ms);
    cJSON_AddNumberToObject(root, "load", cell_load_value(b->context.load));
    cJSON_AddNumberToObject(root, "transient", cell_load_transient(b->context.load));
    cJSON_AddBoolToObject(root, "draining", *b->context.draining);
    cJSON_AddNumberToObject(root, "pending_offloads", (double)offload_pending_count(b->context.offloads));
    cJSON *cells = cJSON_AddArrayToObject(root, "cells");
    size_t cursor = 0;
    const cell *c;
    while ((c = spaces_next_cell(b->context.spaces, &cursor)) != NULL) {
        if (!c->has_region) continue;
        balance_cell_report report;
        cell_load_report(b->context.load, b->context.spaces, c, &report);
        report.cellapp_id = b->context.self->process_id;
        report.pending_offloads = (uint32_t)offload_pending_count(b->context.offloads);
        cJSON *entry = cJSON_CreateObject();
        cJSON_AddStringToObject(entry, "space", c->space_name);
        cJSON_AddNumberToObject(entry, "cell", report.cell_id);
        cJSON_AddNumberToObject(entry, "epoch", (double)report.epoch);
        cJSON_AddNumberToObject(entry, "load", report.load);
        cJSON_AddNumberToObject(entry, "reals", report.reals);
        cJSON *bounds = cJSON_AddArrayToObject(entry, "bounds");
        for (int e = 0; e < BALANCE_EDGES; e++) {
            cJSON *edge = cJSON_CreateArray();
            for (int l = 0; l < BALANCE_LEVELS; l++) {
                cJSON_AddItemToArray(edge, balancer_number_or_null(report.bounds.level[e][l].position));
                cJSON_AddItemToArray(edge, cJSON_CreateNumber(report.bounds.level[e][l].load));
            }
            cJSON_AddItemToArray(bounds, edge);
        }
        cJSON_AddItemToArray(cells, entry);
    }
    char *text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return text;
}

static void balancer_publish_report(balancer *b) {
    char *json = balancer_report_json(b);
    if (!json) return;
    char id[24];
    snprintf(id, sizeof id, "%" PRIu64, b->context.self->process_id);
    const char *argv[] = {"HSET", b->loads_key, id, json};
    size_t lengths[] = {4, strlen(b->loads_key), strlen(id), strlen(json)};
    redis_client_command_argv(b->context.redis, NULL, NULL, 4, argv, lengths);
    free(json);
}

/* ---- reports: reading ------------------------------------------------------------- */

static void balancer_reports_clear(balancer *b) {
    for (size_t i = 0; i < b->report_count; i++) free(b->reports[i].cells);
    free(b->reports);
    b->reports = NULL;
    b->report_count = 0;
}

static double balancer_json_number(const cJSON *object, const char *name, double otherwise) {
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(object, name);
    return cJSON_IsNumber(item) ? item->valuedouble : otherwise;
}

/* Parses one cellapp's report. Returns 0, or -1 (logged) if it is not one. */
static int balancer_parse_report(const char *text, size_t length, balancer_report *out) {
    memset(out, 0, sizeof *out);
    cJSON *root = cJSON_ParseWithLength(text, length);
    if (!root || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return -1;
    }
    out->cellapp_id = (uint64_t)balancer_json_number(root, "cellapp", 0);
    out->at_ms = (uint64_t)balancer_json_number(root, "at_ms", 0);
    out->load = balancer_json_number(root, "load", 0);
    out->transient = balancer_json_number(root, "transient", 0);
    out->draining = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "draining"));
    out->pending_offloads = (uint32_t)balancer_json_number(root, "pending_offloads", 0);
    const cJSON *cells = cJSON_GetObjectItemCaseSensitive(root, "cells");
    int count = cJSON_IsArray(cells) ? cJSON_GetArraySize(cells) : 0;
    out->cells = xcalloc(count > 0 ? (size_t)count : 1, sizeof *out->cells);
    const cJSON *entry;
    cJSON_ArrayForEach(entry, cells) {
        const cJSON *space = cJSON_GetObjectItemCaseSensitive(entry, "space");
        const cJSON *bounds = cJSON_GetObjectItemCaseSensitive(entry, "bounds");
        if (!cJSON_IsString(space) || strlen(space->valuestring) >= SPACE_LAYOUT_NAME_MAX) continue;
        if (!cJSON_IsArray(bounds) || cJSON_GetArraySize(bounds) != BALANCE_EDGES) continue;
        balancer_cell *cell_entry = &out->cells[out->cell_count];
        snprintf(cell_entry->space, sizeof cell_entry->space, "%s", space->valuestring);
        balance_cell_report *report = &cell_entry->report;
        report->cell_id = (uint32_t)balancer_json_number(entry, "cell", 0);
        report->cellapp_id = out->cellapp_id;
        report->epoch = (uint64_t)balancer_json_number(entry, "epoch", 0);
        report->load = balancer_json_number(entry, "load", 0);
        report->reals = (uint32_t)balancer_json_number(entry, "reals", 0);
        report->cellapp_load = out->load;
        report->pending_offloads = out->pending_offloads;
        bool complete = true;
        for (int e = 0; e < BALANCE_EDGES && complete; e++) {
            const cJSON *edge = cJSON_GetArrayItem(bounds, e);
            if (!cJSON_IsArray(edge) || cJSON_GetArraySize(edge) != 2 * BALANCE_LEVELS) {
                complete = false;
                break;
            }
            bool high = e == BALANCE_EDGE_HIGH_X || e == BALANCE_EDGE_HIGH_Z;
            for (int l = 0; l < BALANCE_LEVELS; l++) {
                const cJSON *position = cJSON_GetArrayItem(edge, 2 * l), *load = cJSON_GetArrayItem(edge, 2 * l + 1);
                report->bounds.level[e][l].position =
                    cJSON_IsNumber(position) ? position->valuedouble : (high ? -INFINITY : INFINITY);
                report->bounds.level[e][l].load = cJSON_IsNumber(load) ? load->valuedouble : 0;
            }
        }
        if (complete && report->cell_id) out->cell_count++;
    }
    cJSON_Delete(root);
    return out->cellapp_id ? 0 : -1;
}

static const balancer_report *balancer_find_report(const balancer *b, uint64_t cellapp_id) {
    for (size_t i = 0; i < b->report_count; i++)
        if (b->reports[i].cellapp_id == cellapp_id) return &b->reports[i];
    return NULL;
}

static bool balancer_report_fresh(const balancer *b, const balancer_report *report) {
    uint64_t now_ms = clock_wall_us() / 1000;
    uint64_t timeout = (uint64_t)b->context.settings->report_timeout_ms;
    return report && report->at_ms + timeout >= now_ms;
}

/* A cellapp is alive until the cluster declared it dead, or it is gone
 * without a trace: neither registered (a lapsed lease is not death),
 * connected, nor reporting. */
static bool balancer_cellapp_alive(const balancer *b, uint64_t cellapp_id) {
    if (cellapp_id == b->context.self->process_id) return true;
    peer_liveness liveness = peer_set_liveness(b->context.peers, cellapp_id);
    if (liveness == PEER_DEAD) return false;
    if (peer_set_is_up(b->context.peers, cellapp_id)) return true;
    if (liveness == PEER_LISTED || liveness == PEER_LAPSED) return true;
    return balancer_report_fresh(b, balancer_find_report(b, cellapp_id));
}

/* ---- decisions ------------------------------------------------------------------- */

typedef struct balancer_lookup_context {
    const balancer *b;
    const space_layout *layout;
} balancer_lookup_context;

/* A cellapp this one is connected to (or itself): one a layout may name. */
static bool balancer_cellapp_connected(uint64_t cellapp_id, void *context) {
    const balancer *b = context;
    return cellapp_id == b->context.self->process_id || peer_set_is_up(b->context.peers, cellapp_id);
}

/* A cell's report, if its owner in the layout reported it lately and is
 * connected: a cell whose cellapp has just died is not balanced against. */
static const balance_cell_report *balancer_lookup(uint32_t cell_id, void *context) {
    const balancer_lookup_context *lookup = context;
    const space_layout_node *node = space_layout_find_cell(lookup->layout, cell_id);
    if (!node || !balancer_cellapp_connected(node->cellapp_id, (void *)lookup->b)) return NULL;
    const balancer_report *report = balancer_find_report(lookup->b, node->cellapp_id);
    if (!balancer_report_fresh(lookup->b, report)) return NULL;
    for (size_t i = 0; i < report->cell_count; i++) {
        const balancer_cell *entry = &report->cells[i];
        if (entry->report.cell_id == cell_id && strcmp(entry->space, lookup->layout->name) == 0) return &entry->report;
    }
    return NULL;
}

/* Every live cellapp, with what its report says. Returns the count. */
/* Every cellapp that is alive (balancer_cellapp_alive): itself, those it
 * is connected to, those the registry still knows and those that report.
 * One that is not connected or whose lease lapsed is a suspect: not dead
 * until the cluster decides, so its cells stay, but it takes none. */
static size_t balancer_cellapps(const balancer *b, balance_cellapp **out) {
    const peer_set *peers = b->context.peers;
    size_t known = 0, cursor = 0;
    while (peer_set_next_known(peers, &cursor)) known++;
    size_t capacity = 1 + peer_set_count_up(peers, PEER_ROLE_CELLAPP) + known + b->report_count, count = 0;
    balance_cellapp *list = xcalloc(capacity, sizeof *list);
    list[count++] =
        (balance_cellapp){b->context.self->process_id, cell_load_value(b->context.load), *b->context.draining, false};
    cursor = 0;
    uint64_t peer;
    while ((peer = peer_set_next_up(peers, PEER_ROLE_CELLAPP, &cursor)) != 0 && count < capacity)
        list[count++] = (balance_cellapp){peer, 0, false, peer_set_liveness(peers, peer) == PEER_LAPSED};
    cursor = 0;
    while ((peer = peer_set_next_known(peers, &cursor)) != 0 && count < capacity) {
        peer_role role;
        if (!peer_set_role_of(peers, peer, &role) || role != PEER_ROLE_CELLAPP || peer_set_is_up(peers, peer) ||
            !balancer_cellapp_alive(b, peer))
            continue;
        list[count++] = (balance_cellapp){peer, 0, false, true};
    }
    for (size_t i = 0; i < b->report_count; i++) {
        const balancer_report *report = &b->reports[i];
        if (report->cellapp_id == b->context.self->process_id || !balancer_report_fresh(b, report) ||
            !balancer_cellapp_alive(b, report->cellapp_id))
            continue;
        balance_cellapp *entry = NULL;
        for (size_t k = 0; k < count && !entry; k++)
            if (list[k].cellapp_id == report->cellapp_id) entry = &list[k];
        bool suspect =
            !peer_set_is_up(peers, report->cellapp_id) || peer_set_liveness(peers, report->cellapp_id) == PEER_LAPSED;
        if (!entry && count < capacity) entry = &list[count++];
        if (!entry) continue;
        *entry = (balance_cellapp){report->cellapp_id, report->load, report->draining, suspect};
    }
    *out = list;
    return count;
}

static balancer_written *balancer_written_for(balancer *b, const char *space) {
    for (size_t i = 0; i < b->written_count; i++)
        if (strcmp(b->written[i].space, space) == 0) return &b->written[i];
    if (b->written_count == b->written_capacity) {
        b->written_capacity = b->written_capacity ? b->written_capacity * 2 : 4;
        b->written = xrealloc(b->written, b->written_capacity * sizeof *b->written);
    }
    balancer_written *entry = &b->written[b->written_count++];
    memset(entry, 0, sizeof *entry);
    snprintf(entry->space, sizeof entry->space, "%s", space);
    return entry;
}

typedef struct balancer_write_ticket {
    balancer *b;
    char space[SPACE_LAYOUT_NAME_MAX];
    uint64_t epoch;
} balancer_write_ticket;

static void balancer_on_written(space_store_result result, unsigned long long value, const char *error,
                                void *user_data) {
    balancer_write_ticket *ticket = user_data;
    balancer *b = ticket->b;
    if (!b->stopped) {
        balancer_written *written = balancer_written_for(b, ticket->space);
        written->in_flight = false;
        switch (result) {
            case SPACE_STORE_WRITTEN:
                written->epoch = ticket->epoch;
                break;
            case SPACE_STORE_OLD_EPOCH:
                b->writes_refused++;
                log_info("balancer: space '%s' epoch %" PRIu64 " not written: epoch %llu is stored (another writer); "
                         "the next pass starts from it",
                         ticket->space, ticket->epoch, value);
                break;
            case SPACE_STORE_FENCED:
                b->writes_refused++;
                log_warn("balancer: space '%s' epoch %" PRIu64 " refused: lease %llu is newer than ours; this cellapp "
                         "no longer leads",
                         ticket->space, ticket->epoch, value);
                break;
            case SPACE_STORE_FAILED:
                b->writes_refused++;
                log_warn("balancer: space '%s' epoch %" PRIu64 " not written: %s", ticket->space, ticket->epoch,
                         error ? error : "Redis failed");
                break;
        }
    }
    free(ticket);
}

/* Writes `layout` (the applied one, edited) as the next epoch under our
 * fence. Takes ownership of `layout`. */
static void balancer_write(balancer *b, space_layout *layout, uint64_t fence) {
    char err[256];
    if (space_layout_check(layout, err, sizeof err) != 0) {
        log_warn("balancer: space '%s': the decided layout is not valid (%s): not written", layout->name, err);
        space_layout_free(layout);
        return;
    }
    /* Every cellapp refuses a layout naming one that is not up, and would
     * wait on it: such a write would stall the space until it is handed
     * over, so it waits here instead. */
    if (space_layout_check_owners(layout, balancer_cellapp_connected, b, err, sizeof err) != 0) {
        log_debug("balancer: space '%s': not written yet: %s", layout->name, err);
        space_layout_free(layout);
        return;
    }
    layout->epoch++;
    layout->fence = fence;
    balancer_write_ticket *ticket = xmalloc(sizeof *ticket);
    ticket->b = b;
    snprintf(ticket->space, sizeof ticket->space, "%s", layout->name);
    ticket->epoch = layout->epoch;
    if (space_store_write(b->context.redis, b->context.cluster_name, layout, balancer_on_written, ticket) != 0) {
        free(ticket);
    } else {
        balancer_written_for(b, layout->name)->in_flight = true;
    }
    space_layout_free(layout);
}

static bool balancer_every_cell_applied(const space_layout *layout, balancer_lookup_context *context) {
    for (int32_t i = 0; i < layout->node_count; i++) {
        const space_layout_node *node = &layout->nodes[i];
        if (!node->leaf || space_layout_find_cell(layout, node->cell_id) != node) continue;
        const balance_cell_report *report = balancer_lookup(node->cell_id, context);
        if (!report || report->epoch < layout->epoch) return false;
    }
    return true;
}

/* Whether an action changes cells because a cellapp is gone or stopping
 * (always done at once), rather than for the load (rate-limited). */
static bool balancer_action_is_urgent(const balance_action *action, const space_layout *layout,
                                      const balance_cellapp *cellapps, size_t count) {
    if (action->kind == BALANCE_REMOVE || action->kind == BALANCE_HAND_OVER) return true;
    if (action->kind != BALANCE_RETIRE) return false;
    const space_layout_node *node = space_layout_find_cell(layout, action->cell_id);
    for (size_t i = 0; node && i < count; i++)
        if (cellapps[i].cellapp_id == node->cellapp_id) return cellapps[i].draining;
    return true;
}

/* The most cell changes one urgent write makes (every cell of the
 * cellapps that died together, handed over or removed). */
#define BALANCER_MAX_URGENT_CHANGES 64

static void balancer_decide_space(balancer *b, const space_layout *applied, const balance_cellapp *cellapps,
                                  size_t cellapp_count, uint64_t fence, uint64_t now_us) {
    balancer_written *written = balancer_written_for(b, applied->name);
    if (written->in_flight || applied->epoch < written->epoch) return; /* our last write is not back yet */
    const balancer_settings *settings = b->context.settings;
    space_layout *layout = space_layout_copy(applied);
    balancer_lookup_context context = {b, layout};
    balance_action action =
        balance_plan(layout, balancer_lookup, &context, cellapps, cellapp_count, &settings->algorithm);
    if (action.kind != BALANCE_NOTHING) {
        bool urgent = balancer_action_is_urgent(&action, layout, cellapps, cellapp_count);
        /* With balancing off only what a stopped or dead cellapp needs is
         * done: its cells go to the others. */
        bool allowed = urgent || settings->enabled;
        if (allowed && (urgent || now_us - b->last_cell_change_us >= (uint64_t)settings->cell_change_ms * 1000)) {
            char err[256];
            for (int changes = 1;; changes++) {
                if (balance_apply(layout, &action, err, sizeof err) != 0) {
                    log_warn("balancer: space '%s': %s: not applied: %s", layout->name, action.reason, err);
                    space_layout_free(layout);
                    return;
                }
                log_info("balancer: space '%s' epoch %" PRIu64 ": %s", layout->name, layout->epoch + 1, action.reason);
                b->cell_changes++;
                if (!urgent || changes >= BALANCER_MAX_URGENT_CHANGES) break;
                /* Every gone cellapp's cells go in the same layout: one that
                 * still names a cellapp this one is not connected to is
                 * never written (two died at once). */
                action = balance_plan(layout, balancer_lookup, &context, cellapps, cellapp_count, &settings->algorithm);
                if (action.kind == BALANCE_NOTHING ||
                    !balancer_action_is_urgent(&action, layout, cellapps, cellapp_count))
                    break;
            }
            if (!urgent) b->last_cell_change_us = now_us;
            balancer_write(b, layout, fence);
            return;
        }
    }
    if (!settings->enabled || !balancer_every_cell_applied(layout, &context)) {
        space_layout_free(layout);
        return;
    }
    balance_move moves[16];
    size_t moved = balance_pass(layout, balancer_lookup, &context, &settings->algorithm, moves, 16);
    b->passes++;
    if (moved == 0) {
        space_layout_free(layout);
        return;
    }
    for (size_t i = 0; i < moved && i < 16; i++)
        log_info("balancer: space '%s' epoch %" PRIu64 ": line %u %.2f -> %.2f", layout->name, layout->epoch + 1,
                 moves[i].split, moves[i].from, moves[i].to);
    b->line_moves += moved;
    balancer_write(b, layout, fence);
}

static void balancer_on_reports(redis_client *redis, redisReply *reply, void *user_data) {
    balancer *b = user_data;
    (void)redis;
    b->reading_reports = false;
    if (b->stopped || !reply || reply->type != REDIS_REPLY_ARRAY) return;
    uint64_t now_us = clock_monotonic_us();
    uint64_t fence = lease_fence(b->lease, now_us);
    if (!fence) return;
    balancer_reports_clear(b);
    b->reports = xcalloc(reply->elements / 2 + 1, sizeof *b->reports);
    for (size_t i = 0; i + 1 < reply->elements; i += 2) {
        const redisReply *value = reply->element[i + 1];
        if (value->type != REDIS_REPLY_STRING) continue;
        balancer_report *report = &b->reports[b->report_count];
        if (balancer_parse_report(value->str, value->len, report) != 0) {
            free(report->cells);
            log_warn("balancer: the load report of cellapp %s is not readable: ignored",
                     reply->element[i]->type == REDIS_REPLY_STRING ? reply->element[i]->str : "?");
            continue;
        }
        b->report_count++;
    }
    /* Until the peers have had a period to connect, "not connected" means
     * nothing: a cellapp that has just started decides only once it has
     * held the lease that long. One that has run longer knows its peers,
     * and decides at once (a dead leader's cells are waiting). */
    uint64_t period_us = (uint64_t)b->context.settings->period_ms * 1000;
    if (now_us - b->leading_since_us < period_us && now_us - b->created_us < 2 * period_us) return;
    balance_cellapp *cellapps;
    size_t cellapp_count = balancer_cellapps(b, &cellapps);
    size_t cursor = 0;
    const space_layout *layout;
    while ((layout = spaces_next_newest_layout(b->context.spaces, &cursor)) != NULL)
        balancer_decide_space(b, layout, cellapps, cellapp_count, fence, now_us);
    free(cellapps);
    /* Reports of cellapps long gone are dropped, so the hash stays the
     * cluster's. */
    for (size_t i = 0; i < b->report_count; i++) {
        const balancer_report *report = &b->reports[i];
        if (balancer_cellapp_alive(b, report->cellapp_id)) continue;
        char id[24];
        snprintf(id, sizeof id, "%" PRIu64, report->cellapp_id);
        const char *argv[] = {"HDEL", b->loads_key, id};
        size_t lengths[] = {4, strlen(b->loads_key), strlen(id)};
        redis_client_command_argv(b->context.redis, NULL, NULL, 3, argv, lengths);
    }
}

/* ---- the lease and the period ---------------------------------------------------- */

static void balancer_on_lease(lease *l, uint64_t fence, void *user_data) {
    balancer *b = user_data;
    (void)l;
    b->leading_since_us = fence ? clock_monotonic_us() : 0;
    /* A new leader knows nothing of how the last cell change settled: it
     * waits a full cell_change_ms before adding or retiring for the load. */
    if (fence) b->last_cell_change_us = b->leading_since_us;
}

balancer *balancer_create(const balancer_context *context) {
    balancer *b = xcalloc(1, sizeof *b);
    b->context = *context;
    b->created_us = clock_monotonic_us();
    redis_key_cell_loads(b->loads_key, context->cluster_name);
    return b;
}

void balancer_tick(balancer *b, uint64_t now_us) {
    if (b->stopped || b->context.self->process_id == 0 || now_us < b->next_period_us) return;
    b->next_period_us = now_us + (uint64_t)b->context.settings->period_ms * 1000;
    if (!redis_client_is_connected(b->context.redis)) return;
    if (!b->lease)
        b->lease = lease_create(b->context.redis, b->context.cluster_name, b->context.self->process_id,
                                (uint64_t)b->context.settings->lease_ms, balancer_on_lease, b);
    balancer_publish_report(b);
    if (!*b->context.draining) lease_tick(b->lease, now_us);
    if (!lease_fence(b->lease, now_us) || b->reading_reports) return;
    const char *argv[] = {"HGETALL", b->loads_key};
    size_t lengths[] = {7, strlen(b->loads_key)};
    if (redis_client_command_argv(b->context.redis, balancer_on_reports, b, 2, argv, lengths) == 0)
        b->reading_reports = true;
}

void balancer_poke(balancer *b) {
    if (b) b->next_period_us = 0;
}

void balancer_stop(balancer *b) {
    if (!b || b->stopped) return;
    if (b->lease) lease_release(b->lease);
    if (b->context.self->process_id && redis_client_is_connected(b->context.redis)) {
        char id[24];
        snprintf(id, sizeof id, "%" PRIu64, b->context.self->process_id);
        const char *argv[] = {"HDEL", b->loads_key, id};
        size_t lengths[] = {4, strlen(b->loads_key), strlen(id)};
        redis_client_command_argv(b->context.redis, NULL, NULL, 3, argv, lengths);
    }
    b->stopped = true;
}

void balancer_give_up_lease(balancer *b) {
    if (b && b->lease) lease_release(b->lease);
}

bool balancer_is_leader(const balancer *b) { return b && b->lease && lease_fence(b->lease, clock_monotonic_us()) != 0; }

bool balancer_lease_value(const balancer *b, uint64_t now_us, char *out, size_t size) {
    uint64_t fence = b && b->lease ? lease_fence(b->lease, now_us) : 0;
    if (!fence) return false;
    snprintf(out, size, "%" PRIu64 ":%" PRIu64, b->context.self->process_id, fence);
    return true;
}

uint64_t balancer_lease_holder(const balancer *b) { return b && b->lease ? lease_holder(b->lease) : 0; }

int balancer_take_back_lease(balancer *b, uint64_t holder_id, const char *holder_registry_key, uint64_t registry_ttl_ms,
                             uint64_t quiet_ms) {
    if (!b || !b->lease || b->stopped || *b->context.draining) return -1;
    return lease_take_back(b->lease, holder_id, holder_registry_key, registry_ttl_ms, quiet_ms, NULL, NULL);
}

uint64_t balancer_leading_since_us(const balancer *b) { return balancer_is_leader(b) ? b->leading_since_us : 0; }

void balancer_stats(const balancer *b, balancer_figures *out) {
    memset(out, 0, sizeof *out);
    if (!b) return;
    out->leader = balancer_is_leader(b);
    out->holder = b->lease ? lease_holder(b->lease) : 0;
    out->passes = b->passes;
    out->line_moves = b->line_moves;
    out->cell_changes = b->cell_changes;
    out->writes_refused = b->writes_refused;
}

void balancer_free(balancer *b) {
    if (!b) return;
    b->stopped = true;
    lease_free(b->lease);
    balancer_reports_clear(b);
    free(b->written);
    free(b);
}
