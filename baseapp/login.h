/* login.h -- checking a client's account and password.
 *
 * Accounts live in Redis as hashes, tessera:<cluster>:account:<name>, with
 * the field password_hash holding an argon2id string from libsodium (the
 * string carries its own salt and cost). Hashing and verifying are
 * deliberately slow, so they run on libuv's thread pool, through the
 * bounded queue of login_queue.h, and the loop keeps serving everyone else
 * meanwhile. With auto_create_accounts, an unknown account is created with
 * the password given.
 */
#ifndef TESSERA_LOGIN_H
#define TESSERA_LOGIN_H

#include <uv.h>

#include "baseapp_settings.h"
#include "client_link.h"
#include "login_queue.h"
#include "redis_client.h"

typedef struct logins logins;

typedef struct logins_context {
    uv_loop_t *loop;
    const baseapp_settings *settings;
    redis_client *redis;
    client_links *links;
    /* The password checked out (or the account was created): the link is
     * still AUTHENTICATING. */
    void (*verified)(void *owner, client_link *link);
    void *owner;
} logins_context;

logins *logins_create(const logins_context *context);
/* Every login in flight must be done first (the loop drained). */
void logins_free(logins *set);
const login_queue_counters *logins_queue_figures(const logins *set);

/* Checks the link's account (link->account) against `password`. Ends in
 * the verified callback or client_link_fail, unless the client left
 * meanwhile. */
void login_start(logins *set, client_link *link, const char *password);

#endif
