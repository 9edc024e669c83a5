/* frame.h -- cutting a byte stream into length-prefixed frames.
 *
 * Wire format (the same on every Tessera connection):
 *
 *   +----------------------+---------------------------+
 *   | length N: 4 bytes BE | N bytes: one protobuf msg |
 *   +----------------------+---------------------------+
 *
 * The reader owns one growable buffer. The socket reads straight into its
 * free tail (frame_reader_reserve / frame_reader_commit), and complete frames
 * are handed out in place (frame_reader_next), so a frame is never copied.
 * A length above max_frame_bytes is an error as soon as its 4-byte prefix
 * has arrived, before any of its body is buffered or allocated.
 */
#ifndef TESSERA_FRAME_H
#define TESSERA_FRAME_H

#include <stddef.h>
#include <stdint.h>

#define FRAME_HEADER_BYTES 4

enum {
    FRAME_OK = 0,
    FRAME_ERROR_TOO_LARGE = -1,
};

typedef struct frame_reader {
    uint8_t *buffer;
    size_t capacity;
    size_t start; /* first byte not yet handed out */
    size_t end;   /* one past the last byte received */
    size_t max_frame_bytes;
    uint32_t rejected_length; /* the offending length after TOO_LARGE */
} frame_reader;

void frame_reader_init(frame_reader *reader, size_t max_frame_bytes);
void frame_reader_close(frame_reader *reader);

/* Gives a writable region at the end of the buffer, at least `wanted` bytes
 * (fewer never; the buffer grows). Frames returned by frame_reader_next
 * before this call are invalid after it. */
void frame_reader_reserve(frame_reader *reader, size_t wanted, uint8_t **space, size_t *space_bytes);
/* Records that `received` bytes were written into the reserved region. */
void frame_reader_commit(frame_reader *reader, size_t received);

/* Appends a copy of `data` (reserve + memcpy + commit), for tests and for
 * transports that do not read into our buffer. */
void frame_reader_push(frame_reader *reader, const uint8_t *data, size_t length);

/* Returns 1 and points *frame and *length at the next complete frame body (valid
 * until the next reserve/push), 0 when no complete frame is buffered, or
 * FRAME_ERROR_TOO_LARGE when the next frame's declared length is above the
 * limit (the stream cannot be resynchronised: close the connection). */
int frame_reader_next(frame_reader *reader, const uint8_t **frame, size_t *length);

/* Bytes buffered but not yet handed out. */
size_t frame_reader_pending(const frame_reader *reader);

/* Writes the 4-byte big-endian length prefix. */
void frame_write_header(uint8_t header[FRAME_HEADER_BYTES], uint32_t length);

#endif
