/* base_entity.h -- the base part of an entity, as every base has it: its
 * id, class and properties (an entity_state of its class, of which the
 * base holds the on_base ones), where its cell part is, and what
 * persistence keeps of it. A base holds no socket: a base that may hold a
 * client has a proxy part (proxy.h) hanging off it, as a real's part hangs
 * off a cell entity on the cellapp. A global base (the demo's Census) is a
 * plain base_entity.
 *
 * The bases of one baseapp live in a base_entities set, by handle (game
 * code and callbacks keep handles, never pointers across a callback), by
 * entity id, and by class (an index per class, for the game's
 * find_by_class).
 */
#ifndef TESSERA_BASE_ENTITY_H
#define TESSERA_BASE_ENTITY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bit_stream.h"
#include "cell_address.h"
#include "cluster.pb-c.h"
#include "entity_def.h"
#include "entity_list.h"
#include "entity_state.h"

typedef struct proxy proxy;
typedef struct base_entities base_entities;

typedef enum base_entity_state {
    BASE_ENTITY_CREATING_CELL, /* a cellapp is creating its cell part */
    BASE_ENTITY_LIVE,          /* whole: its cell part exists (cell holds the address), or it has none */
    BASE_ENTITY_DESTROYING,    /* going: its last cell backup, then its last write, then freed */
} base_entity_state;

/* What persistence.c keeps of a base between its writes. */
typedef struct base_persistence {
    bool loaded;         /* it was stored before (a restored entity) */
    char space_name[64]; /* where the last backup had the cell part */
    double position[3];
    float yaw;
    bool has_position;
    uint64_t backup_request; /* the BackupRequest waited for (0: none) */
    uint64_t backup_deadline_us;
    bool write_in_flight;
    bool write_again;        /* asked to write while a write was in flight */
    uint32_t write_failures; /* in a row */
    uint64_t retry_at_us;    /* after a failure: when to write again */
    uint64_t next_autosave_us;
    uint64_t writes; /* acknowledged */
} base_persistence;

/* The longest name a base is stored under (an account name fits). */
#define BASE_ENTITY_NAME_MAX 71

typedef struct base_entity {
    base_entities *set;   /* the set it is in */
    entity_handle handle; /* this base in its set; stale once it is freed */
    base_entity_state state;
    uint64_t entity_id;
    /* The key it is stored under: a player's account, or the key game code
     * made it for (create_base, load_base). */
    char name[BASE_ENTITY_NAME_MAX + 1];
    const entity_def_class *cls;
    entity_state *properties;
    /* Where its cell part is (cellapp and incarnation), and the order its
     * client hears from it in (cell_address.h). cell.cellapp_id is the
     * cellapp asked to create it while CREATING_CELL. */
    cell_address cell;
    base_persistence persistence;
    bool loading; /* game code is loading a base for it (load_base): one at a time */
    /* Its cell part's latest backup (CellSnapshot: a packed
     * CellEntityState), what it is restored from if its cellapp dies, and
     * the restore asked for (cell_link.c). */
    struct base_cell_backup {
        uint8_t *state; /* NULL: none yet */
        size_t length;
        uint32_t incarnation;
        uint64_t saved_wall_us;
        uint64_t restore_asked_us; /* monotonic; 0: no restore waiting */
        uint64_t restore_dead;     /* the dead cellapp it is restored from */
    } backup;
    proxy *proxy; /* its client part; NULL for a base that has never held a client */
    /* Restored here from a dead baseapp's backup (base_backup.h): its cell
     * part is asked to answer to this baseapp (BaseMoved), again each
     * second until it does (base_life_sweep); 0 once it has. */
    uint64_t adopting_dead_baseapp;
    uint64_t adopting_cellapp; /* where the backup had its cell part */
    uint64_t adopt_asked_us;   /* monotonic, the last ask */
    uint32_t adopt_asks;
} base_entity;

/* A set of at most `max_bases` bases. */
base_entities *base_entities_create(uint32_t max_bases);
/* Frees the set; the bases in it must have been freed. */
void base_entities_free(base_entities *set);

/* A new base of `cls` for entity `entity_id`, stored under `name`, with its
 * properties at their defaults (`name` is the storage key, never a
 * property: a property "name" stays at its default), CREATING_CELL when
 * its class has a cell part, else LIVE. NULL when the set is full. */
base_entity *base_entities_add(base_entities *set, uint64_t entity_id, const entity_def_class *cls, const char *name);
/* Takes `base` out of the set and frees it (its properties and its cell
 * address). Its proxy part must be gone. */
void base_entities_remove(base_entities *set, base_entity *base);

/* What serves game code for these bases (the game host), so that a base
 * handed to game code leads back to it. */
void base_entities_set_host(base_entities *set, void *host);
void *base_entities_host(const base_entities *set);

base_entity *base_entities_find(const base_entities *set, uint64_t entity_id);
/* NULL for a stale handle. */
base_entity *base_entities_get(const base_entities *set, entity_handle handle);
/* Iterates: *cursor = 0 to start; NULL at the end. The base returned may
 * be removed before the next call. */
base_entity *base_entities_next(const base_entities *set, uint32_t *cursor);
size_t base_entities_count(const base_entities *set);
/* The live bases (not being destroyed) of class `cls`: up to `max` entity
 * ids in `out` (may be NULL); returns how many there are. Walks the class's
 * own index, never the whole set. */
size_t base_entities_of_class(const base_entities *set, const entity_def_class *cls, uint64_t *out, size_t max);

/* A base game code and peers may act on: not NULL and not being destroyed. */
static inline bool base_entity_is_live(const base_entity *base) {
    return base && base->state != BASE_ENTITY_DESTROYING;
}

/* Keeps `snapshot` as the base's cell backup if it is newer than the one
 * kept (a later incarnation, or the same one taken later). Returns whether
 * it was kept. */
bool base_entity_keep_backup(base_entity *base, const Tessera__Cluster__CellSnapshot *snapshot);

/* Whether entities of `cls` have a cell part (a cell property or method). */
bool base_entity_class_has_cell(const entity_def_class *cls);

/* Appends the cell properties the base set (CreateCellEntity's
 * cell_properties), byte-aligned. */
void base_entity_cell_properties(const base_entity *base, bit_writer *w);

/* Encodes its BASE_AND_CLIENT properties for its own client into `w`, all
 * of them or the changed ones, and clears the base's dirty set. Returns
 * false (nothing written) when there are none. */
bool base_entity_client_properties(base_entity *base, bool all, bit_writer *w);

/* Writes every base's properties (what the base holds) to `path` as JSON.
 * Returns 0 or -1 (logged). */
int base_entity_dump(const base_entities *set, const char *path, uint64_t process_id);

#endif
