//! A graph's operators checked against what its components export.

use weir_types::{Type, check_reads};

use super::{JobGraph, VertexKind, WindowContents};
use crate::manifest::{KeyBy, ManifestError};

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
    /// The type of the records it reads, when it declares one.
    pub input: Option<Type>,
    /// The type of the records it writes, when it declares one (a filter
    /// or a timestamp assigner writes what it reads: none).
    pub output: Option<Type>,
    /// Whether its outputs are its inputs, as they came (a filter, a
    /// timestamp assigner): its output stream has its input's type.
    pub passes_through: bool,
}

impl ExportedOperator {
    /// An untyped operator (every record `json`).
    pub fn untyped(component: &str, name: &str, role: OperatorRole) -> ExportedOperator {
        ExportedOperator {
            component: component.to_owned(),
            name: name.to_owned(),
            keyed: role.keyed(),
            role,
            input: None,
            output: None,
            passes_through: role == OperatorRole::TimestampAssigner,
        }
    }
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
    /// A window aggregate function (`window`): needs a `window`.
    Window,
    /// A process-window function (`window-process`): needs a `window`.
    WindowProcess,
}

impl OperatorRole {
    /// The role of an operator of kind `kind`, as the contract names kinds
    /// (`map`, `keyed-process`, `window-process`, ...).
    pub fn of_kind(kind: &str) -> Option<OperatorRole> {
        Some(match kind {
            "map" | "flat-map" | "filter" => OperatorRole::Transform,
            "keyed-process" => OperatorRole::KeyedProcess,
            "timestamp-assigner" => OperatorRole::TimestampAssigner,
            "window" => OperatorRole::Window,
            "window-process" => OperatorRole::WindowProcess,
            _ => return None,
        })
    }

    /// Whether an operator of this role needs a keyed input.
    pub fn keyed(self) -> bool {
        matches!(self, OperatorRole::KeyedProcess) || self.windowed()
    }

    /// Whether an operator of this role is a window function.
    pub fn windowed(self) -> bool {
        matches!(self, OperatorRole::Window | OperatorRole::WindowProcess)
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
                [] if exported.is_empty() => {
                    return Err(invalid(format!(
                        "operator `{}` uses function `{function}`, which no component of the job exports (the job has no component, or its components export nothing): add a `[component]` to the bundle, or use a built-in operator",
                        v.name
                    )));
                }
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
            // `json` says nothing of a record: untyped.
            let typed = |t: &Option<Type>| t.clone().filter(|t| *t != Type::Json);
            v.input_type = typed(&op.input);
            v.output_type = if op.passes_through {
                None
            } else {
                typed(&op.output)
            };
            v.passes_through = op.passes_through;
            let assigner = v.event_time.is_some();
            match (op.role, window.is_some(), assigner) {
                (role, false, _) if role.windowed() => {
                    return Err(invalid(format!(
                        "operator `{}`: `{function}` is a window function and needs a `window` (tumbling, sliding or session)",
                        v.name
                    )));
                }
                (role, true, _) if !role.windowed() => {
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
            if let Some(w) = window {
                w.keeps = Some(match op.role {
                    OperatorRole::WindowProcess => WindowContents::Records,
                    _ => WindowContents::Accumulator,
                });
            }
            if op.keyed && key_by.is_none() {
                return Err(invalid(format!(
                    "operator `{}`: `{function}` is a keyed process and needs `key-by` (\"value\", \"key\" or a JSON pointer)",
                    v.name
                )));
            }
        }
        // What passes records through writes what it reads, and a built-in
        // what it makes of what it reads (vertices come in order: their
        // inputs' types are settled first).
        for v in 0..self.vertices.len() {
            let vertex = &self.vertices[v];
            self.vertices[v].output_type = match &vertex.kind {
                VertexKind::Operator {
                    builtin: Some(b),
                    key_by,
                    window,
                    ..
                } => self
                    .read_type(v)
                    .and_then(|t| b.output_type(&t, key_by.as_ref(), window.is_some())),
                _ if vertex.passes_through => self.read_type(v),
                _ => continue,
            };
        }
        self.check_types()
    }

    /// The type of what vertex `v` reads, when all its inputs have one
    /// and the same.
    pub fn read_type(&self, v: usize) -> Option<Type> {
        let types: Vec<Option<Type>> = self
            .inputs(v)
            .map(|e| self.stream_type(e.from, e.side_output.as_deref()))
            .collect();
        match types.split_first() {
            Some((first, rest)) if rest.iter().all(|t| t == first) => first.clone(),
            _ => None,
        }
    }

    /// The type of the records of vertex `v`'s output `side` (`None`: its
    /// main output), when it has one: a window's `late` records are its
    /// input's; other side outputs are untyped.
    pub fn stream_type(&self, v: usize, side: Option<&str>) -> Option<Type> {
        let vertex = &self.vertices[v];
        match side {
            None => vertex.output_type.clone(),
            Some("late")
                if matches!(
                    vertex.kind,
                    VertexKind::Operator {
                        window: Some(_),
                        ..
                    }
                ) =>
            {
                self.read_type(v)
            }
            Some(_) => None,
        }
    }

    /// Check that every typed operator can read what its inputs write
    /// (fields matched by name, see [`weir_types::check_reads`]), and that
    /// a `key-by` or a source's `timestamp` on a typed stream names one of
    /// its fields.
    pub fn check_types(&self) -> Result<(), ManifestError> {
        for e in &self.edges {
            let upstream = self.stream_type(e.from, e.side_output.as_deref());
            let (from, to) = (&self.vertices[e.from], &self.vertices[e.to]);
            let from_name = match &e.side_output {
                Some(side) => format!("{}:{side}", from.name),
                None => from.name.clone(),
            };
            if let (Some(up), Some(reader)) = (&upstream, &to.input_type)
                && let Err(m) = check_reads(up, reader)
            {
                return Err(ManifestError::TypeMismatch(format!(
                    "operator `{}` cannot read what `{from_name}` writes: {m} (`{from_name}` writes {up}; `{}` reads {reader})",
                    to.name, to.name
                )));
            }
            if let (
                Some(up),
                VertexKind::Operator {
                    builtin: Some(b), ..
                },
            ) = (&upstream, &to.kind)
                && let Err(m) = b.check_reads(up)
            {
                return Err(ManifestError::TypeMismatch(format!(
                    "operator `{}`: {m} (`{from_name}` writes {up})",
                    to.name
                )));
            }
            if let (
                Some(up),
                VertexKind::Operator {
                    key_by: Some(KeyBy::Pointer(p)),
                    ..
                },
            ) = (&upstream, &to.kind)
                && up.at_pointer(p).is_none()
            {
                return Err(ManifestError::TypeMismatch(format!(
                    "operator `{}`: key-by = {p:?} names no field of what `{from_name}` writes ({up})",
                    to.name
                )));
            }
        }
        for v in &self.vertices {
            let Some(ts) = v.event_time.as_ref().and_then(|e| e.timestamp.as_deref()) else {
                continue;
            };
            let Some(ty) = &v.output_type else { continue };
            match ty.at_pointer(ts) {
                // Inside a `json` value: checked record by record.
                Some(Type::I8 | Type::I16 | Type::I32 | Type::I64 | Type::Json)
                | Some(Type::U8 | Type::U16 | Type::U32 | Type::U64) => {}
                found => {
                    return Err(ManifestError::TypeMismatch(format!(
                        "source `{}`: timestamp {ts:?} {} (its records are {ty})",
                        v.name,
                        match found {
                            None => "names no field of its records".to_owned(),
                            Some(t) => format!("is {t}, not an integer (ms since the epoch)"),
                        }
                    )));
                }
            }
        }
        Ok(())
    }
}
