//! What building an operator project in Python or JavaScript shares: the
//! contract's WIT and the SDK travel inside this binary, a build stages
//! them beside the project's sources in `.weir/`, and the component there is
//! built again only when an input changed (a digest of the sources, the SDK
//! and the toolchain).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};
use sha2::{Digest, Sha256};

/// The contract.
pub const WIT: &str = include_str!("../../../wit/operator.wit");

/// Directories of a project that hold no operator code.
const SKIPPED: &[&str] = &[
    ".weir",
    ".git",
    ".venv",
    "venv",
    "dist",
    "target",
    "node_modules",
    "__pycache__",
    ".pytest_cache",
];

/// Every file under `root` whose extension is one of `extensions` (not in
/// skipped directories), sorted.
fn sources(root: &Path, extensions: &[&str], out: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(root)
        .with_context(|| format!("cannot list {}", root.display()))?
        .collect::<Result<_, _>>()?;
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let path = e.path();
        let name = e.file_name();
        if e.file_type()?.is_dir() {
            if !SKIPPED.iter().any(|s| name == *s) {
                sources(&path, extensions, out)?;
            }
        } else if path
            .extension()
            .is_some_and(|x| extensions.iter().any(|e| x == *e))
        {
            out.push(path);
        }
    }
    Ok(())
}

/// A digest of everything a component is built from: `settings` (the
/// toolchain, its options), the SDK's files, and the sources under `roots`.
pub fn digest(
    settings: &[&str],
    sdk: &[(&str, &str)],
    roots: &[PathBuf],
    extensions: &[&str],
) -> anyhow::Result<String> {
    let mut h = Sha256::new();
    for part in settings.iter().chain([&WIT]) {
        h.update(part.len().to_le_bytes());
        h.update(part.as_bytes());
    }
    for (name, text) in sdk {
        h.update(name.as_bytes());
        h.update(text.len().to_le_bytes());
        h.update(text.as_bytes());
    }
    for root in roots {
        let mut files = Vec::new();
        sources(root, extensions, &mut files)?;
        h.update(root.as_os_str().as_encoded_bytes());
        for f in files {
            let bytes =
                std::fs::read(&f).with_context(|| format!("cannot read {}", f.display()))?;
            h.update(f.as_os_str().as_encoded_bytes());
            h.update(bytes.len().to_le_bytes());
            h.update(&bytes);
        }
    }
    Ok(hex::encode(h.finalize()))
}

/// A build of a project's component, in `.weir/` of the project.
pub struct Build {
    out: PathBuf,
    stamp: PathBuf,
    digest: String,
    staging: tempfile::TempDir,
}

/// Whether a project needs building.
pub enum Start {
    /// Its component is up to date, here.
    Built(PathBuf),
    /// It needs building: stage the files and run the toolchain.
    Needed(Build),
}

impl Build {
    /// Start building the project in `dir` whose inputs have `digest`,
    /// unless its component is up to date. The SDK's files are staged under
    /// `sdk_dir`, the WIT in `wit/`.
    pub fn start(
        dir: &Path,
        digest: String,
        sdk_dir: &str,
        sdk: &[(&str, &str)],
    ) -> anyhow::Result<Start> {
        let out_dir = dir.join(".weir");
        let out = out_dir.join("component.wasm");
        let stamp = out_dir.join("inputs.sha256");
        if out.is_file() && std::fs::read_to_string(&stamp).is_ok_and(|s| s.trim() == digest) {
            return Ok(Start::Built(out));
        }
        // Builds of one project may run at once (tests do): each stages its
        // own files and replaces the component in one rename.
        std::fs::create_dir_all(&out_dir)
            .with_context(|| format!("cannot create {}", out_dir.display()))?;
        let staging = tempfile::Builder::new()
            .prefix("build-")
            .tempdir_in(&out_dir)
            .with_context(|| format!("cannot stage a build in {}", out_dir.display()))?;
        let stage = staging.path();
        std::fs::create_dir_all(stage.join("wit"))?;
        std::fs::write(stage.join("wit/operator.wit"), WIT)?;
        for (name, text) in sdk {
            let path = stage.join(sdk_dir).join(name);
            std::fs::create_dir_all(path.parent().expect("a file in the SDK's directory"))?;
            std::fs::write(path, text)?;
        }
        Ok(Start::Needed(Build {
            out,
            stamp,
            digest,
            staging,
        }))
    }

    /// The staging directory.
    pub fn stage(&self) -> &Path {
        self.staging.path()
    }

    /// Where the toolchain writes the component.
    pub fn partial(&self) -> PathBuf {
        self.stage().join("component.wasm")
    }

    /// Keep the built component; its path.
    pub fn finish(self) -> anyhow::Result<PathBuf> {
        std::fs::rename(self.partial(), &self.out)?;
        std::fs::write(&self.stamp, &self.digest)?;
        Ok(self.out)
    }
}

/// Run one step of a build; on failure, an error with what the tool said
/// (without a Rust backtrace some tools add).
pub fn run(mut cmd: Command, what: &str) -> anyhow::Result<()> {
    let program = cmd.get_program().to_string_lossy().into_owned();
    let output = cmd
        .output()
        .with_context(|| format!("cannot run {program}"))?;
    if !output.status.success() {
        bail!(
            "{what} failed:\n{}",
            tool_error(&output.stderr, &output.stdout)
        );
    }
    Ok(())
}

/// What a tool said on failure, without a Rust backtrace.
fn tool_error(stderr: &[u8], stdout: &[u8]) -> String {
    let text = String::from_utf8_lossy(if stderr.trim_ascii().is_empty() {
        stdout
    } else {
        stderr
    });
    let mut lines = Vec::new();
    for line in text.lines() {
        if line.starts_with("Stack backtrace:") {
            break;
        }
        lines.push(line);
    }
    lines.join("\n").trim().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_errors_lose_the_backtrace() {
        let err = b"Traceback (most recent call last):\n  File \"app.py\", line 1\nSyntaxError: bad\n\nStack backtrace:\n   0: x\n";
        assert_eq!(
            tool_error(err, b""),
            "Traceback (most recent call last):\n  File \"app.py\", line 1\nSyntaxError: bad"
        );
        assert_eq!(tool_error(b"  \n", b"out\n"), "out");
    }
}
