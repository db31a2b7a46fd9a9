//! What expired leaves RocksDB two ways. Compactions drop it: a compaction
//! filter over the `state` family removes a stamped value (or map entry)
//! whose time ran out, and a list once all its elements expired. A list
//! only some of whose elements expired cannot be rewritten by the filter
//! (its binding can only keep or drop an entry, or put a `'static` value
//! in its place), so a pass over the stored lists of states with a
//! time-to-live rewrites them without their expired elements, a bounded
//! step at a time ([`RocksDbStateBackend::PURGE_STEP`] entries).

use rocksdb::{Direction, IteratorMode, ReadOptions, WriteBatch};

use super::{RocksDbStateBackend, STATE, encode_list};
use crate::StateKind;
use crate::ttl::{Expiry, alive_elements, expired};

/// The state id of a `state` family key (key group, then state id).
pub(super) fn state_of(key: &[u8]) -> Option<u32> {
    Some(u32::from_be_bytes(key.get(4..8)?.try_into().ok()?))
}

/// Whether the compaction filter drops the stored entry `key` → `value`:
/// its state has a time-to-live and it expired (a list: all its elements).
pub(super) fn expires(expiry: &Expiry, key: &[u8], value: &[u8]) -> bool {
    let Some(state) = state_of(key) else {
        return false;
    };
    let now = || expiry.now();
    match expiry.stamped(state) {
        None => false,
        Some(StateKind::List) => crate::canonical::decode_list(value).is_ok_and(|l| {
            !l.is_empty() && {
                let now = now();
                l.iter().all(|v| expired(v, now))
            }
        }),
        Some(_) => expired(value, now()),
    }
}

impl RocksDbStateBackend {
    /// How many entries of the `state` family one step of the pass over
    /// lists with expired elements reads at most: a step per batch keeps
    /// each batch's pause short on a large state.
    pub const PURGE_STEP: usize = 10_000;

    /// How many bytes (keys and values) one step reads at most.
    pub const PURGE_STEP_BYTES: usize = 8 << 20;

    /// One step of the pass over the stored lists of states with a
    /// time-to-live: from where the last step stopped, up to
    /// [`Self::PURGE_STEP`] entries or [`Self::PURGE_STEP_BYTES`], each
    /// list at least half of whose elements expired written back without
    /// them (removed once none is left; a list is rewritten only once its
    /// expired elements are as many as its live ones, so a pass writes
    /// little and a list holds at most twice what is alive). Whether the
    /// pass goes on.
    pub(super) fn purge_step(&mut self, now: i64) -> anyhow::Result<bool> {
        if !self.expiry.stamps_lists() {
            self.purge_from = None;
            return Ok(false);
        }
        let from = self.purge_from.take().unwrap_or_default();
        let cf = self.cf(STATE);
        let mut batch = WriteBatch::default();
        let mut next = None;
        // A pass reads the whole family once: not into the block cache.
        let mut options = ReadOptions::default();
        options.fill_cache(false);
        let it =
            self.db()
                .iterator_cf_opt(cf, options, IteratorMode::From(&from, Direction::Forward));
        let mut bytes = 0;
        for (read, item) in it.enumerate() {
            let (key, value) = item?;
            if read == Self::PURGE_STEP || bytes >= Self::PURGE_STEP_BYTES {
                next = Some(key.into_vec());
                break;
            }
            bytes += key.len() + value.len();
            if state_of(&key).is_none_or(|s| self.expiry.stamped(s) != Some(StateKind::List)) {
                continue;
            }
            let Ok(list) = crate::canonical::decode_list(&value) else {
                continue;
            };
            let alive = alive_elements(&list, now);
            if alive.len() * 2 > list.len() {
                continue;
            }
            if alive.is_empty() {
                batch.delete_cf(cf, &key);
            } else {
                let alive: Vec<Vec<u8>> = alive.into_iter().map(<[u8]>::to_vec).collect();
                batch.put_cf(cf, &key, encode_list(&alive));
            }
        }
        self.commit(batch)?;
        self.purge_from = next;
        Ok(self.purge_from.is_some())
    }
}
