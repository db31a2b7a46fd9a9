//! One operator of one subtask, in its own `Store`.

use std::sync::Arc;

use wasmtime::component::ResourceAny;
use wasmtime::{Store, Trap};
use weir_model::{PackedRecords, Record, Records};

use crate::bindings::OperatorComponent;
use crate::config::HostConfig;
use crate::error::{ErrorKind, OperatorError, TaskIdent};
use crate::imports::TaskState;
use crate::runtime::{LoadedComponent, WasmRuntime};
use crate::types::{self, OperatorKind, Timer};
use weir_state::{MemoryStateBackend, StateBackend, TimeDomain};

/// What the runtime tells an operator with each call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BatchContext {
    /// The task's current watermark.
    pub watermark: Option<i64>,
    /// Processing time, ms since the epoch.
    pub processing_time: i64,
}

/// The outputs of one successful call.
#[derive(Debug, Default, PartialEq)]
pub struct BatchOutput {
    /// Records for the main output, in order.
    pub main: Vec<Record>,
    /// Records per side output, in order.
    pub side: Vec<(String, Vec<Record>)>,
}

/// The outputs of one call as a task carries them: the main output as
/// records of their own, or packed (as a guest emitted it), and the side
/// outputs.
#[derive(Debug, Default, PartialEq)]
pub struct Output {
    /// Records for the main output, in order.
    pub main: Records,
    /// Records per side output, in order.
    pub side: Vec<(String, Vec<Record>)>,
}

impl Output {
    /// Add `other`'s outputs after its own.
    pub fn append(&mut self, other: Output) {
        self.main.append(other.main);
        for (name, records) in other.side {
            match self.side.iter_mut().find(|(n, _)| *n == name) {
                Some((_, r)) => r.extend(records),
                None => self.side.push((name, records)),
            }
        }
    }
}

impl From<Output> for BatchOutput {
    fn from(out: Output) -> BatchOutput {
        BatchOutput {
            main: out.main.into_list(),
            side: out.side,
        }
    }
}

impl From<BatchOutput> for Output {
    fn from(out: BatchOutput) -> Output {
        Output {
            main: Records::List(out.main),
            side: out.side,
        }
    }
}

/// An operator instance: a `Store`, the component instantiated in it, and the
/// operator resource created from it. Calls are atomic per batch: outputs,
/// state and timer changes are applied only when the guest returns `ok`.
pub struct OperatorInstance {
    runtime: Arc<WasmRuntime>,
    component: Arc<LoadedComponent>,
    /// What `create` is called with, kept for a [`reset`](Self::reset).
    creation: Creation,
    ident: Arc<TaskIdent>,
    kind: OperatorKind,
    store: Store<TaskState>,
    bindings: OperatorComponent,
    handle: ResourceAny,
    /// Time spent in guest calls so far.
    guest_time: std::time::Duration,
    /// The limits it runs under: the runtime's, lowered by the job's.
    config: HostConfig,
}

/// Which operator a component creates, and how.
#[derive(Debug, Clone, Default)]
pub struct OperatorSpec<'a> {
    /// The operator's name among the component's exports.
    pub function: &'a str,
    /// The job's parameters, as key/value pairs.
    pub config: Vec<(String, String)>,
    /// A window function's windows.
    pub window: Option<&'a weir_model::graph::WindowSpec>,
    /// The codecs of its input, outputs and state.
    pub codecs: weir_model::codec::OperatorCodecs,
    /// The job's guest limits, at most the runtime's.
    pub limits: weir_model::limits::GuestLimits,
}

/// `create`'s arguments, in the contract's types.
struct Creation {
    function: String,
    config: Vec<(String, String)>,
    window: Option<types::WindowSpec>,
    codecs: types::Codecs,
    /// The codec of its state not declared as rows.
    state_codec: weir_model::codec::Codec,
}

/// What an operator instance holds and has cost so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InstanceMetrics {
    /// The guest's linear memory, bytes.
    pub memory_bytes: u64,
    /// Time spent in guest calls, ns.
    pub guest_call_ns: u64,
    /// Its keyed state and timers.
    pub state: weir_state::StateSize,
}

impl OperatorInstance {
    /// Instantiate `component` and create its operator as `spec` says (its
    /// name, the job's parameters, a window function's windows and its
    /// codecs), keeping keyed state and timers in `backend`.
    pub fn new(
        runtime: Arc<WasmRuntime>,
        component: Arc<LoadedComponent>,
        spec: OperatorSpec<'_>,
        ident: TaskIdent,
        backend: Box<dyn StateBackend>,
    ) -> Result<OperatorInstance, OperatorError> {
        let function = spec.function;
        let creation = Creation {
            function: function.to_owned(),
            config: spec.config,
            window: spec.window.map(wit_window_spec),
            codecs: wit_codecs(&spec.codecs),
            state_codec: spec.codecs.state,
        };
        let ident = Arc::new(ident);
        let config = runtime
            .config()
            .limited(&spec.limits)
            .map_err(|message| OperatorError {
                ident: (*ident).clone(),
                kind: ErrorKind::Host,
                message,
                guest_output: Vec::new(),
            })?;
        let kind = match component.operator(function) {
            Some(d) => d.kind,
            None => {
                let known: Vec<&str> = component
                    .operators
                    .iter()
                    .map(|o| o.name.as_str())
                    .collect();
                return Err(OperatorError {
                    ident: (*ident).clone(),
                    kind: ErrorKind::Host,
                    message: format!(
                        "the component exports no operator named `{function}` (it has: {})",
                        known.join(", ")
                    ),
                    guest_output: Vec::new(),
                });
            }
        };
        let (store, bindings, handle) =
            Self::start(&runtime, &component, &creation, &ident, backend, &config)?;
        Ok(OperatorInstance {
            config,
            runtime,
            component,
            creation,
            ident,
            kind,
            store,
            bindings,
            handle,
            guest_time: std::time::Duration::ZERO,
        })
    }

    fn start(
        runtime: &WasmRuntime,
        component: &LoadedComponent,
        creation: &Creation,
        ident: &Arc<TaskIdent>,
        backend: Box<dyn StateBackend>,
        config: &HostConfig,
    ) -> Result<(Store<TaskState>, OperatorComponent, ResourceAny), OperatorError> {
        let mut store = runtime.store(ident.clone(), backend, config);
        let bindings = match component.pre.instantiate(&mut store) {
            Ok(b) => b,
            Err(e) => {
                return Err(classify(
                    &mut store,
                    e,
                    "instantiating the component",
                    config,
                ));
            }
        };
        store.data_mut().creating = true;
        store.data_mut().state_codec = creation.state_codec;
        let created = bindings.weir_operator_operators().operator().call_create(
            &mut store,
            &creation.function,
            &creation.config,
            creation.window,
            &creation.codecs,
        );
        store.data_mut().creating = false;
        store.data_mut().staged.clear();
        let declared = std::mem::take(&mut store.data_mut().declarations);
        match created {
            Ok(Ok(handle)) => {
                // States declared with another type than they hold:
                // converted now, outside the guest's call and its deadline.
                let data = store.data_mut();
                if let Err(message) = crate::state_types::convert(data.backend.as_mut(), declared) {
                    return Err(OperatorError {
                        ident: (*data.ident).clone(),
                        kind: ErrorKind::Host,
                        message,
                        guest_output: data.last_words.take(),
                    });
                }
                Ok((store, bindings, handle))
            }
            Ok(Err(message)) => Err(guest_error(&mut store, message)),
            Err(e) => Err(classify(&mut store, e, "creating the operator", config)),
        }
    }

    /// Who this is.
    pub fn ident(&self) -> &TaskIdent {
        &self.ident
    }

    /// The operator's kind, as the component declares it.
    pub fn kind(&self) -> OperatorKind {
        self.kind
    }

    /// The state backend (keyed state and timers).
    pub fn backend(&self) -> &dyn StateBackend {
        &*self.store.data().backend
    }

    /// The state backend, to fire timers from.
    pub fn backend_mut(&mut self) -> &mut dyn StateBackend {
        &mut *self.store.data_mut().backend
    }

    /// Its memory, guest time and state size (the state's size takes time
    /// proportional to it: call it now and then, not per batch).
    pub fn metrics(&self) -> InstanceMetrics {
        let data = self.store.data();
        InstanceMetrics {
            memory_bytes: data.limiter.current as u64,
            guest_call_ns: self.guest_time.as_nanos() as u64,
            state: data.backend.size(),
        }
    }

    /// Process a batch of records.
    pub fn process(
        &mut self,
        records: Vec<Record>,
        ctx: BatchContext,
    ) -> Result<BatchOutput, OperatorError> {
        let records = PackedRecords::from_records(&records)
            .map_err(|e| OperatorError::batch_too_large((*self.ident).clone(), e))?;
        self.process_packed(records, ctx).map(Into::into)
    }

    /// [`process`](Self::process) a batch in one buffer, its main output
    /// left in the buffer the guest emitted it in: neither is copied into
    /// or split out of records of their own.
    pub fn process_packed(
        &mut self,
        records: PackedRecords,
        ctx: BatchContext,
    ) -> Result<Output, OperatorError> {
        let batch = crate::packed::to_batch(records);
        self.call(ctx, "processing a batch", |b, store, handle, ctx| {
            b.weir_operator_operators()
                .operator()
                .call_process(store, handle, &batch, ctx)
        })
    }

    /// Run `on-timer` for timers that fired.
    pub fn on_timer(
        &mut self,
        timers: Vec<Timer>,
        ctx: BatchContext,
    ) -> Result<Output, OperatorError> {
        self.call(ctx, "firing timers", |b, store, handle, ctx| {
            b.weir_operator_operators()
                .operator()
                .call_on_timer(store, handle, &timers, ctx)
        })
    }

    /// A window aggregate folds records into accumulators (the contract's
    /// `accumulate`): group `g` starts from the merge of
    /// `accumulators[groups[g - 1]..groups[g]]`, record `i` is added to group
    /// `targets[i]`; the answer holds each group's accumulator.
    pub fn accumulate(
        &mut self,
        records: PackedRecords,
        accumulators: types::Packed,
        groups: Vec<u32>,
        targets: Vec<u32>,
    ) -> Result<types::Packed, OperatorError> {
        let batch = crate::packed::to_batch(records);
        let mut answer = None;
        self.call(
            BatchContext::default(),
            "accumulating a batch",
            |b, store, handle, _| {
                b.weir_operator_operators()
                    .operator()
                    .call_accumulate(store, handle, &batch, &accumulators, &groups, &targets)
                    .map(|r| r.map(|packed| answer = Some(packed)))
            },
        )?;
        let answer = answer.expect("an ok call answers");
        if answer.ends.len() != groups.len() {
            return Err(self.guest_contract_error(format!(
                "accumulate answered {} accumulators for {} groups",
                answer.ends.len(),
                groups.len()
            )));
        }
        Ok(answer)
    }

    /// Windows fire (the contract's `fire`): window `w`'s contents are
    /// `contents[ends[w - 1]..ends[w]]`.
    pub fn fire_windows(
        &mut self,
        windows: Vec<types::Window>,
        contents: types::Packed,
        ends: Vec<u32>,
        ctx: BatchContext,
    ) -> Result<Output, OperatorError> {
        self.call(ctx, "firing windows", |b, store, handle, ctx| {
            b.weir_operator_operators()
                .operator()
                .call_fire(store, handle, &windows, &contents, &ends, ctx)
        })
    }

    fn guest_contract_error(&self, message: String) -> OperatorError {
        OperatorError {
            ident: (*self.ident).clone(),
            kind: ErrorKind::Guest,
            message,
            guest_output: Vec::new(),
        }
    }

    /// One call into the guest: deadline and context set, time counted,
    /// effects applied when it returns ok.
    fn call(
        &mut self,
        ctx: BatchContext,
        doing: &str,
        guest: impl FnOnce(
            &OperatorComponent,
            &mut Store<TaskState>,
            ResourceAny,
            types::BatchContext,
        ) -> wasmtime::Result<Result<(), String>>,
    ) -> Result<Output, OperatorError> {
        let wit_ctx = self.prepare(ctx);
        let started = std::time::Instant::now();
        let result = guest(&self.bindings, &mut self.store, self.handle, wit_ctx);
        self.guest_time += started.elapsed();
        self.finish(result, doing)
    }

    /// Fire the due timers of `domain` up to `upto`, in batches, and return
    /// all their outputs.
    pub fn fire_timers(
        &mut self,
        domain: TimeDomain,
        upto: i64,
        ctx: BatchContext,
    ) -> Result<Output, OperatorError> {
        const TIMER_BATCH: usize = 1024;
        let mut all = Output::default();
        loop {
            let due = self
                .backend_mut()
                .take_due_timers(domain, upto, TIMER_BATCH)
                .map_err(|e| self.host_error(format!("state backend: {e:#}")))?;
            if due.is_empty() {
                return Ok(all);
            }
            let out = self.on_timer(due.into_iter().map(Into::into).collect(), ctx)?;
            all.append(out);
        }
    }

    /// Set the deadline and the watermark for a call, clear what a failed
    /// call left staged, and return the context as the guest receives it.
    fn prepare(&mut self, ctx: BatchContext) -> types::BatchContext {
        let deadline = self.config.deadline_ticks();
        self.store.set_epoch_deadline(deadline);
        let waits_until = std::time::Instant::now() + self.config.call_timeout();
        let data = self.store.data_mut();
        data.call_deadline = waits_until;
        data.watermark = ctx.watermark;
        data.staged.clear();
        // What an earlier call said is not this one's last words.
        drop(data.last_words.take());
        types::BatchContext {
            watermark: ctx.watermark,
            processing_time: ctx.processing_time,
        }
    }

    fn host_error(&self, message: String) -> OperatorError {
        OperatorError {
            ident: (*self.ident).clone(),
            kind: ErrorKind::Host,
            message,
            guest_output: Vec::new(),
        }
    }

    fn finish(
        &mut self,
        result: wasmtime::Result<Result<(), String>>,
        doing: &str,
    ) -> Result<Output, OperatorError> {
        match result {
            Ok(Ok(())) => {
                let data = self.store.data_mut();
                let staged = std::mem::take(&mut data.staged);
                let ops = staged.state_ops;
                let timers = staged.timer_ops.into_iter().map(Into::into).collect();
                data.backend
                    .apply_all(ops, timers)
                    .map_err(|e| OperatorError {
                        ident: (*data.ident).clone(),
                        kind: ErrorKind::Host,
                        message: format!("state backend: {e:#}"),
                        guest_output: Vec::new(),
                    })?;
                // What the instance holds now, against its quotas; over one,
                // the task fails and its state comes from a checkpoint.
                if let Err(e) = data.quotas.check_held(data.backend.size()) {
                    return Err(classify(&mut self.store, e, doing, &self.config));
                }
                Ok(Output {
                    main: Records::Packed(staged.main),
                    side: staged.side,
                })
            }
            Ok(Err(message)) => {
                self.store.data_mut().staged.clear();
                Err(guest_error(&mut self.store, message))
            }
            Err(e) => {
                self.store.data_mut().staged.clear();
                Err(classify(&mut self.store, e, doing, &self.config))
            }
        }
    }

    /// Rebuild the instance after a trap (which poisons the `Store`): a fresh
    /// `Store` and instance, the operator created again, the state backend
    /// kept.
    pub fn reset(&mut self) -> Result<(), OperatorError> {
        let backend = std::mem::replace(
            &mut self.store.data_mut().backend,
            Box::new(MemoryStateBackend::new()),
        );
        let (store, bindings, handle) = Self::start(
            &self.runtime,
            &self.component,
            &self.creation,
            &self.ident,
            backend,
            &self.config,
        )?;
        self.store = store;
        self.bindings = bindings;
        self.handle = handle;
        Ok(())
    }
}

/// A manifest's windows as the contract's `window-spec`.
fn wit_window_spec(w: &weir_model::graph::WindowSpec) -> types::WindowSpec {
    use weir_model::graph::{TimeCharacteristic, WindowAssigner};
    types::WindowSpec {
        assigner: match w.assigner {
            WindowAssigner::Tumbling { size_ms } => types::WindowAssigner::Tumbling(size_ms),
            WindowAssigner::Sliding { size_ms, slide_ms } => {
                types::WindowAssigner::Sliding(types::SlidingWindow { size_ms, slide_ms })
            }
            WindowAssigner::Session { gap_ms } => types::WindowAssigner::Session(gap_ms),
        },
        domain: match w.time {
            TimeCharacteristic::Event => types::TimeDomain::EventTime,
            TimeCharacteristic::Processing => types::TimeDomain::ProcessingTime,
        },
        allowed_lateness_ms: w.allowed_lateness_ms,
    }
}

/// An operator's codecs as the contract's `codecs`.
fn wit_codecs(c: &weir_model::codec::OperatorCodecs) -> types::Codecs {
    let codec = |c: weir_model::codec::Codec| match c {
        weir_model::codec::Codec::Json => types::Codec::Json,
        weir_model::codec::Codec::Msgpack => types::Codec::Msgpack,
        weir_model::codec::Codec::Row => types::Codec::Row,
    };
    types::Codecs {
        input: codec(c.input),
        output: codec(c.output),
        side_outputs: c
            .side_outputs
            .iter()
            .map(|(name, c)| (name.clone(), codec(*c)))
            .collect(),
        state: codec(c.state),
    }
}

fn guest_error(store: &mut Store<TaskState>, message: String) -> OperatorError {
    let data = store.data_mut();
    OperatorError {
        ident: (*data.ident).clone(),
        kind: ErrorKind::Guest,
        message,
        guest_output: data.last_words.take(),
    }
}

/// Turn a failed call into an error that says what happened.
fn classify(
    store: &mut Store<TaskState>,
    e: wasmtime::Error,
    doing: &str,
    config: &HostConfig,
) -> OperatorError {
    let limit = config.call_timeout_ms;
    let data = store.data_mut();
    let guest_output = data.last_words.take();
    let ident = (*data.ident).clone();
    if let Some(asked) = data.limiter.exceeded.take() {
        return OperatorError {
            ident,
            kind: ErrorKind::MemoryLimit,
            message: format!(
                "while {doing}, the guest asked for {asked} bytes of linear memory; the limit is {} bytes",
                data.limiter.max_memory
            ),
            guest_output,
        };
    }
    if let Some(q) = e.downcast_ref::<crate::error::QuotaExceeded>() {
        return OperatorError {
            ident,
            kind: ErrorKind::Quota,
            message: format!("while {doing}, {q}"),
            guest_output,
        };
    }
    if e.downcast_ref::<crate::wasi::WaitedPastDeadline>()
        .is_some()
    {
        return OperatorError {
            ident,
            kind: ErrorKind::Deadline,
            message: format!(
                "while {doing}, stopped at the call's wall-clock deadline of {limit} ms: it waited in a sleep or a poll (operators may not block)"
            ),
            guest_output,
        };
    }
    match e.downcast_ref::<Trap>() {
        Some(Trap::Interrupt) => OperatorError {
            ident,
            kind: ErrorKind::Deadline,
            message: format!(
                "while {doing}, stopped after the call deadline of {limit} ms (an endless loop?)"
            ),
            guest_output,
        },
        Some(trap) => OperatorError {
            ident,
            kind: ErrorKind::Trap,
            message: format!("while {doing}: {trap}"),
            guest_output,
        },
        None => OperatorError {
            ident,
            kind: ErrorKind::Host,
            message: format!("while {doing}: {e:#}"),
            guest_output,
        },
    }
}
