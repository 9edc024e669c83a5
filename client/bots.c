/* bots.c -- tessera-bots, the load generator: N SDK clients on one libuv
 * loop that log in, wander between random waypoints calling exposed methods
 * now and then, and at the end report what they received (frames, stream
 * bytes, view changes, property updates, client calls, position-update
 * latency) and, with --verify-aoi, whether every bot's view matches the
 * truth of where the bots are. With --snapshot-file they also write, once,
 * everything they see (entities, positions, properties) for a test harness
 * to compare with the server's state.
 *
 * It owns the run (options, bots, timers, totals) and the report. It does
 * not own the wire (tessera_client.c), the JSON form of a state
 * (entity_state_json.c) or the percentile arithmetic (latency_histogram.c).
 * All run state lives in one bots_run on main's stack; libuv handles reach
 * it through their data pointers.
 *
 * Timing: one 100 ms timer walks every bot, sends its move (10 moves a
 * second per bot, as a player client would) and draws its calls (Poisson at
 * --calls-per-second); logins are spread evenly over --login-spread-ms by a
 * one-shot timer re-armed for the next bot due; one timer writes the
 * snapshot; a last one ends the run after --seconds. The bots stop walking
 * and calling for the last --settle-seconds (at least 1.5 s with
 * --verify-aoi) so every view settles before it is checked.
 *
 * Recovery. A bot in the world whose connection the server side ends (a
 * reset, an end of file, a failed write: its baseapp died), with no Error
 * first, gets back without its password: 200 ms later it sends a Reconnect
 * with its last session token to a candidate baseapp (its last login
 * reply's other baseapps, then --connect, then the one it was on), the SDK
 * follows the redirect to the baseapp that holds the session, and each
 * failed attempt moves on to the next candidate (after the Error's
 * retry_after_ms, or 250 ms). ERROR_SESSION_EXPIRED, or --recover-seconds
 * without success, and it gives up for the run. A recovering bot neither
 * walks nor calls, and is left out of the AOI check as a bot that is not
 * in the world.
 */
#include <errno.h>
#include <float.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <netdb.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <arpa/inet.h>
#include <uv.h>

#include <cjson/cJSON.h>

#include "clock.h"
#include "entity_def.h"
#include "entity_state.h"
#include "entity_state_json.h"
#include "frame.h"
#include "id_map.h"
#include "latency_histogram.h"
#include "json_file.h"
#include "log.h"
#include "method_call.h"
#include "tessera_client.h"

/* One move per bot per 100 ms: the rate a player client sends at. */
#define BOTS_TICK_MS 100
/* A late tick (a stalled loop) moves a bot at most this far in time, so a
 * hiccup never turns into a jump the cell refuses as too fast. */
#define BOTS_MAX_STEP_S 0.25
/* Long enough for the last moves to reach the cell, be applied at its next
 * tick and for the resulting enters/leaves to come back, with slack for a
 * loaded host: the least settling time --verify-aoi takes. */
#define BOTS_SETTLE_MS 1500
/* Restores whose arrival and age the JSON report lists. */
#define BOTS_MAX_RESTORES 10000
/* The most methods --call and --ping-call may name. */
#define BOTS_MAX_CALLS 8
/* Numbers a random call fills in: 1 .. this, within the declared range. */
#define BOTS_CALL_NUMBER_MAX 20
/* Latency buckets: 10 us wide up to 2 s (200,000 counters, 1.6 MB); slower
 * updates land in the overflow bucket and are reported by the maximum. */
#define BOTS_LATENCY_BUCKET_US 10
#define BOTS_LATENCY_LIMIT_US 2000000
/* Individual failures are logged up to this many; the report counts all. */
#define BOTS_LOGGED_FAILURES_MAX 10
/* Descriptors beyond one per bot: stdio, the loop's own, and slack. */
#define BOTS_SPARE_FDS 64
/* The most teleports --teleport may schedule. */
#define BOTS_MAX_TELEPORTS 8
/* A bot that lost its baseapp waits this long before its first Reconnect:
 * long enough for the rest of a dying baseapp's connections to go too, so
 * the bots' reconnects do not race its last moments, and short next to the
 * server's restore (a second or two). */
#define BOTS_RECOVER_PAUSE_MS 200
/* The most times one bot's password login is tried again on a retry hint
 * (ERROR_UNAVAILABLE or ERROR_RATE_LIMITED with retry_after_ms). */
#define BOTS_LOGIN_RETRIES_MAX 200

/* Between two attempts when the failed one gave no retry_after_ms (a
 * connect refused, a reset): a few a second per bot keeps a dead address
 * from being hammered. */
#define BOTS_RECOVER_RETRY_MS 250
/* Baseapp addresses the run keeps for recoveries: far more than a cluster
 * runs. One heard of past it is no candidate. */
#define BOTS_MAX_ADDRESSES 1024
/* How far a leave may be inside the view before it is a flicker: two
 * entities each move speed x this long between a position being sent and
 * the cell acting on it (a move's trip, a tick, the stream's trip back). */
#define BOTS_FLICKER_SLACK_S 0.3

/* A method the bots call on their own entity (--call, --ping-call,
 * --teleport-call): its part and name, as the definitions declare it. */
typedef struct bots_method {
    entity_def_part part;
    char name[ENTITY_DEF_NAME_MAX + 1];
} bots_method;

typedef struct bots_teleport {
    double at_seconds;
    char space[64];
    float x, y, z;
} bots_teleport;

typedef struct bots_options {
    char host[INET6_ADDRSTRLEN]; /* resolved IP literal */
    char target[300];            /* --connect as given, for messages */
    int port;
    uint32_t count;
    double seconds;
    int json;
    int verify_aoi;
    const char *account_prefix;
    const char *password;
    /* --tls-ca / --tls-name: speak TLS 1.3, the baseapps' certificates
     * chaining to tls_ca (NULL: the system's) and naming tls_name. */
    const char *tls_ca;
    const char *tls_name;
    int websocket; /* --websocket: --connect names a WebSocket port; every bot speaks WebSocket */
    double speed;  /* metres per second */
    double area;   /* waypoints in [-area, area] on x and z */
    /* --gather: in the first half of every gather_period seconds (or
     * always, with period 0) waypoints lie within gather_half of
     * (gather_x, gather_z) instead: the crowd drifts there and back. */
    bool gather;
    double gather_x, gather_z, gather_half, gather_period;
    uint64_t seed;
    double login_spread_ms;
    double calls_per_second;    /* per bot, while walking */
    double settle_seconds;      /* stand still and call nothing for the last S seconds */
    const char *snapshot_file;  /* NULL: no snapshot */
    const char *record_file;    /* --record-file: bot 0's frames from the server (NULL: none) */
    double snapshot_at_seconds; /* when to write it, after the start */
    double ping_rate;           /* numbered calls per bot per second while walking */
    double gap_limit_ms;        /* an update gap longer than this while walking is counted */
    bots_teleport teleports[BOTS_MAX_TELEPORTS];
    uint32_t teleport_count, teleport_bots; /* the first teleport_bots bots make them */
    /* --reconnect-at: at that time (seconds, 0: never) the first
     * reconnect_bots bots drop their connection and, reconnect_delay_ms
     * later, take their entity back with their session token. */
    double reconnect_at_seconds;
    uint32_t reconnect_bots;
    double reconnect_delay_ms;
    double recover_seconds;            /* a bot that lost its baseapp gives up after this long without getting back */
    const char *enter_method;          /* --enter: the base method a spaceless login entity is asked to enter with */
    bots_method calls[BOTS_MAX_CALLS]; /* --call: random calls pick one */
    uint32_t call_count;
    bots_method ping_calls[BOTS_MAX_CALLS]; /* --ping-call: numbered calls go round them */
    uint32_t ping_call_count;
    bots_method teleport_call; /* --teleport-call (cell) */
} bots_options;

struct bots_run;

typedef struct bot {
    struct bots_run *run;
    uint32_t index;
    tessera_client *client;  /* NULL before launch and once on_closed ran */
    int in_world;            /* logged in and not closed */
    bool gathering;          /* its waypoint is in the gathering place (--gather) */
    int verified;            /* in the AOI check: in the world since before the settling began */
    uint64_t in_world_at_ms; /* when the login reply came, in ms after the start */
    int had_error;           /* a failure was counted; a following disconnect is not counted again */
    uint64_t entity_id;      /* own entity, from the login reply */
    float view_radius, view_hysteresis;
    float x, y, z, yaw;        /* own position: the last sent or corrected to */
    double target_x, target_z; /* current waypoint */
    uint64_t rng;
    uint64_t frame_wall_us;           /* receipt time of the ViewUpdate being applied */
    uint32_t frame_tick;              /* its cell tick */
    uint32_t tick_counter;            /* how many cells' tick counters its updates came by, so far */
    uint32_t tick_hz;                 /* the cell's, from the login reply */
    id_map seen;                      /* ids this bot ever had in view (values unused) */
    float world_min[3], world_max[3]; /* the space's bounds from the login reply: waypoints stay inside */
    double position_precision;
    /* Argument states of the methods it calls, of its client's definitions
     * (each client has its own registry): created on the first call, freed
     * in on_closed before the client frees the definitions. */
    entity_state *call_args[BOTS_MAX_CALLS], *ping_args, *teleport_args;
    uint64_t calls_made; /* for the chat text */
    /* What it saw of each entity in view, for the flicker and update-gap
     * checks: one bot_seen per alias its stream uses (view_capacity of
     * them, grown as aliases appear; owned), so that a MOVE finds its entry
     * by index. An entry goes when its entity leaves. */
    struct bot_seen *view;
    uint32_t view_capacity;
    /* Latency samples of the update being applied, added to the run's
     * histogram once per update (bots_flush_latency): every MOVE of one
     * update has the same stamp and the same receipt time. */
    uint32_t latency_pending;
    uint64_t latency_stamp_us;
    char space[64];          /* the space it is in */
    id_map old_space;        /* ids it saw before its last change of space */
    uint64_t pings_sent;     /* the last numbered call's number */
    double ping_owed;        /* fractional calls due */
    uint32_t teleports_done; /* --teleport entries made */
    uint64_t teleports_received;
    uint64_t teleported_at_ms; /* when its last teleport arrived, after the start (0: never) */
    uint64_t restored_at_ms;   /* when its entity was last restored (EntityRestored), after the start (0: never) */
    /* --reconnect-at: the session of the last login reply, and where the
     * drop and reconnect are. */
    char session_token[TESSERA_CLIENT_SESSION_TOKEN_MAX + 1];
    bool reconnect_done;        /* it dropped its connection (once) */
    bool reconnecting;          /* dropped; a new client reconnects after the delay */
    uv_timer_t reconnect_timer; /* initialised at the drop (reconnect_timer_open) */
    bool reconnect_timer_open;
    bool ever_in_world; /* it has been in the world through some connection */
    /* Its password login was refused with a retry hint (the baseapp's hash
     * queue or throttle was full): it logs in again after retry_ms. */
    bool login_retry;
    uint16_t login_retries;
    /* Recovery from a lost baseapp (bots_start_recovery). Addresses are
     * indices into run->addresses. */
    uint16_t baseapps[TESSERA_CLIENT_MAX_BASEAPPS]; /* the last login reply's other baseapps */
    uint8_t baseapp_count;
    uint16_t address;     /* the baseapp its client was on at its last login reply */
    bool server_error;    /* the server sent an Error on this connection: its end is not a loss */
    bool handing_off;     /* sent to another baseapp while in the world, not in it again yet */
    bool recovering;      /* lost its baseapp: reconnecting, neither walking nor calling */
    bool dropped;         /* gave up recovering: it does nothing more this run */
    bool session_expired; /* the last attempt was answered ERROR_SESSION_EXPIRED */
    /* A hand-off's one-time token whose baseapp could not be dialled (it
     * died after accepting the client): the recovery's attempts are
     * TokenLogins with it, at the other baseapps, until one takes it. */
    char handover_token[TESSERA_CLIENT_SESSION_TOKEN_MAX + 1];
    uint32_t retry_ms;        /* the wait before the next attempt, from the last one's Error (0: the default) */
    uint32_t recover_tries;   /* Reconnects sent since the loss: the next candidate is this one, round */
    uint64_t lost_at_ms;      /* uv_now when the baseapp went */
    uint64_t recovered_at_ms; /* when it was last back, in ms after the start (0: never) */
} bot;

/* An entity in a bot's view, in the slot of the alias the bot's stream
 * names it by: the stamp of its last update and where it was then. */
typedef struct bot_seen {
    uint64_t entity_id; /* 0: a free slot */
    uint64_t stamp_us;
    uint32_t tick;    /* the cell tick of that update */
    uint32_t counter; /* ... counted by this bot's tick counter number `counter` */
    /* The bot that plays it, as index + 1 (0: none found yet), so that a
     * MOVE need not look it up by id; checked against that bot's entity
     * id before use (bots_seen_bot). */
    uint32_t other_plus_one;
    float x, z;
} bot_seen;

/* A bot's view slots cover aliases below this: the SDK's own bound on
 * max_aliases (tessera_client.h). */
#define BOTS_MAX_ALIASES 65536u

/* A named counter: error reasons, client calls received per method. */
typedef struct bots_reason {
    char name[64];
    uint64_t count;
} bots_reason;

typedef struct bots_counters {
    bots_reason *items;
    size_t count, capacity;
} bots_counters;

/* A baseapp's client address a bot may reconnect to: --connect, or one a
 * login reply listed. */
typedef struct bots_address {
    char host[INET6_ADDRSTRLEN]; /* IP literal, as channel_connect wants it */
    int port;
    char text[TESSERA_CLIENT_ADDRESS_BYTES]; /* "host:port" as heard, to match the next one */
} bots_address;

typedef struct bots_run {
    uv_loop_t loop;
    bots_options options;
    tessera_client_tls *tls;    /* --tls-name: every bot's connections speak TLS */
    bool method_missing_logged; /* a --call the class lacks was reported */
    bot *bots;
    uint32_t next_launch; /* index of the next bot to log in */
    uint64_t start_ms;    /* uv_now at the start */
    uint64_t start_us;    /* monotonic, for the elapsed time */
    uint64_t last_tick_us;
    uv_timer_t tick_timer, launch_timer, end_timer, snapshot_timer;
    uv_signal_t sigint, sigterm;
    int finished;
    int interrupted;
    int warned_speed;
    int snapshot_done;
    FILE *record; /* --record-file, open while the run lasts */
    unsigned failures_logged;

    /* Totals. Client counters are added when each client closes. */
    uint64_t logged_in;
    uint64_t msgs_in, bytes_in;
    uint64_t enter, leave, moves, corrections, stale_ignored;
    uint64_t stream_bytes, property_updates, discarded_records, base_property_updates;
    uint64_t client_calls_in, calls_out, stale_calls;
    uint64_t call_failures; /* tessera_client_call refused a call (the class lacks the method, ...) */
    double client_seconds;  /* summed time each bot was in the world */
    uint64_t errors;
    bots_counters reasons;
    bots_counters client_calls; /* client calls received, by method name */
    bots_counters game_events;  /* game events and user messages received, by event name */
    latency_histogram latency;
    uint64_t latency_clock_skew; /* stamps from the future (other host's clock ahead): counted as 0 */

    /* Measured at the end, before the clients close. */
    double elapsed_s;
    uint64_t in_world_at_end;
    uint64_t self_seen;
    uint64_t aoi_checked, aoi_mismatches, aoi_unknown;
    uint64_t aoi_position_checked, aoi_position_mismatches; /* a seen bot's received position against its own */
    uint64_t aoi_late; /* bots left out: they entered the world while the others settled */
    /* Crossing lines without a trace: leaves of entities still well inside
     * the view (a leave and re-enter that the view rule would not make),
     * and walking entities in view with no update for longer than
     * --gap-limit-ms. */
    uint64_t flickers, update_gaps, longest_gap_us;
    /* The first flickers, for the report: who saw what leave how far in,
     * and how late the bot was running then (its loop's lag). */
    struct bots_flicker {
        uint32_t bot;
        uint64_t entity;
        double distance, lag_ms;
    } flicker_examples[5];
    uint64_t pings_sent, teleports_received, teleport_stale;
    /* EntityRestored: how many, how many from a ghost, and for each (the
     * first BOTS_MAX_RESTORES) when it arrived (wall clock, ms) and the
     * age of the state it came back with. */
    uint64_t restores, restores_from_ghost;
    uint64_t *restore_wall_ms;
    uint32_t *restore_age_ms;
    size_t restore_samples;
    /* --reconnect-at: reconnects answered, and those that came back to
     * another entity than the one they left (never, when it works). */
    uint64_t reconnects, reconnects_other_entity;
    uint64_t player_changes; /* giveClientTo seen (PlayerCreated) */
    uint64_t handed_off;     /* in the world, sent to another baseapp (a draining one's LoginRedirect) */
    uint64_t rejoined;       /* ... and back in the world through it */
    uint64_t redirects;      /* LoginRedirects followed, at login or in the world */
    uint64_t login_retries;  /* password logins tried again, as a refusal's retry hint asked */
    /* Recoveries: connections the server side ended while in the world,
     * bots back after one, bots that gave up, bots still at it at the end,
     * Reconnects they sent, and the time from each loss to the login reply
     * that ended it (ms; sorted before the report). */
    uint64_t server_losses, recoveries, recovery_failed, recovering_at_end, recovery_attempts;
    uint32_t *recovery_ms;
    size_t recovery_samples, recovery_capacity;
    uint32_t recovering;      /* bots recovering now */
    uint64_t password_logins; /* LoginRequests sent with the password, every client's */
    bots_address *addresses;  /* [0] is --connect; the rest heard of in login replies */
    size_t address_count;
    uint64_t start_wall_us;
    id_map bots_by_entity; /* entity id -> bot, once logged in */
    double settle_at_ms;   /* bots_settle_at_ms, fixed once the options are read */
    /* The entity definitions the bots received at login: the first digest,
     * how many types it declares, and how many bots got a different one. */
    char definitions_digest[65];
    size_t definition_classes;
    uint64_t definitions_differ;
} bots_run;

/* ---- random numbers: deterministic per bot for a given --seed ------------- */

static uint64_t bots_splitmix64(uint64_t x) {
    x += UINT64_C(0x9e3779b97f4a7c15);
    x = (x ^ (x >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    x = (x ^ (x >> 27)) * UINT64_C(0x94d049bb133111eb);
    return x ^ (x >> 31);
}

/* xorshift64*: a uniform double in [0, 1). */
static double bots_random_unit(uint64_t *state) {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    uint64_t r = *state * UINT64_C(0x2545f4914f6cdd1d);
    return (double)(r >> 11) * (1.0 / 9007199254740992.0);
}

/* ---- error reasons -------------------------------------------------------- */

static void bots_counters_add(bots_counters *counters, const char *name) {
    for (size_t i = 0; i < counters->count; i++) {
        if (strcmp(counters->items[i].name, name) == 0) {
            counters->items[i].count++;
            return;
        }
    }
    if (counters->count == counters->capacity) {
        counters->capacity = counters->capacity ? counters->capacity * 2 : 8;
        counters->items = xrealloc(counters->items, counters->capacity * sizeof counters->items[0]);
    }
    bots_reason *item = &counters->items[counters->count++];
    snprintf(item->name, sizeof item->name, "%s", name);
    item->count = 1;
}

static void bots_count_reason(bots_run *run, const char *name) {
    run->errors++;
    bots_counters_add(&run->reasons, name);
}

static void bots_log_failure(bots_run *run, const bot *b, const char *what, const char *detail) {
    if (run->failures_logged >= BOTS_LOGGED_FAILURES_MAX) return;
    run->failures_logged++;
    log_warn("bot %u: %s: %s%s", b->index, what, detail,
             run->failures_logged == BOTS_LOGGED_FAILURES_MAX ? " (further failures are only counted)" : "");
}

/* ---- walking -------------------------------------------------------------- */

/* A coordinate of [-area, area] kept a metre inside the world's bounds on
 * that axis (positions outside them cannot be sent), or the middle of a
 * world too narrow for that. */
static double bots_clamp_to_world(double v, float low, float high) {
    double lo = (double)low + 1.0, hi = (double)high - 1.0;
    if (lo > hi) return ((double)low + (double)high) / 2.0;
    return v < lo ? lo : v > hi ? hi : v;
}

/* Whether the bots head for the gathering place now (--gather). */
static bool bots_gathering(const struct bots_run *run) {
    const bots_options *options = &run->options;
    if (!options->gather) return false;
    if (options->gather_period <= 0) return true;
    double elapsed_s = (double)(uv_now((uv_loop_t *)&run->loop) - run->start_ms) / 1000.0;
    return fmod(elapsed_s, options->gather_period) < options->gather_period / 2.0;
}

static void bots_pick_waypoint(bot *b) {
    const bots_options *options = &b->run->options;
    double centre_x = 0, centre_z = 0, area = options->area;
    b->gathering = bots_gathering(b->run);
    if (b->gathering) {
        centre_x = options->gather_x;
        centre_z = options->gather_z;
        area = options->gather_half;
    }
    b->target_x = bots_clamp_to_world(centre_x + (bots_random_unit(&b->rng) * 2.0 - 1.0) * area, b->world_min[0],
                                      b->world_max[0]);
    b->target_z = bots_clamp_to_world(centre_z + (bots_random_unit(&b->rng) * 2.0 - 1.0) * area, b->world_min[2],
                                      b->world_max[2]);
}

/* Moves the bot `dt` seconds towards its waypoint and sends the move. */
static void bots_walk(bot *b, double dt) {
    if (b->run->options.gather && b->gathering != bots_gathering(b->run)) bots_pick_waypoint(b);
    double step = b->run->options.speed * dt;
    double dx = b->target_x - b->x, dz = b->target_z - b->z;
    double distance = sqrt(dx * dx + dz * dz);
    if (distance <= step) {
        b->x = (float)b->target_x;
        b->z = (float)b->target_z;
        bots_pick_waypoint(b);
    } else {
        b->x = (float)(b->x + dx / distance * step);
        b->z = (float)(b->z + dz / distance * step);
    }
    /* Yaw 0 faces +z, increasing towards +x. */
    if (distance > 1e-6) b->yaw = (float)atan2(dx, dz);
    /* A failing connection closes itself; on_closed counts it. */
    tessera_client_send_move(b->client, b->x, b->y, b->z, b->yaw);
}

/* ---- calling -------------------------------------------------------------- */

/* The id of a random entity `b` sees other than itself, or 0 when it sees
 * none. Walks the table: cheap at a few calls a second. */
static uint64_t bots_random_target(bot *b) {
    size_t count = tessera_client_entity_count(b->client);
    if (count == 0) return 0;
    size_t pick = (size_t)(bots_random_unit(&b->rng) * (double)count), cursor = 0, k = 0;
    const tessera_client_entity *entity;
    while ((entity = tessera_client_entity_next(b->client, &cursor)) != NULL) {
        if (k++ == pick) return entity->id == b->entity_id ? 0 : entity->id;
    }
    return 0;
}

/* The argument state of `method` for this bot, created on first use. */
static entity_state *bots_args(entity_state **slot, const entity_def_method *method) {
    if (*slot && entity_state_class(*slot) != &method->args_class) {
        entity_state_free(*slot);
        *slot = NULL;
    }
    if (!*slot) *slot = method_call_args_create(method);
    return *slot;
}

/* The exposed method `m` of the bot's own class, or NULL (logged once per
 * run: the definitions do not give the bots' class what was asked). */
static const entity_def_method *bots_find_method(bot *b, const entity_def_class *cls, const bots_method *m) {
    const entity_def_method *method = entity_def_class_find_method(cls, m->part, m->name);
    if (method && method->exposed) return method;
    if (!b->run->method_missing_logged) {
        b->run->method_missing_logged = true;
        log_warn("bot %u: its class %s has no exposed %s method '%s': such calls are skipped", b->index, cls->name,
                 entity_def_part_name(m->part), m->name);
    }
    return NULL;
}

/* Fills every argument of a random call from its declared type: numbers
 * 1 .. BOTS_CALL_NUMBER_MAX (within range), text naming the bot, an entity
 * it sees (or 0). */
static void bots_fill_arguments(bot *b, const entity_def_method *method, entity_state *args) {
    for (uint16_t i = 0; i < method->arg_count; i++) {
        const entity_def_type *type = &method->args[i].type;
        uint64_t number = 1 + (uint64_t)(bots_random_unit(&b->rng) * BOTS_CALL_NUMBER_MAX);
        switch (type->kind) {
            case ENTITY_DEF_STRING: {
                char line[64];
                int n = snprintf(line, sizeof line, "hello from bot %u (%" PRIu64 ")", b->index, b->calls_made);
                size_t length = (size_t)n < type->max_length ? (size_t)n : type->max_length;
                entity_state_set_string(args, i, 0, line, length);
                break;
            }
            case ENTITY_DEF_ENTITY:
                entity_state_set_entity(args, i, 0, bots_random_target(b));
                break;
            case ENTITY_DEF_FLOAT:
            case ENTITY_DEF_DOUBLE:
                entity_state_set_float(args, i, 0, (double)number);
                break;
            case ENTITY_DEF_BOOL:
                entity_state_set_bool(args, i, 0, number & 1);
                break;
            default:
                if (entity_state_set_uint(args, i, 0, number) != 0) entity_state_set_int(args, i, 0, (int64_t)number);
                break;
        }
    }
}

/* One call on the bot's own entity: one of the --call methods, at random,
 * with its arguments filled in. Nothing when its entity has not entered
 * yet or no --call was given. */
static void bots_call(bot *b) {
    bots_run *run = b->run;
    if (run->options.call_count == 0) return;
    const tessera_client_entity *own = tessera_client_entity_find(b->client, b->entity_id);
    if (!own) return;
    uint32_t pick = (uint32_t)(bots_random_unit(&b->rng) * run->options.call_count);
    if (pick >= run->options.call_count) pick = run->options.call_count - 1;
    const bots_method *m = &run->options.calls[pick];
    const entity_def_method *method = bots_find_method(b, own->cls, m);
    if (!method) return;
    entity_state *args = bots_args(&b->call_args[pick], method);
    b->calls_made++;
    bots_fill_arguments(b, method, args);
    int rc = tessera_client_call(b->client, b->entity_id, m->part, m->name, args);
    /* Counted in calls_out by the SDK when sent; a refusal here means the
     * declared arguments are not what the bots fill in. */
    if (rc != 0 && tessera_client_get_state(b->client) == TESSERA_CLIENT_IN_WORLD) run->call_failures++;
}

/* Numbered calls on the bot's own entity, `due` more of them (fractions
 * carried): n = 1, 2, 3 ... going round the --ping-call methods (the
 * demo's: the cell's ping(n), straight from the client, and the base's
 * relayPing(n), which the base turns into the cell's ping(n)). All go on
 * the entity's one stream from its base, so the cell must see every n
 * once, in order, wherever its real is. Each method takes one number. */
static void bots_ping(bot *b, double due) {
    const bots_options *options = &b->run->options;
    const tessera_client_entity *own = tessera_client_entity_find(b->client, b->entity_id);
    if (!own || options->ping_call_count == 0) return; /* its ENTER has not come yet: the calls wait */
    const entity_def_method *methods[BOTS_MAX_CALLS] = {0};
    for (uint32_t i = 0; i < options->ping_call_count; i++) {
        methods[i] = bots_find_method(b, own->cls, &options->ping_calls[i]);
        if (!methods[i] || methods[i]->arg_count != 1) return;
    }
    b->ping_owed += due;
    while (b->ping_owed >= 1.0 && b->in_world) {
        uint64_t n = b->pings_sent + 1;
        uint32_t turn = (uint32_t)((n - 1) % options->ping_call_count);
        const entity_def_method *method = methods[turn];
        entity_state *args = bots_args(&b->ping_args, method);
        entity_state_set_uint(args, 0, 0, n);
        if (tessera_client_call(b->client, b->entity_id, method->part, method->name, args) != 0) return;
        b->pings_sent = n;
        b->run->pings_sent++;
        b->ping_owed -= 1.0;
    }
}

/* A --teleport entry: the bot asks its cell to move it. */
static void bots_teleport_now(bot *b, const bots_teleport *teleport) {
    const tessera_client_entity *own = tessera_client_entity_find(b->client, b->entity_id);
    const bots_method *m = &b->run->options.teleport_call;
    const entity_def_method *method = own ? bots_find_method(b, own->cls, m) : NULL;
    if (!method || method->arg_count != 4) {
        log_warn("bot %u: cannot teleport (no exposed cell method %s(space, x, y, z) on its entity)", b->index,
                 m->name);
        return;
    }
    entity_state *args = bots_args(&b->teleport_args, method);
    entity_state_set_string(args, 0, 0, teleport->space, strlen(teleport->space));
    entity_state_set_float(args, 1, 0, teleport->x);
    entity_state_set_float(args, 2, 0, teleport->y);
    entity_state_set_float(args, 3, 0, teleport->z);
    if (tessera_client_call(b->client, b->entity_id, ENTITY_DEF_PART_CELL, m->name, args) == 0)
        log_info("bot %u: teleporting to space '%s' (%.1f, %.1f, %.1f)", b->index,
                 teleport->space[0] ? teleport->space : b->space, (double)teleport->x, (double)teleport->y,
                 (double)teleport->z);
}

/* The calls due in `dt` seconds at `rate` a second: Poisson arrivals,
 * approximated per tick by the whole part of rate*dt plus one more with the
 * probability of its fraction. */
static unsigned bots_calls_due(bot *b, double rate, double dt) {
    double expected = rate * dt;
    unsigned calls = (unsigned)expected;
    if (bots_random_unit(&b->rng) < expected - (double)calls) calls++;
    return calls;
}

static void bots_on_reconnect_timer(uv_timer_t *timer);

/* Forgets what the bot saw through its connection (the view goes with it;
 * the slots' memory is kept for the next one). */
static void bots_forget_view(bot *b) {
    if (b->view) memset(b->view, 0, b->view_capacity * sizeof b->view[0]);
}

/* The slot of `alias`, the array grown to hold it; NULL for an alias beyond
 * any stream's (then the entity goes unwatched). */
static bot_seen *bots_view_slot(bot *b, uint32_t alias) {
    if (alias >= BOTS_MAX_ALIASES) return NULL;
    if (alias >= b->view_capacity) {
        /* Aliases are handed out from 0 up: the array grows with the view. */
        uint32_t capacity = b->view_capacity ? b->view_capacity : 64;
        while (capacity <= alias) capacity *= 2;
        b->view = xrealloc(b->view, capacity * sizeof b->view[0]);
        memset(b->view + b->view_capacity, 0, (capacity - b->view_capacity) * sizeof b->view[0]);
        b->view_capacity = capacity;
    }
    return &b->view[alias];
}

/* The entry of `entity` (by its alias), or NULL when the bot has none. */
static bot_seen *bots_view_find(bot *b, const tessera_client_entity *entity) {
    if (entity->alias >= b->view_capacity) return NULL;
    bot_seen *seen = &b->view[entity->alias];
    return seen->entity_id == entity->id ? seen : NULL;
}

/* Takes the entry of `entity_id` out of the view into *out. Returns false
 * when there is none. A leave names the entity by id only, and its alias is
 * gone by then: a walk over the slots, which leaves are rare enough for. */
static bool bots_view_take(bot *b, uint64_t entity_id, bot_seen *out) {
    for (uint32_t i = 0; i < b->view_capacity; i++) {
        if (b->view[i].entity_id != entity_id) continue;
        *out = b->view[i];
        memset(&b->view[i], 0, sizeof b->view[i]);
        return true;
    }
    return false;
}

/* The bot that plays the entity of `seen`, or NULL (an NPC, or a bot not
 * logged in yet): the one bots_by_entity names, remembered in the slot and
 * looked up again only when that bot no longer plays this entity. */
static const bot *bots_seen_bot(bots_run *run, bot_seen *seen) {
    if (seen->other_plus_one) {
        const bot *other = &run->bots[seen->other_plus_one - 1];
        if (other->entity_id == seen->entity_id) return other;
    }
    const bot *other = id_map_get(&run->bots_by_entity, seen->entity_id);
    seen->other_plus_one = other ? other->index + 1 : 0;
    return other;
}

/* Adds the latency samples of the update just applied to the run's
 * histogram: receipt time minus the cell's stamp, once per MOVE. */
static void bots_flush_latency(bot *b) {
    if (!b->latency_pending) return;
    bots_run *run = b->run;
    uint64_t latency = 0;
    if (b->frame_wall_us >= b->latency_stamp_us)
        latency = b->frame_wall_us - b->latency_stamp_us;
    else
        run->latency_clock_skew += b->latency_pending; /* counted as 0 */
    for (uint32_t i = 0; i < b->latency_pending; i++) latency_histogram_add(&run->latency, latency);
    b->latency_pending = 0;
}

/* The bot's timer for a reconnect later (--reconnect-at's, or a
 * recovery's next attempt), initialised on first use and closed by
 * bots_finish; one at a time, since a bot is never in both. */
static void bots_start_timer(bot *b, uint64_t delay_ms, uv_timer_cb callback) {
    if (!b->reconnect_timer_open) {
        uv_timer_init(&b->run->loop, &b->reconnect_timer);
        b->reconnect_timer.data = b;
        b->reconnect_timer_open = true;
    }
    uv_timer_start(&b->reconnect_timer, callback, delay_ms, 0);
}

/* --reconnect-at: the bot drops its connection as a lost network would
 * (its entity stays on the baseapp for the grace period) and reconnects
 * with its session token once the client has closed (bots_on_closed). */
static void bots_drop_connection(bot *b) {
    b->reconnect_done = true;
    if (!b->session_token[0]) return;
    b->reconnecting = true;
    tessera_client_close(b->client);
}

/* ---- recovering from a lost baseapp ---------------------------------------- */

static int bots_split_target(const char *text, char *host, size_t host_size, int *port);
static void bots_launch(bots_run *run, bot *b, const char *host, int port);

/* The index of address `text` ("host:port", an IP literal) in
 * run->addresses, added if new; UINT16_MAX when it is no such address or
 * the table is full. */
static uint16_t bots_address_index(bots_run *run, const char *text) {
    for (size_t i = 0; i < run->address_count; i++)
        if (strcmp(run->addresses[i].text, text) == 0) return (uint16_t)i;
    bots_address address;
    memset(&address, 0, sizeof address);
    if (run->address_count >= BOTS_MAX_ADDRESSES || strlen(text) >= sizeof address.text ||
        bots_split_target(text, address.host, sizeof address.host, &address.port) != 0)
        return UINT16_MAX;
    snprintf(address.text, sizeof address.text, "%s", text);
    /* Grown one at a time: it holds a cluster's few baseapps. */
    run->addresses = xrealloc(run->addresses, (run->address_count + 1) * sizeof run->addresses[0]);
    run->addresses[run->address_count] = address;
    return (uint16_t)run->address_count++;
}

/* What a login reply says about where to go should this baseapp die: its
 * other baseapps, and this one. */
static void bots_note_baseapps(bot *b, tessera_client *client, const tessera_client_login_info *info) {
    bots_run *run = b->run;
    b->baseapp_count = 0;
    for (size_t i = 0; i < info->baseapp_count; i++) {
        uint16_t index = bots_address_index(run, info->baseapps[i]);
        if (index != UINT16_MAX) b->baseapps[b->baseapp_count++] = index;
    }
    uint16_t here = bots_address_index(run, tessera_client_address(client));
    b->address = here != UINT16_MAX ? here : 0;
}

/* Where a lost bot tries to reconnect, in order, each once: the other
 * baseapps of its last login reply, --connect (index 0), the baseapp it
 * was on. Returns how many (at least one). */
static size_t bots_candidates(const bot *b, uint16_t out[TESSERA_CLIENT_MAX_BASEAPPS + 2]) {
    size_t count = 0;
    uint16_t wanted[TESSERA_CLIENT_MAX_BASEAPPS + 2];
    size_t wanted_count = 0;
    for (size_t i = 0; i < b->baseapp_count; i++) wanted[wanted_count++] = b->baseapps[i];
    wanted[wanted_count++] = 0;
    wanted[wanted_count++] = b->address;
    for (size_t i = 0; i < wanted_count; i++) {
        bool seen = false;
        for (size_t j = 0; j < count && !seen; j++) seen = out[j] == wanted[i];
        if (!seen) out[count++] = wanted[i];
    }
    return count;
}

/* The bot stops trying: it is dropped for the rest of the run, counted
 * (recovery_failed, and an error named `counted`) and logged once. Its
 * attempt in flight, if any, is closed. */
static void bots_give_up(bot *b, const char *counted, const char *why) {
    bots_run *run = b->run;
    if (b->recovering) run->recovering--;
    b->recovering = false;
    b->dropped = true;
    run->recovery_failed++;
    bots_count_reason(run, counted);
    log_warn("bot %u: gives up getting back into the world after its baseapp went: %s", b->index, why);
    if (b->reconnect_timer_open) uv_timer_stop(&b->reconnect_timer);
    if (b->client) tessera_client_close(b->client); /* on_closed sees `dropped` and does nothing more */
}

static void bots_on_recover_timer(uv_timer_t *timer) {
    bot *b = timer->data;
    bots_run *run = b->run;
    if (run->finished || b->client || !b->recovering) return;
    uint16_t candidates[TESSERA_CLIENT_MAX_BASEAPPS + 2];
    size_t count = bots_candidates(b, candidates);
    const bots_address *address = &run->addresses[candidates[b->recover_tries % count]];
    b->recover_tries++;
    run->recovery_attempts++;
    bots_launch(run, b, address->host, address->port);
}

/* The bot's connection ended, the server side's doing, while it was in the
 * world: it reconnects with its session token, after a pause. */
static void bots_start_recovery(bot *b, const char *reason) {
    bots_run *run = b->run;
    run->server_losses++;
    b->handing_off = false;
    bots_forget_view(b); /* the view went with the connection; the next one starts afresh */
    if (!b->session_token[0]) {
        bots_give_up(b, "recovery_failed:no_session_token", "it has no session token to reconnect with");
        return;
    }
    if (run->options.recover_seconds <= 0) {
        bots_give_up(b, "recovery_failed:disabled", "--recover-seconds is 0");
        return;
    }
    b->recovering = true;
    run->recovering++;
    b->lost_at_ms = uv_now(&run->loop);
    b->recover_tries = 0;
    b->retry_ms = 0;
    b->session_expired = false;
    log_debug("bot %u: its baseapp %s went (%s): reconnecting", b->index, run->addresses[b->address].text, reason);
    bots_start_timer(b, BOTS_RECOVER_PAUSE_MS, bots_on_recover_timer);
}

/* A reconnect attempt's client closed without getting back: the next
 * candidate after the wait the attempt asked for, unless the session is
 * gone or the time is up. */
static void bots_recovery_attempt_failed(bot *b, tessera_client_close_cause cause, const char *reason) {
    bots_run *run = b->run;
    if (b->session_expired && b->handover_token[0]) {
        /* The token is good nowhere else (a login redirect's, made for the
         * baseapp that died): its session token is the way back, if any. */
        memset(b->handover_token, 0, sizeof b->handover_token);
        b->session_expired = false;
    }
    if (b->session_expired) {
        bots_give_up(b, "recovery_failed:session_expired", "its session expired");
        return;
    }
    uint64_t delay_ms = b->retry_ms ? b->retry_ms : BOTS_RECOVER_RETRY_MS;
    b->retry_ms = 0;
    uint64_t next_ms = uv_now(&run->loop) + delay_ms - b->lost_at_ms;
    if ((double)next_ms > run->options.recover_seconds * 1000.0) {
        char why[256];
        snprintf(why, sizeof why, "not back within --recover-seconds %g (last attempt: %s, %s)",
                 run->options.recover_seconds, tessera_client_close_cause_name(cause), reason);
        bots_give_up(b, "recovery_failed:timed_out", why);
        return;
    }
    log_debug("bot %u: reconnect attempt %u failed (%s: %s): next in %" PRIu64 " ms", b->index, b->recover_tries,
              tessera_client_close_cause_name(cause), reason, delay_ms);
    bots_start_timer(b, delay_ms, bots_on_recover_timer);
}

/* The bot is back in the world after a loss. */
static void bots_recovered(bot *b) {
    bots_run *run = b->run;
    b->recovering = false;
    run->recovering--;
    run->recoveries++;
    uint64_t now_ms = uv_now(&run->loop);
    uint64_t took_ms = now_ms - b->lost_at_ms;
    if (run->recovery_samples == run->recovery_capacity) {
        run->recovery_capacity = run->recovery_capacity ? run->recovery_capacity * 2 : 64;
        run->recovery_ms = xrealloc(run->recovery_ms, run->recovery_capacity * sizeof run->recovery_ms[0]);
    }
    run->recovery_ms[run->recovery_samples++] = took_ms > UINT32_MAX ? UINT32_MAX : (uint32_t)took_ms;
    b->recovered_at_ms = now_ms - run->start_ms;
    if (!b->recovered_at_ms) b->recovered_at_ms = 1;
    log_debug("bot %u: back in the world %" PRIu64 " ms after its baseapp went (%u attempts)", b->index, took_ms,
              b->recover_tries);
}

/* An attempt in flight past --recover-seconds is given up (the server may
 * hold a connection and never answer it). From the tick, while any bot
 * recovers. */
static void bots_check_recoveries(bots_run *run) {
    uint64_t now_ms = uv_now(&run->loop);
    double limit_ms = run->options.recover_seconds * 1000.0;
    for (uint32_t i = 0; i < run->options.count && run->recovering > 0; i++) {
        bot *b = &run->bots[i];
        if (b->recovering && b->client && (double)(now_ms - b->lost_at_ms) > limit_ms) {
            char why[128];
            snprintf(why, sizeof why, "not back within --recover-seconds %g (an attempt got no answer)",
                     run->options.recover_seconds);
            bots_give_up(b, "recovery_failed:timed_out", why);
        }
    }
}

/* When the bots stop walking and calling, in ms after the start: the last
 * --settle-seconds, and with --verify-aoi at least the last 1.5 s (negative
 * for runs shorter than that: from the start). */
static double bots_settle_at_ms_of(const bots_run *run) {
    double settle_ms = run->options.settle_seconds * 1000.0;
    if (run->options.verify_aoi && settle_ms < BOTS_SETTLE_MS) settle_ms = BOTS_SETTLE_MS;
    return run->options.seconds * 1000.0 - settle_ms;
}

static double bots_settle_at_ms(const bots_run *run) { return run->settle_at_ms; }

static void bots_on_tick(uv_timer_t *timer) {
    bots_run *run = timer->data;
    uint64_t now_us = clock_monotonic_us();
    double dt = (double)(now_us - run->last_tick_us) / 1e6;
    run->last_tick_us = now_us;
    if (dt > BOTS_MAX_STEP_S) dt = BOTS_MAX_STEP_S;
    double elapsed_ms = (double)(uv_now(&run->loop) - run->start_ms);
    if (run->recovering > 0) bots_check_recoveries(run);
    if (elapsed_ms >= bots_settle_at_ms(run)) return; /* settling: stand still */
    for (uint32_t i = 0; i < run->options.count; i++) {
        bot *b = &run->bots[i];
        if (!b->in_world) continue;
        if (run->options.reconnect_at_seconds > 0 && i < run->options.reconnect_bots && !b->reconnect_done &&
            elapsed_ms >= run->options.reconnect_at_seconds * 1000.0) {
            bots_drop_connection(b);
            continue;
        }
        if (i < run->options.teleport_bots && b->teleports_done < run->options.teleport_count &&
            elapsed_ms >= run->options.teleports[b->teleports_done].at_seconds * 1000.0)
            bots_teleport_now(b, &run->options.teleports[b->teleports_done++]);
        bots_walk(b, dt);
        if (run->options.ping_rate > 0) bots_ping(b, run->options.ping_rate * dt);
        if (run->options.calls_per_second <= 0) continue;
        for (unsigned k = bots_calls_due(b, run->options.calls_per_second, dt); k > 0 && b->in_world; k--) bots_call(b);
    }
}

/* ---- client callbacks ----------------------------------------------------- */

/* The bot's player entity is in a space: it walks from here. */
static void bots_enter_world(bot *b, const tessera_client_login_info *info) {
    bots_run *run = b->run;
    if (info->reconnected) {
        run->reconnects++;
        if (info->entity_id != b->entity_id) {
            run->reconnects_other_entity++;
            log_warn("bot %u: reconnected to entity %" PRIu64 ", not its own %" PRIu64, b->index, info->entity_id,
                     b->entity_id);
        }
        id_map_remove(&run->bots_by_entity, b->entity_id);
        run->logged_in--; /* the same login, resumed */
    } else if (b->ever_in_world) {
        /* Back through another baseapp (a hand-off): the same player. */
        run->rejoined++;
        id_map_remove(&run->bots_by_entity, b->entity_id);
        run->logged_in--;
    }
    b->ever_in_world = true;
    b->handing_off = false;
    memset(b->handover_token, 0, sizeof b->handover_token);
    b->in_world = 1;
    b->in_world_at_ms = uv_now(&run->loop) - run->start_ms;
    b->entity_id = info->entity_id;
    b->view_radius = info->view_radius;
    b->view_hysteresis = info->view_hysteresis;
    b->tick_hz = info->tick_hz;
    b->x = info->x;
    b->y = info->y;
    b->z = info->z;
    b->yaw = info->yaw;
    memcpy(b->world_min, info->world_min, sizeof b->world_min);
    memcpy(b->world_max, info->world_max, sizeof b->world_max);
    b->position_precision = info->position_precision;
    snprintf(b->space, sizeof b->space, "%s", info->space_name);
    bots_pick_waypoint(b);
    run->logged_in++;
    id_map_put(&run->bots_by_entity, b->entity_id, b);
    if (!run->warned_speed && info->max_speed > 0 && run->options.speed > info->max_speed) {
        run->warned_speed = 1;
        log_warn("--speed %.2f is above the cell's max_speed %.2f: expect corrections", run->options.speed,
                 (double)info->max_speed);
    }
}

static void bots_on_logged_in(tessera_client *client, const tessera_client_login_info *info) {
    bot *b = tessera_client_user_data(client);
    bots_run *run = b->run;
    snprintf(b->session_token, sizeof b->session_token, "%s", info->session_token);
    bots_note_baseapps(b, client, info);
    if (b->recovering) bots_recovered(b);
    if (!run->definitions_digest[0]) {
        snprintf(run->definitions_digest, sizeof run->definitions_digest, "%s", info->definitions_digest);
        run->definition_classes = info->definition_classes;
    } else if (strcmp(run->definitions_digest, info->definitions_digest) != 0) {
        run->definitions_differ++;
    }
    if (info->in_space) {
        bots_enter_world(b, info);
        return;
    }
    /* An entity without a space (an Account): --enter asks it to hand the
     * client to one that has (giveClientTo); the bot walks once it has. */
    b->entity_id = info->entity_id;
    if (!run->options.enter_method) return;
    if (tessera_client_call(client, info->entity_id, ENTITY_DEF_PART_BASE, run->options.enter_method, NULL) != 0) {
        run->call_failures++;
        log_warn("bot %u: its %s has no exposed base method %s()", b->index, info->entity_type,
                 run->options.enter_method);
    }
}

/* The argument states of the methods the bot calls (of its client's
 * definitions). */
static void bots_free_args(bot *b) {
    for (uint32_t i = 0; i < BOTS_MAX_CALLS; i++) {
        entity_state_free(b->call_args[i]);
        b->call_args[i] = NULL;
    }
    entity_state_free(b->ping_args);
    entity_state_free(b->teleport_args);
    b->ping_args = b->teleport_args = NULL;
}

static void bots_on_redirected(tessera_client *client, const char *reason) {
    bot *b = tessera_client_user_data(client);
    (void)reason;
    /* The next login reply brings the definitions anew: the argument
     * states of the old ones go now. */
    bots_free_args(b);
    if (b->in_world) {
        /* Its baseapp is stopping: the bot stands still until it is in
         * the world again, through the other one. */
        b->in_world = 0;
        b->handing_off = true;
        b->run->handed_off++;
        bots_forget_view(b);
    }
}

static void bots_on_player_changed(tessera_client *client, const tessera_client_login_info *info) {
    bot *b = tessera_client_user_data(client);
    snprintf(b->session_token, sizeof b->session_token, "%s", info->session_token);
    b->entity_id = info->entity_id;
    b->run->player_changes++;
}

static void bots_on_entered_space(tessera_client *client, const tessera_client_login_info *info) {
    bots_enter_world(tessera_client_user_data(client), info);
}

static void bots_on_frame_begin(tessera_client *client, uint32_t tick) {
    bot *b = tessera_client_user_data(client);
    bots_flush_latency(b); /* an update whose end was skipped (the client closed) */
    /* One clock read per update: every move in it arrived at this moment. */
    b->frame_wall_us = clock_wall_us();
    b->frame_tick = tick;
    if (tessera_client_frame_ticks_restart(client)) b->tick_counter++;
}

static void bots_on_frame_end(tessera_client *client, uint32_t tick) {
    (void)tick;
    bots_flush_latency(tessera_client_user_data(client));
}

static void bots_on_enter(tessera_client *client, const tessera_client_entity *entity) {
    bot *b = tessera_client_user_data(client);
    if (id_map_put(&b->seen, entity->id, b) != 0) log_panic("id_map_put failed");
    const bot *other_bot = id_map_get(&b->run->bots_by_entity, entity->id);
    bool travels = other_bot && other_bot->index < b->run->options.teleport_bots;
    if (entity->id != b->entity_id && !travels && id_map_get(&b->old_space, entity->id)) {
        /* It was in the space this bot left and stays there (it is not a
         * bot that teleports too): nothing of that space may follow. */
        b->run->teleport_stale++;
        log_warn("bot %u: entity %" PRIu64 " of the space it left entered its view in '%s'", b->index, entity->id,
                 b->space);
    }
    bot_seen *seen = bots_view_slot(b, entity->alias);
    if (!seen) return;
    seen->entity_id = entity->id;
    seen->stamp_us = entity->last_move_stamp_us;
    seen->tick = b->frame_tick;
    seen->counter = b->tick_counter;
    seen->other_plus_one = other_bot ? other_bot->index + 1 : 0;
    seen->x = entity->x;
    seen->z = entity->z;
}

/* Whether `other` (a bot) was walking at wall time `stamp_us`. */
static bool bots_walking_at(const bots_run *run, const bot *other, uint64_t stamp_us) {
    double at_ms = (double)(stamp_us - run->start_wall_us) / 1000.0;
    return run->options.speed > 0 && other->in_world && at_ms < bots_settle_at_ms(run) &&
           at_ms > (double)other->in_world_at_ms + 1000.0;
}

static void bots_on_leave(tessera_client *client, uint64_t entity_id) {
    bot *b = tessera_client_user_data(client);
    bots_run *run = b->run;
    bot_seen taken;
    bot_seen *seen = bots_view_take(b, entity_id, &taken) ? &taken : NULL;
    const bot *mover = id_map_get(&run->bots_by_entity, entity_id);
    uint64_t now_ms = uv_now(&run->loop) - run->start_ms;
    /* A teleport empties views and fills them anew: what leaves around one
     * (of the bot or of the one it sees) is no flicker. */
    bool teleporting =
        tessera_client_changing_space(client) || (b->teleported_at_ms && now_ms - b->teleported_at_ms < 2000) ||
        (mover && mover->teleported_at_ms && now_ms - mover->teleported_at_ms < 2000) ||
        (b->restored_at_ms && now_ms - b->restored_at_ms < 2000) ||
        (mover && mover->restored_at_ms && now_ms - mover->restored_at_ms < 2000) ||
        (b->recovered_at_ms && now_ms - b->recovered_at_ms < 2000) ||
        (mover &&
         (mover->recovering || mover->dropped || (mover->recovered_at_ms && now_ms - mover->recovered_at_ms < 2000)));
    if (teleporting) return;
    if (entity_id == b->entity_id) {
        run->flickers++;
        log_warn("bot %u: its own entity left its view", b->index);
    } else if (seen) {
        /* Where is it now? A bot knows; anything else stands still (the
         * demo's NPCs). Either way it must be beyond the view's edge,
         * give or take the walk of a round trip. */
        const bot *other = id_map_get(&run->bots_by_entity, entity_id);
        double x = other ? other->x : seen->x, z = other ? other->z : seen->z;
        double distance = fmax(fabs(x - b->x), fabs(z - b->z));
        double slack = 2.0 * run->options.speed * BOTS_FLICKER_SLACK_S + b->position_precision;
        if (distance < (double)b->view_radius - slack && (!other || strcmp(other->space, b->space) == 0)) {
            if (run->flickers < sizeof run->flicker_examples / sizeof run->flicker_examples[0]) {
                uint64_t hrtime_ms = uv_hrtime() / 1000000u; /* whole milliseconds, as uv_now counts */
                run->flicker_examples[run->flickers] = (struct bots_flicker){
                    b->index, entity_id, distance, (double)hrtime_ms - (double)uv_now(&run->loop)};
            }
            run->flickers++;
            if (run->flickers <= BOTS_LOGGED_FAILURES_MAX)
                log_warn("bot %u: entity %" PRIu64 " left its view %.1f m away (the view is %.1f m)", b->index,
                         entity_id, distance, (double)b->view_radius);
        }
    }
}

static void bots_on_move(tessera_client *client, const tessera_client_entity *entity, uint64_t stamp_us) {
    bot *b = tessera_client_user_data(client);
    bots_run *run = b->run;
    if (stamp_us == 0) return; /* not stamped: nothing to measure */
    bot_seen *seen = bots_view_find(b, entity);
    if (seen) {
        const bot *other = bots_seen_bot(run, seen);
        if (seen->stamp_us && stamp_us > seen->stamp_us && other && other != b &&
            bots_walking_at(run, other, seen->stamp_us) && bots_walking_at(run, other, stamp_us) &&
            bots_walking_at(run, b, seen->stamp_us)) {
            uint64_t gap = stamp_us - seen->stamp_us;
            if (gap > run->longest_gap_us) run->longest_gap_us = gap;
            /* The budget's bound is in ticks (an entity in view goes at
             * least every tick_hz of them): within one cell's count of
             * ticks it is judged in ticks, with one tick to spare, so a
             * tick the loaded host ran late is not counted; across a move
             * of this bot's real to another cell (whose counter says
             * nothing of this one's) in time. */
            uint32_t ticks = b->frame_tick - seen->tick;
            bool same_cell = seen->counter == b->tick_counter && b->frame_tick > seen->tick;
            bool too_long = same_cell ? ticks > (b->tick_hz ? b->tick_hz : 10) + 1
                                      : (double)gap > run->options.gap_limit_ms * 1000.0;
            if (too_long) {
                run->update_gaps++;
                if (run->update_gaps <= BOTS_LOGGED_FAILURES_MAX)
                    log_warn("bot %u: entity %" PRIu64 " in view had no update for %.0f ms", b->index, entity->id,
                             (double)gap / 1000.0);
            }
        }
        seen->stamp_us = stamp_us;
        seen->tick = b->frame_tick;
        seen->counter = b->tick_counter;
        seen->x = entity->x;
        seen->z = entity->z;
    }
    if (b->latency_pending && b->latency_stamp_us != stamp_us) bots_flush_latency(b);
    b->latency_stamp_us = stamp_us;
    b->latency_pending++;
}

static void bots_on_client_call(tessera_client *client, const tessera_client_entity *entity,
                                const entity_def_method *method, const entity_state *args) {
    (void)entity;
    (void)args;
    bot *b = tessera_client_user_data(client);
    bots_counters_add(&b->run->client_calls, method->name);
}

static void bots_on_event(tessera_client *client, const entity_def_method *event, uint64_t source_id,
                          const entity_state *fields) {
    (void)source_id;
    (void)fields;
    bot *b = tessera_client_user_data(client);
    bots_counters_add(&b->run->game_events, event->name);
}

static void bots_on_teleported(tessera_client *client, const tessera_client_teleport *teleport) {
    bot *b = tessera_client_user_data(client);
    b->x = teleport->x;
    b->y = teleport->y;
    b->z = teleport->z;
    b->yaw = teleport->yaw;
    b->teleports_received++;
    b->run->teleports_received++;
    b->teleported_at_ms = uv_now(&b->run->loop) - b->run->start_ms;
    if (!b->teleported_at_ms) b->teleported_at_ms = 1;
    const tessera_client_login_info *info = tessera_client_login_info_get(client);
    if (teleport->space_changed && info) { /* a teleport comes only after the login */
        memcpy(b->world_min, info->world_min, sizeof b->world_min);
        memcpy(b->world_max, info->world_max, sizeof b->world_max);
        b->position_precision = info->position_precision;
        /* What it saw there must not follow it here. */
        id_map_close(&b->old_space);
        b->old_space = b->seen;
        id_map_init(&b->seen);
    }
    snprintf(b->space, sizeof b->space, "%s", teleport->space_name);
    bots_pick_waypoint(b);
}

/* The bot's entity came back after its cellapp died: its view starts
 * again (the SDK emptied it), it walks on from where it is now. */
static void bots_on_restored(tessera_client *client, const tessera_client_restore *restore) {
    bot *b = tessera_client_user_data(client);
    bots_run *run = b->run;
    b->x = restore->x;
    b->y = restore->y;
    b->z = restore->z;
    b->yaw = restore->yaw;
    b->restored_at_ms = uv_now(&run->loop) - run->start_ms;
    if (!b->restored_at_ms) b->restored_at_ms = 1;
    run->restores++;
    if (restore->from_ghost) run->restores_from_ghost++;
    if (run->restore_samples < BOTS_MAX_RESTORES) {
        if (!run->restore_wall_ms) {
            run->restore_wall_ms = xcalloc(BOTS_MAX_RESTORES, sizeof *run->restore_wall_ms);
            run->restore_age_ms = xcalloc(BOTS_MAX_RESTORES, sizeof *run->restore_age_ms);
        }
        run->restore_wall_ms[run->restore_samples] = clock_wall_us() / 1000;
        run->restore_age_ms[run->restore_samples] = restore->state_age_ms;
        run->restore_samples++;
    }
    log_info("bot %u: its entity was restored (%s, %u ms old)", b->index,
             restore->from_ghost ? "from its ghost" : "from a backup", restore->state_age_ms);
    bots_pick_waypoint(b);
}

static void bots_on_correction(tessera_client *client, const tessera_client_correction *correction) {
    bot *b = tessera_client_user_data(client);
    b->x = correction->x;
    b->y = correction->y;
    b->z = correction->z;
    b->yaw = correction->yaw;
}

static void bots_on_error(tessera_client *client, int code, const char *message) {
    bot *b = tessera_client_user_data(client);
    bots_run *run = b->run;
    if (run->finished) return;
    /* The baseapp sends an Error only as it drops the client (kicked,
     * replaced, shutting down, ...): the end that follows is no loss. */
    b->server_error = true;
    if (b->recovering) {
        /* An answer to a reconnect attempt, no failure of the run: the
         * session is gone, or the next attempt waits as asked (the session's
         * baseapp is being restored: ERROR_UNAVAILABLE). */
        if (code == TESSERA_CLIENT_ERROR_SESSION_EXPIRED) b->session_expired = true;
        b->retry_ms = tessera_client_error_retry_after_ms(client);
        log_debug("bot %u: reconnect answered %s (%s), retry after %u ms", b->index, tessera_client_error_name(code),
                  message, b->retry_ms);
        return;
    }
    int in_world = tessera_client_get_state(client) == TESSERA_CLIENT_IN_WORLD;
    uint32_t retry_after_ms = tessera_client_error_retry_after_ms(client);
    if (!in_world && !b->ever_in_world && retry_after_ms > 0 && b->login_retries < BOTS_LOGIN_RETRIES_MAX &&
        (code == TESSERA_CLIENT_ERROR_UNAVAILABLE || code == TESSERA_CLIENT_ERROR_RATE_LIMITED)) {
        /* Busy, not a refusal: a player's client tries again, as asked. */
        b->login_retry = true;
        b->login_retries++;
        b->retry_ms = retry_after_ms;
        run->login_retries++;
        return;
    }
    char reason[64];
    snprintf(reason, sizeof reason, "%s:%s", in_world ? "error" : "login_failed", tessera_client_error_name(code));
    bots_count_reason(run, reason);
    b->had_error = 1;
    bots_log_failure(run, b, reason, message);
}

static void bots_on_closed(tessera_client *client, tessera_client_close_cause cause, const char *reason) {
    bot *b = tessera_client_user_data(client);
    bots_run *run = b->run;
    bots_flush_latency(b);
    tessera_client_stats stats;
    tessera_client_get_stats(client, &stats);
    run->msgs_in += stats.frames_in;
    run->bytes_in += stats.bytes_in;
    run->enter += stats.enters;
    run->leave += stats.leaves;
    run->moves += stats.moves;
    run->corrections += stats.corrections;
    run->stale_ignored += stats.stale_leaves + stats.discarded_records;
    run->stream_bytes += stats.stream_bytes;
    run->property_updates += stats.property_updates;
    run->discarded_records += stats.discarded_records;
    run->base_property_updates += stats.base_property_updates;
    run->client_calls_in += stats.client_calls;
    run->stale_calls += stats.stale_calls;
    run->calls_out += stats.calls_out;
    run->redirects += stats.redirects;
    run->password_logins += stats.password_logins;
    bool was_in_world = b->in_world;
    if (b->in_world) run->client_seconds += (double)(uv_now(&run->loop) - run->start_ms - b->in_world_at_ms) / 1000.0;
    /* Their class belongs to the client's definitions, freed on return. */
    bots_free_args(b);
    b->client = NULL;
    b->in_world = 0;
    if (run->finished) return; /* closed by the end of the run */
    if (b->dropped) return;    /* it gave up recovering; bots_give_up counted it */
    if (b->login_retry) {
        b->login_retry = false;
        bots_start_timer(b, b->retry_ms, bots_on_reconnect_timer);
        return;
    }
    if (b->reconnecting && cause == TESSERA_CLIENT_CLOSED_BY_CALLER) {
        /* Its view goes with the connection; the new one starts afresh. */
        bots_forget_view(b);
        bots_start_timer(b, (uint64_t)run->options.reconnect_delay_ms, bots_on_reconnect_timer);
        return;
    }
    if (b->recovering) {
        bots_recovery_attempt_failed(b, cause, reason);
        return;
    }
    /* The server side went away (a reset, an end of file, a failed write,
     * or the baseapp a hand-off sent it to cannot be reached), with no
     * Error to say it meant to: the bot comes back by itself. */
    bool server_gone = cause == TESSERA_CLIENT_CLOSED_DISCONNECTED || cause == TESSERA_CLIENT_CLOSED_CONNECT_FAILED;
    if (b->handing_off && cause == TESSERA_CLIENT_CLOSED_CONNECT_FAILED)
        snprintf(b->handover_token, sizeof b->handover_token, "%s", tessera_client_redirect_token(client));
    if ((was_in_world || b->handing_off) && server_gone && !b->server_error) {
        bots_start_recovery(b, reason);
        return;
    }

    const char *counted = NULL;
    switch (cause) {
        case TESSERA_CLIENT_CLOSED_BY_CALLER:
        case TESSERA_CLIENT_CLOSED_SERVER_ERROR: /* on_error counted it */
            break;
        case TESSERA_CLIENT_CLOSED_CONNECT_FAILED:
            counted = "connect_failed";
            break;
        case TESSERA_CLIENT_CLOSED_PROTOCOL:
            counted = "protocol";
            break;
        case TESSERA_CLIENT_CLOSED_DISCONNECTED:
            if (!b->had_error) counted = "disconnected";
            break;
    }
    if (!counted) return;
    b->had_error = 1;
    bots_count_reason(run, counted);
    bots_log_failure(run, b, counted, reason);
}

/* --record-file: bot 0's frames, each as on a TCP connection (a 4-byte
 * big-endian length, then the ServerToClient body), for
 * tessera-stream-replay and the SDKs' golden tests. */
static void bots_on_frame_received(tessera_client *client, const uint8_t *frame, size_t length) {
    bot *b = tessera_client_user_data(client);
    bots_run *run = b->run;
    if (!run->record || b->index != 0 || length > UINT32_MAX) return;
    uint8_t header[FRAME_HEADER_BYTES];
    frame_write_header(header, (uint32_t)length);
    if (fwrite(header, 1, sizeof header, run->record) != sizeof header ||
        (length && fwrite(frame, 1, length, run->record) != length)) {
        log_warn("--record-file: cannot write: %s; recording stops", strerror(errno));
        if (fclose(run->record) != 0) log_warn("--record-file: %s", strerror(errno));
        run->record = NULL;
    }
}

static const tessera_client_callbacks bots_client_callbacks = {
    .on_frame_received = bots_on_frame_received,
    .on_logged_in = bots_on_logged_in,
    .on_frame_begin = bots_on_frame_begin,
    .on_frame_end = bots_on_frame_end,
    .on_enter = bots_on_enter,
    .on_move = bots_on_move,
    .on_leave = bots_on_leave,
    .on_client_call = bots_on_client_call,
    .on_event = bots_on_event,
    .on_correction = bots_on_correction,
    .on_teleported = bots_on_teleported,
    .on_restored = bots_on_restored,
    .on_error = bots_on_error,
    .on_player_changed = bots_on_player_changed,
    .on_entered_space = bots_on_entered_space,
    .on_redirected = bots_on_redirected,
    .on_closed = bots_on_closed,
};

/* ---- launching ------------------------------------------------------------ */

/* A new client for the bot, dialling host:port: a reconnect with its
 * session token when it dropped its connection (--reconnect-at) or lost
 * its baseapp (a TokenLogin when it lost the baseapp a hand-off sent it
 * to), else a login with the password. */
static void bots_launch(bots_run *run, bot *b, const char *host, int port) {
    char name[64], account[80];
    b->client = tessera_client_create(&run->loop, &bots_client_callbacks, b);
    b->server_error = false;
    snprintf(name, sizeof name, "tessera-bots/%u", b->index);
    snprintf(account, sizeof account, "%s%u", run->options.account_prefix, b->index);
    tessera_client_set_name(b->client, name);
    if (run->tls && tessera_client_use_tls(b->client, run->tls, run->options.tls_name) != 0)
        log_panic("--tls-name '%s' refused by the SDK", run->options.tls_name);
    if (run->options.websocket && tessera_client_use_websocket(b->client) != 0)
        log_panic("--websocket refused by the SDK");
    /* The prefix and password were checked against the SDK's limits when
     * the options were parsed, and a session token is the SDK's own, so
     * neither request can be refused here. */
    int rc = b->recovering && b->handover_token[0] ? tessera_client_token_login(b->client, account, b->handover_token)
             : b->reconnecting || b->recovering    ? tessera_client_reconnect(b->client, account, b->session_token)
                                                   : tessera_client_login(b->client, account, run->options.password);
    b->reconnecting = false;
    if (rc != 0) log_panic("login request refused for account '%s'", account);
    if (tessera_client_connect(b->client, host, port) != 0) {
        /* A recovery moves on to its next candidate (on_closed); anything
         * else is a failure of the run. */
        if (!b->recovering) {
            bots_count_reason(run, "connect_failed");
            b->had_error = 1;
            bots_log_failure(run, b, "connect_failed", "the socket could not be created");
        }
        tessera_client_close(b->client); /* on_closed clears b->client */
    }
}

static void bots_on_reconnect_timer(uv_timer_t *timer) {
    bot *b = timer->data;
    if (b->run->finished || b->client) return;
    bots_launch(b->run, b, b->run->options.host, b->run->options.port);
}

/* When bot `index` is due, in ms after the start: evenly spread. */
static uint64_t bots_due_ms(const bots_run *run, uint32_t index) {
    return (uint64_t)((double)index * run->options.login_spread_ms / (double)run->options.count);
}

static void bots_on_launch(uv_timer_t *timer) {
    bots_run *run = timer->data;
    uint64_t elapsed = uv_now(&run->loop) - run->start_ms;
    while (run->next_launch < run->options.count && bots_due_ms(run, run->next_launch) <= elapsed) {
        bots_launch(run, &run->bots[run->next_launch], run->options.host, run->options.port);
        run->next_launch++;
    }
    if (run->next_launch < run->options.count)
        uv_timer_start(&run->launch_timer, bots_on_launch, bots_due_ms(run, run->next_launch) - elapsed, 0);
}

/* ---- checking views against the truth ------------------------------------- */

/* One bot in the spatial grid: sorted by cell so a cell's bots are a run. */
typedef struct bots_cell_entry {
    uint64_t cell;
    uint32_t bot;
} bots_cell_entry;

static int bots_compare_cells(const void *a, const void *b) {
    uint64_t x = ((const bots_cell_entry *)a)->cell, y = ((const bots_cell_entry *)b)->cell;
    return x < y ? -1 : x > y;
}

/* Grid coordinate of `v`, clamped so it fits 32 bits with room for +-1. */
static int64_t bots_grid_coordinate(double v, double cell_size) {
    double c = floor(v / cell_size);
    if (c < -2147483000.0) c = -2147483000.0;
    if (c > 2147483000.0) c = 2147483000.0;
    return (int64_t)c;
}

static uint64_t bots_cell_key(int64_t cx, int64_t cz) {
    return ((uint64_t)(uint32_t)(int32_t)cx << 32) | (uint32_t)(int32_t)cz;
}

/* The view is a square on X/Z (cellapp/coord.h): distance is the larger of
 * the two axis offsets, for the logs. */
static double bots_plane_distance(const bot *a, const bot *b) {
    double dx = fabs((double)a->x - (double)b->x), dz = fabs((double)a->z - (double)b->z);
    return dx > dz ? dx : dz;
}

/* Whether `other` lies in the square of half-side `extent` around `observer`,
 * computed in single precision as the cellapp computes it (the callers
 * widen or narrow `extent` by the stream's precision). */
static bool bots_in_square(const bot *observer, const bot *other, float extent) {
    float low_x = observer->x - extent, high_x = observer->x + extent;
    float low_z = observer->z - extent, high_z = observer->z + extent;
    return low_x <= other->x && other->x <= high_x && low_z <= other->z && other->z <= high_z;
}

static void bots_report_mismatch(bots_run *run, const bot *observer, const bot *other, double distance,
                                 const char *what) {
    run->aoi_mismatches++;
    if (run->aoi_mismatches + run->aoi_position_mismatches > BOTS_LOGGED_FAILURES_MAX) return;
    log_warn("aoi mismatch: bot %u (entity %" PRIu64 ", at %.2f,%.2f) %s bot %u (entity %" PRIu64
             ", at %.2f,%.2f): distance %.3f, view radius %.2f + hysteresis %.2f",
             observer->index, observer->entity_id, (double)observer->x, (double)observer->z, what, other->index,
             other->entity_id, (double)other->x, (double)other->z, distance, (double)observer->view_radius,
             (double)observer->view_hysteresis);
}

/* Whether `entity`, as `observer` received it, is where bot `other` is: the
 * stream's quantization keeps it within half a precision on each axis (a
 * whole one is allowed for the float rounding on both ends). */
static void bots_check_position(bots_run *run, const bot *observer, const bot *other,
                                const tessera_client_entity *entity) {
    double tolerance = other->position_precision > 0 ? other->position_precision : 1e-3;
    run->aoi_position_checked++;
    double dx = fabs((double)entity->x - (double)other->x), dy = fabs((double)entity->y - (double)other->y),
           dz = fabs((double)entity->z - (double)other->z);
    if (dx <= tolerance && dy <= tolerance && dz <= tolerance) return;
    run->aoi_position_mismatches++;
    if (run->aoi_mismatches + run->aoi_position_mismatches > BOTS_LOGGED_FAILURES_MAX) return;
    log_warn("aoi position mismatch: bot %u sees bot %u (entity %" PRIu64 ") at %.3f,%.3f,%.3f but it is at "
             "%.3f,%.3f,%.3f (precision %g)",
             observer->index, other->index, other->entity_id, (double)entity->x, (double)entity->y, (double)entity->z,
             (double)other->x, (double)other->y, (double)other->z, tolerance);
}

/* Compares every in-world bot's view with where the bots are. The view is
 * the square of half-side radius around B on X/Z: O inside it must be in
 * B's view, O outside the square of half-side radius + hysteresis must be
 * absent, and in between either is right. B must see itself. Pairs within
 * reach are found through a grid of cells at least radius + hysteresis wide
 * (3x3 cells around B); pairs out of reach only need checking where B does
 * see O, which B's view lists. So every ordered pair is decided, and
 * aoi_checked counts them all (n * n with the self pairs), in
 * O(n log n + sum of view sizes).
 *
 * The stream quantizes positions to the login's position_precision, and the
 * cell may reason on quantized positions: a pair within one precision of a
 * square's edge is right either way. Every bot B sees (itself included) must
 * also be where that bot says it is, within one precision on each axis
 * (aoi_position_mismatches: the last MOVE it received is the settled one).
 *
 * Bots that entered the world after the settling began are left out, as
 * observers and as others (counted in aoi_late): their own view and their
 * appearance in the others' views may still be on the way. */
static void bots_verify_aoi(bots_run *run) {
    uint32_t n = 0;
    double cell_size = 1.0;
    for (uint32_t i = 0; i < run->options.count; i++) {
        bot *b = &run->bots[i];
        b->verified = b->in_world && (double)b->in_world_at_ms < bots_settle_at_ms(run);
        if (b->in_world && !b->verified) run->aoi_late++;
        if (!b->verified) continue;
        n++;
        double reach = (double)b->view_radius + (double)b->view_hysteresis;
        if (reach > cell_size) cell_size = reach;
    }
    if (n == 0) return;

    bots_cell_entry *grid = xmalloc(n * sizeof *grid);
    id_map by_entity;
    id_map_init(&by_entity);
    uint32_t k = 0;
    for (uint32_t i = 0; i < run->options.count; i++) {
        bot *b = &run->bots[i];
        if (!b->verified) continue;
        grid[k].cell = bots_cell_key(bots_grid_coordinate(b->x, cell_size), bots_grid_coordinate(b->z, cell_size));
        grid[k].bot = i;
        k++;
        if (id_map_put(&by_entity, b->entity_id, b) != 0) log_panic("id_map_put failed");
    }
    qsort(grid, n, sizeof *grid, bots_compare_cells);

    for (uint32_t i = 0; i < run->options.count; i++) {
        bot *observer = &run->bots[i];
        if (!observer->verified) continue;
        const tessera_client *client = observer->client;

        if (!tessera_client_entity_find(client, observer->entity_id))
            bots_report_mismatch(run, observer, observer, 0.0, "does not see itself,");

        /* Must see: everyone within the radius, all of whom are in the 3x3
         * cells around the observer. */
        int64_t cx = bots_grid_coordinate(observer->x, cell_size), cz = bots_grid_coordinate(observer->z, cell_size);
        for (int64_t gx = cx - 1; gx <= cx + 1; gx++) {
            for (int64_t gz = cz - 1; gz <= cz + 1; gz++) {
                bots_cell_entry key = {.cell = bots_cell_key(gx, gz), .bot = 0};
                /* Lower bound of the cell's run. */
                size_t lo = 0, hi = n;
                while (lo < hi) {
                    size_t mid = lo + (hi - lo) / 2;
                    if (grid[mid].cell < key.cell)
                        lo = mid + 1;
                    else
                        hi = mid;
                }
                for (size_t j = lo; j < n && grid[j].cell == key.cell; j++) {
                    const bot *other = &run->bots[grid[j].bot];
                    if (other == observer || strcmp(other->space, observer->space) != 0) continue;
                    double distance = bots_plane_distance(observer, other);
                    float inner = observer->view_radius - (float)observer->position_precision;
                    if (bots_in_square(observer, other, inner) && !tessera_client_entity_find(client, other->entity_id))
                        bots_report_mismatch(run, observer, other, distance, "does not see");
                }
            }
        }

        /* Must not see: anyone in the view beyond radius + hysteresis. And
         * whoever it sees must be where it is. */
        size_t cursor = 0;
        const tessera_client_entity *entity;
        float outer = observer->view_radius + observer->view_hysteresis + (float)observer->position_precision;
        while ((entity = tessera_client_entity_next(client, &cursor)) != NULL) {
            const bot *other = id_map_get(&by_entity, entity->id);
            if (!other) {
                /* Not a verified bot (one that left or came late, or not
                 * ours): no settled truth to compare with, so counted apart. */
                run->aoi_unknown++;
                continue;
            }
            bots_check_position(run, observer, other, entity);
            if (other == observer) continue;
            double distance = bots_plane_distance(observer, other);
            if (!bots_in_square(observer, other, outer))
                bots_report_mismatch(run, observer, other, distance, "still sees");
        }
    }
    run->aoi_checked = (uint64_t)n * n;
    id_map_close(&by_entity);
    free(grid);
}

/* ---- the snapshot --------------------------------------------------------- */

/* A 64-bit id as a JSON number written exactly (a cJSON number is a double,
 * which rounds ids above 2^53). */
static void bots_add_id(cJSON *object, const char *name, uint64_t id) {
    char text[24];
    snprintf(text, sizeof text, "%" PRIu64, id);
    if (!cJSON_AddRawToObject(object, name, text)) log_panic("out of memory building the snapshot");
}

static void bots_add_position(cJSON *object, float x, float y, float z) {
    if (!cJSON_AddNumberToObject(object, "x", (double)x) || !cJSON_AddNumberToObject(object, "y", (double)y) ||
        !cJSON_AddNumberToObject(object, "z", (double)z))
        log_panic("out of memory building the snapshot");
}

/* Everything the bots in the world see, as --snapshot-file documents it. */
static cJSON *bots_snapshot_json(const bots_run *run) {
    cJSON *root = cJSON_CreateObject();
    cJSON *bots = root ? cJSON_AddArrayToObject(root, "bots") : NULL;
    if (!bots) log_panic("out of memory building the snapshot");
    for (uint32_t i = 0; i < run->options.count; i++) {
        const bot *b = &run->bots[i];
        if (!b->in_world || !b->client) continue;
        char account[80];
        snprintf(account, sizeof account, "%s%u", run->options.account_prefix, b->index);
        cJSON *item = cJSON_CreateObject();
        if (!item || !cJSON_AddStringToObject(item, "account", account))
            log_panic("out of memory building the snapshot");
        bots_add_id(item, "entity_id", b->entity_id);
        bots_add_position(item, b->x, b->y, b->z);
        if (!cJSON_AddStringToObject(item, "space", b->space) ||
            !cJSON_AddNumberToObject(item, "pings_sent", (double)b->pings_sent) ||
            !cJSON_AddNumberToObject(item, "teleports", (double)b->teleports_received))
            log_panic("out of memory building the snapshot");
        cJSON *entities = cJSON_AddArrayToObject(item, "entities");
        if (!entities) log_panic("out of memory building the snapshot");
        size_t cursor = 0;
        const tessera_client_entity *entity;
        while ((entity = tessera_client_entity_next(b->client, &cursor)) != NULL) {
            cJSON *e = cJSON_CreateObject();
            if (!e) log_panic("out of memory building the snapshot");
            bots_add_id(e, "id", entity->id);
            if (!cJSON_AddStringToObject(e, "class", entity->type) ||
                !cJSON_AddBoolToObject(e, "owner", entity->is_owner))
                log_panic("out of memory building the snapshot");
            bots_add_position(e, entity->x, entity->y, entity->z);
            cJSON_AddItemToObject(e, "properties", entity_state_to_json(entity->state, NULL));
            cJSON_AddItemToArray(entities, e);
        }
        cJSON_AddItemToArray(bots, item);
    }
    return root;
}

/* Writes the snapshot to --snapshot-file through a temporary file and a
 * rename, so that a reader never sees half of it. Once per run. */
static void bots_write_snapshot(bots_run *run) {
    if (!run->options.snapshot_file || run->snapshot_done) return;
    run->snapshot_done = 1;
    cJSON *root = bots_snapshot_json(run);
    char problem[512];
    if (json_file_write(run->options.snapshot_file, root, problem, sizeof problem) != 0)
        log_warn("cannot write the snapshot: %s", problem);
    else
        log_info("snapshot written to %s", run->options.snapshot_file);
    cJSON_Delete(root);
}

static void bots_on_snapshot(uv_timer_t *timer) { bots_write_snapshot(timer->data); }

/* ---- the end of the run --------------------------------------------------- */

static void bots_finish(bots_run *run) {
    if (run->finished) return;
    run->finished = 1;
    run->elapsed_s = (double)(clock_monotonic_us() - run->start_us) / 1e6;
    uv_close((uv_handle_t *)&run->tick_timer, NULL);
    uv_close((uv_handle_t *)&run->launch_timer, NULL);
    uv_close((uv_handle_t *)&run->end_timer, NULL);
    uv_close((uv_handle_t *)&run->snapshot_timer, NULL);
    uv_close((uv_handle_t *)&run->sigint, NULL);
    uv_close((uv_handle_t *)&run->sigterm, NULL);
    for (uint32_t i = 0; i < run->options.count; i++)
        if (run->bots[i].reconnect_timer_open) uv_close((uv_handle_t *)&run->bots[i].reconnect_timer, NULL);

    for (uint32_t i = 0; i < run->options.count; i++) {
        bot *b = &run->bots[i];
        if (b->recovering) run->recovering_at_end++;
        if (!b->in_world) continue;
        run->in_world_at_end++;
        if (tessera_client_entity_find(b->client, b->entity_id)) run->self_seen++;
    }
    if (run->options.verify_aoi) bots_verify_aoi(run);
    /* A snapshot due at the very end is written now, while the views are
     * still there (not after an interrupt: that is not the moment asked for). */
    if (!run->interrupted) bots_write_snapshot(run);

    /* Each close ends in on_closed, which adds the client's counters; the
     * loop returns once the last socket is released. */
    for (uint32_t i = 0; i < run->options.count; i++)
        if (run->bots[i].client) tessera_client_close(run->bots[i].client);
}

static void bots_on_end(uv_timer_t *timer) { bots_finish(timer->data); }

static void bots_on_signal(uv_signal_t *handle, int signum) {
    bots_run *run = handle->data;
    run->interrupted = 1;
    log_info("signal %d: ending the run early", signum);
    bots_finish(run);
}

/* ---- report --------------------------------------------------------------- */

static void bots_print_json_string(FILE *out, const char *text) {
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(out, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(out, "\\u%04x", *p);
        else
            fputc(*p, out);
    }
    fputc('"', out);
}

static void bots_print_latency_json(FILE *out, const char *key, const bots_run *run, double percent) {
    if (run->latency.count == 0)
        fprintf(out, ",\"%s\":null", key);
    else
        fprintf(out, ",\"%s\":%.3f", key, (double)latency_histogram_percentile(&run->latency, percent) / 1000.0);
}

static uint64_t bots_entities_seen(const bots_run *run) {
    uint64_t total = 0;
    for (uint32_t i = 0; i < run->options.count; i++) total += id_map_count(&run->bots[i].seen);
    return total;
}

static void bots_print_counters_json(FILE *out, const bots_counters *counters) {
    fputc('{', out);
    for (size_t i = 0; i < counters->count; i++) {
        if (i) fputc(',', out);
        bots_print_json_string(out, counters->items[i].name);
        fprintf(out, ":%" PRIu64, counters->items[i].count);
    }
    fputc('}', out);
}

/* The recovery time at `percent` (nearest rank over the sorted samples),
 * in ms; only with samples. */
static uint32_t bots_recovery_percentile(const bots_run *run, double percent) {
    size_t rank = (size_t)ceil(percent / 100.0 * (double)run->recovery_samples);
    if (rank == 0) rank = 1;
    if (rank > run->recovery_samples) rank = run->recovery_samples;
    return run->recovery_ms[rank - 1];
}

static int bots_compare_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static void bots_print_recovery_json(FILE *out, const char *key, const bots_run *run, double percent) {
    if (run->recovery_samples == 0)
        fprintf(out, ",\"%s\":null", key);
    else
        fprintf(out, ",\"%s\":%u", key, bots_recovery_percentile(run, percent));
}

/* Stream bytes per client per second in the world (0 before any). */
static double bots_stream_rate(const bots_run *run) {
    return run->client_seconds > 0 ? (double)run->stream_bytes / run->client_seconds : 0.0;
}

static void bots_print_json(FILE *out, const bots_run *run) {
    fprintf(out, "{\"bots\":%" PRIu32 ",\"logged_in\":%" PRIu64 ",\"in_world_at_end\":%" PRIu64, run->options.count,
            run->logged_in, run->in_world_at_end);
    fprintf(out, ",\"errors\":%" PRIu64 ",\"error_reasons\":", run->errors);
    bots_print_counters_json(out, &run->reasons);
    fprintf(out, ",\"msgs_in\":%" PRIu64 ",\"bytes_in\":%" PRIu64 ",\"entities_seen\":%" PRIu64, run->msgs_in,
            run->bytes_in, bots_entities_seen(run));
    fprintf(out,
            ",\"enter\":%" PRIu64 ",\"leave\":%" PRIu64 ",\"moves\":%" PRIu64 ",\"corrections\":%" PRIu64
            ",\"stale_ignored\":%" PRIu64,
            run->enter, run->leave, run->moves, run->corrections, run->stale_ignored);
    fprintf(out, ",\"stream_bytes\":%" PRIu64 ",\"stream_bytes_per_client_s\":%.1f", run->stream_bytes,
            bots_stream_rate(run));
    fprintf(out,
            ",\"property_updates\":%" PRIu64 ",\"discarded_records\":%" PRIu64 ",\"base_property_updates\":%" PRIu64,
            run->property_updates, run->discarded_records, run->base_property_updates);
    fprintf(out,
            ",\"calls_out\":%" PRIu64 ",\"call_failures\":%" PRIu64 ",\"client_calls_in\":%" PRIu64
            ",\"stale_calls\":%" PRIu64 ",\"client_calls_by_method\":",
            run->calls_out, run->call_failures, run->client_calls_in, run->stale_calls);
    bots_print_counters_json(out, &run->client_calls);
    fprintf(out, ",\"game_events_by_name\":");
    bots_print_counters_json(out, &run->game_events);
    fprintf(out, ",\"latency_samples\":%" PRIu64, run->latency.count);
    bots_print_latency_json(out, "latency_p50_ms", run, 50.0);
    bots_print_latency_json(out, "latency_p99_ms", run, 99.0);
    bots_print_latency_json(out, "latency_max_ms", run, 100.0);
    fprintf(out, ",\"latency_clock_skew\":%" PRIu64, run->latency_clock_skew);
    fprintf(out,
            ",\"self_seen\":%" PRIu64 ",\"verify_aoi\":%s,\"aoi_checked\":%" PRIu64 ",\"aoi_mismatches\":%" PRIu64
            ",\"aoi_unknown\":%" PRIu64 ",\"aoi_late\":%" PRIu64,
            run->self_seen, run->options.verify_aoi ? "true" : "false", run->aoi_checked, run->aoi_mismatches,
            run->aoi_unknown, run->aoi_late);
    fprintf(out, ",\"aoi_position_checked\":%" PRIu64 ",\"aoi_position_mismatches\":%" PRIu64,
            run->aoi_position_checked, run->aoi_position_mismatches);
    fprintf(out, ",\"flickers\":%" PRIu64 ",\"update_gaps\":%" PRIu64 ",\"longest_update_gap_ms\":%.1f", run->flickers,
            run->update_gaps, (double)run->longest_gap_us / 1000.0);
    fprintf(out, ",\"flicker_examples\":[");
    size_t examples = sizeof run->flicker_examples / sizeof run->flicker_examples[0];
    for (size_t i = 0; i < run->flickers && i < examples; i++) {
        const struct bots_flicker *f = &run->flicker_examples[i];
        fprintf(out, "%s{\"bot\":%u,\"entity\":%" PRIu64 ",\"distance\":%.1f,\"loop_lag_ms\":%.1f}", i ? "," : "",
                f->bot, f->entity, f->distance, f->lag_ms);
    }
    fprintf(out, "]");
    fprintf(out, ",\"pings_sent\":%" PRIu64 ",\"teleports_received\":%" PRIu64 ",\"teleport_stale\":%" PRIu64,
            run->pings_sent, run->teleports_received, run->teleport_stale);
    fprintf(out, ",\"restores\":%" PRIu64 ",\"restores_from_ghost\":%" PRIu64 ",\"restore_wall_ms\":[", run->restores,
            run->restores_from_ghost);
    for (size_t i = 0; i < run->restore_samples; i++) fprintf(out, "%s%" PRIu64, i ? "," : "", run->restore_wall_ms[i]);
    fprintf(out, "],\"restore_age_ms\":[");
    for (size_t i = 0; i < run->restore_samples; i++) fprintf(out, "%s%u", i ? "," : "", run->restore_age_ms[i]);
    fprintf(out, "]");
    fprintf(out, ",\"reconnects\":%" PRIu64 ",\"reconnects_other_entity\":%" PRIu64 ",\"player_changes\":%" PRIu64,
            run->reconnects, run->reconnects_other_entity, run->player_changes);
    fprintf(out, ",\"redirects\":%" PRIu64 ",\"handed_off\":%" PRIu64 ",\"rejoined\":%" PRIu64, run->redirects,
            run->handed_off, run->rejoined);
    fprintf(out, ",\"login_retries\":%" PRIu64, run->login_retries);
    fprintf(out,
            ",\"server_losses\":%" PRIu64 ",\"recoveries\":%" PRIu64 ",\"recovery_failed\":%" PRIu64
            ",\"recovering_at_end\":%" PRIu64 ",\"recovery_attempts\":%" PRIu64,
            run->server_losses, run->recoveries, run->recovery_failed, run->recovering_at_end, run->recovery_attempts);
    bots_print_recovery_json(out, "recovery_ms_p50", run, 50.0);
    bots_print_recovery_json(out, "recovery_ms_p99", run, 99.0);
    bots_print_recovery_json(out, "recovery_ms_max", run, 100.0);
    fprintf(out, ",\"password_logins\":%" PRIu64, run->password_logins);
    fprintf(out, ",\"snapshot_written\":%s", run->snapshot_done ? "true" : "false");
    fprintf(out, ",\"definitions_digest\":\"%s\",\"definition_classes\":%zu,\"definitions_differ\":%" PRIu64,
            run->definitions_digest, run->definition_classes, run->definitions_differ);
    fprintf(out, ",\"seconds\":%.3f,\"interrupted\":%s}\n", run->elapsed_s, run->interrupted ? "true" : "false");
}

static void bots_print_summary(FILE *out, const bots_run *run) {
    fprintf(out, "tessera-bots: %" PRIu32 " bots against %s for %.1f s%s\n", run->options.count, run->options.target,
            run->elapsed_s, run->interrupted ? " (interrupted)" : "");
    fprintf(out,
            "  logged in      %" PRIu64 " (%" PRIu64 " in the world at the end; %" PRIu64 " password logins sent)\n",
            run->logged_in, run->in_world_at_end, run->password_logins);
    fprintf(out, "  errors         %" PRIu64 "\n", run->errors);
    for (size_t i = 0; i < run->reasons.count; i++)
        fprintf(out, "    %-28s %" PRIu64 "\n", run->reasons.items[i].name, run->reasons.items[i].count);
    fprintf(out, "  received       %" PRIu64 " frames, %" PRIu64 " bytes\n", run->msgs_in, run->bytes_in);
    fprintf(out, "  stream         %" PRIu64 " bytes, %.1f bytes per client per second\n", run->stream_bytes,
            bots_stream_rate(run));
    fprintf(out,
            "  properties     %" PRIu64 " updates, %" PRIu64 " discarded records, %" PRIu64 " base property messages\n",
            run->property_updates, run->discarded_records, run->base_property_updates);
    fprintf(out,
            "  calls          %" PRIu64 " sent (%" PRIu64 " refused by the SDK), %" PRIu64
            " client calls received (%" PRIu64 " stale: the entity had just left)\n",
            run->calls_out, run->call_failures, run->client_calls_in, run->stale_calls);
    for (size_t i = 0; i < run->client_calls.count; i++)
        fprintf(out, "    %-28s %" PRIu64 "\n", run->client_calls.items[i].name, run->client_calls.items[i].count);
    uint64_t events = 0;
    for (size_t i = 0; i < run->game_events.count; i++) events += run->game_events.items[i].count;
    fprintf(out, "  game events    %" PRIu64 " received\n", events);
    for (size_t i = 0; i < run->game_events.count; i++)
        fprintf(out, "    %-28s %" PRIu64 "\n", run->game_events.items[i].name, run->game_events.items[i].count);
    fprintf(out,
            "  view           %" PRIu64 " distinct entities seen (summed over bots), %" PRIu64 " enters, %" PRIu64
            " leaves, %" PRIu64 " moves, %" PRIu64 " stale ids ignored\n",
            bots_entities_seen(run), run->enter, run->leave, run->moves, run->stale_ignored);
    fprintf(out, "  corrections    %" PRIu64 "\n", run->corrections);
    if (run->latency.count == 0) {
        fprintf(out, "  latency        no stamped position updates received\n");
    } else {
        fprintf(out, "  latency        p50 %.3f ms, p99 %.3f ms, max %.3f ms over %" PRIu64 " updates\n",
                (double)latency_histogram_percentile(&run->latency, 50.0) / 1000.0,
                (double)latency_histogram_percentile(&run->latency, 99.0) / 1000.0,
                (double)run->latency.max_us / 1000.0, run->latency.count);
    }
    fprintf(out, "  self seen      %" PRIu64 " of %" PRIu64 "\n", run->self_seen, run->in_world_at_end);
    if (run->options.verify_aoi) {
        fprintf(out,
                "  aoi            %" PRIu64 " mismatches in %" PRIu64 " pairs (%" PRIu64
                " bots left out for logging in while the others settled; %" PRIu64
                " entities in views that are no checked bot)\n",
                run->aoi_mismatches, run->aoi_checked, run->aoi_late, run->aoi_unknown);
        fprintf(out, "  positions      %" PRIu64 " of %" PRIu64 " seen bots not where they are\n",
                run->aoi_position_mismatches, run->aoi_position_checked);
    }
    fprintf(out,
            "  crossings      %" PRIu64 " flickers (left while well inside the view), %" PRIu64
            " update gaps over %.0f ms (longest %.0f ms)\n",
            run->flickers, run->update_gaps, run->options.gap_limit_ms, (double)run->longest_gap_us / 1000.0);
    if (run->pings_sent) fprintf(out, "  pings          %" PRIu64 " numbered calls sent\n", run->pings_sent);
    if (run->reconnects || run->options.reconnect_at_seconds > 0)
        fprintf(out, "  reconnects     %" PRIu64 " (%" PRIu64 " came back to another entity)\n", run->reconnects,
                run->reconnects_other_entity);
    if (run->server_losses) {
        fprintf(out,
                "  recoveries     %" PRIu64 " of %" PRIu64 " baseapp losses (%" PRIu64 " gave up, %" PRIu64
                " still trying at the end; %" PRIu64 " reconnects sent)\n",
                run->recoveries, run->server_losses, run->recovery_failed, run->recovering_at_end,
                run->recovery_attempts);
        if (run->recovery_samples)
            fprintf(out, "  recovery time  p50 %u ms, p99 %u ms, max %u ms\n", bots_recovery_percentile(run, 50.0),
                    bots_recovery_percentile(run, 99.0), bots_recovery_percentile(run, 100.0));
    }
    if (run->restores)
        fprintf(out, "  restores       %" PRIu64 " (%" PRIu64 " from a ghost)\n", run->restores,
                run->restores_from_ghost);
    if (run->teleports_received)
        fprintf(out, "  teleports      %" PRIu64 " received, %" PRIu64 " entities of a space left behind seen after\n",
                run->teleports_received, run->teleport_stale);
    if (run->options.snapshot_file)
        fprintf(out, "  snapshot       %s\n", run->snapshot_done ? run->options.snapshot_file : "not written");
}

/* ---- options -------------------------------------------------------------- */

static void bots_usage(FILE *out) {
    fprintf(out, "usage: tessera-bots --connect HOST:PORT --count N --seconds S [options]\n"
                 "\n"
                 "Runs N game clients in one process against a baseapp. Each logs in as\n"
                 "<prefix><index> (index from 0), then walks between random waypoints,\n"
                 "sending 10 moves a second, and calls exposed methods of its own entity now\n"
                 "and then. After S seconds (or on Ctrl-C) it prints a report.\n"
                 "\n"
                 "  --connect HOST:PORT      the baseapp's client port (IPv6 as [addr]:port)\n"
                 "  --count N                number of bots (1..1000000)\n"
                 "  --seconds S              run time in seconds (may be fractional)\n"
                 "  --json                   print the report as one JSON object\n"
                 "  --verify-aoi             stand still for the last 1.5 s (or --settle-seconds),\n"
                 "                           then check every bot's view against the bots' positions\n"
                 "                           (view radius and hysteresis from the login reply, with\n"
                 "                           one position_precision of tolerance), and that every bot\n"
                 "                           seen is where it is. Assumes every entity in the world\n"
                 "                           belongs to this run. Bots that log in while the others\n"
                 "                           settle are left out (aoi_late).\n"
                 "  --calls-per-second F     each bot's average rate of calls while walking, random\n"
                 "                           (default 0.2), of the --call methods\n"
                 "  --call PART:METHOD       an exposed base or cell method of the bots' own class\n"
                 "                           (base:chat, cell:castSpell) the random calls pick from,\n"
                 "                           with arguments filled from the definitions: numbers\n"
                 "                           1..20, text naming the bot, an entity it sees (or 0);\n"
                 "                           up to 8 (none: no calls)\n"
                 "  --settle-seconds S       stop walking and calling for the last S seconds (the bots\n"
                 "                           stay connected; default 0)\n"
                 "  --snapshot-file PATH     write what every bot sees once, as JSON (PATH.tmp, then\n"
                 "                           renamed): {\"bots\":[{\"account\",\"entity_id\",\"x\",\"y\",\"z\",\n"
                 "                           \"entities\":[{\"id\",\"class\",\"owner\",\"x\",\"y\",\"z\",\n"
                 "                           \"properties\"}]}]}, positions as received (quantized)\n"
                 "  --snapshot-at-seconds T  when to write it, after the start (default S - 1)\n"
                 "  --record-file PATH       write every frame the first bot receives to PATH, each\n"
                 "                           as on the wire (4-byte length, ServerToClient body):\n"
                 "                           tessera-stream-replay decodes it\n"
                 "  --account-prefix P       account name prefix (default \"bot\")\n"
                 "  --password PW            password for every account (default \"secret\")\n"
                 "  --speed M_PER_S          walking speed (default 5)\n"
                 "  --area HALF_WIDTH        waypoints lie in [-A,A] on x and z (default 100)\n"
                 "  --gather X,Z,HALF_WIDTH  in the first half of every --gather-period the waypoints\n"
                 "                           lie within HALF_WIDTH of (X, Z) instead: the bots drift\n"
                 "                           there, then spread out again\n"
                 "  --gather-period S        seconds of one gather-and-spread cycle (default 60; 0:\n"
                 "                           stay gathered)\n"
                 "  --seed S                 random seed (default: from the clock)\n"
                 "  --login-spread-ms MS     spread the logins over MS milliseconds (default 1000)\n"
                 "  --ping-rate R            each bot's numbered calls a second while walking: n = 1,\n"
                 "                           2, 3 ..., to the --ping-call methods in turn\n"
                 "  --ping-call PART:METHOD  a method taking one number for the numbered calls (the\n"
                 "                           demo: cell:ping, base:relayPing; its cell counts them)\n"
                 "  --gap-limit-ms MS        a walking bot in view with no update for more than a\n"
                 "                           second and a tick of its cell's ticks counts in update_gaps,\n"
                 "                           or, across a move of the observer's real to another cellapp,\n"
                 "                           for longer than MS of time (default 1200)\n"
                 "  --teleport AT:SPACE:X:Y:Z\n"
                 "                           at AT seconds, the first --teleport-bots bots (default 1)\n"
                 "                           call the --teleport-call method (SPACE, X, Y, Z) on their\n"
                 "                           cell (SPACE empty: their own); up to 8, in time order\n"
                 "  --teleport-call METHOD   the cell method --teleport calls (the demo's: teleport)\n"
                 "  --reconnect-at T         at T seconds the first --reconnect-bots bots (default all)\n"
                 "                           drop their connection and, --reconnect-delay-ms later\n"
                 "                           (default 200), take their entity back with their session\n"
                 "                           token (its view starts afresh)\n"
                 "  --recover-seconds S      a bot whose connection the server side ends while it is\n"
                 "                           in the world (its baseapp died: a reset or end of file\n"
                 "                           with no Error first) reconnects with its session token,\n"
                 "                           never its password: 200 ms later, to its last login\n"
                 "                           reply's other baseapps, then --connect, then the one it\n"
                 "                           was on, in turn, following redirects, waiting an\n"
                 "                           ERROR_UNAVAILABLE's retry_after_ms (or 250 ms) between\n"
                 "                           tries. It gives up (recovery_failed) on\n"
                 "                           ERROR_SESSION_EXPIRED or after S seconds (default 20;\n"
                 "                           0: at once)\n"
                 "  --tls-name NAME          speak TLS 1.3 to the baseapps, whose certificates must\n"
                 "                           name NAME (and chain to --tls-ca, or to the system's\n"
                 "                           trusted certificates)\n"
                 "  --tls-ca FILE            PEM certificates the baseapps' must chain to\n"
                 "  --websocket              speak WebSocket, as a browser does: --connect names a\n"
                 "                           baseapp's websocket_port, and redirects and reconnects\n"
                 "                           name WebSocket ports (with --tls-name: wss)\n"
                 "  --enter METHOD           a login entity with no space (an Account) is asked to\n"
                 "                           enter the world with its exposed base method METHOD()\n"
                 "                           (giveClientTo to an entity that has a space)\n"
                 "  --help                   this text\n"
                 "\n"
                 "Report keys: bots, logged_in, in_world_at_end, errors, error_reasons,\n"
                 "msgs_in, bytes_in, entities_seen, enter, leave, moves, corrections,\n"
                 "stale_ignored, stream_bytes, stream_bytes_per_client_s, property_updates,\n"
                 "discarded_records, base_property_updates, calls_out, call_failures,\n"
                 "client_calls_in, stale_calls, client_calls_by_method, latency_samples, latency_p50_ms,\n"
                 "latency_p99_ms, latency_max_ms (null without samples), latency_clock_skew,\n"
                 "self_seen, verify_aoi, aoi_checked, aoi_mismatches, aoi_unknown, aoi_late,\n"
                 "aoi_position_checked, aoi_position_mismatches, flickers, update_gaps,\n"
                 "longest_update_gap_ms, pings_sent, teleports_received, teleport_stale (entities of a\n"
                 "space a bot left, other than bots that teleport too, entering its view after),\n"
                 "restores, restores_from_ghost (EntityRestored received: a cellapp died), restore_wall_ms\n"
                 "and restore_age_ms (each restore's arrival, wall clock, and its state's age; the first\n"
                 "10000),\n"
                 "reconnects (--reconnect-at's and recoveries' answered), reconnects_other_entity (a\n"
                 "reconnect that came back to another entity),\n"
                 "player_changes (giveClientTo), redirects (LoginRedirects followed), handed_off\n"
                 "(sent to another baseapp while in the world), rejoined (back in the world after),\n"
                 "server_losses (connections the server side ended while in the world), recoveries\n"
                 "(bots back in the world after one), recovery_failed (bots that gave up),\n"
                 "recovering_at_end, recovery_attempts (Reconnects they sent), recovery_ms_p50,\n"
                 "recovery_ms_p99, recovery_ms_max (from the loss to the login reply; null without\n"
                 "recoveries), password_logins (LoginRequests sent with the password, all run),\n"
                 "snapshot_written, game_events_by_name (game events and user messages received, by\n"
                 "event name),\n"
                 "definitions_digest, definition_classes, definitions_differ, seconds,\n"
                 "interrupted.\n"
                 "\n"
                 "Exit status: 0 the run completed (even with errors), 1 it could not run,\n"
                 "2 bad arguments.\n");
}

/* Prints why the arguments are wrong and the usage; returns -1 (the caller
 * exits 2). */
static int bots_bad_argument(const char *format, ...) __attribute__((format(printf, 1, 2)));
static int bots_bad_argument(const char *format, ...) {
    va_list args;
    va_start(args, format);
    fprintf(stderr, "tessera-bots: ");
    vfprintf(stderr, format, args);
    fprintf(stderr, "\n\n");
    va_end(args);
    bots_usage(stderr);
    return -1;
}

static int bots_parse_double(const char *text, double low, double high, double *out) {
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (errno != 0 || end == text || *end != '\0' || !isfinite(v) || v < low || v > high) return -1;
    *out = v;
    return 0;
}

static int bots_parse_u64(const char *text, uint64_t low, uint64_t high, uint64_t *out) {
    char *end;
    errno = 0;
    if (text[0] == '-' || text[0] == '\0') return -1;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno != 0 || *end != '\0' || v < low || v > high) return -1;
    *out = v;
    return 0;
}

/* Reads the number that starts `text` and must end at `stop` (strtod, so
 * unlike sscanf a number past double's range is refused, not undefined).
 * Returns a pointer past `stop`, or NULL. */
static const char *bots_parse_number(const char *text, char stop, double *out) {
    char *end;
    errno = 0;
    *out = strtod(text, &end);
    if (end == text || *end != stop || errno == ERANGE || !isfinite(*out)) return NULL;
    return stop ? end + 1 : end;
}

/* --teleport's AT:SPACE:X:Y:Z, SPACE empty for the bot's own (at most 63
 * bytes). Returns 0, or -1 (t partly written) if `text` is not one. */
static int bots_parse_teleport(const char *text, bots_teleport *t) {
    const char *at = bots_parse_number(text, ':', &t->at_seconds);
    if (!at) return -1;
    const char *colon = strchr(at, ':');
    if (!colon || (size_t)(colon - at) >= sizeof t->space) return -1;
    memcpy(t->space, at, (size_t)(colon - at));
    t->space[colon - at] = '\0';
    const char *p = colon + 1;
    float *xyz[3] = {&t->x, &t->y, &t->z};
    for (int i = 0; i < 3; i++) {
        double v;
        p = bots_parse_number(p, i < 2 ? ':' : '\0', &v);
        if (!p || fabs(v) > FLT_MAX) return -1;
        *xyz[i] = (float)v;
    }
    return 0;
}

/* Splits HOST:PORT (or [V6]:PORT) into `host` and `port`. Returns 0 or -1. */
static int bots_split_target(const char *text, char *host, size_t host_size, int *port) {
    const char *colon = strrchr(text, ':');
    if (!colon || colon == text) return -1;
    const char *start = text, *stop = colon;
    if (text[0] == '[') {
        if (colon[-1] != ']') return -1;
        start = text + 1;
        stop = colon - 1;
    }
    size_t length = (size_t)(stop - start);
    if (length == 0 || length >= host_size) return -1;
    memcpy(host, start, length);
    host[length] = '\0';
    uint64_t p;
    if (bots_parse_u64(colon + 1, 1, 65535, &p) != 0) return -1;
    *port = (int)p;
    return 0;
}

/* Account characters the wire allows ([A-Za-z0-9_.-]). */
static int bots_valid_prefix(const char *prefix) {
    for (const char *p = prefix; *p; p++) {
        char c = *p;
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
              c == '-'))
            return 0;
    }
    return 1;
}

enum {
    BOTS_OPTION_CONNECT = 256,
    BOTS_OPTION_COUNT,
    BOTS_OPTION_SECONDS,
    BOTS_OPTION_JSON,
    BOTS_OPTION_VERIFY_AOI,
    BOTS_OPTION_ACCOUNT_PREFIX,
    BOTS_OPTION_PASSWORD,
    BOTS_OPTION_TLS_CA,
    BOTS_OPTION_TLS_NAME,
    BOTS_OPTION_WEBSOCKET,
    BOTS_OPTION_SPEED,
    BOTS_OPTION_AREA,
    BOTS_OPTION_SEED,
    BOTS_OPTION_LOGIN_SPREAD,
    BOTS_OPTION_CALLS_PER_SECOND,
    BOTS_OPTION_SETTLE_SECONDS,
    BOTS_OPTION_SNAPSHOT_FILE,
    BOTS_OPTION_RECORD_FILE,
    BOTS_OPTION_SNAPSHOT_AT,
    BOTS_OPTION_PING_RATE,
    BOTS_OPTION_GAP_LIMIT,
    BOTS_OPTION_TELEPORT,
    BOTS_OPTION_TELEPORT_BOTS,
    BOTS_OPTION_GATHER,
    BOTS_OPTION_GATHER_PERIOD,
    BOTS_OPTION_RECONNECT_AT,
    BOTS_OPTION_RECONNECT_BOTS,
    BOTS_OPTION_RECONNECT_DELAY,
    BOTS_OPTION_RECOVER_SECONDS,
    BOTS_OPTION_ENTER,
    BOTS_OPTION_CALL,
    BOTS_OPTION_PING_CALL,
    BOTS_OPTION_TELEPORT_CALL,
    BOTS_OPTION_HELP,
};

/* "base:NAME" or "cell:NAME" into `out`. Returns 0 or -1. */
static int bots_parse_method(const char *text, bots_method *out) {
    const char *colon = strchr(text, ':');
    if (!colon) return -1;
    size_t part_length = (size_t)(colon - text), name_length = strlen(colon + 1);
    if (part_length == 4 && memcmp(text, "base", 4) == 0)
        out->part = ENTITY_DEF_PART_BASE;
    else if (part_length == 4 && memcmp(text, "cell", 4) == 0)
        out->part = ENTITY_DEF_PART_CELL;
    else
        return -1;
    if (name_length == 0 || name_length > ENTITY_DEF_NAME_MAX) return -1;
    memcpy(out->name, colon + 1, name_length + 1);
    return 0;
}

/* Fills `options` from argv, with `host_name` receiving the host as given.
 * Returns 0, 1 for --help (usage printed), or -1 after printing what is
 * wrong. */
static int bots_parse_options(int argc, char **argv, bots_options *options, char *host_name, size_t host_size) {
    static const struct option long_options[] = {
        {"connect", required_argument, NULL, BOTS_OPTION_CONNECT},
        {"count", required_argument, NULL, BOTS_OPTION_COUNT},
        {"seconds", required_argument, NULL, BOTS_OPTION_SECONDS},
        {"json", no_argument, NULL, BOTS_OPTION_JSON},
        {"verify-aoi", no_argument, NULL, BOTS_OPTION_VERIFY_AOI},
        {"account-prefix", required_argument, NULL, BOTS_OPTION_ACCOUNT_PREFIX},
        {"password", required_argument, NULL, BOTS_OPTION_PASSWORD},
        {"tls-ca", required_argument, NULL, BOTS_OPTION_TLS_CA},
        {"tls-name", required_argument, NULL, BOTS_OPTION_TLS_NAME},
        {"websocket", no_argument, NULL, BOTS_OPTION_WEBSOCKET},
        {"speed", required_argument, NULL, BOTS_OPTION_SPEED},
        {"area", required_argument, NULL, BOTS_OPTION_AREA},
        {"seed", required_argument, NULL, BOTS_OPTION_SEED},
        {"login-spread-ms", required_argument, NULL, BOTS_OPTION_LOGIN_SPREAD},
        {"calls-per-second", required_argument, NULL, BOTS_OPTION_CALLS_PER_SECOND},
        {"settle-seconds", required_argument, NULL, BOTS_OPTION_SETTLE_SECONDS},
        {"snapshot-file", required_argument, NULL, BOTS_OPTION_SNAPSHOT_FILE},
        {"record-file", required_argument, NULL, BOTS_OPTION_RECORD_FILE},
        {"snapshot-at-seconds", required_argument, NULL, BOTS_OPTION_SNAPSHOT_AT},
        {"ping-rate", required_argument, NULL, BOTS_OPTION_PING_RATE},
        {"gap-limit-ms", required_argument, NULL, BOTS_OPTION_GAP_LIMIT},
        {"teleport", required_argument, NULL, BOTS_OPTION_TELEPORT},
        {"teleport-bots", required_argument, NULL, BOTS_OPTION_TELEPORT_BOTS},
        {"gather", required_argument, NULL, BOTS_OPTION_GATHER},
        {"gather-period", required_argument, NULL, BOTS_OPTION_GATHER_PERIOD},
        {"reconnect-at", required_argument, NULL, BOTS_OPTION_RECONNECT_AT},
        {"reconnect-bots", required_argument, NULL, BOTS_OPTION_RECONNECT_BOTS},
        {"reconnect-delay-ms", required_argument, NULL, BOTS_OPTION_RECONNECT_DELAY},
        {"recover-seconds", required_argument, NULL, BOTS_OPTION_RECOVER_SECONDS},
        {"enter", required_argument, NULL, BOTS_OPTION_ENTER},
        {"call", required_argument, NULL, BOTS_OPTION_CALL},
        {"ping-call", required_argument, NULL, BOTS_OPTION_PING_CALL},
        {"teleport-call", required_argument, NULL, BOTS_OPTION_TELEPORT_CALL},
        {"help", no_argument, NULL, BOTS_OPTION_HELP},
        {NULL, 0, NULL, 0},
    };
    memset(options, 0, sizeof *options);
    options->account_prefix = "bot";
    options->password = "secret";
    options->speed = 5.0;
    options->area = 100.0;
    options->gather_period = 60.0;
    options->login_spread_ms = 1000.0;
    options->calls_per_second = 0.2;
    options->gap_limit_ms = 1200.0;
    options->teleport_bots = 1;
    options->reconnect_bots = UINT32_MAX;
    options->reconnect_delay_ms = 200.0;
    options->recover_seconds = 20.0;
    options->seed = clock_wall_us();
    int have_connect = 0, have_count = 0, have_seconds = 0, have_snapshot_at = 0;
    uint64_t value;

    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "", long_options, NULL)) != -1) {
        switch (c) {
            case BOTS_OPTION_CONNECT:
                snprintf(options->target, sizeof options->target, "%s", optarg);
                if (bots_split_target(optarg, host_name, host_size, &options->port) != 0)
                    return bots_bad_argument("--connect wants HOST:PORT with a port in 1..65535 (got '%s')", optarg);
                have_connect = 1;
                break;
            case BOTS_OPTION_COUNT:
                /* One socket per bot: a million is past what one host's ports allow. */
                if (bots_parse_u64(optarg, 1, 1000000, &value) != 0)
                    return bots_bad_argument("--count wants an integer in 1..1000000 (got '%s')", optarg);
                options->count = (uint32_t)value;
                have_count = 1;
                break;
            case BOTS_OPTION_SECONDS:
                if (bots_parse_double(optarg, 0.001, 1e9, &options->seconds) != 0)
                    return bots_bad_argument("--seconds wants a number of seconds above 0 (got '%s')", optarg);
                have_seconds = 1;
                break;
            case BOTS_OPTION_JSON:
                options->json = 1;
                break;
            case BOTS_OPTION_VERIFY_AOI:
                options->verify_aoi = 1;
                break;
            case BOTS_OPTION_ACCOUNT_PREFIX:
                /* Room for a 7-digit index within the wire's 64-byte account. */
                if (strlen(optarg) > 57 || !bots_valid_prefix(optarg))
                    return bots_bad_argument(
                        "--account-prefix wants at most 57 characters of [A-Za-z0-9_.-] (got '%s')", optarg);
                options->account_prefix = optarg;
                break;
            case BOTS_OPTION_TLS_CA:
                options->tls_ca = optarg;
                break;
            case BOTS_OPTION_WEBSOCKET:
                options->websocket = 1;
                break;
            case BOTS_OPTION_TLS_NAME:
                if (strlen(optarg) < 1 || strlen(optarg) > 253)
                    return bots_bad_argument("--tls-name wants a host name of 1 to 253 bytes (got '%s')", optarg);
                options->tls_name = optarg;
                break;
            case BOTS_OPTION_PASSWORD:
                if (strlen(optarg) == 0 || strlen(optarg) > 128)
                    return bots_bad_argument("--password wants 1..128 bytes");
                options->password = optarg;
                break;
            case BOTS_OPTION_SPEED:
                if (bots_parse_double(optarg, 0.0, 1e6, &options->speed) != 0)
                    return bots_bad_argument("--speed wants metres per second, 0 or more (got '%s')", optarg);
                break;
            case BOTS_OPTION_AREA:
                if (bots_parse_double(optarg, 0.001, 1e7, &options->area) != 0)
                    return bots_bad_argument("--area wants a half width above 0 (got '%s')", optarg);
                break;
            case BOTS_OPTION_GATHER: {
                char *end = NULL;
                options->gather_x = strtod(optarg, &end);
                if (end && *end == ',')
                    options->gather_z = strtod(end + 1, &end);
                else
                    end = NULL;
                if (end && *end == ',')
                    options->gather_half = strtod(end + 1, &end);
                else
                    end = NULL;
                if (!end || *end != '\0' || !isfinite(options->gather_x) || !isfinite(options->gather_z) ||
                    !(options->gather_half > 0 && options->gather_half < 1e7))
                    return bots_bad_argument("--gather wants X,Z,HALF_WIDTH with HALF_WIDTH above 0 (got '%s')",
                                             optarg);
                options->gather = true;
                break;
            }
            case BOTS_OPTION_RECONNECT_AT:
                if (bots_parse_double(optarg, 0.0, 1e7, &options->reconnect_at_seconds) != 0)
                    return bots_bad_argument("--reconnect-at wants seconds after the start (got '%s')", optarg);
                break;
            case BOTS_OPTION_RECONNECT_BOTS:
                if (bots_parse_u64(optarg, 0, 1000000, &value) != 0)
                    return bots_bad_argument("--reconnect-bots wants a count (got '%s')", optarg);
                options->reconnect_bots = (uint32_t)value;
                break;
            case BOTS_OPTION_RECONNECT_DELAY:
                if (bots_parse_double(optarg, 0.0, 600000.0, &options->reconnect_delay_ms) != 0)
                    return bots_bad_argument("--reconnect-delay-ms wants milliseconds (got '%s')", optarg);
                break;
            case BOTS_OPTION_RECOVER_SECONDS:
                if (bots_parse_double(optarg, 0.0, 1e6, &options->recover_seconds) != 0)
                    return bots_bad_argument("--recover-seconds wants seconds, 0 or more (got '%s')", optarg);
                break;
            case BOTS_OPTION_ENTER:
                if (!optarg[0] || strlen(optarg) > ENTITY_DEF_NAME_MAX)
                    return bots_bad_argument("--enter wants a method name (got '%s')", optarg);
                options->enter_method = optarg;
                break;
            case BOTS_OPTION_GATHER_PERIOD:
                if (bots_parse_double(optarg, 0.0, 1e7, &options->gather_period) != 0)
                    return bots_bad_argument("--gather-period wants seconds, 0 or more (got '%s')", optarg);
                break;
            case BOTS_OPTION_SEED:
                if (bots_parse_u64(optarg, 0, UINT64_MAX, &options->seed) != 0)
                    return bots_bad_argument("--seed wants an unsigned integer (got '%s')", optarg);
                break;
            case BOTS_OPTION_LOGIN_SPREAD:
                if (bots_parse_double(optarg, 0.0, 1e9, &options->login_spread_ms) != 0)
                    return bots_bad_argument("--login-spread-ms wants milliseconds, 0 or more (got '%s')", optarg);
                break;
            case BOTS_OPTION_CALLS_PER_SECOND:
                /* At most one call per bot per tick on average keeps the draw
             * in bots_calls_due meaningful; more is a flood, not a player. */
                if (bots_parse_double(optarg, 0.0, 1000.0, &options->calls_per_second) != 0)
                    return bots_bad_argument("--calls-per-second wants a rate in 0..1000 (got '%s')", optarg);
                break;
            case BOTS_OPTION_SETTLE_SECONDS:
                if (bots_parse_double(optarg, 0.0, 1e9, &options->settle_seconds) != 0)
                    return bots_bad_argument("--settle-seconds wants seconds, 0 or more (got '%s')", optarg);
                break;
            case BOTS_OPTION_RECORD_FILE:
                if (optarg[0] == '\0') return bots_bad_argument("--record-file wants a path");
                options->record_file = optarg;
                break;
            case BOTS_OPTION_SNAPSHOT_FILE:
                if (optarg[0] == '\0') return bots_bad_argument("--snapshot-file wants a path");
                options->snapshot_file = optarg;
                break;
            case BOTS_OPTION_SNAPSHOT_AT:
                if (bots_parse_double(optarg, 0.0, 1e9, &options->snapshot_at_seconds) != 0)
                    return bots_bad_argument("--snapshot-at-seconds wants seconds, 0 or more (got '%s')", optarg);
                have_snapshot_at = 1;
                break;
            case BOTS_OPTION_PING_RATE:
                if (bots_parse_double(optarg, 0.0, 1000.0, &options->ping_rate) != 0)
                    return bots_bad_argument("--ping-rate wants calls per second in 0..1000 (got '%s')", optarg);
                break;
            case BOTS_OPTION_GAP_LIMIT:
                if (bots_parse_double(optarg, 1.0, 1e9, &options->gap_limit_ms) != 0)
                    return bots_bad_argument("--gap-limit-ms wants milliseconds above 1 (got '%s')", optarg);
                break;
            case BOTS_OPTION_TELEPORT: {
                if (options->teleport_count == BOTS_MAX_TELEPORTS)
                    return bots_bad_argument("at most %d --teleport", BOTS_MAX_TELEPORTS);
                bots_teleport *t = &options->teleports[options->teleport_count];
                if (bots_parse_teleport(optarg, t) != 0)
                    return bots_bad_argument("--teleport wants AT:SPACE:X:Y:Z (got '%s')", optarg);
                options->teleport_count++;
                break;
            }
            case BOTS_OPTION_TELEPORT_BOTS:
                if (bots_parse_u64(optarg, 0, 1000000, &value) != 0)
                    return bots_bad_argument("--teleport-bots wants a count (got '%s')", optarg);
                options->teleport_bots = (uint32_t)value;
                break;
            case BOTS_OPTION_CALL:
                if (options->call_count == BOTS_MAX_CALLS ||
                    bots_parse_method(optarg, &options->calls[options->call_count]) != 0)
                    return bots_bad_argument("--call wants base:METHOD or cell:METHOD, at most %d (got '%s')",
                                             BOTS_MAX_CALLS, optarg);
                options->call_count++;
                break;
            case BOTS_OPTION_PING_CALL:
                if (options->ping_call_count == BOTS_MAX_CALLS ||
                    bots_parse_method(optarg, &options->ping_calls[options->ping_call_count]) != 0)
                    return bots_bad_argument("--ping-call wants base:METHOD or cell:METHOD, at most %d (got '%s')",
                                             BOTS_MAX_CALLS, optarg);
                options->ping_call_count++;
                break;
            case BOTS_OPTION_TELEPORT_CALL:
                if (strlen(optarg) == 0 || strlen(optarg) > ENTITY_DEF_NAME_MAX)
                    return bots_bad_argument("--teleport-call wants a cell method name (got '%s')", optarg);
                options->teleport_call.part = ENTITY_DEF_PART_CELL;
                snprintf(options->teleport_call.name, sizeof options->teleport_call.name, "%s", optarg);
                break;
            case BOTS_OPTION_HELP:
                bots_usage(stdout);
                return 1;
            default:
                return bots_bad_argument("unknown or incomplete option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc) return bots_bad_argument("unexpected argument '%s'", argv[optind]);
    if (!have_connect) return bots_bad_argument("--connect HOST:PORT is required");
    if (!have_count) return bots_bad_argument("--count N is required");
    if (!have_seconds) return bots_bad_argument("--seconds S is required");
    if (options->ping_rate > 0 && options->ping_call_count == 0)
        return bots_bad_argument("--ping-rate needs the methods to number: --ping-call base:M or cell:M");
    if (options->teleport_count > 0 && !options->teleport_call.name[0])
        return bots_bad_argument("--teleport needs the cell method to call: --teleport-call METHOD");
    if (have_snapshot_at && !options->snapshot_file)
        return bots_bad_argument("--snapshot-at-seconds needs --snapshot-file");
    if (!have_snapshot_at) options->snapshot_at_seconds = options->seconds > 1.0 ? options->seconds - 1.0 : 0.0;
    if (options->snapshot_at_seconds > options->seconds)
        return bots_bad_argument("--snapshot-at-seconds %g is after the end of the run (--seconds %g)",
                                 options->snapshot_at_seconds, options->seconds);
    return 0;
}

/* Turns a host name into the IP literal channel_connect wants. Blocking,
 * so done once before the loop runs. Returns 0 or -1 (message printed). */
static int bots_resolve(const char *name, char *ip, size_t ip_size) {
    struct addrinfo hints, *result = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    int rc = getaddrinfo(name, NULL, &hints, &result);
    if (rc != 0 || !result) {
        fprintf(stderr, "tessera-bots: cannot resolve '%s': %s\n", name, gai_strerror(rc));
        return -1;
    }
    const void *address;
    if (result->ai_family == AF_INET6)
        address = &((const struct sockaddr_in6 *)result->ai_addr)->sin6_addr;
    else
        address = &((const struct sockaddr_in *)result->ai_addr)->sin_addr;
    const char *text = inet_ntop(result->ai_family, address, ip, (socklen_t)ip_size);
    freeaddrinfo(result);
    if (!text) {
        fprintf(stderr, "tessera-bots: cannot use the address of '%s'\n", name);
        return -1;
    }
    return 0;
}

/* One socket per bot: raise the descriptor limit as far as allowed. */
static void bots_raise_fd_limit(uint32_t count) {
    struct rlimit limit;
    if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
    rlim_t wanted = (rlim_t)count + BOTS_SPARE_FDS;
    if (limit.rlim_cur >= wanted) return;
    rlim_t raised = limit.rlim_max == RLIM_INFINITY || limit.rlim_max >= wanted ? wanted : limit.rlim_max;
    limit.rlim_cur = raised;
    if (setrlimit(RLIMIT_NOFILE, &limit) != 0 || raised < wanted)
        log_warn("open file limit is below %u bots + %d: some connections will fail (raise ulimit -n)", count,
                 BOTS_SPARE_FDS);
}

/* ---- main ----------------------------------------------------------------- */

int main(int argc, char **argv) {
    bots_run run;
    char host_name[256];
    memset(&run, 0, sizeof run);
    log_set_identity("bots", 0);

    int parsed = bots_parse_options(argc, argv, &run.options, host_name, sizeof host_name);
    if (parsed > 0) return 0;
    if (parsed < 0) return 2;
    if (bots_resolve(host_name, run.options.host, sizeof run.options.host) != 0) return 1;

    /* A peer that vanishes mid-write must be an EPIPE, not a dead process. */
    if (signal(SIGPIPE, SIG_IGN) == SIG_ERR) log_warn("cannot ignore SIGPIPE: %s", strerror(errno));
    bots_raise_fd_limit(run.options.count);

    int rc = uv_loop_init(&run.loop);
    if (rc != 0) {
        fprintf(stderr, "tessera-bots: cannot create the event loop: %s\n", uv_strerror(rc));
        return 1;
    }
    if (latency_histogram_init(&run.latency, BOTS_LATENCY_BUCKET_US, BOTS_LATENCY_LIMIT_US) != 0)
        log_panic("latency histogram layout rejected");

    if (run.options.tls_name) {
        char why[320];
        run.tls = tessera_client_tls_create(run.options.tls_ca, why, sizeof why);
        if (!run.tls) {
            fprintf(stderr, "tessera-bots: %s\n", why);
            return 2;
        }
    } else if (run.options.tls_ca) {
        fprintf(stderr, "tessera-bots: --tls-ca needs --tls-name (the name the baseapps' certificates carry)\n");
        return 2;
    }
    if (run.options.record_file) {
        run.record = fopen(run.options.record_file, "wb");
        if (!run.record) {
            fprintf(stderr, "tessera-bots: --record-file %s: %s\n", run.options.record_file, strerror(errno));
            tessera_client_tls_free(run.tls);
            return 2;
        }
    }
    run.bots = xcalloc(run.options.count, sizeof run.bots[0]);
    for (uint32_t i = 0; i < run.options.count; i++) {
        bot *b = &run.bots[i];
        b->run = &run;
        b->index = i;
        b->rng = bots_splitmix64(run.options.seed + (uint64_t)i * UINT64_C(0x9e3779b97f4a7c15));
        if (b->rng == 0) b->rng = 1; /* xorshift must not start at 0 */
        id_map_init(&b->seen);
        id_map_init(&b->old_space);
    }
    run.settle_at_ms = bots_settle_at_ms_of(&run);
    id_map_init(&run.bots_by_entity);
    /* --connect is address 0, every lost bot's candidate. */
    char connect_address[TESSERA_CLIENT_ADDRESS_BYTES];
    if (strchr(run.options.host, ':'))
        snprintf(connect_address, sizeof connect_address, "[%s]:%d", run.options.host, run.options.port); /* IPv6 */
    else
        snprintf(connect_address, sizeof connect_address, "%s:%d", run.options.host, run.options.port);
    if (bots_address_index(&run, connect_address) != 0) log_panic("the --connect address is not usable");

    uv_timer_init(&run.loop, &run.tick_timer);
    uv_timer_init(&run.loop, &run.launch_timer);
    uv_timer_init(&run.loop, &run.end_timer);
    uv_timer_init(&run.loop, &run.snapshot_timer);
    uv_signal_init(&run.loop, &run.sigint);
    uv_signal_init(&run.loop, &run.sigterm);
    run.tick_timer.data = run.launch_timer.data = run.end_timer.data = run.snapshot_timer.data = &run;
    run.sigint.data = run.sigterm.data = &run;

    uv_update_time(&run.loop);
    run.start_ms = uv_now(&run.loop);
    run.start_us = clock_monotonic_us();
    run.start_wall_us = clock_wall_us();
    run.last_tick_us = run.start_us;
    uv_timer_start(&run.tick_timer, bots_on_tick, BOTS_TICK_MS, BOTS_TICK_MS);
    uv_timer_start(&run.launch_timer, bots_on_launch, 0, 0);
    uv_timer_start(&run.end_timer, bots_on_end, (uint64_t)ceil(run.options.seconds * 1000.0), 0);
    if (run.options.snapshot_file)
        uv_timer_start(&run.snapshot_timer, bots_on_snapshot, (uint64_t)(run.options.snapshot_at_seconds * 1000.0), 0);
    uv_signal_start(&run.sigint, bots_on_signal, SIGINT);
    uv_signal_start(&run.sigterm, bots_on_signal, SIGTERM);
    log_info("%u bots against %s (%s:%d) for %.1f s, seed %" PRIu64, run.options.count, run.options.target,
             run.options.host, run.options.port, run.options.seconds, run.options.seed);

    uv_run(&run.loop, UV_RUN_DEFAULT);
    rc = uv_loop_close(&run.loop);
    if (rc != 0) log_warn("event loop closed with handles still open: %s", uv_strerror(rc));

    if (run.recovery_samples) qsort(run.recovery_ms, run.recovery_samples, sizeof run.recovery_ms[0], bots_compare_u32);
    if (run.options.json)
        bots_print_json(stdout, &run);
    else
        bots_print_summary(stdout, &run);
    /* The results are what a run is for: one that could not write them failed. */
    int written = fflush(stdout) == 0 && !ferror(stdout);
    if (!written) log_error("writing the results: %s", strerror(errno));

    for (uint32_t i = 0; i < run.options.count; i++) {
        bot *b = &run.bots[i];
        id_map_close(&b->seen);
        id_map_close(&b->old_space);
        free(b->view);
    }
    id_map_close(&run.bots_by_entity);
    free(run.bots);
    free(run.restore_wall_ms);
    free(run.restore_age_ms);
    free(run.recovery_ms);
    free(run.addresses);
    free(run.reasons.items);
    free(run.client_calls.items);
    free(run.game_events.items);
    latency_histogram_close(&run.latency);
    tessera_client_tls_free(run.tls);
    if (run.record && fclose(run.record) != 0) log_warn("--record-file: %s", strerror(errno));
    return written ? 0 : 1;
}
