//! Where job records are kept: one JSON file per job under
//! `data_dir/jobs`, replaced atomically and durably (written aside and
//! synced, renamed, the directory synced) before a change is acknowledged,
//! so a restarted coordinator lists its jobs again. A record that cannot be
//! read (a torn write, a corrupt file) is set aside under `jobs/unreadable/`
//! and listed as an unreadable job with the reason; every other job
//! resumes.

use std::path::{Path, PathBuf};

use crate::error::CoordinatorError;
use crate::jobs::JobInfo;

/// The job records of one coordinator.
pub struct JobStore {
    dir: PathBuf,
}

impl JobStore {
    /// Open (creating) the records under `data_dir/jobs`, and read them
    /// all; those that cannot be read are set aside and come back as
    /// unreadable jobs.
    pub fn open(data_dir: &Path) -> anyhow::Result<(JobStore, Vec<JobInfo>)> {
        let dir = data_dir.join("jobs");
        let aside = dir.join("unreadable");
        std::fs::create_dir_all(&aside)
            .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", aside.display()))?;
        let mut records = Vec::new();
        let read_dir =
            |d: &Path| std::fs::read_dir(d).map_err(|e| anyhow::anyhow!("{}: {e}", d.display()));
        for entry in read_dir(&dir)? {
            let path = entry?.path();
            let name = path.file_name().unwrap_or_default().to_string_lossy();
            if name.starts_with('.') && name.ends_with(".tmp") {
                // A write that never reached its rename.
                let _ = std::fs::remove_file(&path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "json") {
                continue;
            }
            match read(&path) {
                Ok(info) => records.push(info),
                Err(why) => {
                    let to = aside.join(path.file_name().unwrap_or_default());
                    tracing::error!(
                        "the job record {} cannot be read ({why}); it is set aside as {}",
                        path.display(),
                        to.display()
                    );
                    std::fs::rename(&path, &to)
                        .map_err(|e| anyhow::anyhow!("setting {} aside: {e}", path.display()))?;
                    sync_dir(&dir)?;
                }
            }
        }
        for entry in read_dir(&aside)? {
            let path = entry?.path();
            let why = match read(&path) {
                Ok(_) => "it was unreadable when the coordinator started before".to_owned(),
                Err(why) => why,
            };
            records.push(unreadable(&path, why));
        }
        Ok((JobStore { dir }, records))
    }

    fn path(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.json"))
    }

    /// Write a job's record, as one replacement, durably: the change is on
    /// disk when this returns.
    pub async fn persist(&self, info: &JobInfo) -> Result<(), CoordinatorError> {
        let bytes = serde_json::to_vec_pretty(info)
            .map_err(|e| CoordinatorError::internal(e.to_string()))?;
        let (dir, id) = (self.dir.clone(), info.id.clone());
        tokio::task::spawn_blocking(move || replace(&dir, &id, &bytes))
            .await
            .map_err(|e| CoordinatorError::internal(e.to_string()))?
            .map_err(|e| CoordinatorError::internal(format!("{e:#}")))
    }

    /// Write a record while opening (before the runtime serves anything).
    pub fn persist_now(&self, info: &JobInfo) -> anyhow::Result<()> {
        replace(&self.dir, &info.id, &serde_json::to_vec_pretty(info)?)
    }

    /// Forget a job that was never accepted.
    pub async fn remove(&self, id: &str) {
        let _ = tokio::fs::remove_file(self.path(id)).await;
    }
}

/// Replace job `id`'s record in `dir` with `bytes`: written aside and
/// synced, renamed over the old one, the directory synced.
fn replace(dir: &Path, id: &str, bytes: &[u8]) -> anyhow::Result<()> {
    use std::io::Write;
    let tmp = dir.join(format!(".{id}.tmp"));
    let path = dir.join(format!("{id}.json"));
    let mut file = std::fs::File::create(&tmp)
        .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", tmp.display()))?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .map_err(|e| anyhow::anyhow!("writing {}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, &path)
        .map_err(|e| anyhow::anyhow!("renaming {} to {}: {e}", tmp.display(), path.display()))?;
    sync_dir(dir)
}

/// Sync directory `dir`, so that the names created or renamed in it are
/// on disk.
fn sync_dir(dir: &Path) -> anyhow::Result<()> {
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| anyhow::anyhow!("syncing {}: {e}", dir.display()))
}

/// A job record, or why it cannot be read.
fn read(path: &Path) -> Result<JobInfo, String> {
    let bytes = std::fs::read(path).map_err(|e| e.to_string())?;
    serde_json::from_slice(&bytes).map_err(|e| e.to_string())
}

/// The job an unreadable record at `path` stands for.
fn unreadable(path: &Path, why: String) -> JobInfo {
    let id = path
        .file_stem()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned();
    JobInfo {
        id,
        name: String::new(),
        bundle: String::new(),
        parallelism: None,
        state: crate::job_state::JobState::Unreadable,
        error: Some(format!(
            "its record {} cannot be read: {why}",
            path.display()
        )),
        params: Default::default(),
        vertices: Vec::new(),
        subtasks: Vec::new(),
        graph: Default::default(),
        exceptions: Vec::new(),
        submitted_at_ms: 0,
        ended_at_ms: None,
        checkpoints: None,
        attempt: 0,
        restarts: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_torn_record_is_set_aside_and_named_and_the_others_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let (store, none) = JobStore::open(dir.path()).unwrap();
        assert!(none.is_empty());
        let mut good = unreadable(Path::new("good.json"), String::new());
        good.state = crate::job_state::JobState::Finished;
        good.error = None;
        store.persist_now(&good).unwrap();
        let jobs = dir.path().join("jobs");
        std::fs::write(jobs.join("torn.json"), b"{\"id\": \"torn\", \"na").unwrap();
        std::fs::write(jobs.join(".half.tmp"), b"{").unwrap();
        for _ in 0..2 {
            // Set aside once, and named again at every start.
            let (_, mut records) = JobStore::open(dir.path()).unwrap();
            records.sort_by(|a, b| a.id.cmp(&b.id));
            assert_eq!(records.len(), 2, "{records:#?}");
            assert_eq!(records[0], good);
            assert_eq!(records[1].id, "torn");
            assert_eq!(records[1].state, crate::job_state::JobState::Unreadable);
            let why = records[1].error.clone().unwrap();
            assert!(why.contains("torn.json") && why.contains("EOF"), "{why}");
        }
        assert!(!jobs.join("torn.json").exists());
        assert!(jobs.join("unreadable/torn.json").exists());
        assert!(!jobs.join(".half.tmp").exists());
    }
}
