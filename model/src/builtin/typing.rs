//! The type of what a built-in writes, from the type of what it reads.
//!
//! `select` over a typed stream writes a record of its columns, in order:
//!
//! - a column that is a pointer alone has the field's type (optional when
//!   the pointer passes through an optional record);
//! - a computed column is `i64?` when every value it computes with is a
//!   whole number (an integer field or literal) and it does not divide,
//!   `f64?` when one of them is a float or it divides (`/` always divides
//!   as floats), and `json` when one of them is a `json` field (whole or
//!   not by its values, as on an untyped stream). It is null when a side
//!   is null, when the result is not a finite number, or when a whole
//!   result does not fit in 64 bits (an `i64` overflow, a `u64` field past
//!   `i64::MAX`).
//!
//! An aggregate keyed by a field of a typed stream writes `{key: K,
//! <function>: V}`, and per window `{key: K, window_start: i64,
//! window_end: i64, <function>: V}`:
//!
//! - `K` is the key field's type;
//! - `count` is an `i64`, `avg` an `f64?` (null before any value);
//! - `sum`, `min` and `max` are `i64?` of a whole-number field and `f64?`
//!   of a floating-point one (null before any value, and, as a computed
//!   column of `select`, when a whole result does not fit in 64 bits),
//!   `json` of a `json` field.
//!
//! Keyed by the whole value or by the records' own keys, or not keyed, an
//! aggregate's output is untyped (JSON).

use weir_types::{Field, Record, Type};

use super::{AggregateFunction, BinaryOp, Builtin, Expr};
use crate::KeyBy;

/// What the values of a computed column are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NumberKind {
    /// Whole numbers (`i64`).
    Whole,
    /// Floating-point numbers (`f64`).
    Float,
    /// Either, value by value (a `json` field takes part).
    Any,
}

impl NumberKind {
    /// What a field of type `ty` gives an expression.
    fn of_field(ty: &Type) -> NumberKind {
        use Type::*;
        match ty {
            Optional(t) => NumberKind::of_field(t),
            I8 | I16 | I32 | I64 | U8 | U16 | U32 | U64 => NumberKind::Whole,
            F32 | F64 => NumberKind::Float,
            // `json`, or what the type check refuses anyway.
            _ => NumberKind::Any,
        }
    }

    /// The type of a column of such values.
    pub fn column_type(self) -> Type {
        match self {
            NumberKind::Whole => Type::I64.optional(),
            NumberKind::Float => Type::F64.optional(),
            NumberKind::Any => Type::Json,
        }
    }
}

impl Expr {
    /// What its values are when it reads records of type `input`.
    pub fn number_kind(&self, input: &Type) -> NumberKind {
        match self {
            Expr::Integer(_) => NumberKind::Whole,
            Expr::Number(_) => NumberKind::Float,
            Expr::Field(p) => input
                .at_pointer(p)
                .map_or(NumberKind::Any, |t| NumberKind::of_field(&t)),
            Expr::Negate(e) => e.number_kind(input),
            Expr::Binary(a, op, b) => match (a.number_kind(input), b.number_kind(input)) {
                (NumberKind::Any, _) | (_, NumberKind::Any) => NumberKind::Any,
                (NumberKind::Whole, NumberKind::Whole) if *op != BinaryOp::Divide => {
                    NumberKind::Whole
                }
                _ => NumberKind::Float,
            },
        }
    }
}

impl Builtin {
    /// The type of what it writes when it reads records of type `input`,
    /// keyed by `key_by`, per window when `windowed`; `None`: untyped
    /// (JSON), as everything it writes from an untyped stream.
    pub fn output_type(
        &self,
        input: &Type,
        key_by: Option<&KeyBy>,
        windowed: bool,
    ) -> Option<Type> {
        match self {
            _ if *input == Type::Json => None,
            Builtin::Select { columns, .. } => Some(Type::Record(Record {
                fields: columns
                    .iter()
                    .map(|(name, e)| {
                        let ty = match e {
                            Expr::Field(p) => input.at_pointer(p).unwrap_or(Type::Json),
                            e => e.number_kind(input).column_type(),
                        };
                        Field::new(name.clone(), ty)
                    })
                    .collect(),
            })),
            Builtin::Aggregate {
                function, field, ..
            } => {
                let Some(KeyBy::Pointer(key)) = key_by else {
                    return None;
                };
                let mut fields = vec![Field::new("key", input.at_pointer(key)?)];
                if windowed {
                    fields.push(Field::new("window_start", Type::I64));
                    fields.push(Field::new("window_end", Type::I64));
                }
                let value = match (function, field) {
                    (AggregateFunction::Count, _) => Type::I64,
                    (AggregateFunction::Avg, _) => Type::F64.optional(),
                    (_, Some(p)) => Expr::Field(p.clone()).number_kind(input).column_type(),
                    (_, None) => Type::Json,
                };
                fields.push(Field::new(function.name(), value));
                Some(Type::Record(Record { fields }))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builtin::BuiltinTable;

    fn select(columns: &[&str]) -> Builtin {
        let columns: Vec<String> = columns.iter().map(|c| c.to_string()).collect();
        Builtin::plan(&BuiltinTable {
            name: "s",
            builtin: "select",
            field: None,
            emit: None,
            filter: None,
            columns: Some(&columns),
            keyed: false,
            windowed: false,
            ttl_ms: None,
        })
        .unwrap()
    }

    #[test]
    fn a_select_writes_its_columns_typed_by_the_fields_they_read() {
        let input: Type =
            "{id: u64, k: u32?, price: f32, extra: json, at: {x: i16}?, tags: list<string>}"
                .parse()
                .unwrap();
        let s = select(&[
            "id = /id",
            "k = /k",
            "x = /at/x",
            "tags = /tags",
            "extra = /extra",
            "twice = /id * 2",
            "neg = -/k",
            "dollars = 0.908 * /id",
            "half = /id / 2",
            "mixed = (/id + /at/x) * /price",
            "dynamic = /extra + 1",
            "one = 1",
        ]);
        assert_eq!(
            s.output_type(&input, None, false).unwrap().to_string(),
            "{id: u64, k: u32?, x: i16?, tags: list<string>, extra: json, twice: i64?, neg: i64?, \
             dollars: f64?, half: f64?, mixed: f64?, dynamic: json, one: i64?}"
        );
        // From an untyped stream: untyped.
        assert_eq!(s.output_type(&Type::Json, None, false), None);
    }

    fn aggregate(builtin: &str, field: Option<&str>) -> Builtin {
        Builtin::plan(&BuiltinTable {
            name: "a",
            builtin,
            field,
            emit: None,
            filter: None,
            columns: None,
            keyed: true,
            windowed: false,
            ttl_ms: None,
        })
        .unwrap()
    }

    #[test]
    fn an_aggregate_keyed_by_a_field_writes_the_key_typed_and_its_value() {
        let input: Type =
            "{k: u32, name: string, at: {x: i16}?, price: u64, rate: f32, extra: json}"
                .parse()
                .unwrap();
        let by = |p: &str| KeyBy::Pointer(p.into());
        let typed = |b: Builtin, key: &KeyBy, windowed: bool| {
            b.output_type(&input, Some(key), windowed)
                .unwrap()
                .to_string()
        };
        assert_eq!(
            typed(aggregate("count", None), &by("/k"), false),
            "{key: u32, count: i64}"
        );
        assert_eq!(
            typed(aggregate("count", Some("/name")), &by("/name"), true),
            "{key: string, window_start: i64, window_end: i64, count: i64}"
        );
        assert_eq!(
            typed(aggregate("sum", Some("/price")), &by("/at/x"), false),
            "{key: i16?, sum: i64?}",
            "a key through an optional record is optional"
        );
        assert_eq!(
            typed(aggregate("min", Some("/rate")), &by("/k"), false),
            "{key: u32, min: f64?}"
        );
        assert_eq!(
            typed(aggregate("max", Some("/extra")), &by("/k"), false),
            "{key: u32, max: json}"
        );
        assert_eq!(
            typed(aggregate("avg", Some("/price")), &by("/k"), false),
            "{key: u32, avg: f64?}"
        );
        // Keyed otherwise, or untyped: JSON.
        let count = aggregate("count", None);
        assert_eq!(count.output_type(&input, Some(&KeyBy::Value), false), None);
        assert_eq!(count.output_type(&input, Some(&KeyBy::Key), false), None);
        assert_eq!(count.output_type(&input, None, false), None);
        assert_eq!(count.output_type(&Type::Json, Some(&by("/k")), false), None);
    }
}
