// method-call.test.mjs -- call arguments on the wire (common/method_call.c)
// and TesseraClient.call's checks against the definitions: nothing is sent
// for a call the server would refuse.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Tessera, absoluteAt, changes, demoDefinitions, loggedInClient, loginReply, viewUpdate } from '../test-support/helpers.mjs';

const { CallError, DecodeError, encodeArguments, decodeArguments } = Tessera;

const definitions = demoDefinitions();
const avatar = definitions.findClass('Avatar');
const method = (part, name) => Tessera.findMethod(avatar, part, name);

test('arguments are every value in order, padded with zero bits to a byte', () => {
    // chat(text: string max 200): an 8-bit length, then the bytes.
    assert.deepEqual(encodeArguments(method('base', 'chat'), { text: 'hi' }), Uint8Array.from([2, 0x68, 0x69]));
    // castSpell(spell_id: uint16, target: entity): 16 + 64 bits.
    assert.deepEqual(
        encodeArguments(method('cell', 'castSpell'), { target: 5n, spell_id: 0x0102 }),
        Uint8Array.from([0x02, 0x01, 5, 0, 0, 0, 0, 0, 0, 0]),
    );
    // relayPing(n: uint32): a uvar, 8 bits for 7, then nothing.
    assert.deepEqual(encodeArguments(method('base', 'relayPing'), { n: 7 }), Uint8Array.from([0x70]));
    // A method without arguments: no bytes.
    assert.deepEqual(encodeArguments(method('base', 'census')), new Uint8Array(0));
    // onDamage(amount: int16): 16 bits of amount + 32768.
    const onDamage = method('client', 'onDamage');
    assert.deepEqual(decodeArguments(onDamage, Uint8Array.from([0xfb, 0x7f])), { amount: -5 });
});

test('decoding is exact: truncation, bad values and trailing bytes are refused', () => {
    const refuses = (m, bytes, code) =>
        assert.throws(() => decodeArguments(m, Uint8Array.from(bytes)), (e) => e instanceof DecodeError && e.code === code, code);
    refuses(method('client', 'onDamage'), [0xfb], 'value_truncated');
    refuses(method('client', 'onDamage'), [0xfb, 0x7f, 0x00], 'trailing');
    refuses(method('base', 'relayPing'), [0x70, 0x00], 'trailing'); // a whole byte after the arguments
    refuses(method('base', 'chat'), [1, 0xff], 'invalid');
    refuses(method('base', 'chat'), [201], 'range');
    const teleport = method('cell', 'teleport');
    const bytes = encodeArguments(teleport, { space: 'dungeon', x: 1, y: 2, z: 3 });
    assert.deepEqual(decodeArguments(teleport, bytes), { space: 'dungeon', x: 1, y: 2, z: 3 });
    const w = new Tessera.BitWriter();
    w.write(1, 6);
    w.writeBytes(Uint8Array.from([0x61]));
    w.writeFloat(NaN); // x
    w.writeFloat(0);
    w.writeFloat(0);
    w.align();
    refuses(teleport, [...w.bytes()], 'range');
    // space 'dungeon' (6 + 56 bits) and three floats: 158 bits, 2 of padding.
    const padded = bytes.slice();
    padded[padded.length - 1] |= 0x80;
    refuses(teleport, padded, 'trailing');
});

// A client in the world with its Avatar (77) and an Npc (1001) in view.
function inWorld() {
    const { client, socket } = loggedInClient();
    socket.deliver(
        viewUpdate(1, (b) =>
            b
                .enter(0, 77n, 'Avatar', true, changes({}))
                .enter(1, 1001n, 'Npc', false, changes({}))
                .move(1, absoluteAt(3, 0, 3)),
        ),
    );
    const calls = () =>
        socket.sent.filter((m) => m.body === 'call').map((m) => ({ ...m.call, args: Uint8Array.from(m.call.args) }));
    return { client, socket, calls };
}

function refused(client, code, ...args) {
    assert.throws(() => client.call(...args), (e) => e instanceof CallError && e.code === code, `${args[2]}: ${code}`);
}

test('call: an exposed method with good arguments is sent', () => {
    const { client, calls } = inWorld();
    client.call(77n, 'base', 'chat', { text: 'hello' });
    client.call(77, 'cell', 'castSpell', { spell_id: 3, target: 1001n });
    assert.deepEqual(calls(), [
        { entity_id: '77', part: 0, method_id: 0, args: Uint8Array.from([5, ...new TextEncoder().encode('hello')]) },
        { entity_id: '77', part: 1, method_id: 0, args: encodeArguments(method('cell', 'castSpell'), { spell_id: 3, target: 1001n }) },
    ]);
    assert.equal(client.stats.callsOut, 2);
});

test('call: what the server would refuse is refused here, and nothing is sent', () => {
    const { client, calls } = inWorld();
    refused(client, 'not_exposed', 77n, 'base', 'poked', { from: 1n });
    refused(client, 'not_exposed', 77n, 'cell', 'takeDamage', { amount: 1, attacker: 1n });
    refused(client, 'unknown_method', 77n, 'base', 'fly', {});
    refused(client, 'unknown_method', 1001n, 'cell', 'castSpell', { spell_id: 1, target: 1n });
    refused(client, 'bad_part', 77n, 'client', 'onDamage', { amount: 1 });
    refused(client, 'unknown_entity', 5555n, 'cell', 'castSpell', { spell_id: 1, target: 1n });
    refused(client, 'unknown_entity', 1001n, 'base', 'chat', { text: 'x' }); // base methods: the own entity only
    refused(client, 'bad_arguments', 77n, 'base', 'chat', { text: 5 }); // wrong type
    refused(client, 'bad_arguments', 77n, 'base', 'chat', {}); // missing
    refused(client, 'bad_arguments', 77n, 'base', 'chat', { text: 'x', loud: true }); // unknown name
    refused(client, 'bad_arguments', 77n, 'base', 'chat', { text: 'x'.repeat(201) }); // over max_length
    refused(client, 'bad_arguments', 77n, 'cell', 'castSpell', { spell_id: 70000, target: 1n }); // out of range
    refused(client, 'bad_arguments', 77n, 'cell', 'castSpell', { spell_id: -1, target: 1n });
    refused(client, 'bad_arguments', 77n, 'cell', 'castSpell', { spell_id: 1.5, target: 1n });
    refused(client, 'bad_arguments', 77n, 'cell', 'castSpell', { spell_id: 1, target: -1n });
    refused(client, 'bad_arguments', 77n, 'cell', 'teleport', { space: 'a', x: Infinity, y: 0, z: 0 });
    refused(client, 'bad_arguments', 77n, 'cell', 'teleport', { space: 'a', x: 1e39, y: 0, z: 0 });
    assert.match(
        (() => {
            try {
                client.call(77n, 'cell', 'castSpell', { spell_id: 70000, target: 1n });
            } catch (error) {
                return error.message;
            }
        })(),
        /castSpell\(spell_id\) 70000 is outside \[0, 65535\]/,
    );
    assert.deepEqual(calls(), []);
    assert.equal(client.stats.callsOut, 0);
});

test('call: not before the login, not after close; a call too large for max_frame_bytes is refused', () => {
    const { client } = loggedInClient({ reply: null });
    refused(client, 'not_in_world', 77n, 'base', 'chat', { text: 'x' });
    const closed = inWorld();
    closed.client.close();
    refused(closed.client, 'not_in_world', 77n, 'base', 'chat', { text: 'x' });
    const small = loggedInClient({ reply: loginReply({ max_frame_bytes: 64 }) });
    small.socket.deliver(viewUpdate(1, (b) => b.enter(0, 77n, 'Avatar', true, changes({}))));
    small.client.call(77n, 'base', 'chat', { text: 'x'.repeat(40) });
    refused(small.client, 'too_large', 77n, 'base', 'chat', { text: 'x'.repeat(60) });
    assert.equal(small.socket.sent.filter((m) => m.body === 'call').length, 1);
});
