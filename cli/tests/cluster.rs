//! A coordinator and worker processes on loopback: workers register their
//! slots, a killed worker is removed within the heartbeat timeout, and the
//! coordinator keeps serving.

mod common;

use std::time::{Duration, Instant};

use common::{start, urls};

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_register_and_a_killed_one_is_removed() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("coordinator");
    let (_coordinator, line) = start(&[
        "coordinator",
        "--listen",
        "127.0.0.1:0",
        "--rpc-listen",
        "127.0.0.1:0",
        "--heartbeat-interval-ms",
        "100",
        "--heartbeat-timeout-ms",
        "1000",
        "--data-dir",
        data.to_str().unwrap(),
    ]);
    let urls = urls(&line);
    let (rest, rpc) = (urls[0].clone(), urls[1].clone());

    let w1_dir = dir.path().join("w1");
    let w2_dir = dir.path().join("w2");
    let (_w1, _) = start(&[
        "worker",
        "--coordinator",
        &rpc,
        "--slots",
        "2",
        "--data-dir",
        w1_dir.to_str().unwrap(),
    ]);
    let (mut w2, _) = start(&[
        "worker",
        "--coordinator",
        &rpc,
        "--slots",
        "2",
        "--data-dir",
        w2_dir.to_str().unwrap(),
    ]);
    let c = wait_until(&rest, "two workers register", |c| c.workers.len() == 2).await;
    assert_eq!((c.slots_total, c.slots_free), (4, 4));
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
