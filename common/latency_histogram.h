/* latency_histogram.h -- a fixed-bucket histogram of latencies in
 * microseconds, for percentiles over millions of samples in constant memory.
 *
 * Values are counted in equal-width buckets from 0 up to a limit, plus one
 * overflow bucket for everything at or above the limit. A percentile is
 * reported as the upper edge of the bucket it falls in, clamped to the
 * largest value seen: never below the true value, and above it by at most
 * one bucket width.
 */
#ifndef TESSERA_LATENCY_HISTOGRAM_H
#define TESSERA_LATENCY_HISTOGRAM_H

#include <stddef.h>
#include <stdint.h>

typedef struct latency_histogram {
    uint64_t *buckets; /* bucket_count regular buckets, then the overflow bucket */
    size_t bucket_count;
    uint64_t bucket_us; /* width of one regular bucket */
    uint64_t count;     /* samples added */
    uint64_t max_us;    /* largest sample */
    uint64_t sum_us;    /* for the mean; saturates instead of wrapping */
} latency_histogram;

/* Prepares `histogram` with buckets `bucket_us` wide covering [0, limit_us)
 * and an overflow bucket. Returns 0, or -1 if bucket_us is 0, limit_us is
 * not a positive multiple of it, or there would be more than 2^24 buckets
 * (nothing is allocated then). On success the caller pairs it with
 * latency_histogram_close. */
int latency_histogram_init(latency_histogram *histogram, uint64_t bucket_us, uint64_t limit_us);
/* Frees the buckets. Safe on a zeroed struct and idempotent. */
void latency_histogram_close(latency_histogram *histogram);

void latency_histogram_add(latency_histogram *histogram, uint64_t value_us);
/* Adds every sample of `other` (same bucket layout) into `histogram`.
 * Returns 0, or -1 if the layouts differ (nothing is added then). */
int latency_histogram_merge(latency_histogram *histogram, const latency_histogram *other);

/* The value at or below which `percent` (0..100) of the samples lie, in
 * microseconds: the upper edge of that sample's bucket, clamped to the
 * maximum seen; for the overflow bucket, the maximum seen. Returns 0 when
 * the histogram is empty (check count first when 0 is ambiguous). */
uint64_t latency_histogram_percentile(const latency_histogram *histogram, double percent);
/* Mean of the samples in microseconds (0 when empty). */
double latency_histogram_mean(const latency_histogram *histogram);

#endif
