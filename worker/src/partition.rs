//! How records leave a task: one [`NetworkOutput`] per edge that leaves it,
//! with a buffer per receiving subtask, flushed when full and after every
//! input batch (so latency stays bounded by one batch).

use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use weir_model::format::{Format, RowKeys};

use crate::inbox::InboxSender;
use weir_model::keygroup::subtask_for_key;
use weir_model::{KeyBy, PackedRecords, Partitioning, RecordRef, Records, StreamMessage};

/// How often a send waiting for room checks the job's cancel flag.
const CANCEL_POLL: Duration = Duration::from_millis(200);

/// A message on a channel: the sender's channel index at the receiver, and
/// the message.
pub type Envelope = (u32, StreamMessage);

/// Records that cannot be partitioned.
#[derive(Debug, thiserror::Error)]
pub enum PartitionError {
    /// The receiver went away.
    #[error("the receiving task stopped")]
    Disconnected,
    /// The key cannot be extracted.
    #[error("{0}")]
    Key(String),
}

/// One edge out of a task, seen from one sending subtask.
pub struct NetworkOutput {
    senders: Vec<InboxSender>,
    /// Per receiver, room taken ahead for the next message to it
    /// ([`NetworkOutput::take_room`]).
    room: Vec<Option<crate::inbox::Room>>,
    /// The job's cancel flag: a send waiting for room gives up when it is
    /// set (a receiver that stopped reading, behind a dead link, must not
    /// hold the task forever).
    cancel: Arc<AtomicBool>,
    channel: u32,
    partitioning: Partitioning,
    /// How the edge's records are encoded (a key-by pointer reads them).
    format: Format,
    /// For a hash edge of rows, its keys' reader, compiled once.
    row_keys: Option<RowKeys>,
    max_parallelism: u32,
    buffers: Vec<PackedRecords>,
    /// A key read from a row, written here first.
    scratch: Vec<u8>,
    batch_size: usize,
    next: usize,
    subtask: usize,
    backpressured: std::time::Duration,
}

/// The key `key_by` gives `record`, read with `format`'s general readers (a
/// hash edge of rows reads its keys with the [`RowKeys`] it compiled); a
/// JSON pointer reads any codec, and the key of a row is MessagePack.
fn key_in<'a>(
    record: &RecordRef<'a>,
    key_by: &KeyBy,
    format: &Format,
) -> Result<Cow<'a, [u8]>, PartitionError> {
    match key_by {
        KeyBy::Value => format
            .value_key(record.value)
            .map_err(|e| PartitionError::Key(format!("key-by = \"value\": {e}"))),
        KeyBy::Key => record.key.map(Cow::Borrowed).ok_or_else(|| {
            PartitionError::Key(
                "key-by = \"key\", but a record has no key (emit it with emit_keyed)".into(),
            )
        }),
        KeyBy::Pointer(p) => format
            .pointer_key(record.value, p)
            .map_err(|e| {
                PartitionError::Key(format!(
                    "key-by = {p:?}: a record {e}: {}",
                    format.excerpt(record.value)
                ))
            })?
            .ok_or_else(|| no_field(key_by, format, record.value)),
    }
}

/// The error of a record without the field a `key-by` names.
fn no_field(key_by: &KeyBy, format: &Format, value: &[u8]) -> PartitionError {
    PartitionError::Key(format!(
        "key-by = {}: a record has no such field: {}",
        describe(key_by),
        format.excerpt(value)
    ))
}

/// A `key-by` as the manifest says it.
fn describe(key_by: &KeyBy) -> String {
    match key_by {
        KeyBy::Value => "\"value\"".into(),
        KeyBy::Key => "\"key\"".into(),
        KeyBy::Pointer(p) => format!("{p:?}"),
    }
}

impl NetworkOutput {
    /// An output to `senders` (one per receiving subtask); this sender is
    /// channel `channel` at the receivers and subtask `subtask` of its
    /// vertex; it stops waiting for room when `cancel` is set. Records are
    /// in `format`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        senders: Vec<InboxSender>,
        cancel: Arc<AtomicBool>,
        channel: u32,
        subtask: usize,
        partitioning: Partitioning,
        format: Format,
        max_parallelism: u32,
        batch_size: usize,
    ) -> Self {
        let n = senders.len();
        NetworkOutput {
            senders,
            cancel,
            channel,
            row_keys: match &partitioning {
                Partitioning::Hash(key_by) => format.row_keys(key_by),
                _ => None,
            },
            partitioning,
            format,
            max_parallelism,
            buffers: vec![PackedRecords::default(); n],
            scratch: Vec::new(),
            room: (0..n).map(|_| None).collect(),
            batch_size,
            next: subtask % n.max(1),
            subtask,
            backpressured: std::time::Duration::ZERO,
        }
    }

    fn send(&mut self, to: usize, message: StreamMessage) -> Result<(), PartitionError> {
        use crate::inbox::TrySendError;
        if self.senders[to].takes_room(&message)
            && let Some(room) = self.room[to].take()
        {
            return self.senders[to]
                .send_in(room, (self.channel, message))
                .map_err(|_| PartitionError::Disconnected);
        }
        match self.senders[to].try_send((self.channel, message)) {
            Ok(()) => Ok(()),
            Err(TrySendError::Closed(_)) => Err(PartitionError::Disconnected),
            Err(TrySendError::Full(envelope)) => {
                // The receiver has no room: this is backpressure.
                let started = std::time::Instant::now();
                let sent = self.wait_and_send(to, envelope);
                self.backpressured += started.elapsed();
                sent
            }
        }
    }

    /// Wait for room at receiver `to` and send, checking the cancel flag
    /// every [`CANCEL_POLL`].
    fn wait_and_send(&mut self, to: usize, envelope: Envelope) -> Result<(), PartitionError> {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return self.senders[to]
                .blocking_send(envelope)
                .map_err(|_| PartitionError::Disconnected);
        };
        let sender = &self.senders[to];
        // One wait, kept across the cancel checks: it keeps its place in
        // the line for room (a new wait each time would go last, and
        // senders that wait on would take every unit of room).
        let reserve = sender.reserve();
        tokio::pin!(reserve);
        loop {
            let room = runtime.block_on(tokio::time::timeout(CANCEL_POLL, &mut reserve));
            match room {
                Ok(Ok(permit)) => {
                    return permit
                        .send(envelope)
                        .map_err(|_| PartitionError::Disconnected);
                }
                Ok(Err(_)) => return Err(PartitionError::Disconnected),
                Err(_) if self.cancel.load(Ordering::Relaxed) => {
                    return Err(PartitionError::Disconnected);
                }
                Err(_) => {}
            }
        }
    }

    /// Take room for a message at every receiver that has some now, and
    /// hold it for the next message to it; returns whether room is held
    /// at every receiver (the next batch goes out without waiting).
    pub fn take_room(&mut self) -> bool {
        for (sender, held) in self.senders.iter().zip(&mut self.room) {
            if held.is_none() {
                *held = sender.try_take_room();
            }
        }
        self.room.iter().all(Option::is_some)
    }

    /// Give back the room taken ahead (no more data comes).
    pub fn release_room(&mut self) {
        self.room.iter_mut().for_each(|r| *r = None);
    }

    /// Wait, at most `max`, for room at every receiver, taking it
    /// (counted as backpressure).
    pub fn wait_for_room(&mut self, max: Duration) {
        let started = std::time::Instant::now();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            for (sender, held) in self.senders.iter().zip(&mut self.room) {
                if held.is_none() {
                    let left = max.saturating_sub(started.elapsed());
                    if let Ok(room) =
                        runtime.block_on(tokio::time::timeout(left, sender.take_room()))
                    {
                        *held = room;
                    }
                }
            }
        }
        self.backpressured += started.elapsed();
    }

    /// Time spent waiting for room at the receivers so far.
    pub fn backpressured(&self) -> std::time::Duration {
        self.backpressured
    }

    fn flush_one(&mut self, to: usize) -> Result<(), PartitionError> {
        if self.buffers[to].is_empty() {
            return Ok(());
        }
        let batch = std::mem::take(&mut self.buffers[to]);
        self.send(to, StreamMessage::Data(Records::Packed(batch)))
    }

    /// Add `record` to receiver `to`'s buffer (sent first if the record
    /// would not fit in it).
    fn buffer(&mut self, to: usize, record: RecordRef<'_>) -> Result<(), PartitionError> {
        if self.buffers[to].push(record).is_err() {
            self.flush_one(to)?;
            self.buffers[to].push(record).map_err(PartitionError::Key)?;
        }
        Ok(())
    }

    /// Partition `records` into the buffers, each receiver's records
    /// copied into one buffer; send the full ones.
    pub fn push(&mut self, records: impl Into<Records>) -> Result<(), PartitionError> {
        let records: Records = records.into();
        let n = self.senders.len();
        match &self.partitioning {
            Partitioning::Forward => {
                let to = self.subtask % n;
                match records {
                    // Moved into an empty buffer, copied once into another.
                    Records::Packed(p) => {
                        if !self.buffers[to].fits(&p) {
                            self.flush_one(to)?;
                        }
                        self.buffers[to].append(p).map_err(PartitionError::Key)?;
                    }
                    records => {
                        for r in records.iter() {
                            self.buffer(to, r)?;
                        }
                    }
                }
            }
            Partitioning::Rebalance => {
                for r in records.iter() {
                    let to = self.next;
                    self.next = (self.next + 1) % n;
                    self.buffer(to, r)?;
                }
            }
            Partitioning::Hash(key_by) => {
                let key_by = key_by.clone();
                let mut scratch = std::mem::take(&mut self.scratch);
                for r in records.iter() {
                    let key = self.key_of(&r, &key_by, &mut scratch)?;
                    let to = subtask_for_key(&key, self.max_parallelism, n as u32) as usize;
                    let keyed = RecordRef {
                        key: Some(&key),
                        ..r
                    };
                    self.buffer(to, keyed)?;
                }
                self.scratch = scratch;
            }
        }
        for to in 0..n {
            if self.buffers[to].len() >= self.batch_size {
                self.flush_one(to)?;
            }
        }
        Ok(())
    }

    /// The key `key_by` gives `record` on this edge (a row's written into
    /// `scratch`).
    fn key_of<'a>(
        &self,
        record: &RecordRef<'a>,
        key_by: &KeyBy,
        scratch: &'a mut Vec<u8>,
    ) -> Result<Cow<'a, [u8]>, PartitionError> {
        let Some(keys) = &self.row_keys else {
            return key_in(record, key_by, &self.format);
        };
        scratch.clear();
        let found = keys.write(record.value, scratch).map_err(|e| {
            PartitionError::Key(format!(
                "key-by = {}: a record {e}: {}",
                describe(key_by),
                self.format.excerpt(record.value)
            ))
        })?;
        match found {
            true => Ok(Cow::Borrowed(&scratch[..])),
            false => Err(no_field(key_by, &self.format, record.value)),
        }
    }

    /// Send every non-empty buffer.
    pub fn flush(&mut self) -> Result<(), PartitionError> {
        for to in 0..self.senders.len() {
            self.flush_one(to)?;
        }
        Ok(())
    }

    /// Send a signal (watermark, end of stream) to every receiver, after the
    /// records buffered before it.
    pub fn broadcast(&mut self, message: StreamMessage) -> Result<(), PartitionError> {
        self.flush()?;
        for to in 0..self.senders.len() {
            self.send(to, message.clone())?;
        }
        Ok(())
    }

    /// Send a signal to every receiver that is still there, after the end
    /// of data: a receiver that ended since needs nothing more.
    pub fn broadcast_to_open(&mut self, message: StreamMessage) -> Result<(), PartitionError> {
        self.flush()?;
        for to in 0..self.senders.len() {
            match self.send(to, message.clone()) {
                Ok(()) | Err(PartitionError::Disconnected) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use weir_model::codec::Codec;
    use weir_model::types::row::{Schema, json};

    use super::*;
    use weir_model::Record;

    /// `record` with the key `key_by` gives it, read with `format`'s
    /// general readers.
    fn keyed(record: &Record, key_by: &KeyBy, format: &Format) -> Result<Record, PartitionError> {
        let r = RecordRef {
            key: record.key.as_deref(),
            value: &record.value,
            timestamp: record.timestamp,
        };
        let key = key_in(&r, key_by, format)?.into_owned();
        Ok(Record {
            key: Some(key.into()),
            ..record.clone()
        })
    }

    /// What each of three receivers gets when `records` are pushed to an
    /// edge (from subtask 1), three at a time into buffers of four (so a
    /// batch meets a buffer holding part of the one before): the same
    /// whether they come as records of their own or packed.
    fn received(
        partitioning: Partitioning,
        format: &Format,
        records: &[Record],
    ) -> Vec<Vec<Record>> {
        let mut each_way = Vec::new();
        for packed in [false, true] {
            let (senders, mut inboxes): (Vec<_>, Vec<_>) =
                (0..3).map(|_| crate::inbox::channel(64)).unzip();
            let cancel = Arc::new(std::sync::atomic::AtomicBool::new(false));
            let mut out = NetworkOutput::new(
                senders,
                cancel,
                0,
                1,
                partitioning.clone(),
                format.clone(),
                128,
                4,
            );
            for three in records.chunks(3) {
                let batch = match packed {
                    true => Records::Packed(PackedRecords::from_records(three).unwrap()),
                    false => Records::List(three.to_vec()),
                };
                out.push(batch).unwrap();
            }
            out.flush().unwrap();
            let got: Vec<Vec<Record>> = inboxes
                .iter_mut()
                .map(|inbox| {
                    let mut got = Vec::new();
                    while let Ok((_, message)) = inbox.try_recv() {
                        let StreamMessage::Data(batch) = message else {
                            panic!("only data was sent")
                        };
                        got.extend(batch.into_list());
                    }
                    got
                })
                .collect();
            each_way.push(got);
        }
        assert_eq!(each_way[0], each_way[1], "{partitioning:?}");
        each_way.pop().unwrap()
    }

    #[test]
    fn edges_route_records_as_their_keys_say_in_order() {
        // Every other record keyed (a forward edge keeps its key where an
        // appended batch's keys move in the buffer).
        let records: Vec<Record> = (0..20)
            .map(|i| Record {
                key: (i % 2 == 0).then(|| format!("k{i}").into_bytes().into()),
                value: format!(r#"{{"k": {}, "v": {i}}}"#, i % 7)
                    .into_bytes()
                    .into(),
                timestamp: Some(i),
            })
            .collect();
        let json = Format::default();
        // Forward: subtask 1 to receiver 1, all of them, in order.
        let got = received(Partitioning::Forward, &json, &records);
        assert_eq!(got, [vec![], records.clone(), vec![]]);
        // Rebalance: round-robin from receiver 1.
        let got = received(Partitioning::Rebalance, &json, &records);
        for (i, r) in records.iter().enumerate() {
            let to = (1 + i) % 3;
            assert!(got[to].contains(r), "record {i} at receiver {to}");
        }
        assert_eq!(got.iter().map(Vec::len).sum::<usize>(), 20);
        // Hash: each record keyed as the general readers key it, at the subtask
        // its key's group is on, in order.
        let schema = Arc::new(Schema::new("{k: u32, v: i64}".parse().unwrap()));
        let rows = Format {
            codec: Codec::Row,
            schema: Some(schema.clone()),
        };
        let as_rows: Vec<Record> = records
            .iter()
            .map(|r| {
                let mut row = Vec::new();
                json::read_value(&schema.node, &r.value, &mut row).unwrap();
                Record {
                    value: row.into(),
                    ..r.clone()
                }
            })
            .collect();
        for (format, records) in [(&json, &records), (&rows, &as_rows)] {
            for by in [KeyBy::Pointer("/k".into()), KeyBy::Value] {
                let mut want = vec![Vec::new(); 3];
                for r in records {
                    let r = keyed(r, &by, format).unwrap();
                    let to = subtask_for_key(r.key.as_deref().unwrap(), 128, 3) as usize;
                    want[to].push(r);
                }
                let got = received(Partitioning::Hash(by.clone()), format, records);
                assert_eq!(got, want, "{by:?}, {:?}", format.codec);
            }
        }
        // A record without the field: the error names the edge's key-by.
        let bad = [Record::value(&b"{\"x\": 1}"[..])];
        let (senders, _inboxes): (Vec<_>, Vec<_>) =
            (0..3).map(|_| crate::inbox::channel(4)).unzip();
        let cancel = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let by = KeyBy::Pointer("/k".into());
        let mut out =
            NetworkOutput::new(senders, cancel, 0, 0, Partitioning::Hash(by), json, 128, 4);
        let e = out.push(bad.to_vec()).unwrap_err().to_string();
        assert!(
            e.contains("key-by = \"/k\": a record has no such field"),
            "{e}"
        );
    }

    /// A key read from a row is the key the same field gives in a
    /// MessagePack stream: the same subtask, the same state.
    #[test]
    fn keys_of_rows_are_the_keys_of_messagepack_records() {
        let ty = "{k: u32, user: string}".parse().unwrap();
        let schema = Arc::new(Schema::new(ty));
        let rows = Format {
            codec: Codec::Row,
            schema: Some(schema.clone()),
        };
        let mut row = Vec::new();
        json::read_value(&schema.node, br#"{"k": 70000, "user": "ab"}"#, &mut row).unwrap();
        let mut packed = Vec::new();
        weir_model::msgpack::from_json(br#"{"k": 70000, "user": "ab"}"#, &mut packed).unwrap();
        let packed_format = Format::of(Codec::Msgpack);
        for pointer in ["/k", "/user"] {
            let by = KeyBy::Pointer(pointer.into());
            let a = keyed(&Record::value(row.clone()), &by, &rows).unwrap();
            let b = keyed(&Record::value(packed.clone()), &by, &packed_format).unwrap();
            assert_eq!(a.key, b.key, "{pointer}");
        }
        // In bulk, as a hash edge reads them: the same keys.
        for by in [
            KeyBy::Pointer("/k".into()),
            KeyBy::Pointer("/user".into()),
            KeyBy::Value,
        ] {
            let keys = rows.row_keys(&by).unwrap();
            let mut key = Vec::new();
            assert!(keys.write(&row, &mut key).unwrap());
            let one = keyed(&Record::value(row.clone()), &by, &rows).unwrap();
            assert_eq!(one.key.as_deref(), Some(&key[..]), "{by:?}");
        }
        let e = keyed(
            &Record::value(row.clone()),
            &KeyBy::Pointer("/nope".into()),
            &rows,
        )
        .unwrap_err();
        assert!(e.to_string().contains("no such field"), "{e}");
        // A malformed row (a guest's bug) is an error, not a panic.
        let e = keyed(
            &Record::value(row[..5].to_vec()),
            &KeyBy::Pointer("/user".into()),
            &rows,
        )
        .unwrap_err();
        assert!(e.to_string().contains("malformed"), "{e}");
        // key-by = "value" on a stream of strings: the string, as MessagePack.
        let words = Format {
            codec: Codec::Row,
            schema: Some(Arc::new(Schema::new(weir_model::types::Type::String))),
        };
        let r = keyed(&Record::value(b"hi".to_vec()), &KeyBy::Value, &words).unwrap();
        assert_eq!(r.key.as_deref(), Some(&[0xa2, b'h', b'i'][..]));
    }
}
