//! The value states a RocksDB backend keeps in memory, in front of the
//! database.
//!
//! A keyed count reads and writes the same keys again and again; through
//! RocksDB alone each update is a search of the memtable (which holds every
//! version of the key since its last flush, so even a hit is a search) and
//! an insert into it. The cache holds values read or written since it last
//! started over, and keeps writes to them until it is *drained*: when it
//! outgrows its budget, and before every snapshot (so a checkpoint holds
//! every change). Between drains a value written many times reaches RocksDB
//! once.
//!
//! Writes skip RocksDB's log anyway: a backend's contents outlive a failure
//! only through checkpoints, and a checkpoint drains the cache first, so
//! holding writes here loses nothing a failure would not lose.

use std::collections::HashMap;

/// Bytes of keys and values a cache holds before it drains and starts
/// over.
pub(super) const VALUE_CACHE_BYTES: usize = 16 << 20;

/// What each entry costs beyond its key and value (the map's slot, the
/// vectors' headers).
const ENTRY_OVERHEAD: usize = 80;

struct Cached {
    /// The value (`None`: the state is unset).
    value: Option<Vec<u8>>,
    /// Changed since RocksDB last saw it.
    dirty: bool,
    /// Whether RocksDB may hold a value for the key (an unset state that it
    /// never held needs no deletion written).
    stored: bool,
}

/// Value states by their RocksDB key.
#[derive(Default)]
pub(super) struct ValueCache {
    entries: HashMap<Vec<u8>, Cached>,
    bytes: usize,
    /// How many set values RocksDB holds no version of (kept up to date,
    /// for a cheap count of the backend's entries).
    unstored: usize,
}

impl Cached {
    fn unstored(&self) -> bool {
        self.value.is_some() && !self.stored
    }
}

fn size(key: &[u8], value: &Option<Vec<u8>>) -> usize {
    key.len() + value.as_ref().map_or(0, Vec::len) + ENTRY_OVERHEAD
}

impl ValueCache {
    /// The cached value of `key`: `Some(None)` when it is known to be unset,
    /// `None` when the cache does not know.
    pub(super) fn get(&self, key: &[u8]) -> Option<Option<&[u8]>> {
        self.entries.get(key).map(|c| c.value.as_deref())
    }

    /// `value` was read from RocksDB for `key`.
    pub(super) fn loaded(&mut self, key: Vec<u8>, value: Option<Vec<u8>>) {
        if self.entries.contains_key(&key) {
            return;
        }
        self.bytes += size(&key, &value);
        let stored = value.is_some();
        self.entries.insert(
            key,
            Cached {
                value,
                dirty: false,
                stored,
            },
        );
    }

    fn set(&mut self, key: Vec<u8>, value: Option<Vec<u8>>) {
        let new = size(&key, &value);
        match self.entries.get_mut(&key) {
            Some(c) => {
                self.bytes = self.bytes + new - size(&key, &c.value);
                self.unstored -= usize::from(c.unstored());
                if value.is_none() && !c.stored {
                    // Unset, and RocksDB never held it: nothing to write.
                    c.dirty = false;
                } else {
                    c.dirty = true;
                }
                c.value = value;
                self.unstored += usize::from(c.unstored());
            }
            None => {
                self.bytes += new;
                // Not read first: RocksDB may hold an older value.
                self.entries.insert(
                    key,
                    Cached {
                        value,
                        dirty: true,
                        stored: true,
                    },
                );
            }
        }
    }

    /// `key` is set to `value`.
    pub(super) fn put(&mut self, key: Vec<u8>, value: Vec<u8>) {
        self.set(key, Some(value));
    }

    /// `key` is unset.
    pub(super) fn clear(&mut self, key: Vec<u8>) {
        self.set(key, None);
    }

    /// Whether it holds more than its budget.
    pub(super) fn is_full(&self) -> bool {
        self.bytes > VALUE_CACHE_BYTES
    }

    /// The changes RocksDB has not seen (a value to put, or `None` to
    /// delete), which from now on it has.
    pub(super) fn drain(&mut self) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
        let mut out = Vec::new();
        for (k, c) in self.entries.iter_mut().filter(|(_, c)| c.dirty) {
            c.dirty = false;
            c.stored = c.value.is_some();
            out.push((k.clone(), c.value.clone()));
        }
        // Every value is stored now; a clean one always was.
        self.unstored = 0;
        out
    }

    /// Forget everything (after a drain).
    pub(super) fn reset(&mut self) {
        debug_assert!(self.entries.values().all(|c| !c.dirty));
        self.entries.clear();
        self.bytes = 0;
        self.unstored = 0;
    }

    /// How many of its set values RocksDB holds no version of.
    pub(super) fn unstored(&self) -> usize {
        self.unstored
    }

    /// The same, counted one by one (what the count must agree with).
    #[cfg(test)]
    fn recount_unstored(&self) -> usize {
        self.entries.values().filter(|c| c.unstored()).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_wait_for_a_drain_and_an_unset_never_stored_key_writes_nothing() {
        let mut c = ValueCache::default();
        c.loaded(b"a".to_vec(), None);
        c.put(b"a".to_vec(), b"1".to_vec());
        c.put(b"a".to_vec(), b"2".to_vec());
        assert_eq!(c.get(b"a"), Some(Some(&b"2"[..])));
        c.loaded(b"b".to_vec(), Some(b"x".to_vec()));
        assert_eq!(c.unstored(), 1);
        assert_eq!(c.recount_unstored(), 1);
        assert_eq!(c.drain(), vec![(b"a".to_vec(), Some(b"2".to_vec()))]);
        assert!(c.drain().is_empty(), "drained once");
        // Stored now: clearing it writes a deletion.
        c.clear(b"a".to_vec());
        assert_eq!(c.drain(), vec![(b"a".to_vec(), None)]);
        // Set and cleared between drains, never stored: nothing.
        c.loaded(b"n".to_vec(), None);
        c.put(b"n".to_vec(), b"1".to_vec());
        c.clear(b"n".to_vec());
        assert_eq!(c.unstored(), c.recount_unstored());
        assert_eq!(c.get(b"n"), Some(None));
        // Written without a read: RocksDB may hold an older value.
        c.put(b"w".to_vec(), b"1".to_vec());
        c.clear(b"w".to_vec());
        assert_eq!(c.drain(), vec![(b"w".to_vec(), None)]);
        assert_eq!(c.unstored(), c.recount_unstored());
        c.reset();
        assert_eq!(c.get(b"a"), None);
        assert!(!c.is_full());
    }
}
