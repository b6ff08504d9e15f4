//! Redisson's `RSpinLock`: an `RLock` without messages, whose waiters poll with back-off.

use std::sync::Arc;

use redis::{Connection, RedisResult};

use super::raw::{Acquire, Answer, HeldLock, Names, RawLock};
use super::safe::{Lock, LockGuard};
use crate::protocol::hash::{self, Reentry, ReleaseArgs};
use crate::protocol::replies::{Forced, NO_MESSAGE, Released};
use crate::wait::backoff::BackOff;
use crate::watchdog::Renewal;

/// The kind of Redisson's `RSpinLock` (3.15+): the hash, owner field, lease and
/// watchdog of [`Reentrant`](super::Reentrant), but nothing is published and nobody
/// listens.
///
/// A waiter makes an attempt, sleeps for the next pause of its [`BackOff`], and tries
/// again, until it gets the lock or its wait runs out (a pause is cut short at the
/// deadline). A release deletes the hash after its last hold and publishes nothing;
/// neither does [`Lock::force_unlock`]. That is Redisson's protocol, and it has a
/// consequence: a waiter that listens for unlock messages, an
/// [`RLock`](crate::RLock) here or in Redisson, is not told when a spin lock on its name
/// is released, and takes the lock only when its sleep bound, the holder's remaining
/// lease (up to the watchdog timeout), has passed. Mutual exclusion holds either way.
/// Spin-lock waiters see every release at their next attempt, whoever released.
///
/// Use it where Redis pub/sub is unavailable or undesirable; elsewhere an `RLock` hands
/// over faster and sends fewer commands.
#[derive(Debug)]
pub struct Spin {
    names: Names,
    backoff: BackOff,
}

impl Spin {
    pub(crate) fn new(name: String, backoff: BackOff) -> Self {
        Self {
            names: Names::lock(name),
            backoff,
        }
    }
}

/// A reentrant lock whose waiters poll with back-off, wire-compatible with Redisson's
/// `RSpinLock`; see [`Spin`] for its rules and [`Lock`] for its methods.
///
/// # Examples
///
/// ```no_run
/// use std::time::Duration;
/// use redmutex::BackOff;
///
/// let client = redmutex::Client::open("redis://127.0.0.1:6379")?;
/// let lock = client
///     .get_spin_lock("nightly-job")
///     .with_backoff(BackOff::Constant(Duration::from_millis(64)));
/// if let Some(guard) = lock.try_lock_for(Duration::from_secs(1))? {
///     guard.unlock()?;
/// }
/// # Ok::<(), redmutex::Error>(())
/// ```
pub type RSpinLock = Lock<Spin>;

/// One hold of an [`RSpinLock`], released when dropped; see [`LockGuard`].
pub type RSpinLockGuard = LockGuard<Spin>;

impl Lock<Spin> {
    /// This lock with another back-off between attempts (Redisson
    /// `getSpinLock(name, backOff)`). A new instance: its lease for partial releases
    /// starts afresh. Does no I/O.
    #[must_use]
    pub fn with_backoff(self, backoff: BackOff) -> Self {
        Self::new(
            Arc::clone(self.core()),
            Spin::new(self.name().to_owned(), backoff),
        )
    }
}

impl HeldLock for Spin {}

impl RawLock for Spin {
    const LOCK: &'static str = "RSpinLock";
    const RENEWAL: Renewal = Renewal::Lock;

    fn names(&self) -> &Names {
        &self.names
    }

    fn polls(&self) -> Option<&BackOff> {
        Some(&self.backoff)
    }

    fn acquire(&self, c: &mut Connection, a: &Acquire<'_>) -> RedisResult<Answer> {
        // Redisson's spin acquire changes the keys exactly as the RLock acquire does.
        hash::acquire(c, &self.names.name, a.owner, a.lease_ms, Reentry::Counted).map(Answer::from)
    }

    fn release(&self, c: &mut Connection, r: &ReleaseArgs<'_>) -> RedisResult<Released> {
        self.names.release_hold(c, r, NO_MESSAGE)
    }

    fn force_release(&self, c: &mut Connection, _now: u64, _publish: &str) -> RedisResult<Forced> {
        let deleted: i64 = redis::cmd("DEL").arg(&self.names.name).query(c)?;
        Ok(if deleted == 1 {
            Forced::Deleted
        } else {
            Forced::Absent
        })
    }
}
