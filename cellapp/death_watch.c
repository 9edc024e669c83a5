/* death_watch.c -- death decisions by the balancer's lease holder
 * (death_watch.h): the rules, one declaration in flight per process, and
 * telling every peer. It owns the declarations in flight. */
#include "death_watch.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "clock.h"
#include "id_map.h"
#include "log.h"
#include "peer_set.h"
#include "redis_keys.h"

struct death_watch {
    death_watch_context context;
    id_map in_flight; /* process id -> (void *)1 while its declaration is in Redis */
    uint64_t declared;
    uint64_t created_us;         /* monotonic */
    uint64_t take_back_tried_us; /* the last lease take-back asked (monotonic; 0: never) */
};

/* How often a cellapp that does not lead may ask to take the lease back
 * from a holder that crashed (a refusal means it lives, or another took
 * it: asking again soon is cheap and rarely needed). */
#define DEATH_WATCH_TAKE_BACK_EVERY_US ((uint64_t)250 * 1000)
/* The holder's registry hash must have gone unrenewed for the time since
 * this cellapp saw its connection close, less this: the hash's TTL is read
 * on Redis's clock, the close on ours. */
#define DEATH_WATCH_TAKE_BACK_SLACK_MS 100

/* A new process's links may still be coming up: it decides nothing until
 * it has run this long (two registry reports and a dial). A process that
 * has run longer decides from the moment it takes the lease: it knows the
 * cluster already, and the dead leader it replaces is waiting. */
#define DEATH_WATCH_SETTLE_US ((uint64_t)2500 * 1000)

death_watch *death_watch_create(const death_watch_context *context) {
    death_watch *watch = xcalloc(1, sizeof *watch);
    watch->context = *context;
    id_map_init(&watch->in_flight);
    watch->created_us = clock_monotonic_us();
    return watch;
}

void death_watch_free(death_watch *watch) {
    if (!watch) return;
    id_map_close(&watch->in_flight);
    free(watch);
}

uint64_t death_watch_declared(const death_watch *watch) { return watch->declared; }

/* Why `id` is dead now, or NULL. */
static const char *death_watch_verdict(const peer_set *peers, uint64_t id, uint64_t now_us) {
    peer_liveness liveness = peer_set_liveness(peers, id);
    bool up = peer_set_is_up(peers, id);
    uint64_t down_since = peer_set_down_since_us(peers, id);
    if (!up && down_since && now_us - down_since >= (uint64_t)PEER_SET_DEATH_RESET_MS * 1000)
        return "its connection closed and it did not come back";
    if (liveness == PEER_LAPSED &&
        (!up || peer_set_silence_us(peers, id, now_us) >= (uint64_t)PEER_SET_DEATH_SILENCE_MS * 1000))
        return "its lease lapsed and it is silent";
    if (liveness == PEER_GONE && !up) return "it left the registry without a connection";
    return NULL;
}

typedef struct death_watch_declaration {
    death_watch *watch;
    char reason[96];
} death_watch_declaration;

static void death_watch_on_declared(uint64_t process_id, bool declared, void *context) {
    death_watch_declaration *declaration = context;
    death_watch *watch = declaration->watch;
    id_map_remove(&watch->in_flight, process_id);
    process_runtime *rt = watch->context.runtime;
    if (declared && !rt->self.stopping) {
        watch->declared++;
        log_warn("process %" PRIu64 " declared dead: %s", process_id, declaration->reason);
        /* Everyone hears it now, not at their next registry scan. */
        Tessera__Cluster__PeerDeath death = TESSERA__CLUSTER__PEER_DEATH__INIT;
        death.process_id = process_id;
        death.reason = declaration->reason;
        Tessera__Cluster__PeerMessage message = TESSERA__CLUSTER__PEER_MESSAGE__INIT;
        message.body_case = TESSERA__CLUSTER__PEER_MESSAGE__BODY_DEATH;
        message.death = &death;
        for (int r = 0; r < 2; r++) {
            size_t cursor = 0;
            uint64_t peer;
            peer_role role = r == 0 ? PEER_ROLE_CELLAPP : PEER_ROLE_BASEAPP;
            while ((peer = peer_set_next_up(rt->peers, role, &cursor)) != 0)
                if (peer != process_id) peer_set_send(rt->peers, peer, &message);
        }
        peer_set_mark_dead(rt->peers, process_id, declaration->reason);
    }
    free(declaration);
}

/* Only the lease holder decides deaths, so the holder's own crash waits
 * for its lease to expire (balance_lease_ms) unless someone takes the
 * lease back. A cellapp that does not lead does so on the evidence that
 * would make the holder declare any other process dead: the holder's
 * connection to it closed and did not come back within
 * PEER_SET_DEATH_RESET_MS (a crash: its kernel reset it), and, checked in
 * Redis, the holder has not renewed its registry entry since. Only while
 * this cellapp's own registry lease is valid (it is not the one cut off).
 * Whoever then takes the lease declares the death by the usual rules. */
static void death_watch_take_back_lease(death_watch *watch, uint64_t now_us) {
    process_runtime *rt = watch->context.runtime;
    balancer *b = watch->context.balancer;
    uint64_t holder = balancer_lease_holder(b);
    if (!holder || holder == rt->self.process_id || peer_set_is_up(rt->peers, holder)) return;
    if (watch->take_back_tried_us && now_us - watch->take_back_tried_us < DEATH_WATCH_TAKE_BACK_EVERY_US) return;
    uint64_t down_since = peer_set_down_since_us(rt->peers, holder);
    if (!down_since || now_us - down_since < (uint64_t)PEER_SET_DEATH_RESET_MS * 1000) return;
    if (!registry_lease_valid(rt->registry, now_us)) return;
    uint64_t down_ms = (now_us - down_since) / 1000;
    uint64_t quiet_ms = down_ms > DEATH_WATCH_TAKE_BACK_SLACK_MS ? down_ms - DEATH_WATCH_TAKE_BACK_SLACK_MS : 0;
    char key[REDIS_KEY_MAX];
    redis_key_process(key, rt->options.settings->cluster_name, holder);
    watch->take_back_tried_us = now_us;
    if (balancer_take_back_lease(b, holder, key, (uint64_t)rt->options.settings->registry_ttl_ms, quiet_ms) == 0)
        log_info("balancer lease holder %" PRIu64 ": connection closed %" PRIu64
                 " ms ago; asking to take the lease back",
                 holder, down_ms);
}

void death_watch_tick(death_watch *watch, uint64_t now_us) {
    process_runtime *rt = watch->context.runtime;
    if (rt->self.stopping || !rt->registry || !rt->peers) return;
    if (now_us - watch->created_us < DEATH_WATCH_SETTLE_US) return;
    uint64_t since = balancer_leading_since_us(watch->context.balancer);
    if (!since) {
        death_watch_take_back_lease(watch, now_us);
        return;
    }
    char lease_value[48];
    if (!balancer_lease_value(watch->context.balancer, now_us, lease_value, sizeof lease_value)) return;
    size_t cursor = 0;
    uint64_t id;
    while ((id = peer_set_next_known(rt->peers, &cursor)) != 0) {
        if (id == rt->self.process_id || id_map_get(&watch->in_flight, id)) continue;
        const char *verdict = death_watch_verdict(rt->peers, id, now_us);
        if (!verdict) continue;
        death_watch_declaration *declaration = xcalloc(1, sizeof *declaration);
        declaration->watch = watch;
        snprintf(declaration->reason, sizeof declaration->reason, "%s", verdict);
        if (registry_declare_dead(rt->registry, id, lease_value, death_watch_on_declared, declaration) != 0) {
            free(declaration);
            return; /* Redis is out of reach: nobody decides */
        }
        id_map_put(&watch->in_flight, id, (void *)1);
    }
}
