/* admin_guard.h -- who may use an admin listener's protected routes: the
 * operator's bearer token, and the Host and Origin a request names.
 *
 * Pure checks over strings (admin_http.c feeds them the headers); nothing
 * here touches a socket. The token itself is kept only as its BLAKE2b hash,
 * and a presented token is hashed and compared in constant time
 * (sodium_memcmp), so neither its bytes nor its length leak by timing.
 *
 * Host (against DNS rebinding): "name[:port]" or "[v6]:port". It is
 * accepted when the name is the listener's configured address or the
 * address the client connected to (what a listener on 0.0.0.0 or a pod IP
 * is reached by) and its port is the listener's, or when it matches an
 * entry of the allowed-hosts list: "name" (any port) or "name:port".
 *
 * Origin (against cross-site reads and writes): absent is fine (not a
 * browser, or a same-origin GET). Present, it must be the listener's own
 * origin ("http://" and a Host the rule above accepts) or match an entry of
 * the allowed-origins list, compared without regard to case: exact
 * ("http://10.0.0.5:9100"), with any port ("http://10.0.0.5:*"), or any
 * IPv4 address of a network ("http://10.244.0.0/16:20080" or ":*": the
 * other pods of a pod network serving the live map). The opaque origin
 * "null" is never allowed.
 *
 * Lists are comma-separated; spaces around entries are ignored.
 */
#ifndef TESSERA_ADMIN_GUARD_H
#define TESSERA_ADMIN_GUARD_H

#include <stdbool.h>
#include <stddef.h>

#include <sodium.h>

#include "secret_file.h"

/* A token shorter than this is refused at start-up: it could be guessed. */
#define ADMIN_GUARD_TOKEN_MIN 16
/* The longest token read from the file (longer: refused). */
#define ADMIN_GUARD_TOKEN_MAX SECRET_FILE_MAX

typedef struct admin_guard {
    bool has_token;
    unsigned char token_hash[crypto_generichash_BYTES];
    char listen_host[64];
    int port;
    char allowed_hosts[512];
    char allowed_origins[2048];
} admin_guard;

/* Fills guard: `token` may be NULL or empty (no token: admin_guard_token_ok
 * is then always false); the lists may be NULL. Copies what it keeps and
 * does not keep `token`. Returns 0, or -1 with err when a list does not fit
 * or libsodium cannot start. */
int admin_guard_init(admin_guard *guard, const char *token, const char *listen_host, int port,
                     const char *allowed_hosts, const char *allowed_origins, char *err, size_t errlen);

/* Reads the token from `path` into out (at most ADMIN_GUARD_TOKEN_MAX
 * bytes and its NUL) with secret_file_read: the file must be readable by
 * its owner and group only, and the token at least ADMIN_GUARD_TOKEN_MIN
 * characters of printable ASCII without spaces (it travels in a header and
 * a query string). Returns 0, or -1 with the reason in err. */
int admin_guard_read_token_file(const char *path, char *out, size_t size, char *err, size_t errlen);

/* Whether a request carries the token: `authorization` (the header's
 * value, or NULL) is "Bearer <token>"; `query_token` (NULL when the route
 * does not take the token in its query: POST) is the percent-decoded value
 * of ?token=. Constant time in the token's bytes. */
bool admin_guard_token_ok(const admin_guard *guard, const char *authorization, const char *query_token);

/* The Host rule above; `local_ip` is the address the client connected to
 * (may be NULL). NULL or empty `host`: false. */
bool admin_guard_host_ok(const admin_guard *guard, const char *host, const char *local_ip);

/* The Origin rule above. */
bool admin_guard_origin_ok(const admin_guard *guard, const char *origin, const char *local_ip);

#endif
