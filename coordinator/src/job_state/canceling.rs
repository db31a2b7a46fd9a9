//! Canceling: a cancel was asked; the tasks are stopping.

use super::JobState;
use super::{Canceled, Failed, Finished, State, TransitionTo};
use crate::job_master::Execution;

/// A cancel was asked; its tasks are stopping.
pub struct Canceling {
    /// What controls and watches them.
    pub execution: Execution,
}

impl State for Canceling {
    const STATE: JobState = JobState::Canceling;
}

impl TransitionTo<Canceled> for Canceling {}
// The job ended before the cancel reached every task.
impl TransitionTo<Finished> for Canceling {}
impl TransitionTo<Failed> for Canceling {}
