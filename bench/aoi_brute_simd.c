/* aoi_brute_simd.c -- the SIMD brute-force baseline of bench-aoi (see
 * aoi_brute_simd.h for the rule). It owns the positions as a structure of
 * arrays padded to a multiple of 64 slots (the padding holds NaN, which
 * every ordered comparison rejects, so no slot past the last entity is
 * ever in a view), the watchers' ranges, and one bitset per watcher.
 *
 * An update walks the watchers; for each it runs a kernel over all the
 * positions that turns "inside the inner square" into one 64-bit mask per
 * 64 entities (eight lanes at a time with AVX2, four with SSE2, one in C).
 * A word of the view can only differ from its inner mask where it holds
 * an entity outside the inner square (old & ~inner): only those words,
 * the hysteresis band and the leavers, go through the kernel a second
 * time with the outer square, in one batch, and become
 * inner | (old & outer). With no hysteresis the outer square is the inner
 * one and that pass is skipped. So a watcher costs one pass over the
 * positions plus a little for its band, and the changed words alone are
 * written and turned into events.
 *
 * The kernel is picked at creation from what the CPU supports
 * (__builtin_cpu_supports), and built with __attribute__((target)) so the
 * tree needs no -mavx2 and runs anywhere; all three compare in single
 * precision exactly as coord does (bounds computed once in float).
 */
#include "aoi_brute_simd.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define AOI_BRUTE_SIMD_X86 1
#endif

/* Slots per view word; positions are padded to a multiple of it. */
#define AOI_BRUTE_SIMD_WORD_BITS 64
/* Alignment of the position arrays: one cache line, which also suits
 * aligned AVX2 loads of 8 floats. */
#define AOI_BRUTE_SIMD_ALIGN 64

/* A closed square [lo_x, hi_x] x [lo_z, hi_z], bounds already in float. */
typedef struct aoi_brute_simd__square {
    float lo_x, hi_x, lo_z, hi_z;
} aoi_brute_simd__square;

/* Writes out[j] = the inside-the-square mask of view word index[j] (word j
 * when index is NULL), for j < count: bit b is slot 64 * word + b. */
typedef void (*aoi_brute_simd__kernel_fn)(const float *x, const float *z, const aoi_brute_simd__square *square,
                                          const uint32_t *index, size_t count, uint64_t *out);

struct aoi_brute_simd {
    uint32_t capacity, count;
    size_t words;          /* 64-bit words per view: capacity rounded up to 64 slots */
    float *x, *z;          /* words * 64 slots each; slots >= count hold NaN */
    float *extent, *outer; /* by watcher: inner half-side r, outer R = r + h in float */
    uint8_t *active;       /* by entity: it has a watcher */
    uint32_t *view_count;  /* by watcher: bits set in its view */
    uint64_t *bits;        /* capacity views of `words` words */
    uint64_t *inner_mask;  /* scratch, `words`: the current watcher's inner masks */
    uint64_t *outer_mask;  /* scratch, `words`: its outer masks, for the listed words */
    uint32_t *band;        /* scratch, `words`: words where old & ~inner, for the outer pass */
    aoi_brute_simd__kernel_fn kernel;
    const char *kernel_name;
};

/* ---- kernels ------------------------------------------------------------- */

static void aoi_brute_simd__kernel_scalar(const float *x, const float *z, const aoi_brute_simd__square *square,
                                          const uint32_t *index, size_t count, uint64_t *out) {
    const float lo_x = square->lo_x, hi_x = square->hi_x, lo_z = square->lo_z, hi_z = square->hi_z;
    for (size_t j = 0; j < count; j++) {
        size_t base = (size_t)(index ? index[j] : j) * AOI_BRUTE_SIMD_WORD_BITS;
        uint64_t mask = 0;
        for (unsigned b = 0; b < AOI_BRUTE_SIMD_WORD_BITS; b++) {
            float ex = x[base + b], ez = z[base + b];
            bool inside = lo_x <= ex && ex <= hi_x && lo_z <= ez && ez <= hi_z;
            mask |= (uint64_t)inside << b;
        }
        out[j] = mask;
    }
}

#ifdef AOI_BRUTE_SIMD_X86
__attribute__((target("sse2"))) static void aoi_brute_simd__kernel_sse2(const float *x, const float *z,
                                                                        const aoi_brute_simd__square *square,
                                                                        const uint32_t *index, size_t count,
                                                                        uint64_t *out) {
    const __m128 lo_x = _mm_set1_ps(square->lo_x), hi_x = _mm_set1_ps(square->hi_x);
    const __m128 lo_z = _mm_set1_ps(square->lo_z), hi_z = _mm_set1_ps(square->hi_z);
    for (size_t j = 0; j < count; j++) {
        size_t base = (size_t)(index ? index[j] : j) * AOI_BRUTE_SIMD_WORD_BITS;
        uint64_t mask = 0;
        for (unsigned b = 0; b < AOI_BRUTE_SIMD_WORD_BITS; b += 4) {
            __m128 ex = _mm_load_ps(x + base + b), ez = _mm_load_ps(z + base + b);
            /* cmple is false on NaN, so the padding never gets in. */
            __m128 in_x = _mm_and_ps(_mm_cmple_ps(lo_x, ex), _mm_cmple_ps(ex, hi_x));
            __m128 in_z = _mm_and_ps(_mm_cmple_ps(lo_z, ez), _mm_cmple_ps(ez, hi_z));
            mask |= (uint64_t)(uint32_t)_mm_movemask_ps(_mm_and_ps(in_x, in_z)) << b;
        }
        out[j] = mask;
    }
}

__attribute__((target("avx2"))) static void aoi_brute_simd__kernel_avx2(const float *x, const float *z,
                                                                        const aoi_brute_simd__square *square,
                                                                        const uint32_t *index, size_t count,
                                                                        uint64_t *out) {
    const __m256 lo_x = _mm256_set1_ps(square->lo_x), hi_x = _mm256_set1_ps(square->hi_x);
    const __m256 lo_z = _mm256_set1_ps(square->lo_z), hi_z = _mm256_set1_ps(square->hi_z);
    for (size_t j = 0; j < count; j++) {
        size_t base = (size_t)(index ? index[j] : j) * AOI_BRUTE_SIMD_WORD_BITS;
        uint64_t mask = 0;
        for (unsigned b = 0; b < AOI_BRUTE_SIMD_WORD_BITS; b += 8) {
            __m256 ex = _mm256_load_ps(x + base + b), ez = _mm256_load_ps(z + base + b);
            /* Ordered, non-signalling <=: false on NaN, like C's <=. */
            __m256 in_x = _mm256_and_ps(_mm256_cmp_ps(lo_x, ex, _CMP_LE_OQ), _mm256_cmp_ps(ex, hi_x, _CMP_LE_OQ));
            __m256 in_z = _mm256_and_ps(_mm256_cmp_ps(lo_z, ez, _CMP_LE_OQ), _mm256_cmp_ps(ez, hi_z, _CMP_LE_OQ));
            mask |= (uint64_t)(uint32_t)_mm256_movemask_ps(_mm256_and_ps(in_x, in_z)) << b;
        }
        out[j] = mask;
    }
}
#endif

/* Picks the kernel: the named one (NULL: the best the CPU runs). */
static int aoi_brute_simd__pick_kernel(aoi_brute_simd *aoi, const char *wanted) {
    bool any = wanted == NULL;
#ifdef AOI_BRUTE_SIMD_X86
    __builtin_cpu_init();
    if ((any || !strcmp(wanted, "avx2")) && __builtin_cpu_supports("avx2")) {
        aoi->kernel = aoi_brute_simd__kernel_avx2;
        aoi->kernel_name = "avx2";
        return 0;
    }
    if ((any || !strcmp(wanted, "sse2")) && __builtin_cpu_supports("sse2")) {
        aoi->kernel = aoi_brute_simd__kernel_sse2;
        aoi->kernel_name = "sse2";
        return 0;
    }
#endif
    if (any || !strcmp(wanted, "scalar")) {
        aoi->kernel = aoi_brute_simd__kernel_scalar;
        aoi->kernel_name = "scalar";
        return 0;
    }
    return -1;
}

/* ---- structure ----------------------------------------------------------- */

static void *aoi_brute_simd__aligned(size_t bytes) {
    void *p = aligned_alloc(AOI_BRUTE_SIMD_ALIGN, bytes); /* bytes: a multiple of 64 * 4 */
    if (!p) log_panic("aoi_brute_simd: out of memory (%zu bytes)", bytes);
    return p;
}

aoi_brute_simd *aoi_brute_simd_create(uint32_t capacity, const char *kernel) {
    /* The padded slot count must fit a uint32_t, as entity indices do. */
    if (capacity == 0 || capacity > UINT32_MAX - AOI_BRUTE_SIMD_WORD_BITS) return NULL;
    aoi_brute_simd *aoi = xcalloc(1, sizeof *aoi);
    if (aoi_brute_simd__pick_kernel(aoi, kernel) != 0) {
        free(aoi);
        return NULL;
    }
    aoi->capacity = capacity;
    aoi->words = ((size_t)capacity + AOI_BRUTE_SIMD_WORD_BITS - 1) / AOI_BRUTE_SIMD_WORD_BITS;
    size_t slots = aoi->words * AOI_BRUTE_SIMD_WORD_BITS;
    aoi->x = aoi_brute_simd__aligned(slots * sizeof *aoi->x);
    aoi->z = aoi_brute_simd__aligned(slots * sizeof *aoi->z);
    for (size_t i = 0; i < slots; i++) aoi->x[i] = aoi->z[i] = NAN;
    aoi->extent = xcalloc(capacity, sizeof *aoi->extent);
    aoi->outer = xcalloc(capacity, sizeof *aoi->outer);
    aoi->active = xcalloc(capacity, sizeof *aoi->active);
    aoi->view_count = xcalloc(capacity, sizeof *aoi->view_count);
    aoi->bits = xcalloc((size_t)capacity * aoi->words, sizeof *aoi->bits);
    aoi->inner_mask = xmalloc(aoi->words * sizeof *aoi->inner_mask);
    aoi->outer_mask = xmalloc(aoi->words * sizeof *aoi->outer_mask);
    aoi->band = xmalloc(aoi->words * sizeof *aoi->band);
    return aoi;
}

void aoi_brute_simd_free(aoi_brute_simd *aoi) {
    if (!aoi) return;
    free(aoi->x);
    free(aoi->z);
    free(aoi->extent);
    free(aoi->outer);
    free(aoi->active);
    free(aoi->view_count);
    free(aoi->bits);
    free(aoi->inner_mask);
    free(aoi->outer_mask);
    free(aoi->band);
    free(aoi);
}

uint32_t aoi_brute_simd_add_entity(aoi_brute_simd *aoi, float x, float z) {
    if (aoi->count == aoi->capacity || !isfinite(x) || !isfinite(z)) return AOI_BRUTE_SIMD_NONE;
    uint32_t entity = aoi->count++;
    aoi->x[entity] = x;
    aoi->z[entity] = z;
    return entity;
}

int aoi_brute_simd_move_entity(aoi_brute_simd *aoi, uint32_t entity, float x, float z) {
    if (entity >= aoi->count || !isfinite(x) || !isfinite(z)) return -1;
    aoi->x[entity] = x;
    aoi->z[entity] = z;
    return 0;
}

int aoi_brute_simd_set_watcher(aoi_brute_simd *aoi, uint32_t entity, float extent, float hysteresis) {
    if (entity >= aoi->count) return -1;
    if (!(extent >= 0) || !(hysteresis >= 0) || !isfinite(extent) || !isfinite(hysteresis)) return -1;
    aoi->extent[entity] = extent;
    aoi->outer[entity] = extent + hysteresis;
    aoi->active[entity] = 1;
    return 0;
}

/* ---- update -------------------------------------------------------------- */

/* Makes word k of watcher w's view `view` (the owner's own bit cleared),
 * counts and reports the difference from `old`. Returns the events. */
static size_t aoi_brute_simd__settle(aoi_brute_simd *aoi, uint32_t w, uint64_t *row, size_t k, uint64_t old,
                                     uint64_t view, const aoi_brute_simd_callbacks *callbacks, void *user_data) {
    if (k == w / AOI_BRUTE_SIMD_WORD_BITS) view &= ~(UINT64_C(1) << (w % AOI_BRUTE_SIMD_WORD_BITS));
    uint64_t entered = view & ~old, left = old & ~view;
    if (!(entered | left)) return 0;
    row[k] = view;
    unsigned enters = (unsigned)__builtin_popcountll(entered), leaves = (unsigned)__builtin_popcountll(left);
    aoi->view_count[w] = aoi->view_count[w] + enters - leaves;
    if (callbacks) {
        uint32_t base = (uint32_t)(k * AOI_BRUTE_SIMD_WORD_BITS);
        for (uint64_t m = entered; m; m &= m - 1)
            callbacks->on_enter(w, base + (uint32_t)__builtin_ctzll(m), user_data);
        for (uint64_t m = left; m; m &= m - 1) callbacks->on_leave(w, base + (uint32_t)__builtin_ctzll(m), user_data);
    }
    return enters + leaves;
}

/* Brings watcher w's view up to date over the first `words` words. */
static size_t aoi_brute_simd__scan(aoi_brute_simd *aoi, uint32_t w, size_t words,
                                   const aoi_brute_simd_callbacks *callbacks, void *user_data) {
    const float ox = aoi->x[w], oz = aoi->z[w], r = aoi->extent[w], big_r = aoi->outer[w];
    const aoi_brute_simd__square inner = {ox - r, ox + r, oz - r, oz + r};
    const aoi_brute_simd__square outer = {ox - big_r, ox + big_r, oz - big_r, oz + big_r};
    uint64_t *row = aoi->bits + (size_t)w * aoi->words;
    size_t events = 0, bands = 0;

    aoi->kernel(aoi->x, aoi->z, &inner, NULL, words, aoi->inner_mask);
    for (size_t k = 0; k < words; k++) {
        uint64_t old = row[k], in = aoi->inner_mask[k];
        if (old & ~in) /* something in view outside the inner square: the outer square decides */
            aoi->band[bands++] = (uint32_t)k;
        else if (old != in)
            events += aoi_brute_simd__settle(aoi, w, row, k, old, in, callbacks, user_data);
    }
    if (!bands) return events;
    if (big_r > r) aoi->kernel(aoi->x, aoi->z, &outer, aoi->band, bands, aoi->outer_mask);
    for (size_t j = 0; j < bands; j++) {
        size_t k = aoi->band[j];
        uint64_t old = row[k], in = aoi->inner_mask[k];
        /* No hysteresis: the outer square is the inner one. */
        uint64_t keep = big_r > r ? old & aoi->outer_mask[j] : 0;
        events += aoi_brute_simd__settle(aoi, w, row, k, old, in | keep, callbacks, user_data);
    }
    return events;
}

size_t aoi_brute_simd_update(aoi_brute_simd *aoi, const aoi_brute_simd_callbacks *callbacks, void *user_data) {
    size_t words = ((size_t)aoi->count + AOI_BRUTE_SIMD_WORD_BITS - 1) / AOI_BRUTE_SIMD_WORD_BITS;
    size_t events = 0;
    for (uint32_t w = 0; w < aoi->count; w++)
        if (aoi->active[w]) events += aoi_brute_simd__scan(aoi, w, words, callbacks, user_data);
    return events;
}

/* ---- views and accounting ------------------------------------------------ */

bool aoi_brute_simd_sees(const aoi_brute_simd *aoi, uint32_t watcher, uint32_t entity) {
    if (watcher >= aoi->count || entity >= aoi->count || !aoi->active[watcher]) return false;
    const uint64_t *row = aoi->bits + (size_t)watcher * aoi->words;
    return (row[entity / AOI_BRUTE_SIMD_WORD_BITS] >> (entity % AOI_BRUTE_SIMD_WORD_BITS)) & 1;
}

size_t aoi_brute_simd_view_size(const aoi_brute_simd *aoi, uint32_t watcher) {
    return watcher < aoi->count ? aoi->view_count[watcher] : 0;
}

const uint64_t *aoi_brute_simd_view_bits(const aoi_brute_simd *aoi, uint32_t watcher, size_t *words) {
    if (watcher >= aoi->count || !aoi->active[watcher]) {
        *words = 0;
        return NULL;
    }
    *words = aoi->words;
    return aoi->bits + (size_t)watcher * aoi->words;
}

size_t aoi_brute_simd_entity_count(const aoi_brute_simd *aoi) { return aoi->count; }

size_t aoi_brute_simd_bytes(const aoi_brute_simd *aoi) {
    size_t bytes = sizeof *aoi;
    bytes += 2 * aoi->words * AOI_BRUTE_SIMD_WORD_BITS * sizeof(float); /* x, z with their padding */
    /* extent, outer, view_count: 4 bytes each; active: 1. */
    bytes += (size_t)aoi->capacity * (3 * 4 + 1);
    bytes += (size_t)aoi->capacity * aoi->words * sizeof(uint64_t);  /* the views */
    bytes += aoi->words * (2 * sizeof(uint64_t) + sizeof(uint32_t)); /* scratch */
    return bytes;
}

const char *aoi_brute_simd_kernel(const aoi_brute_simd *aoi) { return aoi->kernel_name; }
