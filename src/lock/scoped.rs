//! The closure style of the lock methods: take the lock, run a closure, release, as
//! Java's `lock(); try { … } finally { unlock(); }` does, with every outcome reported.

use std::time::Duration;

use super::raw::HeldLock;
use super::safe::{Lock, LockGuard};
use crate::error::Error;

impl<K: HeldLock> Lock<K> {
    /// Waits as long as it takes for the lock (as [`lock`](Self::lock), under the
    /// watchdog), runs `f` with the guard, then releases: Java's
    /// `lock.lock(); try { … } finally { lock.unlock(); }` in one call, without the way to
    /// drop the guard too early.
    ///
    /// `f` returns a `Result` whose error type can hold this crate's [`Error`] (such as
    /// `Error` itself, `anyhow::Error` or `Box<dyn std::error::Error>`), so the three
    /// ways this can fail come back in one `Result`:
    /// - taking the lock failed: that error, and `f` never ran;
    /// - `f` failed: its error. The lock is released all the same; a release that also
    ///   fails is logged at `warn`, since `f`'s error is the one to act on;
    /// - `f` succeeded but the release failed: the release's error, in place of `f`'s
    ///   value. [`Error::LockLost`] there means the hold was gone before the end of `f`,
    ///   so what `f` did may have overlapped with another holder; another error means the
    ///   lock stays until its lease ends. Where `f`'s value must survive a failed
    ///   release, hold the guard and call [`LockGuard::unlock`] instead.
    ///
    /// ```no_run
    /// let client = redmutex::Client::open("redis://127.0.0.1:6379")?;
    /// let lock = client.get_lock("ledger");
    /// let total = lock.with_lock(|guard| {
    ///     // ... the critical section; check guard.is_lost() before each write ...
    ///     Ok::<_, redmutex::Error>(42)
    /// })?;
    /// # let _ = total;
    /// # Ok::<(), redmutex::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As above: the acquisition's error (as [`lock`](Self::lock)), `f`'s, or the
    /// release's (as [`LockGuard::unlock`]).
    pub fn with_lock<T, E>(&self, f: impl FnOnce(&LockGuard<K>) -> Result<T, E>) -> Result<T, E>
    where
        E: From<Error>,
    {
        let guard = self.lock()?;
        run_then_release(guard, f)
    }

    /// Waits at most `wait` for the lock (as [`try_lock_for`](Self::try_lock_for), under
    /// the watchdog); if it got it, runs `f` with the guard and releases, reporting as
    /// [`with_lock`](Self::with_lock) does. `Ok(None)` means the wait ran out and `f`
    /// never ran.
    ///
    /// ```no_run
    /// use std::time::Duration;
    ///
    /// let client = redmutex::Client::open("redis://127.0.0.1:6379")?;
    /// let lock = client.get_lock("nightly-report");
    /// match lock.try_with_lock_for(Duration::from_secs(2), |_guard| {
    ///     // ... the critical section ...
    ///     Ok::<_, redmutex::Error>(())
    /// })? {
    ///     Some(()) => println!("report written"),
    ///     None => println!("someone else is writing it"),
    /// }
    /// # Ok::<(), redmutex::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`with_lock`](Self::with_lock).
    pub fn try_with_lock_for<T, E>(
        &self,
        wait: Duration,
        f: impl FnOnce(&LockGuard<K>) -> Result<T, E>,
    ) -> Result<Option<T>, E>
    where
        E: From<Error>,
    {
        match self.try_lock_for(wait)? {
            Some(guard) => run_then_release(guard, f).map(Some),
            None => Ok(None),
        }
    }
}

/// Runs `f` with `guard`, then releases it; see [`Lock::with_lock`] for what comes back.
fn run_then_release<K: HeldLock, T, E: From<Error>>(
    guard: LockGuard<K>,
    f: impl FnOnce(&LockGuard<K>) -> Result<T, E>,
) -> Result<T, E> {
    // A panic in `f` unwinds through the guard's drop, which releases the hold.
    let outcome = f(&guard);
    let lock = guard.lock().clone();
    let released = guard.unlock();
    match (outcome, released) {
        (Ok(value), Ok(())) => Ok(value),
        (Ok(_), Err(e)) => Err(e.into()),
        (Err(e), Ok(())) => Err(e),
        (Err(e), Err(release)) => {
            log::warn!(
                "redmutex: releasing {} {:?} after its closure failed also failed: \
                 {release}",
                K::LOCK,
                lock.name()
            );
            Err(e)
        }
    }
}
