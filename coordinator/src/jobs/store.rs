//! Where job records are kept: one JSON file per job under
//! `data_dir/jobs`, replaced atomically (written aside, then renamed), so a
//! restarted coordinator lists its jobs again.

use std::path::{Path, PathBuf};

use crate::error::ApiError;
use crate::jobs::JobInfo;

/// The job records of one coordinator.
pub struct JobStore {
    dir: PathBuf,
}

impl JobStore {
    /// Open (creating) the records under `data_dir/jobs`, and read them all.
    pub fn open(data_dir: &Path) -> anyhow::Result<(JobStore, Vec<JobInfo>)> {
        let dir = data_dir.join("jobs");
        std::fs::create_dir_all(&dir)?;
        let mut records = Vec::new();
        for entry in std::fs::read_dir(&dir)? {
            let path = entry?.path();
            if path.extension().is_none_or(|e| e != "json") {
                continue;
            }
            let info: JobInfo = serde_json::from_slice(&std::fs::read(&path)?)
                .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
            records.push(info);
        }
        Ok((JobStore { dir }, records))
    }

    fn path(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.json"))
    }

    /// Write a job's record, as one replacement.
    pub async fn persist(&self, info: &JobInfo) -> Result<(), ApiError> {
        let path = self.path(&info.id);
        let tmp = self.dir.join(format!(".{}.tmp", info.id));
        let bytes =
            serde_json::to_vec_pretty(info).map_err(|e| ApiError::internal(e.to_string()))?;
        tokio::fs::write(&tmp, bytes)
            .await
            .map_err(|e| ApiError::internal(format!("{}: {e}", tmp.display())))?;
        tokio::fs::rename(&tmp, &path)
            .await
            .map_err(|e| ApiError::internal(format!("{}: {e}", path.display())))
    }

    /// Write a record while opening (before the runtime serves anything).
    pub fn persist_now(&self, info: &JobInfo) -> anyhow::Result<()> {
        std::fs::write(self.path(&info.id), serde_json::to_vec_pretty(info)?)?;
        Ok(())
    }

    /// Forget a job that was never accepted.
    pub async fn remove(&self, id: &str) {
        let _ = tokio::fs::remove_file(self.path(id)).await;
    }
}
