//! Checkpoints, coordinator side. Named after the pieces Flink users know:
//!
//! - [`CheckpointCoordinator`] (in `coordinator`), one per running attempt
//!   of a job: triggers on the interval (with the minimum pause, the limit
//!   of checkpoints in flight and the timeout), collects acknowledgements,
//!   completes or aborts.
//! - [`pending::PendingCheckpoint`]: the acknowledgements a triggered
//!   checkpoint still waits for.
//! - [`completed::CompletedCheckpointStore`]: the retained completed
//!   checkpoints.
//! - [`shared_registry::SharedStateRegistry`]: reference counts of the
//!   files incremental checkpoints share.
//! - [`stats`]: what `GET /v1/jobs/{id}/checkpoints` shows.
//!
//! The task side (barriers, alignment, snapshots, uploads) is in the worker
//! crate's `checkpoint` module; what crosses between them is in
//! `weir_model::checkpoint`.

pub mod completed;
pub mod coordinator;
pub mod export;
pub mod inspect;
pub mod pending;
pub mod shared_registry;
pub mod stats;

pub use coordinator::{CheckpointCoordinator, CheckpointGateway, Topology};
pub use stats::CheckpointStats;
