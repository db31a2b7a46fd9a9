// The language benchmark's operators in JavaScript, as a user writes them:
// the same names and results as bench/operators (Rust) and ../python.

import * as weir from 'weir';

weir.flatMap('q1', (e) => (e.id % 2 === 0 ? [{ id: e.id, k: e.k, dollars: 0.908 * e.price, doubled: e.price * 2 }] : []));

// A stateless map: every event, decoded and encoded again.
weir.map('q0', (e) => e);

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
