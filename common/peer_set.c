/* peer_set.c -- owns the channels to other Tessera processes: dialling by
 * the registry's word, the PeerHello exchange, decoding PeerMessage frames,
 * the pings that keep each link's silence and echo measured, what is known
 * of every process (listed, lapsed, gone, dead), and telling the owner when
 * a link goes down and when a process is declared dead. What the other
 * messages mean belongs to the programs; who declares a death, to the
 * balancer's lease holder. */
#include "peer_set.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "arena.h"
#include "clock.h"
#include "log.h"

/* A connection that never showed up in the registry is still dropped when it
 * is absent this long: long enough for any registration race (a peer that
 * dials us right after registering), short compared to a real outage. */
#define PEER_SET_UNLISTED_GRACE_US ((uint64_t)10 * 1000 * 1000)
/* A peer that was registered and is no longer (neither listed nor lapsed)
 * has left -- or Redis restarted and lost the registry, and the peer has
 * not renewed its entry since it reconnected. Its link goes once it has
 * been absent this long: a few heartbeats, which any live peer sends
 * within. */
#define PEER_SET_LAPSED_GRACE_US ((uint64_t)1500 * 1000)

/* Pings sent whose send time is remembered, to date their echoes. */
#define PEER_SET_PING_HISTORY 32

typedef struct peer_link {
    peer_set *set;
    channel *ch;
    uint64_t process_id; /* 0 for an inbound link before its hello */
    peer_role role;
    int up; /* hello received and accepted */
    int seen_in_registry;
    int listed;                 /* present in the latest registry report (its lease held or lapsed) */
    uint64_t unlisted_since_us; /* absent from the reports since (0: listed) */
    uint64_t opened_us;
    int64_t load;
    uint64_t last_heard_us;                       /* monotonic: the last frame from it */
    uint64_t pings_sent;                          /* our ping sequence on this link */
    uint64_t pings_received;                      /* the highest ping sequence it sent us */
    uint64_t echoed;                              /* the highest of our sequences it echoed */
    uint64_t echoed_sent_us;                      /* ... and when we had sent that one */
    uint64_t ping_sent_us[PEER_SET_PING_HISTORY]; /* by sequence % history */
} peer_link;

/* What is known of one process, link or not. */
typedef struct peer_known {
    uint64_t process_id;
    peer_role role;
    bool role_known;
    peer_liveness liveness;
    uint64_t down_since_us; /* its link went down then (0: up, or never had one) */
    bool dead_told;         /* on_peer_dead fired */
    bool ever_up;           /* a link to it has been up */
    bool returning;         /* its current link is not its first */
    bool lapse_told;        /* its lease's lapse was logged (until it is listed again) */
} peer_known;

struct peer_set {
    uv_loop_t *loop;
    peer_role role;
    char cluster_name[64];
    uint64_t process_id;
    peer_set_callbacks callbacks;
    void *user_data;
    channel_options options;
    peer_link **links;
    size_t link_count, link_capacity;
    peer_known *known;
    size_t known_count, known_capacity;
    uv_timer_t ping_timer;
    int ping_timer_closed;
    int freeing;
    /* Peer messages are decoded here and released after their handler:
     * no allocation per message on the relay path. */
    arena decode_arena;
};

const char *peer_role_name(peer_role role) { return role == PEER_ROLE_BASEAPP ? "baseapp" : "cellapp"; }

static int peer_role_from_name(const char *name, peer_role *out) {
    if (strcmp(name, "baseapp") == 0)
        *out = PEER_ROLE_BASEAPP;
    else if (strcmp(name, "cellapp") == 0)
        *out = PEER_ROLE_CELLAPP;
    else
        return -1;
    return 0;
}

static void peer_set_on_ping_timer(uv_timer_t *timer);

peer_set *peer_set_create(uv_loop_t *loop, peer_role role, const char *cluster_name,
                          const peer_set_callbacks *callbacks, void *user_data, channel_stats *totals) {
    peer_set *set = xcalloc(1, sizeof *set);
    set->loop = loop;
    set->role = role;
    snprintf(set->cluster_name, sizeof set->cluster_name, "%s", cluster_name);
    set->callbacks = *callbacks;
    set->user_data = user_data;
    set->options = channel_default_peer_options();
    arena_init(&set->decode_arena);
    set->options.totals = totals;
    uv_timer_init(loop, &set->ping_timer);
    set->ping_timer.data = set;
    uv_timer_start(&set->ping_timer, peer_set_on_ping_timer, PEER_SET_PING_MS, PEER_SET_PING_MS);
    return set;
}

/* ---- what is known of each process ------------------------------------------- */

static peer_known *peer_set_known(const peer_set *set, uint64_t process_id) {
    for (size_t i = 0; i < set->known_count; i++)
        if (set->known[i].process_id == process_id) return &set->known[i];
    return NULL;
}

static peer_known *peer_set_know(peer_set *set, uint64_t process_id) {
    peer_known *known = peer_set_known(set, process_id);
    if (known) return known;
    if (set->known_count == set->known_capacity) {
        set->known_capacity = set->known_capacity ? set->known_capacity * 2 : 16;
        set->known = xrealloc(set->known, set->known_capacity * sizeof(peer_known));
    }
    known = &set->known[set->known_count++];
    *known = (peer_known){.process_id = process_id, .liveness = PEER_UNKNOWN};
    return known;
}

static void peer_set_know_role(peer_set *set, uint64_t process_id, peer_role role) {
    peer_known *known = peer_set_know(set, process_id);
    known->role = role;
    known->role_known = true;
}

peer_liveness peer_set_liveness(const peer_set *set, uint64_t process_id) {
    const peer_known *known = peer_set_known(set, process_id);
    return known ? known->liveness : PEER_UNKNOWN;
}

bool peer_set_returning(const peer_set *set, uint64_t process_id) {
    const peer_known *known = peer_set_known(set, process_id);
    return known && known->returning;
}

bool peer_set_role_of(const peer_set *set, uint64_t process_id, peer_role *role) {
    const peer_known *known = peer_set_known(set, process_id);
    if (!known || !known->role_known) return false;
    *role = known->role;
    return true;
}

uint64_t peer_set_down_since_us(const peer_set *set, uint64_t process_id) {
    const peer_known *known = peer_set_known(set, process_id);
    return known ? known->down_since_us : 0;
}

uint64_t peer_set_next_known(const peer_set *set, size_t *cursor) {
    while (*cursor < set->known_count) {
        const peer_known *known = &set->known[(*cursor)++];
        if (known->liveness != PEER_DEAD && known->liveness != PEER_UNKNOWN) return known->process_id;
    }
    return 0;
}

void peer_set_set_process_id(peer_set *set, uint64_t process_id) { set->process_id = process_id; }

static peer_link *peer_set_find_up(const peer_set *set, uint64_t process_id) {
    for (size_t i = 0; i < set->link_count; i++)
        if (set->links[i]->up && set->links[i]->process_id == process_id) return set->links[i];
    return NULL;
}

static void peer_set_add_link(peer_set *set, peer_link *link) {
    if (set->link_count == set->link_capacity) {
        set->link_capacity = set->link_capacity ? set->link_capacity * 2 : 8;
        set->links = xrealloc(set->links, set->link_capacity * sizeof(peer_link *));
    }
    set->links[set->link_count++] = link;
}

static void peer_set_remove_link(peer_set *set, const peer_link *link) {
    for (size_t i = 0; i < set->link_count; i++) {
        if (set->links[i] == link) {
            set->links[i] = set->links[--set->link_count];
            return;
        }
    }
}

static void peer_set_send_hello(peer_set *set, peer_link *link) {
    Tessera__Cluster__PeerMessage message = TESSERA__CLUSTER__PEER_MESSAGE__INIT;
    Tessera__Cluster__PeerHello hello = TESSERA__CLUSTER__PEER_HELLO__INIT;
    hello.cluster_version = TESSERA__CLUSTER__CLUSTER_VERSION__CLUSTER_VERSION;
    hello.role = (Tessera__Cluster__Role)set->role;
    hello.process_id = set->process_id;
    hello.cluster_name = set->cluster_name;
    message.body_case = TESSERA__CLUSTER__PEER_MESSAGE__BODY_HELLO;
    message.hello = &hello;
    channel_send_message(link->ch, &message.base);
}

/* Frees the set once every link is released and the ping timer closed. */
static void peer_set_release(peer_set *set) {
    if (!set->freeing || set->link_count > 0 || !set->ping_timer_closed) return;
    free(set->links);
    free(set->known);
    arena_close(&set->decode_arena);
    free(set);
}

static void peer_set_on_ping_timer_closed(uv_handle_t *handle) {
    peer_set *set = handle->data;
    set->ping_timer_closed = 1;
    peer_set_release(set);
}

static void peer_set_on_close(channel *ch, const char *reason) {
    peer_link *link = channel_user_data(ch);
    peer_set *set = link->set;
    peer_set_remove_link(set, link);
    if (link->up) {
        peer_known *known = peer_set_known(set, link->process_id);
        if (known && !peer_set_find_up(set, link->process_id)) known->down_since_us = clock_monotonic_us();
        log_warn("%s %" PRIu64 " down: %s", peer_role_name(link->role), link->process_id, reason);
        if (!set->freeing && set->callbacks.on_peer_down)
            set->callbacks.on_peer_down(set, link->process_id, link->role, reason, set->user_data);
    } else if (link->process_id) {
        log_debug("link to %s %" PRIu64 " closed before hello: %s", peer_role_name(link->role), link->process_id,
                  reason);
    }
    free(link);
    peer_set_release(set);
}

static void peer_set_on_hello(peer_set *set, peer_link *link, const Tessera__Cluster__PeerHello *hello) {
    if (hello->cluster_version != TESSERA__CLUSTER__CLUSTER_VERSION__CLUSTER_VERSION) {
        log_warn("peer %s speaks cluster version %u, we speak %u: disconnecting", channel_peer_name(link->ch),
                 hello->cluster_version, TESSERA__CLUSTER__CLUSTER_VERSION__CLUSTER_VERSION);
        channel_close(link->ch, "cluster version mismatch");
        return;
    }
    if (strcmp(hello->cluster_name ? hello->cluster_name : "", set->cluster_name) != 0) {
        log_warn("peer %s belongs to cluster '%s', not '%s': disconnecting", channel_peer_name(link->ch),
                 hello->cluster_name, set->cluster_name);
        channel_close(link->ch, "cluster name mismatch");
        return;
    }
    peer_role role = (peer_role)hello->role;
    if ((role != PEER_ROLE_BASEAPP && role != PEER_ROLE_CELLAPP) || hello->process_id == 0 ||
        hello->process_id == set->process_id || (link->process_id && link->process_id != hello->process_id)) {
        log_warn("peer %s sent an invalid hello (role %d, id %" PRIu64 "): disconnecting", channel_peer_name(link->ch),
                 (int)hello->role, hello->process_id);
        channel_close(link->ch, "invalid hello");
        return;
    }
    if (peer_set_liveness(set, hello->process_id) == PEER_DEAD) {
        log_warn("%s %" PRIu64 " was declared dead: its hello is refused (it must rejoin as a new process)",
                 peer_role_name(role), hello->process_id);
        channel_close(link->ch, "declared dead");
        return;
    }
    if (peer_set_find_up(set, hello->process_id)) {
        log_warn("%s %" PRIu64 " connected twice: keeping the first link", peer_role_name(role), hello->process_id);
        channel_close(link->ch, "duplicate link");
        return;
    }
    int inbound = link->process_id == 0;
    link->process_id = hello->process_id;
    link->role = role;
    link->up = 1;
    link->opened_us = clock_monotonic_us();
    link->last_heard_us = link->opened_us;
    peer_set_know_role(set, link->process_id, role);
    peer_known *known = peer_set_known(set, link->process_id);
    known->down_since_us = 0;
    known->returning = known->ever_up;
    known->ever_up = true;
    if (inbound) peer_set_send_hello(set, link);
    log_info("%s %" PRIu64 " up (%s)", peer_role_name(role), link->process_id, channel_peer_name(link->ch));
    if (set->callbacks.on_peer_up) set->callbacks.on_peer_up(set, link->process_id, role, set->user_data);
}

/* ---- pings ---------------------------------------------------------------------- */

static void peer_set_on_ping(peer_link *link, const Tessera__Cluster__PeerPing *ping) {
    if (ping->sequence > link->pings_received) link->pings_received = ping->sequence;
    /* An echo of one of our pings: the peer heard us when we sent it, at
     * the latest. Only sequences still in the history can be dated. */
    if (ping->echo > link->echoed && ping->echo <= link->pings_sent &&
        link->pings_sent - ping->echo < PEER_SET_PING_HISTORY) {
        link->echoed = ping->echo;
        link->echoed_sent_us = link->ping_sent_us[ping->echo % PEER_SET_PING_HISTORY];
    }
}

static void peer_set_on_ping_timer(uv_timer_t *timer) {
    peer_set *set = timer->data;
    if (set->freeing) return;
    uint64_t now = clock_monotonic_us();
    for (size_t i = 0; i < set->link_count; i++) {
        peer_link *link = set->links[i];
        if (!link->up || channel_get_state(link->ch) != CHANNEL_OPEN) continue;
        Tessera__Cluster__PeerPing ping = TESSERA__CLUSTER__PEER_PING__INIT;
        ping.sequence = ++link->pings_sent;
        ping.echo = link->pings_received;
        link->ping_sent_us[ping.sequence % PEER_SET_PING_HISTORY] = now;
        Tessera__Cluster__PeerMessage message = TESSERA__CLUSTER__PEER_MESSAGE__INIT;
        message.body_case = TESSERA__CLUSTER__PEER_MESSAGE__BODY_PING;
        message.ping = &ping;
        channel_send_message(link->ch, &message.base);
    }
}

uint64_t peer_set_silence_us(const peer_set *set, uint64_t process_id, uint64_t now_us) {
    const peer_link *link = peer_set_find_up(set, process_id);
    if (!link) return UINT64_MAX;
    return now_us > link->last_heard_us ? now_us - link->last_heard_us : 0;
}

bool peer_set_vouched(const peer_set *set, peer_role role, uint64_t now_us) {
    for (size_t i = 0; i < set->known_count; i++) {
        const peer_known *known = &set->known[i];
        if (!known->role_known || known->role != role || known->process_id == set->process_id) continue;
        if (known->liveness == PEER_DEAD || known->liveness == PEER_GONE || known->liveness == PEER_UNKNOWN) continue;
        const peer_link *link = peer_set_find_up(set, known->process_id);
        if (!link || !link->echoed_sent_us || now_us - link->echoed_sent_us >= (uint64_t)PEER_SET_VOUCH_MS * 1000)
            return false;
    }
    return true;
}

/* ---- deaths ----------------------------------------------------------------------- */

void peer_set_mark_dead(peer_set *set, uint64_t process_id, const char *reason) {
    if (set->freeing || process_id == 0 || process_id == set->process_id) return;
    peer_known *known = peer_set_know(set, process_id);
    if (known->liveness == PEER_DEAD) return;
    known->liveness = PEER_DEAD;
    for (size_t i = 0; i < set->link_count; i++)
        if (set->links[i]->process_id == process_id) channel_close(set->links[i]->ch, "declared dead");
    if (!known->role_known || known->dead_told) return;
    known->dead_told = true;
    log_warn("%s %" PRIu64 " declared dead: %s", peer_role_name(known->role), process_id, reason);
    if (set->callbacks.on_peer_dead) set->callbacks.on_peer_dead(set, process_id, known->role, reason, set->user_data);
}

static void peer_set_on_frame(channel *ch, const uint8_t *frame, size_t length) {
    peer_link *link = channel_user_data(ch);
    peer_set *set = link->set;
    arena_mark mark = arena_save(&set->decode_arena);
    Tessera__Cluster__PeerMessage *message =
        tessera__cluster__peer_message__unpack(arena_protobuf(&set->decode_arena), length, frame);
    if (!message) {
        arena_release(&set->decode_arena, mark);
        log_warn("peer %s (%" PRIu64 ") sent a frame that is not a PeerMessage: disconnecting", channel_peer_name(ch),
                 link->process_id);
        channel_close(ch, "malformed frame");
        return;
    }
    link->last_heard_us = clock_monotonic_us();
    if (message->body_case == TESSERA__CLUSTER__PEER_MESSAGE__BODY_HELLO) {
        if (link->up) {
            channel_close(ch, "second hello");
        } else {
            peer_set_on_hello(set, link, message->hello);
        }
    } else if (!link->up) {
        log_warn("peer %s sent a message before its hello: disconnecting", channel_peer_name(ch));
        channel_close(ch, "message before hello");
    } else if (message->body_case == TESSERA__CLUSTER__PEER_MESSAGE__BODY_PING) {
        peer_set_on_ping(link, message->ping);
    } else if (message->body_case == TESSERA__CLUSTER__PEER_MESSAGE__BODY_DEATH) {
        const Tessera__Cluster__PeerDeath *death = message->death;
        if (death->process_id && death->process_id != set->process_id)
            peer_set_mark_dead(set, death->process_id,
                               death->reason && death->reason[0] ? death->reason : "declared dead");
    } else if (set->callbacks.on_message) {
        set->callbacks.on_message(set, link->process_id, link->role, message, set->user_data);
    }
    arena_release(&set->decode_arena, mark);
}

static void peer_set_on_connect(channel *ch, int status) {
    peer_link *link = channel_user_data(ch);
    if (status == 0) peer_set_send_hello(link->set, link);
}

static const channel_callbacks peer_set_channel_callbacks = {
    .on_frame = peer_set_on_frame,
    .on_connect = peer_set_on_connect,
    .on_close = peer_set_on_close,
};

void peer_set_accept(peer_set *set, uv_stream_t *listener) {
    peer_link *link = xcalloc(1, sizeof *link);
    link->set = set;
    link->opened_us = clock_monotonic_us();
    link->ch = channel_accept(listener, &set->options, &peer_set_channel_callbacks, link);
    if (!link->ch) {
        free(link);
        return;
    }
    if (set->freeing || set->process_id == 0) {
        peer_set_add_link(set, link);
        channel_close(link->ch, "not ready for peers");
        return;
    }
    peer_set_add_link(set, link);
}

/* The dial rule: exactly one side of each pair dials. */
static int peer_set_should_dial(const peer_set *set, peer_role role, uint64_t process_id) {
    /* Baseapps dial cellapps, and each other (the lower id dials). */
    if (role == PEER_ROLE_BASEAPP) return set->role == PEER_ROLE_BASEAPP && set->process_id < process_id;
    if (set->role == PEER_ROLE_BASEAPP) return 1;
    return set->process_id < process_id;
}

void peer_set_on_registry(peer_set *set, const registry_view *view) {
    if (set->freeing || set->process_id == 0) return;
    /* The dead first: none of them is dialled or kept. */
    for (size_t d = 0; d < view->dead_count; d++) peer_set_mark_dead(set, view->dead[d], "declared dead");
    /* What the registry lists now; a known process it lists no more has
     * left (or was never there). */
    for (size_t k = 0; k < set->known_count; k++)
        if (set->known[k].liveness == PEER_LISTED || set->known[k].liveness == PEER_LAPSED)
            set->known[k].liveness = PEER_GONE;
    for (size_t l = 0; l < view->lapsed_count; l++) {
        peer_known *known = peer_set_know(set, view->lapsed[l]);
        if (known->liveness == PEER_DEAD) continue;
        known->liveness = PEER_LAPSED;
        if (!known->lapse_told) {
            known->lapse_told = true;
            log_info("process %" PRIu64 ": its registry lease lapsed; it is not dead unless the cluster decides so",
                     view->lapsed[l]);
        }
    }
    for (size_t p = 0; p < view->count; p++) {
        peer_role role;
        if (peer_role_from_name(view->peers[p].role, &role) != 0) continue;
        peer_known *known = peer_set_know(set, view->peers[p].process_id);
        if (known->liveness == PEER_DEAD) continue;
        known->liveness = PEER_LISTED;
        known->lapse_told = false;
        peer_set_know_role(set, view->peers[p].process_id, role);
    }
    for (size_t i = 0; i < set->link_count; i++) {
        peer_link *link = set->links[i];
        peer_liveness liveness = peer_set_liveness(set, link->process_id);
        link->listed = liveness == PEER_LISTED || liveness == PEER_LAPSED;
        if (link->listed) link->seen_in_registry = 1;
    }
    for (size_t p = 0; p < view->count; p++) {
        const registry_peer *peer = &view->peers[p];
        peer_role role;
        if (peer_role_from_name(peer->role, &role) != 0 || peer_set_liveness(set, peer->process_id) == PEER_DEAD)
            continue;
        int known = 0;
        for (size_t i = 0; i < set->link_count; i++) {
            peer_link *link = set->links[i];
            if (link->process_id != peer->process_id) continue;
            link->load = peer->load;
            known = 1;
        }
        if (known || !peer_set_should_dial(set, role, peer->process_id)) continue;
        peer_link *link = xcalloc(1, sizeof *link);
        link->set = set;
        link->process_id = peer->process_id;
        link->role = role;
        link->listed = 1;
        link->seen_in_registry = 1;
        link->load = peer->load;
        link->opened_us = clock_monotonic_us();
        link->ch = channel_connect(set->loop, peer->host, peer->port, &set->options, &peer_set_channel_callbacks, link);
        if (!link->ch) {
            free(link);
            continue;
        }
        log_debug("dialling %s %" PRIu64 " at %s:%d", peer->role, peer->process_id, peer->host, peer->port);
        peer_set_add_link(set, link);
    }
    /* Links to processes the registry no longer knows: they left. A
     * lapsed one is kept (a lapsed lease is not death: only the cluster's
     * decision is). A link that was never listed gets a grace period,
     * since a peer may dial us right after registering, before our scan
     * sees it. channel_close never removes links synchronously, so this
     * walk is stable. */
    uint64_t now = clock_monotonic_us();
    for (size_t i = 0; i < set->link_count; i++) {
        peer_link *link = set->links[i];
        if (link->listed) link->unlisted_since_us = 0;
        if (link->listed || link->process_id == 0) continue;
        if (!link->unlisted_since_us) link->unlisted_since_us = now;
        if (link->seen_in_registry ? now - link->unlisted_since_us >= PEER_SET_LAPSED_GRACE_US
                                   : now - link->opened_us > PEER_SET_UNLISTED_GRACE_US)
            channel_close(link->ch, "it left the registry");
    }
}

int peer_set_send(peer_set *set, uint64_t process_id, const Tessera__Cluster__PeerMessage *message) {
    peer_link *link = peer_set_find_up(set, process_id);
    if (!link) return -1;
    return channel_send_message(link->ch, &message->base);
}

size_t peer_set_count_up(const peer_set *set, peer_role role) {
    size_t count = 0;
    for (size_t i = 0; i < set->link_count; i++)
        if (set->links[i]->up && set->links[i]->role == role) count++;
    return count;
}

uint64_t peer_set_next_up(const peer_set *set, peer_role role, size_t *cursor) {
    while (*cursor < set->link_count) {
        peer_link *link = set->links[(*cursor)++];
        if (link->up && link->role == role && channel_get_state(link->ch) == CHANNEL_OPEN) return link->process_id;
    }
    return 0;
}

bool peer_set_is_up(const peer_set *set, uint64_t process_id) { return peer_set_find_up(set, process_id) != NULL; }

int64_t peer_set_load(const peer_set *set, uint64_t process_id) {
    peer_link *link = peer_set_find_up(set, process_id);
    return link ? link->load : 0;
}

void peer_set_free(peer_set *set) {
    if (!set || set->freeing) return;
    set->freeing = 1;
    uv_timer_stop(&set->ping_timer);
    uv_close((uv_handle_t *)&set->ping_timer, peer_set_on_ping_timer_closed);
    for (size_t i = 0; i < set->link_count; i++) channel_close(set->links[i]->ch, "shutting down");
}
