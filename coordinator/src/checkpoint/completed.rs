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
    /// Checkpoints whose metadata is there but cannot be read or parsed
    /// (corrupt): id and why. One newer than every completed one may have
    /// had its output committed.
    pub unreadable: Vec<(u64, String)>,
}

/// Read back the completed checkpoints of job `job` from `storage`
/// (`<job>/chk-<id>/_metadata`). A checkpoint without metadata never
/// completed; one whose metadata is there but cannot be read or parsed is
/// listed as unreadable.
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
        let bytes = match storage.get(&path).await {
            Ok(got) => got
                .bytes()
                .await
                .map_err(|e| anyhow::anyhow!("reading {path}: {e}"))?,
            Err(object_store::Error::NotFound { .. }) => {
                tracing::debug!("checkpoint {id} of job {job} did not complete");
                continue;
            }
            // The storage did not answer: no guess at what it holds.
            Err(e) => anyhow::bail!("reading {path}: {e}"),
        };
        match serde_json::from_slice::<CheckpointMetadata>(&bytes) {
            Ok(c) if c.id == id => found.completed.push(c),
            Ok(c) => {
                tracing::warn!("{path} names checkpoint {}; skipped", c.id);
                found
                    .unreadable
                    .push((id, format!("{path} names checkpoint {}", c.id)));
            }
            Err(e) => {
                tracing::warn!("checkpoint {id} of job {job}: {path} is corrupt: {e}");
                found
                    .unreadable
                    .push((id, format!("{path} is corrupt: {e}")));
            }
        }
    }
    found.completed.sort_by_key(|c| c.id);
    let keep = found.completed.len().saturating_sub(retained.max(1));
    found.completed.drain(..keep);
    Ok(found)
}
