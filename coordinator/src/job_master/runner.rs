//! What the dispatcher sees of a running job: the [`JobRunner`] that runs
//! it ([`super::JobMasters`] onto workers' slots; `weir local` runs its
//! workers in process, over the same gRPC and TCP paths), the
//! [`Execution`] it watches, and the [`ExecutionEvent`]s it is told.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use weir_model::JobGraph;
use weir_model::metrics::JobCounters;
use weir_model::proto::JobComponent;

use crate::checkpoint::CheckpointStats;
use crate::error::CoordinatorError;
use crate::jobs::SubtaskStatus;

/// A job's tasks as the scheduler runs them: how to stop them and watch them.
pub struct Execution {
    /// Set to stop it.
    pub cancel: Arc<AtomicBool>,
    /// Its live counts.
    pub counters: Arc<JobCounters>,
    /// Its subtasks, live.
    pub subtasks: Arc<std::sync::Mutex<Vec<SubtaskStatus>>>,
    /// Its checkpoints, live (when it takes them).
    pub checkpoints: Option<Arc<std::sync::Mutex<CheckpointStats>>>,
    /// Set when its runner canceled it after a savepoint that stops it:
    /// its end is a cancel, not a failure.
    pub stopped: Arc<AtomicBool>,
}

/// How a runner tells the end of a job.
pub type Done = Box<dyn FnOnce(anyhow::Result<()>) + Send>;

/// What a runner tells the dispatcher while a job runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExecutionEvent {
    /// Attempt `attempt` failed with `failure`; the restart strategy allows
    /// another.
    Restarting {
        /// The attempt that failed.
        attempt: u32,
        /// Why.
        failure: String,
    },
    /// Attempt `attempt` could not start from checkpoint `checkpoint`
    /// (`reason`); an older one is tried, if any.
    RestoreFailed {
        /// The attempt.
        attempt: u32,
        /// The checkpoint that could not be read.
        checkpoint: u64,
        /// Why.
        reason: String,
    },
    /// Attempt `attempt` was deployed, from checkpoint `checkpoint` if any.
    Restarted {
        /// The new attempt.
        attempt: u32,
        /// The completed checkpoint it starts from.
        checkpoint: Option<u64>,
    },
}

/// Where a runner sends [`ExecutionEvent`]s.
pub type Events = Arc<dyn Fn(ExecutionEvent) + Send + Sync>;

/// How a job that ran when the coordinator stopped goes on: as attempt
/// `attempt`, from its latest completed checkpoint in the checkpoint
/// storage, if its restart strategy allows one more attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resume {
    /// The attempt to deploy.
    pub attempt: u32,
}

/// A savepoint a job starts from.
#[derive(Debug, Clone)]
pub struct SavepointStart {
    /// Its directory.
    pub dir: std::path::PathBuf,
    /// Its metadata, read from there.
    pub metadata: weir_model::savepoint::SavepointMetadata,
    /// Whether state of the savepoint that no vertex of the job claims may
    /// be dropped.
    pub allow_non_restored: bool,
    /// The scratch directory `dir` is, when the savepoint was written out
    /// of a retained checkpoint for this start (removed once it is done).
    pub scratch: Option<std::sync::Arc<tempfile::TempDir>>,
}

/// Runs jobs. It reports the end of a job through `done`.
#[tonic::async_trait]
pub trait JobRunner: Send + Sync {
    /// Start job `id` (`graph`, with its `components`); call `done`
    /// with the outcome, and `events` when it restarts. Fails (and never
    /// calls `done`) if it cannot start.
    async fn start(
        &self,
        id: &str,
        graph: JobGraph,
        components: Vec<JobComponent>,
        done: Done,
        events: Events,
    ) -> Result<Execution, CoordinatorError>;

    /// Start job `id` as [`JobRunner::start`] does, from the savepoint
    /// `from`.
    #[allow(clippy::too_many_arguments)]
    async fn start_from(
        &self,
        id: &str,
        graph: JobGraph,
        components: Vec<JobComponent>,
        done: Done,
        events: Events,
        from: SavepointStart,
    ) -> Result<Execution, CoordinatorError> {
        let _ = (id, graph, components, done, events, from);
        Err(CoordinatorError::unprocessable(
            "cannot_restore",
            "this runner cannot start a job from a savepoint",
        ))
    }

    /// Take a savepoint of running job `id` into `dir` (and, with `stop`,
    /// stop the job after it; with `drain`, after the maximal watermark):
    /// its metadata, once written.
    async fn savepoint(
        &self,
        id: &str,
        dir: &std::path::Path,
        stop: bool,
        drain: bool,
    ) -> Result<weir_model::savepoint::SavepointMetadata, CoordinatorError> {
        let _ = (id, dir, stop, drain);
        Err(CoordinatorError::unprocessable(
            "no_checkpoints",
            "this runner takes no savepoints",
        ))
    }

    /// The keyed state of running job `id`'s latest completed checkpoint,
    /// as JSON lines ([`crate::checkpoint::inspect`]).
    async fn latest_state(
        &self,
        id: &str,
        query: &crate::checkpoint::inspect::StateQuery,
    ) -> Result<crate::checkpoint::inspect::Lines, CoordinatorError> {
        let _ = (id, query);
        Err(CoordinatorError::unprocessable(
            "no_checkpoints",
            "this runner takes no checkpoints",
        ))
    }

    /// Resume job `id`, which ran when the coordinator stopped, as
    /// `resume` says; as [`JobRunner::start`] otherwise, except that the
    /// deployment happens after this returns (it waits for workers to
    /// register again), and its failure ends the job through `done`. Fails
    /// if the restart strategy allows no further attempt.
    #[allow(clippy::too_many_arguments)]
    async fn resume(
        &self,
        id: &str,
        graph: JobGraph,
        components: Vec<JobComponent>,
        done: Done,
        events: Events,
        resume: Resume,
    ) -> Result<Execution, CoordinatorError> {
        let _ = (id, graph, components, done, events, resume);
        Err(CoordinatorError::unprocessable(
            "cannot_resume",
            "this runner cannot resume a job",
        ))
    }
}
