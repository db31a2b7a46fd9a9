//! The coordinator process: the REST API and the gRPC services for workers
//! (registration and heartbeats, job reports); jobs run in the workers'
//! slots. `weir local` is the same, with its workers started in the same
//! process: the same code paths, over loopback.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tonic::service::InterceptorLayer;
use weir_coordinator::auth::Tokens;
use weir_coordinator::blob::BlobStore;
use weir_coordinator::bundles::BundleStore;
use weir_coordinator::job_master::{JobMasters, JobRunner};
use weir_coordinator::jobs::Jobs;
use weir_coordinator::rest::{AppState, app};
use weir_coordinator::slot_manager::{HeartbeatConfig, SlotManager};
use weir_host::{HostConfig, WasmRuntime};
use weir_model::access::AllowedDirs;
use weir_model::auth::{PresentToken, RequireToken};
use weir_model::fault_tolerance::StateBackendKind;
use weir_model::tls::Tls;

/// Where `weir local` keeps its data when not told.
pub fn default_data_dir() -> PathBuf {
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    home.join(".local").join("share").join("weir").join("local")
}

/// How the coordinator serves.
pub struct ServeOptions {
    /// Host names the REST API answers to, besides IP addresses and
    /// localhost.
    pub public_names: Vec<String>,
    /// REST address.
    pub listen: String,
    /// gRPC address for workers.
    pub rpc_listen: String,
    /// Bundles, blobs and job records.
    pub data_dir: PathBuf,
    /// Largest upload, bytes.
    pub max_upload: usize,
    /// The Wasm host: the in-process workers' guest limits, and where
    /// compiled components are cached.
    pub host: HostConfig,
    /// Heartbeat interval and timeout.
    pub heartbeats: HeartbeatConfig,
    /// Workers to start in this process (`weir local`): how many, and
    /// their slots each.
    pub local_workers: Option<(u32, u32)>,
    /// The default state backend of the in-process workers.
    pub default_backend: StateBackendKind,
    /// The directories jobs' sources and sinks may reach.
    pub allow_dirs: Vec<PathBuf>,
    /// The tokens the REST API accepts (open: none).
    pub tokens: Tokens,
    /// Serve open on addresses other machines reach.
    pub insecure: bool,
    /// TLS on every listener and connection.
    pub tls: Option<Tls>,
}

/// Who a server process lets in, and how it talks to the cluster's other
/// processes: the cluster's tokens, and its TLS.
#[derive(Clone)]
pub struct Access {
    /// The tokens it accepts and presents.
    pub tokens: Arc<Tokens>,
    /// TLS on its listeners and connections, if the cluster has it.
    pub tls: Option<Tls>,
}

impl Access {
    /// What its gRPC clients present.
    pub fn present(&self) -> PresentToken {
        PresentToken::of(&self.tokens).with_tls(self.tls.as_ref())
    }

    /// A gRPC server with the cluster's TLS, if any.
    fn grpc_server(&self) -> anyhow::Result<tonic::transport::Server> {
        let server = tonic::transport::Server::builder();
        Ok(match &self.tls {
            Some(tls) => server.tls_config(tls.grpc_server())?,
            None => server,
        })
    }
}

/// The line that tells which directories jobs' files may be in.
pub fn granted(allowed: &AllowedDirs) -> String {
    let dirs: Vec<String> = allowed
        .roots()
        .unwrap_or_default()
        .iter()
        .map(|d| d.display().to_string())
        .collect();
    format!(
        "jobs' file sources and sinks may reach: {} (--allow-dir)",
        dirs.join(", ")
    )
}

/// Refuse to serve `listens` open (without tokens) where other machines
/// reach them, unless `insecure`.
pub async fn refuse_open_reach(
    tokens: &Tokens,
    insecure: bool,
    listens: &[&str],
) -> anyhow::Result<()> {
    if !tokens.is_open() || insecure {
        return Ok(());
    }
    let mut reachable = Vec::new();
    for &listen in listens {
        let addrs = tokio::net::lookup_host(listen)
            .await
            .with_context(|| format!("cannot resolve {listen}"))?;
        if addrs.into_iter().any(|a| !a.ip().is_loopback()) {
            reachable.push(listen);
        }
    }
    if !reachable.is_empty() {
        anyhow::bail!(
            "refusing to serve {} without a token: other machines can reach it; give --token-file or WEIR_TOKEN (or --insecure to serve it open)",
            reachable.join(" and ")
        );
    }
    Ok(())
}

/// Say so when an address other machines reach serves without TLS.
pub async fn warn_clear_text(tls: Option<&Tls>, listens: &[&str]) {
    if tls.is_some() {
        return;
    }
    for &listen in listens {
        let reachable = tokio::net::lookup_host(listen)
            .await
            .is_ok_and(|mut addrs| addrs.any(|a| !a.ip().is_loopback()));
        if reachable {
            eprintln!(
                "{listen} is reachable from other machines and serves without TLS: tokens and data cross the network in clear text (give --tls-cert and --tls-key)"
            );
        }
    }
}

/// Serve until interrupted.
pub async fn serve(o: ServeOptions) -> anyhow::Result<()> {
    // An open API only where no other machine reaches it: checked before
    // anything listens.
    refuse_open_reach(&o.tokens, o.insecure, &[&o.listen, &o.rpc_listen]).await?;
    warn_clear_text(o.tls.as_ref(), &[&o.listen, &o.rpc_listen]).await;
    std::fs::create_dir_all(&o.data_dir)
        .with_context(|| format!("cannot create {}", o.data_dir.display()))?;
    // Held until the coordinator stops: one coordinator per data directory.
    let _lock = weir_coordinator::data_dir::DataDirLock::take(&o.data_dir)?;
    let allowed = AllowedDirs::new(&o.allow_dirs)?;
    let runtime = WasmRuntime::new(o.host)?;
    let blobs = BlobStore::local(&o.data_dir.join("blobs"))?;
    let bundles = Arc::new(BundleStore::open(
        &o.data_dir,
        blobs,
        runtime.clone(),
        512 << 20,
    )?);
    let slots = SlotManager::new(o.heartbeats);
    // Checkpoints go under the data directory; workers on other machines
    // need it mounted at the same path (or another storage, later).
    let checkpoints = weir_model::storage::file_url(&o.data_dir.join("checkpoints"))?;
    let access = Access {
        tokens: Arc::new(o.tokens),
        tls: o.tls,
    };
    let tokens = access.tokens.clone();
    let scheme = weir_model::tls::scheme(access.tls.as_ref());
    let on_workers = JobMasters::new(slots.clone(), Some(checkpoints), access.present());
    let runner: Box<dyn JobRunner> = Box::new(on_workers.clone());
    let jobs = Jobs::open(&o.data_dir, bundles.clone(), runner, allowed.clone())?;
    let lost = on_workers.clone();
    slots.watch(move |worker| {
        let (lost, worker) = (lost.clone(), worker.to_owned());
        tokio::spawn(async move { lost.worker_lost(&worker, "it missed its heartbeats").await });
    });

    let listener = tokio::net::TcpListener::bind(&o.listen)
        .await
        .with_context(|| format!("cannot listen on {}", o.listen))?;
    let rpc_listener = tokio::net::TcpListener::bind(&o.rpc_listen)
        .await
        .with_context(|| format!("cannot listen on {}", o.rpc_listen))?;
    let (addr, rpc_addr) = (listener.local_addr()?, rpc_listener.local_addr()?);
    if tokens.is_open() {
        eprintln!(
            "the REST API at {scheme}://{addr} is open: whoever reaches it may submit and cancel jobs (give --token-file or WEIR_TOKEN to require a token)"
        );
    }
    let rpc = access
        .grpc_server()?
        .http2_keepalive_interval(Some(Duration::from_secs(10)))
        .layer(InterceptorLayer::new(RequireToken(tokens.clone())))
        .add_service(slots.service())
        .add_service(on_workers.reports())
        .serve_with_incoming(tokio_stream_of(rpc_listener));
    tokio::spawn(async move {
        if let Err(e) = rpc.await {
            tracing::error!("the workers' gRPC service stopped: {e}");
        }
    });
    if let Some((count, slots)) = o.local_workers {
        let rpc_url = format!("{scheme}://{rpc_addr}");
        for _ in 0..count {
            start_worker(
                &rpc_url,
                "127.0.0.1:0",
                "127.0.0.1:0",
                slots,
                runtime.clone(),
                WorkerStorage {
                    data_dir: o.data_dir.join("workers"),
                    default_backend: o.default_backend,
                    allowed: allowed.clone(),
                },
                access.clone(),
            )
            .await?;
        }
    }
    // Scripts and tests read this line to find the services.
    println!(
        "weir coordinator: REST API and dashboard on {scheme}://{addr}, workers connect to {scheme}://{rpc_addr} (data in {})",
        o.data_dir.display()
    );
    eprintln!("{}", granted(&allowed));
    use std::io::Write;
    std::io::stdout().flush()?;
    let router = app(AppState {
        bundles,
        jobs: jobs.clone(),
        slots,
        max_upload: o.max_upload,
        tokens: tokens.clone(),
        // An open API checks the host each request names (a page on a
        // rebound domain cannot drive it); one with tokens needs none.
        hosts: Arc::new(if tokens.is_open() {
            weir_coordinator::auth::AllowedHosts::new(o.public_names)
        } else {
            weir_coordinator::auth::AllowedHosts::any()
        }),
    });
    // Jobs that ran when the coordinator stopped resume as workers
    // register again.
    jobs.resume_recovering().await;
    weir_coordinator::tls::serve(listener, access.tls.as_ref(), router, async {
        let _ = tokio::signal::ctrl_c().await;
    })
    .await?;
    Ok(())
}

fn tokio_stream_of(
    listener: tokio::net::TcpListener,
) -> impl futures::Stream<Item = std::io::Result<tokio::net::TcpStream>> {
    futures::stream::unfold(listener, |l| async move {
        let next = l.accept().await.map(|(s, _)| s);
        Some((next, l))
    })
}

/// A worker started in this process.
pub struct StartedWorker {
    /// Its id.
    pub id: String,
    /// Its task executor.
    pub rpc_address: String,
    /// Its data server.
    pub data_address: String,
    /// Registration and heartbeats; ends only on error.
    pub agent: tokio::task::JoinHandle<anyhow::Result<()>>,
    /// What it runs.
    pub executor: Arc<weir_worker::executor::Executor>,
}

/// Where a worker keeps its files, and its default state backend.
#[derive(Debug, Clone)]
pub struct WorkerStorage {
    /// The worker's data directory; each worker process (or in-process
    /// worker of `weir local`) uses a directory of its own under it, named
    /// after its id.
    pub data_dir: PathBuf,
    /// The state backend of jobs whose manifest names none.
    pub default_backend: StateBackendKind,
    /// The directories jobs' sources and sinks may reach.
    pub allowed: AllowedDirs,
}

static WORKERS_STARTED: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// Start a worker (its data server, its task executor, and its link to the
/// coordinator at `coordinator`) in this process.
pub async fn start_worker(
    coordinator: &str,
    rpc_listen: &str,
    data_listen: &str,
    slots: u32,
    runtime: Arc<WasmRuntime>,
    storage: WorkerStorage,
    access: Access,
) -> anyhow::Result<StartedWorker> {
    if slots == 0 {
        anyhow::bail!("a worker needs at least one slot");
    }
    let hostname = std::fs::read_to_string("/etc/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_default();
    let n = WORKERS_STARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let host = if hostname.is_empty() {
        "worker"
    } else {
        hostname.as_str()
    };
    let id = if n == 0 {
        format!("{host}-{}", std::process::id())
    } else {
        format!("{host}-{}-{n}", std::process::id())
    };
    let server = Arc::new(
        weir_worker::network::DataServer::bind_with(
            data_listen,
            access.tokens.clone(),
            access.tls.clone(),
        )
        .await?,
    );
    let executor = weir_worker::executor::Executor::new(
        id.clone(),
        runtime,
        server.clone(),
        coordinator.to_owned(),
        weir_worker::executor::ExecutorSettings {
            data_dir: storage.data_dir.join(&id),
            default_backend: storage.default_backend,
            allowed: storage.allowed,
            present: access.present(),
        },
    );
    let rpc = tokio::net::TcpListener::bind(rpc_listen)
        .await
        .with_context(|| format!("cannot listen on {rpc_listen}"))?;
    let rpc_address = format!(
        "{}://{}",
        weir_model::tls::scheme(access.tls.as_ref()),
        rpc.local_addr()?
    );
    let service = executor.service();
    let server_builder = access.grpc_server()?;
    tokio::spawn(async move {
        if let Err(e) = server_builder
            .layer(InterceptorLayer::new(RequireToken(access.tokens)))
            .add_service(service)
            .serve_with_incoming(tokio_stream_of(rpc))
            .await
        {
            tracing::error!("the task executor stopped: {e}");
        }
    });
    let me = weir_worker::agent::WorkerIdentity {
        id: id.clone(),
        slots,
        data_address: server.addr().to_string(),
        hostname,
        rpc_address: rpc_address.clone(),
    };
    let coordinator = coordinator.to_owned();
    let (reporting, stopping) = (executor.clone(), executor.clone());
    let present = executor.present.clone();
    let agent = tokio::spawn(async move {
        weir_worker::agent::run(
            &coordinator,
            me,
            present,
            move || reporting.progress(),
            move || stopping.cancel_all(),
        )
        .await
    });
    Ok(StartedWorker {
        id,
        rpc_address,
        data_address: server.addr().to_string(),
        agent,
        executor,
    })
}

/// Serve a worker's Prometheus metrics at `http://{listen}/metrics`: the
/// subtasks it runs, its slots. Returns the address it listens on.
pub async fn serve_worker_metrics(
    listen: &str,
    executor: Arc<weir_worker::executor::Executor>,
    slots: u32,
    tls: Option<&Tls>,
) -> anyhow::Result<std::net::SocketAddr> {
    use weir_coordinator::metrics::{Metrics, gauge, job_families, prometheus_text};
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    let addr = listener.local_addr()?;
    let metrics = Arc::new(Metrics::default());
    // A sample a second, for the rates.
    let (sampling, sampled) = (executor.clone(), metrics.clone());
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(std::time::Duration::from_secs(1));
        loop {
            tick.tick().await;
            for (id, _, counters) in sampling.running_jobs() {
                sampled.sample(&id, &counters);
            }
        }
    });
    let render = move || -> anyhow::Result<String> {
        let jobs: Vec<_> = executor
            .running_jobs()
            .into_iter()
            .map(|(id, name, counters)| (name, metrics.job(&id, Some(&counters))))
            .collect();
        let mut families = job_families(&jobs)?;
        families.push(gauge(
            "weir_worker_slots",
            "Task slots this worker offers.",
            f64::from(slots),
        )?);
        families.push(gauge(
            "weir_worker_jobs_running",
            "Jobs with subtasks on this worker.",
            jobs.len() as f64,
        )?);
        Ok(prometheus_text(families))
    };
    let app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let text = render();
            async move {
                match text {
                    Ok(t) => (
                        axum::http::StatusCode::OK,
                        [(
                            axum::http::header::CONTENT_TYPE,
                            "text/plain; version=0.0.4",
                        )],
                        t,
                    ),
                    Err(e) => (
                        axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                        [(axum::http::header::CONTENT_TYPE, "text/plain")],
                        format!("{e:#}"),
                    ),
                }
            }
        }),
    );
    let tls = tls.cloned();
    tokio::spawn(async move {
        let served =
            weir_coordinator::tls::serve(listener, tls.as_ref(), app, std::future::pending()).await;
        if let Err(e) = served {
            tracing::error!("the metrics server stopped: {e}");
        }
    });
    Ok(addr)
}
