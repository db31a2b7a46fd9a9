//! Records combined ahead of the windows' state: a built-in aggregate's
//! records are added, per pane (a tumbling window, or a pane of sliding
//! windows) and key, to accumulators in memory, and reach the windows'
//! state once per pane and key — when a watermark is about to fire the
//! pane, before a snapshot, or when too many are held — instead of once
//! per batch. Flink's window aggregation buffers its records the same way.
//!
//! Only records whose pane has not fired are combined: a pane's windows end
//! at its end or later, so none of them has fired, none takes a late
//! record, and none fires again; records for panes that fired (within
//! their allowed lateness, or late) take the window engine's own path. A
//! combined pane goes to the state before the watermark passes its end, so
//! what fires is what the engine alone would have fired.

use std::hash::BuildHasher;

use rustc_hash::FxBuildHasher;
use weir_host::{OperatorError, TaskIdent};
use weir_model::Records;
use weir_model::builtin::AggregateFunction;
use weir_window::Spec;

use crate::builtin::aggregate::{Acc, ValueOf};
use crate::builtin::input_error;

/// A pane's keys and their accumulators.
struct Pane {
    /// `[start, end)`.
    slot: (i64, i64),
    /// Indexes into `ends`/`accs` by the key's hash.
    index: hashbrown::HashTable<u32>,
    /// The keys, one after another, and where each ends.
    keys: Vec<u8>,
    ends: Vec<u32>,
    accs: Vec<Acc>,
    /// Per key, whether its accumulator holds everything the state has for
    /// the pane too (it was written there at a snapshot and kept): it then
    /// replaces what is stored rather than adding to it.
    whole: Vec<bool>,
}

impl Pane {
    fn new(slot: (i64, i64)) -> Pane {
        Pane {
            slot,
            index: hashbrown::HashTable::new(),
            keys: Vec::new(),
            ends: Vec::new(),
            accs: Vec::new(),
            whole: Vec::new(),
        }
    }

    fn key(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        &self.keys[start..self.ends[i] as usize]
    }

    /// The accumulator of `key`, made empty when the pane has none yet.
    fn acc(&mut self, key: &[u8], function: AggregateFunction) -> &mut Acc {
        let hash = FxBuildHasher.hash_one(key);
        let Pane {
            index,
            keys,
            ends,
            accs,
            whole,
            ..
        } = self;
        let key_at = |i: u32| {
            let i = i as usize;
            let start = if i == 0 { 0 } else { ends[i - 1] as usize };
            &keys[start..ends[i] as usize]
        };
        let i = match index.find(hash, |&i| key_at(i) == key) {
            Some(&i) => i as usize,
            None => {
                let i = accs.len();
                keys.extend_from_slice(key);
                ends.push(keys.len() as u32);
                accs.push(Acc::new(function));
                whole.push(false);
                index.insert_unique(hash, i as u32, |&j| {
                    let j = j as usize;
                    let start = if j == 0 { 0 } else { ends[j - 1] as usize };
                    FxBuildHasher.hash_one(&keys[start..ends[j] as usize])
                });
                i
            }
        };
        &mut accs[i]
    }
}

/// A pane's key and what it holds, on its way to the windows' state.
pub(crate) struct Combined<'a> {
    pub(crate) key: &'a [u8],
    /// Its pane's start (a time whose only slot is the pane).
    pub(crate) start: i64,
    pub(crate) acc: Acc,
    /// Whether `acc` replaces what is stored (see [`Pane::whole`]).
    pub(crate) whole: bool,
}

/// The panes being combined, and how a record adds to an accumulator.
pub(crate) struct Combiner {
    function: AggregateFunction,
    value_of: ValueOf,
    counts_null: bool,
    /// Panes, in no order; a handful at a time with records in time order.
    panes: Vec<Pane>,
    /// Each pane's place in `panes`.
    by_slot: rustc_hash::FxHashMap<(i64, i64), usize>,
    /// Panes written to the state, emptied, for new panes to reuse (their
    /// tables and vectors grown already).
    spare: Vec<Pane>,
    /// The pane the last record went to.
    last: usize,
    /// Keys held across the panes.
    held: usize,
    /// The earliest end of a held pane.
    first_end: Option<i64>,
    /// Accumulators held before they are all written to the state.
    limit: usize,
}

impl Combiner {
    /// Accumulators held before they are all written to the state: a
    /// pane's accumulators take about 40 bytes each, much less than its
    /// windows in the state.
    const LIMIT: usize = 262_144;

    /// Emptied panes kept for reuse, at most.
    const SPARE: usize = 4;

    pub(crate) fn new(function: AggregateFunction, value_of: ValueOf, counts_null: bool) -> Self {
        Combiner {
            function,
            value_of,
            counts_null,
            panes: Vec::new(),
            by_slot: Default::default(),
            spare: Vec::new(),
            last: 0,
            held: 0,
            first_end: None,
            limit: Self::LIMIT,
        }
    }

    /// Holding at most `limit` accumulators (tests).
    #[cfg(test)]
    pub(crate) fn with_limit(self, limit: usize) -> Self {
        Combiner { limit, ..self }
    }

    /// Whether it holds as many accumulators as it may: they go to the
    /// state.
    pub(crate) fn is_full(&self) -> bool {
        self.held >= self.limit
    }

    /// Whether a pane it holds ends by `watermark` (its windows would fire).
    pub(crate) fn has_due(&self, spec: &Spec, watermark: Option<i64>) -> bool {
        self.first_end
            .is_some_and(|end| spec.has_fired(end, watermark))
    }

    /// Combine what it can of `batch` (event time; `watermark` the
    /// operator's): the indexes of the records it leaves to the window
    /// engine, in order.
    pub(crate) fn add(
        &mut self,
        spec: &Spec,
        batch: &Records,
        watermark: Option<i64>,
        ident: &TaskIdent,
    ) -> Result<Vec<usize>, OperatorError> {
        let mut rest = Vec::new();
        let mut slots = Vec::new();
        // The times whose only slot is `slot`.
        let mut span: Option<(i64, i64)> = None;
        let mut slot = (0, 0);
        let mut scratch = Vec::new();
        let reads = self.value_of.reads();
        for i in 0..batch.len() {
            let r = batch.get(i);
            let key = r
                .key
                .ok_or_else(|| input_error(ident, super::NO_KEY.into()))?;
            let t = r
                .timestamp
                .ok_or_else(|| input_error(ident, super::NO_TIMESTAMP.into()))?;
            if !span.is_some_and(|(from, to)| from <= t && t < to) {
                spec.slots_of(t, &mut slots);
                match slots[..] {
                    [only] => {
                        slot = only;
                        span = spec.same_slots(t);
                    }
                    _ => {
                        // In no window (or in several: not a pane).
                        span = None;
                        rest.push(i);
                        continue;
                    }
                }
            }
            if spec.has_fired(slot.1, watermark) {
                rest.push(i);
                continue;
            }
            let v = match reads {
                true => self.value_of.of(r.value, &mut scratch, ident)?,
                false => None,
            };
            let (function, counts_null) = (self.function, self.counts_null);
            let pane = self.pane(slot);
            let before = pane.accs.len();
            pane.acc(key, function).add(v, counts_null);
            let added = pane.accs.len() - before;
            self.held += added;
        }
        Ok(rest)
    }

    /// The pane of `slot`, made when there is none.
    fn pane(&mut self, slot: (i64, i64)) -> &mut Pane {
        if self.panes.get(self.last).is_none_or(|p| p.slot != slot) {
            self.last = match self.by_slot.get(&slot) {
                Some(&i) => i,
                None => {
                    self.by_slot.insert(slot, self.panes.len());
                    let pane = match self.spare.pop() {
                        Some(pane) => Pane { slot, ..pane },
                        None => Pane::new(slot),
                    };
                    self.panes.push(pane);
                    self.first_end = Some(self.first_end.map_or(slot.1, |e| e.min(slot.1)));
                    self.panes.len() - 1
                }
            };
        }
        &mut self.panes[self.last]
    }

    /// Take the panes that end by `end` (all of them: `None`), to be
    /// written to the state; `keep` leaves them held too, as holding
    /// everything that is stored for them.
    pub(crate) fn take(&mut self, end: Option<i64>, keep: bool) -> Taken {
        let due = |p: &Pane| end.is_none_or(|end| p.slot.1 <= end);
        let mut taken = Vec::new();
        let mut i = 0;
        while i < self.panes.len() {
            if !due(&self.panes[i]) {
                i += 1;
            } else if keep {
                let p = &self.panes[i];
                taken.push(Pane {
                    slot: p.slot,
                    index: hashbrown::HashTable::new(),
                    keys: p.keys.clone(),
                    ends: p.ends.clone(),
                    accs: p.accs.clone(),
                    whole: p.whole.clone(),
                });
                i += 1;
            } else {
                let p = self.panes.swap_remove(i);
                self.held -= p.accs.len();
                taken.push(p);
            }
        }
        self.reindex();
        Taken(taken)
    }

    /// Panes taken with `keep` were written to the state as `written`
    /// (in the order of [`Taken::combined`]): their keys hold that from now
    /// on, replacing what is stored when they are written again.
    pub(crate) fn kept(&mut self, taken: &Taken, written: &[Acc]) {
        let mut written = written.iter();
        for p in &taken.0 {
            let mut held = self.by_slot.get(&p.slot).map(|&i| &mut self.panes[i]);
            for i in 0..p.accs.len() {
                let w = written.next();
                if let (Some(held), Some(w)) = (held.as_deref_mut(), w) {
                    held.accs[i] = *w;
                    held.whole[i] = true;
                }
            }
        }
    }

    /// Hold again panes taken and not written.
    pub(crate) fn hold(&mut self, taken: Taken) {
        for pane in taken.0 {
            self.held += pane.accs.len();
            self.panes.push(pane);
        }
        self.reindex();
    }

    /// Find the panes again after some left or came back.
    fn reindex(&mut self) {
        self.last = 0;
        self.by_slot = (self.panes.iter().enumerate())
            .map(|(i, p)| (p.slot, i))
            .collect();
        self.first_end = self.panes.iter().map(|p| p.slot.1).min();
    }

    /// Panes written to the state, to be reused.
    pub(crate) fn recycle(&mut self, taken: Taken) {
        for mut pane in taken.0 {
            if self.spare.len() >= Self::SPARE {
                return;
            }
            pane.index.clear();
            pane.keys.clear();
            pane.ends.clear();
            pane.accs.clear();
            pane.whole.clear();
            self.spare.push(pane);
        }
    }

    /// The contents of a group that starts from `stored` (its stored
    /// accumulators) and takes `combined`: its accumulator, and that
    /// encoded into the first stored buffer (or a new one).
    pub(crate) fn contents(
        &self,
        stored: Vec<Vec<u8>>,
        combined: &Combined<'_>,
        ident: &TaskIdent,
    ) -> Result<(Acc, Vec<u8>), OperatorError> {
        let acc = match combined.whole {
            true => combined.acc,
            false => {
                let mut acc = super::builtin::merge_stored(self.function, &stored, ident)?;
                acc.merge(combined.acc);
                acc
            }
        };
        let mut buffer = super::result_buffer(stored);
        acc.encode_into(&mut buffer);
        Ok((acc, buffer))
    }
}

/// Panes taken from a [`Combiner`].
#[derive(Default)]
pub(crate) struct Taken(Vec<Pane>);

impl Taken {
    /// The same panes, in the order of their ends.
    pub(crate) fn by_end(mut self) -> Taken {
        self.0.sort_by_key(|p| p.slot.1);
        self
    }

    /// The end of its first pane: the earliest, once in order.
    pub(crate) fn first_end(&self) -> Option<i64> {
        self.0.first().map(|p| p.slot.1)
    }

    /// Split off the first panes that end where the first ends (in order).
    pub(crate) fn split_first_end(&mut self) -> Taken {
        let end = self.first_end();
        let n = self.0.iter().take_while(|p| Some(p.slot.1) == end).count();
        Taken(self.0.drain(..n).collect())
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.iter().all(|p| p.accs.is_empty())
    }

    /// Each key of each pane with its accumulator.
    pub(crate) fn combined(&self) -> Vec<Combined<'_>> {
        self.0
            .iter()
            .flat_map(|p| {
                (0..p.accs.len()).map(move |i| Combined {
                    key: p.key(i),
                    start: p.slot.0,
                    acc: p.accs[i],
                    whole: p.whole[i],
                })
            })
            .collect()
    }
}
