//! Whether a job's operators can take the state a savepoint holds, found
//! at submit: a state declared with another kind (a value state that is now
//! a map), of a row type that cannot read the stored one's rows, or with a
//! time-to-live where it had none (or the other way
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
            builtin,
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
                match states.iter().find(|s| s.name == d.name) {
                    None => states.push(d),
                    Some(s) if s.value_type != d.value_type => {
                        return Err(CoordinatorError::unprocessable(
                            "savepoint_invalid",
                            format!(
                                "the savepoint's {}: state `{}` of operator `{}` is kept with another type than in its other files",
                                f.file, d.name, v.name
                            ),
                        ));
                    }
                    Some(_) => {}
                }
            }
        }
        if states.is_empty() {
            continue;
        }
        if let Some(builtin) = builtin {
            builtin_takes(&v.name, builtin, window.is_some(), &states)?;
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
            let id = backend
                .declare(&d.name, d.kind, d.stamped)
                .map_err(CoordinatorError::internal)?;
            backend
                .retype(id, d.value_type.as_deref(), None)
                .map_err(|e| CoordinatorError::internal(format!("{e:#}")))?;
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

/// A built-in running aggregate keeps one value state,
/// `weir.builtin.<function>`, with a time-to-live when it has `ttl-ms`:
/// refuse a savepoint whose state of that name is kept the other way.
fn builtin_takes(
    operator: &str,
    builtin: &weir_model::builtin::Builtin,
    windowed: bool,
    states: &[Declared],
) -> Result<(), CoordinatorError> {
    let weir_model::builtin::Builtin::Aggregate {
        function, ttl_ms, ..
    } = builtin
    else {
        return Ok(());
    };
    if windowed {
        return Ok(());
    }
    let name = format!("weir.builtin.{}", function.name());
    let Some(saved) = states.iter().find(|d| d.name == name) else {
        return Ok(());
    };
    if saved.stamped != ttl_ms.is_some() {
        let (was, now) = if saved.stamped {
            ("with", "without")
        } else {
            ("without", "with")
        };
        return Err(CoordinatorError::unprocessable(
            "state_incompatible",
            format!(
                "operator `{operator}` cannot take the savepoint's state: its aggregates were kept {was} a time-to-live, and it now runs {now} `ttl-ms` (keep it as it was, or give the operator another name)"
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_model::builtin::{AggregateFunction, Builtin, Emit};
    use weir_state::StateKind;

    #[test]
    fn a_running_aggregate_keeps_or_lacks_its_time_to_live() {
        let count = |ttl_ms| Builtin::Aggregate {
            function: AggregateFunction::Count,
            field: None,
            emit: Emit::Record,
            ttl_ms,
        };
        let saved = |stamped| {
            vec![Declared::new(
                "weir.builtin.count",
                StateKind::Value,
                stamped,
            )]
        };
        assert!(builtin_takes("c", &count(None), false, &saved(false)).is_ok());
        assert!(builtin_takes("c", &count(Some(5)), false, &saved(true)).is_ok());
        let e = builtin_takes("c", &count(Some(5)), false, &saved(false)).unwrap_err();
        assert_eq!(e.code, "state_incompatible");
        assert!(
            e.message.contains("`c`") && e.message.contains("ttl-ms"),
            "{e}"
        );
        assert!(builtin_takes("c", &count(None), false, &saved(true)).is_err());
        // Windows keep their own state.
        assert!(builtin_takes("c", &count(None), true, &saved(true)).is_ok());
    }
}
