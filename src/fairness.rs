//! How a client shares a contended `RLock` with the lock's other waiters: the
//! [`Fairness`] policy of [`Config`](crate::Config), and the courtesy windows
//! ([`Courtesy`]) it opens after releases that had waiters.
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

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

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

/// The open courtesy windows of one client, by lock channel.
#[derive(Debug, Default)]
pub(crate) struct Courtesy {
    /// False when no window may be open: the uncontended acquire reads only this.
    /// Relaxed is enough either way: a stale `false` lets one attempt barge (the policy
    /// is eventual, and the next release opens the window again); a stale `true` costs
    /// one map lookup that finds nothing.
    any: AtomicBool,
    windows: Mutex<HashMap<String, Instant>>,
}

impl Courtesy {
    /// Opens (or extends) the window on `channel` until `until`.
    pub(crate) fn open(&self, channel: &str, until: Instant) {
        let mut windows = self.windows.lock();
        let now = Instant::now();
        // Drop windows that ended, so names never asked for again do not pile up.
        windows.retain(|_, end| *end > now);
        match windows.get_mut(channel) {
            Some(end) => *end = (*end).max(until),
            None => {
                windows.insert(channel.to_owned(), until);
            }
        }
        self.any.store(true, Ordering::Relaxed);
    }

    /// The end of the window open on `channel`, if one is.
    pub(crate) fn until(&self, channel: &str) -> Option<Instant> {
        if !self.any.load(Ordering::Relaxed) {
            return None;
        }
        let mut windows = self.windows.lock();
        let now = Instant::now();
        windows.retain(|_, end| *end > now);
        // Under the map lock, so an `open` cannot be overwritten by a stale `false`.
        self.any.store(!windows.is_empty(), Ordering::Relaxed);
        windows.get(channel).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_is_open_until_it_ends() {
        let c = Courtesy::default();
        assert_eq!(c.until("a"), None);
        let end = Instant::now() + Duration::from_secs(60);
        c.open("a", end);
        assert_eq!(c.until("a"), Some(end));
        assert_eq!(c.until("b"), None);
        c.open("a", Instant::now());
        assert_eq!(
            c.until("a"),
            Some(end),
            "a window is extended, never cut short"
        );
        let ended = Courtesy::default();
        ended.open("a", Instant::now());
        assert_eq!(ended.until("a"), None, "an ended window is no window");
        assert!(!ended.any.load(Ordering::Relaxed));
    }

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
