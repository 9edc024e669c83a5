/* outbox.c -- what one tick sends, gathered per peer and sent at the tick's
 * end as one frame each: client payloads per baseapp (ToClientBatch), and
 * everything for another cellapp (CellBatch: ghost messages, offloads,
 * forwarded CellMessages), kept encoded so the outbox owns nothing but
 * bytes. Order within a peer is the order of appending; the channel keeps
 * it. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cellapp.h"
#include "log.h"
#include "peer_message.h"

/* Client messages for one baseapp; the payloads are owned here until the
 * flush. */
typedef struct base_outbox {
    Tessera__Cluster__ToClient *messages;
    size_t count, capacity;
} base_outbox;

/* Encoded CellItems for one cellapp. */
typedef struct cell_outbox {
    ProtobufCBinaryData *items;
    size_t count, capacity;
    size_t bytes;
} cell_outbox;

void outbox_to_client(cellapp *app, const cell_entity *entity, uint8_t *payload, size_t length) {
    uint64_t baseapp_id = entity->real->baseapp_id;
    base_outbox *box = id_map_get(&app->base_outboxes, baseapp_id);
    if (!box) {
        box = xcalloc(1, sizeof *box);
        id_map_put(&app->base_outboxes, baseapp_id, box);
    }
    if (box->count == box->capacity) {
        box->capacity = box->capacity ? box->capacity * 2 : 64;
        box->messages = xrealloc(box->messages, box->capacity * sizeof *box->messages);
    }
    Tessera__Cluster__ToClient message = TESSERA__CLUSTER__TO_CLIENT__INIT;
    message.entity_id = entity->id;
    message.payload.data = payload;
    message.payload.len = length;
    message.incarnation = entity->incarnation;
    message.binding = entity->real->client_binding;
    box->messages[box->count++] = message;
}

void outbox_to_cellapp(cellapp *app, uint64_t peer, const Tessera__Cluster__CellItem *item) {
    cell_outbox *box = id_map_get(&app->cell_outboxes, peer);
    if (!box) {
        box = xcalloc(1, sizeof *box);
        id_map_put(&app->cell_outboxes, peer, box);
    }
    if (box->count == box->capacity) {
        box->capacity = box->capacity ? box->capacity * 2 : 64;
        box->items = xrealloc(box->items, box->capacity * sizeof *box->items);
    }
    size_t length = tessera__cluster__cell_item__get_packed_size(item);
    uint8_t *data = xmalloc(length ? length : 1);
    tessera__cluster__cell_item__pack(item, data);
    box->items[box->count].data = data;
    box->items[box->count].len = length;
    box->count++;
    box->bytes += length;
}

size_t outbox_cellapp_bytes(const cellapp *app, uint64_t peer) {
    const cell_outbox *box = id_map_get(&app->cell_outboxes, peer);
    return box ? box->bytes : 0;
}

static void base_outbox_clear(base_outbox *box) {
    for (size_t i = 0; i < box->count; i++) free(box->messages[i].payload.data);
    box->count = 0;
}

static void cell_outbox_clear(cell_outbox *box) {
    for (size_t i = 0; i < box->count; i++) free(box->items[i].data);
    box->count = 0;
    box->bytes = 0;
}

void outbox_flush_clients(cellapp *app) {
    size_t cursor = 0;
    uint64_t baseapp_id;
    void *value;
    while (id_map_next(&app->base_outboxes, &cursor, &baseapp_id, &value)) {
        base_outbox *box = value;
        if (box->count == 0) continue;
        Tessera__Cluster__ToClient **pointers = xcalloc(box->count, sizeof *pointers);
        for (size_t i = 0; i < box->count; i++) pointers[i] = &box->messages[i];
        Tessera__Cluster__ToClientBatch batch = TESSERA__CLUSTER__TO_CLIENT_BATCH__INIT;
        batch.n_messages = box->count;
        batch.messages = pointers;
        /* A baseapp that went away loses its messages; its entities are
         * being destroyed. */
        peer_send_to_client(app->peers, baseapp_id, &batch);
        free(pointers);
        base_outbox_clear(box);
    }
}

static void outbox_send_cellapp(cellapp *app, uint64_t peer, cell_outbox *box) {
    if (box->count == 0) return;
    Tessera__Cluster__CellBatch batch = TESSERA__CLUSTER__CELL_BATCH__INIT;
    batch.n_items = box->count;
    batch.items = box->items;
    if (peer_send_cell_batch(app->peers, peer, &batch) != 0)
        log_info("cellapp %" PRIu64 " is not up: %zu items for it are lost with it", peer, box->count);
    cell_outbox_clear(box);
}

void outbox_flush_cellapps(cellapp *app) {
    size_t cursor = 0;
    uint64_t peer;
    void *value;
    while (id_map_next(&app->cell_outboxes, &cursor, &peer, &value)) outbox_send_cellapp(app, peer, value);
}

void outbox_flush_cellapp(cellapp *app, uint64_t peer) {
    cell_outbox *box = id_map_get(&app->cell_outboxes, peer);
    if (box) outbox_send_cellapp(app, peer, box);
}

void outbox_drop_peer(cellapp *app, uint64_t peer) {
    base_outbox *base = id_map_remove(&app->base_outboxes, peer);
    if (base) {
        base_outbox_clear(base);
        free(base->messages);
        free(base);
    }
    cell_outbox *cells = id_map_remove(&app->cell_outboxes, peer);
    if (cells) {
        cell_outbox_clear(cells);
        free(cells->items);
        free(cells);
    }
}

void outbox_free(cellapp *app) {
    size_t cursor = 0;
    uint64_t id;
    void *value;
    while (id_map_next(&app->base_outboxes, &cursor, &id, &value)) {
        base_outbox *box = value;
        base_outbox_clear(box);
        free(box->messages);
        free(box);
    }
    id_map_close(&app->base_outboxes);
    cursor = 0;
    while (id_map_next(&app->cell_outboxes, &cursor, &id, &value)) {
        cell_outbox *box = value;
        cell_outbox_clear(box);
        free(box->items);
        free(box);
    }
    id_map_close(&app->cell_outboxes);
}
