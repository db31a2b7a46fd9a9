//! Reference counts of the files that incremental checkpoints share
//! (Flink's `SharedStateRegistry`): a RocksDB SST file is uploaded once and
//! referred to by every retained checkpoint that holds it; it is deleted
//! when the last of them is.

use std::collections::HashMap;

use weir_model::checkpoint::CheckpointMetadata;

/// Shared files by storage path, and how many retained checkpoints hold
/// each.
#[derive(Debug, Default)]
pub struct SharedStateRegistry {
    counts: HashMap<String, u32>,
}

impl SharedStateRegistry {
    /// A completed checkpoint holds its shared files.
    pub fn register(&mut self, checkpoint: &CheckpointMetadata) {
        for f in checkpoint.files().filter(|f| f.shared) {
            *self.counts.entry(f.path.clone()).or_default() += 1;
        }
    }

    /// A checkpoint is discarded: the shared files no other retained
    /// checkpoint holds, to delete.
    pub fn release(&mut self, checkpoint: &CheckpointMetadata) -> Vec<String> {
        let mut unused = Vec::new();
        for f in checkpoint.files().filter(|f| f.shared) {
            if let Some(n) = self.counts.get_mut(&f.path) {
                *n -= 1;
                if *n == 0 {
                    self.counts.remove(&f.path);
                    unused.push(f.path.clone());
                }
            }
        }
        unused
    }

    /// Whether a retained checkpoint holds the file at `path`.
    pub fn holds(&self, path: &str) -> bool {
        self.counts.contains_key(path)
    }

    /// How many files are shared now.
    pub fn len(&self) -> usize {
        self.counts.len()
    }

    /// Whether no file is shared.
    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }
}
