//! Weir's integration tests, in one binary.

mod contract;
mod hostile;
mod loading;
mod pipeline;
mod recovery;
mod rest;
mod time;

use std::sync::Arc;

use weir_host::{
    HostConfig, LoadedComponent, MemoryStateBackend, OperatorInstance, TaskIdent, WasmRuntime,
};

/// A runtime with a short call deadline and a small memory cap, for tests.
pub fn runtime() -> Arc<WasmRuntime> {
    WasmRuntime::new(HostConfig {
        memory_limit_bytes: 64 << 20,
        call_timeout_ms: 500,
        max_instances: 32,
        ..HostConfig::default()
    })
    .expect("the runtime starts")
}

/// The test guests' component, loaded into `rt`.
pub fn fixtures(rt: &WasmRuntime) -> Arc<LoadedComponent> {
    rt.load_file(&weir_tests::guest("test-guests"))
        .expect("the fixtures load")
}

/// A job of `component`'s operators: `manifest` planned with `params` at
/// `parallelism`, ready for `run_job`.
pub fn local_job(
    rt: Arc<WasmRuntime>,
    component: Arc<LoadedComponent>,
    manifest: &str,
    params: &[(&str, &str)],
    parallelism: u32,
) -> anyhow::Result<weir_worker::LocalJob> {
    let components = weir_host::JobComponents::local(component);
    let exported = components.exported();
    let manifest = weir_model::Manifest::parse(manifest)?;
    let submission = weir_coordinator::Submission {
        params: params
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        parallelism: Some(parallelism),
        builtin_params: Vec::new(),
    };
    let graph = weir_coordinator::plan(&manifest, &submission, &exported)?;
    let params = graph.params.clone().into_iter().collect();
    Ok(weir_worker::LocalJob::new(
        graph,
        Arc::new(weir_worker::WasmOperatorFactory {
            runtime: rt,
            components,
            params,
            state: weir_worker::state::StateSetup::in_memory(),
            attempt: 0,
        }),
    ))
}

/// A fresh instance of the fixture operator `function`.
pub fn instance(rt: &Arc<WasmRuntime>, function: &str) -> OperatorInstance {
    let component = fixtures(rt);
    OperatorInstance::new(
        rt.clone(),
        component,
        weir_host::OperatorSpec {
            function,
            ..Default::default()
        },
        TaskIdent {
            job: "test-job".into(),
            operator: format!("op-{function}"),
            subtask: 3,
        },
        Box::new(MemoryStateBackend::new()),
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

/// A record whose value is the JSON string `s`, keyed by it.
pub fn keyed(s: &str) -> weir_model::Record {
    let v = serde_json::to_vec(s).unwrap();
    weir_model::Record {
        key: Some(v.clone().into()),
        value: v.into(),
        timestamp: None,
    }
}

/// A record whose value is the JSON string `s`.
pub fn text(s: &str) -> weir_model::Record {
    weir_model::Record::value(serde_json::to_vec(s).unwrap())
}

/// The values of records, decoded as JSON.
pub fn values(records: &[weir_model::Record]) -> Vec<serde_json::Value> {
    records
        .iter()
        .map(|r| serde_json::from_slice(&r.value).unwrap())
        .collect()
}

/// What a file sink wrote at `path`: the file, or, from a job that takes
/// checkpoints, the part files in view in the directory (hidden ones are not
/// output), in name order.
pub fn committed_output(path: &std::path::Path) -> String {
    if path.is_file() {
        return std::fs::read_to_string(path).unwrap();
    }
    let mut parts: Vec<std::path::PathBuf> = std::fs::read_dir(path)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| !p.file_name().unwrap().to_string_lossy().starts_with('.'))
        .collect();
    parts.sort();
    parts
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect()
}
