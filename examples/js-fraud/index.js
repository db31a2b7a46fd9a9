// Flag an account when a small transaction (below `small`) is followed by a
// large one (above `large`) within one minute of event time: a card tested
// with a small charge, then used for a big one.

import * as weir from 'weir';

/** How long after a small transaction a large one is suspicious, ms. */
export const WINDOW_MS = 60_000;

export class Detect {
  open(ctx) {
    this.small = ctx.requiredParam('small', Number);
    this.large = ctx.requiredParam('large', Number);
    // [time, amount] of the account's last small transaction, while it
    // counts.
    this.lastSmall = ctx.valueState('last-small');
  }

  process(t, ctx) {
    const last = this.lastSmall.value();
    if (last !== null) {
      const [at, amount] = last;
      if (t.amount > this.large && t.ts >= at && t.ts - at <= WINDOW_MS) {
        ctx.emit({ account: t.account, small: amount, large: t.amount, small_at: at, large_at: t.ts });
        ctx.deleteEventTimeTimer(at + WINDOW_MS);
        this.lastSmall.clear();
      }
    }
    if (t.amount < this.small) {
      const previous = this.lastSmall.value();
      if (previous !== null) ctx.deleteEventTimeTimer(previous[0] + WINDOW_MS);
      this.lastSmall.update([t.ts, t.amount]);
      ctx.registerEventTimeTimer(t.ts + WINDOW_MS);
    }
  }

  onTimer() {
    // A minute passed without a large transaction: forget the small one.
    this.lastSmall.clear();
  }
}

weir.keyedProcess('detect', Detect);
