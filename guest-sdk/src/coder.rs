//! How an operator reads and writes its records, chosen per type when
//! [`export_operators!`](crate::export_operators) registers it:
//!
//! - a type with a row layout ([`crate::Row`]: the scalars, `String`,
//!   `Option`, `Vec`, `serde_json::Value`, a `#[derive(weir::Row)]`
//!   struct) is **typed**: the operator declares its type to the host, a
//!   stream of exactly that type reaches it as rows (read field by field at
//!   fixed offsets, no parse), and any other stream — JSON, MessagePack —
//!   is read into the same rows first, so the type reads the same whatever
//!   the codec;
//! - a typed record's view (`BidView<'a>` of `#[derive(Row)]` on `Bid`),
//!   taken by a `map`, `flat_map`, `filter` or `timestamps` function, is
//!   read by [`Views`]: `Bid`'s type is declared, the row is read in place;
//! - any other serde type is **untyped** (`json`): decoded and encoded by
//!   serde, in JSON or MessagePack.
//!
//! The choice is made at compile time, per type, by the macro (a typed
//! type that also implements serde is read as rows).

use std::cell::{Cell, OnceCell};
use std::marker::PhantomData;

use serde::Serialize;
use serde::de::DeserializeOwned;
use weir_types::Type;
use weir_types::row::{Node, json, msgpack};

use crate::codec::wire::{self, Codec};

/// Reads records of type `T` in any codec.
pub trait Decode<T> {
    /// The type it declares to the host (`None`: untyped).
    fn row_type(&self) -> Option<Type>;
    /// `bytes`, a record in `codec`, as a `T`.
    fn decode(&self, codec: Codec, bytes: &[u8]) -> crate::Result<T>;
    /// Append `bytes`, a record of this type in `from`, to `buf` in `to`
    /// (a filter's records go on as they came, in its output's codec).
    fn transcode(
        &self,
        from: Codec,
        to: Codec,
        bytes: &[u8],
        buf: &mut Vec<u8>,
    ) -> crate::Result<()>;
}

/// Writes records of type `T` in any codec.
pub trait Encode<T: ?Sized> {
    /// The type it declares to the host (`None`: untyped).
    fn row_type(&self) -> Option<Type>;
    /// Append `value` to `buf` in `codec`.
    fn encode(&self, codec: Codec, value: &T, buf: &mut Vec<u8>);
}

/// Reads a function's argument from a record: an owned value ([`Rows`],
/// [`Serde`]) or a view of the record's row that reads it in place
/// ([`Views`]). The argument may borrow the record's bytes (or, for a
/// record that came in another codec, `scratch`) for the call.
pub trait Input: Default + 'static {
    /// What the function takes.
    type Arg<'a>;
    /// The type it declares to the host (`None`: untyped).
    fn row_type(&self) -> Option<Type>;
    /// `bytes`, a record in `codec`, as the function's argument.
    fn read<'a>(
        &self,
        codec: Codec,
        bytes: &'a [u8],
        scratch: &'a mut Vec<u8>,
    ) -> crate::Result<Self::Arg<'a>>;
    /// Append `bytes`, a record in `from`, to `buf` in `to`.
    fn transcode(
        &self,
        from: Codec,
        to: Codec,
        bytes: &[u8],
        buf: &mut Vec<u8>,
    ) -> crate::Result<()>;
}

macro_rules! owned_input {
    ($coder:ident, $($bound:tt)+) => {
        impl<T: $($bound)+ + 'static> Input for $coder<T> {
            type Arg<'a> = T;

            fn row_type(&self) -> Option<Type> {
                Decode::row_type(self)
            }

            #[inline(always)]
            fn read<'a>(&self, codec: Codec, bytes: &'a [u8], _: &'a mut Vec<u8>) -> crate::Result<T> {
                self.decode(codec, bytes)
            }

            fn transcode(
                &self,
                from: Codec,
                to: Codec,
                bytes: &[u8],
                buf: &mut Vec<u8>,
            ) -> crate::Result<()> {
                Decode::transcode(self, from, to, bytes, buf)
            }
        }
    };
}

owned_input!(Rows, crate::Row);
owned_input!(Serde, DeserializeOwned);

/// The reader of a function that takes a view (`fn f(e: BidView<'_>)`): the
/// record's row is read in place, a field when the function asks for it. A
/// record in another codec (JSON, MessagePack) is read into a row first.
pub struct Views<T>(Rows<T>);

impl<T: crate::Row> Default for Views<T> {
    fn default() -> Self {
        Views(Rows::new())
    }
}

impl<T: crate::Row + 'static> Input for Views<T> {
    type Arg<'a> = T::Ref<'a>;

    fn row_type(&self) -> Option<Type> {
        Some(T::row_type())
    }

    #[inline]
    fn read<'a>(
        &self,
        codec: Codec,
        bytes: &'a [u8],
        scratch: &'a mut Vec<u8>,
    ) -> crate::Result<T::Ref<'a>> {
        let row: &'a [u8] = match codec {
            Codec::Row => bytes,
            _ => {
                scratch.clear();
                self.0.read_row(codec, bytes, scratch)?;
                scratch
            }
        };
        T::view(row).map_err(not_a_row::<T>)
    }

    fn transcode(
        &self,
        from: Codec,
        to: Codec,
        bytes: &[u8],
        buf: &mut Vec<u8>,
    ) -> crate::Result<()> {
        Decode::transcode(&self.0, from, to, bytes, buf)
    }
}

/// The coder of a typed type: rows, and every other codec through rows.
pub struct Rows<T> {
    node: OnceCell<Node>,
    /// A row on its way to or from another codec, kept between records.
    scratch: Cell<Vec<u8>>,
    _type: PhantomData<fn() -> T>,
}

impl<T: crate::Row> Rows<T> {
    /// The coder of `T`.
    pub fn new() -> Self {
        Rows {
            node: OnceCell::new(),
            scratch: Cell::new(Vec::new()),
            _type: PhantomData,
        }
    }

    /// `T`'s type, compiled once.
    fn node(&self) -> &Node {
        self.node.get_or_init(|| Node::of(&T::row_type()))
    }

    /// `bytes` in `codec` (JSON or MessagePack) as a row of `T`'s type.
    fn read_row(&self, codec: Codec, bytes: &[u8], row: &mut Vec<u8>) -> crate::Result<()> {
        let read = match codec {
            Codec::Msgpack => json::read_with(
                self.node(),
                &mut rmp_serde::Deserializer::from_read_ref(bytes),
                row,
            ),
            _ => json::read_value(self.node(), bytes, row),
        };
        read.map_err(|e| {
            format!(
                "cannot read {} as {}: {e}",
                excerpt(codec, bytes),
                T::row_type()
            )
            .into()
        })
    }

    /// A row of `T`'s type appended to `buf` in `codec` (JSON or
    /// MessagePack).
    fn write_row(&self, codec: Codec, row: &[u8], buf: &mut Vec<u8>) -> crate::Result<()> {
        match codec {
            Codec::Msgpack => msgpack::write_value(self.node(), row, buf),
            _ => json::write_value(self.node(), row, buf),
        }
        .map_err(|e| format!("a malformed row of {}: {e}", T::row_type()).into())
    }
}

impl<T: crate::Row> Default for Rows<T> {
    fn default() -> Self {
        Rows::new()
    }
}

fn excerpt(codec: Codec, bytes: &[u8]) -> String {
    match codec {
        Codec::Json => format!(
            "{:?}",
            String::from_utf8_lossy(&bytes[..bytes.len().min(80)])
        ),
        _ => format!("{} bytes", bytes.len()),
    }
}

impl<T: crate::Row + 'static> Decode<T> for Rows<T> {
    fn row_type(&self) -> Option<Type> {
        Some(T::row_type())
    }

    #[inline(always)]
    fn decode(&self, codec: Codec, bytes: &[u8]) -> crate::Result<T> {
        let decoded = match codec {
            Codec::Row => T::decode(bytes),
            _ => {
                let mut row = self.scratch.take();
                row.clear();
                let decoded = self
                    .read_row(codec, bytes, &mut row)
                    .map(|()| T::decode(&row));
                self.scratch.set(row);
                decoded?
            }
        };
        decoded.map_err(not_a_row::<T>)
    }

    fn transcode(
        &self,
        from: Codec,
        to: Codec,
        bytes: &[u8],
        buf: &mut Vec<u8>,
    ) -> crate::Result<()> {
        match (from, to) {
            _ if from == to => {
                buf.extend_from_slice(bytes);
                Ok(())
            }
            (Codec::Row, _) => self.write_row(to, bytes, buf),
            (_, Codec::Row) => self.read_row(from, bytes, buf),
            _ => wire::transcode_into(from, to, bytes, buf),
        }
    }
}

/// The error of bytes that are not a row of `T`.
#[cold]
#[inline(never)]
fn not_a_row<T: crate::Row>(e: weir_types::row::RowError) -> crate::Error {
    format!("cannot read a row as {}: {e}", T::row_type()).into()
}

impl<T: crate::Row + 'static> Encode<T> for Rows<T> {
    fn row_type(&self) -> Option<Type> {
        Some(T::row_type())
    }

    #[inline(always)]
    fn encode(&self, codec: Codec, value: &T, buf: &mut Vec<u8>) {
        match codec {
            Codec::Row => value.encode(buf),
            _ => {
                let mut row = self.scratch.take();
                row.clear();
                value.encode(&mut row);
                let written = self.write_row(codec, &row, buf);
                self.scratch.set(row);
                written.unwrap_or_else(|e| panic!("cannot encode a value: {e}"));
            }
        }
    }
}

/// The coder of an untyped (serde) type.
pub struct Serde<T: ?Sized>(PhantomData<fn() -> Box<T>>);

impl<T: ?Sized> Serde<T> {
    /// The coder of `T`.
    pub fn new() -> Self {
        Serde(PhantomData)
    }
}

impl<T: ?Sized> Default for Serde<T> {
    fn default() -> Self {
        Serde::new()
    }
}

impl<T: DeserializeOwned + 'static> Decode<T> for Serde<T> {
    fn row_type(&self) -> Option<Type> {
        None
    }

    fn decode(&self, codec: Codec, bytes: &[u8]) -> crate::Result<T> {
        wire::decode(codec, bytes)
    }

    fn transcode(
        &self,
        from: Codec,
        to: Codec,
        bytes: &[u8],
        buf: &mut Vec<u8>,
    ) -> crate::Result<()> {
        wire::transcode_into(from, to, bytes, buf)
    }
}

impl<T: Serialize + ?Sized + 'static> Encode<T> for Serde<T> {
    fn row_type(&self) -> Option<Type> {
        None
    }

    fn encode(&self, codec: Codec, value: &T, buf: &mut Vec<u8>) {
        wire::encode_into(codec, buf, value)
    }
}

/// Picks a type's coder in [`export_operators!`](crate::export_operators):
/// `(&Probe::<T>::new()).decoder()` is [`Rows`] when `T` is a [`crate::Row`]
/// (the inherent-looking method of [`ViaRows`] is found first) and
/// [`Serde`] otherwise ([`ViaSerdeDecode`] and [`ViaSerdeEncode`] on
/// `&Probe`, found one auto-reference later).
pub struct Probe<T: ?Sized>(PhantomData<fn() -> Box<T>>);

impl<T: ?Sized> Probe<T> {
    /// A probe of `T`.
    pub fn new() -> Self {
        Probe(PhantomData)
    }
}

impl<T: ?Sized> Default for Probe<T> {
    fn default() -> Self {
        Probe::new()
    }
}

/// A typed type's coder.
pub trait ViaRows<T> {
    /// Its decoder.
    fn decoder(&self) -> Rows<T>;
    /// Its encoder.
    fn encoder(&self) -> Rows<T>;
}

impl<T: crate::Row + 'static> ViaRows<T> for Probe<T> {
    fn decoder(&self) -> Rows<T> {
        Rows::new()
    }
    fn encoder(&self) -> Rows<T> {
        Rows::new()
    }
}

/// A view type's reader (`BidView<'_>` reads rows of `Bid`).
pub trait ViaViews<T> {
    /// Its reader.
    fn decoder(&self) -> Views<T>;
}

impl<V: weir_types::RowView> ViaViews<V::Of> for Probe<V>
where
    V::Of: 'static,
{
    fn decoder(&self) -> Views<V::Of> {
        Views::default()
    }
}

/// An untyped type's decoder.
pub trait ViaSerdeDecode<T> {
    /// Its decoder.
    fn decoder(&self) -> Serde<T>;
}

impl<T: DeserializeOwned + 'static> ViaSerdeDecode<T> for &Probe<T> {
    fn decoder(&self) -> Serde<T> {
        Serde::new()
    }
}

/// An untyped type's encoder.
pub trait ViaSerdeEncode<T: ?Sized> {
    /// Its encoder.
    fn encoder(&self) -> Serde<T>;
}

impl<T: Serialize + ?Sized + 'static> ViaSerdeEncode<T> for &Probe<T> {
    fn encoder(&self) -> Serde<T> {
        Serde::new()
    }
}

/// The input and output types of a `map` function, as probes.
pub fn probe_map<I, O>(_: fn(I) -> O) -> (Probe<I>, Probe<O>) {
    (Probe::new(), Probe::new())
}

/// The input and output types of a `flat_map` function, as probes.
pub fn probe_flat_map<I, O>(_: fn(I, &mut crate::Collector<O>)) -> (Probe<I>, Probe<O>) {
    (Probe::new(), Probe::new())
}

/// The input type of a `filter` or `timestamps` function, as a probe.
pub fn probe_ref<I, R>(_: fn(&I) -> R) -> Probe<I> {
    Probe::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[expect(
        clippy::needless_borrow,
        reason = "the macro writes `(&probe)` for every type: the borrow is what falls back to serde"
    )]
    fn typed_types_pick_rows_and_others_serde() {
        fn input<T, D: Decode<T>>(d: D) -> Option<Type> {
            d.row_type()
        }
        fn output<T, E: Encode<T>>(e: E) -> Option<Type> {
            e.row_type()
        }
        let typed = Probe::<u64>::new();
        assert_eq!(input((&typed).decoder()), Some(Type::U64));
        let untyped = Probe::<(String, u64)>::new();
        assert_eq!(input((&untyped).decoder()), None);
        assert_eq!(output((&untyped).encoder()), None);
        let (i, o) = probe_map(|s: String| (s, 1u8));
        assert_eq!(input((&i).decoder()), Some(Type::String));
        assert_eq!(output((&o).encoder()), None);
    }

    #[test]
    fn a_typed_value_reads_the_same_from_every_codec() {
        let c = Rows::<Vec<Option<u32>>>::new();
        let value = vec![Some(1), None, Some(300)];
        let mut row = Vec::new();
        c.encode(Codec::Row, &value, &mut row);
        for codec in [Codec::Json, Codec::Msgpack] {
            let mut other = Vec::new();
            c.encode(codec, &value, &mut other);
            assert_eq!(c.decode(codec, &other).unwrap(), value, "{codec:?}");
            // A shorter value after it: nothing of the one before is left.
            let mut short = Vec::new();
            c.encode(codec, &vec![Some(7)], &mut short);
            assert_eq!(c.decode(codec, &short).unwrap(), vec![Some(7)]);
            let mut back = Vec::new();
            Decode::transcode(&c, codec, Codec::Row, &other, &mut back).unwrap();
            assert_eq!(back, row);
        }
        let mut json = Vec::new();
        Decode::transcode(&c, Codec::Row, Codec::Json, &row, &mut json).unwrap();
        assert_eq!(json, b"[1,null,300]");
        let e = c
            .decode(Codec::Json, b"[1, \"x\"]")
            .unwrap_err()
            .to_string();
        assert!(e.contains("list<u32?>") && e.contains("[1]"), "{e}");
    }
}
