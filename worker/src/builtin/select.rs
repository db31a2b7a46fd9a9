//! `select`: columns computed from each record that passes a condition.
//!
//! A column that is a pointer alone copies the field as it is (any JSON
//! value; `null` when the record has no such field); arithmetic works on
//! numbers, whole while both sides are whole (`/` is always a
//! floating-point division), null when a side is null or not a number. A
//! comparison with a null is false, so `where` drops such records.

use bytes::Bytes;
use weir_host::{BatchContext, BatchOutput, OperatorError, TaskIdent};
use weir_model::builtin::{BinaryOp, Comparison, Condition, Expr};
use weir_model::format::Format;
use weir_model::{Record, RecordBuffer, Records};

use super::fields::{Field, FieldReader, NotNumber};
use super::{Number, input_error};
use crate::operators::StreamOperator;
use weir_host::Output;

/// An expression compiled against the select's fields: a field is its
/// index in [`FieldReader::read`]'s answer.
enum Compiled {
    Integer(i64),
    Number(f64),
    Field(usize),
    Negate(Box<Compiled>),
    Binary(Box<Compiled>, BinaryOp, Box<Compiled>),
}

impl Compiled {
    /// `e`, its pointers looked up in `pointers` (which has them all).
    fn of(e: &Expr, pointers: &[String]) -> Compiled {
        match e {
            Expr::Integer(i) => Compiled::Integer(*i),
            Expr::Number(f) => Compiled::Number(*f),
            Expr::Field(p) => Compiled::Field(
                pointers
                    .iter()
                    .position(|q| q == p)
                    .expect("every pointer an expression reads is listed"),
            ),
            Expr::Negate(e) => Compiled::Negate(Box::new(Compiled::of(e, pointers))),
            Expr::Binary(a, op, b) => Compiled::Binary(
                Box::new(Compiled::of(a, pointers)),
                *op,
                Box::new(Compiled::of(b, pointers)),
            ),
        }
    }
}

/// A column: a field copied as it is, or a number computed.
enum Column {
    Copy(usize),
    Computed(Compiled),
}

/// A condition's term: a truth value, or a comparison.
type Term = (Compiled, Option<(Comparison, Compiled)>);

pub(super) struct Select {
    /// Each column, after its name as a JSON string and a colon.
    columns: Vec<(Vec<u8>, Column)>,
    /// The condition's terms, all of which must hold.
    filter: Vec<Term>,
    /// Every pointer the columns and the condition read, read from the
    /// input's records.
    reader: FieldReader,
    /// What the input is encoded in.
    input: Format,
    /// Whether its keys are a row stream's (MessagePack), written as JSON
    /// for its output.
    keys_of_rows: bool,
    ident: TaskIdent,
}

/// A key of a row stream (MessagePack) as a key of a JSON one.
fn json_key(key: &[u8]) -> bytes::Bytes {
    let mut out = Vec::new();
    super::aggregate::KeyText::Msgpack.write(&mut out, key);
    out.into()
}

impl Select {
    pub(super) fn new(
        columns: Vec<(String, Expr)>,
        filter: Option<Condition>,
        input: Format,
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
        let columns = columns
            .iter()
            .map(|(name, e)| {
                let mut prefix = serde_json::to_vec(name).expect("a string");
                prefix.push(b':');
                let column = match Compiled::of(e, &pointers) {
                    Compiled::Field(i) => Column::Copy(i),
                    c => Column::Computed(c),
                };
                (prefix, column)
            })
            .collect();
        let filter = filter
            .iter()
            .flat_map(|c| &c.all)
            .map(|(a, b)| {
                (
                    Compiled::of(a, &pointers),
                    b.as_ref()
                        .map(|(cmp, b)| (*cmp, Compiled::of(b, &pointers))),
                )
            })
            .collect();
        Select {
            columns,
            filter,
            reader: FieldReader::new(&pointers, &input),
            keys_of_rows: input.codec == weir_model::codec::Codec::Row,
            input,
            ident,
        }
    }

    fn fields<'a>(
        &'a self,
        value: &'a [u8],
        scratch: &'a mut Vec<u8>,
    ) -> Result<Vec<Option<Field<'a>>>, OperatorError> {
        self.reader.read(value, scratch).map_err(|e| {
            input_error(
                &self.ident,
                format!("a record {e}: {}", self.input.excerpt(value)),
            )
        })
    }

    fn passes(&self, fields: &[Option<Field<'_>>]) -> Result<bool, String> {
        for (left, right) in &self.filter {
            let a = number(left, fields)?;
            let holds = match right {
                None => a.is_some_and(|a| a.as_f64() != 0.0),
                Some((cmp, right)) => match (a, number(right, fields)?) {
                    (Some(a), Some(b)) => compare(a, *cmp, b),
                    _ => false,
                },
            };
            if !holds {
                return Ok(false);
            }
        }
        Ok(true)
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

/// An expression's value as a number (`None`: null, or not a number); an
/// error for a malformed row.
fn number(e: &Compiled, fields: &[Option<Field<'_>>]) -> Result<Option<Number>, String> {
    Ok(match e {
        Compiled::Integer(i) => Some(Number::Int(*i)),
        Compiled::Number(f) => Some(Number::Float(*f)),
        Compiled::Field(i) => match fields[*i].map(Field::number) {
            None | Some(Err(NotNumber::Other)) => None,
            Some(Ok(n)) => n,
            Some(Err(NotNumber::Malformed(e))) => return Err(e),
        },
        Compiled::Negate(e) => match number(e, fields)? {
            None => None,
            Some(Number::Int(i)) => Some(
                i.checked_neg()
                    .map_or(Number::Float(-(i as f64)), Number::Int),
            ),
            Some(Number::Float(f)) => Some(Number::Float(-f)),
        },
        Compiled::Binary(a, op, b) => match (number(a, fields)?, number(b, fields)?) {
            (Some(a), Some(b)) => Some(arithmetic(a, *op, b)),
            _ => None,
        },
    })
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

impl Select {
    /// The selected columns of the records that pass, each record given as
    /// its key, value and timestamp; `size` is about their values' bytes.
    fn select<'a>(
        &self,
        records: impl ExactSizeIterator<Item = (Option<Bytes>, &'a [u8], Option<i64>)>,
        size: usize,
    ) -> Result<RecordBuffer, OperatorError> {
        let mut main = RecordBuffer::with_capacity(records.len(), size + 16 * records.len());
        let mut scratch = Vec::new();
        for (key, value, timestamp) in records {
            let fields = self.fields(value, &mut scratch)?;
            let malformed_row = |e: String| {
                input_error(
                    &self.ident,
                    format!(
                        "a record is a malformed row ({e}): {}",
                        self.input.excerpt(value)
                    ),
                )
            };
            if !self.passes(&fields).map_err(malformed_row)? {
                continue;
            }
            let mut malformed = None;
            let key = match key {
                Some(k) if self.keys_of_rows => Some(json_key(&k)),
                k => k,
            };
            main.push(key, timestamp, |value| {
                value.push(b'{');
                for (i, (prefix, column)) in self.columns.iter().enumerate() {
                    if i > 0 {
                        value.push(b',');
                    }
                    value.extend_from_slice(prefix);
                    match column {
                        // A field alone: copied as it is.
                        Column::Copy(f) => match fields[*f] {
                            Some(f) => {
                                if let Err(e) = f.write_json(value) {
                                    malformed.get_or_insert(e);
                                }
                            }
                            None => value.extend_from_slice(b"null"),
                        },
                        Column::Computed(e) => match number(e, &fields) {
                            Ok(Some(n)) => n.write(value),
                            Ok(None) => value.extend_from_slice(b"null"),
                            Err(e) => {
                                malformed.get_or_insert(e);
                            }
                        },
                    }
                }
                value.push(b'}');
            });
            if let Some(e) = malformed {
                return Err(malformed_row(e));
            }
        }
        Ok(main)
    }
}

impl StreamOperator for Select {
    fn process(
        &mut self,
        batch: Vec<Record>,
        _: BatchContext,
    ) -> Result<BatchOutput, OperatorError> {
        let size = batch.iter().map(|r| r.value.len()).sum();
        let records = batch
            .iter()
            .map(|r| (r.key.clone(), &r.value[..], r.timestamp));
        Ok(BatchOutput {
            main: self.select(records, size)?.finish(),
            side: Vec::new(),
        })
    }

    fn process_records(
        &mut self,
        batch: Records,
        ctx: BatchContext,
    ) -> Result<Output, OperatorError> {
        let Records::Packed(batch) = batch else {
            return self.process(batch.into_list(), ctx).map(Output::from);
        };
        // Read in place; written into one buffer.
        let records = batch
            .iter()
            .map(|r| (r.key.map(Bytes::copy_from_slice), r.value, r.timestamp));
        Ok(Output {
            main: self
                .select(records, batch.bytes() as usize)?
                .finish_records(),
            side: Vec::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_model::builtin::expr::{parse_condition, parse_expr};

    fn select(columns: &[&str], filter: Option<&str>) -> Select {
        select_from(columns, filter, Format::default())
    }

    fn select_from(columns: &[&str], filter: Option<&str>, input: Format) -> Select {
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
            input,
            TaskIdent::default(),
        )
    }

    fn run(s: &mut Select, records: &[&str]) -> Vec<String> {
        let records: Vec<Vec<u8>> = records.iter().map(|r| r.as_bytes().to_vec()).collect();
        run_on(s, records)
    }

    /// The selected records' values, read from records of their own and,
    /// the same, from a packed batch (which comes out packed).
    fn run_on(s: &mut Select, records: Vec<Vec<u8>>) -> Vec<String> {
        let batch: Vec<Record> = records
            .into_iter()
            .map(|r| Record {
                key: None,
                value: r.into(),
                timestamp: Some(5),
            })
            .collect();
        let ctx = BatchContext {
            watermark: None,
            processing_time: 0,
        };
        let packed = weir_model::PackedRecords::from_records(&batch).unwrap();
        let listed = s.process(batch, ctx).unwrap().main;
        let Records::Packed(read_in_place) = s
            .process_records(Records::Packed(packed), ctx)
            .unwrap()
            .main
        else {
            panic!("a packed batch's selection is packed");
        };
        assert_eq!(read_in_place.into_records(), listed);
        listed
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

    /// The same select over rows and over their JSON gives the same
    /// output.
    #[test]
    fn rows_select_as_their_json_does() {
        use std::sync::Arc;
        use weir_model::codec::Codec;
        use weir_model::types::{Type, row};
        let ty: Type = "{id: u64, k: u32?, price: f64, n: i16, name: string, at: {x: i64}?}"
            .parse()
            .unwrap();
        let schema = row::Schema::new(ty);
        let records = [
            r#"{"id": 4, "k": 4, "price": 250.5, "n": -3, "name": "a", "at": {"x": 9}}"#,
            r#"{"id": 5, "k": null, "price": 2, "n": 7, "name": "b", "at": null}"#,
            r#"{"id": 6, "k": 1, "price": 0.1, "n": 0, "name": "c\"d", "at": {"x": -1}}"#,
        ];
        let rows: Vec<Vec<u8>> = records
            .iter()
            .map(|r| {
                let mut row = Vec::new();
                row::json::read_value(&schema.node, r.as_bytes(), &mut row).unwrap();
                row
            })
            .collect();
        let format = Format {
            codec: Codec::Row,
            schema: Some(Arc::new(schema)),
        };
        let json: Vec<Vec<u8>> = rows
            .iter()
            .map(|r| {
                let mut out = Vec::new();
                format.write_json(r, &mut out).unwrap();
                out
            })
            .collect();
        let columns = [
            "id = /id",
            "k = /k",
            "dollars = 0.908 * /price",
            "sum = /n + /at/x",
            "name = /name",
            "at = /at",
            "none = /missing",
        ];
        let filter = Some("/id % 2 == 0 and /price > 0.05");
        let from_rows = run_on(&mut select_from(&columns, filter, format), rows);
        let from_json = run_on(&mut select_from(&columns, filter, Format::default()), json);
        assert_eq!(from_rows, from_json);
        assert_eq!(
            from_rows,
            [
                r#"{"id":4,"k":4,"dollars":227.454,"sum":6,"name":"a","at":{"x":9},"none":null}"#,
                r#"{"id":6,"k":1,"dollars":0.0908,"sum":-1,"name":"c\"d","at":{"x":-1},"none":null}"#,
            ]
        );
    }

    /// A malformed row is an error, in a computed column or a condition
    /// as in a copied one, never a null; keys of rows (MessagePack) leave
    /// as JSON.
    #[test]
    fn malformed_rows_fail_and_keys_of_rows_leave_as_json() {
        use std::sync::Arc;
        use weir_model::codec::Codec;
        use weir_model::types::{Type, row};
        let ty: Type = "{id: u64, name: string}".parse().unwrap();
        let format = Format {
            codec: Codec::Row,
            schema: Some(Arc::new(row::Schema::new(ty))),
        };
        let ctx = || BatchContext {
            watermark: None,
            processing_time: 0,
        };
        let batch = |value: Vec<u8>, key: Option<&[u8]>| {
            vec![Record {
                key: key.map(|k| k.to_vec().into()),
                value: value.into(),
                timestamp: None,
            }]
        };
        for (columns, filter) in [
            (&["d = /id * 2"][..], None),
            (&["id = /id"][..], Some("/id > 1")),
            (&["n = /name * 1"][..], None),
            (&["n = /name"][..], None),
        ] {
            let mut s = select_from(columns, filter, format.clone());
            // Three bytes: no slot of the id, nor of the name, in them.
            let e = s.process(batch(vec![0, 1, 2], None), ctx()).unwrap_err();
            assert!(e.message.contains("malformed row"), "{columns:?}: {e}");
        }
        let mut row = Vec::new();
        row::json::read_value(
            &format.schema.as_ref().unwrap().node,
            br#"{"id": 7, "name": "ana"}"#,
            &mut row,
        )
        .unwrap();
        let mut s = select_from(&["id = /id"], None, format.clone());
        let out = s
            .process(batch(row, Some(&[0xa3, b'a', b'n', b'a'])), ctx())
            .unwrap();
        assert_eq!(out.main[0].key.as_deref(), Some(&br#""ana""#[..]));
        assert_eq!(&out.main[0].value[..], br#"{"id":7}"#);
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
