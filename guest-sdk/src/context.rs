//! What an operator sees of the runtime while it runs: [`Context`] and
//! [`Collector`] per record, [`OpenContext`] when it is created.

use std::borrow::Borrow;
use std::marker::PhantomData;
use std::str::FromStr;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::__private::bindings::weir::operator::types::{
    StateKind, TimeDomain as WitDomain, Timer, TimerOp,
};
use crate::batch::OutBatch;
use crate::codec::wire::{self, Codec};
use crate::coder::Encode;
use crate::host;
use crate::state::{Coding, ListState, MapState, ValueState, with_cache};

/// The effects of one batch, collected in the guest and handed over at its end.
pub(crate) struct Pending {
    pub(crate) timestamp: Option<i64>,
    pub(crate) watermark: Option<i64>,
    pub(crate) processing_time: i64,
    pub(crate) outputs: OutBatch,
    pub(crate) side: Vec<(String, OutBatch)>,
    /// The codec of each side output in `side`, in order.
    pub(crate) side_codecs: Vec<Codec>,
    pub(crate) timer_ops: Vec<TimerOp>,
    /// The codec of the operator's input records and keys.
    pub(crate) input: Codec,
    /// The codec of its main output's records and keys.
    pub(crate) output: Codec,
    /// The codec of its state (a window aggregate's accumulators).
    pub(crate) state: Codec,
}

impl Default for Pending {
    fn default() -> Self {
        Pending {
            timestamp: None,
            watermark: None,
            processing_time: 0,
            outputs: OutBatch::default(),
            side: Vec::new(),
            side_codecs: Vec::new(),
            timer_ops: Vec::new(),
            input: Codec::Json,
            output: Codec::Json,
            state: Codec::Json,
        }
    }
}

/// Hand records emitted so far to the host (main output, or side output
/// `side`): the host stages them with the rest of the call's effects, so a
/// failing call still emits nothing.
#[cfg(target_family = "wasm")]
fn hand_over_early(side: Option<&str>, batch: OutBatch) {
    use crate::__private::bindings::weir::operator::host as imports;
    match side {
        None => imports::emit(&batch.into_wit()),
        Some(name) => imports::emit_side(name, &batch.into_wit()),
    }
}

/// Outside WebAssembly (the testing harness) everything is handed over at
/// the end of the call, so this is never called.
#[cfg(not(target_family = "wasm"))]
fn hand_over_early(_: Option<&str>, _: OutBatch) {
    unreachable!("kept until the end of the call outside WebAssembly")
}

impl Pending {
    /// Emit `value` on the main output, written by `enc`, with `key`.
    #[inline(always)]
    pub(crate) fn push<T: ?Sized, E: Encode<T> + ?Sized>(
        &mut self,
        enc: &E,
        value: &T,
        key: Option<&[u8]>,
    ) {
        let (timestamp, codec) = (self.timestamp, self.output);
        self.outputs
            .push_with(key, timestamp, |buf| enc.encode(codec, value, buf));
        if cfg!(target_family = "wasm") && self.outputs.is_large() {
            hand_over_early(None, std::mem::take(&mut self.outputs));
        }
    }

    /// The batch of side output `name`, and its codec (looked up once per
    /// side output and batch).
    fn side_batch(&mut self, name: &str) -> (&mut OutBatch, Codec) {
        let i = match self.side.iter().position(|(n, _)| n == name) {
            Some(i) => i,
            None => {
                self.side.push((name.to_owned(), OutBatch::default()));
                self.side_codecs
                    .push(with_cache(|c| wire::side_output(&c.codecs, name)));
                self.side.len() - 1
            }
        };
        (&mut self.side[i].1, self.side_codecs[i])
    }

    fn push_side<T: Serialize + ?Sized>(&mut self, name: &str, value: &T) {
        let timestamp = self.timestamp;
        let (batch, codec) = self.side_batch(name);
        batch.push_with(None, timestamp, |buf| wire::encode_into(codec, buf, value));
        if cfg!(target_family = "wasm") && batch.is_large() {
            hand_over_early(Some(name), std::mem::take(batch));
        }
    }
}

/// A side output: its name (what the manifest routes, as
/// `input = "operator:name"`) and the type of its records, declared once.
/// Window operators send records later than their allowed lateness to the
/// side output `late`.
///
/// ```
/// const REJECTED: weir::SideOutput<String> = weir::SideOutput::new("rejected");
/// assert_eq!(REJECTED.name(), "rejected");
/// ```
pub struct SideOutput<T: ?Sized> {
    name: &'static str,
    _type: PhantomData<fn(&T)>,
}

impl<T: ?Sized> SideOutput<T> {
    /// The side output called `name`.
    pub const fn new(name: &'static str) -> Self {
        SideOutput {
            name,
            _type: PhantomData,
        }
    }

    /// Its name.
    pub const fn name(&self) -> &'static str {
        self.name
    }
}

/// Which clock a timer follows.
///
/// ```
/// assert_ne!(weir::TimeDomain::EventTime, weir::TimeDomain::ProcessingTime);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TimeDomain {
    /// Fires when the watermark reaches the timer's time.
    EventTime,
    /// Fires when the worker's wall clock reaches the timer's time.
    ProcessingTime,
}

impl From<TimeDomain> for WitDomain {
    fn from(d: TimeDomain) -> Self {
        match d {
            TimeDomain::EventTime => WitDomain::EventTime,
            TimeDomain::ProcessingTime => WitDomain::ProcessingTime,
        }
    }
}

impl From<WitDomain> for TimeDomain {
    fn from(d: WitDomain) -> Self {
        match d {
            WitDomain::EventTime => TimeDomain::EventTime,
            WitDomain::ProcessingTime => TimeDomain::ProcessingTime,
        }
    }
}

/// Where a `flat_map` function sends its outputs.
///
/// ```
/// fn words(line: String, out: &mut weir::Collector<String>) {
///     for w in line.split_whitespace() {
///         out.emit(w.to_string());
///     }
/// }
/// let mut h = weir::testing::Harness::flat_map(words);
/// let out: Vec<String> = h.process(&(), &"a b", None).unwrap();
/// assert_eq!(out, ["a", "b"]);
/// ```
pub struct Collector<'a, T> {
    pub(crate) batch: &'a mut Pending,
    /// How its records are written (rows for a typed `T`, serde otherwise).
    pub(crate) enc: &'a dyn Encode<T>,
}

impl<T> Collector<'_, T> {
    /// Send a record to the main output (it keeps the input's timestamp).
    ///
    /// # Example
    ///
    /// ```
    /// fn chars(s: String, out: &mut weir::Collector<char>) {
    ///     for c in s.chars() {
    ///         out.emit(c);
    ///     }
    /// }
    /// let mut h = weir::testing::Harness::flat_map(chars);
    /// assert_eq!(h.process::<_, _, char>(&(), "ab", None).unwrap(), ['a', 'b']);
    /// ```
    pub fn emit(&mut self, value: impl Borrow<T>) {
        self.batch.push(self.enc, value.borrow(), None);
    }
}

/// The runtime as seen while processing one record or timer: outputs, the
/// current key, time, and timers.
///
/// ```
/// use weir::{Context, KeyedProcess, OpenContext, TimeDomain};
///
/// /// Emits a record's key one second (event time) after it arrives.
/// struct Echo;
///
/// impl KeyedProcess for Echo {
///     type In = u32;
///     type Out = String;
///     fn open(_: &mut OpenContext) -> weir::Result<Self> {
///         Ok(Echo)
///     }
///     fn process(&mut self, _: u32, ctx: &mut Context<String>) -> weir::Result<()> {
///         let at = ctx.timestamp().unwrap_or(0) + 1000;
///         ctx.register_timer(TimeDomain::EventTime, at);
///         Ok(())
///     }
///     fn on_timer(&mut self, time: i64, _: TimeDomain, ctx: &mut Context<String>) -> weir::Result<()> {
///         let key: String = ctx.key()?;
///         ctx.emit(format!("{key}@{time}"));
///         Ok(())
///     }
/// }
///
/// let mut h = weir::testing::Harness::keyed_process::<Echo>(&[]).unwrap();
/// h.process::<_, _, String>(&"k", &1, Some(500)).unwrap();
/// let fired: Vec<String> = h.advance_watermark(2000).unwrap();
/// assert_eq!(fired, ["k@1500"]);
/// ```
pub struct Context<'a, Out> {
    pub(crate) batch: &'a mut Pending,
    /// How its records are written (rows for a typed `Out`, serde otherwise).
    pub(crate) enc: &'a dyn Encode<Out>,
}

impl<Out> Context<'_, Out> {
    /// Send a record to the main output. It carries the input's timestamp (a
    /// timer's time, for event-time timers).
    ///
    /// # Example
    ///
    /// ```
    /// # use weir::*;
    /// # struct Op {  }
    /// # impl KeyedProcess for Op {
    /// #     type In = i64;
    /// #     type Out = i64;
    /// #     fn open(ctx: &mut OpenContext) -> weir::Result<Self> { Ok(Op {  }) }
    /// fn process(&mut self, input: i64, ctx: &mut Context<i64>) -> weir::Result<()> {
    ///     ctx.emit(input + 1);
    ///     Ok(())
    /// }
    /// # }
    /// # let mut h = weir::testing::Harness::keyed_process::<Op>(&[]).unwrap();
    /// # assert_eq!(h.process::<_, _, i64>("k", &1, None).unwrap(), [2]);
    /// ```
    pub fn emit(&mut self, value: impl Borrow<Out>) {
        self.batch.push(self.enc, value.borrow(), None);
    }

    /// Send a record with a key to the main output; a later `key-by = "key"`
    /// in the manifest partitions by it.
    ///
    /// # Example
    ///
    /// ```
    /// # use weir::*;
    /// # struct Op {  }
    /// # impl KeyedProcess for Op {
    /// #     type In = i64;
    /// #     type Out = i64;
    /// #     fn open(ctx: &mut OpenContext) -> weir::Result<Self> { Ok(Op {  }) }
    /// fn process(&mut self, input: i64, ctx: &mut Context<i64>) -> weir::Result<()> {
    ///     // Re-key by parity for a later `key-by = "key"`.
    ///     ctx.emit_keyed(&(input % 2 == 0), input);
    ///     Ok(())
    /// }
    /// # }
    /// # let mut h = weir::testing::Harness::keyed_process::<Op>(&[]).unwrap();
    /// # assert_eq!(h.process::<_, _, i64>("k", &4, None).unwrap(), [4]);
    /// ```
    pub fn emit_keyed<K: Serialize + ?Sized>(&mut self, key: &K, value: impl Borrow<Out>) {
        let key = wire::encode(wire::key_codec(self.batch.output), key);
        self.batch.push(self.enc, value.borrow(), Some(&key));
    }

    /// Send a record of any type to the side output `name`; the manifest
    /// routes side outputs to sinks (`input = "operator:name"`). A
    /// [`SideOutput`] tag fixes the name and the type once: see
    /// [`Context::output`].
    ///
    /// # Example
    ///
    /// ```
    /// # use weir::*;
    /// # struct Op {  }
    /// # impl KeyedProcess for Op {
    /// #     type In = i64;
    /// #     type Out = i64;
    /// #     fn open(ctx: &mut OpenContext) -> weir::Result<Self> { Ok(Op {  }) }
    /// fn process(&mut self, input: i64, ctx: &mut Context<i64>) -> weir::Result<()> {
    ///     if input < 0 {
    ///         ctx.emit_side("negative", &input);
    ///     } else {
    ///         ctx.emit(input);
    ///     }
    ///     Ok(())
    /// }
    /// # }
    /// # let mut h = weir::testing::Harness::keyed_process::<Op>(&[]).unwrap();
    /// # assert!(h.process::<_, _, i64>("k", &-1, None).unwrap().is_empty());
    /// # assert_eq!(h.side_output::<i64>("negative").unwrap(), [-1]);
    /// ```
    pub fn emit_side<T: Serialize + ?Sized>(&mut self, name: &str, value: &T) {
        self.batch.push_side(name, value);
    }

    /// Send a record to a typed side output.
    ///
    /// # Example
    ///
    /// ```
    /// # use weir::*;
    /// /// Readings out of range, for a sink of their own.
    /// const OUT_OF_RANGE: SideOutput<f64> = SideOutput::new("out-of-range");
    ///
    /// struct Check;
    /// impl Process for Check {
    ///     type In = f64;
    ///     type Out = f64;
    ///     fn open(_: &mut OpenContext) -> weir::Result<Self> { Ok(Check) }
    ///     fn process(&mut self, celsius: f64, ctx: &mut Context<f64>) -> weir::Result<()> {
    ///         if (-90.0..60.0).contains(&celsius) {
    ///             ctx.emit(celsius);
    ///         } else {
    ///             ctx.output(&OUT_OF_RANGE, &celsius);
    ///         }
    ///         Ok(())
    ///     }
    /// }
    /// let mut h = weir::testing::Harness::process_operator::<Check>(&[]).unwrap();
    /// h.process::<_, _, f64>(&(), &99.5, None).unwrap();
    /// assert_eq!(h.side_output::<f64>(OUT_OF_RANGE.name()).unwrap(), [99.5]);
    /// ```
    pub fn output<T: Serialize + ?Sized>(&mut self, tag: &SideOutput<T>, value: &T) {
        self.batch.push_side(tag.name, value);
    }

    /// The event time of the record being processed (the timer's time in
    /// `on_timer` for event-time timers).
    ///
    /// # Example
    ///
    /// ```
    /// # use weir::*;
    /// # struct Op {  }
    /// # impl KeyedProcess for Op {
    /// #     type In = i64;
    /// #     type Out = i64;
    /// #     fn open(ctx: &mut OpenContext) -> weir::Result<Self> { Ok(Op {  }) }
    /// fn process(&mut self, input: i64, ctx: &mut Context<i64>) -> weir::Result<()> {
    ///     ctx.emit(ctx.timestamp().unwrap_or(0));
    ///     Ok(())
    /// }
    /// # }
    /// # let mut h = weir::testing::Harness::keyed_process::<Op>(&[]).unwrap();
    /// # assert_eq!(h.process::<_, _, i64>("k", &0, Some(42)).unwrap(), [42]);
    /// ```
    pub fn timestamp(&self) -> Option<i64> {
        self.batch.timestamp
    }

    /// The task's current watermark, `None` before the first one.
    ///
    /// # Example
    ///
    /// ```
    /// # use weir::*;
    /// # struct Op {  }
    /// # impl KeyedProcess for Op {
    /// #     type In = i64;
    /// #     type Out = i64;
    /// #     fn open(ctx: &mut OpenContext) -> weir::Result<Self> { Ok(Op {  }) }
    /// fn process(&mut self, input: i64, ctx: &mut Context<i64>) -> weir::Result<()> {
    ///     // Records behind the watermark are late.
    ///     if ctx.watermark().is_some_and(|w| ctx.timestamp().unwrap_or(i64::MIN) <= w) {
    ///         ctx.emit_side("late", &input);
    ///     }
    ///     Ok(())
    /// }
    /// # }
    /// # let mut h = weir::testing::Harness::keyed_process::<Op>(&[]).unwrap();
    /// # h.advance_watermark::<i64>(100).unwrap();
    /// # h.process::<_, _, i64>("k", &1, Some(50)).unwrap();
    /// # assert_eq!(h.side_output::<i64>("late").unwrap(), [1]);
    /// ```
    pub fn watermark(&self) -> Option<i64> {
        self.batch.watermark
    }

    /// The worker's processing time (ms since the epoch) when the batch began.
    ///
    /// # Example
    ///
    /// ```
    /// # use weir::*;
    /// # struct Op {  }
    /// # impl KeyedProcess for Op {
    /// #     type In = i64;
    /// #     type Out = i64;
    /// #     fn open(ctx: &mut OpenContext) -> weir::Result<Self> { Ok(Op {  }) }
    /// fn process(&mut self, input: i64, ctx: &mut Context<i64>) -> weir::Result<()> {
    ///     ctx.emit(ctx.processing_time());
    ///     Ok(())
    /// }
    /// # }
    /// # let mut h = weir::testing::Harness::keyed_process::<Op>(&[]).unwrap();
    /// # h.advance_processing_time::<i64>(7).unwrap();
    /// # assert_eq!(h.process::<_, _, i64>("k", &0, None).unwrap(), [7]);
    /// ```
    pub fn processing_time(&self) -> i64 {
        self.batch.processing_time
    }

    /// The current key, decoded.
    ///
    /// # Example
    ///
    /// ```
    /// # use weir::*;
    /// # struct Op {  }
    /// # impl KeyedProcess for Op {
    /// #     type In = i64;
    /// #     type Out = String;
    /// #     fn open(ctx: &mut OpenContext) -> weir::Result<Self> { Ok(Op {  }) }
    /// fn process(&mut self, input: i64, ctx: &mut Context<String>) -> weir::Result<()> {
    ///     let key: String = ctx.key()?;
    ///     ctx.emit(key);
    ///     Ok(())
    /// }
    /// # }
    /// # let mut h = weir::testing::Harness::keyed_process::<Op>(&[]).unwrap();
    /// # assert_eq!(h.process::<_, _, String>("user-7", &0, None).unwrap(), ["user-7"]);
    /// ```
    pub fn key<K: DeserializeOwned>(&self) -> crate::Result<K> {
        let (bytes, codec) = with_cache(|c| (c.current_key.clone(), c.codecs.input));
        match bytes {
            Some(b) => wire::decode(wire::key_codec(codec), &b),
            None => Err("this operator is not on a keyed stream".into()),
        }
    }

    /// The current key's raw bytes, if the stream is keyed, as the input
    /// stream encodes keys (JSON, or MessagePack: see [`crate::codec`]).
    ///
    /// # Example
    ///
    /// ```
    /// # use weir::*;
    /// # struct Op {  }
    /// # impl KeyedProcess for Op {
    /// #     type In = i64;
    /// #     type Out = usize;
    /// #     fn open(ctx: &mut OpenContext) -> weir::Result<Self> { Ok(Op {  }) }
    /// fn process(&mut self, input: i64, ctx: &mut Context<usize>) -> weir::Result<()> {
    ///     ctx.emit(ctx.key_bytes().map_or(0, |k| k.len()));
    ///     Ok(())
    /// }
    /// # }
    /// # let mut h = weir::testing::Harness::keyed_process::<Op>(&[]).unwrap();
    /// # assert_eq!(h.process::<_, _, usize>("ab", &0, None).unwrap(), [4]); // "ab" as JSON
    /// ```
    pub fn key_bytes(&self) -> Option<Vec<u8>> {
        with_cache(|c| c.current_key.clone())
    }

    fn timer_op(&mut self, domain: TimeDomain, time: i64, register: bool) {
        let key = with_cache(|c| c.current_key.clone())
            .expect("timers are only available in keyed_process operators");
        let timer = Timer {
            key,
            time,
            domain: domain.into(),
        };
        self.batch.timer_ops.push(if register {
            TimerOp::Register(timer)
        } else {
            TimerOp::Delete(timer)
        });
    }

    /// Register a timer for the current key at `time` (ms). At most one
    /// timer exists per key, domain and time; `on_timer` runs when it fires.
    ///
    /// # Panics
    ///
    /// Outside a `keyed_process` operator.
    ///
    /// # Example
    ///
    /// ```
    /// # use weir::*;
    /// # struct Op {  }
    /// # impl KeyedProcess for Op {
    /// #     type In = i64;
    /// #     type Out = i64;
    /// #     fn open(ctx: &mut OpenContext) -> weir::Result<Self> { Ok(Op {  }) }
    /// fn process(&mut self, input: i64, ctx: &mut Context<i64>) -> weir::Result<()> {
    ///     // Remind in 10 seconds of event time.
    ///     ctx.register_timer(TimeDomain::EventTime, ctx.timestamp().unwrap_or(0) + 10_000);
    ///     Ok(())
    /// }
    /// fn on_timer(&mut self, time: i64, domain: TimeDomain, ctx: &mut Context<i64>) -> weir::Result<()> {
    ///     ctx.emit(time);
    ///     Ok(())
    /// }
    /// # }
    /// # let mut h = weir::testing::Harness::keyed_process::<Op>(&[]).unwrap();
    /// # h.process::<_, _, i64>("k", &0, Some(5)).unwrap();
    /// # assert_eq!(h.advance_watermark::<i64>(20_000).unwrap(), [10_005]);
    /// ```
    pub fn register_timer(&mut self, domain: TimeDomain, time: i64) {
        self.timer_op(domain, time, true);
    }

    /// Delete the current key's timer at `time`, if there is one.
    ///
    /// # Panics
    ///
    /// Outside a `keyed_process` operator.
    ///
    /// # Example
    ///
    /// ```
    /// # use weir::*;
    /// # struct Op {  }
    /// # impl KeyedProcess for Op {
    /// #     type In = i64;
    /// #     type Out = i64;
    /// #     fn open(ctx: &mut OpenContext) -> weir::Result<Self> { Ok(Op {  }) }
    /// fn process(&mut self, input: i64, ctx: &mut Context<i64>) -> weir::Result<()> {
    ///     // A record with input 0 cancels the reminder set at 1,000.
    ///     if input == 0 {
    ///         ctx.delete_timer(TimeDomain::EventTime, 1_000);
    ///     } else {
    ///         ctx.register_timer(TimeDomain::EventTime, 1_000);
    ///     }
    ///     Ok(())
    /// }
    /// fn on_timer(&mut self, time: i64, domain: TimeDomain, ctx: &mut Context<i64>) -> weir::Result<()> {
    ///     ctx.emit(time);
    ///     Ok(())
    /// }
    /// # }
    /// # let mut h = weir::testing::Harness::keyed_process::<Op>(&[]).unwrap();
    /// # h.process::<_, _, i64>("k", &1, None).unwrap();
    /// # h.process::<_, _, i64>("k", &0, None).unwrap();
    /// # assert!(h.advance_watermark::<i64>(5_000).unwrap().is_empty());
    /// ```
    pub fn delete_timer(&mut self, domain: TimeDomain, time: i64) {
        self.timer_op(domain, time, false);
    }
}

/// What an operator sees when it is created: the job's parameters, and
/// keyed state declarations.
///
/// ```
/// use weir::{Context, OpenContext, Process};
///
/// struct AtLeast { min: i64 }
///
/// impl Process for AtLeast {
///     type In = i64;
///     type Out = i64;
///     fn open(ctx: &mut OpenContext) -> weir::Result<Self> {
///         Ok(AtLeast { min: ctx.param_or("min", 0)? })
///     }
///     fn process(&mut self, n: i64, ctx: &mut Context<i64>) -> weir::Result<()> {
///         if n >= self.min {
///             ctx.emit(n);
///         }
///         Ok(())
///     }
/// }
///
/// let mut h = weir::testing::Harness::process_operator::<AtLeast>(&[("min", "3")]).unwrap();
/// let out: Vec<i64> = h.process(&(), &5, None).unwrap();
/// assert_eq!(out, [5]);
/// assert!(weir::testing::Harness::process_operator::<AtLeast>(&[("min", "x")]).is_err());
/// ```
pub struct OpenContext {
    pub(crate) config: Vec<(String, String)>,
    pub(crate) keyed: bool,
    /// A window function's windows, as the manifest declares them.
    pub(crate) window: Option<crate::__private::bindings::weir::operator::types::WindowSpec>,
}

impl OpenContext {
    /// The attempt of the job this instance runs in: 0 for the first run,
    /// one more every time the job restarts after a failure (Flink's
    /// `getAttemptNumber`). State restored from a checkpoint is the same
    /// whatever the attempt; this is for operators that must behave
    /// differently on a retry (tests that fail once, say).
    ///
    /// # Example
    ///
    /// ```
    /// # use weir::*;
    /// # struct Op { retry: bool }
    /// # impl Process for Op {
    /// #     type In = i64;
    /// #     type Out = i64;
    /// fn open(ctx: &mut OpenContext) -> weir::Result<Self> {
    ///     Ok(Op { retry: ctx.attempt_number() > 0 })
    /// }
    /// #     fn process(&mut self, n: i64, ctx: &mut Context<i64>) -> weir::Result<()> { ctx.emit(n); Ok(()) }
    /// # }
    /// # let h = weir::testing::Harness::process_operator::<Op>(&[("weir.attempt", "2")]).unwrap();
    /// ```
    pub fn attempt_number(&self) -> u32 {
        self.param("weir.attempt")
            .and_then(|a| a.parse().ok())
            .unwrap_or(0)
    }

    /// The job parameter `name`, as given.
    ///
    /// # Example
    ///
    /// ```
    /// # use weir::*;
    /// # struct Op { limit: i64 }
    /// # impl Process for Op {
    /// #     type In = i64;
    /// #     type Out = i64;
    /// fn open(ctx: &mut OpenContext) -> weir::Result<Self> {
    ///     let limit = ctx.param("limit").map_or(Ok(10), str::parse)?;
    ///     Ok(Op { limit })
    /// }
    /// #     fn process(&mut self, n: i64, ctx: &mut Context<i64>) -> weir::Result<()> { if n <= self.limit { ctx.emit(n) } Ok(()) }
    /// # }
    /// # let mut h = weir::testing::Harness::process_operator::<Op>(&[("limit", "5")]).unwrap();
    /// # assert!(h.process::<_, _, i64>(&(), &6, None).unwrap().is_empty());
    /// ```
    pub fn param(&self, name: &str) -> Option<&str> {
        self.config
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The job parameter `name` parsed, or an error naming it.
    ///
    /// # Example
    ///
    /// ```
    /// # use weir::*;
    /// # struct Op { limit: i64 }
    /// # impl Process for Op {
    /// #     type In = i64;
    /// #     type Out = i64;
    /// fn open(ctx: &mut OpenContext) -> weir::Result<Self> {
    ///     Ok(Op { limit: ctx.required_param("limit")? })
    /// }
    /// #     fn process(&mut self, n: i64, ctx: &mut Context<i64>) -> weir::Result<()> { if n <= self.limit { ctx.emit(n) } Ok(()) }
    /// # }
    /// # let mut h = weir::testing::Harness::process_operator::<Op>(&[("limit", "5")]).unwrap();
    /// # assert_eq!(h.process::<_, _, i64>(&(), &5, None).unwrap(), [5]);
    /// # assert!(weir::testing::Harness::process_operator::<Op>(&[]).is_err());
    /// ```
    pub fn required_param<T: FromStr>(&self, name: &str) -> crate::Result<T>
    where
        T::Err: std::fmt::Display,
    {
        let raw = self
            .param(name)
            .ok_or_else(|| format!("missing parameter `{name}`"))?;
        raw.parse()
            .map_err(|e| format!("parameter `{name}` = {raw:?}: {e}").into())
    }

    /// The job parameter `name` parsed, or `default` when it is not given.
    ///
    /// # Example
    ///
    /// ```
    /// # use weir::*;
    /// # struct Op { limit: i64 }
    /// # impl Process for Op {
    /// #     type In = i64;
    /// #     type Out = i64;
    /// fn open(ctx: &mut OpenContext) -> weir::Result<Self> {
    ///     Ok(Op { limit: ctx.param_or("limit", 100)? })
    /// }
    /// #     fn process(&mut self, n: i64, ctx: &mut Context<i64>) -> weir::Result<()> { if n <= self.limit { ctx.emit(n) } Ok(()) }
    /// # }
    /// # let mut h = weir::testing::Harness::process_operator::<Op>(&[]).unwrap();
    /// # assert_eq!(h.process::<_, _, i64>(&(), &99, None).unwrap(), [99]);
    /// ```
    pub fn param_or<T: FromStr>(&self, name: &str, default: T) -> crate::Result<T>
    where
        T::Err: std::fmt::Display,
    {
        match self.param(name) {
            Some(_) => self.required_param(name),
            None => Ok(default),
        }
    }

    /// All job parameters.
    ///
    /// # Example
    ///
    /// ```
    /// # use weir::*;
    /// # struct Op { limit: i64 }
    /// # impl Process for Op {
    /// #     type In = i64;
    /// #     type Out = i64;
    /// fn open(ctx: &mut OpenContext) -> weir::Result<Self> {
    ///     for (name, value) in ctx.params() {
    ///         weir::log(LogLevel::Info, &format!("{name} = {value}"));
    ///     }
    ///     Ok(Op { limit: 0 })
    /// }
    /// #     fn process(&mut self, n: i64, ctx: &mut Context<i64>) -> weir::Result<()> { if n <= self.limit { ctx.emit(n) } Ok(()) }
    /// # }
    /// # let mut h = weir::testing::Harness::process_operator::<Op>(&[("a", "1")]).unwrap();
    /// # assert_eq!(h.process::<_, _, i64>(&(), &0, None).unwrap(), [0]);
    /// ```
    pub fn params(&self) -> &[(String, String)] {
        &self.config
    }

    fn declare(&mut self, name: &str, kind: StateKind) -> crate::Result<usize> {
        self.declare_with(name, kind, None)
    }

    fn declare_with(
        &mut self,
        name: &str,
        kind: StateKind,
        ttl: Option<crate::Ttl>,
    ) -> crate::Result<usize> {
        self.declare_typed(name, kind, ttl, None)
    }

    /// Declare a state, its values rows of `value_type` if given.
    fn declare_typed(
        &mut self,
        name: &str,
        kind: StateKind,
        ttl: Option<crate::Ttl>,
        value_type: Option<crate::Type>,
    ) -> crate::Result<usize> {
        if !self.keyed {
            return Err(
                format!("state `{name}`: keyed state needs a keyed_process operator").into(),
            );
        }
        let id = match (ttl, value_type) {
            (None, None) => host::with(|h| h.declare_state(name, kind))?,
            (Some(ttl), None) => host::with(|h| h.declare_state_ttl(name, kind, ttl.wit()))?,
            (ttl, Some(ty)) => host::with(|h| {
                h.declare_typed_state(name, kind, ttl.map(|t| t.wit()), &ty.to_string())
            })?,
        };
        Ok(with_cache(|c| c.add(id, kind)))
    }

    /// Declare a [`ValueState`] called `name` whose value expires `ttl`
    /// after it was last written (Flink's `StateTtlConfig`): once expired,
    /// [`ValueState::get`] answers `None`, and the value is cleaned out of
    /// the state.
    ///
    /// # Example
    ///
    /// ```
    /// # use weir::*;
    /// struct Op { last_seen: ValueState<i64> }
    /// # impl KeyedProcess for Op { type In = i64; type Out = i64;
    /// fn open(ctx: &mut OpenContext) -> weir::Result<Self> {
    ///     Ok(Op { last_seen: ctx.value_state_ttl("last-seen", Ttl::secs(60))? })
    /// }
    /// # fn process(&mut self, n: i64, ctx: &mut Context<i64>) -> weir::Result<()> { if self.last_seen.get()?.is_none() { ctx.emit(n) } self.last_seen.set(n); Ok(()) } }
    /// # let mut h = weir::testing::Harness::keyed_process::<Op>(&[]).unwrap();
    /// # assert_eq!(h.process::<_, _, i64>("k", &1, None).unwrap(), [1]);
    /// # assert!(h.process::<_, _, i64>("k", &2, None).unwrap().is_empty());
    /// # h.advance_processing_time::<i64>(60_000).unwrap();
    /// # assert_eq!(h.process::<_, _, i64>("k", &3, None).unwrap(), [3]);
    /// ```
    pub fn value_state_ttl<T>(
        &mut self,
        name: &str,
        ttl: crate::Ttl,
    ) -> crate::Result<ValueState<T>>
    where
        T: Serialize + DeserializeOwned + Clone + 'static,
    {
        Ok(ValueState::new(
            self.declare_with(name, StateKind::Value, Some(ttl))?,
            Coding::serde(),
        ))
    }

    /// Declare a [`ListState`] called `name` whose every element expires
    /// `ttl` after it was added (see [`OpenContext::value_state_ttl`]); an
    /// element keeps its time while the list is read and added to.
    ///
    /// # Example
    ///
    /// ```
    /// # use weir::*;
    /// struct Recent { seen: ListState<i64> }
    /// # impl KeyedProcess for Recent { type In = i64; type Out = usize;
    /// fn open(ctx: &mut OpenContext) -> weir::Result<Self> {
    ///     Ok(Recent { seen: ctx.list_state_ttl("seen", Ttl::ms(1_000))? })
    /// }
    /// # fn process(&mut self, n: i64, ctx: &mut Context<usize>) -> weir::Result<()> { let before = self.seen.get()?.len(); self.seen.add(n)?; ctx.emit(before + 1); Ok(()) } }
    /// # let mut h = weir::testing::Harness::keyed_process::<Recent>(&[]).unwrap();
    /// # assert_eq!(h.process::<_, _, usize>("k", &1, None).unwrap(), [1]);
    /// # h.advance_processing_time::<usize>(600).unwrap();
    /// # assert_eq!(h.process::<_, _, usize>("k", &2, None).unwrap(), [2]);
    /// # h.advance_processing_time::<usize>(1_000).unwrap();
    /// # assert_eq!(h.process::<_, _, usize>("k", &3, None).unwrap(), [2], "the first, added at 0, expired");
    /// ```
    pub fn list_state_ttl<T>(&mut self, name: &str, ttl: crate::Ttl) -> crate::Result<ListState<T>>
    where
        T: Serialize + DeserializeOwned,
    {
        Ok(ListState::new(
            self.declare_with(name, StateKind::List, Some(ttl))?,
            Coding::serde(),
        ))
    }

    /// Declare a [`MapState`] called `name` whose every entry expires `ttl`
    /// after it was last put (see [`OpenContext::value_state_ttl`]).
    pub fn map_state_ttl<K, V>(
        &mut self,
        name: &str,
        ttl: crate::Ttl,
    ) -> crate::Result<MapState<K, V>>
    where
        K: Serialize + DeserializeOwned,
        V: Serialize + DeserializeOwned,
    {
        Ok(MapState::new(
            self.declare_with(name, StateKind::Map, Some(ttl))?,
            Coding::serde(),
        ))
    }

    /// Declare a [`ValueState`] called `name`.
    ///
    /// # Example
    ///
    /// ```
    /// # use weir::*;
    /// struct Op { seen: ValueState<bool> }
    /// # impl KeyedProcess for Op { type In = i64; type Out = i64;
    /// fn open(ctx: &mut OpenContext) -> weir::Result<Self> {
    ///     Ok(Op { seen: ctx.value_state("seen")? })
    /// }
    /// # fn process(&mut self, n: i64, ctx: &mut Context<i64>) -> weir::Result<()> { if self.seen.get()?.is_none() { self.seen.set(true); ctx.emit(n) } Ok(()) } }
    /// # let mut h = weir::testing::Harness::keyed_process::<Op>(&[]).unwrap();
    /// # assert_eq!(h.process::<_, _, i64>("k", &1, None).unwrap(), [1]);
    /// # assert!(h.process::<_, _, i64>("k", &2, None).unwrap().is_empty());
    /// ```
    pub fn value_state<T>(&mut self, name: &str) -> crate::Result<ValueState<T>>
    where
        T: Serialize + DeserializeOwned + Clone + 'static,
    {
        Ok(ValueState::new(
            self.declare(name, StateKind::Value)?,
            Coding::serde(),
        ))
    }

    /// Declare a [`ListState`] called `name`.
    ///
    /// # Example
    ///
    /// ```
    /// # use weir::*;
    /// struct Op { history: ListState<i64> }
    /// # impl KeyedProcess for Op { type In = i64; type Out = usize;
    /// fn open(ctx: &mut OpenContext) -> weir::Result<Self> {
    ///     Ok(Op { history: ctx.list_state("history")? })
    /// }
    /// # fn process(&mut self, n: i64, ctx: &mut Context<usize>) -> weir::Result<()> { self.history.add(n)?; ctx.emit(self.history.get()?.len()); Ok(()) } }
    /// # let mut h = weir::testing::Harness::keyed_process::<Op>(&[]).unwrap();
    /// # h.process::<_, _, usize>("k", &1, None).unwrap();
    /// # assert_eq!(h.process::<_, _, usize>("k", &2, None).unwrap(), [2]);
    /// ```
    pub fn list_state<T>(&mut self, name: &str) -> crate::Result<ListState<T>>
    where
        T: Serialize + DeserializeOwned,
    {
        Ok(ListState::new(
            self.declare(name, StateKind::List)?,
            Coding::serde(),
        ))
    }

    /// Declare a [`MapState`] called `name`.
    ///
    /// # Example
    ///
    /// ```
    /// # use weir::*;
    /// struct Op { per_page: MapState<String, u32> }
    /// # impl KeyedProcess for Op { type In = String; type Out = u32;
    /// fn open(ctx: &mut OpenContext) -> weir::Result<Self> {
    ///     Ok(Op { per_page: ctx.map_state("per-page")? })
    /// }
    /// # fn process(&mut self, p: String, ctx: &mut Context<u32>) -> weir::Result<()> { let n = self.per_page.get(&p)?.unwrap_or(0) + 1; self.per_page.put(&p, &n)?; ctx.emit(n); Ok(()) } }
    /// # let mut h = weir::testing::Harness::keyed_process::<Op>(&[]).unwrap();
    /// # assert_eq!(h.process::<_, _, u32>("k", "/a", None).unwrap(), [1]);
    /// ```
    pub fn map_state<K, V>(&mut self, name: &str) -> crate::Result<MapState<K, V>>
    where
        K: Serialize + DeserializeOwned,
        V: Serialize + DeserializeOwned,
    {
        Ok(MapState::new(
            self.declare(name, StateKind::Map)?,
            Coding::serde(),
        ))
    }

    /// Declare a [`ValueState`] called `name` whose values are **rows** of
    /// `T`'s type (a `#[derive(weir::Row)]` struct, a scalar, a `String`,
    /// ...), as Flink's `ValueStateDescriptor` takes a `TypeInformation`:
    /// read and written without a parse by field name, and kept with its
    /// type, so that a new version of the operator that declares another
    /// type reads what an older one wrote by the evolution rules of
    /// `docs/types.md` ("State and schema evolution": a field added as an `Option` reads `None`; a field removed is
    /// dropped; an integer widens), or is refused naming the field.
    ///
    /// # Example
    ///
    /// ```
    /// # use weir::*;
    /// #[derive(Clone, Row)]
    /// struct Totals { count: u64, sum: i64, last: Option<String> }
    ///
    /// struct Op { totals: ValueState<Totals> }
    /// # impl KeyedProcess for Op { type In = i64; type Out = u64;
    /// fn open(ctx: &mut OpenContext) -> weir::Result<Self> {
    ///     Ok(Op { totals: ctx.row_value_state("totals")? })
    /// }
    /// # fn process(&mut self, n: i64, ctx: &mut Context<u64>) -> weir::Result<()> {
    /// #     let mut t = self.totals.get()?.unwrap_or(Totals { count: 0, sum: 0, last: None });
    /// #     t.count += 1; t.sum += n; t.last = Some(n.to_string());
    /// #     ctx.emit(t.count); self.totals.set(t); Ok(()) } }
    /// # let mut h = weir::testing::Harness::keyed_process::<Op>(&[]).unwrap();
    /// # h.process::<_, _, u64>("k", &1, None).unwrap();
    /// # assert_eq!(h.process::<_, _, u64>("k", &2, None).unwrap(), [2]);
    /// ```
    pub fn row_value_state<T>(&mut self, name: &str) -> crate::Result<ValueState<T>>
    where
        T: crate::Row + Clone + 'static,
    {
        let id = self.declare_typed(name, StateKind::Value, None, Some(T::row_type()))?;
        Ok(ValueState::new(id, Coding::rows()))
    }

    /// [`OpenContext::row_value_state`] with a time-to-live (see
    /// [`OpenContext::value_state_ttl`]).
    pub fn row_value_state_ttl<T>(
        &mut self,
        name: &str,
        ttl: crate::Ttl,
    ) -> crate::Result<ValueState<T>>
    where
        T: crate::Row + Clone + 'static,
    {
        let id = self.declare_typed(name, StateKind::Value, Some(ttl), Some(T::row_type()))?;
        Ok(ValueState::new(id, Coding::rows()))
    }

    /// Declare a [`ListState`] called `name` whose elements are rows of
    /// `T`'s type (see [`OpenContext::row_value_state`]).
    pub fn row_list_state<T: crate::Row>(&mut self, name: &str) -> crate::Result<ListState<T>> {
        let id = self.declare_typed(name, StateKind::List, None, Some(T::row_type()))?;
        Ok(ListState::new(id, Coding::rows()))
    }

    /// [`OpenContext::row_list_state`] with a time-to-live (see
    /// [`OpenContext::list_state_ttl`]).
    pub fn row_list_state_ttl<T: crate::Row>(
        &mut self,
        name: &str,
        ttl: crate::Ttl,
    ) -> crate::Result<ListState<T>> {
        let id = self.declare_typed(name, StateKind::List, Some(ttl), Some(T::row_type()))?;
        Ok(ListState::new(id, Coding::rows()))
    }

    /// Declare a [`MapState`] called `name` whose values are rows of `V`'s
    /// type (see [`OpenContext::row_value_state`]); its map keys are
    /// encoded as [`OpenContext::map_state`]'s are.
    pub fn row_map_state<K, V>(&mut self, name: &str) -> crate::Result<MapState<K, V>>
    where
        K: Serialize + DeserializeOwned,
        V: crate::Row,
    {
        let id = self.declare_typed(name, StateKind::Map, None, Some(V::row_type()))?;
        Ok(MapState::new(id, Coding::rows()))
    }

    /// [`OpenContext::row_map_state`] with a time-to-live (see
    /// [`OpenContext::map_state_ttl`]).
    pub fn row_map_state_ttl<K, V>(
        &mut self,
        name: &str,
        ttl: crate::Ttl,
    ) -> crate::Result<MapState<K, V>>
    where
        K: Serialize + DeserializeOwned,
        V: crate::Row,
    {
        let id = self.declare_typed(name, StateKind::Map, Some(ttl), Some(V::row_type()))?;
        Ok(MapState::new(id, Coding::rows()))
    }
}
