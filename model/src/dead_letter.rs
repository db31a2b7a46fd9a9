//! Records that cannot be processed: a source's format cannot decode one
//! (bad JSON, a line that does not fit the source's schema), or an
//! operator fails on one (its guest returns an error, panics, runs past its
//! deadline or out of memory).
//!
//! By default (`on-error = "fail"`) the task fails, and the job restarts
//! from its latest checkpoint — where the same record fails again, until
//! the restart strategy gives up. A source or an operator may instead
//! **skip** such records (`on-error = "skip"`: dropped, counted and
//! logged) or send each to its **dead-letter output** (`on-error =
//! "dead-letter"`): a side output named [`DEAD_LETTER`] whose records are
//! [`Letter`]s, JSON objects holding the error, where the record came from
//! and the record itself. The job's `[dead-letter]` table is a sink (of any
//! type) that reads the dead-letter outputs of all of them; a sink or an
//! operator may also read `name:dead-letter` like any side output.
//!
//! An operator's call handles a batch, and a failed call leaves nothing
//! behind (its outputs, state and timer changes are applied only when it
//! succeeds): the runtime calls it again on each half of the batch, and on
//! the halves of a half that fails, until the records that fail are alone;
//! they become dead letters and every other record is processed once, in
//! order. A **budget** bounds how many records a subtask may reject: more
//! than `max-errors-per-minute` (default
//! [`DEFAULT_MAX_ERRORS_PER_MINUTE`]) within any minute fails the task — a
//! broken operator or a wrong format is then not turned into a stream of
//! dead letters.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::manifest::{ManifestError, Setting};

/// The name of the side output that carries a vertex's dead letters, and
/// of the sink vertex the job's `[dead-letter]` table makes.
pub const DEAD_LETTER: &str = "dead-letter";

/// Records a subtask may reject (skip or send to its dead-letter output)
/// within a minute, unless the manifest says otherwise.
pub const DEFAULT_MAX_ERRORS_PER_MINUTE: u64 = 100;

/// What a source or an operator does with a record it cannot process.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OnError {
    /// The task fails (and the job restarts, as its restart strategy says).
    #[default]
    Fail,
    /// The record is dropped, counted and logged.
    Skip,
    /// The record goes to the dead-letter output, with the error.
    DeadLetter,
}

impl OnError {
    /// Its name in the manifest.
    pub fn name(self) -> &'static str {
        match self {
            OnError::Fail => "fail",
            OnError::Skip => "skip",
            OnError::DeadLetter => "dead-letter",
        }
    }
}

/// A vertex's handling of records it cannot process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct ErrorPolicy {
    /// What happens to such a record.
    pub on_error: OnError,
    /// How many a subtask may reject within any minute before it fails.
    pub max_per_minute: u64,
}

impl Default for ErrorPolicy {
    fn default() -> Self {
        ErrorPolicy {
            on_error: OnError::Fail,
            max_per_minute: DEFAULT_MAX_ERRORS_PER_MINUTE,
        }
    }
}

impl ErrorPolicy {
    /// The policy of the manifest's element `name`: its `on-error` and
    /// `max-errors-per-minute`, parameters applied.
    pub fn resolve(
        name: &str,
        on_error: Option<OnError>,
        max_per_minute: Option<&Setting>,
        params: &BTreeMap<String, String>,
    ) -> Result<ErrorPolicy, ManifestError> {
        let on_error = on_error.unwrap_or_default();
        let max = match max_per_minute {
            None => None,
            Some(s) => s.resolve(&format!("max-errors-per-minute of `{name}`"), params)?,
        };
        if max.is_some() && on_error == OnError::Fail {
            return Err(ManifestError::Invalid(format!(
                "`{name}` has `max-errors-per-minute` but no `on-error` (\"skip\" or \"dead-letter\"): it fails on its first error"
            )));
        }
        let max_per_minute = match max {
            None => DEFAULT_MAX_ERRORS_PER_MINUTE,
            Some(n) if n >= 1 => n as u64,
            Some(n) => {
                return Err(ManifestError::BadParam(format!(
                    "max-errors-per-minute of `{name}` is {n}; it must be at least 1"
                )));
            }
        };
        Ok(ErrorPolicy {
            on_error,
            max_per_minute,
        })
    }

    /// Whether it fails on the first error (the default).
    pub fn fails(&self) -> bool {
        self.on_error == OnError::Fail
    }
}

/// A dead letter: one record that could not be processed, as a JSON
/// object in the dead-letter output.
///
/// ```
/// use weir_model::dead_letter::Letter;
/// let mut l = Letter::new("parse", "operator", 1, "failed: bad amount".into(), 1_700_000_000_000);
/// l.record = Letter::json(br#"{"amount":-1}"#);
/// assert_eq!(
///     l.to_json(),
///     r#"{"error":"failed: bad amount","operator":"parse","subtask":1,"record":{"amount":-1},"time":1700000000000}"#
/// );
/// ```
#[derive(Debug, Serialize)]
pub struct Letter {
    /// Why the record was rejected.
    pub error: String,
    /// The source that could not decode it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The operator that failed on it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub operator: Option<String>,
    /// The subtask that rejected it.
    pub subtask: u32,
    /// A source's split it came from: a file, `topic/partition`, an
    /// address.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub split: Option<String>,
    /// Where in the split: a file's byte offset, a Kafka offset.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
    /// The record, when it is JSON (an operator's input record).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub record: Option<Box<RawValue>>,
    /// The record's bytes as text, when they are not a record (what a
    /// source could not decode; bytes that are not UTF-8 replaced).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub raw: Option<String>,
    /// Its key as text (a Kafka message's key).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Its timestamp, ms since the epoch, when it had one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<i64>,
    /// When it was rejected (processing time, ms since the epoch).
    pub time: i64,
}

impl Letter {
    /// A letter from `who` (`"source"` or `"operator"`) `name`'s subtask.
    pub fn new(name: &str, who: &str, subtask: u32, error: String, time: i64) -> Letter {
        let named = |w: &str| (who == w).then(|| name.to_owned());
        Letter {
            error,
            source: named("source"),
            operator: named("operator"),
            subtask,
            split: None,
            offset: None,
            record: None,
            raw: None,
            key: None,
            timestamp: None,
            time,
        }
    }

    /// `json` as a letter's record, when it is one JSON value.
    pub fn json(json: &[u8]) -> Option<Box<RawValue>> {
        let text = std::str::from_utf8(json).ok()?.trim();
        if text.contains('\n') {
            // A dead-letter output is JSON lines: one line per letter.
            let value: serde_json::Value = serde_json::from_str(text).ok()?;
            return RawValue::from_string(value.to_string()).ok();
        }
        RawValue::from_string(text.to_owned()).ok()
    }

    /// The letter as one line of JSON.
    pub fn to_json(&self) -> String {
        // Only strings, numbers and valid raw JSON: serializing cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }
}
