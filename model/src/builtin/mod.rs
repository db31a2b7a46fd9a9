//! Built-in operators: what users would otherwise write by hand, run
//! natively by the runtime and written in the manifest instead of exported
//! by a component.
//!
//! ```toml
//! # A running count per key: an update per record.
//! [[operator]]
//! name = "count"
//! builtin = "count"          # count | sum | min | max | avg | select
//! key-by = "/k"
//! # field = "/price"         # sum, min, max, avg: the number aggregated
//! # emit = "record"          # record (default): an update per record
//!                            # batch: one update per key per batch
//!
//! # The same aggregates per window: one result per key and window.
//! [[operator]]
//! name = "per-second"
//! builtin = "count"
//! key-by = "/k"
//! window = { type = "tumbling", size-ms = 1000 }
//!
//! # Columns computed from each record that passes `where`.
//! [[operator]]
//! name = "q1"
//! builtin = "select"
//! where = "/id % 2 == 0"
//! columns = ["id = /id", "k = /k", "dollars = 0.908 * /price", "doubled = /price * 2"]
//! ```
//!
//! See [`expr`] for the expressions.

pub mod accumulator;
pub mod expr;
pub mod typing;

use serde::{Deserialize, Serialize};

pub use expr::{BinaryOp, Comparison, Condition, Expr};

/// What a running aggregate computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AggregateFunction {
    /// Records (with a `field`: records where it is not null).
    Count,
    /// The sum of a field.
    Sum,
    /// The smallest value of a field.
    Min,
    /// The largest value of a field.
    Max,
    /// The mean of a field.
    Avg,
}

impl AggregateFunction {
    /// Its name in the manifest and in its output records.
    pub fn name(self) -> &'static str {
        match self {
            AggregateFunction::Count => "count",
            AggregateFunction::Sum => "sum",
            AggregateFunction::Min => "min",
            AggregateFunction::Max => "max",
            AggregateFunction::Avg => "avg",
        }
    }
}

/// When a running aggregate emits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Emit {
    /// An update per record.
    Record,
    /// One update per key per batch, with the batch's last value.
    Batch,
}

/// A built-in operator, planned.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Builtin {
    /// An aggregate per key: running, `{"key": k, "<function>": value}`;
    /// with a `window`, per key and window, `{"key": k, "window_start": s,
    /// "window_end": e, "<function>": value}`.
    Aggregate {
        /// What it computes.
        function: AggregateFunction,
        /// The JSON pointer of the aggregated field.
        field: Option<String>,
        /// When it emits.
        emit: Emit,
        /// How long, in processing time, a key's aggregate lives after its
        /// last update (`ttl-ms`): a key seen again after it starts over.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ttl_ms: Option<u64>,
    },
    /// Columns computed from each record that passes `filter`: a JSON
    /// object of the columns, in order.
    Select {
        /// (name, expression), in output order.
        columns: Vec<(String, Expr)>,
        /// Which records pass (all, without it).
        filter: Option<Condition>,
    },
}

/// What a manifest's operator table says of a built-in.
pub struct BuiltinTable<'a> {
    /// The operator's name, for errors.
    pub name: &'a str,
    /// `builtin`.
    pub builtin: &'a str,
    /// `field`.
    pub field: Option<&'a str>,
    /// `emit`.
    pub emit: Option<&'a str>,
    /// `where`.
    pub filter: Option<&'a str>,
    /// `columns`.
    pub columns: Option<&'a [String]>,
    /// Whether it has a `key-by`.
    pub keyed: bool,
    /// Whether it has a `window`.
    pub windowed: bool,
    /// `ttl-ms`.
    pub ttl_ms: Option<u64>,
}

impl Builtin {
    /// Plan the built-in an operator table describes; the error names the
    /// operator and what is wrong.
    pub fn plan(t: &BuiltinTable<'_>) -> Result<Builtin, String> {
        let name = t.name;
        let unused = |what: &str, given: bool| {
            if given {
                Err(format!(
                    "operator `{name}`: `{what}` does not apply to builtin = \"{}\"",
                    t.builtin
                ))
            } else {
                Ok(())
            }
        };
        let function = match t.builtin {
            "count" => AggregateFunction::Count,
            "sum" => AggregateFunction::Sum,
            "min" => AggregateFunction::Min,
            "max" => AggregateFunction::Max,
            "avg" => AggregateFunction::Avg,
            "select" => {
                if t.windowed {
                    return Err(format!(
                        "operator `{name}`: builtin = \"select\" takes no `window` (windows are for count, sum, min, max, avg)"
                    ));
                }
                unused("field", t.field.is_some())?;
                unused("emit", t.emit.is_some())?;
                unused("ttl-ms", t.ttl_ms.is_some())?;
                let columns = t.columns.ok_or_else(|| {
                    format!("operator `{name}`: builtin = \"select\" needs `columns` (e.g. [\"id = /id\"])")
                })?;
                if columns.is_empty() {
                    return Err(format!("operator `{name}`: `columns` is empty"));
                }
                let mut planned: Vec<(String, Expr)> = Vec::new();
                for c in columns {
                    let (column, text) = c.split_once('=').ok_or_else(|| {
                        format!("operator `{name}`: column {c:?} is not `name = expression`")
                    })?;
                    let column = column.trim();
                    if column.is_empty() {
                        return Err(format!("operator `{name}`: column {c:?} has no name"));
                    }
                    if planned.iter().any(|(n, _)| n == column) {
                        return Err(format!(
                            "operator `{name}`: column `{column}` is given twice"
                        ));
                    }
                    let e = expr::parse_expr(text)
                        .map_err(|e| format!("operator `{name}`: column `{column}`: {e}"))?;
                    planned.push((column.to_owned(), e));
                }
                let filter = t
                    .filter
                    .map(|w| {
                        expr::parse_condition(w)
                            .map_err(|e| format!("operator `{name}`: `where`: {e}"))
                    })
                    .transpose()?;
                return Ok(Builtin::Select {
                    columns: planned,
                    filter,
                });
            }
            other => {
                return Err(format!(
                    "operator `{name}`: builtin {other:?} is not one of count, sum, min, max, avg, select"
                ));
            }
        };
        unused("where", t.filter.is_some())?;
        unused("columns", t.columns.is_some())?;
        if t.windowed && t.ttl_ms.is_some() {
            return Err(format!(
                "operator `{name}`: a windowed builtin = \"{}\" keeps a key's state until its window fires; `ttl-ms` is for running aggregates",
                t.builtin
            ));
        }
        if t.ttl_ms == Some(0) {
            return Err(format!(
                "operator `{name}`: `ttl-ms` = 0 keeps nothing (give at least 1)"
            ));
        }
        if t.windowed && t.emit.is_some() {
            return Err(format!(
                "operator `{name}`: a windowed builtin = \"{}\" emits once per window when it fires; `emit` is for running aggregates",
                t.builtin
            ));
        }
        if !t.keyed {
            return Err(format!(
                "operator `{name}`: builtin = \"{}\" aggregates per key and needs `key-by`",
                t.builtin
            ));
        }
        let field = match (function, t.field) {
            (_, Some(f)) if !f.starts_with('/') => {
                return Err(format!(
                    "operator `{name}`: field {f:?} is not a JSON pointer (like \"/price\")"
                ));
            }
            (AggregateFunction::Count, f) => f.map(str::to_owned),
            (_, Some(f)) => Some(f.to_owned()),
            (_, None) => {
                return Err(format!(
                    "operator `{name}`: builtin = \"{}\" needs the `field` it aggregates (a JSON pointer)",
                    t.builtin
                ));
            }
        };
        let emit = match t.emit {
            None | Some("record") => Emit::Record,
            Some("batch") => Emit::Batch,
            Some(other) => {
                return Err(format!(
                    "operator `{name}`: emit {other:?} is not \"record\" or \"batch\""
                ));
            }
        };
        Ok(Builtin::Aggregate {
            function,
            field,
            emit,
            ttl_ms: t.ttl_ms,
        })
    }

    /// Whether it can read records of type `ty` (a typed stream): every
    /// pointer it reads names a field of `ty` (or goes into a `json`
    /// value), and what it computes with is a number. The error says what
    /// reads what.
    pub fn check_reads(&self, ty: &weir_types::Type) -> Result<(), String> {
        let field = |what: &str, p: &str, number: bool| match ty.at_pointer(p) {
            None => Err(format!("{what} reads {p}, which names no field")),
            Some(t) if number && !is_number(&t) => Err(format!(
                "{what} computes with {p}, which is {t}, not a number"
            )),
            Some(_) => Ok(()),
        };
        match self {
            Builtin::Aggregate {
                function,
                field: Some(p),
                ..
            } => field(
                &format!("{} of field = {p:?}", function.name()),
                p,
                *function != AggregateFunction::Count,
            ),
            Builtin::Aggregate { field: None, .. } => Ok(()),
            Builtin::Select { columns, filter } => {
                for (name, e) in columns {
                    let mut pointers = Vec::new();
                    e.fields(&mut pointers);
                    // A pointer alone is copied, whatever it is.
                    let copied = matches!(e, Expr::Field(_));
                    for p in &pointers {
                        field(&format!("column `{name}`"), p, !copied)?;
                    }
                }
                for (a, b) in filter.iter().flat_map(|c| &c.all) {
                    let mut pointers = Vec::new();
                    a.fields(&mut pointers);
                    if let Some((_, b)) = b {
                        b.fields(&mut pointers);
                    }
                    for p in &pointers {
                        field("`where`", p, true)?;
                    }
                }
                Ok(())
            }
        }
    }
}

/// Whether a built-in can compute with values of `t`: numbers, or any
/// JSON value (checked record by record), null or not.
fn is_number(t: &weir_types::Type) -> bool {
    use weir_types::Type::*;
    match t {
        Optional(inner) => is_number(inner),
        I8 | I16 | I32 | I64 | U8 | U16 | U32 | U64 | F32 | F64 | Json => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table<'a>(builtin: &'a str) -> BuiltinTable<'a> {
        BuiltinTable {
            name: "op",
            builtin,
            field: None,
            emit: None,
            filter: None,
            columns: None,
            keyed: true,
            windowed: false,
            ttl_ms: None,
        }
    }

    #[test]
    fn aggregates_and_selects_plan() {
        assert_eq!(
            Builtin::plan(&table("count")).unwrap(),
            Builtin::Aggregate {
                function: AggregateFunction::Count,
                field: None,
                emit: Emit::Record,
                ttl_ms: None,
            }
        );
        let sum = BuiltinTable {
            field: Some("/price"),
            emit: Some("batch"),
            ..table("sum")
        };
        assert!(matches!(
            Builtin::plan(&sum).unwrap(),
            Builtin::Aggregate {
                function: AggregateFunction::Sum,
                emit: Emit::Batch,
                ..
            }
        ));
        let columns = vec!["id = /id".to_owned(), "d = 0.908 * /price".to_owned()];
        let select = BuiltinTable {
            columns: Some(&columns),
            filter: Some("/id % 2 == 0"),
            keyed: false,
            ..table("select")
        };
        let Builtin::Select { columns, filter } = Builtin::plan(&select).unwrap() else {
            panic!()
        };
        assert_eq!(columns[1].0, "d");
        assert!(filter.is_some());
    }

    #[test]
    fn mistakes_name_the_operator_and_the_problem() {
        let err = |t: BuiltinTable| Builtin::plan(&t).unwrap_err();
        assert!(err(table("median")).contains("builtin \"median\" is not one of"));
        assert!(err(table("sum")).contains("needs the `field`"));
        assert!(
            err(BuiltinTable {
                keyed: false,
                ..table("count")
            })
            .contains("needs `key-by`")
        );
        assert!(
            err(BuiltinTable {
                field: Some("price"),
                ..table("max")
            })
            .contains("not a JSON pointer")
        );
        assert!(
            err(BuiltinTable {
                emit: Some("often"),
                ..table("count")
            })
            .contains("emit \"often\"")
        );
        let columns = vec!["a = /a".to_owned()];
        assert!(
            err(BuiltinTable {
                windowed: true,
                columns: Some(&columns),
                ..table("select")
            })
            .contains("takes no `window`")
        );
        assert!(
            Builtin::plan(&BuiltinTable {
                windowed: true,
                ..table("count")
            })
            .is_ok(),
            "aggregates take windows"
        );
        assert!(err(table("select")).contains("needs `columns`"));
        let bad = vec!["id /id".to_owned()];
        assert!(
            err(BuiltinTable {
                columns: Some(&bad),
                ..table("select")
            })
            .contains("not `name = expression`")
        );
        let twice = vec!["a = /a".to_owned(), "a = /b".to_owned()];
        assert!(
            err(BuiltinTable {
                columns: Some(&twice),
                ..table("select")
            })
            .contains("given twice")
        );
        let ok = vec!["a = /a".to_owned()];
        assert!(
            err(BuiltinTable {
                columns: Some(&ok),
                filter: Some("/a =="),
                ..table("select")
            })
            .contains("`where`")
        );
        assert!(
            err(BuiltinTable {
                filter: Some("/a == 1"),
                ..table("count")
            })
            .contains("`where` does not apply")
        );
    }
}
