/* admin.c -- tessera-admin, the operator's tool for a running cluster's
 * spaces: list them, print a layout, create a space split into a grid of
 * cells, move a split line, give a cell to another cellapp, split a cell.
 * Every change reads the layout, edits it, checks it (space_layout_check,
 * and that every cell's cellapp is alive in the registry), and writes it
 * with the next epoch through space_store's script, which refuses the
 * write if another writer got there first (then it reads again and retries).
 * Cellapps pick up the new layout within a tick or two and move entities
 * across the lines that moved.
 *
 * It owns nothing long-lived: one synchronous hiredis connection for the
 * command's duration. Exit status 0, 1 for a refused or failed change (the
 * reason on stderr), 2 for a usage error.
 */
#include <errno.h>
#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin_guard.h"
#include "json_file.h"
#include "redis_keys.h"
#include "secret_file.h"
#include "space_layout.h"
#include "admin_cluster.h"
#include "space_store.h"

/* A write that lost to another writer is tried again with a fresh read;
 * five losses in a row mean something keeps writing (a balancer): give up. */
#define ADMIN_WRITE_ATTEMPTS 5
#define ADMIN_MAX_CELLAPPS 1024

typedef struct admin {
    redisContext *redis;
    char cluster[64];
    bool json;
} admin;

static int admin_usage(FILE *out) {
    fprintf(out, "usage: tessera-admin [--redis HOST:PORT] [--cluster NAME] [--admin-token-file FILE] [--json]\n"
                 "                     COMMAND ...\n"
                 "\n"
                 "  spaces                        the spaces and the epochs of their layouts\n"
                 "  cellapps                      the live cellapps (their ids name cells' owners)\n"
                 "  show SPACE                    the layout: split lines (numbered) and cells\n"
                 "  create SPACE [--bounds MINX,MINZ,MAXX,MAXZ] [--height MINY,MAXY] [--3d]\n"
                 "         [--grid COLUMNSxROWS] [--spawn X,Z,RADIUS] [--cellapps ID,ID,...]\n"
                 "                                a new space split into a grid of equal cells, one\n"
                 "                                per cellapp in the order given (default: every live\n"
                 "                                cellapp, by id; the grid as square as they allow)\n"
                 "  move-line SPACE SPLIT AT      move split line number SPLIT (see show) to AT\n"
                 "  assign SPACE CELL CELLAPP     give cell CELL to cellapp CELLAPP\n"
                 "  split SPACE CELL x|z AT CELLAPP\n"
                 "                                split a cell at AT; the high side becomes a new\n"
                 "                                cell of CELLAPP\n"
                 "  retire SPACE CELL             let the balancer shrink cell CELL away and remove it\n"
                 "  put SPACE FILE [--fence N]    write a whole layout (a JSON file) as the next\n"
                 "                                epoch, with its own balancer fence or N (0: an\n"
                 "                                operator's write)\n"
                 "  status                        every live process: address, load, tick time,\n"
                 "                                clients, reals, ghosts, and its /healthz\n"
                 "  cells                         every space's layout with each cell's load, and the\n"
                 "                                balancer's leader\n"
                 "  entity ID                     where entity ID's cell and base are, and their state\n"
                 "  kick ACCOUNT                  drop that account's client, wherever it is\n"
                 "  shutdown ID                   ask process ID to drain and stop (as SIGTERM)\n"
                 "\n"
                 "Defaults: --redis 127.0.0.1:6379 --cluster tessera; bounds -500,-500,500,500,\n"
                 "height -1000,1000, spawn at the centre with radius 50.\n"
                 "entity, kick and shutdown send the admin token of --admin-token-file (or of\n"
                 "$TESSERA_ADMIN_TOKEN_FILE): the file the processes' admin_token_file names.\n"
                 "A Redis with a password (the processes' redis_password): name the file that\n"
                 "holds it in $TESSERA_REDIS_PASSWORD_FILE (or set $TESSERA_REDIS_PASSWORD).\n");
    return 2;
}

static redisReply *admin_command(admin *a, int argc, const char **argv) {
    size_t lengths[16];
    for (int i = 0; i < argc; i++) lengths[i] = strlen(argv[i]);
    redisReply *reply = redisCommandArgv(a->redis, argc, argv, lengths);
    if (!reply)
        fprintf(stderr, "tessera-admin: Redis: %s\n", a->redis->errstr[0] ? a->redis->errstr : "no reply");
    else if (reply->type == REDIS_REPLY_ERROR)
        fprintf(stderr, "tessera-admin: Redis: %s\n", reply->str);
    return reply;
}

/* The live cellapps' ids, sorted. Returns how many, or -1. */
static int admin_cellapps(admin *a, uint64_t *out, int cap) {
    char key[REDIS_KEY_MAX];
    const char *members_argv[] = {"SMEMBERS", redis_key_processes(key, a->cluster)};
    redisReply *members = admin_command(a, 2, members_argv);
    if (!members || members->type != REDIS_REPLY_ARRAY) {
        if (members) freeReplyObject(members);
        return -1;
    }
    int count = 0;
    for (size_t i = 0; i < members->elements && count < cap; i++) {
        uint64_t id = strtoull(members->element[i]->str, NULL, 10);
        const char *role_argv[] = {"HGET", redis_key_process(key, a->cluster, id), "role"};
        redisReply *role = admin_command(a, 3, role_argv);
        if (role && role->type == REDIS_REPLY_STRING && strcmp(role->str, "cellapp") == 0) out[count++] = id;
        if (role) freeReplyObject(role);
    }
    freeReplyObject(members);
    for (int i = 1; i < count; i++)
        for (int j = i; j > 0 && out[j - 1] > out[j]; j--) {
            uint64_t t = out[j];
            out[j] = out[j - 1];
            out[j - 1] = t;
        }
    return count;
}

typedef struct admin_live {
    uint64_t ids[ADMIN_MAX_CELLAPPS];
    int count;
} admin_live;

static bool admin_is_alive(uint64_t cellapp_id, void *context) {
    const admin_live *live = context;
    for (int i = 0; i < live->count; i++)
        if (live->ids[i] == cellapp_id) return true;
    return false;
}

/* The stored layout of `name`, or NULL (with why on stderr). */
static space_layout *admin_read(admin *a, const char *name) {
    char key[REDIS_KEY_MAX];
    const char *argv[] = {"GET", redis_key_space(key, a->cluster, name)};
    redisReply *reply = admin_command(a, 2, argv);
    if (!reply) return NULL;
    if (reply->type != REDIS_REPLY_STRING) {
        if (reply->type == REDIS_REPLY_NIL) fprintf(stderr, "tessera-admin: there is no space '%s'\n", name);
        freeReplyObject(reply);
        return NULL;
    }
    char err[256];
    space_layout *layout = space_layout_from_json(reply->str, reply->len, err, sizeof err);
    if (!layout) fprintf(stderr, "tessera-admin: the stored layout of '%s' is unreadable: %s\n", name, err);
    freeReplyObject(reply);
    return layout;
}

/* Checks and writes `layout` with epoch + 1 (its fence as it is: 0 for an
 * operator's edit). Returns 0 written, 1 refused as invalid or fenced, -1
 * failed, -2 lost to another writer. */
static int admin_write(admin *a, space_layout *layout) {
    char err[256];
    admin_live live;
    live.count = admin_cellapps(a, live.ids, ADMIN_MAX_CELLAPPS);
    if (live.count < 0) return -1;
    if (space_layout_check(layout, err, sizeof err) != 0 ||
        space_layout_check_owners(layout, admin_is_alive, &live, err, sizeof err) != 0) {
        fprintf(stderr, "tessera-admin: refused: %s\n", err);
        return 1;
    }
    layout->epoch++;
    space_store_command command;
    space_store_command_init(&command, a->cluster, layout);
    redisReply *reply = redisCommandArgv(a->redis, command.argc, command.argv, command.lengths);
    space_store_command_close(&command);
    unsigned long long value;
    const char *error;
    space_store_result result = space_store_result_of(reply, &value, &error);
    if (reply) freeReplyObject(reply);
    switch (result) {
        case SPACE_STORE_WRITTEN:
            return 0;
        case SPACE_STORE_OLD_EPOCH:
            return -2;
        case SPACE_STORE_FENCED:
            fprintf(stderr,
                    "tessera-admin: refused: the layout carries balancer fence %" PRIu64
                    ", older than the newest lease's (%llu)\n",
                    layout->fence, value);
            return 1;
        default:
            fprintf(stderr, "tessera-admin: Redis: %s\n", error ? error : a->redis->errstr);
            return -1;
    }
}

typedef int (*admin_edit)(space_layout *layout, int argc, char **argv, char *err, size_t errlen);

/* Read, edit, write; again if another writer won. */
static int admin_change(admin *a, const char *name, admin_edit edit, int argc, char **argv) {
    for (int attempt = 0; attempt < ADMIN_WRITE_ATTEMPTS; attempt++) {
        space_layout *layout = admin_read(a, name);
        if (!layout) return 1;
        layout->fence = 0; /* an operator's edit, whoever wrote the layout last */
        char err[256];
        if (edit(layout, argc, argv, err, sizeof err) != 0) {
            fprintf(stderr, "tessera-admin: %s\n", err);
            space_layout_free(layout);
            return 1;
        }
        int rc = admin_write(a, layout);
        if (rc == 0) {
            if (a->json) {
                char *json = space_layout_to_json(layout);
                printf("%s\n", json);
                free(json);
            } else {
                space_layout_print(layout, stdout);
            }
        }
        space_layout_free(layout);
        if (rc != -2) return rc == 0 ? 0 : 1;
    }
    fprintf(stderr, "tessera-admin: space '%s' keeps changing under us; try again\n", name);
    return 1;
}

static bool admin_parse_u64(const char *text, uint64_t *out) {
    char *end;
    errno = 0;
    unsigned long long value = strtoull(text, &end, 10);
    if (errno || end == text || *end) return false;
    *out = value;
    return true;
}

static bool admin_parse_double(const char *text, double *out) {
    char *end;
    errno = 0;
    double value = strtod(text, &end);
    if (errno || end == text || *end || !isfinite(value)) return false;
    *out = value;
    return true;
}

/* "CxR": two counts, each 1 to UINT32_MAX. */
static bool admin_parse_grid(const char *text, uint32_t *columns, uint32_t *rows) {
    char buffer[64];
    snprintf(buffer, sizeof buffer, "%s", text);
    char *x = strchr(buffer, 'x');
    if (!x) return false;
    *x = '\0';
    uint64_t c, r;
    if (!admin_parse_u64(buffer, &c) || !admin_parse_u64(x + 1, &r) || !c || !r || c > UINT32_MAX || r > UINT32_MAX)
        return false;
    *columns = (uint32_t)c;
    *rows = (uint32_t)r;
    return true;
}

/* "a,b,c" into `count` doubles. */
static bool admin_parse_list(const char *text, double *out, int count) {
    char buffer[256];
    snprintf(buffer, sizeof buffer, "%s", text);
    char *save = NULL, *item = strtok_r(buffer, ",", &save);
    for (int i = 0; i < count; i++) {
        if (!item || !admin_parse_double(item, &out[i])) return false;
        item = strtok_r(NULL, ",", &save);
    }
    return item == NULL;
}

static int admin_edit_move(space_layout *layout, int argc, char **argv, char *err, size_t errlen) {
    uint64_t split;
    double at;
    if (argc != 2 || !admin_parse_u64(argv[0], &split) || !admin_parse_double(argv[1], &at)) {
        snprintf(err, errlen, "move-line needs SPACE SPLIT AT (a split number and a coordinate)");
        return -1;
    }
    return space_layout_move_split(layout, (uint32_t)split, at, err, errlen);
}

static int admin_edit_assign(space_layout *layout, int argc, char **argv, char *err, size_t errlen) {
    uint64_t cell, cellapp;
    if (argc != 2 || !admin_parse_u64(argv[0], &cell) || !admin_parse_u64(argv[1], &cellapp)) {
        snprintf(err, errlen, "assign needs SPACE CELL CELLAPP");
        return -1;
    }
    return space_layout_assign(layout, (uint32_t)cell, cellapp, err, errlen);
}

static int admin_edit_split(space_layout *layout, int argc, char **argv, char *err, size_t errlen) {
    uint64_t cell, cellapp;
    double at;
    if (argc != 4 || !admin_parse_u64(argv[0], &cell) || (strcmp(argv[1], "x") != 0 && strcmp(argv[1], "z") != 0) ||
        !admin_parse_double(argv[2], &at) || !admin_parse_u64(argv[3], &cellapp)) {
        snprintf(err, errlen, "split needs SPACE CELL x|z AT CELLAPP");
        return -1;
    }
    space_layout_axis axis = argv[1][0] == 'x' ? SPACE_LAYOUT_AXIS_X : SPACE_LAYOUT_AXIS_Z;
    return space_layout_split_cell(layout, (uint32_t)cell, axis, at, cellapp, err, errlen);
}

static int admin_edit_retire(space_layout *layout, int argc, char **argv, char *err, size_t errlen) {
    uint64_t cell;
    if (argc != 1 || !admin_parse_u64(argv[0], &cell)) {
        snprintf(err, errlen, "retire needs SPACE CELL");
        return -1;
    }
    return space_layout_set_retiring(layout, (uint32_t)cell, true, err, errlen);
}

/* put SPACE FILE [--fence N]: writes a whole layout (a saved one, say) as
 * the next epoch, with the fence it carries or the one given. */
static int admin_put(admin *a, const char *name, int argc, char **argv) {
    uint64_t fence = 0;
    bool has_fence = false;
    if (argc == 3 && strcmp(argv[1], "--fence") == 0 && admin_parse_u64(argv[2], &fence))
        has_fence = true;
    else if (argc != 1)
        return admin_usage(stderr);
    size_t length;
    char err[256];
    char *text = json_file_read(argv[0], &length, err, sizeof err);
    if (!text) {
        fprintf(stderr, "tessera-admin: %s\n", err);
        return 1;
    }
    space_layout *layout = space_layout_from_json(text, length, err, sizeof err);
    free(text);
    if (!layout) {
        fprintf(stderr, "tessera-admin: %s: %s\n", argv[0], err);
        return 1;
    }
    if (strcmp(layout->name, name) != 0) {
        fprintf(stderr, "tessera-admin: %s holds space '%s', not '%s'\n", argv[0], layout->name, name);
        space_layout_free(layout);
        return 1;
    }
    if (has_fence) layout->fence = fence;
    char key[REDIS_KEY_MAX];
    const char *argv_get[] = {"HGET", redis_key_spaces(key, a->cluster), name};
    redisReply *stored = admin_command(a, 3, argv_get);
    layout->epoch = stored && stored->type == REDIS_REPLY_STRING ? strtoull(stored->str, NULL, 10) : 0;
    if (stored) freeReplyObject(stored);
    int rc = admin_write(a, layout);
    if (rc == 0)
        space_layout_print(layout, stdout);
    else if (rc == -2)
        fprintf(stderr, "tessera-admin: space '%s' was written by someone else meanwhile\n", name);
    space_layout_free(layout);
    return rc == 0 ? 0 : 1;
}

static int admin_create(admin *a, const char *name, int argc, char **argv) {
    double bounds[4] = {-500, -500, 500, 500}, height[2] = {-1000, 1000}, spawn[3];
    bool three_d = false, has_spawn = false;
    uint32_t columns = 0, rows = 0;
    uint64_t cellapps[ADMIN_MAX_CELLAPPS];
    int cellapp_count = -1;
    for (int i = 0; i < argc; i++) {
        const char *option = argv[i], *value = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(option, "--3d") == 0) {
            three_d = true;
            continue;
        }
        if (!value) return admin_usage(stderr);
        i++;
        if (strcmp(option, "--bounds") == 0 && admin_parse_list(value, bounds, 4)) continue;
        if (strcmp(option, "--height") == 0 && admin_parse_list(value, height, 2)) continue;
        if (strcmp(option, "--spawn") == 0 && admin_parse_list(value, spawn, 3)) {
            has_spawn = true;
            continue;
        }
        if (strcmp(option, "--grid") == 0 && admin_parse_grid(value, &columns, &rows)) continue;
        if (strcmp(option, "--cellapps") == 0) {
            char buffer[1024];
            snprintf(buffer, sizeof buffer, "%s", value);
            cellapp_count = 0;
            char *save = NULL;
            for (char *item = strtok_r(buffer, ",", &save); item && cellapp_count < ADMIN_MAX_CELLAPPS;
                 item = strtok_r(NULL, ",", &save))
                if (!admin_parse_u64(item, &cellapps[cellapp_count++])) return admin_usage(stderr);
            continue;
        }
        fprintf(stderr, "tessera-admin: create: bad option or value: %s %s\n", option, value);
        return 2;
    }
    if (cellapp_count < 0) {
        cellapp_count = admin_cellapps(a, cellapps, ADMIN_MAX_CELLAPPS);
        if (cellapp_count < 0) return 1;
    }
    if (cellapp_count == 0) {
        fprintf(stderr, "tessera-admin: no cellapp is alive to own the cells\n");
        return 1;
    }
    if (!columns) {
        /* As square as the count allows: columns is the largest divisor
         * not above the square root's ceiling. */
        columns = (uint32_t)ceil(sqrt((double)cellapp_count));
        while ((uint32_t)cellapp_count % columns) columns--;
        rows = (uint32_t)cellapp_count / columns;
        if (rows > columns) {
            uint32_t t = rows;
            rows = columns;
            columns = t;
        }
    }
    if ((uint64_t)columns * rows != (uint64_t)cellapp_count) {
        fprintf(stderr, "tessera-admin: a %ux%u grid has %u cells, but %d cellapps are to own them (one each)\n",
                columns, rows, columns * rows, cellapp_count);
        return 1;
    }
    const double min[3] = {bounds[0], height[0], bounds[1]}, max[3] = {bounds[2], height[1], bounds[3]};
    space_layout *layout =
        space_layout_create_grid(name, min, max, three_d, columns, rows, cellapps, (size_t)cellapp_count);
    if (!layout) {
        fprintf(stderr, "tessera-admin: a space needs a name of 1 to 63 bytes and bounds with min below max\n");
        return 1;
    }
    if (has_spawn) {
        layout->spawn_x = spawn[0];
        layout->spawn_z = spawn[1];
        layout->spawn_radius = spawn[2];
    }
    /* A space created again (the same name) replaces the old layout, with
     * a later epoch so that every cellapp applies it. */
    char key[REDIS_KEY_MAX];
    const char *argv_get[] = {"HGET", redis_key_spaces(key, a->cluster), name};
    redisReply *stored = admin_command(a, 3, argv_get);
    if (stored && stored->type == REDIS_REPLY_STRING) layout->epoch = strtoull(stored->str, NULL, 10);
    if (stored) freeReplyObject(stored);
    int rc = admin_write(a, layout);
    if (rc == 0) {
        if (a->json) {
            char *json = space_layout_to_json(layout);
            printf("%s\n", json);
            free(json);
        } else {
            space_layout_print(layout, stdout);
        }
    } else if (rc == -2) {
        fprintf(stderr, "tessera-admin: space '%s' was written by someone else meanwhile; try again\n", name);
    }
    space_layout_free(layout);
    return rc == 0 ? 0 : 1;
}

static int admin_spaces(admin *a) {
    char key[REDIS_KEY_MAX];
    const char *argv[] = {"HGETALL", redis_key_spaces(key, a->cluster)};
    redisReply *reply = admin_command(a, 2, argv);
    if (!reply || reply->type != REDIS_REPLY_ARRAY) {
        if (reply) freeReplyObject(reply);
        return 1;
    }
    for (size_t i = 0; i + 1 < reply->elements; i += 2)
        printf(a->json ? "{\"space\":\"%s\",\"epoch\":%s}\n" : "%s epoch %s\n", reply->element[i]->str,
               reply->element[i + 1]->str);
    freeReplyObject(reply);
    return 0;
}

int main(int argc, char **argv) {
    admin a = {.redis = NULL, .cluster = "tessera", .json = false};
    char host[128] = "127.0.0.1";
    int port = 6379;
    const char *token_file = getenv("TESSERA_ADMIN_TOKEN_FILE");
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) return admin_usage(stdout), 0;
        if (strcmp(argv[i], "--json") == 0) {
            a.json = true;
        } else if (strcmp(argv[i], "--redis") == 0 && i + 1 < argc) {
            const char *colon = strrchr(argv[++i], ':');
            uint64_t redis_port;
            if (!colon || !admin_parse_u64(colon + 1, &redis_port) || redis_port > 65535 ||
                (size_t)(colon - argv[i]) >= sizeof host)
                return admin_usage(stderr);
            port = (int)redis_port;
            memcpy(host, argv[i], (size_t)(colon - argv[i]));
            host[colon - argv[i]] = '\0';
        } else if (strcmp(argv[i], "--cluster") == 0 && i + 1 < argc) {
            snprintf(a.cluster, sizeof a.cluster, "%s", argv[++i]);
        } else if (strcmp(argv[i], "--admin-token-file") == 0 && i + 1 < argc) {
            token_file = argv[++i];
        } else {
            return admin_usage(stderr);
        }
    }
    if (i >= argc) return admin_usage(stderr);
    const char *command = argv[i++];
    char token[ADMIN_GUARD_TOKEN_MAX + 1] = "";
    if (token_file && token_file[0]) {
        char err[512];
        if (admin_guard_read_token_file(token_file, token, sizeof token, err, sizeof err) != 0) {
            fprintf(stderr, "tessera-admin: %s\n", err);
            return 1;
        }
    }
    const char *admin_token = token[0] ? token : NULL;
    struct timeval timeout = {5, 0};
    a.redis = redisConnectWithTimeout(host, port, timeout);
    if (!a.redis || a.redis->err) {
        fprintf(stderr, "tessera-admin: cannot reach Redis at %s:%d: %s\n", host, port,
                a.redis ? a.redis->errstr : "out of memory");
        if (a.redis) redisFree(a.redis);
        return 1;
    }
    redisSetTimeout(a.redis, timeout);
    char redis_password[SECRET_FILE_MAX + 1] = "";
    const char *password_file = getenv("TESSERA_REDIS_PASSWORD_FILE");
    const char *password_variable = getenv("TESSERA_REDIS_PASSWORD");
    if (password_file && password_file[0]) {
        char err[512];
        if (secret_file_read("TESSERA_REDIS_PASSWORD_FILE", password_file, 1, redis_password, sizeof redis_password,
                             err, sizeof err) != 0) {
            fprintf(stderr, "tessera-admin: %s\n", err);
            redisFree(a.redis);
            return 1;
        }
    } else if (password_variable) {
        snprintf(redis_password, sizeof redis_password, "%s", password_variable);
    }
    if (redis_password[0]) {
        redisReply *auth = redisCommand(a.redis, "AUTH %s", redis_password);
        bool refused = !auth || auth->type == REDIS_REPLY_ERROR;
        if (refused)
            fprintf(stderr, "tessera-admin: Redis at %s:%d refused AUTH: %s\n", host, port,
                    auth ? auth->str : a.redis->errstr);
        if (auth) freeReplyObject(auth);
        sodium_memzero(redis_password, sizeof redis_password);
        if (refused) {
            redisFree(a.redis);
            return 1;
        }
    }
    int rc;
    if (strcmp(command, "status") == 0 && i == argc) {
        rc = admin_cluster_status(a.redis, a.cluster, a.json);
    } else if (strcmp(command, "cells") == 0 && i == argc) {
        rc = admin_cluster_cells(a.redis, a.cluster, a.json);
    } else if (strcmp(command, "entity") == 0 && i + 1 == argc) {
        rc = admin_cluster_entity(a.redis, a.cluster, argv[i], admin_token, a.json);
    } else if (strcmp(command, "kick") == 0 && i + 1 == argc) {
        rc = admin_cluster_kick(a.redis, a.cluster, argv[i], admin_token);
    } else if (strcmp(command, "shutdown") == 0 && i + 1 == argc) {
        rc = admin_cluster_shutdown(a.redis, a.cluster, argv[i], admin_token);
    } else if (strcmp(command, "spaces") == 0) {
        rc = admin_spaces(&a);
    } else if (strcmp(command, "cellapps") == 0) {
        uint64_t ids[ADMIN_MAX_CELLAPPS];
        int count = admin_cellapps(&a, ids, ADMIN_MAX_CELLAPPS);
        for (int k = 0; k < count; k++) printf("%" PRIu64 "\n", ids[k]);
        rc = count < 0;
    } else if (strcmp(command, "show") == 0 && i + 1 == argc) {
        space_layout *layout = admin_read(&a, argv[i]);
        rc = layout ? 0 : 1;
        if (layout && a.json) {
            char *json = space_layout_to_json(layout);
            printf("%s\n", json);
            free(json);
        } else if (layout) {
            space_layout_print(layout, stdout);
        }
        space_layout_free(layout);
    } else if (strcmp(command, "create") == 0 && i < argc) {
        rc = admin_create(&a, argv[i], argc - i - 1, argv + i + 1);
    } else if (strcmp(command, "move-line") == 0 && i < argc) {
        rc = admin_change(&a, argv[i], admin_edit_move, argc - i - 1, argv + i + 1);
    } else if (strcmp(command, "assign") == 0 && i < argc) {
        rc = admin_change(&a, argv[i], admin_edit_assign, argc - i - 1, argv + i + 1);
    } else if (strcmp(command, "split") == 0 && i < argc) {
        rc = admin_change(&a, argv[i], admin_edit_split, argc - i - 1, argv + i + 1);
    } else if (strcmp(command, "retire") == 0 && i < argc) {
        rc = admin_change(&a, argv[i], admin_edit_retire, argc - i - 1, argv + i + 1);
    } else if (strcmp(command, "put") == 0 && i < argc) {
        rc = admin_put(&a, argv[i], argc - i - 1, argv + i + 1);
    } else {
        rc = admin_usage(stderr);
    }
    redisFree(a.redis);
    return rc;
}
