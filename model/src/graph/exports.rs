//! A graph's operators checked against what its components export.

use super::{JobGraph, VertexKind};
use crate::manifest::ManifestError;

fn invalid(msg: String) -> ManifestError {
    ManifestError::Invalid(msg)
}

/// An operator a component exports, as the planner needs to know it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportedOperator {
    /// The component that exports it (its name in the bundle).
    pub component: String,
    /// Its name.
    pub name: String,
    /// Whether it needs a keyed input (a keyed process, a window function).
    pub keyed: bool,
    /// What it is.
    pub role: OperatorRole,
}

/// What an exported operator is, as far as planning goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OperatorRole {
    /// Records in, records out (map, flat map, filter, process).
    Transform,
    /// A keyed process function.
    KeyedProcess,
    /// Assigns event timestamps (a source's `timestamp-assigner`).
    TimestampAssigner,
    /// A window function: needs a `window`.
    Window,
}

impl OperatorRole {
    /// The role of an operator of kind `kind`, as the contract names kinds
    /// (`map`, `keyed-process`, `window-process`, ...).
    pub fn of_kind(kind: &str) -> Option<OperatorRole> {
        Some(match kind {
            "map" | "flat-map" | "filter" => OperatorRole::Transform,
            "keyed-process" => OperatorRole::KeyedProcess,
            "timestamp-assigner" => OperatorRole::TimestampAssigner,
            "window" | "window-process" => OperatorRole::Window,
            _ => return None,
        })
    }

    /// Whether an operator of this role needs a keyed input.
    pub fn keyed(self) -> bool {
        matches!(self, OperatorRole::KeyedProcess | OperatorRole::Window)
    }
}

impl JobGraph {
    /// Check every operator vertex against what the components export and
    /// settle which component runs it: the function exists (in the
    /// component the operator names, or in exactly one), and keyed
    /// operators have a `key-by`.
    pub fn resolve_operators(
        &mut self,
        exported: &[ExportedOperator],
    ) -> Result<(), ManifestError> {
        let several = exported
            .iter()
            .any(|o| o.component != exported[0].component);
        for v in &mut self.vertices {
            let VertexKind::Operator {
                function,
                component,
                key_by,
                window,
                builtin,
            } = &mut v.kind
            else {
                continue;
            };
            if builtin.is_some() {
                // The runtime's own: checked when planned.
                continue;
            }
            let candidates: Vec<&ExportedOperator> = exported
                .iter()
                .filter(|o| {
                    &o.name == function && (component.is_empty() || o.component == *component)
                })
                .collect();
            let op = match candidates.as_slice() {
                [op] => *op,
                [] => {
                    let names: Vec<String> = exported
                        .iter()
                        .filter(|o| component.is_empty() || o.component == *component)
                        .map(|o| {
                            if several {
                                format!("{}:{}", o.component, o.name)
                            } else {
                                o.name.clone()
                            }
                        })
                        .collect();
                    let which = if !component.is_empty() {
                        format!("component `{component}` does not export (it exports:")
                    } else if several {
                        "no component exports (they export:".to_owned()
                    } else {
                        "the component does not export (it exports:".to_owned()
                    };
                    return Err(invalid(format!(
                        "operator `{}` uses function `{function}`, which {which} {})",
                        v.name,
                        if names.is_empty() {
                            "nothing".to_owned()
                        } else {
                            names.join(", ")
                        }
                    )));
                }
                more => {
                    let names: Vec<&str> = more.iter().map(|o| o.component.as_str()).collect();
                    return Err(invalid(format!(
                        "operator `{}`: function `{function}` is exported by several components ({}): say which with `component = \"...\"`",
                        v.name,
                        names.join(", ")
                    )));
                }
            };
            component.clone_from(&op.component);
            let assigner = v.event_time.is_some();
            match (op.role, window.is_some(), assigner) {
                (OperatorRole::Window, false, _) => {
                    return Err(invalid(format!(
                        "operator `{}`: `{function}` is a window function and needs a `window` (tumbling, sliding or session)",
                        v.name
                    )));
                }
                (role, true, _) if role != OperatorRole::Window => {
                    return Err(invalid(format!(
                        "operator `{}` has a `window`, but `{function}` is not a window function (window_aggregate or window_process)",
                        v.name
                    )));
                }
                (role, _, true) if role != OperatorRole::TimestampAssigner => {
                    return Err(invalid(format!(
                        "`{}`: the timestamp assigner `{function}` is not a timestamps function",
                        v.name
                    )));
                }
                _ => {}
            }
            if op.keyed && key_by.is_none() {
                return Err(invalid(format!(
                    "operator `{}`: `{function}` is a keyed process and needs `key-by` (\"value\", \"key\" or a JSON pointer)",
                    v.name
                )));
            }
        }
        Ok(())
    }
}
