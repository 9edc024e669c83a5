/* text_buffer.h -- a growing, NUL-terminated text built with printf-style
 * appends (the Prometheus exposition, the map's JSON snapshots).
 *
 *   text_buffer t = {0};
 *   text_buffer_printf(&t, "{\"tick\":%u}", tick);
 *   char *text = text_buffer_take(&t, &length);   (malloc'd; t is empty again)
 */
#ifndef TESSERA_TEXT_BUFFER_H
#define TESSERA_TEXT_BUFFER_H

#include <stddef.h>

typedef struct text_buffer {
    char *data;
    size_t length, capacity;
} text_buffer;

void text_buffer_printf(text_buffer *t, const char *format, ...) __attribute__((format(printf, 2, 3)));
/* The text (never NULL; the caller frees it); t is empty and reusable after. */
char *text_buffer_take(text_buffer *t, size_t *length);
void text_buffer_free(text_buffer *t);

#endif
