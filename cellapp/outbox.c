/* outbox.c -- what one tick sends, gathered per peer and sent at the tick's
 * end as one frame each: client payloads per baseapp (ToClientBatch), and
 * everything for another cellapp (CellBatch: ghost messages, offloads,
 * forwarded CellMessages), kept encoded so the outbox owns nothing but
 * bytes. Order within a peer is the order of appending; the channel keeps
 * it. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "outbox.h"

#include "id_map.h"
#include "log.h"
#include "peer_message.h"

struct outbox {
    peer_set *peers;
    id_map baseapp_queues; /* baseapp id -> baseapp_queue */
    /* The queue the last client payload went to: most clients of a cell
     * share a baseapp, so the next one usually needs no look-up. */
    uint64_t last_baseapp_id;
    struct baseapp_queue *last_baseapp_queue;
    id_map cellapp_queues; /* cellapp id -> cellapp_queue */
};

/* Client messages for one baseapp. Their payloads are copied, end to end,
 * into one buffer kept from tick to tick (`offsets` says where each
 * starts; the messages point into it only at the flush, once it has
 * stopped growing): a tick's thousand payloads cost no allocation. */
typedef struct baseapp_queue {
    Tessera__Cluster__ToClient *messages;
    size_t *offsets;
    size_t count, capacity;
    uint8_t *payload_bytes;
    size_t payload_used, payload_capacity;
} baseapp_queue;

/* Encoded CellItems for one cellapp. */
typedef struct cellapp_queue {
    ProtobufCBinaryData *items;
    size_t count, capacity;
    size_t bytes;
} cellapp_queue;

void outbox_to_client(outbox *out, const cell_entity *entity, const uint8_t *payload, size_t length) {
    uint64_t baseapp_id = entity->real->baseapp_id;
    baseapp_queue *queue = out->last_baseapp_queue && out->last_baseapp_id == baseapp_id
                               ? out->last_baseapp_queue
                               : id_map_get(&out->baseapp_queues, baseapp_id);
    if (!queue) {
        queue = xcalloc(1, sizeof *queue);
        id_map_put(&out->baseapp_queues, baseapp_id, queue);
    }
    out->last_baseapp_id = baseapp_id;
    out->last_baseapp_queue = queue;
    if (queue->count == queue->capacity) {
        queue->capacity = queue->capacity ? queue->capacity * 2 : 64;
        queue->messages = xrealloc(queue->messages, queue->capacity * sizeof *queue->messages);
        queue->offsets = xrealloc(queue->offsets, queue->capacity * sizeof *queue->offsets);
    }
    if (queue->payload_capacity - queue->payload_used < length) {
        size_t capacity = queue->payload_capacity ? queue->payload_capacity : 4096;
        while (capacity - queue->payload_used < length) capacity *= 2;
        queue->payload_bytes = xrealloc(queue->payload_bytes, capacity);
        queue->payload_capacity = capacity;
    }
    if (length) memcpy(queue->payload_bytes + queue->payload_used, payload, length);
    queue->offsets[queue->count] = queue->payload_used;
    queue->payload_used += length;
    Tessera__Cluster__ToClient message = TESSERA__CLUSTER__TO_CLIENT__INIT;
    message.entity_id = entity->id;
    message.payload.data = NULL; /* set at the flush, from offsets */
    message.payload.len = length;
    message.incarnation = entity->incarnation;
    message.binding = entity->real->client_binding;
    queue->messages[queue->count++] = message;
}

void outbox_to_cellapp(outbox *out, uint64_t peer, const Tessera__Cluster__CellItem *item) {
    cellapp_queue *queue = id_map_get(&out->cellapp_queues, peer);
    if (!queue) {
        queue = xcalloc(1, sizeof *queue);
        id_map_put(&out->cellapp_queues, peer, queue);
    }
    if (queue->count == queue->capacity) {
        queue->capacity = queue->capacity ? queue->capacity * 2 : 64;
        queue->items = xrealloc(queue->items, queue->capacity * sizeof *queue->items);
    }
    size_t length = tessera__cluster__cell_item__get_packed_size(item);
    uint8_t *data = xmalloc(length ? length : 1);
    tessera__cluster__cell_item__pack(item, data);
    queue->items[queue->count].data = data;
    queue->items[queue->count].len = length;
    queue->count++;
    queue->bytes += length;
}

size_t outbox_cellapp_bytes(const outbox *out, uint64_t peer) {
    const cellapp_queue *queue = id_map_get(&out->cellapp_queues, peer);
    return queue ? queue->bytes : 0;
}

static void baseapp_queue_clear(baseapp_queue *queue) {
    queue->count = 0;
    queue->payload_used = 0;
}

static void baseapp_queue_free(baseapp_queue *queue) {
    free(queue->messages);
    free(queue->offsets);
    free(queue->payload_bytes);
    free(queue);
}

static void cellapp_queue_clear(cellapp_queue *queue) {
    for (size_t i = 0; i < queue->count; i++) free(queue->items[i].data);
    queue->count = 0;
    queue->bytes = 0;
}

void outbox_flush_clients(outbox *out) {
    size_t cursor = 0;
    uint64_t baseapp_id;
    void *value;
    while (id_map_next(&out->baseapp_queues, &cursor, &baseapp_id, &value)) {
        baseapp_queue *queue = value;
        if (queue->count == 0) continue;
        Tessera__Cluster__ToClient **pointers = xcalloc(queue->count, sizeof(Tessera__Cluster__ToClient *));
        for (size_t i = 0; i < queue->count; i++) {
            queue->messages[i].payload.data = queue->payload_bytes + queue->offsets[i];
            pointers[i] = &queue->messages[i];
        }
        Tessera__Cluster__ToClientBatch batch = TESSERA__CLUSTER__TO_CLIENT_BATCH__INIT;
        batch.n_messages = queue->count;
        batch.messages = pointers;
        /* A baseapp that went away loses its messages; its entities are
         * being destroyed. */
        peer_send_to_client(out->peers, baseapp_id, &batch);
        free(pointers);
        baseapp_queue_clear(queue);
    }
}

static void outbox_send_cellapp(outbox *out, uint64_t peer, cellapp_queue *queue) {
    if (queue->count == 0) return;
    Tessera__Cluster__CellBatch batch = TESSERA__CLUSTER__CELL_BATCH__INIT;
    batch.n_items = queue->count;
    batch.items = queue->items;
    if (peer_send_cell_batch(out->peers, peer, &batch) != 0)
        log_info("cellapp %" PRIu64 " is not up: %zu items for it are lost with it", peer, queue->count);
    cellapp_queue_clear(queue);
}

void outbox_flush_cellapps(outbox *out) {
    size_t cursor = 0;
    uint64_t peer;
    void *value;
    while (id_map_next(&out->cellapp_queues, &cursor, &peer, &value)) outbox_send_cellapp(out, peer, value);
}

void outbox_flush_cellapp(outbox *out, uint64_t peer) {
    cellapp_queue *queue = id_map_get(&out->cellapp_queues, peer);
    if (queue) outbox_send_cellapp(out, peer, queue);
}

void outbox_drop_peer(outbox *out, uint64_t peer) {
    baseapp_queue *base = id_map_remove(&out->baseapp_queues, peer);
    if (base == out->last_baseapp_queue) out->last_baseapp_queue = NULL;
    if (base) baseapp_queue_free(base);
    cellapp_queue *cells = id_map_remove(&out->cellapp_queues, peer);
    if (cells) {
        cellapp_queue_clear(cells);
        free(cells->items);
        free(cells);
    }
}

outbox *outbox_create(peer_set *peers) {
    outbox *out = xcalloc(1, sizeof *out);
    out->peers = peers;
    id_map_init(&out->baseapp_queues);
    id_map_init(&out->cellapp_queues);
    return out;
}

void outbox_message_to_client(outbox *out, const cell_entity *entity, const Tessera__Client__ServerToClient *message) {
    if (!entity->real || !entity->real->baseapp_id) return;
    size_t length = tessera__client__server_to_client__get_packed_size(message);
    uint8_t *payload = xmalloc(length);
    tessera__client__server_to_client__pack(message, payload);
    outbox_to_client(out, entity, payload, length);
    free(payload);
}

void outbox_free(outbox *out) {
    if (!out) return;
    size_t cursor = 0;
    uint64_t id;
    void *value;
    while (id_map_next(&out->baseapp_queues, &cursor, &id, &value)) {
        baseapp_queue_free(value);
    }
    id_map_close(&out->baseapp_queues);
    cursor = 0;
    while (id_map_next(&out->cellapp_queues, &cursor, &id, &value)) {
        cellapp_queue *queue = value;
        cellapp_queue_clear(queue);
        free(queue->items);
        free(queue);
    }
    id_map_close(&out->cellapp_queues);
    free(out);
}
