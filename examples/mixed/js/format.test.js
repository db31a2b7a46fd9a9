import assert from 'node:assert/strict';
import { test } from 'node:test';

import { Harness } from 'weir/testing';

import { tier } from './format.js';

test('totals get a tier and dollars', () => {
  const h = new Harness('format-total', { msgpack: true });
  assert.deepEqual(h.process({ user: 'ann', spent: 5600, purchases: 3, last: 'pot' }), [
    { user: 'ann', purchases: 3, spent: '$56.00', tier: 'gold', last: 'pot' },
  ]);
  assert.equal(tier(1999), 'bronze');
  assert.equal(tier(2000), 'silver');
});
