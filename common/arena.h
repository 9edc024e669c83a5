/* arena.h -- a bump allocator for the short-lived graph of one decoded
 * message.
 *
 * protobuf-c unpacks a message into many small allocations (one per
 * sub-message, repeated field and byte string) and frees them one by one;
 * for a tick's batch of a thousand client messages that is thousands of
 * malloc/free pairs per tick on the relay path. An arena hands out memory
 * from large chunks it keeps, and gives it all back at once: decode into
 * it, use the message, then arena_release to the mark taken before. Marks
 * nest, so a handler may decode another message while the first is in use.
 *
 * The arena keeps its chunks for the next message; after a release to
 * empty it frees all but ARENA_KEEP_BYTES of them, so one huge frame does
 * not pin its memory forever. Not thread-safe (one per loop).
 */
#ifndef TESSERA_ARENA_H
#define TESSERA_ARENA_H

#include <protobuf-c/protobuf-c.h>
#include <stddef.h>

typedef struct arena_chunk arena_chunk;

typedef struct arena {
    arena_chunk *current; /* the chunk being filled; earlier ones before it in the list */
    arena_chunk *first;
    ProtobufCAllocator allocator; /* hands out from this arena; its free does nothing */
} arena;

/* Where an arena stood: arena_release gives back everything allocated
 * after it. */
typedef struct arena_mark {
    arena_chunk *chunk;
    size_t used;
} arena_mark;

void arena_init(arena *a);
/* Frees every chunk. The arena may be initialised again. */
void arena_close(arena *a);

/* `size` bytes aligned for any type, valid until a release to a mark taken
 * before this call. Never NULL (out of memory stops the process). */
void *arena_alloc(arena *a, size_t size);
arena_mark arena_save(const arena *a);
void arena_release(arena *a, arena_mark mark);

/* A protobuf-c allocator backed by `a`: pass it to *__unpack and skip
 * *__free_unpacked (release the arena instead). */
ProtobufCAllocator *arena_protobuf(arena *a);

/* Bytes the arena holds now (in chunks, used or not). */
size_t arena_bytes(const arena *a);

#endif
