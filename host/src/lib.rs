//! # weir-host: running operator components in wasmtime
//!
//! - [`config`]: [`HostConfig`], the limits every guest runs under (memory,
//!   CPU time per call, pool sizes) and where compiled components are cached.
//! - [`runtime`]: [`WasmRuntime`], one per process: the wasmtime `Engine`
//!   (pooling allocator, epoch interruption), the `Linker` with Weir's host
//!   imports and a locked-down WASI, and the component cache: a component is
//!   compiled once and its artifact cached on disk by content hash.
//! - [`instance`]: [`OperatorInstance`], one operator of one subtask, in its
//!   own `Store`. It calls the guest a batch at a time and applies the batch's
//!   effects (outputs, state, timers) only when the call succeeds.
//! - keyed state and timers live behind [`StateBackend`] (the `weir-state`
//!   crate, re-exported here): in memory or in RocksDB.
//! - [`error`]: [`OperatorError`], which names the job, operator and subtask,
//!   says what went wrong (trap, deadline, memory cap, the guest's own error)
//!   and carries the guest's last words (panic message, stderr).
//!
//! The contract is the WIT package in `wit/` (`weir:operator@0.4.0`); the
//! generated types are re-exported in [`types`].

mod bindings;
pub mod components;
pub mod config;
mod convert;
pub mod error;
mod imports;
pub mod instance;
pub mod packed;
pub mod runtime;
mod state_types;
mod wasi;

pub use components::{JobComponent, JobComponentError, JobComponents};
pub use config::HostConfig;
pub use error::{ErrorKind, LoadError, OperatorError, TaskIdent};
pub use imports::now_ms;
pub use instance::{
    BatchContext, BatchOutput, InstanceMetrics, OperatorInstance, OperatorSpec, Output,
};
pub use runtime::{LoadedComponent, WasmRuntime};
pub use weir_state::{MemoryStateBackend, StateBackend, StateSize};

/// The contract's types, as generated from `wit/`.
pub mod types {
    pub use crate::bindings::weir::operator::types::*;
}
