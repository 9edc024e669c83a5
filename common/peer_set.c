/* peer_set.c -- owns the channels to other Tessera processes: dialling by
 * the registry's word, the PeerHello exchange, decoding PeerMessage frames,
 * and declaring a peer down when its channel closes or its registry entry
 * lapses. What the messages mean belongs to the programs. */
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
/* A peer that was listed and is absent now has stopped renewing its entry
 * -- or Redis restarted and lost the entries of the last TTL, and the peer
 * has not renewed its own since it reconnected. Its link goes once it has
 * been absent this long: a few heartbeats, which any live peer sends
 * within. */
#define PEER_SET_LAPSED_GRACE_US ((uint64_t)1500 * 1000)

typedef struct peer_link {
    peer_set *set;
    channel *ch;
    uint64_t process_id; /* 0 for an inbound link before its hello */
    peer_role role;
    int up; /* hello received and accepted */
    int seen_in_registry;
    int listed;                 /* present in the latest registry report */
    uint64_t unlisted_since_us; /* absent from the reports since (0: listed) */
    uint64_t opened_us;
    int64_t load;
} peer_link;

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
    return set;
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

static void peer_set_on_close(channel *ch, const char *reason) {
    peer_link *link = channel_user_data(ch);
    peer_set *set = link->set;
    peer_set_remove_link(set, link);
    if (link->up) {
        log_warn("%s %" PRIu64 " gone: %s", peer_role_name(link->role), link->process_id, reason);
        if (!set->freeing && set->callbacks.on_peer_down)
            set->callbacks.on_peer_down(set, link->process_id, link->role, reason, set->user_data);
    } else if (link->process_id) {
        log_debug("link to %s %" PRIu64 " closed before hello: %s", peer_role_name(link->role), link->process_id,
                  reason);
    }
    free(link);
    if (set->freeing && set->link_count == 0) {
        free(set->links);
        arena_close(&set->decode_arena);
        free(set);
    }
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
    if (inbound) peer_set_send_hello(set, link);
    log_info("%s %" PRIu64 " up (%s)", peer_role_name(role), link->process_id, channel_peer_name(link->ch));
    if (set->callbacks.on_peer_up) set->callbacks.on_peer_up(set, link->process_id, role, set->user_data);
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
    if (message->body_case == TESSERA__CLUSTER__PEER_MESSAGE__BODY_HELLO) {
        if (link->up) {
            channel_close(ch, "second hello");
        } else {
            peer_set_on_hello(set, link, message->hello);
        }
    } else if (!link->up) {
        log_warn("peer %s sent a message before its hello: disconnecting", channel_peer_name(ch));
        channel_close(ch, "message before hello");
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

void peer_set_on_registry(peer_set *set, const registry_peer *peers, size_t count) {
    if (set->freeing || set->process_id == 0) return;
    for (size_t i = 0; i < set->link_count; i++) set->links[i]->listed = 0;
    for (size_t p = 0; p < count; p++) {
        peer_role role;
        if (peer_role_from_name(peers[p].role, &role) != 0) continue;
        int known = 0;
        for (size_t i = 0; i < set->link_count; i++) {
            peer_link *link = set->links[i];
            if (link->process_id != peers[p].process_id) continue;
            link->listed = 1;
            link->seen_in_registry = 1;
            link->load = peers[p].load;
            known = 1;
        }
        if (known || !peer_set_should_dial(set, role, peers[p].process_id)) continue;
        peer_link *link = xcalloc(1, sizeof *link);
        link->set = set;
        link->process_id = peers[p].process_id;
        link->role = role;
        link->listed = 1;
        link->seen_in_registry = 1;
        link->load = peers[p].load;
        link->opened_us = clock_monotonic_us();
        link->ch =
            channel_connect(set->loop, peers[p].host, peers[p].port, &set->options, &peer_set_channel_callbacks, link);
        if (!link->ch) {
            free(link);
            continue;
        }
        log_debug("dialling %s %" PRIu64 " at %s:%d", peers[p].role, peers[p].process_id, peers[p].host, peers[p].port);
        peer_set_add_link(set, link);
    }
    /* Links absent from the registry: their process stopped renewing its
     * entry. A link that was never listed gets a grace period, since a
     * peer may dial us right after registering, before our scan sees it.
     * channel_close never removes links synchronously, so this walk is
     * stable. */
    uint64_t now = clock_monotonic_us();
    for (size_t i = 0; i < set->link_count; i++) {
        peer_link *link = set->links[i];
        if (link->listed) link->unlisted_since_us = 0;
        if (link->listed || link->process_id == 0) continue;
        if (!link->unlisted_since_us) link->unlisted_since_us = now;
        if (link->seen_in_registry ? now - link->unlisted_since_us >= PEER_SET_LAPSED_GRACE_US
                                   : now - link->opened_us > PEER_SET_UNLISTED_GRACE_US)
            channel_close(link->ch, "heartbeat lapsed (no longer in the registry)");
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
    if (set->link_count == 0) {
        free(set->links);
        arena_close(&set->decode_arena);
        free(set);
        return;
    }
    for (size_t i = 0; i < set->link_count; i++) channel_close(set->links[i]->ch, "shutting down");
}
