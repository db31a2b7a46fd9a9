//! Rust values that are rows: [`RowValue`], implemented for the scalars,
//! `String`, `Option`, `Vec` and `serde_json::Value` here, and for a
//! struct by the SDK's `#[derive(weir::Row)]`.

use crate::row::{
    RowError, VAR_SLOT, begin_list, fixed, is_null, list_header, patch_var, set_null, utf8, var,
};
use crate::ty::Type;

/// A Rust type whose values are written and read in the row format
/// ([`crate::row`]), with the [`Type`] it says.
///
/// A value sits either in a *slot* — a field of a row, or an element of a
/// list — or alone, in its *value encoding* (a stream's record, a state
/// value). In a slot, `base` is the row's (or the list payload's) bytes,
/// the null bitmap starts at `nulls_at` in it (0 in a row, 4 in a list),
/// `index` is the field's (element's) number and `off` its slot's offset.
pub trait RowValue: Sized {
    /// Bytes of its slot.
    const WIDTH: usize;

    /// Whether it is an `Option` (whose `None` is null).
    const OPTIONAL: bool = false;

    /// Its type.
    fn row_type() -> Type;

    /// Read it from its slot.
    fn read_slot(base: &[u8], nulls_at: usize, index: usize, off: usize) -> Result<Self, RowError>;

    /// Write it into its slot of the row (or list payload) that starts at
    /// `start` in `buf`; its slots are there already (zeros), a payload
    /// goes at the end of `buf`.
    fn write_slot(
        &self,
        buf: &mut Vec<u8>,
        start: usize,
        nulls_at: usize,
        index: usize,
        off: usize,
    );

    /// Append its value encoding to `out`.
    fn encode(&self, out: &mut Vec<u8>);

    /// Read it from its value encoding.
    fn decode(bytes: &[u8]) -> Result<Self, RowError>;
}

macro_rules! scalar {
    ($($t:ty => $variant:ident, $n:literal;)*) => {$(
        impl RowValue for $t {
            const WIDTH: usize = $n;

            fn row_type() -> Type {
                Type::$variant
            }

            #[inline]
            fn read_slot(base: &[u8], _: usize, _: usize, off: usize) -> Result<Self, RowError> {
                Ok(<$t>::from_le_bytes(fixed(base, off)?))
            }

            #[inline]
            fn write_slot(&self, buf: &mut Vec<u8>, start: usize, _: usize, _: usize, off: usize) {
                buf[start + off..start + off + $n].copy_from_slice(&self.to_le_bytes());
            }

            #[inline]
            fn encode(&self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }

            #[inline]
            fn decode(bytes: &[u8]) -> Result<Self, RowError> {
                let b: [u8; $n] = bytes.try_into().map_err(|_| {
                    RowError(format!(
                        "a {} value of {} bytes (it has {})",
                        stringify!($t),
                        bytes.len(),
                        $n
                    ))
                })?;
                Ok(<$t>::from_le_bytes(b))
            }
        }
    )*};
}

scalar! {
    i8 => I8, 1;
    i16 => I16, 2;
    i32 => I32, 4;
    i64 => I64, 8;
    u8 => U8, 1;
    u16 => U16, 2;
    u32 => U32, 4;
    u64 => U64, 8;
    f32 => F32, 4;
    f64 => F64, 8;
}

impl RowValue for bool {
    const WIDTH: usize = 1;

    fn row_type() -> Type {
        Type::Bool
    }

    #[inline]
    fn read_slot(base: &[u8], _: usize, _: usize, off: usize) -> Result<Self, RowError> {
        Ok(fixed::<1>(base, off)?[0] != 0)
    }

    #[inline]
    fn write_slot(&self, buf: &mut Vec<u8>, start: usize, _: usize, _: usize, off: usize) {
        buf[start + off] = *self as u8;
    }

    fn encode(&self, out: &mut Vec<u8>) {
        out.push(*self as u8);
    }

    fn decode(bytes: &[u8]) -> Result<Self, RowError> {
        match bytes {
            [b] => Ok(*b != 0),
            _ => Err(RowError(format!("a bool value of {} bytes", bytes.len()))),
        }
    }
}

impl RowValue for String {
    const WIDTH: usize = VAR_SLOT;

    fn row_type() -> Type {
        Type::String
    }

    #[inline]
    fn read_slot(base: &[u8], _: usize, _: usize, off: usize) -> Result<Self, RowError> {
        Ok(utf8(var(base, off)?)?.to_owned())
    }

    #[inline]
    fn write_slot(&self, buf: &mut Vec<u8>, start: usize, _: usize, _: usize, off: usize) {
        let payload = buf.len();
        buf.extend_from_slice(self.as_bytes());
        patch_var(buf, start, off, payload);
    }

    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self.as_bytes());
    }

    fn decode(bytes: &[u8]) -> Result<Self, RowError> {
        Ok(utf8(bytes)?.to_owned())
    }
}

impl RowValue for serde_json::Value {
    const WIDTH: usize = VAR_SLOT;

    fn row_type() -> Type {
        Type::Json
    }

    fn read_slot(base: &[u8], _: usize, _: usize, off: usize) -> Result<Self, RowError> {
        Self::decode(var(base, off)?)
    }

    fn write_slot(&self, buf: &mut Vec<u8>, start: usize, _: usize, _: usize, off: usize) {
        let payload = buf.len();
        self.encode(buf);
        patch_var(buf, start, off, payload);
    }

    fn encode(&self, out: &mut Vec<u8>) {
        serde_json::to_writer(out, self).expect("a JSON value writes into memory");
    }

    fn decode(bytes: &[u8]) -> Result<Self, RowError> {
        serde_json::from_slice(bytes).map_err(|e| RowError(format!("a json value: {e}")))
    }
}

/// An `Option` of an `Option` is one optional: `Some(None)` is null, as
/// it is in JSON (the type has no third state).
impl<T: RowValue> RowValue for Option<T> {
    const WIDTH: usize = T::WIDTH;
    const OPTIONAL: bool = true;

    fn row_type() -> Type {
        T::row_type().optional()
    }

    #[inline]
    fn read_slot(base: &[u8], nulls_at: usize, index: usize, off: usize) -> Result<Self, RowError> {
        if is_null(base, nulls_at, index) {
            Ok(None)
        } else {
            T::read_slot(base, nulls_at, index, off).map(Some)
        }
    }

    #[inline]
    fn write_slot(
        &self,
        buf: &mut Vec<u8>,
        start: usize,
        nulls_at: usize,
        index: usize,
        off: usize,
    ) {
        match self {
            None => set_null(buf, start + nulls_at, index),
            Some(v) => v.write_slot(buf, start, nulls_at, index, off),
        }
    }

    fn encode(&self, out: &mut Vec<u8>) {
        match self {
            None => {}
            // Already an optional's encoding: nothing for null.
            Some(v) if T::OPTIONAL => v.encode(out),
            Some(v) => {
                out.push(1);
                v.encode(out);
            }
        }
    }

    fn decode(bytes: &[u8]) -> Result<Self, RowError> {
        match bytes.split_first() {
            None => Ok(None),
            Some(_) if T::OPTIONAL => T::decode(bytes).map(Some),
            Some((_, rest)) => T::decode(rest).map(Some),
        }
    }
}

impl<T: RowValue> RowValue for Vec<T> {
    const WIDTH: usize = VAR_SLOT;

    fn row_type() -> Type {
        Type::List(Box::new(T::row_type()))
    }

    fn read_slot(base: &[u8], _: usize, _: usize, off: usize) -> Result<Self, RowError> {
        Self::decode(var(base, off)?)
    }

    fn write_slot(&self, buf: &mut Vec<u8>, start: usize, _: usize, _: usize, off: usize) {
        let payload = buf.len();
        self.encode(buf);
        patch_var(buf, start, off, payload);
    }

    fn encode(&self, out: &mut Vec<u8>) {
        let (start, slots) = begin_list(out, self.len(), T::WIDTH);
        for (i, v) in self.iter().enumerate() {
            v.write_slot(out, start, 4, i, slots + i * T::WIDTH);
        }
    }

    fn decode(bytes: &[u8]) -> Result<Self, RowError> {
        // Each element needs its slot: a count larger than the payload is
        // an error, not an allocation.
        let (count, slots) = list_header(bytes, T::WIDTH)?;
        (0..count)
            .map(|i| T::read_slot(bytes, 4, i, slots + i * T::WIDTH))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::row::{Node, json};

    /// A value's encoding reads back, and says in JSON what `json` says.
    fn check<T: RowValue + PartialEq + std::fmt::Debug>(value: T, json_text: &str) {
        let mut bytes = Vec::new();
        value.encode(&mut bytes);
        assert_eq!(T::decode(&bytes).unwrap(), value);
        let node = Node::of(&T::row_type());
        let mut text = Vec::new();
        json::write_value(&node, &bytes, &mut text).unwrap();
        assert_eq!(String::from_utf8(text).unwrap(), json_text);
        let mut again = Vec::new();
        json::read_value(&node, json_text.as_bytes(), &mut again).unwrap();
        assert_eq!(
            again, bytes,
            "the host's reader writes what the value writes"
        );
    }

    #[test]
    fn std_values_are_rows_the_host_reads() {
        check(7u8, "7");
        check(-7i64, "-7");
        check(u64::MAX, "18446744073709551615");
        check(0.1f32, "0.1");
        check(2.5f64, "2.5");
        check(true, "true");
        check("é\"".to_owned(), r#""é\"""#);
        check(Some(3u16), "3");
        check(None::<u16>, "null");
        check(vec![Some("a".to_owned()), None], r#"["a",null]"#);
        check(vec![vec![1u32], vec![]], "[[1],[]]");
        check(serde_json::json!({"a": [1, null]}), r#"{"a":[1,null]}"#);
        // One optional, as in JSON: Some(None) is null.
        check(Some(Some(4u8)), "4");
        check(None::<Option<u8>>, "null");
        let mut b = Vec::new();
        Some(None::<u8>).encode(&mut b);
        assert_eq!(<Option<Option<u8>>>::decode(&b).unwrap(), None);
        assert_eq!(<Option<Option<u8>>>::row_type().to_string(), "u8?");
        assert_eq!(<Option<Vec<u8>>>::row_type().to_string(), "list<u8>?");
    }

    #[test]
    fn malformed_encodings_are_errors() {
        assert!(u32::decode(&[1, 2]).is_err());
        assert!(String::decode(&[0xff]).is_err());
        // A count its bytes cannot hold: an error before any element is read.
        let e = <Vec<u8>>::decode(&[255, 255, 255, 255, 0]).unwrap_err();
        assert!(e.0.contains("does not fit"), "{e}");
        assert!(<Vec<u64>>::decode(&[1]).is_err());
    }
}
