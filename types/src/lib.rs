//! # weir-types: what a record is
//!
//! Weir's answer to Flink's `TypeInformation`: a stream's records, an
//! operator's input and output, a source's schema have a [`Type`] — scalars,
//! strings, bytes, optionals, lists and nested records, or `json` for a
//! stream nobody typed — and typed records travel in a compact binary
//! **row format** that a reader reads in place: a field at a fixed offset,
//! no parse of the rest ([`row`]).
//!
//! The map of this crate, which the host (coordinator and workers) and the
//! Rust SDK share:
//!
//! - [`ty`]: [`Type`], its text syntax (`{id: u64, name: string?}`), and
//!   [`check_reads`], the rule a job's types are checked by when it is
//!   submitted (fields matched by name);
//! - [`row`]: the row format, [`row::Schema`] (a type compiled into its
//!   slot offsets), rows to and from JSON ([`row::json`]) and to
//!   MessagePack ([`row::msgpack`]);
//! - [`value`]: [`RowValue`], Rust values that are rows (the SDK derives it
//!   for structs).
//!
//! ```
//! use weir_types::{RowValue, Type, row::{Node, json}};
//! let ty: Type = "list<u32?>".parse().unwrap();
//! assert_eq!(<Vec<Option<u32>>>::row_type(), ty);
//! let mut row = Vec::new();
//! vec![Some(1u32), None].encode(&mut row);
//! let mut text = Vec::new();
//! json::write_value(&Node::of(&ty), &row, &mut text).unwrap();
//! assert_eq!(text, b"[1,null]");
//! ```

mod parse;
pub mod row;
pub mod ty;
pub mod value;

pub use parse::{MAX_DEPTH, ParseTypeError};
pub use ty::{Field, Mismatch, Record, Type, check_reads};
pub use value::{ListIter, ListView, RowValue, RowView};
