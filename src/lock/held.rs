//! Which token locks the current thread holds, so that a second acquisition of one is
//! refused instead of waiting for the thread itself.
//!
//! Token locks are not reentrant, on the wire as in go-redsync and redis-py: a holder
//! that asks again meets its own key and waits until it expires. The guards of a token
//! lock are not `Send`, so a hold is taken and released on one thread, and a
//! thread-local set knows exactly what this thread holds, without a lock or a round trip.

use std::cell::RefCell;
use std::collections::HashSet;
use std::marker::PhantomData;

thread_local! {
    /// `(holder, key)`: the client id (or the member ids of a quorum lock) and the key.
    static HELD: RefCell<HashSet<(String, String)>> = RefCell::new(HashSet::new());
}

/// This thread's claim on one lock, given up when dropped (on this thread: it is not
/// `Send`).
#[derive(Debug)]
pub(crate) struct Claim {
    entry: Option<(String, String)>,
    _not_send: PhantomData<std::sync::MutexGuard<'static, ()>>,
}

/// Claims lock `key` of `holder` for the current thread; `None` when it already holds
/// it.
pub(crate) fn claim(holder: &str, key: &str) -> Option<Claim> {
    let entry = (holder.to_owned(), key.to_owned());
    let fresh = HELD
        .try_with(|held| held.borrow_mut().insert(entry.clone()))
        // Only while the thread is being torn down: nothing can be held any more.
        .unwrap_or(true);
    // `then`, not `then_some`: a refused claim must never exist, since dropping it
    // would give up the holder's entry.
    fresh.then(|| Claim {
        entry: Some(entry),
        _not_send: PhantomData,
    })
}

impl Drop for Claim {
    fn drop(&mut self) {
        if let Some(entry) = self.entry.take() {
            let _ = HELD.try_with(|held| held.borrow_mut().remove(&entry));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_cannot_claim_twice_and_other_threads_are_separate() {
        let first = claim("c", "k").unwrap();
        assert!(claim("c", "k").is_none());
        // A refusal leaves the first claim standing.
        assert!(claim("c", "k").is_none());
        assert!(claim("other-client", "k").is_some());
        std::thread::spawn(|| assert!(claim("c", "k").is_some()))
            .join()
            .unwrap();
        drop(first);
        assert!(claim("c", "k").is_some());
    }
}
