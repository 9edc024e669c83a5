/* base_hooks.h -- the game's base rules as the baseapp's modules reach them.
 *
 * What the engine tells the game about a base's life (created, destroyed,
 * given a client, written), a giveClientTo another baseapp refused, the
 * base methods it asks the game to run, the entity calls that failed, and
 * the game events heard here. The game host (base_game.c) fills one table
 * and owns what `host` points to; the modules below it (proxies,
 * persistence, handovers, entity calls, events) keep a const pointer to
 * the table, so none of them calls into the game host while the game host
 * may call all of them. Until the game host has loaded, every hook is NULL
 * and the wrappers below do nothing.
 */
#ifndef TESSERA_BASE_HOOKS_H
#define TESSERA_BASE_HOOKS_H

#include <stdbool.h>
#include <stdint.h>

#include "base_entity.h"
#include "entity_def.h"
#include "entity_state.h"

typedef struct base_hooks {
    void *host;
    /* A base came to be here (made or loaded); its state is restored. */
    void (*created)(void *host, base_entity *base);
    /* A base is being freed (it is still whole). */
    void (*destroyed)(void *host, base_entity *base);
    /* A client was given to the base (a login, a reconnect, a redirected
     * login, a giveClientTo). */
    void (*client_enabled)(void *host, base_entity *base);
    /* A write of its state finished (ok) or failed (it is retried). */
    void (*written)(void *host, base_entity *base, bool ok, const char *detail);
    /* Its giveClientTo of entity `target_id` on another baseapp was
     * refused by `rule`; it keeps its client. */
    void (*handover_refused)(void *host, base_entity *base, uint64_t target_id, const char *rule);
    /* Runs the body of base method `method` of `base` for `caller_id`
     * (0: the server). Returns false (logged) when the game gave it none. */
    bool (*call)(void *host, base_entity *base, const entity_def_method *method, const entity_state *args,
                 uint64_t caller_id);
    /* A call `caller_id` made did not reach `target_id` (its method named
     * by class, part and id). */
    void (*call_failed)(void *host, uint64_t caller_id, uint64_t target_id, const char *class_name,
                        entity_def_part part, uint32_t method_id);
    /* Game event `event` was fired here or arrived here. */
    void (*event_heard)(void *host, const entity_def_method *event, uint64_t source_id, const entity_state *fields);
} base_hooks;

static inline void base_hooks_created(const base_hooks *hooks, base_entity *base) {
    if (hooks->created) hooks->created(hooks->host, base);
}
static inline void base_hooks_destroyed(const base_hooks *hooks, base_entity *base) {
    if (hooks->destroyed) hooks->destroyed(hooks->host, base);
}
static inline void base_hooks_client_enabled(const base_hooks *hooks, base_entity *base) {
    if (hooks->client_enabled) hooks->client_enabled(hooks->host, base);
}
static inline void base_hooks_written(const base_hooks *hooks, base_entity *base, bool ok, const char *detail) {
    if (hooks->written) hooks->written(hooks->host, base, ok, detail);
}
static inline void base_hooks_handover_refused(const base_hooks *hooks, base_entity *base, uint64_t target_id,
                                               const char *rule) {
    if (hooks->handover_refused) hooks->handover_refused(hooks->host, base, target_id, rule);
}
static inline bool base_hooks_call(const base_hooks *hooks, base_entity *base, const entity_def_method *method,
                                   const entity_state *args, uint64_t caller_id) {
    return hooks->call ? hooks->call(hooks->host, base, method, args, caller_id) : false;
}
static inline void base_hooks_call_failed(const base_hooks *hooks, uint64_t caller_id, uint64_t target_id,
                                          const char *class_name, entity_def_part part, uint32_t method_id) {
    if (hooks->call_failed) hooks->call_failed(hooks->host, caller_id, target_id, class_name, part, method_id);
}
static inline void base_hooks_event_heard(const base_hooks *hooks, const entity_def_method *event, uint64_t source_id,
                                          const entity_state *fields) {
    if (hooks->event_heard) hooks->event_heard(hooks->host, event, source_id, fields);
}

#endif
