//! Keyed state as JSON lines (Flink's State Processor API, read only): one
//! line per entry of a canonical state file — operator, subtask, state,
//! kind, key and value (a list's values, a map entry's key and value; with
//! `expires_at`, in milliseconds, for a state with a time-to-live) — and one
//! per timer. `weir state` prints a savepoint's this way, and the
//! coordinator a running job's latest checkpoint.

use std::io::Write;

use serde_json::{Value, json};
use weir_model::builtin::accumulator::StoredAccumulator;
use weir_model::codec::Codec;
use weir_model::format::Format;

use crate::canonical::{Entry, Visitor};
use crate::{Declared, StateKind};

/// The prefix of a built-in running aggregate's state name
/// (`weir.builtin.count`, …).
const BUILTIN: &str = "weir.builtin.";

/// A key or value as JSON: in `codec` when it reads so (MessagePack, or
/// JSON text), else as text, else as hex.
pub fn decode(bytes: &[u8], codec: Codec) -> Value {
    let msgpack = || {
        let mut out = Vec::new();
        weir_model::msgpack::to_json(bytes, &mut out)
            .ok()
            .and_then(|()| serde_json::from_slice::<Value>(&out).ok())
    };
    let json = || serde_json::from_slice::<Value>(bytes).ok();
    let decoded = match codec {
        Codec::Json => json().or_else(msgpack),
        _ => msgpack().or_else(json),
    };
    decoded.unwrap_or_else(|| match std::str::from_utf8(bytes) {
        Ok(s) => Value::String(s.to_owned()),
        Err(_) => json!({ "hex": hex::encode(bytes) }),
    })
}

/// A row in `rows` as JSON (its hex, with why, when malformed).
fn row_json(rows: &Format, bytes: &[u8]) -> Value {
    let mut out = Vec::new();
    match rows.write_json(bytes, &mut out) {
        Ok(()) => serde_json::from_slice(&out).unwrap_or(Value::Null),
        Err(e) => json!({ "hex": hex::encode(bytes), "malformed": e }),
    }
}

/// Prints one operator subtask's canonical file ([`crate::canonical::read`]
/// with it as the visitor).
pub struct Printer<'a> {
    operator: &'a str,
    subtask: u32,
    wanted: Option<&'a str>,
    /// Per state: its name, kind, whether its values carry expiry stamps,
    /// and the format of its rows, if they are.
    states: Vec<(String, StateKind, bool, Option<Format>)>,
    /// Whether any entry of the wanted state was seen.
    seen: bool,
    codec: Codec,
    out: &'a mut dyn Write,
}

impl<'a> Printer<'a> {
    /// A printer of operator `operator`'s subtask `subtask` (of state
    /// `wanted` only, if given), its values in `codec`, into `out`.
    pub fn new(
        operator: &'a str,
        subtask: u32,
        wanted: Option<&'a str>,
        codec: Codec,
        out: &'a mut dyn Write,
    ) -> Printer<'a> {
        Printer {
            operator,
            subtask,
            wanted,
            states: Vec::new(),
            seen: false,
            codec,
            out,
        }
    }

    /// Whether any entry of the wanted state was printed.
    pub fn seen(&self) -> bool {
        self.seen
    }

    fn line(&mut self, v: Value) -> anyhow::Result<()> {
        serde_json::to_writer(&mut *self.out, &v)?;
        self.out.write_all(b"\n")?;
        Ok(())
    }
}

impl Visitor for Printer<'_> {
    fn state(&mut self, d: &Declared) -> anyhow::Result<u32> {
        let rows = match &d.value_type {
            Some(text) => Some(
                Format::of_state(Codec::Row, Some(text))
                    .map_err(|e| anyhow::anyhow!("state `{}` declares its rows: {e}", d.name))?,
            ),
            None => None,
        };
        self.states.push((d.name.clone(), d.kind, d.stamped, rows));
        Ok(self.states.len() as u32 - 1)
    }

    fn entry(&mut self, state: u32, key: Vec<u8>, entry: Entry) -> anyhow::Result<()> {
        let (name, kind, stamped, rows) = &self.states[state as usize];
        let (name, kind, stamped) = (name.clone(), *kind, *stamped);
        if self.wanted.is_some_and(|w| w != name) {
            return Ok(());
        }
        self.seen = true;
        // Keys are in their stream's encoding: JSON text or MessagePack.
        let mut v = json!({
            "operator": self.operator,
            "subtask": self.subtask,
            "state": name,
            "kind": kind,
            "key": decode(&key, Codec::Json),
        });
        let codec = self.codec;
        // A stamped value: its bytes, and when it expires.
        let builtin = name.starts_with(BUILTIN);
        let show = |bytes: &[u8]| {
            if let Some(format) = rows {
                return row_json(format, bytes);
            }
            builtin
                .then(|| StoredAccumulator::decode(bytes).map(|a| a.to_json()))
                .flatten()
                .unwrap_or_else(|| decode(bytes, codec))
        };
        let value = |bytes: &[u8]| match crate::ttl::unstamp(bytes).filter(|_| stamped) {
            Some((at, rest)) => (show(rest), Some(at)),
            None => (show(bytes), None),
        };
        match entry {
            Entry::Value(bytes) => {
                let (x, at) = value(&bytes);
                v["value"] = x;
                if let Some(at) = at {
                    v["expires_at"] = at.into();
                }
            }
            Entry::List(values) => {
                let values: Vec<_> = values.iter().map(|x| value(x)).collect();
                if stamped {
                    v["expires_at"] = values.iter().filter_map(|(_, at)| *at).collect();
                }
                v["values"] = values.into_iter().map(|(x, _)| x).collect();
            }
            Entry::MapEntry(map_key, bytes) => {
                v["map_key"] = decode(&map_key, codec);
                let (x, at) = value(&bytes);
                v["value"] = x;
                if let Some(at) = at {
                    v["expires_at"] = at.into();
                }
            }
        }
        self.line(v)
    }

    fn timer(&mut self, timer: crate::Timer) -> anyhow::Result<()> {
        if self.wanted.is_some() {
            return Ok(());
        }
        let domain = match timer.domain {
            crate::TimeDomain::EventTime => "event-time",
            crate::TimeDomain::ProcessingTime => "processing-time",
        };
        let v = json!({
            "operator": self.operator,
            "subtask": self.subtask,
            "timer": {"key": decode(&timer.key, Codec::Json), "time": timer.time, "domain": domain},
        });
        self.line(v)
    }
}
