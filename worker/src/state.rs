//! Where the operators of a job's subtasks keep their keyed state: the
//! job's backend (its manifest's `[state] backend`, else the worker's
//! default) and, for RocksDB, a directory per operator instance under the
//! worker's data directory (`<data-dir>/state/<job>/<vertex>-<subtask>-<n>`),
//! removed when the instance ends.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use weir_model::JobGraph;
use weir_model::fault_tolerance::StateBackendKind;
use weir_state::{MemoryStateBackend, RocksDbStateBackend, StateBackend};

/// How one job's operators in this process get their state backends.
#[derive(Debug, Clone)]
pub struct StateSetup {
    /// Which backend.
    pub backend: StateBackendKind,
    /// The job's directory (RocksDB).
    pub dir: PathBuf,
    /// The job's number of key groups.
    pub max_parallelism: u32,
    /// Tells instances of the same subtask apart (a restarted one gets a
    /// fresh directory).
    instances: Arc<AtomicU64>,
}

impl StateSetup {
    /// Everything in memory.
    pub fn in_memory() -> StateSetup {
        StateSetup {
            backend: StateBackendKind::Memory,
            dir: PathBuf::new(),
            max_parallelism: weir_model::keygroup::DEFAULT_MAX_PARALLELISM,
            instances: Arc::default(),
        }
    }

    /// The setup of job `job_id` (`graph`) on a process whose data
    /// directory is `data_dir` and whose default backend is `default`.
    pub fn for_job(
        graph: &JobGraph,
        job_id: &str,
        default: StateBackendKind,
        data_dir: &Path,
    ) -> StateSetup {
        StateSetup {
            backend: graph.state_backend.unwrap_or(default),
            dir: data_dir.join("state").join(job_id),
            max_parallelism: graph.max_parallelism,
            instances: Arc::default(),
        }
    }

    /// A backend for subtask `subtask` of vertex `vertex`.
    pub fn open(&self, vertex: usize, subtask: u32) -> anyhow::Result<Box<dyn StateBackend>> {
        Ok(match self.backend {
            StateBackendKind::Memory => {
                Box::new(MemoryStateBackend::with_key_groups(self.max_parallelism))
            }
            StateBackendKind::RocksDb => {
                let n = self.instances.fetch_add(1, Ordering::Relaxed);
                let dir = self.dir.join(format!("{vertex}-{subtask}-{n}"));
                Box::new(RocksDbStateBackend::open(&dir, self.max_parallelism)?)
            }
        })
    }

    /// Remove the job's directory (its instances removed their own; this
    /// takes what a crash may have left).
    pub fn remove(&self) {
        if self.backend == StateBackendKind::RocksDb
            && self.dir.exists()
            && let Err(e) = std::fs::remove_dir_all(&self.dir)
        {
            tracing::warn!("cannot remove {}: {e}", self.dir.display());
        }
    }
}

/// Parse a backend's name, as flags and the manifest write it.
pub fn parse_backend(name: &str) -> Result<StateBackendKind, String> {
    match name {
        "memory" => Ok(StateBackendKind::Memory),
        "rocksdb" => Ok(StateBackendKind::RocksDb),
        other => Err(format!(
            "unknown state backend {other:?}: \"memory\" or \"rocksdb\""
        )),
    }
}
