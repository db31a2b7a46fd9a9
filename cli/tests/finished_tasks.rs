//! Checkpoints after tasks finish (Flink's FLIP-147), on `weir local`: a
//! source subtask that reads all its input no longer stops checkpointing
//! for the rest of the job, a restore after it finished reads it no
//! second time, and a bounded job ends with a final checkpoint that
//! commits its sinks.

mod common;

use std::io::Write;

use common::{checkpoints_until, exactly_once, job_until, submit};
use weir_coordinator::jobs::JobState;

/// `n` JSON lines `{"k": "<prefix><i % keys>"}` appended to `path`.
fn append(path: &std::path::Path, prefix: &str, keys: u32, n: u32) {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    let mut text = String::new();
    for i in 0..n {
        text.push_str(&format!("{{\"k\":\"{prefix}{}\"}}\n", i % keys));
    }
    f.write_all(text.as_bytes()).unwrap();
    f.sync_all().unwrap();
}

/// A bounded file read beside a followed one (which never ends), and the
/// followed file's subtask 0 (only the last subtask follows the file's
/// end): their subtasks finish early, and checkpoints still complete, so
/// what is appended to the followed file is committed while the job runs,
/// each count exactly once. Before checkpoints went on past finished
/// subtasks, the first of them to finish stopped every later checkpoint,
/// and nothing appended was ever committed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_source_beside_an_unbounded_one_does_not_stop_checkpoints() {
    let dir = tempfile::tempdir().unwrap();
    let (_local, rest) = common::local(&dir.path().join("data"));
    let bounded = dir.path().join("bounded.jsonl");
    let followed = dir.path().join("followed.jsonl");
    append(&bounded, "b", 10, 500);
    append(&followed, "s", 5, 100);
    let output = dir.path().join("out");
    let bundle = common::bundle(
        dir.path(),
        "union",
        "wordcount",
        &format!(
            "[job]\nname = 'union'\nparallelism = 2\n[component]\npath = 'c.wasm'\n\
             [[source]]\nname = 'bounded'\ntype = 'json-lines-file'\npath = '{}'\n\
             [[source]]\nname = 'followed'\ntype = 'json-lines-file'\npath = '{}'\nfollow = true\n\
             [[operator]]\nname = 'count'\nbuiltin = 'count'\nkey-by = '/k'\ninputs = ['bounded', 'followed']\n\
             [[sink]]\nname = 'counts'\ntype = 'json-lines-file'\npath = '{}'\n\
             [checkpoint]\ninterval-ms = 100\n",
            bounded.display(),
            followed.display(),
            output.display()
        ),
    );
    let id = submit(&rest, &bundle);
    let first = checkpoints_until(&rest, &id, |c| c.counts.completed >= 2).await;
    // Appended after the bounded input has been read to its end.
    append(&followed, "s", 5, 200);
    let want = |k: &str| if k.starts_with('b') { 50 } else { 60 };
    let started = std::time::Instant::now();
    loop {
        let got = common::committed_counts(&output);
        if got.len() == 15 && got.iter().all(|(k, c)| c.len() as u64 == want(k)) {
            break;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "the appended records are committed: {got:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let later = checkpoints_until(&rest, &id, |c| {
        c.counts.completed > first.counts.completed + 2
    })
    .await;
    assert_eq!(later.counts.failed, 0, "{later:#?}");
    for (k, c) in common::committed_counts(&output) {
        assert_eq!(
            c,
            (1..=want(&k)).collect::<Vec<_>>(),
            "`{k}`: each count once"
        );
    }
    common::weir(&["cancel", &id, "--coordinator", &rest]);
}

/// A bounded source that ends at once beside one that reads for seconds,
/// and an operator that fails once, late: the attempt after the failure
/// restores a checkpoint taken after the short source finished, reads it
/// no second time and loses nothing of the other; the job ends with a
/// final checkpoint, every subtask finished in it, that commits the last
/// parts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restore_after_a_source_finished_reads_it_once_and_a_final_checkpoint_commits() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let (_local, rest) = common::local(&data);
    let output = dir.path().join("out");
    let bundle = common::bundle(
        dir.path(),
        "short-and-long",
        "test-guests",
        &format!(
            "[job]\nname = 'short-and-long'\nparallelism = 2\n[component]\npath = 'c.wasm'\n\
             [params]\nfail-at = '2500'\nfail-attempts = '1'\n\
             [[source]]\nname = 'short'\ntype = 'generator'\npattern = 'words'\ncount = '400'\nrate = '100000'\n\
             [[source]]\nname = 'long'\ntype = 'generator'\npattern = 'words'\ncount = '6000'\nrate = '1000'\n\
             [[operator]]\nname = 'fail'\nfunction = 'fail-once'\ninputs = ['short', 'long']\n\
             [[operator]]\nname = 'words'\nfunction = 'words'\n\
             [[operator]]\nname = 'count'\nfunction = 'count-words'\nkey-by = 'value'\n\
             [[sink]]\nname = 'counts'\ntype = 'json-lines-file'\npath = '{}'\n\
             [checkpoint]\ninterval-ms = 100\n\
             [restart]\nstrategy = 'fixed-delay'\nattempts = 3\ndelay-ms = 100\n",
            output.display()
        ),
    );
    let id = submit(&rest, &bundle);
    let ended = job_until(&rest, &id, "the job ends", |j| j.state.is_terminal()).await;
    assert_eq!(ended.state, JobState::Finished, "{ended:#?}");
    assert_eq!((ended.attempt, ended.restarts), (1, 1), "{ended:#?}");
    assert!(
        ended.exceptions[0].message.contains("injected failure"),
        "{:#?}",
        ended.exceptions
    );
    let c = checkpoints_until(&rest, &id, |_| true).await;
    let restored = c.restored.clone().expect("restored from a checkpoint");
    assert!(restored.id >= 2, "{c:#?}");
    exactly_once(&output, 6400 * 8, |v| {
        (v[0].as_str().unwrap().to_owned(), v[1].as_u64().unwrap())
    });
    // The checkpoint kept at the end is the final one: every subtask
    // finished when it took it.
    let storage = data.join("checkpoints").join(&id);
    let metadata: Vec<weir_model::checkpoint::CheckpointMetadata> = std::fs::read_dir(&storage)
        .unwrap()
        .filter_map(|e| {
            let path = e.unwrap().path().join("_metadata");
            let text = std::fs::read_to_string(path).ok()?;
            Some(serde_json::from_str(&text).unwrap())
        })
        .collect();
    let last = metadata
        .iter()
        .max_by_key(|m| m.id)
        .expect("a checkpoint is kept");
    assert!(last.id > restored.id, "{last:#?}");
    assert!(
        last.subtasks.iter().all(|s| s.state.finished),
        "every subtask finished in the final checkpoint: {last:#?}"
    );
}

/// A checkpointed job whose exactly-once file sink names `/dev/null`
/// writes straight through to it (it discards), and ends: it used to be
/// accepted and then restart for ever on "cannot create /dev/null".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checkpointed_job_writing_to_dev_null_discards_and_ends() {
    let dir = tempfile::tempdir().unwrap();
    let (_local, rest) = common::local(&dir.path().join("data"));
    let bundle = common::bundle(
        dir.path(),
        "discard",
        "wordcount",
        "[job]\nname = 'discard'\nparallelism = 2\n[component]\npath = 'c.wasm'\n\
         [[source]]\nname = 'lines'\ntype = 'generator'\npattern = 'words'\ncount = '2000'\nrate = '4000'\n\
         [[operator]]\nname = 'split'\nfunction = 'split-words'\n\
         [[operator]]\nname = 'count'\nfunction = 'count'\nkey-by = 'value'\n\
         [[sink]]\nname = 'counts'\ntype = 'json-lines-file'\npath = '/dev/null'\n\
         [checkpoint]\ninterval-ms = 100\n",
    );
    let id = submit(&rest, &bundle);
    let ended = job_until(&rest, &id, "the job ends", |j| j.state.is_terminal()).await;
    assert_eq!(ended.state, JobState::Finished, "{ended:#?}");
    assert_eq!(ended.restarts, 0, "{ended:#?}");
    let c = checkpoints_until(&rest, &id, |_| true).await;
    assert!(c.counts.completed >= 1, "{c:#?}");
}
