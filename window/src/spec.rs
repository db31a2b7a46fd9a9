//! What a window operator's manifest says, and the arithmetic of its
//! windows: which windows hold a time, where records are kept, when a window
//! fires and when its state goes.

/// How records are assigned to windows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Assigner {
    /// `[k·size, (k + 1)·size)`: one window per record.
    Tumbling {
        /// Window length, ms.
        size: i64,
    },
    /// Every window `[k·slide, k·slide + size)` that holds the record,
    /// whatever the ratio of size and slide (none, between windows, when the
    /// slide is the larger).
    Sliding {
        /// Window length, ms.
        size: i64,
        /// Distance between starts, ms.
        slide: i64,
    },
    /// `[t, t + gap)` per record, merged with every session of its key that
    /// it overlaps or touches.
    Session {
        /// Inactivity that ends a session, ms.
        gap: i64,
    },
}

/// Which clock windows follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Time {
    /// Records' timestamps; windows fire on watermarks.
    Event,
    /// The worker's clock; windows fire on processing-time timers.
    Processing,
}

/// How a window function keeps a window's contents, which decides whether
/// sliding windows share panes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Contents {
    /// An accumulator that merges: a sliding window's records are kept in
    /// panes of `gcd(size, slide)`, each record in one pane, and a window
    /// merges its panes when it fires.
    Accumulator,
    /// The records themselves, in arrival order: a sliding window's records
    /// are kept per window.
    Records,
}

/// A window operator's windows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spec {
    /// How records are assigned.
    pub assigner: Assigner,
    /// On which clock.
    pub time: Time,
    /// How long after a window's end (event time) records still update it;
    /// ignored on processing time.
    pub lateness: i64,
    /// What the window function keeps.
    pub contents: Contents,
    /// `(size, slide, gcd(size, slide))` of the sliding windows it was
    /// made with, found once (a division per record would cost); read
    /// only while the assigner is still those windows.
    pane: (i64, i64, i64),
}

/// Why a spec is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecError(pub String);

impl std::fmt::Display for SpecError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SpecError {}

fn gcd(mut a: i64, mut b: i64) -> i64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// `t` rounded down to a multiple of `step` (saturating at `i64::MIN`).
fn floor_to(t: i64, step: i64) -> i64 {
    t.div_euclid(step).saturating_mul(step)
}

impl Spec {
    /// A spec, checked: sizes, slides and gaps positive, lateness not
    /// negative.
    pub fn new(
        assigner: Assigner,
        time: Time,
        lateness: i64,
        contents: Contents,
    ) -> Result<Spec, SpecError> {
        let positive = |what: &str, n: i64| {
            if n > 0 {
                Ok(())
            } else {
                Err(SpecError(format!("window {what} = {n} must be positive")))
            }
        };
        match assigner {
            Assigner::Tumbling { size } => positive("size-ms", size)?,
            Assigner::Sliding { size, slide } => {
                positive("size-ms", size)?;
                positive("slide-ms", slide)?;
            }
            Assigner::Session { gap } => positive("gap-ms", gap)?,
        }
        if lateness < 0 {
            return Err(SpecError(format!(
                "window allowed-lateness-ms = {lateness} must not be negative"
            )));
        }
        let pane = match assigner {
            Assigner::Sliding { size, slide } => (size, slide, gcd(size, slide)),
            _ => (0, 0, 0),
        };
        Ok(Spec {
            assigner,
            time,
            lateness: if time == Time::Event { lateness } else { 0 },
            contents,
            pane,
        })
    }

    /// Whether records are kept in panes shared by sliding windows.
    fn panes(&self) -> Option<(i64, i64, i64)> {
        match (self.assigner, self.contents) {
            (Assigner::Sliding { size, slide }, Contents::Accumulator) => {
                let (s, l, pane) = self.pane;
                Some((
                    size,
                    slide,
                    if (s, l) == (size, slide) {
                        pane
                    } else {
                        gcd(size, slide)
                    },
                ))
            }
            _ => None,
        }
    }

    /// The times around `t` whose slots ([`Spec::slots_of`]) are `t`'s,
    /// `[from, to)`: a tumbling window, or a pane (whether or not a window
    /// holds it); `None` where that takes more than a division to know
    /// (sessions, and sliding windows kept whole).
    pub fn same_slots(&self, t: i64) -> Option<(i64, i64)> {
        let step = match self.assigner {
            Assigner::Tumbling { size } => size,
            _ => self.panes()?.2,
        };
        // Not where a slot's bounds saturate: the slots are not the
        // step's multiples there.
        let from = t.div_euclid(step).checked_mul(step)?;
        Some((from, from.checked_add(step)?))
    }

    /// Whether this is a session window (slots merge).
    pub fn is_session(&self) -> bool {
        matches!(self.assigner, Assigner::Session { .. })
    }

    /// The slots (windows, or panes of sliding windows) a record at `t` is
    /// kept in, oldest first, into `out`; none when no window holds `t`.
    pub fn slots_of(&self, t: i64, out: &mut Vec<(i64, i64)>) {
        out.clear();
        if let Some((size, slide, pane)) = self.panes() {
            // The pane of `t`, if a window holds `t` at all.
            let last = floor_to(t, slide);
            if t < last.saturating_add(size) {
                let p = floor_to(t, pane);
                out.push((p, p.saturating_add(pane)));
            }
            return;
        }
        match self.assigner {
            Assigner::Tumbling { size } => {
                let start = floor_to(t, size);
                out.push((start, start.saturating_add(size)));
            }
            Assigner::Sliding { size, slide } => {
                let mut start = Some(floor_to(t, slide));
                while let Some(s) = start.filter(|&s| s > t.saturating_sub(size)) {
                    out.push((s, s.saturating_add(size)));
                    start = s.checked_sub(slide);
                }
                out.reverse();
            }
            Assigner::Session { gap } => out.push((t, t.saturating_add(gap))),
        }
    }

    /// The windows a slot's contents belong to, oldest first, into `out`:
    /// every window that holds a pane, or the slot itself.
    pub fn windows_of(&self, slot: (i64, i64), out: &mut Vec<(i64, i64)>) {
        out.clear();
        let Some((size, slide, _)) = self.panes() else {
            out.push(slot);
            return;
        };
        // Windows [s, s + size) with s a multiple of the slide, s <= pane
        // start and s + size >= pane end.
        let mut s = floor_to(slot.0, slide);
        while s.saturating_add(size) >= slot.1 {
            out.push((s, s.saturating_add(size)));
            match s.checked_sub(slide) {
                Some(next) => s = next,
                None => break,
            }
        }
        out.reverse();
    }

    /// The window that fires at `time` (its `end - 1`) when windows are
    /// made of panes: `None` when no window ends there.
    pub(crate) fn paned_window_at(&self, time: i64) -> Option<(i64, i64)> {
        let (size, slide, _) = self.panes()?;
        let end = time.checked_add(1)?;
        let start = end.checked_sub(size)?;
        (start.rem_euclid(slide) == 0).then_some((start, end))
    }

    /// Whether slots are panes.
    pub(crate) fn has_panes(&self) -> bool {
        self.panes().is_some()
    }

    /// When a window's state may go: the end of its allowed lateness.
    pub fn cleanup_time(&self, end: i64) -> i64 {
        (end - 1).saturating_add(self.lateness)
    }

    /// When a slot may go: the cleanup time of the last window it is in.
    pub fn slot_cleanup(&self, slot: (i64, i64)) -> i64 {
        match self.panes() {
            Some((size, slide, _)) => {
                self.cleanup_time(floor_to(slot.0, slide).saturating_add(size))
            }
            None => self.cleanup_time(slot.1),
        }
    }

    /// Whether a window ending at `end` is past its allowed lateness: it
    /// takes no more records and never fires again.
    pub fn is_late(&self, end: i64, watermark: Option<i64>) -> bool {
        self.time == Time::Event && watermark.is_some_and(|wm| self.cleanup_time(end) <= wm)
    }

    /// Whether a slot is past the cleanup of every window it is in.
    pub fn is_slot_late(&self, slot: (i64, i64), watermark: Option<i64>) -> bool {
        self.time == Time::Event && watermark.is_some_and(|wm| self.slot_cleanup(slot) <= wm)
    }

    /// Whether a window ending at `end` has fired already: a record for it
    /// (within the allowed lateness) makes it fire again at once.
    pub fn has_fired(&self, end: i64, watermark: Option<i64>) -> bool {
        self.time == Time::Event && watermark.is_some_and(|wm| end - 1 <= wm)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(assigner: Assigner, contents: Contents) -> Spec {
        Spec::new(assigner, Time::Event, 0, contents).unwrap()
    }

    fn slots(s: &Spec, t: i64) -> Vec<(i64, i64)> {
        let mut out = Vec::new();
        s.slots_of(t, &mut out);
        out
    }

    fn windows(s: &Spec, slot: (i64, i64)) -> Vec<(i64, i64)> {
        let mut out = Vec::new();
        s.windows_of(slot, &mut out);
        out
    }

    /// Every window of a record, through its slots: what Flink assigns.
    fn all_windows(s: &Spec, t: i64) -> Vec<(i64, i64)> {
        let mut all: Vec<(i64, i64)> = slots(s, t)
            .into_iter()
            .flat_map(|slot| windows(s, slot))
            .collect();
        all.sort();
        all.dedup();
        all
    }

    #[test]
    fn tumbling_and_sessions() {
        let t = spec(Assigner::Tumbling { size: 10 }, Contents::Accumulator);
        assert_eq!(slots(&t, 0), [(0, 10)]);
        assert_eq!(slots(&t, 9), [(0, 10)]);
        assert_eq!(slots(&t, -1), [(-10, 0)]);
        assert_eq!(windows(&t, (0, 10)), [(0, 10)]);
        let g = spec(Assigner::Session { gap: 5 }, Contents::Accumulator);
        assert_eq!(slots(&g, 3), [(3, 8)]);
    }

    #[test]
    fn sliding_windows_are_flinks_with_panes_or_without() {
        const DAY: i64 = 86_400_000;
        for (size, slide) in [
            (10, 5),
            (30, 10),
            (10, 3),
            (30 * DAY, 7 * DAY),
            (5, 10),
            (7, 7),
        ] {
            for contents in [Contents::Accumulator, Contents::Records] {
                let s = spec(Assigner::Sliding { size, slide }, contents);
                for t in (-40..60).map(|i| i * size / 7 + i % 3) {
                    let want: Vec<(i64, i64)> = (-100..100)
                        .map(|k| (k * slide, k * slide + size))
                        .filter(|&(a, b)| a <= t && t < b)
                        .collect();
                    assert_eq!(all_windows(&s, t), want, "{size}/{slide} at {t}");
                }
            }
        }
        let s = spec(
            Assigner::Sliding { size: 10, slide: 4 },
            Contents::Accumulator,
        );
        // Panes of gcd(10, 4) = 2: one per record.
        assert_eq!(slots(&s, 7), [(6, 8)]);
        assert_eq!(windows(&s, (6, 8)), [(0, 10), (4, 14)]);
        assert_eq!(s.paned_window_at(13), Some((4, 14)));
        assert_eq!(s.paned_window_at(12), None);
        // The pane goes with its last window.
        assert_eq!(s.slot_cleanup((6, 8)), 13);
        // A record between windows (slide above size) is in none.
        let gaps = spec(
            Assigner::Sliding { size: 5, slide: 10 },
            Contents::Accumulator,
        );
        assert_eq!(slots(&gaps, 7), []);
        assert_eq!(slots(&gaps, 3), [(0, 5)]);
    }

    /// A span of [`Spec::same_slots`] holds its time, and every time in it
    /// has the same slots: the engine assigns them once per span.
    #[test]
    fn times_in_a_span_share_their_slots() {
        let assigners = [
            Assigner::Tumbling { size: 7 },
            Assigner::Sliding { size: 10, slide: 4 },
            Assigner::Sliding { size: 10, slide: 5 },
            Assigner::Sliding { size: 5, slide: 10 },
            Assigner::Sliding { size: 9, slide: 6 },
            Assigner::Session { gap: 3 },
        ];
        let mut spans = 0;
        for a in assigners {
            for c in [Contents::Accumulator, Contents::Records] {
                let s = spec(a, c);
                for t in -50..50 {
                    let Some((from, to)) = s.same_slots(t) else {
                        continue;
                    };
                    spans += 1;
                    assert!(from <= t && t < to, "{a:?} {c:?}: {t} outside {from}..{to}");
                    for u in from..to {
                        assert_eq!(slots(&s, u), slots(&s, t), "{a:?} {c:?}: {u} and {t}");
                    }
                }
                let none = matches!(a, Assigner::Session { .. })
                    || matches!(a, Assigner::Sliding { .. }) && c == Contents::Records;
                assert_eq!(s.same_slots(0).is_none(), none, "{a:?} {c:?}");
            }
        }
        assert!(spans > 0);
        // At the ends of time, where slots saturate.
        for a in [
            Assigner::Tumbling { size: 7 },
            Assigner::Tumbling { size: 10 },
            Assigner::Sliding { size: 10, slide: 4 },
        ] {
            let s = spec(a, Contents::Accumulator);
            let ends = (0..40).flat_map(|i| [i64::MIN + i, i64::MAX - i]);
            for t in ends {
                let Some((from, to)) = s.same_slots(t) else {
                    continue;
                };
                assert!(from <= t && t < to, "{a:?}: {t} outside {from}..{to}");
                for u in from..to {
                    assert_eq!(slots(&s, u), slots(&s, t), "{a:?}: {u} and {t}");
                }
            }
        }
        // A spec whose windows changed after it was made finds its panes
        // again.
        let mut s = spec(
            Assigner::Sliding { size: 10, slide: 4 },
            Contents::Accumulator,
        );
        s.assigner = Assigner::Sliding { size: 9, slide: 6 };
        assert_eq!(slots(&s, 7), [(6, 9)]);
        assert_eq!(s.same_slots(7), Some((6, 9)));
    }

    #[test]
    fn lateness_and_firing() {
        let s = Spec::new(
            Assigner::Tumbling { size: 10 },
            Time::Event,
            5,
            Contents::Accumulator,
        )
        .unwrap();
        assert!(!s.has_fired(10, Some(8)));
        assert!(s.has_fired(10, Some(9)));
        assert!(!s.is_late(10, Some(13)));
        assert!(s.is_late(10, Some(14)));
        assert!(!s.is_late(10, None));
        let p = Spec::new(
            Assigner::Tumbling { size: 10 },
            Time::Processing,
            5,
            Contents::Accumulator,
        )
        .unwrap();
        assert_eq!(p.lateness, 0, "no lateness on processing time");
        assert!(!p.has_fired(10, Some(100)));
        for bad in [
            Assigner::Tumbling { size: 0 },
            Assigner::Sliding {
                size: 10,
                slide: -1,
            },
            Assigner::Session { gap: 0 },
        ] {
            assert!(Spec::new(bad, Time::Event, 0, Contents::Records).is_err());
        }
        assert!(
            Spec::new(
                Assigner::Session { gap: 1 },
                Time::Event,
                -1,
                Contents::Records
            )
            .is_err()
        );
    }

    #[test]
    fn extreme_times_do_not_overflow() {
        for a in [
            Assigner::Tumbling { size: 7 },
            Assigner::Sliding { size: 10, slide: 3 },
            Assigner::Session { gap: 9 },
        ] {
            for c in [Contents::Accumulator, Contents::Records] {
                let s = spec(a, c);
                for t in [i64::MIN, i64::MIN + 1, i64::MAX, i64::MAX - 1] {
                    for slot in slots(&s, t) {
                        windows(&s, slot);
                        s.slot_cleanup(slot);
                    }
                    s.paned_window_at(t);
                }
            }
        }
    }
}
