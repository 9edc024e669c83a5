/* session_directory.h -- which baseapp holds an account's client now, in
 * Redis (P session:<account>, redis_keys.h): a login elsewhere reads it to
 * send the client where the account's entity lives. This baseapp claims an
 * account when one of its proxies takes the account's client, and releases
 * the claim only while it still names this baseapp. */
#ifndef TESSERA_SESSION_DIRECTORY_H
#define TESSERA_SESSION_DIRECTORY_H

#include <stdint.h>

#include "process_self.h"
#include "redis_client.h"

typedef struct session_directory {
    redis_client *redis;
    const char *cluster_name;
    const process_self *self;
} session_directory;

/* The account's client is held here now. */
void session_directory_claim(const session_directory *directory, const char *account);
/* ... no longer (unless another baseapp claimed it meanwhile). */
void session_directory_release(const session_directory *directory, const char *account);

#endif
