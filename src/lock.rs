//! Redisson's reentrant `RLock` and its guard.

use std::marker::PhantomData;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;

use crate::client::Client;
use crate::error::{Error, Result};
use crate::names;
use crate::owner;
use crate::pubsub::{WakeRule, Woken};
use crate::scripts::{self, Released};
use crate::watchdog::{self, Hold, Loss};

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

/// How long an acquisition may wait.
#[derive(Clone, Copy)]
enum Wait {
    No,
    Until(Instant),
    Forever,
}

impl Wait {
    fn from_duration(wait: Duration) -> Self {
        match Instant::now().checked_add(wait) {
            Some(deadline) => Self::Until(deadline),
            None => Self::Forever,
        }
    }

    fn deadline(self) -> Option<Instant> {
        match self {
            Self::No => Some(Instant::now()),
            Self::Until(d) => Some(d),
            Self::Forever => None,
        }
    }
}

/// The longest lease accepted; Redis refuses expiry times that overflow.
const MAX_LEASE_MS: u128 = 1 << 45;

fn lease_ms(lease: Duration) -> Result<u64> {
    let ms = lease.as_millis();
    if ms == 0 {
        return Err(Error::Config("a lease must be at least 1 ms".into()));
    }
    if ms > MAX_LEASE_MS {
        return Err(Error::Config(format!(
            "a lease must not exceed {MAX_LEASE_MS} ms"
        )));
    }
    Ok(ms as u64)
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
        let hold = self.client.inner.watchdog.hold(&self.inner.name, &owner);
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
        let ttl: i64 = self.client.inner.run(&self.inner.name, |c| {
            redis::cmd("PTTL").arg(&self.inner.name).query(c)
        })?;
        Ok(match ttl {
            -2 => None,
            -1 => Some(Duration::MAX),
            ms => Some(Duration::from_millis(ms.max(0) as u64)),
        })
    }

    /// The owner field of the current thread.
    fn owner(&self) -> String {
        owner::field(self.client.id(), owner::thread_number())
    }

    /// Redisson's acquisition loop: try; if held, subscribe, then alternate sleeping
    /// (until a wake-up or the holder's TTL) and trying, until acquired or out of time.
    fn acquire(&self, lease: Option<Duration>, wait: Wait) -> Result<Option<RLockGuard<'_>>> {
        let lease_ms = match lease {
            Some(l) => lease_ms(l)?,
            None => self.client.config().lock_watchdog_timeout.as_millis() as u64,
        };
        let owner = self.owner();
        let mut ttl = match self.attempt(&owner, lease, lease_ms)? {
            Ok(guard) => return Ok(Some(guard)),
            Err(ttl) => ttl,
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
        let deadline = wait.deadline();
        loop {
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) {
                return Ok(None);
            }
            // A negative TTL means the key has no expiry: only a message can help then.
            let holder_ends = u64::try_from(ttl)
                .ok()
                .and_then(|ms| now.checked_add(Duration::from_millis(ms)));
            let until = match (holder_ends, deadline) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            if subscription.wait(until) == Woken::Closed {
                return Err(Error::Shutdown);
            }
            match self.attempt(&owner, lease, lease_ms)? {
                Ok(guard) => return Ok(Some(guard)),
                Err(remaining) => ttl = remaining,
            }
        }
    }

    /// One run of the acquire script: the guard, or the holder's TTL in ms.
    fn attempt(
        &self,
        owner: &str,
        lease: Option<Duration>,
        lease_ms: u64,
    ) -> Result<Result<RLockGuard<'_>, i64>> {
        let sent = Instant::now();
        let answer = self.client.inner.run(&self.inner.name, |c| {
            scripts::acquire(c, &self.inner.name, owner, lease_ms)
        })?;
        if let Some(ttl) = answer {
            return Ok(Err(ttl));
        }
        let (hold, renewed) = match lease {
            Some(lease) => {
                self.inner.lease_ms.store(lease_ms, Ordering::Relaxed);
                (Arc::new(Hold::new(sent + lease)), false)
            }
            None => {
                let end = sent + self.client.config().lock_watchdog_timeout;
                (
                    self.client
                        .inner
                        .watchdog
                        .register(&self.inner.name, owner, end),
                    true,
                )
            }
        };
        Ok(Ok(RLockGuard {
            lock: self,
            hold,
            renewed,
            done: false,
            _not_send: PhantomData,
        }))
    }

    /// After a release that failed, works out from Redis what happened instead of
    /// guessing, and keeps the watchdog registry in step with it.
    ///
    /// A script error can come after some of its writes (an ACL that refuses the
    /// `PUBLISH` after the `DEL` ran), and a timeout leaves the outcome unknown. Either way
    /// the caller's hold is given up: if it is still in Redis it is no longer renewed and
    /// expires after its lease.
    fn after_failed_release(&self, owner: &str, err: &Error) {
        let inner = &self.client.inner;
        let left: Result<Option<u64>> = inner.run(&self.inner.name, |c| {
            redis::cmd("HGET").arg(&self.inner.name).arg(owner).query(c)
        });
        let gone = matches!(left, Ok(None));
        match left {
            Ok(None) => log::warn!(
                "redmutex: release of {:?} took effect but failed afterwards (waiters elsewhere \
                 fall back to the TTL): {err}",
                self.inner.name
            ),
            Ok(Some(n)) => log::warn!(
                "redmutex: release of {:?} failed, {n} hold(s) remain and expire with the \
                 lease: {err}",
                self.inner.name
            ),
            Err(read) => log::warn!(
                "redmutex: release of {:?} failed and its outcome is unknown ({read}): {err}",
                self.inner.name
            ),
        }
        inner.watchdog.unregister(&self.inner.name, owner, gone);
    }

    /// Releases one hold of `owner`, retrying on connection failures with one request id
    /// so that a retry can never release a second hold.
    fn release(&self, owner: &str, hold: Option<&Hold>) -> Result<()> {
        let inner = &self.client.inner;
        let request_id = uuid::Uuid::new_v4().simple().to_string();
        let latch = names::unlock_latch(&self.inner.name, &request_id);
        let request = scripts::Release {
            key: &self.inner.name,
            channel: &self.inner.channel,
            latch: &latch,
            owner,
            lease_ms: self.inner.lease_ms.load(Ordering::Relaxed),
            latch_ms: inner.config.unlock_latch_ms(),
        };
        let mut attempt = 0;
        let outcome = loop {
            match inner.run(&self.inner.name, |c| scripts::release(c, &request)) {
                Ok(outcome) => break outcome,
                Err(e) if e.is_transient() && attempt < inner.config.retry_attempts => {
                    log::debug!("redmutex: retrying release of {:?}: {e}", self.inner.name);
                    std::thread::sleep(inner.config.retry_delay_for(attempt));
                    attempt += 1;
                }
                Err(e) => {
                    self.after_failed_release(owner, &e);
                    return Err(e);
                }
            }
        };
        inner.watchdog.discard_latch(latch);
        match outcome {
            Released::NotHeld => {
                inner.watchdog.unregister(&self.inner.name, owner, true);
                let name = self.inner.name.clone();
                Err(match hold {
                    // We held it once, so finding no hold now means it was lost.
                    Some(hold) => {
                        hold.mark(Loss::Lost);
                        Error::LockLost { name }
                    }
                    None => Error::NotHeld { name },
                })
            }
            Released::Partly => {
                inner.watchdog.unregister(&self.inner.name, owner, false);
                Ok(())
            }
            Released::Fully => {
                inner.watchdog.unregister(&self.inner.name, owner, false);
                let watchdog_ms = inner.config.lock_watchdog_timeout.as_millis() as u64;
                self.inner.lease_ms.store(watchdog_ms, Ordering::Relaxed);
                Ok(())
            }
        }
    }
}

/// One hold of an [`RLock`], released when dropped.
///
/// Dropping the guard releases the hold and logs a failure at `warn`; call
/// [`unlock`](Self::unlock) to see the `Result`. The guard is not `Send`: the hold belongs
/// to the thread that took it.
///
/// ```compile_fail
/// fn assert_send<T: Send>(_: T) {}
/// let client = redmutex::Client::open("redis://127.0.0.1/").unwrap();
/// let lock = client.get_lock("x");
/// assert_send(lock.lock().unwrap());
/// ```
#[must_use = "if unused the lock is released immediately"]
#[clippy::has_significant_drop]
pub struct RLockGuard<'a> {
    lock: &'a RLock,
    hold: Arc<Hold>,
    /// Held under the watchdog (no explicit lease).
    renewed: bool,
    /// Released or detached already.
    done: bool,
    _not_send: PhantomData<std::sync::MutexGuard<'static, ()>>,
}

impl std::fmt::Debug for RLockGuard<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RLockGuard")
            .field("lock", &self.lock.name())
            .field("renewed", &self.renewed)
            .field("lost", &self.is_lost())
            .finish()
    }
}

impl RLockGuard<'_> {
    /// Releases this hold and reports how that went.
    ///
    /// # Errors
    ///
    /// [`Error::LockLost`] when the hold was already gone (lease expired, key deleted or
    /// taken over): whatever the guard protected may have been touched by another holder.
    /// Redis, pool and shutdown errors otherwise; then the hold is not renewed any more
    /// and the lock expires after its lease if the release did not reach Redis.
    pub fn unlock(mut self) -> Result<()> {
        self.done = true;
        self.lock.release(&self.lock.owner(), Some(&self.hold))
    }

    /// Keeps the hold but gives up the guard: dropping nothing releases it, and the
    /// watchdog goes on renewing it. Release it later, on the same thread, with
    /// [`RLock::unlock`], as Redisson code that unlocks in another method does.
    pub fn detach(mut self) {
        self.done = true;
    }

    /// Whether this hold is known or presumed lost, without asking Redis: the watchdog
    /// found the key gone or owned by another, renewal failed until the lease may have
    /// ended, or an explicit lease ran out on this process's clock.
    pub fn is_lost(&self) -> bool {
        self.loss().is_some()
    }

    /// Why the hold is no longer trusted, if it is not. See [`is_lost`](Self::is_lost).
    pub fn loss(&self) -> Option<Loss> {
        if let Some(loss) = self.hold.loss() {
            return Some(loss);
        }
        // The lease end is known locally: from the acquire, or from the last renewal
        // Redis confirmed. Past it, the key may have expired, whatever the watchdog has
        // or has not noticed yet; this is what tells a process that was frozen (a GC
        // pause, SIGSTOP) longer than its lease, the moment it runs again.
        let now = Instant::now();
        if !self.renewed {
            return (now >= self.hold.lease_end()).then_some(Loss::Lost);
        }
        // The watchdog's rule: presumed lost when renewal is not confirmed in time.
        let margin = watchdog::warning_margin(self.lock.client.config().lock_watchdog_timeout);
        let warn_at = self.hold.lease_end().checked_sub(margin);
        warn_at
            .is_none_or(|at| now >= at)
            .then_some(Loss::PossiblyLost)
    }

    /// A channel that receives one [`Loss`] when the watchdog finds this hold lost or
    /// presumed lost (at once if it already was). Explicit-lease holds are not watched:
    /// check [`is_lost`](Self::is_lost) or the lease instead.
    pub fn loss_signal(&self) -> Receiver<Loss> {
        self.hold.subscribe()
    }

    /// The lock this guard holds.
    pub fn lock(&self) -> &RLock {
        self.lock
    }
}

impl Drop for RLockGuard<'_> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        if let Err(e) = self.lock.release(&self.lock.owner(), Some(&self.hold)) {
            log::warn!(
                "redmutex: releasing {:?} on drop failed: {e}",
                self.lock.name()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leases_are_checked() {
        assert!(lease_ms(Duration::ZERO).is_err());
        assert!(lease_ms(Duration::from_micros(999)).is_err());
        assert_eq!(lease_ms(Duration::from_secs(2)).unwrap(), 2000);
        assert!(lease_ms(Duration::MAX).is_err());
    }

    fn _assert_send_sync() {
        fn assert<T: Send + Sync>() {}
        assert::<RLock>();
        assert::<Client>();
        assert::<crate::Config>();
        fn assert_sync<T: Sync>() {}
        assert_sync::<RLockGuard<'static>>();
    }
}
