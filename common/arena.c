/* arena.c -- the bump allocator of arena.h: a list of chunks filled in
 * order; a mark is a chunk and an offset in it, and releasing to a mark
 * rewinds the fill point without freeing anything (the chunks after it are
 * kept for reuse), except that a release to empty trims what is kept. */
#include "arena.h"

#include <stdint.h>
#include <stdlib.h>

#include "log.h"

/* Why 64 KiB: a tick's batch for a few hundred clients decodes into one
 * chunk; larger messages chain chunks sized to fit. */
#define ARENA_CHUNK_BYTES ((size_t)64 * 1024)
/* What a release to empty keeps: enough for the largest usual batch, so a
 * steady load allocates nothing, while one outsized frame is returned. */
#define ARENA_KEEP_BYTES ((size_t)4 * 1024 * 1024)
#define ARENA_ALIGN ((size_t)16)

struct arena_chunk {
    arena_chunk *next;
    size_t size; /* bytes in data */
    size_t used;
    _Alignas(16) unsigned char data[];
};

static void *arena_protobuf_alloc(void *allocator_data, size_t size) { return arena_alloc(allocator_data, size); }

static void arena_protobuf_free(void *allocator_data, void *pointer) {
    (void)allocator_data;
    (void)pointer; /* released with the arena */
}

void arena_init(arena *a) {
    a->first = a->current = NULL;
    a->allocator.alloc = arena_protobuf_alloc;
    a->allocator.free = arena_protobuf_free;
    a->allocator.allocator_data = a;
}

void arena_close(arena *a) {
    arena_chunk *chunk = a->first;
    while (chunk) {
        arena_chunk *next = chunk->next;
        free(chunk);
        chunk = next;
    }
    a->first = a->current = NULL;
}

static arena_chunk *arena_new_chunk(size_t at_least) {
    size_t size = at_least > ARENA_CHUNK_BYTES ? at_least : ARENA_CHUNK_BYTES;
    arena_chunk *chunk = xmalloc(sizeof *chunk + size);
    chunk->next = NULL;
    chunk->size = size;
    chunk->used = 0;
    return chunk;
}

void *arena_alloc(arena *a, size_t size) {
    if (size > SIZE_MAX - 2 * ARENA_ALIGN) log_panic("arena: allocation of %zu bytes", size);
    size = (size + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
    if (!a->current) {
        a->first = a->current = arena_new_chunk(size);
    }
    /* Fill the current chunk, then reuse the kept ones after it, then add. */
    while (a->current->size - a->current->used < size) {
        arena_chunk *next = a->current->next;
        if (!next) {
            next = arena_new_chunk(size);
            a->current->next = next;
        } else if (next->size < size) {
            /* A kept chunk too small for this: put a fitting one before it. */
            arena_chunk *fitting = arena_new_chunk(size);
            fitting->next = next;
            a->current->next = fitting;
            next = fitting;
        }
        next->used = 0;
        a->current = next;
    }
    void *pointer = a->current->data + a->current->used;
    a->current->used += size;
    return pointer;
}

arena_mark arena_save(const arena *a) {
    arena_mark mark = {a->current, a->current ? a->current->used : 0};
    return mark;
}

void arena_release(arena *a, arena_mark mark) {
    if (mark.chunk && !(mark.chunk == a->first && mark.used == 0)) {
        a->current = mark.chunk;
        a->current->used = mark.used;
        return;
    }
    /* Back to empty: keep chunks up to ARENA_KEEP_BYTES, free the rest. */
    arena_chunk **link = &a->first;
    size_t kept = 0;
    while (*link) {
        arena_chunk *chunk = *link;
        if (kept + chunk->size > ARENA_KEEP_BYTES) {
            *link = chunk->next;
            free(chunk);
            continue;
        }
        kept += chunk->size;
        chunk->used = 0;
        link = &chunk->next;
    }
    a->current = a->first;
}

ProtobufCAllocator *arena_protobuf(arena *a) { return &a->allocator; }

size_t arena_bytes(const arena *a) {
    size_t bytes = 0;
    for (const arena_chunk *chunk = a->first; chunk; chunk = chunk->next) bytes += chunk->size;
    return bytes;
}
