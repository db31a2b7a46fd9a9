//! The dispatcher's savepoints: triggered over the API (asynchronous: a
//! trigger id at once, its status on request), stopped jobs, deleted
//! savepoints, and the savepoint a submission starts from.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use weir_model::access::Use;
use weir_model::checkpoint::{CheckpointLayout, CheckpointMetadata};

use super::dispatcher::Jobs;
use super::{JobInfo, JobRequest, SavepointRequest, UpgradeRequest};
use crate::error::CoordinatorError;
use crate::job_master::SavepointStart;
use crate::job_state::JobState;
use crate::savepoint::triggers::{SavepointStatus, TriggerState};

fn unprocessable(code: &'static str, message: String) -> CoordinatorError {
    CoordinatorError::unprocessable(code, message)
}

fn conflict(code: &'static str, message: String) -> CoordinatorError {
    CoordinatorError::new(crate::error::ErrorKind::Conflict, code, message)
}

/// Whether the savepoint's directory `dir` can be made and written.
fn writable(dir: &Path) -> Result<(), CoordinatorError> {
    let probe = dir.join(".weir-probe");
    std::fs::create_dir_all(dir)
        .and_then(|()| std::fs::write(&probe, b""))
        .and_then(|()| std::fs::remove_file(&probe))
        .map_err(|e| {
            unprocessable(
                "savepoint_path_invalid",
                format!(
                    "cannot write the savepoint's directory {}: {e}",
                    dir.display()
                ),
            )
        })
}

impl Jobs {
    /// A directory named in a request, as the granted directories allow
    /// it for `what`: absolute, inside one of them when the cluster grants
    /// any.
    fn savepoint_path(
        &self,
        what: &str,
        path: &str,
        use_: Use,
    ) -> Result<PathBuf, CoordinatorError> {
        if !Path::new(path).is_absolute() {
            return Err(unprocessable(
                "savepoint_path_invalid",
                format!("{what} {path:?}: give an absolute path on the coordinator's machine"),
            ));
        }
        let given = Path::new(path);
        // The coordinator's own savepoints (where they go by default), and
        // anything the granted directories hold.
        let own = given.starts_with(&self.savepoints_dir)
            && !given
                .components()
                .any(|c| c == std::path::Component::ParentDir);
        if self.allowed.roots().is_none() || own {
            return Ok(given.to_owned());
        }
        self.allowed
            .check(what, path, use_)
            .map_err(|e| unprocessable("path_not_allowed", e.to_string()))
    }

    /// The savepoint a submission starts from, read and checked: a
    /// savepoint's directory, or a retained checkpoint's (written out as a
    /// savepoint first).
    pub(super) async fn savepoint_to_start(
        &self,
        path: &str,
        allow_non_restored: bool,
    ) -> Result<SavepointStart, CoordinatorError> {
        // (A directory: checked as a sink's directory is; the coordinator's
        // own checkpoints are read only.)
        let given = Path::new(path);
        let dir = if given.is_absolute()
            && given.starts_with(&self.checkpoints_dir)
            && !given
                .components()
                .any(|c| c == std::path::Component::ParentDir)
        {
            given.to_owned()
        } else {
            self.savepoint_path("the savepoint", path, Use::Write)?
        };
        let dir = weir_model::savepoint::directory_of(&dir).to_owned();
        if let Some(retained) = crate::savepoint::retained::read(&dir) {
            return self.retained_to_start(&retained?, allow_non_restored).await;
        }
        let metadata = crate::savepoint::read(&dir)?;
        Ok(SavepointStart {
            dir,
            metadata,
            allow_non_restored,
            scratch: None,
        })
    }

    /// What the vertex ids of checkpoint `c` stand for: its own layout, or
    /// (a checkpoint of an older version, without one) its job's — `info`,
    /// if this coordinator knows it — planned again from its bundle with
    /// its parameters and parallelism.
    pub(super) async fn layout_of(
        &self,
        c: &CheckpointMetadata,
        info: Option<&JobInfo>,
    ) -> Result<CheckpointLayout, CoordinatorError> {
        if let Some(layout) = &c.layout {
            return Ok(layout.clone());
        }
        let Some(info) = info else {
            return Err(unprocessable(
                "checkpoint_job_unknown",
                format!(
                    "checkpoint {} is of job `{}`, which this coordinator does not know, and does not name its vertices (taken by an older version): take a savepoint instead",
                    c.id, c.job
                ),
            ));
        };
        let (graph, _) = self.plan(&JobRequest::of(info)).await.map_err(|e| {
            unprocessable(
                "checkpoint_job_unplannable",
                format!(
                    "checkpoint {} of job `{}` does not name its vertices (taken by an older version), and that job cannot be planned again to name them: {}",
                    c.id, c.job, e.message
                ),
            )
        })?;
        let mut layout = crate::savepoint::layout(&graph);
        // How the old version encoded its keys is not known: not claimed.
        for v in &mut layout.vertices {
            v.keys = None;
        }
        Ok(layout)
    }

    /// A retained checkpoint written out as a savepoint: its layout names
    /// its vertices (in a checkpoint without one, its job, planned again
    /// from its bundle with its parameters and parallelism, does).
    async fn retained_to_start(
        &self,
        retained: &crate::savepoint::retained::Retained,
        allow_non_restored: bool,
    ) -> Result<SavepointStart, CoordinatorError> {
        let c = &retained.checkpoint;
        let known = self.get(&c.job).await.ok();
        let layout = self.layout_of(c, known.as_ref()).await?;
        // Only a job this coordinator saw end hands its output over.
        let ended = known
            .as_ref()
            .is_some_and(|i| i.state.is_terminal() && i.state != JobState::Finished);
        let stopped =
            crate::savepoint::retained::ends_its_job(retained, ended, &self.checkpoints_dir)
                .await?;
        let (scratch, metadata) = crate::savepoint::retained::as_savepoint(
            retained,
            &layout,
            &self.savepoints_dir,
            stopped,
        )
        .await?;
        Ok(SavepointStart {
            dir: scratch.path().to_owned(),
            metadata,
            allow_non_restored,
            scratch: Some(Arc::new(scratch)),
        })
    }

    /// Trigger a savepoint of running job `id` (and, with `stop`, stop the
    /// job after it): its status at once; it is taken in the background.
    pub async fn trigger_savepoint(
        self: &Arc<Self>,
        id: &str,
        request: SavepointRequest,
        stop: bool,
    ) -> Result<SavepointStatus, CoordinatorError> {
        self.trigger(id, request, stop, None).await
    }

    /// Rescale running job `id`: stop it with a savepoint, then start its
    /// bundle, with its parameters, at `parallelism` from the savepoint
    /// (Flink's rescaling). Asynchronous: the stop's trigger at once; its
    /// status names the new job (`resumed_as`) once it runs. Refused (and
    /// the job left running) when the job could not start at
    /// `parallelism`.
    pub async fn rescale(
        self: &Arc<Self>,
        id: &str,
        parallelism: u32,
    ) -> Result<SavepointStatus, CoordinatorError> {
        if parallelism == 0 {
            return Err(unprocessable(
                "job_invalid",
                "parallelism must be at least 1".into(),
            ));
        }
        let info = self.get(id).await?;
        let again = JobRequest {
            parallelism: Some(parallelism),
            ..JobRequest::of(&info)
        };
        // Planned now: a parallelism the job cannot have is refused before
        // the job is stopped.
        self.check_restart(&info, &again).await?;
        self.trigger(id, SavepointRequest::default(), true, Some(again))
            .await
    }

    /// Upgrade running job `id` to bundle `bundle`: stop it with a
    /// savepoint, then start `bundle`, with the job's parameters and
    /// parallelism, from it (state matched by vertex name). Asynchronous,
    /// as [`Jobs::rescale`]; refused (and the job left running) when the
    /// new bundle's job cannot be planned.
    pub async fn upgrade(
        self: &Arc<Self>,
        id: &str,
        request: UpgradeRequest,
    ) -> Result<SavepointStatus, CoordinatorError> {
        let info = self.get(id).await?;
        let again = JobRequest {
            bundle: request.bundle,
            allow_non_restored_state: request.allow_non_restored_state,
            ..JobRequest::of(&info)
        };
        self.check_restart(&info, &again).await?;
        self.trigger(id, SavepointRequest::default(), true, Some(again))
            .await
    }

    /// Whether the job `info` could start again as `again` from a savepoint
    /// of it: planned, and its state matched (by name, role, max
    /// parallelism and codec) — a 4xx before the job is stopped otherwise.
    async fn check_restart(
        &self,
        info: &super::JobInfo,
        again: &JobRequest,
    ) -> Result<(), CoordinatorError> {
        let (new, _) = self.plan(again).await?;
        let (old, _) = self.plan(&JobRequest::of(info)).await?;
        crate::savepoint::plan_restore(
            &crate::savepoint::expected(&old),
            &new,
            &info.id,
            1,
            again.allow_non_restored_state,
        )
        .map(|_| ())
    }

    /// Trigger a savepoint of job `id` (`stop`: and stop the job), and
    /// with `then`, start that job from it once the job has ended.
    async fn trigger(
        self: &Arc<Self>,
        id: &str,
        request: SavepointRequest,
        stop: bool,
        then: Option<JobRequest>,
    ) -> Result<SavepointStatus, CoordinatorError> {
        if request.drain && !stop {
            return Err(unprocessable(
                "drain_without_stop",
                "`drain` (the maximal watermark, so that every window fires) ends the job's event time: it goes with a stop only".into(),
            ));
        }
        if let Some(t) = &request.trigger_id
            && (t.is_empty()
                || t.len() > 64
                || !t
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'))
        {
            return Err(CoordinatorError::invalid(
                "trigger_id_invalid",
                format!("trigger id {t:?}: 1 to 64 letters, digits, `-` or `_`"),
            ));
        }
        let state = self.get(id).await?.state;
        if let Some(t) = &request.trigger_id
            && let Some(existing) = self.triggers.get(id, t)
        {
            // A retry: the first trigger's status.
            return Ok(existing);
        }
        if state == JobState::Running && self.checkpoints(id).await?.config.is_none() {
            return Err(conflict(
                "no_checkpoints",
                format!(
                    "job `{id}` takes no checkpoints: a savepoint is a checkpoint, and needs `[checkpoint]` in the job's manifest"
                ),
            ));
        }
        if state != JobState::Running {
            return Err(conflict(
                "job_not_running",
                format!(
                    "job `{id}` is {}: a savepoint is taken of a running job",
                    crate::jobs::state_name(state)
                ),
            ));
        }
        let trigger = request.trigger_id.clone().unwrap_or_else(|| self.new_id());
        let dir = match &request.directory {
            Some(d) => self.savepoint_path("the savepoint's directory", d, Use::Write)?,
            None => self
                .savepoints_dir
                .join(format!("savepoint-{}-{trigger}", &id[..id.len().min(8)])),
        };
        if dir.join(weir_model::savepoint::METADATA).exists() {
            return Err(conflict(
                "savepoint_exists",
                format!(
                    "{} holds a savepoint already (or one is being written there): give another directory",
                    dir.display()
                ),
            ));
        }
        // The directory must take files before the job is stopped for it.
        writable(&dir)?;
        let purpose = match (&then, stop) {
            (Some(again), _) if again.bundle != self.get(id).await?.bundle => "upgrade",
            (Some(_), _) => "rescale",
            (None, true) => "stop",
            (None, false) => "savepoint",
        };
        let parallelism = then
            .as_ref()
            .filter(|_| purpose == "rescale")
            .and_then(|again| again.parallelism);
        let Some((status, new)) = self
            .triggers
            .begin(id, &trigger, purpose, parallelism, &dir)
        else {
            return Err(conflict(
                "savepoint_exists",
                format!(
                    "a savepoint is being written into {} just now: give another directory",
                    dir.display()
                ),
            ));
        };
        if !new {
            return Ok(status);
        }
        let (me, job, drain) = (self.clone(), id.to_owned(), request.drain);
        tokio::spawn(async move {
            let taken = me.runner.savepoint(&job, &dir, stop, drain).await;
            if stop && taken.is_ok() {
                // The runner ended the job after its savepoint; the job is
                // canceled (unless it has ended already: a bounded input).
                let _ = me.cancel(&job).await;
            }
            let resumed = match (&taken, then) {
                (Ok(_), Some(mut again)) => {
                    again.from_savepoint = Some(dir.display().to_string());
                    Some(me.start_again(&job, again).await)
                }
                _ => None,
            };
            me.triggers.update(&job, &trigger, |s| {
                s.ended_at_ms = Some(weir_model::now_ms());
                match taken {
                    Ok(m) => {
                        s.status = TriggerState::Completed;
                        s.location = Some(dir.display().to_string());
                        s.checkpoint = Some(m.checkpoint);
                        s.size_bytes = Some(m.state_bytes());
                    }
                    Err(e) => {
                        s.status = TriggerState::Failed;
                        s.error = Some(e.to_string());
                    }
                }
                match resumed {
                    Some(Ok(new)) => s.resumed_as = Some(new),
                    Some(Err(e)) => {
                        s.error = Some(format!(
                            "the job stopped with this savepoint, but could not start again from it: {e}"
                        ));
                    }
                    None => {}
                }
            });
        });
        Ok(status)
    }

    /// Start `request` (from a savepoint of job `job`) once `job` has
    /// ended (its sinks' output passes to the new job then): the new job's
    /// id.
    async fn start_again(
        self: &Arc<Self>,
        job: &str,
        request: JobRequest,
    ) -> Result<String, CoordinatorError> {
        let started = std::time::Instant::now();
        while !self.get(job).await?.state.is_terminal() {
            if started.elapsed() > std::time::Duration::from_secs(60) {
                return Err(CoordinatorError::internal(format!(
                    "job `{job}` did not end within a minute of its savepoint"
                )));
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        Ok(self.submit(request).await?.id)
    }

    /// Trigger `trigger` of job `id`.
    pub async fn savepoint_status(
        &self,
        id: &str,
        trigger: &str,
    ) -> Result<SavepointStatus, CoordinatorError> {
        self.get(id).await?;
        self.triggers.get(id, trigger).ok_or_else(|| {
            CoordinatorError::not_found(
                "savepoint_not_found",
                format!("job `{id}` has no savepoint trigger `{trigger}`"),
            )
        })
    }

    /// Every savepoint triggered of job `id`, oldest first.
    pub async fn savepoints(&self, id: &str) -> Result<Vec<SavepointStatus>, CoordinatorError> {
        self.get(id).await?;
        Ok(self.triggers.of(id))
    }

    /// Delete the savepoint of trigger `trigger` of job `id`: its
    /// directory.
    pub async fn delete_savepoint(
        &self,
        id: &str,
        trigger: &str,
    ) -> Result<SavepointStatus, CoordinatorError> {
        let status = self.savepoint_status(id, trigger).await?;
        match (&status.status, &status.location) {
            (TriggerState::InProgress, _) => {
                return Err(conflict(
                    "savepoint_in_progress",
                    format!(
                        "savepoint `{trigger}` of job `{id}` is being taken: delete it once it completed"
                    ),
                ));
            }
            (TriggerState::Completed, Some(location)) if !status.deleted => {
                let dir = PathBuf::from(location);
                // Only what a savepoint is made of (its directory might
                // have been given by the user: nothing else of it goes).
                if let Ok(m) = crate::savepoint::read(&dir) {
                    for f in m.files() {
                        let _ = std::fs::remove_file(dir.join(&f.file));
                    }
                }
                let _ = std::fs::remove_dir(dir.join("state"));
                match std::fs::remove_file(dir.join(weir_model::savepoint::METADATA)) {
                    // Removed by hand already: it is gone all the same.
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => {
                        return Err(CoordinatorError::internal(format!(
                            "cannot delete {location}: {e}"
                        )));
                    }
                }
                let _ = std::fs::remove_dir(&dir);
            }
            _ => {
                return Err(CoordinatorError::not_found(
                    "savepoint_not_found",
                    format!(
                        "savepoint `{trigger}` of job `{id}` was not written, or is deleted already"
                    ),
                ));
            }
        }
        self.triggers.update(id, trigger, |s| s.deleted = true);
        Ok(self.triggers.get(id, trigger).unwrap_or(status))
    }
}
