// JavaScript operators for Weir's tests: a well-behaved one and the hostile
// catalogue (an exception, an endless loop, a memory bomb).

import * as weir from 'weir';

weir.map('js-upper', (line) => line.toUpperCase());

function parse(line) {
  const n = Number(line);
  if (Number.isNaN(n)) throw new RangeError(`cannot parse record ${JSON.stringify(line)} as a number`);
  return n;
}

weir.map('js-throws', function throwing(line) {
  return parse(line);
});

weir.map('js-endless', () => {
  let n = 0;
  for (;;) n++;
});

weir.map('js-membomb', () => {
  const hoard = [];
  for (;;) hoard.push(new Uint8Array(1 << 20).fill(7));
});

const windowCount = (window, count) => ({
  key: window.key, window_start: window.start, window_end: window.end, count,
});

// The windowed-counts example's count, folded as records come.
weir.windowAggregate('js-window-count', class {
  createAccumulator() { return 0; }
  add(value, acc) { return acc + 1; }
  merge(a, b) { return a + b; }
  getResult(acc, window) { return windowCount(window, acc); }
});

// The same count, from all of a window's records at once.
weir.windowProcess('js-window-records', class {
  *process(window, elements) { yield windowCount(window, elements.length); }
});

// Typed: the generator's `numbers` in, a record of every kind of field out.
const { bool, f64, i64, list, optional, record, string, u32, u64 } = weir.types;
const Number_ = record({ id: u64, k: u32, price: u64, ts: i64 });
const Priced = record({
  id: u64,
  dollars: f64,
  cheap: bool,
  label: string,
  tags: list(string),
  at: optional(record({ k: u32, ts: i64 })),
  note: optional(string),
});
weir.map(
  'js-typed-price',
  (n) => ({
    id: n.id,
    dollars: 0.908 * n.price,
    cheap: n.price < 100,
    label: `#${n.id}`,
    tags: new Array(n.id % 3).fill('p'),
    at: n.id % 2 === 0 ? { k: n.k, ts: n.ts } : null,
    note: null,
  }),
  { input: Number_, output: Priced },
);
weir.map('js-mistyped', (n) => n.k, { input: record({ id: u64, k: string }) });

// 64-bit ids past 2^53 (which a number would round): the next id, exact.
weir.map('js-next-id', (e) => ({
  id: e.id,
  next: typeof e.id === 'bigint' ? e.id + 1n : e.id + 1,
  big: typeof e.id === 'bigint',
}));

// The same on rows: a u64 and an i64 past 2^53 read and written in place.
const Ids = record({ id: u64, delta: i64 });
weir.map(
  'js-next-id-typed',
  (e) => ({ id: e.id, delta: typeof e.delta === 'bigint' ? e.delta - 1n : e.delta - 1 }),
  { input: Ids, output: Ids },
);

// A running count per word in states that live an hour: what it reads back
// is what it wrote (the expiry stamps the runtime keeps are never seen).
weir.keyedProcess('js-ttl-count', class {
  open(ctx) {
    this.count = ctx.valueState('count', { ttlMs: 3_600_000 });
    this.seen = ctx.listState('seen', { ttlMs: 3_600_000 });
    this.last = ctx.mapState('last', { ttlMs: 3_600_000, refreshOnRead: true });
  }
  *process(word) {
    const n = (this.count.value() ?? 0) + 1;
    const last = this.last.get('n') ?? null;
    if (last !== (n > 1 ? n - 1 : null)) throw new Error(`${word}: map says ${last}, count ${n - 1}`);
    if (this.seen.get().length !== n - 1) throw new Error(`${word}: list holds ${this.seen.get().length}, count ${n - 1}`);
    this.count.update(n);
    this.seen.add(n);
    this.last.put('n', n);
    yield { word, count: n };
  }
});
