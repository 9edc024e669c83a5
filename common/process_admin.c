/* process_admin.c -- the routes every process serves on its admin listener
 * (process_admin.h): health, readiness, metrics, the map page and the
 * cluster's JSON, read from Redis by one Lua script. */
#include "process_admin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "admin_guard.h"
#include "log.h"

struct process_admin {
    admin_http *http;
    const process_settings *settings;
    redis_client *redis;
    process_admin_hooks hooks;
    char prefix[96];
};

/* ARGV[1] the key prefix, ARGV[2] the cluster's name. Reads the registry,
 * the layouts, the load reports and the lease (keys in redis_keys.h) and
 * returns them as one JSON document. A stored document that does not parse
 * is left out. */
static const char PROCESS_ADMIN_CLUSTER_SCRIPT[] =
    "local prefix = ARGV[1]\n"
    "local out = {cluster = ARGV[2], processes = {}, spaces = {}, loads = {}}\n"
    "for _, id in ipairs(redis.call('SMEMBERS', prefix .. 'processes')) do\n"
    "  local flat = redis.call('HGETALL', prefix .. 'process:' .. id)\n"
    "  if #flat > 0 then\n"
    "    local p = {id = id}\n"
    "    for i = 1, #flat, 2 do p[flat[i]] = flat[i + 1] end\n"
    "    table.insert(out.processes, p)\n"
    "  end\n"
    "end\n"
    "local spaces = redis.call('HGETALL', prefix .. 'spaces')\n"
    "for i = 1, #spaces, 2 do\n"
    "  local text = redis.call('GET', prefix .. 'space:' .. spaces[i])\n"
    "  if text then\n"
    "    local ok, layout = pcall(cjson.decode, text)\n"
    "    if ok then out.spaces[spaces[i]] = layout end\n"
    "  end\n"
    "end\n"
    "local loads = redis.call('HGETALL', prefix .. 'cell_loads')\n"
    "for i = 1, #loads, 2 do\n"
    "  local ok, report = pcall(cjson.decode, loads[i + 1])\n"
    "  if ok then out.loads[loads[i]] = report end\n"
    "end\n"
    "out.leader = redis.call('GET', prefix .. 'balancer_lease') or cjson.null\n"
    "local text = cjson.encode(out)\n"
    /* cjson writes an empty table as {}; processes is a list. */
    "if #out.processes == 0 then text = string.gsub(text, '\"processes\":{}', '\"processes\":[]') end\n"
    "return text\n";

static void process_admin_on_healthz(admin_http_request *request, void *user_data) {
    process_admin *admin = user_data;
    char why[256] = "";
    if (admin->hooks.healthy && !admin->hooks.healthy(admin->hooks.user_data, why, sizeof why)) {
        char text[300];
        snprintf(text, sizeof text, "unhealthy: %s\n", why);
        admin_http_reply_text(request, 503, text);
        return;
    }
    admin_http_reply_text(request, 200, "ok\n");
}

static void process_admin_on_readyz(admin_http_request *request, void *user_data) {
    process_admin *admin = user_data;
    char why[256] = "";
    bool ready = true;
    if (!redis_client_is_connected(admin->redis)) {
        snprintf(why, sizeof why, "Redis %s is not connected", redis_client_address(admin->redis));
        ready = false;
    } else if (admin->hooks.ready && !admin->hooks.ready(admin->hooks.user_data, why, sizeof why)) {
        ready = false;
    }
    if (!ready) {
        char text[300];
        snprintf(text, sizeof text, "not ready: %s\n", why);
        admin_http_reply_text(request, 503, text);
        return;
    }
    admin_http_reply_text(request, 200, "ready\n");
}

/* Redis round trips: 0.1 ms .. 1 s. */
static const double process_admin_redis_edges[] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                                   0.01,   0.025,   0.05,   0.1,   0.25,   1.0};

static void process_admin_on_metrics(admin_http_request *request, void *user_data) {
    process_admin *admin = user_data;
    metrics_text m;
    metrics_text_init(&m, "tessera_");
    if (admin->hooks.metrics) admin->hooks.metrics(admin->hooks.user_data, &m);
    metrics_family(&m, "redis_connected", "gauge", "1 while the connection to Redis is up");
    metrics_sample(&m, "redis_connected", NULL, redis_client_is_connected(admin->redis));
    metrics_family(&m, "redis_command_seconds", "histogram", "round trip of each Redis command answered");
    metrics_histogram(&m, "redis_command_seconds", NULL, redis_client_latency(admin->redis), process_admin_redis_edges,
                      sizeof process_admin_redis_edges / sizeof process_admin_redis_edges[0]);
    admin_http_stats stats = admin_http_get_stats(admin->http);
    metrics_family(&m, "admin_requests_total", "counter", "requests to this admin listener");
    metrics_sample(&m, "admin_requests_total", NULL, (double)stats.requests);
    metrics_family(&m, "admin_bad_requests_total", "counter", "malformed or oversized admin requests");
    metrics_sample(&m, "admin_bad_requests_total", NULL, (double)stats.bad_requests);
    metrics_family(&m, "admin_refused_requests_total", "counter",
                   "admin requests refused: 403 (Host, Origin, no token configured) or 401 (no or wrong token)");
    metrics_sample(&m, "admin_refused_requests_total", "reason=\"forbidden\"", (double)stats.refused_requests);
    metrics_sample(&m, "admin_refused_requests_total", "reason=\"unauthorized\"", (double)stats.unauthorized_requests);
    metrics_family(&m, "admin_connections_closed_total", "counter",
                   "admin connections closed by the budget: evicted while still sending, refused on accept, "
                   "event streams refused (503)");
    metrics_sample(&m, "admin_connections_closed_total", "reason=\"evicted\"", (double)stats.evicted_connections);
    metrics_sample(&m, "admin_connections_closed_total", "reason=\"refused\"", (double)stats.refused_connections);
    metrics_sample(&m, "admin_connections_closed_total", "reason=\"stream_refused\"", (double)stats.refused_streams);
    size_t length;
    char *text = metrics_text_take(&m, &length);
    metrics_text_close(&m);
    admin_http_reply(request, 200, "text/plain; version=0.0.4; charset=utf-8", text, length);
    free(text);
}

static void process_admin_on_map(admin_http_request *request, void *user_data) {
    (void)user_data;
    admin_http_reply(request, 200, "text/html; charset=utf-8", admin_map_page, admin_map_page_length);
}

static void process_admin_on_cluster_reply(redis_client *redis, redisReply *reply, void *user_data) {
    admin_http_request *request = user_data;
    (void)redis;
    if (!reply || reply->type != REDIS_REPLY_STRING) {
        char text[256];
        snprintf(text, sizeof text, "Redis did not answer: %s\n",
                 reply && reply->type == REDIS_REPLY_ERROR ? reply->str : "no reply");
        admin_http_reply_text(request, 503, text);
        return;
    }
    admin_http_reply(request, 200, "application/json", reply->str, reply->len);
}

static void process_admin_on_cluster(admin_http_request *request, void *user_data) {
    process_admin *admin = user_data;
    const char *argv[] = {"EVAL", PROCESS_ADMIN_CLUSTER_SCRIPT, "0", admin->prefix, admin->settings->cluster_name};
    size_t lengths[5];
    for (int i = 0; i < 5; i++) lengths[i] = strlen(argv[i]);
    if (redis_client_command_argv(admin->redis, process_admin_on_cluster_reply, request, 5, argv, lengths) != 0)
        admin_http_reply_text(request, 503, "Redis is not connected\n");
}

process_admin *process_admin_start(uv_loop_t *loop, const process_settings *settings, redis_client *redis,
                                   const process_admin_hooks *hooks, char *err, size_t errlen) {
    if (errlen) err[0] = '\0';
    if (settings->admin_port < 0) return NULL;
    char token[ADMIN_GUARD_TOKEN_MAX + 1] = "";
    if (settings->admin_token_file[0] &&
        admin_guard_read_token_file(settings->admin_token_file, token, sizeof token, err, errlen) != 0)
        return NULL;
    admin_http_options options = {
        .token = token,
        .allowed_hosts = settings->admin_allowed_hosts,
        .allowed_origins = settings->admin_allowed_origins,
        .stream_lifetime_ms = (uint64_t)settings->admin_stream_lifetime_ms,
    };
    admin_http *http = admin_http_create(loop, settings->admin_host, (int)settings->admin_port, &options, err, errlen);
    sodium_memzero(token, sizeof token);
    if (!http) return NULL;
    if (!settings->admin_token_file[0])
        log_warn("admin: admin_token_file is not set: the admin listener serves /healthz, /readyz and /metrics, "
                 "and answers 403 to everything else (the map, /api/*, /admin/*)");
    process_admin *admin = xcalloc(1, sizeof *admin);
    admin->http = http;
    admin->settings = settings;
    admin->redis = redis;
    if (hooks) admin->hooks = *hooks;
    snprintf(admin->prefix, sizeof admin->prefix, "tessera:%s:", settings->cluster_name);
    admin_http_route_probe(http, "/healthz", process_admin_on_healthz, admin);
    admin_http_route_probe(http, "/readyz", process_admin_on_readyz, admin);
    admin_http_route_probe(http, "/metrics", process_admin_on_metrics, admin);
    admin_http_route(http, "GET", "/map", process_admin_on_map, admin);
    admin_http_route(http, "GET", "/", process_admin_on_map, admin);
    admin_http_route(http, "GET", "/api/cluster", process_admin_on_cluster, admin);
    log_info("admin listener on http://%s:%d/ (metrics, health, the live map at /map)", settings->admin_host,
             admin_http_port(http));
    return admin;
}

admin_http *process_admin_http(process_admin *admin) { return admin ? admin->http : NULL; }
int process_admin_port(const process_admin *admin) { return admin ? admin_http_port(admin->http) : -1; }

void process_admin_publish(process_admin *admin, registry *reg) {
    if (admin && reg) registry_set_stat(reg, "admin_port", admin_http_port(admin->http));
}

void process_admin_free(process_admin *admin) {
    if (!admin) return;
    admin_http_free(admin->http);
    free(admin);
}
