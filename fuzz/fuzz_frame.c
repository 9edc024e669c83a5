/* fuzz_frame.c -- fuzzes common/frame.c, the framing every Tessera
 * connection reads first. The input is pushed into a frame_reader in
 * chunks (the first byte picks their size, so frames straddle pushes as
 * they straddle reads) and every complete frame is taken out after each
 * push. Checks: each frame handed out is exactly the bytes behind its
 * length prefix in the input, in order; a length above the limit is
 * refused from its prefix alone; what is left pending is the input's
 * unread tail; no crash, no leak. */
#include <string.h>

#include "frame.h"
#include "fuzz_support.h"

/* The client link's default client_max_frame_bytes: a limit a fuzzer can
 * reach both sides of. */
#define FUZZ_FRAME_MAX_BYTES 65536

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    size_t step = 1 + data[0] % 97;
    frame_reader reader;
    frame_reader_init(&reader, FUZZ_FRAME_MAX_BYTES);
    size_t pushed = 0, consumed = 0;
    int refused = 0;
    while (pushed < size && !refused) {
        size_t chunk = size - pushed < step ? size - pushed : step;
        frame_reader_push(&reader, data + pushed, chunk);
        pushed += chunk;
        const uint8_t *frame;
        size_t length;
        int rc;
        while ((rc = frame_reader_next(&reader, &frame, &length)) == 1) {
            fuzz_check(size - consumed >= FRAME_HEADER_BYTES + length, "a frame longer than the input");
            const uint8_t *h = data + consumed;
            uint32_t declared = ((uint32_t)h[0] << 24) | ((uint32_t)h[1] << 16) | ((uint32_t)h[2] << 8) | h[3];
            fuzz_check(declared == length, "a frame's length is not its prefix");
            fuzz_check(length <= FUZZ_FRAME_MAX_BYTES, "a frame above the limit was handed out");
            fuzz_check(length == 0 || memcmp(frame, h + FRAME_HEADER_BYTES, length) == 0,
                       "a frame's bytes are not the input's");
            consumed += FRAME_HEADER_BYTES + length;
        }
        if (rc == FRAME_ERROR_TOO_LARGE) {
            fuzz_check(reader.rejected_length > FUZZ_FRAME_MAX_BYTES, "a frame within the limit was refused");
            refused = 1;
        } else {
            fuzz_check(rc == 0, "frame_reader_next returned neither a frame, nothing nor an error");
            fuzz_check(frame_reader_pending(&reader) == pushed - consumed, "pending bytes lost or invented");
            fuzz_check(pushed - consumed < FRAME_HEADER_BYTES ||
                           FRAME_HEADER_BYTES + (((uint32_t)data[consumed] << 24) |
                                                 ((uint32_t)data[consumed + 1] << 16) |
                                                 ((uint32_t)data[consumed + 2] << 8) | data[consumed + 3]) >
                               pushed - consumed,
                       "a complete frame was left buffered");
        }
    }
    frame_reader_close(&reader);
    return 0;
}
