//! Jobs run in process: partitioning, chaining, timers at end of input, side
//! outputs to sinks, and failures that stop the job with the operator's error.

use std::sync::Arc;

use weir_coordinator::{Submission, plan};
use weir_model::Manifest;
use weir_worker::{LocalJob, WasmOperatorFactory, run_job};

use crate::{fixtures, local_job, runtime};

fn job(manifest: &str, params: &[(&str, &str)], parallelism: u32) -> anyhow::Result<LocalJob> {
    let rt = runtime();
    let component = fixtures(&rt);
    local_job(rt, component, manifest, params, parallelism)
}

const BASKETS: &str = r#"
[job]
name = "baskets"
[params]
input = {}
output = {}
late = {}
[[source]]
name = "items"
type = "json-lines-file"
path = "${input}"
[[operator]]
name = "basket"
function = "basket"
key-by = "/key"
[[sink]]
name = "out"
type = "json-lines-file"
path = "${output}"
[[sink]]
name = "late"
input = "basket:late"
type = "json-lines-file"
path = "${late}"
"#;

fn read_json_lines(path: &std::path::Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keyed_timers_fire_at_end_of_input_and_side_outputs_reach_their_sink() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.jsonl");
    let mut lines = String::new();
    for i in 0..500 {
        let item = if i % 50 == 0 { "late" } else { "thing" };
        lines.push_str(&format!(
            "{{\"key\": \"k{}\", \"item\": \"{item}\", \"ts\": {i}}}\n",
            i % 7
        ));
    }
    std::fs::write(&input, lines).unwrap();
    for parallelism in [1, 3] {
        let (output, late) = (
            dir.path().join(format!("out{parallelism}")),
            dir.path().join(format!("late{parallelism}")),
        );
        let params = [
            ("input", input.to_str().unwrap()),
            ("output", output.to_str().unwrap()),
            ("late", late.to_str().unwrap()),
        ];
        let report = run_job(job(BASKETS, &params, parallelism).unwrap())
            .await
            .unwrap();
        let items = report.vertices.iter().find(|v| v.name == "items").unwrap();
        assert_eq!(items.records_out, 500);
        // Every record's item is in exactly one emitted basket: the timers all
        // fired at the end of the input.
        let total: usize = read_json_lines(&output)
            .iter()
            .map(|b| b["items"].as_array().unwrap().len())
            .sum();
        assert_eq!(total, 500, "parallelism {parallelism}");
        assert_eq!(read_json_lines(&late).len(), 10);
    }
}

/// Baskets behind two components, so that records reach `basket` from a
/// component: a map, a filter (which passes its input on as it is), a
/// `key-by` pointer into what they emit.
const CHAINED_BASKETS: &str = r#"
[job]
name = "chained-baskets"
codec = "CODEC"
[params]
input = {}
output = {}
late = {}
[[source]]
name = "items"
type = "json-lines-file"
path = "${input}"
[[operator]]
name = "identity"
function = "identity"
[[operator]]
name = "filter"
function = "not-third"
[[operator]]
name = "basket"
function = "basket"
key-by = "/key"
[[operator]]
name = "again"
function = "identity"
input = "basket:late"
[[sink]]
name = "out"
type = "json-lines-file"
path = "${output}"
input = "basket"
[[sink]]
name = "late"
input = "again"
type = "json-lines-file"
path = "${late}"
"#;

/// What a job wrote, in a canonical order (a basket's items arrive from
/// two subtasks, in any interleaving).
fn sorted_lines(path: &std::path::Path) -> Vec<String> {
    let mut lines: Vec<String> = read_json_lines(path)
        .into_iter()
        .map(|mut v| {
            if let Some(items) = v.get_mut("items").and_then(|i| i.as_array_mut()) {
                items.sort_by_key(|i| i.to_string());
            }
            v.to_string()
        })
        .collect();
    lines.sort();
    lines
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn msgpack_between_components_gives_what_json_gives_in_fewer_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.jsonl");
    let mut lines = String::new();
    let (mut kept, mut late_kept) = (0, 0);
    for i in 0..2_000u32 {
        let item = if i % 50 == 1 { "late" } else { "thing é ~1/" };
        // Keys of several shapes: a JSON pointer must find the same key in
        // both codecs (and the same subtask for it).
        let key = match i % 4 {
            0 => format!("\"k{}\"", i % 7),
            1 => format!("{}", i % 5),
            2 => format!("{{\"a\": [{}, -1.5]}}", i % 3),
            _ => "null".to_owned(),
        };
        lines.push_str(&format!(
            "{{\"key\": {key}, \"seq\": {i}, \"item\": \"{item}\", \"ts\": {i}}}\n"
        ));
        if i % 3 != 0 {
            kept += 1;
            late_kept += usize::from(item == "late");
        }
    }
    std::fs::write(&input, lines).unwrap();
    let mut outputs = Vec::new();
    let mut bytes = Vec::new();
    for codec in ["json", "msgpack"] {
        let (output, late) = (
            dir.path().join(format!("out-{codec}")),
            dir.path().join(format!("late-{codec}")),
        );
        let params = [
            ("input", input.to_str().unwrap()),
            ("output", output.to_str().unwrap()),
            ("late", late.to_str().unwrap()),
        ];
        let manifest = CHAINED_BASKETS.replace("CODEC", codec);
        let job = job(&manifest, &params, 2).unwrap();
        let counters = job.counters.clone();
        run_job(job).await.unwrap();
        let total: usize = read_json_lines(&output)
            .iter()
            .map(|b| b["items"].as_array().unwrap().len())
            .sum();
        assert_eq!(total, kept, "{codec}: every kept item once");
        let late_records = read_json_lines(&late);
        assert_eq!(late_records.len(), late_kept, "{codec}");
        assert!(
            late_records.iter().all(|r| r == "late"),
            "{codec}: {late_records:?}"
        );
        outputs.push((sorted_lines(&output), sorted_lines(&late)));
        let out_of = |name: &str| -> u64 {
            let (_, subtasks) = counters.vertices.iter().find(|(n, _)| n == name).unwrap();
            subtasks
                .iter()
                .map(|c| c.bytes_out.load(std::sync::atomic::Ordering::Relaxed))
                .sum()
        };
        bytes.push((out_of("identity"), out_of("filter")));
    }
    assert!(
        outputs[0] == outputs[1],
        "the results differ between the codecs: {:?}",
        outputs[0].0.iter().zip(&outputs[1].0).find(|(a, b)| a != b)
    );
    let ((json_map, json_filter), (packed_map, packed_filter)) = (bytes[0], bytes[1]);
    assert!(
        packed_map < json_map * 9 / 10 && packed_filter < json_filter * 9 / 10,
        "MessagePack between components: {packed_map} < {json_map}, {packed_filter} < {json_filter}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_operator_fails_the_job_with_its_error() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.txt");
    std::fs::write(&input, "a\nb\nboom\nc\n".repeat(100)).unwrap();
    let manifest = r#"
        [job]
        name = "doomed"
        [params]
        input = {}
        [[source]]
        name = "lines"
        type = "text-file"
        path = "${input}"
        [[operator]]
        name = "explode"
        function = "trap"
        [[sink]]
        name = "out"
        type = "json-lines-file"
        path = "/dev/null"
    "#;
    let err = run_job(job(manifest, &[("input", input.to_str().unwrap())], 2).unwrap())
        .await
        .unwrap_err();
    let shown = format!("{err:#}");
    assert!(
        shown.contains("job `doomed`, operator `explode`"),
        "{shown}"
    );
    assert!(shown.contains("boom: this record is bad"), "{shown}");
}

#[test]
fn the_plan_refuses_what_the_component_cannot_run() {
    let missing = BASKETS.replace("function = \"basket\"", "function = \"no-such-thing\"");
    let err = job(
        &missing,
        &[("input", "i"), ("output", "o"), ("late", "l")],
        1,
    )
    .err()
    .unwrap();
    assert!(
        err.to_string()
            .contains("`no-such-thing`, which the component does not export"),
        "{err}"
    );
    let unkeyed = BASKETS.replace("key-by = \"/key\"\n", "");
    let err = job(
        &unkeyed,
        &[("input", "i"), ("output", "o"), ("late", "l")],
        1,
    )
    .err()
    .unwrap();
    assert!(err.to_string().contains("needs `key-by`"), "{err}");
    let err = job(BASKETS, &[("input", "i"), ("output", "o")], 1)
        .err()
        .unwrap();
    assert!(
        err.to_string().contains("missing parameter `late`"),
        "{err}"
    );
    let err = job(
        BASKETS,
        &[
            ("input", "i"),
            ("output", "o"),
            ("late", "l"),
            ("colour", "red"),
        ],
        1,
    )
    .err()
    .unwrap();
    assert!(
        err.to_string().contains("unknown parameter `colour`"),
        "{err}"
    );
    let err = job(
        BASKETS,
        &[("input", "i"), ("output", "o"), ("late", "l")],
        0,
    )
    .err()
    .unwrap();
    assert!(err.to_string().contains("parallelism"), "{err}");
}

/// The word count split over two "processes" (two data servers and two
/// partial runs in this test): every record between the two tasks crosses a
/// TCP channel with credit-based flow control, and the counts are exact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_split_over_two_places_exchanges_data_over_tcp() {
    use std::collections::{BTreeMap, HashMap};
    use weir_worker::network::DataServer;
    use weir_worker::{Placement, run_placed};

    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.txt");
    let mut text = String::new();
    for i in 0..3000 {
        text.push_str(&format!("w{} w{} Same\n", i % 17, i % 5));
    }
    std::fs::write(&input, &text).unwrap();
    let output = dir.path().join("out.jsonl");

    let rt = runtime();
    let component =
        weir_host::JobComponents::from_file(&rt, &weir_tests::guest("wordcount")).unwrap();
    let manifest = Manifest::parse(
        &std::fs::read_to_string(weir_tests::workspace_root().join("examples/wordcount/weir.toml"))
            .unwrap(),
    )
    .unwrap();
    let submission = Submission {
        params: vec![
            ("input".into(), input.display().to_string()),
            ("output".into(), output.display().to_string()),
        ],
        parallelism: Some(2),
        builtin_params: vec![("bundle_dir".into(), ".".into())],
    };
    let graph = plan(&manifest, &submission, &component.exported()).unwrap();
    assert_eq!(graph.tasks().len(), 2, "lines+split, then count+counts");

    let (a, b) = (
        Arc::new(DataServer::bind("127.0.0.1:0").await.unwrap()),
        Arc::new(DataServer::bind("127.0.0.1:0").await.unwrap()),
    );
    // Reading: subtask 0 at B, 1 at A. Counting: both at A.
    let at: HashMap<(usize, u32), std::net::SocketAddr> = HashMap::from([
        ((0, 0), b.addr()),
        ((0, 1), a.addr()),
        ((1, 0), a.addr()),
        ((1, 1), a.addr()),
    ]);
    let half = |server: &Arc<DataServer>| {
        let params = graph.params.clone().into_iter().collect();
        let factory = Arc::new(WasmOperatorFactory {
            runtime: rt.clone(),
            components: component.clone(),
            params,
            state: weir_worker::state::StateSetup::in_memory(),
            attempt: 0,
        });
        let job = LocalJob::new(graph.clone(), factory);
        let placement = Placement {
            job_id: "split-job".into(),
            server: server.clone(),
            at: at.clone(),
        };
        run_placed(job, Some(placement))
    };
    let (ra, rb) = tokio::join!(half(&a), half(&b));
    let (ra, rb) = (ra.unwrap(), rb.unwrap());
    let records = |r: &weir_worker::JobReport, name: &str| {
        r.vertices
            .iter()
            .find(|v| v.name == name)
            .unwrap()
            .records_in
    };
    assert_eq!(records(&ra, "count") + records(&rb, "count"), 9000);
    assert_eq!(records(&rb, "count"), 0, "B counts nothing");
    assert!(
        records(&rb, "split") > 0 && records(&ra, "split") > 0,
        "both read"
    );

    let mut expected: BTreeMap<String, u64> = BTreeMap::new();
    for w in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        *expected.entry(w.to_lowercase()).or_default() += 1;
    }
    let mut got: BTreeMap<String, u64> = BTreeMap::new();
    for line in std::fs::read_to_string(&output).unwrap().lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let e = got
            .entry(v["word"].as_str().unwrap().to_owned())
            .or_default();
        *e = (*e).max(v["count"].as_u64().unwrap());
    }
    assert_eq!(got, expected);
}

/// Checkpoint barriers injected at the sources of the word count split over
/// two places pass through the chained operators, the local channels and
/// the TCP channels alike: every subtask acks every checkpoint (the sources
/// with their split positions, the sink's task with its pre-commit), and
/// the counts stay exact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn barriers_cross_chains_local_and_tcp_channels_and_every_subtask_acks() {
    use std::collections::{BTreeMap, BTreeSet, HashMap};
    use weir_model::{Barrier, CheckpointKind, CheckpointMode};
    use weir_worker::checkpoint::CheckpointChannels;
    use weir_worker::network::DataServer;
    use weir_worker::{Placement, run_placed};

    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("out.jsonl");
    let manifest = Manifest::parse(
        r#"
[job]
name = "barriers"
[params]
output = {}
[[source]]
name = "lines"
type = "generator"
pattern = "words"
count = "6000"
rate = "4000"
[[operator]]
name = "split"
function = "split-words"
[[operator]]
name = "count"
function = "count"
key-by = "value"
[[sink]]
name = "counts"
type = "json-lines-file"
path = "${output}"
"#,
    )
    .unwrap();
    let rt = runtime();
    let component =
        weir_host::JobComponents::from_file(&rt, &weir_tests::guest("wordcount")).unwrap();
    let submission = Submission {
        params: vec![("output".into(), output.display().to_string())],
        parallelism: Some(2),
        builtin_params: Vec::new(),
    };
    let graph = plan(&manifest, &submission, &component.exported()).unwrap();
    let (a, b) = (
        Arc::new(DataServer::bind("127.0.0.1:0").await.unwrap()),
        Arc::new(DataServer::bind("127.0.0.1:0").await.unwrap()),
    );
    // Each place reads one split and counts one key range: half of the
    // words cross over TCP, half stay on local channels.
    let at: HashMap<(usize, u32), std::net::SocketAddr> = HashMap::from([
        ((0, 0), a.addr()),
        ((0, 1), b.addr()),
        ((1, 0), a.addr()),
        ((1, 1), b.addr()),
    ]);
    let mut wiring = Vec::new();
    let mut halves = Vec::new();
    for server in [&a, &b] {
        let params = graph.params.clone().into_iter().collect();
        let factory = Arc::new(WasmOperatorFactory {
            runtime: rt.clone(),
            components: component.clone(),
            params,
            state: weir_worker::state::StateSetup::in_memory(),
            attempt: 0,
        });
        let mut job = LocalJob::new(graph.clone(), factory);
        let (channels, acks) = CheckpointChannels::new(dir.path().join("snapshots"));
        job.checkpoints = Some(channels.clone());
        wiring.push((channels, acks));
        let placement = Placement {
            job_id: "barrier-job".into(),
            server: server.clone(),
            at: at.clone(),
        };
        halves.push(tokio::spawn(run_placed(job, Some(placement))));
    }
    // A checkpoint every 150 ms, completed (as the checkpoint coordinator
    // would) once every subtask acknowledged it, or had finished in a
    // completed one: the sources run for ~0.75 s, and then every subtask
    // waits for a checkpoint after its end to complete before it ends.
    let all: BTreeSet<(usize, u32)> = [(0, 0), (0, 1), (1, 0), (1, 1)].into();
    let mut triggered = Vec::new();
    let mut acked: BTreeMap<u64, BTreeMap<(usize, u32), bool>> = BTreeMap::new();
    let mut finished: BTreeSet<(usize, u32)> = BTreeSet::new();
    let mut completed: BTreeSet<u64> = BTreeSet::new();
    let started = std::time::Instant::now();
    let mut id = 0u64;
    while !halves.iter().all(|h| h.is_finished()) {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "the job ends: {acked:?}"
        );
        id += 1;
        tokio::time::sleep(std::time::Duration::from_millis(150)).await;
        let barrier = Barrier {
            id,
            timestamp_ms: weir_host::now_ms(),
            kind: CheckpointKind::Checkpoint,
            mode: CheckpointMode::ExactlyOnce,
            aligned_timeout_ms: None,
        };
        let told: usize = wiring.iter().map(|(c, _)| c.trigger(barrier).told).sum();
        if told == 2 {
            triggered.push(id);
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        for (_, acks) in &mut wiring {
            while let Ok(ack) = acks.try_recv() {
                let subtask = (ack.task, ack.subtask);
                match ack.task {
                    0 => {
                        assert_eq!(ack.snapshot.sources.len(), 1, "{ack:?}");
                        assert!(ack.snapshot.sinks.is_empty());
                    }
                    _ => {
                        assert!(ack.snapshot.sources.is_empty());
                        assert_eq!(ack.snapshot.sinks.len(), 1, "{ack:?}");
                    }
                }
                let previous = acked
                    .entry(ack.checkpoint)
                    .or_default()
                    .insert(subtask, ack.snapshot.finished);
                assert!(previous.is_none(), "acked twice");
            }
        }
        let ready: Vec<u64> = acked
            .iter()
            .filter(|(c, acks)| {
                !completed.contains(c)
                    && all
                        .iter()
                        .all(|s| acks.contains_key(s) || finished.contains(s))
            })
            .map(|(c, _)| *c)
            .collect();
        for c in ready {
            completed.insert(c);
            finished.extend(acked[&c].iter().filter(|(_, f)| **f).map(|(s, _)| *s));
            for (channels, _) in &wiring {
                channels.complete(c);
            }
        }
    }
    for h in halves {
        h.await.unwrap().unwrap();
    }
    assert!(
        triggered.len() >= 2,
        "the sources ran through the triggers: {triggered:?}"
    );
    assert!(
        finished == all,
        "every subtask ended after a completed checkpoint that holds it finished: {acked:?}"
    );
    // The first checkpoints, taken while the sources ran, hold every
    // subtask's acknowledgement.
    assert_eq!(
        acked
            .get(&triggered[0])
            .map(|a| a.keys().copied().collect::<BTreeSet<_>>()),
        Some(all.clone()),
        "{acked:?}"
    );

    // The counts are those of the words generated.
    let mut got: BTreeMap<String, u64> = BTreeMap::new();
    for line in crate::committed_output(&output).lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let e = got
            .entry(v["word"].as_str().unwrap().to_owned())
            .or_default();
        *e = (*e).max(v["count"].as_u64().unwrap());
    }
    assert_eq!(got.values().sum::<u64>(), 6000 * 8, "8 words a line");
}

/// The word count with its counts in RocksDB (`[state] backend =
/// "rocksdb"`) at parallelism 3: exact counts, and the databases' files
/// are gone when the job ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_word_count_on_rocksdb_counts_exactly_and_leaves_no_files() {
    use std::collections::BTreeMap;
    use weir_worker::state::StateSetup;

    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.txt");
    let mut text = String::new();
    for i in 0..4000 {
        text.push_str(&format!("w{} w{} Same\n", i % 101, i % 7));
    }
    std::fs::write(&input, &text).unwrap();
    let output = dir.path().join("out.jsonl");
    let manifest =
        std::fs::read_to_string(weir_tests::workspace_root().join("examples/wordcount/weir.toml"))
            .unwrap()
            + "\n[state]\nbackend = \"rocksdb\"\n";
    let rt = runtime();
    let component =
        weir_host::JobComponents::from_file(&rt, &weir_tests::guest("wordcount")).unwrap();
    let submission = Submission {
        params: vec![
            ("input".into(), input.display().to_string()),
            ("output".into(), output.display().to_string()),
        ],
        parallelism: Some(3),
        builtin_params: vec![("bundle_dir".into(), ".".into())],
    };
    let graph = plan(
        &Manifest::parse(&manifest).unwrap(),
        &submission,
        &component.exported(),
    )
    .unwrap();
    let data = dir.path().join("worker");
    let state = StateSetup::for_job(
        &graph,
        "rocks-job",
        weir_model::fault_tolerance::StateBackendKind::Memory,
        &data,
    );
    assert_eq!(
        state.backend,
        weir_model::fault_tolerance::StateBackendKind::RocksDb,
        "the manifest's choice wins over the worker's default"
    );
    let params = graph.params.clone().into_iter().collect();
    let factory = Arc::new(WasmOperatorFactory {
        runtime: rt.clone(),
        components: component,
        params,
        state: state.clone(),
        attempt: 0,
    });
    run_job(LocalJob::new(graph, factory)).await.unwrap();

    let mut expected: BTreeMap<String, u64> = BTreeMap::new();
    for w in text.split_whitespace() {
        *expected.entry(w.to_lowercase()).or_default() += 1;
    }
    let mut got: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for line in std::fs::read_to_string(&output).unwrap().lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        got.entry(v["word"].as_str().unwrap().to_owned())
            .or_default()
            .push(v["count"].as_u64().unwrap());
    }
    assert_eq!(got.len(), expected.len());
    for (word, counts) in &got {
        let n = expected[word];
        assert_eq!(
            counts,
            &(1..=n).collect::<Vec<_>>(),
            "{word}: 1..{n} in order"
        );
    }
    // Each instance removed its database.
    let left: Vec<_> = std::fs::read_dir(&state.dir)
        .map(|d| d.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "left behind: {left:?}");
    state.remove();
    assert!(!state.dir.exists());
}
