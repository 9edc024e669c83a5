/* base_call.h -- entity calls on the base side: game code calling a base or
 * client method of any entity by id (through the base mailbox, which finds
 * the entity's baseapp, this one included), the calls that arrive (checked
 * against the definitions before anything runs), and the failures that come
 * back to the caller. A call to an entity that is not there is answered
 * with EntityCallFailed: never lost silently.
 */
#ifndef TESSERA_BASE_CALL_H
#define TESSERA_BASE_CALL_H

#include <stdint.h>

#include "base_entity.h"
#include "base_hooks.h"
#include "base_mailbox.h"
#include "cluster.pb-c.h"
#include "entity_def.h"
#include "entity_state.h"
#include "peer_set.h"
#include "process_self.h"
#include "redis_client.h"

typedef struct base_calls base_calls;

typedef struct base_calls_context {
    redis_client *redis;
    const char *cluster_name;
    const entity_def_registry *definitions;
    peer_set *peers;
    base_entities *bases;
    const base_hooks *hooks;
    const process_self *self;
} base_calls_context;

typedef struct base_call_counters {
    uint64_t made;     /* calls game code here made (to bases and clients) */
    uint64_t received; /* calls that reached a base here */
    uint64_t failed;   /* calls made here that did not reach their entity */
} base_call_counters;

base_calls *base_calls_create(const base_calls_context *context);
void base_calls_free(base_calls *calls);
const base_call_counters *base_calls_figures(const base_calls *calls);
/* The mailbox that finds bases (global names, the base directory). */
base_mailbox *base_calls_mailbox(base_calls *calls);
/* This process's id, once registered. */
void base_calls_set_self(base_calls *calls, uint64_t process_id);

/* Calls method `method_name` of class `class_name` (part BASE or CLIENT) of
 * entity `target_id`, wherever its base is, for `caller_id` (0: the
 * server), with `args` (a state of the method's args_class; NULL: none).
 * Returns 0 (a failure comes back through the call_failed hook), or -1
 * when the class has no such method (nothing sent). */
int base_call(base_calls *calls, uint64_t caller_id, uint64_t target_id, const char *class_name, entity_def_part part,
              const char *method_name, const entity_state *args);
/* A BaseCall for a base here (from a peer, or from this baseapp itself). */
void base_call_on_call(base_calls *calls, const Tessera__Cluster__BaseCall *call);
/* An EntityCallFailed for a call made here. */
void base_call_on_failed(base_calls *calls, const Tessera__Cluster__EntityCallFailed *failed);

#endif
