//! The coordinator process: the REST API and the gRPC services for workers
//! (registration and heartbeats, job reports). `weir coordinator` deploys
//! jobs to the workers' slots; `weir local` runs them in its own process.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use weir_coordinator::blob::BlobStore;
use weir_coordinator::bundles::BundleStore;
use weir_coordinator::jobs::{EmbeddedScheduler, Jobs, Scheduler};
use weir_coordinator::rest::{AppState, app};
use weir_coordinator::scheduler::WorkerScheduler;
use weir_coordinator::slot_manager::{HeartbeatConfig, SlotManager};
use weir_host::{HostConfig, WasmRuntime};

/// Where `weir local` keeps its data when not told.
pub fn default_data_dir() -> PathBuf {
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    home.join(".local").join("share").join("weir").join("local")
}

/// How the coordinator serves.
pub struct ServeOptions {
    /// REST address.
    pub listen: String,
    /// gRPC address for workers.
    pub rpc_listen: String,
    /// Bundles, blobs and job records.
    pub data_dir: PathBuf,
    /// Largest upload, bytes.
    pub max_upload: usize,
    /// Compiled components.
    pub cache_dir: PathBuf,
    /// Heartbeat interval and timeout.
    pub heartbeats: HeartbeatConfig,
    /// Run jobs in this process (`weir local`) instead of on workers.
    pub embedded: bool,
}

/// Serve until interrupted.
pub async fn serve(o: ServeOptions) -> anyhow::Result<()> {
    std::fs::create_dir_all(&o.data_dir)
        .with_context(|| format!("cannot create {}", o.data_dir.display()))?;
    let runtime = WasmRuntime::new(HostConfig {
        cache_dir: Some(o.cache_dir),
        ..HostConfig::default()
    })?;
    let blobs = BlobStore::local(&o.data_dir.join("blobs"))?;
    let bundles = Arc::new(BundleStore::open(
        &o.data_dir,
        blobs,
        runtime.clone(),
        512 << 20,
    )?);
    let slots = SlotManager::new(o.heartbeats);
    let on_workers = WorkerScheduler::new(slots.clone());
    let scheduler: Box<dyn Scheduler> = if o.embedded {
        Box::new(EmbeddedScheduler {
            runtime: runtime.clone(),
        })
    } else {
        Box::new(on_workers.clone())
    };
    let jobs = Jobs::open(&o.data_dir, bundles.clone(), runtime, scheduler)?;
    let lost = on_workers.clone();
    slots.watch(move |worker| {
        let (lost, worker) = (lost.clone(), worker.to_owned());
        tokio::spawn(async move { lost.worker_lost(&worker).await });
    });

    let listener = tokio::net::TcpListener::bind(&o.listen)
        .await
        .with_context(|| format!("cannot listen on {}", o.listen))?;
    let rpc_listener = tokio::net::TcpListener::bind(&o.rpc_listen)
        .await
        .with_context(|| format!("cannot listen on {}", o.rpc_listen))?;
    let (addr, rpc_addr) = (listener.local_addr()?, rpc_listener.local_addr()?);
    let rpc = tonic::transport::Server::builder()
        .http2_keepalive_interval(Some(Duration::from_secs(10)))
        .add_service(slots.service())
        .add_service(on_workers.reports())
        .serve_with_incoming(tokio_stream_of(rpc_listener));
    tokio::spawn(async move {
        if let Err(e) = rpc.await {
            tracing::error!("the workers' gRPC service stopped: {e}");
        }
    });
    // Scripts and tests read this line to find the services.
    println!(
        "weir coordinator: REST API on http://{addr}, workers connect to http://{rpc_addr} (data in {})",
        o.data_dir.display()
    );
    use std::io::Write;
    std::io::stdout().flush()?;
    let router = app(AppState {
        bundles,
        jobs,
        slots,
        max_upload: o.max_upload,
    });
    axum::serve(listener, router)
        .with_graceful_shutdown(async {
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
