//! Kafka: a source that reads topics (its splits are the topics'
//! partitions, their offsets kept in Weir's checkpoints, as Flink's
//! `KafkaSource` does) and a sink that writes a topic (at-least-once:
//! flushed on every checkpoint, through the idempotent producer).

use std::collections::BTreeMap;

use weir_types::Type;

use super::{Resolve, SinkConnector, SourceConnector};
use crate::manifest::{ManifestError, Setting};

/// `type = "kafka"` as a source.
#[derive(Debug, Clone, serde::Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct KafkaSourceTable {
    /// The brokers to start from (`bootstrap.servers`): `host:port[,host:port…]`.
    pub brokers: String,
    /// The topics it reads.
    #[serde(default)]
    pub topics: Option<Vec<String>>,
    /// A regular expression: every topic whose whole name matches, now and
    /// as they are made (instead of `topics`).
    #[serde(default)]
    pub topic_pattern: Option<String>,
    /// `json` (default: each message's value is a JSON value, read into the
    /// source's `schema` if given), `text` (a string) or `msgpack`.
    #[serde(default)]
    pub format: Option<String>,
    /// Where a partition without a checkpointed offset starts: `earliest`
    /// (default), `latest`, `committed` (the consumer group's offsets,
    /// earliest where it has none) or `timestamp` (the first message at or
    /// after `start-timestamp-ms`).
    #[serde(default)]
    pub start: Option<String>,
    /// With `start = "timestamp"`: ms since the epoch.
    #[serde(default)]
    pub start_timestamp_ms: Option<Setting>,
    /// `latest`: read up to the end each partition had when the job
    /// started, then end (a bounded input, Flink's `setBounded`).
    #[serde(default)]
    pub stop: Option<String>,
    /// The consumer group whose committed offsets `start = "committed"`
    /// begins at, and to which completed checkpoints' offsets are
    /// committed (for monitoring: the job resumes from its checkpoints).
    /// Default `weir-<source name>`.
    #[serde(default)]
    pub group_id: Option<String>,
    /// Commit a completed checkpoint's offsets to the group (default true;
    /// Flink's `commit.offsets.on.checkpoint`).
    #[serde(default)]
    pub commit_offsets: Option<bool>,
    /// How often each subtask looks for new partitions and topics, ms
    /// (default 10000; 0: never).
    #[serde(default)]
    pub discovery_interval_ms: Option<Setting>,
    /// Each record is `{topic, partition, offset, timestamp, key, headers,
    /// value}` instead of the value alone.
    #[serde(default)]
    pub metadata: bool,
    /// Client settings passed to librdkafka as they are
    /// (`{ "security.protocol" = "ssl", ... }`).
    #[serde(default)]
    pub properties: BTreeMap<String, String>,
}

/// How a Kafka source reads its messages' values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ValueFormat {
    /// A JSON value.
    Json,
    /// A string (UTF-8; invalid bytes replaced).
    Text,
    /// A MessagePack value.
    Msgpack,
}

/// Where a partition without a checkpointed offset starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum StartAt {
    /// Its first message.
    Earliest,
    /// After its last message when the source starts.
    Latest,
    /// The consumer group's committed offset (earliest without one).
    Committed,
    /// The first message at or after this time (ms since the epoch).
    Timestamp(i64),
}

impl KafkaSourceTable {
    pub(super) fn resolve(&self, r: &Resolve) -> Result<KafkaSource, ManifestError> {
        let brokers = r.addresses("brokers", &self.brokers, "127.0.0.1:9092")?;
        let topics = match (&self.topics, &self.topic_pattern) {
            (Some(t), None) if !t.is_empty() => {
                Topics::Names(t.iter().map(|t| r.text(t)).collect::<Result<Vec<_>, _>>()?)
            }
            (None, Some(p)) => {
                let p = r.text(p)?;
                regex_check(&p).map_err(|e| r.invalid("topic-pattern", e))?;
                Topics::Pattern(p)
            }
            (Some(_), Some(_)) => {
                return Err(r.invalid("topics", "and topic-pattern cannot both be given"));
            }
            _ => {
                return Err(r.invalid(
                    "topics",
                    "is missing: a Kafka source reads `topics = [...]` or a `topic-pattern`",
                ));
            }
        };
        let format = match self
            .format
            .as_deref()
            .map(|f| r.text(f))
            .transpose()?
            .as_deref()
        {
            None | Some("json") => ValueFormat::Json,
            Some("text") => ValueFormat::Text,
            Some("msgpack") => ValueFormat::Msgpack,
            Some(other) => {
                return Err(r.invalid(
                    "format",
                    format_args!("{other:?} is not \"json\", \"text\" or \"msgpack\""),
                ));
            }
        };
        let at = r.whole("start-timestamp-ms", &self.start_timestamp_ms)?;
        let start = match (
            self.start
                .as_deref()
                .map(|s| r.text(s))
                .transpose()?
                .as_deref(),
            at,
        ) {
            (None | Some("earliest"), None) => StartAt::Earliest,
            (Some("latest"), None) => StartAt::Latest,
            (Some("committed"), None) => StartAt::Committed,
            (Some("timestamp"), Some(t)) => StartAt::Timestamp(t as i64),
            (Some("timestamp"), None) => {
                return Err(r.invalid("start", "= \"timestamp\" needs `start-timestamp-ms`"));
            }
            (None | Some("earliest" | "latest" | "committed"), Some(_)) => {
                return Err(r.invalid("start-timestamp-ms", "is for `start = \"timestamp\"`"));
            }
            (Some(other), _) => {
                return Err(r.invalid(
                    "start",
                    format_args!(
                        "{other:?} is not \"earliest\", \"latest\", \"committed\" or \"timestamp\""
                    ),
                ));
            }
        };
        let bounded = match self
            .stop
            .as_deref()
            .map(|s| r.text(s))
            .transpose()?
            .as_deref()
        {
            None | Some("never") => false,
            Some("latest") => true,
            Some(other) => {
                return Err(r.invalid(
                    "stop",
                    format_args!("{other:?} is not \"latest\" or \"never\""),
                ));
            }
        };
        let group_id = match &self.group_id {
            Some(g) => r.text(g)?,
            None => format!("weir-{}", r.name),
        };
        let properties = properties(r, &self.properties)?;
        Ok(KafkaSource {
            brokers,
            topics,
            format,
            start,
            bounded,
            group_id,
            commit_offsets: self.commit_offsets.unwrap_or(true),
            discovery_interval_ms: r
                .whole("discovery-interval-ms", &self.discovery_interval_ms)?
                .unwrap_or(10_000),
            metadata: self.metadata,
            properties,
        })
    }
}

/// `true`, a default.
fn yes() -> bool {
    true
}

/// Client settings a job may not give: they load code or run commands on
/// the workers.
const REFUSED_PROPERTIES: [&str; 3] = [
    "plugin.library.paths",
    "sasl.kerberos.kinit.cmd",
    "ssl.engine.location",
];

/// The job's librdkafka settings, checked: none that loads code or runs a
/// command. Settings that name files (`ssl.ca.location`, …) are checked
/// against the directories a cluster grants, as file paths are.
fn properties(
    r: &Resolve,
    table: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, ManifestError> {
    let properties = r.texts(table)?;
    for k in properties.keys() {
        if REFUSED_PROPERTIES.contains(&k.as_str()) {
            return Err(r.invalid(
                "properties",
                format_args!("may not set `{k}`: it loads code or runs a command on the workers"),
            ));
        }
        if k == "bootstrap.servers" || k == "group.id" {
            return Err(r.invalid(
                "properties",
                format_args!("may not set `{k}`: it is the source's or sink's own setting"),
            ));
        }
    }
    Ok(properties)
}

/// The files settings name: every `*.location` and the Kerberos keytab.
fn property_files(properties: &BTreeMap<String, String>) -> Vec<&str> {
    properties
        .iter()
        .filter(|(k, _)| k.ends_with(".location") || k.as_str() == "sasl.kerberos.keytab")
        .map(|(_, v)| v.as_str())
        .collect()
}

/// Whether `pattern` is a regular expression the worker can use.
fn regex_check(pattern: &str) -> Result<(), String> {
    regex::Regex::new(pattern)
        .map(|_| ())
        .map_err(|e| format!("{pattern:?} is not a regular expression: {e}"))
}

/// Which topics a Kafka source reads.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Topics {
    /// These.
    Names(Vec<String>),
    /// Every topic whose whole name matches this regular expression.
    Pattern(String),
}

/// A Kafka source.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct KafkaSource {
    /// `bootstrap.servers`.
    pub brokers: String,
    /// What it reads.
    pub topics: Topics,
    /// How values are read.
    pub format: ValueFormat,
    /// Where partitions without a checkpointed offset start.
    pub start: StartAt,
    /// Ends at the partitions' ends when the job started.
    pub bounded: bool,
    /// The consumer group.
    pub group_id: String,
    /// Whether completed checkpoints' offsets are committed to the group.
    #[serde(default = "yes")]
    pub commit_offsets: bool,
    /// How often subtasks look for new partitions, ms; 0: never.
    pub discovery_interval_ms: u64,
    /// Records carry the message's metadata around its value.
    pub metadata: bool,
    /// librdkafka settings.
    pub properties: BTreeMap<String, String>,
}

impl SourceConnector for KafkaSource {
    fn type_name(&self) -> &'static str {
        "kafka"
    }

    fn record_type(&self, schema: Option<&Type>) -> Result<Option<Type>, String> {
        match (self.format, self.metadata, schema) {
            (_, true, Some(_)) => Err(
                "`schema` is for the values alone; with `metadata = true` records are JSON".into(),
            ),
            (_, true, None) => Ok(None),
            (ValueFormat::Text, false, None) => Ok(Some(Type::String)),
            (ValueFormat::Text, false, Some(_)) => Err(
                "`schema` is for `format = \"json\"`; a text source's records are string".into(),
            ),
            (ValueFormat::Json, false, schema) => Ok(schema.cloned()),
            (ValueFormat::Msgpack, false, Some(_)) => {
                Err("`schema` is for `format = \"json\"`".into())
            }
            (ValueFormat::Msgpack, false, None) => Ok(None),
        }
    }

    fn encodes(&self) -> bool {
        self.format == ValueFormat::Text && !self.metadata
    }

    fn timestamps(&self) -> bool {
        true
    }

    fn files(&self) -> Vec<&str> {
        property_files(&self.properties)
    }
}

/// `type = "kafka"` as a sink.
#[derive(Debug, Clone, serde::Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct KafkaSinkTable {
    /// `bootstrap.servers`.
    pub brokers: String,
    /// The topic every record goes to.
    #[serde(default)]
    pub topic: Option<String>,
    /// A JSON pointer to a string field naming each record's topic
    /// (instead of `topic`).
    #[serde(default)]
    pub topic_field: Option<String>,
    /// A JSON pointer to the field that is each message's key (a string as
    /// it is, anything else as JSON); no key if absent.
    #[serde(default)]
    pub key_field: Option<String>,
    /// Client settings passed to librdkafka as they are.
    #[serde(default)]
    pub properties: BTreeMap<String, String>,
}

impl KafkaSinkTable {
    pub(super) fn resolve(&self, r: &Resolve) -> Result<KafkaSink, ManifestError> {
        let pointer = |key: &str, p: &Option<String>| -> Result<Option<String>, ManifestError> {
            let Some(p) = p else { return Ok(None) };
            let p = r.text(p)?;
            if !p.starts_with('/') {
                return Err(r.invalid(
                    key,
                    format_args!("{p:?} is not a JSON pointer such as \"/user\""),
                ));
            }
            Ok(Some(p))
        };
        let topic = match (&self.topic, pointer("topic-field", &self.topic_field)?) {
            (Some(t), None) => SinkTopic::Fixed(r.text(t)?),
            (None, Some(p)) => SinkTopic::Field(p),
            (Some(_), Some(_)) => {
                return Err(r.invalid("topic", "and topic-field cannot both be given"));
            }
            (None, None) => {
                return Err(r.invalid(
                    "topic",
                    "is missing: a Kafka sink writes to a `topic` or the one a `topic-field` names",
                ));
            }
        };
        let properties = properties(r, &self.properties)?;
        Ok(KafkaSink {
            brokers: r.addresses("brokers", &self.brokers, "127.0.0.1:9092")?,
            topic,
            key_field: pointer("key-field", &self.key_field)?,
            properties,
        })
    }
}

/// Where a Kafka sink's records go.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum SinkTopic {
    /// This topic.
    Fixed(String),
    /// The topic named by the string at this pointer of each record.
    Field(String),
}

/// A Kafka sink.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct KafkaSink {
    /// `bootstrap.servers`.
    pub brokers: String,
    /// Where records go.
    pub topic: SinkTopic,
    /// The pointer of each message's key.
    pub key_field: Option<String>,
    /// librdkafka settings.
    pub properties: BTreeMap<String, String>,
}

impl SinkConnector for KafkaSink {
    fn type_name(&self) -> &'static str {
        "kafka"
    }

    /// Each subtask has its own producer, flushed on every checkpoint.
    fn per_subtask(&self) -> bool {
        true
    }

    fn reads(&self) -> Vec<&str> {
        property_files(&self.properties)
    }
}
