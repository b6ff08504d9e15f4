//! Redisson 4.4+'s non-reentrant lock and non-reentrant fair lock: a second acquisition
//! by the holding thread is refused, not counted.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::{Connection, RedisResult};

use super::fair::Fair;
use super::raw::{Acquire, Answer, Backoff, Leave, Names, HeldLock, RawLock};
use super::safe::{Lock, LockGuard};
use crate::error::Result;
use crate::scripts::{self, Forced, Reentry, ReleaseArgs, Released, UNLOCK_MESSAGE};
use crate::watchdog::Renewal;

/// The kind of Redisson 4.4+'s `RedissonNonReentrantLock`: the hash, owner field,
/// lease, watchdog, channel and release of [`Reentrant`](super::Reentrant), with the
/// hold count always 1.
///
/// When the thread that holds the lock asks for it again, every acquisition form
/// ([`Lock::lock`], [`Lock::try_lock`], [`Lock::try_lock_for`], …) fails at once with
/// [`Error::AlreadyHeld`](crate::Error::AlreadyHeld) and changes nothing: neither the
/// count nor the lease. Redisson's client throws `IllegalMonitorStateException` there.
/// Every release is therefore the last one and wakes a waiter.
///
/// Redisson 3.x has no such lock; a 3.x `RLock` on the same name would take it
/// reentrantly.
#[derive(Debug)]
pub struct NonReentrant {
    names: Names,
}

impl NonReentrant {
    pub(crate) fn new(name: String) -> Self {
        Self {
            names: Names::lock(name),
        }
    }
}

/// A non-reentrant lock, wire-compatible with Redisson 4.4+'s non-reentrant lock; see
/// [`NonReentrant`] for its rules and [`Lock`] for its methods.
///
/// # Examples
///
/// ```no_run
/// let client = redmutex::Client::open("redis://127.0.0.1:6379")?;
/// let lock = client.get_non_reentrant_lock("orders:1");
/// let guard = lock.lock()?;
/// // The holder asking again is refused at once instead of counting a second hold.
/// assert!(matches!(lock.try_lock(), Err(redmutex::Error::AlreadyHeld { .. })));
/// guard.unlock()?;
/// # Ok::<(), redmutex::Error>(())
/// ```
pub type RNonReentrantLock = Lock<NonReentrant>;

/// The one hold of an [`RNonReentrantLock`], released when dropped; see [`LockGuard`].
pub type RNonReentrantLockGuard = LockGuard<NonReentrant>;

impl HeldLock for NonReentrant {}

impl RawLock for NonReentrant {
    const LOCK: &'static str = "RNonReentrantLock";
    const RENEWAL: Renewal = Renewal::Lock;

    fn names(&self) -> &Names {
        &self.names
    }

    fn acquire(&self, c: &mut Connection, a: &Acquire<'_>) -> RedisResult<Answer> {
        scripts::acquire(c, &self.names.name, a.owner, a.lease_ms, Reentry::Refused)
            .map(Answer::from)
    }

    fn release(&self, c: &mut Connection, r: &ReleaseArgs<'_>) -> RedisResult<Released> {
        self.names.release_hold(c, r, UNLOCK_MESSAGE)
    }

    fn force_release(&self, c: &mut Connection, _now: u64, publish: &str) -> RedisResult<Forced> {
        self.names.force_delete(c, publish)
    }
}

/// The kind of Redisson 4.4+'s `RedissonNonReentrantFairLock`: a [`Fair`] lock (the
/// same keys, queue, slots, per-waiter channels and release) whose holder cannot take
/// it again.
///
/// A re-acquisition by the holding thread fails at once with
/// [`Error::AlreadyHeld`](crate::Error::AlreadyHeld) and changes nothing; the thread is
/// not queued either. Everything else is [`Fair`]'s.
#[derive(Debug)]
pub struct NonReentrantFair(Fair);

impl NonReentrantFair {
    pub(crate) fn new(name: String, thread_wait: Duration) -> Self {
        Self(Fair::with_reentry(name, thread_wait, Reentry::Refused))
    }
}

/// A non-reentrant lock granted in request order, wire-compatible with Redisson 4.4+'s
/// non-reentrant fair lock; see [`NonReentrantFair`] for its rules and [`Lock`] for its
/// methods.
///
/// # Examples
///
/// ```no_run
/// use std::time::Duration;
///
/// let client = redmutex::Client::open("redis://127.0.0.1:6379")?;
/// let lock = client.get_non_reentrant_fair_lock("queue:print");
/// // Granted in request order; a second acquisition by the holder is AlreadyHeld.
/// if let Some(guard) = lock.try_lock_for(Duration::from_secs(5))? {
///     guard.unlock()?;
/// }
/// # Ok::<(), redmutex::Error>(())
/// ```
pub type RNonReentrantFairLock = Lock<NonReentrantFair>;

/// The one hold of an [`RNonReentrantFairLock`], released when dropped; see
/// [`LockGuard`].
pub type RNonReentrantFairLockGuard = LockGuard<NonReentrantFair>;

impl Lock<NonReentrantFair> {
    /// This lock with another thread wait time; see
    /// [`Lock::<Fair>::with_thread_wait_time`](Lock::with_thread_wait_time).
    #[must_use]
    pub fn with_thread_wait_time(self, wait: Duration) -> Self {
        Self::new(
            Arc::clone(self.core()),
            NonReentrantFair(self.kind().0.rewaited(wait)),
        )
    }

    /// Deletes the lock, its queue and its timeouts, as
    /// [`Lock::<Fair>::delete`](Lock::delete) does.
    ///
    /// # Errors
    ///
    /// Redis, pool and shutdown errors.
    pub fn delete(&self) -> Result<bool> {
        self.delete_keys()
    }
}

// Every rule is the fair lock's; only the reentry flag its scripts get differs.
impl HeldLock for NonReentrantFair {}

impl RawLock for NonReentrantFair {
    const LOCK: &'static str = "RNonReentrantFairLock";
    const RENEWAL: Renewal = Fair::RENEWAL;
    const QUEUES: bool = Fair::QUEUES;

    fn names(&self) -> &Names {
        self.0.names()
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys()
    }

    fn wait_channel(&self, owner: &str) -> Cow<'_, str> {
        self.0.wait_channel(owner)
    }

    fn acquire(&self, c: &mut Connection, a: &Acquire<'_>) -> RedisResult<Answer> {
        self.0.acquire(c, a)
    }

    fn try_acquire(&self, c: &mut Connection, a: &Acquire<'_>) -> RedisResult<Answer> {
        self.0.try_acquire(c, a)
    }

    fn release(&self, c: &mut Connection, r: &ReleaseArgs<'_>) -> RedisResult<Released> {
        self.0.release(c, r)
    }

    fn force_release(&self, c: &mut Connection, now: u64, publish: &str) -> RedisResult<Forced> {
        self.0.force_release(c, now, publish)
    }

    fn retry_by(&self, hint: i64, backoff: &mut Backoff) -> Option<Instant> {
        self.0.retry_by(hint, backoff)
    }

    fn leave(&self, c: &mut Connection, l: &Leave<'_>) -> RedisResult<()> {
        self.0.leave(c, l)
    }
}
