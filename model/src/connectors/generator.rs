//! The generator source: records made up by the source (a sequence, lines
//! of words, auction bids, the side-by-side benchmark's events), for
//! examples, tests and benchmarks.

use weir_types::Type;

use super::{Resolve, SourceConnector};
use crate::manifest::{ManifestError, Setting};

/// `type = "generator"`.
#[derive(Debug, Clone, serde::Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct GeneratorTable {
    /// How many records in all (split over subtasks); unbounded if absent.
    #[serde(default)]
    pub count: Option<Setting>,
    /// `sequence` (default), `words`, `bids` or `numbers`.
    #[serde(default)]
    pub pattern: Option<String>,
    /// At most this many records per second per subtask.
    #[serde(default)]
    pub rate: Option<Setting>,
    /// The wall-clock time (ms since the epoch) of the first record: with
    /// `rate`, record `j` of a subtask is due at `start-at-ms + j / rate`,
    /// a schedule to measure latency against.
    #[serde(default)]
    pub start_at_ms: Option<Setting>,
}

impl GeneratorTable {
    pub(super) fn resolve(&self, r: &Resolve) -> Result<Generator, ManifestError> {
        let start_at_ms = r
            .whole("start-at-ms", &self.start_at_ms)?
            .filter(|&t| t > 0);
        let count = r.whole("count", &self.count)?;
        let rate = r.whole("rate", &self.rate)?;
        let pattern = match self
            .pattern
            .as_deref()
            .map(|p| r.text(p))
            .transpose()?
            .as_deref()
        {
            None | Some("sequence") => GeneratorPattern::Sequence,
            Some("words") => GeneratorPattern::Words,
            Some("bids") => GeneratorPattern::Bids,
            Some("numbers") => GeneratorPattern::Numbers,
            Some(other) => {
                return Err(ManifestError::Invalid(format!(
                    "generator `{}`: pattern {other:?} is not \"sequence\", \"words\", \"bids\" or \"numbers\"",
                    r.name
                )));
            }
        };
        Ok(Generator {
            count,
            pattern,
            rate,
            start_at_ms,
        })
    }
}

/// Generated records.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Generator {
    /// Records in all; `None` is unbounded.
    pub count: Option<u64>,
    /// What to generate.
    pub pattern: GeneratorPattern,
    /// Records per second per subtask, when limited.
    pub rate: Option<u64>,
    /// When the first record is due, ms since the epoch (0 or absent: at
    /// once).
    #[serde(default)]
    pub start_at_ms: Option<u64>,
}

impl SourceConnector for Generator {
    fn type_name(&self) -> &'static str {
        "generator"
    }

    fn record_type(&self, schema: Option<&Type>) -> Result<Option<Type>, String> {
        match schema {
            None => Ok(Some(self.pattern.record_type())),
            Some(_) => Err(format!(
                "`schema` is for JSON-lines sources; a generator source's records are {}",
                self.pattern.record_type()
            )),
        }
    }

    fn encodes(&self) -> bool {
        true
    }
}

/// What a generator source emits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum GeneratorPattern {
    /// `{"seq": n}` for n = 0, 1, 2, …
    Sequence,
    /// Lines of 8 words from a fixed vocabulary of 1,000, as JSON strings.
    Words,
    /// Auction bids, Nexmark-shaped: `{"key": "a<k>", "price": p, "ts": t}`
    /// with `k` drawn from 10,000 auctions and `t = n / 100` (100 bids per
    /// ms of event time, in order).
    Bids,
    /// `{"id": n, "k": n % 10000, "price": n % 1000, "ts": n / 100}`: the
    /// columns Flink's side of the side-by-side benchmark derives from a
    /// number sequence (100 events per ms of event time, in order).
    Numbers,
}

impl GeneratorPattern {
    /// The type of the records it makes.
    ///
    /// ```
    /// use weir_model::connectors::generator::GeneratorPattern;
    /// assert_eq!(GeneratorPattern::Numbers.record_type().to_string(), "{id: u64, k: u32, price: u64, ts: i64}");
    /// ```
    pub fn record_type(self) -> Type {
        let text = match self {
            GeneratorPattern::Sequence => "{seq: u64}",
            GeneratorPattern::Words => "string",
            GeneratorPattern::Bids => "{key: string, price: u64, ts: i64}",
            GeneratorPattern::Numbers => "{id: u64, k: u32, price: u64, ts: i64}",
        };
        text.parse().expect("a valid type")
    }
}
