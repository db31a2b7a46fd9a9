//! The asynchronous part of a checkpoint: a subtask's local snapshot files
//! go to the checkpoint storage while the subtask goes on processing, and
//! the acknowledgement reports where they went.
//!
//! RocksDB checkpoints are incremental: an SST file never changes once
//! written, so one that the last completed checkpoint already holds is not
//! uploaded again; the new checkpoint refers to the same object. Every other
//! file (RocksDB's metadata, the memory backend's state file) belongs to its
//! checkpoint alone.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use object_store::ObjectStore;
use object_store::path::Path as ObjectPath;
use weir_model::checkpoint::{OperatorStateHandle, StateFile, TaskStateHandle};
use weir_state::snapshot::SnapshotFormat;

use super::TaskAck;

/// Shared files by name, of one operator instance (vertex, subtask).
type SharedFiles = HashMap<String, StateFile>;

/// Per operator instance (vertex, subtask), its shared files.
type Instances = Vec<((usize, u32), SharedFiles)>;

/// Uploads the snapshots of one job's subtasks in this process.
pub struct Uploader {
    store: Arc<dyn ObjectStore>,
    job: String,
    attempt: u32,
    /// Whether files that checkpoints can share are shared (uploaded once)
    /// or uploaded into each checkpoint again (full checkpoints).
    incremental: bool,
    /// Per (vertex, subtask): the shared files of the last completed
    /// checkpoint.
    confirmed: Mutex<HashMap<(usize, u32), SharedFiles>>,
    /// Per checkpoint not completed yet: the shared files each instance's
    /// snapshot holds.
    pending: Mutex<BTreeMap<u64, Instances>>,
}

impl Uploader {
    /// An uploader into `store` for attempt `attempt` of job `job`;
    /// `incremental`: RocksDB's SST files are uploaded once and shared.
    pub fn new(
        store: Arc<dyn ObjectStore>,
        job: &str,
        attempt: u32,
        incremental: bool,
    ) -> Uploader {
        Uploader {
            store,
            job: job.to_owned(),
            attempt,
            incremental,
            confirmed: Mutex::default(),
            pending: Mutex::default(),
        }
    }

    /// Start from the shared files of a restored checkpoint (they are in
    /// the storage already).
    pub fn seed(&self, vertex: usize, subtask: u32, files: &[StateFile]) {
        let shared = files
            .iter()
            .filter(|f| f.shared)
            .map(|f| (f.name.clone(), f.clone()))
            .collect();
        self.confirmed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert((vertex, subtask), shared);
    }

    /// Checkpoint `id` completed: its shared files are the ones later
    /// checkpoints need not upload.
    pub fn completed(&self, id: u64) {
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        let later = pending.split_off(&(id + 1));
        let done = std::mem::replace(&mut *pending, later);
        drop(pending);
        let mut confirmed = self.confirmed.lock().unwrap_or_else(|p| p.into_inner());
        for (checkpoint, instances) in done {
            if checkpoint == id {
                for (key, files) in instances {
                    confirmed.insert(key, files);
                }
            }
        }
    }

    /// Upload `file` (of `size` bytes, as the snapshot recorded it) to
    /// `path`; returns its sha256.
    async fn put(&self, path: &str, file: &std::path::Path, size: u64) -> anyhow::Result<String> {
        // A chunk at a time: a large SST file or savepoint file is never
        // held in memory whole.
        let written = weir_model::storage::transfer::put_file(
            self.store.as_ref(),
            &ObjectPath::from(path),
            file,
        )
        .await
        .map_err(|e| anyhow::anyhow!("uploading {path}: {e:#}"))?;
        // A file that changed under the upload would make a checkpoint no
        // restore accepts.
        anyhow::ensure!(
            written.size == size,
            "uploading {path}: {} had {size} bytes, {} went up",
            file.display(),
            written.size
        );
        Ok(written.sha256)
    }

    /// Upload a subtask's snapshot; returns what its acknowledgement holds.
    /// The local files are removed in any case.
    pub async fn upload(&self, ack: TaskAck) -> anyhow::Result<TaskStateHandle> {
        let dir = ack.snapshot.dir.clone();
        let result = self.upload_files(ack).await;
        if let Some(dir) = dir {
            let _ = tokio::fs::remove_dir_all(&dir).await;
        }
        result
    }

    async fn upload_files(&self, ack: TaskAck) -> anyhow::Result<TaskStateHandle> {
        if let Some(why) = &ack.snapshot.declined {
            anyhow::bail!("{why}");
        }
        let started = Instant::now();
        let (id, subtask) = (ack.checkpoint, ack.subtask);
        let s = ack.snapshot;
        let mut handle = TaskStateHandle {
            sources: s.sources,
            sinks: s.sinks,
            operators: Vec::new(),
            alignment_ms: s.alignment_ms,
            sync_ms: s.sync_ms,
            finished: s.finished,
            ..TaskStateHandle::default()
        };
        for (vertex, local) in s.operators {
            let known = self
                .confirmed
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get(&(vertex, subtask))
                .cloned()
                .unwrap_or_default();
            let mut files = Vec::new();
            let mut shared = SharedFiles::new();
            for mut f in local.files {
                // A full checkpoint owns every file it refers to.
                f.shared &= self.incremental;
                let file = match known.get(&f.name).filter(|k| f.shared && k.size == f.size) {
                    Some(k) => k.clone(),
                    None => {
                        let path = if f.shared {
                            format!(
                                "{}/shared/{vertex}-{subtask}-a{}-c{id}-{}",
                                self.job, self.attempt, f.name
                            )
                        } else {
                            // The attempt is in the path: a cut-off attempt's
                            // late upload never lands on the live one's file.
                            format!(
                                "{}/chk-{id}/{vertex}-{subtask}-a{}/{}",
                                self.job, self.attempt, f.name
                            )
                        };
                        let sha256 = self.put(&path, &f.path, f.size).await?;
                        handle.uploaded_bytes += f.size;
                        StateFile {
                            name: f.name.clone(),
                            path,
                            size: f.size,
                            shared: f.shared,
                            sha256,
                        }
                    }
                };
                handle.state_bytes += file.size;
                if file.shared {
                    shared.insert(file.name.clone(), file.clone());
                }
                files.push(file);
            }
            self.pending
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .entry(id)
                .or_default()
                .push(((vertex, subtask), shared));
            handle.operators.push(OperatorStateHandle {
                vertex,
                format: match local.format {
                    SnapshotFormat::Full => "full".into(),
                    SnapshotFormat::RocksDb => "rocksdb".into(),
                },
                files,
            });
        }
        if let Some((path, bytes)) = &s.inflight {
            let size = tokio::fs::metadata(path)
                .await
                .map_err(|e| anyhow::anyhow!("reading {}: {e}", path.display()))?
                .len();
            let name = format!("inflight-{}-{subtask}", ack.task);
            let into = format!("{}/chk-{id}/{name}-a{}", self.job, self.attempt);
            let sha256 = self.put(&into, path, size).await?;
            handle.uploaded_bytes += size;
            handle.inflight_bytes = *bytes;
            handle.inflight = Some(StateFile {
                name,
                path: into,
                size,
                shared: false,
                sha256,
            });
        }
        handle.async_ms = super::ms(started.elapsed());
        Ok(handle)
    }
}
