//! Windows: a keyed stream cut into finite pieces by time, each reduced by a
//! window function when the watermark passes its end.
//!
//! The manifest says how records are assigned to windows (tumbling, sliding
//! or session; event or processing time; allowed lateness) and the component
//! says what to compute per window: an [`Aggregate`] (folded record by
//! record, constant state per window) or a [`ProcessWindow`] (sees all the
//! window's records at once). The window operator itself runs in the
//! runtime, on the task's keyed state and timers: it keeps each window's
//! accumulator (a sliding window's records in panes it shares with its
//! neighbours) and calls the function once per batch to fold records in,
//! and once per batch of windows that fire.
//!
//! - A window `[start, end)` fires when the watermark reaches `end - 1`; its
//!   results carry the timestamp `end - 1`.
//! - A record whose windows all ended more than the allowed lateness ago
//!   (`end - 1 + lateness <= watermark`) is late: it goes, unchanged, to the
//!   side output `late`. A record within the allowed lateness updates its
//!   window, which fires again at once with the updated result.
//! - Session windows (`[t, t + gap)` per record) merge while they overlap
//!   or touch: their accumulators are merged with [`Aggregate::merge`].
//!
//! ```
//! use weir::{Aggregate, OpenContext, Window};
//!
//! /// Records per key and window.
//! struct Count;
//!
//! impl Aggregate for Count {
//!     type In = serde_json::Value;
//!     type Acc = u64;
//!     type Out = serde_json::Value;
//!     fn open(_: &mut OpenContext) -> weir::Result<Self> { Ok(Count) }
//!     fn create(&self) -> u64 { 0 }
//!     fn add(&self, acc: &mut u64, _: &serde_json::Value) { *acc += 1 }
//!     fn merge(&self, acc: &mut u64, other: u64) { *acc += other }
//!     fn result(&self, window: &Window, acc: u64) -> weir::Result<serde_json::Value> {
//!         Ok(serde_json::json!({
//!             "key": window.key::<String>()?, "start": window.start, "count": acc,
//!         }))
//!     }
//! }
//!
//! // Tumbling windows of 10 s, 5 s of allowed lateness.
//! let mut h = weir::testing::Harness::window_aggregate::<Count>(&[
//!     ("weir.window.kind", "tumbling"),
//!     ("weir.window.size-ms", "10000"),
//!     ("weir.window.allowed-lateness-ms", "5000"),
//! ]).unwrap();
//! let rec = serde_json::json!({});
//! for t in [1_000, 4_000, 12_000] {
//!     assert!(h.process::<_, _, serde_json::Value>("a", &rec, Some(t)).unwrap().is_empty());
//! }
//! // The watermark passes the first window's end: it fires.
//! let fired: Vec<serde_json::Value> = h.advance_watermark(9_999).unwrap();
//! assert_eq!(fired, [serde_json::json!({"key": "a", "start": 0, "count": 2})]);
//! // A late record within the allowed lateness: the window fires again.
//! let again: Vec<serde_json::Value> = h.process("a", &rec, Some(3_000)).unwrap();
//! assert_eq!(again, [serde_json::json!({"key": "a", "start": 0, "count": 3})]);
//! // Past the lateness, a record for that window goes to the side output.
//! h.advance_watermark::<serde_json::Value>(15_000).unwrap();
//! assert!(h.process::<_, _, serde_json::Value>("a", &rec, Some(5_000)).unwrap().is_empty());
//! assert_eq!(h.side_output::<serde_json::Value>("late").unwrap(), [rec]);
//! ```

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::__private::bindings::weir::operator::types::Packed;
use crate::codec::wire::{self, Codec, Codecs};
use crate::coder::{Decode, Encode};
use crate::context::Pending;
use crate::driver::DynOperator;
use crate::{Collector, OpenContext, SideOutput};

/// Where a window operator sends the records later than its allowed
/// lateness, unchanged (route it with `input = "operator:late"`).
pub const LATE: SideOutput<[u8]> = SideOutput::new("late");

/// One window of one key: `[start, end)` in ms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    /// First instant in the window.
    pub start: i64,
    /// First instant after it.
    pub end: i64,
    key: Vec<u8>,
    /// The codec of the key (the window operator's input's).
    codec: Codec,
}

impl Window {
    /// The key whose window this is, decoded.
    ///
    /// # Example
    ///
    /// ```
    /// # use weir::{Aggregate, OpenContext, Window};
    /// # struct Count;
    /// # impl Aggregate for Count {
    /// #     type In = u32; type Acc = u64; type Out = String;
    /// #     fn open(_: &mut OpenContext) -> weir::Result<Self> { Ok(Count) }
    /// #     fn create(&self) -> u64 { 0 }
    /// #     fn add(&self, acc: &mut u64, _: &u32) { *acc += 1 }
    /// #     fn merge(&self, acc: &mut u64, other: u64) { *acc += other }
    /// fn result(&self, window: &Window, acc: u64) -> weir::Result<String> {
    ///     Ok(format!("{}: {acc}", window.key::<String>()?))
    /// }
    /// # }
    /// # let mut h = weir::testing::Harness::window_aggregate::<Count>(&[("weir.window.kind", "tumbling"), ("weir.window.size-ms", "10")]).unwrap();
    /// # h.process::<_, _, String>("k", &1, Some(1)).unwrap();
    /// # assert_eq!(h.advance_watermark::<String>(100).unwrap(), ["k: 1"]);
    /// ```
    pub fn key<K: DeserializeOwned>(&self) -> crate::Result<K> {
        wire::decode(wire::key_codec(self.codec), &self.key)
    }

    /// The key's raw bytes, as the window operator's input encodes keys
    /// (JSON, or MessagePack: see [`crate::codec`]).
    ///
    /// # Example
    ///
    /// ```
    /// # use weir::{Aggregate, OpenContext, Window};
    /// # struct Count;
    /// # impl Aggregate for Count {
    /// #     type In = u32; type Acc = u64; type Out = usize;
    /// #     fn open(_: &mut OpenContext) -> weir::Result<Self> { Ok(Count) }
    /// #     fn create(&self) -> u64 { 0 }
    /// #     fn add(&self, acc: &mut u64, _: &u32) { *acc += 1 }
    /// #     fn merge(&self, acc: &mut u64, other: u64) { *acc += other }
    /// fn result(&self, window: &Window, _: u64) -> weir::Result<usize> {
    ///     Ok(window.key_bytes().len())
    /// }
    /// # }
    /// # let mut h = weir::testing::Harness::window_aggregate::<Count>(&[("weir.window.kind", "tumbling"), ("weir.window.size-ms", "10")]).unwrap();
    /// # h.process::<_, _, usize>("k", &1, Some(1)).unwrap();
    /// # assert_eq!(h.advance_watermark::<usize>(100).unwrap(), [3]); // "k" as JSON
    /// ```
    pub fn key_bytes(&self) -> &[u8] {
        &self.key
    }

    /// The largest timestamp in the window, `end - 1`: when it fires, and
    /// the timestamp of its results.
    ///
    /// # Example
    ///
    /// ```
    /// # use weir::{Aggregate, OpenContext, Window};
    /// # struct Count;
    /// # impl Aggregate for Count {
    /// #     type In = u32; type Acc = u64; type Out = i64;
    /// #     fn open(_: &mut OpenContext) -> weir::Result<Self> { Ok(Count) }
    /// #     fn create(&self) -> u64 { 0 }
    /// #     fn add(&self, acc: &mut u64, _: &u32) { *acc += 1 }
    /// #     fn merge(&self, acc: &mut u64, other: u64) { *acc += other }
    /// fn result(&self, window: &Window, _: u64) -> weir::Result<i64> {
    ///     Ok(window.max_timestamp())
    /// }
    /// # }
    /// # let mut h = weir::testing::Harness::window_aggregate::<Count>(&[("weir.window.kind", "tumbling"), ("weir.window.size-ms", "10")]).unwrap();
    /// # h.process::<_, _, i64>("k", &1, Some(1)).unwrap();
    /// # assert_eq!(h.advance_watermark::<i64>(100).unwrap(), [9]);
    /// ```
    pub fn max_timestamp(&self) -> i64 {
        self.end - 1
    }
}

/// An incremental window function: each record is folded into its
/// windows' accumulators as it comes; a window's result is computed from
/// its accumulator when it fires. Register it with `window_aggregate` in
/// [`crate::export_operators!`]. See the [module docs](self) for an example.
pub trait Aggregate: Sized + 'static {
    /// The records it reads: a [typed](crate::Row) or a serde type.
    type In;
    /// What it keeps per window (in keyed state).
    type Acc: Serialize + DeserializeOwned + Clone;
    /// What a window's firing emits: a [typed](crate::Row) or a serde type.
    type Out;
    /// Create the function; `ctx` has the job's parameters.
    fn open(ctx: &mut OpenContext) -> crate::Result<Self>;
    /// An empty accumulator.
    fn create(&self) -> Self::Acc;
    /// Fold one record in (a record of sliding windows is folded into each
    /// of its windows).
    fn add(&self, acc: &mut Self::Acc, input: &Self::In);
    /// Fold another window's accumulator in (session windows merging).
    fn merge(&self, acc: &mut Self::Acc, other: Self::Acc);
    /// The result of a window.
    fn result(&self, window: &Window, acc: Self::Acc) -> crate::Result<Self::Out>;
}

/// A window function that sees all of a window's records at once (they are
/// kept in keyed state until it fires). Register it with `window_process`
/// in [`crate::export_operators!`].
///
/// ```
/// use weir::{Collector, OpenContext, ProcessWindow, Window};
///
/// /// The largest value per key and window.
/// struct Max;
///
/// impl ProcessWindow for Max {
///     type In = i64;
///     type Out = (i64, i64);
///     fn open(_: &mut OpenContext) -> weir::Result<Self> { Ok(Max) }
///     fn process(&mut self, window: &Window, values: Vec<i64>, out: &mut Collector<(i64, i64)>) -> weir::Result<()> {
///         out.emit((window.start, values.into_iter().max().unwrap_or(0)));
///         Ok(())
///     }
/// }
///
/// let mut h = weir::testing::Harness::window_process::<Max>(&[
///     ("weir.window.kind", "sliding"),
///     ("weir.window.size-ms", "10"),
///     ("weir.window.slide-ms", "5"),
/// ]).unwrap();
/// h.process::<_, _, (i64, i64)>("k", &7, Some(6)).unwrap();
/// h.process::<_, _, (i64, i64)>("k", &3, Some(11)).unwrap();
/// let fired: Vec<(i64, i64)> = h.advance_watermark(100).unwrap();
/// assert_eq!(fired, [(0, 7), (5, 7), (10, 3)]);
/// ```
pub trait ProcessWindow: Sized + 'static {
    /// The records it reads: a [typed](crate::Row) or a serde type.
    type In;
    /// What it emits: a [typed](crate::Row) or a serde type.
    type Out;
    /// Create the function; `ctx` has the job's parameters.
    fn open(ctx: &mut OpenContext) -> crate::Result<Self>;
    /// A window fired with `records`, in arrival order.
    fn process(
        &mut self,
        window: &Window,
        records: Vec<Self::In>,
        out: &mut Collector<Self::Out>,
    ) -> crate::Result<()>;
}

/// An [`Aggregate`] as the window operator calls it, reading its records
/// with `D` and writing its results with `E`.
struct AggregateFn<A, D, E>(A, D, E);

impl<A: Aggregate, D, E> AggregateFn<A, D, E> {
    /// The merge of stored accumulators (a new one for none).
    fn merged(&self, stored: &[&[u8]], codec: Codec) -> crate::Result<A::Acc> {
        let Some((first, rest)) = stored.split_first() else {
            return Ok(self.0.create());
        };
        let mut acc: A::Acc = wire::decode(codec, first)?;
        for other in rest {
            self.0.merge(&mut acc, wire::decode(codec, other)?);
        }
        Ok(acc)
    }
}

impl<A: Aggregate, D: Decode<A::In>, E: Encode<A::Out>> DynOperator for AggregateFn<A, D, E> {
    fn accumulate(
        &mut self,
        records: &[&[u8]],
        accumulators: &[&[u8]],
        groups: &[u32],
        targets: &[u32],
        codecs: &Codecs,
        out: &mut Packed,
    ) -> crate::Result<()> {
        let mut accs = Vec::with_capacity(groups.len());
        let mut from = 0usize;
        for &end in groups {
            let stored = accumulators
                .get(from..end as usize)
                .ok_or("a group's accumulators are outside the call's")?;
            accs.push(self.merged(stored, codecs.state)?);
            from = end as usize;
        }
        for (record, &g) in records.iter().zip(targets) {
            let input: A::In = self.1.decode(codecs.input, record)?;
            let acc = accs
                .get_mut(g as usize)
                .ok_or("a record's group is outside the call's")?;
            self.0.add(acc, &input);
        }
        for acc in &accs {
            wire::encode_into(codecs.state, &mut out.data, acc);
            out.ends.push(out.data.len() as u32);
        }
        Ok(())
    }

    fn fire_window(
        &mut self,
        window: &Window,
        contents: &[&[u8]],
        batch: &mut Pending,
    ) -> crate::Result<()> {
        let acc = self.merged(contents, batch.state)?;
        let out = self.0.result(window, acc)?;
        batch.push(&self.2, &out, None);
        Ok(())
    }
}

/// A [`ProcessWindow`] as the window operator calls it: the host keeps
/// the records, so it has no `accumulate`.
struct ProcessFn<P, D, E>(P, D, E);

impl<P: ProcessWindow, D: Decode<P::In>, E: Encode<P::Out>> DynOperator for ProcessFn<P, D, E> {
    fn fire_window(
        &mut self,
        window: &Window,
        contents: &[&[u8]],
        batch: &mut Pending,
    ) -> crate::Result<()> {
        let records = contents
            .iter()
            .map(|r| self.1.decode(batch.input, r))
            .collect::<crate::Result<Vec<P::In>>>()?;
        self.0.process(
            window,
            records,
            &mut Collector {
                batch,
                enc: &self.2,
            },
        )
    }
}

/// The manifest gives a window function its windows.
fn check_window(ctx: &OpenContext) -> crate::Result<()> {
    if ctx.window.is_none() {
        return Err(
            "this is a window function, but the job gives it no `window` in its manifest".into(),
        );
    }
    Ok(())
}

pub(crate) fn open_aggregate<
    A: Aggregate,
    D: Decode<A::In> + 'static,
    E: Encode<A::Out> + 'static,
>(
    ctx: &mut OpenContext,
    d: D,
    e: E,
) -> crate::Result<Box<dyn DynOperator>> {
    check_window(ctx)?;
    Ok(Box::new(AggregateFn(A::open(ctx)?, d, e)))
}

pub(crate) fn open_process<
    P: ProcessWindow,
    D: Decode<P::In> + 'static,
    E: Encode<P::Out> + 'static,
>(
    ctx: &mut OpenContext,
    d: D,
    e: E,
) -> crate::Result<Box<dyn DynOperator>> {
    check_window(ctx)?;
    Ok(Box::new(ProcessFn(P::open(ctx)?, d, e)))
}

impl Window {
    /// A window of `key` (in `codec`), `[start, end)`.
    pub(crate) fn new(key: Vec<u8>, start: i64, end: i64, codec: Codec) -> Window {
        Window {
            start,
            end,
            key,
            codec,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Count;
    impl Aggregate for Count {
        type In = i64;
        type Acc = u64;
        type Out = (i64, u64);
        fn open(_: &mut OpenContext) -> crate::Result<Self> {
            Ok(Count)
        }
        fn create(&self) -> u64 {
            0
        }
        fn add(&self, acc: &mut u64, _: &i64) {
            *acc += 1
        }
        fn merge(&self, acc: &mut u64, other: u64) {
            *acc += other
        }
        fn result(&self, w: &Window, acc: u64) -> crate::Result<(i64, u64)> {
            Ok((w.start, acc))
        }
    }

    #[test]
    fn processing_time_windows_follow_the_clock_not_timestamps() {
        let mut h = crate::testing::Harness::window_aggregate::<Count>(&[
            ("weir.window.kind", "tumbling"),
            ("weir.window.size-ms", "1000"),
            ("weir.window.time", "processing"),
        ])
        .unwrap();
        h.advance_processing_time::<(i64, u64)>(1_500).unwrap();
        // Timestamps and watermarks do not matter.
        h.process::<_, _, (i64, u64)>("k", &1, Some(99_999))
            .unwrap();
        h.process::<_, _, (i64, u64)>("k", &2, None).unwrap();
        assert!(
            h.advance_watermark::<(i64, u64)>(i64::MAX - 1)
                .unwrap()
                .is_empty()
        );
        assert_eq!(
            h.advance_processing_time::<(i64, u64)>(1_999).unwrap(),
            [(1000, 2)]
        );
    }

    #[test]
    fn an_event_time_window_needs_timestamps() {
        let mut h = crate::testing::Harness::window_aggregate::<Count>(&[
            ("weir.window.kind", "tumbling"),
            ("weir.window.size-ms", "1000"),
        ])
        .unwrap();
        let e = h.process::<_, _, (i64, u64)>("k", &1, None).unwrap_err();
        assert!(e.to_string().contains("needs timestamps"), "{e}");
        let e = crate::testing::Harness::window_aggregate::<Count>(&[])
            .err()
            .unwrap();
        assert!(e.to_string().contains("no `window`"), "{e}");
    }

    #[test]
    fn sliding_windows_merge_their_panes() {
        // 30 every 7: panes of 1; a record is added once, each window merges
        // its 30 panes when it fires.
        let mut h = crate::testing::Harness::window_aggregate::<Count>(&[
            ("weir.window.kind", "sliding"),
            ("weir.window.size-ms", "30"),
            ("weir.window.slide-ms", "7"),
        ])
        .unwrap();
        for t in [0, 6, 7, 29, 30] {
            h.process::<_, _, (i64, u64)>("k", &1, Some(t)).unwrap();
        }
        let fired: Vec<(i64, u64)> = h.advance_watermark(1_000).unwrap();
        assert_eq!(
            fired,
            [
                (-28, 1),
                (-21, 3),
                (-14, 3),
                (-7, 3),
                (0, 4),
                (7, 3),
                (14, 2),
                (21, 2),
                (28, 2)
            ]
        );
    }
}
