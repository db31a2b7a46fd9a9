//! A cluster of separate processes for the benchmarks: a coordinator and
//! worker processes started from a `weir` binary, and job submission.

use std::io::BufRead;
use std::path::Path;
use std::time::Duration;

/// A child process, killed when dropped.
pub struct Child(pub std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Start `weir args…`; returns it and the first line it prints.
pub fn spawn_weir(weir: &Path, args: &[&str]) -> anyhow::Result<(Child, String)> {
    let mut child = std::process::Command::new(weir)
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()?;
    let stdout = child.stdout.take().expect("piped");
    let mut line = String::new();
    std::io::BufReader::new(stdout).read_line(&mut line)?;
    Ok((Child(child), line))
}

/// A coordinator and `workers` worker processes of `slots` slots each,
/// started from the `weir` binary with their data under `data`.
pub struct BenchCluster {
    /// The REST address.
    pub rest: String,
    /// The worker processes.
    pub workers: Vec<Child>,
    _coordinator: Child,
}

pub async fn start_cluster(
    weir: &Path,
    data: &Path,
    workers: u32,
    slots: u32,
) -> anyhow::Result<BenchCluster> {
    let (coordinator, line) = spawn_weir(
        weir,
        &[
            "coordinator",
            "--listen",
            "127.0.0.1:0",
            "--rpc-listen",
            "127.0.0.1:0",
            "--data-dir",
            data.to_str().unwrap(),
        ],
    )?;
    let urls: Vec<String> = line
        .split_whitespace()
        .filter(|w| w.starts_with("http://"))
        .map(|w| w.trim_end_matches(',').to_owned())
        .collect();
    anyhow::ensure!(urls.len() == 2, "unexpected coordinator banner: {line}");
    let (rest, rpc) = (urls[0].clone(), urls[1].clone());
    let mut processes = Vec::new();
    for i in 0..workers {
        let d = data.join(format!("w{i}"));
        processes.push(
            spawn_weir(
                weir,
                &[
                    "worker",
                    "--coordinator",
                    &rpc,
                    "--slots",
                    &slots.to_string(),
                    "--data-dir",
                    d.to_str().unwrap(),
                ],
            )?
            .0,
        );
    }
    let http = reqwest::Client::new();
    loop {
        let c: serde_json::Value = http
            .get(format!("{rest}/v1/cluster"))
            .send()
            .await?
            .json()
            .await?;
        if c["workers"]
            .as_array()
            .is_some_and(|w| w.len() == workers as usize)
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(BenchCluster {
        rest,
        workers: processes,
        _coordinator: coordinator,
    })
}

/// Submit `bundle` with `args` to the cluster and wait for its end; returns
/// the finished job and its seconds from submission to end.
pub async fn submit_and_wait(
    weir: &Path,
    rest: &str,
    bundle: &Path,
    args: &[String],
) -> anyhow::Result<(weir_coordinator::jobs::JobInfo, f64)> {
    use weir_coordinator::jobs::{JobInfo, JobState};
    let mut waiting = args.to_vec();
    waiting.push("--wait".to_owned());
    let id = submit(weir, rest, bundle, &waiting)?;
    let job: JobInfo = reqwest::get(format!("{rest}/v1/jobs/{id}"))
        .await?
        .json()
        .await?;
    anyhow::ensure!(job.state == JobState::Finished, "{job:?}");
    let secs =
        (job.ended_at_ms.unwrap_or(job.submitted_at_ms) - job.submitted_at_ms) as f64 / 1000.0;
    Ok((job, secs))
}

/// Submit `bundle` with `args` to the cluster at `rest`; returns the job's
/// id.
pub fn submit(weir: &Path, rest: &str, bundle: &Path, args: &[String]) -> anyhow::Result<String> {
    let out = std::process::Command::new(weir)
        .args(["submit", bundle.to_str().unwrap(), "--coordinator", rest])
        .args(args)
        .output()?;
    anyhow::ensure!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .last()
        .unwrap_or_default()
        .trim()
        .to_owned())
}
