//! The courtesy windows a client opens after releases that had waiters, under
//! [`Fairness::Eventual`](crate::Fairness::Eventual): while one is open on a lock's
//! channel, this client's next attempts on that lock first wait for the next unlock
//! message (the policy and its reasons are in `config/fairness.rs`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use parking_lot::Mutex;

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
    use std::time::Duration;

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
}
