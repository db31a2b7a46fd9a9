//! Starting an attempt from a completed checkpoint: the keyed-state files of
//! the subtasks this worker runs are downloaded first (a missing or
//! unreadable file fails the deployment, naming it), then each operator
//! instance opens its backend on them, each source resumes from its splits'
//! positions, each sink commits again what the checkpoint pre-committed
//! (commits are idempotent), and a subtask whose barriers overtook records
//! (an unaligned checkpoint) processes those first.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt};
use sha2::Digest;
use weir_model::checkpoint::{CheckpointMetadata, OperatorStateHandle, SplitPosition, StateFile};

use crate::partition::Envelope;

/// A checkpoint to start from, its files for this worker's subtasks on
/// local disk.
#[derive(Debug)]
pub struct Restore {
    /// The checkpoint.
    pub checkpoint: CheckpointMetadata,
    /// Per (vertex, subtask) with keyed state here: the format and the
    /// directory of each of its handles' files (several when the subtask's
    /// key groups come from several subtasks of a savepoint taken at
    /// another parallelism).
    operators: HashMap<(usize, u32), Vec<(String, PathBuf)>>,
    /// Per (task, subtask) here: the records its barriers overtook.
    inflight: HashMap<(usize, u32), Vec<Envelope>>,
}

/// Read `f` of checkpoint `id` from `store`, checked against its size and
/// sha256.
async fn fetch(store: &dyn ObjectStore, id: u64, f: &StateFile) -> anyhow::Result<bytes::Bytes> {
    let bytes = store
        .get(&ObjectPath::from(f.path.as_str()))
        .await
        .map_err(|e| {
            anyhow::anyhow!(
                "checkpoint {id}: cannot read {} from the checkpoint storage: {e}",
                f.path
            )
        })?
        .bytes()
        .await?;
    check(
        id,
        f,
        bytes.len() as u64,
        &hex::encode(sha2::Sha256::digest(&bytes)),
    )?;
    Ok(bytes)
}

/// Read `f` of checkpoint `id` from `store` into the local file `file`, a
/// chunk at a time, checked against its size and sha256.
async fn fetch_into(
    store: &dyn ObjectStore,
    id: u64,
    f: &StateFile,
    file: &Path,
) -> anyhow::Result<()> {
    let got =
        weir_model::storage::transfer::get_file(store, &ObjectPath::from(f.path.as_str()), file)
            .await
            .map_err(|e| {
                anyhow::anyhow!(
                    "checkpoint {id}: cannot read it from the checkpoint storage: {e:#}"
                )
            })?;
    check(id, f, got.size, &got.sha256)
}

/// That `f` of checkpoint `id` read back as `size` bytes hashing to
/// `sha256` is what the checkpoint recorded.
fn check(id: u64, f: &StateFile, size: u64, sha256: &str) -> anyhow::Result<()> {
    f.verify(size, sha256)
        .map_err(|e| anyhow::anyhow!("checkpoint {id}: {e}"))
}

impl Restore {
    /// Download from `store`, under `dir`, the state files of the subtasks
    /// for which `here(task, subtask)` holds.
    pub async fn download(
        store: Arc<dyn ObjectStore>,
        checkpoint: CheckpointMetadata,
        dir: &Path,
        here: impl Fn(usize, u32) -> bool,
    ) -> anyhow::Result<Restore> {
        let mut operators = HashMap::new();
        let mut inflight = HashMap::new();
        for s in checkpoint
            .subtasks
            .iter()
            .filter(|s| here(s.task, s.subtask))
        {
            for (i, o) in s.state.operators.iter().enumerate() {
                let into = dir.join(format!("{}-{}-{i}", o.vertex, s.subtask));
                tokio::fs::create_dir_all(&into).await?;
                for f in &o.files {
                    fetch_into(store.as_ref(), checkpoint.id, f, &into.join(&f.name)).await?;
                }
                operators
                    .entry((o.vertex, s.subtask))
                    .or_insert_with(Vec::new)
                    .push((o.format.clone(), into));
            }
            if let Some(f) = &s.state.inflight {
                let bytes = fetch(store.as_ref(), checkpoint.id, f).await?;
                let log = super::unaligned::decode_log(bytes).map_err(|e| {
                    anyhow::anyhow!("checkpoint {}: {}: {e:#}", checkpoint.id, f.path)
                })?;
                inflight.insert((s.task, s.subtask), log);
            }
        }
        Ok(Restore {
            checkpoint,
            operators,
            inflight,
        })
    }

    /// What the barriers of subtask `subtask` of task `task` overtook in an
    /// unaligned checkpoint: its input's first messages after the restore.
    pub fn inflight(&self, task: usize, subtask: u32) -> Vec<Envelope> {
        self.inflight
            .get(&(task, subtask))
            .cloned()
            .unwrap_or_default()
    }

    /// The split positions of source vertex `vertex` of subtask `subtask`
    /// of task `task`.
    pub fn positions(&self, task: usize, subtask: u32, vertex: usize) -> Vec<SplitPosition> {
        self.checkpoint
            .subtasks
            .iter()
            .filter(|s| s.task == task && s.subtask == subtask)
            .flat_map(|s| s.state.sources.iter())
            .filter(|(v, _)| *v == vertex)
            .flat_map(|(_, p)| p.iter().cloned())
            .collect()
    }

    /// Every split position of source vertex `vertex`, all its subtasks'
    /// (each subtask's connector picks its own splits: after a restore at
    /// another parallelism, a subtask's splits are not the ones its number
    /// had, and one may have had none).
    pub fn vertex_positions(&self, vertex: usize) -> Vec<SplitPosition> {
        let mut seen = std::collections::BTreeSet::new();
        self.checkpoint
            .subtasks
            .iter()
            .flat_map(|s| s.state.sources.iter())
            .filter(|(v, _)| *v == vertex)
            .flat_map(|(_, p)| p.iter())
            .filter(|p| seen.insert(p.split.clone()))
            .cloned()
            .collect()
    }

    /// Whether subtask `subtask` of task `task` had finished (its input
    /// ended) in the checkpoint: it starts finished.
    pub fn finished(&self, task: usize, subtask: u32) -> bool {
        self.checkpoint
            .subtasks
            .iter()
            .any(|s| s.task == task && s.subtask == subtask && s.state.finished)
    }

    /// What sink vertex `vertex` of subtask `subtask` of task `task`
    /// pre-committed: one handle, or, restoring a savepoint taken at
    /// another parallelism, those of the savepoint's subtasks given to it.
    pub fn sink_handles(&self, task: usize, subtask: u32, vertex: usize) -> Vec<Vec<u8>> {
        self.checkpoint
            .subtasks
            .iter()
            .filter(|s| s.task == task && s.subtask == subtask)
            .flat_map(|s| s.state.sinks.iter())
            .filter(|(v, _)| *v == vertex)
            .map(|(_, h)| h.clone())
            .collect()
    }

    /// The state of keyed operator `vertex`'s subtask `subtask`: the format
    /// and the downloaded files' directory of each of its handles (none
    /// when it had no state).
    pub fn operator(&self, vertex: usize, subtask: u32) -> Vec<(&str, &Path)> {
        self.operators
            .get(&(vertex, subtask))
            .map(|hs| hs.iter().map(|(f, d)| (f.as_str(), d.as_path())).collect())
            .unwrap_or_default()
    }

    /// The job whose savepoint this restore starts a new job from, when it
    /// is not this job's own checkpoint: its sinks' output passes to this
    /// job.
    pub fn predecessor(&self) -> Option<&str> {
        self.checkpoint.predecessor.as_deref()
    }

    /// The handles of every operator instance in the checkpoint (to seed
    /// the uploader's shared files).
    pub fn handles(&self) -> impl Iterator<Item = (u32, &OperatorStateHandle)> {
        self.checkpoint
            .subtasks
            .iter()
            .flat_map(|s| s.state.operators.iter().map(move |o| (s.subtask, o)))
    }
}
