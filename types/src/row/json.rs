//! Rows to JSON text, and any self-describing format (JSON, MessagePack:
//! whatever serde reads) into rows.
//!
//! JSON is Flink's JSON format's: a record is an object with its fields in
//! order, a null optional is `null`, `bytes` are base64 text, `json` is the
//! value itself, a float that is not finite is `null`. Reading, fields are
//! matched by name: unknown ones are ignored, a missing optional field is
//! null, a missing required one is an error naming it, as is a value of the
//! wrong type or out of its type's range.

use std::cell::RefCell;
use std::fmt;

use base64::Engine;
use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::{
    Node, RowError, Scalar, begin_list, fixed, is_null, list_header, patch_var, set_null, utf8, var,
};

// --- rows to JSON -----------------------------------------------------------

/// Append the JSON text of `bytes`, a value of `node` in its value
/// encoding, to `out`.
///
/// ```
/// use weir_types::{Type, row::{Node, json}};
/// let node = Node::of(&"{id: u64, name: string?}".parse::<Type>().unwrap());
/// let mut row = Vec::new();
/// json::read_value(&node, br#"{"name": "a\"b", "id": 7}"#, &mut row).unwrap();
/// let mut text = Vec::new();
/// json::write_value(&node, &row, &mut text).unwrap();
/// assert_eq!(text, br#"{"id":7,"name":"a\"b"}"#);
/// ```
pub fn write_value(node: &Node, bytes: &[u8], out: &mut Vec<u8>) -> Result<(), RowError> {
    match node {
        Node::Optional(inner) => match bytes.split_first() {
            None => {
                out.extend_from_slice(b"null");
                Ok(())
            }
            Some((_, rest)) => write_value(inner, rest, out),
        },
        Node::Scalar(s) => {
            if bytes.len() != s.width() {
                return Err(RowError(format!(
                    "a {s:?} value of {} bytes (it has {})",
                    bytes.len(),
                    s.width()
                )));
            }
            write_scalar(*s, bytes, 0, out)
        }
        _ => write_payload(node, bytes, out),
    }
}

/// Append the JSON text of a field found by [`super::locate`] (`null`
/// when it is null).
pub fn write_field(at: super::Located<'_, '_>, out: &mut Vec<u8>) -> Result<(), RowError> {
    write_slot(&at.field.node, at.base, 0, at.index, at.field.offset, out)
}

/// The value in the slot at `off` of `base` (null bit `index` of the bitmap
/// at `nulls_at`).
fn write_slot(
    node: &Node,
    base: &[u8],
    nulls_at: usize,
    index: usize,
    off: usize,
    out: &mut Vec<u8>,
) -> Result<(), RowError> {
    match node {
        Node::Optional(inner) => {
            if is_null(base, nulls_at, index) {
                out.extend_from_slice(b"null");
                Ok(())
            } else {
                write_slot(inner, base, nulls_at, index, off, out)
            }
        }
        Node::Scalar(s) => write_scalar(*s, base, off, out),
        _ => write_payload(node, var(base, off)?, out),
    }
}

fn write_scalar(s: Scalar, base: &[u8], off: usize, out: &mut Vec<u8>) -> Result<(), RowError> {
    let mut ints = itoa::Buffer::new();
    let text: &str = match s {
        Scalar::Bool => {
            if fixed::<1>(base, off)?[0] != 0 {
                "true"
            } else {
                "false"
            }
        }
        Scalar::I8 => ints.format(i8::from_le_bytes(fixed(base, off)?)),
        Scalar::I16 => ints.format(i16::from_le_bytes(fixed(base, off)?)),
        Scalar::I32 => ints.format(i32::from_le_bytes(fixed(base, off)?)),
        Scalar::I64 => ints.format(i64::from_le_bytes(fixed(base, off)?)),
        Scalar::U8 => ints.format(u8::from_le_bytes(fixed(base, off)?)),
        Scalar::U16 => ints.format(u16::from_le_bytes(fixed(base, off)?)),
        Scalar::U32 => ints.format(u32::from_le_bytes(fixed(base, off)?)),
        Scalar::U64 => ints.format(u64::from_le_bytes(fixed(base, off)?)),
        Scalar::F32 => return write_float(&f32::from_le_bytes(fixed(base, off)?), out),
        Scalar::F64 => return write_float(&f64::from_le_bytes(fixed(base, off)?), out),
    };
    out.extend_from_slice(text.as_bytes());
    Ok(())
}

fn write_float(x: &impl serde::Serialize, out: &mut Vec<u8>) -> Result<(), RowError> {
    // serde_json writes a float as the shortest text that reads back to it
    // in its own width (and `null` when it is not finite), as the SDKs do.
    serde_json::to_writer(&mut *out, x).map_err(|e| RowError(e.to_string()))
}

fn write_payload(node: &Node, payload: &[u8], out: &mut Vec<u8>) -> Result<(), RowError> {
    match node {
        Node::String => {
            serde_json::to_writer(&mut *out, utf8(payload)?).map_err(|e| RowError(e.to_string()))
        }
        Node::Bytes => {
            out.push(b'"');
            let text = base64::engine::general_purpose::STANDARD.encode(payload);
            out.extend_from_slice(text.as_bytes());
            out.push(b'"');
            Ok(())
        }
        Node::Json => {
            // Valid JSON, on one line: a line break (outside strings, where
            // JSON has none) would split a JSON-lines record.
            if payload.iter().any(|&b| b == b'\n' || b == b'\r') {
                let value: serde_json::Value = serde_json::from_slice(payload)
                    .map_err(|e| RowError(format!("a json field is not JSON: {e}")))?;
                serde_json::to_writer(&mut *out, &value).map_err(|e| RowError(e.to_string()))
            } else {
                serde_json::from_slice::<IgnoredAny>(payload)
                    .map_err(|e| RowError(format!("a json field is not JSON: {e}")))?;
                out.extend_from_slice(payload);
                Ok(())
            }
        }
        Node::List { element, width } => {
            let (count, slots) = list_header(payload, *width)?;
            out.push(b'[');
            for i in 0..count {
                if i > 0 {
                    out.push(b',');
                }
                write_slot(element, payload, 4, i, slots + i * width, out)?;
            }
            out.push(b']');
            Ok(())
        }
        Node::Record { fields, fixed, .. } => {
            if payload.len() < *fixed {
                return Err(RowError(format!(
                    "a row of {} bytes, shorter than its {fixed} bytes of slots",
                    payload.len()
                )));
            }
            out.push(b'{');
            for (i, f) in fields.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                out.extend_from_slice(&f.json_key);
                write_slot(&f.node, payload, 0, i, f.offset, out)?;
            }
            out.push(b'}');
            Ok(())
        }
        Node::Scalar(_) | Node::Optional(_) => unreachable!("not a payload"),
    }
}

// --- anything serde reads into rows -------------------------------------------

/// Append the value encoding of the JSON text `json`, read as `node`, to
/// `out`; on an error, `out` is as it was. The error names the field
/// (`field `loc.lat`: ...`).
pub fn read_value(node: &Node, json: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
    let start = out.len();
    let mut de = serde_json::Deserializer::from_slice(json);
    read_with(node, &mut de, out)?;
    de.end().map_err(|e| {
        out.truncate(start);
        e.to_string()
    })
}

/// Append the value encoding of what `de` reads, as `node`, to `out`; on
/// an error, `out` is as it was.
pub fn read_with<'de, D: Deserializer<'de>>(
    node: &Node,
    de: D,
    out: &mut Vec<u8>,
) -> Result<(), String> {
    let start = out.len();
    let ctx = Ctx::default();
    let result = ValueSeed {
        node,
        out: &mut *out,
        ctx: &ctx,
    }
    .deserialize(de);
    result.map_err(|e| {
        out.truncate(start);
        let path = ctx.path.into_inner();
        if path.is_empty() {
            e.to_string()
        } else {
            let mut at = String::new();
            for part in path.iter().rev() {
                if !at.is_empty() && !part.starts_with('[') {
                    at.push('.');
                }
                at.push_str(part);
            }
            format!("field `{at}`: {e}")
        }
    })
}

/// The path to where reading failed, innermost first.
#[derive(Default)]
struct Ctx {
    path: RefCell<Vec<String>>,
}

/// Appends a value's value encoding.
struct ValueSeed<'a> {
    node: &'a Node,
    out: &'a mut Vec<u8>,
    ctx: &'a Ctx,
}

impl<'de> DeserializeSeed<'de> for ValueSeed<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<(), D::Error> {
        match self.node {
            Node::Optional(inner) => de.deserialize_option(OptionVisitor {
                inner,
                out: self.out,
                ctx: self.ctx,
            }),
            Node::Scalar(s) => {
                let bits = de.deserialize_any(ScalarVisitor(*s))?;
                self.out.extend_from_slice(&bits.to_le_bytes()[..s.width()]);
                Ok(())
            }
            node => PayloadSeed {
                node,
                out: self.out,
                ctx: self.ctx,
            }
            .deserialize(de),
        }
    }
}

struct OptionVisitor<'a> {
    inner: &'a Node,
    out: &'a mut Vec<u8>,
    ctx: &'a Ctx,
}

impl<'de> Visitor<'de> for OptionVisitor<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a value or null")
    }

    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_some<D: Deserializer<'de>>(self, de: D) -> Result<(), D::Error> {
        self.out.push(1);
        ValueSeed {
            node: self.inner,
            out: self.out,
            ctx: self.ctx,
        }
        .deserialize(de)
    }
}

/// Reads a scalar as its bits (little-endian in the low bytes).
struct ScalarVisitor(Scalar);

impl ScalarVisitor {
    fn int<E: de::Error>(&self, v: i128) -> Result<u64, E> {
        let (min, max) = match self.0 {
            Scalar::F32 => return Ok((v as f32).to_bits() as u64),
            Scalar::F64 => return Ok((v as f64).to_bits()),
            Scalar::Bool => {
                return Err(E::invalid_type(de::Unexpected::Other("a number"), self));
            }
            s => s.integer_range().expect("an integer type"),
        };
        if v < min || v > max {
            return Err(E::custom(format!("{v} does not fit {}", self.name())));
        }
        Ok(v as i64 as u64)
    }

    fn name(&self) -> &'static str {
        match self.0 {
            Scalar::Bool => "bool",
            Scalar::I8 => "i8",
            Scalar::I16 => "i16",
            Scalar::I32 => "i32",
            Scalar::I64 => "i64",
            Scalar::U8 => "u8",
            Scalar::U16 => "u16",
            Scalar::U32 => "u32",
            Scalar::U64 => "u64",
            Scalar::F32 => "f32",
            Scalar::F64 => "f64",
        }
    }
}

impl<'de> Visitor<'de> for ScalarVisitor {
    type Value = u64;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self.0 {
            Scalar::Bool => f.write_str("a bool"),
            Scalar::F32 | Scalar::F64 => write!(f, "a number ({})", self.name()),
            _ => write!(f, "an integer ({})", self.name()),
        }
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<u64, E> {
        match self.0 {
            Scalar::Bool => Ok(v as u64),
            _ => Err(E::invalid_type(de::Unexpected::Bool(v), &self)),
        }
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<u64, E> {
        self.int(v.into())
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<u64, E> {
        self.int(v.into())
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<u64, E> {
        match self.0 {
            Scalar::F32 => Ok((v as f32).to_bits() as u64),
            Scalar::F64 => Ok(v.to_bits()),
            _ => Err(E::invalid_type(de::Unexpected::Float(v), &self)),
        }
    }
}

/// Appends a variable-length value's payload.
struct PayloadSeed<'a> {
    node: &'a Node,
    out: &'a mut Vec<u8>,
    ctx: &'a Ctx,
}

impl<'de> DeserializeSeed<'de> for PayloadSeed<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<(), D::Error> {
        match self.node {
            Node::String => de.deserialize_str(TextVisitor {
                out: self.out,
                base64: false,
            }),
            Node::Bytes => de.deserialize_any(TextVisitor {
                out: self.out,
                base64: true,
            }),
            Node::Json => {
                // The value as JSON text, whatever format it came in.
                let value = serde_json::Value::deserialize(de)?;
                serde_json::to_writer(&mut *self.out, &value).map_err(de::Error::custom)
            }
            Node::List { .. } => de.deserialize_seq(ListVisitor {
                node: self.node,
                out: self.out,
                ctx: self.ctx,
            }),
            Node::Record { .. } => de.deserialize_any(RecordVisitor {
                node: self.node,
                out: self.out,
                ctx: self.ctx,
            }),
            Node::Scalar(_) | Node::Optional(_) => unreachable!("not a payload"),
        }
    }
}

struct TextVisitor<'a> {
    out: &'a mut Vec<u8>,
    base64: bool,
}

impl<'de> Visitor<'de> for TextVisitor<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(if self.base64 {
            "bytes (base64 text)"
        } else {
            "a string"
        })
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<(), E> {
        if self.base64 {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(v)
                .map_err(|e| E::custom(format!("not base64: {e}")))?;
            self.out.extend_from_slice(&bytes);
        } else {
            self.out.extend_from_slice(v.as_bytes());
        }
        Ok(())
    }

    fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<(), E> {
        if self.base64 {
            self.out.extend_from_slice(v);
            Ok(())
        } else {
            Err(E::invalid_type(de::Unexpected::Bytes(v), &self))
        }
    }
}

struct ListVisitor<'a> {
    node: &'a Node,
    out: &'a mut Vec<u8>,
    ctx: &'a Ctx,
}

impl<'de> Visitor<'de> for ListVisitor<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let Node::List { element, width } = self.node else {
            unreachable!("a list's visitor")
        };
        // The elements' value encodings first (their count is known only at
        // the end), then the payload built from them.
        let mut values = Vec::new();
        let mut ends = Vec::new();
        loop {
            let i = ends.len();
            match seq.next_element_seed(ValueSeed {
                node: element,
                out: &mut values,
                ctx: self.ctx,
            }) {
                Ok(Some(())) => ends.push(values.len()),
                Ok(None) => break,
                Err(e) => {
                    self.ctx.path.borrow_mut().push(format!("[{i}]"));
                    return Err(e);
                }
            }
        }
        let (start, slots) = begin_list(self.out, ends.len(), *width);
        let mut from = 0;
        for (i, &end) in ends.iter().enumerate() {
            let mut value = &values[from..end];
            from = end;
            let mut node = &**element;
            if let Node::Optional(inner) = node {
                match value.split_first() {
                    None => {
                        set_null(self.out, start + 4, i);
                        continue;
                    }
                    Some((_, rest)) => value = rest,
                }
                node = inner;
            }
            let at = start + slots + i * width;
            match node {
                Node::Scalar(_) => self.out[at..at + value.len()].copy_from_slice(value),
                _ => {
                    let payload = self.out.len();
                    self.out.extend_from_slice(value);
                    patch_var(self.out, start, slots + i * width, payload);
                }
            }
        }
        Ok(())
    }
}

struct RecordVisitor<'a> {
    node: &'a Node,
    out: &'a mut Vec<u8>,
    ctx: &'a Ctx,
}

impl<'de> Visitor<'de> for RecordVisitor<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a record (a map of its fields)")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<(), A::Error> {
        self.read_values(seq)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let Node::Record { fields, fixed, .. } = self.node else {
            unreachable!("a record's visitor")
        };
        let start = self.out.len();
        self.out.resize(start + fixed, 0);
        let mut seen = vec![false; fields.len()];
        while let Some(key) = map.next_key::<FieldName>()? {
            let Some(i) = fields.iter().position(|f| f.name == key.0) else {
                map.next_value::<IgnoredAny>()?;
                continue;
            };
            let f = &fields[i];
            if seen[i] {
                return Err(de::Error::custom(format!("duplicate field `{}`", f.name)));
            }
            seen[i] = true;
            let slot = SlotSeed {
                node: &f.node,
                out: &mut *self.out,
                start,
                index: i,
                off: f.offset,
                ctx: self.ctx,
            };
            if let Err(e) = map.next_value_seed(slot) {
                self.ctx.path.borrow_mut().push(f.name.clone());
                return Err(e);
            }
        }
        for (i, f) in fields.iter().enumerate() {
            if !seen[i] {
                if f.optional {
                    set_null(self.out, start, i);
                } else {
                    return Err(de::Error::custom(format!("missing field `{}`", f.name)));
                }
            }
        }
        Ok(())
    }
}

impl RecordVisitor<'_> {
    /// A record written as a list of its fields' values, in order (as
    /// serde reads a struct from an array).
    fn read_values<'de, A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let Node::Record { fields, fixed, .. } = self.node else {
            unreachable!("a record's visitor")
        };
        let start = self.out.len();
        self.out.resize(start + fixed, 0);
        for (i, f) in fields.iter().enumerate() {
            let slot = SlotSeed {
                node: &f.node,
                out: &mut *self.out,
                start,
                index: i,
                off: f.offset,
                ctx: self.ctx,
            };
            match seq.next_element_seed(slot) {
                Ok(Some(())) => {}
                Ok(None) if f.optional => set_null(self.out, start, i),
                Ok(None) => {
                    return Err(de::Error::custom(format!(
                        "a record of {} fields given {i} values: missing field `{}`",
                        fields.len(),
                        f.name
                    )));
                }
                Err(e) => {
                    self.ctx.path.borrow_mut().push(f.name.clone());
                    return Err(e);
                }
            }
        }
        if seq.next_element::<IgnoredAny>()?.is_some() {
            return Err(de::Error::custom(format!(
                "a record of {} fields given more values",
                fields.len()
            )));
        }
        Ok(())
    }
}

/// A map key as text.
struct FieldName(String);

impl<'de> Deserialize<'de> for FieldName {
    fn deserialize<D: Deserializer<'de>>(de: D) -> Result<FieldName, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = FieldName;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a field name")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<FieldName, E> {
                Ok(FieldName(v.to_owned()))
            }
            fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<FieldName, E> {
                std::str::from_utf8(v)
                    .map(|s| FieldName(s.to_owned()))
                    .map_err(E::custom)
            }
        }
        de.deserialize_str(V)
    }
}

/// Writes a field's value into its slot of the row at `start` (and its
/// payload, if any, at the end of `out`).
struct SlotSeed<'a> {
    node: &'a Node,
    out: &'a mut Vec<u8>,
    start: usize,
    index: usize,
    off: usize,
    ctx: &'a Ctx,
}

impl<'de> DeserializeSeed<'de> for SlotSeed<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<(), D::Error> {
        match self.node {
            Node::Optional(inner) => de.deserialize_option(SlotOptionVisitor(SlotSeed {
                node: inner,
                ..self
            })),
            Node::Scalar(s) => {
                let bits = de.deserialize_any(ScalarVisitor(*s))?;
                let at = self.start + self.off;
                self.out[at..at + s.width()].copy_from_slice(&bits.to_le_bytes()[..s.width()]);
                Ok(())
            }
            node => {
                let payload = self.out.len();
                PayloadSeed {
                    node,
                    out: &mut *self.out,
                    ctx: self.ctx,
                }
                .deserialize(de)?;
                patch_var(self.out, self.start, self.off, payload);
                Ok(())
            }
        }
    }
}

struct SlotOptionVisitor<'a>(SlotSeed<'a>);

impl<'de> Visitor<'de> for SlotOptionVisitor<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a value or null")
    }

    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        set_null(self.0.out, self.0.start, self.0.index);
        Ok(())
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.visit_none()
    }

    fn visit_some<D: Deserializer<'de>>(self, de: D) -> Result<(), D::Error> {
        self.0.deserialize(de)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ty::Type;

    fn node(t: &str) -> Node {
        Node::of(&t.parse::<Type>().unwrap())
    }

    fn round_trip(t: &str, json: &str) -> String {
        let n = node(t);
        let mut row = Vec::new();
        read_value(&n, json.as_bytes(), &mut row).unwrap();
        let mut out = Vec::new();
        write_value(&n, &row, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn every_type_round_trips_through_json() {
        let t = "{b: bool, i: i8, j: i16, k: i32, l: i64, u: u8, v: u16, w: u32, x: u64, \
                 f: f32, d: f64, s: string, y: bytes, z: json, o: u32?, p: string?, \
                 list: list<u16>, strings: list<string?>, nested: {a: list<{q: u8}>, e: string}, \
                 empty: list<u8>}";
        let json = r#"{"b":true,"i":-8,"j":-16,"k":-32,"l":-64,"u":8,"v":16,"w":32,"x":18446744073709551615,"f":0.5,"d":2.25,"s":"é\n\"","y":"AAEC","z":{"any":[1,"x"]},"o":null,"p":"here","list":[1,2,65535],"strings":["a",null,""],"nested":{"a":[{"q":1},{"q":2}],"e":"end"},"empty":[]}"#;
        assert_eq!(round_trip(t, json), json);
        // Fields in another order, unknown ones, missing optionals.
        assert_eq!(
            round_trip(
                "{a: u8, b: string?, c: u8?}",
                r#"{"x": [1, {"y": 2}], "a": 3}"#
            ),
            r#"{"a":3,"b":null,"c":null}"#
        );
        // Top-level values of every kind.
        assert_eq!(round_trip("u64", "42"), "42");
        assert_eq!(round_trip("string", r#""w""#), r#""w""#);
        assert_eq!(round_trip("u8?", "null"), "null");
        assert_eq!(round_trip("u8?", "7"), "7");
        assert_eq!(
            round_trip("list<list<u8>>", "[[1],[],[2,3]]"),
            "[[1],[],[2,3]]"
        );
        // A record as the list of its values, as serde reads a struct.
        assert_eq!(
            round_trip("{a: u8, s: string, o: u8?}", r#"[1, "x"]"#),
            r#"{"a":1,"s":"x","o":null}"#
        );
    }

    #[test]
    fn bad_input_is_an_error_naming_the_field() {
        let err = |t: &str, json: &str| {
            let mut out = vec![9];
            let e = read_value(&node(t), json.as_bytes(), &mut out).unwrap_err();
            assert_eq!(out, [9], "nothing left behind");
            e
        };
        assert!(
            err("{a: u8}", r#"{"a": 300}"#).starts_with("field `a`: 300 does not fit u8"),
            "{}",
            err("{a: u8}", r#"{"a": 300}"#)
        );
        assert!(err("{a: u8}", "{}").contains("missing field `a`"));
        assert!(
            err("{a: {b: list<u32>}}", r#"{"a": {"b": [1, "x"]}}"#)
                .starts_with("field `a.b[1]`: invalid type: string")
        );
        assert!(err("{a: u64}", r#"{"a": -1}"#).contains("-1 does not fit u64"));
        assert!(err("{a: i32}", r#"{"a": 1.5}"#).contains("invalid type: floating point"));
        assert!(err("{a: string}", r#"{"a": 1}"#).contains("expected a string"));
        assert!(err("{a: bytes}", r#"{"a": "!!"}"#).contains("not base64"));
        assert!(err("{a: u8}", r#"{"a": 1} x"#).contains("trailing characters"));
        assert!(err("{a: u8}", r#""x""#).contains("expected a record"));
        assert!(err("{a: u8, b: u8}", r#"[1]"#).contains("missing field `b`"));
        assert!(err("{a: u8}", r#"[1, 2]"#).contains("more values"));
        assert!(
            err("{a: u8?}", r#"{"a": null, "a": 4}"#).contains("duplicate field `a`"),
            "as serde says of a struct"
        );
        assert!(err("{a: bool}", r#"{"a": 1}"#).contains("expected a bool"));
    }

    #[test]
    fn a_malformed_row_is_an_error_not_a_panic() {
        let n = node("{s: string, l: list<u64>}");
        let mut row = Vec::new();
        read_value(&n, br#"{"s": "abc", "l": [1, 2]}"#, &mut row).unwrap();
        let mut out = Vec::new();
        for cut in 0..row.len() {
            // Every slot's payload reaches the row's end: every truncation
            // cuts one, an error.
            assert!(
                write_value(&n, &row[..cut], &mut out).is_err(),
                "cut at {cut}"
            );
        }
        let mut bad = row.clone();
        bad[1] = 200; // the string's offset past the end
        assert!(write_value(&n, &bad, &mut out).is_err());
        let mut bad = row.clone();
        let s = u32::from_le_bytes(bad[1..5].try_into().unwrap()) as usize;
        bad[s] = 0xff; // not UTF-8
        assert!(
            write_value(&n, &bad, &mut out)
                .unwrap_err()
                .0
                .contains("UTF-8")
        );
    }
}

#[cfg(test)]
mod layout_tests {
    use super::*;
    use crate::ty::Type;

    /// The contract's example (docs/operator-contract.md, "Rows"), byte
    /// for byte.
    #[test]
    fn the_contracts_example_row() {
        let node = Node::of(&"{id: u64, k: u32, name: string?}".parse::<Type>().unwrap());
        let mut row = Vec::new();
        read_value(&node, br#"{"id": 7, "k": 3, "name": "ab"}"#, &mut row).unwrap();
        let expected: Vec<u8> = [
            &[0x00][..],
            &[7, 0, 0, 0, 0, 0, 0, 0],
            &[3, 0, 0, 0],
            &[21, 0, 0, 0, 2, 0, 0, 0],
            b"ab",
        ]
        .concat();
        assert_eq!(row, expected);
        let mut row = Vec::new();
        read_value(&node, br#"{"id": 7, "k": 3, "name": null}"#, &mut row).unwrap();
        assert_eq!(row[0], 0b100, "the third field is null");
        assert_eq!(row.len(), 21);
    }
}
