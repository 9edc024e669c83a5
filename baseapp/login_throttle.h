/* login_throttle.h -- failed logins are throttled per account and per
 * client address, so a password cannot be guessed at the speed of the
 * hashing pool.
 *
 * Each account and each address has a bucket of failures it may still
 * have: `per_minute` of them, refilled evenly over a minute. A password
 * login takes one from both when it arrives (login_throttle_admit), before
 * its hash is even queued, so a burst of guesses sent at once is counted
 * at once; a login whose account or address has none left is refused,
 * before any hashing, and told when to try again. A login that succeeds
 * gives its attempt back (login_throttle_refund): successful logins cost
 * nothing, so a crowd behind one address logging in is never slowed. A
 * refused token costs its address one (it costs no hash, and names an
 * account anyone may name). Buckets that have refilled are forgotten
 * (login_throttle_sweep).
 */
#ifndef TESSERA_LOGIN_THROTTLE_H
#define TESSERA_LOGIN_THROTTLE_H

#include <stdint.h>

#include "id_map.h"

typedef struct login_throttle {
    id_map accounts;                               /* account key -> login_throttle_bucket */
    id_map addresses;                              /* address key -> login_throttle_bucket */
    double account_per_minute, address_per_minute; /* 0: that side is not throttled */
} login_throttle;

void login_throttle_init(login_throttle *t, double account_per_minute, double address_per_minute);
void login_throttle_close(login_throttle *t);

/* 0 when an attempt may go, else the milliseconds until one may. `address`
 * is the client's IP (a port after the last ':' is ignored). */
uint64_t login_throttle_check(login_throttle *t, const char *account, const char *address, uint64_t now_us);
/* Counts a failed attempt against both (against the address alone when
 * account is NULL: a refused token, which costs no hash and names an
 * account anyone may name). */
void login_throttle_failed(login_throttle *t, const char *account, const char *address, uint64_t now_us);
/* A password login arrives: 0 when it may go (one attempt is taken from
 * both buckets now), else the milliseconds until one may (nothing taken). */
uint64_t login_throttle_admit(login_throttle *t, const char *account, const char *address, uint64_t now_us);
/* The login succeeded (or was never checked): its attempt comes back. */
void login_throttle_refund(login_throttle *t, const char *account, const char *address, uint64_t now_us);
/* The key an address is counted by: its IP (a port after the last ':' is
 * ignored). */
uint64_t login_throttle_address_key(const char *address);
/* Forgets buckets that are full again. */
void login_throttle_sweep(login_throttle *t, uint64_t now_us);

#endif
