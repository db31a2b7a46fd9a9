//! Recovering: the job ran when the coordinator stopped. A restarted
//! coordinator reads it back in this state and resumes it, under its
//! restart strategy, from its latest completed checkpoint once workers
//! register again: it is restarting then (its next attempt being
//! deployed), or failed when it cannot resume.

use super::JobState;
use super::{Canceled, Canceling, Failed, Restarting, State, TransitionTo};

/// Read back after a coordinator restart; not yet resumed.
pub struct Recovering {
    /// The state its record had: a job that was restarting may have
    /// deployed its next attempt already.
    pub was: JobState,
    /// A cancel was asked before it resumed.
    pub cancel_requested: bool,
}

impl State for Recovering {
    const STATE: JobState = JobState::Recovering;
}

// Its next attempt is being deployed.
impl TransitionTo<Restarting> for Recovering {}
// It cannot resume (no restart allowed, its bundle gone, no slots).
impl TransitionTo<Failed> for Recovering {}
// Canceled before it resumed: the workers stopped its tasks already.
impl TransitionTo<Canceled> for Recovering {}
// Canceled while its next attempt was being deployed.
impl TransitionTo<Canceling> for Recovering {}
