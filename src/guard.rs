//! The guard every lock type hands out: one hold, released when dropped.

use std::marker::PhantomData;

use crossbeam_channel::Receiver;

use crate::common::HoldState;
use crate::error::Result;
use crate::watchdog::Loss;

/// A lock whose holds are [`LockGuard`]s: [`RLock`](crate::RLock),
/// [`RFairLock`](crate::RFairLock), [`RReadLock`](crate::RReadLock) and
/// [`RWriteLock`](crate::RWriteLock). Sealed: only this crate implements it.
pub trait HeldLock: sealed::Release {}

pub(crate) mod sealed {
    use crate::client::Client;
    use crate::error::Result;
    use crate::watchdog::Hold;

    /// What a guard needs from its lock. `pub` only so that it can be the supertrait of
    /// [`HeldLock`](super::HeldLock); this module is private, so nobody outside the crate
    /// can name it, call it or implement it.
    #[allow(private_interfaces)]
    pub trait Release {
        /// The guard's type name, for `Debug` and log lines.
        const GUARD: &'static str;
        /// Releases one hold of the current thread; `hold` is the guard's state.
        fn release_hold(&self, hold: &Hold) -> Result<()>;
        /// The lock's name.
        fn lock_name(&self) -> &str;
        /// The client the lock belongs to.
        fn lock_client(&self) -> &Client;
    }
}

/// One hold of a lock, released when dropped.
///
/// Dropping the guard releases the hold and logs a failure at `warn`; call
/// [`unlock`](Self::unlock) to see the `Result`. The guard is not `Send`: the hold belongs
/// to the thread that took it (the owner field is `<client-id>:<thread-number>`), as a
/// Redisson hold belongs to a Java thread. There is no `Deref`: a distributed lock guards
/// something outside the process.
///
/// Each lock type names its guard: [`RLockGuard`](crate::RLockGuard),
/// [`RFairLockGuard`](crate::RFairLockGuard), [`RReadLockGuard`](crate::RReadLockGuard),
/// [`RWriteLockGuard`](crate::RWriteLockGuard).
#[must_use = "if unused the lock is released immediately"]
#[clippy::has_significant_drop]
pub struct LockGuard<'a, L: HeldLock> {
    lock: &'a L,
    state: HoldState,
    /// Released or detached already.
    done: bool,
    _not_send: PhantomData<std::sync::MutexGuard<'static, ()>>,
}

impl<'a, L: HeldLock> LockGuard<'a, L> {
    pub(crate) fn new(lock: &'a L, state: HoldState) -> Self {
        Self {
            lock,
            state,
            done: false,
            _not_send: PhantomData,
        }
    }

    /// Releases this hold and reports how that went. The release of the last hold wakes
    /// the lock's waiters as Redisson's does (one waiter, the next in a fair queue, or
    /// every reader).
    ///
    /// # Errors
    ///
    /// [`Error::LockLost`](crate::Error::LockLost) when the hold was already gone (lease
    /// expired, key deleted or taken over, or presumed lost by the watchdog): whatever the
    /// guard protected may have been touched by another holder. Redis, pool and shutdown
    /// errors otherwise; then the hold is no longer renewed and, if the release did not
    /// reach Redis, the lock expires after its lease.
    pub fn unlock(mut self) -> Result<()> {
        self.done = true;
        self.lock.release_hold(self.state.hold())
    }

    /// Keeps the hold but gives up the guard: dropping nothing releases it, and the
    /// watchdog goes on renewing it. Release it later, on the same thread, with the lock's
    /// own `unlock()`, as Redisson code that unlocks in another method does.
    pub fn detach(mut self) {
        self.done = true;
    }

    /// Whether this hold is known or presumed lost, without asking Redis: the watchdog
    /// found the key gone or owned by another, renewal could not be confirmed in time,
    /// the lease end known locally has passed (a process frozen past its lease learns it
    /// here the moment it runs again), or an explicit lease ran out.
    pub fn is_lost(&self) -> bool {
        self.loss().is_some()
    }

    /// Why the hold is no longer trusted, if it is not. See [`is_lost`](Self::is_lost).
    pub fn loss(&self) -> Option<Loss> {
        self.state.loss(self.lock.lock_client())
    }

    /// A channel that receives one [`Loss`] when the watchdog finds this hold lost or
    /// presumed lost (at once if it already was). Explicit-lease holds are not watched:
    /// check [`is_lost`](Self::is_lost) or the lease instead.
    pub fn loss_signal(&self) -> Receiver<Loss> {
        self.state.loss_signal()
    }

    /// The lock this guard holds.
    pub fn lock(&self) -> &L {
        self.lock
    }
}

impl<L: HeldLock> std::fmt::Debug for LockGuard<'_, L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct(L::GUARD)
            .field("lock", &self.lock.lock_name())
            .field("renewed", &self.state.renewed())
            .field("lost", &self.is_lost())
            .finish()
    }
}

impl<L: HeldLock> Drop for LockGuard<'_, L> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        if let Err(e) = self.lock.release_hold(self.state.hold()) {
            log::warn!(
                "redmutex: releasing {} of {:?} on drop failed: {e}",
                L::GUARD,
                self.lock.lock_name()
            );
        }
    }
}
