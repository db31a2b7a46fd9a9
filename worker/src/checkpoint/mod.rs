//! The task side of checkpoints.
//!
//! - [`barrier_handler`]: what a task with several inputs does when a barrier
//!   arrives: align (exactly-once) or track (at-least-once).
//! - [`CheckpointChannels`]: a job's checkpoint wiring in one process:
//!   barriers to inject at its source subtasks, and the acks of every
//!   subtask's snapshot.
//!
//! A source subtask injects a barrier between two batches: it records its
//! splits' positions, snapshots its chain and sends the barrier on every
//! output. Any other subtask snapshots when its inputs' barriers are
//! aligned, then forwards the barrier. Sinks pre-commit on the barrier and
//! commit when told the checkpoint completed.

pub mod barrier_handler;
pub mod restore;
pub mod unaligned;
pub mod uploader;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use std::path::PathBuf;

use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};
use weir_model::Barrier;

pub use barrier_handler::{BarrierHandler, Handled};
pub use weir_model::checkpoint::SplitPosition;
use weir_state::snapshot::LocalSnapshot;

/// What one subtask recorded for a checkpoint, its keyed state still in
/// local files (the uploader takes it from there).
#[derive(Debug, Clone, Default)]
pub struct TaskSnapshot {
    /// Per source vertex of the chain (by vertex id), its split positions.
    pub sources: Vec<(usize, Vec<SplitPosition>)>,
    /// Per sink vertex of the chain, what it pre-committed (its handle, to
    /// commit again after a restore).
    pub sinks: Vec<(usize, Vec<u8>)>,
    /// Per keyed operator of the chain, its state's files.
    pub operators: Vec<(usize, LocalSnapshot)>,
    /// Where those files are (removed once uploaded).
    pub dir: Option<PathBuf>,
    /// How long the barriers' alignment took, ms.
    pub alignment_ms: u64,
    /// How long the synchronous part took, ms.
    pub sync_ms: u64,
    /// The subtask could not take its part: why (the checkpoint is
    /// declined, and nothing is uploaded).
    pub declined: Option<String>,
    /// The subtask's input had ended: the snapshot holds its final source
    /// positions and sink pre-commits, and no keyed state.
    pub finished: bool,
    /// An unaligned checkpoint: the file of the records its barriers
    /// overtook ([`unaligned`]), and their bytes.
    pub inflight: Option<(PathBuf, u64)>,
}

/// A subtask's acknowledgement of a checkpoint.
#[derive(Debug, Clone)]
pub struct TaskAck {
    /// The checkpoint.
    pub checkpoint: u64,
    /// The task (chain) index.
    pub task: usize,
    /// The subtask.
    pub subtask: u32,
    /// What it recorded.
    pub snapshot: TaskSnapshot,
}

/// A job's checkpoint wiring in one process. Cheap to clone.
#[derive(Clone)]
pub struct CheckpointChannels {
    inner: Arc<Mutex<Wiring>>,
    acks: UnboundedSender<TaskAck>,
    dir: PathBuf,
}

#[derive(Default)]
struct Wiring {
    /// Every source subtask's trigger channel (a closed one has ended).
    sources: Vec<std::sync::mpsc::Sender<Barrier>>,
    /// How many source subtasks run here, once the job's tasks are being
    /// made: until all have their channel (each opens its source first,
    /// which may take a while), a trigger would miss some.
    expected_sources: Option<usize>,
    /// Every subtask's channel of completed checkpoints.
    completions: Vec<std::sync::mpsc::Sender<u64>>,
    /// Every other subtask's trigger channel: one whose upstream subtasks
    /// have all ended takes the barriers it is sent here (no barrier
    /// reaches it any more through its inputs).
    inputs: Vec<std::sync::mpsc::Sender<Barrier>>,
}

/// What a trigger reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Triggered {
    /// Source subtasks told.
    pub told: usize,
    /// Source subtasks that ended already.
    pub finished: usize,
    /// Source subtasks still starting: the trigger was not sent to any
    /// (a checkpoint none of them takes part in could not complete).
    pub starting: usize,
}

impl CheckpointChannels {
    /// New wiring whose subtasks take their local snapshots under `dir`,
    /// and where their acks arrive.
    pub fn new(dir: PathBuf) -> (CheckpointChannels, UnboundedReceiver<TaskAck>) {
        let (acks, rx) = unbounded_channel();
        (
            CheckpointChannels {
                inner: Arc::default(),
                acks,
                dir,
            },
            rx,
        )
    }

    fn wiring(&self) -> std::sync::MutexGuard<'_, Wiring> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `n` source subtasks of the job run in this process.
    pub fn expect_sources(&self, n: usize) {
        self.wiring().expected_sources = Some(n);
    }

    /// Inject `barrier` at every source subtask of the job in this process
    /// — at none while some are still starting.
    pub fn trigger(&self, barrier: Barrier) -> Triggered {
        let wiring = self.wiring();
        // Before the tasks are being made, every source is starting.
        let starting = match wiring.expected_sources {
            Some(n) => n.saturating_sub(wiring.sources.len()),
            None => 1,
        };
        if starting > 0 {
            return Triggered {
                told: 0,
                finished: 0,
                starting,
            };
        }
        let sources = &wiring.sources;
        let told = sources.iter().filter(|s| s.send(barrier).is_ok()).count();
        for input in &wiring.inputs {
            // An ended subtask needs none.
            let _ = input.send(barrier);
        }
        Triggered {
            told,
            finished: sources.len() - told,
            starting: 0,
        }
    }

    /// Checkpoint `id` completed: every subtask commits what it covers.
    pub fn complete(&self, id: u64) {
        for c in &self.wiring().completions {
            // An ended subtask has nothing left to commit.
            let _ = c.send(id);
        }
    }

    /// The link of one subtask: sources get their barriers through it.
    pub fn link(&self, task: usize, subtask: u32, source: bool) -> CheckpointLink {
        let mut wiring = self.wiring();
        let (tx, rx) = std::sync::mpsc::channel();
        if source {
            wiring.sources.push(tx);
        } else {
            wiring.inputs.push(tx);
        }
        let triggers = Some(rx);
        let (tx, completions) = std::sync::mpsc::channel();
        wiring.completions.push(tx);
        CheckpointLink {
            triggers,
            completions,
            acks: self.acks.clone(),
            dir: self.dir.clone(),
            task,
            subtask,
        }
    }
}

/// One subtask's part of the wiring.
pub struct CheckpointLink {
    /// The barriers to inject: a source subtask's, or those of any other
    /// subtask once its upstream subtasks have all ended.
    pub triggers: Option<std::sync::mpsc::Receiver<Barrier>>,
    /// Checkpoints completed.
    pub completions: std::sync::mpsc::Receiver<u64>,
    /// Where its acks go.
    pub acks: UnboundedSender<TaskAck>,
    /// Where local snapshots are taken.
    pub dir: PathBuf,
    /// Its task.
    pub task: usize,
    /// Its subtask index.
    pub subtask: u32,
}

impl CheckpointLink {
    /// Barriers the coordinator asked this subtask to inject.
    pub fn pending_triggers(&self) -> Vec<Barrier> {
        match &self.triggers {
            Some(rx) => rx.try_iter().collect(),
            None => Vec::new(),
        }
    }

    /// Checkpoints completed since the last call, in order.
    pub fn completed(&self) -> Vec<u64> {
        self.completions.try_iter().collect()
    }

    /// An empty directory for this subtask's files of checkpoint `id`.
    pub fn snapshot_dir(&self, id: u64) -> anyhow::Result<PathBuf> {
        let dir = self
            .dir
            .join(format!("chk-{id}"))
            .join(format!("{}-{}", self.task, self.subtask));
        if dir.exists() {
            std::fs::remove_dir_all(&dir)?;
        }
        std::fs::create_dir_all(&dir)
            .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
        Ok(dir)
    }

    /// Decline checkpoint `checkpoint`: this subtask cannot take its part.
    pub fn decline(&self, checkpoint: u64, reason: String) {
        self.ack(
            checkpoint,
            TaskSnapshot {
                declined: Some(reason),
                ..TaskSnapshot::default()
            },
        );
    }

    /// Report a snapshot.
    pub fn ack(&self, checkpoint: u64, snapshot: TaskSnapshot) {
        // The receiver is gone only when the job is stopping.
        let _ = self.acks.send(TaskAck {
            checkpoint,
            task: self.task,
            subtask: self.subtask,
            snapshot,
        });
    }
}

/// Milliseconds of a duration, for acks.
pub(crate) fn ms(d: Duration) -> u64 {
    d.as_millis() as u64
}
