/* admin_cluster.c -- tessera-admin's status, cells, entity, kick and
 * shutdown (admin_cluster.h). */
#include "admin_cluster.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "http_fetch.h"
#include "redis_keys.h"
#include "space_layout.h"

#define ADMIN_CLUSTER_TIMEOUT_MS 3000
#define ADMIN_CLUSTER_MAX_PROCESSES 1024

/* One registry entry: its id and its hash's fields. */
typedef struct admin_process {
    char id[24];
    cJSON *fields; /* an object of strings */
} admin_process;

static const char *admin_field(const admin_process *p, const char *name) {
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(p->fields, name);
    return cJSON_IsString(item) ? item->valuestring : "";
}

/* The live registry entries, sorted by id. Returns the count (-1: Redis failed). */
static int admin_processes(redisContext *redis, const char *cluster, admin_process *out, int cap) {
    char key[REDIS_KEY_MAX];
    redisReply *ids = redisCommand(redis, "SMEMBERS %s", redis_key_processes(key, cluster));
    if (!ids || ids->type != REDIS_REPLY_ARRAY) {
        fprintf(stderr, "tessera-admin: Redis: %s\n", ids && ids->str ? ids->str : redis->errstr);
        if (ids) freeReplyObject(ids);
        return -1;
    }
    int count = 0;
    for (size_t i = 0; i < ids->elements && count < cap; i++) {
        uint64_t id = strtoull(ids->element[i]->str, NULL, 10);
        redisReply *hash = redisCommand(redis, "HGETALL %s", redis_key_process(key, cluster, id));
        if (hash && hash->type == REDIS_REPLY_ARRAY && hash->elements > 0) {
            admin_process *p = &out[count++];
            snprintf(p->id, sizeof p->id, "%" PRIu64, id);
            p->fields = cJSON_CreateObject();
            for (size_t k = 0; k + 1 < hash->elements; k += 2)
                cJSON_AddStringToObject(p->fields, hash->element[k]->str, hash->element[k + 1]->str);
        }
        if (hash) freeReplyObject(hash);
    }
    freeReplyObject(ids);
    for (int a = 1; a < count; a++)
        for (int b = a; b > 0 && strtoull(out[b].id, NULL, 10) < strtoull(out[b - 1].id, NULL, 10); b--) {
            admin_process t = out[b];
            out[b] = out[b - 1];
            out[b - 1] = t;
        }
    return count;
}

static void admin_processes_free(admin_process *list, int count) {
    for (int i = 0; i < count; i++) cJSON_Delete(list[i].fields);
}

/* A registry field read as a number: the number, or 0 when the field holds
 * none (missing, empty, or not wholly a finite number), as atof gave. */
static double admin_number(const char *text) {
    char *end;
    errno = 0;
    double value = strtod(text, &end);
    return end != text && *end == '\0' && errno == 0 && isfinite(value) ? value : 0;
}

/* A registry port field: 1..65535, or 0 when it holds no port. */
static int admin_port(const char *text) {
    char *end;
    errno = 0;
    long port = strtol(text, &end, 10);
    return end != text && *end == '\0' && errno == 0 && port > 0 && port <= 65535 ? (int)port : 0;
}

/* A request to a process's admin listener. Returns the HTTP status (0 on
 * failure, with the reason in err); *body is malloc'd when not NULL. */
static int admin_ask(const admin_process *p, const char *method, const char *path, const char *token, char **body,
                     char *err, size_t errlen) {
    int port = admin_port(admin_field(p, "admin_port"));
    if (port <= 0) {
        snprintf(err, errlen, "process %s has no admin listener", p->id);
        return 0;
    }
    int status = 0;
    char *text = NULL;
    if (http_fetch(method, admin_field(p, "host"), port, path, token, ADMIN_CLUSTER_TIMEOUT_MS, &status, &text, NULL,
                   err, errlen) != 0)
        return 0;
    if (status == 401 || status == 403)
        fprintf(stderr, "tessera-admin: %s %s refused %s %s (is --admin-token-file right?): %s", admin_field(p, "role"),
                p->id, method, path, text && text[0] ? text : "no reason given\n");
    if (body)
        *body = text;
    else
        free(text);
    return status;
}

int admin_cluster_status(redisContext *redis, const char *cluster, bool json) {
    admin_process *list = calloc(ADMIN_CLUSTER_MAX_PROCESSES, sizeof *list);
    int count = admin_processes(redis, cluster, list, ADMIN_CLUSTER_MAX_PROCESSES);
    if (count < 0) {
        free(list);
        return 1;
    }
    cJSON *array = cJSON_CreateArray();
    if (!json)
        printf("%-6s %-8s %-22s %-8s %-6s %-7s %-8s %-8s %-7s %-7s %s\n", "id", "role", "address", "pid", "admin",
               "load", "tick_ms", "clients", "reals", "ghosts", "health");
    int unhealthy = 0;
    for (int i = 0; i < count; i++) {
        admin_process *p = &list[i];
        char err[256] = "", *body = NULL;
        int status = admin_ask(p, "GET", "/healthz", NULL, &body, err, sizeof err);
        char health[300];
        if (status == 200)
            snprintf(health, sizeof health, "ok");
        else if (status)
            snprintf(health, sizeof health, "%d %s", status, body ? strtok(body, "\n") : "");
        else
            snprintf(health, sizeof health, "unreachable: %s", err);
        free(body);
        unhealthy += status != 200;
        double load = admin_number(admin_field(p, "load_permille")) / 1000.0;
        double tick_ms = admin_number(admin_field(p, "tick_us")) / 1000.0;
        char address[96];
        snprintf(address, sizeof address, "%s:%s", admin_field(p, "host"), admin_field(p, "port"));
        if (json) {
            cJSON *entry = cJSON_Duplicate(p->fields, 1);
            cJSON_AddStringToObject(entry, "id", p->id);
            cJSON_AddStringToObject(entry, "health", health);
            cJSON_AddItemToArray(array, entry);
        } else {
            printf("%-6s %-8s %-22s %-8s %-6s %-7.3f %-8.2f %-8s %-7s %-7s %s\n", p->id, admin_field(p, "role"),
                   address, admin_field(p, "pid"), admin_field(p, "admin_port"), load, tick_ms,
                   admin_field(p, "clients"), admin_field(p, "reals"), admin_field(p, "ghosts"), health);
        }
    }
    if (json) {
        char *text = cJSON_PrintUnformatted(array);
        printf("%s\n", text);
        free(text);
    }
    cJSON_Delete(array);
    admin_processes_free(list, count);
    free(list);
    return unhealthy ? 1 : 0;
}

/* ---- cells ---------------------------------------------------------------- */

static const cJSON *admin_cell_report(const cJSON *loads, const char *space, uint32_t cell_id) {
    const cJSON *report;
    cJSON_ArrayForEach(report, loads) {
        const cJSON *cell;
        cJSON_ArrayForEach(cell, cJSON_GetObjectItemCaseSensitive(report, "cells")) {
            const cJSON *name = cJSON_GetObjectItemCaseSensitive(cell, "space");
            const cJSON *id = cJSON_GetObjectItemCaseSensitive(cell, "cell");
            if (cJSON_IsString(name) && strcmp(name->valuestring, space) == 0 && cJSON_IsNumber(id) &&
                (uint32_t)id->valuedouble == cell_id)
                return cell;
        }
    }
    return NULL;
}

static void admin_print_node(const space_layout *layout, int32_t index, const cJSON *loads, int depth) {
    const space_layout_node *node = &layout->nodes[index];
    if (node->leaf) {
        const cJSON *report = admin_cell_report(loads, layout->name, node->cell_id);
        printf("%*scell %u on cellapp %" PRIu64 "%s: ", depth * 2, "", node->cell_id, node->cellapp_id,
               node->retiring ? " (retiring)" : "");
        if (report)
            printf("load %.3f, %d reals\n", cJSON_GetObjectItemCaseSensitive(report, "load")->valuedouble,
                   (int)cJSON_GetObjectItemCaseSensitive(report, "reals")->valuedouble);
        else
            printf("not reported\n");
        return;
    }
    const char *axis = space_layout_axis_name(node->axis);
    printf("%*s%s < %g (aggression %.3g):\n", depth * 2, "", axis, node->at, node->aggression);
    admin_print_node(layout, node->low, loads, depth + 1);
    printf("%*s%s >= %g:\n", depth * 2, "", axis, node->at);
    admin_print_node(layout, node->high, loads, depth + 1);
}

int admin_cluster_cells(redisContext *redis, const char *cluster, bool json) {
    char key[REDIS_KEY_MAX];
    redisReply *loads_reply = redisCommand(redis, "HGETALL %s", redis_key_cell_loads(key, cluster));
    redisReply *spaces = redisCommand(redis, "HGETALL %s", redis_key_spaces(key, cluster));
    redisReply *lease = redisCommand(redis, "GET %s", redis_key_balancer_lease(key, cluster));
    if (!loads_reply || !spaces || loads_reply->type != REDIS_REPLY_ARRAY || spaces->type != REDIS_REPLY_ARRAY) {
        fprintf(stderr, "tessera-admin: Redis: %s\n", redis->errstr[0] ? redis->errstr : "unexpected reply");
        if (loads_reply) freeReplyObject(loads_reply);
        if (spaces) freeReplyObject(spaces);
        if (lease) freeReplyObject(lease);
        return 1;
    }
    cJSON *loads = cJSON_CreateObject();
    for (size_t i = 0; i + 1 < loads_reply->elements; i += 2) {
        cJSON *report = cJSON_Parse(loads_reply->element[i + 1]->str);
        if (report) cJSON_AddItemToObject(loads, loads_reply->element[i]->str, report);
    }
    cJSON *out = cJSON_CreateObject();
    cJSON *layouts = cJSON_AddObjectToObject(out, "spaces");
    if (lease && lease->type == REDIS_REPLY_STRING) {
        if (json)
            cJSON_AddStringToObject(out, "leader", lease->str);
        else
            printf("balancer: lease held by %s (cellapp id:fence)\n", lease->str);
    } else if (!json) {
        printf("balancer: no leader\n");
    }
    if (!json) {
        const cJSON *report;
        cJSON_ArrayForEach(report, loads) {
            printf("  cellapp %s: load %.3f, transient %.3f%s\n", report->string,
                   cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(report, "load")),
                   cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(report, "transient")),
                   cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(report, "draining")) ? ", draining" : "");
        }
    }
    for (size_t i = 0; i + 1 < spaces->elements; i += 2) {
        const char *name = spaces->element[i]->str;
        redisReply *text = redisCommand(redis, "GET %s", redis_key_space(key, cluster, name));
        if (!text || text->type != REDIS_REPLY_STRING) {
            if (text) freeReplyObject(text);
            continue;
        }
        char err[256];
        space_layout *layout = space_layout_from_json(text->str, text->len, err, sizeof err);
        if (json) {
            cJSON *parsed = cJSON_Parse(text->str);
            if (parsed) cJSON_AddItemToObject(layouts, name, parsed);
        } else if (!layout) {
            printf("space %s: the stored layout does not parse: %s\n", name, err);
        } else {
            printf("space %s, epoch %" PRIu64 "%s:\n", name, layout->epoch, layout->fence ? " (the balancer's)" : "");
            if (layout->root != SPACE_LAYOUT_NONE) admin_print_node(layout, layout->root, loads, 1);
        }
        space_layout_free(layout);
        freeReplyObject(text);
    }
    if (json) {
        cJSON_AddItemToObject(out, "loads", loads);
        loads = NULL;
        char *printed = cJSON_PrintUnformatted(out);
        printf("%s\n", printed);
        free(printed);
    }
    cJSON_Delete(out);
    cJSON_Delete(loads);
    freeReplyObject(loads_reply);
    freeReplyObject(spaces);
    if (lease) freeReplyObject(lease);
    return 0;
}

/* ---- one entity, kick, shutdown -------------------------------------------- */

static const admin_process *admin_find(const admin_process *list, int count, const char *id) {
    for (int i = 0; i < count; i++)
        if (strcmp(list[i].id, id) == 0) return &list[i];
    return NULL;
}

int admin_cluster_entity(redisContext *redis, const char *cluster, const char *id, const char *token, bool json) {
    char key[REDIS_KEY_MAX];
    admin_process *list = calloc(ADMIN_CLUSTER_MAX_PROCESSES, sizeof *list);
    int count = admin_processes(redis, cluster, list, ADMIN_CLUSTER_MAX_PROCESSES);
    if (count < 0) {
        free(list);
        return 1;
    }
    redisReply *where = redisCommand(redis, "HGET %s %s", redis_key_cell_directory(key, cluster), id);
    char cellapp[24] = "";
    if (where && where->type == REDIS_REPLY_STRING && sscanf(where->str, "%23[0-9]", cellapp) != 1) cellapp[0] = '\0';
    if (where) freeReplyObject(where);
    char path[96];
    snprintf(path, sizeof path, "/api/entity?id=%s", id);
    cJSON *out = cJSON_CreateObject();
    cJSON_AddStringToObject(out, "id", id);
    char baseapp[24] = "";
    int rc = 1;
    const admin_process *holder = cellapp[0] ? admin_find(list, count, cellapp) : NULL;
    if (holder) {
        char err[256], *body = NULL;
        if (admin_ask(holder, "GET", path, token, &body, err, sizeof err) == 200) {
            cJSON *cell = cJSON_Parse(body);
            if (cell) {
                const cJSON *base = cJSON_GetObjectItemCaseSensitive(cell, "baseapp");
                if (cJSON_IsNumber(base)) snprintf(baseapp, sizeof baseapp, "%.0f", base->valuedouble);
                cJSON_AddItemToObject(out, "cell", cell);
                rc = 0;
            }
        }
        free(body);
    }
    /* The base: on the baseapp the cell names, else ask each baseapp. */
    for (int i = 0; i < count; i++) {
        const admin_process *p = &list[i];
        if (strcmp(admin_field(p, "role"), "baseapp") != 0 || (baseapp[0] && strcmp(p->id, baseapp) != 0)) continue;
        char err[256], *body = NULL;
        if (admin_ask(p, "GET", path, token, &body, err, sizeof err) == 200) {
            cJSON *base = cJSON_Parse(body);
            if (base) {
                cJSON_AddItemToObject(out, "base", base);
                rc = 0;
                free(body);
                break;
            }
        }
        free(body);
    }
    if (rc != 0) {
        fprintf(stderr, "tessera-admin: entity %s is neither in the cell directory nor on a baseapp\n", id);
    } else if (json) {
        char *text = cJSON_PrintUnformatted(out);
        printf("%s\n", text);
        free(text);
    } else {
        char *text = cJSON_Print(out);
        printf("%s\n", text);
        free(text);
    }
    cJSON_Delete(out);
    admin_processes_free(list, count);
    free(list);
    return rc;
}

int admin_cluster_kick(redisContext *redis, const char *cluster, const char *account, const char *token) {
    admin_process *list = calloc(ADMIN_CLUSTER_MAX_PROCESSES, sizeof *list);
    int count = admin_processes(redis, cluster, list, ADMIN_CLUSTER_MAX_PROCESSES);
    if (count < 0) {
        free(list);
        return 1;
    }
    char path[256];
    int n = snprintf(path, sizeof path, "/admin/kick?account=");
    for (const char *c = account; *c && n + 4 < (int)sizeof path; c++) {
        if ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '_' || *c == '-')
            path[n++] = *c;
        else
            n += snprintf(path + n, sizeof path - (size_t)n, "%%%02X", (unsigned char)*c);
    }
    path[n] = '\0';
    int kicked = 0;
    for (int i = 0; i < count; i++) {
        if (strcmp(admin_field(&list[i], "role"), "baseapp") != 0) continue;
        char err[256];
        int status = admin_ask(&list[i], "POST", path, token, NULL, err, sizeof err);
        if (status == 200) {
            printf("kicked '%s' from baseapp %s\n", account, list[i].id);
            kicked++;
        } else if (status == 0) {
            fprintf(stderr, "tessera-admin: baseapp %s: %s\n", list[i].id, err);
        }
    }
    if (!kicked) fprintf(stderr, "tessera-admin: account '%s' is not logged in on any baseapp\n", account);
    admin_processes_free(list, count);
    free(list);
    return kicked ? 0 : 1;
}

int admin_cluster_shutdown(redisContext *redis, const char *cluster, const char *process_id, const char *token) {
    admin_process *list = calloc(ADMIN_CLUSTER_MAX_PROCESSES, sizeof *list);
    int count = admin_processes(redis, cluster, list, ADMIN_CLUSTER_MAX_PROCESSES);
    if (count < 0) {
        free(list);
        return 1;
    }
    const admin_process *p = admin_find(list, count, process_id);
    int rc = 1;
    if (!p) {
        fprintf(stderr, "tessera-admin: no live process %s (see status)\n", process_id);
    } else {
        char err[256], *body = NULL;
        int status = admin_ask(p, "POST", "/admin/shutdown", token, &body, err, sizeof err);
        if (status == 202) {
            printf("%s %s: %s", admin_field(p, "role"), p->id, body ? body : "stopping\n");
            rc = 0;
        } else {
            fprintf(stderr, "tessera-admin: %s %s: %s\n", admin_field(p, "role"), p->id, status ? body : err);
        }
        free(body);
    }
    admin_processes_free(list, count);
    free(list);
    return rc;
}
