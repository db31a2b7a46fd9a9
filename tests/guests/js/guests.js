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
