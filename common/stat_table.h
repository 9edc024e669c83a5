/* stat_table.h -- one table of a process's figures feeds both places they
 * are read: the registry's hash (registry_set_stat, what `scripts/cluster
 * status`, the balancer and the tests read) and /metrics (the Prometheus
 * text format). A row names a figure once: where it is (an offset into the
 * process's snapshot struct of plain numbers), its registry field and its
 * metric family, its kind and its help. Adding a figure is a field in the
 * snapshot, the line that fills it, and a row.
 */
#ifndef TESSERA_STAT_TABLE_H
#define TESSERA_STAT_TABLE_H

#include <stddef.h>

#include "metrics.h"
#include "registry.h"

typedef enum stat_kind {
    STAT_COUNTER, /* only grows; its metric name ends in _total */
    STAT_GAUGE,   /* goes up and down */
} stat_kind;

typedef enum stat_type {
    STAT_U64,    /* uint64_t */
    STAT_DOUBLE, /* double */
    STAT_BOOL,   /* bool, published as 0 or 1 */
} stat_type;

typedef struct stat_row {
    const char *registry_name; /* its field in the registry hash (NULL: not published there) */
    const char *metric_name;   /* its family in /metrics, without the prefix (NULL: not exposed) */
    const char *metric_labels; /* NULL, or the labels of its sample in a family several rows share */
    stat_kind kind;
    stat_type type;
    size_t offset;         /* of the value in the snapshot */
    double registry_scale; /* the registry holds round(value * scale) (0: 1; a load in permille: 1000) */
    const char *help;      /* the family's HELP (rows sharing a family: the first one's) */
} stat_row;

/* Sets every row's registry field from `snapshot`. */
void stat_table_publish(const stat_row *rows, size_t count, const void *snapshot, registry *reg);
/* Writes every row's family and sample from `snapshot`, in table order. */
void stat_table_metrics(const stat_row *rows, size_t count, const void *snapshot, metrics_text *m);

#endif
