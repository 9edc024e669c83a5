/* base_singleton.c -- the cluster singletons this baseapp takes part in
 * (base_singleton.h): per name, its class, its waiters, the holder they
 * were told, the doubt being waited out, and the Redis check and claim.
 * Making the base is the owner's (base_game.c); the names' storage is
 * base_mailbox.c's. */
#include "base_singleton.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "redis_keys.h"

typedef struct base_singleton_entry {
    char name[BASE_SINGLETON_NAME_MAX + 1];
    const entity_def_class *cls;
    base_singleton_waiter *waiters;
    uint64_t *told; /* by waiter: the holder it was told (0: none yet) */
    size_t waiter_count;
    uint64_t holder;           /* the live holder last seen (0: none) */
    uint64_t doubted;          /* the holder in doubt (0: none) */
    uint64_t doubted_since_us; /* monotonic */
    bool asking;               /* a check or a claim is in flight */
} base_singleton_entry;

struct base_singletons {
    base_singletons_context context;
    base_singleton_entry *entries; /* never removed: requests name them by index */
    size_t count;
};

/* One check or claim in flight. */
typedef struct base_singleton_request {
    base_singletons *singletons;
    size_t index;
    uint64_t expected; /* a claim: the holder it replaces (0: none) */
    uint64_t claimed;  /* a claim: the entity id claimed for */
    uint64_t now_us;   /* a check: when it was asked */
} base_singleton_request;

base_singletons *base_singletons_create(const base_singletons_context *context) {
    base_singletons *singletons = xcalloc(1, sizeof *singletons);
    singletons->context = *context;
    return singletons;
}

void base_singletons_free(base_singletons *singletons) {
    if (!singletons) return;
    for (size_t i = 0; i < singletons->count; i++) {
        free(singletons->entries[i].waiters);
        free(singletons->entries[i].told);
    }
    free(singletons->entries);
    free(singletons);
}

size_t base_singletons_count(const base_singletons *singletons) { return singletons->count; }

static base_singleton_entry *base_singletons_find(base_singletons *singletons, const char *name) {
    for (size_t i = 0; i < singletons->count; i++)
        if (strcmp(singletons->entries[i].name, name) == 0) return &singletons->entries[i];
    return NULL;
}

int base_singletons_join(base_singletons *singletons, const char *name, const entity_def_class *cls,
                         const base_singleton_waiter *waiter) {
    if (!name || !name[0] || strlen(name) > BASE_SINGLETON_NAME_MAX || !cls) {
        log_warn("game: singleton '%s': a name of 1 to %d bytes and a defined class are needed", name ? name : "",
                 BASE_SINGLETON_NAME_MAX);
        return -1;
    }
    base_singleton_entry *entry = base_singletons_find(singletons, name);
    if (entry && entry->cls != cls) {
        log_warn("game: singleton '%s' is of class %s here already, not %s", name, entry->cls->name, cls->name);
        return -1;
    }
    if (!entry) {
        singletons->entries = xrealloc(singletons->entries, (singletons->count + 1) * sizeof *singletons->entries);
        entry = &singletons->entries[singletons->count++];
        memset(entry, 0, sizeof *entry);
        snprintf(entry->name, sizeof entry->name, "%s", name);
        entry->cls = cls;
    }
    entry->waiters = xrealloc(entry->waiters, (entry->waiter_count + 1) * sizeof *entry->waiters);
    entry->told = xrealloc(entry->told, (entry->waiter_count + 1) * sizeof *entry->told);
    entry->waiters[entry->waiter_count] = *waiter;
    entry->told[entry->waiter_count] = 0;
    entry->waiter_count++;
    return 0;
}

static bool base_singletons_may_make(const base_singletons *singletons) {
    return !singletons->context.self->stopping && !*singletons->context.draining;
}

/* The holder is live: strays here go, and the waiters not told yet learn
 * it. Game code runs in both (a destroyed hook, a waiter's callback) and
 * may join more names, moving the entries: each is found again by index. */
static void base_singletons_on_live(base_singletons *singletons, size_t index, uint64_t holder) {
    const base_singletons_context *c = &singletons->context;
    base_singleton_entry *entry = &singletons->entries[index];
    const entity_def_class *cls = entry->cls;
    char name[BASE_SINGLETON_NAME_MAX + 1];
    snprintf(name, sizeof name, "%s", entry->name);
    entry->doubted = 0;
    if (entry->holder != holder) log_info("singleton '%s' (%s) is entity %" PRIu64 "", name, cls->name, holder);
    entry->holder = holder;
    uint64_t ids[16];
    size_t count = base_entities_of_class(c->bases, cls, ids, 16);
    for (size_t i = 0; i < count && i < 16; i++) {
        base_entity *base = base_entities_find(c->bases, ids[i]);
        if (!base_entity_is_live(base) || base->entity_id == holder || strcmp(base->name, name) != 0) continue;
        log_warn("singleton '%s': entity %" PRIu64 " here does not hold the name (entity %" PRIu64 " does): destroyed",
                 name, base->entity_id, holder);
        base_life_destroy(c->life, base, false, "another base holds its singleton's name");
    }
    for (size_t w = 0; w < singletons->entries[index].waiter_count; w++) {
        entry = &singletons->entries[index];
        if (entry->told[w] == holder) continue;
        entry->told[w] = holder;
        base_singleton_waiter waiter = entry->waiters[w];
        c->notify(c->owner, &waiter, name, holder);
    }
}

/* ---- the claim ------------------------------------------------------------------- */

/* The name for ARGV[3] if it is still ARGV[2]'s ("0": nobody's); answers
 * its holder then. */
static const char BASE_SINGLETON_CLAIM[] = "local holder = redis.call('HGET', KEYS[1], ARGV[1]) or '0' "
                                           "if holder ~= ARGV[2] then return holder end "
                                           "redis.call('HSET', KEYS[1], ARGV[1], ARGV[3]) "
                                           "return ARGV[3]";

static uint64_t base_singleton_reply_id(const redisReply *reply) {
    if (!reply) return 0;
    if (reply->type == REDIS_REPLY_STRING) return strtoull(reply->str, NULL, 10);
    if (reply->type == REDIS_REPLY_INTEGER && reply->integer > 0) return (uint64_t)reply->integer;
    return 0;
}

static void base_singletons_on_claimed(redis_client *redis, redisReply *reply, void *user_data) {
    base_singleton_request *request = user_data;
    base_singletons *singletons = request->singletons;
    const base_singletons_context *c = &singletons->context;
    (void)redis;
    base_singleton_entry *entry = &singletons->entries[request->index];
    entry->asking = false;
    bool won = reply && reply->type == REDIS_REPLY_STRING && base_singleton_reply_id(reply) == request->claimed;
    if (!won) {
        free(request);
        return;
    }
    char name[BASE_SINGLETON_NAME_MAX + 1]; /* a copy: game code runs in make */
    snprintf(name, sizeof name, "%s", entry->name);
    bool made = base_singletons_may_make(singletons) && c->make(c->owner, entry->cls, name, request->claimed) == 0;
    /* Its created hook may have run and joined more names: entries move. */
    entry = &singletons->entries[request->index];
    if (!made) {
        base_mailbox_unregister_global(c->addresses, entry->name, request->claimed);
        free(request);
        return;
    }
    if (request->expected)
        log_warn("singleton '%s': entity %" PRIu64 " was lost; entity %" PRIu64 " made here takes its place",
                 entry->name, request->expected, request->claimed);
    else
        log_info("singleton '%s': entity %" PRIu64 " made here", entry->name, request->claimed);
    size_t index = request->index;
    uint64_t claimed = request->claimed;
    free(request);
    base_singletons_on_live(singletons, index, claimed);
}

/* Claims the entry's name for a fresh entity id, in place of `expected`
 * (0: a free name). */
static void base_singletons_claim(base_singletons *singletons, size_t index, uint64_t expected) {
    const base_singletons_context *c = &singletons->context;
    base_singleton_entry *entry = &singletons->entries[index];
    uint64_t entity_id;
    if (!base_singletons_may_make(singletons) || base_life_take_id(c->life, &entity_id) != 0) return;
    base_singleton_request *request = xcalloc(1, sizeof *request);
    *request = (base_singleton_request){singletons, index, expected, entity_id, 0};
    char key[REDIS_KEY_MAX], was[24], id[24];
    redis_key_globals(key, c->cluster_name);
    snprintf(was, sizeof was, "%" PRIu64, expected);
    snprintf(id, sizeof id, "%" PRIu64, entity_id);
    if (redis_client_command(c->redis, base_singletons_on_claimed, request, "EVAL %s 1 %s %s %s %s",
                             BASE_SINGLETON_CLAIM, key, entry->name, was, id) != 0) {
        free(request);
        return;
    }
    entry->asking = true;
}

/* ---- the check ------------------------------------------------------------------- */

/* {"free"}, {"live", holder}, or {"doubt", holder}: the holder's directory
 * entry names a registered baseapp, or it does not. */
static const char BASE_SINGLETON_CHECK[] =
    "local holder = redis.call('HGET', KEYS[1], ARGV[1]) "
    "if not holder then return {'free'} end "
    "local where = redis.call('HGET', KEYS[2], holder) "
    "if where and redis.call('SISMEMBER', KEYS[3], where) == 1 then return {'live', holder} end "
    "return {'doubt', holder}";

static void base_singletons_on_checked(redis_client *redis, redisReply *reply, void *user_data) {
    base_singleton_request *request = user_data;
    base_singletons *singletons = request->singletons;
    size_t index = request->index;
    uint64_t now_us = request->now_us;
    (void)redis;
    free(request);
    base_singleton_entry *entry = &singletons->entries[index];
    entry->asking = false;
    if (singletons->context.self->stopping || !reply || reply->type != REDIS_REPLY_ARRAY || reply->elements < 1 ||
        reply->element[0]->type != REDIS_REPLY_STRING)
        return; /* unanswered: nothing changes */
    const char *verdict = reply->element[0]->str;
    uint64_t holder = reply->elements > 1 ? base_singleton_reply_id(reply->element[1]) : 0;
    if (strcmp(verdict, "free") == 0) {
        entry->doubted = 0;
        base_singletons_claim(singletons, index, 0);
    } else if (strcmp(verdict, "live") == 0 && holder) {
        base_singletons_on_live(singletons, index, holder);
    } else if (strcmp(verdict, "doubt") == 0 && holder) {
        if (entry->doubted != holder) {
            entry->doubted = holder;
            entry->doubted_since_us = now_us;
        } else if (now_us - entry->doubted_since_us >= (uint64_t)BASE_SINGLETON_GRACE_MS * 1000) {
            base_singletons_claim(singletons, index, holder);
        }
    }
}

void base_singletons_poll(base_singletons *singletons, uint64_t now_us) {
    const base_singletons_context *c = &singletons->context;
    if (c->self->stopping || !c->self->process_id || !redis_client_is_connected(c->redis)) return;
    char globals[REDIS_KEY_MAX], directory[REDIS_KEY_MAX], processes[REDIS_KEY_MAX];
    redis_key_globals(globals, c->cluster_name);
    redis_key_base_directory(directory, c->cluster_name);
    redis_key_processes(processes, c->cluster_name);
    for (size_t i = 0; i < singletons->count; i++) {
        base_singleton_entry *entry = &singletons->entries[i];
        if (entry->asking) continue;
        base_singleton_request *request = xcalloc(1, sizeof *request);
        *request = (base_singleton_request){singletons, i, 0, 0, now_us};
        if (redis_client_command(c->redis, base_singletons_on_checked, request, "EVAL %s 3 %s %s %s %s",
                                 BASE_SINGLETON_CHECK, globals, directory, processes, entry->name) != 0) {
            free(request);
            return;
        }
        entry->asking = true;
    }
}

void base_singletons_on_freed(base_singletons *singletons, const base_entity *base) {
    for (size_t i = 0; i < singletons->count; i++) {
        const base_singleton_entry *entry = &singletons->entries[i];
        if (entry->cls != base->cls || strcmp(entry->name, base->name) != 0) continue;
        /* Given up only if this base holds it (a stray's free leaves it). */
        base_mailbox_unregister_global(singletons->context.addresses, entry->name, base->entity_id);
    }
}
