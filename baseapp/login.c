/* login.c -- checking a client's account and password (login.h). It owns
 * the login requests in flight. Every step holds the client link by
 * handle: a client that disconnects mid-login simply makes the next step a
 * no-op.
 *
 * With auto_create_accounts, an unknown account is created with the
 * password given (HSETNX, so two first logins racing for one name cannot
 * both win: the loser is checked against the winner's password). */
#include <inttypes.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "login.h"

#include "clock.h"
#include "log.h"
#include "redis_keys.h"

typedef enum login_step {
    LOGIN_VERIFY, /* thread pool: compare the password with the stored hash */
    LOGIN_HASH,   /* thread pool: hash the password for a new account */
    /* thread pool: an unknown account costs what a wrong password costs (a
     * hash at the configured limits), so timing does not tell them apart */
    LOGIN_DECOY,
} login_step;

struct logins {
    logins_context context;
    login_queue queue;
};

logins *logins_create(const logins_context *context) {
    logins *set = xcalloc(1, sizeof *set);
    set->context = *context;
    const baseapp_settings *settings = context->settings;
    login_queue_limits limits = {(uint32_t)settings->login_hash_workers, (uint32_t)settings->login_hash_queue_max,
                                 (uint32_t)settings->login_hashes_per_account,
                                 (uint32_t)settings->login_hashes_per_address};
    login_queue_init(&set->queue, context->loop, &limits);
    return set;
}

void logins_free(logins *set) {
    if (!set) return;
    login_queue_close(&set->queue);
    free(set);
}

const login_queue_counters *logins_queue_figures(const logins *set) { return &set->queue.counters; }

/* One login in flight. The queue's job comes first: the queue's callbacks
 * get the job, which is the request. */
typedef struct login_request {
    login_queue_job job;
    logins *set;
    entity_handle link_handle;
    login_step step;
    int retried; /* lost an HSETNX race once already */
    char account[72];
    char password[129];
    char stored_hash[crypto_pwhash_STRBYTES];
    int result; /* thread pool result: 0 ok */
    unsigned long long ops_limit;
    size_t mem_limit;
} login_request;

static void login_lookup(login_request *request);

/* What a client is told for an unknown account and for a wrong password
 * alike; the log says which. */
#define LOGIN_REFUSED "unknown account or wrong password"

static void login_queue_work(client_link *link, login_request *request, login_step step);

/* How long a login refused by a full hash queue waits before trying again. */
#define LOGIN_BUSY_RETRY_MS 250

/* The credentials checked out: the attempt counted at arrival comes back. */
static void login_verified(logins *set, client_link *link) {
    client_link_refund_login(link);
    if (set->context.verified) set->context.verified(set->context.owner, link);
}

static void login_request_free(login_request *request) {
    login_queue_leave(&request->set->queue, &request->job);
    sodium_memzero(request->password, sizeof request->password);
    free(request);
}

/* The link this request is for, or NULL if the client has left or been
 * dropped; in that case the request is finished and freed. */
static client_link *login_link(login_request *request) {
    client_link *link = client_links_get(request->set->context.links, request->link_handle);
    if (!link || link->state != CLIENT_LINK_AUTHENTICATING) {
        login_request_free(request);
        return NULL;
    }
    return link;
}

static void login_work(login_queue_job *job) {
    login_request *request = (login_request *)job;
    if (request->step == LOGIN_VERIFY) {
        request->result = crypto_pwhash_str_verify(request->stored_hash, request->password, strlen(request->password));
    } else {
        request->result = crypto_pwhash_str(request->stored_hash, request->password, strlen(request->password),
                                            request->ops_limit, request->mem_limit);
    }
}

static void login_on_created(redis_client *redis, redisReply *reply, void *user_data);

static void login_after_work(login_queue_job *job, int status) {
    login_request *request = (login_request *)job;
    client_link *link = login_link(request);
    if (!link) return;
    if (status != 0) {
        client_link_fail(link, TESSERA__CLIENT__ERROR_CODE__ERROR_UNAVAILABLE, "login cancelled");
        login_request_free(request);
        return;
    }
    /* A failure was counted when the login arrived (login_throttle.h). */
    if (request->step == LOGIN_DECOY) {
        client_link_fail_quietly(link, TESSERA__CLIENT__ERROR_CODE__ERROR_BAD_CREDENTIALS, LOGIN_REFUSED,
                                 "unknown account '%s'", request->account);
        login_request_free(request);
        return;
    }
    if (request->step == LOGIN_VERIFY) {
        if (request->result == 0) {
            login_verified(request->set, link);
        } else {
            client_link_fail_quietly(link, TESSERA__CLIENT__ERROR_CODE__ERROR_BAD_CREDENTIALS, LOGIN_REFUSED,
                                     "wrong password for account '%s'", request->account);
        }
        login_request_free(request);
        return;
    }
    if (request->result != 0) {
        log_error("account '%s': hashing the password failed (out of memory for %zu bytes?)", request->account,
                  request->mem_limit);
        client_link_fail(link, TESSERA__CLIENT__ERROR_CODE__ERROR_UNAVAILABLE,
                         "could not create the account, try again");
        login_request_free(request);
        return;
    }
    char key[REDIS_KEY_MAX];
    redis_key_account(key, request->set->context.settings->process.cluster_name, request->account);
    if (redis_client_command(request->set->context.redis, login_on_created, request, "HSETNX %s password_hash %s", key,
                             request->stored_hash) != 0) {
        client_link_fail(link, TESSERA__CLIENT__ERROR_CODE__ERROR_UNAVAILABLE,
                         "account database unavailable, try again");
        login_request_free(request);
    }
}

/* Whether the client still waits for this login (the queue asks before
 * a hash starts). */
static bool login_wanted(login_queue_job *job) {
    const login_request *request = (const login_request *)job;
    const client_link *link = client_links_get(request->set->context.links, request->link_handle);
    return link && link->state == CLIENT_LINK_AUTHENTICATING;
}

static void login_dropped(login_queue_job *job) { login_request_free((login_request *)job); }

static void login_queue_work(client_link *link, login_request *request, login_step step) {
    request->step = step;
    request->job.run = login_work;
    request->job.wanted = login_wanted;
    request->job.done = login_after_work;
    request->job.dropped = login_dropped;
    if (login_queue_push(&request->set->queue, &request->job) == LOGIN_QUEUE_ACCEPTED) return;
    /* Not checked at all: the attempt does not count against anyone. */
    client_link_refund_login(link);
    client_link_fail_retry(link, TESSERA__CLIENT__ERROR_CODE__ERROR_UNAVAILABLE, LOGIN_BUSY_RETRY_MS,
                           "this baseapp is checking too many passwords: log in again in a moment");
    login_request_free(request);
}

static void login_on_created(redis_client *redis, redisReply *reply, void *user_data) {
    login_request *request = user_data;
    (void)redis;
    client_link *link = login_link(request);
    if (!link) return;
    if (!reply || reply->type != REDIS_REPLY_INTEGER) {
        client_link_fail(link, TESSERA__CLIENT__ERROR_CODE__ERROR_UNAVAILABLE,
                         "account database unavailable, try again");
        login_request_free(request);
        return;
    }
    if (reply->integer == 1) {
        log_info("account '%s' created", request->account);
        login_verified(request->set, link);
        login_request_free(request);
        return;
    }
    /* Someone created the account first: check against their password. */
    if (request->retried) {
        client_link_fail(link, TESSERA__CLIENT__ERROR_CODE__ERROR_UNAVAILABLE,
                         "account '%s' is being created, try again", request->account);
        login_request_free(request);
        return;
    }
    request->retried = 1;
    login_lookup(request);
}

static void login_on_lookup(redis_client *redis, redisReply *reply, void *user_data) {
    login_request *request = user_data;
    (void)redis;
    client_link *link = login_link(request);
    if (!link) return;
    if (!reply || (reply->type != REDIS_REPLY_STRING && reply->type != REDIS_REPLY_NIL)) {
        client_link_fail(link, TESSERA__CLIENT__ERROR_CODE__ERROR_UNAVAILABLE,
                         "account database unavailable, try again");
        login_request_free(request);
        return;
    }
    if (reply->type == REDIS_REPLY_STRING) {
        if (reply->len >= sizeof request->stored_hash) {
            log_error("account '%s': stored password hash is malformed (%zu bytes)", request->account,
                      (size_t)reply->len);
            client_link_fail(link, TESSERA__CLIENT__ERROR_CODE__ERROR_UNAVAILABLE, "account record is damaged");
            login_request_free(request);
            return;
        }
        memcpy(request->stored_hash, reply->str, reply->len);
        request->stored_hash[reply->len] = '\0';
        login_queue_work(link, request, LOGIN_VERIFY);
        return;
    }
    if (!request->set->context.settings->auto_create_accounts) {
        login_queue_work(link, request, LOGIN_DECOY);
        return;
    }
    login_queue_work(link, request, LOGIN_HASH);
}

static void login_lookup(login_request *request) {
    char key[REDIS_KEY_MAX];
    redis_key_account(key, request->set->context.settings->process.cluster_name, request->account);
    if (redis_client_command(request->set->context.redis, login_on_lookup, request, "HGET %s password_hash", key) !=
        0) {
        client_link *link = login_link(request);
        if (!link) return;
        client_link_fail(link, TESSERA__CLIENT__ERROR_CODE__ERROR_UNAVAILABLE,
                         "account database unavailable, try again");
        login_request_free(request);
    }
}

void login_start(logins *set, client_link *link, const char *password) {
    const baseapp_settings *settings = set->context.settings;
    login_request *request = xcalloc(1, sizeof *request);
    request->set = set;
    request->link_handle = link->handle;
    snprintf(request->account, sizeof request->account, "%s", link->account);
    snprintf(request->password, sizeof request->password, "%s", password);
    request->ops_limit = (unsigned long long)settings->password_ops_limit;
    request->mem_limit = (size_t)settings->password_mem_limit_kib * 1024u;
    /* Logins in progress per account and address are bounded first, so a
     * crowd's burst is told to wait rather than counted as failures; then
     * the attempt is counted, before any lookup or hash. */
    login_queue_refusal refusal =
        login_queue_enter(&set->queue, &request->job, request->account, channel_peer_name(link->ch));
    if (refusal != LOGIN_QUEUE_ACCEPTED) {
        client_link_fail_retry(link, TESSERA__CLIENT__ERROR_CODE__ERROR_RATE_LIMITED, LOGIN_BUSY_RETRY_MS,
                               refusal == LOGIN_QUEUE_ACCOUNT_BUSY
                                   ? "account '%s' has a login being checked already: wait for it"
                                   : "this address has too many logins being checked: wait for them (account '%s')",
                               request->account);
        login_request_free(request);
        return;
    }
    if (!client_link_charge_login(link)) {
        login_request_free(request);
        return;
    }
    login_lookup(request);
}
