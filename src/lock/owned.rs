//! The lock methods for an explicit [`Owner`] instead of the calling thread: Redisson's
//! `threadId` forms, for thread pools whose unlocking thread is not the locking one.
//!
//! A hold taken this way has no guard (a guard belongs to its thread): it is released
//! by [`Lock::unlock_as`] with the same owner, from any thread, and until then it is
//! renewed as a detached hold is. The ordinary, guarded methods stay the common path.

use std::time::Duration;

use super::raw::HeldLock;
use super::safe::{Lock, Patience};
use crate::error::Result;
use crate::protocol::owner::Owner;

impl<K: HeldLock> Lock<K> {
    /// The owner field of `owner` on this lock.
    fn field_of(&self, owner: Owner) -> String {
        K::owner(self.core().id(), owner.id())
    }

    /// Waits as long as it takes, then holds the lock for `owner` under the watchdog
    /// (Redisson `lock(-1, unit, threadId)`). Release it with
    /// [`unlock_as`](Self::unlock_as) and the same owner, from any thread.
    ///
    /// ```no_run
    /// let client = redmutex::Client::open("redis://127.0.0.1:6379")?;
    /// let lock = client.get_lock("job:17");
    /// let owner = redmutex::Owner::unique();
    /// lock.lock_as(owner)?;
    /// // ... hand `owner` to the thread that finishes the job ...
    /// lock.unlock_as(owner)?;
    /// # Ok::<(), redmutex::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock).
    pub fn lock_as(&self, owner: Owner) -> Result<()> {
        self.acquire_forever_as(self.field_of(owner), None, None)?
            .detach();
        Ok(())
    }

    /// Waits as long as it takes, then holds the lock for `owner` for `lease`, never
    /// renewed (Redisson `lock(leaseTime, unit, threadId)`).
    ///
    /// ```no_run
    /// use std::time::Duration;
    ///
    /// let client = redmutex::Client::open("redis://127.0.0.1:6379")?;
    /// let owner = redmutex::Owner::unique();
    /// client
    ///     .get_lock("job:17")
    ///     .lock_with_lease_as(owner, Duration::from_secs(60))?;
    /// # Ok::<(), redmutex::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`lock_with_lease`](Self::lock_with_lease).
    pub fn lock_with_lease_as(&self, owner: Owner, lease: Duration) -> Result<()> {
        self.acquire_forever_as(self.field_of(owner), Some(lease), None)?
            .detach();
        Ok(())
    }

    /// Waits at most `wait`, then holds the lock for `owner`, for `lease` or (`None`)
    /// under the watchdog (Redisson `tryLock(waitTime, leaseTime, unit, threadId)`).
    /// False means the wait ran out; a zero `wait` makes one attempt.
    ///
    /// ```no_run
    /// use std::time::Duration;
    ///
    /// let client = redmutex::Client::open("redis://127.0.0.1:6379")?;
    /// let lock = client.get_lock("job:17");
    /// let owner = redmutex::Owner::unique();
    /// if lock.try_lock_as(owner, Duration::from_secs(2), None)? {
    ///     // ... held for `owner`, under the watchdog ...
    ///     lock.unlock_as(owner)?;
    /// }
    /// # Ok::<(), redmutex::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`try_lock_with_lease`](Self::try_lock_with_lease).
    pub fn try_lock_as(
        &self,
        owner: Owner,
        wait: Duration,
        lease: Option<Duration>,
    ) -> Result<bool> {
        let patience = if wait.is_zero() {
            Patience::Once
        } else {
            Patience::For(wait)
        };
        let guard = self.acquire_as(self.field_of(owner), lease, patience, None)?;
        Ok(guard.map(|g| g.detach()).is_some())
    }

    /// Releases one hold of `owner`, from whichever thread calls (Redisson
    /// `unlock(threadId)`); the last one wakes the waiters as every release does.
    ///
    /// ```no_run
    /// let client = redmutex::Client::open("redis://127.0.0.1:6379")?;
    /// let lock = client.get_lock("job:17");
    /// let owner = redmutex::Owner::unique();
    /// lock.lock_as(owner)?;
    /// std::thread::spawn(move || lock.unlock_as(owner)).join().unwrap()?;
    /// # Ok::<(), redmutex::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::NotHeld`](crate::Error::NotHeld) when `owner` holds no hold;
    /// [`Error::LockLost`](crate::Error::LockLost) when the watchdog had found its hold
    /// gone; Redis, pool and shutdown errors.
    pub fn unlock_as(&self, owner: Owner) -> Result<()> {
        self.unlock_field(&self.field_of(owner))
    }

    /// Whether `owner` holds the lock (`HEXISTS` of its field; Redisson
    /// `isHeldByThread(threadId)`).
    ///
    /// ```no_run
    /// let client = redmutex::Client::open("redis://127.0.0.1:6379")?;
    /// let lock = client.get_lock("job:17");
    /// let owner = redmutex::Owner::unique();
    /// lock.lock_as(owner)?;
    /// assert!(lock.is_held_by(owner)?);
    /// assert!(!lock.is_held_by_current_thread()?);
    /// # lock.unlock_as(owner)?;
    /// # Ok::<(), redmutex::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// Redis, pool and shutdown errors; [`Error::WrongType`](crate::Error::WrongType)
    /// when the key is not a hash.
    pub fn is_held_by(&self, owner: Owner) -> Result<bool> {
        self.is_held_by_field(&self.field_of(owner))
    }
}
