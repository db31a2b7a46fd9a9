//! Canceled: every task stopped after a cancel. Terminal.

use super::JobState;
use super::State;

/// Canceled.
pub struct Canceled;

impl State for Canceled {
    const STATE: JobState = JobState::Canceled;
}
