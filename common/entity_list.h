/* entity_list.h -- slot + serial handles and the table that resolves them.
 *
 * A handle names one object in one process for as long as that object lives
 * (Source's EHANDLE). It packs a slot index and the slot's serial number;
 * removing the object bumps the slot's serial, so every handle taken before
 * resolves to NULL afterwards instead of to whatever reuses the slot.
 *
 * Serial wrap-around is guarded, not just noted: a slot whose serial reaches
 * the largest value the handle can carry is retired and never handed out
 * again, so an old handle can never match a new object. Free slots are reused
 * in FIFO order, which spreads serial use over all slots.
 *
 * Handles are process-local. What crosses a process boundary is the 64-bit
 * entity id, never a handle or a pointer.
 */
#ifndef TESSERA_ENTITY_LIST_H
#define TESSERA_ENTITY_LIST_H

#include <stddef.h>
#include <stdint.h>

/* 0 is never a valid handle. */
typedef uint64_t entity_handle;
#define ENTITY_HANDLE_NONE ((entity_handle)0)

typedef struct entity_list entity_list;

/* Creates a list with room for at most `max_slots` live objects (1..2^31) and
 * `serial_bits` bits of serial per slot (1..32; 32 for production, small
 * values let tests reach wrap-around). Returns NULL on bad arguments. The
 * caller frees it with entity_list_free. */
entity_list *entity_list_create(uint32_t max_slots, unsigned serial_bits);
void entity_list_free(entity_list *list);

/* Stores `object` (not NULL) and returns its new handle, or
 * ENTITY_HANDLE_NONE when every slot is live or retired. The list does not
 * own the object. */
entity_handle entity_list_add(entity_list *list, void *object);

/* Returns the object `handle` names, or NULL when the handle is NONE, out of
 * range, or stale (its object was removed). */
void *entity_list_get(const entity_list *list, entity_handle handle);

/* Removes the object `handle` names and returns it (NULL if stale). Every
 * copy of the handle resolves to NULL from now on. */
void *entity_list_remove(entity_list *list, entity_handle handle);

/* Live objects, and slots retired because their serial ran out. */
uint32_t entity_list_count(const entity_list *list);
uint32_t entity_list_retired(const entity_list *list);

/* Iteration over live objects in slot order: start with *cursor = 0; each
 * call returns the next object and its handle (if `handle_out` is not NULL),
 * or NULL at the end. Removing the returned object during iteration is
 * allowed; adding objects may or may not show them in this pass. */
void *entity_list_next(const entity_list *list, uint32_t *cursor, entity_handle *handle_out);

/* Slot index of a handle, for tables indexed in parallel. */
uint32_t entity_handle_slot(entity_handle handle);

#endif
