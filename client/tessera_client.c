/* tessera_client.c -- one game client's side of the client wire: the hello
 * and login exchange, outgoing moves and method calls, and the table of
 * entities in view, kept up to date from the server's ViewUpdates (the
 * bit-packed entity stream, decoded by common/replication.c with positions
 * from common/volatile_codec.c) and BaseProperties. It owns its channel, the
 * entities in its table with their states, and the entity definitions
 * received at login; it does not own the loop, the player's walk, or the
 * decision to reconnect (it only carries a Reconnect through the
 * token-less redirects that answer it).
 *
 * The wire is documented once, in proto/client.proto and at the top of
 * common/replication.c. Input from the server is never trusted: a frame that
 * does not decode, carries no known body, arrives in the wrong state, holds a
 * non-finite number or a broken entity stream closes the client with
 * CLOSED_PROTOCOL; it never stops the process.
 *
 * Allocations on the hot path. A ViewUpdate is unpacked with a bump
 * allocator over a per-client arena (protobuf-c allocates per field, and the
 * stream field alone is one copy of the stream); the arena is rewound for
 * every frame and grows to the largest frame seen, so a client in steady
 * state allocates nothing per update: the event lists are reused arrays, the
 * stream decoder writes into states that exist, and call arguments land in a
 * state kept per client method. What may allocate: an entity entering when
 * no entity of its class that left is kept for reuse (the entity and its
 * state), a string property longer than ever before, the
 * first call of a client method, and a frame larger than any before (one
 * allocation to grow the arena, and one overflow chunk should the frame need
 * more than the estimate; see tessera_client__arena_alloc).
 */
#include "tessera_client.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bit_stream.h"
#include "channel.h"
#include "client.pb-c.h"
#include "entity_def.h"
#include "entity_state.h"
#include "frame.h"
#include "id_map.h"
#include "log.h"
#include "method_call.h"
#include "property_codec.h"
#include "replication.h"
#include "tls.h"
#include "volatile_codec.h"

/* Channel sizes for one player's connection. A ViewUpdate for a crowded
 * view (a few thousand enters) is well under 4 MiB; 1 MiB of unsent moves
 * means the server stopped reading, and 64 MiB means it is gone. */
#define TESSERA_CLIENT_MAX_FRAME_BYTES (4u << 20)
#define TESSERA_CLIENT_HIGH_WATER_BYTES (1u << 20)
#define TESSERA_CLIENT_WRITE_LIMIT_BYTES (64u << 20)

/* Field limits from client.proto. */
#define TESSERA_CLIENT_ACCOUNT_MAX 64
#define TESSERA_CLIENT_PASSWORD_MAX 128
#define TESSERA_CLIENT_HELLO_NAME_MAX 64

/* The alias table is 0..max_aliases-1 and max_aliases is at most 65536:
 * the server's alias tables are sized to that, and an alias then fits 16
 * bits. */
#define TESSERA_CLIENT_MAX_ALIASES 65536u

/* The arena grows in powers of two from this size (a ViewUpdate of a quiet
 * view is a few hundred bytes). */
#define TESSERA_CLIENT_ARENA_MIN_BYTES 4096u
/* What protobuf-c takes to unpack a frame of N bytes, as the arena guesses
 * it before the frame: a ViewUpdate takes a copy of its stream (about N)
 * plus a few small structs; 4N + 1 KiB leaves room for the calls. A frame of
 * thousands of tiny ClientCalls costs protobuf-c some 70 bytes per wire byte
 * (struct, pointer, scan slot); the overflow chunk (at least 16N) covers
 * realistic ones, and the rare frame beyond takes more chunks. */
#define TESSERA_CLIENT_ARENA_GUESS_FACTOR 4u
#define TESSERA_CLIENT_ARENA_GUESS_SLACK 1024u
#define TESSERA_CLIENT_ARENA_OVERFLOW_FACTOR 16u

/* BaseProperties that arrive before the player's entity entered are kept
 * until it does. The server sends them once after login, then as they
 * change; 1 MiB of them with the entity still absent means the server is
 * broken, not slow. */
#define TESSERA_CLIENT_PENDING_BASE_MAX_BYTES (1u << 20)

/* ---- the unpack arena ----------------------------------------------------- */

/* An overflow chunk: taken when a frame needs more than the arena holds,
 * freed at the next rewind (which grows the arena to what that frame
 * needed, so the next such frame fits). */
typedef struct tessera_client__chunk {
    struct tessera_client__chunk *next;
    size_t capacity, used;
    max_align_t data[];
} tessera_client__chunk;

/* A bump allocator for protobuf-c: `free` is a no-op, everything is
 * reclaimed at once when the arena is rewound for the next frame. */
typedef struct tessera_client__arena {
    ProtobufCAllocator allocator; /* alloc/free below; allocator_data is the arena */
    uint8_t *base;                /* owned; NULL until the first frame */
    size_t capacity, used;
    size_t demand;                   /* bytes handed out for the current frame, overflow included */
    size_t peak;                     /* the largest demand of one frame so far */
    size_t frame_bytes;              /* length of the frame being unpacked */
    tessera_client__chunk *overflow; /* this frame's overflow chunks, newest first; owned */
} tessera_client__arena;

/* Every allocation is aligned for any type, as malloc's are. */
static size_t tessera_client__arena_round(size_t size) {
    size_t align = _Alignof(max_align_t);
    if (size == 0) size = 1;
    return (size + align - 1) & ~(align - 1);
}

static void *tessera_client__arena_alloc(void *data, size_t size) {
    tessera_client__arena *arena = data;
    /* protobuf-c's sizes come from a frame of at most 4 MiB; anything
     * near SIZE_MAX is a bug or an attack, and NULL fails the unpack. */
    if (size > SIZE_MAX / 4) return NULL;
    size = tessera_client__arena_round(size);
    arena->demand += size;
    if (arena->demand > arena->peak) arena->peak = arena->demand;
    if (size <= arena->capacity - arena->used) {
        void *p = arena->base + arena->used;
        arena->used += size;
        return p;
    }
    tessera_client__chunk *chunk = arena->overflow;
    if (!chunk || size > chunk->capacity - chunk->used) {
        /* The first chunk of a frame is sized for the worst realistic
         * frame, so that one is the only one; a later one doubles. */
        size_t want = chunk ? 2 * chunk->capacity : 2 * arena->capacity;
        if (!chunk && want < TESSERA_CLIENT_ARENA_OVERFLOW_FACTOR * arena->frame_bytes)
            want = TESSERA_CLIENT_ARENA_OVERFLOW_FACTOR * arena->frame_bytes;
        if (want < size) want = size;
        chunk = xmalloc(sizeof *chunk + want);
        chunk->capacity = want;
        chunk->used = 0;
        chunk->next = arena->overflow;
        arena->overflow = chunk;
    }
    void *p = (uint8_t *)chunk->data + chunk->used;
    chunk->used += size;
    return p;
}

static void tessera_client__arena_free(void *data, void *pointer) {
    (void)data;
    (void)pointer; /* reclaimed when the arena is rewound */
}

static void tessera_client__arena_init(tessera_client__arena *arena) {
    memset(arena, 0, sizeof *arena);
    arena->allocator.alloc = tessera_client__arena_alloc;
    arena->allocator.free = tessera_client__arena_free;
    arena->allocator.allocator_data = arena;
}

static void tessera_client__arena_drop_overflow(tessera_client__arena *arena) {
    while (arena->overflow) {
        tessera_client__chunk *next = arena->overflow->next;
        free(arena->overflow);
        arena->overflow = next;
    }
}

/* Rewinds the arena for a frame of `frame_bytes` bytes: everything handed
 * out before is gone. Grows it (one allocation) when the frame may need
 * more than it holds, judging by the guess and by the largest frame so far. */
static void tessera_client__arena_rewind(tessera_client__arena *arena, size_t frame_bytes) {
    tessera_client__arena_drop_overflow(arena);
    size_t want = TESSERA_CLIENT_ARENA_GUESS_FACTOR * frame_bytes + TESSERA_CLIENT_ARENA_GUESS_SLACK;
    if (want < arena->peak) want = arena->peak;
    if (want > arena->capacity) {
        size_t capacity = arena->capacity ? arena->capacity : TESSERA_CLIENT_ARENA_MIN_BYTES;
        while (capacity < want) capacity *= 2;
        free(arena->base);
        arena->base = xmalloc(capacity);
        arena->capacity = capacity;
    }
    arena->used = 0;
    arena->demand = 0;
    arena->frame_bytes = frame_bytes;
}

static void tessera_client__arena_close(tessera_client__arena *arena) {
    tessera_client__arena_drop_overflow(arena);
    free(arena->base);
    arena->base = NULL;
    arena->capacity = arena->used = 0;
}

/* ---- the entity table ----------------------------------------------------- */

/* What the client keeps per entity: the public part and its stream state.
 * A MOVE touches pub, track and events, so they come first and together;
 * `changed`, needed only for UPDATE records, is last. */
typedef struct tessera_client__entity {
    tessera_client_entity pub; /* first: &entity->pub and entity are one address */
    volatile_track track;      /* the position last received, in units: the base of the next delta */
    unsigned events;           /* TESSERA_CLIENT__EVENT_* noted in the current frame */
    entity_state_mask changed; /* properties changed in the current frame */
} tessera_client__entity;

/* What happened to an entity during the frame being applied. */
enum {
    TESSERA_CLIENT__EVENT_ENTERED = 1u << 0,
    TESSERA_CLIENT__EVENT_MOVED = 1u << 1,
    TESSERA_CLIENT__EVENT_CHANGED = 1u << 2,
    TESSERA_CLIENT__EVENT_DEPARTED = 1u << 3,
};

/* A reusable array of entities: emptied per frame, its memory kept. */
typedef struct tessera_client__list {
    tessera_client__entity **items;
    size_t count, capacity;
} tessera_client__list;

static void tessera_client__list_push(tessera_client__list *list, tessera_client__entity *entity) {
    if (list->count == list->capacity) {
        /* 64 covers a quiet view's frame without ever growing. */
        list->capacity = list->capacity ? list->capacity * 2 : 64;
        list->items = xrealloc(list->items, list->capacity * sizeof(tessera_client__entity *));
    }
    list->items[list->count++] = entity;
}

static void tessera_client__list_close(tessera_client__list *list) {
    free(list->items);
    memset(list, 0, sizeof *list);
}

/* Which login message went out last, so that an answer can be judged
 * against it (a token-less LoginRedirect answers only a Reconnect). */
typedef enum tessera_client__login_kind {
    TESSERA_CLIENT__LOGIN_NONE,      /* nothing sent yet */
    TESSERA_CLIENT__LOGIN_PASSWORD,  /* a LoginRequest */
    TESSERA_CLIENT__LOGIN_TOKEN,     /* a TokenLogin, after a redirect with a token */
    TESSERA_CLIENT__LOGIN_RECONNECT, /* a Reconnect */
} tessera_client__login_kind;

/* A BaseProperties change list kept until the player's entity enters. */
typedef struct tessera_client__pending {
    uint8_t *data;
    size_t length;
} tessera_client__pending;

struct tessera_client {
    uv_loop_t *loop;
    tessera_client_callbacks callbacks;
    void *user_data;
    tessera_client_state state;
    channel *ch;   /* NULL until connect succeeds; the channel frees itself */
    int connected; /* the TCP connection was established */
    /* Closed in place of a channel when the client has none, so on_closed
     * still fires from the loop rather than inside tessera_client_close. */
    uv_timer_t deferred_close;
    int cause_set; /* close_cause was decided by us, not guessed from the channel */
    tessera_client_close_cause close_cause;
    char close_reason[192];
    char name[TESSERA_CLIENT_HELLO_NAME_MAX + 1];
    int login_requested;
    char account[TESSERA_CLIENT_ACCOUNT_MAX + 1];
    char password[TESSERA_CLIENT_PASSWORD_MAX + 1];
    /* Non-empty: reconnect instead of login. Kept from the Reconnect until
     * its answer (a token-less redirect sends it again), then wiped. */
    char session_token[TESSERA_CLIENT_SESSION_TOKEN_MAX + 1];
    tessera_client__login_kind login_sent; /* the last login message sent */
    /* A LoginRedirect: where to go and the one-time token to log in with
     * there (a TokenLogin instead of the login). */
    char login_token[TESSERA_CLIENT_SESSION_TOKEN_MAX + 1];
    char redirect_host[64];
    int redirect_port;
    bool redirecting; /* the channel closes; a new one to redirect_host follows */
    unsigned redirects;
    char address[TESSERA_CLIENT_ADDRESS_BYTES]; /* the baseapp last dialled, "host:port" */
    uint32_t error_retry_after_ms;              /* of the last Error received */
    uint32_t sequence;                          /* of the last move sent */
    tessera_client_login_info login;
    char server_name[TESSERA_CLIENT_NAME_BYTES];
    /* tessera_client_use_tls: every connection speaks TLS with these. */
    tessera_client_tls *tls;
    char tls_server_name[254];
    bool websocket; /* tessera_client_use_websocket: every connection speaks WebSocket */
    tessera_client_stats stats;
    tessera_client__arena arena; /* protobuf-c's memory for the frame being handled */
    bit_writer scratch;          /* outgoing call arguments; base properties kept aside */

    /* From the login reply (all NULL or empty before it). */
    entity_def_registry *definitions; /* owned */
    replication_schema *schema;       /* over `definitions`; owned */
    volatile_codec_config volatile_config;
    unsigned alias_bits;
    entity_state_mask *base_masks; /* per class id: BASE_AND_CLIENT properties, what BaseProperties may carry */
    size_t *call_args_first;       /* per class id: its first slot in call_args */
    entity_state **call_args;      /* per client method of every class: its arguments, created on first use */

    /* The view. An entity is in both maps or in neither. */
    id_map entities; /* entity id -> tessera_client__entity*, owned */
    /* The player's own entity while it is in the table (entered with an
     * alias, or the placeholder), else NULL: every move sent updates it,
     * and this spares that a lookup by id. Set where an entity joins the
     * table (tessera_client__stream_enter, tessera_client__place_player),
     * cleared where one leaves it. */
    struct tessera_client__entity *own;
    tessera_client__entity **aliases; /* alias -> entity or NULL; grows up to max_aliases slots */
    uint32_t alias_capacity;

    /* BaseProperties waiting for the player's entity to enter, in order. */
    tessera_client__pending *pending;
    size_t pending_count, pending_capacity, pending_bytes;

    /* The ViewUpdate being applied. */
    struct {
        uint32_t tick;
        bool ticks_restart;
        uint64_t stamp_us;
        int broken; /* the stream broke a rule the decoder cannot see: reason below */
        char broken_reason[160];
        int move_error; /* the volatile_codec error a MOVE record gave, or 0 */
        uint32_t move_error_alias;
        tessera_client__list entered, moved, changed, departed;
    } frame;
    /* Entities that left, kept for the next ones to enter, so that a view
     * whose entities come and go allocates nothing (at most
     * TESSERA_CLIENT_SPARE_ENTITIES), and each class's default state to
     * reset them from (created on first use). */
    tessera_client__list spare;
    entity_state **class_defaults;
    bool changing_space; /* a Teleported(space_changed) is emptying the view */
    /* The player's own entity while it is in no space (an entity without a
     * cell part, or one whose EnteredSpace has not come): in the table
     * with no alias. NULL in a space. */
    struct tessera_client__entity *placeholder;
    /* Lone client calls for the player's own entity that came before its
     * ENTER (its base can call it the moment the login reply went, and the
     * first view update follows at the cell's next tick): delivered right
     * after the ENTER, in order. */
    struct tessera_client__held_call {
        uint32_t method_id;
        uint8_t *args;
        size_t length;
    } * held_calls;
    size_t held_count;
};

bool tessera_client_changing_space(const tessera_client *client) { return client->changing_space; }

/* ---- names ---------------------------------------------------------------- */

const char *tessera_client_state_name(tessera_client_state state) {
    switch (state) {
        case TESSERA_CLIENT_DISCONNECTED:
            return "disconnected";
        case TESSERA_CLIENT_CONNECTING:
            return "connecting";
        case TESSERA_CLIENT_HELLO_SENT:
            return "hello_sent";
        case TESSERA_CLIENT_AWAITING_LOGIN:
            return "awaiting_login";
        case TESSERA_CLIENT_LOGIN_SENT:
            return "login_sent";
        case TESSERA_CLIENT_IN_WORLD:
            return "in_world";
        case TESSERA_CLIENT_CLOSING:
            return "closing";
        case TESSERA_CLIENT_CLOSED:
            return "closed";
    }
    return "unknown";
}

const char *tessera_client_error_name(int code) {
    static const char *const names[] = {
        "none",
        "malformed_frame",
        "frame_too_large",
        "unknown_message",
        "not_logged_in",
        "protocol_version_mismatch",
        "bad_credentials",
        "unavailable",
        "out_of_order",
        "invalid_argument",
        "replaced",
        "slow_consumer",
        "server_shutdown",
        "not_exposed",
        "bad_arguments",
        "unknown_entity",
        "rate_limited",
        "session_expired",
    };
    if (code < 0 || (size_t)code >= sizeof names / sizeof names[0]) return "unknown";
    return names[code];
}

const char *tessera_client_close_cause_name(tessera_client_close_cause cause) {
    switch (cause) {
        case TESSERA_CLIENT_CLOSED_BY_CALLER:
            return "closed_by_caller";
        case TESSERA_CLIENT_CLOSED_CONNECT_FAILED:
            return "connect_failed";
        case TESSERA_CLIENT_CLOSED_SERVER_ERROR:
            return "server_error";
        case TESSERA_CLIENT_CLOSED_PROTOCOL:
            return "protocol";
        case TESSERA_CLIENT_CLOSED_DISCONNECTED:
            return "disconnected";
    }
    return "unknown";
}

/* ---- lifecycle ------------------------------------------------------------ */

/* The state as callers see it: a channel that started closing on its own
 * (peer gone, I/O error) makes the client CLOSING before on_closed. */
static tessera_client_state tessera_client__state(const tessera_client *client) {
    if (client->state != TESSERA_CLIENT_CLOSING && client->state != TESSERA_CLIENT_CLOSED && client->ch &&
        channel_get_state(client->ch) == CHANNEL_CLOSING)
        return TESSERA_CLIENT_CLOSING;
    return client->state;
}

static int tessera_client__is_open(const tessera_client *client) {
    tessera_client_state state = tessera_client__state(client);
    return state != TESSERA_CLIENT_CLOSING && state != TESSERA_CLIENT_CLOSED;
}

static int tessera_client__in_world(const tessera_client *client) {
    return tessera_client__state(client) == TESSERA_CLIENT_IN_WORLD;
}

tessera_client *tessera_client_create(uv_loop_t *loop, const tessera_client_callbacks *callbacks, void *user_data) {
    tessera_client *client = xcalloc(1, sizeof *client);
    client->loop = loop;
    if (callbacks) client->callbacks = *callbacks;
    client->user_data = user_data;
    client->state = TESSERA_CLIENT_DISCONNECTED;
    snprintf(client->name, sizeof client->name, "tessera-client");
    id_map_init(&client->entities);
    tessera_client__arena_init(&client->arena);
    bit_writer_init(&client->scratch);
    return client;
}

static void tessera_client__entity_free(tessera_client__entity *entity) {
    entity_state_free(entity->pub.state);
    free(entity);
}

/* Entities kept for reuse after they leave: about the churn of a crowded
 * view's second, so that steady play allocates nothing per frame. */
#define TESSERA_CLIENT_SPARE_ENTITIES 256

/* An entity that left: kept for reuse, or freed when enough are kept. */
static void tessera_client__entity_retire(tessera_client *client, tessera_client__entity *entity) {
    if (client->spare.count < TESSERA_CLIENT_SPARE_ENTITIES)
        tessera_client__list_push(&client->spare, entity);
    else
        tessera_client__entity_free(entity);
}

/* A fresh entity of class `cls`: a spare one reset to the class defaults
 * if there is one, else a new one. */
static tessera_client__entity *tessera_client__entity_new(tessera_client *client, const entity_def_class *cls) {
    for (size_t i = client->spare.count; i-- > 0;) {
        tessera_client__entity *entity = client->spare.items[i];
        if (entity->pub.cls != cls) continue;
        client->spare.items[i] = client->spare.items[--client->spare.count];
        if (!client->class_defaults[cls->id]) client->class_defaults[cls->id] = entity_state_create(cls);
        entity_state *state = entity->pub.state;
        if (entity_state_copy(state, client->class_defaults[cls->id]) != 0)
            log_panic("a spare entity's state is not of its class");
        entity_state_clear_dirty(state);
        memset(entity, 0, sizeof *entity);
        entity->pub.state = state;
        return entity;
    }
    tessera_client__entity *entity = xcalloc(1, sizeof *entity);
    entity->pub.state = entity_state_create(cls);
    return entity;
}

static void tessera_client__drop_held_calls(tessera_client *client);

/* Everything the login reply made. The states refer to the definitions'
 * classes, so they go first. */
static void tessera_client__free_world(tessera_client *client) {
    size_t cursor = 0;
    uint64_t id;
    void *value;
    while (id_map_next(&client->entities, &cursor, &id, &value)) tessera_client__entity_free(value);
    id_map_close(&client->entities);
    client->placeholder = NULL;
    client->own = NULL;
    tessera_client__drop_held_calls(client);
    for (size_t i = 0; i < client->spare.count; i++) tessera_client__entity_free(client->spare.items[i]);
    client->spare.count = 0;
    if (client->class_defaults && client->definitions) {
        for (size_t c = 0; c < entity_def_registry_class_count(client->definitions); c++)
            entity_state_free(client->class_defaults[c]);
    }
    free(client->class_defaults);
    client->class_defaults = NULL;
    free(client->aliases);
    client->aliases = NULL;
    client->alias_capacity = 0;
    if (client->definitions) {
        size_t classes = entity_def_registry_class_count(client->definitions);
        size_t slots = classes > 0 ? client->call_args_first[classes] : 0;
        for (size_t i = 0; i < slots; i++) entity_state_free(client->call_args[i]);
    }
    free(client->call_args);
    free(client->call_args_first);
    free(client->base_masks);
    client->call_args = NULL;
    client->call_args_first = NULL;
    client->base_masks = NULL;
    for (size_t i = 0; i < client->pending_count; i++) free(client->pending[i].data);
    free(client->pending);
    client->pending = NULL;
    client->pending_count = client->pending_capacity = client->pending_bytes = 0;
    replication_schema_free(client->schema);
    client->schema = NULL;
    entity_def_registry_free(client->definitions);
    client->definitions = NULL;
}

/* Fires on_closed and releases everything. Runs from a libuv close callback
 * (the channel's or deferred_close's), never inside a client callback. */
static void tessera_client__finish(tessera_client *client, const char *reason) {
    tessera_client_close_cause cause = client->close_cause;
    if (!client->cause_set) {
        /* The channel ended on its own. Before the connection was up that is
         * a failed dial; afterwards the peer or the socket went away. */
        cause = client->connected ? TESSERA_CLIENT_CLOSED_DISCONNECTED : TESSERA_CLIENT_CLOSED_CONNECT_FAILED;
        snprintf(client->close_reason, sizeof client->close_reason, "%s", reason ? reason : "closed");
    }
    client->state = TESSERA_CLIENT_CLOSED;
    client->ch = NULL;
    if (client->callbacks.on_closed) client->callbacks.on_closed(client, cause, client->close_reason);
    /* A reconnect that got no answer still holds its session token, and a
     * redirect that could not be dialled its one-time token
     * (tessera_client_redirect_token, read in on_closed). */
    memset(client->session_token, 0, sizeof client->session_token);
    memset(client->login_token, 0, sizeof client->login_token);

    tessera_client__free_world(client);
    tessera_client__list_close(&client->frame.entered);
    tessera_client__list_close(&client->frame.moved);
    tessera_client__list_close(&client->frame.changed);
    tessera_client__list_close(&client->frame.departed);
    tessera_client__list_close(&client->spare);
    tessera_client__arena_close(&client->arena);
    bit_writer_close(&client->scratch);
    free(client);
}

static int tessera_client__dial(tessera_client *client, const char *host, int port);

static void tessera_client__on_channel_close(channel *ch, const char *reason) {
    tessera_client *client = channel_user_data(ch);
    if (client->redirecting && client->state != TESSERA_CLIENT_CLOSING) {
        /* The old connection is gone: the login goes on at the new one. */
        client->redirecting = false;
        client->ch = NULL;
        client->connected = 0;
        client->state = TESSERA_CLIENT_DISCONNECTED;
        if (tessera_client__dial(client, client->redirect_host, client->redirect_port) == 0) return;
        client->cause_set = 1;
        client->close_cause = TESSERA_CLIENT_CLOSED_CONNECT_FAILED;
        snprintf(client->close_reason, sizeof client->close_reason, "redirected to %s:%d, which cannot be dialled",
                 client->redirect_host, client->redirect_port);
    }
    tessera_client__finish(client, reason);
}

static void tessera_client__on_deferred_closed(uv_handle_t *handle) {
    tessera_client *client = handle->data;
    tessera_client__finish(client, client->close_reason);
}

/* Closes with a cause we decided. The first cause wins, like the channel's
 * first reason: if the channel is already closing on its own, its reason
 * stands and tessera_client__finish names the cause. */
static void tessera_client__close_with(tessera_client *client, tessera_client_close_cause cause, const char *reason) {
    if (client->state == TESSERA_CLIENT_CLOSING || client->state == TESSERA_CLIENT_CLOSED) return;
    if (client->ch && channel_get_state(client->ch) == CHANNEL_CLOSING) {
        client->state = TESSERA_CLIENT_CLOSING;
        return;
    }
    client->cause_set = 1;
    client->close_cause = cause;
    snprintf(client->close_reason, sizeof client->close_reason, "%s", reason);
    client->state = TESSERA_CLIENT_CLOSING;
    if (client->ch) {
        channel_close(client->ch, client->close_reason);
    } else {
        /* No channel to wait for: a timer that is closed without ever being
         * started still gets its close callback on the next loop turn. */
        uv_timer_init(client->loop, &client->deferred_close);
        client->deferred_close.data = client;
        uv_close((uv_handle_t *)&client->deferred_close, tessera_client__on_deferred_closed);
    }
}

void tessera_client_close(tessera_client *client) {
    if (!client) return;
    tessera_client__close_with(client, TESSERA_CLIENT_CLOSED_BY_CALLER, "closed by the client");
}

/* A protocol violation by the server: log it and close. */
static void tessera_client__protocol_error(tessera_client *client, const char *what) {
    char reason[192];
    snprintf(reason, sizeof reason, "protocol error: %s", what);
    log_debug("client %s: %s (state %s)", client->ch ? channel_peer_name(client->ch) : "?", reason,
              tessera_client_state_name(client->state));
    tessera_client__close_with(client, TESSERA_CLIENT_CLOSED_PROTOCOL, reason);
}

/* ---- sending -------------------------------------------------------------- */

/* Sends one message. Returns 0, or -1 when there is no channel (a client
 * fed through tessera_client_process_frame) or the send failed (the channel
 * then closes, and its on_close reports why). */
static int tessera_client__send(tessera_client *client, const Tessera__Client__ClientToServer *message) {
    if (!client->ch) return -1;
    /* The channel counts what it frames (length prefix included): its
     * counter's growth is this message's size, which spares protobuf-c a
     * second walk of the message to size it. */
    uint64_t before = channel_get_stats(client->ch)->bytes_out;
    if (channel_send_message(client->ch, &message->base) != 0) return -1;
    client->stats.frames_out++;
    client->stats.bytes_out += channel_get_stats(client->ch)->bytes_out - before;
    return 0;
}

static void tessera_client__send_hello(tessera_client *client) {
    Tessera__Client__Hello hello = TESSERA__CLIENT__HELLO__INIT;
    hello.protocol_version = TESSERA__CLIENT__PROTOCOL_VERSION__PROTOCOL_VERSION;
    hello.client_name = client->name;
    Tessera__Client__ClientToServer message = TESSERA__CLIENT__CLIENT_TO_SERVER__INIT;
    message.body_case = TESSERA__CLIENT__CLIENT_TO_SERVER__BODY_HELLO;
    message.hello = &hello;
    client->state = TESSERA_CLIENT_HELLO_SENT;
    tessera_client__send(client, &message);
}

/* Sends the login the caller asked for: a TokenLogin after a redirect, a
 * Reconnect with a session token, or the password. Without a channel
 * (tessera_client_process_frame) the login is only pretended: the state
 * moves on and nothing is sent. The password and the one-time token are
 * not needed any more after: they are not kept in memory. The session
 * token stays until the Reconnect is answered, since a token-less redirect
 * sends it again (tessera_client__on_login_reply and
 * tessera_client__finish wipe it). */
static void tessera_client__send_login(tessera_client *client) {
    Tessera__Client__ClientToServer message = TESSERA__CLIENT__CLIENT_TO_SERVER__INIT;
    Tessera__Client__TokenLogin token_login = TESSERA__CLIENT__TOKEN_LOGIN__INIT;
    Tessera__Client__Reconnect reconnect = TESSERA__CLIENT__RECONNECT__INIT;
    Tessera__Client__LoginRequest login = TESSERA__CLIENT__LOGIN_REQUEST__INIT;
    if (client->login_token[0]) {
        token_login.account = client->account;
        token_login.token = client->login_token;
        message.body_case = TESSERA__CLIENT__CLIENT_TO_SERVER__BODY_TOKEN_LOGIN;
        message.token_login = &token_login;
        client->login_sent = TESSERA_CLIENT__LOGIN_TOKEN;
    } else if (client->session_token[0]) {
        reconnect.account = client->account;
        reconnect.session_token = client->session_token;
        message.body_case = TESSERA__CLIENT__CLIENT_TO_SERVER__BODY_RECONNECT;
        message.reconnect = &reconnect;
        client->login_sent = TESSERA_CLIENT__LOGIN_RECONNECT;
    } else {
        login.account = client->account;
        login.password = client->password;
        message.body_case = TESSERA__CLIENT__CLIENT_TO_SERVER__BODY_LOGIN;
        message.login = &login;
        client->login_sent = TESSERA_CLIENT__LOGIN_PASSWORD;
    }
    client->state = TESSERA_CLIENT_LOGIN_SENT;
    if (client->ch && tessera_client__send(client, &message) == 0) {
        if (client->login_sent == TESSERA_CLIENT__LOGIN_PASSWORD) client->stats.password_logins++;
        if (client->login_sent == TESSERA_CLIENT__LOGIN_RECONNECT) client->stats.reconnect_requests++;
    }
    memset(client->password, 0, sizeof client->password);
    memset(client->login_token, 0, sizeof client->login_token);
    if (client->login_sent != TESSERA_CLIENT__LOGIN_RECONNECT)
        memset(client->session_token, 0, sizeof client->session_token);
}

/* The server does not echo the player's own moves: its entity in the table
 * is where the player last said (or was put back). The volatile track is
 * left alone, since it mirrors what the server sent. */
static void tessera_client__place_own(tessera_client *client, float x, float y, float z, float yaw) {
    tessera_client__entity *own = client->own;
    if (!own) return;
    own->pub.x = x;
    own->pub.y = y;
    own->pub.z = z;
    own->pub.yaw = yaw;
}

int tessera_client_send_move(tessera_client *client, float x, float y, float z, float yaw) {
    if (!tessera_client__in_world(client)) return -1;
    if (!isfinite(x) || !isfinite(y) || !isfinite(z) || !isfinite(yaw)) return -1;
    Tessera__Client__Vector3 position = TESSERA__CLIENT__VECTOR3__INIT;
    position.x = x;
    position.y = y;
    position.z = z;
    Tessera__Client__Move move = TESSERA__CLIENT__MOVE__INIT;
    move.position = &position;
    move.yaw = yaw;
    move.sequence = client->sequence + 1;
    Tessera__Client__ClientToServer message = TESSERA__CLIENT__CLIENT_TO_SERVER__INIT;
    message.body_case = TESSERA__CLIENT__CLIENT_TO_SERVER__BODY_MOVE;
    message.move = &move;
    if (tessera_client__send(client, &message) != 0) return -1;
    client->sequence = move.sequence;
    tessera_client__place_own(client, x, y, z, yaw);
    return 0;
}

uint32_t tessera_client_last_sequence(const tessera_client *client) { return client->sequence; }

bool tessera_client_frame_ticks_restart(const tessera_client *client) { return client->frame.ticks_restart; }

static int tessera_client__send_call(tessera_client *client, uint64_t entity_id, int part, uint32_t method_id,
                                     const uint8_t *args, size_t length) {
    Tessera__Client__EntityCall call = TESSERA__CLIENT__ENTITY_CALL__INIT;
    call.entity_id = entity_id;
    call.part = (Tessera__Client__MethodPart)part;
    call.method_id = method_id;
    call.args.data = (uint8_t *)args; /* only read while packing */
    call.args.len = args ? length : 0;
    Tessera__Client__ClientToServer message = TESSERA__CLIENT__CLIENT_TO_SERVER__INIT;
    message.body_case = TESSERA__CLIENT__CLIENT_TO_SERVER__BODY_CALL;
    message.call = &call;
    if (tessera_client__send(client, &message) != 0) return -1;
    client->stats.calls_out++;
    return 0;
}

int tessera_client_call(tessera_client *client, uint64_t entity_id, entity_def_part part, const char *method_name,
                        const entity_state *args) {
    if (!tessera_client__in_world(client) || !method_name) return -1;
    if (part != ENTITY_DEF_PART_BASE && part != ENTITY_DEF_PART_CELL) return -1;
    const tessera_client__entity *entity = entity_id ? id_map_get(&client->entities, entity_id) : NULL;
    if (!entity) return -1;
    /* The server takes base methods on the player's own entity only. */
    if (part == ENTITY_DEF_PART_BASE && entity_id != client->login.entity_id) return -1;
    const entity_def_method *method = entity_def_class_find_method(entity->pub.cls, part, method_name);
    if (!method || !method->exposed) return -1;
    bit_writer_reset(&client->scratch);
    if (args) {
        if (entity_state_class(args) != &method->args_class) return -1;
        method_call_encode(args, &client->scratch);
    } else if (method->arg_count != 0) {
        return -1;
    }
    return tessera_client__send_call(client, entity_id, (int)part, method->id, bit_writer_data(&client->scratch),
                                     bit_writer_bytes(&client->scratch));
}

int tessera_client_call_raw(tessera_client *client, uint64_t entity_id, int part, uint32_t method_id,
                            const uint8_t *args, size_t length) {
    if (!tessera_client__in_world(client)) return -1;
    return tessera_client__send_call(client, entity_id, part, method_id, args, length);
}

/* ---- receiving: hello, login ---------------------------------------------- */

/* Reads an optional Vector3 (absent means the origin, as proto3 defaults
 * say). Returns 0, or -1 if a coordinate is not finite. */
static int tessera_client__read_vector(const Tessera__Client__Vector3 *v, float *x, float *y, float *z) {
    if (!v) {
        *x = *y = *z = 0.0f;
        return 0;
    }
    if (!isfinite(v->x) || !isfinite(v->y) || !isfinite(v->z)) return -1;
    *x = v->x;
    *y = v->y;
    *z = v->z;
    return 0;
}

/* A client that never dialled: frames reach it only through
 * tessera_client_process_frame, and it takes the hello and the login as
 * sent (tessera_client.h). */
static int tessera_client__detached(const tessera_client *client) { return !client->ch && !client->connected; }

static void tessera_client__on_server_hello(tessera_client *client, const Tessera__Client__ServerHello *hello) {
    int expected = client->state == TESSERA_CLIENT_HELLO_SENT ||
                   (tessera_client__detached(client) && client->state == TESSERA_CLIENT_DISCONNECTED);
    if (!expected) {
        tessera_client__protocol_error(client, "server hello out of order");
        return;
    }
    if (hello->protocol_version != TESSERA__CLIENT__PROTOCOL_VERSION__PROTOCOL_VERSION) {
        char what[128];
        snprintf(what, sizeof what, "server speaks protocol version %u, this client speaks %u",
                 (unsigned)hello->protocol_version, (unsigned)TESSERA__CLIENT__PROTOCOL_VERSION__PROTOCOL_VERSION);
        tessera_client__protocol_error(client, what);
        return;
    }
    snprintf(client->server_name, sizeof client->server_name, "%s", hello->server_name ? hello->server_name : "");
    client->state = TESSERA_CLIENT_AWAITING_LOGIN;
    if (client->login_requested) tessera_client__send_login(client);
}

/* Checks the numbers of a login reply and fills `info` with them. Returns
 * NULL, or what is wrong. */
static const char *tessera_client__read_login_numbers(const Tessera__Client__LoginReply *reply,
                                                      tessera_client_login_info *info,
                                                      volatile_codec_config *volatile_config) {
    if (reply->entity_id == 0) return "login reply without an entity id";
    if (tessera_client__read_vector(reply->position, &info->x, &info->y, &info->z) != 0 || !isfinite(reply->yaw) ||
        !isfinite(reply->view_radius) || reply->view_radius < 0 || !isfinite(reply->view_hysteresis) ||
        reply->view_hysteresis < 0 || !isfinite(reply->max_speed) || !isfinite(reply->detail_near_distance) ||
        reply->detail_near_distance < 0 || !isfinite(reply->detail_medium_distance) ||
        reply->detail_medium_distance < 0)
        return "login reply with a non-finite or negative number";
    if (reply->max_aliases < 1 || reply->max_aliases > TESSERA_CLIENT_MAX_ALIASES)
        return "login reply with max_aliases outside 1..65536";
    float min[3], max[3];
    if (tessera_client__read_vector(reply->world_min, &min[0], &min[1], &min[2]) != 0 ||
        tessera_client__read_vector(reply->world_max, &max[0], &max[1], &max[2]) != 0)
        return "login reply with a non-finite world bound";
    double min_d[3] = {min[0], min[1], min[2]}, max_d[3] = {max[0], max[1], max[2]};
    if (volatile_codec_config_init(volatile_config, reply->position_precision, min_d, max_d, reply->yaw_steps) != 0)
        return "login reply with a position precision, world bounds or yaw steps the stream cannot use";
    info->entity_id = reply->entity_id;
    info->yaw = reply->yaw;
    info->view_radius = reply->view_radius;
    info->view_hysteresis = reply->view_hysteresis;
    info->max_speed = reply->max_speed;
    info->tick_hz = reply->tick_hz;
    snprintf(info->space_name, sizeof info->space_name, "%s", reply->space_name ? reply->space_name : "");
    info->max_aliases = reply->max_aliases;
    info->position_precision = reply->position_precision;
    memcpy(info->world_min, min, sizeof min);
    memcpy(info->world_max, max, sizeof max);
    info->yaw_steps = reply->yaw_steps;
    info->detail_near_distance = reply->detail_near_distance;
    info->detail_medium_distance = reply->detail_medium_distance;
    return NULL;
}

/* What the definitions imply for this client: the properties BaseProperties
 * may carry per class, and a slot per client method for its arguments. */
static void tessera_client__index_definitions(tessera_client *client) {
    size_t classes = entity_def_registry_class_count(client->definitions);
    client->base_masks = xcalloc(classes > 0 ? classes : 1, sizeof client->base_masks[0]);
    client->class_defaults = xcalloc(classes > 0 ? classes : 1, sizeof(entity_state *));
    client->call_args_first = xcalloc(classes + 1, sizeof client->call_args_first[0]);
    size_t slots = 0;
    for (size_t c = 0; c < classes; c++) {
        const entity_def_class *cls = entity_def_registry_class(client->definitions, (uint16_t)c);
        for (size_t p = 0; p < cls->property_count; p++) {
            const entity_def_audience *audience = &cls->properties[p].audience;
            if (audience->on_base && audience->to_own_client)
                entity_state_mask_add(&client->base_masks[c], cls->properties[p].id);
        }
        client->call_args_first[c] = slots;
        slots += cls->method_count[ENTITY_DEF_PART_CLIENT];
    }
    client->call_args_first[classes] = slots;
    client->call_args = xcalloc(slots > 0 ? slots : 1, sizeof(entity_state *));
}

static int tessera_client__place_player(tessera_client *client);
static int tessera_client__pend_base(tessera_client *client, const uint8_t *data, size_t length);
static void tessera_client__apply_pending_base(tessera_client *client, tessera_client__entity *entity);
static void tessera_client__stream_leave(void *ctx, uint32_t alias);
static void tessera_client__end_frame(tessera_client *client);

/* The whole view went (the player was destroyed, or left the space): tells
 * the game every departed entity, as a change of space (which a callback
 * may end by leaving the world), then closes the frame. */
static void tessera_client__report_departures(tessera_client *client) {
    client->changing_space = true;
    for (size_t i = 0; i < client->frame.departed.count; i++) {
        if (client->callbacks.on_leave) client->callbacks.on_leave(client, client->frame.departed.items[i]->pub.id);
        if (!tessera_client__in_world(client)) break;
    }
    client->changing_space = false;
    tessera_client__end_frame(client);
}

/* Whether `host` is an IPv4 or IPv6 literal. */
static bool tessera_client__ip_literal(const char *host) {
    struct in_addr address4;
    struct in6_addr address6;
    return inet_pton(AF_INET, host, &address4) == 1 || inet_pton(AF_INET6, host, &address6) == 1;
}

/* Whether `text` is a baseapp address a caller can dial: "host:port" with
 * an IP literal host ("[v6]:port" or "v6:port": the port follows the last
 * colon) and a port of 1..65535 in decimal, and short enough to keep. */
static bool tessera_client__usable_address(const char *text) {
    size_t length = strlen(text);
    const char *colon = strrchr(text, ':');
    if (length >= TESSERA_CLIENT_ADDRESS_BYTES || !colon || colon == text) return false;
    const char *start = text, *stop = colon;
    if (text[0] == '[') {
        if (colon[-1] != ']') return false;
        start = text + 1;
        stop = colon - 1;
    }
    char host[TESSERA_CLIENT_ADDRESS_BYTES];
    memcpy(host, start, (size_t)(stop - start));
    host[stop - start] = '\0';
    unsigned long port = 0;
    const char *digit = colon + 1;
    if (*digit == '\0' || strlen(digit) > 5) return false;
    for (; *digit; digit++) {
        if (*digit < '0' || *digit > '9') return false;
        port = port * 10 + (unsigned long)(*digit - '0');
    }
    return port >= 1 && port <= 65535 && tessera_client__ip_literal(host);
}

/* The reply's other baseapps into info->baseapps: the usable ones, in
 * order, as many as fit. A bad entry is skipped, not fatal: the list is a
 * hint for later, and the login itself is sound. */
static void tessera_client__read_baseapps(const Tessera__Client__LoginReply *reply, tessera_client_login_info *info) {
    info->baseapp_count = 0;
    for (size_t i = 0; i < reply->n_baseapps && info->baseapp_count < TESSERA_CLIENT_MAX_BASEAPPS; i++) {
        const char *address = reply->baseapps[i];
        if (!address || !tessera_client__usable_address(address)) continue;
        snprintf(info->baseapps[info->baseapp_count], sizeof info->baseapps[0], "%s", address);
        info->baseapp_count++;
    }
}

static void tessera_client__on_login_reply(tessera_client *client, const Tessera__Client__LoginReply *reply) {
    int expected = client->state == TESSERA_CLIENT_LOGIN_SENT ||
                   (tessera_client__detached(client) && client->state == TESSERA_CLIENT_AWAITING_LOGIN);
    if (!expected) {
        tessera_client__protocol_error(client, "login reply out of order");
        return;
    }
    tessera_client_login_info info;
    memset(&info, 0, sizeof info);
    volatile_codec_config volatile_config;
    memset(&volatile_config, 0, sizeof volatile_config);
    const char *wrong = reply->no_space ? (reply->entity_id ? NULL : "login reply without an entity id")
                                        : tessera_client__read_login_numbers(reply, &info, &volatile_config);
    if (wrong) {
        tessera_client__protocol_error(client, wrong);
        return;
    }
    info.entity_id = reply->entity_id;
    info.in_space = !reply->no_space;
    snprintf(info.entity_type, sizeof info.entity_type, "%s", reply->entity_type ? reply->entity_type : "");
    /* The definitions let this client decode any game; their digest must
     * be theirs, or something in between mangled them. */
    if (!reply->definitions || !reply->definitions[0]) {
        tessera_client__protocol_error(client, "login reply without entity definitions");
        return;
    }
    char err[256];
    entity_def_registry *definitions = NULL;
    if (entity_def_load_string(reply->definitions, "login reply", &definitions, err, sizeof err) != 0) {
        char what[320];
        snprintf(what, sizeof what, "entity definitions do not load: %s", err);
        tessera_client__protocol_error(client, what);
        return;
    }
    const char *digest = entity_def_registry_digest_hex(definitions);
    if (!reply->definitions_digest || strcmp(digest, reply->definitions_digest) != 0) {
        entity_def_registry_free(definitions);
        tessera_client__protocol_error(client, "entity definitions do not match their digest");
        return;
    }
    snprintf(info.definitions_digest, sizeof info.definitions_digest, "%s", digest);
    if (reply->session_token && strlen(reply->session_token) <= TESSERA_CLIENT_SESSION_TOKEN_MAX)
        snprintf(info.session_token, sizeof info.session_token, "%s", reply->session_token);
    info.detached_grace_ms = reply->detached_grace_ms;
    info.reconnected = reply->reconnected;
    tessera_client__read_baseapps(reply, &info);
    /* The login is answered: a reconnect's token has done its work. */
    memset(client->session_token, 0, sizeof client->session_token);
    info.definition_classes = entity_def_registry_class_count(definitions);
    tessera_client__free_world(client); /* nothing yet: a login reply comes once */
    id_map_init(&client->entities);
    client->definitions = definitions;
    client->schema = replication_schema_create(definitions);
    client->volatile_config = volatile_config;
    client->alias_bits = info.in_space ? replication_alias_bits(info.max_aliases) : 0;
    tessera_client__index_definitions(client);
    client->login = info;
    client->state = TESSERA_CLIENT_IN_WORLD;
    if (!info.in_space && tessera_client__place_player(client) != 0) {
        tessera_client__protocol_error(client, "login reply for an entity type the definitions lack");
        return;
    }
    if (client->callbacks.on_logged_in) client->callbacks.on_logged_in(client, &client->login);
}

/* ---- receiving: a redirect ----------------------------------------------------- */

/* How many redirects one login may follow: a cluster sends a client on once
 * (or once more, from a baseapp that is stopping). */
#define TESSERA_CLIENT_MAX_REDIRECTS 4

/* Every entity in the table goes, as if each had left (on_leave for each,
 * the own included): the player is leaving this view for good. */
static void tessera_client__forget_view(tessera_client *client) {
    for (uint32_t alias = 0; alias < client->alias_capacity; alias++)
        if (client->aliases[alias]) tessera_client__stream_leave(client, alias);
    if (client->placeholder) {
        tessera_client__entity *own = client->placeholder;
        client->placeholder = NULL;
        if (client->own == own) client->own = NULL;
        id_map_remove(&client->entities, own->pub.id);
        own->events |= TESSERA_CLIENT__EVENT_DEPARTED;
        tessera_client__list_push(&client->frame.departed, own);
    }
    tessera_client__report_departures(client);
    for (size_t i = 0; i < client->pending_count; i++) free(client->pending[i].data);
    client->pending_count = 0;
    client->pending_bytes = 0;
    tessera_client__drop_held_calls(client);
}

/* LoginRedirect: close this connection, dial host:port and log in there,
 * with the redirect's one-time token (a TokenLogin) or, for a redirect
 * without a token, with a Reconnect: the same one when it answers a
 * Reconnect (the session token was kept for this), or, in the world, one
 * with the session token of the last login reply (the baseapp was
 * declared dead and its session lives there now). */
static void tessera_client__on_login_redirect(tessera_client *client, const Tessera__Client__LoginRedirect *redirect) {
    bool in_world = client->state == TESSERA_CLIENT_IN_WORLD;
    if ((client->state != TESSERA_CLIENT_LOGIN_SENT && !in_world) || !client->ch) {
        tessera_client__protocol_error(client, "login redirect out of order");
        return;
    }
    const char *host = redirect->host ? redirect->host : "";
    size_t token_length = redirect->token ? strlen(redirect->token) : 0;
    bool reconnect_on = token_length == 0 && client->state == TESSERA_CLIENT_LOGIN_SENT &&
                        client->login_sent == TESSERA_CLIENT__LOGIN_RECONNECT && client->session_token[0];
    bool session_moved = token_length == 0 && in_world && client->login.session_token[0];
    if (session_moved) reconnect_on = true;
    if (!tessera_client__ip_literal(host) || strlen(host) >= sizeof client->redirect_host || redirect->port < 1 ||
        redirect->port > 65535 || (token_length < 1 && !reconnect_on) ||
        token_length > TESSERA_CLIENT_SESSION_TOKEN_MAX) {
        tessera_client__protocol_error(client, "login redirect to no usable address, or without a token");
        return;
    }
    if (++client->redirects > TESSERA_CLIENT_MAX_REDIRECTS) {
        tessera_client__protocol_error(client, "redirected too often");
        return;
    }
    if (in_world) {
        tessera_client__forget_view(client);
        if (!tessera_client__is_open(client)) return;
    }
    if (session_moved) snprintf(client->session_token, sizeof client->session_token, "%s", client->login.session_token);
    snprintf(client->redirect_host, sizeof client->redirect_host, "%s", host);
    client->redirect_port = (int)redirect->port;
    /* Without a token login_token stays empty, and the next login sent is
     * the Reconnect again. */
    snprintf(client->login_token, sizeof client->login_token, "%s", reconnect_on ? "" : redirect->token);
    client->login_requested = 1;
    client->redirecting = true;
    client->stats.redirects++;
    if (client->callbacks.on_redirected) {
        client->callbacks.on_redirected(client, redirect->reason ? redirect->reason : "");
        if (!tessera_client__is_open(client)) return;
    }
    channel_close(client->ch, "redirected");
}

/* ---- receiving: giveClientTo ------------------------------------------------ */

/* The player's own entity while it is in no space: in the table with no
 * alias, of login.entity_type, with what BaseProperties said so far.
 * Returns 0, or -1 when the definitions lack the type. */
static int tessera_client__place_player(tessera_client *client) {
    const entity_def_class *cls = entity_def_registry_find_class(client->definitions, client->login.entity_type);
    if (!cls || id_map_get(&client->entities, client->login.entity_id)) return -1;
    tessera_client__entity *entity = tessera_client__entity_new(client, cls);
    entity->pub.id = client->login.entity_id;
    entity->pub.alias = UINT32_MAX;
    entity->pub.is_owner = true;
    entity->pub.cls = cls;
    entity->pub.type = cls->name;
    volatile_track_init(&entity->track);
    if (id_map_put(&client->entities, entity->pub.id, entity) != 0) log_panic("id_map_put failed");
    client->placeholder = entity;
    client->own = entity;
    if (client->pending_count > 0) tessera_client__apply_pending_base(client, entity);
    entity_state_clear_dirty(entity->pub.state);
    return 0;
}

/* The placeholder leaves the table; its base properties wait, as after a
 * LEAVE of the own entity, for the stream's own ENTER. Returns 0, or -1
 * when too much would wait. */
static int tessera_client__unplace_player(tessera_client *client) {
    tessera_client__entity *entity = client->placeholder;
    if (!entity) return 0;
    client->placeholder = NULL;
    if (client->own == entity) client->own = NULL;
    id_map_remove(&client->entities, entity->pub.id);
    int rc = 0;
    const entity_state_mask *base = &client->base_masks[entity->pub.cls->id];
    if (!entity_state_mask_empty(base)) {
        bit_writer_reset(&client->scratch);
        property_codec_encode_changes(&client->scratch, entity->pub.state, base);
        rc = tessera_client__pend_base(client, bit_writer_data(&client->scratch), bit_writer_bytes(&client->scratch));
    }
    tessera_client__entity_retire(client, entity);
    return rc;
}

static void tessera_client__on_player_destroyed(tessera_client *client,
                                                const Tessera__Client__PlayerDestroyed *message) {
    if (client->state != TESSERA_CLIENT_IN_WORLD || message->entity_id != client->login.entity_id ||
        client->login.entity_id == 0) {
        tessera_client__protocol_error(client, "player destroyed: not the player's entity, or out of order");
        return;
    }
    /* Everything seen through the old player goes, as if each had left,
     * and its base properties do not follow it anywhere. */
    tessera_client__forget_view(client);
    if (!tessera_client__is_open(client)) return;
    client->login.entity_id = 0;
    client->login.in_space = false;
}

static void tessera_client__on_player_created(tessera_client *client, const Tessera__Client__PlayerCreated *message) {
    if (client->state != TESSERA_CLIENT_IN_WORLD || client->login.entity_id != 0 || message->entity_id == 0) {
        tessera_client__protocol_error(client, "player created: out of order (no player destroyed first)");
        return;
    }
    client->login.entity_id = message->entity_id;
    snprintf(client->login.entity_type, sizeof client->login.entity_type, "%s",
             message->entity_type ? message->entity_type : "");
    if (message->session_token && strlen(message->session_token) <= TESSERA_CLIENT_SESSION_TOKEN_MAX)
        snprintf(client->login.session_token, sizeof client->login.session_token, "%s", message->session_token);
    client->login.in_space = false;
    if (tessera_client__place_player(client) != 0) {
        tessera_client__protocol_error(client, "player created of an entity type the definitions lack");
        return;
    }
    client->stats.player_changes++;
    if (client->callbacks.on_player_changed) client->callbacks.on_player_changed(client, &client->login);
}

static void tessera_client__on_entered_space(tessera_client *client, const Tessera__Client__EnteredSpace *space) {
    if (client->state != TESSERA_CLIENT_IN_WORLD || client->login.in_space || space->entity_id == 0 ||
        space->entity_id != client->login.entity_id) {
        tessera_client__protocol_error(client, "entered space: not the player's entity, or already in a space");
        return;
    }
    /* The same numbers as a login reply's, read the same way. */
    Tessera__Client__LoginReply as_login = TESSERA__CLIENT__LOGIN_REPLY__INIT;
    as_login.entity_id = space->entity_id;
    as_login.position = space->position;
    as_login.yaw = space->yaw;
    as_login.view_radius = space->view_radius;
    as_login.view_hysteresis = space->view_hysteresis;
    as_login.max_speed = space->max_speed;
    as_login.tick_hz = space->tick_hz;
    as_login.space_name = space->space_name;
    as_login.max_aliases = space->max_aliases;
    as_login.position_precision = space->position_precision;
    as_login.world_min = space->world_min;
    as_login.world_max = space->world_max;
    as_login.yaw_steps = space->yaw_steps;
    as_login.detail_near_distance = space->detail_near_distance;
    as_login.detail_medium_distance = space->detail_medium_distance;
    tessera_client_login_info info = client->login;
    volatile_codec_config volatile_config;
    const char *wrong = tessera_client__read_login_numbers(&as_login, &info, &volatile_config);
    if (wrong) {
        tessera_client__protocol_error(client, wrong);
        return;
    }
    if (tessera_client__unplace_player(client) != 0) {
        tessera_client__protocol_error(client, "too many base properties waiting for the player's entity");
        return;
    }
    info.in_space = true;
    client->login = info;
    client->volatile_config = volatile_config;
    client->alias_bits = replication_alias_bits(info.max_aliases);
    if (client->callbacks.on_entered_space) client->callbacks.on_entered_space(client, &client->login);
}

/* ---- receiving: the entity stream ----------------------------------------- */

static tessera_client__entity *tessera_client__by_alias(const tessera_client *client, uint32_t alias) {
    return alias < client->alias_capacity ? client->aliases[alias] : NULL;
}

/* Marks the frame's stream broken for a reason the decoder cannot see (it
 * stops nothing: the decoder goes on, and the frame is refused after it).
 * The first reason is kept. */
static void tessera_client__break_stream(tessera_client *client, const char *format, ...)
    __attribute__((format(printf, 2, 3)));
static void tessera_client__break_stream(tessera_client *client, const char *format, ...) {
    if (client->frame.broken) return;
    client->frame.broken = 1;
    va_list args;
    va_start(args, format);
    vsnprintf(client->frame.broken_reason, sizeof client->frame.broken_reason, format, args);
    va_end(args);
}

/* Keeps a copy of a BaseProperties change list for when the player's entity
 * enters. Returns 0, or -1 when too much is waiting already. */
static int tessera_client__pend_base(tessera_client *client, const uint8_t *data, size_t length) {
    if (client->pending_bytes + length > TESSERA_CLIENT_PENDING_BASE_MAX_BYTES) return -1;
    if (client->pending_count == client->pending_capacity) {
        client->pending_capacity = client->pending_capacity ? client->pending_capacity * 2 : 4;
        client->pending = xrealloc(client->pending, client->pending_capacity * sizeof client->pending[0]);
    }
    tessera_client__pending *p = &client->pending[client->pending_count++];
    p->data = xmalloc(length > 0 ? length : 1);
    if (length > 0) memcpy(p->data, data, length);
    p->length = length;
    client->pending_bytes += length;
    return 0;
}

/* Applies one BaseProperties change list to the player's entity, all or
 * nothing; `changed` (may be NULL) receives what changed. Returns NULL, or
 * what is wrong (after trailing bytes the state holds the list's values,
 * but the client closes). */
static const char *tessera_client__apply_base(tessera_client *client, tessera_client__entity *entity,
                                              const uint8_t *data, size_t length, entity_state_mask *changed) {
    bit_reader r;
    bit_reader_init(&r, data, length);
    int rc = property_codec_decode_changes(&r, entity->pub.state, &client->base_masks[entity->pub.cls->id], changed);
    if (rc != 0) return property_codec_strerror(rc);
    /* Only the zero bits that pad the list to a byte may follow. */
    size_t left = bit_reader_remaining(&r);
    uint64_t pad;
    if (left >= 8 || bit_reader_read(&r, (unsigned)left, &pad) != 0 || pad != 0) return "bytes after the change list";
    return NULL;
}

/* The player's entity just entered: what BaseProperties said meanwhile
 * goes into it, in order. */
static void tessera_client__apply_pending_base(tessera_client *client, tessera_client__entity *entity) {
    for (size_t i = 0; i < client->pending_count; i++) {
        /* What changed is not reported: on_enter covers it. */
        const char *wrong =
            tessera_client__apply_base(client, entity, client->pending[i].data, client->pending[i].length, NULL);
        if (wrong) {
            tessera_client__break_stream(client, "base properties of entity %" PRIu64 ": %s", entity->pub.id, wrong);
            break;
        }
    }
    for (size_t i = 0; i < client->pending_count; i++) free(client->pending[i].data);
    client->pending_count = 0;
    client->pending_bytes = 0;
}

static entity_state *tessera_client__stream_enter(void *ctx, uint32_t alias, uint64_t entity_id,
                                                  const entity_def_class *cls, bool is_owner) {
    tessera_client *client = ctx;
    if (client->frame.broken) return NULL; /* refused anyway: create nothing more */
    if (alias >= client->login.max_aliases) {
        tessera_client__break_stream(client, "ENTER for alias %u, beyond max_aliases %u", alias,
                                     client->login.max_aliases);
        return NULL;
    }
    if (tessera_client__by_alias(client, alias)) {
        tessera_client__break_stream(client, "ENTER for alias %u, which is live", alias);
        return NULL;
    }
    if (id_map_get(&client->entities, entity_id)) {
        tessera_client__break_stream(client, "ENTER for entity %" PRIu64 ", which is in view already", entity_id);
        return NULL;
    }
    if (alias >= client->alias_capacity) {
        /* Aliases are handed out from 0 up, so the table grows with the
         * view rather than to max_aliases at once. */
        uint32_t capacity = client->alias_capacity ? client->alias_capacity : 64;
        while (capacity <= alias) capacity *= 2;
        if (capacity > client->login.max_aliases) capacity = client->login.max_aliases;
        client->aliases = xrealloc(client->aliases, capacity * sizeof(tessera_client__entity *));
        memset(client->aliases + client->alias_capacity, 0,
               (capacity - client->alias_capacity) * sizeof(tessera_client__entity *));
        client->alias_capacity = capacity;
    }
    tessera_client__entity *entity = tessera_client__entity_new(client, cls);
    entity->pub.id = entity_id;
    entity->pub.alias = alias;
    entity->pub.is_owner = is_owner;
    entity->pub.cls = cls;
    entity->pub.type = cls->name;
    entity->pub.last_tick = client->frame.tick;
    volatile_track_init(&entity->track);
    if (id_map_put(&client->entities, entity_id, entity) != 0) log_panic("id_map_put failed");
    client->aliases[alias] = entity;
    if (entity_id == client->login.entity_id) client->own = entity;
    entity->events = TESSERA_CLIENT__EVENT_ENTERED;
    tessera_client__list_push(&client->frame.entered, entity);
    client->stats.enters++;
    return entity->pub.state;
}

static entity_state *tessera_client__stream_find(void *ctx, uint32_t alias, bool *is_owner) {
    tessera_client__entity *entity = tessera_client__by_alias(ctx, alias);
    if (!entity) return NULL;
    *is_owner = entity->pub.is_owner;
    return entity->pub.state;
}

static int tessera_client__stream_move(void *ctx, uint32_t alias, bit_reader *r) {
    tessera_client *client = ctx;
    tessera_client__entity *entity = tessera_client__by_alias(client, alias);
    int rc;
    if (!entity) {
        rc = volatile_codec_skip(r, &client->volatile_config);
    } else {
        float x, y, z, yaw;
        rc = volatile_codec_decode(r, &entity->track, &client->volatile_config, &x, &y, &z, &yaw);
        if (rc == 0) {
            entity->pub.x = x;
            entity->pub.y = y;
            entity->pub.z = z;
            entity->pub.yaw = yaw;
            entity->pub.last_tick = client->frame.tick;
            entity->pub.last_move_stamp_us = client->frame.stamp_us;
            if (!(entity->events & (TESSERA_CLIENT__EVENT_ENTERED | TESSERA_CLIENT__EVENT_MOVED))) {
                entity->events |= TESSERA_CLIENT__EVENT_MOVED;
                tessera_client__list_push(&client->frame.moved, entity);
            }
            return 1;
        }
    }
    if (rc < 0) {
        client->frame.move_error = rc;
        client->frame.move_error_alias = alias;
        return rc;
    }
    return 0;
}

static void tessera_client__stream_leave(void *ctx, uint32_t alias) {
    tessera_client *client = ctx;
    tessera_client__entity *entity = tessera_client__by_alias(client, alias);
    if (!entity) {
        client->stats.stale_leaves++;
        return;
    }
    client->aliases[alias] = NULL;
    id_map_remove(&client->entities, entity->pub.id);
    if (client->own == entity) client->own = NULL;
    if (entity->pub.id == client->login.entity_id) {
        /* The cell never sends the base's properties: keep them for when
         * the player's entity comes back, as if BaseProperties said so. */
        const entity_state_mask *base = &client->base_masks[entity->pub.cls->id];
        if (!entity_state_mask_empty(base)) {
            bit_writer_reset(&client->scratch);
            property_codec_encode_changes(&client->scratch, entity->pub.state, base);
            if (tessera_client__pend_base(client, bit_writer_data(&client->scratch),
                                          bit_writer_bytes(&client->scratch)) != 0)
                tessera_client__break_stream(client, "too many base properties waiting for the player's entity");
        }
    }
    entity->events |= TESSERA_CLIENT__EVENT_DEPARTED;
    tessera_client__list_push(&client->frame.departed, entity);
    client->stats.leaves++;
}

// cppcheck-suppress constParameter ; a replication_decode_callbacks member: the table fixes its type
static void tessera_client__stream_changed(void *ctx, uint32_t alias, entity_state *state,
                                           const entity_state_mask *changed) {
    tessera_client *client = ctx;
    tessera_client__entity *entity = tessera_client__by_alias(client, alias);
    if (!entity || entity->pub.state != state) return; /* cannot be: the state came from enter or find */
    for (size_t w = 0; w < ENTITY_STATE_MASK_WORDS; w++) entity->changed.words[w] |= changed->words[w];
    entity->pub.last_tick = client->frame.tick;
    if (entity->events & TESSERA_CLIENT__EVENT_ENTERED) {
        /* This is the ENTER itself, just applied. */
        if (entity->pub.id == client->login.entity_id && client->pending_count > 0)
            tessera_client__apply_pending_base(client, entity);
        return;
    }
    if (entity_state_mask_empty(changed) || (entity->events & TESSERA_CLIENT__EVENT_CHANGED)) return;
    entity->events |= TESSERA_CLIENT__EVENT_CHANGED;
    tessera_client__list_push(&client->frame.changed, entity);
}

static const replication_decode_callbacks tessera_client__stream_callbacks = {
    .enter = tessera_client__stream_enter,
    .find = tessera_client__stream_find,
    .move = tessera_client__stream_move,
    .leave = tessera_client__stream_leave,
    .changed = tessera_client__stream_changed,
};

/* Forgets the frame's events and frees the entities that left. Runs after
 * every ViewUpdate, whether it was applied whole or refused. */
static void tessera_client__end_frame(tessera_client *client) {
    tessera_client__list *lists[] = {&client->frame.entered, &client->frame.moved, &client->frame.changed};
    for (size_t l = 0; l < sizeof lists / sizeof lists[0]; l++) {
        for (size_t i = 0; i < lists[l]->count; i++) {
            tessera_client__entity *entity = lists[l]->items[i];
            if (entity->events & TESSERA_CLIENT__EVENT_DEPARTED) continue; /* freed below */
            if (entity->events & (TESSERA_CLIENT__EVENT_ENTERED | TESSERA_CLIENT__EVENT_CHANGED)) {
                memset(&entity->changed, 0, sizeof entity->changed);
                entity_state_clear_dirty(entity->pub.state);
            }
            entity->events = 0;
        }
        lists[l]->count = 0;
    }
    for (size_t i = 0; i < client->frame.departed.count; i++)
        tessera_client__entity_retire(client, client->frame.departed.items[i]);
    client->frame.departed.count = 0;
    client->frame.broken = 0;
    client->frame.move_error = 0;
    client->frame.ticks_restart = false;
}

/* Whether `entity_id` left in the frame being applied. The cell queues a
 * call for the entities a client sees, and the entity may leave its view
 * before the update goes out: the LEAVE is in the stream, which comes
 * first. Such a call is stale, not a protocol error. */
static int tessera_client__departed(const tessera_client *client, uint64_t entity_id) {
    for (size_t i = 0; i < client->frame.departed.count; i++)
        if (client->frame.departed.items[i]->pub.id == entity_id) return 1;
    return 0;
}

/* Checks every ClientCall of `view` before any is delivered, so that a bad
 * one refuses the update before its callbacks. Returns 0, or -1 with the
 * client closing. */
static int tessera_client__check_calls(tessera_client *client, const Tessera__Client__ViewUpdate *view) {
    for (size_t i = 0; i < view->n_calls; i++) {
        const Tessera__Client__ClientCall *call = view->calls[i];
        char what[160];
        const tessera_client__entity *entity =
            call && call->entity_id ? id_map_get(&client->entities, call->entity_id) : NULL;
        if (!entity && call && tessera_client__departed(client, call->entity_id)) continue; /* stale: dropped */
        if (!entity) {
            snprintf(what, sizeof what, "client call on entity %" PRIu64 ", which is not in view",
                     call ? call->entity_id : 0);
            tessera_client__protocol_error(client, what);
            return -1;
        }
        const entity_def_class *cls = entity->pub.cls;
        if (call->method_id >= cls->method_count[ENTITY_DEF_PART_CLIENT]) {
            snprintf(what, sizeof what, "client call of method %u of %s, which has %zu client methods",
                     (unsigned)call->method_id, cls->name, cls->method_count[ENTITY_DEF_PART_CLIENT]);
            tessera_client__protocol_error(client, what);
            return -1;
        }
        const entity_def_method *method = &cls->methods[ENTITY_DEF_PART_CLIENT][call->method_id];
        int rc = method_call_check(method, call->args.data, call->args.len);
        if (rc != 0) {
            snprintf(what, sizeof what, "client call %s.%s with bad arguments: %s", cls->name, method->name,
                     method_call_strerror(rc));
            tessera_client__protocol_error(client, what);
            return -1;
        }
    }
    return 0;
}

/* Delivers one checked ClientCall (or drops a stale one). Returns 0, or -1
 * with the client closing. */
static int tessera_client__deliver_call(tessera_client *client, const Tessera__Client__ClientCall *call) {
    const tessera_client__entity *entity = id_map_get(&client->entities, call->entity_id);
    if (!entity) {
        client->stats.stale_calls++;
        return 0;
    }
    const entity_def_class *cls = entity->pub.cls;
    const entity_def_method *method = &cls->methods[ENTITY_DEF_PART_CLIENT][call->method_id];
    entity_state **args = &client->call_args[client->call_args_first[cls->id] + call->method_id];
    if (!*args) *args = method_call_args_create(method);
    int rc = method_call_decode(*args, call->args.data, call->args.len);
    if (rc != 0) {
        /* method_call_check passed, so this cannot be; refuse rather than trust it. */
        tessera_client__protocol_error(client, "client call arguments that check but do not decode");
        return -1;
    }
    client->stats.client_calls++;
    if (client->callbacks.on_client_call) client->callbacks.on_client_call(client, &entity->pub, method, *args);
    return 0;
}

/* Checks game events before any is delivered (as calls are). Returns 0, or
 * -1 with the client closing. */
static int tessera_client__check_events(tessera_client *client, Tessera__Client__GameEvent *const *events,
                                        size_t count) {
    for (size_t i = 0; i < count; i++) {
        char what[160];
        const entity_def_method *event =
            events[i] ? entity_def_registry_event(client->definitions, events[i]->event_id) : NULL;
        if (!event) {
            snprintf(what, sizeof what, "game event %u, which the definitions (%zu events) do not declare",
                     events[i] ? events[i]->event_id : 0, entity_def_registry_event_count(client->definitions));
            tessera_client__protocol_error(client, what);
            return -1;
        }
        int rc = method_call_check(event, events[i]->args.data, events[i]->args.len);
        if (rc != 0) {
            snprintf(what, sizeof what, "game event %s with fields that are not its declared types: %s", event->name,
                     method_call_strerror(rc));
            tessera_client__protocol_error(client, what);
            return -1;
        }
    }
    return 0;
}

/* Delivers one checked game event. */
static int tessera_client__deliver_event(tessera_client *client, const Tessera__Client__GameEvent *coded) {
    const entity_def_method *event = entity_def_registry_event(client->definitions, coded->event_id);
    entity_state *fields = method_call_args_create(event);
    int rc = method_call_decode(fields, coded->args.data, coded->args.len);
    if (rc != 0) {
        entity_state_free(fields);
        tessera_client__protocol_error(client, "game event fields that check but do not decode");
        return -1;
    }
    client->stats.game_events++;
    if (client->callbacks.on_event) client->callbacks.on_event(client, event, coded->source_id, fields);
    entity_state_free(fields);
    return 0;
}

/* A GameEvent outside any view update (a cluster event, or a user message
 * from the player's base). */
static void tessera_client__on_lone_event(tessera_client *client, const Tessera__Client__GameEvent *event) {
    if (client->state != TESSERA_CLIENT_IN_WORLD) {
        tessera_client__protocol_error(client, "game event before login completed");
        return;
    }
    Tessera__Client__GameEvent *events[1] = {(Tessera__Client__GameEvent *)event};
    if (tessera_client__check_events(client, events, 1) != 0) return;
    tessera_client__deliver_event(client, event);
}

/* At most this many lone calls wait for the player's own ENTER. */
#define TESSERA_CLIENT_MAX_HELD_CALLS 64

static void tessera_client__drop_held_calls(tessera_client *client) {
    for (size_t i = 0; i < client->held_count; i++) free(client->held_calls[i].args);
    free(client->held_calls);
    client->held_calls = NULL;
    client->held_count = 0;
}

static void tessera_client__on_lone_call(tessera_client *client, const Tessera__Client__ClientCall *call);

/* The player's own entity is in the table now: the calls that waited for
 * it go, in order. */
static void tessera_client__release_held_calls(tessera_client *client) {
    if (!client->held_count || !id_map_get(&client->entities, client->login.entity_id)) return;
    struct tessera_client__held_call *held = client->held_calls;
    size_t count = client->held_count;
    client->held_calls = NULL;
    client->held_count = 0;
    for (size_t i = 0; i < count; i++) {
        Tessera__Client__ClientCall call = TESSERA__CLIENT__CLIENT_CALL__INIT;
        call.entity_id = client->login.entity_id;
        call.method_id = held[i].method_id;
        call.args.data = held[i].args;
        call.args.len = held[i].length;
        if (tessera_client__in_world(client)) tessera_client__on_lone_call(client, &call);
        free(held[i].args);
    }
    free(held);
}

/* A client call outside any view update (from the player's base): checked
 * and delivered as one in a ViewUpdate would be. */
static void tessera_client__on_lone_call(tessera_client *client, const Tessera__Client__ClientCall *call) {
    if (client->state != TESSERA_CLIENT_IN_WORLD) {
        tessera_client__protocol_error(client, "client call before login completed");
        return;
    }
    if (call->entity_id && call->entity_id == client->login.entity_id &&
        !id_map_get(&client->entities, call->entity_id)) {
        if (client->held_count >= TESSERA_CLIENT_MAX_HELD_CALLS) {
            tessera_client__protocol_error(client, "too many client calls waiting for the player's entity");
            return;
        }
        client->held_calls = xrealloc(client->held_calls, (client->held_count + 1) * sizeof *client->held_calls);
        struct tessera_client__held_call *held = &client->held_calls[client->held_count++];
        held->method_id = call->method_id;
        held->length = call->args.len;
        held->args = xmalloc(call->args.len ? call->args.len : 1);
        if (call->args.len) memcpy(held->args, call->args.data, call->args.len);
        return;
    }
    Tessera__Client__ClientCall *calls[1] = {(Tessera__Client__ClientCall *)call};
    Tessera__Client__ViewUpdate one = TESSERA__CLIENT__VIEW_UPDATE__INIT;
    one.n_calls = 1;
    one.calls = calls;
    if (tessera_client__check_calls(client, &one) != 0) return;
    tessera_client__deliver_call(client, call);
}

/* Fires the callbacks of an applied frame, in the order tessera_client.h
 * gives. Returns 0, or -1 as soon as the client is no longer in the world. */
static int tessera_client__fire_frame(tessera_client *client, const Tessera__Client__ViewUpdate *view) {
    const tessera_client_callbacks *cb = &client->callbacks;
    for (size_t i = 0; i < client->frame.departed.count; i++) {
        tessera_client__entity *entity = client->frame.departed.items[i];
        if (entity->events & TESSERA_CLIENT__EVENT_ENTERED) continue; /* never shown */
        if (cb->on_leave) {
            cb->on_leave(client, entity->pub.id);
            if (!tessera_client__in_world(client)) return -1;
        }
    }
    for (size_t i = 0; i < client->frame.entered.count; i++) {
        tessera_client__entity *entity = client->frame.entered.items[i];
        if (entity->events & TESSERA_CLIENT__EVENT_DEPARTED) continue;
        if (cb->on_enter) {
            cb->on_enter(client, &entity->pub);
            if (!tessera_client__in_world(client)) return -1;
        }
    }
    for (size_t i = 0; i < client->frame.moved.count; i++) {
        tessera_client__entity *entity = client->frame.moved.items[i];
        if (entity->events & TESSERA_CLIENT__EVENT_DEPARTED) continue;
        if (cb->on_move) {
            cb->on_move(client, &entity->pub, view->stamp_us);
            if (!tessera_client__in_world(client)) return -1;
        }
    }
    for (size_t i = 0; i < client->frame.changed.count; i++) {
        tessera_client__entity *entity = client->frame.changed.items[i];
        if (entity->events & (TESSERA_CLIENT__EVENT_ENTERED | TESSERA_CLIENT__EVENT_DEPARTED)) continue;
        if (cb->on_properties_changed) {
            cb->on_properties_changed(client, &entity->pub, &entity->changed);
            if (!tessera_client__in_world(client)) return -1;
        }
    }
    for (size_t i = 0; i < view->n_calls; i++) {
        if (tessera_client__deliver_call(client, view->calls[i]) != 0) return -1;
        if (!tessera_client__in_world(client)) return -1;
    }
    for (size_t i = 0; i < view->n_events; i++) {
        if (tessera_client__deliver_event(client, view->events[i]) != 0) return -1;
        if (!tessera_client__in_world(client)) return -1;
    }
    return 0;
}

/* Applies one ViewUpdate: the whole stream first, then the callbacks. */
static void tessera_client__on_view(tessera_client *client, const Tessera__Client__ViewUpdate *view) {
    if (client->state != TESSERA_CLIENT_IN_WORLD) {
        tessera_client__protocol_error(client, "view update before login completed");
        return;
    }
    if (!client->login.in_space) {
        tessera_client__protocol_error(client, "view update while the player's entity is in no space");
        return;
    }
    uint32_t tick = view->tick;
    client->stats.view_updates++;
    client->stats.stream_bytes += view->stream.len;
    client->frame.ticks_restart = view->ticks_restart;
    if (client->callbacks.on_frame_begin) {
        client->callbacks.on_frame_begin(client, tick);
        if (!tessera_client__in_world(client)) return;
    }

    client->frame.tick = tick;
    client->frame.stamp_us = view->stamp_us;
    /* An update may carry no stream at all (only calls): nothing moved. */
    if (view->stream.len > 0) {
        bit_reader r;
        bit_reader_init(&r, view->stream.data, view->stream.len);
        replication_decode_stats decoded;
        int rc = replication_decode_stream(&r, client->schema, client->alias_bits, &tessera_client__stream_callbacks,
                                           client, &decoded);
        client->stats.moves += decoded.moves;
        client->stats.property_updates += decoded.updates;
        client->stats.discarded_records += decoded.discarded;
        if (rc != 0) {
            char what[192];
            if (client->frame.move_error != 0 && rc == client->frame.move_error)
                snprintf(what, sizeof what, "entity stream: MOVE record for alias %u: %s",
                         client->frame.move_error_alias,
                         rc == VOLATILE_CODEC_ERROR_RANGE     ? "position or yaw outside the world"
                         : rc == VOLATILE_CODEC_ERROR_NO_BASE ? "a delta before any absolute position"
                                                              : "truncated");
            else
                snprintf(what, sizeof what, "entity stream: %s", replication_strerror(rc));
            tessera_client__protocol_error(client, what);
            goto done;
        }
    }
    if (client->frame.broken) {
        char what[192];
        snprintf(what, sizeof what, "entity stream: %s", client->frame.broken_reason);
        tessera_client__protocol_error(client, what);
        goto done;
    }
    if (tessera_client__check_calls(client, view) != 0) goto done;
    if (tessera_client__check_events(client, view->events, view->n_events) != 0) goto done;
    if (tessera_client__fire_frame(client, view) != 0) goto done;
    if (client->callbacks.on_frame_end) client->callbacks.on_frame_end(client, tick);
done:
    tessera_client__end_frame(client);
    if (tessera_client__in_world(client)) tessera_client__release_held_calls(client);
}

/* ---- receiving: base properties, corrections, errors ---------------------- */

static void tessera_client__on_base_properties(tessera_client *client, const Tessera__Client__BaseProperties *message) {
    if (client->state != TESSERA_CLIENT_IN_WORLD) {
        tessera_client__protocol_error(client, "base properties before login completed");
        return;
    }
    if (message->entity_id != client->login.entity_id) {
        char what[128];
        snprintf(what, sizeof what, "base properties of entity %" PRIu64 ", not the player's %" PRIu64,
                 message->entity_id, client->login.entity_id);
        tessera_client__protocol_error(client, what);
        return;
    }
    client->stats.base_property_updates++;
    tessera_client__entity *own = id_map_get(&client->entities, message->entity_id);
    if (!own) {
        /* The first ones can come before the first ViewUpdate: the class
         * they are a change list of is known only once the entity enters. */
        if (tessera_client__pend_base(client, message->changes.data, message->changes.len) != 0)
            tessera_client__protocol_error(client, "too many base properties waiting for the player's entity");
        return;
    }
    entity_state_mask changed;
    const char *wrong = tessera_client__apply_base(client, own, message->changes.data, message->changes.len, &changed);
    if (wrong) {
        char what[160];
        snprintf(what, sizeof what, "base properties of entity %" PRIu64 ": %s", own->pub.id, wrong);
        tessera_client__protocol_error(client, what);
        return;
    }
    if (entity_state_mask_empty(&changed)) return;
    if (client->callbacks.on_properties_changed) client->callbacks.on_properties_changed(client, &own->pub, &changed);
    /* The callback may have closed the client; the entity lives until
     * on_closed either way. */
    entity_state_clear_dirty(own->pub.state);
}

static void tessera_client__on_correction(tessera_client *client, const Tessera__Client__Correction *message) {
    if (client->state != TESSERA_CLIENT_IN_WORLD) {
        tessera_client__protocol_error(client, "correction before login completed");
        return;
    }
    tessera_client_correction correction;
    if (tessera_client__read_vector(message->position, &correction.x, &correction.y, &correction.z) != 0 ||
        !isfinite(message->yaw)) {
        tessera_client__protocol_error(client, "correction with a non-finite number");
        return;
    }
    correction.yaw = message->yaw;
    correction.sequence = message->sequence;
    correction.reason = message->reason ? message->reason : "";
    client->stats.corrections++;
    tessera_client__place_own(client, correction.x, correction.y, correction.z, correction.yaw);
    if (client->callbacks.on_correction) client->callbacks.on_correction(client, &correction);
}

/* Teleported: the own entity moves; with another space, the whole view and
 * every alias are forgotten and the stream settings become the new
 * space's. */
static void tessera_client__on_teleported(tessera_client *client, const Tessera__Client__Teleported *message) {
    if (client->state != TESSERA_CLIENT_IN_WORLD) {
        tessera_client__protocol_error(client, "teleport before login completed");
        return;
    }
    tessera_client_teleport teleport;
    if (tessera_client__read_vector(message->position, &teleport.x, &teleport.y, &teleport.z) != 0 ||
        !isfinite(message->yaw)) {
        tessera_client__protocol_error(client, "teleport with a non-finite number");
        return;
    }
    teleport.yaw = message->yaw;
    teleport.space_changed = message->space_changed;
    if (message->space_changed) {
        tessera_client_login_info info = client->login;
        volatile_codec_config volatile_config;
        float min[3], max[3];
        if (tessera_client__read_vector(message->world_min, &min[0], &min[1], &min[2]) != 0 ||
            tessera_client__read_vector(message->world_max, &max[0], &max[1], &max[2]) != 0) {
            tessera_client__protocol_error(client, "teleport into a space with non-finite bounds");
            return;
        }
        double min_d[3] = {min[0], min[1], min[2]}, max_d[3] = {max[0], max[1], max[2]};
        if (volatile_codec_config_init(&volatile_config, message->position_precision, min_d, max_d,
                                       message->yaw_steps) != 0) {
            tessera_client__protocol_error(client, "teleport into a space whose settings the stream cannot use");
            return;
        }
        /* Every entity of the old space goes, as if each had left. */
        for (uint32_t alias = 0; alias < client->alias_capacity; alias++)
            if (client->aliases[alias]) tessera_client__stream_leave(client, alias);
        tessera_client__report_departures(client);
        if (!tessera_client__in_world(client)) return;
        snprintf(info.space_name, sizeof info.space_name, "%s", message->space_name ? message->space_name : "");
        info.position_precision = message->position_precision;
        memcpy(info.world_min, min, sizeof min);
        memcpy(info.world_max, max, sizeof max);
        info.yaw_steps = message->yaw_steps;
        client->login = info;
        client->volatile_config = volatile_config;
    }
    client->stats.teleports++;
    tessera_client__place_own(client, teleport.x, teleport.y, teleport.z, teleport.yaw);
    teleport.space_name = client->login.space_name;
    if (!message->space_changed && message->space_name && message->space_name[0])
        teleport.space_name = message->space_name;
    if (client->callbacks.on_teleported) client->callbacks.on_teleported(client, &teleport);
}

/* EntityRestored: the cellapp that held the player's entity died and
 * another brought it back; the view starts again from nothing, as after a
 * teleport into another space (same space, same stream settings). */
static void tessera_client__on_restored(tessera_client *client, const Tessera__Client__EntityRestored *message) {
    if (client->state != TESSERA_CLIENT_IN_WORLD) {
        tessera_client__protocol_error(client, "restore before login completed");
        return;
    }
    tessera_client_restore restore;
    if (tessera_client__read_vector(message->position, &restore.x, &restore.y, &restore.z) != 0 ||
        !isfinite(message->yaw)) {
        tessera_client__protocol_error(client, "restore with a non-finite number");
        return;
    }
    restore.yaw = message->yaw;
    restore.state_age_ms = message->state_age_ms;
    restore.from_ghost = message->from_ghost;
    for (uint32_t alias = 0; alias < client->alias_capacity; alias++)
        if (client->aliases[alias]) tessera_client__stream_leave(client, alias);
    tessera_client__report_departures(client);
    if (!tessera_client__in_world(client)) return;
    client->stats.restores++;
    tessera_client__place_own(client, restore.x, restore.y, restore.z, restore.yaw);
    if (client->callbacks.on_restored) client->callbacks.on_restored(client, &restore);
}

static void tessera_client__on_server_error(tessera_client *client, const Tessera__Client__Error *error) {
    int code = (int)error->code;
    const char *text = error->message ? error->message : "";
    client->stats.errors++;
    client->error_retry_after_ms = error->retry_after_ms;
    int before_world = client->state != TESSERA_CLIENT_IN_WORLD;
    if (client->callbacks.on_error) {
        client->callbacks.on_error(client, code, text);
        if (!tessera_client__is_open(client)) return;
    }
    if (before_world) {
        /* Without a login there is nothing left to do on this connection. */
        char reason[192];
        snprintf(reason, sizeof reason, "server error %s: %s", tessera_client_error_name(code), text);
        tessera_client__close_with(client, TESSERA_CLIENT_CLOSED_SERVER_ERROR, reason);
    }
}

/* Handles one frame body: unpacked into the arena, dispatched, released. */
static void tessera_client__handle_frame(tessera_client *client, const uint8_t *frame, size_t length) {
    client->stats.frames_in++;
    client->stats.bytes_in += length + FRAME_HEADER_BYTES;

    tessera_client__arena_rewind(&client->arena, length);
    Tessera__Client__ServerToClient *message =
        tessera__client__server_to_client__unpack(&client->arena.allocator, length, frame);
    if (!message) {
        tessera_client__protocol_error(client, "a frame that does not decode as ServerToClient");
        return;
    }
    switch (message->body_case) {
        case TESSERA__CLIENT__SERVER_TO_CLIENT__BODY_HELLO:
            tessera_client__on_server_hello(client, message->hello);
            break;
        case TESSERA__CLIENT__SERVER_TO_CLIENT__BODY_LOGIN_REPLY:
            tessera_client__on_login_reply(client, message->login_reply);
            break;
        case TESSERA__CLIENT__SERVER_TO_CLIENT__BODY_VIEW:
            tessera_client__on_view(client, message->view);
            break;
        case TESSERA__CLIENT__SERVER_TO_CLIENT__BODY_BASE_PROPERTIES:
            tessera_client__on_base_properties(client, message->base_properties);
            break;
        case TESSERA__CLIENT__SERVER_TO_CLIENT__BODY_CORRECTION:
            tessera_client__on_correction(client, message->correction);
            break;
        case TESSERA__CLIENT__SERVER_TO_CLIENT__BODY_RESTORED:
            tessera_client__on_restored(client, message->restored);
            break;
        case TESSERA__CLIENT__SERVER_TO_CLIENT__BODY_TELEPORTED:
            tessera_client__on_teleported(client, message->teleported);
            break;
        case TESSERA__CLIENT__SERVER_TO_CLIENT__BODY_ERROR:
            tessera_client__on_server_error(client, message->error);
            break;
        case TESSERA__CLIENT__SERVER_TO_CLIENT__BODY_PLAYER_DESTROYED:
            tessera_client__on_player_destroyed(client, message->player_destroyed);
            break;
        case TESSERA__CLIENT__SERVER_TO_CLIENT__BODY_PLAYER_CREATED:
            tessera_client__on_player_created(client, message->player_created);
            break;
        case TESSERA__CLIENT__SERVER_TO_CLIENT__BODY_ENTERED_SPACE:
            tessera_client__on_entered_space(client, message->entered_space);
            break;
        case TESSERA__CLIENT__SERVER_TO_CLIENT__BODY_LOGIN_REDIRECT:
            tessera_client__on_login_redirect(client, message->login_redirect);
            break;
        case TESSERA__CLIENT__SERVER_TO_CLIENT__BODY_CALL:
            tessera_client__on_lone_call(client, message->call);
            break;
        case TESSERA__CLIENT__SERVER_TO_CLIENT__BODY_EVENT:
            tessera_client__on_lone_event(client, message->event);
            break;
        default:
            tessera_client__protocol_error(client, "a frame with no body this client knows");
            break;
    }
    /* No free_unpacked: every byte of the message is the arena's, taken
     * back whole at the next rewind, and protobuf-c's walk of the message
     * would only call the arena's no-op free for each part. */
}

static void tessera_client__on_frame(channel *ch, const uint8_t *frame, size_t length) {
    tessera_client *client = channel_user_data(ch);
    if (!tessera_client__is_open(client)) return;
    if (client->callbacks.on_frame_received) client->callbacks.on_frame_received(client, frame, length);
    tessera_client__handle_frame(client, frame, length);
}

int tessera_client_process_frame(tessera_client *client, const uint8_t *frame, size_t length) {
    if (!tessera_client__is_open(client) || (!frame && length > 0)) return -1;
    tessera_client__handle_frame(client, frame, length);
    return tessera_client__is_open(client) ? 0 : -1;
}

static void tessera_client__on_connect(channel *ch, int status) {
    tessera_client *client = channel_user_data(ch);
    if (status != 0 || client->state != TESSERA_CLIENT_CONNECTING) return; /* on_close follows a failure */
    client->connected = 1;
    tessera_client__send_hello(client);
}

/* ---- requests ------------------------------------------------------------- */

int tessera_client_set_name(tessera_client *client, const char *name) {
    if (client->state != TESSERA_CLIENT_DISCONNECTED || !name) return -1;
    if (strlen(name) > TESSERA_CLIENT_HELLO_NAME_MAX) return -1;
    snprintf(client->name, sizeof client->name, "%s", name);
    return 0;
}

/* The SDK's TLS context is common/tls.h's client context. */
struct tessera_client_tls {
    tls_context *context;
};

tessera_client_tls *tessera_client_tls_create(const char *ca_file, char *err, size_t errlen) {
    tls_context *context = tls_client_context_create(ca_file, err, errlen);
    if (!context) return NULL;
    tessera_client_tls *tls = xcalloc(1, sizeof *tls);
    tls->context = context;
    return tls;
}

void tessera_client_tls_free(tessera_client_tls *tls) {
    if (!tls) return;
    tls_context_free(tls->context);
    free(tls);
}

int tessera_client_use_tls(tessera_client *client, tessera_client_tls *tls, const char *server_name) {
    if (client->state != TESSERA_CLIENT_DISCONNECTED || !tls || !server_name) return -1;
    if (strlen(server_name) >= sizeof client->tls_server_name) return -1;
    client->tls = tls;
    snprintf(client->tls_server_name, sizeof client->tls_server_name, "%s", server_name);
    return 0;
}

int tessera_client_use_websocket(tessera_client *client) {
    if (client->state != TESSERA_CLIENT_DISCONNECTED) return -1;
    client->websocket = true;
    return 0;
}

int tessera_client_connect(tessera_client *client, const char *host, int port) {
    if (client->state != TESSERA_CLIENT_DISCONNECTED || !host || port <= 0 || port > 65535) return -1;
    return tessera_client__dial(client, host, port);
}

static int tessera_client__dial(tessera_client *client, const char *host, int port) {
    channel_options options = {
        .max_frame_bytes = TESSERA_CLIENT_MAX_FRAME_BYTES,
        .write_high_water_bytes = TESSERA_CLIENT_HIGH_WATER_BYTES,
        .write_limit_bytes = TESSERA_CLIENT_WRITE_LIMIT_BYTES,
        .totals = NULL,
        .tls = client->tls ? client->tls->context : NULL,
        .tls_server_name = client->tls_server_name,
        .websocket = client->websocket,
    };
    channel_callbacks callbacks = {
        .on_frame = tessera_client__on_frame,
        .on_connect = tessera_client__on_connect,
        .on_close = tessera_client__on_channel_close,
    };
    /* The address as logs and redirects name it; no IP address is too
     * long for it, and channel_connect takes nothing else. */
    char address[TESSERA_CLIENT_ADDRESS_BYTES];
    int length = strchr(host, ':') ? snprintf(address, sizeof address, "[%s]:%d", host, port) /* IPv6 */
                                   : snprintf(address, sizeof address, "%s:%d", host, port);
    if (length < 0 || (size_t)length >= sizeof address) return -1;
    channel *ch = channel_connect(client->loop, host, port, &options, &callbacks, client);
    if (!ch) return -1;
    client->ch = ch;
    memcpy(client->address, address, (size_t)length + 1);
    client->state = TESSERA_CLIENT_CONNECTING;
    return 0;
}

/* 1..64 bytes of [A-Za-z0-9_.-], as client.proto asks. */
static int tessera_client__valid_account(const char *account) {
    size_t length = strlen(account);
    if (length == 0 || length > TESSERA_CLIENT_ACCOUNT_MAX) return 0;
    for (size_t i = 0; i < length; i++) {
        char c = account[i];
        int ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
                 c == '-';
        if (!ok) return 0;
    }
    return 1;
}

/* Keeps one login request -- the account and its credential (`secret`,
 * 1..max_length bytes, copied into `slot`, a buffer of max_length + 1) --
 * and sends it once the hello exchange is done. Returns 0, or -1 as
 * tessera_client_login says. */
static int tessera_client__request_login(tessera_client *client, const char *account, const char *secret, char *slot,
                                         size_t max_length) {
    if (client->login_requested || !tessera_client__is_open(client)) return -1;
    if (!account || !secret || !tessera_client__valid_account(account)) return -1;
    size_t length = strlen(secret);
    if (length == 0 || length > max_length) return -1;
    snprintf(client->account, sizeof client->account, "%s", account);
    snprintf(slot, max_length + 1, "%s", secret);
    client->login_requested = 1;
    if (client->state == TESSERA_CLIENT_AWAITING_LOGIN) tessera_client__send_login(client);
    return 0;
}

int tessera_client_login(tessera_client *client, const char *account, const char *password) {
    return tessera_client__request_login(client, account, password, client->password, TESSERA_CLIENT_PASSWORD_MAX);
}

int tessera_client_reconnect(tessera_client *client, const char *account, const char *session_token) {
    return tessera_client__request_login(client, account, session_token, client->session_token,
                                         TESSERA_CLIENT_SESSION_TOKEN_MAX);
}

int tessera_client_token_login(tessera_client *client, const char *account, const char *token) {
    return tessera_client__request_login(client, account, token, client->login_token, TESSERA_CLIENT_SESSION_TOKEN_MAX);
}

/* ---- queries -------------------------------------------------------------- */

const char *tessera_client_redirect_token(const tessera_client *client) {
    return client->state == TESSERA_CLIENT_CLOSED && !client->connected ? client->login_token : "";
}

tessera_client_state tessera_client_get_state(const tessera_client *client) { return tessera_client__state(client); }
void *tessera_client_user_data(const tessera_client *client) { return client->user_data; }
void tessera_client_set_user_data(tessera_client *client, void *user_data) { client->user_data = user_data; }

const entity_def_registry *tessera_client_definitions(const tessera_client *client) { return client->definitions; }

const tessera_client_login_info *tessera_client_login_info_get(const tessera_client *client) {
    return client->login.entity_id != 0 ? &client->login : NULL;
}

const char *tessera_client_server_name(const tessera_client *client) { return client->server_name; }

const char *tessera_client_address(const tessera_client *client) { return client->address; }

uint32_t tessera_client_error_retry_after_ms(const tessera_client *client) { return client->error_retry_after_ms; }

const tessera_client_entity *tessera_client_entity_find(const tessera_client *client, uint64_t entity_id) {
    if (entity_id == 0) return NULL;
    if (client->own && client->own->pub.id == entity_id) return &client->own->pub;
    const tessera_client__entity *entity = id_map_get(&client->entities, entity_id);
    return entity ? &entity->pub : NULL;
}

size_t tessera_client_entity_count(const tessera_client *client) { return id_map_count(&client->entities); }

const tessera_client_entity *tessera_client_entity_by_alias(const tessera_client *client, uint32_t alias) {
    const tessera_client__entity *entity = tessera_client__by_alias(client, alias);
    return entity ? &entity->pub : NULL;
}

const tessera_client_entity *tessera_client_entity_next(const tessera_client *client, size_t *cursor) {
    uint64_t id;
    void *value;
    if (!id_map_next(&client->entities, cursor, &id, &value)) return NULL;
    return &((const tessera_client__entity *)value)->pub;
}

void tessera_client_get_stats(const tessera_client *client, tessera_client_stats *out) { *out = client->stats; }
