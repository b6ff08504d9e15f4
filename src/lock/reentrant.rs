//! Redisson's `RLock`, and with the [`Refused`](super::Refused) policy its
//! non-reentrant lock.

use std::marker::PhantomData;

use redis::{Connection, RedisResult};

use super::raw::{Acquire, Answer, HeldLock, Names, RawLock};
use super::reentry::{Counted, Reentry, rule};
use super::safe::{Lock, LockGuard};
use crate::protocol::hash::{self, ReleaseArgs};
use crate::protocol::replies::{Forced, Released, UNLOCK_MESSAGE};
use crate::watchdog::Renewal;

/// The kind of Redisson's `RLock`: a reentrant lock, granted to whoever asks when it is
/// free.
///
/// The lock is the Redis hash `name`; its field `<client-id>:<thread-number>` counts the
/// holds of one thread, and the key's TTL is the lease. Re-entry resets the TTL to the new
/// lease. The last release deletes the key and publishes `"0"` on
/// `redisson_lock__channel:{name}`, which wakes one waiter, in this process or in any
/// Redisson client. [`Lock::force_unlock`] deletes the key whatever it holds.
///
/// `R` is what a second acquisition by the holding thread does: [`Counted`] (one more
/// hold, the default) or [`Refused`](super::Refused) (the
/// [`NonReentrant`](super::NonReentrant) lock), as lock_api's `RawReentrantMutex<R, G>`
/// composes a base lock with a policy.
#[derive(Debug)]
pub struct Reentrant<R: Reentry = Counted> {
    names: Names,
    _reentry: PhantomData<R>,
}

impl<R: Reentry> Reentrant<R> {
    pub(crate) fn new(name: String) -> Self {
        Self {
            names: Names::lock(name),
            _reentry: PhantomData,
        }
    }
}

/// A reentrant distributed lock, wire-compatible with Redisson's `RLock`; see
/// [`Reentrant`] for its rules, [`Lock`] for its methods and the crate docs for examples.
///
/// # Examples
///
/// ```no_run
/// let client = redmutex::Client::open("redis://127.0.0.1:6379")?;
/// let lock: redmutex::RLock = client.get_lock("orders:1");
/// let guard = lock.lock()?;
/// // A Java thread calling redisson.getLock("orders:1").tryLock() now gets false.
/// guard.unlock()?;
/// # Ok::<(), redmutex::Error>(())
/// ```
pub type RLock = Lock<Reentrant>;

/// One hold of an [`RLock`], released when dropped; see [`LockGuard`].
pub type RLockGuard = LockGuard<Reentrant>;

impl<R: Reentry> HeldLock for Reentrant<R> {}

impl<R: Reentry> RawLock for Reentrant<R> {
    const LOCK: &'static str = R::LOCK;
    const RENEWAL: Renewal = Renewal::Lock;

    fn names(&self) -> &Names {
        &self.names
    }

    fn acquire(&self, c: &mut Connection, a: &Acquire<'_>) -> RedisResult<Answer> {
        hash::acquire(c, &self.names.name, a.owner, a.lease_ms, rule::<R>()).map(Answer::from)
    }

    fn release(&self, c: &mut Connection, r: &ReleaseArgs<'_>) -> RedisResult<Released> {
        self.names.release_hold(c, r, UNLOCK_MESSAGE)
    }

    fn force_release(&self, c: &mut Connection, _now: u64, publish: &str) -> RedisResult<Forced> {
        self.names.force_delete(c, publish)
    }
}
