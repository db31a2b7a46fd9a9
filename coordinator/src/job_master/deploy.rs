//! Deploying an attempt: slots from the [`crate::scheduler`], the graph
//! and components to every worker involved, and the attempt's checkpoint
//! coordinator.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use tonic::Status;
use weir_model::ExecutionGraph;
use weir_model::checkpoint::CheckpointMetadata;
use weir_model::proto::DeployJobRequest;

use super::gateway::{WorkerGateway, cancel_on, executor};
use super::restart::RESTORE_FAILED;
use super::{ExecutionEvent, JobMasters};
use crate::checkpoint::stats::RestoredCheckpoint;
use crate::checkpoint::{CheckpointCoordinator, Topology};
use crate::error::CoordinatorError;
use crate::job_state::TaskState;
use crate::jobs::subtasks_of;

fn gone(id: &str) -> CoordinatorError {
    CoordinatorError::internal(format!("job `{id}` is gone"))
}

impl JobMasters {
    /// Deploy attempt `attempt` of job `id` onto free slots (waiting a
    /// bounded time for them on a restart), from `restore` if given, and
    /// start its checkpoint coordinator over `retained`.
    pub(super) async fn deploy(
        self: &Arc<Self>,
        id: &str,
        attempt: u32,
        restore: Option<CheckpointMetadata>,
        retained: Vec<CheckpointMetadata>,
        wait_for_slots: bool,
    ) -> Result<(), CoordinatorError> {
        let master = self.master(id).ok_or_else(|| gone(id))?;
        let plan = master.lock().await.plan.clone();
        let graph = &plan.graph;
        let exec = ExecutionGraph::new(graph);
        // The storage first: nothing is deployed that could not checkpoint.
        let store = match (&graph.checkpoint, &plan.storage) {
            (Some(_), Some(url)) => Some(
                weir_model::storage::open(url)
                    .map_err(|e| CoordinatorError::internal(format!("{e:#}")))?,
            ),
            _ => None,
        };
        let restore_json = match &restore {
            Some(c) => {
                serde_json::to_string(c).map_err(|e| CoordinatorError::internal(e.to_string()))?
            }
            None => String::new(),
        };
        // From here on, every way out of this function clears `deploying`
        // (set below) and decides what follows.
        let placed = crate::scheduler::assign(&self.slots, &exec, wait_for_slots).await?;
        {
            let mut m = master.lock().await;
            if m.ended() {
                self.slots.release(&placed.grants).await;
                return Err(gone(id));
            }
            m.grants = placed.grants.clone();
            m.waiting = placed.workers.clone();
            // A new set: a late report of an earlier attempt lands in that
            // attempt's.
            m.finished_workers = Arc::default();
            // Until the deployment is over, an end of this attempt (a
            // worker lost, a task failing at once) is decided here, once.
            m.deploying = true;
            m.attempt = attempt;
            m.retained = retained.clone();
            m.started_ms = weir_model::now_ms();
            m.failure = None;
            m.secondary = false;
            if m.restarting {
                // Told before any of its tasks can report (they report
                // under this lock): a failure of this attempt comes after.
                (m.events)(ExecutionEvent::Restarted {
                    attempt,
                    checkpoint: restore.as_ref().map(|c| c.id),
                });
            }
            m.restarting = false;
            let mut subtasks = subtasks_of(graph, TaskState::Scheduled);
            for t in &mut subtasks {
                t.worker = Some(placed.grants[t.subtask as usize].worker_id.clone());
                t.slot = Some(t.subtask);
            }
            *m.subtasks.lock().unwrap_or_else(|p| p.into_inner()) = subtasks;
        }
        for (worker, rpc) in &placed.workers {
            master.lock().await.set_state(worker, TaskState::Deploying);
            let request = DeployJobRequest {
                job_id: id.to_owned(),
                graph_json: plan.graph_json.clone(),
                components: plan.components.clone(),
                places: placed.places.clone(),
                attempt,
                checkpoint_storage: plan.storage.clone().unwrap_or_default(),
                restore_json: restore_json.clone(),
            };
            let deployed = async {
                let mut c = executor(rpc, &self.present).await?;
                c.deploy_job(request).await?;
                anyhow::Ok(())
            }
            .await;
            if let Err(e) = deployed {
                // The worker could not read the checkpoint's files.
                let (status, code) = match e.downcast_ref::<Status>() {
                    Some(s) if s.code() == tonic::Code::FailedPrecondition => {
                        (crate::error::ErrorKind::Internal, RESTORE_FAILED)
                    }
                    // The worker does not grant a path the job names.
                    Some(s) if s.code() == tonic::Code::PermissionDenied => {
                        (crate::error::ErrorKind::Unprocessable, "path_not_allowed")
                    }
                    _ => (crate::error::ErrorKind::Internal, "deploy_failed"),
                };
                let mut m = master.lock().await;
                for (_, other) in &m.waiting {
                    cancel_on(other, id, attempt, &self.present);
                }
                m.waiting.clear();
                // Still between attempts: reports of the workers just
                // canceled are late ones, and whoever called decides what
                // follows.
                m.restarting = true;
                m.deploying = false;
                self.slots.release(&m.grants).await;
                m.grants.clear();
                let message = match e.downcast_ref::<Status>() {
                    Some(s) => s.message().to_owned(),
                    None => format!("{e:#}"),
                };
                return Err(CoordinatorError::new(
                    status,
                    code,
                    format!("deploying to worker `{worker}` at {rpc}: {message}"),
                ));
            }
            let m = master.lock().await;
            // Unless it already reported its end.
            let subtasks = m.subtasks.lock().unwrap_or_else(|p| p.into_inner());
            let deploying = subtasks.iter().any(|t| {
                t.worker.as_deref() == Some(worker.as_str()) && t.state == TaskState::Deploying
            });
            drop(subtasks);
            if deploying {
                m.set_state(worker, TaskState::Running);
            }
        }
        let mut coordinator = None;
        if let (Some(config), Some(store), Some(stats)) = (&graph.checkpoint, store, &plan.stats) {
            let topology = Topology {
                job: id.to_owned(),
                attempt,
                tasks: exec
                    .tasks
                    .iter()
                    .map(|t| {
                        (
                            t.vertices
                                .iter()
                                .map(|&v| (v, graph.vertices[v].name.clone()))
                                .collect(),
                            t.parallelism,
                        )
                    })
                    .collect(),
                layout: Some(crate::savepoint::layout(graph)),
            };
            let finished = master.lock().await.finished_workers.clone();
            let gateway = Arc::new(WorkerGateway {
                job: id.to_owned(),
                attempt,
                workers: placed.workers.iter().map(|(_, rpc)| rpc.clone()).collect(),
                finished,
                present: self.present.clone(),
            });
            if let Some(r) = &restore {
                stats.lock().unwrap_or_else(|p| p.into_inner()).restored =
                    Some(RestoredCheckpoint {
                        id: r.id,
                        attempt,
                        at_ms: weir_model::now_ms(),
                    });
            }
            let first_id = retained.iter().map(|c| c.id + 1).max().unwrap_or(1);
            let first_id = first_id.max(plan.first_checkpoint_id).max(
                stats
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .history
                    .first()
                    .map_or(1, |s| s.id + 1),
            );
            coordinator = Some(CheckpointCoordinator::start(
                config.clone(),
                topology,
                store,
                gateway,
                stats.clone(),
                first_id,
                retained,
            ));
        }
        let mut m = master.lock().await;
        m.deploying = false;
        match coordinator {
            Some(c) if m.ended() => c.stop("the job ended").await,
            c => m.checkpoints = c,
        }
        if m.failure.is_some() || m.cancel.load(Ordering::Relaxed) {
            // The attempt failed or was canceled while it deployed: a
            // cancel may have reached a worker before its share did.
            for (_, rpc) in &m.waiting {
                cancel_on(rpc, id, attempt, &self.present);
            }
        }
        // If it ended meanwhile, what follows is decided now.
        self.attempt_over(id, &mut m, true).await;
        Ok(())
    }
}
