/* stream.ts -- the entity stream of a ViewUpdate (common/replication.c's
 * decoder): records naming entities by per-client alias, then END. It owns
 * the record layer; change lists are property-codec.ts's, MOVE bodies
 * volatile-codec.ts's, and the entity table the caller's (StreamHandler).
 *
 *   kind     2 bits   0 MOVE, 1 UPDATE, 2 ENTER, 3 EXT
 *   MOVE     kind, alias (A bits), one volatile record (self-delimiting)
 *   UPDATE   kind, alias, length (uvar: bits of the change list), change list
 *   ENTER    kind, alias, length (uvar: bits to the end of the record),
 *            owner (1 bit), class id (C bits), entity id (uvar, not 0),
 *            change list of every property of the audience
 *   EXT      kind, 2-bit extended kind: 0 END (then only zero bits to the
 *            byte boundary), 1 LEAVE then alias, 2 and 3 reserved
 *
 * A = aliasBits(max_aliases); C = bitsFor(class count - 1). The audience a
 * record may carry is OWN for the owned entity and OTHERS_NEAR (the widest)
 * for another. An UPDATE or MOVE for an unknown alias (a stale one) is
 * skipped, by its length or by reading the record. Each record is checked
 * whole before any of it is applied; an error stops decoding with the
 * records before it applied, the reader failed, and a DecodeError thrown
 * (the client then closes).
 */

import { BitReader, bitsFor } from './bits.js';
import type { ClassDefinition, Definitions } from './definitions.js';
import { DecodeError } from './errors.js';
import { decodeChangeList } from './property-codec.js';
import type { EntityState } from './state.js';

const KIND_MOVE = 0;
const KIND_UPDATE = 1;
const KIND_EXT = 3;
const EXT_END = 0;
const EXT_LEAVE = 1;

/* Bits of an alias for an alias table of `maxAliases` (replication_alias_bits). */
export function aliasBits(maxAliases: number): number {
    return maxAliases > 1 ? bitsFor(maxAliases - 1) : 0;
}

/* What the decoder asks of the entity table. Callbacks fire only for
 * records that passed every check, in stream order. */
export interface StreamHandler {
    /* An ENTER: a fresh state of `cls` (its defaults) to fill, or null to
     * discard the record. */
    enter(alias: number, entityId: bigint, cls: ClassDefinition, isOwner: boolean): EntityState | null;
    /* An UPDATE: the state `alias` names and whether it is owned, or null
     * for an unknown alias (the record is skipped). */
    find(alias: number): { state: EntityState; isOwner: boolean } | null;
    /* A MOVE: read exactly one volatile record from `reader` (for an unknown
     * alias, read and drop it). True when applied, false when discarded;
     * throws a DecodeError for a broken record. */
    move(alias: number, reader: BitReader): boolean;
    /* A LEAVE (possibly of an unknown alias). */
    leave(alias: number): void;
    /* After an ENTER or UPDATE was applied: the ids whose value changed. */
    changed(alias: number, state: EntityState, changedIds: number[]): void;
}

export interface StreamStats {
    enters: number;
    updates: number;
    moves: number;
    leaves: number; /* seen */
    discarded: number; /* skipped: unknown alias, refused enter */
}

function fail(r: BitReader, code: 'stream_truncated' | 'reserved_kind' | 'malformed_record' | 'wrong_class'): never {
    r.fail();
    throw new DecodeError(code);
}

/* Runs `decode` on `r`; a DecodeError leaves `r` failed as well. */
function checked<T>(r: BitReader, decode: () => T): T {
    try {
        return decode();
    } catch (error) {
        r.fail();
        throw error;
    }
}

function decodeBody(
    r: BitReader,
    definitions: Definitions,
    kind: number,
    alias: number,
    handler: StreamHandler,
    stats: StreamStats,
): void {
    const length = r.readUvar();
    if (r.failed || length > BigInt(r.remaining)) fail(r, 'stream_truncated');
    const bits = Number(length);
    const end = r.position + bits;

    if (kind === KIND_UPDATE) {
        const found = handler.find(alias);
        if (!found) {
            r.skip(bits);
            stats.discarded++;
            return;
        }
        const cls = found.state.cls;
        const accept = found.isOwner ? cls.masks.own : cls.masks.othersNear;
        const check = r.clone();
        const changes = checked(r, () => decodeChangeList(check, cls, accept));
        if (check.position !== end) fail(r, 'malformed_record');
        r.adopt(check);
        const changed = found.state.apply(changes);
        stats.updates++;
        handler.changed(alias, found.state, changed);
        return;
    }

    /* ENTER */
    const check = r.clone();
    const owner = check.readBool();
    const classId = check.read(definitions.classBits);
    if (check.failed) fail(r, 'malformed_record');
    if (classId >= definitions.classes.length) fail(r, 'malformed_record');
    const entityId = check.readUvar();
    if (check.failed || entityId === 0n) fail(r, 'malformed_record');
    const cls = definitions.classes[classId];
    const accept = owner ? cls.masks.own : cls.masks.othersNear;
    const changes = checked(r, () => decodeChangeList(check, cls, accept));
    if (check.position !== end) fail(r, 'malformed_record');
    const state = handler.enter(alias, entityId, cls, owner);
    if (!state) {
        r.skip(bits);
        stats.discarded++;
        return;
    }
    if (state.cls !== cls) fail(r, 'wrong_class');
    const changed = state.apply(changes);
    r.adopt(check);
    stats.enters++;
    handler.changed(alias, state, changed);
}

/* Reads a stream up to its END and applies it through `handler`. Returns
 * the counts; throws a DecodeError on the first broken record. */
export function decodeStream(
    r: BitReader,
    definitions: Definitions,
    aliasWidth: number,
    handler: StreamHandler,
): StreamStats {
    const stats: StreamStats = { enters: 0, updates: 0, moves: 0, leaves: 0, discarded: 0 };
    for (;;) {
        const kind = r.read(2);
        if (r.failed) throw new DecodeError('stream_truncated');
        if (kind === KIND_EXT) {
            const ext = r.read(2);
            if (r.failed) throw new DecodeError('stream_truncated');
            if (ext === EXT_LEAVE) {
                const alias = r.read(aliasWidth);
                if (r.failed) throw new DecodeError('stream_truncated');
                stats.leaves++;
                handler.leave(alias);
                continue;
            }
            if (ext !== EXT_END) fail(r, 'reserved_kind');
            /* Only zero padding to the byte boundary may follow. */
            const left = r.remaining;
            if (left >= 8 || r.read(left) !== 0 || r.failed) fail(r, 'malformed_record');
            return stats;
        }
        const alias = r.read(aliasWidth);
        if (r.failed) throw new DecodeError('stream_truncated');
        if (kind === KIND_MOVE) {
            if (checked(r, () => handler.move(alias, r))) stats.moves++;
            else stats.discarded++;
            continue;
        }
        decodeBody(r, definitions, kind, alias, handler, stats);
    }
}
