//! # weir-model: what the coordinator and the workers agree on
//!
//! - [`record`]: stream elements ([`Record`]) and the messages that carry them
//!   between tasks ([`StreamMessage`]: data batches and in-band signals).
//! - [`keygroup`]: hash partitioning by key group, Flink's scheme: a key hashes
//!   to one of `max_parallelism` key groups; each subtask owns a contiguous
//!   range of them, so state can be redistributed when parallelism changes.
//! - [`manifest`]: the job manifest (`weir.toml`) of a bundle and its
//!   parameters.
//! - [`graph`]: the [`JobGraph`] built from a manifest: vertices, edges with
//!   their partitioning, and operator chaining into tasks.
//! - [`execution`]: the [`ExecutionGraph`]: tasks expanded into subtasks, result
//!   partitions and channels.
//! - [`checkpoint`]: what a checkpoint holds (subtasks' state handles, the
//!   metadata of a completed one) and where its files are.
//! - [`fault_tolerance`]: a job's state backend, checkpoint settings and
//!   restart strategy (the manifest's `[state]`, `[checkpoint]`, `[restart]`).
//! - [`format`]: a stream's records as the host reads them (codec, and the
//!   type of a stream of rows).
//! - [`builtin`]: the operators the runtime runs natively, written in the
//!   manifest (running aggregates, `select`).
//! - [`connectors`]: sources and sinks: their manifest tables, their
//!   configurations, what they tell the rest of the job.
//! - [`dead_letter`]: what a source or an operator does with a record it
//!   cannot process (fail, skip, or send it to a dead-letter output).
//! - [`access`]: which files a job's connectors may reach (the directories
//!   a cluster grants).
//! - [`auth`]: tokens, and what each may do (read or admin).
//! - [`limits`]: the guest limits a job asks for (`[limits]`), at most the
//!   worker's.
//! - [`metrics`]: what subtasks did so far (counts, times, watermark, state),
//!   in the one shape workers report and the coordinator keeps.
//! - [`storage`]: the checkpoint storage, which workers write and the
//!   coordinator reads back.
//! - [`types`]: record types and the row format typed streams travel in
//!   (the `weir-types` crate).

pub mod access;
pub mod auth;
pub mod builtin;
pub mod bundle;
pub mod checkpoint;
pub mod codec;
pub mod connectors;
pub mod dead_letter;
pub mod execution;
pub mod fault_tolerance;
pub mod faults;
pub mod format;
pub mod frame;
pub mod graph;
pub mod json;
pub mod keygroup;
pub mod limits;
pub mod manifest;
pub mod metrics;
pub mod msgpack;
pub mod record;
pub mod savepoint;
pub mod storage;
pub mod tls;

/// Record types and the row format ([`weir_types`]).
pub use weir_types as types;

/// The gRPC services and messages between coordinator and workers
/// (`proto/weir/v1/*.proto`).
#[allow(missing_docs, clippy::all)]
pub mod proto {
    tonic::include_proto!("weir.v1");
}

/// Processing time: the wall clock in ms since the epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

pub use execution::ExecutionGraph;
pub use graph::{
    Edge, ExportedOperator, JobGraph, OperatorRole, Partitioning, Task, Vertex, VertexKind,
};
pub use manifest::{KeyBy, Manifest, ManifestError};
pub use record::packed::{PackedRecords, RecordRef, Records};
pub use record::{
    Barrier, CheckpointKind, CheckpointMode, Record, RecordBuffer, Signal, StreamMessage,
};
