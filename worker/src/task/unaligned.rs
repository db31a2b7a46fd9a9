//! A subtask's part in unaligned checkpoints
//! ([`crate::checkpoint::unaligned`]): it looks for barriers in its queue
//! before it takes the next message, snapshots on the first one found, and
//! acknowledges once it knows every channel's overtaken records.

use weir_host::now_ms;
use weir_model::{Barrier, CheckpointMode};

use super::{Input, Subtask};
use crate::checkpoint::unaligned::{InFlight, LOG_FILE};
use crate::inbox::Inbox;

/// Whether checkpoint `b` is unaligned now: it is from the start, or its
/// alignment has taken longer than its timeout since the trigger.
fn unaligned_now(b: &Barrier) -> bool {
    b.mode == CheckpointMode::ExactlyOnce
        && match b.aligned_timeout_ms {
            None => false,
            Some(0) => true,
            Some(t) => now_ms().saturating_sub(b.timestamp_ms) >= t as i64,
        }
}

impl Subtask {
    /// Look at what is queued: a barrier of an unaligned checkpoint starts
    /// it (or completes a channel's share of the one started), and an
    /// aligned checkpoint whose alignment timed out turns unaligned.
    pub(super) fn look_ahead(&mut self, rx: &mut Inbox, input: &mut Input) -> anyhow::Result<()> {
        if self.checkpoints.is_none() {
            return Ok(());
        }
        for (pos, channel, barrier) in rx.fill() {
            self.barrier_ahead(rx, pos, channel, barrier, input)?;
        }
        if input.inflight.is_none() {
            self.take_sent(rx, input)?;
        }
        if input.inflight.is_none() {
            // A checkpoint whose alignment timed out: being aligned, or its
            // barrier still queued.
            let due = input
                .barriers
                .pending()
                .into_iter()
                .chain(input.timed.take())
                .filter(|b| !input.barriers.is_done(b.id))
                .max_by_key(|b| b.id);
            match due {
                Some(b) if unaligned_now(&b) => self.start_unaligned(rx, b, input)?,
                Some(b) if b.aligned_timeout_ms.is_some() => input.timed = Some(b),
                _ => {}
            }
        }
        Ok(())
    }

    /// Every upstream subtask has ended — each channel's end of stream is
    /// queued, or was taken — while records are still queued: no barrier
    /// comes through the inputs any more. An unaligned checkpoint sent to
    /// this subtask directly is taken now, everything queued before the
    /// ends logged (else the subtask could not take part in a checkpoint
    /// before it has worked through the queue).
    fn take_sent(&mut self, rx: &Inbox, input: &mut Input) -> anyhow::Result<()> {
        let Some(barrier) = input.sent else {
            return Ok(());
        };
        if barrier.aligned_timeout_ms.is_none()
            || input.barriers.is_done(barrier.id)
            || input.barriers.pending().is_some()
            || input.tracker.all_ended()
        {
            return Ok(());
        }
        let ends = rx.ends_ahead();
        let channels = input.barriers.channels();
        if !(0..channels)
            .all(|c| input.barriers.ended(c) || ends.iter().any(|&(_, e)| e as usize == c))
        {
            return Ok(());
        }
        input.sent = None;
        let (closed, alignment) = input.barriers.take_over(barrier);
        let snapshot = self.snapshot_chain(barrier, Vec::new(), alignment, false)?;
        let mut f = InFlight::new(barrier, closed, snapshot);
        for (pos, channel) in ends {
            f.barrier_found(channel, rx.ahead_of(channel, pos));
        }
        input.inflight = Some(f);
        self.complete_unaligned(&mut input.inflight)
    }

    /// Channel `channel`'s barrier `barrier`, found at `pos` in the queue.
    fn barrier_ahead(
        &mut self,
        rx: &Inbox,
        pos: usize,
        channel: u32,
        barrier: Barrier,
        input: &mut Input,
    ) -> anyhow::Result<()> {
        if let Some(f) = input.inflight.as_mut() {
            if barrier.id <= f.barrier.id {
                if barrier.id == f.barrier.id {
                    f.barrier_found(channel, rx.ahead_of(channel, pos));
                    self.complete_unaligned(&mut input.inflight)?;
                }
                return Ok(());
            }
            if !unaligned_now(&barrier) {
                // An aligned one (a savepoint) comes after this one on
                // every channel: it waits for its turn.
                return Ok(());
            }
            // A newer checkpoint's barrier while this one still collects:
            // this one was given up upstream (one checkpoint at a time).
            let newer = weir_model::StreamMessage::Signal(weir_model::Signal::Barrier(barrier));
            self.give_up_unaligned(&mut input.inflight, &newer);
        }
        if input.barriers.is_done(barrier.id) || input.tracker.all_ended() {
            return Ok(());
        }
        if !unaligned_now(&barrier) {
            if barrier.aligned_timeout_ms.is_some() {
                // Aligned for now: it switches when its time is up.
                input.timed = Some(barrier);
            }
            return Ok(());
        }
        self.start_unaligned(rx, barrier, input)
    }

    /// Take checkpoint `barrier` now, unaligned: snapshot, forward the
    /// barrier, and start logging the channels that have not delivered it.
    fn start_unaligned(
        &mut self,
        rx: &Inbox,
        barrier: Barrier,
        input: &mut Input,
    ) -> anyhow::Result<()> {
        if input.barriers.pending().is_some_and(|p| p.id != barrier.id) {
            // Another checkpoint (a savepoint) is being aligned: what it
            // holds back came after its barrier, not necessarily after
            // this one. This one starts when its barrier is taken out of
            // the queue (the alignment then gives way to it).
            return Ok(());
        }
        let (closed, alignment) = input.barriers.take_over(barrier);
        let snapshot = self.snapshot_chain(barrier, Vec::new(), alignment, false)?;
        let mut f = InFlight::new(barrier, closed, snapshot);
        // Its barriers queued already (an alignment that timed out).
        for (pos, channel, b) in rx.barriers_ahead() {
            if b.id == barrier.id {
                f.barrier_found(channel, rx.ahead_of(channel, pos));
            }
        }
        input.inflight = Some(f);
        self.complete_unaligned(&mut input.inflight)?;
        // What the alignment held back came after the barrier: it goes on.
        while let Some((channel, handled)) = input.barriers.next_released() {
            self.on_input(channel, handled, input)?;
        }
        Ok(())
    }

    /// A newer checkpoint's barrier (`message`) came on a channel that had
    /// not delivered the in-flight one's: that one was given up upstream.
    pub(super) fn give_up_unaligned(
        &mut self,
        inflight: &mut Option<InFlight>,
        message: &weir_model::StreamMessage,
    ) {
        let Some(old) = inflight.take() else {
            return;
        };
        if let Some(link) = &self.checkpoints {
            let newer = match message {
                weir_model::StreamMessage::Signal(weir_model::Signal::Barrier(b)) => b.id,
                _ => old.barrier.id,
            };
            link.decline(
                old.barrier.id,
                format!("{}: checkpoint {newer} came first", self.name),
            );
        }
        if let Some(dir) = &old.snapshot.dir {
            let _ = std::fs::remove_dir_all(dir);
        }
    }

    /// Once every channel's share is known: write the log beside the
    /// snapshot and acknowledge it.
    pub(super) fn complete_unaligned(
        &mut self,
        inflight: &mut Option<InFlight>,
    ) -> anyhow::Result<()> {
        if !inflight.as_ref().is_some_and(InFlight::is_complete) {
            return Ok(());
        }
        let mut f = inflight.take().expect("checked above");
        let mut snapshot = std::mem::take(&mut f.snapshot);
        if f.logged() > 0
            && let Some(dir) = &snapshot.dir
        {
            let (log, bytes) = f.encode_log();
            let path = dir.join(LOG_FILE);
            std::fs::write(&path, log).map_err(|e| {
                anyhow::anyhow!(
                    "{}: checkpoint {}: writing {}: {e}",
                    self.name,
                    f.barrier.id,
                    path.display()
                )
            })?;
            snapshot.inflight = Some((path, bytes));
        }
        if let Some(link) = &self.checkpoints {
            link.ack(f.barrier.id, snapshot);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_model::CheckpointKind;

    fn barrier(mode: CheckpointMode, aligned_timeout_ms: Option<u64>, age_ms: i64) -> Barrier {
        Barrier {
            id: 1,
            timestamp_ms: now_ms() - age_ms,
            kind: CheckpointKind::Checkpoint,
            mode,
            aligned_timeout_ms,
        }
    }

    #[test]
    fn an_aligned_checkpoint_turns_unaligned_only_once_its_timeout_passed() {
        use CheckpointMode::{AtLeastOnce, ExactlyOnce};
        // Aligned: never. Unaligned: from the start.
        assert!(!unaligned_now(&barrier(ExactlyOnce, None, 60_000)));
        assert!(unaligned_now(&barrier(ExactlyOnce, Some(0), 0)));
        // An aligned timeout: aligned until it passed since the trigger.
        assert!(!unaligned_now(&barrier(ExactlyOnce, Some(60_000), 0)));
        assert!(!unaligned_now(&barrier(ExactlyOnce, Some(60_000), 30_000)));
        assert!(unaligned_now(&barrier(ExactlyOnce, Some(300), 300)));
        assert!(unaligned_now(&barrier(ExactlyOnce, Some(300), 5_000)));
        // At-least-once checkpoints do not align at all.
        assert!(!unaligned_now(&barrier(AtLeastOnce, Some(0), 5_000)));
    }
}
