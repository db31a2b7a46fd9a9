//! Rows to MessagePack: what an untyped reader of a typed stream gets, and
//! how a key read from a row travels (keys are never rows: see
//! [`write_slot`]).
//!
//! A record is a map keyed by its fields' names (null optionals included,
//! as `nil`), integers in their shortest form, `f32` and `f64` as such,
//! `bytes` as `bin`, `json` as the value it holds.

use super::{Node, RowError, Scalar, fixed, is_null, list_header, utf8, var};

/// Append the MessagePack of `bytes`, a value of `node` in its value
/// encoding, to `out`.
///
/// ```
/// use weir_types::{Type, row::{Node, json, msgpack}};
/// let node = Node::of(&"{a: u8, b: string?}".parse::<Type>().unwrap());
/// let mut row = Vec::new();
/// json::read_value(&node, br#"{"a": 1}"#, &mut row).unwrap();
/// let mut packed = Vec::new();
/// msgpack::write_value(&node, &row, &mut packed).unwrap();
/// assert_eq!(packed, [0x82, 0xa1, b'a', 0x01, 0xa1, b'b', 0xc0]);
/// ```
pub fn write_value(node: &Node, bytes: &[u8], out: &mut Vec<u8>) -> Result<(), RowError> {
    match node {
        Node::Optional(inner) => match bytes.split_first() {
            None => {
                out.push(0xc0);
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

/// Append the MessagePack of the value in the slot at `off` of `base`
/// (null bit `index` of the bitmap at `nulls_at`): a field of a row
/// (`nulls_at` 0) or an element of a list (`nulls_at` 4).
pub fn write_slot(
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
                out.push(0xc0);
                Ok(())
            } else {
                write_slot(inner, base, nulls_at, index, off, out)
            }
        }
        Node::Scalar(s) => write_scalar(*s, base, off, out),
        _ => write_payload(node, var(base, off)?, out),
    }
}

/// Append the MessagePack of the `s` in the slot at `off` of `base`.
#[inline]
pub fn write_scalar(s: Scalar, base: &[u8], off: usize, out: &mut Vec<u8>) -> Result<(), RowError> {
    match s {
        Scalar::Bool => out.push(if fixed::<1>(base, off)?[0] != 0 {
            0xc3
        } else {
            0xc2
        }),
        Scalar::I8 => int(i8::from_le_bytes(fixed(base, off)?).into(), out),
        Scalar::I16 => int(i16::from_le_bytes(fixed(base, off)?).into(), out),
        Scalar::I32 => int(i32::from_le_bytes(fixed(base, off)?).into(), out),
        Scalar::I64 => int(i64::from_le_bytes(fixed(base, off)?), out),
        Scalar::U8 => uint(u8::from_le_bytes(fixed(base, off)?).into(), out),
        Scalar::U16 => uint(u16::from_le_bytes(fixed(base, off)?).into(), out),
        Scalar::U32 => uint(u32::from_le_bytes(fixed(base, off)?).into(), out),
        Scalar::U64 => uint(u64::from_le_bytes(fixed(base, off)?), out),
        Scalar::F32 => {
            out.push(0xca);
            out.extend_from_slice(&f32::from_le_bytes(fixed(base, off)?).to_be_bytes());
        }
        Scalar::F64 => {
            out.push(0xcb);
            out.extend_from_slice(&f64::from_le_bytes(fixed(base, off)?).to_be_bytes());
        }
    }
    Ok(())
}

/// An unsigned integer in its shortest form.
pub fn uint(v: u64, out: &mut Vec<u8>) {
    if v < 0x80 {
        out.push(v as u8);
    } else if v <= u8::MAX as u64 {
        out.extend_from_slice(&[0xcc, v as u8]);
    } else if v <= u16::MAX as u64 {
        out.push(0xcd);
        out.extend_from_slice(&(v as u16).to_be_bytes());
    } else if v <= u32::MAX as u64 {
        out.push(0xce);
        out.extend_from_slice(&(v as u32).to_be_bytes());
    } else {
        out.push(0xcf);
        out.extend_from_slice(&v.to_be_bytes());
    }
}

/// A signed integer in its shortest form (a non-negative one as unsigned).
pub fn int(v: i64, out: &mut Vec<u8>) {
    if v >= 0 {
        uint(v as u64, out);
    } else if v >= -32 {
        out.push(v as i8 as u8);
    } else if v >= i8::MIN as i64 {
        out.extend_from_slice(&[0xd0, v as i8 as u8]);
    } else if v >= i16::MIN as i64 {
        out.push(0xd1);
        out.extend_from_slice(&(v as i16).to_be_bytes());
    } else if v >= i32::MIN as i64 {
        out.push(0xd2);
        out.extend_from_slice(&(v as i32).to_be_bytes());
    } else {
        out.push(0xd3);
        out.extend_from_slice(&v.to_be_bytes());
    }
}

/// A string's header and bytes.
pub fn str(s: &str, out: &mut Vec<u8>) {
    let n = s.len();
    if n < 32 {
        out.push(0xa0 | n as u8);
    } else if n <= u8::MAX as usize {
        out.extend_from_slice(&[0xd9, n as u8]);
    } else if n <= u16::MAX as usize {
        out.push(0xda);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        out.push(0xdb);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    }
    out.extend_from_slice(s.as_bytes());
}

fn header(n: usize, fix: u8, fix_max: usize, b16: u8, b32: u8, out: &mut Vec<u8>) {
    if n <= fix_max {
        out.push(fix | n as u8);
    } else if n <= u16::MAX as usize {
        out.push(b16);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        out.push(b32);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    }
}

fn write_payload(node: &Node, payload: &[u8], out: &mut Vec<u8>) -> Result<(), RowError> {
    match node {
        Node::String => str(utf8(payload)?, out),
        Node::Bytes => {
            let n = payload.len();
            if n <= u8::MAX as usize {
                out.extend_from_slice(&[0xc4, n as u8]);
            } else if n <= u16::MAX as usize {
                out.push(0xc5);
                out.extend_from_slice(&(n as u16).to_be_bytes());
            } else {
                out.push(0xc6);
                out.extend_from_slice(&(n as u32).to_be_bytes());
            }
            out.extend_from_slice(payload);
        }
        Node::Json => {
            let value: serde_json::Value = serde_json::from_slice(payload)
                .map_err(|e| RowError(format!("a json field is not JSON: {e}")))?;
            json_value(&value, out);
        }
        Node::List { element, width } => {
            let (count, slots) = list_header(payload, *width)?;
            header(count, 0x90, 15, 0xdc, 0xdd, out);
            for i in 0..count {
                write_slot(element, payload, 4, i, slots + i * width, out)?;
            }
        }
        Node::Record { fields, fixed, .. } => {
            if payload.len() < *fixed {
                return Err(RowError(format!(
                    "a row of {} bytes, shorter than its {fixed} bytes of slots",
                    payload.len()
                )));
            }
            header(fields.len(), 0x80, 15, 0xde, 0xdf, out);
            for (i, f) in fields.iter().enumerate() {
                str(&f.name, out);
                write_slot(&f.node, payload, 0, i, f.offset, out)?;
            }
        }
        Node::Scalar(_) | Node::Optional(_) => unreachable!("not a payload"),
    }
    Ok(())
}

fn json_value(v: &serde_json::Value, out: &mut Vec<u8>) {
    use serde_json::Value;
    match v {
        Value::Null => out.push(0xc0),
        Value::Bool(b) => out.push(if *b { 0xc3 } else { 0xc2 }),
        Value::Number(n) => {
            if let Some(u) = n.as_u64() {
                uint(u, out);
            } else if let Some(i) = n.as_i64() {
                int(i, out);
            } else {
                out.push(0xcb);
                out.extend_from_slice(&n.as_f64().unwrap_or(0.0).to_be_bytes());
            }
        }
        Value::String(s) => str(s, out),
        Value::Array(a) => {
            header(a.len(), 0x90, 15, 0xdc, 0xdd, out);
            for x in a {
                json_value(x, out);
            }
        }
        Value::Object(o) => {
            header(o.len(), 0x80, 15, 0xde, 0xdf, out);
            for (k, x) in o {
                str(k, out);
                json_value(x, out);
            }
        }
    }
}
