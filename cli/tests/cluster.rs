//! A coordinator and worker processes on loopback: workers register their
//! slots, a killed worker is removed within the heartbeat timeout, and the
//! coordinator keeps serving.

mod common;

use std::time::{Duration, Instant};

use common::{
    NetNs, checkpoints_until, committed, exactly_once, free_port, job_info, job_until, start,
    submit, urls, weir,
};

use weir_coordinator::slot_manager::ClusterInfo;

async fn cluster(rest: &str) -> ClusterInfo {
    reqwest::get(format!("{rest}/v1/cluster"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

async fn wait_until(rest: &str, what: &str, ok: impl Fn(&ClusterInfo) -> bool) -> ClusterInfo {
    let started = Instant::now();
    loop {
        let c = cluster(rest).await;
        if ok(&c) {
            return c;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "{what}: {c:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A coordinator and two workers (2 slots each), registered.
struct Cluster {
    coordinator: common::Proc,
    /// The first lines the workers printed.
    worker_lines: Vec<String>,
    w1: common::Proc,
    w2: common::Proc,
    rest: String,
    /// The coordinator's address for workers.
    rpc: String,
}

/// Start another worker process (2 slots) for the coordinator at `rpc`.
fn start_worker(dir: &std::path::Path, name: &str, rpc: &str) -> common::Proc {
    common::worker(rpc, &dir.join(name), dir)
}

async fn start_cluster(dir: &std::path::Path, heartbeat_timeout_ms: &str) -> Cluster {
    let data = dir.join("coordinator");
    let (coordinator, line) = start(&[
        "coordinator",
        "--listen",
        "127.0.0.1:0",
        "--rpc-listen",
        "127.0.0.1:0",
        "--heartbeat-interval-ms",
        "100",
        "--heartbeat-timeout-ms",
        heartbeat_timeout_ms,
        "--data-dir",
        data.to_str().unwrap(),
        "--allow-dir",
        dir.to_str().unwrap(),
    ]);
    let urls = urls(&line);
    let (rest, rpc) = (urls[0].clone(), urls[1].clone());
    let worker = |name: &str| {
        let d = dir.join(name);
        start(&[
            "worker",
            "--coordinator",
            &rpc,
            "--slots",
            "2",
            "--data-dir",
            d.to_str().unwrap(),
            "--allow-dir",
            dir.to_str().unwrap(),
        ])
    };
    let ((w1, l1), (w2, l2)) = (worker("w1"), worker("w2"));
    let c = wait_until(&rest, "two workers register", |c| c.workers.len() == 2).await;
    assert_eq!((c.slots_total, c.slots_free), (4, 4));
    Cluster {
        coordinator,
        worker_lines: vec![l1, l2],
        w1,
        w2,
        rest,
        rpc,
    }
}

/// A coordinator (heartbeat timeout 1.5 s) and three registered workers:
/// the coordinator's process, the workers', its REST address and its
/// address for workers.
async fn start_three_workers(
    dir: &std::path::Path,
) -> (common::Proc, Vec<common::Proc>, String, String) {
    let Cluster {
        coordinator,
        w1,
        w2,
        rest,
        rpc,
        ..
    } = start_cluster(dir, "1500").await;
    let w3 = start_worker(dir, "w3", &rpc);
    wait_until(&rest, "three workers register", |c| c.workers.len() == 3).await;
    (coordinator, vec![w1, w2, w3], rest, rpc)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_register_and_a_killed_one_is_removed() {
    let dir = tempfile::tempdir().unwrap();
    let Cluster {
        coordinator: _coordinator,
        w1: _w1,
        mut w2,
        rest,
        ..
    } = start_cluster(dir.path(), "1000").await;
    let c = cluster(&rest).await;
    assert!(
        c.workers
            .iter()
            .all(|w| w.slots == 2 && w.last_heartbeat_ms_ago < 1000)
    );

    // SIGKILL one worker: it is gone within the timeout (plus a tick).
    let killed = w2.0.id();
    w2.0.kill().unwrap();
    w2.0.wait().unwrap();
    let gone_at = Instant::now();
    let c = wait_until(&rest, "the killed worker is removed", |c| {
        c.workers.len() == 1
    })
    .await;
    assert!(
        gone_at.elapsed() < Duration::from_secs(5),
        "removed after {:?}",
        gone_at.elapsed()
    );
    assert!(
        !c.workers[0].id.ends_with(&format!("-{killed}")),
        "the survivor is the other worker"
    );
    assert_eq!(c.slots_total, 2);

    // The coordinator keeps serving.
    let jobs = reqwest::get(format!("{rest}/v1/jobs")).await.unwrap();
    assert!(jobs.status().is_success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_word_count_runs_over_two_worker_processes() {
    let dir = tempfile::tempdir().unwrap();
    let Cluster {
        coordinator: _coordinator,
        w1: _w1,
        mut w2,
        rest,
        ..
    } = start_cluster(dir.path(), "1500").await;

    let input = dir.path().join("in.txt");
    let mut text = String::new();
    for i in 0..5000 {
        text.push_str(&format!("Alpha w{} w{}, beta!\n", i % 31, i % 7));
    }
    std::fs::write(&input, &text).unwrap();
    let output = dir.path().join("out.jsonl");
    let o = weir(&[
        "submit",
        "examples/wordcount",
        "--parallelism",
        "4",
        "--wait",
        "--coordinator",
        &rest,
        "--param",
        &format!("input={}", input.display()),
        "--param",
        &format!("output={}", output.display()),
    ]);
    // Both workers ran subtasks, one slot per subtask index, all finished;
    // the slots are free again.
    let id = common::submitted(&o);
    let job: weir_coordinator::jobs::JobInfo = reqwest::get(format!("{rest}/v1/jobs/{id}"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(job.subtasks.len(), 16, "4 vertices × 4");
    assert!(
        job.subtasks
            .iter()
            .all(|t| t.state == weir_coordinator::jobs::TaskState::Finished),
        "{:?}",
        job.subtasks
    );
    assert!(job.subtasks.iter().all(|t| t.slot == Some(t.subtask)));
    // Every subtask's counts, summed, are its vertex's.
    for v in &job.vertices {
        let of_v = job.subtasks.iter().filter(|t| t.vertex == v.name);
        let (i, o) = of_v.fold((0, 0), |(i, o), t| (i + t.records_in, o + t.records_out));
        assert_eq!((i, o), (v.records_in, v.records_out), "{job:?}");
        assert!(v.records_out > 0 || v.name == "counts", "{job:?}");
    }
    assert!(
        job.subtasks
            .iter()
            .filter(|t| t.vertex == "count")
            .all(|t| t.records_in > 0),
        "{job:?}"
    );
    let workers: std::collections::BTreeSet<_> = job
        .subtasks
        .iter()
        .map(|t| t.worker.clone().unwrap())
        .collect();
    assert_eq!(workers.len(), 2, "{workers:?}");
    let c = cluster(&rest).await;
    assert_eq!(c.slots_free, 4, "{c:?}");

    let mut expected = std::collections::BTreeMap::<String, u64>::new();
    for w in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        *expected.entry(w.to_lowercase()).or_default() += 1;
    }
    let mut got = std::collections::BTreeMap::<String, u64>::new();
    for l in std::fs::read_to_string(&output).unwrap().lines() {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        let e = got
            .entry(v["word"].as_str().unwrap().to_owned())
            .or_default();
        *e = (*e).max(v["count"].as_u64().unwrap());
    }
    assert_eq!(got, expected);

    // Event-time windows over both workers: watermarks cross the TCP
    // channels in-band; every window fires once, with its exact count.
    let events = dir.path().join("events.jsonl");
    let mut lines = String::new();
    let mut exact = std::collections::BTreeMap::<(String, i64), u64>::new();
    for i in 0..20_000i64 {
        let (key, ts) = (format!("k{}", i % 17), i * 3 - (i * 7919) % 200);
        lines.push_str(&format!("{{\"key\":\"{key}\",\"ts\":{ts}}}\n"));
        *exact.entry((key, ts - ts.rem_euclid(1000))).or_default() += 1;
    }
    std::fs::write(&events, lines).unwrap();
    let counts = dir.path().join("window-counts.jsonl");
    let o = weir(&[
        "submit",
        "examples/windowed-counts",
        "--parallelism",
        "4",
        "--wait",
        "--coordinator",
        &rest,
        "--param",
        &format!("input={}", events.display()),
        "--param",
        &format!("output={}", counts.display()),
        "--param",
        "window=1000",
        "--param",
        "max_delay=300",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut got = std::collections::BTreeMap::<(String, i64), u64>::new();
    for l in std::fs::read_to_string(&counts).unwrap().lines() {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        let window = (
            v["key"].as_str().unwrap().to_owned(),
            v["window_start"].as_i64().unwrap(),
        );
        assert!(
            got.insert(window, v["count"].as_u64().unwrap()).is_none(),
            "fired twice: {l}"
        );
    }
    assert_eq!(got, exact);

    // More parallelism than free slots: refused.
    let o = weir(&[
        "submit",
        "examples/wordcount",
        "--parallelism",
        "5",
        "--coordinator",
        &rest,
        "--param",
        &format!("input={}", input.display()),
        "--param",
        "output=/dev/null",
    ]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("needs 5 slots"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );

    // An unbounded job fails, naming the worker, when a worker is killed.
    let bundle = common::endless_bundle(dir.path());
    let o = weir(&[
        "submit",
        bundle.to_str().unwrap(),
        "--parallelism",
        "4",
        "--coordinator",
        &rest,
    ]);
    let job = common::submitted(&o);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let killed = w2.0.id();
    w2.0.kill().unwrap();
    w2.0.wait().unwrap();
    let started = Instant::now();
    loop {
        let status =
            String::from_utf8_lossy(&weir(&["status", &job, "--coordinator", &rest]).stdout)
                .into_owned();
        if status.contains("is failed") {
            assert!(status.contains(&format!("-{killed}` was lost")), "{status}");
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "{status}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A job whose slow stage takes 0.5 ms per record (2,000 records/s per
/// subtask) behind a source that could make millions per second, with data
/// over TCP between the two worker processes: credit-based flow control
/// holds the source to the slow stage's pace, and no process's memory grows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backpressure_across_worker_processes_bounds_every_process_memory() {
    let dir = tempfile::tempdir().unwrap();
    let Cluster {
        coordinator,
        worker_lines,
        w1,
        w2,
        rest,
        ..
    } = start_cluster(dir.path(), "5000").await;
    let bundle = common::bundle(
        dir.path(),
        "slow",
        "test-guests",
        "[job]\nname = 'slow'\n[component]\npath = 'c.wasm'\n\
         [[source]]\nname = 'gen'\ntype = 'generator'\nparallelism = 2\n\
         [[operator]]\nname = 'slow'\nfunction = 'slow'\nparallelism = 4\n\
         [[sink]]\nname = 'out'\ntype = 'json-lines-file'\npath = '/dev/null'\n",
    );
    let id = submit(&rest, &bundle);

    let pids = [coordinator.0.id(), w1.0.id(), w2.0.id()];
    // (RSS KiB of coordinator, worker 1, worker 2; source out; slow in)
    let mut samples: Vec<([u64; 3], u64, u64)> = Vec::new();
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let job: weir_coordinator::jobs::JobInfo = reqwest::get(format!("{rest}/v1/jobs/{id}"))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(
            job.state,
            weir_coordinator::jobs::JobState::Running,
            "{job:?}"
        );
        let vertex = |name: &str| job.vertices.iter().find(|v| v.name == name).unwrap();
        samples.push((
            pids.map(common::rss_kib),
            vertex("gen").records_out,
            vertex("slow").records_in,
        ));
    }
    // The metrics tell it: the source waits for room most of its time, the
    // slow stage works; each subtask's times add up to about a second.
    let m: serde_json::Value = reqwest::get(format!("{rest}/v1/jobs/{id}/metrics"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let vertex = |name: &str| {
        m["vertices"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == name)
            .unwrap()
            .clone()
    };
    let (source, slow) = (vertex("gen"), vertex("slow"));
    assert!(source["backpressure"].as_f64().unwrap() > 0.5, "{source}");
    assert!(slow["backpressure"].as_f64().unwrap() < 0.2, "{slow}");
    for s in slow["subtasks"].as_array().unwrap() {
        let sum = ["busy_ms_per_s", "idle_ms_per_s", "backpressured_ms_per_s"]
            .iter()
            .map(|k| s[*k].as_f64().unwrap())
            .sum::<f64>();
        assert!((sum - 1000.0).abs() < 1.0, "{s}");
        assert!(s["busy_ms_per_s"].as_f64().unwrap() > 300.0, "{s}");
        assert!(s["memory_bytes"].as_u64().unwrap() > 0, "{s}");
    }
    assert!(m["history"].as_array().unwrap().len() >= 3, "{m}");
    // Prometheus text, on the coordinator and on each worker.
    let text = reqwest::get(format!("{rest}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        text.contains(&format!(
            "weir_records_in_total{{job=\"{id}\",job_name=\"slow\",subtask=\"0\",vertex=\"slow\"}}"
        )),
        "{text}"
    );
    assert!(text.contains("weir_slots 4"), "{text}");
    for line in &worker_lines {
        let url = common::urls(line)
            .into_iter()
            .find(|u| u.ends_with("/metrics"))
            .unwrap_or_else(|| panic!("no metrics URL in {line}"));
        let text = reqwest::get(url).await.unwrap().text().await.unwrap();
        assert!(text.contains("weir_worker_slots 2"), "{text}");
        assert!(
            text.contains(&format!("weir_busy_ms_per_second{{job=\"{id}\"")),
            "{text}"
        );
    }

    let o = weir(&["cancel", &id, "--coordinator", &rest]);
    assert!(o.status.success());
    eprintln!("(RSS KiB [coordinator, w1, w2], source out, slow in) every 250 ms: {samples:?}");

    // Counts come with heartbeats (100 ms); look at the second half.
    let half = samples.len() / 2;
    let (_, source_mid, slow_mid) = samples[half];
    let (last_rss, source_out, slow_in) = *samples.last().unwrap();
    assert!(slow_in > slow_mid, "the slow stage progresses: {samples:?}");
    // Unchecked, two generators make millions of records per second; held
    // back, the source makes what the slow stage takes (4 × 2,000/s), plus
    // what channels, credits and output buffers hold.
    assert!(source_out < 1_000_000, "{samples:?}");
    let in_flight = source_out.saturating_sub(slow_in);
    assert!(
        in_flight < 300_000,
        "{in_flight} records in flight: {samples:?}"
    );
    assert!(
        source_out - source_mid < 2 * (slow_in - slow_mid) + 100_000,
        "the source's rate follows the slow stage's: {samples:?}"
    );
    // Memory: flat once the channels are full, in every process.
    for (p, name) in ["coordinator", "worker 1", "worker 2"].iter().enumerate() {
        let early = samples[..half].iter().map(|s| s.0[p]).max().unwrap();
        assert!(
            last_rss[p] < early + 50 * 1024,
            "{name}'s RSS grew from {early} KiB to {} KiB: {samples:?}",
            last_rss[p]
        );
    }
}

/// A job with `[checkpoint] interval-ms = 200` on RocksDB, over two worker
/// processes: checkpoints complete while it runs (every subtask
/// acknowledges), later ones upload less than the state they refer to
/// (incremental), only the retained checkpoints' files stay in the storage,
/// and the counts are exact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checkpoints_complete_incrementally_and_only_retained_files_stay() {
    use weir_coordinator::checkpoint::CheckpointStats;
    use weir_coordinator::checkpoint::stats::CheckpointStatus;
    use weir_model::checkpoint::CheckpointMetadata;

    let dir = tempfile::tempdir().unwrap();
    let Cluster {
        coordinator: _coordinator,
        w1: _w1,
        w2: _w2,
        rest,
        ..
    } = start_cluster(dir.path(), "5000").await;
    let output = dir.path().join("out.jsonl");
    let bundle = common::bundle(
        dir.path(),
        "checkpointed",
        "wordcount",
        &format!(
            "[job]\nname = 'checkpointed'\nparallelism = 2\n[component]\npath = 'c.wasm'\n\
             [[source]]\nname = 'lines'\ntype = 'generator'\npattern = 'words'\ncount = '9000'\nrate = '1500'\n\
             [[operator]]\nname = 'split'\nfunction = 'split-words'\n\
             [[operator]]\nname = 'count'\nfunction = 'count'\nkey-by = 'value'\n\
             [[sink]]\nname = 'counts'\ntype = 'json-lines-file'\npath = '{}'\n\
             [state]\nbackend = 'rocksdb'\n\
             [checkpoint]\ninterval-ms = 200\nretained = 2\n",
            output.display()
        ),
    );
    let id = submit(&rest, &bundle);
    let checkpoints = || async {
        reqwest::get(format!("{rest}/v1/jobs/{id}/checkpoints"))
            .await
            .unwrap()
            .json::<CheckpointStats>()
            .await
            .unwrap()
    };
    let started = Instant::now();
    loop {
        let c = checkpoints().await;
        if c.counts.completed >= 4 {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "{c:#?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The job ends by itself (its input is bounded).
    let started = Instant::now();
    let job = loop {
        let job: weir_coordinator::jobs::JobInfo = reqwest::get(format!("{rest}/v1/jobs/{id}"))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if job.state.is_terminal() {
            break job;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "{job:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(
        job.state,
        weir_coordinator::jobs::JobState::Finished,
        "{job:?}"
    );

    let c = checkpoints().await;
    assert!(c.config.is_some());
    let completed: Vec<_> = c
        .history
        .iter()
        .filter(|s| s.status == CheckpointStatus::Completed)
        .collect();
    assert!(completed.len() >= 4, "{c:#?}");
    for s in &completed {
        // 4 tasks of parallelism 2... chained: lines+split, count+counts.
        assert_eq!((s.acknowledged, s.total), (4, 4), "{s:?}");
    }
    // The newest is the final checkpoint, taken when every subtask had
    // finished: it holds no keyed state (nothing can reach it any more).
    assert_eq!(completed[0].state_bytes, 0, "{:?}", completed[0]);
    for s in &completed[1..] {
        assert!(s.state_bytes > 0, "{s:?}");
        let count = s.vertices.iter().find(|v| v.name == "count").unwrap();
        assert!(count.state_bytes > 0, "{s:?}");
    }
    assert!(
        completed[..completed.len() - 1]
            .iter()
            .any(|s| s.uploaded_bytes < s.state_bytes),
        "a later checkpoint reuses files of an earlier one: {completed:#?}"
    );
    assert_eq!(
        c.latest_completed.as_ref().map(|l| l.id),
        Some(completed[0].id)
    );
    // `weir checkpoints` prints the same.
    let o = weir(&["checkpoints", &id, "--coordinator", &rest]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let printed = String::from_utf8_lossy(&o.stdout);
    assert!(
        printed.contains("a checkpoint every 200 ms (exactly-once)")
            && printed.contains(&format!("{} completed", c.counts.completed)),
        "{printed}"
    );
    assert_eq!(
        printed
            .lines()
            .filter(|l| l.contains(" completed "))
            .count(),
        completed.len(),
        "{printed}"
    );

    // Only the two retained checkpoints' files are left, and every file
    // they refer to is there.
    let storage = dir.path().join("coordinator/checkpoints").join(&id);
    let mut metadata = Vec::new();
    let mut files_left = std::collections::BTreeSet::new();
    for entry in walk(&storage) {
        let rel = entry
            .strip_prefix(dir.path().join("coordinator/checkpoints"))
            .unwrap();
        let rel = rel.to_str().unwrap().to_owned();
        if rel.ends_with("/_metadata") {
            let m: CheckpointMetadata =
                serde_json::from_slice(&std::fs::read(&entry).unwrap()).unwrap();
            metadata.push(m);
        } else {
            files_left.insert(rel);
        }
    }
    assert_eq!(metadata.len(), 2, "retained = 2: {metadata:#?}");
    let referenced: std::collections::BTreeSet<String> = metadata
        .iter()
        .flat_map(|m| m.files().map(|f| f.path.clone()))
        .collect();
    assert_eq!(files_left, referenced, "nothing more, nothing less");

    // Exact counts, committed: every count of every word once.
    exactly_once(&output, 9000 * 8, |v| {
        (
            v["word"].as_str().unwrap().to_owned(),
            v["count"].as_u64().unwrap(),
        )
    });
}

/// Every file under `dir`.
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// The word count with checkpoints every 200 ms on RocksDB, over three
/// worker processes: SIGKILL of a worker that runs its subtasks makes the
/// job restart on the other two from the latest completed checkpoint. The
/// failure is in the job's history with its attempt, the job finishes, and
/// each word's counts after the restart go on from the checkpoint's to the
/// exact total.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_worker_restarts_the_job_from_its_latest_checkpoint() {
    use weir_coordinator::jobs::JobState;

    let dir = tempfile::tempdir().unwrap();
    let (_coordinator, mut workers, rest, _) = start_three_workers(dir.path()).await;

    let output = dir.path().join("out.jsonl");
    let bundle = wordcount_bundle(
        dir.path(),
        "restarting",
        (16_000, 1600),
        &output,
        "[restart]\nstrategy = 'fixed-delay'\nattempts = 3\ndelay-ms = 200\n",
    );
    let id = submit(&rest, &bundle);
    checkpoints_until(&rest, &id, |c| c.counts.completed >= 3).await;
    // Kill the worker that runs subtask 0.
    let running = job_info(&rest, &id).await;
    let victim = running.subtasks[0].worker.clone().unwrap();
    kill_worker(&mut workers, &victim);

    let ended = job_until(&rest, &id, "the job ends", |j| j.state.is_terminal()).await;
    assert_eq!(ended.state, JobState::Finished, "{ended:#?}");
    assert_eq!((ended.attempt, ended.restarts), (1, 1), "{ended:#?}");
    assert_eq!(ended.exceptions.len(), 1, "{:#?}", ended.exceptions);
    assert_eq!(ended.exceptions[0].attempt, 0);
    assert!(
        ended.exceptions[0].message.contains(&victim),
        "names the lost worker: {}",
        ended.exceptions[0].message
    );
    assert!(
        ended
            .subtasks
            .iter()
            .all(|t| t.worker.as_deref() != Some(victim.as_str())),
        "attempt 1 runs on the other workers: {:?}",
        ended.subtasks
    );
    let c = checkpoints_until(&rest, &id, |_| true).await;
    let restored = c.restored.clone().expect("restored from a checkpoint");
    assert_eq!(restored.attempt, 1);
    assert!(restored.id >= 3, "{c:#?}");
    // `weir status` tells the restart and its cause.
    let o = weir(&["status", &id, "--coordinator", &rest]);
    let printed = String::from_utf8_lossy(&o.stdout);
    assert!(
        printed.contains("attempt 1: restarted 1 time after failures")
            && printed.contains(&format!("attempt 0: worker `{victim}` was lost")),
        "{printed}"
    );

    exactly_once(&output, 16_000 * 8, |v| {
        (
            v["word"].as_str().unwrap().to_owned(),
            v["count"].as_u64().unwrap(),
        )
    });
}

/// A guest that traps at a chosen record on the first attempt only: the
/// job restarts from its latest checkpoint (the failure, with the guest's
/// message, in its history), and its counts come out exact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trapping_guest_restarts_the_job_from_its_latest_checkpoint() {
    use weir_coordinator::jobs::JobState;

    let dir = tempfile::tempdir().unwrap();
    let Cluster {
        coordinator: _coordinator,
        w1: _w1,
        w2: _w2,
        rest,
        ..
    } = start_cluster(dir.path(), "5000").await;
    let output = dir.path().join("out.jsonl");
    let bundle = failing_bundle(
        dir.path(),
        "trapping",
        12_000,
        (1500, 1),
        &output,
        "[checkpoint]\ninterval-ms = 150\n\
         [restart]\nstrategy = 'exponential-delay'\ndelay-ms = 100\nmax-delay-ms = 1000\n",
    );
    let id = submit(&rest, &bundle);
    let ended = job_until(&rest, &id, "the job ends", |j| j.state.is_terminal()).await;
    assert_eq!(ended.state, JobState::Finished, "{ended:#?}");
    assert_eq!((ended.attempt, ended.restarts), (1, 1), "{ended:#?}");
    let failure = &ended.exceptions[0];
    assert_eq!(failure.attempt, 0);
    assert!(
        failure.message.contains("injected failure at line 1500")
            && failure.message.contains("fail"),
        "the operator and the guest's message: {}",
        failure.message
    );
    exactly_once(&output, 12_000 * 8, |v| {
        (v[0].as_str().unwrap().to_owned(), v[1].as_u64().unwrap())
    });
}

/// A bundle of the word count example: `lines` generated lines at `rate`
/// per second and subtask, at parallelism 2, counted on RocksDB with
/// checkpoints every 200 ms into the exactly-once file sink at `output`,
/// with the `[restart]` table `restart`.
fn wordcount_bundle(
    dir: &std::path::Path,
    name: &str,
    (lines, rate): (u64, u64),
    output: &std::path::Path,
    restart: &str,
) -> std::path::PathBuf {
    common::bundle(
        dir,
        name,
        "wordcount",
        &format!(
            "[job]\nname = '{name}'\nparallelism = 2\n[component]\npath = 'c.wasm'\n\
             [[source]]\nname = 'lines'\ntype = 'generator'\npattern = 'words'\ncount = '{lines}'\nrate = '{rate}'\n\
             [[operator]]\nname = 'split'\nfunction = 'split-words'\n\
             [[operator]]\nname = 'count'\nfunction = 'count'\nkey-by = 'value'\n\
             [[sink]]\nname = 'counts'\ntype = 'json-lines-file'\npath = '{}'\n\
             [state]\nbackend = 'rocksdb'\n\
             [checkpoint]\ninterval-ms = 200\n{restart}",
            output.display()
        ),
    )
}

/// SIGKILL the worker process of `workers` whose id is `victim`, and
/// forget it.
fn kill_worker(workers: &mut Vec<common::Proc>, victim: &str) {
    let i = workers
        .iter()
        .position(|w| victim.ends_with(&format!("-{}", w.0.id())))
        .expect("the worker runs here");
    let mut killed = workers.remove(i);
    killed.0.kill().unwrap();
    killed.0.wait().unwrap();
}

/// A bundle of the test guests: words from a generator through `fail-once`
/// (which panics at its subtask's `fail_at`-th line on the first
/// `fail_attempts` attempts), counted per word into the exactly-once file
/// sink at `output`, with the given `[checkpoint]` and `[restart]` tables.
fn failing_bundle(
    dir: &std::path::Path,
    name: &str,
    lines: u64,
    (fail_at, fail_attempts): (u64, u32),
    output: &std::path::Path,
    tables: &str,
) -> std::path::PathBuf {
    common::bundle(
        dir,
        name,
        "test-guests",
        &format!(
            "[job]\nname = '{name}'\nparallelism = 2\n[component]\npath = 'c.wasm'\n\
             [params]\nfail-at = '{fail_at}'\nfail-attempts = '{fail_attempts}'\n\
             [[source]]\nname = 'lines'\ntype = 'generator'\npattern = 'words'\ncount = '{lines}'\nrate = '2000'\n\
             [[operator]]\nname = 'fail'\nfunction = 'fail-once'\n\
             [[operator]]\nname = 'words'\nfunction = 'words'\n\
             [[operator]]\nname = 'count'\nfunction = 'count-words'\nkey-by = 'value'\n\
             [[sink]]\nname = 'counts'\ntype = 'json-lines-file'\npath = '{}'\n{tables}",
            output.display()
        ),
    )
}

/// Restarts used up: the job fails, and its history holds every attempt's
/// failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_whose_restarts_are_used_up_fails_with_every_failure_listed() {
    use weir_coordinator::jobs::JobState;

    let dir = tempfile::tempdir().unwrap();
    let Cluster {
        coordinator: _coordinator,
        w1: _w1,
        w2: _w2,
        rest,
        ..
    } = start_cluster(dir.path(), "5000").await;
    let output = dir.path().join("out");
    let bundle = failing_bundle(
        dir.path(),
        "hopeless",
        100_000,
        (1000, 100),
        &output,
        "[checkpoint]\ninterval-ms = 100\n[restart]\nstrategy = 'fixed-delay'\nattempts = 2\ndelay-ms = 50\n",
    );
    let id = submit(&rest, &bundle);
    let ended = job_until(&rest, &id, "the job fails", |j| j.state.is_terminal()).await;
    assert_eq!(ended.state, JobState::Failed, "{ended:#?}");
    assert_eq!((ended.attempt, ended.restarts), (2, 2), "{ended:#?}");
    // Each attempt's failure, the same ones grouped with their count.
    let attempts: Vec<u32> = ended
        .exceptions
        .iter()
        .flat_map(|e| {
            assert_eq!(e.count, e.last_attempt - e.attempt + 1, "{e:?}");
            e.attempt..=e.last_attempt
        })
        .collect();
    assert_eq!(attempts, [0, 1, 2], "{:#?}", ended.exceptions);
    assert!(
        ended
            .exceptions
            .iter()
            .all(|e| e.message.contains("injected failure at line 1000")),
        "{:#?}",
        ended.exceptions
    );
    assert!(ended.error.unwrap().contains("injected failure"));
}

/// The newest retained checkpoint of job `id` in the checkpoint storage
/// `storage` (under `root`): its id, and the path of one of its state files.
fn newest_checkpoint(
    root: &std::path::Path,
    storage: &std::path::Path,
) -> (u64, std::path::PathBuf) {
    let mut all: Vec<weir_model::checkpoint::CheckpointMetadata> = walk(storage)
        .into_iter()
        .filter(|p| p.ends_with("_metadata"))
        .map(|p| serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap())
        .collect();
    all.sort_by_key(|m| m.id);
    let m = all.pop().expect("a completed checkpoint");
    let file = m.files().next().expect("keyed state").path.clone();
    (m.id, root.join(file))
}

/// The tables of the jobs whose checkpoints are tampered with: several
/// checkpoints retained, restarts 1.5 s apart (time to tamper), `extra`
/// added to `[restart]`.
fn tampered_tables(extra: &str) -> String {
    format!(
        "[checkpoint]\ninterval-ms = 100\nretained = 3\n[restart]\nstrategy = 'fixed-delay'\nattempts = 3\ndelay-ms = 1500\n{extra}"
    )
}

/// Once job `id` restarts for the `restarts`-th time, make a state file of
/// its newest checkpoint `corrupt` or `missing` (in the checkpoint storage
/// of the coordinator under `dir`); returns that checkpoint's id.
async fn tamper_at_restart(
    rest: &str,
    id: &str,
    dir: &std::path::Path,
    restarts: u32,
    how: &str,
) -> u64 {
    use weir_coordinator::jobs::JobState;
    job_until(rest, id, "restarting", |j| {
        j.restarts == restarts && j.state == JobState::Restarting
    })
    .await;
    let root = dir.join("coordinator/checkpoints");
    let (checkpoint, file) = newest_checkpoint(&root, &root.join(id));
    if how == "corrupt" {
        let mut bytes = std::fs::read(&file).unwrap();
        bytes.iter_mut().for_each(|b| *b ^= 0x5a);
        std::fs::write(&file, bytes).unwrap();
    } else {
        std::fs::remove_file(&file).unwrap();
    }
    checkpoint
}

/// The newest checkpoint cannot be read when the job restarts (a file of it
/// corrupt): its output may have been committed, so restoring an older one
/// would write that stretch twice. By default the job fails instead,
/// naming both checkpoints, and what was committed stays as it was: each
/// count at most once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_newest_checkpoint_fails_the_job_rather_than_duplicate_committed_output() {
    use weir_coordinator::jobs::JobState;

    let dir = tempfile::tempdir().unwrap();
    let Cluster {
        coordinator: _coordinator,
        w1: _w1,
        w2: _w2,
        rest,
        ..
    } = start_cluster(dir.path(), "5000").await;
    let output = dir.path().join("out");
    let bundle = failing_bundle(
        dir.path(),
        "lost",
        16_000,
        (2000, 2),
        &output,
        &tampered_tables(""),
    );
    let id = submit(&rest, &bundle);
    let checkpoint = tamper_at_restart(&rest, &id, dir.path(), 1, "corrupt").await;
    let before = committed(&output).0;
    let ended = job_until(&rest, &id, "the job ends", |j| j.state.is_terminal()).await;
    assert_eq!(ended.state, JobState::Failed, "{ended:#?}");
    let error = ended.error.clone().unwrap();
    assert!(
        error.contains(&format!("checkpoint {checkpoint} cannot be restored"))
            && error.contains("is corrupt")
            && error.contains("on-lost-commit"),
        "{error}"
    );
    let older = error
        .split("older checkpoint ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap_or_else(|| panic!("names the older checkpoint: {error}"));
    assert!(older < checkpoint, "{error}");
    assert_eq!(ended.restarts, 1, "no further attempt: {ended:#?}");
    // Nothing committed was removed, and nothing is there twice.
    let (after, _) = committed(&output);
    assert!(after.len() >= before.len());
    let mut seen = std::collections::BTreeSet::new();
    for v in &after {
        let key = (v[0].as_str().unwrap().to_owned(), v[1].as_u64().unwrap());
        assert!(seen.insert(key.clone()), "{key:?} committed twice");
    }
}

/// The newest checkpoint cannot be read when the job restarts (a file of it
/// corrupt, then one missing), and the job opts into `on-lost-commit =
/// "duplicate"`: each is reported, the previous completed checkpoint is
/// restored instead, and the committed output holds every count (those
/// committed after the older checkpoint may be there twice), none lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_or_missing_checkpoint_file_falls_back_to_the_previous_checkpoint() {
    use weir_coordinator::checkpoint::CheckpointStats;
    use weir_coordinator::jobs::JobState;

    let dir = tempfile::tempdir().unwrap();
    let Cluster {
        coordinator: _coordinator,
        w1: _w1,
        w2: _w2,
        rest,
        ..
    } = start_cluster(dir.path(), "5000").await;
    let output = dir.path().join("out");
    let bundle = failing_bundle(
        dir.path(),
        "tampered",
        // The first failure comes after ~1 s (2,000 lines a subtask at
        // 2,000/s), time for several checkpoints even on a loaded machine:
        // the newest is tampered with, an older one must remain.
        16_000,
        (2000, 2),
        &output,
        &tampered_tables("on-lost-commit = 'duplicate'\n"),
    );
    let id = submit(&rest, &bundle);
    let mut tampered = Vec::new();
    for (restarts, how) in [(1, "corrupt"), (2, "missing")] {
        tampered.push(tamper_at_restart(&rest, &id, dir.path(), restarts, how).await);
    }
    let ended = job_until(&rest, &id, "the job ends", |j| j.state.is_terminal()).await;
    assert_eq!(ended.state, JobState::Finished, "{ended:#?}");
    let messages: Vec<&str> = ended
        .exceptions
        .iter()
        .map(|e| e.message.as_str())
        .collect();
    for (checkpoint, says) in tampered.iter().zip(["is corrupt", "is missing"]) {
        assert!(
            messages.iter().any(|m| m
                .contains(&format!("checkpoint {checkpoint} cannot be restored"))
                && m.contains(says)),
            "{messages:#?}"
        );
    }
    let c: CheckpointStats = reqwest::get(format!("{rest}/v1/jobs/{id}/checkpoints"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let restored = c.restored.expect("restored");
    assert!(
        !tampered.contains(&restored.id),
        "{restored:?} {tampered:?}"
    );
    // At least once: every word's counts run from 1 to its total, the
    // totals add up; some counts are there twice.
    let mut counts = std::collections::BTreeMap::<String, std::collections::BTreeSet<u64>>::new();
    let (lines, _) = committed(&output);
    for v in &lines {
        counts
            .entry(v[0].as_str().unwrap().to_owned())
            .or_default()
            .insert(v[1].as_u64().unwrap());
    }
    let mut total = 0;
    for (word, seen) in &counts {
        let n = seen.len() as u64;
        assert_eq!(seen.iter().copied().max(), Some(n), "`{word}`: 1..={n}");
        total += n;
    }
    assert_eq!(total, 16_000 * 8, "nothing lost");
}

/// A free port on loopback, for a process that must come back on the same
/// address.
/// A coordinator killed and started again while a job runs: the worker
/// registers with the new one and stops the tasks the old one deployed, so
/// nothing goes on writing for a job the coordinator no longer runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_coordinators_worker_stops_the_orphaned_tasks() {
    let dir = tempfile::tempdir().unwrap();
    let coordinator = Restartable::new(dir.path());
    let mut first = coordinator.start();
    let rest = coordinator.rest();
    let _worker = start_worker(dir.path(), "w1", &coordinator.rpc());
    wait_until(&rest, "the worker registers", |c| c.workers.len() == 1).await;
    let output = dir.path().join("out.jsonl");
    let bundle = common::bundle(
        dir.path(),
        "forever",
        "wordcount",
        &format!(
            "[job]\nname = 'forever'\n[component]\npath = 'c.wasm'\n\
             [[source]]\nname = 'lines'\ntype = 'generator'\npattern = 'words'\nrate = '5000'\n\
             [[operator]]\nname = 'split'\nfunction = 'split-words'\n\
             [[operator]]\nname = 'count'\nfunction = 'count'\nkey-by = 'value'\n\
             [[sink]]\nname = 'counts'\ntype = 'json-lines-file'\npath = '{}'\n",
            output.display()
        ),
    );
    let id = submit(&rest, &bundle);
    let size = || std::fs::metadata(&output).map(|m| m.len()).unwrap_or(0);
    let started = Instant::now();
    while size() == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the job writes"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // It goes on writing (the file sink writes a MiB at a time).
    let before = size();
    let started = Instant::now();
    while size() == before {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the job writes on"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    first.0.kill().unwrap();
    first.0.wait().unwrap();
    let _second = coordinator.start();
    wait_until(&rest, "the worker registers again", |c| {
        c.workers.len() == 1 && c.slots_free == c.slots_total
    })
    .await;
    // The worker stopped the old tasks: the output stops growing.
    let started = Instant::now();
    loop {
        let before = size();
        tokio::time::sleep(Duration::from_millis(2500)).await;
        if size() == before {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the orphaned tasks go on writing"
        );
    }
    let job = job_info(&rest, &id).await;
    assert_eq!(
        job.state,
        weir_coordinator::jobs::JobState::Failed,
        "{job:?}"
    );
}

/// A coordinator on fixed ports and data directory, which a test kills
/// and starts again.
struct Restartable {
    listen: String,
    rpc_listen: String,
    data: std::path::PathBuf,
}

impl Restartable {
    fn new(dir: &std::path::Path) -> Restartable {
        Restartable {
            listen: format!("127.0.0.1:{}", free_port()),
            rpc_listen: format!("127.0.0.1:{}", free_port()),
            data: dir.join("coordinator"),
        }
    }

    fn start(&self) -> common::Proc {
        start(&[
            "coordinator",
            "--listen",
            &self.listen,
            "--rpc-listen",
            &self.rpc_listen,
            "--heartbeat-interval-ms",
            "100",
            "--data-dir",
            self.data.to_str().unwrap(),
            "--allow-dir",
            self.data.parent().unwrap().to_str().unwrap(),
        ])
        .0
    }

    fn rest(&self) -> String {
        format!("http://{}", self.listen)
    }

    fn rpc(&self) -> String {
        format!("http://{}", self.rpc_listen)
    }
}

/// A coordinator killed mid-job and started again on its data directory:
/// the workers register again (stopping the tasks they ran), the job
/// resumes from its latest completed checkpoint as its next attempt, and
/// its committed output is exact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_coordinator_resumes_a_running_job_from_its_latest_checkpoint() {
    use weir_coordinator::jobs::JobState;

    let dir = tempfile::tempdir().unwrap();
    let coordinator = Restartable::new(dir.path());
    let mut first = coordinator.start();
    let (rest, rpc) = (coordinator.rest(), coordinator.rpc());
    let _workers = [
        start_worker(dir.path(), "w1", &rpc),
        start_worker(dir.path(), "w2", &rpc),
    ];
    wait_until(&rest, "the workers register", |c| c.workers.len() == 2).await;
    let output = dir.path().join("out");
    let bundle = failing_bundle(
        dir.path(),
        "resumed",
        12_000,
        (1, 0),
        &output,
        "[state]\nbackend = 'rocksdb'\n[checkpoint]\ninterval-ms = 150\n",
    );
    let id = submit(&rest, &bundle);
    checkpoints_until(&rest, &id, |c| c.counts.completed >= 3).await;
    first.0.kill().unwrap();
    first.0.wait().unwrap();
    let _second = coordinator.start();
    let ended = job_until(&rest, &id, "the job resumes and ends", |j| {
        j.state.is_terminal()
    })
    .await;
    assert_eq!(ended.state, JobState::Finished, "{ended:#?}");
    assert_eq!((ended.attempt, ended.restarts), (1, 1), "{ended:#?}");
    assert!(
        ended.exceptions[0]
            .message
            .contains("the coordinator stopped while attempt 0 ran"),
        "{:#?}",
        ended.exceptions
    );
    let c = checkpoints_until(&rest, &id, |_| true).await;
    let restored = c.restored.expect("resumed from a checkpoint");
    assert!(restored.id >= 3, "{restored:?}");
    exactly_once(&output, 12_000 * 8, |v| {
        (v[0].as_str().unwrap().to_owned(), v[1].as_u64().unwrap())
    });
}

/// A worker cut off from the others while it stays alive (in its own
/// network namespace, its link taken down): the job recovers on the other
/// workers; when the link comes back the cut-off worker registers again
/// and stops its tasks, which commit nothing (the sink's fence), and the
/// committed output is exact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_cut_off_while_alive_is_fenced_off_and_the_output_stays_exact() {
    use weir_coordinator::jobs::JobState;

    let net = NetNs::new();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("coordinator");
    let here = net.here();
    let (coordinator, line) = start(&[
        "coordinator",
        "--listen",
        "127.0.0.1:0",
        "--rpc-listen",
        &format!("{here}:0"),
        "--heartbeat-interval-ms",
        "100",
        "--heartbeat-timeout-ms",
        "1500",
        "--data-dir",
        data.to_str().unwrap(),
        "--allow-dir",
        dir.path().to_str().unwrap(),
        // Its service for workers is on the namespace's link, not loopback.
        "--insecure",
    ]);
    let _coordinator = coordinator;
    let urls = urls(&line);
    let (rest, rpc) = (urls[0].clone(), urls[1].clone());
    // One slot each: the job's two subtasks run on the cut-off worker and
    // on one here; the third takes over.
    let worker = |name: &str, netns: Option<&str>, at: &str| {
        let d = dir.path().join(name);
        let args = common::one_slot_worker(&rpc, at, &d, dir.path());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        common::start_in(netns, &args).0
    };
    let cut_off = worker("w1", Some(&net.name), &net.there());
    let _w2 = worker("w2", None, &here);
    wait_until(&rest, "two workers register", |c| c.workers.len() == 2).await;

    let output = dir.path().join("out");
    let bundle = failing_bundle(
        dir.path(),
        "partitioned",
        16_000,
        (1, 0),
        &output,
        "[state]\nbackend = 'rocksdb'\n[checkpoint]\ninterval-ms = 150\n\
         [restart]\nstrategy = 'fixed-delay'\nattempts = 3\ndelay-ms = 200\n",
    );
    let id = submit(&rest, &bundle);
    let _w3 = worker("w3", None, &here);
    wait_until(&rest, "the spare worker registers", |c| {
        c.workers.len() == 3
    })
    .await;
    checkpoints_until(&rest, &id, |c| c.counts.completed >= 2).await;
    let victim = job_info(&rest, &id)
        .await
        .subtasks
        .iter()
        .filter_map(|t| t.worker.clone())
        .find(|w| w.ends_with(&format!("-{}", cut_off.0.id())))
        .expect("a subtask runs on the worker in the namespace");

    net.link(false);
    let recovered = job_until(&rest, &id, "the job runs again without it", |j| {
        j.attempt == 1 && j.state == JobState::Running
    })
    .await;
    assert!(
        recovered
            .subtasks
            .iter()
            .all(|t| t.worker.as_deref() != Some(victim.as_str())),
        "{:?}",
        recovered.subtasks
    );
    net.link(true);
    let ended = job_until(&rest, &id, "the job ends", |j| j.state.is_terminal()).await;
    assert_eq!(ended.state, JobState::Finished, "{ended:#?}");
    assert_eq!((ended.attempt, ended.restarts), (1, 1), "{ended:#?}");
    assert!(
        ended.exceptions[0].message.contains(&victim),
        "{:#?}",
        ended.exceptions
    );
    // The healed worker registers again, with nothing running.
    wait_until(&rest, "the cut-off worker registers again", |c| {
        c.workers.len() == 3 && c.slots_free == c.slots_total
    })
    .await;
    exactly_once(&output, 16_000 * 8, |v| {
        (v[0].as_str().unwrap().to_owned(), v[1].as_u64().unwrap())
    });
    drop(cut_off);
}

/// The shape of Flink's `UnalignedCheckpointITCase`: unique increasing
/// numbers from two source subtasks → a key-by shuffle across worker
/// processes → keyed state checking each key's order → the exactly-once
/// sink, at a short checkpoint interval, through failures of every kind:
/// a guest trap while processing (attempt 0), a trap while restoring (the
/// first recovery fails), and the SIGKILL of a worker while a checkpoint is
/// in progress (a spare worker takes its slots). The committed output holds
/// every number once, each key's in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn numbers_stay_exactly_once_and_in_order_per_key_through_every_kind_of_failure() {
    use weir_coordinator::jobs::JobState;

    const N: u64 = 60_000;
    let dir = tempfile::tempdir().unwrap();
    let (_coordinator, mut workers, rest, _) = start_three_workers(dir.path()).await;
    let output = dir.path().join("out");
    let bundle = common::bundle(
        dir.path(),
        "ordered",
        "test-guests",
        &format!(
            "[job]\nname = 'ordered'\nparallelism = 2\n[component]\npath = 'c.wasm'\n\
             [params]\nfail-at = '3000'\nfail-open-attempts = '1'\n\
             [[source]]\nname = 'numbers'\ntype = 'generator'\npattern = 'sequence'\ncount = '{N}'\nrate = '2500'\n\
             [[operator]]\nname = 'bucket'\nfunction = 'bucket'\n\
             [[operator]]\nname = 'check'\nfunction = 'check-order'\nkey-by = 'key'\n\
             [[sink]]\nname = 'out'\ntype = 'json-lines-file'\npath = '{}'\n\
             [state]\nbackend = 'rocksdb'\n\
             [checkpoint]\ninterval-ms = 100\n\
             [restart]\nstrategy = 'fixed-delay'\nattempts = 5\ndelay-ms = 100\n",
            output.display()
        ),
    );
    let id = submit(&rest, &bundle);
    // Attempt 0 traps while processing, attempt 1 while restoring.
    job_until(&rest, &id, "attempt 2 runs", |j| {
        j.attempt == 2 && j.state == JobState::Running
    })
    .await;
    let before = checkpoints_until(&rest, &id, |_| true)
        .await
        .counts
        .completed;
    checkpoints_until(&rest, &id, |c| c.counts.completed >= before + 2).await;
    // A worker killed while a checkpoint is in progress.
    checkpoints_until(&rest, &id, |c| c.counts.in_progress > 0).await;
    let victim = job_info(&rest, &id).await.subtasks[0]
        .worker
        .clone()
        .unwrap();
    kill_worker(&mut workers, &victim);

    let ended = job_until(&rest, &id, "the job ends", |j| j.state.is_terminal()).await;
    assert_eq!(ended.state, JobState::Finished, "{ended:#?}");
    assert_eq!((ended.attempt, ended.restarts), (3, 3), "{ended:#?}");
    let failures: Vec<&str> = ended
        .exceptions
        .iter()
        .map(|e| e.message.as_str())
        .collect();
    assert!(
        failures[0].contains("injected failure at record 3000")
            && failures[1].contains("injected failure while restoring attempt 1")
            && failures[2].contains(&victim),
        "{failures:#?}"
    );
    let c = checkpoints_until(&rest, &id, |_| true).await;
    assert!(c.counts.completed >= 8, "{:?}", c.counts);

    // Every number once; each key's in order (a key's numbers reach one
    // sink subtask, whose parts follow the checkpoints).
    let mut parts: Vec<(u32, u64, std::path::PathBuf)> = std::fs::read_dir(&output)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter_map(|p| {
            let name = p.file_name()?.to_str()?.to_owned();
            let (s, c) = name
                .strip_prefix("part-")?
                .strip_suffix(".jsonl")?
                .split_once('-')?;
            Some((s.parse().ok()?, c.parse().ok()?, p))
        })
        .collect();
    parts.sort();
    let mut last = std::collections::HashMap::<u64, u64>::new();
    let mut all = Vec::new();
    for (_, _, path) in &parts {
        for line in std::fs::read_to_string(path).unwrap().lines() {
            let n = serde_json::from_str::<serde_json::Value>(line).unwrap()["seq"]
                .as_u64()
                .unwrap();
            if let Some(&l) = last.get(&(n % 10)) {
                assert!(n > l, "key {}: {n} after {l} in {}", n % 10, path.display());
            }
            last.insert(n % 10, n);
            all.push(n);
        }
    }
    all.sort_unstable();
    let len = all.len();
    all.dedup();
    assert_eq!(len, all.len(), "nothing twice");
    assert_eq!(all, (0..N).collect::<Vec<_>>(), "nothing lost");
}

/// Checkpoints complete while a slow stage (0.5 ms per record) holds the
/// sources back (they wait for room most of their time): the barriers
/// queue behind the buffered records, are aligned at the slow subtasks and
/// reach the exactly-once sink.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checkpoints_complete_while_a_slow_stage_backpressures_the_job() {
    let dir = tempfile::tempdir().unwrap();
    let Cluster {
        coordinator: _coordinator,
        w1: _w1,
        w2: _w2,
        rest,
        ..
    } = start_cluster(dir.path(), "5000").await;
    let output = dir.path().join("out");
    let bundle = common::bundle(
        dir.path(),
        "slow",
        "test-guests",
        &format!(
            "[job]\nname = 'slow'\n[component]\npath = 'c.wasm'\n\
             [[source]]\nname = 'gen'\ntype = 'generator'\nparallelism = 2\n\
             [[operator]]\nname = 'slow'\nfunction = 'slow'\nparallelism = 4\n\
             [[sink]]\nname = 'out'\ntype = 'json-lines-file'\npath = '{}'\n\
             [checkpoint]\ninterval-ms = 200\n",
            output.display()
        ),
    );
    let id = submit(&rest, &bundle);
    let c = checkpoints_until(&rest, &id, |c| c.counts.completed >= 1).await;
    let m: serde_json::Value = reqwest::get(format!("{rest}/v1/jobs/{id}/metrics"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let source = m["vertices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "gen")
        .unwrap()
        .clone();
    assert!(
        source["backpressure"].as_f64().unwrap() > 0.5,
        "the job is backpressured: {source}"
    );
    assert_eq!(c.counts.failed, 0, "{c:#?}");
    // What the completed checkpoint covers is committed (the sinks are
    // told as they go on).
    let started = Instant::now();
    while !std::fs::read_dir(&output).unwrap().any(|e| {
        let name = e.unwrap().file_name();
        name.to_string_lossy().starts_with("part-")
    }) {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no committed parts"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let o = weir(&["cancel", &id, "--coordinator", &rest]);
    assert!(o.status.success());
}

/// The word count with checkpoints on RocksDB while workers are killed
/// (SIGKILL) again and again, at random moments (the seed is printed), a
/// fresh worker joining after each: the committed output equals the
/// fault-free run's — for every word, each count from 1 to its total
/// exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_word_count_survives_repeated_random_worker_kills() {
    use weir_coordinator::jobs::JobState;

    let dir = tempfile::tempdir().unwrap();
    let (_coordinator, mut workers, rest, rpc) = start_three_workers(dir.path()).await;
    let output = dir.path().join("out");
    let bundle = wordcount_bundle(
        dir.path(),
        "killed",
        (24_000, 2000),
        &output,
        "[restart]\nstrategy = 'fixed-delay'\nattempts = 10\ndelay-ms = 100\n",
    );
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos() as u64;
    eprintln!("random kills, seed {seed}");
    let mut state = seed | 1;
    let mut random = move |n: u64| {
        // xorshift64
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % n
    };
    let id = submit(&rest, &bundle);
    const KILLS: u32 = 3;
    for kill in 0..KILLS {
        job_until(&rest, &id, "the attempt runs", |j| {
            j.attempt == kill && j.state == JobState::Running
        })
        .await;
        tokio::time::sleep(Duration::from_millis(300 + random(1200))).await;
        let running = job_info(&rest, &id).await;
        if running.state.is_terminal() {
            panic!("the job ended before kill {kill}: {running:#?}");
        }
        let busy: Vec<String> = running
            .subtasks
            .iter()
            .filter_map(|t| t.worker.clone())
            .collect();
        let victim = &busy[random(busy.len() as u64) as usize];
        kill_worker(&mut workers, victim);
        workers.push(start_worker(dir.path(), &format!("spare{kill}"), &rpc));
    }
    let ended = job_until(&rest, &id, "the job ends", |j| j.state.is_terminal()).await;
    assert_eq!(ended.state, JobState::Finished, "{ended:#?}");
    assert_eq!(ended.restarts, KILLS, "{ended:#?}");
    exactly_once(&output, 24_000 * 8, |v| {
        (
            v["word"].as_str().unwrap().to_owned(),
            v["count"].as_u64().unwrap(),
        )
    });
}

/// A 200 ms tumbling event-time window per key on RocksDB, with a worker
/// killed mid-run: the restored attempt has the windows' partial counts and
/// their timers (kept beside RocksDB's files in each checkpoint), so every
/// window of every key fires once, with its exact count, into the
/// exactly-once sink.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn windows_on_rocksdb_fire_once_with_exact_counts_after_a_worker_is_killed() {
    use weir_coordinator::jobs::JobState;
    const EVENTS: u64 = 100_000;

    let dir = tempfile::tempdir().unwrap();
    let (_coordinator, mut workers, rest, _) = start_three_workers(dir.path()).await;
    let output = dir.path().join("counts");
    let bundle = common::bundle(
        dir.path(),
        "windows",
        "bench-operators",
        &format!(
            "[job]\nname = 'windows'\nparallelism = 2\n[component]\npath = 'c.wasm'\n\
             [[source]]\nname = 'numbers'\ntype = 'generator'\npattern = 'numbers'\ncount = '{EVENTS}'\nrate = '6000'\n\
             timestamp = '/ts'\nwatermark = 'monotonous'\n\
             [[operator]]\nname = 'count'\nfunction = 'windowed-count'\nkey-by = '/k'\n\
             window = {{ type = 'tumbling', size-ms = 200 }}\n\
             [[sink]]\nname = 'counts'\ntype = 'json-lines-file'\npath = '{}'\n\
             [state]\nbackend = 'rocksdb'\n\
             [checkpoint]\ninterval-ms = 200\n\
             [restart]\nstrategy = 'fixed-delay'\nattempts = 3\ndelay-ms = 200\n",
            output.display()
        ),
    );
    let id = submit(&rest, &bundle);
    checkpoints_until(&rest, &id, |c| c.counts.completed >= 3).await;
    let victim = job_info(&rest, &id).await.subtasks[0]
        .worker
        .clone()
        .unwrap();
    kill_worker(&mut workers, &victim);
    let ended = job_until(&rest, &id, "the job ends", |j| j.state.is_terminal()).await;
    assert_eq!(ended.state, JobState::Finished, "{ended:#?}");
    assert!(ended.restarts >= 1, "{ended:#?}");
    let c = checkpoints_until(&rest, &id, |_| true).await;
    assert!(c.restored.is_some(), "restored from a checkpoint: {c:#?}");

    let mut expected = std::collections::BTreeMap::new();
    for i in 0..EVENTS {
        let start = (i / 100) as i64 / 200 * 200;
        *expected.entry((i % 10_000, start)).or_insert(0u64) += 1;
    }
    let mut got = std::collections::BTreeMap::new();
    for v in committed(&output).0 {
        let window = (
            v["k"].as_u64().unwrap(),
            v["window_start"].as_i64().unwrap(),
        );
        assert_eq!(v["window_end"].as_i64().unwrap(), window.1 + 200);
        let n = v["n"].as_u64().unwrap();
        assert!(got.insert(window, n).is_none(), "{window:?} fired twice");
    }
    assert_eq!(got.len(), expected.len(), "every window of every key once");
    assert!(got == expected, "every window's exact count");
}

/// A source held to a rate waits for its next records, not for room
/// downstream: the metrics show it idle, never backpressured, and the
/// stages after it (across the two workers) idle too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limited_source_is_idle_not_backpressured() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = start_cluster(dir.path(), "5000").await;
    let rest = cluster.rest.clone();
    let bundle = common::bundle(
        dir.path(),
        "rated",
        "wordcount",
        "[job]\nname = 'rated'\nparallelism = 2\n[component]\npath = 'c.wasm'\n\
         [[source]]\nname = 'gen'\ntype = 'generator'\npattern = 'words'\nrate = 50\n\
         [[operator]]\nname = 'split'\nfunction = 'split-words'\n\
         [[operator]]\nname = 'count'\nfunction = 'count'\nkey-by = 'value'\n\
         [[sink]]\nname = 'out'\ntype = 'json-lines-file'\npath = '/dev/null'\n",
    );
    let id = submit(&rest, &bundle);
    let started = Instant::now();
    let m = loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let m: serde_json::Value = reqwest::get(format!("{rest}/v1/jobs/{id}/metrics"))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        // Five seconds of history: rates over a steady run.
        if m["history"].as_array().is_some_and(|h| h.len() >= 5) {
            break m;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "{m}");
    };
    for v in m["vertices"].as_array().unwrap() {
        assert!(v["backpressure"].as_f64().unwrap() < 0.05, "{v}");
        for s in v["subtasks"].as_array().unwrap() {
            assert!(s["idle_ms_per_s"].as_f64().unwrap() > 500.0, "{s}");
        }
    }
    let source = &m["vertices"][0];
    assert_eq!(source["name"], "gen", "{m}");
    assert!(source["records_out"].as_u64().unwrap() > 0, "{source}");
}
