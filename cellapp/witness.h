/* witness.h -- one client's view of a cell: who it sees (a watcher in the
 * cell's coordinate system), the aliases it knows them by, its bandwidth
 * budget, and the stream of enters, leaves, updates, client calls and game
 * events written for it each tick (witness.c).
 */
#ifndef TESSERA_WITNESS_H
#define TESSERA_WITNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cell.h"
#include "cluster.pb-c.h"

/* Gives `entity` (a real with a client) a witness: a watcher in the cell's
 * coordinate system with the view radius (half the side of the square
 * view) and hysteresis, an alias table and a bandwidth budget. */
void witness_attach(cell *c, cell_entity *entity);
void witness_detach(cell *c, cell_entity *entity);
/* After the tick's coord_flush and replication_pack: writes this client's
 * entity stream (replication.c's format: leaves, enters, property updates
 * and movement, chosen and ordered by the budget) and the client calls
 * queued for it into one ServerToClient(view) at *payload: the witness's
 * own buffer, valid until its next update or its detach (the caller copies
 * what it keeps). Returns its length, 0 when there is nothing to send
 * (*payload is then NULL). */
size_t witness_update(witness *view, cell *c, cell_entity *owner, const uint8_t **payload);
/* Queues a call of client method `method_id` of entity `entity_id` for
 * this client, sent with its next update. Copies `args`. */
void witness_queue_call(witness *view, uint64_t entity_id, uint32_t method_id, const uint8_t *args, size_t length);
/* The client's baseapp says it is not reading (congested) or has drained.
 * While congested the witness sends only enters and leaves; movement and
 * property changes are held and go, current, once it drains. */
void witness_set_congested(witness *view, bool congested);
/* Once per tick, after coord_flush and the pack, before the witnesses'
 * updates: every entity of `c` that moved or was packed tells the witnesses
 * that have it in view, so that each update looks only at what changed in
 * its view. */
void witness_notify_changes(cell *c);
/* `entity` is being freed: the witnesses that still have it in view forget
 * it (its LEAVE follows from the coordinate system's leave). */
void witness_entity_gone(cell_entity *entity);
/* Queues a client call of `entity` for every client that sees it. */
void witness_queue_call_for_observers(cell_entity *entity, uint32_t method_id, const uint8_t *args, size_t length);
/* Queues game event `event_id` (fields coded in `args`) from `source_id` for
 * the next update; needs_view: only if the client sees the source by then. */
void witness_queue_event(witness *view, uint64_t source_id, uint32_t event_id, const uint8_t *args, size_t length,
                         bool needs_view);
/* Queues it for every witness that sees `entity` here (needs_view). */
void witness_queue_event_for_observers(cell_entity *entity, uint32_t event_id, const uint8_t *args, size_t length);
/* Whether the client currently knows `entity_id` (has an alias for it, its
 * own entity included). */
bool witness_sees(const witness *view, uint64_t entity_id);
/* How many entities the client knows now (its aliases in use). */
uint32_t witness_view_count(const witness *view);
/* Everything the client holds and the witness remembers, for an offload.
 * The message's arrays are allocated; free with witness_saved_free. */
void witness_save(const witness *view, const cell *c, Tessera__Cluster__WitnessState *out);
void witness_saved_free(Tessera__Cluster__WitnessState *state);
/* Gives `entity` (now a real here) the witness it had on another cellapp:
 * the same aliases, cooldowns, budget and per-alias state, and a view that
 * starts with what the client knew, so nothing leaves or enters that
 * stayed in view. A copy here that is ahead of the one the witness left
 * (its change counters) owes the client its move, or its properties.
 * Returns 0, or -1 (logged) for a state that does not fit
 * this cellapp's settings (then a fresh witness is attached). */
int witness_restore(cell *c, cell_entity *entity, const Tessera__Cluster__WitnessState *state);
/* The space changed under the client: forget every alias, as the client
 * does on Teleported(space_changed). */
void witness_reset(cell *c, cell_entity *entity);

#endif
