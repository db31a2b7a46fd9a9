//! Keyed state in hash maps (one per declared state, looked up by borrowed
//! key), timers in ordered sets.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::{StateBackend, StateKind, StateOp, StateSize, TimeDomain, Timer};

type TimerEntry = (i64, Vec<u8>);
type Hasher = std::hash::BuildHasherDefault<rustc_hash::FxHasher>;
type PerKey<T> = HashMap<Vec<u8>, T, Hasher>;

/// Keyed state in hash maps (one per declared state, looked up by borrowed
/// key), timers in ordered sets: fast, bounded by memory.
#[derive(Default)]
pub struct MemoryStateBackend {
    names: Vec<(String, StateKind)>,
    values: Vec<PerKey<Vec<u8>>>,
    lists: Vec<PerKey<Vec<Vec<u8>>>>,
    maps: Vec<PerKey<BTreeMap<Vec<u8>, Vec<u8>>>>,
    event_timers: BTreeSet<TimerEntry>,
    processing_timers: BTreeSet<TimerEntry>,
}

impl MemoryStateBackend {
    /// An empty backend.
    pub fn new() -> Self {
        Self::default()
    }

    fn timers(&mut self, domain: TimeDomain) -> &mut BTreeSet<TimerEntry> {
        match domain {
            TimeDomain::EventTime => &mut self.event_timers,
            TimeDomain::ProcessingTime => &mut self.processing_timers,
        }
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
    fn register(&mut self, name: &str, kind: StateKind) -> Result<u32, String> {
        if let Some(i) = self.names.iter().position(|(n, _)| n == name) {
            if self.names[i].1 != kind {
                return Err(format!(
                    "state `{name}` is already declared as {:?}, not {kind:?}",
                    self.names[i].1
                ));
            }
            return Ok(i as u32);
        }
        self.names.push((name.to_owned(), kind));
        // Every id has a slot of each shape; only the declared one is used.
        self.values.push(PerKey::default());
        self.lists.push(PerKey::default());
        self.maps.push(PerKey::default());
        Ok(self.names.len() as u32 - 1)
    }

    fn get_value(&self, state: u32, key: &[u8]) -> anyhow::Result<Option<Vec<u8>>> {
        Ok(slot(&self.values, state)?.get(key).cloned())
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
        match op {
            StateOp::PutValue { target, value } => {
                let values = slot_mut(&mut self.values, target.state)?;
                match values.get_mut(target.key.as_slice()) {
                    Some(v) => *v = value,
                    None => {
                        values.insert(target.key, value);
                    }
                }
            }
            StateOp::ReplaceList { target, values } => {
                let lists = slot_mut(&mut self.lists, target.state)?;
                if values.is_empty() {
                    lists.remove(target.key.as_slice());
                } else {
                    lists.insert(target.key, values);
                }
            }
            StateOp::AppendList { target, values } => {
                if !values.is_empty() {
                    slot_mut(&mut self.lists, target.state)?
                        .entry(target.key)
                        .or_default()
                        .extend(values)
                }
            }
            StateOp::PutEntry {
                target,
                map_key,
                value,
            } => {
                slot_mut(&mut self.maps, target.state)?
                    .entry(target.key)
                    .or_default()
                    .insert(map_key, value);
            }
            StateOp::RemoveEntry { target, map_key } => {
                let maps = slot_mut(&mut self.maps, target.state)?;
                if let Some(m) = maps.get_mut(target.key.as_slice()) {
                    m.remove(&map_key);
                    if m.is_empty() {
                        maps.remove(target.key.as_slice());
                    }
                }
            }
            StateOp::Clear(k) => {
                slot_mut(&mut self.values, k.state)?.remove(k.key.as_slice());
                slot_mut(&mut self.lists, k.state)?.remove(k.key.as_slice());
                slot_mut(&mut self.maps, k.state)?.remove(k.key.as_slice());
            }
        }
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
        let keyed = |k: &Vec<u8>| k.len() as u64;
        let bytes = self
            .values
            .iter()
            .flatten()
            .map(|(k, v)| keyed(k) + v.len() as u64)
            .sum::<u64>()
            + self
                .lists
                .iter()
                .flatten()
                .map(|(k, l)| keyed(k) + l.iter().map(|v| v.len() as u64).sum::<u64>())
                .sum::<u64>()
            + self
                .maps
                .iter()
                .flatten()
                .map(|(k, m)| {
                    keyed(k)
                        + m.iter()
                            .map(|(a, b)| (a.len() + b.len()) as u64)
                            .sum::<u64>()
                })
                .sum::<u64>();
        StateSize {
            entries: self.len() as u64,
            bytes,
            timers: (self.event_timers.len() + self.processing_timers.len()) as u64,
        }
    }

    fn next_timer(&self, domain: TimeDomain) -> Option<i64> {
        match domain {
            TimeDomain::EventTime => self.event_timers.first().map(|(t, _)| *t),
            TimeDomain::ProcessingTime => self.processing_timers.first().map(|(t, _)| *t),
        }
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
}
