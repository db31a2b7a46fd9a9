//! `checkpoints`: what checkpoints and RocksDB cost a job's throughput.
//!
//! The word count and a 1 s tumbling window count at parallelism 2 over two
//! worker processes, state in memory or in RocksDB, with a checkpoint every
//! `interval_ms` or none. Every job runs `runs` times, the configurations
//! interleaved (a noisy neighbour slows them alike); the table gives each
//! configuration's median time.

use std::path::Path;

use weir_coordinator::checkpoint::CheckpointStats;

use crate::cluster::{start_cluster, submit_and_wait};
use crate::fault_tolerance;

struct Workload {
    name: &'static str,
    guest: &'static str,
    manifest: String,
    args: Vec<String>,
    records: u64,
}

/// One configuration's runs.
struct Row {
    job: &'static str,
    records: u64,
    backend: &'static str,
    checkpointed: bool,
    secs: Vec<f64>,
    /// The checkpoints of its median run.
    stats: Vec<CheckpointStats>,
}

impl Row {
    /// The median run's time and checkpoints.
    fn median(&self) -> (f64, &CheckpointStats) {
        let mut order: Vec<usize> = (0..self.secs.len()).collect();
        order.sort_by(|a, b| self.secs[*a].total_cmp(&self.secs[*b]));
        let m = order[order.len() / 2];
        (self.secs[m], &self.stats[m])
    }
}

fn workloads(words: u64, input: &Path) -> anyhow::Result<[Workload; 2]> {
    let example = weir_tests::workspace_root().join("examples/wordcount");
    let events = words / 2;
    Ok([
        Workload {
            name: "word count",
            guest: "wordcount",
            manifest: std::fs::read_to_string(example.join("weir.toml"))?,
            args: vec!["--param".to_owned(), format!("input={}", input.display())],
            records: words,
        },
        Workload {
            name: "tumbling 1 s",
            guest: "windowed-counts",
            manifest: format!(
                "[job]\nname = 'tumbling'\n\
                 [params]\noutput = {{ default = '/dev/null' }}\n\
                 [[source]]\nname = 'bids'\ntype = 'generator'\npattern = 'bids'\ncount = '{events}'\ntimestamp = '/ts'\n\
                 [[operator]]\nname = 'count'\nfunction = 'count'\nkey-by = '/key'\n\
                 window = {{ type = 'tumbling', size-ms = 1000 }}\n\
                 [[sink]]\nname = 'counts'\ntype = 'json-lines-file'\npath = '${{output}}'\n"
            ),
            args: Vec::new(),
            records: events,
        },
    ])
}

/// Run the benchmark and print its table.
pub async fn checkpoints(
    words: u64,
    interval_ms: u64,
    runs: usize,
    weir: &Path,
) -> anyhow::Result<()> {
    anyhow::ensure!(runs > 0, "--runs must be at least 1");
    let dir = std::env::temp_dir().join("weir-bench");
    std::fs::create_dir_all(&dir)?;
    let input = dir.join(format!("text-{words}.txt"));
    if !input.exists() {
        crate::generate_text(&input, words)?;
    }
    let data = dir.join(format!("checkpoints-{}", std::process::id()));
    let cluster = start_cluster(weir, &data, 2, 1).await?;
    let workloads = workloads(words, &input)?;
    let mut rows = Vec::new();
    for w in &workloads {
        for backend in ["memory", "rocksdb"] {
            for checkpointed in [false, true] {
                rows.push(Row {
                    job: w.name,
                    records: w.records,
                    backend,
                    checkpointed,
                    secs: Vec::new(),
                    stats: Vec::new(),
                });
            }
        }
    }
    for run in 0..runs {
        for (i, row) in rows.iter_mut().enumerate() {
            let w = &workloads[i / 4];
            let name = format!(
                "{}-{}-{}-{run}",
                w.guest,
                row.backend,
                if row.checkpointed {
                    "checkpoints"
                } else {
                    "none"
                }
            );
            let mut m = format!("{}\n[state]\nbackend = '{}'\n", w.manifest, row.backend);
            if row.checkpointed {
                m.push_str(&format!("[checkpoint]\ninterval-ms = {interval_ms}\n"));
            }
            let bundle = fault_tolerance::bundle(&data, &name, w.guest, &m)?;
            let output = data.join(format!("{name}.out"));
            let mut args = vec![
                "--parallelism".to_owned(),
                "2".to_owned(),
                "--param".to_owned(),
                format!("output={}", output.display()),
            ];
            args.extend(w.args.iter().cloned());
            let (job, secs) = submit_and_wait(weir, &cluster.rest, &bundle, &args).await?;
            let c: CheckpointStats =
                reqwest::get(format!("{}/v1/jobs/{}/checkpoints", cluster.rest, job.id))
                    .await?
                    .json()
                    .await?;
            let _ = std::fs::remove_dir_all(&output);
            let _ = std::fs::remove_file(&output);
            row.secs.push(secs);
            row.stats.push(c);
        }
    }
    print_table(&rows, &workloads, interval_ms, runs);
    drop(cluster);
    let _ = std::fs::remove_dir_all(&data);
    Ok(())
}

fn print_table(rows: &[Row], workloads: &[Workload], interval_ms: u64, runs: usize) {
    println!(
        "| job | state | checkpoints | time (s), median of {runs} | min – max | records/s | vs none | completed | last size | last uploaded | last duration |"
    );
    println!("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    let secs_of = |job: &str, b: &str, cp: bool| {
        rows.iter()
            .find(|r| r.job == job && r.backend == b && r.checkpointed == cp)
            .map_or(f64::NAN, |r| r.median().0)
    };
    for row in rows {
        let (secs, c) = row.median();
        let none = secs_of(row.job, row.backend, false);
        let last = c.latest_completed.as_ref();
        let min = row.secs.iter().copied().fold(f64::INFINITY, f64::min);
        let max = row.secs.iter().copied().fold(0.0, f64::max);
        println!(
            "| {} | {} | {} | {secs:.2} | {min:.2} – {max:.2} | {:.0} | {:.2} | {} | {} | {} | {} |",
            row.job,
            row.backend,
            if row.checkpointed {
                format!("every {interval_ms} ms")
            } else {
                "none".into()
            },
            row.records as f64 / secs,
            none / secs,
            c.counts.completed,
            last.map_or("-".into(), |l| format!("{} KiB", l.state_bytes / 1024)),
            last.map_or("-".into(), |l| format!("{} KiB", l.uploaded_bytes / 1024)),
            last.and_then(|l| l.duration_ms)
                .map_or("-".into(), |d| format!("{d} ms")),
        );
    }
    println!();
    for w in workloads {
        let rate = |b: &str, cp: bool| 1.0 / secs_of(w.name, b, cp);
        println!(
            "{}: checkpoints/none: memory {:.2}, rocksdb {:.2}; rocksdb/memory (no checkpoints) {:.2}",
            w.name,
            rate("memory", true) / rate("memory", false),
            rate("rocksdb", true) / rate("rocksdb", false),
            rate("rocksdb", false) / rate("memory", false)
        );
    }
}
