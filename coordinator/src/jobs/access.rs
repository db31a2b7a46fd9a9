//! What a job's connectors may reach, checked when it is submitted: every
//! file its sources and sinks name lies in a directory the cluster grants
//! ([`AllowedDirs`]), and a file sink writes only a file it made for this
//! job, unless its manifest says `mode = "overwrite"`.
//!
//! The coordinator makes a new job's sink files itself, before any subtask
//! runs: a plain JSON-lines file is created empty (the subtasks, on one
//! worker or several, then append their shares to it), and a directory of
//! part files must be empty of earlier part files. So a job run again to
//! the same path is refused instead of duplicating its output, and a
//! parameter cannot make a job append to a file it did not make.

use std::path::{Path, PathBuf};

use weir_model::JobGraph;
use weir_model::access::{AllowedDirs, SINK_DEVICES, Use};
use weir_model::graph::{SinkConfig, VertexKind};

use crate::error::ApiError;

/// Every path of `graph` inside the granted directories, or a 422 naming
/// the path and the directories.
pub(crate) fn check(allowed: &AllowedDirs, graph: &JobGraph) -> Result<(), ApiError> {
    allowed.check_graph(graph).map_err(not_allowed)
}

fn not_allowed(e: weir_model::access::AccessError) -> ApiError {
    ApiError::unprocessable("path_not_allowed", e.to_string())
}

/// The files a new job's sinks made, removed again if the job is not
/// accepted after all.
#[derive(Debug, Default)]
pub(crate) struct MadeFiles(Vec<PathBuf>);

impl MadeFiles {
    /// Remove what was made (the job never ran).
    pub(crate) fn undo(self) {
        for f in self.0 {
            let _ = std::fs::remove_file(f);
        }
    }
}

fn conflict(message: String) -> ApiError {
    ApiError::new(axum::http::StatusCode::CONFLICT, "sink_exists", message)
}

fn io_error(path: &Path, e: std::io::Error) -> ApiError {
    ApiError::unprocessable(
        "sink_unusable",
        format!("cannot prepare {}: {e}", path.display()),
    )
}

/// Whether a file in a part-file directory is the sink's own (a committed
/// part, a hidden one, or the fence).
fn is_part_file(name: &str) -> bool {
    (name.starts_with("part-") && name.ends_with(".jsonl"))
        || name.starts_with(".part-")
        || name == ".fence"
}

/// Make the files of a new job's sinks (on a cluster: `allowed` is
/// restricted). Refuses, with a 409, a sink whose file is there already
/// (or whose directory holds part files) unless it may overwrite it.
pub(crate) fn prepare_sinks(
    allowed: &AllowedDirs,
    graph: &JobGraph,
) -> Result<MadeFiles, ApiError> {
    let mut made = MadeFiles::default();
    if allowed.roots().is_none() {
        return Ok(made);
    }
    let result = (|| {
        for v in &graph.vertices {
            let VertexKind::Sink(SinkConfig::JsonLinesFile { path, overwrite }) = &v.kind else {
                continue;
            };
            if SINK_DEVICES.contains(&path.as_str()) {
                continue;
            }
            let what = format!("sink `{}`", v.name);
            let target = allowed
                .check(&what, path, Use::Write)
                .map_err(not_allowed)?;
            let how = "remove it, give another path, or write `mode = \"overwrite\"` on the sink";
            if graph.checkpoint.is_some() {
                prepare_parts(&what, &target, *overwrite, how)?;
            } else if let Some(file) = prepare_file(&what, &target, *overwrite, how)? {
                made.0.push(file);
            }
        }
        Ok(())
    })();
    match result {
        Ok(()) => Ok(made),
        Err(e) => {
            made.undo();
            Err(e)
        }
    }
}

/// A plain file: made empty, or emptied when it may be overwritten.
/// Returns the file when it was made here.
fn prepare_file(
    what: &str,
    target: &Path,
    overwrite: bool,
    how: &str,
) -> Result<Option<PathBuf>, ApiError> {
    match std::fs::symlink_metadata(target) {
        Ok(meta) if meta.is_dir() => Err(conflict(format!(
            "{what}: {} is a directory; without checkpoints the sink writes one file",
            target.display()
        ))),
        Ok(_) if !overwrite => Err(conflict(format!(
            "{what}: {} exists already and this job did not make it: {how}",
            target.display()
        ))),
        Ok(_) => {
            std::fs::OpenOptions::new()
                .write(true)
                .truncate(true)
                .open(target)
                .map_err(|e| io_error(target, e))?;
            Ok(None)
        }
        Err(_) => {
            if let Some(dir) = target.parent() {
                std::fs::create_dir_all(dir).map_err(|e| io_error(dir, e))?;
            }
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(target)
                .map_err(|e| io_error(target, e))?;
            Ok(Some(target.to_owned()))
        }
    }
}

/// A directory of part files: it must hold none of an earlier job's, or
/// they are removed when it may be overwritten (other files are left).
fn prepare_parts(what: &str, target: &Path, overwrite: bool, how: &str) -> Result<(), ApiError> {
    let entries = match std::fs::read_dir(target) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return std::fs::create_dir_all(target).map_err(|e| io_error(target, e));
        }
        Err(_) if target.is_file() => {
            return Err(conflict(format!(
                "{what}: {} is a file; with checkpoints the sink writes a directory of part files",
                target.display()
            )));
        }
        Err(e) => return Err(io_error(target, e)),
    };
    let parts: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .filter(|e| is_part_file(&e.file_name().to_string_lossy()))
        .map(|e| e.path())
        .collect();
    if parts.is_empty() {
        return Ok(());
    }
    if !overwrite {
        return Err(conflict(format!(
            "{what}: {} holds part files of an earlier job already: {how}",
            target.display()
        )));
    }
    for part in parts {
        std::fs::remove_file(&part).map_err(|e| io_error(&part, e))?;
    }
    Ok(())
}
