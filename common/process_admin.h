/* process_admin.h -- what every process serves on its admin listener
 * (admin_http.h), and how the role adds its own.
 *
 *   GET /healthz      200 "ok" while the loop runs and the role's health
 *                     hook agrees (a cellapp: its tick is not stuck), else 503
 *   GET /readyz       200 "ready" when registered, connected to Redis and the
 *                     role's readiness hook agrees (peers up, not draining),
 *                     else 503 with the reason
 *   GET /metrics      Prometheus text 0.0.4: the role's metrics, then the
 *                     Redis round-trip histogram and the listener's counters
 *   GET /map          the live map page (web/map.html, compiled in)
 *   GET /api/cluster  the whole cluster as JSON, read from Redis in one
 *                     script: {"cluster", "processes": [registry hashes, with
 *                     "id"], "spaces": {name: layout}, "loads": {cellapp id:
 *                     load report}, "leader": "<id>:<fence>" or null}
 *
 * /healthz, /readyz and /metrics are open to whatever reaches the port;
 * everything else wants the admin token (admin_token_file) and passes the
 * Host and Origin checks (admin_allowed_hosts, admin_allowed_origins): see
 * admin_http.h. admin_token_file configured but unreadable, empty, too
 * short or readable by every user: process_admin_start fails with the
 * reason (the process does not start). Not configured: a warning at
 * start-up, and those routes answer 403.
 *
 * The port it listens on is published in the registry as admin_port.
 * admin_port -1 in the config: no listener (process_admin_start returns
 * NULL and says nothing).
 */
#ifndef TESSERA_PROCESS_ADMIN_H
#define TESSERA_PROCESS_ADMIN_H

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#include "admin_http.h"
#include "metrics.h"
#include "process.h"
#include "redis_client.h"
#include "registry.h"

typedef struct process_admin_hooks {
    /* false with a reason (written to why) when not ready / not healthy;
     * NULL hooks count as true. */
    bool (*ready)(void *user_data, char *why, size_t size);
    bool (*healthy)(void *user_data, char *why, size_t size);
    /* Adds the role's families to m. */
    void (*metrics)(void *user_data, metrics_text *m);
    void *user_data;
} process_admin_hooks;

typedef struct process_admin process_admin;

/* Starts the listener at settings->admin_host:admin_port. Returns NULL with
 * err empty when admin_port is -1, NULL with err when it cannot listen. */
process_admin *process_admin_start(uv_loop_t *loop, const process_settings *settings, redis_client *redis,
                                   const process_admin_hooks *hooks, char *err, size_t errlen);
/* For the role's own routes. */
admin_http *process_admin_http(process_admin *admin);
int process_admin_port(const process_admin *admin);
/* Publishes admin_port (call once registered, and again is harmless). */
void process_admin_publish(process_admin *admin, registry *reg);
void process_admin_free(process_admin *admin);

/* The embedded page (generated from web/map.html). */
extern const char admin_map_page[];
extern const size_t admin_map_page_length;

#endif
