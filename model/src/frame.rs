//! The wire format of data channels between workers.
//!
//! A connection carries one channel: the sender opens it with [`Frame::Hello`]
//! naming the receiving subtask and its channel index, then sends data and
//! in-band signals; the receiver answers with [`Frame::Credit`]s. Each frame
//! is length-prefixed (a big-endian u32, by the transport's codec); its body
//! starts with a one-byte tag:
//!
//! | tag | frame | body |
//! | --- | --- | --- |
//! | 1 | `Hello` | job id (u32 length + UTF-8), receiving vertex (u32), subtask (u32), channel (u32), token (u32 length + UTF-8; empty on an open cluster) |
//! | 2 | `Data` | record count (u32), then per record: flags (u8: 1 = key, 2 = timestamp), key (u32 length + bytes), value (u32 length + bytes), timestamp (i64) |
//! | 3 | `Watermark` | i64 |
//! | 4 | `Barrier` | checkpoint id (u64), trigger time (i64 ms), kind (u8: 0 = checkpoint, 1 = savepoint, 2 = savepoint that stops the job, 3 = one that drains it first), mode (u8: 0 = exactly-once, 1 = at-least-once), aligned timeout (u64 ms: 0 = unaligned, `u64::MAX` = aligned) |
//! | 5 | `EndOfStream` | — |
//! | 6 | `Credit` | buffers granted (u32) |
//! | 7 | `Idle` | — |
//! | 8 | `EndOfData` | — |
//!
//! Credit-based flow control: the sender may send a `Data` frame only while
//! it holds credit, one per frame; the receiver grants credit for the
//! buffers it has room for. Signals (watermarks, idleness, barriers, end of
//! stream) are small and travel without credit: they never wait for a full
//! receiver's credit, though they stay in order behind the data sent before
//! them.

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::record::packed::{PackedRecords, RecordRef};
use crate::record::{Barrier, CheckpointKind, CheckpointMode, Signal, StreamMessage};

/// Which channel a connection carries: the receiving subtask and the
/// sender's channel index at it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ChannelKey {
    /// The job.
    pub job: String,
    /// The receiving vertex (the head of its task).
    pub vertex: u32,
    /// The receiving subtask.
    pub subtask: u32,
    /// The sender's channel index at the receiver.
    pub channel: u32,
}

/// One frame on a data connection.
#[derive(Debug, Clone, PartialEq)]
pub enum Frame {
    /// First frame from the sender: the channel, and the cluster's token
    /// (empty on an open cluster), which the receiver checks before anything
    /// else.
    Hello(ChannelKey, String),
    /// A message of the stream: data or a signal.
    Message(StreamMessage),
    /// From the receiver: the sender may send this many more data frames.
    Credit(u32),
}

/// A frame that cannot be decoded.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("malformed frame: {0}")]
pub struct FrameError(pub String);

fn put_bytes(buf: &mut BytesMut, b: &[u8]) {
    buf.put_u32(b.len() as u32);
    buf.put_slice(b);
}

/// Encode a frame's body.
///
/// ```
/// use weir_model::frame::{decode, encode, Frame};
/// use weir_model::{Record, StreamMessage};
/// let f = Frame::Message(StreamMessage::Data(vec![Record::value(b"1".to_vec())].into()));
/// assert_eq!(decode(encode(&f)).unwrap(), f);
/// ```
pub fn encode(frame: &Frame) -> Bytes {
    let mut buf = BytesMut::new();
    match frame {
        Frame::Hello(k, token) => {
            buf.put_u8(1);
            put_bytes(&mut buf, k.job.as_bytes());
            buf.put_u32(k.vertex);
            buf.put_u32(k.subtask);
            buf.put_u32(k.channel);
            put_bytes(&mut buf, token.as_bytes());
        }
        Frame::Message(message) => put_message(&mut buf, message),
        Frame::Credit(n) => {
            buf.put_u8(6);
            buf.put_u32(*n);
        }
    }
    buf.freeze()
}

/// The body of a [`Frame::Message`] carrying `message` (without moving or
/// copying the message into a frame first).
pub fn encode_message(message: &StreamMessage) -> Bytes {
    let mut buf = BytesMut::new();
    put_message(&mut buf, message);
    buf.freeze()
}

fn put_message(buf: &mut BytesMut, message: &StreamMessage) {
    match message {
        StreamMessage::Data(records) => {
            buf.reserve(5 + 17 * records.len() + records.bytes() as usize);
            buf.put_u8(2);
            buf.put_u32(records.len() as u32);
            for r in records.iter() {
                let flags = u8::from(r.key.is_some()) | (u8::from(r.timestamp.is_some()) << 1);
                buf.put_u8(flags);
                if let Some(k) = r.key {
                    put_bytes(buf, k);
                }
                put_bytes(buf, r.value);
                if let Some(t) = r.timestamp {
                    buf.put_i64(t);
                }
            }
        }
        StreamMessage::Signal(signal) => match signal {
            Signal::Watermark(w) => {
                buf.put_u8(3);
                buf.put_i64(*w);
            }
            Signal::Barrier(b) => {
                buf.put_u8(4);
                buf.put_u64(b.id);
                buf.put_i64(b.timestamp_ms);
                buf.put_u8(match b.kind {
                    CheckpointKind::Checkpoint => 0,
                    CheckpointKind::Savepoint => 1,
                    CheckpointKind::StopSavepoint => 2,
                    CheckpointKind::DrainSavepoint => 3,
                });
                buf.put_u8(match b.mode {
                    CheckpointMode::ExactlyOnce => 0,
                    CheckpointMode::AtLeastOnce => 1,
                });
                buf.put_u64(b.aligned_timeout_ms.unwrap_or(u64::MAX));
            }
            Signal::EndOfStream => buf.put_u8(5),
            Signal::Idle => buf.put_u8(7),
            Signal::EndOfData => buf.put_u8(8),
        },
    }
}

fn need(buf: &impl Buf, n: usize, what: &str) -> Result<(), FrameError> {
    if buf.remaining() < n {
        return Err(FrameError(format!("truncated {what}")));
    }
    Ok(())
}

/// The next length-prefixed bytes of `buf`, which moves past them.
fn length_prefixed<'a>(buf: &mut &'a [u8], what: &str) -> Result<&'a [u8], FrameError> {
    need(buf, 4, what)?;
    let n = buf.get_u32() as usize;
    need(buf, n, what)?;
    let (bytes, rest) = buf.split_at(n);
    *buf = rest;
    Ok(bytes)
}

/// [`length_prefixed`] from a frame: a slice of it, not a copy.
fn get_bytes(buf: &mut Bytes, what: &str) -> Result<Bytes, FrameError> {
    let n = length_prefixed(&mut &buf[..], what)?.len();
    buf.advance(4);
    Ok(buf.split_to(n))
}

/// A data frame's `n` records (after its count) copied into one packed
/// buffer, and the bytes they took (a time of `i64::MIN` is none, as
/// everywhere: [`crate::record::packed::NO_TIMESTAMP`]).
fn packed_records(body: &[u8], n: usize) -> Result<(PackedRecords, usize), FrameError> {
    let mut rest = body;
    let mut records = PackedRecords::default();
    for _ in 0..n {
        need(&rest, 1, "record flags")?;
        let flags = rest.get_u8();
        let key = match flags & 1 {
            0 => None,
            _ => Some(length_prefixed(&mut rest, "key")?),
        };
        let value = length_prefixed(&mut rest, "value")?;
        let timestamp = match flags & 2 {
            0 => None,
            _ => {
                need(&rest, 8, "timestamp")?;
                Some(rest.get_i64())
            }
        };
        // A frame's records take fewer bytes packed than in the frame,
        // whose length is a u32.
        records
            .push(RecordRef {
                key,
                value,
                timestamp,
            })
            .map_err(FrameError)?;
    }
    Ok((records, body.len() - rest.len()))
}

/// Decode a frame's body; a data frame's records are packed in one buffer.
pub fn decode(mut buf: Bytes) -> Result<Frame, FrameError> {
    need(&buf, 1, "tag")?;
    let frame = match buf.get_u8() {
        1 => {
            let job = String::from_utf8(get_bytes(&mut buf, "job id")?.to_vec())
                .map_err(|_| FrameError("job id is not UTF-8".into()))?;
            need(&buf, 12, "hello")?;
            let key = ChannelKey {
                job,
                vertex: buf.get_u32(),
                subtask: buf.get_u32(),
                channel: buf.get_u32(),
            };
            let token = String::from_utf8(get_bytes(&mut buf, "token")?.to_vec())
                .map_err(|_| FrameError("token is not UTF-8".into()))?;
            Frame::Hello(key, token)
        }
        2 => {
            need(&buf, 4, "record count")?;
            let n = buf.get_u32() as usize;
            // Every record takes at least 5 bytes: a bound before allocating.
            if n > buf.remaining() / 5 + 1 {
                return Err(FrameError(format!(
                    "{n} records cannot fit in {} bytes",
                    buf.remaining()
                )));
            }
            let (records, read) = packed_records(&buf, n)?;
            buf.advance(read);
            Frame::Message(StreamMessage::Data(records.into()))
        }
        3 => {
            need(&buf, 8, "watermark")?;
            Frame::Message(StreamMessage::watermark(buf.get_i64()))
        }
        4 => {
            need(&buf, 26, "barrier")?;
            let id = buf.get_u64();
            let timestamp_ms = buf.get_i64();
            let kind = match buf.get_u8() {
                0 => CheckpointKind::Checkpoint,
                1 => CheckpointKind::Savepoint,
                2 => CheckpointKind::StopSavepoint,
                3 => CheckpointKind::DrainSavepoint,
                k => return Err(FrameError(format!("unknown barrier kind {k}"))),
            };
            let mode = match buf.get_u8() {
                0 => CheckpointMode::ExactlyOnce,
                1 => CheckpointMode::AtLeastOnce,
                m => return Err(FrameError(format!("unknown barrier mode {m}"))),
            };
            let aligned_timeout_ms = Some(buf.get_u64()).filter(|&t| t != u64::MAX);
            Frame::Message(StreamMessage::Signal(Signal::Barrier(Barrier {
                id,
                timestamp_ms,
                kind,
                mode,
                aligned_timeout_ms,
            })))
        }
        5 => Frame::Message(StreamMessage::END),
        6 => {
            need(&buf, 4, "credit")?;
            Frame::Credit(buf.get_u32())
        }
        7 => Frame::Message(StreamMessage::IDLE),
        8 => Frame::Message(StreamMessage::END_OF_DATA),
        t => return Err(FrameError(format!("unknown tag {t}"))),
    };
    if buf.has_remaining() {
        return Err(FrameError(format!(
            "{} bytes after the frame",
            buf.remaining()
        )));
    }
    Ok(frame)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Record;
    use crate::record::packed::Records;

    #[test]
    fn every_frame_round_trips() {
        let frames = [
            Frame::Hello(
                ChannelKey {
                    job: "jöb".into(),
                    vertex: 2,
                    subtask: 3,
                    channel: 7,
                },
                "a-token".into(),
            ),
            Frame::Message(StreamMessage::Data(
                vec![
                    Record {
                        key: Some(Bytes::from_static(b"k")),
                        value: Bytes::from_static(b"{}"),
                        timestamp: Some(-5),
                    },
                    Record {
                        key: None,
                        value: Bytes::new(),
                        timestamp: None,
                    },
                ]
                .into(),
            )),
            Frame::Message(StreamMessage::watermark(i64::MAX)),
            Frame::Message(StreamMessage::IDLE),
            Frame::Message(StreamMessage::Signal(Signal::Barrier(Barrier {
                id: 42,
                timestamp_ms: -3,
                kind: CheckpointKind::Savepoint,
                mode: CheckpointMode::AtLeastOnce,
                aligned_timeout_ms: None,
            }))),
            Frame::Message(StreamMessage::Signal(Signal::Barrier(Barrier {
                id: 43,
                timestamp_ms: 7,
                kind: CheckpointKind::StopSavepoint,
                mode: CheckpointMode::ExactlyOnce,
                aligned_timeout_ms: Some(0),
            }))),
            Frame::Message(StreamMessage::Signal(Signal::Barrier(Barrier {
                id: 44,
                timestamp_ms: 8,
                kind: CheckpointKind::DrainSavepoint,
                mode: CheckpointMode::ExactlyOnce,
                aligned_timeout_ms: Some(1500),
            }))),
            Frame::Message(StreamMessage::END_OF_DATA),
            Frame::Message(StreamMessage::END),
            Frame::Credit(16),
        ];
        for f in frames {
            assert_eq!(decode(encode(&f)).unwrap(), f);
        }
    }

    #[test]
    fn records_arrive_packed_and_a_time_of_i64_min_is_none() {
        let record = |t: Option<i64>| Record {
            key: Some(Bytes::from_static(b"k")),
            value: Bytes::from_static(b"v"),
            timestamp: t,
        };
        let decoded = |records: Vec<Record>| {
            let f = Frame::Message(StreamMessage::Data(records.into()));
            match decode(encode(&f)).unwrap() {
                Frame::Message(StreamMessage::Data(r)) => r,
                other => panic!("{other:?}"),
            }
        };
        let usual = vec![record(Some(3)), record(None), record(Some(i64::MAX))];
        let got = decoded(usual.clone());
        assert!(matches!(got, Records::Packed(_)));
        assert_eq!(got.into_list(), usual);
        let got = decoded(vec![record(Some(i64::MIN))]);
        assert_eq!(got.into_list(), [record(None)]);
    }

    #[test]
    fn a_data_frame_cut_anywhere_is_an_error() {
        let records = vec![
            Record {
                key: Some(Bytes::new()),
                value: Bytes::new(),
                timestamp: Some(0),
            },
            Record {
                key: Some(Bytes::from_static(b"key")),
                value: Bytes::from_static(b"{\"a\":[1,2]}"),
                timestamp: None,
            },
        ];
        let body = encode(&Frame::Message(StreamMessage::Data(records.into())));
        for cut in 0..body.len() {
            assert!(decode(body.slice(..cut)).is_err(), "cut at {cut}");
        }
        assert!(decode(body).is_ok());
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        for bad in [
            &b""[..],
            b"\x09",
            b"\x02\xff\xff\xff\xff",
            b"\x02\0\0\0\x01\x01\0\0\0\x09ab",
            b"\x03\0",
            b"\x06\0\0\0\x01\x00",
            b"\x04\0\0\0\0\0\0\0\x01\0\0\0\0\0\0\0\0\x07\0",
        ] {
            assert!(decode(Bytes::copy_from_slice(bad)).is_err(), "{bad:?}");
        }
    }
}
