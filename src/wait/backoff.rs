//! Pacing for waiters that have no message to wait for: Redisson's `LockOptions`
//! back-off policies of the spin lock.

use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

/// How a spin-lock waiter paces its attempts (Redisson `LockOptions.BackOff`).
///
/// # Examples
///
/// ```no_run
/// use std::time::Duration;
/// use redmutex::BackOff;
///
/// let client = redmutex::Client::open("redis://127.0.0.1:6379")?;
/// let lock = client.get_spin_lock("nightly-job").with_backoff(BackOff::Exponential {
///     initial: Duration::from_millis(4),
///     max: Duration::from_millis(256),
///     multiplier: 2,
/// });
/// if let Some(guard) = lock.try_lock_for(Duration::from_secs(2))? {
///     guard.unlock()?;
/// }
/// # Ok::<(), redmutex::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum BackOff {
    /// Redisson's `ExponentialBackOff`: the first pause is `initial`; each next one is
    /// the last times `multiplier` plus a random 0..n ms after the n-th failure, at most
    /// `max`, and `max` from then on.
    Exponential {
        /// The first pause.
        initial: Duration,
        /// The longest pause.
        max: Duration,
        /// What each pause is multiplied by.
        multiplier: u32,
    },
    /// Redisson's `ConstantBackOff`: the same pause every time (it adds no jitter either,
    /// whatever its documentation says).
    Constant(Duration),
}

impl Default for BackOff {
    /// Redisson's default: `ExponentialBackOff` from 1 ms to 128 ms, doubling.
    fn default() -> Self {
        Self::Exponential {
            initial: Duration::from_millis(1),
            max: Duration::from_millis(128),
            multiplier: 2,
        }
    }
}

impl BackOff {
    /// The pauses of one acquisition, from the first on.
    pub(crate) fn pauses(self) -> Pauses {
        let next = match self {
            Self::Exponential { initial, .. } => initial,
            Self::Constant(pause) => pause,
        };
        Pauses {
            policy: self,
            next,
            failures: 0,
        }
    }
}

/// The pause sequence of one waiting acquisition under a [`BackOff`].
#[derive(Debug)]
pub(crate) struct Pauses {
    policy: BackOff,
    next: Duration,
    failures: u64,
}

impl Pauses {
    /// The pause before the next attempt.
    pub(crate) fn next_pause(&mut self) -> Duration {
        let pause = self.next;
        if let BackOff::Exponential {
            max, multiplier, ..
        } = self.policy
        {
            self.failures += 1;
            let jitter = Duration::from_millis(random_below(self.failures));
            self.next = self
                .next
                .saturating_mul(multiplier)
                .saturating_add(jitter)
                .min(max);
        }
        pause
    }
}

/// A number in `0..n`, from the standard library's per-process random hash keys; good
/// enough to spread waiters, which is all the jitter is for.
pub(crate) fn random_below(n: u64) -> u64 {
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(n);
    hasher.finish() % n.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exponential_pauses_grow_with_jitter_up_to_the_cap() {
        let mut p = BackOff::default().pauses();
        let ms: Vec<u128> = (0..12).map(|_| p.next_pause().as_millis()).collect();
        assert_eq!(ms[0], 1);
        // 1·2 + rand[0,1) = 2, then 2·2 + rand[0,2) ∈ {4, 5}.
        assert_eq!(ms[1], 2);
        assert!((4..=5).contains(&ms[2]), "{ms:?}");
        assert!(ms.windows(2).all(|w| w[0] <= w[1]), "{ms:?}");
        assert_eq!(ms[11], 128, "{ms:?}");
    }

    #[test]
    fn constant_pauses_stay() {
        let mut p = BackOff::Constant(Duration::from_millis(64)).pauses();
        assert!((0..5).all(|_| p.next_pause() == Duration::from_millis(64)));
    }
}
