/* spaces.c -- the spaces this cellapp knows and its cells in them: polling
 * the layout epochs in Redis every tick (space_store.h), fetching a layout
 * whose epoch grew, checking it, and applying it whole at the start of the
 * next tick (a cell for the region the layout gives this cellapp, new
 * regions for the cells it has). A layout older than the one held is
 * ignored and logged. A layout that names a cellapp that is not up waits
 * until it is (a cellapp that has just started), and is logged as refused
 * if it stays that way. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "spaces.h"

#include "clock.h"
#include "id_map.h"
#include "log.h"
#include "redis_keys.h"

/* A layout whose owners are not all up after this long is reported (and
 * kept waiting): longer than a cellapp takes to start, register and
 * connect. */
#define SPACES_OWNER_WAIT_US ((uint64_t)5 * 1000 * 1000)

typedef struct spaces_space spaces_space;

struct spaces {
    spaces_context context;
    spaces_space **list; /* every space known, with its cell here if any */
    size_t count, capacity;
    bool polling;        /* an HGETALL of the epochs is in flight */
    id_map peer_layouts; /* cellapp id -> spaces_peer: what it applied */
};

struct spaces_space {
    char name[SPACE_LAYOUT_NAME_MAX];
    space_layout *layout;      /* applied; NULL until the first */
    space_layout *pending;     /* fetched, applied at the next tick */
    uint64_t pending_since_us; /* monotonic, when it was fetched */
    bool pending_reported;     /* "waits for cellapp N" logged */
    uint64_t fetching_epoch;   /* a GET is in flight for this epoch (0: none) */
    uint64_t ignored_epoch;    /* the older epoch last logged as ignored */
    cell *cell;                /* this cellapp's cell of the space, or NULL */
};

/* A fetch in flight. */
typedef struct spaces_fetch {
    spaces *s;
    char name[SPACE_LAYOUT_NAME_MAX];
    uint64_t epoch;
} spaces_fetch;

typedef struct spaces_peer spaces_peer;
static void spaces_peer_free(spaces_peer *known);
static void spaces_send_applied(spaces *s, uint64_t peer, const spaces_space *space);

static spaces_space *spaces_find(const spaces *s, const char *name) {
    for (size_t i = 0; i < s->count; i++)
        if (strcmp(s->list[i]->name, name) == 0) return s->list[i];
    return NULL;
}

static spaces_space *spaces_add(spaces *s, const char *name) {
    if (s->count == s->capacity) {
        s->capacity = s->capacity ? s->capacity * 2 : 4;
        s->list = xrealloc(s->list, s->capacity * sizeof(spaces_space *));
    }
    spaces_space *space = xcalloc(1, sizeof *space);
    snprintf(space->name, sizeof space->name, "%s", name);
    s->list[s->count++] = space;
    return space;
}

static uint64_t spaces_held_epoch(const spaces_space *space) {
    if (space->pending) return space->pending->epoch;
    return space->layout ? space->layout->epoch : 0;
}

static void spaces_on_layout(redis_client *redis, redisReply *reply, void *user_data) {
    spaces_fetch *fetch = user_data;
    (void)redis;
    spaces *s = fetch->s;
    spaces_space *space = s->context.self->stopping ? NULL : spaces_find(s, fetch->name);
    if (space && space->fetching_epoch == fetch->epoch) space->fetching_epoch = 0;
    if (!space || !reply || reply->type != REDIS_REPLY_STRING) {
        free(fetch);
        return;
    }
    char err[256];
    space_layout *layout = space_layout_from_json(reply->str, reply->len, err, sizeof err);
    if (!layout || space_layout_check(layout, err, sizeof err) != 0) {
        log_warn("space '%s': layout epoch %" PRIu64 " refused: %s", fetch->name, fetch->epoch, err);
        space_layout_free(layout);
    } else if (strcmp(layout->name, space->name) != 0) {
        log_warn("space '%s': the stored layout names space '%s': refused", space->name, layout->name);
        space_layout_free(layout);
    } else if (layout->epoch <= spaces_held_epoch(space)) {
        if (layout->epoch < spaces_held_epoch(space))
            log_info("space '%s': layout epoch %" PRIu64 " is older than the %" PRIu64 " held: ignored", space->name,
                     layout->epoch, spaces_held_epoch(space));
        space_layout_free(layout);
    } else {
        space_layout_free(space->pending);
        space->pending = layout;
        space->pending_since_us = clock_monotonic_us();
        space->pending_reported = false;
    }
    free(fetch);
}

static void spaces_on_epochs(redis_client *redis, redisReply *reply, void *user_data) {
    spaces *s = user_data;
    s->polling = false;
    if (s->context.self->stopping || !reply || reply->type != REDIS_REPLY_ARRAY) return;
    for (size_t i = 0; i + 1 < reply->elements; i += 2) {
        const redisReply *name = reply->element[i], *value = reply->element[i + 1];
        if (name->type != REDIS_REPLY_STRING || value->type != REDIS_REPLY_STRING) continue;
        if (name->len == 0 || name->len >= SPACE_LAYOUT_NAME_MAX) continue;
        uint64_t epoch = strtoull(value->str, NULL, 10);
        spaces_space *space = spaces_find(s, name->str);
        if (!space) space = spaces_add(s, name->str);
        uint64_t held = spaces_held_epoch(space);
        if (epoch < held) {
            if (space->ignored_epoch != epoch)
                log_warn("space '%s': Redis holds layout epoch %" PRIu64 ", older than the %" PRIu64
                         " this cellapp applied: ignored",
                         space->name, epoch, held);
            space->ignored_epoch = epoch;
            continue;
        }
        if (epoch == held || space->fetching_epoch >= epoch) continue;
        char key[REDIS_KEY_MAX];
        redis_key_space(key, s->context.cluster_name, space->name);
        spaces_fetch *fetch = xcalloc(1, sizeof *fetch);
        fetch->s = s;
        snprintf(fetch->name, sizeof fetch->name, "%s", space->name);
        fetch->epoch = epoch;
        const char *argv[] = {"GET", key};
        size_t lengths[] = {3, strlen(key)};
        if (redis_client_command_argv(redis, spaces_on_layout, fetch, 2, argv, lengths) != 0)
            free(fetch);
        else
            space->fetching_epoch = epoch;
    }
}

void spaces_poll(spaces *s) {
    if (s->polling || s->context.self->process_id == 0 || !redis_client_is_connected(s->context.redis)) return;
    char key[REDIS_KEY_MAX];
    redis_key_spaces(key, s->context.cluster_name);
    const char *argv[] = {"HGETALL", key};
    size_t lengths[] = {7, strlen(key)};
    if (redis_client_command_argv(s->context.redis, spaces_on_epochs, s, 2, argv, lengths) == 0) s->polling = true;
}

typedef struct spaces_owner_check {
    const spaces *s;
} spaces_owner_check;

static bool spaces_owner_is_up(uint64_t cellapp_id, void *context) {
    const spaces *s = ((spaces_owner_check *)context)->s;
    return cellapp_id == s->context.self->process_id || peer_set_is_up(s->context.peers, cellapp_id);
}

static void spaces_apply(spaces *s, spaces_space *space) {
    char err[256];
    spaces_owner_check check = {s};
    if (space_layout_check_owners(space->pending, spaces_owner_is_up, &check, err, sizeof err) != 0) {
        if (!space->pending_reported && clock_monotonic_us() - space->pending_since_us > SPACES_OWNER_WAIT_US) {
            log_warn("layout epoch %" PRIu64 " refused for now: %s", space->pending->epoch, err);
            space->pending_reported = true;
        }
        return;
    }
    space_layout *old = space->layout;
    space->layout = space->pending;
    space->pending = NULL;
    const space_layout_node *mine = space_layout_cell_of(space->layout, s->context.self->process_id);
    if (!space->cell && mine) {
        space->cell = cell_create(s->context.shared, space->layout);
    } else if (space->cell) {
        cell_set_layout(space->cell, space->layout);
    }
    if (mine) {
        space_layout_rect rect;
        space_layout_rect_of(space->layout, mine->cell_id, &rect);
        log_info("space '%s' epoch %" PRIu64 ": this cellapp holds cell %u (x %g .. %g, z %g .. %g)", space->name,
                 space->layout->epoch, mine->cell_id, rect.min_x, rect.max_x, rect.min_z, rect.max_z);
    } else {
        log_info("space '%s' epoch %" PRIu64 ": this cellapp holds no cell of it", space->name, space->layout->epoch);
    }
    space_layout_free(old);
    /* The other cellapps learn it in this tick's frame to them. */
    size_t cursor = 0;
    uint64_t peer;
    while ((peer = peer_set_next_up(s->context.peers, PEER_ROLE_CELLAPP, &cursor)) != 0)
        spaces_send_applied(s, peer, space);
}

void spaces_apply_pending(spaces *s) {
    for (size_t i = 0; i < s->count; i++)
        if (s->list[i]->pending) spaces_apply(s, s->list[i]);
}

cell *spaces_cell(spaces *s, const char *name, bool create) {
    spaces_space *space = name ? spaces_find(s, name) : NULL;
    if (!space) return NULL;
    if (!space->cell && create && space->layout) space->cell = cell_create(s->context.shared, space->layout);
    return space->cell;
}

const space_layout *spaces_layout(const spaces *s, const char *name) {
    const spaces_space *space = name ? spaces_find(s, name) : NULL;
    return space ? space->layout : NULL;
}

cell *spaces_next_cell(const spaces *s, size_t *cursor) {
    while (*cursor < s->count) {
        cell *c = s->list[(*cursor)++]->cell;
        if (c) return c;
    }
    return NULL;
}

const space_layout *spaces_next_layout(const spaces *s, size_t *cursor) {
    while (*cursor < s->count) {
        const space_layout *layout = s->list[(*cursor)++]->layout;
        if (layout) return layout;
    }
    return NULL;
}

const space_layout *spaces_next_newest_layout(const spaces *s, size_t *cursor) {
    while (*cursor < s->count) {
        const spaces_space *space = s->list[(*cursor)++];
        if (space->pending) return space->pending;
        if (space->layout) return space->layout;
    }
    return NULL;
}

void spaces_reap(spaces *s) {
    for (size_t i = 0; i < s->count; i++) {
        spaces_space *space = s->list[i];
        if (!space->cell || space->cell->has_region || space->cell->count > 0) continue;
        cell_free(space->cell);
        space->cell = NULL;
        log_info("space '%s': the cell here is empty and has no region: removed", space->name);
    }
}

spaces *spaces_create(const spaces_context *context) {
    spaces *s = xcalloc(1, sizeof *s);
    s->context = *context;
    id_map_init(&s->peer_layouts);
    return s;
}

void spaces_free(spaces *s) {
    if (!s) return;
    size_t cursor = 0;
    uint64_t id;
    void *value;
    while (id_map_next(&s->peer_layouts, &cursor, &id, &value)) spaces_peer_free(value);
    id_map_close(&s->peer_layouts);
    for (size_t i = 0; i < s->count; i++) {
        spaces_space *space = s->list[i];
        cell_free(space->cell);
        space_layout_free(space->layout);
        space_layout_free(space->pending);
        free(space);
    }
    free(s->list);
    free(s);
}

cell_entity *spaces_find_entity(const spaces *s, uint64_t entity_id) {
    for (size_t i = 0; i < s->count; i++) {
        cell_entity *entity = s->list[i]->cell ? cell_find(s->list[i]->cell, entity_id) : NULL;
        if (entity) return entity;
    }
    return NULL;
}

size_t spaces_real_count(const spaces *s) {
    size_t reals = 0;
    for (size_t i = 0; i < s->count; i++)
        if (s->list[i]->cell) reals += s->list[i]->cell->real_count;
    return reals;
}

/* ---- what the other cellapps know ------------------------------------------ */

typedef struct spaces_known {
    char name[SPACE_LAYOUT_NAME_MAX];
    uint64_t epoch;
} spaces_known;

struct spaces_peer {
    spaces_known *spaces;
    size_t count, capacity;
};

static void spaces_send_applied(spaces *s, uint64_t peer, const spaces_space *space) {
    Tessera__Cluster__LayoutApplied applied = TESSERA__CLUSTER__LAYOUT_APPLIED__INIT;
    applied.space_name = (char *)space->name;
    applied.epoch = space->layout->epoch;
    Tessera__Cluster__CellItem item = TESSERA__CLUSTER__CELL_ITEM__INIT;
    item.body_case = TESSERA__CLUSTER__CELL_ITEM__BODY_LAYOUT_APPLIED;
    item.layout_applied = &applied;
    outbox_to_cellapp(s->context.outbox, peer, &item);
}

void spaces_announce(spaces *s, uint64_t peer) {
    for (size_t i = 0; i < s->count; i++) {
        const spaces_space *space = s->list[i];
        if (!space->layout) continue;
        if (peer) {
            spaces_send_applied(s, peer, space);
            continue;
        }
        size_t cursor = 0;
        uint64_t each;
        while ((each = peer_set_next_up(s->context.peers, PEER_ROLE_CELLAPP, &cursor)) != 0)
            spaces_send_applied(s, each, space);
    }
}

void spaces_on_layout_applied(spaces *s, uint64_t peer, const Tessera__Cluster__LayoutApplied *applied) {
    if (!applied->space_name || !applied->space_name[0] || strlen(applied->space_name) >= SPACE_LAYOUT_NAME_MAX) return;
    spaces_peer *known = id_map_get(&s->peer_layouts, peer);
    if (!known) {
        known = xcalloc(1, sizeof *known);
        id_map_put(&s->peer_layouts, peer, known);
    }
    spaces_known *entry = NULL;
    for (size_t i = 0; i < known->count && !entry; i++)
        if (strcmp(known->spaces[i].name, applied->space_name) == 0) entry = &known->spaces[i];
    if (!entry) {
        if (known->count == known->capacity) {
            known->capacity = known->capacity ? known->capacity * 2 : 4;
            known->spaces = xrealloc(known->spaces, known->capacity * sizeof *known->spaces);
        }
        entry = &known->spaces[known->count++];
        snprintf(entry->name, sizeof entry->name, "%s", applied->space_name);
        entry->epoch = 0;
    }
    if (applied->epoch > entry->epoch) entry->epoch = applied->epoch;
    /* Reals near its cells may now give it ghosts, or move to it. */
    spaces_space *space = spaces_find(s, applied->space_name);
    if (space && space->cell) space->cell->layout_changed = true;
}

uint64_t spaces_peer_epoch(const spaces *s, uint64_t peer, const char *name) {
    const spaces_peer *known = id_map_get(&s->peer_layouts, peer);
    if (!known) return 0;
    for (size_t i = 0; i < known->count; i++)
        if (strcmp(known->spaces[i].name, name) == 0) return known->spaces[i].epoch;
    return 0;
}

uint64_t spaces_newest_peer_epoch(const spaces *s, const char *name) {
    uint64_t newest = 0;
    size_t cursor = 0;
    uint64_t peer;
    while ((peer = peer_set_next_up(s->context.peers, PEER_ROLE_CELLAPP, &cursor)) != 0) {
        uint64_t epoch = spaces_peer_epoch(s, peer, name);
        if (epoch > newest) newest = epoch;
    }
    return newest;
}

static void spaces_peer_free(spaces_peer *known) {
    if (!known) return;
    free(known->spaces);
    free(known);
}

void spaces_peer_down(spaces *s, uint64_t peer) { spaces_peer_free(id_map_remove(&s->peer_layouts, peer)); }
