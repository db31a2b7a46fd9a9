//! Where the operators of a job's subtasks keep their keyed state: the
//! job's backend (its manifest's `[state] backend`, else the worker's
//! default) and, for RocksDB, a directory per operator instance under the
//! worker's data directory (`<data-dir>/state/<job>/<vertex>-<subtask>-<n>`),
//! removed when the instance ends.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use weir_model::JobGraph;
use weir_model::keygroup::key_groups_of;

use crate::checkpoint::restore::Restore;
use weir_model::fault_tolerance::StateBackendKind;
use weir_state::{MemoryStateBackend, StateBackend};

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
    /// The checkpoint the job starts from, if any.
    pub restore: Option<Arc<Restore>>,
}

impl StateSetup {
    /// Everything in memory.
    pub fn in_memory() -> StateSetup {
        StateSetup {
            backend: StateBackendKind::Memory,
            dir: PathBuf::new(),
            max_parallelism: weir_model::keygroup::DEFAULT_MAX_PARALLELISM,
            instances: Arc::default(),
            restore: None,
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
            restore: None,
        }
    }

    /// A backend for subtask `subtask` (of `parallelism`) of vertex
    /// `vertex`: empty, or holding the key groups it owns in the
    /// checkpoint the job starts from; its states' time-to-live kept over
    /// it ([`weir_state::ttl`]).
    pub fn open(
        &self,
        vertex: usize,
        subtask: u32,
        parallelism: u32,
    ) -> anyhow::Result<Box<dyn StateBackend>> {
        let backend = self.open_backend(vertex, subtask, parallelism)?;
        Ok(Box::new(weir_state::ttl::TtlBackend::new(backend)))
    }

    fn open_backend(
        &self,
        vertex: usize,
        subtask: u32,
        parallelism: u32,
    ) -> anyhow::Result<Box<dyn StateBackend>> {
        let restored = match &self.restore {
            Some(r) => r.operator(vertex, subtask),
            None => Vec::new(),
        };
        let id = self.restore.as_ref().map_or(0, |r| r.checkpoint.id);
        let groups = key_groups_of(subtask, self.max_parallelism, parallelism);
        // Canonical files (a savepoint's, the memory backend's) restore
        // into either backend, by key group.
        let canonical: Option<Vec<PathBuf>> = restored
            .iter()
            .map(|(f, d)| (*f == "full").then(|| d.join(weir_state::canonical::FILE)))
            .collect();
        Ok(match (self.backend, &restored[..], canonical) {
            (StateBackendKind::Memory, [], _) => {
                Box::new(MemoryStateBackend::with_key_groups(self.max_parallelism))
            }
            (StateBackendKind::Memory, _, Some(files)) => Box::new(MemoryStateBackend::restore(
                &files,
                self.max_parallelism,
                groups,
            )?),
            (StateBackendKind::Memory, _, None) => anyhow::bail!(
                "checkpoint {id} holds this operator's state in RocksDB's own format; the job now keeps it in memory (a savepoint's state restores into either backend)"
            ),
            (StateBackendKind::RocksDb, restored, canonical) => {
                let n = self.instances.fetch_add(1, Ordering::Relaxed);
                let dir = self.dir.join(format!("{vertex}-{subtask}-{n}"));
                match (restored, canonical) {
                    ([], _) => open_rocksdb(&dir, self.max_parallelism)?,
                    ([("rocksdb", from)], _) => {
                        link_files(from, &dir)?;
                        open_rocksdb(&dir, self.max_parallelism)?
                    }
                    (_, Some(files)) => {
                        let mut b = open_rocksdb(&dir, self.max_parallelism)?;
                        weir_state::canonical::restore(
                            &mut *b,
                            self.max_parallelism,
                            &files,
                            &groups,
                        )?;
                        b
                    }
                    _ => anyhow::bail!(
                        "checkpoint {id} holds this operator's state in several RocksDB databases, which a restore does not merge (a savepoint's state restores at any parallelism)"
                    ),
                }
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

/// Hard-link (or, across file systems, copy) every file of `from` into the
/// new directory `to`.
fn link_files(from: &Path, to: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(to)?;
    for e in std::fs::read_dir(from)? {
        let e = e?;
        let target = to.join(e.file_name());
        if std::fs::hard_link(e.path(), &target).is_err() {
            std::fs::copy(e.path(), &target)?;
        }
    }
    Ok(())
}

/// Parse a backend's name, as flags and the manifest write it.
pub fn parse_backend(name: &str) -> Result<StateBackendKind, String> {
    match name {
        "memory" => Ok(StateBackendKind::Memory),
        #[cfg(feature = "rocksdb")]
        "rocksdb" => Ok(StateBackendKind::RocksDb),
        #[cfg(not(feature = "rocksdb"))]
        "rocksdb" => Err(
            "this weir was built without RocksDB (`--no-default-features`, as the demo's): build it with `cargo build --release`".into(),
        ),
        other => Err(format!(
            "unknown state backend {other:?}: \"memory\" or \"rocksdb\""
        )),
    }
}

/// A RocksDB backend in `dir`.
#[cfg(feature = "rocksdb")]
fn open_rocksdb(dir: &Path, max_parallelism: u32) -> anyhow::Result<Box<dyn StateBackend>> {
    Ok(Box::new(weir_state::RocksDbStateBackend::open(
        dir,
        max_parallelism,
    )?))
}

/// A build without RocksDB cannot open one.
#[cfg(not(feature = "rocksdb"))]
fn open_rocksdb(_dir: &Path, _max_parallelism: u32) -> anyhow::Result<Box<dyn StateBackend>> {
    anyhow::bail!(
        "this weir was built without RocksDB (`--no-default-features`, as the demo's): build it with `cargo build --release`, or use the memory state backend"
    )
}
