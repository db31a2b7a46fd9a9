//! What a task's chain runs, and how it is created.

use std::sync::Arc;

use weir_host::{
    BatchContext, BatchOutput, JobComponents, OperatorError, OperatorInstance, OperatorSpec,
    Output, TaskIdent, WasmRuntime,
};
use weir_model::codec::StreamCodecs;
use weir_model::{JobGraph, Record, Records, Vertex, VertexKind};
use weir_state::TimeDomain;
use weir_state::snapshot::LocalSnapshot;

use weir_host::types::OperatorKind;
use weir_model::builtin::Builtin;
use weir_window::Contents;

use crate::state::StateSetup;
use crate::window::{BuiltinAggregate, Combiner, GuestFunction, WindowOperator};

/// An operator as a task runs it: batches in, outputs out; timers fire on
/// watermarks and on processing time.
pub trait StreamOperator: Send {
    /// Process a batch of records.
    fn process(
        &mut self,
        batch: Vec<Record>,
        ctx: BatchContext,
    ) -> Result<BatchOutput, OperatorError>;

    /// Process a batch as it reached the operator (records of their own,
    /// or packed in one buffer): what the task calls. The default gives
    /// [`StreamOperator::process`] records of their own.
    fn process_records(
        &mut self,
        batch: Records,
        ctx: BatchContext,
    ) -> Result<Output, OperatorError> {
        self.process(batch.into_list(), ctx).map(Output::from)
    }

    /// The watermark advanced to `ctx.watermark`: fire due event-time timers.
    fn on_watermark(&mut self, ctx: BatchContext) -> Result<Output, OperatorError> {
        let _ = ctx;
        Ok(Output::default())
    }

    /// Whether event-time timers up to `watermark` are still due after
    /// [`StreamOperator::on_watermark`], which may fire them a bounded share
    /// at a time (so that what fires at once is never all in memory): the
    /// task then calls it again, routing each share, before the watermark
    /// goes on.
    fn more_due(&self, watermark: i64) -> bool {
        let _ = watermark;
        false
    }

    /// Processing time reached `ctx.processing_time`: fire due timers.
    fn on_processing_time(&mut self, ctx: BatchContext) -> Result<Output, OperatorError> {
        let _ = ctx;
        Ok(Output::default())
    }

    /// When the next processing-time timer is due, if any.
    fn next_processing_timer(&self) -> Option<i64> {
        None
    }

    /// Make it usable again after `e` failed a call, to call it on other
    /// records (`on-error`): a Wasm instance is made again (a trap leaves
    /// it unusable, and the failed call may have changed what its operator
    /// keeps in its own fields), its keyed state kept.
    fn recover(&mut self, e: &OperatorError) -> Result<(), OperatorError> {
        let _ = e;
        Ok(())
    }

    /// Its memory, guest time and state size, for metrics.
    fn metrics(&self) -> weir_host::InstanceMetrics {
        weir_host::InstanceMetrics::default()
    }

    /// The synchronous part of a snapshot of its keyed state, as files in
    /// the empty directory `dir` — `portable` (a savepoint's): in the
    /// canonical format, whatever the backend; `None` for an operator
    /// without keyed state.
    fn snapshot(
        &mut self,
        dir: &std::path::Path,
        portable: bool,
    ) -> anyhow::Result<Option<LocalSnapshot>> {
        let _ = (dir, portable);
        Ok(None)
    }
}

/// Creates the operator of one subtask of an operator vertex.
pub trait OperatorFactory: Send + Sync {
    /// The operator for `subtask` of `vertex`, a vertex of `graph`.
    fn create(
        &self,
        graph: &JobGraph,
        vertex: &Vertex,
        subtask: u32,
    ) -> Result<Box<dyn StreamOperator>, OperatorError>;
}

/// A Wasm operator: an [`OperatorInstance`], and whether it is keyed (has
/// keyed state to snapshot).
pub struct WasmOperator(pub OperatorInstance, pub bool);

impl StreamOperator for WasmOperator {
    fn process(
        &mut self,
        batch: Vec<Record>,
        ctx: BatchContext,
    ) -> Result<BatchOutput, OperatorError> {
        self.0.process(batch, ctx)
    }

    fn process_records(
        &mut self,
        batch: Records,
        ctx: BatchContext,
    ) -> Result<Output, OperatorError> {
        // The batch crosses into the guest and its output comes back in
        // one buffer each way.
        let batch = batch
            .into_packed()
            .map_err(|e| OperatorError::batch_too_large(self.0.ident().clone(), e))?;
        self.0.process_packed(batch, ctx)
    }

    fn on_watermark(&mut self, ctx: BatchContext) -> Result<Output, OperatorError> {
        match ctx.watermark {
            Some(wm)
                if self
                    .0
                    .backend()
                    .next_timer(TimeDomain::EventTime)
                    .is_some_and(|t| t <= wm) =>
            {
                self.0.fire_timers(TimeDomain::EventTime, wm, ctx)
            }
            _ => Ok(Output::default()),
        }
    }

    fn on_processing_time(&mut self, ctx: BatchContext) -> Result<Output, OperatorError> {
        self.0
            .fire_timers(TimeDomain::ProcessingTime, ctx.processing_time, ctx)
    }

    fn next_processing_timer(&self) -> Option<i64> {
        self.0.backend().next_timer(TimeDomain::ProcessingTime)
    }

    fn recover(&mut self, e: &OperatorError) -> Result<(), OperatorError> {
        // A fresh instance also after the guest's own error: the records
        // of the failed call before the failing one may have changed the
        // operator's fields, and are processed again.
        let _ = e;
        self.0.reset()
    }

    fn metrics(&self) -> weir_host::InstanceMetrics {
        self.0.metrics()
    }

    fn snapshot(
        &mut self,
        dir: &std::path::Path,
        portable: bool,
    ) -> anyhow::Result<Option<LocalSnapshot>> {
        if !self.1 {
            return Ok(None);
        }
        weir_state::snapshot::take(self.0.backend_mut(), dir, portable).map(Some)
    }
}

/// Creates Wasm operators from the job's loaded components, handing every
/// operator the job's parameters and a state backend of the job's kind.
pub struct WasmOperatorFactory {
    /// The process's Wasm runtime.
    pub runtime: Arc<WasmRuntime>,
    /// The job's components.
    pub components: JobComponents,
    /// The job's parameters.
    pub params: Vec<(String, String)>,
    /// Where its operators keep keyed state.
    pub state: StateSetup,
    /// The job's attempt (operators read it as `weir.attempt`).
    pub attempt: u32,
}

impl OperatorFactory for WasmOperatorFactory {
    fn create(
        &self,
        graph: &JobGraph,
        vertex: &Vertex,
        subtask: u32,
    ) -> Result<Box<dyn StreamOperator>, OperatorError> {
        let job = graph.name.as_str();
        let VertexKind::Operator {
            function,
            component,
            window,
            key_by,
            builtin,
        } = &vertex.kind
        else {
            unreachable!("operators are created for operator vertices only")
        };
        let mut config = self.params.clone();
        config.push(("weir.attempt".into(), self.attempt.to_string()));
        let ident = TaskIdent {
            job: job.to_owned(),
            operator: vertex.name.clone(),
            subtask,
        };
        // Only keyed operators have keyed state: the others get an empty
        // backend in memory, whatever the job's kind.
        let backend = if key_by.is_some() {
            self.state.open(vertex.id, subtask, vertex.parallelism)
        } else {
            Ok(Box::new(weir_state::MemoryStateBackend::new())
                as Box<dyn weir_state::StateBackend>)
        };
        let backend = backend.map_err(|e| OperatorError {
            ident: ident.clone(),
            kind: weir_host::ErrorKind::Host,
            message: format!("state backend: {e:#}"),
            guest_output: Vec::new(),
        })?;
        let codecs = StreamCodecs::of_job(graph);
        let input = codecs.input_format(graph, vertex.id);
        match (builtin, window) {
            (
                Some(Builtin::Aggregate {
                    function, field, ..
                }),
                Some(w),
            ) => {
                let keys = crate::builtin::aggregate::KeyText::of(key_by.as_ref(), &input);
                let output = codecs.format(vertex.id, None);
                let results = crate::builtin::aggregate::Results::new(
                    *function,
                    keys,
                    vertex.output_type.as_ref(),
                    &output,
                    true,
                )
                .map_err(|e| crate::builtin::host_error(&ident, e))?;
                let value_of = || {
                    crate::builtin::aggregate::ValueOf::new(*function, field.clone(), input.clone())
                };
                let f = BuiltinAggregate::new(
                    *function,
                    value_of(),
                    field.is_none(),
                    ident.clone(),
                    results,
                );
                let combiner = Combiner::new(*function, value_of(), field.is_none());
                return Ok(Box::new(WindowOperator::new(
                    w,
                    Box::new(f),
                    Some(combiner),
                    backend,
                    ident,
                )?));
            }
            (Some(b), _) => {
                let output = codecs.format(vertex.id, None);
                let input_type = graph.read_type(vertex.id);
                return crate::builtin::create(
                    b,
                    key_by.as_ref(),
                    input_type.as_ref(),
                    input,
                    &output,
                    ident,
                    backend,
                );
            }
            (None, _) => {}
        }
        let Some(component) = self.components.get(component) else {
            return Err(OperatorError {
                ident,
                kind: weir_host::ErrorKind::Host,
                message: format!(
                    "the job has no component `{component}` (it has: {})",
                    self.components
                        .iter()
                        .map(|c| c.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                guest_output: Vec::new(),
            });
        };
        let codecs = codecs.operator(graph, vertex.id);
        let Some(w) = window else {
            let spec = OperatorSpec {
                function,
                config,
                window: None,
                codecs,
                limits: graph.limits,
            };
            let instance = OperatorInstance::new(
                self.runtime.clone(),
                component.clone(),
                spec,
                ident,
                backend,
            )?;
            return Ok(Box::new(WasmOperator(instance, key_by.is_some())));
        };
        // A window function: the window operator keeps the windows in the
        // task's backend; the guest's instance needs none of its own.
        let contents = match component.operator(function).map(|o| o.kind) {
            Some(OperatorKind::WindowProcess) => Contents::Records,
            _ => Contents::Accumulator,
        };
        let spec = OperatorSpec {
            function,
            config,
            window: Some(w),
            codecs,
            limits: graph.limits,
        };
        let instance = OperatorInstance::new(
            self.runtime.clone(),
            component.clone(),
            spec,
            ident.clone(),
            Box::new(weir_state::MemoryStateBackend::new()),
        )?;
        let f = GuestFunction::new(instance, contents);
        Ok(Box::new(WindowOperator::new(
            w,
            Box::new(f),
            None,
            backend,
            ident,
        )?))
    }
}
