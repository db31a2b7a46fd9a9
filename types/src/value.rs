//! Rust values that are rows: [`RowValue`], implemented for the scalars,
//! `String`, `Option`, `Vec` and `serde_json::Value` here, and for a
//! struct by the SDK's `#[derive(weir::Row)]`; and their views, which read
//! a row in place ([`RowValue::Ref`], [`ListView`]).

use std::marker::PhantomData;

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

    /// What a view reads of it in place, borrowing the row's bytes: the
    /// value itself for a scalar, `&str` for a string, a [`ListView`] for
    /// a list, an `Option` of these for an optional, the derived view of a
    /// record (`#[derive(weir::Row)]` on `Bid` makes `BidView`), and an
    /// owned value for `json`.
    type Ref<'a>;

    /// Read it in place from its slot (what [`RowValue::read_slot`] reads,
    /// without copying a string or a list).
    fn read_ref(
        base: &[u8],
        nulls_at: usize,
        index: usize,
        off: usize,
    ) -> Result<Self::Ref<'_>, RowError>;

    /// Read it in place from its value encoding.
    fn view(bytes: &[u8]) -> Result<Self::Ref<'_>, RowError>;
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

            type Ref<'a> = $t;

            #[inline]
            fn read_ref(base: &[u8], nulls_at: usize, index: usize, off: usize) -> Result<$t, RowError> {
                Self::read_slot(base, nulls_at, index, off)
            }

            #[inline]
            fn view(bytes: &[u8]) -> Result<$t, RowError> {
                Self::decode(bytes)
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

    type Ref<'a> = bool;

    #[inline]
    fn read_ref(base: &[u8], nulls_at: usize, index: usize, off: usize) -> Result<bool, RowError> {
        Self::read_slot(base, nulls_at, index, off)
    }

    fn view(bytes: &[u8]) -> Result<bool, RowError> {
        Self::decode(bytes)
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

    type Ref<'a> = &'a str;

    #[inline]
    fn read_ref(base: &[u8], _: usize, _: usize, off: usize) -> Result<&str, RowError> {
        utf8(var(base, off)?)
    }

    #[inline]
    fn view(bytes: &[u8]) -> Result<&str, RowError> {
        utf8(bytes)
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

    /// A `json` field has no layout to read in place: it is parsed.
    type Ref<'a> = serde_json::Value;

    fn read_ref(
        base: &[u8],
        nulls_at: usize,
        index: usize,
        off: usize,
    ) -> Result<serde_json::Value, RowError> {
        Self::read_slot(base, nulls_at, index, off)
    }

    fn view(bytes: &[u8]) -> Result<serde_json::Value, RowError> {
        Self::decode(bytes)
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

    type Ref<'a> = Option<T::Ref<'a>>;

    #[inline]
    fn read_ref(
        base: &[u8],
        nulls_at: usize,
        index: usize,
        off: usize,
    ) -> Result<Self::Ref<'_>, RowError> {
        if is_null(base, nulls_at, index) {
            Ok(None)
        } else {
            T::read_ref(base, nulls_at, index, off).map(Some)
        }
    }

    fn view(bytes: &[u8]) -> Result<Self::Ref<'_>, RowError> {
        match bytes.split_first() {
            None => Ok(None),
            Some(_) if T::OPTIONAL => T::view(bytes).map(Some),
            Some((_, rest)) => T::view(rest).map(Some),
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

    type Ref<'a> = ListView<'a, T>;

    fn read_ref(base: &[u8], _: usize, _: usize, off: usize) -> Result<ListView<'_, T>, RowError> {
        ListView::new(var(base, off)?)
    }

    fn view(bytes: &[u8]) -> Result<ListView<'_, T>, RowError> {
        ListView::new(bytes)
    }
}

/// A list read in place: its elements are read when asked for
/// ([`RowValue::Ref`] of each), none is copied.
pub struct ListView<'a, T> {
    payload: &'a [u8],
    count: usize,
    slots: usize,
    _element: PhantomData<fn() -> T>,
}

impl<T> Clone for ListView<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for ListView<'_, T> {}

impl<'a, T: RowValue> ListView<'a, T> {
    /// The list whose payload is `payload` (its count checked against its
    /// bytes).
    pub fn new(payload: &'a [u8]) -> Result<Self, RowError> {
        let (count, slots) = list_header(payload, T::WIDTH)?;
        Ok(ListView {
            payload,
            count,
            slots,
            _element: PhantomData,
        })
    }

    /// How many elements it has.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether it has none.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Element `i`, `None` past the end; an error when the list is
    /// malformed.
    pub fn try_get(&self, i: usize) -> Option<Result<T::Ref<'a>, RowError>> {
        (i < self.count).then(|| T::read_ref(self.payload, 4, i, self.slots + i * T::WIDTH))
    }

    /// Element `i`, `None` past the end.
    ///
    /// # Panics
    ///
    /// When the list is malformed (which no writer of Weir's makes).
    #[track_caller]
    pub fn get(&self, i: usize) -> Option<T::Ref<'a>> {
        match self.try_get(i)? {
            Ok(v) => Some(v),
            Err(e) => malformed("a list element", e),
        }
    }

    /// Its elements in order (panicking as [`ListView::get`] does); a
    /// `ListView` is also iterable itself (`for x in list`).
    pub fn iter(&self) -> ListIter<'a, T> {
        ListIter {
            list: *self,
            next: 0,
        }
    }

    /// Its elements, copied out.
    pub fn to_vec(&self) -> Result<Vec<T>, RowError> {
        Vec::<T>::decode(self.payload)
    }

    /// The list's payload, as it lies in the row.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.payload
    }
}

/// The elements of a [`ListView`], read as they are visited.
pub struct ListIter<'a, T> {
    list: ListView<'a, T>,
    next: usize,
}

impl<'a, T: RowValue> Iterator for ListIter<'a, T> {
    type Item = T::Ref<'a>;

    #[track_caller]
    fn next(&mut self) -> Option<T::Ref<'a>> {
        let item = self.list.get(self.next)?;
        self.next += 1;
        Some(item)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.list.count - self.next;
        (left, Some(left))
    }
}

impl<T: RowValue> ExactSizeIterator for ListIter<'_, T> {}

impl<'a, T: RowValue> IntoIterator for ListView<'a, T> {
    type Item = T::Ref<'a>;
    type IntoIter = ListIter<'a, T>;

    fn into_iter(self) -> ListIter<'a, T> {
        self.iter()
    }
}

impl<'a, T: RowValue> std::fmt::Debug for ListView<'a, T>
where
    T::Ref<'a>: std::fmt::Debug,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// A record's view (`#[derive(weir::Row)]` on `Bid` makes `BidView<'a>`):
/// the row it reads, and the record type it views.
pub trait RowView: Copy {
    /// The record type whose rows it reads.
    type Of: RowValue;

    /// The row's bytes, as they lie in the batch.
    fn row(&self) -> &[u8];

    /// The record, decoded (every field copied out).
    fn to_value(&self) -> Result<Self::Of, RowError> {
        Self::Of::decode(self.row())
    }
}

/// A view's field (`what`: `Type.field`, or `a list element`) that its row
/// does not hold as its type says: the row was not written by a writer of
/// this format. Views panic on it (the operator fails, its log naming the
/// field) rather than make every read fallible.
#[cold]
#[track_caller]
pub fn malformed(what: &str, e: RowError) -> ! {
    panic!("a malformed row: {what}: {e}")
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
    fn views_of_value_encodings_read_what_decoding_reads() {
        let mut b = Vec::new();
        Some("é".to_owned()).encode(&mut b);
        assert_eq!(<Option<String>>::view(&b).unwrap(), Some("é"));
        assert_eq!(<Option<String>>::view(&[]).unwrap(), None);
        let mut b = Vec::new();
        Some(Some(4u8)).encode(&mut b);
        assert_eq!(<Option<Option<u8>>>::view(&b).unwrap(), Some(Some(4)));
        let mut b = Vec::new();
        vec![Some(1u32), None, Some(300)].encode(&mut b);
        let list = <Vec<Option<u32>>>::view(&b).unwrap();
        assert_eq!(list.len(), 3);
        assert_eq!(list.iter().collect::<Vec<_>>(), [Some(1), None, Some(300)]);
        assert_eq!(list.iter().len(), 3);
        let mut sum = 0;
        for n in list {
            sum += n.unwrap_or(0);
        }
        assert_eq!(sum, 301);
        assert_eq!(list.get(2), Some(Some(300)));
        assert_eq!(list.get(3), None);
        assert_eq!(format!("{list:?}"), "[Some(1), None, Some(300)]");
        let mut b = Vec::new();
        vec![vec!["a".to_owned()], vec![]].encode(&mut b);
        let nested = <Vec<Vec<String>>>::view(&b).unwrap();
        assert_eq!(nested.get(0).unwrap().get(0), Some("a"));
        assert!(nested.get(1).unwrap().is_empty());
        // A count its bytes cannot hold is an error when the list is viewed.
        assert!(<Vec<u64>>::view(&[9, 0, 0, 0, 0]).is_err());
        // An element whose payload lies outside the list: that element's
        // read is an error, the others read.
        let mut b = Vec::new();
        vec!["ab".to_owned(), "c".to_owned()].encode(&mut b);
        let end = b.len();
        b[4 + 1 + 8..4 + 1 + 12].copy_from_slice(&(end as u32).to_le_bytes());
        let list = <Vec<String>>::view(&b).unwrap();
        assert_eq!(list.try_get(0).unwrap().unwrap(), "ab");
        assert!(list.try_get(1).unwrap().is_err());
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
