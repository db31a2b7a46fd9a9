//! The window operator's work per batch of records and per batch of fired
//! timers, over any [`Store`] of slots and timers. The window function is
//! the caller's: [`Spec::assign`] says which records go into which group
//! and what each group starts from; the caller folds them (one call for the
//! whole batch) and hands the results to [`Spec::commit`].

use rustc_hash::FxHashMap as HashMap;

use crate::slot::Slot;
use crate::spec::Spec;

/// Where a window operator keeps its slots and timers.
pub trait Store {
    /// What goes wrong in it.
    type Error;
    /// The slots of each of `keys` (distinct), in order; empty when none.
    fn load(&mut self, keys: &[&[u8]]) -> Result<Vec<Vec<Slot>>, Self::Error>;
    /// Replace a key's slots (none: remove them); `loaded` is its place
    /// among the keys of the last [`Store::load`], which a store may use to
    /// find it again without a lookup.
    fn save(&mut self, loaded: usize, key: &[u8], slots: Vec<Slot>) -> Result<(), Self::Error>;
    /// Register (or delete) the timer of `key` at `time`, on the spec's
    /// clock. At most one timer exists per key and time.
    fn timer(&mut self, key: &[u8], time: i64, register: bool) -> Result<(), Self::Error>;
}

/// A window that fires, with its contents: the accumulators of its panes
/// (one for a window kept whole) or its records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fired {
    /// The stream key.
    pub key: Vec<u8>,
    /// The window's first instant.
    pub start: i64,
    /// The first instant after it; its results carry `end - 1`.
    pub end: i64,
    /// What the function kept for it, oldest slot first.
    pub contents: Vec<Vec<u8>>,
}

/// One open slot of a key while a batch is assigned.
#[derive(Debug)]
struct Open {
    start: i64,
    end: i64,
    /// What it held before the batch, until a group takes it over.
    stored: Option<Vec<u8>>,
    /// The group this batch folds into it.
    group: Option<u32>,
    /// Created (or grown by a merge) in this batch: its timers are due.
    fresh: bool,
}

/// A batch's records assigned to groups, waiting for the window function's
/// results ([`Spec::commit`]).
#[derive(Debug)]
pub struct Assigned {
    /// `(record, group)`: record `record` of the batch (its index) is added
    /// to group `group`; in record order. With accumulators a record is in
    /// one group; records kept per sliding window are in one per window.
    pub additions: Vec<(u32, u32)>,
    /// The records whose every window is past its allowed lateness, for the
    /// `late` side output. A record in no window at all (between sliding
    /// windows whose slide exceeds their size) is in neither list: it is
    /// dropped, as Flink drops it.
    pub late: Vec<u32>,
    /// How many of the batch's records this covers: up to and including
    /// the first that updates a window that fired already (within its
    /// allowed lateness), which fires again before the next record is
    /// assigned — as Flink fires it, record by record. The caller assigns
    /// the rest in another round.
    pub consumed: usize,
    /// Per group, what it starts from: stored contents to merge (none for a
    /// new window), then the records targeting it are added.
    pub groups: Vec<Vec<Vec<u8>>>,
    /// The batch's distinct keys, one after another, and where each ends.
    keys: Vec<u8>,
    key_ends: Vec<u32>,
    opens: Vec<Vec<Open>>,
    /// Per key, the emptied vector its slots were loaded in.
    spare: Vec<Vec<Slot>>,
    watermark: Option<i64>,
}

impl Spec {
    /// Assign a batch's records, each `(key, time)` (its event time, or the
    /// processing time of the batch), to groups. Reads the batch's keys'
    /// slots from `store` in one call; session merges delete the merged
    /// sessions' timers.
    pub fn assign<S: Store>(
        &self,
        store: &mut S,
        records: &[(&[u8], i64)],
        watermark: Option<i64>,
    ) -> Result<Assigned, S::Error> {
        let mut index: HashMap<&[u8], usize> =
            HashMap::with_capacity_and_hasher(records.len(), Default::default());
        let mut keys: Vec<&[u8]> = Vec::with_capacity(records.len());
        let of_record: Vec<usize> = records
            .iter()
            .map(|(k, _)| {
                *index.entry(k).or_insert_with(|| {
                    keys.push(k);
                    keys.len() - 1
                })
            })
            .collect();
        let mut loaded = store.load(&keys)?;
        let mut opens: Vec<Vec<Open>> = loaded
            .iter_mut()
            .map(|slots| {
                // The emptied vector is the key's slots again in `commit`.
                slots
                    .drain(..)
                    .map(|s| Open {
                        start: s.start,
                        end: s.end,
                        stored: Some(s.contents),
                        group: None,
                        fresh: false,
                    })
                    .collect()
            })
            .collect();
        let mut groups: Vec<Vec<Vec<u8>>> = Vec::with_capacity(keys.len());
        // A group merged into another (sessions) points on.
        let mut redirect: Vec<u32> = Vec::with_capacity(keys.len());
        let mut additions = Vec::with_capacity(records.len());
        let mut late = Vec::new();
        let mut slots = Vec::new();
        // The times whose slots `slots` holds, lateness applied: in time
        // order, a batch's records mostly share their slots.
        let mut slots_span: Option<(i64, i64)> = None;
        let mut windows = Vec::new();
        let mut consumed = records.len();
        for (r, (&(key, t), &k)) in records.iter().zip(&of_record).enumerate() {
            // A window that fired already takes the previous record: it
            // fires again before this one is assigned.
            let refires = |spec: &Spec, slot: (i64, i64), windows: &mut Vec<(i64, i64)>| {
                // Every window of a slot ends at its end or later: none
                // has fired while the slot's own end has not.
                if !spec.has_fired(slot.1, watermark) {
                    return false;
                }
                spec.windows_of(slot, windows);
                windows
                    .iter()
                    .any(|w| spec.has_fired(w.1, watermark) && !spec.is_late(w.1, watermark))
            };
            let r = r as u32;
            if !slots_span.is_some_and(|(from, to)| from <= t && t < to) {
                self.slots_of(t, &mut slots);
                slots_span = self.same_slots(t);
                if !self.is_session() {
                    slots.retain(|&s| !self.is_slot_late(s, watermark));
                }
            }
            if self.is_session() {
                // A session merges first: a record whose own session is
                // past its lateness still joins a stored one it touches
                // that is not (Flink's merging windows drop a record only
                // when the merged window is late).
                if let Some(&own) = slots.first() {
                    let merged = opens[k]
                        .iter()
                        .filter(|o| o.start <= own.1 && own.0 <= o.end)
                        .fold(own, |(s, e), o| (s.min(o.start), e.max(o.end)));
                    if self.is_slot_late(merged, watermark) {
                        slots.clear();
                    }
                }
            }
            let Some(&first) = slots.first() else {
                if self.time == crate::Time::Event
                    && watermark.is_some_and(|wm| t.saturating_add(self.lateness) <= wm)
                {
                    late.push(r);
                }
                continue;
            };
            let key_opens = &mut opens[k];
            if self.is_session() {
                let g =
                    self.merge_session(store, key, key_opens, first, &mut groups, &mut redirect)?;
                additions.push((r, g));
                let merged = key_opens.last().expect("the merged session");
                if refires(self, (merged.start, merged.end), &mut windows) {
                    consumed = r as usize + 1;
                    break;
                }
                continue;
            }
            for &(start, end) in &slots {
                let i = match key_opens
                    .iter()
                    .position(|o| o.start == start && o.end == end)
                {
                    Some(i) => i,
                    None => {
                        key_opens.push(Open {
                            start,
                            end,
                            stored: None,
                            group: None,
                            fresh: true,
                        });
                        key_opens.len() - 1
                    }
                };
                let open = &mut key_opens[i];
                let g = match open.group {
                    Some(g) => g,
                    None => {
                        groups.push(open.stored.take().into_iter().collect());
                        redirect.push(groups.len() as u32 - 1);
                        let g = groups.len() as u32 - 1;
                        open.group = Some(g);
                        g
                    }
                };
                additions.push((r, g));
            }
            if slots.iter().any(|&s| refires(self, s, &mut windows)) {
                consumed = r as usize + 1;
                break;
            }
        }
        // Number the live groups densely.
        let mut renumber = vec![u32::MAX; groups.len()];
        let mut live = Vec::with_capacity(groups.len());
        for (g, contents) in groups.into_iter().enumerate() {
            if redirect[g] == g as u32 {
                renumber[g] = live.len() as u32;
                live.push(contents);
            }
        }
        let resolve = |mut g: u32| {
            while redirect[g as usize] != g {
                g = redirect[g as usize];
            }
            renumber[g as usize]
        };
        for (_, g) in &mut additions {
            *g = resolve(*g);
        }
        for key_opens in &mut opens {
            for o in key_opens.iter_mut() {
                o.group = o.group.map(resolve);
            }
        }
        Ok(Assigned {
            additions,
            late,
            consumed,
            groups: live,
            key_ends: keys
                .iter()
                .scan(0u32, |end, k| {
                    *end += k.len() as u32;
                    Some(*end)
                })
                .collect(),
            keys: keys.concat(),
            opens,
            spare: loaded,
            watermark,
        })
    }

    /// A record's session `slot` joins the key's sessions it overlaps or
    /// touches; returns the group it is added to.
    fn merge_session<S: Store>(
        &self,
        store: &mut S,
        key: &[u8],
        opens: &mut Vec<Open>,
        slot: (i64, i64),
        groups: &mut Vec<Vec<Vec<u8>>>,
        redirect: &mut Vec<u32>,
    ) -> Result<u32, S::Error> {
        let (mut start, mut end) = slot;
        let mut group: Option<u32> = None;
        let mut merged_stored = Vec::new();
        let mut merged_groups = Vec::new();
        let mut unneeded = Vec::new();
        let mut i = 0;
        while i < opens.len() {
            let o = &opens[i];
            if o.start <= end && start <= o.end {
                let o = opens.swap_remove(i);
                start = start.min(o.start);
                end = end.max(o.end);
                if !o.fresh {
                    // Its timers were registered when it was stored.
                    unneeded.push(o.end - 1);
                    if self.lateness > 0 {
                        unneeded.push(self.slot_cleanup((o.start, o.end)));
                    }
                }
                match o.group {
                    Some(g) if group.is_none() => group = Some(g),
                    Some(g) => merged_groups.push(g),
                    None => {}
                }
                merged_stored.extend(o.stored);
            } else {
                i += 1;
            }
        }
        // A key has one timer per time: one that a session kept apart (and
        // stored) fires at is still needed. (The merged session registers
        // its own when it is committed.)
        for time in unneeded {
            let needed = opens.iter().any(|o| {
                !o.fresh
                    && (o.end - 1 == time
                        || (self.lateness > 0 && self.slot_cleanup((o.start, o.end)) == time))
            });
            if !needed {
                store.timer(key, time, false)?;
            }
        }
        let g = match group {
            Some(g) => g,
            None => {
                groups.push(Vec::new());
                redirect.push(groups.len() as u32 - 1);
                groups.len() as u32 - 1
            }
        };
        groups[g as usize].extend(merged_stored);
        for other in merged_groups {
            let moved = std::mem::take(&mut groups[other as usize]);
            groups[g as usize].extend(moved);
            redirect[other as usize] = g;
        }
        opens.push(Open {
            start,
            end,
            stored: None,
            group: Some(g),
            fresh: true,
        });
        Ok(g)
    }

    /// Store the groups' new contents (`results`, one per group, in order),
    /// register the timers of new windows, and return the windows that fire
    /// again at once: those that fired before and took records within their
    /// allowed lateness.
    pub fn commit<S: Store>(
        &self,
        store: &mut S,
        assigned: Assigned,
        mut results: Vec<Vec<u8>>,
    ) -> Result<Vec<Fired>, S::Error> {
        let Assigned {
            keys,
            key_ends,
            opens,
            spare,
            watermark,
            ..
        } = assigned;
        let mut refire = Vec::new();
        let mut windows = Vec::new();
        let mut key_start = 0;
        for (loaded, ((&key_end, key_opens), mut slots)) in
            key_ends.iter().zip(opens).zip(spare).enumerate()
        {
            let key = &keys[key_start..key_end as usize];
            key_start = key_end as usize;
            slots.reserve(key_opens.len());
            let mut touched = Vec::new();
            for o in key_opens {
                let slot = (o.start, o.end);
                if o.fresh {
                    // Every window of a new slot gets its timer, even one
                    // that a pane stored before registered too: after a
                    // restore the watermark starts again below what it
                    // was, and a window that fired before it fires again
                    // with what it takes within its lateness, as Flink's.
                    self.windows_of(slot, &mut windows);
                    for &(_, end) in &windows {
                        if !self.has_fired(end, watermark) {
                            store.timer(key, end - 1, true)?;
                        }
                    }
                    if self.lateness > 0 {
                        store.timer(key, self.slot_cleanup(slot), true)?;
                    }
                }
                let contents = match o.group {
                    Some(g) => {
                        // Only a slot whose end has passed can be in a
                        // window that fired.
                        if self.has_fired(slot.1, watermark) {
                            touched.push(slot);
                        }
                        // Each group is one slot's: taken once.
                        results
                            .get_mut(g as usize)
                            .map(std::mem::take)
                            .unwrap_or_default()
                    }
                    None => o.stored.unwrap_or_default(),
                };
                slots.push(Slot {
                    start: o.start,
                    end: o.end,
                    contents,
                });
            }
            slots.sort_by_key(|s| (s.start, s.end));
            // Windows that fired already and took records fire again.
            let mut again: Vec<(i64, i64)> = Vec::new();
            for slot in touched {
                self.windows_of(slot, &mut windows);
                for &w in &windows {
                    if self.has_fired(w.1, watermark)
                        && !self.is_late(w.1, watermark)
                        && !again.contains(&w)
                    {
                        again.push(w);
                    }
                }
            }
            again.sort();
            for (start, end) in again {
                refire.push(Fired {
                    key: key.to_vec(),
                    start,
                    end,
                    contents: self.contents_of(&slots, (start, end)),
                });
            }
            store.save(loaded, key, slots)?;
        }
        Ok(refire)
    }

    /// What window `w` holds among a key's slots.
    fn contents_of(&self, slots: &[Slot], (start, end): (i64, i64)) -> Vec<Vec<u8>> {
        if self.has_panes() {
            slots
                .iter()
                .filter(|s| s.start >= start && s.end <= end)
                .map(|s| s.contents.clone())
                .collect()
        } else {
            slots
                .iter()
                .filter(|s| s.start == start && s.end == end)
                .map(|s| s.contents.clone())
                .collect()
        }
    }

    /// Timers that fired, `(key, time)` in time order: the windows that end
    /// there fire, and slots past their cleanup go.
    pub fn fire<S: Store>(
        &self,
        store: &mut S,
        timers: &[(&[u8], i64)],
    ) -> Result<Vec<Fired>, S::Error> {
        let mut index: HashMap<&[u8], usize> =
            HashMap::with_capacity_and_hasher(timers.len(), Default::default());
        let mut keys: Vec<&[u8]> = Vec::with_capacity(timers.len());
        for (k, _) in timers {
            index.entry(k).or_insert_with(|| {
                keys.push(k);
                keys.len() - 1
            });
        }
        let mut slots = store.load(&keys)?;
        let mut fired = Vec::new();
        for &(key, time) in timers {
            let key_slots = &mut slots[index[key]];
            if let Some(w) = self.paned_window_at(time) {
                let contents = self.contents_of(key_slots, w);
                if !contents.is_empty() {
                    fired.push(Fired {
                        key: key.to_vec(),
                        start: w.0,
                        end: w.1,
                        contents,
                    });
                }
            } else if !self.has_panes() {
                for s in key_slots.iter().filter(|s| s.end - 1 == time) {
                    fired.push(Fired {
                        key: key.to_vec(),
                        start: s.start,
                        end: s.end,
                        contents: vec![s.contents.clone()],
                    });
                }
            }
            key_slots.retain(|s| self.slot_cleanup((s.start, s.end)) > time);
        }
        for (loaded, (key, key_slots)) in keys.into_iter().zip(slots).enumerate() {
            store.save(loaded, key, key_slots)?;
        }
        Ok(fired)
    }
}
