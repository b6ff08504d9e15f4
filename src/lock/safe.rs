//! The safe layer over every kind: [`Lock<K>`] with the lock methods, the acquire loop
//! and the release sequence, written once, and its guard [`LockGuard<K>`] (beside it, as
//! lock_api keeps a mutex and its guard in one file).

use std::marker::PhantomData;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;

use super::fenced_write::FencedWrite;
use super::hold_state::HoldState;
use super::raw::{self, Answer, Backoff, HeldLock, Leave};
use crate::cancel::Cancel;
use crate::clock::{self, Wait};
use crate::core::Core;
use crate::error::{Error, Result};
use crate::hold::{Hold, Loss};
use crate::metrics;
use crate::names;
use crate::owner;
use crate::pubsub::{Interest, WakeRule};
use crate::scripts::{self, Forced, ReleaseArgs, Released};
use crate::transport::replica_sync::Synced;
use crate::wait::{self, Attempt};

/// At most this many unknown holds are released after a thread's last release (see
/// [`Lock::release_unknown_holds`]); more would need that many lost replies.
const MAX_UNKNOWN_HOLDS: u32 = 64;

/// A distributed lock of kind `K`, wire-compatible with the Redisson lock of that kind.
///
/// Every kind is a Redis hash `name` whose field `<client-id>:<thread-number>` (plus
/// `:write` for a write hold) counts the holds of one thread of one client, with the key's
/// TTL as the lease. Taking the lock without a lease gives it the client's
/// [watchdog timeout](crate::Config::lock_watchdog_timeout) and the watchdog renews it
/// until the last hold is released; taking it with a lease lets it expire after the lease,
/// unrenewed. A waiting thread sleeps until an unlock message or until the holder's lease
/// would end, whichever comes first.
///
/// Holds belong to the thread that took them: guards are not `Send`, and each thread of
/// a client is a distinct owner, as each Java thread is for Redisson. A thread may take a
/// lock it already holds; each acquisition is one more hold with its own guard.
///
/// Cloning is cheap (an `Arc`); clones are the same lock and share Redisson's
/// per-instance lease: the lease a partial release re-applies is the last explicit lease
/// taken through this instance, else the watchdog timeout.
///
/// # Examples
///
/// ```no_run
/// use std::time::Duration;
///
/// let client = redmutex::Client::open("redis://127.0.0.1:6379")?;
/// let lock = client.get_lock("invoice:2024-17"); // an RLock = Lock<Reentrant>; no I/O yet
/// {
///     let _guard = lock.lock()?; // held until the end of the block
///     // ... the critical section ...
/// }
/// // Wait at most 2 s; hold at most 10 s, never renewed.
/// if let Some(guard) = lock.try_lock_with_lease(Duration::from_secs(2), Duration::from_secs(10))? {
///     guard.unlock()?; // see the release's result, where a drop only logs it
/// }
/// # Ok::<(), redmutex::Error>(())
/// ```
pub struct Lock<K: HeldLock> {
    shared: Arc<Shared<K>>,
}

struct Shared<K> {
    core: Arc<Core>,
    kind: K,
    /// Redisson's `internalLockLeaseTime`: what a partial release sets the TTL to.
    lease_ms: AtomicU64,
}

impl<K: HeldLock> Clone for Lock<K> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<K: HeldLock> std::fmt::Debug for Lock<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct(K::LOCK)
            .field("name", &self.name())
            .field("client", &self.shared.core.id())
            .finish()
    }
}

/// How long an acquisition may wait.
#[derive(Clone, Copy)]
pub(super) enum Patience {
    /// One attempt with the kind's single-attempt script; never queues.
    Once,
    /// At most this long (also a fair waiter's queue slot).
    For(Duration),
    /// As long as it takes.
    Forever,
}

/// One acquisition request, the same for every attempt it makes.
struct Request<'a> {
    owner: &'a str,
    lease: Option<Duration>,
    lease_ms: u64,
    patience: Patience,
}

impl<K: HeldLock> Lock<K> {
    pub(crate) fn new(core: Arc<Core>, kind: K) -> Self {
        let lease_ms = core.watchdog_ms();
        Self {
            shared: Arc::new(Shared {
                core,
                kind,
                lease_ms: AtomicU64::new(lease_ms),
            }),
        }
    }

    pub(super) fn core(&self) -> &Arc<Core> {
        &self.shared.core
    }

    pub(crate) fn kind(&self) -> &K {
        &self.shared.kind
    }

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

    /// Waits as long as it takes, then holds the lock under the watchdog (Redisson
    /// `lock()`).
    ///
    /// # Errors
    ///
    /// Redis, pool and shutdown errors; [`Error::WrongType`] when a key of the lock has
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
        self.acquire(Some(lease), Patience::For(wait))
    }

    /// Releases one hold of the current thread, like Redisson's `unlock()`. For holds
    /// whose guard was [detached](LockGuard::detach); a guard's own release is
    /// [`LockGuard::unlock`].
    ///
    /// # Errors
    ///
    /// [`Error::NotHeld`] when the thread holds no hold; [`Error::LockLost`] when the
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
    pub(super) fn unlock_field(&self, owner: &str) -> Result<()> {
        let hold = self.core().watchdog().hold(K::RENEWAL, self.name(), owner);
        self.release(owner, hold.as_deref())
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
        let forced = self.core().run(self.name(), |c| {
            self.kind().force_release(c, clock::now_ms(), publish)
        })?;
        // Afterwards the key is gone, so are all of this client's holds on it; only a
        // read-write half that found the lock in the other mode leaves it, with the holds
        // of that mode (and the downgrade reads of its writer) intact.
        if forced != Forced::Kept {
            self.core().watchdog().forget_lock(self.name());
            self.core().levels().forget_lock(self.name());
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
        self.core().run(self.name(), |c| self.kind().is_locked(c))
    }

    /// Whether the current thread holds the lock (`HEXISTS` of its owner field).
    ///
    /// # Errors
    ///
    /// Redis, pool and shutdown errors; [`Error::WrongType`] when the key is not a hash.
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
    pub(super) fn is_held_by_field(&self, owner: &str) -> Result<bool> {
        self.core().run(self.name(), |c| {
            redis::cmd("HEXISTS").arg(self.name()).arg(owner).query(c)
        })
    }

    /// How many holds the current thread has (`HGET` of its owner field); 0 when none.
    ///
    /// # Errors
    ///
    /// Redis, pool and shutdown errors; [`Error::WrongType`] when the key is not a hash.
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
        let count: Option<u32> = self.core().run(self.name(), |c| {
            redis::cmd("HGET").arg(self.name()).arg(&owner).query(c)
        })?;
        Ok(count.unwrap_or(0))
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
        self.core().remain_time_to_live(self.name())
    }

    /// Deletes every key of the lock (a fair lock's queue, a fenced lock's counter), with
    /// no message, as Redisson's `delete()` of those kinds; true when any existed. Holds
    /// of this client on the lock are reported lost.
    pub(super) fn delete_keys(&self) -> Result<bool> {
        let keys = self.kind().keys();
        let deleted: i64 = self
            .core()
            .run(self.name(), |c| redis::cmd("DEL").arg(&keys).query(c))?;
        self.core().watchdog().forget_lock(self.name());
        self.core().levels().forget_lock(self.name());
        Ok(deleted > 0)
    }

    /// The lock's name as a metrics label, if the client labels with names.
    fn label(&self) -> Option<&str> {
        self.core()
            .config()
            .metrics_lock_names()
            .then(|| self.name())
    }

    /// The owner field of the current thread.
    pub(super) fn owner(&self) -> String {
        K::owner(self.core().id(), owner::thread_number())
    }

    /// [`acquire`](Self::acquire) without a deadline.
    fn acquire_forever(&self, lease: Option<Duration>) -> Result<LockGuard<K>> {
        self.acquire_forever_as(&self.owner(), lease, None)
    }

    /// [`acquire_as`](Self::acquire_as) without a deadline.
    pub(super) fn acquire_forever_as(
        &self,
        owner: &str,
        lease: Option<Duration>,
        cancel: Option<&Cancel>,
    ) -> Result<LockGuard<K>> {
        // Without a deadline only a success or an error ends the wait (shutdown and a
        // cancel come as errors), so `None` cannot come back; it maps to `Shutdown`
        // rather than a panic.
        self.acquire_as(owner, lease, Patience::Forever, cancel)?
            .ok_or(Error::Shutdown)
    }

    /// [`acquire_as`](Self::acquire_as) for the current thread, without a cancel.
    pub(super) fn acquire(
        &self,
        lease: Option<Duration>,
        patience: Patience,
    ) -> Result<Option<LockGuard<K>>> {
        self.acquire_as(&self.owner(), lease, patience, None)
    }

    /// Redisson's acquisition loop for the owner field `owner`: try; if held, subscribe,
    /// then alternate sleeping (until a wake-up or the holder's TTL) and trying, until
    /// acquired, out of patience or cancelled. A waiter that gives up, for whatever
    /// reason, leaves the queue of a queueing kind at once: left there, its place would
    /// hold up every waiter behind it until its slot ended.
    pub(super) fn acquire_as(
        &self,
        owner: &str,
        lease: Option<Duration>,
        patience: Patience,
        cancel: Option<&Cancel>,
    ) -> Result<Option<LockGuard<K>>> {
        let (deadline, wait) = match patience {
            Patience::Once => (Wait::No, None),
            Patience::For(d) => (Wait::from_duration(d), Some(d)),
            Patience::Forever => (Wait::Forever, None),
        };
        let request = Request {
            owner,
            lease,
            lease_ms: lease.map_or(Ok(self.core().watchdog_ms()), clock::lease_ms)?,
            patience,
        };
        let channel = self.kind().wait_channel(owner);
        let interest = Interest {
            channel: &channel,
            rule: WakeRule::Lock,
        };
        let mut backoff = Backoff::default();
        let started = Instant::now();
        let mut attempts = 0u32;
        let attempt = || {
            attempts += 1;
            self.attempt(&request, wait, &mut backoff)
        };
        let outcome = match self.kind().polls() {
            // No message ever comes (the spin lock): the waiter paces its own retries.
            Some(pauses) => wait::poll(deadline, pauses.pauses(), cancel, attempt),
            None => match self.courtesy_until(&channel, patience) {
                Some(hold_back) => wait::acquire_after_courtesy(
                    self.core(),
                    interest,
                    deadline,
                    hold_back,
                    cancel,
                    attempt,
                ),
                None => {
                    wait::acquire_or_wait_until(self.core(), interest, deadline, cancel, attempt)
                }
            },
        };
        let ended = metrics::Outcome::of(&outcome);
        metrics::acquisition(
            K::LOCK,
            self.label(),
            ended,
            started.elapsed(),
            Some(attempts),
        );
        let queued = !matches!(patience, Patience::Once);
        // A refused re-entry never queued: the script refuses before it would.
        let gave_up = !matches!(outcome, Ok(Some(_)) | Err(Error::AlreadyHeld { .. }));
        if K::QUEUES && queued && gave_up {
            self.leave_queue(owner, wait);
        }
        outcome
    }

    /// Until when this acquisition holds back for the waiters a recent release woke (see
    /// `fairness.rs`); `None` on the uncontended path, which reads one atomic flag here.
    /// A single attempt never holds back: it may not wait.
    fn courtesy_until(&self, channel: &str, patience: Patience) -> Option<Instant> {
        if matches!(patience, Patience::Once) {
            return None;
        }
        self.core().config().fairness.window()?;
        self.core().courtesy().until(channel)
    }

    /// After a full release whose message reached `heard` subscribers: opens the
    /// courtesy window when someone besides this client's own subscription heard it, or
    /// a thread of this client waits. The releaser holds no subscription of its own at
    /// this point (it left the waiters when it took the lock), so every waiter counted
    /// is another thread.
    fn offer_courtesy(&self, owner: &str, heard: u32) {
        let core = self.core();
        let Some(window) = core.config().fairness.window() else {
            return;
        };
        if heard == 0 {
            return;
        }
        let channel = self.kind().wait_channel(owner);
        let audience = core.audience(&channel);
        if audience.waiters > 0 || heard > audience.own {
            // A window too long for the clock is no window at all rather than a panic.
            if let Some(until) = Instant::now().checked_add(window) {
                core.courtesy().open(&channel, until);
            }
        }
    }

    /// One run of the acquire script: the guard, or when to retry at the latest.
    fn attempt(
        &self,
        r: &Request<'_>,
        wait: Option<Duration>,
        backoff: &mut Backoff,
    ) -> Result<Attempt<LockGuard<K>>> {
        let mut sent = Instant::now();
        // Set when the grant is a hold adopted after a lost reply: its lease end, which
        // the key's TTL gives, not this request's send.
        let mut adopted_until = None;
        let mut tries = 0;
        let mut dropped = 0;
        let answer = loop {
            let args = raw::Acquire {
                owner: r.owner,
                lease_ms: r.lease_ms,
                wait,
                now_ms: clock::now_ms(),
            };
            let ran = self.core().run_acquire(
                self.name(),
                |c| match r.patience {
                    Patience::Once => self.kind().try_acquire(c, &args),
                    _ => self.kind().acquire(c, &args),
                },
                |a| matches!(a, Answer::Held { .. }),
            );
            let (answer, synced) = match ran {
                Ok(found) => found,
                Err(e) if is_dropped(&e) => match self.after_dropped_acquire(r, sent)? {
                    // It ran, but the WAIT after it was lost with the connection (or
                    // never sent): without it a failover could hand the hold to someone
                    // else, so it is owed here, and a failure to send it undoes the hold
                    // as an unacknowledged one is undone below.
                    Some((token, until)) => {
                        match self.core().resync_adopted(self.name(), r.owner) {
                            Ok(synced) => {
                                adopted_until = Some(until);
                                (Answer::Held { token }, synced)
                            }
                            Err(e) => {
                                self.undo_unsynced(r.owner);
                                return Err(e);
                            }
                        }
                    }
                    // It did not run: the connection was dead before it was sent (an
                    // idle pooled connection after a restart or a reset). The check
                    // just reached the server, so try again at once, at most once per
                    // pooled connection plus one, as the transport resends a request
                    // that certainly did not run.
                    None if dropped < self.core().config().pool_max_size => {
                        dropped += 1;
                        sent = Instant::now();
                        continue;
                    }
                    None => return Err(e),
                },
                Err(e) => return Err(e),
            };
            let (Synced::NoneAcked { replicas } | Synced::Demoted { replicas }) = synced else {
                break answer;
            };
            crate::metrics::replica_sync_failed();
            // No replica has the hold, or the master is being demoted (its replicas are
            // leaving for the new master, which will not have it): a failover now would
            // hand the lock to someone else. Undo exactly what this try took (one level
            // of a reentrant hold) and try again, as Redisson does, up to the retry
            // budget; a demoted master's try has already asked the sentinels again, so
            // the next one goes where they now point.
            tries += 1;
            self.undo_unsynced(r.owner);
            let core = self.core();
            if tries > core.config().retry_attempts || core.is_stopped() {
                return Err(Error::NoSyncedReplicas {
                    name: self.name().to_owned(),
                    replicas,
                    tries,
                });
            }
            std::thread::sleep(core.config().retry_delay_for(tries - 1));
            sent = Instant::now();
            adopted_until = None;
        };
        Ok(match answer {
            Answer::Busy(hint) => Attempt::RetryBy(self.kind().retry_by(hint, backoff)),
            Answer::Held { token } => {
                let lease = r.lease.map(|l| (l, r.lease_ms));
                // The verification harness's second seeded bug (test-only feature, inert
                // unless its environment variable is set): date the lease from the reply,
                // so a slow reply makes the guard trust past Redis's expiry.
                #[cfg(feature = "verify-broken-lease-from-reply")]
                let sent = if crate::verify_broken::active("lease-from-reply") {
                    Instant::now()
                } else {
                    sent
                };
                let until = adopted_until.unwrap_or_else(|| self.lease_end(r.lease, sent));
                Attempt::Done(self.granted_until(r.owner, lease, until, token))
            }
        })
    }

    /// After an acquire sent at `sent` whose connection closed before its reply came:
    /// whether this thread holds the lock more often than this client counts, with the
    /// grant's token and the hold's lease end (`Some`), or not (`None`: the acquire did
    /// not run). Only this thread adds holds under its owner field (see `levels.rs`), so
    /// one more hold than counted is an acquire of its own that ran unanswered; a closed
    /// connection cannot deliver the request later, so the answer stays true. After a
    /// timeout it could, which is why timeouts are not asked about here (a hold taken that
    /// late is released with the thread's next release of the lock, see
    /// [`release`](Self::release)).
    ///
    /// The count cannot tell which acquire ran: this one, or an older one whose caller saw
    /// a timeout and gave up, whose hold has lived unrenewed since. So the hold is never
    /// dated from `sent`: the check reads the key's TTL with the count, in one script, and
    /// the lease ends no later than the check's own send plus that TTL, which is never
    /// after Redis expires the key (Redis read the TTL after the check was sent). A hold
    /// under the watchdog is renewed by the same script first, as its acquire would have
    /// renewed it. An explicit lease is left as Redis has it, and the guard trusts it no
    /// longer than `lease` after `sent` either: nothing may extend what its acquire
    /// granted.
    ///
    /// Sent twice, the check does no more than sent once (its renewal only raises the
    /// TTL to the watchdog timeout), so the transport may send it again on another
    /// connection.
    fn after_dropped_acquire(
        &self,
        r: &Request<'_>,
        sent: Instant,
    ) -> Result<Option<(Option<u64>, Instant)>> {
        let core = self.core();
        let name = self.name();
        let check = raw::Adopt {
            owner: r.owner,
            counted: core.levels().count(name, r.owner),
            renew_ms: if r.lease.is_none() { r.lease_ms } else { 0 },
        };
        let checked = Instant::now();
        let Some(found) = core.run(name, |c| self.kind().adopt(c, &check))? else {
            return Ok(None);
        };
        // `None`: no key of the hold has a TTL, so only the lease asked for bounds it.
        let lives = found.ttl_ms.map(|ms| checked + Duration::from_millis(ms));
        let asked = match r.lease {
            Some(lease) => sent + lease,
            None => checked + Duration::from_millis(r.lease_ms),
        };
        let until = lives.map_or(asked, |lives| lives.min(asked));
        log::debug!(
            "redmutex: an acquire of {} {name:?} ran although its reply was lost; its hold \
             is trusted for {:?} more",
            K::LOCK,
            until.saturating_duration_since(Instant::now())
        );
        Ok(Some((found.token, until)))
    }

    /// When a hold granted by a request sent at `sent` ends at the latest: `lease` after
    /// it, or the watchdog timeout after it for a hold under the watchdog.
    fn lease_end(&self, lease: Option<Duration>, sent: Instant) -> Instant {
        sent + lease.unwrap_or_else(|| self.core().watchdog_timeout())
    }

    /// The guard of a grant to `owner` whose acquire was sent at `sent`, for `lease`
    /// (the lease and its milliseconds; `None`: under the watchdog, which starts renewing
    /// it here). Also where a RedLock, which sends its members' acquires itself, turns a
    /// member's grant into a guard.
    pub(super) fn granted(
        &self,
        owner: &str,
        lease: Option<(Duration, u64)>,
        sent: Instant,
        token: Option<u64>,
    ) -> LockGuard<K> {
        let until = self.lease_end(lease.map(|(l, _)| l), sent);
        self.granted_until(owner, lease, until, token)
    }

    /// [`granted`](Self::granted) for a hold whose lease ends at `until` at the latest.
    fn granted_until(
        &self,
        owner: &str,
        lease: Option<(Duration, u64)>,
        until: Instant,
        token: Option<u64>,
    ) -> LockGuard<K> {
        if let Some((_, ms)) = lease {
            self.shared.lease_ms.store(ms, Ordering::Relaxed);
        }
        let core = self.core();
        core.levels().add(self.name(), owner);
        let state = HoldState::until(
            core.watchdog(),
            (K::RENEWAL, self.name(), owner),
            lease.is_none(),
            until,
        );
        LockGuard::new(self.clone(), state, token)
    }

    /// After an acquire of the current thread whose reply timed out: releases the hold
    /// it took, if it ran, which is when Redis shows the thread more holds than this
    /// client counts (see `levels.rs`). Releasing "one hold" without that check would,
    /// when the acquire never ran, release a hold that one of the thread's guards still
    /// trusts. The released hold was never counted, so nothing counted changes. An
    /// acquire that runs after the check leaves a hold that goes with the thread's last
    /// known release (see [`release`](Self::release)).
    pub(super) fn take_back_uncounted(&self) -> Result<()> {
        if self.uncounted_holds()? > 0 {
            self.release_with_latch(&self.owner())?;
        }
        Ok(())
    }

    /// How many holds Redis shows the current thread beyond those this client counts.
    pub(super) fn uncounted_holds(&self) -> Result<u32> {
        let owner = self.owner();
        let counted = self.core().levels().count(self.name(), &owner);
        Ok(self.hold_count()?.saturating_sub(counted))
    }

    /// Leaves the queue after giving up. Safe to repeat (once out, it changes nothing),
    /// so it is retried on connection failures; it also runs while the client shuts down
    /// (a waiter woken by the shutdown still owns its place).
    fn leave_queue(&self, owner: &str, wait: Option<Duration>) {
        let core = self.core();
        let leave = Leave {
            owner,
            wait,
            publish: core.publish_command(),
        };
        let left = core
            .retrying(|| core.run_even_if_stopped(self.name(), |c| self.kind().leave(c, &leave)));
        if let Err(e) = left {
            log::warn!(
                "redmutex: could not leave the queue of {} {:?}; the place is purged when its \
                 slot ends: {e}",
                K::LOCK,
                self.name()
            );
        }
    }

    /// A guard's release of its hold.
    fn release_hold(&self, hold: &Hold) -> Result<()> {
        // The verification harness's seeded bug (test-only feature, inert unless its
        // environment variable is set): delete the lock without the owner check, so a
        // holder that overstayed its lease takes the lock from whoever holds it now.
        #[cfg(feature = "verify-broken-no-owner-check")]
        if crate::verify_broken::active("no-owner-check") {
            let _ = self.force_unlock();
        }
        self.release(&self.owner(), Some(hold))
    }

    /// The release sequence of every kind: one release request under the unlock latch,
    /// then the renewal registry and the instance lease brought in step with its outcome.
    /// `hold` is the guard's (or the registry's) state when the caller held the lock
    /// through this client.
    fn release(&self, owner: &str, hold: Option<&Hold>) -> Result<()> {
        // Every try carries the same latch key, so a retry after a lost reply replays
        // the first outcome instead of releasing a second hold.
        let latch = self.unlock_latch();
        let mut outcome = self.send_release(owner, &latch);
        if K::OWN_PARTLY
            && matches!(outcome, Ok(Released::Partly))
            && self.core().levels().count(self.name(), owner) <= 1
        {
            outcome = self.release_unknown_holds(owner);
        }
        self.settle_release(owner, hold, latch, outcome)
    }

    /// After this thread's last known hold was released but Redis kept the lock for it:
    /// the holds left were taken by acquires nobody knows of (one that ran after its
    /// reply was lost and the caller had given up, see `levels.rs`). No guard would ever
    /// release them, and each later reentrant acquire would renew them, so they are
    /// released now, one at a time as Redisson's unlock does, until the lock is free.
    /// The outcome is that of the last release.
    fn release_unknown_holds(&self, owner: &str) -> Result<Released> {
        let mut released = 0;
        loop {
            let outcome = self.release_with_latch(owner);
            released += 1;
            if !matches!(outcome, Ok(Released::Partly)) || released >= MAX_UNKNOWN_HOLDS {
                log::warn!(
                    "redmutex: released {released} hold(s) of {} {:?} that no guard of \
                     this client held (an acquire ran although its caller saw it fail)",
                    K::LOCK,
                    self.name()
                );
                return outcome;
            }
        }
    }

    /// Sends one release request of `owner` under `latch`, retried under that latch.
    fn send_release(&self, owner: &str, latch: &str) -> Result<Released> {
        let core = self.core();
        // In the pool's urgent lane: whoever waits for the lock waits for this release,
        // so it must not queue behind other threads' first attempts.
        crate::transport::urgent(|| {
            core.retrying(|| {
                let args = self.release_args(owner, latch);
                core.run(self.name(), |c| self.kind().release(c, &args))
            })
        })
    }

    /// [`release_with_latch`](Self::release_with_latch) for an acquire whose replication
    /// is unconfirmed; a failure leaves the hold to its lease, with a warning.
    fn undo_unsynced(&self, owner: &str) {
        if let Err(e) = self.release_with_latch(owner) {
            log::warn!(
                "redmutex: could not undo an unsynced acquire of {} {:?}; it expires with \
                 its lease: {e}",
                K::LOCK,
                self.name()
            );
        }
    }

    /// Undoes one level of `owner`'s hold that no registry knows yet (an acquire that no
    /// replica acknowledged), under a fresh unlock latch.
    fn release_with_latch(&self, owner: &str) -> Result<Released> {
        let latch = self.unlock_latch();
        let outcome = self.send_release(owner, &latch);
        self.core().watchdog().discard_latch(latch);
        outcome
    }

    /// A fresh unlock latch key (Redisson's `redisson_unlock_latch:{name}:<request-id>`)
    /// for one release request.
    pub(super) fn unlock_latch(&self) -> String {
        let request_id = uuid::Uuid::new_v4().simple().to_string();
        names::unlock_latch(self.name(), &request_id)
    }

    /// The release script's arguments for one hold of `owner` under `latch`.
    pub(super) fn release_args<'a>(&self, owner: &'a str, latch: &'a str) -> ReleaseArgs<'a> {
        let core = self.core();
        ReleaseArgs {
            owner,
            latch,
            latch_ms: core.config().unlock_latch_ms(),
            lease_ms: self.shared.lease_ms.load(Ordering::Relaxed),
            now_ms: clock::now_ms(),
            publish: core.publish_command(),
        }
    }

    /// Brings the renewal registry, the instance lease and `hold` in step with the
    /// outcome of a release request sent under `latch`, and says how it went. Callers
    /// that send the request themselves (a RedLock releases its members in parallel)
    /// settle it here, so every release ends the same way.
    pub(super) fn settle_release(
        &self,
        owner: &str,
        hold: Option<&Hold>,
        latch: String,
        outcome: Result<Released>,
    ) -> Result<()> {
        let levels = self.core().levels();
        let outcome = match outcome {
            Ok(outcome) => outcome,
            Err(e) => {
                levels.remove(self.name(), owner);
                self.after_failed_release(owner, &e);
                return Err(e);
            }
        };
        // The spent latch is deleted later by the watchdog thread.
        self.core().watchdog().discard_latch(latch);
        if let Released::Fully { heard } = outcome {
            self.offer_courtesy(owner, heard);
        }
        let name = self.name();
        if matches!(outcome, Released::Fully { .. } | Released::Missing) {
            // Redisson resets the instance's lease after the last release.
            let watchdog_ms = self.core().watchdog_ms();
            self.shared.lease_ms.store(watchdog_ms, Ordering::Relaxed);
        }
        let gone = matches!(outcome, Released::NotHeld | Released::Missing);
        if gone {
            levels.forget(name, owner);
        } else {
            levels.remove(name, owner);
        }
        let watchdog = self.core().watchdog();
        watchdog.unregister(K::RENEWAL, name, owner, gone);
        match (outcome, hold) {
            (Released::Partly | Released::Fully { .. }, _) => Ok(()),
            // We held it once, so finding no hold now means it was lost.
            (_, Some(hold)) => {
                hold.mark(Loss::Lost);
                Err(Error::LockLost { name: name.into() })
            }
            // Redisson counts a missing fair lock as a successful unlock.
            (Released::Missing, None) => Ok(()),
            (Released::NotHeld, None) => Err(Error::NotHeld { name: name.into() }),
        }
    }

    /// After a release that failed, reads whether `owner` still holds the lock and keeps
    /// the renewal registry in step: the hold is given up either way, and if it is still
    /// in Redis it expires after its lease.
    fn after_failed_release(&self, owner: &str, err: &Error) {
        let name = self.name();
        let left: Result<bool> = self.core().run(name, |c| {
            redis::cmd("HEXISTS").arg(name).arg(owner).query(c)
        });
        let outcome = match &left {
            Ok(false) => "took effect all the same (waiters elsewhere fall back to the TTL)",
            Ok(true) => "did not happen; the hold expires with its lease",
            Err(_) => "is unknown",
        };
        log::warn!("redmutex: release of {name:?} failed and {outcome}: {err}");
        self.core()
            .watchdog()
            .unregister(K::RENEWAL, name, owner, matches!(left, Ok(false)));
    }
}

/// Whether `e` says the connection closed under a request (not a timeout): the request
/// ran or did not, and nothing can run it later.
fn is_dropped(e: &Error) -> bool {
    matches!(e, Error::Redis(r) if r.is_connection_dropped() && !r.is_timeout())
}

impl<K: HeldLock> crate::expiry::sealed::Keys for Lock<K> {
    fn expiry_target(&self) -> crate::expiry::sealed::Target<'_> {
        crate::expiry::sealed::Target {
            core: self.core(),
            keys: self.kind().keys(),
        }
    }
}

/// One hold of a lock, released when dropped.
///
/// Dropping the guard releases the hold and logs a failure at `warn`; call
/// [`unlock`](Self::unlock) to see the `Result`. The guard owns a handle to its lock (a
/// cheap clone), so `client.get_lock(name).lock()?` works and a guard can be stored or
/// returned. It is not `Send`: the hold belongs to the thread that took it (the owner
/// field is `<client-id>:<thread-number>`), as a Redisson hold belongs to a Java thread.
/// There is no `Deref`: a distributed lock guards something outside the process.
///
/// Each kind names its guard: [`RLockGuard`](crate::RLockGuard),
/// [`RFairLockGuard`](crate::RFairLockGuard), [`RReadLockGuard`](crate::RReadLockGuard),
/// [`RWriteLockGuard`](crate::RWriteLockGuard).
///
/// ```no_run
/// let client = redmutex::Client::open("redis://127.0.0.1:6379")?;
/// let guard = client.get_lock("orders:1").lock()?;
/// // ... the critical section ...
/// guard.unlock()?;
/// # Ok::<(), redmutex::Error>(())
/// ```
///
/// A guard of any kind cannot cross threads:
///
/// ```compile_fail
/// fn assert_send<T: Send>(_: T) {}
/// let client = redmutex::Client::open("redis://127.0.0.1/").unwrap();
/// assert_send(client.get_lock("x").lock().unwrap());
/// ```
///
/// The guard *is* the hold, so the Java habit of calling `lock.lock()` as a statement
/// holds nothing: the guard it returns is dropped, and the lock released, before the
/// next line runs. So is `let _ = lock.lock()?;` (`_` binds nothing); `let _guard = …`
/// keeps it to the end of the scope. The guard is `#[must_use]`, so the statement form
/// is a compiler warning, and an error under `#![deny(unused_must_use)]`:
///
/// ```compile_fail
/// #![deny(unused_must_use)]
/// fn work(lock: &redmutex::RLock) -> redmutex::Result<()> {
///     lock.lock()?; // dropped here: the work below would run unlocked
///     Ok(())
/// }
/// ```
///
/// while the same function with the guard bound compiles:
///
/// ```
/// #![deny(unused_must_use)]
/// fn work(lock: &redmutex::RLock) -> redmutex::Result<()> {
///     let _guard = lock.lock()?; // held until the end of the function
///     Ok(())
/// }
/// ```
///
/// [`Lock::with_lock`] runs a closure under the lock instead, with no guard to drop.
#[must_use = "dropping the guard unlocks at once: `lock.lock()?;` as a statement holds nothing; bind it (`let guard = lock.lock()?;`) for the critical section, or use `with_lock`"]
#[clippy::has_significant_drop]
pub struct LockGuard<K: HeldLock> {
    lock: Lock<K>,
    state: HoldState,
    /// The grant's fencing token (fenced locks only).
    token: Option<u64>,
    /// When the grant came back, for the hold-duration metric.
    granted: Instant,
    /// Released or detached already.
    done: bool,
    _not_send: PhantomData<std::sync::MutexGuard<'static, ()>>,
}

impl<K: HeldLock> LockGuard<K> {
    pub(crate) fn new(lock: Lock<K>, state: HoldState, token: Option<u64>) -> Self {
        Self {
            lock,
            state,
            token,
            granted: Instant::now(),
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
    /// expired, key deleted or taken over): whatever the guard protected may have been
    /// touched by another holder. A hold the watchdog only presumed lost
    /// ([`Loss::PossiblyLost`](crate::Loss::PossiblyLost)) that the release finds still in
    /// Redis is released with `Ok`: it never left the lock. Redis, pool and shutdown
    /// errors otherwise; then the hold is no longer renewed and, if the release did not
    /// reach Redis, the lock expires after its lease.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// let client = redmutex::Client::open("redis://127.0.0.1:6379")?;
    /// let guard = client.get_lock("orders:1").lock()?;
    /// // ... the critical section ...
    /// match guard.unlock() {
    ///     Ok(()) => {}
    ///     // The hold was gone before the release: another holder may have run meanwhile.
    ///     Err(redmutex::Error::LockLost { .. }) => eprintln!("the section was not exclusive"),
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok::<(), redmutex::Error>(())
    /// ```
    pub fn unlock(mut self) -> Result<()> {
        self.end(true);
        self.lock.release_hold(self.state.hold())
    }

    /// Marks the guard spent and records its end: a release after the time it was held,
    /// or a detach.
    fn end(&mut self, released: bool) {
        self.done = true;
        let held = released.then(|| self.granted.elapsed());
        metrics::guard_ended(K::LOCK, self.lock.label(), held);
    }

    /// Keeps the hold but gives up the guard: dropping nothing releases it, and the
    /// watchdog goes on renewing it. Release it later, on the same thread, with the lock's
    /// own [`unlock`](Lock::unlock), as Redisson code that unlocks in another method does.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// let client = redmutex::Client::open("redis://127.0.0.1:6379")?;
    /// let lock = client.get_lock("orders:1");
    /// fn begin(lock: &redmutex::RLock) -> redmutex::Result<()> {
    ///     lock.lock()?.detach(); // stays held, renewed by the watchdog
    ///     Ok(())
    /// }
    /// fn end(lock: &redmutex::RLock) -> redmutex::Result<()> {
    ///     lock.unlock() // the same thread releases it
    /// }
    /// begin(&lock)?;
    /// end(&lock)?;
    /// # Ok::<(), redmutex::Error>(())
    /// ```
    pub fn detach(mut self) {
        self.end(false);
    }

    /// Whether this hold is known or presumed lost, without asking Redis: the watchdog
    /// found the key gone or owned by another, renewal could not be confirmed in time,
    /// the lease end known locally has passed (a process frozen past its lease learns it
    /// here the moment it runs again), or an explicit lease ran out.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// let client = redmutex::Client::open("redis://127.0.0.1:6379")?;
    /// let guard = client.get_lock("orders:1").lock()?;
    /// for step in 0..100 {
    ///     if guard.is_lost() {
    ///         // Stop before touching what the lock guards: someone else may hold it now.
    ///         break;
    ///     }
    ///     // ... one step of the work ...
    /// #   let _ = step;
    /// }
    /// drop(guard);
    /// # Ok::<(), redmutex::Error>(())
    /// ```
    pub fn is_lost(&self) -> bool {
        self.loss().is_some()
    }

    /// Why the hold is no longer trusted, if it is not. See [`is_lost`](Self::is_lost).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use redmutex::Loss;
    ///
    /// let client = redmutex::Client::open("redis://127.0.0.1:6379")?;
    /// let guard = client.get_lock("orders:1").lock()?;
    /// match guard.loss() {
    ///     None => {}                      // held, as far as anyone knows
    ///     Some(Loss::Lost) => {}          // Redis says another holds it, or nobody
    ///     Some(Loss::PossiblyLost) => {}  // renewals failed; it may be gone
    ///     Some(_) => {}
    /// }
    /// drop(guard);
    /// # Ok::<(), redmutex::Error>(())
    /// ```
    pub fn loss(&self) -> Option<Loss> {
        self.state.loss()
    }

    /// A channel that receives one [`Loss`] when the watchdog finds this hold lost or
    /// presumed lost (at once if it already was). Explicit-lease holds are not watched:
    /// check [`is_lost`](Self::is_lost) or the lease instead.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use std::time::Duration;
    ///
    /// let client = redmutex::Client::open("redis://127.0.0.1:6379")?;
    /// let guard = client.get_lock("leader:billing").lock()?;
    /// let lost = guard.loss_signal();
    /// // Work in steps, and stop as soon as the watchdog reports the hold lost.
    /// while lost.recv_timeout(Duration::from_millis(100)).is_err() {
    ///     // ... one step of leader-only work ...
    /// #   break;
    /// }
    /// drop(guard);
    /// # Ok::<(), redmutex::Error>(())
    /// ```
    pub fn loss_signal(&self) -> Receiver<Loss> {
        self.state.hold().subscribe()
    }

    /// The lock this guard holds.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// let client = redmutex::Client::open("redis://127.0.0.1:6379")?;
    /// let guard = client.get_lock("orders:1").lock()?; // the guard keeps its lock
    /// assert_eq!(guard.lock().name(), "orders:1");
    /// assert_eq!(guard.lock().hold_count()?, 1);
    /// guard.unlock()?;
    /// # Ok::<(), redmutex::Error>(())
    /// ```
    pub fn lock(&self) -> &Lock<K> {
        &self.lock
    }

    /// The hold's state shared with the watchdog.
    pub(super) fn hold(&self) -> &Hold {
        self.state.hold()
    }

    /// Hands the release of this hold to the caller, which sends it itself and settles
    /// it with [`Lock::settle_release`]: dropping the guard then releases nothing.
    pub(super) fn disarm(&mut self) {
        self.done = true;
    }

    /// The grant's fencing token, if the kind draws them.
    pub(super) fn fencing_token(&self) -> Option<u64> {
        self.token
    }

    /// Replaces the lease of a hold taken with an explicit one by `lease` from now
    /// (`PEXPIRE` of the lock's key only): how a MultiLock swaps its members' temporary
    /// lease for the caller's. True when the key was there to expire.
    pub(super) fn relet(&self, lease: Duration) -> Result<bool> {
        let lease_ms = clock::lease_ms(lease)?;
        let name = self.lock.name();
        let sent = Instant::now();
        let set: bool = self.lock.core().run(name, |c| {
            redis::cmd("PEXPIRE").arg(name).arg(lease_ms).query(c)
        })?;
        self.lock.shared.lease_ms.store(lease_ms, Ordering::Relaxed);
        self.state.hold().set_lease_end(sent + lease);
        Ok(set)
    }

    /// Runs the writes that `build` describes in one script call that first checks,
    /// atomically with them, that this owner still holds the lock and, for an
    /// [`RFencedLock`](crate::RFencedLock), that this guard's token is still the newest;
    /// returns each command's reply. No lock library offers this check together with the
    /// write: it turns "I held the lock when I decided to write" into "I hold it as the
    /// write happens".
    ///
    /// A failed check writes nothing and returns [`Error::FenceRefused`] with
    /// [`Refusal::NotHeld`](crate::Refusal::NotHeld) (the lease ran out, the lock was
    /// deleted or taken over) or [`Refusal::StaleToken`](crate::Refusal::StaleToken) (a
    /// later grant drew a newer token: someone else held the lock meanwhile, or this
    /// thread re-entered it and only the newest guard may write). The check costs no
    /// extra round trip: the writes go out with it.
    ///
    /// The commands may use any keys but the lock's own; in Redis Cluster they must be in
    /// the lock's slot (give them the lock name's hash tag, e.g. `{orders}:total` for a
    /// lock `orders`). Commands whose keys are mixed with their values (`MSET`) must be
    /// written one key at a time.
    ///
    /// ```no_run
    /// let client = redmutex::Client::open("redis://127.0.0.1:6379")?;
    /// let guard = client.get_fenced_lock("{acct:7}").lock()?;
    /// let replies = guard.fenced(|w| {
    ///     w.incr_by("{acct:7}:balance", -30).hset("{acct:7}:log", "last", "-30");
    /// })?;
    /// assert_eq!(replies.len(), 2);
    /// # Ok::<(), redmutex::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::FenceRefused`] as above; [`Error::FencedPartial`] when a command failed
    /// after the checks (the ones before it took effect); [`Error::Config`] when a
    /// command names a key of the lock itself; Redis, pool and shutdown errors (a lost
    /// reply leaves it unknown whether the writes happened).
    pub fn fenced(&self, build: impl FnOnce(&mut FencedWrite)) -> Result<Vec<redis::Value>> {
        let mut write = FencedWrite::default();
        build(&mut write);
        let lock = &self.lock;
        let kind = lock.kind();
        let owner = lock.owner();
        // Not retried: the writes may have run before the reply was lost.
        lock.core().run(lock.name(), |c| {
            scripts::fenced_write(
                c,
                [kind.name(), kind.token_key()],
                &owner,
                self.token,
                write.commands(),
            )
        })
    }
}

impl<K: HeldLock> std::fmt::Debug for LockGuard<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct(&format!("{}Guard", K::LOCK))
            .field("lock", &self.lock.name())
            .field("renewed", &self.state.renewed)
            .field("lost", &self.is_lost())
            .finish()
    }
}

impl<K: HeldLock> Drop for LockGuard<K> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        self.end(true);
        if let Err(e) = self.lock.release_hold(self.state.hold()) {
            log::warn!(
                "redmutex: releasing {}Guard of {:?} on drop failed: {e}",
                K::LOCK,
                self.lock.name()
            );
        }
    }
}
