/* base_backup.h -- base backups across baseapps, so that no player is lost
 * when a baseapp dies (BigWorld's backup_sender / MiniBackupHash, with
 * restores that keep the client).
 *
 * Sending. Every base here is backed up once per base_backup_period_ms,
 * spread over the period (base_backups_tick walks the bases a share at a
 * time): its properties, its pending timers (base_timer.h), its cell
 * part's address and latest cell backup, and its client's account, session
 * token and binding (proto/cluster.proto, BaseBackup). Each goes to one
 * holder: of the other live baseapps, the one whose id scores highest with
 * the entity id (rendezvous hashing), so a change in the set of baseapps
 * moves only the bases whose holder came or went.
 *
 * Holding. A holder keeps the latest backup of each base by entity id. It
 * forgets one when the base's baseapp says the base is gone
 * (BaseBackupDrop, sent to every baseapp when a base is freed) or leaves
 * the registry, and one its baseapp has stopped sending for three periods
 * while still alive (the base now backs up to another holder: until then
 * both keep it, so a base is never without a backup).
 *
 * Restoring. When the cluster declares a baseapp dead (death_watch on the
 * balancer's lease holder), each holder turns that baseapp's backups into
 * live bases through the `restore` callback (main.c: base_life, proxy and
 * base_timer do the work), and forgets them.
 */
#ifndef TESSERA_BASE_BACKUP_H
#define TESSERA_BASE_BACKUP_H

#include <stddef.h>
#include <stdint.h>

#include "base_entity.h"
#include "base_timer.h"
#include "baseapp_settings.h"
#include "cluster.pb-c.h"
#include "peer_set.h"
#include "process_self.h"

typedef struct base_backups base_backups;

typedef struct base_backups_context {
    const baseapp_settings *settings; /* base_backup_period_ms */
    peer_set *peers;
    base_entities *bases;
    const process_self *self;
    const base_timers *timers; /* what each backup carries of its base's timers */
    /* Brings `backup` of a base of dead baseapp `dead_baseapp_id` back here.
     * Returns 0, or -1 with why in `why` (logged by the caller). */
    int (*restore)(void *owner, const Tessera__Cluster__BaseBackup *backup, uint64_t dead_baseapp_id, char *why,
                   size_t why_size);
    void *owner;
} base_backups_context;

typedef struct base_backup_counters {
    uint64_t sent;       /* backups sent */
    uint64_t sent_bytes; /* their encoded size */
    uint64_t send_us;    /* time spent building and sending them */
    uint64_t held;       /* backups held for other baseapps now */
    uint64_t restored;   /* bases brought back here from a dead baseapp's backups */
    uint64_t restore_failed;
    uint64_t dropped; /* backups forgotten: their bases gone or moved to another holder */
} base_backup_counters;

base_backups *base_backups_create(const base_backups_context *context);
void base_backups_free(base_backups *backups);
void base_backups_figures(const base_backups *backups, base_backup_counters *out);

/* Sends this call's share of the period's backups (call every few tens of
 * milliseconds), the drops queued since the last call, and forgets held
 * backups that went stale. */
void base_backups_tick(base_backups *backups, uint64_t now_us);
/* A base here is gone (freed): every other baseapp forgets its backup. */
void base_backups_forget(base_backups *backups, uint64_t entity_id);

/* From baseapp `sender`: backups to hold, and bases to forget. */
void base_backups_on_backups(base_backups *backups, uint64_t sender, const Tessera__Cluster__BaseBackups *message);
void base_backups_on_drop(base_backups *backups, uint64_t sender, const Tessera__Cluster__BaseBackupDrop *message);
/* Baseapp `baseapp_id` was declared dead: its bases held here come back. */
void base_backups_on_baseapp_dead(base_backups *backups, uint64_t baseapp_id);

/* The holder of `entity_id`'s backup among `candidates` (ids of the other
 * live baseapps): the one scoring highest (rendezvous hashing), or 0 when
 * there is none. */
uint64_t base_backup_holder(uint64_t entity_id, const uint64_t *candidates, size_t count);

#endif
