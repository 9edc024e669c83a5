/* baseapp_admin.h -- what a baseapp adds to its admin listener
 * (process_admin.h): its metrics and readiness, one base's state, and the
 * operator's actions (kick, save, give-client, shutdown), documented at the
 * top of baseapp_admin.c. */
#ifndef TESSERA_BASEAPP_ADMIN_H
#define TESSERA_BASEAPP_ADMIN_H

#include <stddef.h>

#include "baseapp.h"
#include "registry.h"

/* NULL with err empty when admin_port is -1, NULL with err when the
 * listener cannot start. */
baseapp_admin *baseapp_admin_start(baseapp *app, char *err, size_t errlen);
/* Publishes admin_port in the registry. */
void baseapp_admin_publish(baseapp_admin *admin, registry *reg);
void baseapp_admin_stop(baseapp_admin *admin);

#endif
