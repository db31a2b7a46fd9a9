//! Restarts: whether a job restarts ([`JobMaster::next_attempt`], the one
//! place it is decided); the attempt after a failure, from the newest
//! retained checkpoint whose files can all be read back; and the quick
//! check of the other workers when a data connection breaks.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use object_store::ObjectStoreExt;
use weir_model::JobGraph;
use weir_model::checkpoint::CheckpointMetadata;
use weir_model::fault_tolerance::OnLostCommit;

use super::{ExecutionEvent, JobMaster, JobMasters};
use crate::error::CoordinatorError;

/// The code of a deployment that failed because a worker could not read
/// the checkpoint to restore.
pub(super) const RESTORE_FAILED: &str = "restore_failed";

/// The code of a restart that found no retained checkpoint it can read.
const NO_CHECKPOINT: &str = "no_restorable_checkpoint";

/// The code of a restart that would write committed output again: the
/// newest completed checkpoint cannot be read, only an older one.
const LOST_COMMIT: &str = "lost_commit";

/// Whether a restart that failed with `code` may be tried again under the
/// restart strategy (slots may free up, a worker may come back, a download
/// may succeed); a lost commit, or no checkpoint at all, cannot heal.
fn retriable(code: &str) -> bool {
    !matches!(
        code,
        LOST_COMMIT | NO_CHECKPOINT | "path_not_allowed" | "internal"
    )
}

/// Whether a restart of `graph` must fail rather than restore a checkpoint
/// older than the newest completed one: it commits output with its
/// checkpoints (an exactly-once file sink), which the older checkpoint
/// would write twice, and it has not opted into `on-lost-commit =
/// "duplicate"`.
pub(super) fn fails_on_lost_commit(graph: &JobGraph) -> bool {
    use weir_model::graph::VertexKind;
    graph.on_lost_commit == OnLostCommit::Fail
        && graph.checkpoint.is_some()
        && graph
            .vertices
            .iter()
            .any(|v| matches!(&v.kind, VertexKind::Sink(c) if c.commits_parts()))
}

/// The failure of a restart that would write committed output again:
/// checkpoint `lost` cannot be restored (`why`), only the older `older`.
pub(super) fn lost_commit(lost: u64, why: &str, older: Option<u64>) -> CoordinatorError {
    let older = older.map_or_else(|| "(none: the start)".to_owned(), |o| o.to_string());
    CoordinatorError::new(
        crate::error::ErrorKind::Internal,
        LOST_COMMIT,
        format!(
            "checkpoint {lost} cannot be restored ({why}), and its sinks may have committed their output: restoring the older checkpoint {older} would write what came between them again. The job fails rather than duplicate committed output (with `[restart] on-lost-commit = \"duplicate\"` it restores the older checkpoint instead)"
        ),
    )
}

/// Why a checkpoint cannot be restored: for good (a file is missing,
/// truncated or corrupt), or for now (the storage did not answer).
enum Unreadable {
    Lost(String),
    ForNow(String),
}

/// Whether every file of `checkpoint` is in the storage at `url` as it was
/// written: its size and its sha256 (workers check them again as they
/// download).
async fn check_files(url: &str, checkpoint: &CheckpointMetadata) -> Result<(), Unreadable> {
    use futures::StreamExt;
    use sha2::Digest;
    let store = weir_model::storage::open(url).map_err(|e| Unreadable::ForNow(format!("{e:#}")))?;
    for f in checkpoint.files() {
        let path = object_store::path::Path::from(f.path.as_str());
        let got = match store.get(&path).await {
            Ok(got) => got,
            Err(e @ object_store::Error::NotFound { .. }) => {
                return Err(Unreadable::Lost(format!(
                    "checkpoint {}: {} is missing: {e}",
                    checkpoint.id, f.path
                )));
            }
            Err(e) => {
                return Err(Unreadable::ForNow(format!(
                    "checkpoint {}: reading {}: {e}",
                    checkpoint.id, f.path
                )));
            }
        };
        // A chunk at a time: a state file may be large.
        let (mut hasher, mut size) = (sha2::Sha256::new(), 0u64);
        let mut chunks = got.into_stream();
        while let Some(chunk) = chunks.next().await {
            let chunk = chunk.map_err(|e| {
                Unreadable::ForNow(format!(
                    "checkpoint {}: reading {}: {e}",
                    checkpoint.id, f.path
                ))
            })?;
            hasher.update(&chunk);
            size += chunk.len() as u64;
        }
        f.verify(size, &hex::encode(hasher.finalize()))
            .map_err(|e| Unreadable::Lost(format!("checkpoint {}: {e}", checkpoint.id)))?;
    }
    Ok(())
}

impl JobMaster {
    /// Whether the job restarts, decided here only: its attempt has ended
    /// on every worker with a failure that restarting may heal (`heals`),
    /// the job is not canceled and its restart strategy allows one more
    /// attempt — then the wait before it. Otherwise `None`: the job ends
    /// (finished, canceled or failed).
    pub(super) fn next_attempt(&mut self, heals: bool) -> Option<Duration> {
        self.failure.as_ref()?;
        if !heals || self.cancel.load(Ordering::Relaxed) {
            return None;
        }
        self.backoff
            .on_failure(self.started_ms, weir_model::now_ms())
            .map(Duration::from_millis)
    }
}

/// How long a worker may take to accept a connection when a broken data
/// connection makes the coordinator ask whether it is still there.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

impl JobMasters {
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

    /// Deploy attempt `attempt` of job `id` after `delay`, from the newest
    /// of its retained checkpoints that can be read; if that fails, the
    /// attempt is over, and [`JobMaster::next_attempt`] decides again.
    pub(super) fn restart(self: &Arc<Self>, id: String, attempt: u32, delay: Duration) {
        let me = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            let Some(master) = me.master(&id) else {
                return;
            };
            let (storage, graph, mut retained) = {
                let mut m = master.lock().await;
                if m.cancel.load(Ordering::Relaxed) {
                    // Canceled while it waited: it ends canceled.
                    m.restarting = false;
                    m.failure = Some("canceled".into());
                    me.attempt_over(&id, &mut m, false).await;
                    return;
                }
                (
                    m.plan.storage.clone(),
                    m.plan.graph.clone(),
                    m.retained.clone(),
                )
            };
            // The newest retained checkpoint first; one that cannot be read
            // (a missing or corrupt file) is reported and the previous one
            // is tried — unless its output may have been committed.
            let outcome = loop {
                let restore = retained.last().cloned();
                let checked = match (&restore, &storage) {
                    (Some(c), Some(url)) => check_files(url, c).await,
                    _ => Ok(()),
                };
                if let Err(Unreadable::ForNow(reason)) = &checked {
                    // The storage may answer on the next attempt.
                    break Err(CoordinatorError::new(
                        crate::error::ErrorKind::Internal,
                        RESTORE_FAILED,
                        reason.clone(),
                    ));
                }
                if let (Some(c), Err(Unreadable::Lost(reason))) = (&restore, checked) {
                    retained.pop();
                    (master.lock().await.events)(ExecutionEvent::RestoreFailed {
                        attempt,
                        checkpoint: c.id,
                        reason: reason.clone(),
                    });
                    let Some(older) = retained.last() else {
                        break Err(CoordinatorError::new(
                            crate::error::ErrorKind::Internal,
                            NO_CHECKPOINT,
                            format!("no retained checkpoint can be restored: {reason}"),
                        ));
                    };
                    if fails_on_lost_commit(&graph) {
                        break Err(lost_commit(c.id, &reason, Some(older.id)));
                    }
                    continue;
                }
                // Deploying tells the dispatcher the attempt restarted.
                break me
                    .deploy(&id, attempt, restore, retained.clone(), true)
                    .await;
            };
            let Err(e) = outcome else {
                return;
            };
            let mut m = master.lock().await;
            let failure = match e.code {
                LOST_COMMIT | NO_CHECKPOINT => e.message.clone(),
                _ => format!("restarting (attempt {attempt}) failed: {}", e.message),
            };
            // A deployment that failed for a reason that may pass (no slots
            // in time, a worker that did not answer or could not download)
            // is one more failed attempt; it used its attempt number.
            let heals = retriable(e.code);
            if heals {
                tracing::warn!(job = %id, "{failure}; the restart strategy decides what follows");
            }
            m.attempt = m.attempt.max(attempt);
            m.failure = Some(failure);
            m.secondary = false;
            m.waiting.clear();
            m.restarting = false;
            m.deploying = false;
            m.retained = retained;
            m.started_ms = weir_model::now_ms();
            me.attempt_over(&id, &mut m, heals).await;
        });
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::Ordering;
    use std::time::Duration;

    use weir_model::auth::{PresentToken, Tokens};
    use weir_model::{JobGraph, Manifest};

    use super::super::{JobMaster, JobMasters, Resume};
    use crate::slot_manager::{HeartbeatConfig, SlotManager};

    fn graph(restart: &str) -> JobGraph {
        let m = Manifest::parse(&format!(
            "[job]\nname='j'\n[[source]]\nname='s'\ntype='generator'\n\
             [[sink]]\nname='o'\ntype='stdout'\n[restart]\n{restart}"
        ))
        .unwrap();
        JobGraph::build(&m, Default::default(), None).unwrap()
    }

    async fn master(restart: &str, restarts: u32) -> Arc<tokio::sync::Mutex<JobMaster>> {
        let masters = JobMasters::new(
            SlotManager::new(HeartbeatConfig::default()),
            None,
            PresentToken::of(&Tokens::open()),
        );
        let done = Box::new(|_| {});
        let events = Arc::new(|_| {});
        let (master, _) = masters
            .prepare(
                "j",
                graph(restart),
                Vec::new(),
                done,
                events,
                restarts,
                1,
                false,
            )
            .await
            .unwrap();
        master
    }

    #[tokio::test]
    async fn the_one_restart_decision() {
        let m = master("strategy='fixed-delay'\nattempts=2\ndelay-ms=7", 0).await;
        let mut m = m.lock().await;
        assert_eq!(m.next_attempt(true), None, "no failure: the job ends");
        m.failure = Some("boom".into());
        assert_eq!(m.next_attempt(false), None, "a failure that cannot heal");
        assert_eq!(m.next_attempt(true), Some(Duration::from_millis(7)));
        assert_eq!(m.next_attempt(true), Some(Duration::from_millis(7)));
        assert_eq!(m.next_attempt(true), None, "two restarts allowed");

        let m = master("strategy='fixed-delay'\nattempts=5\ndelay-ms=7", 0).await;
        let mut m = m.lock().await;
        m.failure = Some("boom".into());
        m.cancel.store(true, Ordering::Relaxed);
        assert_eq!(m.next_attempt(true), None, "canceled: it ends canceled");
    }

    #[tokio::test]
    async fn a_resumed_job_counts_the_restarts_before_it() {
        // Resumed as attempt 2 (two restarts so far, the coordinator's stop
        // the second): one restart of the three allowed is left.
        let resume = Resume { attempt: 2 };
        let m = master(
            "strategy='fixed-delay'\nattempts=3\ndelay-ms=7",
            resume.attempt - 1,
        )
        .await;
        let mut m = m.lock().await;
        m.failure = Some("the coordinator stopped".into());
        assert_eq!(m.next_attempt(true), Some(Duration::from_millis(7)));
        assert_eq!(m.next_attempt(true), Some(Duration::from_millis(7)));
        assert_eq!(m.next_attempt(true), None);
    }

    /// A worker lost while an attempt deploys ends the attempt, and the
    /// deployment — not the loss — decides what follows: one restart, not
    /// two. (Without the `deploying` check in `attempt_over`, the loss
    /// scheduled a restart and the failed deployment a second one, two
    /// deployments of the same attempt number.)
    #[tokio::test]
    async fn a_worker_lost_while_deploying_leads_to_one_restart() {
        use std::sync::atomic::AtomicUsize;
        let masters = JobMasters::new(
            SlotManager::new(HeartbeatConfig::default()),
            None,
            PresentToken::of(&Tokens::open()),
        );
        let restarts = Arc::new(AtomicUsize::new(0));
        let counted = restarts.clone();
        let events = Arc::new(move |e: super::super::ExecutionEvent| {
            if matches!(e, super::super::ExecutionEvent::Restarting { .. }) {
                counted.fetch_add(1, Ordering::Relaxed);
            }
        });
        let graph = graph("strategy='fixed-delay'\nattempts=5\ndelay-ms=60000");
        let (master, _) = masters
            .prepare(
                "j",
                graph,
                Vec::new(),
                Box::new(|_| {}),
                events,
                1,
                1,
                false,
            )
            .await
            .unwrap();
        {
            let mut m = master.lock().await;
            m.waiting.insert(("w".into(), "http://127.0.0.1:1".into()));
            m.deploying = true;
        }
        masters.worker_lost("w", "gone").await;
        {
            let m = master.lock().await;
            assert!(m.failure.as_deref().unwrap().contains("`w` was lost"));
            assert!(!m.restarting && !m.ended(), "the deployment decides");
        }
        assert_eq!(restarts.load(Ordering::Relaxed), 0);
        // The deployment to `w` fails, and is over: one restart follows.
        let mut m = master.lock().await;
        m.deploying = false;
        masters.attempt_over("j", &mut m, true).await;
        assert!(m.restarting);
        masters.attempt_over("j", &mut m, true).await;
        assert_eq!(restarts.load(Ordering::Relaxed), 1);
    }
}
