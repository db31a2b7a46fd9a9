//! Created: planned and recorded; its tasks are being scheduled and deployed.

use super::JobState;
use super::{Running, State, TransitionTo};

/// Planned; its tasks are being scheduled and deployed.
pub struct Created {
    /// A cancel was asked before the job ran; it is canceled as soon as it
    /// runs.
    pub cancel_requested: bool,
}

impl State for Created {
    const STATE: JobState = JobState::Created;
}

impl TransitionTo<Running> for Created {}
