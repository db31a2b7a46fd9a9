//! The checkpoint coordinator of one running attempt of a job (Flink's
//! `CheckpointCoordinator`): triggers checkpoints on the job's interval,
//! collects the subtasks' acknowledgements, completes a checkpoint when all
//! have arrived (its metadata written, its shared files registered, older
//! ones discarded, every worker told), and aborts it when it times out or
//! a subtask declines, deleting what it uploaded.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use tokio::sync::{Mutex, Notify};
use weir_model::checkpoint::{CheckpointMetadata, StateFile, SubtaskState, TaskStateHandle};
use weir_model::fault_tolerance::CheckpointConfig;
use weir_model::{Barrier, CheckpointKind};

use super::completed::CompletedCheckpointStore;
use super::pending::PendingCheckpoint;
use super::shared_registry::SharedStateRegistry;
use super::stats::{CheckpointStats, CheckpointStatus, CheckpointSummary, VertexCheckpointStats};

/// How the coordinator reaches the job's tasks.
#[tonic::async_trait]
pub trait CheckpointGateway: Send + Sync {
    /// Inject `barrier` at every source subtask of the attempt. Returns
    /// how many were told and how many had finished already.
    async fn trigger(&self, barrier: Barrier) -> anyhow::Result<(u32, u32)>;
    /// Checkpoint `id` completed: sinks may commit.
    async fn notify_complete(&self, id: u64);
    /// As [`CheckpointGateway::notify_complete`], returning once every
    /// worker was told (or a bounded wait passed).
    async fn notify_complete_and_wait(&self, id: u64) {
        self.notify_complete(id).await;
    }
}

/// The job's shape, as checkpoints see it.
#[derive(Debug, Clone)]
pub struct Topology {
    /// The job's id (the storage's folder).
    pub job: String,
    /// The running attempt.
    pub attempt: u32,
    /// Per task (chain): its vertices (id, name), and its parallelism.
    pub tasks: Vec<(Vec<(usize, String)>, u32)>,
    /// What the vertex ids stand for, kept in every checkpoint's metadata.
    pub layout: Option<weir_model::checkpoint::CheckpointLayout>,
}

impl Topology {
    fn subtasks(&self) -> impl Iterator<Item = (usize, u32)> + '_ {
        self.tasks
            .iter()
            .enumerate()
            .flat_map(|(t, (_, p))| (0..*p).map(move |s| (t, s)))
    }

    fn total(&self) -> u32 {
        self.tasks.iter().map(|(_, p)| p).sum()
    }
}

struct Inner {
    next_id: u64,
    pending: std::collections::BTreeMap<u64, PendingCheckpoint>,
    completed: CompletedCheckpointStore,
    registry: SharedStateRegistry,
    /// When the last checkpoint completed (for the minimum pause).
    last_completed: Option<Instant>,
    /// Subtasks whose input had ended when they took their part of a
    /// completed checkpoint (Flink's FLIP-147): their state can no longer
    /// change, so later checkpoints do not wait for them (they may have
    /// ended) and hold this handle for them.
    finished: BTreeMap<(usize, u32), TaskStateHandle>,
    /// Who waits for each savepoint in flight, and whether it stops the
    /// job.
    savepoints: BTreeMap<u64, (SavepointWaiter, bool)>,
    /// The savepoint that stops the job, once triggered (until it fails):
    /// nothing is triggered after it — a checkpoint's sinks would commit
    /// output that the job started from the savepoint writes again.
    stop_at: Option<u64>,
}

/// Told how a savepoint ended: its metadata, or why it failed.
pub type SavepointWaiter = tokio::sync::oneshot::Sender<Result<CheckpointMetadata, String>>;

/// What a finished subtask's handle holds in the checkpoints after its
/// end: its sources' final positions and its sinks' final pre-commits.
fn finished_handle(state: &TaskStateHandle) -> TaskStateHandle {
    TaskStateHandle {
        sources: state.sources.clone(),
        sinks: state.sinks.clone(),
        finished: true,
        ..TaskStateHandle::default()
    }
}

/// Checkpoints of one attempt of a job.
pub struct CheckpointCoordinator {
    config: CheckpointConfig,
    topology: Topology,
    storage: Arc<dyn ObjectStore>,
    gateway: Arc<dyn CheckpointGateway>,
    inner: Mutex<Inner>,
    /// What the API shows.
    pub stats: Arc<std::sync::Mutex<CheckpointStats>>,
    stop: Notify,
    stopped: std::sync::atomic::AtomicBool,
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

impl CheckpointCoordinator {
    /// A coordinator for `topology`, writing to `storage`; its trigger loop
    /// runs until [`CheckpointCoordinator::stop`]. Checkpoint ids go on
    /// from `first_id`; `restored` holds the checkpoints retained before
    /// (the one restored from last).
    pub fn start(
        config: CheckpointConfig,
        topology: Topology,
        storage: Arc<dyn ObjectStore>,
        gateway: Arc<dyn CheckpointGateway>,
        stats: Arc<std::sync::Mutex<CheckpointStats>>,
        first_id: u64,
        restored: Vec<CheckpointMetadata>,
    ) -> Arc<CheckpointCoordinator> {
        let mut completed = CompletedCheckpointStore::new(config.retained as usize);
        let mut registry = SharedStateRegistry::default();
        // Subtasks that had finished in the checkpoint restored start
        // finished again.
        let finished = restored
            .last()
            .map(|c| {
                c.subtasks
                    .iter()
                    .filter(|s| s.state.finished)
                    .map(|s| ((s.task, s.subtask), finished_handle(&s.state)))
                    .collect()
            })
            .unwrap_or_default();
        for c in restored {
            registry.register(&c);
            // Retained ones beyond the limit were discarded when written.
            let _ = completed.add(c);
        }
        stats.lock().unwrap_or_else(|p| p.into_inner()).config = Some(config.clone());
        let me = Arc::new(CheckpointCoordinator {
            inner: Mutex::new(Inner {
                next_id: first_id.max(1),
                pending: Default::default(),
                completed,
                registry,
                last_completed: None,
                finished,
                savepoints: BTreeMap::new(),
                stop_at: None,
            }),
            config,
            topology,
            storage,
            gateway,
            stats,
            stop: Notify::new(),
            stopped: Default::default(),
        });
        let looping = me.clone();
        tokio::spawn(async move { looping.run().await });
        me
    }

    /// Stop triggering; checkpoints in flight are aborted.
    pub async fn stop(&self, why: &str) {
        self.stopped
            .store(true, std::sync::atomic::Ordering::Relaxed);
        self.stop.notify_waiters();
        let ids: Vec<u64> = self.inner.lock().await.pending.keys().copied().collect();
        for id in ids {
            self.abort(id, why).await;
        }
    }

    fn is_stopped(&self) -> bool {
        self.stopped.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Whether a savepoint that stops the job completed: the job must end,
    /// never restart from it.
    pub async fn stop_completed(&self) -> bool {
        let inner = self.inner.lock().await;
        inner
            .stop_at
            .is_some_and(|s| inner.completed.all().any(|c| c.id == s))
    }

    /// The newest completed checkpoint.
    pub async fn latest(&self) -> Option<CheckpointMetadata> {
        self.inner.lock().await.completed.latest().cloned()
    }

    /// Every retained checkpoint, oldest first.
    pub async fn retained(&self) -> Vec<CheckpointMetadata> {
        self.inner.lock().await.completed.all().cloned().collect()
    }

    async fn run(self: Arc<Self>) {
        let interval = Duration::from_millis(self.config.interval_ms);
        let mut next = Instant::now() + interval;
        loop {
            let wait = next
                .saturating_duration_since(Instant::now())
                .min(Duration::from_millis(100));
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = self.stop.notified() => return,
            }
            if self.is_stopped() {
                return;
            }
            self.abort_expired().await;
            if Instant::now() < next {
                continue;
            }
            let ready = {
                let inner = self.inner.lock().await;
                let paused = inner
                    .last_completed
                    .is_some_and(|t| t.elapsed() < Duration::from_millis(self.config.min_pause_ms));
                inner.pending.len() < self.config.max_concurrent as usize
                    && !paused
                    && inner.stop_at.is_none()
            };
            if ready {
                self.trigger().await;
                next = Instant::now() + interval;
            } else {
                next = Instant::now() + Duration::from_millis(10);
            }
        }
    }

    async fn abort_expired(&self) {
        let timeout = Duration::from_millis(self.config.timeout_ms);
        let expired: Vec<(u64, String)> = {
            let inner = self.inner.lock().await;
            inner
                .pending
                .iter()
                .filter(|(_, p)| p.started.elapsed() > timeout)
                .map(|(id, p)| {
                    let missing: Vec<String> = p
                        .missing
                        .iter()
                        .take(5)
                        .map(|(t, s)| format!("{}[{s}]", self.task_name(*t)))
                        .collect();
                    (
                        *id,
                        format!(
                            "timed out after {} ms; waiting for {} subtask(s): {}",
                            self.config.timeout_ms,
                            p.missing.len(),
                            missing.join(", ")
                        ),
                    )
                })
                .collect()
        };
        for (id, why) in expired {
            self.abort(id, &why).await;
        }
    }

    fn task_name(&self, task: usize) -> String {
        self.topology
            .tasks
            .get(task)
            .map(|(vertices, _)| {
                let names: Vec<&str> = vertices.iter().map(|(_, n)| n.as_str()).collect();
                names.join("+")
            })
            .unwrap_or_else(|| format!("task {task}"))
    }

    /// Trigger a checkpoint now. It waits for every subtask but those
    /// that finished in an earlier completed checkpoint; the barrier still
    /// reaches every source subtask that runs, finished ones included (a
    /// finished subtask ends once a checkpoint after its end completes).
    pub async fn trigger(&self) -> Option<u64> {
        self.trigger_kind(CheckpointKind::Checkpoint, None).await
    }

    /// Trigger a savepoint now (whatever the interval and the checkpoints
    /// in flight): `waiter` is told its metadata once it completes, or why
    /// it failed. A savepoint taken to `stop` the job is the job's last
    /// checkpoint: it completes as any checkpoint does (its sinks commit)
    /// and no checkpoint is triggered after it, unless it fails. Any other
    /// savepoint changes nothing of the job's checkpoints: it does not
    /// subsume them, nor is it restored after a failure, and its sinks'
    /// pre-commits are committed with the next checkpoint.
    pub async fn trigger_savepoint(&self, stop: bool, drain: bool, waiter: SavepointWaiter) {
        if self.is_stopped() {
            let _ = waiter.send(Err("the job's attempt is ending".into()));
            return;
        }
        let kind = match (stop, drain) {
            (true, true) => CheckpointKind::DrainSavepoint,
            (true, false) => CheckpointKind::StopSavepoint,
            _ => CheckpointKind::Savepoint,
        };
        self.trigger_kind(kind, Some((waiter, stop))).await;
    }

    async fn trigger_kind(
        &self,
        kind: CheckpointKind,
        waiter: Option<(SavepointWaiter, bool)>,
    ) -> Option<u64> {
        let barrier = {
            let mut inner = self.inner.lock().await;
            if let Some(stop) = inner.stop_at {
                // The job is being stopped: nothing after its savepoint.
                if let Some((w, _)) = waiter {
                    let _ = w.send(Err(format!(
                        "the job is being stopped with savepoint {stop}"
                    )));
                }
                return None;
            }
            let id = inner.next_id;
            inner.next_id += 1;
            if matches!(waiter, Some((_, true))) {
                inner.stop_at = Some(id);
            }
            let barrier = Barrier {
                id,
                timestamp_ms: now_ms(),
                kind,
                mode: self.config.mode,
                // A savepoint is always aligned: it holds no records in
                // flight (it may restore into another graph).
                aligned_timeout_ms: if kind.is_savepoint() {
                    None
                } else {
                    self.config.aligned_timeout()
                },
            };
            if let Some(w) = waiter {
                inner.savepoints.insert(id, w);
            }
            let mut pending = PendingCheckpoint::new(
                barrier,
                self.topology
                    .subtasks()
                    .filter(|k| !inner.finished.contains_key(k)),
            );
            for (&(task, subtask), state) in &inner.finished {
                pending.stand_in(task, subtask, state.clone());
            }
            inner.pending.insert(id, pending);
            barrier
        };
        {
            let mut stats = self.stats.lock().unwrap_or_else(|p| p.into_inner());
            stats.counts.triggered += 1;
            stats.counts.in_progress += 1;
            stats.record(self.summary(&barrier, None, CheckpointStatus::InProgress, None));
        }
        // Source subtasks that ended are not waited for: each took part in
        // a completed checkpoint after its end before it ended, and is
        // among the finished ones (or its attempt is ending anyway).
        match self.gateway.trigger(barrier).await {
            Ok(_) => {
                // Every subtask may have finished: nothing to wait for.
                self.complete_ready().await;
                Some(barrier.id)
            }
            Err(e) => {
                self.abort(barrier.id, &format!("triggering: {e:#}")).await;
                None
            }
        }
    }

    fn summary(
        &self,
        barrier: &Barrier,
        pending: Option<&PendingCheckpoint>,
        status: CheckpointStatus,
        failure: Option<String>,
    ) -> CheckpointSummary {
        let mut vertices = Vec::new();
        let (mut state_bytes, mut uploaded_bytes, mut acknowledged) = (0, 0, 0u32);
        let (mut inflight_bytes, mut unaligned) = (0, false);
        for (t, (chain, p)) in self.topology.tasks.iter().enumerate() {
            let acks: Vec<&TaskStateHandle> = pending
                .map(|pc| {
                    pc.acks
                        .iter()
                        .filter(|((task, _), _)| *task == t)
                        .map(|(_, h)| h)
                        .collect()
                })
                .unwrap_or_default();
            acknowledged += acks.len() as u32;
            let max = |f: fn(&TaskStateHandle) -> u64| acks.iter().map(|h| f(h)).max().unwrap_or(0);
            let first = vertices.len();
            for (_, name) in chain {
                vertices.push(VertexCheckpointStats {
                    name: name.clone(),
                    acknowledged: acks.len() as u32,
                    total: *p,
                    alignment_ms: max(|h| h.alignment_ms),
                    sync_ms: max(|h| h.sync_ms),
                    async_ms: max(|h| h.async_ms),
                    state_bytes: 0,
                });
            }
            for h in &acks {
                state_bytes += h.state_bytes;
                uploaded_bytes += h.uploaded_bytes;
                inflight_bytes += h.inflight_bytes;
                unaligned |= h.inflight.is_some();
                for o in &h.operators {
                    let bytes: u64 = o.files.iter().map(|f| f.size).sum();
                    if let Some(i) = chain.iter().position(|(id, _)| *id == o.vertex) {
                        vertices[first + i].state_bytes += bytes;
                    }
                }
            }
        }
        let duration_ms = match status {
            CheckpointStatus::InProgress => None,
            _ => Some((now_ms() - barrier.timestamp_ms).max(0) as u64),
        };
        CheckpointSummary {
            id: barrier.id,
            status,
            triggered_at_ms: barrier.timestamp_ms,
            duration_ms,
            state_bytes,
            uploaded_bytes,
            inflight_bytes,
            unaligned,
            acknowledged,
            total: self.topology.total(),
            vertices,
            failure,
        }
    }

    /// Subtask `(task, subtask)` acknowledged checkpoint `id`.
    pub async fn acknowledge(&self, id: u64, task: usize, subtask: u32, state: TaskStateHandle) {
        let mut inner = self.inner.lock().await;
        let Some(pending) = inner.pending.get_mut(&id) else {
            // Late: the checkpoint was aborted (or is unknown). What the
            // subtask uploaded for it alone goes.
            let unused = Self::unshared(&inner.registry, &state);
            drop(inner);
            self.delete(unused).await;
            return;
        };
        // A finished subtask's acknowledgement is not waited for; it may
        // come all the same, and changes nothing.
        if !pending.acknowledge(task, subtask, state) {
            return;
        }
        if !pending.is_complete() {
            let s = self.summary(
                &pending.barrier,
                Some(pending),
                CheckpointStatus::InProgress,
                None,
            );
            drop(inner);
            self.stats
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .record(s);
            return;
        }
        drop(inner);
        self.complete_ready().await;
    }

    /// Complete every pending checkpoint that has all it waits for, oldest
    /// first.
    async fn complete_ready(&self) {
        loop {
            let ready = {
                let inner = self.inner.lock().await;
                inner
                    .pending
                    .iter()
                    .find(|(_, p)| p.is_complete())
                    .map(|(id, _)| *id)
            };
            match ready {
                Some(id) => self.complete(id).await,
                None => return,
            }
        }
    }

    /// Complete checkpoint `id`, whose every acknowledgement is in.
    async fn complete(&self, id: u64) {
        let mut inner = self.inner.lock().await;
        let Some(pending) = inner.pending.remove(&id) else {
            return;
        };
        let metadata = CheckpointMetadata {
            job: self.topology.job.clone(),
            id,
            kind: pending.barrier.kind,
            mode: pending.barrier.mode,
            attempt: self.topology.attempt,
            triggered_at_ms: pending.barrier.timestamp_ms,
            completed_at_ms: now_ms(),
            subtasks: pending
                .acks
                .iter()
                .map(|(&(task, subtask), state)| SubtaskState {
                    task,
                    subtask,
                    state: state.clone(),
                })
                .collect(),
            predecessor: None,
            layout: self.topology.layout.clone(),
        };
        let waiter = inner.savepoints.remove(&id);
        if let Some((waiter, false)) = waiter {
            // An intermediate savepoint: nothing of the job's checkpoints
            // changes; its files stay until the savepoint is written out.
            drop(inner);
            self.record_completed(&pending);
            tracing::info!(job = %self.topology.job, checkpoint = id, "savepoint completed");
            let _ = waiter.send(Ok(metadata));
            return;
        }
        let stop_waiter = waiter.map(|(w, _)| w);
        // Written beside its place and then renamed into it: a write that
        // fails half-way (a store that is not atomic) never leaves a torn
        // `_metadata`, which a restarted coordinator would take for a
        // completed checkpoint it cannot read.
        let path = CheckpointMetadata::path(&metadata.job, id);
        let writing = format!("{path}.inprogress");
        let written = async {
            let bytes = serde_json::to_vec_pretty(&metadata)?;
            let at = ObjectPath::from(writing.as_str());
            self.storage.put(&at, PutPayload::from(bytes)).await?;
            self.storage
                .rename(&at, &ObjectPath::from(path.as_str()))
                .await?;
            anyhow::Ok(())
        }
        .await;
        if let Err(e) = written {
            let mut unused: Vec<String> = pending
                .acks
                .values()
                .flat_map(|s| Self::unshared(&inner.registry, s))
                .collect();
            unused.push(writing);
            drop(inner);
            self.delete(unused).await;
            let why = format!("writing its metadata: {e:#}");
            self.failed(&pending, why.clone());
            if let Some(w) = stop_waiter {
                // The job goes on taking checkpoints (unless it was drained:
                // then it fails over, and no checkpoint may come after).
                if pending.barrier.kind != CheckpointKind::DrainSavepoint {
                    self.resume_after(id).await;
                }
                let _ = w.send(Err(why));
            }
            return;
        }
        inner.registry.register(&metadata);
        // Subtasks that took their part finished are not waited for by
        // later checkpoints: their state stays as this one holds it.
        let newly: Vec<((usize, u32), TaskStateHandle)> = metadata
            .subtasks
            .iter()
            .filter(|s| s.state.finished && !inner.finished.contains_key(&(s.task, s.subtask)))
            .map(|s| ((s.task, s.subtask), finished_handle(&s.state)))
            .collect();
        for (key, state) in newly {
            for p in inner.pending.range_mut(id + 1..).map(|(_, p)| p) {
                p.stand_in(key.0, key.1, state.clone());
            }
            inner.finished.insert(key, state);
        }
        let subsumed = inner.completed.add(metadata.clone());
        let mut unused = Vec::new();
        for old in &subsumed {
            unused.extend(old.files().filter(|f| !f.shared).map(|f| f.path.clone()));
            unused.extend(inner.registry.release(old));
            unused.push(CheckpointMetadata::path(&old.job, old.id));
        }
        inner.last_completed = Some(Instant::now());
        // Completing a checkpoint subsumes the older ones still pending
        // (savepoints are waited for: someone asked for each). They leave
        // now, under the same lock: one completing later would be retained
        // after this one and subsume it — deleting its files, a stop's
        // savepoint's among them, while it is written out.
        let older: Vec<u64> = inner
            .pending
            .range(..id)
            .filter(|(_, p)| !p.barrier.kind.is_savepoint())
            .map(|(k, _)| *k)
            .collect();
        let older: Vec<PendingCheckpoint> = older
            .into_iter()
            .filter_map(|old| inner.pending.remove(&old))
            .collect();
        drop(inner);
        self.record_completed(&pending);
        tracing::info!(job = %self.topology.job, checkpoint = id, "checkpoint completed");
        // Given up before the workers are told (whatever happens to this
        // call meanwhile, their files go).
        for old in older {
            self.discard(old, &format!("subsumed by checkpoint {id}"))
                .await;
        }
        if let Some(w) = stop_waiter {
            // The job ends once its workers know: they commit what it holds
            // before they are canceled.
            self.gateway.notify_complete_and_wait(id).await;
            let _ = w.send(Ok(metadata));
        } else {
            self.gateway.notify_complete(id).await;
        }
        self.delete(unused).await;
    }

    /// The stop savepoint `id` failed: checkpoints go on.
    async fn resume_after(&self, id: u64) {
        let mut inner = self.inner.lock().await;
        if inner.stop_at == Some(id) {
            inner.stop_at = None;
        }
    }

    fn record_completed(&self, pending: &PendingCheckpoint) {
        let mut stats = self.stats.lock().unwrap_or_else(|p| p.into_inner());
        stats.counts.in_progress = stats.counts.in_progress.saturating_sub(1);
        stats.counts.completed += 1;
        stats.record(self.summary(
            &pending.barrier,
            Some(pending),
            CheckpointStatus::Completed,
            None,
        ));
    }

    /// A subtask could not take its part of checkpoint `id`.
    pub async fn decline(&self, id: u64, reason: &str) {
        self.abort(id, &format!("declined: {reason}")).await;
    }

    async fn abort(&self, id: u64, why: &str) {
        let pending = self.inner.lock().await.pending.remove(&id);
        if let Some(pending) = pending {
            self.discard(pending, why).await;
        }
    }

    /// Checkpoint `pending`, taken out of the pending ones, is given up:
    /// what it uploaded alone goes, and whoever waits for it is told.
    async fn discard(&self, pending: PendingCheckpoint, why: &str) {
        let id = pending.barrier.id;
        let mut inner = self.inner.lock().await;
        let unused: Vec<String> = pending
            .acks
            .values()
            .flat_map(|s| Self::unshared(&inner.registry, s))
            .collect();
        let waiter = inner.savepoints.remove(&id);
        drop(inner);
        if let Some((w, stop)) = waiter {
            if stop && pending.barrier.kind != CheckpointKind::DrainSavepoint {
                // The job goes on taking checkpoints (a drained one fails
                // over instead: no checkpoint may come after its maximal
                // watermark).
                self.resume_after(id).await;
            }
            let _ = w.send(Err(why.to_owned()));
        }
        tracing::warn!(job = %self.topology.job, checkpoint = id, "checkpoint aborted: {why}");
        self.failed(&pending, why.to_owned());
        self.delete(unused).await;
    }

    fn failed(&self, pending: &PendingCheckpoint, why: String) {
        let mut stats = self.stats.lock().unwrap_or_else(|p| p.into_inner());
        stats.counts.in_progress = stats.counts.in_progress.saturating_sub(1);
        stats.counts.failed += 1;
        stats.record(self.summary(
            &pending.barrier,
            Some(pending),
            CheckpointStatus::Failed,
            Some(why),
        ));
    }

    /// The files of `state` that no retained checkpoint holds.
    fn unshared(registry: &SharedStateRegistry, state: &TaskStateHandle) -> Vec<String> {
        state
            .files()
            .filter(|f: &&StateFile| !(f.shared && registry.holds(&f.path)))
            .map(|f| f.path.clone())
            .collect()
    }

    async fn delete(&self, paths: Vec<String>) {
        for p in paths {
            match self.storage.delete(&ObjectPath::from(p.as_str())).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => tracing::warn!("cannot delete checkpoint file {p}: {e}"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_model::CheckpointMode;

    /// Records what the coordinator asks of the workers.
    #[derive(Default)]
    struct Workers {
        triggered: std::sync::Mutex<Vec<Barrier>>,
        told: std::sync::Mutex<Vec<u64>>,
        /// While set, a stop's completion waits for it to be notified.
        held: std::sync::Mutex<Option<Arc<Notify>>>,
    }

    #[tonic::async_trait]
    impl CheckpointGateway for Workers {
        async fn trigger(&self, barrier: Barrier) -> anyhow::Result<(u32, u32)> {
            self.triggered.lock().unwrap().push(barrier);
            Ok((1, 0))
        }

        async fn notify_complete(&self, id: u64) {
            self.told.lock().unwrap().push(id);
        }

        async fn notify_complete_and_wait(&self, id: u64) {
            self.notify_complete(id).await;
            let held = self.held.lock().unwrap().clone();
            if let Some(held) = held {
                held.notified().await;
            }
        }
    }

    fn coordinator(dir: &std::path::Path) -> (Arc<CheckpointCoordinator>, Arc<Workers>) {
        let url = weir_model::storage::file_url(dir).unwrap();
        let workers = Arc::new(Workers::default());
        let config = CheckpointConfig {
            interval_ms: 20,
            mode: CheckpointMode::ExactlyOnce,
            timeout_ms: 60_000,
            min_pause_ms: 0,
            max_concurrent: 10,
            retained: 2,
            incremental: true,
            unaligned: false,
            aligned_timeout_ms: 0,
        };
        let topology = Topology {
            job: "job".into(),
            attempt: 0,
            tasks: vec![(vec![(0, "v".into())], 1)],
            layout: None,
        };
        let c = CheckpointCoordinator::start(
            config,
            topology,
            weir_model::storage::open(&url).unwrap(),
            workers.clone(),
            Default::default(),
            1,
            Vec::new(),
        );
        (c, workers)
    }

    /// Checkpoints triggered after barrier `id`.
    fn after(workers: &Workers, id: u64) -> usize {
        let t = workers.triggered.lock().unwrap();
        t.iter().filter(|b| b.id > id).count()
    }

    fn last_savepoint(workers: &Workers) -> Barrier {
        *workers
            .triggered
            .lock()
            .unwrap()
            .iter()
            .rev()
            .find(|b| b.kind.is_savepoint())
            .unwrap()
    }

    #[tokio::test]
    async fn a_stop_savepoint_is_the_last_checkpoint_unless_it_fails() {
        let dir = tempfile::tempdir().unwrap();
        let (c, workers) = coordinator(dir.path());
        let pause = || tokio::time::sleep(Duration::from_millis(150));
        pause().await;
        // A stop: nothing is triggered after it while it is pending, and a
        // second stop is refused.
        let (tell, told) = tokio::sync::oneshot::channel();
        c.trigger_savepoint(true, false, tell).await;
        let stop = last_savepoint(&workers);
        assert_eq!(stop.kind, CheckpointKind::StopSavepoint);
        let (tell2, told2) = tokio::sync::oneshot::channel();
        c.trigger_savepoint(true, false, tell2).await;
        assert!(told2.await.unwrap().is_err(), "one stop at a time");
        pause().await;
        assert_eq!(after(&workers, stop.id), 0, "nothing after a stop");
        // It fails: checkpoints go on.
        c.decline(stop.id, "a subtask could not").await;
        assert!(told.await.unwrap().is_err());
        pause().await;
        assert!(
            after(&workers, stop.id) > 0,
            "checkpoints go on after a failed stop"
        );
        // Another one completes: the job's last checkpoint, its workers told
        // before the waiter is answered; nothing after it.
        let (tell, told) = tokio::sync::oneshot::channel();
        c.trigger_savepoint(true, false, tell).await;
        let stop = last_savepoint(&workers);
        c.acknowledge(stop.id, 0, 0, TaskStateHandle::default())
            .await;
        let done = told.await.unwrap().unwrap();
        assert_eq!(done.id, stop.id);
        assert!(workers.told.lock().unwrap().contains(&stop.id));
        assert!(c.stop_completed().await);
        pause().await;
        assert_eq!(
            after(&workers, stop.id),
            0,
            "nothing after a completed stop"
        );
        c.stop("done").await;
    }

    #[tokio::test]
    async fn a_failed_drain_takes_no_checkpoint_after_it() {
        let dir = tempfile::tempdir().unwrap();
        let (c, workers) = coordinator(dir.path());
        let (tell, told) = tokio::sync::oneshot::channel();
        c.trigger_savepoint(true, true, tell).await;
        let drain = last_savepoint(&workers);
        assert_eq!(drain.kind, CheckpointKind::DrainSavepoint);
        c.decline(drain.id, "a subtask could not").await;
        assert!(told.await.unwrap().is_err());
        tokio::time::sleep(Duration::from_millis(150)).await;
        // Its maximal watermark fired the windows: the job fails over
        // rather than checkpoint what came of it.
        assert_eq!(after(&workers, drain.id), 0);
        c.stop("done").await;
    }

    #[tokio::test]
    async fn an_older_checkpoint_never_completes_after_a_stop_savepoint() {
        let dir = tempfile::tempdir().unwrap();
        let (c, workers) = coordinator(dir.path());
        tokio::time::sleep(Duration::from_millis(150)).await;
        let held = Arc::new(Notify::new());
        *workers.held.lock().unwrap() = Some(held.clone());
        let (tell, told) = tokio::sync::oneshot::channel();
        c.trigger_savepoint(true, false, tell).await;
        let stop = last_savepoint(&workers);
        let older = workers
            .triggered
            .lock()
            .unwrap()
            .iter()
            .filter(|b| b.id < stop.id)
            .map(|b| b.id)
            .max()
            .expect("checkpoints pending before the stop");
        // The stop completes; while its workers are told, the older
        // checkpoint's last acknowledgement comes.
        let completing = {
            let c = c.clone();
            tokio::spawn(async move {
                c.acknowledge(stop.id, 0, 0, TaskStateHandle::default())
                    .await
            })
        };
        let started = Instant::now();
        while !workers.told.lock().unwrap().contains(&stop.id) {
            assert!(started.elapsed() < Duration::from_secs(10));
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        c.acknowledge(older, 0, 0, TaskStateHandle::default()).await;
        held.notify_one();
        completing.await.unwrap();
        assert_eq!(told.await.unwrap().unwrap().id, stop.id);
        // The stop stays the job's latest checkpoint; the older one was
        // subsumed, never retained after it.
        let retained: Vec<u64> = c.retained().await.iter().map(|k| k.id).collect();
        assert_eq!(retained.last(), Some(&stop.id), "{retained:?}");
        assert!(!retained.contains(&older), "{retained:?}");
        c.stop("done").await;
    }

    #[tokio::test]
    async fn a_savepoint_that_goes_on_changes_no_checkpoint() {
        let dir = tempfile::tempdir().unwrap();
        let (c, workers) = coordinator(dir.path());
        let (tell, told) = tokio::sync::oneshot::channel();
        c.trigger_savepoint(false, false, tell).await;
        let sp = last_savepoint(&workers);
        assert_eq!(sp.kind, CheckpointKind::Savepoint);
        c.acknowledge(sp.id, 0, 0, TaskStateHandle::default()).await;
        assert_eq!(told.await.unwrap().unwrap().id, sp.id);
        // Not retained, not told (its sinks commit with the next
        // checkpoint), and checkpoints go on.
        assert!(c.retained().await.iter().all(|k| k.id != sp.id));
        assert!(!workers.told.lock().unwrap().contains(&sp.id));
        tokio::time::sleep(Duration::from_millis(150)).await;
        assert!(after(&workers, sp.id) > 0);
        c.stop("done").await;
    }
}
