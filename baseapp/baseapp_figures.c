/* baseapp_figures.c -- the baseapp's figures in one table: what each is, its
 * registry field and its /metrics family (common/stat_table.h), and the
 * gathering of a snapshot from the modules. The registry's field names are
 * what `scripts/cluster status`, the tests and the benchmarks read; the
 * metric names are what dashboards scrape. Rows of one metric family stay
 * together: the text format wants a family's samples in one run. */
#include "baseapp_figures.h"

#include <stddef.h>
#include <stdio.h>

#include "stat_table.h"

#define FIGURE(field) offsetof(baseapp_figures, field)

static const stat_row baseapp_figure_rows[] = {
    /* registry, metric, labels, kind, type, offset, registry scale, help */
    {"load", NULL, NULL, STAT_GAUGE, STAT_U64, FIGURE(connections), 0,
     "client connections (what a login is balanced on)"},
    {"clients", "clients", NULL, STAT_GAUGE, STAT_U64, FIGURE(accounts), 0,
     "players with an entity here, detached ones included"},
    {"bases", "bases", NULL, STAT_GAUGE, STAT_U64, FIGURE(bases), 0,
     "base entities here, players' and others (a global Census)"},
    {"connections", "connections", NULL, STAT_GAUGE, STAT_U64, FIGURE(connections), 0,
     "client connections open (logging in included)"},
    {"reconnects", "reconnects_total", NULL, STAT_COUNTER, STAT_U64, FIGURE(reconnects), 0,
     "dropped clients that came back to their entity"},
    {NULL, "reconnects_refused_total", NULL, STAT_COUNTER, STAT_U64, FIGURE(reconnects_refused), 0,
     "reconnects with an unknown or expired session"},
    {NULL, "logins_replaced_total", NULL, STAT_COUNTER, STAT_U64, FIGURE(logins_replaced), 0,
     "clients replaced by a newer login of their account"},
    {"writes", "entity_writes_total", NULL, STAT_COUNTER, STAT_U64, FIGURE(writes), 0,
     "entity states written to Redis (acknowledged)"},
    {"write_failures", "entity_write_failures_total", NULL, STAT_COUNTER, STAT_U64, FIGURE(write_failures), 0,
     "entity writes that failed (each is retried)"},
    {"entity_calls", "entity_calls_total", NULL, STAT_COUNTER, STAT_U64, FIGURE(entity_calls), 0,
     "entity calls game code here made (to bases and clients)"},
    {NULL, "entity_calls_received_total", NULL, STAT_COUNTER, STAT_U64, FIGURE(entity_calls_received), 0,
     "entity calls that reached a base here"},
    {"entity_calls_failed", "entity_calls_failed_total", NULL, STAT_COUNTER, STAT_U64, FIGURE(entity_calls_failed), 0,
     "entity calls made here that did not reach their entity (each reported to the game)"},
    {"handovers", "handovers_total", NULL, STAT_COUNTER, STAT_U64, FIGURE(handovers), 0,
     "clients handed from one entity to another (giveClientTo)"},
    {NULL, "handovers_refused_total", NULL, STAT_COUNTER, STAT_U64, FIGURE(handovers_refused), 0,
     "giveClientTos to another baseapp that were refused"},
    {NULL, "logins_total", NULL, STAT_COUNTER, STAT_U64, FIGURE(logins), 0, "logins that succeeded"},
    {NULL, "login_failures_total", NULL, STAT_COUNTER, STAT_U64, FIGURE(login_failures), 0,
     "logins refused for their credentials"},
    {"redirects", NULL, NULL, STAT_COUNTER, STAT_U64, FIGURE(redirects), 0, "clients sent to another baseapp"},
    {"token_logins", NULL, NULL, STAT_COUNTER, STAT_U64, FIGURE(token_logins), 0,
     "clients that came with a redirect's token"},
    {"logins_throttled", NULL, NULL, STAT_COUNTER, STAT_U64, FIGURE(logins_throttled), 0,
     "login attempts refused by the failed-login throttle"},
    {"client_messages_unbound", NULL, NULL, STAT_COUNTER, STAT_U64, FIGURE(client_messages_unbound), 0,
     "cell messages for a client that has gone (another binding)"},
    {"client_messages_held", NULL, NULL, STAT_COUNTER, STAT_U64, FIGURE(client_messages_held), 0,
     "cell messages held across a handoff"},
    {"cell_messages_failed", "errors_total", "reason=\"cell_message_failed\"", STAT_COUNTER, STAT_U64,
     FIGURE(cell_messages_failed), 0, "things that went wrong, by reason"},
    {"moves_dropped", "errors_total", "reason=\"move_over_rate\"", STAT_COUNTER, STAT_U64, FIGURE(moves_dropped), 0,
     NULL},
    {"client_messages_stale", "errors_total", "reason=\"client_message_stale\"", STAT_COUNTER, STAT_U64,
     FIGURE(client_messages_stale), 0, NULL},
    {"calls_dropped", NULL, NULL, STAT_COUNTER, STAT_U64, FIGURE(calls_dropped), 0,
     "method calls over a client's rate, not run"},
    {"congested_clients", "congested_clients", NULL, STAT_GAUGE, STAT_U64, FIGURE(congested_clients), 0,
     "clients not reading, held to enters and leaves"},
    {"congestion_events", NULL, NULL, STAT_COUNTER, STAT_U64, FIGURE(congestion_events), 0,
     "times a client became congested"},
    {"frames_in", NULL, NULL, STAT_COUNTER, STAT_U64, FIGURE(frames_in), 0, "frames read (clients and peers)"},
    {"frames_out", NULL, NULL, STAT_COUNTER, STAT_U64, FIGURE(frames_out), 0, "frames written (clients and peers)"},
    {"bytes_in", NULL, NULL, STAT_COUNTER, STAT_U64, FIGURE(bytes_in), 0, "bytes read (clients and peers)"},
    {"bytes_out", NULL, NULL, STAT_COUNTER, STAT_U64, FIGURE(bytes_out), 0, "bytes written (clients and peers)"},
    {NULL, "channel_bytes_in_total", "side=\"clients\"", STAT_COUNTER, STAT_U64, FIGURE(client_bytes_in), 0,
     "bytes read, by side (clients or cluster peers)"},
    {NULL, "channel_bytes_in_total", "side=\"peers\"", STAT_COUNTER, STAT_U64, FIGURE(peer_bytes_in), 0, NULL},
    {NULL, "channel_bytes_out_total", "side=\"clients\"", STAT_COUNTER, STAT_U64, FIGURE(client_bytes_out), 0,
     "bytes written, by side"},
    {NULL, "channel_bytes_out_total", "side=\"peers\"", STAT_COUNTER, STAT_U64, FIGURE(peer_bytes_out), 0, NULL},
    {"client_frames_in", "channel_frames_in_total", "side=\"clients\"", STAT_COUNTER, STAT_U64,
     FIGURE(client_frames_in), 0, "frames read, by side"},
    {NULL, "channel_frames_in_total", "side=\"peers\"", STAT_COUNTER, STAT_U64, FIGURE(peer_frames_in), 0, NULL},
    {"client_frames_out", "channel_frames_out_total", "side=\"clients\"", STAT_COUNTER, STAT_U64,
     FIGURE(client_frames_out), 0, "frames written, by side"},
    {NULL, "channel_frames_out_total", "side=\"peers\"", STAT_COUNTER, STAT_U64, FIGURE(peer_frames_out), 0, NULL},
    {"cellapps", "cellapps", NULL, STAT_GAUGE, STAT_U64, FIGURE(cellapps), 0, "cellapps connected"},
    {"base_backups", "base_backups_total", NULL, STAT_COUNTER, STAT_U64, FIGURE(base_backups_sent), 0,
     "bases backed up to another baseapp (each base once a base_backup_period_ms)"},
    {"base_backup_bytes", "base_backup_bytes_total", NULL, STAT_COUNTER, STAT_U64, FIGURE(base_backup_bytes), 0,
     "bytes of base backups sent"},
    {"base_backup_us", NULL, NULL, STAT_COUNTER, STAT_U64, FIGURE(base_backup_us), 0,
     "microseconds spent building and sending base backups"},
    {"base_backups_held", "base_backups_held", NULL, STAT_GAUGE, STAT_U64, FIGURE(base_backups_held), 0,
     "other baseapps' bases whose backups this baseapp holds"},
    {"bases_restored", "bases_restored_total", NULL, STAT_COUNTER, STAT_U64, FIGURE(bases_restored), 0,
     "bases of dead baseapps brought back here from their backups"},
    {"bases_restore_failed", "bases_restore_failed_total", NULL, STAT_COUNTER, STAT_U64, FIGURE(bases_restore_failed),
     0, "backups of dead baseapps' bases that could not be brought back (logged)"},
    {"reconnect_redirects", NULL, NULL, STAT_COUNTER, STAT_U64, FIGURE(reconnect_redirects), 0,
     "Reconnects sent to the baseapp holding their session"},
    {"reconnects_deferred", NULL, NULL, STAT_COUNTER, STAT_U64, FIGURE(reconnects_deferred), 0,
     "Reconnects told to retry while their dead baseapp's sessions were being restored"},
    {"handover_tokens_kept", NULL, NULL, STAT_COUNTER, STAT_U64, FIGURE(handover_tokens_kept), 0,
     "giveClientTo TokenLogins told to retry: their target was not here (its baseapp died; being restored)"},
    {"session_claims_refused", "session_claims_refused_total", NULL, STAT_COUNTER, STAT_U64,
     FIGURE(session_claims_refused), 0,
     "logins whose account's session another baseapp held at the claim (sent there, or told to retry)"},
    {"restores_superseded", "restores_superseded_total", NULL, STAT_COUNTER, STAT_U64, FIGURE(restores_superseded), 0,
     "restored sessions dropped because their account already played on another baseapp"},
    {"login_hashes", "login_hashes_total", NULL, STAT_COUNTER, STAT_U64, FIGURE(login_hashes), 0,
     "password hashes run (logins checked)"},
    {"login_hashes_dropped", "login_hashes_dropped_total", NULL, STAT_COUNTER, STAT_U64, FIGURE(login_hashes_dropped),
     0, "queued password hashes dropped unrun: their client left first"},
    {"login_hashes_refused", "login_hashes_refused_total", NULL, STAT_COUNTER, STAT_U64, FIGURE(login_hashes_refused),
     0, "logins refused with a retry hint: the hash queue, or their account's or address's share of it, was full"},
    {"login_hashes_waiting", "login_hashes_waiting", NULL, STAT_GAUGE, STAT_U64, FIGURE(login_hashes_waiting), 0,
     "password hashes waiting for a worker now"},
    {"login_hash_wait_us_max", NULL, NULL, STAT_GAUGE, STAT_U64, FIGURE(login_hash_wait_us_max), 0,
     "the longest a password hash waited for a worker since start (us)"},
    {"draining", "draining", NULL, STAT_GAUGE, STAT_BOOL, FIGURE(draining), 0,
     "1 while the baseapp sends its clients away before stopping"},
    {"fenced", "fenced", NULL, STAT_GAUGE, STAT_BOOL, FIGURE(fenced), 0,
     "1 while this baseapp's lease lapsed and it may be declared dead: it acts for none of its bases"},
    {"fences", "fences_total", NULL, STAT_COUNTER, STAT_U64, FIGURE(fences), 0, "times this baseapp fenced itself"},
};

#define BASEAPP_FIGURE_ROWS (sizeof baseapp_figure_rows / sizeof baseapp_figure_rows[0])

void baseapp_figures_gather(const baseapp *app, baseapp_figures *out) {
    *out = (baseapp_figures){0};
    out->connections = client_links_count(app->links);
    out->accounts = proxies_account_count(app->players);
    out->bases = base_entities_count(app->bases);
    out->cellapps = app->runtime.peers ? peer_set_count_up(app->runtime.peers, PEER_ROLE_CELLAPP) : 0;
    out->draining = app->draining;
    out->fenced = app->fenced;
    out->fences = app->fences;
    const proxy_counters *players = proxies_figures(app->players);
    out->reconnects = players->reconnects;
    out->reconnects_refused = players->reconnects_refused;
    out->logins_replaced = players->logins_replaced;
    out->handovers = players->handovers;
    out->handovers_refused = handovers_refused(app->handovers);
    out->client_messages_unbound = players->client_messages_unbound;
    out->client_messages_held = players->client_messages_held;
    out->client_messages_stale = players->client_messages_stale;
    const persistence_counters *store = persistence_figures(app->store);
    out->writes = store->writes;
    out->write_failures = store->write_failures;
    const base_call_counters *calls = base_calls_figures(app->calls);
    out->entity_calls = calls->made;
    out->entity_calls_received = calls->received;
    out->entity_calls_failed = calls->failed;
    const login_route_counters *routes = login_routes_figures(app->routes);
    out->logins = routes->logins;
    out->redirects = routes->redirects;
    out->token_logins = routes->token_logins;
    out->reconnect_redirects = routes->reconnect_redirects;
    out->reconnects_deferred = routes->reconnects_deferred;
    out->handover_tokens_kept = routes->handover_tokens_kept;
    out->session_claims_refused = routes->session_claims_refused;
    out->restores_superseded = players->restores_superseded;
    const login_queue_counters *hashes = logins_queue_figures(app->logins);
    out->login_hashes = hashes->hashed;
    out->login_hashes_dropped = hashes->dropped;
    out->login_hashes_refused = hashes->refused_full + hashes->refused_account + hashes->refused_address;
    out->login_hashes_waiting = hashes->waiting;
    out->login_hash_wait_us_max = hashes->wait_us_max;
    base_backup_counters backups;
    base_backups_figures(app->backups, &backups);
    out->base_backups_sent = backups.sent;
    out->base_backup_bytes = backups.sent_bytes;
    out->base_backup_us = backups.send_us;
    out->base_backups_held = backups.held;
    out->bases_restored = backups.restored;
    out->bases_restore_failed = backups.restore_failed;
    out->base_backups_dropped = backups.dropped;
    const client_link_counters *links = client_links_counters(app->links);
    out->login_failures = links->login_failures;
    out->logins_throttled = links->logins_throttled;
    out->moves_dropped = links->moves_dropped;
    out->calls_dropped = links->calls_dropped;
    out->congested_clients = links->congested;
    out->congestion_events = links->congestion_events;
    out->cell_messages_failed = app->cell_messages_failed;
    const channel_stats *clients = &links->totals, *peers = &app->runtime.peer_totals;
    out->client_frames_in = clients->frames_in;
    out->client_frames_out = clients->frames_out;
    out->client_bytes_in = clients->bytes_in;
    out->client_bytes_out = clients->bytes_out;
    out->peer_frames_in = peers->frames_in;
    out->peer_frames_out = peers->frames_out;
    out->peer_bytes_in = peers->bytes_in;
    out->peer_bytes_out = peers->bytes_out;
    out->frames_in = clients->frames_in + peers->frames_in;
    out->frames_out = clients->frames_out + peers->frames_out;
    out->bytes_in = clients->bytes_in + peers->bytes_in;
    out->bytes_out = clients->bytes_out + peers->bytes_out;
}

void baseapp_figures_publish(const baseapp_figures *figures, registry *reg) {
    stat_table_publish(baseapp_figure_rows, BASEAPP_FIGURE_ROWS, figures, reg);
}

static const double baseapp_figures_latency_edges[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1};
#define BASEAPP_FIGURES_EDGES (sizeof baseapp_figures_latency_edges / sizeof baseapp_figures_latency_edges[0])

void baseapp_figures_metrics(const baseapp *app, metrics_text *m) {
    baseapp_figures figures;
    baseapp_figures_gather(app, &figures);
    stat_table_metrics(baseapp_figure_rows, BASEAPP_FIGURE_ROWS, &figures, m);
    metrics_family(m, "handover_seconds", "histogram",
                   "giveClientTo, from the call to the client hearing its new space");
    metrics_histogram(m, "handover_seconds", NULL, &proxies_figures(app->players)->handover_latency,
                      baseapp_figures_latency_edges, BASEAPP_FIGURES_EDGES);
    metrics_family(m, "entity_write_seconds", "histogram", "writeToDB round trips to Redis");
    metrics_histogram(m, "entity_write_seconds", NULL, &persistence_figures(app->store)->write_latency,
                      baseapp_figures_latency_edges, BASEAPP_FIGURES_EDGES);
    metrics_family(m, "client_errors_total", "counter", "errors sent to clients (each drops its client), by code");
    const client_link_counters *links = client_links_counters(app->links);
    size_t slots = sizeof links->errors_sent / sizeof links->errors_sent[0];
    for (size_t code = 1; code < slots; code++) {
        if (!links->errors_sent[code]) continue;
        const ProtobufCEnumValue *value =
            protobuf_c_enum_descriptor_get_value(&tessera__client__error_code__descriptor, (int)code);
        char labels[96] = "";
        metrics_label(labels, sizeof labels, "code", value ? value->name : "other");
        metrics_sample(m, "client_errors_total", labels, (double)links->errors_sent[code]);
    }
}
