/* baseapp_figures.h -- the baseapp's figures: a snapshot of plain numbers
 * gathered from its modules, and the one table (baseapp_figures.c) that
 * publishes them to the registry and writes them to /metrics.
 */
#ifndef TESSERA_BASEAPP_FIGURES_H
#define TESSERA_BASEAPP_FIGURES_H

#include <stdbool.h>
#include <stdint.h>

#include "baseapp.h"
#include "metrics.h"
#include "registry.h"

typedef struct baseapp_figures {
    uint64_t connections, accounts, bases, cellapps;
    bool draining, fenced;
    uint64_t fences;
    uint64_t reconnects, reconnects_refused, logins_replaced, handovers, handovers_refused;
    uint64_t writes, write_failures;
    uint64_t entity_calls, entity_calls_received, entity_calls_failed;
    uint64_t logins, login_failures, redirects, token_logins, logins_throttled;
    uint64_t client_messages_unbound, client_messages_held, client_messages_stale, cell_messages_failed;
    uint64_t moves_dropped, calls_dropped, congested_clients, congestion_events;
    uint64_t frames_in, frames_out, bytes_in, bytes_out; /* clients and peers together */
    uint64_t client_frames_in, client_frames_out, client_bytes_in, client_bytes_out;
    uint64_t peer_frames_in, peer_frames_out, peer_bytes_in, peer_bytes_out;
    uint64_t base_backups_sent, base_backup_bytes, base_backup_us, base_backups_held, bases_restored,
        bases_restore_failed, base_backups_dropped;
    uint64_t reconnect_redirects, reconnects_deferred, handover_tokens_kept;
    uint64_t session_claims_refused, restores_superseded;
    uint64_t login_hashes, login_hashes_dropped, login_hashes_refused, login_hashes_waiting, login_hash_wait_us_max;
} baseapp_figures;

/* Reads every figure from the process's modules. It takes the whole
 * process because it reads most of it. */
void baseapp_figures_gather(const baseapp *app, baseapp_figures *out);
/* Publishes the figures' registry fields. */
void baseapp_figures_publish(const baseapp_figures *figures, registry *reg);
/* Writes every family of the baseapp's /metrics: the table's, the errors
 * sent to clients by code, and the latency histograms. */
void baseapp_figures_metrics(const baseapp *app, metrics_text *m);

#endif
