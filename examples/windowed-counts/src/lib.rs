//! Windowed counts: how many records each key has per event-time window.
//!
//! The manifest makes the windows (tumbling, or sliding when `slide` is
//! given), the watermark (bounded out-of-orderness of `max_delay` ms) and
//! the allowed lateness; this component only says what a window computes.

use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};
use weir::{Aggregate, OpenContext, Window};

/// One window's count.
#[derive(Serialize, Deserialize, Debug, PartialEq)]
pub struct WindowCount {
    /// The key.
    pub key: String,
    /// The window's first instant, ms.
    pub window_start: i64,
    /// The first instant after it, ms.
    pub window_end: i64,
    /// Records of the key in the window.
    pub count: u64,
}

/// Counts records per key and window.
pub struct Count;

impl Aggregate for Count {
    // A count reads nothing of a record: its key and timestamp come with it
    // (`Window::key`, the source's `timestamp`), and `IgnoredAny` checks the
    // record is JSON without building it.
    type In = IgnoredAny;
    type Acc = u64;
    type Out = WindowCount;

    fn open(_: &mut OpenContext) -> weir::Result<Self> {
        Ok(Count)
    }

    fn create(&self) -> u64 {
        0
    }

    fn add(&self, acc: &mut u64, _: &IgnoredAny) {
        *acc += 1;
    }

    fn merge(&self, acc: &mut u64, other: u64) {
        *acc += other;
    }

    fn result(&self, window: &Window, count: u64) -> weir::Result<WindowCount> {
        Ok(WindowCount {
            key: window.key()?,
            window_start: window.start,
            window_end: window.end,
            count,
        })
    }
}

weir::export_operators! {
    window_aggregate "count" => Count;
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir::testing::Harness;

    #[test]
    fn counts_per_window_with_lateness() {
        let mut h = Harness::window_aggregate::<Count>(&[
            ("weir.window.kind", "tumbling"),
            ("weir.window.size-ms", "10"),
            ("weir.window.allowed-lateness-ms", "5"),
        ])
        .unwrap();
        let e = serde_json::json!({"key": "a", "ts": 0});
        for t in [1, 2, 11] {
            h.process::<_, _, WindowCount>("a", &e, Some(t)).unwrap();
        }
        let fired: Vec<WindowCount> = h.advance_watermark(9).unwrap();
        assert_eq!(
            fired,
            [WindowCount {
                key: "a".into(),
                window_start: 0,
                window_end: 10,
                count: 2
            }]
        );
        // Within the lateness: fires again, updated.
        let again: Vec<WindowCount> = h.process("a", &e, Some(3)).unwrap();
        assert_eq!(again[0].count, 3);
        // Past it: the side output.
        h.advance_watermark::<WindowCount>(14).unwrap();
        assert!(
            h.process::<_, _, WindowCount>("a", &e, Some(4))
                .unwrap()
                .is_empty()
        );
        assert_eq!(h.side_output::<serde_json::Value>("late").unwrap(), [e]);
    }
}
