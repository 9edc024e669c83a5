/* method-call.ts -- a remote call's arguments (and a game event's fields)
 * on the wire, as common/method_call.c has them: every argument in
 * declaration order in property-codec.ts's encoding, then zero bits to a
 * byte. Decoding is exact: every value legal for its type, and nothing but
 * at most 7 zero bits after the last argument. Arguments are given and
 * returned by name. Who may call what (exposed, which entity) is the
 * client's business. */

import { BitReader, BitWriter } from './bits.js';
import type { MethodDefinition } from './definitions.js';
import { DecodeError } from './errors.js';
import { decodeValue, encodeValue } from './property-codec.js';
import { checkValue, type Value } from './values.js';

/* Arguments by name, as a caller gives them (checked by encodeArguments). */
export type ArgumentValues = { readonly [name: string]: unknown };

/* Checks `args` against the method's declared arguments -- every one given,
 * no other name, each value legal for its type (values.ts's checkValue) --
 * and encodes them. Throws a TypeError or RangeError saying which argument
 * is wrong; nothing is encoded then. */
export function encodeArguments(method: MethodDefinition, args: ArgumentValues = {}): Uint8Array {
    for (const name of Object.keys(args)) {
        if (!method.args.some((a) => a.name === name))
            throw new TypeError(
                `${method.name} has no argument '${name}' (it takes ${method.args.map((a) => a.name).join(', ') || 'none'})`,
            );
    }
    const checked: Value[] = method.args.map((arg) => {
        if (!(arg.name in args)) throw new TypeError(`${method.name}: argument '${arg.name}' is missing`);
        return checkValue(arg.type, args[arg.name], `${method.name}(${arg.name})`);
    });
    const w = new BitWriter();
    method.args.forEach((arg, i) => encodeValue(w, arg.type, checked[i]));
    w.align();
    return w.bytes();
}

/* After the last argument: at most 7 bits, all zero. */
function checkPadding(r: BitReader): void {
    const left = r.remaining;
    if (left >= 8 || r.read(left) !== 0 || r.failed) throw new DecodeError('trailing');
}

/* Reads exactly the arguments of `method` from `bytes` (method_call_check
 * and method_call_decode): throws a DecodeError for a value its type does
 * not allow, a truncated call, or bits after the last argument. */
export function decodeArguments(method: MethodDefinition, bytes: Uint8Array): { [name: string]: Value } {
    const r = new BitReader(bytes);
    const out: { [name: string]: Value } = {};
    for (const arg of method.args) out[arg.name] = decodeValue(r, arg.type);
    checkPadding(r);
    return out;
}
