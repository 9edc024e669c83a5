/* persistence.h -- bases in Redis (writeToDB): loading a stored entity,
 * restoring a new base from it, and writing a base's state, after a fresh
 * backup of its cell part when it has one. The stored form and the rules
 * that keep writes from being lost are at the top of persistence.c.
 */
#ifndef TESSERA_PERSISTENCE_H
#define TESSERA_PERSISTENCE_H

#include <stdbool.h>
#include <stdint.h>

#include <cJSON.h>

#include "base_entity.h"
#include "base_hooks.h"
#include "baseapp_settings.h"
#include "cell_link.h"
#include "cluster.pb-c.h"
#include "latency_histogram.h"
#include "process_self.h"
#include "redis_client.h"

typedef struct persistence persistence;

typedef enum persistence_outcome {
    PERSISTENCE_FOUND,       /* `stored` is the stored form */
    PERSISTENCE_NONE,        /* nothing stored: a new entity */
    PERSISTENCE_DAMAGED,     /* a record that does not read (logged; left as it is, never overwritten) */
    PERSISTENCE_UNAVAILABLE, /* Redis did not answer */
} persistence_outcome;

/* `stored` is valid during the call only. `context` is the caller's: it
 * must still find what it loads for (by handle), which may have gone. */
typedef void (*persistence_loaded)(persistence_outcome outcome, const cJSON *stored, void *context);

typedef struct persistence_context {
    const baseapp_settings *settings;
    redis_client *redis;
    cell_links *cells;
    base_entities *bases;
    const base_hooks *hooks;
    /* A base being destroyed has its last state written: it may be freed. */
    void (*finished)(void *owner, base_entity *base);
    void *owner;
    /* Who writes: a write from a process the cluster declared dead is
     * refused by Redis (its bases live on elsewhere now). */
    const process_self *self;
} persistence_context;

typedef struct persistence_counters {
    uint64_t writes;                 /* acknowledged */
    uint64_t write_failures;         /* each is retried */
    latency_histogram write_latency; /* writeToDB round trips (microseconds) */
} persistence_counters;

persistence *persistence_create(const persistence_context *context);
void persistence_free(persistence *store);
const persistence_counters *persistence_figures(const persistence *store);

/* Reads the stored `class_name` named `name` (a player's: its account).
 * Returns 0 (the callback follows, exactly once), or -1 when Redis is not
 * connected (no callback). */
int persistence_load(persistence *store, const char *class_name, const char *name, persistence_loaded callback,
                     void *context);
/* A new base takes what was stored (NULL: nothing): its persistent base and
 * cell properties (a property the definitions no longer have is dropped
 * with a log line, a new one keeps its default) and where its cell part
 * was. Its autosaves are spread from now. */
void persistence_restore(persistence *store, base_entity *base, const cJSON *stored);
/* writeToDB: the base's persistent state goes to Redis, after a fresh
 * backup of its cell part when it has one. */
void persistence_save(persistence *store, base_entity *base);
/* The base is going: its cell part is destroyed with a last backup, which
 * its last write follows. Returns 0, or -1 when it has no cell part to ask
 * (nothing sent). */
int persistence_destroy_cell(persistence *store, base_entity *base);
/* A CellBackup from the base's cell part. */
void persistence_on_backup(persistence *store, base_entity *base, const Tessera__Cluster__CellBackup *backup);
/* Writes the base's state as it is now (one write in flight per base; a
 * failed write is retried). */
void persistence_write(persistence *store, base_entity *base);
/* The base's sweep duties: a backup past its deadline is written without
 * it, a failed write retried when its time comes, an autosave started. */
void persistence_sweep(persistence *store, base_entity *base, uint64_t now_us);
/* Whether the base's latest state is not known to be written. */
bool persistence_unwritten(const base_entity *base);

#endif
