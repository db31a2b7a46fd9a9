//! A completed checkpoint's keyed state as JSON lines (what `weir state`
//! prints of a savepoint, [`weir_state::inspect`]): each operator
//! subtask's state is fetched from the checkpoint storage as a canonical
//! file ([`super::export`]) and read.

use object_store::ObjectStore;
use weir_model::checkpoint::{CheckpointLayout, CheckpointMetadata, OperatorStateHandle};
use weir_state::inspect::Printer;

use crate::error::CoordinatorError;

/// JSON lines, spooled into an unnamed temporary file (a large state is
/// never held in memory whole), rewound to their start.
#[derive(Debug)]
pub struct Lines {
    /// The file.
    pub file: std::fs::File,
}

/// What was asked for.
#[derive(Debug, Clone, Default)]
pub struct StateQuery {
    /// Only this operator's state.
    pub operator: Option<String>,
    /// Only this state's entries.
    pub state: Option<String>,
}

/// The keyed state `checkpoint` holds (its vertices named by `layout`),
/// as JSON lines.
pub async fn read(
    store: &dyn ObjectStore,
    checkpoint: &CheckpointMetadata,
    layout: &CheckpointLayout,
    query: &StateQuery,
) -> Result<Lines, CoordinatorError> {
    checkpoint.check_against(layout).map_err(|e| {
        CoordinatorError::unprocessable(
            "checkpoint_invalid",
            format!(
                "checkpoint {} of job `{}` cannot be read: {e}",
                checkpoint.id, checkpoint.job
            ),
        )
    })?;
    let name = |o: &OperatorStateHandle| {
        layout
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
    let mut out = std::io::BufWriter::new(tempfile::tempfile().map_err(|e| failed(e.into()))?);
    let mut seen = false;
    for (operator, subtask, handle) in parts
        .into_iter()
        .filter(|(n, _, _)| query.operator.as_ref().is_none_or(|o| o == n))
    {
        let canonical = super::export::canonical(store, handle, layout.max_parallelism)
            .await
            .map_err(failed)?;
        let (codec, wanted) = (layout.codec, query.state.clone());
        let (written, saw) = tokio::task::spawn_blocking(move || {
            let mut p = Printer::new(&operator, subtask, wanted.as_deref(), codec, &mut out);
            weir_state::canonical::read(&canonical.file, &mut p)?;
            let saw = p.seen();
            drop(p);
            drop(canonical);
            anyhow::Ok((out, saw))
        })
        .await
        .map_err(|e| failed(e.into()))?
        .map_err(failed)?;
        out = written;
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
    let mut file = out
        .into_inner()
        .map_err(|e| failed(e.into_error().into()))?;
    std::io::Seek::rewind(&mut file).map_err(|e| failed(e.into()))?;
    Ok(Lines { file })
}
