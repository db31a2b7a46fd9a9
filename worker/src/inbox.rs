//! A subtask's input queue (Flink's input gate): every channel that feeds
//! the subtask — local senders, and the network server for remote ones —
//! puts its messages here, in its order.
//!
//! The queue is bounded by *room*, as a bounded channel is: a message takes
//! one unit of room until the subtask takes it out to process it, and a
//! sender without room waits (this is backpressure; the network server
//! grants a remote sender credit only once it could hand a frame over).
//! Two things differ from a plain bounded channel:
//!
//! - only data takes room: a sender never waits to hand over a signal (a
//!   barrier, a watermark, the end of its data), so a barrier reaches the
//!   queue right behind what its channel sent before it, and a source that
//!   ended is not stuck behind a full queue with its end (signals are few:
//!   the data bounds them);
//! - the subtask can look at everything queued without taking it out
//!   ([`Inbox::fill`]): an unaligned checkpoint finds its barriers there,
//!   behind records it has not processed yet, and stores those records
//!   with its snapshot. What the subtask looked at keeps its room, so
//!   looking ahead never lets senders send more.

use std::collections::VecDeque;
use std::sync::Arc;

use tokio::sync::mpsc::error::TryRecvError;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use weir_model::{Barrier, Signal, StreamMessage};

use crate::partition::Envelope;

/// A queue of `capacity` units of room: its senders and its receiving end.
pub fn channel(capacity: usize) -> (InboxSender, Inbox) {
    make(Arc::new(Semaphore::new(capacity.max(1))), Mode::Queue)
}

/// A queue whose room is `credit`, granted by a remote receiver: a data
/// message takes a credit (signals take none), and taking messages out
/// gives none back (the receiver grants more).
pub fn credited(credit: Arc<Semaphore>) -> (InboxSender, Inbox) {
    make(credit, Mode::Credit)
}

fn make(room: Arc<Semaphore>, mode: Mode) -> (InboxSender, Inbox) {
    let (tx, rx) = unbounded_channel();
    (
        InboxSender {
            tx,
            room: room.clone(),
            mode,
        },
        Inbox {
            rx,
            room,
            mode,
            ahead: VecDeque::new(),
        },
    )
}

/// What takes room, and what gives it back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// A data message takes room, given back when it is taken out.
    Queue,
    /// Data messages take a credit; credits come from elsewhere.
    Credit,
}

impl Mode {
    /// Whether `message` takes room.
    fn taken_by(self, message: &StreamMessage) -> bool {
        match self {
            Mode::Queue | Mode::Credit => matches!(message, StreamMessage::Data(_)),
        }
    }
}

/// The queue is gone (its subtask ended): the message comes back.
#[derive(Debug)]
pub struct Closed(pub Envelope);

/// Why [`InboxSender::try_send`] did not send.
#[derive(Debug)]
pub enum TrySendError {
    /// No room now: the message comes back.
    Full(Envelope),
    /// The queue is gone.
    Closed(Envelope),
}

/// A sender into a subtask's queue. Cheap to clone.
#[derive(Clone, Debug)]
pub struct InboxSender {
    tx: UnboundedSender<Envelope>,
    room: Arc<Semaphore>,
    mode: Mode,
}

/// Room for one message, taken and held by its sender
/// ([`InboxSender::take_room`]).
#[derive(Debug)]
pub struct Room(OwnedSemaphorePermit);

/// Room for one message, taken: [`Reserved::send`] hands it over.
pub struct Reserved<'a> {
    sender: &'a InboxSender,
    permit: Option<OwnedSemaphorePermit>,
}

impl Reserved<'_> {
    /// Keep the room taken, for a message already in the queue that was
    /// put there ahead of its room ([`InboxSender::force`]).
    pub fn keep(mut self) {
        if let Some(permit) = self.permit.take() {
            permit.forget();
        }
    }

    /// Hand `envelope` over into the room taken.
    pub fn send(mut self, envelope: Envelope) -> Result<(), Closed> {
        let needs = self.sender.mode.taken_by(&envelope.1);
        self.sender.tx.send(envelope).map_err(|e| Closed(e.0))?;
        if let Some(permit) = self.permit.take()
            && needs
        {
            // Given back when the subtask takes the message out.
            permit.forget();
        }
        Ok(())
    }
}

impl InboxSender {
    /// Send now if there is room (a barrier always goes).
    pub fn try_send(&self, envelope: Envelope) -> Result<(), TrySendError> {
        if self.tx.is_closed() {
            return Err(TrySendError::Closed(envelope));
        }
        if !self.mode.taken_by(&envelope.1) {
            return self
                .tx
                .send(envelope)
                .map_err(|e| TrySendError::Closed(e.0));
        }
        match self.room.clone().try_acquire_owned() {
            Ok(permit) => Reserved {
                sender: self,
                permit: Some(permit),
            }
            .send(envelope)
            .map_err(|c| TrySendError::Closed(c.0)),
            Err(tokio::sync::TryAcquireError::NoPermits) => Err(TrySendError::Full(envelope)),
            Err(tokio::sync::TryAcquireError::Closed) => Err(TrySendError::Closed(envelope)),
        }
    }

    /// Whether `message` takes room in this queue.
    pub fn takes_room(&self, message: &StreamMessage) -> bool {
        self.mode.taken_by(message)
    }

    /// Put `envelope` in the queue now, room or not: its room is taken
    /// later ([`Reserved::keep`]) by whoever forced it in.
    pub fn force(&self, envelope: Envelope) -> Result<(), Closed> {
        self.tx.send(envelope).map_err(|e| Closed(e.0))
    }

    /// Take room for one message now, if there is some (held until used
    /// by [`InboxSender::send_in`], or dropped).
    pub fn try_take_room(&self) -> Option<Room> {
        self.room.clone().try_acquire_owned().ok().map(Room)
    }

    /// Wait for room for one message and take it (`None` once the queue is
    /// gone).
    pub async fn take_room(&self) -> Option<Room> {
        self.room.clone().acquire_owned().await.ok().map(Room)
    }

    /// Send `envelope` into `room` taken before.
    pub fn send_in(&self, room: Room, envelope: Envelope) -> Result<(), Closed> {
        Reserved {
            sender: self,
            permit: Some(room.0),
        }
        .send(envelope)
    }

    /// Wait for room for one message (`Err` once the queue is gone).
    pub async fn reserve(&self) -> Result<Reserved<'_>, ()> {
        let permit = self.room.clone().acquire_owned().await.map_err(|_| ())?;
        Ok(Reserved {
            sender: self,
            permit: Some(permit),
        })
    }

    /// Send, waiting for room as long as it takes.
    pub async fn send(&self, envelope: Envelope) -> Result<(), Closed> {
        if !self.mode.taken_by(&envelope.1) {
            return self.tx.send(envelope).map_err(|e| Closed(e.0));
        }
        match self.reserve().await {
            Ok(r) => r.send(envelope),
            Err(()) => Err(Closed(envelope)),
        }
    }

    /// [`InboxSender::send`] from a thread outside the runtime.
    pub fn blocking_send(&self, envelope: Envelope) -> Result<(), Closed> {
        if !self.mode.taken_by(&envelope.1) {
            return self.tx.send(envelope).map_err(|e| Closed(e.0));
        }
        futures::executor::block_on(self.send(envelope))
    }
}

/// One message in the look-ahead, and whether it holds room.
type Queued = (Envelope, bool);

/// The receiving end of a subtask's queue.
#[derive(Debug)]
pub struct Inbox {
    rx: UnboundedReceiver<Envelope>,
    room: Arc<Semaphore>,
    mode: Mode,
    /// Messages taken from the channel but not yet out: looked at (or
    /// replayed from a checkpoint), in order.
    ahead: VecDeque<Queued>,
}

impl Drop for Inbox {
    fn drop(&mut self) {
        // Senders waiting for room learn the queue is gone.
        self.room.close();
    }
}

impl Inbox {
    fn out(&mut self, (envelope, holds): Queued) -> Envelope {
        if holds && self.mode == Mode::Queue {
            self.room.add_permits(1);
        }
        envelope
    }

    /// The next message, if one is queued; `Disconnected` once every
    /// sender is gone and nothing is left.
    pub fn try_recv(&mut self) -> Result<Envelope, TryRecvError> {
        if let Some(q) = self.ahead.pop_front() {
            return Ok(self.out(q));
        }
        let envelope = self.rx.try_recv()?;
        let holds = self.mode.taken_by(&envelope.1);
        Ok(self.out((envelope, holds)))
    }

    /// The next message, waiting for one; `None` once every sender is gone
    /// and nothing is left.
    pub async fn recv(&mut self) -> Option<Envelope> {
        if let Some(q) = self.ahead.pop_front() {
            return Some(self.out(q));
        }
        let envelope = self.rx.recv().await?;
        let holds = self.mode.taken_by(&envelope.1);
        Some(self.out((envelope, holds)))
    }

    /// Move every message queued so far into the look-ahead (it keeps its
    /// room). Returns the barriers among them: their position in the
    /// look-ahead, their channel and the barrier. Each barrier is returned
    /// once.
    pub fn fill(&mut self) -> Vec<(usize, u32, Barrier)> {
        let mut found = Vec::new();
        while let Ok(envelope) = self.rx.try_recv() {
            if let StreamMessage::Signal(Signal::Barrier(b)) = &envelope.1 {
                found.push((self.ahead.len(), envelope.0, *b));
            }
            let holds = self.mode.taken_by(&envelope.1);
            self.ahead.push_back((envelope, holds));
        }
        found
    }

    /// The messages of `channel` in the look-ahead before position `end`.
    pub fn ahead_of(&self, channel: u32, end: usize) -> impl Iterator<Item = &StreamMessage> {
        self.ahead
            .iter()
            .take(end)
            .filter(move |((c, _), _)| *c == channel)
            .map(|((_, m), _)| m)
    }

    /// Every barrier in the look-ahead: position, channel, barrier.
    pub fn barriers_ahead(&self) -> Vec<(usize, u32, Barrier)> {
        self.ahead
            .iter()
            .enumerate()
            .filter_map(|(i, ((c, m), _))| match m {
                StreamMessage::Signal(Signal::Barrier(b)) => Some((i, *c, *b)),
                _ => None,
            })
            .collect()
    }

    /// Per channel whose stream's end is in the look-ahead: its position.
    pub fn ends_ahead(&self) -> Vec<(usize, u32)> {
        self.ahead
            .iter()
            .enumerate()
            .filter(|(_, ((_, m), _))| m.is_end())
            .map(|(i, ((c, _), _))| (i, *c))
            .collect()
    }

    /// Put `messages` first, before anything queued: the records a
    /// restored checkpoint's barriers overtook. They hold no room.
    pub fn replay(&mut self, messages: Vec<Envelope>) {
        for envelope in messages.into_iter().rev() {
            self.ahead.push_front((envelope, false));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_model::{CheckpointKind, CheckpointMode, Record};

    fn data(i: usize) -> StreamMessage {
        StreamMessage::Data(vec![Record::value(i.to_string().into_bytes())].into())
    }

    fn barrier(id: u64) -> StreamMessage {
        StreamMessage::Signal(Signal::Barrier(Barrier {
            id,
            timestamp_ms: 0,
            kind: CheckpointKind::Checkpoint,
            mode: CheckpointMode::ExactlyOnce,
            aligned_timeout_ms: Some(0),
        }))
    }

    #[tokio::test]
    async fn looking_ahead_keeps_the_room_and_barriers_take_none() {
        let (tx, mut inbox) = channel(2);
        tx.try_send((0, data(1))).unwrap();
        tx.try_send((1, data(2))).unwrap();
        assert!(matches!(
            tx.try_send((0, data(3))),
            Err(TrySendError::Full(_))
        ));
        // A barrier goes in although the queue is full.
        tx.try_send((0, barrier(7))).unwrap();
        let found = inbox.fill();
        assert_eq!(found.len(), 1);
        assert_eq!((found[0].0, found[0].1, found[0].2.id), (2, 0, 7));
        assert_eq!(inbox.ahead_of(0, 2).count(), 1);
        // Still full: what was looked at holds its room.
        assert!(matches!(
            tx.try_send((0, data(3))),
            Err(TrySendError::Full(_))
        ));
        assert_eq!(inbox.try_recv().unwrap().1, data(1));
        tx.try_send((1, data(4))).unwrap();
        // In order: the rest of the look-ahead, then the channel.
        assert_eq!(inbox.try_recv().unwrap().1, data(2));
        assert_eq!(inbox.recv().await.unwrap().1, barrier(7));
        assert_eq!(inbox.recv().await.unwrap().1, data(4));
        assert!(inbox.fill().is_empty(), "a barrier is found once");
    }

    #[tokio::test]
    async fn replayed_messages_come_first_and_hold_no_room() {
        let (tx, mut inbox) = channel(1);
        tx.try_send((0, data(1))).unwrap();
        inbox.replay(vec![(1, data(10)), (0, data(11))]);
        assert_eq!(inbox.try_recv().unwrap(), (1, data(10)));
        assert_eq!(inbox.try_recv().unwrap(), (0, data(11)));
        // Taking replayed messages out gave no room back.
        assert!(matches!(
            tx.try_send((0, data(2))),
            Err(TrySendError::Full(_))
        ));
        assert_eq!(inbox.try_recv().unwrap(), (0, data(1)));
        tx.try_send((0, data(2))).unwrap();
    }

    #[tokio::test]
    async fn a_sender_waiting_for_room_learns_the_queue_is_gone() {
        let (tx, inbox) = channel(1);
        tx.try_send((0, data(1))).unwrap();
        let waiting = tokio::spawn(async move { tx.send((0, data(2))).await.is_err() });
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        drop(inbox);
        assert!(waiting.await.unwrap());
    }
}
