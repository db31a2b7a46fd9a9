//! Operators in Python: a project with a `pyproject.toml`, built into a
//! component with componentize-py. The SDK (the `weir` package) and the
//! contract's WIT travel inside this binary, so a build needs only the
//! project and componentize-py.
//!
//! ```toml
//! # pyproject.toml
//! [project]
//! name = "wordcount"
//!
//! [tool.weir]
//! module = "wordcount"      # the module that registers the operators (default: the project's name)
//! python-path = ["src"]     # more directories to import from (default: none)
//! ```
//!
//! The component goes to `.weir/component.wasm` in the project, and is built
//! again only when a Python file, the SDK or the toolchain changed.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};

use super::project::{self, Build, Start};

/// The version of componentize-py the SDK is built and tested with.
pub const COMPONENTIZE_PY: &str = "0.25.1";

/// The SDK's modules, as the `weir` package.
const SDK: &[(&str, &str)] = &[
    (
        "__init__.py",
        include_str!("../../../sdk/python/weir/__init__.py"),
    ),
    (
        "_batch.py",
        include_str!("../../../sdk/python/weir/_batch.py"),
    ),
    (
        "_component.py",
        include_str!("../../../sdk/python/weir/_component.py"),
    ),
    (
        "_context.py",
        include_str!("../../../sdk/python/weir/_context.py"),
    ),
    (
        "_driver.py",
        include_str!("../../../sdk/python/weir/_driver.py"),
    ),
    (
        "_operators.py",
        include_str!("../../../sdk/python/weir/_operators.py"),
    ),
    (
        "_rows.py",
        include_str!("../../../sdk/python/weir/_rows.py"),
    ),
    (
        "_state.py",
        include_str!("../../../sdk/python/weir/_state.py"),
    ),
    (
        "codec.py",
        include_str!("../../../sdk/python/weir/codec.py"),
    ),
    (
        "testing.py",
        include_str!("../../../sdk/python/weir/testing.py"),
    ),
    (
        "types.py",
        include_str!("../../../sdk/python/weir/types.py"),
    ),
];

/// The module componentize-py starts from: it imports the operator module
/// (which registers the operators) and the export of `list-operators`.
const APP: &str = "import {module}  # registers the operators\nfrom weir._component import Operators  # noqa: F401\n";

/// Where componentize-py finds the `operator` resource: a module named after
/// the exported interface.
const RESOURCE: &str = "from weir._component import Operator  # noqa: F401\n";

/// Module names the build itself uses.
const RESERVED: &[&str] = &[
    "operators",
    "weir",
    "weir_component_app",
    "wit_world",
    "componentize_py_types",
    "componentize_py_runtime",
    "componentize_py_async_support",
    "poll_loop",
];

/// The `[tool.weir]` table of a `pyproject.toml`, and the project's name.
#[derive(Debug, PartialEq)]
struct Project {
    module: String,
    python_path: Vec<PathBuf>,
}

fn read_project(dir: &Path) -> anyhow::Result<Project> {
    let path = dir.join("pyproject.toml");
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let doc: toml::Table =
        toml::from_str(&text).with_context(|| format!("{} is not TOML", path.display()))?;
    let tool = doc
        .get("tool")
        .and_then(|t| t.get("weir"))
        .cloned()
        .unwrap_or(toml::Value::Table(Default::default()));
    let module = match tool.get("module") {
        Some(toml::Value::String(m)) => m.clone(),
        Some(_) => bail!("{}: [tool.weir] module must be a string", path.display()),
        None => match doc.get("project").and_then(|p| p.get("name")) {
            Some(toml::Value::String(name)) => name.replace(['-', '.'], "_").to_lowercase(),
            _ => bail!(
                "{}: say which module registers the operators, with [tool.weir] module = \"...\"",
                path.display()
            ),
        },
    };
    if module.is_empty() || !module.split('.').all(is_identifier) {
        bail!(
            "{}: [tool.weir] module = {module:?} is not a Python module name",
            path.display()
        );
    }
    if RESERVED.contains(&module.split('.').next().unwrap_or_default()) {
        bail!(
            "{}: the operator module may not be called `{module}` (the build uses that name): rename it",
            path.display()
        );
    }
    let python_path = match tool.get("python-path") {
        None => Vec::new(),
        Some(toml::Value::Array(items)) => items
            .iter()
            .map(|i| match i {
                toml::Value::String(p) => {
                    let full = dir.join(p);
                    if full.is_dir() {
                        Ok(full)
                    } else {
                        bail!("{}: python-path {p:?} is not a directory", path.display())
                    }
                }
                _ => bail!(
                    "{}: python-path holds directories, as strings",
                    path.display()
                ),
            })
            .collect::<anyhow::Result<_>>()?,
        Some(_) => bail!("{}: [tool.weir] python-path must be a list", path.display()),
    };
    Ok(Project {
        module,
        python_path,
    })
}

fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

/// Whether `module` exists in one of `roots`.
fn module_exists(roots: &[PathBuf], module: &str) -> bool {
    let rel: PathBuf = module.split('.').collect();
    roots.iter().any(|r| {
        r.join(&rel).with_extension("py").is_file() || r.join(&rel).join("__init__.py").is_file()
    })
}

/// The componentize-py to build with: `WEIR_COMPONENTIZE_PY`, else the one
/// `scripts/setup.sh` installs, else the one on the `PATH`.
fn componentize_py() -> anyhow::Result<PathBuf> {
    if let Some(p) = std::env::var_os("WEIR_COMPONENTIZE_PY") {
        return Ok(PathBuf::from(p));
    }
    let installed = crate::toolchains_dir().join("python/bin/componentize-py");
    if installed.is_file() {
        return Ok(installed);
    }
    let on_path = Command::new("componentize-py").arg("--version").output();
    if on_path.is_ok_and(|o| o.status.success()) {
        return Ok(PathBuf::from("componentize-py"));
    }
    bail!(
        "building a Python operator needs componentize-py {COMPONENTIZE_PY}, which was not found: \
         run `scripts/setup.sh python`, or `pip install componentize-py=={COMPONENTIZE_PY}` and \
         set WEIR_COMPONENTIZE_PY to its path"
    )
}

/// Build the component of the Python project in `dir`; its path.
pub fn build(dir: &Path) -> anyhow::Result<PathBuf> {
    let project = read_project(dir)?;
    let mut roots = vec![dir.to_path_buf()];
    roots.extend(project.python_path.iter().cloned());
    if !module_exists(&roots, &project.module) {
        bail!(
            "{}: the operator module `{}` is not there (no {}.py): set [tool.weir] module in pyproject.toml",
            dir.display(),
            project.module,
            project.module.replace('.', "/")
        );
    }
    let tool = componentize_py()?;
    let settings = [
        COMPONENTIZE_PY,
        &tool.display().to_string(),
        &project.module,
    ];
    let digest = project::digest(&settings, SDK, &roots, &["py"])?;
    let build = match Build::start(dir, digest, "weir", SDK)? {
        Start::Built(out) => return Ok(out),
        Start::Needed(build) => build,
    };
    let stage = build.stage();
    std::fs::write(
        stage.join("weir_component_app.py"),
        APP.replace("{module}", &project.module),
    )?;
    std::fs::write(stage.join("operators.py"), RESOURCE)?;
    eprintln!("building the Python component of {} ...", dir.display());
    let mut cmd = Command::new(&tool);
    cmd.arg("-d")
        .arg(stage.join("wit"))
        .args([
            "-w",
            "operator-component",
            "componentize",
            "weir_component_app",
        ])
        .arg("-p")
        .arg(stage);
    for root in &roots {
        cmd.arg("-p").arg(root);
    }
    cmd.arg("-o").arg(build.partial());
    project::run(
        cmd,
        &format!("building the Python component of {}", dir.display()),
    )?;
    build.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn project(toml: &str) -> anyhow::Result<Project> {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("pyproject.toml"), toml).unwrap();
        std::fs::create_dir(dir.path().join("src")).unwrap();
        read_project(dir.path()).map(|p| Project {
            python_path: p
                .python_path
                .iter()
                .map(|x| x.strip_prefix(dir.path()).unwrap().to_path_buf())
                .collect(),
            ..p
        })
    }

    #[test]
    fn the_module_comes_from_tool_weir_or_the_project_name() {
        let p = project("[project]\nname = \"Py-Word.count\"\n").unwrap();
        assert_eq!(p.module, "py_word_count");
        let p = project("[tool.weir]\nmodule = \"ops.main\"\npython-path = [\"src\"]\n").unwrap();
        assert_eq!(p.module, "ops.main");
        assert_eq!(p.python_path, [PathBuf::from("src")]);
    }

    #[test]
    fn every_module_of_the_sdk_travels_with_it() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sdk/python/weir");
        let mut modules: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".py"))
            .collect();
        modules.sort();
        let mut carried: Vec<&str> = SDK.iter().map(|(name, _)| *name).collect();
        carried.sort();
        assert_eq!(modules, carried);
    }

    #[test]
    fn bad_projects_are_named() {
        for (toml, expected) in [
            (
                "[tool.weir]\nmodule = \"operators\"\n",
                "may not be called `operators`",
            ),
            ("[tool.weir]\nmodule = \"1x\"\n", "not a Python module name"),
            (
                "[tool.weir]\npython-path = [\"nope\"]\nmodule = \"m\"\n",
                "not a directory",
            ),
            ("[tool]\n", "say which module"),
            ("[tool.weir\n", "not TOML"),
        ] {
            let e = format!("{:#}", project(toml).unwrap_err());
            assert!(e.contains(expected), "{toml}: {e}");
        }
    }
}
