/* stat_table.c -- writes a process's figures, described by one table, to
 * the registry and to /metrics (stat_table.h). It owns nothing. */
#include "stat_table.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

static double stat_table_value(const stat_row *row, const void *snapshot) {
    const char *at = (const char *)snapshot + row->offset;
    switch (row->type) {
        case STAT_U64:
            return (double)*(const uint64_t *)(const void *)at;
        case STAT_DOUBLE:
            return *(const double *)(const void *)at;
        case STAT_BOOL:
            return *(const bool *)(const void *)at ? 1.0 : 0.0;
    }
    return 0;
}

void stat_table_publish(const stat_row *rows, size_t count, const void *snapshot, registry *reg) {
    if (!reg) return;
    for (size_t i = 0; i < count; i++) {
        const stat_row *row = &rows[i];
        if (!row->registry_name) continue;
        double scale = row->registry_scale > 0 ? row->registry_scale : 1.0;
        if (row->type == STAT_U64 && scale == 1.0) {
            /* Exact: a counter past 2^53 must not round. */
            registry_set_stat(reg, row->registry_name,
                              (int64_t) * (const uint64_t *)(const void *)((const char *)snapshot + row->offset));
            continue;
        }
        registry_set_stat(reg, row->registry_name, (int64_t)llround(stat_table_value(row, snapshot) * scale));
    }
}

void stat_table_metrics(const stat_row *rows, size_t count, const void *snapshot, metrics_text *m) {
    for (size_t i = 0; i < count; i++) {
        const stat_row *row = &rows[i];
        if (!row->metric_name) continue;
        const char *type = row->kind == STAT_COUNTER ? "counter" : "gauge";
        double value = stat_table_value(row, snapshot);
        if (row->metric_labels) {
            metrics_family(m, row->metric_name, type, row->help);
            metrics_sample(m, row->metric_name, row->metric_labels, value);
        } else {
            metrics_single(m, type, row->metric_name, row->help, value);
        }
    }
}
