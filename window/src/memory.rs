//! Slots and timers in memory: the store of the SDK's test harness (and of
//! this crate's tests).

use std::collections::{BTreeSet, HashMap};
use std::convert::Infallible;

use crate::{Slot, Store};

/// A window operator's slots per key and its timers, in memory.
#[derive(Debug, Default)]
pub struct MemoryStore {
    /// Each key's open slots.
    pub slots: HashMap<Vec<u8>, Vec<Slot>>,
    /// `(time, key)`, in time order.
    pub timers: BTreeSet<(i64, Vec<u8>)>,
}

impl MemoryStore {
    /// Remove and return the earliest timers due at `upto`, at most
    /// `limit` of them, in time order.
    pub fn take_due(&mut self, upto: i64, limit: usize) -> Vec<(i64, Vec<u8>)> {
        let due: Vec<(i64, Vec<u8>)> = self
            .timers
            .iter()
            .take_while(|(t, _)| *t <= upto)
            .take(limit)
            .cloned()
            .collect();
        for d in &due {
            self.timers.remove(d);
        }
        due
    }
}

impl Store for MemoryStore {
    type Error = Infallible;

    fn load(&mut self, keys: &[&[u8]]) -> Result<Vec<Vec<Slot>>, Infallible> {
        Ok(keys
            .iter()
            .map(|k| self.slots.get(*k).cloned().unwrap_or_default())
            .collect())
    }

    fn save(&mut self, _: usize, key: &[u8], slots: Vec<Slot>) -> Result<(), Infallible> {
        if slots.is_empty() {
            self.slots.remove(key);
        } else {
            self.slots.insert(key.to_vec(), slots);
        }
        Ok(())
    }

    fn timer(&mut self, key: &[u8], time: i64, register: bool) -> Result<(), Infallible> {
        if register {
            self.timers.insert((time, key.to_vec()));
        } else {
            self.timers.remove(&(time, key.to_vec()));
        }
        Ok(())
    }
}
