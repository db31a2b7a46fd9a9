//! Files: the text-file and JSON-lines sources (parallel subtasks read byte
//! ranges of the file, cut from its size when the job first started), and
//! the JSON-lines sink (a directory of part files committed with the
//! checkpoints, or one file written straight through).

use weir_types::Type;

use super::{Resolve, SinkConnector, SourceConnector};
use crate::manifest::ManifestError;

/// `type = "text-file"`: each line of a file becomes a string record.
#[derive(Debug, Clone, serde::Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct TextFileTable {
    /// The file.
    pub path: String,
}

impl TextFileTable {
    pub(super) fn resolve(&self, r: &Resolve) -> Result<TextFile, ManifestError> {
        Ok(TextFile {
            path: r.text(&self.path)?,
        })
    }
}

/// Lines of a text file, as strings.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TextFile {
    /// The file.
    pub path: String,
}

impl SourceConnector for TextFile {
    fn type_name(&self) -> &'static str {
        "text-file"
    }

    fn record_type(&self, schema: Option<&Type>) -> Result<Option<Type>, String> {
        match schema {
            None => Ok(Some(Type::String)),
            Some(_) => Err(
                "`schema` is for JSON-lines sources; a text-file source's records are string"
                    .into(),
            ),
        }
    }

    fn encodes(&self) -> bool {
        true
    }

    fn files(&self) -> Vec<&str> {
        vec![&self.path]
    }

    fn split_file(&self) -> Option<&str> {
        Some(&self.path)
    }
}

/// `type = "json-lines-file"`: each line of a file is a JSON value.
#[derive(Debug, Clone, serde::Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct JsonLinesFileTable {
    /// The file.
    pub path: String,
    /// Keep reading lines appended to the file, as `tail -f` does: the
    /// source never ends.
    #[serde(default)]
    pub follow: bool,
}

impl JsonLinesFileTable {
    pub(super) fn resolve(&self, r: &Resolve) -> Result<JsonLinesFile, ManifestError> {
        Ok(JsonLinesFile {
            path: r.text(&self.path)?,
            follow: self.follow,
        })
    }
}

/// Lines of a JSON-lines file, as they are (or read into the source's
/// schema).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct JsonLinesFile {
    /// The file.
    pub path: String,
    /// Keep reading what is appended (the last subtask does); never ends.
    #[serde(default)]
    pub follow: bool,
}

impl SourceConnector for JsonLinesFile {
    fn type_name(&self) -> &'static str {
        "json-lines-file"
    }

    fn record_type(&self, schema: Option<&Type>) -> Result<Option<Type>, String> {
        Ok(schema.cloned())
    }

    fn files(&self) -> Vec<&str> {
        vec![&self.path]
    }

    fn split_file(&self) -> Option<&str> {
        Some(&self.path)
    }
}

/// `type = "json-lines-file"` as a sink.
#[derive(Debug, Clone, serde::Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct JsonLinesSinkTable {
    /// The file.
    pub path: String,
    /// On a cluster, what to do when the file (or a directory with files)
    /// is there already: `create` (default) refuses the job, `overwrite`
    /// replaces it. `weir run` always replaces it.
    #[serde(default)]
    pub mode: Option<String>,
}

impl JsonLinesSinkTable {
    pub(super) fn resolve(&self, r: &Resolve) -> Result<JsonLinesSink, ManifestError> {
        Ok(JsonLinesSink {
            path: r.text(&self.path)?,
            overwrite: match self.mode.as_deref() {
                None | Some("create") => false,
                Some("overwrite") => true,
                Some(other) => {
                    return Err(ManifestError::Invalid(format!(
                        "sink `{}`: mode {other:?} is not \"create\" or \"overwrite\"",
                        r.name
                    )));
                }
            },
        })
    }
}

/// A JSON-lines file sink.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct JsonLinesSink {
    /// The file.
    pub path: String,
    /// Whether a cluster job may replace what is at `path` already (the
    /// manifest's `mode = "overwrite"`).
    #[serde(default)]
    pub overwrite: bool,
}

impl SinkConnector for JsonLinesSink {
    fn type_name(&self) -> &'static str {
        "json-lines-file"
    }

    fn files(&self) -> Vec<&str> {
        vec![&self.path]
    }

    /// A file that names no device (`/dev/null` and the like are written
    /// straight through) is a directory of part files.
    fn commits(&self) -> bool {
        !crate::access::SINK_DEVICES.contains(&self.path.as_str())
    }

    fn overwrites(&self) -> bool {
        self.overwrite
    }
}
