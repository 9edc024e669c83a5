/* metrics.h -- writing the Prometheus text exposition format (0.0.4) for a
 * process's /metrics.
 *
 * A metrics_text collects families in order: metrics_family writes a
 * family's # HELP and # TYPE lines (once: a second call for the same name
 * is ignored), then metrics_sample adds its samples, each with an optional
 * label set built with metrics_label. Histograms come from a
 * latency_histogram, in seconds, with the bucket edges given.
 *
 *   metrics_text m; metrics_text_init(&m, "tessera_");
 *   metrics_family(&m, "reals", "gauge", "reals held, per cell");
 *   metrics_sample(&m, "reals", "space=\"default\",cell=\"3\"", 120);
 *   char *text = metrics_text_take(&m);   (malloc'd; m is then empty)
 */
#ifndef TESSERA_METRICS_H
#define TESSERA_METRICS_H

#include <stddef.h>

#include "latency_histogram.h"
#include "text_buffer.h"

typedef struct metrics_text {
    text_buffer text;
    char prefix[32];
    char **families; /* names written so far */
    size_t family_count, family_capacity;
} metrics_text;

void metrics_text_init(metrics_text *m, const char *prefix);
/* The text written (the caller frees it); m is empty after, and reusable. */
char *metrics_text_take(metrics_text *m, size_t *length);
void metrics_text_close(metrics_text *m);

/* type: "counter", "gauge" or "histogram". */
void metrics_family(metrics_text *m, const char *name, const char *type, const char *help);
/* A family of one unlabelled sample (a counter or a gauge). */
void metrics_single(metrics_text *m, const char *type, const char *name, const char *help, double value);
/* labels: NULL, or the inside of the braces, already escaped. */
void metrics_sample(metrics_text *m, const char *name, const char *labels, double value);
/* One label pair, escaped, appended to `out` (comma-separated). */
void metrics_label(char *out, size_t size, const char *key, const char *value);
/* _bucket{le=...} for each edge (seconds), +Inf, _sum and _count. */
void metrics_histogram(metrics_text *m, const char *name, const char *labels, const latency_histogram *h,
                       const double *edges_seconds, size_t edge_count);

#endif
