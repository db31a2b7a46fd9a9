//! `weir`: build and run Weir jobs.

mod bundle;
mod client;
mod limits;
mod local;
mod new;
mod progress;
mod savepoints;
mod state;

/// mimalloc: a runtime that moves many small records allocates a lot, and
/// glibc's allocator spends a third of a word count's time there.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use anyhow::Context;
use clap::{Parser, Subcommand};
use limits::LimitArgs;
use weir_coordinator::Submission;
use weir_host::{HostConfig, WasmRuntime};
use weir_model::fault_tolerance::StateBackendKind;
use weir_worker::state::StateSetup;
use weir_worker::{LocalJob, WasmOperatorFactory, run_job};

#[derive(Parser)]
#[command(
    name = "weir",
    version,
    about = "A stream processor whose operators are WebAssembly components"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a job on an embedded runtime until its bounded input is consumed.
    Run {
        /// A bundle directory (with weir.toml) or a bundle archive (.weir).
        bundle: PathBuf,
        /// Parallelism of every operator (default: the manifest's, else 1).
        #[arg(short, long)]
        parallelism: Option<u32>,
        /// A job parameter, `key=value`; repeat for several.
        #[arg(long = "param", value_name = "KEY=VALUE")]
        params: Vec<String>,
        #[command(flatten)]
        limits: LimitArgs,
        /// The state backend of the job unless its manifest names one: `memory` or
        /// `rocksdb`.
        #[arg(long, default_value = "memory", value_parser = weir_worker::state::parse_backend)]
        state_backend: StateBackendKind,
        /// Write the job's counters to this file while it runs: a JSON line
        /// every 10 ms (`elapsed_ms`, and per vertex its records in and out),
        /// and one when it ends.
        #[arg(long, value_name = "FILE")]
        metrics: Option<PathBuf>,
    },
    /// Create an operator project to start from: a word count with a
    /// manifest, a test and a sample input that `weir run` runs as it is.
    New {
        /// The project's directory (its last part names it).
        path: PathBuf,
        /// The language of its operators.
        #[arg(long, value_enum, default_value = "rust")]
        lang: new::Lang,
    },
    /// Build a bundle's component and its single-file archive (dist/<job>.weir).
    Build {
        /// The bundle directory.
        bundle: PathBuf,
    },
    /// Start a local cluster: a coordinator and workers, in this process.
    Local {
        #[command(flatten)]
        server: ServerArgs,
        /// Workers to start.
        #[arg(long, default_value_t = 2)]
        workers: u32,
        /// Slots of each worker.
        #[arg(long, default_value_t = 2)]
        slots: u32,
        /// Where bundles and job records are kept (default ~/.local/share/weir/local).
        #[arg(long, env = "WEIR_DATA_DIR")]
        data_dir: Option<PathBuf>,
        /// The state backend of jobs whose manifest names none: `memory` or
        /// `rocksdb`.
        #[arg(long, default_value = "memory", value_parser = weir_worker::state::parse_backend)]
        state_backend: StateBackendKind,
        #[command(flatten)]
        limits: LimitArgs,
    },
    /// Start a coordinator: the REST API and the service workers register with.
    Coordinator {
        #[command(flatten)]
        server: ServerArgs,
        /// Where bundles and job records are kept.
        #[arg(long, env = "WEIR_DATA_DIR")]
        data_dir: PathBuf,
    },
    /// Start a worker: it offers its slots to the coordinator and runs the
    /// subtasks deployed to them.
    Worker {
        /// The coordinator's address for workers (its --rpc-listen).
        #[arg(long, default_value = "http://127.0.0.1:6123")]
        coordinator: String,
        /// Address of this worker's task executor (port 0 picks a free port).
        #[arg(long, default_value = "127.0.0.1:0")]
        rpc_listen: String,
        /// Address other workers send data to.
        #[arg(long, default_value = "127.0.0.1:0")]
        data_listen: String,
        /// Task slots to offer.
        #[arg(long, default_value_t = 2)]
        slots: u32,
        /// Where the worker serves Prometheus metrics (`/metrics`).
        #[arg(long, default_value = "127.0.0.1:0")]
        metrics_listen: String,
        /// Where the worker keeps its files (RocksDB state among them).
        #[arg(long, env = "WEIR_WORKER_DATA_DIR")]
        data_dir: PathBuf,
        /// The state backend of jobs whose manifest names none: `memory` or
        /// `rocksdb`.
        #[arg(long, default_value = "memory", value_parser = weir_worker::state::parse_backend)]
        state_backend: StateBackendKind,
        #[command(flatten)]
        access: AccessArgs,
        #[command(flatten)]
        limits: LimitArgs,
    },
    /// Upload a bundle (directory or archive) and start a job; prints the job id last.
    Submit {
        /// A bundle directory (built when needed) or archive.
        bundle: PathBuf,
        /// Parallelism of every operator.
        #[arg(short, long)]
        parallelism: Option<u32>,
        /// A job parameter, `key=value`; repeat for several. File paths are
        /// opened by the cluster: give absolute ones.
        #[arg(long = "param", value_name = "KEY=VALUE")]
        params: Vec<String>,
        /// Wait until the job ends; exit non-zero unless it finished.
        #[arg(long)]
        wait: bool,
        /// Start from the savepoint in this directory (on the coordinator's
        /// machine), or from a retained checkpoint's
        /// (`<data-dir>/checkpoints/<job>/chk-<id>`): state is matched by
        /// operator name, at any parallelism.
        #[arg(long, value_name = "PATH")]
        from_savepoint: Option<PathBuf>,
        /// With --from-savepoint: drop the savepoint's state that no
        /// operator of this job claims (else the submission is refused).
        #[arg(long, requires = "from_savepoint")]
        allow_non_restored_state: bool,
        #[command(flatten)]
        coordinator: CoordinatorArg,
    },
    /// Take a savepoint of a running job; prints its location last.
    Savepoint {
        /// The job's id.
        job: String,
        /// The directory to write it into (default: under the coordinator's
        /// data directory).
        dir: Option<PathBuf>,
        #[command(flatten)]
        coordinator: CoordinatorArg,
    },
    /// Stop a job with a savepoint (its sinks commit what it holds); prints
    /// the savepoint's location last.
    Stop {
        /// The job's id.
        job: String,
        /// The directory to write the savepoint into.
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Send the maximal watermark first, so that every event-time
        /// window fires into the output the savepoint commits (for a job
        /// that ends for good).
        #[arg(long)]
        drain: bool,
        #[command(flatten)]
        coordinator: CoordinatorArg,
    },
    /// Stop a job with a savepoint and start it again from it at another
    /// parallelism; prints the new job's id last.
    Rescale {
        /// The job's id.
        job: String,
        /// The new parallelism.
        parallelism: u32,
        #[command(flatten)]
        coordinator: CoordinatorArg,
    },
    /// Swap a running job's code: savepoint, stop, and the new bundle
    /// started from the savepoint (state matched by operator name); prints
    /// the new job's id last.
    Upgrade {
        /// The job's id.
        job: String,
        /// The new bundle (directory, built when needed, or archive).
        bundle: PathBuf,
        /// Drop the savepoint's state that no operator of the new bundle
        /// claims.
        #[arg(long)]
        allow_non_restored_state: bool,
        #[command(flatten)]
        coordinator: CoordinatorArg,
    },
    /// Print the keyed state a savepoint holds, as JSON lines (operator,
    /// subtask, state, kind, key, value; and timers).
    State {
        /// The savepoint's directory (or a retained checkpoint's, or its
        /// `_metadata`).
        savepoint: PathBuf,
        /// Only this operator's state.
        #[arg(long)]
        operator: Option<String>,
        /// Only this state (by the name its operator declared).
        #[arg(long)]
        state: Option<String>,
    },
    /// List the jobs.
    List {
        #[command(flatten)]
        coordinator: CoordinatorArg,
    },
    /// Show a job: state, error, records per vertex.
    Status {
        /// The job's id.
        job: String,
        #[command(flatten)]
        coordinator: CoordinatorArg,
    },
    /// Show a job's checkpoints: counts and the recent ones.
    Checkpoints {
        /// The job's id.
        job: String,
        #[command(flatten)]
        coordinator: CoordinatorArg,
    },
    /// Cancel a running job.
    Cancel {
        /// The job's id.
        job: String,
        #[command(flatten)]
        coordinator: CoordinatorArg,
    },
}

#[derive(clap::Args)]
struct ServerArgs {
    /// Address of the REST API (port 0 picks a free port).
    #[arg(long, default_value = "127.0.0.1:8081")]
    listen: String,
    /// Address of the service workers connect to.
    #[arg(long, default_value = "127.0.0.1:6123")]
    rpc_listen: String,
    /// The largest bundle upload accepted, in MiB.
    #[arg(long, default_value_t = 64)]
    max_upload_mib: usize,
    /// How often workers send heartbeats, in ms.
    #[arg(long, default_value_t = 1000)]
    heartbeat_interval_ms: u64,
    /// After how long without a heartbeat a worker is removed, in ms.
    #[arg(long, default_value_t = 10_000)]
    heartbeat_timeout_ms: u64,
    /// On an open API (no tokens), a host name the REST API and dashboard
    /// are reached by (a DNS name of this machine, or of a proxy in front
    /// of it); repeat for several. Requests naming any other host than
    /// these, an IP address or localhost are refused, so a web page whose
    /// domain was pointed at this machine (DNS rebinding) cannot drive it.
    #[arg(long = "public-name", value_name = "NAME")]
    public_names: Vec<String>,
    #[command(flatten)]
    access: AccessArgs,
}

/// What a server process lets in: the files jobs may reach and who may
/// call it. The coordinator, `weir local` and every worker take the same.
#[derive(clap::Args)]
struct AccessArgs {
    /// A directory whose files jobs' sources and sinks may read and write;
    /// repeat for several. Default: `<data dir>/io` (`weir local`: the
    /// working directory and the data directory).
    #[arg(long = "allow-dir", value_name = "DIR")]
    allow_dirs: Vec<PathBuf>,
    /// The cluster's token file, one a line: `admin TOKEN`, `read TOKEN`, or
    /// a token alone (admin). `WEIR_TOKEN`, if set, is an admin token too.
    /// The process presents its first admin token to the cluster's other
    /// processes. Without any it serves anyone, which only loopback
    /// addresses allow (unless --insecure).
    #[arg(long, value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// Serve without a token on addresses other machines can reach.
    #[arg(long)]
    insecure: bool,
    /// This process's TLS certificate chain (PEM): with --tls-key, every
    /// listener serves TLS only, and its addresses are `https://`.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// The certificates to trust when this process connects to the
    /// cluster's others (PEM). Default: --tls-cert itself (one self-signed
    /// certificate shared by the cluster).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_ca: Option<PathBuf>,
}

impl AccessArgs {
    /// The directories granted: the given ones, else `default`.
    fn dirs(&self, default: impl FnOnce() -> Vec<PathBuf>) -> Vec<PathBuf> {
        if self.allow_dirs.is_empty() {
            default()
        } else {
            self.allow_dirs.clone()
        }
    }

    /// The TLS of every listener and connection, if asked for.
    fn tls(&self) -> anyhow::Result<Option<weir_model::tls::Tls>> {
        match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => Ok(Some(weir_model::tls::Tls::load(
                cert,
                key,
                self.tls_ca.as_deref(),
            )?)),
            _ => Ok(None),
        }
    }

    /// The tokens accepted: the token file's and `WEIR_TOKEN`.
    fn tokens(&self) -> anyhow::Result<weir_coordinator::auth::Tokens> {
        use weir_coordinator::auth::{Role, Tokens};
        let mut tokens = match self.token_file.as_deref() {
            Some(f) => {
                let text = std::fs::read_to_string(f)
                    .with_context(|| format!("cannot read the token file {}", f.display()))?;
                Tokens::parse(&text)
                    .map_err(|e| anyhow::anyhow!("the token file {}: {e}", f.display()))?
            }
            None => Tokens::open(),
        };
        if let Some(t) = std::env::var("WEIR_TOKEN").ok().filter(|t| !t.is_empty()) {
            tokens
                .add(&t, Role::Admin)
                .map_err(|e| anyhow::anyhow!("WEIR_TOKEN: {e}"))?;
        }
        Ok(tokens)
    }
}

impl ServerArgs {
    fn options(
        self,
        data_dir: PathBuf,
        local_workers: Option<(u32, u32)>,
    ) -> anyhow::Result<local::ServeOptions> {
        let tokens = self.access.tokens()?;
        let tls = self.access.tls()?;
        let allow_dirs = self.access.dirs(|| {
            if local_workers.is_some() {
                // The working directory, unless it is the root of the file
                // system: that would grant every file.
                let cwd = std::env::current_dir()
                    .ok()
                    .filter(|d| d.parent().is_some());
                cwd.into_iter().chain([data_dir.clone()]).collect()
            } else {
                vec![data_dir.join("io")]
            }
        });
        Ok(local::ServeOptions {
            public_names: self.public_names,
            allow_dirs,
            tokens,
            tls,
            insecure: self.access.insecure,
            listen: self.listen,
            rpc_listen: self.rpc_listen,
            data_dir,
            max_upload: self.max_upload_mib << 20,
            host: HostConfig {
                cache_dir: Some(cache_dir()),
                ..HostConfig::default()
            },
            local_workers,
            default_backend: StateBackendKind::Memory,
            heartbeats: weir_coordinator::slot_manager::HeartbeatConfig {
                interval: std::time::Duration::from_millis(self.heartbeat_interval_ms.max(1)),
                timeout: std::time::Duration::from_millis(self.heartbeat_timeout_ms.max(1)),
            },
        })
    }
}

#[derive(clap::Args)]
struct CoordinatorArg {
    /// The coordinator's REST API.
    #[arg(
        long = "coordinator",
        env = "WEIR_COORDINATOR",
        default_value = "http://127.0.0.1:8081"
    )]
    url: String,
}

/// Where `scripts/setup.sh` installs the toolchains of operator languages
/// other than Rust: `WEIR_TOOLCHAINS`, by default `~/.cache/weir/toolchains`.
fn toolchains_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("WEIR_TOOLCHAINS") {
        return PathBuf::from(d);
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    home.join(".cache").join("weir").join("toolchains")
}

fn cache_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("WEIR_CACHE_DIR") {
        return PathBuf::from(d);
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    home.join(".cache").join("weir").join("components")
}

async fn run(
    path: &Path,
    parallelism: Option<u32>,
    params: &[String],
    config: HostConfig,
    state_backend: StateBackendKind,
    metrics: Option<&Path>,
) -> anyhow::Result<()> {
    let mut metrics = metrics
        .map(|path| {
            std::fs::File::create(path)
                .map(std::io::BufWriter::new)
                .with_context(|| format!("cannot create {}", path.display()))
        })
        .transpose()?;
    let params = params
        .iter()
        .map(|p| weir_model::manifest::parse_param(p))
        .collect::<Result<Vec<_>, _>>()?;
    let bundle = bundle::open(path, true)?;
    let runtime = WasmRuntime::new(config)?;
    let components = bundle.load(&runtime)?;
    let submission = Submission {
        params,
        parallelism,
        builtin_params: vec![("bundle_dir".into(), bundle.dir.display().to_string())],
    };
    let mut graph = weir_coordinator::plan(&bundle.manifest, &submission, &components.exported())?;
    // Every subtask cuts its file's split from the size it has now.
    graph.fix_file_sizes();
    let params = graph.params.clone().into_iter().collect();
    // RocksDB state of this run lives in a directory of its own, removed
    // when the run ends.
    let state_dir = tempfile::Builder::new()
        .prefix("weir-run-")
        .tempdir()
        .context("cannot create a directory for the job's state")?;
    let state = StateSetup::for_job(&graph, "run", state_backend, state_dir.path());
    let factory = Arc::new(WasmOperatorFactory {
        runtime,
        components,
        params,
        state,
        attempt: 0,
    });
    let job = LocalJob::new(graph, factory);
    let cancel = job.cancel.clone();
    let name = job.graph.name.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            eprintln!("canceling…");
            cancel.store(true, Ordering::Relaxed);
        }
    });
    // Records read by the sources, shown while the job runs.
    let sources: Vec<usize> = job
        .graph
        .vertices
        .iter()
        .filter(|v| matches!(v.kind, weir_model::VertexKind::Source(_)))
        .map(|v| v.id)
        .collect();
    let counters = job.counters.clone();
    let mut progress = progress::Progress::new(&name);
    let started = std::time::Instant::now();
    // Often enough that a job over in a fifth of a second (10 M events of
    // a stateless job) still gives its middle a slope.
    let tick = if metrics.is_some() { 10 } else { 200 };
    let running = tokio::spawn(run_job(job));
    tokio::pin!(running);
    let report = loop {
        tokio::select! {
            done = &mut running => break done.map_err(|e| anyhow::anyhow!("the job panicked: {e}"))?,
            _ = tokio::time::sleep(std::time::Duration::from_millis(tick)) => {
                let read = sources
                    .iter()
                    .flat_map(|&v| counters.vertices[v].1.iter())
                    .map(|c| c.get().1)
                    .sum();
                progress.update("running", read);
                if let Some(out) = &mut metrics {
                    write_metrics(out, started, &counters.report())?;
                }
            }
        }
    };
    progress.finish();
    let report = report?;
    if let Some(out) = &mut metrics {
        write_metrics(out, started, &report.vertices)?;
        out.flush().context("cannot write the metrics file")?;
    }
    eprintln!(
        "job `{name}` finished in {:.2} s",
        report.duration.as_secs_f64()
    );
    for v in &report.vertices {
        eprintln!(
            "  {:<16} parallelism {:>2}  records in {:>10}  out {:>10}",
            v.name, v.parallelism, v.records_in, v.records_out
        );
    }
    Ok(())
}

/// One line of `weir run --metrics`: the time since the job started and
/// every vertex's counters.
fn write_metrics(
    out: &mut impl std::io::Write,
    started: std::time::Instant,
    vertices: &[weir_model::metrics::VertexReport],
) -> anyhow::Result<()> {
    let line = serde_json::json!({
        "elapsed_ms": started.elapsed().as_secs_f64() * 1000.0,
        "vertices": vertices,
    });
    writeln!(out, "{line}").context("cannot write the metrics file")
}

fn build(path: &Path) -> anyhow::Result<()> {
    let bundle = bundle::open(path, true)?;
    let runtime = WasmRuntime::new(HostConfig {
        cache_dir: Some(cache_dir()),
        ..HostConfig::default()
    })?;
    let components = bundle.load(&runtime)?;
    // Check the manifest against the components, with the defaults of its
    // parameters when they all have one.
    let submission = Submission {
        builtin_params: vec![("bundle_dir".into(), bundle.dir.display().to_string())],
        ..Submission::default()
    };
    match weir_coordinator::plan(&bundle.manifest, &submission, &components.exported()) {
        Ok(_) | Err(weir_model::ManifestError::MissingParam { .. }) => {}
        Err(e) => return Err(e.into()),
    }
    let out = bundle
        .dir
        .join("dist")
        .join(format!("{}.weir", bundle.manifest.job.name));
    bundle::write_archive(&bundle, &out)?;
    if bundle.components.is_empty() {
        println!("operators: built-in only (no component)");
    }
    for c in components.iter() {
        let path = &bundle
            .components
            .iter()
            .find(|b| b.name == c.name)
            .expect("loaded from the bundle")
            .path;
        let operators: Vec<&str> = c.loaded.operators.iter().map(|o| o.name.as_str()).collect();
        if bundle.components.len() == 1 {
            println!("component: {}", path.display());
            println!("operators: {}", operators.join(", "));
        } else {
            println!("component `{}`: {}", c.name, path.display());
            println!("  operators: {}", operators.join(", "));
        }
    }
    println!("{}", out.display());
    Ok(())
}

/// Where a submitted job starts from.
struct StartFrom {
    savepoint: Option<PathBuf>,
    allow_non_restored_state: bool,
}

async fn submit(
    path: &Path,
    parallelism: Option<u32>,
    params: &[String],
    wait: bool,
    url: &str,
    from: StartFrom,
) -> anyhow::Result<()> {
    let params = params
        .iter()
        .map(|p| weir_model::manifest::parse_param(p))
        .collect::<Result<std::collections::BTreeMap<_, _>, _>>()?;
    let bundle = bundle::open(path, true)?;
    let archive = bundle::archive(&bundle)?;
    let client = client::Client::new(url)?;
    let uploaded = client.upload(archive).await?;
    let request = weir_coordinator::jobs::JobRequest {
        bundle: uploaded.id,
        parallelism,
        params,
        from_savepoint: from
            .savepoint
            .as_deref()
            .map(savepoints::absolute)
            .transpose()?,
        allow_non_restored_state: from.allow_non_restored_state,
    };
    let job = client.submit(&request).await?;
    eprintln!("submitted job {} ({})", job.id, job.name);
    if wait {
        let mut progress = progress::Progress::new(&job.name);
        let done = loop {
            let now = client.job(&job.id).await?;
            if now.state.is_terminal() {
                break now;
            }
            let read = now
                .graph
                .vertices
                .iter()
                .zip(&now.vertices)
                .filter(|(g, _)| g.kind == "source")
                .map(|(_, v)| v.records_out)
                .sum();
            progress.update(client::state_name(now.state), read);
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        };
        progress.finish();
        eprint!("{}", client::describe(&done, None));
        println!("{}", job.id);
        if done.state != weir_coordinator::jobs::JobState::Finished {
            anyhow::bail!("job {} {}", job.id, client::state_name(done.state));
        }
    } else {
        println!("{}", job.id);
    }
    Ok(())
}

async fn list(url: &str) -> anyhow::Result<()> {
    let jobs = client::Client::new(url)?.jobs().await?;
    println!(
        "{:<16}  {:<10}  {:<20}  SUBMITTED (ms)",
        "ID", "STATE", "NAME"
    );
    for j in jobs {
        println!(
            "{:<16}  {:<10}  {:<20}  {}",
            j.id,
            client::state_name(j.state),
            j.name,
            j.submitted_at_ms
        );
    }
    Ok(())
}

/// Where a worker listens: its task executor, its data and its metrics.
struct WorkerAddresses<'a> {
    rpc: &'a str,
    data: &'a str,
    metrics: &'a str,
}

async fn worker(
    coordinator: &str,
    listen: WorkerAddresses<'_>,
    slots: u32,
    host: HostConfig,
    storage: local::WorkerStorage,
    access: local::Access,
) -> anyhow::Result<()> {
    let data_dir = &storage.data_dir;
    std::fs::create_dir_all(data_dir)
        .with_context(|| format!("cannot create {}", data_dir.display()))?;
    let runtime = WasmRuntime::new(host)?;
    let started = local::start_worker(
        coordinator,
        listen.rpc,
        listen.data,
        slots,
        runtime,
        storage,
        access.clone(),
    )
    .await?;
    let metrics = local::serve_worker_metrics(
        listen.metrics,
        started.executor.clone(),
        slots,
        access.tls.as_ref(),
    )
    .await?;
    let scheme = weir_model::tls::scheme(access.tls.as_ref());
    println!(
        "weir worker {}: {slots} slots, tasks at {}, data at {}, metrics at {scheme}://{metrics}/metrics, coordinator {coordinator}",
        started.id, started.rpc_address, started.data_address
    );
    eprintln!("{}", local::granted(&started.executor.allowed));
    use std::io::Write;
    std::io::stdout().flush()?;
    tokio::select! {
        r = started.agent => r.map_err(|e| anyhow::anyhow!("the worker stopped: {e}"))?,
        _ = tokio::signal::ctrl_c() => Ok(()),
    }
}

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("WEIR_LOG")
                .unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run {
            bundle,
            parallelism,
            params,
            limits,
            state_backend,
            metrics,
        } => tokio::runtime::Runtime::new()
            .context("cannot start the runtime")
            .and_then(|rt| {
                rt.block_on(run(
                    &bundle,
                    parallelism,
                    &params,
                    limits.host_config(cache_dir()),
                    state_backend,
                    metrics.as_deref(),
                ))
            }),
        Command::New { path, lang } => new::create(&path, lang),
        Command::Build { bundle } => build(&bundle),
        Command::Local {
            server,
            workers,
            slots,
            data_dir,
            state_backend,
            limits,
        } => server
            .options(
                data_dir.unwrap_or_else(local::default_data_dir),
                Some((workers, slots)),
            )
            .and_then(|mut options| {
                options.default_backend = state_backend;
                options.host = limits.host_config(cache_dir());
                tokio::runtime::Runtime::new()
                    .context("cannot start the runtime")
                    .and_then(|rt| rt.block_on(local::serve(options)))
            }),
        Command::Coordinator { server, data_dir } => {
            server.options(data_dir, None).and_then(|options| {
                tokio::runtime::Runtime::new()
                    .context("cannot start the runtime")
                    .and_then(|rt| rt.block_on(local::serve(options)))
            })
        }
        Command::Worker {
            coordinator,
            rpc_listen,
            data_listen,
            slots,
            metrics_listen,
            data_dir,
            state_backend,
            access,
            limits,
        } => {
            let allow_dirs = access.dirs(|| vec![data_dir.join("io")]);
            tokio::runtime::Runtime::new()
                .context("cannot start the runtime")
                .and_then(|rt| {
                    let tokens = access.tokens()?;
                    let tls = access.tls()?;
                    // A cluster speaks TLS everywhere or nowhere.
                    match (tls.is_some(), coordinator.starts_with("https://")) {
                        (true, false) => anyhow::bail!(
                            "this worker serves TLS (--tls-cert): give --coordinator as https://, the coordinator's --rpc-listen with its own certificate"
                        ),
                        (false, true) => anyhow::bail!(
                            "--coordinator {coordinator} speaks TLS: give this worker the cluster's certificate and key (--tls-cert, --tls-key, and --tls-ca if they are signed by an authority)"
                        ),
                        _ => {}
                    }
                    rt.block_on(local::refuse_open_reach(
                        &tokens,
                        access.insecure,
                        &[&rpc_listen, &data_listen],
                    ))?;
                    rt.block_on(local::warn_clear_text(
                        tls.as_ref(),
                        &[&rpc_listen, &data_listen],
                    ));
                    let allowed = weir_model::access::AllowedDirs::new(&allow_dirs)?;
                    rt.block_on(worker(
                        &coordinator,
                        WorkerAddresses {
                            rpc: &rpc_listen,
                            data: &data_listen,
                            metrics: &metrics_listen,
                        },
                        slots,
                        limits.host_config(cache_dir()),
                        local::WorkerStorage {
                            data_dir,
                            default_backend: state_backend,
                            allowed,
                        },
                        local::Access {
                            tokens: Arc::new(tokens),
                            tls,
                        },
                    ))
                })
        }
        Command::Submit {
            bundle,
            parallelism,
            params,
            wait,
            from_savepoint,
            allow_non_restored_state,
            coordinator,
        } => tokio::runtime::Runtime::new()
            .context("cannot start the runtime")
            .and_then(|rt| {
                rt.block_on(submit(
                    &bundle,
                    parallelism,
                    &params,
                    wait,
                    &coordinator.url,
                    StartFrom {
                        savepoint: from_savepoint,
                        allow_non_restored_state,
                    },
                ))
            }),
        Command::Savepoint {
            job,
            dir,
            coordinator,
        } => tokio::runtime::Runtime::new()
            .context("cannot start the runtime")
            .and_then(|rt| {
                rt.block_on(savepoints::savepoint(
                    &coordinator.url,
                    &job,
                    dir.as_deref(),
                ))
            }),
        Command::Stop {
            job,
            dir,
            drain,
            coordinator,
        } => tokio::runtime::Runtime::new()
            .context("cannot start the runtime")
            .and_then(|rt| {
                rt.block_on(savepoints::stop(
                    &coordinator.url,
                    &job,
                    dir.as_deref(),
                    drain,
                ))
            }),
        Command::Rescale {
            job,
            parallelism,
            coordinator,
        } => tokio::runtime::Runtime::new()
            .context("cannot start the runtime")
            .and_then(|rt| rt.block_on(savepoints::rescale(&coordinator.url, &job, parallelism))),
        Command::Upgrade {
            job,
            bundle,
            allow_non_restored_state,
            coordinator,
        } => tokio::runtime::Runtime::new()
            .context("cannot start the runtime")
            .and_then(|rt| {
                rt.block_on(savepoints::upgrade(
                    &coordinator.url,
                    &job,
                    &bundle,
                    allow_non_restored_state,
                ))
            }),
        Command::State {
            savepoint,
            operator,
            state,
        } => state::print(
            &savepoint,
            operator.as_deref(),
            state.as_deref(),
            &mut std::io::BufWriter::new(std::io::stdout().lock()),
        ),
        Command::List { coordinator } => tokio::runtime::Runtime::new()
            .context("cannot start the runtime")
            .and_then(|rt| rt.block_on(list(&coordinator.url))),
        Command::Status { job, coordinator } => tokio::runtime::Runtime::new()
            .context("cannot start the runtime")
            .and_then(|rt| {
                rt.block_on(async {
                    let client = client::Client::new(&coordinator.url)?;
                    let job = client.job(&job).await?;
                    let metrics = client.metrics(&job.id).await.ok();
                    print!("{}", client::describe(&job, metrics.as_ref()));
                    Ok(())
                })
            }),
        Command::Checkpoints { job, coordinator } => tokio::runtime::Runtime::new()
            .context("cannot start the runtime")
            .and_then(|rt| {
                rt.block_on(async {
                    let client = client::Client::new(&coordinator.url)?;
                    let checkpoints = client.checkpoints(&job).await?;
                    print!("{}", client::describe_checkpoints(&job, &checkpoints));
                    Ok(())
                })
            }),
        Command::Cancel { job, coordinator } => tokio::runtime::Runtime::new()
            .context("cannot start the runtime")
            .and_then(|rt| {
                rt.block_on(async {
                    let job = client::Client::new(&coordinator.url)?.cancel(&job).await?;
                    println!("job {} is {}", job.id, client::state_name(job.state));
                    Ok(())
                })
            }),
    };
    if let Err(e) = result {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}
