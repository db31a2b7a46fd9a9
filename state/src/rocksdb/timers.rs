//! Where a RocksDB backend finds its timers: the first timer of each key
//! group in the database ([`Heads`]), and the timers registered since the
//! last drain, still in memory ([`TimerBuffer`]).
//!
//! A window registers a timer per key and window and the timer fires soon
//! after; through RocksDB alone each is an insert, a deletion and an
//! iteration over the deletions before it. Registered timers stay in the
//! buffer instead, and reach the database only when the buffer outgrows
//! its budget. A snapshot writes the buffer beside the database's files
//! ([`TIMERS_FILE`]); a backend opened on a restored snapshot reads it
//! back.
//!
//! The file, every integer big-endian:
//!
//! ```text
//! "WEIRTIMERS1" · timers (u64) · { domain (u8) · time (i64) · key (u32 length · bytes) }
//! ```

use std::collections::{BTreeSet, HashMap};
use std::path::Path;

use crate::snapshot::codec;

/// The buffered timers' file in a snapshot's directory.
pub(super) const TIMERS_FILE: &str = "weir-timers";

const TIMERS_MAGIC: &[u8] = b"WEIRTIMERS1";

/// Timers (both domains) the buffer holds before it drains.
pub(super) const TIMER_BUFFER_LEN: usize = 200_000;

/// Per domain: each key group's first timer in the database, and the same
/// ordered by time.
#[derive(Default)]
pub(super) struct Heads {
    pub(super) by_group: HashMap<u32, i64>,
    pub(super) ordered: BTreeSet<(i64, u32)>,
}

impl Heads {
    pub(super) fn set(&mut self, group: u32, time: Option<i64>) {
        if let Some(old) = self.by_group.remove(&group) {
            self.ordered.remove(&(old, group));
        }
        if let Some(t) = time {
            self.by_group.insert(group, t);
            self.ordered.insert((t, group));
        }
    }

    pub(super) fn lower(&mut self, group: u32, time: i64) {
        if self.by_group.get(&group).is_none_or(|&t| time < t) {
            self.set(group, Some(time));
        }
    }
}

/// Timers registered since the last drain, per domain, as (time, key): a
/// timer may be in the database too (registered again after a drain); the
/// backend merges both when timers fire.
#[derive(Default)]
pub(super) struct TimerBuffer {
    domains: [BTreeSet<(i64, Vec<u8>)>; 2],
}

impl TimerBuffer {
    pub(super) fn insert(&mut self, domain: usize, time: i64, key: Vec<u8>) {
        self.domains[domain].insert((time, key));
    }

    pub(super) fn remove(&mut self, domain: usize, time: i64, key: &[u8]) {
        // The set's order is (time, key): a borrowed key cannot look it up.
        self.domains[domain].remove(&(time, key.to_vec()));
    }

    /// The earliest timer of `domain`.
    pub(super) fn first(&self, domain: usize) -> Option<i64> {
        self.domains[domain].first().map(|(t, _)| *t)
    }

    /// Remove and return the timers of `domain` at or before `upto`, in
    /// (time, key) order, at most `limit`.
    pub(super) fn take(&mut self, domain: usize, upto: i64, limit: usize) -> Vec<(i64, Vec<u8>)> {
        let set = &mut self.domains[domain];
        let mut out = Vec::new();
        while out.len() < limit {
            match set.first() {
                Some((t, _)) if *t <= upto => out.push(set.pop_first().expect("seen")),
                _ => break,
            }
        }
        out
    }

    pub(super) fn len(&self) -> usize {
        self.domains.iter().map(BTreeSet::len).sum()
    }

    pub(super) fn is_full(&self) -> bool {
        self.len() >= TIMER_BUFFER_LEN
    }

    /// Everything it holds, per domain, emptying it.
    pub(super) fn drain(&mut self) -> [BTreeSet<(i64, Vec<u8>)>; 2] {
        std::mem::take(&mut self.domains)
    }

    /// Write what it holds to `path` ([`TIMERS_FILE`]'s format).
    pub(super) fn write_to(&self, path: &Path) -> anyhow::Result<()> {
        let mut out = TIMERS_MAGIC.to_vec();
        out.extend_from_slice(&(self.len() as u64).to_be_bytes());
        for (domain, set) in self.domains.iter().enumerate() {
            for (time, key) in set {
                out.push(domain as u8);
                out.extend_from_slice(&time.to_be_bytes());
                codec::bytes(&mut out, key);
            }
        }
        std::fs::write(path, out)
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))
    }

    /// Add the timers of the file at `path`.
    pub(super) fn read_from(&mut self, path: &Path) -> anyhow::Result<()> {
        let bytes = std::fs::read(path)
            .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
        let mut r = codec::Reader(&bytes);
        anyhow::ensure!(
            r.take(TIMERS_MAGIC.len())? == TIMERS_MAGIC,
            "{} is not a timers file",
            path.display()
        );
        for _ in 0..r.u64()? {
            let domain = r.u8()? as usize;
            anyhow::ensure!(
                domain < 2,
                "{}: unknown timer domain {domain}",
                path.display()
            );
            let time = r.i64()?;
            self.insert(domain, time, r.bytes()?);
        }
        anyhow::ensure!(
            r.is_empty(),
            "{} has bytes after its timers",
            path.display()
        );
        Ok(())
    }
}

/// Two runs of due timers, each in (time, key) order, as one in that order
/// with each timer once.
pub(super) fn merge(mut a: Vec<(i64, Vec<u8>)>, b: Vec<(i64, Vec<u8>)>) -> Vec<(i64, Vec<u8>)> {
    if b.is_empty() {
        return a;
    }
    a.extend(b);
    a.sort_unstable();
    a.dedup();
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_buffer_hands_out_due_timers_in_order_within_the_limit() {
        let mut b = TimerBuffer::default();
        for (t, k) in [(5, "b"), (1, "z"), (5, "a"), (9, "c")] {
            b.insert(0, t, k.as_bytes().to_vec());
        }
        b.insert(1, 2, b"p".to_vec());
        b.remove(0, 9, b"c");
        assert_eq!(b.first(0), Some(1));
        assert_eq!(
            b.take(0, 5, 2),
            vec![(1, b"z".to_vec()), (5, b"a".to_vec())]
        );
        assert_eq!(b.take(0, 4, 10), vec![]);
        assert_eq!(b.len(), 2);
        let [event, processing] = b.drain();
        assert_eq!(event.len() + processing.len(), 2);
        assert_eq!(b.first(0), None);
    }

    #[test]
    fn the_buffer_reads_back_what_it_wrote() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(TIMERS_FILE);
        let mut b = TimerBuffer::default();
        b.insert(0, -3, b"a".to_vec());
        b.insert(1, 7, Vec::new());
        b.write_to(&path).unwrap();
        let mut back = TimerBuffer::default();
        back.read_from(&path).unwrap();
        assert_eq!(back.take(0, 0, 10), vec![(-3, b"a".to_vec())]);
        assert_eq!(back.take(1, 7, 10), vec![(7, Vec::new())]);
        std::fs::write(&path, b"WEIRTIMERS1\0\0\0\0\0\0\0\x01\x00").unwrap();
        assert!(back.read_from(&path).is_err(), "truncated");
    }

    #[test]
    fn merged_runs_keep_each_timer_once() {
        let a = vec![(1, b"a".to_vec()), (3, b"c".to_vec())];
        let b = vec![(1, b"a".to_vec()), (2, b"b".to_vec())];
        assert_eq!(
            merge(a, b),
            vec![(1, b"a".to_vec()), (2, b"b".to_vec()), (3, b"c".to_vec())]
        );
    }
}
