//! Scheduling jobs onto workers' slots.
//!
//! Slot sharing, as in Flink: a slot holds one subtask of every task of a
//! job, so a job needs as many slots as its largest parallelism; subtask `i`
//! of every task goes to slot `i`. Slots are spread over the workers. Each
//! worker involved gets the whole graph, the component and every subtask's
//! place, runs its share and reports when it ends. The job ends when every
//! worker reported; it fails when one fails (the others are canceled) or
//! when a worker is lost.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use object_store::ObjectStoreExt;
use tokio::sync::Mutex;
use tonic::{Request, Response, Status};
use weir_model::checkpoint::{CheckpointMetadata, TaskStateHandle};
use weir_model::fault_tolerance::RestartStrategy;
use weir_model::metrics::JobCounters;
use weir_model::proto::job_reports_server::{JobReports, JobReportsServer};
use weir_model::proto::task_executor_client::TaskExecutorClient;
use weir_model::proto::{
    AcknowledgeCheckpointRequest, AcknowledgeCheckpointResponse, CancelJobRequest,
    DeclineCheckpointRequest, DeclineCheckpointResponse, DeployJobRequest, JobEndedRequest,
    JobEndedResponse, NotifyCheckpointRequest, SubtaskMetrics, SubtaskPlace,
    TriggerCheckpointRequest,
};
use weir_model::{Barrier, CheckpointKind, CheckpointMode};
use weir_model::{ExecutionGraph, JobGraph};

use super::{Done, Events, Execution, ExecutionEvent, Scheduler};
use crate::checkpoint::stats::RestoredCheckpoint;
use crate::checkpoint::{CheckpointCoordinator, CheckpointGateway, CheckpointStats, Topology};
use crate::error::ApiError;
use crate::job_state::TaskState;
use crate::jobs::{SubtaskStatus, subtasks_of};
use crate::slot_manager::{SlotGrant, SlotManager};

struct Pending {
    grants: Vec<SlotGrant>,
    /// Workers (by id, with their executor) that have not reported.
    waiting: BTreeSet<(String, String)>,
    failure: Option<String>,
    /// The failure is a consequence (a lost connection), not the cause.
    secondary: bool,
    counters: Arc<JobCounters>,
    /// The job's subtasks, with their workers and states.
    subtasks: Arc<std::sync::Mutex<Vec<SubtaskStatus>>>,
    done: Option<Done>,
    /// The running attempt.
    attempt: u32,
    /// Its checkpoints, when it takes them.
    checkpoints: Option<Arc<CheckpointCoordinator>>,
    /// What every attempt deploys.
    plan: Arc<Plan>,
    /// The job's cancel flag.
    cancel: Arc<AtomicBool>,
    /// Where restarts are told.
    events: Events,
    /// Between two attempts.
    restarting: bool,
}

/// What every attempt of a job deploys.
#[derive(Clone)]
struct Plan {
    graph: JobGraph,
    graph_json: String,
    component: Vec<u8>,
    /// The checkpoint storage's URL, when the job takes checkpoints.
    storage: Option<String>,
    stats: Option<Arc<std::sync::Mutex<CheckpointStats>>>,
}

/// The code of a deployment that failed because a worker could not read
/// the checkpoint to restore.
const RESTORE_FAILED: &str = "restore_failed";

/// Whether every file of `checkpoint` is in the storage at `url` as it was
/// written: its size and its sha256 (workers check them again as they
/// download).
async fn check_files(url: &str, checkpoint: &CheckpointMetadata) -> Result<(), String> {
    use sha2::Digest;
    let store = weir_state::storage::open(url).map_err(|e| format!("{e:#}"))?;
    for f in checkpoint.files() {
        let path = object_store::path::Path::from(f.path.as_str());
        let bytes = match store.get(&path).await {
            Ok(got) => got
                .bytes()
                .await
                .map_err(|e| format!("checkpoint {}: reading {}: {e}", checkpoint.id, f.path))?,
            Err(e) => {
                return Err(format!(
                    "checkpoint {}: {} is missing: {e}",
                    checkpoint.id, f.path
                ));
            }
        };
        if bytes.len() as u64 != f.size {
            return Err(format!(
                "checkpoint {}: {} has {} bytes, the checkpoint says {}",
                checkpoint.id,
                f.path,
                bytes.len(),
                f.size
            ));
        }
        if !f.sha256.is_empty() && hex::encode(sha2::Sha256::digest(&bytes)) != f.sha256 {
            return Err(format!(
                "checkpoint {}: {} is corrupt (its sha256 is not the one recorded)",
                checkpoint.id, f.path
            ));
        }
    }
    Ok(())
}

/// How long a worker may take to accept a connection when a broken data
/// connection makes the coordinator ask whether it is still there.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// How long a restart waits for enough free slots (a lost worker's
/// replacement registering).
const RESTART_SLOT_WAIT: Duration = Duration::from_secs(30);

/// Deploys jobs to workers.
pub struct WorkerScheduler {
    slots: Arc<SlotManager>,
    pending: Mutex<HashMap<String, Pending>>,
    /// Where checkpoints go (a URL the workers can reach), if anywhere.
    checkpoint_storage: Option<String>,
}

/// Reaches the workers of one attempt of a job for its checkpoints.
struct WorkerGateway {
    job: String,
    attempt: u32,
    workers: Vec<String>,
}

#[tonic::async_trait]
impl CheckpointGateway for WorkerGateway {
    async fn trigger(&self, barrier: Barrier) -> anyhow::Result<(u32, u32)> {
        let mut calls = Vec::new();
        for rpc in &self.workers {
            let request = TriggerCheckpointRequest {
                job_id: self.job.clone(),
                attempt: self.attempt,
                checkpoint_id: barrier.id,
                timestamp_ms: barrier.timestamp_ms,
                kind: match barrier.kind {
                    CheckpointKind::Checkpoint => "checkpoint".into(),
                    CheckpointKind::Savepoint => "savepoint".into(),
                },
                mode: match barrier.mode {
                    CheckpointMode::ExactlyOnce => "exactly-once".into(),
                    CheckpointMode::AtLeastOnce => "at-least-once".into(),
                },
            };
            calls.push(async move {
                let mut c = executor(rpc).await?;
                match c.trigger_checkpoint(request).await {
                    Ok(r) => {
                        let r = r.into_inner();
                        anyhow::Ok((r.triggered, r.finished))
                    }
                    // The attempt's share on that worker has ended.
                    Err(s) if s.code() == tonic::Code::NotFound => Ok((0, 1)),
                    Err(s) => Err(s.into()),
                }
            });
        }
        let mut told = (0, 0);
        for r in futures::future::join_all(calls).await {
            let (t, f) = r?;
            told = (told.0 + t, told.1 + f);
        }
        Ok(told)
    }

    async fn notify_complete(&self, id: u64) {
        for rpc in &self.workers {
            let request = NotifyCheckpointRequest {
                job_id: self.job.clone(),
                attempt: self.attempt,
                checkpoint_id: id,
            };
            let rpc = rpc.clone();
            tokio::spawn(async move {
                let result = async {
                    executor(&rpc)
                        .await?
                        .notify_checkpoint_complete(request)
                        .await?;
                    anyhow::Ok(())
                }
                .await;
                if let Err(e) = result {
                    tracing::warn!("cannot tell {rpc} that checkpoint {id} completed: {e:#}");
                }
            });
        }
    }
}

/// A client of a worker's task executor, with bounded waits: a worker that
/// does not answer must not hold the coordinator up.
async fn executor(rpc: &str) -> anyhow::Result<TaskExecutorClient<tonic::transport::Channel>> {
    let channel = tonic::transport::Endpoint::from_shared(rpc.to_owned())?
        .connect_timeout(Duration::from_secs(5))
        .timeout(Duration::from_secs(60))
        .connect()
        .await?;
    Ok(TaskExecutorClient::new(channel).max_encoding_message_size(512 << 20))
}

/// Cancel `job` on the worker at `rpc`, in the background (callers hold the
/// scheduler's lock).
fn cancel_on(rpc: &str, job: &str) {
    let (rpc, job) = (rpc.to_owned(), job.to_owned());
    tokio::spawn(async move { cancel_now(&rpc, &job).await });
}

async fn cancel_now(rpc: &str, job: &str) {
    let result = async {
        let mut c = executor(rpc).await?;
        c.cancel_job(CancelJobRequest {
            job_id: job.to_owned(),
        })
        .await?;
        anyhow::Ok(())
    }
    .await;
    if let Err(e) = result {
        tracing::warn!("cannot cancel job {job} on {rpc}: {e:#}");
    }
}

impl Pending {
    /// Set the state of every subtask on `worker`.
    fn set_state(&self, worker: &str, state: TaskState) {
        let mut subtasks = self.subtasks.lock().unwrap_or_else(|p| p.into_inner());
        for t in subtasks
            .iter_mut()
            .filter(|t| t.worker.as_deref() == Some(worker))
        {
            t.state = state;
        }
    }

    /// Record what a worker measured so far.
    fn counted(&mut self, counts: Vec<SubtaskMetrics>) {
        self.counters.store(&counts);
    }
}

impl WorkerScheduler {
    /// A scheduler over the workers of `slots`; it follows the progress
    /// their heartbeats carry.
    pub fn new(
        slots: Arc<SlotManager>,
        checkpoint_storage: Option<String>,
    ) -> Arc<WorkerScheduler> {
        let scheduler = Arc::new(WorkerScheduler {
            slots: slots.clone(),
            pending: Mutex::default(),
            checkpoint_storage,
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
                cancel_on(rpc, &id);
            }
            self.maybe_end(&mut pending, &id).await;
        }
    }

    /// The attempt running job `id` has ended on every worker: the job ends,
    /// or, after a failure that its restart strategy allows, restarts.
    async fn maybe_end(self: &Arc<Self>, pending: &mut HashMap<String, Pending>, id: &str) {
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
            && let Some(delay) = p.plan.graph.restart.delay_before(next)
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
        _component: Arc<weir_host::LoadedComponent>,
        component_bytes: Vec<u8>,
        done: Done,
        events: Events,
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
        let plan = Arc::new(Plan {
            graph,
            graph_json,
            component: component_bytes,
            storage,
            stats,
        });
        // Recorded before deploying: a fast worker may report at once.
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
                attempt: 0,
                checkpoints: None,
                plan,
                cancel: running.cancel.clone(),
                events,
                restarting: false,
            },
        );
        if let Err(e) = self.deploy(id, 0, None, Vec::new(), false).await {
            // Nothing half-started: the job was never accepted.
            if let Some(mut p) = self.pending.lock().await.remove(id) {
                p.done.take();
            }
            return Err(e);
        }
        // Cancel: when the flag is set, tell every worker of the attempt
        // running then.
        let (cancel, me, job) = (running.cancel.clone(), self.clone(), id.to_owned());
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
                        cancel_now(&rpc, &job).await;
                    }
                    told = Some(attempt);
                }
            }
        });
        Ok(running)
    }
}

impl WorkerScheduler {
    /// Deploy attempt `attempt` of job `id` onto free slots (waiting a
    /// bounded time for them on a restart), from `restore` if given, and
    /// start its checkpoint coordinator.
    async fn deploy(
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
            p.failure = None;
            p.secondary = false;
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
                component: plan.component.clone(),
                places: places.clone(),
                attempt,
                checkpoint_storage: plan.storage.clone().unwrap_or_default(),
                restore_json: restore_json.clone(),
            };
            let deployed = async {
                let mut c = executor(rpc).await?;
                c.deploy_job(request).await?;
                anyhow::Ok(())
            }
            .await;
            if let Err(e) = deployed {
                // The worker could not read the checkpoint's files.
                let code = match e.downcast_ref::<Status>() {
                    Some(s) if s.code() == tonic::Code::FailedPrecondition => RESTORE_FAILED,
                    _ => "deploy_failed",
                };
                let mut pending = self.pending.lock().await;
                if let Some(p) = pending.get_mut(id) {
                    for (_, other) in &p.waiting {
                        cancel_on(other, id);
                    }
                    p.waiting.clear();
                    self.slots.release(&p.grants).await;
                    p.grants.clear();
                }
                return Err(ApiError::new(
                    axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                    code,
                    format!("deploying to worker `{worker}` at {rpc}: {e:#}"),
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
            let first_id = first_id.max(
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

    /// Treat every worker of `workers` (id, executor address) that does not
    /// accept a connection within [`PROBE_TIMEOUT`] as lost.
    async fn probe(self: &Arc<Self>, workers: Vec<(String, String)>) {
        for (worker, rpc) in workers {
            let reachable = async {
                tonic::transport::Endpoint::from_shared(rpc.clone())?
                    .connect_timeout(PROBE_TIMEOUT)
                    .connect()
                    .await?;
                anyhow::Ok(())
            }
            .await;
            if let Err(e) = reachable {
                tracing::warn!(worker = %worker, "unreachable after a broken data connection: {e:#}");
                self.slots.remove(&worker).await;
                self.worker_lost(
                    &worker,
                    "it does not answer after a data connection to it broke",
                )
                .await;
            }
        }
    }

    /// Restart job `id` after `delay`, from the newest of `retained`.
    fn restart(
        self: &Arc<Self>,
        id: String,
        attempt: u32,
        delay: Duration,
        retained: Vec<CheckpointMetadata>,
    ) {
        let me = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            {
                let mut pending = me.pending.lock().await;
                let Some(p) = pending.get_mut(&id) else {
                    return;
                };
                if p.cancel.load(Ordering::Relaxed) {
                    // Canceled while it waited: it ends canceled.
                    p.restarting = false;
                    p.failure = Some("canceled".into());
                    me.maybe_end(&mut pending, &id).await;
                    return;
                }
            }
            // The newest retained checkpoint first; one that cannot be read
            // (a missing or corrupt file) is reported and the previous one
            // is tried.
            let mut retained = retained;
            let storage = me
                .pending
                .lock()
                .await
                .get(&id)
                .and_then(|p| p.plan.storage.clone());
            let outcome = loop {
                let restore = retained.last().cloned();
                let checkpoint = restore.as_ref().map(|c| c.id);
                if let (Some(c), Some(url)) = (&restore, &storage)
                    && let Err(reason) = check_files(url, c).await
                {
                    retained.pop();
                    if let Some(p) = me.pending.lock().await.get(&id) {
                        (p.events)(ExecutionEvent::RestoreFailed {
                            attempt,
                            checkpoint: c.id,
                            reason: reason.clone(),
                        });
                    }
                    if retained.is_empty() {
                        break Err(ApiError::new(
                            axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                            RESTORE_FAILED,
                            format!("no retained checkpoint can be restored: {reason}"),
                        ));
                    }
                    continue;
                }
                break me
                    .deploy(&id, attempt, restore, retained.clone(), true)
                    .await
                    .map(|()| checkpoint);
            };
            match outcome {
                Ok(checkpoint) => {
                    if let Some(p) = me.pending.lock().await.get(&id) {
                        (p.events)(ExecutionEvent::Restarted {
                            attempt,
                            checkpoint,
                        });
                    }
                }
                Err(e) => {
                    let mut pending = me.pending.lock().await;
                    if let Some(p) = pending.get_mut(&id) {
                        p.restarting = false;
                        p.failure = Some(format!(
                            "restarting (attempt {attempt}) failed: {}",
                            e.message
                        ));
                        p.waiting.clear();
                        // No further restart after a failed deployment.
                        p.plan = Arc::new(Plan {
                            graph: JobGraph {
                                restart: RestartStrategy::None,
                                ..p.plan.graph.clone()
                            },
                            ..(*p.plan).clone()
                        });
                    }
                    me.maybe_end(&mut pending, &id).await;
                }
            }
        });
    }
}

/// The gRPC service workers report job ends to.
pub struct ReportsService(Arc<WorkerScheduler>);

impl ReportsService {
    /// The checkpoint coordinator of attempt `attempt` of job `job`.
    async fn checkpoints(&self, job: &str, attempt: u32) -> Option<Arc<CheckpointCoordinator>> {
        let pending = self.0.pending.lock().await;
        pending
            .get(job)
            .filter(|p| p.attempt == attempt)
            .and_then(|p| p.checkpoints.clone())
    }
}

#[tonic::async_trait]
impl JobReports for ReportsService {
    async fn acknowledge_checkpoint(
        &self,
        request: Request<AcknowledgeCheckpointRequest>,
    ) -> Result<Response<AcknowledgeCheckpointResponse>, Status> {
        let r = request.into_inner();
        let state: TaskStateHandle = serde_json::from_str(&r.state_json)
            .map_err(|e| Status::invalid_argument(format!("the state handle: {e}")))?;
        if let Some(c) = self.checkpoints(&r.job_id, r.attempt).await {
            c.acknowledge(r.checkpoint_id, r.task as usize, r.subtask, state)
                .await;
        }
        Ok(Response::new(AcknowledgeCheckpointResponse {}))
    }

    async fn decline_checkpoint(
        &self,
        request: Request<DeclineCheckpointRequest>,
    ) -> Result<Response<DeclineCheckpointResponse>, Status> {
        let r = request.into_inner();
        if let Some(c) = self.checkpoints(&r.job_id, r.attempt).await {
            c.decline(r.checkpoint_id, &r.reason).await;
        }
        Ok(Response::new(DeclineCheckpointResponse {}))
    }

    async fn job_ended(
        &self,
        request: Request<JobEndedRequest>,
    ) -> Result<Response<JobEndedResponse>, Status> {
        let r = request.into_inner();
        let mut pending = self.0.pending.lock().await;
        let Some(p) = pending.get_mut(&r.job_id) else {
            return Ok(Response::new(JobEndedResponse {}));
        };
        if r.attempt != p.attempt || p.restarting {
            // A report of an attempt the job no longer runs.
            return Ok(Response::new(JobEndedResponse {}));
        }
        p.counted(r.counts);
        p.waiting.retain(|(w, _)| *w != r.worker_id);
        p.set_state(
            &r.worker_id,
            match r.outcome.as_str() {
                "finished" => TaskState::Finished,
                "canceled" => TaskState::Canceled,
                _ => TaskState::Failed,
            },
        );
        match r.outcome.as_str() {
            "finished" => {}
            "canceled" => {
                p.failure.get_or_insert_with(|| "canceled".into());
            }
            "disconnected" => {
                if p.failure.is_none() {
                    p.failure = Some(format!("on worker `{}`: {}", r.worker_id, r.error));
                    p.secondary = true;
                }
                // A data connection broke: a worker that no longer answers
                // is lost now, not only when its heartbeats time out.
                let others: Vec<(String, String)> = p.waiting.iter().cloned().collect();
                let me = self.0.clone();
                tokio::spawn(async move { me.probe(others).await });
            }
            _ => {
                p.failure
                    .get_or_insert_with(|| format!("on worker `{}`: {}", r.worker_id, r.error));
                for (_, rpc) in &p.waiting {
                    cancel_on(rpc, &r.job_id);
                }
            }
        }
        self.0.maybe_end(&mut pending, &r.job_id).await;
        Ok(Response::new(JobEndedResponse {}))
    }
}
