//! The value states' entries of one batch, without an allocation per key:
//! every key the batch touches once, in one buffer, found through a table
//! of indices; per state, the host's answers in one buffer and the values
//! decoded from them in one typed column. The buffers are emptied, not
//! freed, when the batch ends, so a steady stream of batches allocates
//! nothing for its keys and values.

use std::any::TypeId;

use hashbrown::HashTable;
use rustc_hash::FxBuildHasher;
use std::hash::BuildHasher;

use super::{Coding, ValuePuts};
use crate::__private::bindings::weir::operator::types::{Packed, StateKey, StateOp};
use crate::codec::wire::Codec;

/// One entry's value in a state's column.
enum Cell<T> {
    /// Not decoded yet: its bytes are the host's answer.
    Raw,
    /// Decoded (`None`: unset); `dirty` when it must be written back.
    Known { value: Option<T>, dirty: bool },
}

/// A state's values, one cell per entry, of the state's type.
struct Column<T> {
    cells: Vec<Cell<T>>,
    /// How they are written.
    coding: Coding<T>,
}

/// A column whatever its type: what the batch's end needs of it.
trait AnyColumn {
    /// The changed entries: a put (encoded into `values`, the key into
    /// `keys`) or, for an unset one, a clear.
    fn changes(
        &self,
        entries: &KeyArena,
        codec: Codec,
        state: u32,
        puts: (&mut Packed, &mut Packed),
        clears: &mut Vec<StateOp>,
    );
    /// Forget every entry (keeping the buffer).
    fn clear(&mut self);
}

impl<T: 'static> AnyColumn for Column<T> {
    fn changes(
        &self,
        entries: &KeyArena,
        codec: Codec,
        state: u32,
        (keys, values): (&mut Packed, &mut Packed),
        clears: &mut Vec<StateOp>,
    ) {
        for (i, cell) in self.cells.iter().enumerate() {
            if let Cell::Known { value, dirty: true } = cell {
                let key = entries.key(i as u32);
                match value {
                    Some(v) => {
                        keys.data.extend_from_slice(key);
                        keys.ends.push(keys.data.len() as u32);
                        self.coding.encode_into(codec, v, &mut values.data);
                        values.ends.push(values.data.len() as u32);
                    }
                    None => clears.push(StateOp::Clear(StateKey {
                        state,
                        key: key.to_vec(),
                    })),
                }
            }
        }
    }

    fn clear(&mut self) {
        self.cells.clear();
    }
}

/// The batch's keys, each once, in one buffer.
#[derive(Default)]
pub(crate) struct KeyArena {
    bytes: Vec<u8>,
    ends: Vec<u32>,
    index: HashTable<u32>,
}

impl KeyArena {
    fn key(&self, i: u32) -> &[u8] {
        let i = i as usize;
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        &self.bytes[start..self.ends[i] as usize]
    }

    fn find(&self, hash: u64, key: &[u8]) -> Option<u32> {
        self.index.find(hash, |&i| self.key(i) == key).copied()
    }

    fn push(&mut self, hash: u64, key: &[u8]) -> u32 {
        let i = self.ends.len() as u32;
        self.bytes.extend_from_slice(key);
        self.ends.push(self.bytes.len() as u32);
        let KeyArena { bytes, ends, index } = self;
        index.insert_unique(hash, i, |&j| {
            let j = j as usize;
            let start = if j == 0 { 0 } else { ends[j - 1] as usize };
            FxBuildHasher.hash_one(&bytes[start..ends[j] as usize])
        });
        i
    }

    fn len(&self) -> usize {
        self.ends.len()
    }

    fn clear(&mut self) {
        self.bytes.clear();
        self.ends.clear();
        self.index.clear();
    }
}

/// Every value state's entries of the batch.
#[derive(Default)]
pub(crate) struct ValueEntries {
    /// The host ids of the value states, in the order they were declared.
    pub(crate) ids: Vec<u32>,
    keys: KeyArena,
    /// The host's answers for every entry and state: entry `e`'s value of
    /// state `s` is answer `e * ids.len() + s`.
    answers: Vec<u8>,
    answer_ends: Vec<u32>,
    present: Vec<bool>,
    /// Per state, its decoded values, made on the state's first use.
    columns: Vec<Option<TypedColumn>>,
}

/// A state's column and the type of its values, checked before the column
/// is used as a `Column` of that type: a comparison of constants where a
/// downcast through `Any` would be two calls per access.
struct TypedColumn {
    /// `TypeId::of::<T>()` of a `Column<T>`.
    values: TypeId,
    column: Box<dyn AnyColumn>,
}

impl TypedColumn {
    fn new<T: 'static>(column: Column<T>) -> TypedColumn {
        TypedColumn {
            values: TypeId::of::<T>(),
            column: Box::new(column),
        }
    }

    /// The column as the `Column<T>` it was made as.
    ///
    /// # Panics
    ///
    /// When it was made with values of another type.
    fn get<T: 'static>(&mut self) -> &mut Column<T> {
        assert!(
            self.values == TypeId::of::<T>(),
            "a value state holds one type"
        );
        let column: *mut dyn AnyColumn = &mut *self.column;
        // SAFETY: `new` boxed a `Column<T>` whose `T` has this `TypeId`
        // (checked above), and the box is borrowed mutably for the result's
        // lifetime.
        unsafe { &mut *column.cast::<Column<T>>() }
    }
}

impl ValueEntries {
    /// A value state declared with host id `id`; returns its index.
    pub(crate) fn add(&mut self, id: u32) -> usize {
        self.ids.push(id);
        self.columns.push(None);
        self.ids.len() - 1
    }

    /// Fetch the values of `keys` not yet known, in one host call; each
    /// key's entry goes to `entries`, in order (nothing when there is no
    /// value state).
    pub(crate) fn fetch<'a>(
        &mut self,
        keys: impl Iterator<Item = &'a [u8]>,
        entries: &mut Vec<u32>,
    ) {
        if self.ids.is_empty() {
            return;
        }
        let mut requested: Vec<&[u8]> = Vec::new();
        for key in keys {
            let hash = FxBuildHasher.hash_one(key);
            let entry = match self.keys.find(hash, key) {
                Some(e) => e,
                None => {
                    requested.push(key);
                    self.keys.push(hash, key)
                }
            };
            entries.push(entry);
        }
        if requested.is_empty() {
            return;
        }
        let (values, present) = crate::host::with(|h| h.get_values(&self.ids, &requested));
        // A malformed answer is the host's bug: the batch fails with it.
        let expected = requested.len() * self.ids.len();
        if values.ends.len() != expected || present.len() != expected {
            panic!(
                "the host answered get-values with {} values for {expected} requests",
                values.ends.len()
            );
        }
        let base = self.answers.len() as u32;
        let mut from = 0;
        for &end in &values.ends {
            if end < from || end as usize > values.data.len() {
                panic!("the host's answer to get-values ends a value outside its bytes");
            }
            from = end;
            self.answer_ends.push(base + end);
        }
        self.answers.extend_from_slice(&values.data);
        self.present.extend(present);
    }

    /// The current key's cell of state `slot` (fetching the key's values on
    /// a miss), decoded, handed to `f` with its dirty flag. `entry` is the
    /// key's entry when a previous call found it (the caller forgets it
    /// when the key changes), else it is looked up and kept there.
    pub(crate) fn with<T, R>(
        &mut self,
        slot: usize,
        key: &[u8],
        entry: &mut Option<u32>,
        codec: Codec,
        coding: Coding<T>,
        f: impl FnOnce(&mut Option<T>, &mut bool) -> R,
    ) -> crate::Result<R>
    where
        T: 'static,
    {
        let entry = match *entry {
            Some(e) => e,
            None => {
                let hash = FxBuildHasher.hash_one(key);
                let found = match self.keys.find(hash, key) {
                    Some(e) => e,
                    None => {
                        let mut fetched = Vec::with_capacity(1);
                        self.fetch(std::iter::once(key), &mut fetched);
                        fetched[0]
                    }
                };
                *entry = Some(found);
                found
            }
        } as usize;
        let answer = entry * self.ids.len() + slot;
        let raw = self.present[answer].then(|| {
            let start = if answer == 0 {
                0
            } else {
                self.answer_ends[answer - 1] as usize
            };
            &self.answers[start..self.answer_ends[answer] as usize]
        });
        let column = self.columns[slot]
            .get_or_insert_with(|| {
                TypedColumn::new(Column::<T> {
                    cells: Vec::with_capacity(self.keys.len()),
                    coding,
                })
            })
            .get::<T>();
        if column.cells.len() <= entry {
            column.cells.resize_with(entry + 1, || Cell::Raw);
        }
        let cell = &mut column.cells[entry];
        if let Cell::Raw = cell {
            let value = match raw {
                Some(b) => Some(coding.decode(codec, b)?),
                None => None,
            };
            *cell = Cell::Known {
                value,
                dirty: false,
            };
        }
        match cell {
            Cell::Known { value, dirty } => Ok(f(value, dirty)),
            Cell::Raw => unreachable!("decoded above"),
        }
    }

    /// The batch's changes: per state with any puts, its packed puts; the
    /// clears into `clears`.
    pub(crate) fn changes(
        &self,
        codec: Codec,
        puts: &mut Vec<ValuePuts>,
        clears: &mut Vec<StateOp>,
    ) {
        for (column, &state) in self.columns.iter().zip(&self.ids) {
            let Some(column) = column else { continue };
            let mut keys = Packed {
                data: Vec::new(),
                ends: Vec::new(),
            };
            let mut values = Packed {
                data: Vec::new(),
                ends: Vec::new(),
            };
            column
                .column
                .changes(&self.keys, codec, state, (&mut keys, &mut values), clears);
            if !keys.ends.is_empty() {
                puts.push(ValuePuts {
                    state,
                    keys,
                    values,
                });
            }
        }
    }

    /// Forget the batch's entries, keeping the buffers.
    pub(crate) fn clear(&mut self) {
        self.keys.clear();
        self.answers.clear();
        self.answer_ends.clear();
        self.present.clear();
        for typed in self.columns.iter_mut().flatten() {
            typed.column.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::collections::HashMap;
    use std::rc::Rc;

    use super::*;
    use crate::__private::bindings::weir::operator::types::StateKind;
    use crate::LogLevel;
    use crate::host::HostApi;

    /// A host with fixed values, counting the keys it is asked for.
    struct Fixed {
        values: HashMap<(u32, Vec<u8>), Vec<u8>>,
        asked: Rc<RefCell<Vec<Vec<u8>>>>,
    }

    impl HostApi for Fixed {
        fn declare_state(&mut self, _: &str, _: StateKind) -> Result<u32, String> {
            unreachable!()
        }
        fn declare_state_ttl(
            &mut self,
            _: &str,
            _: StateKind,
            _: crate::__private::bindings::weir::operator::types::StateTtl,
        ) -> Result<u32, String> {
            unreachable!()
        }
        fn get_values(&mut self, states: &[u32], keys: &[&[u8]]) -> (Packed, Vec<bool>) {
            let mut present = Vec::new();
            let mut answers = Vec::new();
            for k in keys {
                self.asked.borrow_mut().push(k.to_vec());
                for &s in states {
                    let v = self.values.get(&(s, k.to_vec()));
                    present.push(v.is_some());
                    answers.push(v.cloned().unwrap_or_default());
                }
            }
            (crate::host::pack(answers), present)
        }
        fn get_list(&mut self, _: &StateKey) -> Vec<Vec<u8>> {
            unreachable!()
        }
        fn get_entry(&mut self, _: &StateKey, _: &[u8]) -> Option<Vec<u8>> {
            unreachable!()
        }
        fn get_entries(&mut self, _: &StateKey) -> Vec<(Vec<u8>, Vec<u8>)> {
            unreachable!()
        }
        fn log(&mut self, _: LogLevel, _: &str) {}
    }

    fn strings(p: &Packed) -> Vec<String> {
        crate::host::unpacked(p)
            .unwrap()
            .into_iter()
            .map(|s| String::from_utf8(s.to_vec()).unwrap())
            .collect()
    }

    #[test]
    fn entries_are_fetched_once_decoded_once_and_written_back_when_changed() {
        let asked = Rc::new(RefCell::new(Vec::new()));
        let values = [
            ((7, b"a".to_vec()), b"10".to_vec()),
            ((9, b"b".to_vec()), b"\"x\"".to_vec()),
        ];
        crate::host::install(Box::new(Fixed {
            values: values.into_iter().collect(),
            asked: asked.clone(),
        }));
        let mut e = ValueEntries::default();
        let (count, name) = (e.add(7), e.add(9));
        let json = Codec::Json;
        // The batch's keys in one call, each once.
        let mut entries = Vec::new();
        e.fetch([&b"a"[..], b"b", b"a"].into_iter(), &mut entries);
        assert_eq!(*asked.borrow(), [b"a".to_vec(), b"b".to_vec()]);
        // Each key's entry, in order: the batch's records find their
        // key's values without another lookup.
        assert_eq!(entries, [0, 1, 0]);
        let get = |e: &mut ValueEntries, key: &[u8]| {
            e.with::<i64, _>(count, key, &mut None, json, Coding::serde(), |v, _| *v)
                .unwrap()
        };
        assert_eq!(get(&mut e, b"a"), Some(10));
        assert_eq!(get(&mut e, b"b"), None);
        // A key not fetched with the batch: one more call, for it alone.
        assert_eq!(get(&mut e, b"c"), None);
        assert_eq!(asked.borrow().len(), 3);
        let name_of = |e: &mut ValueEntries, key: &[u8]| {
            e.with::<String, _>(name, key, &mut None, json, Coding::serde(), |v, _| {
                v.clone()
            })
            .unwrap()
        };
        assert_eq!(name_of(&mut e, b"b").as_deref(), Some("x"));
        // A key's entry, once found, is kept by the caller for the next
        // access to any state.
        let mut entry = None;
        e.with::<String, _>(name, b"c", &mut entry, json, Coding::serde(), |_, _| ())
            .unwrap();
        assert_eq!(entry, Some(2));
        let n = e.with::<i64, _>(count, b"zzz", &mut entry, json, Coding::serde(), |v, _| *v);
        assert_eq!(n.unwrap(), None, "entry 2 (`c`) is read, not the key given");
        assert_eq!(asked.borrow().len(), 3);
        // Changes: `a` set, `b`'s name cleared, `c` read only.
        e.with::<i64, _>(count, b"a", &mut None, json, Coding::serde(), |v, dirty| {
            *v = Some(11);
            *dirty = true;
        })
        .unwrap();
        e.with::<String, _>(name, b"b", &mut None, json, Coding::serde(), |v, dirty| {
            *v = None;
            *dirty = true;
        })
        .unwrap();
        let (mut puts, mut clears) = (Vec::new(), Vec::new());
        e.changes(json, &mut puts, &mut clears);
        assert_eq!(puts.len(), 1);
        assert_eq!(
            (puts[0].state, strings(&puts[0].keys)),
            (7, vec!["a".into()])
        );
        assert_eq!(strings(&puts[0].values), ["11"]);
        assert!(matches!(&clears[..], [StateOp::Clear(k)] if k.state == 9 && k.key == b"b"));
        // The next batch starts empty: nothing known, nothing to write.
        e.clear();
        let (mut puts, mut clears) = (Vec::new(), Vec::new());
        e.changes(json, &mut puts, &mut clears);
        assert!(puts.is_empty() && clears.is_empty());
        assert_eq!(get(&mut e, b"b"), None);
        assert_eq!(get(&mut e, b"a"), Some(10), "read from the host again");
        assert_eq!(asked.borrow().len(), 5);
        // A stored value its type cannot read is an error, not a panic.
        let mut other = ValueEntries::default();
        let names_as_numbers = other.add(9);
        assert!(
            other
                .with::<i64, _>(
                    names_as_numbers,
                    b"b",
                    &mut None,
                    json,
                    Coding::serde(),
                    |v, _| *v
                )
                .is_err()
        );
    }

    /// A value that counts how often it is decoded.
    #[derive(serde::Serialize, Clone, Debug, PartialEq)]
    struct Counted(i64);

    static DECODED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

    impl<'de> serde::Deserialize<'de> for Counted {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            DECODED.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            <i64 as serde::Deserialize>::deserialize(d).map(Counted)
        }
    }

    #[test]
    fn a_value_is_decoded_once_per_batch_however_often_it_is_touched() {
        let asked = Rc::new(RefCell::new(Vec::new()));
        crate::host::install(Box::new(Fixed {
            values: [((3, b"k".to_vec()), b"41".to_vec())].into_iter().collect(),
            asked,
        }));
        let mut e = ValueEntries::default();
        let s = e.add(3);
        e.fetch(std::iter::once(&b"k"[..]), &mut Vec::new());
        for _ in 0..3 {
            // A fresh lookup each time (no entry kept by the caller).
            let v = e.with::<Counted, _>(
                s,
                b"k",
                &mut None,
                Codec::Json,
                Coding::serde(),
                |v, dirty| {
                    let n = v.as_ref().map_or(0, |c| c.0);
                    *v = Some(Counted(n + 1));
                    *dirty = true;
                    n
                },
            );
            assert!(v.unwrap() >= 41);
        }
        assert_eq!(DECODED.load(std::sync::atomic::Ordering::SeqCst), 1);
        let (mut puts, mut clears) = (Vec::new(), Vec::new());
        e.changes(Codec::Json, &mut puts, &mut clears);
        assert_eq!(
            strings(&puts[0].values),
            ["44"],
            "encoded once, the last value"
        );
    }

    #[test]
    fn many_keys_grow_the_index_and_keep_each_value() {
        let asked = Rc::new(RefCell::new(Vec::new()));
        let values =
            (0..2000u32).map(|i| ((1, i.to_be_bytes().to_vec()), i.to_string().into_bytes()));
        crate::host::install(Box::new(Fixed {
            values: values.collect(),
            asked: asked.clone(),
        }));
        let mut e = ValueEntries::default();
        let s = e.add(1);
        let keys: Vec<[u8; 4]> = (0..2000u32).map(u32::to_be_bytes).collect();
        e.fetch(keys.iter().map(|k| &k[..]), &mut Vec::new());
        for (i, k) in keys.iter().enumerate().rev() {
            let v = e
                .with::<u32, _>(s, k, &mut None, Codec::Json, Coding::serde(), |v, _| *v)
                .unwrap();
            assert_eq!(v, Some(i as u32));
        }
        assert_eq!(asked.borrow().len(), 2000);
    }
}
