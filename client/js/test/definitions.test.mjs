// definitions.test.mjs -- loading entity definitions: the demo's files and
// fuzz/definitions/every_type.json, ids, types, audience masks, the digest
// (against the C unit test's), and the loader's refusals.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Tessera, demoDefinitions, demoDefinitionsText, everyTypeDefinitions } from '../test-support/helpers.mjs';

const { parseDefinitions, DefinitionsError } = Tessera;

function property(cls, name) {
    const found = Tessera.findProperty(cls, name);
    assert.ok(found, `${cls.name}.${name}`);
    return found;
}

test('demo/entities: class ids follow the file order, then declaration order', () => {
    const definitions = demoDefinitions();
    assert.deepEqual(
        definitions.classes.map((c) => [c.name, c.id]),
        [
            ['Account', 0],
            ['Avatar', 1],
            ['Census', 2],
            ['Door', 3],
            ['LogicTimer', 4],
            ['Npc', 5],
            ['Trigger', 6],
        ],
    );
    assert.equal(definitions.classBits, 3);
    assert.deepEqual(
        definitions.events.map((e) => [e.name, e.id, e.args.map((a) => `${a.name}:${a.type.kind}`)]),
        [
            ['player_joined', 0, ['player:entity', 'name:string']],
            ['door_changed', 1, ['door:entity', 'open:bool']],
            ['spell_hit', 2, ['caster:entity', 'target:entity', 'spell_id:uint16', 'amount:int16']],
            ['welcome', 3, ['name:string']],
        ],
    );
    // The merged document a login reply carries means the same.
    assert.equal(parseDefinitions(demoDefinitionsText()).digest, definitions.digest);
});

test('demo Avatar: property types, flags, defaults and methods', () => {
    const avatar = demoDefinitions().findClass('Avatar');
    assert.deepEqual(
        avatar.properties.map((p) => [p.id, p.name, p.flags]),
        [
            [0, 'name', 'ALL_CLIENTS'],
            [1, 'level', 'ALL_CLIENTS'],
            [2, 'health', 'CELL_PUBLIC_AND_OWN'],
            [3, 'mana', 'OWN_CLIENT'],
            [4, 'gold', 'BASE_AND_CLIENT'],
            [5, 'equipment', 'ALL_CLIENTS'],
            [6, 'buffs', 'OWN_CLIENT'],
            [7, 'secret_note', 'CELL_PRIVATE'],
            [8, 'walked', 'CELL_PRIVATE'],
            [9, 'born_ms', 'CELL_PRIVATE'],
            [10, 'heartbeats', 'CELL_PRIVATE'],
            [11, 'pings', 'CELL_PRIVATE'],
            [12, 'ping_last', 'CELL_PRIVATE'],
            [13, 'ping_disorder', 'CELL_PRIVATE'],
        ],
    );
    const health = property(avatar, 'health').type;
    assert.equal(health.bits, 12);
    assert.equal(health.intMin, -2048n);
    assert.equal(health.intMax, 2047n);
    assert.equal(property(avatar, 'health').defaultValue, 100);
    assert.equal(property(avatar, 'level').defaultValue, 1);
    assert.equal(property(avatar, 'name').type.maxLength, 32);
    assert.equal(property(avatar, 'equipment').type.structure.name, 'Equipment');
    assert.equal(property(avatar, 'equipment').detail, 'near');
    assert.deepEqual(property(avatar, 'equipment').defaultValue, { weapon: 0, armor: 0 });
    assert.equal(property(avatar, 'buffs').type.count, 8);
    assert.equal(property(avatar, 'buffs').type.valueCount, 8);
    assert.deepEqual(
        avatar.methods.base.map((m) => [m.name, m.id, m.exposed]),
        [
            ['chat', 0, true],
            ['relayPing', 1, true],
            ['poke', 2, true],
            ['poked', 3, false],
            ['census', 4, true],
            ['echoTo', 5, true],
            ['echo', 6, false],
            ['echoed', 7, false],
        ],
    );
    assert.deepEqual(
        avatar.methods.cell.map((m) => [m.name, m.exposed]),
        [
            ['castSpell', true],
            ['takeDamage', false],
            ['ping', true],
            ['teleport', true],
        ],
    );
    assert.deepEqual(
        avatar.methods.client.map((m) => m.name),
        ['onDamage', 'onPoked', 'onCallFailed', 'onEcho', 'onCensus'],
    );
});

test('audience masks are replication_schema_create\'s', () => {
    const definitions = demoDefinitions();
    const masks = (name) => {
        const m = definitions.findClass(name).masks;
        const ids = (set) => [...set].sort((a, b) => a - b);
        return {
            own: ids(m.own),
            near: ids(m.othersNear),
            medium: ids(m.othersMedium),
            far: ids(m.othersFar),
            ghosts: ids(m.ghosts),
            base: ids(m.baseToClient),
        };
    };
    // Avatar: name, level, health (own only), mana (own), equipment (near), buffs (own).
    assert.deepEqual(masks('Avatar'), {
        own: [0, 1, 2, 3, 5, 6],
        near: [0, 1, 5],
        medium: [0, 1],
        far: [0, 1],
        ghosts: [0, 1, 2, 5],
        base: [4],
    });
    // Npc: mood is OTHER_CLIENTS at detail medium: never the owner's.
    assert.deepEqual(masks('Npc'), {
        own: [0, 1, 2, 4],
        near: [0, 1, 2, 3, 4],
        medium: [0, 1, 2, 3, 4],
        far: [0, 1, 2, 4],
        ghosts: [0, 1, 2, 3, 4],
        base: [],
    });
    assert.deepEqual(masks('Account').base, [0]);
});

test('quantized types take the bits entity_def_quantization_bits computes', () => {
    const npc = demoDefinitions().findClass('Npc');
    const scale = property(npc, 'scale').type;
    assert.equal(scale.quantized, true);
    assert.equal(scale.bits, 8, '[0.5, 2] at 0.01 is 151 levels');
    assert.equal(Tessera.quantizationBits(0, 0.3, 0.1), 2, '0.3 / 0.1 rounds to 3 steps, 4 levels');
    assert.equal(Tessera.quantizationBits(0, 255, 1), 8);
    assert.equal(Tessera.quantizationBits(0, 256, 1), 9);
    assert.equal(Tessera.quantizationBits(1, 1, 1), -1);
    assert.equal(Tessera.quantizationBits(0, 1, 0), -1);
});

test('every_type.json: every kind, nested structs and arrays, defaults', () => {
    const definitions = everyTypeDefinitions();
    const thing = definitions.findClass('Thing');
    const kinds = Object.fromEntries(thing.properties.map((p) => [p.name, p.type.kind]));
    for (const kind of Tessera.KINDS) assert.ok(Object.values(kinds).includes(kind), `a property of kind ${kind}`);
    assert.equal(property(thing, 'i64_40').type.intMin, -(2n ** 39n));
    assert.equal(property(thing, 'u64_33').type.intMax, 2n ** 33n - 1n);
    assert.equal(property(thing, 'i32').type.bits, 32);
    assert.equal(property(thing, 'q').type.bits, 6, '[-10, 10] at 0.5: 41 levels');
    assert.equal(property(thing, 'qd').type.bits, 20, '[0, 1000] at 0.001: 1000001 levels');
    assert.equal(property(thing, 'qv3').type.bits, 18);
    assert.equal(property(thing, 'f').type.bits, 32);
    assert.equal(property(thing, 'd').type.bits, 64);
    assert.equal(property(thing, 'by').type.maxLength, 300);
    const stats = definitions.findStruct('Stats');
    assert.equal(stats.valueCount, 3);
    assert.deepEqual(
        stats.fields.map((f) => [f.name, f.defaultValue]),
        [
            ['hp', 100],
            ['pos', [0, 0, 0]],
            ['tag', 'x'],
        ],
    );
    assert.equal(definitions.findStruct('Outer').valueCount, 8);
    assert.deepEqual(
        definitions.structs.map((s) => s.name),
        ['Outer', 'Stats'],
        'structs are sorted by name',
    );
    assert.equal(property(thing, 'statsarr').type.valueCount, 9);
    assert.equal(property(thing, 'grid').type.valueCount, 6);
    assert.equal(property(thing, 'grid').type.element.element.kind, 'uint8');
    assert.deepEqual(property(thing, 'outer').defaultValue, {
        inner: { hp: 100, pos: [0, 0, 0], tag: 'x' },
        flags: [false, false, false],
        ids: [0, 0],
    });
    const everything = thing.methods.base[0];
    assert.equal(everything.name, 'everything');
    assert.deepEqual(
        everything.args.map((a) => a.type.kind),
        ['int32', 'float', 'string', 'bytes', 'vector3', 'entity', 'struct', 'array'],
    );
});

test('the digest is entity_def.c\'s: the C unit test\'s value, and stable under rewriting', () => {
    // tests/unit/test_entity_def.c's digest_base and digest_base_hex.
    const base =
        '{"types": [{"name": "Eq", "fields": [{"name": "w", "type": "uint16"}]},' +
        ' {"name": "Ab", "fields": [{"name": "z", "type": "bool"}]}],' +
        ' "entities": [{"name": "Avatar", "properties": [' +
        '  {"name": "hp", "type": "int16", "bits": 12, "flags": "CELL_PUBLIC_AND_OWN", "default": 100},' +
        '  {"name": "lvl", "type": "uint8", "flags": "ALL_CLIENTS", "persistent": true},' +
        '  {"name": "eq", "type": "Eq", "flags": "ALL_CLIENTS", "detail": "near"}],' +
        ' "cell_methods": [{"name": "go", "exposed": true, "args": [{"name": "t", "type": "entity"}]}]}]}';
    const digest = parseDefinitions(base).digest;
    assert.equal(digest, 'c6cdc0a25ce9deffe976961fbe803810c285457ce022e5d5a60b8d790277df45');
    // Implied values spelled out, key order, struct order: the same meaning.
    const rewritten =
        '{"entities": [{"cell_methods": [{"args": [{"type": "entity", "name": "t"}], "exposed": true, "name": "go"}],' +
        ' "properties": [{"flags": "CELL_PUBLIC_AND_OWN", "default": 100, "bits": 12, "type": "int16", "name": "hp"},' +
        ' {"persistent": true, "name": "lvl", "flags": "ALL_CLIENTS", "type": "uint8", "bits": 8, "default": 0},' +
        ' {"detail": "near", "name": "eq", "type": "Eq", "flags": "ALL_CLIENTS", "default": {"w": 0}}],' +
        ' "name": "Avatar", "client_methods": []}],' +
        ' "types": [{"fields": [{"type": "bool", "name": "z", "default": false}], "name": "Ab"},' +
        ' {"name": "Eq", "fields": [{"name": "w", "type": "uint16"}]}], "format": 1}';
    assert.equal(parseDefinitions(rewritten).digest, digest);
    for (const [from, to] of [
        ['"bits": 12', '"bits": 11'],
        ['CELL_PUBLIC_AND_OWN', 'ALL_CLIENTS'],
        ['"default": 100', '"default": 99'],
        ['"persistent": true', '"persistent": false'],
        ['"exposed": true', '"exposed": false'],
    ])
        assert.notEqual(parseDefinitions(base.replace(from, to)).digest, digest, `${from} -> ${to}`);
    // Events change the digest; none at all keep the old one.
    const withEvents = base.replace(/}$/, ', "events": [{"name": "hit", "args": [{"name": "n", "type": "uint16"}]}]}');
    assert.notEqual(parseDefinitions(withEvents).digest, digest);
    assert.equal(parseDefinitions(base.replace(/}$/, ', "events": []}')).digest, digest);
});

test('the loader refuses what entity_def.c refuses, saying where and why', () => {
    const cls = (properties, extra = '') =>
        `{"entities": [{"name": "A", "properties": [${properties}]${extra}}]}`;
    const cases = [
        ['not json', /not JSON/],
        ['[]', /top level must be a JSON object/],
        ['{"format": 2}', /'format' must be 1/],
        ['{"entities": [], "stuff": 1}', /unknown key 'stuff'/],
        [cls('{"name": "p", "type": "float", "bits": 3, "flags": "BASE"}'), /A\.p: key 'bits' does not apply to type float/],
        [cls('{"name": "p", "type": "int16", "bits": 40, "flags": "BASE"}'), /bit width 40 does not fit type int16/],
        [cls('{"name": "p", "type": "int17", "flags": "BASE"}'), /unknown type 'int17'/],
        [cls('{"name": "p", "type": "string", "flags": "BASE"}'), /needs 'max_length'/],
        [cls('{"name": "p", "type": "uint8", "flags": "BASE|CELL_PUBLIC"}'), /exactly one flag/],
        [cls('{"name": "p", "type": "uint8", "flags": "OWN_CLIENT", "detail": "near"}'), /needs a property other clients see/],
        [cls('{"name": "p", "type": "uint8", "flags": "BASE", "default": 256}'), /default 256 is outside \[0, 255\]/],
        [cls('{"name": "p", "type": "uint8", "flags": "BASE", "default": 1.5}'), /must be an integer/],
        [cls('{"name": "p", "type": "bytes", "max_length": 2, "flags": "BASE", "default": "abc"}'), /even number of hex digits/],
        [cls('{"name": "p", "type": "float", "quantize": {"min": 0, "max": 1, "precision": 0.5}, "flags": "BASE", "default": 2}'), /outside the quantization range/],
        [cls('{"name": "p", "type": "double", "quantize": {"min": 0, "max": 1e30, "precision": 1e-30}, "flags": "BASE"}'), /needs more than 64 bits/],
        [cls('{"name": "p", "type": "array", "element": "uint8", "count": 1025, "flags": "BASE"}'), /count must be an integer from 1 to 1024/],
        [cls('{"name": "p", "type": "array", "element": {"type": "array", "element": "uint8", "count": 1000}, "count": 5, "flags": "BASE"}'), /5000 values when flattened/],
        [cls('{"name": "p", "type": "uint8", "flags": "BASE"}, {"name": "p", "type": "bool", "flags": "BASE"}'), /duplicate property name/],
        [cls('{"name": "1p", "type": "uint8", "flags": "BASE"}'), /is not an identifier/],
        [cls('', ', "client_methods": [{"name": "m", "exposed": true}]'), /client methods cannot be exposed/],
        ['{"types": [{"name": "S", "fields": [{"name": "t", "type": "T"}]}, {"name": "T", "fields": [{"name": "s", "type": "S"}]}]}', /contains itself \(S -> T -> S\)/],
        ['{"types": [{"name": "uint8", "fields": [{"name": "a", "type": "bool"}]}]}', /cannot take the name of a built-in type/],
        ['{"events": [{"name": "e", "exposed": false}]}', /events cannot be exposed/],
        ['{"entities": [{"name": "A"}, {"name": "A"}]}', /duplicate class name/],
    ];
    for (const [text, expected] of cases) {
        assert.throws(
            () => parseDefinitions(text, 'test'),
            (error) => error instanceof DefinitionsError && expected.test(error.message) && error.message.startsWith('test: '),
            `${text} should fail with ${expected}`,
        );
    }
});
