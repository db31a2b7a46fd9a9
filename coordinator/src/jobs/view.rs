//! What the REST API shows of jobs and takes for them: a job's record
//! ([`JobInfo`]: state, counts, subtasks, graph, failures) and a submission
//! ([`JobRequest`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use weir_model::JobGraph;
use weir_model::metrics::{JobCounters, VertexReport};

use crate::job_state::{JobState, TaskState};

/// One subtask of a job: where it runs and in which state.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct SubtaskStatus {
    /// The vertex's name.
    pub vertex: String,
    /// The subtask's index.
    pub subtask: u32,
    /// The worker it runs on (none when the coordinator runs it).
    pub worker: Option<String>,
    /// The job's slot it shares with the same index of other vertices.
    pub slot: Option<u32>,
    /// Its state.
    pub state: TaskState,
    /// Records it received.
    #[serde(default)]
    pub records_in: u64,
    /// Records it emitted.
    #[serde(default)]
    pub records_out: u64,
}

/// Every subtask of `graph`, in `state`, not placed.
pub fn subtasks_of(graph: &JobGraph, state: TaskState) -> Vec<SubtaskStatus> {
    graph
        .vertices
        .iter()
        .flat_map(|v| {
            (0..v.parallelism).map(move |s| SubtaskStatus {
                vertex: v.name.clone(),
                subtask: s,
                worker: None,
                slot: None,
                state,
                records_in: 0,
                records_out: 0,
            })
        })
        .collect()
}

/// Set every subtask's counts from `counters`.
pub(crate) fn count_subtasks(subtasks: &mut [SubtaskStatus], counters: &JobCounters) {
    for t in subtasks {
        if let Some(c) = counters
            .vertices
            .iter()
            .find(|(name, _)| *name == t.vertex)
            .and_then(|(_, subtasks)| subtasks.get(t.subtask as usize))
        {
            (t.records_in, t.records_out) = c.get();
        }
    }
}

/// Records through one vertex.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct VertexStatus {
    /// The vertex's name.
    pub name: String,
    /// Its parallelism.
    pub parallelism: u32,
    /// Records received, all subtasks.
    pub records_in: u64,
    /// Records emitted, all subtasks.
    pub records_out: u64,
}

impl From<VertexReport> for VertexStatus {
    fn from(r: VertexReport) -> Self {
        VertexStatus {
            name: r.name,
            parallelism: r.parallelism,
            records_in: r.records_in,
            records_out: r.records_out,
        }
    }
}

/// A job's graph as the dashboard draws it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct GraphView {
    /// Its vertices, in id order.
    pub vertices: Vec<VertexView>,
    /// Its edges.
    pub edges: Vec<EdgeView>,
}

/// A vertex of a [`GraphView`].
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct VertexView {
    /// Its name.
    pub name: String,
    /// `source`, `operator` or `sink`.
    pub kind: String,
    /// What it runs: the operator's function, the source's or sink's type.
    pub what: String,
    /// Its parallelism.
    pub parallelism: u32,
    /// The task it is chained into.
    pub task: usize,
}

/// An edge of a [`GraphView`].
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct EdgeView {
    /// The producing vertex (index).
    pub from: usize,
    /// The consuming vertex (index).
    pub to: usize,
    /// `forward`, `hash(...)` or `rebalance`; `chained` inside a task.
    pub partitioning: String,
    /// The side output it carries, if any.
    pub side_output: Option<String>,
}

impl GraphView {
    /// The view of `graph`.
    pub fn of(graph: &JobGraph) -> GraphView {
        use weir_model::{Partitioning, VertexKind};
        let tasks = graph.tasks();
        let task_of = |v: usize| graph.task_of(&tasks, v);
        GraphView {
            vertices: graph
                .vertices
                .iter()
                .map(|v| {
                    let (kind, what) = match &v.kind {
                        VertexKind::Source(c) => ("source", c.connector().type_name().to_owned()),
                        VertexKind::Operator {
                            function,
                            window,
                            builtin,
                            ..
                        } => (
                            "operator",
                            match (window, builtin) {
                                (_, Some(_)) => format!("{function} (built-in)"),
                                (Some(_), None) => format!("{function} (window)"),
                                (None, None) => function.clone(),
                            },
                        ),
                        VertexKind::Sink(c) => ("sink", c.connector().type_name().to_owned()),
                    };
                    VertexView {
                        name: v.name.clone(),
                        kind: kind.to_owned(),
                        what,
                        parallelism: v.parallelism,
                        task: task_of(v.id),
                    }
                })
                .collect(),
            edges: graph
                .edges
                .iter()
                .map(|e| EdgeView {
                    from: e.from,
                    to: e.to,
                    partitioning: if task_of(e.from) == task_of(e.to) {
                        "chained".to_owned()
                    } else {
                        match &e.partitioning {
                            Partitioning::Forward => "forward".to_owned(),
                            Partitioning::Rebalance => "rebalance".to_owned(),
                            Partitioning::Hash(k) => format!(
                                "hash({})",
                                match k {
                                    weir_model::KeyBy::Value => "value",
                                    weir_model::KeyBy::Key => "key",
                                    weir_model::KeyBy::Pointer(p) => p.as_str(),
                                }
                            ),
                        }
                    },
                    side_output: e.side_output.clone(),
                })
                .collect(),
        }
    }
}

/// A failure of a job, as its exception history keeps it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ExceptionInfo {
    /// When, ms since the epoch.
    pub at_ms: i64,
    /// What happened: names the operator, subtask and worker, with the
    /// guest's own message.
    pub message: String,
    /// The attempt that failed (0 for the first).
    #[serde(default)]
    pub attempt: u32,
    /// How many times in a row it happened (the same message, attempt
    /// after attempt: a failure restarting does not heal).
    #[serde(default = "once")]
    pub count: u32,
    /// The last attempt it happened in.
    #[serde(default)]
    pub last_attempt: u32,
    /// When it last happened, ms since the epoch.
    #[serde(default)]
    pub last_at_ms: i64,
}

fn once() -> u32 {
    1
}

impl JobInfo {
    /// Add a failure of attempt `attempt` to the job's history: the same
    /// message as the newest one there counts once more instead.
    pub fn record_exception(&mut self, message: String, attempt: u32) {
        let now = weir_model::now_ms();
        if let Some(last) = self.exceptions.last_mut()
            && last.message == message
        {
            last.count += 1;
            last.last_attempt = attempt;
            last.last_at_ms = now;
            return;
        }
        self.exceptions.push(ExceptionInfo {
            at_ms: now,
            message,
            attempt,
            count: 1,
            last_attempt: attempt,
            last_at_ms: now,
        });
    }
}

/// What the API tells about a job.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct JobInfo {
    /// The job's id.
    pub id: String,
    /// The job's name (from the manifest).
    pub name: String,
    /// The bundle it runs.
    pub bundle: String,
    /// The parallelism the submission asked for, if any (a resumed job
    /// is planned again with it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallelism: Option<u32>,
    /// Its state.
    pub state: JobState,
    /// Why it failed.
    pub error: Option<String>,
    /// The parameters it runs with.
    pub params: BTreeMap<String, String>,
    /// Its vertices, with their parallelism and counts.
    pub vertices: Vec<VertexStatus>,
    /// Every subtask: its worker, slot and state.
    #[serde(default)]
    pub subtasks: Vec<SubtaskStatus>,
    /// Its graph: vertices and edges, as the dashboard draws them.
    #[serde(default)]
    pub graph: GraphView,
    /// Its failures, oldest first.
    #[serde(default)]
    pub exceptions: Vec<ExceptionInfo>,
    /// When it was submitted, ms since the epoch.
    pub submitted_at_ms: i64,
    /// When it ended.
    pub ended_at_ms: Option<i64>,
    /// Its checkpoints, once it ended (`GET /v1/jobs/{id}/checkpoints`
    /// shows them live).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoints: Option<crate::checkpoint::CheckpointStats>,
    /// The attempt running (0 for the first; one more per restart).
    #[serde(default)]
    pub attempt: u32,
    /// How often it restarted.
    #[serde(default)]
    pub restarts: u32,
}

/// A submission, as the API receives it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobRequest {
    /// The bundle's id.
    pub bundle: String,
    /// Parallelism overriding the manifest's default: any whole JSON
    /// number (`4` or `4.0`, as JSON Schema's `integer` allows); one beyond
    /// `u32` is kept as `u32::MAX`, which no job's max parallelism allows.
    #[serde(default, deserialize_with = "whole_number")]
    pub parallelism: Option<u32>,
    /// Job parameters.
    #[serde(default)]
    pub params: BTreeMap<String, String>,
    /// A savepoint's directory (on the coordinator's machine) to start
    /// from: the job goes on with its state, at the parallelism and with
    /// the code of this submission.
    #[serde(default)]
    pub from_savepoint: Option<String>,
    /// Drop the savepoint's state that no vertex of this job claims (else
    /// such a submission is refused).
    #[serde(default)]
    pub allow_non_restored_state: bool,
}

/// An upgrade (`POST /v1/jobs/{id}/upgrade`): the job's new bundle.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpgradeRequest {
    /// The new bundle's id (uploaded before).
    pub bundle: String,
    /// Drop the savepoint's state that no vertex of the new bundle's job
    /// claims.
    #[serde(default)]
    pub allow_non_restored_state: bool,
}

/// A savepoint's trigger (`POST /v1/jobs/{id}/savepoints`, and
/// `POST /v1/jobs/{id}/stop`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SavepointRequest {
    /// The directory to write it into (on the coordinator's machine; it
    /// must not hold a savepoint already); default: a new one under the
    /// coordinator's data directory.
    #[serde(default)]
    pub directory: Option<String>,
    /// The trigger's id, chosen by the client: triggering again with the
    /// same id takes no second savepoint (a retry). Default: a new one.
    #[serde(default)]
    pub trigger_id: Option<String>,
    /// (Stop only) send the maximal watermark before the savepoint, so
    /// that every event-time window fires and every event-time timer goes
    /// off into the output it commits (Flink's `--drain`): for a job that
    /// ends for good.
    #[serde(default)]
    pub drain: bool,
}

impl JobRequest {
    /// The request that started `job`: its bundle, parallelism and
    /// parameters (from no savepoint).
    pub fn of(job: &JobInfo) -> JobRequest {
        JobRequest {
            bundle: job.bundle.clone(),
            parallelism: job.parallelism,
            params: job.params.clone(),
            from_savepoint: None,
            allow_non_restored_state: false,
        }
    }
}

/// A parallelism written as any whole JSON number.
fn whole_number<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    use serde::de::Error;
    let Some(n) = Option::<serde_json::Number>::deserialize(d)? else {
        return Ok(None);
    };
    let clamp = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
    if let Some(v) = n.as_u64() {
        return Ok(Some(clamp(v)));
    }
    match n.as_f64() {
        Some(f) if f.fract() == 0.0 && f >= 0.0 => Ok(Some(if f >= u32::MAX as f64 {
            u32::MAX
        } else {
            f as u32
        })),
        _ => Err(D::Error::custom(format!(
            "parallelism: {n} is not a whole number of at least 1"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_that_repeats_is_one_entry_with_its_count() {
        let mut info: JobInfo = serde_json::from_value(serde_json::json!({
            "id": "j", "name": "n", "bundle": "b", "state": "running", "error": null,
            "params": {}, "vertices": [], "submitted_at_ms": 0, "ended_at_ms": null,
        }))
        .unwrap();
        info.record_exception("cannot create /dev/null".into(), 0);
        info.record_exception("cannot create /dev/null".into(), 1);
        info.record_exception("cannot create /dev/null".into(), 2);
        info.record_exception("worker lost".into(), 3);
        info.record_exception("cannot create /dev/null".into(), 4);
        let got: Vec<(u32, u32, u32)> = info
            .exceptions
            .iter()
            .map(|e| (e.attempt, e.last_attempt, e.count))
            .collect();
        assert_eq!(got, [(0, 2, 3), (3, 3, 1), (4, 4, 1)]);
    }
}
