/* login_queue.h -- the bounded queue of password hashes.
 *
 * A password hash (argon2id, ~5 ms and 19 MiB) is the costliest thing a
 * client can ask of a baseapp before it has proven anything. Every hash
 * waits here for one of `workers` slots on libuv's thread pool, so hashes
 * never take every thread and the queue never grows without bound:
 *
 *   - at most `per_account` logins of one account and `per_address` from
 *     one client address are in progress at once, from their arrival
 *     (login_queue_enter) to their end (login_queue_leave): the account
 *     lookup, the wait and the hash. Beyond, a new one is refused at once
 *     (the caller tells the client to retry shortly), before it costs
 *     anything -- or counts against the throttle's buckets, so a burst of
 *     a crowd's logins never empties them;
 *   - at most `waiting_max` hashes wait in all; beyond, refused the same
 *     way (login_queue_push);
 *   - a job whose client has gone by the time a slot frees up is dropped
 *     without hashing (login_queue_job.wanted), so connections that send a
 *     login and reset cost a queue entry, not a hash.
 *
 * Jobs run in arrival order. The queue does not own the jobs: the caller
 * allocates one, embeds a login_queue_job in it, enters it, pushes it
 * (once or more: a login may need two hashes), and leaves it before
 * freeing it; the queue calls `done` or `dropped` exactly once per push it
 * accepted.
 */
#ifndef TESSERA_LOGIN_QUEUE_H
#define TESSERA_LOGIN_QUEUE_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "id_map.h"

typedef struct login_queue_job login_queue_job;

struct login_queue_job {
    uv_work_t work;
    /* On a pool thread: the hash. */
    void (*run)(login_queue_job *job);
    /* On the loop, when a slot is free: whether it is still worth doing
     * (its client is still waiting). */
    bool (*wanted)(login_queue_job *job);
    /* On the loop: the hash ran (status 0) or failed to (a libuv error). */
    void (*done)(login_queue_job *job, int status);
    /* On the loop: not wanted any more; never ran. */
    void (*dropped)(login_queue_job *job);
    /* Filled by login_queue_enter and login_queue_push. */
    struct login_queue *queue;
    login_queue_job *next;
    bool entered;
    uint64_t account_key, address_key;
    uint64_t queued_us; /* when it was pushed (monotonic) */
};

typedef struct login_queue_limits {
    uint32_t workers;     /* hashes running at once */
    uint32_t waiting_max; /* hashes waiting for a worker */
    uint32_t per_account; /* logins in progress, of one account */
    uint32_t per_address; /* logins in progress, from one client address */
} login_queue_limits;

typedef struct login_queue_counters {
    uint64_t hashed;           /* jobs that ran */
    uint64_t dropped;          /* jobs whose client left before a worker was free */
    uint64_t refused_full;     /* pushes refused: waiting_max reached */
    uint64_t refused_account;  /* ... per_account reached */
    uint64_t refused_address;  /* ... per_address reached */
    uint64_t waiting, running; /* now */
    uint64_t wait_us_max;      /* the longest a job waited for a worker (since start) */
} login_queue_counters;

typedef struct login_queue {
    uv_loop_t *loop;
    login_queue_limits limits;
    login_queue_job *head, *tail;
    id_map by_account, by_address; /* key -> jobs waiting or running, as a uintptr_t */
    login_queue_counters counters;
} login_queue;

typedef enum login_queue_refusal {
    LOGIN_QUEUE_ACCEPTED = 0,
    LOGIN_QUEUE_FULL,
    LOGIN_QUEUE_ACCOUNT_BUSY,
    LOGIN_QUEUE_ADDRESS_BUSY,
} login_queue_refusal;

void login_queue_init(login_queue *queue, uv_loop_t *loop, const login_queue_limits *limits);
/* Every job must be done first (the loop drained). */
void login_queue_close(login_queue *queue);

/* A login of `account` from `address` (an IP, a port after the last ':'
 * ignored) begins: LOGIN_QUEUE_ACCEPTED, or the limit it met (nothing is
 * counted then). */
login_queue_refusal login_queue_enter(login_queue *queue, login_queue_job *job, const char *account,
                                      const char *address);
/* ... and ends (a job never entered, or left already: nothing). */
void login_queue_leave(login_queue *queue, login_queue_job *job);
/* Queues `job`'s hash (its callbacks set). LOGIN_QUEUE_ACCEPTED: its
 * `done` or `dropped` will be called; LOGIN_QUEUE_FULL: not queued. */
login_queue_refusal login_queue_push(login_queue *queue, login_queue_job *job);

#endif
