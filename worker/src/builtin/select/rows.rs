//! `select`'s output as rows of its columns' types: a copied field's slot
//! (or payload) copied from the input row as it is, a computed number
//! written into its slot; no text on the way.

use std::sync::Arc;

use weir_model::builtin::Expr;
use weir_model::codec::Codec;
use weir_model::format::Format;
use weir_model::types::row::{self, Node, Scalar, Schema};

use super::super::fields::Field;
use weir_model::builtin::typing::NumberKind;

use super::{Column, Values, number, write_json};
use crate::builtin::Number;

/// How the select writes its rows.
pub(super) struct RowOutput {
    schema: Arc<Schema>,
    /// Bytes of the rows' bitmap and slots.
    fixed: usize,
    /// Each column's slot, in order; `None`: each record's columns are
    /// written as JSON and read into a row (a field read through JSON, or
    /// a column of another shape than the typing gives).
    slots: Option<Vec<Slot>>,
    /// Each output row is its input row ([`verbatim`]).
    verbatim: bool,
    /// The top-level fields with a payload: (index, slot offset, whether
    /// it may be null), checked in a row passed on as it is.
    payloads: Vec<(usize, usize, bool)>,
}

/// Whether `columns` read from rows of `input` and written as rows of
/// `output` give each record's own row, byte for byte: each column copies
/// the input's top-level field in its own place, so the output's type is
/// the input's but for the fields' names (as Flink drops a projection of
/// every field in order).
pub(super) fn verbatim(columns: &[(String, Expr)], input: &Format, output: &Format) -> bool {
    let (Some(input), Codec::Row, Some(output), Codec::Row) =
        (&input.schema, input.codec, &output.schema, output.codec)
    else {
        return false;
    };
    let (
        Node::Record {
            fields: ins,
            bitmap: in_bitmap,
            fixed: in_fixed,
        },
        Node::Record {
            fields: outs,
            bitmap,
            fixed,
        },
    ) = (&input.node, &output.node)
    else {
        return false;
    };
    (in_bitmap, in_fixed) == (bitmap, fixed)
        && ins.len() == columns.len()
        && outs.len() == columns.len()
        && columns
            .iter()
            .zip(outs)
            .enumerate()
            .all(|(i, ((_, e), out))| {
                let Expr::Field(pointer) = e else {
                    return false;
                };
                matches!(
                    input.pointer(pointer).as_deref(),
                    Some(&[(j, field)]) if j == i
                        && field.node == out.node
                        && field.offset == out.offset
                        && field.optional == out.optional
                )
            })
}

/// A column's slot in the row and what goes in it.
#[derive(Clone, Copy)]
struct Slot {
    offset: usize,
    optional: bool,
    what: Kind,
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    /// The field, copied.
    Copy,
    /// An `i64`.
    Whole,
    /// An `f64`.
    Float,
    /// A number or null as JSON text (a `json` column).
    Any,
}

impl RowOutput {
    /// Rows of `schema` (the select's output type) of `columns`; `in_place`
    /// when every field comes as a row's slot.
    pub(super) fn new(
        schema: Arc<Schema>,
        columns: &[(Vec<u8>, Column)],
        in_place: bool,
        verbatim: bool,
    ) -> RowOutput {
        let (fixed, slots) = match &schema.node {
            Node::Record { fields, fixed, .. } if fields.len() == columns.len() => {
                let slots: Option<Vec<Slot>> = columns
                    .iter()
                    .zip(fields)
                    .map(|((_, column), f)| {
                        let what = match (column, &f.node) {
                            (Column::Copy(_) | Column::CopySlot(_), _) => Kind::Copy,
                            (Column::Computed(_, NumberKind::Any), Node::Json) => Kind::Any,
                            (Column::Computed(_, kind), Node::Optional(n)) => match (kind, &**n) {
                                (NumberKind::Whole, Node::Scalar(Scalar::I64)) => Kind::Whole,
                                (NumberKind::Float, Node::Scalar(Scalar::F64)) => Kind::Float,
                                _ => return None,
                            },
                            _ => return None,
                        };
                        Some(Slot {
                            offset: f.offset,
                            optional: f.optional,
                            what,
                        })
                    })
                    .collect();
                (*fixed, slots.filter(|_| in_place))
            }
            _ => (0, None),
        };
        let payloads = match &schema.node {
            Node::Record { fields, .. } => fields
                .iter()
                .enumerate()
                .filter(|(_, f)| {
                    let node = match &f.node {
                        Node::Optional(inner) => inner,
                        node => node,
                    };
                    !matches!(node, Node::Scalar(_))
                })
                .map(|(i, f)| (i, f.offset, matches!(f.node, Node::Optional(_))))
                .collect(),
            _ => Vec::new(),
        };
        RowOutput {
            schema,
            fixed,
            slots,
            verbatim,
            payloads,
        }
    }

    /// Whether each row it writes is the input's row.
    pub(super) fn is_verbatim(&self) -> bool {
        self.verbatim
    }

    /// An error for a row too short for the bitmap and slots, or with a
    /// top-level payload outside it (checked when a row passes as it is,
    /// as copying its fields would).
    #[inline]
    pub(super) fn check(&self, row: &[u8]) -> Result<(), String> {
        if row.len() < self.fixed {
            return Err(format!(
                "{} bytes, where a row has {} at least",
                row.len(),
                self.fixed
            ));
        }
        if !self.payloads.is_empty() {
            self.check_payloads(row)?;
        }
        Ok(())
    }

    fn check_payloads(&self, row: &[u8]) -> Result<(), String> {
        for &(index, offset, optional) in &self.payloads {
            if !(optional && row::is_null(row, 0, index)) {
                row::var(row, offset).map_err(|e| e.0)?;
            }
        }
        Ok(())
    }

    /// The rows' type.
    #[cfg(test)]
    pub(super) fn schema(&self) -> &Schema {
        &self.schema
    }

    /// Whether it writes rows in place (not through JSON).
    #[cfg(test)]
    pub(super) fn in_place(&self) -> bool {
        self.slots.is_some()
    }

    /// Append the row of `columns` of a record whose fields are `fields`
    /// to `out`; `json` is scratch space.
    pub(super) fn write(
        &self,
        columns: &[(Vec<u8>, Column)],
        values: &Values<'_>,
        out: &mut Vec<u8>,
        json: &mut Vec<u8>,
    ) -> Result<(), String> {
        if self.verbatim {
            self.check(values.row)?;
            out.extend_from_slice(values.row);
            return Ok(());
        }
        let Some(slots) = &self.slots else {
            json.clear();
            write_json(columns, values, json)?;
            return row::json::read_value(&self.schema.node, json, out);
        };
        let start = out.len();
        out.resize(start + self.fixed, 0);
        for (i, ((_, column), slot)) in columns.iter().zip(slots).enumerate() {
            let at = start + slot.offset;
            let null = |out: &mut Vec<u8>| {
                if !slot.optional {
                    return Err(format!("column {i} is null, and its type is not optional"));
                }
                row::set_null(out, start, i);
                Ok(())
            };
            match (column, slot.what) {
                (Column::Copy(_) | Column::CopySlot(_), _) => match column.copied(values).flatten()
                {
                    Some(Field::Row(from)) => {
                        let mut node = &from.field.node;
                        if let Node::Optional(inner) = node {
                            if row::is_null(from.base, 0, from.index) {
                                null(out)?;
                                continue;
                            }
                            node = inner;
                        }
                        let off = from.field.offset;
                        match node {
                            Node::Scalar(s) => {
                                let bytes = slot_bytes(from.base, off, s.width())?;
                                out[at..at + s.width()].copy_from_slice(bytes);
                            }
                            _ => {
                                // A payload is relative to itself: copied
                                // as it is.
                                let payload = row::var(from.base, off).map_err(|e| e.0)?;
                                let p = out.len();
                                out.extend_from_slice(payload);
                                row::patch_var(out, start, slot.offset, p);
                            }
                        }
                    }
                    None => null(out)?,
                    Some(Field::Json(_)) => {
                        return Err(format!("column {i}: a field read as JSON, not in place"));
                    }
                },
                (Column::Computed(e, kind), what) => {
                    match (what, Column::value(*kind, number(e, values)?)) {
                        (Kind::Whole, Some(Number::Int(n))) => {
                            out[at..at + 8].copy_from_slice(&n.to_le_bytes())
                        }
                        (Kind::Float, Some(Number::Float(f))) => {
                            out[at..at + 8].copy_from_slice(&f.to_le_bytes())
                        }
                        (Kind::Any, n) => {
                            let p = out.len();
                            match n {
                                Some(n) => n.write(out),
                                None => out.extend_from_slice(b"null"),
                            }
                            row::patch_var(out, start, slot.offset, p);
                        }
                        (_, None) => null(out)?,
                        (what, Some(n)) => {
                            return Err(format!("column {i}: {n:?} in a {what:?} column"));
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

/// The `width` bytes of the slot at `off` of `row`; an error when the row
/// is too short for it.
fn slot_bytes(row: &[u8], off: usize, width: usize) -> Result<&[u8], String> {
    row.get(off..off + width).ok_or_else(|| {
        format!(
            "a row of {} bytes has no {width}-byte slot at {off}",
            row.len()
        )
    })
}
