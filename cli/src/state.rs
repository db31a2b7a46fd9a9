//! `weir state SAVEPOINT [--operator NAME] [--state NAME]`: the keyed state
//! a savepoint holds, as JSON lines (Flink's State Processor API, read
//! only): one line per entry — operator, subtask, state, kind, key and
//! value (a list's values, a map entry's key and value; with `expires_at`,
//! in milliseconds, for a state with a time-to-live) — and one per timer.

use std::io::Write;
use std::path::Path;

use weir_model::codec::Codec;
use weir_model::savepoint::{METADATA, SavepointMetadata};
use weir_state::inspect::Printer;

/// Print the state of the savepoint in `dir` (of operator `operator`,
/// state `state` only, when given) to `out`.
pub fn print(
    dir: &Path,
    operator: Option<&str>,
    state: Option<&str>,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let dir = weir_model::savepoint::directory_of(dir);
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
            let mut p = Printer::new(&v.name, f.subtask, state, codec, &mut *out);
            weir_state::canonical::read(&dir.join(&f.file), &mut p)
                .map_err(|e| anyhow::anyhow!("{}: {e:#}", dir.join(&f.file).display()))?;
            seen |= p.seen();
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
