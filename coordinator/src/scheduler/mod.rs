//! The scheduler: where an attempt's subtasks run.
//!
//! Slot sharing, as in Flink: a slot holds one subtask of every task of a
//! job, so a job needs as many slots as its largest parallelism; subtask `i`
//! of every task goes to slot `i`. Slots are spread over the workers by the
//! [`SlotManager`]; each worker involved gets the whole graph and every
//! subtask's place, and runs its share. What runs there, and when, is the
//! job's master's business ([`crate::job_master`]).

use std::collections::BTreeSet;
use std::time::Duration;

use weir_model::ExecutionGraph;
use weir_model::proto::SubtaskPlace;

use crate::error::CoordinatorError;
use crate::slot_manager::{SlotGrant, SlotManager};

/// How long a restart waits for enough free slots (a lost worker's
/// replacement registering).
const RESTART_SLOT_WAIT: Duration = Duration::from_secs(30);

/// Where one attempt runs.
pub struct Placement {
    /// The slots it holds, slot `i` for subtask `i` of every task.
    pub grants: Vec<SlotGrant>,
    /// Every subtask's place: its slot's data server.
    pub places: Vec<SubtaskPlace>,
    /// The workers involved: id and task executor address.
    pub workers: BTreeSet<(String, String)>,
}

/// Take the slots `exec` needs, waiting a bounded time for them when
/// `wait` (a restart, while a lost worker's replacement registers).
pub async fn assign(
    slots: &SlotManager,
    exec: &ExecutionGraph,
    wait: bool,
) -> Result<Placement, CoordinatorError> {
    let waited = tokio::time::Instant::now();
    let grants = loop {
        match slots.allocate(exec.slots_needed()).await {
            Ok(g) => break g,
            Err(e) if !wait || waited.elapsed() > RESTART_SLOT_WAIT => {
                return Err(CoordinatorError::unprocessable("not_enough_slots", e));
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    };
    let places = exec
        .vertices
        .iter()
        .map(|v| SubtaskPlace {
            task: v.task as u32,
            subtask: v.subtask,
            data_address: grants[v.slot as usize].data_address.clone(),
        })
        .collect();
    let workers = grants
        .iter()
        .map(|g| (g.worker_id.clone(), g.rpc_address.clone()))
        .collect();
    Ok(Placement {
        grants,
        places,
        workers,
    })
}
