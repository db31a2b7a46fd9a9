//! The contract's bulk shapes as the host builds and reads them: `packed`
//! (byte strings in one buffer, with their end offsets) and `batch` (records
//! in one buffer, with their spans and timestamps).

use weir_model::{PackedRecords, Record};

use crate::types::{Batch, Packed};

pub use weir_model::record::packed::{NO_KEY, NO_TIMESTAMP};

/// A packed batch as the contract's `batch` (its parts moved, not copied).
pub fn to_batch(records: PackedRecords) -> Batch {
    let (data, spans, timestamps) = records.into_parts();
    Batch {
        data,
        spans,
        timestamps,
    }
}

/// The contract's `batch` as a packed batch (its parts moved, not copied).
/// Spans outside the data, or lists of the wrong lengths, are the guest's
/// bug: the error says which.
pub fn from_batch(batch: Batch) -> Result<PackedRecords, String> {
    PackedRecords::from_parts(batch.data, batch.spans, batch.timestamps)
}

/// Append a batch's records to `out`, as slices of its one buffer (no copy
/// and no allocation per record). Spans outside the data, or lists of the
/// wrong lengths, are the guest's bug: the error says which.
pub fn unpack_batch(batch: Batch, out: &mut Vec<Record>) -> Result<(), String> {
    out.extend(from_batch(batch)?.into_records());
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
    fn a_batch_unpacks_whole_or_not_at_all() {
        let records = vec![Record::value(&b"1"[..]), Record::value(&b"22"[..])];
        let mut out = Vec::new();
        unpack_batch(
            to_batch(PackedRecords::from_records(&records).unwrap()),
            &mut out,
        )
        .unwrap();
        assert_eq!(out, records);
        // The second record's span is outside the data: nothing is added.
        let bad = Batch {
            data: b"abc".to_vec(),
            spans: vec![NO_KEY, 0, 0, 1, NO_KEY, 0, 2, 2],
            timestamps: vec![NO_TIMESTAMP, NO_TIMESTAMP],
        };
        let err = unpack_batch(bad, &mut out).unwrap_err();
        assert!(err.contains("2+2 is outside the batch's 3 bytes"), "{err}");
        assert_eq!(out, records);
    }
}
