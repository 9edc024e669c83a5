/* baseapp_fence.h -- a baseapp that may have been declared dead acts for
 * nobody (self-fencing, as a cellapp does in cellapp/tick.c): while its
 * registry lease lapsed and a cellapp that could declare it dead has not
 * heard it lately (process_runtime_fenced), its bases may be live on
 * another baseapp already, restored from their backups. */
#ifndef TESSERA_BASEAPP_FENCE_H
#define TESSERA_BASEAPP_FENCE_H

#include <stdbool.h>
#include <stdint.h>

#include "baseapp.h"

/* Whether the baseapp is fenced now. On the way in it logs and counts; on
 * the way out (the lease is back, nobody declared it dead) it logs and
 * lets the held client connections go on. */
bool baseapp_fence_check(baseapp *app, uint64_t now_us);

/* The client connections' gate (client_links_context.may_dispatch): a
 * client's frames are held, unread, while the baseapp is fenced. */
bool baseapp_fence_may_dispatch(void *owner);

#endif
