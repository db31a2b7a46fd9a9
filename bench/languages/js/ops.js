// The language benchmark's operators in JavaScript, as a user writes them:
// the same names and results as bench/operators (Rust) and ../python.

import * as weir from 'weir';

weir.flatMap('q1', (e) => (e.id % 2 === 0 ? [{ id: e.id, k: e.k, dollars: 0.908 * e.price, doubled: e.price * 2 }] : []));

// A stateless map: every event, decoded and encoded again.
weir.map('q0', (e) => e);

// q1 and q0 on declared types: the generator's rows in, rows out.
const { f64, i64, record, u32, u64 } = weir.types;
const Event = record({ id: u64, k: u32, price: u64, ts: i64 });
const Q1 = record({ id: u64, k: u32, dollars: f64, doubled: u64 });
weir.flatMap(
  'q1-typed',
  (e) => (e.id % 2 === 0 ? [{ id: e.id, k: e.k, dollars: 0.908 * e.price, doubled: e.price * 2 }] : []),
  { input: Event, output: Q1 },
);
weir.map('q0-typed', (e) => e, { input: Event, output: Event });

// The benchmark's text is ASCII; StarlingMonkey's regular expressions have
// no Unicode property escapes (\p{L}), so both engines split on ASCII.
weir.flatMap('split-words', (line) => line.toLowerCase().split(/[^a-z0-9]+/).filter(Boolean));

weir.keyedProcess('count', class {
  open(ctx) {
    this.count = ctx.valueState('count');
  }
  process(word, ctx) {
    const count = (this.count.value() ?? 0) + 1;
    this.count.update(count);
    ctx.emit({ word, count });
  }
});

weir.windowAggregate('windowed-count', class {
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
    return { k: window.key, window_start: window.start, window_end: window.end, n: acc };
  }
});
