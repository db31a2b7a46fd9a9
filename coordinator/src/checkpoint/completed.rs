//! The completed checkpoints a job retains (Flink's
//! `CompletedCheckpointStore`): the newest `retained` of them, their
//! metadata in the checkpoint storage; an older one is discarded when a
//! newer one completes.

use std::collections::VecDeque;

use weir_model::checkpoint::CheckpointMetadata;

/// The retained checkpoints, oldest first.
#[derive(Debug)]
pub struct CompletedCheckpointStore {
    retained: usize,
    checkpoints: VecDeque<CheckpointMetadata>,
}

impl CompletedCheckpointStore {
    /// A store keeping the newest `retained` (at least 1).
    pub fn new(retained: usize) -> Self {
        CompletedCheckpointStore {
            retained: retained.max(1),
            checkpoints: VecDeque::new(),
        }
    }

    /// Add a completed checkpoint; returns those it subsumes (to discard).
    pub fn add(&mut self, checkpoint: CheckpointMetadata) -> Vec<CheckpointMetadata> {
        self.checkpoints.push_back(checkpoint);
        let mut subsumed = Vec::new();
        while self.checkpoints.len() > self.retained {
            subsumed.extend(self.checkpoints.pop_front());
        }
        subsumed
    }

    /// The newest.
    pub fn latest(&self) -> Option<&CheckpointMetadata> {
        self.checkpoints.back()
    }

    /// All retained, oldest first.
    pub fn all(&self) -> impl Iterator<Item = &CheckpointMetadata> {
        self.checkpoints.iter()
    }
}
