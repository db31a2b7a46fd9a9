//! Orders with poison among them, for the dead-letter tests (the
//! `dead-letters` example's operators): the input, what a job must make
//! of it, and the checks of its totals and dead letters.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

/// Euro cents per 100 units, as the example's converter has them (it has
/// no rate for any other currency).
pub const RATES: [(&str, i64); 4] = [("EUR", 100), ("USD", 92), ("GBP", 117), ("CHF", 106)];

/// `n` orders as JSON lines; every `every`-th one (from the 7th) is poison,
/// of three kinds in turn: a line that is not JSON, a currency without a
/// rate, a negative amount.
pub fn orders(n: u64, every: u64) -> Vec<String> {
    (1..=n)
        .map(|i| {
            let customer = format!("c{}", (i * 7) % 13);
            let currency = RATES[(i % 4) as usize].0;
            let cents = 100 + (i * 37) % 5000;
            if i % every != 7 % every {
                return json!({"order": i, "customer": customer, "cents": cents, "currency": currency})
                    .to_string();
            }
            match (i / every) % 3 {
                0 => format!("{{\"order\": {i}, \"customer\": \"{customer}\""),
                1 => json!({"order": i, "customer": customer, "cents": cents, "currency": "JPY"})
                    .to_string(),
                _ => json!({"order": i, "customer": customer, "cents": -(cents as i64), "currency": currency})
                    .to_string(),
            }
        })
        .collect()
}

/// What a job must make of orders.
#[derive(Debug, Default)]
pub struct Expected {
    /// Per customer: orders counted, their euro cents.
    pub totals: BTreeMap<String, (u64, i64)>,
    /// The lines that are not JSON.
    pub undecodable: BTreeSet<String>,
    /// The orders in a currency without a rate.
    pub unconvertible: BTreeSet<u64>,
    /// The orders of a negative amount.
    pub refused: BTreeSet<u64>,
}

pub fn expected(lines: &[String]) -> Expected {
    let mut e = Expected::default();
    for l in lines {
        let Ok(v) = serde_json::from_str::<Value>(l) else {
            e.undecodable.insert(l.clone());
            continue;
        };
        let order = v["order"].as_u64().unwrap();
        let Some(rate) = RATES.iter().find(|(c, _)| v["currency"] == *c) else {
            e.unconvertible.insert(order);
            continue;
        };
        let cents = v["cents"].as_i64().unwrap() * rate.1 / 100;
        if cents < 0 {
            e.refused.insert(order);
            continue;
        }
        let t = e
            .totals
            .entry(v["customer"].as_str().unwrap().to_owned())
            .or_default();
        t.0 += 1;
        t.1 += cents;
    }
    e
}

/// Every customer's running totals: each count from 1 to its number of
/// orders exactly once, the last one's cents the sum.
pub fn check_totals(totals: &[Value], e: &Expected) {
    let mut seen: BTreeMap<String, Vec<(u64, i64)>> = BTreeMap::new();
    for t in totals {
        seen.entry(t["customer"].as_str().unwrap().to_owned())
            .or_default()
            .push((t["orders"].as_u64().unwrap(), t["cents"].as_i64().unwrap()));
    }
    assert_eq!(
        seen.keys().collect::<Vec<_>>(),
        e.totals.keys().collect::<Vec<_>>()
    );
    for (customer, mut runs) in seen {
        runs.sort_unstable();
        let (n, cents) = e.totals[&customer];
        assert_eq!(
            runs.iter().map(|r| r.0).collect::<Vec<_>>(),
            (1..=n).collect::<Vec<_>>(),
            "`{customer}`: every order counted once"
        );
        assert_eq!(runs.last().unwrap().1, cents, "`{customer}`'s total");
    }
}

/// The dead letters: each poison record once, with its error and origin
/// (`split` checks where a source's came from).
pub fn check_letters(letters: &[Value], e: &Expected, split: impl Fn(&Value)) {
    let mut got = Expected::default();
    for l in letters {
        let error = l["error"].as_str().unwrap();
        assert!(l["time"].as_i64().unwrap() > 0, "{l}");
        if l["source"] == "orders" {
            // serde_json's error, with where in the line.
            assert!(error.contains("at line 1 column"), "{l}");
            split(l);
            assert!(l["offset"].is_u64(), "{l}");
            let raw = l["raw"].as_str().unwrap().to_owned();
            assert!(got.undecodable.insert(raw), "twice: {l}");
        } else if l["operator"] == "to-eur" {
            assert!(
                error.starts_with("trapped") && error.contains("no rate for the currency"),
                "{l}"
            );
            let order = l["record"]["order"].as_u64().unwrap();
            assert!(got.unconvertible.insert(order), "twice: {l}");
        } else if l["operator"] == "totals" {
            assert!(
                error.starts_with("failed") && error.contains("a negative amount"),
                "{l}"
            );
            let order = l["record"]["order"].as_u64().unwrap();
            assert!(got.refused.insert(order), "twice: {l}");
        } else {
            panic!("a letter from nowhere: {l}");
        }
    }
    assert_eq!(got.undecodable, e.undecodable);
    assert_eq!(got.unconvertible, e.unconvertible);
    assert_eq!(got.refused, e.refused);
}
