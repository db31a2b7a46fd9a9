//! Weir's benchmarks. Run in release mode:
//!
//! ```text
//! cargo run --release -p weir-bench -- wordcount --words 10000000
//! ```
//!
//! `wordcount` measures records (words) per second of the same word count
//! three ways, at parallelism 1, on one generated text:
//!
//! - **wasm**: the `examples/wordcount` component in Weir's runtime (text
//!   source → `split-words` → hash partition → `count` → JSON-lines sink);
//! - **native**: the same job with the same logic written as native Rust
//!   operators in the same runtime (same records, codec, state backend);
//! - **loop**: a hand-written single-threaded loop doing the same work (read
//!   lines, split, lowercase, count in a hash map, write one JSON line per
//!   update) — the COST baseline.
//!
//! `windows` measures events per second of windowed counts per key over
//! 10,000 keys from a generator of Nexmark-shaped bids (100 per ms of event
//! time, watermarks every 200 ms): a tumbling window of 10 s (the shape of
//! Nexmark q7) and a sliding window of 10 s every 2 s (q5), each with the
//! `examples/windowed-counts` component and with a native Rust operator in
//! the same runtime.

mod checkpoints;
mod cluster;
mod fault_tolerance;
mod instantiate;
mod kafka;
mod native;
mod native_window;
mod savepoints;
mod unaligned;

/// mimalloc: a runtime that moves many small records allocates a lot, and
/// glibc's allocator spends a third of a word count's time there.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::io::{BufRead, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};
use cluster::{start_cluster, submit_and_wait};
use weir_coordinator::{Submission, plan};
use weir_host::{HostConfig, WasmRuntime};
use weir_model::{ExportedOperator, Manifest};
use weir_worker::{LocalJob, OperatorFactory, WasmOperatorFactory, run_job};

#[derive(Parser)]
struct Cli {
    #[command(subcommand)]
    command: Bench,
}

#[derive(Subcommand)]
enum Bench {
    /// Word count throughput at parallelism 1 and 2 on a coordinator and two
    /// worker processes (one slot each), started from the `weir` binary.
    Scaling {
        /// Words in the generated text.
        #[arg(long, default_value_t = 10_000_000)]
        words: u64,
        /// The `weir` binary (built with `cargo build --release`).
        #[arg(long)]
        weir: PathBuf,
    },
    /// The word count and a 1 s tumbling window count at parallelism 2 on
    /// two worker processes, state in memory and in RocksDB, with
    /// checkpoints and without.
    Checkpoints {
        /// Words in the generated text.
        #[arg(long, default_value_t = 10_000_000)]
        words: u64,
        /// Time between checkpoints, ms.
        #[arg(long, default_value_t = 1000)]
        interval_ms: u64,
        /// Runs of each job (interleaved); the table gives their median.
        #[arg(long, default_value_t = 3)]
        runs: usize,
        /// The `weir` binary (built with `cargo build --release`).
        #[arg(long)]
        weir: PathBuf,
    },
    /// The time from a worker's SIGKILL to the first record written after
    /// the job's recovery (default settings), on a coordinator and three
    /// worker processes.
    Recovery {
        /// Kills (one job each).
        #[arg(long, default_value_t = 3)]
        runs: u32,
        /// The `weir` binary (built with `cargo build --release`).
        #[arg(long)]
        weir: PathBuf,
    },
    /// Checkpoints of a large RocksDB state, full vs incremental, while 5%
    /// of the keys change.
    LargeState {
        /// Keys in the state.
        #[arg(long, default_value_t = 1_000_000)]
        keys: u64,
        /// Bytes per key's value.
        #[arg(long, default_value_t = 1000)]
        value_bytes: u64,
        /// Updates after every key is written (on 5% of the keys).
        #[arg(long, default_value_t = 500_000)]
        updates: u64,
        /// Time between checkpoints, ms.
        #[arg(long, default_value_t = 2000)]
        interval_ms: u64,
        /// The `weir` binary (built with `cargo build --release`).
        #[arg(long)]
        weir: PathBuf,
    },
    /// Records/s and MB/s through a local channel and a TCP channel with
    /// credit-based flow control (loopback), batches of 1,024 records.
    Shuffle {
        /// Records to send.
        #[arg(long, default_value_t = 20_000_000)]
        records: u64,
        /// Bytes per record value.
        #[arg(long, default_value_t = 32)]
        value_bytes: usize,
    },
    /// Windowed counts over 10,000 keys, tumbling and sliding: Wasm vs
    /// native operator.
    Windows {
        /// Events per run.
        #[arg(long, default_value_t = 5_000_000)]
        events: u64,
        /// Runs of each variant; the best is reported.
        #[arg(long, default_value_t = 3)]
        runs: u32,
    },
    /// The time and resident memory an instance of a component's operator
    /// takes to start, and the component's load times (one JSON line).
    Instantiate {
        /// The component.
        #[arg(long)]
        component: PathBuf,
        /// The operator to start (a stateless one: no window).
        #[arg(long)]
        operator: String,
        /// Instances to start.
        #[arg(long, default_value_t = 50)]
        instances: usize,
    },
    /// Savepoints of a large RocksDB state: savepoint and stop times and
    /// sizes, restores at the same and at a new parallelism, and the pause
    /// of an upgrade.
    Savepoints {
        /// Keys in the state.
        #[arg(long, default_value_t = 1_000_000)]
        keys: u64,
        /// Bytes per key's value.
        #[arg(long, default_value_t = 1000)]
        value_bytes: u64,
        /// The `weir` binary (built with `cargo build --release`).
        #[arg(long)]
        weir: PathBuf,
    },
    /// Checkpoint durations under heavy backpressure, aligned and
    /// unaligned.
    Unaligned {
        /// Seconds each mode runs.
        #[arg(long, default_value_t = 30)]
        secs: u64,
        /// The `weir` binary (built with `cargo build --release`).
        #[arg(long)]
        weir: PathBuf,
    },
    /// Kafka → Weir → Kafka records/s at parallelism 1 and 2, beside the
    /// broker's own produce and consume rates (a tansu broker it starts).
    Kafka {
        /// Messages in the input topic.
        #[arg(long, default_value_t = 1_000_000)]
        messages: u64,
        /// The `weir` binary (built with `cargo build --release`).
        #[arg(long)]
        weir: PathBuf,
    },
    /// Word count: Wasm operators vs native operators vs a hand-written loop.
    Wordcount {
        /// Words in the generated text.
        #[arg(long, default_value_t = 10_000_000)]
        words: u64,
        /// Runs of each variant; the best is reported.
        #[arg(long, default_value_t = 3)]
        runs: u32,
        /// Also run the Wasm operators with JSON between them (`codec =
        /// "json"`), turn by turn with the default MessagePack.
        #[arg(long)]
        json_too: bool,
    },
}

/// A text of `words` words drawn from a vocabulary of 10,000 (Zipf-like:
/// word i has weight 1/(i+1)), 10 words per line, some capitalized and
/// punctuated.
pub(crate) fn generate_text(path: &Path, words: u64) -> anyhow::Result<()> {
    let vocab: Vec<String> = (0..10_000u64)
        .map(|i| format!("w{}{}", (b'a' + (i % 26) as u8) as char, i))
        .collect();
    let weights: Vec<f64> = (0..vocab.len()).map(|i| 1.0 / (i + 1) as f64).collect();
    let total: f64 = weights.iter().sum();
    let mut cumulative = Vec::with_capacity(weights.len());
    let mut acc = 0.0;
    for w in &weights {
        acc += w / total;
        cumulative.push(acc);
    }
    let mut out = BufWriter::new(std::fs::File::create(path)?);
    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    for i in 0..words {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let u = (x >> 11) as f64 / (1u64 << 53) as f64;
        let idx = cumulative.partition_point(|c| *c < u).min(vocab.len() - 1);
        let w = &vocab[idx];
        if x.is_multiple_of(7) {
            write!(out, "{}{}", w[..1].to_uppercase(), &w[1..])?;
        } else {
            out.write_all(w.as_bytes())?;
        }
        out.write_all(if i % 10 == 9 {
            b".\n"
        } else if x.is_multiple_of(5) {
            b", "
        } else {
            b" "
        })?;
    }
    out.flush()?;
    Ok(())
}

/// The word count job; `{codec}` is the job's codec between components.
const MANIFEST: &str = r#"
[job]
name = "wordcount-bench"
codec = "{codec}"
[params]
input = {}
[[source]]
name = "lines"
type = "text-file"
path = "${input}"
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
path = "/dev/null"
"#;

async fn run_pipeline(
    input: &Path,
    factory: Arc<dyn OperatorFactory>,
    exported: &[ExportedOperator],
    codec: &str,
) -> anyhow::Result<Duration> {
    let manifest = Manifest::parse(&MANIFEST.replace("{codec}", codec))?;
    let submission = Submission {
        params: vec![("input".into(), input.display().to_string())],
        parallelism: Some(1),
        builtin_params: Vec::new(),
    };
    let graph = plan(&manifest, &submission, exported)?;
    let report = run_job(LocalJob::new(graph, factory)).await?;
    Ok(report.duration)
}

/// The COST baseline: one thread, no framework.
fn hand_loop(input: &Path) -> anyhow::Result<Duration> {
    #[derive(serde::Serialize)]
    struct WordCount<'a> {
        word: &'a str,
        count: u64,
    }
    let started = Instant::now();
    let reader = std::io::BufReader::with_capacity(256 * 1024, std::fs::File::open(input)?);
    let mut out = BufWriter::with_capacity(1 << 20, std::fs::File::create("/dev/null")?);
    let mut counts: ahash::AHashMap<String, u64> = ahash::AHashMap::new();
    for line in reader.lines() {
        let line = line?;
        for w in line
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
        {
            let word = w.to_lowercase();
            let count = {
                let c = counts.entry(word.clone()).or_insert(0);
                *c += 1;
                *c
            };
            serde_json::to_writer(&mut out, &WordCount { word: &word, count })?;
            out.write_all(b"\n")?;
        }
    }
    out.flush()?;
    Ok(started.elapsed())
}

fn best<F: FnMut() -> anyhow::Result<Duration>>(runs: u32, mut f: F) -> anyhow::Result<Duration> {
    let mut best = Duration::MAX;
    for _ in 0..runs.max(1) {
        best = best.min(f()?);
    }
    Ok(best)
}

async fn wordcount(words: u64, runs: u32, json_too: bool) -> anyhow::Result<()> {
    let dir = std::env::temp_dir().join("weir-bench");
    std::fs::create_dir_all(&dir)?;
    let input: PathBuf = dir.join(format!("text-{words}.txt"));
    if !input.exists() {
        eprintln!("generating {words} words into {}", input.display());
        generate_text(&input, words)?;
    }
    let component_path = weir_tests::guest("wordcount");
    let runtime = WasmRuntime::new(HostConfig {
        cache_dir: Some(dir.join("components")),
        ..HostConfig::default()
    })?;
    let components = weir_host::JobComponents::from_file(&runtime, &component_path)?;
    let exported = components.exported();
    let wasm_factory: Arc<dyn OperatorFactory> = Arc::new(WasmOperatorFactory {
        runtime: runtime.clone(),
        components,
        params: Vec::new(),
        state: weir_worker::state::StateSetup::in_memory(),
        attempt: 0,
    });
    let native_factory: Arc<dyn OperatorFactory> = Arc::new(native::NativeWordCount);

    let handle = tokio::runtime::Handle::current();
    let mut wasm = Duration::MAX;
    let mut wasm_json = Duration::MAX;
    let mut native_d = Duration::MAX;
    for _ in 0..runs.max(1) {
        wasm = wasm.min(run_pipeline(&input, wasm_factory.clone(), &exported, "msgpack").await?);
        if json_too {
            let json = run_pipeline(&input, wasm_factory.clone(), &exported, "json").await?;
            wasm_json = wasm_json.min(json);
        }
        // The native operators speak JSON, as a job's edges do.
        let native = run_pipeline(&input, native_factory.clone(), &exported, "json").await?;
        native_d = native_d.min(native);
    }
    let input2 = input.clone();
    let baseline = handle
        .spawn_blocking(move || best(runs, || hand_loop(&input2)))
        .await??;

    let rate = |d: Duration| words as f64 / d.as_secs_f64();
    let (a, b, c) = (rate(wasm), rate(native_d), rate(baseline));
    println!("| variant | time (s) | words/s |");
    println!("| --- | ---: | ---: |");
    println!(
        "| (a) Wasm operators, Weir runtime | {:.2} | {:.0} |",
        wasm.as_secs_f64(),
        a
    );
    if json_too {
        println!(
            "| (a) the same, JSON between the operators | {:.2} | {:.0} |",
            wasm_json.as_secs_f64(),
            rate(wasm_json)
        );
    }
    println!(
        "| (b) native operators, Weir runtime | {:.2} | {:.0} |",
        native_d.as_secs_f64(),
        b
    );
    println!(
        "| (c) hand-written loop | {:.2} | {:.0} |",
        baseline.as_secs_f64(),
        c
    );
    println!();
    println!(
        "a/b = {:.2} (target ≥ 0.7), a/c = {:.2} (target ≥ 0.3)",
        a / b,
        a / c
    );
    Ok(())
}

const WINDOWS: &str = r#"
[job]
name = "windows"
[params]
count = {}
slide = {}
[[source]]
name = "bids"
type = "generator"
pattern = "bids"
count = "${count}"
timestamp = "/ts"
[[operator]]
name = "count"
function = "count"
key-by = "/key"
window = { type = "sliding", size-ms = 10000, slide-ms = "${slide}" }
[[sink]]
name = "out"
type = "json-lines-file"
path = "/dev/null"
"#;

/// One run of the windowed count; returns its duration and the windows it
/// fired.
async fn run_windows(
    events: u64,
    slide: u64,
    factory: Arc<dyn OperatorFactory>,
    exported: &[ExportedOperator],
) -> anyhow::Result<(Duration, u64)> {
    let manifest = Manifest::parse(WINDOWS)?;
    let submission = Submission {
        params: vec![
            ("count".into(), events.to_string()),
            ("slide".into(), slide.to_string()),
        ],
        parallelism: Some(1),
        builtin_params: Vec::new(),
    };
    let graph = plan(&manifest, &submission, exported)?;
    let report = run_job(LocalJob::new(graph, factory)).await?;
    let fired = report
        .vertices
        .iter()
        .find(|v| v.name == "out")
        .map_or(0, |v| v.records_in);
    Ok((report.duration, fired))
}

async fn windows(events: u64, runs: u32) -> anyhow::Result<()> {
    let dir = std::env::temp_dir().join("weir-bench");
    let runtime = WasmRuntime::new(HostConfig {
        cache_dir: Some(dir.join("components")),
        ..HostConfig::default()
    })?;
    let components =
        weir_host::JobComponents::from_file(&runtime, &weir_tests::guest("windowed-counts"))?;
    let exported = components.exported();
    let wasm: Arc<dyn OperatorFactory> = Arc::new(WasmOperatorFactory {
        runtime: runtime.clone(),
        components,
        params: Vec::new(),
        state: weir_worker::state::StateSetup::in_memory(),
        attempt: 0,
    });
    let native: Arc<dyn OperatorFactory> = Arc::new(native_window::NativeWindows);
    println!("| query shape | variant | time (s) | events/s | windows fired |");
    println!("| --- | --- | ---: | ---: | ---: |");
    for (shape, slide) in [
        ("tumbling 10 s (q7)", 10_000),
        ("sliding 10 s / 2 s (q5)", 2_000),
    ] {
        let mut rates = Vec::new();
        let mut fired_by = Vec::new();
        for (variant, factory) in [("Wasm", &wasm), ("native", &native)] {
            let mut best_d = Duration::MAX;
            let mut fired = 0;
            for _ in 0..runs.max(1) {
                let (d, f) = run_windows(events, slide, factory.clone(), &exported).await?;
                best_d = best_d.min(d);
                fired = f;
            }
            let rate = events as f64 / best_d.as_secs_f64();
            println!(
                "| {shape} | {variant} | {:.2} | {rate:.0} | {fired} |",
                best_d.as_secs_f64()
            );
            rates.push(rate);
            fired_by.push(fired);
        }
        anyhow::ensure!(
            fired_by[0] == fired_by[1],
            "the variants fired different numbers of windows: {fired_by:?}"
        );
        println!("| {shape} | Wasm/native | | {:.2} | |", rates[0] / rates[1]);
    }
    Ok(())
}

/// Send `records` records through `tx` from a thread (as a task does) and
/// receive them from `rx`; returns the elapsed time.
async fn pump(
    tx: weir_worker::inbox::InboxSender,
    mut rx: weir_worker::inbox::Inbox,
    records: u64,
    value_bytes: usize,
) -> anyhow::Result<Duration> {
    use weir_model::{Record, StreamMessage};
    let started = Instant::now();
    let sender = std::thread::spawn(move || {
        let batch: Vec<Record> = (0..1024)
            .map(|_| Record::value(vec![b'x'; value_bytes]))
            .collect();
        let mut sent = 0;
        while sent < records {
            let n = (records - sent).min(1024) as usize;
            tx.blocking_send((0, StreamMessage::Data(batch[..n].to_vec().into())))
                .expect("the receiver runs");
            sent += n as u64;
        }
        tx.blocking_send((0, StreamMessage::END))
            .expect("the receiver runs");
    });
    let mut received = 0u64;
    while let Some((_, m)) = rx.recv().await {
        match m {
            StreamMessage::Data(b) => received += b.len() as u64,
            m if m.is_end() => break,
            StreamMessage::Signal(_) => {}
        }
    }
    sender
        .join()
        .map_err(|_| anyhow::anyhow!("the sender panicked"))?;
    anyhow::ensure!(received == records, "received {received} of {records}");
    Ok(started.elapsed())
}

async fn shuffle(records: u64, value_bytes: usize) -> anyhow::Result<()> {
    use weir_worker::local::DEFAULT_CHANNEL_CAPACITY;
    use weir_worker::network::{DataServer, connect};
    let (tx, rx) = weir_worker::inbox::channel(DEFAULT_CHANNEL_CAPACITY);
    let local = pump(tx, rx, records, value_bytes).await?;

    let server = DataServer::bind("127.0.0.1:0").await?;
    let (tx, rx) = weir_worker::inbox::channel(DEFAULT_CHANNEL_CAPACITY);
    server.register("bench", 1, 0, tx);
    let key = weir_model::frame::ChannelKey {
        job: "bench".into(),
        vertex: 1,
        subtask: 0,
        channel: 0,
    };
    let remote_tx = connect(server.addr(), key, None, None).await?;
    let remote = pump(remote_tx, rx, records, value_bytes).await?;

    let mb = (records as f64) * (value_bytes as f64 + 1.0) / 1e6;
    println!("| channel | time (s) | records/s | MB/s |");
    println!("| --- | ---: | ---: | ---: |");
    for (name, d) in [
        ("local (a subtask's bounded queue)", local),
        ("remote (TCP loopback, credit-based)", remote),
    ] {
        let s = d.as_secs_f64();
        println!(
            "| {name} | {s:.2} | {:.0} | {:.0} |",
            records as f64 / s,
            mb / s
        );
    }
    println!();
    println!(
        "remote/local = {:.2}",
        local.as_secs_f64() / remote.as_secs_f64()
    );
    Ok(())
}

async fn scaling(words: u64, weir: &Path) -> anyhow::Result<()> {
    let dir = std::env::temp_dir().join("weir-bench");
    std::fs::create_dir_all(&dir)?;
    let input = dir.join(format!("text-{words}.txt"));
    if !input.exists() {
        generate_text(&input, words)?;
    }
    let data = dir.join(format!("cluster-{}", std::process::id()));
    let cluster = start_cluster(weir, &data, 2, 1).await?;
    let bundle = weir_tests::workspace_root().join("examples/wordcount");
    let mut rates = Vec::new();
    for p in ["1", "2"] {
        let args = [
            "--parallelism".to_owned(),
            p.to_owned(),
            "--param".to_owned(),
            format!("input={}", input.display()),
            "--param".to_owned(),
            "output=/dev/null".to_owned(),
        ];
        let (_, secs) = submit_and_wait(weir, &cluster.rest, &bundle, &args).await?;
        rates.push((p, secs, words as f64 / secs));
    }
    println!("| parallelism | time (s) | words/s |");
    println!("| --- | ---: | ---: |");
    for (p, secs, rate) in &rates {
        println!("| {p} | {secs:.2} | {rate:.0} |");
    }
    println!();
    println!("scaling p2/p1 = {:.2}", rates[1].2 / rates[0].2);
    drop(cluster);
    let _ = std::fs::remove_dir_all(&data);
    Ok(())
}

/// A job of the `checkpoints` benchmark: its name, its guest component, its
/// manifest (without `[component]`, `[state]` and `[checkpoint]`), its
/// submission's arguments and the records it counts.
fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let rt = tokio::runtime::Runtime::new()?;
    match cli.command {
        Bench::Wordcount {
            words,
            runs,
            json_too,
        } => rt.block_on(wordcount(words, runs, json_too)),
        Bench::Instantiate {
            component,
            operator,
            instances,
        } => instantiate::run(&component, &operator, instances),
        Bench::Shuffle {
            records,
            value_bytes,
        } => rt.block_on(shuffle(records, value_bytes)),
        Bench::Scaling { words, weir } => rt.block_on(scaling(words, &weir)),
        Bench::Checkpoints {
            words,
            interval_ms,
            runs,
            weir,
        } => rt.block_on(checkpoints::checkpoints(words, interval_ms, runs, &weir)),
        Bench::Windows { events, runs } => rt.block_on(windows(events, runs)),
        Bench::Kafka { messages, weir } => kafka::run(messages, &weir),
        Bench::Savepoints {
            keys,
            value_bytes,
            weir,
        } => rt.block_on(savepoints::savepoints(&weir, keys, value_bytes)),
        Bench::Unaligned { secs, weir } => rt.block_on(unaligned::unaligned(&weir, secs)),
        Bench::Recovery { runs, weir } => rt.block_on(fault_tolerance::recovery(&weir, runs)),
        Bench::LargeState {
            keys,
            value_bytes,
            updates,
            interval_ms,
            weir,
        } => rt.block_on(fault_tolerance::large_state(
            &weir,
            keys,
            value_bytes,
            updates,
            interval_ms,
        )),
    }
}
