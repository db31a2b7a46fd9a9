import assert from 'node:assert/strict';
import { test } from 'node:test';

import * as weir from '../src/index.js';
import { Harness, session, sliding, tumbling } from '../src/testing.js';

weir.map('t-double', (n) => n * 2);
weir.flatMap('t-split', (line) => line.toLowerCase().split(/[^\p{L}\p{N}]+/u).filter(Boolean));
weir.filter('t-even', (n) => n % 2 === 0);
weir.timestamps('t-ts', (r) => r.t);
weir.process('t-route', class {
  open(ctx) {
    this.limit = ctx.requiredParam('limit', Number);
  }
  process(n, ctx) {
    if (n > this.limit) ctx.emitSide('big', n);
    else ctx.emit(n);
  }
});
function lookUp(record) {
  return record.missing.field;
}
weir.map('t-fails', lookUp);

weir.keyedProcess('t-sum', class {
  open(ctx) {
    this.total = ctx.valueState('total');
  }
  *process(n, ctx) {
    const total = (this.total.value() ?? 0) + n;
    this.total.update(total === 0 ? null : total);
    yield [ctx.key, total];
  }
});

weir.keyedProcess('t-kinds', class {
  open(ctx) {
    this.seen = ctx.listState('seen');
    this.counts = ctx.mapState('counts');
  }
  process(r, ctx) {
    if (r.op === 'add') {
      this.seen.add(r.v);
      this.counts.put(r.v, (this.counts.get(r.v) ?? 0) + 1);
    } else if (r.op === 'read') {
      ctx.emit({ seen: this.seen.get(), counts: Object.fromEntries(this.counts.entries()), hasA: this.counts.contains('a'), empty: this.counts.isEmpty() });
    } else if (r.op === 'drop') {
      this.counts.remove(r.v);
      this.seen.update(this.seen.get().filter((x) => x !== r.v));
    } else {
      this.seen.clear();
      this.counts.clear();
    }
  }
});

weir.keyedProcess('t-quiet', class {
  open(ctx) {
    this.count = ctx.valueState('count');
    this.deadline = ctx.valueState('deadline');
  }
  process(r, ctx) {
    this.count.update((this.count.value() ?? 0) + 1);
    const old = this.deadline.value();
    if (old != null) ctx.deleteEventTimeTimer(old);
    this.deadline.update(ctx.timestamp + 10000);
    ctx.registerEventTimeTimer(ctx.timestamp + 10000);
  }
  onTimer(time, domain, ctx) {
    ctx.emit({ key: ctx.key, count: this.count.value(), at: time, domain });
    this.count.clear();
    this.deadline.clear();
  }
});

weir.windowAggregate('t-count', class {
  createAccumulator() {
    return 0;
  }
  add(value, acc) {
    return acc + 1;
  }
  merge(a, b) {
    return a + b;
  }
  getResult(acc, window) {
    return { key: window.key, start: window.start, count: acc };
  }
});

weir.windowProcess('t-list', class {
  process(window, elements) {
    return [{ key: window.key, start: window.start, end: window.end, values: elements.sort((a, b) => a - b) }];
  }
});

test('stateless kinds', () => {
  assert.deepEqual(new Harness('t-double').process(21), [42]);
  assert.deepEqual(new Harness('t-split').process('To be, or NOT'), ['to', 'be', 'or', 'not']);
  const h = new Harness('t-even');
  assert.deepEqual(h.process(4), [4]);
  assert.deepEqual(h.process(3), []);
});

test('a timestamp assigner passes records on with their time', () => {
  const h = new Harness('t-ts', { msgpack: true });
  assert.deepEqual(h.process({ t: 1234, v: 'x' }), [{ t: 1234, v: 'x' }]);
  assert.deepEqual(h.lastTimestamps, [1234]);
  assert.throws(() => h.process({ t: 'soon' }), /whole number of ms/);
});

test('a process with parameters and side outputs', () => {
  const h = new Harness('t-route', { params: { limit: '10' } });
  assert.deepEqual(h.process(50), []);
  assert.deepEqual(h.process(5), [5]);
  assert.deepEqual(h.sideOutput('big'), [50]);
  assert.throws(() => new Harness('t-route'), /failed to open: Error: missing parameter `limit`/);
});

test('an exception names the operator and carries the stack', () => {
  assert.throws(() => new Harness('t-fails').process({}), (e) => {
    assert.match(e.message, /^operator `t-fails`: TypeError: Cannot read properties of undefined/);
    assert.match(e.message, /\n {4}at lookUp /);
    // The SDK's own frames are left out.
    assert.doesNotMatch(e.message, /weirSdk|driver\.js/);
    return true;
  });
});

weir.map('t-throws-value', (r) => {
  throw { id: r.id };
});

test('a thrown value JSON.stringify refuses is still described', () => {
  assert.throws(() => new Harness('t-throws-value').process({ id: 5 }), /operator `t-throws-value`: \{"id":5\}/);
  // A 64-bit id past 2^53 arrives as a BigInt, which JSON.stringify refuses.
  assert.throws(() => new Harness('t-throws-value').process({ id: 1n << 60n }), /operator `t-throws-value`: \[object Object\]/);
});

test('unknown operators and bad registrations are clear errors', () => {
  assert.throws(() => new Harness('nope'), /no operator named `nope`/);
  assert.throws(() => weir.map((x) => x), /name/);
  assert.throws(() => weir.keyedProcess('t-bad', class {}), /`process` method/);
  assert.throws(() => weir.map('t-double', (x) => x), /two operators are named `t-double`/);
});

for (const msgpack of [false, true]) {
  test(`value state per key (msgpack: ${msgpack})`, () => {
    const h = new Harness('t-sum', { msgpack });
    assert.deepEqual(h.process(5, { key: 'a' }), [['a', 5]]);
    assert.deepEqual(h.process(2, { key: 'b' }), [['b', 2]]);
    assert.deepEqual(h.process(2, { key: 'a' }), [['a', 7]]);
    assert.deepEqual(h.process(-7, { key: 'a' }), [['a', 0]]);
    assert.deepEqual(h.process(1, { key: 'a' }), [['a', 1]]);
  });

  test(`list and map state (msgpack: ${msgpack})`, () => {
    const h = new Harness('t-kinds', { msgpack });
    for (const v of ['b', 'a', 'b']) h.process({ op: 'add', v }, { key: 'k' });
    const read = { op: 'read' };
    assert.deepEqual(h.process(read, { key: 'k' }), [{ seen: ['b', 'a', 'b'], counts: { a: 1, b: 2 }, hasA: true, empty: false }]);
    assert.deepEqual(h.process(read, { key: 'other' }), [{ seen: [], counts: {}, hasA: false, empty: true }]);
    h.process({ op: 'drop', v: 'a' }, { key: 'k' });
    assert.deepEqual(h.process(read, { key: 'k' })[0].counts, { b: 2 });
    assert.deepEqual(h.process(read, { key: 'k' })[0].seen, ['b', 'b']);
    h.process({ op: 'clear' }, { key: 'k' });
    assert.deepEqual(h.process(read, { key: 'k' }), [{ seen: [], counts: {}, hasA: false, empty: true }]);
  });
}

test('event-time timers fire with the watermark and can be deleted', () => {
  const h = new Harness('t-quiet');
  h.process({}, { key: 'k', timestamp: 0 });
  h.process({}, { key: 'k', timestamp: 5000 });
  assert.deepEqual(h.timers, [['event-time', 15000]]);
  assert.deepEqual(h.advanceWatermark(14999), []);
  assert.deepEqual(h.advanceWatermark(20000), [{ key: 'k', count: 2, at: 15000, domain: 'event-time' }]);
  assert.deepEqual(h.lastTimestamps, [15000]);
  assert.deepEqual(h.timers, []);
});

test('a failed call leaves state as it was and emits nothing', () => {
  weir.keyedProcess('t-fails-after-update', class {
    open(ctx) {
      this.n = ctx.valueState('n');
    }
    process(r, ctx) {
      this.n.update((this.n.value() ?? 0) + 1);
      ctx.emit(this.n.value());
      if (r === 'boom') throw new Error('boom');
    }
  });
  const h = new Harness('t-fails-after-update');
  assert.deepEqual(h.process('ok', { key: 'k' }), [1]);
  assert.throws(() => h.process('boom', { key: 'k' }), /Error: boom/);
  assert.deepEqual(h.process('ok', { key: 'k' }), [2]);
});

test('tumbling windows fire with the watermark and again when late', () => {
  const h = new Harness('t-count', { window: tumbling(10000, { allowedLatenessMs: 5000 }), msgpack: true });
  for (const t of [1000, 4000, 12000]) assert.deepEqual(h.process({}, { key: 'a', timestamp: t }), []);
  assert.deepEqual(h.advanceWatermark(9999), [{ key: 'a', start: 0, count: 2 }]);
  assert.deepEqual(h.lastTimestamps, [9999]);
  assert.deepEqual(h.process({}, { key: 'a', timestamp: 3000 }), [{ key: 'a', start: 0, count: 3 }]);
  h.advanceWatermark(15000);
  assert.deepEqual(h.process({ late: true }, { key: 'a', timestamp: 5000 }), []);
  assert.deepEqual(h.sideOutput('late'), [{ late: true }]);
});

test('sliding windows and sessions', () => {
  const s = new Harness('t-count', { window: sliding(30, 10) });
  for (const t of [0, 15, 29]) s.process(1, { key: 'k', timestamp: t });
  assert.deepEqual(s.advanceWatermark(1000).map((w) => [w.start, w.count]), [[-20, 1], [-10, 2], [0, 3], [10, 2], [20, 1]]);
  const h = new Harness('t-list', { window: session(100) });
  for (const [t, v] of [[0, 1], [50, 2], [300, 3], [150, 4]]) h.process(v, { key: 'u', timestamp: t });
  assert.deepEqual(h.advanceWatermark(10000), [
    { key: 'u', start: 0, end: 250, values: [1, 2, 4] },
    { key: 'u', start: 300, end: 400, values: [3] },
  ]);
  assert.throws(() => new Harness('t-count'), /no `window`/);
});

test('a value state that cannot be encoded fails the call', () => {
  weir.keyedProcess('t-unencodable', class {
    open(ctx) {
      this.v = ctx.valueState('v');
    }
    process(r, ctx) {
      this.v.update(r === 'bad' ? () => 1 : r);
      ctx.emit(r);
    }
  });
  const h = new Harness('t-unencodable', { msgpack: true });
  assert.deepEqual(h.process('ok', { key: 'k' }), ['ok']);
  assert.throws(() => h.process('bad', { key: 'k' }), /operator `t-unencodable`: CodecError: cannot encode/);
  assert.deepEqual(h.process('again', { key: 'k' }), ['again']);
});

weir.keyedProcess('t-ttl', class {
  open(ctx) {
    this.count = ctx.valueState('count', { ttlMs: 1000 });
    this.recent = ctx.listState('recent', { ttlMs: 10000 });
    this.flags = ctx.mapState('flags', { ttlMs: 1000, refreshOnRead: true });
  }
  process(r, ctx) {
    if (r === 'read') {
      ctx.emit({ recent: this.recent.get(), flags: Object.fromEntries(this.flags.entries()) });
      return;
    }
    const n = (this.count.value() ?? 0) + 1;
    this.count.update(n);
    // Read, then added to: written back whole, its old elements keep the
    // time they were added at.
    if (this.recent.get().includes(r)) throw new Error(`${r} twice`);
    this.recent.add(r);
    this.flags.put(r, true);
    ctx.emit(n);
  }
});

for (const msgpack of [false, true]) {
  test(`state with a time-to-live expires by processing time (msgpack: ${msgpack})`, () => {
    const h = new Harness('t-ttl', { msgpack });
    assert.deepEqual(h.process('a', { key: 'k' }), [1]);
    h.advanceProcessingTime(999);
    assert.deepEqual(h.process('b', { key: 'k' }), [2]);
    h.advanceProcessingTime(1998);
    // Flag `a`, put at 0, expired at 1,000; `b` is read (renewed) at 1,998.
    assert.deepEqual(h.process('read', { key: 'k' }), [{ recent: ['a', 'b'], flags: { b: true } }]);
    // The count, written at 999, expired at 1,999.
    h.advanceProcessingTime(2500);
    assert.deepEqual(h.process('c', { key: 'k' }), [1]);
    h.advanceProcessingTime(10000);
    assert.deepEqual(h.process('read', { key: 'k' }), [{ recent: ['b', 'c'], flags: {} }]);
    h.advanceProcessingTime(12500);
    assert.deepEqual(h.process('read', { key: 'k' }), [{ recent: [], flags: {} }]);
  });
}

test('a time-to-live is a positive number of milliseconds', () => {
  weir.keyedProcess('t-ttl-bad', class {
    open(ctx) {
      this.v = ctx.valueState('v', { ttlMs: 0 });
    }
    process() {}
  });
  assert.throws(() => new Harness('t-ttl-bad').process(1, { key: 'k' }), /ttlMs/);
});
