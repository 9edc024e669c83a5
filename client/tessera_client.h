/* tessera_client.h -- the C client SDK: one game client talking to one
 * baseapp over the client wire (proto/client.proto, PROTOCOL_VERSION 3).
 *
 * A client runs on a caller-supplied libuv loop and owns one channel
 * (common/channel.h). It performs the hello and login exchange, learns the
 * game's entity definitions from the login reply, then keeps the table of
 * entities the player currently sees: for each, its class, its properties
 * (an entity_state of that class, read with entity_state_get_* and the
 * property ids of entity_def_class_find_property), its position and yaw.
 * Each ViewUpdate carries the bit-packed entity stream (common/replication.c
 * documents it: ENTER, LEAVE, property UPDATE and volatile MOVE records
 * naming entities by per-client alias) and the client method calls of that
 * tick; BaseProperties carries the player's base-side properties. The SDK
 * applies them and tells the caller through callbacks, and sends moves and
 * calls of exposed methods. Nothing protobuf crosses this API.
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
 * Input from the server is never trusted: anything that does not decode,
 * breaks the stream's rules or arrives out of order closes the client with
 * CLOSED_PROTOCOL; it never stops the process.
 *
 * Not owned here: deciding to reconnect and where (the caller makes a new
 * client and calls tessera_client_reconnect; the SDK only follows the
 * redirects a reconnect is answered with), name resolution (hosts are IP
 * literals, as in channel.h), and the player's own position (the caller
 * decides where it walks; the SDK sends what it is told).
 */
#ifndef TESSERA_CLIENT_H
#define TESSERA_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "entity_def.h"
#include "entity_state.h"

typedef struct tessera_client tessera_client;

/* Where a client is in its conversation with the baseapp. */
typedef enum tessera_client_state {
    TESSERA_CLIENT_DISCONNECTED,   /* created; tessera_client_connect not called yet (or it failed) */
    TESSERA_CLIENT_CONNECTING,     /* TCP dial in progress; nothing sent yet */
    TESSERA_CLIENT_HELLO_SENT,     /* connected, hello sent; waiting for the server's hello */
    TESSERA_CLIENT_AWAITING_LOGIN, /* hello exchanged; waiting for the caller to call tessera_client_login */
    TESSERA_CLIENT_LOGIN_SENT,     /* login sent; waiting for login_reply (or an error) */
    TESSERA_CLIENT_IN_WORLD,       /* logged in: moves go out, view updates and corrections come in */
    TESSERA_CLIENT_CLOSING,        /* tessera_client_close called or the connection ended; on_closed pending */
    TESSERA_CLIENT_CLOSED,         /* on_closed is running; the memory goes when it returns */
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
    TESSERA_CLIENT_ERROR_NOT_EXPOSED = 13,
    TESSERA_CLIENT_ERROR_BAD_ARGUMENTS = 14,
    TESSERA_CLIENT_ERROR_UNKNOWN_ENTITY = 15,
    TESSERA_CLIENT_ERROR_RATE_LIMITED = 16,
    TESSERA_CLIENT_ERROR_SESSION_EXPIRED = 17,
} tessera_client_error;

/* Hex characters of a session token (client.proto's LoginReply). */
#define TESSERA_CLIENT_SESSION_TOKEN_MAX 64

/* Bytes of the space name kept from the login reply (longer names are
 * truncated). */
#define TESSERA_CLIENT_NAME_BYTES 64

/* A baseapp's client address as text, "host:port" ("[v6]:port" for IPv6),
 * with its terminating NUL: 45 characters of IPv6 text, the brackets, the
 * colon and five digits fit. */
#define TESSERA_CLIENT_ADDRESS_BYTES 64

/* Other baseapps' addresses kept from a login reply: more than a cluster
 * runs (the reply's list beyond it is dropped). */
#define TESSERA_CLIENT_MAX_BASEAPPS 16

/* One entity in the client's view. Owned by the client; a pointer to it is
 * valid until the next frame is processed or the client closes, whichever
 * comes first. */
typedef struct tessera_client_entity {
    uint64_t id;
    uint32_t alias;              /* the per-client alias the stream names it by */
    bool is_owner;               /* this client owns it (the ENTER said so): the player's own entity */
    const entity_def_class *cls; /* its class, owned by the definitions (tessera_client_definitions) */
    const char *type;            /* cls->name */
    /* Its properties as this client receives them: the class defaults until
     * the server sends a value (a property this client's audience does not
     * get keeps its default). Read it with entity_state_get_*; writing to it
     * is pointless (the next update overwrites it) but harmless. Its dirty
     * set is cleared after each frame's callbacks. */
    entity_state *state;
    /* Metres, quantized to the login's position_precision, and radians in
     * (-pi, pi] quantized to yaw_steps. The server sends the player's own
     * entity no MOVE after the one with its ENTER (the client walks it):
     * for that one the SDK takes the position of each move sent and each
     * correction, as they are. */
    float x, y, z;
    float yaw;
    uint64_t last_move_stamp_us; /* stamp_us of the ViewUpdate of the last move applied; 0 until one */
    uint32_t last_tick;          /* cell tick of the update that last touched it */
} tessera_client_entity;

/* What the login reply said. */
typedef struct tessera_client_login_info {
    uint64_t entity_id;    /* the player's own entity */
    float x, y, z, yaw;    /* where it spawned */
    float view_radius;     /* entities within this distance on X and on Z (a square) are in view */
    float view_hysteresis; /* ... and stay in view until this much further */
    float max_speed;       /* metres per second the cell accepts */
    uint32_t tick_hz;
    char space_name[TESSERA_CLIENT_NAME_BYTES];
    char definitions_digest[65]; /* hex digest of the game's entity definitions */
    size_t definition_classes;   /* entity types they declare */
    /* How the entity stream is read: aliases 0..max_aliases-1 (1..65536),
     * positions in units of position_precision metres inside
     * [world_min, world_max], yaws in yaw_steps steps a turn. */
    uint32_t max_aliases;
    double position_precision;
    float world_min[3], world_max[3]; /* x, y, z */
    uint32_t yaw_steps;
    /* Detail levels: within detail_near_distance (on X and on Z) of an
     * entity this client gets its near-only properties, within
     * detail_medium_distance its medium ones, farther only far ones. */
    float detail_near_distance;
    float detail_medium_distance;
    /* The session: tessera_client_reconnect with this token (on a new
     * client) takes the entity back within detached_grace_ms of a drop. */
    char session_token[TESSERA_CLIENT_SESSION_TOKEN_MAX + 1];
    uint32_t detached_grace_ms;
    bool reconnected; /* this answered a reconnect */
    /* The player's entity is in a space: the numbers above describe it and
     * a stream flows. False for an entity without a cell part (an Account)
     * until on_entered_space. */
    bool in_space;
    char entity_type[ENTITY_DEF_NAME_MAX + 1]; /* the player entity's class */
    /* The client addresses of the cluster's other baseapps when the reply
     * was sent, "host:port" with an IP literal ("[v6]:port" or "v6:port"
     * for IPv6), in the reply's order: where to send a reconnect when this
     * client's baseapp is gone. Entries that are no such address are
     * skipped, and only the first TESSERA_CLIENT_MAX_BASEAPPS kept. */
    char baseapps[TESSERA_CLIENT_MAX_BASEAPPS][TESSERA_CLIENT_ADDRESS_BYTES];
    size_t baseapp_count;
} tessera_client_login_info;

/* A refused move: the player is back at this position. */
typedef struct tessera_client_correction {
    float x, y, z, yaw;
    uint32_t sequence;  /* the refused move's sequence */
    const char *reason; /* valid during the callback only */
} tessera_client_correction;

/* The server moved the player's entity (a teleport). */
typedef struct tessera_client_teleport {
    float x, y, z, yaw;     /* where it is now */
    bool space_changed;     /* it is in another space: the view was emptied */
    const char *space_name; /* the space it is in; valid during the callback only */
} tessera_client_teleport;

/* The player's entity came back after the cellapp holding it died
 * (EntityRestored). */
typedef struct tessera_client_restore {
    float x, y, z, yaw;    /* where it is now */
    uint32_t state_age_ms; /* how old the state it came back with is */
    bool from_ghost;       /* from its ghost on the restoring cellapp (a tick old at most) */
} tessera_client_restore;

typedef struct tessera_client_stats {
    uint64_t frames_in; /* frames received and dispatched */
    uint64_t bytes_in;  /* their bytes, including the 4-byte length prefixes */
    uint64_t frames_out;
    uint64_t bytes_out; /* encoded bodies plus length prefixes */
    uint64_t view_updates;
    uint64_t stream_bytes;          /* bytes of ViewUpdate.stream received */
    uint64_t enters, leaves;        /* entities that entered / left the table */
    uint64_t moves;                 /* MOVE records applied */
    uint64_t property_updates;      /* UPDATE records applied */
    uint64_t discarded_records;     /* MOVE and UPDATE records for an alias not in the table: skipped */
    uint64_t stale_leaves;          /* LEAVE records for an alias not in the table: ignored */
    uint64_t client_calls;          /* ClientCalls received and delivered */
    uint64_t stale_calls;           /* ClientCalls for an entity that left in the same update: dropped */
    uint64_t game_events;           /* GameEvents received and delivered (in view updates and alone) */
    uint64_t base_property_updates; /* BaseProperties messages received */
    uint64_t calls_out;             /* EntityCalls sent */
    uint64_t corrections;
    uint64_t teleports;          /* Teleported messages */
    uint64_t restores;           /* EntityRestored messages */
    uint64_t player_changes;     /* PlayerCreated messages (giveClientTo) */
    uint64_t redirects;          /* LoginRedirects followed (a one-time token, or a reconnect sent on) */
    uint64_t errors;             /* Error messages received from the server */
    uint64_t password_logins;    /* LoginRequests sent: the password went on the wire */
    uint64_t reconnect_requests; /* Reconnects sent (one more per token-less redirect followed) */
} tessera_client_stats;

/* Every callback may be NULL. Each gets the client as first argument; the
 * caller's pointer is tessera_client_user_data(client). */
typedef struct tessera_client_callbacks {
    /* login_reply arrived; the client is IN_WORLD. `info` stays valid until
     * the client closes (tessera_client_login_info_get returns it too). */
    void (*on_logged_in)(tessera_client *client, const tessera_client_login_info *info);
    /* Around each ViewUpdate (the pre- and post-data-update notifications).
     * on_frame_begin fires before anything of it is applied. Then the whole
     * stream is applied to the table, and only then do the per-entity
     * callbacks fire, in this order: on_leave for the entities that left,
     * on_enter for those that entered, on_move for those that moved (not
     * those that entered: on_enter already sees where they are),
     * on_properties_changed for those whose properties changed (not those
     * that entered), on_client_call for each call in the update's order;
     * then on_frame_end. An entity that entered and left within one update
     * gets no callback at all. If a callback closes the client, the rest
     * (on_frame_end included) is skipped; so is everything after a broken
     * update (the client then closes with CLOSED_PROTOCOL). */
    void (*on_frame_begin)(tessera_client *client, uint32_t tick);
    void (*on_frame_end)(tessera_client *client, uint32_t tick);
    /* An entity entered the view and is now in the table, with every
     * property the server sent and (when the server sent its first MOVE in
     * the same update, as it does) its position. */
    void (*on_enter)(tessera_client *client, const tessera_client_entity *entity);
    /* An entity left the view; it is no longer in the table. */
    void (*on_leave)(tessera_client *client, uint64_t entity_id);
    /* A known entity moved; `entity` already holds the new position.
     * stamp_us is the ViewUpdate's (when the cell packed it). */
    void (*on_move)(tessera_client *client, const tessera_client_entity *entity, uint64_t stamp_us);
    /* Properties of a known entity changed: `changed` holds their ids
     * (entity->state already holds the new values). Fires once per entity
     * per ViewUpdate, and for the player's own entity also when a
     * BaseProperties message changed its base properties (outside any
     * frame). Valid during the call only. */
    void (*on_properties_changed)(tessera_client *client, const tessera_client_entity *entity,
                                  const entity_state_mask *changed);
    /* The server called client method `method` (of entity->cls, part
     * ENTITY_DEF_PART_CLIENT) on `entity`, with `args` a state of
     * method->args_class holding the arguments (read them with
     * entity_state_get_*). `args` is valid during the call only. A call for
     * an entity that left in the same update (the stream comes first) is
     * dropped (stats.stale_calls); one for an entity never seen, an unknown
     * method or bad arguments closes the client with CLOSED_PROTOCOL. */
    void (*on_client_call)(tessera_client *client, const tessera_client_entity *entity, const entity_def_method *method,
                           const entity_state *args);
    /* The server fired game event `event` (a declared event of the
     * definitions: entity_def_registry_event), or sent it to this client
     * as a user message, from `source_id` (0: the game as a whole; it may
     * be an entity the client does not see). `fields` is a state of
     * event->args_class (read with entity_state_get_*), valid during the
     * call only. In a view update events come after the calls; a cluster
     * event comes alone. An unknown event or fields that are not its
     * declared types close the client with CLOSED_PROTOCOL. */
    void (*on_event)(tessera_client *client, const entity_def_method *event, uint64_t source_id,
                     const entity_state *fields);
    /* The cell refused a move and put the player back. */
    void (*on_correction)(tessera_client *client, const tessera_client_correction *correction);
    /* The player's entity was teleported. Its position in the table is the
     * new one already. With space_changed, every entity of the old space
     * was forgotten first (on_leave fired for each, the player's own
     * included), the login info's space name and quantization are the new
     * space's (tessera_client_login_info_get), and the stream that follows
     * enters the new space's entities, the player's own first. */
    void (*on_teleported)(tessera_client *client, const tessera_client_teleport *teleport);
    /* The cellapp that held the player's entity died and another brought
     * it back (restore->state_age_ms old, or from its ghost). Every entity
     * of the view was forgotten first (on_leave fired for each, the
     * player's own included); the stream that follows enters them again,
     * the player's own first. The connection stays. */
    void (*on_restored)(tessera_client *client, const tessera_client_restore *restore);
    /* The server sent an Error (code: tessera_client_error values). Before
     * login completed the client then closes with CLOSED_SERVER_ERROR; in
     * the world it stays open (the server closes if it means to). `message`
     * is valid during the call only. The Error's retry_after_ms (when to
     * try again, for ERROR_UNAVAILABLE and ERROR_SERVER_SHUTDOWN) is
     * tessera_client_error_retry_after_ms, here and afterwards. */
    void (*on_error)(tessera_client *client, int code, const char *message);
    /* giveClientTo: the client plays another entity now (info->entity_id,
     * info->entity_type, a new session token). Every entity of the old
     * player went first (on_leave for each, its own included); the new
     * player's own entity is in the table, in no space yet. */
    void (*on_player_changed)(tessera_client *client, const tessera_client_login_info *info);
    /* The player's entity is in a space now (after on_player_changed, or a
     * login without a space): info holds the space's numbers, and the
     * stream that follows enters its entities, the player's own first. */
    void (*on_entered_space)(tessera_client *client, const tessera_client_login_info *info);
    /* The baseapp sent the client to another (LoginRedirect): at login, to
     * the one the account plays on; in the world, because this one is
     * stopping (every entity left first, on_leave for each). The SDK dials
     * the other and logs in there with the redirect's one-time token; a
     * login reply follows (on_logged_in) or an error. A redirect without a
     * token answers a reconnect (tessera_client_reconnect): the SDK sends
     * the same Reconnect, account and session token, to the baseapp named.
     * A token-less redirect answering anything else is a protocol error.
     * One login or reconnect follows at most 4 redirects (more closes the
     * client with CLOSED_PROTOCOL). */
    void (*on_redirected)(tessera_client *client, const char *reason);
    /* Last callback, exactly once. The entity table and stats are still
     * readable during it; the client is freed when it returns. */
    void (*on_closed)(tessera_client *client, tessera_client_close_cause cause, const char *reason);
    /* Every frame body from the server, as it came, before the client
     * acts on it (a recorder's hook: tessera-bots --record-file). Not for
     * frames given to tessera_client_process_frame. May be NULL. */
    void (*on_frame_received)(tessera_client *client, const uint8_t *frame, size_t length);
} tessera_client_callbacks;

/* Creates a client on `loop` (which must outlive it). `callbacks` is
 * copied. Never fails (out of memory aborts). The client ends only through
 * tessera_client_close or the connection ending, and on_closed fires once
 * in either case. */
tessera_client *tessera_client_create(uv_loop_t *loop, const tessera_client_callbacks *callbacks, void *user_data);

/* Sets the free-text name sent in hello (at most 64 bytes; default
 * "tessera-client"). Returns 0, or -1 if already connecting or too long. */
int tessera_client_set_name(tessera_client *client, const char *name);

/* TLS to the baseapps: what the server's certificate must chain to. One
 * serves any number of clients on one loop; free it after the last of
 * them has closed. */
typedef struct tessera_client_tls tessera_client_tls;
/* The server's certificate must chain to one in `ca_file` (PEM), or to
 * the system's trusted certificates when it is NULL. NULL with the cause
 * in err. */
tessera_client_tls *tessera_client_tls_create(const char *ca_file, char *err, size_t errlen);
void tessera_client_tls_free(tessera_client_tls *tls);
/* Speaks TLS 1.3 to the baseapp, and to every baseapp a redirect or a
 * reconnect sends it to: each must present a certificate for
 * `server_name` (at most 253 bytes) that `tls` trusts, or the connection
 * closes (TESSERA_CLIENT_CLOSED_CONNECT_FAILED, the reason naming the
 * cause). Before connect. Returns 0, or -1 if already connecting or the
 * name is too long. */
int tessera_client_use_tls(tessera_client *client, tessera_client_tls *tls, const char *server_name);

/* Speaks WebSocket (a baseapp's websocket_port), as a browser would: the
 * upgrade first, then one masked binary message per frame; inside TLS when
 * tessera_client_use_tls was called too (wss). Redirects and reconnects
 * then name WebSocket addresses. Before connect. Returns 0, or -1 if
 * already connecting. */
int tessera_client_use_websocket(tessera_client *client);

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

/* Instead of tessera_client_login: takes back the player's entity after a
 * dropped connection, with the session token of the last login reply
 * (tessera_client_login_info.session_token). It may go to any baseapp
 * (tessera_client_login_info.baseapps lists the others): one that does not
 * hold the session redirects it without a token, and the SDK sends the
 * same Reconnect there (on_redirected tells). The answer is a login reply
 * with `reconnected` set and a new token, and the view starts afresh (this
 * client holds nothing yet). While the session's baseapp has died and its
 * sessions are being restored elsewhere the answer is ERROR_UNAVAILABLE
 * (on_error, then on_closed; tessera_client_error_retry_after_ms says when
 * to try again, on a new client, there or at another baseapp). A session
 * that is over gets ERROR_SESSION_EXPIRED (on_error, then on_closed): log
 * in again. The token is kept in memory until the answer comes (a
 * redirect needs it again), then wiped. Same rules and returns as
 * tessera_client_login; the token must be 1..64 characters. */
int tessera_client_reconnect(tessera_client *client, const char *account, const char *session_token);

/* Instead of tessera_client_login: a TokenLogin with the one-time token of
 * a redirect that could not be followed (tessera_client_redirect_token).
 * A giveClientTo across baseapps sends the client, with such a token, to
 * the baseapp of the entity it is given to; if that baseapp died before
 * the client got there, the entity is restored on another baseapp, and
 * the token is good there. A baseapp that does not hold the entity (yet)
 * answers ERROR_UNAVAILABLE with retry_after_ms and keeps the token: try
 * again, there or at another of tessera_client_login_info.baseapps. Once
 * the token lapses (redirect_token_ms) the answer is
 * ERROR_SESSION_EXPIRED. Same rules and returns as tessera_client_login;
 * the token must be 1..64 characters. */
int tessera_client_token_login(tessera_client *client, const char *account, const char *token);

/* In on_closed with TESSERA_CLIENT_CLOSED_CONNECT_FAILED: the one-time
 * token of the redirect whose baseapp could not be dialled, for
 * tessera_client_token_login on a new client; "" otherwise. Wiped when
 * on_closed returns. */
const char *tessera_client_redirect_token(const tessera_client *client);

/* Sends the player's position (metres) and yaw (radians) with the next
 * sequence number. Only IN_WORLD. Returns 0, or -1 if not in the world, a
 * number is not finite (nothing sent), or the connection is failing (it
 * then closes; on_closed follows). */
int tessera_client_send_move(tessera_client *client, float x, float y, float z, float yaw);
/* Sequence number of the last move sent (0 before the first). */
uint32_t tessera_client_last_sequence(const tessera_client *client);
/* From on_frame_begin to on_frame_end: whether this update's tick is the
 * first of a new counter (each cell counts its own ticks; the player's
 * entity moved to another cell, was restored or teleported), so that tick
 * differences across it mean nothing. False outside an update. */
bool tessera_client_frame_ticks_restart(const tessera_client *client);

/* Calls the exposed method `method_name` of part `part` (ENTITY_DEF_PART_BASE
 * or ENTITY_DEF_PART_CELL) on entity `entity_id`, which must be in the
 * table (the player's own entity included; a base method only on the own
 * entity, as the server allows). `args` is a state of method->args_class
 * holding the arguments (method_call_args_create, then entity_state_set_*;
 * NULL is allowed for a method without arguments); it is encoded at once
 * and stays the caller's. Only IN_WORLD. Returns 0, or -1 with nothing sent
 * when the state is wrong, the entity is not in view, there is no such
 * exposed method, `args` is of another class, or the connection is failing
 * (it then closes; on_closed follows). */
int tessera_client_call(tessera_client *client, uint64_t entity_id, entity_def_part part, const char *method_name,
                        const entity_state *args);

/* Sends an EntityCall exactly as given, with no check at all (any entity,
 * part value, method id and argument bytes): for tests of the server's
 * refusals. Only IN_WORLD. Returns 0, or -1 (nothing sent) when not in the
 * world or the connection is failing. */
int tessera_client_call_raw(tessera_client *client, uint64_t entity_id, int part, uint32_t method_id,
                            const uint8_t *args, size_t length);

/* For tests and benchmarks: handles one encoded ServerToClient (a frame body,
 * without its length prefix) as if it had just been received, callbacks
 * included. It also works on a client that never connected: there, a
 * ServerHello is taken as the answer to a hello it did not send, a
 * LoginReply as the answer to a login it did not send (calling
 * tessera_client_login first is allowed, not needed), and nothing is ever
 * sent. Returns 0 when the frame was handled and the client is still open,
 * -1 when it is closing (already, or because of this frame: on_closed
 * follows from the loop). */
int tessera_client_process_frame(tessera_client *client, const uint8_t *frame, size_t length);

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
const entity_def_registry *tessera_client_definitions(const tessera_client *client);
/* The name the server gave in its hello ("" before it arrives). */
const char *tessera_client_server_name(const tessera_client *client);
/* The baseapp this client was last dialled to, "host:port" ("[v6]:port"
 * for IPv6): the one it is connected to, or after a redirect the one it
 * went on to. "" before tessera_client_connect. */
const char *tessera_client_address(const tessera_client *client);
/* The retry_after_ms of the last Error the server sent: how long to wait
 * before trying again (ERROR_UNAVAILABLE, ERROR_SERVER_SHUTDOWN); 0 when
 * no Error came or it gave no hint. Readable in on_error and on_closed. */
uint32_t tessera_client_error_retry_after_ms(const tessera_client *client);

/* The entity with this id in the view, or NULL (unknown or already left). */
const tessera_client_entity *tessera_client_entity_find(const tessera_client *client, uint64_t entity_id);
/* The entity the stream currently names `alias`, or NULL. */
const tessera_client_entity *tessera_client_entity_by_alias(const tessera_client *client, uint32_t alias);
size_t tessera_client_entity_count(const tessera_client *client);
/* Iteration over the view: set *cursor = 0, then each call returns the next
 * entity or NULL at the end. The table must not change during an iteration,
 * so do not keep a cursor across loop turns (frames change the table). */
const tessera_client_entity *tessera_client_entity_next(const tessera_client *client, size_t *cursor);

/* True while a change of space empties the view (inside the on_leave
 * callbacks that precede on_teleported). */
bool tessera_client_changing_space(const tessera_client *client);

/* Copies the counters into *out. */
void tessera_client_get_stats(const tessera_client *client, tessera_client_stats *out);

/* Short lower-case names for logs and reports: "in_world", "bad_credentials",
 * "connect_failed". Unknown values give "unknown". Never NULL. */
const char *tessera_client_state_name(tessera_client_state state);
const char *tessera_client_error_name(int code);
const char *tessera_client_close_cause_name(tessera_client_close_cause cause);

#endif
