/* text_buffer.c -- printf-style appends to a growing text (text_buffer.h). */
#include "text_buffer.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "log.h"

void text_buffer_printf(text_buffer *t, const char *format, ...) {
    for (;;) {
        va_list args;
        va_start(args, format);
        size_t room = t->capacity - t->length;
        int n = vsnprintf(t->data ? t->data + t->length : NULL, room, format, args);
        va_end(args);
        if (n < 0) return;
        if ((size_t)n < room) {
            t->length += (size_t)n;
            return;
        }
        t->capacity = (t->capacity ? t->capacity * 2 : 4096) + (size_t)n;
        t->data = xrealloc(t->data, t->capacity);
    }
}

char *text_buffer_take(text_buffer *t, size_t *length) {
    char *text = t->data ? t->data : xstrdup("");
    if (length) *length = t->length;
    t->data = NULL;
    t->length = t->capacity = 0;
    return text;
}

void text_buffer_free(text_buffer *t) {
    free(t->data);
    t->data = NULL;
    t->length = t->capacity = 0;
}
