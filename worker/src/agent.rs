//! The worker process's link to the coordinator: it registers its slots with
//! the resource manager and sends heartbeats; if the coordinator forgot it
//! (a restart, a missed timeout) it registers again — after stopping every
//! task it runs: the coordinator that deployed them no longer counts on
//! them (it restarts their jobs elsewhere, or resumes them), and tasks
//! nobody runs must not go on writing.

use std::time::Duration;

use weir_model::auth::{PeerChannel, PresentToken};
use weir_model::proto::resource_manager_client::ResourceManagerClient;
use weir_model::proto::{HeartbeatRequest, JobProgress, RegisterWorkerRequest};

/// Who this worker is and what it offers.
#[derive(Debug, Clone)]
pub struct WorkerIdentity {
    /// Unique per process.
    pub id: String,
    /// Task slots offered.
    pub slots: u32,
    /// Where other workers reach it for data.
    pub data_address: String,
    /// The machine's name.
    pub hostname: String,
    /// Where the coordinator reaches this worker's task executor.
    pub rpc_address: String,
}

async fn connect(
    url: &str,
    present: &PresentToken,
) -> anyhow::Result<ResourceManagerClient<PeerChannel>> {
    let endpoint = present
        .endpoint(url)
        .map_err(|e| anyhow::anyhow!("the coordinator's address: {e:#}"))?
        .connect_timeout(Duration::from_secs(5))
        .timeout(Duration::from_secs(10));
    Ok(ResourceManagerClient::with_interceptor(
        endpoint.connect().await?,
        present.clone(),
    ))
}

/// Whether an answer shows that `--coordinator` names a server that is not
/// the coordinator's gRPC service for workers (its REST API, another
/// program): no retry helps.
fn not_the_worker_service(status: &tonic::Status) -> bool {
    let message = status.message();
    status.code() == tonic::Code::Unimplemented
        || message.contains("compression flag")
        || message.contains("content-type")
        || message.contains("HTTP status")
}

/// Register and keep sending heartbeats, with the progress of the worker's
/// jobs, until the process ends. Connection
/// failures are retried every second (and logged), so workers may start
/// before the coordinator; a server that is not the coordinator's service
/// for workers ends it with an error that says so.
pub async fn run(
    coordinator: &str,
    me: WorkerIdentity,
    present: PresentToken,
    progress: impl Fn() -> Vec<JobProgress>,
    orphaned: impl Fn(),
) -> anyhow::Result<()> {
    let mut was_registered = false;
    let mut client: Option<ResourceManagerClient<PeerChannel>> = None;
    let mut interval = Duration::from_secs(1);
    let mut registered = false;
    loop {
        if client.is_none() {
            match connect(coordinator, &present).await {
                Ok(c) => client = Some(c),
                Err(e) => {
                    tracing::warn!(
                        "cannot reach the coordinator at {coordinator}: {e:#}; retrying"
                    );
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            }
        }
        let c = client.as_mut().expect("connected above");
        let result = if registered {
            c.heartbeat(HeartbeatRequest {
                worker_id: me.id.clone(),
                jobs: progress(),
            })
            .await
            .map(|r| r.into_inner().known)
        } else {
            if was_registered {
                // Registering again: what runs here belongs to the
                // coordinator's past.
                orphaned();
            }
            let request = RegisterWorkerRequest {
                worker_id: me.id.clone(),
                slots: me.slots,
                data_address: me.data_address.clone(),
                hostname: me.hostname.clone(),
                rpc_address: me.rpc_address.clone(),
            };
            c.register_worker(request).await.map(|r| {
                let r = r.into_inner();
                interval = Duration::from_millis(r.heartbeat_interval_ms.max(10));
                tracing::info!(worker = %me.id, slots = me.slots, "registered with the coordinator at {coordinator}");
                true
            })
        };
        match result {
            Ok(known) => {
                registered = known;
                was_registered |= known;
            }
            Err(status) if status.code() == tonic::Code::Unauthenticated => {
                anyhow::bail!(
                    "the coordinator at {coordinator} refused this worker: {} (give the worker the cluster's token with --token-file or WEIR_TOKEN)",
                    status.message()
                );
            }
            Err(status) if not_the_worker_service(&status) => {
                anyhow::bail!(
                    "{coordinator} does not answer as a Weir coordinator's service for workers (is it its REST address? give --coordinator the address of its --rpc-listen): {}",
                    status.message()
                );
            }
            Err(status) => {
                // One failed call is not a lost coordinator: the worker
                // stays registered, and its tasks run on, unless the
                // coordinator answers that it no longer knows it (it gave
                // it up after its heartbeat timeout, or restarted).
                tracing::warn!("coordinator at {coordinator}: {status}; reconnecting");
                client = None;
            }
        }
        tokio::time::sleep(interval).await;
    }
}
