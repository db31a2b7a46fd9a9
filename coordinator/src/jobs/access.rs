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
//!
//! A sink's output belongs to one job: the job **claims** it at submit, by
//! creating a claim file exclusively (`<dir>/.owner` in a directory of part
//! files, `.<name>.owner` beside a plain file) that holds its id. A second
//! job naming the same directory or file gets `409 sink_exists` naming the
//! owner; `mode = "overwrite"` hands it over only when the owner has ended.

use std::path::{Path, PathBuf};

use weir_model::JobGraph;
use weir_model::access::{AllowedDirs, Use};
use weir_model::graph::VertexKind;

use crate::error::CoordinatorError;

/// Every path of `graph` inside the granted directories, or a 422 naming
/// the path and the directories.
pub(crate) fn check(allowed: &AllowedDirs, graph: &JobGraph) -> Result<(), CoordinatorError> {
    allowed.check_graph(graph).map_err(not_allowed)
}

fn not_allowed(e: weir_model::access::AccessError) -> CoordinatorError {
    CoordinatorError::unprocessable("path_not_allowed", e.to_string())
}

/// The files a new job's sinks made (its claims among them), removed again
/// if the job is not accepted after all.
#[derive(Debug, Default)]
pub(crate) struct MadeFiles {
    made: Vec<PathBuf>,
    /// Claims handed over from an ended job: given back to it on undo.
    handed_over: Vec<(PathBuf, String)>,
}

/// Who may own a sink's output, as the claims name them: the job
/// submitted now, and the jobs the coordinator knows that have ended.
pub(crate) struct Owners<'a> {
    /// The job being submitted.
    pub(crate) job: &'a str,
    /// Every job the coordinator knows, with whether it has ended.
    pub(crate) known: &'a std::collections::BTreeMap<String, bool>,
    /// The job whose savepoint the job starts from, and whether the
    /// savepoint stopped it: its sinks' output passes to the job once it
    /// has ended (the job goes on writing it), when it was stopped by that
    /// savepoint (else it may have committed output after it).
    pub(crate) predecessor: Option<(&'a str, bool)>,
}

/// The claim file of a sink's `target`: `.owner` in a directory of part
/// files, `.<name>.owner` beside a plain file.
fn claim_path(target: &Path, directory: bool) -> PathBuf {
    if directory {
        return target.join(".owner");
    }
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    target
        .parent()
        .unwrap_or(Path::new("/"))
        .join(format!(".{name}.owner"))
}

/// How a claim was taken.
enum Claimed {
    /// Made now.
    Made(PathBuf),
    /// Handed over from an ended job (its id), whose output this job goes
    /// on from (its savepoint's) or not.
    HandedOver(PathBuf, String, bool),
}

/// Claim `target` for `owners.job`: create its claim file exclusively, or,
/// when another job holds it, take it over if that job has ended and the
/// sink may overwrite — or if a plain file's owner ended and the file is
/// gone (its user removed the output). A hand-over is itself exclusive
/// (`<claim>.handover`, created exclusively while it is rewritten): of two
/// submissions at once, one gets it.
fn claim(
    what: &str,
    target: &Path,
    directory: bool,
    overwrite: bool,
    owners: &Owners<'_>,
) -> Result<Claimed, CoordinatorError> {
    let path = claim_path(target, directory);
    let create = |p: &Path| {
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(p)
    };
    match create(&path) {
        Ok(mut f) => {
            use std::io::Write;
            f.write_all(owners.job.as_bytes())
                .and_then(|()| f.sync_all())
                .map_err(|e| io_error(&path, e))?;
            return Ok(Claimed::Made(path));
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(io_error(&path, e)),
    }
    let owner = std::fs::read_to_string(&path).map_err(|e| io_error(&path, e))?;
    let owner = owner.trim().to_owned();
    let shown = target.display();
    let ended = owners.known.get(&owner).copied();
    let removed = !directory && !target.exists() && ended != Some(false);
    let inherited = owners.predecessor == Some((owner.as_str(), true));
    if owners.predecessor == Some((owner.as_str(), false)) && !overwrite {
        return Err(conflict(format!(
            "{what}: {shown} belongs to job {owner}, whose savepoint or checkpoint this job starts from; it did not end that job (a savepoint that did not stop it; a checkpoint not its latest, or of a job that still runs or finished), which may have committed output after it: give another path (or stop job {owner} with a savepoint, `weir stop`, and start from that one)"
        )));
    }
    match ended {
        Some(true) if overwrite || removed || inherited => {}
        None if removed => {}
        Some(true) => {
            return Err(conflict(format!(
                "{what}: {shown} belongs to job {owner}, which has ended: remove it (and its claim {}), give another path, or write `mode = \"overwrite\"` on the sink",
                path.display()
            )));
        }
        Some(false) if inherited => {
            return Err(conflict(format!(
                "{what}: {shown} belongs to job {owner}, whose savepoint or checkpoint this job starts from, and which has not ended: stop it first (`weir stop`), so that one job writes there"
            )));
        }
        Some(false) => {
            return Err(conflict(format!(
                "{what}: {shown} belongs to job {owner}, which has not ended: cancel it first, or give another path"
            )));
        }
        None => {
            return Err(conflict(format!(
                "{what}: {shown} belongs to job {owner}, which this coordinator does not know (its claim is {}): give another path, or remove the claim if no job writes there",
                path.display()
            )));
        }
    }
    // Handed over, one submission at a time.
    let handover = PathBuf::from(format!("{}.handover", path.display()));
    match create(&handover) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            return Err(conflict(format!(
                "{what}: {shown} is being handed over to another job just now: give another path"
            )));
        }
        Err(e) => return Err(io_error(&handover, e)),
    }
    let result = (|| {
        let now = std::fs::read_to_string(&path).map_err(|e| io_error(&path, e))?;
        if now.trim() != owner {
            return Err(conflict(format!(
                "{what}: {shown} was handed over to job {} just now: give another path",
                now.trim()
            )));
        }
        std::fs::write(&path, owners.job).map_err(|e| io_error(&path, e))?;
        Ok(Claimed::HandedOver(path.clone(), owner.clone(), inherited))
    })();
    let _ = std::fs::remove_file(&handover);
    result
}

impl MadeFiles {
    /// Remove what was made (the job never ran), and give claims handed
    /// over back to their owners.
    pub(crate) fn undo(self) {
        for f in self.made {
            let _ = std::fs::remove_file(f);
        }
        for (claim, owner) in self.handed_over {
            let _ = std::fs::write(claim, owner);
        }
    }
}

fn conflict(message: String) -> CoordinatorError {
    CoordinatorError::new(crate::error::ErrorKind::Conflict, "sink_exists", message)
}

fn io_error(path: &Path, e: std::io::Error) -> CoordinatorError {
    CoordinatorError::unprocessable(
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
    owners: &Owners<'_>,
) -> Result<MadeFiles, CoordinatorError> {
    let mut made = MadeFiles::default();
    if allowed.roots().is_none() {
        return Ok(made);
    }
    let result = (|| {
        for v in &graph.vertices {
            // A sink's output files, claimed for the job (a device is
            // written straight through, and nobody's).
            let VertexKind::Sink(config) = &v.kind else {
                continue;
            };
            let sink = config.connector();
            let (&[path], true) = (&sink.files()[..], sink.commits()) else {
                continue;
            };
            let overwrite = &sink.overwrites();
            let what = format!("sink `{}`", v.name);
            let target = allowed
                .check(&what, path, Use::Write)
                .map_err(not_allowed)?;
            let how = "remove it, give another path, or write `mode = \"overwrite\"` on the sink";
            let directory = graph.checkpoint.is_some();
            // The claim first (where it lives must exist), so that nothing
            // of another job's output is touched before this job owns it.
            let home = if directory {
                if target.exists() && !target.is_dir() {
                    return Err(conflict(format!(
                        "{what}: {} is a file; with checkpoints the sink writes a directory of part files",
                        target.display()
                    )));
                }
                target.clone()
            } else {
                target.parent().unwrap_or(Path::new("/")).to_owned()
            };
            std::fs::create_dir_all(&home).map_err(|e| io_error(&home, e))?;
            let inherited = match claim(&what, &target, directory, *overwrite, owners)? {
                Claimed::Made(c) => {
                    made.made.push(c);
                    false
                }
                Claimed::HandedOver(c, owner, inherited) => {
                    made.handed_over.push((c, owner));
                    inherited
                }
            };
            if inherited {
                // The savepoint's job wrote its output there: this job
                // goes on from it, and its committed parts stay.
                continue;
            }
            if directory {
                prepare_parts(&what, &target, *overwrite, how)?;
            } else if let Some(file) = prepare_file(&what, &target, *overwrite, how)? {
                made.made.push(file);
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
) -> Result<Option<PathBuf>, CoordinatorError> {
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
fn prepare_parts(
    what: &str,
    target: &Path,
    overwrite: bool,
    how: &str,
) -> Result<(), CoordinatorError> {
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
