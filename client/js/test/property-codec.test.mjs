// property-codec.test.mjs -- each property type's decoding from bits written
// by hand (common/property_codec.c's layout), each check the C decoder makes,
// change lists, and the encoder against the decoder.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Tessera, bytesOf, everyTypeDefinitions, readerOf, valuesClose } from '../test-support/helpers.mjs';

const { BitReader, BitWriter, DecodeError, decodeValue, decodeChangeList } = Tessera;

const definitions = everyTypeDefinitions();
const thing = definitions.findClass('Thing');
const typeOf = (name) => Tessera.findProperty(thing, name).type;

function decode(name, build) {
    const r = readerOf(build);
    const value = decodeValue(r, typeOf(name));
    return { value, position: r.position };
}

function refuses(name, build, code) {
    const r = readerOf(build);
    assert.throws(
        () => decodeValue(r, typeOf(name)),
        (error) => error instanceof DecodeError && error.code === code,
        `${name} should be refused with ${code}`,
    );
    assert.equal(r.failed, true, 'a refused value leaves the reader failed');
}

test('narrow integers: (v - int_min) in their bits', () => {
    assert.deepEqual(decode('i8', (w) => w.write(0, 8)), { value: -128, position: 8 });
    assert.equal(decode('i8', (w) => w.write(255, 8)).value, 127);
    assert.equal(decode('i16', (w) => w.write(32768 + 5, 16)).value, 5);
    assert.deepEqual(decode('i16_12', (w) => w.write(2048 - 100, 12)), { value: -100, position: 12 });
    assert.deepEqual(decode('u8_5', (w) => w.write(31, 5)), { value: 31, position: 5 });
    assert.equal(decode('u8', (w) => w.write(200, 8)).value, 200);
    assert.equal(decode('u16', (w) => w.write(65535, 16)).value, 65535);
    assert.deepEqual(decode('i32_20', (w) => w.write(0, 20)), { value: -(2 ** 19), position: 20 });
    assert.deepEqual(decode('i64_40', (w) => w.write(2n ** 40n - 1n, 40)), { value: 2n ** 39n - 1n, position: 40 });
    assert.deepEqual(decode('u64_33', (w) => w.write(2n ** 33n - 1n, 33)), { value: 2n ** 33n - 1n, position: 33 });
});

test('full-width 32/64-bit integers: svar and uvar, range-checked', () => {
    assert.deepEqual(decode('i32', (w) => w.writeSvar(-3)), { value: -3, position: 8 });
    assert.equal(decode('i32', (w) => w.writeSvar(-(2 ** 31))).value, -(2 ** 31));
    refuses('i32', (w) => w.writeSvar(2 ** 31), 'range');
    refuses('i32', (w) => w.writeSvar(-(2 ** 31) - 1), 'range');
    assert.equal(decode('i64', (w) => w.writeSvar(-(2n ** 63n))).value, -(2n ** 63n));
    assert.equal(decode('u32', (w) => w.writeUvar(2 ** 32 - 1)).value, 2 ** 32 - 1);
    refuses('u32', (w) => w.writeUvar(2 ** 32), 'range');
    assert.equal(decode('u64', (w) => w.writeUvar(2n ** 64n - 1n)).value, 2n ** 64n - 1n);
    refuses('u32', (w) => w.write(0xf, 4), 'value_truncated');
});

test('floats and doubles: IEEE bits, NaN and infinities refused, -0 held as 0', () => {
    assert.equal(decode('f', (w) => w.writeFloat(0.25)).value, 0.25);
    assert.equal(decode('f', (w) => w.writeFloat(0.1)).value, Math.fround(0.1));
    assert.equal(decode('d', (w) => w.writeDouble(0.1)).value, 0.1);
    assert.ok(Object.is(decode('d', (w) => w.writeDouble(-0)).value, 0));
    refuses('f', (w) => w.write(0x7fc00000, 32), 'range');
    refuses('d', (w) => w.writeDouble(Infinity), 'range');
    refuses('d', (w) => w.writeDouble(NaN), 'range');
    refuses('f', (w) => w.write(0, 31), 'value_truncated');
});

test('quantized numbers: min + q * precision, q above that of max refused', () => {
    // q: [-10, 10] at 0.5 in 6 bits: q = 0 is -10, q = 25 is 2.5, q = 40 is 10.
    assert.deepEqual(decode('q', (w) => w.write(25, 6)), { value: 2.5, position: 6 });
    assert.equal(decode('q', (w) => w.write(40, 6)).value, 10);
    refuses('q', (w) => w.write(41, 6), 'range');
    refuses('q', (w) => w.write(63, 6), 'range');
    // qd: [0, 1000] at 0.001 in 20 bits.
    assert.equal(decode('qd', (w) => w.write(123456, 20)).value, 123456 * 0.001);
    refuses('qd', (w) => w.write(1000001, 20), 'range');
    // Quantize and back, halves up.
    const q = typeOf('q');
    assert.equal(Tessera.quantize(q, 2.25), 25n, '(2.25 + 10) / 0.5 = 24.5 rounds up');
    assert.equal(Tessera.quantizeMax(q), 40n);
    assert.equal(Tessera.dequantize(q, 40n), 10);
});

test('bool, entity', () => {
    assert.deepEqual(decode('b', (w) => w.write(1, 1)), { value: true, position: 1 });
    assert.deepEqual(decode('e', (w) => w.write(2n ** 64n - 2n, 64)), { value: 2n ** 64n - 2n, position: 64 });
    refuses('e', (w) => w.write(0, 63), 'value_truncated');
    refuses('b', () => {}, 'value_truncated');
});

test('strings: length in bitsFor(max_length) bits, UTF-8 without NUL', () => {
    // s: max_length 5, so a 3-bit length.
    const text = (bytes) => (w) => {
        w.write(bytes.length, 3);
        w.writeBytes(Uint8Array.from(bytes));
    };
    assert.deepEqual(decode('s', text([0x68, 0xc3, 0xa9])), { value: 'hé', position: 3 + 24 });
    assert.equal(decode('s', text([])).value, '');
    assert.equal(decode('s', text([0xf0, 0x9f, 0x98, 0x80])).value, '😀');
    refuses('s', (w) => w.write(6, 3), 'range'); // longer than max_length
    refuses('s', text([0x61, 0x00]), 'invalid'); // NUL
    refuses('s', text([0xc0, 0x80]), 'invalid'); // overlong NUL
    refuses('s', text([0xed, 0xa0, 0x80]), 'invalid'); // a UTF-16 surrogate
    refuses('s', text([0xf4, 0x90, 0x80, 0x80]), 'invalid'); // past U+10FFFF
    refuses('s', text([0x61, 0xc3]), 'invalid'); // cut inside a character
    refuses('s', text([0xff]), 'invalid');
    refuses('s', (w) => {
        w.write(4, 3);
        w.writeBytes(Uint8Array.from([0x61, 0x62]));
    }, 'value_truncated');
});

test('a long string: a bad byte before a truncation is "invalid", as the C decoder reads in chunks', () => {
    // strs elements: max_length 300 (9-bit length). Bad byte at 10, truncated at 280.
    const type = typeOf('strs').element;
    const r = new BitReader(
        bytesOf((w) => {
            w.write(300, 9);
            const bytes = new Uint8Array(280).fill(0x61);
            bytes[10] = 0xff;
            w.writeBytes(bytes);
        }),
    );
    assert.throws(() => decodeValue(r, type), (e) => e.code === 'invalid');
    // The truncation within the first chunk comes first when the bad byte is in a later one.
    const r2 = new BitReader(
        bytesOf((w) => {
            w.write(300, 9);
            const bytes = new Uint8Array(200).fill(0x61);
            w.writeBytes(bytes);
        }),
    );
    assert.throws(() => decodeValue(r2, type), (e) => e.code === 'value_truncated');
});

test('bytes, vectors, arrays, structs', () => {
    // by: max_length 300, a 9-bit length, any bytes.
    assert.deepEqual(
        decode('by', (w) => {
            w.write(2, 9);
            w.writeBytes(Uint8Array.from([0x00, 0xff]));
        }).value,
        Uint8Array.from([0x00, 0xff]),
    );
    refuses('by', (w) => w.write(301, 9), 'range');
    assert.deepEqual(decode('v2', (w) => (w.writeFloat(1.5), w.writeFloat(-2))).value, [1.5, -2]);
    refuses('v3', (w) => (w.writeFloat(1), w.writeFloat(NaN), w.writeFloat(1)), 'range');
    // qv3: [-1000, 1000] at 0.01, 18 bits per component.
    assert.deepEqual(decode('qv3', (w) => (w.write(100000, 18), w.write(0, 18), w.write(200000, 18))), {
        value: [0, -1000, 1000],
        position: 54,
    });
    refuses('qv3', (w) => (w.write(0, 18), w.write(200001, 18), w.write(0, 18)), 'range');
    // arr: 4 int16.
    assert.deepEqual(
        decode('arr', (w) => [1, 2, 3, 4].forEach((v) => w.write(v + 32768, 16))),
        { value: [1, 2, 3, 4], position: 64 },
    );
    // stats: hp (int16, 12 bits), pos (quantized vector3, [-100, 100] at 0.01: 15 bits each), tag (string 8: 4 bits).
    const stats = decode('stats', (w) => {
        w.write(2048 + 7, 12);
        w.write(10000, 15);
        w.write(10100, 15);
        w.write(20000, 15);
        w.write(1, 4);
        w.writeBytes(Uint8Array.from([0x7a]));
    });
    assert.deepEqual(stats.value, { hp: 7, pos: [0, 1, 100], tag: 'z' });
    assert.equal(stats.position, 12 + 45 + 4 + 8);
    // grid: 2 x 3 uint8.
    assert.deepEqual(decode('grid', (w) => [1, 2, 3, 4, 5, 6].forEach((v) => w.write(v, 8))).value, [
        [1, 2, 3],
        [4, 5, 6],
    ]);
});

test('change lists: count, ids strictly increasing, audience checked', () => {
    const n = thing.properties.length; // 30: a 5-bit count and 5-bit ids
    assert.equal(n, 30);
    const list = (entries) => (w) => {
        w.write(entries.length, 5);
        for (const [id, write] of entries) {
            w.write(id, 5);
            write(w);
        }
    };
    const b = Tessera.findProperty(thing, 'b').id;
    const u8 = Tessera.findProperty(thing, 'u8').id;
    const r = new BitReader(bytesOf(list([[u8, (w) => w.write(9, 8)], [b, (w) => w.write(1, 1)]])));
    assert.deepEqual(decodeChangeList(r, thing, null), [
        { id: u8, value: 9 },
        { id: b, value: true },
    ]);
    assert.equal(r.position, 5 + 5 + 8 + 5 + 1);
    const fails = (build, accept, code) => {
        const reader = readerOf(build);
        assert.throws(() => decodeChangeList(reader, thing, accept), (e) => e instanceof DecodeError && e.code === code, code);
        assert.equal(reader.failed, true);
    };
    fails((w) => w.write(31, 5), null, 'malformed_change_list'); // more entries than properties
    fails(list([[b, (w) => w.write(1, 1)], [u8, (w) => w.write(9, 8)]]), null, 'malformed_change_list'); // ids not increasing
    fails(list([[b, (w) => w.write(1, 1)], [b, (w) => w.write(1, 1)]]), null, 'malformed_change_list'); // a property twice
    fails(list([[30, () => {}]]), null, 'unexpected_property'); // no such property
    const i32 = Tessera.findProperty(thing, 'i32').id; // OWN_CLIENT: not for other clients
    fails(list([[i32, (w) => w.writeSvar(1)]]), thing.masks.othersNear, 'unexpected_property');
    assert.deepEqual(decodeChangeList(readerOf(list([[i32, (w) => w.writeSvar(1)]])), thing, thing.masks.own), [
        { id: i32, value: 1 },
    ]);
    fails((w) => (w.write(1, 5), w.write(u8, 5), w.write(1, 3)), null, 'value_truncated');
});

test('every type: the encoder and the decoder agree, and an empty change list is 5 bits', () => {
    const values = {
        i8: -5, i16: 300, i32: -70000, i64: -(2n ** 62n), u8: 255, u16: 65535, u32: 4000000000, u64: 2n ** 64n - 1n,
        i16_12: -2048, u8_5: 17, i32_20: 524287, i64_40: -(2n ** 39n), u64_33: 2n ** 33n - 1n,
        f: 3.25, d: Math.PI, q: -9.5, qd: 999.999, b: true, s: 'añb', by: Uint8Array.from([1, 2, 3]),
        v2: [0.5, -0.5], v3: [1, 2, 3], qv3: [-999.99, 0, 999.99], e: 12345678901234n, arr: [-1, 0, 1, 32767],
        stats: { hp: -5, pos: [1.5, -2.25, 99.99], tag: 'abc' },
        outer: { inner: { hp: 1, pos: [0, 0, 0], tag: '' }, flags: [true, false, true], ids: [7, 8] },
        statsarr: [
            { hp: 1, pos: [1, 1, 1], tag: 'a' },
            { hp: 2, pos: [2, 2, 2], tag: 'b' },
            { hp: 3, pos: [3, 3, 3], tag: 'c' },
        ],
        strs: ['x'.repeat(300), ''], grid: [[1, 2, 3], [4, 5, 6]],
    };
    const held = thing.properties.map((p) => Tessera.checkValue(p.type, values[p.name], p.name));
    const w = new BitWriter();
    Tessera.encodeChangeList(w, thing, held, thing.properties.map((p) => p.id));
    const r = new BitReader(w.bytes(), w.bitLength);
    const decoded = decodeChangeList(r, thing, null);
    assert.equal(r.position, w.bitLength);
    assert.equal(decoded.length, thing.properties.length);
    for (const { id, value } of decoded) {
        const p = thing.properties[id];
        assert.ok(valuesClose(p.type, value, held[id]), `${p.name}: ${JSON.stringify(Tessera.valueToJson(p.type, value))}`);
    }
    const empty = new BitWriter();
    Tessera.encodeChangeList(empty, thing, held, []);
    assert.equal(empty.bitLength, 5);
});

test('values to send are checked as the C setters check them', () => {
    const check = (name, value) => Tessera.checkValue(typeOf(name), value, name);
    assert.equal(check('f', 0.1), Math.fround(0.1), 'a float is held as a float32');
    assert.equal(check('i64', 5), 5n, 'a 64-bit integer is held as a bigint');
    assert.throws(() => check('u8', 256), RangeError);
    assert.throws(() => check('i8', -129), RangeError);
    assert.throws(() => check('u8', 1.5), TypeError);
    assert.throws(() => check('u64', -1n), RangeError);
    assert.throws(() => check('q', 10.5), RangeError);
    assert.throws(() => check('f', 1e39), RangeError);
    assert.throws(() => check('d', NaN), TypeError);
    assert.throws(() => check('s', 'toolong'), RangeError);
    assert.throws(() => check('s', 'a\u0000'), TypeError);
    assert.throws(() => check('s', '\ud800'), TypeError);
    assert.throws(() => check('by', 'ab'), TypeError);
    assert.throws(() => check('v2', [1]), TypeError);
    assert.throws(() => check('arr', [1, 2, 3]), TypeError);
    assert.throws(() => check('stats', { hp: 1, pos: [0, 0, 0] }), /tag is missing/);
    assert.throws(() => check('stats', { hp: 1, pos: [0, 0, 0], tag: '', extra: 1 }), /no field 'extra'/);
    assert.throws(() => check('e', 2n ** 64n), RangeError);
});
