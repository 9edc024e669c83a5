/* frame.c -- reassembles length-prefixed frames from a TCP byte stream
 * without copying them, and refuses oversized frames before buffering them.
 * It knows nothing of sockets or protobuf; channel.c feeds it. */
#include "frame.h"

#include <stdlib.h>
#include <string.h>

#include "log.h"

/* Frames are small (a tick's view update is a few KB), so start with a
 * buffer that holds dozens of them and grow geometrically when needed. */
#define FRAME_READER_INITIAL_CAPACITY 16384

void frame_reader_init(frame_reader *reader, size_t max_frame_bytes) {
    memset(reader, 0, sizeof *reader);
    reader->max_frame_bytes = max_frame_bytes;
}

void frame_reader_close(frame_reader *reader) {
    free(reader->buffer);
    memset(reader, 0, sizeof *reader);
}

void frame_reader_reserve(frame_reader *reader, size_t wanted, uint8_t **space, size_t *space_bytes) {
    /* Move the unconsumed tail to the front first: handed-out frames are
     * no longer referenced once the caller asks for more space. */
    if (reader->start > 0) {
        size_t pending = reader->end - reader->start;
        if (pending > 0) memmove(reader->buffer, reader->buffer + reader->start, pending);
        reader->start = 0;
        reader->end = pending;
    }
    /* A reader that has no buffer yet gets one even for 0 bytes: *space is
     * never NULL + 0. */
    if (!reader->buffer || reader->capacity - reader->end < wanted) {
        size_t capacity = reader->capacity ? reader->capacity : FRAME_READER_INITIAL_CAPACITY;
        while (capacity - reader->end < wanted) capacity *= 2;
        reader->buffer = xrealloc(reader->buffer, capacity);
        reader->capacity = capacity;
    }
    *space = reader->buffer + reader->end;
    *space_bytes = reader->capacity - reader->end;
}

void frame_reader_commit(frame_reader *reader, size_t received) {
    if (received > reader->capacity - reader->end) log_panic("frame_reader_commit beyond reserved space");
    reader->end += received;
}

void frame_reader_push(frame_reader *reader, const uint8_t *data, size_t length) {
    uint8_t *space;
    size_t space_bytes;
    frame_reader_reserve(reader, length, &space, &space_bytes);
    if (length > 0) memcpy(space, data, length);
    frame_reader_commit(reader, length);
}

int frame_reader_next(frame_reader *reader, const uint8_t **frame, size_t *length) {
    size_t pending = reader->end - reader->start;
    if (pending < FRAME_HEADER_BYTES) return 0;
    const uint8_t *header = reader->buffer + reader->start;
    uint32_t declared =
        ((uint32_t)header[0] << 24) | ((uint32_t)header[1] << 16) | ((uint32_t)header[2] << 8) | (uint32_t)header[3];
    if (declared > reader->max_frame_bytes) {
        reader->rejected_length = declared;
        return FRAME_ERROR_TOO_LARGE;
    }
    if (pending - FRAME_HEADER_BYTES < declared) return 0;
    *frame = header + FRAME_HEADER_BYTES;
    *length = declared;
    reader->start += FRAME_HEADER_BYTES + declared;
    return 1;
}

size_t frame_reader_pending(const frame_reader *reader) { return reader->end - reader->start; }

void frame_write_header(uint8_t header[FRAME_HEADER_BYTES], uint32_t length) {
    header[0] = (uint8_t)(length >> 24);
    header[1] = (uint8_t)(length >> 16);
    header[2] = (uint8_t)(length >> 8);
    header[3] = (uint8_t)length;
}
