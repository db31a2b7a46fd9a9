//! The gRPC service workers report to: the ends of their shares of jobs,
//! and the acknowledgements and declines of checkpoints.

use std::sync::Arc;

use tonic::{Request, Response, Status};
use weir_model::checkpoint::TaskStateHandle;
use weir_model::proto::job_reports_server::JobReports;
use weir_model::proto::{
    AcknowledgeCheckpointRequest, AcknowledgeCheckpointResponse, DeclineCheckpointRequest,
    DeclineCheckpointResponse, JobEndedRequest, JobEndedResponse,
};

use super::JobMasters;
use super::gateway::cancel_on;
use crate::checkpoint::CheckpointCoordinator;
use crate::job_state::TaskState;

/// The gRPC service workers report job ends to.
pub struct ReportsService(pub(super) Arc<JobMasters>);

impl ReportsService {
    /// The checkpoint coordinator of attempt `attempt` of job `job`.
    async fn checkpoints(&self, job: &str, attempt: u32) -> Option<Arc<CheckpointCoordinator>> {
        let master = self.0.master(job)?;
        let m = master.lock().await;
        (m.attempt == attempt && !m.restarting)
            .then(|| m.checkpoints.clone())
            .flatten()
    }
}

#[tonic::async_trait]
impl JobReports for ReportsService {
    async fn acknowledge_checkpoint(
        &self,
        request: Request<AcknowledgeCheckpointRequest>,
    ) -> Result<Response<AcknowledgeCheckpointResponse>, Status> {
        let r = request.into_inner();
        let state: TaskStateHandle = serde_json::from_str(&r.state_json)
            .map_err(|e| Status::invalid_argument(format!("the state handle: {e}")))?;
        if let Some(c) = self.checkpoints(&r.job_id, r.attempt).await {
            c.acknowledge(r.checkpoint_id, r.task as usize, r.subtask, state)
                .await;
        }
        Ok(Response::new(AcknowledgeCheckpointResponse {}))
    }

    async fn decline_checkpoint(
        &self,
        request: Request<DeclineCheckpointRequest>,
    ) -> Result<Response<DeclineCheckpointResponse>, Status> {
        let r = request.into_inner();
        if let Some(c) = self.checkpoints(&r.job_id, r.attempt).await {
            c.decline(r.checkpoint_id, &r.reason).await;
        }
        Ok(Response::new(DeclineCheckpointResponse {}))
    }

    async fn job_ended(
        &self,
        request: Request<JobEndedRequest>,
    ) -> Result<Response<JobEndedResponse>, Status> {
        let r = request.into_inner();
        let Some(master) = self.0.master(&r.job_id) else {
            return Ok(Response::new(JobEndedResponse {}));
        };
        let mut p = master.lock().await;
        if r.attempt != p.attempt || p.restarting {
            // A report of an attempt the job no longer runs.
            return Ok(Response::new(JobEndedResponse {}));
        }
        p.counted(r.counts);
        if r.outcome == "finished" {
            let mut finished = p.finished_workers.lock().unwrap_or_else(|e| e.into_inner());
            for (_, rpc) in p.waiting.iter().filter(|(w, _)| *w == r.worker_id) {
                finished.insert(rpc.clone());
            }
        }
        p.waiting.retain(|(w, _)| *w != r.worker_id);
        p.set_state(
            &r.worker_id,
            match r.outcome.as_str() {
                "finished" => TaskState::Finished,
                "canceled" => TaskState::Canceled,
                _ => TaskState::Failed,
            },
        );
        match r.outcome.as_str() {
            "finished" => {}
            "canceled" => {
                p.failure.get_or_insert_with(|| "canceled".into());
            }
            "disconnected" => {
                if p.failure.is_none() {
                    p.failure = Some(format!("on worker `{}`: {}", r.worker_id, r.error));
                    p.secondary = true;
                }
                // A data connection broke: a worker that no longer answers
                // is lost now, not only when its heartbeats time out.
                let others: Vec<(String, String)> = p.waiting.iter().cloned().collect();
                let me = self.0.clone();
                tokio::spawn(async move { me.probe(others).await });
            }
            _ => {
                // The cause replaces a consequence reported before it (a
                // peer's lost connection often reaches us first).
                if p.failure.is_none() || p.secondary {
                    p.failure = Some(format!("on worker `{}`: {}", r.worker_id, r.error));
                    p.secondary = false;
                }
                for (_, rpc) in &p.waiting {
                    cancel_on(rpc, &r.job_id, r.attempt, &self.0.present);
                }
            }
        }
        self.0.attempt_over(&r.job_id, &mut p, true).await;
        Ok(Response::new(JobEndedResponse {}))
    }
}
