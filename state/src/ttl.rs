//! State time-to-live (Flink's `StateTtlConfig`): a state declared with a
//! time-to-live keeps, with each value, the time it expires; a value past
//! it is never returned, and goes from the state in time.
//!
//! - **Stamps.** A value of such a state is stored as its expiry time (i64,
//!   big-endian, milliseconds of processing time) followed by its bytes; a
//!   list's every element and a map's every value carry their own. A write
//!   stamps it `now + ttl`; with [`StateTtl::refresh_on_read`], a read that
//!   finds it alive stamps it again.
//! - **Visibility.** [`TtlBackend`], over any backend, strips the stamps of
//!   what it reads and drops what expired (a dropped value is cleared with
//!   the batch's changes).
//! - **Cleanup.** Expired values leave every full snapshot (the canonical
//!   writer skips them: the memory backend's checkpoints, every savepoint)
//!   and, on RocksDB, every compaction (a compaction filter): state whose
//!   keys never come back stops growing.
//!
//! Which states carry stamps is part of the state ([`Expiry`]): a restore
//! knows it, and a state stored with stamps cannot be declared without a
//! time-to-live, nor the other way round. The time-to-live itself is the
//! operator's to change from one version to the next: stamps written
//! before keep their expiry time.

use std::cell::RefCell;
use std::sync::{Arc, RwLock};

use crate::snapshot::LocalSnapshot;
use crate::{
    PackedPuts, StateBackend, StateKey, StateKind, StateOp, StateSize, TimeDomain, Timer, TimerOp,
};

/// How long a state's values live.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StateTtl {
    /// Milliseconds of processing time from a value's last write (at least
    /// 1).
    pub ttl_ms: u64,
    /// Whether a read that finds a value alive renews it too (Flink's
    /// `OnReadAndWrite`); otherwise only writes do (`OnCreateAndWrite`).
    pub refresh_on_read: bool,
}

/// Processing time, in milliseconds: the system's, or a test's.
pub type Clock = Arc<dyn Fn() -> i64 + Send + Sync>;

/// The system's clock.
pub fn system_clock() -> Clock {
    Arc::new(weir_model::now_ms)
}

/// Bytes of a stamp.
pub const STAMP: usize = 8;

/// `value` stamped to expire at `expires_at`.
pub fn stamp(expires_at: i64, value: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(STAMP + value.len());
    out.extend_from_slice(&expires_at.to_be_bytes());
    out.extend_from_slice(value);
    out
}

/// A stamped value's expiry time and bytes (`None`: too short to be one).
pub fn unstamp(stored: &[u8]) -> Option<(i64, &[u8])> {
    let at = i64::from_be_bytes(stored.get(..STAMP)?.try_into().ok()?);
    Some((at, &stored[STAMP..]))
}

/// Whether a stamped value is expired at `now` (a value too short to hold a
/// stamp counts as expired: it can never be read).
pub fn expired(stored: &[u8], now: i64) -> bool {
    unstamp(stored).is_none_or(|(at, _)| at <= now)
}

/// Which states of a backend carry stamps, and the clock they expire by:
/// shared by the backend, its cleanup (a compaction filter runs on other
/// threads) and the [`TtlBackend`] over it.
pub struct Expiry {
    /// Whether any state carries stamps (a compaction's fast path).
    any: std::sync::atomic::AtomicBool,
    /// Per state id: its kind, if its values carry stamps.
    stamped: RwLock<Vec<Option<StateKind>>>,
    clock: RwLock<Clock>,
}

impl Default for Expiry {
    fn default() -> Self {
        Expiry {
            any: std::sync::atomic::AtomicBool::new(false),
            stamped: RwLock::default(),
            clock: RwLock::new(system_clock()),
        }
    }
}

impl std::fmt::Debug for Expiry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Expiry")
            .field(
                "stamped",
                &*self.stamped.read().unwrap_or_else(|p| p.into_inner()),
            )
            .finish_non_exhaustive()
    }
}

impl Expiry {
    /// Processing time now.
    pub fn now(&self) -> i64 {
        (self.clock.read().unwrap_or_else(|p| p.into_inner()))()
    }

    /// Expire by `clock` from now on (a test's).
    pub fn set_clock(&self, clock: Clock) {
        *self.clock.write().unwrap_or_else(|p| p.into_inner()) = clock;
    }

    /// State `state`'s kind, if its values carry stamps.
    pub fn stamped(&self, state: u32) -> Option<StateKind> {
        if !self.any.load(std::sync::atomic::Ordering::Relaxed) {
            return None;
        }
        self.stamped
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(state as usize)
            .copied()
            .flatten()
    }

    /// Whether a list state carries stamps (its elements expire one by
    /// one).
    pub fn stamps_lists(&self) -> bool {
        self.any.load(std::sync::atomic::Ordering::Relaxed)
            && self
                .stamped
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .contains(&Some(StateKind::List))
    }

    /// State `state` of kind `kind` is declared, with stamps or not.
    pub(crate) fn declare(&self, state: u32, kind: StateKind, stamped: bool) {
        let mut s = self.stamped.write().unwrap_or_else(|p| p.into_inner());
        if s.len() <= state as usize {
            s.resize(state as usize + 1, None);
        }
        s[state as usize] = stamped.then_some(kind);
        if stamped {
            self.any.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

/// A list's elements that are alive at `now`, their stamps kept.
pub(crate) fn alive_elements(values: &[Vec<u8>], now: i64) -> Vec<&[u8]> {
    values
        .iter()
        .filter(|v| !expired(v, now))
        .map(Vec::as_slice)
        .collect()
}

/// Time-to-live over a backend: stamps what is written to states declared
/// with one, and never returns what expired.
pub struct TtlBackend {
    inner: Box<dyn StateBackend>,
    /// Per state id: its time-to-live, if declared with one.
    ttls: Vec<Option<StateTtl>>,
    expiry: Arc<Expiry>,
    /// Changes that reads found due (expired values to clear, values to
    /// renew), applied before the next batch's changes.
    due: RefCell<Vec<StateOp>>,
    /// When the backend last finished removing what expired
    /// ([`PURGE_EVERY_MS`]).
    purged_at: i64,
    /// A pass removing what expired goes on (a step per batch).
    purging: bool,
    /// Why declarations were refused ([`TtlBackend::refusals`]).
    refused: Arc<std::sync::Mutex<Vec<String>>>,
}

/// How often (ms of processing time) a backend without a cleanup of its
/// own removes what expired, snapshots aside (a job without checkpoints
/// must not grow either): a pass over its states with a time-to-live.
pub const PURGE_EVERY_MS: i64 = 60_000;

impl TtlBackend {
    /// `inner`, its states' time-to-live kept by this layer.
    pub fn new(inner: Box<dyn StateBackend>) -> TtlBackend {
        let expiry = inner.expiry();
        TtlBackend {
            inner,
            ttls: Vec::new(),
            purged_at: expiry.now(),
            purging: false,
            expiry,
            due: RefCell::default(),
            refused: Arc::default(),
        }
    }

    /// The backend under it, as it stores values (stamped).
    pub fn inner(&self) -> &dyn StateBackend {
        self.inner.as_ref()
    }

    /// Expire by `clock` (processing time under a test's control).
    pub fn with_clock(mut self, clock: Clock) -> TtlBackend {
        self.expiry.set_clock(clock);
        self.purged_at = self.expiry.now();
        self
    }

    /// Why declarations of states were refused (a kind, or a
    /// time-to-live, other than the state has): kept, as the operator may
    /// not say why it failed.
    pub fn refusals(&self) -> Arc<std::sync::Mutex<Vec<String>>> {
        self.refused.clone()
    }

    fn record_refusal(&self, why: String) -> String {
        self.refused
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(why.clone());
        why
    }

    fn ttl(&self, state: u32) -> Option<StateTtl> {
        self.ttls.get(state as usize).copied().flatten()
    }

    fn expires_at(&self, ttl: StateTtl) -> i64 {
        self.expiry
            .now()
            .saturating_add(i64::try_from(ttl.ttl_ms).unwrap_or(i64::MAX))
    }

    /// A stored value of `state` (a map state's entry `map_key`) as read:
    /// its bytes if alive (renewed if reads renew it), `None` (and removed)
    /// if expired.
    fn read_stamped(
        &self,
        state: u32,
        key: &[u8],
        map_key: Option<&[u8]>,
        stored: Option<Vec<u8>>,
    ) -> Option<Vec<u8>> {
        let ttl = self.ttl(state)?;
        let stored = stored?;
        let target = StateKey {
            state,
            key: key.to_vec(),
        };
        match unstamp(&stored) {
            Some((at, value)) if at > self.expiry.now() => {
                if ttl.refresh_on_read {
                    let value = stamp(self.expires_at(ttl), value);
                    self.due.borrow_mut().push(match map_key {
                        None => StateOp::PutValue { target, value },
                        Some(k) => StateOp::PutEntry {
                            target,
                            map_key: k.to_vec(),
                            value,
                        },
                    });
                }
                Some(value.to_vec())
            }
            _ => {
                self.due.borrow_mut().push(match map_key {
                    None => StateOp::Clear(target),
                    Some(k) => StateOp::RemoveEntry {
                        target,
                        map_key: k.to_vec(),
                    },
                });
                None
            }
        }
    }

    fn stamp_values(&self, ttl: StateTtl, values: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
        let at = self.expires_at(ttl);
        values.iter().map(|v| stamp(at, v)).collect()
    }

    /// A list replaced by `values`: an element the stored list holds, alive,
    /// keeps its expiry time (an operator rewrote its list, `update` with
    /// some old elements kept: they are not written again); the others are
    /// stamped now. With `refresh_on_read`, all are
    /// (the list was read).
    fn restamp_list(
        &self,
        ttl: StateTtl,
        target: &StateKey,
        values: Vec<Vec<u8>>,
    ) -> anyhow::Result<Vec<Vec<u8>>> {
        if ttl.refresh_on_read || values.is_empty() {
            return Ok(self.stamp_values(ttl, values));
        }
        let stored = self.inner.get_list(target.state, &target.key)?;
        let now = self.expiry.now();
        let alive = alive_elements(&stored, now);
        let at = self.expires_at(ttl);
        // Each stored element stands for one equal new one, in order.
        let mut kept: std::collections::HashMap<&[u8], std::collections::VecDeque<&[u8]>> =
            std::collections::HashMap::new();
        for old in &alive {
            kept.entry(&old[STAMP..]).or_default().push_back(old);
        }
        Ok(values
            .iter()
            .map(|v| {
                match kept
                    .get_mut(v.as_slice())
                    .and_then(std::collections::VecDeque::pop_front)
                {
                    Some(old) => old.to_vec(),
                    None => stamp(at, v),
                }
            })
            .collect())
    }

    /// `op`, its values stamped if its state has a time-to-live.
    fn stamped(&self, op: StateOp) -> anyhow::Result<StateOp> {
        let state = match &op {
            StateOp::PutValue { target, .. }
            | StateOp::ReplaceList { target, .. }
            | StateOp::AppendList { target, .. }
            | StateOp::PutEntry { target, .. } => target.state,
            StateOp::PutValues(puts) => puts.state,
            StateOp::RemoveEntry { .. } | StateOp::Clear(_) => return Ok(op),
        };
        let Some(ttl) = self.ttl(state) else {
            return Ok(op);
        };
        let at = self.expires_at(ttl);
        Ok(match op {
            StateOp::PutValue { target, value } => StateOp::PutValue {
                target,
                value: stamp(at, &value),
            },
            StateOp::ReplaceList { target, values } => {
                let values = self.restamp_list(ttl, &target, values)?;
                StateOp::ReplaceList { target, values }
            }
            StateOp::AppendList { target, values } => StateOp::AppendList {
                target,
                values: self.stamp_values(ttl, values),
            },
            StateOp::PutEntry {
                target,
                map_key,
                value,
            } => StateOp::PutEntry {
                target,
                map_key,
                value: stamp(at, &value),
            },
            StateOp::PutValues(puts) => {
                let mut data = Vec::with_capacity(puts.values.bytes() + STAMP * puts.values.len());
                let mut ends = Vec::with_capacity(puts.values.len());
                for v in puts.values.iter() {
                    data.extend_from_slice(&at.to_be_bytes());
                    data.extend_from_slice(v);
                    ends.push(data.len() as u32);
                }
                let values = crate::Packed::new(data, ends).map_err(anyhow::Error::msg)?;
                StateOp::PutValues(
                    PackedPuts::new(puts.state, puts.keys, values).map_err(anyhow::Error::msg)?,
                )
            }
            other => other,
        })
    }

    /// A list read: its live elements, unstamped; the stored list rewritten
    /// if some expired, or renewed if reads renew it.
    fn read_list(&self, state: u32, key: &[u8], stored: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
        let Some(ttl) = self.ttl(state) else {
            return stored;
        };
        let now = self.expiry.now();
        let alive = alive_elements(&stored, now);
        let values: Vec<Vec<u8>> = alive.iter().map(|v| v[STAMP..].to_vec()).collect();
        let target = StateKey {
            state,
            key: key.to_vec(),
        };
        if ttl.refresh_on_read && !values.is_empty() {
            self.due.borrow_mut().push(StateOp::ReplaceList {
                target,
                values: self.stamp_values(ttl, values.clone()),
            });
        } else if alive.len() < stored.len() {
            let kept = alive.iter().map(|v| v.to_vec()).collect();
            self.due.borrow_mut().push(StateOp::ReplaceList {
                target,
                values: kept,
            });
        }
        values
    }
}

impl StateBackend for TtlBackend {
    fn declare(&mut self, name: &str, kind: StateKind, stamped: bool) -> Result<u32, String> {
        // A restore's declaration: what it writes is stored as it was
        // (stamps and all); the operator declares the time-to-live.
        let id = self
            .inner
            .declare(name, kind, stamped)
            .map_err(|why| self.record_refusal(why))?;
        if self.ttls.len() <= id as usize {
            self.ttls.resize(id as usize + 1, None);
        }
        Ok(id)
    }

    fn declare_ttl(
        &mut self,
        name: &str,
        kind: StateKind,
        ttl: Option<StateTtl>,
    ) -> Result<u32, String> {
        if let Some(t) = ttl
            && t.ttl_ms == 0
        {
            return Err(format!(
                "state `{name}`: a time-to-live of 0 ms keeps nothing (give at least 1 ms)"
            ));
        }
        let id = self
            .inner
            .declare(name, kind, ttl.is_some())
            .map_err(|why| self.record_refusal(why))?;
        if self.ttls.len() <= id as usize {
            self.ttls.resize(id as usize + 1, None);
        }
        self.ttls[id as usize] = ttl;
        Ok(id)
    }

    fn expiry(&self) -> Arc<Expiry> {
        self.expiry.clone()
    }

    fn states(&self) -> &[crate::Declared] {
        self.inner.states()
    }

    fn value_type(&self, state: u32) -> Option<&str> {
        self.inner.value_type(state)
    }

    fn refuse(&self, why: String) -> String {
        self.record_refusal(why)
    }

    fn retype(
        &mut self,
        state: u32,
        ty: Option<&str>,
        convert: Option<&mut crate::Convert<'_>>,
    ) -> anyhow::Result<()> {
        let stamped = self.expiry.stamped(state).is_some();
        match convert {
            // A stamped value's bytes follow its stamp, which stays.
            Some(convert) if stamped => {
                // What expired is never read again: left as it is, to go
                // with the next purge.
                let now = self.expiry.now();
                let mut restamped = |stored: &[u8]| match unstamp(stored) {
                    Some((at, value)) if at > now => Ok(stamp(at, &convert(value)?)),
                    _ => Ok(stored.to_vec()),
                };
                self.inner.retype(state, ty, Some(&mut restamped))
            }
            convert => self.inner.retype(state, ty, convert),
        }
    }

    fn get_value(&self, state: u32, key: &[u8]) -> anyhow::Result<Option<Vec<u8>>> {
        let stored = self.inner.get_value(state, key)?;
        Ok(match self.ttl(state) {
            None => stored,
            Some(_) => self.read_stamped(state, key, None, stored),
        })
    }

    fn get_values(&self, keys: &[StateKey]) -> anyhow::Result<Vec<Option<Vec<u8>>>> {
        let stored = self.inner.get_values(keys)?;
        Ok(keys
            .iter()
            .zip(stored)
            .map(|(k, v)| match self.ttl(k.state) {
                None => v,
                Some(_) => self.read_stamped(k.state, &k.key, None, v),
            })
            .collect())
    }

    fn read_values(
        &self,
        states: &[u32],
        keys: &mut dyn Iterator<Item = &[u8]>,
        data: &mut Vec<u8>,
        ends: &mut Vec<u32>,
        present: &mut Vec<bool>,
    ) -> anyhow::Result<()> {
        if states.iter().all(|&s| self.ttl(s).is_none()) {
            return self.inner.read_values(states, keys, data, ends, present);
        }
        let keys: Vec<&[u8]> = keys.collect();
        let (mut raw, mut raw_ends, mut raw_present) = (Vec::new(), Vec::new(), Vec::new());
        self.inner.read_values(
            states,
            &mut keys.iter().copied(),
            &mut raw,
            &mut raw_ends,
            &mut raw_present,
        )?;
        let mut start = 0usize;
        for (i, (&end, &set)) in raw_ends.iter().zip(&raw_present).enumerate() {
            let stored = &raw[start..end as usize];
            start = end as usize;
            let state = states[i % states.len()];
            let value = match (self.ttl(state), set) {
                (_, false) => None,
                (None, true) => Some(stored.to_vec()),
                (Some(_), true) => {
                    self.read_stamped(state, keys[i / states.len()], None, Some(stored.to_vec()))
                }
            };
            present.push(value.is_some());
            data.extend_from_slice(value.as_deref().unwrap_or_default());
            ends.push(data.len() as u32);
        }
        Ok(())
    }

    fn get_list(&self, state: u32, key: &[u8]) -> anyhow::Result<Vec<Vec<u8>>> {
        let stored = self.inner.get_list(state, key)?;
        Ok(self.read_list(state, key, stored))
    }

    fn get_entry(&self, state: u32, key: &[u8], map_key: &[u8]) -> anyhow::Result<Option<Vec<u8>>> {
        let stored = self.inner.get_entry(state, key, map_key)?;
        Ok(match self.ttl(state) {
            None => stored,
            Some(_) => self.read_stamped(state, key, Some(map_key), stored),
        })
    }

    fn get_entries(&self, state: u32, key: &[u8]) -> anyhow::Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let stored = self.inner.get_entries(state, key)?;
        if self.ttl(state).is_none() {
            return Ok(stored);
        }
        Ok(stored
            .into_iter()
            .filter_map(|(k, v)| {
                let v = self.read_stamped(state, key, Some(&k), Some(v))?;
                Some((k, v))
            })
            .collect())
    }

    fn apply(&mut self, op: StateOp) -> anyhow::Result<()> {
        self.apply_all(vec![op], Vec::new())
    }

    fn register_timer(&mut self, timer: Timer) -> anyhow::Result<()> {
        self.inner.register_timer(timer)
    }

    fn delete_timer(&mut self, timer: &Timer) -> anyhow::Result<()> {
        self.inner.delete_timer(timer)
    }

    fn apply_all(&mut self, ops: Vec<StateOp>, timers: Vec<TimerOp>) -> anyhow::Result<()> {
        if self.ttls.iter().all(Option::is_none) && self.due.borrow().is_empty() {
            // No state with a time-to-live: nothing to stamp.
            return self.inner.apply_all(ops, timers);
        }
        // What reads found due first: the batch's own changes come after.
        let mut all = std::mem::take(&mut *self.due.borrow_mut());
        all.reserve(ops.len());
        for op in ops {
            all.push(self.stamped(op)?);
        }
        self.inner.apply_all(all, timers)?;
        if self.ttls.iter().any(Option::is_some) {
            let now = self.expiry.now();
            // A pass (of one step or several, a step per batch) starts
            // once a minute after the last one ended.
            if self.purging || now.saturating_sub(self.purged_at) >= PURGE_EVERY_MS {
                self.purging = self.inner.purge_expired(now);
                if !self.purging {
                    self.purged_at = now;
                }
            }
        }
        Ok(())
    }

    fn take_due_timers(
        &mut self,
        domain: TimeDomain,
        upto: i64,
        limit: usize,
    ) -> anyhow::Result<Vec<Timer>> {
        self.inner.take_due_timers(domain, upto, limit)
    }

    fn next_timer(&self, domain: TimeDomain) -> Option<i64> {
        self.inner.next_timer(domain)
    }

    fn size(&self) -> StateSize {
        self.inner.size()
    }

    fn snapshot(&mut self, dir: &std::path::Path) -> anyhow::Result<LocalSnapshot> {
        self.flush_due()?;
        self.inner.snapshot(dir)
    }

    fn export(&mut self, path: &std::path::Path) -> anyhow::Result<u64> {
        self.flush_due()?;
        self.inner.export(path)
    }

    fn savepoint(&mut self, dir: &std::path::Path) -> anyhow::Result<LocalSnapshot> {
        self.flush_due()?;
        self.inner.savepoint(dir)
    }
}

impl TtlBackend {
    /// Apply what reads found due (before a snapshot: a renewed value is
    /// snapshotted renewed).
    fn flush_due(&mut self) -> anyhow::Result<()> {
        let due = std::mem::take(&mut *self.due.borrow_mut());
        if due.is_empty() {
            return Ok(());
        }
        self.inner.apply_all(due, Vec::new())
    }
}
