/* test_mailbox.c -- unit tests for mailbox (common/mailbox.h).
 *
 * The receiving side (mailbox_inbox) in full: in-order delivery, duplicates,
 * early messages held and handed back by mailbox_inbox_next exactly when the
 * gap fills (drained after every delivery with gap_us = UINT64_MAX, as
 * cellapp/cell_message.c does), gaps given up after gap_us and not before
 * (with the skipped count), the gap clock restarting on progress, several
 * independent senders, a new stream (larger number) restarting at sequence
 * 1 and dropping what was held, an older stream being a duplicate, a
 * sequence held twice kept once, and every one of the 720 arrival orders of
 * six messages delivering them once each, in order. Save and restore: the
 * streams travel (also through protobuf encoding) with their held messages,
 * next sequence and gap age. Everything runs leak-free under LSan.
 *
 * The sending side without Redis: stamping of sender, per-target stream and
 * per-entity sequences, what the send callback sees, failures reported
 * through the failed callback (an unreachable process, no Redis for a
 * directory lookup, a receiver's CellMessageFailed), and mailbox_sweep
 * forgetting idle targets so that the next message starts a new stream. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "mailbox.h"

/* ---- the receiving side ------------------------------------------------------ */

enum { MAX_RECORDED = 256, PAYLOAD_LENGTH = 4, PAYLOAD_MAGIC = 0xA5 };

/* One delivered message: which sender and sequence, and how it came. */
typedef struct delivery {
    uint64_t sender;
    uint64_t sequence;
    bool from_next; /* handed back by mailbox_inbox_next (else DELIVERed by offer) */
} delivery;

/* The caller around one inbox, doing what cell_message.c does: a DELIVERed
 * message is dispatched (recorded) and the inbox drained; a HELD one is
 * encoded and handed to mailbox_inbox_hold. */
typedef struct harness {
    mailbox_inbox *inbox;
    delivery delivered[MAX_RECORDED];
    size_t delivered_count;
    uint64_t skipped; /* summed over every next() */
    size_t duplicates;
} harness;

/* The payload a held message carries: magic, sender, sequence (16 bits). */
static void encode_payload(uint8_t out[PAYLOAD_LENGTH], uint64_t sender, uint64_t sequence) {
    out[0] = PAYLOAD_MAGIC;
    out[1] = (uint8_t)sender;
    out[2] = (uint8_t)(sequence & 0xff);
    out[3] = (uint8_t)(sequence >> 8);
}

static void record(harness *h, uint64_t sender, uint64_t sequence, bool from_next) {
    assert_true(h->delivered_count < MAX_RECORDED);
    h->delivered[h->delivered_count++] = (delivery){sender, sequence, from_next};
}

/* Takes everything mailbox_inbox_next hands out at now_us with gap_us;
 * returns how many it handed out. */
static size_t drain(harness *h, uint64_t now_us, uint64_t gap_us) {
    size_t count = 0;
    for (;;) {
        size_t length = 12345;
        uint64_t skipped = 999;
        uint8_t *encoded = mailbox_inbox_next(h->inbox, now_us, gap_us, &length, &skipped);
        if (!encoded) {
            assert_int_equal(skipped, 0);
            return count;
        }
        assert_int_equal(length, PAYLOAD_LENGTH);
        assert_int_equal(encoded[0], PAYLOAD_MAGIC);
        record(h, encoded[1], (uint64_t)encoded[2] | ((uint64_t)encoded[3] << 8), true);
        h->skipped += skipped;
        free(encoded);
        count++;
    }
}

/* Offers (sender, stream, sequence) at now_us and does what the verdict
 * asks. */
static mailbox_verdict offer(harness *h, uint64_t sender, uint64_t stream, uint64_t sequence, uint64_t now_us) {
    mailbox_verdict verdict = mailbox_inbox_offer(h->inbox, sender, stream, sequence, now_us);
    switch (verdict) {
        case MAILBOX_DELIVER:
            record(h, sender, sequence, false);
            drain(h, now_us, UINT64_MAX);
            break;
        case MAILBOX_HOLD: {
            uint8_t payload[PAYLOAD_LENGTH];
            encode_payload(payload, sender, sequence);
            mailbox_inbox_hold(h->inbox, sender, sequence, payload, sizeof payload, now_us);
            break;
        }
        case MAILBOX_DUPLICATE:
            h->duplicates++;
            break;
    }
    return verdict;
}

static void harness_init(harness *h) {
    memset(h, 0, sizeof *h);
    h->inbox = mailbox_inbox_create();
    assert_non_null(h->inbox);
    assert_int_equal(mailbox_inbox_held_count(h->inbox), 0);
}

static void harness_close(harness *h) {
    mailbox_inbox_free(h->inbox);
    h->inbox = NULL;
}

/* The delivered sequences of `sender` are exactly first..last, in order. */
static void assert_delivered_run(const harness *h, uint64_t sender, uint64_t first, uint64_t last) {
    uint64_t expected = first;
    for (size_t i = 0; i < h->delivered_count; i++) {
        if (h->delivered[i].sender != sender) continue;
        assert_int_equal(h->delivered[i].sequence, expected);
        expected++;
    }
    assert_int_equal(expected, last + 1);
}

#define SENDER_A 11u
#define SENDER_B 22u
#define SENDER_C 33u

static void test_in_order_delivery(void **state) {
    harness h;
    harness_init(&h);
    for (uint64_t s = 1; s <= 20; s++) {
        assert_int_equal(offer(&h, SENDER_A, 1, s, 1000 * s), MAILBOX_DELIVER);
        assert_int_equal(mailbox_inbox_held_count(h.inbox), 0);
    }
    assert_delivered_run(&h, SENDER_A, 1, 20);
    for (size_t i = 0; i < h.delivered_count; i++) assert_false(h.delivered[i].from_next);
    /* Nothing held: next() has nothing, whatever the gap. */
    assert_int_equal(drain(&h, UINT64_MAX / 2, 0), 0);
    harness_close(&h);
}

static void test_duplicates(void **state) {
    harness h;
    harness_init(&h);
    assert_int_equal(offer(&h, SENDER_A, 3, 1, 0), MAILBOX_DELIVER);
    assert_int_equal(offer(&h, SENDER_A, 3, 2, 0), MAILBOX_DELIVER);
    assert_int_equal(offer(&h, SENDER_A, 3, 3, 0), MAILBOX_DELIVER);
    /* Everything below next is a duplicate, however often it comes. */
    for (int round = 0; round < 3; round++) {
        assert_int_equal(offer(&h, SENDER_A, 3, 1, 0), MAILBOX_DUPLICATE);
        assert_int_equal(offer(&h, SENDER_A, 3, 2, 0), MAILBOX_DUPLICATE);
        assert_int_equal(offer(&h, SENDER_A, 3, 3, 0), MAILBOX_DUPLICATE);
    }
    assert_int_equal(h.duplicates, 9);
    assert_int_equal(mailbox_inbox_held_count(h.inbox), 0);
    /* A duplicate did not move the stream: 4 is still next. */
    assert_int_equal(offer(&h, SENDER_A, 3, 5, 0), MAILBOX_HOLD);
    assert_int_equal(offer(&h, SENDER_A, 3, 4, 0), MAILBOX_DELIVER);
    assert_delivered_run(&h, SENDER_A, 1, 5);
    assert_int_equal(h.delivered_count, 5);
    harness_close(&h);
}

/* Early messages wait exactly until the gap before them fills. */
static void test_hold_until_gap_fills(void **state) {
    harness h;
    harness_init(&h);
    assert_int_equal(offer(&h, SENDER_A, 1, 1, 100), MAILBOX_DELIVER);
    assert_int_equal(offer(&h, SENDER_A, 1, 3, 200), MAILBOX_HOLD);
    assert_int_equal(offer(&h, SENDER_A, 1, 5, 300), MAILBOX_HOLD);
    assert_int_equal(offer(&h, SENDER_A, 1, 6, 400), MAILBOX_HOLD);
    assert_int_equal(mailbox_inbox_held_count(h.inbox), 3);
    assert_int_equal(h.delivered_count, 1);
    /* The gap (2) is open: nothing comes out, however long without a gap limit. */
    assert_int_equal(drain(&h, UINT64_MAX - 1, UINT64_MAX), 0);
    assert_int_equal(drain(&h, 1000000, UINT64_MAX), 0);

    /* 2 fills the first gap: 3 comes out behind it, 5 and 6 wait for 4. */
    assert_int_equal(offer(&h, SENDER_A, 1, 2, 500), MAILBOX_DELIVER);
    assert_int_equal(h.delivered_count, 3);
    assert_int_equal(h.delivered[1].sequence, 2);
    assert_false(h.delivered[1].from_next);
    assert_int_equal(h.delivered[2].sequence, 3);
    assert_true(h.delivered[2].from_next);
    assert_int_equal(mailbox_inbox_held_count(h.inbox), 2);

    /* 4 fills the second: 5 and 6 follow. */
    assert_int_equal(offer(&h, SENDER_A, 1, 4, 600), MAILBOX_DELIVER);
    assert_int_equal(mailbox_inbox_held_count(h.inbox), 0);
    assert_delivered_run(&h, SENDER_A, 1, 6);
    assert_int_equal(h.delivered_count, 6);
    assert_true(h.delivered[4].from_next);
    assert_true(h.delivered[5].from_next);
    assert_int_equal(h.skipped, 0);
    /* What was held and delivered is a duplicate now. */
    assert_int_equal(offer(&h, SENDER_A, 1, 5, 700), MAILBOX_DUPLICATE);
    assert_int_equal(offer(&h, SENDER_A, 1, 7, 700), MAILBOX_DELIVER);
    harness_close(&h);
}

/* A gap that never fills is given up after gap_us, not before; the skipped
 * count is the number of sequences given up. */
static void test_gap_given_up(void **state) {
    const uint64_t gap = 2000000;
    harness h;
    harness_init(&h);
    assert_int_equal(offer(&h, SENDER_A, 1, 1, 0), MAILBOX_DELIVER);
    const uint64_t t0 = 1000000;
    assert_int_equal(offer(&h, SENDER_A, 1, 5, t0), MAILBOX_HOLD); /* 2, 3, 4 missing */
    assert_int_equal(offer(&h, SENDER_A, 1, 6, t0 + 10), MAILBOX_HOLD);
    assert_int_equal(offer(&h, SENDER_A, 1, 9, t0 + 20), MAILBOX_HOLD); /* 7, 8 missing */

    assert_int_equal(drain(&h, t0, gap), 0);
    assert_int_equal(drain(&h, t0 + gap / 2, gap), 0);
    assert_int_equal(drain(&h, t0 + gap - 1, gap), 0);
    assert_int_equal(mailbox_inbox_held_count(h.inbox), 3);

    /* At gap_us: 5 (three given up), then 6 in turn; 9 waits a new gap. */
    size_t length;
    uint64_t skipped;
    uint8_t *encoded = mailbox_inbox_next(h.inbox, t0 + gap, gap, &length, &skipped);
    assert_non_null(encoded);
    assert_int_equal(length, PAYLOAD_LENGTH);
    assert_int_equal(encoded[2], 5);
    assert_int_equal(skipped, 3);
    free(encoded);
    encoded = mailbox_inbox_next(h.inbox, t0 + gap, gap, &length, &skipped);
    assert_non_null(encoded);
    assert_int_equal(encoded[2], 6);
    assert_int_equal(skipped, 0);
    free(encoded);
    assert_int_equal(drain(&h, t0 + gap, gap), 0);
    assert_int_equal(mailbox_inbox_held_count(h.inbox), 1);

    /* The given-up sequences are duplicates if they come at last. */
    assert_int_equal(offer(&h, SENDER_A, 1, 3, t0 + gap), MAILBOX_DUPLICATE);
    assert_int_equal(offer(&h, SENDER_A, 1, 6, t0 + gap), MAILBOX_DUPLICATE);

    /* The gap before 9 is timed from the last progress (t0 + gap). */
    assert_int_equal(drain(&h, 2 * gap + t0 - 1, gap), 0);
    h.skipped = 0;
    assert_int_equal(drain(&h, 2 * gap + t0, gap), 1);
    assert_int_equal(h.skipped, 2);
    assert_int_equal(h.delivered[h.delivered_count - 1].sequence, 9);
    assert_int_equal(mailbox_inbox_held_count(h.inbox), 0);
    assert_int_equal(offer(&h, SENDER_A, 1, 10, 3 * gap), MAILBOX_DELIVER);
    harness_close(&h);
}

/* A delivery in order restarts the gap clock of what is still held. */
static void test_gap_clock_restarts_on_progress(void **state) {
    const uint64_t gap = 1000;
    harness h;
    harness_init(&h);
    assert_int_equal(offer(&h, SENDER_A, 1, 3, 0), MAILBOX_HOLD);
    assert_int_equal(offer(&h, SENDER_A, 1, 1, 900), MAILBOX_DELIVER);
    assert_int_equal(drain(&h, 1000, gap), 0); /* 1000 after the hold, 100 after progress */
    assert_int_equal(drain(&h, 1899, gap), 0);
    assert_int_equal(drain(&h, 1900, gap), 1);
    assert_int_equal(h.skipped, 1);
    assert_int_equal(h.delivered[1].sequence, 3);
    harness_close(&h);
}

/* gap_us = 0 gives a gap up at once; UINT64_MAX never. */
static void test_gap_limits(void **state) {
    harness h;
    harness_init(&h);
    assert_int_equal(offer(&h, SENDER_A, 1, 4, 50), MAILBOX_HOLD);
    assert_int_equal(drain(&h, UINT64_MAX - 1, UINT64_MAX), 0);
    assert_int_equal(drain(&h, 50, 0), 1);
    assert_int_equal(h.skipped, 3);
    assert_int_equal(h.delivered[0].sequence, 4);
    harness_close(&h);
}

/* Senders are separate streams: one's gap holds nobody else. */
static void test_senders_independent(void **state) {
    const uint64_t gap = 1000;
    harness h;
    harness_init(&h);
    assert_int_equal(offer(&h, SENDER_A, 5, 2, 0), MAILBOX_HOLD);
    assert_int_equal(offer(&h, SENDER_B, 9, 1, 0), MAILBOX_DELIVER);
    assert_int_equal(offer(&h, SENDER_B, 9, 3, 0), MAILBOX_HOLD);
    assert_int_equal(offer(&h, SENDER_C, 1, 1, 0), MAILBOX_DELIVER);
    assert_int_equal(offer(&h, SENDER_C, 1, 2, 0), MAILBOX_DELIVER);
    assert_int_equal(mailbox_inbox_held_count(h.inbox), 2);
    /* Each sender's numbers are its own: C's 2 is no duplicate of A's. */
    assert_int_equal(offer(&h, SENDER_B, 9, 2, 10), MAILBOX_DELIVER);
    assert_delivered_run(&h, SENDER_B, 1, 3);
    assert_delivered_run(&h, SENDER_A, 1, 0); /* nothing of A yet */
    assert_int_equal(mailbox_inbox_held_count(h.inbox), 1);
    /* A's stream number is independent of B's: a smaller one is fine. */
    assert_int_equal(offer(&h, SENDER_A, 5, 1, 20), MAILBOX_DELIVER);
    assert_delivered_run(&h, SENDER_A, 1, 2);
    assert_int_equal(mailbox_inbox_held_count(h.inbox), 0);

    /* A gap of B's given up does not touch C's held message's clock... */
    assert_int_equal(offer(&h, SENDER_B, 9, 6, 100), MAILBOX_HOLD);
    assert_int_equal(offer(&h, SENDER_C, 1, 4, 600), MAILBOX_HOLD);
    assert_int_equal(drain(&h, 1099, gap), 0);
    h.skipped = 0;
    assert_int_equal(drain(&h, 1100, gap), 1);
    assert_int_equal(h.skipped, 2);
    assert_int_equal(h.delivered[h.delivered_count - 1].sender, SENDER_B);
    assert_int_equal(h.delivered[h.delivered_count - 1].sequence, 6);
    /* ... which runs out on its own. */
    assert_int_equal(drain(&h, 1599, gap), 0);
    assert_int_equal(drain(&h, 1600, gap), 1);
    assert_int_equal(h.delivered[h.delivered_count - 1].sender, SENDER_C);
    assert_int_equal(h.delivered[h.delivered_count - 1].sequence, 4);
    assert_int_equal(mailbox_inbox_held_count(h.inbox), 0);
    harness_close(&h);
}

/* A larger stream number restarts the sender's stream at 1 and drops what
 * the old one held; a smaller one is a duplicate. */
static void test_new_stream_restarts(void **state) {
    harness h;
    harness_init(&h);
    assert_int_equal(offer(&h, SENDER_A, 4, 1, 0), MAILBOX_DELIVER);
    assert_int_equal(offer(&h, SENDER_A, 4, 2, 0), MAILBOX_DELIVER);
    assert_int_equal(offer(&h, SENDER_A, 4, 5, 0), MAILBOX_HOLD);
    assert_int_equal(offer(&h, SENDER_A, 4, 6, 0), MAILBOX_HOLD);
    assert_int_equal(mailbox_inbox_held_count(h.inbox), 2);

    /* Stream 7 begins: the old stream's held messages are gone. */
    assert_int_equal(offer(&h, SENDER_A, 7, 1, 10), MAILBOX_DELIVER);
    assert_int_equal(mailbox_inbox_held_count(h.inbox), 0);
    assert_int_equal(h.delivered_count, 3);
    assert_int_equal(h.delivered[2].sequence, 1);
    assert_false(h.delivered[2].from_next);

    /* Old stream: duplicates, whatever their sequence. */
    assert_int_equal(offer(&h, SENDER_A, 4, 3, 20), MAILBOX_DUPLICATE);
    assert_int_equal(offer(&h, SENDER_A, 4, 100, 20), MAILBOX_DUPLICATE);
    assert_int_equal(offer(&h, SENDER_A, 6, 2, 20), MAILBOX_DUPLICATE);
    assert_int_equal(offer(&h, SENDER_A, 7, 1, 20), MAILBOX_DUPLICATE);
    assert_int_equal(offer(&h, SENDER_A, 7, 2, 20), MAILBOX_DELIVER);

    /* A new stream whose first message is early: held, the old held dropped,
     * and 1 of the new stream releases it. */
    assert_int_equal(offer(&h, SENDER_A, 7, 4, 30), MAILBOX_HOLD);
    assert_int_equal(offer(&h, SENDER_A, 8, 2, 40), MAILBOX_HOLD);
    assert_int_equal(mailbox_inbox_held_count(h.inbox), 1);
    size_t before = h.delivered_count;
    assert_int_equal(offer(&h, SENDER_A, 8, 1, 50), MAILBOX_DELIVER);
    assert_int_equal(h.delivered_count, before + 2);
    assert_int_equal(h.delivered[before].sequence, 1);
    assert_int_equal(h.delivered[before + 1].sequence, 2);
    assert_true(h.delivered[before + 1].from_next);
    assert_int_equal(mailbox_inbox_held_count(h.inbox), 0);
    /* The old stream's 4 never comes out. */
    assert_int_equal(drain(&h, UINT64_MAX / 2, 0), 0);
    assert_int_equal(h.skipped, 0);
    harness_close(&h);
}

/* The same early message held twice is kept (and delivered) once. */
static void test_hold_twice_kept_once(void **state) {
    harness h;
    harness_init(&h);
    assert_int_equal(offer(&h, SENDER_A, 1, 3, 0), MAILBOX_HOLD);
    assert_int_equal(offer(&h, SENDER_A, 1, 3, 1), MAILBOX_HOLD);
    assert_int_equal(offer(&h, SENDER_A, 1, 2, 2), MAILBOX_HOLD);
    assert_int_equal(offer(&h, SENDER_A, 1, 3, 3), MAILBOX_HOLD);
    assert_int_equal(offer(&h, SENDER_A, 1, 2, 4), MAILBOX_HOLD);
    assert_int_equal(mailbox_inbox_held_count(h.inbox), 2);
    assert_int_equal(offer(&h, SENDER_A, 1, 1, 5), MAILBOX_DELIVER);
    assert_int_equal(h.delivered_count, 3);
    assert_delivered_run(&h, SENDER_A, 1, 3);
    assert_int_equal(mailbox_inbox_held_count(h.inbox), 0);

    /* Held, then DELIVERed directly (the inbox not drained in between):
     * the held copy falls out and is never handed back. */
    assert_int_equal(mailbox_inbox_offer(h.inbox, SENDER_A, 1, 5, 10), MAILBOX_HOLD);
    uint8_t payload[PAYLOAD_LENGTH];
    encode_payload(payload, SENDER_A, 5);
    mailbox_inbox_hold(h.inbox, SENDER_A, 5, payload, sizeof payload, 10);
    assert_int_equal(mailbox_inbox_offer(h.inbox, SENDER_A, 1, 4, 11), MAILBOX_DELIVER);
    assert_int_equal(mailbox_inbox_offer(h.inbox, SENDER_A, 1, 5, 12), MAILBOX_DELIVER);
    assert_int_equal(drain(&h, 13, UINT64_MAX), 0);
    assert_int_equal(drain(&h, UINT64_MAX / 2, 0), 0);
    assert_int_equal(mailbox_inbox_held_count(h.inbox), 0);
    assert_int_equal(mailbox_inbox_offer(h.inbox, SENDER_A, 1, 6, 14), MAILBOX_DELIVER);
    harness_close(&h);
}

/* Next lexicographic permutation of a[0..n). Returns false after the last. */
static bool next_permutation(int *a, int n) {
    int i = n - 2;
    while (i >= 0 && a[i] >= a[i + 1]) i--;
    if (i < 0) return false;
    int j = n - 1;
    while (a[j] <= a[i]) j--;
    int t = a[i];
    a[i] = a[j];
    a[j] = t;
    for (int l = i + 1, r = n - 1; l < r; l++, r--) {
        t = a[l];
        a[l] = a[r];
        a[r] = t;
    }
    return true;
}

/* Every arrival order of six messages delivers each once, in order. */
static void test_every_permutation_of_six(void **state) {
    enum { N = 6 };
    int order[N];
    for (int i = 0; i < N; i++) order[i] = i + 1;
    size_t permutations = 0;
    do {
        harness h;
        harness_init(&h);
        size_t expected_held = 0;
        uint64_t next = 1;
        for (int i = 0; i < N; i++) {
            uint64_t sequence = (uint64_t)order[i];
            mailbox_verdict verdict = offer(&h, SENDER_B, 2, sequence, (uint64_t)i * 1000);
            if (sequence == next) {
                assert_int_equal(verdict, MAILBOX_DELIVER);
                /* It and everything held directly behind it came out. */
                next = h.delivered_count + 1;
                assert_int_equal(h.delivered[h.delivered_count - 1].sequence, next - 1);
            } else {
                assert_int_equal(verdict, MAILBOX_HOLD);
                expected_held++;
            }
            assert_int_equal(h.delivered_count + mailbox_inbox_held_count(h.inbox), (size_t)i + 1);
        }
        assert_int_equal(h.delivered_count, N);
        assert_delivered_run(&h, SENDER_B, 1, N);
        assert_int_equal(mailbox_inbox_held_count(h.inbox), 0);
        assert_int_equal(h.skipped, 0);
        size_t from_next = 0;
        for (size_t i = 0; i < h.delivered_count; i++) from_next += h.delivered[i].from_next;
        assert_int_equal(from_next, expected_held);
        /* And each again is a duplicate now. */
        for (int i = 0; i < N; i++)
            assert_int_equal(offer(&h, SENDER_B, 2, (uint64_t)order[i], 10000), MAILBOX_DUPLICATE);
        assert_int_equal(drain(&h, UINT64_MAX / 2, 0), 0);
        harness_close(&h);
        permutations++;
    } while (next_permutation(order, N));
    assert_int_equal(permutations, 720);
}

/* Saved streams, packed and unpacked as they travel. */
typedef struct saved_inbox {
    Tessera__Cluster__InboxStream **streams;
    size_t count;
} saved_inbox;

static saved_inbox save_through_the_wire(const mailbox_inbox *inbox, uint64_t now_us) {
    Tessera__Cluster__InboxStream **streams;
    size_t count;
    mailbox_inbox_save(inbox, now_us, &streams, &count);
    saved_inbox out = {NULL, count};
    out.streams = calloc(count ? count : 1, sizeof(Tessera__Cluster__InboxStream *));
    assert_non_null(out.streams);
    for (size_t s = 0; s < count; s++) {
        size_t length = tessera__cluster__inbox_stream__get_packed_size(streams[s]);
        uint8_t *buffer = malloc(length ? length : 1);
        assert_non_null(buffer);
        assert_int_equal(tessera__cluster__inbox_stream__pack(streams[s], buffer), length);
        out.streams[s] = tessera__cluster__inbox_stream__unpack(NULL, length, buffer);
        assert_non_null(out.streams[s]);
        free(buffer);
    }
    mailbox_inbox_saved_free(streams, count);
    return out;
}

static void saved_inbox_free(saved_inbox *saved) {
    for (size_t s = 0; s < saved->count; s++) tessera__cluster__inbox_stream__free_unpacked(saved->streams[s], NULL);
    free(saved->streams);
}

static const Tessera__Cluster__InboxStream *saved_of(const saved_inbox *saved, uint64_t sender) {
    for (size_t s = 0; s < saved->count; s++)
        if (saved->streams[s]->sender_id == sender) return saved->streams[s];
    fail_msg("no saved stream of sender %llu", (unsigned long long)sender);
    return NULL;
}

/* The inbox A(stream 7: 1 delivered, 3 and 4 held since 0), B(stream 2:
 * 1..4 delivered, nothing held), built at time 0. */
static void build_saved_inbox(harness *h) {
    harness_init(h);
    assert_int_equal(offer(h, SENDER_A, 7, 1, 0), MAILBOX_DELIVER);
    assert_int_equal(offer(h, SENDER_A, 7, 3, 0), MAILBOX_HOLD);
    assert_int_equal(offer(h, SENDER_A, 7, 4, 0), MAILBOX_HOLD);
    for (uint64_t s = 1; s <= 4; s++) assert_int_equal(offer(h, SENDER_B, 2, s, 0), MAILBOX_DELIVER);
    assert_int_equal(mailbox_inbox_held_count(h->inbox), 2);
}

static void test_save_fields(void **state) {
    harness h;
    build_saved_inbox(&h);
    Tessera__Cluster__InboxStream **streams;
    size_t count;
    mailbox_inbox_save(h.inbox, 1500000, &streams, &count);
    assert_int_equal(count, 2);
    saved_inbox view = {streams, count};
    const Tessera__Cluster__InboxStream *a = saved_of(&view, SENDER_A);
    assert_int_equal(a->stream, 7);
    assert_int_equal(a->next_sequence, 2);
    assert_int_equal(a->gap_age_us, 1500000);
    assert_int_equal(a->n_held, 2);
    assert_int_equal(a->n_held_sequence, 2);
    assert_int_equal(a->held_sequence[0], 3);
    assert_int_equal(a->held_sequence[1], 4);
    assert_int_equal(a->held[0].len, PAYLOAD_LENGTH);
    assert_int_equal(a->held[0].data[2], 3);
    assert_int_equal(a->held[1].data[2], 4);
    const Tessera__Cluster__InboxStream *b = saved_of(&view, SENDER_B);
    assert_int_equal(b->stream, 2);
    assert_int_equal(b->next_sequence, 5);
    assert_int_equal(b->n_held, 0);
    assert_int_equal(b->gap_age_us, 0);
    mailbox_inbox_saved_free(streams, count);
    harness_close(&h);

    /* An empty inbox saves nothing. */
    mailbox_inbox *empty = mailbox_inbox_create();
    mailbox_inbox_save(empty, 0, &streams, &count);
    assert_int_equal(count, 0);
    mailbox_inbox_saved_free(streams, count);
    mailbox_inbox *restored = mailbox_inbox_restore(NULL, 0, 0);
    assert_int_equal(mailbox_inbox_held_count(restored), 0);
    mailbox_inbox_free(restored);
    mailbox_inbox_free(empty);
}

/* The restored inbox goes on where the saved one stopped: the gap filled. */
static void test_restore_gap_fills(void **state) {
    harness h;
    build_saved_inbox(&h);
    saved_inbox saved = save_through_the_wire(h.inbox, 1500000);
    harness_close(&h);

    const uint64_t t = 50000000; /* another process's clock */
    harness r;
    memset(&r, 0, sizeof r);
    r.inbox = mailbox_inbox_restore(saved.streams, saved.count, t);
    saved_inbox_free(&saved); /* restore copied everything */
    assert_int_equal(mailbox_inbox_held_count(r.inbox), 2);
    assert_int_equal(drain(&r, t, UINT64_MAX), 0);

    /* A's next is 2; B's next is 5; the stream numbers carried. */
    assert_int_equal(offer(&r, SENDER_A, 7, 1, t), MAILBOX_DUPLICATE);
    assert_int_equal(offer(&r, SENDER_A, 6, 9, t), MAILBOX_DUPLICATE);
    assert_int_equal(offer(&r, SENDER_B, 2, 4, t), MAILBOX_DUPLICATE);
    assert_int_equal(offer(&r, SENDER_B, 1, 5, t), MAILBOX_DUPLICATE);
    assert_int_equal(offer(&r, SENDER_B, 2, 5, t), MAILBOX_DELIVER);
    assert_int_equal(offer(&r, SENDER_A, 7, 3, t), MAILBOX_HOLD); /* held already */
    assert_int_equal(mailbox_inbox_held_count(r.inbox), 2);
    assert_int_equal(offer(&r, SENDER_A, 7, 2, t + 1), MAILBOX_DELIVER);
    assert_delivered_run(&r, SENDER_A, 2, 4);
    assert_int_equal(r.delivered_count, 4); /* B 5, A 2 3 4 */
    assert_true(r.delivered[2].from_next);
    assert_true(r.delivered[3].from_next);
    assert_int_equal(mailbox_inbox_held_count(r.inbox), 0);
    assert_int_equal(r.skipped, 0);
    assert_int_equal(offer(&r, SENDER_A, 7, 5, t + 2), MAILBOX_DELIVER);
    harness_close(&r);
}

/* The gap's age carried: 1.5 s of a 2 s limit waited before, 0.5 s after. */
static void test_restore_gap_age_carried(void **state) {
    const uint64_t gap = 2000000;
    harness h;
    build_saved_inbox(&h);
    saved_inbox saved = save_through_the_wire(h.inbox, 1500000);
    harness_close(&h);

    const uint64_t t = 90000000;
    harness r;
    memset(&r, 0, sizeof r);
    r.inbox = mailbox_inbox_restore(saved.streams, saved.count, t);
    assert_int_equal(drain(&r, t, gap), 0);
    assert_int_equal(drain(&r, t + 499999, gap), 0);
    assert_int_equal(mailbox_inbox_held_count(r.inbox), 2);
    assert_int_equal(drain(&r, t + 500000, gap), 2);
    assert_int_equal(r.skipped, 1); /* 2 given up */
    assert_delivered_run(&r, SENDER_A, 3, 4);
    assert_int_equal(mailbox_inbox_held_count(r.inbox), 0);
    assert_int_equal(offer(&r, SENDER_A, 7, 2, t + 500001), MAILBOX_DUPLICATE);
    harness_close(&r);
    saved_inbox_free(&saved);
}

/* Saving, restoring and saving again gives the same streams. */
static void test_save_restore_save(void **state) {
    harness h;
    build_saved_inbox(&h);
    assert_int_equal(offer(&h, SENDER_C, 3, 4, 200000), MAILBOX_HOLD);
    assert_int_equal(offer(&h, SENDER_C, 3, 2, 300000), MAILBOX_HOLD);
    saved_inbox first = save_through_the_wire(h.inbox, 1000000);
    harness_close(&h);
    mailbox_inbox *restored = mailbox_inbox_restore(first.streams, first.count, 7000000);
    saved_inbox second = save_through_the_wire(restored, 7250000);
    mailbox_inbox_free(restored);
    assert_int_equal(first.count, 3);
    assert_int_equal(second.count, 3);
    for (size_t s = 0; s < first.count; s++) {
        const Tessera__Cluster__InboxStream *a = first.streams[s];
        const Tessera__Cluster__InboxStream *b = saved_of(&second, a->sender_id);
        assert_int_equal(a->stream, b->stream);
        assert_int_equal(a->next_sequence, b->next_sequence);
        assert_int_equal(b->gap_age_us, a->n_held ? a->gap_age_us + 250000 : 0);
        assert_int_equal(a->n_held, b->n_held);
        for (size_t i = 0; i < a->n_held; i++) {
            assert_int_equal(a->held_sequence[i], b->held_sequence[i]);
            assert_int_equal(a->held[i].len, b->held[i].len);
            assert_memory_equal(a->held[i].data, b->held[i].data, a->held[i].len);
        }
    }
    const Tessera__Cluster__InboxStream *c = saved_of(&first, SENDER_C);
    assert_int_equal(c->n_held, 2);
    assert_int_equal(c->held_sequence[0], 2); /* sorted by sequence */
    assert_int_equal(c->held_sequence[1], 4);
    assert_int_equal(c->gap_age_us, 800000); /* since the first held (at 200000) */
    saved_inbox_free(&first);
    saved_inbox_free(&second);
}

/* A long random run: many senders, drops, duplicates, restarts; every
 * delivery is in order and none is repeated (checked per sender). */
static uint64_t test_rand(uint64_t *s) {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * UINT64_C(0x2545f4914f6cdd1d);
}

static void test_random_traffic(void **state) {
    enum { SENDERS = 4, STEPS = 20000 };
    const uint64_t gap = 5000;
    uint64_t seed = 0x1234567;
    harness h;
    harness_init(&h);
    uint64_t stream[SENDERS], sent[SENDERS], last_delivered[SENDERS], delivered_stream[SENDERS];
    for (int s = 0; s < SENDERS; s++) {
        stream[s] = 1;
        sent[s] = 0;
        last_delivered[s] = 0;
        delivered_stream[s] = 1;
    }
    uint64_t now = 0;
    for (int step = 0; step < STEPS; step++) {
        now += test_rand(&seed) % 300;
        int s = (int)(test_rand(&seed) % SENDERS);
        uint64_t r = test_rand(&seed) % 100;
        uint64_t sequence;
        if (r < 2) {
            stream[s]++; /* the sender forgot the target: a new stream */
            sent[s] = 0;
        }
        if (r < 70 || sent[s] == 0)
            sequence = ++sent[s]; /* the next one */
        else if (r < 85)
            sequence = sent[s] - test_rand(&seed) % sent[s]; /* a repeat */
        else
            sequence = sent[s] + 1 + test_rand(&seed) % 3; /* ahead: what is between is lost */
        if (sequence > sent[s]) sent[s] = sequence;
        size_t before = h.delivered_count;
        offer(&h, SENDER_A + (uint64_t)s, stream[s], sequence, now);
        if (step % 7 == 0) drain(&h, now, gap);
        for (size_t i = before; i < h.delivered_count; i++) {
            int who = (int)(h.delivered[i].sender - SENDER_A);
            assert_true(who >= 0 && who < SENDERS);
            if (delivered_stream[who] != stream[who]) {
                delivered_stream[who] = stream[who];
                last_delivered[who] = 0;
            }
            assert_true(h.delivered[i].sequence > last_delivered[who]);
            last_delivered[who] = h.delivered[i].sequence;
        }
        h.delivered_count = 0; /* keep the record small */
    }
    /* What is left comes out, a gap_us at a time. */
    while (mailbox_inbox_held_count(h.inbox)) {
        now += gap;
        h.delivered_count = 0;
        assert_true(drain(&h, now, gap) > 0);
    }
    harness_close(&h);
}

/* ---- the sending side ------------------------------------------------------- */

enum { MAX_SENT = 64 };

typedef struct sent_message {
    uint64_t process_id;
    uint64_t entity_id;
    uint64_t sender_id;
    uint64_t stream;
    uint64_t sequence;
    uint32_t hops;
    Tessera__Cluster__CellMessage__BodyCase body_case;
} sent_message;

typedef struct failure {
    uint64_t entity_id;
    uint64_t sequence;
    char reason[160];
} failure;

typedef struct sender_context {
    int send_result; /* what the send callback returns */
    sent_message sent[MAX_SENT];
    size_t sent_count;
    failure failed[MAX_SENT];
    size_t failed_count;
} sender_context;

static int on_send(uint64_t process_id, const Tessera__Cluster__CellMessage *message, void *user_data) {
    sender_context *ctx = user_data;
    assert_true(ctx->sent_count < MAX_SENT);
    ctx->sent[ctx->sent_count++] =
        (sent_message){process_id,        message->entity_id, message->sender_id, message->stream,
                       message->sequence, message->hops,      message->body_case};
    return ctx->send_result;
}

static void on_failed(uint64_t entity_id, uint64_t sequence, const char *reason, void *user_data) {
    sender_context *ctx = user_data;
    assert_true(ctx->failed_count < MAX_SENT);
    assert_non_null(reason);
    failure *f = &ctx->failed[ctx->failed_count++];
    f->entity_id = entity_id;
    f->sequence = sequence;
    snprintf(f->reason, sizeof f->reason, "%s", reason);
}

/* Sends a destroy to `entity` at `where`; returns mailbox_send_cell's answer
 * and checks the caller's message was stamped like the one sent. */
static uint64_t send_to(mailbox *box, uint64_t entity, uint64_t where, uint64_t now_ms) {
    Tessera__Cluster__DestroyCellEntity destroy = TESSERA__CLUSTER__DESTROY_CELL_ENTITY__INIT;
    Tessera__Cluster__CellMessage message = TESSERA__CLUSTER__CELL_MESSAGE__INIT;
    message.entity_id = entity;
    message.hops = 7;        /* a send starts the hop count again */
    message.sender_id = 555; /* overwritten */
    message.stream = 555;
    message.sequence = 555;
    message.body_case = TESSERA__CLUSTER__CELL_MESSAGE__BODY_DESTROY;
    message.destroy = &destroy;
    uint64_t sequence = mailbox_send_cell(box, &message, where, now_ms);
    assert_int_equal(message.entity_id, entity);
    assert_int_equal(message.hops, 0);
    assert_int_not_equal(message.sequence, 555);
    assert_int_not_equal(message.stream, 555);
    return sequence;
}

static const sent_message *last_sent(const sender_context *ctx) {
    assert_true(ctx->sent_count > 0);
    return &ctx->sent[ctx->sent_count - 1];
}

static void test_send_stamps_streams(void **state) {
    sender_context ctx;
    memset(&ctx, 0, sizeof ctx);
    mailbox *box = mailbox_create(NULL, "test", on_send, on_failed, &ctx);
    assert_non_null(box);
    assert_int_equal(mailbox_stream_count(box), 0);
    mailbox_set_self(box, 42);

    assert_int_equal(send_to(box, 100, 7, 1000), 1);
    const sent_message *m = last_sent(&ctx);
    assert_int_equal(m->process_id, 7);
    assert_int_equal(m->entity_id, 100);
    assert_int_equal(m->sender_id, 42);
    assert_int_equal(m->sequence, 1);
    assert_int_equal(m->hops, 0);
    assert_int_equal(m->body_case, TESSERA__CLUSTER__CELL_MESSAGE__BODY_DESTROY);
    uint64_t stream_100 = m->stream;
    assert_true(stream_100 > 0);

    assert_int_equal(send_to(box, 100, 7, 1001), 2);
    assert_int_equal(last_sent(&ctx)->stream, stream_100);
    assert_int_equal(last_sent(&ctx)->sequence, 2);

    /* Another entity: its own stream (a new, larger number), its own 1, 2, 3. */
    assert_int_equal(send_to(box, 200, 8, 1002), 1);
    uint64_t stream_200 = last_sent(&ctx)->stream;
    assert_true(stream_200 > stream_100);
    assert_int_equal(last_sent(&ctx)->process_id, 8);
    assert_int_equal(last_sent(&ctx)->entity_id, 200);
    assert_int_equal(send_to(box, 100, 9, 1003), 3); /* the address may change: the stream does not */
    assert_int_equal(last_sent(&ctx)->stream, stream_100);
    assert_int_equal(last_sent(&ctx)->process_id, 9);
    assert_int_equal(send_to(box, 200, 8, 1004), 2);
    assert_int_equal(send_to(box, 200, 8, 1005), 3);
    assert_int_equal(last_sent(&ctx)->stream, stream_200);
    assert_int_equal(mailbox_stream_count(box), 2);
    assert_int_equal(ctx.sent_count, 6);
    for (size_t i = 0; i < ctx.sent_count; i++) assert_int_equal(ctx.sent[i].sender_id, 42);
    assert_int_equal(ctx.failed_count, 0);

    /* What the receiver makes of it: all in order. */
    harness h;
    harness_init(&h);
    for (size_t i = 0; i < ctx.sent_count; i++)
        if (ctx.sent[i].entity_id == 100)
            assert_int_equal(
                mailbox_inbox_offer(h.inbox, ctx.sent[i].sender_id, ctx.sent[i].stream, ctx.sent[i].sequence, 0),
                MAILBOX_DELIVER);
    harness_close(&h);

    mailbox_free(box);
    assert_int_equal(ctx.failed_count, 0); /* nothing was waiting */
}

static void test_send_before_self_is_known(void **state) {
    sender_context ctx;
    memset(&ctx, 0, sizeof ctx);
    mailbox *box = mailbox_create(NULL, "test", on_send, on_failed, &ctx);
    assert_int_equal(send_to(box, 5, 3, 0), 1);
    assert_int_equal(last_sent(&ctx)->sender_id, 0);
    mailbox_set_self(box, 77);
    assert_int_equal(send_to(box, 5, 3, 0), 2);
    assert_int_equal(last_sent(&ctx)->sender_id, 77);
    mailbox_free(box);
}

/* The send callback refuses: the failed callback hears why. */
static void test_send_unreachable(void **state) {
    sender_context ctx;
    memset(&ctx, 0, sizeof ctx);
    mailbox *box = mailbox_create(NULL, "test", on_send, on_failed, &ctx);
    mailbox_set_self(box, 42);
    assert_int_equal(send_to(box, 100, 7, 0), 1);
    ctx.send_result = -1;
    /* Failed at once (and reported): 0, as mailbox.h says. */
    assert_int_equal(send_to(box, 100, 9, 0), 0);
    assert_int_equal(ctx.sent_count, 2); /* it was tried */
    assert_int_equal(last_sent(&ctx)->sequence, 2);
    assert_int_equal(ctx.failed_count, 1);
    assert_int_equal(ctx.failed[0].entity_id, 100);
    assert_int_equal(ctx.failed[0].sequence, 2);
    assert_non_null(strstr(ctx.failed[0].reason, "not reachable"));
    assert_non_null(strstr(ctx.failed[0].reason, "9"));
    /* A sequence is never given twice, even to a failed message. */
    // cppcheck-suppress redundantAssignment ; on_send reads it through the mailbox's context
    ctx.send_result = 0;
    assert_int_equal(send_to(box, 100, 7, 0), 3);
    assert_int_equal(ctx.failed_count, 1);
    mailbox_free(box);
    assert_int_equal(ctx.failed_count, 1);
}

/* No address and no Redis: the directory is out of reach, reported at once. */
static void test_send_without_address_or_redis(void **state) {
    sender_context ctx;
    memset(&ctx, 0, sizeof ctx);
    mailbox *box = mailbox_create(NULL, "test", on_send, on_failed, &ctx);
    mailbox_set_self(box, 42);
    assert_int_equal(send_to(box, 300, 0, 10), 0);
    assert_int_equal(ctx.sent_count, 0);
    assert_int_equal(ctx.failed_count, 1);
    assert_int_equal(ctx.failed[0].entity_id, 300);
    assert_int_equal(ctx.failed[0].sequence, 1);
    assert_non_null(strstr(ctx.failed[0].reason, "not connected"));
    assert_int_equal(send_to(box, 300, 0, 11), 0);
    assert_int_equal(ctx.failed_count, 2);
    assert_int_equal(ctx.failed[1].sequence, 2);
    /* Nothing is left waiting: an address sends at once again. */
    assert_int_equal(send_to(box, 300, 4, 12), 3);
    assert_int_equal(ctx.sent_count, 1);
    assert_int_equal(last_sent(&ctx)->process_id, 4);
    assert_int_equal(last_sent(&ctx)->sequence, 3);
    mailbox_free(box);
    assert_int_equal(ctx.failed_count, 2);
}

static void test_on_failed_reports(void **state) {
    sender_context ctx;
    memset(&ctx, 0, sizeof ctx);
    mailbox *box = mailbox_create(NULL, "test", on_send, on_failed, &ctx);
    Tessera__Cluster__CellMessageFailed failed = TESSERA__CLUSTER__CELL_MESSAGE_FAILED__INIT;
    failed.entity_id = 1234;
    failed.stream = 3;
    failed.sequence = 17;
    failed.reason = "the entity is not real anywhere";
    mailbox_on_failed(box, &failed);
    assert_int_equal(ctx.failed_count, 1);
    assert_int_equal(ctx.failed[0].entity_id, 1234);
    assert_int_equal(ctx.failed[0].sequence, 17);
    assert_string_equal(ctx.failed[0].reason, "the entity is not real anywhere");
    failed.reason = NULL;
    mailbox_on_failed(box, &failed);
    assert_int_equal(ctx.failed_count, 2);
    assert_string_equal(ctx.failed[1].reason, "");
    mailbox_free(box);

    /* Without a failed callback nothing breaks. */
    box = mailbox_create(NULL, "test", on_send, NULL, &ctx);
    mailbox_on_failed(box, &failed);
    assert_int_equal(send_to(box, 9, 0, 0), 0);
    ctx.send_result = -1;
    send_to(box, 9, 3, 0);
    mailbox_free(box);
    assert_int_equal(ctx.failed_count, 2);
}

/* Idle targets are forgotten after MAILBOX_IDLE_MS, not before; the next
 * message starts a new stream (larger number) at sequence 1. */
static void test_sweep_forgets_idle(void **state) {
    sender_context ctx;
    memset(&ctx, 0, sizeof ctx);
    mailbox *box = mailbox_create(NULL, "test", on_send, on_failed, &ctx);
    mailbox_set_self(box, 42);
    const uint64_t t0 = 1000000;
    assert_int_equal(send_to(box, 100, 7, t0), 1);
    assert_int_equal(send_to(box, 100, 7, t0 + 5000), 2);
    uint64_t stream_100 = last_sent(&ctx)->stream;
    assert_int_equal(send_to(box, 200, 7, t0 + 20000), 1);
    uint64_t stream_200 = last_sent(&ctx)->stream;
    assert_int_equal(mailbox_stream_count(box), 2);

    mailbox_sweep(box, t0 + 20000);
    mailbox_sweep(box, t0 + 5000 + MAILBOX_IDLE_MS - 1);
    assert_int_equal(mailbox_stream_count(box), 2);
    mailbox_sweep(box, t0 + 5000 + MAILBOX_IDLE_MS);
    assert_int_equal(mailbox_stream_count(box), 1);

    /* 100 again: a new stream, above every number given before. */
    assert_int_equal(send_to(box, 100, 7, t0 + 5000 + MAILBOX_IDLE_MS), 1);
    uint64_t new_stream_100 = last_sent(&ctx)->stream;
    assert_true(new_stream_100 > stream_100);
    assert_true(new_stream_100 > stream_200);
    /* 200 kept its stream. */
    assert_int_equal(send_to(box, 200, 7, t0 + 5000 + MAILBOX_IDLE_MS), 2);
    assert_int_equal(last_sent(&ctx)->stream, stream_200);
    assert_int_equal(mailbox_stream_count(box), 2);

    /* The receiver takes the new stream as a restart. */
    harness h;
    harness_init(&h);
    assert_int_equal(mailbox_inbox_offer(h.inbox, 42, stream_100, 1, 0), MAILBOX_DELIVER);
    assert_int_equal(mailbox_inbox_offer(h.inbox, 42, stream_100, 2, 0), MAILBOX_DELIVER);
    assert_int_equal(mailbox_inbox_offer(h.inbox, 42, new_stream_100, 1, 0), MAILBOX_DELIVER);
    assert_int_equal(mailbox_inbox_offer(h.inbox, 42, stream_100, 3, 0), MAILBOX_DUPLICATE);
    harness_close(&h);

    /* Everything idle: all forgotten. */
    mailbox_sweep(box, t0 + 5000 + (uint64_t)2 * MAILBOX_IDLE_MS);
    assert_int_equal(mailbox_stream_count(box), 0);
    assert_int_equal(ctx.failed_count, 0);
    mailbox_free(box);
    assert_int_equal(ctx.failed_count, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_in_order_delivery),
        cmocka_unit_test(test_duplicates),
        cmocka_unit_test(test_hold_until_gap_fills),
        cmocka_unit_test(test_gap_given_up),
        cmocka_unit_test(test_gap_clock_restarts_on_progress),
        cmocka_unit_test(test_gap_limits),
        cmocka_unit_test(test_senders_independent),
        cmocka_unit_test(test_new_stream_restarts),
        cmocka_unit_test(test_hold_twice_kept_once),
        cmocka_unit_test(test_every_permutation_of_six),
        cmocka_unit_test(test_save_fields),
        cmocka_unit_test(test_restore_gap_fills),
        cmocka_unit_test(test_restore_gap_age_carried),
        cmocka_unit_test(test_save_restore_save),
        cmocka_unit_test(test_random_traffic),
        cmocka_unit_test(test_send_stamps_streams),
        cmocka_unit_test(test_send_before_self_is_known),
        cmocka_unit_test(test_send_unreachable),
        cmocka_unit_test(test_send_without_address_or_redis),
        cmocka_unit_test(test_on_failed_reports),
        cmocka_unit_test(test_sweep_forgets_idle),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
