/* errors.ts -- the errors the SDK throws: input from the server that breaks
 * a rule (DecodeError: the client closes, as the C SDK does), definitions
 * that do not load (DefinitionsError), and a call refused before anything
 * was sent (CallError). Each carries a stable `code` to branch on; the
 * messages follow the C SDK's strerror texts. */

/* Why a value, change list, record or stream was refused. */
export type DecodeErrorCode =
    | 'value_truncated' /* PROPERTY_CODEC_ERROR_TRUNCATED */
    | 'range' /* PROPERTY_CODEC_ERROR_RANGE */
    | 'invalid' /* PROPERTY_CODEC_ERROR_INVALID */
    | 'unexpected_property' /* PROPERTY_CODEC_ERROR_UNEXPECTED_PROPERTY */
    | 'malformed_change_list' /* PROPERTY_CODEC_ERROR_MALFORMED */
    | 'trailing' /* METHOD_CALL_ERROR_TRAILING, and bits after a base change list */
    | 'stream_truncated' /* REPLICATION_ERROR_TRUNCATED */
    | 'reserved_kind' /* REPLICATION_ERROR_KIND */
    | 'malformed_record' /* REPLICATION_ERROR_MALFORMED */
    | 'wrong_class' /* REPLICATION_ERROR_CLASS */
    | 'move_truncated' /* VOLATILE_CODEC_ERROR_TRUNCATED */
    | 'move_range' /* VOLATILE_CODEC_ERROR_RANGE */
    | 'move_no_base' /* VOLATILE_CODEC_ERROR_NO_BASE */;

const decodeMessages: Record<DecodeErrorCode, string> = {
    value_truncated: 'input ends inside a value',
    range: "value outside its type's range",
    invalid: 'string is not UTF-8 without NUL bytes',
    unexpected_property: 'unknown or unexpected property',
    malformed_change_list: 'malformed change list',
    trailing: 'bytes after the last argument',
    stream_truncated: 'stream ends inside a record or before END',
    reserved_kind: 'reserved record kind',
    malformed_record: 'malformed record',
    wrong_class: 'entity state of the wrong class',
    move_truncated: 'truncated',
    move_range: 'position or yaw outside the world',
    move_no_base: 'a delta before any absolute position',
};

export class DecodeError extends Error {
    readonly code: DecodeErrorCode;
    constructor(code: DecodeErrorCode, message?: string) {
        super(message ?? decodeMessages[code]);
        this.name = 'DecodeError';
        this.code = code;
    }
}

/* Definitions that do not load: the message names the place and the
 * problem, as entity_def.c's do ("login reply: Avatar.level: ..."). */
export class DefinitionsError extends Error {
    constructor(message: string) {
        super(message);
        this.name = 'DefinitionsError';
    }
}

/* Why TesseraClient.call refused a call (nothing was sent). */
export type CallErrorCode =
    | 'not_in_world' /* not logged in, or closing */
    | 'bad_part' /* part is not "base" or "cell" */
    | 'unknown_entity' /* not in the view (or a base method on another entity) */
    | 'unknown_method' /* the class has no such method in that part */
    | 'not_exposed' /* the method exists but clients may not call it */
    | 'bad_arguments' /* a missing, unknown, mistyped or out-of-range argument */
    | 'too_large'; /* the call does not fit the login reply's max_frame_bytes */

export class CallError extends Error {
    readonly code: CallErrorCode;
    constructor(code: CallErrorCode, message: string) {
        super(message);
        this.name = 'CallError';
        this.code = code;
    }
}
