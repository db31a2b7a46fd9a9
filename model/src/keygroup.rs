//! Key groups: the unit of keyed state and of hash partitioning.
//!
//! A key's group is `hash(key) % max_parallelism`, with a hash that every
//! process computes alike (xxh3, seed 0). Subtask `i` of `p` owns the
//! contiguous range of groups `[i * m / p, (i + 1) * m / p)` (with `m` the
//! max parallelism), as in Flink, so that rescaling moves whole ranges.

use std::ops::Range;

/// The default number of key groups (the upper bound on parallelism).
pub const DEFAULT_MAX_PARALLELISM: u32 = 128;

/// The largest max parallelism a job may ask for (Flink's upper bound,
/// 2^15): every structure sized by key groups or subtasks stays bounded,
/// whatever a manifest says.
pub const MAX_MAX_PARALLELISM: u32 = 1 << 15;

/// The key group of `key`.
///
/// ```
/// let g = weir_model::keygroup::key_group(b"hello", 128);
/// assert!(g < 128);
/// assert_eq!(g, weir_model::keygroup::key_group(b"hello", 128));
/// ```
#[inline]
pub fn key_group(key: &[u8], max_parallelism: u32) -> u32 {
    let hash = xxhash_rust::xxh3::xxh3_64(key);
    if max_parallelism.is_power_of_two() {
        // The same remainder, without a division (the default, 128).
        return (hash & u64::from(max_parallelism - 1)) as u32;
    }
    (hash % u64::from(max_parallelism)) as u32
}

/// The subtask (of `parallelism`) that owns `group`.
///
/// ```
/// use weir_model::keygroup::{key_groups_of, subtask_for_key_group};
/// for g in 0..128 {
///     let s = subtask_for_key_group(g, 128, 3);
///     assert!(key_groups_of(s, 128, 3).contains(&g));
/// }
/// ```
#[inline]
pub fn subtask_for_key_group(group: u32, max_parallelism: u32, parallelism: u32) -> u32 {
    let scaled = u64::from(group) * u64::from(parallelism);
    if max_parallelism.is_power_of_two() {
        return (scaled >> max_parallelism.trailing_zeros()) as u32;
    }
    (scaled / u64::from(max_parallelism)) as u32
}

/// The key groups that `subtask` (of `parallelism`) owns.
pub fn key_groups_of(subtask: u32, max_parallelism: u32, parallelism: u32) -> Range<u32> {
    let (m, p, i) = (
        u64::from(max_parallelism),
        u64::from(parallelism),
        u64::from(subtask),
    );
    let start = (i * m).div_ceil(p) as u32;
    let end = ((i + 1) * m).div_ceil(p) as u32;
    start..end
}

/// The subtask that owns `key` (with one subtask, no hash is taken: it
/// owns every key group).
pub fn subtask_for_key(key: &[u8], max_parallelism: u32, parallelism: u32) -> u32 {
    if parallelism == 1 {
        return 0;
    }
    subtask_for_key_group(
        key_group(key, max_parallelism),
        max_parallelism,
        parallelism,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A power-of-two max parallelism takes the same groups and owners
    /// without a division as any other by dividing.
    #[test]
    fn groups_and_owners_are_the_same_without_a_division() {
        for m in [1u32, 2, 64, 128, 4096, MAX_MAX_PARALLELISM] {
            for i in 0..2000u32 {
                let key = i.to_le_bytes();
                let hash = xxhash_rust::xxh3::xxh3_64(&key);
                let g = key_group(&key, m);
                assert_eq!(u64::from(g), hash % u64::from(m));
                for p in [1u32, 2, 3, 7].into_iter().filter(|&p| p <= m) {
                    assert_eq!(
                        u64::from(subtask_for_key_group(g, m, p)),
                        u64::from(g) * u64::from(p) / u64::from(m)
                    );
                }
            }
        }
    }

    #[test]
    fn a_key_goes_to_the_subtask_that_owns_its_key_group() {
        for parallelism in 1..=5 {
            for i in 0..1000u32 {
                let key = i.to_string();
                let owner = subtask_for_key(key.as_bytes(), 128, parallelism);
                assert!(
                    key_groups_of(owner, 128, parallelism)
                        .contains(&key_group(key.as_bytes(), 128))
                );
            }
        }
    }
}
