/* cell_link.h -- bases and their cell parts on the cellapps: which cellapp
 * a new cell part goes to, asking for it, sending it messages through the
 * mailbox, keeping each base's cell address as the cellapps report moves
 * (cell_address.h), and noticing cell parts lost with their cellapp.
 *
 * What a cell part's news means for the base and its client is the layer
 * above's: the callbacks hear when a base's client may be handed what its
 * address let through, and when a cell part is lost for good.
 */
#ifndef TESSERA_CELL_LINK_H
#define TESSERA_CELL_LINK_H

#include <stdbool.h>
#include <stdint.h>

#include "base_entity.h"
#include "baseapp_settings.h"
#include "cluster.pb-c.h"
#include "mailbox.h"
#include "peer_set.h"
#include "process_self.h"

typedef struct cell_links cell_links;

typedef struct cell_link_callbacks {
    void *owner;
    /* The base's address may let held client messages through now
     * (cell_address_next). */
    void (*release)(void *owner, base_entity *base);
    /* The base's cell part is lost: the cellapp making it went away
     * (`while_making`), or the cellapp holding it went and no other took
     * it back within cell_lost_grace_ms. The address is cleared. */
    void (*lost)(void *owner, base_entity *base, uint64_t cellapp_id, bool while_making, const char *reason);
} cell_link_callbacks;

typedef struct cell_links_context {
    const baseapp_settings *settings;
    peer_set *peers;
    mailbox *mailbox;
    base_entities *bases;
    const process_self *self;
    cell_link_callbacks callbacks;
} cell_links_context;

cell_links *cell_links_create(const cell_links_context *context);
void cell_links_free(cell_links *links);

/* The least-loaded cellapp that is up, or 0 if none. */
uint64_t cell_links_choose(cell_links *links);
/* A registry report: the loads the choice is made from are fresh. */
void cell_links_on_registry(cell_links *links);

/* Asks the least-loaded cellapp for the cell part of `base` (a witness when
 * `with_client`, for client binding `binding`), at its stored position if
 * it has one. Returns 0, or -1 when no cellapp is up. */
int cell_link_create(cell_links *links, base_entity *base, bool with_client, uint32_t binding);
/* Sends the base's cell part a message (body set by the caller) through
 * the mailbox, to where its real is as last told. Returns 0, or -1 when it
 * has no cell part. */
int cell_link_send(cell_links *links, base_entity *base, Tessera__Cluster__CellMessage *message);

/* Asks the cell part of a base restored from dead baseapp
 * `dead_baseapp_id`'s backup to answer to this baseapp from now on
 * (BaseMoved, through the mailbox to wherever the cell directory says its
 * real is). The real answers with a CellEntityCreated, as a new cell part
 * would. Returns 0, or -1 when this baseapp is stopping. */
int cell_link_adopt(cell_links *links, base_entity *base, uint64_t dead_baseapp_id);
/* A base being adopted (above) whose cell part cannot answer: it was on a
 * cellapp that was declared dead too (a double failure), or the dead
 * baseapp destroyed it on its way out (a drain or a logoff cut short: no
 * adoption is answered within CELL_LINK_ADOPT_ASKS_BEFORE_RECREATE asks).
 * Its cell part is restored from the cell backup its base backup carried,
 * on the cellapp that owns its position now (asked again every 3 s while
 * unanswered; with RestoreCellEntity.recreate, so that a cell part with no
 * entry in the cell directory is made again, and one that lives somewhere
 * is left alone); the restored real answers the next adoption. Returns
 * whether a restore was asked now. */
bool cell_link_restore_adopted(cell_links *links, base_entity *base);
/* A CellEntityCreated from `cellapp_id`: the base it is for, or NULL when
 * that base went meanwhile (a cell part made for it is destroyed). */
base_entity *cell_links_on_created(cell_links *links, uint64_t cellapp_id,
                                   const Tessera__Cluster__CellEntityCreated *reply);
/* A CellHandoff: the stream moves on; what it releases goes (release). */
void cell_links_on_handoff(cell_links *links, uint64_t cellapp_id, const Tessera__Cluster__CellHandoff *handoff);
/* A CellAddress: the real is on `cellapp_id` now. */
void cell_links_on_address(cell_links *links, uint64_t cellapp_id, const Tessera__Cluster__CellAddress *address);
/* A cellapp was declared dead: cell parts being made there are lost at
 * once; the others are restored from their bases' backups elsewhere
 * (asked again every 3 s while unanswered), and are given up only after
 * cell_lost_grace_ms. */
void cell_links_on_cellapp_down(cell_links *links, uint64_t cellapp_id, const char *reason);
/* Cell parts lost longer than cell_lost_grace_ms are given up (lost). */
void cell_links_sweep(cell_links *links);

#endif
