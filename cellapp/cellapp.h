/* cellapp.h -- the cellapp program's private header: the settings, the cell
 * and its entities, and under one banner per file what each cellapp module
 * offers the others.
 *
 * A cellapp holds cells of spaces. A space is split into cells by its
 * layout (common/space_layout.h, kept in Redis); this cellapp owns at most
 * one cell of each space, and its `cell` object for a space holds the REAL
 * entities whose position lies in its region and GHOSTS of the reals of
 * neighbouring cells that come within ghost distance of it, all in one
 * coordinate system, so a witness sees across the line as if there were
 * none. Reals that walk out of the region move to the cell they walked
 * into (offload.c); the cellapps that hold a real's ghosts are its haunts
 * (haunt.c).
 */
#ifndef TESSERA_CELLAPP_H
#define TESSERA_CELLAPP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "bit_stream.h"
#include "channel.h"
#include "clock.h"
#include "client.pb-c.h"
#include "cluster.pb-c.h"
#include "controller.h"
#include "entity_io.h"
#include "entity_timer.h"
#include "coord.h"
#include "entity_def.h"
#include "entity_state.h"
#include "game_host.h"
#include "ghost_order.h"
#include "id_block.h"
#include "balance.h"
#include "id_map.h"
#include "latency_histogram.h"
#include "base_mailbox.h"
#include "mailbox.h"
#include "navmesh.h"
#include "peer_set.h"
#include "process.h"
#include "process_self.h"
#include "redis_client.h"
#include "registry.h"
#include "replication.h"
#include "space_layout.h"
#include "volatile_codec.h"
#include "cellapp_settings.h"
#include "cell.h"
#include "witness.h"
#include "movement.h"
#include "outbox.h"
#include "spaces.h"

/* ---- the process (main.c, cellapp.c) ------------------------------------ */

typedef struct cellapp cellapp;
typedef struct balancer balancer;
typedef struct cellapp_admin cellapp_admin;

/* How busy the cellapp is (cell_load.c): the share of wall time its loop
 * spent working, sampled each tick and smoothed, without the transient
 * work of offloads and ghost churn, which is measured and smoothed apart. */
typedef struct cellapp_load {
    uint64_t sampled_us;   /* monotonic time of the last sample (0: none yet) */
    uint64_t idle_ns;      /* the loop's idle time then (uv_metrics_idle_time) */
    uint64_t transient_us; /* offload and ghost work since then */
    double load;           /* smoothed, a fraction of one core */
    double transient;      /* smoothed likewise */
} cellapp_load;
typedef struct ghost_route ghost_route;

/* Counters the cellapp publishes (registry) and prints. */
typedef struct cellapp_counters {
    uint64_t offloads_out, offloads_in; /* reals sent to and taken from other cellapps */
    uint64_t game_events;               /* game events and user messages fired here */
    uint64_t offloads_refused, offloads_reclaimed;
    uint64_t ghosts_created, ghosts_deleted; /* ghosts of our reals made and removed elsewhere */
    uint64_t ghost_bytes;                    /* GhostMessage bytes sent */
    uint64_t messages_forwarded;             /* CellMessages sent on to the real */
    uint64_t messages_failed;                /* CellMessages that could not be delivered */
    uint64_t stream_gaps;                    /* sequences given up after cell_stream_gap_ms */
    uint64_t duplicates;                     /* CellMessages delivered before, dropped */
    uint64_t teleports;
    uint64_t moves_refused;
    /* From an offload's send to its acknowledgement, microseconds. */
    latency_histogram offload_latency;
    latency_histogram tick_time; /* each tick's duration, microseconds */
} cellapp_counters;

struct cellapp {
    uv_loop_t *loop;
    cellapp_settings settings;
    redis_client *redis;
    registry *registry;
    peer_set *peers;
    uv_tcp_t listener;
    int listen_port;
    uv_timer_t tick_timer;
    uv_timer_t stats_timer;
    uv_signal_t sigint, sigterm, sigusr1, sighup;
    int argc; /* main's, for SIGHUP's reload */
    char **argv;
    process_self self; /* its process id and whether it is stopping */
    cell_shared shared;
    spaces *spaces; /* the spaces this cellapp knows, each with its cell here, if any */
    channel_stats totals;
    uint64_t tick_last_us;        /* monotonic time the accumulator last advanced */
    uint64_t tick_accumulator_us; /* time owed to the simulation */
    uint64_t last_tick_duration_us;
    uint64_t random_state;    /* spawn points */
    outbox *outbox;           /* what the tick sends, per peer */
    ghost_order *ghost_order; /* the incarnation books (haunt.c applies them) */
    ghost_route *route;       /* where departed reals went (ghost_route.c) */
    mailbox *mailbox;         /* this cellapp's streams to other entities */
    base_mailbox *bases;      /* calls to entities' bases (cellapp_call_base) */
    uint64_t base_calls, base_calls_failed;
    id_map pending_offloads;    /* entity id -> offload_pending (offload.c) */
    entity_timer_ids timer_ids; /* every cell's timers take their ids here */
    id_map ghost_moves;         /* cellapp id -> this tick's moves for it (haunt.c) */
    cellapp_counters counters;
    cellapp_load load;
    balancer *balancer;   /* NULL when balancing is off */
    cellapp_admin *admin; /* the admin HTTP listener's part (NULL: admin_port -1) */
    bool draining;        /* SIGTERM: the cells go elsewhere, then the process stops */
    uint64_t drain_started_us;
    int exit_code;
    id_block *ids;                        /* entity ids for what the game spawns */
    game_host *game;                      /* the game module (never NULL once running) */
    entity_io *io;                        /* the queue of entity I/O events (entity_io.h) */
    struct cellapp_map_claim *map_claims; /* per mapped space: who spawns its entities (map_entities.c) */
    size_t map_claim_count;
    struct cellapp_navmesh { /* each mapped space's navigation mesh (settings.maps) */
        char space[SPACE_LAYOUT_NAME_MAX];
        navmesh *mesh;
    } * navmeshes;
    size_t navmesh_count;
    game_host *game_loading; /* while the module's cell_init runs */
};

/* cellapp.c: what peers ask of the cellapp, and the tick. */
void cellapp_on_peer_up(peer_set *set, uint64_t process_id, peer_role role, void *user_data);
void cellapp_on_peer_down(peer_set *set, uint64_t process_id, peer_role role, const char *reason, void *user_data);
void cellapp_on_message(peer_set *set, uint64_t process_id, peer_role role,
                        const Tessera__Cluster__PeerMessage *message, void *user_data);
/* Runs one simulation tick of every cell. */
void cellapp_tick(cellapp *app);
/* The navigation mesh of space `space` (NULL: it has no map). */
const navmesh *cellapp_navmesh_of(const cellapp *app, const char *space);
/* Builds (or loads) the mesh of every space in settings.maps. Returns 0,
 * or -1 with why in err. */
int cellapp_load_navmeshes(cellapp *app, char *err, size_t errlen);
void cellapp_free_navmeshes(cellapp *app);
/* A pseudo-random number in [0, 1) (spawn points: spread, not secrecy). */
double cellapp_random_unit(cellapp *app);
/* Creates a real of class `cls` in cell `c` at a position (checked by the
 * caller), incarnation 1, and announces it (ghost books, directory). NULL
 * if the id is taken. */
cell_entity *cellapp_create_real(cellapp *app, cell *c, uint64_t id, const entity_def_class *cls, float x, float y,
                                 float z, float yaw, uint64_t baseapp_id);
/* Destroys a real: its haunts delete their ghosts, the directory forgets
 * it. Idempotent. */
void cellapp_destroy_real(cellapp *app, cell_entity *entity);
/* Asks the baseapp of real `entity` to drop its client, which broke the
 * rules; the cell entity goes when the baseapp destroys it. */
void cellapp_drop_client(cellapp *app, const cell_entity *entity, Tessera__Client__ErrorCode code, const char *reason);
/* Calls method `method_name` (of class `class_name`, part BASE, or CLIENT:
 * through the base to its client) of entity `target_id`'s base, wherever it
 * is, for `caller_id`, with `args` (a state of the method's args_class;
 * NULL: none). Returns 0 (a failure comes back, logged and counted), or -1
 * when there is no such method. */
int cellapp_call_base(cellapp *app, uint64_t caller_id, uint64_t target_id, const char *class_name,
                      entity_def_part part, const char *method_name, const entity_state *args);
base_mailbox *cellapp_base_mailbox_create(cellapp *app);
/* Tells baseapp `baseapp_id` how entity `entity_id`'s cell part came out:
 * made (entity, with what its client needs) or refused (entity NULL,
 * `error`). Also the answer to a ClientBinding that attaches a client. */
void cellapp_reply_created(cellapp *app, uint64_t baseapp_id, uint64_t entity_id, const cell_entity *entity,
                           const char *error);

/* haunt.c: where each real's ghosts live, and the ghost protocol. */
/* Once per tick, after the witnesses: brings every real's haunts up to
 * date (creates, keeps, deletes ghosts) and queues its ghost update. */
void haunt_tick(cellapp *app, cell *c);
/* A GhostMoves from cellapp `peer`: each entry as a GhostUpdate. */
void haunt_on_moves(cellapp *app, uint64_t peer, const Tessera__Cluster__GhostMoves *moves);
/* Frees the per-peer buffers of moves. */
void haunt_free(cellapp *app);
/* A GhostMessage from cellapp `peer` (encoded in `item`, kept if held). */
void haunt_on_message(cellapp *app, uint64_t peer, const Tessera__Cluster__GhostMessage *message, const uint8_t *item,
                      size_t item_length);
/* Queues a ghost message for cellapp `peer`, in order after everything
 * queued for it before. */
void haunt_send(cellapp *app, uint64_t peer, const Tessera__Cluster__GhostMessage *message);
/* Queues the delete of `entity`'s ghost on `peer` (destroyed: the entity
 * is gone, not only out of reach). */
void haunt_send_delete(cellapp *app, const cell_entity *entity, uint64_t peer, bool destroyed);
/* Queues a ghost create of `entity` (a real) for `peer` and adds it to the
 * haunts. */
void haunt_add(cellapp *app, cell_entity *entity, uint64_t peer);
/* Queues the delete of every ghost of a real that is being destroyed. */
void haunt_destroyed(cellapp *app, cell_entity *entity);
/* A copy of a CellItem from `peer` for the incarnation books to hold
 * (freed with free). */
void *haunt_hold_item(uint64_t peer, const uint8_t *item, size_t length);
/* Replays held ghost messages that have become applicable for entity_id
 * (after an offload arrived, or a peer went down). */
void haunt_release(cellapp *app, uint64_t entity_id);
/* Cellapp `peer` is gone: its ghosts here move on or are dropped, and it
 * leaves every haunt list. */
void haunt_peer_down(cellapp *app, uint64_t peer);
/* Counts reals with no ghost anywhere (the interior) and ghosts held. */
void haunt_count(const cellapp *app, size_t *interior_reals, size_t *reals, size_t *ghosts);

/* offload.c: reals moving between cellapps. */
/* Once per tick, after haunt_tick: every real whose position lies in
 * another cell (past the margin) moves there. */
void offload_tick(cellapp *app, cell *c);
/* Moves real `entity` to `target` now (a teleport, a line moved). */
void offload_send(cellapp *app, cell_entity *entity, uint64_t target);
/* An Offload from `peer`, encoded in `item` (kept if the books hold it). */
void offload_on_offload(cellapp *app, uint64_t peer, const Tessera__Cluster__Offload *offload, const uint8_t *item,
                        size_t item_length);
/* An Offload released from the ghost books: restores it (decoded from the
 * held CellItem). */
void offload_apply(cellapp *app, uint64_t peer, const Tessera__Cluster__Offload *offload);
void offload_on_ack(cellapp *app, uint64_t peer, const Tessera__Cluster__OffloadAck *ack);
/* Cellapp `peer` is gone: reals sent to it and not acknowledged come back. */
void offload_peer_down(cellapp *app, uint64_t peer);
/* Moves `entity` (a real) to (x, y, z) in space `space_name` (NULL: its
 * own): here if the point is in this cell, else to the cell that holds it,
 * on whichever cellapp. Returns 0, or -1 with why in err (an unknown space,
 * a point in no cell: the entity stays where it is). */
int offload_teleport(cellapp *app, cell_entity *entity, const char *space_name, float x, float y, float z, float yaw,
                     char *err, size_t errlen);
void offload_free(cellapp *app);

/* cell_entity_codec.c: an entity's whole cell state, as one message. */
/* Fills `out` with everything `entity` (a real) is; arrays allocated (free
 * with cell_entity_saved_free). */
void cell_entity_save(cellapp *app, const cell_entity *entity, Tessera__Cluster__CellEntityState *out);
void cell_entity_saved_free(Tessera__Cluster__CellEntityState *state);
/* Makes `entity` (a ghost here, or a new entity) the real that `state`
 * describes. Returns 0, or -1 with why in err (the entity is then left a
 * ghost). */
int cell_entity_restore(cellapp *app, cell *c, cell_entity *entity, const Tessera__Cluster__CellEntityState *state,
                        char *err, size_t errlen);

/* ghost_route.c: where departed reals went. */
ghost_route *ghost_route_create(void);
void ghost_route_free(ghost_route *route);
/* Real `entity_id` left for `cellapp_id`: remember it until `until_ms`. */
void ghost_route_add(ghost_route *route, uint64_t entity_id, uint64_t cellapp_id, uint64_t until_ms);
/* Where `entity_id` went, or 0 if not remembered (or expired). */
uint64_t ghost_route_find(ghost_route *route, uint64_t entity_id, uint64_t now_ms);
void ghost_route_remove(ghost_route *route, uint64_t entity_id);
void ghost_route_expire(ghost_route *route, uint64_t now_ms);
size_t ghost_route_count(const ghost_route *route);

/* cell_message.c: messages to entities' cell parts (CellMessage). */
/* A CellMessage from `peer` (a baseapp, or a cellapp forwarding): delivers
 * it in its stream's order to the real here, forwards it to the real
 * elsewhere, or fails it back to its sender. */
void cell_message_on_message(cellapp *app, uint64_t peer, peer_role role, const Tessera__Cluster__CellMessage *message);
/* Delivers held messages whose gap waited too long (every tick). */
void cell_message_tick(cellapp *app, cell *c);
/* Runs cell method `method` of `target` with `args` (a state of its
 * args_class) on behalf of `caller_id` (0: the server): here when the
 * target is a real here, else through the mailbox. */
void cell_message_call(cellapp *app, cell_entity *target, const entity_def_method *method, uint64_t caller_id,
                       const entity_state *args);
/* Calls client method `method` of `entity` on its own client only, or on
 * every client that sees it (its own included), across cellapps. */
void cell_message_call_client(cellapp *app, cell_entity *entity, const entity_def_method *method,
                              const entity_state *args, bool every_observer);

/* state_dump.c: every real's state to settings.state_dump_path as JSON. */
int state_dump_write(const cellapp *app);

/* ---- load (cell_load.c) ----------------------------------------------------------
 * cell_load_start before the loop runs (turns on libuv's idle time);
 * cell_load_sample once a tick; transient work is timed with
 * cell_load_transient_begin/end around it. cell_load_report fills a cell's
 * balance report: its share of the load (by its reals' work: each counts
 * one plus the entities its client sees) and its entity bound levels. */
void cell_load_start(cellapp *app);
void cell_load_sample(cellapp *app, uint64_t now_us);
static inline uint64_t cell_load_transient_begin(void) { return clock_monotonic_us(); }
void cell_load_transient_end(cellapp *app, uint64_t began_us);
void cell_load_report(const cellapp *app, const cell *c, balance_cell_report *out);

/* ---- the balancer (balancer.c) ---------------------------------------------------
 * Created after the registry; balancer_tick once a tick does what is due:
 * publishing this cellapp's report, the lease, and, while this cellapp
 * holds the lease, the decisions for every space. balancer_stop gives the
 * lease up and withdraws the report (a stopping cellapp). */
balancer *balancer_create(cellapp *app);
void balancer_free(balancer *b);
void balancer_tick(balancer *b, uint64_t now_us);
void balancer_stop(balancer *b);
/* A draining cellapp stops standing for the lease (and lets it go now if
 * it holds it), but keeps reporting. */
void balancer_give_up_lease(balancer *b);
bool balancer_is_leader(const balancer *b);

/* ---- the admin listener (cellapp_admin.c; process_admin.h has the common
 * routes) --------------------------------------------------------------------- */
struct registry;
cellapp_admin *cellapp_admin_start(cellapp *app, char *err, size_t errlen);
void cellapp_admin_publish(cellapp_admin *admin, struct registry *reg);
void cellapp_admin_stop(cellapp_admin *admin);
/* Drain, as SIGTERM asks (main.c): with no balancer or no other cellapp,
 * stop at once. */
void cellapp_begin_drain(cellapp *app);
typedef struct balancer_figures {
    bool leader;
    uint64_t holder; /* the lease's holder last seen */
    uint64_t passes, line_moves, cell_changes, writes_refused;
} balancer_figures;
void balancer_stats(const balancer *b, balancer_figures *out);

#endif
