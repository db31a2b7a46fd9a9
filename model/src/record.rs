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

/// What travels on a channel between two subtasks, in order.
///
/// Invariant: on each channel, data between two signals belongs after the
/// first and before the second; a receiver sees a channel's messages in the
/// order they were sent, and nothing after `EndOfStream`.
#[derive(Clone, Debug, PartialEq)]
pub enum StreamMessage {
    /// A batch of records.
    Data(Vec<Record>),
    /// Every later record on this channel has a timestamp above this one.
    Watermark(i64),
    /// The sender has no records for now: until its next record or
    /// watermark, this channel does not hold back the receiver's watermark.
    Idle,
    /// The sender finished; its channel carries nothing more.
    EndOfStream,
}

/// The watermark that ends a bounded input: it fires every pending event-time
/// timer.
pub const MAX_WATERMARK: i64 = i64::MAX;
