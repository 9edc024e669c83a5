/* redis_keys.h -- every Redis key a Tessera cluster uses, named in one place.
 *
 * Every key starts with the cluster's prefix P = "tessera:<cluster_name>:",
 * so several clusters can share one Redis. The keys:
 *
 *   P next_process_id        INCR'd once by each starting process for its id
 *   P processes              SET of the ids of registered processes
 *   P process:<id>           HASH a process's registry entry, with a TTL:
 *                            its lease (registry.h)
 *   P dead                   ZSET the ids the balancer's lease holder
 *                            declared dead, by the wall ms of the decision
 *                            (common/peer_set.h); kept an hour
 *   P next_entity_id         INCRBY'd for blocks of entity ids (id_block.h)
 *   P account:<name>         HASH an account (baseapp/login.c)
 *   P entity:<class>:<name>  STRING an entity's persistent state, JSON
 *                            (baseapp/persistence.c); a player's is named
 *                            by its account
 *   P base_directory         HASH entity id -> the baseapp holding its base
 *                            (common/base_mailbox.h)
 *   P globals                HASH name -> entity id of a global base
 *                            (registerGlobally)
 *   P session:<account>      STRING "<baseapp id>:<claims>": the baseapp
 *                            holding the account's session, claimed
 *                            atomically (baseapp/session_directory.h)
 *   P login_token:<token>    STRING "login:<baseapp id>:<maker>:<account>"
 *                            (a redirected login's one-time token, good
 *                            at that baseapp) or "handover:<entity id>:
 *                            <maker>:<account>" (a giveClientTo's), with
 *                            a TTL; taken once, by its account only
 *   P spaces                 HASH space name -> the epoch of its layout
 *   P space:<name>           STRING the space's definition and layout, as JSON
 *                            (space_layout.h); written only with its epoch
 *                            in P spaces, atomically (space_store.h)
 *   P cell_directory         HASH entity id -> "<cellapp id>:<incarnation>",
 *                            where each entity's cell part is real
 *                            (mailbox.h); a restore claims an entry of a
 *                            dead cellapp (mailbox_directory_claim)
 *   P balancer_lease         STRING "<cellapp id>:<fence>", with a TTL: which
 *                            cellapp runs the balancer (lease.h)
 *   P balancer_fence         STRING the newest lease's fence (INCR'd per
 *                            lease); layouts of older fences are refused
 *   P cell_loads             HASH cellapp id -> its load report, JSON
 *                            (cellapp/balancer.c)
 *   P space_map:<space>      STRING the cellapp that spawned the space's map
 *                            entities (SET NX), with a TTL its cellapps
 *                            renew while they run (cellapp/map_entities.h)
 *   P entity_name:<name>     SET the ids of the entities named <name>, for
 *                            entity I/O across cellapps (cellapp/io_route.h)
 *   P cell_backups:<id>      HASH entity id -> packed CellEntityState: cellapp
 *                            <id>'s backups of its reals without a base
 *                            (NPCs, map entities), restored by the others if
 *                            it dies (cellapp/cell_snapshot.h, restore.h)
 *
 * Each function writes the key into `out` (REDIS_KEY_MAX bytes) and returns
 * `out`, so a call can be an argument. A name too long is cut at
 * REDIS_KEY_MAX - 1 bytes; cluster and space names are at most 63.
 */
#ifndef TESSERA_REDIS_KEYS_H
#define TESSERA_REDIS_KEYS_H

#include <stdint.h>

#define REDIS_KEY_MAX 192

char *redis_key_next_process_id(char *out, const char *cluster);
char *redis_key_processes(char *out, const char *cluster);
char *redis_key_process(char *out, const char *cluster, uint64_t process_id);
char *redis_key_dead(char *out, const char *cluster);
char *redis_key_next_entity_id(char *out, const char *cluster);
char *redis_key_account(char *out, const char *cluster, const char *account);
char *redis_key_stored_entity(char *out, const char *cluster, const char *class_name, const char *name);
char *redis_key_session(char *out, const char *cluster, const char *account);
char *redis_key_base_directory(char *out, const char *cluster);
char *redis_key_globals(char *out, const char *cluster);
char *redis_key_login_token(char *out, const char *cluster, const char *token);
char *redis_key_spaces(char *out, const char *cluster);
char *redis_key_space(char *out, const char *cluster, const char *space_name);
/* The cellapp that spawned the entities of a space's map (SET NX). */
char *redis_key_space_map(char *out, const char *cluster, const char *space_name);
/* The set of the ids of the entities named `name` (cellapp/io_route.h). */
char *redis_key_entity_name(char *out, const char *cluster, const char *name);
char *redis_key_cell_directory(char *out, const char *cluster);
char *redis_key_balancer_lease(char *out, const char *cluster);
char *redis_key_balancer_fence(char *out, const char *cluster);
char *redis_key_cell_loads(char *out, const char *cluster);
/* P cell_backups:<cellapp id>: that cellapp's backups of the reals without
 * a base (entity id -> packed CellEntityState). */
char *redis_key_cell_backups(char *out, const char *cluster, uint64_t cellapp_id);

#endif
