// The JavaScript part of the mixed example: each running total, with the
// customer's tier and the amount in dollars.

import * as weir from 'weir';

/** The tier of a customer who spent `cents`. */
export function tier(cents) {
  if (cents >= 5000) return 'gold';
  if (cents >= 2000) return 'silver';
  return 'bronze';
}

weir.map('format-total', (total) => ({
  user: total.user,
  purchases: total.purchases,
  spent: `$${(total.spent / 100).toFixed(2)}`,
  tier: tier(total.spent),
  last: total.last,
}));
