//! The fields a built-in reads from its input's records, by JSON pointer,
//! in whatever the stream is encoded in: JSON text (parsed once per record
//! for all the pointers) or rows (each pointer compiled once to a path of
//! slots, a field read in place). A built-in's results are the same in
//! both.

use serde_json::value::RawValue;
use weir_model::codec::Codec;
use weir_model::format::Format;
use weir_model::json::Pointers;
use weir_model::types::row::{self, FieldNode, Located, Node, Scalar};

use super::Number;

/// One field of a record.
#[derive(Clone, Copy)]
pub(crate) enum Field<'a> {
    /// Its JSON text.
    Json(&'a RawValue),
    /// Its slot in a row.
    Row(Located<'a, 'a>),
}

/// Why a field has no number.
#[derive(Debug)]
pub(crate) enum NotNumber {
    /// It is something else (a string, a list...).
    Other,
    /// Its row is malformed (the bytes of the record say so).
    Malformed(String),
}

impl From<row::RowError> for NotNumber {
    fn from(e: row::RowError) -> NotNumber {
        NotNumber::Malformed(e.to_string())
    }
}

impl Field<'_> {
    /// Its value as a number: `Ok(None)` for a null.
    pub(crate) fn number(self) -> Result<Option<Number>, NotNumber> {
        match self {
            Field::Json(raw) => Number::parse(raw.get()).map_err(|()| NotNumber::Other),
            Field::Row(at) => row_number(at),
        }
    }

    /// Whether it is null (JSON's `null`, a null optional).
    pub(crate) fn is_null(self) -> bool {
        match self {
            Field::Json(raw) => raw.get() == "null",
            Field::Row(at) => {
                let null = matches!(at.field.node, Node::Optional(_))
                    && row::is_null(at.base, 0, at.index);
                null || matches!(at.field.node, Node::Json)
                    && row::var(at.base, at.field.offset).is_ok_and(|p| p.trim_ascii() == b"null")
            }
        }
    }

    /// Append it as JSON.
    pub(crate) fn write_json(self, out: &mut Vec<u8>) -> Result<(), String> {
        match self {
            Field::Json(raw) => {
                out.extend_from_slice(raw.get().as_bytes());
                Ok(())
            }
            Field::Row(at) => row::json::write_field(at, out).map_err(|e| e.to_string()),
        }
    }
}

/// A number in a row's slot as JSON would give it ([`scalar_number`];
/// a `json` field's text as a number).
fn row_number(at: Located<'_, '_>) -> Result<Option<Number>, NotNumber> {
    let Located { base, index, field } = at;
    let mut node = &field.node;
    if let Node::Optional(inner) = node {
        if row::is_null(base, 0, index) {
            return Ok(None);
        }
        node = inner;
    }
    let off = field.offset;
    match node {
        Node::Scalar(s) => scalar_number(*s, base, off),
        Node::Json => {
            let text = row::utf8(row::var(base, off)?)?;
            Number::parse(text.trim()).map_err(|()| NotNumber::Other)
        }
        _ => {
            // Not a number; its slot must still be inside its row.
            row::var(base, off)?;
            Err(NotNumber::Other)
        }
    }
}

/// The number in the slot of a `scalar` at `off` of `base` as JSON would
/// give it: whole numbers whole (an unsigned one past `i64::MAX` as a
/// float, as its JSON text reads), an `f32` as its shortest text reads as
/// an `f64`, a float that is not finite null (JSON writes it so).
#[inline]
pub(crate) fn scalar_number(
    scalar: Scalar,
    base: &[u8],
    off: usize,
) -> Result<Option<Number>, NotNumber> {
    let finite = |f: f64| f.is_finite().then_some(Number::Float(f));
    match scalar {
        Scalar::U64 => {
            let u = u64::from_le_bytes(row::fixed(base, off)?);
            Ok(Some(
                i64::try_from(u).map_or(Number::Float(u as f64), Number::Int),
            ))
        }
        Scalar::F64 => Ok(finite(f64::from_le_bytes(row::fixed(base, off)?))),
        Scalar::F32 => {
            let f = f32::from_le_bytes(row::fixed(base, off)?);
            if !f.is_finite() {
                return Ok(None);
            }
            // Its JSON text (the shortest that reads back as this
            // f32), read as an f64, as a reader of the JSON would.
            let text = serde_json::to_string(&f).map_err(|e| row::RowError(e.to_string()))?;
            Ok(finite(text.parse().map_err(|_| row::RowError(text))?))
        }
        Scalar::Bool => Err(NotNumber::Other),
        int => Ok(row::scalar_int(int, base, off)?.map(Number::Int)),
    }
}

/// Reads the fields at a list of pointers from records of one stream.
pub(crate) struct FieldReader {
    how: How,
}

enum How {
    /// JSON text, every pointer in one pass.
    Json(Pointers),
    /// Rows, each pointer's path of slots.
    Rows(Vec<Vec<(usize, FieldNode)>>),
    /// Rows, but a pointer goes into a `json` field or past the type:
    /// each row written as JSON first.
    RowsAsJson(Format, Pointers),
}

impl FieldReader {
    /// A reader of `pointers` from records in `format`.
    pub(crate) fn new(pointers: &[String], format: &Format) -> FieldReader {
        let names: Vec<&str> = pointers.iter().map(String::as_str).collect();
        let how = match (&format.schema, format.codec) {
            (Some(schema), Codec::Row) => {
                let paths: Option<Vec<_>> = pointers
                    .iter()
                    .map(|p| {
                        schema
                            .pointer(p)
                            .map(|path| path.into_iter().map(|(i, f)| (i, f.clone())).collect())
                    })
                    .collect();
                match paths {
                    Some(paths) => How::Rows(paths),
                    None => How::RowsAsJson(format.clone(), Pointers::new(&names)),
                }
            }
            _ => How::Json(Pointers::new(&names)),
        };
        FieldReader { how }
    }

    /// Whether it reads every field from a row in place ([`Field::Row`]
    /// only).
    pub(crate) fn in_place(&self) -> bool {
        matches!(self.how, How::Rows(_))
    }

    /// The fields of `value` at the pointers, in their order (`None`: the
    /// record has no such field, or a record on the way is null); `scratch`
    /// holds what a row is read through, when it must be.
    pub(crate) fn read<'a>(
        &'a self,
        value: &'a [u8],
        scratch: &'a mut Vec<u8>,
    ) -> Result<Vec<Option<Field<'a>>>, String> {
        let json = |pointers: &Pointers, text: &'a [u8]| {
            pointers
                .read(text)
                .map(|v| v.into_iter().map(|f| f.map(Field::Json)).collect())
                .map_err(|e| format!("is not JSON ({e})"))
        };
        match &self.how {
            How::Json(pointers) => json(pointers, value),
            How::Rows(paths) => {
                // A plain loop: this runs per record, for every field read.
                let mut fields = Vec::with_capacity(paths.len());
                for path in paths {
                    let at = row::locate(path, value)
                        .map_err(|e| format!("is a malformed row ({e})"))?;
                    fields.push(at.map(Field::Row));
                }
                Ok(fields)
            }
            How::RowsAsJson(format, pointers) => {
                scratch.clear();
                format.write_json(value, scratch)?;
                json(pointers, scratch)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use weir_model::types::Type;
    use weir_model::types::row::Schema;

    /// Reads `pointers` from a record both as a row of `ty` and as the
    /// JSON that row is written as (what a JSON stream would carry): the
    /// numbers and the JSON of every field must be the same.
    fn same_in_both(ty: &str, record: &str, pointers: &[&str]) -> Vec<(Option<Number>, String)> {
        let schema = Schema::new(ty.parse::<Type>().unwrap());
        let mut row = Vec::new();
        row::json::read_value(&schema.node, record.as_bytes(), &mut row).unwrap();
        let rows = Format {
            codec: Codec::Row,
            schema: Some(Arc::new(schema)),
        };
        let mut json = Vec::new();
        rows.write_json(&row, &mut json).unwrap();
        let pointers: Vec<String> = pointers.iter().map(|p| p.to_string()).collect();
        let read = |format: &Format, value: &[u8]| {
            let reader = FieldReader::new(&pointers, format);
            let mut scratch = Vec::new();
            reader
                .read(value, &mut scratch)
                .unwrap()
                .into_iter()
                .map(|f| match f {
                    None => (None, "null".to_owned()),
                    Some(f) => {
                        let mut out = Vec::new();
                        f.write_json(&mut out).unwrap();
                        (f.number().ok().flatten(), String::from_utf8(out).unwrap())
                    }
                })
                .collect::<Vec<_>>()
        };
        let from_rows = read(&rows, &row);
        assert_eq!(from_rows, read(&Format::default(), &json), "{record}");
        from_rows
    }

    #[test]
    fn a_row_reads_as_its_json_does() {
        let ty = "{id: u64, k: u32?, price: f64, small: f32, big: u64, neg: i8, \
                  name: string, flag: bool, at: {x: i64, y: f64?}?, extra: json}";
        let pointers = [
            "/id", "/k", "/price", "/small", "/big", "/neg", "/name", "/flag", "/at/x", "/at/y",
            "/extra",
        ];
        let got = same_in_both(
            ty,
            r#"{"id": 7, "k": null, "price": 2.5, "small": 0.1, "big": 18446744073709551615,
                "neg": -3, "name": "a\"b", "flag": true, "at": {"x": -9, "y": null},
                "extra": {"deep": [1, 2]}}"#,
            &pointers,
        );
        use Number::{Float, Int};
        let numbers: Vec<Option<Number>> = got.iter().map(|(n, _)| *n).collect();
        assert_eq!(
            numbers,
            [
                Some(Int(7)),
                None,
                Some(Float(2.5)),
                Some(Float(0.1)),
                Some(Float(18446744073709551615.0)),
                Some(Int(-3)),
                None,
                None,
                Some(Int(-9)),
                None,
                None
            ]
        );
        assert_eq!(got[3].1, "0.1", "an f32 as its shortest text");
        // A null record on the way: its fields are null.
        let got = same_in_both(
            ty,
            r#"{"id": 1, "price": 1, "small": 1, "big": 1, "neg": 0, "name": "",
                "flag": false, "at": null, "extra": 12}"#,
            &pointers,
        );
        assert_eq!(got[8], (None, "null".to_owned()));
        assert_eq!(got[10], (Some(Number::Int(12)), "12".to_owned()));
    }

    #[test]
    fn a_pointer_into_a_json_field_or_past_the_type_reads_the_rows_json() {
        let got = same_in_both(
            "{id: u64, extra: json}",
            r#"{"id": 3, "extra": {"n": 4.5, "s": "x"}}"#,
            &["/extra/n", "/extra/s", "/missing", "/id"],
        );
        assert_eq!(got[0].0, Some(Number::Float(4.5)));
        assert_eq!(got[1].1, r#""x""#);
        assert_eq!(got[2], (None, "null".to_owned()));
        assert_eq!(got[3].0, Some(Number::Int(3)));
    }
}
