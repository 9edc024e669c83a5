/* admin_cluster.h -- tessera-admin's operations commands: what runs, the
 * cells with their loads, one entity, kicking an account, stopping a
 * process. They read Redis (the registry, layouts, load reports, the cell
 * directory) and the processes' admin listeners (process_admin.h), found
 * at each process's registered host and admin_port. Each prints a table,
 * or JSON with `json`, and returns the exit status. `token` (NULL: none)
 * is the admin token the protected routes want (entity, kick, shutdown). */
#ifndef TESSERA_ADMIN_CLUSTER_H
#define TESSERA_ADMIN_CLUSTER_H

#include <stdbool.h>

#include <hiredis/hiredis.h>

int admin_cluster_status(redisContext *redis, const char *cluster, bool json);
int admin_cluster_cells(redisContext *redis, const char *cluster, bool json);
int admin_cluster_entity(redisContext *redis, const char *cluster, const char *id, const char *token, bool json);
int admin_cluster_kick(redisContext *redis, const char *cluster, const char *account, const char *token);
int admin_cluster_shutdown(redisContext *redis, const char *cluster, const char *process_id, const char *token);

#endif
