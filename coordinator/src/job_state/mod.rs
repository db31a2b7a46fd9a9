//! A job's lifecycle as a typed state machine: one type per state (one file
//! each), and the legal moves declared as [`TransitionTo`] impls, so an
//! illegal move does not compile.
//!
//! ```text
//! created ──► running ──► finished
//!                ├──────► failed
//!                ├─► restarting ──► running   (the next attempt, from the latest checkpoint)
//!                │        ├───────► failed    (it could not be deployed)
//!                │        └───────► canceling
//!                └─► canceling ──► canceled
//!                        ├───────► finished   (it ended before the cancel reached it)
//!                        └───────► failed     (a task failed on its own)
//!
//! recovering ──► restarting  (read back by a restarted coordinator, resumed)
//!      ├───────► failed      (it cannot resume)
//!      └───────► canceled
//! ```
//!
//! A job that cannot be deployed (no free slots, a worker refusing it) is
//! never accepted: its record is removed and the submission fails.
//!
//! A [`Job`] carries the record the API shows ([`JobInfo`]) and the state's
//! own data; [`Job::to`] and [`Job::then`] move it, setting the record's
//! [`JobState`].
//!
//! A finished job cannot run again:
//!
//! ```compile_fail
//! use weir_coordinator::job_state::{Finished, Job, Running};
//! fn restart(job: Job<Finished>, execution: weir_coordinator::job_master::Execution) -> Job<Running> {
//!     job.to(Running { execution })
//! }
//! ```

mod canceled;
mod canceling;
mod created;
mod failed;
mod finished;
mod recovering;
mod restarting;
mod running;

pub use canceled::Canceled;
pub use canceling::Canceling;
pub use created::Created;
pub use failed::Failed;
pub use finished::Finished;
pub use recovering::Recovering;
pub use restarting::Restarting;
pub use running::Running;

use serde::{Deserialize, Serialize};

use crate::jobs::JobInfo;

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
    /// An attempt failed; the next one is being deployed.
    Restarting,
    /// It ran when the coordinator stopped; the restarted coordinator
    /// resumes it once workers register again.
    Recovering,
    /// Its record could not be read when the coordinator started (a torn
    /// write, a corrupt file): set aside under `jobs/unreadable/`, with
    /// the reason as its error. Nothing runs.
    Unreadable,
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
        JobState::Restarting => "restarting",
        JobState::Recovering => "recovering",
        JobState::Unreadable => "unreadable",
    }
}

impl JobState {
    /// Whether the job has ended.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            JobState::Finished | JobState::Failed | JobState::Canceled | JobState::Unreadable
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

/// A state of a job.
pub trait State {
    /// How the API names it.
    const STATE: JobState;
}

/// `Self` may move to `S`.
pub trait TransitionTo<S: State>: State {}

/// A job in state `S`.
pub struct Job<S: State> {
    /// What the API shows.
    pub info: JobInfo,
    /// The state's own data.
    pub state: S,
}

impl<S: State> Job<S> {
    /// Enter state `next`: a legal move only.
    pub fn to<T: State>(self, next: T) -> Job<T>
    where
        S: TransitionTo<T>,
    {
        self.then(|_| next)
    }

    /// Enter the state `next` makes of this one's data: a legal move only.
    pub fn then<T: State>(self, next: impl FnOnce(S) -> T) -> Job<T>
    where
        S: TransitionTo<T>,
    {
        let mut info = self.info;
        info.state = T::STATE;
        if T::STATE.is_terminal() {
            info.ended_at_ms = Some(weir_model::now_ms());
        }
        Job {
            info,
            state: next(self.state),
        }
    }
}

/// A job in any state.
pub enum Lifecycle {
    /// See [`Created`].
    Created(Job<Created>),
    /// See [`Running`].
    Running(Job<Running>),
    /// See [`Canceling`].
    Canceling(Job<Canceling>),
    /// See [`Restarting`].
    Restarting(Job<Restarting>),
    /// See [`Recovering`].
    Recovering(Job<Recovering>),
    /// See [`Finished`].
    Finished(Job<Finished>),
    /// See [`Failed`].
    Failed(Job<Failed>),
    /// See [`Canceled`].
    Canceled(Job<Canceled>),
}

impl Lifecycle {
    /// The job's record.
    pub fn info(&self) -> &JobInfo {
        match self {
            Lifecycle::Created(j) => &j.info,
            Lifecycle::Running(j) => &j.info,
            Lifecycle::Canceling(j) => &j.info,
            Lifecycle::Restarting(j) => &j.info,
            Lifecycle::Recovering(j) => &j.info,
            Lifecycle::Finished(j) => &j.info,
            Lifecycle::Failed(j) => &j.info,
            Lifecycle::Canceled(j) => &j.info,
        }
    }

    /// Its live execution, while it has one.
    pub fn execution(&self) -> Option<&crate::job_master::Execution> {
        match self {
            Lifecycle::Running(j) => Some(&j.state.execution),
            Lifecycle::Canceling(j) => Some(&j.state.execution),
            Lifecycle::Restarting(j) => Some(&j.state.execution),
            _ => None,
        }
    }

    /// A job read back from its record: one that ran when the coordinator
    /// stopped is recovering (the dispatcher resumes it or fails it); one
    /// being canceled is canceled (its workers stop its tasks when they
    /// register again); one not yet deployed failed.
    pub fn recovered(mut info: JobInfo) -> Lifecycle {
        match info.state {
            JobState::Finished => Lifecycle::Finished(Job {
                info,
                state: Finished,
            }),
            JobState::Canceled => Lifecycle::Canceled(Job {
                info,
                state: Canceled,
            }),
            JobState::Failed | JobState::Unreadable => Lifecycle::Failed(Job {
                info,
                state: Failed,
            }),
            JobState::Running | JobState::Restarting | JobState::Recovering => {
                let was = info.state;
                info.state = JobState::Recovering;
                Lifecycle::Recovering(Job {
                    info,
                    state: Recovering {
                        was,
                        cancel_requested: false,
                    },
                })
            }
            JobState::Canceling => {
                info.state = JobState::Canceled;
                info.ended_at_ms = Some(weir_model::now_ms());
                Lifecycle::Canceled(Job {
                    info,
                    state: Canceled,
                })
            }
            JobState::Created => {
                info.state = JobState::Failed;
                info.error = Some("the coordinator stopped while the job was deployed".into());
                info.ended_at_ms = Some(weir_model::now_ms());
                Lifecycle::Failed(Job {
                    info,
                    state: Failed,
                })
            }
        }
    }
}
