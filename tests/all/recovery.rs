//! Restoring a job from a checkpoint, in process: the word count runs,
//! checkpoint 1 is taken half-way (barriers, snapshots, uploads to a
//! checkpoint storage), the job is stopped, and a new attempt restored
//! from the checkpoint finishes the input. Its counts go on from the
//! checkpoint's (no word counted twice, none lost), its sources resume from
//! their positions, and its final counts equal a run without failures —
//! with the state in memory and in RocksDB.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use weir_coordinator::{Submission, plan};
use weir_model::checkpoint::{CheckpointMetadata, SubtaskState};
use weir_model::fault_tolerance::StateBackendKind;
use weir_model::{Barrier, CheckpointKind, CheckpointMode, JobGraph, Manifest};
use weir_worker::checkpoint::CheckpointChannels;
use weir_worker::checkpoint::restore::Restore;
use weir_worker::checkpoint::uploader::Uploader;
use weir_worker::state::StateSetup;
use weir_worker::{LocalJob, WasmOperatorFactory, run_job};

use crate::runtime;

const MANIFEST: &str = r#"
[job]
name = "restored"
[params]
output = {}
[[source]]
name = "lines"
type = "generator"
pattern = "words"
count = "4000"
rate = "2500"
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
"#;

/// Per word, the counts a run wrote, in order.
fn counts(path: &std::path::Path) -> BTreeMap<String, Vec<u64>> {
    let mut out: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for line in std::fs::read_to_string(path).unwrap_or_default().lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        out.entry(v["word"].as_str().unwrap().to_owned())
            .or_default()
            .push(v["count"].as_u64().unwrap());
    }
    out
}

fn graph(output: &std::path::Path, backend: StateBackendKind) -> JobGraph {
    let rt = runtime();
    let component =
        weir_host::JobComponents::from_file(&rt, &weir_tests::guest("wordcount")).unwrap();
    let manifest = format!(
        "{MANIFEST}\n[state]\nbackend = \"{}\"\n",
        match backend {
            StateBackendKind::Memory => "memory",
            StateBackendKind::RocksDb => "rocksdb",
        }
    );
    let submission = Submission {
        params: vec![("output".into(), output.display().to_string())],
        parallelism: Some(2),
        builtin_params: Vec::new(),
    };
    plan(
        &Manifest::parse(&manifest).unwrap(),
        &submission,
        &component.exported(),
    )
    .unwrap()
}

fn job(graph: &JobGraph, state: StateSetup) -> LocalJob {
    let rt = runtime();
    let component =
        weir_host::JobComponents::from_file(&rt, &weir_tests::guest("wordcount")).unwrap();
    let params = graph.params.clone().into_iter().collect();
    LocalJob::new(
        graph.clone(),
        Arc::new(WasmOperatorFactory {
            runtime: rt,
            components: component,
            params,
            state,
            attempt: 0,
        }),
    )
}

async fn restored_counts_go_on_from_the_checkpoint(backend: StateBackendKind) {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let url = weir_model::storage::file_url(&dir.path().join("storage")).unwrap();
    let store = weir_model::storage::open(&url).unwrap();

    // The run without failures: the counts to end with.
    let golden = dir.path().join("golden.jsonl");
    let g = graph(&golden, backend);
    run_job(job(&g, StateSetup::for_job(&g, "golden", backend, &data)))
        .await
        .unwrap();
    let expected: BTreeMap<String, u64> = counts(&golden)
        .into_iter()
        .map(|(w, c)| (w, *c.iter().max().unwrap()))
        .collect();

    // Attempt 0: checkpoint 1 half-way, then stopped.
    let first = dir.path().join("first.jsonl");
    let g = graph(&first, backend);
    let mut attempt0 = job(&g, StateSetup::for_job(&g, "job", backend, &data));
    let (channels, mut acks) = CheckpointChannels::new(data.join("snapshots"));
    attempt0.checkpoints = Some(channels.clone());
    let cancel = attempt0.cancel.clone();
    let running = tokio::spawn(run_job(attempt0));
    tokio::time::sleep(Duration::from_millis(400)).await;
    let barrier = Barrier {
        id: 1,
        timestamp_ms: weir_host::now_ms(),
        kind: CheckpointKind::Checkpoint,
        mode: CheckpointMode::ExactlyOnce,
        aligned_timeout_ms: None,
    };
    assert_eq!(channels.trigger(barrier).told, 2, "both sources still run");
    let uploader = Uploader::new(store.clone(), "job", 0, true);
    let mut subtasks = Vec::new();
    while subtasks.len() < 4 {
        let ack = tokio::time::timeout(Duration::from_secs(20), acks.recv())
            .await
            .expect("every subtask acks")
            .unwrap();
        let (task, subtask) = (ack.task, ack.subtask);
        let state = uploader.upload(ack).await.unwrap();
        if task == 1 {
            assert_eq!(state.operators.len(), 1, "the count's keyed state");
            assert!(state.state_bytes > 0);
        }
        subtasks.push(SubtaskState {
            task,
            subtask,
            state,
        });
    }
    cancel.store(true, Ordering::Relaxed);
    assert!(running.await.unwrap().is_err(), "stopped before its end");
    let checkpoint = CheckpointMetadata {
        job: "job".into(),
        id: 1,
        kind: CheckpointKind::Checkpoint,
        mode: CheckpointMode::ExactlyOnce,
        attempt: 0,
        triggered_at_ms: barrier.timestamp_ms,
        completed_at_ms: weir_host::now_ms(),
        subtasks,
        predecessor: None,
        layout: None,
    };

    // Attempt 1, from checkpoint 1.
    let second = dir.path().join("second.jsonl");
    let g = graph(&second, backend);
    let restore = Arc::new(
        Restore::download(store, checkpoint, &data.join("restore"), |_, _| true)
            .await
            .unwrap(),
    );
    let mut state = StateSetup::for_job(&g, "job", backend, &data);
    state.restore = Some(restore.clone());
    let mut attempt1 = job(&g, state);
    attempt1.restore = Some(restore);
    let report = run_job(attempt1).await.unwrap();
    let read: u64 = report
        .vertices
        .iter()
        .filter(|v| v.name == "lines")
        .map(|v| v.records_out)
        .sum();
    assert!(read < 4000 && read > 0, "the sources resumed: {read} lines");

    let got = counts(&second);
    let mut went_on = 0;
    for (word, total) in &expected {
        let Some(c) = got.get(word) else {
            panic!("`{word}` ({total}) is not counted after the restore");
        };
        // Contiguous, from the checkpoint's count on, to the total.
        let from = c[0];
        assert_eq!(c, &(from..=*total).collect::<Vec<_>>(), "`{word}`");
        if from > 1 {
            went_on += 1;
        }
    }
    assert_eq!(got.len(), expected.len());
    assert!(went_on > 0, "some counts went on from the checkpoint's");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restored_job_goes_on_from_its_checkpoint_in_memory() {
    restored_counts_go_on_from_the_checkpoint(StateBackendKind::Memory).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restored_job_goes_on_from_its_checkpoint_in_rocksdb() {
    restored_counts_go_on_from_the_checkpoint(StateBackendKind::RocksDb).await;
}
