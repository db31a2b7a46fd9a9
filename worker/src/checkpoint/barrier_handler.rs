//! What a task with several input channels does when a barrier arrives
//! (Flink's `CheckpointBarrierHandler`).
//!
//! - **Exactly-once (aligned)**: a channel that delivered barrier `n` is
//!   *blocked*: what it sends next belongs to checkpoint `n + 1` and is held
//!   back until every other open channel delivered barrier `n` too. Then the
//!   task snapshots (its state holds exactly the records before the
//!   barrier), forwards the barrier, and the held-back messages are
//!   processed in their order.
//! - **At-least-once (tracking)**: nothing is held back; the task snapshots
//!   when the last open channel delivered the barrier. Records that came
//!   after the barrier on a faster channel are then in the snapshot as well,
//!   and a restore replays their effect a second time.
//!
//! A channel that ended counts as having delivered every later barrier. A
//! barrier with a higher id than the one being aligned means the earlier
//! checkpoint was abandoned upstream: it is dropped and alignment starts
//! over for the newer one.
//!
//! The end of a channel's data is held back in both modes when it comes
//! after the channel's barrier, until the checkpoint completes: so a task
//! whose inputs have all ended when it snapshots has seen every channel end
//! before that channel's barrier, and its snapshot is its finished one.
//!
//! What alignment holds back is bounded: past [`MAX_HELD_BATCHES`] batches
//! (a slow or stalled channel while the others run ahead) the alignment is
//! given up, the task declines the checkpoint (the coordinator aborts it)
//! and the held-back messages are processed; the next checkpoint tries
//! again.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use weir_model::{Barrier, CheckpointMode, StreamMessage};

/// The most batches alignment holds back in one task, over all its
/// channels (at the default batch size, about a million records).
pub const MAX_HELD_BATCHES: usize = 1024;

/// What the task does after handing the handler a message.
#[derive(Debug, PartialEq)]
pub enum Handled {
    /// Process this message now.
    Process(StreamMessage),
    /// The message was held back (its channel is blocked); nothing to do.
    Held,
    /// Every open channel delivered this barrier: snapshot now, then forward
    /// it; then take the held-back messages from
    /// [`BarrierHandler::next_released`].
    Complete(Barrier),
    /// A barrier that needs nothing yet (others must still arrive).
    Waiting,
    /// Alignment held back too much: this checkpoint is given up (decline
    /// it); take the held-back messages from
    /// [`BarrierHandler::next_released`].
    Overflow(Barrier),
}

/// Barrier alignment for one task's input channels.
#[derive(Debug)]
pub struct BarrierHandler {
    /// Barriers seen per channel for the checkpoint being aligned.
    seen: Vec<bool>,
    ended: Vec<bool>,
    /// The checkpoint being aligned, and when its first barrier came.
    pending: Option<(Barrier, Instant)>,
    /// Per channel, messages held back while it is blocked.
    held: Vec<VecDeque<StreamMessage>>,
    /// Per channel, at least once: its end of data came after its barrier,
    /// and it is held back (with what follows) until the checkpoint
    /// completes.
    end_held: Vec<bool>,
    /// How many messages `held` holds in all.
    held_count: usize,
    /// The most it may hold while aligning.
    max_held: usize,
    /// The newest checkpoint completed (older barriers are late and ignored).
    last_completed: Option<u64>,
    /// How long the last alignment took.
    last_alignment: Duration,
}

impl BarrierHandler {
    /// A handler for `channels` inputs.
    pub fn new(channels: usize) -> BarrierHandler {
        Self::holding_at_most(channels, MAX_HELD_BATCHES)
    }

    /// A handler for `channels` inputs whose alignment holds back at most
    /// `max_held` messages.
    pub fn holding_at_most(channels: usize, max_held: usize) -> BarrierHandler {
        BarrierHandler {
            seen: vec![false; channels],
            ended: vec![false; channels],
            pending: None,
            held: (0..channels).map(|_| VecDeque::new()).collect(),
            end_held: vec![false; channels],
            held_count: 0,
            max_held,
            last_completed: None,
            last_alignment: Duration::ZERO,
        }
    }

    /// How long the last completed alignment took: from the first barrier
    /// to the last.
    pub fn last_alignment(&self) -> Duration {
        self.last_alignment
    }

    /// Whether channel `channel`'s messages are held back now.
    pub fn is_blocked(&self, channel: usize) -> bool {
        matches!(self.pending, Some((b, _))
            if b.mode == CheckpointMode::ExactlyOnce || self.end_held[channel])
            && self.seen[channel]
    }

    /// Hand over a message from `channel`. A channel that is blocked, or
    /// still has held-back messages to release, holds this one too (its
    /// order is kept).
    pub fn handle(&mut self, channel: usize, message: StreamMessage) -> Handled {
        if self.pending.is_some()
            && self.seen[channel]
            && matches!(
                message,
                StreamMessage::Signal(weir_model::Signal::EndOfData)
            )
        {
            // Its end belongs after the checkpoint being aligned.
            self.end_held[channel] = true;
        }
        if self.is_blocked(channel) || !self.held[channel].is_empty() {
            let blocked = self.is_blocked(channel);
            self.held[channel].push_back(message);
            self.held_count += 1;
            if blocked
                && self.held_count > self.max_held
                && let Some((b, _)) = self.pending
            {
                // Given up: its barriers that are still to come are late.
                self.abandon();
                self.last_completed = Some(b.id);
                return Handled::Overflow(b);
            }
            return Handled::Held;
        }
        self.dispatch(channel, message)
    }

    /// The next held-back message of a channel that is no longer blocked,
    /// handled as if it arrived now; `None` when none is left to release.
    /// Call it until `None` after every [`Handled::Complete`] (and after
    /// every other message: an abandoned alignment releases too).
    pub fn next_released(&mut self) -> Option<(usize, Handled)> {
        let channel =
            (0..self.held.len()).find(|&c| !self.held[c].is_empty() && !self.is_blocked(c))?;
        let message = self.held[channel].pop_front().expect("not empty");
        self.held_count -= 1;
        Some((channel, self.dispatch(channel, message)))
    }

    fn dispatch(&mut self, channel: usize, message: StreamMessage) -> Handled {
        match message {
            StreamMessage::Signal(weir_model::Signal::Barrier(b)) => self.barrier(channel, b),
            m if m.is_end() => {
                self.ended[channel] = true;
                // The end goes on to the task first; a pending checkpoint
                // may complete with it ([`BarrierHandler::after_end`]).
                Handled::Process(m)
            }
            m => Handled::Process(m),
        }
    }

    /// After the task processed channel `channel`'s end: the barrier that
    /// completes because this channel no longer counts, if any.
    pub fn after_end(&mut self) -> Option<Barrier> {
        self.try_complete()
    }

    fn barrier(&mut self, channel: usize, b: Barrier) -> Handled {
        if self.last_completed.is_some_and(|last| b.id <= last) {
            // A late barrier of a checkpoint already taken (or abandoned).
            return Handled::Waiting;
        }
        match self.pending {
            Some((p, _)) if b.id < p.id => return Handled::Waiting,
            Some((p, _)) if b.id > p.id => {
                // The pending one was abandoned upstream: start over. What
                // was held back is released ([`Self::next_released`]) before
                // anything newer of its channel.
                self.abandon();
                self.pending = Some((b, Instant::now()));
            }
            Some(_) => {}
            None => self.pending = Some((b, Instant::now())),
        }
        self.seen[channel] = true;
        match self.try_complete() {
            Some(b) => Handled::Complete(b),
            None => Handled::Waiting,
        }
    }

    fn try_complete(&mut self) -> Option<Barrier> {
        let (b, started) = self.pending?;
        let all = self
            .seen
            .iter()
            .zip(&self.ended)
            .all(|(&seen, &ended)| seen || ended);
        if !all {
            return None;
        }
        self.pending = None;
        self.last_completed = Some(b.id);
        self.last_alignment = started.elapsed();
        self.seen.iter_mut().for_each(|s| *s = false);
        self.end_held.iter_mut().for_each(|e| *e = false);
        Some(b)
    }

    fn abandon(&mut self) {
        self.pending = None;
        self.seen.iter_mut().for_each(|s| *s = false);
        self.end_held.iter_mut().for_each(|e| *e = false);
    }

    /// How many input channels.
    pub fn channels(&self) -> usize {
        self.ended.len()
    }

    /// Whether channel `channel`'s stream has ended.
    pub fn ended(&self, channel: usize) -> bool {
        self.ended.get(channel).copied().unwrap_or(true)
    }

    /// Whether every channel's stream has ended (no barrier comes through
    /// them any more).
    pub fn all_ended(&self) -> bool {
        self.ended.iter().all(|&e| e)
    }

    /// The checkpoint being aligned, if any.
    pub fn pending(&self) -> Option<Barrier> {
        self.pending.map(|(b, _)| b)
    }

    /// Whether checkpoint `id` was taken (or given up) already: its
    /// barriers are late.
    pub fn is_done(&self, id: u64) -> bool {
        self.last_completed.is_some_and(|last| id <= last)
    }

    /// Checkpoint `barrier` is taken unaligned, now: its alignment (if it
    /// began) ends, what it held back is released
    /// ([`Self::next_released`]), and its barriers still to come are late.
    /// Returns, per channel, whether it delivered the barrier already (or
    /// ended), and how long since its first barrier came.
    pub fn take_over(&mut self, barrier: Barrier) -> (Vec<bool>, Duration) {
        let (closed, since) = match self.pending {
            Some((p, started)) if p.id == barrier.id => (
                self.seen
                    .iter()
                    .zip(&self.ended)
                    .map(|(&s, &e)| s || e)
                    .collect(),
                started.elapsed(),
            ),
            _ => (self.ended.clone(), Duration::ZERO),
        };
        self.abandon();
        self.last_completed = Some(barrier.id);
        self.last_alignment = since;
        (closed, since)
    }

    /// Whether any channel has messages held back.
    pub fn holds_any(&self) -> bool {
        self.held.iter().any(|q| !q.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_model::{CheckpointKind, Record, Signal};

    fn barrier(id: u64, mode: CheckpointMode) -> StreamMessage {
        StreamMessage::Signal(Signal::Barrier(Barrier {
            id,
            timestamp_ms: 0,
            kind: CheckpointKind::Checkpoint,
            mode,
            aligned_timeout_ms: None,
        }))
    }

    fn data(v: &str) -> StreamMessage {
        StreamMessage::Data(vec![Record::value(v.as_bytes().to_vec())].into())
    }

    #[test]
    fn aligned_holds_back_a_channel_that_delivered_its_barrier() {
        let mut h = BarrierHandler::new(2);
        let eo = CheckpointMode::ExactlyOnce;
        assert_eq!(h.handle(0, barrier(1, eo)), Handled::Waiting);
        assert!(h.is_blocked(0));
        assert_eq!(h.handle(0, data("after")), Handled::Held);
        assert_eq!(
            h.handle(1, data("before")),
            Handled::Process(data("before"))
        );
        match h.handle(1, barrier(1, eo)) {
            Handled::Complete(b) => assert_eq!(b.id, 1),
            other => panic!("{other:?}"),
        }
        assert!(!h.is_blocked(0));
        assert_eq!(
            h.next_released(),
            Some((0, Handled::Process(data("after"))))
        );
        assert_eq!(h.next_released(), None);
        assert!(!h.holds_any());
    }

    #[test]
    fn at_least_once_holds_nothing_back() {
        let mut h = BarrierHandler::new(2);
        let alo = CheckpointMode::AtLeastOnce;
        assert_eq!(h.handle(0, barrier(1, alo)), Handled::Waiting);
        assert!(!h.is_blocked(0));
        assert_eq!(h.handle(0, data("x")), Handled::Process(data("x")));
        assert!(matches!(h.handle(1, barrier(1, alo)), Handled::Complete(_)));
    }

    #[test]
    fn at_least_once_holds_an_end_of_data_after_its_barrier_until_the_checkpoint() {
        let mut h = BarrierHandler::new(2);
        let alo = CheckpointMode::AtLeastOnce;
        let end = StreamMessage::END_OF_DATA;
        assert_eq!(h.handle(0, barrier(1, alo)), Handled::Waiting);
        assert_eq!(h.handle(0, data("x")), Handled::Process(data("x")));
        assert_eq!(h.handle(0, end.clone()), Handled::Held);
        assert!(h.is_blocked(0));
        assert_eq!(h.handle(0, barrier(2, alo)), Handled::Held);
        // Channel 1's end came before its barrier: it goes through.
        assert_eq!(h.handle(1, end.clone()), Handled::Process(end.clone()));
        assert!(matches!(h.handle(1, barrier(1, alo)), Handled::Complete(b) if b.id == 1));
        assert_eq!(h.next_released(), Some((0, Handled::Process(end))));
        assert_eq!(h.next_released(), Some((0, Handled::Waiting)));
        assert!(!h.is_blocked(0));
        // Exactly once, a channel's end after its barrier waits the same.
        let mut h = BarrierHandler::new(2);
        let eo = CheckpointMode::ExactlyOnce;
        assert_eq!(h.handle(0, barrier(1, eo)), Handled::Waiting);
        assert_eq!(h.handle(0, StreamMessage::END_OF_DATA), Handled::Held);
    }

    #[test]
    fn an_ended_channel_counts_as_delivered() {
        let mut h = BarrierHandler::new(2);
        let eo = CheckpointMode::ExactlyOnce;
        assert_eq!(h.handle(0, barrier(3, eo)), Handled::Waiting);
        assert_eq!(
            h.handle(1, StreamMessage::END),
            Handled::Process(StreamMessage::END)
        );
        assert_eq!(h.after_end().map(|b| b.id), Some(3));
        // Later barriers complete on the open channel alone.
        assert!(matches!(h.handle(0, barrier(4, eo)), Handled::Complete(_)));
    }

    #[test]
    fn a_newer_barrier_abandons_the_pending_one_and_late_ones_are_ignored() {
        let mut h = BarrierHandler::new(2);
        let eo = CheckpointMode::ExactlyOnce;
        assert_eq!(h.handle(0, barrier(1, eo)), Handled::Waiting);
        assert_eq!(h.handle(0, data("a")), Handled::Held);
        assert_eq!(h.handle(1, barrier(2, eo)), Handled::Waiting);
        assert!(h.is_blocked(1));
        assert!(!h.is_blocked(0));
        // Channel 0's held message comes before its newer ones.
        assert_eq!(h.handle(0, data("b")), Handled::Held);
        assert_eq!(h.next_released(), Some((0, Handled::Process(data("a")))));
        assert_eq!(h.next_released(), Some((0, Handled::Process(data("b")))));
        assert_eq!(h.next_released(), None);
        assert!(matches!(h.handle(0, barrier(2, eo)), Handled::Complete(b) if b.id == 2));
        assert_eq!(h.handle(0, barrier(1, eo)), Handled::Waiting);
        assert!(!h.is_blocked(0));
    }

    #[test]
    fn alignment_that_holds_back_too_much_is_given_up_and_releases_in_order() {
        let mut h = BarrierHandler::holding_at_most(2, 2);
        assert_eq!(
            h.handle(0, barrier(1, CheckpointMode::ExactlyOnce)),
            Handled::Waiting
        );
        assert_eq!(h.handle(0, data("a")), Handled::Held);
        assert_eq!(h.handle(0, data("b")), Handled::Held);
        let Handled::Overflow(b) = h.handle(0, data("c")) else {
            panic!("the third held batch gives the alignment up");
        };
        assert_eq!(b.id, 1);
        let released: Vec<Handled> =
            std::iter::from_fn(|| h.next_released().map(|(_, m)| m)).collect();
        assert_eq!(
            released,
            [data("a"), data("b"), data("c")].map(Handled::Process)
        );
        // Its barrier on the other channel is late now; the next one aligns.
        assert_eq!(
            h.handle(1, barrier(1, CheckpointMode::ExactlyOnce)),
            Handled::Waiting
        );
        assert!(!h.is_blocked(0) && !h.is_blocked(1));
        assert_eq!(
            h.handle(0, barrier(2, CheckpointMode::ExactlyOnce)),
            Handled::Waiting
        );
        assert!(matches!(
            h.handle(1, barrier(2, CheckpointMode::ExactlyOnce)),
            Handled::Complete(b) if b.id == 2
        ));
    }
}
