//! The socket source: lines of text read from a TCP server (Flink's
//! `socketTextStream`; `nc -lk 9000` feeding a word count). It connects to
//! the server, reconnects with a growing backoff when the connection drops,
//! and keeps no position: after a failure it reads what the server sends
//! next (at-most-once).

use weir_types::Type;

use super::{Resolve, SourceConnector};
use crate::manifest::{ManifestError, Setting};

/// `type = "socket"`.
#[derive(Debug, Clone, serde::Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct SocketTable {
    /// `host:port` of the server.
    pub address: String,
    /// `text` (default: each line is a string record) or `json` (each line
    /// is a JSON value, read into the source's `schema` if it has one).
    #[serde(default)]
    pub format: Option<String>,
    /// How many times in a row it reconnects after the connection drops or
    /// cannot be made; unbounded if absent. When they are used up, the
    /// source ends (a bounded input: `0` reads one connection to its end).
    #[serde(default)]
    pub max_retries: Option<Setting>,
    /// The longest wait between two attempts (default 5000); the first
    /// waits 100 ms, and each next one twice as long.
    #[serde(default)]
    pub max_backoff_ms: Option<Setting>,
}

/// How a socket source reads its lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum LineFormat {
    /// Each line is a string.
    Text,
    /// Each line is a JSON value.
    Json,
}

impl SocketTable {
    pub(super) fn resolve(&self, r: &Resolve) -> Result<Socket, ManifestError> {
        let address = r.addresses("address", &self.address, "127.0.0.1:9000")?;
        if address.contains(',') {
            return Err(r.invalid("address", "is one host:port"));
        }
        let format = match self
            .format
            .as_deref()
            .map(|f| r.text(f))
            .transpose()?
            .as_deref()
        {
            None | Some("text") => LineFormat::Text,
            Some("json") => LineFormat::Json,
            Some(other) => {
                return Err(r.invalid(
                    "format",
                    format_args!("{other:?} is not \"text\" or \"json\""),
                ));
            }
        };
        Ok(Socket {
            address,
            format,
            max_retries: r.whole("max-retries", &self.max_retries)?,
            max_backoff_ms: r
                .whole("max-backoff-ms", &self.max_backoff_ms)?
                .unwrap_or(5000),
        })
    }
}

/// Lines of text from a TCP server.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Socket {
    /// `host:port` of the server.
    pub address: String,
    /// How its lines are read.
    pub format: LineFormat,
    /// Reconnections in a row before it ends; `None`: never ends.
    pub max_retries: Option<u64>,
    /// The longest wait between two attempts.
    pub max_backoff_ms: u64,
}

impl SourceConnector for Socket {
    fn type_name(&self) -> &'static str {
        "socket"
    }

    fn record_type(&self, schema: Option<&Type>) -> Result<Option<Type>, String> {
        match (self.format, schema) {
            (LineFormat::Text, None) => Ok(Some(Type::String)),
            (LineFormat::Text, Some(_)) => Err(
                "`schema` is for `format = \"json\"`; a text socket's records are string".into(),
            ),
            (LineFormat::Json, schema) => Ok(schema.cloned()),
        }
    }

    fn encodes(&self) -> bool {
        self.format == LineFormat::Text
    }

    fn max_parallelism(&self) -> Option<u32> {
        Some(1)
    }
}
