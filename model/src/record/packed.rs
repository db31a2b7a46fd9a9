//! A batch of records kept as the contract's `batch` is: one buffer with
//! every record's key and value, a span list and a timestamp list. Records
//! move through a task's chain this way — from a source into a Wasm
//! operator, from its output into the next operator or a sink — without a
//! reference-counted slice per record, and cross the Wasm boundary without
//! being packed or unpacked.

use bytes::Bytes;

use super::Record;

/// A batch's key offset for a record without a key.
pub const NO_KEY: u32 = u32::MAX;

/// A batch's timestamp for a record without one.
pub const NO_TIMESTAMP: i64 = i64::MIN;

/// Records in one buffer: per record four spans (key offset or
/// [`NO_KEY`], key length, value offset, value length) and a timestamp
/// ([`NO_TIMESTAMP`] for none). Every span is inside the buffer (checked
/// when it is made from parts).
///
/// ```
/// use weir_model::PackedRecords;
/// use weir_model::Record;
/// let records = vec![Record::value(&b"1"[..]), Record::value(&b"22"[..])];
/// let packed = PackedRecords::from_records(&records).unwrap();
/// assert_eq!(packed.len(), 2);
/// assert_eq!(packed.get(1).value, b"22");
/// assert_eq!(packed.into_records(), records);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PackedRecords {
    data: Vec<u8>,
    spans: Vec<u32>,
    timestamps: Vec<i64>,
    /// The bytes of the records' keys and values.
    bytes: u64,
}

/// One record of a [`PackedRecords`], borrowed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordRef<'a> {
    /// Its key, on a keyed stream.
    pub key: Option<&'a [u8]>,
    /// Its value.
    pub value: &'a [u8],
    /// Its event time, when known.
    pub timestamp: Option<i64>,
}

impl RecordRef<'_> {
    /// The record as one of its own, its bytes copied.
    pub fn to_record(&self) -> Record {
        Record {
            key: self.key.map(Bytes::copy_from_slice),
            value: Bytes::copy_from_slice(self.value),
            timestamp: self.timestamp,
        }
    }
}

impl PackedRecords {
    /// A batch from its parts, as a guest or a source made them; an error
    /// names a span outside the data or lists of the wrong lengths.
    pub fn from_parts(
        data: Vec<u8>,
        spans: Vec<u32>,
        timestamps: Vec<i64>,
    ) -> Result<PackedRecords, String> {
        let n = timestamps.len();
        if spans.len() != n * 4 {
            return Err(format!(
                "a batch has {} spans for {n} timestamps (4 per record)",
                spans.len()
            ));
        }
        let within = |offset: u32, len: u32| {
            let (start, len) = (offset as usize, len as usize);
            if start.checked_add(len).is_none_or(|end| end > data.len()) {
                return Err(format!(
                    "a record's span {start}+{len} is outside the batch's {} bytes",
                    data.len()
                ));
            }
            Ok(len as u64)
        };
        let mut bytes = 0;
        for span in spans.chunks_exact(4) {
            if span[0] != NO_KEY {
                bytes += within(span[0], span[1])?;
            }
            bytes += within(span[2], span[3])?;
        }
        Ok(PackedRecords {
            data,
            spans,
            timestamps,
            bytes,
        })
    }

    /// A batch from parts made right: every span inside `data`, `bytes`
    /// the sum of the spans' lengths.
    pub(super) fn from_valid_parts(
        data: Vec<u8>,
        spans: Vec<u32>,
        timestamps: Vec<i64>,
        bytes: u64,
    ) -> PackedRecords {
        debug_assert_eq!(spans.len(), timestamps.len() * 4);
        PackedRecords {
            data,
            spans,
            timestamps,
            bytes,
        }
    }

    /// Its parts: the data, the spans and the timestamps.
    pub fn into_parts(self) -> (Vec<u8>, Vec<u32>, Vec<i64>) {
        (self.data, self.spans, self.timestamps)
    }

    /// Records packed: their bytes copied into one buffer; an error when
    /// they are more than the 4 GiB that spans address.
    pub fn from_records(records: &[Record]) -> Result<PackedRecords, String> {
        let size: usize = records
            .iter()
            .map(|r| r.value.len() + r.key.as_ref().map_or(0, Bytes::len))
            .sum();
        if size >= u32::MAX as usize {
            return Err(format!(
                "{} records of {size} bytes are more than a batch holds (4 GiB)",
                records.len()
            ));
        }
        let mut p = PackedRecords {
            data: Vec::with_capacity(size),
            spans: Vec::with_capacity(records.len() * 4),
            timestamps: Vec::with_capacity(records.len()),
            bytes: size as u64,
        };
        for r in records {
            match &r.key {
                Some(k) => {
                    p.spans.extend([p.data.len() as u32, k.len() as u32]);
                    p.data.extend_from_slice(k);
                }
                None => p.spans.extend([NO_KEY, 0]),
            }
            p.spans.extend([p.data.len() as u32, r.value.len() as u32]);
            p.data.extend_from_slice(&r.value);
            p.timestamps.push(r.timestamp.unwrap_or(NO_TIMESTAMP));
        }
        Ok(p)
    }

    /// Whether [`PackedRecords::append`] of `other` fits: together they are
    /// within the 4 GiB that spans address (or it has none).
    pub fn fits(&self, other: &PackedRecords) -> bool {
        self.is_empty() || self.data.len() + other.data.len() < u32::MAX as usize
    }

    /// Add `other`'s records after its own (moved when it has none); an
    /// error when the two together pass the 4 GiB that spans address.
    pub fn append(&mut self, other: PackedRecords) -> Result<(), String> {
        if self.is_empty() {
            *self = other;
            return Ok(());
        }
        if !self.fits(&other) {
            return Err(format!(
                "a batch of {} bytes and one of {} are more than a batch holds (4 GiB)",
                self.data.len(),
                other.data.len()
            ));
        }
        let shift = self.data.len() as u32;
        self.data.extend_from_slice(&other.data);
        self.spans.reserve(other.spans.len());
        for span in other.spans.chunks_exact(4) {
            let key = match span[0] {
                NO_KEY => NO_KEY,
                offset => offset + shift,
            };
            self.spans.extend([key, span[1], span[2] + shift, span[3]]);
        }
        self.timestamps.extend(other.timestamps);
        self.bytes += other.bytes;
        Ok(())
    }

    /// Add a record after its own, its bytes copied; an error when the
    /// batch would pass the 4 GiB that spans address.
    pub fn push(&mut self, record: RecordRef<'_>) -> Result<(), String> {
        let size = record.key.map_or(0, <[u8]>::len) + record.value.len();
        if self.data.len() + size >= u32::MAX as usize {
            return Err(format!(
                "a record of {size} bytes does not fit in a batch of {} (4 GiB at most)",
                self.data.len()
            ));
        }
        match record.key {
            Some(k) => {
                self.spans.extend([self.data.len() as u32, k.len() as u32]);
                self.data.extend_from_slice(k);
            }
            None => self.spans.extend([NO_KEY, 0]),
        }
        self.spans
            .extend([self.data.len() as u32, record.value.len() as u32]);
        self.data.extend_from_slice(record.value);
        self.timestamps
            .push(record.timestamp.unwrap_or(NO_TIMESTAMP));
        self.bytes += size as u64;
        Ok(())
    }

    /// How many records it holds.
    pub fn len(&self) -> usize {
        self.timestamps.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.timestamps.is_empty()
    }

    /// The bytes of its records' keys and values.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Record `i`.
    ///
    /// # Panics
    ///
    /// When `i` is not below [`PackedRecords::len`].
    pub fn get(&self, i: usize) -> RecordRef<'_> {
        self.record(&self.spans[i * 4..i * 4 + 4], self.timestamps[i])
    }

    /// The record of `span` (its four spans) and timestamp `t`.
    #[inline]
    fn record(&self, span: &[u32], t: i64) -> RecordRef<'_> {
        let slice =
            |offset: u32, len: u32| &self.data[offset as usize..offset as usize + len as usize];
        RecordRef {
            key: (span[0] != NO_KEY).then(|| slice(span[0], span[1])),
            value: slice(span[2], span[3]),
            timestamp: timestamp(t),
        }
    }

    /// Its records, in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = RecordRef<'_>> + '_ {
        self.spans
            .chunks_exact(4)
            .zip(&self.timestamps)
            .map(|(span, &t)| self.record(span, t))
    }

    /// Give each record the timestamp `of` reads from its value.
    pub fn assign_timestamps<E>(
        &mut self,
        mut of: impl FnMut(&[u8]) -> Result<i64, E>,
    ) -> Result<(), E> {
        for (span, t) in self.spans.chunks_exact(4).zip(&mut self.timestamps) {
            let start = span[2] as usize;
            *t = of(&self.data[start..start + span[3] as usize])?;
        }
        Ok(())
    }

    /// Its records as records of their own: slices of its buffer.
    pub fn into_records(self) -> Vec<Record> {
        let data = Bytes::from(self.data);
        let slice =
            |offset: u32, len: u32| data.slice(offset as usize..offset as usize + len as usize);
        self.spans
            .chunks_exact(4)
            .zip(self.timestamps)
            .map(|(span, t)| Record {
                key: (span[0] != NO_KEY).then(|| slice(span[0], span[1])),
                value: slice(span[2], span[3]),
                timestamp: timestamp(t),
            })
            .collect()
    }
}

/// A timestamp as kept in a batch ([`NO_TIMESTAMP`] for none) as a
/// record's.
pub(crate) fn timestamp(t: i64) -> Option<i64> {
    (t != NO_TIMESTAMP).then_some(t)
}

/// A batch of records on its way through a task: records of their own, or
/// packed in one buffer. Two batches are equal when they hold the same
/// records, however each keeps them.
#[derive(Clone, Debug)]
pub enum Records {
    /// Records of their own (slices of shared buffers).
    List(Vec<Record>),
    /// Records in one buffer.
    Packed(PackedRecords),
}

impl Default for Records {
    fn default() -> Self {
        Records::List(Vec::new())
    }
}

impl From<Vec<Record>> for Records {
    fn from(records: Vec<Record>) -> Self {
        Records::List(records)
    }
}

impl From<PackedRecords> for Records {
    fn from(records: PackedRecords) -> Self {
        Records::Packed(records)
    }
}

impl PartialEq for Records {
    fn eq(&self, other: &Records) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Records {
    /// Record `i`.
    ///
    /// # Panics
    ///
    /// When `i` is not below [`Records::len`].
    pub fn get(&self, i: usize) -> RecordRef<'_> {
        match self {
            Records::List(l) => {
                let r = &l[i];
                RecordRef {
                    key: r.key.as_deref(),
                    value: &r.value,
                    timestamp: r.timestamp,
                }
            }
            Records::Packed(p) => p.get(i),
        }
    }

    /// Its records, in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = RecordRef<'_>> + '_ {
        (0..self.len()).map(|i| self.get(i))
    }

    /// How many records it holds.
    pub fn len(&self) -> usize {
        match self {
            Records::List(l) => l.len(),
            Records::Packed(p) => p.len(),
        }
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes of its records' keys and values.
    pub fn bytes(&self) -> u64 {
        match self {
            Records::List(l) => l
                .iter()
                .map(|r| (r.value.len() + r.key.as_ref().map_or(0, Bytes::len)) as u64)
                .sum(),
            Records::Packed(p) => p.bytes(),
        }
    }

    /// Its records as records of their own.
    pub fn into_list(self) -> Vec<Record> {
        match self {
            Records::List(l) => l,
            Records::Packed(p) => p.into_records(),
        }
    }

    /// Its records in one buffer; an error when a list's records are more
    /// than one holds (4 GiB).
    pub fn into_packed(self) -> Result<PackedRecords, String> {
        match self {
            Records::List(l) => PackedRecords::from_records(&l),
            Records::Packed(p) => Ok(p),
        }
    }

    /// The records at `which`, in that order, kept as its own are: shared
    /// slices of a list's records, or a packed batch's bytes copied into a
    /// buffer of their own (records of their own past the 4 GiB a batch
    /// holds).
    ///
    /// # Panics
    ///
    /// When an index is not below [`Records::len`].
    pub fn pick(&self, which: impl IntoIterator<Item = usize>) -> Records {
        match self {
            Records::List(l) => Records::List(which.into_iter().map(|i| l[i].clone()).collect()),
            Records::Packed(p) => {
                let which: Vec<usize> = which.into_iter().collect();
                let mut out = PackedRecords::default();
                for &i in &which {
                    if out.push(p.get(i)).is_err() {
                        // Records that share bytes in their batch (a guest
                        // may give several the same span) can be more than
                        // a batch holds once each has its own.
                        return Records::List(
                            which.iter().map(|&i| p.get(i).to_record()).collect(),
                        );
                    }
                }
                Records::Packed(out)
            }
        }
    }

    /// Add `other`'s records after its own: two packed batches stay one
    /// (when together they fit in one), anything else becomes a list.
    pub fn append(&mut self, other: Records) {
        if other.is_empty() {
            return;
        }
        if self.is_empty() {
            *self = other;
            return;
        }
        if let (Records::Packed(mine), Records::Packed(theirs)) = (&mut *self, &other)
            && mine.fits(theirs)
        {
            let Records::Packed(theirs) = other else {
                unreachable!("matched as packed")
            };
            mine.append(theirs).expect("the two fit in one batch");
            return;
        }
        let mut list = std::mem::take(self).into_list();
        list.extend(other.into_list());
        *self = Records::List(list);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn records() -> Vec<Record> {
        vec![
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
        ]
    }

    #[test]
    fn records_round_trip_with_and_without_keys_and_timestamps() {
        let packed = PackedRecords::from_records(&records()).unwrap();
        assert_eq!(packed.bytes(), 9);
        assert_eq!(
            packed.get(0),
            RecordRef {
                key: Some(b"k"),
                value: b"{\"a\":1}",
                timestamp: Some(-5)
            }
        );
        assert_eq!(packed.get(1).key, None);
        let (data, spans, timestamps) = packed.clone().into_parts();
        let again = PackedRecords::from_parts(data, spans, timestamps).unwrap();
        assert_eq!(again, packed);
        assert_eq!(again.into_records(), records());
    }

    #[test]
    fn a_record_buffer_packs_what_it_would_hand_out() {
        let fill = |b: &mut crate::RecordBuffer| {
            for r in records() {
                b.push(r.key.clone(), r.timestamp, |v| {
                    v.extend_from_slice(&r.value)
                });
                // A record that fails to write leaves nothing behind, its
                // key neither.
                let failed = b.try_push(Some(Bytes::from_static(b"no")), Some(9), |v| {
                    v.extend_from_slice(b"half");
                    Err(())
                });
                assert!(failed.is_err());
            }
        };
        let (mut a, mut b) = (
            crate::RecordBuffer::default(),
            crate::RecordBuffer::default(),
        );
        fill(&mut a);
        fill(&mut b);
        let Records::Packed(packed) = a.finish_records() else {
            panic!("a small batch is packed")
        };
        let listed = PackedRecords::from_records(&b.finish()).unwrap();
        assert!(packed.iter().eq(listed.iter()));
        assert_eq!(packed.bytes(), listed.bytes());
        assert_eq!(packed.into_records(), records());
    }

    #[test]
    fn records_pushed_one_by_one_are_the_same_batch_however_kept() {
        let mut p = PackedRecords::default();
        let list = Records::List(records());
        for r in list.iter() {
            p.push(r).unwrap();
        }
        assert_eq!(p, PackedRecords::from_records(&records()).unwrap());
        let packed = Records::Packed(p);
        assert_eq!(packed, list);
        assert_ne!(packed, Records::List(records()[1..].to_vec()));
    }

    #[test]
    fn records_past_four_gib_are_refused_not_wrapped() {
        // One GiB of zeros (not touched: no memory is used), shared by
        // four records: together past what a span addresses.
        let big = Bytes::from(vec![0u8; 1 << 30]);
        let list: Vec<Record> = (0..4).map(|_| Record::value(big.clone())).collect();
        let err = PackedRecords::from_records(&list).unwrap_err();
        assert!(err.contains("4 GiB"), "{err}");
        assert!(Records::List(list).into_packed().is_err());
    }

    #[test]
    fn appended_batches_keep_their_records_in_order() {
        let mut a = PackedRecords::default();
        a.append(PackedRecords::from_records(&records()).unwrap())
            .unwrap();
        a.append(PackedRecords::from_records(&records()[1..]).unwrap())
            .unwrap();
        a.append(PackedRecords::default()).unwrap();
        let mut want = records();
        want.extend_from_slice(&records()[1..]);
        assert_eq!(a.bytes(), 9 + 1);
        assert_eq!(a.into_records(), want);
    }

    #[test]
    fn picked_and_appended_records_are_the_same_however_kept() {
        let list = Records::List(records());
        let packed = Records::Packed(PackedRecords::from_records(&records()).unwrap());
        for all in [&list, &packed] {
            let picked = all.pick([2, 0]);
            assert_eq!(
                picked,
                Records::List(vec![records()[2].clone(), records()[0].clone()])
            );
            assert_eq!(
                matches!(picked, Records::Packed(_)),
                matches!(all, Records::Packed(_))
            );
            assert!(all.pick([]).is_empty());
        }
        // Packed after packed stays one batch; a list anywhere makes a list.
        let mut a = packed.pick([0]);
        a.append(packed.pick([1, 2]));
        assert!(matches!(a, Records::Packed(_)));
        assert_eq!(a, list);
        let mut b = packed.pick([0]);
        b.append(list.pick([1]));
        b.append(Records::default());
        b.append(packed.pick([2]));
        assert!(matches!(b, Records::List(_)));
        assert_eq!(b, list);
        let mut c = Records::default();
        c.append(packed.clone());
        assert!(matches!(c, Records::Packed(_)));
        assert_eq!(c, list);
    }

    #[test]
    fn a_span_outside_the_data_or_a_short_list_is_an_error() {
        let parts =
            |spans: Vec<u32>, ts: Vec<i64>| PackedRecords::from_parts(b"abc".to_vec(), spans, ts);
        let err = parts(vec![NO_KEY, 0, 2, 2], vec![1]).unwrap_err();
        assert!(err.contains("2+2 is outside the batch's 3 bytes"), "{err}");
        let err = parts(vec![u32::MAX - 1, 5, 0, 1], vec![1]).unwrap_err();
        assert!(err.contains("outside"), "{err}");
        let err = parts(vec![NO_KEY, 0, 0], vec![1]).unwrap_err();
        assert!(err.contains("3 spans for 1 timestamps"), "{err}");
        let mut p = parts(vec![0, 1, 1, 2], vec![NO_TIMESTAMP]).unwrap();
        assert_eq!(p.get(0).key, Some(&b"a"[..]));
        assert_eq!(p.get(0).value, b"bc");
        assert_eq!(p.get(0).timestamp, None);
        p.assign_timestamps(|v| Ok::<_, ()>(v.len() as i64))
            .unwrap();
        assert_eq!(p.get(0).timestamp, Some(2));
    }
}
