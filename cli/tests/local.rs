//! `weir local` and the CLI over REST, as real processes on loopback: submit
//! and wait, list, status, cancel, a restart that keeps the jobs, and clear
//! errors when the coordinator is not there.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// A `weir local` process (killed when dropped) and its REST API.
struct Local {
    process: common::Proc,
    url: String,
}

fn start_local(data: &Path) -> Local {
    // Jobs' files are beside the data directory, in the test's own.
    let (process, url) = common::local(data);
    Local { process, url }
}

/// Run `weir` with `args`, killed after two minutes.
fn weir(args: &[&str]) -> Output {
    let child = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(args)
        .current_dir(root())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    common::finish_within(child, Duration::from_secs(120), &format!("weir {args:?}"))
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn submit_list_status_cancel_and_restart() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let input = dir.path().join("in.txt");
    std::fs::write(&input, "to be or not to be\n".repeat(200)).unwrap();
    let output = dir.path().join("out.jsonl");
    let local = start_local(&data);
    let url = local.url.clone();
    let c = url.as_str();

    let o = weir(&[
        "submit",
        "examples/wordcount",
        "--parallelism",
        "2",
        "--wait",
        "--coordinator",
        c,
        "--param",
        &format!("input={}", input.display()),
        "--param",
        &format!("output={}", output.display()),
    ]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    let id = out.lines().last().unwrap().trim().to_owned();
    assert_eq!(id.len(), 16, "the job id alone on the last line: {out:?}");
    assert!(err.contains("is finished"), "{err}");
    let be = std::fs::read_to_string(&output)
        .unwrap()
        .lines()
        .filter(|l| l.contains("\"be\""))
        .count();
    assert_eq!(be, 400);

    // A job of built-in operators only: its manifest is its bundle, run
    // on the workers with no component.
    let sql = dir.path().join("sql");
    std::fs::create_dir_all(&sql).unwrap();
    let counts = dir.path().join("counts.jsonl");
    std::fs::write(
        sql.join("weir.toml"),
        format!(
            "[job]\nname = 'sql'\n\
             [[source]]\nname = 'numbers'\ntype = 'generator'\npattern = 'numbers'\ncount = '2000'\n\
             [[operator]]\nname = 'per-price'\nbuiltin = 'count'\nkey-by = '/price'\n\
             [[sink]]\nname = 'out'\ntype = 'json-lines-file'\npath = '{}'\n",
            counts.display()
        ),
    )
    .unwrap();
    let o = weir(&[
        "submit",
        sql.to_str().unwrap(),
        "--parallelism",
        "2",
        "--wait",
        "--coordinator",
        c,
    ]);
    assert!(o.status.success(), "{}", text(&o).1);
    let mut last = std::collections::BTreeMap::new();
    let text_out = std::fs::read_to_string(&counts).unwrap();
    for line in text_out.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let n = v["count"].as_u64().unwrap();
        let e = last.entry(v["key"].to_string()).or_insert(0);
        *e = n.max(*e);
    }
    // 2,000 events over 1,000 prices: an update each, two per price.
    assert_eq!(text_out.lines().count(), 2000);
    assert_eq!(last.len(), 1000);
    assert!(last.values().all(|&n| n == 2), "{last:?}");

    let (out, _) = text(&weir(&["list", "--coordinator", c]));
    assert!(out.contains(&id) && out.contains("finished"), "{out}");
    let (out, _) = text(&weir(&["status", &id, "--coordinator", c]));
    assert!(
        out.contains("is finished") && out.contains("count"),
        "{out}"
    );

    // An unbounded job runs until canceled.
    let bundle = common::endless_bundle(dir.path());
    let o = weir(&["submit", bundle.to_str().unwrap(), "--coordinator", c]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    let endless = out.lines().last().unwrap().trim().to_owned();
    std::thread::sleep(Duration::from_millis(500));
    let (out, _) = text(&weir(&["status", &endless, "--coordinator", c]));
    assert!(out.contains("is running"), "{out}");
    let o = weir(&["cancel", &endless, "--coordinator", c]);
    assert!(o.status.success(), "{}", text(&o).1);
    let started = Instant::now();
    loop {
        let (out, _) = text(&weir(&["status", &endless, "--coordinator", c]));
        if out.contains("is canceled") {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "not canceled: {out}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    // Bad submissions fail with the reason.
    let o = weir(&[
        "submit",
        "examples/wordcount",
        "--coordinator",
        c,
        "--param",
        "colour=red",
    ]);
    assert!(!o.status.success());
    assert!(
        text(&o).1.contains("unknown parameter `colour`"),
        "{}",
        text(&o).1
    );
    let o = weir(&["status", "0000000000000000", "--coordinator", c]);
    assert!(text(&o).1.contains("no job with id"), "{}", text(&o).1);

    // A restart keeps the jobs.
    drop(local);
    let o = weir(&["list", "--coordinator", c]);
    assert!(!o.status.success());
    assert!(
        text(&o).1.contains("cannot reach the coordinator"),
        "{}",
        text(&o).1
    );
    let again = start_local(&data);
    let (out, _) = text(&weir(&["list", "--coordinator", &again.url]));
    assert!(out.contains(&id) && out.contains(&endless), "{out}");
}

fn counts(out: &str, vertex: &str) -> (u64, u64) {
    let line = out
        .lines()
        .find(|l| l.trim_start().starts_with(vertex))
        .unwrap_or_else(|| panic!("{vertex} in {out}"));
    let words: Vec<&str> = line.split_whitespace().collect();
    (words[5].parse().unwrap(), words[7].parse().unwrap())
}

#[test]
fn a_slow_stage_slows_the_source_and_memory_stays_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let local = start_local(&dir.path().join("data"));
    let c = local.url.clone();
    // A generator as fast as it can go, feeding (over a channel: another
    // parallelism) a stage that takes 0.5 ms per record.
    let bundle = common::bundle(
        dir.path(),
        "slow",
        "test-guests",
        "[job]\nname = 'slow'\n[component]\npath = 'c.wasm'\n[[source]]\nname = 'gen'\ntype = 'generator'\n\
         [[operator]]\nname = 'slow'\nfunction = 'slow'\nparallelism = 2\n[[sink]]\nname = 'out'\ntype = 'json-lines-file'\npath = '/dev/null'\n",
    );
    let job = common::submitted(&weir(&[
        "submit",
        bundle.to_str().unwrap(),
        "--coordinator",
        &c,
    ]));

    let pid = local.process.0.id();
    let mut samples = Vec::new();
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(4) {
        std::thread::sleep(Duration::from_millis(250));
        let (out, _) = text(&weir(&["status", &job, "--coordinator", &c]));
        let (_, source_out) = counts(&out, "gen");
        let (slow_in, _) = counts(&out, "slow");
        samples.push((common::rss_kib(pid), source_out, slow_in));
    }
    // `weir status` tells where the pressure is: the source waits for room.
    let (out, _) = text(&weir(&["status", &job, "--coordinator", &c]));
    let line = out
        .lines()
        .find(|l| l.trim_start().starts_with("gen"))
        .unwrap();
    let pressure: f64 = line
        .split("backpressure")
        .nth(1)
        .and_then(|r| r.trim().split('%').next())
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or_else(|| panic!("no backpressure in {line:?}"));
    assert!(pressure >= 50.0, "{out}");
    weir(&["cancel", &job, "--coordinator", &c]);
    eprintln!("(RSS KiB, source out, slow in) every 250 ms: {samples:?}");
    let (rss, source_out, slow_in) = *samples.last().unwrap();
    // The source is held to what the slow stage takes, plus what the
    // channels hold: 2 receivers × 16 batches × 1,024 records, the output
    // buffers and the batches in hand.
    assert!(slow_in > 0, "{samples:?}");
    let in_flight = source_out - slow_in;
    assert!(
        in_flight <= 2 * 16 * 1024 + 6 * 1024,
        "{in_flight} records in flight: {samples:?}"
    );
    // Unchecked, a generator makes millions of records per second.
    assert!(source_out < 2_000_000, "{samples:?}");
    // Memory: flat once the channels are full.
    let half = samples.len() / 2;
    let early = samples[..half].iter().map(|s| s.0).max().unwrap();
    assert!(
        rss < early + 50 * 1024,
        "RSS grew from {early} KiB to {rss} KiB: {samples:?}"
    );
}

/// The counts per key in a count's JSON-lines output, in order.
fn counts_of(path: &Path) -> Vec<(String, u64)> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .map(|v| (v["key"].to_string(), v["count"].as_u64().unwrap()))
        .collect()
}

#[test]
fn a_running_count_with_a_time_to_live_starts_over_for_a_key_that_went_quiet() {
    let dir = tempfile::tempdir().unwrap();
    let local = start_local(&dir.path().join("data"));
    let c = local.url.as_str();
    let input = dir.path().join("in.jsonl");
    let output = dir.path().join("counts.jsonl");
    std::fs::write(
        &input,
        "{\"k\":\"a\"}\n{\"k\":\"a\"}\n{\"k\":\"b\"}\n{\"k\":\"a\"}\n",
    )
    .unwrap();
    let bundle = dir.path().join("ttl");
    std::fs::create_dir_all(&bundle).unwrap();
    let manifest = |ttl: &str| {
        format!(
            "[job]\nname = 'ttl'\n\
             [[source]]\nname = 'events'\ntype = 'json-lines-file'\npath = '{}'\nfollow = true\n\
             [[operator]]\nname = 'per-key'\nbuiltin = 'count'\nkey-by = '/k'\n{ttl}\n\
             [[sink]]\nname = 'out'\ntype = 'json-lines-file'\npath = '{}'\n",
            input.display(),
            output.display()
        )
    };
    // A windowed count keeps its keys until the window fires: refused.
    std::fs::write(
        bundle.join("weir.toml"),
        manifest("ttl-ms = 2000\nwindow = { type = 'tumbling', size-ms = 1000 }"),
    )
    .unwrap();
    let o = weir(&["submit", bundle.to_str().unwrap(), "--coordinator", c]);
    let (_, err) = text(&o);
    assert!(!o.status.success());
    assert!(err.contains("per-key") && err.contains("ttl-ms"), "{err}");

    std::fs::write(bundle.join("weir.toml"), manifest("ttl-ms = 2000")).unwrap();
    let o = weir(&["submit", bundle.to_str().unwrap(), "--coordinator", c]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    let id = out.lines().last().unwrap().trim().to_owned();
    let wait_for = |n: usize| {
        let started = Instant::now();
        loop {
            let got = counts_of(&output);
            if got.len() >= n {
                return got;
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "{n} counts written: {got:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    let first = wait_for(4);
    let a = "\"a\"".to_owned();
    assert_eq!(
        first
            .iter()
            .filter(|(k, _)| *k == a)
            .map(|(_, n)| *n)
            .collect::<Vec<_>>(),
        [1, 2, 3]
    );
    // Quiet for well past its time-to-live: key `a` counts from 1 again.
    std::thread::sleep(Duration::from_millis(4000));
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&input)
        .unwrap();
    std::io::Write::write_all(&mut f, b"{\"k\":\"a\"}\n{\"k\":\"a\"}\n").unwrap();
    drop(f);
    let all = wait_for(6);
    assert_eq!(all[4..], [(a.clone(), 1), (a, 2)], "{all:?}");
    let o = weir(&["cancel", &id, "--coordinator", c]);
    assert!(o.status.success(), "{}", text(&o).1);
}
