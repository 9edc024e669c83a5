/* fuzz_client_message.c -- fuzzes what a baseapp decodes from a client:
 * the byte stream cut into frames (common/frame.c, at the baseapp's default
 * client_max_frame_bytes), each frame unpacked as a ClientToServer into a
 * decode arena exactly as baseapp/client_link.c's on_frame does, then the
 * checks the baseapp makes of what it holds: the account name of a login,
 * reconnect or token login (account_name.c), and a method call's arguments
 * against the demo definitions, for a base method (proxy.c) and a cell
 * method (cell_message.c), with method_call_prepare.
 *
 * Checks: a message that unpacks packs again and that packing is stable
 * (pack, unpack, pack gives the same bytes); arguments that prepare OK
 * encode again in no more bytes, and those are accepted too; no crash, no
 * leak. */
#include <stdlib.h>
#include <string.h>

#include "account_name.h"
#include "arena.h"
#include "client.pb-c.h"
#include "entity_state.h"
#include "fuzz_support.h"
#include "log.h"
#include "method_call.h"

/* baseapp_settings.c's default client_max_frame_bytes. */
#define FUZZ_CLIENT_MAX_FRAME_BYTES 65536

/* One method call, as the baseapp (base part) or a cellapp (cell part)
 * would check it for a player of class `cls`. */
static void fuzz_client_message_call(const entity_def_class *cls, entity_def_part part,
                                     const Tessera__Client__EntityCall *call) {
    char reason[256];
    const entity_def_method *method;
    entity_state *args;
    method_call_verdict verdict = method_call_prepare(cls, part, call->method_id, call->args.data, call->args.len, true,
                                                      &method, &args, reason, sizeof reason);
    if (verdict != METHOD_CALL_OK) return;
    bit_writer w;
    bit_writer_init(&w);
    method_call_encode(args, &w);
    /* Shortest uvars on the way out, any on the way in (bit_stream.c). */
    fuzz_check(bit_writer_bytes(&w) <= call->args.len, "accepted arguments encode longer than received");
    fuzz_check(method_call_check(method, bit_writer_data(&w), bit_writer_bytes(&w)) == 0,
               "accepted arguments, encoded again, are refused");
    bit_writer_close(&w);
    entity_state_free(args);
}

static void fuzz_client_message_frame(const uint8_t *frame, size_t length, arena *decode) {
    arena_mark mark = arena_save(decode);
    Tessera__Client__ClientToServer *message =
        tessera__client__client_to_server__unpack(arena_protobuf(decode), length, frame);
    if (message) {
        fuzz_check_repack(&message->base);
        const entity_def_registry *definitions = fuzz_definitions();
        switch (message->body_case) {
            case TESSERA__CLIENT__CLIENT_TO_SERVER__BODY_LOGIN:
                (void)account_name_check(message->login->account);
                break;
            case TESSERA__CLIENT__CLIENT_TO_SERVER__BODY_RECONNECT:
                (void)account_name_check(message->reconnect->account);
                break;
            case TESSERA__CLIENT__CLIENT_TO_SERVER__BODY_TOKEN_LOGIN:
                (void)account_name_check(message->token_login->account);
                break;
            case TESSERA__CLIENT__CLIENT_TO_SERVER__BODY_CALL: {
                size_t classes = entity_def_registry_class_count(definitions);
                const entity_def_class *cls =
                    entity_def_registry_class(definitions, (uint16_t)(message->call->entity_id % classes));
                fuzz_check(cls != NULL, "a class id below the count names no class");
                fuzz_client_message_call(cls, ENTITY_DEF_PART_BASE, message->call);
                fuzz_client_message_call(cls, ENTITY_DEF_PART_CELL, message->call);
                break;
            }
            default:
                break;
        }
    }
    arena_release(decode, mark);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_frames(data, size, FUZZ_CLIENT_MAX_FRAME_BYTES, fuzz_client_message_frame);
    return 0;
}
