//! The contract's `batch` as the SDK reads and builds it: records' bytes in
//! one buffer, four span numbers and a timestamp per record.

use crate::__private::bindings::weir::operator::types::Batch as WitBatch;

/// A record's key offset when it has no key.
const NO_KEY: u32 = u32::MAX;

/// A record's timestamp when it has none.
const NO_TIMESTAMP: i64 = i64::MIN;

/// Records, or bytes of them, an output collects before it is handed over
/// in the middle of a call.
const HAND_OVER_RECORDS: usize = 16_384;
const HAND_OVER_BYTES: usize = 4 << 20;

/// One record of an incoming batch, borrowed from its buffer.
#[derive(Clone, Copy)]
pub(crate) struct InRecord<'a> {
    pub(crate) key: Option<&'a [u8]>,
    pub(crate) value: &'a [u8],
    pub(crate) timestamp: Option<i64>,
}

/// The records of a batch, read one after another without collecting
/// them: the lists' lengths are checked at once, each record's spans when
/// it is read (a span outside the data is the host's bug, an error).
pub(crate) fn iter(batch: &WitBatch) -> Result<Records<'_>, String> {
    let n = batch.timestamps.len();
    if batch.spans.len() != n * 4 {
        return Err(format!(
            "a batch has {} spans for {n} timestamps (4 per record)",
            batch.spans.len()
        ));
    }
    Ok(Records {
        data: &batch.data,
        spans: batch.spans.chunks_exact(4),
        timestamps: batch.timestamps.iter(),
    })
}

/// An incoming batch's records in order (from [`iter`]).
#[derive(Clone)]
pub(crate) struct Records<'a> {
    data: &'a [u8],
    spans: std::slice::ChunksExact<'a, u32>,
    timestamps: std::slice::Iter<'a, i64>,
}

impl<'a> Iterator for Records<'a> {
    type Item = Result<InRecord<'a>, String>;

    #[inline(always)]
    fn next(&mut self) -> Option<Self::Item> {
        let span = self.spans.next()?;
        let &timestamp = self.timestamps.next()?;
        Some(read(self.data, span, timestamp))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.timestamps.size_hint()
    }
}

impl ExactSizeIterator for Records<'_> {}

/// One record of a batch from its spans. Inlined into the loop over a
/// batch: a record returned through memory from a call costs more than
/// reading it.
#[inline(always)]
fn read<'a>(data: &'a [u8], span: &[u32], timestamp: i64) -> Result<InRecord<'a>, String> {
    let slice = |offset: u32, len: u32| {
        let (start, len) = (offset as usize, len as usize);
        start
            .checked_add(len)
            .and_then(|end| data.get(start..end))
            .ok_or_else(|| outside(start, len, data.len()))
    };
    Ok(InRecord {
        key: match span[0] {
            NO_KEY => None,
            offset => Some(slice(offset, span[1])?),
        },
        value: slice(span[2], span[3])?,
        timestamp: (timestamp != NO_TIMESTAMP).then_some(timestamp),
    })
}

/// The error of a span outside the batch's data.
#[cold]
#[inline(never)]
fn outside(start: usize, len: usize, data: usize) -> String {
    format!("a record's span {start}+{len} is outside the batch's {data} bytes")
}

/// The records of a batch, checked: a span outside the data or lists of the
/// wrong lengths are the host's bug, reported as an error.
pub(crate) fn records(batch: &WitBatch) -> Result<Vec<InRecord<'_>>, String> {
    iter(batch)?.collect()
}

/// Records being built: their bytes packed into one buffer.
#[derive(Default)]
pub(crate) struct OutBatch {
    data: Vec<u8>,
    spans: Vec<u32>,
    timestamps: Vec<i64>,
}

impl OutBatch {
    /// Room for `records` records of `bytes` bytes in all.
    pub(crate) fn with_capacity(records: usize, bytes: usize) -> Self {
        OutBatch {
            data: Vec::with_capacity(bytes),
            spans: Vec::with_capacity(records * 4),
            timestamps: Vec::with_capacity(records),
        }
    }

    /// Append a record whose value `write` encodes into the buffer.
    #[inline(always)]
    pub(crate) fn push_with(
        &mut self,
        key: Option<&[u8]>,
        timestamp: Option<i64>,
        write: impl FnOnce(&mut Vec<u8>),
    ) {
        match key {
            Some(k) => {
                self.spans.extend([self.data.len() as u32, k.len() as u32]);
                self.data.extend_from_slice(k);
            }
            None => self.spans.extend([NO_KEY, 0]),
        }
        let start = self.data.len();
        write(&mut self.data);
        self.spans
            .extend([start as u32, (self.data.len() - start) as u32]);
        self.timestamps.push(timestamp.unwrap_or(NO_TIMESTAMP));
    }

    /// Append a record whose value `write` encodes into the buffer, or
    /// nothing when it fails.
    pub(crate) fn try_push_with<E>(
        &mut self,
        key: Option<&[u8]>,
        timestamp: Option<i64>,
        write: impl FnOnce(&mut Vec<u8>) -> Result<(), E>,
    ) -> Result<(), E> {
        let (data, spans) = (self.data.len(), self.spans.len());
        let mut result = Ok(());
        self.push_with(key, timestamp, |buf| result = write(buf));
        if result.is_err() {
            self.data.truncate(data);
            self.spans.truncate(spans);
            self.timestamps.pop();
        }
        result
    }

    /// A batch of one record.
    pub(crate) fn one(key: Option<&[u8]>, value: &[u8], timestamp: Option<i64>) -> WitBatch {
        let mut batch = OutBatch::default();
        batch.push_with(key, timestamp, |buf| buf.extend_from_slice(value));
        batch.into_wit()
    }

    /// Whether it holds enough to hand over before the call ends: a flat map
    /// that fans out widely keeps its memory bounded, and the host counts
    /// what it emits against the call's quotas as it goes.
    pub(crate) fn is_large(&self) -> bool {
        self.timestamps.len() >= HAND_OVER_RECORDS || self.data.len() >= HAND_OVER_BYTES
    }

    /// How many records it holds.
    #[cfg_attr(
        all(not(target_family = "wasm"), not(test)),
        expect(dead_code, reason = "read only when handing a batch over")
    )]
    pub(crate) fn len(&self) -> usize {
        self.timestamps.len()
    }

    /// The values of its records, in order.
    pub(crate) fn values(&self) -> Vec<Vec<u8>> {
        self.spans
            .chunks_exact(4)
            .map(|s| self.data[s[2] as usize..(s[2] + s[3]) as usize].to_vec())
            .collect()
    }

    /// The timestamps of its records, in order.
    pub(crate) fn timestamps(&self) -> Vec<Option<i64>> {
        self.timestamps
            .iter()
            .map(|&t| (t != NO_TIMESTAMP).then_some(t))
            .collect()
    }

    /// The batch as the contract carries it.
    pub(crate) fn into_wit(self) -> WitBatch {
        WitBatch {
            data: self.data,
            spans: self.spans,
            timestamps: self.timestamps,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_batches_read_back_with_and_without_keys_and_timestamps() {
        let mut out = OutBatch::default();
        out.push_with(Some(b"k"), Some(-3), |b| b.extend_from_slice(b"12"));
        out.push_with(None, None, |b| b.extend_from_slice(b"\"x\""));
        out.push_with(Some(b""), Some(0), |_| {});
        assert_eq!(out.len(), 3);
        assert_eq!(out.timestamps(), [Some(-3), None, Some(0)]);
        let wit = out.into_wit();
        let read = records(&wit).unwrap();
        let shown: Vec<_> = read.iter().map(|r| (r.key, r.value, r.timestamp)).collect();
        assert_eq!(
            shown,
            [
                (Some(&b"k"[..]), &b"12"[..], Some(-3)),
                (None, &b"\"x\""[..], None),
                (Some(&b""[..]), &b""[..], Some(0)),
            ]
        );
    }

    #[test]
    fn a_failed_push_leaves_nothing_behind() {
        let mut out = OutBatch::default();
        out.push_with(None, Some(1), |b| b.extend_from_slice(b"1"));
        let failed: Result<(), &str> = out.try_push_with(Some(b"k"), Some(2), |b| {
            b.extend_from_slice(b"half");
            Err("no")
        });
        assert_eq!(failed, Err("no"));
        assert_eq!(out.len(), 1);
        let ok: Result<(), &str> = out.try_push_with(None, None, |b| {
            b.extend_from_slice(b"2");
            Ok(())
        });
        assert_eq!(ok, Ok(()));
        let wit = out.into_wit();
        assert_eq!(wit.data, b"12");
        assert_eq!(wit.timestamps, [1, NO_TIMESTAMP]);
    }

    #[test]
    fn a_bad_span_is_an_error() {
        let wit = WitBatch {
            data: b"ab".to_vec(),
            spans: vec![NO_KEY, 0, 1, 5],
            timestamps: vec![1],
        };
        let err = records(&wit).err().unwrap();
        assert!(err.contains("1+5 is outside the batch's 2 bytes"), "{err}");
        let wit = WitBatch {
            data: Vec::new(),
            spans: vec![NO_KEY],
            timestamps: vec![1],
        };
        assert!(records(&wit).err().unwrap().contains("1 spans for 1"));
    }
}
