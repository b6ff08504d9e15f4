//! The lock methods whose wait another thread can end: Redisson's
//! `lockInterruptibly()`, with a [`Cancel`] handle in place of `Thread.interrupt()`.

use std::time::Duration;

use super::raw::HeldLock;
use super::safe::{Lock, LockGuard, Patience};
use crate::error::Result;
use crate::wait::cancel::Cancel;

impl<K: HeldLock> Lock<K> {
    /// Waits as long as it takes, or until `cancel` is cancelled, then holds the lock
    /// under the watchdog (Redisson `lockInterruptibly()`). The cancel wakes the waiter
    /// at once, as an unlock message does; see [`Cancel`] for what a cancel that races a
    /// grant gives.
    ///
    /// ```no_run
    /// let client = redmutex::Client::open("redis://127.0.0.1:6379")?;
    /// let lock = client.get_lock("jobs");
    /// let cancel = redmutex::Cancel::new();
    /// // Another thread (a shutdown hook) calls `cancel.cancel()`.
    /// let guard = lock.lock_until(&cancel)?;
    /// # drop(guard);
    /// # Ok::<(), redmutex::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::Cancelled`](crate::Error::Cancelled) when the handle was cancelled before
    /// the lock was granted (or before the call): nothing is held and nothing is left
    /// behind. Otherwise as [`lock`](Self::lock).
    pub fn lock_until(&self, cancel: &Cancel) -> Result<LockGuard<K>> {
        self.acquire_forever_as(self.owner(), None, Some(cancel))
    }

    /// [`lock_until`](Self::lock_until), holding the lock for `lease`, never renewed
    /// (Redisson `lockInterruptibly(leaseTime, unit)`).
    ///
    /// ```no_run
    /// use std::time::Duration;
    ///
    /// let client = redmutex::Client::open("redis://127.0.0.1:6379")?;
    /// let cancel = redmutex::Cancel::new();
    /// let guard = client
    ///     .get_lock("jobs")
    ///     .lock_with_lease_until(Duration::from_secs(10), &cancel)?;
    /// # drop(guard);
    /// # Ok::<(), redmutex::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`lock_until`](Self::lock_until);
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for a zero or absurd lease.
    pub fn lock_with_lease_until(&self, lease: Duration, cancel: &Cancel) -> Result<LockGuard<K>> {
        self.acquire_forever_as(self.owner(), Some(lease), Some(cancel))
    }

    /// Waits at most `wait`, or until `cancel` is cancelled; held under the watchdog on
    /// success. `Ok(None)` means the wait ran out.
    ///
    /// ```no_run
    /// use std::time::Duration;
    ///
    /// let client = redmutex::Client::open("redis://127.0.0.1:6379")?;
    /// let cancel = redmutex::Cancel::new();
    /// let lock = client.get_lock("jobs");
    /// match lock.try_lock_for_until(Duration::from_secs(30), &cancel) {
    ///     Ok(Some(guard)) => guard.unlock()?,
    ///     Ok(None) => println!("still held after 30 s"),
    ///     Err(redmutex::Error::Cancelled) => println!("told to stop waiting"),
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok::<(), redmutex::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`lock_until`](Self::lock_until).
    pub fn try_lock_for_until(
        &self,
        wait: Duration,
        cancel: &Cancel,
    ) -> Result<Option<LockGuard<K>>> {
        self.acquire_as(self.owner(), None, Patience::For(wait), Some(cancel))
    }
}
