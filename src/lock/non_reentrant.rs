//! Redisson 4.4+'s non-reentrant lock and non-reentrant fair lock: a second acquisition
//! by the holding thread is refused, not counted. They are the reentrant kinds under the
//! [`Refused`] policy; this file names them.

use super::fair::Fair;
use super::reentrant::Reentrant;
use super::reentry::Refused;
use super::safe::{Lock, LockGuard};

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
pub type NonReentrant = Reentrant<Refused>;

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

/// The kind of Redisson 4.4+'s `RedissonNonReentrantFairLock`: a [`Fair`] lock (the
/// same keys, queue, slots, per-waiter channels and release) whose holder cannot take
/// it again.
///
/// A re-acquisition by the holding thread fails at once with
/// [`Error::AlreadyHeld`](crate::Error::AlreadyHeld) and changes nothing; the thread is
/// not queued either. Everything else is [`Fair`]'s.
pub type NonReentrantFair = Fair<Refused>;

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
