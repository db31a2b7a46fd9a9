//! Event time end to end, against what the tests compute themselves:
//! out-of-order input under a bounded delay, allowed lateness and the late
//! side output, session windows that merge, a slower input holding the
//! watermark, an idle input that does not, timestamp assigners, and the same
//! results at parallelism 1 and 4.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use weir_host::LoadedComponent;
use weir_worker::run_job;

use crate::{fixtures, local_job, runtime};

/// Deterministic pseudo-random numbers (splitmix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn component(package: &str) -> (Arc<weir_host::WasmRuntime>, Arc<LoadedComponent>) {
    let rt = runtime();
    let c = rt
        .load_file(&weir_tests::guest(package))
        .expect("the component loads");
    (rt, c)
}

fn lines(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn write_events(path: &Path, events: &[(String, i64)]) {
    let mut s = String::new();
    for (k, t) in events {
        s.push_str(&serde_json::json!({"key": k, "ts": t}).to_string());
        s.push('\n');
    }
    std::fs::write(path, s).unwrap();
}

/// The windows (start, end) of a record at `t`.
fn windows_of(t: i64, size: i64, slide: i64) -> Vec<(i64, i64)> {
    let mut start = t - t.rem_euclid(slide);
    let mut out = Vec::new();
    while start > t - size {
        out.push((start, start + size));
        start -= slide;
    }
    out
}

type Counts = BTreeMap<(String, i64, i64), u64>;

/// What the windowed counts job must output, read in order by one source
/// subtask: a watermark (largest timestamp − delay − 1) after every record
/// that advances it; windows fire when it reaches their end − 1; a record
/// whose windows all ended more than `lateness` before the watermark is
/// late; one within the lateness updates its window, which fires again.
/// Returns the last firing of every window, and the late records.
fn reference(
    events: &[(String, i64)],
    size: i64,
    slide: i64,
    delay: i64,
    lateness: i64,
) -> (Counts, Vec<(String, i64)>) {
    let mut wm: Option<i64> = None;
    let mut max_ts: Option<i64> = None;
    let mut state: Counts = BTreeMap::new();
    let mut fired: Counts = BTreeMap::new();
    let mut late = Vec::new();
    for (k, t) in events {
        let live: Vec<(i64, i64)> = windows_of(*t, size, slide)
            .into_iter()
            .filter(|(_, end)| wm.is_none_or(|wm| end - 1 + lateness > wm))
            .collect();
        if live.is_empty() {
            late.push((k.clone(), *t));
        }
        for (start, end) in live {
            let n = state.entry((k.clone(), start, end)).or_default();
            *n += 1;
            if wm.is_some_and(|wm| end - 1 <= wm) {
                fired.insert((k.clone(), start, end), *n);
            }
        }
        max_ts = Some(max_ts.map_or(*t, |m: i64| m.max(*t)));
        let candidate = max_ts.unwrap() - delay - 1;
        if wm.is_none_or(|w| candidate > w) {
            let before = wm;
            wm = Some(candidate);
            for ((k, start, end), n) in &state {
                if end - 1 <= candidate && before.is_none_or(|b| end - 1 > b) {
                    fired.insert((k.clone(), *start, *end), *n);
                }
            }
        }
    }
    // End of input: everything fires.
    for ((k, start, end), n) in &state {
        if wm.is_none_or(|w| end - 1 > w) {
            fired.insert((k.clone(), *start, *end), *n);
        }
    }
    (fired, late)
}

/// The last firing of every window in the job's output.
fn last_firings(out: &[serde_json::Value]) -> Counts {
    let mut got = BTreeMap::new();
    for v in out {
        got.insert(
            (
                v["key"].as_str().unwrap().to_owned(),
                v["window_start"].as_i64().unwrap(),
                v["window_end"].as_i64().unwrap(),
            ),
            v["count"].as_u64().unwrap(),
        );
    }
    got
}

/// Events per key in rising time with jitter of up to `disorder` ms, and,
/// every `late_every` records, one from up to `late_by` ms in the past.
fn stream(
    n: usize,
    keys: u64,
    disorder: i64,
    late_every: usize,
    late_by: i64,
) -> Vec<(String, i64)> {
    let mut rng = Rng(7);
    let mut out = Vec::new();
    for i in 0..n {
        let base = i as i64 * 10;
        let mut t = base - rng.below(disorder as u64 + 1) as i64;
        if late_every > 0 && i % late_every == late_every - 1 {
            t = base - rng.below(late_by as u64) as i64;
        }
        out.push((format!("k{}", rng.below(keys)), t.max(0)));
    }
    out
}

async fn windowed_counts(
    dir: &Path,
    events: &[(String, i64)],
    params: &[(&str, &str)],
    parallelism: u32,
) -> (Vec<serde_json::Value>, Vec<serde_json::Value>) {
    let (rt, c) = component("windowed-counts");
    let manifest = std::fs::read_to_string(
        weir_tests::workspace_root().join("examples/windowed-counts/weir.toml"),
    )
    .unwrap();
    let tag = format!("p{parallelism}-{}", params.len());
    let input = dir.join(format!("in-{tag}.jsonl"));
    let output = dir.join(format!("out-{tag}.jsonl"));
    let late = dir.join(format!("late-{tag}.jsonl"));
    write_events(&input, events);
    let mut all = vec![
        ("input", input.to_str().unwrap()),
        ("output", output.to_str().unwrap()),
        ("late", late.to_str().unwrap()),
    ];
    all.extend_from_slice(params);
    let job = local_job(rt, c, &manifest, &all, parallelism).unwrap();
    run_job(job).await.unwrap();
    (lines(&output), lines(&late))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_of_order_input_within_the_delay_counts_exactly_at_parallelism_1_and_4() {
    let dir = tempfile::tempdir().unwrap();
    // Up to 300 ms out of order, a delay of 400: nothing is late.
    let events = stream(4000, 13, 300, 0, 0);
    let mut exact: Counts = BTreeMap::new();
    for (k, t) in &events {
        for (s, e) in windows_of(*t, 1000, 1000) {
            *exact.entry((k.clone(), s, e)).or_default() += 1;
        }
    }
    let params = [("window", "1000"), ("max_delay", "400")];
    for p in [1, 4] {
        let (out, late) = windowed_counts(dir.path(), &events, &params, p).await;
        assert!(late.is_empty(), "p{p}: {late:?}");
        assert_eq!(out.len(), exact.len(), "p{p}: each window fires once");
        assert_eq!(last_firings(&out), exact, "p{p}");
    }
    // Sliding windows, the same way.
    let mut exact: Counts = BTreeMap::new();
    for (k, t) in &events {
        for (s, e) in windows_of(*t, 2000, 500) {
            *exact.entry((k.clone(), s, e)).or_default() += 1;
        }
    }
    let params = [("window", "2000"), ("slide", "500"), ("max_delay", "400")];
    for p in [1, 4] {
        let (out, late) = windowed_counts(dir.path(), &events, &params, p).await;
        assert!(late.is_empty(), "p{p}: {late:?}");
        assert_eq!(last_firings(&out), exact, "sliding, p{p}");
    }
}

/// Many windows due at one watermark (more than the operator fires at
/// once) all fire, at that watermark and at the end of input.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forty_thousand_windows_due_at_once_all_fire_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let keys = 20_000_i64;
    let mut events: Vec<(String, i64)> = (0..keys).map(|i| (format!("k{i}"), i % 1000)).collect();
    // Its watermark (4999) makes every window of the first round due.
    events.push(("k0".into(), 5000));
    // Then one late record per first-round window, within the lateness:
    // each window fires again with 2 — so a window that did not fire at
    // 4999 would first show up with 2.
    events.extend((0..keys).map(|i| (format!("k{i}"), i % 1000)));
    // A second round, due only at the end of input.
    events.extend((0..keys).map(|i| (format!("k{i}"), 5000 + i % 1000)));
    let mut exact: Counts = BTreeMap::new();
    for (k, t) in &events {
        for (s, e) in windows_of(*t, 1000, 1000) {
            *exact.entry((k.clone(), s, e)).or_default() += 1;
        }
    }
    assert_eq!(exact.len(), 40_000);
    let params = [
        ("window", "1000"),
        ("max_delay", "0"),
        ("lateness", "10000"),
    ];
    let (out, late) = windowed_counts(dir.path(), &events, &params, 1).await;
    assert!(late.is_empty(), "{late:?}");
    let mut first: Counts = BTreeMap::new();
    for v in &out {
        let window = (
            v["key"].as_str().unwrap().to_owned(),
            v["window_start"].as_i64().unwrap(),
            v["window_end"].as_i64().unwrap(),
        );
        first.entry(window).or_insert(v["count"].as_u64().unwrap());
    }
    let early: Vec<_> = first
        .iter()
        .filter(|((_, s, _), n)| *s == 0 && **n != 1)
        .collect();
    assert!(
        early.is_empty(),
        "{} windows did not fire at the watermark: {:?}",
        early.len(),
        early.first()
    );
    assert_eq!(last_firings(&out), exact);
    assert_eq!(
        out.len(),
        60_000,
        "each window once, the first round's twice"
    );
}

/// A sliding window whose slide does not divide its size (30 days every 7
/// days): every record counts in each window `[k·7 d, k·7 d + 30 d)` that
/// holds it (4 or 5 of them), as in Flink.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sliding_window_of_30_days_every_7_days_counts_as_flink_does() {
    const DAY: i64 = 86_400_000;
    let dir = tempfile::tempdir().unwrap();
    // One event every 3 hours for 250 days, over 7 keys.
    let events: Vec<(String, i64)> = (0..2000i64)
        .map(|i| (format!("k{}", (i * 5) % 7), i * DAY / 8))
        .collect();
    let mut exact: Counts = BTreeMap::new();
    for (k, t) in &events {
        let windows = windows_of(*t, 30 * DAY, 7 * DAY);
        assert!((4..=5).contains(&windows.len()));
        for (s, e) in windows {
            *exact.entry((k.clone(), s, e)).or_default() += 1;
        }
    }
    let (size, slide) = ((30 * DAY).to_string(), (7 * DAY).to_string());
    let params = [("window", size.as_str()), ("slide", slide.as_str())];
    for p in [1, 4] {
        let (out, late) = windowed_counts(dir.path(), &events, &params, p).await;
        assert!(late.is_empty(), "p{p}: {late:?}");
        assert_eq!(out.len(), exact.len(), "p{p}: each window fires once");
        assert_eq!(last_firings(&out), exact, "p{p}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn late_records_update_their_window_within_the_lateness_and_go_aside_after_it() {
    let dir = tempfile::tempdir().unwrap();
    // Every 7th record from up to 3 s back: some within the delay, some
    // within the lateness, some later than both.
    let events = stream(3000, 5, 50, 7, 3000);
    for (size, slide, delay, lateness) in [(500, 500, 100, 700), (1000, 250, 100, 400)] {
        let (want, want_late) = reference(&events, size, slide, delay, lateness);
        assert!(
            want_late.len() > 20 && want_late.len() < 400,
            "the stream has late records: {}",
            want_late.len()
        );
        let (size_s, slide_s, delay_s, lateness_s) = (
            size.to_string(),
            slide.to_string(),
            delay.to_string(),
            lateness.to_string(),
        );
        let params = [
            ("window", size_s.as_str()),
            ("slide", slide_s.as_str()),
            ("max_delay", delay_s.as_str()),
            ("lateness", lateness_s.as_str()),
        ];
        let (out, late) = windowed_counts(dir.path(), &events, &params, 1).await;
        assert_eq!(last_firings(&out), want, "window {size}/{slide}");
        let got_late: Vec<(String, i64)> = late
            .iter()
            .map(|v| {
                (
                    v["key"].as_str().unwrap().to_owned(),
                    v["ts"].as_i64().unwrap(),
                )
            })
            .collect();
        assert_eq!(got_late, want_late, "late records, unchanged, in order");
        // Some windows fired more than once (late records within lateness).
        assert!(out.len() > want.len(), "{} firings", out.len());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_windows_merge_when_a_record_bridges_them() {
    let dir = tempfile::tempdir().unwrap();
    let gap = 100;
    let mut rng = Rng(11);
    // Per user, bursts of clicks; times out of order by up to 150 ms, so a
    // click often arrives after the two sessions it joins.
    let mut clicks: Vec<(String, i64)> = Vec::new();
    for u in 0..6 {
        let mut t = rng.below(50) as i64;
        for _ in 0..120 {
            clicks.push((format!("u{u}"), t));
            t += if rng.below(6) == 0 {
                300 + rng.below(200) as i64
            } else {
                20 + rng.below(90) as i64
            };
        }
    }
    clicks.sort_by_key(|(_, t)| *t);
    for i in 0..clicks.len() {
        let j = (i + rng.below(4) as usize).min(clicks.len() - 1);
        if (clicks[j].1 - clicks[i].1).abs() <= 150 {
            clicks.swap(i, j);
        }
    }
    let mut by_user: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for (u, t) in &clicks {
        by_user.entry(u.clone()).or_default().push(*t);
    }
    let mut want = BTreeSet::new();
    for (u, mut ts) in by_user {
        ts.sort();
        let (mut start, mut last, mut n) = (ts[0], ts[0], 0usize);
        for t in ts {
            if t > last + gap {
                want.insert((u.clone(), start, last + gap, n));
                start = t;
                n = 0;
            }
            last = t;
            n += 1;
        }
        want.insert((u.clone(), start, last + gap, n));
    }
    let input = dir.path().join("clicks.jsonl");
    let mut text = String::new();
    for (u, t) in &clicks {
        text.push_str(&format!(
            "{{\"user\":\"{u}\",\"page\":\"/p\",\"ts\":{t}}}\n"
        ));
    }
    std::fs::write(&input, text).unwrap();
    let manifest =
        std::fs::read_to_string(weir_tests::workspace_root().join("examples/sessions/weir.toml"))
            .unwrap();
    for p in [1, 4] {
        let output = dir.path().join(format!("sessions-{p}.jsonl"));
        let (rt, c) = component("sessions");
        let params = [
            ("input", input.to_str().unwrap()),
            ("output", output.to_str().unwrap()),
            ("gap", "100"),
            ("max_delay", "200"),
        ];
        run_job(local_job(rt, c, &manifest, &params, p).unwrap())
            .await
            .unwrap();
        let got: BTreeSet<(String, i64, i64, usize)> = lines(&output)
            .iter()
            .map(|v| {
                (
                    v["user"].as_str().unwrap().to_owned(),
                    v["start"].as_i64().unwrap(),
                    v["end"].as_i64().unwrap(),
                    v["clicks"].as_u64().unwrap() as usize,
                )
            })
            .collect();
        assert_eq!(got, want, "p{p}");
    }
}

const TWO_INPUTS: &str = r#"
[job]
name = "two-inputs"
parallelism = 1
[params]
fast = {}
output = {}
[[source]]
name = "fast"
type = "json-lines-file"
path = "${fast}"
timestamp = "/ts"
watermark-interval-ms = 0
[[source]]
name = "slow"
type = "generator"
count = "40"
rate = "20"
timestamp = "/seq"
watermark-interval-ms = 0
[[operator]]
name = "see"
function = "see-time"
inputs = ["fast", "slow"]
[[sink]]
name = "out"
type = "json-lines-file"
path = "${output}"
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_slower_input_holds_the_watermark_back() {
    let dir = tempfile::tempdir().unwrap();
    let fast = dir.path().join("fast.jsonl");
    let mut text = String::new();
    for i in 0..200 {
        text.push_str(&format!("{{\"ts\": {}}}\n", 1_000_000 + i * 1000));
    }
    std::fs::write(&fast, text).unwrap();
    let output = dir.path().join("out.jsonl");
    let rt = runtime();
    let c = fixtures(&rt);
    let params = [
        ("fast", fast.to_str().unwrap()),
        ("output", output.to_str().unwrap()),
    ];
    run_job(local_job(rt, c, TWO_INPUTS, &params, 1).unwrap())
        .await
        .unwrap();
    let out = lines(&output);
    assert_eq!(out.len(), 240);
    let last_slow = out
        .iter()
        .rposition(|v| v["v"].get("seq").is_some())
        .unwrap();
    let fast_before = out[..last_slow]
        .iter()
        .filter(|v| v["v"].get("ts").is_some())
        .count();
    assert!(
        fast_before > 0,
        "fast records came while the slow input ran"
    );
    // Until the slow input ends, the watermark is at most its own: the
    // largest timestamp it has sent (its records come before its
    // watermarks), never the fast input's millions.
    let mut slow_max = i64::MIN;
    for v in &out[..last_slow] {
        if let Some(seq) = v["v"].get("seq") {
            slow_max = slow_max.max(seq.as_i64().unwrap());
        }
        if let Some(wm) = v["wm"].as_i64() {
            assert!(
                wm <= slow_max,
                "watermark {wm} ahead of the slow input ({slow_max}): {v}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timestamp_assigner_sets_event_time() {
    let manifest = r#"
[job]
name = "assigned"
parallelism = 1
[params]
input = {}
output = {}
[[source]]
name = "in"
type = "json-lines-file"
path = "${input}"
timestamp-assigner = "at"
watermark = "bounded"
max-delay-ms = 10
[[operator]]
name = "see"
function = "see-time"
[[sink]]
name = "out"
type = "json-lines-file"
path = "${output}"
"#;
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.jsonl");
    let text: String = (0..50)
        .map(|i| format!("{{\"at\": {}}}\n", i * 100))
        .collect();
    std::fs::write(&input, text).unwrap();
    let output = dir.path().join("out.jsonl");
    let rt = runtime();
    let c = fixtures(&rt);
    let params = [
        ("input", input.to_str().unwrap()),
        ("output", output.to_str().unwrap()),
    ];
    run_job(local_job(rt.clone(), c.clone(), manifest, &params, 1).unwrap())
        .await
        .unwrap();
    let out = lines(&output);
    assert_eq!(out.len(), 50);
    for v in &out {
        assert_eq!(v["ts"], v["v"]["at"], "{v}");
    }
    // A timestamp assigner must be a `timestamps` function.
    let wrong = manifest.replace(
        "timestamp-assigner = \"at\"",
        "timestamp-assigner = \"twice\"",
    );
    let e = local_job(rt, c, &wrong, &params, 1)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("not a timestamps function"), "{e}");
}

const IDLE: &str = r#"
[job]
name = "idle"
parallelism = 1
[params]
events = {}
quiet = {}
output = {}
idle = { default = "" }
[[source]]
name = "events"
type = "json-lines-file"
path = "${events}"
follow = true
timestamp = "/ts"
watermark-interval-ms = 0
[[source]]
name = "quiet"
type = "json-lines-file"
path = "${quiet}"
follow = true
timestamp = "/ts"
idle-timeout-ms = "${idle}"
[[operator]]
name = "count"
function = "count"
inputs = ["events", "quiet"]
key-by = "/key"
window = { type = "tumbling", size-ms = 1000 }
[[sink]]
name = "out"
type = "json-lines-file"
path = "${output}"
"#;

/// Run the idle job (its sources never end) until `enough` holds of its
/// output or `wait` passed; then cancel it.
async fn run_idle(dir: &Path, idle: &str, wait: Duration) -> Vec<serde_json::Value> {
    let events = dir.join(format!("events{idle}.jsonl"));
    let quiet = dir.join(format!("quiet{idle}.jsonl"));
    let output = dir.join(format!("out{idle}.jsonl"));
    let evs: Vec<(String, i64)> = (0..100).map(|i| ("k".to_owned(), i * 100)).collect();
    write_events(&events, &evs);
    std::fs::write(&quiet, "").unwrap();
    let (rt, c) = component("windowed-counts");
    let params = [
        ("events", events.to_str().unwrap()),
        ("quiet", quiet.to_str().unwrap()),
        ("output", output.to_str().unwrap()),
        ("idle", idle),
    ];
    let job = local_job(rt, c, IDLE, &params, 1).unwrap();
    let cancel = job.cancel.clone();
    let running = tokio::spawn(run_job(job));
    let started = Instant::now();
    // Windows [0, 1000) … [8000, 9000) can fire: the events' watermark is
    // 9900 − 1.
    while started.elapsed() < wait && lines(&output).len() < 9 {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    cancel.store(true, std::sync::atomic::Ordering::Relaxed);
    let ended = tokio::time::timeout(Duration::from_secs(10), running)
        .await
        .expect("the job stops when canceled")
        .unwrap();
    let e = ended.expect_err("canceled, not finished");
    assert!(format!("{e:#}").contains("was canceled"), "{e:#}");
    lines(&output)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_input_does_not_hold_the_watermark_back() {
    let dir = tempfile::tempdir().unwrap();
    // Without an idle timeout, the quiet input holds every window back.
    let held = run_idle(dir.path(), "", Duration::from_millis(1500)).await;
    assert!(held.is_empty(), "{held:?}");
    // With one, it is ignored once idle: the windows the events' watermark
    // passed fire, exactly.
    let out = run_idle(dir.path(), "300", Duration::from_secs(20)).await;
    let got = last_firings(&out);
    let want: Counts = (0..9)
        .map(|w| (("k".to_owned(), w * 1000, w * 1000 + 1000), 10))
        .collect();
    assert_eq!(got, want);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_without_its_timestamp_fails_the_job_naming_the_source_and_the_record() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.jsonl");
    std::fs::write(
        &input,
        "{\"key\":\"a\",\"ts\":1}\n{\"key\":\"b\",\"when\":2}\n",
    )
    .unwrap();
    let (rt, c) = component("windowed-counts");
    let manifest = std::fs::read_to_string(
        weir_tests::workspace_root().join("examples/windowed-counts/weir.toml"),
    )
    .unwrap();
    let params = [("input", input.to_str().unwrap()), ("output", "/dev/null")];
    let e = run_job(local_job(rt, c, &manifest, &params, 1).unwrap())
        .await
        .unwrap_err();
    let e = format!("{e:#}");
    assert!(e.contains("source `events`"), "{e}");
    assert!(
        e.contains(r#"record {"key":"b","when":2} has no field /ts"#),
        "{e}"
    );
}
