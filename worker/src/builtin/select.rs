//! `select`: columns computed from each record that passes a condition.
//!
//! A column that is a pointer alone copies the field as it is (any JSON
//! value; `null` when the record has no such field); arithmetic works on
//! numbers, whole while both sides are whole (`/` is always a
//! floating-point division), null when a side is null or not a number. A
//! comparison with a null is false, so `where` drops such records.

use serde_json::value::RawValue;
use weir_host::{BatchContext, BatchOutput, OperatorError, TaskIdent};
use weir_model::builtin::{BinaryOp, Comparison, Condition, Expr};
use weir_model::{Record, RecordBuffer};

use super::{Number, excerpt, input_error};
use crate::operators::StreamOperator;

/// A record's fields that the expressions read, in the order of
/// [`Select::pointers`].
struct Fields<'a> {
    names: &'a [String],
    values: Vec<Option<&'a RawValue>>,
}

impl<'a> Fields<'a> {
    fn get(&self, pointer: &str) -> Option<&'a RawValue> {
        let i = self.names.iter().position(|n| n == pointer)?;
        self.values[i]
    }
}

pub(super) struct Select {
    columns: Vec<(String, Expr)>,
    /// Each column's name, as a JSON string and a colon.
    prefixes: Vec<Vec<u8>>,
    filter: Option<Condition>,
    /// Every pointer the columns and the condition read.
    pointers: Vec<String>,
    /// The same, to read in one pass.
    reader: weir_model::json::Pointers,
    ident: TaskIdent,
}

impl Select {
    pub(super) fn new(
        columns: Vec<(String, Expr)>,
        filter: Option<Condition>,
        ident: TaskIdent,
    ) -> Select {
        let mut pointers = Vec::new();
        for (_, e) in &columns {
            e.fields(&mut pointers);
        }
        for (a, b) in filter.iter().flat_map(|c| &c.all) {
            a.fields(&mut pointers);
            if let Some((_, b)) = b {
                b.fields(&mut pointers);
            }
        }
        let prefixes = columns
            .iter()
            .map(|(name, _)| {
                let mut p = serde_json::to_vec(name).expect("a string");
                p.push(b':');
                p
            })
            .collect();
        let names: Vec<&str> = pointers.iter().map(String::as_str).collect();
        Select {
            columns,
            prefixes,
            filter,
            reader: weir_model::json::Pointers::new(&names),
            pointers,
            ident,
        }
    }

    fn fields<'a>(&'a self, value: &'a [u8]) -> Result<Fields<'a>, OperatorError> {
        let values = self.reader.read(value).map_err(|e| {
            input_error(
                &self.ident,
                format!("a record is not JSON ({e}): {}", excerpt(value)),
            )
        })?;
        Ok(Fields {
            names: &self.pointers,
            values,
        })
    }

    fn passes(&self, fields: &Fields<'_>) -> bool {
        let Some(c) = &self.filter else {
            return true;
        };
        c.all.iter().all(|(left, right)| {
            let a = number(left, fields);
            match right {
                None => a.is_some_and(|a| a.as_f64() != 0.0),
                Some((cmp, right)) => match (a, number(right, fields)) {
                    (Some(a), Some(b)) => compare(a, *cmp, b),
                    _ => false,
                },
            }
        })
    }
}

fn compare(a: Number, cmp: Comparison, b: Number) -> bool {
    let ord = match (a, b) {
        (Number::Int(a), Number::Int(b)) => a.partial_cmp(&b),
        (a, b) => a.as_f64().partial_cmp(&b.as_f64()),
    };
    let Some(ord) = ord else {
        return cmp == Comparison::NotEqual;
    };
    use std::cmp::Ordering::*;
    match cmp {
        Comparison::Equal => ord == Equal,
        Comparison::NotEqual => ord != Equal,
        Comparison::Less => ord == Less,
        Comparison::LessOrEqual => ord != Greater,
        Comparison::Greater => ord == Greater,
        Comparison::GreaterOrEqual => ord != Less,
    }
}

/// An expression's value as a number (`None`: null).
fn number(e: &Expr, fields: &Fields<'_>) -> Option<Number> {
    match e {
        Expr::Integer(i) => Some(Number::Int(*i)),
        Expr::Number(f) => Some(Number::Float(*f)),
        Expr::Field(p) => fields
            .get(p)
            .and_then(|raw| Number::parse(raw.get()).ok().flatten()),
        Expr::Negate(e) => match number(e, fields)? {
            Number::Int(i) => Some(
                i.checked_neg()
                    .map_or(Number::Float(-(i as f64)), Number::Int),
            ),
            Number::Float(f) => Some(Number::Float(-f)),
        },
        Expr::Binary(a, op, b) => {
            let (a, b) = (number(a, fields)?, number(b, fields)?);
            Some(arithmetic(a, *op, b))
        }
    }
}

fn arithmetic(a: Number, op: BinaryOp, b: Number) -> Number {
    if let (Number::Int(x), Number::Int(y)) = (a, b) {
        let whole = match op {
            BinaryOp::Add => x.checked_add(y),
            BinaryOp::Subtract => x.checked_sub(y),
            BinaryOp::Multiply => x.checked_mul(y),
            BinaryOp::Remainder => x.checked_rem(y),
            BinaryOp::Divide => None,
        };
        if let Some(w) = whole {
            return Number::Int(w);
        }
    }
    let (x, y) = (a.as_f64(), b.as_f64());
    Number::Float(match op {
        BinaryOp::Add => x + y,
        BinaryOp::Subtract => x - y,
        BinaryOp::Multiply => x * y,
        BinaryOp::Divide => x / y,
        BinaryOp::Remainder => x % y,
    })
}

impl StreamOperator for Select {
    fn process(
        &mut self,
        batch: Vec<Record>,
        _: BatchContext,
    ) -> Result<BatchOutput, OperatorError> {
        let size = batch.iter().map(|r| r.value.len() + 16).sum();
        let mut main = RecordBuffer::with_capacity(batch.len(), size);
        for r in &batch {
            let fields = self.fields(&r.value)?;
            if !self.passes(&fields) {
                continue;
            }
            main.push(r.key.clone(), r.timestamp, |value| {
                value.push(b'{');
                for (i, ((_, e), prefix)) in self.columns.iter().zip(&self.prefixes).enumerate() {
                    if i > 0 {
                        value.push(b',');
                    }
                    value.extend_from_slice(prefix);
                    match e {
                        // A field alone: copied as it is.
                        Expr::Field(p) => match fields.get(p) {
                            Some(raw) => value.extend_from_slice(raw.get().as_bytes()),
                            None => value.extend_from_slice(b"null"),
                        },
                        e => match number(e, &fields) {
                            Some(n) => n.write(value),
                            None => value.extend_from_slice(b"null"),
                        },
                    }
                }
                value.push(b'}');
            });
        }
        Ok(BatchOutput {
            main: main.finish(),
            side: Vec::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_model::builtin::expr::{parse_condition, parse_expr};

    fn select(columns: &[&str], filter: Option<&str>) -> Select {
        let columns = columns
            .iter()
            .map(|c| {
                let (n, e) = c.split_once('=').unwrap();
                (n.trim().to_owned(), parse_expr(e).unwrap())
            })
            .collect();
        Select::new(
            columns,
            filter.map(|f| parse_condition(f).unwrap()),
            TaskIdent::default(),
        )
    }

    fn run(s: &mut Select, records: &[&str]) -> Vec<String> {
        let batch = records
            .iter()
            .map(|r| Record {
                key: None,
                value: r.as_bytes().to_vec().into(),
                timestamp: Some(5),
            })
            .collect();
        let ctx = BatchContext {
            watermark: None,
            processing_time: 0,
        };
        s.process(batch, ctx)
            .unwrap()
            .main
            .into_iter()
            .map(|r| String::from_utf8(r.value.to_vec()).unwrap())
            .collect()
    }

    #[test]
    fn q1_selects_and_computes() {
        let mut s = select(
            &[
                "id = /id",
                "k = /k",
                "dollars = 0.908 * /price",
                "doubled = /price * 2",
            ],
            Some("/id % 2 == 0"),
        );
        let out = run(
            &mut s,
            &[
                r#"{"id":4,"k":4,"price":250,"ts":0}"#,
                r#"{"id":5,"k":5,"price":250,"ts":0}"#,
            ],
        );
        assert_eq!(out, [r#"{"id":4,"k":4,"dollars":227.0,"doubled":500}"#]);
    }

    #[test]
    fn nulls_and_other_values() {
        let mut s = select(&["name = /user/name", "half = /n / 2", "neg = -/n"], None);
        let out = run(
            &mut s,
            &[r#"{"user":{"name":"ana"},"n":3}"#, r#"{"n":"three"}"#, "{}"],
        );
        assert_eq!(
            out,
            [
                r#"{"name":"ana","half":1.5,"neg":-3}"#,
                r#"{"name":null,"half":null,"neg":null}"#,
                r#"{"name":null,"half":null,"neg":null}"#,
            ]
        );
        let mut s = select(&["n = /n"], Some("/n > 1 and /n != 4"));
        let out = run(
            &mut s,
            &[
                r#"{"n":1}"#,
                r#"{"n":2}"#,
                r#"{"n":4}"#,
                "{}",
                r#"{"n":1.5}"#,
            ],
        );
        assert_eq!(out, [r#"{"n":2}"#, r#"{"n":1.5}"#]);
    }

    #[test]
    fn a_record_that_is_not_json_fails_naming_it() {
        let mut s = select(&["n = /n"], None);
        let batch = vec![Record {
            key: None,
            value: b"not json".to_vec().into(),
            timestamp: None,
        }];
        let ctx = BatchContext {
            watermark: None,
            processing_time: 0,
        };
        let e = s.process(batch, ctx).unwrap_err();
        assert!(
            e.message.contains("not JSON") && e.message.contains("not json"),
            "{e}"
        );
    }
}
