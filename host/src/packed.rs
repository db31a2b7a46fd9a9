//! The contract's `packed` (byte strings in one buffer, with their end
//! offsets), as the host builds and reads it.

use crate::types::Packed;

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
