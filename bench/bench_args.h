/* bench_args.h -- the numbers on a benchmark's command line.
 *
 * atoi reads "12x" as 12 and "x" as 0 and cannot say either was wrong
 * (CERT ERR34-C); bench_int_arg reads a whole decimal int or gives the
 * caller's `otherwise`, which each benchmark then treats as it treated
 * atoi's 0 (its default, or its usage message). */
#ifndef TESSERA_BENCH_ARGS_H
#define TESSERA_BENCH_ARGS_H

#include <errno.h>
#include <limits.h>
#include <stdlib.h>

/* The int `text` spells (decimal, nothing after it), or `otherwise` when it
 * spells none or one out of int's range. */
static inline int bench_int_arg(const char *text, int otherwise) {
    char *end;
    errno = 0;
    long value = strtol(text, &end, 10);
    if (end == text || *end != '\0' || errno == ERANGE || value < INT_MIN || value > INT_MAX) return otherwise;
    return (int)value;
}

#endif
