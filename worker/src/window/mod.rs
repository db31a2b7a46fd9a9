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
pub(crate) use guest::GuestFunction;

use crate::operators::StreamOperator;

/// The side output of records later than their windows' allowed lateness.
pub const LATE: &str = "late";

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

/// Timers of `domain` due up to `upto`, fired in batches of this many.
const TIMER_BATCH: usize = 1024;

/// Windows fired per call on a watermark, at most (about): the rest fire
/// in the next calls, each share routed downstream before the next fires.
const FIRE_SHARE: usize = 8 * TIMER_BATCH;

/// The state name of a key's open windows.
const WINDOWS_STATE: &str = "weir.windows";

impl WindowOperator {
    /// A window operator for `spec` (whose contents the function decides)
    /// with its keyed state in `backend`.
    pub(crate) fn new(
        spec: &weir_model::graph::WindowSpec,
        function: Box<dyn WindowFunction>,
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
        Ok(WindowOperator {
            spec,
            function,
            backend,
            state,
            cache: SlotCache::default(),
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
        BackendStore {
            domain: self.domain(),
            backend: &mut *self.backend,
            state: self.state,
            cache: &mut self.cache,
            timers: Vec::new(),
            loaded: Vec::new(),
        }
    }

    /// Fire the due timers of the operator's clock up to `upto`, about
    /// `share` of them at most.
    fn fire_due(
        &mut self,
        upto: i64,
        share: usize,
        ctx: BatchContext,
    ) -> Result<Output, OperatorError> {
        let domain = self.domain();
        let mut all = Output::default();
        let mut taken = 0;
        loop {
            if taken >= share {
                return Ok(all);
            }
            let due = self
                .backend
                .take_due_timers(domain, upto, TIMER_BATCH)
                .map_err(|e| self.state_error(e))?;
            if due.is_empty() {
                return Ok(all);
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
            let key = r.key.ok_or_else(|| {
                input_error("a record reached a window operator without its key".into())
            })?;
            let t = match self.spec.time {
                Time::Event => r.timestamp.ok_or_else(|| {
                    input_error("an event-time window needs timestamps: give the source a `timestamp` or a `timestamp-assigner`".into())
                })?,
                Time::Processing => ctx.processing_time,
            };
            pairs.push((key, t));
        }
        let spec = self.spec;
        let mut store = BackendStore {
            domain: self.domain(),
            backend: &mut *self.backend,
            state: self.state,
            cache: &mut self.cache,
            timers: Vec::new(),
            loaded: Vec::new(),
        };
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
        let mut out = Output::default();
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
        match ctx.watermark {
            Some(wm) if self.more_due(wm) => self.fire_due(wm, FIRE_SHARE, ctx),
            _ => Ok(Output::default()),
        }
    }

    fn more_due(&self, watermark: i64) -> bool {
        self.spec.time == Time::Event
            && self
                .backend
                .next_timer(TimeDomain::EventTime)
                .is_some_and(|t| t <= watermark)
    }

    fn on_processing_time(&mut self, ctx: BatchContext) -> Result<Output, OperatorError> {
        if self.spec.time != Time::Processing {
            return Ok(Output::default());
        }
        self.fire_due(ctx.processing_time, usize::MAX, ctx)
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

impl BackendStore<'_> {
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
        use weir_model::graph::{TimeCharacteristic, WindowSpec};
        let ident = TaskIdent {
            job: "job".into(),
            operator: "sums".into(),
            subtask: 0,
        };
        let sum = BuiltinAggregate::new(
            AggregateFunction::Sum,
            crate::builtin::aggregate::ValueOf::new(
                AggregateFunction::Sum,
                Some("/v".into()),
                weir_model::format::Format::default(),
            ),
            false,
            ident.clone(),
            crate::builtin::aggregate::Results::new(
                AggregateFunction::Sum,
                crate::builtin::aggregate::KeyText::Raw,
                None,
                &weir_model::format::Format::default(),
                true,
            )
            .unwrap(),
        );
        let spec = WindowSpec {
            assigner,
            time: TimeCharacteristic::Event,
            allowed_lateness_ms: 100,
            keeps: None,
        };
        let backend = Box::new(weir_state::MemoryStateBackend::new());
        WindowOperator::new(&spec, Box::new(sum), backend, ident).unwrap()
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
        let mut store = BackendStore {
            domain: TimeDomain::EventTime,
            backend: &mut backend,
            state,
            cache: &mut cache,
            timers: Vec::new(),
            loaded: Vec::new(),
        };
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
}
