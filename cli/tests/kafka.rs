//! Kafka connectors against a real Kafka-protocol broker (tansu, started by
//! each test on loopback): topics read into exact results at parallelism
//! 2, a job written back to Kafka, exactly-once output through a failure
//! and restart, new partitions found while running.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::kafka::Broker;

/// `n` lines of words (a fixed vocabulary), keyed by their number.
fn lines(n: usize) -> Vec<(Option<String>, String)> {
    const WORDS: [&str; 7] = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta"];
    (0..n)
        .map(|i| {
            let line: Vec<&str> = (0..1 + i % 5)
                .map(|k| WORDS[(i * 3 + k) % WORDS.len()])
                .collect();
            (Some(format!("k{i}")), line.join(" "))
        })
        .collect()
}

fn word_totals(lines: &[(Option<String>, String)]) -> BTreeMap<String, u64> {
    let mut totals = BTreeMap::new();
    for (_, l) in lines {
        for w in l.split_whitespace() {
            *totals.entry(w.to_owned()).or_default() += 1;
        }
    }
    totals
}

/// The last count of each word in a JSON-lines file of `{"word", "count"}`.
fn final_counts(output: &Path) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for line in std::fs::read_to_string(output).unwrap().lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let e = counts
            .entry(v["word"].as_str().unwrap().to_owned())
            .or_insert(0);
        *e = v["count"].as_u64().unwrap().max(*e);
    }
    counts
}

/// A bundle of the test guests at parallelism 2: the text lines of
/// `topic` as they were when the job started, paced at half a millisecond
/// a line (`slow`: checkpoints complete while they are read, however fast
/// the machine), through `fail-once` (which fails at its subtask's
/// `fail_at`-th line on the first attempt), then `rest` (operators and a
/// sink), with checkpoints every 100 ms and two restarts.
fn failing_bundle(
    dir: &Path,
    name: &str,
    broker: &Broker,
    topic: &str,
    fail_at: u64,
    rest: &str,
) -> std::path::PathBuf {
    common::bundle(
        dir,
        name,
        "test-guests",
        &format!(
            "[job]\nname = '{name}'\nparallelism = 2\n[component]\npath = 'c.wasm'\n\
             [params]\nfail-at = '{fail_at}'\nfail-attempts = '1'\n\
             [[source]]\nname = 'lines'\ntype = 'kafka'\nbrokers = '{}'\ntopics = ['{topic}']\nformat = 'text'\nstop = 'latest'\n\
             [[operator]]\nname = 'pace'\nfunction = 'slow'\n\
             [[operator]]\nname = 'fail'\nfunction = 'fail-once'\n\
             {rest}\
             [checkpoint]\ninterval-ms = 100\n\
             [restart]\nstrategy = 'fixed-delay'\nattempts = 2\ndelay-ms = 100\n",
            broker.address
        ),
    )
}

/// Submit `bundle` to `weir local` at `rest` and wait until it finishes
/// after exactly one restart; returns the job's id.
async fn restarted_once(rest: &str, bundle: &Path) -> String {
    use weir_coordinator::jobs::JobState;
    let id = common::submit(rest, bundle);
    let ended = common::job_until(rest, &id, "the job ends", |j| j.state.is_terminal()).await;
    assert_eq!(ended.state, JobState::Finished, "{ended:#?}");
    assert_eq!((ended.attempt, ended.restarts), (1, 1), "{ended:#?}");
    assert!(
        ended.exceptions[0].message.contains("injected failure"),
        "{:#?}",
        ended.exceptions
    );
    id
}

/// A bounded Kafka source (`stop = "latest"`) of three partitions read at
/// parallelism 2 by the word count: every message once, exact counts; the
/// same with each record's metadata around its value.
#[test]
fn a_word_count_reads_every_partition_of_a_topic_once() {
    let broker = Broker::start();
    broker.create_topic("lines", 3);
    let input = lines(3000);
    broker.produce("lines", &input);
    assert_eq!(broker.sizes("lines", 3).values().sum::<i64>(), 3000);
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(weir_tests::guest("wordcount"), dir.path().join("c.wasm")).unwrap();
    let output = dir.path().join("counts.jsonl");
    std::fs::write(
        dir.path().join("weir.toml"),
        format!(
            "[job]\nname = 'kafka-count'\nparallelism = 2\n[component]\npath = 'c.wasm'\n\
             [[source]]\nname = 'lines'\ntype = 'kafka'\nbrokers = '{}'\ntopics = ['lines']\nformat = 'text'\nstop = 'latest'\n\
             [[operator]]\nname = 'split'\nfunction = 'split-words'\n\
             [[operator]]\nname = 'count'\nfunction = 'count'\nkey-by = 'value'\n\
             [[sink]]\nname = 'out'\ntype = 'json-lines-file'\npath = '{}'\n",
            broker.address,
            output.display()
        ),
    )
    .unwrap();
    let o = common::weir(&["run", dir.path().to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(final_counts(&output), word_totals(&input));

    // With metadata: one record per message, naming where it was.
    let meta = dir.path().join("meta");
    std::fs::create_dir_all(&meta).unwrap();
    let seen = dir.path().join("seen.jsonl");
    std::fs::write(
        meta.join("weir.toml"),
        format!(
            "[job]\nname = 'kafka-meta'\nparallelism = 2\n\
             [[source]]\nname = 'lines'\ntype = 'kafka'\nbrokers = '{}'\ntopics = ['lines']\nformat = 'text'\nstop = 'latest'\nmetadata = true\n\
             [[sink]]\nname = 'out'\ntype = 'json-lines-file'\npath = '{}'\n",
            broker.address,
            seen.display()
        ),
    )
    .unwrap();
    let o = common::weir(&["run", meta.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let records: Vec<serde_json::Value> = std::fs::read_to_string(&seen)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(records.len(), 3000);
    let mut by_key: BTreeMap<String, &serde_json::Value> = BTreeMap::new();
    let mut places = std::collections::BTreeSet::new();
    for r in &records {
        assert_eq!(r["topic"], "lines");
        assert!(r["timestamp"].as_i64().unwrap() > 1_600_000_000_000, "{r}");
        places.insert((
            r["partition"].as_i64().unwrap(),
            r["offset"].as_i64().unwrap(),
        ));
        by_key.insert(r["key"].as_str().unwrap().to_owned(), r);
    }
    assert_eq!(places.len(), 3000, "every message once");
    for (key, value) in &input {
        assert_eq!(by_key[key.as_ref().unwrap()]["value"], value.as_str());
    }
}

/// Kafka to Kafka: a topic of JSON values, filtered by a built-in, written
/// to another topic keyed by a field; every kept record arrives once, with
/// its key.
#[test]
fn a_job_writes_kafka_to_kafka() {
    let broker = Broker::start();
    broker.create_topic("orders", 2);
    broker.create_topic("big", 3);
    let orders: Vec<(Option<String>, String)> = (0..2000)
        .map(|i| {
            (
                None,
                format!(
                    "{{\"id\": {i}, \"user\": \"u{}\", \"amount\": {}}}",
                    i % 13,
                    i % 100
                ),
            )
        })
        .collect();
    broker.produce("orders", &orders);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("weir.toml"),
        format!(
            "[job]\nname = 'kafka-kafka'\nparallelism = 2\n\
             [[source]]\nname = 'orders'\ntype = 'kafka'\nbrokers = '{0}'\ntopics = ['orders']\nstop = 'latest'\n\
             [[operator]]\nname = 'big'\nbuiltin = 'select'\nwhere = '/amount >= 90'\ncolumns = ['id = /id', 'user = /user', 'amount = /amount']\n\
             [[sink]]\nname = 'out'\ntype = 'kafka'\nbrokers = '{0}'\ntopic = 'big'\nkey-field = '/user'\n",
            broker.address
        ),
    )
    .unwrap();
    let o = common::weir(&["run", dir.path().to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let got = broker.read("big", 3, 200);
    assert_eq!(got.len(), 200, "every kept record once");
    let mut ids: Vec<u64> = got
        .iter()
        .map(|(_, key, value)| {
            let v: serde_json::Value = serde_json::from_str(value).unwrap();
            assert!(v["amount"].as_u64().unwrap() >= 90);
            assert_eq!(key.as_deref(), v["user"].as_str(), "keyed by the user");
            v["id"].as_u64().unwrap()
        })
        .collect();
    ids.sort_unstable();
    let want: Vec<u64> = (0..2000).filter(|i| i % 100 >= 90).collect();
    assert_eq!(ids, want);
    // A key's messages are in one partition.
    let mut partition_of = BTreeMap::new();
    for (p, key, _) in &got {
        assert_eq!(
            *partition_of.entry(key.clone()).or_insert(*p),
            *p,
            "{key:?}"
        );
    }
}

/// Poison in a topic of three partitions read at parallelism 2 — values
/// that are not JSON, orders the converter panics on, orders the totals
/// refuse — lands in the dead-letter output with its partition, offset and
/// key, and every other order counts once.
#[test]
fn poison_messages_go_to_the_dead_letter_output() {
    use common::orders::{check_letters, check_totals, expected, orders};
    let broker = Broker::start();
    broker.create_topic("orders", 3);
    let input = orders(6000, 100);
    let messages: Vec<(Option<String>, String)> = input
        .iter()
        .enumerate()
        .map(|(i, v)| (Some(format!("o{i}")), v.clone()))
        .collect();
    broker.produce("orders", &messages);
    let dir = tempfile::tempdir().unwrap();
    let (output, dead) = (
        dir.path().join("totals.jsonl"),
        dir.path().join("dead.jsonl"),
    );
    let bundle = common::bundle(
        dir.path(),
        "kafka-poison",
        "dead-letters",
        &format!(
            "[job]\nname = 'kafka-poison'\nparallelism = 2\n[component]\npath = 'c.wasm'\n\
             [[source]]\nname = 'orders'\ntype = 'kafka'\nbrokers = '{}'\ntopics = ['orders']\nstop = 'latest'\non-error = 'dead-letter'\n\
             [[operator]]\nname = 'to-eur'\nfunction = 'to-eur'\non-error = 'dead-letter'\n\
             [[operator]]\nname = 'totals'\nfunction = 'totals'\nkey-by = '/customer'\non-error = 'dead-letter'\n\
             [[sink]]\nname = 'out'\ntype = 'json-lines-file'\npath = '{}'\n\
             [dead-letter]\ntype = 'json-lines-file'\npath = '{}'\n",
            broker.address,
            output.display(),
            dead.display()
        ),
    );
    let o = common::weir(&["run", bundle.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let e = expected(&input);
    assert_eq!(
        (e.undecodable.len(), e.unconvertible.len(), e.refused.len()),
        (20, 20, 20)
    );
    check_totals(&common::json_lines(&output), &e);
    check_letters(&common::json_lines(&dead), &e, |l| {
        let split = l["split"].as_str().unwrap();
        assert!(split.starts_with("orders/"), "{l}");
        assert!(l["offset"].is_u64() && l["timestamp"].is_i64(), "{l}");
        // Its key, the message's.
        let i: usize = l["key"].as_str().unwrap()[1..].parse().unwrap();
        assert_eq!(l["raw"].as_str(), Some(input[i].as_str()), "{l}");
    });
}

/// A guest that fails once in the middle of a topic: the job restarts from
/// its latest checkpoint, whose offsets say where each partition goes on,
/// and the committed output is exact (each word's counts once each, the
/// totals those of the topic).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_offsets_restore_exactly_once_output_after_a_failure() {
    let broker = Broker::start();
    broker.create_topic("text", 3);
    let input = lines(20_000);
    broker.produce("text", &input);
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let (_local, rest) = common::local(&data);
    let output = dir.path().join("out");
    let sink = format!(
        "[[operator]]\nname = 'words'\nfunction = 'words'\n\
         [[operator]]\nname = 'count'\nfunction = 'count-words'\nkey-by = 'value'\n\
         [[sink]]\nname = 'counts'\ntype = 'json-lines-file'\npath = '{}'\n",
        output.display()
    );
    let bundle = failing_bundle(dir.path(), "kafka-restore", &broker, "text", 5_000, &sink);
    let id = restarted_once(&rest, &bundle).await;
    let c = common::checkpoints_until(&rest, &id, |_| true).await;
    assert!(c.restored.is_some(), "restored from a checkpoint: {c:#?}");
    let total = word_totals(&input).values().sum();
    common::exactly_once(&output, total, |v| {
        (v[0].as_str().unwrap().to_owned(), v[1].as_u64().unwrap())
    });
    // The final checkpoint's offsets, committed to the source's consumer
    // group (for monitoring).
    let ends: BTreeMap<i32, Option<i64>> = broker
        .sizes("text", 3)
        .into_iter()
        .map(|(p, n)| (p, Some(n)))
        .collect();
    assert_eq!(broker.committed("weir-lines", "text", 3), ends);
}

/// A broker that is not there when the job starts: the job fails naming
/// it (no restarts asked for).
#[test]
fn a_missing_broker_fails_the_job_naming_it() {
    let port = common::free_port();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("weir.toml"),
        format!(
            "[job]\nname = 'no-broker'\n\
             [[source]]\nname = 'in'\ntype = 'kafka'\nbrokers = '127.0.0.1:{port}'\ntopics = ['t']\n\
             properties = {{ 'socket.connection.setup.timeout.ms' = '1000' }}\n\
             [[sink]]\nname = 'out'\ntype = 'stdout'\n"
        ),
    )
    .unwrap();
    let o = common::weir(&["run", dir.path().to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "cannot read the topics of Kafka at 127.0.0.1:{port}"
        )),
        "{stderr}"
    );
}

/// An unbounded source starting at the partitions' ends (`start =
/// "latest"`) across a broker restart (SIGKILL, then started again on the
/// same storage): reading goes on when the broker is back, and a topic made
/// while the job runs that matches its `topic-pattern` is read from its
/// first message, whatever `start` says.
#[test]
fn reading_goes_on_across_a_broker_restart_and_finds_new_topics() {
    let mut broker = Broker::start();
    broker.create_topic("events-a", 2);
    let before: Vec<(Option<String>, String)> = (0..50)
        .map(|i| (None, format!("{{\"before\": {i}}}")))
        .collect();
    broker.produce("events-a", &before);
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("seen.jsonl");
    std::fs::write(
        dir.path().join("weir.toml"),
        format!(
            "[job]\nname = 'kafka-follow'\nparallelism = 2\n\
             [[source]]\nname = 'events'\ntype = 'kafka'\nbrokers = '{}'\ntopic-pattern = 'events-.*'\nstart = 'latest'\ndiscovery-interval-ms = 200\n\
             [[sink]]\nname = 'out'\ntype = 'json-lines-file'\npath = '{}'\n",
            broker.address,
            output.display()
        ),
    )
    .unwrap();
    let job = common::command()
        .args(["run", dir.path().to_str().unwrap()])
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(dir.path().join("job.log")).unwrap())
        .spawn()
        .unwrap();
    let job = common::Proc(job);
    let records = || -> Vec<serde_json::Value> {
        std::fs::read_to_string(&output)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    };
    let wait_for = |what: &str, ok: &dyn Fn(&[serde_json::Value]) -> bool| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            let got = records();
            if ok(&got) {
                return got;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{what}: {} records came; the job said: {}",
                got.len(),
                std::fs::read_to_string(dir.path().join("job.log")).unwrap_or_default()
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    };
    // The job reads from the ends: probes written until one comes through
    // tell that it has started (what came before is not read).
    let mut probe = 0;
    wait_for("a probe", &|got: &[serde_json::Value]| {
        if got.is_empty() {
            broker.produce("events-a", &[(None, format!("{{\"probe\": {probe}}}"))]);
        }
        !got.is_empty()
    });
    probe += 1;
    let _ = probe;
    let first: Vec<(Option<String>, String)> = (0..500)
        .map(|i| (None, format!("{{\"n\": {i}}}")))
        .collect();
    broker.produce("events-a", &first);
    let numbers = |got: &[serde_json::Value]| -> Vec<u64> {
        got.iter().filter_map(|v| v["n"].as_u64()).collect()
    };
    wait_for("the first 500", &|got| numbers(got).len() >= 500);
    broker.stop();
    std::thread::sleep(std::time::Duration::from_millis(500));
    broker.restart();
    let more: Vec<(Option<String>, String)> = (500..800)
        .map(|i| (None, format!("{{\"n\": {i}}}")))
        .collect();
    broker.produce("events-a", &more);
    broker.create_topic("events-b", 1);
    let new: Vec<(Option<String>, String)> = (800..900)
        .map(|i| (None, format!("{{\"n\": {i}}}")))
        .collect();
    broker.produce("events-b", &new);
    let got = wait_for("all 900", &|got| numbers(got).len() >= 900);
    drop(job);
    let mut got = numbers(&got);
    got.sort_unstable();
    assert_eq!(got, (0..900).collect::<Vec<u64>>(), "each record once");
    assert!(
        records().iter().all(|v| v.get("before").is_none()),
        "what the topic held before the job started is not read"
    );
}

/// Event time from the messages' timestamps follows the slowest
/// partition: one subtask reads two partitions whose messages span the
/// same hour, and however far it reads one ahead of the other, no record of
/// the other is late for its window (the watermark is the smaller of the
/// two partitions' largest timestamps, not the larger).
#[test]
fn the_watermark_follows_the_slowest_partition() {
    let broker = Broker::start();
    broker.create_topic("clicks", 2);
    for (partition, key) in [(0, "a"), (1, "b")] {
        let messages: Vec<(i64, String)> = (0..3600)
            .map(|s| {
                let ts = 1_700_000_040_000 + s * 1000; // minute-aligned
                (ts, format!("{{\"key\": \"{key}\", \"ts\": {ts}}}"))
            })
            .collect();
        broker.produce_at("clicks", partition, &messages);
    }
    let dir = tempfile::tempdir().unwrap();
    let (counts, late) = (
        dir.path().join("counts.jsonl"),
        dir.path().join("late.jsonl"),
    );
    std::fs::write(
        dir.path().join("weir.toml"),
        format!(
            "[job]\nname = 'kafka-windows'\nparallelism = 1\n\
             [[source]]\nname = 'clicks'\ntype = 'kafka'\nbrokers = '{}'\ntopics = ['clicks']\nstop = 'latest'\n\
             watermark = 'bounded'\nmax-delay-ms = 0\nwatermark-interval-ms = 0\n\
             [[operator]]\nname = 'per-minute'\nbuiltin = 'count'\nkey-by = '/key'\nwindow = {{ type = 'tumbling', size-ms = 60000 }}\n\
             [[sink]]\nname = 'counts'\ntype = 'json-lines-file'\npath = '{}'\n\
             [[sink]]\nname = 'late'\ninput = 'per-minute:late'\ntype = 'json-lines-file'\npath = '{}'\n",
            broker.address,
            counts.display(),
            late.display()
        ),
    )
    .unwrap();
    let o = common::weir(&["run", dir.path().to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let late = std::fs::read_to_string(&late).unwrap();
    assert!(late.is_empty(), "{} records are late", late.lines().count());
    let mut per_key = BTreeMap::<String, (u64, u64)>::new();
    for line in std::fs::read_to_string(&counts).unwrap().lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let e = per_key
            .entry(v["key"].as_str().unwrap().to_owned())
            .or_default();
        assert_eq!(v["count"], 60, "{v}");
        e.0 += 1;
        e.1 += v["count"].as_u64().unwrap();
    }
    assert_eq!(per_key["a"], (60, 3600));
    assert_eq!(per_key["b"], (60, 3600));
}

/// Kafka to Kafka through a failure, with checkpoints: the sink flushes on
/// every checkpoint, so what a completed checkpoint covers is in the
/// output topic, and after the restart every input line is there (some
/// maybe twice: at-least-once).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_to_kafka_loses_nothing_through_a_failure() {
    let broker = Broker::start();
    broker.create_topic("in", 3);
    broker.create_topic("out", 2);
    let input: Vec<(Option<String>, String)> = (0..20_000)
        .map(|i| (Some(format!("k{i}")), format!("line {i}")))
        .collect();
    broker.produce("in", &input);
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let (_local, rest) = common::local(&data);
    let sink = format!(
        "[[sink]]\nname = 'out'\ntype = 'kafka'\nbrokers = '{}'\ntopic = 'out'\n",
        broker.address
    );
    let bundle = failing_bundle(
        dir.path(),
        "kafka-kafka-restart",
        &broker,
        "in",
        5_000,
        &sink,
    );
    let id = restarted_once(&rest, &bundle).await;
    let c = common::checkpoints_until(&rest, &id, |_| true).await;
    assert!(c.restored.is_some(), "restored from a checkpoint: {c:#?}");
    let total = broker.sizes("out", 2).values().sum::<i64>() as usize;
    assert!(total >= 20_000, "{total}");
    let got = broker.read("out", 2, total);
    let lines: std::collections::BTreeSet<String> = got
        .iter()
        .map(|(_, _, v)| serde_json::from_str::<String>(v).unwrap())
        .collect();
    assert_eq!(lines.len(), 20_000, "every line at least once");
    assert!(lines.iter().all(|l| l.starts_with("line ")));
}

/// `examples/kafka-wordcount` as its README runs it: the producer job
/// fills the topic with the word count's sample text, and the count reads
/// it to its end (`stop=latest`): exact counts.
#[test]
fn the_kafka_word_count_example_runs() {
    let broker = Broker::start();
    broker.create_topic("lines", 3);
    let brokers = format!("brokers={}", broker.address);
    let o = common::weir(&[
        "run",
        "examples/kafka-wordcount/produce",
        "--param",
        &brokers,
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("counts.jsonl");
    let output_param = format!("output={}", output.display());
    let o = common::weir(&[
        "run",
        "examples/kafka-wordcount",
        "--param",
        &brokers,
        "--param",
        "stop=latest",
        "--param",
        &output_param,
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text =
        std::fs::read_to_string(common::root().join("examples/wordcount/data/sample.txt")).unwrap();
    let mut expected = BTreeMap::new();
    for w in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        *expected.entry(w.to_lowercase()).or_insert(0u64) += 1;
    }
    assert!(expected.len() > 10);
    assert_eq!(final_counts(&output), expected);
}

/// A job that fails before its first checkpoint completes restarts from
/// the beginning and finishes: its checkpoints are not triggered while a
/// source subtask of the new attempt is still opening its source (a Kafka
/// source asks the brokers for its partitions first), so none waits for a
/// barrier that subtask never got.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_failing_before_its_first_checkpoint_finishes_after_a_restart() {
    let broker = Broker::start();
    broker.create_topic("in", 3);
    let input: Vec<(Option<String>, String)> =
        (0..5_000).map(|i| (None, format!("line {i}"))).collect();
    broker.produce("in", &input);
    broker.create_topic("out", 2);
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let (_local, rest) = common::local(&data);
    let sink = format!(
        "[[sink]]\nname = 'out'\ntype = 'kafka'\nbrokers = '{}'\ntopic = 'out'\n",
        broker.address
    );
    let bundle = failing_bundle(dir.path(), "early-failure", &broker, "in", 100, &sink);
    restarted_once(&rest, &bundle).await;
    let written: i64 = broker.sizes("out", 2).values().sum();
    assert!(written >= 5_000, "{written} of 5000 lines written");
}
