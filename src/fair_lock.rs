//! Redisson's fair lock `RFairLock` and its guard.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::client::Client;
use crate::common::{self, Attempt, HoldState, Wait};
use crate::error::{Error, Result, is_connection_error};
use crate::guard::{HeldLock, LockGuard, sealed};
use crate::names;
use crate::owner;
use crate::pubsub::WakeRule;
use crate::scripts::{self, FairAcquire, FairKeys, FairRelease, FairReleased, Released};
use crate::watchdog::{Hold, Loss, Renewal};

/// Shortest and longest pause between retries while the lock is free but another waiter
/// is first in line (see [`Backoff`]).
const MIN_BACKOFF: Duration = Duration::from_millis(10);
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// A reentrant lock that is granted in request order, wire-compatible with Redisson's
/// `RFairLock`.
///
/// The lock itself is the hash of [`RLock`](crate::RLock): field
/// `<client-id>:<thread-number>` → hold count, TTL = lease, renewed by the watchdog when
/// no lease is given. Waiters queue up in the list `redisson_lock_queue:{name}`; the sorted
/// set `redisson_lock_timeout:{name}` gives each a slot that ends when it should have
/// shown up. A free lock goes to the head of the queue only; a head whose slot ended
/// (a crashed waiter) is purged by the next script that looks at the queue. Each waiter
/// sleeps on its own channel, `redisson_lock__channel:{name}:<owner>`, and an unlock
/// publishes `"0"` only to the next waiter's channel.
///
/// A waiter's slot is its wait time for [`try_lock_for`](Self::try_lock_for) and
/// [`try_lock_with_lease`](Self::try_lock_with_lease), and the thread wait time (5
/// minutes, Redisson's `fairLockWaitTimeout`) for [`lock`](Self::lock); see
/// [`with_thread_wait_time`](Self::with_thread_wait_time). A waiter that gives up (its
/// wait ran out, an error, shutdown) leaves the queue at once and moves the waiters
/// behind it up, as Redisson's `acquireFailed` does.
///
/// Holds belong to the thread that took them, as with `RLock`: guards are not `Send`.
/// Cloning is cheap; clones are the same lock and share the instance's lease for partial
/// releases.
///
/// # Examples
///
/// ```no_run
/// use std::time::Duration;
///
/// let client = redmutex::Client::open("redis://127.0.0.1:6379")?;
/// let lock = client.get_fair_lock("printer");
/// if let Some(guard) = lock.try_lock_for(Duration::from_secs(5))? {
///     // ... our turn ...
///     guard.unlock()?;
/// }
/// # Ok::<(), redmutex::Error>(())
/// ```
#[derive(Clone)]
pub struct RFairLock {
    client: Client,
    inner: Arc<FairInner>,
}

struct FairInner {
    name: String,
    /// `redisson_lock__channel:{name}`; a waiter's own channel is this plus `:<owner>`.
    channel: String,
    queue: String,
    timeouts: String,
    /// Redisson's `internalLockLeaseTime`: what a partial release sets the TTL to.
    lease_ms: AtomicU64,
    /// Redisson's `threadWaitTime`: the queue slot of a waiter that waits without limit.
    thread_wait_ms: u64,
}

impl std::fmt::Debug for RFairLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RFairLock")
            .field("name", &self.inner.name)
            .field("client", &self.client.id())
            .field("thread_wait_ms", &self.inner.thread_wait_ms)
            .finish()
    }
}

impl RFairLock {
    pub(crate) fn new(client: Client, name: String) -> Self {
        let lease_ms = client.config().lock_watchdog_timeout.as_millis() as u64;
        Self {
            inner: Arc::new(FairInner {
                channel: names::lock_channel(&name),
                queue: names::fair_queue(&name),
                timeouts: names::fair_timeouts(&name),
                name,
                lease_ms: AtomicU64::new(lease_ms),
                thread_wait_ms: common::capped_ms(client.config().fair_lock_wait_timeout()),
            }),
            client,
        }
    }

    /// This lock with another thread wait time: the queue slot of a waiter in
    /// [`lock`](Self::lock) and [`lock_with_lease`](Self::lock_with_lease), and what a
    /// [`try_lock`](Self::try_lock) takes off the slots of the waiters behind it. A crashed
    /// waiter blocks the queue for at most this long. Defaults to the client's
    /// [`fair_lock_wait_timeout`](crate::Config::fair_lock_wait_timeout) (5 minutes, as
    /// Redisson's `fairLockWaitTimeout`); use the same value as the Redisson clients that
    /// share the lock. Does no I/O.
    #[must_use]
    pub fn with_thread_wait_time(self, wait: Duration) -> Self {
        Self {
            inner: Arc::new(FairInner {
                name: self.inner.name.clone(),
                channel: self.inner.channel.clone(),
                queue: self.inner.queue.clone(),
                timeouts: self.inner.timeouts.clone(),
                lease_ms: AtomicU64::new(self.inner.lease_ms.load(Ordering::Relaxed)),
                thread_wait_ms: common::capped_ms(wait),
            }),
            client: self.client,
        }
    }

    /// The lock's name, which is also its Redis key.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Queues up, waits as long as it takes, then holds the lock under the watchdog
    /// (Redisson `lock()`).
    ///
    /// # Errors
    ///
    /// Redis, pool and shutdown errors; [`Error::WrongType`] when a key has another type.
    pub fn lock(&self) -> Result<RFairLockGuard<'_>> {
        self.acquire(None, None)
            .and_then(|g| g.ok_or(Error::Shutdown))
    }

    /// Queues up, waits as long as it takes, then holds the lock for `lease`, never
    /// renewed (Redisson `lock(leaseTime)`).
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock); [`Error::Config`] for a zero or absurd lease.
    pub fn lock_with_lease(&self, lease: Duration) -> Result<RFairLockGuard<'_>> {
        self.acquire(Some(lease), None)
            .and_then(|g| g.ok_or(Error::Shutdown))
    }

    /// One attempt that never queues: succeeds only when the lock is free and nobody is
    /// waiting ahead (or the thread holds it already); held under the watchdog (Redisson
    /// `tryLock()`).
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock).
    pub fn try_lock(&self) -> Result<Option<RFairLockGuard<'_>>> {
        let lease_ms = self.watchdog_ms();
        let owner = self.owner();
        let sent = Instant::now();
        let acquired = self.client.inner.run(&self.inner.name, |c| {
            scripts::fair_try_acquire(
                c,
                &self.request(&owner, lease_ms, self.inner.thread_wait_ms),
            )
        })?;
        Ok(acquired.then(|| self.guard(&owner, None, lease_ms, sent)))
    }

    /// Queues up and waits at most `wait`, which is also the length of the queue slot;
    /// held under the watchdog on success (Redisson `tryLock(waitTime, unit)`). On
    /// `Ok(None)` the thread has left the queue again.
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock).
    pub fn try_lock_for(&self, wait: Duration) -> Result<Option<RFairLockGuard<'_>>> {
        self.acquire(None, Some(wait))
    }

    /// Queues up and waits at most `wait`, then holds the lock for `lease`, never renewed
    /// (Redisson `tryLock(waitTime, leaseTime, unit)`).
    ///
    /// # Errors
    ///
    /// As [`lock_with_lease`](Self::lock_with_lease).
    pub fn try_lock_with_lease(
        &self,
        wait: Duration,
        lease: Duration,
    ) -> Result<Option<RFairLockGuard<'_>>> {
        self.acquire(Some(lease), Some(wait))
    }

    /// Releases one hold of the current thread (Redisson `unlock()`), for holds whose guard
    /// was [detached](RFairLockGuard::detach).
    ///
    /// Redisson's quirk is kept: when the lock does not exist at all, the call succeeds
    /// (and the next waiter is told), unless this client knows the thread held it under
    /// the watchdog, which makes it [`Error::LockLost`].
    ///
    /// # Errors
    ///
    /// [`Error::NotHeld`] when the lock is held by others only; [`Error::LockLost`] as
    /// above; Redis, pool and shutdown errors.
    pub fn unlock(&self) -> Result<()> {
        let owner = self.owner();
        let hold = self
            .client
            .inner
            .watchdog
            .hold(Renewal::Lock, &self.inner.name, &owner);
        self.release(&owner, hold.as_deref())
    }

    /// Deletes the lock whoever holds it and tells the next waiter (Redisson
    /// `forceUnlock()`); the queue stays. Returns whether there was a lock. Holds of this
    /// client on it are reported lost.
    ///
    /// # Errors
    ///
    /// Redis, pool and shutdown errors.
    pub fn force_unlock(&self) -> Result<bool> {
        let deleted = self.client.inner.run(&self.inner.name, |c| {
            scripts::fair_force_release(c, self.keys(), &self.inner.channel)
        })?;
        self.client.inner.watchdog.forget_lock(&self.inner.name);
        Ok(deleted)
    }

    /// Deletes the lock, its queue and its timeouts (Redisson `delete()`); nobody is told,
    /// so waiters retry at their TTL bound. Returns whether any of them existed.
    ///
    /// # Errors
    ///
    /// Redis, pool and shutdown errors.
    pub fn delete(&self) -> Result<bool> {
        let deleted: i64 = self.client.inner.run(&self.inner.name, |c| {
            redis::cmd("DEL")
                .arg(&self.inner.name)
                .arg(&self.inner.queue)
                .arg(&self.inner.timeouts)
                .query(c)
        })?;
        self.client.inner.watchdog.forget_lock(&self.inner.name);
        Ok(deleted > 0)
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

    fn owner(&self) -> String {
        owner::field(self.client.id(), owner::thread_number())
    }

    fn watchdog_ms(&self) -> u64 {
        self.client.config().lock_watchdog_timeout.as_millis() as u64
    }

    fn keys(&self) -> FairKeys<'_> {
        FairKeys {
            lock: &self.inner.name,
            queue: &self.inner.queue,
            timeouts: &self.inner.timeouts,
        }
    }

    fn request<'a>(&'a self, owner: &'a str, lease_ms: u64, slot_ms: u64) -> FairAcquire<'a> {
        FairAcquire {
            keys: self.keys(),
            owner,
            lease_ms,
            wait_ms: slot_ms,
            now_ms: common::now_ms(),
        }
    }

    /// The queueing acquisition of `lock*` and `try_lock_for`/`_with_lease`; `wait` is
    /// `None` for no limit.
    fn acquire(
        &self,
        lease: Option<Duration>,
        wait: Option<Duration>,
    ) -> Result<Option<RFairLockGuard<'_>>> {
        let lease_ms = match lease {
            Some(l) => common::lease_ms(l)?,
            None => self.watchdog_ms(),
        };
        let (slot_ms, wait) = match wait {
            Some(w) => (common::capped_ms(w), Wait::from_duration(w)),
            None => (self.inner.thread_wait_ms, Wait::Forever),
        };
        let owner = self.owner();
        let outcome = self.queue_and_wait(&owner, lease, lease_ms, slot_ms, wait);
        // Whatever kept us from the lock (the wait ran out, an error, shutdown), our place
        // in the queue must go now: left there, it would hold up every waiter behind us
        // until its slot ends, up to the thread wait time.
        if !matches!(outcome, Ok(Some(_))) {
            self.give_up(&owner, slot_ms);
        }
        outcome
    }

    fn queue_and_wait(
        &self,
        owner: &str,
        lease: Option<Duration>,
        lease_ms: u64,
        slot_ms: u64,
        wait: Wait,
    ) -> Result<Option<RFairLockGuard<'_>>> {
        let hint = match self.attempt(owner, lease, lease_ms, slot_ms)? {
            Ok(guard) => return Ok(Some(guard)),
            Err(hint) => hint,
        };
        // Our own channel: an unlock wakes only the next waiter, on its channel.
        // Subscribed before the next attempt: see the lost-wake-up argument in pubsub.rs.
        let channel = names::fair_waiter_channel(&self.inner.name, owner);
        let subscription = self
            .client
            .inner
            .listener
            .subscribe(&channel, WakeRule::Lock)?;
        let mut backoff = Backoff::new();
        let first = backoff.retry_by(hint);
        common::wait_turns(&subscription, wait.deadline(), first, || {
            Ok(match self.attempt(owner, lease, lease_ms, slot_ms)? {
                Ok(guard) => Attempt::Done(guard),
                Err(hint) => Attempt::RetryBy(backoff.retry_by(hint)),
            })
        })
    }

    /// One run of the queueing acquire script: the guard, or the retry hint.
    fn attempt(
        &self,
        owner: &str,
        lease: Option<Duration>,
        lease_ms: u64,
        slot_ms: u64,
    ) -> Result<Result<RFairLockGuard<'_>, i64>> {
        let sent = Instant::now();
        let answer = self.client.inner.run(&self.inner.name, |c| {
            scripts::fair_acquire(c, &self.request(owner, lease_ms, slot_ms))
        })?;
        Ok(match answer {
            Some(hint) => Err(hint),
            None => Ok(self.guard(owner, lease, lease_ms, sent)),
        })
    }

    fn guard(
        &self,
        owner: &str,
        lease: Option<Duration>,
        lease_ms: u64,
        sent: Instant,
    ) -> RFairLockGuard<'_> {
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
        LockGuard::new(self, state)
    }

    /// Redisson's `acquireFailed`: leaves the queue and moves the waiters behind us up.
    /// Safe to repeat (once we are out, it changes nothing), so it is retried on
    /// connection failures. It also runs while the client shuts down (a waiter woken by
    /// the shutdown still owns a place in the queue), hence the pool instead of `run`.
    fn give_up(&self, owner: &str, slot_ms: u64) {
        let inner = &self.client.inner;
        let mut attempt = 0;
        loop {
            let result = inner
                .pool
                .get()
                .map_err(Error::from)
                .and_then(|mut pooled| {
                    scripts::fair_acquire_failed(
                        &mut pooled.conn,
                        self.keys(),
                        &self.inner.channel,
                        owner,
                        slot_ms,
                    )
                    .map_err(|e| {
                        // A connection whose reply went missing must not be reused.
                        pooled.broken = is_connection_error(&e);
                        Error::from_redis(&self.inner.name, e)
                    })
                });
            match result {
                Ok(()) => return,
                Err(e)
                    if e.is_transient()
                        && attempt < inner.config.retry_attempts
                        && !self.client.is_shut_down() =>
                {
                    std::thread::sleep(inner.config.retry_delay_for(attempt));
                    attempt += 1;
                }
                Err(e) => {
                    log::warn!(
                        "redmutex: could not leave the queue of fair lock {:?}; the place \
                         is purged when its slot ends: {e}",
                        self.inner.name
                    );
                    return;
                }
            }
        }
    }

    /// Releases one hold of `owner` under the unlock latch.
    fn release(&self, owner: &str, hold: Option<&Hold>) -> Result<()> {
        let name = &self.inner.name;
        let outcome = common::release_with_latch(&self.client, name, |c, latch, latch_ms| {
            scripts::fair_release(
                c,
                &FairRelease {
                    keys: self.keys(),
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
        if matches!(
            outcome,
            FairReleased::Missing | FairReleased::Released(Released::Fully)
        ) {
            self.inner
                .lease_ms
                .store(self.watchdog_ms(), Ordering::Relaxed);
        }
        match outcome {
            FairReleased::Released(released) => {
                common::settle_release(&self.client, Renewal::Lock, name, owner, hold, released)
            }
            FairReleased::Missing => {
                self.client
                    .inner
                    .watchdog
                    .unregister(Renewal::Lock, name, owner, true);
                match hold {
                    // Redisson calls this a successful unlock; a hold we knew of is
                    // gone though, and its guard says so.
                    Some(hold) => {
                        hold.mark(Loss::Lost);
                        Err(Error::LockLost { name: name.clone() })
                    }
                    None => Ok(()),
                }
            }
        }
    }
}

/// The retry bound for a fair waiter's script answer.
///
/// A positive answer is the lock's remaining lease (or the head's remaining slot): a
/// retry by then finds the lock expired or the head purged. -1 means only a message can
/// help. 0 means the lock is free while another waiter is first in line; normally that
/// waiter takes the lock within milliseconds, after which the answer is its lease again.
/// Only if it has died does the state last (until its slot ends), so a short, growing
/// pause is the cheapest way to follow it. Redisson's waiter retries at once here,
/// spinning.
struct Backoff(Duration);

impl Backoff {
    fn new() -> Self {
        Self(MIN_BACKOFF)
    }

    fn retry_by(&mut self, hint: i64) -> Option<Instant> {
        if hint != 0 {
            self.0 = MIN_BACKOFF;
            return common::retry_after(hint);
        }
        let pause = self.0;
        self.0 = (self.0 * 2).min(MAX_BACKOFF);
        Instant::now().checked_add(pause)
    }
}

/// One hold of an [`RFairLock`], released when dropped.
///
/// Dropping the guard releases the hold and logs a failure at `warn`; call
/// [`unlock`](LockGuard::unlock) to see the `Result`. Not `Send`: the hold belongs to the
/// thread that took it.
///
/// ```compile_fail
/// fn assert_send<T: Send>(_: T) {}
/// let client = redmutex::Client::open("redis://127.0.0.1/").unwrap();
/// let lock = client.get_fair_lock("x");
/// assert_send(lock.lock().unwrap());
/// ```
pub type RFairLockGuard<'a> = LockGuard<'a, RFairLock>;

impl HeldLock for RFairLock {}

// The sealed trait is unnameable outside the crate; its crate-private types are too.
#[allow(private_interfaces)]
impl sealed::Release for RFairLock {
    const GUARD: &'static str = "RFairLockGuard";

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

    #[test]
    fn backoff_grows_only_while_the_answer_is_zero() {
        let mut b = Backoff::new();
        let now = Instant::now();
        assert!(b.retry_by(-1).is_none());
        let first = b.retry_by(0).unwrap();
        assert!(first <= Instant::now() + MIN_BACKOFF);
        for _ in 0..20 {
            b.retry_by(0);
        }
        assert_eq!(b.0, MAX_BACKOFF);
        assert!(b.retry_by(500).unwrap() >= now + Duration::from_millis(500));
        assert_eq!(b.0, MIN_BACKOFF);
    }

    fn _assert_send_sync() {
        fn assert<T: Send + Sync>() {}
        assert::<RFairLock>();
        fn assert_sync<T: Sync>() {}
        assert_sync::<RFairLockGuard<'static>>();
    }
}
