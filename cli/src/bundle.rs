//! Bundles: a directory (or a `.weir` archive) with a `weir.toml` manifest
//! and a component, either built (`[component] path`) or as a Cargo crate
//! that `weir build` compiles for `wasm32-wasip2`.

use std::path::{Component as PathPart, Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};
use weir_model::Manifest;

/// The manifest's file name.
pub const MANIFEST: &str = "weir.toml";
/// The component's name inside an archive.
pub const ARCHIVE_COMPONENT: &str = "component.wasm";

/// A bundle ready to run.
pub struct Bundle {
    /// Its directory (a temporary one for an archive).
    pub dir: PathBuf,
    /// The parsed manifest.
    pub manifest: Manifest,
    /// The component file.
    pub component: PathBuf,
    _unpacked: Option<tempfile::TempDir>,
}

fn read_manifest(dir: &Path) -> anyhow::Result<Manifest> {
    let path = dir.join(MANIFEST);
    let text = std::fs::read_to_string(&path).with_context(|| {
        format!(
            "{} is not a bundle: cannot read {}",
            dir.display(),
            path.display()
        )
    })?;
    Manifest::parse(&text).with_context(|| format!("in {}", path.display()))
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
    let manifest = read_manifest(&dir)?;
    let component = match manifest.component.as_ref().and_then(|c| c.path.as_ref()) {
        Some(p) => {
            let c = dir.join(p);
            if !c.is_file() {
                bail!("the manifest's component {} does not exist", c.display());
            }
            c
        }
        None if dir.join("Cargo.toml").is_file() => {
            if build {
                build_crate(&dir)?
            } else {
                bail!(
                    "{} has no built component: run `weir build {}`",
                    dir.display(),
                    path.display()
                );
            }
        }
        None => bail!(
            "{} has neither a `[component] path` in its manifest nor a Cargo.toml to build one",
            dir.display()
        ),
    };
    Ok(Bundle {
        dir,
        manifest,
        component,
        _unpacked: None,
    })
}

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
    let manifest_path = dir.join("Cargo.toml");
    let mut found = None;
    for line in output.stdout.split(|b| *b == b'\n') {
        let Ok(msg) = serde_json::from_slice::<serde_json::Value>(line) else {
            continue;
        };
        if msg["reason"] != "compiler-artifact" {
            continue;
        }
        let is_ours = msg["manifest_path"].as_str().map(Path::new) == Some(manifest_path.as_path());
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

/// Write the single-file archive of a bundle: `weir.toml` and the component.
pub fn write_archive(bundle: &Bundle, out: &Path) -> anyhow::Result<()> {
    if let Some(parent) = out.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let file =
        std::fs::File::create(out).with_context(|| format!("cannot create {}", out.display()))?;
    let mut tar = tar::Builder::new(flate2::write::GzEncoder::new(
        file,
        flate2::Compression::default(),
    ));
    tar.append_path_with_name(bundle.dir.join(MANIFEST), MANIFEST)?;
    tar.append_path_with_name(&bundle.component, ARCHIVE_COMPONENT)?;
    tar.into_inner()?.finish()?;
    Ok(())
}

/// Unpack an archive into a temporary directory, refusing paths that would
/// land outside it.
fn open_archive(path: &Path) -> anyhow::Result<Bundle> {
    let tmp = tempfile::tempdir()?;
    let file = std::fs::File::open(path)?;
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(file));
    let entries = archive
        .entries()
        .with_context(|| format!("{} is not a bundle archive (a .tar.gz)", path.display()))?;
    for entry in entries {
        let mut entry = entry
            .with_context(|| format!("{} is not a bundle archive (a .tar.gz)", path.display()))?;
        let name = entry.path()?.into_owned();
        if name
            .components()
            .any(|p| !matches!(p, PathPart::Normal(_) | PathPart::CurDir))
        {
            bail!(
                "{}: the archive entry {} leaves the bundle",
                path.display(),
                name.display()
            );
        }
        entry.unpack_in(tmp.path())?;
    }
    let dir = tmp.path().to_path_buf();
    let manifest = read_manifest(&dir)?;
    // An archive always carries its component under one name, whatever the
    // manifest's `[component] path` said in the source directory.
    let component = dir.join(ARCHIVE_COMPONENT);
    if !component.is_file() {
        bail!(
            "{}: the archive has no component ({})",
            path.display(),
            component.display()
        );
    }
    Ok(Bundle {
        dir,
        manifest,
        component,
        _unpacked: Some(tmp),
    })
}
