/* base_entity.c -- the base part of a player's entity on its baseapp: its
 * properties (an entity_state of the player's class, of which the base
 * holds the on_base ones), the BASE_AND_CLIENT ones it sends its own
 * client, the starting values of the cell part it asks a cellapp for, the
 * client's method calls (base methods run here, cell methods are relayed to
 * the cell, which checks what only it can), and the state dump. What a
 * base method does is the game's (base_game.c runs its body).
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
    /* Never before the client is in the world: a BaseProperties ahead of
     * its login reply would break the login, and the reply's own full
     * send carries every property anyway. */
    if (player->properties == NULL || !player->link || player->link->state != CLIENT_LINK_IN_WORLD) return;
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
    method_call_verdict verdict =
        method_call_prepare(player->cls, ENTITY_DEF_PART_BASE, call->method_id, call->args.data, call->args.len, true,
                            &method, &args, reason, sizeof reason);
    if (verdict != METHOD_CALL_OK) {
        client_link_fail(player->link, (Tessera__Client__ErrorCode)method_call_error_code(verdict), "%s", reason);
        return;
    }
    base_game_call(player->app->game, player, method, args, player->entity_id);
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
