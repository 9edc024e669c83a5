/* bench_volatile.c -- bytes per volatile position+yaw update
 * (cellapp/volatile_codec.c) against a naive baseline and KBEngine's 7 B.
 *
 *   bench-volatile [--ticks N]
 *
 * 1,000 bots walk at 5 m/s in a 2 km square at 1/64 m precision, sampled at
 * 10 Hz for 60 s (600 ticks). Each turns now and then (2 % of ticks, i.e.
 * about every 5 s, by up to +-90 degrees) and at the world's edges; one in
 * five walks on hills, so its height changes too, the rest on flat ground.
 * Every bot is encoded every tick (a moving entity's update; the first is
 * absolute) into one stream per tick, then decoded into client trackers and
 * checked against the truth.
 *
 * Every record is counted with a header of 2 bits (record kind) + 10 bits
 * (alias), as the witness frames it. Per-record bytes are the record's bits
 * rounded up to whole bytes (as if each were byte-aligned: records are in
 * fact packed back to back, so the mean bits / 8 is the true stream cost,
 * and is printed too). The naive baseline is 3 floats + a float yaw = 16 B
 * plus the same header.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "volatile_codec.h"
#include "bench_args.h"

#define BOTS 1000
#define HZ 10
#define SPEED 5.0 /* m/s */
#define HEADER_BITS (2 + 10)
/* Records of up to 63 bytes: the absolute form is 8 bytes here. */
#define HIST_BYTES 64
#define KBENGINE_BYTES 7.0
#define PI 3.14159265358979323846

typedef struct bot {
    double x, y, z, heading;
    bool hills;
    volatile_track server, client;
} bot;

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;
static double rnd(void) {
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (double)((rng_state * 2685821657736338717ull) >> 11) / 9007199254740992.0;
}

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static double terrain(double x, double z) { return 3.0 * sin(x / 15.0) * cos(z / 15.0); }

/* The byte count at percentile p (0..1) of a histogram of n samples. */
static int percentile(const uint64_t *hist, uint64_t n, double p) {
    uint64_t want = (uint64_t)ceil(p * (double)n), seen = 0;
    if (want == 0) want = 1;
    for (int b = 0; b < HIST_BYTES; b++) {
        seen += hist[b];
        if (seen >= want) return b;
    }
    return HIST_BYTES - 1;
}

int main(int argc, char **argv) {
    int ticks = 60 * HZ;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--ticks") == 0 && i + 1 < argc)
            ticks = bench_int_arg(argv[++i], 0);
        else {
            fprintf(stderr, "usage: bench-volatile [--ticks N]\n");
            return 2;
        }
    }

    const double min[3] = {-1024, -64, -1024}, max[3] = {1024, 64, 1024};
    volatile_codec_config config;
    if (volatile_codec_config_init(&config, 1.0 / 64, min, max, 256) != 0) {
        fprintf(stderr, "bad config\n");
        return 1;
    }

    static bot bots[BOTS];
    for (int i = 0; i < BOTS; i++) {
        bot *b = &bots[i];
        b->x = -1000 + 2000 * rnd();
        b->z = -1000 + 2000 * rnd();
        b->heading = 2 * PI * rnd() - PI;
        b->hills = i % 5 == 0;
        b->y = b->hills ? terrain(b->x, b->z) : 0;
        volatile_track_init(&b->server);
        volatile_track_init(&b->client);
    }

    /* The absolute form's size; no delta record here comes near it. */
    const int absolute_bits =
        (int)(1 + config.axis_bits[0] + config.axis_bits[1] + config.axis_bits[2] + config.yaw_bits);
    static uint64_t hist[HIST_BYTES];
    uint64_t records = 0, total_bits = 0, absolute = 0;
    double max_err = 0, max_yaw_err = 0, encode_ns = 0, decode_ns = 0;
    bit_writer w;
    bit_writer_init(&w);
    const double step = SPEED / HZ;

    for (int t = 0; t < ticks; t++) {
        for (int i = 0; i < BOTS; i++) {
            bot *b = &bots[i];
            if (rnd() < 0.02) b->heading += (rnd() - 0.5) * PI;
            double nx = b->x + step * cos(b->heading), nz = b->z + step * sin(b->heading);
            if (nx < -1020 || nx > 1020 || nz < -1020 || nz > 1020) {
                b->heading += PI; /* turn back at the edge */
                nx = b->x + step * cos(b->heading);
                nz = b->z + step * sin(b->heading);
            }
            b->heading = remainder(b->heading, 2 * PI);
            b->x = nx;
            b->z = nz;
            b->y = b->hills ? terrain(nx, nz) : 0;
        }

        bit_writer_reset(&w);
        static int bits[BOTS];
        double t0 = now_ns();
        for (int i = 0; i < BOTS; i++) {
            bot *b = &bots[i];
            bits[i] = volatile_codec_encode(&w, &b->server, &config, (float)b->x, (float)b->y, (float)b->z,
                                            (float)b->heading);
        }
        double t1 = now_ns();
        encode_ns += t1 - t0;

        bit_reader r;
        bit_reader_init_bits(&r, bit_writer_data(&w), bit_writer_bits(&w));
        static float out[BOTS][4];
        t0 = now_ns();
        for (int i = 0; i < BOTS; i++) {
            if (volatile_codec_decode(&r, &bots[i].client, &config, &out[i][0], &out[i][1], &out[i][2], &out[i][3]) !=
                0) {
                fprintf(stderr, "decode failed at tick %d bot %d\n", t, i);
                return 1;
            }
        }
        t1 = now_ns();
        decode_ns += t1 - t0;

        for (int i = 0; i < BOTS; i++) {
            bot *b = &bots[i];
            if (bits[i] < 0) {
                fprintf(stderr, "encode failed at tick %d bot %d\n", t, i);
                return 1;
            }
            if (bits[i] == absolute_bits) absolute++;
            int record_bits = bits[i] + HEADER_BITS;
            int bytes = (record_bits + 7) / 8;
            hist[bytes < HIST_BYTES ? bytes : HIST_BYTES - 1]++;
            records++;
            total_bits += (uint64_t)record_bits;
            /* Error against the float the server was given. */
            const double e[3] = {fabs(out[i][0] - (float)b->x), fabs(out[i][1] - (float)b->y),
                                 fabs(out[i][2] - (float)b->z)};
            for (int a = 0; a < 3; a++)
                if (e[a] > max_err) max_err = e[a];
            double dy = fmod(fabs((double)out[i][3] - (float)b->heading), 2 * PI);
            if (dy > PI) dy = 2 * PI - dy;
            if (dy > max_yaw_err) max_yaw_err = dy;
        }
    }
    bit_writer_close(&w);

    int median = percentile(hist, records, 0.5), p99 = percentile(hist, records, 0.99);
    double mean_bytes = (double)total_bits / (double)records / 8.0;
    const int naive_bits = 16 * 8 + HEADER_BITS;
    const int naive_bytes = (naive_bits + 7) / 8;

    printf("bench-volatile: %d bots, %d ticks at %d Hz, walking %.1f m/s, 1/64 m, 256 yaw steps\n", BOTS, ticks, HZ,
           SPEED);
    printf("  records                 %llu (%llu absolute)\n", (unsigned long long)records,
           (unsigned long long)absolute);
    printf("  header                  %d bits per record (2 kind + 10 alias), included below\n", HEADER_BITS);
    printf("  codec  bytes/update     median %d, p99 %d, mean %.2f packed\n", median, p99, mean_bytes);
    printf("  naive  bytes/update     median %d, p99 %d, mean %.2f packed (16 B + header)\n", naive_bytes, naive_bytes,
           naive_bits / 8.0);
    printf("  ratio naive/codec       median %.2fx, mean %.2fx\n", (double)naive_bytes / median,
           (naive_bits / 8.0) / mean_bytes);
    printf("  vs KBEngine 7 B         median %.2fx smaller (%d B vs %.0f B)\n", KBENGINE_BYTES / median, median,
           KBENGINE_BYTES);
    printf("  max position error      %.5f m (precision/2 = %.5f m)\n", max_err, 1.0 / 128);
    printf("  max yaw error           %.5f rad (half a step = %.5f rad)\n", max_yaw_err, PI / 256);
    printf("  encode                  %.1f ns/record\n", encode_ns / (double)records);
    printf("  decode                  %.1f ns/record\n", decode_ns / (double)records);
    printf("  target median <= 5 B    %s\n", median <= 5 ? "PASS" : "FAIL");
    return median <= 5 && max_err <= 1.0 / 128 + 1e-4 ? 0 : 1;
}
