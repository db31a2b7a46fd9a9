//! The dispatcher: accepts jobs, plans them, runs them through a
//! [`JobRunner`] and follows each through the states of [`crate::job_state`].

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::RwLock;
use weir_model::Manifest;
use weir_model::access::AllowedDirs;
use weir_model::metrics::JobCounters;
use weir_model::proto::JobComponent;

use super::store::JobStore;
use super::{GraphView, JobInfo, JobRequest, VertexStatus, count_subtasks, subtasks_of};
use crate::bundles::BundleStore;
use crate::checkpoint::CheckpointStats;
use crate::error::CoordinatorError;
use crate::job_state::{
    Canceled, Canceling, Created, Failed, Finished, Job, JobState, Lifecycle, Restarting, Running,
    TaskState,
};
use weir_model::JobGraph;

/// What a job's runner tells of it, in order.
enum Told {
    Event(ExecutionEvent),
    Done(anyhow::Result<()>),
}
use crate::job_master::{Done, Events, Execution, ExecutionEvent, JobRunner, Resume};
use crate::{Submission, plan};

/// The jobs of a coordinator: the dispatcher. Each job moves through the
/// states of [`crate::job_state`].
pub struct Jobs {
    store: JobStore,
    bundles: Arc<BundleStore>,
    pub(super) runner: Box<dyn JobRunner>,
    /// The directories jobs' connectors may reach.
    pub(super) allowed: AllowedDirs,
    entries: RwLock<BTreeMap<String, Lifecycle>>,
    next: AtomicU64,
    /// Every job's metrics and their history.
    pub metrics: crate::metrics::Metrics,
    /// The savepoints the API triggered.
    pub(super) triggers: crate::savepoint::triggers::Triggers,
    /// Where savepoints go when their trigger names no directory.
    pub(super) savepoints_dir: std::path::PathBuf,
    /// Where the jobs' checkpoints are kept (retained checkpoints there
    /// may start a job as savepoints do).
    pub(super) checkpoints_dir: std::path::PathBuf,
}

fn unknown(id: &str) -> CoordinatorError {
    CoordinatorError::not_found("job_not_found", format!("no job with id `{id}`"))
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
    if let Some(c) = &execution.checkpoints {
        info.checkpoints = Some(c.lock().unwrap_or_else(|p| p.into_inner()).clone());
    }
    for t in info.subtasks.iter_mut().filter(|t| !t.state.is_terminal()) {
        t.state = end;
    }
}

impl Jobs {
    /// Open the jobs kept under `data_dir/jobs`; their sources and sinks
    /// may reach files in `allowed` only.
    pub fn open(
        data_dir: &std::path::Path,
        bundles: Arc<BundleStore>,
        runner: Box<dyn JobRunner>,
        allowed: AllowedDirs,
    ) -> anyhow::Result<Arc<Jobs>> {
        let (store, records) = JobStore::open(data_dir)?;
        let mut entries = BTreeMap::new();
        for info in records {
            let was = info.state;
            let job = Lifecycle::recovered(info);
            if job.info().state != was {
                store.persist_now(job.info())?;
            }
            entries.insert(job.info().id.clone(), job);
        }
        let savepoints_dir = std::path::absolute(data_dir.join("savepoints"))
            .unwrap_or_else(|_| data_dir.join("savepoints"));
        crate::savepoint::retained::sweep(&savepoints_dir);
        let jobs = Arc::new(Jobs {
            store,
            bundles,
            runner,
            allowed,
            entries: RwLock::new(entries),
            next: AtomicU64::new(0),
            metrics: Default::default(),
            triggers: Default::default(),
            savepoints_dir,
            checkpoints_dir: std::path::absolute(data_dir.join("checkpoints"))
                .unwrap_or_else(|_| data_dir.join("checkpoints")),
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

    async fn persist(&self, info: &JobInfo) -> Result<(), CoordinatorError> {
        self.store.persist(info).await
    }

    pub(super) fn new_id(&self) -> String {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let seed = format!("{}-{}-{n}", weir_model::now_ms(), std::process::id());
        crate::blob::sha256_hex(seed.as_bytes())[..16].to_owned()
    }

    /// Plan the job `request` asks for: its graph and its components
    /// (planned against what they export, as checked at upload).
    pub(super) async fn plan(
        &self,
        request: &JobRequest,
    ) -> Result<(JobGraph, Vec<JobComponent>), CoordinatorError> {
        let bundle = self.bundles.get(&request.bundle).await?;
        let files = self.bundles.files(&request.bundle).await?;
        let manifest = Manifest::parse(&files.manifest)
            .map_err(|e| CoordinatorError::unprocessable("manifest_invalid", e.to_string()))?;
        let mut components: Vec<JobComponent> = files
            .components
            .into_iter()
            .map(|(name, wasm)| JobComponent { name, wasm })
            .collect();
        components.sort_by(|a, b| a.name.cmp(&b.name));
        let submission = Submission {
            params: request.params.clone().into_iter().collect(),
            parallelism: request.parallelism,
            builtin_params: vec![("bundle_dir".into(), ".".into())],
        };
        let mut graph = plan(&manifest, &submission, &bundle.exported())
            .map_err(|e| CoordinatorError::of_plan("job_invalid", e))?;
        super::access::check(&self.allowed, &graph)?;
        // Every subtask of every attempt cuts its file's splits from the
        // size it has now (a restore keeps the ranges its checkpoint holds).
        graph.fix_file_sizes();
        Ok((graph, components))
    }

    /// Plan and start a job.
    pub async fn submit(
        self: &Arc<Self>,
        request: JobRequest,
    ) -> Result<JobInfo, CoordinatorError> {
        let (graph, components) = self.plan(&request).await?;
        let from = match &request.from_savepoint {
            Some(path) => Some(
                self.savepoint_to_start(path, request.allow_non_restored_state)
                    .await?,
            ),
            None => None,
        };
        if let Some(from) = &from {
            crate::savepoint::declared::check(
                self.bundles.runtime(),
                &graph,
                &components,
                &from.dir,
                &from.metadata,
            )
            .await?;
        }
        let id = self.new_id();
        // The jobs that may own a sink's output, and whether each ended.
        let known: BTreeMap<String, bool> = self
            .entries
            .read()
            .await
            .iter()
            .map(|(id, j)| (id.clone(), j.info().state.is_terminal()))
            .collect();
        let owners = super::access::Owners {
            job: &id,
            known: &known,
            predecessor: from
                .as_ref()
                .map(|f| (f.metadata.job.as_str(), f.metadata.stopped)),
        };
        let made = super::access::prepare_sinks(&self.allowed, &graph, &owners)?;
        let info = JobInfo {
            id: id.clone(),
            name: graph.name.clone(),
            bundle: request.bundle,
            parallelism: request.parallelism,
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
            submitted_at_ms: weir_model::now_ms(),
            ended_at_ms: None,
            checkpoints: None,
            attempt: 0,
            restarts: 0,
        };
        if let Err(e) = self.persist(&info).await {
            made.undo();
            return Err(e);
        }
        self.entries.write().await.insert(
            id.clone(),
            Lifecycle::Created(Job {
                info,
                state: Created {
                    cancel_requested: false,
                },
            }),
        );

        let (started, done, events) = self.follow(&id);
        let execution = match from {
            None => {
                self.runner
                    .start(&id, graph, components, done, events)
                    .await
            }
            Some(from) => {
                self.runner
                    .start_from(&id, graph, components, done, events, from)
                    .await
            }
        };

        let mut entries = self.entries.write().await;
        let Some(Lifecycle::Created(job)) = entries.remove(&id) else {
            return Err(CoordinatorError::internal(format!(
                "job `{id}` left its created state"
            )));
        };
        let execution = match execution {
            Ok(execution) => execution,
            Err(e) => {
                // Nothing half-stored: the job was never accepted.
                drop(entries);
                self.store.remove(&id).await;
                made.undo();
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

    /// What its runner tells of job `id` (restarts, its end), handled
    /// in order once `started` is sent (the job is recorded as running).
    fn follow(self: &Arc<Self>, id: &str) -> (tokio::sync::oneshot::Sender<()>, Done, Events) {
        let (started, started_rx) = tokio::sync::oneshot::channel::<()>();
        let (tell, mut told) = tokio::sync::mpsc::unbounded_channel::<Told>();
        let jobs = self.clone();
        let told_id = id.to_owned();
        tokio::spawn(async move {
            if started_rx.await.is_err() {
                return;
            }
            while let Some(t) = told.recv().await {
                match t {
                    Told::Event(e) => jobs.on_event(&told_id, e).await,
                    Told::Done(outcome) => {
                        jobs.finish(&told_id, outcome).await;
                        return;
                    }
                }
            }
        });
        let on_done = tell.clone();
        let done = Box::new(move |outcome: anyhow::Result<()>| {
            let _ = on_done.send(Told::Done(outcome));
        });
        let events: Events = Arc::new(move |e| {
            let _ = tell.send(Told::Event(e));
        });
        (started, done, events)
    }

    /// Resume every job that ran when the coordinator stopped (each in the
    /// background: it waits for workers to register again).
    pub async fn resume_recovering(self: &Arc<Self>) {
        let ids: Vec<String> = self
            .entries
            .read()
            .await
            .iter()
            .filter(|(_, j)| matches!(j, Lifecycle::Recovering(_)))
            .map(|(id, _)| id.clone())
            .collect();
        for id in ids {
            let jobs = self.clone();
            tokio::spawn(async move { jobs.resume(&id).await });
        }
    }

    /// Resume job `id` (recovering): plan it again from its bundle and
    /// hand it to its runner as its next attempt, under its restart
    /// strategy; it fails if it cannot.
    async fn resume(self: &Arc<Self>, id: &str) {
        let Some((info, was)) = self.entries.read().await.get(id).and_then(|j| match j {
            Lifecycle::Recovering(j) => Some((j.info.clone(), j.state.was)),
            _ => None,
        }) else {
            return;
        };
        // A job that was restarting may have deployed its next attempt.
        let attempt = info.attempt + 1 + u32::from(was == JobState::Restarting);
        // Its checkpoints (the savepoint's among them, if it started from
        // one) are in the checkpoint storage.
        let planned = self.plan(&JobRequest::of(&info)).await;
        let stopped = format!("the coordinator stopped while attempt {} ran", info.attempt);
        let (graph, components) = match planned {
            Ok(p) => p,
            Err(e) => {
                let why = format!("{stopped}; it cannot resume: {}", e.message);
                return self.recovery_failed(id, why).await;
            }
        };
        // Recorded as restarting before anything is deployed, so that a
        // coordinator stopping again resumes it with a newer attempt.
        let mut restarting = info.clone();
        restarting.state = JobState::Restarting;
        restarting.restarts += 1;
        restarting.record_exception(
            format!("{stopped}; the job resumes from its latest completed checkpoint"),
            info.attempt,
        );
        if let Err(e) = self.persist(&restarting).await {
            return self.recovery_failed(id, e.message).await;
        }
        let (started, done, events) = self.follow(id);
        let resume = Resume { attempt };
        let execution = self
            .runner
            .resume(id, graph, components, done, events, resume)
            .await;
        let mut entries = self.entries.write().await;
        let Some(Lifecycle::Recovering(mut job)) = entries.remove(id) else {
            return;
        };
        let execution = match execution {
            Ok(e) => e,
            Err(e) => {
                entries.insert(id.to_owned(), Lifecycle::Recovering(job));
                drop(entries);
                return self
                    .recovery_failed(id, format!("{stopped}: {}", e.message))
                    .await;
            }
        };
        job.info = JobInfo {
            state: JobState::Recovering,
            ..restarting
        };
        let next = if job.state.cancel_requested {
            execution.cancel.store(true, Ordering::Relaxed);
            Lifecycle::Canceling(job.then(|_| Canceling { execution }))
        } else {
            Lifecycle::Restarting(job.then(|_| Restarting { execution }))
        };
        if let Err(e) = self.persist(next.info()).await {
            tracing::error!("cannot record the resumption of job {id}: {}", e.message);
        }
        entries.insert(id.to_owned(), next);
        drop(entries);
        let _ = started.send(());
    }

    /// Job `id` (recovering) cannot resume: it fails with `why` (or is
    /// canceled, if that was asked meanwhile).
    async fn recovery_failed(&self, id: &str, why: String) {
        let mut entries = self.entries.write().await;
        let Some(Lifecycle::Recovering(mut job)) = entries.remove(id) else {
            return;
        };
        tracing::warn!(job = %id, "{why}");
        let next = if job.state.cancel_requested {
            Lifecycle::Canceled(job.to(Canceled))
        } else {
            job.info.error = Some(why.clone());
            job.info.record_exception(why, job.info.attempt);
            Lifecycle::Failed(job.to(Failed))
        };
        if let Err(e) = self.persist(next.info()).await {
            tracing::error!("cannot record the end of job {id}: {}", e.message);
        }
        entries.insert(id.to_owned(), next);
    }

    /// A restart of job `id`: its failure joins the exception history, with
    /// the attempt; the job is restarting, then running again.
    async fn on_event(&self, id: &str, event: ExecutionEvent) {
        let mut entries = self.entries.write().await;
        let Some(job) = entries.remove(id) else {
            return;
        };
        let next = match (job, event) {
            (Lifecycle::Running(mut job), ExecutionEvent::Restarting { attempt, failure }) => {
                job.info.record_exception(failure, attempt);
                job.info.restarts += 1;
                Lifecycle::Restarting(job.then(|r| Restarting {
                    execution: r.execution,
                }))
            }
            (Lifecycle::Restarting(mut job), ExecutionEvent::Restarted { attempt, .. }) => {
                job.info.attempt = attempt;
                Lifecycle::Running(job.then(|r| Running {
                    execution: r.execution,
                }))
            }
            // Events are told in order, but a newer attempt's may follow
            // quickly: the record keeps up with the newest.
            (Lifecycle::Running(mut job), ExecutionEvent::Restarted { attempt, .. }) => {
                job.info.attempt = job.info.attempt.max(attempt);
                Lifecycle::Running(job)
            }
            (Lifecycle::Restarting(mut job), ExecutionEvent::Restarting { attempt, failure }) => {
                job.info.record_exception(failure, attempt);
                job.info.restarts += 1;
                // A deployment that failed used its attempt number: a
                // resumed job goes on above it.
                job.info.attempt = job.info.attempt.max(attempt);
                Lifecycle::Restarting(job)
            }
            (
                Lifecycle::Restarting(mut job),
                ExecutionEvent::RestoreFailed {
                    attempt,
                    checkpoint,
                    reason,
                },
            ) => {
                job.info.record_exception(
                    format!("checkpoint {checkpoint} cannot be restored: {reason}"),
                    attempt,
                );
                Lifecycle::Restarting(job)
            }
            // Canceling: its failure is still worth keeping.
            (Lifecycle::Canceling(mut job), ExecutionEvent::Restarting { attempt, failure }) => {
                job.info.record_exception(failure, attempt);
                Lifecycle::Canceling(job)
            }
            (other, _) => other,
        };
        if let Err(e) = self.persist(next.info()).await {
            tracing::error!("cannot record a restart of job {id}: {}", e.message);
        }
        entries.insert(id.to_owned(), next);
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
            (Lifecycle::Running(mut job), Err(_))
                if job.state.execution.stopped.load(Ordering::Relaxed) =>
            {
                // Its runner canceled it (a stop with a savepoint).
                settle(&mut job.info, &job.state.execution, TaskState::Canceled);
                Lifecycle::Canceled(job.to(Canceled))
            }
            (Lifecycle::Running(mut job), Err(e)) => {
                settle(&mut job.info, &job.state.execution, TaskState::Failed);
                job.info.error = Some(format!("{e:#}"));
                job.info
                    .record_exception(format!("{e:#}"), job.info.attempt);
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
            (Lifecycle::Restarting(mut job), outcome) => {
                settle(&mut job.info, &job.state.execution, TaskState::Failed);
                let why = match outcome {
                    Ok(()) => "the job ended while it restarted".to_owned(),
                    Err(e) => format!("{e:#}"),
                };
                job.info.error = Some(why.clone());
                job.info.record_exception(why, job.info.attempt + 1);
                Lifecycle::Failed(job.to(Failed))
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
    pub async fn metrics(&self, id: &str) -> Result<crate::metrics::JobMetrics, CoordinatorError> {
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

    /// Every running job's checkpoints and restarts: id, name, checkpoints,
    /// restarts (for the Prometheus metrics).
    pub async fn fault_tolerance(&self) -> Vec<(String, String, CheckpointStats, u32)> {
        let entries = self.entries.read().await;
        entries
            .iter()
            .filter_map(|(id, job)| {
                let e = job.execution()?;
                let stats = e
                    .checkpoints
                    .as_ref()
                    .map(|c| c.lock().unwrap_or_else(|p| p.into_inner()).clone())
                    .unwrap_or_default();
                let info = job.info();
                (stats.config.is_some() || info.restarts > 0)
                    .then(|| (id.clone(), info.name.clone(), stats, info.restarts))
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

    /// A job that has not ended and runs bundle `bundle` (it may restart,
    /// or resume after a coordinator restart, from it): its id and state.
    pub async fn using_bundle(&self, bundle: &str) -> Option<(String, JobState)> {
        self.entries
            .read()
            .await
            .values()
            .map(Lifecycle::info)
            .find(|j| j.bundle == bundle && !j.state.is_terminal())
            .map(|j| (j.id.clone(), j.state))
    }

    /// Every job, oldest first.
    pub async fn list(&self) -> Vec<JobInfo> {
        let mut all: Vec<JobInfo> = self.entries.read().await.values().map(Self::live).collect();
        all.sort_by_key(|j| (j.submitted_at_ms, j.id.clone()));
        all
    }

    /// The checkpoints of job `id`: live while it runs, as they were at
    /// its end after.
    pub async fn checkpoints(&self, id: &str) -> Result<CheckpointStats, CoordinatorError> {
        let entries = self.entries.read().await;
        let job = entries.get(id).ok_or_else(|| unknown(id))?;
        if let Some(c) = job.execution().and_then(|e| e.checkpoints.as_ref()) {
            return Ok(c.lock().unwrap_or_else(|p| p.into_inner()).clone());
        }
        Ok(job.info().checkpoints.clone().unwrap_or_default())
    }

    /// The keyed state of job `id`'s latest completed checkpoint, as JSON
    /// lines: a running job's from its job master, an ended job's from
    /// the checkpoint storage (its retained checkpoints stay there).
    pub async fn latest_state(
        &self,
        id: &str,
        query: &crate::checkpoint::inspect::StateQuery,
    ) -> Result<crate::checkpoint::inspect::Lines, CoordinatorError> {
        let info = self.get(id).await?;
        if !info.state.is_terminal() {
            return self.runner.latest_state(id, query).await;
        }
        let failed = |e: anyhow::Error| {
            CoordinatorError::internal(format!("reading the checkpoints of job `{id}`: {e:#}"))
        };
        let store = weir_model::storage::file_url(&self.checkpoints_dir)
            .and_then(|url| weir_model::storage::open(&url))
            .map_err(failed)?;
        let stored = crate::checkpoint::completed::read_back(store.as_ref(), id, 1)
            .await
            .map_err(failed)?;
        let Some(latest) = stored.completed.last() else {
            return Err(CoordinatorError::new(
                crate::error::ErrorKind::Conflict,
                "no_checkpoint_yet",
                format!("job `{id}` ended without a completed checkpoint"),
            ));
        };
        let layout = self.layout_of(latest, Some(&info)).await?;
        crate::checkpoint::inspect::read(store.as_ref(), latest, &layout, query).await
    }

    /// One job, with live counts.
    pub async fn get(&self, id: &str) -> Result<JobInfo, CoordinatorError> {
        self.entries
            .read()
            .await
            .get(id)
            .map(Self::live)
            .ok_or_else(|| unknown(id))
    }

    /// Ask a job to stop. A job still being deployed is canceled as soon as
    /// its tasks run.
    pub async fn cancel(&self, id: &str) -> Result<JobInfo, CoordinatorError> {
        let mut entries = self.entries.write().await;
        let job = entries.remove(id).ok_or_else(|| unknown(id))?;
        let (next, refused) = match job {
            Lifecycle::Created(mut job) => {
                job.state.cancel_requested = true;
                (Lifecycle::Created(job), None)
            }
            Lifecycle::Recovering(mut job) => {
                job.state.cancel_requested = true;
                (Lifecycle::Recovering(job), None)
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
            Lifecycle::Restarting(job) => {
                job.state.execution.cancel.store(true, Ordering::Relaxed);
                (
                    Lifecycle::Canceling(job.then(|r| Canceling {
                        execution: r.execution,
                    })),
                    None,
                )
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
            return Err(CoordinatorError::new(
                crate::error::ErrorKind::Conflict,
                "job_not_running",
                format!("job `{id}` is {state:?}, not running"),
            ));
        }
        persisted.map(|()| info)
    }
}
