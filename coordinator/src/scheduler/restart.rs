//! Restarts: the attempt after a failure, from the newest retained
//! checkpoint whose files can all be read back; and the quick check of the
//! other workers when a data connection breaks.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use object_store::ObjectStoreExt;
use weir_model::JobGraph;
use weir_model::checkpoint::CheckpointMetadata;
use weir_model::fault_tolerance::RestartStrategy;

use super::ExecutionEvent;
use super::workers::{Plan, WorkerScheduler};
use crate::error::ApiError;

/// The code of a deployment that failed because a worker could not read
/// the checkpoint to restore.
pub(super) const RESTORE_FAILED: &str = "restore_failed";

/// Whether every file of `checkpoint` is in the storage at `url` as it was
/// written: its size and its sha256 (workers check them again as they
/// download).
async fn check_files(url: &str, checkpoint: &CheckpointMetadata) -> Result<(), String> {
    use sha2::Digest;
    let store = weir_state::storage::open(url).map_err(|e| format!("{e:#}"))?;
    for f in checkpoint.files() {
        let path = object_store::path::Path::from(f.path.as_str());
        let bytes = match store.get(&path).await {
            Ok(got) => got
                .bytes()
                .await
                .map_err(|e| format!("checkpoint {}: reading {}: {e}", checkpoint.id, f.path))?,
            Err(e) => {
                return Err(format!(
                    "checkpoint {}: {} is missing: {e}",
                    checkpoint.id, f.path
                ));
            }
        };
        if bytes.len() as u64 != f.size {
            return Err(format!(
                "checkpoint {}: {} has {} bytes, the checkpoint says {}",
                checkpoint.id,
                f.path,
                bytes.len(),
                f.size
            ));
        }
        if !f.sha256.is_empty() && hex::encode(sha2::Sha256::digest(&bytes)) != f.sha256 {
            return Err(format!(
                "checkpoint {}: {} is corrupt (its sha256 is not the one recorded)",
                checkpoint.id, f.path
            ));
        }
    }
    Ok(())
}

/// How long a worker may take to accept a connection when a broken data
/// connection makes the coordinator ask whether it is still there.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

impl WorkerScheduler {
    /// Treat every worker of `workers` (id, executor address) that does not
    /// accept a connection within [`PROBE_TIMEOUT`] as lost.
    pub(super) async fn probe(self: &Arc<Self>, workers: Vec<(String, String)>) {
        for (worker, rpc) in workers {
            let reachable = async {
                self.present
                    .endpoint(&rpc)?
                    .connect_timeout(PROBE_TIMEOUT)
                    .connect()
                    .await?;
                anyhow::Ok(())
            }
            .await;
            if let Err(e) = reachable {
                tracing::warn!(worker = %worker, "unreachable after a broken data connection: {e:#}");
                self.slots.remove(&worker).await;
                self.worker_lost(
                    &worker,
                    "it does not answer after a data connection to it broke",
                )
                .await;
            }
        }
    }

    /// Restart job `id` after `delay`, from the newest of `retained`.
    pub(super) fn restart(
        self: &Arc<Self>,
        id: String,
        attempt: u32,
        delay: Duration,
        retained: Vec<CheckpointMetadata>,
    ) {
        let me = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            {
                let mut pending = me.pending.lock().await;
                let Some(p) = pending.get_mut(&id) else {
                    return;
                };
                if p.cancel.load(Ordering::Relaxed) {
                    // Canceled while it waited: it ends canceled.
                    p.restarting = false;
                    p.failure = Some("canceled".into());
                    me.maybe_end(&mut pending, &id).await;
                    return;
                }
            }
            // The newest retained checkpoint first; one that cannot be read
            // (a missing or corrupt file) is reported and the previous one
            // is tried.
            let mut retained = retained;
            let storage = me
                .pending
                .lock()
                .await
                .get(&id)
                .and_then(|p| p.plan.storage.clone());
            let outcome = loop {
                let restore = retained.last().cloned();
                if let (Some(c), Some(url)) = (&restore, &storage)
                    && let Err(reason) = check_files(url, c).await
                {
                    retained.pop();
                    if let Some(p) = me.pending.lock().await.get(&id) {
                        (p.events)(ExecutionEvent::RestoreFailed {
                            attempt,
                            checkpoint: c.id,
                            reason: reason.clone(),
                        });
                    }
                    if retained.is_empty() {
                        break Err(ApiError::new(
                            axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                            RESTORE_FAILED,
                            format!("no retained checkpoint can be restored: {reason}"),
                        ));
                    }
                    continue;
                }
                // Deploying tells the dispatcher the attempt restarted.
                break me
                    .deploy(&id, attempt, restore, retained.clone(), true)
                    .await;
            };
            if let Err(e) = outcome {
                let mut pending = me.pending.lock().await;
                if let Some(p) = pending.get_mut(&id) {
                    p.restarting = false;
                    p.failure = Some(format!(
                        "restarting (attempt {attempt}) failed: {}",
                        e.message
                    ));
                    p.waiting.clear();
                    // No further restart after a failed deployment.
                    p.plan = Arc::new(Plan {
                        graph: JobGraph {
                            restart: RestartStrategy::None,
                            ..p.plan.graph.clone()
                        },
                        ..(*p.plan).clone()
                    });
                }
                me.maybe_end(&mut pending, &id).await;
            }
        });
    }
}
