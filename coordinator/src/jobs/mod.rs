//! Jobs: submitted against a bundle, planned, run, watched and canceled.
//!
//! - [`dispatcher`]: [`Jobs`], which accepts jobs, plans them, hands them to
//!   a [`crate::job_master::JobRunner`] and follows each through the states
//!   of [`crate::job_state`].
//! - [`view`]: what the REST API shows of a job ([`JobInfo`]) and takes for
//!   one ([`JobRequest`]).
//! - `savepoints`: savepoints triggered over the API, stopped jobs, and
//!   the savepoint a submission starts from.
//! - `access`: the files a job's connectors may reach, checked at submit,
//!   and its sinks' files, made for it.
//! - [`store`]: the job records under the data directory, so a restarted
//!   coordinator lists its jobs again; a job that was running when the
//!   coordinator stopped is marked failed, with that reason.

mod access;
pub mod dispatcher;
mod savepoints;
pub mod store;
pub mod view;

pub use crate::job_state::{JobState, TaskState, state_name};
pub use dispatcher::Jobs;
pub use view::*;
