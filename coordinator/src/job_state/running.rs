//! Running: every task was deployed.

use super::JobState;
use super::{Canceled, Canceling, Failed, Finished, Restarting, State, TransitionTo};
use crate::job_master::Execution;

/// Its tasks run.
pub struct Running {
    /// What controls and watches them.
    pub execution: Execution,
}

impl State for Running {
    const STATE: JobState = JobState::Running;
}

impl TransitionTo<Finished> for Running {}
impl TransitionTo<Failed> for Running {}
impl TransitionTo<Canceling> for Running {}
// Stopped with a savepoint: its runner canceled it once the savepoint
// completed.
impl TransitionTo<Canceled> for Running {}
// An attempt failed; the restart strategy allows another.
impl TransitionTo<Restarting> for Running {}
