//! The binary row format: how a value of a [`Type`] is laid out in bytes,
//! so that a reader finds a field at a fixed offset without decoding the
//! rest.
//!
//! A **row** (a value of a record type with `n` fields) is three parts:
//!
//! ```text
//! [null bitmap: ceil(n / 8) bytes][fixed part: one slot per field][variable part]
//! ```
//!
//! - Bit `i % 8` of bitmap byte `i / 8` is set when field `i` is null (only
//!   optional fields may be).
//! - Slots follow one another in the fields' order, with no padding. A
//!   slot is the value itself for a fixed-width type — `bool`, `i8` and
//!   `u8`: 1 byte; `i16`, `u16`: 2; `i32`, `u32`, `f32`: 4; `i64`, `u64`,
//!   `f64`: 8, little-endian (`bool` is 0 or 1) — and 8 bytes for a
//!   variable-length one (`string`, `bytes`, `json`, lists and records): a
//!   `u32` offset from the row's first byte to its payload in the variable
//!   part, then its `u32` length. A null field's slot is zeros; an optional
//!   field's slot is its type's slot.
//! - The payload of a `string` is its UTF-8 bytes, of `bytes` the bytes, of
//!   `json` the value's JSON text, of a record a row of its own (offsets in
//!   it relative to its own first byte), and of a list:
//!
//!   ```text
//!   [count: u32][null bitmap: ceil(count / 8) bytes][count slots][variable part]
//!   ```
//!
//!   with slots as a row's (offsets relative to the list's first byte).
//!
//! A value that is not a record field — a stream's record, a key, a state
//! value — is its **value encoding**: a record's row; a fixed-width
//! scalar's slot bytes; a string's, bytes' or JSON's payload; a list's
//! payload; for `T?`, nothing for null and the byte 1 then `T`'s encoding
//! otherwise.
//!
//! A row's length is not in the row: the batch that carries it says where
//! it ends. Readers check every offset against it, so a malformed row is
//! an error, never a read outside its bytes.
//!
//! [`Schema`] compiles a type into the offsets its readers and writers
//! use; [`json`] converts between rows and JSON text, [`msgpack`] writes
//! MessagePack from rows.

mod schema;

pub mod json;
pub mod msgpack;

pub use schema::{FieldNode, Node, Scalar, Schema};

use crate::ty::Type;

/// A row that is not what its type says: an offset past its end, a
/// string that is not UTF-8, a value of the wrong length.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RowError(pub String);

impl std::fmt::Display for RowError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for RowError {}

/// Bytes of the null bitmap of `n` fields or elements.
pub const fn bitmap_len(n: usize) -> usize {
    n.div_ceil(8)
}

/// Bytes of a slot of type `ty` (the type inside an optional's).
pub fn slot_width(ty: &Type) -> usize {
    match ty {
        Type::Bool | Type::I8 | Type::U8 => 1,
        Type::I16 | Type::U16 => 2,
        Type::I32 | Type::U32 | Type::F32 => 4,
        Type::I64 | Type::U64 | Type::F64 => 8,
        Type::Optional(t) => slot_width(t),
        Type::String | Type::Bytes | Type::Json | Type::List(_) | Type::Record(_) => VAR_SLOT,
    }
}

/// Bytes of a variable-length field's slot: offset and length, `u32` each.
pub const VAR_SLOT: usize = 8;

/// Whether null bit `index` of the bitmap at `nulls_at` in `base` is set
/// (false when the bitmap is shorter: a malformed row reads as not null).
#[inline]
pub fn is_null(base: &[u8], nulls_at: usize, index: usize) -> bool {
    base.get(nulls_at + index / 8)
        .is_some_and(|b| b & (1 << (index % 8)) != 0)
}

/// Set null bit `index` of the bitmap at `nulls_at` in `base`.
#[inline]
pub fn set_null(base: &mut [u8], nulls_at: usize, index: usize) {
    base[nulls_at + index / 8] |= 1 << (index % 8);
}

/// The `N` bytes of the slot at `off` in `base`.
#[inline]
pub fn fixed<const N: usize>(base: &[u8], off: usize) -> Result<[u8; N], RowError> {
    base.get(off..off + N)
        .and_then(|s| s.try_into().ok())
        .ok_or_else(|| {
            RowError(format!(
                "a row of {} bytes has no {N}-byte slot at {off}",
                base.len()
            ))
        })
}

/// The payload the variable-length slot at `off` of `base` points at.
#[inline]
pub fn var(base: &[u8], off: usize) -> Result<&[u8], RowError> {
    let slot: [u8; 8] = fixed(base, off)?;
    let start = u32::from_le_bytes([slot[0], slot[1], slot[2], slot[3]]) as usize;
    let len = u32::from_le_bytes([slot[4], slot[5], slot[6], slot[7]]) as usize;
    start
        .checked_add(len)
        .and_then(|end| base.get(start..end))
        .ok_or_else(|| {
            RowError(format!(
                "a field's payload {start}+{len} is outside its row's {} bytes",
                base.len()
            ))
        })
}

/// Point the variable-length slot at `base_start + off` of `buf` at the
/// payload `buf[payload..]` (offsets relative to `base_start`).
#[inline]
pub fn patch_var(buf: &mut [u8], base_start: usize, off: usize, payload: usize) {
    let rel = (payload - base_start) as u32;
    let len = (buf.len() - payload) as u32;
    let at = base_start + off;
    buf[at..at + 4].copy_from_slice(&rel.to_le_bytes());
    buf[at + 4..at + 8].copy_from_slice(&len.to_le_bytes());
}

/// A list payload's element count, and where its slots start; an error
/// when its slots of `width` bytes each would not fit in it (a count is
/// never trusted beyond the bytes that hold it).
#[inline]
pub fn list_header(payload: &[u8], width: usize) -> Result<(usize, usize), RowError> {
    let count = u32::from_le_bytes(fixed(payload, 0)?) as usize;
    let slots = 4 + bitmap_len(count);
    let end = count.checked_mul(width).and_then(|n| n.checked_add(slots));
    match end {
        Some(end) if end <= payload.len() => Ok((count, slots)),
        _ => Err(RowError(format!(
            "a list of {count} elements does not fit its {} bytes",
            payload.len()
        ))),
    }
}

/// Start a list payload of `count` elements of slot width `width` at the
/// end of `buf`: its count, a zeroed bitmap and zeroed slots. Returns where
/// it starts and where its slots start.
pub fn begin_list(buf: &mut Vec<u8>, count: usize, width: usize) -> (usize, usize) {
    let start = buf.len();
    buf.extend_from_slice(&(count as u32).to_le_bytes());
    let slots = 4 + bitmap_len(count);
    buf.resize(start + slots + count * width, 0);
    (start, slots)
}

/// Checked UTF-8.
#[inline]
pub fn utf8(bytes: &[u8]) -> Result<&str, RowError> {
    std::str::from_utf8(bytes).map_err(|e| RowError(format!("a string field is not UTF-8: {e}")))
}

/// A field found in a row: the bytes of the row (or nested row) that
/// holds it, its index in that row and its node.
#[derive(Clone, Copy, Debug)]
pub struct Located<'a, 'n> {
    /// The (nested) row that holds it.
    pub base: &'a [u8],
    /// Its index there.
    pub index: usize,
    /// The field.
    pub field: &'n FieldNode,
}

/// The field at the end of `path` (from [`Schema::pointer`]) in `row`;
/// `None` when a record on the way is null.
pub fn locate<'a, 'n, F: std::borrow::Borrow<FieldNode>>(
    path: &'n [(usize, F)],
    row: &'a [u8],
) -> Result<Option<Located<'a, 'n>>, RowError> {
    let mut base = row;
    for (k, (index, field)) in path.iter().enumerate() {
        let (index, field) = (*index, field.borrow());
        if k + 1 == path.len() {
            return Ok(Some(Located { base, index, field }));
        }
        if field.optional && is_null(base, 0, index) {
            return Ok(None);
        }
        base = var(base, field.offset)?;
    }
    Ok(None)
}

/// The integer in a located field (any integer type), as an `i64`;
/// `None` when it is null, not an integer, or past `i64::MAX`.
pub fn read_int(at: Located<'_, '_>) -> Result<Option<i64>, RowError> {
    let Located { base, index, field } = at;
    let mut node = &field.node;
    if let Node::Optional(inner) = node {
        if is_null(base, 0, index) {
            return Ok(None);
        }
        node = inner;
    }
    match node {
        Node::Scalar(scalar) => scalar_int(*scalar, base, field.offset),
        _ => Ok(None),
    }
}

/// The integer in the slot of a `scalar` at `off` of `base`, as an `i64`;
/// `None` when the scalar is not an integer, or past `i64::MAX`.
#[inline]
pub fn scalar_int(scalar: Scalar, base: &[u8], off: usize) -> Result<Option<i64>, RowError> {
    Ok(match scalar {
        Scalar::I8 => Some(i8::from_le_bytes(fixed(base, off)?).into()),
        Scalar::I16 => Some(i16::from_le_bytes(fixed(base, off)?).into()),
        Scalar::I32 => Some(i32::from_le_bytes(fixed(base, off)?).into()),
        Scalar::I64 => Some(i64::from_le_bytes(fixed(base, off)?)),
        Scalar::U8 => Some(u8::from_le_bytes(fixed(base, off)?).into()),
        Scalar::U16 => Some(u16::from_le_bytes(fixed(base, off)?).into()),
        Scalar::U32 => Some(u32::from_le_bytes(fixed(base, off)?).into()),
        Scalar::U64 => i64::try_from(u64::from_le_bytes(fixed(base, off)?)).ok(),
        Scalar::F32 | Scalar::F64 | Scalar::Bool => None,
    })
}
