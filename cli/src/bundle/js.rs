//! Operators in JavaScript: a project with a `package.json`, bundled with
//! esbuild and built into a component by jco's QuickJS backend (or by
//! componentize-js's StarlingMonkey). The SDK (imported as `weir`) travels
//! inside this binary; the toolchain is the one `scripts/setup.sh js`
//! installs.
//!
//! ```json
//! {
//!   "name": "fraud",
//!   "main": "index.js",
//!   "weir": { "engine": "quickjs" }
//! }
//! ```
//!
//! `main` (default `index.js`) registers the operators; `weir.engine` is
//! `quickjs` (the default: smaller, faster to start and to run) or
//! `starlingmonkey`. The bundle the component is made of is kept in
//! `.weir/bundle.js`: a guest's stack traces give lines of it.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};

use super::project::{self, Build, Start};

/// The SDK's modules, as the `weir` package.
const SDK: &[(&str, &str)] = &[
    ("src/batch.js", include_str!("../../../sdk/js/src/batch.js")),
    ("src/codec.js", include_str!("../../../sdk/js/src/codec.js")),
    (
        "src/component.js",
        include_str!("../../../sdk/js/src/component.js"),
    ),
    (
        "src/context.js",
        include_str!("../../../sdk/js/src/context.js"),
    ),
    (
        "src/driver.js",
        include_str!("../../../sdk/js/src/driver.js"),
    ),
    ("src/index.js", include_str!("../../../sdk/js/src/index.js")),
    (
        "src/operators.js",
        include_str!("../../../sdk/js/src/operators.js"),
    ),
    ("src/rows.js", include_str!("../../../sdk/js/src/rows.js")),
    ("src/state.js", include_str!("../../../sdk/js/src/state.js")),
    (
        "src/testing.js",
        include_str!("../../../sdk/js/src/testing.js"),
    ),
    ("src/types.js", include_str!("../../../sdk/js/src/types.js")),
];

/// The module the bundle starts from: the project's main module (which
/// registers the operators) and the component's export.
const ENTRY: &str = "import {main};\nexport { operators } from './weir/src/component.js';\n";

/// A JavaScript engine a component can be built on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Engine {
    /// jco's QuickJS backend.
    QuickJs,
    /// componentize-js (SpiderMonkey).
    StarlingMonkey,
}

/// What `package.json` says of the build.
#[derive(Debug)]
struct Project {
    main: PathBuf,
    engine: Engine,
}

fn read_project(dir: &Path) -> anyhow::Result<Project> {
    let path = dir.join("package.json");
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let doc: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))?;
    let main = match doc.get("main") {
        None => "index.js",
        Some(serde_json::Value::String(m)) => m.as_str(),
        Some(_) => bail!("{}: `main` must be a string", path.display()),
    };
    let main = dir.join(main);
    if !main.is_file() {
        bail!(
            "{}: the main module {} is not there: set `main` in package.json",
            dir.display(),
            main.display()
        );
    }
    let engine = match doc.get("weir").and_then(|w| w.get("engine")) {
        None => Engine::QuickJs,
        Some(serde_json::Value::String(e)) if e == "quickjs" => Engine::QuickJs,
        Some(serde_json::Value::String(e)) if e == "starlingmonkey" => Engine::StarlingMonkey,
        Some(other) => bail!(
            "{}: weir.engine = {other}: expected \"quickjs\" or \"starlingmonkey\"",
            path.display()
        ),
    };
    Ok(Project { main, engine })
}

/// The toolchain's `node_modules/.bin`.
fn toolchain() -> anyhow::Result<PathBuf> {
    let bin = crate::toolchains_dir().join("js/node_modules/.bin");
    for tool in ["esbuild", "jco", "componentize-js"] {
        if !bin.join(tool).exists() {
            bail!(
                "building a JavaScript operator needs the toolchain in {} (esbuild, jco, componentize-js), which is not there: run `scripts/setup.sh js`",
                bin.parent()
                    .and_then(Path::parent)
                    .unwrap_or(&bin)
                    .display()
            );
        }
    }
    Ok(bin)
}

/// Build the component of the JavaScript project in `dir`; its path.
pub fn build(dir: &Path) -> anyhow::Result<PathBuf> {
    let project = read_project(dir)?;
    let bin = toolchain()?;
    let engine = format!("{:?}", project.engine);
    let lock = std::fs::read_to_string(bin.join("../../package-lock.json")).unwrap_or_default();
    let settings = [engine.as_str(), &lock, &project.main.display().to_string()];
    let roots = [dir.to_path_buf()];
    let digest = project::digest(&settings, SDK, &roots, &["js", "mjs", "cjs", "json"])?;
    let build = match Build::start(dir, digest, "weir", SDK)? {
        Start::Built(out) => return Ok(out),
        Start::Needed(build) => build,
    };
    let stage = build.stage();
    let main = serde_json::to_string(&project.main.display().to_string())?;
    std::fs::write(stage.join("entry.js"), ENTRY.replace("{main}", &main))?;
    eprintln!("building the JavaScript component of {} ...", dir.display());
    let what = format!("building the JavaScript component of {}", dir.display());
    // One module: the operators, the SDK (for `import ... from 'weir'`) and
    // the project's dependencies; the contract's imports stay imports.
    let mut bundle = Command::new(bin.join("esbuild"));
    bundle
        .current_dir(stage)
        .args([
            "entry.js",
            "--bundle",
            "--format=esm",
            "--platform=neutral",
            "--main-fields=module,main",
            "--keep-names",
            "--log-level=error",
            "--external:weir:*",
            "--alias:weir=./weir/src/index.js",
            "--outfile=bundle.js",
        ])
        .env("NODE_PATH", dir.join("node_modules"));
    project::run(bundle, &what)?;
    let mut cmd = match project.engine {
        Engine::QuickJs => {
            let mut c = Command::new(bin.join("jco"));
            c.args([
                "componentize",
                "bundle.js",
                "-w",
                "wit",
                "-n",
                "operator-component",
            ])
            .args(["--backend", "qjs", "--backend-qjs-disable-async", "-o"]);
            c
        }
        Engine::StarlingMonkey => {
            let mut c = Command::new(bin.join("componentize-js"));
            c.args(["bundle.js", "-w", "wit", "-n", "operator-component"])
                .args(["-d", "http", "fetch-event", "-o"]);
            c
        }
    };
    cmd.current_dir(stage).arg(build.partial());
    project::run(cmd, &what)?;
    std::fs::copy(stage.join("bundle.js"), dir.join(".weir/bundle.js"))?;
    build.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_module_of_the_sdk_travels_with_it() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../sdk/js/src");
        let mut modules: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| format!("src/{}", e.unwrap().file_name().to_string_lossy()))
            .filter(|n| n.ends_with(".js"))
            .collect();
        modules.sort();
        let mut carried: Vec<&str> = SDK.iter().map(|(name, _)| *name).collect();
        carried.sort();
        assert_eq!(modules, carried);
    }
}
