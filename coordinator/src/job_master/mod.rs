//! Job masters: one per running job (Flink's JobMaster), the owner of its
//! execution — its attempt number, what every attempt deploys (the plan),
//! its restart strategy with the failures it has seen, its checkpoint
//! coordinator, the completed checkpoints a next attempt restores from, and
//! its subtasks' states. Each master has a lock of its own: jobs never wait
//! on one another, and a job's reports, restarts and deployments take turns.
//!
//! - `runner`: what the dispatcher sees of a job master ([`JobRunner`],
//!   [`Execution`], [`ExecutionEvent`]).
//! - `deploy`: an attempt onto the slots the [`crate::scheduler`] assigns,
//!   and its checkpoint coordinator.
//! - `restart`: every restart decided in one place
//!   ([`JobMaster::next_attempt`]) — after an attempt failed on the
//!   workers, after a restart could not deploy, and when a restarted
//!   coordinator resumes the job — and the restart itself, from the newest
//!   readable checkpoint, never from one older than committed output.
//! - `reports`: the gRPC service workers report to; a report reaches its
//!   job's master only for the attempt that master runs.
//! - `gateway`: how a master calls its workers (bounded waits, cancels and
//!   checkpoint calls carrying the attempt).
//!
//! An attempt ends when every worker reported; it fails when one fails (the
//! others are canceled) or when a worker is lost, and then the job either
//! restarts or ends.

mod deploy;
mod gateway;
mod reports;
mod restart;
mod runner;
mod savepoints;
mod state;

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::Mutex;
use weir_model::JobGraph;
use weir_model::checkpoint::CheckpointMetadata;
use weir_model::fault_tolerance::RestartBackoff;
use weir_model::metrics::JobCounters;
use weir_model::proto::job_reports_server::JobReportsServer;
use weir_model::proto::{JobComponent, SubtaskMetrics};

use gateway::{cancel_now, cancel_on};
pub use reports::ReportsService;
pub use runner::{Done, Events, Execution, ExecutionEvent, JobRunner, Resume, SavepointStart};

use crate::checkpoint::completed::{StoredCheckpoints, read_back};
use crate::checkpoint::{CheckpointCoordinator, CheckpointStats};
use crate::error::CoordinatorError;
use crate::job_state::TaskState;
use crate::jobs::{SubtaskStatus, subtasks_of};
use crate::slot_manager::{SlotGrant, SlotManager};
use weir_model::auth::PresentToken;

/// The master of one job.
pub(crate) struct JobMaster {
    /// The slots the running attempt holds.
    grants: Vec<SlotGrant>,
    /// Workers (by id, with their executor) that have not reported.
    waiting: BTreeSet<(String, String)>,
    /// The executors of workers whose share of the running attempt
    /// finished: its checkpoints need them no more (their subtasks' final
    /// snapshots stand in), and a finished worker may be gone.
    finished_workers: Arc<std::sync::Mutex<BTreeSet<String>>>,
    failure: Option<String>,
    /// The failure is a consequence (a lost connection), not the cause.
    secondary: bool,
    counters: Arc<JobCounters>,
    /// The job's subtasks, with their workers and states.
    subtasks: Arc<std::sync::Mutex<Vec<SubtaskStatus>>>,
    /// Taken when the job ends.
    done: Option<Done>,
    /// The running attempt.
    attempt: u32,
    /// Its checkpoints, when it takes them.
    checkpoints: Option<Arc<CheckpointCoordinator>>,
    /// The completed checkpoints a next attempt may restore, newest last.
    retained: Vec<CheckpointMetadata>,
    /// What every attempt deploys.
    plan: Arc<Plan>,
    /// The job's cancel flag.
    cancel: Arc<AtomicBool>,
    /// Set with the cancel flag after a savepoint that stops the job.
    stopped: Arc<AtomicBool>,
    /// Where restarts are told.
    events: Events,
    /// Between two attempts.
    restarting: bool,
    /// Its attempt is being deployed: the deployment, not a report, decides
    /// what follows if the attempt ends meanwhile (one restart in flight).
    deploying: bool,
    /// The restart strategy, with the failures it has seen.
    backoff: RestartBackoff,
    /// When the running attempt was deployed, ms since the epoch (an
    /// attempt that ran long enough resets the strategy's count).
    started_ms: i64,
}

/// What every attempt of a job deploys.
struct Plan {
    graph: JobGraph,
    graph_json: String,
    components: Vec<JobComponent>,
    /// The checkpoint storage's URL, when the job takes checkpoints.
    storage: Option<String>,
    stats: Option<Arc<std::sync::Mutex<CheckpointStats>>>,
    /// The lowest id its checkpoints may take (above every id a previous
    /// coordinator used).
    first_checkpoint_id: u64,
}

impl JobMaster {
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

    /// Whether the job has ended (its end was told).
    fn ended(&self) -> bool {
        self.done.is_none()
    }
}

/// The job masters of a coordinator, by job id; they deploy onto the slots
/// of the workers that registered with the [`SlotManager`].
pub struct JobMasters {
    slots: Arc<SlotManager>,
    masters: std::sync::Mutex<HashMap<String, Arc<Mutex<JobMaster>>>>,
    /// Where checkpoints go (a URL the workers can reach), if anywhere.
    checkpoint_storage: Option<String>,
    /// The coordinator's token, on every call to a worker.
    present: PresentToken,
}

impl JobMasters {
    /// The masters of jobs on the workers of `slots`; they follow the
    /// progress their heartbeats carry.
    pub fn new(
        slots: Arc<SlotManager>,
        checkpoint_storage: Option<String>,
        present: PresentToken,
    ) -> Arc<JobMasters> {
        let masters = Arc::new(JobMasters {
            slots: slots.clone(),
            masters: Default::default(),
            checkpoint_storage,
            present,
        });
        let weak = Arc::downgrade(&masters);
        slots.on_progress(Box::new(move |_worker, jobs| {
            if let Some(me) = weak.upgrade() {
                tokio::spawn(async move {
                    for j in jobs {
                        if let Some(m) = me.master(&j.job_id) {
                            m.lock().await.counted(j.counts);
                        }
                    }
                });
            }
        }));
        masters
    }

    /// The gRPC service workers report to.
    pub fn reports(self: &Arc<Self>) -> JobReportsServer<ReportsService> {
        JobReportsServer::new(ReportsService(self.clone()))
    }

    /// The master of job `id`, while the job runs.
    fn master(&self, id: &str) -> Option<Arc<Mutex<JobMaster>>> {
        self.masters
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(id)
            .cloned()
    }

    /// Every job's master.
    fn all(&self) -> Vec<(String, Arc<Mutex<JobMaster>>)> {
        self.masters
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|(id, m)| (id.clone(), m.clone()))
            .collect()
    }

    /// Job `id` has ended: its master goes.
    fn forget(&self, id: &str) {
        self.masters
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(id);
    }

    /// A worker is gone: the attempts it ran a share of fail, naming it.
    pub async fn worker_lost(self: &Arc<Self>, worker: &str, why: &str) {
        for (id, master) in self.all() {
            let mut m = master.lock().await;
            if !m.waiting.iter().any(|(w, _)| w == worker) {
                continue;
            }
            m.waiting.retain(|(w, _)| w != worker);
            m.set_state(worker, TaskState::Failed);
            if m.failure.is_none() || m.secondary {
                m.failure = Some(format!("worker `{worker}` was lost: {why}"));
                m.secondary = false;
            }
            for (_, rpc) in &m.waiting {
                cancel_on(rpc, &id, m.attempt, &self.present);
            }
            self.attempt_over(&id, &mut m, true).await;
        }
    }

    /// If the attempt running job `id` has ended on every worker: the job
    /// ends, or restarts as [`JobMaster::next_attempt`] decides (`heals`:
    /// whether restarting may heal the failure).
    async fn attempt_over(self: &Arc<Self>, id: &str, m: &mut JobMaster, heals: bool) {
        if !m.waiting.is_empty() || m.restarting || m.deploying || m.ended() {
            return;
        }
        if let Some(c) = m.checkpoints.take() {
            m.retained = c.retained().await;
            if c.stop_completed().await {
                // Stopped with a savepoint: the job ends, whatever ended the
                // attempt (a job goes on from the savepoint, not this one).
                m.stopped.store(true, Ordering::Relaxed);
                m.cancel.store(true, Ordering::Relaxed);
            }
            tokio::spawn(async move { c.stop("the job's attempt ended").await });
        }
        self.slots.release(&m.grants).await;
        m.grants.clear();
        if let Some(delay) = m.next_attempt(heals) {
            m.restarting = true;
            (m.events)(ExecutionEvent::Restarting {
                attempt: m.attempt,
                failure: m.failure.clone().unwrap_or_default(),
            });
            self.restart(id.to_owned(), m.attempt + 1, delay);
            return;
        }
        self.forget(id);
        if let Some(done) = m.done.take() {
            done(match m.failure.take() {
                None => Ok(()),
                Some(f) => Err(anyhow::anyhow!(f)),
            });
        }
    }
}

#[tonic::async_trait]
impl JobRunner for Arc<JobMasters> {
    async fn start(
        &self,
        id: &str,
        graph: JobGraph,
        components: Vec<JobComponent>,
        done: Done,
        events: Events,
    ) -> Result<Execution, CoordinatorError> {
        self.start_at(id, graph, components, done, events, None, 1)
            .await
    }

    async fn start_from(
        &self,
        id: &str,
        graph: JobGraph,
        components: Vec<JobComponent>,
        done: Done,
        events: Events,
        from: SavepointStart,
    ) -> Result<Execution, CoordinatorError> {
        // The savepoint becomes the job's checkpoint `first - 1`: its own
        // checkpoints (and a sink's parts, named by them) come after every
        // id the savepoint's job used.
        let first = self.first_id_after(&from.metadata).await?;
        let plan = crate::savepoint::plan_restore(
            &from.metadata,
            &graph,
            id,
            first - 1,
            from.allow_non_restored,
        )?;
        self.import_savepoint(&graph, &from.dir, &plan).await?;
        self.start_at(
            id,
            graph,
            components,
            done,
            events,
            Some(plan.checkpoint),
            first,
        )
        .await
    }

    async fn savepoint(
        &self,
        id: &str,
        dir: &std::path::Path,
        stop: bool,
        drain: bool,
    ) -> Result<weir_model::savepoint::SavepointMetadata, CoordinatorError> {
        JobMasters::savepoint(self, id, dir, stop, drain).await
    }

    async fn latest_state(
        &self,
        id: &str,
        query: &crate::checkpoint::inspect::StateQuery,
    ) -> Result<crate::checkpoint::inspect::Lines, CoordinatorError> {
        JobMasters::latest_state(self, id, query).await
    }

    async fn resume(
        &self,
        id: &str,
        graph: JobGraph,
        components: Vec<JobComponent>,
        done: Done,
        events: Events,
        resume: Resume,
    ) -> Result<Execution, CoordinatorError> {
        // What the checkpoint storage holds of the job: the retained
        // checkpoints, and the highest id any checkpoint took.
        let mut stored = StoredCheckpoints::default();
        if let (Some(config), Some(url)) = (&graph.checkpoint, &self.checkpoint_storage) {
            let store = weir_model::storage::open(url)
                .map_err(|e| CoordinatorError::internal(format!("{e:#}")))?;
            stored = read_back(store.as_ref(), id, config.retained as usize)
                .await
                .map_err(|e| CoordinatorError::internal(format!("{e:#}")))?;
            // The newest checkpoint's metadata is corrupt: its output may
            // have been committed, and the older one would write it again.
            let newest = stored.completed.last().map_or(0, |c| c.id);
            if let Some((lost, why)) = stored.unreadable.iter().filter(|(u, _)| *u > newest).max()
                && restart::fails_on_lost_commit(&graph)
            {
                return Err(restart::lost_commit(
                    *lost,
                    why,
                    stored.completed.last().map(|c| c.id),
                ));
            }
        }
        // The attempts before `resume.attempt` restarted as many times; the
        // coordinator's stop is one more failure under the strategy.
        let (master, running) = self
            .prepare(
                id,
                graph,
                components,
                done,
                events,
                resume.attempt.saturating_sub(1),
                stored.highest_id + 1,
                // Between attempts from the start: reports of the attempt
                // the stopped coordinator ran are late ones.
                true,
            )
            .await?;
        let mut m = master.lock().await;
        m.retained = stored.completed;
        m.failure = Some("the coordinator stopped".into());
        let Some(delay) = m.next_attempt(true) else {
            self.forget(id);
            m.done.take();
            return Err(CoordinatorError::unprocessable(
                "no_further_attempt",
                "its restart strategy allows no further attempt",
            ));
        };
        drop(m);
        self.restart(id.to_owned(), resume.attempt, delay);
        self.watch_cancel(id, running.cancel.clone());
        Ok(running)
    }
}

impl JobMasters {
    /// Start job `id`: its first attempt, from `restore` if given (a
    /// savepoint made its first checkpoint), its checkpoint ids from
    /// `first_checkpoint_id`.
    #[allow(clippy::too_many_arguments)]
    async fn start_at(
        self: &Arc<Self>,
        id: &str,
        graph: JobGraph,
        components: Vec<JobComponent>,
        done: Done,
        events: Events,
        restore: Option<CheckpointMetadata>,
        first_checkpoint_id: u64,
    ) -> Result<Execution, CoordinatorError> {
        let (master, running) = self
            .prepare(
                id,
                graph,
                components,
                done,
                events,
                0,
                first_checkpoint_id,
                false,
            )
            .await?;
        // Deployed in a task of its own: a submission whose client goes
        // away does not leave a deployment half-done.
        let me = self.clone();
        let job = id.to_owned();
        let deployed = tokio::spawn(async move {
            let retained: Vec<CheckpointMetadata> = restore.iter().cloned().collect();
            let deployed = me.deploy(&job, 0, restore, retained, false).await;
            if deployed.is_err() {
                // Nothing half-started: the job was never accepted.
                me.forget(&job);
                master.lock().await.done.take();
            }
            deployed
        })
        .await
        .map_err(|e| CoordinatorError::internal(format!("deploying: {e}")))?;
        deployed?;
        self.watch_cancel(id, running.cancel.clone());
        Ok(running)
    }

    /// Make job `id`'s master before its first deployment (a fast worker
    /// may report at once): what every attempt deploys, its counters and
    /// subtasks, at `attempt` (the restarts so far); its checkpoint ids
    /// start at `first_checkpoint_id`; `restarting`: between attempts
    /// (reports of the one before are ignored).
    #[allow(clippy::too_many_arguments)]
    async fn prepare(
        &self,
        id: &str,
        graph: JobGraph,
        components: Vec<JobComponent>,
        done: Done,
        events: Events,
        attempt: u32,
        first_checkpoint_id: u64,
        restarting: bool,
    ) -> Result<(Arc<Mutex<JobMaster>>, Execution), CoordinatorError> {
        let graph_json =
            serde_json::to_string(&graph).map_err(|e| CoordinatorError::internal(e.to_string()))?;
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
            stopped: Arc::default(),
        };
        // A resumed job goes on counting from its earlier attempts.
        let backoff = RestartBackoff::after(graph.restart.clone(), attempt);
        let plan = Arc::new(Plan {
            graph,
            graph_json,
            components,
            storage,
            stats,
            first_checkpoint_id,
        });
        let master = Arc::new(Mutex::new(JobMaster {
            grants: Vec::new(),
            waiting: BTreeSet::new(),
            finished_workers: Arc::default(),
            failure: None,
            secondary: false,
            counters,
            subtasks,
            done: Some(done),
            attempt,
            checkpoints: None,
            retained: Vec::new(),
            plan,
            cancel: running.cancel.clone(),
            stopped: running.stopped.clone(),
            events,
            restarting,
            deploying: false,
            backoff,
            started_ms: weir_model::now_ms(),
        }));
        self.masters
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id.to_owned(), master.clone());
        Ok((master, running))
    }

    /// Cancel: when the flag is set, tell every worker of the attempt
    /// running then.
    fn watch_cancel(self: &Arc<Self>, id: &str, cancel: Arc<AtomicBool>) {
        let (me, job) = (self.clone(), id.to_owned());
        tokio::spawn(async move {
            let mut told: Option<u32> = None;
            loop {
                tokio::time::sleep(Duration::from_millis(100)).await;
                let Some(master) = me.master(&job) else {
                    return;
                };
                let (attempt, waiting): (u32, Vec<String>) = {
                    let m = master.lock().await;
                    (
                        m.attempt,
                        m.waiting.iter().map(|(_, rpc)| rpc.clone()).collect(),
                    )
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
