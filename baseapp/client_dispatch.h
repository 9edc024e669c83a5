/* client_dispatch.h -- what clients say, handed to the module that owns it:
 * the handlers a client link calls (client_link.h) and the callbacks of the
 * login modules, filled in for the baseapp's modules. Like peer dispatch it
 * takes the whole process: it only routes. */
#ifndef TESSERA_CLIENT_DISPATCH_H
#define TESSERA_CLIENT_DISPATCH_H

#include "baseapp.h"

/* The client links' handlers, for `app`. */
client_link_handlers client_dispatch_handlers(baseapp *app);
/* login.c's: the password checked out. */
void client_dispatch_verified(void *owner, client_link *link);
/* proxy.c's: a draining base's link goes to another baseapp. */
int client_dispatch_hand_off(void *owner, client_link *link, const char *reason);

#endif
