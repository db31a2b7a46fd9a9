//! Run operators natively, under plain `cargo test`, with in-memory keyed
//! state and timers: the same SDK code paths as inside Wasm, with an
//! in-memory host answering the reads and taking the effects.
//!
//! ```
//! fn double(n: i64) -> i64 {
//!     n * 2
//! }
//! let mut h = weir::testing::Harness::map(double);
//! let out: Vec<i64> = h.process(&(), &21, None).unwrap();
//! assert_eq!(out, [42]);
//! ```

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::rc::Rc;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::__private::bindings::weir::operator::types::{
    BatchContext, OperatorKind, Packed, SlidingWindow, StateKey, StateKind, StateOp, StateTtl,
    TimeDomain as WitDomain, Timer, TimerOp, Window as WitWindow, WindowAssigner, WindowSpec,
};
use crate::batch::OutBatch;
use crate::codec::wire;
use crate::coder::Serde;
use crate::driver::{Effects, Instance, OperatorEntry};
use crate::host::{self, HostApi};
use crate::{Collector, KeyedProcess, LogLevel, Process, TimeDomain};
use weir_types::row::Node;

type Addr = (u32, Vec<u8>);

#[derive(Default)]
struct Store {
    declared: Vec<(String, StateKind)>,
    /// The states declared with a time-to-live: their values are kept
    /// stamped with their expiry time (8 bytes, big-endian), as the
    /// runtime keeps them.
    ttls: HashMap<u32, StateTtl>,
    /// Processing time, as the harness advanced it.
    now: i64,
    values: HashMap<Addr, Vec<u8>>,
    lists: HashMap<Addr, Vec<Vec<u8>>>,
    maps: HashMap<Addr, BTreeMap<Vec<u8>, Vec<u8>>>,
    /// (time, domain, key)
    timers: BTreeSet<(i64, bool, Vec<u8>)>,
}

impl Store {
    /// `value` as stored for state `state`: stamped if it has a
    /// time-to-live.
    fn stored(&self, state: u32, value: Vec<u8>) -> Vec<u8> {
        match self.ttls.get(&state) {
            None => value,
            Some(ttl) => {
                let at = self
                    .now
                    .saturating_add(ttl.ttl_ms.min(i64::MAX as u64) as i64);
                let mut out = at.to_be_bytes().to_vec();
                out.extend_from_slice(&value);
                out
            }
        }
    }

    /// A list of `state` replaced by `values`, as stored: an element the
    /// stored list holds, alive, keeps its expiry time (as the runtime
    /// keeps it); the others are stamped now (all, when reads renew).
    fn restamped(&self, state: u32, addr: &Addr, values: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
        let Some(ttl) = self.ttls.get(&state) else {
            return values;
        };
        let mut kept: HashMap<&[u8], std::collections::VecDeque<&Vec<u8>>> = HashMap::new();
        if !ttl.refresh_on_read {
            for old in self.lists.get(addr).into_iter().flatten() {
                let alive = old
                    .get(..8)
                    .is_some_and(|at| i64::from_be_bytes(at.try_into().unwrap()) > self.now);
                if alive {
                    kept.entry(&old[8..]).or_default().push_back(old);
                }
            }
        }
        let out: Vec<Option<Vec<u8>>> = values
            .iter()
            .map(|v| {
                kept.get_mut(v.as_slice())
                    .and_then(std::collections::VecDeque::pop_front)
                    .cloned()
            })
            .collect();
        out.into_iter()
            .zip(values)
            .map(|(old, v)| old.unwrap_or_else(|| self.stored(state, v)))
            .collect()
    }

    /// A stored value of `state` as read: `None` once expired; renewed in
    /// `renew` when reads renew it.
    fn read<'a>(&self, state: u32, stored: &'a mut Vec<u8>) -> Option<&'a [u8]> {
        let Some(ttl) = self.ttls.get(&state) else {
            return Some(stored.as_slice());
        };
        let at = i64::from_be_bytes(stored.get(..8)?.try_into().ok()?);
        if at <= self.now {
            return None;
        }
        if ttl.refresh_on_read {
            let renewed = self
                .now
                .saturating_add(ttl.ttl_ms.min(i64::MAX as u64) as i64);
            stored[..8].copy_from_slice(&renewed.to_be_bytes());
        }
        Some(&stored[8..])
    }
}

struct MemoryHost(Rc<RefCell<Store>>);

fn entry(k: &StateKey) -> Addr {
    (k.state, k.key.clone())
}

impl HostApi for MemoryHost {
    fn declare_state(&mut self, name: &str, kind: StateKind) -> Result<u32, String> {
        let mut s = self.0.borrow_mut();
        if let Some(i) = s.declared.iter().position(|(n, _)| n == name) {
            return if s.declared[i].1 == kind {
                Ok(i as u32)
            } else {
                Err(format!(
                    "state `{name}` is already declared with another kind"
                ))
            };
        }
        s.declared.push((name.to_owned(), kind));
        Ok(s.declared.len() as u32 - 1)
    }
    fn declare_state_ttl(
        &mut self,
        name: &str,
        kind: StateKind,
        ttl: StateTtl,
    ) -> Result<u32, String> {
        if ttl.ttl_ms == 0 {
            return Err(format!(
                "state `{name}`: a time-to-live of 0 ms keeps nothing (give at least 1 ms)"
            ));
        }
        let id = self.declare_state(name, kind)?;
        self.0.borrow_mut().ttls.insert(id, ttl);
        Ok(id)
    }
    fn declare_typed_state(
        &mut self,
        name: &str,
        kind: StateKind,
        ttl: Option<StateTtl>,
        value_type: &str,
    ) -> Result<u32, String> {
        value_type
            .parse::<weir_types::Type>()
            .map_err(|e| format!("state `{name}`: the type `{value_type}` does not parse: {e}"))?;
        match ttl {
            Some(ttl) => self.declare_state_ttl(name, kind, ttl),
            None => self.declare_state(name, kind),
        }
    }
    fn get_values(&mut self, states: &[u32], keys: &[&[u8]]) -> (Packed, Vec<bool>) {
        let mut s = self.0.borrow_mut();
        let mut answers: Vec<Option<Vec<u8>>> = Vec::new();
        for k in keys {
            for &state in states {
                let addr = (state, k.to_vec());
                let mut stored = s.values.get(&addr).cloned();
                let value = stored
                    .as_mut()
                    .and_then(|v| s.read(state, v).map(<[u8]>::to_vec));
                if let (Some(v), Some(_)) = (stored, &value) {
                    s.values.insert(addr, v);
                }
                answers.push(value);
            }
        }
        let present = answers.iter().map(Option::is_some).collect();
        let values = crate::host::pack(answers.iter().map(|a| a.as_deref().unwrap_or_default()));
        (values, present)
    }
    fn get_list(&mut self, key: &StateKey) -> Vec<Vec<u8>> {
        let mut s = self.0.borrow_mut();
        let Some(mut stored) = s.lists.get(&entry(key)).cloned() else {
            return Vec::new();
        };
        let values = stored
            .iter_mut()
            .filter_map(|v| s.read(key.state, v).map(<[u8]>::to_vec))
            .collect();
        s.lists.insert(entry(key), stored);
        values
    }
    fn get_entry(&mut self, key: &StateKey, map_key: &[u8]) -> Option<Vec<u8>> {
        let mut s = self.0.borrow_mut();
        let mut stored = s.maps.get(&entry(key))?.get(map_key).cloned()?;
        let value = s.read(key.state, &mut stored)?.to_vec();
        s.maps
            .entry(entry(key))
            .or_default()
            .insert(map_key.to_vec(), stored);
        Some(value)
    }
    fn get_entries(&mut self, key: &StateKey) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut s = self.0.borrow_mut();
        let Some(mut stored) = s.maps.get(&entry(key)).cloned() else {
            return Vec::new();
        };
        let entries = stored
            .iter_mut()
            .filter_map(|(k, v)| Some((k.clone(), s.read(key.state, v)?.to_vec())))
            .collect();
        s.maps.insert(entry(key), stored);
        entries
    }
    fn log(&mut self, level: LogLevel, message: &str) {
        eprintln!("[{level:?}] {message}");
    }
}

/// A window function's open windows and timers in the harness.
struct Windows {
    spec: weir_window::Spec,
    store: weir_window::MemoryStore,
}

/// A window as the manifest would give it, from the harness's parameters
/// (`weir.window.kind` = `tumbling` | `sliding` | `session`,
/// `weir.window.size-ms`, `weir.window.slide-ms`, `weir.window.gap-ms`,
/// `weir.window.time` = `event` | `processing`,
/// `weir.window.allowed-lateness-ms`); `None` without a kind.
fn window_spec(params: &[(&str, &str)]) -> crate::Result<Option<(WindowSpec, weir_window::Spec)>> {
    let get = |k: &str| {
        params
            .iter()
            .find(|(name, _)| name.strip_prefix("weir.window.") == Some(k))
            .map(|(_, v)| *v)
    };
    let number = |k: &str| -> crate::Result<i64> {
        let raw = get(k).ok_or_else(|| format!("the window has no `{k}`"))?;
        raw.parse()
            .map_err(|_| format!("window {k} = {raw:?} is not a whole number").into())
    };
    let (wit, assigner) = match get("kind") {
        None => return Ok(None),
        Some("tumbling") => {
            let size = number("size-ms")?;
            (
                WindowAssigner::Tumbling(size),
                weir_window::Assigner::Tumbling { size },
            )
        }
        Some("sliding") => {
            let (size, slide) = (number("size-ms")?, number("slide-ms")?);
            (
                WindowAssigner::Sliding(SlidingWindow {
                    size_ms: size,
                    slide_ms: slide,
                }),
                weir_window::Assigner::Sliding { size, slide },
            )
        }
        Some("session") => {
            let gap = number("gap-ms")?;
            (
                WindowAssigner::Session(gap),
                weir_window::Assigner::Session { gap },
            )
        }
        Some(other) => return Err(format!("unknown window kind {other:?}").into()),
    };
    let (domain, time) = match get("time") {
        None | Some("event") => (WitDomain::EventTime, weir_window::Time::Event),
        Some("processing") => (WitDomain::ProcessingTime, weir_window::Time::Processing),
        Some(other) => return Err(format!("unknown window time {other:?}").into()),
    };
    let lateness = match get("allowed-lateness-ms") {
        None => 0,
        Some(_) => number("allowed-lateness-ms")?,
    };
    let spec =
        weir_window::Spec::new(assigner, time, lateness, weir_window::Contents::Accumulator)?;
    Ok(Some((
        WindowSpec {
            assigner: wit,
            domain,
            allowed_lateness_ms: lateness,
        },
        spec,
    )))
}

/// Runs one operator natively with in-memory state and timers.
///
/// ```
/// fn even(n: &u32) -> bool {
///     n % 2 == 0
/// }
/// let mut h = weir::testing::Harness::filter(even);
/// assert_eq!(h.process::<_, _, u32>(&(), &3, None).unwrap(), Vec::<u32>::new());
/// assert_eq!(h.process::<_, _, u32>(&(), &4, None).unwrap(), [4]);
/// ```
pub struct Harness {
    instance: Instance,
    store: Rc<RefCell<Store>>,
    keyed: bool,
    /// A window function's windows, run as the runtime runs them.
    window: Option<Windows>,
    watermark: Option<i64>,
    processing_time: i64,
    side: Vec<(String, Vec<Vec<u8>>)>,
    timestamps: Vec<Option<i64>>,
    /// Whether it writes what it reads (a filter, a timestamp assigner).
    passes_through: bool,
    /// The operator's codecs: how the harness encodes what it hands over
    /// and decodes what it gets back.
    codecs: wire::Codecs,
    /// The types the operator declares, compiled: what rows it reads and
    /// writes ([`Harness::rows`]).
    input_type: Option<Node>,
    output_type: Option<Node>,
}

impl Harness {
    /// Run the operator as a job runs its components by default: its input,
    /// its main output and its state in MessagePack (side outputs stay JSON,
    /// as a side output read by a sink is). Records, keys and results are
    /// the same values either way; this checks that the operator's types
    /// say so.
    ///
    /// ```
    /// fn twice(n: i64) -> i64 { 2 * n }
    /// let mut h = weir::testing::Harness::map(twice).msgpack();
    /// assert_eq!(h.process::<_, _, i64>(&(), &21, None).unwrap(), [42]);
    /// ```
    pub fn msgpack(mut self) -> Harness {
        self.codecs = wire::Codecs {
            input: wire::Codec::Msgpack,
            output: wire::Codec::Msgpack,
            side_outputs: Vec::new(),
            state: wire::Codec::Msgpack,
        };
        self.instance.set_codecs(self.codecs.clone());
        self
    }

    /// Run the operator as a job runs it between typed operators: what it
    /// reads and writes of its declared types as rows (records of the
    /// types it does not declare, and its state, as MessagePack). Inputs
    /// are given and outputs returned as serde values, converted at the
    /// harness's edge through the declared types, as the host converts a
    /// JSON-lines source's lines and writes a sink's.
    ///
    /// ```
    /// #[derive(serde::Serialize, serde::Deserialize, weir::Row, Debug, PartialEq)]
    /// struct Reading { sensor: String, celsius: f64 }
    ///
    /// fn warm(r: &Reading) -> bool { r.celsius > 20.0 }
    ///
    /// weir::export_operators! { filter "warm" => warm; }
    ///
    /// fn main() {
    ///     let mut h = weir::harness!("warm").unwrap().rows().unwrap();
    ///     let r = Reading { sensor: "a".into(), celsius: 21.5 };
    ///     let out: Vec<Reading> = h.process(&(), &r, None).unwrap();
    ///     assert_eq!(out, [r]);
    ///     let cold = Reading { sensor: "b".into(), celsius: 3.0 };
    ///     assert!(h.process::<_, _, Reading>(&(), &cold, None).unwrap().is_empty());
    /// }
    /// ```
    pub fn rows(mut self) -> crate::Result<Harness> {
        if self.input_type.is_none() {
            return Err(
                "this operator declares no input type (its input is not a weir::Row type): it never reads rows".into(),
            );
        }
        let typed = |node: &Option<Node>| {
            if node.is_some() {
                wire::Codec::Row
            } else {
                wire::Codec::Msgpack
            }
        };
        // What passes its input on (a filter, a timestamp assigner) writes
        // rows when it reads them.
        let output = match self.output_type {
            None if self.passes_through => {
                self.output_type.clone_from(&self.input_type);
                wire::Codec::Row
            }
            _ => typed(&self.output_type),
        };
        self.codecs = wire::Codecs {
            input: wire::Codec::Row,
            output,
            side_outputs: Vec::new(),
            state: wire::Codec::Msgpack,
        };
        self.instance.set_codecs(self.codecs.clone());
        Ok(self)
    }

    /// A harness for the operator a component's `export_operators!`
    /// registered as `name` (see [`crate::harness!`]): its coders are the
    /// component's, so a typed operator reads and writes rows under
    /// [`Harness::rows`].
    #[doc(hidden)]
    pub fn exported<R: crate::__private::Registry>(
        name: &str,
        params: &[(&str, &str)],
    ) -> crate::Result<Harness> {
        let entries = R::operators();
        let known: Vec<&str> = entries.iter().map(|e| e.name).collect();
        let entry = entries
            .into_iter()
            .find(|e| e.name == name)
            .ok_or_else(|| {
                format!(
                    "no operator named `{name}` in this component (it has: {})",
                    known.join(", ")
                )
            })?;
        Self::new(entry, params)
    }

    fn new(entry: OperatorEntry, params: &[(&str, &str)]) -> crate::Result<Harness> {
        let store = Rc::new(RefCell::new(Store::default()));
        let input_type = entry.input_type.as_ref().map(Node::of);
        let output_type = entry.output_type.as_ref().map(Node::of);
        let passes_through = matches!(
            entry.kind,
            OperatorKind::Filter | OperatorKind::TimestampAssigner
        );
        host::install(Box::new(MemoryHost(store.clone())));
        let contents = match entry.kind {
            OperatorKind::Window => Some(weir_window::Contents::Accumulator),
            OperatorKind::WindowProcess => Some(weir_window::Contents::Records),
            _ => None,
        };
        let keyed = matches!(entry.kind, OperatorKind::KeyedProcess) || contents.is_some();
        let name = entry.name;
        let (wit_spec, window) = match contents {
            Some(contents) => match window_spec(params)? {
                Some((wit, spec)) => (
                    Some(wit),
                    Some(Windows {
                        spec: weir_window::Spec::new(
                            spec.assigner,
                            spec.time,
                            spec.lateness,
                            contents,
                        )?,
                        store: weir_window::MemoryStore::default(),
                    }),
                ),
                None => (None, None),
            },
            None => (None, None),
        };
        let config = params
            .iter()
            .filter(|(k, _)| !k.starts_with("weir.window."))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let instance =
            Instance::create(vec![entry], name, config, wit_spec, wire::Codecs::default())?;
        Ok(Harness {
            instance,
            store,
            keyed,
            window,
            watermark: None,
            processing_time: 0,
            side: Vec::new(),
            timestamps: Vec::new(),
            codecs: wire::Codecs::default(),
            input_type,
            output_type,
            passes_through,
        })
    }

    /// `value` as the operator reads it: in its input codec (a row of its
    /// declared type under [`Harness::rows`]).
    fn encode_input<T: Serialize + ?Sized>(&self, value: &T) -> crate::Result<Vec<u8>> {
        match (self.codecs.input, &self.input_type) {
            (wire::Codec::Row, Some(node)) => {
                let mut row = Vec::new();
                weir_types::row::json::read_value(node, &crate::codec::encode(value), &mut row)
                    .map_err(|e| format!("the input does not fit the operator's type: {e}"))?;
                Ok(row)
            }
            (codec, _) => Ok(wire::encode(codec, value)),
        }
    }

    /// A record the operator wrote in `codec` (a row of `node`'s type).
    fn decode_output<O: DeserializeOwned>(
        codec: wire::Codec,
        node: Option<&Node>,
        bytes: &[u8],
    ) -> crate::Result<O> {
        match (codec, node) {
            (wire::Codec::Row, Some(node)) => {
                let mut json = Vec::new();
                weir_types::row::json::write_value(node, bytes, &mut json)
                    .map_err(|e| format!("the operator wrote a malformed row: {e}"))?;
                crate::codec::decode(&json)
            }
            (codec, _) => wire::decode(codec, bytes),
        }
    }

    /// A harness for a `map` function.
    ///
    /// # Example
    ///
    /// ```
    /// fn len(s: String) -> usize { s.len() }
    /// let mut h = weir::testing::Harness::map(len);
    /// assert_eq!(h.process::<_, _, usize>(&(), "abc", None).unwrap(), [3]);
    /// ```
    pub fn map<I: DeserializeOwned + 'static, O: Serialize + 'static>(f: fn(I) -> O) -> Harness {
        Self::new(
            OperatorEntry::map("map", f, Serde::new(), Serde::new()),
            &[],
        )
        .expect("a function always opens")
    }

    /// A harness for a `flat_map` function.
    ///
    /// # Example
    ///
    /// ```
    /// fn twice(n: i32, out: &mut weir::Collector<i32>) { out.emit(n); out.emit(n); }
    /// let mut h = weir::testing::Harness::flat_map(twice);
    /// assert_eq!(h.process::<_, _, i32>(&(), &7, None).unwrap(), [7, 7]);
    /// ```
    pub fn flat_map<I: DeserializeOwned + 'static, O: Serialize + 'static>(
        f: fn(I, &mut Collector<O>),
    ) -> Harness {
        Self::new(
            OperatorEntry::flat_map("flat-map", f, Serde::new(), Serde::new()),
            &[],
        )
        .expect("a function always opens")
    }

    /// A harness for a `filter` predicate.
    ///
    /// # Example
    ///
    /// ```
    /// fn short(s: &String) -> bool { s.len() < 3 }
    /// let mut h = weir::testing::Harness::filter(short);
    /// assert_eq!(h.process::<_, _, String>(&(), "ab", None).unwrap(), ["ab"]);
    /// assert!(h.process::<_, _, String>(&(), "abc", None).unwrap().is_empty());
    /// ```
    pub fn filter<I: DeserializeOwned + 'static>(f: fn(&I) -> bool) -> Harness {
        Self::new(OperatorEntry::filter("filter", f, Serde::new()), &[])
            .expect("a function always opens")
    }

    /// A harness for a [`Process`] type, opened with `params`.
    ///
    /// # Example
    ///
    /// ```
    /// # use weir::*;
    /// struct Scale { by: i64 }
    /// impl Process for Scale {
    ///     type In = i64;
    ///     type Out = i64;
    ///     fn open(ctx: &mut OpenContext) -> weir::Result<Self> { Ok(Scale { by: ctx.param_or("by", 1)? }) }
    ///     fn process(&mut self, n: i64, ctx: &mut Context<i64>) -> weir::Result<()> { ctx.emit(n * self.by); Ok(()) }
    /// }
    /// let mut h = weir::testing::Harness::process_operator::<Scale>(&[("by", "3")]).unwrap();
    /// assert_eq!(h.process::<_, _, i64>(&(), &2, None).unwrap(), [6]);
    /// ```
    pub fn process_operator<P: Process>(params: &[(&str, &str)]) -> crate::Result<Harness>
    where
        P::In: DeserializeOwned,
        P::Out: Serialize,
    {
        Self::new(
            OperatorEntry::process::<P, _, _>("process", Serde::new(), Serde::new()),
            params,
        )
    }

    /// A harness for a [`KeyedProcess`] type, opened with `params`.
    ///
    /// # Example
    ///
    /// ```
    /// # use weir::*;
    /// struct Count { n: ValueState<u64> }
    /// impl KeyedProcess for Count {
    ///     type In = serde_json::Value;
    ///     type Out = u64;
    ///     fn open(ctx: &mut OpenContext) -> weir::Result<Self> { Ok(Count { n: ctx.value_state("n")? }) }
    ///     fn process(&mut self, _: serde_json::Value, ctx: &mut Context<u64>) -> weir::Result<()> {
    ///         let n = self.n.get()?.unwrap_or(0) + 1;
    ///         self.n.set(n);
    ///         ctx.emit(n);
    ///         ctx.register_timer(TimeDomain::ProcessingTime, 1_000);
    ///         Ok(())
    ///     }
    ///     fn on_timer(&mut self, t: i64, _: TimeDomain, ctx: &mut Context<u64>) -> weir::Result<()> { ctx.emit(t as u64); Ok(()) }
    /// }
    /// let mut h = weir::testing::Harness::keyed_process::<Count>(&[]).unwrap();
    /// h.process::<_, _, u64>("a", &serde_json::json!({}), None).unwrap();
    /// assert_eq!(h.process::<_, _, u64>("a", &serde_json::json!({}), None).unwrap(), [2]);
    /// ```
    pub fn keyed_process<P: KeyedProcess>(params: &[(&str, &str)]) -> crate::Result<Harness>
    where
        P::In: DeserializeOwned,
        P::Out: Serialize,
    {
        Self::new(
            OperatorEntry::keyed_process::<P, _, _>("keyed-process", Serde::new(), Serde::new()),
            params,
        )
    }

    /// A harness for an [`crate::Aggregate`] window function, opened with
    /// `params`, which give the window as the manifest would
    /// (`weir.window.kind` = `tumbling` | `sliding` | `session`,
    /// `weir.window.size-ms`, `weir.window.slide-ms`, `weir.window.gap-ms`,
    /// `weir.window.time`, `weir.window.allowed-lateness-ms`).
    ///
    /// # Example
    ///
    /// ```
    /// # use weir::*;
    /// struct Sum;
    /// impl Aggregate for Sum {
    ///     type In = i64; type Acc = i64; type Out = i64;
    ///     fn open(_: &mut OpenContext) -> weir::Result<Self> { Ok(Sum) }
    ///     fn create(&self) -> i64 { 0 }
    ///     fn add(&self, acc: &mut i64, n: &i64) { *acc += n }
    ///     fn merge(&self, acc: &mut i64, other: i64) { *acc += other }
    ///     fn result(&self, _: &Window, acc: i64) -> weir::Result<i64> { Ok(acc) }
    /// }
    /// let mut h = weir::testing::Harness::window_aggregate::<Sum>(&[
    ///     ("weir.window.kind", "session"), ("weir.window.gap-ms", "10"),
    /// ]).unwrap();
    /// h.process::<_, _, i64>("k", &1, Some(0)).unwrap(); // [0, 10)
    /// h.process::<_, _, i64>("k", &2, Some(12)).unwrap(); // [12, 22)
    /// h.process::<_, _, i64>("k", &4, Some(6)).unwrap(); // [6, 16): joins both
    /// assert_eq!(h.advance_watermark::<i64>(100).unwrap(), [7]);
    /// ```
    pub fn window_aggregate<A: crate::Aggregate>(params: &[(&str, &str)]) -> crate::Result<Harness>
    where
        A::In: DeserializeOwned,
        A::Out: Serialize,
    {
        Self::new(
            OperatorEntry::window_aggregate::<A, _, _>("window", Serde::new(), Serde::new()),
            params,
        )
    }

    /// A harness for a [`crate::ProcessWindow`] window function, opened with
    /// `params` (see [`Harness::window_aggregate`]).
    ///
    /// # Example
    ///
    /// ```
    /// # use weir::*;
    /// struct All;
    /// impl ProcessWindow for All {
    ///     type In = i64; type Out = Vec<i64>;
    ///     fn open(_: &mut OpenContext) -> weir::Result<Self> { Ok(All) }
    ///     fn process(&mut self, _: &Window, v: Vec<i64>, out: &mut Collector<Vec<i64>>) -> weir::Result<()> { out.emit(v); Ok(()) }
    /// }
    /// let mut h = weir::testing::Harness::window_process::<All>(&[
    ///     ("weir.window.kind", "tumbling"), ("weir.window.size-ms", "10"),
    /// ]).unwrap();
    /// h.process::<_, _, Vec<i64>>("k", &1, Some(3)).unwrap();
    /// h.process::<_, _, Vec<i64>>("k", &2, Some(4)).unwrap();
    /// assert_eq!(h.advance_watermark::<Vec<i64>>(9).unwrap(), [vec![1, 2]]);
    /// ```
    pub fn window_process<P: crate::ProcessWindow>(
        params: &[(&str, &str)],
    ) -> crate::Result<Harness>
    where
        P::In: DeserializeOwned,
        P::Out: Serialize,
    {
        Self::new(
            OperatorEntry::window_process::<P, _, _>("window", Serde::new(), Serde::new()),
            params,
        )
    }

    /// A harness for a timestamp assigner: its outputs are the inputs, with
    /// [`Harness::timestamps`] telling their new timestamps.
    ///
    /// # Example
    ///
    /// ```
    /// fn ts(r: &serde_json::Value) -> i64 { r["at"].as_i64().unwrap_or(0) }
    /// let mut h = weir::testing::Harness::timestamps(ts);
    /// let out: Vec<serde_json::Value> = h.process(&(), &serde_json::json!({"at": 42}), None).unwrap();
    /// assert_eq!(out.len(), 1);
    /// assert_eq!(h.last_timestamps(), [Some(42)]);
    /// ```
    pub fn timestamps<I: DeserializeOwned + 'static>(f: fn(&I) -> i64) -> Harness {
        Self::new(
            OperatorEntry::timestamps("timestamps", f, Serde::new()),
            &[],
        )
        .expect("a function always opens")
    }

    fn context(&self) -> BatchContext {
        BatchContext {
            watermark: self.watermark,
            processing_time: self.processing_time,
        }
    }

    fn apply<O: DeserializeOwned>(&mut self, effects: Effects) -> crate::Result<Vec<O>> {
        let mut s = self.store.borrow_mut();
        for p in &effects.state.puts {
            let keys = crate::host::unpacked(&p.keys)?;
            let values = crate::host::unpacked(&p.values)?;
            if keys.len() != values.len() {
                return Err(format!("{} keys for {} values", keys.len(), values.len()).into());
            }
            for (key, value) in keys.into_iter().zip(values) {
                let target = StateKey {
                    state: p.state,
                    key: key.to_vec(),
                };
                let value = s.stored(p.state, value.to_vec());
                s.values.insert(entry(&target), value);
            }
        }
        for op in effects.state.ops {
            match op {
                StateOp::PutValue(p) => {
                    let value = s.stored(p.target.state, p.value);
                    s.values.insert(entry(&p.target), value);
                }
                StateOp::ReplaceList(l) => {
                    let addr = entry(&l.target);
                    let values = s.restamped(l.target.state, &addr, l.values);
                    s.lists.insert(addr, values);
                }
                StateOp::AppendList(l) => {
                    let values: Vec<_> = l
                        .values
                        .into_iter()
                        .map(|v| s.stored(l.target.state, v))
                        .collect();
                    s.lists.entry(entry(&l.target)).or_default().extend(values)
                }
                StateOp::PutEntry(p) => {
                    let value = s.stored(p.target.state, p.value);
                    s.maps
                        .entry(entry(&p.target))
                        .or_default()
                        .insert(p.map_key, value);
                }
                StateOp::RemoveEntry(r) => {
                    if let Some(m) = s.maps.get_mut(&entry(&r.target)) {
                        m.remove(&r.map_key);
                    }
                }
                StateOp::Clear(k) => {
                    let e = entry(&k);
                    s.values.remove(&e);
                    s.lists.remove(&e);
                    s.maps.remove(&e);
                }
            }
        }
        for op in effects.timer_ops {
            let (register, t) = match op {
                TimerOp::Register(t) => (true, t),
                TimerOp::Delete(t) => (false, t),
            };
            let item = (t.time, matches!(t.domain, WitDomain::EventTime), t.key);
            if register {
                s.timers.insert(item);
            } else {
                s.timers.remove(&item);
            }
        }
        for (name, records) in effects.side {
            let values = records.values();
            match self.side.iter_mut().find(|(n, _)| *n == name) {
                Some((_, all)) => all.extend(values),
                None => self.side.push((name, values)),
            }
        }
        self.timestamps = effects.outputs.timestamps();
        effects
            .outputs
            .values()
            .iter()
            .map(|v| Self::decode_output(self.codecs.output, self.output_type.as_ref(), v))
            .collect()
    }

    /// The timestamps of the main outputs of the last call, in order.
    ///
    /// # Example
    ///
    /// ```
    /// fn same(n: i64) -> i64 { n }
    /// let mut h = weir::testing::Harness::map(same);
    /// h.process::<_, _, i64>(&(), &1, Some(5)).unwrap();
    /// assert_eq!(h.last_timestamps(), [Some(5)]);
    /// ```
    pub fn last_timestamps(&self) -> &[Option<i64>] {
        &self.timestamps
    }

    /// Process one record (with `key` on a keyed operator; ignored otherwise)
    /// and return its main outputs.
    ///
    /// # Example
    ///
    /// ```
    /// # use weir::*;
    /// struct Count { n: ValueState<u64> }
    /// impl KeyedProcess for Count {
    ///     type In = serde_json::Value;
    ///     type Out = u64;
    ///     fn open(ctx: &mut OpenContext) -> weir::Result<Self> { Ok(Count { n: ctx.value_state("n")? }) }
    ///     fn process(&mut self, _: serde_json::Value, ctx: &mut Context<u64>) -> weir::Result<()> {
    ///         let n = self.n.get()?.unwrap_or(0) + 1;
    ///         self.n.set(n);
    ///         ctx.emit(n);
    ///         ctx.register_timer(TimeDomain::ProcessingTime, 1_000);
    ///         Ok(())
    ///     }
    ///     fn on_timer(&mut self, t: i64, _: TimeDomain, ctx: &mut Context<u64>) -> weir::Result<()> { ctx.emit(t as u64); Ok(()) }
    /// }
    /// let mut h = weir::testing::Harness::keyed_process::<Count>(&[]).unwrap();
    /// // key, value, timestamp; the main outputs come back decoded.
    /// let out: Vec<u64> = h.process("b", &serde_json::json!({"x": 1}), Some(10)).unwrap();
    /// assert_eq!(out, [1]);
    /// ```
    pub fn process<K: Serialize + ?Sized, I: Serialize + ?Sized, O: DeserializeOwned>(
        &mut self,
        key: &K,
        value: &I,
        timestamp: Option<i64>,
    ) -> crate::Result<Vec<O>> {
        host::install(Box::new(MemoryHost(self.store.clone())));
        let key = self
            .keyed
            .then(|| wire::encode(wire::key_codec(self.codecs.input), key));
        let value = self.encode_input(value)?;
        if self.window.is_some() {
            return self.window_record(key.expect("window functions are keyed"), value, timestamp);
        }
        let batch = OutBatch::one(key.as_deref(), &value, timestamp);
        let effects = self.instance.process(batch, self.context())?;
        self.apply(effects)
    }

    /// Several records in one batch, as the runtime hands them over (a
    /// keyed operator's value states are read once for the whole batch):
    /// `(key, value, timestamp)` each; the batch's main outputs come back
    /// decoded. Window functions take their records one at a time
    /// ([`Harness::process`]).
    ///
    /// ```
    /// # use weir::{Context, KeyedProcess, OpenContext, ValueState};
    /// struct Count { n: ValueState<u64> }
    /// impl KeyedProcess for Count {
    ///     type In = u32;
    ///     type Out = u64;
    ///     fn open(ctx: &mut OpenContext) -> weir::Result<Self> { Ok(Count { n: ctx.value_state("n")? }) }
    ///     fn process(&mut self, _: u32, ctx: &mut Context<u64>) -> weir::Result<()> {
    ///         let n = self.n.get()?.unwrap_or(0) + 1;
    ///         self.n.set(n);
    ///         ctx.emit(n);
    ///         Ok(())
    ///     }
    /// }
    /// let mut h = weir::testing::Harness::keyed_process::<Count>(&[]).unwrap();
    /// let batch = [("a", 1, None), ("a", 2, None), ("b", 3, None), ("a", 4, None), ("c", 5, None), ("b", 6, None)];
    /// let out: Vec<u64> = h.process_batch(&batch).unwrap();
    /// assert_eq!(out, [1, 2, 1, 3, 1, 2]);
    /// // The counts were kept: the next batch goes on from them.
    /// let out: Vec<u64> = h.process_batch(&[("c", 7, None), ("a", 8, None)]).unwrap();
    /// assert_eq!(out, [2, 4]);
    /// ```
    pub fn process_batch<K: Serialize, I: Serialize, O: DeserializeOwned>(
        &mut self,
        records: &[(K, I, Option<i64>)],
    ) -> crate::Result<Vec<O>> {
        if self.window.is_some() {
            return Err(
                "process_batch: a window function takes its records one at a time (`process`)"
                    .into(),
            );
        }
        host::install(Box::new(MemoryHost(self.store.clone())));
        let mut batch = OutBatch::with_capacity(records.len(), 0);
        for (key, value, timestamp) in records {
            let key = self
                .keyed
                .then(|| wire::encode(wire::key_codec(self.codecs.input), key));
            let value = self.encode_input(value)?;
            batch.push_with(key.as_deref(), *timestamp, |out| {
                out.extend_from_slice(&value)
            });
        }
        let effects = self.instance.process(batch.into_wit(), self.context())?;
        self.apply(effects)
    }

    /// A record for a window function: assigned to its windows, folded in
    /// with one `accumulate`, windows within their lateness fired again.
    fn window_record<O: DeserializeOwned>(
        &mut self,
        key: Vec<u8>,
        value: Vec<u8>,
        timestamp: Option<i64>,
    ) -> crate::Result<Vec<O>> {
        let ctx = self.context();
        let spec = self.window.as_ref().expect("a window function").spec;
        let t = match spec.time {
            weir_window::Time::Event => timestamp.ok_or(
                "an event-time window needs timestamps: give the source a `timestamp` or a `timestamp-assigner`",
            )?,
            weir_window::Time::Processing => ctx.processing_time,
        };
        let store = &mut self.window.as_mut().expect("a window function").store;
        let Ok(mut assigned) = spec.assign(store, &[(&key, t)], ctx.watermark);
        if !assigned.late.is_empty() {
            self.push_side("late", value.clone());
        }
        let groups = std::mem::take(&mut assigned.groups);
        let additions = std::mem::take(&mut assigned.additions);
        let results = match spec.contents {
            weir_window::Contents::Records => {
                let mut out: Vec<Vec<u8>> = groups.into_iter().map(|g| g.concat()).collect();
                for (_, g) in &additions {
                    weir_window::slot::append_record(&mut out[*g as usize], &value);
                }
                out
            }
            weir_window::Contents::Accumulator if groups.is_empty() => Vec::new(),
            weir_window::Contents::Accumulator => {
                let mut group_ends = Vec::new();
                for g in &groups {
                    group_ends.push(group_ends.last().copied().unwrap_or(0) + g.len() as u32);
                }
                let accumulators = host::pack(groups.iter().flatten());
                let records = OutBatch::one(None, &value, Some(t));
                let targets = additions.iter().map(|(_, g)| *g).collect();
                let answer =
                    self.instance
                        .accumulate(records, accumulators, group_ends, targets)?;
                host::unpacked(&answer)?
                    .into_iter()
                    .map(<[u8]>::to_vec)
                    .collect()
            }
        };
        let store = &mut self.window.as_mut().expect("a window function").store;
        let Ok(refire) = spec.commit(store, assigned, results);
        self.fire_windows(refire)
    }

    fn push_side(&mut self, name: &str, value: Vec<u8>) {
        match self.side.iter_mut().find(|(n, _)| *n == name) {
            Some((_, all)) => all.push(value),
            None => self.side.push((name.to_owned(), vec![value])),
        }
    }

    /// Windows fire through the function's `fire`.
    fn fire_windows<O: DeserializeOwned>(
        &mut self,
        fired: Vec<weir_window::Fired>,
    ) -> crate::Result<Vec<O>> {
        if fired.is_empty() {
            self.timestamps.clear();
            return Ok(Vec::new());
        }
        let spec = self.window.as_ref().expect("a window function").spec;
        let mut windows = Vec::new();
        let mut strings: Vec<Vec<u8>> = Vec::new();
        let mut ends = Vec::new();
        for f in fired {
            for c in f.contents {
                match spec.contents {
                    weir_window::Contents::Accumulator => strings.push(c),
                    weir_window::Contents::Records => strings.extend(
                        weir_window::slot::records(&c)
                            .expect("records the harness stored")
                            .into_iter()
                            .map(<[u8]>::to_vec),
                    ),
                }
            }
            ends.push(strings.len() as u32);
            windows.push(WitWindow {
                key: f.key,
                start: f.start,
                end: f.end,
            });
        }
        let contents = host::pack(&strings);
        let effects = self
            .instance
            .fire(windows, contents, ends, self.context())?;
        self.apply(effects)
    }

    fn fire<O: DeserializeOwned>(&mut self, event_time: bool, upto: i64) -> crate::Result<Vec<O>> {
        host::install(Box::new(MemoryHost(self.store.clone())));
        if let Some(w) = &self.window {
            let spec = w.spec;
            if (spec.time == weir_window::Time::Event) != event_time {
                return Ok(Vec::new());
            }
            let mut out = Vec::new();
            loop {
                let store = &mut self.window.as_mut().expect("a window function").store;
                let due = store.take_due(upto, 16);
                if due.is_empty() {
                    return Ok(out);
                }
                let timers: Vec<(&[u8], i64)> =
                    due.iter().map(|(t, k)| (k.as_slice(), *t)).collect();
                let Ok(fired) = spec.fire(store, &timers);
                out.extend(self.fire_windows(fired)?);
            }
        }
        let mut out = Vec::new();
        loop {
            let due = {
                let mut s = self.store.borrow_mut();
                let next = s
                    .timers
                    .iter()
                    .find(|(t, e, _)| *e == event_time && *t <= upto)
                    .cloned();
                next.inspect(|n| {
                    s.timers.remove(n);
                })
            };
            let Some((time, _, key)) = due else { break };
            let domain = if event_time {
                WitDomain::EventTime
            } else {
                WitDomain::ProcessingTime
            };
            let effects = self
                .instance
                .on_timer(vec![Timer { key, time, domain }], self.context())?;
            out.extend(self.apply(effects)?);
        }
        Ok(out)
    }

    /// Advance the watermark to `watermark`, fire the event-time timers that
    /// are due, in time order, and return their outputs.
    ///
    /// # Example
    ///
    /// ```
    /// # use weir::*;
    /// # struct Op;
    /// # impl KeyedProcess for Op { type In = i64; type Out = i64;
    /// #   fn open(_: &mut OpenContext) -> weir::Result<Self> { Ok(Op) }
    /// #   fn process(&mut self, _: i64, ctx: &mut Context<i64>) -> weir::Result<()> { ctx.register_timer(TimeDomain::EventTime, 100); Ok(()) }
    /// #   fn on_timer(&mut self, t: i64, _: TimeDomain, ctx: &mut Context<i64>) -> weir::Result<()> { ctx.emit(t); Ok(()) } }
    /// let mut h = weir::testing::Harness::keyed_process::<Op>(&[]).unwrap();
    /// h.process::<_, _, i64>("k", &0, None).unwrap();
    /// assert!(h.advance_watermark::<i64>(50).unwrap().is_empty());
    /// assert_eq!(h.advance_watermark::<i64>(100).unwrap(), [100]);
    /// ```
    pub fn advance_watermark<O: DeserializeOwned>(
        &mut self,
        watermark: i64,
    ) -> crate::Result<Vec<O>> {
        self.watermark = Some(watermark);
        self.fire(true, watermark)
    }

    /// Advance processing time to `now` (ms), fire the processing-time
    /// timers that are due, and return their outputs.
    ///
    /// # Example
    ///
    /// ```
    /// # use weir::*;
    /// struct Count { n: ValueState<u64> }
    /// impl KeyedProcess for Count {
    ///     type In = serde_json::Value;
    ///     type Out = u64;
    ///     fn open(ctx: &mut OpenContext) -> weir::Result<Self> { Ok(Count { n: ctx.value_state("n")? }) }
    ///     fn process(&mut self, _: serde_json::Value, ctx: &mut Context<u64>) -> weir::Result<()> {
    ///         let n = self.n.get()?.unwrap_or(0) + 1;
    ///         self.n.set(n);
    ///         ctx.emit(n);
    ///         ctx.register_timer(TimeDomain::ProcessingTime, 1_000);
    ///         Ok(())
    ///     }
    ///     fn on_timer(&mut self, t: i64, _: TimeDomain, ctx: &mut Context<u64>) -> weir::Result<()> { ctx.emit(t as u64); Ok(()) }
    /// }
    /// let mut h = weir::testing::Harness::keyed_process::<Count>(&[]).unwrap();
    /// h.process::<_, _, u64>("a", &serde_json::json!({}), None).unwrap();
    /// assert_eq!(h.advance_processing_time::<u64>(1_000).unwrap(), [1_000]);
    /// ```
    pub fn advance_processing_time<O: DeserializeOwned>(
        &mut self,
        now: i64,
    ) -> crate::Result<Vec<O>> {
        self.processing_time = now;
        self.store.borrow_mut().now = now;
        self.fire(false, now)
    }

    /// Take what was sent to the side output `name` so far.
    ///
    /// # Example
    ///
    /// ```
    /// # use weir::*;
    /// struct Odd;
    /// impl Process for Odd {
    ///     type In = i64;
    ///     type Out = i64;
    ///     fn open(_: &mut OpenContext) -> weir::Result<Self> { Ok(Odd) }
    ///     fn process(&mut self, n: i64, ctx: &mut Context<i64>) -> weir::Result<()> {
    ///         if n % 2 == 1 { ctx.emit_side("odd", &n) } else { ctx.emit(n) }
    ///         Ok(())
    ///     }
    /// }
    /// let mut h = weir::testing::Harness::process_operator::<Odd>(&[]).unwrap();
    /// h.process::<_, _, i64>(&(), &3, None).unwrap();
    /// assert_eq!(h.side_output::<i64>("odd").unwrap(), [3]);
    /// assert!(h.side_output::<i64>("odd").unwrap().is_empty(), "taken");
    /// ```
    pub fn side_output<T: DeserializeOwned>(&mut self, name: &str) -> crate::Result<Vec<T>> {
        let values = match self.side.iter().position(|(n, _)| n == name) {
            Some(i) => self.side.remove(i).1,
            None => Vec::new(),
        };
        // A window's late records are its input's, in its input's codec.
        if name == crate::window::LATE.name() && self.window.is_some() {
            return values
                .iter()
                .map(|v| Self::decode_output(self.codecs.input, self.input_type.as_ref(), v))
                .collect();
        }
        let codec = wire::side_output(&self.codecs, name);
        values.iter().map(|v| wire::decode(codec, v)).collect()
    }

    /// The timers that are registered, as (domain, time) pairs, in time order.
    ///
    /// # Example
    ///
    /// ```
    /// # use weir::*;
    /// struct Count { n: ValueState<u64> }
    /// impl KeyedProcess for Count {
    ///     type In = serde_json::Value;
    ///     type Out = u64;
    ///     fn open(ctx: &mut OpenContext) -> weir::Result<Self> { Ok(Count { n: ctx.value_state("n")? }) }
    ///     fn process(&mut self, _: serde_json::Value, ctx: &mut Context<u64>) -> weir::Result<()> {
    ///         let n = self.n.get()?.unwrap_or(0) + 1;
    ///         self.n.set(n);
    ///         ctx.emit(n);
    ///         ctx.register_timer(TimeDomain::ProcessingTime, 1_000);
    ///         Ok(())
    ///     }
    ///     fn on_timer(&mut self, t: i64, _: TimeDomain, ctx: &mut Context<u64>) -> weir::Result<()> { ctx.emit(t as u64); Ok(()) }
    /// }
    /// let mut h = weir::testing::Harness::keyed_process::<Count>(&[]).unwrap();
    /// h.process::<_, _, u64>("a", &serde_json::json!({}), None).unwrap();
    /// assert_eq!(h.timers(), [(weir::TimeDomain::ProcessingTime, 1_000)]);
    /// ```
    pub fn timers(&self) -> Vec<(TimeDomain, i64)> {
        let s = self.store.borrow();
        let mut all: Vec<(i64, bool)> = s.timers.iter().map(|(t, e, _)| (*t, *e)).collect();
        if let Some(w) = &self.window {
            let event = w.spec.time == weir_window::Time::Event;
            all.extend(w.store.timers.iter().map(|(t, _)| (*t, event)));
            all.sort_by_key(|(t, _)| *t);
        }
        all.into_iter()
            .map(|(t, e)| {
                (
                    if e {
                        TimeDomain::EventTime
                    } else {
                        TimeDomain::ProcessingTime
                    },
                    t,
                )
            })
            .collect()
    }
}
