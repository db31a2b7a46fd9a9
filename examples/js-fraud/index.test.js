import assert from 'node:assert/strict';
import { test } from 'node:test';

import { Harness } from 'weir/testing';

import './index.js';

const params = { small: '1.00', large: '500.00' };
const tx = (amount, ts) => ({ account: 'acc-1', amount, ts });
const send = (h, amount, ts) => h.process(tx(amount, ts), { key: 'acc-1', timestamp: ts });

test('a small then a large transaction within a minute alerts once', () => {
  const h = new Harness('detect', { params, msgpack: true });
  assert.deepEqual(send(h, 0.5, 1000), []);
  assert.deepEqual(send(h, 900, 30000), [{ account: 'acc-1', small: 0.5, large: 900, small_at: 1000, large_at: 30000 }]);
  assert.deepEqual(send(h, 900, 31000), []);
  assert.deepEqual(h.timers, []);
});

test('a minute later the small one is forgotten', () => {
  const h = new Harness('detect', { params });
  send(h, 0.5, 1000);
  h.advanceWatermark(61000);
  assert.deepEqual(send(h, 900, 61500), []);
  const late = new Harness('detect', { params });
  send(late, 0.5, 1000);
  assert.deepEqual(send(late, 900, 70000), []);
});

test('a newer small transaction restarts the minute', () => {
  const h = new Harness('detect', { params });
  send(h, 0.5, 1000);
  send(h, 0.2, 50000);
  assert.deepEqual(h.timers, [['event-time', 110000]]);
  assert.equal(send(h, 700, 100000).length, 1);
});
