//! The operators of the side-by-side benchmark with Apache Flink
//! (`bench/flink/`), written with the SDK as a user would write them. Their
//! input is the `numbers` generator: `{"id": n, "k": n % 10000,
//! "price": n % 1000, "ts": n / 100}`, the columns of the Flink side's
//! table. The records are typed (`#[derive(Row)]`): they travel as rows.

use serde::{Deserialize, Serialize};
use weir::{Aggregate, Context, KeyedProcess, OpenContext, Row, ValueState, Window};

/// One generated event.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, Row)]
pub struct Event {
    /// Its number.
    pub id: u64,
    /// Its key, `id % 10000`.
    pub k: u32,
    /// `id % 1000`.
    pub price: u64,
    /// Its event time, ms: `id / 100`.
    pub ts: i64,
}

/// q0: every event, unchanged (`SELECT id, k, price, ts`).
pub fn q0(e: Event) -> Event {
    e
}

/// q1's output row.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, Row)]
pub struct Q1 {
    /// The event's number.
    pub id: u64,
    /// Its key.
    pub k: u32,
    /// `0.908 * price`.
    pub dollars: f64,
    /// `price * 2`.
    pub doubled: u64,
}

/// q1: `SELECT id, k, 0.908 * price, price * 2 … WHERE MOD(id, 2) = 0`.
pub fn q1(e: Event, out: &mut weir::Collector<Q1>) {
    if e.id.is_multiple_of(2) {
        out.emit(Q1 {
            id: e.id,
            k: e.k,
            dollars: 0.908 * e.price as f64,
            doubled: e.price * 2,
        });
    }
}

/// A key's running count.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, Row)]
pub struct KeyCount {
    /// The key.
    pub k: u32,
    /// Events of the key so far.
    pub n: u64,
}

/// `SELECT k, COUNT(*) … GROUP BY k`: an update per event.
pub struct CountPerKey {
    count: ValueState<u64>,
}

impl KeyedProcess for CountPerKey {
    type In = Event;
    type Out = KeyCount;

    fn open(ctx: &mut OpenContext) -> weir::Result<Self> {
        Ok(CountPerKey {
            count: ctx.value_state("n")?,
        })
    }

    fn process(&mut self, e: Event, ctx: &mut Context<KeyCount>) -> weir::Result<()> {
        let n = self.count.get()?.unwrap_or(0) + 1;
        self.count.set(n);
        ctx.emit(KeyCount { k: e.k, n });
        Ok(())
    }
}

/// What `stats-per-key` keeps per key: a record of several fields, the
/// shape of state that a row reads without a parse by field name.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, Row)]
pub struct PriceStats {
    /// Events of the key so far.
    pub n: u64,
    /// The sum of their prices.
    pub sum: u64,
    /// The highest price.
    pub max: u64,
    /// The latest event time.
    pub last_ts: i64,
}

/// A key's running price statistics.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, Row)]
pub struct KeyStats {
    /// The key.
    pub k: u32,
    /// Events of the key so far.
    pub n: u64,
    /// The mean of their prices.
    pub mean: f64,
    /// The highest price.
    pub max: u64,
}

/// Running price statistics per key (`SELECT k, COUNT(*), AVG(price),
/// MAX(price) … GROUP BY k`, an update per event), their state a record
/// kept untyped (MessagePack by field name) or, as `stats-per-key-rows`,
/// as rows of its type.
pub struct StatsPerKey {
    stats: ValueState<PriceStats>,
}

impl StatsPerKey {
    fn update(&mut self, e: Event, ctx: &mut Context<KeyStats>) -> weir::Result<()> {
        let mut s = self.stats.get()?.unwrap_or_default();
        s.n += 1;
        s.sum += e.price;
        s.max = s.max.max(e.price);
        s.last_ts = s.last_ts.max(e.ts);
        ctx.emit(KeyStats {
            k: e.k,
            n: s.n,
            mean: s.sum as f64 / s.n as f64,
            max: s.max,
        });
        self.stats.set(s);
        Ok(())
    }
}

impl KeyedProcess for StatsPerKey {
    type In = Event;
    type Out = KeyStats;

    fn open(ctx: &mut OpenContext) -> weir::Result<Self> {
        Ok(StatsPerKey {
            stats: ctx.value_state("stats")?,
        })
    }

    fn process(&mut self, e: Event, ctx: &mut Context<KeyStats>) -> weir::Result<()> {
        self.update(e, ctx)
    }
}

/// `stats-per-key` with its state kept as rows of `PriceStats`.
pub struct StatsPerKeyRows(StatsPerKey);

impl KeyedProcess for StatsPerKeyRows {
    type In = Event;
    type Out = KeyStats;

    fn open(ctx: &mut OpenContext) -> weir::Result<Self> {
        Ok(StatsPerKeyRows(StatsPerKey {
            stats: ctx.row_value_state("stats")?,
        }))
    }

    fn process(&mut self, e: Event, ctx: &mut Context<KeyStats>) -> weir::Result<()> {
        self.0.update(e, ctx)
    }
}

/// A window's count of a key.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, Row)]
pub struct WindowCount {
    /// The key.
    pub k: u32,
    /// The window's first instant, ms.
    pub window_start: i64,
    /// The first instant after it, ms.
    pub window_end: i64,
    /// Events of the key in the window.
    pub n: u64,
}

/// `COUNT(*) … GROUP BY k, window_start, window_end` over the manifest's
/// windows.
pub struct WindowedCount;

impl Aggregate for WindowedCount {
    type In = Event;
    type Acc = u64;
    type Out = WindowCount;

    fn open(_: &mut OpenContext) -> weir::Result<Self> {
        Ok(WindowedCount)
    }

    fn create(&self) -> u64 {
        0
    }

    fn add(&self, acc: &mut u64, _: &Event) {
        *acc += 1;
    }

    fn merge(&self, acc: &mut u64, other: u64) {
        *acc += other;
    }

    fn result(&self, window: &Window, n: u64) -> weir::Result<WindowCount> {
        Ok(WindowCount {
            k: window.key()?,
            window_start: window.start,
            window_end: window.end,
            n,
        })
    }
}

/// One event of the `bids` generator: `{"key": "a123", "price": ..,
/// "ts": ..}`.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, Row)]
pub struct Bid {
    /// Its key, a short string.
    pub key: String,
    /// Its price.
    pub price: u64,
    /// Its event time, ms.
    pub ts: i64,
}

/// Bids over 5,000, from the decoded record (its key copied out).
pub fn expensive(b: &Bid) -> bool {
    b.price > 5_000
}

/// The same through the record's view: the price read in place.
pub fn expensive_view(b: &BidView<'_>) -> bool {
    b.price() > 5_000
}

weir::export_operators! {
    filter "expensive" => expensive;
    filter "expensive-view" => expensive_view;
    map "q0" => q0;
    flat_map "q1" => q1;
    keyed_process "count-per-key" => CountPerKey;
    keyed_process "stats-per-key" => StatsPerKey;
    keyed_process "stats-per-key-rows" => StatsPerKeyRows;
    window_aggregate "windowed-count" => WindowedCount;
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir::testing::Harness;

    fn event(id: u64) -> Event {
        Event {
            id,
            k: (id % 10_000) as u32,
            price: id % 1000,
            ts: (id / 100) as i64,
        }
    }

    #[test]
    fn stats_per_key_are_the_same_kept_untyped_or_as_rows() {
        let mut untyped = Harness::keyed_process::<StatsPerKey>(&[]).unwrap();
        let mut rows = Harness::keyed_process::<StatsPerKeyRows>(&[]).unwrap();
        for id in [3u64, 10_003, 20_003, 7] {
            let e = event(id);
            let a: Vec<KeyStats> = untyped.process(&e.k, &e, None).unwrap();
            let b: Vec<KeyStats> = rows.process(&e.k, &e, None).unwrap();
            assert_eq!(a, b);
        }
        let e = event(30_003);
        let out: Vec<KeyStats> = rows.process(&e.k, &e, None).unwrap();
        assert_eq!(
            out,
            [KeyStats {
                k: 3,
                n: 4,
                mean: 3.0,
                max: 3
            }]
        );
    }

    #[test]
    fn q1_keeps_even_ids_and_computes_its_columns() {
        let mut h = Harness::flat_map(q1);
        let out: Vec<Q1> = h.process(&(), &event(1234), None).unwrap();
        assert_eq!(
            out,
            [Q1 {
                id: 1234,
                k: 1234,
                dollars: 0.908 * 234.0,
                doubled: 468
            }]
        );
        let out: Vec<Q1> = h.process(&(), &event(1235), None).unwrap();
        assert!(out.is_empty());
    }

    #[test]
    fn the_view_filter_keeps_what_the_decoded_one_keeps() {
        for name in ["expensive", "expensive-view"] {
            let mut h = weir::harness!(name).unwrap().rows().unwrap();
            for price in [0, 5_000, 5_001, 9_999] {
                let bid = Bid {
                    key: "a17".into(),
                    price,
                    ts: 3,
                };
                let out: Vec<Bid> = h.process(&(), &bid, None).unwrap();
                let want = if price > 5_000 { vec![bid] } else { vec![] };
                assert_eq!(out, want, "{name} at {price}");
            }
        }
    }

    #[test]
    fn counts_per_key() {
        let mut h = Harness::keyed_process::<CountPerKey>(&[]).unwrap();
        for n in 1..=3 {
            let out: Vec<KeyCount> = h.process(&7u32, &event(7), None).unwrap();
            assert_eq!(out, [KeyCount { k: 7, n }]);
        }
    }
}
