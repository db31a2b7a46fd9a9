// Flag an account when a small transaction (below `small`) is followed by a
// large one (above `large`) within one minute of event time: a card tested
// with a small charge, then used for a big one.

import * as weir from 'weir';

/** How long after a small transaction a large one is suspicious, ms. */
export const WINDOW_MS = 60_000;

/** What the detector keeps of an account's last small transaction: kept
 * as rows of this type. */
const Small = weir.types.record({ at: weir.types.i64, amount: weir.types.f64 });

export class Detect {
  open(ctx) {
    this.small = ctx.requiredParam('small', Number);
    this.large = ctx.requiredParam('large', Number);
    // The account's last small transaction, while it counts.
    this.lastSmall = ctx.valueState('last-small', { type: Small });
  }

  process(t, ctx) {
    const last = this.lastSmall.value();
    if (last !== null) {
      const { at, amount } = last;
      if (t.amount > this.large && t.ts >= at && t.ts - at <= WINDOW_MS) {
        ctx.emit({ account: t.account, small: amount, large: t.amount, small_at: at, large_at: t.ts });
        ctx.deleteEventTimeTimer(at + WINDOW_MS);
        this.lastSmall.clear();
      }
    }
    if (t.amount < this.small) {
      const previous = this.lastSmall.value();
      if (previous !== null) ctx.deleteEventTimeTimer(previous.at + WINDOW_MS);
      this.lastSmall.update({ at: t.ts, amount: t.amount });
      ctx.registerEventTimeTimer(t.ts + WINDOW_MS);
    }
  }

  onTimer() {
    // A minute passed without a large transaction: forget the small one.
    this.lastSmall.clear();
  }
}

weir.keyedProcess('detect', Detect);
