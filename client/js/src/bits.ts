/* bits.ts -- the bit stream under every Tessera wire value: a reader that
 * never reads past its input and a writer, bit for bit common/bit_stream.c.
 *
 * It owns the bit order and the variable-length integers and nothing above
 * them (property_codec.ts maps value types onto it).
 *
 * Bit order (LSB-first): bit i of the stream is bit (i % 8) of byte (i / 8),
 * bit 0 the least significant; a field of n bits is written least
 * significant bit first. A uvar is a 4-bit prefix k, then the value in
 * 4 * (k + 1) bits (the writer picks the smallest k; a reader accepts a
 * longer form). An svar is zigzag-mapped ((v << 1) ^ (v >> 63)), then a
 * uvar. Floats and doubles are their IEEE 754 bits as 32- and 64-bit fields.
 *
 * Reading fails the way the C reader does: a read past the end returns 0
 * and leaves the reader failed, so every later read fails too and a caller
 * may check once at the end of a record. Fields of up to 53 bits read as
 * numbers; wider ones (up to 64) as bigints.
 */

const TWO_TO_32 = 4294967296;

/* Bits needed to send any of 0..max: 0 for 0, else floor(log2(max)) + 1
 * (property_codec_bits_for). */
export function bitsFor(max: number | bigint): number {
    let value = BigInt(max);
    let bits = 0;
    while (value > 0n) {
        value >>= 1n;
        bits++;
    }
    return bits;
}

/* Scratch for the IEEE 754 conversions. */
const floatView = new DataView(new ArrayBuffer(8));

export class BitReader {
    private readonly data: Uint8Array;
    private readonly size: number; /* bits of input */
    private pos = 0;
    private failedFlag = false;

    /* Reads `data` whole, or only its first `bits` bits. */
    constructor(data: Uint8Array, bits?: number) {
        this.data = data;
        this.size = bits === undefined ? data.length * 8 : Math.min(bits, data.length * 8);
    }

    /* A copy at the same position: reading it leaves this one where it is. */
    clone(): BitReader {
        const copy = new BitReader(this.data, this.size);
        copy.pos = this.pos;
        copy.failedFlag = this.failedFlag;
        return copy;
    }

    /* Moves this reader to where `other` (a clone of it) stands. */
    adopt(other: BitReader): void {
        this.pos = other.pos;
        this.failedFlag = other.failedFlag;
    }

    get position(): number {
        return this.pos;
    }

    /* Bits left, 0 once failed. */
    get remaining(): number {
        return this.failedFlag ? 0 : this.size - this.pos;
    }

    get failed(): boolean {
        return this.failedFlag;
    }

    /* For a caller that found the content wrong: later reads fail. */
    fail(): void {
        this.failedFlag = true;
    }

    private need(bits: number): boolean {
        if (this.failedFlag || this.size - this.pos < bits) {
            this.failedFlag = true;
            return false;
        }
        return true;
    }

    /* Takes `bits` (0..32) bits known to be there. */
    private take32(bits: number): number {
        let value = 0;
        let shift = 0;
        let left = bits;
        while (left > 0) {
            const byte = this.data[this.pos >> 3];
            const offset = this.pos & 7;
            const count = Math.min(8 - offset, left);
            value += ((byte >> offset) & ((1 << count) - 1)) * 2 ** shift;
            shift += count;
            left -= count;
            this.pos += count;
        }
        return value;
    }

    /* An unsigned field of 0..53 bits (0 on failure). */
    read(bits: number): number {
        if (!Number.isInteger(bits) || bits < 0 || bits > 53) throw new RangeError(`cannot read ${bits} bits as a number`);
        if (!this.need(bits)) return 0;
        if (bits <= 32) return this.take32(bits);
        const low = this.take32(32);
        return low + this.take32(bits - 32) * TWO_TO_32;
    }

    /* An unsigned field of 0..64 bits (0n on failure). */
    readBig(bits: number): bigint {
        if (!Number.isInteger(bits) || bits < 0 || bits > 64) throw new RangeError(`cannot read ${bits} bits into 64`);
        if (!this.need(bits)) return 0n;
        if (bits <= 32) return BigInt(this.take32(bits));
        const low = this.take32(32);
        return BigInt(low) | (BigInt(this.take32(bits - 32)) << 32n);
    }

    readBool(): boolean {
        return this.read(1) !== 0;
    }

    readUvar(): bigint {
        if (!this.need(4)) return 0n;
        const prefix = this.take32(4);
        return this.readBig(4 * (prefix + 1));
    }

    readSvar(): bigint {
        const u = this.readUvar();
        return BigInt.asIntN(64, (u >> 1n) ^ (0n - (u & 1n)));
    }

    /* Any bit pattern, NaN and infinities included: checking is the caller's. */
    readFloat(): number {
        const bits = this.read(32);
        floatView.setUint32(0, bits, true);
        return floatView.getFloat32(0, true);
    }

    readDouble(): number {
        if (!this.need(64)) return 0;
        floatView.setUint32(0, this.take32(32), true);
        floatView.setUint32(4, this.take32(32), true);
        return floatView.getFloat64(0, true);
    }

    /* `length` bytes, or null (nothing taken, the reader failed). */
    readBytes(length: number): Uint8Array | null {
        if (this.failedFlag || length > Math.floor((this.size - this.pos) / 8)) {
            this.failedFlag = true;
            return null;
        }
        if ((this.pos & 7) === 0) {
            const start = this.pos >> 3;
            this.pos += length * 8;
            return this.data.slice(start, start + length);
        }
        const out = new Uint8Array(length);
        for (let i = 0; i < length; i++) out[i] = this.take32(8);
        return out;
    }

    skip(bits: number): boolean {
        if (!this.need(bits)) return false;
        this.pos += bits;
        return true;
    }

    /* Skips to the next byte boundary. */
    align(): boolean {
        const offset = this.pos & 7;
        return this.skip(offset !== 0 ? 8 - offset : 0);
    }
}

export class BitWriter {
    private buffer = new Uint8Array(64);
    private bits = 0;

    /* Bits written. */
    get bitLength(): number {
        return this.bits;
    }

    /* The written bytes (the unused high bits of the last one zero), a copy. */
    bytes(): Uint8Array {
        return this.buffer.slice(0, (this.bits + 7) >> 3);
    }

    private room(bits: number): void {
        const need = ((this.bits + bits + 7) >> 3) + 1;
        if (need <= this.buffer.length) return;
        let capacity = this.buffer.length * 2;
        while (capacity < need) capacity *= 2;
        const grown = new Uint8Array(capacity);
        grown.set(this.buffer);
        this.buffer = grown;
    }

    /* Appends `bits` (0..32) bits of `value`, which fits them. */
    private put32(value: number, bits: number): void {
        let rest = value;
        let left = bits;
        while (left > 0) {
            const offset = this.bits & 7;
            const count = Math.min(8 - offset, left);
            const chunk = rest % (1 << count);
            this.buffer[this.bits >> 3] |= chunk << offset;
            rest = Math.floor(rest / (1 << count));
            left -= count;
            this.bits += count;
        }
    }

    /* Appends the low `bits` (0..64) bits of `value`. A value wider than its
     * field is a caller bug: it throws rather than being cut. */
    write(value: number | bigint, bits: number): void {
        if (!Number.isInteger(bits) || bits < 0 || bits > 64) throw new RangeError(`cannot write ${bits} bits`);
        const big = BigInt(value);
        if (big < 0n || (bits < 64 ? big >> BigInt(bits) !== 0n : big >> 64n !== 0n))
            throw new RangeError(`value ${big} does not fit in ${bits} bits`);
        this.room(bits);
        if (bits <= 32) {
            this.put32(Number(big), bits);
            return;
        }
        this.put32(Number(big & 0xffffffffn), 32);
        this.put32(Number(big >> 32n), bits - 32);
    }

    writeBool(value: boolean): void {
        this.write(value ? 1 : 0, 1);
    }

    writeUvar(value: number | bigint): void {
        const big = BigInt(value);
        if (big < 0n || big >> 64n !== 0n) throw new RangeError(`uvar ${big} is not a uint64`);
        let nibbles = 1;
        while (nibbles < 16 && big >> BigInt(4 * nibbles) !== 0n) nibbles++;
        this.write(nibbles - 1, 4);
        this.write(big, 4 * nibbles);
    }

    writeSvar(value: number | bigint): void {
        const big = BigInt.asIntN(64, BigInt(value));
        this.writeUvar(BigInt.asUintN(64, (big << 1n) ^ (big < 0n ? -1n : 0n)));
    }

    writeFloat(value: number): void {
        floatView.setFloat32(0, value, true);
        this.write(floatView.getUint32(0, true), 32);
    }

    writeDouble(value: number): void {
        floatView.setFloat64(0, value, true);
        this.write(floatView.getUint32(0, true), 32);
        this.write(floatView.getUint32(4, true), 32);
    }

    writeBytes(bytes: Uint8Array): void {
        this.room(bytes.length * 8);
        for (const byte of bytes) this.put32(byte, 8);
    }

    /* Zero bits up to the next byte boundary. */
    align(): void {
        const offset = this.bits & 7;
        if (offset !== 0) this.bits += 8 - offset;
    }
}
