//! `weir new`: an operator project to start from, in Rust, Python or
//! JavaScript — operators (a word count), a manifest, a test and a sample
//! input that `weir run` runs as it is.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

/// The language of a new project.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Lang {
    /// A Cargo crate built for `wasm32-wasip2`.
    Rust,
    /// A Python project built with componentize-py.
    Python,
    /// A JavaScript project built with esbuild and jco.
    Js,
}

const JOB: &str = include_str!("job.toml");
const INPUT: &str = include_str!("input.txt");

/// Where the SDKs of this build of `weir` are (its source tree).
fn sdk(relative: &str) -> anyhow::Result<PathBuf> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(relative);
    path.canonicalize().with_context(|| {
        format!(
            "the SDK is not at {} (where this `weir` was built from): build `weir` from a clone of Weir",
            path.display()
        )
    })
}

/// Whether `name` can name a project in every language: a lowercase letter,
/// then lowercase letters, digits, `-` and `_`, at most 64 in all.
fn valid(name: &str) -> bool {
    name.len() <= 64
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
}

/// Create the project `dir` (its last component is its name).
pub fn create(dir: &Path, lang: Lang) -> anyhow::Result<()> {
    let name = dir
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default()
        .to_owned();
    if !valid(&name) {
        bail!(
            "{name:?} cannot name a project: use a lowercase letter, then lowercase letters, digits, `-` and `_`"
        );
    }
    if dir.exists() {
        bail!("{} is there already: give a new directory", dir.display());
    }
    let module = name.replace('-', "_");
    let fill = |template: &str, sdk: &Path| {
        template
            .replace("{name}", &name)
            .replace("{module}", &module)
            .replace("{sdk}", &sdk.display().to_string())
    };
    let mut files: Vec<(String, String)> = vec![
        ("weir.toml".into(), fill(JOB, Path::new(""))),
        ("data/input.txt".into(), INPUT.into()),
        (
            ".gitignore".into(),
            ".weir/\ndist/\ntarget/\nnode_modules/\n__pycache__/\n".into(),
        ),
    ];
    let (test, readme) = match lang {
        Lang::Rust => {
            let sdk = sdk("guest-sdk")?;
            files.push((
                "Cargo.toml".into(),
                fill(include_str!("rust-Cargo.toml"), &sdk),
            ));
            files.push(("src/lib.rs".into(), fill(include_str!("rust-lib.rs"), &sdk)));
            // The versions this `weir` is built and tested with.
            files.push((
                "Cargo.lock".into(),
                include_str!("../../../Cargo.lock").into(),
            ));
            ("cargo test".to_owned(), "src/lib.rs")
        }
        Lang::Python => {
            let sdk = sdk("sdk/python")?;
            files.push((
                "pyproject.toml".into(),
                fill(include_str!("python-pyproject.toml"), &sdk),
            ));
            files.push((
                format!("{module}.py"),
                fill(include_str!("python-module.py"), &sdk),
            ));
            files.push((
                format!("test_{module}.py"),
                fill(include_str!("python-test.py"), &sdk),
            ));
            let python = crate::toolchains_dir().join("python/bin/python");
            (
                format!(
                    "PYTHONPATH={} {} -m pytest",
                    sdk.display(),
                    python.display()
                ),
                "the module",
            )
        }
        Lang::Js => {
            let sdk = sdk("sdk/js")?;
            files.push((
                "package.json".into(),
                fill(include_str!("js-package.json"), &sdk),
            ));
            files.push(("index.js".into(), fill(include_str!("js-index.js"), &sdk)));
            files.push((
                "index.test.js".into(),
                fill(include_str!("js-index.test.js"), &sdk),
            ));
            ("npm install && node --test".to_owned(), "index.js")
        }
    };
    files.push((
        "README.md".into(),
        format!(
            "# {name}\n\nA Weir job: {readme} holds its operators (a word count), `weir.toml` the job.\n\n\
             ```sh\nweir run {name}                # runs data/input.txt through the job\n\
             weir build {name}              # the component, and dist/{name}.weir to submit\n```\n\n\
             Tests, natively (in the project): `{test}`.\n"
        ),
    ));
    for (path, text) in &files {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().expect("a file in the project"))
            .with_context(|| format!("cannot create {}", dir.display()))?;
        std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    }
    println!("created {} ({lang:?})", dir.display());
    println!("  weir run {}", dir.display());
    println!("  tests: {test}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_every_language_takes() {
        assert!(valid("fraud-2_x"));
        for bad in ["", "2x", "Upper", "a b", "a.b", &"x".repeat(65)] {
            assert!(!valid(bad), "{bad:?}");
        }
    }
}
