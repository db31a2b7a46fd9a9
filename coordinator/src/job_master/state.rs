//! The keyed state of a running job's latest checkpoint, read for the API
//! (`GET /v1/jobs/{id}/checkpoints/latest/state`).

use weir_model::checkpoint::CheckpointMetadata;

use super::JobMasters;
use crate::checkpoint::inspect::{self, StateQuery};
use crate::error::{CoordinatorError, ErrorKind};

/// How many times a read starts over when a newer checkpoint subsumed (and
/// deleted) the one being read (a read that fails again on the same
/// checkpoint stops there).
const TRIES: usize = 3;

impl JobMasters {
    /// Job `id`'s latest completed checkpoint's keyed state, as JSON lines.
    pub async fn latest_state(
        &self,
        id: &str,
        query: &StateQuery,
    ) -> Result<crate::checkpoint::inspect::Lines, CoordinatorError> {
        let conflict = |code: &'static str, message: String| {
            CoordinatorError::new(ErrorKind::Conflict, code, message)
        };
        let master = self.master(id).ok_or_else(|| {
            conflict(
                "job_not_running",
                format!(
                    "job `{id}` is not running (it is starting, restarting or recovering): try again once it runs"
                ),
            )
        })?;
        let mut last_error: Option<(u64, CoordinatorError)> = None;
        for _ in 0..TRIES {
            let (latest, plan) = {
                let m = master.lock().await;
                let latest: Option<CheckpointMetadata> = match &m.checkpoints {
                    Some(c) => c.latest().await,
                    None => m.retained.last().cloned(),
                };
                (latest, m.plan.clone())
            };
            let Some(url) = plan.storage.as_deref() else {
                return Err(conflict(
                    "no_checkpoints",
                    format!("job `{id}` takes no checkpoints (its manifest has no `[checkpoint]`)"),
                ));
            };
            let Some(latest) = latest else {
                return Err(conflict(
                    "no_checkpoint_yet",
                    format!(
                        "job `{id}` has completed no checkpoint yet: try again after its first"
                    ),
                ));
            };
            let store = weir_model::storage::open(url)
                .map_err(|e| CoordinatorError::internal(format!("{e:#}")))?;
            if let Some((id, e)) = last_error.take()
                && id == latest.id
            {
                // It failed on this very checkpoint: not for a newer one.
                return Err(e);
            }
            // The checkpoint's own layout (it names what it holds), else
            // the running plan's.
            let layout = latest
                .layout
                .clone()
                .unwrap_or_else(|| crate::savepoint::layout(&plan.graph));
            match inspect::read(store.as_ref(), &latest, &layout, query).await {
                Err(e) if e.kind == ErrorKind::Internal => last_error = Some((latest.id, e)),
                answer => return answer,
            }
        }
        Err(last_error.expect("tried").1)
    }
}
