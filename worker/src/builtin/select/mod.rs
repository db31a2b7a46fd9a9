//! `select`: columns computed from each record that passes a condition.
//!
//! A column that is a pointer alone copies the field as it is (any JSON
//! value; `null` when the record has no such field); arithmetic works on
//! numbers, whole while both sides are whole (`/` is always a
//! floating-point division), null when a side is null or not a number, when
//! a whole result does not fit in an `i64` or a float is not finite. A
//! comparison with a null is false, so `where` drops such records.
//!
//! From a typed stream it writes rows of its columns' types
//! ([`weir_model::builtin::typing`]; [`rows`]), from an untyped one JSON
//! objects.

mod rows;

use bytes::Bytes;
use weir_host::{BatchContext, BatchOutput, OperatorError, TaskIdent};
use weir_model::builtin::typing::NumberKind;
use weir_model::builtin::{BinaryOp, Comparison, Condition, Expr};
use weir_model::codec::Codec;
use weir_model::format::Format;
use weir_model::types::Type;
use weir_model::types::row::{FieldNode, Located, Node, Scalar};
use weir_model::{Record, RecordBuffer, Records};

use super::fields::{Field, FieldReader, NotNumber, scalar_number};
use super::{Number, input_error};
use crate::operators::StreamOperator;
use weir_host::Output;

/// An expression compiled against the select's input into one closure
/// per node, each with what it reads resolved once: a field is a slot of
/// the row read in place, or its index in [`FieldReader::read`]'s answer;
/// an operator's kind is known, and a literal side is held as a value
/// rather than evaluated.
struct Compiled(Eval);

/// An expression's value for one record (`None`: null, or not a number);
/// an error for a malformed row.
type Eval = Box<dyn Fn(&Values<'_>) -> Result<Option<Number>, String> + Send + Sync>;

/// A top-level field of the input's rows of a fixed-width type, never
/// null: found at its offset, without gathering it first.
#[derive(Clone)]
struct Slot {
    /// Its index in the row.
    index: usize,
    field: FieldNode,
    /// Its type.
    scalar: Scalar,
}

impl Slot {
    /// The slot a pointer names in rows of `format`, when it is such a
    /// field.
    fn of(pointer: &str, format: &Format) -> Option<Slot> {
        let schema = format
            .schema
            .as_ref()
            .filter(|_| format.codec == Codec::Row)?;
        let path = schema.pointer(pointer)?;
        let [(index, field)] = path[..] else {
            return None;
        };
        match field.node {
            Node::Scalar(scalar) => Some(Slot {
                index,
                field: field.clone(),
                scalar,
            }),
            _ => None,
        }
    }

    /// It in `row`.
    #[inline]
    fn in_row<'a>(&'a self, row: &'a [u8]) -> Field<'a> {
        Field::Row(Located {
            base: row,
            index: self.index,
            field: &self.field,
        })
    }
}

/// Where each of the select's pointers is read: a slot in place, or the
/// reader's field at an index.
enum Leaf {
    Slot(Slot),
    Read(usize),
}

impl Compiled {
    /// `e`, its pointers looked up in `pointers` (which has them all), each
    /// read from its `leaves`' entry.
    fn of(e: &Expr, pointers: &[String], leaves: &[Leaf]) -> Compiled {
        Compiled(Compiled::eval(e, pointers, leaves))
    }

    fn eval(e: &Expr, pointers: &[String], leaves: &[Leaf]) -> Eval {
        match e {
            Expr::Integer(i) => {
                let n = Number::Int(*i);
                Box::new(move |_| Ok(Some(n)))
            }
            Expr::Number(f) => {
                let n = Number::Float(*f);
                Box::new(move |_| Ok(Some(n)))
            }
            Expr::Field(p) => {
                let i = pointers
                    .iter()
                    .position(|q| q == p)
                    .expect("every pointer an expression reads is listed");
                match &leaves[i] {
                    Leaf::Slot(slot) => {
                        let (scalar, offset) = (slot.scalar, slot.field.offset);
                        Box::new(move |v| number_of(scalar_number(scalar, v.row, offset)))
                    }
                    Leaf::Read(j) => {
                        let j = *j;
                        Box::new(move |v| field_number(v.fields[j]))
                    }
                }
            }
            Expr::Negate(e) => {
                let e = Compiled::eval(e, pointers, leaves);
                Box::new(move |v| {
                    Ok(match e(v)? {
                        None => None,
                        Some(Number::Int(i)) => i.checked_neg().map(Number::Int),
                        Some(Number::Float(f)) => Some(Number::Float(-f)),
                    })
                })
            }
            Expr::Binary(a, op, b) => {
                let op = *op;
                // A literal side is a value, not a call.
                let literal = |e: &Expr| match e {
                    Expr::Integer(i) => Some(Number::Int(*i)),
                    Expr::Number(f) => Some(Number::Float(*f)),
                    _ => None,
                };
                match (literal(a), literal(b)) {
                    (None, Some(y)) => {
                        let a = Compiled::eval(a, pointers, leaves);
                        Box::new(move |v| Ok(a(v)?.and_then(|x| arithmetic(x, op, y))))
                    }
                    (Some(x), None) => {
                        let b = Compiled::eval(b, pointers, leaves);
                        Box::new(move |v| Ok(b(v)?.and_then(|y| arithmetic(x, op, y))))
                    }
                    _ => {
                        let (a, b) = (
                            Compiled::eval(a, pointers, leaves),
                            Compiled::eval(b, pointers, leaves),
                        );
                        Box::new(move |v| {
                            Ok(match (a(v)?, b(v)?) {
                                (Some(x), Some(y)) => arithmetic(x, op, y),
                                _ => None,
                            })
                        })
                    }
                }
            }
        }
    }
}

/// One record as the select reads it: the fields its reader gathered, and
/// the row the slots are read from in place.
struct Values<'a> {
    fields: Vec<Option<Field<'a>>>,
    row: &'a [u8],
}

/// A column: a field copied as it is, or a number computed (whole, float
/// or either by the input's type: the same from rows and from JSON).
enum Column {
    Copy(usize),
    /// A field in a slot of the row, copied.
    CopySlot(Slot),
    Computed(Compiled, NumberKind),
}

impl Column {
    /// The field a copied column copies (`None` inside: the record has no
    /// such field); `None` for a computed one.
    #[inline]
    fn copied<'a>(&'a self, values: &Values<'a>) -> Option<Option<Field<'a>>> {
        match self {
            Column::Copy(f) => Some(values.fields[*f]),
            Column::CopySlot(slot) => Some(Some(slot.in_row(values.row))),
            Column::Computed(..) => None,
        }
    }

    /// A computed value as its column holds it: a whole column holds
    /// whole numbers only (a `u64` field past `i64`'s range, read as a
    /// float, is null there), a float column finite floats.
    fn value(kind: NumberKind, n: Option<Number>) -> Option<Number> {
        match (kind, n?) {
            (NumberKind::Whole, Number::Float(_)) => None,
            (NumberKind::Float, n) => {
                Some(Number::Float(n.as_f64())).filter(|_| n.as_f64().is_finite())
            }
            (_, n) => Some(n),
        }
    }
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
    /// Whether the reader has anything to do per record: fields to gather
    /// (not every one a slot), or JSON text to check.
    gathers: bool,
    /// What the input is encoded in.
    input: Format,
    /// Whether its keys are a row stream's (MessagePack), written as JSON
    /// for its output when that is JSON.
    keys_of_rows: bool,
    /// Its output's rows, when it writes rows.
    rows: Option<rows::RowOutput>,
    ident: TaskIdent,
}

/// A key of a row stream (MessagePack) as a key of a JSON one.
fn json_key(key: &[u8]) -> bytes::Bytes {
    let mut out = Vec::new();
    super::aggregate::KeyText::Msgpack.write(&mut out, key);
    out.into()
}

impl Select {
    /// A select reading records of type `input_type` (the job graph's:
    /// `None` when untyped) encoded in `input`, writing them in `output`
    /// (rows of its columns' types, or JSON).
    pub(super) fn new(
        columns: Vec<(String, Expr)>,
        filter: Option<Condition>,
        input_type: Option<&Type>,
        input: Format,
        output: &Format,
        ident: TaskIdent,
    ) -> Select {
        let verbatim = rows::verbatim(&columns, &input, output);
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
        // Numbers at fixed offsets of the rows are read in place; the rest
        // gathered by the reader.
        let mut read = Vec::new();
        let leaves: Vec<Leaf> = pointers
            .iter()
            .map(|p| match Slot::of(p, &input) {
                Some(slot) => Leaf::Slot(slot),
                None => {
                    read.push(p.clone());
                    Leaf::Read(read.len() - 1)
                }
            })
            .collect();
        let position = |p: &String| {
            pointers
                .iter()
                .position(|q| q == p)
                .expect("every pointer is listed")
        };
        let columns: Vec<(Vec<u8>, Column)> = columns
            .iter()
            .map(|(name, e)| {
                let mut prefix = serde_json::to_vec(name).expect("a string");
                prefix.push(b':');
                let column = match e {
                    Expr::Field(p) => match &leaves[position(p)] {
                        Leaf::Slot(slot) => Column::CopySlot(slot.clone()),
                        Leaf::Read(j) => Column::Copy(*j),
                    },
                    e => Column::Computed(
                        Compiled::of(e, &pointers, &leaves),
                        // Untyped: either, value by value.
                        input_type.map_or(NumberKind::Any, |t| e.number_kind(t)),
                    ),
                };
                (prefix, column)
            })
            .collect();
        let filter = filter
            .iter()
            .flat_map(|c| &c.all)
            .map(|(a, b)| {
                (
                    Compiled::of(a, &pointers, &leaves),
                    b.as_ref()
                        .map(|(cmp, b)| (*cmp, Compiled::of(b, &pointers, &leaves))),
                )
            })
            .collect();
        let reader = FieldReader::new(&read, &input);
        // A JSON record is parsed even for no field: text that is not
        // JSON fails.
        let gathers = !read.is_empty() || input.codec != Codec::Row;
        let rows = match (&output.schema, output.codec) {
            (Some(schema), Codec::Row) => Some(rows::RowOutput::new(
                schema.clone(),
                &columns,
                reader.in_place(),
                verbatim,
            )),
            _ => None,
        };
        Select {
            columns,
            filter,
            reader,
            gathers,
            keys_of_rows: input.codec == Codec::Row,
            rows,
            input,
            ident,
        }
    }

    fn fields<'a>(
        &'a self,
        value: &'a [u8],
        scratch: &'a mut Vec<u8>,
    ) -> Result<Values<'a>, OperatorError> {
        if !self.gathers {
            // Rows, every field a slot read in place.
            return Ok(Values {
                fields: Vec::new(),
                row: value,
            });
        }
        let fields = self.reader.read(value, scratch).map_err(|e| {
            input_error(
                &self.ident,
                format!("a record {e}: {}", self.input.excerpt(value)),
            )
        })?;
        Ok(Values { fields, row: value })
    }

    fn passes(&self, values: &Values<'_>) -> Result<bool, String> {
        for (left, right) in &self.filter {
            let a = number(left, values)?;
            let holds = match right {
                None => a.is_some_and(|a| a.as_f64() != 0.0),
                Some((cmp, right)) => match (a, number(right, values)?) {
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
#[inline]
fn number(e: &Compiled, values: &Values<'_>) -> Result<Option<Number>, String> {
    (e.0)(values)
}

/// A field's number (`None`: null, missing, or not a number); an error
/// for a malformed row.
#[inline]
fn field_number(field: Option<Field<'_>>) -> Result<Option<Number>, String> {
    field.map_or(Ok(None), |f| number_of(f.number()))
}

/// A field's number read (`None`: null, or not a number); an error for a
/// malformed row.
#[inline]
fn number_of(read: Result<Option<Number>, NotNumber>) -> Result<Option<Number>, String> {
    match read {
        Err(NotNumber::Other) => Ok(None),
        Ok(n) => Ok(n),
        Err(NotNumber::Malformed(e)) => Err(e),
    }
}

/// `a op b`: whole while both sides are whole (`None` when the result
/// does not fit in an `i64`, or for a remainder of a division by zero),
/// `/` always in floating point.
fn arithmetic(a: Number, op: BinaryOp, b: Number) -> Option<Number> {
    if let (Number::Int(x), Number::Int(y)) = (a, b) {
        let whole = match op {
            BinaryOp::Add => x.checked_add(y),
            BinaryOp::Subtract => x.checked_sub(y),
            BinaryOp::Multiply => x.checked_mul(y),
            // By a power of two (`% 2`), without a division.
            BinaryOp::Remainder if y > 0 && y & (y - 1) == 0 => {
                let r = x & (y - 1);
                Some(if x < 0 && r != 0 { r - y } else { r })
            }
            BinaryOp::Remainder => x.checked_rem(y),
            BinaryOp::Divide => return Some(Number::Float(x as f64 / y as f64)),
        };
        return whole.map(Number::Int);
    }
    let (x, y) = (a.as_f64(), b.as_f64());
    Some(Number::Float(match op {
        BinaryOp::Add => x + y,
        BinaryOp::Subtract => x - y,
        BinaryOp::Multiply => x * y,
        BinaryOp::Divide => x / y,
        BinaryOp::Remainder => x % y,
    }))
}

impl Select {
    /// Whether it passes every record on as it is: no condition, and rows
    /// out that are its rows in ([`rows::verbatim`]).
    fn passes_rows_as_they_are(&self) -> bool {
        self.filter.is_empty() && self.rows.as_ref().is_some_and(rows::RowOutput::is_verbatim)
    }

    /// An error for the first value that is not a row of the input's type
    /// (too short, a payload outside it) among rows passed on as they are.
    fn check_rows<'a>(&self, values: impl Iterator<Item = &'a [u8]>) -> Result<(), OperatorError> {
        let Some(rows) = &self.rows else {
            return Ok(());
        };
        for value in values {
            if let Err(e) = rows.check(value) {
                return Err(input_error(
                    &self.ident,
                    format!(
                        "a record is a malformed row ({e}): {}",
                        self.input.excerpt(value)
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The selected columns of the records that pass, each record given as
    /// its key, value and timestamp; `size` is about their values' bytes.
    fn select<'a>(
        &self,
        records: impl ExactSizeIterator<Item = (Option<Bytes>, &'a [u8], Option<i64>)>,
        size: usize,
    ) -> Result<RecordBuffer, OperatorError> {
        let mut main = RecordBuffer::with_capacity(records.len(), size + 16 * records.len());
        let mut scratch = Vec::new();
        let mut json = Vec::new();
        for (key, value, timestamp) in records {
            let values = self.fields(value, &mut scratch)?;
            let malformed_row = |e: String| {
                input_error(
                    &self.ident,
                    format!(
                        "a record is a malformed row ({e}): {}",
                        self.input.excerpt(value)
                    ),
                )
            };
            if !self.passes(&values).map_err(malformed_row)? {
                continue;
            }
            let key = match key {
                // Keys of rows (MessagePack) stay so in rows.
                Some(k) if self.keys_of_rows && self.rows.is_none() => Some(json_key(&k)),
                k => k,
            };
            let written = match &self.rows {
                Some(rows) => main.try_push(key, timestamp, |out| {
                    rows.write(&self.columns, &values, out, &mut json)
                }),
                None => main.try_push(key, timestamp, |out| {
                    write_json(&self.columns, &values, out)
                }),
            };
            written.map_err(malformed_row)?;
        }
        Ok(main)
    }
}

/// Append the columns as a JSON object.
fn write_json(
    columns: &[(Vec<u8>, Column)],
    values: &Values<'_>,
    value: &mut Vec<u8>,
) -> Result<(), String> {
    value.push(b'{');
    for (i, (prefix, column)) in columns.iter().enumerate() {
        if i > 0 {
            value.push(b',');
        }
        value.extend_from_slice(prefix);
        match column {
            Column::Computed(e, kind) => match Column::value(*kind, number(e, values)?) {
                Some(n) => n.write(value),
                None => value.extend_from_slice(b"null"),
            },
            // A field alone: copied as it is.
            copy => match copy.copied(values).flatten() {
                Some(f) => f.write_json(value)?,
                None => value.extend_from_slice(b"null"),
            },
        }
    }
    value.push(b'}');
    Ok(())
}

impl StreamOperator for Select {
    fn process(
        &mut self,
        batch: Vec<Record>,
        _: BatchContext,
    ) -> Result<BatchOutput, OperatorError> {
        if self.passes_rows_as_they_are() {
            self.check_rows(batch.iter().map(|r| &r.value[..]))?;
            return Ok(BatchOutput {
                main: batch,
                side: Vec::new(),
            });
        }
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
        if self.passes_rows_as_they_are() {
            self.check_rows(batch.iter().map(|r| r.value))?;
            return Ok(Output {
                main: Records::Packed(batch),
                side: Vec::new(),
            });
        }
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
mod tests;
