import assert from 'node:assert/strict';
import { test } from 'node:test';

import { encode } from '../src/codec.js';
import { ListState, StateCache } from '../src/state.js';

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
