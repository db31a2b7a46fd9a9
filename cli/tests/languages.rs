//! Operators in Python and JavaScript, end to end: `weir build` and `weir
//! run` build a Python project with componentize-py and a JavaScript one
//! with esbuild and jco (the toolchains `scripts/setup.sh` installs); the
//! Python word count gives exact counts at parallelism 1 and 4, the
//! JavaScript fraud detector the Rust one's alerts, a job of Rust, Python
//! and JavaScript operators the expected totals, and an operator in either
//! language that throws, loops or hoards memory fails its job with an error
//! that says so (the exception's message and stack, the deadline, the
//! memory cap).

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use common::json_lines;

/// Run `weir args…` in the workspace's root, for at most `limit`.
fn weir(args: &[&str], limit: Duration) -> Output {
    let child = common::command()
        .args(args)
        .current_dir(common::root())
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

/// The component of the test guests in `language` (`python`, `js`), built
/// once per test binary (a build takes seconds).
fn guests(language: &str) -> PathBuf {
    static BUILT: OnceLock<std::sync::Mutex<BTreeMap<String, PathBuf>>> = OnceLock::new();
    let built = BUILT.get_or_init(Default::default);
    let mut built = built.lock().unwrap_or_else(|e| e.into_inner());
    built
        .entry(language.to_owned())
        .or_insert_with(|| {
            let project = format!("tests/guests/{language}");
            let out = weir(&["build", &project], Duration::from_secs(300));
            assert!(out.status.success(), "{}", said(&out));
            common::root().join(project).join(".weir/component.wasm")
        })
        .clone()
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

/// A job of ten generated lines through the operator `function` of the
/// test guests in `language`.
fn hostile_job(dir: &Path, language: &str, function: &str) -> PathBuf {
    let bundle = dir.join(function);
    std::fs::create_dir_all(&bundle).unwrap();
    std::fs::write(
        bundle.join("weir.toml"),
        format!(
            "[job]\nname = '{function}'\n[component]\npath = '{}'\n\
             [[source]]\nname = 'lines'\ntype = 'generator'\npattern = 'words'\ncount = 10\n\
             [[operator]]\nname = 'guest'\nfunction = '{function}'\n\
             [[sink]]\nname = 'out'\ntype = 'stdout'\n",
            guests(language).display()
        ),
    )
    .unwrap();
    bundle
}

/// Run the job of the hostile guest `function` in `language` with
/// `args`; it fails, saying each of `expected`. What it said.
fn fails_saying(language: &str, function: &str, args: &[&str], expected: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let bundle = hostile_job(dir.path(), language, function);
    let mut run = vec!["run", bundle.to_str().unwrap()];
    run.extend_from_slice(args);
    let out = weir(&run, Duration::from_secs(120));
    let said = said(&out);
    assert!(!out.status.success(), "{said}");
    for e in expected {
        assert!(said.contains(e), "{function}: missing {e:?} in:\n{said}");
    }
    said
}

#[test]
fn forty_python_and_forty_javascript_subtasks_run_in_one_process() {
    // Instances of the big engines come from the host's pool, each
    // pre-initialized: forty of each start in one process.
    let dir = tempfile::tempdir().unwrap();
    for (language, function) in [("python", "py-upper"), ("js", "js-upper")] {
        let bundle = hostile_job(dir.path(), language, function);
        let out = weir(
            &["run", bundle.to_str().unwrap(), "--parallelism", "40"],
            Duration::from_secs(300),
        );
        assert!(out.status.success(), "{language}: {}", said(&out));
        let upper = String::from_utf8_lossy(&out.stdout);
        assert_eq!(upper.lines().count(), 10, "{upper}");
        assert!(upper.lines().all(|l| l == l.to_uppercase()), "{upper}");
    }
}

#[test]
fn a_python_exception_fails_the_job_with_its_message_and_traceback() {
    fails_saying(
        "python",
        "py-raises",
        &[],
        &[
            "operator `guest`, subtask 0 failed",
            "ValueError: cannot parse record",
            "as a number",
            "Traceback (most recent call last):",
            "File \"guests.py\", line",
            "in raises",
        ],
    );
}

#[test]
fn a_javascript_exception_fails_the_job_with_its_message_and_stack() {
    let said = fails_saying(
        "js",
        "js-throws",
        &[],
        &[
            "operator `guest`, subtask 0 failed",
            "RangeError: cannot parse record",
            "as a number",
            "    at parse (.weir/bundle.js:",
            "    at throwing (.weir/bundle.js:",
        ],
    );
    // The SDK's frames are left out.
    assert!(!said.contains("weirSdk"), "{said}");
}

#[test]
fn endless_loops_are_stopped_by_the_deadline_and_memory_bombs_by_the_cap() {
    for (language, function, says) in [
        ("python", "py-endless", "call deadline of 3000 ms"),
        (
            "python",
            "py-membomb",
            "linear memory; the limit is 268435456",
        ),
        ("js", "js-endless", "call deadline of 3000 ms"),
        ("js", "js-membomb", "linear memory; the limit is 268435456"),
    ] {
        let limits = ["--call-timeout-ms", "3000", "--memory-limit-mib", "256"];
        fails_saying(language, function, &limits, &[says, "operator `guest`"]);
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

#[test]
fn the_javascript_fraud_detector_raises_the_rust_ones_alerts() {
    let dir = tempfile::tempdir().unwrap();
    let mut alerts = Vec::new();
    for example in ["fraud", "js-fraud"] {
        let output = dir.path().join(format!("{example}.jsonl"));
        let out = weir(
            &[
                "run",
                &format!("examples/{example}"),
                "--param",
                &format!("output={}", output.display()),
            ],
            Duration::from_secs(300),
        );
        assert!(out.status.success(), "{}", said(&out));
        alerts.push(json_lines(&output));
    }
    let accounts: Vec<&str> = alerts[1]
        .iter()
        .map(|a| a["account"].as_str().unwrap())
        .collect();
    assert_eq!(accounts, ["acc-2", "acc-1", "acc-4"]);
    for (rust, js) in alerts[0].iter().zip(&alerts[1]) {
        for field in ["account", "small_at", "large_at"] {
            assert_eq!(rust[field], js[field], "{field}");
        }
        for field in ["small", "large"] {
            assert_eq!(rust[field].as_f64(), js[field].as_f64(), "{field}");
        }
    }
    assert_eq!(alerts[0].len(), alerts[1].len());
}

#[test]
fn a_job_of_rust_python_and_javascript_operators_runs_as_one() {
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("totals.jsonl");
    let out = weir(
        &[
            "run",
            "examples/mixed",
            "--param",
            &format!("output={}", output.display()),
            "--parallelism",
            "2",
        ],
        Duration::from_secs(600),
    );
    assert!(out.status.success(), "{}", said(&out));
    // Sources split the orders between subtasks, so a user's purchases
    // may come in another order: each user's counts go 1, 2, 3, and the
    // last is the total.
    let mut last: BTreeMap<String, serde_json::Value> = BTreeMap::new();
    for t in json_lines(&output) {
        let user = t["user"].as_str().unwrap().to_owned();
        let before = last
            .get(&user)
            .map_or(0, |p| p["purchases"].as_u64().unwrap());
        assert_eq!(t["purchases"].as_u64(), Some(before + 1), "{t}");
        last.insert(user, t);
    }
    let totals: Vec<String> = last
        .values()
        .map(|t| {
            format!(
                "{} {} {} {}",
                t["user"].as_str().unwrap(),
                t["purchases"],
                t["spent"].as_str().unwrap(),
                t["tier"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        totals,
        [
            "ann 3 $56.00 gold",
            "bob 3 $35.50 silver",
            "cho 1 $45.00 silver",
        ]
    );
}

#[test]
fn weir_new_makes_a_project_that_runs_as_it_is_in_every_language() {
    let dir = tempfile::tempdir().unwrap();
    for lang in ["python", "js", "rust"] {
        let project = dir.path().join(format!("hello-{lang}"));
        let project = project.to_str().unwrap();
        let out = weir(&["new", project, "--lang", lang], Duration::from_secs(30));
        assert!(out.status.success(), "{}", said(&out));
        assert!(
            said(&out).contains(&format!("weir run {project}")),
            "{}",
            said(&out)
        );
        let output = dir.path().join(format!("{lang}.jsonl"));
        let child = common::command()
            .args(["run", project, "--param"])
            .arg(format!("output={}", output.display()))
            // The project's Cargo.lock pins what the workspace has: no
            // registry needed.
            .env("CARGO_NET_OFFLINE", "true")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let out = common::finish_within(child, Duration::from_secs(600), "weir run");
        assert!(out.status.success(), "{lang}: {}", said(&out));
        let mut last = BTreeMap::new();
        for r in json_lines(&output) {
            last.insert(
                r["word"].as_str().unwrap().to_owned(),
                r["count"].as_u64().unwrap(),
            );
        }
        assert_eq!(last.get("the"), Some(&4), "{lang}: {last:?}");
        assert_eq!(last.get("fox"), Some(&2), "{lang}: {last:?}");
        assert_eq!(last.len(), 10, "{lang}: {last:?}");
    }
    // A project that is there already, or a name no language takes.
    let out = weir(
        &[
            "new",
            dir.path().join("hello-js").to_str().unwrap(),
            "--lang",
            "js",
        ],
        Duration::from_secs(30),
    );
    assert!(!out.status.success() && said(&out).contains("is there already"));
    let out = weir(
        &["new", dir.path().join("Bad Name").to_str().unwrap()],
        Duration::from_secs(30),
    );
    assert!(!out.status.success() && said(&out).contains("cannot name a project"));
}

/// Python and JavaScript window functions in the real host: the
/// windowed-counts example's job (sliding event-time windows, a bounded
/// watermark, allowed lateness, late records to a side output) with each
/// language's count — incremental, and from all of a window's records —
/// in place of the Rust one fires the same windows with the same counts
/// and sends the same records to the late output.
#[test]
fn python_and_javascript_window_functions_fire_as_the_rust_one_does() {
    let dir = tempfile::tempdir().unwrap();
    // Out of order by up to 1.2 s against a 0.2 s bound and 0.3 s of
    // lateness: some records are late but within the lateness (windows fire
    // again), some too late (the side output).
    let input = dir.path().join("events.jsonl");
    let mut text = String::new();
    let mut seed = 42u64;
    for i in 0..3000u64 {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let back = if (seed >> 33).is_multiple_of(10) {
            (seed >> 40) % 1200
        } else {
            (seed >> 40) % 150
        };
        let ts = (i * 7).saturating_sub(back);
        let key = ["a", "b", "c", "d", "e", "é"][((seed >> 20) % 6) as usize];
        text.push_str(&format!("{{\"key\": \"{key}\", \"ts\": {ts}}}\n"));
    }
    std::fs::write(&input, text).unwrap();
    let run = |bundle: &Path, name: &str| {
        let (output, late) = (
            dir.path().join(format!("{name}.jsonl")),
            dir.path().join(format!("{name}-late.jsonl")),
        );
        let out = weir(
            &[
                "run",
                bundle.to_str().unwrap(),
                "--param",
                &format!("input={}", input.display()),
                "--param",
                &format!("output={}", output.display()),
                "--param",
                &format!("late={}", late.display()),
                "--param",
                "window=1000",
                "--param",
                "slide=500",
                "--param",
                "max_delay=200",
                "--param",
                "lateness=300",
            ],
            Duration::from_secs(300),
        );
        assert!(out.status.success(), "{name}: {}", said(&out));
        let sorted = |path: &Path| {
            let mut lines: Vec<String> = json_lines(path).iter().map(|v| v.to_string()).collect();
            lines.sort();
            lines
        };
        (sorted(&output), sorted(&late))
    };
    let example = common::root().join("examples/windowed-counts");
    let (fired, late) = run(&example, "rust");
    assert!(fired.len() > 100, "{fired:?}");
    assert!(!late.is_empty(), "some records are too late");
    let refired = fired.len()
        - fired
            .iter()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                (v["key"].to_string(), v["window_start"].as_i64())
            })
            .collect::<std::collections::BTreeSet<_>>()
            .len();
    assert!(
        refired > 0,
        "late records within the lateness fire windows again"
    );
    let manifest = std::fs::read_to_string(example.join("weir.toml")).unwrap();
    for (language, function) in [
        ("python", "py-window-count"),
        ("python", "py-window-records"),
        ("js", "js-window-count"),
        ("js", "js-window-records"),
    ] {
        let bundle = dir.path().join(function);
        std::fs::create_dir_all(&bundle).unwrap();
        let own = manifest.replace(
            "function = \"count\"",
            &format!("function = \"{function}\""),
        );
        assert_ne!(own, manifest);
        std::fs::write(
            bundle.join("weir.toml"),
            format!(
                "{own}\n[component]\npath = '{}'\n",
                guests(language).display()
            ),
        )
        .unwrap();
        let (f, l) = run(&bundle, function);
        assert_eq!(f, fired, "{function}: the windows fired");
        assert_eq!(l, late, "{function}: the late records");
    }
}

/// A Python or JavaScript operator that declares its types (dataclasses,
/// `weir.types` records) reads the
/// generator's rows and writes rows of a record with every kind of field
/// (floats, a bool, a string, a list, a nested optional record, a null)
/// that the sink writes as JSON: every field of every record exact. One
/// whose input type does not fit what its upstream writes is refused
/// before it runs, naming both operators and the field.
#[test]
fn typed_python_and_javascript_operators_read_and_write_rows() {
    for language in ["python", "js"] {
        typed_operator_reads_and_writes_rows(language);
    }
}

fn typed_operator_reads_and_writes_rows(language: &str) {
    let dir = tempfile::tempdir().unwrap();
    let component = guests(language);
    let prefix = if language == "python" { "py" } else { "js" };
    let job = |function: &str| {
        let function = format!("{prefix}-{function}");
        let bundle = dir.path().join(&function);
        std::fs::create_dir_all(&bundle).unwrap();
        std::fs::copy(&component, bundle.join("c.wasm")).unwrap();
        let output = dir.path().join(format!("{function}.jsonl"));
        std::fs::write(
            bundle.join("weir.toml"),
            format!(
                "[job]\nname = 'typed'\n[component]\npath = 'c.wasm'\n\
                 [[source]]\nname = 'numbers'\ntype = 'generator'\npattern = 'numbers'\ncount = '2000'\n\
                 [[operator]]\nname = 'price'\nfunction = '{function}'\n\
                 [[sink]]\nname = 'out'\ntype = 'json-lines-file'\npath = '{}'\n",
                output.display()
            ),
        )
        .unwrap();
        let out = weir(
            &["run", bundle.to_str().unwrap(), "--parallelism", "2"],
            Duration::from_secs(300),
        );
        (out, output)
    };
    let (out, output) = job("typed-price");
    assert!(out.status.success(), "{language}: {}", said(&out));
    let mut got = json_lines(&output);
    got.sort_by_key(|v| v["id"].as_u64());
    assert_eq!(got.len(), 2000);
    for (i, v) in got.iter_mut().enumerate() {
        let i = i as u64;
        let (k, price, ts) = (i % 10_000, i % 1000, i / 100);
        // serde_json reads floats to within an ulp (without its
        // `float_roundtrip`): the float apart.
        let dollars = v["dollars"].as_f64().unwrap();
        let exact = 0.908 * price as f64;
        assert!(
            (dollars - exact).abs() <= exact * 1e-15,
            "record {i}: {dollars} for {exact}"
        );
        v["dollars"] = serde_json::json!(0.0);
        let expected = serde_json::json!({
            "id": i,
            "dollars": 0.0,
            "cheap": price < 100,
            "label": format!("#{i}"),
            "tags": vec!["p"; (i % 3) as usize],
            "at": if i.is_multiple_of(2) { serde_json::json!({"k": k, "ts": ts}) } else { serde_json::Value::Null },
            "note": null,
        });
        assert_eq!(v, &expected, "{language}, record {i}");
    }
    if language == "python" {
        // A vectorized map: a batch's columns in, columns out, a mask.
        let (out, output) = job("vectorized-q1");
        assert!(out.status.success(), "{}", said(&out));
        let mut got = json_lines(&output);
        got.sort_by_key(|v| v["id"].as_u64());
        assert_eq!(got.len(), 1000);
        for (n, v) in got.iter().enumerate() {
            let i = 2 * n as u64;
            let price = i % 1000;
            assert_eq!(v["id"], i);
            assert_eq!(v["k"], i % 10_000);
            assert_eq!(v["doubled"], 2 * price);
            let dollars = v["dollars"].as_f64().unwrap();
            assert!((dollars - 0.908 * price as f64).abs() <= 1e-12 * price as f64);
        }
    }
    let (out, _) = job("mistyped");
    assert!(!out.status.success());
    let said = said(&out);
    assert!(
        said.contains("operator `price` cannot read what `numbers` writes: field `k` is u32 upstream and string here"),
        "{said}"
    );
}

#[test]
fn javascript_operators_keep_64_bit_ids_exact() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("ids");
    std::fs::create_dir_all(&bundle).unwrap();
    std::fs::copy(guests("js"), bundle.join("c.wasm")).unwrap();
    // Ids a JavaScript number cannot hold (it would read 9007199254740993
    // as ...992), beside ones it can.
    let ids: [i128; 5] = [
        9_007_199_254_740_993,
        1_832_198_348_291_850_241,
        -9_007_199_254_740_995,
        9_223_372_036_854_775_806,
        42,
    ];
    let input = dir.path().join("ids.jsonl");
    let lines: Vec<String> = ids.iter().map(|i| format!("{{\"id\": {i}}}")).collect();
    std::fs::write(&input, lines.join("\n") + "\n").unwrap();
    let output = dir.path().join("out.jsonl");
    std::fs::write(
        bundle.join("weir.toml"),
        format!(
            "[job]\nname = 'ids'\n[component]\npath = 'c.wasm'\n\
             [[source]]\nname = 'ids'\ntype = 'json-lines-file'\npath = '{}'\n\
             [[operator]]\nname = 'next'\nfunction = 'js-next-id'\n\
             [[sink]]\nname = 'out'\ntype = 'json-lines-file'\npath = '{}'\n",
            input.display(),
            output.display()
        ),
    )
    .unwrap();
    let out = weir(&["run", bundle.to_str().unwrap()], Duration::from_secs(300));
    assert!(out.status.success(), "{}", said(&out));
    let text = std::fs::read_to_string(&output).unwrap();
    let mut got: Vec<(String, String, bool)> = text
        .lines()
        .map(|l| {
            // Compared as text: a JSON reader of f64s would round them too.
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (
                v["id"].to_string(),
                v["next"].to_string(),
                v["big"].as_bool().unwrap(),
            )
        })
        .collect();
    got.sort();
    let mut expected: Vec<(String, String, bool)> = ids
        .iter()
        .map(|&i| (i.to_string(), (i + 1).to_string(), i.abs() > (1 << 53) - 1))
        .collect();
    expected.sort();
    assert_eq!(got, expected, "{text}");

    // Typed: the source reads its lines into rows (a u64 and an i64), the
    // operator reads and writes rows.
    let typed = [
        (
            18_446_744_073_709_551_615_u64,
            -9_223_372_036_854_775_807_i64,
        ),
        (9_007_199_254_740_993, 9_007_199_254_740_995),
        (7, 7),
    ];
    let lines: Vec<String> = typed
        .iter()
        .map(|(id, delta)| format!("{{\"id\": {id}, \"delta\": {delta}}}"))
        .collect();
    std::fs::write(&input, lines.join("\n") + "\n").unwrap();
    let manifest = std::fs::read_to_string(bundle.join("weir.toml")).unwrap();
    let manifest = manifest
        .replacen(
            "type = 'json-lines-file'\npath",
            "type = 'json-lines-file'\nschema = '{id: u64, delta: i64}'\npath",
            1,
        )
        .replace("js-next-id", "js-next-id-typed");
    std::fs::write(bundle.join("weir.toml"), manifest).unwrap();
    std::fs::remove_file(&output).unwrap();
    let out = weir(&["run", bundle.to_str().unwrap()], Duration::from_secs(300));
    assert!(out.status.success(), "{}", said(&out));
    let text = std::fs::read_to_string(&output).unwrap();
    let mut got: Vec<(String, String)> = text
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (v["id"].to_string(), v["delta"].to_string())
        })
        .collect();
    got.sort();
    let mut expected: Vec<(String, String)> = typed
        .iter()
        .map(|(id, delta)| (id.to_string(), (delta - 1).to_string()))
        .collect();
    expected.sort();
    assert_eq!(got, expected, "{text}");
}

#[test]
fn python_and_javascript_state_with_a_time_to_live_reads_back_what_it_wrote() {
    // Every state of the guests' counts lives an hour: the host stamps
    // each value with its expiry time and strips it on every read, so a
    // count must go 1, 2, 3 per word as a plain one does (and the guests
    // check their list and map against it).
    let dir = tempfile::tempdir().unwrap();
    let text = sample_text(600);
    let expected = expected_counts(&text);
    let words: String = text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(|w| format!("{}\n", w.to_lowercase()))
        .collect();
    let input = dir.path().join("words.txt");
    std::fs::write(&input, words).unwrap();
    for (language, function) in [("python", "py-ttl-count"), ("js", "js-ttl-count")] {
        let bundle = dir.path().join(function);
        std::fs::create_dir_all(&bundle).unwrap();
        let output = dir.path().join(format!("{function}.jsonl"));
        std::fs::write(
            bundle.join("weir.toml"),
            format!(
                "[job]\nname = '{function}'\n[component]\npath = '{}'\n\
                 [[source]]\nname = 'words'\ntype = 'text-file'\npath = '{}'\n\
                 [[operator]]\nname = 'count'\nfunction = '{function}'\nkey-by = 'value'\n\
                 [[sink]]\nname = 'out'\ntype = 'json-lines-file'\npath = '{}'\n",
                guests(language).display(),
                input.display(),
                output.display()
            ),
        )
        .unwrap();
        let out = weir(
            &["run", bundle.to_str().unwrap(), "--parallelism", "2"],
            Duration::from_secs(300),
        );
        assert!(out.status.success(), "{language}: {}", said(&out));
        assert_eq!(counted(&output), expected, "{language}");
    }
}
