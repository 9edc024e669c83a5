/* metrics.c -- the Prometheus text format writer (metrics.h): families,
 * samples with escaped labels, histograms from latency_histogram. */
#include "metrics.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

void metrics_text_init(metrics_text *m, const char *prefix) {
    memset(m, 0, sizeof *m);
    snprintf(m->prefix, sizeof m->prefix, "%s", prefix ? prefix : "");
}

static void metrics_forget_families(metrics_text *m) {
    for (size_t i = 0; i < m->family_count; i++) free(m->families[i]);
    m->family_count = 0;
}

void metrics_text_close(metrics_text *m) {
    metrics_forget_families(m);
    free(m->families);
    text_buffer_free(&m->text);
    memset(m, 0, sizeof *m);
}

char *metrics_text_take(metrics_text *m, size_t *length) {
    metrics_forget_families(m);
    return text_buffer_take(&m->text, length);
}

void metrics_family(metrics_text *m, const char *name, const char *type, const char *help) {
    for (size_t i = 0; i < m->family_count; i++)
        if (strcmp(m->families[i], name) == 0) return;
    if (m->family_count == m->family_capacity) {
        m->family_capacity = m->family_capacity ? m->family_capacity * 2 : 32;
        m->families = xrealloc(m->families, m->family_capacity * sizeof *m->families);
    }
    m->families[m->family_count++] = xstrdup(name);
    /* HELP text escapes backslash and newline. */
    text_buffer_printf(&m->text, "# HELP %s%s ", m->prefix, name);
    for (const char *c = help; *c; c++) {
        if (*c == '\\')
            text_buffer_printf(&m->text, "\\\\");
        else if (*c == '\n')
            text_buffer_printf(&m->text, "\\n");
        else
            text_buffer_printf(&m->text, "%c", *c);
    }
    text_buffer_printf(&m->text, "\n# TYPE %s%s %s\n", m->prefix, name, type);
}

static void metrics_value(metrics_text *m, double value) {
    if (isnan(value))
        text_buffer_printf(&m->text, "NaN\n");
    else if (isinf(value))
        text_buffer_printf(&m->text, value > 0 ? "+Inf\n" : "-Inf\n");
    else if (value == floor(value) && fabs(value) < 1e15)
        text_buffer_printf(&m->text, "%.0f\n", value);
    else
        text_buffer_printf(&m->text, "%.9g\n", value);
}

void metrics_sample(metrics_text *m, const char *name, const char *labels, double value) {
    if (labels && labels[0])
        text_buffer_printf(&m->text, "%s%s{%s} ", m->prefix, name, labels);
    else
        text_buffer_printf(&m->text, "%s%s ", m->prefix, name);
    metrics_value(m, value);
}

void metrics_single(metrics_text *m, const char *type, const char *name, const char *help, double value) {
    metrics_family(m, name, type, help);
    metrics_sample(m, name, NULL, value);
}

void metrics_label(char *out, size_t size, const char *key, const char *value) {
    size_t n = strlen(out);
    if (n && n + 1 < size) out[n++] = ',';
    int written = snprintf(out + n, size > n ? size - n : 0, "%s=\"", key);
    if (written < 0) return;
    n += (size_t)written;
    for (const char *c = value; *c && n + 3 < size; c++) {
        if (*c == '\\' || *c == '"') {
            out[n++] = '\\';
            out[n++] = *c;
        } else if (*c == '\n') {
            out[n++] = '\\';
            out[n++] = 'n';
        } else {
            out[n++] = *c;
        }
    }
    if (n + 1 < size) out[n++] = '"';
    out[n < size ? n : size - 1] = '\0';
}

void metrics_histogram(metrics_text *m, const char *name, const char *labels, const latency_histogram *h,
                       const double *edges_seconds, size_t edge_count) {
    const char *separator = labels && labels[0] ? "," : "";
    const char *inner = labels ? labels : "";
    /* Edges ascend: one walk over the buckets, counting the samples in
     * buckets whose upper edge is at or below each edge. */
    uint64_t below = 0;
    size_t b = 0;
    for (size_t e = 0; e < edge_count; e++) {
        uint64_t edge_us = (uint64_t)(edges_seconds[e] * 1e6 + 0.5);
        while (h->buckets && b < h->bucket_count && (b + 1) * h->bucket_us <= edge_us) below += h->buckets[b++];
        text_buffer_printf(&m->text, "%s%s_bucket{%s%sle=\"%g\"} %llu\n", m->prefix, name, inner, separator,
                           edges_seconds[e], (unsigned long long)below);
    }
    text_buffer_printf(&m->text, "%s%s_bucket{%s%sle=\"+Inf\"} %llu\n", m->prefix, name, inner, separator,
                       (unsigned long long)h->count);
    if (labels && labels[0])
        text_buffer_printf(&m->text, "%s%s_sum{%s} ", m->prefix, name, labels);
    else
        text_buffer_printf(&m->text, "%s%s_sum ", m->prefix, name);
    metrics_value(m, (double)h->sum_us / 1e6);
    if (labels && labels[0])
        text_buffer_printf(&m->text, "%s%s_count{%s} %llu\n", m->prefix, name, labels, (unsigned long long)h->count);
    else
        text_buffer_printf(&m->text, "%s%s_count %llu\n", m->prefix, name, (unsigned long long)h->count);
}
