//! `weir local`: the coordinator's REST API with an embedded scheduler that
//! runs jobs in this process.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use weir_coordinator::blob::BlobStore;
use weir_coordinator::bundles::BundleStore;
use weir_coordinator::jobs::{EmbeddedScheduler, Jobs};
use weir_coordinator::rest::{AppState, app};
use weir_host::{HostConfig, WasmRuntime};

/// Where `weir local` keeps its data when not told.
fn default_data_dir() -> PathBuf {
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    home.join(".local").join("share").join("weir").join("local")
}

/// Serve until interrupted.
pub async fn serve(
    listen: &str,
    data_dir: Option<PathBuf>,
    max_upload: usize,
    cache_dir: PathBuf,
) -> anyhow::Result<()> {
    let data_dir = data_dir.unwrap_or_else(default_data_dir);
    std::fs::create_dir_all(&data_dir)
        .with_context(|| format!("cannot create {}", data_dir.display()))?;
    let runtime = WasmRuntime::new(HostConfig {
        cache_dir: Some(cache_dir),
        ..HostConfig::default()
    })?;
    let blobs = BlobStore::local(&data_dir.join("blobs"))?;
    let bundles = Arc::new(BundleStore::open(
        &data_dir,
        blobs,
        runtime.clone(),
        512 << 20,
    )?);
    let scheduler = Box::new(EmbeddedScheduler {
        runtime: runtime.clone(),
    });
    let jobs = Jobs::open(&data_dir, bundles.clone(), runtime, scheduler)?;
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    let addr = listener.local_addr()?;
    // Scripts and tests read this line to find the API.
    println!(
        "weir local: REST API on http://{addr} (data in {})",
        data_dir.display()
    );
    use std::io::Write;
    std::io::stdout().flush()?;
    let router = app(AppState {
        bundles,
        jobs,
        max_upload,
    });
    axum::serve(listener, router)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    Ok(())
}
