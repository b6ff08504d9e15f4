//! Redisson's reentrant `RLock` and its guard.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::client::Client;
use crate::common::{self, Attempt, HoldState, Wait};
use crate::error::{Error, Result};
use crate::guard::{HeldLock, LockGuard, sealed};
use crate::names;
use crate::owner;
use crate::pubsub::WakeRule;
use crate::scripts::{self, Released};
use crate::watchdog::{Hold, Renewal};

/// A reentrant distributed lock, wire-compatible with Redisson's `RLock`.
///
/// The lock is the Redis hash `name`; its field `<client-id>:<thread-number>` counts the
/// holds of one thread of one client, and the key's TTL is the lease. Taking the lock
/// without a lease gives it the client's watchdog timeout and the watchdog renews it
/// until the last hold is released; taking it with a lease lets it expire after the lease,
/// unrenewed. The last release deletes the key and publishes `"0"` on
/// `redisson_lock__channel:{name}`, which wakes one waiter, in this process or in any
/// Redisson client.
///
/// The lock belongs to the thread that took it: guards are not `Send`, and each thread of
/// a client is a distinct owner, as each Java thread is for Redisson.
///
/// Cloning is cheap; clones are the same lock and share Redisson's per-instance lease
/// (the lease re-applied by a partial release is the last explicit lease taken through
/// this instance, else the watchdog timeout).
#[derive(Clone)]
pub struct RLock {
    client: Client,
    inner: Arc<LockInner>,
}

struct LockInner {
    name: String,
    channel: String,
    /// Redisson's `internalLockLeaseTime`: what a partial release sets the TTL to.
    lease_ms: AtomicU64,
}

impl std::fmt::Debug for RLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RLock")
            .field("name", &self.inner.name)
            .field("client", &self.client.id())
            .finish()
    }
}

impl RLock {
    pub(crate) fn new(client: Client, name: String) -> Self {
        let lease_ms = client.config().lock_watchdog_timeout.as_millis() as u64;
        Self {
            inner: Arc::new(LockInner {
                channel: names::lock_channel(&name),
                name,
                lease_ms: AtomicU64::new(lease_ms),
            }),
            client,
        }
    }

    /// The lock's name, which is also its Redis key.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Waits as long as it takes, then holds the lock under the watchdog (Redisson
    /// `lock()`).
    ///
    /// While it waits the thread sleeps until an unlock message or until the holder's
    /// lease would end, whichever comes first.
    ///
    /// # Errors
    ///
    /// Redis, pool and shutdown errors; [`Error::WrongType`] when the key is not a hash.
    pub fn lock(&self) -> Result<RLockGuard<'_>> {
        self.acquire(None, Wait::Forever)
            .and_then(|g| g.ok_or(Error::Shutdown))
    }

    /// Waits as long as it takes, then holds the lock for `lease`, never renewed (Redisson
    /// `lock(leaseTime)`).
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock); [`Error::Config`] for a zero or absurd lease.
    pub fn lock_with_lease(&self, lease: Duration) -> Result<RLockGuard<'_>> {
        self.acquire(Some(lease), Wait::Forever)
            .and_then(|g| g.ok_or(Error::Shutdown))
    }

    /// One attempt, no waiting; held under the watchdog on success (Redisson `tryLock()`).
    /// `Ok(None)` means someone else holds the lock.
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock).
    pub fn try_lock(&self) -> Result<Option<RLockGuard<'_>>> {
        self.acquire(None, Wait::No)
    }

    /// Waits at most `wait`; held under the watchdog on success (Redisson
    /// `tryLock(waitTime, -1, unit)`). `Ok(None)` means the wait ran out.
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock).
    pub fn try_lock_for(&self, wait: Duration) -> Result<Option<RLockGuard<'_>>> {
        self.acquire(None, Wait::from_duration(wait))
    }

    /// Waits at most `wait`, then holds the lock for `lease`, never renewed (Redisson
    /// `tryLock(waitTime, leaseTime, unit)`).
    ///
    /// # Errors
    ///
    /// As [`lock_with_lease`](Self::lock_with_lease).
    pub fn try_lock_with_lease(
        &self,
        wait: Duration,
        lease: Duration,
    ) -> Result<Option<RLockGuard<'_>>> {
        self.acquire(Some(lease), Wait::from_duration(wait))
    }

    /// Releases one hold of the current thread, like Redisson's `unlock()`. For holds whose
    /// guard was [detached](RLockGuard::detach); a guard's own release is
    /// [`RLockGuard::unlock`].
    ///
    /// # Errors
    ///
    /// [`Error::NotHeld`] when the thread holds no hold; [`Error::LockLost`] when the
    /// watchdog had found this thread's hold gone.
    pub fn unlock(&self) -> Result<()> {
        let owner = self.owner();
        let hold = self
            .client
            .inner
            .watchdog
            .hold(Renewal::Lock, &self.inner.name, &owner);
        self.release(&owner, hold.as_deref())
    }

    /// Deletes the lock whoever holds it and wakes a waiter (Redisson `forceUnlock()`).
    /// Returns whether there was a lock. Holds of this client on it are reported lost.
    ///
    /// # Errors
    ///
    /// Redis, pool and shutdown errors.
    pub fn force_unlock(&self) -> Result<bool> {
        let deleted = self.client.inner.run(&self.inner.name, |c| {
            scripts::force_release(c, &self.inner.name, &self.inner.channel)
        })?;
        self.client.inner.watchdog.forget_lock(&self.inner.name);
        Ok(deleted)
    }

    /// Whether anyone holds the lock (`EXISTS`).
    ///
    /// # Errors
    ///
    /// Redis, pool and shutdown errors.
    pub fn is_locked(&self) -> Result<bool> {
        self.client.inner.run(&self.inner.name, |c| {
            redis::cmd("EXISTS").arg(&self.inner.name).query(c)
        })
    }

    /// Whether the current thread holds the lock (`HEXISTS`).
    ///
    /// # Errors
    ///
    /// Redis, pool and shutdown errors; [`Error::WrongType`] when the key is not a hash.
    pub fn is_held_by_current_thread(&self) -> Result<bool> {
        let owner = self.owner();
        self.client.inner.run(&self.inner.name, |c| {
            redis::cmd("HEXISTS")
                .arg(&self.inner.name)
                .arg(&owner)
                .query(c)
        })
    }

    /// How many holds the current thread has (`HGET`); 0 when none.
    ///
    /// # Errors
    ///
    /// Redis, pool and shutdown errors; [`Error::WrongType`] when the key is not a hash.
    pub fn hold_count(&self) -> Result<u32> {
        let owner = self.owner();
        let count: Option<u32> = self.client.inner.run(&self.inner.name, |c| {
            redis::cmd("HGET")
                .arg(&self.inner.name)
                .arg(&owner)
                .query(c)
        })?;
        Ok(count.unwrap_or(0))
    }

    /// The lock's remaining lease (`PTTL`): `None` when nobody holds it,
    /// `Some(Duration::MAX)` when the key has no TTL at all.
    ///
    /// # Errors
    ///
    /// Redis, pool and shutdown errors.
    pub fn remain_time_to_live(&self) -> Result<Option<Duration>> {
        common::remain_time_to_live(&self.client, &self.inner.name)
    }

    /// The owner field of the current thread.
    fn owner(&self) -> String {
        owner::field(self.client.id(), owner::thread_number())
    }

    /// Redisson's acquisition loop: try; if held, subscribe, then alternate sleeping
    /// (until a wake-up or the holder's TTL) and trying, until acquired or out of time.
    fn acquire(&self, lease: Option<Duration>, wait: Wait) -> Result<Option<RLockGuard<'_>>> {
        let lease_ms = match lease {
            Some(l) => common::lease_ms(l)?,
            None => self.client.config().lock_watchdog_timeout.as_millis() as u64,
        };
        let owner = self.owner();
        let retry_by = match self.attempt(&owner, lease, lease_ms)? {
            Attempt::Done(guard) => return Ok(Some(guard)),
            Attempt::RetryBy(by) => by,
        };
        if matches!(wait, Wait::No) {
            return Ok(None);
        }
        // Subscribed before the next attempt: see the lost-wake-up argument in pubsub.rs.
        let subscription = self
            .client
            .inner
            .listener
            .subscribe(&self.inner.channel, WakeRule::Lock)?;
        common::wait_turns(&subscription, wait.deadline(), retry_by, || {
            self.attempt(&owner, lease, lease_ms)
        })
    }

    /// One run of the acquire script: the guard, or when to retry at the latest (when
    /// the holder's TTL runs out; never, for a key without TTL).
    fn attempt(
        &self,
        owner: &str,
        lease: Option<Duration>,
        lease_ms: u64,
    ) -> Result<Attempt<RLockGuard<'_>>> {
        let sent = Instant::now();
        let answer = self.client.inner.run(&self.inner.name, |c| {
            scripts::acquire(c, &self.inner.name, owner, lease_ms)
        })?;
        if let Some(ttl) = answer {
            return Ok(Attempt::RetryBy(common::retry_after(ttl)));
        }
        if lease.is_some() {
            self.inner.lease_ms.store(lease_ms, Ordering::Relaxed);
        }
        let state = HoldState::acquired(
            &self.client,
            Renewal::Lock,
            &self.inner.name,
            owner,
            lease,
            sent,
        );
        Ok(Attempt::Done(LockGuard::new(self, state)))
    }

    /// Releases one hold of `owner` under the unlock latch, so that a retry after a lost
    /// reply can never release a second hold. After a failure the state is re-read
    /// rather than guessed (see `common::after_failed_release`).
    fn release(&self, owner: &str, hold: Option<&Hold>) -> Result<()> {
        let name = &self.inner.name;
        let outcome = common::release_with_latch(&self.client, name, |c, latch, latch_ms| {
            scripts::release(
                c,
                &scripts::Release {
                    key: name,
                    channel: &self.inner.channel,
                    latch,
                    owner,
                    lease_ms: self.inner.lease_ms.load(Ordering::Relaxed),
                    latch_ms,
                },
            )
        });
        let outcome = match outcome {
            Ok(outcome) => outcome,
            Err(e) => {
                common::after_failed_release(&self.client, Renewal::Lock, name, owner, &e);
                return Err(e);
            }
        };
        if outcome == Released::Fully {
            // Redisson resets the instance's lease after the last release.
            let watchdog_ms = self.client.config().lock_watchdog_timeout.as_millis() as u64;
            self.inner.lease_ms.store(watchdog_ms, Ordering::Relaxed);
        }
        common::settle_release(&self.client, Renewal::Lock, name, owner, hold, outcome)
    }
}

/// One hold of an [`RLock`], released when dropped.
///
/// Dropping the guard releases the hold and logs a failure at `warn`; call
/// [`unlock`](LockGuard::unlock) to see the `Result`. The guard is not `Send`: the hold belongs
/// to the thread that took it.
///
/// ```compile_fail
/// fn assert_send<T: Send>(_: T) {}
/// let client = redmutex::Client::open("redis://127.0.0.1/").unwrap();
/// let lock = client.get_lock("x");
/// assert_send(lock.lock().unwrap());
/// ```
pub type RLockGuard<'a> = LockGuard<'a, RLock>;

impl HeldLock for RLock {}

// The sealed trait is unnameable outside the crate; its crate-private types are too.
#[allow(private_interfaces)]
impl sealed::Release for RLock {
    const GUARD: &'static str = "RLockGuard";

    fn release_hold(&self, hold: &Hold) -> Result<()> {
        self.release(&self.owner(), Some(hold))
    }

    fn lock_name(&self) -> &str {
        &self.inner.name
    }

    fn lock_client(&self) -> &Client {
        &self.client
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn _assert_send_sync() {
        fn assert<T: Send + Sync>() {}
        assert::<RLock>();
        assert::<Client>();
        assert::<crate::Config>();
        fn assert_sync<T: Sync>() {}
        assert_sync::<RLockGuard<'static>>();
    }
}
