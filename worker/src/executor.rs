//! The worker's task executor: the coordinator deploys a job's subtasks
//! here (gRPC), the worker runs its share with [`crate::run_placed`] and
//! reports the outcome back.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tonic::{Request, Response, Status};
use weir_host::WasmRuntime;
use weir_model::JobGraph;
use weir_model::access::AllowedDirs;
use weir_model::auth::{PeerChannel, PresentToken};
use weir_model::proto::job_reports_client::JobReportsClient;
use weir_model::proto::task_executor_server::{TaskExecutor, TaskExecutorServer};
use weir_model::proto::{
    AcknowledgeCheckpointRequest, CancelJobRequest, CancelJobResponse, DeclineCheckpointRequest,
    DeployJobRequest, DeployJobResponse, JobEndedRequest, JobProgress, NotifyCheckpointRequest,
    NotifyCheckpointResponse, TriggerCheckpointRequest, TriggerCheckpointResponse,
};
use weir_model::{Barrier, CheckpointKind, CheckpointMode};

use crate::checkpoint::CheckpointChannels;
use crate::checkpoint::restore::Restore;
use crate::checkpoint::uploader::Uploader;
use crate::network::DataServer;
use crate::operators::WasmOperatorFactory;
use crate::state::StateSetup;
use crate::task::Canceled;
use crate::{JobCounters, LocalJob, Placement, run_placed};
use weir_model::checkpoint::CheckpointMetadata;
use weir_model::fault_tolerance::StateBackendKind;

/// How long a job's end waits for its last snapshot uploads.
const SNAPSHOTS_AFTER_END: std::time::Duration = std::time::Duration::from_secs(60);

/// Runs what the coordinator deploys to this worker.
pub struct Executor {
    /// This worker's id.
    pub worker_id: String,
    /// The process's Wasm runtime.
    pub runtime: Arc<WasmRuntime>,
    /// Where other workers send this worker's subtasks their data.
    pub server: Arc<DataServer>,
    /// The coordinator's gRPC address, for reports.
    pub coordinator: String,
    /// Where the worker keeps its files (RocksDB state under `state/`).
    pub data_dir: PathBuf,
    /// The state backend of jobs whose manifest names none.
    pub default_backend: StateBackendKind,
    /// The directories jobs' sources and sinks may reach.
    pub allowed: AllowedDirs,
    /// This worker's token, on every call to the coordinator.
    pub present: PresentToken,
    /// The jobs running here, by id: the newest attempt of each.
    jobs: Mutex<HashMap<String, RunningJob>>,
}

/// A job's attempt running on this worker.
struct RunningJob {
    /// The attempt.
    attempt: u32,
    /// Its name.
    name: String,
    /// Whether the coordinator asked to cancel it.
    asked: Arc<AtomicBool>,
    /// The flag that stops its subtasks.
    cancel: Arc<AtomicBool>,
    /// Its records so far.
    counters: Arc<JobCounters>,
    /// Its wiring and uploads, when it takes checkpoints.
    checkpointing: Option<Arc<JobCheckpointing>>,
}

/// A job's checkpointing on this worker.
pub struct JobCheckpointing {
    /// Barriers in, acks out.
    pub channels: CheckpointChannels,
    /// The asynchronous part of snapshots.
    pub uploader: Arc<Uploader>,
}

/// How a worker runs what it is given: its files, its default state
/// backend, what jobs may reach, and its token.
pub struct ExecutorSettings {
    /// Where the worker keeps its files (RocksDB state under `state/`).
    pub data_dir: PathBuf,
    /// The state backend of jobs whose manifest names none.
    pub default_backend: StateBackendKind,
    /// The directories jobs' sources and sinks may reach.
    pub allowed: AllowedDirs,
    /// This worker's token, on every call to the coordinator.
    pub present: PresentToken,
}

impl Executor {
    /// An executor with nothing running.
    pub fn new(
        worker_id: String,
        runtime: Arc<WasmRuntime>,
        server: Arc<DataServer>,
        coordinator: String,
        settings: ExecutorSettings,
    ) -> Arc<Self> {
        let ExecutorSettings {
            data_dir,
            default_backend,
            allowed,
            present,
        } = settings;
        Arc::new(Executor {
            worker_id,
            runtime,
            server,
            coordinator,
            data_dir,
            default_backend,
            allowed,
            present,
            jobs: Mutex::default(),
        })
    }

    /// A client of the coordinator's service for job reports.
    async fn reports(&self) -> anyhow::Result<JobReportsClient<PeerChannel>> {
        let channel = self.present.endpoint(&self.coordinator)?.connect().await?;
        Ok(JobReportsClient::with_interceptor(
            channel,
            self.present.clone(),
        ))
    }

    /// Upload every snapshot the job's subtasks take and acknowledge it to
    /// the coordinator (or decline the checkpoint if the upload fails). The
    /// returned task ends when the subtasks have ended and every upload
    /// and acknowledgement is done.
    fn report_snapshots(
        self: &Arc<Self>,
        job: String,
        attempt: u32,
        mut acks: tokio::sync::mpsc::UnboundedReceiver<crate::checkpoint::TaskAck>,
        uploader: Arc<Uploader>,
    ) -> tokio::task::JoinHandle<()> {
        let me = self.clone();
        tokio::spawn(async move {
            let mut uploads = tokio::task::JoinSet::new();
            while let Some(ack) = acks.recv().await {
                let (me, job, uploader) = (me.clone(), job.clone(), uploader.clone());
                uploads.spawn(async move {
                    let (checkpoint, task, subtask) = (ack.checkpoint, ack.task, ack.subtask);
                    let uploaded = uploader.upload(ack).await;
                    let result = async {
                        let mut client = me.reports().await?;
                        match uploaded {
                            Ok(state) => {
                                client
                                    .acknowledge_checkpoint(AcknowledgeCheckpointRequest {
                                        job_id: job.clone(),
                                        attempt,
                                        checkpoint_id: checkpoint,
                                        task: task as u32,
                                        subtask,
                                        state_json: serde_json::to_string(&state)?,
                                    })
                                    .await?;
                            }
                            Err(e) => {
                                client
                                    .decline_checkpoint(DeclineCheckpointRequest {
                                        job_id: job.clone(),
                                        attempt,
                                        checkpoint_id: checkpoint,
                                        reason: format!(
                                            "subtask {subtask} of task {task} on worker `{}`: {e:#}",
                                            me.worker_id
                                        ),
                                    })
                                    .await?;
                            }
                        }
                        anyhow::Ok(())
                    }
                    .await;
                    if let Err(e) = result {
                        tracing::warn!(job = %job, checkpoint, "cannot report a snapshot: {e:#}");
                    }
                });
                // Reap the finished ones as they go.
                while uploads.try_join_next().is_some() {}
            }
            while uploads.join_next().await.is_some() {}
        })
    }

    fn jobs(&self) -> std::sync::MutexGuard<'_, HashMap<String, RunningJob>> {
        self.jobs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Refuse a deployment of attempt `attempt` of `job` when a newer one
    /// runs here: the coordinator has given the older attempt up.
    fn refuse_older(
        &self,
        jobs: &HashMap<String, RunningJob>,
        job: &str,
        attempt: u32,
    ) -> Result<(), Status> {
        match jobs.get(job).filter(|j| j.attempt > attempt) {
            Some(newer) => Err(Status::aborted(format!(
                "worker `{}`: attempt {} of job {job} runs here, not the older {attempt}",
                self.worker_id, newer.attempt
            ))),
            None => Ok(()),
        }
    }

    fn checkpointing_of(&self, job: &str, attempt: u32) -> Option<Arc<JobCheckpointing>> {
        self.jobs()
            .get(job)
            .filter(|j| j.attempt == attempt)
            .and_then(|j| j.checkpointing.clone())
    }

    /// The gRPC service.
    pub fn service(self: &Arc<Self>) -> TaskExecutorServer<ExecutorService> {
        TaskExecutorServer::new(ExecutorService(self.clone())).max_decoding_message_size(512 << 20)
    }

    /// Every running job: its id, its name and its counters.
    pub fn running_jobs(&self) -> Vec<(String, String, Arc<JobCounters>)> {
        self.jobs()
            .iter()
            .map(|(id, j)| (id.clone(), j.name.clone(), j.counters.clone()))
            .collect()
    }

    /// Forget attempt `attempt` of job `job`, if it is still the one
    /// recorded (not a newer attempt that took its place here).
    fn forget(&self, job: &str, attempt: u32, counters: &Arc<JobCounters>) {
        let mut jobs = self.jobs();
        if jobs
            .get(job)
            .is_some_and(|j| j.attempt == attempt && Arc::ptr_eq(&j.counters, counters))
        {
            jobs.remove(job);
        }
    }

    /// Stop every job running here (the coordinator forgot this worker).
    pub fn cancel_all(&self) {
        for (job, j) in self.jobs().iter() {
            tracing::warn!(job = %job, "stopping a job of a coordinator that forgot this worker");
            j.cancel.store(true, Ordering::Relaxed);
        }
    }

    /// Records so far of every running job, per vertex (sent with heartbeats).
    pub fn progress(&self) -> Vec<JobProgress> {
        self.jobs()
            .iter()
            .map(|(job_id, j)| JobProgress {
                job_id: job_id.clone(),
                counts: j.counters.figures(),
            })
            .collect()
    }

    async fn report(&self, request: JobEndedRequest) {
        let result = async {
            let mut client = self.reports().await?;
            client.job_ended(request).await?;
            anyhow::Ok(())
        }
        .await;
        if let Err(e) = result {
            tracing::error!(
                "cannot report to the coordinator at {}: {e:#}",
                self.coordinator
            );
        }
    }
}

/// The gRPC face of the [`Executor`].
pub struct ExecutorService(Arc<Executor>);

#[tonic::async_trait]
impl TaskExecutor for ExecutorService {
    async fn deploy_job(
        &self,
        request: Request<DeployJobRequest>,
    ) -> Result<Response<DeployJobResponse>, Status> {
        let r = request.into_inner();
        // Before any download: checked again when the job is entered.
        self.0.refuse_older(&self.0.jobs(), &r.job_id, r.attempt)?;
        let graph: JobGraph = serde_json::from_str(&r.graph_json)
            .map_err(|e| Status::invalid_argument(format!("the job graph: {e}")))?;
        // The coordinator checked the paths too; this worker opens them.
        self.0.allowed.check_graph(&graph).map_err(|e| {
            Status::permission_denied(format!("worker `{}`: {e}", self.0.worker_id))
        })?;
        let runtime = self.0.runtime.clone();
        let files = r
            .components
            .iter()
            .map(|c| (c.name.clone(), c.wasm.clone()))
            .collect();
        let components =
            tokio::task::spawn_blocking(move || weir_host::JobComponents::load(&runtime, files))
                .await
                .map_err(|e| Status::internal(e.to_string()))?
                .map_err(|e| Status::invalid_argument(format!("the component: {e}")))?;
        let mut at = HashMap::new();
        for p in &r.places {
            let addr = p.data_address.parse().map_err(|e| {
                Status::invalid_argument(format!("data address {:?}: {e}", p.data_address))
            })?;
            at.insert((p.task as usize, p.subtask), addr);
        }
        let params = graph.params.clone().into_iter().collect();
        // This attempt's files here: another attempt of the job may start
        // on this worker before this one's end has cleaned up.
        let local = format!("{}-a{}", r.job_id, r.attempt);
        let mut state =
            StateSetup::for_job(&graph, &local, self.0.default_backend, &self.0.data_dir);
        // A restarted attempt: this worker's share of the checkpoint's files
        // first.
        let restore = if r.restore_json.is_empty() {
            None
        } else {
            let checkpoint: CheckpointMetadata = serde_json::from_str(&r.restore_json)
                .map_err(|e| Status::invalid_argument(format!("the checkpoint to restore: {e}")))?;
            let store = weir_model::storage::open(&r.checkpoint_storage)
                .map_err(|e| Status::invalid_argument(format!("{e:#}")))?;
            let mine = self.0.server.addr();
            let here = |task: usize, subtask: u32| at.get(&(task, subtask)) == Some(&mine);
            let dir = self.0.data_dir.join("restore").join(&local);
            let restore = match Restore::download(store, checkpoint, &dir, here).await {
                Ok(r) => r,
                Err(e) => {
                    let _ = tokio::fs::remove_dir_all(&dir).await;
                    return Err(Status::failed_precondition(format!("{e:#}")));
                }
            };
            Some(Arc::new(restore))
        };
        state.restore = restore.clone();
        let factory = Arc::new(WasmOperatorFactory {
            runtime: self.0.runtime.clone(),
            components,
            params,
            state: state.clone(),
            attempt: r.attempt,
        });
        let name = graph.name.clone();
        let checkpointed = graph.checkpoint.is_some() && !r.checkpoint_storage.is_empty();
        let mut job = LocalJob::new(graph, factory);
        job.restore = restore.clone();
        job.attempt = r.attempt;
        job.job_id = r.job_id.clone();
        let mut reporting = None;
        let mut checkpointing = None;
        if checkpointed {
            let store = weir_model::storage::open(&r.checkpoint_storage)
                .map_err(|e| Status::invalid_argument(format!("{e:#}")))?;
            let dir = self.0.data_dir.join("checkpoints").join(&local);
            let (channels, acks) = CheckpointChannels::new(dir);
            let incremental = job.graph.checkpoint.as_ref().is_none_or(|c| c.incremental);
            let uploader = Arc::new(Uploader::new(store, &r.job_id, r.attempt, incremental));
            if let Some(restore) = &restore {
                // Files the checkpoint holds need no second upload.
                for (subtask, o) in restore.handles() {
                    uploader.seed(o.vertex, subtask, &o.files);
                }
            }
            reporting =
                Some(
                    self.0
                        .report_snapshots(r.job_id.clone(), r.attempt, acks, uploader.clone()),
                );
            job.checkpoints = Some(channels.clone());
            checkpointing = Some(Arc::new(JobCheckpointing { channels, uploader }));
        }
        let asked = Arc::new(AtomicBool::new(false));
        let mut jobs = self.0.jobs();
        if let Err(refused) = self.0.refuse_older(&jobs, &r.job_id, r.attempt) {
            // A newer attempt's deployment came while this one downloaded:
            // nothing of this one stays.
            drop(jobs);
            state.remove();
            let _ = std::fs::remove_dir_all(self.0.data_dir.join("restore").join(&local));
            return Err(refused);
        }
        if let Some(older) = jobs.get(&r.job_id).filter(|j| j.attempt < r.attempt) {
            // The coordinator runs a newer attempt: whatever is left of an
            // older one here (a cancel that never came) stops.
            older.asked.store(true, Ordering::Relaxed);
            older.cancel.store(true, Ordering::Relaxed);
        }
        jobs.insert(
            r.job_id.clone(),
            RunningJob {
                attempt: r.attempt,
                name,
                asked: asked.clone(),
                cancel: job.cancel.clone(),
                counters: job.counters.clone(),
                checkpointing,
            },
        );
        drop(jobs);
        // Channels are named by job and attempt: subtasks of two attempts
        // never exchange data.
        let placement = Placement {
            job_id: format!("{}#{}", r.job_id, r.attempt),
            server: self.0.server.clone(),
            at,
        };
        let executor = self.0.clone();
        let attempt = r.attempt;
        let job_id = r.job_id;
        tracing::info!(job = %job_id, "deployed");
        tokio::spawn(async move {
            let counters = job.counters.clone();
            let result = run_placed(job, Some(placement)).await;
            if let Err(e) = &result
                && !asked.load(Ordering::Relaxed)
                && e.downcast_ref::<Canceled>().is_none()
            {
                tracing::warn!(job = %job_id, attempt, "failed: {e:#}");
            }
            state.remove();
            // Unless a newer attempt of the job took its place here.
            executor.forget(&job_id, attempt, &counters);
            // The job's acknowledgements reach the coordinator before its
            // end does (uploads are bounded by the checkpoint timeout).
            if let Some(reporting) = reporting
                && tokio::time::timeout(SNAPSHOTS_AFTER_END, reporting)
                    .await
                    .is_err()
            {
                tracing::warn!(job = %job_id, "snapshot uploads still running at the job's end");
            }
            for dir in ["checkpoints", "restore"] {
                let _ = tokio::fs::remove_dir_all(executor.data_dir.join(dir).join(&local)).await;
            }
            let (outcome, error) = match result {
                Ok(_) => ("finished", String::new()),
                Err(_) if asked.load(Ordering::Relaxed) => ("canceled", String::new()),
                // Stopped without an error of its own: a peer went away.
                Err(e) if e.downcast_ref::<Canceled>().is_some() => (
                    "disconnected",
                    "a data connection to another worker was lost".to_owned(),
                ),
                Err(e) => ("failed", format!("{e:#}")),
            };
            let counts = counters.figures();
            let request = JobEndedRequest {
                job_id,
                worker_id: executor.worker_id.clone(),
                outcome: outcome.into(),
                error,
                counts,
                attempt,
            };
            executor.report(request).await;
        });
        Ok(Response::new(DeployJobResponse {}))
    }

    async fn trigger_checkpoint(
        &self,
        request: Request<TriggerCheckpointRequest>,
    ) -> Result<Response<TriggerCheckpointResponse>, Status> {
        let r = request.into_inner();
        let Some(c) = self.0.checkpointing_of(&r.job_id, r.attempt) else {
            return Err(Status::not_found(format!(
                "attempt {} of job {} takes no checkpoints here",
                r.attempt, r.job_id
            )));
        };
        let barrier = Barrier {
            id: r.checkpoint_id,
            timestamp_ms: r.timestamp_ms,
            kind: match r.kind.as_str() {
                "savepoint" => CheckpointKind::Savepoint,
                "stop-savepoint" => CheckpointKind::StopSavepoint,
                "drain-savepoint" => CheckpointKind::DrainSavepoint,
                _ => CheckpointKind::Checkpoint,
            },
            mode: match r.mode.as_str() {
                "at-least-once" => CheckpointMode::AtLeastOnce,
                _ => CheckpointMode::ExactlyOnce,
            },
            aligned_timeout_ms: r.aligned_timeout_ms,
        };
        let t = c.channels.trigger(barrier);
        if t.starting > 0 {
            // The coordinator aborts this checkpoint and triggers the next.
            return Err(Status::unavailable(format!(
                "{} source subtasks of job {} are still starting",
                t.starting, r.job_id
            )));
        }
        Ok(Response::new(TriggerCheckpointResponse {
            triggered: t.told as u32,
            finished: t.finished as u32,
        }))
    }

    async fn notify_checkpoint_complete(
        &self,
        request: Request<NotifyCheckpointRequest>,
    ) -> Result<Response<NotifyCheckpointResponse>, Status> {
        let r = request.into_inner();
        if let Some(c) = self.0.checkpointing_of(&r.job_id, r.attempt) {
            c.uploader.completed(r.checkpoint_id);
            c.channels.complete(r.checkpoint_id);
        }
        Ok(Response::new(NotifyCheckpointResponse {}))
    }

    async fn cancel_job(
        &self,
        request: Request<CancelJobRequest>,
    ) -> Result<Response<CancelJobResponse>, Status> {
        let r = request.into_inner();
        if let Some(j) = self.0.jobs().get(&r.job_id) {
            match r.attempt {
                // A late cancel of an earlier attempt: the one running now
                // goes on.
                Some(a) if a != j.attempt => {
                    tracing::info!(
                        job = %r.job_id,
                        "ignoring a cancel of attempt {a}: attempt {} runs here",
                        j.attempt
                    );
                }
                _ => {
                    j.asked.store(true, Ordering::Relaxed);
                    j.cancel.store(true, Ordering::Relaxed);
                }
            }
        }
        Ok(Response::new(CancelJobResponse {}))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A worker whose executor runs attempt 1 of job `j`, with the flags
    /// that attempt's cancel sets.
    async fn running_attempt_one(
        dir: &std::path::Path,
    ) -> (ExecutorService, Arc<AtomicBool>, Arc<AtomicBool>) {
        let executor = Executor::new(
            "w".into(),
            WasmRuntime::new(weir_host::HostConfig::default()).unwrap(),
            Arc::new(DataServer::bind("127.0.0.1:0").await.unwrap()),
            "http://127.0.0.1:1".into(),
            ExecutorSettings {
                data_dir: dir.to_owned(),
                default_backend: StateBackendKind::Memory,
                allowed: AllowedDirs::unrestricted(),
                present: PresentToken::of(&weir_model::auth::Tokens::open()),
            },
        );
        let (asked, cancel) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicBool::new(false)),
        );
        executor.jobs().insert(
            "j".into(),
            RunningJob {
                attempt: 1,
                name: "n".into(),
                asked: asked.clone(),
                cancel: cancel.clone(),
                counters: Arc::new(JobCounters::default()),
                checkpointing: None,
            },
        );
        (ExecutorService(executor), asked, cancel)
    }

    /// A cancel of an earlier attempt, arriving late, leaves the attempt
    /// running here alone; one of this attempt (or of any, unnamed) stops
    /// it.
    #[tokio::test]
    async fn a_late_cancel_of_an_earlier_attempt_does_not_stop_the_newer_one() {
        let dir = tempfile::tempdir().unwrap();
        let (service, asked, cancel) = running_attempt_one(dir.path()).await;
        let cancel_of = |attempt| {
            Request::new(CancelJobRequest {
                job_id: "j".into(),
                attempt,
            })
        };
        service.cancel_job(cancel_of(Some(0))).await.unwrap();
        assert!(!cancel.load(Ordering::Relaxed) && !asked.load(Ordering::Relaxed));
        service.cancel_job(cancel_of(Some(1))).await.unwrap();
        assert!(cancel.load(Ordering::Relaxed) && asked.load(Ordering::Relaxed));
    }

    /// A deployment of an earlier attempt, arriving late, is refused: the
    /// attempt running here goes on, and stays the one recorded. (Without
    /// the check, attempt 0 took attempt 1's place in the map of jobs.)
    #[tokio::test]
    async fn a_late_deployment_of_an_earlier_attempt_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (service, asked, cancel) = running_attempt_one(dir.path()).await;
        let manifest = weir_model::Manifest::parse(
            "[job]\nname='j'\n[[source]]\nname='s'\ntype='generator'\n\
             [[sink]]\nname='o'\ntype='stdout'\n",
        )
        .unwrap();
        let graph = JobGraph::build(&manifest, Default::default(), None).unwrap();
        let request = DeployJobRequest {
            job_id: "j".into(),
            graph_json: serde_json::to_string(&graph).unwrap(),
            components: Vec::new(),
            places: Vec::new(),
            attempt: 0,
            checkpoint_storage: String::new(),
            restore_json: String::new(),
        };
        let refused = service.deploy_job(Request::new(request)).await.unwrap_err();
        assert_eq!(refused.code(), tonic::Code::Aborted, "{refused:?}");
        assert!(refused.message().contains("attempt 1"), "{refused:?}");
        assert!(!cancel.load(Ordering::Relaxed) && !asked.load(Ordering::Relaxed));
        assert_eq!(service.0.jobs().get("j").map(|j| j.attempt), Some(1));
    }
}
