// The operators of {name}: split lines into words, count each word.

import * as weir from 'weir';

weir.flatMap('split-words', (line) => line.toLowerCase().split(/[^\p{L}\p{N}]+/u).filter(Boolean));

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
