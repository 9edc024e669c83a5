/* base_mailbox.h -- calls to an entity's base, by entity id, from any
 * process (proto/cluster.proto: BaseCall), and global bases by name.
 *
 * Finding the base. Each base is on one baseapp for its whole life, and
 * that baseapp writes it in the base directory (P base_directory, an
 * entity id -> baseapp id hash) when the base is made and removes it when
 * the base goes (base_mailbox_claim, base_mailbox_release). A sender asks
 * the directory once per entity, holding that entity's calls until the
 * answer, and keeps the answer; calls go out in the order they were made.
 * A call whose base is gone comes back as EntityCallFailed, which forgets
 * the answer and is reported: a call is never lost silently. A process
 * that already knows where the base is (a cell part knows its own base's
 * baseapp) says so with base_mailbox_learn, and no lookup is needed.
 *
 * Global bases. A base registers a name (P globals: name -> entity id,
 * HSETNX, so one base holds a name at a time, like KBEngine's
 * registerGlobally); any process finds it by name, then calls it by id.
 */
#ifndef TESSERA_BASE_MAILBOX_H
#define TESSERA_BASE_MAILBOX_H

#include <stdbool.h>
#include <stdint.h>

#include "cluster.pb-c.h"
#include "entity_def.h"
#include "entity_state.h"
#include "redis_client.h"

typedef struct base_mailbox base_mailbox;

/* Puts a call on the wire to `baseapp_id`, or delivers it here when that is
 * this process. Returns 0, or -1 when that baseapp is not reachable. */
typedef int (*base_mailbox_send_callback)(uint64_t baseapp_id, const Tessera__Cluster__BaseCall *call, void *user_data);
/* A call did not reach its base: `failed` says which and why. */
typedef void (*base_mailbox_failed_callback)(const Tessera__Cluster__EntityCallFailed *failed, void *user_data);

base_mailbox *base_mailbox_create(redis_client *redis, const char *cluster_name, base_mailbox_send_callback send,
                                  base_mailbox_failed_callback failed, void *user_data);
/* Frees the mailbox; calls still waiting for the directory are reported
 * failed. */
void base_mailbox_free(base_mailbox *box);
/* This process's id (calls name it as their sender_id), once registered. */
void base_mailbox_set_self(base_mailbox *box, uint64_t self_id);

/* Sends `call` (everything but sender_id set by the caller) to the base of
 * call->entity_id, wherever it is. The call is copied. */
void base_mailbox_send(base_mailbox *box, const Tessera__Cluster__BaseCall *call);
/* The same, built from a method of part BASE or CLIENT of class
 * `class_name` (the target's, as the caller names it; a failure carries it
 * back) and its arguments (a state of method->args_class; NULL: none), for
 * `caller_id` (0: the server). Returns 0, or -1 for a method of another
 * part (nothing sent). */
int base_mailbox_call(base_mailbox *box, uint64_t caller_id, uint64_t target_id, const char *class_name,
                      const entity_def_method *method, const entity_state *args);
/* The answer to a call that did not reach its base (from the baseapp that
 * was asked, or made here): forgets where that base was, and reports it. */
void base_mailbox_on_failed(base_mailbox *box, const Tessera__Cluster__EntityCallFailed *failed);
/* The failure report of `call` for `reason` (which must outlive it). */
Tessera__Cluster__EntityCallFailed base_mailbox_failure(const Tessera__Cluster__BaseCall *call, const char *reason);
/* The base of `entity_id` is on `baseapp_id` (known without asking). */
void base_mailbox_learn(base_mailbox *box, uint64_t entity_id, uint64_t baseapp_id);

/* Where the base of `entity_id` is: `located` gets its baseapp (0: none,
 * or the directory did not answer), at once when it is known. Returns 0,
 * or -1 when Redis is not connected (no call). */
typedef void (*base_mailbox_located)(uint64_t entity_id, uint64_t baseapp_id, void *context);
int base_mailbox_locate(base_mailbox *box, uint64_t entity_id, base_mailbox_located located, void *context);

/* The directory, on the baseapp that holds the base. */
void base_mailbox_claim(base_mailbox *box, uint64_t entity_id);
void base_mailbox_release(base_mailbox *box, uint64_t entity_id);

/* registerGlobally: `entity_id` takes `name` unless another base holds
 * it. `done` learns the outcome (ok false: taken, or Redis failed). */
typedef void (*base_mailbox_registered)(bool ok, uint64_t holder_id, void *context);
int base_mailbox_register_global(base_mailbox *box, const char *name, uint64_t entity_id, base_mailbox_registered done,
                                 void *context);
/* Gives the name up, if `entity_id` still holds it. */
void base_mailbox_unregister_global(base_mailbox *box, const char *name, uint64_t entity_id);
/* The entity holding `name` (0: none); `found` is called once. Returns 0,
 * or -1 when Redis is not connected (no call). */
typedef void (*base_mailbox_found)(uint64_t entity_id, void *context);
int base_mailbox_find_global(base_mailbox *box, const char *name, base_mailbox_found found, void *context);

#endif
