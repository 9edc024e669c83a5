/* balancer.h -- the balancer as the cluster runs it (balancer.c): every
 * cellapp reports its load to Redis once a period, stands for the balancer
 * lease, and the holder moves split lines, adds and retires cells, and
 * hands over the cells of cellapps that stop or die. The decisions
 * themselves are balance.c's.
 *
 * Created after the registry; balancer_tick once a tick does what is due.
 * balancer_stop gives the lease up and withdraws the report (a stopping
 * cellapp).
 */
#ifndef TESSERA_BALANCER_H
#define TESSERA_BALANCER_H

#include <stdbool.h>
#include <stdint.h>

#include "cell_load.h"
#include "cellapp_settings.h"
#include "offload.h"
#include "peer_set.h"
#include "process_self.h"
#include "redis_client.h"
#include "spaces.h"

typedef struct balancer balancer;

/* What the balancer borrows (each outlives it). */
typedef struct balancer_context {
    const balancer_settings *settings;
    redis_client *redis; /* reports, the lease, layout writes */
    const char *cluster_name;
    peer_set *peers; /* who is alive */
    spaces *spaces;  /* the layouts and this cellapp's cells */
    cell_load *load;
    const offloads *offloads;
    const bool *draining; /* this cellapp is draining (it reports so and stops standing for the lease) */
    const process_self *self;
} balancer_context;

balancer *balancer_create(const balancer_context *context);
void balancer_free(balancer *b);
void balancer_tick(balancer *b, uint64_t now_us);
/* Runs the next period at the next tick rather than at its time: a
 * cellapp was declared dead, and its cells should go to the others now. */
void balancer_poke(balancer *b);
void balancer_stop(balancer *b);
/* A draining cellapp stops standing for the lease (and lets it go now if
 * it holds it), but keeps reporting. */
void balancer_give_up_lease(balancer *b);
bool balancer_is_leader(const balancer *b);
/* While this cellapp leads: writes its lease's value ("<id>:<fence>", what
 * P balancer_lease holds) into `out` and returns true; else false. A write
 * made in the lease's name (a death decision) carries it. */
bool balancer_lease_value(const balancer *b, uint64_t now_us, char *out, size_t size);
/* The lease's holder as last seen (0: none known). */
uint64_t balancer_lease_holder(const balancer *b);
/* Takes the lease back from a holder that crashed (lease_take_back).
 * Returns 0 if asked, -1 if not (no lease yet, one in flight, no Redis). */
int balancer_take_back_lease(balancer *b, uint64_t holder_id, const char *holder_registry_key, uint64_t registry_ttl_ms,
                             uint64_t quiet_ms);
/* Since when this cellapp has led without a break (monotonic us; 0: it
 * does not lead). */
uint64_t balancer_leading_since_us(const balancer *b);

/* What the balancer has done, for the registry and /metrics. */
typedef struct balancer_figures {
    bool leader;
    uint64_t holder; /* the lease's holder last seen */
    uint64_t passes, line_moves, cell_changes, writes_refused;
} balancer_figures;
/* Fills `out` (all zero for a NULL balancer: balancing is off). */
void balancer_stats(const balancer *b, balancer_figures *out);

#endif
