//! The window operator, native in the runtime: [`weir_window`]'s windows
//! on the task's state backend and timers (so windows are checkpointed and
//! restored like any keyed state), with a window function from the job's
//! component ([`guest`]) or built into the runtime ([`builtin`]).
//!
//! Per batch of records it reads the keys' open windows in one bulk read,
//! calls the window function once (`accumulate`), writes the windows back
//! and registers their timers in one batch; per batch of due timers it
//! fires the windows that end there with one call (`fire`).

mod builtin;
mod combine;
mod guest;

use bytes::Bytes;
use weir_host::{
    BatchContext, BatchOutput, ErrorKind, InstanceMetrics, OperatorError, Output, TaskIdent,
};
use weir_model::{Record, Records};
use weir_state::snapshot::LocalSnapshot;
use weir_state::{StateBackend, StateKey, StateKind, StateOp, TimeDomain, Timer, TimerOp};
use weir_window::{Contents, Fired, Slot, Spec, Time, slot};

pub(crate) use builtin::BuiltinAggregate;
pub(crate) use combine::Combiner;
use combine::Taken;
pub(crate) use guest::GuestFunction;

use crate::builtin::aggregate::Acc;
use crate::operators::StreamOperator;

/// The side output of records later than their windows' allowed lateness.
pub const LATE: &str = "late";

/// What a record without a key fails with.
const NO_KEY: &str = "a record reached a window operator without its key";

/// What a record without a timestamp fails with in event time.
const NO_TIMESTAMP: &str = "an event-time window needs timestamps: give the source a `timestamp` or a `timestamp-assigner`";

/// What computes a window's result.
pub(crate) trait WindowFunction: Send {
    /// What it keeps per window.
    fn contents(&self) -> Contents;

    /// The new contents of each group: group `g` starts from the merge of
    /// `groups[g]` (stored contents; none for a new window), then each
    /// `(record, group)` of `additions` adds record `record` of `records`
    /// to it.
    fn accumulate(
        &mut self,
        records: Records,
        groups: Vec<Vec<Vec<u8>>>,
        additions: &[(u32, u32)],
    ) -> Result<Vec<Vec<u8>>, OperatorError>;

    /// Windows fire: their results, with the timestamp `end - 1`.
    fn fire(&mut self, fired: Vec<Fired>, ctx: BatchContext) -> Result<Output, OperatorError>;

    /// Its memory and guest time, for metrics.
    fn metrics(&self) -> InstanceMetrics {
        InstanceMetrics::default()
    }
}

/// A process-window function's contents: the records, kept by the host.
pub(crate) fn append_records(
    records: &Records,
    groups: Vec<Vec<Vec<u8>>>,
    additions: &[(u32, u32)],
) -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = groups.into_iter().map(|g| g.concat()).collect();
    for &(r, g) in additions {
        slot::append_record(&mut out[g as usize], records.get(r as usize).value);
    }
    out
}

/// The buffer a group's new contents are written into: its first stored
/// contents' (merged already, so no longer needed), emptied; a new one for
/// a window that had none.
pub(crate) fn result_buffer(stored: Vec<Vec<u8>>) -> Vec<u8> {
    let mut buffer = stored.into_iter().next().unwrap_or_default();
    buffer.clear();
    buffer
}

/// The window operator of one subtask.
pub struct WindowOperator {
    spec: Spec,
    function: Box<dyn WindowFunction>,
    backend: Box<dyn StateBackend>,
    /// The value state of every key's open windows.
    state: u32,
    /// Keys' windows changed since they were last written to the backend.
    cache: SlotCache,
    /// A built-in aggregate's records combined per pane and key ahead of
    /// the state (event time; not sessions).
    combiner: Option<Combiner>,
    /// The latest watermark the operator has seen: no pane the combiner
    /// holds has fired by it.
    watermark: Option<i64>,
    ident: TaskIdent,
}

/// Keys' slots as the window operator last saved them, decoded: a batch
/// takes its keys' slots from here (no read, no decoding) and puts them
/// back; they go to the backend, encoded, before a snapshot or when there
/// are [`SlotCache::LIMIT`] of them.
#[derive(Default)]
struct SlotCache {
    /// A key's slots; none: the key has none (cleared in the backend when
    /// written out). Entries are only ever added until all are written
    /// out, so a key's index stays what [`BackendStore::load`] found.
    slots: indexmap::IndexMap<Vec<u8>, Vec<Slot>, rustc_hash::FxBuildHasher>,
}

impl SlotCache {
    /// Keys kept before they are written out.
    const LIMIT: usize = 100_000;

    /// Write every key's slots to `backend`, leaving the cache empty.
    fn write_out(&mut self, backend: &mut dyn StateBackend, state: u32) -> anyhow::Result<()> {
        if self.slots.is_empty() {
            return Ok(());
        }
        let ops = self
            .slots
            .drain(..)
            .map(|(key, slots)| {
                let target = StateKey { state, key };
                if slots.is_empty() {
                    StateOp::Clear(target)
                } else {
                    StateOp::PutValue {
                        target,
                        value: slot::encode(&slots),
                    }
                }
            })
            .collect();
        backend.apply_all(ops, Vec::new())
    }
}

/// Timers of `domain` due up to `upto`, fired in batches of this many (a
/// few in tests, so that they fire in batches and shares).
const TIMER_BATCH: usize = if cfg!(test) { 2 } else { 1024 };

/// Windows fired per call on a watermark, at most (about): the rest fire
/// in the next calls, each share routed downstream before the next fires.
const FIRE_SHARE: usize = if cfg!(test) { 5 } else { 8 * TIMER_BATCH };

/// Combined accumulators written to the state per call of the window
/// engine, at most (a few in tests, so that they write in shares).
const WRITE_SHARE: usize = if cfg!(test) { 3 } else { 4096 };

/// The state name of a key's open windows.
const WINDOWS_STATE: &str = "weir.windows";

impl WindowOperator {
    /// A window operator for `spec` (whose contents the function decides)
    /// with its keyed state in `backend`; `combiner`, for a built-in
    /// aggregate, combines its records ahead of the state where the
    /// windows allow it (event time, not sessions).
    pub(crate) fn new(
        spec: &weir_model::graph::WindowSpec,
        function: Box<dyn WindowFunction>,
        combiner: Option<Combiner>,
        mut backend: Box<dyn StateBackend>,
        ident: TaskIdent,
    ) -> Result<WindowOperator, OperatorError> {
        use weir_model::graph::{TimeCharacteristic, WindowAssigner};
        let assigner = match spec.assigner {
            WindowAssigner::Tumbling { size_ms } => {
                weir_window::Assigner::Tumbling { size: size_ms }
            }
            WindowAssigner::Sliding { size_ms, slide_ms } => weir_window::Assigner::Sliding {
                size: size_ms,
                slide: slide_ms,
            },
            WindowAssigner::Session { gap_ms } => weir_window::Assigner::Session { gap: gap_ms },
        };
        let time = match spec.time {
            TimeCharacteristic::Event => Time::Event,
            TimeCharacteristic::Processing => Time::Processing,
        };
        let spec = Spec::new(
            assigner,
            time,
            spec.allowed_lateness_ms,
            function.contents(),
        )
        .map_err(|e| host_error(&ident, e.to_string()))?;
        let state = backend
            .register(WINDOWS_STATE, StateKind::Value)
            .map_err(|e| host_error(&ident, format!("state backend: {e}")))?;
        let combiner = combiner.filter(|_| spec.time == Time::Event && !spec.is_session());
        Ok(WindowOperator {
            spec,
            function,
            backend,
            state,
            cache: SlotCache::default(),
            combiner,
            watermark: None,
            ident,
        })
    }

    fn domain(&self) -> TimeDomain {
        match self.spec.time {
            Time::Event => TimeDomain::EventTime,
            Time::Processing => TimeDomain::ProcessingTime,
        }
    }

    fn store(&mut self) -> BackendStore<'_> {
        BackendStore::new(
            self.domain(),
            &mut *self.backend,
            self.state,
            &mut self.cache,
        )
    }

    /// Fire the due timers of the operator's clock up to `upto`, about
    /// `share` of them at most; what they fired, and how many there were.
    fn fire_due(
        &mut self,
        upto: i64,
        share: usize,
        ctx: BatchContext,
    ) -> Result<(Output, usize), OperatorError> {
        let domain = self.domain();
        let mut all = Output::default();
        let mut taken = 0;
        loop {
            if taken >= share {
                return Ok((all, taken));
            }
            let due = self
                .backend
                .take_due_timers(domain, upto, TIMER_BATCH)
                .map_err(|e| self.state_error(e))?;
            if due.is_empty() {
                return Ok((all, taken));
            }
            taken += due.len();
            let timers: Vec<(&[u8], i64)> =
                due.iter().map(|t| (t.key.as_slice(), t.time)).collect();
            let spec = self.spec;
            let mut store = self.store();
            let fired = spec.fire(&mut store, &timers);
            let fired = store.flush().and(fired).map_err(|e| self.state_error(e))?;
            if !fired.is_empty() {
                all.append(self.function.fire(fired, ctx)?);
            }
        }
    }

    /// One round of a batch: its records from `from` up to the first
    /// that makes a window fire again; returns where the next round starts.
    /// A batch that is one round (the usual case) is taken whole, packed
    /// as it came.
    fn round(
        &mut self,
        batch: &mut Records,
        from: usize,
        ctx: BatchContext,
        out: &mut Output,
    ) -> Result<usize, OperatorError> {
        let input_error = |message: String| OperatorError {
            ident: self.ident.clone(),
            kind: ErrorKind::Guest,
            message,
            guest_output: Vec::new(),
        };
        let mut pairs = Vec::with_capacity(batch.len() - from);
        for i in from..batch.len() {
            let r = batch.get(i);
            let key = r.key.ok_or_else(|| input_error(NO_KEY.into()))?;
            let t = match self.spec.time {
                Time::Event => r
                    .timestamp
                    .ok_or_else(|| input_error(NO_TIMESTAMP.into()))?,
                Time::Processing => ctx.processing_time,
            };
            pairs.push((key, t));
        }
        let spec = self.spec;
        let mut store = BackendStore::new(
            self.domain(),
            &mut *self.backend,
            self.state,
            &mut self.cache,
        );
        let mut assigned = spec
            .assign(&mut store, &pairs, ctx.watermark)
            .map_err(|e| host_error(&self.ident, format!("state backend: {e:#}")))?;
        drop(pairs);
        let next = from + assigned.consumed;
        if !assigned.late.is_empty() {
            let late = assigned.late.iter().map(|&r| {
                let r = batch.get(from + r as usize);
                Record {
                    key: None,
                    value: Bytes::copy_from_slice(r.value),
                    timestamp: r.timestamp,
                }
            });
            out.append(Output {
                main: Records::default(),
                side: vec![(LATE.to_owned(), late.collect())],
            });
        }
        let groups = std::mem::take(&mut assigned.groups);
        let additions = std::mem::take(&mut assigned.additions);
        let results = if groups.is_empty() {
            Vec::new()
        } else {
            let records = if from == 0 && next == batch.len() {
                std::mem::take(batch)
            } else {
                batch.pick(from..next)
            };
            self.function.accumulate(records, groups, &additions)?
        };
        let refire = spec.commit(&mut store, assigned, results);
        let refire = store
            .flush()
            .and(refire)
            .map_err(|e| host_error(&self.ident, format!("state backend: {e:#}")))?;
        if !refire.is_empty() {
            out.append(self.function.fire(refire, ctx)?);
        }
        Ok(next)
    }

    fn state_error(&self, e: anyhow::Error) -> OperatorError {
        host_error(&self.ident, format!("state backend: {e:#}"))
    }

    /// The watermark is `watermark` now: the combined panes whose windows
    /// it fires go to the state first, as of the watermark before.
    fn advance(
        &mut self,
        watermark: Option<i64>,
        ctx: BatchContext,
    ) -> Result<Output, OperatorError> {
        if watermark <= self.watermark {
            return Ok(Output::default());
        }
        let due = self
            .combiner
            .as_ref()
            .is_some_and(|c| c.has_due(&self.spec, watermark));
        let refire = match (due, watermark) {
            // The panes whose windows fire by it: those that end by the
            // instant after it.
            (true, Some(wm)) => self.write_combined(Some(wm.saturating_add(1)), false)?,
            _ => Vec::new(),
        };
        self.watermark = watermark;
        match refire.is_empty() {
            true => Ok(Output::default()),
            false => self.function.fire(refire, ctx),
        }
    }

    /// Write combined panes to the state: those that end by `end` (every
    /// one: `None`), left held as well when `keep`. Returns windows to fire
    /// again, which there are none of (a combined pane has not fired),
    /// unless the engine says otherwise.
    fn write_combined(
        &mut self,
        end: Option<i64>,
        keep: bool,
    ) -> Result<Vec<Fired>, OperatorError> {
        let Some(combiner) = self.combiner.as_mut() else {
            return Ok(Vec::new());
        };
        let taken = combiner.take(end, keep);
        self.write_taken(taken, keep)
    }

    /// Write panes taken from the combiner to the state (see
    /// [`WindowOperator::write_combined`]).
    fn write_taken(&mut self, taken: Taken, keep: bool) -> Result<Vec<Fired>, OperatorError> {
        if taken.is_empty() {
            return Ok(Vec::new());
        }
        let combined = taken.combined();
        // In shares, so that what the engine builds for them stays small.
        let mut written = Vec::with_capacity(combined.len());
        let mut refire = Vec::new();
        for share in combined.chunks(WRITE_SHARE) {
            refire.extend(self.write_share(share, &mut written)?);
        }
        drop(combined);
        let combiner = self.combiner.as_mut().expect("taken from it");
        match keep {
            true => combiner.kept(&taken, &written),
            false => combiner.recycle(taken),
        }
        Ok(refire)
    }

    /// Write a share of what was combined to the state, appending each
    /// key's accumulator as written to `written`.
    fn write_share(
        &mut self,
        share: &[combine::Combined<'_>],
        written: &mut Vec<Acc>,
    ) -> Result<Vec<Fired>, OperatorError> {
        let pairs: Vec<(&[u8], i64)> = share.iter().map(|c| (c.key, c.start)).collect();
        let spec = self.spec;
        let mut store = BackendStore::new(
            self.domain(),
            &mut *self.backend,
            self.state,
            &mut self.cache,
        );
        let state_error =
            |e: anyhow::Error| host_error(&self.ident, format!("state backend: {e:#}"));
        let mut assigned = spec
            .assign(&mut store, &pairs, self.watermark)
            .map_err(state_error)?;
        let groups = std::mem::take(&mut assigned.groups);
        // Each combined key and pane is a group of its own.
        let mut of_group = vec![None; groups.len()];
        for &(r, g) in &assigned.additions {
            of_group[g as usize] = Some(r as usize);
        }
        if assigned.consumed != pairs.len()
            || !assigned.late.is_empty()
            || groups.len() != share.len()
            || of_group.iter().any(Option::is_none)
        {
            return Err(host_error(
                &self.ident,
                "combined windows were taken as if they had fired".into(),
            ));
        }
        let combiner = self.combiner.as_ref().expect("written from it");
        let mut accs = vec![None; share.len()];
        let mut results = Vec::with_capacity(groups.len());
        for (stored, r) in groups.into_iter().zip(of_group) {
            let r = r.expect("checked");
            let (acc, contents) = combiner.contents(stored, &share[r], &self.ident)?;
            accs[r] = Some(acc);
            results.push(contents);
        }
        written.extend(accs.into_iter().map(|a| a.expect("one group each")));
        let refire = spec.commit(&mut store, assigned, results);
        store.flush().and(refire).map_err(state_error)
    }
}

fn host_error(ident: &TaskIdent, message: String) -> OperatorError {
    OperatorError {
        ident: ident.clone(),
        kind: ErrorKind::Host,
        message,
        guest_output: Vec::new(),
    }
}

impl StreamOperator for WindowOperator {
    fn process(
        &mut self,
        batch: Vec<Record>,
        ctx: BatchContext,
    ) -> Result<BatchOutput, OperatorError> {
        self.process_records(batch.into(), ctx)
            .map(BatchOutput::from)
    }

    fn process_records(
        &mut self,
        mut batch: Records,
        ctx: BatchContext,
    ) -> Result<Output, OperatorError> {
        let mut out = self.advance(ctx.watermark, ctx)?;
        if let Some(combiner) = self.combiner.as_mut() {
            let rest = combiner.add(&self.spec, &batch, self.watermark, &self.ident)?;
            if combiner.is_full() {
                let refire = self.write_combined(None, false)?;
                if !refire.is_empty() {
                    out.append(self.function.fire(refire, ctx)?);
                }
            }
            if rest.is_empty() {
                return Ok(out);
            }
            if rest.len() < batch.len() {
                batch = batch.pick(rest);
            }
        }
        // In rounds: a record that updates a window which fired already
        // (within its lateness) ends a round, and the window fires again
        // before the next record.
        let mut from = 0;
        while from < batch.len() {
            from = self.round(&mut batch, from, ctx, &mut out)?;
        }
        Ok(out)
    }

    fn on_watermark(&mut self, ctx: BatchContext) -> Result<Output, OperatorError> {
        let Some(wm) = ctx.watermark else {
            return Ok(Output::default());
        };
        let mut out = Output::default();
        let mut left = FIRE_SHARE;
        if ctx.watermark > self.watermark {
            // The combined panes it fires go to the state an end at a
            // time, in the order of their ends, each after the windows
            // that end before its first fired: only those panes' windows
            // are in the state at once, and they fire in the order of
            // their ends.
            let mut due = match self.combiner.as_mut() {
                Some(c) if c.has_due(&self.spec, ctx.watermark) => {
                    c.take(Some(wm.saturating_add(1)), false).by_end()
                }
                _ => Taken::default(),
            };
            while let Some(end) = due.first_end() {
                // (A pane ending at `i64::MIN + 1` has nothing before it.)
                if let Some(before) = end.checked_sub(2) {
                    let (fired, taken) = self.fire_due(before, left, ctx)?;
                    out.append(fired);
                    left = left.saturating_sub(taken);
                }
                if left == 0 {
                    // The rest in the next call (`more_due`): the panes not
                    // written yet are held again.
                    if let Some(c) = self.combiner.as_mut() {
                        c.hold(due);
                    }
                    return Ok(out);
                }
                let refire = self.write_taken(due.split_first_end(), false)?;
                if !refire.is_empty() {
                    out.append(self.function.fire(refire, ctx)?);
                }
            }
            self.watermark = ctx.watermark;
        }
        if self.more_due(wm) {
            out.append(self.fire_due(wm, left, ctx)?.0);
        }
        Ok(out)
    }

    fn more_due(&self, watermark: i64) -> bool {
        self.spec.time == Time::Event
            && (self
                .backend
                .next_timer(TimeDomain::EventTime)
                .is_some_and(|t| t <= watermark)
                || self
                    .combiner
                    .as_ref()
                    .is_some_and(|c| c.has_due(&self.spec, Some(watermark))))
    }

    fn on_processing_time(&mut self, ctx: BatchContext) -> Result<Output, OperatorError> {
        if self.spec.time != Time::Processing {
            return Ok(Output::default());
        }
        self.fire_due(ctx.processing_time, usize::MAX, ctx)
            .map(|(fired, _)| fired)
    }

    fn next_processing_timer(&self) -> Option<i64> {
        self.backend.next_timer(TimeDomain::ProcessingTime)
    }

    /// It does not go on after a failed batch: the batch's keys' windows
    /// were taken from the cache (and entries made for the keys read from
    /// the backend) to be saved after the window function's call, so what
    /// they held is not in the cache any more. The task fails and restores
    /// from its checkpoint instead (the manifest refuses `on-error` for a
    /// window operator).
    fn recover(&mut self, e: &OperatorError) -> Result<(), OperatorError> {
        Err(e.clone())
    }

    fn metrics(&self) -> InstanceMetrics {
        InstanceMetrics {
            state: self.backend.size(),
            ..self.function.metrics()
        }
    }

    fn snapshot(
        &mut self,
        dir: &std::path::Path,
        portable: bool,
    ) -> anyhow::Result<Option<LocalSnapshot>> {
        // What is combined goes into the snapshot, and stays held: each
        // key's accumulator holds what is stored for its pane from now on.
        let refire = self
            .write_combined(None, true)
            .map_err(|e| anyhow::anyhow!("{}", e.message))?;
        anyhow::ensure!(
            refire.is_empty(),
            "combined windows fired again while the state was written for a snapshot"
        );
        self.cache.write_out(&mut *self.backend, self.state)?;
        weir_state::snapshot::take(&mut *self.backend, dir, portable).map(Some)
    }
}

/// The window engine's store on a state backend: slots as one value per
/// key, in front of it the operator's [`SlotCache`]; timers applied in one
/// batch by [`BackendStore::flush`].
struct BackendStore<'a> {
    domain: TimeDomain,
    backend: &'a mut dyn StateBackend,
    state: u32,
    cache: &'a mut SlotCache,
    timers: Vec<TimerOp>,
    /// The cache's index of each key of the last load, in order.
    loaded: Vec<usize>,
}

impl<'a> BackendStore<'a> {
    fn new(
        domain: TimeDomain,
        backend: &'a mut dyn StateBackend,
        state: u32,
        cache: &'a mut SlotCache,
    ) -> BackendStore<'a> {
        BackendStore {
            domain,
            backend,
            state,
            cache,
            timers: Vec::new(),
            loaded: Vec::new(),
        }
    }

    fn flush(self) -> anyhow::Result<()> {
        if !self.timers.is_empty() {
            self.backend.apply_all(Vec::new(), self.timers)?;
        }
        if self.cache.slots.len() >= SlotCache::LIMIT {
            self.cache.write_out(self.backend, self.state)?;
        }
        Ok(())
    }
}

impl weir_window::Store for BackendStore<'_> {
    type Error = anyhow::Error;

    fn load(&mut self, keys: &[&[u8]]) -> anyhow::Result<Vec<Vec<Slot>>> {
        // The cached keys' slots are taken (one lookup each), their entries
        // left in place for `save` (the engine saves every key it loads);
        // the others are read from the backend in one call and decoded,
        // then given entries. A failure leaves the cache as it was.
        let cached: Vec<Option<usize>> = keys
            .iter()
            .map(|k| self.cache.slots.get_index_of(*k))
            .collect();
        let mut missing = keys
            .iter()
            .zip(&cached)
            .filter(|(_, c)| c.is_none())
            .map(|(k, _)| *k);
        let mut read = read_slots(&*self.backend, self.state, &mut missing)?.into_iter();
        self.loaded.clear();
        let mut loaded = Vec::with_capacity(keys.len());
        for (key, c) in keys.iter().zip(cached) {
            match c {
                Some(i) => {
                    self.loaded.push(i);
                    loaded.push(std::mem::take(&mut self.cache.slots[i]));
                }
                None => {
                    let (i, _) = self.cache.slots.insert_full(key.to_vec(), Vec::new());
                    self.loaded.push(i);
                    loaded.push(read.next().unwrap_or_default());
                }
            }
        }
        Ok(loaded)
    }

    fn save(&mut self, loaded: usize, key: &[u8], slots: Vec<Slot>) -> anyhow::Result<()> {
        // The entry `load` found or made, when the key is the one loaded
        // there; else looked up.
        let at = self
            .loaded
            .get(loaded)
            .copied()
            .filter(|&i| self.cache.slots.get_index(i).is_some_and(|(k, _)| k == key));
        match at {
            Some(i) => self.cache.slots[i] = slots,
            None => {
                self.cache.slots.insert(key.to_vec(), slots);
            }
        }
        Ok(())
    }

    fn timer(&mut self, key: &[u8], time: i64, register: bool) -> anyhow::Result<()> {
        let timer = Timer {
            key: key.to_vec(),
            time,
            domain: self.domain,
        };
        self.timers.push(if register {
            TimerOp::Register(timer)
        } else {
            TimerOp::Delete(timer)
        });
        Ok(())
    }
}

/// The decoded slots of `keys` as stored in `backend`'s state `state`, in
/// order (none for a key without any).
fn read_slots(
    backend: &dyn StateBackend,
    state: u32,
    keys: &mut dyn Iterator<Item = &[u8]>,
) -> anyhow::Result<Vec<Vec<Slot>>> {
    let (mut data, mut ends, mut present) = (Vec::new(), Vec::new(), Vec::new());
    backend.read_values(&[state], keys, &mut data, &mut ends, &mut present)?;
    let mut read = Vec::with_capacity(present.len());
    let mut start = 0;
    for (&end, &set) in ends.iter().zip(&present) {
        let bytes = &data[start..end as usize];
        start = end as usize;
        read.push(match set {
            false => Vec::new(),
            true => slot::decode(bytes)
                .ok_or_else(|| anyhow::anyhow!("a key's stored windows are corrupt"))?,
        });
    }
    Ok(read)
}

#[cfg(test)]
mod tests {
    use weir_window::Store;

    use super::*;

    fn slot(start: i64, contents: &[u8]) -> Slot {
        Slot {
            start,
            end: start + 10,
            contents: contents.to_vec(),
        }
    }

    /// A built-in `sum` of `/v` per key over tumbling 10 ms windows of event
    /// time, allowed lateness 100 ms, windows in memory.
    fn summing_windows() -> WindowOperator {
        summing(weir_model::graph::WindowAssigner::Tumbling { size_ms: 10 })
    }

    /// A built-in `sum` of `/v` per key over `assigner`'s windows of event
    /// time, allowed lateness 100 ms, windows in memory.
    fn summing(assigner: weir_model::graph::WindowAssigner) -> WindowOperator {
        use weir_model::builtin::AggregateFunction;
        aggregating(
            assigner,
            100,
            AggregateFunction::Sum,
            Some("/v"),
            Some(usize::MAX),
            weir_state::MemoryStateBackend::new(),
        )
    }

    /// A built-in `function` of `field` per key over `assigner`'s windows
    /// of event time with the allowed lateness `lateness`, its state in
    /// `backend`; its records combined ahead of the state, at most
    /// `combined` accumulators held, or not (`None`).
    fn aggregating(
        assigner: weir_model::graph::WindowAssigner,
        lateness: i64,
        function: weir_model::builtin::AggregateFunction,
        field: Option<&str>,
        combined: Option<usize>,
        backend: weir_state::MemoryStateBackend,
    ) -> WindowOperator {
        use weir_model::graph::{TimeCharacteristic, WindowSpec};
        let ident = TaskIdent {
            job: "job".into(),
            operator: "windows".into(),
            subtask: 0,
        };
        let value_of = || {
            crate::builtin::aggregate::ValueOf::new(
                function,
                field.map(str::to_owned),
                weir_model::format::Format::default(),
            )
        };
        let f = BuiltinAggregate::new(
            function,
            value_of(),
            field.is_none(),
            ident.clone(),
            crate::builtin::aggregate::Results::new(
                function,
                crate::builtin::aggregate::KeyText::Raw,
                None,
                &weir_model::format::Format::default(),
                true,
            )
            .unwrap(),
        );
        let combiner = combined
            .map(|limit| Combiner::new(function, value_of(), field.is_none()).with_limit(limit));
        let spec = WindowSpec {
            assigner,
            time: TimeCharacteristic::Event,
            allowed_lateness_ms: lateness,
            keeps: None,
        };
        WindowOperator::new(&spec, Box::new(f), combiner, Box::new(backend), ident).unwrap()
    }

    /// `(key, window start, sum)` of each fired window, in order.
    fn sums(records: Records) -> Vec<(String, i64, i64)> {
        records
            .iter()
            .map(|r| {
                let v: serde_json::Value = serde_json::from_slice(r.value).unwrap();
                (
                    v["key"].as_str().unwrap().to_owned(),
                    v["window_start"].as_i64().unwrap(),
                    v["sum"].as_i64().unwrap(),
                )
            })
            .collect()
    }

    #[test]
    fn windows_fire_again_record_by_record_from_a_packed_batch_as_from_a_list() {
        let record = |key: &str, t: i64, v: i64| Record {
            key: Some(Bytes::copy_from_slice(key.as_bytes())),
            value: Bytes::from(format!("{{\"v\":{v}}}")),
            timestamp: Some(t),
        };
        // At watermark 12 the window [0, 10) has fired and takes records
        // within its lateness: each fires it again before the next record
        // (three rounds); `b`'s window is past its lateness.
        let batch = vec![
            record("a", 15, 1),
            record("a", 3, 10),
            record("a", 1, 100),
            record("b", -200, 1000),
            record("a", 16, 10_000),
        ];
        let at = |watermark: i64| BatchContext {
            watermark: Some(watermark),
            processing_time: 0,
        };
        let packed = Records::Packed(weir_model::PackedRecords::from_records(&batch).unwrap());
        for input in [packed, Records::List(batch.clone())] {
            let kind = format!("{:?}", std::mem::discriminant(&input));
            let mut op = summing_windows();
            let out = op.process_records(input, at(12)).unwrap();
            assert_eq!(
                sums(out.main),
                [("a".into(), 0, 10), ("a".into(), 0, 110)],
                "{kind}"
            );
            assert_eq!(
                out.side,
                [(
                    LATE.to_owned(),
                    vec![Record {
                        key: None,
                        ..record("b", -200, 1000)
                    }]
                )],
                "{kind}"
            );
            let fired = op.on_watermark(at(19)).unwrap();
            assert_eq!(sums(fired.main), [("a".into(), 10, 10_001)], "{kind}");
            assert!(fired.side.is_empty());
        }
    }

    /// Sessions stored apart, then bridged by a record: the merged
    /// session's sum is every stored accumulator's plus the record's, its
    /// result written into one of their buffers.
    #[test]
    fn a_bridged_session_sums_every_stored_accumulator() {
        let record = |t: i64, v: i64| Record {
            key: Some(Bytes::from_static(b"a")),
            value: Bytes::from(format!("{{\"v\":{v}}}")),
            timestamp: Some(t),
        };
        let at = |watermark: i64| BatchContext {
            watermark: Some(watermark),
            processing_time: 0,
        };
        let mut op = summing(weir_model::graph::WindowAssigner::Session { gap_ms: 10 });
        // Two sessions, [0, 11) and [20, 30), each stored in its batch.
        for batch in [vec![record(0, 1), record(1, 10)], vec![record(20, 100)]] {
            let out = op.process_records(Records::List(batch), at(-1)).unwrap();
            assert!(out.main.is_empty());
        }
        // A record at 10, [10, 20), overlaps the first and touches the
        // second.
        let out = op.process_records(Records::List(vec![record(10, 1000)]), at(-1));
        assert!(out.unwrap().main.is_empty());
        let fired = op.on_watermark(at(100)).unwrap();
        assert_eq!(sums(fired.main), [("a".into(), 0, 1111)]);
    }

    /// A batch that fails is not isolated record by record: the keys it
    /// loaded are not in the cache any more, so the task fails instead.
    #[test]
    fn a_failed_batch_fails_the_task_rather_than_being_isolated() {
        let mut op = summing_windows();
        let ctx = BatchContext {
            watermark: Some(0),
            processing_time: 0,
        };
        let keyless = Record {
            key: None,
            value: Bytes::from_static(b"{\"v\":1}"),
            timestamp: Some(1),
        };
        let mut failed = Vec::new();
        let isolated = crate::dead_letter::process_isolating(
            &mut op,
            Records::List(vec![keyless]),
            ctx,
            &mut failed,
            10,
        );
        let Err(e) = isolated else {
            panic!("the batch's error, not an isolated record")
        };
        assert!(e.message.contains("without its key"), "{}", e.message);
        assert!(failed.is_empty());
    }

    #[test]
    fn a_failed_read_leaves_the_cached_windows_as_they_were() {
        let mut backend = weir_state::MemoryStateBackend::new();
        let state = backend.register(WINDOWS_STATE, StateKind::Value).unwrap();
        let mut cache = SlotCache::default();
        cache.slots.insert(b"a".to_vec(), vec![slot(0, b"cached")]);
        // `b` is not cached, and its stored windows cannot be decoded.
        backend
            .apply(StateOp::PutValue {
                target: StateKey {
                    state,
                    key: b"b".to_vec(),
                },
                value: vec![0xff; 3],
            })
            .unwrap();
        let mut store = BackendStore::new(TimeDomain::EventTime, &mut backend, state, &mut cache);
        let e = store.load(&[b"a", b"b"]).unwrap_err();
        assert!(e.to_string().contains("corrupt"), "{e}");
        // Nor does it leave an entry for `b`, which would clear its
        // stored windows when the cache is written out.
        assert_eq!(store.cache.slots.len(), 1);
        // `a`'s windows are still there for the next batch.
        assert_eq!(store.load(&[b"a"]).unwrap(), [vec![slot(0, b"cached")]]);
        // A read that succeeds takes the cached slots and reads the others.
        store.save(0, b"a", vec![slot(0, b"cached")]).unwrap();
        store
            .backend
            .apply(StateOp::PutValue {
                target: StateKey {
                    state,
                    key: b"b".to_vec(),
                },
                value: slot::encode(&[slot(20, b"stored")]),
            })
            .unwrap();
        let loaded = store.load(&[b"b", b"a", b"c"]).unwrap();
        assert_eq!(
            loaded,
            [vec![slot(20, b"stored")], vec![slot(0, b"cached")], vec![]]
        );
    }

    /// What one call of an operator gave: its main records' values and
    /// timestamps, and its side outputs.
    type Gave = (Vec<(Vec<u8>, Option<i64>)>, Vec<(String, Vec<Record>)>);

    fn gave(out: Output) -> Gave {
        let main = out
            .main
            .iter()
            .map(|r| (r.value.to_vec(), r.timestamp))
            .collect();
        (main, out.side)
    }

    /// Fire what `watermark` makes due, share by share, as the task does.
    fn watermark(op: &mut WindowOperator, watermark: i64) -> Gave {
        let ctx = BatchContext {
            watermark: Some(watermark),
            processing_time: 0,
        };
        let mut all = Output::default();
        loop {
            let out = op.on_watermark(ctx).unwrap();
            // A call fires a share (and the rest of a batch of timers).
            assert!(
                out.main.len() < FIRE_SHARE + TIMER_BATCH,
                "{}",
                out.main.len()
            );
            all.append(out);
            if !op.more_due(watermark) {
                return gave(all);
            }
        }
    }

    /// A pane that ends at the first instant after `i64::MIN`, part of it
    /// written at a snapshot and part held, fires once with all of it.
    #[test]
    fn a_pane_at_the_first_instant_fires_once_with_all_it_took() {
        use weir_model::builtin::AggregateFunction as F;
        let assigner = weir_model::graph::WindowAssigner::Tumbling { size_ms: 1 };
        let make = |combined| {
            aggregating(
                assigner.clone(),
                0,
                F::Count,
                None,
                combined,
                weir_state::MemoryStateBackend::new(),
            )
        };
        let record = || Record {
            key: Some(Bytes::from_static(b"k")),
            value: Bytes::from_static(b"{}"),
            timestamp: Some(i64::MIN),
        };
        let ctx = BatchContext {
            watermark: None,
            processing_time: 0,
        };
        let dir = tempfile::tempdir().unwrap();
        let mut gave_each = Vec::new();
        for combined in [None, Some(usize::MAX)] {
            let mut op = make(combined);
            op.process_records(Records::List(vec![record()]), ctx)
                .unwrap();
            let into = dir.path().join(format!("{combined:?}"));
            std::fs::create_dir(&into).unwrap();
            op.snapshot(&into, false).unwrap();
            op.process_records(Records::List(vec![record(), record()]), ctx)
                .unwrap();
            gave_each.push(watermark(&mut op, i64::MIN + 10));
        }
        assert_eq!(gave_each[0].0.len(), 1);
        let fired = String::from_utf8(gave_each[0].0[0].0.clone()).unwrap();
        assert!(fired.contains("\"count\":3"), "{fired}");
        assert_eq!(gave_each[1], gave_each[0]);
    }

    /// A window operator whose records are combined ahead of its state
    /// gives, call by call, exactly what one without gives — records out
    /// of order, late ones, windows that fire again within their lateness,
    /// panes of sliding windows, times in no window, snapshots (and
    /// restores from them) and a full combiner at any point — for every
    /// built-in function.
    #[test]
    fn combined_records_fire_what_the_window_engine_alone_fires() {
        use weir_model::builtin::AggregateFunction as F;
        use weir_model::graph::WindowAssigner as A;
        let assigners = [
            A::Tumbling { size_ms: 10 },
            A::Sliding {
                size_ms: 20,
                slide_ms: 5,
            },
            // Times between windows belong to none.
            A::Sliding {
                size_ms: 10,
                slide_ms: 15,
            },
        ];
        let functions = [
            (F::Count, None),
            (F::Count, Some("/v")),
            (F::Sum, Some("/v")),
            (F::Min, Some("/v")),
            (F::Max, Some("/v")),
            (F::Avg, Some("/v")),
        ];
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let dir = tempfile::tempdir().unwrap();
        let mut snapshots = 0;
        let mut fired = 0;
        for assigner in &assigners {
            for lateness in [0, 7, 100] {
                for (function, field) in functions {
                    for limit in [usize::MAX, 3, 1] {
                        let backend = weir_state::MemoryStateBackend::with_key_groups(16);
                        let make = |combined, backend| {
                            aggregating(
                                assigner.clone(),
                                lateness,
                                function,
                                field,
                                combined,
                                backend,
                            )
                        };
                        let mut alone = make(None, weir_state::MemoryStateBackend::new());
                        let mut combined = make(Some(limit), backend);
                        let mut wm: Option<i64> = None;
                        let mut base = 0i64;
                        for step in 0..300 {
                            let what = format!(
                                "{assigner:?}, lateness {lateness}, {function:?} of {field:?}, limit {limit}, step {step}"
                            );
                            match next(10) {
                                0..=5 => {
                                    let n = 1 + next(12) as usize;
                                    let batch: Vec<Record> = (0..n)
                                        .map(|_| {
                                            // Keys of several lengths.
                                            let key = ["a", "bb", "c", "dddddddd", "eee"]
                                                [next(5) as usize];
                                            let v = next(101) as i64 - 50;
                                            let value = match next(8) {
                                                0 => "{}".to_owned(),
                                                1 => "{\"v\":null}".to_owned(),
                                                // Floats whose sums are exact in
                                                // any order.
                                                2 => format!("{{\"v\":{}.5}}", v),
                                                _ => format!("{{\"v\":{v}}}"),
                                            };
                                            Record {
                                                key: Some(Bytes::copy_from_slice(key.as_bytes())),
                                                value: Bytes::from(value),
                                                timestamp: Some(base + next(30) as i64 - 20),
                                            }
                                        })
                                        .collect();
                                    base += next(4) as i64;
                                    // At times the batch brings a watermark
                                    // that no `on_watermark` announced yet.
                                    if next(6) == 0 {
                                        let to = base - next(15) as i64;
                                        wm = Some(wm.map_or(to, |wm| wm.max(to)));
                                    }
                                    let ctx = BatchContext {
                                        watermark: wm,
                                        processing_time: 0,
                                    };
                                    let list = next(4) == 0;
                                    let packed = |b: &[Record]| match list {
                                        true => Records::List(b.to_vec()),
                                        false => Records::Packed(
                                            weir_model::PackedRecords::from_records(b).unwrap(),
                                        ),
                                    };
                                    let a =
                                        gave(alone.process_records(packed(&batch), ctx).unwrap());
                                    let c = gave(
                                        combined.process_records(packed(&batch), ctx).unwrap(),
                                    );
                                    assert_eq!(c, a, "{what}");
                                    fired += a.0.len();
                                }
                                6..=8 => {
                                    let to = base - next(15) as i64;
                                    if wm.is_some_and(|wm| to <= wm) {
                                        continue;
                                    }
                                    wm = Some(to);
                                    let a = watermark(&mut alone, to);
                                    assert_eq!(watermark(&mut combined, to), a, "{what}");
                                    fired += a.0.len();
                                }
                                _ => {
                                    // A snapshot, and at times a restore from it.
                                    snapshots += 1;
                                    let into = dir.path().join(snapshots.to_string());
                                    std::fs::create_dir(&into).unwrap();
                                    combined.snapshot(&into, false).unwrap();
                                    if next(2) == 0 {
                                        let file = into.join(weir_state::canonical::FILE);
                                        let restored = weir_state::MemoryStateBackend::restore(
                                            &[file],
                                            16,
                                            0..16,
                                        )
                                        .unwrap();
                                        combined = make(Some(limit), restored);
                                        // A restarted job's watermark starts
                                        // again from none, at times.
                                        if next(2) == 0 {
                                            wm = None;
                                        }
                                    }
                                }
                            }
                        }
                        let a = watermark(&mut alone, i64::MAX);
                        let what = format!(
                            "{assigner:?}, lateness {lateness}, {function:?} of {field:?}, limit {limit}, the end"
                        );
                        assert_eq!(watermark(&mut combined, i64::MAX), a, "{what}");
                        fired += a.0.len();
                    }
                }
            }
        }
        // The streams made windows fire, and snapshots were taken.
        assert!(fired > 10_000, "{fired}");
        assert!(snapshots > 100, "{snapshots}");
    }
}
