// bits.test.mjs -- the bit reader and writer against hand-computed bit
// patterns (common/bit_stream.c's order: LSB-first; uvar/svar).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Tessera, bytesOf } from '../test-support/helpers.mjs';

const { BitReader, BitWriter, bitsFor } = Tessera;

test('fields are read least significant bit first, across bytes', () => {
    // 0xB4 = 1011 0100: the first 3 bits are 100 (4), the next 5 are 10110 (22).
    const r = new BitReader(Uint8Array.from([0xb4, 0xcd, 0xab]));
    assert.equal(r.read(3), 4);
    assert.equal(r.read(5), 22);
    // A 12-bit field over a byte boundary: 0xCD then the low nibble of 0xAB.
    assert.equal(r.read(12), 0xbcd);
    assert.equal(r.position, 20);
    assert.equal(r.remaining, 4);
    assert.equal(r.read(4), 0xa);
    assert.equal(r.failed, false);
});

test('a byte-aligned 32-bit field is its little-endian bytes; 64-bit fields as bigints', () => {
    const r = new BitReader(Uint8Array.from([0x78, 0x56, 0x34, 0x12, 1, 2, 3, 4, 5, 6, 7, 0x88]));
    assert.equal(r.read(32), 0x12345678);
    assert.equal(r.readBig(64), 0x8807060504030201n);
});

test('a 53-bit field reads exactly as a number', () => {
    const r = new BitReader(Uint8Array.from([0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x1f]));
    assert.equal(r.read(53), 2 ** 53 - 1);
});

test('reading past the end fails, returns 0, and stays failed', () => {
    const r = new BitReader(Uint8Array.from([0xff]));
    assert.equal(r.read(6), 63);
    assert.equal(r.read(3), 0);
    assert.equal(r.failed, true);
    assert.equal(r.remaining, 0);
    assert.equal(r.read(1), 0, 'a read after a failure fails even with bits left');
    assert.equal(r.readBytes(0), null);
    assert.equal(new BitReader(new Uint8Array(0)).readUvar(), 0n);
});

test('a reader limited to some bits stops there', () => {
    const r = new BitReader(Uint8Array.from([0xff, 0xff]), 10);
    assert.equal(r.read(10), 1023);
    r.read(1);
    assert.equal(r.failed, true);
});

test('uvar: 4-bit prefix k, then the value in 4(k+1) bits', () => {
    // 0 and 15 take 8 bits: prefix 0 then the nibble.
    assert.deepEqual(bytesOf((w) => w.writeUvar(0)), Uint8Array.from([0x00]));
    assert.deepEqual(bytesOf((w) => w.writeUvar(15)), Uint8Array.from([0xf0]));
    // 16 takes 12 bits: prefix 1, then 0x10 in 8 bits -> 0001 | 0000, 0001.
    assert.deepEqual(bytesOf((w) => w.writeUvar(16)), Uint8Array.from([0x01, 0x01]));
    // 255: prefix 1, 0xff.
    assert.deepEqual(bytesOf((w) => w.writeUvar(255)), Uint8Array.from([0xf1, 0x0f]));
    // 2^64 - 1: prefix 15 and 64 ones, 68 bits.
    const max = bytesOf((w) => w.writeUvar(2n ** 64n - 1n));
    assert.deepEqual(max, Uint8Array.from([0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x0f]));
    assert.equal(new BitReader(max).readUvar(), 2n ** 64n - 1n);
    for (const [bytes, value] of [
        [[0x00], 0n],
        [[0xf0], 15n],
        [[0x01, 0x01], 16n],
        [[0xf1, 0x0f], 255n],
    ])
        assert.equal(new BitReader(Uint8Array.from(bytes)).readUvar(), value);
    // A longer form than needed reads as the same value: prefix 3, value 5 in 16 bits.
    assert.equal(new BitReader(Uint8Array.from([0x53, 0x00, 0x00])).readUvar(), 5n);
});

test('uvar sizes at the nibble boundaries', () => {
    for (const [value, bits] of [
        [0n, 8],
        [15n, 8],
        [16n, 12],
        [255n, 12],
        [256n, 16],
        [65535n, 20],
        [65536n, 24],
        [2n ** 32n - 1n, 36],
        [2n ** 32n, 40],
        [2n ** 63n, 68],
    ]) {
        const w = new BitWriter();
        w.writeUvar(value);
        assert.equal(w.bitLength, bits, `uvar ${value}`);
        assert.equal(new BitReader(w.bytes()).readUvar(), value);
    }
});

test('svar is zigzag: 0, -1, 1, -2 are 0, 1, 2, 3', () => {
    for (const [value, zigzag] of [
        [0n, 0n],
        [-1n, 1n],
        [1n, 2n],
        [-2n, 3n],
        [2n ** 63n - 1n, 2n ** 64n - 2n],
        [-(2n ** 63n), 2n ** 64n - 1n],
    ]) {
        const w = new BitWriter();
        w.writeSvar(value);
        assert.equal(new BitReader(w.bytes()).readUvar(), zigzag, `zigzag of ${value}`);
        assert.equal(new BitReader(w.bytes()).readSvar(), value);
    }
});

test('floats and doubles are their IEEE 754 bits', () => {
    // 1.5f = 0x3fc00000, little-endian; -2.0 = 0xc000000000000000.
    const r = new BitReader(Uint8Array.from([0x00, 0x00, 0xc0, 0x3f, 0, 0, 0, 0, 0, 0, 0x00, 0xc0]));
    assert.equal(r.readFloat(), 1.5);
    assert.equal(r.readDouble(), -2);
    const nan = new BitReader(Uint8Array.from([0x00, 0x00, 0xc0, 0x7f]));
    assert.ok(Number.isNaN(nan.readFloat()), 'any pattern reads; checking is the caller\'s');
    assert.deepEqual(bytesOf((w) => w.writeFloat(1.5)), Uint8Array.from([0x00, 0x00, 0xc0, 0x3f]));
});

test('bytes need not be aligned', () => {
    const bytes = bytesOf((w) => {
        w.write(1, 1);
        w.writeBytes(Uint8Array.from([0xab, 0xcd]));
    });
    assert.deepEqual(bytes, Uint8Array.from([0x57, 0x9b, 0x01]));
    const r = new BitReader(bytes);
    assert.equal(r.read(1), 1);
    assert.deepEqual(r.readBytes(2), Uint8Array.from([0xab, 0xcd]));
    assert.equal(r.readBytes(1), null, 'seven bits are not a byte');
});

test('the writer refuses a value wider than its field', () => {
    const w = new BitWriter();
    assert.throws(() => w.write(8, 3), RangeError);
    assert.throws(() => w.write(-1, 8), RangeError);
    w.write(7, 3);
    w.align();
    assert.equal(w.bitLength, 8);
    assert.deepEqual(w.bytes(), Uint8Array.from([7]));
});

test('bitsFor is 0 for 0, else floor(log2) + 1', () => {
    assert.deepEqual([0, 1, 2, 3, 255, 256, 1023, 65535].map(bitsFor), [0, 1, 2, 2, 8, 9, 10, 16]);
    assert.equal(bitsFor(2n ** 64n - 1n), 64);
});
