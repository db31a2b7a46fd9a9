import assert from 'node:assert/strict';
import { test } from 'node:test';

import * as weir from '../src/index.js';
import { CodecError } from '../src/codec.js';
import { read, reader, write, writer } from '../src/rows.js';
import { Harness } from '../src/testing.js';

const { bool, bytes, f32, f64, i8, i64, json, list, optional, record, string, text, u8, u32, u64 } = weir.types;

const hex = (b) => [...b].map((x) => x.toString(16).padStart(2, '0')).join(' ');

test("the contract's example row, byte for byte", () => {
  const Small = record({ id: u64, k: u32, name: optional(string) });
  assert.equal(text(Small), '{id: u64, k: u32, name: string?}');
  const row = write(Small, { id: 7, k: 3, name: 'ab' });
  assert.equal(hex(row), '00 07 00 00 00 00 00 00 00 03 00 00 00 15 00 00 00 02 00 00 00 61 62');
  assert.deepEqual(read(Small, row), { id: 7, k: 3, name: 'ab' });
  const nulled = write(Small, { id: 1, k: 2 });
  assert.equal(nulled[0], 0b100);
  assert.deepEqual(read(Small, nulled), { id: 1, k: 2, name: null });
});

const At = record({ lat: f64, lon: f32 });
const Event = record({
  id: u64,
  tags: list(string),
  scores: list(optional(i8)),
  at: optional(At),
  raw: bytes,
  extra: json,
  ok: bool,
  small: u8,
});

test('nested records, lists, optionals, bytes and json round trip in every codec', () => {
  assert.equal(
    text(Event),
    '{id: u64, tags: list<string>, scores: list<i8?>, at: {lat: f64, lon: f32}?, raw: bytes, extra: json, ok: bool, small: u8}',
  );
  const e = {
    id: 2 ** 53 - 1,
    tags: ['a', '', 'ü'],
    scores: [1, null, -128],
    at: { lat: 1.5, lon: 0.5 },
    raw: Uint8Array.of(0, 255),
    extra: { x: [1, null] },
    ok: true,
    small: 255,
  };
  assert.deepEqual(read(Event, write(Event, e)), e);
  const empty = { id: 0, tags: [], scores: [], at: null, raw: new Uint8Array(0), extra: null, ok: false, small: 0 };
  assert.deepEqual(read(Event, write(Event, empty)), empty);
  for (const codec of ['json', 'msgpack', 'row']) {
    assert.deepEqual(reader(codec, Event)(writer(codec, Event)(e)), e, codec);
  }
  // Upstream JSON read by name: unknown fields dropped, a missing optional
  // null, a missing required one an error naming it.
  const readAt = reader('json', record({ lat: f64, note: optional(string) }));
  assert.deepEqual(readAt(new TextEncoder().encode('{"lat": 2, "other": 1}')), { lat: 2, note: null });
  assert.throws(() => readAt(new TextEncoder().encode('{}')), /field `lat`/);
});

test('bad values and bad rows are clear errors', () => {
  const Small = record({ id: u64, k: u32, name: optional(string) });
  assert.throws(() => write(Small, { k: 1 }), /field `id` is undefined, but its type is not optional/);
  assert.throws(() => write(Small, { id: 1, k: 2 ** 32 }), /out of u32's range/);
  assert.throws(() => write(Small, { id: '1', k: 1 }), /not a whole number/);
  assert.throws(() => read(Small, new Uint8Array(5)), /shorter than its 21 bytes/);
  const row = write(Small, { id: 7, k: 3, name: 'ab' });
  row[17] = 99;
  assert.throws(() => read(Small, row), CodecError);
  const tags = list(string);
  assert.throws(() => read(tags, write(tags, ['a', 'b']).subarray(0, 12)), /does not fit/);
  assert.throws(() => record({ x: Number }), /not a Weir type/);
  assert.throws(() => optional(optional(i64)), /optional of an optional/);
});

const Bid = record({ id: u64, k: u32, price: u64, ts: i64 });
const Priced = record({ id: u64, dollars: f64, cheap: bool });

weir.map('r-price', (b) => ({ id: b.id, dollars: 0.908 * b.price, cheap: b.price < 100 }), { input: Bid, output: Priced });
weir.filter('r-even', (b) => b.id % 2 === 0, { input: Bid });
weir.keyedProcess(
  'r-count',
  class {
    open(ctx) {
      this.n = ctx.valueState('n');
    }
    *process(b, ctx) {
      const n = (this.n.value() ?? 0) + 1;
      this.n.update(n);
      yield { id: ctx.key, dollars: n, cheap: false };
    }
  },
  { input: Bid, output: Priced },
);

test('typed operators read and write rows and plain values alike', () => {
  const bids = [0, 1, 2, 3].map((i) => ({ id: i, k: i % 3, price: i * 50, ts: 1000 + i }));
  for (const rows of [false, true]) {
    let h = new Harness('r-price', { rows });
    assert.equal(h.codecs.input, rows ? 'row' : 'json');
    assert.deepEqual(
      bids.map((b) => h.process(b)),
      bids.map((b) => [{ id: b.id, dollars: 0.908 * b.price, cheap: b.price < 100 }]),
    );
    h = new Harness('r-even', { rows });
    assert.deepEqual(bids.flatMap((b) => h.process(b)), [bids[0], bids[2]]);
    h = new Harness('r-count', { rows });
    const outs = [...bids, ...bids].flatMap((b) => h.process(b, { key: b.k }));
    assert.deepEqual(
      outs.map((o) => [o.id, o.dollars]),
      [[0, 1], [1, 1], [2, 1], [0, 2], [0, 3], [1, 2], [2, 2], [0, 4]],
    );
  }
});

test('declared types are checked when registered', () => {
  assert.throws(() => weir.map('r-bad', (x) => x, { input: 'u64' }), /its input type is not a Weir type/);
  assert.throws(() => weir.filter('r-bad-filter', () => true, { input: Bid, output: Bid }), /passes its records on/);
});

test("a row of every kind is the Rust writer's, byte for byte", async () => {
  const { readFile } = await import('node:fs/promises');
  const fixture = JSON.parse(await readFile(new URL('../../../types/tests/fixtures/every-kind.json', import.meta.url), 'utf8'));
  const { i16, u16 } = weir.types;
  const Every = record({
    id: u64,
    tags: list(string),
    scores: list(optional(i8)),
    at: optional(record({ lat: f64, lon: f32 })),
    raw: bytes,
    extra: json,
    ok: bool,
    small: u8,
    neg: i16,
    nested: list(list(u16)),
    none: optional(string),
  });
  assert.equal(text(Every), fixture.type);
  const value = {
    id: 5,
    tags: ['a', 'bc'],
    scores: [1, null, -3],
    at: { lat: 1.5, lon: 0.25 },
    raw: Uint8Array.of(0, 255),
    extra: { x: [1, null] },
    ok: true,
    small: 200,
    neg: -300,
    nested: [[1, 2], [], [3]],
    none: null,
  };
  assert.equal(hex(write(Every, value)).replaceAll(' ', ''), fixture.hex);
  const bytesOf = Uint8Array.from(fixture.hex.match(/../g).map((h) => parseInt(h, 16)));
  assert.deepEqual(read(Every, bytesOf), value);
});

test('a filter passes whole records on, whatever fields it declares', async () => {
  const { typedCodecs } = await import('../src/rows.js');
  const { decode, encode } = await import('../src/codec.js');
  const IdOnly = record({ id: u64 });
  const c = typedCodecs({ input: 'msgpack', output: 'json', sideOutputs: {}, state: 'msgpack' }, IdOnly, IdOnly);
  const rec = encode('msgpack', { id: 1, k: 2 });
  assert.deepEqual(decode('json', c.transcode(rec)), { id: 1, k: 2 });
  assert.deepEqual(c.read(rec), { id: 1 });
  assert.equal(text(record({ 'user-id': u64 })), '{"user-id": u64}');
});

test('64-bit fields beyond 2^53 read as exact BigInts in rows and plain values', () => {
  const Ids = record({ id: u64, delta: i64, n: u32 });
  const value = { id: 2n ** 64n - 1n, delta: -(2n ** 63n), n: 5 };
  const row = write(Ids, value);
  assert.equal(hex(row.subarray(1, 9)), 'ff ff ff ff ff ff ff ff');
  assert.deepEqual(read(Ids, row), value);
  // What a number holds exactly is a number.
  assert.deepEqual(read(Ids, write(Ids, { id: 2 ** 53 - 1, delta: -7, n: 5 })), { id: 2 ** 53 - 1, delta: -7, n: 5 });
  for (const codec of ['json', 'msgpack']) {
    const w = writer(codec, Ids);
    const r = reader(codec, Ids);
    assert.deepEqual(r(w(value)), value, codec);
  }
  // A BigInt where a float or string is declared is refused with its value named.
  assert.throws(() => write(record({ x: f64 }), { x: 5n }), /5 is not a number/);
  assert.throws(() => write(Ids, { id: 2n ** 64n, delta: 0, n: 0 }), /out of u64's range/);
});

test('a whole number past 2^53 in JSON text is a number where a float is declared', () => {
  const T = record({ x: f64, n: u8 });
  assert.deepEqual(reader('json', T)(new TextEncoder().encode('{"x": 10000000000000000, "n": 7}')), { x: 1e16, n: 7 });
  // A BigInt a narrow integer field holds is written as its number.
  assert.deepEqual(read(T, write(T, { x: 1.5, n: 7n })), { x: 1.5, n: 7 });
  // A number past 2^53 in a 64-bit integer field is written as an integer, in JSON too.
  assert.equal(new TextDecoder().decode(writer('json', record({ id: u64 }))({ id: 2 ** 60 })), '{"id":1152921504606846976}');
});

