import assert from 'node:assert/strict';
import { test } from 'node:test';

import { Harness } from 'weir/testing';

import './index.js';

test('splits and counts', () => {
  assert.deepEqual(new Harness('split-words').process('The fox, the dog'), ['the', 'fox', 'the', 'dog']);
  const h = new Harness('count', { msgpack: true });
  h.process('the', { key: 'the' });
  assert.deepEqual(h.process('the', { key: 'the' }), [{ word: 'the', count: 2 }]);
});
