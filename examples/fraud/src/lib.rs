//! Fraud detection, in the shape of Flink's tutorial: per account, a small
//! transaction followed by a large one within a minute raises an alert.
//!
//! State per account: the time and amount of its last small transaction,
//! and an event-time timer a minute later that forgets it.

use serde::{Deserialize, Serialize};
use weir::{Context, KeyedProcess, OpenContext, TimeDomain, ValueState};

/// How long a small transaction keeps an account suspect, ms.
pub const WINDOW_MS: i64 = 60_000;

/// A card transaction.
#[derive(Deserialize, Clone, Debug)]
pub struct Transaction {
    /// The account charged.
    pub account: String,
    /// The amount.
    pub amount: f64,
    /// When, ms since the epoch.
    pub ts: i64,
}

/// An account flagged.
#[derive(Serialize, Deserialize, Debug, PartialEq)]
pub struct Alert {
    /// The account.
    pub account: String,
    /// The small amount.
    pub small: f64,
    /// The large amount that followed.
    pub large: f64,
    /// When the small one happened.
    pub small_at: i64,
    /// When the large one happened.
    pub large_at: i64,
}

/// The detector.
pub struct Detect {
    small: f64,
    large: f64,
    /// The account's last small transaction: (time, amount).
    last_small: ValueState<(i64, f64)>,
}

impl KeyedProcess for Detect {
    type In = Transaction;
    type Out = Alert;

    fn open(ctx: &mut OpenContext) -> weir::Result<Self> {
        Ok(Detect {
            small: ctx.param_or("small", 1.0)?,
            large: ctx.param_or("large", 500.0)?,
            last_small: ctx.value_state("last-small")?,
        })
    }

    fn process(&mut self, t: Transaction, ctx: &mut Context<Alert>) -> weir::Result<()> {
        if let Some((at, amount)) = self.last_small.get()?
            && t.amount > self.large
            && t.ts >= at
            && t.ts - at <= WINDOW_MS
        {
            ctx.emit(Alert {
                account: t.account.clone(),
                small: amount,
                large: t.amount,
                small_at: at,
                large_at: t.ts,
            });
            ctx.delete_timer(TimeDomain::EventTime, at + WINDOW_MS);
            self.last_small.clear()?;
        }
        if t.amount < self.small {
            if let Some((at, _)) = self.last_small.get()? {
                ctx.delete_timer(TimeDomain::EventTime, at + WINDOW_MS);
            }
            self.last_small.set((t.ts, t.amount));
            ctx.register_timer(TimeDomain::EventTime, t.ts + WINDOW_MS);
        }
        Ok(())
    }

    fn on_timer(&mut self, _: i64, _: TimeDomain, _: &mut Context<Alert>) -> weir::Result<()> {
        // A minute passed without a large transaction.
        self.last_small.clear()
    }
}

weir::export_operators! {
    keyed_process "detect" => Detect;
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir::testing::Harness;

    fn tx(amount: f64, ts: i64) -> serde_json::Value {
        serde_json::json!({"account": "acc-1", "amount": amount, "ts": ts})
    }

    #[test]
    fn small_then_large_within_a_minute_alerts() {
        let mut h = Harness::keyed_process::<Detect>(&[]).unwrap();
        assert!(
            h.process::<_, _, Alert>("acc-1", &tx(0.5, 1_000), Some(1_000))
                .unwrap()
                .is_empty()
        );
        let out: Vec<Alert> = h
            .process("acc-1", &tx(900.0, 30_000), Some(30_000))
            .unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!((out[0].small, out[0].large), (0.5, 900.0));
        // Once only.
        assert!(
            h.process::<_, _, Alert>("acc-1", &tx(900.0, 31_000), Some(31_000))
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn a_minute_later_it_is_forgotten() {
        let mut h = Harness::keyed_process::<Detect>(&[]).unwrap();
        h.process::<_, _, Alert>("acc-1", &tx(0.5, 1_000), Some(1_000))
            .unwrap();
        h.advance_watermark::<Alert>(61_000).unwrap();
        assert!(
            h.process::<_, _, Alert>("acc-1", &tx(900.0, 61_500), Some(61_500))
                .unwrap()
                .is_empty()
        );
        // Also when the timer has not fired yet: the times tell.
        let mut h = Harness::keyed_process::<Detect>(&[]).unwrap();
        h.process::<_, _, Alert>("acc-1", &tx(0.5, 1_000), Some(1_000))
            .unwrap();
        assert!(
            h.process::<_, _, Alert>("acc-1", &tx(900.0, 70_000), Some(70_000))
                .unwrap()
                .is_empty()
        );
    }
}
