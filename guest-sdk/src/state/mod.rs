//! Keyed state handles and the guest-side state cache.
//!
//! A handle ([`ValueState`], [`ListState`], [`MapState`]) addresses one
//! declared state; every access is scoped to the key of the record (or timer)
//! being processed. Within a batch, entries live in a cache inside the guest:
//! value states of all the batch's keys are fetched in one host call when the
//! batch starts, other reads happen on first use, and changes are handed to
//! the host as one list when the batch ends. Values are decoded once and
//! encoded once per key and batch, however often the operator touches them.

mod values;

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::marker::PhantomData;

use rustc_hash::FxHashMap;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::__private::bindings::weir::operator::types::{
    ListWrite, MapPut, MapRemove, Packed, StateKey, StateKind, StateOp,
};
use crate::codec::wire::{self, Codec, Codecs};
use crate::host;

thread_local! {
    static CACHE: RefCell<StateCache> = RefCell::new(StateCache::default());
}

pub(crate) fn with_cache<R>(f: impl FnOnce(&mut StateCache) -> R) -> R {
    CACHE.with(|c| f(&mut c.borrow_mut()))
}

/// A value state's puts of one batch, as the contract's `put-values` takes
/// them: key `i` gets value `i`.
pub(crate) struct ValuePuts {
    pub(crate) state: u32,
    pub(crate) keys: Packed,
    pub(crate) values: Packed,
}

/// What a batch changed in keyed state.
#[derive(Default)]
pub(crate) struct StateChanges {
    /// Value states' puts, one entry per state that has any.
    pub(crate) puts: Vec<ValuePuts>,
    /// Everything else, in order.
    pub(crate) ops: Vec<StateOp>,
}

enum ListSlot {
    /// Contents unknown; values added since the batch began.
    Appended(Vec<Vec<u8>>),
    /// Full contents known. `stored`: how many leading items the host
    /// holds as they are (those after them are appended when the batch
    /// ends); `None` when the list was replaced (written back whole).
    Known {
        items: Vec<Vec<u8>>,
        stored: Option<usize>,
    },
}

#[derive(Default)]
struct MapSlot {
    /// The whole map was cleared in this batch: the host's entries are gone.
    cleared: bool,
    /// Changes in this batch: `None` removes.
    changes: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    /// Host answers read in this batch.
    reads: FxHashMap<Vec<u8>, Option<Vec<u8>>>,
}

/// The per-batch cache of keyed state, and the current key.
#[derive(Default)]
pub(crate) struct StateCache {
    /// The key of the record or timer being processed.
    pub(crate) current_key: Option<Vec<u8>>,
    /// The current key's entry among the value states', once looked up.
    current_entry: Option<u32>,
    /// The entry of each record's key of the batch, in order (from
    /// [`StateCache::prefetch`]; none without value states).
    prefetched: Vec<u32>,
    /// The operator's codecs (its state's among them).
    pub(crate) codecs: Codecs,
    /// Value states' entries: the batch's keys, answers and values.
    values: values::ValueEntries,
    list_ids: Vec<u32>,
    lists: Vec<FxHashMap<Vec<u8>, ListSlot>>,
    map_ids: Vec<u32>,
    maps: Vec<FxHashMap<Vec<u8>, MapSlot>>,
}

/// The codec of the running operator's state.
fn state_codec() -> Codec {
    with_cache(|c| c.codecs.state)
}

/// How a state's values are written: by serde in the operator's state
/// codec, or as rows of their declared type ([`crate::Row`]).
pub(crate) struct Coding<T> {
    /// Rows of `T`'s type, whatever the state codec.
    rows: bool,
    encode: fn(Codec, &T, &mut Vec<u8>),
    decode: fn(Codec, &[u8]) -> crate::Result<T>,
}

impl<T> Clone for Coding<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Coding<T> {}

impl<T: Serialize + DeserializeOwned> Coding<T> {
    /// Values in the operator's state codec.
    pub(crate) fn serde() -> Self {
        Coding {
            rows: false,
            encode: |codec, value, buf| wire::encode_into(codec, buf, value),
            decode: |codec, bytes| wire::decode(codec, bytes),
        }
    }
}

impl<T: crate::Row> Coding<T> {
    /// Values as rows of `T`'s type.
    pub(crate) fn rows() -> Self {
        Coding {
            rows: true,
            encode: |_, value, buf| value.encode(buf),
            decode: |_, bytes| {
                T::decode(bytes).map_err(|e| {
                    format!("a state value is not a row of {}: {e}", T::row_type()).into()
                })
            },
        }
    }
}

impl<T> Coding<T> {
    /// The codec its values are in, the state codec being `codec`.
    fn codec(&self, codec: Codec) -> Codec {
        if self.rows { Codec::Row } else { codec }
    }

    pub(crate) fn encode_into(&self, codec: Codec, value: &T, buf: &mut Vec<u8>) {
        (self.encode)(self.codec(codec), value, buf)
    }

    pub(crate) fn encode(&self, codec: Codec, value: &T) -> Vec<u8> {
        let mut buf = Vec::new();
        self.encode_into(codec, value, &mut buf);
        buf
    }

    pub(crate) fn decode(&self, codec: Codec, bytes: &[u8]) -> crate::Result<T> {
        (self.decode)(self.codec(codec), bytes)
    }
}

fn no_key() -> crate::Error {
    "keyed state is only available in a keyed_process operator, while it handles a record or timer"
        .into()
}

impl StateCache {
    /// Register a declared state; returns the local slot index.
    pub(crate) fn add(&mut self, id: u32, kind: StateKind) -> usize {
        let (ids, len) = match kind {
            StateKind::Value => return self.values.add(id),
            StateKind::List => {
                self.lists.push(FxHashMap::default());
                (&mut self.list_ids, self.lists.len())
            }
            StateKind::Map => {
                self.maps.push(FxHashMap::default());
                (&mut self.map_ids, self.maps.len())
            }
        };
        ids.push(id);
        len - 1
    }

    /// Fetch the value states of `keys` in one host call.
    pub(crate) fn prefetch<'a>(&mut self, keys: impl Iterator<Item = &'a [u8]>) {
        self.prefetched.clear();
        self.values.fetch(keys, &mut self.prefetched);
    }

    /// Make the key of the batch's record `record` the current key: its
    /// entry is known from [`StateCache::prefetch`], which was given the
    /// batch's keys in record order.
    pub(crate) fn set_record_key(&mut self, key: &[u8], record: usize) {
        self.set_key(Some(key));
        self.current_entry = self.prefetched.get(record).copied();
    }

    /// Drain the batch's changes, leaving the cache empty. A value state's
    /// new values are encoded straight into its packed puts.
    pub(crate) fn take_ops(&mut self) -> StateChanges {
        let mut ops = Vec::new();
        let mut puts = Vec::new();
        let codec = self.codecs.state;
        self.values.changes(codec, &mut puts, &mut ops);
        self.values.clear();
        self.current_entry = None;
        self.prefetched.clear();
        for (slots, &state) in self.lists.iter_mut().zip(&self.list_ids) {
            for (key, slot) in slots.drain() {
                let target = StateKey { state, key };
                // What was only added is appended: the host keeps what
                // it holds as it is (a time-to-live's expiry times too).
                match slot {
                    ListSlot::Appended(values) if !values.is_empty() => {
                        ops.push(StateOp::AppendList(ListWrite { target, values }))
                    }
                    ListSlot::Known {
                        mut items,
                        stored: Some(n),
                    } if items.len() > n => ops.push(StateOp::AppendList(ListWrite {
                        target,
                        values: items.split_off(n),
                    })),
                    ListSlot::Known {
                        items,
                        stored: None,
                    } => ops.push(if items.is_empty() {
                        StateOp::Clear(target)
                    } else {
                        StateOp::ReplaceList(ListWrite {
                            target,
                            values: items,
                        })
                    }),
                    _ => {}
                }
            }
        }
        for (slots, &state) in self.maps.iter_mut().zip(&self.map_ids) {
            for (key, slot) in slots.drain() {
                if slot.cleared {
                    ops.push(StateOp::Clear(StateKey {
                        state,
                        key: key.clone(),
                    }));
                }
                for (map_key, change) in slot.changes {
                    let target = StateKey {
                        state,
                        key: key.clone(),
                    };
                    ops.push(match change {
                        Some(value) => StateOp::PutEntry(MapPut {
                            target,
                            map_key,
                            value,
                        }),
                        None => StateOp::RemoveEntry(MapRemove { target, map_key }),
                    });
                }
            }
        }
        StateChanges { puts, ops }
    }

    /// Drop the batch's cached entries and changes (the batch failed).
    pub(crate) fn discard(&mut self) {
        self.values.clear();
        self.current_entry = None;
        self.prefetched.clear();
        self.lists.iter_mut().for_each(FxHashMap::clear);
        self.maps.iter_mut().for_each(FxHashMap::clear);
        self.current_key = None;
    }

    /// Make `key` the current key, reusing the buffer.
    pub(crate) fn set_key(&mut self, key: Option<&[u8]>) {
        self.current_entry = None;
        match key {
            Some(k) => {
                let current = self.current_key.get_or_insert_with(Vec::new);
                current.clear();
                current.extend_from_slice(k);
            }
            None => self.current_key = None,
        }
    }

    fn key(&self) -> crate::Result<&[u8]> {
        self.current_key.as_deref().ok_or_else(no_key)
    }
}

/// One value per key, like Flink's `ValueState`.
///
/// Declared in [`KeyedProcess::open`](crate::KeyedProcess::open) with
/// [`OpenContext::value_state`](crate::OpenContext::value_state).
///
/// ```
/// use weir::{testing::Harness, Context, KeyedProcess, OpenContext, ValueState};
///
/// struct Sum { total: ValueState<i64> }
///
/// impl KeyedProcess for Sum {
///     type In = i64;
///     type Out = i64;
///     fn open(ctx: &mut OpenContext) -> weir::Result<Self> {
///         Ok(Sum { total: ctx.value_state("total")? })
///     }
///     fn process(&mut self, n: i64, ctx: &mut Context<i64>) -> weir::Result<()> {
///         let total = self.total.get()?.unwrap_or(0) + n;
///         self.total.set(total);
///         ctx.emit(total);
///         Ok(())
///     }
/// }
///
/// let mut h = Harness::keyed_process::<Sum>(&[]).unwrap();
/// let _: Vec<i64> = h.process(&"a", &5, None).unwrap();
/// let out: Vec<i64> = h.process(&"a", &2, None).unwrap();
/// assert_eq!(out, vec![7]);
/// ```
pub struct ValueState<T> {
    slot: usize,
    coding: Coding<T>,
}

impl<T: Clone + 'static> ValueState<T> {
    pub(crate) fn new(slot: usize, coding: Coding<T>) -> Self {
        ValueState { slot, coding }
    }

    fn with_slot<R>(&self, f: impl FnOnce(&mut Option<T>, &mut bool) -> R) -> crate::Result<R> {
        with_cache(|cache| {
            let codec = cache.codecs.state;
            let key = cache.current_key.as_deref().ok_or_else(no_key)?;
            let entry = &mut cache.current_entry;
            cache
                .values
                .with(self.slot, key, entry, codec, self.coding, f)
        })
    }

    /// The current key's value, `None` when unset.
    ///
    /// # Example
    ///
    /// ```
    /// # use weir::*;
    /// # struct Op { v: ValueState<i64> }
    /// # impl KeyedProcess for Op {
    /// #     type In = i64;
    /// #     type Out = i64;
    /// #     fn open(ctx: &mut OpenContext) -> weir::Result<Self> { Ok(Op { v: ctx.value_state("v")? }) }
    /// fn process(&mut self, input: i64, ctx: &mut Context<i64>) -> weir::Result<()> {
    ///     // The previous value of this key, if any.
    ///     let previous = self.v.get()?;
    ///     ctx.emit(previous.unwrap_or(-1));
    ///     self.v.set(input);
    ///     Ok(())
    /// }
    /// # }
    /// # let mut h = weir::testing::Harness::keyed_process::<Op>(&[]).unwrap();
    /// # assert_eq!(h.process::<_, _, i64>("k", &5, None).unwrap(), [-1]);
    /// # assert_eq!(h.process::<_, _, i64>("k", &6, None).unwrap(), [5]);
    /// ```
    pub fn get(&self) -> crate::Result<Option<T>> {
        self.with_slot(|v, _| v.clone())
    }

    /// Set the current key's value.
    ///
    /// # Panics
    ///
    /// Outside a keyed context (see [`ValueState`]); use [`ValueState::try_set`]
    /// to get an error instead.
    ///
    /// # Example
    ///
    /// ```
    /// # use weir::*;
    /// # struct Op { v: ValueState<i64> }
    /// # impl KeyedProcess for Op {
    /// #     type In = i64;
    /// #     type Out = i64;
    /// #     fn open(ctx: &mut OpenContext) -> weir::Result<Self> { Ok(Op { v: ctx.value_state("v")? }) }
    /// fn process(&mut self, input: i64, ctx: &mut Context<i64>) -> weir::Result<()> {
    ///     self.v.set(input * 2);
    ///     ctx.emit(self.v.get()?.unwrap());
    ///     Ok(())
    /// }
    /// # }
    /// # let mut h = weir::testing::Harness::keyed_process::<Op>(&[]).unwrap();
    /// # assert_eq!(h.process::<_, _, i64>("k", &5, None).unwrap(), [10]);
    /// ```
    pub fn set(&self, value: T) {
        self.try_set(value).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Set the current key's value, or say why not.
    ///
    /// # Example
    ///
    /// ```
    /// # use weir::*;
    /// # struct Op { v: ValueState<i64> }
    /// # impl KeyedProcess for Op {
    /// #     type In = i64;
    /// #     type Out = i64;
    /// #     fn open(ctx: &mut OpenContext) -> weir::Result<Self> { Ok(Op { v: ctx.value_state("v")? }) }
    /// fn process(&mut self, input: i64, ctx: &mut Context<i64>) -> weir::Result<()> {
    ///     self.v.try_set(input)?;
    ///     ctx.emit(self.v.get()?.unwrap());
    ///     Ok(())
    /// }
    /// # }
    /// # let mut h = weir::testing::Harness::keyed_process::<Op>(&[]).unwrap();
    /// # assert_eq!(h.process::<_, _, i64>("k", &5, None).unwrap(), [5]);
    /// ```
    pub fn try_set(&self, value: T) -> crate::Result<()> {
        self.with_slot(|v, dirty| {
            *v = Some(value);
            *dirty = true;
        })
    }

    /// Remove the current key's value.
    ///
    /// # Example
    ///
    /// ```
    /// # use weir::*;
    /// # struct Op { v: ValueState<i64> }
    /// # impl KeyedProcess for Op {
    /// #     type In = i64;
    /// #     type Out = i64;
    /// #     fn open(ctx: &mut OpenContext) -> weir::Result<Self> { Ok(Op { v: ctx.value_state("v")? }) }
    /// fn process(&mut self, input: i64, ctx: &mut Context<i64>) -> weir::Result<()> {
    ///     if input == 0 {
    ///         self.v.clear()?; // forget this key
    ///     } else {
    ///         self.v.set(self.v.get()?.unwrap_or(0) + input);
    ///     }
    ///     ctx.emit(self.v.get()?.unwrap_or(0));
    ///     Ok(())
    /// }
    /// # }
    /// # let mut h = weir::testing::Harness::keyed_process::<Op>(&[]).unwrap();
    /// # h.process::<_, _, i64>("k", &5, None).unwrap();
    /// # assert_eq!(h.process::<_, _, i64>("k", &0, None).unwrap(), [0]);
    /// # assert_eq!(h.process::<_, _, i64>("k", &1, None).unwrap(), [1]);
    /// ```
    pub fn clear(&self) -> crate::Result<()> {
        self.with_slot(|v, dirty| {
            *v = None;
            *dirty = true;
        })
    }
}

/// A list of values per key, like Flink's `ListState`. Adding does not read
/// the list; reading it fetches it once per key and batch.
///
/// ```
/// use weir::{testing::Harness, Context, KeyedProcess, ListState, OpenContext};
///
/// struct Last3 { seen: ListState<u32> }
///
/// impl KeyedProcess for Last3 {
///     type In = u32;
///     type Out = Vec<u32>;
///     fn open(ctx: &mut OpenContext) -> weir::Result<Self> {
///         Ok(Last3 { seen: ctx.list_state("seen")? })
///     }
///     fn process(&mut self, n: u32, ctx: &mut Context<Vec<u32>>) -> weir::Result<()> {
///         self.seen.add(n)?;
///         let mut all = self.seen.get()?;
///         if all.len() > 3 {
///             all.remove(0);
///             self.seen.update(all.clone())?;
///         }
///         ctx.emit(all);
///         Ok(())
///     }
/// }
///
/// let mut h = Harness::keyed_process::<Last3>(&[]).unwrap();
/// for n in 1..=4 {
///     let _: Vec<Vec<u32>> = h.process(&"k", &n, None).unwrap();
/// }
/// let out: Vec<Vec<u32>> = h.process(&"k", &5, None).unwrap();
/// assert_eq!(out, vec![vec![3, 4, 5]]);
/// ```
pub struct ListState<T> {
    slot: usize,
    coding: Coding<T>,
}

impl<T> ListState<T> {
    pub(crate) fn new(slot: usize, coding: Coding<T>) -> Self {
        ListState { slot, coding }
    }

    fn with_slot<R>(&self, f: impl FnOnce(&mut ListSlot) -> R) -> crate::Result<R> {
        with_cache(|cache| {
            let key = cache.key()?.to_vec();
            let slot = cache.lists[self.slot]
                .entry(key)
                .or_insert_with(|| ListSlot::Appended(Vec::new()));
            Ok(f(slot))
        })
    }

    fn load(&self) -> crate::Result<()> {
        let (state, key, unknown) = with_cache(|cache| {
            let key = cache.key()?.to_vec();
            let unknown = !matches!(
                cache.lists[self.slot].get(&key),
                Some(ListSlot::Known { .. })
            );
            Ok::<_, crate::Error>((cache.list_ids[self.slot], key, unknown))
        })?;
        if unknown {
            let stored = host::with(|h| h.get_list(&StateKey { state, key }));
            self.with_slot(|slot| {
                if let ListSlot::Appended(added) = slot {
                    let mut items = stored;
                    let held = items.len();
                    items.append(added);
                    *slot = ListSlot::Known {
                        items,
                        stored: Some(held),
                    };
                }
            })?;
        }
        Ok(())
    }

    /// The current key's list (empty when unset).
    ///
    /// # Example
    ///
    /// ```
    /// # use weir::*;
    /// # struct Op { l: ListState<i64> }
    /// # impl KeyedProcess for Op {
    /// #     type In = i64;
    /// #     type Out = i64;
    /// #     fn open(ctx: &mut OpenContext) -> weir::Result<Self> { Ok(Op { l: ctx.list_state("l")? }) }
    /// fn process(&mut self, input: i64, ctx: &mut Context<i64>) -> weir::Result<()> {
    ///     self.l.add(input)?;
    ///     ctx.emit(self.l.get()?.iter().sum::<i64>());
    ///     Ok(())
    /// }
    /// # }
    /// # let mut h = weir::testing::Harness::keyed_process::<Op>(&[]).unwrap();
    /// # h.process::<_, _, i64>("k", &2, None).unwrap();
    /// # assert_eq!(h.process::<_, _, i64>("k", &3, None).unwrap(), [5]);
    /// ```
    pub fn get(&self) -> crate::Result<Vec<T>> {
        let codec = state_codec();
        self.load()?;
        self.with_slot(|slot| match slot {
            ListSlot::Known { items, .. } => {
                items.iter().map(|b| self.coding.decode(codec, b)).collect()
            }
            ListSlot::Appended(_) => unreachable!("loaded above"),
        })?
    }

    /// Add a value at the end of the current key's list.
    ///
    /// # Example
    ///
    /// ```
    /// # use weir::*;
    /// # struct Op { l: ListState<i64> }
    /// # impl KeyedProcess for Op {
    /// #     type In = i64;
    /// #     type Out = i64;
    /// #     fn open(ctx: &mut OpenContext) -> weir::Result<Self> { Ok(Op { l: ctx.list_state("l")? }) }
    /// fn process(&mut self, input: i64, ctx: &mut Context<i64>) -> weir::Result<()> {
    ///     // Adding does not read the list.
    ///     self.l.add(input)?;
    ///     Ok(())
    /// }
    /// # }
    /// # let mut h = weir::testing::Harness::keyed_process::<Op>(&[]).unwrap();
    /// # h.process::<_, _, i64>("k", &2, None).unwrap();
    /// # h.process::<_, _, i64>("k", &3, None).unwrap();
    /// ```
    pub fn add(&self, value: T) -> crate::Result<()> {
        let codec = state_codec();
        let bytes = self.coding.encode(codec, &value);
        self.with_slot(|slot| match slot {
            ListSlot::Appended(added) => added.push(bytes),
            ListSlot::Known { items, .. } => items.push(bytes),
        })
    }

    /// Replace the current key's list.
    ///
    /// # Example
    ///
    /// ```
    /// # use weir::*;
    /// # struct Op { l: ListState<i64> }
    /// # impl KeyedProcess for Op {
    /// #     type In = i64;
    /// #     type Out = i64;
    /// #     fn open(ctx: &mut OpenContext) -> weir::Result<Self> { Ok(Op { l: ctx.list_state("l")? }) }
    /// fn process(&mut self, input: i64, ctx: &mut Context<i64>) -> weir::Result<()> {
    ///     let mut all = self.l.get()?;
    ///     all.push(input);
    ///     all.sort();
    ///     all.truncate(2); // keep the two smallest
    ///     self.l.update(all.clone())?;
    ///     ctx.emit(all[0]);
    ///     Ok(())
    /// }
    /// # }
    /// # let mut h = weir::testing::Harness::keyed_process::<Op>(&[]).unwrap();
    /// # h.process::<_, _, i64>("k", &5, None).unwrap();
    /// # assert_eq!(h.process::<_, _, i64>("k", &3, None).unwrap(), [3]);
    /// ```
    pub fn update(&self, values: Vec<T>) -> crate::Result<()> {
        let codec = state_codec();
        let items = values
            .iter()
            .map(|v| self.coding.encode(codec, v))
            .collect();
        self.with_slot(|slot| {
            *slot = ListSlot::Known {
                items,
                stored: None,
            }
        })
    }

    /// Remove the current key's list.
    ///
    /// # Example
    ///
    /// ```
    /// # use weir::*;
    /// # struct Op { l: ListState<i64> }
    /// # impl KeyedProcess for Op {
    /// #     type In = i64;
    /// #     type Out = i64;
    /// #     fn open(ctx: &mut OpenContext) -> weir::Result<Self> { Ok(Op { l: ctx.list_state("l")? }) }
    /// fn process(&mut self, input: i64, ctx: &mut Context<i64>) -> weir::Result<()> {
    ///     self.l.add(input)?;
    ///     if self.l.get()?.len() == 3 {
    ///         ctx.emit(self.l.get()?.iter().sum::<i64>());
    ///         self.l.clear()?;
    ///     }
    ///     Ok(())
    /// }
    /// # }
    /// # let mut h = weir::testing::Harness::keyed_process::<Op>(&[]).unwrap();
    /// # for n in [1, 2] { assert!(h.process::<_, _, i64>("k", &n, None).unwrap().is_empty()); }
    /// # assert_eq!(h.process::<_, _, i64>("k", &3, None).unwrap(), [6]);
    /// ```
    pub fn clear(&self) -> crate::Result<()> {
        self.update(Vec::new())
    }
}

/// A map per key, like Flink's `MapState`. User keys and values are encoded
/// with the operator's state codec ([`crate::codec`]); entries are listed in the byte
/// order of encoded keys.
///
/// ```
/// use weir::{testing::Harness, Context, KeyedProcess, MapState, OpenContext};
///
/// struct PerPage { visits: MapState<String, u32> }
///
/// impl KeyedProcess for PerPage {
///     type In = String;
///     type Out = Vec<(String, u32)>;
///     fn open(ctx: &mut OpenContext) -> weir::Result<Self> {
///         Ok(PerPage { visits: ctx.map_state("visits")? })
///     }
///     fn process(&mut self, page: String, ctx: &mut Context<Self::Out>) -> weir::Result<()> {
///         let n = self.visits.get(&page)?.unwrap_or(0);
///         self.visits.put(&page, &(n + 1))?;
///         ctx.emit(self.visits.entries()?);
///         Ok(())
///     }
/// }
///
/// let mut h = Harness::keyed_process::<PerPage>(&[]).unwrap();
/// let _: Vec<Vec<(String, u32)>> = h.process(&"user", &"/a", None).unwrap();
/// let out: Vec<Vec<(String, u32)>> = h.process(&"user", &"/b", None).unwrap();
/// assert_eq!(out, vec![vec![("/a".into(), 1), ("/b".into(), 1)]]);
/// ```
pub struct MapState<K, V> {
    slot: usize,
    coding: Coding<V>,
    _key: PhantomData<fn() -> K>,
}

impl<K: Serialize + DeserializeOwned, V> MapState<K, V> {
    pub(crate) fn new(slot: usize, coding: Coding<V>) -> Self {
        MapState {
            slot,
            coding,
            _key: PhantomData,
        }
    }

    fn with_slot<R>(
        &self,
        f: impl FnOnce(u32, &[u8], &mut MapSlot) -> crate::Result<R>,
    ) -> crate::Result<R> {
        with_cache(|cache| {
            let state = cache.map_ids[self.slot];
            let key = cache.key()?.to_vec();
            let slot = cache.maps[self.slot].entry(key.clone()).or_default();
            f(state, &key, slot)
        })
    }

    /// The value under `map_key` for the current key.
    ///
    /// # Example
    ///
    /// ```
    /// # use weir::*;
    /// # struct Op { m: MapState<String, i64> }
    /// # impl KeyedProcess for Op {
    /// #     type In = String;
    /// #     type Out = i64;
    /// #     fn open(ctx: &mut OpenContext) -> weir::Result<Self> { Ok(Op { m: ctx.map_state("m")? }) }
    /// fn process(&mut self, input: String, ctx: &mut Context<i64>) -> weir::Result<()> {
    ///     let n = self.m.get(&input)?.unwrap_or(0) + 1;
    ///     self.m.put(&input, &n)?;
    ///     ctx.emit(n);
    ///     Ok(())
    /// }
    /// # }
    /// # let mut h = weir::testing::Harness::keyed_process::<Op>(&[]).unwrap();
    /// # h.process::<_, _, i64>("k", "a", None).unwrap();
    /// # assert_eq!(h.process::<_, _, i64>("k", "a", None).unwrap(), [2]);
    /// ```
    pub fn get(&self, map_key: &K) -> crate::Result<Option<V>> {
        let codec = state_codec();
        let mk = wire::encode(codec, map_key);
        let bytes = self.with_slot(|state, key, slot| {
            if let Some(change) = slot.changes.get(&mk) {
                return Ok(change.clone());
            }
            if slot.cleared {
                return Ok(None);
            }
            if let Some(read) = slot.reads.get(&mk) {
                return Ok(read.clone());
            }
            let target = StateKey {
                state,
                key: key.to_vec(),
            };
            let read = host::with(|h| h.get_entry(&target, &mk));
            slot.reads.insert(mk.clone(), read.clone());
            Ok(read)
        })?;
        bytes.map(|b| self.coding.decode(codec, &b)).transpose()
    }

    /// Whether `map_key` is present for the current key.
    ///
    /// # Example
    ///
    /// ```
    /// # use weir::*;
    /// # struct Op { m: MapState<String, i64> }
    /// # impl KeyedProcess for Op {
    /// #     type In = String;
    /// #     type Out = i64;
    /// #     fn open(ctx: &mut OpenContext) -> weir::Result<Self> { Ok(Op { m: ctx.map_state("m")? }) }
    /// fn process(&mut self, input: String, ctx: &mut Context<i64>) -> weir::Result<()> {
    ///     // Emit each distinct value once per key.
    ///     if !self.m.contains(&input)? {
    ///         self.m.put(&input, &1)?;
    ///         ctx.emit(1);
    ///     }
    ///     Ok(())
    /// }
    /// # }
    /// # let mut h = weir::testing::Harness::keyed_process::<Op>(&[]).unwrap();
    /// # assert_eq!(h.process::<_, _, i64>("k", "a", None).unwrap(), [1]);
    /// # assert!(h.process::<_, _, i64>("k", "a", None).unwrap().is_empty());
    /// ```
    pub fn contains(&self, map_key: &K) -> crate::Result<bool> {
        Ok(self.get(map_key)?.is_some())
    }

    /// Set `map_key` to `value` for the current key.
    ///
    /// # Example
    ///
    /// ```
    /// # use weir::*;
    /// # struct Op { m: MapState<String, i64> }
    /// # impl KeyedProcess for Op {
    /// #     type In = String;
    /// #     type Out = i64;
    /// #     fn open(ctx: &mut OpenContext) -> weir::Result<Self> { Ok(Op { m: ctx.map_state("m")? }) }
    /// fn process(&mut self, input: String, ctx: &mut Context<i64>) -> weir::Result<()> {
    ///     self.m.put(&input, &(input.len() as i64))?;
    ///     ctx.emit(self.m.get(&input)?.unwrap());
    ///     Ok(())
    /// }
    /// # }
    /// # let mut h = weir::testing::Harness::keyed_process::<Op>(&[]).unwrap();
    /// # assert_eq!(h.process::<_, _, i64>("k", "abc", None).unwrap(), [3]);
    /// ```
    pub fn put(&self, map_key: &K, value: &V) -> crate::Result<()> {
        let codec = state_codec();
        let (mk, v) = (
            wire::encode(codec, map_key),
            self.coding.encode(codec, value),
        );
        self.with_slot(|_, _, slot| {
            slot.changes.insert(mk, Some(v));
            Ok(())
        })
    }

    /// Remove `map_key` for the current key.
    ///
    /// # Example
    ///
    /// ```
    /// # use weir::*;
    /// # struct Op { m: MapState<String, i64> }
    /// # impl KeyedProcess for Op {
    /// #     type In = String;
    /// #     type Out = i64;
    /// #     fn open(ctx: &mut OpenContext) -> weir::Result<Self> { Ok(Op { m: ctx.map_state("m")? }) }
    /// fn process(&mut self, input: String, ctx: &mut Context<i64>) -> weir::Result<()> {
    ///     // A value seen twice is removed.
    ///     if self.m.contains(&input)? { self.m.remove(&input)? } else { self.m.put(&input, &1)? }
    ///     ctx.emit(self.m.entries()?.len() as i64);
    ///     Ok(())
    /// }
    /// # }
    /// # let mut h = weir::testing::Harness::keyed_process::<Op>(&[]).unwrap();
    /// # assert_eq!(h.process::<_, _, i64>("k", "a", None).unwrap(), [1]);
    /// # assert_eq!(h.process::<_, _, i64>("k", "a", None).unwrap(), [0]);
    /// ```
    pub fn remove(&self, map_key: &K) -> crate::Result<()> {
        let codec = state_codec();
        let mk = wire::encode(codec, map_key);
        self.with_slot(|_, _, slot| {
            slot.changes.insert(mk, None);
            Ok(())
        })
    }

    /// All entries of the current key's map, in encoded-key byte order.
    ///
    /// # Example
    ///
    /// ```
    /// # use weir::*;
    /// # struct Op { m: MapState<String, i64> }
    /// # impl KeyedProcess for Op {
    /// #     type In = String;
    /// #     type Out = String;
    /// #     fn open(ctx: &mut OpenContext) -> weir::Result<Self> { Ok(Op { m: ctx.map_state("m")? }) }
    /// fn process(&mut self, input: String, ctx: &mut Context<String>) -> weir::Result<()> {
    ///     self.m.put(&input, &1)?;
    ///     let keys: Vec<String> = self.m.entries()?.into_iter().map(|(k, _)| k).collect();
    ///     ctx.emit(keys.join(","));
    ///     Ok(())
    /// }
    /// # }
    /// # let mut h = weir::testing::Harness::keyed_process::<Op>(&[]).unwrap();
    /// # h.process::<_, _, String>("k", "b", None).unwrap();
    /// # assert_eq!(h.process::<_, _, String>("k", "a", None).unwrap(), ["a,b"]);
    /// ```
    pub fn entries(&self) -> crate::Result<Vec<(K, V)>> {
        let codec = state_codec();
        let merged = self.with_slot(|state, key, slot| {
            let mut merged: BTreeMap<Vec<u8>, Vec<u8>> = if slot.cleared {
                BTreeMap::new()
            } else {
                let target = StateKey {
                    state,
                    key: key.to_vec(),
                };
                host::with(|h| h.get_entries(&target)).into_iter().collect()
            };
            for (k, change) in &slot.changes {
                match change {
                    Some(v) => merged.insert(k.clone(), v.clone()),
                    None => merged.remove(k),
                };
            }
            Ok(merged)
        })?;
        merged
            .into_iter()
            .map(|(k, v)| Ok((wire::decode(codec, &k)?, self.coding.decode(codec, &v)?)))
            .collect()
    }

    /// Whether the current key's map is empty.
    ///
    /// # Example
    ///
    /// ```
    /// # use weir::*;
    /// # struct Op { m: MapState<String, i64> }
    /// # impl KeyedProcess for Op {
    /// #     type In = String;
    /// #     type Out = bool;
    /// #     fn open(ctx: &mut OpenContext) -> weir::Result<Self> { Ok(Op { m: ctx.map_state("m")? }) }
    /// fn process(&mut self, input: String, ctx: &mut Context<bool>) -> weir::Result<()> {
    ///     ctx.emit(self.m.is_empty()?);
    ///     self.m.put(&input, &1)?;
    ///     Ok(())
    /// }
    /// # }
    /// # let mut h = weir::testing::Harness::keyed_process::<Op>(&[]).unwrap();
    /// # assert_eq!(h.process::<_, _, bool>("k", "a", None).unwrap(), [true]);
    /// # assert_eq!(h.process::<_, _, bool>("k", "b", None).unwrap(), [false]);
    /// ```
    pub fn is_empty(&self) -> crate::Result<bool> {
        Ok(self.entries()?.is_empty())
    }

    /// Remove the current key's whole map.
    ///
    /// # Example
    ///
    /// ```
    /// # use weir::*;
    /// # struct Op { m: MapState<String, i64> }
    /// # impl KeyedProcess for Op {
    /// #     type In = String;
    /// #     type Out = i64;
    /// #     fn open(ctx: &mut OpenContext) -> weir::Result<Self> { Ok(Op { m: ctx.map_state("m")? }) }
    /// fn process(&mut self, input: String, ctx: &mut Context<i64>) -> weir::Result<()> {
    ///     if input == "reset" {
    ///         self.m.clear()?;
    ///     } else {
    ///         self.m.put(&input, &1)?;
    ///     }
    ///     ctx.emit(self.m.entries()?.len() as i64);
    ///     Ok(())
    /// }
    /// # }
    /// # let mut h = weir::testing::Harness::keyed_process::<Op>(&[]).unwrap();
    /// # h.process::<_, _, i64>("k", "a", None).unwrap();
    /// # assert_eq!(h.process::<_, _, i64>("k", "reset", None).unwrap(), [0]);
    /// ```
    pub fn clear(&self) -> crate::Result<()> {
        self.with_slot(|_, _, slot| {
            slot.cleared = true;
            slot.changes.clear();
            slot.reads.clear();
            Ok(())
        })
    }
}

/// How long a keyed state's values live (Flink's `StateTtlConfig`): given
/// to [`crate::OpenContext::value_state_ttl`] and its list and map
/// siblings. A value expires this long, in processing time, after it was
/// last written (or, [`Ttl::refreshed_on_read`], read); an expired value is
/// never read again, and the runtime cleans it out of the state (on every
/// snapshot of the memory backend, in RocksDB's compactions).
///
/// A state keeps or lacks its time-to-live for its whole life (a savepoint
/// restored into an operator that declares it the other way is refused);
/// the duration may change from one version of the operator to the next.
///
/// # Example
///
/// ```
/// use weir::Ttl;
/// let day = Ttl::secs(24 * 3600).refreshed_on_read();
/// assert_eq!(day.millis(), 86_400_000);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ttl {
    ms: u64,
    refresh_on_read: bool,
}

impl Ttl {
    /// Values live `ms` milliseconds (at least 1).
    pub fn ms(ms: u64) -> Ttl {
        Ttl {
            ms: ms.max(1),
            refresh_on_read: false,
        }
    }

    /// Values live `secs` seconds.
    pub fn secs(secs: u64) -> Ttl {
        Ttl::ms(secs.saturating_mul(1000))
    }

    /// A read that finds a value alive renews it too (Flink's
    /// `OnReadAndWrite`).
    pub fn refreshed_on_read(self) -> Ttl {
        Ttl {
            refresh_on_read: true,
            ..self
        }
    }

    /// How long values live, in milliseconds.
    pub fn millis(&self) -> u64 {
        self.ms
    }

    /// Whether reads renew values.
    pub fn refreshes_on_read(&self) -> bool {
        self.refresh_on_read
    }

    pub(crate) fn wit(self) -> crate::__private::bindings::weir::operator::types::StateTtl {
        crate::__private::bindings::weir::operator::types::StateTtl {
            ttl_ms: self.ms,
            refresh_on_read: self.refresh_on_read,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Context, KeyedProcess, OpenContext};

    struct Op;

    impl KeyedProcess for Op {
        type In = i64;
        type Out = i64;
        fn open(ctx: &mut OpenContext) -> crate::Result<Self> {
            ctx.list_state::<i64>("l")?;
            Ok(Op)
        }
        fn process(&mut self, _: i64, _: &mut Context<i64>) -> crate::Result<()> {
            Ok(())
        }
    }

    /// The batch's list writes: (appended, values) per write.
    fn written() -> Vec<(bool, Vec<Vec<u8>>)> {
        with_cache(|c| {
            let ops = c.take_ops().ops;
            c.set_key(Some(b"k"));
            ops.into_iter()
                .map(|op| match op {
                    StateOp::AppendList(l) => (true, l.values),
                    StateOp::ReplaceList(l) => (false, l.values),
                    StateOp::Clear(_) => (false, Vec::new()),
                    _ => panic!("not a list's write"),
                })
                .collect()
        })
    }

    fn encoded(values: &[i64]) -> Vec<Vec<u8>> {
        values
            .iter()
            .map(|v| wire::encode(state_codec(), v))
            .collect()
    }

    #[test]
    fn a_list_read_and_added_to_is_appended_to_and_a_list_updated_is_replaced() {
        // The harness is the host.
        let _h = crate::testing::Harness::keyed_process::<Op>(&[]).unwrap();
        let id = host::with(|h| h.declare_state("mine", StateKind::List)).unwrap();
        let slot = with_cache(|c| {
            c.set_key(Some(b"k"));
            c.add(id, StateKind::List)
        });
        let l = ListState::<i64>::new(slot, Coding::serde());
        assert_eq!(l.get().unwrap(), Vec::<i64>::new());
        l.add(1).unwrap();
        // What the host holds is not written again (its elements keep
        // their expiry times): what was added is appended.
        assert_eq!(written(), [(true, encoded(&[1]))]);
        l.get().unwrap();
        assert_eq!(written(), []);
        l.add(2).unwrap();
        l.get().unwrap();
        l.add(3).unwrap();
        assert_eq!(written(), [(true, encoded(&[2, 3]))]);
        l.update(vec![2]).unwrap();
        assert_eq!(written(), [(false, encoded(&[2]))]);
        l.get().unwrap();
        l.clear().unwrap();
        assert_eq!(written(), [(false, Vec::new())]);
        // Cleared, then added to, in one batch: the list is replaced by
        // what was added (the host's elements are gone).
        l.clear().unwrap();
        l.add(5).unwrap();
        assert_eq!(written(), [(false, encoded(&[5]))]);
    }
}
