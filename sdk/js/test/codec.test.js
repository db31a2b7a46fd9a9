import assert from 'node:assert/strict';
import { test } from 'node:test';

import { CodecError, decode, encode, transcode, utf8Decode, utf8Encode } from '../src/codec.js';

const hex = (b) => Buffer.from(b).toString('hex');

test('MessagePack matches the runtime and the other SDKs byte for byte', () => {
  assert.equal(hex(encode('msgpack', { a: 1 })), '81a16101');
  assert.equal(hex(encode('msgpack', { k: 256 })), '81a16bcd0100');
  assert.equal(hex(encode('msgpack', ['word', 3])), '92a4776f726403');
  assert.equal(hex(encode('msgpack', { a: [1, -1, 1.5] })), '81a1619301ffcb3ff8000000000000');
  assert.equal(hex(encode('msgpack', -33)), 'd0df');
  assert.equal(hex(encode('msgpack', 'x'.repeat(40))).slice(0, 4), 'd928');
});

test('integers take their shortest form', () => {
  for (const [n, size] of [[0, 1], [127, 1], [128, 2], [255, 2], [256, 3], [65535, 3], [65536, 5], [2 ** 32, 9], [-32, 1], [-33, 2], [-128, 2], [-129, 3], [-(2 ** 15) - 1, 5], [-(2 ** 31) - 1, 9]]) {
    const packed = encode('msgpack', n);
    assert.equal(packed.length, size, String(n));
    assert.equal(decode('msgpack', packed), n);
  }
});

test('values round-trip in both codecs', () => {
  const values = [null, true, false, 0, -5, 2 ** 53 - 1, 1.5, '', 'é'.repeat(300), 'x'.repeat(70000), '😀 東京', [], [1, [2, [3]]], {}, { nested: { list: [1, 'two', null] } }, Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`k${i}`, i]))];
  for (const kind of ['json', 'msgpack']) for (const v of values) assert.deepEqual(decode(kind, encode(kind, v)), v);
});

test('bytes are MessagePack binary', () => {
  assert.deepEqual(decode('msgpack', encode('msgpack', new Uint8Array([0, 255]))), new Uint8Array([0, 255]));
  assert.throws(() => encode('json', new Uint8Array([0])), CodecError);
});

test('the UTF-8 fallback agrees with TextEncoder', () => {
  for (const s of ['', 'ascii', 'héllo', '東京', '😀', 'a\u0000b']) {
    assert.deepEqual(new Uint8Array(utf8Encode(s)), new TextEncoder().encode(s));
    assert.equal(utf8Decode(new TextEncoder().encode(s)), s);
  }
});

test('bad values and bad bytes are clear errors', () => {
  assert.throws(() => encode('json', NaN), /cannot encode NaN as JSON/);
  assert.throws(() => encode('json', { a: undefined }), /undefined/);
  assert.throws(() => encode('msgpack', () => 1), /MessagePack/);
  assert.throws(() => decode('msgpack', new Uint8Array([0x92, 0x01])), /cut short/);
  assert.throws(() => decode('msgpack', new Uint8Array([1, 2])), /after a MessagePack value/);
  assert.throws(() => decode('msgpack', new Uint8Array([0xd4, 1, 0])), /extension/);
  assert.throws(() => decode('json', utf8Encode('{nope')), /as JSON/);
});

test('transcode keeps bytes when the codecs agree', () => {
  const json = utf8Encode('{"a": 1}');
  assert.equal(transcode('json', 'json', json), json);
  assert.equal(hex(transcode('json', 'msgpack', json)), '81a16101');
  assert.equal(utf8Decode(transcode('msgpack', 'json', encode('msgpack', ['word', 3]))), '["word",3]');
});
