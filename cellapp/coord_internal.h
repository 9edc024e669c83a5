/* coord_internal.h -- what the coord_*.c files share and nothing else may
 * use: the system's layout and the helpers between the axes (coord.c), the
 * watchers' pair tables (coord_watcher.c) and the queries (coord_query.c). */
#ifndef TESSERA_COORD_INTERNAL_H
#define TESSERA_COORD_INTERNAL_H

#include "coord.h"
#include "log.h"

#define COORD_MAX_AXES 3
#define COORD_INDEX_MASK 0x3FFFFFFFu /* 30 bits of index in a node key */
/* Pair-table entries keep the entity id in 27 bits beside 5 flag bits. */
#define COORD_MAX_ENTITIES 0x07FFFFF0u

enum { COORD_KIND_LOWER = 0, COORD_KIND_ENTITY = 1, COORD_KIND_UPPER = 2 };

/* Per-trigger flags. Trigger 2w is watcher w's one trigger: of extent r
 * for a trap, r + h for a view with hysteresis (2w+1 is spare). */
enum {
    COORD_TRIGGER_ACTIVE = 1,  /* has nodes in the axes, or is queued for them */
    COORD_TRIGGER_PENDING = 2, /* queued: in no axis yet */
};

/* Pair bits in a watcher's table. */
enum {
    COORD_PAIR_INNER = 1,   /* traps: inside the trigger now (equal to OUTER) */
    COORD_PAIR_OUTER = 2,   /* inside the trigger now */
    COORD_PAIR_VIEW = 4,    /* in the view as of the last flush */
    COORD_PAIR_TOUCHED = 8, /* on the watcher's touched list */
    COORD_PAIR_LISTED = 16, /* on the watcher's candidate list (checked by distance at the flush) */
};

/* One node of an axis: its sort key, and the node's range on the axis's
 * partner (X's partner is Z; Z's and Y's is X) -- an entity's coordinate
 * twice, or a trigger's bounds. Carrying the partner range in the node lets
 * a crossing be decided from the two nodes alone, without touching the
 * entity or trigger records, which are elsewhere in memory. */
typedef struct coord_node {
    uint64_t key;
    float low, high;
} coord_node;

typedef struct coord_axis {
    coord_node *nodes; /* sorted by key */
    size_t count, capacity;
} coord_axis;

/* A membership flip waiting to be applied: crossings only log them; the
 * flush sorts the log by watcher and applies each watcher's flips while its
 * table is hot in the cache. */
typedef struct coord_flip {
    uint32_t trigger;
    uint32_t entity;
} coord_flip;

typedef struct coord_entity_record {
    void *user_data;
    uint32_t type, flags;
    uint32_t next_free;
    uint8_t live;
    uint8_t pending; /* added but not yet merged into the axes */
    uint8_t dirty;   /* moved; its nodes follow at the next settle */
} coord_entity_record;

/* What a batch of moves needs of a watcher, packed apart from its record
 * (which it would otherwise miss in the cache once per moved owner and
 * axis): the next watcher of the same owner, and its trigger's reach. */
typedef struct coord_watcher_link {
    uint32_t next_owned; /* COORD_NONE at the end of the owner's list */
    float reach;         /* extent, plus hysteresis for a view that has it */
} coord_watcher_link;

typedef struct coord_watcher_record {
    coord_watcher_callbacks callbacks;
    void *user_data;
    uint32_t owner;
    uint32_t next_free;
    float extent, hysteresis;
    /* The pairs (coord_watcher.c, "pair tables"): a sparse open-addressing
     * table of (entity + 1) << 5 | bits, or, for a crowd's view, a dense
     * one of a byte of bits per entity id (then `table` is NULL). */
    uint32_t *table;
    uint32_t table_capacity; /* power of two, or 0 */
    uint32_t table_used;     /* pairs held, in either table */
    uint8_t *dense;
    uint32_t dense_length; /* ids the dense table covers */
    uint32_t view_count;
    uint32_t *touched; /* entities whose bits changed since the flush */
    uint32_t touched_count, touched_capacity;
    /* Entities whose distance is checked at each flush: with hysteresis,
     * those inside the trigger but not (yet) in view; for a round shape,
     * every one inside the trigger (the square). May hold stale ids. */
    uint32_t *candidates;
    uint32_t candidate_count, candidate_capacity;
    uint32_t candidate_epoch; /* move epoch at the last candidate check */
    uint8_t live;
    uint8_t queued; /* on the system's touched-watcher list */
    uint8_t dual;   /* has hysteresis: enters are decided at the flush */
    uint8_t shape;  /* coord_shape; a round one (never dual) decides enters and leaves at the flush */
} coord_watcher_record;

struct coord_scan_job; /* coord_scan.c */

struct coord_system {
    int axis_count; /* 2: X and Z; 3: X, Z, Y. Axis 0 is X, 1 is Z, 2 is Y */
    coord_axis axes[COORD_MAX_AXES];

    coord_entity_record *entities;
    float *entity_coord[COORD_MAX_AXES]; /* committed coordinate per axis (and a 2D system's Y) */
    uint32_t *entity_hint[COORD_MAX_AXES];
    float *entity_target[COORD_MAX_AXES];   /* where a dirty entity is going */
    uint32_t *entity_moved_epoch;           /* move epoch of the entity's last move */
    uint32_t *entity_first_watcher;         /* watchers an entity owns, linked by watcher_links */
    uint32_t move_epoch;                    /* counts batches of moves */
    uint32_t entity_count, entity_capacity; /* ids handed out so far, room */
    uint32_t free_entities_head;
    size_t live_entities;

    coord_watcher_record *watchers;
    coord_watcher_link *watcher_links;
    float *trigger_low[COORD_MAX_AXES]; /* committed bounds per trigger */
    float *trigger_high[COORD_MAX_AXES];
    uint32_t *trigger_hint[COORD_MAX_AXES]; /* [2t] lower, [2t+1] upper */
    uint8_t *trigger_flags;
    uint32_t watcher_count, watcher_capacity;
    uint32_t free_watchers_head;
    size_t live_watchers;
    float max_trigger_span[COORD_MAX_AXES]; /* widest trigger ever, per axis */

    /* Batched additions. */
    uint32_t *pending_entities;
    size_t pending_entity_count, pending_entity_capacity;
    uint32_t *pending_triggers;
    size_t pending_trigger_count, pending_trigger_capacity;
    coord_node *pending_keys[COORD_MAX_AXES];
    size_t pending_key_capacity[COORD_MAX_AXES];
    struct coord_open_trigger *sweep_open;
    uint32_t *sweep_open_position;
    size_t sweep_capacity;

    /* Entities moved since the last settle, and the order they go in. */
    uint32_t *dirty, *dirty_order;
    size_t dirty_count, dirty_capacity;

    /* Ids freed since the last flush: reusable once it has reported them. */
    uint32_t *dead_entities;
    size_t dead_entity_count, dead_entity_capacity;
    uint32_t *dead_watchers;
    size_t dead_watcher_count, dead_watcher_capacity;

    /* Flips logged since they were last applied, and the sort's buffers. */
    coord_flip *flips, *flips_sorted;
    size_t flip_count, flip_capacity, flips_sorted_capacity;
    size_t flip_recent_peak; /* most flips applied at once during this flush */
    uint32_t *flip_bucket;   /* per watcher: start of its run in flips_sorted */
    size_t flip_bucket_capacity;

    /* Watchers with touched pairs, and the flush's working copy. */
    uint32_t *touched_watchers;
    size_t touched_watcher_count, touched_watcher_capacity;
    uint32_t *flush_watchers;
    size_t flush_watcher_capacity;
    int flushing;
    int geometry_changed; /* something moved or a range changed since the last flush */

    /* Scan mode (coord_scan.c). */
    uint8_t scanning;                      /* the axes hold entities alone; flushes scan */
    coord_mode mode_setting;               /* what coord_set_mode asked for */
    float *entity_scanned[COORD_MAX_AXES]; /* per entity: where the last scan saw it (NaN: none did) */
    float *scan_now[COORD_MAX_AXES];       /* a scan's entities in X order: positions now ... */
    float *scan_was[COORD_MAX_AXES];       /* ... and at the last scan */
    uint32_t *scan_id;                     /* ... and their ids */
    uint32_t *scan_changed;                /* a watcher's scan: the positions that changed sides */
    /* The scan's kernel for this CPU (coord_scan.c), picked at the first scan. */
    size_t (*scan_kernel)(const struct coord_scan_job *job, uint32_t *changed, size_t *changed_count);
    size_t scan_capacity;
    uint64_t choice_swaps, choice_scanned; /* the stats at the last choice of mode */
    int choice_streak;                     /* flushes running that favoured the other mode */

    coord_stats stats;
};

/* coord.c */
uint64_t coord__key(float value, unsigned kind, uint32_t index);
uint32_t coord__locate(const coord_system *cs, int axis, uint64_t key, uint32_t hint);
size_t coord__lower_bound(const coord_system *cs, int axis, uint64_t key);
void coord__apply_pending(coord_system *cs);
/* Brings the axes up to date: queued additions and deferred moves. */
void coord__settle(coord_system *cs);
void coord__queue_trigger(coord_system *cs, uint32_t trigger);
void coord__delete_trigger_nodes(coord_system *cs, uint32_t trigger);
void coord__place_trigger(coord_system *cs, uint32_t trigger, const float *centre, float extent);
void coord__reserve_watchers(coord_system *cs, uint32_t wanted);
void coord__recycle_entities(coord_system *cs);

/* Logs a flip of (trigger, entity); applied by coord__apply_flips. */
static inline void coord__log_flip(coord_system *cs, uint32_t trigger, uint32_t entity);

/* Where entity e is as of the last settle, in world order (x, y, z): what
 * the round shapes test, whatever moves are pending. */
static inline void coord__settled_position(const coord_system *cs, uint32_t e, float *position) {
    position[0] = cs->entity_coord[0][e];
    position[1] = cs->entity_coord[2][e]; /* a 2D system keeps Y there too */
    position[2] = cs->entity_coord[1][e];
}

/* After a flush: keeps the mode, or changes it (coord.h, "Modes"). */
void coord__choose_mode(coord_system *cs);

/* coord_scan.c */
/* Scan mode: logs the flips of every watcher since the last scan. */
void coord__scan(coord_system *cs);
/* Scan mode: logs the flips of an entity being removed, from its last scan. */
void coord__scan_forget_entity(coord_system *cs, uint32_t e);
/* The mode the work measured since the last choice asks for (swaps of
 * crossing mode, tests of scan mode): COORD_MODE_AUTO to keep the one in
 * use. Counts the flushes running that favoured the other in cs. */
coord_mode coord__scan_advice(coord_system *cs, uint64_t swaps, uint64_t tested);
void coord__scan_free(coord_system *cs);

/* coord_query.c */
/* The round part of a shape's rule (coord.h, "Shape"): whether `point` is
 * within `radius` of `centre` (world order), on the ground for a circle, in
 * 3D for a sphere; always true for a box, which is its square alone. */
bool coord__within_round(coord_shape shape, const float *centre, const float *point, float radius);

/* coord_watcher.c */
void coord__apply_flips(coord_system *cs);
void coord__place_watcher(coord_system *cs, uint32_t watcher);
void coord__watcher_release(coord_system *cs, uint32_t watcher);
size_t coord__watcher_table_bytes(const coord_system *cs);

/* Doubles the flip log (inline: coord_scan.c logs flips and calls nothing
 * of the other coord files). */
static inline void coord__grow_flip_log(coord_system *cs) {
    cs->flip_capacity = cs->flip_capacity ? cs->flip_capacity * 2 : 4096;
    cs->flips = xrealloc(cs->flips, cs->flip_capacity * sizeof *cs->flips);
}

static inline void coord__log_flip(coord_system *cs, uint32_t trigger, uint32_t entity) {
    if (cs->flip_count == cs->flip_capacity) coord__grow_flip_log(cs);
    cs->flips[cs->flip_count].trigger = trigger;
    cs->flips[cs->flip_count].entity = entity;
    cs->flip_count++;
}

#endif
