/* test_frame.c -- unit tests for the frame reader (frame.h), with no sockets:
 * frames split across pushes (byte by byte and at every split point),
 * coalesced frames, zero-length frames, the max_frame_bytes limit (refused
 * as soon as the 4-byte prefix has arrived), reserve/commit used the way a
 * socket read uses it, frame_write_header, and a seeded random stream.
 *
 * Every frame body is filled from frame_pattern(index, offset), so a frame
 * that comes out shifted, truncated, reordered or mixed with its neighbour
 * fails the byte comparison, not only the length check. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "frame.h"

/* A limit far above every frame the tests build, for tests that are not
 * about the limit. */
#define NO_LIMIT (64u << 20)

/* The byte at `offset` of frame number `index`. The offset >> 8 term makes
 * a body shifted by a multiple of 256 bytes differ too. */
static uint8_t frame_pattern(size_t index, size_t offset) {
    return (uint8_t)(index * 7u + offset * 13u + (offset >> 8) + 1u);
}

/* An encoded stream of frames: the bytes and where each frame ends. */
typedef struct stream {
    uint8_t *bytes;
    size_t length;
    size_t count;
    size_t *frame_lengths;
    size_t *frame_ends; /* offset one past the frame's last byte */
} stream;

static void stream_build(stream *s, const size_t *frame_lengths, size_t count) {
    size_t total = 0;
    for (size_t i = 0; i < count; i++) total += FRAME_HEADER_BYTES + frame_lengths[i];
    s->bytes = malloc(total ? total : 1);
    s->frame_lengths = malloc((count ? count : 1) * sizeof *s->frame_lengths);
    s->frame_ends = malloc((count ? count : 1) * sizeof *s->frame_ends);
    assert_non_null(s->bytes);
    assert_non_null(s->frame_lengths);
    assert_non_null(s->frame_ends);
    s->length = total;
    s->count = count;
    size_t at = 0;
    for (size_t i = 0; i < count; i++) {
        frame_write_header(s->bytes + at, (uint32_t)frame_lengths[i]);
        at += FRAME_HEADER_BYTES;
        for (size_t j = 0; j < frame_lengths[i]; j++) s->bytes[at + j] = frame_pattern(i, j);
        at += frame_lengths[i];
        s->frame_lengths[i] = frame_lengths[i];
        s->frame_ends[i] = at;
    }
}

static void stream_free(stream *s) {
    free(s->bytes);
    free(s->frame_lengths);
    free(s->frame_ends);
    memset(s, 0, sizeof *s);
}

static void check_frame(const stream *s, size_t index, const uint8_t *frame, size_t length) {
    assert_true(index < s->count);
    assert_int_equal(length, s->frame_lengths[index]);
    for (size_t j = 0; j < length; j++) {
        if (frame[j] != frame_pattern(index, j)) {
            fail_msg("frame %zu byte %zu: got 0x%02x, expected 0x%02x", index, j, frame[j], frame_pattern(index, j));
        }
    }
}

/* Hands out every complete frame, checking each against the stream.
 * Returns how many came out; *next_index advances past them. */
static size_t drain(frame_reader *reader, const stream *s, size_t *next_index) {
    const uint8_t *frame;
    size_t length;
    size_t got = 0;
    int rc;
    while ((rc = frame_reader_next(reader, &frame, &length)) == 1) {
        check_frame(s, *next_index, frame, length);
        (*next_index)++;
        got++;
    }
    assert_int_equal(rc, 0);
    return got;
}

/* A small stream with the awkward cases next to each other: empty frames at
 * the start, in the middle and at the end, 1-byte frames, and frames long
 * enough that a split can fall inside the header or the body. */
static const size_t MIXED_LENGTHS[] = {0, 1, 5, 0, 300, 2, 0, 1000, 3, 0};
#define MIXED_COUNT (sizeof MIXED_LENGTHS / sizeof MIXED_LENGTHS[0])

static void test_empty_reader_has_no_frame(void **state) {
    frame_reader reader;
    frame_reader_init(&reader, NO_LIMIT);
    const uint8_t *frame = NULL;
    size_t length = 12345;
    assert_int_equal(frame_reader_next(&reader, &frame, &length), 0);
    assert_int_equal(frame_reader_pending(&reader), 0);
    /* A zero-byte push is harmless. */
    frame_reader_push(&reader, (const uint8_t *)"", 0);
    assert_int_equal(frame_reader_next(&reader, &frame, &length), 0);
    assert_int_equal(frame_reader_pending(&reader), 0);
    frame_reader_close(&reader);
    /* Closing a reader that never buffered anything is fine too. */
    frame_reader_init(&reader, NO_LIMIT);
    frame_reader_close(&reader);
    /* Reserving 0 bytes of a reader without a buffer still gives a place:
     * NULL + 0 would be undefined (fuzz_client_message's empty input). */
    frame_reader_init(&reader, NO_LIMIT);
    uint8_t *space = NULL;
    size_t space_bytes = 0;
    frame_reader_reserve(&reader, 0, &space, &space_bytes);
    assert_non_null(space);
    frame_reader_close(&reader);
}

static void test_single_frame(void **state) {
    static const size_t lengths[] = {11};
    stream s;
    stream_build(&s, lengths, 1);
    frame_reader reader;
    frame_reader_init(&reader, NO_LIMIT);
    frame_reader_push(&reader, s.bytes, s.length);
    assert_int_equal(frame_reader_pending(&reader), s.length);
    const uint8_t *frame;
    size_t length;
    assert_int_equal(frame_reader_next(&reader, &frame, &length), 1);
    check_frame(&s, 0, frame, length);
    assert_int_equal(frame_reader_pending(&reader), 0);
    assert_int_equal(frame_reader_next(&reader, &frame, &length), 0);
    frame_reader_close(&reader);
    stream_free(&s);
}

/* One byte per push: each frame appears exactly when its last byte has
 * arrived, never earlier, and nothing else appears. */
static void test_byte_by_byte(void **state) {
    stream s;
    stream_build(&s, MIXED_LENGTHS, MIXED_COUNT);
    frame_reader reader;
    frame_reader_init(&reader, NO_LIMIT);
    size_t next_index = 0;
    for (size_t i = 0; i < s.length; i++) {
        frame_reader_push(&reader, s.bytes + i, 1);
        size_t expected = 0;
        while (next_index + expected < s.count && s.frame_ends[next_index + expected] == i + 1) expected++;
        assert_int_equal(drain(&reader, &s, &next_index), expected);
    }
    assert_int_equal(next_index, s.count);
    assert_int_equal(frame_reader_pending(&reader), 0);
    frame_reader_close(&reader);
    stream_free(&s);
}

/* Two pushes, split at every offset of the stream (including 0 and the
 * full length): every frame comes out exactly once, in order. */
static void test_every_split_point(void **state) {
    stream s;
    stream_build(&s, MIXED_LENGTHS, MIXED_COUNT);
    for (size_t split = 0; split <= s.length; split++) {
        frame_reader reader;
        frame_reader_init(&reader, NO_LIMIT);
        size_t next_index = 0;
        frame_reader_push(&reader, s.bytes, split);
        size_t first = drain(&reader, &s, &next_index);
        size_t expected_first = 0;
        while (expected_first < s.count && s.frame_ends[expected_first] <= split) expected_first++;
        assert_int_equal(first, expected_first);
        assert_int_equal(frame_reader_pending(&reader), split - (first ? s.frame_ends[first - 1] : 0));
        frame_reader_push(&reader, s.bytes + split, s.length - split);
        drain(&reader, &s, &next_index);
        assert_int_equal(next_index, s.count);
        assert_int_equal(frame_reader_pending(&reader), 0);
        frame_reader_close(&reader);
    }
    stream_free(&s);
}

/* Three pushes, at every pair of split points of a shorter stream, so a
 * header can be cut in two places at once. */
static void test_every_pair_of_split_points(void **state) {
    static const size_t lengths[] = {0, 3, 1, 0, 9, 2};
    stream s;
    stream_build(&s, lengths, sizeof lengths / sizeof lengths[0]);
    for (size_t a = 0; a <= s.length; a++) {
        for (size_t b = a; b <= s.length; b++) {
            frame_reader reader;
            frame_reader_init(&reader, NO_LIMIT);
            size_t next_index = 0;
            frame_reader_push(&reader, s.bytes, a);
            drain(&reader, &s, &next_index);
            frame_reader_push(&reader, s.bytes + a, b - a);
            drain(&reader, &s, &next_index);
            frame_reader_push(&reader, s.bytes + b, s.length - b);
            drain(&reader, &s, &next_index);
            assert_int_equal(next_index, s.count);
            assert_int_equal(frame_reader_pending(&reader), 0);
            frame_reader_close(&reader);
        }
    }
    stream_free(&s);
}

/* Many frames in one push come out one per call, in order, and then 0. */
static void test_coalesced_frames_in_one_push(void **state) {
    size_t lengths[50];
    for (size_t i = 0; i < 50; i++) lengths[i] = (i * 37) % 101;
    stream s;
    stream_build(&s, lengths, 50);
    frame_reader reader;
    frame_reader_init(&reader, NO_LIMIT);
    frame_reader_push(&reader, s.bytes, s.length);
    size_t next_index = 0;
    for (size_t i = 0; i < 50; i++) {
        const uint8_t *frame;
        size_t length;
        assert_int_equal(frame_reader_next(&reader, &frame, &length), 1);
        check_frame(&s, next_index++, frame, length);
        assert_int_equal(frame_reader_pending(&reader), s.length - s.frame_ends[i]);
    }
    assert_int_equal(drain(&reader, &s, &next_index), 0);
    frame_reader_close(&reader);
    stream_free(&s);
}

/* Zero-length frames are frames: each returns 1 with length 0, alone, in a
 * run, and as the very last bytes of the buffer. */
static void test_zero_length_frames(void **state) {
    static const size_t lengths[] = {0, 0, 0, 4, 0, 0};
    stream s;
    stream_build(&s, lengths, sizeof lengths / sizeof lengths[0]);
    assert_int_equal(s.length, 6 * FRAME_HEADER_BYTES + 4);
    frame_reader reader;
    frame_reader_init(&reader, NO_LIMIT);
    /* The header of a zero-length frame is the whole frame. */
    frame_reader_push(&reader, s.bytes, FRAME_HEADER_BYTES);
    const uint8_t *frame;
    size_t length = 99;
    assert_int_equal(frame_reader_next(&reader, &frame, &length), 1);
    assert_int_equal(length, 0);
    assert_int_equal(frame_reader_pending(&reader), 0);
    assert_int_equal(frame_reader_next(&reader, &frame, &length), 0);
    frame_reader_push(&reader, s.bytes + FRAME_HEADER_BYTES, s.length - FRAME_HEADER_BYTES);
    size_t next_index = 1;
    assert_int_equal(drain(&reader, &s, &next_index), 5);
    assert_int_equal(frame_reader_pending(&reader), 0);
    frame_reader_close(&reader);
    stream_free(&s);

    /* Even with a limit of 0 bytes, empty frames pass and one byte does not. */
    frame_reader_init(&reader, 0);
    uint8_t header[FRAME_HEADER_BYTES];
    frame_write_header(header, 0);
    frame_reader_push(&reader, header, sizeof header);
    assert_int_equal(frame_reader_next(&reader, &frame, &length), 1);
    assert_int_equal(length, 0);
    frame_write_header(header, 1);
    frame_reader_push(&reader, header, sizeof header);
    assert_int_equal(frame_reader_next(&reader, &frame, &length), FRAME_ERROR_TOO_LARGE);
    assert_int_equal(reader.rejected_length, 1);
    frame_reader_close(&reader);
}

/* A frame of exactly max_frame_bytes is accepted. */
static void test_frame_at_limit_accepted(void **state) {
    static const size_t lengths[] = {1000, 999, 1000};
    stream s;
    stream_build(&s, lengths, 3);
    frame_reader reader;
    frame_reader_init(&reader, 1000);
    frame_reader_push(&reader, s.bytes, s.length);
    size_t next_index = 0;
    assert_int_equal(drain(&reader, &s, &next_index), 3);
    assert_int_equal(reader.rejected_length, 0);
    frame_reader_close(&reader);
    stream_free(&s);
}

/* One byte over the limit is refused as soon as its 4-byte prefix is in,
 * before any body byte, and stays refused: the stream cannot resync. */
static void test_frame_over_limit_rejected_on_header(void **state) {
    frame_reader reader;
    frame_reader_init(&reader, 1000);
    uint8_t header[FRAME_HEADER_BYTES];
    frame_write_header(header, 1001);
    const uint8_t *frame;
    size_t length;
    /* Three bytes of the prefix are not enough to judge. */
    for (size_t i = 0; i < FRAME_HEADER_BYTES - 1; i++) {
        frame_reader_push(&reader, header + i, 1);
        assert_int_equal(frame_reader_next(&reader, &frame, &length), 0);
    }
    frame_reader_push(&reader, header + FRAME_HEADER_BYTES - 1, 1);
    assert_int_equal(frame_reader_next(&reader, &frame, &length), FRAME_ERROR_TOO_LARGE);
    assert_int_equal(reader.rejected_length, 1001);
    assert_int_equal(frame_reader_pending(&reader), FRAME_HEADER_BYTES);
    /* Asking again gives the same answer; so does pushing body bytes. */
    assert_int_equal(frame_reader_next(&reader, &frame, &length), FRAME_ERROR_TOO_LARGE);
    uint8_t body[2000] = {0};
    frame_reader_push(&reader, body, sizeof body);
    assert_int_equal(frame_reader_next(&reader, &frame, &length), FRAME_ERROR_TOO_LARGE);
    assert_int_equal(reader.rejected_length, 1001);
    frame_reader_close(&reader);
}

/* Good frames before an oversized one are still handed out; then the
 * oversized prefix is refused. The largest length the wire can carry is
 * refused without buffering (or allocating) anything for its body. */
static void test_over_limit_after_good_frames(void **state) {
    static const size_t lengths[] = {10, 0, 20};
    stream s;
    stream_build(&s, lengths, 3);
    frame_reader reader;
    frame_reader_init(&reader, 1u << 20);
    frame_reader_push(&reader, s.bytes, s.length);
    uint8_t header[FRAME_HEADER_BYTES];
    frame_write_header(header, UINT32_MAX);
    frame_reader_push(&reader, header, sizeof header);
    size_t next_index = 0;
    const uint8_t *frame;
    size_t length;
    int rc;
    while ((rc = frame_reader_next(&reader, &frame, &length)) == 1) check_frame(&s, next_index++, frame, length);
    assert_int_equal(next_index, 3);
    assert_int_equal(rc, FRAME_ERROR_TOO_LARGE);
    assert_int_equal(reader.rejected_length, UINT32_MAX);
    assert_int_equal(frame_reader_pending(&reader), FRAME_HEADER_BYTES);
    /* Nothing was sized for the declared body. */
    assert_true(reader.capacity < (1u << 20));
    frame_reader_close(&reader);
    stream_free(&s);
}

/* The way channel.c reads a socket: reserve a region, let the "socket"
 * write only part of it, commit what was written, take out complete
 * frames, repeat. Includes a frame much larger than one read and than the
 * reader's starting buffer. */
static void test_reserve_commit_like_socket_read(void **state) {
    static const size_t lengths[] = {3, 100000, 0, 70, 65536, 1};
    stream s;
    stream_build(&s, lengths, sizeof lengths / sizeof lengths[0]);
    frame_reader reader;
    frame_reader_init(&reader, NO_LIMIT);
    size_t sent = 0;
    size_t next_index = 0;
    size_t reads = 0;
    /* Vary the read size so the cuts fall everywhere. */
    static const size_t read_sizes[] = {4096, 1, 7, 3000, 65536, 2};
    while (sent < s.length) {
        size_t wanted = 4096;
        uint8_t *space = NULL;
        size_t space_bytes = 0;
        frame_reader_reserve(&reader, wanted, &space, &space_bytes);
        assert_non_null(space);
        assert_true(space_bytes >= wanted);
        size_t n = read_sizes[reads++ % (sizeof read_sizes / sizeof read_sizes[0])];
        if (n > space_bytes) n = space_bytes;
        if (n > s.length - sent) n = s.length - sent;
        memcpy(space, s.bytes + sent, n);
        frame_reader_commit(&reader, n);
        sent += n;
        drain(&reader, &s, &next_index);
    }
    assert_int_equal(next_index, s.count);
    assert_int_equal(frame_reader_pending(&reader), 0);

    /* A read that returns nothing (EAGAIN) commits 0 and changes nothing. */
    uint8_t *space;
    size_t space_bytes;
    frame_reader_reserve(&reader, 16, &space, &space_bytes);
    frame_reader_commit(&reader, 0);
    assert_int_equal(frame_reader_pending(&reader), 0);
    /* Asking for more than the buffer holds grows it: never fewer bytes. */
    frame_reader_reserve(&reader, 1u << 20, &space, &space_bytes);
    assert_true(space_bytes >= (1u << 20));
    /* The whole reserved region is writable (ASan checks the memset). */
    memset(space, 0xAB, space_bytes);
    frame_reader_commit(&reader, 0);
    frame_reader_close(&reader);
    stream_free(&s);
}

/* Reserving after frames were handed out keeps the bytes not yet handed
 * out (the partial next frame), even when they are moved to make room. */
static void test_reserve_keeps_partial_frame(void **state) {
    static const size_t lengths[] = {16000, 5000, 20000};
    stream s;
    stream_build(&s, lengths, 3);
    frame_reader reader;
    frame_reader_init(&reader, NO_LIMIT);
    /* All of frame 0 and half of frame 1. */
    size_t first_cut = s.frame_ends[0] + 2500;
    frame_reader_push(&reader, s.bytes, first_cut);
    size_t next_index = 0;
    assert_int_equal(drain(&reader, &s, &next_index), 1);
    assert_int_equal(frame_reader_pending(&reader), 2500);
    /* A reserve big enough to force both the move and a larger buffer. */
    uint8_t *space;
    size_t space_bytes;
    frame_reader_reserve(&reader, 40000, &space, &space_bytes);
    assert_true(space_bytes >= 40000);
    assert_int_equal(frame_reader_pending(&reader), 2500);
    size_t rest = s.length - first_cut;
    memcpy(space, s.bytes + first_cut, rest);
    frame_reader_commit(&reader, rest);
    assert_int_equal(drain(&reader, &s, &next_index), 2);
    assert_int_equal(next_index, 3);
    assert_int_equal(frame_reader_pending(&reader), 0);
    frame_reader_close(&reader);
    stream_free(&s);
}

/* frame_write_header writes 4 bytes big-endian, and the reader reads the
 * same length back. */
static void test_write_header_round_trip(void **state) {
    static const struct {
        uint32_t length;
        uint8_t bytes[FRAME_HEADER_BYTES];
    } cases[] = {
        {0, {0, 0, 0, 0}},
        {1, {0, 0, 0, 1}},
        {255, {0, 0, 0, 255}},
        {256, {0, 0, 1, 0}},
        {65535, {0, 0, 255, 255}},
        {65536, {0, 1, 0, 0}},
        {0x01020304u, {1, 2, 3, 4}},
        {0x80000000u, {0x80, 0, 0, 0}},
        {UINT32_MAX, {255, 255, 255, 255}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint8_t header[FRAME_HEADER_BYTES] = {0xEE, 0xEE, 0xEE, 0xEE};
        frame_write_header(header, cases[i].length);
        assert_memory_equal(header, cases[i].bytes, FRAME_HEADER_BYTES);
        /* Read back: a limit one below the length makes the reader report
         * exactly the length it decoded, without needing the body. */
        if (cases[i].length > 0) {
            frame_reader reader;
            frame_reader_init(&reader, (size_t)cases[i].length - 1);
            frame_reader_push(&reader, header, sizeof header);
            const uint8_t *frame;
            size_t length;
            assert_int_equal(frame_reader_next(&reader, &frame, &length), FRAME_ERROR_TOO_LARGE);
            assert_int_equal(reader.rejected_length, cases[i].length);
            frame_reader_close(&reader);
        }
    }
    /* And a full round trip through a frame with a body. */
    for (uint32_t length = 0; length < 600; length += 37) {
        uint8_t buffer[FRAME_HEADER_BYTES + 600];
        frame_write_header(buffer, length);
        for (uint32_t j = 0; j < length; j++) buffer[FRAME_HEADER_BYTES + j] = frame_pattern(0, j);
        frame_reader reader;
        frame_reader_init(&reader, 600);
        frame_reader_push(&reader, buffer, FRAME_HEADER_BYTES + length);
        const uint8_t *frame;
        size_t got;
        assert_int_equal(frame_reader_next(&reader, &frame, &got), 1);
        assert_int_equal(got, length);
        for (uint32_t j = 0; j < length; j++) assert_int_equal(frame[j], frame_pattern(0, j));
        frame_reader_close(&reader);
    }
}

/* xorshift64*: a fixed, portable sequence, so a failure reproduces on any
 * libc. */
static uint64_t rng_next(uint64_t *state) {
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * 0x2545F4914F6CDD1DULL;
}

static size_t rng_below(uint64_t *state, size_t bound) { return (size_t)(rng_next(state) % bound); }

/* 1000 frames of random sizes (mostly small, some far beyond the reader's
 * starting buffer), pushed in random chunks through both push and
 * reserve/commit: every frame comes out intact and in order. */
static void test_randomized_stream(void **state) {
    enum { FRAMES = 1000 };
    uint64_t rng = 0x7E55E2A5EED0001ULL;
    size_t *lengths = malloc(FRAMES * sizeof *lengths);
    assert_non_null(lengths);
    for (size_t i = 0; i < FRAMES; i++) {
        size_t kind = rng_below(&rng, 100);
        if (kind < 30)
            lengths[i] = rng_below(&rng, 17); /* tiny, including empty */
        else if (kind < 70)
            lengths[i] = rng_below(&rng, 2000); /* a typical message */
        else if (kind < 95)
            lengths[i] = rng_below(&rng, 40000); /* spans the starting buffer */
        else
            lengths[i] = rng_below(&rng, 200000); /* spans many reads */
    }
    stream s;
    stream_build(&s, lengths, FRAMES);
    free(lengths);

    frame_reader reader;
    frame_reader_init(&reader, 200000);
    size_t sent = 0;
    size_t next_index = 0;
    size_t chunks = 0;
    while (sent < s.length) {
        size_t scale = rng_below(&rng, 3);
        size_t chunk = 1 + rng_below(&rng, scale == 0 ? 16 : scale == 1 ? 4096 : 300000);
        if (chunk > s.length - sent) chunk = s.length - sent;
        if (rng_below(&rng, 2) == 0) {
            frame_reader_push(&reader, s.bytes + sent, chunk);
        } else {
            size_t wanted = 1 + rng_below(&rng, 70000);
            uint8_t *space;
            size_t space_bytes;
            frame_reader_reserve(&reader, wanted, &space, &space_bytes);
            assert_true(space_bytes >= wanted);
            if (chunk > space_bytes) chunk = space_bytes;
            memcpy(space, s.bytes + sent, chunk);
            frame_reader_commit(&reader, chunk);
        }
        sent += chunk;
        chunks++;
        drain(&reader, &s, &next_index);
        /* Everything complete so far has come out. */
        size_t expected = 0;
        while (expected < s.count && s.frame_ends[expected] <= sent) expected++;
        assert_int_equal(next_index, expected);
        assert_int_equal(frame_reader_pending(&reader), sent - (expected ? s.frame_ends[expected - 1] : 0));
    }
    assert_int_equal(next_index, FRAMES);
    assert_int_equal(frame_reader_pending(&reader), 0);
    assert_true(chunks > 100);
    frame_reader_close(&reader);
    stream_free(&s);
}

/* Committing more than was reserved is a broken invariant in the caller:
 * the process stops (STYLE rule 5) rather than write past the buffer. Run
 * in a child so the abort does not end the test program. */
static void test_commit_beyond_reserved_stops_process(void **state) {
    assert_int_equal(fflush(NULL), 0); /* or the child would write our buffers again */
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int null_fd = open("/dev/null", O_WRONLY);
        if (null_fd >= 0) dup2(null_fd, STDERR_FILENO);
        frame_reader reader;
        frame_reader_init(&reader, NO_LIMIT);
        uint8_t *space;
        size_t space_bytes;
        frame_reader_reserve(&reader, 16, &space, &space_bytes);
        frame_reader_commit(&reader, space_bytes + 1);
        _exit(0); /* not reached if the reader checks */
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status));
    assert_int_equal(WTERMSIG(status), SIGABRT);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty_reader_has_no_frame),
        cmocka_unit_test(test_single_frame),
        cmocka_unit_test(test_byte_by_byte),
        cmocka_unit_test(test_every_split_point),
        cmocka_unit_test(test_every_pair_of_split_points),
        cmocka_unit_test(test_coalesced_frames_in_one_push),
        cmocka_unit_test(test_zero_length_frames),
        cmocka_unit_test(test_frame_at_limit_accepted),
        cmocka_unit_test(test_frame_over_limit_rejected_on_header),
        cmocka_unit_test(test_over_limit_after_good_frames),
        cmocka_unit_test(test_reserve_commit_like_socket_read),
        cmocka_unit_test(test_reserve_keeps_partial_frame),
        cmocka_unit_test(test_write_header_round_trip),
        cmocka_unit_test(test_randomized_stream),
        cmocka_unit_test(test_commit_beyond_reserved_stops_process),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
