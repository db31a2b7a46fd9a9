//! Bundles: a directory (or a `.weir` archive) with a `weir.toml` manifest
//! and its components. A component is built already (a `.wasm` file) or an
//! operator project that `weir build` builds: a Cargo crate (compiled for
//! `wasm32-wasip2`), a Python project (`pyproject.toml`, built with
//! componentize-py) or a JavaScript project (`package.json`, bundled with
//! esbuild and built with jco's QuickJS backend). A bundle of one component names it in `[component]`,
//! or is itself the project; a job written in several languages names each
//! in `[components.NAME]`.

mod js;
mod project;
mod python;
mod rust;

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use weir_host::{JobComponents, WasmRuntime};
use weir_model::Manifest;
use weir_model::bundle::{
    BundleFiles, COMPONENT_FILE, COMPONENTS_DIR, DEFAULT_COMPONENT, MANIFEST_FILE, pack, unpack,
};

/// One component of a bundle.
pub struct Component {
    /// Its name in the bundle ([`DEFAULT_COMPONENT`] for a bundle of one).
    pub name: String,
    /// Where it came from (for messages).
    pub path: PathBuf,
    /// Its bytes.
    pub bytes: Vec<u8>,
}

/// A bundle ready to run.
pub struct Bundle {
    /// Its directory (the archive's, for an archive).
    pub dir: PathBuf,
    /// The manifest's text.
    pub manifest_text: String,
    /// The parsed manifest.
    pub manifest: Manifest,
    /// Its components, in name order.
    pub components: Vec<Component>,
}

impl Bundle {
    /// Load every component into `runtime`; an error names the file.
    pub fn load(&self, runtime: &WasmRuntime) -> anyhow::Result<JobComponents> {
        for c in &self.components {
            runtime
                .load(&c.bytes)
                .with_context(|| format!("component {}", c.path.display()))?;
        }
        // Loaded components are cached: this only collects them.
        Ok(JobComponents::load(runtime, self.files())?)
    }

    /// The components as (name, bytes), for an archive or a job.
    pub fn files(&self) -> Vec<(String, Vec<u8>)> {
        self.components
            .iter()
            .map(|c| (c.name.clone(), c.bytes.clone()))
            .collect()
    }
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

/// The component at `path`: the file itself, or the component built from
/// the operator project in the directory (when `build`).
fn component_at(path: &Path, build: bool, shown: &Path) -> anyhow::Result<PathBuf> {
    if path.is_file() {
        return Ok(path.to_path_buf());
    }
    if !path.is_dir() {
        bail!("the component {} does not exist", path.display());
    }
    let language = if path.join("Cargo.toml").is_file() {
        "rust"
    } else if path.join("pyproject.toml").is_file() {
        "python"
    } else if path.join("package.json").is_file() {
        "js"
    } else {
        bail!(
            "{} is not an operator project: it has no Cargo.toml, pyproject.toml or package.json",
            path.display()
        );
    };
    if !build {
        bail!(
            "{} has no built component: run `weir build {}`",
            path.display(),
            shown.display()
        );
    }
    match language {
        "rust" => rust::build_crate(path),
        "python" => python::build(path),
        _ => js::build(path),
    }
}

/// Open a bundle directory or archive; build its operator projects when
/// `build`.
pub fn open(path: &Path, build: bool) -> anyhow::Result<Bundle> {
    if path.is_file() {
        return open_archive(path);
    }
    if !path.is_dir() {
        bail!("{}: no such bundle directory or archive", path.display());
    }
    let dir = path.canonicalize()?;
    let (manifest_text, manifest) = read_manifest(&dir)?;
    let mut wanted: Vec<(String, PathBuf)> = manifest
        .components
        .iter()
        .map(|(name, c)| (name.clone(), dir.join(c.path.as_deref().unwrap_or("."))))
        .collect();
    if wanted.is_empty() {
        let at = match manifest.component.as_ref().and_then(|c| c.path.as_ref()) {
            Some(p) => Some(dir.join(p)),
            None if ["Cargo.toml", "pyproject.toml", "package.json"]
                .iter()
                .any(|f| dir.join(f).is_file()) =>
            {
                Some(dir.clone())
            }
            // Sources, built-in operators and sinks only: no component.
            None if manifest.component.is_none() && manifest.first_function().is_none() => None,
            None => bail!(
                "{} has neither a `[component] path` in its manifest nor an operator project to build one from (Cargo.toml, pyproject.toml, package.json){}",
                dir.display(),
                manifest
                    .first_function()
                    .map(|f| format!(", and its {f} needs one"))
                    .unwrap_or_default()
            ),
        };
        wanted.extend(at.map(|at| (DEFAULT_COMPONENT.to_owned(), at)));
    }
    let mut components = Vec::new();
    for (name, at) in wanted {
        let built = component_at(&at, build, path)
            .with_context(|| format!("component `{name}` of {}", dir.display()))?;
        let bytes =
            std::fs::read(&built).with_context(|| format!("cannot read {}", built.display()))?;
        components.push(Component {
            name,
            path: built,
            bytes,
        });
    }
    Ok(Bundle {
        dir,
        manifest_text,
        manifest,
        components,
    })
}

/// Write the single-file archive of a bundle.
pub fn write_archive(bundle: &Bundle, out: &Path) -> anyhow::Result<()> {
    if let Some(parent) = out.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(out, archive(bundle)?).with_context(|| format!("cannot write {}", out.display()))
}

/// The single-file archive of a bundle, in memory.
pub fn archive(bundle: &Bundle) -> anyhow::Result<Vec<u8>> {
    Ok(pack(&BundleFiles {
        manifest: bundle.manifest_text.clone(),
        components: bundle.files(),
    })?)
}

/// The largest archive `weir run` unpacks.
const MAX_UNPACKED: u64 = 512 << 20;

/// Read an archive, in memory.
fn open_archive(path: &Path) -> anyhow::Result<Bundle> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    let files = unpack(&bytes, MAX_UNPACKED).with_context(|| path.display().to_string())?;
    let manifest =
        Manifest::parse(&files.manifest).with_context(|| format!("in {}", path.display()))?;
    if files.components.is_empty()
        && let Some(why) = manifest.needs_component()
    {
        bail!("{}: {why}", path.display());
    }
    let dir = path.parent().unwrap_or(Path::new(".")).canonicalize()?;
    let single = files.components.len() == 1;
    Ok(Bundle {
        dir,
        manifest_text: files.manifest,
        manifest,
        components: files
            .components
            .into_iter()
            .map(|(name, bytes)| Component {
                path: if single {
                    path.join(COMPONENT_FILE)
                } else {
                    path.join(COMPONENTS_DIR).join(format!("{name}.wasm"))
                },
                name,
                bytes,
            })
            .collect(),
    })
}
