/* json_file.c -- whole-file reads and JSON parsing with a located error
 * message; nothing about what the document means. */
#include "json_file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

char *json_file_read(const char *path, size_t *length, char *problem, size_t problem_size) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        snprintf(problem, problem_size, "cannot open: %s", strerror(errno));
        return NULL;
    }
    size_t capacity = 4096, used = 0;
    char *text = xmalloc(capacity);
    for (;;) {
        if (used + 1 == capacity) {
            capacity *= 2;
            text = xrealloc(text, capacity);
        }
        size_t n = fread(text + used, 1, capacity - 1 - used, f);
        used += n;
        if (n == 0) break;
    }
    text[used] = '\0';
    if (ferror(f)) {
        snprintf(problem, problem_size, "cannot read: %s", strerror(errno));
        free(text);
        (void)fclose(f); /* read only: the read error is the one to report */
        return NULL;
    }
    (void)fclose(f); /* read only: everything was read, nothing to lose */
    *length = used;
    return text;
}

cJSON *json_file_parse(const char *text, size_t length, char *problem, size_t problem_size) {
    if (strlen(text) != length) {
        snprintf(problem, problem_size, "invalid JSON: NUL byte at offset %zu", strlen(text));
        return NULL;
    }
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(text, &end, 1);
    if (root != NULL) return root;
    /* cJSON reports where it gave up, at or just after the mistake: good
     * enough to point a human at the right line. */
    size_t offset = end != NULL && end >= text && end <= text + length ? (size_t)(end - text) : 0;
    unsigned line = 1, column = 1;
    for (size_t i = 0; i < offset; i++) {
        if (text[i] == '\n') {
            line++;
            column = 1;
        } else {
            column++;
        }
    }
    snprintf(problem, problem_size, "invalid JSON near line %u, column %u (byte %zu)", line, column, offset);
    return NULL;
}

int json_file_write(const char *path, const cJSON *document, char *problem, size_t problem_size) {
    char *text = cJSON_PrintUnformatted(document);
    if (!text) log_panic("json_file: out of memory printing '%s'", path);
    size_t path_length = strlen(path);
    char *temporary = xmalloc(path_length + 5);
    memcpy(temporary, path, path_length);
    memcpy(temporary + path_length, ".tmp", 5);
    int rc = 0;
    FILE *file = fopen(temporary, "w");
    if (!file || fputs(text, file) < 0) {
        snprintf(problem, problem_size, "cannot write '%s': %s", temporary, strerror(errno));
        rc = -1;
    }
    if (file && fclose(file) != 0 && rc == 0) {
        snprintf(problem, problem_size, "cannot write '%s': %s", temporary, strerror(errno));
        rc = -1;
    }
    if (rc == 0 && rename(temporary, path) != 0) {
        snprintf(problem, problem_size, "cannot rename '%s' to '%s': %s", temporary, path, strerror(errno));
        rc = -1;
    }
    if (rc != 0) (void)remove(temporary); /* best effort: the error above is the one reported */
    free(temporary);
    free(text);
    return rc;
}
