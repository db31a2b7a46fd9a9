//! # weir-worker: running tasks
//!
//! A worker runs subtasks: each is a chain of operators (see
//! [`weir_model::graph`]) executed on its own thread, fed by bounded tokio
//! channels and feeding others through partitioners.
//!
//! - [`operators`]: [`StreamOperator`], what a chain runs — a Wasm operator
//!   ([`operators::WasmOperator`]) or a native one — and the
//!   [`OperatorFactory`] that creates them per subtask.
//! - [`builtin`]: the built-in operators, native: running aggregates per key
//!   and `select`.
//! - [`window`]: the window operator, native: windows on the task's state
//!   backend and timers, with a window function from the component or
//!   built in.
//! - [`connectors`]: sources and sinks, one file per connector (files, the
//!   generator, a socket; stdout, discard, part files).
//! - [`dead_letter`]: records a source cannot decode or an operator fails
//!   on, skipped or sent to a dead-letter output (`on-error`), within a
//!   budget.
//! - [`state`]: which state backend a job's operators get, and where
//!   RocksDB keeps their files.
//! - [`partition`]: how records leave a task: forward, hash by key group,
//!   rebalance; output buffers flushed per batch.
//! - [`watermark`]: per-channel watermark tracking (a task's watermark is the
//!   minimum over its inputs of the largest seen on each).
//! - [`task`]: one subtask's loop: input, chain, timers, barriers, end of
//!   stream.
//! - [`checkpoint`]: the task side of checkpoints: barrier alignment, split
//!   positions, acks.
//! - [`local`]: run a whole job in this process (`weir run`).
//! - [`agent`]: the worker process's registration and heartbeats.

pub mod agent;
pub mod builtin;
pub mod checkpoint;
pub mod connectors;
pub mod dead_letter;
pub mod executor;
pub mod inbox;
pub mod local;
pub mod network;
pub mod operators;
pub mod partition;
pub mod state;
pub mod task;
pub mod watermark;
pub mod window;

pub use local::{JobReport, LocalJob, Placement, run_job, run_placed};
pub use operators::{OperatorFactory, StreamOperator, WasmOperatorFactory};
pub use weir_model::metrics::{JobCounters, VertexReport};
