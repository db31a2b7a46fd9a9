//! `unaligned`: how long checkpoints take under heavy backpressure, aligned
//! and unaligned.
//!
//! A generator at parallelism 2, as fast as it can go, feeds (over
//! channels) a stage at parallelism 1 that takes 0.5 ms per record (the
//! test guests' `slow`): its queue holds 16 batches of 1,024 records, 8 s
//! of its work, ahead of every barrier. The same job runs for `secs`
//! seconds with aligned checkpoints, then aligned for 300 ms and unaligned
//! after (Flink's aligned checkpoint timeout), then unaligned from the
//! start (a checkpoint every second, expiring after a minute); the table gives, per mode, the
//! checkpoints completed and expired and the durations of the completed
//! ones.

use std::path::Path;
use std::time::Duration;

use weir_coordinator::checkpoint::CheckpointStats;
use weir_coordinator::checkpoint::stats::CheckpointStatus;

use crate::cluster::{start_cluster, submit};
use crate::fault_tolerance::bundle;

async fn get<T: serde::de::DeserializeOwned>(url: String) -> anyhow::Result<T> {
    Ok(reqwest::get(url).await?.json().await?)
}

/// The `p`-th percentile of `xs` (sorted here).
fn percentile(xs: &mut [u64], p: f64) -> u64 {
    if xs.is_empty() {
        return 0;
    }
    xs.sort_unstable();
    xs[((xs.len() - 1) as f64 * p).round() as usize]
}

/// Run the benchmark and print its table.
pub async fn unaligned(weir: &Path, secs: u64) -> anyhow::Result<()> {
    let data = std::env::temp_dir().join(format!("weir-bench/unaligned-{}", std::process::id()));
    std::fs::create_dir_all(&data)?;
    let cluster = start_cluster(weir, &data, 2, 2).await?;
    let rest = cluster.rest.clone();
    println!(
        "| checkpoints | completed | expired | duration p50 (ms) | max (ms) | in progress for (ms) | in flight stored p50 (KiB) |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    for (name, extra) in [
        ("aligned", ""),
        (
            "aligned-timeout-300",
            "unaligned = true\naligned-timeout-ms = 300\n",
        ),
        ("unaligned", "unaligned = true\n"),
    ] {
        let b = bundle(
            &data,
            name,
            "test-guests",
            &format!(
                "[job]\nname = 'backpressure-{name}'\nparallelism = 2\n\
                 [[source]]\nname = 'gen'\ntype = 'generator'\n\
                 [[operator]]\nname = 'slow'\nfunction = 'slow'\nparallelism = 1\n\
                 [[sink]]\nname = 'out'\ntype = 'json-lines-file'\npath = '/dev/null'\n\
                 [checkpoint]\ninterval-ms = 1000\ntimeout-ms = 60000\n{extra}"
            ),
        )?;
        let id = submit(weir, &rest, &b, &[])?;
        tokio::time::sleep(Duration::from_secs(secs)).await;
        let c: CheckpointStats = get(format!("{rest}/v1/jobs/{id}/checkpoints")).await?;
        let done: Vec<_> = c
            .history
            .iter()
            .filter(|h| h.status == CheckpointStatus::Completed)
            .collect();
        let mut durations: Vec<u64> = done.iter().filter_map(|h| h.duration_ms).collect();
        let mut stored: Vec<u64> = done.iter().map(|h| h.inflight_bytes / 1024).collect();
        let (p50, max) = (
            percentile(&mut durations, 0.5),
            durations.iter().max().copied().unwrap_or(0),
        );
        // The oldest checkpoint still waiting for its barriers.
        let waiting = c
            .history
            .iter()
            .filter(|h| h.status == CheckpointStatus::InProgress)
            .map(|h| (weir_model::now_ms() - h.triggered_at_ms).max(0) as u64)
            .max()
            .unwrap_or(0);
        println!(
            "| {name} | {} | {} | {p50} | {max} | {waiting} | {} |",
            c.counts.completed,
            c.counts.failed,
            percentile(&mut stored, 0.5)
        );
        crate::savepoints::cancel(weir, &rest, &id).await?;
    }
    drop(cluster);
    let _ = std::fs::remove_dir_all(&data);
    Ok(())
}
