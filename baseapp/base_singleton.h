/* base_singleton.h -- cluster singleton services (game.h's singleton;
 * KBEngine's global bases, made once): one base of a class under a global
 * name in the whole cluster, made by one of the baseapps that take part,
 * known to all of them, and made again on another when it is lost.
 *
 * The name is a global name (base_mailbox.h: P globals, name -> entity id)
 * and the base is made with the name as its key. Every baseapp that takes
 * part checks each of its names once a second (base_singletons_poll, on the
 * base tick) with one script that reads, at once, the name's holder, the
 * baseapp the base directory has it on, and whether that baseapp is
 * registered (P processes):
 *
 *   free      nobody holds the name: this baseapp takes a fresh entity id,
 *             claims the name for it (if it is still free), and only once
 *             it has won makes the base, under that id; so one base is
 *             made in the cluster, and its created hook runs once;
 *   live      the holder's base is on a registered baseapp: that is the
 *             service; each waiter is told its handle when this baseapp
 *             first learns it, and again whenever it changes;
 *   in doubt  the holder has no directory entry (gone, or a claim's base
 *             still being made) or its baseapp is not registered (declared
 *             dead, or stopped): the baseapp waits BASE_SINGLETON_GRACE_MS,
 *             then takes the name over (if the same holder still has it)
 *             and makes a new base. A base restored from its backup after
 *             its baseapp died (base_backup.h) claims its directory entry
 *             within milliseconds of the death being heard: the name
 *             follows it with the same handle, and nothing is made.
 *
 * A base here of the singleton's class under its name that does not hold
 * the name (a claim that lost a race with a take-over, a backup restored
 * after the name moved on) is destroyed without a save. When the holder is
 * freed (destroyed by the game, lost with its cellapp, its baseapp
 * draining), its baseapp gives the name up at once, and a baseapp that
 * takes part makes another at its next check. A check Redis does not
 * answer changes nothing; a draining or stopping baseapp makes nothing.
 */
#ifndef TESSERA_BASE_SINGLETON_H
#define TESSERA_BASE_SINGLETON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base_entity.h"
#include "base_life.h"
#include "base_mailbox.h"
#include "entity_def.h"
#include "process_self.h"
#include "redis_client.h"

/* How long a holder stays in doubt before another base takes its name:
 * two checks, well past the milliseconds a restore takes to claim its
 * base's directory entry once the death is heard. */
#define BASE_SINGLETON_GRACE_MS 2000
/* The longest name (it is the base's key too). */
#define BASE_SINGLETON_NAME_MAX 64

typedef struct base_singletons base_singletons;

/* One caller of the service on this baseapp: what to tell it. */
typedef struct base_singleton_waiter {
    void (*ready)(void); /* the owner's callback, cast back by notify */
    void *user_data;
} base_singleton_waiter;

typedef struct base_singletons_context {
    redis_client *redis;
    const char *cluster_name;
    base_mailbox *addresses; /* gives names up */
    base_entities *bases;
    base_life *life; /* entity ids; strays destroyed */
    const process_self *self;
    const bool *draining;
    void *owner;
    /* Makes the singleton's base here: entity `entity_id` of `cls` with
     * key `name` (its created hook runs). Returns 0, or -1 (logged). */
    int (*make)(void *owner, const entity_def_class *cls, const char *name, uint64_t entity_id);
    /* Tells `waiter` of singleton `name` its holder. */
    void (*notify)(void *owner, const base_singleton_waiter *waiter, const char *name, uint64_t holder);
} base_singletons_context;

base_singletons *base_singletons_create(const base_singletons_context *context);
/* Frees the services (after the loop has drained: no check is in flight). */
void base_singletons_free(base_singletons *singletons);

/* This baseapp takes part in singleton `name` of `cls`, and `waiter` is
 * told its holder. Several waiters may join one name (of one class).
 * Returns 0, or -1 (logged) for an empty or too long name, or a name
 * joined with another class. */
int base_singletons_join(base_singletons *singletons, const char *name, const entity_def_class *cls,
                         const base_singleton_waiter *waiter);
/* Checks every name (one Redis round trip each; a name still being
 * checked is skipped), at `now_us` (monotonic). */
void base_singletons_poll(base_singletons *singletons, uint64_t now_us);
/* A base here is being freed: if it holds a singleton's name, the name is
 * given up. */
void base_singletons_on_freed(base_singletons *singletons, const base_entity *base);
/* How many names this baseapp takes part in. */
size_t base_singletons_count(const base_singletons *singletons);

#endif
