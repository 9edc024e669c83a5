/* test_volatile_codec.c -- volatile position+yaw records: round-trip error
 * within half a step, no drift over a long walk, the absolute form where it
 * must be, the 1-bit "unchanged" flags, malformed input rejected without
 * touching the tracker, and a position quantized once encoding as the
 * floats do. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <math.h>

#include "volatile_codec.h"

#define PRECISION (1.0 / 64)
/* Float rounding of a reconstructed coordinate: half an ulp at 1024 m is
 * 6.1e-5 m, so this slack is far below the precision it is added to. */
#define EPS 1e-4
#define PI 3.14159265358979323846

static const double world_min[3] = {-1024, -256, -1024};
static const double world_max[3] = {1024, 256, 1024};

static volatile_codec_config make_config(void) {
    volatile_codec_config config;
    assert_int_equal(volatile_codec_config_init(&config, PRECISION, world_min, world_max, 256), 0);
    return config;
}

/* xorshift64*: a reproducible walk, independent of libc's rand. */
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static double rnd(void) {
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (double)((rng_state * 2685821657736338717ull) >> 11) / 9007199254740992.0;
}
static double rnd_range(double lo, double hi) { return lo + (hi - lo) * rnd(); }

static double yaw_error(double a, double b) {
    double d = fmod(fabs(a - b), 2 * PI);
    return d > PI ? 2 * PI - d : d;
}

static bool tracks_equal(const volatile_track *a, const volatile_track *b) {
    return a->x == b->x && a->y == b->y && a->z == b->z && a->yaw == b->yaw && a->valid == b->valid;
}

/* Encodes one record into a fresh writer, decodes it on the client's
 * tracker, checks lockstep and the error bounds. Returns the bits. */
static int round_trip(const volatile_codec_config *config, volatile_track *server, volatile_track *client, float x,
                      float y, float z, float yaw, bool *absolute) {
    bit_writer w;
    bit_writer_init(&w);
    int bits = volatile_codec_encode(&w, server, config, x, y, z, yaw);
    assert_true(bits > 0);
    assert_int_equal((size_t)bits, bit_writer_bits(&w));
    if (absolute != NULL) *absolute = (bit_writer_data(&w)[0] & 1) != 0;
    bit_reader r;
    bit_reader_init_bits(&r, bit_writer_data(&w), bit_writer_bits(&w));
    float ox, oy, oz, oyaw;
    assert_int_equal(volatile_codec_decode(&r, client, config, &ox, &oy, &oz, &oyaw), 0);
    assert_int_equal(bit_reader_remaining(&r), 0);
    assert_true(tracks_equal(server, client));
    assert_true(fabs((double)ox - x) <= PRECISION / 2 + EPS);
    assert_true(fabs((double)oy - y) <= PRECISION / 2 + EPS);
    assert_true(fabs((double)oz - z) <= PRECISION / 2 + EPS);
    assert_true(yaw_error(oyaw, yaw) <= PI / 256 + 1e-5);
    assert_true(oyaw > -PI - 1e-6 && oyaw <= PI + 1e-6);
    bit_writer_close(&w);
    return bits;
}

static void test_config_bits(void **state) {
    (void)state;
    volatile_codec_config config = make_config();
    assert_int_equal(config.units[0], 131072); /* 2048 m * 64 */
    assert_int_equal(config.axis_bits[0], 18);
    assert_int_equal(config.units[1], 32768);
    assert_int_equal(config.axis_bits[1], 16);
    assert_int_equal(config.yaw_bits, 8);
    double bad_max[3] = {1024, -256, 1024};
    assert_int_equal(volatile_codec_config_init(&config, PRECISION, world_min, bad_max, 256),
                     VOLATILE_CODEC_ERROR_CONFIG);
    assert_int_equal(volatile_codec_config_init(&config, 0, world_min, world_max, 256), VOLATILE_CODEC_ERROR_CONFIG);
    assert_int_equal(volatile_codec_config_init(&config, NAN, world_min, world_max, 256), VOLATILE_CODEC_ERROR_CONFIG);
    assert_int_equal(volatile_codec_config_init(&config, PRECISION, world_min, world_max, 1),
                     VOLATILE_CODEC_ERROR_CONFIG);
    double huge[3] = {1e9, 1e9, 1e9};
    assert_int_equal(volatile_codec_config_init(&config, PRECISION, world_min, huge, 256), VOLATILE_CODEC_ERROR_CONFIG);
    assert_int_equal(volatile_codec_config_init(&config, 0.01, world_min, world_max, 360), 0);
    assert_int_equal(config.yaw_bits, 9);
}

static void test_round_trip_random(void **state) {
    (void)state;
    volatile_codec_config config = make_config();
    volatile_track server, client;
    for (int i = 0; i < 2000; i++) {
        volatile_track_init(&server);
        volatile_track_init(&client);
        float x = (float)rnd_range(-1024, 1024), y = (float)rnd_range(-256, 256);
        float z = (float)rnd_range(-1024, 1024), yaw = (float)rnd_range(-10, 10);
        round_trip(&config, &server, &client, x, y, z, yaw, NULL);
        /* and a delta from there */
        x = (float)fmin(1024, fmax(-1024, x + rnd_range(-1, 1)));
        z = (float)fmin(1024, fmax(-1024, z + rnd_range(-1, 1)));
        round_trip(&config, &server, &client, x, y, z, (float)rnd_range(-PI, PI), NULL);
    }
    /* The corners of the world. */
    volatile_track_init(&server);
    volatile_track_init(&client);
    round_trip(&config, &server, &client, -1024, -256, -1024, 0, NULL);
    round_trip(&config, &server, &client, 1024, 256, 1024, (float)PI, NULL);
}

static void test_no_drift_random_walk(void **state) {
    (void)state;
    volatile_codec_config config = make_config();
    volatile_track server, client;
    volatile_track_init(&server);
    volatile_track_init(&client);
    double x = 0, y = 10, z = 0, heading = 0;
    for (int step = 0; step < 10000; step++) {
        if (rnd() < 0.1) heading += rnd_range(-1, 1);
        double speed = rnd_range(0, 0.6); /* up to ~40 units a tick */
        x = fmin(1023, fmax(-1023, x + speed * cos(heading)));
        z = fmin(1023, fmax(-1023, z + speed * sin(heading)));
        if (rnd() < 0.2) y = fmin(255, fmax(-255, y + rnd_range(-0.4, 0.4)));
        /* The check is against the true value at every step: no drift. */
        bool absolute = true;
        int bits = round_trip(&config, &server, &client, (float)x, (float)y, (float)z, (float)heading, &absolute);
        if (step > 0) {
            assert_false(absolute);
            assert_true(bits <= 1 + 2 + 14 + 1 + 7 + 1 + 1 + 8);
        }
    }
}

static void test_absolute_first_and_teleport(void **state) {
    (void)state;
    volatile_codec_config config = make_config();
    volatile_track server, client;
    volatile_track_init(&server);
    volatile_track_init(&client);
    bool absolute = false;
    int bits = round_trip(&config, &server, &client, 10, 0, 10, 0, &absolute);
    assert_true(absolute);
    assert_int_equal(bits, 1 + 18 + 16 + 18 + 8);
    round_trip(&config, &server, &client, 10.5f, 0, 10, 0, &absolute);
    assert_false(absolute);
    /* A teleport: 500 m is beyond every delta width. */
    round_trip(&config, &server, &client, 510.5f, 0, 10, 0, &absolute);
    assert_true(absolute);
    /* A large vertical drop (beyond the 14-bit dy) also goes absolute. */
    round_trip(&config, &server, &client, 510.5f, -200, 10, 0, &absolute);
    assert_true(absolute);
    /* Re-initialising the server's tracker (re-entering view) forces it. */
    volatile_track_init(&server);
    round_trip(&config, &server, &client, 511, -200, 10, 0, &absolute);
    assert_true(absolute);
}

static int encode_bits(const volatile_codec_config *config, volatile_track *track, float x, float y, float z,
                       float yaw) {
    bit_writer w;
    bit_writer_init(&w);
    int bits = volatile_codec_encode(&w, track, config, x, y, z, yaw);
    bit_writer_close(&w);
    return bits;
}

static void test_unchanged_costs_one_bit(void **state) {
    (void)state;
    volatile_codec_config config = make_config();
    volatile_track t;
    volatile_track_init(&t);
    const float u = (float)PRECISION;
    float yaw_a = 0, yaw_b = (float)(2 * PI / 256 * 10);
    encode_bits(&config, &t, 0, 0, 0, yaw_a);
    /* 10 units on x: class 5. mode + hclass + 2*5 + yflag + yawflag. */
    assert_int_equal(encode_bits(&config, &t, 10 * u, 0, 0, yaw_a), 1 + 2 + 10 + 1 + 1);
    /* Walking pace, 32 units on both axes: class 7. */
    assert_int_equal(encode_bits(&config, &t, 42 * u, 0, 32 * u, yaw_a), 1 + 2 + 14 + 1 + 1);
    /* The same with y changed: + yclass + 6 bits. */
    assert_int_equal(encode_bits(&config, &t, 74 * u, 3 * u, 64 * u, yaw_a), 1 + 2 + 14 + 1 + 7 + 1);
    /* The same with a sharp turn (10 steps): + small-turn flag + 8 bits. */
    assert_int_equal(encode_bits(&config, &t, 106 * u, 3 * u, 96 * u, yaw_b), 1 + 2 + 14 + 1 + 1 + 1 + 8);
    /* Turning in place, back by 10 steps: no horizontal bits at all. */
    assert_int_equal(encode_bits(&config, &t, 106 * u, 3 * u, 96 * u, yaw_a), 1 + 2 + 1 + 1 + 1 + 8);
    /* Nothing changed: 5 bits (the witness normally sends nothing). */
    assert_int_equal(encode_bits(&config, &t, 106 * u, 3 * u, 96 * u, yaw_a), 1 + 2 + 1 + 1);
    /* Steering: a turn of -8..7 steps is a 4-bit delta. */
    float step = (float)(2 * PI / 256);
    assert_int_equal(encode_bits(&config, &t, 106 * u, 3 * u, 96 * u, 7 * step), 1 + 2 + 1 + 1 + 1 + 4);
    assert_int_equal(encode_bits(&config, &t, 106 * u, 3 * u, 96 * u, -1 * step), 1 + 2 + 1 + 1 + 1 + 4);
    assert_int_equal(encode_bits(&config, &t, 106 * u, 3 * u, 96 * u, 7 * step), 1 + 2 + 1 + 1 + 1 + 8);
}

/* Small turns wrap around the circle both ways, and decode to the step
 * the encoder meant, step by step across a whole turn and back. */
static void test_small_turns_wrap(void **state) {
    (void)state;
    volatile_codec_config config = make_config();
    volatile_track server, client;
    volatile_track_init(&server);
    volatile_track_init(&client);
    bool absolute = false;
    const double step = 2 * PI / 256;
    round_trip(&config, &server, &client, 0, 0, 0, (float)(-3 * step), &absolute);
    for (int i = -3; i < 256 + 40; i += 5) {
        int bits = round_trip(&config, &server, &client, 0, 0, 0, (float)(i * step), &absolute);
        assert_false(absolute);
        assert_true(bits <= 1 + 2 + 1 + 1 + 1 + 4 || i == -3);
    }
    for (int i = 256 + 40; i > -300; i -= 8) {
        int bits = round_trip(&config, &server, &client, 0, 0, 0, (float)(i * step), &absolute);
        assert_false(absolute);
        assert_true(bits <= 1 + 2 + 1 + 1 + 1 + 4);
    }
}

/* Every proper prefix of a record is rejected, the tracker unchanged. */
static void check_truncations(const volatile_codec_config *config, const bit_writer *w, int bits,
                              const volatile_track *before) {
    for (int n = 0; n < bits; n++) {
        volatile_track client = *before;
        bit_reader r;
        bit_reader_init_bits(&r, bit_writer_data(w), (size_t)n);
        float x = 7, y = 7, z = 7, yaw = 7;
        assert_int_equal(volatile_codec_decode(&r, &client, config, &x, &y, &z, &yaw), VOLATILE_CODEC_ERROR_TRUNCATED);
        assert_true(tracks_equal(&client, before));
        assert_true(x == 7 && y == 7 && z == 7 && yaw == 7);
        assert_true(bit_reader_failed(&r));
    }
    volatile_track client = *before;
    bit_reader r;
    bit_reader_init_bits(&r, bit_writer_data(w), (size_t)bits);
    float x, y, z, yaw;
    assert_int_equal(volatile_codec_decode(&r, &client, config, &x, &y, &z, &yaw), 0);
}

static void test_truncated_every_bit(void **state) {
    (void)state;
    volatile_codec_config config = make_config();
    volatile_track server, client;
    volatile_track_init(&server);
    volatile_track_init(&client);
    bit_writer w;
    bit_writer_init(&w);
    /* Absolute. */
    int bits = volatile_codec_encode(&w, &server, &config, 100, 20, -300, 1);
    check_truncations(&config, &w, bits, &client);
    /* Delta with every optional field present (y changed, yaw changed),
     * decoded onto the tracker the client holds after the absolute one. */
    bit_reader r;
    bit_reader_init_bits(&r, bit_writer_data(&w), (size_t)bits);
    float x, y, z, yaw;
    assert_int_equal(volatile_codec_decode(&r, &client, &config, &x, &y, &z, &yaw), 0);
    for (int i = 0; i < 3; i++) {
        static const float moves[3][4] = {{100.3f, 20.2f, -300.4f, 2}, {110, 40, -290, -2}, {100, 20, -300, 2}};
        bit_writer_reset(&w);
        bits = volatile_codec_encode(&w, &server, &config, moves[i][0], moves[i][1], moves[i][2], moves[i][3]);
        assert_true((bit_writer_data(&w)[0] & 1) == 0); /* delta */
        check_truncations(&config, &w, bits, &client);
        bit_reader_init_bits(&r, bit_writer_data(&w), (size_t)bits);
        assert_int_equal(volatile_codec_decode(&r, &client, &config, &x, &y, &z, &yaw), 0);
        assert_true(tracks_equal(&server, &client));
    }
    bit_writer_close(&w);
}

/* Decodes a hand-made record and expects `rc` with the tracker unchanged. */
static void expect_rejected(const volatile_codec_config *config, const bit_writer *w, const volatile_track *before,
                            int rc) {
    volatile_track client = *before;
    bit_reader r;
    bit_reader_init_bits(&r, bit_writer_data(w), bit_writer_bits(w));
    float x = 7, y = 7, z = 7, yaw = 7;
    assert_int_equal(volatile_codec_decode(&r, &client, config, &x, &y, &z, &yaw), rc);
    assert_true(tracks_equal(&client, before));
    assert_true(x == 7 && y == 7 && z == 7 && yaw == 7);
    assert_true(bit_reader_failed(&r));
}

/* A position quantized once and encoded for many clients (the witness's
 * way) writes exactly the bits and leaves exactly the trackers that
 * encoding from the floats does, and quantize refuses what encode does. */
static void test_quantized_once_matches(void **state) {
    (void)state;
    volatile_codec_config config = make_config();
    volatile_track direct, shared;
    volatile_track_init(&direct);
    volatile_track_init(&shared);
    for (int step = 0; step < 2000; step++) {
        float x = (float)rnd_range(-1024, 1024), y = (float)rnd_range(-256, 256);
        float z = (float)rnd_range(-1024, 1024), yaw = (float)rnd_range(-40, 40);
        if (step % 3) { /* mostly small steps from the last position: deltas */
            x = (float)((double)direct.x * PRECISION - 1024 + rnd_range(-1, 1));
            z = (float)((double)direct.z * PRECISION - 1024 + rnd_range(-1, 1));
        }
        bit_writer a, b;
        bit_writer_init(&a);
        bit_writer_init(&b);
        int direct_bits = volatile_codec_encode(&a, &direct, &config, x, y, z, yaw);
        volatile_quantized position;
        if (direct_bits < 0) {
            assert_int_equal(volatile_codec_quantize(&config, x, y, z, yaw, &position), VOLATILE_CODEC_ERROR_RANGE);
        } else {
            assert_int_equal(volatile_codec_quantize(&config, x, y, z, yaw, &position), 0);
            assert_int_equal(volatile_codec_encode_quantized(&b, &shared, &config, &position), direct_bits);
            assert_int_equal(bit_writer_bits(&a), bit_writer_bits(&b));
            assert_memory_equal(bit_writer_data(&a), bit_writer_data(&b), bit_writer_bytes(&a));
            assert_true(tracks_equal(&direct, &shared));
        }
        bit_writer_close(&a);
        bit_writer_close(&b);
    }
    volatile_quantized untouched = {1, 2, 3, 4};
    assert_int_equal(volatile_codec_quantize(&config, 2000, 0, 0, 0, &untouched), VOLATILE_CODEC_ERROR_RANGE);
    assert_int_equal(volatile_codec_quantize(&config, 0, 0, 0, NAN, &untouched), VOLATILE_CODEC_ERROR_RANGE);
    assert_int_equal(untouched.x, 1);
    assert_int_equal(untouched.yaw, 4);
}

static void test_out_of_world_rejected(void **state) {
    (void)state;
    volatile_codec_config config;
    /* 200 yaw steps: an 8-bit field that can carry 200..255. */
    assert_int_equal(volatile_codec_config_init(&config, PRECISION, world_min, world_max, 200), 0);
    volatile_track empty, held;
    volatile_track_init(&empty);
    held = (volatile_track){.x = 3, .y = 100, .z = 131072, .yaw = 5, .valid = true};
    bit_writer w;
    bit_writer_init(&w);

    /* What the encoder takes, asked before writing. */
    assert_true(volatile_codec_accepts(&config, (float)world_min[0], 0, (float)world_max[2], 3.0f));
    assert_false(volatile_codec_accepts(&config, (float)world_max[0] + 1.0f, 0, 0, 0));
    assert_false(volatile_codec_accepts(&config, 0, (float)world_min[1] - 1.0f, 0, 0));
    assert_false(volatile_codec_accepts(&config, 0, 0, NAN, 0));
    assert_false(volatile_codec_accepts(&config, 0, 0, 0, INFINITY));

    /* Absolute x one unit past the max corner. */
    bit_writer_write(&w, 1, 1);
    bit_writer_write(&w, 131073, 18);
    bit_writer_write(&w, 0, 16);
    bit_writer_write(&w, 0, 18);
    bit_writer_write(&w, 0, 8);
    expect_rejected(&config, &w, &held, VOLATILE_CODEC_ERROR_RANGE);
    expect_rejected(&config, &w, &empty, VOLATILE_CODEC_ERROR_RANGE);

    /* Absolute y far past it (the field holds up to 65535, the world 32768). */
    bit_writer_reset(&w);
    bit_writer_write(&w, 1, 1);
    bit_writer_write(&w, 0, 18);
    bit_writer_write(&w, 65535, 16);
    bit_writer_write(&w, 0, 18);
    bit_writer_write(&w, 0, 8);
    expect_rejected(&config, &w, &held, VOLATILE_CODEC_ERROR_RANGE);

    /* Absolute yaw step past yaw_steps. */
    bit_writer_reset(&w);
    bit_writer_write(&w, 1, 1);
    bit_writer_write(&w, 0, 18);
    bit_writer_write(&w, 0, 16);
    bit_writer_write(&w, 0, 18);
    bit_writer_write(&w, 200, 8);
    expect_rejected(&config, &w, &held, VOLATILE_CODEC_ERROR_RANGE);

    /* A delta that walks off the min edge of x (3 - 5 < 0). */
    bit_writer_reset(&w);
    bit_writer_write(&w, 0, 1);
    bit_writer_write(&w, 1, 2);                     /* 5-bit class */
    bit_writer_write(&w, (uint64_t)(-5) & 0x1f, 5); /* dx = -5 */
    bit_writer_write(&w, 0, 5);                     /* dz = 0 */
    bit_writer_write(&w, 0, 1);
    bit_writer_write(&w, 0, 1);
    expect_rejected(&config, &w, &held, VOLATILE_CODEC_ERROR_RANGE);
    /* ... and one off the max edge of z (z already at the max). */
    bit_writer_reset(&w);
    bit_writer_write(&w, 0, 1);
    bit_writer_write(&w, 1, 2);
    bit_writer_write(&w, 0, 5);
    bit_writer_write(&w, 1, 5); /* dz = +1 */
    bit_writer_write(&w, 0, 1);
    bit_writer_write(&w, 0, 1);
    expect_rejected(&config, &w, &held, VOLATILE_CODEC_ERROR_RANGE);
    /* A delta with no base. */
    expect_rejected(&config, &w, &empty, VOLATILE_CODEC_ERROR_NO_BASE);

    /* The encoder refuses what lies outside the world, writing nothing. */
    volatile_track t = held;
    bit_writer_reset(&w);
    assert_int_equal(volatile_codec_encode(&w, &t, &config, 1025, 0, 0, 0), VOLATILE_CODEC_ERROR_RANGE);
    assert_int_equal(volatile_codec_encode(&w, &t, &config, 0, -300, 0, 0), VOLATILE_CODEC_ERROR_RANGE);
    assert_int_equal(volatile_codec_encode(&w, &t, &config, NAN, 0, 0, 0), VOLATILE_CODEC_ERROR_RANGE);
    assert_int_equal(volatile_codec_encode(&w, &t, &config, 0, 0, 0, INFINITY), VOLATILE_CODEC_ERROR_RANGE);
    assert_int_equal(bit_writer_bits(&w), 0);
    assert_true(tracks_equal(&t, &held));
    bit_writer_close(&w);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_bits),
        cmocka_unit_test(test_round_trip_random),
        cmocka_unit_test(test_no_drift_random_walk),
        cmocka_unit_test(test_absolute_first_and_teleport),
        cmocka_unit_test(test_unchanged_costs_one_bit),
        cmocka_unit_test(test_small_turns_wrap),
        cmocka_unit_test(test_truncated_every_bit),
        cmocka_unit_test(test_out_of_world_rejected),
        cmocka_unit_test(test_quantized_once_matches),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
