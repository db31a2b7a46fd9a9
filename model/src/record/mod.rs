//! Stream elements and the messages between tasks.

pub mod packed;

use bytes::Bytes;

/// One stream element. The runtime never interprets `value`; `key` is set
/// once a stream is keyed (`key-by`), and is what partitioning and keyed
/// state use.
///
/// Key and value are [`Bytes`]: usually slices of one shared buffer (a
/// network frame, a batch a guest emitted, a block a source read), so moving
/// records between tasks copies and allocates nothing per record.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Record {
    /// Partitioning and state key, on a keyed stream.
    pub key: Option<Bytes>,
    /// The payload (UTF-8 JSON for records written by the Rust SDK).
    pub value: Bytes,
    /// Event time, ms since the Unix epoch, when known. `i64::MIN` is no
    /// time: a batch in one buffer, the Wasm contract and the wire keep it
    /// as the mark of none ([`packed::NO_TIMESTAMP`]).
    pub timestamp: Option<i64>,
}

impl Record {
    /// A record with a value only.
    pub fn value(value: impl Into<Bytes>) -> Record {
        Record {
            key: None,
            value: value.into(),
            timestamp: None,
        }
    }
}

/// Records built one after another into one buffer and handed out as
/// slices of it: no allocation per record.
///
/// ```
/// use weir_model::RecordBuffer;
/// let mut b = RecordBuffer::default();
/// b.push(None, Some(7), |v| v.extend_from_slice(b"1"));
/// b.push(None, None, |v| v.extend_from_slice(b"22"));
/// let records = b.finish();
/// assert_eq!(&records[1].value[..], b"22");
/// assert_eq!(records[0].timestamp, Some(7));
/// ```
#[derive(Default)]
pub struct RecordBuffer {
    /// The records' values, back to back.
    data: Vec<u8>,
    /// Where each record's value ends in `data` (it starts where the one
    /// before it ends).
    ends: Vec<usize>,
    /// Each record's timestamp ([`packed::NO_TIMESTAMP`] for none).
    timestamps: Vec<i64>,
    /// The keys of the records that have one: (record, key).
    keys: Vec<(usize, Bytes)>,
}

impl RecordBuffer {
    /// A buffer for about `records` records of about `bytes` bytes in all.
    pub fn with_capacity(records: usize, bytes: usize) -> Self {
        RecordBuffer {
            data: Vec::with_capacity(bytes),
            ends: Vec::with_capacity(records),
            timestamps: Vec::with_capacity(records),
            keys: Vec::new(),
        }
    }

    /// Add a record whose value `write` appends to the buffer.
    #[inline]
    pub fn push(
        &mut self,
        key: Option<Bytes>,
        timestamp: Option<i64>,
        write: impl FnOnce(&mut Vec<u8>),
    ) {
        write(&mut self.data);
        self.added(key, timestamp);
    }

    /// Add a record whose value `write` appends to the buffer, unless it
    /// fails: then nothing is added (what it wrote is dropped).
    #[inline]
    pub fn try_push<E>(
        &mut self,
        key: Option<Bytes>,
        timestamp: Option<i64>,
        write: impl FnOnce(&mut Vec<u8>) -> Result<(), E>,
    ) -> Result<(), E> {
        let start = self.data.len();
        if let Err(e) = write(&mut self.data) {
            self.data.truncate(start);
            return Err(e);
        }
        self.added(key, timestamp);
        Ok(())
    }

    /// A record's value was written: its end, key and timestamp.
    #[inline]
    fn added(&mut self, key: Option<Bytes>, timestamp: Option<i64>) {
        if let Some(key) = key {
            self.keys.push((self.ends.len(), key));
        }
        self.ends.push(self.data.len());
        self.timestamps
            .push(timestamp.unwrap_or(packed::NO_TIMESTAMP));
    }

    /// How many records it holds.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The records, in the order they were added: in one buffer (keys
    /// copied after the values), or, past the 4 GiB a batch's spans
    /// address, as records of their own.
    pub fn finish_records(self) -> packed::Records {
        let keys: usize = self.keys.iter().map(|(_, k)| k.len()).sum();
        if self.data.len() + keys >= u32::MAX as usize {
            return packed::Records::List(self.finish());
        }
        packed::Records::Packed(self.finish_packed())
    }

    /// [`RecordBuffer::finish_records`] in one buffer, whose size the caller
    /// checked.
    fn finish_packed(self) -> packed::PackedRecords {
        let RecordBuffer {
            mut data,
            ends,
            timestamps,
            keys,
        } = self;
        let mut spans = Vec::with_capacity(ends.len() * 4);
        let mut start = 0;
        for &end in &ends {
            spans.extend([packed::NO_KEY, 0, start as u32, (end - start) as u32]);
            start = end;
        }
        for (record, key) in keys {
            spans[record * 4..record * 4 + 2]
                .copy_from_slice(&[data.len() as u32, key.len() as u32]);
            data.extend_from_slice(&key);
        }
        if data.capacity() - data.len() > data.len().max(4096) {
            data.shrink_to_fit();
        }
        let bytes = data.len() as u64;
        packed::PackedRecords::from_valid_parts(data, spans, timestamps, bytes)
    }

    /// The records, in the order they were added. Their buffer gives back
    /// what it reserved beyond their bytes when that is much (a few records
    /// in a buffer sized for a full batch), so that records do not hold
    /// memory they do not use while they travel.
    pub fn finish(mut self) -> Vec<Record> {
        if self.data.capacity() - self.data.len() > self.data.len().max(4096) {
            self.data.shrink_to_fit();
        }
        let data = Bytes::from(self.data);
        let mut keys = self.keys.into_iter().peekable();
        let mut start = 0;
        self.ends
            .into_iter()
            .zip(self.timestamps)
            .enumerate()
            .map(|(i, (end, timestamp))| {
                let key = keys.next_if(|(record, _)| *record == i).map(|(_, k)| k);
                let value = data.slice(start..end);
                start = end;
                Record {
                    key,
                    value,
                    timestamp: packed::timestamp(timestamp),
                }
            })
            .collect()
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
    Data(packed::Records),
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
    /// The sender's records and watermarks ended: nothing but barriers
    /// and [`Signal::EndOfStream`] follow. A task whose inputs all ended
    /// their data finishes its own and goes on taking part in checkpoints
    /// until one taken after its end completes (Flink's FLIP-147), then
    /// ends its stream.
    EndOfData,
    /// The sender finished; its channel carries nothing more (for barriers,
    /// it counts as having delivered every later one).
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
    /// A savepoint that stops the job (`weir stop`): the job's last
    /// checkpoint. Sources read nothing after it (unless a later barrier
    /// comes: then it failed, and the job goes on).
    StopSavepoint,
    /// A savepoint that stops the job after draining it (`weir stop
    /// --drain`): sources send the maximal watermark before its barrier,
    /// so every event-time window fires and every event-time timer goes
    /// off into the output the savepoint commits.
    DrainSavepoint,
}

impl CheckpointKind {
    /// Whether it is a savepoint (its state is portable).
    pub fn is_savepoint(self) -> bool {
        !matches!(self, CheckpointKind::Checkpoint)
    }

    /// Whether it stops the job (sources read nothing after it).
    pub fn stops(self) -> bool {
        matches!(
            self,
            CheckpointKind::StopSavepoint | CheckpointKind::DrainSavepoint
        )
    }
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
    /// Exactly-once only: `None`, the barriers are aligned; `Some(0)`, the
    /// checkpoint is unaligned (a task snapshots on a barrier's first
    /// arrival and stores the records it overtook); `Some(t)`, aligned
    /// until `t` ms after the trigger, unaligned from then on.
    pub aligned_timeout_ms: Option<u64>,
}

impl StreamMessage {
    /// A watermark message.
    pub fn watermark(wm: i64) -> StreamMessage {
        StreamMessage::Signal(Signal::Watermark(wm))
    }

    /// The end-of-stream message.
    pub const END: StreamMessage = StreamMessage::Signal(Signal::EndOfStream);

    /// The end-of-data message.
    pub const END_OF_DATA: StreamMessage = StreamMessage::Signal(Signal::EndOfData);

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
