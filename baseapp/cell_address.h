/* cell_address.h -- where a base's cell part is, and the order in which its
 * client hears from it.
 *
 * The address is the cellapp that holds the entity's real and the real's
 * incarnation (proto/cluster.proto): the baseapp sends the entity's
 * messages there, and keeps whichever address has the highest incarnation
 * it has been told (CellEntityCreated, CellAddress).
 *
 * The client's stream comes from one incarnation at a time. When a real
 * moves, the old one's last messages and the new one's first travel on two
 * channels and may cross; the baseapp hands the client the messages of the
 * STREAM incarnation only, holding later ones until the stream's cellapp
 * says that incarnation has ended (CellHandoff, which names the next
 * cellapp), or is gone. So two cellapps' streams never interleave, and an
 * incarnation that never ran (a refused offload) ends with its handoff.
 *
 * Lost. When the cellapps it knows of are down, the cell part may yet be
 * taken back by the cellapp it was leaving (offload.c): the address waits
 * for a later incarnation's CellAddress for a grace period, then the
 * caller gives up on it.
 *
 * Pure bookkeeping: no sockets; the caller delivers what it is handed.
 */
#ifndef TESSERA_CELL_ADDRESS_H
#define TESSERA_CELL_ADDRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* More than a client could need held across one handoff (a few ticks of
 * one cellapp); beyond it the client is better dropped than stalled. */
#define CELL_ADDRESS_MAX_HELD 256

typedef struct cell_address_held cell_address_held;

typedef struct cell_address {
    uint64_t cellapp_id; /* where the real is, as last told (0: none) */
    uint32_t incarnation;
    uint64_t stream_cellapp; /* whose client messages go to the client now */
    uint32_t stream_incarnation;
    cell_address_held *held; /* later incarnations' messages and handoffs, in arrival order */
    size_t held_count, held_capacity;
    uint64_t lost_since_us; /* 0, or when every cellapp it knew was found gone */
} cell_address;

typedef enum cell_address_verdict {
    CELL_ADDRESS_DELIVER,  /* hand it to the client now */
    CELL_ADDRESS_HELD,     /* kept (copied) for later */
    CELL_ADDRESS_STALE,    /* from an incarnation that has ended: drop it */
    CELL_ADDRESS_OVERFLOW, /* too much held: give up on the client */
} cell_address_verdict;

/* The cell part was created on `cellapp_id` as `incarnation`. */
void cell_address_init(cell_address *address, uint64_t cellapp_id, uint32_t incarnation);
/* Frees what is held; the address is empty afterwards. */
void cell_address_clear(cell_address *address);

/* A client message of incarnation `incarnation` from `cellapp_id`. */
cell_address_verdict cell_address_on_client_message(cell_address *address, uint64_t cellapp_id, uint32_t incarnation,
                                                    const uint8_t *payload, size_t length);
/* `cellapp_id` says its incarnation has ended and the next real is on
 * `next_cellapp`. Returns false if it was stale. */
bool cell_address_on_handoff(cell_address *address, uint64_t cellapp_id, uint32_t incarnation, uint64_t next_cellapp);
/* `cellapp_id` holds the real now as `incarnation`. Returns true if the
 * address changed. */
bool cell_address_on_address(cell_address *address, uint64_t cellapp_id, uint32_t incarnation);
/* Like cell_address_on_address, for an address whose cellapp was declared
 * dead: a live cellapp that holds the real at the same incarnation takes
 * it (two reals can have reached one incarnation in a failure's race, an
 * offload's arrival and a restore; the dead one's is gone). Returns true
 * if the address changed. */
bool cell_address_take_over(cell_address *address, uint64_t cellapp_id, uint32_t incarnation);
/* A held message that may go to the client now (allocated; the caller
 * frees it), or NULL. Call after every change until NULL. */
uint8_t *cell_address_next(cell_address *address, size_t *length);
/* Checks the stream's cellapp against `is_up` (after a cellapp went away,
 * and after a handoff): a stream whose cellapp is gone moves on to the
 * earliest later incarnation known on a cellapp that is up; with none, the
 * address is lost from `now_us` (until a CellAddress of a later incarnation
 * comes). Returns true while it is lost. */
bool cell_address_check(cell_address *address, bool (*is_up)(uint64_t cellapp_id, void *context), void *context,
                        uint64_t now_us);

#endif
