//! How many holds each thread of one client has on each lock, as its own grants and
//! releases count them.
//!
//! Redis keeps the same count in the lock's hash (`<client-id>:<thread>` → holds). The
//! two can only part when a reply goes missing: an acquire whose connection dropped
//! after it was sent may or may not have run, and one that timed out may still run
//! later. Only the thread itself adds holds under its owner field, so comparing the two
//! counts tells whether the thread has holds it does not know of, but not which request
//! took them:
//! - after a lost reply, Redis showing more holds than the thread counts means that *an*
//!   acquire of this thread ran unanswered: the one just sent, or an older one whose
//!   caller saw a timeout and gave up, whose hold has lived unrenewed since, with the TTL
//!   that older acquire gave it. Either way the hold is the thread's and the caller may
//!   take it, but not as a hold that began with its own request: its lease is dated by
//!   the key's TTL, read together with the count (see `lua/lock/adopt.lua`);
//! - at the thread's last release, Redis still showing holds means they were taken by
//!   acquires nobody knows of, and nothing would ever release them. A thread that keeps
//!   taking the lock again would even keep them alive forever, each reentrant acquire
//!   renewing the key's lease, and every other client would wait for good.
//!
//! Fewer holds in Redis than counted means holds were lost (expired, deleted); equal
//! counts say nothing about a timed-out acquire that may still arrive.

use std::collections::HashMap;

use parking_lot::Mutex;

/// Hold counts by owner field, then by lock name.
#[derive(Debug, Default)]
pub(crate) struct Levels {
    /// Nested rather than keyed by a pair, so that lookups borrow `&str` keys and only a
    /// first hold allocates.
    held: Mutex<HashMap<String, HashMap<String, u32>>>,
}

impl Levels {
    /// One more hold of `owner` on `name`.
    pub(crate) fn add(&self, name: &str, owner: &str) {
        let mut held = self.held.lock();
        let names = match held.get_mut(owner) {
            Some(names) => names,
            None => held.entry(owner.to_owned()).or_default(),
        };
        match names.get_mut(name) {
            Some(n) => *n = n.saturating_add(1),
            None => {
                names.insert(name.to_owned(), 1);
            }
        }
    }

    /// The holds of `owner` on `name` this client knows of.
    pub(crate) fn count(&self, name: &str, owner: &str) -> u32 {
        self.held
            .lock()
            .get(owner)
            .and_then(|names| names.get(name))
            .copied()
            .unwrap_or(0)
    }

    /// One hold of `owner` on `name` fewer (a release, whatever its outcome: a hold
    /// whose release failed expires with its lease and is no longer the guard's).
    pub(crate) fn remove(&self, name: &str, owner: &str) {
        self.update(owner, |names| {
            if let Some(n) = names.get_mut(name) {
                *n -= 1;
                if *n == 0 {
                    names.remove(name);
                }
            }
        });
    }

    /// Every hold of `owner` on `name` is gone (a release found none left).
    pub(crate) fn forget(&self, name: &str, owner: &str) {
        self.update(owner, |names| {
            names.remove(name);
        });
    }

    /// Every hold of every owner on `name` is gone (the key was deleted).
    pub(crate) fn forget_lock(&self, name: &str) {
        self.held.lock().retain(|_, names| {
            names.remove(name);
            !names.is_empty()
        });
    }

    /// Changes the names of `owner`, dropping the owner once it holds nothing, so that
    /// threads that come and go leave nothing behind.
    fn update(&self, owner: &str, f: impl FnOnce(&mut HashMap<String, u32>)) {
        let mut held = self.held.lock();
        if let Some(names) = held.get_mut(owner) {
            f(names);
            if names.is_empty() {
                held.remove(owner);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_go_up_and_down_and_leave_nothing_behind() {
        let levels = Levels::default();
        levels.add("a", "t1");
        levels.add("a", "t1");
        levels.add("b", "t1");
        levels.add("a", "t2");
        assert_eq!(levels.count("a", "t1"), 2);
        assert_eq!(levels.count("a", "t2"), 1);
        assert_eq!(levels.count("c", "t1"), 0);
        levels.remove("a", "t1");
        assert_eq!(levels.count("a", "t1"), 1);
        levels.forget("b", "t1");
        levels.forget_lock("a");
        assert_eq!(levels.count("a", "t1"), 0);
        assert_eq!(levels.count("a", "t2"), 0);
        // A release the client did not count (another client's hold) changes nothing.
        levels.remove("a", "t3");
        assert!(levels.held.lock().is_empty());
    }
}
