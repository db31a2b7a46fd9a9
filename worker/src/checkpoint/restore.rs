//! Starting an attempt from a completed checkpoint: the keyed-state files of
//! the subtasks this worker runs are downloaded first (a missing or
//! unreadable file fails the deployment, naming it), then each operator
//! instance opens its backend on them, each source resumes from its splits'
//! positions, and each sink commits again what the checkpoint pre-committed
//! (commits are idempotent).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt};
use sha2::Digest;
use weir_model::checkpoint::{CheckpointMetadata, OperatorStateHandle, SplitPosition};

/// A checkpoint to start from, its files for this worker's subtasks on
/// local disk.
#[derive(Debug)]
pub struct Restore {
    /// The checkpoint.
    pub checkpoint: CheckpointMetadata,
    /// Per (vertex, subtask) with keyed state here: its format and the
    /// directory its files were downloaded to.
    operators: HashMap<(usize, u32), (String, PathBuf)>,
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
        for s in checkpoint
            .subtasks
            .iter()
            .filter(|s| here(s.task, s.subtask))
        {
            for o in &s.state.operators {
                let into = dir.join(format!("{}-{}", o.vertex, s.subtask));
                tokio::fs::create_dir_all(&into).await?;
                for f in &o.files {
                    let bytes = store
                        .get(&ObjectPath::from(f.path.as_str()))
                        .await
                        .map_err(|e| {
                            anyhow::anyhow!(
                                "checkpoint {}: cannot read {} from the checkpoint storage: {e}",
                                checkpoint.id,
                                f.path
                            )
                        })?
                        .bytes()
                        .await?;
                    if bytes.len() as u64 != f.size {
                        anyhow::bail!(
                            "checkpoint {}: {} has {} bytes, the checkpoint says {}",
                            checkpoint.id,
                            f.path,
                            bytes.len(),
                            f.size
                        );
                    }
                    if !f.sha256.is_empty() && hex::encode(sha2::Sha256::digest(&bytes)) != f.sha256
                    {
                        anyhow::bail!(
                            "checkpoint {}: {} is corrupt (its sha256 is not the one the checkpoint recorded)",
                            checkpoint.id,
                            f.path
                        );
                    }
                    tokio::fs::write(into.join(&f.name), &bytes).await?;
                }
                operators.insert((o.vertex, s.subtask), (o.format.clone(), into));
            }
        }
        Ok(Restore {
            checkpoint,
            operators,
        })
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

    /// Whether subtask `subtask` of task `task` had finished (its input
    /// ended) in the checkpoint: it starts finished.
    pub fn finished(&self, task: usize, subtask: u32) -> bool {
        self.checkpoint
            .subtasks
            .iter()
            .any(|s| s.task == task && s.subtask == subtask && s.state.finished)
    }

    /// What sink vertex `vertex` of subtask `subtask` of task `task`
    /// pre-committed.
    pub fn sink_handle(&self, task: usize, subtask: u32, vertex: usize) -> Option<Vec<u8>> {
        self.checkpoint
            .subtasks
            .iter()
            .filter(|s| s.task == task && s.subtask == subtask)
            .flat_map(|s| s.state.sinks.iter())
            .find(|(v, _)| *v == vertex)
            .map(|(_, h)| h.clone())
    }

    /// The state of keyed operator `vertex`'s subtask `subtask`: its format
    /// and its downloaded files' directory.
    pub fn operator(&self, vertex: usize, subtask: u32) -> Option<(&str, &Path)> {
        self.operators
            .get(&(vertex, subtask))
            .map(|(f, d)| (f.as_str(), d.as_path()))
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
