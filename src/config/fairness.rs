//! The [`Fairness`] policy of [`Config`](crate::Config): whether a client's threads may
//! take a contended `RLock` straight back after releasing it.
//!
//! Redisson's `RLock` lets whoever asks first take a free lock. A thread that releases
//! and asks again at once is always first: the waiters it woke have not even heard the
//! unlock message yet, so one process can keep a lock for minutes while another starves.
//! parking_lot answers the same problem for in-process mutexes with *eventual fairness*:
//! barge for throughput, but hand the lock over directly often enough that nobody
//! starves. The distributed version here changes nothing a Redisson peer sees: after a
//! release that somebody heard (the release script reports how many subscribers its
//! `PUBLISH` reached), this client's next attempts on that lock first wait, as waiters
//! do, for the next unlock message or the end of a short window.
//!
//! The windows themselves are per-client state: `core/courtesy.rs`.

use std::time::Duration;

/// Whether a client's threads may take an `RLock` straight back after releasing it while
/// others wait for it; see [`ConfigBuilder::fairness`](crate::ConfigBuilder::fairness).
///
/// It applies to the locks whose waiters share one unlock channel and are woken one at a
/// time: [`RLock`](crate::RLock), the non-reentrant and the fenced lock. The fair lock
/// ([`RFairLock`](crate::RFairLock)) is strictly first-come first-served whatever this
/// says, and is the choice where order matters; the read-write lock and the spin lock
/// follow Redisson's rules unchanged.
///
/// # Examples
///
/// ```
/// use redmutex::{Config, Fairness};
///
/// // The default: a woken waiter gets the lock before a thread that released and asks again.
/// let eventual = Config::builder().address("redis://127.0.0.1:6379").build();
/// assert!(matches!(eventual.fairness(), Fairness::Eventual { .. }));
/// // Redisson's barging, for the last bit of throughput where starvation does not matter.
/// let barging = Config::builder()
///     .address("redis://127.0.0.1:6379")
///     .fairness(Fairness::Barging)
///     .build();
/// assert_eq!(barging.fairness(), Fairness::Barging);
/// # Ok::<(), redmutex::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Fairness {
    /// After a release that other waiters heard (a thread of this client waiting on the
    /// lock, or any other client subscribed to its channel), this client's next
    /// acquisitions of that lock, for at most `window`, first sleep on the lock's channel
    /// until the next unlock message, then try. The waiter the release woke thus takes
    /// the lock first, wherever it runs; if it does not come within `window`, the
    /// courteous thread tries anyway, so the lock never idles for longer. Among this
    /// client's threads, one that was already waiting is woken before the releaser.
    ///
    /// Single attempts ([`try_lock`](crate::Lock::try_lock)) never hold back. A release
    /// nobody heard (no waiter anywhere) opens no window: an uncontended lock pays one
    /// atomic load per acquisition for this.
    Eventual {
        /// How long an acquisition holds back at most after a release with waiters.
        window: Duration,
    },
    /// Redisson's behaviour: a free lock goes to whoever asks first, so a releasing
    /// thread that asks again usually wins before any woken waiter, and other processes
    /// can starve for as long as it keeps doing so.
    Barging,
}

impl Fairness {
    /// The default window: the time a woken waiter on a loaded machine needs to hear the
    /// message and run its acquire, with margin. It ends early when the unlock message
    /// after the waiter's hold arrives, so it costs idle time only when the woken waiter
    /// never comes.
    pub const DEFAULT_WINDOW: Duration = Duration::from_millis(10);

    /// The window of [`Eventual`](Self::Eventual), `None` for [`Barging`](Self::Barging).
    pub(crate) fn window(self) -> Option<Duration> {
        match self {
            Self::Eventual { window } if !window.is_zero() => Some(window),
            _ => None,
        }
    }
}

impl Default for Fairness {
    /// [`Eventual`](Self::Eventual) with [`DEFAULT_WINDOW`](Self::DEFAULT_WINDOW).
    fn default() -> Self {
        Self::Eventual {
            window: Self::DEFAULT_WINDOW,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn barging_and_a_zero_window_have_no_window() {
        assert_eq!(Fairness::Barging.window(), None);
        let zero = Fairness::Eventual {
            window: Duration::ZERO,
        };
        assert_eq!(zero.window(), None);
        assert_eq!(Fairness::default().window(), Some(Fairness::DEFAULT_WINDOW));
    }
}
