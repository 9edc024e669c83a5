/* entity_list.c -- the slot table behind entity handles: which slot holds
 * which object, each slot's serial, the FIFO queue of free slots and the
 * slots retired because their serial ran out.
 *
 * It does not own the objects it stores, and it knows nothing of entity ids
 * (the cluster-wide names); a handle is only meaningful in this process.
 *
 * Handle layout (64 bits): the slot's serial in the high 32 bits, slot + 1 in
 * the low 32 bits. Both halves are never 0 in a valid handle, so 0 stays free
 * for ENTITY_HANDLE_NONE and a zeroed struct holds no handle.
 *
 * Slot states:
 *   live    -- object != NULL; serial is the one in the live handle.
 *   free    -- object == NULL, serial >= 1 is the serial the next add hands out;
 *              the slot waits in the FIFO free queue.
 *   retired -- object == NULL, serial == 0; never queued, never reused.
 *
 * Storage grows lazily: slots are created (in slot order) only when the free
 * queue is empty, doubling the array up to max_slots, so memory follows the
 * peak number of live objects rather than max_slots.
 */
#include "entity_list.h"

#include <stdlib.h>

/* Marks the end of the free queue and of a slot's queue link. */
#define ENTITY_LIST__NO_SLOT UINT32_MAX

/* First allocation, in slots: small enough to be free for tiny lists, big
 * enough that a typical cell skips the first few doublings. */
#define ENTITY_LIST__INITIAL_SLOTS 64u

typedef struct entity_list__slot {
    void *object;       /* NULL when free or retired */
    uint32_t serial;    /* 0 when retired */
    uint32_t next_free; /* next slot in the free queue, or ENTITY_LIST__NO_SLOT */
} entity_list__slot;

struct entity_list {
    entity_list__slot *slots;
    uint32_t capacity; /* slots allocated */
    uint32_t used;     /* slots handed out at least once: slots[0..used) */
    uint32_t max_slots;
    uint32_t max_serial; /* 2^serial_bits - 1 */
    uint32_t free_head;  /* FIFO of free slots; ENTITY_LIST__NO_SLOT if empty */
    uint32_t free_tail;
    uint32_t live;
    uint32_t retired;
};

static entity_handle entity_list__pack(uint32_t slot, uint32_t serial) {
    return ((uint64_t)serial << 32) | (uint64_t)(slot + 1u);
}

/* Returns the live slot `handle` names, or NULL when the handle is NONE,
 * garbage, out of range or stale. */
static entity_list__slot *entity_list__resolve(const entity_list *list, entity_handle handle) {
    uint32_t low = (uint32_t)(handle & 0xffffffffu);
    uint32_t serial = (uint32_t)(handle >> 32);
    if (list == NULL || low == 0 || serial == 0) return NULL;
    uint32_t slot = low - 1u;
    if (slot >= list->used) return NULL;
    entity_list__slot *s = &list->slots[slot];
    if (s->object == NULL || s->serial != serial) return NULL;
    return s;
}

entity_list *entity_list_create(uint32_t max_slots, unsigned serial_bits) {
    if (max_slots == 0 || max_slots > (UINT32_C(1) << 31)) return NULL;
    if (serial_bits == 0 || serial_bits > 32) return NULL;
    entity_list *list = calloc(1, sizeof(*list));
    if (list == NULL) return NULL;
    list->max_slots = max_slots;
    list->max_serial = serial_bits == 32 ? UINT32_MAX : (UINT32_C(1) << serial_bits) - 1u;
    list->free_head = ENTITY_LIST__NO_SLOT;
    list->free_tail = ENTITY_LIST__NO_SLOT;
    return list;
}

void entity_list_free(entity_list *list) {
    if (list == NULL) return;
    free(list->slots);
    free(list);
}

/* Makes room for one more fresh slot by doubling the array (capped at
 * max_slots). Returns 0, or -1 when the list is at max_slots or out of
 * memory. */
static int entity_list__grow(entity_list *list) {
    if (list->capacity >= list->max_slots) return -1;
    uint64_t want = list->capacity == 0 ? ENTITY_LIST__INITIAL_SLOTS : (uint64_t)list->capacity * 2u;
    if (want > list->max_slots) want = list->max_slots;
    entity_list__slot *slots = realloc(list->slots, (size_t)want * sizeof(*slots));
    if (slots == NULL) return -1;
    list->slots = slots;
    list->capacity = (uint32_t)want;
    return 0;
}

/* Reuses the oldest free slot if one waits; only otherwise takes a fresh
 * slot, so the array grows no further than the peak live count. Returns
 * NONE when every slot is live or retired (or memory ran out while growing). */
entity_handle entity_list_add(entity_list *list, void *object) {
    if (list == NULL || object == NULL) return ENTITY_HANDLE_NONE;
    uint32_t slot;
    if (list->free_head != ENTITY_LIST__NO_SLOT) {
        slot = list->free_head;
        list->free_head = list->slots[slot].next_free;
        if (list->free_head == ENTITY_LIST__NO_SLOT) list->free_tail = ENTITY_LIST__NO_SLOT;
    } else {
        if (list->used >= list->max_slots) return ENTITY_HANDLE_NONE;
        if (list->used == list->capacity && entity_list__grow(list) != 0) return ENTITY_HANDLE_NONE;
        slot = list->used++;
        list->slots[slot].serial = 1;
    }
    entity_list__slot *s = &list->slots[slot];
    s->object = object;
    s->next_free = ENTITY_LIST__NO_SLOT;
    list->live++;
    return entity_list__pack(slot, s->serial);
}

void *entity_list_get(const entity_list *list, entity_handle handle) {
    entity_list__slot *s = entity_list__resolve(list, handle);
    return s != NULL ? s->object : NULL;
}

/* Bumps the slot's serial so every copy of the handle goes stale; a slot
 * whose serial cannot be bumped within serial_bits is retired instead of
 * queued, so no later handle can ever equal an old one. */
void *entity_list_remove(entity_list *list, entity_handle handle) {
    entity_list__slot *s = entity_list__resolve(list, handle);
    if (s == NULL) return NULL;
    void *object = s->object;
    uint32_t slot = (uint32_t)(s - list->slots);
    s->object = NULL;
    list->live--;
    if (s->serial >= list->max_serial) {
        s->serial = 0;
        list->retired++;
        return object;
    }
    s->serial++;
    s->next_free = ENTITY_LIST__NO_SLOT;
    if (list->free_tail == ENTITY_LIST__NO_SLOT)
        list->free_head = slot;
    else
        list->slots[list->free_tail].next_free = slot;
    list->free_tail = slot;
    return object;
}

uint32_t entity_list_count(const entity_list *list) { return list != NULL ? list->live : 0; }

uint32_t entity_list_retired(const entity_list *list) { return list != NULL ? list->retired : 0; }

/* The cursor is the next slot index to look at, so removing the object just
 * returned (which only clears its slot) cannot disturb the walk. */
void *entity_list_next(const entity_list *list, uint32_t *cursor, entity_handle *handle_out) {
    if (list == NULL || cursor == NULL) return NULL;
    for (uint32_t slot = *cursor; slot < list->used; slot++) {
        const entity_list__slot *s = &list->slots[slot];
        if (s->object == NULL) continue;
        *cursor = slot + 1u;
        if (handle_out != NULL) *handle_out = entity_list__pack(slot, s->serial);
        return s->object;
    }
    *cursor = list->used;
    if (handle_out != NULL) *handle_out = ENTITY_HANDLE_NONE;
    return NULL;
}

/* For NONE (or any handle whose low half is 0) this returns UINT32_MAX,
 * which no table indexed by slot can contain. */
uint32_t entity_handle_slot(entity_handle handle) { return (uint32_t)(handle & 0xffffffffu) - 1u; }
