/* text_key.h -- the id_map key of a piece of text: 64-bit FNV-1a, never 0
 * (id_map's empty key). Account names, client addresses and entity names
 * are looked up by it; callers compare the text itself when a collision
 * would matter. */
#ifndef TESSERA_TEXT_KEY_H
#define TESSERA_TEXT_KEY_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline uint64_t text_key(const char *text, size_t length) {
    uint64_t hash = 14695981039346656037ull; /* FNV-1a's offset basis */
    for (size_t i = 0; i < length; i++) {
        hash ^= (unsigned char)text[i];
        hash *= 1099511628211ull; /* FNV-1a's 64-bit prime */
    }
    return hash ? hash : 1;
}

static inline uint64_t text_key_string(const char *text) { return text_key(text, strlen(text)); }

#endif
