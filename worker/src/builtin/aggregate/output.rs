//! What an aggregate writes per result: a JSON object, or a row of its
//! output type when its stream is typed ([`weir_model::builtin::typing`]):
//! the key from its MessagePack into the key field's slot, the window's
//! bounds and the value into theirs, no text on the way.

use weir_model::builtin::AggregateFunction;
use weir_model::codec::Codec;
use weir_model::format::Format;
use weir_model::types::Type;
use weir_model::types::row::{self, FieldNode, Node, Scalar};

use super::{Acc, KeyText};
use crate::builtin::Number;

/// How an aggregate writes its results.
pub(crate) struct Results {
    function: AggregateFunction,
    keys: KeyText,
    /// `Some`: rows of the output's type.
    rows: Option<Rows>,
    /// `Some`: typed, but carried as JSON (to a reader of another type):
    /// each result made a row, written as its JSON, so that it reads the
    /// same as from rows.
    rows_as_json: Option<(Rows, Node)>,
    /// Its value column is whole numbers (`i64?`): written as JSON from
    /// JSON keys too, a value that is not one (a sum past 64 bits) is
    /// null, as in a row.
    whole: bool,
}

/// Where a row's parts go.
struct Rows {
    /// Bytes of the bitmap and slots.
    fixed: usize,
    key: FieldNode,
    /// The slots of `window_start` and `window_end`.
    window: Option<(usize, usize)>,
    /// The value's index, slot and kind.
    value: (usize, usize, Value),
}

/// What the value's column holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Value {
    /// `i64`: a count.
    Count,
    /// `i64?`.
    Whole,
    /// `f64?`.
    Float,
    /// `json`.
    Json,
}

impl Results {
    /// Results of `function` keyed as `keys` say, of type `ty` (`None`:
    /// untyped), written in `output`, per window when `windowed`; an error
    /// when `output`'s rows are not what the aggregate writes.
    pub(crate) fn new(
        function: AggregateFunction,
        keys: KeyText,
        ty: Option<&Type>,
        output: &Format,
        windowed: bool,
    ) -> Result<Results, String> {
        let rows = match (&output.schema, output.codec) {
            (Some(schema), Codec::Row) => Some(Rows::of(&schema.node, function, keys, windowed)?),
            _ => None,
        };
        let rows_as_json = match (&rows, ty) {
            (None, Some(ty)) if keys == KeyText::Msgpack => {
                let node = Node::of(ty);
                Some((Rows::of(&node, function, keys, windowed)?, node))
            }
            _ => None,
        };
        let whole = match ty {
            Some(Type::Record(r)) => r.fields.last().is_some_and(|f| {
                f.ty == Type::I64.optional() && function != AggregateFunction::Count
            }),
            _ => false,
        };
        Ok(Results {
            function,
            keys,
            rows,
            rows_as_json,
            whole,
        })
    }

    /// Append the result of `key` (per `window`, its start and end) with
    /// `acc`'s value to `out`; `scratch` holds a key read into its type's
    /// value encoding, when it has no direct path into its slot.
    pub(crate) fn write(
        &self,
        out: &mut Vec<u8>,
        key: &[u8],
        window: Option<(i64, i64)>,
        acc: &Acc,
        scratch: &mut Vec<u8>,
    ) -> Result<(), String> {
        if let Some((rows, node)) = &self.rows_as_json {
            let mut row = Vec::with_capacity(64);
            rows.write(&mut row, key, window, acc, scratch)?;
            return row::json::write_value(node, &row, out).map_err(|e| e.0);
        }
        match &self.rows {
            Some(rows) => rows.write(out, key, window, acc, scratch),
            None => {
                out.extend_from_slice(b"{\"key\":");
                self.keys.write(out, key);
                if let Some((start, end)) = window {
                    out.extend_from_slice(b",\"window_start\":");
                    out.extend_from_slice(itoa::Buffer::new().format(start).as_bytes());
                    out.extend_from_slice(b",\"window_end\":");
                    out.extend_from_slice(itoa::Buffer::new().format(end).as_bytes());
                }
                out.extend_from_slice(b",\"");
                out.extend_from_slice(self.function.name().as_bytes());
                out.extend_from_slice(b"\":");
                match acc {
                    Acc::Sum(Some(Number::Float(_)))
                    | Acc::Min(Some(Number::Float(_)))
                    | Acc::Max(Some(Number::Float(_)))
                        if self.whole =>
                    {
                        out.extend_from_slice(b"null")
                    }
                    acc => acc.write(out),
                }
                out.push(b'}');
                Ok(())
            }
        }
    }
}

impl Rows {
    /// The layout of `node`, which must be the record the typing gives.
    fn of(
        node: &Node,
        function: AggregateFunction,
        keys: KeyText,
        windowed: bool,
    ) -> Result<Rows, String> {
        let wrong = || {
            format!(
                "the {} aggregate's rows are not of its output type ({node:?})",
                function.name()
            )
        };
        if keys != KeyText::Msgpack {
            return Err(format!("{}: its keys are not a row stream's", wrong()));
        }
        let Node::Record { fields, fixed, .. } = node else {
            return Err(wrong());
        };
        let names: Vec<&str> = fields.iter().map(|f| f.name.as_str()).collect();
        let expected: &[&str] = match windowed {
            false => &["key", function.name()],
            true => &["key", "window_start", "window_end", function.name()],
        };
        if names != expected {
            return Err(wrong());
        }
        let is_i64 = |f: &FieldNode| f.node == Node::Scalar(Scalar::I64);
        let window = match windowed {
            true if is_i64(&fields[1]) && is_i64(&fields[2]) => {
                Some((fields[1].offset, fields[2].offset))
            }
            true => return Err(wrong()),
            false => None,
        };
        let last = fields.len() - 1;
        let value = &fields[last];
        let optional = |s: Scalar| Node::Optional(Box::new(Node::Scalar(s)));
        use AggregateFunction as F;
        let kind = match (function, &value.node) {
            (F::Count, Node::Scalar(Scalar::I64)) => Value::Count,
            (F::Sum | F::Min | F::Max, n) if *n == optional(Scalar::I64) => Value::Whole,
            (F::Sum | F::Min | F::Max | F::Avg, n) if *n == optional(Scalar::F64) => Value::Float,
            (F::Sum | F::Min | F::Max, Node::Json) => Value::Json,
            _ => return Err(wrong()),
        };
        Ok(Rows {
            fixed: *fixed,
            key: fields[0].clone(),
            window,
            value: (last, value.offset, kind),
        })
    }

    fn write(
        &self,
        out: &mut Vec<u8>,
        key: &[u8],
        window: Option<(i64, i64)>,
        acc: &Acc,
        scratch: &mut Vec<u8>,
    ) -> Result<(), String> {
        let start = out.len();
        out.resize(start + self.fixed, 0);
        write_key(&self.key, key, out, start, scratch)?;
        if let (Some((s, e)), Some((start_at, end_at))) = (window, self.window) {
            out[start + start_at..start + start_at + 8].copy_from_slice(&s.to_le_bytes());
            out[start + end_at..start + end_at + 8].copy_from_slice(&e.to_le_bytes());
        }
        let (index, offset, kind) = self.value;
        let at = start + offset;
        let number = match (kind, *acc) {
            (Value::Json, acc) => {
                let p = out.len();
                acc.write(out);
                row::patch_var(out, start, offset, p);
                return Ok(());
            }
            (_, Acc::Count(n)) => Some(Number::Int(i64::try_from(n).unwrap_or(i64::MAX))),
            (_, Acc::Avg(_, 0)) => None,
            (_, Acc::Avg(s, n)) => Some(Number::Float(s / n as f64)),
            (_, Acc::Sum(v) | Acc::Min(v) | Acc::Max(v)) => v,
        };
        let bytes = match (kind, number) {
            (Value::Count | Value::Whole, Some(Number::Int(i))) => Some(i.to_le_bytes()),
            (Value::Float, Some(n)) => Some(n.as_f64())
                .filter(|f| f.is_finite())
                .map(f64::to_le_bytes),
            // Null: nothing yet, a whole sum past 64 bits, not finite.
            _ => None,
        };
        match bytes {
            Some(b) => out[at..at + 8].copy_from_slice(&b),
            None if kind == Value::Count => return Err("a count that is not a whole number".into()),
            None => row::set_null(out, start, index),
        }
        Ok(())
    }
}

/// Put `key`, a MessagePack value, into `field`'s slot (index 0) of the
/// row at `start` of `out`: integers and strings directly, anything else
/// read through its JSON into the field's type.
fn write_key(
    field: &FieldNode,
    key: &[u8],
    out: &mut Vec<u8>,
    start: usize,
    scratch: &mut Vec<u8>,
) -> Result<(), String> {
    let at = start + field.offset;
    let mut node = &field.node;
    if let Node::Optional(inner) = node {
        if key == [0xc0] {
            row::set_null(out, start, 0);
            return Ok(());
        }
        node = inner;
    }
    match (node, msgpack_int(key)) {
        (Node::Scalar(s), Some(i)) if s.integer_range().is_some() => {
            let (low, high) = s.integer_range().expect("an integer type");
            if !(low..=high).contains(&i) {
                return Err(format!(
                    "key {i} is out of the range of its field's type ({s:?})"
                ));
            }
            // Within the range, the low bytes of the two's complement.
            out[at..at + s.width()].copy_from_slice(&i.to_le_bytes()[..s.width()]);
            return Ok(());
        }
        // Floats as they are (NaN included, which JSON cannot carry).
        (Node::Scalar(Scalar::F64), _) if key.len() == 9 && key[0] == 0xcb => {
            let bits = u64::from_be_bytes(key[1..].try_into().expect("8 bytes"));
            out[at..at + 8].copy_from_slice(&bits.to_le_bytes());
            return Ok(());
        }
        (Node::Scalar(Scalar::F32), _) if key.len() == 5 && key[0] == 0xca => {
            let bits = u32::from_be_bytes(key[1..].try_into().expect("4 bytes"));
            out[at..at + 4].copy_from_slice(&bits.to_le_bytes());
            return Ok(());
        }
        (Node::Scalar(Scalar::Bool), _) if key == [0xc2] || key == [0xc3] => {
            out[at] = u8::from(key == [0xc3]);
            return Ok(());
        }
        (Node::String, _) => {
            if let Some(text) = msgpack_str(key) {
                let text = row::utf8(text).map_err(|e| e.0)?;
                let p = out.len();
                out.extend_from_slice(text.as_bytes());
                row::patch_var(out, start, field.offset, p);
                return Ok(());
            }
        }
        _ => {}
    }
    // Anything else: read into the value encoding of the key's own type,
    // then placed.
    scratch.clear();
    if *node == Node::Json {
        // JSON as it was written (its objects' fields in their order).
        weir_model::msgpack::to_json(key, scratch).map_err(|e| format!("a key: {e}"))?;
    } else {
        // Straight from MessagePack: bytes as bytes, floats as they are.
        let mut de = rmp_serde::Deserializer::from_read_ref(key);
        row::json::read_with(node, &mut de, scratch)
            .map_err(|e| format!("a key that is not its field's type: {e}"))?;
    }
    match node {
        Node::Scalar(s) if scratch.len() == s.width() => {
            out[at..at + s.width()].copy_from_slice(scratch)
        }
        Node::Scalar(s) => {
            return Err(format!(
                "a key of {} bytes in a slot of {s:?}",
                scratch.len()
            ));
        }
        _ => {
            let p = out.len();
            out.extend_from_slice(scratch);
            row::patch_var(out, start, field.offset, p);
        }
    }
    Ok(())
}

/// The integer a MessagePack value is, when it is one.
fn msgpack_int(b: &[u8]) -> Option<i128> {
    let be = |n: usize| -> Option<u64> {
        let bytes = b.get(1..1 + n).filter(|_| b.len() == 1 + n)?;
        Some(bytes.iter().fold(0u64, |acc, &x| (acc << 8) | u64::from(x)))
    };
    let first = *b.first()?;
    Some(match first {
        0x00..=0x7f if b.len() == 1 => i128::from(first),
        0xe0..=0xff if b.len() == 1 => i128::from(first as i8),
        0xcc => i128::from(be(1)?),
        0xcd => i128::from(be(2)?),
        0xce => i128::from(be(4)?),
        0xcf => i128::from(be(8)?),
        0xd0 => i128::from(be(1)? as u8 as i8),
        0xd1 => i128::from(be(2)? as u16 as i16),
        0xd2 => i128::from(be(4)? as u32 as i32),
        0xd3 => i128::from(be(8)? as i64),
        _ => return None,
    })
}

/// The bytes of a MessagePack string, when it is one.
fn msgpack_str(b: &[u8]) -> Option<&[u8]> {
    let first = *b.first()?;
    let (len, at) = match first {
        0xa0..=0xbf => (usize::from(first & 0x1f), 1),
        0xd9 => (usize::from(*b.get(1)?), 2),
        0xda => (
            usize::from(u16::from_be_bytes(b.get(1..3)?.try_into().ok()?)),
            3,
        ),
        0xdb => (
            u32::from_be_bytes(b.get(1..5)?.try_into().ok()?) as usize,
            5,
        ),
        _ => return None,
    };
    b.get(at..).filter(|rest| rest.len() == len)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use weir_model::KeyBy;
    use weir_model::builtin::{Builtin, BuiltinTable};
    use weir_model::types::Type;
    use weir_model::types::row::Schema;

    use super::*;

    /// An aggregate keyed by `/k` over records of `input`, writing JSON
    /// and writing rows of its output type.
    struct Both {
        /// Typed, carried as JSON.
        json: Results,
        rows: Results,
        /// As the aggregate writes on an untyped stream.
        untyped: Results,
        schema: Arc<Schema>,
    }

    fn both(builtin: &str, field: Option<&str>, input: &str, windowed: bool) -> Both {
        let b = Builtin::plan(&BuiltinTable {
            name: "a",
            builtin,
            field,
            emit: None,
            filter: None,
            columns: None,
            keyed: true,
            windowed,
            ttl_ms: None,
        })
        .unwrap();
        let Builtin::Aggregate { function, .. } = b else {
            unreachable!()
        };
        let input: Type = input.parse().unwrap();
        let ty = b
            .output_type(&input, Some(&KeyBy::Pointer("/k".into())), windowed)
            .unwrap();
        let schema = Arc::new(Schema::new(ty.clone()));
        let rows = Format {
            codec: Codec::Row,
            schema: Some(schema.clone()),
        };
        Both {
            json: Results::new(
                function,
                KeyText::Msgpack,
                Some(&ty),
                &Format::default(),
                windowed,
            )
            .unwrap(),
            rows: Results::new(function, KeyText::Msgpack, Some(&ty), &rows, windowed).unwrap(),
            untyped: Results::new(
                function,
                KeyText::Msgpack,
                None,
                &Format::default(),
                windowed,
            )
            .unwrap(),
            schema,
        }
    }

    impl Both {
        /// The JSON each writes of a result, typed as JSON and as rows
        /// (the row read back as JSON), after what the buffer holds.
        fn write(
            &self,
            key: &[u8],
            window: Option<(i64, i64)>,
            acc: Acc,
        ) -> (Result<String, String>, Result<String, String>) {
            let mut scratch = Vec::new();
            let mut text = b"before".to_vec();
            let json = self
                .json
                .write(&mut text, key, window, &acc, &mut scratch)
                .map(|()| String::from_utf8(text[6..].to_vec()).unwrap());
            let mut row = b"before".to_vec();
            let from_row = self
                .rows
                .write(&mut row, key, window, &acc, &mut scratch)
                .map(|()| {
                    let mut out = Vec::new();
                    row::json::write_value(&self.schema.node, &row[6..], &mut out).unwrap();
                    String::from_utf8(out).unwrap()
                });
            (json, from_row)
        }

        /// What the aggregate writes of a result on an untyped stream.
        fn untyped(&self, key: &[u8], window: Option<(i64, i64)>, acc: Acc) -> String {
            let mut text = Vec::new();
            self.untyped
                .write(&mut text, key, window, &acc, &mut Vec::new())
                .unwrap();
            String::from_utf8(text).unwrap()
        }

        /// The JSON of a result, the same every way: typed as rows or as
        /// JSON, and untyped.
        fn same(&self, key: &[u8], window: Option<(i64, i64)>, acc: Acc) -> String {
            let (json, row) = self.write(key, window, acc);
            assert_eq!(json, row, "key {key:x?}");
            let json = json.unwrap();
            assert_eq!(json, self.untyped(key, window, acc), "key {key:x?}");
            json
        }
    }

    fn packed(json: &str) -> Vec<u8> {
        let mut out = Vec::new();
        weir_model::msgpack::from_json(json.as_bytes(), &mut out).unwrap();
        out
    }

    #[test]
    fn a_row_reads_as_the_json_the_aggregate_writes_untyped() {
        use Number::{Float, Int};
        let count = both("count", None, "{k: u32}", false);
        assert_eq!(
            count.same(&packed("7"), None, Acc::Count(3)),
            r#"{"key":7,"count":3}"#
        );
        for k in ["0", "127", "128", "255", "65535", "4294967295"] {
            count.same(&packed(k), None, Acc::Count(1));
        }
        let signed = both("count", None, "{k: i64}", true);
        for k in [
            "-1",
            "-32",
            "-33",
            "-129",
            "-40000",
            "-9223372036854775808",
            "9223372036854775807",
        ] {
            signed.same(&packed(k), Some((-5, 10)), Acc::Count(2));
        }
        assert_eq!(
            signed.same(&packed("-3"), Some((0, 1000)), Acc::Count(2)),
            r#"{"key":-3,"window_start":0,"window_end":1000,"count":2}"#
        );
        let names = both("sum", Some("/v"), "{k: string, v: i32}", false);
        let long = format!("\"{}\"", "x".repeat(300));
        for k in [r#""ana""#, r#""""#, r#""a \"quoted\" é""#, long.as_str()] {
            names.same(&packed(k), None, Acc::Sum(Some(Int(-4))));
        }
        assert_eq!(
            names.same(&packed(r#""b""#), None, Acc::Sum(None)),
            r#"{"key":"b","sum":null}"#
        );
        let optional = both("max", Some("/v"), "{k: u16?, v: f64}", false);
        assert_eq!(
            optional.same(&packed("null"), None, Acc::Max(Some(Float(0.5)))),
            r#"{"key":null,"max":0.5}"#
        );
        optional.same(&packed("9"), None, Acc::Max(None));
        let avg = both("avg", Some("/v"), "{k: bool, v: u8}", true);
        assert_eq!(
            avg.same(&packed("true"), Some((0, 2)), Acc::Avg(3.0, 2)),
            r#"{"key":true,"window_start":0,"window_end":2,"avg":1.5}"#,
            "a key read through JSON"
        );
        avg.same(&packed("false"), Some((0, 2)), Acc::Avg(0.0, 0));
        avg.same(&packed("false"), Some((0, 2)), Acc::Avg(4.0, 2));
        let dynamic = both(
            "min",
            Some("/v"),
            "{k: {a: u8, b: list<string>}, v: json}",
            false,
        );
        dynamic.same(
            &packed(r#"{"a": 1, "b": ["x", "y"]}"#),
            None,
            Acc::Min(Some(Float(2.5))),
        );
        dynamic.same(
            &packed(r#"{"a": 1, "b": []}"#),
            None,
            Acc::Min(Some(Int(-2))),
        );
        let floats = both("count", None, "{k: f64}", false);
        floats.same(&packed("2.5"), None, Acc::Count(1));
        let mut nan = vec![0xcb];
        nan.extend_from_slice(&f64::NAN.to_be_bytes());
        assert_eq!(
            floats.same(&nan, None, Acc::Count(1)),
            r#"{"key":null,"count":1}"#
        );
        let narrow = both("count", None, "{k: f32}", false);
        let mut half = vec![0xca];
        half.extend_from_slice(&0.5f32.to_be_bytes());
        assert_eq!(
            narrow.same(&half, None, Acc::Count(1)),
            r#"{"key":0.5,"count":1}"#
        );
    }

    /// Keys of every shape a row's key field has: the same JSON as the
    /// untyped aggregate's, but for bytes (base64, as Flink's JSON).
    #[test]
    fn keys_of_every_type_read_into_their_slot() {
        let ints = [
            ("i8", "-128"),
            ("u8", "255"),
            ("i16", "-300"),
            ("u64", "18446744073709551615"),
        ];
        for (ty, k) in ints {
            let b = both("count", None, &format!("{{k: {ty}}}"), false);
            assert_eq!(
                b.same(&packed(k), None, Acc::Count(1)),
                format!(r#"{{"key":{k},"count":1}}"#)
            );
        }
        let record = both(
            "count",
            None,
            "{k: {a: f64, b: string?, c: list<i16>}}",
            false,
        );
        let mut nan = packed(r#"{"a": 0.0, "b": null, "c": [1, -2]}"#);
        // The float's bits: 0.0 as NaN (a record's field read from MessagePack).
        let at = nan.iter().position(|&b| b == 0xcb).unwrap();
        nan[at + 1..at + 9].copy_from_slice(&f64::NAN.to_be_bytes());
        assert_eq!(
            record.same(&nan, None, Acc::Count(1)),
            r#"{"key":{"a":null,"b":null,"c":[1,-2]},"count":1}"#
        );
        let dynamic = both("count", None, "{k: json}", false);
        assert_eq!(
            dynamic.same(&packed(r#"{"z": 1, "a": [true]}"#), None, Acc::Count(1)),
            r#"{"key":{"z":1,"a":[true]},"count":1}"#,
            "a json key keeps its fields' order"
        );
        let bytes = both("count", None, "{k: bytes}", false);
        let (json, row) = bytes.write(&[0xc4, 2, b'h', b'i'], None, Acc::Count(1));
        assert_eq!(row.unwrap(), r#"{"key":"aGk=","count":1}"#);
        assert_eq!(
            json.unwrap(),
            r#"{"key":"aGk=","count":1}"#,
            "typed, carried as JSON too"
        );
        assert_eq!(
            bytes.untyped(&[0xc4, 2, b'h', b'i'], None, Acc::Count(1)),
            r#"{"key":[104,105],"count":1}"#
        );
    }

    #[test]
    fn what_a_typed_column_cannot_hold_is_null_or_an_error() {
        use Number::Float;
        // A whole sum past 64 bits is a float: null in an `i64?` column.
        let sum = both("sum", Some("/v"), "{k: u8, v: i64}", false);
        let past = Acc::Sum(Some(Float(1e19)));
        let (json, row) = sum.write(&packed("1"), None, past);
        assert_eq!(row.unwrap(), r#"{"key":1,"sum":null}"#);
        assert_eq!(
            json.unwrap(),
            r#"{"key":1,"sum":null}"#,
            "typed, carried as JSON too"
        );
        // Typed, read from JSON (its keys JSON text): null too.
        let ty: Type = "{key: u8, sum: i64?}".parse().unwrap();
        let from_json = Results::new(
            AggregateFunction::Sum,
            KeyText::Json,
            Some(&ty),
            &Format::default(),
            false,
        )
        .unwrap();
        let mut out = Vec::new();
        from_json
            .write(&mut out, b"1", None, &past, &mut Vec::new())
            .unwrap();
        assert_eq!(out, br#"{"key":1,"sum":null}"#);
        assert_eq!(
            sum.untyped(&packed("1"), None, past),
            r#"{"key":1,"sum":1e+19}"#
        );
        // A float sum in an `f64?` column stays one.
        let float = both("sum", Some("/v"), "{k: u8, v: f64}", false);
        assert_eq!(
            float.same(&packed("1"), None, past),
            r#"{"key":1,"sum":1e+19}"#
        );
        // A key its field's type cannot hold (a malformed key) fails.
        let (_, row) = sum.write(&packed("256"), None, Acc::Sum(None));
        assert!(row.unwrap_err().contains("out of the range"));
        let (_, row) = sum.write(&packed(r#""x""#), None, Acc::Sum(None));
        assert!(row.unwrap_err().contains("not its field's type"));
        let text = both("count", None, "{k: string}", false);
        let (_, row) = text.write(&[0xa2, 0xff, 0xfe], None, Acc::Count(1));
        assert!(row.unwrap_err().contains("UTF-8"));
    }

    #[test]
    fn rows_of_another_layout_are_refused() {
        let rows = |ty: &str| Format {
            codec: Codec::Row,
            schema: Some(Arc::new(Schema::new(ty.parse().unwrap()))),
        };
        let count = AggregateFunction::Count;
        for (ty, windowed) in [
            ("{key: u32, sum: i64}", false),
            ("{key: u32, count: i64?}", false),
            ("{key: u32, count: i64}", true),
            (
                "{key: u32, window_start: i32, window_end: i64, count: i64}",
                true,
            ),
            ("u32", false),
        ] {
            assert!(
                Results::new(count, KeyText::Msgpack, None, &rows(ty), windowed).is_err(),
                "{ty}"
            );
        }
        assert!(
            Results::new(
                count,
                KeyText::Msgpack,
                None,
                &rows("{key: u32, count: i64}"),
                false
            )
            .is_ok()
        );
        assert!(
            Results::new(
                count,
                KeyText::Json,
                None,
                &rows("{key: u32, count: i64}"),
                false
            )
            .is_err(),
            "a typed aggregate's keys come from rows"
        );
    }
}
