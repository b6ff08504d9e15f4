//! The public methods of [`Lock`]: the acquisition forms, the queries and the force
//! release, for every kind; and those that name a thread or an owner field instead of
//! a guard, for the thread-owned kinds only.

use std::time::Duration;

use super::{Lock, LockGuard, Patience};
use crate::clock;
use crate::error::Result;
use crate::lock::raw::{HeldLock, LockKind, Ownership};
use crate::protocol::owner;
use crate::protocol::replies::Forced;

impl<K: LockKind> Lock<K> {
    /// The lock's name, which is also its Redis key.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # let client = redmutex::Client::open("redis://127.0.0.1:6379")?;
    /// assert_eq!(client.get_lock("orders:1").name(), "orders:1");
    /// # Ok::<(), redmutex::Error>(())
    /// ```
    pub fn name(&self) -> &str {
        self.kind().name()
    }

    /// The lock's Redis key: its name, or for a [`TokenLock`](crate::TokenLock) the name
    /// after the options' key prefix.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # let client = redmutex::Client::open("redis://127.0.0.1:6379")?;
    /// assert_eq!(client.get_lock("orders:1").key(), "orders:1");
    /// # Ok::<(), redmutex::Error>(())
    /// ```
    pub fn key(&self) -> &str {
        self.kind().key()
    }

    /// Waits as long as it takes, then holds the lock under the watchdog (Redisson
    /// `lock()`).
    ///
    /// # Errors
    ///
    /// Redis, pool and shutdown errors; [`Error::WrongType`](crate::Error::WrongType) when a key of the lock has
    /// another type.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// let client = redmutex::Client::open("redis://127.0.0.1:6379")?;
    /// let lock = client.get_lock("orders:1");
    /// let guard = lock.lock()?; // bind it: `lock.lock()?;` alone releases at once
    /// // ... the critical section; the watchdog renews the 30 s lease meanwhile ...
    /// guard.unlock()?;
    /// # Ok::<(), redmutex::Error>(())
    /// ```
    pub fn lock(&self) -> Result<LockGuard<K>> {
        self.acquire_forever(None)
    }

    /// Waits as long as it takes, then holds the lock for `lease`, never renewed
    /// (Redisson `lock(leaseTime)`).
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock); [`Error::InvalidArgument`](crate::Error::InvalidArgument) for a zero or
    /// absurd lease.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use std::time::Duration;
    ///
    /// let client = redmutex::Client::open("redis://127.0.0.1:6379")?;
    /// let guard = client.get_lock("orders:1").lock_with_lease(Duration::from_secs(10))?;
    /// // Past 10 s the lock is free for others, whether or not this thread is done.
    /// if guard.is_lost() {
    ///     eprintln!("the lease ran out before the work was done");
    /// }
    /// drop(guard);
    /// # Ok::<(), redmutex::Error>(())
    /// ```
    pub fn lock_with_lease(&self, lease: Duration) -> Result<LockGuard<K>> {
        self.acquire_forever(Some(lease))
    }

    /// One attempt, no waiting; held under the watchdog on success (Redisson `tryLock()`).
    /// `Ok(None)` means someone else holds the lock.
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// let client = redmutex::Client::open("redis://127.0.0.1:6379")?;
    /// match client.get_lock("report:daily").try_lock()? {
    ///     Some(guard) => {
    ///         // ... the job ...
    ///         guard.unlock()?;
    ///     }
    ///     None => println!("another worker runs it"),
    /// }
    /// # Ok::<(), redmutex::Error>(())
    /// ```
    pub fn try_lock(&self) -> Result<Option<LockGuard<K>>> {
        self.acquire(None, Patience::Once)
    }

    /// Waits at most `wait`; held under the watchdog on success (Redisson
    /// `tryLock(waitTime, unit)`). `Ok(None)` means the wait ran out.
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use std::time::Duration;
    ///
    /// let client = redmutex::Client::open("redis://127.0.0.1:6379")?;
    /// let Some(guard) = client.get_lock("orders:1").try_lock_for(Duration::from_secs(3))? else {
    ///     return Ok(()); // still held by someone else after 3 s
    /// };
    /// // ... the critical section, under the watchdog ...
    /// guard.unlock()?;
    /// # Ok::<(), redmutex::Error>(())
    /// ```
    pub fn try_lock_for(&self, wait: Duration) -> Result<Option<LockGuard<K>>> {
        self.acquire(None, Patience::For(wait))
    }

    /// Waits at most `wait`, then holds the lock for `lease`, never renewed (Redisson
    /// `tryLock(waitTime, leaseTime, unit)`).
    ///
    /// # Errors
    ///
    /// As [`lock_with_lease`](Self::lock_with_lease).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use std::time::Duration;
    ///
    /// let client = redmutex::Client::open("redis://127.0.0.1:6379")?;
    /// let lock = client.get_lock("job:nightly");
    /// // No wait; keep the lock for the whole period, then let it expire (Redisson's
    /// // `tryLock(0, period, unit)` without unlock).
    /// if let Some(guard) = lock.try_lock_with_lease(Duration::ZERO, Duration::from_secs(3600))? {
    ///     // ... run the job ...
    ///     guard.detach();
    /// }
    /// # Ok::<(), redmutex::Error>(())
    /// ```
    pub fn try_lock_with_lease(
        &self,
        wait: Duration,
        lease: Duration,
    ) -> Result<Option<LockGuard<K>>> {
        // A token lock's zero wait is one attempt, as its peers' non-blocking acquire is:
        // its single-attempt script is its waiting one, so only the subscription differs.
        let patience = if wait.is_zero() && K::OWNERSHIP == Ownership::Token {
            Patience::Once
        } else {
            Patience::For(wait)
        };
        self.acquire(Some(lease), patience)
    }

    /// Deletes the lock whoever holds it and wakes its waiters (Redisson
    /// `forceUnlock()`); returns whether it deleted the key. Unless the lock is still
    /// there afterwards (a read-write half leaves a lock held in the other mode), every
    /// hold of this client on it is reported lost to its guards at once.
    ///
    /// # Errors
    ///
    /// Redis, pool and shutdown errors.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// let client = redmutex::Client::open("redis://127.0.0.1:6379")?;
    /// // An operator's "break the lock": whoever holds it loses it, its waiters are woken.
    /// if client.get_lock("orders:1").force_unlock()? {
    ///     println!("deleted a held lock");
    /// }
    /// # Ok::<(), redmutex::Error>(())
    /// ```
    pub fn force_unlock(&self) -> Result<bool> {
        let publish = self.core().publish_command();
        let forced = self.core().run(self.key(), |c| {
            self.kind().force_release(c, clock::now_ms(), publish)
        })?;
        // Afterwards the key is gone, so are all of this client's holds on it; only a
        // read-write half that found the lock in the other mode leaves it, with the holds
        // of that mode (and the downgrade reads of its writer) intact.
        if forced != Forced::Kept {
            self.core().watchdog().forget_lock(self.key());
            self.core().levels().forget_lock(self.key());
        }
        Ok(forced == Forced::Deleted)
    }

    /// Whether anyone holds the lock.
    ///
    /// # Errors
    ///
    /// Redis, pool and shutdown errors.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// let client = redmutex::Client::open("redis://127.0.0.1:6379")?;
    /// // A hint only: the answer can be stale by the time it arrives.
    /// if client.get_lock("orders:1").is_locked()? {
    ///     println!("someone holds it right now");
    /// }
    /// # Ok::<(), redmutex::Error>(())
    /// ```
    pub fn is_locked(&self) -> Result<bool> {
        self.core().run(self.key(), |c| self.kind().is_locked(c))
    }

    /// The lock's remaining lease (`PTTL`): `None` when nobody holds it,
    /// `Some(Duration::MAX)` when the key has no TTL at all.
    ///
    /// # Errors
    ///
    /// Redis, pool and shutdown errors.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// let client = redmutex::Client::open("redis://127.0.0.1:6379")?;
    /// match client.get_lock("orders:1").remain_time_to_live()? {
    ///     None => println!("free"),
    ///     Some(std::time::Duration::MAX) => println!("held with no TTL at all"),
    ///     Some(left) => println!("held for {left:?} more, unless renewed"),
    /// }
    /// # Ok::<(), redmutex::Error>(())
    /// ```
    pub fn remain_time_to_live(&self) -> Result<Option<Duration>> {
        self.core().remain_time_to_live(self.key())
    }

    /// Deletes every key of the lock (a fair lock's queue, a fenced lock's counter), with
    /// no message, as Redisson's `delete()` of those kinds; true when any existed. Holds
    /// of this client on the lock are reported lost.
    pub(in crate::lock) fn delete_keys(&self) -> Result<bool> {
        let keys = self.kind().keys();
        let deleted: i64 = self
            .core()
            .run(self.key(), |c| redis::cmd("DEL").arg(&keys).query(c))?;
        self.core().watchdog().forget_lock(self.key());
        self.core().levels().forget_lock(self.key());
        Ok(deleted > 0)
    }

    /// The lock's name as a metrics label, if the client labels with names.
    pub(super) fn label(&self) -> Option<&str> {
        self.core()
            .config()
            .metrics_lock_names()
            .then(|| self.name())
    }
}

/// The methods of the kinds whose holds belong to a thread's owner field (every kind but
/// the token lock): the ones that name a thread or an owner field instead of a guard.
impl<K: HeldLock> Lock<K> {
    /// Releases one hold of the current thread, like Redisson's `unlock()`. For holds
    /// whose guard was [detached](LockGuard::detach); a guard's own release is
    /// [`LockGuard::unlock`].
    ///
    /// # Errors
    ///
    /// [`Error::NotHeld`](crate::Error::NotHeld) when the thread holds no hold; [`Error::LockLost`](crate::Error::LockLost) when the
    /// watchdog had found this thread's hold gone; Redis, pool and shutdown errors.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// let client = redmutex::Client::open("redis://127.0.0.1:6379")?;
    /// let lock = client.get_lock("orders:1");
    /// lock.lock()?.detach(); // held, with no guard to release it
    /// assert_eq!(lock.hold_count()?, 1);
    /// // ... later, on the same thread ...
    /// lock.unlock()?;
    /// assert!(lock.unlock().unwrap_err().is_not_held());
    /// # Ok::<(), redmutex::Error>(())
    /// ```
    pub fn unlock(&self) -> Result<()> {
        self.unlock_field(&self.owner())
    }

    /// Releases one hold of the owner field `owner`, with the hold state the renewal
    /// registry has for it.
    pub(in crate::lock) fn unlock_field(&self, owner: &str) -> Result<()> {
        let hold = self.core().watchdog().hold(K::RENEWAL, self.key(), owner);
        self.release(owner, hold.as_deref())
    }

    /// Whether the current thread holds the lock (`HEXISTS` of its owner field).
    ///
    /// # Errors
    ///
    /// Redis, pool and shutdown errors; [`Error::WrongType`](crate::Error::WrongType) when the key is not a hash.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// let client = redmutex::Client::open("redis://127.0.0.1:6379")?;
    /// let lock = client.get_lock("orders:1");
    /// let guard = lock.lock()?;
    /// assert!(lock.is_held_by_current_thread()?);
    /// // Another thread is another owner, as in Redisson.
    /// let other = lock.clone();
    /// assert!(!std::thread::spawn(move || other.is_held_by_current_thread()).join().unwrap()?);
    /// guard.unlock()?;
    /// # Ok::<(), redmutex::Error>(())
    /// ```
    pub fn is_held_by_current_thread(&self) -> Result<bool> {
        self.is_held_by_field(&self.owner())
    }

    /// Whether the owner field `owner` exists in the lock's hash.
    pub(in crate::lock) fn is_held_by_field(&self, owner: &str) -> Result<bool> {
        self.core().run(self.key(), |c| {
            redis::cmd("HEXISTS").arg(self.key()).arg(owner).query(c)
        })
    }

    /// How many holds the current thread has (`HGET` of its owner field); 0 when none.
    ///
    /// # Errors
    ///
    /// Redis, pool and shutdown errors; [`Error::WrongType`](crate::Error::WrongType) when the key is not a hash.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// let client = redmutex::Client::open("redis://127.0.0.1:6379")?;
    /// let lock = client.get_lock("orders:1");
    /// let outer = lock.lock()?;
    /// let inner = lock.lock()?; // reentrant: a second hold of the same thread
    /// assert_eq!(lock.hold_count()?, 2);
    /// inner.unlock()?; // not the last hold: the lock stays held, no waiter is woken
    /// outer.unlock()?;
    /// assert_eq!(lock.hold_count()?, 0);
    /// # Ok::<(), redmutex::Error>(())
    /// ```
    pub fn hold_count(&self) -> Result<u32> {
        let owner = self.owner();
        let count: Option<u32> = self.core().run(self.key(), |c| {
            redis::cmd("HGET").arg(self.key()).arg(&owner).query(c)
        })?;
        Ok(count.unwrap_or(0))
    }

    /// The owner field of the current thread.
    pub(in crate::lock) fn owner(&self) -> String {
        K::owner(self.core().id(), owner::thread_number())
    }
}

impl<K: HeldLock> crate::sync::expiry::sealed::Keys for Lock<K> {
    fn expiry_target(&self) -> crate::sync::expiry::sealed::Target<'_> {
        crate::sync::expiry::sealed::Target {
            core: self.core(),
            keys: self.kind().keys(),
        }
    }
}
