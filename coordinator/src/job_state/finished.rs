//! Finished: its bounded input was consumed and every task ended. Terminal.

use super::State;
use crate::jobs::JobState;

/// Every task finished.
pub struct Finished;

impl State for Finished {
    const STATE: JobState = JobState::Finished;
}
