//! Watermarks per input channel.

/// Tracks the largest watermark seen on each input channel; the task's
/// watermark is the minimum of those, over channels that have not ended.
///
/// ```
/// use weir_worker::watermark::WatermarkTracker;
/// let mut w = WatermarkTracker::new(2);
/// assert_eq!(w.update(0, 10), None); // channel 1 has not spoken
/// assert_eq!(w.update(1, 5), Some(5));
/// assert_eq!(w.update(1, 20), Some(10));
/// assert_eq!(w.update(0, 8), None); // never goes back
/// assert_eq!(w.end(0), Some(20));
/// ```
#[derive(Debug, Clone)]
pub struct WatermarkTracker {
    channels: Vec<Option<i64>>,
    ended: Vec<bool>,
    current: Option<i64>,
}

impl WatermarkTracker {
    /// Track `channels` inputs.
    pub fn new(channels: usize) -> Self {
        WatermarkTracker {
            channels: vec![None; channels],
            ended: vec![false; channels],
            current: None,
        }
    }

    /// The task's current watermark.
    pub fn current(&self) -> Option<i64> {
        self.current
    }

    /// Channel `channel` sent watermark `wm`; returns the task's new
    /// watermark if it advanced.
    pub fn update(&mut self, channel: usize, wm: i64) -> Option<i64> {
        let seen = &mut self.channels[channel];
        if seen.is_none_or(|s| wm > s) {
            *seen = Some(wm);
        }
        self.recompute()
    }

    /// Channel `channel` ended: it no longer holds time back. Returns the new
    /// watermark if it advanced.
    pub fn end(&mut self, channel: usize) -> Option<i64> {
        self.ended[channel] = true;
        self.recompute()
    }

    /// Whether every channel ended.
    pub fn all_ended(&self) -> bool {
        self.ended.iter().all(|e| *e)
    }

    fn recompute(&mut self) -> Option<i64> {
        let mut min: Option<i64> = None;
        for (seen, ended) in self.channels.iter().zip(&self.ended) {
            if *ended {
                continue;
            }
            match seen {
                None => return None,
                Some(s) => min = Some(min.map_or(*s, |m: i64| m.min(*s))),
            }
        }
        let min = min.or_else(|| self.channels.iter().flatten().max().copied())?;
        if self.current.is_none_or(|c| min > c) {
            self.current = Some(min);
            return Some(min);
        }
        None
    }
}
