//! Errors of loading components and of running operators.

use std::fmt;

/// Which subtask of which operator of which job: every error names it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct TaskIdent {
    /// The job's name.
    pub job: String,
    /// The operator's name in the manifest.
    pub operator: String,
    /// The subtask index.
    pub subtask: u32,
}

impl fmt::Display for TaskIdent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "job `{}`, operator `{}`, subtask {}",
            self.job, self.operator, self.subtask
        )
    }
}

/// Why a component cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The bytes are not WebAssembly at all.
    #[error("not a WebAssembly component: the file does not start with the `\\0asm` magic bytes")]
    NotWasm,
    /// A core module, not a component.
    #[error(
        "a core WebAssembly module, not a component: build it for wasm32-wasip2 (or wrap it with `wasm-tools component new`)"
    )]
    CoreModule,
    /// Invalid, or not of the operator world.
    #[error("invalid component: {0}")]
    Invalid(String),
    /// A component of another world.
    #[error(
        "the component does not implement the Weir operator world (weir:operator/operator-component@0.4.0; a component built with another version of the SDK must be rebuilt, `weir build`): {0}"
    )]
    WrongWorld(String),
    /// The component is fine, the host failed (cache directory, pool).
    #[error("cannot load the component: {0}")]
    Host(String),
}

/// What went wrong in a guest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The operator returned an error (a guest's own, or a built-in
    /// operator's: e.g. a record it cannot decode).
    Guest,
    /// The guest trapped (a panic, `unreachable`, an out-of-bounds access).
    Trap,
    /// The guest ran past its call's deadline (an endless loop, a sleep).
    Deadline,
    /// The guest asked for more memory than its limit.
    MemoryLimit,
    /// The guest made the host hold more than a quota allows (records
    /// emitted in one call).
    Quota,
    /// The host failed (state backend, instantiation).
    Host,
}

/// An operator failed. The worker and other tasks are unharmed; this
/// instance's `Store` is poisoned after a trap and must be rebuilt
/// ([`crate::OperatorInstance::reset`]).
#[derive(Debug, Clone)]
pub struct OperatorError {
    /// Who failed.
    pub ident: TaskIdent,
    /// How.
    pub kind: ErrorKind,
    /// The message: the guest's error, or the trap.
    pub message: String,
    /// The guest's last log lines at error level and stderr (a panic message).
    pub guest_output: Vec<String>,
}

impl fmt::Display for OperatorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.kind {
            ErrorKind::Guest => "failed",
            ErrorKind::Trap => "trapped",
            ErrorKind::Deadline => "ran past its call's deadline",
            ErrorKind::MemoryLimit => "exceeded its memory limit",
            ErrorKind::Quota => "exceeded a quota",
            ErrorKind::Host => "could not run",
        };
        write!(f, "{} {what}: {}", self.ident, self.message)?;
        for line in &self.guest_output {
            write!(f, "\n  guest: {line}")?;
        }
        Ok(())
    }
}

impl std::error::Error for OperatorError {}

impl OperatorError {
    /// A batch more than one call takes (its records past the 4 GiB a
    /// packed batch holds, more than a guest's memory can): a memory limit,
    /// which a dead-letter policy isolates by splitting the batch.
    pub fn batch_too_large(ident: TaskIdent, message: String) -> OperatorError {
        OperatorError {
            ident,
            kind: ErrorKind::MemoryLimit,
            message: format!("{message}: a smaller batch would fit"),
            guest_output: Vec::new(),
        }
    }
}

/// A guest went over one of its quotas: which, the limit, and what it asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct QuotaExceeded {
    /// The quota's name, as configured (`max-emit-records`).
    pub(crate) quota: &'static str,
    /// Its limit.
    pub(crate) limit: u64,
    /// What the guest reached.
    pub(crate) value: u64,
    /// Over what: `in one call`, `in the instance's state`.
    pub(crate) scope: &'static str,
}

impl fmt::Display for QuotaExceeded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} reached {} {}; the limit is {}",
            self.quota, self.value, self.scope, self.limit
        )
    }
}

impl std::error::Error for QuotaExceeded {}
