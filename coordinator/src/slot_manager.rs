//! The resource manager: which workers exist, their slots, and whether they
//! are alive. Workers register over gRPC and send heartbeats; a worker that
//! misses them for longer than the timeout is removed with its slots.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::sync::RwLock;
use tonic::{Request, Response, Status};
use weir_model::proto::resource_manager_server::{ResourceManager, ResourceManagerServer};
use weir_model::proto::{
    HeartbeatRequest, HeartbeatResponse, JobProgress, RegisterWorkerRequest, RegisterWorkerResponse,
};

/// Heartbeat timing, given to every worker when it registers.
#[derive(Debug, Clone, Copy)]
pub struct HeartbeatConfig {
    /// How often workers send a heartbeat.
    pub interval: Duration,
    /// After how long without one a worker is removed.
    pub timeout: Duration,
}

impl Default for HeartbeatConfig {
    fn default() -> Self {
        HeartbeatConfig {
            interval: Duration::from_secs(1),
            timeout: Duration::from_secs(10),
        }
    }
}

struct Worker {
    slots: u32,
    used: u32,
    /// Which registration of the worker this is: a grant of an earlier one
    /// (its tasks stopped when it registered again) gives nothing back to
    /// this one.
    generation: u64,
    data_address: String,
    rpc_address: String,
    hostname: String,
    registered: Instant,
    last_heartbeat: Instant,
}

/// What the API tells about a worker.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct WorkerInfo {
    /// Its id.
    pub id: String,
    /// Its machine.
    pub hostname: String,
    /// Where it serves data.
    pub data_address: String,
    /// Slots it offers.
    pub slots: u32,
    /// Slots free.
    pub free_slots: u32,
    /// Milliseconds since its last heartbeat.
    pub last_heartbeat_ms_ago: u64,
    /// Milliseconds since it registered.
    pub registered_ms_ago: u64,
}

/// The cluster, as `GET /v1/cluster` shows it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ClusterInfo {
    /// Every live worker, by id.
    pub workers: Vec<WorkerInfo>,
    /// Slots in all.
    pub slots_total: u32,
    /// Slots free.
    pub slots_free: u32,
}

/// Hears the job progress that heartbeats carry.
pub type ProgressSink = Box<dyn Fn(String, Vec<JobProgress>) + Send + Sync>;

/// The registry of workers.
pub struct SlotManager {
    config: HeartbeatConfig,
    workers: RwLock<BTreeMap<String, Worker>>,
    progress: std::sync::OnceLock<ProgressSink>,
    /// The last registration's generation.
    generations: std::sync::atomic::AtomicU64,
}

impl SlotManager {
    /// An empty registry; call [`SlotManager::watch`] to remove silent workers.
    pub fn new(config: HeartbeatConfig) -> Arc<SlotManager> {
        Arc::new(SlotManager {
            config,
            workers: RwLock::new(BTreeMap::new()),
            progress: std::sync::OnceLock::new(),
            generations: Default::default(),
        })
    }

    /// Where the job progress in heartbeats goes (set once).
    pub fn on_progress(&self, sink: ProgressSink) {
        let _ = self.progress.set(sink);
    }

    /// The gRPC service workers talk to.
    pub fn service(self: &Arc<Self>) -> ResourceManagerServer<RmService> {
        ResourceManagerServer::new(RmService(self.clone()))
    }

    /// Remove, every heartbeat interval, the workers whose heartbeats stopped;
    /// `on_lost` hears of each (to fail their tasks).
    pub fn watch(
        self: &Arc<Self>,
        on_lost: impl Fn(&str) + Send + Sync + 'static,
    ) -> tokio::task::JoinHandle<()> {
        let me = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(me.config.interval);
            loop {
                tick.tick().await;
                let mut workers = me.workers.write().await;
                let lost: Vec<String> = workers
                    .iter()
                    .filter(|(_, w)| w.last_heartbeat.elapsed() > me.config.timeout)
                    .map(|(id, _)| id.clone())
                    .collect();
                for id in lost {
                    workers.remove(&id);
                    tracing::warn!(worker = %id, "worker missed its heartbeats for {:?}: removed with its slots", me.config.timeout);
                    on_lost(&id);
                }
            }
        })
    }

    /// Remove worker `id` now, with its slots (it is known to be gone before
    /// its heartbeats time out). Returns whether it was registered. A worker
    /// that is alive after all registers again with its next heartbeat.
    pub async fn remove(&self, id: &str) -> bool {
        let removed = self.workers.write().await.remove(id).is_some();
        if removed {
            tracing::warn!(worker = %id, "worker unreachable: removed with its slots");
        }
        removed
    }

    /// The cluster now.
    pub async fn cluster(&self) -> ClusterInfo {
        let workers = self.workers.read().await;
        let infos: Vec<WorkerInfo> = workers
            .iter()
            .map(|(id, w)| WorkerInfo {
                id: id.clone(),
                hostname: w.hostname.clone(),
                data_address: w.data_address.clone(),
                slots: w.slots,
                free_slots: w.slots - w.used,
                last_heartbeat_ms_ago: w.last_heartbeat.elapsed().as_millis() as u64,
                registered_ms_ago: w.registered.elapsed().as_millis() as u64,
            })
            .collect();
        ClusterInfo {
            slots_total: infos.iter().map(|w| w.slots).sum(),
            slots_free: infos.iter().map(|w| w.free_slots).sum(),
            workers: infos,
        }
    }
}

/// A slot given to a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotGrant {
    /// The worker.
    pub worker_id: String,
    /// Its task executor.
    pub rpc_address: String,
    /// Its data server.
    pub data_address: String,
    /// The worker's registration the slot was taken from.
    pub generation: u64,
}

impl SlotManager {
    /// Take `n` free slots, spread over the workers (round robin), or say
    /// how many are free.
    pub async fn allocate(&self, n: u32) -> Result<Vec<SlotGrant>, String> {
        let mut workers = self.workers.write().await;
        let free: u32 = workers.values().map(|w| w.slots - w.used).sum();
        if n > free {
            return Err(format!(
                "the job needs {n} slots and the cluster has {free} free ({} workers)",
                workers.len()
            ));
        }
        let mut grants = Vec::new();
        while grants.len() < n as usize {
            for (id, w) in workers.iter_mut() {
                if grants.len() < n as usize && w.used < w.slots {
                    w.used += 1;
                    grants.push(SlotGrant {
                        worker_id: id.clone(),
                        rpc_address: w.rpc_address.clone(),
                        data_address: w.data_address.clone(),
                        generation: w.generation,
                    });
                }
            }
        }
        Ok(grants)
    }

    /// Give slots back.
    pub async fn release(&self, grants: &[SlotGrant]) {
        let mut workers = self.workers.write().await;
        for g in grants {
            // A slot of an earlier registration is not this one's.
            if let Some(w) = workers
                .get_mut(&g.worker_id)
                .filter(|w| w.generation == g.generation)
            {
                w.used = w.used.saturating_sub(1);
            }
        }
    }
}

/// The gRPC face of the [`SlotManager`].
pub struct RmService(Arc<SlotManager>);

#[tonic::async_trait]
impl ResourceManager for RmService {
    async fn register_worker(
        &self,
        request: Request<RegisterWorkerRequest>,
    ) -> Result<Response<RegisterWorkerResponse>, Status> {
        let r = request.into_inner();
        if r.worker_id.is_empty() {
            return Err(Status::invalid_argument("a worker needs a non-empty id"));
        }
        if r.slots == 0 {
            return Err(Status::invalid_argument("a worker needs at least one slot"));
        }
        let now = Instant::now();
        tracing::info!(worker = %r.worker_id, slots = r.slots, host = %r.hostname, "worker registered");
        let generation = self
            .0
            .generations
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            + 1;
        self.0.workers.write().await.insert(
            r.worker_id,
            Worker {
                slots: r.slots,
                used: 0,
                generation,
                data_address: r.data_address,
                rpc_address: r.rpc_address,
                hostname: r.hostname,
                registered: now,
                last_heartbeat: now,
            },
        );
        Ok(Response::new(RegisterWorkerResponse {
            heartbeat_interval_ms: self.0.config.interval.as_millis() as u64,
            heartbeat_timeout_ms: self.0.config.timeout.as_millis() as u64,
        }))
    }

    async fn heartbeat(
        &self,
        request: Request<HeartbeatRequest>,
    ) -> Result<Response<HeartbeatResponse>, Status> {
        let request = request.into_inner();
        let id = request.worker_id;
        let mut workers = self.0.workers.write().await;
        let known = match workers.get_mut(&id) {
            Some(w) => {
                w.last_heartbeat = Instant::now();
                true
            }
            None => false,
        };
        drop(workers);
        if known
            && !request.jobs.is_empty()
            && let Some(sink) = self.0.progress.get()
        {
            sink(id, request.jobs);
        }
        Ok(Response::new(HeartbeatResponse { known }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn register(slots: &Arc<SlotManager>, id: &str) {
        RmService(slots.clone())
            .register_worker(Request::new(RegisterWorkerRequest {
                worker_id: id.into(),
                slots: 2,
                data_address: "127.0.0.1:1".into(),
                hostname: "h".into(),
                rpc_address: "http://127.0.0.1:2".into(),
            }))
            .await
            .unwrap();
    }

    /// A worker that registers again (its tasks stopped) starts with all
    /// its slots free, and the grants of its earlier registration, given
    /// back late by their jobs, do not free the slots newer jobs hold.
    #[tokio::test]
    async fn slot_accounting_survives_a_worker_registering_again() {
        let slots = SlotManager::new(HeartbeatConfig::default());
        register(&slots, "w").await;
        let old = slots.allocate(2).await.unwrap();
        assert_eq!(slots.cluster().await.slots_free, 0);
        register(&slots, "w").await;
        assert_eq!(slots.cluster().await.slots_free, 2);
        let new = slots.allocate(2).await.unwrap();
        slots.release(&old).await;
        assert_eq!(
            slots.cluster().await.slots_free,
            0,
            "the new grants hold them"
        );
        assert!(slots.allocate(1).await.is_err());
        slots.release(&new).await;
        assert_eq!(slots.cluster().await.slots_free, 2);
    }
}
