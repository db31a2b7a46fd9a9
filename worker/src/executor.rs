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
use weir_model::proto::job_reports_client::JobReportsClient;
use weir_model::proto::task_executor_server::{TaskExecutor, TaskExecutorServer};
use weir_model::proto::{
    CancelJobRequest, CancelJobResponse, DeployJobRequest, DeployJobResponse, JobEndedRequest,
    JobProgress,
};

use crate::network::DataServer;
use crate::operators::WasmOperatorFactory;
use crate::state::StateSetup;
use crate::task::Canceled;
use crate::{JobCounters, LocalJob, Placement, run_placed};
use weir_model::fault_tolerance::StateBackendKind;

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
    /// Per running job: whether the coordinator asked to cancel it.
    running: Mutex<HashMap<String, Arc<AtomicBool>>>,
    /// Per running job: the flag that stops its subtasks.
    cancels: Mutex<HashMap<String, Arc<AtomicBool>>>,
    /// Per running job: its records so far.
    counters: Mutex<HashMap<String, Arc<JobCounters>>>,
    /// Per running job: its name.
    names: Mutex<HashMap<String, String>>,
}

impl Executor {
    /// An executor with nothing running.
    pub fn new(
        worker_id: String,
        runtime: Arc<WasmRuntime>,
        server: Arc<DataServer>,
        coordinator: String,
        data_dir: PathBuf,
        default_backend: StateBackendKind,
    ) -> Arc<Self> {
        Arc::new(Executor {
            worker_id,
            runtime,
            server,
            coordinator,
            data_dir,
            default_backend,
            running: Mutex::default(),
            cancels: Mutex::default(),
            counters: Mutex::default(),
            names: Mutex::default(),
        })
    }

    /// The gRPC service.
    pub fn service(self: &Arc<Self>) -> TaskExecutorServer<ExecutorService> {
        TaskExecutorServer::new(ExecutorService(self.clone())).max_decoding_message_size(512 << 20)
    }

    /// Every running job: its id, its name and its counters.
    pub fn running_jobs(&self) -> Vec<(String, String, Arc<JobCounters>)> {
        let names = self.names.lock().unwrap_or_else(|p| p.into_inner());
        self.counters
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|(id, c)| {
                let name = names.get(id).cloned().unwrap_or_default();
                (id.clone(), name, c.clone())
            })
            .collect()
    }

    /// Records so far of every running job, per vertex (sent with heartbeats).
    pub fn progress(&self) -> Vec<JobProgress> {
        let counters = self.counters.lock().unwrap_or_else(|p| p.into_inner());
        counters
            .iter()
            .map(|(job_id, c)| JobProgress {
                job_id: job_id.clone(),
                counts: c.figures(),
            })
            .collect()
    }

    async fn report(&self, request: JobEndedRequest) {
        let result = async {
            let mut client = JobReportsClient::connect(self.coordinator.clone()).await?;
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
        let graph: JobGraph = serde_json::from_str(&r.graph_json)
            .map_err(|e| Status::invalid_argument(format!("the job graph: {e}")))?;
        let runtime = self.0.runtime.clone();
        let component = tokio::task::spawn_blocking(move || runtime.load(&r.component))
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
        let state =
            StateSetup::for_job(&graph, &r.job_id, self.0.default_backend, &self.0.data_dir);
        let factory = Arc::new(WasmOperatorFactory {
            runtime: self.0.runtime.clone(),
            component,
            params,
            state: state.clone(),
        });
        let name = graph.name.clone();
        let job = LocalJob::new(graph, factory);
        let cancel = job.cancel.clone();
        self.0
            .names
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(r.job_id.clone(), name);
        let asked = Arc::new(AtomicBool::new(false));
        self.0
            .running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(r.job_id.clone(), asked.clone());
        self.0
            .cancels
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(r.job_id.clone(), cancel);
        self.0
            .counters
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(r.job_id.clone(), job.counters.clone());
        let placement = Placement {
            job_id: r.job_id.clone(),
            server: self.0.server.clone(),
            at,
        };
        let executor = self.0.clone();
        let job_id = r.job_id;
        tracing::info!(job = %job_id, "deployed");
        tokio::spawn(async move {
            let counters = job.counters.clone();
            let result = run_placed(job, Some(placement)).await;
            state.remove();
            executor
                .running
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&job_id);
            executor
                .cancels
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&job_id);
            executor
                .counters
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&job_id);
            executor
                .names
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&job_id);
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
            };
            executor.report(request).await;
        });
        Ok(Response::new(DeployJobResponse {}))
    }

    async fn cancel_job(
        &self,
        request: Request<CancelJobRequest>,
    ) -> Result<Response<CancelJobResponse>, Status> {
        let id = request.into_inner().job_id;
        if let Some(asked) = self
            .0
            .running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&id)
        {
            asked.store(true, Ordering::Relaxed);
        }
        if let Some(cancel) = self
            .0
            .cancels
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&id)
        {
            cancel.store(true, Ordering::Relaxed);
        }
        Ok(Response::new(CancelJobResponse {}))
    }
}
