//! The host side of the `host` interface, and the data every `Store` holds.
//!
//! Effects handed over during a call (outputs, state changes, timer changes)
//! are *staged*; the instance applies them only when the call returns `ok`
//! (see [`crate::instance`]), which makes a batch atomic.

use std::sync::Arc;

use wasmtime::ResourceLimiter;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use crate::bindings::weir::operator::{host, types};
use crate::error::TaskIdent;
use crate::types::{Batch, LogLevel, StateKey, StateKind, StateOp, TimerOp};
use crate::wasi::LastWords;
use weir_model::Record;
use weir_state::StateBackend;

/// What a call handed over, not yet applied.
#[derive(Default)]
pub(crate) struct Staged {
    pub(crate) main: weir_model::PackedRecords,
    pub(crate) side: Vec<(String, Vec<Record>)>,
    pub(crate) state_ops: Vec<weir_state::StateOp>,
    pub(crate) timer_ops: Vec<TimerOp>,
    /// Records and bytes emitted in this call, for the quotas.
    pub(crate) emitted: (u64, u64),
    /// Bytes of keys and values in the state changes staged in this call.
    pub(crate) state_bytes: u64,
}

impl Staged {
    pub(crate) fn clear(&mut self) {
        self.main = weir_model::PackedRecords::default();
        self.side.clear();
        self.state_ops.clear();
        self.timer_ops.clear();
        self.emitted = (0, 0);
        self.state_bytes = 0;
    }
}

/// What one instance may make the host hold, from the host's config.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Quotas {
    pub(crate) emit_records: u64,
    pub(crate) emit_bytes: u64,
    pub(crate) state_bytes: u64,
    pub(crate) state_entries: u64,
    pub(crate) timers: u64,
}

/// `value` within `quota`'s `limit`, or the error that fails the call.
fn within(
    quota: &'static str,
    limit: u64,
    value: u64,
    scope: &'static str,
) -> wasmtime::Result<()> {
    if value > limit {
        return Err(wasmtime::Error::new(crate::error::QuotaExceeded {
            quota,
            limit,
            value,
            scope,
        }));
    }
    Ok(())
}

impl Quotas {
    /// Whether a backend holding `size` is within the quotas (checked after
    /// every call's changes are applied).
    pub(crate) fn check_held(&self, size: weir_state::StateSize) -> wasmtime::Result<()> {
        let scope = "in the instance's keyed state";
        within("max-state-bytes", self.state_bytes, size.bytes, scope)?;
        within("max-state-entries", self.state_entries, size.entries, scope)?;
        within("max-timers", self.timers, size.timers, "timers registered")
    }
}

/// Bytes of keys and values a state change carries.
fn op_bytes(op: &StateOp) -> u64 {
    let n = |b: &[u8]| b.len() as u64;
    let list = |l: &[Vec<u8>]| l.iter().map(|v| n(v)).sum::<u64>();
    match op {
        StateOp::PutValue(p) => n(&p.target.key) + n(&p.value),
        StateOp::ReplaceList(l) | StateOp::AppendList(l) => n(&l.target.key) + list(&l.values),
        StateOp::PutEntry(p) => n(&p.target.key) + n(&p.map_key) + n(&p.value),
        StateOp::RemoveEntry(r) => n(&r.target.key) + n(&r.map_key),
        StateOp::Clear(k) => n(&k.key),
    }
}

impl TaskState {
    /// Count state changes staged in this call: one call may not stage more
    /// than the instance may hold.
    fn count_staged_state(&mut self, bytes: u64) -> wasmtime::Result<()> {
        self.staged.state_bytes += bytes;
        within(
            "max-state-bytes",
            self.quotas.state_bytes,
            self.staged.state_bytes,
            "of state changes in one call",
        )
    }

    /// Count timer changes staged in this call, likewise.
    fn count_staged_timers(&mut self) -> wasmtime::Result<()> {
        within(
            "max-timers",
            self.quotas.timers,
            self.staged.timer_ops.len() as u64,
            "timer changes in one call",
        )
    }

    /// Count a batch the guest emits against the call's quotas.
    fn count_emitted(&mut self, batch: &Batch) -> wasmtime::Result<()> {
        let (records, bytes) = &mut self.staged.emitted;
        *records += (batch.spans.len() / 4) as u64;
        *bytes += batch.data.len() as u64;
        let scope = "in one call";
        within(
            "max-emit-records",
            self.quotas.emit_records,
            *records,
            scope,
        )?;
        within("max-emit-bytes", self.quotas.emit_bytes, *bytes, scope)
    }
}

/// Caps a guest's linear memory and remembers that it hit the cap.
pub(crate) struct Limiter {
    pub(crate) max_memory: usize,
    pub(crate) exceeded: Option<usize>,
    /// The guest's linear memory now, in bytes.
    pub(crate) current: usize,
}

impl ResourceLimiter for Limiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.max_memory {
            self.exceeded = Some(desired);
            // Trapping (rather than failing the grow) makes the cause certain,
            // whatever the guest's allocator would do with a failed grow.
            return Err(wasmtime::format_err!(
                "memory limit: the guest asked for {desired} bytes of linear memory, the limit is {}",
                self.max_memory
            ));
        }
        self.current = desired;
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= 1_000_000)
    }
}

/// The data of one operator instance's `Store`.
pub(crate) struct TaskState {
    pub(crate) ident: Arc<TaskIdent>,
    pub(crate) wasi: WasiCtx,
    pub(crate) table: ResourceTable,
    pub(crate) limiter: Limiter,
    pub(crate) backend: Box<dyn StateBackend>,
    /// The codec of keyed state not declared as rows (the job's).
    pub(crate) state_codec: weir_model::codec::Codec,
    /// What the running `create` declared: states declared with another
    /// type than they hold are converted once it returned.
    pub(crate) declarations: crate::state_types::Declarations,
    /// True while `operator.create` runs: the only time state is declared.
    pub(crate) creating: bool,
    pub(crate) staged: Staged,
    pub(crate) watermark: Option<i64>,
    pub(crate) last_words: LastWords,
    /// When the running call's waits in WASI (a sleep, a poll) give up.
    pub(crate) call_deadline: std::time::Instant,
    pub(crate) quotas: Quotas,
    /// The instance's log bytes per second.
    pub(crate) log_budget: crate::wasi::LogBudget,
}

impl WasiView for TaskState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

fn backend_error(e: anyhow::Error) -> wasmtime::Error {
    wasmtime::format_err!("state backend: {e:#}")
}

pub use weir_model::now_ms;

impl types::Host for TaskState {}

impl TaskState {
    /// Keyed state is read while a record or timer is handled (its key
    /// current), never while the operator is created: a restored state
    /// declared with another type is converted only once `create` returned.
    fn readable(&self) -> wasmtime::Result<()> {
        if self.creating {
            return Err(wasmtime::format_err!(
                "keyed state read while the operator is created: read it while a record or timer is handled"
            ));
        }
        Ok(())
    }

    /// Declare a state (while the operator is created), its values rows
    /// of `value_type` or in the job's codec: a restored state of another
    /// type is converted once the operator is created
    /// ([`crate::state_types`]).
    fn declare(
        &mut self,
        name: String,
        kind: StateKind,
        ttl: Option<types::StateTtl>,
        value_type: Option<String>,
    ) -> wasmtime::Result<Result<u32, String>> {
        if !self.creating {
            return Ok(Err(format!(
                "state `{name}` declared outside `create`: declare state when the operator is created"
            )));
        }
        let ty = value_type.as_deref();
        let to = match crate::state_types::format_of(self.state_codec, &name, ty) {
            Ok(to) => to,
            Err(why) => return Ok(Err(self.backend.refuse(why))),
        };
        let ttl = ttl.map(|t| weir_state::ttl::StateTtl {
            ttl_ms: t.ttl_ms,
            refresh_on_read: t.refresh_on_read,
        });
        let existed = self.backend.states().iter().any(|d| d.name == name);
        let id = match self.backend.declare_ttl(&name, kind.into(), ttl) {
            Ok(id) => id,
            Err(why) => return Ok(Err(why)),
        };
        let declared = crate::state_types::declare_type(
            self.backend.as_mut(),
            self.state_codec,
            (&name, id, existed),
            (ty, to),
            &mut self.declarations,
        );
        match declared {
            Ok(Ok(())) => Ok(Ok(id)),
            Ok(Err(why)) => Ok(Err(self.backend.refuse(why))),
            Err(failed) => Err(wasmtime::Error::msg(failed)),
        }
    }
}

impl host::Host for TaskState {
    fn emit(&mut self, records: Batch) -> wasmtime::Result<()> {
        self.count_emitted(&records)?;
        let records = crate::packed::from_batch(records).map_err(wasmtime::Error::msg)?;
        self.staged
            .main
            .append(records)
            .map_err(wasmtime::Error::msg)
    }

    fn emit_side(&mut self, name: String, records: Batch) -> wasmtime::Result<()> {
        self.count_emitted(&records)?;
        let i = match self.staged.side.iter().position(|(n, _)| *n == name) {
            Some(i) => i,
            None => {
                self.staged.side.push((name, Vec::new()));
                self.staged.side.len() - 1
            }
        };
        crate::packed::unpack_batch(records, &mut self.staged.side[i].1)
            .map_err(wasmtime::Error::msg)
    }

    fn declare_state(
        &mut self,
        name: String,
        kind: StateKind,
    ) -> wasmtime::Result<Result<u32, String>> {
        self.declare(name, kind, None, None)
    }

    fn declare_state_ttl(
        &mut self,
        name: String,
        kind: StateKind,
        ttl: types::StateTtl,
    ) -> wasmtime::Result<Result<u32, String>> {
        self.declare(name, kind, Some(ttl), None)
    }

    fn declare_typed_state(
        &mut self,
        name: String,
        kind: StateKind,
        ttl: Option<types::StateTtl>,
        value_type: String,
    ) -> wasmtime::Result<Result<u32, String>> {
        self.declare(name, kind, ttl, Some(value_type))
    }

    fn get_values(
        &mut self,
        states: Vec<u32>,
        keys: types::Packed,
    ) -> wasmtime::Result<(types::Packed, Vec<bool>)> {
        self.readable()?;
        let keys = crate::packed::strings(&keys).map_err(wasmtime::Error::msg)?;
        let answers = keys.len() * states.len();
        let mut values = types::Packed {
            data: Vec::new(),
            ends: Vec::with_capacity(answers),
        };
        let mut present = Vec::with_capacity(answers);
        self.backend
            .read_values(
                &states,
                &mut keys.into_iter(),
                &mut values.data,
                &mut values.ends,
                &mut present,
            )
            .map_err(backend_error)?;
        Ok((values, present))
    }

    fn put_values(
        &mut self,
        state: u32,
        keys: types::Packed,
        values: types::Packed,
    ) -> wasmtime::Result<()> {
        let packed = |p: types::Packed| {
            weir_state::Packed::new(p.data, p.ends)
                .map_err(|e| wasmtime::format_err!("put-values: {e}"))
        };
        let puts = weir_state::PackedPuts::new(state, packed(keys)?, packed(values)?)
            .map_err(|e| wasmtime::format_err!("put-values: {e}"))?;
        self.count_staged_state(puts.bytes())?;
        // Kept as the guest packed them: applied without a copy per key.
        self.staged
            .state_ops
            .push(weir_state::StateOp::PutValues(puts));
        Ok(())
    }

    fn get_list(&mut self, key: StateKey) -> wasmtime::Result<Vec<Vec<u8>>> {
        self.readable()?;
        self.backend
            .get_list(key.state, &key.key)
            .map_err(backend_error)
    }

    fn get_entry(&mut self, key: StateKey, map_key: Vec<u8>) -> wasmtime::Result<Option<Vec<u8>>> {
        self.readable()?;
        self.backend
            .get_entry(key.state, &key.key, &map_key)
            .map_err(backend_error)
    }

    fn get_entries(&mut self, key: StateKey) -> wasmtime::Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.readable()?;
        self.backend
            .get_entries(key.state, &key.key)
            .map_err(backend_error)
    }

    fn update_state(&mut self, ops: Vec<StateOp>) -> wasmtime::Result<()> {
        self.count_staged_state(ops.iter().map(op_bytes).sum())?;
        self.staged
            .state_ops
            .extend(ops.into_iter().map(Into::into));
        Ok(())
    }

    fn update_timers(&mut self, ops: Vec<TimerOp>) -> wasmtime::Result<()> {
        self.staged.timer_ops.extend(ops);
        self.count_staged_timers()
    }

    fn current_watermark(&mut self) -> wasmtime::Result<Option<i64>> {
        Ok(self.watermark)
    }

    fn processing_time(&mut self) -> wasmtime::Result<i64> {
        Ok(now_ms())
    }

    fn log(&mut self, level: LogLevel, message: String) -> wasmtime::Result<()> {
        if level == LogLevel::Error {
            self.last_words.push(&message);
        }
        if !self.log_budget.take(message.len()) {
            return Ok(());
        }
        let i = &*self.ident;
        match level {
            LogLevel::Debug => {
                tracing::debug!(job = %i.job, operator = %i.operator, subtask = i.subtask, "{message}")
            }
            LogLevel::Info => {
                tracing::info!(job = %i.job, operator = %i.operator, subtask = i.subtask, "{message}")
            }
            LogLevel::Warn => {
                tracing::warn!(job = %i.job, operator = %i.operator, subtask = i.subtask, "{message}")
            }
            LogLevel::Error => {
                tracing::error!(job = %i.job, operator = %i.operator, subtask = i.subtask, "{message}");
            }
        }
        Ok(())
    }
}
