//! A cluster as a hostile or careless user meets it, with real processes on
//! loopback: files outside the granted directories are refused by the
//! coordinator and by each worker, tokens decide who may look and who may
//! change, an open API is refused where other machines would reach it, and
//! a worker pointed at the wrong address says so and stops.

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
    registered(&rest, 1, None).await;
    (coordinator, worker, rest)
}

/// Wait until `workers` workers registered with the coordinator at `rest`.
async fn registered(rest: &str, workers: usize, token: Option<&str>) {
    let started = Instant::now();
    loop {
        let mut request = reqwest::Client::new().get(format!("{rest}/v1/cluster"));
        if let Some(t) = token {
            request = request.bearer_auth(t);
        }
        let c: serde_json::Value = request.send().await.unwrap().json().await.unwrap();
        if c["workers"].as_array().is_some_and(|w| w.len() == workers) {
            return;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "{c}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
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
    let worker = Command::new(env!("CARGO_BIN_EXE_weir"))
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
    let out = common::finish_within(
        worker,
        Duration::from_secs(30),
        "a worker pointed at the REST address",
    );
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

/// Run `weir args…` in the workspace's root with `WEIR_TOKEN` set to
/// `token` (or unset).
fn weir_with_token(token: Option<&str>, args: &[&str]) -> std::process::Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_weir"));
    command
        .args(args)
        .current_dir(common::root())
        .stdin(Stdio::null())
        .env_remove("WEIR_TOKEN");
    if let Some(t) = token {
        command.env("WEIR_TOKEN", t);
    }
    command.output().unwrap()
}

#[test]
fn a_coordinator_with_tokens_serves_only_their_holders() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    std::fs::write(
        &tokens,
        "admin admin-secret-0123456789\nread viewer-secret-0123456789\n",
    )
    .unwrap();
    let (_coordinator, rest, _) = common::coordinator(
        &dir.path().join("coordinator"),
        &["--token-file", tokens.to_str().unwrap()],
    );
    let o = weir_with_token(None, &["list", "--coordinator", &rest]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("401, unauthorized"), "{err}");
    assert!(err.contains("WEIR_TOKEN"), "{err}");
    let o = weir_with_token(
        Some("viewer-secret-0123456789"),
        &["list", "--coordinator", &rest],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = weir_with_token(
        Some("viewer-secret-0123456789"),
        &["cancel", "0123456789abcdef", "--coordinator", &rest],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("403, forbidden"), "{err}");
    let o = weir_with_token(
        Some("admin-secret-0123456789"),
        &["cancel", "0123456789abcdef", "--coordinator", &rest],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("404, job_not_found"), "{err}");
}

#[test]
fn an_open_api_is_refused_where_other_machines_reach_it() {
    let dir = tempfile::tempdir().unwrap();
    for (listen, rpc) in [("0.0.0.0:0", "127.0.0.1:0"), ("127.0.0.1:0", "0.0.0.0:0")] {
        let o = weir_with_token(
            None,
            &[
                "coordinator",
                "--listen",
                listen,
                "--rpc-listen",
                rpc,
                "--data-dir",
                dir.path().to_str().unwrap(),
            ],
        );
        assert!(!o.status.success());
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("refusing to serve 0.0.0.0:0 without a token"),
            "{err}"
        );
        assert!(err.contains("--token-file"), "{err}");
    }
    // A token that is too short to protect anything is refused too.
    let o = weir_with_token(
        Some("short"),
        &[
            "coordinator",
            "--listen",
            "127.0.0.1:0",
            "--data-dir",
            dir.path().to_str().unwrap(),
        ],
    );
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("WEIR_TOKEN: a token must be at least 16"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_with_a_token_admits_only_processes_that_present_it() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    std::fs::write(
        &tokens,
        "admin cluster-secret-0123456789\nread reader-secret-0123456789\n",
    )
    .unwrap();
    let token_file = tokens.to_str().unwrap();
    let io = dir.path().join("io");
    std::fs::create_dir_all(&io).unwrap();
    let io_dir = io.to_str().unwrap();
    let (_coordinator, rest, rpc) = common::coordinator(
        &dir.path().join("coordinator"),
        &["--token-file", token_file, "--allow-dir", io_dir],
    );
    // One slot each: a job at parallelism 2 sends data from one worker to
    // the other, which checks the token of every data connection.
    let w1_rpc = format!("127.0.0.1:{}", common::free_port());
    let worker = |name: &str, rpc_listen: &str| {
        start(&[
            "worker",
            "--coordinator",
            &rpc,
            "--rpc-listen",
            rpc_listen,
            "--slots",
            "1",
            "--data-dir",
            dir.path().join(name).to_str().unwrap(),
            "--token-file",
            token_file,
            "--allow-dir",
            io_dir,
        ])
        .0
    };
    let (_w1, _w2) = (worker("w1", &w1_rpc), worker("w2", "127.0.0.1:0"));
    // A worker without the token is refused and says why.
    let stranger = weir_with_token(
        None,
        &[
            "worker",
            "--coordinator",
            &rpc,
            "--data-dir",
            dir.path().join("w3").to_str().unwrap(),
        ],
    );
    assert!(!stranger.status.success());
    let err = String::from_utf8_lossy(&stranger.stderr);
    assert!(err.contains("refused this worker"), "{err}");
    assert!(err.contains("--token-file or WEIR_TOKEN"), "{err}");

    let o = weir_with_token(
        Some("cluster-secret-0123456789"),
        &["list", "--coordinator", &rest],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    registered(&rest, 2, Some("cluster-secret-0123456789")).await;

    // A worker's own service (the coordinator's deploys, cancels and
    // checkpoint triggers) serves the admin token only: a call without a
    // token, or with a reader's, is refused; the cluster's goes through.
    let cancel = |token: Option<&'static str>| {
        let url = format!("http://{w1_rpc}");
        async move {
            let mut client =
                weir_model::proto::task_executor_client::TaskExecutorClient::connect(url)
                    .await
                    .unwrap();
            let mut request = tonic::Request::new(weir_model::proto::CancelJobRequest {
                job_id: "no-such-job".into(),
                attempt: None,
            });
            if let Some(t) = token {
                request
                    .metadata_mut()
                    .insert("authorization", format!("Bearer {t}").parse().unwrap());
            }
            client.cancel_job(request).await.map(|_| ())
        }
    };
    for token in [
        None,
        Some("reader-secret-0123456789"),
        Some("not-a-token-0123456789"),
    ] {
        let refused = cancel(token).await.unwrap_err();
        assert_eq!(
            refused.code(),
            tonic::Code::Unauthenticated,
            "{token:?}: {refused}"
        );
    }
    if let Err(e) = cancel(Some("cluster-secret-0123456789")).await {
        assert_ne!(e.code(), tonic::Code::Unauthenticated, "{e}");
    }
    let input = io.join("in.txt");
    std::fs::write(&input, "to be or not to be\n".repeat(100)).unwrap();
    let output = io.join("out.jsonl");
    let o = weir_with_token(
        Some("cluster-secret-0123456789"),
        &[
            "submit",
            "examples/wordcount",
            "--coordinator",
            &rest,
            "--parallelism",
            "2",
            "--wait",
            "--param",
            &format!("input={}", input.display()),
            "--param",
            &format!("output={}", output.display()),
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let last_be = std::fs::read_to_string(&output)
        .unwrap()
        .lines()
        .filter(|l| l.contains("\"be\""))
        .count();
    assert_eq!(last_be, 200);
}

/// A data directory has one coordinator: a second one started on it (a
/// plain coordinator or `weir local`) refuses to start, naming the process
/// that holds it, and the first goes on serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_coordinator_on_a_data_directory_in_use_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("coordinator");
    let (first, rest, _) = common::coordinator(&data, &[]);
    for mode in ["coordinator", "local"] {
        let second = common::command()
            .args([
                mode,
                "--listen",
                "127.0.0.1:0",
                "--rpc-listen",
                "127.0.0.1:0",
                "--data-dir",
                data.to_str().unwrap(),
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let o = common::finish_within(second, Duration::from_secs(30), "the second coordinator");
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{mode}: {stderr}");
        assert!(
            stderr.contains("is in use by another coordinator")
                && stderr.contains(&format!("process {}", first.0.id())),
            "{mode}: {stderr}"
        );
    }
    let up = reqwest::get(format!("{rest}/v1/cluster")).await.unwrap();
    assert!(up.status().is_success());
}
