//! Jobs: submitted against a bundle, planned, run, watched and canceled.
//!
//! A job's record (state, error, counts) is kept under the data directory,
//! so a restarted coordinator lists its jobs again; a job that was running
//! when the coordinator stopped is marked failed, with that reason.
//!
//! Jobs run through a [`Scheduler`]. [`EmbeddedScheduler`] runs every task in
//! the coordinator's own process (`weir local`); scheduling onto workers'
//! slots uses the same interface.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use serde::{Deserialize, Serialize};
use tokio::sync::RwLock;
use weir_host::WasmRuntime;
use weir_model::{JobGraph, Manifest};
use weir_worker::{JobCounters, LocalJob, VertexReport, WasmOperatorFactory, run_job};

use crate::bundles::BundleStore;
use crate::error::ApiError;
use crate::job_state::{Canceled, Canceling, Created, Failed, Finished, Job, Lifecycle, Running};
use crate::{Submission, plan};

/// Where a job is in its life, as the API names it; the legal moves are
/// declared in [`crate::job_state`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    /// Planned; its tasks are being scheduled and deployed.
    Created,
    /// Its tasks run.
    Running,
    /// Its bounded input was consumed, every task finished.
    Finished,
    /// A task failed, or the coordinator stopped while it ran.
    Failed,
    /// A cancel was asked; tasks are stopping.
    Canceling,
    /// Canceled.
    Canceled,
}

/// A job state as the API writes it.
pub fn state_name(state: JobState) -> &'static str {
    match state {
        JobState::Created => "created",
        JobState::Running => "running",
        JobState::Finished => "finished",
        JobState::Failed => "failed",
        JobState::Canceling => "canceling",
        JobState::Canceled => "canceled",
    }
}

impl JobState {
    /// Whether the job has ended.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            JobState::Finished | JobState::Failed | JobState::Canceled
        )
    }
}

/// Where one subtask is in its life.
///
/// ```text
/// created ──► scheduled ──► deploying ──► running ──► finished | failed | canceled
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskState {
    /// Planned, not placed yet.
    Created,
    /// Given a slot on a worker.
    Scheduled,
    /// Sent to its worker.
    Deploying,
    /// Running.
    Running,
    /// Ended with its input.
    Finished,
    /// Failed, or its worker was lost.
    Failed,
    /// Canceled.
    Canceled,
}

impl TaskState {
    /// Whether the subtask has ended.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskState::Finished | TaskState::Failed | TaskState::Canceled
        )
    }
}

/// One subtask of a job: where it runs and in which state.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct SubtaskStatus {
    /// The vertex's name.
    pub vertex: String,
    /// The subtask's index.
    pub subtask: u32,
    /// The worker it runs on (none when the coordinator runs it).
    pub worker: Option<String>,
    /// The job's slot it shares with the same index of other vertices.
    pub slot: Option<u32>,
    /// Its state.
    pub state: TaskState,
    /// Records it received.
    #[serde(default)]
    pub records_in: u64,
    /// Records it emitted.
    #[serde(default)]
    pub records_out: u64,
}

/// Every subtask of `graph`, in `state`, not placed.
pub fn subtasks_of(graph: &JobGraph, state: TaskState) -> Vec<SubtaskStatus> {
    graph
        .vertices
        .iter()
        .flat_map(|v| {
            (0..v.parallelism).map(move |s| SubtaskStatus {
                vertex: v.name.clone(),
                subtask: s,
                worker: None,
                slot: None,
                state,
                records_in: 0,
                records_out: 0,
            })
        })
        .collect()
}

/// Set every subtask's counts from `counters`.
fn count_subtasks(subtasks: &mut [SubtaskStatus], counters: &JobCounters) {
    for t in subtasks {
        if let Some(c) = counters
            .vertices
            .iter()
            .find(|(name, _)| *name == t.vertex)
            .and_then(|(_, subtasks)| subtasks.get(t.subtask as usize))
        {
            (t.records_in, t.records_out) = c.get();
        }
    }
}

/// Records through one vertex.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct VertexStatus {
    /// The vertex's name.
    pub name: String,
    /// Its parallelism.
    pub parallelism: u32,
    /// Records received, all subtasks.
    pub records_in: u64,
    /// Records emitted, all subtasks.
    pub records_out: u64,
}

impl From<VertexReport> for VertexStatus {
    fn from(r: VertexReport) -> Self {
        VertexStatus {
            name: r.name,
            parallelism: r.parallelism,
            records_in: r.records_in,
            records_out: r.records_out,
        }
    }
}

/// A job's graph as the dashboard draws it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct GraphView {
    /// Its vertices, in id order.
    pub vertices: Vec<VertexView>,
    /// Its edges.
    pub edges: Vec<EdgeView>,
}

/// A vertex of a [`GraphView`].
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct VertexView {
    /// Its name.
    pub name: String,
    /// `source`, `operator` or `sink`.
    pub kind: String,
    /// What it runs: the operator's function, the source's or sink's type.
    pub what: String,
    /// Its parallelism.
    pub parallelism: u32,
    /// The task it is chained into.
    pub task: usize,
}

/// An edge of a [`GraphView`].
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct EdgeView {
    /// The producing vertex (index).
    pub from: usize,
    /// The consuming vertex (index).
    pub to: usize,
    /// `forward`, `hash(...)` or `rebalance`; `chained` inside a task.
    pub partitioning: String,
    /// The side output it carries, if any.
    pub side_output: Option<String>,
}

impl GraphView {
    /// The view of `graph`.
    pub fn of(graph: &JobGraph) -> GraphView {
        use weir_model::graph::{SinkConfig, SourceConfig};
        use weir_model::{Partitioning, VertexKind};
        let tasks = graph.tasks();
        let task_of = |v: usize| graph.task_of(&tasks, v);
        GraphView {
            vertices: graph
                .vertices
                .iter()
                .map(|v| {
                    let (kind, what) = match &v.kind {
                        VertexKind::Source(c) => (
                            "source",
                            match c {
                                SourceConfig::TextFile { .. } => "text-file",
                                SourceConfig::JsonLinesFile { .. } => "json-lines-file",
                                SourceConfig::Generator { .. } => "generator",
                            }
                            .to_owned(),
                        ),
                        VertexKind::Operator {
                            function, window, ..
                        } => (
                            "operator",
                            match window {
                                Some(_) => format!("{function} (window)"),
                                None => function.clone(),
                            },
                        ),
                        VertexKind::Sink(c) => (
                            "sink",
                            match c {
                                SinkConfig::Stdout => "stdout",
                                SinkConfig::JsonLinesFile { .. } => "json-lines-file",
                            }
                            .to_owned(),
                        ),
                    };
                    VertexView {
                        name: v.name.clone(),
                        kind: kind.to_owned(),
                        what,
                        parallelism: v.parallelism,
                        task: task_of(v.id),
                    }
                })
                .collect(),
            edges: graph
                .edges
                .iter()
                .map(|e| EdgeView {
                    from: e.from,
                    to: e.to,
                    partitioning: if task_of(e.from) == task_of(e.to) {
                        "chained".to_owned()
                    } else {
                        match &e.partitioning {
                            Partitioning::Forward => "forward".to_owned(),
                            Partitioning::Rebalance => "rebalance".to_owned(),
                            Partitioning::Hash(k) => format!(
                                "hash({})",
                                match k {
                                    weir_model::KeyBy::Value => "value",
                                    weir_model::KeyBy::Key => "key",
                                    weir_model::KeyBy::Pointer(p) => p.as_str(),
                                }
                            ),
                        }
                    },
                    side_output: e.side_output.clone(),
                })
                .collect(),
        }
    }
}

/// A failure of a job, as its exception history keeps it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ExceptionInfo {
    /// When, ms since the epoch.
    pub at_ms: i64,
    /// What happened: names the operator, subtask and worker, with the
    /// guest's own message.
    pub message: String,
}

/// What the API tells about a job.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct JobInfo {
    /// The job's id.
    pub id: String,
    /// The job's name (from the manifest).
    pub name: String,
    /// The bundle it runs.
    pub bundle: String,
    /// Its state.
    pub state: JobState,
    /// Why it failed.
    pub error: Option<String>,
    /// The parameters it runs with.
    pub params: BTreeMap<String, String>,
    /// Its vertices, with their parallelism and counts.
    pub vertices: Vec<VertexStatus>,
    /// Every subtask: its worker, slot and state.
    #[serde(default)]
    pub subtasks: Vec<SubtaskStatus>,
    /// Its graph: vertices and edges, as the dashboard draws them.
    #[serde(default)]
    pub graph: GraphView,
    /// Its failures, oldest first.
    #[serde(default)]
    pub exceptions: Vec<ExceptionInfo>,
    /// When it was submitted, ms since the epoch.
    pub submitted_at_ms: i64,
    /// When it ended.
    pub ended_at_ms: Option<i64>,
}

/// A submission, as the API receives it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobRequest {
    /// The bundle's id.
    pub bundle: String,
    /// Parallelism overriding the manifest's default.
    #[serde(default)]
    pub parallelism: Option<u32>,
    /// Job parameters.
    #[serde(default)]
    pub params: BTreeMap<String, String>,
}

/// A job's tasks as the scheduler runs them: how to stop them and watch them.
pub struct Execution {
    /// Set to stop it.
    pub cancel: Arc<AtomicBool>,
    /// Its live counts.
    pub counters: Arc<JobCounters>,
    /// Its subtasks, live.
    pub subtasks: Arc<std::sync::Mutex<Vec<SubtaskStatus>>>,
}

/// How a scheduler tells the end of a job.
pub type Done = Box<dyn FnOnce(anyhow::Result<()>) + Send>;

/// Runs jobs. It reports the end of a job through `done`.
#[tonic::async_trait]
pub trait Scheduler: Send + Sync {
    /// Start job `id` (`graph`, with `component` and its bytes); call `done`
    /// with the outcome. Fails (and never calls `done`) if it cannot start.
    async fn start(
        &self,
        id: &str,
        graph: JobGraph,
        component: Arc<weir_host::LoadedComponent>,
        component_bytes: Vec<u8>,
        done: Done,
    ) -> Result<Execution, ApiError>;
}

/// Runs every task of a job in this process.
pub struct EmbeddedScheduler {
    /// The process's Wasm runtime.
    pub runtime: Arc<WasmRuntime>,
}

#[tonic::async_trait]
impl Scheduler for EmbeddedScheduler {
    async fn start(
        &self,
        _id: &str,
        graph: JobGraph,
        component: Arc<weir_host::LoadedComponent>,
        _component_bytes: Vec<u8>,
        done: Done,
    ) -> Result<Execution, ApiError> {
        let params = graph.params.clone().into_iter().collect();
        let factory = Arc::new(WasmOperatorFactory {
            runtime: self.runtime.clone(),
            component,
            params,
        });
        let job = LocalJob::new(graph, factory);
        let running = Execution {
            cancel: job.cancel.clone(),
            counters: job.counters.clone(),
            subtasks: Arc::new(std::sync::Mutex::new(subtasks_of(
                &job.graph,
                TaskState::Running,
            ))),
        };
        tokio::spawn(async move { done(run_job(job).await.map(|_| ())) });
        Ok(running)
    }
}

/// The jobs of a coordinator: the dispatcher. Each job moves through the
/// states of [`crate::job_state`].
pub struct Jobs {
    dir: PathBuf,
    bundles: Arc<BundleStore>,
    runtime: Arc<WasmRuntime>,
    scheduler: Box<dyn Scheduler>,
    entries: RwLock<BTreeMap<String, Lifecycle>>,
    next: AtomicU64,
    /// Every job's metrics and their history.
    pub metrics: crate::metrics::Metrics,
}

fn unknown(id: &str) -> ApiError {
    ApiError::not_found("job_not_found", format!("no job with id `{id}`"))
}

/// Copy a job's counts and subtask states from its execution.
fn refresh(info: &mut JobInfo, execution: &Execution) {
    info.vertices = execution
        .counters
        .report()
        .into_iter()
        .map(VertexStatus::from)
        .collect();
    info.subtasks = execution
        .subtasks
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    count_subtasks(&mut info.subtasks, &execution.counters);
}

/// Set a job's final counts and subtask states from its execution: the
/// subtasks still going end in `end`.
fn settle(info: &mut JobInfo, execution: &Execution, end: TaskState) {
    refresh(info, execution);
    for t in info.subtasks.iter_mut().filter(|t| !t.state.is_terminal()) {
        t.state = end;
    }
}

impl Jobs {
    /// Open the jobs kept under `data_dir/jobs`.
    pub fn open(
        data_dir: &std::path::Path,
        bundles: Arc<BundleStore>,
        runtime: Arc<WasmRuntime>,
        scheduler: Box<dyn Scheduler>,
    ) -> anyhow::Result<Arc<Jobs>> {
        let dir = data_dir.join("jobs");
        std::fs::create_dir_all(&dir)?;
        let mut entries = BTreeMap::new();
        for entry in std::fs::read_dir(&dir)? {
            let path = entry?.path();
            if path.extension().is_none_or(|e| e != "json") {
                continue;
            }
            let info: JobInfo = serde_json::from_slice(&std::fs::read(&path)?)
                .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
            let was = info.state;
            let job = Lifecycle::recovered(info);
            if job.info().state != was {
                std::fs::write(&path, serde_json::to_vec_pretty(job.info())?)?;
            }
            entries.insert(job.info().id.clone(), job);
        }
        let jobs = Arc::new(Jobs {
            dir,
            bundles,
            runtime,
            scheduler,
            entries: RwLock::new(entries),
            next: AtomicU64::new(0),
            metrics: Default::default(),
        });
        // A sample of every running job's metrics a second, for rates and
        // the dashboard's charts; it stops with the last reference.
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            let weak = Arc::downgrade(&jobs);
            handle.spawn(async move {
                let mut tick = tokio::time::interval(std::time::Duration::from_secs(1));
                loop {
                    tick.tick().await;
                    let Some(jobs) = weak.upgrade() else { return };
                    jobs.sample().await;
                }
            });
        }
        Ok(jobs)
    }

    fn record_path(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.json"))
    }

    async fn persist(&self, info: &JobInfo) -> Result<(), ApiError> {
        let path = self.record_path(&info.id);
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

    fn new_id(&self) -> String {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let seed = format!("{}-{}-{n}", weir_host::now_ms(), std::process::id());
        crate::blob::sha256_hex(seed.as_bytes())[..16].to_owned()
    }

    /// Plan and start a job.
    pub async fn submit(self: &Arc<Self>, request: JobRequest) -> Result<JobInfo, ApiError> {
        let files = self.bundles.files(&request.bundle).await?;
        let manifest = Manifest::parse(&files.manifest)
            .map_err(|e| ApiError::unprocessable("manifest_invalid", e.to_string()))?;
        let runtime = self.runtime.clone();
        let bytes = files.component;
        let (component, bytes) = tokio::task::spawn_blocking(move || (runtime.load(&bytes), bytes))
            .await
            .map_err(|e| ApiError::internal(e.to_string()))?;
        let component =
            component.map_err(|e| ApiError::unprocessable("component_invalid", e.to_string()))?;
        let submission = Submission {
            params: request.params.clone().into_iter().collect(),
            parallelism: request.parallelism,
            builtin_params: vec![("bundle_dir".into(), ".".into())],
        };
        let graph = plan(&manifest, &submission, &component.exported())
            .map_err(|e| ApiError::unprocessable("job_invalid", e.to_string()))?;
        let id = self.new_id();
        let info = JobInfo {
            id: id.clone(),
            name: graph.name.clone(),
            bundle: request.bundle,
            state: JobState::Created,
            error: None,
            params: request.params,
            vertices: JobCounters::new(&graph)
                .report()
                .into_iter()
                .map(VertexStatus::from)
                .collect(),
            subtasks: subtasks_of(&graph, TaskState::Created),
            graph: GraphView::of(&graph),
            exceptions: Vec::new(),
            submitted_at_ms: weir_host::now_ms(),
            ended_at_ms: None,
        };
        self.persist(&info).await?;
        self.entries.write().await.insert(
            id.clone(),
            Lifecycle::Created(Job {
                info,
                state: Created {
                    cancel_requested: false,
                },
            }),
        );

        // The job's end is handled once it is recorded as running.
        let (started, started_rx) = tokio::sync::oneshot::channel::<()>();
        let jobs = self.clone();
        let done_id = id.clone();
        let done = Box::new(move |outcome: anyhow::Result<()>| {
            tokio::spawn(async move {
                if started_rx.await.is_ok() {
                    jobs.finish(&done_id, outcome).await;
                }
            });
        });
        let execution = self
            .scheduler
            .start(&id, graph, component, bytes, done)
            .await;

        let mut entries = self.entries.write().await;
        let Some(Lifecycle::Created(job)) = entries.remove(&id) else {
            return Err(ApiError::internal(format!(
                "job `{id}` left its created state"
            )));
        };
        let execution = match execution {
            Ok(execution) => execution,
            Err(e) => {
                // Nothing half-stored: the job was never accepted.
                drop(entries);
                let _ = tokio::fs::remove_file(self.record_path(&id)).await;
                return Err(e);
            }
        };
        let cancel_requested = job.state.cancel_requested;
        let running = job.to(Running { execution });
        let job = if cancel_requested {
            running
                .state
                .execution
                .cancel
                .store(true, Ordering::Relaxed);
            Lifecycle::Canceling(running.then(|r| Canceling {
                execution: r.execution,
            }))
        } else {
            Lifecycle::Running(running)
        };
        let info = Self::live(&job);
        let persisted = self.persist(job.info()).await;
        entries.insert(id, job);
        drop(entries);
        let _ = started.send(());
        persisted.map(|()| info)
    }

    async fn finish(&self, id: &str, outcome: anyhow::Result<()>) {
        let mut entries = self.entries.write().await;
        let Some(job) = entries.remove(id) else {
            return;
        };
        if let Some(execution) = job.execution() {
            // The last figures stay for the job's page.
            self.metrics.sample(id, &execution.counters);
        }
        let next = match (job, outcome) {
            (Lifecycle::Running(mut job), Ok(())) => {
                settle(&mut job.info, &job.state.execution, TaskState::Finished);
                Lifecycle::Finished(job.to(Finished))
            }
            (Lifecycle::Running(mut job), Err(e)) => {
                settle(&mut job.info, &job.state.execution, TaskState::Failed);
                job.info.error = Some(format!("{e:#}"));
                job.info.exceptions.push(ExceptionInfo {
                    at_ms: weir_host::now_ms(),
                    message: format!("{e:#}"),
                });
                Lifecycle::Failed(job.to(Failed))
            }
            (Lifecycle::Canceling(mut job), Ok(())) => {
                settle(&mut job.info, &job.state.execution, TaskState::Finished);
                Lifecycle::Finished(job.to(Finished))
            }
            (Lifecycle::Canceling(mut job), Err(_)) => {
                settle(&mut job.info, &job.state.execution, TaskState::Canceled);
                Lifecycle::Canceled(job.to(Canceled))
            }
            (other, _) => {
                tracing::warn!("job {id} reported an end in state {:?}", other.info().state);
                other
            }
        };
        // Records are written under the lock: a job's records on disk keep
        // the order of its state changes.
        if let Err(e) = self.persist(next.info()).await {
            tracing::error!("cannot record the end of job {id}: {}", e.message);
        }
        entries.insert(id.to_owned(), next);
    }

    fn live(job: &Lifecycle) -> JobInfo {
        let mut info = job.info().clone();
        if let Some(execution) = job.execution() {
            refresh(&mut info, execution);
        }
        info
    }

    async fn sample(&self) {
        let entries = self.entries.read().await;
        for (id, job) in entries.iter() {
            if let Some(execution) = job.execution() {
                self.metrics.sample(id, &execution.counters);
            }
        }
    }

    /// The metrics of job `id`: live while it runs, its last figures after.
    pub async fn metrics(&self, id: &str) -> Result<crate::metrics::JobMetrics, ApiError> {
        let entries = self.entries.read().await;
        let job = entries.get(id).ok_or_else(|| unknown(id))?;
        let mut m = self
            .metrics
            .job(id, job.execution().map(|e| e.counters.as_ref()));
        if m.vertices.is_empty() {
            // Never sampled (it ended before a second passed, or before a
            // restart): its counts, from its record.
            let info = Self::live(job);
            m.vertices = info
                .vertices
                .iter()
                .map(|v| crate::metrics::VertexMetrics {
                    name: v.name.clone(),
                    parallelism: v.parallelism,
                    records_in: v.records_in,
                    records_out: v.records_out,
                    subtasks: info
                        .subtasks
                        .iter()
                        .filter(|t| t.vertex == v.name)
                        .map(|t| crate::metrics::SubtaskMetrics {
                            subtask: t.subtask,
                            records_in: t.records_in,
                            records_out: t.records_out,
                            ..Default::default()
                        })
                        .collect(),
                    ..Default::default()
                })
                .collect();
        }
        Ok(m)
    }

    /// The metrics of every running job, with its name.
    pub async fn running_metrics(&self) -> Vec<(String, crate::metrics::JobMetrics)> {
        let entries = self.entries.read().await;
        entries
            .iter()
            .filter_map(|(id, job)| {
                let e = job.execution()?;
                Some((
                    job.info().name.clone(),
                    self.metrics.job(id, Some(&e.counters)),
                ))
            })
            .collect()
    }

    /// How many jobs are in each state.
    pub async fn states(&self) -> BTreeMap<JobState, usize> {
        let mut n = BTreeMap::new();
        for job in self.entries.read().await.values() {
            *n.entry(job.info().state).or_default() += 1;
        }
        n
    }

    /// Every job, oldest first.
    pub async fn list(&self) -> Vec<JobInfo> {
        let mut all: Vec<JobInfo> = self.entries.read().await.values().map(Self::live).collect();
        all.sort_by_key(|j| (j.submitted_at_ms, j.id.clone()));
        all
    }

    /// One job, with live counts.
    pub async fn get(&self, id: &str) -> Result<JobInfo, ApiError> {
        self.entries
            .read()
            .await
            .get(id)
            .map(Self::live)
            .ok_or_else(|| unknown(id))
    }

    /// Ask a job to stop. A job still being deployed is canceled as soon as
    /// its tasks run.
    pub async fn cancel(&self, id: &str) -> Result<JobInfo, ApiError> {
        let mut entries = self.entries.write().await;
        let job = entries.remove(id).ok_or_else(|| unknown(id))?;
        let (next, refused) = match job {
            Lifecycle::Created(mut job) => {
                job.state.cancel_requested = true;
                (Lifecycle::Created(job), None)
            }
            Lifecycle::Running(job) => {
                job.state.execution.cancel.store(true, Ordering::Relaxed);
                (
                    Lifecycle::Canceling(job.then(|r| Canceling {
                        execution: r.execution,
                    })),
                    None,
                )
            }
            Lifecycle::Canceling(job) => {
                job.state.execution.cancel.store(true, Ordering::Relaxed);
                (Lifecycle::Canceling(job), None)
            }
            ended => {
                let state = ended.info().state;
                (ended, Some(state))
            }
        };
        let info = Self::live(&next);
        let persisted = match refused {
            None => self.persist(next.info()).await,
            Some(_) => Ok(()),
        };
        entries.insert(id.to_owned(), next);
        drop(entries);
        if let Some(state) = refused {
            return Err(ApiError::new(
                axum::http::StatusCode::CONFLICT,
                "job_not_running",
                format!("job `{id}` is {state:?}, not running"),
            ));
        }
        persisted.map(|()| info)
    }
}
