//! Redisson's `RedissonMultiLock`: all of several locks, of any kinds and any clients,
//! held together; and [`AnyLock`], the member handle it (and `RedLock`)
//! takes.

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::raw::HeldLock;
use super::safe::{Lock, LockGuard, Patience};
use crate::backoff::random_below;
use crate::error::{Error, Result};
use crate::hold::Loss;
use crate::metrics::{self, Outcome};

/// The `kind` label of a MultiLock's acquisitions and holds.
const KIND: &str = "MultiLock";

/// What a composite lock needs of a member: every `Lock<K>` is one.
pub(super) trait Member: Send + Sync {
    fn name(&self) -> &str;
    fn kind(&self) -> &'static str;
    /// One member acquisition, for `lease` (`None`: the member's watchdog).
    fn take(&self, lease: Option<Duration>, patience: Patience) -> Result<Option<Box<dyn Held>>>;
    /// Releases one hold of the current thread (Redisson `unlock()` on the member).
    fn unlock_current(&self) -> Result<()>;
    /// Releases the hold of a timed-out acquire of the current thread, if it ran (see
    /// [`Lock::take_back_uncounted`]).
    fn take_back(&self) -> Result<()>;
    fn is_held_by_current_thread(&self) -> Result<bool>;
}

/// What a composite guard needs of a member's guard.
pub(super) trait Held {
    fn name(&self) -> &str;
    fn release(self: Box<Self>) -> Result<()>;
    fn detach(self: Box<Self>);
    fn loss(&self) -> Option<Loss>;
    fn relet(&self, lease: Duration) -> Result<bool>;
}

impl<K: HeldLock> Member for Lock<K> {
    fn name(&self) -> &str {
        Lock::name(self)
    }

    fn kind(&self) -> &'static str {
        K::LOCK
    }

    fn take(&self, lease: Option<Duration>, patience: Patience) -> Result<Option<Box<dyn Held>>> {
        let guard = self.acquire(lease, patience)?;
        Ok(guard.map(|g| Box::new(g) as Box<dyn Held>))
    }

    fn unlock_current(&self) -> Result<()> {
        self.unlock()
    }

    fn take_back(&self) -> Result<()> {
        self.take_back_uncounted()
    }

    fn is_held_by_current_thread(&self) -> Result<bool> {
        Lock::is_held_by_current_thread(self)
    }
}

impl<K: HeldLock> Held for LockGuard<K> {
    fn name(&self) -> &str {
        self.lock().name()
    }

    fn release(self: Box<Self>) -> Result<()> {
        (*self).unlock()
    }

    fn detach(self: Box<Self>) {
        (*self).detach();
    }

    fn loss(&self) -> Option<Loss> {
        LockGuard::loss(self)
    }

    fn relet(&self, lease: Duration) -> Result<bool> {
        LockGuard::relet(self, lease)
    }
}

/// A member of a [`MultiLock`] or `RedLock`: any lock of this crate,
/// of any kind, from any [`Client`](crate::Client). Made with `From`, so
/// `[a.into(), b.into()]` builds a member list from locks of different kinds.
///
/// # Examples
///
/// ```no_run
/// use redmutex::AnyLock;
///
/// let client = redmutex::Client::open("redis://127.0.0.1:6379")?;
/// let members: Vec<AnyLock> = vec![
///     client.get_lock("account:1").into(),
///     client.get_fair_lock("account:2").into(),
///     client.get_read_write_lock("ledger").write_lock().into(),
/// ];
/// let all = client.get_multi_lock(members);
/// let guard = all.lock()?; // every member, or none
/// guard.unlock()?;
/// # Ok::<(), redmutex::Error>(())
/// ```
#[derive(Clone)]
pub struct AnyLock(pub(super) Arc<dyn Member>);

impl<K: HeldLock> From<Lock<K>> for AnyLock {
    fn from(lock: Lock<K>) -> Self {
        Self(Arc::new(lock))
    }
}

impl<K: HeldLock> From<&Lock<K>> for AnyLock {
    fn from(lock: &Lock<K>) -> Self {
        Self(Arc::new(lock.clone()))
    }
}

impl AnyLock {
    /// The member lock's name.
    pub fn name(&self) -> &str {
        self.0.name()
    }
}

impl std::fmt::Debug for AnyLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}({:?})", self.0.kind(), self.0.name())
    }
}

/// How long Redisson's `lock()` lets each pass of a composite lock wait per member.
const PASS_WAIT_PER_MEMBER: Duration = Duration::from_millis(1500);

/// The wait of each pass of Redisson's `lock()` over `members` members: 1.5 s per member.
pub(super) fn pass_wait(members: usize) -> Duration {
    PASS_WAIT_PER_MEMBER.saturating_mul(u32::try_from(members).unwrap_or(u32::MAX))
}

/// The wait of each pass of Redisson's `lock(lease)` over `members` members: a random
/// time below the lease, from half the lease, or from [`pass_wait`] when the lease is
/// longer than that.
pub(super) fn lease_pass(members: usize, lease: Duration) -> Duration {
    let base = pass_wait(members);
    let (low, high) = if lease <= base {
        (lease / 2, lease)
    } else {
        (base, lease)
    };
    let span = u64::try_from((high - low).as_millis()).unwrap_or(u64::MAX);
    let pass = low + Duration::from_millis(random_below(span));
    pass.max(Duration::from_millis(1))
}

/// All of several locks, held together: Redisson's `RedissonMultiLock`
/// (`getMultiLock(lock1, lock2, …)`).
///
/// The members may be locks of any kinds ([`AnyLock`]) on any clients, so on different
/// Redis servers; each is held by its own rules, keys and watchdog, and nothing is
/// stored for the MultiLock itself, so a Redisson MultiLock over the same names (and
/// Redisson clients taking the members alone) exclude it and are excluded by it.
///
/// Acquisition is Redisson's loop: the members in list order, each with
/// `try_lock(min(wait, time left))` (a single attempt when there is no wait). When one is
/// not granted, every member taken so far is released and, if time is left, the loop
/// starts again from the first member. While acquiring with an explicit lease the
/// members get a temporary lease of twice the wait, replaced by the caller's lease on
/// success (a `PEXPIRE` of each member's lock key only; Redisson's also puts that TTL on
/// a fenced member's token counter and a fair member's queue, which can reset tokens;
/// no Redisson client can tell the difference otherwise). Without a lease every member
/// is renewed by its own client's watchdog. [`lock`](Self::lock) repeats passes of
/// 1.5 s per member until one succeeds.
///
/// Two differences from Redisson, both where it would loop blindly: a member whose
/// acquisition fails with an error (a server down, not a timeout) ends the attempt with
/// that error, its partial grants released, where Redisson counts it as a refusal and
/// starts over at once until the wait runs out; a member that times out is released
/// (its grant may have happened) and counted as not granted, as in Redisson.
///
/// Locks in a MultiLock must not be taken by the same thread outside it at the same
/// time: a member's release after a time-out releases one hold of the thread, whoever
/// took it, as in Redisson.
///
/// # Examples
///
/// ```no_run
/// use std::time::Duration;
///
/// let client = redmutex::Client::open("redis://127.0.0.1:6379")?;
/// let other = redmutex::Client::open("redis://127.0.0.1:6380")?;
/// let both = client.get_multi_lock([
///     client.get_lock("account:1").into(),
///     other.get_fair_lock("account:2").into(),
/// ]);
/// if let Some(guard) = both.try_lock_for(Duration::from_secs(2))? {
///     // ... both held ...
///     guard.unlock()?;
/// }
/// # Ok::<(), redmutex::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct MultiLock {
    members: Arc<[AnyLock]>,
}

impl MultiLock {
    pub(crate) fn new(members: impl IntoIterator<Item = AnyLock>) -> Self {
        Self {
            members: members.into_iter().collect(),
        }
    }

    /// The members, in acquisition order.
    pub fn members(&self) -> &[AnyLock] {
        &self.members
    }

    /// Waits as long as it takes, then holds every member, each under its watchdog
    /// (Redisson `lock()`).
    ///
    /// # Errors
    ///
    /// [`Error::Config`] for an empty member list; the first error of a member (see the
    /// type's documentation), after its partial grants were released.
    pub fn lock(&self) -> Result<MultiLockGuard> {
        metrics::composite(KIND, Outcome::of_guard, || {
            self.lock_in_passes(pass_wait(self.members.len()), None)
        })
    }

    /// Waits as long as it takes, then holds every member for `lease` (Redisson
    /// `lock(leaseTime, unit)`). Each pass waits a random time below the lease, as
    /// Redisson's does.
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock); [`Error::InvalidArgument`](crate::Error::InvalidArgument) for a zero or absurd lease.
    pub fn lock_with_lease(&self, lease: Duration) -> Result<MultiLockGuard> {
        crate::clock::lease_ms(lease)?;
        let pass = lease_pass(self.members.len(), lease);
        metrics::composite(KIND, Outcome::of_guard, || {
            self.lock_in_passes(pass, Some(lease))
        })
    }

    /// One pass, no waiting: a single attempt at each member, held under the members'
    /// watchdogs on success (Redisson `tryLock()`). `Ok(None)` when a member is taken;
    /// the members granted before it are released.
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock).
    pub fn try_lock(&self) -> Result<Option<MultiLockGuard>> {
        metrics::composite(KIND, Outcome::of, || self.attempt(None, None))
    }

    /// Waits at most `wait` in all, holding every member under its watchdog on success
    /// (Redisson `tryLock(waitTime, unit)`).
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock).
    pub fn try_lock_for(&self, wait: Duration) -> Result<Option<MultiLockGuard>> {
        metrics::composite(KIND, Outcome::of, || self.attempt(Some(wait), None))
    }

    /// Waits at most `wait` in all, then holds every member for `lease` (Redisson
    /// `tryLock(waitTime, leaseTime, unit)`).
    ///
    /// # Errors
    ///
    /// As [`lock_with_lease`](Self::lock_with_lease).
    pub fn try_lock_with_lease(
        &self,
        wait: Duration,
        lease: Duration,
    ) -> Result<Option<MultiLockGuard>> {
        crate::clock::lease_ms(lease)?;
        metrics::composite(KIND, Outcome::of, || self.attempt(Some(wait), Some(lease)))
    }

    /// Releases one hold of the current thread on every member, for holds whose guard
    /// was [detached](MultiLockGuard::detach) (Redisson `unlock()`).
    ///
    /// # Errors
    ///
    /// [`Error::Members`] with every member that failed (not held included); the others
    /// were released.
    pub fn unlock(&self) -> Result<()> {
        collect_failures(
            self.members
                .iter()
                .map(|m| (m.name().to_owned(), m.0.unlock_current())),
        )
    }

    /// Whether the current thread holds every member (Redisson 3.27.2+
    /// `isHeldByCurrentThread`).
    ///
    /// # Errors
    ///
    /// The first member's error.
    pub fn is_held_by_current_thread(&self) -> Result<bool> {
        for m in self.members.iter() {
            if !m.0.is_held_by_current_thread()? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Redisson's `lock()`: passes of `pass` each until one succeeds.
    fn lock_in_passes(&self, pass: Duration, lease: Option<Duration>) -> Result<MultiLockGuard> {
        loop {
            if let Some(guard) = self.attempt(Some(pass), lease)? {
                return Ok(guard);
            }
        }
    }

    /// Redisson's `tryLock(wait, lease)` over every member (see the type's
    /// documentation); `wait: None` is its `wait ≤ 0`, one pass without restart.
    fn attempt(
        &self,
        wait: Option<Duration>,
        lease: Option<Duration>,
    ) -> Result<Option<MultiLockGuard>> {
        if self.members.is_empty() {
            return Err(Error::Config("a MultiLock needs at least one lock".into()));
        }
        // The members' lease while acquiring: long enough to outlast the whole wait,
        // replaced by the caller's once every member is held.
        let member_lease = match (lease, wait) {
            (Some(_), Some(w)) if !w.is_zero() => Some(w.saturating_mul(2)),
            (lease, _) => lease,
        };
        let deadline = wait.and_then(|w| Instant::now().checked_add(w));
        let mut held: Vec<Box<dyn Held>> = Vec::with_capacity(self.members.len());
        let mut next = 0;
        while let Some(member) = self.members.get(next) {
            let patience = match deadline {
                None => Patience::Once,
                Some(d) => Patience::For(d.saturating_duration_since(Instant::now())),
            };
            match member.0.take(member_lease, patience) {
                Ok(Some(guard)) => {
                    held.push(guard);
                    next += 1;
                }
                Ok(None) => {
                    release_quietly(held.drain(..));
                    if wait.is_none() {
                        return Ok(None);
                    }
                    next = 0;
                }
                Err(e @ Error::ResponseTimeout(_)) => {
                    // The grant may have happened without its reply: take it back, but
                    // only if it did (the thread may hold the member besides).
                    log::debug!(
                        "redmutex: MultiLock member {:?} timed out: {e}",
                        member.name()
                    );
                    if let Err(e) = member.0.take_back() {
                        log::warn!(
                            "redmutex: could not take back a timed-out acquire of MultiLock \
                             member {:?}; if it ran, its hold goes with the thread's last \
                             release of that lock, or expires: {e}",
                            member.name()
                        );
                    }
                    release_quietly(held.drain(..));
                    if wait.is_none() {
                        return Ok(None);
                    }
                    next = 0;
                }
                Err(e) => {
                    release_quietly(held.drain(..));
                    return Err(e);
                }
            }
            if deadline.is_some_and(|d| Instant::now() >= d) && next < self.members.len() {
                release_quietly(held.drain(..));
                return Ok(None);
            }
        }
        if let Some(lease) = lease.filter(|l| Some(*l) != member_lease) {
            for guard in &held {
                if let Err(e) = guard.relet(lease) {
                    release_quietly(held.drain(..));
                    return Err(e);
                }
            }
        }
        Ok(Some(MultiLockGuard::new(held)))
    }
}

/// Releases partial grants, logging failures: the caller reports what made it give up,
/// and a grant that could not be released expires with its lease.
fn release_quietly(held: impl Iterator<Item = Box<dyn Held>>) {
    for guard in held {
        let name = guard.name().to_owned();
        if let Err(e) = guard.release() {
            log::warn!("redmutex: releasing partial grant {name:?} failed: {e}");
        }
    }
}

/// `Ok` when every result is; else [`Error::Members`] with each failure.
pub(super) fn collect_failures(results: impl Iterator<Item = (String, Result<()>)>) -> Result<()> {
    let failures: Vec<(String, Error)> = results
        .filter_map(|(name, r)| r.err().map(|e| (name, e)))
        .collect();
    if failures.is_empty() {
        Ok(())
    } else {
        Err(Error::Members(failures))
    }
}

/// Every member of a [`MultiLock`], held; released when dropped.
///
/// Dropping the guard releases every member and logs failures; call
/// [`unlock`](Self::unlock) to see them. Like every guard it stays on the thread that
/// took it.
///
/// # Examples
///
/// ```no_run
/// let client = redmutex::Client::open("redis://127.0.0.1:6379")?;
/// let both = client.get_multi_lock([
///     client.get_lock("account:1").into(),
///     client.get_lock("account:2").into(),
/// ]);
/// let guard = both.lock()?;
/// // ... move money between the two accounts ...
/// for (name, loss) in guard.losses() {
///     eprintln!("{name} was lost ({loss:?}) during the transfer");
/// }
/// guard.unlock()?;
/// # Ok::<(), redmutex::Error>(())
/// ```
#[must_use = "dropping the guard unlocks every member at once: bind it (`let guard = multi.lock()?;`) for the critical section"]
#[clippy::has_significant_drop]
pub struct MultiLockGuard {
    held: Vec<Box<dyn Held>>,
    /// When every member was held, for the hold-duration metric.
    granted: Instant,
    _not_send: PhantomData<std::sync::MutexGuard<'static, ()>>,
}

impl MultiLockGuard {
    pub(super) fn new(held: Vec<Box<dyn Held>>) -> Self {
        Self {
            held,
            granted: Instant::now(),
            _not_send: PhantomData,
        }
    }

    /// Releases every member, all of them even when some fail.
    ///
    /// # Errors
    ///
    /// [`Error::Members`] with each member that failed (its hold lost:
    /// [`Error::LockLost`]; Redis errors); the others were released. Redisson 4.x stops
    /// at the first failure and leaves the members after it held.
    pub fn unlock(mut self) -> Result<()> {
        metrics::guard_ended(KIND, None, Some(self.granted.elapsed()));
        release_all(std::mem::take(&mut self.held))
    }

    /// Keeps every member held but gives up the guard; release them later on the same
    /// thread with [`MultiLock::unlock`].
    pub fn detach(mut self) {
        metrics::guard_ended(KIND, None, None);
        for held in std::mem::take(&mut self.held) {
            held.detach();
        }
    }

    /// Whether any member's hold is known or presumed lost (see
    /// [`LockGuard::is_lost`]), without asking Redis.
    pub fn is_lost(&self) -> bool {
        self.held.iter().any(|h| h.loss().is_some())
    }

    /// The names of the members that are known or presumed lost, with why.
    pub fn losses(&self) -> Vec<(&str, Loss)> {
        self.held
            .iter()
            .filter_map(|h| h.loss().map(|l| (h.name(), l)))
            .collect()
    }
}

/// Releases every hold and reports every failure.
pub(super) fn release_all(held: Vec<Box<dyn Held>>) -> Result<()> {
    collect_failures(held.into_iter().map(|h| (h.name().to_owned(), h.release())))
}

impl std::fmt::Debug for MultiLockGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.held.iter().map(|h| h.name()).collect();
        f.debug_struct("MultiLockGuard")
            .field("members", &names)
            .field("lost", &self.is_lost())
            .finish()
    }
}

impl Drop for MultiLockGuard {
    fn drop(&mut self) {
        if self.held.is_empty() {
            return;
        }
        metrics::guard_ended(KIND, None, Some(self.granted.elapsed()));
        if let Err(e) = release_all(std::mem::take(&mut self.held)) {
            log::warn!("redmutex: releasing MultiLockGuard on drop: {e}");
        }
    }
}
