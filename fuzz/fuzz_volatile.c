/* fuzz_volatile.c -- fuzzes common/volatile_codec.c, the client's decoder
 * of volatile position and yaw records. The records are read one after
 * another into one tracker (absolute, then deltas from it) with the
 * configuration of a demo-sized space, until the input ends or a record is
 * refused.
 *
 * Checks: a decoded position lies in the world and a yaw in [-pi, pi];
 * volatile_codec_skip reads exactly the bits decode read; a refused record
 * leaves the tracker alone; re-encoding the decoded values from the tracker
 * before gives the tracker after (the two ends stay in lockstep); no crash,
 * no leak. */
#include <math.h>

#include "fuzz_support.h"
#include "volatile_codec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const volatile_codec_config *config = fuzz_arena_config();
    volatile_track track;
    volatile_track_init(&track);
    bit_reader r, skipper;
    bit_reader_init(&r, data, size);
    bit_reader_init(&skipper, data, size);
    while (bit_reader_remaining(&r) > 0) {
        volatile_track before = track;
        float x, y, z, yaw;
        int rc = volatile_codec_decode(&r, &track, config, &x, &y, &z, &yaw);
        if (rc != 0) {
            fuzz_check(bit_reader_failed(&r), "a refused record left the reader good");
            fuzz_check(before.x == track.x && before.y == track.y && before.z == track.z && before.yaw == track.yaw &&
                           before.valid == track.valid,
                       "a refused record moved the tracker");
            break;
        }
        fuzz_check(volatile_codec_skip(&skipper, config) == 0, "skip refused a record decode took");
        fuzz_check(bit_reader_position(&skipper) == bit_reader_position(&r), "skip and decode read different bits");
        fuzz_check(track.valid, "a decoded record left the tracker without a position");
        fuzz_check(x >= config->min[0] && x <= config->max[0] + config->precision && y >= config->min[1] &&
                       y <= config->max[1] + config->precision && z >= config->min[2] &&
                       z <= config->max[2] + config->precision,
                   "a decoded position outside the world");
        fuzz_check(isfinite(yaw) && fabsf(yaw) <= (float)M_PI + 1e-6f, "a decoded yaw outside [-pi, pi]");
        /* The server's side: from `before` to the decoded values. */
        if (volatile_codec_accepts(config, x, y, z, yaw)) {
            volatile_track sent = before;
            bit_writer w;
            bit_writer_init(&w);
            fuzz_check(volatile_codec_encode(&w, &sent, config, x, y, z, yaw) > 0, "decoded values do not encode");
            fuzz_check(sent.x == track.x && sent.y == track.y && sent.z == track.z && sent.yaw == track.yaw,
                       "re-encoding the decoded values leaves the ends out of lockstep");
            bit_writer_close(&w);
        }
    }
    return 0;
}
