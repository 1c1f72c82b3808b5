//! The shape of grid-wrapper's resourceVersions: a per-process **epoch** in the high bits and a
//! counter below it (docs/SEMANTICS.md §6, "One counter").
//!
//! RVs used to be seeded from the wall clock alone. An edge board without a battery-backed clock
//! boots with a stale time, so a restarted process could hand out RVs that a client still held
//! from the previous one, and a resume would silently skip events. Now every process draws an
//! epoch (random, or the previous one + 1 when `--cache-dir` remembers it) and issues RVs only
//! in `[epoch << COUNTER_BITS, (epoch + 1) << COUNTER_BITS)`. Any RV of another epoch is below
//! this process's horizon or above its current RV, so it is answered `410 Expired` by the
//! ordinary rules: no special case in the watch path.
//!
//! RVs stay decimal integers below 2^63 (some clients parse them as int64).

/// Bits of the per-process counter: 2^40 ≈ 1.1 × 10^12 changes per process.
pub const COUNTER_BITS: u32 = 40;
/// Bits of the epoch: RVs stay below 2^63.
pub const EPOCH_BITS: u32 = 23;
/// Largest epoch.
pub const MAX_EPOCH: u64 = (1 << EPOCH_BITS) - 1;

/// The RV a process with `epoch` starts from (its first RV is one above).
pub fn seed(epoch: u64) -> u64 {
    (epoch.clamp(1, MAX_EPOCH)) << COUNTER_BITS
}

/// The epoch an RV belongs to.
pub fn epoch_of(rv: u64) -> u64 {
    rv >> COUNTER_BITS
}

/// The epoch after `previous` (wraps to 1 after [`MAX_EPOCH`]; 0 is never used).
pub fn next(previous: u64) -> u64 {
    if previous >= MAX_EPOCH {
        1
    } else {
        previous + 1
    }
}

/// An epoch from 64 random bits (never 0).
pub fn from_random(bits: u64) -> u64 {
    (bits % MAX_EPOCH) + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epochs_partition_the_rv_space_below_2_pow_63() {
        assert_eq!(epoch_of(seed(7)), 7);
        assert_eq!(epoch_of(seed(7) + (1 << COUNTER_BITS) - 1), 7);
        assert_eq!(epoch_of(seed(8)), 8);
        assert!(seed(MAX_EPOCH) + ((1 << COUNTER_BITS) - 1) < 1 << 63);
        assert_eq!(seed(0), seed(1), "epoch 0 is never used");
    }

    #[test]
    fn next_and_random_stay_in_range() {
        assert_eq!(next(1), 2);
        assert_eq!(next(MAX_EPOCH), 1);
        for bits in [0, 1, u64::MAX, MAX_EPOCH, MAX_EPOCH - 1] {
            let e = from_random(bits);
            assert!((1..=MAX_EPOCH).contains(&e), "{bits} -> {e}");
        }
    }
}
