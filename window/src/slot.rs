//! A key's open slots as one stored value.

/// A window, a pane of sliding windows or a session of one key, with what
/// the window function keeps for it (an accumulator, or records).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slot {
    /// Its first instant, ms.
    pub start: i64,
    /// The first instant after it, ms.
    pub end: i64,
    /// The window function's bytes.
    pub contents: Vec<u8>,
}

/// A key's slots as one value: per slot its start and end (8 bytes each,
/// big-endian), the length of its contents (4 bytes) and the contents.
pub fn encode(slots: &[Slot]) -> Vec<u8> {
    let mut out = Vec::with_capacity(slots.iter().map(|s| 20 + s.contents.len()).sum::<usize>());
    for s in slots {
        out.extend_from_slice(&s.start.to_be_bytes());
        out.extend_from_slice(&s.end.to_be_bytes());
        out.extend_from_slice(&(s.contents.len() as u32).to_be_bytes());
        out.extend_from_slice(&s.contents);
    }
    out
}

/// The slots of [`encode`]; `None` if the bytes are not such a value.
pub fn decode(mut bytes: &[u8]) -> Option<Vec<Slot>> {
    let mut slots = Vec::new();
    while !bytes.is_empty() {
        let (head, rest) = bytes.split_at_checked(20)?;
        let start = i64::from_be_bytes(head[0..8].try_into().ok()?);
        let end = i64::from_be_bytes(head[8..16].try_into().ok()?);
        let len = u32::from_be_bytes(head[16..20].try_into().ok()?) as usize;
        let (contents, rest) = rest.split_at_checked(len)?;
        slots.push(Slot {
            start,
            end,
            contents: contents.to_vec(),
        });
        bytes = rest;
    }
    Some(slots)
}

/// Records kept as a process-window function's contents: each as its
/// length (4 bytes, big-endian) and its bytes.
pub fn append_record(contents: &mut Vec<u8>, record: &[u8]) {
    contents.extend_from_slice(&(record.len() as u32).to_be_bytes());
    contents.extend_from_slice(record);
}

/// The records of contents written by [`append_record`], in order; `None`
/// if the bytes are not such contents.
pub fn records(mut contents: &[u8]) -> Option<Vec<&[u8]>> {
    let mut out = Vec::new();
    while !contents.is_empty() {
        let (len, rest) = contents.split_at_checked(4)?;
        let len = u32::from_be_bytes(len.try_into().ok()?) as usize;
        let (record, rest) = rest.split_at_checked(len)?;
        out.push(record);
        contents = rest;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_and_records_round_trip() {
        let slots = vec![
            Slot {
                start: -5,
                end: 10,
                contents: b"abc".to_vec(),
            },
            Slot {
                start: i64::MAX - 1,
                end: i64::MAX,
                contents: Vec::new(),
            },
        ];
        assert_eq!(decode(&encode(&slots)), Some(slots));
        assert_eq!(decode(&[]), Some(Vec::new()));
        assert_eq!(decode(&[1, 2, 3]), None);
        let mut c = Vec::new();
        append_record(&mut c, b"one");
        append_record(&mut c, b"");
        append_record(&mut c, b"three");
        assert_eq!(
            records(&c),
            Some(vec![&b"one"[..], &b""[..], &b"three"[..]])
        );
        assert_eq!(records(&c[..c.len() - 1]), None);
    }
}
