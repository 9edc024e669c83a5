/* mailbox.c -- entity addressing: the sender's streams and the directory
 * lookups that find where a real is (mailbox), and the receiver's per-stream
 * ordering (mailbox_inbox). The rules are in mailbox.h. */
#include "mailbox.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "id_map.h"
#include "log.h"
#include "redis_keys.h"

/* ---- sending ---------------------------------------------------------------- */

/* A message waiting for the directory's answer, encoded. */
typedef struct mailbox_waiting {
    uint8_t *encoded;
    size_t length;
    uint64_t sequence;
} mailbox_waiting;

/* One target's stream. */
typedef struct mailbox_target {
    uint64_t stream;
    uint64_t next_sequence;
    uint64_t last_used_ms;
    bool looking_up;         /* a directory lookup is in flight */
    uint64_t cached_cellapp; /* the directory's last answer (0: none) */
    uint32_t cached_incarnation;
    mailbox_waiting *waiting; /* messages held for its answer */
    size_t waiting_count, waiting_capacity;
} mailbox_target;

struct mailbox {
    redis_client *redis;
    char cluster[64];
    uint64_t self_id;
    uint64_t last_stream;
    mailbox_send_callback send;
    mailbox_failed_callback failed;
    void *user_data;
    id_map targets;                 /* entity id -> mailbox_target */
    struct mailbox_lookup *lookups; /* in flight, detached on free */
};

/* A directory lookup in flight; detached (box = NULL) if the mailbox goes first. */
typedef struct mailbox_lookup {
    mailbox *box;
    uint64_t entity_id;
    struct mailbox_lookup *next, *previous;
} mailbox_lookup;

mailbox *mailbox_create(redis_client *redis, const char *cluster_name, mailbox_send_callback send,
                        mailbox_failed_callback failed, void *user_data) {
    mailbox *box = xcalloc(1, sizeof *box);
    box->redis = redis;
    snprintf(box->cluster, sizeof box->cluster, "%s", cluster_name);
    box->send = send;
    box->failed = failed;
    box->user_data = user_data;
    id_map_init(&box->targets);
    return box;
}

static void mailbox_fail_waiting(mailbox *box, uint64_t entity_id, mailbox_target *target, const char *reason) {
    for (size_t i = 0; i < target->waiting_count; i++) {
        if (box->failed) box->failed(entity_id, target->waiting[i].sequence, reason, box->user_data);
        free(target->waiting[i].encoded);
    }
    target->waiting_count = 0;
}

static void mailbox_free_target(mailbox_target *target) {
    for (size_t i = 0; i < target->waiting_count; i++) free(target->waiting[i].encoded);
    free(target->waiting);
    free(target);
}

void mailbox_free(mailbox *box) {
    if (!box) return;
    for (mailbox_lookup *lookup = box->lookups; lookup; lookup = lookup->next) lookup->box = NULL;
    size_t cursor = 0;
    uint64_t id;
    void *value;
    while (id_map_next(&box->targets, &cursor, &id, &value)) {
        mailbox_fail_waiting(box, id, value, "the sender is shutting down");
        mailbox_free_target(value);
    }
    id_map_close(&box->targets);
    free(box);
}

void mailbox_set_self(mailbox *box, uint64_t self_id) { box->self_id = self_id; }

size_t mailbox_stream_count(const mailbox *box) { return id_map_count(&box->targets); }

static mailbox_target *mailbox_target_for(mailbox *box, uint64_t entity_id) {
    mailbox_target *target = id_map_get(&box->targets, entity_id);
    if (!target) {
        target = xcalloc(1, sizeof *target);
        target->stream = ++box->last_stream;
        target->next_sequence = 1;
        id_map_put(&box->targets, entity_id, target);
    }
    return target;
}

/* Sends one stamped message to `where`; reports a failure. Returns 0, or -1
 * when it failed: then a cached address naming `where` is dropped, so that
 * the next message asks the directory (the real may have been restored
 * elsewhere after its cellapp died). */
static int mailbox_deliver(mailbox *box, mailbox_target *target, const Tessera__Cluster__CellMessage *message,
                           uint64_t where) {
    if (box->send(where, message, box->user_data) == 0) return 0;
    if (target->cached_cellapp == where) target->cached_cellapp = 0;
    if (box->failed) {
        char reason[96];
        snprintf(reason, sizeof reason, "process %" PRIu64 " is not reachable", where);
        box->failed(message->entity_id, message->sequence, reason, box->user_data);
    }
    return -1;
}

static void mailbox_on_lookup(redis_client *redis, redisReply *reply, void *user_data) {
    mailbox_lookup *lookup = user_data;
    (void)redis;
    mailbox *box = lookup->box;
    if (box) {
        if (lookup->previous)
            lookup->previous->next = lookup->next;
        else
            box->lookups = lookup->next;
        if (lookup->next) lookup->next->previous = lookup->previous;
    }
    mailbox_target *target = box ? id_map_get(&box->targets, lookup->entity_id) : NULL;
    if (!target) {
        free(lookup);
        return;
    }
    target->looking_up = false;
    uint64_t where = 0;
    if (reply && reply->type == REDIS_REPLY_STRING) {
        /* "<cellapp>:<incarnation>" */
        char *colon = NULL;
        where = strtoull(reply->str, &colon, 10);
        uint32_t incarnation = colon && *colon == ':' ? (uint32_t)strtoul(colon + 1, NULL, 10) : 0;
        if (where && incarnation >= target->cached_incarnation) {
            target->cached_cellapp = where;
            target->cached_incarnation = incarnation;
        }
    }
    if (where == 0) {
        mailbox_fail_waiting(box, lookup->entity_id, target,
                             reply ? "the cell directory does not know the entity" : "Redis did not answer");
        free(lookup);
        return;
    }
    for (size_t i = 0; i < target->waiting_count; i++) {
        Tessera__Cluster__CellMessage *message =
            tessera__cluster__cell_message__unpack(NULL, target->waiting[i].length, target->waiting[i].encoded);
        if (message) {
            mailbox_deliver(box, target, message, where);
            tessera__cluster__cell_message__free_unpacked(message, NULL);
        }
        free(target->waiting[i].encoded);
    }
    target->waiting_count = 0;
    free(lookup);
}

uint64_t mailbox_send_cell(mailbox *box, Tessera__Cluster__CellMessage *message, uint64_t where, uint64_t now_ms) {
    mailbox_target *target = mailbox_target_for(box, message->entity_id);
    target->last_used_ms = now_ms;
    message->sender_id = box->self_id;
    message->stream = target->stream;
    message->sequence = target->next_sequence++;
    message->hops = 0;
    /* No address given: the directory's last answer, while it stands (a
     * stale one costs a forward along the ghost route, or a failure that
     * clears it). */
    if (!where) where = target->cached_cellapp;
    if (where && !target->looking_up) return mailbox_deliver(box, target, message, where) == 0 ? message->sequence : 0;
    /* Held for the directory, in order behind what already waits. */
    if (target->waiting_count == target->waiting_capacity) {
        target->waiting_capacity = target->waiting_capacity ? target->waiting_capacity * 2 : 4;
        target->waiting = xrealloc(target->waiting, target->waiting_capacity * sizeof *target->waiting);
    }
    mailbox_waiting *waiting = &target->waiting[target->waiting_count++];
    waiting->length = tessera__cluster__cell_message__get_packed_size(message);
    waiting->encoded = xmalloc(waiting->length ? waiting->length : 1);
    tessera__cluster__cell_message__pack(message, waiting->encoded);
    waiting->sequence = message->sequence;
    if (target->looking_up) return message->sequence;
    char key[REDIS_KEY_MAX], field[24];
    redis_key_cell_directory(key, box->cluster);
    snprintf(field, sizeof field, "%" PRIu64, message->entity_id);
    mailbox_lookup *lookup = xcalloc(1, sizeof *lookup);
    lookup->box = box;
    lookup->entity_id = message->entity_id;
    const char *argv[] = {"HGET", key, field};
    size_t lengths[] = {4, strlen(key), strlen(field)};
    if (!box->redis || redis_client_command_argv(box->redis, mailbox_on_lookup, lookup, 3, argv, lengths) != 0) {
        free(lookup);
        mailbox_fail_waiting(box, message->entity_id, target,
                             "Redis is not connected: the cell directory is out of reach");
        return 0;
    }
    lookup->next = box->lookups;
    if (box->lookups) box->lookups->previous = lookup;
    box->lookups = lookup;
    target->looking_up = true;
    return message->sequence;
}

void mailbox_on_failed(mailbox *box, const Tessera__Cluster__CellMessageFailed *failed) {
    mailbox_target *target = id_map_get(&box->targets, failed->entity_id);
    if (target) target->cached_cellapp = 0;
    if (box->failed)
        box->failed(failed->entity_id, failed->sequence, failed->reason ? failed->reason : "", box->user_data);
}

void mailbox_sweep(mailbox *box, uint64_t now_ms) {
    uint64_t *idle = NULL;
    size_t idle_count = 0, idle_capacity = 0, cursor = 0;
    uint64_t id;
    void *value;
    while (id_map_next(&box->targets, &cursor, &id, &value)) {
        mailbox_target *target = value;
        if (target->looking_up || target->waiting_count || now_ms - target->last_used_ms < MAILBOX_IDLE_MS) continue;
        if (idle_count == idle_capacity) {
            idle_capacity = idle_capacity ? idle_capacity * 2 : 16;
            idle = xrealloc(idle, idle_capacity * sizeof *idle);
        }
        idle[idle_count++] = id;
    }
    for (size_t i = 0; i < idle_count; i++) mailbox_free_target(id_map_remove(&box->targets, idle[i]));
    free(idle);
}

/* Only a later incarnation replaces an entry: reals of one entity on
 * different cellapps may write in any order. */
static const char MAILBOX_DIRECTORY_SET_SCRIPT[] =
    "local old = redis.call('HGET', KEYS[1], ARGV[1])\n"
    "if old then\n"
    "  local incarnation = tonumber(string.match(old, ':(%d+)$'))\n"
    "  if incarnation and incarnation >= tonumber(ARGV[3]) then return 0 end\n"
    "end\n"
    "redis.call('HSET', KEYS[1], ARGV[1], ARGV[2] .. ':' .. ARGV[3])\n"
    "return 1\n";

static const char MAILBOX_DIRECTORY_REMOVE_SCRIPT[] =
    "if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then return redis.call('HDEL', KEYS[1], ARGV[1]) end\n"
    "return 0\n";

void mailbox_directory_set(redis_client *redis, const char *cluster_name, uint64_t entity_id, uint64_t cellapp_id,
                           uint32_t incarnation) {
    if (!redis || !redis_client_is_connected(redis)) return;
    char key[REDIS_KEY_MAX], field[24], cellapp[24], generation[16];
    redis_key_cell_directory(key, cluster_name);
    snprintf(field, sizeof field, "%" PRIu64, entity_id);
    snprintf(cellapp, sizeof cellapp, "%" PRIu64, cellapp_id);
    snprintf(generation, sizeof generation, "%u", incarnation);
    const char *argv[] = {"EVAL", MAILBOX_DIRECTORY_SET_SCRIPT, "1", key, field, cellapp, generation};
    size_t lengths[7];
    for (int i = 0; i < 7; i++) lengths[i] = strlen(argv[i]);
    redis_client_command_argv(redis, NULL, NULL, 7, argv, lengths);
}

void mailbox_directory_remove(redis_client *redis, const char *cluster_name, uint64_t entity_id, uint64_t cellapp_id,
                              uint32_t incarnation) {
    if (!redis || !redis_client_is_connected(redis)) return;
    char key[REDIS_KEY_MAX], field[24], value[48];
    redis_key_cell_directory(key, cluster_name);
    snprintf(field, sizeof field, "%" PRIu64, entity_id);
    snprintf(value, sizeof value, "%" PRIu64 ":%u", cellapp_id, incarnation);
    const char *argv[] = {"EVAL", MAILBOX_DIRECTORY_REMOVE_SCRIPT, "1", key, field, value};
    size_t lengths[6];
    for (int i = 0; i < 6; i++) lengths[i] = strlen(argv[i]);
    redis_client_command_argv(redis, NULL, NULL, 6, argv, lengths);
}

/* KEYS: the directory, the dead set; ARGV: entity id, claimant, at least,
 * whether an entry naming the claimant may be taken ("1") or means the
 * claimant holds it already ("0"), whether a missing entry may be made
 * ("1"). Returns {claimed, holder, incarnation}. */
static const char MAILBOX_DIRECTORY_CLAIM_SCRIPT[] =
    "local old = redis.call('HGET', KEYS[1], ARGV[1])\n"
    "if not old then\n"
    "  if ARGV[5] ~= '1' then return {0, '0', 0} end\n"
    "  local made = math.max(1, tonumber(ARGV[3]))\n"
    "  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2] .. ':' .. made)\n"
    "  return {1, '0', made}\n"
    "end\n"
    "local owner, incarnation = string.match(old, '^(%d+):(%d+)$')\n"
    "if not owner then return {0, '0', 0} end\n"
    "incarnation = tonumber(incarnation)\n"
    "if owner == ARGV[2] then\n"
    "  if ARGV[4] ~= '1' then return {0, owner, incarnation} end\n"
    "elseif not redis.call('ZSCORE', KEYS[2], owner) then return {0, owner, incarnation} end\n"
    "local claimed = math.max(incarnation + 1, tonumber(ARGV[3]))\n"
    "redis.call('HSET', KEYS[1], ARGV[1], ARGV[2] .. ':' .. claimed)\n"
    "return {1, owner, claimed}\n";

typedef struct mailbox_claim {
    uint64_t entity_id;
    mailbox_claim_callback done;
    void *context;
} mailbox_claim;

static void mailbox_on_claimed(redis_client *redis, redisReply *reply, void *user_data) {
    (void)redis;
    mailbox_claim *claim = user_data;
    if (!reply || reply->type != REDIS_REPLY_ARRAY || reply->elements != 3 ||
        reply->element[0]->type != REDIS_REPLY_INTEGER || reply->element[2]->type != REDIS_REPLY_INTEGER) {
        log_warn("entity %" PRIu64 ": the cell directory did not answer its claim (%s)", claim->entity_id,
                 reply && reply->type == REDIS_REPLY_ERROR ? reply->str : "no reply");
        claim->done(claim->entity_id, false, true, 0, 0, claim->context);
        free(claim);
        return;
    }
    uint64_t holder = 0;
    if (reply->element[1]->type == REDIS_REPLY_STRING) holder = strtoull(reply->element[1]->str, NULL, 10);
    claim->done(claim->entity_id, reply->element[0]->integer == 1, false, (uint32_t)reply->element[2]->integer, holder,
                claim->context);
    free(claim);
}

int mailbox_directory_claim(redis_client *redis, const char *cluster_name, uint64_t entity_id, uint64_t claimant,
                            uint32_t at_least, bool take_own, bool make_missing, mailbox_claim_callback done,
                            void *context) {
    if (!redis || !redis_client_is_connected(redis)) return -1;
    char key[REDIS_KEY_MAX], dead[REDIS_KEY_MAX], field[24], who[24], least[16];
    redis_key_cell_directory(key, cluster_name);
    redis_key_dead(dead, cluster_name);
    snprintf(field, sizeof field, "%" PRIu64, entity_id);
    snprintf(who, sizeof who, "%" PRIu64, claimant);
    snprintf(least, sizeof least, "%u", at_least);
    const char *argv[] = {"EVAL",
                          MAILBOX_DIRECTORY_CLAIM_SCRIPT,
                          "2",
                          key,
                          dead,
                          field,
                          who,
                          least,
                          take_own ? "1" : "0",
                          make_missing ? "1" : "0"};
    size_t lengths[10];
    for (int i = 0; i < 10; i++) lengths[i] = strlen(argv[i]);
    mailbox_claim *claim = xcalloc(1, sizeof *claim);
    *claim = (mailbox_claim){entity_id, done, context};
    if (redis_client_command_argv(redis, mailbox_on_claimed, claim, 10, argv, lengths) != 0) {
        free(claim);
        return -1;
    }
    return 0;
}

/* ---- receiving -------------------------------------------------------------- */

typedef struct mailbox_held {
    uint64_t sequence;
    uint8_t *encoded;
    size_t length;
} mailbox_held;

typedef struct mailbox_stream {
    uint64_t sender;
    uint64_t stream;
    uint64_t next_sequence;
    uint64_t gap_since_us; /* when the oldest held message arrived */
    mailbox_held *held;    /* sorted by sequence */
    size_t held_count, held_capacity;
    bool resync; /* the next message offered starts the stream where it is (mailbox_inbox_resync) */
} mailbox_stream;

struct mailbox_inbox {
    mailbox_stream *streams; /* one per sender: a handful */
    size_t count, capacity;
    uint64_t resync_until_us; /* a sender first heard before then starts where it is */
};

mailbox_inbox *mailbox_inbox_create(void) { return xcalloc(1, sizeof(mailbox_inbox)); }

void mailbox_inbox_free(mailbox_inbox *inbox) {
    if (!inbox) return;
    for (size_t s = 0; s < inbox->count; s++) {
        for (size_t i = 0; i < inbox->streams[s].held_count; i++) free(inbox->streams[s].held[i].encoded);
        free(inbox->streams[s].held);
    }
    free(inbox->streams);
    free(inbox);
}

static mailbox_stream *mailbox_inbox_stream(mailbox_inbox *inbox, uint64_t sender) {
    for (size_t s = 0; s < inbox->count; s++)
        if (inbox->streams[s].sender == sender) return &inbox->streams[s];
    if (inbox->count == inbox->capacity) {
        inbox->capacity = inbox->capacity ? inbox->capacity * 2 : 2;
        inbox->streams = xrealloc(inbox->streams, inbox->capacity * sizeof *inbox->streams);
    }
    mailbox_stream *stream = &inbox->streams[inbox->count++];
    memset(stream, 0, sizeof *stream);
    stream->sender = sender;
    stream->next_sequence = 1;
    stream->resync = inbox->resync_until_us != 0;
    return stream;
}

void mailbox_inbox_resync(mailbox_inbox *inbox, uint64_t until_us) {
    inbox->resync_until_us = until_us;
    for (size_t s = 0; s < inbox->count; s++) {
        mailbox_stream *stream = &inbox->streams[s];
        stream->resync = true;
        if (stream->held_count) stream->next_sequence = stream->held[0].sequence;
    }
}

static void mailbox_stream_clear(mailbox_stream *stream) {
    for (size_t i = 0; i < stream->held_count; i++) free(stream->held[i].encoded);
    stream->held_count = 0;
}

static void mailbox_stream_hold(mailbox_stream *stream, uint64_t sequence, const uint8_t *encoded, size_t length,
                                uint64_t now_us) {
    size_t at = stream->held_count;
    while (at > 0 && stream->held[at - 1].sequence > sequence) at--;
    if (at > 0 && stream->held[at - 1].sequence == sequence) return; /* held already */
    if (stream->held_count == stream->held_capacity) {
        stream->held_capacity = stream->held_capacity ? stream->held_capacity * 2 : 4;
        stream->held = xrealloc(stream->held, stream->held_capacity * sizeof *stream->held);
    }
    memmove(&stream->held[at + 1], &stream->held[at], (stream->held_count - at) * sizeof *stream->held);
    stream->held[at].sequence = sequence;
    stream->held[at].length = length;
    stream->held[at].encoded = xmalloc(length ? length : 1);
    if (length) memcpy(stream->held[at].encoded, encoded, length);
    if (stream->held_count == 0) stream->gap_since_us = now_us;
    stream->held_count++;
}

mailbox_verdict mailbox_inbox_offer(mailbox_inbox *inbox, uint64_t sender, uint64_t stream_number, uint64_t sequence,
                                    uint64_t now_us) {
    if (inbox->resync_until_us && now_us > inbox->resync_until_us) inbox->resync_until_us = 0;
    mailbox_stream *stream = mailbox_inbox_stream(inbox, sender);
    if (stream_number < stream->stream) return MAILBOX_DUPLICATE;
    if (stream_number > stream->stream) {
        mailbox_stream_clear(stream);
        stream->stream = stream_number;
        stream->next_sequence = 1;
    }
    if (stream->resync) {
        /* What was sent between the state this inbox was restored from and
         * now went to a cellapp that died: it will never come. */
        stream->resync = false;
        if (sequence > stream->next_sequence && !stream->held_count) stream->next_sequence = sequence;
    }
    if (sequence < stream->next_sequence) return MAILBOX_DUPLICATE;
    if (sequence == stream->next_sequence) {
        stream->next_sequence++;
        if (stream->held_count) stream->gap_since_us = now_us; /* progress: the gap clock starts again */
        return MAILBOX_DELIVER;
    }
    return MAILBOX_HOLD;
}

void mailbox_inbox_hold(mailbox_inbox *inbox, uint64_t sender, uint64_t sequence, const uint8_t *encoded, size_t length,
                        uint64_t now_us) {
    mailbox_stream_hold(mailbox_inbox_stream(inbox, sender), sequence, encoded, length, now_us);
}

uint8_t *mailbox_inbox_next(mailbox_inbox *inbox, uint64_t now_us, uint64_t gap_us, size_t *length, uint64_t *skipped) {
    *skipped = 0;
    for (size_t s = 0; s < inbox->count; s++) {
        mailbox_stream *stream = &inbox->streams[s];
        /* Duplicates that were held twice fall out first. */
        while (stream->held_count && stream->held[0].sequence < stream->next_sequence) {
            free(stream->held[0].encoded);
            memmove(&stream->held[0], &stream->held[1], (stream->held_count - 1) * sizeof *stream->held);
            stream->held_count--;
        }
        if (!stream->held_count) continue;
        mailbox_held *first = &stream->held[0];
        if (first->sequence != stream->next_sequence) {
            if (now_us - stream->gap_since_us < gap_us) continue;
            *skipped = first->sequence - stream->next_sequence;
        }
        uint8_t *encoded = first->encoded;
        *length = first->length;
        stream->next_sequence = first->sequence + 1;
        memmove(&stream->held[0], &stream->held[1], (stream->held_count - 1) * sizeof *stream->held);
        stream->held_count--;
        stream->gap_since_us = now_us;
        return encoded;
    }
    return NULL;
}

size_t mailbox_inbox_held_count(const mailbox_inbox *inbox) {
    size_t held = 0;
    for (size_t s = 0; s < inbox->count; s++) held += inbox->streams[s].held_count;
    return held;
}

void mailbox_inbox_save(const mailbox_inbox *inbox, uint64_t now_us, Tessera__Cluster__InboxStream ***out,
                        size_t *count) {
    *count = inbox->count;
    *out = inbox->count ? xcalloc(inbox->count, sizeof(Tessera__Cluster__InboxStream *)) : NULL;
    for (size_t s = 0; s < inbox->count; s++) {
        const mailbox_stream *stream = &inbox->streams[s];
        Tessera__Cluster__InboxStream *saved = xmalloc(sizeof *saved);
        tessera__cluster__inbox_stream__init(saved);
        saved->sender_id = stream->sender;
        saved->stream = stream->stream;
        saved->next_sequence = stream->next_sequence;
        saved->gap_age_us = stream->held_count ? now_us - stream->gap_since_us : 0;
        saved->n_held = saved->n_held_sequence = stream->held_count;
        if (stream->held_count) {
            saved->held = xcalloc(stream->held_count, sizeof *saved->held);
            saved->held_sequence = xcalloc(stream->held_count, sizeof *saved->held_sequence);
            for (size_t i = 0; i < stream->held_count; i++) {
                saved->held[i].data = stream->held[i].encoded;
                saved->held[i].len = stream->held[i].length;
                saved->held_sequence[i] = stream->held[i].sequence;
            }
        }
        (*out)[s] = saved;
    }
}

void mailbox_inbox_saved_free(Tessera__Cluster__InboxStream **streams, size_t count) {
    for (size_t s = 0; s < count; s++) {
        free(streams[s]->held);
        free(streams[s]->held_sequence);
        free(streams[s]);
    }
    free(streams);
}

mailbox_inbox *mailbox_inbox_restore(Tessera__Cluster__InboxStream *const *streams, size_t count, uint64_t now_us) {
    mailbox_inbox *inbox = mailbox_inbox_create();
    for (size_t s = 0; s < count; s++) {
        const Tessera__Cluster__InboxStream *saved = streams[s];
        mailbox_stream *stream = mailbox_inbox_stream(inbox, saved->sender_id);
        stream->stream = saved->stream;
        stream->next_sequence = saved->next_sequence ? saved->next_sequence : 1;
        size_t held = saved->n_held < saved->n_held_sequence ? saved->n_held : saved->n_held_sequence;
        for (size_t i = 0; i < held; i++)
            mailbox_stream_hold(stream, saved->held_sequence[i], saved->held[i].data, saved->held[i].len, now_us);
        if (stream->held_count) stream->gap_since_us = now_us > saved->gap_age_us ? now_us - saved->gap_age_us : 0;
    }
    return inbox;
}
