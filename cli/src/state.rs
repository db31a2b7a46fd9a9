//! `weir state SAVEPOINT [--operator NAME] [--state NAME]`: the keyed state
//! a savepoint holds, as JSON lines (Flink's State Processor API, read
//! only): one line per entry — operator, subtask, state, kind, key and
//! value (a list's values, a map entry's key and value; with `expires_at`,
//! in milliseconds, for a state with a time-to-live) — and one per timer.
//! A retained checkpoint's directory (`<data-dir>/checkpoints/<job>/chk-<id>`)
//! reads the same way, its RocksDB snapshots included.

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
    if let Some(retained) = weir_coordinator::savepoint::retained::read(dir) {
        let retained = retained.map_err(|e| anyhow::anyhow!("{}", e.message))?;
        return print_retained(dir, &retained, operator, state, out);
    }
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

/// Print the state of the retained checkpoint `retained` (in `dir`).
fn print_retained(
    dir: &Path,
    retained: &weir_coordinator::savepoint::retained::Retained,
    operator: Option<&str>,
    state: Option<&str>,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let c = &retained.checkpoint;
    let Some(layout) = &c.layout else {
        anyhow::bail!(
            "{}: checkpoint {} of job `{}` does not name its vertices (taken by an older version): read it over the REST API (`GET /v1/jobs/{}/checkpoints/latest/state`)",
            dir.display(),
            c.id,
            c.job,
            c.job
        );
    };
    let query = weir_coordinator::checkpoint::inspect::StateQuery {
        operator: operator.map(str::to_owned),
        state: state.map(str::to_owned),
    };
    let store = weir_model::storage::open(&weir_model::storage::file_url(&retained.root)?)?;
    let mut lines = tokio::runtime::Runtime::new()?
        .block_on(weir_coordinator::checkpoint::inspect::read(
            store.as_ref(),
            c,
            layout,
            &query,
        ))
        .map_err(|e| anyhow::anyhow!("{}", e.message))?;
    std::io::copy(&mut lines.file, out)?;
    out.flush()?;
    Ok(())
}
