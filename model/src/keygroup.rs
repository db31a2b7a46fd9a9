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
pub fn key_group(key: &[u8], max_parallelism: u32) -> u32 {
    (xxhash_rust::xxh3::xxh3_64(key) % u64::from(max_parallelism)) as u32
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
pub fn subtask_for_key_group(group: u32, max_parallelism: u32, parallelism: u32) -> u32 {
    ((u64::from(group) * u64::from(parallelism)) / u64::from(max_parallelism)) as u32
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
