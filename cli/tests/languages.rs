//! Operators in Python, end to end: `weir build` and `weir run` build a
//! Python project with componentize-py (installed by `scripts/setup.sh`),
//! the Python word count gives exact counts at parallelism 1 and 4, and a
//! Python operator that raises, loops or hoards memory fails its job with
//! an error that says so (the exception's message and traceback, the
//! deadline, the memory cap).

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

/// Run `weir args…` in the workspace's root, for at most `limit`.
fn weir(args: &[&str], limit: Duration) -> Output {
    let child = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(args)
        .current_dir(common::root())
        .env(
            "WEIR_CACHE_DIR",
            std::env::temp_dir().join("weir-cli-tests-cache"),
        )
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    common::finish_within(child, limit, &format!("weir {}", args.join(" ")))
}

fn said(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Building a Python component takes seconds: once per test binary.
fn guests() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let out = weir(&["build", "tests/guests/python"], Duration::from_secs(300));
        assert!(out.status.success(), "{}", said(&out));
        common::root().join("tests/guests/python/.weir/component.wasm")
    })
}

/// Words as the examples define them: maximal runs of letters and digits,
/// lowercased.
fn expected_counts(text: &str) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for word in text.split(|c: char| !c.is_alphanumeric()) {
        if !word.is_empty() {
            *counts.entry(word.to_lowercase()).or_insert(0) += 1;
        }
    }
    counts
}

/// A text of `lines` lines in several scripts, with punctuation, digits,
/// underscores, apostrophes and case to fold.
fn sample_text(lines: usize) -> String {
    let words = [
        "Hello,",
        "wörld!",
        "It's",
        "2024",
        "snake_case",
        "ΟΔΟΣ",
        "Σοφία",
        "東京",
        "naïve",
        "Straße",
        "x1y2",
        "İstanbul",
        "—",
        "don't",
        "HELLO",
        "(quoted)",
        "a.b.c",
        "Привет",
        "the",
        "The",
        "THE",
        "¿qué?",
        "e-mail",
        "3.14",
        "",
    ];
    let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut out = String::new();
    for _ in 0..lines {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let n = (seed % 12) as usize;
        let line: Vec<&str> = (0..n)
            .map(|i| words[((seed >> (i * 5)) as usize + i) % words.len()])
            .collect();
        out.push_str(&line.join(" "));
        out.push('\n');
    }
    out
}

/// The final count of each word in a JSON-lines output of the word count,
/// checking that each word's counts go 1, 2, 3, … in order.
fn counted(path: &Path) -> BTreeMap<String, u64> {
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    for line in std::fs::read_to_string(path).unwrap().lines() {
        let r: serde_json::Value = serde_json::from_str(line).unwrap();
        let word = r["word"].as_str().unwrap().to_owned();
        let n = r["count"].as_u64().unwrap();
        let last = counts.entry(word.clone()).or_insert(0);
        assert_eq!(n, *last + 1, "{word}: count {n} after {last}");
        *last = n;
    }
    counts
}

#[test]
fn the_python_word_count_is_exact_at_parallelism_1_and_4() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("input.txt");
    let text = sample_text(3_000);
    std::fs::write(&input, &text).unwrap();
    let expected = expected_counts(&text);
    assert!(expected.len() > 20);
    for parallelism in ["1", "4"] {
        let output = dir.path().join(format!("counts-{parallelism}.jsonl"));
        let out = weir(
            &[
                "run",
                "examples/python-wordcount",
                "--param",
                &format!("input={}", input.display()),
                "--param",
                &format!("output={}", output.display()),
                "--parallelism",
                parallelism,
            ],
            Duration::from_secs(300),
        );
        assert!(out.status.success(), "{}", said(&out));
        assert_eq!(counted(&output), expected, "parallelism {parallelism}");
    }
}

/// A job of ten generated lines through the Python operator `function`.
fn hostile_job(dir: &Path, function: &str) -> PathBuf {
    let bundle = dir.join(function);
    std::fs::create_dir_all(&bundle).unwrap();
    std::fs::write(
        bundle.join("weir.toml"),
        format!(
            "[job]\nname = '{function}'\n[component]\npath = '{}'\n\
             [[source]]\nname = 'lines'\ntype = 'generator'\npattern = 'words'\ncount = 10\n\
             [[operator]]\nname = 'guest'\nfunction = '{function}'\n\
             [[sink]]\nname = 'out'\ntype = 'stdout'\n",
            guests().display()
        ),
    )
    .unwrap();
    bundle
}

#[test]
fn a_python_exception_fails_the_job_with_its_message_and_traceback() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = hostile_job(dir.path(), "py-raises");
    let out = weir(&["run", bundle.to_str().unwrap()], Duration::from_secs(120));
    let said = said(&out);
    assert!(!out.status.success(), "{said}");
    for expected in [
        "operator `guest`, subtask 0 failed",
        "ValueError: cannot parse record",
        "as a number",
        "Traceback (most recent call last):",
        "File \"guests.py\", line",
        "in raises",
    ] {
        assert!(said.contains(expected), "missing {expected:?} in:\n{said}");
    }
}

#[test]
fn an_endless_python_loop_is_stopped_by_the_deadline_and_a_memory_bomb_by_the_cap() {
    let dir = tempfile::tempdir().unwrap();
    for (function, says) in [
        ("py-endless", "call deadline of 3000 ms"),
        ("py-membomb", "linear memory; the limit is 268435456"),
    ] {
        let bundle = hostile_job(dir.path(), function);
        let out = weir(
            &[
                "run",
                bundle.to_str().unwrap(),
                "--call-timeout-ms",
                "3000",
                "--memory-limit-mib",
                "256",
            ],
            Duration::from_secs(120),
        );
        let said = said(&out);
        assert!(!out.status.success(), "{said}");
        assert!(
            said.contains(says),
            "{function}: missing {says:?} in:\n{said}"
        );
        assert!(said.contains("operator `guest`"), "{said}");
    }
}

#[test]
fn a_python_project_that_does_not_build_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("broken");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(
        project.join("weir.toml"),
        "[job]\nname = 'broken'\n[[source]]\nname = 's'\ntype = 'generator'\npattern = 'words'\ncount = 1\n\
         [[operator]]\nname = 'm'\nfunction = 'm'\n[[sink]]\nname = 'o'\ntype = 'stdout'\n",
    )
    .unwrap();
    std::fs::write(
        project.join("pyproject.toml"),
        "[project]\nname = 'broken'\n[tool.weir]\nmodule = 'ops'\n",
    )
    .unwrap();
    let build = |limit| weir(&["build", project.to_str().unwrap()], limit);

    // No module file.
    let out = build(Duration::from_secs(60));
    assert!(!out.status.success());
    assert!(
        said(&out).contains("the operator module `ops` is not there"),
        "{}",
        said(&out)
    );

    // A syntax error: Python's own message, with the file and line.
    std::fs::write(
        project.join("ops.py"),
        "import weir\n\ndef broken(:\n    pass\n",
    )
    .unwrap();
    let out = build(Duration::from_secs(300));
    let said = said(&out);
    assert!(!out.status.success(), "{said}");
    assert!(said.contains("SyntaxError"), "{said}");
    assert!(said.contains("ops.py"), "{said}");
    assert!(!said.contains("Stack backtrace"), "{said}");
}
