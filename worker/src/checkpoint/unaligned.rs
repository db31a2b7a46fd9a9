//! Unaligned checkpoints (Flink's FLIP-76): a task snapshots on the first
//! arrival of a checkpoint's barrier instead of waiting for it on every
//! input channel, and stores the records the barriers overtook.
//!
//! The barrier is found in the task's queue ([`crate::inbox::Inbox::fill`])
//! behind records the task has not processed yet. At that moment the task
//! snapshots its chain and forwards the barrier (downstream tasks find it
//! just as early). What the snapshot misses, per input channel, is what
//! came before the barrier on that channel and was not processed yet:
//!
//! - on the channel whose barrier was found: the records ahead of it in the
//!   queue, copied at once;
//! - on every other channel: whatever the task processes from it until its
//!   barrier is found too (then the records ahead of that barrier).
//!
//! A channel whose data ends before its barrier has delivered all of it. When
//! every channel's share is known the log is written beside the snapshot
//! and the checkpoint acknowledged. A restore puts the log back in front of
//! the task's queue ([`crate::inbox::Inbox::replay`]): the task processes
//! those records again, before anything its upstream sends from the
//! checkpoint on.
//!
//! An aligned checkpoint with a timeout turns unaligned once the time since
//! its trigger passes it: the channels that delivered the barrier already
//! (blocked, holding what came after it) need nothing stored; the others
//! are logged as above.
//!
//! Limits (as Flink's): one checkpoint at a time; savepoints are aligned;
//! the log replays into the same graph at the same parallelism only (a
//! rescale starts from a savepoint).

use bytes::{Buf, BufMut, Bytes};
use weir_model::frame::{Frame, decode, encode_message};
use weir_model::{Barrier, Signal, StreamMessage};

use super::TaskSnapshot;
use crate::partition::Envelope;

/// The log file's first bytes.
const MAGIC: &[u8] = b"WEIRFLIGHT1\n";

/// The file a subtask's log is written to, in its snapshot directory.
pub const LOG_FILE: &str = "inflight.bin";

/// An unaligned checkpoint this task snapshotted and whose overtaken
/// records it is still collecting.
#[derive(Debug)]
pub struct InFlight {
    /// The checkpoint.
    pub barrier: Barrier,
    /// Per input channel: its records are still logged (its barrier was not
    /// found yet and it has not ended).
    open: Vec<bool>,
    /// The overtaken records, in their order per channel.
    log: Vec<Envelope>,
    /// The snapshot, to acknowledge once the log is complete.
    pub snapshot: TaskSnapshot,
}

/// Whether a message belongs in the log: records and time, not barriers
/// nor the end of data (a restored upstream that had ended its data ends
/// it again).
fn logged(message: &StreamMessage) -> bool {
    matches!(
        message,
        StreamMessage::Data(_)
            | StreamMessage::Signal(Signal::Watermark(_))
            | StreamMessage::Signal(Signal::Idle)
    )
}

/// Whether a channel's records end with `message`: its end of data (only
/// barriers may follow) or of stream.
fn ends(message: &StreamMessage) -> bool {
    message.is_end() || matches!(message, StreamMessage::Signal(Signal::EndOfData))
}

impl InFlight {
    /// Checkpoint `barrier`'s snapshot, taken: channels for which `closed`
    /// holds need no log (they delivered its barrier already, or ended).
    pub fn new(barrier: Barrier, closed: Vec<bool>, snapshot: TaskSnapshot) -> InFlight {
        InFlight {
            barrier,
            open: closed.iter().map(|c| !c).collect(),
            log: Vec::new(),
            snapshot,
        }
    }

    /// The task takes `message` of `channel` out to process it. Returns
    /// whether it is a newer checkpoint's barrier (this one was given up
    /// upstream: one checkpoint at a time).
    pub fn processing(&mut self, channel: u32, message: &StreamMessage) -> bool {
        if matches!(message, StreamMessage::Signal(Signal::Barrier(b)) if b.id > self.barrier.id) {
            return true;
        }
        let c = channel as usize;
        if !self.open.get(c).copied().unwrap_or(false) {
            return false;
        }
        let ours =
            matches!(message, StreamMessage::Signal(Signal::Barrier(b)) if b.id == self.barrier.id);
        if ours || ends(message) {
            // Its barrier, taken straight from the queue (it came while
            // the task waited), or its end.
            self.open[c] = false;
        } else if logged(message) {
            self.log.push((channel, message.clone()));
        }
        false
    }

    /// `channel`'s barrier was found behind `ahead`, its messages not
    /// processed yet: they complete the channel's share.
    pub fn barrier_found<'a>(
        &mut self,
        channel: u32,
        ahead: impl Iterator<Item = &'a StreamMessage>,
    ) {
        let c = channel as usize;
        if !self.open.get(c).copied().unwrap_or(false) {
            return;
        }
        for m in ahead {
            if ends(m) {
                break;
            }
            if logged(m) {
                self.log.push((channel, m.clone()));
            }
        }
        self.open[c] = false;
    }

    /// Every input ended its data: no channel has records left to log.
    pub fn inputs_ended(&mut self) {
        self.open.iter_mut().for_each(|o| *o = false);
    }

    /// Whether every channel's share is known.
    pub fn is_complete(&self) -> bool {
        self.open.iter().all(|o| !o)
    }

    /// The log, encoded, and the bytes of records it holds.
    pub fn encode_log(&self) -> (Vec<u8>, u64) {
        let mut out = Vec::with_capacity(MAGIC.len() + 64 * self.log.len());
        out.extend_from_slice(MAGIC);
        let mut bytes = 0;
        for (channel, message) in &self.log {
            if let StreamMessage::Data(records) = message {
                bytes += records.bytes();
            }
            let frame = encode_message(message);
            out.put_u32(*channel);
            out.put_u32(frame.len() as u32);
            out.extend_from_slice(&frame);
        }
        (out, bytes)
    }

    /// How many messages the log holds.
    pub fn logged(&self) -> usize {
        self.log.len()
    }
}

/// Read a log written by [`InFlight::encode_log`].
pub fn decode_log(bytes: Bytes) -> anyhow::Result<Vec<Envelope>> {
    let mut buf = bytes;
    if !buf.starts_with(MAGIC) {
        anyhow::bail!("not a log of records in flight (its first bytes are not Weir's)");
    }
    buf.advance(MAGIC.len());
    let mut out = Vec::new();
    while buf.has_remaining() {
        if buf.remaining() < 8 {
            anyhow::bail!("the log of records in flight is cut short");
        }
        let channel = buf.get_u32();
        let len = buf.get_u32() as usize;
        if buf.remaining() < len {
            anyhow::bail!("the log of records in flight is cut short");
        }
        match decode(buf.split_to(len))? {
            Frame::Message(m) => out.push((channel, m)),
            other => anyhow::bail!("the log of records in flight holds {other:?}"),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_model::{CheckpointKind, CheckpointMode, Record};

    fn data(v: &str) -> StreamMessage {
        StreamMessage::Data(vec![Record::value(v.as_bytes().to_vec())].into())
    }

    fn barrier() -> Barrier {
        Barrier {
            id: 3,
            timestamp_ms: 0,
            kind: CheckpointKind::Checkpoint,
            mode: CheckpointMode::ExactlyOnce,
            aligned_timeout_ms: Some(0),
        }
    }

    #[test]
    fn each_channel_logs_what_came_before_its_barrier() {
        // Channel 0 delivered the barrier already; 1 and 2 have not.
        let mut f = InFlight::new(barrier(), vec![true, false, false], TaskSnapshot::default());
        f.processing(0, &data("after-0"));
        f.processing(1, &data("a"));
        // A barrier taken from the queue, not found ahead: it closes its
        // channel as well (here, an older one's does not; a newer one's
        // says this checkpoint was given up).
        let mut other = barrier();
        other.id = 2;
        assert!(!f.processing(2, &StreamMessage::Signal(Signal::Barrier(other))));
        other.id = 4;
        assert!(f.processing(2, &StreamMessage::Signal(Signal::Barrier(other))));
        f.processing(2, &StreamMessage::watermark(5));
        assert!(!f.is_complete());
        // An upstream whose data ended still forwards barriers: its end of
        // data ends its share, and is not logged (restored, it ends again).
        let ahead = [
            data("b"),
            StreamMessage::END_OF_DATA,
            StreamMessage::watermark(9),
        ];
        f.barrier_found(1, ahead.iter());
        f.processing(1, &data("b"));
        assert!(!f.is_complete());
        f.processing(2, &data("c"));
        // A channel whose stream ended before the barrier is complete.
        f.processing(2, &StreamMessage::END);
        f.processing(2, &data("gone"));
        assert!(f.is_complete());
        let (log, bytes) = f.encode_log();
        assert_eq!(bytes, 3);
        assert_eq!(
            decode_log(Bytes::from(log)).unwrap(),
            vec![
                (1, data("a")),
                (2, StreamMessage::watermark(5)),
                (1, data("b")),
                (2, data("c")),
            ]
        );
    }

    #[test]
    fn a_barrier_taken_from_the_queue_closes_its_channel() {
        let mut f = InFlight::new(barrier(), vec![false, true], TaskSnapshot::default());
        f.processing(0, &data("a"));
        f.processing(0, &StreamMessage::Signal(Signal::Barrier(barrier())));
        f.processing(0, &data("after"));
        assert!(f.is_complete());
        assert_eq!(f.logged(), 1);
    }

    #[test]
    fn a_cut_or_foreign_log_is_refused() {
        let mut f = InFlight::new(barrier(), vec![false], TaskSnapshot::default());
        f.processing(0, &data("a"));
        let (log, _) = f.encode_log();
        let e = decode_log(Bytes::from(log[..log.len() - 1].to_vec())).unwrap_err();
        assert!(e.to_string().contains("cut short"), "{e}");
        let e = decode_log(Bytes::from_static(b"something else")).unwrap_err();
        assert!(e.to_string().contains("not a log"), "{e}");
    }
}
