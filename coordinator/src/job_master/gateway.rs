//! How the coordinator calls a worker's task executor: bounded waits,
//! cancels in the background, and the checkpoint calls of one attempt of a
//! job ([`WorkerGateway`]).

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use weir_model::auth::{PeerChannel, PresentToken};
use weir_model::proto::task_executor_client::TaskExecutorClient;
use weir_model::proto::{CancelJobRequest, NotifyCheckpointRequest, TriggerCheckpointRequest};
use weir_model::{Barrier, CheckpointKind, CheckpointMode};

use crate::checkpoint::CheckpointGateway;

/// Reaches the workers of one attempt of a job for its checkpoints.
pub(super) struct WorkerGateway {
    pub(super) job: String,
    pub(super) attempt: u32,
    pub(super) workers: Vec<String>,
    /// The workers (of `workers`) whose share of the attempt finished:
    /// they are not called (one may be gone).
    pub(super) finished: Arc<Mutex<BTreeSet<String>>>,
    /// The coordinator's token, on every call.
    pub(super) present: PresentToken,
}

#[tonic::async_trait]
impl CheckpointGateway for WorkerGateway {
    async fn trigger(&self, barrier: Barrier) -> anyhow::Result<(u32, u32)> {
        let mut calls = Vec::new();
        for rpc in self.running() {
            let request = TriggerCheckpointRequest {
                job_id: self.job.clone(),
                attempt: self.attempt,
                checkpoint_id: barrier.id,
                timestamp_ms: barrier.timestamp_ms,
                kind: match barrier.kind {
                    CheckpointKind::Checkpoint => "checkpoint".into(),
                    CheckpointKind::Savepoint => "savepoint".into(),
                    CheckpointKind::StopSavepoint => "stop-savepoint".into(),
                    CheckpointKind::DrainSavepoint => "drain-savepoint".into(),
                },
                mode: match barrier.mode {
                    CheckpointMode::ExactlyOnce => "exactly-once".into(),
                    CheckpointMode::AtLeastOnce => "at-least-once".into(),
                },
                aligned_timeout_ms: barrier.aligned_timeout_ms,
            };
            calls.push(async move {
                let mut c = executor(&rpc, &self.present).await?;
                match c.trigger_checkpoint(request).await {
                    Ok(r) => {
                        let r = r.into_inner();
                        anyhow::Ok((r.triggered, r.finished))
                    }
                    // The attempt's share on that worker has ended.
                    Err(s) if s.code() == tonic::Code::NotFound => Ok((0, 1)),
                    Err(s) => Err(s.into()),
                }
            });
        }
        let mut told = (0, 0);
        for r in futures::future::join_all(calls).await {
            let (t, f) = r?;
            told = (told.0 + t, told.1 + f);
        }
        Ok(told)
    }

    async fn notify_complete(&self, id: u64) {
        for call in self.notify_calls(id) {
            tokio::spawn(call);
        }
    }

    async fn notify_complete_and_wait(&self, id: u64) {
        let calls: Vec<_> = self
            .notify_calls(id)
            .into_iter()
            .map(tokio::spawn)
            .collect();
        for call in calls {
            let _ = call.await;
        }
    }
}

impl WorkerGateway {
    /// The workers whose share of the attempt has not finished.
    fn running(&self) -> Vec<String> {
        let finished = self.finished.lock().unwrap_or_else(|p| p.into_inner());
        self.workers
            .iter()
            .filter(|w| !finished.contains(*w))
            .cloned()
            .collect()
    }

    /// A call per worker telling it that checkpoint `id` completed (each
    /// bounded by the client's timeouts; a failure is logged).
    fn notify_calls(&self, id: u64) -> Vec<impl std::future::Future<Output = ()> + Send + 'static> {
        self.running()
            .into_iter()
            .map(|rpc| {
                let request = NotifyCheckpointRequest {
                    job_id: self.job.clone(),
                    attempt: self.attempt,
                    checkpoint_id: id,
                };
                let present = self.present.clone();
                async move {
                    let result = async {
                        executor(&rpc, &present)
                            .await?
                            .notify_checkpoint_complete(request)
                            .await?;
                        anyhow::Ok(())
                    }
                    .await;
                    if let Err(e) = result {
                        tracing::warn!("cannot tell {rpc} that checkpoint {id} completed: {e:#}");
                    }
                }
            })
            .collect()
    }
}

/// A client of a worker's task executor, with bounded waits: a worker that
/// does not answer must not hold the coordinator up.
pub(super) async fn executor(
    rpc: &str,
    present: &PresentToken,
) -> anyhow::Result<TaskExecutorClient<PeerChannel>> {
    let channel = present
        .endpoint(rpc)?
        .connect_timeout(Duration::from_secs(5))
        .timeout(Duration::from_secs(60))
        .connect()
        .await?;
    Ok(
        TaskExecutorClient::with_interceptor(channel, present.clone())
            .max_encoding_message_size(512 << 20),
    )
}

/// Cancel attempt `attempt` of `job` on the worker at `rpc`, in the
/// background (callers hold the scheduler's lock).
pub(super) fn cancel_on(rpc: &str, job: &str, attempt: u32, present: &PresentToken) {
    let (rpc, job, present) = (rpc.to_owned(), job.to_owned(), present.clone());
    tokio::spawn(async move { cancel_now(&rpc, &job, attempt, &present).await });
}

/// Cancel attempt `attempt` of `job` on the worker at `rpc`: a late cancel
/// never stops a newer attempt.
pub(super) async fn cancel_now(rpc: &str, job: &str, attempt: u32, present: &PresentToken) {
    let result = async {
        let mut c = executor(rpc, present).await?;
        c.cancel_job(CancelJobRequest {
            job_id: job.to_owned(),
            attempt: Some(attempt),
        })
        .await?;
        anyhow::Ok(())
    }
    .await;
    if let Err(e) = result {
        tracing::warn!("cannot cancel job {job} on {rpc}: {e:#}");
    }
}
