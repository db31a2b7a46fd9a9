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

/// What the checkpoint storage holds of job `job`, read back when a
/// restarted coordinator resumes it.
#[derive(Debug, Default)]
pub struct StoredCheckpoints {
    /// The newest `retained` completed checkpoints (their metadata was
    /// written), oldest first.
    pub completed: Vec<CheckpointMetadata>,
    /// The highest checkpoint id used so far, completed or not: the next
    /// checkpoint's id follows it, so that no file of an unfinished one is
    /// written over.
    pub highest_id: u64,
}

/// Read back the completed checkpoints of job `job` from `storage`
/// (`<job>/chk-<id>/_metadata`). A checkpoint whose metadata cannot be
/// read or parsed is skipped with a warning: it never completed.
pub async fn read_back(
    storage: &dyn object_store::ObjectStore,
    job: &str,
    retained: usize,
) -> anyhow::Result<StoredCheckpoints> {
    use object_store::ObjectStoreExt;
    use object_store::path::Path;

    let listed = storage
        .list_with_delimiter(Some(&Path::from(job)))
        .await
        .map_err(|e| anyhow::anyhow!("listing the checkpoints of job {job}: {e}"))?;
    let mut found = StoredCheckpoints::default();
    for prefix in listed.common_prefixes {
        let Some(id) = prefix
            .filename()
            .and_then(|n| n.strip_prefix("chk-"))
            .and_then(|n| n.parse::<u64>().ok())
        else {
            continue;
        };
        found.highest_id = found.highest_id.max(id);
        let path = Path::from(CheckpointMetadata::path(job, id));
        let read = async {
            let bytes = storage.get(&path).await?.bytes().await?;
            anyhow::Ok(serde_json::from_slice::<CheckpointMetadata>(&bytes)?)
        };
        match read.await {
            Ok(c) if c.id == id => found.completed.push(c),
            Ok(c) => tracing::warn!("{path} names checkpoint {}; skipped", c.id),
            Err(e) => tracing::debug!("checkpoint {id} of job {job} did not complete: {e:#}"),
        }
    }
    found.completed.sort_by_key(|c| c.id);
    let keep = found.completed.len().saturating_sub(retained.max(1));
    found.completed.drain(..keep);
    Ok(found)
}
