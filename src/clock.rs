//! Time as the locks need it: monotonic deadlines for waits and leases, the wall clock
//! Redisson's scripts compare against, and the millisecond limits Redis accepts.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::error::{Error, Result};

/// How long an acquisition may wait, as its caller asked: every lock kind's (a fair
/// waiter's queue slot is this very duration) and, once started, the [`Wait`] its loop
/// keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Patience {
    /// One attempt with the kind's single-attempt script; never queues.
    Once,
    /// At most this long (also a fair waiter's queue slot).
    For(Duration),
    /// As long as it takes.
    Forever,
}

impl Patience {
    /// The deadline of a wait that starts now.
    pub(crate) fn start(self) -> Wait {
        match self {
            Self::Once => Wait::No,
            Self::For(d) => Wait::from_duration(d),
            Self::Forever => Wait::Forever,
        }
    }

    /// The longest wait asked for; `None` for one attempt or no limit.
    pub(crate) fn limit(self) -> Option<Duration> {
        match self {
            Self::For(d) => Some(d),
            Self::Once | Self::Forever => None,
        }
    }
}

/// A started wait: until when an acquisition may go on trying.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Wait {
    /// One attempt.
    No,
    /// Until this instant.
    Until(Instant),
    /// As long as it takes.
    Forever,
}

impl Wait {
    /// At most `wait` from now; a wait too long to represent is no limit.
    pub(crate) fn from_duration(wait: Duration) -> Self {
        match Instant::now().checked_add(wait) {
            Some(deadline) => Self::Until(deadline),
            None => Self::Forever,
        }
    }

    /// When to give up; `None` for never.
    pub(crate) fn deadline(self) -> Option<Instant> {
        match self {
            Self::No => Some(Instant::now()),
            Self::Until(d) => Some(d),
            Self::Forever => None,
        }
    }
}

/// The longest lease or wait accepted in milliseconds; Redis refuses expiry times that
/// overflow, and fair-lock scores must stay exact in a double.
pub(crate) const MAX_MS: u64 = 1 << 45;

/// A lease in milliseconds, or [`Error::InvalidArgument`] naming `lease` for a zero or
/// absurd one.
pub(crate) fn lease_ms(lease: Duration) -> Result<u64> {
    duration_ms("lease", lease)
}

/// A lease-like duration (`argument` names it in the error: `ttl`, `lease`) in whole
/// milliseconds: at least 1 ms, at most [`MAX_MS`].
pub(crate) fn duration_ms(argument: &'static str, d: Duration) -> Result<u64> {
    let ms = d.as_millis();
    if ms == 0 {
        return Err(Error::invalid(
            argument,
            format!("must be at least 1 ms, got {d:?}"),
        ));
    }
    if ms > u128::from(MAX_MS) {
        return Err(Error::invalid(
            argument,
            format!("must not exceed {MAX_MS} ms (about 1,100 years), got {d:?}"),
        ));
    }
    Ok(ms as u64)
}

/// A duration in milliseconds, capped at [`MAX_MS`].
pub(crate) fn capped_ms(d: Duration) -> u64 {
    d.as_millis().min(u128::from(MAX_MS)) as u64
}

/// The wall clock in epoch milliseconds, which Redisson's fair-lock and permit scripts
/// compare against the scores they store (`System.currentTimeMillis()` on the Java side).
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis().min(u128::from(u64::MAX)) as u64)
}

/// When a retry is due at the latest, `ms` from now; a negative value means never (only
/// a message can help).
pub(crate) fn retry_after(ms: i64) -> Option<Instant> {
    let ms = u64::try_from(ms).ok()?;
    Instant::now().checked_add(Duration::from_millis(ms))
}

/// The earlier of two optional instants; `None` is "never".
pub(crate) fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leases_are_checked() {
        assert!(lease_ms(Duration::ZERO).is_err());
        assert!(lease_ms(Duration::from_micros(999)).is_err());
        assert_eq!(lease_ms(Duration::from_secs(2)).unwrap(), 2000);
        assert!(lease_ms(Duration::MAX).is_err());
        assert_eq!(capped_ms(Duration::MAX), MAX_MS);
    }

    #[test]
    fn retry_bounds() {
        assert!(retry_after(-1).is_none());
        assert!(retry_after(5).is_some());
        let now = Instant::now();
        assert_eq!(earliest(None, Some(now)), Some(now));
        assert_eq!(earliest(Some(now), None), Some(now));
        assert_eq!(
            earliest(Some(now), Some(now + Duration::from_secs(1))),
            Some(now)
        );
        assert!(now_ms() > 1_600_000_000_000);
    }
}
