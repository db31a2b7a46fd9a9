//! Operators in Rust: the bundle's Cargo crate, built for `wasm32-wasip2`.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};

/// Compile the bundle's crate for `wasm32-wasip2` (release) and return the
/// component's path.
pub fn build_crate(dir: &Path) -> anyhow::Result<PathBuf> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let output = Command::new(&cargo)
        .args([
            "build",
            "--release",
            "--target",
            "wasm32-wasip2",
            "--message-format=json-render-diagnostics",
            "--manifest-path",
        ])
        .arg(dir.join("Cargo.toml"))
        .stderr(std::process::Stdio::inherit())
        .output()
        .with_context(|| format!("cannot run {cargo} to build the bundle's crate"))?;
    if !output.status.success() {
        bail!(
            "building {} for wasm32-wasip2 failed (is the target installed? `rustup target add wasm32-wasip2`)",
            dir.display()
        );
    }
    // Cargo names the manifest by its canonical path: a project reached
    // through `..` or a link is the same crate.
    let canonical = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_owned());
    let manifest_path = canonical(&dir.join("Cargo.toml"));
    let mut found = None;
    for line in output.stdout.split(|b| *b == b'\n') {
        let Ok(msg) = serde_json::from_slice::<serde_json::Value>(line) else {
            continue;
        };
        if msg["reason"] != "compiler-artifact" {
            continue;
        }
        let is_ours = msg["manifest_path"]
            .as_str()
            .is_some_and(|p| canonical(Path::new(p)) == manifest_path);
        let is_cdylib = msg["target"]["kind"]
            .as_array()
            .is_some_and(|k| k.iter().any(|k| k == "cdylib"));
        if is_ours && is_cdylib {
            found = msg["filenames"]
                .as_array()
                .and_then(|f| {
                    f.iter()
                        .filter_map(|f| f.as_str())
                        .find(|f| f.ends_with(".wasm"))
                })
                .map(PathBuf::from);
        }
    }
    found.with_context(|| {
        format!(
            "building {} produced no component: its crate needs `crate-type = [\"cdylib\"]`",
            dir.display()
        )
    })
}
