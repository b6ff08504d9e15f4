//! A cancellation handle for blocked acquisitions: Redisson's `lockInterruptibly()` and
//! `Thread.interrupt()`, as a value one thread trips and another waits with.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, bounded};
use parking_lot::Mutex;

/// Cancels the waits that were given it, from any thread, at once.
///
/// Pass it to [`Lock::lock_until`](crate::Lock::lock_until) (or
/// [`try_lock_for_until`](crate::Lock::try_lock_for_until)) and call
/// [`cancel`](Self::cancel) from another thread: the waiter wakes at once, as it wakes for
/// an unlock message, and returns [`Error::Cancelled`](crate::Error::Cancelled), leaving
/// nothing behind (no hold, no place in a fair lock's queue, no subscription). An attempt
/// already on the wire when the cancel comes finishes first: if it was granted, the
/// caller gets the guard, as it would have a moment earlier; if not, nothing is held.
/// Either way no hold is left that nobody owns.
///
/// A handle cancels once and for good: every wait given it afterwards fails at once.
/// Clones share the state, so one `cancel()` ends every wait on any of them.
///
/// ```no_run
/// use std::time::Duration;
///
/// let client = redmutex::Client::open("redis://127.0.0.1:6379")?;
/// let lock = client.get_lock("jobs");
/// let cancel = redmutex::Cancel::new();
/// let stop = cancel.clone();
/// std::thread::spawn(move || {
///     std::thread::sleep(Duration::from_secs(5)); // e.g. a shutdown request
///     stop.cancel();
/// });
/// match lock.lock_until(&cancel) {
///     Ok(guard) => guard.unlock()?,
///     Err(redmutex::Error::Cancelled) => println!("gave up waiting"),
///     Err(e) => return Err(e),
/// }
/// # Ok::<(), redmutex::Error>(())
/// ```
#[derive(Clone, Debug, Default)]
pub struct Cancel {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    cancelled: AtomicBool,
    /// Dropped by `cancel`: a channel that never carries a message and disconnects once,
    /// which wakes every receiver at once. Sleepers select on it beside their own wake-up
    /// channel, so a cancel wakes them the way a message does, without polling.
    trip: Mutex<Option<Sender<Infallible>>>,
    tripped: Receiver<Infallible>,
}

impl Default for Inner {
    fn default() -> Self {
        let (trip, tripped) = bounded(0);
        Self {
            cancelled: AtomicBool::new(false),
            trip: Mutex::new(Some(trip)),
            tripped,
        }
    }
}

impl Cancel {
    /// A handle that has not been cancelled.
    pub fn new() -> Self {
        Self::default()
    }

    /// Cancels every wait given this handle (or a clone), now and from now on. Calling it
    /// again does nothing.
    pub fn cancel(&self) {
        // The flag first: a waiter woken by the disconnect sees it set.
        self.inner.cancelled.store(true, Ordering::Release);
        drop(self.inner.trip.lock().take());
    }

    /// Whether [`cancel`](Self::cancel) has been called.
    pub fn is_cancelled(&self) -> bool {
        self.inner.cancelled.load(Ordering::Acquire)
    }

    /// What a sleeper selects on beside its own wake-ups: ready (disconnected) once
    /// cancelled.
    pub(crate) fn receiver(&self) -> &Receiver<Infallible> {
        &self.inner.tripped
    }

    /// Sleeps until `until` (`None`: for good) or the cancel, whichever comes first;
    /// true when it was the cancel.
    pub(crate) fn sleep_until(&self, until: Option<Instant>) -> bool {
        let woke = match until {
            Some(at) => self.inner.tripped.recv_deadline(at),
            None => self
                .inner
                .tripped
                .recv()
                .map_err(|_| RecvTimeoutError::Disconnected),
        };
        match woke {
            Ok(never) => match never {},
            Err(RecvTimeoutError::Timeout) => false,
            Err(RecvTimeoutError::Disconnected) => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_cancel_wakes_a_sleeper_at_once_and_stays() {
        let cancel = Cancel::new();
        assert!(!cancel.is_cancelled());
        assert!(!cancel.sleep_until(Some(Instant::now() + Duration::from_millis(1))));
        let other = cancel.clone();
        let sleeper = std::thread::spawn(move || other.sleep_until(None));
        cancel.cancel();
        assert!(sleeper.join().unwrap());
        assert!(cancel.is_cancelled());
        cancel.cancel();
        assert!(
            cancel.sleep_until(None),
            "a tripped handle wakes at once, for good"
        );
    }
}
