/* tessera_client.h -- the C client SDK: one game client talking to one
 * baseapp over the client wire (proto/client.proto).
 *
 * A client runs on a caller-supplied libuv loop and owns one channel
 * (common/channel.h). It performs the hello and login exchange, then keeps
 * the table of entities the player currently sees (id -> position, yaw,
 * type, last move stamp), applying each ViewUpdate in the order the wire
 * defines (leaves, then enters, then moves) and telling the caller through
 * callbacks. Nothing protobuf crosses this API: callers see plain structs.
 *
 * Lifecycle (mirrors channel.h):
 *
 *   tessera_client_create -> tessera_client_connect -> ... ->
 *   tessera_client_close (or the connection ends) -> on_closed -> freed
 *
 *  - on_closed fires exactly once for every client tessera_client_create
 *    returned, always from the loop (never inside tessera_client_close), and
 *    the client's memory is released when on_closed returns. The pointer
 *    must not be used afterwards.
 *  - After tessera_client_close was called no callback other than on_closed
 *    fires, even for data already received.
 *  - tessera_client_close is idempotent and safe inside any callback.
 *  - A function that returns -1 has started nothing: no callback follows
 *    from it.
 *
 * Not owned here: reconnecting, name resolution (hosts are IP literals, as
 * in channel.h), and the player's own position (the caller decides where it
 * walks; the SDK sends what it is told).
 */
#ifndef TESSERA_CLIENT_H
#define TESSERA_CLIENT_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

typedef struct tessera_client tessera_client;

/* Where a client is in its conversation with the baseapp. */
typedef enum tessera_client_state {
    TESSERA_CLIENT_DISCONNECTED,  /* created; tessera_client_connect not called yet (or it failed) */
    TESSERA_CLIENT_CONNECTING,    /* TCP dial in progress; nothing sent yet */
    TESSERA_CLIENT_HELLO_SENT,    /* connected, hello sent; waiting for the server's hello */
    TESSERA_CLIENT_AWAITING_LOGIN,/* hello exchanged; waiting for the caller to call tessera_client_login */
    TESSERA_CLIENT_LOGIN_SENT,    /* login sent; waiting for login_reply (or an error) */
    TESSERA_CLIENT_IN_WORLD,      /* logged in: moves go out, view updates and corrections come in */
    TESSERA_CLIENT_CLOSING,       /* tessera_client_close called or the connection ended; on_closed pending */
    TESSERA_CLIENT_CLOSED,        /* on_closed is running; the memory goes when it returns */
} tessera_client_state;

/* Why a client closed, as on_closed reports it. */
typedef enum tessera_client_close_cause {
    TESSERA_CLIENT_CLOSED_BY_CALLER,      /* tessera_client_close */
    TESSERA_CLIENT_CLOSED_CONNECT_FAILED, /* the TCP connection could not be made */
    TESSERA_CLIENT_CLOSED_SERVER_ERROR,   /* the server sent an Error before login completed (on_error told) */
    TESSERA_CLIENT_CLOSED_PROTOCOL,       /* the server sent an undecodable, unknown or out-of-order frame */
    TESSERA_CLIENT_CLOSED_DISCONNECTED,   /* the connection ended: peer closed, I/O error, frame too large */
} tessera_client_close_cause;

/* Error codes the server sends (numerically equal to tessera.client.ErrorCode;
 * codes this list does not know are passed through unchanged). */
typedef enum tessera_client_error {
    TESSERA_CLIENT_ERROR_NONE = 0,
    TESSERA_CLIENT_ERROR_MALFORMED_FRAME = 1,
    TESSERA_CLIENT_ERROR_FRAME_TOO_LARGE = 2,
    TESSERA_CLIENT_ERROR_UNKNOWN_MESSAGE = 3,
    TESSERA_CLIENT_ERROR_NOT_LOGGED_IN = 4,
    TESSERA_CLIENT_ERROR_PROTOCOL_VERSION_MISMATCH = 5,
    TESSERA_CLIENT_ERROR_BAD_CREDENTIALS = 6,
    TESSERA_CLIENT_ERROR_UNAVAILABLE = 7,
    TESSERA_CLIENT_ERROR_OUT_OF_ORDER = 8,
    TESSERA_CLIENT_ERROR_INVALID_ARGUMENT = 9,
    TESSERA_CLIENT_ERROR_REPLACED = 10,
    TESSERA_CLIENT_ERROR_SLOW_CONSUMER = 11,
    TESSERA_CLIENT_ERROR_SERVER_SHUTDOWN = 12,
} tessera_client_error;

/* Bytes of an entity type the table keeps (longer types are truncated). */
#define TESSERA_CLIENT_TYPE_BYTES 32
/* Bytes of the space name kept from the login reply (truncated likewise). */
#define TESSERA_CLIENT_NAME_BYTES 64

/* One entity in the client's view. Owned by the client; a pointer to it is
 * valid until the next frame is processed or the client closes, whichever
 * comes first. */
typedef struct tessera_client_entity {
    uint64_t id;
    float x, y, z;
    float yaw;                              /* radians */
    char type[TESSERA_CLIENT_TYPE_BYTES];   /* entity_type from its enter, NUL-terminated */
    uint64_t last_move_stamp_us;            /* stamp_us of the last move applied; 0 until one arrives */
    uint32_t last_tick;                     /* cell tick of the update that last touched it */
} tessera_client_entity;

/* What the login reply said. */
typedef struct tessera_client_login_info {
    uint64_t entity_id;          /* the player's own entity */
    float x, y, z, yaw;          /* where it spawned */
    float view_radius;           /* entities within this distance on X and on Z (a square) are in view */
    float view_hysteresis;       /* ... and stay in view until this much further */
    float max_speed;             /* metres per second the cell accepts */
    uint32_t tick_hz;
    char space_name[TESSERA_CLIENT_NAME_BYTES];
    char definitions_digest[65];  /* hex digest of the game's entity definitions */
    size_t definition_classes;    /* entity types they declare */
} tessera_client_login_info;

/* A refused move: the player is back at this position. */
typedef struct tessera_client_correction {
    float x, y, z, yaw;
    uint32_t sequence;           /* the refused move's sequence */
    const char *reason;          /* valid during the callback only */
} tessera_client_correction;

typedef struct tessera_client_stats {
    uint64_t frames_in;          /* frames received and dispatched */
    uint64_t bytes_in;           /* their bytes, including the 4-byte length prefixes */
    uint64_t frames_out;
    uint64_t bytes_out;          /* encoded bodies plus length prefixes */
    uint64_t view_updates;
    uint64_t enters, leaves, moves;
    uint64_t corrections;
    uint64_t errors;             /* Error messages received from the server */
    uint64_t stale_leaves;       /* leaves naming an id not in the table: ignored */
    uint64_t stale_moves;        /* moves naming an id not in the table: ignored */
    uint64_t duplicate_enters;   /* enters for an id already in the table: state replaced, no on_enter */
} tessera_client_stats;

/* Every callback may be NULL. Each gets the client as first argument; the
 * caller's pointer is tessera_client_user_data(client). */
typedef struct tessera_client_callbacks {
    /* login_reply arrived; the client is IN_WORLD. `info` stays valid until
     * the client closes (tessera_client_login_info_get returns it too). */
    void (*on_logged_in)(tessera_client *client, const tessera_client_login_info *info);
    /* Around each ViewUpdate: on_frame_begin before its leaves, enters and
     * moves are applied, on_frame_end after all of them (the pre- and
     * post-data-update notifications). on_frame_end is skipped if the client
     * was closed during the update. */
    void (*on_frame_begin)(tessera_client *client, uint32_t tick);
    void (*on_frame_end)(tessera_client *client, uint32_t tick);
    /* An entity entered the view and is now in the table. */
    void (*on_enter)(tessera_client *client, const tessera_client_entity *entity);
    /* An entity left the view; it is no longer in the table. */
    void (*on_leave)(tessera_client *client, uint64_t entity_id);
    /* A known entity moved; `entity` already holds the new state. */
    void (*on_move)(tessera_client *client, const tessera_client_entity *entity, uint64_t stamp_us);
    /* The cell refused a move and put the player back. */
    void (*on_correction)(tessera_client *client, const tessera_client_correction *correction);
    /* The server sent an Error (code: tessera_client_error values). Before
     * login completed the client then closes with CLOSED_SERVER_ERROR; in
     * the world it stays open (the server closes if it means to). `message`
     * is valid during the call only. */
    void (*on_error)(tessera_client *client, int code, const char *message);
    /* Last callback, exactly once. The entity table and stats are still
     * readable during it; the client is freed when it returns. */
    void (*on_closed)(tessera_client *client, tessera_client_close_cause cause, const char *reason);
} tessera_client_callbacks;

/* Creates a client on `loop` (which must outlive it). `callbacks` is
 * copied. Never fails (out of memory aborts). The client ends only through
 * tessera_client_close or the connection ending, and on_closed fires once
 * in either case. */
tessera_client *tessera_client_create(uv_loop_t *loop, const tessera_client_callbacks *callbacks, void *user_data);

/* Sets the free-text name sent in hello (at most 64 bytes; default
 * "tessera-client"). Returns 0, or -1 if already connecting or too long. */
int tessera_client_set_name(tessera_client *client, const char *name);

/* Dials host:port (an IP literal) and, once connected, sends hello. Only
 * from DISCONNECTED. Returns 0 (the outcome arrives through callbacks:
 * on_logged_in, on_error or on_closed with CLOSED_CONNECT_FAILED), or -1
 * if the address is not an IP literal, the socket cannot be created or the
 * state is wrong; the client is then still DISCONNECTED and may be closed
 * or connected again. */
int tessera_client_connect(tessera_client *client, const char *host, int port);

/* Asks to log in. May be called before or during connecting: the request
 * is kept and sent right after the hello exchange. Returns 0, or -1 if a
 * login was already requested, the client is closing, the account is not
 * 1..64 bytes of [A-Za-z0-9_.-] or the password not 1..128 bytes. */
int tessera_client_login(tessera_client *client, const char *account, const char *password);

/* Sends the player's position (metres) and yaw (radians) with the next
 * sequence number. Only IN_WORLD. Returns 0, or -1 if not in the world, a
 * number is not finite (nothing sent), or the connection is failing (it
 * then closes; on_closed follows). */
int tessera_client_send_move(tessera_client *client, float x, float y, float z, float yaw);
/* Sequence number of the last move sent (0 before the first). */
uint32_t tessera_client_last_sequence(const tessera_client *client);

/* Starts closing. Idempotent; safe inside any callback; on_closed fires
 * later from the loop and the memory is freed when it returns. */
void tessera_client_close(tessera_client *client);

tessera_client_state tessera_client_get_state(const tessera_client *client);
void *tessera_client_user_data(const tessera_client *client);
void tessera_client_set_user_data(tessera_client *client, void *user_data);
/* The login reply, or NULL before IN_WORLD. */
const tessera_client_login_info *tessera_client_login_info_get(const tessera_client *client);
/* The game's entity definitions received at login (checked against their
 * digest), or NULL before login. Owned by the client. */
const struct entity_def_registry *tessera_client_definitions(const tessera_client *client);
/* The name the server gave in its hello ("" before it arrives). */
const char *tessera_client_server_name(const tessera_client *client);

/* The entity with this id in the view, or NULL (unknown or already left). */
const tessera_client_entity *tessera_client_entity_find(const tessera_client *client, uint64_t entity_id);
size_t tessera_client_entity_count(const tessera_client *client);
/* Iteration over the view: set *cursor = 0, then each call returns the next
 * entity or NULL at the end. The table must not change during an iteration,
 * so do not keep a cursor across loop turns (frames change the table). */
const tessera_client_entity *tessera_client_entity_next(const tessera_client *client, size_t *cursor);

/* Copies the counters into *out. */
void tessera_client_get_stats(const tessera_client *client, tessera_client_stats *out);

/* Short lower-case names for logs and reports: "in_world", "bad_credentials",
 * "connect_failed". Unknown values give "unknown". Never NULL. */
const char *tessera_client_state_name(tessera_client_state state);
const char *tessera_client_error_name(int code);
const char *tessera_client_close_cause_name(tessera_client_close_cause cause);

#endif
