//! The coordinator's errors: what kind of failure (the request is invalid,
//! a resource is missing or taken, the coordinator failed), a stable
//! machine-readable code and a message for people. The REST API
//! ([`crate::rest`]) maps the kind to an HTTP status and answers
//! `{"code": "...", "message": "..."}` ([`ErrorBody`]).

use serde::Serialize;

/// What kind of failure an error is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The request is malformed or names something that cannot be.
    Invalid,
    /// The caller did not say who it is (no token, a wrong one).
    Unauthenticated,
    /// The caller may not do this.
    Forbidden,
    /// No such resource.
    NotFound,
    /// The resource is taken or in use (a sink another job owns, a bundle a
    /// job uses).
    Conflict,
    /// The request is larger than the coordinator takes.
    TooLarge,
    /// Well-formed, but it cannot be used (a component that does not load,
    /// a path no worker grants).
    Unprocessable,
    /// The coordinator failed (its storage, a worker it deployed to);
    /// retrying may help.
    Internal,
}

/// An error of the coordinator.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct CoordinatorError {
    /// What kind of failure.
    pub kind: ErrorKind,
    /// Stable code, e.g. `bundle_invalid`.
    pub code: &'static str,
    /// What went wrong and, where it helps, what to do.
    pub message: String,
}

/// The JSON body of an error answer.
#[derive(Debug, Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct ErrorBody {
    /// Stable code.
    pub code: String,
    /// Message for people.
    pub message: String,
}

impl CoordinatorError {
    /// An error of `kind` with `code` and `message`.
    pub fn new(kind: ErrorKind, code: &'static str, message: impl Into<String>) -> Self {
        CoordinatorError {
            kind,
            code,
            message: message.into(),
        }
    }

    /// The request is malformed.
    pub fn invalid(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Invalid, code, message)
    }

    /// No such resource.
    pub fn not_found(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(ErrorKind::NotFound, code, message)
    }

    /// Taken or in use.
    pub fn conflict(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Conflict, code, message)
    }

    /// Well-formed, but it cannot be used.
    pub fn unprocessable(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Unprocessable, code, message)
    }

    /// The coordinator failed (storage); retrying may help.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Internal, "internal", message)
    }

    /// A job that cannot be planned: operators whose types do not fit are
    /// an invalid request (`type_mismatch`), anything else unprocessable
    /// with `code`.
    pub fn of_plan(code: &'static str, e: weir_model::ManifestError) -> Self {
        match e {
            weir_model::ManifestError::TypeMismatch(_) => {
                Self::invalid("type_mismatch", e.to_string())
            }
            e => Self::unprocessable(code, e.to_string()),
        }
    }
}
