/* method_call.c -- a remote call's arguments as the byte-padded encoding of
 * the state of the method's argument class; the exact-length check that
 * refuses anything but the declared types. */
#include "method_call.h"

#include <stdio.h>

#include "client.pb-c.h"

#include "property_codec.h"

entity_state *method_call_args_create(const entity_def_method *method) {
    return entity_state_create(&method->args_class);
}

void method_call_encode(const entity_state *args, bit_writer *w) {
    entity_state_encode_all(args, w);
    bit_writer_align(w);
}

/* After the last argument: at most 7 bits, all zero. */
static int method_call__check_padding(bit_reader *r) {
    size_t left = bit_reader_remaining(r);
    uint64_t pad;
    if (left >= 8 || bit_reader_read(r, (unsigned)left, &pad) != 0 || pad != 0) return METHOD_CALL_ERROR_TRAILING;
    return 0;
}

int method_call_check(const entity_def_method *method, const uint8_t *data, size_t length) {
    bit_reader r;
    bit_reader_init(&r, data, length);
    for (size_t a = 0; a < method->arg_count; a++) {
        int rc = property_codec_check(&r, &method->args[a].type);
        if (rc != 0) return rc;
    }
    return method_call__check_padding(&r);
}

int method_call_decode(entity_state *args, const uint8_t *data, size_t length) {
    bit_reader r;
    bit_reader_init(&r, data, length);
    /* Check the padding on a copy first: decode_all is all or nothing, so
     * a call with trailing bytes must be refused before it writes. */
    bit_reader probe = r;
    const entity_def_class *cls = entity_state_class(args);
    for (size_t a = 0; a < cls->property_count; a++) {
        int rc = property_codec_check(&probe, &cls->properties[a].type);
        if (rc != 0) return rc;
    }
    int rc = method_call__check_padding(&probe);
    if (rc != 0) return rc;
    return entity_state_decode_all(args, &r);
}

const char *method_call_strerror(int code) {
    if (code == METHOD_CALL_ERROR_TRAILING) return "bytes after the last argument";
    return property_codec_strerror(code);
}

method_call_verdict method_call_prepare(const entity_def_class *cls, entity_def_part part, uint32_t method_id,
                                        const uint8_t *args, size_t length, bool from_client,
                                        const entity_def_method **method, entity_state **decoded, char *reason,
                                        size_t reason_size) {
    *method = NULL;
    *decoded = NULL;
    if (method_id >= cls->method_count[part]) {
        snprintf(reason, reason_size, "%s method %u of %s does not exist (it has %zu)", entity_def_part_name(part),
                 method_id, cls->name, cls->method_count[part]);
        return METHOD_CALL_NO_SUCH_METHOD;
    }
    const entity_def_method *m = &cls->methods[part][method_id];
    if (from_client && !m->exposed) {
        snprintf(reason, reason_size, "%s.%s is not exposed to clients", cls->name, m->name);
        return METHOD_CALL_NOT_EXPOSED;
    }
    entity_state *state = method_call_args_create(m);
    int rc = method_call_decode(state, args, length);
    if (rc != 0) {
        snprintf(reason, reason_size, "%s.%s called with arguments that are not its declared types: %s", cls->name,
                 m->name, method_call_strerror(rc));
        entity_state_free(state);
        return METHOD_CALL_BAD_ARGUMENTS;
    }
    *method = m;
    *decoded = state;
    return METHOD_CALL_OK;
}

int method_call_error_code(method_call_verdict verdict) {
    switch (verdict) {
        case METHOD_CALL_OK:
            return TESSERA__CLIENT__ERROR_CODE__ERROR_NONE;
        case METHOD_CALL_NO_SUCH_METHOD:
            return TESSERA__CLIENT__ERROR_CODE__ERROR_INVALID_ARGUMENT;
        case METHOD_CALL_NOT_EXPOSED:
            return TESSERA__CLIENT__ERROR_CODE__ERROR_NOT_EXPOSED;
        case METHOD_CALL_BAD_ARGUMENTS:
            return TESSERA__CLIENT__ERROR_CODE__ERROR_BAD_ARGUMENTS;
    }
    return TESSERA__CLIENT__ERROR_CODE__ERROR_INVALID_ARGUMENT;
}
