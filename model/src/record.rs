//! Stream elements and the messages between tasks.

/// One stream element. The runtime never interprets `value`; `key` is set
/// once a stream is keyed (`key-by`), and is what partitioning and keyed
/// state use.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Record {
    /// Partitioning and state key, on a keyed stream.
    pub key: Option<Vec<u8>>,
    /// The payload (UTF-8 JSON for records written by the Rust SDK).
    pub value: Vec<u8>,
    /// Event time, ms since the Unix epoch, when known.
    pub timestamp: Option<i64>,
}

impl Record {
    /// A record with a value only.
    pub fn value(value: impl Into<Vec<u8>>) -> Record {
        Record {
            key: None,
            value: value.into(),
            timestamp: None,
        }
    }
}

/// What travels on a channel between two subtasks, in order: data, or an
/// in-band signal.
///
/// Invariant: on each channel, data between two signals belongs after the
/// first and before the second; a receiver sees a channel's messages in the
/// order they were sent, and nothing after [`Signal::EndOfStream`].
#[derive(Clone, Debug, PartialEq)]
pub enum StreamMessage {
    /// A batch of records.
    Data(Vec<Record>),
    /// A signal: time, idleness, a checkpoint barrier, the end.
    Signal(Signal),
}

/// An in-band control event. Signals are small and are never held back by
/// flow control behind data.
#[derive(Clone, Debug, PartialEq)]
pub enum Signal {
    /// Every later record on this channel has a timestamp above this one.
    Watermark(i64),
    /// The sender has no records for now: until its next record or
    /// watermark, this channel does not hold back the receiver's watermark.
    Idle,
    /// A checkpoint barrier: everything before it on this channel belongs to
    /// checkpoint `barrier.id`, everything after it to later ones.
    Barrier(Barrier),
    /// The sender finished; its channel carries nothing more.
    EndOfStream,
}

/// What kind of snapshot a barrier asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CheckpointKind {
    /// A periodic checkpoint, owned and retired by the runtime.
    Checkpoint,
    /// A user-triggered savepoint, owned by the user.
    Savepoint,
}

/// How a task with several inputs treats barriers.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum CheckpointMode {
    /// Inputs that delivered the barrier wait until every input has
    /// (alignment): the snapshot holds exactly the records before the
    /// barrier, so a restore replays each record's effect once.
    #[default]
    ExactlyOnce,
    /// No alignment: records after the barrier on a fast input may be in the
    /// snapshot too, so a restore may replay their effect twice.
    AtLeastOnce,
}

/// A checkpoint barrier, injected by the sources and carried along every
/// channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Barrier {
    /// The checkpoint's id, increasing per job.
    pub id: u64,
    /// When the checkpoint coordinator triggered it, ms since the epoch.
    pub timestamp_ms: i64,
    /// Checkpoint or savepoint.
    pub kind: CheckpointKind,
    /// Aligned or not.
    pub mode: CheckpointMode,
}

impl StreamMessage {
    /// A watermark message.
    pub fn watermark(wm: i64) -> StreamMessage {
        StreamMessage::Signal(Signal::Watermark(wm))
    }

    /// The end-of-stream message.
    pub const END: StreamMessage = StreamMessage::Signal(Signal::EndOfStream);

    /// The idle message.
    pub const IDLE: StreamMessage = StreamMessage::Signal(Signal::Idle);

    /// Whether this is the end of the stream.
    pub fn is_end(&self) -> bool {
        matches!(self, StreamMessage::Signal(Signal::EndOfStream))
    }
}

/// The watermark that ends a bounded input: it fires every pending event-time
/// timer.
pub const MAX_WATERMARK: i64 = i64::MAX;
