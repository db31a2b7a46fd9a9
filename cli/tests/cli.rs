//! `weir run` and `weir build` as a user runs them: real processes, exact
//! results, and clear errors for bad bundles and parameters.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

struct Outcome {
    ok: bool,
    stdout: String,
    stderr: String,
}

/// Run `weir` with `args` in the workspace's root, killed after two minutes.
fn weir(args: &[&str]) -> Outcome {
    weir_in(&root(), args)
}

/// Run `weir` with `args` in `cwd`, killed after two minutes.
fn weir_in(cwd: &Path, args: &[&str]) -> Outcome {
    let dir = tempfile::tempdir().unwrap();
    let (out, err) = (dir.path().join("out"), dir.path().join("err"));
    let mut child = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(args)
        .current_dir(cwd)
        .env(
            "WEIR_CACHE_DIR",
            std::env::temp_dir().join("weir-cli-tests-cache"),
        )
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if started.elapsed() > Duration::from_secs(120) {
            child.kill().unwrap();
            panic!("weir {args:?} did not finish within 120 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Outcome {
        ok: status.success(),
        stdout: std::fs::read_to_string(out).unwrap(),
        stderr: std::fs::read_to_string(err).unwrap(),
    }
}

fn fails_with(args: &[&str], needle: &str) {
    let o = weir(args);
    assert!(!o.ok, "weir {args:?} succeeded");
    assert!(
        o.stderr.contains(needle),
        "weir {args:?}: expected {needle:?} in:\n{}",
        o.stderr
    );
    assert!(
        !o.stderr.contains("panicked"),
        "weir {args:?} panicked:\n{}",
        o.stderr
    );
}

/// A text with mixed case, punctuation, digits and non-ASCII letters.
fn text(words: usize, seed: u64) -> String {
    const VOCAB: [&str; 12] = [
        "River",
        "weir",
        "WATER",
        "naïve",
        "Ünïcode",
        "x2",
        "2024",
        "don't",
        "stream-processor",
        "a",
        "the",
        "é",
    ];
    const SEPS: [&str; 6] = [" ", ", ", ".\n", " -- ", "\t", "!\n\n"];
    let mut s = String::new();
    let mut x = seed;
    for _ in 0..words {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        s.push_str(VOCAB[(x >> 33) as usize % VOCAB.len()]);
        s.push_str(SEPS[(x >> 45) as usize % SEPS.len()]);
    }
    s
}

fn expected_counts(text: &str) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for w in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        *counts.entry(w.to_lowercase()).or_default() += 1;
    }
    counts
}

fn final_counts(output: &Path) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for line in std::fs::read_to_string(output).unwrap().lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let (w, c) = (
            v["word"].as_str().unwrap().to_owned(),
            v["count"].as_u64().unwrap(),
        );
        let e = counts.entry(w).or_insert(0);
        *e = c.max(*e);
    }
    counts
}

#[test]
fn wordcount_gives_exact_counts_at_parallelism_1_and_4() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("text.txt");
    let text = text(50_000, 7);
    std::fs::write(&input, &text).unwrap();
    let expected = expected_counts(&text);
    assert!(expected.len() > 10);
    for p in ["1", "4"] {
        let output = dir.path().join(format!("counts-{p}.jsonl"));
        let input_param = format!("input={}", input.display());
        let output_param = format!("output={}", output.display());
        let o = weir(&[
            "run",
            "examples/wordcount",
            "--param",
            &input_param,
            "--param",
            &output_param,
            "--parallelism",
            p,
        ]);
        assert!(o.ok, "{}", o.stderr);
        assert_eq!(final_counts(&output), expected, "parallelism {p}");
        // One line per word occurrence: every update is emitted.
        let lines = std::fs::read_to_string(&output).unwrap().lines().count() as u64;
        assert_eq!(lines, expected.values().sum::<u64>());
    }
}

/// The seeds' first example, `examples/socket-wordcount`: a word count fed
/// over a socket (`nc -lk 9000` played by the test's own listener, which
/// sends the text in pieces and closes). The socket source is read by one
/// subtask while the job runs at parallelism 2, and with `retries=0` the
/// job ends with the connection.
#[test]
fn a_word_count_reads_its_text_from_a_socket() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = format!("address={}", listener.local_addr().unwrap());
    let output = dir.path().join("counts.jsonl");
    let text = text(20_000, 11);
    let expected = expected_counts(&text);
    let sent = text.clone();
    let server = std::thread::spawn(move || {
        listener.set_nonblocking(true).unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        let mut conn = loop {
            match listener.accept() {
                Ok((c, _)) => break c,
                Err(_) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(std::time::Duration::from_millis(20))
                }
                Err(e) => panic!("no connection: {e}"),
            }
        };
        conn.set_nonblocking(false).unwrap();
        for piece in sent.as_bytes().chunks(7_777) {
            conn.write_all(piece).unwrap();
        }
    });
    let output_param = format!("output={}", output.display());
    let o = weir(&[
        "run",
        "examples/socket-wordcount",
        "--param",
        &address,
        "--param",
        "retries=0",
        "--param",
        &output_param,
    ]);
    assert!(o.ok, "{}", o.stderr);
    server.join().unwrap();
    assert_eq!(final_counts(&output), expected);
}

#[test]
fn the_stateless_example_filters_and_maps() {
    let o = weir(&["run", "examples/json-filter", "--param", "min=25"]);
    assert!(o.ok, "{}", o.stderr);
    let got: Vec<serde_json::Value> = o
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        got,
        [
            serde_json::json!({"sensor": "attic", "fahrenheit": 88.16}),
            serde_json::json!({"sensor": "greenhouse", "fahrenheit": 80.6})
        ]
    );
}

#[test]
fn build_writes_an_archive_that_runs() {
    // The archive goes to the bundle's dist/ (ignored by git).
    let built = weir(&["build", "examples/json-filter"]);
    assert!(built.ok, "{}", built.stderr);
    let component = built
        .stdout
        .lines()
        .next()
        .unwrap()
        .trim_start_matches("component: ")
        .to_owned();
    let archive = PathBuf::from(built.stdout.lines().last().unwrap());
    assert!(
        archive.ends_with("examples/json-filter/dist/json-filter.weir"),
        "{}",
        built.stdout
    );
    assert!(Path::new(&component).is_file());
    let input = format!(
        "input={}",
        root()
            .join("examples/json-filter/data/readings.jsonl")
            .display()
    );
    let o = weir(&["run", archive.to_str().unwrap(), "--param", &input]);
    assert!(o.ok, "{}", o.stderr);
    assert_eq!(o.stdout.lines().count(), 3);
}

/// A bundle directory with `bytes` as its component and `manifest`.
fn bundle_with(dir: &Path, bytes: &[u8], manifest: &str) -> String {
    std::fs::write(dir.join("c.wasm"), bytes).unwrap();
    std::fs::write(dir.join("weir.toml"), manifest).unwrap();
    dir.display().to_string()
}

const MANIFEST: &str = r#"
[job]
name = "bad"
[component]
path = "c.wasm"
[[source]]
name = "gen"
type = "generator"
count = "10"
pattern = "words"
[[operator]]
name = "op"
function = "split-words"
[[sink]]
name = "out"
type = "stdout"
"#;

fn wordcount_component() -> Vec<u8> {
    let built = weir(&["build", "examples/wordcount"]);
    assert!(built.ok, "{}", built.stderr);
    let component = built
        .stdout
        .lines()
        .next()
        .unwrap()
        .trim_start_matches("component: ")
        .to_owned();
    std::fs::read(component).unwrap()
}

#[test]
fn malformed_bundles_are_rejected_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let d = |name: &str| {
        let p = dir.path().join(name);
        std::fs::create_dir_all(&p).unwrap();
        p
    };
    fails_with(&["run", "/nonexistent/bundle"], "no such bundle");
    fails_with(
        &["run", &bundle_with(&d("text"), b"hello, world", MANIFEST)],
        "not a WebAssembly component",
    );
    fails_with(
        &[
            "run",
            &bundle_with(&d("core"), b"\0asm\x01\0\0\0", MANIFEST),
        ],
        "core WebAssembly module",
    );
    fails_with(
        &[
            "run",
            &bundle_with(&d("world"), b"\0asm\x0d\0\x01\0", MANIFEST),
        ],
        "Weir operator world",
    );
    fails_with(
        &[
            "run",
            &bundle_with(&d("manifest"), b"", "[job]\nname = 1\n"),
        ],
        "invalid manifest",
    );

    let wc = wordcount_component();
    let missing = MANIFEST.replace("function = \"split-words\"", "function = \"spilt-words\"");
    fails_with(
        &["run", &bundle_with(&d("missing-op"), &wc, &missing)],
        "uses function `spilt-words`, which the component does not export (it exports: split-words, count)",
    );
    let unkeyed = MANIFEST.replace("function = \"split-words\"", "function = \"count\"");
    fails_with(
        &["run", &bundle_with(&d("unkeyed"), &wc, &unkeyed)],
        "needs `key-by`",
    );
    let good = bundle_with(&d("good"), &wc, MANIFEST);
    fails_with(
        &["run", &good, "--param", "nokey"],
        "\"nokey\" is not of the form key=value",
    );
    fails_with(
        &["run", &good, "--param", "speed=9"],
        "unknown parameter `speed`",
    );
    fails_with(
        &["run", &good, "--parallelism", "0"],
        "parallelism of `gen` is 0",
    );
    let bad_count = MANIFEST.replace("count = \"10\"", "count = \"ten\"");
    fails_with(
        &["run", &bundle_with(&d("count"), &wc, &bad_count)],
        "count of `gen` = \"ten\" is not a whole number",
    );
    fails_with(
        &[
            "run",
            "examples/wordcount",
            "--param",
            "input=/nonexistent/words.txt",
            "--param",
            "output=/dev/null",
        ],
        "cannot open /nonexistent/words.txt",
    );
    assert!(weir(&["run", &good]).ok);
}

/// The `console` blocks of `docs/event-time.md` are run as written: each
/// `$ weir run …` (examples found in the workspace, relative files in a
/// scratch directory) and each `$ cat FILE` must print exactly the lines
/// the page shows.
#[test]
fn the_event_time_examples_print_what_their_docs_say() {
    let page = std::fs::read_to_string(root().join("docs/event-time.md")).unwrap();
    let mut blocks = 0;
    for block in page.split("```console\n").skip(1) {
        let block = block.split("```").next().unwrap();
        let scratch = tempfile::tempdir().unwrap();
        // Commands, with their `\` continuations joined, and their outputs.
        let mut steps: Vec<(String, Vec<&str>)> = Vec::new();
        let mut continued = false;
        for line in block.lines() {
            if let Some(cmd) = line.strip_prefix("$ ") {
                steps.push((cmd.to_owned(), Vec::new()));
                continued = cmd.ends_with('\\');
            } else if continued {
                steps.last_mut().unwrap().0.push_str(line);
                continued = line.ends_with('\\');
            } else {
                steps.last_mut().unwrap().1.push(line);
            }
        }
        for (cmd, want) in steps {
            let cmd = cmd.replace('\\', " ");
            let words: Vec<&str> = cmd.split_whitespace().collect();
            let got = match words.as_slice() {
                ["weir", args @ ..] => {
                    let args: Vec<String> = args
                        .iter()
                        .map(|a| match a.strip_prefix("examples/") {
                            Some(_) => root().join(a).display().to_string(),
                            None => a.to_string(),
                        })
                        .collect();
                    let args: Vec<&str> = args.iter().map(String::as_str).collect();
                    let o = weir_in(scratch.path(), &args);
                    assert!(o.ok, "{cmd}: {}", o.stderr);
                    o.stdout
                }
                ["cat", file] => std::fs::read_to_string(scratch.path().join(file)).unwrap(),
                _ => panic!("the docs run `{cmd}`, which this test does not know"),
            };
            assert_eq!(got.lines().collect::<Vec<_>>(), want, "`{cmd}`");
            blocks += 1;
        }
    }
    assert!(blocks >= 4, "{blocks} commands checked");
}

/// Off a terminal, a running job's progress comes as plain lines.
#[test]
fn run_shows_progress_as_plain_lines_off_a_terminal() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(weir_tests::guest("wordcount"), dir.path().join("c.wasm")).unwrap();
    std::fs::write(
        dir.path().join("weir.toml"),
        "[job]\nname = 'paced'\n[component]\npath = 'c.wasm'\n\
         [[source]]\nname = 'lines'\ntype = 'generator'\npattern = 'words'\ncount = '7000'\nrate = '2000'\n\
         [[operator]]\nname = 'split'\nfunction = 'split-words'\n\
         [[sink]]\nname = 'out'\ntype = 'json-lines-file'\npath = '/dev/null'\n",
    )
    .unwrap();
    let o = weir(&["run", dir.path().to_str().unwrap()]);
    assert!(o.ok, "{}", o.stderr);
    let lines: Vec<&str> = o
        .stderr
        .lines()
        .filter(|l| l.starts_with("job paced running:"))
        .collect();
    assert!(!lines.is_empty(), "{}", o.stderr);
    assert!(
        lines.iter().all(|l| l.contains("records read")),
        "{lines:?}"
    );
}

/// The side-by-side benchmark's Weir jobs (`bench/flink/jobs`, and
/// `jobs/builtin` with built-in operators) at parallelism 2 compute what
/// Flink's SQL computes over the same columns:
/// every event (q0), the even ids with their derived columns (q1), a
/// running count per key, and the counts per key of every tumbling (1 s)
/// and sliding (10 s every 2 s) event-time window that holds an event.
/// A JSON-lines source with a `schema` feeding a typed operator (q0 reads
/// `{id: u64, k: u32, price: u64, ts: i64}`): the lines are read into rows
/// once, in the host, q0 reads them in place, the sink writes them as
/// JSON; unknown fields go, fields come in the schema's order. A line that
/// does not fit fails the job naming the file, the line and the field.
#[test]
fn a_typed_json_lines_source_feeds_a_typed_operator_rows() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        weir_tests::guest("bench-operators"),
        dir.path().join("operators.wasm"),
    )
    .unwrap();
    let input = dir.path().join("in.jsonl");
    let mut lines = String::new();
    for i in 0..1000u64 {
        lines.push_str(&format!(
            "{{\"ts\": {}, \"price\": {}, \"extra\": \"x\", \"k\": {}, \"id\": {i}}}\n",
            i / 100,
            i % 1000,
            i % 10
        ));
    }
    std::fs::write(&input, &lines).unwrap();
    std::fs::write(
        dir.path().join("weir.toml"),
        "[job]\nname = \"typed\"\n[params]\ninput = {}\noutput = {}\n\
         [component]\npath = \"operators.wasm\"\n\
         [[source]]\nname = \"events\"\ntype = \"json-lines-file\"\npath = \"${input}\"\n\
         schema = { id = \"u64\", k = \"u32\", price = \"u64\", ts = \"i64\" }\n\
         [[operator]]\nname = \"q0\"\nfunction = \"q0\"\n\
         [[sink]]\nname = \"out\"\ntype = \"json-lines-file\"\npath = \"${output}\"\n",
    )
    .unwrap();
    let output = dir.path().join("out.jsonl");
    let run = || {
        weir(&[
            "run",
            dir.path().to_str().unwrap(),
            "--parallelism",
            "2",
            "--param",
            &format!("input={}", input.display()),
            "--param",
            &format!("output={}", output.display()),
        ])
    };
    let o = run();
    assert!(o.ok, "{}", o.stderr);
    let mut got: Vec<String> = std::fs::read_to_string(&output)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    got.sort();
    let mut want: Vec<String> = (0..1000u64)
        .map(|i| {
            format!(
                "{{\"id\":{i},\"k\":{},\"price\":{},\"ts\":{}}}",
                i % 10,
                i % 1000,
                i / 100
            )
        })
        .collect();
    want.sort();
    assert_eq!(got, want);
    // A price that is not a number, on the third line.
    let mut bad: Vec<&str> = lines.lines().take(3).collect();
    let third = bad[2].replace("\"price\": 2", "\"price\": \"two\"");
    bad[2] = &third;
    std::fs::write(&input, bad.join("\n") + "\n").unwrap();
    let o = run();
    assert!(!o.ok, "a line that does not fit fails the job");
    let offset = lines.lines().take(2).map(|l| l.len() + 1).sum::<usize>();
    assert!(
        o.stderr.contains(&format!(
            "(the line at byte {offset}) does not fit the source's schema"
        )) && o
            .stderr
            .contains("field `price`: invalid type: string \"two\""),
        "{}",
        o.stderr
    );
}

#[test]
fn the_side_by_side_jobs_compute_what_their_queries_say() {
    use serde_json::Value;
    const EVENTS: u64 = 250_000;
    let run = |job: &str| -> Vec<Value> {
        let dir = tempfile::tempdir().unwrap();
        // `builtin/<job>`: the same workload with a built-in operator.
        std::fs::copy(
            weir_tests::guest("bench-operators"),
            dir.path().join("operators.wasm"),
        )
        .unwrap();
        std::fs::copy(
            root().join(format!("bench/flink/jobs/{job}.toml")),
            dir.path().join("weir.toml"),
        )
        .unwrap();
        let output = dir.path().join("out.jsonl");
        let o = weir(&[
            "run",
            dir.path().to_str().unwrap(),
            "--parallelism",
            "2",
            "--param",
            &format!("count={EVENTS}"),
            "--param",
            &format!("output={}", output.display()),
        ]);
        assert!(o.ok, "{job}: {}", o.stderr);
        std::fs::read_to_string(output)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let ids = 0..EVENTS;
    let (k, price, ts) = (|i: u64| i % 10_000, |i: u64| i % 1000, |i: u64| i / 100);

    // The built-in jobs give what the Wasm operators give.
    let sorted = |mut rows: Vec<Value>| {
        rows.sort_by_key(|v| v["id"].as_u64());
        rows
    };
    assert_eq!(sorted(run("builtin/q0")), sorted(run("q0")), "q0, built-in");
    assert_eq!(sorted(run("builtin/q1")), sorted(run("q1")), "q1, built-in");
    let mut builtin_counts: Vec<(u64, u64)> = run("builtin/keyed-count")
        .iter()
        .map(|v| (v["key"].as_u64().unwrap(), v["count"].as_u64().unwrap()))
        .collect();
    builtin_counts.sort();
    let mut wasm_counts: Vec<(u64, u64)> = run("keyed-count")
        .iter()
        .map(|v| (v["k"].as_u64().unwrap(), v["n"].as_u64().unwrap()))
        .collect();
    wasm_counts.sort();
    assert_eq!(builtin_counts, wasm_counts, "keyed count, built-in");

    let q0 = run("q0");
    let row = q0.iter().find(|v| v["id"] == 12_345).unwrap();
    assert_eq!(
        row,
        &serde_json::json!({"id": 12_345, "k": 2345, "price": 345, "ts": 123})
    );
    let mut q0: Vec<u64> = q0.iter().map(|v| v["id"].as_u64().unwrap()).collect();
    q0.sort();
    assert_eq!(q0, ids.clone().collect::<Vec<_>>(), "q0: every event once");

    let mut q1: Vec<(u64, u64, f64, u64)> = run("q1")
        .iter()
        .map(|v| {
            let f = |n: &str| v[n].as_u64().unwrap();
            (
                f("id"),
                f("k"),
                v["dollars"].as_f64().unwrap(),
                f("doubled"),
            )
        })
        .collect();
    q1.sort_by_key(|r| r.0);
    let want: Vec<(u64, u64, f64, u64)> = ids
        .clone()
        .filter(|i| i % 2 == 0)
        .map(|i| (i, k(i), 0.908 * price(i) as f64, price(i) * 2))
        .collect();
    assert_eq!(q1.len(), want.len(), "q1: the even ids");
    for (got, want) in q1.iter().zip(&want) {
        // JSON numbers read back within a rounding of what was written.
        let close = (got.2 - want.2).abs() <= 1e-9 * want.2.abs().max(1.0);
        assert!(
            (got.0, got.1, got.3) == (want.0, want.1, want.3) && close,
            "q1: {got:?}, not {want:?}"
        );
    }

    // A running count: per key, every count from 1 to its total once.
    let mut counts: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for v in run("keyed-count") {
        counts
            .entry(v["k"].as_u64().unwrap())
            .or_default()
            .push(v["n"].as_u64().unwrap());
    }
    assert_eq!(counts.len(), 10_000);
    for (key, mut ns) in counts {
        ns.sort();
        let total = ids.clone().filter(|&i| k(i) == key).count() as u64;
        assert_eq!(ns, (1..=total).collect::<Vec<_>>(), "key {key}");
    }

    // Window counts, as (key, window start) → count.
    let windows = |job: &str| -> BTreeMap<(u64, i64), u64> {
        let mut out = BTreeMap::new();
        for v in run(job) {
            let key = (
                v["k"].as_u64().unwrap(),
                v["window_start"].as_i64().unwrap(),
            );
            assert!(
                out.insert(key, v["n"].as_u64().unwrap()).is_none(),
                "{job}: {key:?} twice"
            );
        }
        out
    };
    let expected = |size: i64, slide: i64| {
        let mut out = BTreeMap::new();
        for i in ids.clone() {
            let t = ts(i) as i64;
            // Every window [s, s + size) with s a multiple of the slide.
            let mut s = t - t.rem_euclid(slide);
            while s > t - size {
                *out.entry((k(i), s)).or_insert(0) += 1;
                s -= slide;
            }
        }
        out
    };
    assert_eq!(windows("tumbling-count"), expected(1000, 1000), "tumbling");
    assert_eq!(windows("sliding-count"), expected(10_000, 2000), "sliding");
    // The built-in window aggregates: `{"key", "window_start",
    // "window_end", "count"}`.
    for (job, size, slide) in [
        ("tumbling-count", 1000, 1000),
        ("sliding-count", 10_000, 2000),
    ] {
        let mut out = BTreeMap::new();
        for v in run(&format!("builtin/{job}")) {
            let start = v["window_start"].as_i64().unwrap();
            assert_eq!(v["window_end"].as_i64().unwrap(), start + size);
            let key = (v["key"].as_u64().unwrap(), start);
            assert!(
                out.insert(key, v["count"].as_u64().unwrap()).is_none(),
                "builtin/{job}: {key:?} twice"
            );
        }
        assert_eq!(out, expected(size, slide), "builtin/{job}");
    }
}

/// A slow stream is not held in a sink's buffer: a generator of 200
/// records per second, scheduled to start a moment from now
/// (`start-at-ms`), reaches its output file while the job runs — nothing
/// before the start, then lines within a fraction of a second.
#[test]
fn a_slow_stream_reaches_its_sink_while_the_job_runs() {
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("out.jsonl");
    let start_at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis()
        + 1500;
    std::fs::copy(weir_tests::guest("wordcount"), dir.path().join("c.wasm")).unwrap();
    std::fs::write(
        dir.path().join("weir.toml"),
        format!(
            "[job]\nname = 'slow'\n[component]\npath = 'c.wasm'\n\
             [[source]]\nname = 'tick'\ntype = 'generator'\nrate = '200'\nstart-at-ms = '{start_at}'\n\
             [[sink]]\nname = 'out'\ntype = 'json-lines-file'\npath = '{}'\n",
            output.display()
        ),
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["run", dir.path().to_str().unwrap()])
        .env(
            "WEIR_CACHE_DIR",
            std::env::temp_dir().join("weir-cli-tests-cache"),
        )
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let lines = || {
        std::fs::read_to_string(&output)
            .map(|t| t.lines().count())
            .unwrap_or(0)
    };
    let now_ms = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis()
    };
    // Watched from the spawn: a line seen is never seen before it was
    // written, so a first sighting before the start is a line written
    // before it, however loaded the machine is.
    let started = Instant::now();
    let (mut first_seen, mut seen) = (None, 0);
    while started.elapsed() < Duration::from_secs(20) && seen < 20 {
        std::thread::sleep(Duration::from_millis(20));
        seen = lines();
        if seen > 0 && first_seen.is_none() {
            first_seen = Some(now_ms());
        }
    }
    let waited = started.elapsed();
    child.kill().unwrap();
    child.wait().unwrap();
    let first_seen = first_seen.expect("no line at all");
    assert!(
        first_seen >= start_at,
        "a line seen {} ms before the scheduled start",
        start_at - first_seen
    );
    assert!(seen >= 20, "only {seen} lines after {waited:?}");
}

/// A built-in window aggregate over session windows with allowed
/// lateness, record by record (watermarks after every record): sessions
/// merge, a record within the lateness merges into a fired session and
/// fires it again at once, a record past it goes to the `late` output, and
/// the end of input fires what is left — Flink's window operator, step by
/// step.
#[test]
fn builtin_window_aggregates_merge_sessions_fire_again_within_lateness_and_send_late_records_aside()
{
    use serde_json::{Value, json};
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.jsonl");
    let events = [
        ("a", 0, 1),     // a [0, 10)
        ("a", 5, 2),     // a [0, 15)
        ("b", 3, 10),    // b [3, 13)
        ("a", 30, 4),    // watermark 29: b [3, 13) and a [0, 15) fire
        ("a", 12, 8),    // [12, 22) joins the fired a [0, 15): fires again
        ("a", 2, 100),   // within a [0, 22): fires again
        ("b", 50, 1000), // watermark 49: a [30, 40) fires; [0, 22), [3, 13) go
        ("b", 5, 7),     // past its lateness (14 + 20 <= 49): late
    ];
    let lines: String = events
        .iter()
        .map(|(u, ts, x)| format!("{}\n", json!({"u": u, "ts": ts, "x": x})))
        .collect();
    std::fs::write(&input, lines).unwrap();
    let (output, late) = (dir.path().join("out.jsonl"), dir.path().join("late.jsonl"));
    let bundle = dir.path().join("job");
    std::fs::create_dir_all(&bundle).unwrap();
    std::fs::copy(weir_tests::guest("wordcount"), bundle.join("c.wasm")).unwrap();
    std::fs::write(
        bundle.join("weir.toml"),
        format!(
            "[job]\nname = 'sessions'\n[component]\npath = 'c.wasm'\n\
             [[source]]\nname = 'in'\ntype = 'json-lines-file'\npath = '{}'\n\
             timestamp = '/ts'\nwatermark = 'bounded'\nmax-delay-ms = 0\nwatermark-interval-ms = 0\n\
             [[operator]]\nname = 'spend'\nbuiltin = 'sum'\nfield = '/x'\nkey-by = '/u'\n\
             window = {{ type = 'session', gap-ms = 10 }}\nallowed-lateness-ms = 20\n\
             [[sink]]\nname = 'out'\ntype = 'json-lines-file'\npath = '{}'\n\
             [[sink]]\nname = 'late'\ninput = 'spend:late'\ntype = 'json-lines-file'\npath = '{}'\n",
            input.display(),
            output.display(),
            late.display()
        ),
    )
    .unwrap();
    let o = weir(&["run", bundle.to_str().unwrap()]);
    assert!(o.ok, "{}", o.stderr);
    let read = |p: &std::path::Path| -> Vec<Value> {
        std::fs::read_to_string(p)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let w = |k: &str, s: i64, e: i64, sum: i64| json!({"key": k, "window_start": s, "window_end": e, "sum": sum});
    assert_eq!(
        read(&output),
        [
            w("b", 3, 13, 10),
            w("a", 0, 15, 3),
            w("a", 0, 22, 11),
            w("a", 0, 22, 111),
            w("a", 30, 40, 4),
            w("b", 50, 60, 1000),
        ]
    );
    assert_eq!(read(&late), [json!({"u": "b", "ts": 5, "x": 7})]);
}

/// A job of a source, built-in operators and a sink is its manifest alone:
/// `weir run` and `weir build` of a directory without a component or an
/// operator project, and a run of the archive built; a function with no
/// component to export it is refused naming the operator.
#[test]
fn a_job_of_built_in_operators_needs_no_component() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("sql");
    std::fs::create_dir_all(&bundle).unwrap();
    let output = dir.path().join("out.jsonl");
    let manifest = |operator: &str| {
        format!(
            "[job]\nname = 'sql'\n\
             [[source]]\nname = 'numbers'\ntype = 'generator'\npattern = 'numbers'\ncount = '1000'\n\
             [[operator]]\n{operator}\n\
             [[sink]]\nname = 'out'\ntype = 'json-lines-file'\npath = '{}'\n",
            output.display()
        )
    };
    std::fs::write(
        bundle.join("weir.toml"),
        manifest("name = 'odd'\nbuiltin = 'select'\ncolumns = ['id = /id', 'twice = /price * 2']\nwhere = '/id % 2 == 1'"),
    )
    .unwrap();
    let lines = |path: &Path| -> Vec<serde_json::Value> {
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let check = |out: Vec<serde_json::Value>| {
        assert_eq!(out.len(), 500);
        let mut ids: Vec<u64> = out.iter().map(|v| v["id"].as_u64().unwrap()).collect();
        ids.sort();
        assert_eq!(ids, (0..500).map(|i| 2 * i + 1).collect::<Vec<u64>>());
        assert!(
            out.iter()
                .all(|v| v["twice"].as_u64().unwrap() == 2 * (v["id"].as_u64().unwrap() % 1000))
        );
    };
    let o = weir(&["run", bundle.to_str().unwrap()]);
    assert!(o.ok, "{}", o.stderr);
    check(lines(&output));
    std::fs::remove_file(&output).unwrap();
    let o = weir(&["build", bundle.to_str().unwrap()]);
    assert!(o.ok, "{}", o.stderr);
    assert!(o.stdout.contains("built-in only"), "{}", o.stdout);
    let archive = bundle.join("dist/sql.weir");
    let o = weir(&["run", archive.to_str().unwrap()]);
    assert!(o.ok, "{}", o.stderr);
    check(lines(&output));
    // A select's rows (the generator's stream is typed) keyed by a column
    // it computes, counted: the count reads the key from the row.
    std::fs::remove_file(&output).unwrap();
    std::fs::write(
        bundle.join("weir.toml"),
        manifest(
            "name = 'odd'\nbuiltin = 'select'\ncolumns = ['id = /id', 'bucket = /id % 7 - 3']\nwhere = '/id % 2 == 1'\n\
             [[operator]]\nname = 'per-bucket'\nbuiltin = 'count'\nkey-by = '/bucket'",
        ),
    )
    .unwrap();
    let o = weir(&["run", bundle.to_str().unwrap()]);
    assert!(o.ok, "{}", o.stderr);
    let mut totals: BTreeMap<i64, u64> = BTreeMap::new();
    for update in lines(&output) {
        let (key, count) = (update["key"].as_i64(), update["count"].as_u64());
        totals.insert(key.unwrap(), count.unwrap());
    }
    let mut expected: BTreeMap<i64, u64> = BTreeMap::new();
    for id in (1..1000).step_by(2) {
        *expected.entry(id % 7 - 3).or_default() += 1;
    }
    assert_eq!(totals, expected);
    // A function needs a component.
    std::fs::write(
        bundle.join("weir.toml"),
        manifest("name = 'split'\nfunction = 'split-words'"),
    )
    .unwrap();
    let o = weir(&["run", bundle.to_str().unwrap()]);
    assert!(!o.ok);
    assert!(
        o.stderr
            .contains("operator `split` (function `split-words`) needs one"),
        "{}",
        o.stderr
    );
}

/// Built-in running aggregates per key, against sums, extremes and means
/// computed here: whole numbers stay whole, nulls and missing fields are
/// skipped, `emit = "batch"` ends on the same totals, and a field that is
/// not a number fails the job naming the record.
#[test]
fn builtin_aggregates_compute_running_values_per_key() {
    use serde_json::{Value, json};
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.jsonl");
    let mut lines = String::new();
    let mut records = Vec::new();
    for i in 0..3000i64 {
        let user = format!("u{}", i % 7);
        let amount = match i % 10 {
            0 => Value::Null,
            3 => json!(i as f64 / 4.0),
            _ => json!((i * 37) % 101 - 50),
        };
        let record = if i % 13 == 0 {
            json!({"user": user})
        } else {
            json!({"user": user, "amount": amount})
        };
        lines.push_str(&format!("{record}\n"));
        records.push(record);
    }
    std::fs::write(&input, lines).unwrap();
    let run = |builtin: &str, extra: &str| -> (bool, Vec<Value>, String) {
        let bundle = dir.path().join(format!("{builtin}-{}", extra.len()));
        std::fs::create_dir_all(&bundle).unwrap();
        std::fs::copy(weir_tests::guest("wordcount"), bundle.join("c.wasm")).unwrap();
        let output = bundle.join("out.jsonl");
        std::fs::write(
            bundle.join("weir.toml"),
            format!(
                "[job]\nname = 'agg'\n[component]\npath = 'c.wasm'\n\
                 [[source]]\nname = 'in'\ntype = 'json-lines-file'\npath = '{}'\n\
                 [[operator]]\nname = 'agg'\nbuiltin = '{builtin}'\nkey-by = '/user'\n{extra}\n\
                 [[sink]]\nname = 'out'\ntype = 'json-lines-file'\npath = '{}'\n",
                input.display(),
                output.display()
            ),
        )
        .unwrap();
        let o = weir(&["run", bundle.to_str().unwrap(), "--parallelism", "3"]);
        let out = std::fs::read_to_string(&output)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        (o.ok, out, o.stderr)
    };
    // The last update per key, and how many updates each key had.
    let last = |out: &[Value], f: &str| {
        let mut last = std::collections::BTreeMap::new();
        for v in out {
            let e = last
                .entry(v["key"].as_str().unwrap().to_owned())
                .or_insert((0, Value::Null));
            e.0 += 1;
            e.1 = v[f].clone();
        }
        last
    };
    let amounts = |user: &str| -> Vec<Value> {
        records
            .iter()
            .filter(|r| r["user"] == user && !r["amount"].is_null())
            .map(|r| r["amount"].clone())
            .collect()
    };
    for user in (0..7).map(|u| format!("u{u}")) {
        let all = records
            .iter()
            .filter(|r| r["user"] == user.as_str())
            .count();
        let a = amounts(&user);
        let whole = |v: &Value| v.as_i64();
        let sum: Value = if a.iter().all(|v| whole(v).is_some()) {
            json!(a.iter().map(|v| v.as_i64().unwrap()).sum::<i64>())
        } else {
            json!(a.iter().map(|v| v.as_f64().unwrap()).sum::<f64>())
        };
        let fl: Vec<f64> = a.iter().map(|v| v.as_f64().unwrap()).collect();
        let min = fl.iter().copied().fold(f64::INFINITY, f64::min);
        let max = fl.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let avg = fl.iter().sum::<f64>() / fl.len() as f64;
        for (builtin, extra, f, want) in [
            ("count", "", "count", json!(all)),
            ("count", "field = '/amount'", "count", json!(a.len())),
            ("sum", "field = '/amount'", "sum", sum.clone()),
            ("sum", "field = '/amount'\nemit = 'batch'", "sum", sum),
            ("min", "field = '/amount'", "min", json!(min)),
            ("max", "field = '/amount'", "max", json!(max)),
            ("avg", "field = '/amount'", "avg", json!(avg)),
        ] {
            let (ok, out, stderr) = run(builtin, extra);
            assert!(ok, "{builtin} {extra}: {stderr}");
            let (updates, got) = last(&out, f).remove(&user).unwrap();
            if !extra.contains("batch") {
                assert_eq!(
                    updates, all,
                    "{builtin} {extra}: an update per record of {user}"
                );
            }
            let close = match (got.as_f64(), want.as_f64()) {
                (Some(g), Some(w)) => (g - w).abs() <= 1e-9 * w.abs().max(1.0),
                _ => false,
            };
            assert!(
                got == want || (close && got.is_f64() == want.is_f64()),
                "{builtin} {extra} of {user}: {got}, not {want}"
            );
        }
    }
    std::fs::write(&input, "{\"user\": \"a\", \"amount\": \"many\"}\n").unwrap();
    let (ok, _, stderr) = run("sum", "field = '/amount'");
    assert!(!ok);
    assert!(
        stderr.contains("field /amount of a record is not a number") && stderr.contains("many"),
        "{stderr}"
    );
}
