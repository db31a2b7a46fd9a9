//! The traits operator authors implement (functions need none: see
//! [`export_operators!`](crate::export_operators)).

use crate::{Context, OpenContext, TimeDomain};

/// A stateful operator on a keyed stream, like Flink's
/// `KeyedProcessFunction`: it sees one record at a time with its key, keeps
/// keyed state ([`ValueState`](crate::ValueState) and friends, declared in
/// [`open`](KeyedProcess::open)) and registers timers.
///
/// ```
/// use weir::{Context, KeyedProcess, OpenContext, TimeDomain, ValueState};
///
/// /// Emits each key's count once no record of it came for 10 seconds.
/// struct CountUntilQuiet { count: ValueState<u64> }
///
/// impl KeyedProcess for CountUntilQuiet {
///     type In = serde_json::Value;
///     type Out = u64;
///     fn open(ctx: &mut OpenContext) -> weir::Result<Self> {
///         Ok(CountUntilQuiet { count: ctx.value_state("count")? })
///     }
///     fn process(&mut self, _: serde_json::Value, ctx: &mut Context<u64>) -> weir::Result<()> {
///         self.count.set(self.count.get()?.unwrap_or(0) + 1);
///         let t = ctx.timestamp().unwrap_or(0);
///         ctx.register_timer(TimeDomain::EventTime, t + 10_000);
///         Ok(())
///     }
///     fn on_timer(&mut self, time: i64, _: TimeDomain, ctx: &mut Context<u64>) -> weir::Result<()> {
///         if let Some(n) = self.count.get()? {
///             ctx.emit(n);
///             self.count.clear()?;
///         }
///         Ok(())
///     }
/// }
///
/// let mut h = weir::testing::Harness::keyed_process::<CountUntilQuiet>(&[]).unwrap();
/// h.process::<_, _, u64>(&"k", &serde_json::json!({}), Some(0)).unwrap();
/// h.process::<_, _, u64>(&"k", &serde_json::json!({}), Some(5_000)).unwrap();
/// let fired: Vec<u64> = h.advance_watermark(20_000).unwrap();
/// assert_eq!(fired, [2]);
/// ```
pub trait KeyedProcess: Sized + 'static {
    /// The input record type: a [typed](crate::Row) one (read as rows) or
    /// any serde type (decoded with the [`codec`](crate::codec)).
    type In;
    /// The output record type: a [typed](crate::Row) or a serde type.
    type Out;

    /// Create the operator for one subtask: read parameters, declare state.
    fn open(ctx: &mut OpenContext) -> crate::Result<Self>;

    /// Handle one record; its key is the current key.
    fn process(&mut self, input: Self::In, ctx: &mut Context<Self::Out>) -> crate::Result<()>;

    /// Handle a timer of the current key that fired. By default, nothing.
    fn on_timer(
        &mut self,
        time: i64,
        domain: TimeDomain,
        ctx: &mut Context<Self::Out>,
    ) -> crate::Result<()> {
        let _ = (time, domain, ctx);
        Ok(())
    }
}

/// A stateless operator that needs set-up (parameters) or emits any number
/// of outputs, and may use side outputs; registered as `process`.
///
/// ```
/// use weir::{Context, OpenContext, Process};
///
/// /// Routes numbers above a threshold to the side output "big".
/// struct Split { limit: i64 }
///
/// impl Process for Split {
///     type In = i64;
///     type Out = i64;
///     fn open(ctx: &mut OpenContext) -> weir::Result<Self> {
///         Ok(Split { limit: ctx.required_param("limit")? })
///     }
///     fn process(&mut self, n: i64, ctx: &mut Context<i64>) -> weir::Result<()> {
///         if n > self.limit { ctx.emit_side("big", &n) } else { ctx.emit(n) }
///         Ok(())
///     }
/// }
///
/// let mut h = weir::testing::Harness::process_operator::<Split>(&[("limit", "10")]).unwrap();
/// let small: Vec<i64> = h.process(&(), &50, None).unwrap();
/// assert!(small.is_empty());
/// assert_eq!(h.side_output::<i64>("big").unwrap(), [50]);
/// ```
pub trait Process: Sized + 'static {
    /// The input record type: a [typed](crate::Row) or a serde type.
    type In;
    /// The output record type: a [typed](crate::Row) or a serde type.
    type Out;

    /// Create the operator for one subtask.
    fn open(ctx: &mut OpenContext) -> crate::Result<Self>;

    /// Handle one record.
    fn process(&mut self, input: Self::In, ctx: &mut Context<Self::Out>) -> crate::Result<()>;
}
