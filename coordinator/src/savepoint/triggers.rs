//! The savepoints the API triggered, by job and trigger id: what
//! `GET /v1/jobs/{id}/savepoints/{trigger}` answers. A client may name its
//! trigger: triggering again with the same id answers the first one's
//! status (a retry takes no second savepoint).

use std::collections::BTreeMap;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

/// Where a savepoint stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TriggerState {
    /// Being taken.
    InProgress,
    /// Written: `location` holds it.
    Completed,
    /// Not taken: `error` says why.
    Failed,
}

/// One savepoint trigger.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavepointStatus {
    /// The trigger's id.
    pub trigger_id: String,
    /// The job.
    pub job: String,
    /// Where it stands.
    pub status: TriggerState,
    /// Taken to stop the job.
    pub stop: bool,
    /// What it was taken for: `savepoint`, `stop`, `rescale` or `upgrade`.
    #[serde(default)]
    pub purpose: String,
    /// Its directory (where it is being written, then where it is).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    /// The checkpoint id it was taken as.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<u64>,
    /// Bytes of keyed state it holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_bytes: Option<u64>,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// When it was triggered, ms since the epoch.
    pub triggered_at_ms: i64,
    /// When it completed or failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at_ms: Option<i64>,
    /// A rescale's parallelism: the job starts again at it from the
    /// savepoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallelism: Option<u32>,
    /// The job started from it (a rescale), once it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resumed_as: Option<String>,
    /// Deleted since (its directory is gone).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deleted: bool,
}

/// Every trigger since the coordinator started.
#[derive(Debug, Default)]
pub struct Triggers {
    by_job: Mutex<BTreeMap<String, Vec<SavepointStatus>>>,
}

impl Triggers {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Vec<SavepointStatus>>> {
        self.by_job.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Record a new trigger `trigger` of `job` for `purpose` (a stop but
    /// for `savepoint`; `parallelism`: a rescale's), writing into `dir`,
    /// unless one with that id exists: then its status, and `false`.
    /// `None` when another savepoint is being written into `dir`.
    pub fn begin(
        &self,
        job: &str,
        trigger: &str,
        purpose: &str,
        parallelism: Option<u32>,
        dir: &std::path::Path,
    ) -> Option<(SavepointStatus, bool)> {
        let mut all = self.lock();
        if let Some(s) = all
            .get(job)
            .and_then(|l| l.iter().find(|s| s.trigger_id == trigger))
        {
            return Some((s.clone(), false));
        }
        // One savepoint at a time per directory (the path as written,
        // without a trailing `/`).
        let dir: std::path::PathBuf = dir.components().collect();
        let location = dir.display().to_string();
        if all.values().flatten().any(|s| {
            s.status == TriggerState::InProgress && s.location.as_deref() == Some(location.as_str())
        }) {
            return None;
        }
        let list = all.entry(job.to_owned()).or_default();
        let status = SavepointStatus {
            trigger_id: trigger.to_owned(),
            job: job.to_owned(),
            status: TriggerState::InProgress,
            stop: purpose != "savepoint",
            purpose: purpose.to_owned(),
            location: Some(location),
            checkpoint: None,
            size_bytes: None,
            error: None,
            triggered_at_ms: weir_model::now_ms(),
            ended_at_ms: None,
            parallelism,
            resumed_as: None,
            deleted: false,
        };
        list.push(status.clone());
        Some((status, true))
    }

    /// Change trigger `trigger` of `job` with `f`.
    pub fn update(&self, job: &str, trigger: &str, f: impl FnOnce(&mut SavepointStatus)) {
        if let Some(s) = self
            .lock()
            .get_mut(job)
            .and_then(|l| l.iter_mut().find(|s| s.trigger_id == trigger))
        {
            f(s);
        }
    }

    /// Trigger `trigger` of `job`.
    pub fn get(&self, job: &str, trigger: &str) -> Option<SavepointStatus> {
        self.lock()
            .get(job)
            .and_then(|l| l.iter().find(|s| s.trigger_id == trigger).cloned())
    }

    /// Every trigger of `job`, oldest first.
    pub fn of(&self, job: &str) -> Vec<SavepointStatus> {
        self.lock().get(job).cloned().unwrap_or_default()
    }
}
