//! User sessions: all of a session's clicks at once, through a
//! [`ProcessWindow`] over session windows (which the manifest declares).

use serde::{Deserialize, Serialize};
use weir::{Collector, OpenContext, ProcessWindow, Window};

/// A page view.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct Click {
    /// Who.
    pub user: String,
    /// Which page.
    pub page: String,
    /// When, ms.
    pub ts: i64,
}

/// One session of one user.
#[derive(Serialize, Deserialize, Debug, PartialEq)]
pub struct Session {
    /// Who.
    pub user: String,
    /// Its first click's time.
    pub start: i64,
    /// Its last click's time plus the gap.
    pub end: i64,
    /// How many clicks.
    pub clicks: usize,
    /// The pages, in time order.
    pub pages: Vec<String>,
}

/// Turns a session's clicks into a [`Session`].
pub struct Sessionize;

impl ProcessWindow for Sessionize {
    type In = Click;
    type Out = Session;

    fn open(_: &mut OpenContext) -> weir::Result<Self> {
        Ok(Sessionize)
    }

    fn process(
        &mut self,
        window: &Window,
        mut clicks: Vec<Click>,
        out: &mut Collector<Session>,
    ) -> weir::Result<()> {
        clicks.sort_by_key(|c| c.ts);
        out.emit(Session {
            user: window.key()?,
            start: window.start,
            end: window.end,
            clicks: clicks.len(),
            pages: clicks.into_iter().map(|c| c.page).collect(),
        });
        Ok(())
    }
}

weir::export_operators! {
    window_process "sessionize" => Sessionize;
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir::testing::Harness;

    #[test]
    fn clicks_within_the_gap_make_one_session() {
        let mut h = Harness::window_process::<Sessionize>(&[
            ("weir.window.kind", "session"),
            ("weir.window.gap-ms", "100"),
        ])
        .unwrap();
        let click = |page: &str, ts: i64| serde_json::json!({"user": "u", "page": page, "ts": ts});
        for (page, ts) in [("a", 0), ("c", 150), ("b", 60), ("d", 400)] {
            h.process::<_, _, Session>("u", &click(page, ts), Some(ts))
                .unwrap();
        }
        let out: Vec<Session> = h.advance_watermark(i64::MAX).unwrap();
        assert_eq!(out.len(), 2);
        assert_eq!((out[0].start, out[0].end, out[0].clicks), (0, 250, 3));
        assert_eq!(out[0].pages, ["a", "b", "c"]);
        assert_eq!((out[1].start, out[1].end, out[1].clicks), (400, 500, 1));
    }
}
