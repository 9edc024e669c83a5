/* base_mailbox.c -- calls to entities' bases by id: the base directory
 * lookups, the calls held while one is answered, the answers kept, and the
 * global names (base_mailbox.h has the rules). */
#include "base_mailbox.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bit_stream.h"
#include "id_map.h"
#include "log.h"
#include "method_call.h"
#include "redis_keys.h"

struct base_mailbox {
    redis_client *redis;
    char cluster[64];
    base_mailbox_send_callback send;
    base_mailbox_failed_callback failed;
    void *user_data;
    uint64_t self;
    id_map known;   /* entity id -> its baseapp's id (as a pointer) */
    id_map waiting; /* entity id -> base_mailbox_queue, while the directory is asked */
};

/* The calls to one entity while the directory is asked. Owned by the Redis
 * callback once the mailbox is freed (box NULL then). */
typedef struct base_mailbox_queue {
    base_mailbox *box;
    uint64_t entity_id;
    ProtobufCBinaryData *calls;
    size_t count, capacity;
} base_mailbox_queue;

base_mailbox *base_mailbox_create(redis_client *redis, const char *cluster_name, base_mailbox_send_callback send,
                                  base_mailbox_failed_callback failed, void *user_data) {
    base_mailbox *box = xcalloc(1, sizeof *box);
    box->redis = redis;
    snprintf(box->cluster, sizeof box->cluster, "%s", cluster_name);
    box->send = send;
    box->failed = failed;
    box->user_data = user_data;
    id_map_init(&box->known);
    id_map_init(&box->waiting);
    return box;
}

void base_mailbox_set_self(base_mailbox *box, uint64_t self_id) { box->self = self_id; }

/* Tells the owner `call` failed for `reason`. */
Tessera__Cluster__EntityCallFailed base_mailbox_failure(const Tessera__Cluster__BaseCall *call, const char *reason) {
    Tessera__Cluster__EntityCallFailed failed = TESSERA__CLUSTER__ENTITY_CALL_FAILED__INIT;
    failed.entity_id = call->entity_id;
    failed.caller_id = call->caller_id;
    failed.method_id = call->method_id;
    failed.part = call->part;
    failed.reason = (char *)reason;
    failed.class_name = call->class_name;
    return failed;
}

static void base_mailbox_report(base_mailbox *box, const Tessera__Cluster__BaseCall *call, const char *reason) {
    Tessera__Cluster__EntityCallFailed failed = base_mailbox_failure(call, reason);
    box->failed(&failed, box->user_data);
}

/* Sends one call to `baseapp_id`, reporting it if that is not reachable. */
static void base_mailbox_deliver(base_mailbox *box, uint64_t baseapp_id, const Tessera__Cluster__BaseCall *call) {
    if (box->send(baseapp_id, call, box->user_data) == 0) return;
    id_map_remove(&box->known, call->entity_id);
    char reason[96];
    snprintf(reason, sizeof reason, "its baseapp %" PRIu64 " is not reachable", baseapp_id);
    base_mailbox_report(box, call, reason);
}

/* Sends (or reports) every call held for the entity, in order, and frees
 * the queue. `baseapp_id` 0: none holds it, and `reason` says why. */
static void base_mailbox_flush(base_mailbox_queue *queue, uint64_t baseapp_id, const char *reason) {
    base_mailbox *box = queue->box;
    for (size_t i = 0; i < queue->count; i++) {
        Tessera__Cluster__BaseCall *call =
            tessera__cluster__base_call__unpack(NULL, queue->calls[i].len, queue->calls[i].data);
        if (call && box) {
            if (baseapp_id)
                base_mailbox_deliver(box, baseapp_id, call);
            else
                base_mailbox_report(box, call, reason);
        }
        if (call) tessera__cluster__base_call__free_unpacked(call, NULL);
        free(queue->calls[i].data);
    }
    free(queue->calls);
    free(queue);
}

static void base_mailbox_on_directory(redis_client *redis, redisReply *reply, void *user_data) {
    base_mailbox_queue *queue = user_data;
    (void)redis;
    base_mailbox *box = queue->box;
    if (!box) {
        base_mailbox_flush(queue, 0, NULL); /* the mailbox is gone: its calls were reported then */
        return;
    }
    id_map_remove(&box->waiting, queue->entity_id);
    if (!reply || (reply->type != REDIS_REPLY_STRING && reply->type != REDIS_REPLY_NIL)) {
        base_mailbox_flush(queue, 0, "the base directory is unavailable");
        return;
    }
    uint64_t baseapp_id = reply->type == REDIS_REPLY_STRING ? strtoull(reply->str, NULL, 10) : 0;
    if (!baseapp_id) {
        base_mailbox_flush(queue, 0, "no such entity: it has no base (destroyed, or never was)");
        return;
    }
    id_map_put(&box->known, queue->entity_id, (void *)(uintptr_t)baseapp_id);
    base_mailbox_flush(queue, baseapp_id, NULL);
}

static void base_mailbox_hold(base_mailbox_queue *queue, const Tessera__Cluster__BaseCall *call) {
    if (queue->count == queue->capacity) {
        queue->capacity = queue->capacity ? queue->capacity * 2 : 4;
        queue->calls = xrealloc(queue->calls, queue->capacity * sizeof *queue->calls);
    }
    size_t length = tessera__cluster__base_call__get_packed_size(call);
    uint8_t *bytes = xmalloc(length ? length : 1);
    tessera__cluster__base_call__pack(call, bytes);
    queue->calls[queue->count].data = bytes;
    queue->calls[queue->count].len = length;
    queue->count++;
}

void base_mailbox_send(base_mailbox *box, const Tessera__Cluster__BaseCall *call_in) {
    Tessera__Cluster__BaseCall call = *call_in;
    call.sender_id = box->self;
    uint64_t known = (uint64_t)(uintptr_t)id_map_get(&box->known, call.entity_id);
    if (known) {
        base_mailbox_deliver(box, known, &call);
        return;
    }
    base_mailbox_queue *queue = id_map_get(&box->waiting, call.entity_id);
    if (queue) {
        base_mailbox_hold(queue, &call);
        return;
    }
    queue = xcalloc(1, sizeof *queue);
    queue->box = box;
    queue->entity_id = call.entity_id;
    base_mailbox_hold(queue, &call);
    char key[REDIS_KEY_MAX], id[24];
    redis_key_base_directory(key, box->cluster);
    snprintf(id, sizeof id, "%" PRIu64, call.entity_id);
    if (redis_client_command(box->redis, base_mailbox_on_directory, queue, "HGET %s %s", key, id) != 0) {
        base_mailbox_flush(queue, 0, "the base directory is unavailable (Redis is not connected)");
        return;
    }
    id_map_put(&box->waiting, call.entity_id, queue);
}

int base_mailbox_call(base_mailbox *box, uint64_t caller_id, uint64_t target_id, const char *class_name,
                      const entity_def_method *method, const entity_state *args) {
    if (method->part != ENTITY_DEF_PART_BASE && method->part != ENTITY_DEF_PART_CLIENT) return -1;
    bit_writer w;
    bit_writer_init(&w);
    if (args) method_call_encode(args, &w);
    Tessera__Cluster__BaseCall call = TESSERA__CLUSTER__BASE_CALL__INIT;
    call.entity_id = target_id;
    call.caller_id = caller_id;
    call.method_id = method->id;
    call.class_name = (char *)(class_name ? class_name : "");
    call.args.data = (uint8_t *)bit_writer_data(&w);
    call.args.len = bit_writer_bytes(&w);
    call.part = method->part == ENTITY_DEF_PART_CLIENT ? TESSERA__CLIENT__METHOD_PART__METHOD_PART_CLIENT
                                                       : TESSERA__CLIENT__METHOD_PART__METHOD_PART_BASE;
    base_mailbox_send(box, &call);
    bit_writer_close(&w);
    return 0;
}

void base_mailbox_on_failed(base_mailbox *box, const Tessera__Cluster__EntityCallFailed *failed) {
    id_map_remove(&box->known, failed->entity_id);
    box->failed(failed, box->user_data);
}

void base_mailbox_learn(base_mailbox *box, uint64_t entity_id, uint64_t baseapp_id) {
    if (entity_id && baseapp_id) id_map_put(&box->known, entity_id, (void *)(uintptr_t)baseapp_id);
}

void base_mailbox_free(base_mailbox *box) {
    if (!box) return;
    size_t cursor = 0;
    uint64_t id;
    void *value;
    while (id_map_next(&box->waiting, &cursor, &id, &value)) {
        base_mailbox_queue *queue = value;
        /* Reported now; the queue itself goes when Redis answers. */
        for (size_t i = 0; i < queue->count; i++) {
            Tessera__Cluster__BaseCall *call =
                tessera__cluster__base_call__unpack(NULL, queue->calls[i].len, queue->calls[i].data);
            if (call) {
                base_mailbox_report(box, call, "the process is stopping");
                tessera__cluster__base_call__free_unpacked(call, NULL);
            }
            free(queue->calls[i].data);
        }
        queue->count = 0;
        queue->box = NULL;
    }
    id_map_close(&box->waiting);
    id_map_close(&box->known);
    free(box);
}

typedef struct base_mailbox_locating {
    base_mailbox_located located;
    void *context;
    uint64_t entity_id;
} base_mailbox_locating;

static void base_mailbox_on_located(redis_client *redis, redisReply *reply, void *user_data) {
    base_mailbox_locating *request = user_data;
    (void)redis;
    uint64_t baseapp_id = reply && reply->type == REDIS_REPLY_STRING ? strtoull(reply->str, NULL, 10) : 0;
    request->located(request->entity_id, baseapp_id, request->context);
    free(request);
}

int base_mailbox_locate(base_mailbox *box, uint64_t entity_id, base_mailbox_located located, void *context) {
    uint64_t known = (uint64_t)(uintptr_t)id_map_get(&box->known, entity_id);
    if (known) {
        located(entity_id, known, context);
        return 0;
    }
    base_mailbox_locating *request = xcalloc(1, sizeof *request);
    request->located = located;
    request->context = context;
    request->entity_id = entity_id;
    char key[REDIS_KEY_MAX], id[24];
    redis_key_base_directory(key, box->cluster);
    snprintf(id, sizeof id, "%" PRIu64, entity_id);
    if (redis_client_command(box->redis, base_mailbox_on_located, request, "HGET %s %s", key, id) != 0) {
        free(request);
        return -1;
    }
    return 0;
}

/* ---- the directory ------------------------------------------------------------ */

void base_mailbox_claim(base_mailbox *box, uint64_t entity_id) {
    char key[REDIS_KEY_MAX], id[24], self[24];
    redis_key_base_directory(key, box->cluster);
    snprintf(id, sizeof id, "%" PRIu64, entity_id);
    snprintf(self, sizeof self, "%" PRIu64, box->self);
    id_map_put(&box->known, entity_id, (void *)(uintptr_t)box->self);
    redis_client_command(box->redis, NULL, NULL, "HSET %s %s %s", key, id, self);
}

/* Removes an entry only while it still names this process. */
static const char BASE_MAILBOX_RELEASE[] =
    "if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then return redis.call('HDEL', KEYS[1], ARGV[1]) end "
    "return 0";

void base_mailbox_release(base_mailbox *box, uint64_t entity_id) {
    char key[REDIS_KEY_MAX], id[24], self[24];
    redis_key_base_directory(key, box->cluster);
    snprintf(id, sizeof id, "%" PRIu64, entity_id);
    snprintf(self, sizeof self, "%" PRIu64, box->self);
    id_map_remove(&box->known, entity_id);
    redis_client_command(box->redis, NULL, NULL, "EVAL %s 1 %s %s %s", BASE_MAILBOX_RELEASE, key, id, self);
}

/* ---- global names --------------------------------------------------------------- */

typedef struct base_mailbox_global_request {
    uint64_t entity_id;
    base_mailbox_registered registered;
    base_mailbox_found found;
    void *context;
} base_mailbox_global_request;

static uint64_t base_mailbox_reply_id(const redisReply *reply) {
    if (!reply) return 0;
    if (reply->type == REDIS_REPLY_STRING) return strtoull(reply->str, NULL, 10);
    if (reply->type == REDIS_REPLY_INTEGER && reply->integer > 0) return (uint64_t)reply->integer;
    return 0;
}

static void base_mailbox_on_registered(redis_client *redis, redisReply *reply, void *user_data) {
    base_mailbox_global_request *request = user_data;
    (void)redis;
    uint64_t holder = base_mailbox_reply_id(reply);
    request->registered(holder != 0 && holder == request->entity_id, holder, request->context);
    free(request);
}

/* HSETNX, answering the holder either way. */
static const char BASE_MAILBOX_REGISTER[] =
    "if redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2]) == 1 then return ARGV[2] end "
    "return redis.call('HGET', KEYS[1], ARGV[1])";

int base_mailbox_register_global(base_mailbox *box, const char *name, uint64_t entity_id, base_mailbox_registered done,
                                 void *context) {
    char key[REDIS_KEY_MAX], id[24];
    redis_key_globals(key, box->cluster);
    snprintf(id, sizeof id, "%" PRIu64, entity_id);
    base_mailbox_global_request *request = xcalloc(1, sizeof *request);
    request->entity_id = entity_id;
    request->registered = done;
    request->context = context;
    if (redis_client_command(box->redis, base_mailbox_on_registered, request, "EVAL %s 1 %s %s %s",
                             BASE_MAILBOX_REGISTER, key, name, id) != 0) {
        free(request);
        return -1;
    }
    return 0;
}

static const char BASE_MAILBOX_UNREGISTER[] =
    "if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then return redis.call('HDEL', KEYS[1], ARGV[1]) end "
    "return 0";

void base_mailbox_unregister_global(base_mailbox *box, const char *name, uint64_t entity_id) {
    char key[REDIS_KEY_MAX], id[24];
    redis_key_globals(key, box->cluster);
    snprintf(id, sizeof id, "%" PRIu64, entity_id);
    redis_client_command(box->redis, NULL, NULL, "EVAL %s 1 %s %s %s", BASE_MAILBOX_UNREGISTER, key, name, id);
}

static void base_mailbox_on_found(redis_client *redis, redisReply *reply, void *user_data) {
    base_mailbox_global_request *request = user_data;
    (void)redis;
    request->found(base_mailbox_reply_id(reply), request->context);
    free(request);
}

int base_mailbox_find_global(base_mailbox *box, const char *name, base_mailbox_found found, void *context) {
    char key[REDIS_KEY_MAX];
    redis_key_globals(key, box->cluster);
    base_mailbox_global_request *request = xcalloc(1, sizeof *request);
    request->found = found;
    request->context = context;
    if (redis_client_command(box->redis, base_mailbox_on_found, request, "HGET %s %s", key, name) != 0) {
        free(request);
        return -1;
    }
    return 0;
}
