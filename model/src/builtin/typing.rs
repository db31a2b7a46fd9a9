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
//! The aggregates' output is untyped (JSON).

use weir_types::{Field, Record, Type};

use super::{BinaryOp, Builtin, Expr};

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
    /// The type of what it writes when it reads records of type `input`;
    /// `None`: untyped (JSON), as everything it writes from an untyped
    /// stream.
    pub fn output_type(&self, input: &Type) -> Option<Type> {
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
            Builtin::Aggregate { .. } => None,
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
            s.output_type(&input).unwrap().to_string(),
            "{id: u64, k: u32?, x: i16?, tags: list<string>, extra: json, twice: i64?, neg: i64?, \
             dollars: f64?, half: f64?, mixed: f64?, dynamic: json, one: i64?}"
        );
        // From an untyped stream: untyped.
        assert_eq!(s.output_type(&Type::Json), None);
    }
}
