//! Bundles: a directory (or a `.weir` archive) with a `weir.toml` manifest
//! and a component, either built (`[component] path`) or as a Cargo crate
//! that `weir build` compiles for `wasm32-wasip2`, or a Python project
//! (`pyproject.toml`) that it builds with componentize-py.

mod python;
mod rust;

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use weir_model::Manifest;
use weir_model::bundle::{BundleFiles, COMPONENT_FILE, MANIFEST_FILE, pack, unpack};

/// A bundle ready to run.
pub struct Bundle {
    /// Its directory (the archive's, for an archive).
    pub dir: PathBuf,
    /// The manifest's text.
    pub manifest_text: String,
    /// The parsed manifest.
    pub manifest: Manifest,
    /// Where the component came from (for messages).
    pub component_path: PathBuf,
    /// The component's bytes.
    pub component: Vec<u8>,
}

fn read_manifest(dir: &Path) -> anyhow::Result<(String, Manifest)> {
    let path = dir.join(MANIFEST_FILE);
    let text = std::fs::read_to_string(&path).with_context(|| {
        format!(
            "{} is not a bundle: cannot read {}",
            dir.display(),
            path.display()
        )
    })?;
    let manifest = Manifest::parse(&text).with_context(|| format!("in {}", path.display()))?;
    Ok((text, manifest))
}

/// Open a bundle directory or archive; build its crate when it has one and
/// no built component.
pub fn open(path: &Path, build: bool) -> anyhow::Result<Bundle> {
    if path.is_file() {
        return open_archive(path);
    }
    if !path.is_dir() {
        bail!("{}: no such bundle directory or archive", path.display());
    }
    let dir = path.canonicalize()?;
    let (manifest_text, manifest) = read_manifest(&dir)?;
    let component_path = match manifest.component.as_ref().and_then(|c| c.path.as_ref()) {
        Some(p) => {
            let c = dir.join(p);
            if !c.is_file() {
                bail!("the manifest's component {} does not exist", c.display());
            }
            c
        }
        None if dir.join("Cargo.toml").is_file() => {
            if build {
                rust::build_crate(&dir)?
            } else {
                bail!(
                    "{} has no built component: run `weir build {}`",
                    dir.display(),
                    path.display()
                );
            }
        }
        None if dir.join("pyproject.toml").is_file() => {
            if build {
                python::build(&dir)?
            } else {
                bail!(
                    "{} has no built component: run `weir build {}`",
                    dir.display(),
                    path.display()
                );
            }
        }
        None => bail!(
            "{} has neither a `[component] path` in its manifest nor an operator project to build one from (Cargo.toml, pyproject.toml)",
            dir.display()
        ),
    };
    let component = std::fs::read(&component_path)
        .with_context(|| format!("cannot read {}", component_path.display()))?;
    Ok(Bundle {
        dir,
        manifest_text,
        manifest,
        component_path,
        component,
    })
}

/// Write the single-file archive of a bundle.
pub fn write_archive(bundle: &Bundle, out: &Path) -> anyhow::Result<()> {
    if let Some(parent) = out.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let files = BundleFiles {
        manifest: bundle.manifest_text.clone(),
        component: bundle.component.clone(),
    };
    std::fs::write(out, pack(&files)?).with_context(|| format!("cannot write {}", out.display()))
}

/// The largest archive `weir run` unpacks.
const MAX_UNPACKED: u64 = 512 << 20;

/// Read an archive, in memory.
fn open_archive(path: &Path) -> anyhow::Result<Bundle> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    let files = unpack(&bytes, MAX_UNPACKED).with_context(|| path.display().to_string())?;
    let manifest =
        Manifest::parse(&files.manifest).with_context(|| format!("in {}", path.display()))?;
    let dir = path.parent().unwrap_or(Path::new(".")).canonicalize()?;
    Ok(Bundle {
        dir,
        manifest_text: files.manifest,
        manifest,
        component_path: path.join(COMPONENT_FILE),
        component: files.component,
    })
}
