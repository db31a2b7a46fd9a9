//! Connectors: where a job's records come from (sources) and where they go
//! (sinks), the part every process agrees on.
//!
//! A connector is one file here and one in the worker
//! (`weir_worker::connectors`, which opens it):
//!
//! - its manifest table (a `[[source]]` or `[[sink]]` with its `type`),
//!   read with unknown keys refused, and resolved with the job's parameters
//!   into its **configuration**, which the [`JobGraph`](crate::JobGraph)
//!   carries to the workers;
//! - what the configuration tells the rest of the job
//!   ([`SourceConnector`], [`SinkConnector`]): its records' type, the files
//!   it reads or writes (checked against the directories a cluster grants,
//!   [`crate::access`]), whether it makes its records itself, whether it
//!   commits its output with the checkpoints.
//!
//! The registry is the four enums below ([`SourceTable`], [`SourceConfig`],
//! [`SinkTable`], [`SinkConfig`]): a new connector adds a variant to each of
//! its kind and one arm to each `match` in this file.

pub mod console;
pub mod files;
pub mod generator;
pub mod kafka;
pub mod socket;

use std::collections::BTreeMap;

use weir_types::Type;

use crate::access::Use;
use crate::manifest::{ManifestError, Setting, substitute};

/// What a source's configuration tells the rest of the job.
pub trait SourceConnector {
    /// Its `type` in the manifest.
    fn type_name(&self) -> &'static str;

    /// Its records' type, given the source's `schema` (if any): a source
    /// that makes records of a fixed type refuses a schema; `None` when the
    /// records are untyped JSON.
    fn record_type(&self, schema: Option<&Type>) -> Result<Option<Type>, String>;

    /// Whether it encodes the records it makes (in MessagePack or rows for
    /// the operators that read them) rather than passing JSON through as it
    /// comes; a source with a record type always does.
    fn encodes(&self) -> bool {
        false
    }

    /// The files it reads.
    fn files(&self) -> Vec<&str> {
        Vec::new()
    }

    /// The file whose size, when the job first starts, its splits are cut
    /// from ([`crate::JobGraph::fix_file_sizes`]).
    fn split_file(&self) -> Option<&str> {
        None
    }

    /// The most subtasks it can be read by (a socket is one connection):
    /// a source without its own `parallelism` gets at most this many, and
    /// one that asks for more is refused.
    fn max_parallelism(&self) -> Option<u32> {
        None
    }

    /// Whether its records carry timestamps of their own (a Kafka
    /// message's), which event time uses when the source has a watermark
    /// strategy but no `timestamp` pointer.
    fn timestamps(&self) -> bool {
        false
    }
}

/// What a sink's configuration tells the rest of the job.
pub trait SinkConnector {
    /// Its `type` in the manifest.
    fn type_name(&self) -> &'static str;

    /// The files (or directories) it writes.
    fn files(&self) -> Vec<&str> {
        Vec::new()
    }

    /// The files it reads (a client's certificates).
    fn reads(&self) -> Vec<&str> {
        Vec::new()
    }

    /// Whether, in a job with checkpoints, it writes its output in a
    /// two-phase commit with them (exactly-once): each subtask then has
    /// a sink of its own that the checkpoints' handles name.
    fn commits(&self) -> bool {
        false
    }

    /// Whether a cluster job may replace what is at its files already.
    fn overwrites(&self) -> bool {
        false
    }

    /// Whether each subtask has a sink of its own in every job (a client
    /// connection each), not only when it commits with the checkpoints.
    fn per_subtask(&self) -> bool {
        false
    }
}

/// What resolving a connector's table needs: the element's name (for
/// messages) and the job's parameters.
pub struct Resolve<'a> {
    /// The source's or sink's name.
    pub name: &'a str,
    /// The job's parameters.
    pub params: &'a BTreeMap<String, String>,
}

impl Resolve<'_> {
    /// `text` with the job's parameters applied.
    pub fn text(&self, text: &str) -> Result<String, ManifestError> {
        substitute(text, self.params)
    }

    /// A whole-number setting (`count = 5` or `count = "${n}"`): `None`
    /// when absent or empty; a negative number is refused, naming the key.
    pub fn whole(
        &self,
        key: &str,
        setting: &Option<Setting>,
    ) -> Result<Option<u64>, ManifestError> {
        let Some(setting) = setting else {
            return Ok(None);
        };
        match setting.resolve(&format!("{key} of `{}`", self.name), self.params)? {
            None => Ok(None),
            Some(n) => u64::try_from(n).map(Some).map_err(|_| {
                ManifestError::BadParam(format!(
                    "{key} of `{}` is {n}; it cannot be negative",
                    self.name
                ))
            }),
        }
    }

    /// `host:port` addresses, separated by commas (`key` names the setting
    /// in errors), with the job's parameters applied.
    pub fn addresses(&self, key: &str, text: &str, example: &str) -> Result<String, ManifestError> {
        let addresses = self.text(text)?;
        for a in addresses.split(',') {
            let port = a
                .trim()
                .rsplit_once(':')
                .and_then(|(host, port)| (!host.is_empty()).then_some(port))
                .and_then(|p| p.parse::<u16>().ok());
            if port.is_none_or(|p| p == 0) {
                return Err(self.invalid(
                    key,
                    format_args!("{a:?} is not host:port (for example \"{example}\")"),
                ));
            }
        }
        Ok(addresses)
    }

    /// A table of text settings, the job's parameters applied to each.
    pub fn texts(
        &self,
        table: &BTreeMap<String, String>,
    ) -> Result<BTreeMap<String, String>, ManifestError> {
        table
            .iter()
            .map(|(k, v)| Ok((k.clone(), self.text(v)?)))
            .collect()
    }

    /// An error about this element's `key`.
    pub fn invalid(&self, key: &str, why: impl std::fmt::Display) -> ManifestError {
        ManifestError::Invalid(format!("`{}`: {key} {why}", self.name))
    }
}

/// A `[[source]]` table's connector part: its `type` and that type's keys.
#[derive(Debug, Clone, serde::Deserialize, PartialEq)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum SourceTable {
    /// Each line of a text file is a string record.
    TextFile(files::TextFileTable),
    /// Each line of a file is a JSON value.
    JsonLinesFile(files::JsonLinesFileTable),
    /// Generated records.
    Generator(generator::GeneratorTable),
    /// Lines of text read from a TCP server.
    Socket(socket::SocketTable),
    /// Kafka topics.
    Kafka(kafka::KafkaSourceTable),
}

impl SourceTable {
    /// Its configuration, the job's parameters applied.
    pub fn resolve(&self, r: &Resolve) -> Result<SourceConfig, ManifestError> {
        Ok(match self {
            SourceTable::TextFile(t) => SourceConfig::TextFile(t.resolve(r)?),
            SourceTable::JsonLinesFile(t) => SourceConfig::JsonLinesFile(t.resolve(r)?),
            SourceTable::Generator(t) => SourceConfig::Generator(t.resolve(r)?),
            SourceTable::Socket(t) => SourceConfig::Socket(t.resolve(r)?),
            SourceTable::Kafka(t) => SourceConfig::Kafka(t.resolve(r)?),
        })
    }
}

/// A source with its parameters applied.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum SourceConfig {
    /// Lines of a text file, as strings.
    TextFile(files::TextFile),
    /// Lines of a JSON-lines file, as they are.
    JsonLinesFile(files::JsonLinesFile),
    /// Generated records.
    Generator(generator::Generator),
    /// Lines of text from a TCP server.
    Socket(socket::Socket),
    /// Kafka topics.
    Kafka(kafka::KafkaSource),
}

impl SourceConfig {
    /// What it tells the rest of the job.
    pub fn connector(&self) -> &dyn SourceConnector {
        match self {
            SourceConfig::TextFile(c) => c,
            SourceConfig::JsonLinesFile(c) => c,
            SourceConfig::Generator(c) => c,
            SourceConfig::Socket(c) => c,
            SourceConfig::Kafka(c) => c,
        }
    }
}

/// A `[[sink]]` table's connector part: its `type` and that type's keys.
#[derive(Debug, Clone, serde::Deserialize, PartialEq)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum SinkTable {
    /// Standard output.
    Stdout(console::StdoutTable),
    /// Nowhere (Flink's `blackhole`).
    Discard(console::DiscardTable),
    /// A JSON-lines file, or a directory of part files with checkpoints.
    JsonLinesFile(files::JsonLinesSinkTable),
    /// A Kafka topic.
    Kafka(kafka::KafkaSinkTable),
}

impl SinkTable {
    /// Its configuration, the job's parameters applied.
    pub fn resolve(&self, r: &Resolve) -> Result<SinkConfig, ManifestError> {
        Ok(match self {
            SinkTable::Stdout(_) => SinkConfig::Stdout(console::Stdout),
            SinkTable::Discard(_) => SinkConfig::Discard(console::Discard),
            SinkTable::JsonLinesFile(t) => SinkConfig::JsonLinesFile(t.resolve(r)?),
            SinkTable::Kafka(t) => SinkConfig::Kafka(t.resolve(r)?),
        })
    }
}

/// A sink with its parameters applied.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum SinkConfig {
    /// Standard output.
    Stdout(console::Stdout),
    /// Nowhere: records are counted and dropped.
    Discard(console::Discard),
    /// A JSON-lines file.
    JsonLinesFile(files::JsonLinesSink),
    /// A Kafka topic.
    Kafka(kafka::KafkaSink),
}

impl SinkConfig {
    /// What it tells the rest of the job.
    pub fn connector(&self) -> &dyn SinkConnector {
        match self {
            SinkConfig::Stdout(c) => c,
            SinkConfig::Discard(c) => c,
            SinkConfig::JsonLinesFile(c) => c,
            SinkConfig::Kafka(c) => c,
        }
    }

    /// Whether, in a job with checkpoints, this sink commits its output with
    /// them (exactly-once): see [`SinkConnector::commits`].
    pub fn commits_parts(&self) -> bool {
        self.connector().commits()
    }
}

/// The files a source or sink reaches and how (for the granted-directory
/// check).
pub fn files_of(kind: &crate::VertexKind) -> Vec<(&str, Use)> {
    match kind {
        crate::VertexKind::Source(c) => c
            .connector()
            .files()
            .into_iter()
            .map(|f| (f, Use::Read))
            .collect(),
        crate::VertexKind::Sink(c) => {
            let sink = c.connector();
            let written = sink.files().into_iter().map(|f| (f, Use::Write));
            written
                .chain(sink.reads().into_iter().map(|f| (f, Use::Read)))
                .collect()
        }
        crate::VertexKind::Operator { .. } => Vec::new(),
    }
}
