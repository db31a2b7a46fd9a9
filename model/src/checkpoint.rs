//! What a checkpoint holds, as workers report it and as the coordinator
//! keeps it in the checkpoint's metadata.
//!
//! Every subtask acknowledges a checkpoint with a [`TaskStateHandle`]: its
//! source splits' positions, its sinks' pre-commit handles, and its keyed
//! operators' state files, already uploaded to the checkpoint storage (a
//! blob store the coordinator names in the deployment). A checkpoint whose
//! every subtask acknowledged is complete; its [`CheckpointMetadata`] is
//! written to `<job>/chk-<id>/_metadata` in the storage.
//!
//! The storage's layout, per job:
//!
//! ```text
//! <job>/chk-<id>/_metadata                          the completed checkpoint
//! <job>/chk-<id>/<vertex>-<subtask>-a<attempt>/<file>   files of one checkpoint only
//! <job>/shared/<vertex>-<subtask>-a<attempt>-c<id>-<name>   RocksDB SST files, shared by
//!                                                   the incremental checkpoints that use them
//! ```
//!
//! These types cross the process boundary as JSON (inside the gRPC
//! messages), and are the metadata's format.

use serde::{Deserialize, Serialize};

use crate::record::{CheckpointKind, CheckpointMode};

/// How far a source split has been read: restoring it resumes right after.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SplitPosition {
    /// The split's id, stable across restarts of the same job (a file's
    /// byte range, a generator's residue class).
    pub split: String,
    /// Where reading resumes: a byte offset, the next sequence number.
    pub offset: u64,
    /// A file split's byte range `[start, end)`, fixed when the job first
    /// started (`end` is `u64::MAX` for the split that follows the file's
    /// growth): a restore reads the same range whatever the file's size is
    /// by then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub range: Option<(u64, u64)>,
}

/// One uploaded file of an operator's state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateFile {
    /// Its name in the backend's snapshot directory.
    pub name: String,
    /// Where it is in the checkpoint storage.
    pub path: String,
    /// Bytes.
    pub size: u64,
    /// Shared between checkpoints (an SST file), reference-counted.
    pub shared: bool,
    /// The hex sha256 of its bytes: a restore refuses a file that changed.
    #[serde(default)]
    pub sha256: String,
}

/// An operator's keyed state in a checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OperatorStateHandle {
    /// The vertex.
    pub vertex: usize,
    /// `full` (the memory backend's file) or `rocksdb` (a RocksDB
    /// checkpoint's files).
    pub format: String,
    /// Its files.
    pub files: Vec<StateFile>,
}

/// Everything one subtask (one chain) recorded for a checkpoint.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskStateHandle {
    /// Per source vertex of the chain, its split positions.
    pub sources: Vec<(usize, Vec<SplitPosition>)>,
    /// Per sink vertex of the chain, what it pre-committed.
    pub sinks: Vec<(usize, Vec<u8>)>,
    /// Per keyed operator of the chain, its state.
    pub operators: Vec<OperatorStateHandle>,
    /// How long the barriers' alignment took, ms.
    pub alignment_ms: u64,
    /// The synchronous part of the snapshot, ms.
    pub sync_ms: u64,
    /// The asynchronous part (uploads), ms.
    pub async_ms: u64,
    /// Bytes of state the checkpoint refers to (shared files included).
    pub state_bytes: u64,
    /// Bytes uploaded for this checkpoint (shared files already held by an
    /// earlier one are not).
    pub uploaded_bytes: u64,
    /// The subtask had finished (its input ended) when it took this: it
    /// holds its sources' final positions and its sinks' final
    /// pre-commits, and no keyed state (nothing reaches it any more). A
    /// restore starts it finished; later checkpoints carry this handle for
    /// it once it has ended.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub finished: bool,
    /// An unaligned checkpoint: the records (and watermarks) of its input
    /// channels that the barriers overtook, replayed first on a restore.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inflight: Option<StateFile>,
    /// How many bytes of records `inflight` holds (as they crossed the
    /// channels).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub inflight_bytes: u64,
}

impl TaskStateHandle {
    /// Every file it refers to: its operators' state, and the records an
    /// unaligned checkpoint's barriers overtook.
    pub fn files(&self) -> impl Iterator<Item = &StateFile> {
        self.operators
            .iter()
            .flat_map(|o| o.files.iter())
            .chain(self.inflight.iter())
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// One subtask's acknowledgement, in a checkpoint's metadata.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubtaskState {
    /// The task (chain) index.
    pub task: usize,
    /// The subtask.
    pub subtask: u32,
    /// What it recorded.
    pub state: TaskStateHandle,
}

/// A completed checkpoint, as `<job>/chk-<id>/_metadata` keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointMetadata {
    /// The job.
    pub job: String,
    /// The checkpoint's id.
    pub id: u64,
    /// Checkpoint or savepoint.
    pub kind: CheckpointKind,
    /// Aligned or not.
    pub mode: CheckpointMode,
    /// The job's attempt that took it.
    pub attempt: u32,
    /// When it was triggered, ms since the epoch.
    pub triggered_at_ms: i64,
    /// When its last acknowledgement arrived.
    pub completed_at_ms: i64,
    /// Every subtask's state.
    pub subtasks: Vec<SubtaskState>,
    /// Set when the checkpoint is a savepoint of another job, imported to
    /// start this one (that job's id): its sinks' output passes to this
    /// job, which goes on from it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predecessor: Option<String>,
    /// What its vertex ids stand for (absent in checkpoints of older
    /// versions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layout: Option<CheckpointLayout>,
}

/// What a checkpoint's vertex ids stand for: enough to read its state and
/// to start a job from it without the job that took it (whose bundle may
/// be gone), as Flink's checkpoint metadata names its operators.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointLayout {
    /// The job's name.
    pub job_name: String,
    /// Its max parallelism (its keys' groups).
    pub max_parallelism: u32,
    /// The codec of its state values.
    pub codec: crate::codec::Codec,
    /// Its vertices, in id order.
    pub vertices: Vec<LayoutVertex>,
}

/// A vertex of a [`CheckpointLayout`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LayoutVertex {
    /// Its name (what state is matched by).
    pub name: String,
    /// `source`, `operator` or `sink`.
    pub role: String,
    /// Its parallelism.
    pub parallelism: u32,
    /// A sink's connector and files (its pending output is only claimed by
    /// a sink writing there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sink_target: Option<String>,
}

impl CheckpointMetadata {
    /// Where the metadata of checkpoint `id` of `job` is in the storage.
    pub fn path(job: &str, id: u64) -> String {
        format!("{job}/chk-{id}/_metadata")
    }

    /// Every file it refers to.
    pub fn files(&self) -> impl Iterator<Item = &StateFile> {
        self.subtasks.iter().flat_map(|s| s.state.files())
    }

    /// Bytes of state it refers to.
    pub fn state_bytes(&self) -> u64 {
        self.subtasks.iter().map(|s| s.state.state_bytes).sum()
    }
}
