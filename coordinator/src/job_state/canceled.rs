//! Canceled: every task stopped after a cancel. Terminal.

use super::State;
use crate::jobs::JobState;

/// Canceled.
pub struct Canceled;

impl State for Canceled {
    const STATE: JobState = JobState::Canceled;
}
