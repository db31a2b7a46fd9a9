//! The JobGraph: a manifest with its parameters applied, as vertices and
//! edges, and the tasks that operator chaining makes of them.
//!
//! Chaining (Flink's): a vertex joins the task of its input when it has one
//! input, the edge is `Forward` and both have the same parallelism. A task is
//! then a tree of vertices run in one thread per subtask, records passing
//! between them as function calls, not messages.

//!
//! - `build`: the graph of a manifest (its parameters applied, every
//!   setting checked);
//! - `chaining`: the tasks its vertices make;
//! - `exports`: its operators checked against what the components export.

use std::collections::BTreeMap;

use weir_types::Type;

use crate::builtin::Builtin;
use crate::codec::Codec;
use crate::dead_letter::ErrorPolicy;
use crate::fault_tolerance::{CheckpointConfig, RestartStrategy, StateBackendKind};
use crate::manifest::KeyBy;

mod build;
mod chaining;
mod exports;
#[cfg(test)]
mod tests;

pub use crate::connectors::generator::GeneratorPattern;
pub use crate::connectors::{SinkConfig, SourceConfig};
pub use exports::{ExportedOperator, OperatorRole};

/// A job ready to run: every parameter applied.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct JobGraph {
    /// The job's name.
    pub name: String,
    /// Number of key groups.
    pub max_parallelism: u32,
    /// Sources, operators and sinks, sources first; an edge always goes from
    /// a lower id to a higher one.
    pub vertices: Vec<Vertex>,
    /// The edges between vertices.
    pub edges: Vec<Edge>,
    /// The parameter values, handed to every operator.
    pub params: BTreeMap<String, String>,
    /// Where keyed state lives (`None`: the worker's default).
    #[serde(default)]
    pub state_backend: Option<StateBackendKind>,
    /// How checkpoints are taken (`None`: they are not).
    #[serde(default)]
    pub checkpoint: Option<CheckpointConfig>,
    /// How the job restarts after a failure.
    #[serde(default)]
    pub restart: RestartStrategy,
    /// What a restart does when only a checkpoint older than the newest
    /// completed one can be restored.
    #[serde(default)]
    pub on_lost_commit: crate::fault_tolerance::OnLostCommit,
    /// The codec between its components and of their state (see
    /// [`crate::codec`]).
    #[serde(default)]
    pub codec: Codec,
    /// Guest limits below the worker's (the manifest's `[limits]`).
    #[serde(default)]
    pub limits: crate::limits::GuestLimits,
    /// Per file source vertex, the file's size when the job was planned:
    /// its subtasks cut their splits from it, so all cut the same ones
    /// however the file grows ([`JobGraph::fix_file_sizes`]).
    #[serde(default)]
    pub file_sizes: BTreeMap<usize, u64>,
}

/// One vertex of the graph, run as `parallelism` subtasks.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Vertex {
    /// Index in [`JobGraph::vertices`].
    pub id: usize,
    /// The name in the manifest.
    pub name: String,
    /// What it does.
    pub kind: VertexKind,
    /// Number of parallel subtasks.
    pub parallelism: u32,
    /// Where watermarks are made: on a source (or its timestamp assigner)
    /// with an event-time strategy.
    #[serde(default)]
    pub event_time: Option<EventTime>,
    /// The type of the records it writes (its main output): a source's
    /// schema, an operator's declared output; `None` when untyped (`json`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_type: Option<Type>,
    /// The type of the records it reads, when it declares one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_type: Option<Type>,
    /// Whether it writes the records it reads, as they came (a filter, a
    /// timestamp assigner): its output has its input's type and codec.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub passes_through: bool,
    /// What a record it cannot process does (a source's undecodable line,
    /// an operator's failing record): [`crate::dead_letter`].
    #[serde(default, skip_serializing_if = "ErrorPolicy::fails")]
    pub errors: ErrorPolicy,
}

/// A source's event time: where timestamps come from and how watermarks
/// follow them.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct EventTime {
    /// A JSON pointer to the timestamp field (ms); `None`: the timestamps
    /// the records carry (set by a timestamp assigner).
    pub timestamp: Option<String>,
    /// Bounded out-of-orderness: the watermark is the largest timestamp
    /// seen, minus this, minus 1. Monotonous timestamps: 0.
    pub max_delay_ms: i64,
    /// Processing time between watermarks; 0: after every record that
    /// advances it.
    pub interval_ms: u64,
    /// Without records for this long, a source subtask is idle and no
    /// longer holds back the watermark downstream.
    pub idle_timeout_ms: Option<u64>,
}

/// Default processing time between two watermarks of a source.
pub const DEFAULT_WATERMARK_INTERVAL_MS: u64 = 200;

/// The windows of a window operator.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct WindowSpec {
    /// How records are assigned to windows.
    pub assigner: WindowAssigner,
    /// On which time.
    pub time: TimeCharacteristic,
    /// How long after a window's end late records still update it.
    pub allowed_lateness_ms: i64,
    /// What its windows keep, once the operator is checked against its
    /// component's exports (`None` before, and in graphs stored before it
    /// was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keeps: Option<WindowContents>,
}

/// What a window operator keeps per key and window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum WindowContents {
    /// An aggregate function's accumulator (a Wasm `window` function).
    Accumulator,
    /// The window's records, for a process-window function
    /// (`window-process`) that sees them all when the window fires.
    Records,
}

/// How records are assigned to windows.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum WindowAssigner {
    /// `[k * size, (k + 1) * size)`: one window per record.
    Tumbling {
        /// Window length.
        size_ms: i64,
    },
    /// Windows of `size` starting every `slide`: `size / slide` windows per
    /// record.
    Sliding {
        /// Window length.
        size_ms: i64,
        /// Distance between starts.
        slide_ms: i64,
    },
    /// `[t, t + gap)` per record, merged while they overlap.
    Session {
        /// Inactivity that ends a session.
        gap_ms: i64,
    },
}

/// Which clock windows follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum TimeCharacteristic {
    /// Records' timestamps; windows fire on watermarks.
    Event,
    /// The machine's clock.
    Processing,
}

/// What a vertex does.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum VertexKind {
    /// Reads records from outside.
    Source(SourceConfig),
    /// Runs an operator exported by the job's component.
    Operator {
        /// The export's name.
        function: String,
        /// The component that exports it (its name in the bundle; empty
        /// until planning resolves it, and for built-in operators).
        #[serde(default)]
        component: String,
        /// How its input is keyed, for keyed operators.
        key_by: Option<KeyBy>,
        /// Its windows, for a window operator.
        #[serde(default)]
        window: Option<WindowSpec>,
        /// A built-in operator the runtime runs natively (`function` is
        /// then the built-in's name).
        #[serde(default)]
        builtin: Option<Builtin>,
    },
    /// Writes records outside.
    Sink(SinkConfig),
}

/// How records move along an edge.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Partitioning {
    /// Subtask i to subtask i (equal parallelism). Keeps order per channel.
    Forward,
    /// By key group of the key that `KeyBy` extracts: all records of a key
    /// reach the same subtask.
    Hash(KeyBy),
    /// Round-robin over the receivers.
    Rebalance,
}

/// An edge between two vertices.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Edge {
    /// The producing vertex.
    pub from: usize,
    /// `Some(name)` when the edge carries a side output of `from`.
    pub side_output: Option<String>,
    /// The consuming vertex.
    pub to: usize,
    /// How records are distributed over `to`'s subtasks.
    pub partitioning: Partitioning,
}

/// A chain of vertices run together: `vertices[0]` is the head, every other
/// vertex's input is a forward edge from a vertex earlier in the list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Task {
    /// Index in [`JobGraph::tasks`].
    pub id: usize,
    /// Vertex ids, head first.
    pub vertices: Vec<usize>,
    /// Parallelism of every vertex of the task.
    pub parallelism: u32,
}

impl JobGraph {
    /// Record the size each file source's file has now: the job's splits
    /// are cut from it. A file that cannot be read is left out (its
    /// subtasks name it when they open it).
    pub fn fix_file_sizes(&mut self) {
        for v in &self.vertices {
            if let VertexKind::Source(config) = &v.kind
                && let Some(path) = config.connector().split_file()
                && let Ok(meta) = std::fs::metadata(path)
            {
                self.file_sizes.insert(v.id, meta.len());
            }
        }
    }

    /// The edges into vertex `id`.
    pub fn inputs(&self, id: usize) -> impl Iterator<Item = &Edge> {
        self.edges.iter().filter(move |e| e.to == id)
    }

    /// The edges out of vertex `id`.
    pub fn outputs(&self, id: usize) -> impl Iterator<Item = &Edge> {
        self.edges.iter().filter(move |e| e.from == id)
    }
}
