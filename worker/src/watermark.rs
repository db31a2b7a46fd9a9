//! Watermarks per input channel.

use weir_model::codec::Codec;
use weir_model::format::Format;

/// Tracks the largest watermark seen on each input channel; the task's
/// watermark is the minimum of those, over channels that have neither ended
/// nor gone idle. A channel that never sent a watermark holds time back
/// until it does, ends, or goes idle.
///
/// ```
/// use weir_worker::watermark::WatermarkTracker;
/// let mut w = WatermarkTracker::new(2);
/// assert_eq!(w.update(0, 10), None); // channel 1 has not spoken
/// assert_eq!(w.update(1, 5), Some(5));
/// assert_eq!(w.update(1, 20), Some(10));
/// assert_eq!(w.update(0, 8), None); // never goes back
/// assert_eq!(w.end(0), Some(20));
///
/// // An idle channel does not hold time back; it counts again once it
/// // sends data or a watermark.
/// let mut w = WatermarkTracker::new(2);
/// assert_eq!(w.update(0, 100), None);
/// assert_eq!(w.idle(1), Some(100));
/// assert_eq!(w.update(0, 150), Some(150));
/// w.active(1);
/// assert_eq!(w.update(0, 200), None); // channel 1 is back, at nothing yet
/// assert_eq!(w.update(1, 180), Some(180));
/// assert!(!w.is_idle());
/// assert_eq!(w.idle(0), None);
/// assert_eq!(w.idle(1), None);
/// assert!(w.is_idle());
/// ```
#[derive(Debug, Clone)]
pub struct WatermarkTracker {
    channels: Vec<Option<i64>>,
    ended: Vec<bool>,
    idle: Vec<bool>,
    current: Option<i64>,
}

impl WatermarkTracker {
    /// Track `channels` inputs.
    pub fn new(channels: usize) -> Self {
        WatermarkTracker {
            channels: vec![None; channels],
            ended: vec![false; channels],
            idle: vec![false; channels],
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
        self.idle[channel] = false;
        let seen = &mut self.channels[channel];
        if seen.is_none_or(|s| wm > s) {
            *seen = Some(wm);
        }
        self.recompute()
    }

    /// Channel `channel` sent records: it is active again.
    pub fn active(&mut self, channel: usize) {
        self.idle[channel] = false;
    }

    /// Channel `channel` went idle: it no longer holds time back. Returns the
    /// new watermark if it advanced.
    pub fn idle(&mut self, channel: usize) -> Option<i64> {
        self.idle[channel] = true;
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

    /// Whether every channel that has not ended is idle (and one has not
    /// ended): the task itself is idle.
    pub fn is_idle(&self) -> bool {
        let open: Vec<bool> = self
            .ended
            .iter()
            .zip(&self.idle)
            .filter(|(ended, _)| !**ended)
            .map(|(_, idle)| *idle)
            .collect();
        !open.is_empty() && open.iter().all(|idle| *idle)
    }

    fn recompute(&mut self) -> Option<i64> {
        let mut min: Option<i64> = None;
        let mut open = 0;
        for ((seen, ended), idle) in self.channels.iter().zip(&self.ended).zip(&self.idle) {
            if *ended || *idle {
                open += usize::from(!*ended);
                continue;
            }
            open += 1;
            match seen {
                None => return None,
                Some(s) => min = Some(min.map_or(*s, |m: i64| m.min(*s))),
            }
        }
        let min = match min {
            Some(m) => m,
            // Every open channel is idle: time goes on with the ended ones.
            None if open > 0 => self
                .channels
                .iter()
                .zip(&self.ended)
                .filter(|(_, e)| **e)
                .filter_map(|(s, _)| *s)
                .max()?,
            None => self.channels.iter().flatten().max().copied()?,
        };
        if self.current.is_none_or(|c| min > c) {
            self.current = Some(min);
            return Some(min);
        }
        None
    }
}

/// Makes a source's watermarks from the timestamps of its records
/// ([`EventTime`]): the largest timestamp seen, minus the allowed delay,
/// minus 1, emitted every `interval_ms` of processing time, or after every
/// record that advances it when the interval is 0. Without records for
/// `idle_timeout_ms`, the source is idle.
///
/// ```
/// use std::time::{Duration, Instant};
/// use weir_model::graph::EventTime;
/// use weir_worker::watermark::WatermarkGenerator;
/// let t0 = Instant::now();
/// let mut g = WatermarkGenerator::new(
///     EventTime { timestamp: None, max_delay_ms: 100, interval_ms: 200, idle_timeout_ms: Some(1000) },
///     t0,
/// );
/// g.observe(Some(5_000), t0);
/// g.observe(Some(4_000), t0); // out of order, within the delay
/// assert_eq!(g.due(t0), None); // not yet: periodic
/// assert_eq!(g.due(t0 + Duration::from_millis(200)), Some(4_899));
/// assert_eq!(g.due(t0 + Duration::from_millis(400)), None); // no progress
/// assert!(!g.went_idle(t0 + Duration::from_millis(900)));
/// assert!(g.went_idle(t0 + Duration::from_millis(1000)));
/// assert!(!g.went_idle(t0 + Duration::from_millis(1100)), "once");
/// ```
#[derive(Debug, Clone)]
pub struct WatermarkGenerator {
    strategy: weir_model::graph::EventTime,
    max_timestamp: Option<i64>,
    emitted: Option<i64>,
    last_emit: std::time::Instant,
    last_record: std::time::Instant,
    idle: bool,
    /// Where event time stands across the source's splits, when it tracks
    /// them: `Some(None)` holds the watermark back.
    cap: Option<Option<i64>>,
    /// The source reads no split: idle whatever the timeout.
    no_splits: bool,
}

impl WatermarkGenerator {
    /// A generator following `strategy`, started at `now`.
    pub fn new(strategy: weir_model::graph::EventTime, now: std::time::Instant) -> Self {
        WatermarkGenerator {
            strategy,
            max_timestamp: None,
            emitted: None,
            last_emit: now,
            last_record: now,
            idle: false,
            cap: None,
            no_splits: false,
        }
    }

    /// How long without records a split or the source is idle after.
    pub fn idle_after(&self) -> Option<std::time::Duration> {
        self.strategy
            .idle_timeout_ms
            .map(std::time::Duration::from_millis)
    }

    /// Where event time stands across the source's splits
    /// ([`crate::connectors::Source::split_time`]): the watermark follows
    /// the slowest split that is not idle; with none, the source is idle.
    ///
    /// ```
    /// use std::time::Instant;
    /// use weir_model::graph::EventTime;
    /// use weir_worker::connectors::SplitTime;
    /// use weir_worker::watermark::WatermarkGenerator;
    /// let t0 = Instant::now();
    /// let mut g = WatermarkGenerator::new(
    ///     EventTime { timestamp: None, max_delay_ms: 0, interval_ms: 0, idle_timeout_ms: None },
    ///     t0,
    /// );
    /// g.split_time(SplitTime::Hold);
    /// g.observe(Some(5_000), t0);
    /// assert_eq!(g.due(t0), None); // a split has no time yet
    /// g.split_time(SplitTime::Bound(3_000));
    /// // After the batch, not after each record: the bound is where the
    /// // splits stand after the whole batch.
    /// assert_eq!(g.observe(Some(5_000), t0), None);
    /// assert_eq!(g.due(t0), Some(2_999)); // the slowest split's
    /// g.split_time(SplitTime::Idle);
    /// assert!(g.went_idle(t0));
    /// ```
    pub fn split_time(&mut self, t: crate::connectors::SplitTime) {
        use crate::connectors::SplitTime;
        match t {
            SplitTime::Untracked => self.cap = None,
            SplitTime::Hold => {
                self.cap = Some(None);
                self.no_splits = false;
            }
            SplitTime::Bound(b) => {
                self.cap = Some(Some(b));
                self.no_splits = false;
            }
            SplitTime::Idle => self.no_splits = true,
        }
    }

    /// Whether a watermark follows every record that advances it.
    pub fn punctuated(&self) -> bool {
        self.strategy.interval_ms == 0
    }

    /// A record with `timestamp` passed at `now`. In punctuated mode,
    /// returns the watermark to emit after it, if it advanced.
    pub fn observe(&mut self, timestamp: Option<i64>, now: std::time::Instant) -> Option<i64> {
        self.last_record = now;
        self.idle = false;
        if let Some(t) = timestamp {
            self.max_timestamp = Some(self.max_timestamp.map_or(t, |m| m.max(t)));
        }
        // A bound across splits is where they stand after the whole batch:
        // the watermark waits for the batch's end (`due`).
        if self.punctuated() && self.cap.is_none() {
            self.take()
        } else {
            None
        }
    }

    /// The watermark to emit at `now`, if its interval has passed and it
    /// advanced.
    pub fn due(&mut self, now: std::time::Instant) -> Option<i64> {
        let interval = std::time::Duration::from_millis(self.strategy.interval_ms);
        if now.duration_since(self.last_emit) < interval {
            return None;
        }
        self.last_emit = now;
        self.take()
    }

    fn take(&mut self) -> Option<i64> {
        let max = match self.cap {
            None => self.max_timestamp?,
            Some(None) => return None,
            Some(Some(bound)) => bound,
        };
        let wm = max
            .saturating_sub(self.strategy.max_delay_ms)
            .saturating_sub(1);
        if self.emitted.is_some_and(|e| wm <= e) {
            return None;
        }
        self.emitted = Some(wm);
        Some(wm)
    }

    /// Whether the source has just become idle at `now` (true once per idle
    /// period).
    pub fn went_idle(&mut self, now: std::time::Instant) -> bool {
        if self.idle {
            return false;
        }
        let timed_out = self
            .strategy
            .idle_timeout_ms
            .is_some_and(|t| now.duration_since(self.last_record).as_millis() >= u128::from(t));
        if !timed_out && !self.no_splits {
            return false;
        }
        self.idle = true;
        true
    }
}

/// The timestamp of a record in `format` at `pointer` (an integer, or a
/// float without a fraction, in ms).
///
/// ```
/// use weir_model::codec::Codec;
/// use weir_model::format::Format;
/// use weir_worker::watermark::timestamp_at;
/// let json = &Format::of(Codec::Json);
/// assert_eq!(timestamp_at(br#"{"ts": 1700000000000}"#, "/ts", json).unwrap(), 1_700_000_000_000);
/// assert!(timestamp_at(br#"{"ts": "x"}"#, "/ts", json).unwrap_err().contains("not an integer"));
/// assert!(timestamp_at(br#"{"t": 1}"#, "/ts", json).unwrap_err().contains("no field /ts"));
/// // {"ts": 1000} in MessagePack
/// let packed = [0x81, 0xa2, b't', b's', 0xcd, 0x03, 0xe8];
/// assert_eq!(timestamp_at(&packed, "/ts", &Format::of(Codec::Msgpack)).unwrap(), 1000);
/// ```
pub fn timestamp_at(value: &[u8], pointer: &str, format: &Format) -> Result<i64, String> {
    TimestampField::new(pointer, format).read(value, format)
}

/// Where a source's records carry their timestamps: a JSON pointer and, on
/// a stream of rows, the field's path in the type, resolved once.
#[derive(Debug, Clone)]
pub struct TimestampField {
    pointer: String,
    path: Option<Vec<(usize, weir_model::types::row::FieldNode)>>,
    /// A top-level integer field that is never null: its slot's offset
    /// and type, read there.
    slot: Option<(usize, weir_model::types::row::Scalar)>,
}

impl TimestampField {
    /// The timestamps at `pointer` of records in `format`.
    pub fn new(pointer: &str, format: &Format) -> TimestampField {
        use weir_model::types::row::{FieldNode, Node};
        let path = format.row_path(pointer);
        let slot = match path.as_deref() {
            Some(
                [
                    (
                        _,
                        FieldNode {
                            node: Node::Scalar(scalar),
                            offset,
                            ..
                        },
                    ),
                ],
            ) if scalar.integer_range().is_some() => Some((*offset, *scalar)),
            _ => None,
        };
        TimestampField {
            pointer: pointer.to_owned(),
            path,
            slot,
        }
    }

    /// The timestamp of `value`, a record in the format this was made for.
    pub fn read(&self, value: &[u8], format: &Format) -> Result<i64, String> {
        if format.codec == Codec::Row {
            if let Some((offset, scalar)) = self.slot
                && let Ok(Some(t)) = weir_model::types::row::scalar_int(scalar, value, offset)
            {
                return Ok(t);
            }
            // (What is wrong with it is said here.)
            return format.row_int(value, &self.pointer, self.path.as_deref());
        }
        timestamp_in(value, &self.pointer, format.codec)
    }
}

/// The timestamp at `pointer` of a JSON or MessagePack record.
fn timestamp_in(value: &[u8], pointer: &str, codec: Codec) -> Result<i64, String> {
    // A JSON record as its first 120 characters, MessagePack as JSON.
    let show = || match codec {
        Codec::Json => {
            let s = String::from_utf8_lossy(value);
            let mut s: String = s.chars().take(120).collect();
            if value.len() > 120 {
                s.push('…');
            }
            s
        }
        _ => codec.excerpt(value),
    };
    let not_integer = || {
        format!(
            "the timestamp {pointer} of record {} is not an integer",
            show()
        )
    };
    let missing = || format!("record {} has no field {pointer}", show());
    match codec {
        Codec::Json => {
            let raw = weir_model::json::pointer_raw(value, pointer)
                .map_err(|e| format!("record {} is not JSON: {e}", show()))?
                .ok_or_else(missing)?
                .get();
            raw.parse::<i64>()
                .ok()
                .or_else(|| {
                    raw.parse::<f64>()
                        .ok()
                        .filter(|f| f.fract() == 0.0)
                        .map(|f| f as i64)
                })
                .ok_or_else(not_integer)
        }
        Codec::Msgpack | Codec::Row => {
            let field = weir_model::msgpack::pointer(value, pointer)
                .map_err(|e| format!("record {} is not MessagePack: {e}", show()))?
                .ok_or_else(missing)?;
            rmp::decode::read_int::<i64, _>(&mut &field[..])
                .ok()
                .or_else(|| {
                    let float = rmp::decode::read_f64(&mut &field[..])
                        .ok()
                        .or_else(|| rmp::decode::read_f32(&mut &field[..]).ok().map(f64::from));
                    float.filter(|f| f.fract() == 0.0).map(|f| f as i64)
                })
                .ok_or_else(not_integer)
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use weir_model::types::Type;
    use weir_model::types::row::{Schema, json};

    use super::*;

    /// A top-level integer read at its offset gives what the general read
    /// gives, and a field that cannot be read there says what is wrong the
    /// same way.
    #[test]
    fn timestamps_of_rows_read_at_their_slot_as_along_their_path() {
        let format = Format {
            codec: Codec::Row,
            schema: Some(Arc::new(Schema::new(
                "{ts: i64, n: u32, big: u64, o: i64?, s: string, at: {t: i64}}"
                    .parse::<Type>()
                    .unwrap(),
            ))),
        };
        let node = &format.schema.as_ref().unwrap().node;
        let mut r = Vec::new();
        let text = r#"{"ts": -5, "n": 7, "big": 18446744073709551615, "o": null, "s": "x", "at": {"t": 9}}"#;
        json::read_value(node, text.as_bytes(), &mut r).unwrap();
        let read = |pointer: &str| TimestampField::new(pointer, &format).read(&r, &format);
        assert!(TimestampField::new("/ts", &format).slot.is_some());
        assert_eq!(read("/ts"), Ok(-5));
        assert_eq!(read("/n"), Ok(7));
        assert_eq!(read("/at/t"), Ok(9));
        for pointer in ["/big", "/o", "/s"] {
            let e = read(pointer).unwrap_err();
            assert_eq!(e, format.row_int(&r, pointer, None).unwrap_err());
            assert!(e.contains("not an integer"), "{e}");
        }
        // A row too short for the slot is an error, not a read past it.
        let ts = TimestampField::new("/ts", &format);
        assert!(ts.read(&r[..4], &format).is_err());
    }
}
