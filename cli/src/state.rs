//! `weir state SAVEPOINT [--operator NAME] [--state NAME]`: the keyed state
//! a savepoint holds, as JSON lines (Flink's State Processor API, read
//! only): one line per entry — operator, subtask, state, kind, key and
//! value (a list's values, a map entry's key and value; with `expires_at`,
//! in milliseconds, for a state with a time-to-live) — and one per timer.

use std::io::Write;
use std::path::Path;

use serde_json::{Value, json};
use weir_model::codec::Codec;
use weir_model::savepoint::{METADATA, SavepointMetadata};
use weir_state::StateKind;
use weir_state::canonical::{Entry, Visitor};

/// A key or value as JSON: in `codec` when it reads so (MessagePack, or
/// JSON text), else as text, else as hex.
fn decode(bytes: &[u8], codec: Codec) -> Value {
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

/// Prints one operator subtask's file.
struct Printer<'a> {
    operator: &'a str,
    subtask: u32,
    wanted: Option<&'a str>,
    /// Per state: its name, kind and whether its values carry expiry
    /// stamps.
    states: Vec<(String, StateKind, bool)>,
    /// Whether any entry of the wanted state was seen.
    seen: bool,
    codec: Codec,
    out: &'a mut dyn Write,
}

impl Printer<'_> {
    fn line(&mut self, v: Value) -> anyhow::Result<()> {
        serde_json::to_writer(&mut *self.out, &v)?;
        self.out.write_all(b"\n")?;
        Ok(())
    }
}

impl Visitor for Printer<'_> {
    fn state(&mut self, name: &str, kind: StateKind, stamped: bool) -> anyhow::Result<u32> {
        self.states.push((name.to_owned(), kind, stamped));
        Ok(self.states.len() as u32 - 1)
    }

    fn entry(&mut self, state: u32, key: Vec<u8>, entry: Entry) -> anyhow::Result<()> {
        let (name, kind, stamped) = self.states[state as usize].clone();
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
        let value = |bytes: &[u8]| match weir_state::ttl::unstamp(bytes).filter(|_| stamped) {
            Some((at, rest)) => (decode(rest, codec), Some(at)),
            None => (decode(bytes, codec), None),
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

    fn timer(&mut self, timer: weir_state::Timer) -> anyhow::Result<()> {
        if self.wanted.is_some() {
            return Ok(());
        }
        let domain = match timer.domain {
            weir_state::TimeDomain::EventTime => "event-time",
            weir_state::TimeDomain::ProcessingTime => "processing-time",
        };
        let v = json!({
            "operator": self.operator,
            "subtask": self.subtask,
            "timer": {"key": decode(&timer.key, Codec::Json), "time": timer.time, "domain": domain},
        });
        self.line(v)
    }
}

/// Print the state of the savepoint in `dir` (of operator `operator`,
/// state `state` only, when given) to `out`.
pub fn print(
    dir: &Path,
    operator: Option<&str>,
    state: Option<&str>,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let bytes = std::fs::read(dir.join(METADATA)).map_err(|e| {
        anyhow::anyhow!(
            "{} is not a savepoint: cannot read its {METADATA}: {e}",
            dir.display()
        )
    })?;
    let m = SavepointMetadata::parse(&bytes)
        .map_err(|e| anyhow::anyhow!("{} is not a savepoint: {e}", dir.display()))?;
    let with_state: Vec<&str> = m
        .vertices
        .iter()
        .filter(|v| !v.state.is_empty())
        .map(|v| v.name.as_str())
        .collect();
    if let Some(op) = operator
        && !with_state.contains(&op)
    {
        anyhow::bail!(
            "the savepoint holds no keyed state of an operator `{op}` (it holds state of: {})",
            if with_state.is_empty() {
                "none".to_owned()
            } else {
                with_state.join(", ")
            }
        );
    }
    let codec = m.state_codec.unwrap_or(Codec::Msgpack);
    let mut seen = false;
    for v in m
        .vertices
        .iter()
        .filter(|v| operator.is_none_or(|o| v.name == o))
    {
        for f in &v.state {
            let mut p = Printer {
                operator: &v.name,
                subtask: f.subtask,
                wanted: state,
                states: Vec::new(),
                seen: false,
                codec,
                out: &mut *out,
            };
            weir_state::canonical::read(&dir.join(&f.file), &mut p)
                .map_err(|e| anyhow::anyhow!("{}: {e:#}", dir.join(&f.file).display()))?;
            seen |= p.seen;
        }
    }
    out.flush()?;
    if let Some(s) = state
        && !seen
    {
        anyhow::bail!("the savepoint holds no entry of a state `{s}`");
    }
    Ok(())
}
