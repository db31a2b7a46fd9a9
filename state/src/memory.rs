//! Keyed state in hash maps (one per declared state, looked up by borrowed
//! key), timers in ordered sets.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use std::path::Path;

use crate::canonical::EntryRef;
use crate::snapshot::{KeyGroups, LocalSnapshot};
use crate::ttl::{Expiry, alive_elements, expired};
use crate::{Declared, StateBackend, StateKind, StateOp, StateSize, TimeDomain, Timer};

type TimerEntry = (i64, Vec<u8>);
type Hasher = std::hash::BuildHasherDefault<rustc_hash::FxHasher>;
type PerKey<T> = HashMap<Vec<u8>, T, Hasher>;

/// Keyed state in hash maps (one per declared state, looked up by borrowed
/// key), timers in ordered sets: fast, bounded by memory.
pub struct MemoryStateBackend {
    max_parallelism: u32,
    names: Vec<Declared>,
    expiry: std::sync::Arc<Expiry>,
    values: Vec<PerKey<Vec<u8>>>,
    lists: Vec<PerKey<Vec<Vec<u8>>>>,
    maps: Vec<PerKey<BTreeMap<Vec<u8>, Vec<u8>>>>,
    event_timers: BTreeSet<TimerEntry>,
    processing_timers: BTreeSet<TimerEntry>,
    /// Bytes of keys and values held, kept up to date by every change (so
    /// [`StateBackend::size`] is cheap enough for a quota check per batch).
    bytes: u64,
}

impl Default for MemoryStateBackend {
    fn default() -> Self {
        Self::with_key_groups(weir_model::keygroup::DEFAULT_MAX_PARALLELISM)
    }
}

impl MemoryStateBackend {
    /// An empty backend (for the default number of key groups).
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty backend for keys spread over `max_parallelism` key groups
    /// (what its snapshots record).
    pub fn with_key_groups(max_parallelism: u32) -> Self {
        MemoryStateBackend {
            max_parallelism: max_parallelism.max(1),
            names: Vec::new(),
            expiry: Default::default(),
            values: Vec::new(),
            lists: Vec::new(),
            maps: Vec::new(),
            event_timers: BTreeSet::new(),
            processing_timers: BTreeSet::new(),
            bytes: 0,
        }
    }

    /// A backend holding the key groups `key_groups` of the canonical
    /// state files `files` (see [`crate::canonical`]), written for
    /// `max_parallelism` key groups.
    pub fn restore(
        files: &[std::path::PathBuf],
        max_parallelism: u32,
        key_groups: KeyGroups,
    ) -> anyhow::Result<Self> {
        let mut b = Self::with_key_groups(max_parallelism);
        crate::canonical::restore(&mut b, max_parallelism, files, &key_groups)?;
        Ok(b)
    }

    fn timers(&mut self, domain: TimeDomain) -> &mut BTreeSet<TimerEntry> {
        match domain {
            TimeDomain::EventTime => &mut self.event_timers,
            TimeDomain::ProcessingTime => &mut self.processing_timers,
        }
    }

    /// Bytes of keys and values, counted one by one.
    #[cfg(test)]
    fn count_bytes(&self) -> u64 {
        (0..self.names.len())
            .map(|s| state_bytes(&self.values[s], &self.lists[s], &self.maps[s]))
            .sum()
    }

    /// Remove what expired at `now` from the states with a time-to-live
    /// (before a snapshot, and now and then: state whose keys never come
    /// back stops growing).
    fn purge(&mut self, now: i64) {
        let mut removed = 0u64;
        for (s, d) in self.names.iter().enumerate() {
            if !d.stamped {
                continue;
            }
            self.values[s].retain(|k, v| {
                let keep = !expired(v, now);
                if !keep {
                    removed += len(k) + len(v);
                }
                keep
            });
            self.lists[s].retain(|k, l| {
                let alive = alive_elements(l, now).len();
                if alive < l.len() {
                    let before = list_bytes(l);
                    l.retain(|v| !expired(v, now));
                    removed += before - list_bytes(l);
                }
                if l.is_empty() {
                    removed += len(k);
                }
                !l.is_empty()
            });
            self.maps[s].retain(|k, m| {
                m.retain(|mk, v| {
                    let keep = !expired(v, now);
                    if !keep {
                        removed += len(mk) + len(v);
                    }
                    keep
                });
                if m.is_empty() {
                    removed += len(k);
                }
                !m.is_empty()
            });
        }
        self.bytes = self.bytes.saturating_sub(removed);
    }

    /// Number of keyed entries held (values, lists and maps).
    pub fn len(&self) -> usize {
        self.values.iter().map(HashMap::len).sum::<usize>()
            + self.lists.iter().map(HashMap::len).sum::<usize>()
            + self.maps.iter().map(HashMap::len).sum::<usize>()
    }

    /// Whether no keyed state is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn len(bytes: &[u8]) -> u64 {
    bytes.len() as u64
}

fn list_bytes(list: &[Vec<u8>]) -> u64 {
    list.iter().map(|v| len(v)).sum()
}

fn map_bytes(map: &BTreeMap<Vec<u8>, Vec<u8>>) -> u64 {
    map.iter().map(|(k, v)| len(k) + len(v)).sum()
}

/// Bytes of the keys and values of one state's entries.
fn state_bytes(
    values: &PerKey<Vec<u8>>,
    lists: &PerKey<Vec<Vec<u8>>>,
    maps: &PerKey<BTreeMap<Vec<u8>, Vec<u8>>>,
) -> u64 {
    values.iter().map(|(k, v)| len(k) + len(v)).sum::<u64>()
        + lists
            .iter()
            .map(|(k, l)| len(k) + list_bytes(l))
            .sum::<u64>()
        + maps.iter().map(|(k, m)| len(k) + map_bytes(m)).sum::<u64>()
}

/// The per-key map of `state`, or an error for an id never registered.
fn slot<T>(maps: &[PerKey<T>], state: u32) -> anyhow::Result<&PerKey<T>> {
    maps.get(state as usize)
        .ok_or_else(|| anyhow::anyhow!("state id {state} was never declared"))
}

fn slot_mut<T>(maps: &mut [PerKey<T>], state: u32) -> anyhow::Result<&mut PerKey<T>> {
    maps.get_mut(state as usize)
        .ok_or_else(|| anyhow::anyhow!("state id {state} was never declared"))
}

impl StateBackend for MemoryStateBackend {
    fn declare(&mut self, name: &str, kind: StateKind, stamped: bool) -> Result<u32, String> {
        if let Some(known) = crate::declared(&self.names, name, kind, stamped) {
            return known;
        }
        self.expiry.declare(self.names.len() as u32, kind, stamped);
        self.names.push(Declared::new(name, kind, stamped));
        // Every id has a slot of each shape; only the declared one is used.
        self.values.push(PerKey::default());
        self.lists.push(PerKey::default());
        self.maps.push(PerKey::default());
        Ok(self.names.len() as u32 - 1)
    }

    fn states(&self) -> &[Declared] {
        &self.names
    }

    fn value_type(&self, state: u32) -> Option<&str> {
        self.names.get(state as usize)?.value_type.as_deref()
    }

    fn retype(
        &mut self,
        state: u32,
        ty: Option<&str>,
        convert: Option<&mut crate::Convert<'_>>,
    ) -> anyhow::Result<()> {
        let s = state as usize;
        anyhow::ensure!(s < self.names.len(), "state id {state} was never declared");
        if let Some(convert) = convert {
            let mut convert = |v: &[u8]| convert(v).map_err(anyhow::Error::msg);
            // Converted aside, swapped in once all converted.
            let values = self.values[s]
                .iter()
                .map(|(k, v)| Ok((k.clone(), convert(v)?)))
                .collect::<anyhow::Result<PerKey<_>>>()?;
            let lists = self.lists[s]
                .iter()
                .map(|(k, l)| {
                    Ok((
                        k.clone(),
                        l.iter()
                            .map(|v| convert(v))
                            .collect::<anyhow::Result<_>>()?,
                    ))
                })
                .collect::<anyhow::Result<PerKey<_>>>()?;
            let maps = self.maps[s]
                .iter()
                .map(|(k, m)| {
                    let m = m
                        .iter()
                        .map(|(mk, v)| Ok((mk.clone(), convert(v)?)))
                        .collect::<anyhow::Result<_>>()?;
                    Ok((k.clone(), m))
                })
                .collect::<anyhow::Result<PerKey<_>>>()?;
            let before = state_bytes(&self.values[s], &self.lists[s], &self.maps[s]);
            let after = state_bytes(&values, &lists, &maps);
            self.bytes = self.bytes.saturating_sub(before) + after;
            (self.values[s], self.lists[s], self.maps[s]) = (values, lists, maps);
        }
        self.names[s].value_type = ty.map(str::to_owned);
        Ok(())
    }

    fn get_value(&self, state: u32, key: &[u8]) -> anyhow::Result<Option<Vec<u8>>> {
        Ok(slot(&self.values, state)?.get(key).cloned())
    }

    fn read_values(
        &self,
        states: &[u32],
        keys: &mut dyn Iterator<Item = &[u8]>,
        data: &mut Vec<u8>,
        ends: &mut Vec<u32>,
        present: &mut Vec<bool>,
    ) -> anyhow::Result<()> {
        let maps = states
            .iter()
            .map(|&s| slot(&self.values, s))
            .collect::<anyhow::Result<Vec<_>>>()?;
        for key in keys {
            for map in &maps {
                let value = map.get(key);
                present.push(value.is_some());
                data.extend_from_slice(value.map_or(&[][..], Vec::as_slice));
                ends.push(data.len() as u32);
            }
        }
        Ok(())
    }

    fn get_list(&self, state: u32, key: &[u8]) -> anyhow::Result<Vec<Vec<u8>>> {
        Ok(slot(&self.lists, state)?
            .get(key)
            .cloned()
            .unwrap_or_default())
    }

    fn get_entry(&self, state: u32, key: &[u8], map_key: &[u8]) -> anyhow::Result<Option<Vec<u8>>> {
        Ok(slot(&self.maps, state)?
            .get(key)
            .and_then(|m| m.get(map_key).cloned()))
    }

    fn get_entries(&self, state: u32, key: &[u8]) -> anyhow::Result<Vec<(Vec<u8>, Vec<u8>)>> {
        Ok(slot(&self.maps, state)?
            .get(key)
            .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default())
    }

    fn apply(&mut self, op: StateOp) -> anyhow::Result<()> {
        // Bytes added and removed; applied together, so a removal counted
        // before its addition never takes the count below zero.
        let (mut added, mut removed) = (0u64, 0u64);
        match op {
            StateOp::PutValue { target, value } => {
                let values = slot_mut(&mut self.values, target.state)?;
                added += len(&value);
                match values.get_mut(target.key.as_slice()) {
                    Some(v) => removed += len(&std::mem::replace(v, value)),
                    None => {
                        added += len(&target.key);
                        values.insert(target.key, value);
                    }
                }
            }
            StateOp::PutValues(puts) => {
                // Existing entries are overwritten in place: no allocation
                // when the new value fits where the old one was (and a
                // much smaller one gets its own, so that what is counted
                // is about what is held).
                let values = slot_mut(&mut self.values, puts.state)?;
                for (key, value) in puts.iter() {
                    added += len(value);
                    match values.get_mut(key) {
                        Some(v) => {
                            removed += len(v);
                            if v.capacity() <= 2 * value.len() + 64 {
                                v.clear();
                                v.extend_from_slice(value);
                            } else {
                                *v = value.to_vec();
                            }
                        }
                        None => {
                            added += len(key);
                            values.insert(key.to_vec(), value.to_vec());
                        }
                    }
                }
            }
            StateOp::ReplaceList { target, values } => {
                let lists = slot_mut(&mut self.lists, target.state)?;
                if let Some(old) = lists.get(target.key.as_slice()) {
                    removed += len(&target.key) + list_bytes(old);
                }
                if values.is_empty() {
                    lists.remove(target.key.as_slice());
                } else {
                    added += len(&target.key) + list_bytes(&values);
                    lists.insert(target.key, values);
                }
            }
            StateOp::AppendList { target, values } => {
                if !values.is_empty() {
                    let lists = slot_mut(&mut self.lists, target.state)?;
                    added += list_bytes(&values);
                    if !lists.contains_key(target.key.as_slice()) {
                        added += len(&target.key);
                    }
                    lists.entry(target.key).or_default().extend(values)
                }
            }
            StateOp::PutEntry {
                target,
                map_key,
                value,
            } => {
                let maps = slot_mut(&mut self.maps, target.state)?;
                if !maps.contains_key(target.key.as_slice()) {
                    added += len(&target.key);
                }
                let map = maps.entry(target.key).or_default();
                added += len(&value);
                match map.get_mut(&map_key) {
                    Some(v) => removed += len(&std::mem::replace(v, value)),
                    None => {
                        added += len(&map_key);
                        map.insert(map_key, value);
                    }
                }
            }
            StateOp::RemoveEntry { target, map_key } => {
                let maps = slot_mut(&mut self.maps, target.state)?;
                if let Some(m) = maps.get_mut(target.key.as_slice()) {
                    if let Some(v) = m.remove(&map_key) {
                        removed += len(&map_key) + len(&v);
                    }
                    if m.is_empty() {
                        maps.remove(target.key.as_slice());
                        removed += len(&target.key);
                    }
                }
            }
            StateOp::Clear(k) => {
                let key = k.key.as_slice();
                if let Some(v) = slot_mut(&mut self.values, k.state)?.remove(key) {
                    removed += len(key) + len(&v);
                }
                if let Some(l) = slot_mut(&mut self.lists, k.state)?.remove(key) {
                    removed += len(key) + list_bytes(&l);
                }
                if let Some(m) = slot_mut(&mut self.maps, k.state)?.remove(key) {
                    removed += len(key) + map_bytes(&m);
                }
            }
        }
        self.bytes = (self.bytes + added).saturating_sub(removed);
        Ok(())
    }

    fn register_timer(&mut self, timer: Timer) -> anyhow::Result<()> {
        self.timers(timer.domain).insert((timer.time, timer.key));
        Ok(())
    }

    fn delete_timer(&mut self, timer: &Timer) -> anyhow::Result<()> {
        self.timers(timer.domain)
            .remove(&(timer.time, timer.key.clone()));
        Ok(())
    }

    fn take_due_timers(
        &mut self,
        domain: TimeDomain,
        upto: i64,
        limit: usize,
    ) -> anyhow::Result<Vec<Timer>> {
        let set = self.timers(domain);
        let mut due = Vec::new();
        while due.len() < limit {
            match set.first() {
                Some((t, _)) if *t <= upto => {
                    let (time, key) = set.pop_first().expect("checked");
                    due.push(Timer { key, time, domain });
                }
                _ => break,
            }
        }
        Ok(due)
    }

    fn size(&self) -> StateSize {
        StateSize {
            entries: self.len() as u64,
            bytes: self.bytes,
            timers: (self.event_timers.len() + self.processing_timers.len()) as u64,
        }
    }

    fn next_timer(&self, domain: TimeDomain) -> Option<i64> {
        match domain {
            TimeDomain::EventTime => self.event_timers.first().map(|(t, _)| *t),
            TimeDomain::ProcessingTime => self.processing_timers.first().map(|(t, _)| *t),
        }
    }

    fn expiry(&self) -> std::sync::Arc<Expiry> {
        self.expiry.clone()
    }

    fn purge_expired(&mut self, now: i64) -> bool {
        if self.names.iter().any(|d| d.stamped) {
            self.purge(now);
        }
        false
    }

    fn snapshot(&mut self, dir: &Path) -> anyhow::Result<LocalSnapshot> {
        crate::canonical::write_snapshot(self, dir)
    }

    fn export(&mut self, path: &Path) -> anyhow::Result<u64> {
        let now = self.expiry.now();
        if self.names.iter().any(|d| d.stamped) {
            self.purge(now);
        }
        let mut w = crate::canonical::Writer::create(path, self.max_parallelism, &self.names, now)?;
        for (s, values) in self.values.iter().enumerate() {
            for (k, v) in values {
                w.entry(s as u32, k, EntryRef::Value(v))?;
            }
        }
        for (s, lists) in self.lists.iter().enumerate() {
            for (k, l) in lists {
                w.entry(s as u32, k, EntryRef::List(l))?;
            }
        }
        for (s, maps) in self.maps.iter().enumerate() {
            for (k, m) in maps {
                for (mk, v) in m {
                    w.entry(s as u32, k, EntryRef::MapEntry(mk, v))?;
                }
            }
        }
        for (domain, set) in [
            (TimeDomain::EventTime, &self.event_timers),
            (TimeDomain::ProcessingTime, &self.processing_timers),
        ] {
            for (time, key) in set {
                w.timer(domain, *time, key)?;
            }
        }
        w.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::StateKey;

    fn key(state: u32, k: &str) -> StateKey {
        StateKey {
            state,
            key: k.as_bytes().to_vec(),
        }
    }

    #[test]
    fn values_and_kinds() {
        let mut b = MemoryStateBackend::new();
        let s = b.register("count", StateKind::Value).unwrap();
        assert_eq!(b.register("count", StateKind::Value).unwrap(), s);
        assert!(b.register("count", StateKind::List).is_err());
        b.apply(StateOp::PutValue {
            target: key(s, "a"),
            value: b"1".to_vec(),
        })
        .unwrap();
        assert_eq!(b.get_value(s, b"a").unwrap(), Some(b"1".to_vec()));
        b.apply(StateOp::Clear(key(s, "a"))).unwrap();
        assert_eq!(b.get_value(s, b"a").unwrap(), None);
    }

    #[test]
    fn timers_fire_in_order_once() {
        let mut b = MemoryStateBackend::new();
        for (t, k) in [(30, "a"), (10, "b"), (20, "a"), (10, "b")] {
            b.register_timer(Timer {
                key: k.into(),
                time: t,
                domain: TimeDomain::EventTime,
            })
            .unwrap();
        }
        b.delete_timer(&Timer {
            key: b"a".to_vec(),
            time: 30,
            domain: TimeDomain::EventTime,
        })
        .unwrap();
        assert_eq!(b.next_timer(TimeDomain::EventTime), Some(10));
        let due = b.take_due_timers(TimeDomain::EventTime, 25, 100).unwrap();
        assert_eq!(due.iter().map(|t| t.time).collect::<Vec<_>>(), [10, 20]);
        assert!(
            b.take_due_timers(TimeDomain::EventTime, i64::MAX, 100)
                .unwrap()
                .is_empty()
        );
        assert_eq!(b.next_timer(TimeDomain::ProcessingTime), None);
    }

    #[test]
    fn the_byte_count_follows_every_change() {
        let mut b = MemoryStateBackend::new();
        let v = b.register("v", StateKind::Value).unwrap();
        let l = b.register("l", StateKind::List).unwrap();
        let m = b.register("m", StateKind::Map).unwrap();
        // A fixed pseudo-random walk over a few keys, every kind of change.
        let mut seed = 7u64;
        let mut next = |n: u64| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) % n
        };
        for _ in 0..5_000 {
            let k = format!("key{}", next(6));
            let bytes = |n: u64| vec![b'x'; n as usize];
            let op = match next(8) {
                0 => StateOp::PutValue {
                    target: key(v, &k),
                    value: bytes(next(20)),
                },
                1 => StateOp::ReplaceList {
                    target: key(l, &k),
                    values: (0..next(3)).map(|i| bytes(i + next(9))).collect(),
                },
                2 => StateOp::AppendList {
                    target: key(l, &k),
                    values: (0..next(3)).map(|i| bytes(i + next(9))).collect(),
                },
                3 => StateOp::PutEntry {
                    target: key(m, &k),
                    map_key: bytes(1 + next(4)),
                    value: bytes(next(12)),
                },
                4 => StateOp::RemoveEntry {
                    target: key(m, &k),
                    map_key: bytes(1 + next(4)),
                },
                5 => StateOp::Clear(key([v, l, m][next(3) as usize], &k)),
                6 => {
                    let (mut keys, mut values) = (Vec::new(), Vec::new());
                    let (mut key_ends, mut value_ends) = (Vec::new(), Vec::new());
                    for _ in 0..next(4) {
                        keys.extend_from_slice(format!("key{}", next(6)).as_bytes());
                        key_ends.push(keys.len() as u32);
                        values.extend(bytes(next(20)));
                        value_ends.push(values.len() as u32);
                    }
                    let keys = crate::Packed::new(keys, key_ends).unwrap();
                    let values = crate::Packed::new(values, value_ends).unwrap();
                    StateOp::PutValues(crate::PackedPuts::new(v, keys, values).unwrap())
                }
                _ => StateOp::Clear(key(v, &k)),
            };
            b.apply(op).unwrap();
            assert_eq!(b.size().bytes, b.count_bytes());
        }
        assert!(b.size().bytes > 0 && b.size().entries > 0);
    }
}
