//! Scheduling jobs onto workers' slots.
//!
//! Slot sharing, as in Flink: a slot holds one subtask of every task of a
//! job, so a job needs as many slots as its largest parallelism; subtask `i`
//! of every task goes to slot `i`. Slots are spread over the workers. Each
//! worker involved gets the whole graph, the component and every subtask's
//! place, runs its share and reports when it ends. An attempt ends when
//! every worker reported; it fails when one fails (the others are canceled)
//! or when a worker is lost, and then the job either restarts (see
//! `restart`) or fails.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::Mutex;
use tonic::Status;
use weir_model::checkpoint::CheckpointMetadata;
use weir_model::fault_tolerance::RestartBackoff;
use weir_model::metrics::JobCounters;
use weir_model::proto::job_reports_server::JobReportsServer;
use weir_model::proto::{DeployJobRequest, JobComponent, SubtaskMetrics, SubtaskPlace};
use weir_model::{ExecutionGraph, JobGraph};

use super::gateway::{WorkerGateway, cancel_now, cancel_on, executor};
use super::reports::ReportsService;
use super::restart::RESTORE_FAILED;
use super::{Done, Events, Execution, ExecutionEvent, Resume, Scheduler};
use crate::checkpoint::completed::{StoredCheckpoints, read_back};
use crate::checkpoint::stats::RestoredCheckpoint;
use crate::checkpoint::{CheckpointCoordinator, CheckpointStats, Topology};
use crate::error::ApiError;
use crate::job_state::TaskState;
use crate::jobs::{SubtaskStatus, subtasks_of};
use crate::slot_manager::{SlotGrant, SlotManager};
use weir_model::auth::PresentToken;

pub(super) struct Pending {
    pub(super) grants: Vec<SlotGrant>,
    /// Workers (by id, with their executor) that have not reported.
    pub(super) waiting: BTreeSet<(String, String)>,
    pub(super) failure: Option<String>,
    /// The failure is a consequence (a lost connection), not the cause.
    pub(super) secondary: bool,
    pub(super) counters: Arc<JobCounters>,
    /// The job's subtasks, with their workers and states.
    pub(super) subtasks: Arc<std::sync::Mutex<Vec<SubtaskStatus>>>,
    pub(super) done: Option<Done>,
    /// The running attempt.
    pub(super) attempt: u32,
    /// Its checkpoints, when it takes them.
    pub(super) checkpoints: Option<Arc<CheckpointCoordinator>>,
    /// What every attempt deploys.
    pub(super) plan: Arc<Plan>,
    /// The job's cancel flag.
    pub(super) cancel: Arc<AtomicBool>,
    /// Where restarts are told.
    pub(super) events: Events,
    /// Between two attempts.
    pub(super) restarting: bool,
    /// The restart strategy, with the failures it has seen.
    pub(super) backoff: RestartBackoff,
    /// When the running attempt was deployed, ms since the epoch (an
    /// attempt that ran long enough resets the strategy's count).
    pub(super) started_ms: i64,
}

/// What every attempt of a job deploys.
#[derive(Clone)]
pub(super) struct Plan {
    pub(super) graph: JobGraph,
    pub(super) graph_json: String,
    pub(super) components: Vec<JobComponent>,
    /// The checkpoint storage's URL, when the job takes checkpoints.
    pub(super) storage: Option<String>,
    pub(super) stats: Option<Arc<std::sync::Mutex<CheckpointStats>>>,
    /// The lowest id its checkpoints may take (above every id a previous
    /// coordinator used).
    pub(super) first_checkpoint_id: u64,
}

/// How long a restart waits for enough free slots (a lost worker's
/// replacement registering).
const RESTART_SLOT_WAIT: Duration = Duration::from_secs(30);

/// Deploys jobs to workers.
pub struct WorkerScheduler {
    pub(super) slots: Arc<SlotManager>,
    pub(super) pending: Mutex<HashMap<String, Pending>>,
    /// Where checkpoints go (a URL the workers can reach), if anywhere.
    pub(super) checkpoint_storage: Option<String>,
    /// The coordinator's token, on every call to a worker.
    pub(super) present: PresentToken,
}

impl Pending {
    /// Set the state of every subtask on `worker`.
    pub(super) fn set_state(&self, worker: &str, state: TaskState) {
        let mut subtasks = self.subtasks.lock().unwrap_or_else(|p| p.into_inner());
        for t in subtasks
            .iter_mut()
            .filter(|t| t.worker.as_deref() == Some(worker))
        {
            t.state = state;
        }
    }

    /// Record what a worker measured so far.
    pub(super) fn counted(&mut self, counts: Vec<SubtaskMetrics>) {
        self.counters.store(&counts);
    }
}

impl WorkerScheduler {
    /// A scheduler over the workers of `slots`; it follows the progress
    /// their heartbeats carry.
    pub fn new(
        slots: Arc<SlotManager>,
        checkpoint_storage: Option<String>,
        present: PresentToken,
    ) -> Arc<WorkerScheduler> {
        let scheduler = Arc::new(WorkerScheduler {
            slots: slots.clone(),
            pending: Mutex::default(),
            checkpoint_storage,
            present,
        });
        let weak = Arc::downgrade(&scheduler);
        slots.on_progress(Box::new(move |_worker, jobs| {
            if let Some(me) = weak.upgrade() {
                tokio::spawn(async move {
                    let mut pending = me.pending.lock().await;
                    for j in jobs {
                        if let Some(p) = pending.get_mut(&j.job_id) {
                            p.counted(j.counts);
                        }
                    }
                });
            }
        }));
        scheduler
    }

    /// The gRPC service workers report to.
    pub fn reports(self: &Arc<Self>) -> JobReportsServer<ReportsService> {
        JobReportsServer::new(ReportsService(self.clone()))
    }

    /// A worker is gone: its jobs fail, naming it.
    pub async fn worker_lost(self: &Arc<Self>, worker: &str, why: &str) {
        let mut pending = self.pending.lock().await;
        let ids: Vec<String> = pending
            .iter()
            .filter(|(_, p)| p.waiting.iter().any(|(w, _)| w == worker))
            .map(|(id, _)| id.clone())
            .collect();
        for id in ids {
            let p = pending.get_mut(&id).expect("listed above");
            p.waiting.retain(|(w, _)| w != worker);
            p.set_state(worker, TaskState::Failed);
            if p.failure.is_none() || p.secondary {
                p.failure = Some(format!("worker `{worker}` was lost: {why}"));
                p.secondary = false;
            }
            for (_, rpc) in &p.waiting {
                cancel_on(rpc, &id, p.attempt, &self.present);
            }
            self.maybe_end(&mut pending, &id).await;
        }
    }

    /// The attempt running job `id` has ended on every worker: the job ends,
    /// or, after a failure that its restart strategy allows, restarts.
    pub(super) async fn maybe_end(
        self: &Arc<Self>,
        pending: &mut HashMap<String, Pending>,
        id: &str,
    ) {
        let Some(p) = pending.get_mut(id) else {
            return;
        };
        if !p.waiting.is_empty() || p.restarting {
            return;
        }
        let mut retained = Vec::new();
        if let Some(c) = p.checkpoints.take() {
            retained = c.retained().await;
            tokio::spawn(async move { c.stop("the job's attempt ended").await });
        }
        self.slots.release(&p.grants).await;
        p.grants.clear();
        let canceled = p.cancel.load(Ordering::Relaxed);
        let next = p.attempt + 1;
        if let (Some(failure), false) = (&p.failure, canceled)
            && let Some(delay) = p.backoff.on_failure(p.started_ms, weir_host::now_ms())
        {
            p.restarting = true;
            (p.events)(ExecutionEvent::Restarting {
                attempt: p.attempt,
                failure: failure.clone(),
            });
            self.restart(id.to_owned(), next, Duration::from_millis(delay), retained);
            return;
        }
        let mut p = pending.remove(id).expect("checked");
        if let Some(done) = p.done.take() {
            done(match (p.failure, canceled) {
                (None, _) => Ok(()),
                (Some(f), _) => Err(anyhow::anyhow!(f)),
            });
        }
    }
}

#[tonic::async_trait]
impl Scheduler for Arc<WorkerScheduler> {
    async fn start(
        &self,
        id: &str,
        graph: JobGraph,
        components: weir_host::JobComponents,
        done: Done,
        events: Events,
    ) -> Result<Execution, ApiError> {
        let running = self
            .prepare(id, graph, components, done, events, 0, 1)
            .await?;
        if let Err(e) = self.deploy(id, 0, None, Vec::new(), false).await {
            // Nothing half-started: the job was never accepted.
            if let Some(mut p) = self.pending.lock().await.remove(id) {
                p.done.take();
            }
            return Err(e);
        }
        self.watch_cancel(id, running.cancel.clone());
        Ok(running)
    }

    async fn resume(
        &self,
        id: &str,
        graph: JobGraph,
        components: weir_host::JobComponents,
        done: Done,
        events: Events,
        resume: Resume,
    ) -> Result<Execution, ApiError> {
        // What the checkpoint storage holds of the job: the retained
        // checkpoints, and the highest id any checkpoint took.
        let mut stored = StoredCheckpoints::default();
        if let (Some(config), Some(url)) = (&graph.checkpoint, &self.checkpoint_storage) {
            let store =
                weir_state::storage::open(url).map_err(|e| ApiError::internal(format!("{e:#}")))?;
            stored = read_back(store.as_ref(), id, config.retained as usize)
                .await
                .map_err(|e| ApiError::internal(format!("{e:#}")))?;
            // The newest checkpoint's metadata is corrupt: its output may
            // have been committed, and the older one would write it again.
            let newest = stored.completed.last().map_or(0, |c| c.id);
            if let Some((lost, why)) = stored.unreadable.iter().filter(|(u, _)| *u > newest).max()
                && super::restart::fails_on_lost_commit(&graph)
            {
                return Err(super::restart::lost_commit(
                    *lost,
                    why,
                    stored.completed.last().map(|c| c.id),
                ));
            }
        }
        let running = self
            .prepare(
                id,
                graph,
                components,
                done,
                events,
                resume.attempt,
                stored.highest_id + 1,
            )
            .await?;
        if let Some(p) = self.pending.lock().await.get_mut(id) {
            p.restarting = true;
        }
        self.restart(
            id.to_owned(),
            resume.attempt,
            resume.delay,
            stored.completed,
        );
        self.watch_cancel(id, running.cancel.clone());
        Ok(running)
    }
}

impl WorkerScheduler {
    /// Record job `id` before its first deployment (a fast worker may
    /// report at once): what every attempt deploys, its counters and
    /// subtasks, starting at `attempt`; its checkpoint ids start at
    /// `first_checkpoint_id`.
    #[allow(clippy::too_many_arguments)]
    async fn prepare(
        &self,
        id: &str,
        graph: JobGraph,
        components: weir_host::JobComponents,
        done: Done,
        events: Events,
        attempt: u32,
        first_checkpoint_id: u64,
    ) -> Result<Execution, ApiError> {
        let graph_json =
            serde_json::to_string(&graph).map_err(|e| ApiError::internal(e.to_string()))?;
        let storage = match (&graph.checkpoint, &self.checkpoint_storage) {
            (Some(_), Some(url)) => Some(url.clone()),
            _ => None,
        };
        let stats = storage
            .as_ref()
            .map(|_| Arc::new(std::sync::Mutex::new(CheckpointStats::default())));
        let counters = Arc::new(JobCounters::new(&graph));
        let subtasks = Arc::new(std::sync::Mutex::new(subtasks_of(
            &graph,
            TaskState::Scheduled,
        )));
        let running = Execution {
            cancel: Arc::default(),
            counters: counters.clone(),
            subtasks: subtasks.clone(),
            checkpoints: stats.clone(),
        };
        // A resumed job goes on counting from its earlier attempts.
        let backoff = RestartBackoff::after(graph.restart.clone(), attempt.saturating_sub(1));
        let plan = Arc::new(Plan {
            graph,
            graph_json,
            components: components
                .iter()
                .map(|c| JobComponent {
                    name: c.name.clone(),
                    wasm: c.bytes.to_vec(),
                })
                .collect(),
            storage,
            stats,
            first_checkpoint_id,
        });
        self.pending.lock().await.insert(
            id.to_owned(),
            Pending {
                grants: Vec::new(),
                waiting: BTreeSet::new(),
                failure: None,
                secondary: false,
                counters,
                subtasks,
                done: Some(done),
                attempt,
                checkpoints: None,
                plan,
                cancel: running.cancel.clone(),
                events,
                restarting: false,
                backoff,
                started_ms: weir_host::now_ms(),
            },
        );
        Ok(running)
    }

    /// Cancel: when the flag is set, tell every worker of the attempt
    /// running then.
    fn watch_cancel(self: &Arc<Self>, id: &str, cancel: Arc<AtomicBool>) {
        let (me, job) = (self.clone(), id.to_owned());
        tokio::spawn(async move {
            let mut told: Option<u32> = None;
            loop {
                tokio::time::sleep(Duration::from_millis(100)).await;
                let (attempt, waiting): (u32, Vec<String>) = match me.pending.lock().await.get(&job)
                {
                    None => return,
                    Some(p) => (
                        p.attempt,
                        p.waiting.iter().map(|(_, rpc)| rpc.clone()).collect(),
                    ),
                };
                if cancel.load(Ordering::Relaxed) && told != Some(attempt) {
                    for rpc in waiting {
                        cancel_now(&rpc, &job, attempt, &me.present).await;
                    }
                    told = Some(attempt);
                }
            }
        });
    }
}

impl WorkerScheduler {
    /// Deploy attempt `attempt` of job `id` onto free slots (waiting a
    /// bounded time for them on a restart), from `restore` if given, and
    /// start its checkpoint coordinator.
    pub(super) async fn deploy(
        self: &Arc<Self>,
        id: &str,
        attempt: u32,
        restore: Option<CheckpointMetadata>,
        retained: Vec<CheckpointMetadata>,
        wait_for_slots: bool,
    ) -> Result<(), ApiError> {
        let Some(plan) = self.pending.lock().await.get(id).map(|p| p.plan.clone()) else {
            return Err(ApiError::internal(format!("job `{id}` is gone")));
        };
        let graph = &plan.graph;
        let exec = ExecutionGraph::new(graph);
        let waited = tokio::time::Instant::now();
        let grants = loop {
            match self.slots.allocate(exec.slots_needed()).await {
                Ok(g) => break g,
                Err(e) if !wait_for_slots || waited.elapsed() > RESTART_SLOT_WAIT => {
                    return Err(ApiError::unprocessable("not_enough_slots", e));
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        };
        let places: Vec<SubtaskPlace> = exec
            .vertices
            .iter()
            .map(|v| SubtaskPlace {
                task: v.task as u32,
                subtask: v.subtask,
                data_address: grants[v.slot as usize].data_address.clone(),
            })
            .collect();
        let workers: BTreeSet<(String, String)> = grants
            .iter()
            .map(|g| (g.worker_id.clone(), g.rpc_address.clone()))
            .collect();
        {
            let mut pending = self.pending.lock().await;
            let Some(p) = pending.get_mut(id) else {
                self.slots.release(&grants).await;
                return Err(ApiError::internal(format!("job `{id}` is gone")));
            };
            p.grants = grants.clone();
            p.waiting = workers.clone();
            p.attempt = attempt;
            p.started_ms = weir_host::now_ms();
            p.failure = None;
            p.secondary = false;
            if p.restarting {
                // Told before any of its tasks can report (they report
                // under this lock): a failure of this attempt comes after.
                (p.events)(ExecutionEvent::Restarted {
                    attempt,
                    checkpoint: restore.as_ref().map(|c| c.id),
                });
            }
            p.restarting = false;
            let mut subtasks = subtasks_of(graph, TaskState::Scheduled);
            for t in &mut subtasks {
                t.worker = Some(grants[t.subtask as usize].worker_id.clone());
                t.slot = Some(t.subtask);
            }
            *p.subtasks.lock().unwrap_or_else(|p| p.into_inner()) = subtasks;
        }
        let restore_json = match &restore {
            Some(c) => serde_json::to_string(c).map_err(|e| ApiError::internal(e.to_string()))?,
            None => String::new(),
        };
        for (worker, rpc) in &workers {
            if let Some(p) = self.pending.lock().await.get(id) {
                p.set_state(worker, TaskState::Deploying);
            }
            let request = DeployJobRequest {
                job_id: id.to_owned(),
                graph_json: plan.graph_json.clone(),
                components: plan.components.clone(),
                places: places.clone(),
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
                    Some(s) if s.code() == tonic::Code::FailedPrecondition => (
                        axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                        RESTORE_FAILED,
                    ),
                    // The worker does not grant a path the job names.
                    Some(s) if s.code() == tonic::Code::PermissionDenied => (
                        axum::http::StatusCode::UNPROCESSABLE_ENTITY,
                        "path_not_allowed",
                    ),
                    _ => (
                        axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                        "deploy_failed",
                    ),
                };
                let mut pending = self.pending.lock().await;
                if let Some(p) = pending.get_mut(id) {
                    for (_, other) in &p.waiting {
                        cancel_on(other, id, attempt, &self.present);
                    }
                    p.waiting.clear();
                    // Still between attempts: reports of the workers just
                    // canceled are late ones, and whoever called decides
                    // what follows.
                    p.restarting = true;
                    self.slots.release(&p.grants).await;
                    p.grants.clear();
                }
                let message = match e.downcast_ref::<Status>() {
                    Some(s) => s.message().to_owned(),
                    None => format!("{e:#}"),
                };
                return Err(ApiError::new(
                    status,
                    code,
                    format!("deploying to worker `{worker}` at {rpc}: {message}"),
                ));
            }
            if let Some(p) = self.pending.lock().await.get(id) {
                // Unless it already reported its end.
                let subtasks = p.subtasks.lock().unwrap_or_else(|p| p.into_inner());
                let deploying = subtasks.iter().any(|t| {
                    t.worker.as_deref() == Some(worker.as_str()) && t.state == TaskState::Deploying
                });
                drop(subtasks);
                if deploying {
                    p.set_state(worker, TaskState::Running);
                }
            }
        }
        if let (Some(config), Some(url), Some(stats)) =
            (&graph.checkpoint, &plan.storage, &plan.stats)
        {
            let store =
                weir_state::storage::open(url).map_err(|e| ApiError::internal(format!("{e:#}")))?;
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
            };
            let gateway = Arc::new(WorkerGateway {
                job: id.to_owned(),
                attempt,
                workers: workers.iter().map(|(_, rpc)| rpc.clone()).collect(),
                present: self.present.clone(),
            });
            if let Some(r) = &restore {
                stats.lock().unwrap_or_else(|p| p.into_inner()).restored =
                    Some(RestoredCheckpoint {
                        id: r.id,
                        attempt,
                        at_ms: weir_host::now_ms(),
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
            let coordinator = CheckpointCoordinator::start(
                config.clone(),
                topology,
                store,
                gateway,
                stats.clone(),
                first_id,
                retained,
            );
            match self.pending.lock().await.get_mut(id) {
                Some(p) if p.attempt == attempt && !p.waiting.is_empty() => {
                    p.checkpoints = Some(coordinator)
                }
                // It ended already.
                _ => coordinator.stop("the job's attempt ended").await,
            }
        }
        Ok(())
    }
}
