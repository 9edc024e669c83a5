/* latency_histogram.c -- counting latency samples into fixed buckets and
 * reading percentiles back. Owns only its bucket array; knows nothing of
 * where the samples come from (the bots feed it position-update latencies). */
#include "latency_histogram.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

/* 2^24 buckets is 128 MiB of counters: far past any sensible layout, so a
 * request above it is a mistake rather than a need. */
#define LATENCY_HISTOGRAM_MAX_BUCKETS ((uint64_t)1 << 24)

int latency_histogram_init(latency_histogram *histogram, uint64_t bucket_us, uint64_t limit_us) {
    memset(histogram, 0, sizeof *histogram);
    if (bucket_us == 0 || limit_us == 0 || limit_us % bucket_us != 0) return -1;
    uint64_t count = limit_us / bucket_us;
    if (count > LATENCY_HISTOGRAM_MAX_BUCKETS) return -1;
    histogram->bucket_count = (size_t)count;
    histogram->bucket_us = bucket_us;
    histogram->buckets = xcalloc(histogram->bucket_count + 1, sizeof histogram->buckets[0]);
    return 0;
}

void latency_histogram_close(latency_histogram *histogram) {
    free(histogram->buckets);
    memset(histogram, 0, sizeof *histogram);
}

void latency_histogram_add(latency_histogram *histogram, uint64_t value_us) {
    if (!histogram->buckets) return;
    uint64_t index = value_us / histogram->bucket_us;
    if (index > histogram->bucket_count) index = histogram->bucket_count; /* the overflow bucket */
    histogram->buckets[index]++;
    histogram->count++;
    if (value_us > histogram->max_us) histogram->max_us = value_us;
    histogram->sum_us = histogram->sum_us + value_us < histogram->sum_us ? UINT64_MAX : histogram->sum_us + value_us;
}

int latency_histogram_merge(latency_histogram *histogram, const latency_histogram *other) {
    if (!histogram->buckets || !other->buckets || histogram->bucket_us != other->bucket_us ||
        histogram->bucket_count != other->bucket_count)
        return -1;
    for (size_t i = 0; i <= histogram->bucket_count; i++) histogram->buckets[i] += other->buckets[i];
    histogram->count += other->count;
    if (other->max_us > histogram->max_us) histogram->max_us = other->max_us;
    histogram->sum_us =
        histogram->sum_us + other->sum_us < histogram->sum_us ? UINT64_MAX : histogram->sum_us + other->sum_us;
    return 0;
}

uint64_t latency_histogram_percentile(const latency_histogram *histogram, double percent) {
    if (!histogram->buckets || histogram->count == 0) return 0;
    if (!(percent > 0)) percent = 0; /* also catches NaN */
    if (percent > 100) percent = 100;
    /* The sample of rank ceil(p% of count), counting from 1; at least the first. */
    uint64_t rank = (uint64_t)ceil(percent / 100.0 * (double)histogram->count);
    if (rank == 0) rank = 1;
    if (rank > histogram->count) rank = histogram->count;
    uint64_t seen = 0;
    for (size_t i = 0; i < histogram->bucket_count; i++) {
        seen += histogram->buckets[i];
        if (seen >= rank) {
            uint64_t upper = ((uint64_t)i + 1) * histogram->bucket_us;
            return upper < histogram->max_us ? upper : histogram->max_us;
        }
    }
    return histogram->max_us; /* in the overflow bucket */
}

double latency_histogram_mean(const latency_histogram *histogram) {
    if (histogram->count == 0) return 0.0;
    return (double)histogram->sum_us / (double)histogram->count;
}
