/* login_queue.c -- the bounded queue of password hashes (login_queue.h):
 * the FIFO of waiting jobs, the per-account and per-address counts, and
 * the hand-off of jobs to libuv's thread pool. */
#include "login_queue.h"

#include <string.h>

#include "clock.h"
#include "log.h"
#include "login_throttle.h"
#include "text_key.h"

void login_queue_init(login_queue *queue, uv_loop_t *loop, const login_queue_limits *limits) {
    memset(queue, 0, sizeof *queue);
    queue->loop = loop;
    queue->limits = *limits;
    if (queue->limits.workers == 0) queue->limits.workers = 1;
    id_map_init(&queue->by_account);
    id_map_init(&queue->by_address);
}

void login_queue_close(login_queue *queue) {
    id_map_close(&queue->by_account);
    id_map_close(&queue->by_address);
}

static uintptr_t login_queue_count(const id_map *map, uint64_t key) { return (uintptr_t)id_map_get(map, key); }

static void login_queue_add(id_map *map, uint64_t key, int delta) {
    uintptr_t count = login_queue_count(map, key) + (uintptr_t)(intptr_t)delta;
    if (count == 0)
        id_map_remove(map, key);
    else
        id_map_put(map, key, (void *)count);
}

void login_queue_leave(login_queue *queue, login_queue_job *job) {
    if (!job->entered) return;
    job->entered = false;
    login_queue_add(&queue->by_account, job->account_key, -1);
    login_queue_add(&queue->by_address, job->address_key, -1);
}

static void login_queue_pump(login_queue *queue);

static void login_queue_work(uv_work_t *work) {
    login_queue_job *job = work->data;
    job->run(job);
}

static void login_queue_after_work(uv_work_t *work, int status) {
    login_queue_job *job = work->data;
    login_queue *queue = job->queue;
    queue->counters.running--;
    queue->counters.hashed++;
    job->done(job, status);
    login_queue_pump(queue);
}

/* Starts waiting jobs while workers are free; drops those nobody waits
 * for any more. */
static void login_queue_pump(login_queue *queue) {
    while (queue->head && queue->counters.running < queue->limits.workers) {
        login_queue_job *job = queue->head;
        queue->head = job->next;
        if (!queue->head) queue->tail = NULL;
        queue->counters.waiting--;
        job->next = NULL;
        uint64_t waited_us = clock_monotonic_us() - job->queued_us;
        if (waited_us > queue->counters.wait_us_max) queue->counters.wait_us_max = waited_us;
        if (!job->wanted(job)) {
            queue->counters.dropped++;
            job->dropped(job);
            continue;
        }
        job->work.data = job;
        int rc = uv_queue_work(queue->loop, &job->work, login_queue_work, login_queue_after_work);
        if (rc != 0) {
            log_error("a password hash could not be queued on the thread pool: %s", uv_strerror(rc));
            job->done(job, rc);
            continue;
        }
        queue->counters.running++;
    }
}

login_queue_refusal login_queue_enter(login_queue *queue, login_queue_job *job, const char *account,
                                      const char *address) {
    uint64_t account_key = text_key_string(account), address_key = login_throttle_address_key(address);
    if (login_queue_count(&queue->by_account, account_key) >= queue->limits.per_account) {
        queue->counters.refused_account++;
        return LOGIN_QUEUE_ACCOUNT_BUSY;
    }
    if (login_queue_count(&queue->by_address, address_key) >= queue->limits.per_address) {
        queue->counters.refused_address++;
        return LOGIN_QUEUE_ADDRESS_BUSY;
    }
    job->queue = queue;
    job->entered = true;
    job->account_key = account_key;
    job->address_key = address_key;
    login_queue_add(&queue->by_account, account_key, 1);
    login_queue_add(&queue->by_address, address_key, 1);
    return LOGIN_QUEUE_ACCEPTED;
}

login_queue_refusal login_queue_push(login_queue *queue, login_queue_job *job) {
    if (queue->counters.waiting >= queue->limits.waiting_max) {
        queue->counters.refused_full++;
        return LOGIN_QUEUE_FULL;
    }
    job->queue = queue;
    job->next = NULL;
    job->queued_us = clock_monotonic_us();
    if (queue->tail)
        queue->tail->next = job;
    else
        queue->head = job;
    queue->tail = job;
    queue->counters.waiting++;
    login_queue_pump(queue);
    return LOGIN_QUEUE_ACCEPTED;
}
