//! How a built-in aggregate's accumulator is stored in keyed state: the
//! runtime writes and reads it (running and windowed aggregates), `weir
//! state` and the REST state read show it as the value it stands for.
//!
//! Seventeen bytes: a tag and two 8-byte big-endian fields — count: 0, n;
//! sum, min, max: 1 no value yet, 2 a whole number, 3 a float; avg: 4,
//! the sum's bits and the count.

use serde_json::{Value, json};

/// An accumulator as stored.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum StoredAccumulator {
    /// A count.
    Count(u64),
    /// A sum, minimum or maximum without a value yet.
    Empty,
    /// A sum, minimum or maximum, a whole number.
    Int(i64),
    /// A sum, minimum or maximum, a float.
    Float(f64),
    /// An average's sum and count.
    Avg(f64, u64),
}

impl StoredAccumulator {
    /// The length of every stored accumulator.
    pub const LEN: usize = 17;

    /// Append its bytes to `out`.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        let (tag, a, b): (u8, u64, u64) = match *self {
            StoredAccumulator::Count(n) => (0, n, 0),
            StoredAccumulator::Empty => (1, 0, 0),
            StoredAccumulator::Int(i) => (2, i as u64, 0),
            StoredAccumulator::Float(f) => (3, f.to_bits(), 0),
            StoredAccumulator::Avg(s, n) => (4, s.to_bits(), n),
        };
        out.push(tag);
        out.extend_from_slice(&a.to_be_bytes());
        out.extend_from_slice(&b.to_be_bytes());
    }

    /// Read one back (`None`: the bytes are not one).
    pub fn decode(bytes: &[u8]) -> Option<StoredAccumulator> {
        if bytes.len() != Self::LEN {
            return None;
        }
        let a = u64::from_be_bytes(bytes[1..9].try_into().ok()?);
        let b = u64::from_be_bytes(bytes[9..17].try_into().ok()?);
        Some(match bytes[0] {
            0 => StoredAccumulator::Count(a),
            1 => StoredAccumulator::Empty,
            2 => StoredAccumulator::Int(a as i64),
            3 => StoredAccumulator::Float(f64::from_bits(a)),
            4 => StoredAccumulator::Avg(f64::from_bits(a), b),
            _ => return None,
        })
    }

    /// The value it stands for, as JSON (an average with its sum and
    /// count).
    pub fn to_json(&self) -> Value {
        match *self {
            StoredAccumulator::Count(n) => json!(n),
            StoredAccumulator::Empty | StoredAccumulator::Avg(_, 0) => Value::Null,
            StoredAccumulator::Int(i) => json!(i),
            StoredAccumulator::Float(f) => json!(f),
            StoredAccumulator::Avg(s, n) => {
                json!({"avg": s / n as f64, "sum": s, "count": n})
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_accumulator_reads_back_as_written() {
        for a in [
            StoredAccumulator::Count(7),
            StoredAccumulator::Empty,
            StoredAccumulator::Int(-3),
            StoredAccumulator::Float(2.5),
            StoredAccumulator::Avg(9.0, 4),
        ] {
            let mut bytes = Vec::new();
            a.encode_into(&mut bytes);
            assert_eq!(bytes.len(), StoredAccumulator::LEN);
            assert_eq!(StoredAccumulator::decode(&bytes), Some(a));
        }
        assert_eq!(StoredAccumulator::decode(&[5; 17]), None);
        assert_eq!(StoredAccumulator::decode(&[0; 16]), None);
        assert_eq!(
            StoredAccumulator::Avg(9.0, 4).to_json(),
            json!({"avg": 2.25, "sum": 9.0, "count": 4})
        );
    }
}
