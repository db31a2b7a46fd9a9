//! The console sinks: standard output, and `discard` (nowhere).

use super::SinkConnector;

/// `type = "stdout"`: no keys.
#[derive(Debug, Clone, serde::Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct StdoutTable {}

/// `type = "discard"`: no keys.
#[derive(Debug, Clone, serde::Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DiscardTable {}

/// One line per record value, on standard output.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Stdout;

impl SinkConnector for Stdout {
    fn type_name(&self) -> &'static str {
        "stdout"
    }
}

/// Drops every record (Flink's `blackhole`): for measuring a job without
/// the cost of writing its output.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Discard;

impl SinkConnector for Discard {
    fn type_name(&self) -> &'static str {
        "discard"
    }
}
