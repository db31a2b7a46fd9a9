//! Which files a job's connectors may reach.
//!
//! A cluster opens the files a job names (a source's `path`, a sink's
//! `path`) as the worker's user, so a job parameter must never be a way to
//! read or write an arbitrary file. The cluster operator grants directories
//! ([`AllowedDirs`], `--allow-dir`); a path is used only when, after
//! canonicalisation, it lies inside one of them:
//!
//! - a `..` component is refused outright, whatever it would lead to;
//! - the longest part of the path that exists is canonicalised (links
//!   followed), so a link inside a granted directory that leads out of it is
//!   refused, and so is a link that leads nowhere;
//! - a source reads only a regular file (not a device, a FIFO or a
//!   directory); a sink writes a regular file or a directory of part files,
//!   or one of [`SINK_DEVICES`].
//!
//! The coordinator checks a job's paths when it is submitted (a 4xx naming
//! the path and the granted directories) and every worker checks them again
//! just before it opens a file. `weir run`, the user's own process on their
//! own files, is [`AllowedDirs::unrestricted`].

use std::path::{Component, Path, PathBuf};

use crate::graph::{JobGraph, VertexKind};

/// Destinations a sink may write outside the granted directories: they
/// hold nothing and read nothing back.
pub const SINK_DEVICES: [&str; 3] = ["/dev/null", "/dev/stdout", "/dev/stderr"];

/// The directories a cluster grants its jobs' connectors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowedDirs {
    /// Canonical roots; `None`: anything (the user's own process).
    roots: Option<Vec<PathBuf>>,
}

/// A path a job may not use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} path {path:?} {why}; this cluster grants {roots} (--allow-dir)")]
pub struct AccessError {
    /// `source `lines`` or `sink `out``.
    pub what: String,
    /// The path as the job gave it.
    pub path: String,
    /// Why it is refused.
    pub why: String,
    /// The granted directories, for the message.
    pub roots: String,
}

/// Whether a path is read or written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Use {
    /// A source reads a regular file.
    Read,
    /// A sink writes a regular file or a directory of part files.
    Write,
}

impl AllowedDirs {
    /// No restriction: `weir run`, where the job is the user's own process.
    pub fn unrestricted() -> Self {
        AllowedDirs { roots: None }
    }

    /// Only inside `dirs`, each created if missing and canonicalised.
    pub fn new<I, P>(dirs: I) -> std::io::Result<Self>
    where
        I: IntoIterator<Item = P>,
        P: AsRef<Path>,
    {
        let mut roots = Vec::new();
        for dir in dirs {
            let dir = dir.as_ref();
            let canonical = std::fs::create_dir_all(dir)
                .and_then(|()| dir.canonicalize())
                .map_err(|e| {
                    std::io::Error::new(
                        e.kind(),
                        format!("cannot use {} as an allowed directory: {e}", dir.display()),
                    )
                })?;
            if !roots.contains(&canonical) {
                roots.push(canonical);
            }
        }
        Ok(AllowedDirs { roots: Some(roots) })
    }

    /// The granted directories (`None`: unrestricted).
    pub fn roots(&self) -> Option<&[PathBuf]> {
        self.roots.as_deref()
    }

    fn describe(&self) -> String {
        match &self.roots {
            None => "every path".into(),
            Some(r) if r.is_empty() => "no directory".into(),
            Some(r) => r
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
        }
    }

    /// The canonical path `path` leads to, if `what` may `use` it.
    pub fn check(&self, what: &str, path: &str, use_: Use) -> Result<PathBuf, AccessError> {
        let refuse = |why: String| AccessError {
            what: what.to_owned(),
            path: path.to_owned(),
            why,
            roots: self.describe(),
        };
        if use_ == Use::Write && SINK_DEVICES.contains(&path) {
            return Ok(PathBuf::from(path));
        }
        let Some(roots) = &self.roots else {
            return Ok(PathBuf::from(path));
        };
        if path.is_empty() || path.contains('\0') {
            return Err(refuse("is not a file path".into()));
        }
        let given = Path::new(path);
        if given.components().any(|c| c == Component::ParentDir) {
            return Err(refuse("has a `..` component".into()));
        }
        let absolute = if given.is_absolute() {
            given.to_owned()
        } else {
            std::env::current_dir()
                .map_err(|e| {
                    refuse(format!(
                        "is relative and the working directory is unknown: {e}"
                    ))
                })?
                .join(given)
        };
        let canonical = canonical(&absolute).map_err(refuse)?;
        if !roots.iter().any(|root| canonical.starts_with(root)) {
            return Err(refuse(if canonical == absolute {
                "is outside the allowed directories".into()
            } else {
                format!(
                    "leads to {} (links followed), outside the allowed directories",
                    canonical.display()
                )
            }));
        }
        if let Ok(meta) = std::fs::metadata(&canonical) {
            let ok = match use_ {
                Use::Read => meta.is_file(),
                Use::Write => meta.is_file() || meta.is_dir(),
            };
            if !ok {
                return Err(refuse(match use_ {
                    Use::Read => "is not a regular file".into(),
                    Use::Write => "is neither a regular file nor a directory".into(),
                }));
            }
        }
        Ok(canonical)
    }

    /// Check every file a job's sources and sinks name.
    pub fn check_graph(&self, graph: &JobGraph) -> Result<(), AccessError> {
        if self.roots.is_none() {
            return Ok(());
        }
        for v in &graph.vertices {
            let what = match v.kind {
                VertexKind::Source(_) => "source",
                VertexKind::Sink(_) => "sink",
                VertexKind::Operator { .. } => continue,
            };
            for (path, use_) in crate::connectors::files_of(&v.kind) {
                self.check(&format!("{what} `{}`", v.name), path, use_)?;
            }
        }
        Ok(())
    }
}

/// `path` (absolute, without `..`) with its longest existing part
/// canonicalised and the rest appended as it is.
fn canonical(path: &Path) -> Result<PathBuf, String> {
    let mut existing = path;
    let mut rest: Vec<&std::ffi::OsStr> = Vec::new();
    loop {
        match std::fs::symlink_metadata(existing) {
            Ok(_) => break,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let (Some(parent), Some(name)) = (existing.parent(), existing.file_name()) else {
                    return Err("has no existing directory above it".into());
                };
                rest.push(name);
                existing = parent;
            }
            Err(e) => return Err(format!("cannot be inspected: {e}")),
        }
    }
    let mut resolved = existing.canonicalize().map_err(|e| {
        format!(
            "cannot be resolved at {} (a link that leads nowhere?): {e}",
            existing.display()
        )
    })?;
    for name in rest.into_iter().rev() {
        resolved.push(name);
    }
    Ok(resolved)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_inside_granted_directories_only() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let granted = root.path().join("io");
        let dirs = AllowedDirs::new([&granted]).unwrap();
        let inside = granted.canonicalize().unwrap();
        std::fs::write(inside.join("in.txt"), "x").unwrap();
        let p = |s: &Path| s.to_str().unwrap().to_owned();

        assert_eq!(
            dirs.check("source `s`", &p(&inside.join("in.txt")), Use::Read),
            Ok(inside.join("in.txt"))
        );
        // Not yet there: a sink's file, a part-file directory two levels down.
        assert_eq!(
            dirs.check("sink `o`", &p(&inside.join("new/dir/out")), Use::Write),
            Ok(inside.join("new/dir/out"))
        );
        for bad in [
            "/etc/passwd".to_owned(),
            p(&inside.join("../x")),
            p(&inside.join("a/../../x")),
            p(&outside.path().join("x")),
            String::new(),
        ] {
            let e = dirs.check("source `s`", &bad, Use::Read).unwrap_err();
            assert_eq!(e.path, bad);
            assert!(e.to_string().contains(&inside.display().to_string()), "{e}");
        }
        // A link out of the granted directory, to a file or a directory,
        // and one to nowhere.
        std::fs::write(outside.path().join("secret"), "s").unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), inside.join("l")).unwrap();
        std::os::unix::fs::symlink(outside.path(), inside.join("d")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("none"), inside.join("n")).unwrap();
        for link in ["l", "d/secret", "d/new-file", "n"] {
            let e = dirs
                .check("sink `o`", &p(&inside.join(link)), Use::Write)
                .unwrap_err();
            assert!(e.why.contains("lead"), "{link}: {e}");
        }
        // Devices: a sink may write /dev/null, a source reads no device.
        assert!(dirs.check("sink `o`", "/dev/null", Use::Write).is_ok());
        assert!(dirs.check("source `s`", "/dev/null", Use::Read).is_err());
        assert!(dirs.check("source `s`", "/dev/zero", Use::Read).is_err());
        // A directory is no source.
        std::fs::create_dir(inside.join("sub")).unwrap();
        let e = dirs
            .check("source `s`", &p(&inside.join("sub")), Use::Read)
            .unwrap_err();
        assert!(e.why.contains("regular file"), "{e}");
        // Unrestricted: anything goes.
        assert!(
            AllowedDirs::unrestricted()
                .check("source `s`", "/etc/passwd", Use::Read)
                .is_ok()
        );
    }

    #[test]
    fn relative_paths_resolve_from_the_working_directory() {
        let cwd = std::env::current_dir().unwrap();
        let dirs = AllowedDirs::new([&cwd]).unwrap();
        assert_eq!(
            dirs.check("sink `o`", "out/x.jsonl", Use::Write),
            Ok(cwd.canonicalize().unwrap().join("out/x.jsonl"))
        );
    }
}
