//! `weir`: build and run Weir jobs.

mod bundle;

/// mimalloc: a runtime that moves many small records allocates a lot, and
/// glibc's allocator spends a third of a word count's time there.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use anyhow::Context;
use clap::{Parser, Subcommand};
use weir_coordinator::Submission;
use weir_host::{HostConfig, WasmRuntime};
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
        /// Linear memory per operator instance, in MiB.
        #[arg(long, default_value_t = 256)]
        memory_limit_mib: u64,
        /// CPU time per call into an operator, in milliseconds.
        #[arg(long, default_value_t = 5000)]
        call_timeout_ms: u64,
    },
    /// Build a bundle's component and its single-file archive (dist/<job>.weir).
    Build {
        /// The bundle directory.
        bundle: PathBuf,
    },
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
    memory_limit_mib: u64,
    call_timeout_ms: u64,
) -> anyhow::Result<()> {
    let params = params
        .iter()
        .map(|p| weir_model::manifest::parse_param(p))
        .collect::<Result<Vec<_>, _>>()?;
    let bundle = bundle::open(path, true)?;
    let config = HostConfig {
        memory_limit_bytes: memory_limit_mib << 20,
        call_timeout_ms,
        cache_dir: Some(cache_dir()),
        ..HostConfig::default()
    };
    let runtime = WasmRuntime::new(config)?;
    let component = runtime
        .load(&bundle.component)
        .with_context(|| format!("component {}", bundle.component_path.display()))?;
    let submission = Submission {
        params,
        parallelism,
        builtin_params: vec![("bundle_dir".into(), bundle.dir.display().to_string())],
    };
    let graph = weir_coordinator::plan(&bundle.manifest, &submission, &component.exported())?;
    let params = graph.params.clone().into_iter().collect();
    let factory = Arc::new(WasmOperatorFactory {
        runtime,
        component,
        params,
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
    let report = run_job(job).await?;
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

fn build(path: &Path) -> anyhow::Result<()> {
    let bundle = bundle::open(path, true)?;
    let runtime = WasmRuntime::new(HostConfig {
        cache_dir: Some(cache_dir()),
        ..HostConfig::default()
    })?;
    let component = runtime
        .load(&bundle.component)
        .with_context(|| format!("component {}", bundle.component_path.display()))?;
    // Check the manifest against the component, with the defaults of its
    // parameters when they all have one.
    let submission = Submission {
        builtin_params: vec![("bundle_dir".into(), bundle.dir.display().to_string())],
        ..Submission::default()
    };
    match weir_coordinator::plan(&bundle.manifest, &submission, &component.exported()) {
        Ok(_) | Err(weir_model::ManifestError::MissingParam { .. }) => {}
        Err(e) => return Err(e.into()),
    }
    let out = bundle
        .dir
        .join("dist")
        .join(format!("{}.weir", bundle.manifest.job.name));
    bundle::write_archive(&bundle, &out)?;
    println!("component: {}", bundle.component_path.display());
    println!(
        "operators: {}",
        component
            .operators
            .iter()
            .map(|o| o.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!("{}", out.display());
    Ok(())
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
            memory_limit_mib,
            call_timeout_ms,
        } => tokio::runtime::Runtime::new()
            .context("cannot start the runtime")
            .and_then(|rt| {
                rt.block_on(run(
                    &bundle,
                    parallelism,
                    &params,
                    memory_limit_mib,
                    call_timeout_ms,
                ))
            }),
        Command::Build { bundle } => build(&bundle),
    };
    if let Err(e) = result {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}
