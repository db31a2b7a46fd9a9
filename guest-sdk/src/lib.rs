//! # Weir operator SDK
//!
//! Write the functions of a Weir streaming job in Rust; build them with
//! `cargo build --target wasm32-wasip2` (or `weir build`) into a WebAssembly
//! component that Weir's workers run in a sandbox.
//!
//! The map of this crate:
//!
//! - **Operators.** Plain functions become [`map`](crate::export_operators),
//!   [`flat_map`](crate::export_operators) and
//!   [`filter`](crate::export_operators) operators; a type implementing
//!   [`KeyedProcess`] is a stateful operator on a keyed stream, with keyed
//!   state and timers; a type implementing [`Process`] is a configurable
//!   stateless one. [`export_operators!`] registers them by name, the name a
//!   job's manifest uses.
//! - **Time and windows.** A `timestamps` function assigns event time;
//!   [`Aggregate`] and [`ProcessWindow`] types are window functions over the
//!   tumbling, sliding or session windows the manifest declares, with allowed
//!   lateness and a `late` side output ([`window`]).
//! - **Context.** [`Context`] emits outputs (main and side outputs), reads the
//!   current key, timestamp, watermark and processing time, and registers
//!   timers. [`OpenContext`] reads the job's parameters and declares state.
//! - **State.** [`ValueState`], [`ListState`] and [`MapState`] are typed
//!   handles on the state of the current key, (de)serialized with serde.
//! - **Records.** `#[derive(Row)]` makes a struct a typed record: it travels
//!   as a row, checked against its neighbours' types when the job is
//!   submitted, and its view (`BidView<'a>` for `Bid`, a [`RowView`]) reads a
//!   field in place, without decoding the record. Other serde types are
//!   untyped and cross the boundary as JSON or MessagePack ([`codec`]).
//! - **Testing.** [`testing::Harness`] runs an operator natively, under plain
//!   `cargo test`, with in-memory state and timers.
//!
//! ## Why it is fast
//!
//! The host hands an operator a batch of records (or of fired timers) per
//! call. The SDK decodes them, fetches the value state of all the batch's
//! keys in one host call,
//! serves every state access from a cache inside the guest, and hands back
//! outputs, state changes and timer changes in one call each when the batch
//! ends. A record costs no host call unless it reads list or map state that
//! is not cached yet.
//!
//! ## Example
//!
//! ```
//! use weir::{Context, KeyedProcess, OpenContext, ValueState};
//!
//! /// Splits a line into lowercase words.
//! fn split(line: String, out: &mut weir::Collector<String>) {
//!     for word in line.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()) {
//!         out.emit(word.to_lowercase());
//!     }
//! }
//!
//! /// Counts words per key.
//! struct Count {
//!     count: ValueState<u64>,
//! }
//!
//! impl KeyedProcess for Count {
//!     type In = String;
//!     type Out = (String, u64);
//!
//!     fn open(ctx: &mut OpenContext) -> weir::Result<Self> {
//!         Ok(Count { count: ctx.value_state("count")? })
//!     }
//!
//!     fn process(&mut self, word: String, ctx: &mut Context<Self::Out>) -> weir::Result<()> {
//!         let n = self.count.get()?.unwrap_or(0) + 1;
//!         self.count.set(n);
//!         ctx.emit(&(word, n));
//!         Ok(())
//!     }
//! }
//!
//! weir::export_operators! {
//!     flat_map "split-words" => split;
//!     keyed_process "count" => Count;
//! }
//! # fn main() {}
//! ```
//!
//! ## Views
//!
//! A `map`, `flat_map`, `filter` or `timestamps` function may take a typed
//! record's view instead of the record: each accessor reads its field where
//! it lies in the row (a number: one load; a string: a `&str` into the
//! row; a list: a [`ListView`]).
//!
//! ```
//! use serde::{Deserialize, Serialize};
//! use weir::{Row, RowView};
//!
//! #[derive(Debug, Clone, PartialEq, Deserialize, Serialize, Row)]
//! pub struct Bid {
//!     pub auction: u64,
//!     pub bidder: String,
//!     pub price: u64,
//!     pub tags: Vec<String>,
//! }
//!
//! #[derive(Debug, Clone, PartialEq, Deserialize, Serialize, Row)]
//! pub struct Flagged {
//!     pub auction: u64,
//!     pub bidder_len: u64,
//! }
//!
//! // Filters and timestamp assigners take `&BidView`, maps and flat maps `BidView`.
//! pub fn expensive(b: &BidView<'_>) -> bool {
//!     b.price() > 1_000 && b.tags().iter().any(|t| t == "rare")
//! }
//!
//! pub fn flag(b: BidView<'_>) -> Flagged {
//!     Flagged { auction: b.auction(), bidder_len: b.bidder().len() as u64 }
//! }
//!
//! weir::export_operators! {
//!     filter "expensive" => expensive;
//!     map "flag" => flag;
//! }
//!
//! fn main() {
//!     let bid = Bid { auction: 1, bidder: "ada".into(), price: 5_000, tags: vec!["rare".into()] };
//!     let mut h = weir::harness!("expensive").unwrap().rows().unwrap();
//!     assert_eq!(h.process::<_, _, Bid>(&(), &bid, None).unwrap(), [bid.clone()]);
//!     let mut h = weir::harness!("flag").unwrap().rows().unwrap();
//!     let out: Vec<Flagged> = h.process(&(), &bid, None).unwrap();
//!     assert_eq!(out, [Flagged { auction: 1, bidder_len: 3 }]);
//!     // A view decodes the whole record when asked to.
//!     let mut row = Vec::new();
//!     bid.encode(&mut row);
//!     assert_eq!(Bid::view(&row).unwrap().to_value().unwrap(), bid);
//! }
//! ```

// The derive's code names the SDK `::weir`, inside this crate too.
extern crate self as weir;

mod batch;
pub mod codec;
#[doc(hidden)]
pub mod coder;
mod component;
mod context;
mod driver;
mod host;
mod operator;
mod state;
pub mod testing;
pub mod window;

pub use context::{Collector, Context, OpenContext, SideOutput, TimeDomain};
pub use operator::{KeyedProcess, Process};
pub use state::{ListState, MapState, Ttl, ValueState};
pub use weir_derive::Row;
pub use weir_types::RowValue as Row;
pub use weir_types::Type;
pub use weir_types::{ListIter, ListView, RowView};
pub use window::{Aggregate, ProcessWindow, Window};

/// The error type of operator code: any error converts into it with `?`, and
/// a string makes one with `.into()`.
///
/// ```
/// fn parse(s: &str) -> weir::Result<u32> {
///     let n: u32 = s.parse()?;
///     if n == 0 {
///         return Err("zero is not allowed".into());
///     }
///     Ok(n)
/// }
/// assert!(parse("0").is_err());
/// assert_eq!(parse("7").unwrap(), 7);
/// ```
pub type Error = Box<dyn std::error::Error + Send + Sync + 'static>;

/// `Result` with [`Error`] as its default error.
///
/// ```
/// fn always() -> weir::Result<u8> {
///     Ok(1)
/// }
/// assert_eq!(always().unwrap(), 1);
/// ```
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Write a line to the task's log (visible in the worker's log, tagged with
/// the job, operator and subtask).
///
/// ```
/// weir::log(weir::LogLevel::Info, "starting");
/// ```
pub fn log(level: LogLevel, message: &str) {
    host::log(level, message);
}

/// Severity of a [`log`] line.
///
/// ```
/// let level = weir::LogLevel::Warn;
/// assert_ne!(level, weir::LogLevel::Error);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogLevel {
    /// Detail for debugging.
    Debug,
    /// Normal operation.
    Info,
    /// Something unexpected that the operator survives.
    Warn,
    /// A failure.
    Error,
}

/// Registers the component's operators by name, the names a job manifest's
/// `function` fields use. Each line is `kind "name" => item;` where `kind` is:
///
/// | kind | item | called |
/// | --- | --- | --- |
/// | `map` | `fn(In) -> Out` | once per record, one output |
/// | `flat_map` | `fn(In, &mut Collector<Out>)` | once per record, any outputs |
/// | `filter` | `fn(&In) -> bool` | keeps the records for which it is true |
/// | `process` | a type implementing [`Process`] | stateless, configurable |
/// | `keyed_process` | a type implementing [`KeyedProcess`] | on a keyed stream, with state and timers |
/// | `window_aggregate` | a type implementing [`Aggregate`] | per window of the manifest's `window`, incrementally |
/// | `window_process` | a type implementing [`ProcessWindow`] | per window, with all its records |
/// | `timestamps` | `fn(&In) -> i64` | a source's `timestamp-assigner`: the record's event time in ms |
///
/// `In` and `Out` are typed records (`#[derive(Row)]`, read and written as
/// rows) or any serde types (read and written in the stream's [`codec`]). A
/// `map`, `flat_map`, `filter` or `timestamps` function may take a typed
/// record's view (`InView<'_>`, see [Views](crate#views)) in place of `In`.
/// Use the macro once, at the root of the crate.
///
/// ```
/// #[derive(serde::Deserialize, serde::Serialize)]
/// struct Reading { sensor: String, celsius: f64 }
///
/// fn to_fahrenheit(r: Reading) -> Reading {
///     Reading { sensor: r.sensor, celsius: r.celsius * 9.0 / 5.0 + 32.0 }
/// }
///
/// fn warm(r: &Reading) -> bool {
///     r.celsius > 20.0
/// }
///
/// weir::export_operators! {
///     filter "warm" => warm;
///     map "to-fahrenheit" => to_fahrenheit;
/// }
/// # fn main() {}
/// ```
#[macro_export]
macro_rules! export_operators {
    ($($kind:ident $name:literal => $item:path;)+) => {
        #[doc(hidden)]
        pub struct __WeirRegistry;

        impl $crate::__private::Registry for __WeirRegistry {
            fn operators() -> ::std::vec::Vec<$crate::__private::OperatorEntry> {
                ::std::vec![$($crate::__weir_entry!($kind $name => $item)),+]
            }
        }

        #[doc(hidden)]
        pub type __WeirComponent = $crate::__private::Component<__WeirRegistry>;

        // Exports exist only in the component; natively (unit tests with
        // `weir::testing`) the operators are reached through the registry.
        #[cfg(target_family = "wasm")]
        $crate::__private::export_component!(__WeirComponent with_types_in $crate::__private::bindings);
    };
}

/// A [`testing::Harness`] for the operator this crate's
/// [`export_operators!`] registered as `name` (with job parameters, as
/// `&[("name", "value")]`): the coders the component uses, so that
/// [`testing::Harness::rows`] runs a typed operator on rows as a job does.
///
/// ```
/// fn len(s: String) -> u64 { s.len() as u64 }
/// weir::export_operators! { map "len" => len; }
///
/// fn main() {
///     let mut h = weir::harness!("len").unwrap().rows().unwrap();
///     assert_eq!(h.process::<_, _, u64>(&(), "abc", None).unwrap(), [3]);
///     assert!(weir::harness!("nope").is_err());
/// }
/// ```
#[macro_export]
#[expect(
    clippy::crate_in_macro_def,
    reason = "the registry is the one `export_operators!` defined in the calling crate"
)]
macro_rules! harness {
    ($name:expr) => {
        $crate::testing::Harness::exported::<crate::__WeirRegistry>($name, &[])
    };
    ($name:expr, $params:expr) => {
        $crate::testing::Harness::exported::<crate::__WeirRegistry>($name, $params)
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __weir_entry {
    // Each type's coder is picked here, where the types are known: rows
    // for a typed one (`weir::Row`), serde for any other (crate::coder).
    (map $name:literal => $item:path) => {{
        #[allow(unused_imports)]
        use $crate::__private::coder::{ViaRows as _, ViaViews as _, ViaSerdeDecode as _, ViaSerdeEncode as _};
        let (i, o) = $crate::__private::coder::probe_map($item);
        $crate::__private::OperatorEntry::map($name, $item, (&i).decoder(), (&o).encoder())
    }};
    (flat_map $name:literal => $item:path) => {{
        #[allow(unused_imports)]
        use $crate::__private::coder::{ViaRows as _, ViaViews as _, ViaSerdeDecode as _, ViaSerdeEncode as _};
        let (i, o) = $crate::__private::coder::probe_flat_map($item);
        $crate::__private::OperatorEntry::flat_map($name, $item, (&i).decoder(), (&o).encoder())
    }};
    (filter $name:literal => $item:path) => {{
        #[allow(unused_imports)]
        use $crate::__private::coder::{ViaRows as _, ViaViews as _, ViaSerdeDecode as _};
        let i = $crate::__private::coder::probe_ref($item);
        $crate::__private::OperatorEntry::filter($name, $item, (&i).decoder())
    }};
    (timestamps $name:literal => $item:path) => {{
        #[allow(unused_imports)]
        use $crate::__private::coder::{ViaRows as _, ViaViews as _, ViaSerdeDecode as _};
        let i = $crate::__private::coder::probe_ref($item);
        $crate::__private::OperatorEntry::timestamps($name, $item, (&i).decoder())
    }};
    (process $name:literal => $item:path) => {
        $crate::__weir_entry!(@typed process, $crate::Process, $name, $item)
    };
    (keyed_process $name:literal => $item:path) => {
        $crate::__weir_entry!(@typed keyed_process, $crate::KeyedProcess, $name, $item)
    };
    (window_aggregate $name:literal => $item:path) => {
        $crate::__weir_entry!(@typed window_aggregate, $crate::Aggregate, $name, $item)
    };
    (window_process $name:literal => $item:path) => {
        $crate::__weir_entry!(@typed window_process, $crate::ProcessWindow, $name, $item)
    };
    (@typed $ctor:ident, $trait:path, $name:literal, $item:path) => {{
        #[allow(unused_imports)]
        use $crate::__private::coder::{ViaRows as _, ViaSerdeDecode as _, ViaSerdeEncode as _};
        let i = $crate::__private::coder::Probe::<<$item as $trait>::In>::new();
        let o = $crate::__private::coder::Probe::<<$item as $trait>::Out>::new();
        $crate::__private::OperatorEntry::$ctor::<$item, _, _>($name, (&i).decoder(), (&o).encoder())
    }};
    ($other:ident $name:literal => $item:path) => {
        ::std::compile_error!(::std::concat!(
            "unknown operator kind `",
            ::std::stringify!($other),
            "`: expected map, flat_map, filter, process, keyed_process, window_aggregate, window_process or timestamps"
        ))
    };
}

/// Not part of the public API: used by [`export_operators!`].
#[doc(hidden)]
pub mod __private {
    pub use crate::coder;
    pub use crate::component::{Component, Registry};
    pub use crate::driver::OperatorEntry;
    pub use weir_types as types;

    pub mod bindings {
        wit_bindgen::generate!({
            path: "../wit",
            world: "operator-component",
            pub_export_macro: true,
            export_macro_name: "export_component",
            default_bindings_module: "weir::__private::bindings",
            generate_all,
        });
    }
    pub use bindings::export_component;
}
