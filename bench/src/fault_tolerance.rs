//! Fault-tolerance benchmarks on a cluster of processes:
//!
//! - `recovery`: the time from a worker's SIGKILL to the first record the
//!   restarted job writes (with default settings: heartbeats, restart
//!   strategy), and when the loss was noticed and the next attempt ran;
//! - `large-state`: checkpoints of a large RocksDB state, full vs
//!   incremental, while a small share of the keys changes per interval.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use weir_coordinator::checkpoint::CheckpointStats;
use weir_coordinator::checkpoint::stats::CheckpointStatus;
use weir_coordinator::jobs::{JobInfo, JobState};

use crate::cluster::{BenchCluster, start_cluster, submit, submit_and_wait};

/// A bundle directory `dir/name` of the guest crate `guest`'s component
/// and `manifest` (without its `[component]` table).
pub fn bundle(dir: &Path, name: &str, guest: &str, manifest: &str) -> anyhow::Result<PathBuf> {
    let bundle = dir.join(name);
    std::fs::create_dir_all(&bundle)?;
    std::fs::copy(weir_tests::guest(guest), bundle.join("c.wasm"))?;
    std::fs::write(
        bundle.join("weir.toml"),
        format!("{manifest}\n[component]\npath = 'c.wasm'\n"),
    )?;
    Ok(bundle)
}

async fn get<T: serde::de::DeserializeOwned>(url: String) -> anyhow::Result<T> {
    Ok(reqwest::get(url).await?.json().await?)
}

/// Seconds since `t`, to two places.
fn secs(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64())
}

/// When each step of one recovery happened, after the kill.
struct Recovery {
    /// The job left `running`.
    noticed: Duration,
    /// Its next attempt was running.
    running: Duration,
    /// The next attempt's sink wrote its first record.
    first_record: Duration,
    /// Why the attempt failed, as the job's history says.
    failure: String,
}

async fn one_recovery(weir: &Path, data: &Path, run: u32) -> anyhow::Result<Recovery> {
    let cluster: BenchCluster = start_cluster(weir, &data.join(format!("run{run}")), 3, 1).await?;
    let output = data.join(format!("out{run}"));
    let bundle = bundle(
        data,
        &format!("wordcount{run}"),
        "wordcount",
        &format!(
            "[job]\nname = 'recovery'\nparallelism = 2\n\
             [[source]]\nname = 'lines'\ntype = 'generator'\npattern = 'words'\nrate = '20000'\n\
             [[operator]]\nname = 'split'\nfunction = 'split-words'\n\
             [[operator]]\nname = 'count'\nfunction = 'count'\nkey-by = 'value'\n\
             [[sink]]\nname = 'counts'\ntype = 'json-lines-file'\npath = '{}'\n\
             [checkpoint]\ninterval-ms = 1000\n",
            output.display()
        ),
    )?;
    let rest = cluster.rest.clone();
    let id = submit(weir, &rest, &bundle, &[])?;
    let started = Instant::now();
    loop {
        let c: CheckpointStats = get(format!("{rest}/v1/jobs/{id}/checkpoints")).await?;
        if c.counts.completed >= 2 {
            break;
        }
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(60),
            "no checkpoints"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let job: JobInfo = get(format!("{rest}/v1/jobs/{id}")).await?;
    let victim = job.subtasks[0].worker.clone().unwrap_or_default();
    let mut workers = cluster.workers;
    let i = workers
        .iter()
        .position(|w| victim.ends_with(&format!("-{}", w.0.id())))
        .ok_or_else(|| anyhow::anyhow!("no worker process runs {victim}"))?;
    let mut killed = workers.remove(i);
    let killed_at = Instant::now();
    killed.0.kill()?;
    let (mut noticed, mut running) = (None, None);
    let first_record = loop {
        let elapsed = killed_at.elapsed();
        anyhow::ensure!(elapsed < Duration::from_secs(120), "no recovery");
        // The new attempt's first part file: its sink wrote a record.
        let written = std::fs::read_dir(&output)?
            .filter_map(|e| e.ok())
            .any(|e| e.file_name().to_string_lossy().contains("-a1-"));
        if written {
            break elapsed;
        }
        if noticed.is_none() || running.is_none() {
            let j: JobInfo = get(format!("{rest}/v1/jobs/{id}")).await?;
            if noticed.is_none() && (j.state != JobState::Running || j.attempt > 0) {
                noticed = Some(killed_at.elapsed());
            }
            if running.is_none() && j.attempt == 1 && j.state == JobState::Running {
                running = Some(killed_at.elapsed());
            }
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    let j: JobInfo = get(format!("{rest}/v1/jobs/{id}")).await?;
    let _ = reqwest::Client::new()
        .post(format!("{rest}/v1/jobs/{id}/cancel"))
        .send()
        .await;
    drop(killed);
    drop(workers);
    Ok(Recovery {
        noticed: noticed.unwrap_or(first_record),
        running: running.unwrap_or(first_record),
        first_record,
        failure: j
            .exceptions
            .first()
            .map(|e| e.message.clone())
            .unwrap_or_default(),
    })
}

/// The time from SIGKILL of a worker to the first record written after
/// recovery, `runs` times.
pub async fn recovery(weir: &Path, runs: u32) -> anyhow::Result<()> {
    let data = std::env::temp_dir()
        .join("weir-bench")
        .join(format!("recovery-{}", std::process::id()));
    std::fs::create_dir_all(&data)?;
    let mut all = Vec::new();
    for run in 0..runs {
        all.push(one_recovery(weir, &data, run).await?);
    }
    println!("| run | loss noticed (s) | next attempt running (s) | first record written (s) |");
    println!("| --- | ---: | ---: | ---: |");
    for (i, r) in all.iter().enumerate() {
        println!(
            "| {} | {} | {} | {} |",
            i + 1,
            secs(r.noticed),
            secs(r.running),
            secs(r.first_record)
        );
    }
    let mut firsts: Vec<Duration> = all.iter().map(|r| r.first_record).collect();
    firsts.sort();
    println!();
    println!(
        "SIGKILL to first record: median {} s (min {}, max {})",
        secs(firsts[firsts.len() / 2]),
        secs(firsts[0]),
        secs(firsts[firsts.len() - 1])
    );
    println!("noticed as: {}", all[0].failure);
    let _ = std::fs::remove_dir_all(&data);
    Ok(())
}

/// One large-state job's completed checkpoints once its state is whole.
struct StateRun {
    incremental: bool,
    seconds: f64,
    steady: Vec<weir_coordinator::checkpoint::stats::CheckpointSummary>,
}

/// Checkpoints of `keys` keys of `value_bytes` each on RocksDB, every
/// `interval_ms`, full and incremental; after the keys are written, the
/// updates fall on 5% of them. Records come at a rate of 5% of the keys
/// per interval: each checkpoint covers changes to 5% of the keys.
pub async fn large_state(
    weir: &Path,
    keys: u64,
    value_bytes: u64,
    updates: u64,
    interval_ms: u64,
) -> anyhow::Result<()> {
    let data = std::env::temp_dir()
        .join("weir-bench")
        .join(format!("large-state-{}", std::process::id()));
    std::fs::create_dir_all(&data)?;
    let mut runs = Vec::new();
    for incremental in [false, true] {
        let cluster =
            start_cluster(weir, &data.join(format!("cluster-{incremental}")), 1, 1).await?;
        let bundle = bundle(
            &data,
            &format!("state-{incremental}"),
            "test-guests",
            &format!(
                "[job]\nname = 'large-state'\nparallelism = 1\n\
                 [params]\nkeys = '{keys}'\nhot-keys = '{}'\nvalue-bytes = '{value_bytes}'\n\
                 [[source]]\nname = 'numbers'\ntype = 'generator'\npattern = 'sequence'\ncount = '{}'\nrate = '{}'\n\
                 [[operator]]\nname = 'spread'\nfunction = 'spread'\n\
                 [[operator]]\nname = 'pad'\nfunction = 'pad'\nkey-by = 'key'\n\
                 [[sink]]\nname = 'out'\ntype = 'json-lines-file'\npath = '{}'\n\
                 [state]\nbackend = 'rocksdb'\n\
                 [checkpoint]\ninterval-ms = {interval_ms}\nincremental = {incremental}\n",
                keys / 20,
                keys + updates,
                (keys / 20 * 1000 / interval_ms).max(1),
                data.join(format!("out-{incremental}")).display()
            ),
        )?;
        let (job, seconds) = submit_and_wait(weir, &cluster.rest, &bundle, &[]).await?;
        let c: CheckpointStats =
            get(format!("{}/v1/jobs/{}/checkpoints", cluster.rest, job.id)).await?;
        let completed: Vec<_> = c
            .history
            .into_iter()
            .filter(|s| s.status == CheckpointStatus::Completed)
            .collect();
        let largest = completed.iter().map(|s| s.state_bytes).max().unwrap_or(0);
        // Once every key is written the state stays about as large.
        let steady = completed
            .into_iter()
            .filter(|s| s.state_bytes * 10 >= largest * 9)
            .collect();
        runs.push(StateRun {
            incremental,
            seconds,
            steady,
        });
        drop(cluster);
    }
    let median = |v: &mut Vec<u64>| {
        v.sort_unstable();
        v.get(v.len() / 2).copied().unwrap_or(0)
    };
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    println!(
        "| checkpoints | job time (s) | steady checkpoints | state (MiB) | uploaded, median (MiB) | uploaded, mean (MiB) | duration, median (ms) |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    let mut uploaded = Vec::new();
    for r in &runs {
        let mut up: Vec<u64> = r.steady.iter().map(|s| s.uploaded_bytes).collect();
        let mean = up.iter().sum::<u64>() / up.len().max(1) as u64;
        let mut state: Vec<u64> = r.steady.iter().map(|s| s.state_bytes).collect();
        let mut ms: Vec<u64> = r.steady.iter().filter_map(|s| s.duration_ms).collect();
        let up = median(&mut up);
        uploaded.push((up, mean));
        println!(
            "| {} | {:.1} | {} | {:.0} | {:.1} | {:.1} | {} |",
            if r.incremental { "incremental" } else { "full" },
            r.seconds,
            r.steady.len(),
            mib(median(&mut state)),
            mib(up),
            mib(mean),
            median(&mut ms)
        );
    }
    println!();
    println!(
        "incremental/full uploaded bytes: medians {:.3}, means {:.3}",
        uploaded[1].0 as f64 / uploaded[0].0.max(1) as f64,
        uploaded[1].1 as f64 / uploaded[0].1.max(1) as f64
    );
    let _ = std::fs::remove_dir_all(&data);
    Ok(())
}
