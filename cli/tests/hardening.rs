//! A cluster as a hostile or careless user meets it, with real processes on
//! loopback: files outside the granted directories are refused by the
//! coordinator and by each worker, and a worker pointed at the wrong
//! address says so and stops.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{start, weir};

/// A coordinator granting `allowed` and a worker with its default (its
/// data directory's `io/`), registered.
async fn coordinator_and_worker(
    dir: &std::path::Path,
    allowed: &std::path::Path,
) -> (common::Proc, common::Proc, String) {
    let (coordinator, rest, rpc) = common::coordinator(
        &dir.join("coordinator"),
        &["--allow-dir", allowed.to_str().unwrap()],
    );
    let (worker, _) = start(&[
        "worker",
        "--coordinator",
        &rpc,
        "--data-dir",
        dir.join("worker").to_str().unwrap(),
    ]);
    let started = Instant::now();
    loop {
        let c: serde_json::Value = reqwest::get(format!("{rest}/v1/cluster"))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if c["workers"].as_array().is_some_and(|w| w.len() == 1) {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "{c}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    (coordinator, worker, rest)
}

fn submit(rest: &str, input: &std::path::Path, output: &std::path::Path) -> (bool, String) {
    let o = weir(&[
        "submit",
        "examples/wordcount",
        "--coordinator",
        rest,
        "--wait",
        "--param",
        &format!("input={}", input.display()),
        "--param",
        &format!("output={}", output.display()),
    ]);
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_coordinator_and_every_worker_refuse_files_they_do_not_grant() {
    let dir = tempfile::tempdir().unwrap();
    let shared = dir.path().join("shared");
    std::fs::create_dir_all(&shared).unwrap();
    let (_coordinator, _worker, rest) = coordinator_and_worker(dir.path(), &shared).await;

    // Outside what the coordinator grants: refused at submission.
    let (ok, err) = submit(
        &rest,
        std::path::Path::new("/etc/passwd"),
        &shared.join("out.jsonl"),
    );
    assert!(!ok);
    assert!(err.contains("path_not_allowed"), "{err}");
    assert!(err.contains("\"/etc/passwd\" is outside"), "{err}");
    assert!(
        err.contains(&shared.canonicalize().unwrap().display().to_string()),
        "{err}"
    );

    // Granted by the coordinator but not by the worker that would open
    // it: the worker refuses the deployment, and nothing runs.
    let input = shared.join("in.txt");
    std::fs::write(&input, "a b a\n").unwrap();
    let (ok, err) = submit(&rest, &input, &shared.join("out2.jsonl"));
    assert!(!ok);
    assert!(err.contains("path_not_allowed"), "{err}");
    assert!(err.contains("worker `"), "{err}");
    let worker_io = dir.path().join("worker/io").canonicalize().unwrap();
    assert!(err.contains(&worker_io.display().to_string()), "{err}");
    assert!(!shared.join("out2.jsonl").exists());
}

#[test]
fn a_worker_pointed_at_the_rest_api_says_so_and_stops() {
    let dir = tempfile::tempdir().unwrap();
    let (_coordinator, rest, _) = common::coordinator(&dir.path().join("coordinator"), &[]);
    let mut worker = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args([
            "worker",
            "--coordinator",
            &rest,
            "--data-dir",
            dir.path().join("worker").to_str().unwrap(),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while worker.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(30) {
            worker.kill().unwrap();
            panic!("the worker kept trying the REST address for 30 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = worker.wait_with_output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("REST address"), "{err}");
    assert!(err.contains("--rpc-listen"), "{err}");
    assert_eq!(
        err.matches("does not answer as").count(),
        1,
        "said once: {err}"
    );
}
