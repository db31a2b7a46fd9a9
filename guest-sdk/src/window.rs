//! Windows: a keyed stream cut into finite pieces by time, each reduced by a
//! window function when the watermark passes its end.
//!
//! The manifest says how records are assigned to windows (tumbling, sliding
//! or session; event or processing time; allowed lateness) and the component
//! says what to compute per window: an [`Aggregate`] (folded record by
//! record, constant state per window) or a [`ProcessWindow`] (sees all the
//! window's records at once). Windows are built on keyed state and timers:
//! one value per key holding its open windows (start, end, accumulator), one
//! timer at each window's end (and one at the end of its allowed lateness).
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

use std::marker::PhantomData;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::__private::bindings::weir::operator::types::{TimeDomain as WitDomain, Timer, TimerOp};
use crate::context::Pending;
use crate::driver::DynOperator;
use crate::state::{ValueState, with_cache};
use crate::{Collector, OpenContext, SideOutput, TimeDomain, codec};

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
        codec::decode(&self.key)
    }

    /// The key's raw bytes.
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
    /// The records it reads.
    type In: DeserializeOwned;
    /// What it keeps per window (in keyed state).
    type Acc: Serialize + DeserializeOwned + Clone;
    /// What a window's firing emits.
    type Out: Serialize;
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
    /// The records it reads.
    type In: Serialize + DeserializeOwned + Clone;
    /// What it emits.
    type Out: Serialize;
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

/// How records are assigned to windows, as the manifest's `window` says
/// (handed to the operator as `weir.window.*` configuration entries).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Assigner {
    Tumbling { size: i64 },
    Sliding { size: i64, slide: i64 },
    Session { gap: i64 },
}

#[derive(Debug, Clone, Copy)]
struct Spec {
    assigner: Assigner,
    domain: TimeDomain,
    lateness: i64,
}

impl Spec {
    fn from_config(ctx: &OpenContext) -> crate::Result<Spec> {
        let get = |k: &str| ctx.param(&format!("weir.window.{k}"));
        let number = |k: &str| -> crate::Result<i64> {
            let raw = get(k).ok_or_else(|| format!("the window has no `{k}`"))?;
            let n: i64 = raw
                .parse()
                .map_err(|_| format!("window {k} = {raw:?} is not a whole number"))?;
            if n < 0 || (n == 0 && k != "allowed-lateness-ms") {
                return Err(format!("window {k} = {n} must be positive").into());
            }
            Ok(n)
        };
        let assigner = match get("kind") {
            None => {
                return Err(
                    "this is a window function, but the job gives it no `window` in its manifest"
                        .into(),
                );
            }
            Some("tumbling") => Assigner::Tumbling {
                size: number("size-ms")?,
            },
            Some("sliding") => Assigner::Sliding {
                size: number("size-ms")?,
                slide: number("slide-ms")?,
            },
            Some("session") => Assigner::Session {
                gap: number("gap-ms")?,
            },
            Some(other) => return Err(format!("unknown window kind {other:?}").into()),
        };
        let domain = match get("time") {
            None | Some("event") => TimeDomain::EventTime,
            Some("processing") => TimeDomain::ProcessingTime,
            Some(other) => return Err(format!("unknown window time {other:?}").into()),
        };
        let lateness = match get("allowed-lateness-ms") {
            None => 0,
            Some(_) => number("allowed-lateness-ms")?,
        };
        Ok(Spec {
            assigner,
            domain,
            lateness: if domain == TimeDomain::EventTime {
                lateness
            } else {
                0
            },
        })
    }

    /// The windows (start, end) a record at `t` belongs to, oldest first,
    /// into `out`.
    fn assign_into(&self, t: i64, out: &mut Vec<(i64, i64)>) {
        out.clear();
        match self.assigner {
            Assigner::Tumbling { size } => {
                let start = t - t.rem_euclid(size);
                out.push((start, start + size));
            }
            Assigner::Sliding { size, slide } => {
                // Every window [k·slide, k·slide + size) that holds `t`,
                // whether or not the slide divides the size (none, in the
                // gaps between windows when the slide is the larger).
                let last = t - t.rem_euclid(slide);
                let mut start = Some(last);
                while let Some(s) = start.filter(|&s| s > t.saturating_sub(size)) {
                    out.push((s, s.saturating_add(size)));
                    start = s.checked_sub(slide);
                }
                out.reverse();
            }
            Assigner::Session { gap } => out.push((t, t.saturating_add(gap))),
        }
    }

    /// When a window's state may go: the end of its allowed lateness.
    fn cleanup_time(&self, end: i64) -> i64 {
        (end - 1).saturating_add(self.lateness)
    }
}

/// What the window operator needs of a window function.
trait WindowFunction: 'static {
    type In: DeserializeOwned;
    type Acc: Serialize + DeserializeOwned + Clone;
    fn create(&self) -> Self::Acc;
    fn add(&self, acc: &mut Self::Acc, input: &Self::In);
    fn merge(&self, acc: &mut Self::Acc, other: Self::Acc);
    /// Emit the window's results into `batch` (whose timestamp is set to the
    /// window's `end - 1`).
    fn fire(&mut self, window: &Window, acc: Self::Acc, batch: &mut Pending) -> crate::Result<()>;
}

struct AggregateFn<A>(A);

impl<A: Aggregate> WindowFunction for AggregateFn<A> {
    type In = A::In;
    type Acc = A::Acc;
    fn create(&self) -> A::Acc {
        self.0.create()
    }
    fn add(&self, acc: &mut A::Acc, input: &A::In) {
        self.0.add(acc, input)
    }
    fn merge(&self, acc: &mut A::Acc, other: A::Acc) {
        self.0.merge(acc, other)
    }
    fn fire(&mut self, window: &Window, acc: A::Acc, batch: &mut Pending) -> crate::Result<()> {
        let out = self.0.result(window, acc)?;
        batch.push(&out, None);
        Ok(())
    }
}

struct ProcessFn<P>(P);

impl<P: ProcessWindow> WindowFunction for ProcessFn<P> {
    type In = P::In;
    type Acc = Vec<P::In>;
    fn create(&self) -> Vec<P::In> {
        Vec::new()
    }
    fn add(&self, acc: &mut Vec<P::In>, input: &P::In) {
        acc.push(input.clone())
    }
    fn merge(&self, acc: &mut Vec<P::In>, other: Vec<P::In>) {
        acc.extend(other)
    }
    fn fire(&mut self, window: &Window, acc: Vec<P::In>, batch: &mut Pending) -> crate::Result<()> {
        self.0.process(
            window,
            acc,
            &mut Collector {
                batch,
                _type: PhantomData,
            },
        )
    }
}

/// The window operator: per key, its open windows as one value (start,
/// end, accumulator) — read with the batch's other keys in one host call —
/// and a timer at each window's end and at the end of its lateness.
struct WindowOp<F: WindowFunction> {
    f: F,
    spec: Spec,
    windows: ValueState<Vec<(i64, i64, F::Acc)>>,
    /// The windows of the record at hand (kept to spare an allocation).
    assigned: Vec<(i64, i64)>,
}

/// Open a window operator over `f`.
fn open<F: WindowFunction>(f: F, ctx: &mut OpenContext) -> crate::Result<Box<dyn DynOperator>> {
    let spec = Spec::from_config(ctx)?;
    let windows = ctx.value_state("weir.windows")?;
    Ok(Box::new(WindowOp {
        f,
        spec,
        windows,
        assigned: Vec::new(),
    }))
}

pub(crate) fn open_aggregate<A: Aggregate>(
    ctx: &mut OpenContext,
) -> crate::Result<Box<dyn DynOperator>> {
    let a = A::open(ctx)?;
    open(AggregateFn(a), ctx)
}

pub(crate) fn open_process<P: ProcessWindow>(
    ctx: &mut OpenContext,
) -> crate::Result<Box<dyn DynOperator>> {
    let p = P::open(ctx)?;
    open(ProcessFn(p), ctx)
}

fn current_key() -> Vec<u8> {
    with_cache(|c| c.current_key.clone()).unwrap_or_default()
}

impl Spec {
    fn timer(&self, batch: &mut Pending, key: &[u8], time: i64, register: bool) {
        let timer = Timer {
            key: key.to_vec(),
            time,
            domain: WitDomain::from(self.domain),
        };
        batch.timer_ops.push(if register {
            TimerOp::Register(timer)
        } else {
            TimerOp::Delete(timer)
        });
    }

    /// Timers for a window that holds state: its firing (unless the
    /// watermark passed it: it fires at once), and its cleanup.
    fn schedule(&self, batch: &mut Pending, key: &[u8], end: i64) {
        if !self.has_fired(end, batch.watermark) {
            self.timer(batch, key, end - 1, true);
        }
        if self.cleanup_time(end) != end - 1 {
            self.timer(batch, key, self.cleanup_time(end), true);
        }
    }

    fn unschedule(&self, batch: &mut Pending, key: &[u8], end: i64) {
        self.timer(batch, key, end - 1, false);
        if self.cleanup_time(end) != end - 1 {
            self.timer(batch, key, self.cleanup_time(end), false);
        }
    }

    /// Whether the window `[_, end)` is past its allowed lateness.
    fn is_late(&self, end: i64, watermark: Option<i64>) -> bool {
        self.domain == TimeDomain::EventTime
            && watermark.is_some_and(|wm| self.cleanup_time(end) <= wm)
    }

    /// Whether the window `[_, end)` has fired already (a record for it is
    /// within the allowed lateness and makes it fire again).
    fn has_fired(&self, end: i64, watermark: Option<i64>) -> bool {
        self.domain == TimeDomain::EventTime && watermark.is_some_and(|wm| end - 1 <= wm)
    }
}

/// Emit `window`'s results into `batch`, with the timestamp `end - 1`.
fn fire<F: WindowFunction>(
    f: &mut F,
    batch: &mut Pending,
    key: &[u8],
    (start, end): (i64, i64),
    acc: F::Acc,
) -> crate::Result<()> {
    let window = Window {
        start,
        end,
        key: key.to_vec(),
    };
    let timestamp = batch.timestamp.replace(end - 1);
    let fired = f.fire(&window, acc, batch);
    batch.timestamp = timestamp;
    fired
}

impl<F: WindowFunction> WindowOp<F> {
    /// A record for a session: it merges every session of its key that it
    /// overlaps or touches.
    fn session(
        &mut self,
        batch: &mut Pending,
        key: &[u8],
        t: i64,
        input: F::In,
        value: &[u8],
    ) -> crate::Result<()> {
        let WindowOp {
            f, spec, windows, ..
        } = self;
        let Assigner::Session { gap } = spec.assigner else {
            unreachable!("sessions only")
        };
        let (mut start, mut end) = (t, t.saturating_add(gap));
        if spec.is_late(end, batch.watermark) {
            batch.push_side_raw(LATE.name(), value);
            return Ok(());
        }
        let fired = windows.modify(
            |sessions| {
                let mut acc = f.create();
                f.add(&mut acc, &input);
                sessions.retain_mut(|(s, e, other)| {
                    let merges = *s <= end && start <= *e;
                    if merges {
                        start = start.min(*s);
                        end = end.max(*e);
                        f.merge(&mut acc, std::mem::replace(other, f.create()));
                        spec.unschedule(batch, key, *e);
                    }
                    !merges
                });
                spec.schedule(batch, key, end);
                let fired = spec.has_fired(end, batch.watermark).then(|| acc.clone());
                sessions.push((start, end, acc));
                fired
            },
            |_| true,
        )?;
        if let Some(acc) = fired {
            fire(f, batch, key, (start, end), acc)?;
        }
        Ok(())
    }
}

impl<F: WindowFunction> DynOperator for WindowOp<F> {
    fn record(&mut self, value: &[u8], batch: &mut Pending) -> crate::Result<()> {
        let t = match self.spec.domain {
            TimeDomain::EventTime => batch.timestamp.ok_or(
                "an event-time window needs timestamps: give the source a `timestamp` or a `timestamp-assigner`",
            )?,
            TimeDomain::ProcessingTime => batch.processing_time,
        };
        let key = current_key();
        let input: F::In = codec::decode(value)?;
        if let Assigner::Session { .. } = self.spec.assigner {
            return self.session(batch, &key, t, input, value);
        }
        let WindowOp {
            f,
            spec,
            windows,
            assigned,
        } = self;
        let watermark = batch.watermark;
        spec.assign_into(t, assigned);
        assigned.retain(|(_, end)| !spec.is_late(*end, watermark));
        if assigned.is_empty() {
            batch.push_side_raw(LATE.name(), value);
            return Ok(());
        }
        let refire = windows.modify(
            |open| {
                let mut refire = Vec::new();
                for &(start, end) in assigned.iter() {
                    let i = match open.iter().position(|w| w.0 == start) {
                        Some(i) => i,
                        None => {
                            spec.schedule(batch, &key, end);
                            open.push((start, end, f.create()));
                            open.len() - 1
                        }
                    };
                    f.add(&mut open[i].2, &input);
                    if spec.has_fired(end, watermark) {
                        refire.push(((start, end), open[i].2.clone()));
                    }
                }
                refire
            },
            |_| true,
        )?;
        for (window, acc) in refire {
            fire(f, batch, &key, window, acc)?;
        }
        Ok(())
    }

    fn timer(&mut self, time: i64, _: TimeDomain, batch: &mut Pending) -> crate::Result<()> {
        let key = current_key();
        let WindowOp {
            f, spec, windows, ..
        } = self;
        let due = windows.modify(
            |open| {
                let mut due = Vec::new();
                open.retain(|(start, end, acc)| {
                    if end - 1 == time {
                        due.push(((*start, *end), acc.clone()));
                    }
                    spec.cleanup_time(*end) > time
                });
                due
            },
            |open| !open.is_empty(),
        )?;
        for (window, acc) in due {
            fire(f, batch, &key, window, acc)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Spec {
        fn assign(&self, t: i64) -> Vec<(i64, i64)> {
            let mut out = Vec::new();
            self.assign_into(t, &mut out);
            out
        }
    }

    fn spec(assigner: Assigner) -> Spec {
        Spec {
            assigner,
            domain: TimeDomain::EventTime,
            lateness: 0,
        }
    }

    #[test]
    fn assigners() {
        let t = spec(Assigner::Tumbling { size: 10 });
        assert_eq!(t.assign(0), [(0, 10)]);
        assert_eq!(t.assign(9), [(0, 10)]);
        assert_eq!(t.assign(-1), [(-10, 0)]);
        let s = spec(Assigner::Sliding { size: 10, slide: 5 });
        assert_eq!(s.assign(7), [(0, 10), (5, 15)]);
        assert_eq!(s.assign(10), [(5, 15), (10, 20)]);
        let s = spec(Assigner::Sliding {
            size: 30,
            slide: 10,
        });
        assert_eq!(s.assign(25), [(0, 30), (10, 40), (20, 50)]);
        // A slide that does not divide the size: 30 days every 7 days.
        const DAY: i64 = 86_400_000;
        let s = spec(Assigner::Sliding {
            size: 30 * DAY,
            slide: 7 * DAY,
        });
        for t in [0, 5 * DAY, 29 * DAY + 1, 100 * DAY - 1, -3 * DAY] {
            let want: Vec<(i64, i64)> = (-10..20)
                .map(|k| (k * 7 * DAY, k * 7 * DAY + 30 * DAY))
                .filter(|&(a, b)| a <= t && t < b)
                .collect();
            assert_eq!(s.assign(t), want, "t = {t}");
            assert!((4..=5).contains(&want.len()));
        }
        // A slide above the size: records between windows are in none.
        let s = spec(Assigner::Sliding { size: 5, slide: 10 });
        assert_eq!(s.assign(3), [(0, 5)]);
        assert_eq!(s.assign(7), []);
        let g = spec(Assigner::Session { gap: 5 });
        assert_eq!(g.assign(3), [(3, 8)]);
    }

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
}
