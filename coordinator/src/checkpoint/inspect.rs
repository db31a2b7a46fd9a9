//! A completed checkpoint's keyed state as JSON lines (what `weir state`
//! prints of a savepoint, [`weir_state::inspect`]): each operator
//! subtask's files are fetched from the checkpoint storage into a scratch
//! directory and read — a RocksDB snapshot is opened there and written out
//! in the canonical format first.

use std::path::Path;

use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt};
use weir_model::JobGraph;
use weir_model::checkpoint::{CheckpointMetadata, OperatorStateHandle};
use weir_state::inspect::Printer;

use crate::error::CoordinatorError;

/// What was asked for.
#[derive(Debug, Clone, Default)]
pub struct StateQuery {
    /// Only this operator's state.
    pub operator: Option<String>,
    /// Only this state's entries.
    pub state: Option<String>,
}

/// The keyed state `checkpoint` holds (of the operators of `graph`), as
/// JSON lines.
pub async fn read(
    store: &dyn ObjectStore,
    checkpoint: &CheckpointMetadata,
    graph: &JobGraph,
    query: &StateQuery,
) -> Result<Vec<u8>, CoordinatorError> {
    let name = |o: &OperatorStateHandle| {
        graph
            .vertices
            .get(o.vertex)
            .map_or_else(|| format!("vertex {}", o.vertex), |v| v.name.clone())
    };
    let mut parts: Vec<(String, u32, &OperatorStateHandle)> = checkpoint
        .subtasks
        .iter()
        .flat_map(|s| s.state.operators.iter().map(move |o| (s.subtask, o)))
        .map(|(subtask, o)| (name(o), subtask, o))
        .collect();
    parts.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
    parts.dedup_by(|a, b| a.0 == b.0 && a.1 == b.1);
    if let Some(op) = &query.operator
        && !parts.iter().any(|(n, _, _)| n == op)
    {
        let mut held: Vec<&str> = parts.iter().map(|(n, _, _)| n.as_str()).collect();
        held.dedup();
        return Err(CoordinatorError::not_found(
            "operator_not_found",
            format!(
                "checkpoint {} of job `{}` holds no keyed state of an operator `{op}` (it holds state of: {})",
                checkpoint.id,
                checkpoint.job,
                if held.is_empty() {
                    "none".to_owned()
                } else {
                    held.join(", ")
                }
            ),
        ));
    }
    let failed = |e: anyhow::Error| {
        CoordinatorError::internal(format!(
            "reading checkpoint {} of job `{}`: {e:#}",
            checkpoint.id, checkpoint.job
        ))
    };
    let mut out = Vec::new();
    let mut seen = false;
    for (operator, subtask, handle) in parts
        .into_iter()
        .filter(|(n, _, _)| query.operator.as_ref().is_none_or(|o| o == n))
    {
        let scratch = tempfile::tempdir().map_err(|e| failed(e.into()))?;
        let db = scratch.path().join("db");
        std::fs::create_dir_all(&db).map_err(|e| failed(e.into()))?;
        for f in &handle.files {
            if f.name.is_empty() || f.name.contains(['/', '\\']) || f.name == ".." {
                return Err(failed(anyhow::anyhow!(
                    "a state file named {:?} in its metadata",
                    f.name
                )));
            }
            let bytes = store
                .get(&ObjectPath::from(f.path.as_str()))
                .await
                .map_err(|e| failed(anyhow::anyhow!("{}: {e}", f.path)))?
                .bytes()
                .await
                .map_err(|e| failed(anyhow::anyhow!("{}: {e}", f.path)))?;
            std::fs::write(db.join(&f.name), bytes).map_err(|e| failed(e.into()))?;
        }
        let (format, max_parallelism) = (handle.format.clone(), graph.max_parallelism);
        let (codec, wanted) = (graph.codec, query.state.clone());
        let (printed, saw) = tokio::task::spawn_blocking(move || {
            let file = canonical_file(&format, &db, max_parallelism)?;
            let mut out = Vec::new();
            let mut p = Printer::new(&operator, subtask, wanted.as_deref(), codec, &mut out);
            weir_state::canonical::read(&file, &mut p)?;
            let saw = p.seen();
            drop(scratch);
            anyhow::Ok((out, saw))
        })
        .await
        .map_err(|e| failed(e.into()))?
        .map_err(failed)?;
        out.extend(printed);
        seen |= saw;
    }
    if let Some(s) = &query.state
        && !seen
    {
        return Err(CoordinatorError::not_found(
            "state_not_found",
            format!(
                "checkpoint {} of job `{}` holds no entry of a state `{s}`",
                checkpoint.id, checkpoint.job
            ),
        ));
    }
    Ok(out)
}

/// The canonical file of a snapshot whose files are in `dir`: the memory
/// backend's own, or a RocksDB snapshot's written out.
fn canonical_file(
    format: &str,
    dir: &Path,
    max_parallelism: u32,
) -> anyhow::Result<std::path::PathBuf> {
    match format {
        "full" => Ok(dir.join(weir_state::canonical::FILE)),
        #[cfg(feature = "rocksdb")]
        "rocksdb" => {
            use weir_state::StateBackend;
            let out = dir.with_extension("state.bin");
            let mut db = weir_state::RocksDbStateBackend::open(dir, max_parallelism)?;
            db.export(&out)?;
            Ok(out)
        }
        #[cfg(not(feature = "rocksdb"))]
        "rocksdb" => {
            let _ = max_parallelism;
            anyhow::bail!(
                "its state is in RocksDB's format, and this coordinator was built without RocksDB"
            )
        }
        other => anyhow::bail!("unknown state format {other:?}"),
    }
}
