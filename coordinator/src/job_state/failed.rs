//! Failed: a task failed, a worker was lost, deploying failed, or the
//! coordinator stopped while it ran; the record's `error` says which.
//! Terminal.

use super::State;
use crate::jobs::JobState;

/// Failed; `JobInfo::error` has the reason.
pub struct Failed;

impl State for Failed {
    const STATE: JobState = JobState::Failed;
}
