/* index.ts -- the SDK's public surface: TesseraClient and what it hands
 * out, the replay of recorded sessions, and the layers under them (bits,
 * definitions, codecs, the stream decoder, the wire) for tools and tests. */

export {
    TesseraClient,
    isIpLiteral,
    type ClientCallbacks,
    type ClientOptions,
    type ClientState,
    type ClientStats,
    type CloseCause,
    type Correction,
    type Entity,
    type GameEvent,
    type LoginInfo,
    type Restore,
    type ServerError,
    type Teleport,
    type WebSocketConstructor,
    type WebSocketLike,
} from './client.js';
export { replayFrames, splitFrames, type ReplayEntity, type ReplayResult } from './replay.js';
export { BitReader, BitWriter, bitsFor } from './bits.js';
export { blake2b, toHex } from './blake2b.js';
export {
    Definitions,
    DETAILS,
    FLAGS,
    KINDS,
    PARTS,
    findMethod,
    findProperty,
    parseDefinitionDocuments,
    parseDefinitions,
    quantizationBits,
    zeroValue,
    type ArgumentDefinition,
    type Audience,
    type AudienceMasks,
    type ClassDefinition,
    type Detail,
    type FieldDefinition,
    type Flag,
    type JsonValue,
    type Kind,
    type MethodDefinition,
    type MethodPart,
    type PropertyDefinition,
    type StructDefinition,
    type TypeDefinition,
} from './definitions.js';
export { CallError, DecodeError, DefinitionsError, type CallErrorCode, type DecodeErrorCode } from './errors.js';
export { decodeArguments, encodeArguments, type ArgumentValues } from './method-call.js';
export {
    decodeChangeList,
    decodeValue,
    dequantize,
    encodeChangeList,
    encodeValue,
    quantize,
    quantizeMax,
    type PropertyChange,
} from './property-codec.js';
export {
    ERROR_NAMES,
    PROTOCOL_VERSION,
    decodeClientToServer,
    decodeServerToClient,
    encodeClientToServer,
    encodeServerToClient,
    errorName,
} from './protocol.js';
export { EntityState } from './state.js';
export { aliasBits, decodeStream, type StreamHandler, type StreamStats } from './stream.js';
export { checkValue, integerToJson, valueFromDefault, valueToJson, valuesEqual, type JsonView, type Value } from './values.js';
export {
    createVolatileConfig,
    decodeVolatile,
    encodeVolatile,
    newTrack,
    skipVolatile,
    type VolatileConfig,
    type VolatilePosition,
    type VolatileTrack,
} from './volatile-codec.js';
