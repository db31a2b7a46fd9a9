//! # Dead letters: poison records set aside, every other record exact
//!
//! Orders as JSON lines → `to-eur` converts each amount to euro cents (it
//! panics on a currency missing from its table: a bug) → `totals` keeps
//! each customer's running total in keyed state (it refuses a negative
//! amount with an error) → JSON lines `{customer, orders, cents}`.
//!
//! The source and both operators have `on-error = "dead-letter"`: a line
//! that is not JSON, an order whose currency makes `to-eur` panic and one
//! whose amount `totals` refuses go to the job's dead-letter output with
//! the error, and every other order counts once — the runtime calls an
//! operator again on halves of a failed batch until the records it fails
//! on are alone, and a failed call leaves no output or state behind.
//!
//! ```text
//! weir run examples/dead-letters --param output=/tmp/totals.jsonl --param dead-letters=/tmp/dead.jsonl
//! ```

use serde::{Deserialize, Serialize};
use weir::{Context, KeyedProcess, OpenContext, ValueState};

/// Euro cents per 100 units of each currency the converter knows.
pub const RATES: &[(&str, i64)] = &[("EUR", 100), ("USD", 92), ("GBP", 117), ("CHF", 106)];

/// An order.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct Order {
    /// Its number.
    pub order: u64,
    /// Who placed it.
    pub customer: String,
    /// Its amount, in cents of `currency`.
    pub cents: i64,
    /// ISO code of its currency.
    pub currency: String,
}

/// An order's amount in euro cents.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct Euros {
    /// The order's number.
    pub order: u64,
    /// Who placed it.
    pub customer: String,
    /// Its amount, in euro cents.
    pub cents: i64,
}

/// A customer's running total.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct Total {
    /// The customer.
    pub customer: String,
    /// Orders counted so far.
    pub orders: u64,
    /// Their amount, in euro cents.
    pub cents: i64,
}

/// The order in euro cents. Panics on a currency missing from [`RATES`].
pub fn to_eur(o: Order) -> Euros {
    let rate = RATES
        .iter()
        .find(|(code, _)| *code == o.currency)
        .map(|(_, rate)| *rate)
        .unwrap_or_else(|| panic!("no rate for the currency {:?}", o.currency));
    Euros {
        order: o.order,
        customer: o.customer,
        cents: o.cents * rate / 100,
    }
}

/// Each customer's running total; a negative amount is an error.
pub struct Totals {
    total: ValueState<Total>,
}

impl KeyedProcess for Totals {
    type In = Euros;
    type Out = Total;

    fn open(ctx: &mut OpenContext) -> weir::Result<Self> {
        Ok(Totals {
            total: ctx.value_state("total")?,
        })
    }

    fn process(&mut self, e: Euros, ctx: &mut Context<Total>) -> weir::Result<()> {
        if e.cents < 0 {
            return Err(format!("order {}: a negative amount ({} cents)", e.order, e.cents).into());
        }
        let mut total = self.total.get()?.unwrap_or(Total {
            customer: e.customer,
            orders: 0,
            cents: 0,
        });
        total.orders += 1;
        total.cents += e.cents;
        self.total.set(total.clone());
        ctx.emit(total);
        Ok(())
    }
}

weir::export_operators! {
    map "to-eur" => to_eur;
    keyed_process "totals" => Totals;
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir::testing::Harness;

    fn euros(order: u64, cents: i64) -> Euros {
        Euros {
            order,
            customer: "ada".into(),
            cents,
        }
    }

    #[test]
    fn converts_with_the_table() {
        let mut h = Harness::map(to_eur);
        let order = Order {
            order: 1,
            customer: "ada".into(),
            cents: 1000,
            currency: "USD".into(),
        };
        let out: Vec<Euros> = h.process(&(), &order, None).unwrap();
        assert_eq!(out[0].cents, 920);
    }

    #[test]
    fn totals_add_up_and_refuse_a_negative_amount() {
        let mut h = Harness::keyed_process::<Totals>(&[]).unwrap();
        let _: Vec<Total> = h.process("ada", &euros(1, 500), None).unwrap();
        let out: Vec<Total> = h.process("ada", &euros(2, 250), None).unwrap();
        assert_eq!((out[0].orders, out[0].cents), (2, 750));
        let e = h
            .process::<_, _, Total>("ada", &euros(3, -1), None)
            .unwrap_err();
        assert!(e.to_string().contains("negative amount"), "{e}");
    }
}
