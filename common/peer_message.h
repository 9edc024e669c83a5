/* peer_message.h -- one sender per kind of PeerMessage (proto/cluster.proto),
 * so no caller builds the envelope by hand: peer_send_<body>(peers, to,
 * &body) wraps the body in a PeerMessage and sends it to process `to`.
 * Each returns what peer_set_send returns: 0, or -1 when that peer is not
 * up (nothing was sent).
 *
 * PEER_MESSAGE_BODIES lists every body but hello (peer_set.c's own): its
 * field name, the body case's suffix, and the protobuf-c type.
 */
#ifndef TESSERA_PEER_MESSAGE_H
#define TESSERA_PEER_MESSAGE_H

#include <stdint.h>

#include "cluster.pb-c.h"
#include "peer_set.h"

#define PEER_MESSAGE_BODIES(X)                                                       \
    X(create_cell_entity, CREATE_CELL_ENTITY, Tessera__Cluster__CreateCellEntity)    \
    X(cell_entity_created, CELL_ENTITY_CREATED, Tessera__Cluster__CellEntityCreated) \
    X(to_client, TO_CLIENT, Tessera__Cluster__ToClientBatch)                         \
    X(drop_client, DROP_CLIENT, Tessera__Cluster__DropClient)                        \
    X(cell_message, CELL_MESSAGE, Tessera__Cluster__CellMessage)                     \
    X(cell_message_failed, CELL_MESSAGE_FAILED, Tessera__Cluster__CellMessageFailed) \
    X(cell_address, CELL_ADDRESS, Tessera__Cluster__CellAddress)                     \
    X(cell_handoff, CELL_HANDOFF, Tessera__Cluster__CellHandoff)                     \
    X(cell_batch, CELL_BATCH, Tessera__Cluster__CellBatch)                           \
    X(cell_backup, CELL_BACKUP, Tessera__Cluster__CellBackup)                        \
    X(base_call, BASE_CALL, Tessera__Cluster__BaseCall)                              \
    X(entity_call_failed, ENTITY_CALL_FAILED, Tessera__Cluster__EntityCallFailed)    \
    X(handover_offer, HANDOVER_OFFER, Tessera__Cluster__HandoverOffer)               \
    X(handover_answer, HANDOVER_ANSWER, Tessera__Cluster__HandoverAnswer)            \
    X(game_event, GAME_EVENT, Tessera__Cluster__GameEventBroadcast)                  \
    X(death, DEATH, Tessera__Cluster__PeerDeath)                                     \
    X(cell_snapshot, CELL_SNAPSHOT, Tessera__Cluster__CellSnapshot)                  \
    X(restore_cell_entity, RESTORE_CELL_ENTITY, Tessera__Cluster__RestoreCellEntity) \
    X(base_backups, BASE_BACKUPS, Tessera__Cluster__BaseBackups)                     \
    X(base_backup_drop, BASE_BACKUP_DROP, Tessera__Cluster__BaseBackupDrop)

#define PEER_MESSAGE_SENDER(name, kind, type)                                            \
    static inline int peer_send_##name(peer_set *peers, uint64_t to, const type *body) { \
        Tessera__Cluster__PeerMessage message = TESSERA__CLUSTER__PEER_MESSAGE__INIT;    \
        message.body_case = TESSERA__CLUSTER__PEER_MESSAGE__BODY_##kind;                 \
        message.name = (type *)body;                                                     \
        return peer_set_send(peers, to, &message);                                       \
    }

PEER_MESSAGE_BODIES(PEER_MESSAGE_SENDER)

#undef PEER_MESSAGE_SENDER

#endif
