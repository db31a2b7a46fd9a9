//! Runs an operator over a batch: decodes records, keeps the current key,
//! serves state from the cache, and collects the batch's effects.

use std::marker::PhantomData;

use weir_types::Type;

use crate::__private::bindings::weir::operator::types::{
    Batch as WitBatch, BatchContext, OperatorKind, Packed, Timer, Window as WitWindow, WindowSpec,
};
use crate::batch::{OutBatch, Records};
use crate::codec::wire::Codecs;
use crate::coder::{Decode, Encode, Input};
use crate::context::Pending;
use crate::state::{StateCache, StateChanges, with_cache};
use crate::{Collector, Context, KeyedProcess, OpenContext, Process, TimeDomain, host};

/// What a completed batch hands to the host.
#[derive(Default)]
pub(crate) struct Effects {
    pub(crate) outputs: OutBatch,
    pub(crate) side: Vec<(String, OutBatch)>,
    pub(crate) state: StateChanges,
    pub(crate) timer_ops: Vec<crate::__private::bindings::weir::operator::types::TimerOp>,
}

/// One operator, with its types erased. Window functions are called by
/// the window operator (`accumulate`, `fire_window`), the others per record
/// and per timer.
pub(crate) trait DynOperator {
    /// Handle one record; the current key is set.
    fn record(&mut self, value: &[u8], batch: &mut Pending) -> crate::Result<()> {
        let _ = (value, batch);
        Err("a window function is called by the window operator, not per record".into())
    }

    /// Whether it reads the current key (a process function's context, its
    /// state and timers do; a stateless function does not).
    fn reads_keys(&self) -> bool {
        true
    }

    /// Handle a batch's records in order: each record's timestamp (and,
    /// when it [reads keys](DynOperator::reads_keys), its key) is made the
    /// current one, then [`DynOperator::record`] runs. The loop is compiled
    /// for each operator, so nothing is dispatched per record. `keyed`: the
    /// value states of the batch's keys were prefetched in record order.
    fn records(
        &mut self,
        records: Records<'_>,
        batch: &mut Pending,
        keyed: bool,
    ) -> crate::Result<()> {
        for (i, record) in records.enumerate() {
            let record = record?;
            batch.timestamp = record.timestamp;
            if self.reads_keys() {
                with_cache(|c| match record.key {
                    // Its entry among the value states' was found by the
                    // prefetch, which took every record's key in order.
                    Some(key) if keyed => c.set_record_key(key, i),
                    key => c.set_key(key),
                });
            }
            self.record(record.value, batch)?;
        }
        Ok(())
    }
    /// Handle one timer; the current key is set.
    fn timer(&mut self, time: i64, domain: TimeDomain, batch: &mut Pending) -> crate::Result<()> {
        let _ = (time, domain, batch);
        Ok(())
    }

    /// A window aggregate folds records into accumulators (the contract's
    /// `accumulate`), each group's written to `out` in turn.
    fn accumulate(
        &mut self,
        records: &[&[u8]],
        accumulators: &[&[u8]],
        groups: &[u32],
        targets: &[u32],
        codecs: &Codecs,
        out: &mut Packed,
    ) -> crate::Result<()> {
        let _ = (records, accumulators, groups, targets, codecs, out);
        Err("this operator is not a window aggregate".into())
    }

    /// A window fires with its contents (accumulators or records).
    fn fire_window(
        &mut self,
        window: &crate::Window,
        contents: &[&[u8]],
        batch: &mut Pending,
    ) -> crate::Result<()> {
        let _ = (window, contents, batch);
        Err("this operator is not a window function".into())
    }
}

/// Creates an operator from its open context.
type Create = Box<dyn Fn(&mut OpenContext) -> crate::Result<Box<dyn DynOperator>>>;

/// A registered operator: its name, kind, declared types and how to
/// create it.
pub struct OperatorEntry {
    pub(crate) name: &'static str,
    pub(crate) kind: OperatorKind,
    /// The type of the records it reads, when it declares one.
    pub(crate) input_type: Option<Type>,
    /// The type of the records it writes, when it declares one.
    pub(crate) output_type: Option<Type>,
    pub(crate) create: Create,
}

/// A stateless function over records: the function, its input's reader
/// (with the scratch row a view of a non-row record borrows), its output's
/// coder; `K` says which kind of function it is (and, for a map or flat
/// map, its output type: `(MapFn, O)`).
struct FnOp<F, D, E, K> {
    f: F,
    d: D,
    e: E,
    scratch: Vec<u8>,
    _kind: PhantomData<fn() -> K>,
}

impl<F, D, E, K> FnOp<F, D, E, K> {
    fn new(f: F, d: D, e: E) -> Self {
        FnOp {
            f,
            d,
            e,
            scratch: Vec::new(),
            _kind: PhantomData,
        }
    }
}

/// A map.
struct MapFn;
/// A flat map.
struct FlatMapFn;
/// A filter.
struct FilterFn;
/// A timestamp assigner.
struct TimestampFn;

struct ProcessOp<P, D, E>(P, D, E);
struct KeyedOp<P, D, E>(P, D, E);

impl<F, O: 'static, D: Input, E: Encode<O>> DynOperator for FnOp<F, D, E, (MapFn, O)>
where
    F: for<'a> Fn(D::Arg<'a>) -> O,
{
    #[inline(always)]
    fn record(&mut self, value: &[u8], batch: &mut Pending) -> crate::Result<()> {
        let out = (self.f)(self.d.read(batch.input, value, &mut self.scratch)?);
        batch.push(&self.e, &out, None);
        Ok(())
    }

    fn reads_keys(&self) -> bool {
        false
    }
}

impl<F, O: 'static, D: Input, E: Encode<O>> DynOperator for FnOp<F, D, E, (FlatMapFn, O)>
where
    F: for<'a, 'b, 'c> Fn(D::Arg<'a>, &'b mut Collector<'c, O>),
{
    #[inline(always)]
    fn record(&mut self, value: &[u8], batch: &mut Pending) -> crate::Result<()> {
        (self.f)(
            self.d.read(batch.input, value, &mut self.scratch)?,
            &mut Collector {
                batch,
                enc: &self.e,
            },
        );
        Ok(())
    }

    fn reads_keys(&self) -> bool {
        false
    }
}

impl<F, D: Input> DynOperator for FnOp<F, D, (), FilterFn>
where
    F: for<'a, 'b> Fn(&'b D::Arg<'a>) -> bool,
{
    #[inline(always)]
    fn record(&mut self, value: &[u8], batch: &mut Pending) -> crate::Result<()> {
        if (self.f)(&self.d.read(batch.input, value, &mut self.scratch)?) {
            let (timestamp, from, to) = (batch.timestamp, batch.input, batch.output);
            let d = &self.d;
            batch
                .outputs
                .try_push_with(None, timestamp, |buf| d.transcode(from, to, value, buf))?;
        }
        Ok(())
    }

    fn reads_keys(&self) -> bool {
        false
    }
}

impl<F, D: Input> DynOperator for FnOp<F, D, (), TimestampFn>
where
    F: for<'a, 'b> Fn(&'b D::Arg<'a>) -> i64,
{
    #[inline(always)]
    fn record(&mut self, value: &[u8], batch: &mut Pending) -> crate::Result<()> {
        let t = (self.f)(&self.d.read(batch.input, value, &mut self.scratch)?);
        let (from, to) = (batch.input, batch.output);
        let d = &self.d;
        batch
            .outputs
            .try_push_with(None, Some(t), |buf| d.transcode(from, to, value, buf))?;
        Ok(())
    }

    fn reads_keys(&self) -> bool {
        false
    }
}

impl<P: Process, D: Decode<P::In>, E: Encode<P::Out>> DynOperator for ProcessOp<P, D, E> {
    #[inline(always)]
    fn record(&mut self, value: &[u8], batch: &mut Pending) -> crate::Result<()> {
        self.0.process(
            self.1.decode(batch.input, value)?,
            &mut Context {
                batch,
                enc: &self.2,
            },
        )
    }
}

impl<P: KeyedProcess, D: Decode<P::In>, E: Encode<P::Out>> DynOperator for KeyedOp<P, D, E> {
    #[inline(always)]
    fn record(&mut self, value: &[u8], batch: &mut Pending) -> crate::Result<()> {
        self.0.process(
            self.1.decode(batch.input, value)?,
            &mut Context {
                batch,
                enc: &self.2,
            },
        )
    }
    fn timer(&mut self, time: i64, domain: TimeDomain, batch: &mut Pending) -> crate::Result<()> {
        self.0.on_timer(
            time,
            domain,
            &mut Context {
                batch,
                enc: &self.2,
            },
        )
    }
}

impl OperatorEntry {
    /// A `map` operator from a function, reading with `d` (an owned value
    /// or a view) and writing with `e`.
    pub fn map<F, O: 'static, D: Input, E: Encode<O> + Default + 'static>(
        name: &'static str,
        f: F,
        d: D,
        e: E,
    ) -> Self
    where
        F: for<'a> Fn(D::Arg<'a>) -> O + Copy + 'static,
    {
        OperatorEntry {
            name,
            kind: OperatorKind::Map,
            input_type: d.row_type(),
            output_type: e.row_type(),
            create: Box::new(move |_| {
                Ok(Box::new(FnOp::<_, _, _, (MapFn, O)>::new(
                    f,
                    D::default(),
                    E::default(),
                )))
            }),
        }
    }

    /// A `flat_map` operator from a function.
    pub fn flat_map<F, O: 'static, D: Input, E: Encode<O> + Default + 'static>(
        name: &'static str,
        f: F,
        d: D,
        e: E,
    ) -> Self
    where
        F: for<'a, 'b, 'c> Fn(D::Arg<'a>, &'b mut Collector<'c, O>) + Copy + 'static,
    {
        OperatorEntry {
            name,
            kind: OperatorKind::FlatMap,
            input_type: d.row_type(),
            output_type: e.row_type(),
            create: Box::new(move |_| {
                Ok(Box::new(FnOp::<_, _, _, (FlatMapFn, O)>::new(
                    f,
                    D::default(),
                    E::default(),
                )))
            }),
        }
    }

    /// A `filter` operator from a predicate: it writes what it reads.
    pub fn filter<F, D: Input>(name: &'static str, f: F, d: D) -> Self
    where
        F: for<'a, 'b> Fn(&'b D::Arg<'a>) -> bool + Copy + 'static,
    {
        OperatorEntry {
            name,
            kind: OperatorKind::Filter,
            input_type: d.row_type(),
            output_type: None,
            create: Box::new(move |_| {
                Ok(Box::new(FnOp::<_, _, _, FilterFn>::new(
                    f,
                    D::default(),
                    (),
                )))
            }),
        }
    }

    /// A stateless operator from a [`Process`] type.
    pub fn process<
        P: Process,
        D: Decode<P::In> + Default + 'static,
        E: Encode<P::Out> + Default + 'static,
    >(
        name: &'static str,
        d: D,
        e: E,
    ) -> Self {
        OperatorEntry {
            name,
            kind: OperatorKind::FlatMap,
            input_type: d.row_type(),
            output_type: e.row_type(),
            create: Box::new(move |ctx| {
                Ok(Box::new(ProcessOp(
                    P::open(ctx)?,
                    clone_coder(&d),
                    clone_coder(&e),
                )))
            }),
        }
    }

    /// A timestamp assigner from a function: each record goes on unchanged,
    /// with the event timestamp (ms) the function returns.
    pub fn timestamps<F, D: Input>(name: &'static str, f: F, d: D) -> Self
    where
        F: for<'a, 'b> Fn(&'b D::Arg<'a>) -> i64 + Copy + 'static,
    {
        OperatorEntry {
            name,
            kind: OperatorKind::TimestampAssigner,
            input_type: d.row_type(),
            output_type: None,
            create: Box::new(move |_| {
                Ok(Box::new(FnOp::<_, _, _, TimestampFn>::new(
                    f,
                    D::default(),
                    (),
                )))
            }),
        }
    }

    /// A window operator from an [`crate::Aggregate`] type.
    pub fn window_aggregate<
        A: crate::Aggregate,
        D: Decode<A::In> + Default + 'static,
        E: Encode<A::Out> + Default + 'static,
    >(
        name: &'static str,
        d: D,
        e: E,
    ) -> Self {
        OperatorEntry {
            name,
            kind: OperatorKind::Window,
            input_type: d.row_type(),
            output_type: e.row_type(),
            create: Box::new(move |ctx| {
                crate::window::open_aggregate::<A, D, E>(ctx, clone_coder(&d), clone_coder(&e))
            }),
        }
    }

    /// A window operator from a [`crate::ProcessWindow`] type.
    pub fn window_process<
        P: crate::ProcessWindow,
        D: Decode<P::In> + Default + 'static,
        E: Encode<P::Out> + Default + 'static,
    >(
        name: &'static str,
        d: D,
        e: E,
    ) -> Self {
        OperatorEntry {
            name,
            kind: OperatorKind::WindowProcess,
            input_type: d.row_type(),
            output_type: e.row_type(),
            create: Box::new(move |ctx| {
                crate::window::open_process::<P, D, E>(ctx, clone_coder(&d), clone_coder(&e))
            }),
        }
    }

    /// A keyed operator from a [`KeyedProcess`] type.
    pub fn keyed_process<
        P: KeyedProcess,
        D: Decode<P::In> + Default + 'static,
        E: Encode<P::Out> + Default + 'static,
    >(
        name: &'static str,
        d: D,
        e: E,
    ) -> Self {
        OperatorEntry {
            name,
            kind: OperatorKind::KeyedProcess,
            input_type: d.row_type(),
            output_type: e.row_type(),
            create: Box::new(move |ctx| {
                Ok(Box::new(KeyedOp(
                    P::open(ctx)?,
                    clone_coder(&d),
                    clone_coder(&e),
                )))
            }),
        }
    }
}

/// A fresh coder like `c` (coders hold only a cache of their type).
fn clone_coder<C: Default>(_: &C) -> C {
    C::default()
}

/// A created operator with its own state cache, which is swapped into the
/// thread-local slot while the operator runs (a component instance may hold
/// several operators).
pub(crate) struct Instance {
    name: &'static str,
    keyed: bool,
    op: Box<dyn DynOperator>,
    cache: StateCache,
}

fn swap_cache(cache: &mut StateCache) {
    with_cache(|c| std::mem::swap(c, cache));
}

impl Instance {
    /// Create the operator `name` from `entries` with the job's parameters
    /// (and a window function's windows), reading and writing in `codecs`.
    pub(crate) fn create(
        entries: Vec<OperatorEntry>,
        name: &str,
        config: Vec<(String, String)>,
        window: Option<WindowSpec>,
        codecs: Codecs,
    ) -> Result<Instance, String> {
        let known: Vec<&str> = entries.iter().map(|e| e.name).collect();
        let Some(entry) = entries.into_iter().find(|e| e.name == name) else {
            return Err(format!(
                "no operator named `{name}` in this component (it has: {})",
                known.join(", ")
            ));
        };
        let keyed = matches!(entry.kind, OperatorKind::KeyedProcess);
        let mut ctx = OpenContext {
            config,
            keyed,
            window,
        };
        let mut cache = StateCache::default();
        cache.codecs = codecs;
        swap_cache(&mut cache);
        let created = (entry.create)(&mut ctx);
        swap_cache(&mut cache);
        let op = created.map_err(|e| format!("operator `{}` failed to open: {e}", entry.name))?;
        Ok(Instance {
            name: entry.name,
            keyed,
            op,
            cache,
        })
    }

    /// Read and write in `codecs` from now on.
    pub(crate) fn set_codecs(&mut self, codecs: Codecs) {
        self.cache.codecs = codecs;
    }

    /// Run `each` over `items` with this operator's cache in the thread-local
    /// slot; collect the batch's effects, or discard them all on an error.
    /// The main output's buffer starts with room for `expected` records and
    /// bytes (as many as the input's, for records), so that it does not
    /// grow by copies.
    fn run<T>(
        &mut self,
        items: impl Iterator<Item = T>,
        ctx: BatchContext,
        (records, bytes): (usize, usize),
        mut each: impl FnMut(&mut dyn DynOperator, T, &mut Pending) -> crate::Result<()>,
    ) -> Result<Effects, String> {
        let mut batch = Pending {
            watermark: ctx.watermark,
            processing_time: ctx.processing_time,
            outputs: OutBatch::with_capacity(records, bytes),
            input: self.cache.codecs.input,
            output: self.cache.codecs.output,
            state: self.cache.codecs.state,
            ..Pending::default()
        };
        swap_cache(&mut self.cache);
        let mut result = Ok(());
        for item in items {
            if let Err(e) = each(&mut *self.op, item, &mut batch) {
                result = Err(format!("operator `{}`: {e}", self.name));
                break;
            }
        }
        let state = with_cache(|c| {
            c.set_key(None);
            match result {
                Ok(()) => c.take_ops(),
                Err(_) => {
                    c.discard();
                    StateChanges::default()
                }
            }
        });
        swap_cache(&mut self.cache);
        result?;
        Ok(Effects {
            outputs: batch.outputs,
            side: batch.side,
            state,
            timer_ops: batch.timer_ops,
        })
    }

    /// Process a batch of records.
    pub(crate) fn process(
        &mut self,
        batch: WitBatch,
        ctx: BatchContext,
    ) -> Result<Effects, String> {
        let records = crate::batch::iter(&batch)?;
        let keyed = self.keyed;
        if keyed {
            // Every record has a key (and well-formed spans), then the
            // value states of all the keys in one host call.
            for (i, record) in records.clone().enumerate() {
                if record?.key.is_none() {
                    return Err(format!(
                        "operator `{}` is a keyed_process but record {i} of the batch has no key (use key-by in the manifest)",
                        self.name
                    ));
                }
            }
            self.cache
                .prefetch(records.clone().filter_map(|r| r.ok().and_then(|r| r.key)));
        }
        let expected = (records.len(), batch.data.len());
        self.run(
            std::iter::once(records),
            ctx,
            expected,
            |op, records, batch| op.records(records, batch, keyed),
        )
    }

    /// Fold a batch into accumulators (a window aggregate).
    pub(crate) fn accumulate(
        &mut self,
        records: WitBatch,
        accumulators: Packed,
        groups: Vec<u32>,
        targets: Vec<u32>,
    ) -> Result<Packed, String> {
        let values: Vec<&[u8]> = crate::batch::records(&records)?
            .into_iter()
            .map(|r| r.value)
            .collect();
        if targets.len() != values.len() {
            return Err(format!(
                "accumulate: {} targets for {} records",
                targets.len(),
                values.len()
            ));
        }
        let accs = host::unpacked(&accumulators)?;
        let name = self.name;
        // About as large as what came in.
        let mut out = Packed {
            data: Vec::with_capacity(accumulators.data.len() + 8 * groups.len()),
            ends: Vec::with_capacity(groups.len()),
        };
        self.op
            .accumulate(
                &values,
                &accs,
                &groups,
                &targets,
                &self.cache.codecs,
                &mut out,
            )
            .map_err(|e| format!("operator `{name}`: {e}"))?;
        Ok(out)
    }

    /// Windows fire: window `w`'s contents are `contents[ends[w - 1]..ends[w]]`.
    pub(crate) fn fire(
        &mut self,
        windows: Vec<WitWindow>,
        contents: Packed,
        ends: Vec<u32>,
        ctx: BatchContext,
    ) -> Result<Effects, String> {
        if ends.len() != windows.len() {
            return Err(format!(
                "fire: {} content ranges for {} windows",
                ends.len(),
                windows.len()
            ));
        }
        let strings = host::unpacked(&contents)?;
        let mut from = 0usize;
        let mut items = Vec::with_capacity(windows.len());
        for (w, &end) in windows.into_iter().zip(&ends) {
            let range = strings
                .get(from..end as usize)
                .ok_or("a window's contents are outside the call's")?;
            let codec = self.cache.codecs.input;
            items.push((crate::Window::new(w.key, w.start, w.end, codec), range));
            from = end as usize;
        }
        let expected = (items.len(), items.len() * 64);
        self.run(
            items.into_iter(),
            ctx,
            expected,
            |op, (window, contents), batch| {
                batch.timestamp = Some(window.end - 1);
                op.fire_window(&window, contents, batch)
            },
        )
    }

    /// Handle fired timers.
    pub(crate) fn on_timer(
        &mut self,
        timers: Vec<Timer>,
        ctx: BatchContext,
    ) -> Result<Effects, String> {
        if self.keyed {
            // The value states of all the timers' keys, in one host call.
            self.cache.prefetch(timers.iter().map(|t| t.key.as_slice()));
        }
        let expected = (timers.len(), 0);
        self.run(timers.into_iter(), ctx, expected, |op, timer, batch| {
            let domain: TimeDomain = timer.domain.into();
            batch.timestamp = (domain == TimeDomain::EventTime).then_some(timer.time);
            with_cache(|c| c.set_key(Some(&timer.key)));
            op.timer(timer.time, domain, batch)
        })
    }
}
