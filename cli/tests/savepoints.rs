//! Savepoints on a real `weir local`: a keyed count over a JSON-lines
//! file that keeps growing, written exactly once to a part-file directory,
//! stopped with a savepoint mid-input and started again from it at
//! another parallelism and on another state backend, twice (2 → 3 → 1,
//! RocksDB → memory → RocksDB); the committed output of the three jobs
//! together holds every key's counts 1..n exactly once; the same from a
//! canceled job's retained checkpoint. And the requests a savepoint
//! refuses, each a 4xx naming what is wrong.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use weir_coordinator::jobs::{JobInfo, JobState};

/// How long every wait may take.
const PATIENCE: Duration = Duration::from_secs(120);

/// The input's keys.
const KEYS: u64 = 30;

/// Lines `{"k": "k<n>", "i": <line>}` appended to a file while the test
/// runs (20 every 20 ms), and how many per key.
struct Input {
    counts: Arc<Mutex<BTreeMap<String, u64>>>,
    writing: Arc<AtomicBool>,
    writer: Option<std::thread::JoinHandle<()>>,
}

impl Input {
    fn start(path: &Path) -> Input {
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .unwrap();
        let counts = Arc::new(Mutex::new(BTreeMap::new()));
        let writing = Arc::new(AtomicBool::new(true));
        let (c, w) = (counts.clone(), writing.clone());
        let writer = std::thread::spawn(move || {
            let mut line = 0u64;
            while w.load(Ordering::Relaxed) {
                let mut text = String::new();
                let mut counts = c.lock().unwrap();
                for _ in 0..20 {
                    // A spread of keys that is not round-robin.
                    let key = format!("k{}", (line * 7919 + line / 3) % KEYS);
                    text.push_str(&format!("{{\"k\":\"{key}\",\"i\":{line}}}\n"));
                    *counts.entry(key).or_default() += 1;
                    line += 1;
                }
                drop(counts);
                file.write_all(text.as_bytes()).unwrap();
                file.flush().unwrap();
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        Input {
            counts,
            writing,
            writer: Some(writer),
        }
    }

    /// Stop appending: the lines per key.
    fn stop(&mut self) -> BTreeMap<String, u64> {
        self.writing.store(false, Ordering::Relaxed);
        if let Some(w) = self.writer.take() {
            w.join().unwrap();
        }
        self.counts.lock().unwrap().clone()
    }
}

impl Drop for Input {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The job's bundle: the file followed, a count per key on `backend`, the
/// exactly-once part-file sink into `output`, checkpoints every 200 ms.
fn bundle(dir: &Path, name: &str, input: &Path, output: &Path, backend: &str) -> PathBuf {
    common::bundle(
        dir,
        name,
        "wordcount",
        &format!(
            "[job]\nname = 'counts'\nparallelism = 2\n[component]\npath = 'c.wasm'\n\
             [[source]]\nname = 'events'\ntype = 'json-lines-file'\npath = '{}'\nfollow = true\n\
             [[operator]]\nname = 'count'\nbuiltin = 'count'\nkey-by = '/k'\n\
             [[sink]]\nname = 'counts'\ntype = 'json-lines-file'\npath = '{}'\n\
             [state]\nbackend = '{backend}'\n\
             [checkpoint]\ninterval-ms = 200\n",
            input.display(),
            output.display()
        ),
    )
}

async fn job(rest: &str, id: &str) -> JobInfo {
    common::job_info(rest, id).await
}

/// Wait until job `id` runs, has read `past` lines at least, and has
/// completed a checkpoint.
async fn running(rest: &str, id: &str, past: u64) {
    let started = Instant::now();
    loop {
        let j = job(rest, id).await;
        assert!(!j.state.is_terminal(), "job {id} ended: {j:#?}");
        let read: u64 = j
            .graph
            .vertices
            .iter()
            .zip(&j.vertices)
            .filter(|(g, _)| g.kind == "source")
            .map(|(_, v)| v.records_out)
            .sum();
        let c: weir_coordinator::checkpoint::CheckpointStats =
            reqwest::get(format!("{rest}/v1/jobs/{id}/checkpoints"))
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
        if j.state == JobState::Running && read >= past && c.counts.completed > 0 {
            return;
        }
        assert!(started.elapsed() < PATIENCE, "job {id} runs: {j:#?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `weir stop JOB`: the savepoint's location (printed last); the job ends.
fn stop(rest: &str, id: &str) -> String {
    let o = common::weir(&["stop", id, "--coordinator", rest]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let location = String::from_utf8_lossy(&o.stdout)
        .lines()
        .last()
        .unwrap()
        .trim()
        .to_owned();
    assert!(
        Path::new(&location).join("_metadata").is_file(),
        "{location}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    location
}

/// Start `bundle` at `parallelism` from the savepoint at `savepoint`.
/// `weir submit` of `bundle` from `savepoint`: whether it succeeded, and
/// what it wrote to standard error.
fn submit_from(rest: &str, bundle: &Path, savepoint: &str) -> (bool, String) {
    let o = common::weir(&[
        "submit",
        bundle.to_str().unwrap(),
        "--from-savepoint",
        savepoint,
        "--coordinator",
        rest,
    ]);
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn resume(rest: &str, bundle: &Path, parallelism: u32, savepoint: &str) -> String {
    common::submitted(&common::weir(&[
        "submit",
        bundle.to_str().unwrap(),
        "-p",
        &parallelism.to_string(),
        "--from-savepoint",
        savepoint,
        "--coordinator",
        rest,
    ]))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_count_stopped_and_resumed_at_other_parallelisms_and_backends_stays_exact() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().canonicalize().unwrap();
    let (_local, rest) = common::local(&dir.join("data"));
    let input_path = dir.join("input.jsonl");
    let output = dir.join("out");
    let mut input = Input::start(&input_path);
    let written = |input: &Input| input.counts.lock().unwrap().values().sum::<u64>();

    // Parallelism 2 on RocksDB.
    let rocks = bundle(&dir, "rocks", &input_path, &output, "rocksdb");
    let first = common::submit(&rest, &rocks);
    running(&rest, &first, 200).await;
    let sp1 = stop(&rest, &first);
    let stopped = job(&rest, &first).await;
    assert_eq!(stopped.state, JobState::Canceled, "{stopped:#?}");
    let read_by_first = written(&input);

    // Parallelism 3 in memory, from it (the input grew meanwhile).
    let memory = bundle(&dir, "memory", &input_path, &output, "memory");
    let second = resume(&rest, &memory, 3, &sp1);
    running(&rest, &second, 1).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let sp2 = stop(&rest, &second);
    assert_ne!(sp1, sp2);

    // Parallelism 1 on RocksDB.
    let third = resume(&rest, &rocks, 1, &sp2);
    running(&rest, &third, 1).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    // And rescaled to 2 by the coordinator, in one step, to the end.
    let o = common::weir(&["rescale", &third, "2", "--coordinator", &rest]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let fourth = String::from_utf8_lossy(&o.stdout)
        .lines()
        .last()
        .unwrap()
        .trim()
        .to_owned();
    let rescaled = job(&rest, &fourth).await;
    assert_eq!(rescaled.vertices[1].parallelism, 2, "{rescaled:#?}");
    running(&rest, &fourth, 1).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let want = input.stop();
    let total: u64 = want.values().sum();
    assert!(total > read_by_first, "the input grew between the jobs");
    common::counted_exactly(&output, &want, "the four jobs'").await;
    eprintln!(
        "{total} lines counted exactly once by four jobs: parallelism 2 (RocksDB) → 3 (memory) → 1 (RocksDB) → 2"
    );
    let o = common::weir(&["cancel", &fourth, "--coordinator", &rest]);
    assert!(o.status.success());
}

/// Job `id`'s newest retained checkpoint's directory in the coordinator's
/// data directory `data`.
fn latest_checkpoint(data: &Path, id: &str) -> PathBuf {
    std::fs::read_dir(data.join("checkpoints").join(id))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("_metadata").is_file())
        .max_by_key(|p| {
            p.file_name().unwrap().to_str().unwrap()["chk-".len()..]
                .parse::<u64>()
                .unwrap()
        })
        .unwrap_or_else(|| panic!("job {id} retained no checkpoint"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_canceled_jobs_retained_checkpoint_restores_at_another_parallelism_exactly() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().canonicalize().unwrap();
    let data = dir.join("data");
    let (_local, rest) = common::local(&data);
    let input_path = dir.join("input.jsonl");
    let output = dir.join("out");
    let mut input = Input::start(&input_path);

    // Parallelism 2 on RocksDB (incremental checkpoints: their files are
    // shared between checkpoints), canceled mid-input: no savepoint.
    let rocks = bundle(&dir, "rocks", &input_path, &output, "rocksdb");
    let first = common::submit(&rest, &rocks);
    running(&rest, &first, 200).await;
    let o = common::weir(&["cancel", &first, "--coordinator", &rest]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    common::job_until(&rest, &first, "the job is canceled", |j| {
        j.state == JobState::Canceled
    })
    .await;
    let retained = latest_checkpoint(&data, &first);

    // `weir state` reads it (its RocksDB snapshots exported), as the REST
    // API reads the ended job's newest checkpoint.
    let o = common::weir(&["state", retained.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let counts = |text: &str| -> BTreeMap<String, u64> {
        text.lines()
            .map(|line| {
                let v: serde_json::Value = serde_json::from_str(line).unwrap();
                assert_eq!(v["operator"], "count", "{line}");
                (
                    v["key"].as_str().unwrap().to_owned(),
                    v["value"].as_u64().unwrap(),
                )
            })
            .collect()
    };
    let printed = counts(&String::from_utf8_lossy(&o.stdout));
    assert!(!printed.is_empty());
    let read = reqwest::get(format!("{rest}/v1/jobs/{first}/checkpoints/latest/state"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(printed, counts(&read));
    // The checkpoint names its vertices: the job's bundle may go.
    let bundle_of_first = job(&rest, &first).await.bundle;
    let gone = reqwest::Client::new()
        .delete(format!("{rest}/v1/bundles/{bundle_of_first}"))
        .send()
        .await
        .unwrap();
    assert!(gone.status().is_success(), "{gone:?}");

    // Its metadata anywhere else is refused, naming where it belongs.
    let moved = dir.join("moved");
    std::fs::create_dir_all(&moved).unwrap();
    std::fs::copy(retained.join("_metadata"), moved.join("_metadata")).unwrap();
    let memory = bundle(&dir, "memory", &input_path, &output, "memory");
    let o = common::weir(&[
        "submit",
        memory.to_str().unwrap(),
        "--from-savepoint",
        moved.to_str().unwrap(),
        "--coordinator",
        &rest,
    ]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(&format!("keeps in `{first}/chk-")), "{err}");

    // Parallelism 3 in memory from its latest checkpoint (named by its
    // `_metadata`, as Flink allows): it takes the canceled job's output
    // over and goes on from where it was.
    let second = resume(
        &rest,
        &memory,
        3,
        retained.join("_metadata").to_str().unwrap(),
    );
    let started = job(&rest, &second).await;
    assert_eq!(started.vertices[1].parallelism, 3, "{started:#?}");
    running(&rest, &second, 1).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let want = input.stop();
    common::counted_exactly(&output, &want, "the two jobs'").await;
    // The scratch savepoint it was written out as is gone.
    let left: Vec<_> = std::fs::read_dir(data.join("savepoints"))
        .map(|d| d.map(|e| e.unwrap().file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
    let o = common::weir(&["cancel", &second, "--coordinator", &rest]);
    assert!(o.status.success());
}

/// POST `body` to `url`: the status and the JSON answer.
async fn post(url: &str, body: serde_json::Value) -> (u16, serde_json::Value) {
    let r = reqwest::Client::new()
        .post(url)
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or_default())
}

/// Whether the CLI's error `err` gives the coordinator's answer as a 4xx
/// (`…(422, code)`).
fn answered_4xx(err: &str) -> bool {
    err.match_indices("(4").any(|(i, _)| {
        let rest = &err.as_bytes()[i + 1..];
        rest.len() > 4 && rest[..3].iter().all(u8::is_ascii_digit) && &rest[3..5] == b", "
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn savepoint_requests_that_cannot_be_served_are_refused_naming_why() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().canonicalize().unwrap();
    let (_local, rest) = common::local(&dir.join("data"));
    let input_path = dir.join("input.jsonl");
    std::fs::write(&input_path, "{\"k\":\"a\",\"i\":0}\n").unwrap();
    let output = dir.join("out");

    // Unknown jobs and triggers.
    let (s, e) = post(
        &format!("{rest}/v1/jobs/nope/savepoints"),
        serde_json::json!({}),
    )
    .await;
    assert_eq!((s, e["code"].as_str()), (404, Some("job_not_found")), "{e}");

    let rocks = bundle(&dir, "rocks", &input_path, &output, "rocksdb");
    let id = common::submit(&rest, &rocks);
    running(&rest, &id, 1).await;
    let jobs = format!("{rest}/v1/jobs/{id}");
    let r = reqwest::get(format!("{jobs}/savepoints/nope"))
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 404);
    // A relative directory, a bad trigger id, drain.
    let (s, e) = post(
        &format!("{jobs}/savepoints"),
        serde_json::json!({"directory": "relative/dir"}),
    )
    .await;
    assert_eq!(s, 422, "{e}");
    assert!(e["message"].as_str().unwrap().contains("absolute"), "{e}");
    let (s, e) = post(
        &format!("{jobs}/savepoints"),
        serde_json::json!({"trigger_id": "no spaces"}),
    )
    .await;
    assert_eq!(s, 400, "{e}");
    // Draining ends event time: with a stop only.
    let (s, e) = post(
        &format!("{jobs}/savepoints"),
        serde_json::json!({"drain": true}),
    )
    .await;
    assert_eq!(
        (s, e["code"].as_str()),
        (422, Some("drain_without_stop")),
        "{e}"
    );

    // A savepoint with a trigger id of the client's: a retry answers the
    // same trigger.
    let into = dir.join("sp");
    let body = serde_json::json!({"trigger_id": "mine-1", "directory": into});
    let (s, first) = post(&format!("{jobs}/savepoints"), body.clone()).await;
    assert_eq!(s, 202, "{first}");
    let (s, again) = post(&format!("{jobs}/savepoints"), body).await;
    assert_eq!(s, 202, "{again}");
    assert_eq!(again["trigger_id"], "mine-1");
    assert_eq!(again["triggered_at_ms"], first["triggered_at_ms"]);
    let started = Instant::now();
    let done = loop {
        let s: serde_json::Value = reqwest::get(format!("{jobs}/savepoints/mine-1"))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if s["status"] != "in_progress" {
            break s;
        }
        assert!(started.elapsed() < PATIENCE, "{s}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["location"], into.display().to_string());
    assert!(into.join("_metadata").is_file());
    // Its directory holds a savepoint now: another one there is refused.
    let (s, e) = post(
        &format!("{jobs}/savepoints"),
        serde_json::json!({"directory": into}),
    )
    .await;
    assert_eq!(
        (s, e["code"].as_str()),
        (409, Some("savepoint_exists")),
        "{e}"
    );

    // Starting from it: a path that is no savepoint, a renamed operator
    // (its state unclaimed), a parallelism above the max, another max
    // parallelism — each refused with a 4xx naming it.
    let refused = |bundle: &Path, savepoint: &Path, extra: &[&str]| {
        let mut args = vec![
            "submit",
            bundle.to_str().unwrap(),
            "--from-savepoint",
            savepoint.to_str().unwrap(),
            "--coordinator",
            &rest,
        ];
        args.extend_from_slice(extra);
        let o = common::weir(&args);
        assert!(!o.status.success());
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    // The job's bundle with `edit` made, writing to `out-<name>`.
    let variant = |name: &str, edit: &dyn Fn(String) -> String| {
        let toml = std::fs::read_to_string(rocks.join("weir.toml"))
            .unwrap()
            .replace(
                &output.display().to_string(),
                &dir.join(format!("out-{name}")).display().to_string(),
            );
        common::bundle(&dir, name, "wordcount", &edit(toml))
    };
    let err = refused(&rocks, &dir.join("input.jsonl"), &[]);
    assert!(
        err.contains("is not a savepoint") && err.contains("(422, savepoint_invalid)"),
        "{err}"
    );
    let renamed = variant("renamed", &|t| {
        t.replace("name = 'count'", "name = 'tally'")
    });
    let err = refused(&renamed, &into, &[]);
    assert!(
        err.contains("`count` (operator)")
            && err.contains("--allow-non-restored-state")
            && err.contains("(422, savepoint_incompatible)"),
        "{err}"
    );
    let err = refused(&rocks, &into, &["-p", "1000"]);
    assert!(
        err.contains("max-parallelism (128)") && answered_4xx(&err),
        "{err}"
    );
    let narrower = variant("narrower", &|t| {
        t.replace("[job]\n", "[job]\nmax-parallelism = 64\n")
    });
    let err = refused(&narrower, &into, &[]);
    assert!(
        err.contains("max parallelism of 128")
            && err.contains("`max-parallelism = 128`")
            && err.contains("(422, savepoint_incompatible)"),
        "{err}"
    );
    // The job still owns its output, and the savepoint did not stop it (it
    // may commit output after it): a job from it may not take the output
    // over.
    let err = refused(&rocks, &into, &[]);
    assert!(err.contains("did not end that job"), "{err}");
    // Allowed to drop the renamed operator's state, it starts.
    let o = common::weir(&[
        "submit",
        renamed.to_str().unwrap(),
        "--from-savepoint",
        into.to_str().unwrap(),
        "--allow-non-restored-state",
        "--coordinator",
        &rest,
    ]);
    let renamed_id = common::submitted(&o);

    // An upgrade whose job would not claim the running job's state is
    // refused before the job is stopped.
    let o = common::weir(&[
        "upgrade",
        &id,
        renamed.to_str().unwrap(),
        "--coordinator",
        &rest,
    ]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("`count` (operator)"), "{err}");
    assert_eq!(job(&rest, &id).await.state, JobState::Running);

    // Deleting the savepoint removes its directory.
    let r = reqwest::Client::new()
        .delete(format!("{jobs}/savepoints/mine-1"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert!(!into.exists());

    // A job that has ended takes no savepoint.
    for j in [&id, &renamed_id] {
        let o = common::weir(&["cancel", j, "--coordinator", &rest]);
        assert!(o.status.success());
    }
    let started = Instant::now();
    while !job(&rest, &id).await.state.is_terminal() {
        assert!(started.elapsed() < PATIENCE);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (s, e) = post(&format!("{jobs}/savepoints"), serde_json::json!({})).await;
    assert_eq!(
        (s, e["code"].as_str()),
        (409, Some("job_not_running")),
        "{e}"
    );
    let o = common::weir(&["savepoint", &id, "--coordinator", &rest]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("not running")
            || String::from_utf8_lossy(&o.stderr).contains("canceled"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );

    // Nor one that finished (its input read to the end).
    let finite = variant("finite", &|t| t.replace("follow = true", "follow = false"));
    let finished = common::submit(&rest, &finite);
    let started = Instant::now();
    while job(&rest, &finished).await.state != JobState::Finished {
        assert!(
            started.elapsed() < PATIENCE,
            "{:?}",
            job(&rest, &finished).await
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (s, e) = post(
        &format!("{rest}/v1/jobs/{finished}/savepoints"),
        serde_json::json!({}),
    )
    .await;
    assert_eq!(
        (s, e["code"].as_str()),
        (409, Some("job_not_running")),
        "{e}"
    );
    assert!(e["message"].as_str().unwrap().contains("finished"), "{e}");
    let o = common::weir(&["stop", &finished, "--coordinator", &rest]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("(409, job_not_running)"), "{err}");
}

/// Lines of words (JSON strings) appended to a file while the test runs;
/// how often each word came.
struct Words {
    counts: Arc<Mutex<BTreeMap<String, u64>>>,
    writing: Arc<AtomicBool>,
    writer: Option<std::thread::JoinHandle<()>>,
}

const VOCABULARY: [&str; 6] = ["ka", "lomi", "renshav", "tu", "pa", "dinel"];

impl Words {
    fn start(path: &Path) -> Words {
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .unwrap();
        let counts = Arc::new(Mutex::new(BTreeMap::new()));
        let writing = Arc::new(AtomicBool::new(true));
        let (c, w) = (counts.clone(), writing.clone());
        let writer = std::thread::spawn(move || {
            let mut n = 0usize;
            while w.load(Ordering::Relaxed) {
                let mut text = String::new();
                let mut counts = c.lock().unwrap();
                for _ in 0..10 {
                    let words: Vec<&str> = (0..3)
                        .map(|i| VOCABULARY[(n * 7 + i * 5 + n / 4) % VOCABULARY.len()])
                        .collect();
                    for w in &words {
                        *counts.entry((*w).to_owned()).or_default() += 1;
                    }
                    text.push_str(&format!("\"{}\"\n", words.join(" ")));
                    n += 1;
                }
                drop(counts);
                file.write_all(text.as_bytes()).unwrap();
                file.flush().unwrap();
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        Words {
            counts,
            writing,
            writer: Some(writer),
        }
    }

    fn stop(&mut self) -> BTreeMap<String, u64> {
        self.writing.store(false, Ordering::Relaxed);
        if let Some(w) = self.writer.take() {
            w.join().unwrap();
        }
        self.counts.lock().unwrap().clone()
    }
}

impl Drop for Words {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A word count's output line: `{"word", "count", …}`, or `[word, count]`
/// (the test guests' `count-words`).
fn word_and_count(line: &serde_json::Value) -> (String, u64) {
    match line {
        serde_json::Value::Array(pair) => (
            pair[0].as_str().unwrap().to_owned(),
            pair[1].as_u64().unwrap(),
        ),
        _ => (
            line["word"].as_str().unwrap().to_owned(),
            line["count"].as_u64().unwrap(),
        ),
    }
}

/// Wait until the committed output in `output` holds every word's counts
/// `1..n` exactly once (`want`: n per word), never a count twice
/// meanwhile; its lines.
async fn exact_word_counts(output: &Path, want: &BTreeMap<String, u64>) -> Vec<serde_json::Value> {
    let started = Instant::now();
    loop {
        let (lines, _) = if output.exists() {
            common::committed(output)
        } else {
            (Vec::new(), 0)
        };
        let mut counts = BTreeMap::<String, Vec<u64>>::new();
        for l in &lines {
            let (w, n) = word_and_count(l);
            counts.entry(w).or_default().push(n);
        }
        for (w, c) in counts.iter_mut() {
            c.sort_unstable();
            let mut d = c.clone();
            d.dedup();
            assert_eq!(d.len(), c.len(), "`{w}`: a count committed twice: {c:?}");
        }
        if counts.len() == want.len()
            && counts
                .iter()
                .all(|(w, c)| *c == (1..=want[w]).collect::<Vec<_>>())
        {
            return lines;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "the committed output catches up: {:?} of {want:?}",
            counts.iter().map(|(w, c)| (w, c.len())).collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A word count whose counting operator is `function` of the test guests.
fn tally_bundle(dir: &Path, name: &str, function: &str, input: &Path, output: &Path) -> PathBuf {
    common::bundle(
        dir,
        name,
        "test-guests",
        &format!(
            "[job]\nname = 'tally'\nparallelism = 2\n[component]\npath = 'c.wasm'\n\
             [[source]]\nname = 'lines'\ntype = 'json-lines-file'\npath = '{}'\nfollow = true\n\
             [[operator]]\nname = 'split'\nfunction = 'words'\n\
             [[operator]]\nname = 'tally'\nfunction = '{function}'\nkey-by = 'value'\n\
             [[sink]]\nname = 'counts'\ntype = 'json-lines-file'\npath = '{}'\n\
             [checkpoint]\ninterval-ms = 200\n",
            input.display(),
            output.display()
        ),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgraded_operator_goes_on_with_every_words_count() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().canonicalize().unwrap();
    let (_local, rest) = common::local(&dir.join("data"));
    let input = dir.join("lines.jsonl");
    let output = dir.join("out");
    let mut words = Words::start(&input);
    let v1 = tally_bundle(&dir, "v1", "tally-v1", &input, &output);
    let v2 = tally_bundle(&dir, "v2", "tally-v2", &input, &output);
    let first = common::submit(&rest, &v1);
    running(&rest, &first, 50).await;

    // v1 → savepoint → v2, in one command.
    let second = upgrade(&rest, &first, &v2).await;
    running(&rest, &second, 1).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let want = words.stop();

    // Every word's counts 1..n exactly once across both versions; v2's
    // records go on from v1's count, and count letters from the upgrade on.
    let lines = exact_word_counts(&output, &want).await;
    let mut last_v1 = BTreeMap::<String, u64>::new();
    let mut v2 = Vec::new();
    for l in &lines {
        let (w, c) = (
            l["word"].as_str().unwrap().to_owned(),
            l["count"].as_u64().unwrap(),
        );
        match l.get("letters") {
            None => {
                let m = last_v1.entry(w).or_default();
                *m = (*m).max(c);
            }
            Some(letters) => v2.push((w, c, letters.as_u64().unwrap())),
        }
    }
    assert!(
        !v2.is_empty() && !last_v1.is_empty(),
        "both versions counted"
    );
    for (w, c, letters) in v2 {
        let before = last_v1.get(&w).copied().unwrap_or(0);
        assert_eq!(
            letters,
            (c - before) * w.len() as u64,
            "`{w}` at {c}: v2 read v1's tally (count {before}) and added its field"
        );
    }
    let o = common::weir(&["cancel", &second, "--coordinator", &rest]);
    assert!(o.status.success());
}

/// `weir upgrade JOB BUNDLE`: the new job's id (printed last); the old job
/// is canceled.
async fn upgrade(rest: &str, id: &str, bundle: &Path) -> String {
    let o = common::weir(&[
        "upgrade",
        id,
        bundle.to_str().unwrap(),
        "--coordinator",
        rest,
    ]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    assert!(stderr.contains("no job processed for"), "{stderr}");
    let new = String::from_utf8_lossy(&o.stdout)
        .lines()
        .last()
        .unwrap()
        .trim()
        .to_owned();
    assert_ne!(new, id);
    assert_eq!(job(rest, id).await.state, JobState::Canceled);
    new
}

/// The tally's state turned into rows, then into rows of another type, by
/// two upgrades: `tally-v1` keeps MessagePack values, `tally-rows` declares
/// the same state as rows `{count: u64, letters: u64?}` (converted when it
/// is declared: `letters` null), `tally-rows-v4` as rows with a field more
/// (`longest: u32?`, null in what version 3 wrote) and a list state of
/// rows. Every word's counts 1..n exactly once across the three, the
/// letters counted from the first upgrade on; `weir state` shows the rows
/// as JSON; a type that cannot read the stored rows (`count` narrowed to
/// `u32`) is refused at submit, naming the field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_state_turned_into_rows_and_evolved_keeps_every_count() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().canonicalize().unwrap();
    let (_local, rest) = common::local(&dir.join("data"));
    let input = dir.join("lines.jsonl");
    let output = dir.join("out");
    let mut words = Words::start(&input);
    let bundle = |function: &str| tally_bundle(&dir, function, function, &input, &output);
    let first = common::submit(&rest, &bundle("tally-v1"));
    running(&rest, &first, 50).await;
    let second = upgrade(&rest, &first, &bundle("tally-rows")).await;
    running(&rest, &second, 1).await;
    let third = upgrade(&rest, &second, &bundle("tally-rows-v4")).await;
    running(&rest, &third, 1).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let want = words.stop();

    let lines = exact_word_counts(&output, &want).await;
    let mut last_v1 = BTreeMap::<String, u64>::new();
    for l in lines.iter().filter(|l| l.get("letters").is_none()) {
        let (w, c) = word_and_count(l);
        let m = last_v1.entry(w).or_default();
        *m = (*m).max(c);
    }
    let (mut v3, mut v4) = (0, 0);
    for l in lines.iter().filter(|l| l.get("letters").is_some()) {
        let (w, c) = word_and_count(l);
        let before = last_v1.get(&w).copied().unwrap_or(0);
        assert_eq!(
            l["letters"].as_u64().unwrap(),
            (c - before) * w.len() as u64,
            "`{w}` at {c}: the rows went on from v1's count {before}, letters null until then: {l}"
        );
        match l.get("longest") {
            None => v3 += 1,
            Some(longest) => {
                assert_eq!(longest.as_u64(), Some(w.len() as u64), "{l}");
                v4 += 1;
            }
        }
    }
    assert!(
        !last_v1.is_empty() && v3 > 0 && v4 > 0,
        "each version counted: v1 {}, v3 {v3}, v4 {v4}",
        last_v1.len()
    );

    // The savepoint's rows, read as JSON.
    let savepoint = stop(&rest, &third);
    let o = common::weir(&["state", &savepoint, "--operator", "tally"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut tallies = BTreeMap::new();
    for line in String::from_utf8_lossy(&o.stdout).lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let word = v["key"].as_str().unwrap().to_owned();
        match v["state"].as_str().unwrap() {
            "tally" => {
                let t = &v["value"];
                assert_eq!(t["longest"].as_u64(), Some(word.len() as u64), "{line}");
                tallies.insert(word, t["count"].as_u64().unwrap());
            }
            "lengths" => assert!(
                v["values"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .all(|n| n.as_u64() == Some(word.len() as u64)),
                "{line}"
            ),
            other => panic!("state `{other}`: {line}"),
        }
    }
    assert_eq!(tallies, want, "the savepoint holds every word's count");

    let o = common::weir(&[
        "submit",
        bundle("tally-rows-narrow").to_str().unwrap(),
        "--from-savepoint",
        &savepoint,
        "--coordinator",
        &rest,
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    for says in [
        "state_incompatible",
        "`tally`",
        "field `count` is u64",
        "u32",
    ] {
        assert!(err.contains(says), "{says:?} in {err}");
    }
}

/// The word count's job over `input` into `output`, its component at
/// `component` (the Rust and the Python word count have the same vertices
/// and keep the same state).
fn word_count_bundle(
    dir: &Path,
    name: &str,
    component: &Path,
    input: &Path,
    output: &Path,
) -> PathBuf {
    let bundle = dir.join(name);
    std::fs::create_dir_all(&bundle).unwrap();
    std::fs::write(
        bundle.join("weir.toml"),
        format!(
            "[job]\nname = 'wordcount'\nparallelism = 2\n[component]\npath = '{}'\n\
             [[source]]\nname = 'lines'\ntype = 'json-lines-file'\npath = '{}'\nfollow = true\n\
             [[operator]]\nname = 'split'\nfunction = 'split-words'\n\
             [[operator]]\nname = 'count'\nfunction = 'count'\nkey-by = 'value'\n\
             [[sink]]\nname = 'counts'\ntype = 'json-lines-file'\npath = '{}'\n\
             [checkpoint]\ninterval-ms = 200\n",
            component.display(),
            input.display(),
            output.display()
        ),
    )
    .unwrap();
    bundle
}

/// The Rust word count stopped with a savepoint and the Python one
/// started from it: the Python operator reads the Rust one's state (every
/// word's count goes on).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_replaced_by_one_in_another_language_keeps_its_keys_state() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().canonicalize().unwrap();
    // The Python word count, built from a copy of its project (other tests
    // build the example in place).
    let project = dir.join("python-wordcount");
    std::fs::create_dir_all(&project).unwrap();
    for f in ["weir.toml", "pyproject.toml", "wordcount.py"] {
        std::fs::copy(
            common::root().join("examples/python-wordcount").join(f),
            project.join(f),
        )
        .unwrap();
    }
    let o = common::weir(&["build", project.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let python = project.join(".weir/component.wasm");
    assert!(python.is_file());
    let rust = dir.join("rust.wasm");
    std::fs::copy(weir_tests::guest("wordcount"), &rust).unwrap();

    let (_local, rest) = common::local(&dir.join("data"));
    let input = dir.join("lines.jsonl");
    let output = dir.join("out");
    let mut words = Words::start(&input);
    let in_rust = word_count_bundle(&dir, "in-rust", &rust, &input, &output);
    let in_python = word_count_bundle(&dir, "in-python", &python, &input, &output);
    let first = common::submit(&rest, &in_rust);
    running(&rest, &first, 50).await;
    let savepoint = stop(&rest, &first);
    let second = resume(&rest, &in_python, 1, &savepoint);
    running(&rest, &second, 1).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let want = words.stop();
    let lines = exact_word_counts(&output, &want).await;
    assert!(
        lines.len() as u64 > want.len() as u64,
        "{} lines",
        lines.len()
    );

    // The savepoint's state, read back: each word's count as the Rust job
    // left it (its committed output has that count for the word).
    let o = common::weir(&["state", &savepoint, "--operator", "count"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let entries: Vec<serde_json::Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(!entries.is_empty());
    for e in &entries {
        assert_eq!(
            (e["state"].as_str(), e["kind"].as_str()),
            (Some("count"), Some("value")),
            "{e}"
        );
        let word = e["key"].as_str().unwrap();
        assert!(VOCABULARY.contains(&word), "{e}");
        let n = e["value"].as_u64().unwrap();
        assert!(
            lines.iter().any(|l| l["word"] == word && l["count"] == n),
            "{e}: no committed count {n} for `{word}`"
        );
    }
    let o = common::weir(&["state", &savepoint, "--state", "nope"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("no entry of a state `nope`"));
    let o = common::weir(&["state", dir.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("is not a savepoint"));
    let o = common::weir(&["cancel", &second, "--coordinator", &rest]);
    assert!(o.status.success());
}

/// The windowed count's job: JSON lines `{"key", "ts"}` from `input`
/// (followed or not), tumbling windows of a second per key, committed to
/// `output`.
fn windows_bundle(dir: &Path, name: &str, input: &Path, output: &Path, follow: bool) -> PathBuf {
    windows_of(dir, name, input, output, follow, 1000, COUNT)
}

/// The Wasm window aggregate `count`, as [`windows_bundle`] runs it: (the
/// guest, the operator's function line).
const COUNT: (&str, &str) = ("windowed-counts", "function = 'count'");

/// [`windows_bundle`] with tumbling windows of `size_ms`, computed by
/// `function` (the guest, and its operator's function line).
fn windows_of(
    dir: &Path,
    name: &str,
    input: &Path,
    output: &Path,
    follow: bool,
    size_ms: i64,
    (guest, function): (&str, &str),
) -> PathBuf {
    let checkpoint = if follow || name != "straight" {
        "[checkpoint]\ninterval-ms = 200\n"
    } else {
        ""
    };
    common::bundle(
        dir,
        name,
        guest,
        &format!(
            "[job]\nname = 'windows'\nparallelism = 2\n[component]\npath = 'c.wasm'\n\
             [[source]]\nname = 'events'\ntype = 'json-lines-file'\npath = '{}'\nfollow = {follow}\n\
             timestamp = '/ts'\nwatermark = 'bounded'\nmax-delay-ms = 0\nwatermark-interval-ms = 0\n\
             [[operator]]\nname = 'count'\n{function}\nkey-by = '/key'\n\
             window = {{ type = 'tumbling', size-ms = {size_ms} }}\n\
             [[sink]]\nname = 'counts'\ntype = 'json-lines-file'\npath = '{}'\n{checkpoint}",
            input.display(),
            output.display()
        ),
    )
}

/// Appends `n` events from line `from` on: key `k<i % 5>`, 100 ms apart.
fn events(path: &Path, from: u64, n: u64) {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    let mut text = String::new();
    for i in from..from + n {
        text.push_str(&format!("{{\"key\":\"k{}\",\"ts\":{}}}\n", i % 5, i * 100));
    }
    f.write_all(text.as_bytes()).unwrap();
}

/// Golden output three ways: a windowed count run straight through at
/// parallelism 1, and the same input read by a job at parallelism 2
/// stopped with a savepoint mid-input, restored at 3 and stopped again,
/// restored at 1 to the end: the same windows with the same counts (open
/// windows and their timers go with their keys).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn windows_stopped_and_restored_at_other_parallelisms_fire_as_a_straight_run() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().canonicalize().unwrap();
    let (_local, rest) = common::local(&dir.join("data"));
    let input = dir.join("events.jsonl");
    let output = dir.join("out");
    let mut written = 0;
    events(&input, written, 100);
    written += 100;

    let followed = windows_bundle(&dir, "followed", &input, &output, true);
    let first = common::submit(&rest, &followed);
    running(&rest, &first, 100).await;
    events(&input, written, 300);
    written += 300;
    running(&rest, &first, 250).await;
    let sp1 = stop(&rest, &first);
    // Other windows cannot take over the savepoint's open ones (their
    // state and timers are for windows of a second): refused, naming both.
    let wider = windows_of(&dir, "wider", &input, &output, true, 2000, COUNT);
    let (started, err) = submit_from(&rest, &wider, &sp1);
    assert!(
        !started
            && err.contains("(422, savepoint_incompatible)")
            && err.contains("`count` kept windows (tumbling, size-ms = 1000")
            && err.contains("size-ms = 2000"),
        "{err}"
    );
    // Nor can the same windows with another kind of window function: the
    // open windows hold the Wasm aggregate's accumulators, which are
    // neither a built-in's nor the records a process-window function sees.
    for (name, function, keeps) in [
        (
            "built-in",
            ("windowed-counts", "builtin = 'count'"),
            "keeps the accumulators of the built-in `count`",
        ),
        (
            "process",
            ("sessions", "function = 'sessionize'"),
            "keeps the records of a process-window function",
        ),
    ] {
        let other = windows_of(&dir, name, &input, &output, true, 1000, function);
        let (started, err) = submit_from(&rest, &other, &sp1);
        assert!(
            !started
                && err.contains("(422, savepoint_incompatible)")
                && err.contains("`count` kept an aggregate function's accumulators")
                && err.contains(keeps),
            "{err}"
        );
    }
    events(&input, written, 300);
    written += 300;
    let second = resume(&rest, &followed, 3, &sp1);
    running(&rest, &second, 1).await;
    events(&input, written, 300);
    written += 300;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let sp2 = stop(&rest, &second);
    events(&input, written, 300);
    written += 300;
    // To the end of the file: the last windows fire when the input ends.
    let last = windows_bundle(&dir, "to-the-end", &input, &output, false);
    let third = resume(&rest, &last, 1, &sp2);
    let done = common::job_until(&rest, &third, "the last job ends", |j| {
        j.state.is_terminal()
    })
    .await;
    assert_eq!(done.state, JobState::Finished, "{done:#?}");

    // Straight through, at parallelism 1.
    let straight_out = dir.join("straight.jsonl");
    let straight = windows_bundle(&dir, "straight", &input, &straight_out, false);
    let o = common::weir(&["run", straight.to_str().unwrap(), "-p", "1"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let sorted = |lines: Vec<serde_json::Value>| {
        let mut l: Vec<String> = lines.iter().map(|v| v.to_string()).collect();
        l.sort();
        l
    };
    let want = sorted(common::json_lines(&straight_out));
    // 1,300 events, 100 ms apart, 5 keys: 130 windows of a second, each
    // with two events of each key.
    assert_eq!(want.len(), (written / 10 * 5) as usize, "{want:?}");
    let got = sorted(common::committed(&output).0);
    assert_eq!(got, want);
}

/// A stop with `--drain` sends the maximal watermark before its savepoint:
/// the window still open fires into the output the savepoint commits. A
/// stop without it leaves that window in the savepoint.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drained_stop_fires_the_open_windows_into_its_output() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().canonicalize().unwrap();
    let (_local, rest) = common::local(&dir.join("data"));
    let input = dir.join("events.jsonl");
    // 105 events, 100 ms apart: the last five in a window that has not
    // ended when the input does.
    events(&input, 0, 105);
    for drain in [false, true] {
        let output = dir.join(format!("out-{drain}"));
        let bundle = windows_bundle(&dir, &format!("drain-{drain}"), &input, &output, true);
        let id = common::submit(&rest, &bundle);
        running(&rest, &id, 105).await;
        let mut args = vec!["stop", id.as_str(), "--coordinator", rest.as_str()];
        if drain {
            args.push("--drain");
        }
        let o = common::weir(&args);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let counted: u64 = common::committed(&output)
            .0
            .iter()
            .map(|l| l["count"].as_u64().unwrap())
            .sum();
        assert_eq!(counted, if drain { 105 } else { 100 }, "drain: {drain}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_jobs_latest_checkpoint_state_reads_as_json_lines_on_either_backend() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().canonicalize().unwrap();
    let (_local, rest) = common::local(&dir.join("data"));
    let input_path = dir.join("input.jsonl");
    let mut want: BTreeMap<String, u64> = BTreeMap::new();
    let mut text = String::new();
    for i in 0..600u64 {
        let key = format!("k{}", (i * 7919 + i / 3) % KEYS);
        text.push_str(&format!("{{\"k\":\"{key}\",\"i\":{i}}}\n"));
        *want.entry(key).or_default() += 1;
    }
    std::fs::write(&input_path, text).unwrap();
    let client = reqwest::Client::new();
    let get = |url: String| {
        let client = client.clone();
        async move {
            let r = client.get(url).send().await.unwrap();
            let status = r.status().as_u16();
            let kind = r
                .headers()
                .get("content-type")
                .map(|v| v.to_str().unwrap().to_owned());
            (status, kind, r.text().await.unwrap())
        }
    };
    let (s, _, body) = get(format!("{rest}/v1/jobs/nope/checkpoints/latest/state")).await;
    assert_eq!(s, 404, "{body}");
    for backend in ["memory", "rocksdb"] {
        let output = dir.join(format!("out-{backend}"));
        let b = bundle(&dir, backend, &input_path, &output, backend);
        let id = common::submit(&rest, &b);
        running(&rest, &id, 600).await;
        let state = format!("{rest}/v1/jobs/{id}/checkpoints/latest/state");
        // Checkpoints go on while the job waits for more input: one soon
        // holds every line's count.
        let started = Instant::now();
        loop {
            let (s, kind, body) = get(state.clone()).await;
            assert_eq!(s, 200, "{backend}: {body}");
            assert_eq!(kind.as_deref(), Some("application/x-ndjson"));
            let mut got = BTreeMap::new();
            for line in body.lines() {
                let v: serde_json::Value = serde_json::from_str(line).unwrap();
                assert_eq!(v["operator"], "count", "{line}");
                let key = v["key"].as_str().unwrap().to_owned();
                let n = v["value"].as_u64().unwrap_or_else(|| panic!("{line}"));
                assert!(n <= want[&key], "{backend}: {line}: more than its lines");
                assert!(
                    got.insert(key, n).is_none(),
                    "{backend}: a key twice: {body}"
                );
            }
            if got == want {
                break;
            }
            assert!(
                started.elapsed() < PATIENCE,
                "{backend}: the latest checkpoint's counts reach the input's: {got:?}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        // One operator's, one state's; unknown ones are named.
        let (s, _, body) = get(format!("{state}?operator=count&state=weir.builtin.count")).await;
        assert_eq!((s, body.lines().count()), (200, want.len()), "{body}");
        let (s, _, body) = get(format!("{state}?operator=nope")).await;
        assert_eq!(s, 404, "{body}");
        assert!(body.contains("nope") && body.contains("count"), "{body}");
        let (s, _, body) = get(format!("{state}?state=nope")).await;
        assert_eq!(s, 404, "{body}");
        assert!(body.contains("nope"), "{body}");
        let o = common::weir(&["cancel", &id, "--coordinator", &rest]);
        assert!(o.status.success());
        // Ended, its newest retained checkpoint still reads (from the
        // checkpoint storage), with every count.
        common::job_until(&rest, &id, "the job is canceled", |j| {
            j.state == JobState::Canceled
        })
        .await;
        let (s, _, body) = get(state.clone()).await;
        assert_eq!(s, 200, "{backend}: {body}");
        let got: BTreeMap<String, u64> = body
            .lines()
            .map(|line| {
                let v: serde_json::Value = serde_json::from_str(line).unwrap();
                (
                    v["key"].as_str().unwrap().to_owned(),
                    v["value"].as_u64().unwrap(),
                )
            })
            .collect();
        assert_eq!(got, want, "{backend}: the ended job's state");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_state_declared_another_way_is_refused_at_submit_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().canonicalize().unwrap();
    let (_local, rest) = common::local(&dir.join("data"));
    let input = dir.join("lines.jsonl");
    let mut words = Words::start(&input);
    let output = dir.join("out");
    let v1 = tally_bundle(&dir, "v1", "tally-v1", &input, &output);
    let first = common::submit(&rest, &v1);
    running(&rest, &first, 50).await;
    let savepoint = stop(&rest, &first);
    words.stop();
    for (function, says) in [
        ("tally-as-map", ["`tally`", "Value", "Map"]),
        ("tally-with-ttl", ["`tally`", "without", "time-to-live"]),
    ] {
        let bundle = tally_bundle(&dir, function, function, &input, &output);
        let (started, err) = submit_from(&rest, &bundle, &savepoint);
        assert!(!started, "{function}: {err}");
        assert!(
            err.contains("state_incompatible") || err.contains("422"),
            "{err}"
        );
        assert!(err.contains("`tally`") && err.contains("operator"), "{err}");
        for s in says {
            assert!(err.contains(s), "{function}: {s:?} in {err}");
        }
    }
    // The version that declares it as it was starts from it.
    let again = resume(&rest, &v1, 2, &savepoint);
    running(&rest, &again, 1).await;
    let o = common::weir(&["cancel", &again, "--coordinator", &rest]);
    assert!(o.status.success());
}

/// On a cluster — a coordinator and three worker processes — the word
/// count stopped with a savepoint at parallelism 2 goes on at 3, then
/// `weir upgrade` swaps its component under it for another one (the test
/// guests', whose `count-words` keeps the same state): every word's counts
/// 1..n exactly once across the three jobs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_cluster_the_word_count_resumes_at_three_and_takes_another_component() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().canonicalize().unwrap();
    let allow = dir.to_str().unwrap();
    let (_coordinator, rest, rpc) =
        common::coordinator(&dir.join("coordinator"), &["--allow-dir", allow]);
    let _workers: Vec<common::Proc> = (0..3)
        .map(|i| common::worker(&rpc, &dir.join(format!("w{i}")), &dir))
        .collect();
    let started = Instant::now();
    while common::worker_count(&rest).await < 3 {
        assert!(started.elapsed() < PATIENCE, "three workers register");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let input = dir.join("lines.jsonl");
    let output = dir.join("out");
    let mut words = Words::start(&input);
    let rust = dir.join("wordcount.wasm");
    std::fs::copy(weir_tests::guest("wordcount"), &rust).unwrap();
    let v1 = word_count_bundle(&dir, "v1", &rust, &input, &output);
    let first = common::submit(&rest, &v1);
    running(&rest, &first, 50).await;
    // A savepoint into a directory of the user's, its location printed
    // last; the job goes on.
    let named = dir.join("savepoints/mine");
    let o = common::weir(&[
        "savepoint",
        &first,
        named.to_str().unwrap(),
        "--coordinator",
        &rest,
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let printed = String::from_utf8_lossy(&o.stdout);
    assert_eq!(printed.lines().last().map(str::trim), named.to_str());
    assert!(named.join("_metadata").is_file());
    assert_eq!(job(&rest, &first).await.state, JobState::Running);
    let savepoint = stop(&rest, &first);
    // A savepoint is self-contained: moved elsewhere, it restores.
    let moved = dir.join("moved-savepoint");
    std::fs::rename(&savepoint, &moved).unwrap();
    let second = resume(&rest, &v1, 3, moved.to_str().unwrap());
    running(&rest, &second, 1).await;
    let placed: BTreeSet<String> = job(&rest, &second)
        .await
        .subtasks
        .iter()
        .filter_map(|s| s.worker.clone())
        .collect();
    assert!(
        placed.len() > 1,
        "the job spans worker processes: {placed:?}"
    );
    let count_parallelism = |j: &JobInfo| {
        j.graph
            .vertices
            .iter()
            .find(|v| v.name == "count")
            .map(|v| v.parallelism)
    };
    assert_eq!(count_parallelism(&job(&rest, &second).await), Some(3));

    // Version 2: the test guests' component, its `words` and `count-words`
    // under the same operator names (its output `[word, n]`).
    let guests = dir.join("guests.wasm");
    std::fs::copy(weir_tests::guest("test-guests"), &guests).unwrap();
    let v2 = word_count_bundle(&dir, "v2", &guests, &input, &output);
    let toml = std::fs::read_to_string(v2.join("weir.toml"))
        .unwrap()
        .replace("function = 'split-words'", "function = 'words'")
        .replace("function = 'count'", "function = 'count-words'");
    std::fs::write(v2.join("weir.toml"), toml).unwrap();
    let o = common::weir(&[
        "upgrade",
        &second,
        v2.to_str().unwrap(),
        "--coordinator",
        &rest,
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no job processed for"));
    let third = String::from_utf8_lossy(&o.stdout)
        .lines()
        .last()
        .unwrap()
        .trim()
        .to_owned();
    running(&rest, &third, 1).await;
    assert_eq!(count_parallelism(&job(&rest, &third).await), Some(3));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let want = words.stop();
    let lines = exact_word_counts(&output, &want).await;
    let (objects, pairs) =
        lines.iter().fold(
            (0, 0),
            |(o, p), l| {
                if l.is_array() { (o, p + 1) } else { (o + 1, p) }
            },
        );
    assert!(
        objects > 0 && pairs > 0,
        "both components counted: {objects} lines of v1, {pairs} of v2"
    );
    let o = common::weir(&["cancel", &third, "--coordinator", &rest]);
    assert!(o.status.success());
}
