/* cell_load.c -- how busy this cellapp is, and how that load spreads over
 * its cells and their reals, for the balancer (balance.h).
 *
 * The load is the share of wall time the event loop did not spend waiting
 * in poll (libuv's idle-time metric), sampled every tick and smoothed with
 * an exponential average (load_smoothing per tick). It counts everything
 * the process does: ticks, frames from baseapps and cellapps, Redis. The
 * work of moving reals between cellapps and of creating and deleting
 * ghosts is timed where it happens and taken out: it is the cost of
 * balancing itself, and counting it would make a line that just moved look
 * like it should move back.
 *
 * A cell's share and its reals' shares follow their work: a real counts
 * one, plus the number of entities its client sees (the witness streams
 * each of them), so a crowd weighs what it costs.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cell_load.h"

#include "log.h"
#include "witness.h"

struct cell_load {
    uv_loop_t *loop;
    double smoothing;
    const balance_config *algorithm;
    uint64_t sampled_us;   /* monotonic time of the last sample (0: none yet) */
    uint64_t idle_ns;      /* the loop's idle time then (uv_metrics_idle_time) */
    uint64_t transient_us; /* offload and ghost work since then */
    double load;           /* smoothed, a fraction of one core */
    double transient;      /* smoothed likewise */
};

cell_load *cell_load_create(uv_loop_t *loop, double smoothing, const balance_config *algorithm) {
    int rc = uv_loop_configure(loop, UV_METRICS_IDLE_TIME);
    if (rc != 0) log_warn("load: libuv cannot measure idle time (%s): the load counts as 0", uv_strerror(rc));
    cell_load *load = xcalloc(1, sizeof *load);
    load->loop = loop;
    load->smoothing = smoothing;
    load->algorithm = algorithm;
    return load;
}

void cell_load_free(cell_load *load) { free(load); }

double cell_load_value(const cell_load *load) { return load->load; }

double cell_load_transient(const cell_load *load) { return load->transient; }

void cell_load_transient_end(cell_load *load, uint64_t began_us) {
    uint64_t now = clock_monotonic_us();
    if (now > began_us) load->transient_us += now - began_us;
}

void cell_load_sample(cell_load *load, uint64_t now_us) {
    uint64_t idle_ns = uv_metrics_idle_time(load->loop);
    if (load->sampled_us == 0 || now_us <= load->sampled_us) {
        load->sampled_us = now_us;
        load->idle_ns = idle_ns;
        load->transient_us = 0;
        return;
    }
    double wall_us = (double)(now_us - load->sampled_us);
    double idle_us = (double)(idle_ns - load->idle_ns) / 1000.0;
    double busy = 1.0 - idle_us / wall_us;
    double transient = (double)load->transient_us / wall_us;
    busy = fmin(fmax(busy, 0.0), 1.0);
    transient = fmin(fmax(transient, 0.0), busy);
    double bias = load->smoothing;
    load->load += bias * ((busy - transient) - load->load);
    load->transient += bias * (transient - load->transient);
    load->sampled_us = now_us;
    load->idle_ns = idle_ns;
    load->transient_us = 0;
}

/* A real's work, in the units shares are counted in. */
static double cell_load_weight(const cell_entity *entity) {
    return 1.0 + (cell_entity_witness(entity) ? (double)witness_view_count(cell_entity_witness(entity)) : 0.0);
}

static double cell_load_cell_weight(const cell *c) {
    double weight = 0;
    for (size_t i = 0; i < c->count; i++) {
        const cell_entity *entity = c->by_index[i];
        if (entity->kind == CELL_ENTITY_REAL && !entity->destroyed) weight += cell_load_weight(entity);
    }
    return weight;
}

void cell_load_report(const cell_load *load, const spaces *s, const cell *c, balance_cell_report *out) {
    memset(out, 0, sizeof *out);
    out->cell_id = c->cell_id;
    out->cellapp_load = load->load;
    out->epoch = c->layout ? c->layout->epoch : 0;
    double total = 0, mine = cell_load_cell_weight(c);
    size_t cells = 0, cursor = 0;
    const cell *each;
    while ((each = spaces_next_cell(s, &cursor)) != NULL) {
        total += cell_load_cell_weight(each);
        cells++;
    }
    /* Load per unit of work; a cellapp whose cells hold no reals splits its
     * (small) load evenly. */
    double per_weight = total > 0 ? load->load / total : 0;
    out->load = total > 0 ? mine * per_weight : (cells ? load->load / (double)cells : 0);
    balance_entity *entities = xmalloc((c->real_count ? c->real_count : 1) * sizeof *entities);
    size_t n = 0;
    for (size_t i = 0; i < c->count; i++) {
        const cell_entity *entity = c->by_index[i];
        if (entity->kind != CELL_ENTITY_REAL || entity->destroyed || n == c->real_count) continue;
        entities[n++] = (balance_entity){entity->x, entity->z, cell_load_weight(entity) * per_weight};
        out->reals++;
    }
    balance_compute_bounds(entities, n, load->algorithm, &out->bounds);
    free(entities);
}
