//! Redisson's fair lock `RFairLock`: a reentrant lock granted in request order.

use std::borrow::Cow;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::{Connection, RedisResult};

use super::raw::{Acquire, Answer, Backoff, HeldLock, Leave, Names, RawLock};
use super::reentry::{Counted, Reentry, rule};
use super::safe::{Lock, LockGuard};
use crate::clock::capped_ms;
use crate::error::Result;
use crate::protocol::hash::ReleaseArgs;
use crate::protocol::names;
use crate::protocol::replies::{Forced, Released, UNLOCK_MESSAGE};
use crate::protocol::script::invoke;
use crate::watchdog::Renewal;

/// The kind of Redisson's `RFairLock`: a reentrant lock granted in request order.
///
/// The lock itself is the hash of [`Reentrant`](super::Reentrant): field
/// `<client-id>:<thread-number>` → hold count, TTL = lease, renewed by the watchdog when
/// no lease is given. Waiters queue up in the list `redisson_lock_queue:{name}`; the sorted
/// set `redisson_lock_timeout:{name}` gives each a slot that ends when it should have
/// shown up. A free lock goes to the head of the queue only; a head whose slot ended (a
/// crashed waiter) is purged by the next script that looks at the queue. Each waiter
/// sleeps on its own channel, `redisson_lock__channel:{name}:<owner>`, and an unlock
/// publishes `"0"` only to the next waiter's channel.
///
/// A waiter's slot is its wait time for [`Lock::try_lock_for`] and
/// [`Lock::try_lock_with_lease`], and the thread wait time (5 minutes, Redisson's
/// `fairLockWaitTimeout`) for [`Lock::lock`]; see
/// [`with_thread_wait_time`](Lock::with_thread_wait_time). A waiter that gives up (its
/// wait ran out, an error, shutdown) leaves the queue at once and moves the waiters
/// behind it up, as Redisson's `acquireFailed` does.
///
/// What differs from the other kinds:
/// - [`Lock::try_lock`] never queues: it succeeds only when the lock is free and nobody
///   waits ahead (or the thread holds it already).
/// - Redisson's unlock quirk is kept: when the lock does not exist at all,
///   [`Lock::unlock`] succeeds (and the next waiter is told), unless this client knows
///   the thread held it, which makes it [`Error::LockLost`](crate::Error::LockLost).
/// - [`Lock::force_unlock`] leaves the queue in place and tells the next waiter;
///   [`Lock::delete`] removes the queue too.
///
/// `R` is the reentry policy, as for [`Reentrant`](super::Reentrant): [`Counted`] by
/// default, [`Refused`](super::Refused) for the
/// [`NonReentrantFair`](super::NonReentrantFair) lock, whose refused re-entry is not
/// queued either.
#[derive(Debug)]
pub struct Fair<R: Reentry = Counted> {
    /// The lock and `redisson_lock__channel:{name}`; a waiter's own channel is this plus
    /// `:<owner>`.
    names: Names,
    queue: String,
    timeouts: String,
    /// Redisson's `threadWaitTime`: the queue slot of a waiter that waits without limit.
    thread_wait_ms: u64,
    _reentry: PhantomData<R>,
}

impl<R: Reentry> Fair<R> {
    pub(crate) fn new(name: String, thread_wait: Duration) -> Self {
        Self {
            queue: names::fair_queue(&name),
            timeouts: names::fair_timeouts(&name),
            names: Names::lock(name),
            thread_wait_ms: capped_ms(thread_wait),
            _reentry: PhantomData,
        }
    }

    /// This kind with another thread wait time, the reentry rule kept.
    pub(crate) fn rewaited(&self, thread_wait: Duration) -> Self {
        Self::new(self.names.name.clone(), thread_wait)
    }

    fn fair_keys(&self) -> FairKeys<'_> {
        FairKeys {
            lock: &self.names.name,
            queue: &self.queue,
            timeouts: &self.timeouts,
            channel: &self.names.channel,
        }
    }

    /// The queue slot of a waiter that waits at most `wait`.
    fn slot_ms(&self, wait: Option<Duration>) -> u64 {
        wait.map_or(self.thread_wait_ms, capped_ms)
    }
}

/// A reentrant lock granted in request order, wire-compatible with Redisson's
/// `RFairLock`; see [`Fair`] for its rules and [`Lock`] for its methods.
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
pub type RFairLock = Lock<Fair>;

/// One hold of an [`RFairLock`], released when dropped; see [`LockGuard`].
pub type RFairLockGuard = LockGuard<Fair>;

impl<R: Reentry> Lock<Fair<R>> {
    /// This lock with another thread wait time: the queue slot of a waiter in
    /// [`lock`](Self::lock) and [`lock_with_lease`](Self::lock_with_lease), and what a
    /// [`try_lock`](Self::try_lock) takes off the slots of the waiters behind it. A crashed
    /// waiter blocks the queue for at most this long. Defaults to the client's
    /// [`fair_lock_wait_timeout`](crate::Config::fair_lock_wait_timeout) (5 minutes, as
    /// Redisson's `fairLockWaitTimeout`); use the same value as the Redisson clients that
    /// share the lock. A new instance: its lease for partial releases starts afresh. Does
    /// no I/O.
    #[must_use]
    pub fn with_thread_wait_time(self, wait: Duration) -> Self {
        Self::new(Arc::clone(self.core()), self.kind().rewaited(wait))
    }

    /// Deletes the lock, its queue and its timeouts (Redisson `delete()`); nobody is told,
    /// so waiters retry at their TTL bound. Returns whether any of them existed. Holds of
    /// this client on the lock are reported lost.
    ///
    /// # Errors
    ///
    /// Redis, pool and shutdown errors.
    pub fn delete(&self) -> Result<bool> {
        self.delete_keys()
    }
}

impl<R: Reentry> HeldLock for Fair<R> {}

impl<R: Reentry> RawLock for Fair<R> {
    const LOCK: &'static str = R::FAIR_LOCK;
    const RENEWAL: Renewal = Renewal::Lock;
    const QUEUES: bool = true;

    fn names(&self) -> &Names {
        &self.names
    }

    fn keys(&self) -> Vec<&str> {
        vec![&self.names.name, &self.queue, &self.timeouts]
    }

    fn wait_channel(&self, owner: &str) -> Cow<'_, str> {
        // Our own channel: an unlock wakes only the next waiter, on its channel.
        Cow::Owned(names::fair_waiter_channel(&self.names.name, owner))
    }

    fn acquire(&self, c: &mut Connection, a: &Acquire<'_>) -> RedisResult<Answer> {
        let request = FairAcquire {
            owner: a.owner,
            lease_ms: a.lease_ms,
            wait_ms: self.slot_ms(a.wait),
            now_ms: a.now_ms,
            reentry: rule::<R>(),
        };
        let answer = fair_acquire(c, self.fair_keys(), &request, true).map(Answer::from);
        // The verification harness's seeded bug (test-only feature, inert unless its
        // environment variable is set): a waiter that was queued jumps to the head of the
        // queue, so the unlock tells it first, ahead of waiters that came before it.
        #[cfg(feature = "verify-broken-fair-queue-jump")]
        if crate::verify_broken::active("fair-queue-jump") && matches!(answer, Ok(Answer::Busy(_)))
        {
            let jump = redis::Script::new(include_str!("../../lua/verify/fair_queue_jump.lua"));
            let _: Option<i64> = jump
                .key(&self.queue)
                .key(&self.names.name)
                .arg(a.owner)
                .invoke(c)?;
        }
        answer
    }

    fn try_acquire(&self, c: &mut Connection, a: &Acquire<'_>) -> RedisResult<Answer> {
        let request = FairAcquire {
            owner: a.owner,
            lease_ms: a.lease_ms,
            wait_ms: self.thread_wait_ms,
            now_ms: a.now_ms,
            reentry: rule::<R>(),
        };
        fair_acquire(c, self.fair_keys(), &request, false).map(Answer::from)
    }

    fn release(&self, c: &mut Connection, r: &ReleaseArgs<'_>) -> RedisResult<Released> {
        fair_release(c, self.fair_keys(), r)
    }

    fn force_release(&self, c: &mut Connection, now: u64, publish: &str) -> RedisResult<Forced> {
        fair_force_release(c, self.fair_keys(), now, publish)
    }

    fn retry_by(&self, hint: i64, backoff: &mut Backoff) -> Option<Instant> {
        backoff.retry_by(hint)
    }

    fn leave(&self, c: &mut Connection, l: &Leave<'_>) -> RedisResult<()> {
        // Redisson's `acquireFailed`: leaves the queue and moves the waiters behind up.
        let slot_ms = self.slot_ms(l.wait);
        fair_acquire_failed(c, self.fair_keys(), l.owner, slot_ms, l.publish)
    }
}

// ---- Redis scripts ------------------------------------------------------------

crate::protocol::script::scripts! {
    FAIR_ACQUIRE => "fair/fair_acquire.lua" after ["fair_queue.lua"],
    FAIR_ACQUIRE_FAILED => "fair/fair_acquire_failed.lua" after ["fair_queue.lua"],
    FAIR_RELEASE => "fair/fair_release.lua" after ["fair_queue.lua", "latch.lua"],
    FAIR_FORCE_RELEASE => "fair/fair_force_release.lua" after ["fair_queue.lua"],
}

/// The keys and channel of a fair lock.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FairKeys<'a> {
    pub(crate) lock: &'a str,
    pub(crate) queue: &'a str,
    pub(crate) timeouts: &'a str,
    /// `redisson_lock__channel:{name}`; a waiter's own channel is this plus `:<owner>`.
    pub(crate) channel: &'a str,
}

/// One fair acquisition attempt.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FairAcquire<'a> {
    pub(crate) owner: &'a str,
    pub(crate) lease_ms: u64,
    /// The caller's slot length in the queue.
    pub(crate) wait_ms: u64,
    pub(crate) now_ms: u64,
    pub(crate) reentry: crate::protocol::hash::Reentry,
}

/// Runs the fair acquire: `None` when the caller now holds the lock. Otherwise, when
/// `queue`, the caller is queued and the answer is a retry hint in ms (see
/// `lua/fair/fair_acquire.lua`: > 0 sleep at most that long, 0 the lock is free but another
/// waiter is first, -1 only a message can help); a single attempt answers 1. A refused
/// re-entry is the error `NON_REENTRANT_REACQUIRE`.
pub(crate) fn fair_acquire(
    conn: &mut Connection,
    k: FairKeys<'_>,
    a: &FairAcquire<'_>,
    queue: bool,
) -> RedisResult<Option<i64>> {
    invoke(
        FAIR_ACQUIRE
            .key(k.lock)
            .key(k.queue)
            .key(k.timeouts)
            .arg(a.lease_ms)
            .arg(a.owner)
            .arg(a.wait_ms)
            .arg(a.now_ms)
            .arg(if queue { "1" } else { "0" })
            .arg(a.reentry.arg()),
        conn,
    )
}

/// Takes a waiter that gives up out of the queue, moving the waiters behind it up.
pub(crate) fn fair_acquire_failed(
    conn: &mut Connection,
    k: FairKeys<'_>,
    owner: &str,
    wait_ms: u64,
    publish: &str,
) -> RedisResult<()> {
    invoke::<i64>(
        FAIR_ACQUIRE_FAILED
            .key(k.queue)
            .key(k.timeouts)
            .key(k.lock)
            .key(k.channel)
            .arg(owner)
            .arg(wait_ms)
            .arg(UNLOCK_MESSAGE)
            .arg(publish),
        conn,
    )
    .map(drop)
}

/// Runs the fair release script; [`Released::Missing`] when there was no lock at all.
pub(crate) fn fair_release(
    conn: &mut Connection,
    k: FairKeys<'_>,
    r: &ReleaseArgs<'_>,
) -> RedisResult<Released> {
    invoke(
        FAIR_RELEASE
            .key(k.lock)
            .key(k.queue)
            .key(k.timeouts)
            .key(k.channel)
            .key(r.latch)
            .arg(UNLOCK_MESSAGE)
            .arg(r.lease_ms)
            .arg(r.owner)
            .arg(r.now_ms)
            .arg(r.publish)
            .arg(r.latch_ms),
        conn,
    )
    .and_then(Released::from_value)
}

/// Deletes the fair lock whoever holds it and tells the next waiter.
pub(crate) fn fair_force_release(
    conn: &mut Connection,
    k: FairKeys<'_>,
    now_ms: u64,
    publish: &str,
) -> RedisResult<Forced> {
    invoke::<i64>(
        FAIR_FORCE_RELEASE
            .key(k.lock)
            .key(k.queue)
            .key(k.timeouts)
            .key(k.channel)
            .arg(UNLOCK_MESSAGE)
            .arg(now_ms)
            .arg(publish),
        conn,
    )
    .map(Forced::from_reply)
}
