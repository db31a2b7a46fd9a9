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

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};
use weir_model::Barrier;

pub use barrier_handler::{BarrierHandler, Handled};

/// How far a source split has been read: restoring it resumes right after.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SplitPosition {
    /// The split's id, stable across restarts of the same job (a file's
    /// byte range, a generator's residue class).
    pub split: String,
    /// Where reading resumes: a byte offset, the next sequence number.
    pub offset: u64,
}

/// What one subtask recorded for a checkpoint.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TaskSnapshot {
    /// Per source vertex of the chain (by vertex id), its split positions.
    pub sources: Vec<(usize, Vec<SplitPosition>)>,
    /// Per sink vertex of the chain, what it pre-committed (its handle, to
    /// commit again after a restore).
    pub sinks: Vec<(usize, Vec<u8>)>,
    /// How long the barriers' alignment took, ms.
    pub alignment_ms: u64,
}

/// A subtask's acknowledgement of a checkpoint.
#[derive(Debug, Clone, PartialEq)]
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
    sources: Arc<Mutex<Vec<std::sync::mpsc::Sender<Barrier>>>>,
    acks: UnboundedSender<TaskAck>,
}

impl CheckpointChannels {
    /// New wiring, and where the acks arrive.
    pub fn new() -> (CheckpointChannels, UnboundedReceiver<TaskAck>) {
        let (acks, rx) = unbounded_channel();
        (
            CheckpointChannels {
                sources: Arc::default(),
                acks,
            },
            rx,
        )
    }

    /// Inject `barrier` at every source subtask of the job in this process;
    /// returns how many were told (ended ones are not).
    pub fn trigger(&self, barrier: Barrier) -> usize {
        let mut sources = self.sources.lock().unwrap_or_else(|p| p.into_inner());
        sources.retain(|s| s.send(barrier).is_ok());
        sources.len()
    }

    /// The link of one subtask: sources get their barriers through it.
    pub fn link(&self, task: usize, subtask: u32, source: bool) -> CheckpointLink {
        let triggers = source.then(|| {
            let (tx, rx) = std::sync::mpsc::channel();
            self.sources
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(tx);
            rx
        });
        CheckpointLink {
            triggers,
            acks: self.acks.clone(),
            task,
            subtask,
        }
    }
}

/// One subtask's part of the wiring.
pub struct CheckpointLink {
    /// A source subtask's barriers to inject.
    pub triggers: Option<std::sync::mpsc::Receiver<Barrier>>,
    /// Where its acks go.
    pub acks: UnboundedSender<TaskAck>,
    /// Its task.
    pub task: usize,
    /// Its subtask index.
    pub subtask: u32,
}

impl CheckpointLink {
    /// Barriers the coordinator asked this source subtask to inject.
    pub fn pending_triggers(&self) -> Vec<Barrier> {
        match &self.triggers {
            Some(rx) => rx.try_iter().collect(),
            None => Vec::new(),
        }
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
