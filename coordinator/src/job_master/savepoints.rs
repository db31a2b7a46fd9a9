//! Savepoints of a running job, and jobs started from one: the job master
//! decides both, as it decides every checkpoint and restart of its job.

use std::path::Path;
use std::sync::Arc;

use object_store::ObjectStoreExt;
use object_store::path::Path as ObjectPath;
use weir_model::JobGraph;
use weir_model::savepoint::SavepointMetadata;

use super::JobMasters;
use crate::error::CoordinatorError;
use crate::savepoint::RestorePlan;

fn conflict(code: &'static str, message: String) -> CoordinatorError {
    CoordinatorError::new(crate::error::ErrorKind::Conflict, code, message)
}

impl JobMasters {
    /// Take a savepoint of job `id` into the directory `dir`; with `stop`,
    /// the job's last checkpoint (none is triggered after it), after which
    /// the job is canceled — with `drain`, after the maximal watermark
    /// fired every window. Waits until it is written (or failed).
    pub async fn savepoint(
        self: &Arc<Self>,
        id: &str,
        dir: &Path,
        stop: bool,
        drain: bool,
    ) -> Result<SavepointMetadata, CoordinatorError> {
        let not_running = || {
            conflict(
                "job_not_running",
                format!("job `{id}` is not running: a savepoint is taken of a running job"),
            )
        };
        let master = self.master(id).ok_or_else(not_running)?;
        let (coordinator, plan, attempt) = {
            let m = master.lock().await;
            if m.ended() {
                return Err(not_running());
            }
            if m.plan.graph.checkpoint.is_none() || m.plan.storage.is_none() {
                return Err(conflict(
                    "no_checkpoints",
                    format!(
                        "job `{id}` takes no checkpoints: a savepoint is a checkpoint, and needs `[checkpoint]` in the job's manifest (and the coordinator's checkpoint storage)"
                    ),
                ));
            }
            let Some(c) = m.checkpoints.clone() else {
                return Err(conflict(
                    "job_restarting",
                    format!("job `{id}` is between two attempts: try again once it runs"),
                ));
            };
            (c, m.plan.clone(), m.attempt)
        };
        let (tell, told) = tokio::sync::oneshot::channel();
        coordinator.trigger_savepoint(stop, drain, tell).await;
        let checkpoint = match told.await {
            Ok(Ok(c)) => c,
            Ok(Err(why)) => {
                if drain {
                    self.fail_drained(id, attempt, &why).await;
                }
                return Err(conflict(
                    "savepoint_failed",
                    format!("the savepoint of job `{id}` failed: {why}"),
                ));
            }
            Err(_) => {
                return Err(conflict(
                    "savepoint_failed",
                    format!("the savepoint of job `{id}` failed: the job's attempt ended"),
                ));
            }
        };
        if stop {
            // Its sinks committed what it holds, and nothing runs after
            // it: the job ends now — before the savepoint is written out,
            // so that no restart (a failure meanwhile) takes it on from
            // there. (The savepoint's files stay in the checkpoint storage.)
            let m = master.lock().await;
            m.stopped.store(true, std::sync::atomic::Ordering::Relaxed);
            m.cancel.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        let url = plan.storage.as_deref().expect("checked above");
        let store = weir_model::storage::open(url)
            .map_err(|e| CoordinatorError::internal(format!("{e:#}")))?;
        let written = crate::savepoint::write(
            store.as_ref(),
            &checkpoint,
            &crate::savepoint::layout(&plan.graph),
            dir,
            stop,
        )
        .await;
        if !stop {
            // Its files in the checkpoint storage were for it alone.
            for f in checkpoint.files() {
                let _ = store.delete(&ObjectPath::from(f.path.as_str())).await;
            }
        }
        let metadata = written.map_err(|e| {
            CoordinatorError::internal(format!(
                "writing the savepoint of job `{id}` into {}: {e:#}",
                dir.display()
            ))
        })?;
        Ok(metadata)
    }

    /// A drained stop's savepoint failed: its maximal watermark fired the
    /// windows of attempt `attempt`, which cannot go on (every record after
    /// it would be late). The attempt fails, and the job restarts from its
    /// latest checkpoint, windows and all, as its restart strategy allows.
    async fn fail_drained(self: &Arc<Self>, id: &str, attempt: u32, why: &str) {
        let Some(master) = self.master(id) else {
            return;
        };
        let mut m = master.lock().await;
        if m.ended() || m.attempt != attempt || m.failure.is_some() {
            return;
        }
        m.failure = Some(format!(
            "the drained stop's savepoint failed ({why}); the windows it fired restart from the latest checkpoint"
        ));
        m.secondary = false;
        for (_, rpc) in &m.waiting {
            super::gateway::cancel_on(rpc, id, attempt, &self.present);
        }
    }

    /// The first checkpoint id a job started from `savepoint` may take:
    /// after the savepoint's and after every id its job took (a sink names
    /// its committed parts by checkpoint: the new job's never meet the old
    /// job's).
    pub(super) async fn first_id_after(
        &self,
        savepoint: &SavepointMetadata,
    ) -> Result<u64, CoordinatorError> {
        let mut first = savepoint.checkpoint + 1;
        if let Some(url) = &self.checkpoint_storage {
            let unreadable = |e: anyhow::Error| {
                CoordinatorError::internal(format!(
                    "reading the checkpoints of job `{}` (whose savepoint this is): {e:#}",
                    savepoint.job
                ))
            };
            let store = weir_model::storage::open(url).map_err(unreadable)?;
            let stored = crate::checkpoint::completed::read_back(store.as_ref(), &savepoint.job, 1)
                .await
                .map_err(unreadable)?;
            first = first.max(stored.highest_id + 1);
        }
        Ok(first)
    }

    /// Copy the savepoint in `dir` into the checkpoint storage as job
    /// `id`'s first checkpoint, shaped by `plan`.
    pub(super) async fn import_savepoint(
        &self,
        graph: &JobGraph,
        dir: &Path,
        plan: &RestorePlan,
    ) -> Result<(), CoordinatorError> {
        let url = match (&graph.checkpoint, &self.checkpoint_storage) {
            (Some(_), Some(url)) => url,
            _ => {
                return Err(CoordinatorError::unprocessable(
                    "no_checkpoints",
                    "a job started from a savepoint takes checkpoints: its manifest needs `[checkpoint]` (and the coordinator a checkpoint storage)",
                ));
            }
        };
        let store = weir_model::storage::open(url)
            .map_err(|e| CoordinatorError::internal(format!("{e:#}")))?;
        crate::savepoint::import(store, dir, plan).await
    }
}
