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
#include "property_codec.h"

void base_entity_create(proxy *client) {
    baseapp *app = client->app;
    client->cls = entity_def_registry_find_class(app->definitions, app->settings.player_entity_type);
    if (!client->cls) log_panic("player class '%s' vanished from the definitions", app->settings.player_entity_type);
    client->properties = entity_state_create(client->cls);
    const entity_def_property *name = entity_def_class_find_property(client->cls, "name");
    if (name && name->type.kind == ENTITY_DEF_STRING)
        entity_state_set_string(client->properties, name->id, 0, client->account,
                                strnlen(client->account, name->type.max_length));
}

void base_entity_free(proxy *client) {
    entity_state_free(client->properties);
    client->properties = NULL;
}

void base_entity_cell_properties(const proxy *client, bit_writer *w) {
    /* The cell part starts with what the base set of the cell's properties
     * (here the player's name); the cell keeps defaults for the rest. */
    entity_state_mask cell = {{0}};
    for (size_t p = 0; p < client->cls->property_count; p++) {
        const entity_def_property *property = &client->cls->properties[p];
        if (property->audience.on_cell && entity_state_is_dirty(client->properties, property->id))
            entity_state_mask_add(&cell, property->id);
    }
    property_codec_encode_changes(w, client->properties, &cell);
    bit_writer_align(w);
}

void base_entity_send_properties(proxy *client, bool all) {
    if (client->properties == NULL || client->ch == NULL) return;
    entity_state_mask to_client = {{0}};
    for (size_t p = 0; p < client->cls->property_count; p++) {
        const entity_def_property *property = &client->cls->properties[p];
        if (property->audience.on_base && property->audience.to_own_client &&
            (all || entity_state_is_dirty(client->properties, property->id)))
            entity_state_mask_add(&to_client, property->id);
    }
    entity_state_clear_dirty(client->properties);
    if (entity_state_mask_empty(&to_client)) return;
    bit_writer w;
    bit_writer_init(&w);
    property_codec_encode_changes(&w, client->properties, &to_client);
    bit_writer_align(&w);
    Tessera__Client__BaseProperties properties = TESSERA__CLIENT__BASE_PROPERTIES__INIT;
    properties.entity_id = client->entity_id;
    properties.changes.data = (uint8_t *)bit_writer_data(&w);
    properties.changes.len = bit_writer_bytes(&w);
    Tessera__Client__ServerToClient message = TESSERA__CLIENT__SERVER_TO_CLIENT__INIT;
    message.body_case = TESSERA__CLIENT__SERVER_TO_CLIENT__BODY_BASE_PROPERTIES;
    message.base_properties = &properties;
    channel_send_message(client->ch, &message.base);
    bit_writer_close(&w);
}

/* Calls cell method `name` of the player's own cell part from its base. */
static void base_entity_call_cell(proxy *client, const char *name, const entity_state *args) {
    const entity_def_method *method = entity_def_class_find_method(client->cls, ENTITY_DEF_PART_CELL, name);
    if (!method) return;
    bit_writer w;
    bit_writer_init(&w);
    method_call_encode(args, &w);
    Tessera__Cluster__CellCall call = TESSERA__CLUSTER__CELL_CALL__INIT;
    call.caller_id = client->entity_id;
    call.method_id = method->id;
    call.args.data = (uint8_t *)bit_writer_data(&w);
    call.args.len = bit_writer_bytes(&w);
    Tessera__Cluster__CellMessage message = TESSERA__CLUSTER__CELL_MESSAGE__INIT;
    message.body_case = TESSERA__CLUSTER__CELL_MESSAGE__BODY_CALL;
    message.call = &call;
    cell_link_send(client, &message);
    bit_writer_close(&w);
}

/* The demo game's base methods: chat(text) earns a gold coin;
 * relayPing(n) calls the cell's ping(n) from the base, so numbered calls
 * reach the cell on the base's own stream as well as the client's. */
static void base_entity_run(proxy *client, const entity_def_method *method, const entity_state *args) {
    if (strcmp(method->name, "chat") == 0) {
        const char *text = "";
        entity_state_get_string(args, 0, 0, &text, NULL);
        log_debug("entity %" PRIu64 " (account '%s') says: %s", client->entity_id, client->account, text);
        const entity_def_property *gold = entity_def_class_find_property(client->cls, "gold");
        uint64_t coins = 0;
        if (gold && entity_state_get_uint(client->properties, gold->id, 0, &coins) == 0 &&
            entity_state_set_uint(client->properties, gold->id, 0, coins + 1) == 0)
            base_entity_send_properties(client, false);
        return;
    }
    if (strcmp(method->name, "relayPing") == 0) {
        base_entity_call_cell(client, "ping", args);
        return;
    }
    log_info("entity %" PRIu64 ": %s.%s has no implementation in this game: ignored", client->entity_id,
             client->cls->name, method->name);
}

void base_entity_on_call(proxy *client, const Tessera__Client__EntityCall *call) {
    if (call->part == TESSERA__CLIENT__METHOD_PART__METHOD_PART_CELL) {
        /* To the caller's real, which knows what its client sees and checks
         * the rest (cell_message.c). */
        Tessera__Cluster__CellCall relay = TESSERA__CLUSTER__CELL_CALL__INIT;
        relay.caller_id = client->entity_id;
        relay.target_id = call->entity_id;
        relay.method_id = call->method_id;
        relay.args = call->args;
        relay.from_client = true;
        Tessera__Cluster__CellMessage message = TESSERA__CLUSTER__CELL_MESSAGE__INIT;
        message.body_case = TESSERA__CLUSTER__CELL_MESSAGE__BODY_CALL;
        message.call = &relay;
        cell_link_send(client, &message);
        return;
    }
    if (call->part != TESSERA__CLIENT__METHOD_PART__METHOD_PART_BASE) {
        proxy_fail(client, TESSERA__CLIENT__ERROR_CODE__ERROR_NOT_EXPOSED,
                   "only base and cell methods can be called by a client (part %d)", (int)call->part);
        return;
    }
    if (call->entity_id != client->entity_id) {
        proxy_fail(client, TESSERA__CLIENT__ERROR_CODE__ERROR_UNKNOWN_ENTITY,
                   "base method call on entity %" PRIu64 ", which is not the player's", call->entity_id);
        return;
    }
    char reason[256];
    const entity_def_method *method;
    entity_state *args;
    method_call_verdict verdict = method_call_prepare(client->cls, ENTITY_DEF_PART_BASE, call->method_id,
                                                      call->args.data, call->args.len, true, &method, &args, reason,
                                                      sizeof reason);
    if (verdict != METHOD_CALL_OK) {
        proxy_fail(client, (Tessera__Client__ErrorCode)method_call_error_code(verdict), "%s", reason);
        return;
    }
    base_entity_run(client, method, args);
    entity_state_free(args);
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
    proxy *client;
    size_t count = 0;
    while ((client = entity_list_next(app->proxies, &cursor, NULL)) != NULL) {
        if (client->properties == NULL || client->entity_id == 0) continue;
        /* Only what the base holds. */
        entity_state_mask on_base = {{0}};
        for (size_t p = 0; p < client->cls->property_count; p++)
            if (client->cls->properties[p].audience.on_base) entity_state_mask_add(&on_base, (uint16_t)p);
        cJSON *item = cJSON_CreateObject();
        cJSON_AddNumberToObject(item, "id", (double)client->entity_id);
        cJSON_AddStringToObject(item, "account", client->account);
        cJSON_AddStringToObject(item, "class", client->cls->name);
        cJSON_AddItemToObject(item, "properties", entity_state_to_json(client->properties, &on_base));
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
