//! A checkpoint that was triggered and waits for its acknowledgements
//! (Flink's `PendingCheckpoint`).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use weir_model::Barrier;
use weir_model::checkpoint::TaskStateHandle;

/// Acknowledgements still missing, per subtask.
#[derive(Debug)]
pub struct PendingCheckpoint {
    /// Its barrier.
    pub barrier: Barrier,
    /// When it was triggered.
    pub started: Instant,
    /// The (task, subtask) pairs that have not acknowledged.
    pub missing: BTreeSet<(usize, u32)>,
    /// What those that did recorded.
    pub acks: BTreeMap<(usize, u32), TaskStateHandle>,
}

impl PendingCheckpoint {
    /// A checkpoint waiting for every one of `subtasks`.
    pub fn new(barrier: Barrier, subtasks: impl IntoIterator<Item = (usize, u32)>) -> Self {
        PendingCheckpoint {
            barrier,
            started: Instant::now(),
            missing: subtasks.into_iter().collect(),
            acks: BTreeMap::new(),
        }
    }

    /// Record subtask `(task, subtask)`'s acknowledgement; false if it was
    /// not expected (or came twice).
    pub fn acknowledge(&mut self, task: usize, subtask: u32, state: TaskStateHandle) -> bool {
        if !self.missing.remove(&(task, subtask)) {
            return false;
        }
        self.acks.insert((task, subtask), state);
        true
    }

    /// Subtask `(task, subtask)` finished in an earlier completed
    /// checkpoint: it is not waited for, and `state` stands for it unless
    /// it acknowledges this one too.
    pub fn stand_in(&mut self, task: usize, subtask: u32, state: TaskStateHandle) {
        self.missing.remove(&(task, subtask));
        self.acks.entry((task, subtask)).or_insert(state);
    }

    /// Whether every subtask acknowledged.
    pub fn is_complete(&self) -> bool {
        self.missing.is_empty()
    }
}
