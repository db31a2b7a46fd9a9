//! The engine against a brute-force model of Flink's windows.

use std::collections::BTreeMap;

use crate::{Assigner, Contents, Fired, MemoryStore, Spec, Time, slot};

/// A window operator counting records (as an accumulator: 8 bytes; as
/// records: their number), with what it emitted.
struct Counter {
    spec: Spec,
    store: MemoryStore,
    watermark: Option<i64>,
    /// (key, start, end, count), in emission order.
    out: Vec<(Vec<u8>, i64, i64, u64)>,
    late: Vec<i64>,
}

impl Counter {
    fn new(assigner: Assigner, lateness: i64, contents: Contents) -> Counter {
        Counter {
            spec: Spec::new(assigner, Time::Event, lateness, contents).unwrap(),
            store: MemoryStore::default(),
            watermark: None,
            out: Vec::new(),
            late: Vec::new(),
        }
    }

    fn count(&self, contents: &[u8]) -> u64 {
        match self.spec.contents {
            Contents::Accumulator if contents.is_empty() => 0,
            Contents::Accumulator => u64::from_be_bytes(contents.try_into().unwrap()),
            Contents::Records => slot::records(contents).unwrap().len() as u64,
        }
    }

    fn emit(&mut self, fired: Vec<Fired>) {
        for f in fired {
            let n = f.contents.iter().map(|c| self.count(c)).sum();
            self.out.push((f.key, f.start, f.end, n));
        }
    }

    fn batch(&mut self, mut records: &[(&str, i64)]) {
        while !records.is_empty() {
            let n = self.round(records);
            records = &records[n..];
        }
    }

    /// One round of a batch; returns how many records it took.
    fn round(&mut self, records: &[(&str, i64)]) -> usize {
        let rs: Vec<(&[u8], i64)> = records.iter().map(|(k, t)| (k.as_bytes(), *t)).collect();
        let spec = self.spec;
        let a = spec.assign(&mut self.store, &rs, self.watermark).unwrap();
        let consumed = a.consumed;
        for &r in &a.late {
            self.late.push(records[r as usize].1);
        }
        let mut results: Vec<Vec<u8>> = a
            .groups
            .iter()
            .map(|g| match spec.contents {
                Contents::Accumulator => {
                    let n: u64 = g.iter().map(|c| self.count(c)).sum();
                    n.to_be_bytes().to_vec()
                }
                Contents::Records => g.concat(),
            })
            .collect();
        for &(r, g) in &a.additions {
            let res = &mut results[g as usize];
            match spec.contents {
                Contents::Accumulator => {
                    let n = self.count(res) + 1;
                    *res = n.to_be_bytes().to_vec();
                }
                Contents::Records => slot::append_record(res, &records[r as usize].1.to_be_bytes()),
            }
        }
        let refire = spec.commit(&mut self.store, a, results).unwrap();
        self.emit(refire);
        consumed
    }

    fn advance(&mut self, wm: i64) {
        self.watermark = Some(wm);
        loop {
            let due = self.store.take_due(wm, 3);
            if due.is_empty() {
                return;
            }
            let timers: Vec<(&[u8], i64)> = due.iter().map(|(t, k)| (k.as_slice(), *t)).collect();
            let spec = self.spec;
            let fired = spec.fire(&mut self.store, &timers).unwrap();
            self.emit(fired);
        }
    }
}

/// Every kind of window: sliding ones whose slide divides the size, does
/// not, and exceeds it.
const ASSIGNERS: [Assigner; 5] = [
    Assigner::Tumbling { size: 10 },
    Assigner::Sliding { size: 10, slide: 5 },
    Assigner::Sliding { size: 30, slide: 7 },
    Assigner::Sliding { size: 4, slide: 10 },
    Assigner::Session { gap: 6 },
];

/// A small deterministic generator.
fn lcg(seed: &mut u64) -> u64 {
    *seed = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    *seed >> 33
}

/// Flink's windows of in-order records, counted by brute force.
fn expected(assigner: Assigner, records: &[(&str, i64)]) -> BTreeMap<(Vec<u8>, i64, i64), u64> {
    let mut want = BTreeMap::new();
    match assigner {
        Assigner::Tumbling { size } => {
            for (k, t) in records {
                let s = t.div_euclid(size) * size;
                *want
                    .entry((k.as_bytes().to_vec(), s, s + size))
                    .or_default() += 1;
            }
        }
        Assigner::Sliding { size, slide } => {
            for (k, t) in records {
                for i in -1000..1000 {
                    let s = i * slide;
                    if s <= *t && *t < s + size {
                        *want
                            .entry((k.as_bytes().to_vec(), s, s + size))
                            .or_default() += 1;
                    }
                }
            }
        }
        Assigner::Session { gap } => {
            let mut by_key: BTreeMap<&str, Vec<i64>> = BTreeMap::new();
            for (k, t) in records {
                by_key.entry(k).or_default().push(*t);
            }
            for (k, mut ts) in by_key {
                ts.sort();
                let mut sessions: Vec<(i64, i64, u64)> = Vec::new();
                for t in ts {
                    match sessions.last_mut() {
                        Some(last) if t <= last.1 => {
                            last.1 = last.1.max(t + gap);
                            last.2 += 1;
                        }
                        _ => sessions.push((t, t + gap, 1)),
                    }
                }
                for (s, e, n) in sessions {
                    want.insert((k.as_bytes().to_vec(), s, e), n);
                }
            }
        }
    }
    want
}

#[test]
fn every_assigner_counts_as_flink_does_on_out_of_order_records() {
    let keys = ["a", "b", "c"];
    for assigner in ASSIGNERS {
        for contents in [Contents::Accumulator, Contents::Records] {
            let mut seed = 7;
            let records: Vec<(&str, i64)> = (0..600)
                .map(|_| {
                    let k = keys[(lcg(&mut seed) % 3) as usize];
                    // Times jumping about within a bounded disorder.
                    (k, (lcg(&mut seed) % 400) as i64 - 50)
                })
                .collect();
            let mut c = Counter::new(assigner, 0, contents);
            for chunk in records.chunks(37) {
                c.batch(chunk);
            }
            c.advance(i64::MAX - 1);
            let mut got = BTreeMap::new();
            for (k, s, e, n) in &c.out {
                assert!(
                    got.insert((k.clone(), *s, *e), *n).is_none(),
                    "{assigner:?}/{contents:?}: window {s}..{e} fired twice"
                );
            }
            assert_eq!(
                got,
                expected(assigner, &records),
                "{assigner:?}/{contents:?}"
            );
            assert!(c.store.slots.is_empty(), "state cleaned up");
            assert!(c.store.timers.is_empty(), "timers cleaned up");
        }
    }
}

#[test]
fn windows_fire_in_order_as_the_watermark_passes_their_end() {
    let mut c = Counter::new(Assigner::Tumbling { size: 10 }, 0, Contents::Accumulator);
    c.batch(&[("a", 1), ("b", 12), ("a", 4), ("a", 25)]);
    c.advance(9);
    assert_eq!(c.out, [(b"a".to_vec(), 0, 10, 2)]);
    c.advance(30);
    assert_eq!(
        c.out[1..],
        [(b"b".to_vec(), 10, 20, 1), (b"a".to_vec(), 20, 30, 1)]
    );
    // Late: the window ended before the watermark.
    c.batch(&[("a", 3)]);
    assert_eq!(c.late, [3]);
}

#[test]
fn allowed_lateness_fires_again_then_sends_to_late() {
    for contents in [Contents::Accumulator, Contents::Records] {
        let mut c = Counter::new(Assigner::Sliding { size: 10, slide: 5 }, 5, contents);
        c.batch(&[("a", 6)]);
        c.advance(9);
        assert_eq!(c.out, [(b"a".to_vec(), 0, 10, 1)]);
        // Within the lateness of [0, 10): it fires again with both; [5, 15)
        // has not fired yet and takes the record.
        c.batch(&[("a", 7)]);
        assert_eq!(c.out[1..], [(b"a".to_vec(), 0, 10, 2)]);
        c.advance(14);
        assert_eq!(c.out[2..], [(b"a".to_vec(), 5, 15, 2)]);
        // [0, 10) is past its lateness (9 + 5 <= 14); [5, 15) is not.
        c.batch(&[("a", 8)]);
        assert_eq!(c.out[3..], [(b"a".to_vec(), 5, 15, 3)]);
        assert!(c.late.is_empty());
        c.advance(19);
        c.batch(&[("a", 9)]);
        assert_eq!(c.late, [9], "past every window's lateness");
        c.advance(100);
        assert!(c.store.slots.is_empty() && c.store.timers.is_empty());
        assert_eq!(c.out.len(), 4, "{contents:?}: {:?}", c.out);
    }
}

#[test]
fn late_records_in_one_batch_fire_their_window_again_one_by_one() {
    for assigner in [
        Assigner::Tumbling { size: 10 },
        Assigner::Session { gap: 10 },
    ] {
        let mut c = Counter::new(assigner, 100, Contents::Accumulator);
        c.batch(&[("a", 1)]);
        c.advance(50);
        c.batch(&[("a", 2), ("b", 60), ("a", 3), ("a", 4)]);
        let counts: Vec<u64> = c.out.iter().map(|o| o.3).collect();
        assert_eq!(counts, [1, 2, 3, 4], "{assigner:?}: {:?}", c.out);
    }
}

#[test]
fn sessions_merge_across_batches_and_fire_once() {
    let mut c = Counter::new(Assigner::Session { gap: 5 }, 0, Contents::Accumulator);
    c.batch(&[("a", 0), ("a", 20)]);
    c.batch(&[("a", 10)]);
    // [0, 5), [10, 15), [20, 25): apart.
    c.batch(&[("a", 5), ("a", 15)]);
    // 5 touches [0, 5) and [10, 15) -> [0, 15); 15 joins that and [20, 25).
    c.advance(100);
    assert_eq!(c.out, [(b"a".to_vec(), 0, 25, 5)]);
    assert!(c.store.timers.is_empty());
}

#[test]
fn a_session_merged_away_keeps_the_timer_another_session_fires_at() {
    // Gap 5, lateness 20: [0, 5) is cleaned up at 24, when [20, 25) fires.
    let mut c = Counter::new(Assigner::Session { gap: 5 }, 20, Contents::Accumulator);
    c.batch(&[("a", 0), ("a", 20)]);
    // 5 touches [0, 5): the merged [0, 10) no longer needs 4 or 24, but
    // [20, 25) still fires at 24.
    c.batch(&[("a", 5)]);
    c.advance(100);
    let mut out = c.out.clone();
    out.sort();
    assert_eq!(out, [(b"a".to_vec(), 0, 10, 2), (b"a".to_vec(), 20, 25, 1)]);
    assert!(c.store.timers.is_empty());
}

#[test]
fn a_window_that_fired_before_a_restore_fires_again_with_a_new_pane() {
    // Sliding 10 every 5 (panes of 5), lateness 20.
    let mut c = Counter::new(
        Assigner::Sliding { size: 10, slide: 5 },
        20,
        Contents::Accumulator,
    );
    c.batch(&[("k", 2)]);
    c.advance(12);
    assert_eq!(
        c.out,
        [(b"k".to_vec(), -5, 5, 1), (b"k".to_vec(), 0, 10, 1)]
    );
    // A restore: the state as it was, the watermark unknown again until
    // the sources send one. A record of [0, 10)'s second pane arrives.
    c.watermark = None;
    c.batch(&[("k", 7)]);
    c.advance(13);
    // [0, 10) fires again with it (within its lateness), as Flink's does.
    assert_eq!(c.out.last(), Some(&(b"k".to_vec(), 0, 10, 2)));
}

#[test]
fn a_record_whose_own_session_is_late_joins_one_it_touches_that_is_not() {
    let mut c = Counter::new(Assigner::Session { gap: 5 }, 0, Contents::Accumulator);
    c.batch(&[("a", 10)]);
    c.advance(9);
    // [5, 10) alone ends at the watermark (late); it touches [10, 15),
    // which has not fired: merged, [5, 15) is not late and takes it.
    c.batch(&[("a", 5)]);
    assert!(c.late.is_empty(), "{:?}", c.late);
    c.advance(100);
    assert_eq!(c.out, [(b"a".to_vec(), 5, 15, 2)]);
    // Alone, it is late.
    c.batch(&[("a", 50)]);
    assert_eq!(c.late, [50]);
}

/// A key's windows: (start, end) to their count and whether a timer at
/// `end - 1` is pending.
type KeyWindows = BTreeMap<(i64, i64), (u64, bool)>;

/// Flink's window operator on event time, record by record: what fires
/// (per key, in order, with its count) and what goes to `late`.
struct Model {
    assigner: Assigner,
    lateness: i64,
    watermark: Option<i64>,
    /// Per key: its windows.
    windows: BTreeMap<String, KeyWindows>,
    fired: BTreeMap<String, Vec<(i64, i64, u64)>>,
    late: Vec<i64>,
}

impl Model {
    fn past(&self, time: i64) -> bool {
        self.watermark.is_some_and(|wm| time <= wm)
    }

    fn record(&mut self, key: &str, t: i64) {
        let l = self.lateness;
        let wm = self.watermark;
        let past = |time: i64| wm.is_some_and(|wm| time <= wm);
        let mut skipped = true;
        let mut assigned = Vec::new();
        match self.assigner {
            Assigner::Tumbling { size } => {
                let s = t.div_euclid(size) * size;
                assigned.push((s, s + size));
            }
            Assigner::Sliding { size, slide } => {
                let mut s = t.div_euclid(slide) * slide;
                while s > t - size {
                    assigned.push((s, s + size));
                    s -= slide;
                }
            }
            Assigner::Session { gap } => {
                // Merged first (touching windows merge), then checked.
                let windows = self.windows.entry(key.to_owned()).or_default();
                let (mut start, mut end, mut n) = (t, t + gap, 1);
                let merged: Vec<(i64, i64)> = windows
                    .keys()
                    .filter(|&&(s, e)| s <= t + gap && t <= e)
                    .copied()
                    .collect();
                for w in &merged {
                    start = start.min(w.0);
                    end = end.max(w.1);
                }
                if !past(end - 1 + l) {
                    for w in merged {
                        n += windows.remove(&w).unwrap().0;
                    }
                    let pending = !past(end - 1);
                    windows.insert((start, end), (n, pending));
                    if !pending {
                        self.fire(key, (start, end));
                    }
                    skipped = false;
                }
            }
        }
        for w in assigned {
            if self.past(w.1 - 1 + l) {
                continue;
            }
            skipped = false;
            let pending = !self.past(w.1 - 1);
            let entry = self
                .windows
                .entry(key.to_owned())
                .or_default()
                .entry(w)
                .or_default();
            entry.0 += 1;
            entry.1 |= pending;
            if !pending {
                self.fire(key, w);
            }
        }
        if skipped && self.past(t + l) {
            self.late.push(t);
        }
    }

    fn fire(&mut self, key: &str, w: (i64, i64)) {
        let n = self.windows[key][&w].0;
        self.fired
            .entry(key.to_owned())
            .or_default()
            .push((w.0, w.1, n));
    }

    fn advance(&mut self, wm: i64) {
        self.watermark = Some(wm);
        let l = self.lateness;
        let mut due: Vec<(i64, String, (i64, i64))> = Vec::new();
        for (k, windows) in &mut self.windows {
            for (w, (_, pending)) in windows.iter_mut() {
                if *pending && w.1 - 1 <= wm {
                    *pending = false;
                    due.push((w.1 - 1, k.clone(), *w));
                }
            }
        }
        due.sort();
        for (_, k, w) in due {
            self.fire(&k, w);
        }
        for windows in self.windows.values_mut() {
            windows.retain(|w, _| w.1 - 1 + l > wm);
        }
    }
}

#[test]
fn windows_with_allowed_lateness_fire_as_flinks_while_the_watermark_moves() {
    let keys = ["a", "b", "c"];
    for assigner in ASSIGNERS {
        for lateness in [0, 7, 40] {
            for contents in [Contents::Accumulator, Contents::Records] {
                let mut seed = 11 + lateness as u64;
                let mut engine = Counter::new(assigner, lateness, contents);
                let mut model = Model {
                    assigner,
                    lateness,
                    watermark: None,
                    windows: BTreeMap::new(),
                    fired: BTreeMap::new(),
                    late: Vec::new(),
                };
                let mut now = 0;
                for _ in 0..60 {
                    // A chunk of records around `now`, some far behind it.
                    let n = 1 + lcg(&mut seed) % 12;
                    let chunk: Vec<(&str, i64)> = (0..n)
                        .map(|_| {
                            now += (lcg(&mut seed) % 4) as i64;
                            let behind = match lcg(&mut seed) % 10 {
                                0 => (lcg(&mut seed) % 80) as i64,
                                _ => (lcg(&mut seed) % 8) as i64,
                            };
                            (keys[(lcg(&mut seed) % 3) as usize], now - behind)
                        })
                        .collect();
                    engine.batch(&chunk);
                    for &(k, t) in &chunk {
                        model.record(k, t);
                    }
                    // The watermark follows, a little behind.
                    if !lcg(&mut seed).is_multiple_of(3) {
                        let wm = now - (lcg(&mut seed) % 6) as i64;
                        if engine.watermark.is_none_or(|w| wm > w) {
                            engine.advance(wm);
                            model.advance(wm);
                        }
                    }
                }
                engine.advance(i64::MAX - 1);
                model.advance(i64::MAX - 1);
                let what = format!("{assigner:?}, lateness {lateness}, {contents:?}");
                let mut got: BTreeMap<String, Vec<(i64, i64, u64)>> = BTreeMap::new();
                for (k, s, e, n) in &engine.out {
                    got.entry(String::from_utf8(k.clone()).unwrap())
                        .or_default()
                        .push((*s, *e, *n));
                }
                if !assigner_is_session(assigner) {
                    // Windows of a key that fire together may come in
                    // another order; each window's own firings may not.
                    for fired in got.values_mut().chain(model.fired.values_mut()) {
                        fired.sort_by_key(|&(s, e, _)| (s, e));
                    }
                }
                assert_eq!(got, model.fired, "{what}");
                assert_eq!(engine.late, model.late, "{what}");
                assert!(engine.store.slots.is_empty(), "{what}: state cleaned up");
                assert!(engine.store.timers.is_empty(), "{what}: timers cleaned up");
            }
        }
    }
}

fn assigner_is_session(a: Assigner) -> bool {
    matches!(a, Assigner::Session { .. })
}
