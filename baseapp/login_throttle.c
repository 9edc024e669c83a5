/* login_throttle.c -- buckets of failed logins per account and per address
 * (login_throttle.h). */
#include "login_throttle.h"

#include <stdlib.h>
#include <string.h>

#include "text_key.h"
#include "log.h"

typedef struct login_throttle_bucket {
    double left;    /* failures it may still have */
    uint64_t at_us; /* when `left` was last brought up to date */
} login_throttle_bucket;

uint64_t login_throttle_address_key(const char *address) {
    const char *colon = strrchr(address, ':');
    return text_key(address, colon ? (size_t)(colon - address) : strlen(address));
}

void login_throttle_init(login_throttle *t, double account_per_minute, double address_per_minute) {
    id_map_init(&t->accounts);
    id_map_init(&t->addresses);
    t->account_per_minute = account_per_minute;
    t->address_per_minute = address_per_minute;
}

static void login_throttle_free_all(id_map *map) {
    size_t cursor = 0;
    uint64_t key;
    void *value;
    while (id_map_next(map, &cursor, &key, &value)) free(value);
    id_map_close(map);
}

void login_throttle_close(login_throttle *t) {
    login_throttle_free_all(&t->accounts);
    login_throttle_free_all(&t->addresses);
}

/* The bucket's count now (refilled for the time passed), or per_minute
 * when it has none. */
static double login_throttle_left(const login_throttle_bucket *bucket, double per_minute, uint64_t now_us) {
    if (!bucket) return per_minute;
    double left = bucket->left + (double)(now_us - bucket->at_us) / 60e6 * per_minute;
    return left > per_minute ? per_minute : left;
}

/* Milliseconds until the bucket holds a whole failure again (0: it does). */
static uint64_t login_throttle_wait_ms(const id_map *map, uint64_t key, double per_minute, uint64_t now_us) {
    if (per_minute <= 0) return 0;
    double left = login_throttle_left(id_map_get(map, key), per_minute, now_us);
    if (left >= 1.0) return 0;
    return (uint64_t)((1.0 - left) / per_minute * 60e3) + 1;
}

uint64_t login_throttle_check(login_throttle *t, const char *account, const char *address, uint64_t now_us) {
    uint64_t a = login_throttle_wait_ms(&t->accounts, text_key_string(account), t->account_per_minute, now_us);
    uint64_t b =
        login_throttle_wait_ms(&t->addresses, login_throttle_address_key(address), t->address_per_minute, now_us);
    return a > b ? a : b;
}

/* Adds `delta` attempts to the bucket (-1 takes one, +1 gives one back),
 * never above a full bucket. */
static void login_throttle_add(id_map *map, uint64_t key, double per_minute, uint64_t now_us, double delta) {
    if (per_minute <= 0) return;
    login_throttle_bucket *bucket = id_map_get(map, key);
    double left = login_throttle_left(bucket, per_minute, now_us) + delta;
    if (!bucket) {
        if (left >= per_minute) return; /* full: nothing to remember */
        bucket = xmalloc(sizeof *bucket);
        id_map_put(map, key, bucket);
    }
    bucket->left = left > per_minute ? per_minute : left;
    bucket->at_us = now_us;
}

void login_throttle_failed(login_throttle *t, const char *account, const char *address, uint64_t now_us) {
    if (account) login_throttle_add(&t->accounts, text_key_string(account), t->account_per_minute, now_us, -1.0);
    login_throttle_add(&t->addresses, login_throttle_address_key(address), t->address_per_minute, now_us, -1.0);
}

uint64_t login_throttle_admit(login_throttle *t, const char *account, const char *address, uint64_t now_us) {
    uint64_t wait_ms = login_throttle_check(t, account, address, now_us);
    if (wait_ms == 0) login_throttle_failed(t, account, address, now_us);
    return wait_ms;
}

void login_throttle_refund(login_throttle *t, const char *account, const char *address, uint64_t now_us) {
    login_throttle_add(&t->accounts, text_key_string(account), t->account_per_minute, now_us, 1.0);
    login_throttle_add(&t->addresses, login_throttle_address_key(address), t->address_per_minute, now_us, 1.0);
}

static void login_throttle_sweep_map(id_map *map, double per_minute, uint64_t now_us) {
    size_t cursor = 0;
    uint64_t key;
    void *value;
    /* Removing while iterating is not safe in id_map: collect first. */
    uint64_t full[64];
    size_t count = 0;
    while (count < 64 && id_map_next(map, &cursor, &key, &value))
        if (login_throttle_left(value, per_minute, now_us) >= per_minute) full[count++] = key;
    for (size_t i = 0; i < count; i++) free(id_map_remove(map, full[i]));
}

void login_throttle_sweep(login_throttle *t, uint64_t now_us) {
    login_throttle_sweep_map(&t->accounts, t->account_per_minute, now_us);
    login_throttle_sweep_map(&t->addresses, t->address_per_minute, now_us);
}
