/* game_event.c -- the declared-event checks, the coding of a firing's
 * fields (a method call's argument coding, method_call.h) and the listener
 * table both game hosts share (game_event.h). */
#include "game_event.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bit_stream.h"
#include "game_args.h"
#include "log.h"
#include "method_call.h"

const entity_def_method *game_event_find(const entity_def_registry *definitions, const char *name, const char *who) {
    const entity_def_method *event = entity_def_registry_find_event(definitions, name);
    if (!event)
        log_warn("game (%s): no event '%s' is declared in the entity definitions (%zu events are): refused", who,
                 name ? name : "(null)", entity_def_registry_event_count(definitions));
    return event;
}

int game_event_listen(game_event_listeners *listeners, const entity_def_method *event, void (*function)(void),
                      void *user_data) {
    if (!event || !function) return -1;
    if (listeners->count == GAME_EVENT_MAX_LISTENERS) {
        log_warn("game: listener of event '%s' refused: %d listeners already", event->name, GAME_EVENT_MAX_LISTENERS);
        return -1;
    }
    listeners->entries[listeners->count++] = (game_event_listener){event->id, function, user_data};
    return 0;
}

entity_state *game_event_check_firing(const entity_def_registry *definitions, const game_event_listeners *listeners,
                                      const char *name, const tessera_args *fields, const char *who,
                                      const entity_def_method **event, entity_state **owned) {
    *owned = NULL;
    *event = game_event_find(definitions, name, who);
    if (!*event) return NULL;
    if (listeners->depth >= GAME_EVENT_MAX_DEPTH) {
        log_warn("game (%s): event '%s' fired %d deep inside event listeners: refused (a loop of events?)", who, name,
                 GAME_EVENT_MAX_DEPTH);
        return NULL;
    }
    return game_event_fields(*event, fields, owned);
}

entity_state *game_event_fields(const entity_def_method *event, const tessera_args *fields, entity_state **owned) {
    *owned = NULL;
    if (!fields) {
        *owned = method_call_args_create(event);
        return *owned;
    }
    entity_state *state = game_args_state(fields);
    if (entity_state_class(state) != &event->args_class) {
        log_warn("game: event '%s' fired with fields made for '%s': refused", event->name,
                 entity_state_class(state)->name);
        return NULL;
    }
    return state;
}

void game_event_encode(const entity_def_method *event, uint64_t source_id, const entity_state *fields,
                       Tessera__Client__GameEvent *out) {
    bit_writer w;
    bit_writer_init(&w);
    method_call_encode(fields, &w);
    tessera__client__game_event__init(out);
    out->event_id = event->id;
    out->source_id = source_id;
    out->args.len = bit_writer_bytes(&w);
    out->args.data = xmalloc(out->args.len ? out->args.len : 1);
    if (out->args.len) memcpy(out->args.data, bit_writer_data(&w), out->args.len);
    bit_writer_close(&w);
}

entity_state *game_event_decode(const entity_def_registry *definitions, const Tessera__Client__GameEvent *in,
                                const entity_def_method **event, char *why, size_t why_size) {
    *event = entity_def_registry_event(definitions, in->event_id);
    if (!*event) {
        snprintf(why, why_size, "event id %u is not declared (%zu events are)", in->event_id,
                 entity_def_registry_event_count(definitions));
        return NULL;
    }
    entity_state *fields = method_call_args_create(*event);
    int rc = method_call_decode(fields, in->args.data, in->args.len);
    if (rc != 0) {
        snprintf(why, why_size, "the fields of event '%s' are not its declared types: %s", (*event)->name,
                 method_call_strerror(rc));
        entity_state_free(fields);
        return NULL;
    }
    return fields;
}
