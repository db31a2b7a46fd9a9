//! Restarting: an attempt failed and the job's restart strategy allows
//! another; the failed attempt's tasks are stopping, and the next attempt
//! is deployed (from the latest completed checkpoint) after the strategy's
//! delay.

use super::JobState;
use super::{Canceling, Failed, Running, State, TransitionTo};
use crate::job_master::Execution;

/// Between two attempts.
pub struct Restarting {
    /// What controls and watches the job's tasks, across attempts.
    pub execution: Execution,
}

impl State for Restarting {
    const STATE: JobState = JobState::Restarting;
}

// The next attempt runs.
impl TransitionTo<Running> for Restarting {}
// The next attempt could not be deployed.
impl TransitionTo<Failed> for Restarting {}
impl TransitionTo<Canceling> for Restarting {}
