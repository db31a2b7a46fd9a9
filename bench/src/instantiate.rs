//! What an operator instance costs, per language: loading a component
//! (compiled once and cached, as workers do), and the time and resident
//! memory each instance of one operator takes to start (instantiation and
//! the guest's `create`).

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use weir_host::{HostConfig, OperatorInstance, OperatorSpec, TaskIdent, WasmRuntime};

/// This process's resident memory, bytes.
fn resident() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

/// Start `instances` instances of `operator` of the component at `path`;
/// print one JSON line: load times (compiling, and from the cache), the
/// mean time to start an instance, and resident memory per instance.
pub fn run(path: &Path, operator: &str, instances: usize) -> anyhow::Result<()> {
    let cache = tempfile::tempdir()?;
    let config = || HostConfig {
        cache_dir: Some(cache.path().to_path_buf()),
        max_instances: instances as u32 + 8,
        ..HostConfig::default()
    };
    let bytes = std::fs::read(path)?;
    let started = Instant::now();
    WasmRuntime::new(config())?.load(&bytes)?;
    let compile = started.elapsed();
    // A second process-like runtime: the compiled artifact from the cache.
    let runtime = WasmRuntime::new(config())?;
    let started = Instant::now();
    let component = runtime.load(&bytes)?;
    let load = started.elapsed();
    let start = |i: usize| {
        let spec = OperatorSpec {
            function: operator,
            config: Vec::new(),
            window: None,
            codecs: Default::default(),
            limits: Default::default(),
        };
        let ident = TaskIdent {
            job: "instantiate".into(),
            operator: operator.into(),
            subtask: i as u32,
        };
        OperatorInstance::new(
            runtime.clone(),
            Arc::clone(&component),
            spec,
            ident,
            Box::new(weir_host::MemoryStateBackend::new()),
        )
    };
    // One instance first, so that what every instance shares is counted once.
    let first = start(0)?;
    let before = resident();
    let started = Instant::now();
    let mut all = Vec::with_capacity(instances);
    for i in 0..instances {
        all.push(start(i + 1)?);
    }
    let elapsed = started.elapsed();
    let after = resident();
    println!(
        "{}",
        serde_json::json!({
            "component_bytes": bytes.len(),
            "compile_ms": compile.as_secs_f64() * 1e3,
            "load_cached_ms": load.as_secs_f64() * 1e3,
            "instantiate_ms": elapsed.as_secs_f64() * 1e3 / instances as f64,
            "rss_mib_per_instance": after.saturating_sub(before) as f64 / instances as f64 / (1 << 20) as f64,
        })
    );
    drop((first, all));
    Ok(())
}
