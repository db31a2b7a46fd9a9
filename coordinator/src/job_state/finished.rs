//! Finished: its bounded input was consumed and every task ended. Terminal.

use super::JobState;
use super::State;

/// Every task finished.
pub struct Finished;

impl State for Finished {
    const STATE: JobState = JobState::Finished;
}
