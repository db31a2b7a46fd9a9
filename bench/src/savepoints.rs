//! Savepoints of a large RocksDB state on a cluster of processes (a
//! coordinator and three one-slot workers): the time and size of a
//! savepoint and of a stop with a savepoint, the time a job started from it
//! takes to restore the state (to its first completed checkpoint) at the
//! same and at a new parallelism, and the pause of an upgrade of a job with
//! small state (`weir upgrade`: from the stop's barrier to the new job
//! running).

use std::path::Path;
use std::time::{Duration, Instant};

use weir_coordinator::checkpoint::CheckpointStats;
use weir_coordinator::jobs::JobInfo;
use weir_coordinator::savepoint::triggers::{SavepointStatus, TriggerState};

use crate::cluster::{start_cluster, submit};
use crate::fault_tolerance::bundle;

async fn get<T: serde::de::DeserializeOwned>(url: String) -> anyhow::Result<T> {
    Ok(reqwest::get(url).await?.json().await?)
}

/// The job that keeps `value_bytes` per key for `keys` keys, then goes on
/// updating a twentieth of them (its generator never ends).
fn state_bundle(
    data: &Path,
    name: &str,
    keys: u64,
    value_bytes: u64,
) -> anyhow::Result<std::path::PathBuf> {
    bundle(
        data,
        name,
        "test-guests",
        &format!(
            "[job]\nname = 'savepoint-state'\nparallelism = 2\n\
             [params]\nkeys = '{keys}'\nhot-keys = '{}'\nvalue-bytes = '{value_bytes}'\n\
             [[source]]\nname = 'numbers'\ntype = 'generator'\npattern = 'sequence'\nrate = '200000'\n\
             [[operator]]\nname = 'spread'\nfunction = 'spread'\n\
             [[operator]]\nname = 'pad'\nfunction = 'pad'\nkey-by = 'key'\n\
             [[sink]]\nname = 'out'\ntype = 'json-lines-file'\npath = '/dev/null'\n\
             [state]\nbackend = 'rocksdb'\n\
             [checkpoint]\ninterval-ms = 500\n",
            (keys / 20).max(1)
        ),
    )
}

/// Records the `pad` vertex has taken in.
async fn padded(rest: &str, job: &str) -> anyhow::Result<u64> {
    let j: JobInfo = get(format!("{rest}/v1/jobs/{job}")).await?;
    Ok(j.vertices
        .iter()
        .filter(|v| v.name == "pad")
        .map(|v| v.records_in)
        .sum())
}

/// Trigger a savepoint (`stop`: and stop the job) and wait for it: its
/// status and how long it took.
async fn savepoint(rest: &str, job: &str, stop: bool) -> anyhow::Result<(SavepointStatus, f64)> {
    let started = Instant::now();
    let what = if stop { "stop" } else { "savepoints" };
    let t: SavepointStatus = reqwest::Client::new()
        .post(format!("{rest}/v1/jobs/{job}/{what}"))
        .send()
        .await?
        .json()
        .await?;
    loop {
        let s: SavepointStatus =
            get(format!("{rest}/v1/jobs/{job}/savepoints/{}", t.trigger_id)).await?;
        match s.status {
            TriggerState::Completed => return Ok((s, started.elapsed().as_secs_f64())),
            TriggerState::Failed => anyhow::bail!("the savepoint failed: {:?}", s.error),
            TriggerState::InProgress => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
}

/// Start `bundle` at `parallelism` from the savepoint in `location` and
/// wait until it completes a checkpoint (it has its state): seconds.
async fn restore(
    weir: &Path,
    rest: &str,
    bundle: &Path,
    parallelism: u32,
    location: &str,
) -> anyhow::Result<(String, f64)> {
    let started = Instant::now();
    let id = submit(
        weir,
        rest,
        bundle,
        &[
            "-p".into(),
            parallelism.to_string(),
            "--from-savepoint".into(),
            location.into(),
        ],
    )?;
    loop {
        let c: CheckpointStats = get(format!("{rest}/v1/jobs/{id}/checkpoints")).await?;
        if c.counts.completed > 0 {
            return Ok((id, started.elapsed().as_secs_f64()));
        }
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(600),
            "the restored job completes no checkpoint"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Bytes of the files under `dir`.
fn du(dir: &Path) -> u64 {
    let mut n = 0;
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        n += if p.is_dir() {
            du(&p)
        } else {
            e.metadata().map_or(0, |m| m.len())
        };
    }
    n
}

/// Cancel `job` and wait until it has ended (its slots are free).
pub(crate) async fn cancel(weir: &Path, rest: &str, job: &str) -> anyhow::Result<()> {
    let _ = std::process::Command::new(weir)
        .args(["cancel", job, "--coordinator", rest])
        .output();
    let started = Instant::now();
    loop {
        let j: JobInfo = get(format!("{rest}/v1/jobs/{job}")).await?;
        if j.state.is_terminal() {
            return Ok(());
        }
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(60),
            "job {job} does not end"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub async fn savepoints(weir: &Path, keys: u64, value_bytes: u64) -> anyhow::Result<()> {
    let data = std::env::temp_dir()
        .join("weir-bench")
        .join(format!("savepoints-{}", std::process::id()));
    std::fs::create_dir_all(&data)?;
    let cluster = start_cluster(weir, &data.join("cluster"), 3, 1).await?;
    let rest = cluster.rest.clone();
    let large = state_bundle(&data, "large", keys, value_bytes)?;
    let job = submit(weir, &rest, &large, &[])?;
    let filling = Instant::now();
    while padded(&rest, &job).await? < keys {
        anyhow::ensure!(
            filling.elapsed() < Duration::from_secs(1800),
            "the state is not filled after 30 min"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let fill = filling.elapsed().as_secs_f64();
    let (sp, sp_secs) = savepoint(&rest, &job, false).await?;
    eprintln!("savepoint in {sp_secs:.2} s: {:?} bytes", sp.size_bytes);
    let (stop, stop_secs) = savepoint(&rest, &job, true).await?;
    eprintln!("stop in {stop_secs:.2} s");
    let location = stop.location.clone().unwrap_or_default();
    let on_disk = du(Path::new(&location));
    let (same, same_secs) = restore(weir, &rest, &large, 2, &location).await?;
    eprintln!("restored at parallelism 2 in {same_secs:.2} s");
    cancel(weir, &rest, &same).await?;
    let (more, more_secs) = restore(weir, &rest, &large, 3, &location).await?;
    eprintln!("restored at parallelism 3 in {more_secs:.2} s");
    cancel(weir, &rest, &more).await?;

    // The pause of an upgrade, small state.
    let small = state_bundle(&data, "small", 1000, 100)?;
    let upgraded = state_bundle(&data, "small-v2", 1000, 100)?;
    let job = submit(weir, &rest, &small, &[])?;
    while padded(&rest, &job).await? < 1000 {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let out = std::process::Command::new(weir)
        .args([
            "upgrade",
            &job,
            upgraded.to_str().unwrap(),
            "--coordinator",
            &rest,
        ])
        .output()?;
    anyhow::ensure!(
        out.status.success(),
        "weir upgrade: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let said = String::from_utf8_lossy(&out.stderr);
    let pause = said
        .split("no job processed for ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .unwrap_or("?")
        .to_owned();
    let new = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    cancel(weir, &rest, &new).await?;

    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    println!(
        "state: {keys} keys × {value_bytes} B on RocksDB, parallelism 2 (filled in {fill:.1} s)"
    );
    println!();
    println!("| step | time (s) | size (MiB) |");
    println!("| --- | ---: | ---: |");
    println!(
        "| savepoint (job goes on) | {sp_secs:.2} | {:.0} |",
        mib(sp.size_bytes.unwrap_or(0))
    );
    println!(
        "| stop with a savepoint | {stop_secs:.2} | {:.0} (on disk {:.0}) |",
        mib(stop.size_bytes.unwrap_or(0)),
        mib(on_disk)
    );
    println!("| restore at parallelism 2 (to its first checkpoint) | {same_secs:.2} | |");
    println!("| restore at parallelism 3 (to its first checkpoint) | {more_secs:.2} | |");
    println!();
    println!(
        "upgrade of a job with small state (1,000 keys × 100 B): no job processed for {pause} ms"
    );
    drop(cluster);
    let _ = std::fs::remove_dir_all(&data);
    Ok(())
}
