//! Failed: a task failed, a worker was lost, deploying failed, or the
//! coordinator stopped while it ran; the record's `error` says which.
//! Terminal.

use super::JobState;
use super::State;

/// Failed; `JobInfo::error` has the reason.
pub struct Failed;

impl State for Failed {
    const STATE: JobState = JobState::Failed;
}
