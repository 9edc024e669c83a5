/* base_entity.c -- the base part of a player's entity on its baseapp: its
 * properties (an entity_state of the player's class, of which the base
 * holds the on_base ones), the BASE_AND_CLIENT ones it sends its own
 * client, the starting values of the cell part it asks a cellapp for, the
 * client's method calls (base methods run here, cell methods are relayed to
 * the cell, which checks what only it can), and the state dump.
 *
 * The demo game's base methods: Avatar.chat(text) earns a gold coin
 * (Avatar.gold, BASE_AND_CLIENT), which shows a base property reaching its
 * own client and nobody else; Avatar.relayPing(n) calls the cell's ping.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "baseapp.h"
#include "entity_state_json.h"
#include "json_file.h"
#include "log.h"
#include "method_call.h"
#include "base_mailbox.h"
#include "property_codec.h"

void base_entity_create(proxy *player, const entity_def_class *cls) {
    player->cls = cls;
    player->properties = entity_state_create(player->cls);
    const entity_def_property *name = entity_def_class_find_property(player->cls, "name");
    if (name && name->type.kind == ENTITY_DEF_STRING)
        entity_state_set_string(player->properties, name->id, 0, player->account,
                                strnlen(player->account, name->type.max_length));
}

bool base_entity_has_cell(const entity_def_class *cls) {
    if (cls->method_count[ENTITY_DEF_PART_CELL] > 0) return true;
    for (size_t p = 0; p < cls->property_count; p++)
        if (cls->properties[p].audience.on_cell) return true;
    return false;
}

void base_entity_on_client_enabled(proxy *player) {
    log_debug("entity %" PRIu64 " (%s of account '%s'): its client is enabled", player->entity_id, player->cls->name,
              player->account);
}

void base_entity_free(proxy *player) {
    entity_state_free(player->properties);
    player->properties = NULL;
}

void base_entity_cell_properties(const proxy *player, bit_writer *w) {
    /* The cell part starts with what the base set of the cell's properties
     * (here the player's name); the cell keeps defaults for the rest. */
    entity_state_mask cell = {{0}};
    for (size_t p = 0; p < player->cls->property_count; p++) {
        const entity_def_property *property = &player->cls->properties[p];
        if (property->audience.on_cell && entity_state_is_dirty(player->properties, property->id))
            entity_state_mask_add(&cell, property->id);
    }
    property_codec_encode_changes(w, player->properties, &cell);
    bit_writer_align(w);
}

void base_entity_send_properties(proxy *player, bool all) {
    if (player->properties == NULL || !player->link) return;
    entity_state_mask to_client = {{0}};
    for (size_t p = 0; p < player->cls->property_count; p++) {
        const entity_def_property *property = &player->cls->properties[p];
        if (property->audience.on_base && property->audience.to_own_client &&
            (all || entity_state_is_dirty(player->properties, property->id)))
            entity_state_mask_add(&to_client, property->id);
    }
    entity_state_clear_dirty(player->properties);
    if (entity_state_mask_empty(&to_client)) return;
    bit_writer w;
    bit_writer_init(&w);
    property_codec_encode_changes(&w, player->properties, &to_client);
    bit_writer_align(&w);
    Tessera__Client__BaseProperties properties = TESSERA__CLIENT__BASE_PROPERTIES__INIT;
    properties.entity_id = player->entity_id;
    properties.changes.data = (uint8_t *)bit_writer_data(&w);
    properties.changes.len = bit_writer_bytes(&w);
    Tessera__Client__ServerToClient message = TESSERA__CLIENT__SERVER_TO_CLIENT__INIT;
    message.body_case = TESSERA__CLIENT__SERVER_TO_CLIENT__BODY_BASE_PROPERTIES;
    message.base_properties = &properties;
    client_link_send(player->link, &message);
    bit_writer_close(&w);
}

/* Calls cell method `name` of the player's own cell part from its base. */
static void base_entity_call_cell(proxy *player, const char *name, const entity_state *args) {
    const entity_def_method *method = entity_def_class_find_method(player->cls, ENTITY_DEF_PART_CELL, name);
    if (!method) return;
    bit_writer w;
    bit_writer_init(&w);
    method_call_encode(args, &w);
    Tessera__Cluster__CellCall call = TESSERA__CLUSTER__CELL_CALL__INIT;
    call.caller_id = player->entity_id;
    call.method_id = method->id;
    call.args.data = (uint8_t *)bit_writer_data(&w);
    call.args.len = bit_writer_bytes(&w);
    Tessera__Cluster__CellMessage message = TESSERA__CLUSTER__CELL_MESSAGE__INIT;
    message.body_case = TESSERA__CLUSTER__CELL_MESSAGE__BODY_CALL;
    message.call = &call;
    cell_link_send(player, &message);
    bit_writer_close(&w);
}

/* Account.enterWorld: the account's Avatar is loaded (or made, the first
 * time), gets a cell part, and the Account gives it its client
 * (giveClientTo), then goes. */
typedef struct base_entity_entering {
    entity_handle account_handle;
} base_entity_entering;

static void base_entity_on_avatar_loaded(baseapp *app, persistence_outcome outcome, const cJSON *stored,
                                         void *context) {
    base_entity_entering *entering = context;
    proxy *account = entity_list_get(app->proxies, entering->account_handle);
    free(entering);
    if (!account || account->state == PROXY_DESTROYING || !account->link) return;
    account->entering = false;
    if (outcome == PERSISTENCE_UNAVAILABLE || outcome == PERSISTENCE_DAMAGED) {
        log_warn("account '%s': its Avatar could not be loaded (%s): it stays on its Account", account->account,
                 outcome == PERSISTENCE_DAMAGED ? "damaged" : "Redis unavailable");
        return;
    }
    const entity_def_class *cls = entity_def_registry_find_class(app->definitions, "Avatar");
    char why[160];
    proxy *avatar = cls ? proxy_make(app, cls, account->account, stored, why, sizeof why) : NULL;
    if (!avatar) {
        log_warn("account '%s': no Avatar: %s", account->account, cls ? why : "the definitions have no Avatar");
        return;
    }
    if (avatar->state == PROXY_CREATING_CELL && proxy_create_cell(avatar, false) != 0) {
        log_warn("account '%s': no cellapp for its Avatar", account->account);
        proxy_destroy(avatar, false, "no cellapp for its cell part");
        return;
    }
    if (proxy_give_client_to(account, avatar, why, sizeof why) != 0) {
        proxy_destroy(avatar, false, why);
        return;
    }
    proxy_destroy(account, true, "its client went to its Avatar");
}

static void base_entity_enter_world(proxy *account) {
    if (account->entering) return; /* one at a time */
    const entity_def_property *visits = entity_def_class_find_property(account->cls, "visits");
    uint64_t count = 0;
    if (visits && entity_state_get_uint(account->properties, visits->id, 0, &count) == 0)
        entity_state_set_uint(account->properties, visits->id, 0, count + 1);
    base_entity_entering *entering = xcalloc(1, sizeof *entering);
    entering->account_handle = account->handle;
    if (persistence_load(account->app, "Avatar", account->account, base_entity_on_avatar_loaded, entering) != 0) {
        free(entering);
        log_warn("account '%s': Redis unavailable: it stays on its Account", account->account);
        return;
    }
    account->entering = true;
}

/* ---- entity calls in the demo game ---------------------------------------------- */

/* Calls `method` (of class `class_name`, part BASE or CLIENT) of `target`
 * with one entity argument and, when `number` is not NULL, a uint32
 * first: the demo's calls all have one of those two shapes. */
static void base_entity_call_demo(proxy *caller, uint64_t target, const char *class_name, entity_def_part part,
                                  const char *method_name, const uint64_t *number, uint64_t entity_argument) {
    baseapp *app = caller->app;
    const entity_def_class *cls = entity_def_registry_find_class(app->definitions, class_name);
    const entity_def_method *method = cls ? entity_def_class_find_method(cls, part, method_name) : NULL;
    if (!method) return;
    entity_state *args = method_call_args_create(method);
    uint16_t next = 0;
    if (number) entity_state_set_uint(args, next++, 0, *number);
    if (next < method->arg_count) entity_state_set_entity(args, next, 0, entity_argument);
    base_call(app, caller->entity_id, target, class_name, part, method_name, args);
    entity_state_free(args);
}

static uint64_t base_entity_entity_argument(const entity_state *args, uint16_t index) {
    uint64_t id = 0;
    entity_state_get_entity(args, index, 0, &id);
    return id;
}

static uint64_t base_entity_uint_argument(const entity_state *args, uint16_t index) {
    uint64_t n = 0;
    entity_state_get_uint(args, index, 0, &n);
    return n;
}

/* Census: a global base (registered as "census") that counts the players
 * in the world; Avatar.census() asks it, and it answers the asker's
 * client with onCensus(players). */
static void base_entity_run_census(proxy *census, const entity_def_method *method, const entity_state *args) {
    const entity_def_property *players = entity_def_class_find_property(census->cls, "players");
    uint64_t count = 0;
    if (players) entity_state_get_uint(census->properties, players->id, 0, &count);
    if (strcmp(method->name, "joined") == 0) count++;
    else if (strcmp(method->name, "left") == 0 && count > 0) count--;
    if (players) entity_state_set_uint(census->properties, players->id, 0, count);
    if (strcmp(method->name, "count") == 0)
        base_entity_call_demo(census, base_entity_entity_argument(args, 0), "Avatar", ENTITY_DEF_PART_CLIENT,
                              "onCensus", &count, 0);
}

/* The demo game's base methods: chat(text) earns a gold coin;
 * relayPing(n) calls the cell's ping(n) from the base, so numbered calls
 * reach the cell on the base's own stream as well as the client's;
 * Account.enterWorld() hands the client to the account's Avatar. Entity
 * calls across processes: poke(target) calls target's poked(from), which
 * tells its client onPoked(from) (a poke that does not arrive tells the
 * poker's client onCallFailed(target)); echoTo(target, n) calls target's
 * echo(n, from), which calls from's echoed(n), which tells its client
 * onEcho(n) (a round trip, for bench/bench_base.py); census() asks the
 * global Census. */
void base_entity_run(proxy *player, const entity_def_method *method, const entity_state *args, uint64_t caller_id) {
    (void)caller_id;
    if (strcmp(player->cls->name, "Account") == 0 && strcmp(method->name, "enterWorld") == 0) {
        base_entity_enter_world(player);
        return;
    }
    if (strcmp(player->cls->name, "Census") == 0) {
        base_entity_run_census(player, method, args);
        return;
    }
    if (strcmp(method->name, "poke") == 0) {
        base_entity_call_demo(player, base_entity_entity_argument(args, 0), "Avatar", ENTITY_DEF_PART_BASE, "poked",
                              NULL, player->entity_id);
        return;
    }
    if (strcmp(method->name, "poked") == 0) {
        base_entity_call_demo(player, player->entity_id, "Avatar", ENTITY_DEF_PART_CLIENT, "onPoked", NULL,
                              base_entity_entity_argument(args, 0));
        return;
    }
    if (strcmp(method->name, "echoTo") == 0) {
        uint64_t n = base_entity_uint_argument(args, 1);
        base_entity_call_demo(player, base_entity_entity_argument(args, 0), "Avatar", ENTITY_DEF_PART_BASE, "echo", &n,
                              player->entity_id);
        return;
    }
    if (strcmp(method->name, "echo") == 0) {
        uint64_t n = base_entity_uint_argument(args, 0);
        base_entity_call_demo(player, base_entity_entity_argument(args, 1), "Avatar", ENTITY_DEF_PART_BASE, "echoed",
                              &n, 0);
        return;
    }
    if (strcmp(method->name, "echoed") == 0) {
        uint64_t n = base_entity_uint_argument(args, 0);
        base_entity_call_demo(player, player->entity_id, "Avatar", ENTITY_DEF_PART_CLIENT, "onEcho", &n, 0);
        return;
    }
    if (strcmp(method->name, "census") == 0) {
        if (player->app->census_id)
            base_entity_call_demo(player, player->app->census_id, "Census", ENTITY_DEF_PART_BASE, "count", NULL,
                                  player->entity_id);
        return;
    }
    if (strcmp(method->name, "chat") == 0) {
        const char *text = "";
        entity_state_get_string(args, 0, 0, &text, NULL);
        log_debug("entity %" PRIu64 " (account '%s') says: %s", player->entity_id, player->account, text);
        const entity_def_property *gold = entity_def_class_find_property(player->cls, "gold");
        uint64_t coins = 0;
        if (gold && entity_state_get_uint(player->properties, gold->id, 0, &coins) == 0 &&
            entity_state_set_uint(player->properties, gold->id, 0, coins + 1) == 0)
            base_entity_send_properties(player, false);
        return;
    }
    if (strcmp(method->name, "relayPing") == 0) {
        base_entity_call_cell(player, "ping", args);
        return;
    }
    log_info("entity %" PRIu64 ": %s.%s has no implementation in this game: ignored", player->entity_id,
             player->cls->name, method->name);
}

void base_entity_on_call(proxy *player, const Tessera__Client__EntityCall *call) {
    if (call->part == TESSERA__CLIENT__METHOD_PART__METHOD_PART_CELL) {
        /* To the caller's real, which knows what its client sees and checks
         * the rest (cell_message.c). */
        Tessera__Cluster__CellCall relay = TESSERA__CLUSTER__CELL_CALL__INIT;
        relay.caller_id = player->entity_id;
        relay.target_id = call->entity_id;
        relay.method_id = call->method_id;
        relay.args = call->args;
        relay.from_client = true;
        Tessera__Cluster__CellMessage message = TESSERA__CLUSTER__CELL_MESSAGE__INIT;
        message.body_case = TESSERA__CLUSTER__CELL_MESSAGE__BODY_CALL;
        message.call = &relay;
        cell_link_send(player, &message);
        return;
    }
    if (call->part != TESSERA__CLIENT__METHOD_PART__METHOD_PART_BASE) {
        client_link_fail(player->link, TESSERA__CLIENT__ERROR_CODE__ERROR_NOT_EXPOSED,
                   "only base and cell methods can be called by a client (part %d)", (int)call->part);
        return;
    }
    if (call->entity_id != player->entity_id) {
        client_link_fail(player->link, TESSERA__CLIENT__ERROR_CODE__ERROR_UNKNOWN_ENTITY,
                   "base method call on entity %" PRIu64 ", which is not the player's", call->entity_id);
        return;
    }
    char reason[256];
    const entity_def_method *method;
    entity_state *args;
    method_call_verdict verdict = method_call_prepare(player->cls, ENTITY_DEF_PART_BASE, call->method_id,
                                                      call->args.data, call->args.len, true, &method, &args, reason,
                                                      sizeof reason);
    if (verdict != METHOD_CALL_OK) {
        client_link_fail(player->link, (Tessera__Client__ErrorCode)method_call_error_code(verdict), "%s", reason);
        return;
    }
    base_entity_run(player, method, args, player->entity_id);
    entity_state_free(args);
}

void base_entity_on_written(proxy *player, bool ok, const char *detail) {
    /* The demo game only logs a failure (persistence.c retries it); a game
     * that must know, for a trade, say, waits for the ok. */
    if (!ok)
        log_warn("entity %" PRIu64 " (account '%s'): its save failed and is being retried: %s", player->entity_id,
                 player->account, detail ? detail : "");
}

void base_entity_on_handover_refused(proxy *source, uint64_t target_id, const char *rule) {
    log_warn("entity %" PRIu64 " (account '%s') keeps its client: giveClientTo entity %" PRIu64 " refused: %s",
             source->entity_id, source->account, target_id, rule);
}

void base_entity_on_call_failed(baseapp *app, const Tessera__Cluster__EntityCallFailed *failed) {
    if (failed->entity_id == app->census_id && app->census_id) {
        /* The census is gone (its baseapp with it): its name is given up,
         * and the sweep makes a new one. */
        base_mailbox_unregister_global(app->bases, "census", app->census_id);
        app->census_id = 0;
    }
    proxy *caller = proxy_find_by_entity(app, failed->caller_id);
    if (!caller || caller->state == PROXY_DESTROYING || strcmp(caller->cls->name, "Avatar") != 0) return;
    const entity_def_method *poked = entity_def_class_find_method(caller->cls, ENTITY_DEF_PART_BASE, "poked");
    if (poked && failed->method_id == poked->id && failed->part == TESSERA__CLIENT__METHOD_PART__METHOD_PART_BASE)
        base_entity_call_demo(caller, caller->entity_id, "Avatar", ENTITY_DEF_PART_CLIENT, "onCallFailed", NULL,
                              failed->entity_id);
}

void base_entity_on_created(proxy *player) {
    baseapp *app = player->app;
    if (strcmp(player->cls->name, "Avatar") == 0 && app->census_id)
        base_entity_call_demo(player, app->census_id, "Census", ENTITY_DEF_PART_BASE, "joined", NULL,
                              player->entity_id);
}

void base_entity_on_destroyed(proxy *player) {
    baseapp *app = player->app;
    if (strcmp(player->cls->name, "Avatar") == 0 && app->census_id && !app->shutting_down)
        base_entity_call_demo(player, app->census_id, "Census", ENTITY_DEF_PART_BASE, "left", NULL, player->entity_id);
    if (strcmp(player->cls->name, "Census") == 0) {
        base_mailbox_unregister_global(app->bases, "census", player->entity_id);
        if (app->census_id == player->entity_id) app->census_id = 0;
    }
}

/* ---- the global Census ------------------------------------------------------------ */

typedef struct base_entity_census_claim {
    baseapp *app;
    entity_handle census_handle;
} base_entity_census_claim;

static void base_entity_on_census_registered(bool ok, uint64_t holder_id, void *context) {
    base_entity_census_claim *claim = context;
    baseapp *app = claim->app;
    proxy *census = entity_list_get(app->proxies, claim->census_handle);
    free(claim);
    app->census_pending = false;
    if (ok) {
        app->census_id = holder_id;
        log_info("the Census is entity %" PRIu64 " here", holder_id);
        return;
    }
    /* Another baseapp's holds the name: ours goes. */
    app->census_id = holder_id;
    if (census) proxy_destroy(census, false, "another baseapp holds the census");
}

static void base_entity_on_census_found(uint64_t entity_id, void *context) {
    baseapp *app = context;
    if (app->shutting_down) return;
    if (entity_id) {
        app->census_id = entity_id;
        app->census_pending = false;
        return;
    }
    /* None yet: make one here and claim the name. */
    const entity_def_class *cls = entity_def_registry_find_class(app->definitions, "Census");
    char why[128];
    proxy *census = cls ? proxy_make(app, cls, "census", NULL, why, sizeof why) : NULL;
    if (!census) {
        app->census_pending = false;
        return;
    }
    base_entity_census_claim *claim = xcalloc(1, sizeof *claim);
    claim->app = app;
    claim->census_handle = census->handle;
    if (base_mailbox_register_global(app->bases, "census", census->entity_id, base_entity_on_census_registered, claim) !=
        0) {
        free(claim);
        proxy_destroy(census, false, "Redis is not connected");
        app->census_pending = false;
    }
}

void base_entity_sweep(baseapp *app) {
    if (app->census_id || app->census_pending || !app->process_id || app->draining || app->shutting_down) return;
    if (!entity_def_registry_find_class(app->definitions, "Census")) return;
    if (base_mailbox_find_global(app->bases, "census", base_entity_on_census_found, app) == 0) app->census_pending = true;
}

int base_entity_dump(const baseapp *app) {
    const char *path = app->settings.state_dump_path;
    if (!path[0]) {
        log_warn("state dump requested, but state_dump_path is not set");
        return -1;
    }
    cJSON *root = cJSON_CreateObject();
    cJSON_AddNumberToObject(root, "process_id", (double)app->process_id);
    cJSON *entities = cJSON_AddArrayToObject(root, "entities");
    uint32_t cursor = 0;
    proxy *player;
    size_t count = 0;
    while ((player = entity_list_next(app->proxies, &cursor, NULL)) != NULL) {
        if (player->properties == NULL || player->entity_id == 0) continue;
        /* Only what the base holds. */
        entity_state_mask on_base = {{0}};
        for (size_t p = 0; p < player->cls->property_count; p++)
            if (player->cls->properties[p].audience.on_base) entity_state_mask_add(&on_base, (uint16_t)p);
        cJSON *item = cJSON_CreateObject();
        cJSON_AddNumberToObject(item, "id", (double)player->entity_id);
        cJSON_AddStringToObject(item, "account", player->account);
        cJSON_AddStringToObject(item, "class", player->cls->name);
        cJSON_AddItemToObject(item, "properties", entity_state_to_json(player->properties, &on_base));
        cJSON_AddItemToArray(entities, item);
        count++;
    }
    char problem[512];
    int rc = json_file_write(path, root, problem, sizeof problem);
    cJSON_Delete(root);
    if (rc != 0) {
        log_warn("state dump: %s", problem);
        return -1;
    }
    log_info("state dump: %zu bases written to '%s'", (size_t)count, path);
    return 0;
}
