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

test('64-bit integers beyond 2^53 arrive exact, as BigInts, and are written back exact', () => {
  const big = 2n ** 63n - 1n; // 9223372036854775807: a number would round it
  const ids = [big, -(2n ** 63n), 2n ** 64n - 1n, 2n ** 53n, -(2n ** 53n)];
  for (const kind of ['json', 'msgpack']) {
    for (const id of ids) assert.equal(decode(kind, encode(kind, { id })).id, id, `${kind} ${id}`);
    // What a number holds exactly stays a number.
    assert.equal(decode(kind, encode(kind, 2n ** 53n - 1n)), 2 ** 53 - 1);
    assert.equal(decode(kind, encode(kind, -(2n ** 53n - 1n))), -(2 ** 53 - 1));
  }
  // JSON text written by others: large integers exact, floats and strings as they are.
  const text = '{"id": 1832198348291850241, "ts":1700000000000, "f": 12345678901234567.5, "e": 1e300, "s": "12345678901234567890", "l": [9007199254740993, -9007199254740993, 9007199254740991], "o": {"__proto__": 1}}';
  const v = decode('json', utf8Encode(text));
  assert.equal(v.id, 1832198348291850241n);
  assert.equal(v.ts, 1700000000000);
  assert.equal(v.f, 12345678901234567.5);
  assert.equal(v.e, 1e300);
  assert.equal(v.s, '12345678901234567890');
  assert.deepEqual(v.l, [9007199254740993n, -9007199254740993n, 9007199254740991]);
  assert.deepEqual(Object.keys(v.o), ['__proto__']);
  assert.equal(Object.getPrototypeOf(v.o), Object.prototype);
  assert.equal(utf8Decode(encode('json', v)), '{"id":1832198348291850241,"ts":1700000000000,"f":1.2345678901234568e+16,"e":1e+300,"s":"12345678901234567890","l":[9007199254740993,-9007199254740993,9007199254740991],"o":{"__proto__":1}}');
  // The same errors as the native parser's, for text that is not JSON.
  for (const bad of ['[12345678901234567890', '{"a" 12345678901234567890}', '12345678901234567890 x', '["\\u0001 12345678901234567890', '[01234567890123456789]']) {
    assert.throws(() => decode('json', utf8Encode(bad)), CodecError, bad);
  }
  // Integers past 64 bits still cannot be packed.
  assert.throws(() => encode('msgpack', 2n ** 64n), /does not fit in 64 bits/);
});

test('what JSON.stringify wrote reads back as it was, beside exact integers', () => {
  // A number past 2^53 is a float: written in exponent form, it reads back as the number.
  for (const n of [2 ** 60, -(2 ** 60), 1e21, 9007199254740992]) {
    assert.equal(decode('json', encode('json', { n })).n, n, String(n));
    assert.equal(decode('json', encode('json', [n, 1n << 60n]))[0], n, String(n));
  }
  // Floats with many digits, and integers past 64 bits, are numbers.
  const v = decode('json', utf8Encode('[0.30000000000000004, 1234567890123456.7, 100000000000000000000, -1e400, 1700000000000123456]'));
  assert.deepEqual(v, [0.30000000000000004, 1234567890123456.7, 1e20, -Infinity, 1700000000000123456n]);
  // The exact parser reads what the native one reads.
  const texts = ['{"a": "x\\\\", "b": [1, 2.5, -0, true, false, null, {}], "c": "\\u00e9\\n\\"", "d": {"a": 1, "a": 2}}', ' [ 1 , 2 ]\n', '"\u2028"'];
  for (const t of texts) {
    const padded = t.replace(/1/, '1').replace(/$/, '');
    assert.deepEqual(decode('json', utf8Encode(`[${padded}, 12345678901234567890]`))[0], JSON.parse(padded), t);
  }
  // Dates, boxed values and class instances are written as JSON.stringify writes them.
  class Point { constructor() { this.x = 1; } }
  const mixed = { big: 1n << 60n, d: new Date(0), s: new String('ab'), n: new Number(5), p: new Point(), l: [1, 'a'] };
  assert.equal(utf8Decode(encode('json', mixed)), '{"big":1152921504606846976,"d":"1970-01-01T00:00:00.000Z","s":"ab","n":5,"p":{"x":1},"l":[1,"a"]}');
  assert.throws(() => encode('json', { big: 1n, p: Object.assign(new Point(), { y: NaN }) }), /cannot encode NaN/);
});
