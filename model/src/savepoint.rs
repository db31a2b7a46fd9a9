//! Savepoints: a job's state, taken when its user asks, in a directory of
//! its own that outlives the job and starts another one — with another
//! parallelism, another state backend or a new version of its code.
//!
//! A savepoint is **portable** and **self-contained**: its keyed state is
//! in the canonical format (one file per operator subtask, the same for
//! every backend, every entry with its key group), and its `_metadata`
//! names operators by name, not by position in one job's graph:
//!
//! ```text
//! <dir>/_metadata                       SavepointMetadata, JSON
//! <dir>/state/<operator>-<subtask>.bin  canonical keyed state of one subtask
//! ```
//!
//! A job started from it gets each operator's state by name (an operator
//! of the new job that the savepoint does not know starts empty; state of
//! the savepoint that no operator claims is refused unless the submission
//! allows it), each subtask the key groups it owns, each source every
//! split's position (a connector's splits are units of their own), and
//! each sink what the savepoint's sinks pre-committed (a restore commits it
//! again; commits are idempotent).

use serde::{Deserialize, Serialize};

use crate::checkpoint::SplitPosition;

/// The metadata's file name in a savepoint's directory.
pub const METADATA: &str = "_metadata";

/// The directory of a savepoint (or retained checkpoint) named by its
/// directory or, as Flink allows, by its `_metadata` file.
///
/// ```
/// use std::path::Path;
/// let dir = tempfile::tempdir().unwrap();
/// std::fs::write(dir.path().join("_metadata"), b"{}").unwrap();
/// let file = dir.path().join("_metadata");
/// assert_eq!(weir_model::savepoint::directory_of(&file), dir.path());
/// assert_eq!(weir_model::savepoint::directory_of(dir.path()), dir.path());
/// ```
pub fn directory_of(path: &std::path::Path) -> &std::path::Path {
    match path.parent() {
        Some(dir) if path.file_name() == Some(METADATA.as_ref()) && path.is_file() => dir,
        _ => path,
    }
}

/// The name of a canonical state file in an operator's snapshot directory
/// (`weir_state::canonical`).
pub const STATE_FILE: &str = "state.bin";

/// What the metadata's `format` says.
pub const FORMAT: &str = "weir-savepoint";

/// The version of the layout this build writes and reads.
pub const VERSION: u32 = 1;

/// A savepoint's `_metadata`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavepointMetadata {
    /// Always [`FORMAT`]: what tells a savepoint from another file.
    pub format: String,
    /// The layout's version.
    pub version: u32,
    /// The job it was taken of.
    pub job: String,
    /// That job's name.
    pub job_name: String,
    /// The checkpoint id it was taken as: a job started from it numbers
    /// its checkpoints after it.
    pub checkpoint: u64,
    /// When it was triggered, ms since the epoch.
    pub taken_at_ms: i64,
    /// The job's number of key groups: a job restored from it must have
    /// the same (its keys' groups depend on it).
    pub max_parallelism: u32,
    /// Taken to stop the job (its sinks committed what it holds).
    #[serde(default)]
    pub stopped: bool,
    /// The codec its operators' state values are in (`msgpack`, `json`):
    /// a job restored from it must keep state in the same.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_codec: Option<crate::codec::Codec>,
    /// What each vertex of the job held, by name.
    pub vertices: Vec<SavepointVertex>,
}

/// What one vertex (source, operator or sink) held.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavepointVertex {
    /// The vertex's name in the job (how a new job claims it).
    pub name: String,
    /// `source`, `operator` or `sink`.
    pub role: String,
    /// Its parallelism when the savepoint was taken.
    pub parallelism: u32,
    /// A source's splits' positions, all of its subtasks'.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub positions: Vec<SplitPosition>,
    /// A sink's pre-commits, per subtask.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sinks: Vec<SinkPreCommit>,
    /// An operator's keyed state, per subtask that had some.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub state: Vec<StateFileRef>,
    /// A sink's connector and the files it writes (`json-lines-file`
    /// and its path): a sink of the new job takes the pre-commits only
    /// when it writes the same.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sink_target: Option<String>,
    /// A window operator's windows (assigner, time, allowed lateness), as
    /// text: a job restored from it must keep them, its stored windows and
    /// their timers being for them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<String>,
    /// What a window operator's windows keep (an aggregate's accumulators,
    /// a built-in's, or the records themselves), as text: a job restored
    /// from it must keep the same, its stored windows holding that.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_contents: Option<String>,
    /// How a keyed operator's keys are encoded (`MessagePack`, `JSON
    /// text`), as text: a job restored from it must key its records the
    /// same, its keyed state being stored under those keys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keys: Option<String>,
}

impl SavepointVertex {
    /// Whether it holds anything a new job would restore.
    pub fn holds_state(&self) -> bool {
        !self.positions.is_empty() || !self.sinks.is_empty() || !self.state.is_empty()
    }
}

/// What one sink subtask pre-committed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SinkPreCommit {
    /// The subtask.
    pub subtask: u32,
    /// Its handle, as the sink made it.
    pub handle: Vec<u8>,
}

/// One operator subtask's keyed state: a canonical file of the savepoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateFileRef {
    /// The subtask (of the vertex's parallelism then): its key groups.
    pub subtask: u32,
    /// The file, relative to the savepoint's directory.
    pub file: String,
    /// Bytes.
    pub size: u64,
    /// The hex sha256 of its bytes: a restore refuses a file that changed.
    pub sha256: String,
}

impl SavepointMetadata {
    /// Parse `_metadata`, or say why it is not a savepoint's.
    pub fn parse(bytes: &[u8]) -> Result<SavepointMetadata, String> {
        let value: serde_json::Value = serde_json::from_slice(bytes)
            .map_err(|e| format!("its {METADATA} is not JSON: {e}"))?;
        if value.get("format").and_then(|f| f.as_str()) != Some(FORMAT) {
            return Err(format!(
                "its {METADATA} is not a Weir savepoint's (no \"format\": \"{FORMAT}\")"
            ));
        }
        let m: SavepointMetadata = serde_json::from_value(value)
            .map_err(|e| format!("its {METADATA} is not a valid savepoint's: {e}"))?;
        if m.version != VERSION {
            return Err(format!(
                "it is a savepoint of layout version {}; this Weir reads version {VERSION}",
                m.version
            ));
        }
        m.check().map(|()| m)
    }

    /// What every reader relies on: parallelisms within the max
    /// parallelism, subtasks within their parallelism, state files named
    /// as a savepoint names them (inside its directory) with their sha256.
    fn check(&self) -> Result<(), String> {
        if self.checkpoint > 1 << 53 {
            return Err(format!(
                "its {METADATA} gives checkpoint id {}",
                self.checkpoint
            ));
        }
        let max = self.max_parallelism;
        if max == 0 || max > crate::keygroup::MAX_MAX_PARALLELISM {
            return Err(format!("its {METADATA} gives a max parallelism of {max}"));
        }
        for v in &self.vertices {
            let bad = |why: String| Err(format!("its {METADATA}: vertex `{}`: {why}", v.name));
            if v.parallelism == 0 || v.parallelism > max {
                return bad(format!("a parallelism of {}", v.parallelism));
            }
            for f in &v.state {
                if f.subtask >= v.parallelism {
                    return bad(format!(
                        "state of subtask {} of {}",
                        f.subtask, v.parallelism
                    ));
                }
                let safe = f.file.strip_prefix("state/").is_some_and(|rest| {
                    rest.ends_with(".bin")
                        && !rest.is_empty()
                        && rest
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
                        && !rest.contains("..")
                });
                if !safe {
                    return bad(format!("a state file named {:?}", f.file));
                }
                if f.sha256.len() != 64 {
                    return bad(format!("no sha256 for {}", f.file));
                }
            }
            if v.sinks.iter().any(|s| s.subtask >= v.parallelism) {
                return bad("a sink pre-commit of a subtask beyond its parallelism".into());
            }
        }
        Ok(())
    }

    /// Every state file it holds, relative to its directory.
    pub fn files(&self) -> impl Iterator<Item = &StateFileRef> {
        self.vertices.iter().flat_map(|v| v.state.iter())
    }

    /// Bytes of state it holds.
    pub fn state_bytes(&self) -> u64 {
        self.files().map(|f| f.size).sum()
    }
}

/// The file name of subtask `subtask` of operator `name` in a savepoint:
/// the name with anything but letters, digits, `-` and `_` replaced, and
/// a hash of the name (two names that read alike keep files of their own).
pub fn state_file_name(name: &str, subtask: u32) -> String {
    let safe: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let hash = xxhash_rust::xxh3::xxh3_64(name.as_bytes()) as u32;
    format!("state/{safe}-{hash:08x}-{subtask}.bin")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_savepoints_metadata_parses() {
        let m = SavepointMetadata {
            format: FORMAT.into(),
            version: VERSION,
            job: "j".into(),
            job_name: "wc".into(),
            checkpoint: 7,
            taken_at_ms: 1,
            max_parallelism: 128,
            stopped: true,
            state_codec: None,
            vertices: vec![SavepointVertex {
                name: "count".into(),
                role: "operator".into(),
                parallelism: 2,
                positions: Vec::new(),
                sinks: Vec::new(),
                state: vec![StateFileRef {
                    subtask: 1,
                    file: state_file_name("count", 1),
                    size: 3,
                    sha256: "0".repeat(64),
                }],
                sink_target: None,
                window: None,
                window_contents: None,
                keys: None,
            }],
        };
        let bytes = serde_json::to_vec(&m).unwrap();
        assert_eq!(SavepointMetadata::parse(&bytes).unwrap(), m);
        assert_eq!(m.state_bytes(), 3);
        let e = SavepointMetadata::parse(br#"{"job": "j", "id": 3}"#).unwrap_err();
        assert!(e.contains("not a Weir savepoint"), "{e}");
        assert!(SavepointMetadata::parse(b"nope").is_err());
        let newer = String::from_utf8(bytes)
            .unwrap()
            .replace("\"version\":1", "\"version\":9");
        assert!(
            SavepointMetadata::parse(newer.as_bytes())
                .unwrap_err()
                .contains("version 9")
        );
        assert!(state_file_name("a b/c", 0).starts_with("state/a_b_c-"));
        assert_ne!(state_file_name("a.b", 0), state_file_name("a_b", 0));
        // What the files are called, and where the subtasks are, is checked.
        let mut bad = m.clone();
        bad.vertices[0].state[0].file = "../../etc/passwd".into();
        let e = SavepointMetadata::parse(&serde_json::to_vec(&bad).unwrap()).unwrap_err();
        assert!(e.contains("state file named"), "{e}");
        let mut bad = m.clone();
        bad.vertices[0].parallelism = 0;
        assert!(SavepointMetadata::parse(&serde_json::to_vec(&bad).unwrap()).is_err());
        let mut bad = m.clone();
        bad.vertices[0].state[0].subtask = 2;
        assert!(SavepointMetadata::parse(&serde_json::to_vec(&bad).unwrap()).is_err());
    }
}
