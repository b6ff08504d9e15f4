//! Randomness: unguessable bytes for lock tokens, and jitter for retry delays.

use std::time::Duration;

/// Fills `buf` from the operating system's random source, as Go's `crypto/rand` and
/// Python's `os.urandom` do.
///
/// # Errors
///
/// The OS source failed (practically never on Linux); the caller must not fall back to
/// a guessable value, since a token is what stops another client's release.
pub(crate) fn fill(buf: &mut [u8]) -> std::io::Result<()> {
    getrandom::fill(buf).map_err(|e| std::io::Error::other(format!("os random source: {e}")))
}

/// A random number for jitter. Prefers the OS source; if that fails, falls back to the
/// standard library's per-process hash keys (seeded from the OS once), which is plenty
/// for spreading retries apart.
pub(crate) fn number() -> u64 {
    getrandom::u64().unwrap_or_else(|_| {
        use std::hash::{BuildHasher, Hasher};
        std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish()
    })
}

/// A duration drawn uniformly from `[min, max)` at millisecond-or-finer resolution; `min`
/// when the range is empty.
pub(crate) fn between(min: Duration, max: Duration) -> Duration {
    let span = max.saturating_sub(min).as_micros();
    if span == 0 {
        return min;
    }
    let span = u64::try_from(span).unwrap_or(u64::MAX);
    min + Duration::from_micros(number() % span)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_stay_in_range_and_differ() {
        let (lo, hi) = (Duration::from_millis(50), Duration::from_millis(250));
        let draws: Vec<Duration> = (0..200).map(|_| between(lo, hi)).collect();
        assert!(draws.iter().all(|d| *d >= lo && *d < hi));
        assert!(draws.iter().any(|d| *d != draws[0]));
        assert_eq!(between(hi, lo), hi);
        let mut a = [0u8; 16];
        let mut b = [0u8; 16];
        fill(&mut a).unwrap();
        fill(&mut b).unwrap();
        assert_ne!(a, b);
    }
}
