/* base_call.c -- entity calls on the base side: game code calling a base
 * or client method of any entity by id (through the base mailbox, which
 * finds the entity's baseapp, this one included), the calls that arrive
 * (checked against the definitions before anything runs), and the
 * failures that come back to the caller. A call to an entity that is not
 * there is answered with EntityCallFailed: never lost silently. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baseapp.h"
#include "log.h"
#include "method_call.h"
#include "peer_message.h"

int base_call(baseapp *app, uint64_t caller_id, uint64_t target_id, const char *class_name, entity_def_part part,
              const char *method_name, const entity_state *args) {
    const entity_def_class *cls = entity_def_registry_find_class(app->definitions, class_name);
    const entity_def_method *method = cls ? entity_def_class_find_method(cls, part, method_name) : NULL;
    if (!method || (part != ENTITY_DEF_PART_BASE && part != ENTITY_DEF_PART_CLIENT)) {
        log_warn("entity %" PRIu64 ": no %s method %s.%s to call on entity %" PRIu64, caller_id,
                 part == ENTITY_DEF_PART_CLIENT ? "client" : "base", class_name, method_name, target_id);
        return -1;
    }
    app->entity_calls++;
    return base_mailbox_call(app->bases, caller_id, target_id, class_name, method, args);
}

/* Answers the sender of `call` that it failed for `reason`. */
static void base_call_fail(baseapp *app, const Tessera__Cluster__BaseCall *call, const char *reason) {
    Tessera__Cluster__EntityCallFailed failed = base_mailbox_failure(call, reason);
    if (call->sender_id == app->process_id || call->sender_id == 0) {
        base_mailbox_on_failed(app->bases, &failed);
        return;
    }
    if (peer_send_entity_call_failed(app->peers, call->sender_id, &failed) != 0)
        log_info("entity %" PRIu64 ": a call from process %" PRIu64 " failed (%s), and its sender is gone",
                 call->entity_id, call->sender_id, reason);
}

void base_call_on_call(baseapp *app, const Tessera__Cluster__BaseCall *call) {
    proxy *target = proxy_find_by_entity(app, call->entity_id);
    if (!target || target->state == PROXY_DESTROYING) {
        base_call_fail(app, call, "no such entity here: its base is destroyed");
        return;
    }
    bool to_client = call->part == TESSERA__CLIENT__METHOD_PART__METHOD_PART_CLIENT;
    char reason[256];
    const entity_def_method *method;
    entity_state *args;
    if (method_call_prepare(target->cls, to_client ? ENTITY_DEF_PART_CLIENT : ENTITY_DEF_PART_BASE, call->method_id,
                            call->args.data, call->args.len, false, &method, &args, reason,
                            sizeof reason) != METHOD_CALL_OK) {
        log_warn("entity %" PRIu64 ": a call from entity %" PRIu64 " (process %" PRIu64 ") refused: %s",
                 call->entity_id, call->caller_id, call->sender_id, reason);
        base_call_fail(app, call, reason);
        return;
    }
    app->entity_calls_received++;
    if (!to_client) {
        base_game_call(app->game, target, method, args, call->caller_id);
        entity_state_free(args);
        return;
    }
    entity_state_free(args);
    if (!target->link || target->link->state != CLIENT_LINK_IN_WORLD) {
        base_call_fail(app, call, "its client is not connected");
        return;
    }
    Tessera__Client__ClientCall client_call = TESSERA__CLIENT__CLIENT_CALL__INIT;
    client_call.entity_id = call->entity_id;
    client_call.method_id = call->method_id;
    client_call.args = call->args;
    Tessera__Client__ServerToClient message = TESSERA__CLIENT__SERVER_TO_CLIENT__INIT;
    message.body_case = TESSERA__CLIENT__SERVER_TO_CLIENT__BODY_CALL;
    message.call = &client_call;
    client_link_send(target->link, &message);
}

/* The base mailbox's wire: this baseapp's own bases at once, others over
 * the baseapps' links. */
static int base_call_send(uint64_t baseapp_id, const Tessera__Cluster__BaseCall *call, void *user_data) {
    baseapp *app = user_data;
    if (baseapp_id == app->process_id) {
        base_call_on_call(app, call);
        return 0;
    }
    return peer_send_base_call(app->peers, baseapp_id, call);
}

static void base_call_failed(const Tessera__Cluster__EntityCallFailed *failed, void *user_data) {
    baseapp *app = user_data;
    app->entity_calls_failed++;
    log_info("a call of entity %" PRIu64 " (by entity %" PRIu64 ") failed: %s", failed->entity_id, failed->caller_id,
             failed->reason ? failed->reason : "");
    base_game_call_failed(app->game, failed->caller_id, failed->entity_id, failed->class_name,
                          failed->part == TESSERA__CLIENT__METHOD_PART__METHOD_PART_CLIENT ? ENTITY_DEF_PART_CLIENT
                                                                                           : ENTITY_DEF_PART_BASE,
                          failed->method_id);
}

base_mailbox *base_call_mailbox_create(baseapp *app) {
    return base_mailbox_create(app->redis, app->settings.process.cluster_name, base_call_send, base_call_failed, app);
}
