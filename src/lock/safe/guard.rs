//! [`LockGuard`], the hold a grant becomes: its release, its loss signal, and the
//! fenced write of the thread-owned kinds.

use std::marker::PhantomData;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;

use super::Lock;
use crate::clock;
use crate::error::Result;
use crate::lock::fenced_write;
use crate::lock::fenced_write::FencedWrite;
use crate::lock::held::Claim;
use crate::lock::raw::{HeldLock, LockKind};
use crate::metrics;
use crate::watchdog::hold::{Hold, Loss};
use crate::watchdog::hold_state::HoldState;

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
pub struct LockGuard<K: LockKind> {
    lock: Lock<K>,
    /// The owner field the hold was taken under: the thread's, or the hold's token.
    owner: String,
    /// The thread's claim on a lock that refuses it a second hold (token locks only),
    /// given up when the guard goes.
    claim: Option<Claim>,
    state: HoldState,
    /// The grant's fencing token (fenced locks only).
    token: Option<u64>,
    /// When the grant came back, for the hold-duration metric.
    granted: Instant,
    /// Released or detached already.
    done: bool,
    _not_send: PhantomData<std::sync::MutexGuard<'static, ()>>,
}

impl<K: LockKind> LockGuard<K> {
    pub(crate) fn new(lock: Lock<K>, owner: String, state: HoldState, token: Option<u64>) -> Self {
        Self {
            lock,
            owner,
            claim: None,
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
        self.lock.release_hold(&self.owner, self.state.hold())
    }

    /// This guard keeping the thread's `claim` for as long as it lives.
    pub(super) fn claimed(mut self, claim: Option<Claim>) -> Self {
        self.claim = claim;
        self
    }

    /// The owner field the hold was taken under (a token lock's: the token).
    pub(crate) fn owner(&self) -> &str {
        &self.owner
    }

    /// Marks the guard spent and records its end: a release after the time it was held,
    /// or a detach.
    fn end(&mut self, released: bool) {
        self.done = true;
        let held = released.then(|| self.granted.elapsed());
        metrics::guard_ended(K::LOCK, self.lock.label(), held);
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
    pub(crate) fn hold(&self) -> &Hold {
        self.state.hold()
    }

    /// Hands the release of this hold to the caller, which sends it itself and settles
    /// it with [`Lock::settle_release`]: dropping the guard then releases nothing.
    pub(in crate::lock) fn disarm(&mut self) {
        self.done = true;
    }

    /// The grant's fencing token, if the kind draws them.
    pub(in crate::lock) fn fencing_token(&self) -> Option<u64> {
        self.token
    }

    /// Replaces the lease of a hold taken with an explicit one by `lease` from now
    /// (`PEXPIRE` of the lock's key only): how a MultiLock swaps its members' temporary
    /// lease for the caller's. True when the key was there to expire.
    pub(in crate::lock) fn relet(&self, lease: Duration) -> Result<bool> {
        let lease_ms = clock::lease_ms(lease)?;
        let name = self.lock.key();
        let sent = Instant::now();
        let set: bool = self.lock.core().run(name, |c| {
            redis::cmd("PEXPIRE").arg(name).arg(lease_ms).query(c)
        })?;
        self.lock.shared.lease_ms.store(lease_ms, Ordering::Relaxed);
        self.state.hold().set_lease_end(sent + lease);
        Ok(set)
    }
}

/// What only a thread-owned hold offers: living on without its guard, and fenced writes
/// (whose check reads the owner field in the lock's hash).
impl<K: HeldLock> LockGuard<K> {
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

    /// Runs the writes that `build` describes in one script call that first checks,
    /// atomically with them, that this owner still holds the lock and, for an
    /// [`RFencedLock`](crate::RFencedLock), that this guard's token is still the newest;
    /// returns each command's reply. No lock library offers this check together with the
    /// write: it turns "I held the lock when I decided to write" into "I hold it as the
    /// write happens".
    ///
    /// A failed check writes nothing and returns [`Error::FenceRefused`](crate::Error::FenceRefused) with
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
    /// [`Error::FenceRefused`](crate::Error::FenceRefused) as above; [`Error::FencedPartial`](crate::Error::FencedPartial) when a command failed
    /// after the checks (the ones before it took effect); [`Error::Config`](crate::Error::Config) when a
    /// command names a key of the lock itself; Redis, pool and shutdown errors (a lost
    /// reply leaves it unknown whether the writes happened).
    pub fn fenced(&self, build: impl FnOnce(&mut FencedWrite)) -> Result<Vec<redis::Value>> {
        let mut write = FencedWrite::default();
        build(&mut write);
        let lock = &self.lock;
        let kind = lock.kind();
        // Not retried: the writes may have run before the reply was lost.
        lock.core().run(lock.key(), |c| {
            fenced_write::fenced_write(
                c,
                [lock.key(), kind.token_key()],
                &self.owner,
                self.token,
                write.commands(),
            )
        })
    }
}

impl<K: LockKind> std::fmt::Debug for LockGuard<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct(&format!("{}Guard", K::LOCK))
            .field("lock", &self.lock.name())
            .field("renewed", &self.state.renewed)
            .field("lost", &self.is_lost())
            .finish()
    }
}

impl<K: LockKind> Drop for LockGuard<K> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        self.end(true);
        if let Err(e) = self.lock.release_hold(&self.owner, self.state.hold()) {
            log::warn!(
                "redmutex: releasing {}Guard of {:?} on drop failed: {e}",
                K::LOCK,
                self.lock.name()
            );
        }
    }
}
