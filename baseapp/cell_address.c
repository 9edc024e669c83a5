/* cell_address.c -- a base's cell address and the ordering of its client's
 * stream across the real's moves (the rules are in cell_address.h). The
 * held messages are a small array in arrival order: a handoff keeps a few
 * ticks of one cellapp at most. */
#include "cell_address.h"

#include <stdlib.h>
#include <string.h>

#include "log.h"

struct cell_address_held {
    bool handoff; /* a CellHandoff, else a client message */
    uint64_t cellapp_id;
    uint32_t incarnation;
    uint64_t next_cellapp; /* handoff */
    uint8_t *payload;      /* client message */
    size_t length;
};

void cell_address_init(cell_address *address, uint64_t cellapp_id, uint32_t incarnation) {
    memset(address, 0, sizeof *address);
    address->cellapp_id = address->stream_cellapp = cellapp_id;
    address->incarnation = address->stream_incarnation = incarnation;
}

void cell_address_clear(cell_address *address) {
    for (size_t i = 0; i < address->held_count; i++) free(address->held[i].payload);
    free(address->held);
    memset(address, 0, sizeof *address);
}

static cell_address_held *cell_address_hold(cell_address *address) {
    if (address->held_count == address->held_capacity) {
        address->held_capacity = address->held_capacity ? address->held_capacity * 2 : 4;
        address->held = xrealloc(address->held, address->held_capacity * sizeof *address->held);
    }
    cell_address_held *held = &address->held[address->held_count++];
    memset(held, 0, sizeof *held);
    return held;
}

cell_address_verdict cell_address_on_client_message(cell_address *address, uint64_t cellapp_id, uint32_t incarnation,
                                                    const uint8_t *payload, size_t length) {
    if (incarnation < address->stream_incarnation) return CELL_ADDRESS_STALE;
    if (incarnation == address->stream_incarnation)
        return cellapp_id == address->stream_cellapp ? CELL_ADDRESS_DELIVER : CELL_ADDRESS_STALE;
    if (address->held_count >= CELL_ADDRESS_MAX_HELD) return CELL_ADDRESS_OVERFLOW;
    cell_address_held *held = cell_address_hold(address);
    held->cellapp_id = cellapp_id;
    held->incarnation = incarnation;
    held->length = length;
    held->payload = xmalloc(length ? length : 1);
    if (length) memcpy(held->payload, payload, length);
    return CELL_ADDRESS_HELD;
}

bool cell_address_on_handoff(cell_address *address, uint64_t cellapp_id, uint32_t incarnation, uint64_t next_cellapp) {
    if (incarnation < address->stream_incarnation) return false;
    if (incarnation == address->stream_incarnation) {
        /* Only the stream's cellapp ends its incarnation (as in cell_address_next). */
        if (cellapp_id != address->stream_cellapp) return false;
        address->stream_incarnation = incarnation + 1;
        address->stream_cellapp = next_cellapp;
        return true;
    }
    cell_address_held *held = cell_address_hold(address);
    held->handoff = true;
    held->cellapp_id = cellapp_id;
    held->incarnation = incarnation;
    held->next_cellapp = next_cellapp;
    return true;
}

bool cell_address_on_address(cell_address *address, uint64_t cellapp_id, uint32_t incarnation) {
    if (incarnation <= address->incarnation) return false;
    address->cellapp_id = cellapp_id;
    address->incarnation = incarnation;
    if (address->lost_since_us && incarnation > address->stream_incarnation) {
        /* The stream's cellapp is gone and this real took the entity back:
         * its stream is the client's now. */
        address->stream_incarnation = incarnation;
        address->stream_cellapp = cellapp_id;
        address->lost_since_us = 0;
    }
    return true;
}

bool cell_address_take_over(cell_address *address, uint64_t cellapp_id, uint32_t incarnation) {
    if (incarnation != address->incarnation || cellapp_id == address->cellapp_id)
        return cell_address_on_address(address, cellapp_id, incarnation);
    address->cellapp_id = cellapp_id;
    if (address->lost_since_us && incarnation >= address->stream_incarnation) {
        address->stream_incarnation = incarnation;
        address->stream_cellapp = cellapp_id;
        address->lost_since_us = 0;
    }
    return true;
}

static void cell_address_remove(cell_address *address, size_t i) {
    memmove(&address->held[i], &address->held[i + 1], (address->held_count - i - 1) * sizeof *address->held);
    address->held_count--;
}

uint8_t *cell_address_next(cell_address *address, size_t *length) {
    for (size_t i = 0; i < address->held_count;) {
        cell_address_held *held = &address->held[i];
        if (held->incarnation < address->stream_incarnation ||
            (held->incarnation == address->stream_incarnation && held->cellapp_id != address->stream_cellapp)) {
            free(held->payload);
            cell_address_remove(address, i);
            continue;
        }
        if (held->incarnation > address->stream_incarnation) {
            i++;
            continue;
        }
        if (held->handoff) {
            address->stream_incarnation = held->incarnation + 1;
            address->stream_cellapp = held->next_cellapp;
            cell_address_remove(address, i);
            i = 0; /* what waited for the next incarnation may go now */
            continue;
        }
        uint8_t *payload = held->payload;
        *length = held->length;
        cell_address_remove(address, i);
        return payload;
    }
    return NULL;
}

bool cell_address_check(cell_address *address, bool (*is_up)(uint64_t cellapp_id, void *context), void *context,
                        uint64_t now_us) {
    while (address->stream_cellapp == 0 || !is_up(address->stream_cellapp, context)) {
        /* The earliest later incarnation on a cellapp that is up. */
        uint32_t best = 0;
        uint64_t best_cellapp = 0;
        for (size_t i = 0; i < address->held_count; i++) {
            const cell_address_held *held = &address->held[i];
            if (held->incarnation > address->stream_incarnation && (!best || held->incarnation < best) &&
                is_up(held->cellapp_id, context)) {
                best = held->incarnation;
                best_cellapp = held->cellapp_id;
            }
        }
        if (address->incarnation > address->stream_incarnation && (!best || address->incarnation < best) &&
            is_up(address->cellapp_id, context)) {
            best = address->incarnation;
            best_cellapp = address->cellapp_id;
        }
        if (!best) {
            if (!address->lost_since_us) address->lost_since_us = now_us ? now_us : 1;
            return true;
        }
        address->stream_incarnation = best;
        address->stream_cellapp = best_cellapp;
    }
    if (!is_up(address->cellapp_id, context) && address->incarnation > address->stream_incarnation) {
        /* Only the address is gone, and the stream will hand over to it:
         * wait for the real to be taken back. */
        if (!address->lost_since_us) address->lost_since_us = now_us ? now_us : 1;
        return true;
    }
    address->lost_since_us = 0;
    return false;
}
