// stream.test.mjs -- the entity stream decoder (common/replication.c) on
// streams built by hand with the demo's definitions: every record kind,
// stale aliases, audiences, and every refusal.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { RecordingHandler, StreamBuilder, Tessera, changes, demoDefinitions } from '../test-support/helpers.mjs';

const { BitReader, DecodeError, decodeStream, aliasBits, createVolatileConfig } = Tessera;

const definitions = demoDefinitions();
const ALIAS_BITS = aliasBits(1024);
const config = createVolatileConfig(1 / 64, [-512, -32, -512], [512, 32, 512], 256);

function handler() {
    const h = new RecordingHandler();
    h.config = config;
    return h;
}

function absoluteMove(x, y, z, yaw) {
    return (w) => {
        w.write(1, 1);
        w.write(x, 17);
        w.write(y, 13);
        w.write(z, 17);
        w.write(yaw, 8);
    };
}

function decode(bytes, h = handler()) {
    const r = new BitReader(bytes);
    const stats = decodeStream(r, definitions, ALIAS_BITS, h);
    return { stats, h, r };
}

function refuses(bytes, code, h = handler()) {
    const r = new BitReader(bytes);
    assert.throws(() => decodeStream(r, definitions, ALIAS_BITS, h), (e) => e instanceof DecodeError && e.code === code, code);
    assert.equal(r.failed, true, 'the reader is left failed');
    return h;
}

test('the alias width is bitsFor(max_aliases - 1), 0 for a single alias', () => {
    assert.deepEqual([1, 2, 3, 1024, 1025, 65536].map(aliasBits), [0, 1, 2, 10, 11, 16]);
});

test('an ENTER laid out field by field, then END', () => {
    // Door (class 3 of 7: 3 bits) for alias 5, entity 42, open = true.
    // Door has 2 properties: a 2-bit count, 1-bit ids.
    const bytes = (() => {
        const w = new Tessera.BitWriter();
        w.write(2, 2); // ENTER
        w.write(5, 10); // alias
        w.write(1, 4); // length: uvar prefix 1 ...
        w.write(20, 8); // ... 20 bits follow
        w.write(0, 1); // not the owner
        w.write(3, 3); // class Door
        w.write(1, 4); // entity id: uvar prefix 1 ...
        w.write(42, 8); // ... 42
        w.write(1, 2); // one change
        w.write(0, 1); // property 0, open
        w.write(1, 1); // true
        w.write(3, 2); // EXT
        w.write(0, 2); // END
        assert.equal(w.bitLength, 48);
        return w.bytes();
    })();
    const { stats, h, r } = decode(bytes);
    assert.deepEqual(stats, { enters: 1, updates: 0, moves: 0, leaves: 0, discarded: 0 });
    assert.deepEqual(h.log, [
        ['enter', 5, 42n, 'Door', false],
        ['changed', 5, ['open']],
    ]);
    assert.equal(h.table.get(5).state.properties.open, true);
    assert.equal(r.position, 48);
});

test('ENTER, MOVE, UPDATE and LEAVE applied in order; the builder matches the layout', () => {
    const bytes = new StreamBuilder(definitions, ALIAS_BITS)
        .enter(3, 1001n, 'Npc', false, changes({ name: 'Guard', level: 7, scale: 1.5, mood: 3 }))
        .move(3, absoluteMove(32768, 2048, 32768 + 640, 0))
        .enter(4, 77n, 'Avatar', true, changes({ name: 'me', health: -20, mana: 9, buffs: [1, 2, 3, 4, 5, 6, 7, 8] }))
        .update(3, 'Npc', changes({ health: 50 }))
        .leave(4)
        .end()
        .bytes();
    const { stats, h } = decode(bytes);
    assert.deepEqual(stats, { enters: 2, updates: 1, moves: 1, leaves: 1, discarded: 0 });
    assert.deepEqual(h.log, [
        ['enter', 3, 1001n, 'Npc', false],
        ['changed', 3, ['name', 'level', 'mood', 'scale']],
        ['move', 3],
        ['enter', 4, 77n, 'Avatar', true],
        ['changed', 4, ['name', 'health', 'mana', 'buffs']],
        ['changed', 3, ['health']],
        ['leave', 4],
    ]);
    const npc = h.table.get(3);
    assert.deepEqual(npc.state.toJson(), { name: 'Guard', level: 7, health: 50, mood: 3, scale: 1.5, ai_state: 0, visitors: 0 });
    assert.deepEqual(npc.position, { x: 0, y: 0, z: 10, yaw: 0 });
});

test('an UPDATE that changes nothing reports no change', () => {
    const bytes = new StreamBuilder(definitions, ALIAS_BITS)
        .enter(1, 5n, 'Door', false, changes({ open: true }))
        .update(1, 'Door', changes({ open: true }))
        .end()
        .bytes();
    const { h } = decode(bytes);
    assert.deepEqual(h.log.at(-1), ['changed', 1, []]);
});

test('stale aliases: UPDATE skipped by its length, MOVE read and dropped, LEAVE ignored', () => {
    const bytes = new StreamBuilder(definitions, ALIAS_BITS)
        .update(9, 'Npc', changes({ health: 1, name: 'x' }))
        .move(9, absoluteMove(1, 2, 3, 4))
        .leave(9)
        .enter(2, 8n, 'Door', false, changes({ open: true }))
        .end()
        .bytes();
    const { stats, h } = decode(bytes);
    assert.deepEqual(stats, { enters: 1, updates: 0, moves: 0, leaves: 1, discarded: 2 });
    assert.deepEqual(h.log, [['skip-move', 9], ['leave', 9], ['enter', 2, 8n, 'Door', false], ['changed', 2, ['open']]]);
});

test('a refused ENTER is skipped by its length', () => {
    const h = handler();
    h.refuseEnter = true;
    const bytes = new StreamBuilder(definitions, ALIAS_BITS)
        .enter(2, 8n, 'Npc', false, changes({ name: 'a' }))
        .leave(2)
        .end()
        .bytes();
    const { stats } = decode(bytes, h);
    assert.deepEqual(stats, { enters: 0, updates: 0, moves: 0, leaves: 1, discarded: 1 });
});

test('audiences: OWN for the owned entity, OTHERS_NEAR for the others', () => {
    // mana is OWN_CLIENT: an owner may get it, nobody else.
    decode(new StreamBuilder(definitions, ALIAS_BITS).enter(0, 1n, 'Avatar', true, changes({ mana: 3 })).end().bytes());
    refuses(new StreamBuilder(definitions, ALIAS_BITS).enter(0, 1n, 'Avatar', false, changes({ mana: 3 })).end().bytes(), 'unexpected_property');
    // equipment is near-only: any other client may get it (OTHERS_NEAR is the widest).
    decode(new StreamBuilder(definitions, ALIAS_BITS).enter(0, 1n, 'Avatar', false, changes({ equipment: { weapon: 1, armor: 2 } })).end().bytes());
    // gold is the base's: never in the stream.
    refuses(new StreamBuilder(definitions, ALIAS_BITS).enter(0, 1n, 'Avatar', true, changes({ gold: 3 })).end().bytes(), 'unexpected_property');
    // mood (OTHER_CLIENTS) never goes to the owner.
    const h = refuses(
        new StreamBuilder(definitions, ALIAS_BITS)
            .enter(0, 1n, 'Npc', true, changes({ level: 2 }))
            .update(0, 'Npc', changes({ mood: 1 }))
            .end()
            .bytes(),
        'unexpected_property',
    );
    assert.equal(h.table.get(0).state.properties.level, 2, 'records before the broken one stay applied');
});

test('refusals: END rules, reserved kinds, truncation', () => {
    const door = (b) => b.enter(1, 5n, 'Door', false, changes({ open: true }));
    // A whole byte after END.
    const extra = new StreamBuilder(definitions, ALIAS_BITS);
    door(extra).end();
    extra.w.write(0, 8);
    refuses(extra.bytes(), 'malformed_record');
    // Padding after END that is not zero.
    const padded = new StreamBuilder(definitions, ALIAS_BITS);
    door(padded);
    padded.w.write(3, 2);
    padded.w.write(0, 2);
    padded.w.write(1, 1);
    refuses(padded.bytes(), 'malformed_record');
    // No END at all.
    refuses(door(new StreamBuilder(definitions, ALIAS_BITS)).bytes(), 'stream_truncated');
    refuses(new Uint8Array(0), 'stream_truncated');
    // EXT kinds 2 and 3 are reserved.
    refuses(Uint8Array.from([0x0b]), 'reserved_kind'); // 11 then 10: EXT kind 2
    refuses(Uint8Array.from([0x0f]), 'reserved_kind');
    // A stream cut inside a MOVE.
    const cut = new StreamBuilder(definitions, ALIAS_BITS);
    door(cut).move(1, (w) => w.write(1, 1));
    refuses(cut.bytes(), 'move_truncated');
});

test('refusals: ENTER and UPDATE records whose content does not match', () => {
    const b = () => new StreamBuilder(definitions, ALIAS_BITS);
    // A class id past the classes (7 classes, 3 bits).
    refuses(b().enter(1, 5n, 'Door', false, changes({}), { classId: 7 }).end().bytes(), 'malformed_record');
    // Entity id 0.
    refuses(b().enter(1, 0n, 'Door', false, changes({})).end().bytes(), 'malformed_record');
    // A length one bit short or long of the content.
    refuses(b().enter(1, 5n, 'Door', false, changes({ open: true }), { lengthAdjust: -1 }).end().bytes(), 'malformed_record');
    refuses(b().enter(1, 5n, 'Door', false, changes({ open: true }), { lengthAdjust: 1 }).end().bytes(), 'malformed_record');
    refuses(
        b().enter(1, 5n, 'Door', false, changes({})).update(1, 'Door', changes({ open: true }), { lengthAdjust: 2 }).end().bytes(),
        'malformed_record',
    );
    // A length past the end of the stream.
    refuses(b().enter(1, 5n, 'Door', false, changes({ open: true }), { lengthAdjust: 1000 }).bytes(), 'stream_truncated');
    // A value its type does not allow (Npc scale above its quantized max), inside an UPDATE.
    refuses(
        b()
            .enter(1, 5n, 'Npc', false, changes({}))
            .update(1, 'Npc', (w) => {
                w.write(1, 3); // one change (7 properties: 3-bit count and ids)
                w.write(4, 3); // scale
                w.write(255, 8); // q = 255 > 150
            })
            .end()
            .bytes(),
        'range',
    );
    // A string that is not UTF-8 inside an ENTER.
    refuses(
        b()
            .enter(1, 5n, 'Npc', false, (w) => {
                w.write(1, 3);
                w.write(0, 3); // name: max_length 32, 6-bit length
                w.write(1, 6);
                w.write(0xff, 8);
            })
            .end()
            .bytes(),
        'invalid',
    );
});

test('a handler that returns a state of another class is refused', () => {
    const h = handler();
    h.enter = () => new Tessera.EntityState(definitions.findClass('Npc'));
    refuses(new StreamBuilder(definitions, ALIAS_BITS).enter(1, 5n, 'Door', false, changes({})).end().bytes(), 'wrong_class', h);
});
