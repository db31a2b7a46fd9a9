//! The contract's bulk shapes as the host builds and reads them: `packed`
//! (byte strings in one buffer, with their end offsets) and `batch` (records
//! in one buffer, with their spans and timestamps).

use bytes::Bytes;
use weir_model::Record;

use crate::types::{Batch, Packed};

/// A batch's key offset for a record without a key.
pub const NO_KEY: u32 = u32::MAX;

/// A batch's timestamp for a record without one.
pub const NO_TIMESTAMP: i64 = i64::MIN;

/// Records as one batch: their bytes copied into one buffer.
pub fn pack_batch(records: &[Record]) -> Batch {
    let size = records
        .iter()
        .map(|r| r.value.len() + r.key.as_ref().map_or(0, Bytes::len))
        .sum();
    let mut data = Vec::with_capacity(size);
    let mut spans = Vec::with_capacity(records.len() * 4);
    let mut timestamps = Vec::with_capacity(records.len());
    for r in records {
        match &r.key {
            Some(k) => {
                spans.extend([data.len() as u32, k.len() as u32]);
                data.extend_from_slice(k);
            }
            None => spans.extend([NO_KEY, 0]),
        }
        spans.extend([data.len() as u32, r.value.len() as u32]);
        data.extend_from_slice(&r.value);
        timestamps.push(r.timestamp.unwrap_or(NO_TIMESTAMP));
    }
    Batch {
        data,
        spans,
        timestamps,
    }
}

/// Append a batch's records to `out`, as slices of its one buffer (no copy
/// and no allocation per record). Spans outside the data, or lists of the
/// wrong lengths, are the guest's bug: the error says which.
pub fn unpack_batch(batch: Batch, out: &mut Vec<Record>) -> Result<(), String> {
    let n = batch.timestamps.len();
    if batch.spans.len() != n * 4 {
        return Err(format!(
            "a batch has {} spans for {n} timestamps (4 per record)",
            batch.spans.len()
        ));
    }
    let data = Bytes::from(batch.data);
    let slice = |offset: u32, len: u32| -> Result<Bytes, String> {
        let (start, len) = (offset as usize, len as usize);
        if start.checked_add(len).is_none_or(|end| end > data.len()) {
            return Err(format!(
                "a record's span {start}+{len} is outside the batch's {} bytes",
                data.len()
            ));
        }
        Ok(data.slice(start..start + len))
    };
    out.reserve(n);
    for (span, &timestamp) in batch.spans.chunks_exact(4).zip(&batch.timestamps) {
        let key = match span[0] {
            NO_KEY => None,
            offset => Some(slice(offset, span[1])?),
        };
        out.push(Record {
            key,
            value: slice(span[2], span[3])?,
            timestamp: (timestamp != NO_TIMESTAMP).then_some(timestamp),
        });
    }
    Ok(())
}

/// Byte strings as one `packed`.
pub fn pack<T: AsRef<[u8]>>(strings: impl IntoIterator<Item = T>) -> Packed {
    let mut data = Vec::new();
    let mut ends = Vec::new();
    for s in strings {
        data.extend_from_slice(s.as_ref());
        ends.push(data.len() as u32);
    }
    Packed { data, ends }
}

/// The strings of a `packed`, borrowed; an error names an end outside the
/// data (or before the previous end): a guest's bug.
pub fn strings(p: &Packed) -> Result<Vec<&[u8]>, String> {
    let mut out = Vec::with_capacity(p.ends.len());
    let mut from = 0usize;
    for &end in &p.ends {
        let bytes = p.data.get(from..end as usize).ok_or_else(|| {
            format!(
                "a packed string ends at {end}, outside its {} bytes (or before the previous)",
                p.data.len()
            )
        })?;
        out.push(bytes);
        from = end as usize;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_round_trip_records_with_and_without_keys_and_timestamps() {
        let records = vec![
            Record {
                key: Some(Bytes::from_static(b"k")),
                value: Bytes::from_static(b"{\"a\":1}"),
                timestamp: Some(-5),
            },
            Record::value(Bytes::new()),
            Record {
                key: Some(Bytes::new()),
                value: Bytes::from_static(b"2"),
                timestamp: Some(0),
            },
        ];
        let mut out = Vec::new();
        unpack_batch(pack_batch(&records), &mut out).unwrap();
        assert_eq!(out, records);
    }

    #[test]
    fn a_span_outside_the_data_or_a_short_list_is_an_error() {
        let batch = |spans: Vec<u32>, timestamps: Vec<i64>| Batch {
            data: b"abc".to_vec(),
            spans,
            timestamps,
        };
        let mut out = Vec::new();
        let err = unpack_batch(batch(vec![NO_KEY, 0, 2, 2], vec![1]), &mut out).unwrap_err();
        assert!(err.contains("2+2 is outside the batch's 3 bytes"), "{err}");
        let err = unpack_batch(batch(vec![u32::MAX - 1, 5, 0, 1], vec![1]), &mut out).unwrap_err();
        assert!(err.contains("outside"), "{err}");
        let err = unpack_batch(batch(vec![NO_KEY, 0, 0], vec![1]), &mut out).unwrap_err();
        assert!(err.contains("3 spans for 1 timestamps"), "{err}");
        assert!(out.is_empty());
        unpack_batch(batch(vec![0, 1, 1, 2], vec![NO_TIMESTAMP]), &mut out).unwrap();
        assert_eq!(out[0].key.as_deref(), Some(&b"a"[..]));
        assert_eq!(&out[0].value[..], b"bc");
        assert_eq!(out[0].timestamp, None);
    }
}
