/* blake2b.ts -- BLAKE2b (RFC 7693), unkeyed, any digest length 1..64: what
 * libsodium's crypto_generichash computes, so the client can check the
 * login reply's definitions_digest (BLAKE2b-256 of the canonical form,
 * definitions.ts) without a native library. Words are bigints: the inputs
 * are a few kilobytes once per login, so clarity wins over speed. */

const MASK_64 = (1n << 64n) - 1n;

const IV: readonly bigint[] = [
    0x6a09e667f3bcc908n,
    0xbb67ae8584caa73bn,
    0x3c6ef372fe94f82bn,
    0xa54ff53a5f1d36f1n,
    0x510e527fade682d1n,
    0x9b05688c2b3e6c1fn,
    0x1f83d9abfb41bd6bn,
    0x5be0cd19137e2179n,
];

/* The message word schedule of each of the 12 rounds (rounds 10 and 11
 * repeat 0 and 1). */
const SIGMA: readonly (readonly number[])[] = [
    [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15],
    [14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3],
    [11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4],
    [7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8],
    [9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13],
    [2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9],
    [12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11],
    [13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10],
    [6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5],
    [10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0],
];

const BLOCK_BYTES = 128;

function rotateRight(x: bigint, n: bigint): bigint {
    return ((x >> n) | (x << (64n - n))) & MASK_64;
}

function compress(h: bigint[], block: Uint8Array, counter: bigint, last: boolean): void {
    const m: bigint[] = [];
    for (let i = 0; i < 16; i++) {
        let word = 0n;
        for (let b = 7; b >= 0; b--) word = (word << 8n) | BigInt(block[i * 8 + b]);
        m.push(word);
    }
    const v = [...h, ...IV];
    v[12] ^= counter & MASK_64;
    v[13] ^= counter >> 64n;
    if (last) v[14] ^= MASK_64;
    const mix = (a: number, b: number, c: number, d: number, x: bigint, y: bigint): void => {
        v[a] = (v[a] + v[b] + x) & MASK_64;
        v[d] = rotateRight(v[d] ^ v[a], 32n);
        v[c] = (v[c] + v[d]) & MASK_64;
        v[b] = rotateRight(v[b] ^ v[c], 24n);
        v[a] = (v[a] + v[b] + y) & MASK_64;
        v[d] = rotateRight(v[d] ^ v[a], 16n);
        v[c] = (v[c] + v[d]) & MASK_64;
        v[b] = rotateRight(v[b] ^ v[c], 63n);
    };
    for (let round = 0; round < 12; round++) {
        const s = SIGMA[round % 10];
        mix(0, 4, 8, 12, m[s[0]], m[s[1]]);
        mix(1, 5, 9, 13, m[s[2]], m[s[3]]);
        mix(2, 6, 10, 14, m[s[4]], m[s[5]]);
        mix(3, 7, 11, 15, m[s[6]], m[s[7]]);
        mix(0, 5, 10, 15, m[s[8]], m[s[9]]);
        mix(1, 6, 11, 12, m[s[10]], m[s[11]]);
        mix(2, 7, 8, 13, m[s[12]], m[s[13]]);
        mix(3, 4, 9, 14, m[s[14]], m[s[15]]);
    }
    for (let i = 0; i < 8; i++) h[i] ^= v[i] ^ v[i + 8];
}

/* The unkeyed BLAKE2b digest of `data`, `outputBytes` (1..64) long. */
export function blake2b(data: Uint8Array, outputBytes: number): Uint8Array {
    if (!Number.isInteger(outputBytes) || outputBytes < 1 || outputBytes > 64)
        throw new RangeError('BLAKE2b digests are 1..64 bytes');
    const h = [...IV];
    h[0] ^= 0x01010000n ^ BigInt(outputBytes); /* depth 1, fanout 1, no key */
    let offset = 0;
    /* Every full block but the last goes now; the last (full or partial,
     * possibly empty) is compressed with the final flag. */
    while (data.length - offset > BLOCK_BYTES) {
        compress(h, data.subarray(offset, offset + BLOCK_BYTES), BigInt(offset + BLOCK_BYTES), false);
        offset += BLOCK_BYTES;
    }
    const last = new Uint8Array(BLOCK_BYTES);
    last.set(data.subarray(offset));
    compress(h, last, BigInt(data.length), true);
    const out = new Uint8Array(64);
    for (let i = 0; i < 8; i++) {
        for (let b = 0; b < 8; b++) out[i * 8 + b] = Number((h[i] >> BigInt(8 * b)) & 0xffn);
    }
    return out.slice(0, outputBytes);
}

export function toHex(bytes: Uint8Array): string {
    let text = '';
    for (const byte of bytes) text += byte.toString(16).padStart(2, '0');
    return text;
}
