//! Whether a job's operators can take the state a savepoint holds, found
//! at submit: a state declared with another kind (a value state that is now
//! a map), or with a time-to-live where it had none (or the other way
//! round), would otherwise fail the job once running. Each keyed operator of
//! the job whose savepoint holds state is created once, on the coordinator,
//! over the savepoint's declared states (no entries): the declarations it
//! refuses are the answer.

use std::path::Path;
use std::sync::Arc;

use weir_host::instance::{OperatorInstance, OperatorSpec};
use weir_host::{TaskIdent, WasmRuntime};
use weir_model::JobGraph;
use weir_model::codec::StreamCodecs;
use weir_model::graph::VertexKind;
use weir_model::proto::JobComponent;
use weir_model::savepoint::SavepointMetadata;
use weir_state::ttl::TtlBackend;
use weir_state::{Declared, MemoryStateBackend, StateBackend};

use crate::error::CoordinatorError;

/// Refuse (422 `state_incompatible`, naming the operator, the state and
/// both declarations) a start of `graph` from the savepoint in `dir` whose
/// keyed operators would refuse its states.
pub async fn check(
    runtime: &Arc<WasmRuntime>,
    graph: &JobGraph,
    components: &[JobComponent],
    dir: &Path,
    savepoint: &SavepointMetadata,
) -> Result<(), CoordinatorError> {
    let codecs = StreamCodecs::of_job(graph);
    for v in &graph.vertices {
        let VertexKind::Operator {
            function,
            component,
            key_by: Some(_),
            window,
            builtin: None,
        } = &v.kind
        else {
            continue;
        };
        let Some(saved) = savepoint.vertices.iter().find(|s| s.name == v.name) else {
            continue;
        };
        let mut states: Vec<Declared> = Vec::new();
        for f in &saved.state {
            let declared =
                weir_state::canonical::declared_states(&dir.join(&f.file)).map_err(|e| {
                    CoordinatorError::unprocessable(
                        "savepoint_invalid",
                        format!("the savepoint's {}: {e:#}", f.file),
                    )
                })?;
            for d in declared {
                if !states.iter().any(|s| s.name == d.name) {
                    states.push(d);
                }
            }
        }
        if states.is_empty() {
            continue;
        }
        let Some(wasm) = components
            .iter()
            .find(|c| c.name == *component)
            .map(|c| c.wasm.clone())
        else {
            continue;
        };
        let mut backend = MemoryStateBackend::with_key_groups(graph.max_parallelism);
        for d in &states {
            backend
                .declare(&d.name, d.kind, d.stamped)
                .map_err(CoordinatorError::internal)?;
        }
        let backend = TtlBackend::new(Box::new(backend));
        let refusals = backend.refusals();
        let mut config: Vec<(String, String)> = graph
            .params
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        config.push(("weir.attempt".into(), "0".into()));
        let (runtime, function, window) = (runtime.clone(), function.clone(), window.clone());
        let (operator, job) = (v.name.clone(), graph.name.clone());
        let (op_codecs, limits) = (codecs.operator(graph, v.id), graph.limits);
        // Created and dropped: whatever else it does (a create that needs
        // what only a worker grants) is the workers' to find.
        let _ = tokio::task::spawn_blocking(move || {
            let loaded = runtime.load(&wasm).map_err(drop)?;
            OperatorInstance::new(
                runtime,
                loaded,
                OperatorSpec {
                    function: &function,
                    config,
                    window: window.as_ref(),
                    codecs: op_codecs,
                    limits,
                },
                TaskIdent {
                    job,
                    operator,
                    subtask: 0,
                },
                Box::new(backend),
            )
            .map(drop)
            .map_err(drop)
        })
        .await;
        let refused = refusals.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if let Some(why) = refused.first() {
            return Err(CoordinatorError::unprocessable(
                "state_incompatible",
                format!(
                    "operator `{}` cannot take the savepoint's state: {why}",
                    v.name
                ),
            ));
        }
    }
    Ok(())
}
