//! # weir-coordinator: the JobManager
//!
//! - [`rest`]: the REST API (axum), `fn app(state) -> Router`; JSON errors
//!   with a stable code ([`error::CoordinatorError`]); the OpenAPI document.
//! - [`auth`]: who may call it: bearer tokens (read or admin), and no
//!   changes on behalf of another site's page.
//! - [`bundles`]: uploaded bundles: checked (safe archive, a component of the
//!   operator world, a manifest it can run), stored content-addressed.
//! - [`data_dir`]: the data directory, and its lock (one coordinator
//!   each).
//! - [`blob`]: the blob store over `object_store` (a local directory by
//!   default; S3-compatible stores for clusters).
//! - [`plan`]: a bundle and a submission become the [`JobGraph`] that workers
//!   run, checked against what the component exports.
//!
//! - [`checkpoint`]: the checkpoint coordinator of each running job:
//!   triggers, acknowledgements, completed checkpoints and their files.
//!
//! - [`slot_manager`]: the resource manager: workers register their slots
//!   over gRPC and send heartbeats; silent workers are removed.
//!
//! - [`jobs`]: the dispatcher: accepts jobs, plans them against what their
//!   bundle exports, hands each to a [`job_master::JobRunner`] and follows
//!   it through the states of [`job_state`]; the job records and their REST
//!   views.
//! - [`job_master`]: one master per running job ([`job_master::JobMasters`]):
//!   its attempts, its restart strategy (every restart decided in one
//!   place), its checkpoint coordinator and its subtasks.
//! - [`scheduler`]: where an attempt's subtasks run (slot sharing over the
//!   workers' slots).
//!
//! The coordinator runs no user code: wasmtime inspects a component once,
//! at upload ([`bundles`]); workers compile and run it.

pub mod auth;
pub mod blob;
pub mod bundles;
pub mod checkpoint;
pub mod dashboard;
pub mod data_dir;
pub mod error;
pub mod job_master;
pub mod job_state;
pub mod jobs;
pub mod metrics;
pub mod rest;
pub mod savepoint;
pub mod scheduler;
pub mod slot_manager;
pub mod tls;

use std::collections::BTreeMap;

use weir_model::manifest::substitute;
use weir_model::{ExportedOperator, JobGraph, Manifest, ManifestError};

/// What a submission asks for.
#[derive(Debug, Clone, Default)]
pub struct Submission {
    /// `key=value` parameters given by the user.
    pub params: Vec<(String, String)>,
    /// Parallelism overriding the manifest's default.
    pub parallelism: Option<u32>,
    /// Parameters the runtime provides (e.g. `bundle_dir`); not checked
    /// against the manifest's declarations.
    pub builtin_params: Vec<(String, String)>,
}

/// Plan a job: resolve its parameters, build the graph and check it against
/// the component's exports.
pub fn plan(
    manifest: &Manifest,
    submission: &Submission,
    exported: &[ExportedOperator],
) -> Result<JobGraph, ManifestError> {
    let builtins: BTreeMap<String, String> = submission.builtin_params.iter().cloned().collect();
    let mut params = builtins.clone();
    for (name, value) in manifest.resolve_params(&submission.params)? {
        // Defaults may use the built-in parameters (`${bundle_dir}`).
        params.insert(name, substitute(&value, &builtins)?);
    }
    let mut graph = JobGraph::build(manifest, params, submission.parallelism)?;
    graph.resolve_operators(exported)?;
    Ok(graph)
}
