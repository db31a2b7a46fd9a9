//! What `GET /v1/jobs/{id}/checkpoints` shows: counts, the latest completed
//! checkpoint, the recent history with per-vertex acknowledgements and
//! times, and the checkpoint the job was restored from.

use serde::{Deserialize, Serialize};
use weir_model::fault_tolerance::CheckpointConfig;

/// Checkpoints kept in a job's history.
pub const HISTORY: usize = 64;

/// A job's checkpoints.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct CheckpointStats {
    /// The job's settings; `None` when it takes no checkpoints.
    pub config: Option<CheckpointConfig>,
    /// How many.
    pub counts: CheckpointCounts,
    /// The newest completed one.
    pub latest_completed: Option<CheckpointSummary>,
    /// The recent ones, newest first.
    pub history: Vec<CheckpointSummary>,
    /// The checkpoint the running attempt was restored from.
    pub restored: Option<RestoredCheckpoint>,
}

/// Checkpoints by outcome.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct CheckpointCounts {
    /// Triggered.
    pub triggered: u64,
    /// Not complete yet.
    pub in_progress: u64,
    /// Completed.
    pub completed: u64,
    /// Aborted: timed out, declined, or a source had finished.
    pub failed: u64,
}

/// Where a checkpoint is.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum CheckpointStatus {
    /// Waiting for acknowledgements.
    InProgress,
    /// Every subtask acknowledged; its metadata is written.
    Completed,
    /// Aborted; never used for a restore.
    Failed,
}

/// One checkpoint.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct CheckpointSummary {
    /// Its id.
    pub id: u64,
    /// Where it is.
    pub status: CheckpointStatus,
    /// When it was triggered, ms since the epoch.
    pub triggered_at_ms: i64,
    /// From the trigger to the last acknowledgement (or the abort), ms.
    pub duration_ms: Option<u64>,
    /// Bytes of state it refers to.
    pub state_bytes: u64,
    /// Bytes uploaded for it (an incremental checkpoint reuses the files
    /// its predecessor uploaded).
    pub uploaded_bytes: u64,
    /// Bytes of records in flight it stored (an unaligned checkpoint's
    /// overtaken records; 0 when aligned).
    #[serde(default)]
    pub inflight_bytes: u64,
    /// Whether any subtask took it unaligned (it stored records in flight).
    #[serde(default)]
    pub unaligned: bool,
    /// Subtasks that acknowledged it.
    pub acknowledged: u32,
    /// Subtasks in all.
    pub total: u32,
    /// Per vertex.
    pub vertices: Vec<VertexCheckpointStats>,
    /// Why it failed.
    pub failure: Option<String>,
}

/// One vertex's part of a checkpoint.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct VertexCheckpointStats {
    /// The vertex.
    pub name: String,
    /// Its subtasks that acknowledged.
    pub acknowledged: u32,
    /// Its subtasks.
    pub total: u32,
    /// The longest barrier alignment among its subtasks, ms.
    pub alignment_ms: u64,
    /// The longest synchronous part, ms.
    pub sync_ms: u64,
    /// The longest asynchronous part (uploads), ms.
    pub async_ms: u64,
    /// Bytes of its state.
    pub state_bytes: u64,
}

/// The checkpoint a job's attempt started from.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct RestoredCheckpoint {
    /// Its id.
    pub id: u64,
    /// The attempt restored from it.
    pub attempt: u32,
    /// When, ms since the epoch.
    pub at_ms: i64,
}

impl CheckpointStats {
    /// Put a checkpoint's summary in the history (replacing its older
    /// version), newest first.
    pub fn record(&mut self, summary: CheckpointSummary) {
        self.history.retain(|s| s.id != summary.id);
        let at = self
            .history
            .iter()
            .position(|s| s.id < summary.id)
            .unwrap_or(self.history.len());
        if summary.status == CheckpointStatus::Completed
            && self
                .latest_completed
                .as_ref()
                .is_none_or(|l| l.id < summary.id)
        {
            self.latest_completed = Some(summary.clone());
        }
        self.history.insert(at, summary);
        self.history.truncate(HISTORY);
    }
}
