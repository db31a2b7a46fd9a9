import assert from 'node:assert/strict';
import { test } from 'node:test';

import { encode } from '../src/codec.js';
import { read, write } from '../src/rows.js';
import { ListState, MapState, StateCache, ValueState } from '../src/state.js';
import { optional, record, string, u32, u64 } from '../src/types.js';

test('a list read and added to is appended to, and a list updated is replaced', () => {
  const codec = 'json';
  const bytes = (...values) => values.map((v) => encode(codec, v));
  const host = {
    declareState: () => 7,
    getList: () => bytes('a', 'b'),
  };
  const cache = new StateCache(host, codec);
  const list = new ListState(cache, cache.declare('l', 'list'));
  const key = new Uint8Array([107]);
  const ops = () => {
    const taken = cache.take();
    cache.setKey(key);
    return taken.ops;
  };
  cache.setKey(key);
  assert.deepEqual(list.get(), ['a', 'b']);
  list.add('c');
  // The stored elements are not written again (they keep their expiry
  // times): only what was added goes.
  assert.deepEqual(ops(), [{ op: 'append-list', state: 7, key, values: bytes('c') }]);
  list.get();
  assert.deepEqual(ops(), []);
  list.add('c');
  list.get();
  list.add('d');
  assert.deepEqual(ops(), [{ op: 'append-list', state: 7, key, values: bytes('c', 'd') }]);
  list.update(list.get().filter((v) => v !== 'a'));
  assert.deepEqual(ops(), [{ op: 'replace-list', state: 7, key, values: bytes('b') }]);
  list.get();
  list.clear();
  list.add('e');
  assert.deepEqual(ops(), [{ op: 'replace-list', state: 7, key, values: bytes('e') }]);
});

test('a state declared with a type keeps rows of it, its map keys in the codec', () => {
  const codec = 'msgpack';
  const Tally = record({ count: u64, last: optional(string) });
  const declared = [];
  const host = {
    declareTypedState: (name, kind, ttl, valueType) => {
      declared.push([name, kind, ttl, valueType]);
      return declared.length;
    },
    getValues: (states, keys) => keys.map(() => write(Tally, { count: 4, last: 'x' })),
    getEntry: () => null,
  };
  const cache = new StateCache(host, codec);
  const tally = new ValueState(cache, cache.declare('tally', 'value', null, Tally));
  const per = new MapState(cache, cache.declare('per', 'map', { ttlMs: 5, refreshOnRead: false }, u32));
  assert.deepEqual(declared, [
    ['tally', 'value', null, '{count: u64, last: string?}'],
    ['per', 'map', { ttlMs: 5, refreshOnRead: false }, 'u32'],
  ]);
  const key = new Uint8Array([107]);
  cache.setKey(key);
  assert.deepEqual(tally.value(), { count: 4, last: 'x' });
  tally.update({ count: 5, last: 'y' });
  per.put('a', 2);
  const { puts, ops } = cache.take();
  assert.equal(puts.length, 1);
  assert.deepEqual(read(Tally, puts[0].values.data.slice(0, puts[0].values.ends[0])), { count: 5, last: 'y' });
  assert.deepEqual(ops, [{ op: 'put-entry', state: 2, key, mapKey: encode(codec, 'a'), value: write(u32, 2) }]);
});
