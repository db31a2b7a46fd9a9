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

impl StateFile {
    /// That the file read back as `size` bytes hashing to `sha256` (hex) is
    /// the one the checkpoint recorded (a file of an older version without
    /// its sha256: its size only), or what differs.
    pub fn verify(&self, size: u64, sha256: &str) -> Result<(), String> {
        if size != self.size {
            return Err(format!(
                "{} has {size} bytes, the checkpoint says {}",
                self.path, self.size
            ));
        }
        if !self.sha256.is_empty() && sha256 != self.sha256 {
            return Err(format!(
                "{} is corrupt (its sha256 is not the one the checkpoint recorded)",
                self.path
            ));
        }
        Ok(())
    }
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
    /// A window operator's windows (assigner, time, allowed lateness), as
    /// text: a job restored from it must keep them, its stored windows and
    /// their timers being for them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<String>,
    /// What a window operator's windows keep (an aggregate's accumulators,
    /// a built-in's, or the records themselves), as text: a job restored
    /// from it must keep the same, its stored windows holding that.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_contents: Option<String>,
    /// How a keyed operator's keys are encoded (`MessagePack`, `JSON
    /// text`), as text: a job restored from it must key its records the
    /// same, its keyed state being stored under those keys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keys: Option<String>,
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

    /// What a reader of a checkpoint that is not its own job's (a retained
    /// checkpoint started as a savepoint, its state read) relies on, the
    /// checkpoint's vertices named by `layout`: an id a savepoint may
    /// carry, every file inside its job's part of the storage
    /// (`<job>/…`, no `..`), a max parallelism and parallelisms a restore
    /// can divide key groups by, and every subtask's state of a vertex the
    /// layout has, within its parallelism. Else what is wrong.
    pub fn check_against(&self, layout: &CheckpointLayout) -> Result<(), String> {
        if self.id > 1 << 53 {
            return Err(format!("it gives checkpoint id {}", self.id));
        }
        let max = layout.max_parallelism;
        if max == 0 || max > crate::keygroup::MAX_MAX_PARALLELISM {
            return Err(format!("it gives a max parallelism of {max}"));
        }
        if let Some(v) = layout
            .vertices
            .iter()
            .find(|v| v.parallelism == 0 || v.parallelism > max)
        {
            return Err(format!(
                "it gives vertex `{}` a parallelism of {}",
                v.name, v.parallelism
            ));
        }
        let within_job = |path: &str| {
            let parts: Vec<&str> = path.split('/').collect();
            parts.len() > 1
                && parts[0] == self.job
                && !self.job.is_empty()
                && parts[1..]
                    .iter()
                    .all(|p| !p.is_empty() && *p != "." && *p != ".." && !p.contains('\\'))
        };
        for s in &self.subtasks {
            let vertices = s
                .state
                .sources
                .iter()
                .map(|(v, _)| *v)
                .chain(s.state.sinks.iter().map(|(v, _)| *v))
                .chain(s.state.operators.iter().map(|o| o.vertex));
            for v in vertices {
                let Some(vertex) = layout.vertices.get(v) else {
                    return Err(format!(
                        "task {} [{}] holds state of vertex {v}, which it does not name",
                        s.task, s.subtask
                    ));
                };
                if s.subtask >= vertex.parallelism {
                    return Err(format!(
                        "it holds state of subtask {} of `{}`, whose parallelism is {}",
                        s.subtask, vertex.name, vertex.parallelism
                    ));
                }
            }
            if let Some(f) = s.state.files().find(|f| !within_job(&f.path)) {
                return Err(format!(
                    "it refers to a file {:?} outside its job's part of the storage (`{}/…`)",
                    f.path, self.job
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(parallelism: u32) -> CheckpointLayout {
        CheckpointLayout {
            job_name: "wc".into(),
            max_parallelism: 128,
            codec: crate::codec::Codec::default(),
            vertices: vec![LayoutVertex {
                name: "count".into(),
                role: "operator".into(),
                parallelism,
                sink_target: None,
                window: None,
                window_contents: None,
                keys: None,
            }],
        }
    }

    fn checkpoint(id: u64, vertex: usize, subtask: u32, path: &str) -> CheckpointMetadata {
        CheckpointMetadata {
            job: "j1".into(),
            id,
            kind: CheckpointKind::Checkpoint,
            mode: CheckpointMode::ExactlyOnce,
            attempt: 0,
            triggered_at_ms: 0,
            completed_at_ms: 0,
            subtasks: vec![SubtaskState {
                task: 0,
                subtask,
                state: TaskStateHandle {
                    operators: vec![OperatorStateHandle {
                        vertex,
                        format: "full".into(),
                        files: vec![StateFile {
                            name: "state.bin".into(),
                            path: path.into(),
                            size: 1,
                            shared: false,
                            sha256: String::new(),
                        }],
                    }],
                    ..Default::default()
                },
            }],
            predecessor: None,
            layout: None,
        }
    }

    #[test]
    fn a_checkpoint_read_as_a_savepoint_stays_in_its_job_and_its_layout() {
        let ok = "j1/chk-3/0-0-a0/state.bin";
        // Every place a job's checkpoints keep files.
        for path in [
            ok,
            "j1/shared/0-1-a2-c3-000012.sst",
            "j1/chk-3/savepoint/state/count-0a1b2c3d-1.bin",
            "j1/chk-3/inflight-0-1-a0",
        ] {
            assert_eq!(
                checkpoint(3, 0, 1, path).check_against(&layout(2)),
                Ok(()),
                "{path}"
            );
        }
        let refused = |c: CheckpointMetadata, l: CheckpointLayout, why: &str| {
            let e = c.check_against(&l).unwrap_err();
            assert!(e.contains(why), "{e}");
        };
        for path in [
            "j2/chk-3/state.bin",
            "j1/../j2/chk-3/state.bin",
            "/etc/passwd",
            "j1//state.bin",
            "j1",
            "j1/chk-3/..\\..\\x",
        ] {
            refused(
                checkpoint(3, 0, 0, path),
                layout(2),
                "outside its job's part",
            );
        }
        refused(checkpoint(3, 0, 0, ok), layout(0), "a parallelism of 0");
        refused(checkpoint(3, 0, 2, ok), layout(2), "subtask 2 of `count`");
        refused(checkpoint(3, 1, 0, ok), layout(2), "vertex 1");
        refused(checkpoint(u64::MAX, 0, 0, ok), layout(2), "checkpoint id");
        let mut wide = layout(2);
        wide.max_parallelism = 0;
        refused(checkpoint(3, 0, 0, ok), wide, "max parallelism of 0");
    }

    #[test]
    fn a_file_read_back_is_the_one_recorded() {
        let f = StateFile {
            name: "a".into(),
            path: "j1/chk-1/a".into(),
            size: 3,
            shared: false,
            sha256: "ab".repeat(32),
        };
        assert!(f.verify(3, &"ab".repeat(32)).is_ok());
        assert!(
            f.verify(2, &"ab".repeat(32))
                .unwrap_err()
                .contains("2 bytes")
        );
        assert!(
            f.verify(3, &"cd".repeat(32))
                .unwrap_err()
                .contains("corrupt")
        );
        let old = StateFile {
            sha256: String::new(),
            ..f
        };
        assert!(old.verify(3, "anything").is_ok());
    }
}
