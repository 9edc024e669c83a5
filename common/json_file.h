/* json_file.h -- reading a JSON document from a file or a string, with
 * problems described for a human: which file could not be opened and why,
 * or where in the text the JSON stops making sense (line, column, byte).
 * The callers (config, entity definitions) add their own context. And
 * writing one whole, for the state dumps. */
#ifndef TESSERA_JSON_FILE_H
#define TESSERA_JSON_FILE_H

#include <cjson/cJSON.h>
#include <stddef.h>

/* Reads the whole file into a NUL-terminated buffer the caller frees, its
 * length in *length. NULL with "cannot open: ..." or "cannot read: ..."
 * (errno's text) in `problem`. */
char *json_file_read(const char *path, size_t *length, char *problem, size_t problem_size);

/* Parses `length` bytes of `text` (NUL-terminated) as one JSON document.
 * Returns the root (free with cJSON_Delete), or NULL with "invalid JSON:
 * NUL byte at offset N" or "invalid JSON near line L, column C (byte B)"
 * in `problem`. */
cJSON *json_file_parse(const char *text, size_t length, char *problem, size_t problem_size);

/* Prints `document` unformatted to `path` through a temporary file beside
 * it (path + ".tmp") renamed into place, so that a reader never sees half
 * a document. Returns 0, or -1 with errno's text in `problem`. Does not
 * take ownership of the document. */
int json_file_write(const char *path, const cJSON *document, char *problem, size_t problem_size);

#endif
