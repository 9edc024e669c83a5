/* base_call.c -- entity calls on the base side (base_call.h). It owns the
 * base mailbox and the call figures; what a base method does is the
 * game's (the call hook). */
#include "base_call.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client_link.h"
#include "log.h"
#include "method_call.h"
#include "peer_message.h"
#include "proxy.h"

struct base_calls {
    base_calls_context context;
    base_mailbox *mailbox;
    base_call_counters counters;
};

int base_call(base_calls *calls, uint64_t caller_id, uint64_t target_id, const char *class_name, entity_def_part part,
              const char *method_name, const entity_state *args) {
    const entity_def_class *cls = entity_def_registry_find_class(calls->context.definitions, class_name);
    const entity_def_method *method = cls ? entity_def_class_find_method(cls, part, method_name) : NULL;
    if (!method || (part != ENTITY_DEF_PART_BASE && part != ENTITY_DEF_PART_CLIENT)) {
        log_warn("entity %" PRIu64 ": no %s method %s.%s to call on entity %" PRIu64, caller_id,
                 part == ENTITY_DEF_PART_CLIENT ? "client" : "base", class_name, method_name, target_id);
        return -1;
    }
    calls->counters.made++;
    return base_mailbox_call(calls->mailbox, caller_id, target_id, class_name, method, args);
}

/* Answers the sender of `call` that it failed for `reason`. */
static void base_call_fail(base_calls *calls, const Tessera__Cluster__BaseCall *call, const char *reason) {
    Tessera__Cluster__EntityCallFailed failed = base_mailbox_failure(call, reason);
    if (call->sender_id == calls->context.self->process_id || call->sender_id == 0) {
        base_mailbox_on_failed(calls->mailbox, &failed);
        return;
    }
    if (peer_send_entity_call_failed(calls->context.peers, call->sender_id, &failed) != 0)
        log_info("entity %" PRIu64 ": a call from process %" PRIu64 " failed (%s), and its sender is gone",
                 call->entity_id, call->sender_id, reason);
}

void base_call_on_call(base_calls *calls, const Tessera__Cluster__BaseCall *call) {
    base_entity *target = base_entities_find(calls->context.bases, call->entity_id);
    if (!base_entity_is_live(target)) {
        base_call_fail(calls, call, "no such entity here: its base is destroyed");
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
        base_call_fail(calls, call, reason);
        return;
    }
    calls->counters.received++;
    if (!to_client) {
        base_hooks_call(calls->context.hooks, target, method, args, call->caller_id);
        entity_state_free(args);
        return;
    }
    entity_state_free(args);
    client_link *link = target->proxy ? target->proxy->link : NULL;
    if (!link || link->state != CLIENT_LINK_IN_WORLD) {
        base_call_fail(calls, call, "its client is not connected");
        return;
    }
    Tessera__Client__ClientCall client_call = TESSERA__CLIENT__CLIENT_CALL__INIT;
    client_call.entity_id = call->entity_id;
    client_call.method_id = call->method_id;
    client_call.args = call->args;
    Tessera__Client__ServerToClient message = TESSERA__CLIENT__SERVER_TO_CLIENT__INIT;
    message.body_case = TESSERA__CLIENT__SERVER_TO_CLIENT__BODY_CALL;
    message.call = &client_call;
    client_link_send(link, &message);
}

void base_call_on_failed(base_calls *calls, const Tessera__Cluster__EntityCallFailed *failed) {
    base_mailbox_on_failed(calls->mailbox, failed);
}

/* The base mailbox's wire: this baseapp's own bases at once, others over
 * the baseapps' links. */
static int base_call_send(uint64_t baseapp_id, const Tessera__Cluster__BaseCall *call, void *user_data) {
    base_calls *calls = user_data;
    if (baseapp_id == calls->context.self->process_id) {
        base_call_on_call(calls, call);
        return 0;
    }
    return peer_send_base_call(calls->context.peers, baseapp_id, call);
}

static void base_call_failed(const Tessera__Cluster__EntityCallFailed *failed, void *user_data) {
    base_calls *calls = user_data;
    calls->counters.failed++;
    log_info("a call of entity %" PRIu64 " (by entity %" PRIu64 ") failed: %s", failed->entity_id, failed->caller_id,
             failed->reason ? failed->reason : "");
    base_hooks_call_failed(calls->context.hooks, failed->caller_id, failed->entity_id, failed->class_name,
                           failed->part == TESSERA__CLIENT__METHOD_PART__METHOD_PART_CLIENT ? ENTITY_DEF_PART_CLIENT
                                                                                            : ENTITY_DEF_PART_BASE,
                           failed->method_id);
}

base_calls *base_calls_create(const base_calls_context *context) {
    base_calls *calls = xcalloc(1, sizeof *calls);
    calls->context = *context;
    calls->mailbox =
        base_mailbox_create(context->redis, context->cluster_name, base_call_send, base_call_failed, calls);
    return calls;
}

void base_calls_free(base_calls *calls) {
    if (!calls) return;
    base_mailbox_free(calls->mailbox);
    free(calls);
}

const base_call_counters *base_calls_figures(const base_calls *calls) { return &calls->counters; }

base_mailbox *base_calls_mailbox(base_calls *calls) { return calls->mailbox; }

void base_calls_set_self(base_calls *calls, uint64_t process_id) { base_mailbox_set_self(calls->mailbox, process_id); }
