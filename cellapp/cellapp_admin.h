/* cellapp_admin.h -- what a cellapp adds to its admin listener
 * (process_admin.h has the common routes): health and readiness, the live
 * map's entity snapshots, one entity's state, an operator's drain, and the
 * cellapp's /metrics through its owner (cellapp_admin.c).
 */
#ifndef TESSERA_CELLAPP_ADMIN_H
#define TESSERA_CELLAPP_ADMIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "cell.h"
#include "metrics.h"
#include "process.h"
#include "process_self.h"
#include "redis_client.h"
#include "registry.h"
#include "spaces.h"

typedef struct cellapp_admin cellapp_admin;

/* What the admin part borrows (each outlives it), and what it asks of its
 * owner (the process). */
typedef struct cellapp_admin_context {
    uv_loop_t *loop;
    const process_settings *process; /* admin_host, admin_port */
    redis_client *redis;
    spaces *spaces;
    const cell_shared *shared; /* the tick number */
    double view_radius;        /* the live map draws views */
    const process_self *self;
    const bool *draining;
    const uint64_t *tick_last_us; /* monotonic time of the last tick: a stuck loop is unhealthy */
    void *owner;
    void (*drain)(void *owner);                       /* POST /admin/shutdown */
    void (*metrics)(void *owner, metrics_text *text); /* the process's families */
} cellapp_admin_context;

/* Starts the listener. NULL with err empty when admin_port is -1, NULL with
 * err when it cannot listen. */
cellapp_admin *cellapp_admin_start(const cellapp_admin_context *context, char *err, size_t errlen);
/* Publishes admin_port once registered. */
void cellapp_admin_publish(cellapp_admin *admin, registry *reg);
/* Closes the listener; the admin part is freed once libuv releases it. */
void cellapp_admin_stop(cellapp_admin *admin);

#endif
